/* GEMM through cuBLAS: y[n, m] = x[n, k] · W[m, k]ᵀ (+ bias), f32 output.
 *
 * Row-major y = x·Wᵀ is column-major yᵀ = W·xᵀ with W read transposed, so one
 * cublasGemmEx(T, N) with no copies. cuBLAS wants A and B of one type: for 16-bit
 * weights the activations are rounded to the weight dtype first (as vLLM runs
 * 16-bit models), accumulation stays f32. f32 weights use
 * CUBLAS_COMPUTE_32F_PEDANTIC: true f32 math, never TF32, so f32 results track
 * the CPU reference to rounding and greedy ids match. */
#include "cuda-backend.h"

#include <limits.h>

/* Grows the conversion buffer on the compute stream (stream-ordered, no device
 * synchronisation); the contents need not survive. */
static int reserve_conv(allm_backend_t *be, size_t bytes)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	if (bytes <= c->conv_bytes)
		return 0;
	if (c->conv) {
		CUDA_CHECK(be, cudaFreeAsync(c->conv, c->compute));
		c->conv = NULL;
		c->conv_bytes = 0;
	}
	CUDA_CHECK(be, cudaMallocAsync(&c->conv, bytes, c->compute));
	c->conv_bytes = bytes;
	return 0;
}

int allm_cuda_gemm(allm_backend_t *be, float *y, const float *x, const void *w,
		   const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	const float one = 1.0f, zero = 0.0f;
	int r;
	if (n == 0 || m == 0)
		return 0;
	if (n < 0 || k < 0 || m < 0 || n > INT_MAX || k > INT_MAX || m > INT_MAX)
		return allm_err_set(&be->last_err, -EINVAL,
				    "cuda: gemm %lld x %lld x %lld is outside cuBLAS's int range",
				    (long long)n, (long long)k, (long long)m);
	if (k == 0) { /* an empty sum: y = bias (or 0) */
		CUDA_CHECK(be, cudaMemsetAsync(y, 0, (size_t)n * (size_t)m * sizeof(float), c->compute));
	} else {
		const void *xb = x;
		cudaDataType_t ty = CUDA_R_32F;
		cublasComputeType_t ct = CUBLAS_COMPUTE_32F_PEDANTIC;
		if (dt != ALLM_DTYPE_F32) {
			if ((r = reserve_conv(be, (size_t)n * (size_t)k * 2)))
				return r;
			LAUNCH(be, allm_cuda_convert(c->compute, c->conv, x, dt, n * k));
			xb = c->conv;
			ty = dt == ALLM_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
			ct = CUBLAS_COMPUTE_32F;
		}
		BLAS_CHECK(be, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k,
					    &one, w, ty, (int)k, xb, ty, (int)k, &zero, y, CUDA_R_32F,
					    (int)m, ct, CUBLAS_GEMM_DEFAULT));
	}
	if (bias)
		LAUNCH(be, allm_cuda_bias_add(c->compute, y, bias, dt, n, m));
	return 0;
}
