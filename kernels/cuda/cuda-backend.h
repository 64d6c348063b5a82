/* Private to the CUDA backend module: its state, the error-check macros, and the
 * kernel launchers the C11 host code (cuda-backend.c, cuda-gemm.c) calls. nvcc
 * compiles this header too, hence the extern "C" guards and no GNU extensions.
 *
 * Every launcher enqueues on `s` and returns the launch status
 * (cudaGetLastError()); errors of the kernel's execution surface at the next
 * synchronising call, where the same check macros turn them into -errno. */
#ifndef ALLM_CUDA_BACKEND_H
#define ALLM_CUDA_BACKEND_H

#include "backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cuda_ctx {
	int device;
	int sm_count;
	size_t smem_optin; /* largest dynamic shared memory a block may opt into */
	cudaStream_t compute; /* every op, in program order */
	cudaStream_t copy; /* swaps: copy_async / copy_wait */
	cudaEvent_t compute_mark; /* the copy stream waits on it: swaps see finished K/V */
	cudaEvent_t copy_t0, copy_t1; /* bracket the copies since the last copy_wait */
	bool copy_open; /* copy_t0 recorded, copy_wait not yet called */
	cudaEvent_t timer_t0, timer_t1; /* timer_start / timer_stop on the compute stream */
	bool timer_open;
	cublasHandle_t blas;
	void *blas_ws; /* cuBLAS workspace, fixed: no allocation inside a GEMM */
	size_t blas_ws_bytes;
	void *conv; /* GEMM input x[n, k] converted to the weight dtype */
	size_t conv_bytes;
	void *attn_ws; /* split-context attention partials */
	size_t attn_ws_bytes;
	bool dead; /* a sticky error corrupted the context: every call fails */
	char dead_msg[300];
	int64_t inject_after; /* launches left before an injected failure; < 0: off */
	int inject_kind; /* 0: invalid launch (non-sticky), 1: illegal address (sticky) */
	char desc[384];
	struct cuda_vmm *vmm; /* the VMM arena (cuda-vmm.c); NULL: every allocation a cudaMalloc */
};

#define CUDA_CTX(be) ((struct cuda_ctx *)(be)->ctx)

/* The module's exports (allm-cuda.map): the entry point kernels/backend.c looks
 * up, and the fault hook of the GPU tests (see cuda-backend.c). */
int allm_backend_cuda_create(const struct allm_backend_opts *opts, allm_backend_t **ret,
			     struct allm_err *err);
int allm_cuda_debug_inject(allm_backend_t *be, int kind, int64_t after_launches);

/* Records a failed CUDA call in be->last_err ("cuda: <call> at file:line: <why>")
 * and returns it as -errno; a sticky error also marks the backend dead. */
int allm_cuda_fail(allm_backend_t *be, cudaError_t e, const char *what, const char *file,
		   int line);
int allm_cuda_blas_fail(allm_backend_t *be, cublasStatus_t s, const char *what,
			const char *file, int line);
/* After a launcher: its status (and a pending injected fault) as 0 / -errno. */
int allm_cuda_launched(allm_backend_t *be, cudaError_t launch, const char *kernel,
		       const char *file, int line);

/* `return` from the calling function on failure. */
#define CUDA_CHECK(be, call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
			return allm_cuda_fail((be), e_, #call, __FILE__, __LINE__); \
	} while (0)
#define BLAS_CHECK(be, call) \
	do { \
		cublasStatus_t s_ = (call); \
		if (s_ != CUBLAS_STATUS_SUCCESS) \
			return allm_cuda_blas_fail((be), s_, #call, __FILE__, __LINE__); \
	} while (0)
/* A launcher call: `return` its error as -errno. */
#define LAUNCH(be, call) \
	do { \
		int r_ = allm_cuda_launched((be), (call), #call, __FILE__, __LINE__); \
		if (r_) \
			return r_; \
	} while (0)

/* --- launchers (cuda-elementwise.cu) ----------------------------------------- */
cudaError_t allm_cuda_embedding(cudaStream_t s, float *y, const void *table, enum allm_dtype dt,
				const int32_t *ids, int64_t n, int64_t dim);
cudaError_t allm_cuda_rmsnorm(cudaStream_t s, float *y, const float *x, const void *w,
			      enum allm_dtype dt, int64_t n, int64_t dim, float eps);
cudaError_t allm_cuda_layernorm(cudaStream_t s, float *y, const float *x, const void *w,
				const void *b, enum allm_dtype dt, int64_t n, int64_t dim,
				float eps);
cudaError_t allm_cuda_rope(cudaStream_t s, float *q, float *k, const int32_t *pos,
			   const float *inv_freq, int64_t n, int32_t n_heads, int32_t n_kv_heads,
			   int32_t head_dim);
cudaError_t allm_cuda_silu_mul(cudaStream_t s, float *y, const float *gate, const float *up,
			       int64_t n);
cudaError_t allm_cuda_relu(cudaStream_t s, float *y, const float *x, int64_t n);
cudaError_t allm_cuda_gelu_mul(cudaStream_t s, float *y, const float *gate, const float *up,
			       int64_t n);
cudaError_t allm_cuda_scale(cudaStream_t s, float *y, const float *x, float k, int64_t n);
cudaError_t allm_cuda_add(cudaStream_t s, float *y, const float *a, const float *b, int64_t n);
/* y must not overlap x */
cudaError_t allm_cuda_gather_rows(cudaStream_t s, float *y, const float *x, const int32_t *rows,
				  int64_t n, int64_t dim);
/* y[n, m] += bias[m] */
cudaError_t allm_cuda_bias_add(cudaStream_t s, float *y, const void *bias, enum allm_dtype dt,
			       int64_t n, int64_t m);
/* dst[n] (dt, f16 or bf16) = src[n] rounded to nearest even */
cudaError_t allm_cuda_convert(cudaStream_t s, void *dst, const float *src, enum allm_dtype dt,
			      int64_t n);

/* --- launchers (cuda-attention.cu) ------------------------------------------- */
cudaError_t allm_cuda_kv_write(cudaStream_t s, void *pool, const struct allm_kv_layout *lay,
			       int32_t layer, const float *k, const float *v,
			       const struct allm_attn_meta *meta);
/* How one attention call runs: the tiled prefill kernel (a batch where some
 * sequence brings several tokens), or the split-context kernel (decodes: each
 * token's context cut into n_splits parts of `part` keys, merged afterwards). */
struct allm_cuda_attn_plan {
	bool prefill;
	int32_t prefill_bk; /* keys per K/V tile of the prefill kernel: what the device's
			     * shared memory holds for this head_dim (32 or 16), 0: none */
	int32_t n_splits;
	int32_t part; /* keys per split */
	size_t ws_bytes; /* workspace for the split partials (0 when n_splits == 1) */
};
/* Plans a call; n_sms and smem_optin describe the device, ws_cap is the
 * workspace at hand (the plan uses fewer splits rather than more memory, unless
 * a slice would not fit in shared memory). */
void allm_cuda_attention_plan(const struct allm_kv_layout *lay, int32_t n_heads,
			      const struct allm_attn_meta *meta, int n_sms, size_t smem_optin,
			      size_t ws_cap, struct allm_cuda_attn_plan *ret);
/* ws: at least plan->ws_bytes of device memory. */
cudaError_t allm_cuda_attention(cudaStream_t s, float *out, const float *q, const void *pool,
				const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
				float scale, const struct allm_attn_meta *meta,
				const struct allm_cuda_attn_plan *plan, void *ws);
/* Opts the attention kernels into the shared memory they need; once per device.
 * cudaErrorInvalidValue when smem_optin cannot hold a prefill tile. */
cudaError_t allm_cuda_attention_init(size_t smem_optin);

/* --- launchers (cuda-sampling.cu) -------------------------------------------- */
cudaError_t allm_cuda_argmax(cudaStream_t s, int32_t *ret_ids, const float *logits, int64_t n,
			     int64_t vocab);
cudaError_t allm_cuda_topk(cudaStream_t s, float *ret_vals, int32_t *ret_ids,
			   const float *logits, int64_t n, int64_t vocab, int32_t k);
/* The fault-injection hook: kind 0 launches with an invalid block size (a
 * non-sticky launch error), kind 1 writes through a wild pointer (a sticky
 * illegal-address error at the next synchronisation). */
cudaError_t allm_cuda_fault(cudaStream_t s, int kind);

/* --- cuda-vmm.c: the VMM arena of device memory ------------------------------ */
/* Sets up the arena when the device and driver support VMM and no_vmm
 * (ALLM_CUDA_VMM=0, struct allm_backend_env) is false; otherwise leaves it off
 * (every allocation a cudaMalloc). *why says which, for describe(). -errno only
 * when out of host memory. */
int allm_cuda_vmm_init(allm_backend_t *be, int dev, bool no_vmm, char *why, size_t why_len);
/* Frees every range left and the arena (destroy). */
void allm_cuda_vmm_fini(allm_backend_t *be);
/* An allocation of the arena, every chunk mapped and zeroed on the compute
 * stream; -ENOTSUP when it is not the arena's to make (off, or smaller than a
 * chunk: then a cudaMalloc). */
int allm_cuda_vmm_alloc(allm_backend_t *be, size_t bytes, void **ret_ptr);
/* Frees ptr when the arena made it (true); false: not the arena's. */
bool allm_cuda_vmm_free(allm_backend_t *be, void *ptr);
/* The pages op (backend.h, version 5) on a range of one arena allocation;
 * -ENOTSUP for memory the arena did not make. */
int allm_cuda_vmm_pages(allm_backend_t *be, void *ptr, size_t bytes, enum allm_pages_verb verb,
			size_t *ret_bytes);
/* Bytes of chunks mapped now, every allocation of the arena. */
size_t allm_cuda_vmm_mapped(allm_backend_t *be);

/* --- cuda-gemm.c --------------------------------------------------------------- */
int allm_cuda_gemm(allm_backend_t *be, float *y, const float *x, const void *w,
		   const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m);

#ifdef __cplusplus
}
#endif

#endif
