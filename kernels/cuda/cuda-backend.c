/* The CUDA backend's vtable (DESIGN §4): device memory, pinned host memory for
 * the CPU block pool, one compute stream for every op and one copy stream for
 * swaps, CUDA events to time swaps and prefills, and the error policy: every
 * CUDA/cuBLAS call is checked, an error becomes -errno with "file:line: why" in
 * be->last_err; a sticky error (the context is lost) marks the backend dead so
 * every later call fails with one clear message; nothing aborts.
 *
 * Built into liballm-cuda.so, which the engine dlopen()s (kernels/backend.c);
 * the only exported symbols are allm_backend_cuda_create and the tests' fault
 * hook (allm-cuda.map). */
#include "cuda-backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#define CUBLAS_WS_BYTES ((size_t)32 << 20) /* cuBLAS's advice for Hopper */
#define ATTN_WS_BYTES ((size_t)64 << 20) /* split partials of ~256 decodes x 15 slices */

/* Errors after which the context cannot be used again. */
static bool is_sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorAssert:
	case cudaErrorLaunchTimeout:
	case cudaErrorECCUncorrectable:
	case cudaErrorNvlinkUncorrectable:
	case cudaErrorContextIsDestroyed:
	case cudaErrorTensorMemoryLeak:
		return true;
	default:
		return false;
	}
}

static int errno_of(cudaError_t e)
{
	switch (e) {
	case cudaErrorMemoryAllocation: return -ENOMEM;
	case cudaErrorInvalidValue:
	case cudaErrorInvalidConfiguration:
	case cudaErrorInvalidDevicePointer:
	case cudaErrorInvalidPitchValue: return -EINVAL;
	case cudaErrorNoDevice:
	case cudaErrorInvalidDevice: return -ENODEV;
	case cudaErrorNoKernelImageForDevice: return -ENOEXEC;
	default: return -EIO;
	}
}

static const char *base_name(const char *file)
{
	const char *s = strrchr(file, '/');
	return s ? s + 1 : file;
}

int allm_cuda_fail(allm_backend_t *be, cudaError_t e, const char *what, const char *file,
		   int line)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	if (is_sticky(e)) {
		c->dead = true;
		snprintf(c->dead_msg, sizeof(c->dead_msg),
			 "cuda: device context lost (%s: %s, seen at %s:%d); the CUDA backend is "
			 "unusable until the program restarts",
			 cudaGetErrorName(e), cudaGetErrorString(e), base_name(file), line);
		return allm_err_set(&be->last_err, -EIO, "%s", c->dead_msg);
	}
	(void)cudaGetLastError(); /* clear it: the next call starts clean */
	return allm_err_set(&be->last_err, errno_of(e), "cuda: %.100s at %s:%d: %s (%s)", what,
			    base_name(file), line, cudaGetErrorString(e), cudaGetErrorName(e));
}

int allm_cuda_blas_fail(allm_backend_t *be, cublasStatus_t s, const char *what,
			const char *file, int line)
{
	/* an execution failure may hide a lost context: ask the runtime */
	cudaError_t e = cudaPeekAtLastError();
	if (e != cudaSuccess && is_sticky(e))
		return allm_cuda_fail(be, e, what, file, line);
	return allm_err_set(&be->last_err, s == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO,
			    "cublas: %.100s at %s:%d: %s", what, base_name(file), line,
			    cublasGetStatusString(s));
}

int allm_cuda_launched(allm_backend_t *be, cudaError_t launch, const char *kernel,
		       const char *file, int line)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	if (launch != cudaSuccess)
		return allm_cuda_fail(be, launch, kernel, file, line);
	if (c->inject_after >= 0 && c->inject_after-- == 0) {
		/* a real failing launch through the real error path; kind 1 succeeds
		 * here and faults on the device, caught at the next synchronisation */
		cudaError_t e = allm_cuda_fault(c->compute, c->inject_kind);
		if (e != cudaSuccess)
			return allm_cuda_fail(be, e, "injected fault", file, line);
	}
	return 0;
}

/* Every entry point starts here: a dead backend fails at once. */
#define ALIVE(be) \
	do { \
		if (CUDA_CTX(be)->dead) \
			return allm_err_set(&(be)->last_err, -EIO, "%s", CUDA_CTX(be)->dead_msg); \
	} while (0)

static const char *cu_name(allm_backend_t *be)
{
	return "cuda";
}

static const char *cu_describe(allm_backend_t *be)
{
	return CUDA_CTX(be)->desc;
}

static void cu_destroy(allm_backend_t *be)
{
	if (!be)
		return;
	struct cuda_ctx *c = CUDA_CTX(be);
	if (c) {
		/* errors here are ignored: there is nobody left to tell */
		if (c->compute)
			cudaStreamSynchronize(c->compute);
		if (c->copy)
			cudaStreamSynchronize(c->copy);
		allm_cuda_vmm_fini(be);
		if (c->blas)
			cublasDestroy(c->blas);
		cudaFree(c->blas_ws);
		cudaFree(c->attn_ws);
		cudaFree(c->conv);
		cudaEvent_t *evs[] = {&c->compute_mark, &c->copy_t0, &c->copy_t1, &c->timer_t0,
				      &c->timer_t1};
		for (size_t i = 0; i < ALLM_ARRAY_SIZE(evs); i++)
			if (*evs[i])
				cudaEventDestroy(*evs[i]);
		if (c->compute)
			cudaStreamDestroy(c->compute);
		if (c->copy)
			cudaStreamDestroy(c->copy);
		allm_free(c);
	}
	allm_free(be);
}

static bool cu_supports(allm_backend_t *be, enum allm_backend_op op, enum allm_dtype dt)
{
	return op < ALLM_OP_COUNT && dt < ALLM_DTYPE_COUNT;
}

/* --- memory ------------------------------------------------------------------- */

static int cu_alloc(allm_backend_t *be, size_t bytes, void **ret_ptr)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	void *p = NULL;
	ALIVE(be);
	/* from a chunk up, the VMM arena's (zeroed there): the pages op can move
	 * its memory (elastic memory) */
	int r = allm_cuda_vmm_alloc(be, bytes, &p);
	if (r != -ENOTSUP) {
		if (!r)
			*ret_ptr = p;
		return r;
	}
	CUDA_CHECK(be, cudaMalloc(&p, bytes ? bytes : 1));
	/* zeroed in stream order: every op and copy comes after it */
	cudaError_t e = cudaMemsetAsync(p, 0, bytes, c->compute);
	if (e != cudaSuccess) {
		cudaFree(p);
		return allm_cuda_fail(be, e, "cudaMemsetAsync", __FILE__, __LINE__);
	}
	*ret_ptr = p;
	return 0;
}

static void cu_free(allm_backend_t *be, void *ptr)
{
	/* cudaFree waits for the device, so no op still reads ptr (the arena's
	 * free waits for the streams likewise) */
	if (ptr && !allm_cuda_vmm_free(be, ptr))
		(void)cudaFree(ptr);
}

/* Pinned, so swaps are true async DMA at full PCIe bandwidth; fresh pages from
 * the kernel are already zero. */
static int cu_host_alloc(allm_backend_t *be, size_t bytes, void **ret_ptr)
{
	void *p = NULL;
	ALIVE(be);
	CUDA_CHECK(be, cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
	*ret_ptr = p;
	return 0;
}

static void cu_host_free(allm_backend_t *be, void *ptr)
{
	if (ptr)
		(void)cudaFreeHost(ptr);
}

static int cu_upload(allm_backend_t *be, void *dst_dev, const void *src_host, size_t bytes)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	ALIVE(be);
	CUDA_CHECK(be, cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyDefault, c->compute));
	CUDA_CHECK(be, cudaStreamSynchronize(c->compute));
	return 0;
}

static int cu_download(allm_backend_t *be, void *dst_host, const void *src_dev, size_t bytes)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	ALIVE(be);
	CUDA_CHECK(be, cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDefault, c->compute));
	CUDA_CHECK(be, cudaStreamSynchronize(c->compute));
	return 0;
}

static int cu_copy_async(allm_backend_t *be, void *dst, const void *src, size_t bytes,
			 enum allm_copy_dir dir)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	ALIVE(be);
	if (!c->copy_open) {
		/* the first copy of a batch: wait for the compute queued so far (a swap
		 * out must read K/V the last step wrote), then start the clock */
		CUDA_CHECK(be, cudaEventRecord(c->compute_mark, c->compute));
		CUDA_CHECK(be, cudaStreamWaitEvent(c->copy, c->compute_mark, 0));
		CUDA_CHECK(be, cudaEventRecord(c->copy_t0, c->copy));
		c->copy_open = true;
	}
	CUDA_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->copy));
	return 0;
}

static int cu_copy_wait(allm_backend_t *be, double *ret_seconds)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	float ms = 0.0f;
	if (ret_seconds)
		*ret_seconds = 0.0;
	ALIVE(be);
	if (!c->copy_open)
		return 0;
	c->copy_open = false;
	CUDA_CHECK(be, cudaEventRecord(c->copy_t1, c->copy));
	CUDA_CHECK(be, cudaEventSynchronize(c->copy_t1));
	CUDA_CHECK(be, cudaEventElapsedTime(&ms, c->copy_t0, c->copy_t1));
	if (ret_seconds)
		*ret_seconds = ms * 1e-3;
	return 0;
}

static int cu_pages(allm_backend_t *be, void *ptr, size_t bytes, enum allm_pages_verb verb,
		    size_t *ret_bytes)
{
	ALIVE(be);
	return allm_cuda_vmm_pages(be, ptr, bytes, verb, ret_bytes);
}

static int cu_synchronize(allm_backend_t *be)
{
	ALIVE(be);
	CUDA_CHECK(be, cudaStreamSynchronize(CUDA_CTX(be)->compute));
	return 0;
}

static int cu_mem_info(allm_backend_t *be, size_t *ret_free, size_t *ret_total)
{
	ALIVE(be);
	CUDA_CHECK(be, cudaMemGetInfo(ret_free, ret_total));
	return 0;
}

static int cu_timer_start(allm_backend_t *be)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	ALIVE(be);
	CUDA_CHECK(be, cudaEventRecord(c->timer_t0, c->compute));
	c->timer_open = true;
	return 0;
}

static int cu_timer_stop(allm_backend_t *be, double *ret_seconds)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	float ms = 0.0f;
	*ret_seconds = 0.0;
	ALIVE(be);
	if (!c->timer_open)
		return 0;
	c->timer_open = false;
	CUDA_CHECK(be, cudaEventRecord(c->timer_t1, c->compute));
	CUDA_CHECK(be, cudaEventSynchronize(c->timer_t1));
	CUDA_CHECK(be, cudaEventElapsedTime(&ms, c->timer_t0, c->timer_t1));
	*ret_seconds = ms * 1e-3;
	return 0;
}

/* --- ops --------------------------------------------------------------------------- */

#define S (CUDA_CTX(be)->compute)

static int cu_embedding(allm_backend_t *be, float *y, const void *table, enum allm_dtype dt,
			const int32_t *ids, int64_t n, int64_t dim)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_embedding(S, y, table, dt, ids, n, dim));
	return 0;
}

static int cu_rmsnorm(allm_backend_t *be, float *y, const float *x, const void *w,
		      enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_rmsnorm(S, y, x, w, dt, n, dim, eps));
	return 0;
}

static int cu_layernorm(allm_backend_t *be, float *y, const float *x, const void *w,
			const void *b, enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_layernorm(S, y, x, w, b, dt, n, dim, eps));
	return 0;
}

static int cu_gemm(allm_backend_t *be, float *y, const float *x, const void *w,
		   const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m)
{
	ALIVE(be);
	return allm_cuda_gemm(be, y, x, w, bias, dt, n, k, m);
}

static int cu_rope(allm_backend_t *be, float *q, float *k, const int32_t *pos,
		   const float *inv_freq, int64_t n, int32_t n_heads, int32_t n_kv_heads,
		   int32_t head_dim)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_rope(S, q, k, pos, inv_freq, n, n_heads, n_kv_heads, head_dim));
	return 0;
}

static int cu_silu_mul(allm_backend_t *be, float *y, const float *gate, const float *up,
		       int64_t n)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_silu_mul(S, y, gate, up, n));
	return 0;
}

static int cu_gelu_mul(allm_backend_t *be, float *y, const float *gate, const float *up,
		       int64_t n)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_gelu_mul(S, y, gate, up, n));
	return 0;
}

static int cu_scale(allm_backend_t *be, float *y, const float *x, float s, int64_t n)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_scale(S, y, x, s, n));
	return 0;
}

static int cu_relu(allm_backend_t *be, float *y, const float *x, int64_t n)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_relu(S, y, x, n));
	return 0;
}

static int cu_add(allm_backend_t *be, float *y, const float *a, const float *b, int64_t n)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_add(S, y, a, b, n));
	return 0;
}

static int cu_gather_rows(allm_backend_t *be, float *y, const float *x, const int32_t *rows,
			  int64_t n, int64_t dim)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_gather_rows(S, y, x, rows, n, dim));
	return 0;
}

static int cu_kv_write(allm_backend_t *be, void *kv_pool, const struct allm_kv_layout *lay,
		       int32_t layer, const float *k, const float *v,
		       const struct allm_attn_meta *meta)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_kv_write(S, kv_pool, lay, layer, k, v, meta));
	return 0;
}

static int cu_attention(allm_backend_t *be, float *out, const float *q, const void *kv_pool,
			const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
			float scale, const struct allm_attn_meta *meta)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	struct allm_cuda_attn_plan plan;
	ALIVE(be);
	allm_cuda_attention_plan(lay, n_heads, meta, c->sm_count, c->smem_optin, c->attn_ws_bytes,
				 &plan);
	if (plan.ws_bytes > c->attn_ws_bytes) {
		/* only for contexts longer than shared memory holds in ~15 slices. One
		 * pairing, cudaMalloc / cudaFree, as at setup and destroy: the kernels
		 * queued on the old buffer finish first (cudaFree would wait for the
		 * whole device anyway) */
		CUDA_CHECK(be, cudaStreamSynchronize(c->compute));
		CUDA_CHECK(be, cudaFree(c->attn_ws));
		c->attn_ws = NULL;
		c->attn_ws_bytes = 0;
		CUDA_CHECK(be, cudaMalloc(&c->attn_ws, plan.ws_bytes));
		c->attn_ws_bytes = plan.ws_bytes;
	}
	LAUNCH(be, allm_cuda_attention(S, out, q, kv_pool, lay, layer, n_heads, scale, meta, &plan,
				       c->attn_ws));
	return 0;
}

static int cu_argmax(allm_backend_t *be, int32_t *ret_ids, const float *logits, int64_t n,
		     int64_t vocab)
{
	ALIVE(be);
	LAUNCH(be, allm_cuda_argmax(S, ret_ids, logits, n, vocab));
	return 0;
}

static int cu_topk(allm_backend_t *be, float *ret_vals, int32_t *ret_ids, const float *logits,
		   int64_t n, int64_t vocab, int32_t k)
{
	ALIVE(be);
	if (k < 1 || k > ALLM_TOPK_MAX || k > vocab)
		return allm_err_set(&be->last_err, -EINVAL, "cuda: topk k=%d outside 1..min(%lld, %d)",
				    k, (long long)vocab, ALLM_TOPK_MAX);
	LAUNCH(be, allm_cuda_topk(S, ret_vals, ret_ids, logits, n, vocab, k));
	return 0;
}

#undef S

static const struct allm_backend_i cuda_iface = {
	.version = ALLM_BACKEND_VERSION,
	.name = cu_name,
	.describe = cu_describe,
	.destroy = cu_destroy,
	.supports = cu_supports,
	.alloc = cu_alloc,
	.free = cu_free,
	.host_alloc = cu_host_alloc,
	.host_free = cu_host_free,
	.upload = cu_upload,
	.download = cu_download,
	.copy_async = cu_copy_async,
	.copy_wait = cu_copy_wait,
	.synchronize = cu_synchronize,
	.mem_info = cu_mem_info,
	.embedding = cu_embedding,
	.rmsnorm = cu_rmsnorm,
	.layernorm = cu_layernorm,
	.gemm = cu_gemm,
	.rope = cu_rope,
	.silu_mul = cu_silu_mul,
	.gelu_mul = cu_gelu_mul,
	.scale = cu_scale,
	.relu = cu_relu,
	.add = cu_add,
	.gather_rows = cu_gather_rows,
	.kv_write = cu_kv_write,
	.attention = cu_attention,
	.argmax = cu_argmax,
	.timer_start = cu_timer_start,
	.timer_stop = cu_timer_stop,
	.topk = cu_topk,
	.pages = cu_pages,
};

/* Device set-up; errors go to be->last_err (the caller copies them out). */
static int setup(allm_backend_t *be, int dev, const struct allm_backend_env *env)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	struct cudaDeviceProp prop;
	int n = 0, rt = 0;
	CUDA_CHECK(be, cudaGetDeviceCount(&n));
	if (dev < 0 || dev >= n)
		return allm_err_set(&be->last_err, -ENODEV, "cuda: device %d requested, %d present",
				    dev, n);
	CUDA_CHECK(be, cudaSetDevice(dev));
	CUDA_CHECK(be, cudaGetDeviceProperties(&prop, dev));
	if (prop.major < 8)
		return allm_err_set(&be->last_err, -ENODEV,
				    "cuda: %s is sm_%d%d; this backend needs sm_80 or newer", prop.name,
				    prop.major, prop.minor);
	c->device = dev;
	c->sm_count = prop.multiProcessorCount;
	/* the most dynamic shared memory a block may opt into (99 KB on sm_86/89/120,
	 * 163 KB on sm_80, 227 KB on sm_90), less headroom for the kernels' static
	 * shared memory: the attention kernels size their tiles to it */
	int optin = 0;
	CUDA_CHECK(be, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
	/* tests on a big GPU take a small card's path: ALLM_CUDA_SMEM_OPTIN=101376 is
	 * what an sm_86/89/120 card reports (env->cuda_smem_optin) */
	if (env && env->cuda_smem_optin > 0 && env->cuda_smem_optin < optin)
		optin = env->cuda_smem_optin;
	c->smem_optin = (size_t)optin - 1024;
	/* non-blocking: neither stream synchronises with the legacy default stream */
	CUDA_CHECK(be, cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
	CUDA_CHECK(be, cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
	CUDA_CHECK(be, cudaEventCreateWithFlags(&c->compute_mark, cudaEventDisableTiming));
	CUDA_CHECK(be, cudaEventCreate(&c->copy_t0));
	CUDA_CHECK(be, cudaEventCreate(&c->copy_t1));
	CUDA_CHECK(be, cudaEventCreate(&c->timer_t0));
	CUDA_CHECK(be, cudaEventCreate(&c->timer_t1));
	BLAS_CHECK(be, cublasCreate(&c->blas));
	BLAS_CHECK(be, cublasSetStream(c->blas, c->compute));
	CUDA_CHECK(be, cudaMalloc(&c->blas_ws, CUBLAS_WS_BYTES));
	c->blas_ws_bytes = CUBLAS_WS_BYTES;
	BLAS_CHECK(be, cublasSetWorkspace(c->blas, c->blas_ws, c->blas_ws_bytes));
	CUDA_CHECK(be, cudaMalloc(&c->attn_ws, ATTN_WS_BYTES));
	c->attn_ws_bytes = ATTN_WS_BYTES;
	CUDA_CHECK(be, allm_cuda_attention_init(c->smem_optin));
	/* one real launch: a module without code for this GPU fails here, clearly */
	cudaError_t e = cudaMemsetAsync(c->attn_ws, 0, sizeof(float), c->compute);
	if (e == cudaSuccess)
		e = allm_cuda_add(c->compute, c->attn_ws, c->attn_ws, c->attn_ws, 1);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->compute);
	if (e == cudaErrorNoKernelImageForDevice)
		return allm_err_set(&be->last_err, -ENOEXEC,
				    "cuda: this module has no code for %s (sm_%d%d); rebuild with "
				    "-Dgpu_archs=%d%d", prop.name, prop.major, prop.minor, prop.major,
				    prop.minor);
	CUDA_CHECK(be, e);
	cudaRuntimeGetVersion(&rt);
	/* after the first launch: the arena's memory is zeroed on the compute stream */
	char vmm[96];
	int r = allm_cuda_vmm_init(be, dev, env && env->cuda_no_vmm, vmm, sizeof(vmm));
	if (r)
		return r;
	/* the daemon logs this line once: where VMM is missing, elastic memory
	 * keeps the single cudaMalloc pool, and the line says so */
	snprintf(c->desc, sizeof(c->desc), "cuda:%d %.120s (sm_%d%d, %d SMs, %.1f GiB, runtime %d.%d, %s)",
		 dev, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
		 prop.totalGlobalMem / 1073741824.0, rt / 1000, (rt % 1000) / 10,
		 c->vmm ? vmm : "no VMM");
	if (!c->vmm)
		snprintf(c->desc + strlen(c->desc), sizeof(c->desc) - strlen(c->desc),
			 " [%s: elastic memory keeps one cudaMalloc pool]", vmm);
	return 0;
}

EXPORT int allm_backend_cuda_create(const struct allm_backend_opts *opts, allm_backend_t **ret,
				    struct allm_err *err)
{
	allm_backend_t *be = allm_calloc(1, sizeof(*be));
	struct cuda_ctx *c = allm_calloc(1, sizeof(*c));
	int r;
	if (!be || !c) {
		allm_free(be);
		allm_free(c);
		return allm_err_set(err, -ENOMEM, "cuda backend: out of memory");
	}
	be->iface = &cuda_iface;
	be->ctx = c;
	be->device_is_host = false;
	c->inject_after = -1;
	if ((r = setup(be, opts ? opts->device_index : 0, opts ? opts->env : NULL))) {
		allm_err_set(err, r, "%s", be->last_err.msg);
		cu_destroy(be);
		return r;
	}
	*ret = be;
	return 0;
}

/* For tests: after `after_launches` more kernel launches, inject a fault of
 * `kind` (0: invalid launch configuration, non-sticky; 1: illegal address,
 * sticky). A negative count disarms it. Returns 0, or -EINVAL for another
 * backend. */
EXPORT int allm_cuda_debug_inject(allm_backend_t *be, int kind, int64_t after_launches)
{
	if (!be || be->iface != &cuda_iface)
		return -EINVAL;
	CUDA_CTX(be)->inject_kind = kind;
	CUDA_CTX(be)->inject_after = after_launches;
	return 0;
}
