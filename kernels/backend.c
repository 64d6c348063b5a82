/* Backend selection at run time (DESIGN §4): "cpu", "cuda", "auto" or
 * "sim:PROFILE" (the simulated device, kernels/sim). The CUDA
 * backend is a module loaded with dlopen() only after the driver answers, so a
 * binary built with CUDA still starts on a machine without a GPU. */
#include "backend.h"
#include "sim/sim-backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define CUDA_MODULE_NAME "liballm-cuda.so"

/* The loaded CUDA module. Never dlclose()d: its static CUDA runtime registers
 * exit handlers and driver callbacks that must outlive every backend. */
static void *cuda_module;

/* Why no CUDA device can be used here, or NULL when one can. Never links libcuda:
 * the driver is probed with dlopen so the stub in /usr/local/cuda never binds.
 * RTLD_NODELETE keeps an initialised driver mapped for the module's runtime. */
static const char *cuda_unusable_reason(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h)
		return "no NVIDIA driver (libcuda.so.1 not found)";
	int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	int (*cu_count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
	int n = 0;
	const char *why = NULL;
	if (!cu_init || !cu_count)
		why = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
	else if (cu_init(0) != 0)
		why = "cuInit failed (driver present but unusable)";
	else if (cu_count(&n) != 0 || n <= 0)
		why = "no CUDA device";
	dlclose(h);
	return why;
}

/* Tries to dlopen the module at path; keeps why the first one that exists failed.
 * The usual reason is a library the module needs (cuBLAS, the C++ runtime) that the
 * loader cannot find: that library is named, with what to do about it. */
static void *try_module(const char *path, char *why, size_t why_len)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h || access(path, F_OK) != 0 || why[0])
		return h;
	const char *e = dlerror();
	e = e ? e : "unknown dlopen error";
	/* "[<module>: ]<lib>: cannot open shared object file: No such file or directory" */
	const char *tail = strstr(e, ": cannot open shared object file");
	const char *lib = tail;
	while (lib && lib > e && !(lib[-1] == ' ' && lib - 1 > e && lib[-2] == ':'))
		lib--;
	if (tail && tail > lib)
		snprintf(why, why_len,
			 "the CUDA backend module %s needs %.*s, which the dynamic loader cannot find "
			 "(install the CUDA toolkit's runtime libraries, or add their directory to "
			 "LD_LIBRARY_PATH)",
			 path, (int)(tail - lib), lib);
	else
		snprintf(why, why_len, "cannot load the CUDA backend module: %s", e);
	return NULL;
}

void allm_backend_env_read(struct allm_backend_env *ret)
{
	memset(ret, 0, sizeof(*ret));
	const char *e = getenv("ALLM_CUDA_MODULE");
	ret->cuda_module = e && *e ? e : NULL;
	e = getenv("ALLM_CUDA_SMEM_OPTIN");
	ret->cuda_smem_optin = e && atoi(e) > 0 ? atoi(e) : 0;
	e = getenv("ALLM_CUDA_VMM");
	ret->cuda_no_vmm = e && !strcmp(e, "0");
	e = getenv("ALLM_OPENBLAS");
	ret->openblas = e && *e ? e : NULL;
	e = getenv("ALLM_QB_SCALES");
	ret->qb_scales = e && !strcmp(e, "gather") ? 1 : e && !strcmp(e, "loads") ? 2 : 0;
	e = getenv("ALLM_QB_R8");
	ret->qb_r8_off = e && !strcmp(e, "off");
}

/* Loads the CUDA module: $ALLM_CUDA_MODULE (env->cuda_module), else beside the executable, else the
 * build tree this binary came from, else the installed libdir. 0; -ENOEXEC (found
 * but it does not load: why says which library is missing), -ENOENT (not found),
 * -ENOSYS (this build has none). */
static int load_cuda_module(const char *env, char *why, size_t why_len)
{
	char path[PATH_MAX + 32];
	why[0] = 0;
	if (cuda_module)
		return 0;
	if (env && env[0]) {
		cuda_module = try_module(env, why, why_len);
		if (!cuda_module) {
			if (why[0])
				return -ENOEXEC;
			snprintf(why, why_len, "ALLM_CUDA_MODULE=%s: no such file", env);
			return -ENOENT;
		}
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			snprintf(path, sizeof(path), "%s/%s", exe, CUDA_MODULE_NAME);
			cuda_module = try_module(path, why, why_len);
		}
	}
#ifdef ALLM_CUDA_BUILD_DIR
	if (!cuda_module)
		cuda_module = try_module(ALLM_CUDA_BUILD_DIR "/" CUDA_MODULE_NAME, why, why_len);
#endif
#ifdef ALLM_CUDA_LIBDIR
	if (!cuda_module)
		cuda_module = try_module(ALLM_CUDA_LIBDIR "/" CUDA_MODULE_NAME, why, why_len);
#endif
	if (cuda_module)
		return 0;
	if (why[0])
		return -ENOEXEC; /* found, but it does not load */
#ifdef ALLM_CUDA_BUILD_DIR
	snprintf(why, why_len, "the CUDA backend module (%s) was not found beside the "
		 "executable, in the build tree or in the libdir; set ALLM_CUDA_MODULE",
		 CUDA_MODULE_NAME);
	return -ENOENT;
#else
	snprintf(why, why_len, "this build has no CUDA backend module (built without nvcc "
		 "or with -Dcuda=disabled)");
	return -ENOSYS;
#endif
}

void *allm_backend_cuda_symbol(const char *name)
{
	return cuda_module ? dlsym(cuda_module, name) : NULL;
}

/* Creates the CUDA backend, or says why not in why (and err). */
static int cuda_create(const struct allm_backend_opts *opts, allm_backend_t **ret, char *why,
		       size_t why_len, struct allm_err *err)
{
	const char *no_dev = cuda_unusable_reason();
	if (no_dev) {
		snprintf(why, why_len, "%s", no_dev);
		return allm_err_set(err, -ENODEV, "%s", why);
	}
	int lr = load_cuda_module(opts && opts->env ? opts->env->cuda_module : NULL, why, why_len);
	if (lr)
		return allm_err_set(err, lr, "%s", why);
	allm_backend_create_fn create = (allm_backend_create_fn)dlsym(cuda_module, ALLM_CUDA_ENTRY);
	if (!create) {
		snprintf(why, why_len, "the CUDA module has no %s", ALLM_CUDA_ENTRY);
		return allm_err_set(err, -ENOEXEC, "%s", why);
	}
	allm_backend_t *be = NULL;
	struct allm_err e2 = {{0}};
	int r = create(opts, &be, &e2);
	if (!r && be->iface->version != ALLM_BACKEND_VERSION) {
		snprintf(e2.msg, sizeof(e2.msg), "the CUDA module implements backend version %u, "
			 "this program needs %u (stale build?)", be->iface->version,
			 ALLM_BACKEND_VERSION);
		allm_backend_destroy(be);
		r = -ENOEXEC;
	}
	if (r) {
		snprintf(why, why_len, "%.300s", e2.msg);
		return allm_err_set(err, r, "%s", e2.msg);
	}
	*ret = be;
	return 0;
}

int allm_backend_create(const char *device, const struct allm_backend_opts *opts,
			allm_backend_t **ret, char *ret_note, size_t note_len,
			struct allm_err *err)
{
	char why[400];
	if (ret_note && note_len)
		ret_note[0] = 0;
	if (!device || !strcmp(device, "cpu"))
		return allm_backend_cpu_create(opts, ret, err);
	if (!strcmp(device, "cuda")) {
		int r = cuda_create(opts, ret, why, sizeof(why), err);
		return r ? allm_err_set(err, r, "--device cuda: %s", why) : 0;
	}
	if (!strcmp(device, "auto")) {
		if (cuda_create(opts, ret, why, sizeof(why), NULL) == 0)
			return 0;
		if (ret_note && note_len)
			snprintf(ret_note, note_len, "device auto: using cpu (%s)", why);
		return allm_backend_cpu_create(opts, ret, err);
	}
	if (!strncmp(device, "sim:", 4))
		return allm_backend_sim_create(device + 4, opts, ret, err);
	return allm_err_set(err, -EINVAL, "unknown device '%s' (expected auto, cpu, cuda or "
			    "sim:PROFILE)", device);
}

double allm_backend_clock(allm_backend_t *be)
{
	return be && be->simulated ? allm_sim_now(be) : allm_now();
}

void allm_backend_host_step(allm_backend_t *be)
{
	if (be && be->simulated)
		allm_sim_host_step(be);
}

double allm_backend_charge_disk(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs)
{
	return be && be->simulated ? allm_sim_charge_disk(be, write, bytes, runs) : 0;
}

double allm_backend_disk_seconds(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs)
{
	return be && be->simulated ? allm_sim_disk_seconds(be, write, bytes, runs) : 0;
}

const struct allm_sim_disk_i *allm_backend_sim_disk(allm_backend_t *be)
{
	return be && be->simulated ? allm_sim_disk() : NULL;
}

void allm_backend_clock_wait_until(allm_backend_t *be, double t)
{
	if (be && be->simulated) {
		allm_sim_advance_to(be, t);
		return;
	}
	double wait = t - allm_now();
	if (wait > 0) {
		struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
		nanosleep(&ts, NULL);
	}
}

void allm_backend_destroy(allm_backend_t *be)
{
	if (be)
		be->iface->destroy(be);
}

/* --- top-k on the host ----------------------------------------------------------- */

struct topk_item {
	float v;
	int32_t id;
};

/* a ranks before b: larger value, then lower id. -0.0 == +0.0 under ==. */
static inline bool topk_before(struct topk_item a, struct topk_item b)
{
	return a.v > b.v || (a.v == b.v && a.id < b.id);
}

/* Min-heap on rank (the worst kept item at the root). */
static void heap_down(struct topk_item *h, int32_t n, int32_t i)
{
	for (;;) {
		int32_t l = 2 * i + 1, r = l + 1, w = i;
		if (l < n && topk_before(h[w], h[l]))
			w = l;
		if (r < n && topk_before(h[w], h[r]))
			w = r;
		if (w == i)
			return;
		struct topk_item t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

void allm_topk_host(const float *row, int64_t vocab, int32_t k, float *ret_vals,
		    int32_t *ret_ids, void *scratch)
{
	struct topk_item *h = scratch;
	int32_t n = 0;
	for (int64_t j = 0; j < vocab; j++) {
#ifdef __SSE2__
		/* Once the heap is full, an item enters only if it ranks before the
		 * root; its id is past every kept one, so that is value > root's
		 * (never for a NaN, on either side). 16 values at a time skip the
		 * many that do not: the scan of a 32k row went from 32 to a few us. */
		if (n == k && k > 0) {
			const __m128 thr = _mm_set1_ps(h[0].v);
			while (j + 16 <= vocab) {
				const float *r = row + j;
				__m128 gt = _mm_or_ps(
					_mm_or_ps(_mm_cmpgt_ps(_mm_loadu_ps(r), thr),
						  _mm_cmpgt_ps(_mm_loadu_ps(r + 4), thr)),
					_mm_or_ps(_mm_cmpgt_ps(_mm_loadu_ps(r + 8), thr),
						  _mm_cmpgt_ps(_mm_loadu_ps(r + 12), thr)));
				if (_mm_movemask_ps(gt))
					break; /* one of them may enter: one at a time */
				j += 16;
			}
			if (j >= vocab)
				break;
		}
#endif
		struct topk_item it = {row[j], (int32_t)j};
		if (n < k) {
			/* sift up */
			int32_t i = n++;
			h[i] = it;
			while (i > 0 && topk_before(h[(i - 1) / 2], h[i])) {
				struct topk_item t = h[i];
				h[i] = h[(i - 1) / 2];
				h[(i - 1) / 2] = t;
				i = (i - 1) / 2;
			}
		} else if (topk_before(it, h[0])) {
			h[0] = it;
			heap_down(h, n, 0);
		}
	}
	/* pop the worst to the back: the array ends up best first */
	for (int32_t m = n; m > 1; m--) {
		struct topk_item t = h[0];
		h[0] = h[m - 1];
		h[m - 1] = t;
		heap_down(h, m - 1, 0);
	}
	for (int32_t i = 0; i < n; i++) {
		ret_vals[i] = h[i].v;
		ret_ids[i] = h[i].id;
	}
}
