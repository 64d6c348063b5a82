/* Backend selection at run time (DESIGN §4): "cpu", "cuda" or "auto". The CUDA
 * backend is a module loaded with dlopen() only after the driver answers, so a
 * binary built with CUDA still starts on a machine without a GPU. */
#include "backend.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Why no CUDA device can be used here, or NULL when one can. Never links libcuda:
 * the driver is probed with dlopen so the stub in /usr/local/cuda never binds. */
static const char *cuda_unusable_reason(char *buf, size_t len)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
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
	if (!why) {
		snprintf(buf, len, "the CUDA backend module is not built into this binary");
		why = buf;
	}
	return why;
}

int allm_backend_create(const char *device, const struct allm_backend_opts *opts,
			allm_backend_t **ret, char *ret_note, size_t note_len,
			struct allm_err *err)
{
	char why_buf[160];
	if (ret_note && note_len)
		ret_note[0] = 0;
	if (!device || !strcmp(device, "cpu"))
		return allm_backend_cpu_create(opts, ret, err);
	if (!strcmp(device, "cuda")) {
		const char *why = cuda_unusable_reason(why_buf, sizeof(why_buf));
		return allm_err_set(err, -ENODEV, "--device cuda: %s", why);
	}
	if (!strcmp(device, "auto")) {
		const char *why = cuda_unusable_reason(why_buf, sizeof(why_buf));
		if (ret_note && note_len)
			snprintf(ret_note, note_len, "device auto: using cpu (%s)", why);
		return allm_backend_cpu_create(opts, ret, err);
	}
	return allm_err_set(err, -EINVAL, "unknown device '%s' (expected auto, cpu or cuda)",
			    device);
}

void allm_backend_destroy(allm_backend_t *be)
{
	if (be)
		be->iface->destroy(be);
}
