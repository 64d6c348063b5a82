// Device helpers shared by the kernel files: dtype loads/stores, warp and block
// reductions, grid sizing. CUDA C++; included only by .cu files.
#ifndef ALLM_CUDA_COMMON_CUH
#define ALLM_CUDA_COMMON_CUH

#include "cuda-backend.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

// Element i of a tensor stored as T, widened to f32.
template <typename T> __device__ __forceinline__ float ld(const T *p, size_t i);
template <> __device__ __forceinline__ float ld<float>(const float *p, size_t i)
{
	return p[i];
}
template <> __device__ __forceinline__ float ld<__half>(const __half *p, size_t i)
{
	return __half2float(p[i]);
}
template <> __device__ __forceinline__ float ld<__nv_bfloat16>(const __nv_bfloat16 *p, size_t i)
{
	return __bfloat162float(p[i]);
}

// Rounds to nearest even, as allm_from_f32() does on the host.
template <typename T> __device__ __forceinline__ T st(float v);
template <> __device__ __forceinline__ float st<float>(float v)
{
	return v;
}
template <> __device__ __forceinline__ __half st<__half>(float v)
{
	return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 st<__nv_bfloat16>(float v)
{
	return __float2bfloat16_rn(v);
}

// Calls f(T()) with T the C++ type of dt; f is a generic lambda that takes the
// type from its argument (`[&](auto tag) { using T = decltype(tag); ... }`).
template <typename F> static inline cudaError_t dispatch_dtype(enum allm_dtype dt, F f)
{
	switch (dt) {
	case ALLM_DTYPE_F32: return f(float());
	case ALLM_DTYPE_F16: return f(__half());
	case ALLM_DTYPE_BF16: return f(__nv_bfloat16());
	default: return cudaErrorInvalidValue;
	}
}

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets it.
// `red` is 32 floats of shared memory; the call synchronises the block.
__device__ __forceinline__ float block_sum(float v, float *red)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_sum(v);
	__syncthreads(); // red may still be read by a previous reduction
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	float t = lane < nw ? red[lane] : 0.0f;
	return warp_sum(t);
}

__device__ __forceinline__ float block_max(float v, float *red)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	float t = lane < nw ? red[lane] : -CUDART_INF_F;
	return warp_max(t);
}

// Blocks for a grid-stride loop over n elements: enough to fill the device,
// never above the grid limit.
static inline unsigned grid_for(int64_t n, int threads)
{
	int64_t b = (n + threads - 1) / threads;
	if (b > 65535LL * 16)
		b = 65535LL * 16;
	return (unsigned)(b > 0 ? b : 1);
}

#endif
