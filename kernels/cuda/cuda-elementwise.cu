// Row-wise and element-wise ops: embedding, RMSNorm, LayerNorm, RoPE, SiLU·mul,
// ReLU, add, gather_rows, bias add, f32 -> f16/bf16 conversion. Same math as the
// CPU reference (kernels/cpu/cpu-ref.c), f32 throughout; only reduction orders
// differ (tree sums instead of a running sum).
#include "cuda-common.cuh"

// y[n, dim] = table[ids[i], :]; one block per row.
template <typename T>
__global__ void embedding_kernel(float *y, const T *table, const int32_t *ids, int64_t dim)
{
	int64_t i = blockIdx.x;
	const size_t base = (size_t)ids[i] * (size_t)dim; // ids range-checked by the caller
	for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
		y[i * dim + j] = ld(table, base + j);
}

// Threads per row-reduction block: a full block only when the row is long.
static inline int row_threads(int64_t dim)
{
	return dim >= 2048 ? 1024 : dim >= 512 ? 256 : dim >= 128 ? 128 : 32;
}

// y = x / rms(x) * w, one block per row; in place (y == x) is fine: every
// element is read in the first pass before the second writes it.
template <typename T>
__global__ void rmsnorm_kernel(float *y, const float *x, const T *w, int64_t dim, float eps)
{
	__shared__ float red[32];
	const float *xr = x + blockIdx.x * dim; // (dim)
	float ss = 0.0f;
	for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
		ss = fmaf(xr[j], xr[j], ss);
	ss = block_sum(ss, red);
	float inv = 1.0f / sqrtf(ss / (float)dim + eps);
	for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
		y[blockIdx.x * dim + j] = xr[j] * inv * ld(w, j);
}

// Two-pass mean / variance like the reference; w, b may be NULL.
template <typename T>
__global__ void layernorm_kernel(float *y, const float *x, const T *w, const T *b, int64_t dim,
				 float eps)
{
	__shared__ float red[32];
	const float *xr = x + blockIdx.x * dim; // (dim)
	float s = 0.0f;
	for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
		s += xr[j];
	float mean = block_sum(s, red) / (float)dim;
	float v = 0.0f;
	for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
		float d = xr[j] - mean;
		v = fmaf(d, d, v);
	}
	float inv = 1.0f / sqrtf(block_sum(v, red) / (float)dim + eps);
	for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
		float o = (xr[j] - mean) * inv;
		if (w)
			o *= ld(w, j);
		if (b)
			o += ld(b, j);
		y[blockIdx.x * dim + j] = o;
	}
}

// Rotate-half RoPE; one thread per (token, head of q then k, pair i < head_dim/2).
// The angle is formed in double as on the host, so long positions keep precision.
__global__ void rope_kernel(float *q, float *k, const int32_t *pos, const float *inv_freq,
			    int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim)
{
	const int32_t half = head_dim / 2, hh = n_heads + n_kv_heads;
	const int64_t total = n * hh * half;
	for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
	     e += (int64_t)gridDim.x * blockDim.x) {
		int32_t i = (int32_t)(e % half);
		int64_t th = e / half;
		int32_t h = (int32_t)(th % hh);
		int64_t t = th / hh;
		float *r = h < n_heads ? q + (t * n_heads + h) * head_dim
				       : k + (t * n_kv_heads + (h - n_heads)) * head_dim;
		double sd, cd;
		sincos((double)pos[t] * (double)inv_freq[i], &sd, &cd);
		float cs = (float)cd, sn = (float)sd;
		float a = r[i], b = r[i + half];
		r[i] = a * cs - b * sn;
		r[i + half] = b * cs + a * sn;
	}
}

__global__ void silu_mul_kernel(float *y, const float *g, const float *u, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float x = g[i];
		y[i] = x / (1.0f + expf(-x)) * u[i];
	}
}

// GELU, tanh approximation, gating up (Gemma's MLP)
__global__ void gelu_mul_kernel(float *y, const float *g, const float *u, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float x = g[i];
		y[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))) * u[i];
	}
}

__global__ void scale_kernel(float *y, const float *x, float s, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		y[i] = x[i] * s;
}

__global__ void relu_kernel(float *y, const float *x, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void add_kernel(float *y, const float *a, const float *b, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		y[i] = a[i] + b[i];
}

// One block per output row.
__global__ void gather_rows_kernel(float *y, const float *x, const int32_t *rows, int64_t dim)
{
	const float *src = x + (int64_t)rows[blockIdx.x] * dim;
	for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
		y[blockIdx.x * dim + j] = src[j];
}

template <typename T>
__global__ void bias_add_kernel(float *y, const T *bias, int64_t n, int64_t m)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * m;
	     i += (int64_t)gridDim.x * blockDim.x)
		y[i] += ld(bias, i % m);
}

template <typename T> __global__ void convert_kernel(T *dst, const float *src, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		dst[i] = st<T>(src[i]);
}

// Rows go in grid.x (up to 2^31 - 1); zero rows launch nothing.
#define ROWS_OK(n) ((n) > 0 && (n) <= 0x7fffffffLL)

extern "C" cudaError_t allm_cuda_embedding(cudaStream_t s, float *y, const void *table,
					   enum allm_dtype dt, const int32_t *ids, int64_t n,
					   int64_t dim)
{
	if (n == 0 || dim == 0)
		return cudaSuccess;
	if (!ROWS_OK(n))
		return cudaErrorInvalidValue;
	return dispatch_dtype(dt, [&](auto tag) {
		using T = decltype(tag);
		embedding_kernel<T><<<(unsigned)n, row_threads(dim), 0, s>>>(y, (const T *)table, ids, dim);
		return cudaGetLastError();
	});
}

extern "C" cudaError_t allm_cuda_rmsnorm(cudaStream_t s, float *y, const float *x, const void *w,
					 enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	if (n == 0)
		return cudaSuccess;
	if (!ROWS_OK(n) || dim <= 0)
		return cudaErrorInvalidValue;
	return dispatch_dtype(dt, [&](auto tag) {
		using T = decltype(tag);
		rmsnorm_kernel<T><<<(unsigned)n, row_threads(dim), 0, s>>>(y, x, (const T *)w, dim, eps);
		return cudaGetLastError();
	});
}

extern "C" cudaError_t allm_cuda_layernorm(cudaStream_t s, float *y, const float *x,
					   const void *w, const void *b, enum allm_dtype dt,
					   int64_t n, int64_t dim, float eps)
{
	if (n == 0)
		return cudaSuccess;
	if (!ROWS_OK(n) || dim <= 0)
		return cudaErrorInvalidValue;
	return dispatch_dtype(dt, [&](auto tag) {
		using T = decltype(tag);
		layernorm_kernel<T><<<(unsigned)n, row_threads(dim), 0, s>>>(y, x, (const T *)w,
									   (const T *)b, dim, eps);
		return cudaGetLastError();
	});
}

extern "C" cudaError_t allm_cuda_rope(cudaStream_t s, float *q, float *k, const int32_t *pos,
				      const float *inv_freq, int64_t n, int32_t n_heads,
				      int32_t n_kv_heads, int32_t head_dim)
{
	int64_t total = n * (n_heads + n_kv_heads) * (int64_t)(head_dim / 2);
	if (total <= 0)
		return cudaSuccess;
	rope_kernel<<<grid_for(total, 256), 256, 0, s>>>(q, k, pos, inv_freq, n, n_heads, n_kv_heads,
							  head_dim);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_silu_mul(cudaStream_t s, float *y, const float *gate,
					  const float *up, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	silu_mul_kernel<<<grid_for(n, 256), 256, 0, s>>>(y, gate, up, n);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_gelu_mul(cudaStream_t s, float *y, const float *gate,
					  const float *up, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	gelu_mul_kernel<<<grid_for(n, 256), 256, 0, s>>>(y, gate, up, n);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_scale(cudaStream_t s, float *y, const float *x, float k, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	scale_kernel<<<grid_for(n, 256), 256, 0, s>>>(y, x, k, n);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_relu(cudaStream_t s, float *y, const float *x, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	relu_kernel<<<grid_for(n, 256), 256, 0, s>>>(y, x, n);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_add(cudaStream_t s, float *y, const float *a, const float *b,
				     int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	add_kernel<<<grid_for(n, 256), 256, 0, s>>>(y, a, b, n);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_gather_rows(cudaStream_t s, float *y, const float *x,
					     const int32_t *rows, int64_t n, int64_t dim)
{
	if (n == 0 || dim == 0)
		return cudaSuccess;
	if (!ROWS_OK(n))
		return cudaErrorInvalidValue;
	gather_rows_kernel<<<(unsigned)n, row_threads(dim), 0, s>>>(y, x, rows, dim);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_bias_add(cudaStream_t s, float *y, const void *bias,
					  enum allm_dtype dt, int64_t n, int64_t m)
{
	if (n * m <= 0)
		return cudaSuccess;
	return dispatch_dtype(dt, [&](auto tag) {
		using T = decltype(tag);
		bias_add_kernel<T><<<grid_for(n * m, 256), 256, 0, s>>>(y, (const T *)bias, n, m);
		return cudaGetLastError();
	});
}

extern "C" cudaError_t allm_cuda_convert(cudaStream_t s, void *dst, const float *src,
					 enum allm_dtype dt, int64_t n)
{
	if (n <= 0)
		return cudaSuccess;
	return dispatch_dtype(dt, [&](auto tag) {
		using T = decltype(tag);
		convert_kernel<T><<<grid_for(n, 256), 256, 0, s>>>((T *)dst, src, n);
		return cudaGetLastError();
	});
}
