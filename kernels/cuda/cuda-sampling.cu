// Sampling support on the GPU, so a decode step does not copy vocab-sized rows
// to the host: argmax (lowest id wins a tie) and top-k (the k largest (value,
// id) of a row, sorted descending, ties by ascending id — allm_topk_host()'s
// order). Plus the fault-injection kernels of the error-path tests.
#include "cuda-common.cuh"

// --- argmax ---------------------------------------------------------------------

struct best {
	float v;
	int32_t id;
};

// a ranks before b: larger value, then lower id.
__device__ __forceinline__ bool before(best a, best b)
{
	return a.v > b.v || (a.v == b.v && a.id < b.id);
}

constexpr int AM_THREADS = 256;

// One block per row; each thread scans ids in increasing order (strict > keeps
// its lowest id on a tie), then the block keeps the better of each pair.
__global__ void __launch_bounds__(AM_THREADS) argmax_kernel(int32_t *ret, const float *logits,
							    int64_t vocab)
{
	__shared__ best sh[AM_THREADS / 32];
	const float *r = logits + blockIdx.x * vocab;
	best b = {-CUDART_INF_F, 0x7fffffff};
	for (int64_t j = threadIdx.x; j < vocab; j += AM_THREADS)
		if (b.id == 0x7fffffff || r[j] > b.v)
			b = {r[j], (int32_t)j};
	for (int o = 16; o > 0; o >>= 1) {
		best x = {__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.id, o)};
		if (x.id != 0x7fffffff && (b.id == 0x7fffffff || before(x, b)))
			b = x;
	}
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = b;
	__syncthreads();
	if (threadIdx.x == 0) {
		best w = sh[0];
		for (int i = 1; i < AM_THREADS / 32; i++)
			if (sh[i].id != 0x7fffffff && (w.id == 0x7fffffff || before(sh[i], w)))
				w = sh[i];
		ret[blockIdx.x] = w.id;
	}
}

extern "C" cudaError_t allm_cuda_argmax(cudaStream_t s, int32_t *ret_ids, const float *logits,
					int64_t n, int64_t vocab)
{
	if (n <= 0)
		return cudaSuccess;
	if (n > 0x7fffffffLL || vocab <= 0 || vocab > 0x7fffffffLL)
		return cudaErrorInvalidValue;
	argmax_kernel<<<(unsigned)n, AM_THREADS, 0, s>>>(ret_ids, logits, vocab);
	return cudaGetLastError();
}

// --- top-k: exact radix select on unique 64-bit keys ------------------------------
//
// key = (order-preserving bits of the value) << 32 | ~id. Keys are unique and
// their descending order is exactly "value desc, id asc", so the k largest keys
// are the answer with its tie rule built in. A most-significant-digit radix
// select (8 bits a pass) finds the k-th largest key's prefix; usually the value
// bits alone settle it in two or three passes over the row.

constexpr int TK_THREADS = 512;

__device__ __forceinline__ unsigned long long topk_key(float v, int32_t id)
{
	uint32_t u = __float_as_uint(v);
	if (u == 0x80000000u)
		u = 0; // -0.0 == +0.0: equal values, ordered by id as on the host
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
	return ((unsigned long long)u << 32) | (uint32_t)~(uint32_t)id;
}

__device__ __forceinline__ float key_value(unsigned long long key)
{
	uint32_t u = (uint32_t)(key >> 32);
	u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
	return __uint_as_float(u);
}

__device__ __forceinline__ int32_t key_id(unsigned long long key)
{
	return (int32_t)~(uint32_t)key;
}

// One block per row. k <= ALLM_TOPK_MAX (256).
__global__ void __launch_bounds__(TK_THREADS) topk_kernel(float *ret_vals, int32_t *ret_ids,
							  const float *logits, int64_t vocab,
							  int32_t k)
{
	__shared__ unsigned int hist[256];
	__shared__ unsigned long long cand[ALLM_TOPK_MAX];
	__shared__ unsigned long long s_prefix, s_mask;
	__shared__ int s_need, s_done, s_count;
	const float *r = logits + blockIdx.x * vocab;
	if (threadIdx.x == 0) {
		s_prefix = 0;
		s_mask = 0;
		s_need = k;
		s_done = 0;
		s_count = 0;
	}
	__syncthreads(); // s_* initialised
	for (int shift = 56; shift >= 0; shift -= 8) {
		if (s_done) // uniform: written before the barrier that ended the last pass
			break;
		for (int i = threadIdx.x; i < 256; i += TK_THREADS)
			hist[i] = 0;
		__syncthreads();
		const unsigned long long prefix = s_prefix, mask = s_mask;
		for (int64_t j = threadIdx.x; j < vocab; j += TK_THREADS) {
			unsigned long long key = topk_key(r[j], (int32_t)j);
			if ((key & mask) == prefix)
				atomicAdd(&hist[(key >> shift) & 255], 1u);
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			// the digit holding the need-th largest key among those left
			int need = s_need, cum = 0, dgt = 255;
			for (; dgt > 0; dgt--) {
				if (cum + (int)hist[dgt] >= need)
					break;
				cum += (int)hist[dgt];
			}
			need -= cum;
			s_prefix = prefix | ((unsigned long long)dgt << shift);
			s_mask = mask | (255ull << shift);
			s_need = need;
			// every key under the new prefix is taken: nothing left to split
			s_done = (int)hist[dgt] == need;
		}
		__syncthreads(); // thread 0 is done with hist; s_* published
	}
	// Exactly k keys are >= the prefix on the decided digits.
	const unsigned long long prefix = s_prefix, mask = s_mask;
	for (int64_t j = threadIdx.x; j < vocab; j += TK_THREADS) {
		unsigned long long key = topk_key(r[j], (int32_t)j);
		if ((key & mask) >= prefix) {
			int at = atomicAdd(&s_count, 1);
			if (at < ALLM_TOPK_MAX)
				cand[at] = key;
		}
	}
	__syncthreads();
	// Bitonic sort, descending, over the next power of two (padding: key 0,
	// which no real element has: its id bits would be ~id = 0, id = -1).
	int np = 1;
	while (np < k)
		np <<= 1;
	for (int i = k + threadIdx.x; i < np; i += TK_THREADS)
		cand[i] = 0;
	__syncthreads();
	for (int size = 2; size <= np; size <<= 1) {
		for (int stride = size >> 1; stride > 0; stride >>= 1) {
			for (int i = threadIdx.x; i < np; i += TK_THREADS) {
				int j = i ^ stride;
				if (j > i) {
					bool desc = (i & size) == 0;
					unsigned long long a = cand[i], b = cand[j];
					if (desc ? a < b : a > b) {
						cand[i] = b;
						cand[j] = a;
					}
				}
			}
			__syncthreads();
		}
	}
	for (int i = threadIdx.x; i < k; i += TK_THREADS) {
		ret_vals[blockIdx.x * k + i] = key_value(cand[i]);
		ret_ids[blockIdx.x * k + i] = key_id(cand[i]);
	}
}

extern "C" cudaError_t allm_cuda_topk(cudaStream_t s, float *ret_vals, int32_t *ret_ids,
				      const float *logits, int64_t n, int64_t vocab, int32_t k)
{
	if (n <= 0)
		return cudaSuccess;
	if (n > 0x7fffffffLL || vocab > 0x7fffffffLL || k < 1 || k > ALLM_TOPK_MAX || k > vocab)
		return cudaErrorInvalidValue;
	topk_kernel<<<(unsigned)n, TK_THREADS, 0, s>>>(ret_vals, ret_ids, logits, vocab, k);
	return cudaGetLastError();
}

// --- fault injection --------------------------------------------------------------

__global__ void fault_kernel(int *p)
{
	if (p)
		*p = 1;
}

extern "C" cudaError_t allm_cuda_fault(cudaStream_t s, int kind)
{
	if (kind == 0) {
		// 4096 threads per block is above every device's limit: the launch
		// itself fails (cudaErrorInvalidConfiguration), the context survives
		fault_kernel<<<1, 4096, 0, s>>>(NULL);
	} else {
		// a store to an unmapped address: the kernel faults, the context is lost
		fault_kernel<<<1, 1, 0, s>>>((int *)(uintptr_t)0x10);
	}
	return cudaGetLastError();
}
