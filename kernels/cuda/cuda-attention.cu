// The paged KV cache on the GPU: kv_write, and causal attention read through
// block tables, with the semantics of the CPU reference (cpu-attention.c):
// token t of sequence tok_seq[t] attends to positions 0..tok_pos[t]; GQA maps
// query head h to kv head h / (n_heads / n_kv_heads).
//
// Two kernels, both f32 math over f32/f16/bf16 K/V:
//  - prefill: a block takes 32 consecutive tokens of one sequence and one query
//    head, streams K/V tiles of 32 positions through shared memory and keeps an
//    online softmax per row (flash-attention style, SIMT).
//  - split-context (decode): a block takes one (token, head) and one slice of its
//    context; slices are merged by a second kernel, so short batches still fill
//    the GPU.
// Not batch-invariant: which kernel runs and how the context is split depend on
// the batch (so do cuBLAS's GEMM kernels); results are deterministic for a batch.
#include "cuda-common.cuh"

// Where one layer's K/V rows live (struct allm_kv_layout, one layer fixed).
struct kv_geom {
	int32_t n_layers, layer, n_kv_heads, head_dim, block_size;
};

// Element offset of (block, kind, token-in-block, kv head), as in backend.h.
__device__ __forceinline__ size_t kv_row(const kv_geom &g, int32_t block, int kind, int32_t off,
					 int32_t head)
{
	return ((((size_t)block * g.n_layers + g.layer) * 2 + kind) * g.block_size + off) *
		       g.n_kv_heads * g.head_dim +
	       (size_t)head * g.head_dim;
}

struct attn_args {
	float *out; // (n_tokens, n_heads, head_dim)
	const float *q; // (n_tokens, n_heads, head_dim)
	const void *pool;
	kv_geom g;
	int32_t n_heads, group; // group = query heads per kv head
	float scale;
	int32_t n_tokens, max_blocks;
	const int32_t *tok_seq, *tok_pos, *block_tables;
	int32_t window; // > 0: token t reads only positions tok_pos[t] - window + 1 .. tok_pos[t]
	int32_t n_splits, part; // split path
	float *ws_acc; // (n_tokens * n_heads, n_splits, head_dim) unnormalised outputs
	float *ws_ml; // (n_tokens * n_heads, n_splits, 2) running max and sum
};

// --- kv_write ---------------------------------------------------------------------

// One block per token: its K and V rows (all kv heads) into its slot.
template <typename T>
__global__ void kv_write_kernel(T *pool, kv_geom g, const float *k, const float *v,
				const int32_t *slot)
{
	const int64_t t = blockIdx.x;
	const int32_t kvd = g.n_kv_heads * g.head_dim;
	const int32_t sl = slot[t], blk = sl / g.block_size, off = sl % g.block_size;
	const size_t kb = kv_row(g, blk, 0, off, 0), vb = kv_row(g, blk, 1, off, 0);
	for (int32_t e = threadIdx.x; e < kvd; e += blockDim.x) {
		pool[kb + e] = st<T>(k[t * kvd + e]);
		pool[vb + e] = st<T>(v[t * kvd + e]);
	}
}

extern "C" cudaError_t allm_cuda_kv_write(cudaStream_t s, void *pool,
					  const struct allm_kv_layout *lay, int32_t layer,
					  const float *k, const float *v,
					  const struct allm_attn_meta *meta)
{
	if (meta->n_tokens <= 0)
		return cudaSuccess;
	kv_geom g = {lay->n_layers, layer, lay->n_kv_heads, lay->head_dim, lay->block_size};
	int32_t kvd = lay->n_kv_heads * lay->head_dim;
	int threads = kvd >= 512 ? 256 : kvd >= 128 ? 128 : 32;
	return dispatch_dtype(lay->dtype, [&](auto tag) {
		using T = decltype(tag);
		kv_write_kernel<T><<<(unsigned)meta->n_tokens, threads, 0, s>>>((T *)pool, g, k, v,
									       meta->slot);
		return cudaGetLastError();
	});
}

// --- prefill: tiled, online softmax ------------------------------------------------

constexpr int PF_BQ = 32; // query rows (tokens) per block
constexpr int PF_THREADS = 128; // 4 threads per row

// Dynamic shared memory of a prefill block with head_dim <= hdm and tiles of bk keys.
static size_t prefill_smem(int hdm, int bk)
{
	return (size_t)(PF_BQ + 2 * bk) * (hdm + 1) * sizeof(float) +
	       (size_t)PF_BQ * (bk + 1) * sizeof(float);
}

// Keys per K/V tile: 32, or 16 where 32 does not fit the device's opt-in shared
// memory (head_dim 256 takes 102,912 B with 32: more than the 99 KB of sm_86, sm_89
// and sm_120 cards; 16 takes 67,968 B); 0 when neither fits (the split kernel then
// runs the prefill too, slower but right).
static int prefill_bk(int hdm, size_t smem_optin)
{
	if (prefill_smem(hdm, 32) <= smem_optin)
		return 32;
	if (hdm == 256 && prefill_smem(hdm, 16) <= smem_optin)
		return 16;
	return 0;
}

// head_dim <= HDM, tiles of BK keys. Thread (r, c) owns row r; for scores it takes
// keys c*KPT..c*KPT+KPT-1 of a tile, for the output dims c, c+4, c+8, ...
template <typename T, int HDM, int BK>
__global__ void __launch_bounds__(PF_THREADS) attn_prefill_kernel(attn_args a)
{
	constexpr int KPT = BK / 4; // keys per thread of a row
	extern __shared__ float smem[];
	constexpr int LD = HDM + 1; // padding: rows of a warp fall in different banks
	float *Qs = smem; // (PF_BQ, LD) q rows of the tile
	float *Ks = Qs + PF_BQ * LD; // (BK, LD)
	float *Vs = Ks + BK * LD; // (BK, LD)
	float *Ps = Vs + BK * LD; // (PF_BQ, BK + 1) softmax numerators of the tile
	const int tid = threadIdx.x, r = tid >> 2, c = tid & 3;
	const int32_t hd = a.g.head_dim, bs = a.g.block_size;
	const int32_t h = blockIdx.y, kvh = h / a.group;
	const int32_t t0 = blockIdx.x * PF_BQ, t_end = min(a.n_tokens, t0 + PF_BQ);
	const T *pool = (const T *)a.pool;

	// The tile's tokens usually belong to one sequence; where it straddles a
	// boundary, each run of same-sequence tokens is one pass.
	for (int32_t seg = t0; seg < t_end;) {
		const int32_t seq = a.tok_seq[seg];
		int32_t seg_end = seg + 1, max_pos = a.tok_pos[seg], min_pos = a.tok_pos[seg];
		while (seg_end < t_end && a.tok_seq[seg_end] == seq) {
			max_pos = max(max_pos, a.tok_pos[seg_end]);
			min_pos = min(min_pos, a.tok_pos[seg_end]);
			seg_end++;
		}
		// a sliding window: the pass starts at the oldest position a token of it
		// reads (blocks before it may have been given back: never read)
		const int32_t lo = a.window > 0 ? max(0, min_pos - a.window + 1) : 0;
		const int32_t *bt = a.block_tables + (size_t)seq * a.max_blocks;
		const int32_t t = t0 + r;
		const bool active = t >= seg && t < seg_end;
		const int32_t my_pos = active ? a.tok_pos[t] : -1;
		const int32_t my_lo = a.window > 0 ? my_pos - a.window + 1 : 0;

		__syncthreads(); // the previous pass is done with Qs
		for (int i = tid; i < PF_BQ * hd; i += PF_THREADS) {
			int rr = i / hd, d = i % hd;
			int32_t tt = t0 + rr;
			Qs[rr * LD + d] = tt >= seg && tt < seg_end
						  ? a.q[((size_t)tt * a.n_heads + h) * hd + d]
						  : 0.0f;
		}
		float m = -CUDART_INF_F, l = 0.0f, acc[HDM / 4];
#pragma unroll
		for (int i = 0; i < HDM / 4; i++)
			acc[i] = 0.0f;

		for (int32_t kt = lo / BK * BK; kt <= max_pos; kt += BK) {
			__syncthreads(); // Qs written; the previous K/V tile consumed
			for (int i = tid; i < BK * hd; i += PF_THREADS) {
				int j = i / hd, d = i % hd;
				int32_t p = kt + j;
				float kk = 0.0f, vv = 0.0f;
				if (p >= lo && p <= max_pos) {
					int32_t blk = bt[p / bs];
					kk = ld(pool, kv_row(a.g, blk, 0, p % bs, kvh) + d);
					vv = ld(pool, kv_row(a.g, blk, 1, p % bs, kvh) + d);
				}
				Ks[j * LD + d] = kk;
				Vs[j * LD + d] = vv;
			}
			__syncthreads();

			float s[KPT];
#pragma unroll
			for (int jj = 0; jj < KPT; jj++)
				s[jj] = 0.0f;
#pragma unroll 4
			for (int d = 0; d < hd; d++) {
				float qd = Qs[r * LD + d];
#pragma unroll
				for (int jj = 0; jj < KPT; jj++)
					s[jj] = fmaf(qd, Ks[(c * KPT + jj) * LD + d], s[jj]);
			}
			float mt = -CUDART_INF_F;
#pragma unroll
			for (int jj = 0; jj < KPT; jj++) {
				int32_t p = kt + c * KPT + jj;
				s[jj] = p <= my_pos && p >= my_lo ? s[jj] * a.scale : -CUDART_INF_F; // causal, window
				mt = fmaxf(mt, s[jj]);
			}
			// the 4 threads of a row are adjacent lanes of one warp
			mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
			mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
			const float m_new = fmaxf(m, mt);
			const float alpha = m_new == -CUDART_INF_F ? 1.0f : expf(m - m_new);
			float ls = 0.0f;
#pragma unroll
			for (int jj = 0; jj < KPT; jj++) {
				float pj = s[jj] == -CUDART_INF_F ? 0.0f : expf(s[jj] - m_new);
				Ps[r * (BK + 1) + c * KPT + jj] = pj;
				ls += pj;
			}
			ls += __shfl_xor_sync(0xffffffffu, ls, 1);
			ls += __shfl_xor_sync(0xffffffffu, ls, 2);
			l = l * alpha + ls;
			m = m_new;
			__syncwarp(); // Ps of this row was written by the row's 4 lanes
#pragma unroll
			for (int i = 0; i < HDM / 4; i++)
				acc[i] *= alpha;
			for (int j = 0; j < BK; j++) {
				float pj = Ps[r * (BK + 1) + j];
#pragma unroll
				for (int i = 0; i < HDM / 4; i++)
					if (c + 4 * i < hd)
						acc[i] = fmaf(pj, Vs[j * LD + c + 4 * i], acc[i]);
			}
		}
		if (active) {
			float inv = 1.0f / l;
			float *o = a.out + ((size_t)t * a.n_heads + h) * hd;
#pragma unroll
			for (int i = 0; i < HDM / 4; i++)
				if (c + 4 * i < hd)
					o[c + 4 * i] = acc[i] * inv;
		}
		seg = seg_end;
	}
}

// --- decode: split context ---------------------------------------------------------

constexpr int SP_THREADS = 128; // 4 warps

static size_t split_smem(int32_t part, int dpl)
{
	return ((size_t)part + 4 * 32 * (size_t)dpl) * sizeof(float);
}

// Lane `lane` owns dims lane + 32 j (j < DPL) of the head: head_dim <= 32 * DPL.
template <typename T, int DPL>
__global__ void __launch_bounds__(SP_THREADS) attn_split_kernel(attn_args a)
{
	extern __shared__ float smem[];
	float *sc = smem; // (part) scores, then softmax numerators
	float *accs = smem + a.part; // (4, 32 * DPL) per-warp partial outputs
	__shared__ float red[32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int32_t t = blockIdx.x, h = blockIdx.y, split = blockIdx.z;
	const int32_t hd = a.g.head_dim, bs = a.g.block_size;
	const int32_t ctx = a.tok_pos[t] + 1;
	const int32_t p1 = min(ctx, split * a.part + a.part);
	const int32_t p0 = max(split * a.part, a.window > 0 ? ctx - a.window : 0); // the window's first
	const int32_t kvh = h / a.group;
	const int32_t *bt = a.block_tables + (size_t)a.tok_seq[t] * a.max_blocks;
	const T *pool = (const T *)a.pool;
	const size_t row = (size_t)t * a.n_heads + h;
	const size_t part_at = row * a.n_splits + split;

	if (p0 >= p1) { // this slice lies past the token's context or before its window
		if (threadIdx.x == 0) {
			a.ws_ml[part_at * 2] = -CUDART_INF_F;
			a.ws_ml[part_at * 2 + 1] = 0.0f;
		}
		for (int d = threadIdx.x; d < hd; d += SP_THREADS)
			a.ws_acc[part_at * hd + d] = 0.0f;
		return;
	}
	float q[DPL];
	const float *qr = a.q + row * hd;
#pragma unroll
	for (int j = 0; j < DPL; j++) {
		int d = lane + 32 * j;
		q[j] = d < hd ? qr[d] : 0.0f;
	}
	// q·k: each warp takes 4 keys at a time so their loads are in flight together
	for (int32_t pb = p0 + warp * 4; pb < p1; pb += 16) {
		float s[4];
#pragma unroll
		for (int u = 0; u < 4; u++) {
			int32_t p = pb + u;
			s[u] = 0.0f;
			if (p < p1) {
				const size_t base = kv_row(a.g, bt[p / bs], 0, p % bs, kvh);
#pragma unroll
				for (int j = 0; j < DPL; j++) {
					int d = lane + 32 * j;
					if (d < hd)
						s[u] = fmaf(q[j], ld(pool, base + d), s[u]);
				}
			}
		}
#pragma unroll
		for (int u = 0; u < 4; u++) {
			float v = warp_sum(s[u]);
			if (lane == 0 && pb + u < p1)
				sc[pb + u - p0] = v * a.scale;
		}
	}
	__syncthreads();
	const int32_t n = p1 - p0;
	float mx = -CUDART_INF_F;
	for (int32_t i = threadIdx.x; i < n; i += SP_THREADS)
		mx = fmaxf(mx, sc[i]);
	mx = block_max(mx, red);
	float sum = 0.0f;
	for (int32_t i = threadIdx.x; i < n; i += SP_THREADS) {
		float e = expf(sc[i] - mx);
		sc[i] = e;
		sum += e;
	}
	sum = block_sum(sum, red); // also publishes sc
	float acc[DPL];
#pragma unroll
	for (int j = 0; j < DPL; j++)
		acc[j] = 0.0f;
#pragma unroll 4
	for (int32_t p = p0 + warp; p < p1; p += 4) {
		const size_t base = kv_row(a.g, bt[p / bs], 1, p % bs, kvh);
		const float w = sc[p - p0];
#pragma unroll
		for (int j = 0; j < DPL; j++) {
			int d = lane + 32 * j;
			if (d < hd)
				acc[j] = fmaf(w, ld(pool, base + d), acc[j]);
		}
	}
#pragma unroll
	for (int j = 0; j < DPL; j++)
		accs[warp * 32 * DPL + lane + 32 * j] = acc[j];
	__syncthreads();
	for (int d = threadIdx.x; d < hd; d += SP_THREADS) {
		float o = accs[d] + accs[32 * DPL + d] + accs[64 * DPL + d] + accs[96 * DPL + d];
		if (a.n_splits == 1)
			a.out[row * hd + d] = o / sum;
		else
			a.ws_acc[part_at * hd + d] = o;
	}
	if (a.n_splits > 1 && threadIdx.x == 0) {
		a.ws_ml[part_at * 2] = mx;
		a.ws_ml[part_at * 2 + 1] = sum;
	}
}

// Merges the slices of one (token, head): out = sum_s acc_s e^(m_s - M) / L.
__global__ void attn_combine_kernel(attn_args a)
{
	extern __shared__ float wts[]; // (n_splits) e^(m_s - M)
	__shared__ float red[32];
	const size_t row = blockIdx.x;
	const int32_t ns = a.n_splits, hd = a.g.head_dim;
	const float *ml = a.ws_ml + row * ns * 2;
	float mx = -CUDART_INF_F;
	for (int32_t s = threadIdx.x; s < ns; s += blockDim.x)
		mx = fmaxf(mx, ml[2 * s]);
	mx = block_max(mx, red); // finite: slice 0 always holds position 0
	float l = 0.0f;
	for (int32_t s = threadIdx.x; s < ns; s += blockDim.x) {
		float w = expf(ml[2 * s] - mx); // 0 for empty slices (m = -inf)
		wts[s] = w;
		l += ml[2 * s + 1] * w;
	}
	l = block_sum(l, red); // also publishes wts
	for (int d = threadIdx.x; d < hd; d += blockDim.x) {
		float o = 0.0f;
		for (int32_t s = 0; s < ns; s++)
			o = fmaf(a.ws_acc[(row * ns + s) * hd + d], wts[s], o);
		a.out[row * hd + d] = o / l;
	}
}

// --- host side ---------------------------------------------------------------------

static int prefill_hdm(int32_t hd)
{
	return hd <= 64 ? 64 : hd <= 128 ? 128 : hd <= 256 ? 256 : 0;
}

static int split_dpl(int32_t hd)
{
	return hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : hd <= 256 ? 8 : 32;
}

extern "C" void allm_cuda_attention_plan(const struct allm_kv_layout *lay, int32_t n_heads,
					 const struct allm_attn_meta *meta, int n_sms,
					 size_t smem_optin, size_t ws_cap,
					 struct allm_cuda_attn_plan *ret)
{
	const int32_t hd = lay->head_dim, max_ctx = meta->max_ctx > 0 ? meta->max_ctx : 1;
	memset(ret, 0, sizeof(*ret));
	ret->n_splits = 1;
	ret->part = max_ctx;
	ret->prefill_bk = prefill_hdm(hd) > 0 ? prefill_bk(prefill_hdm(hd), smem_optin) : 0;
	ret->prefill = meta->n_tokens > meta->n_seqs && ret->prefill_bk > 0;
	if (ret->prefill)
		return;
	// Enough (token, head, slice) blocks for two waves, slices of >= 64 keys.
	const int64_t rows = (int64_t)meta->n_tokens * n_heads;
	int64_t want = rows > 0 ? (2LL * n_sms + rows - 1) / rows : 1;
	int64_t most = (max_ctx + 63) / 64;
	int64_t splits = want < most ? want : most;
	if (splits < 1)
		splits = 1;
	int64_t part = (max_ctx + splits - 1) / splits;
	part = (part + 15) & ~15LL;
	// The scores of a slice live in shared memory.
	int64_t room = ((int64_t)smem_optin - (int64_t)split_smem(0, split_dpl(hd))) / 4;
	room &= ~15LL;
	if (part > room)
		part = room > 16 ? room : 16;
	splits = (max_ctx + part - 1) / part;
	const size_t per_split = (size_t)rows * ((size_t)hd + 2) * sizeof(float);
	if (splits > 1 && per_split * (size_t)splits > ws_cap) {
		// fewer, longer slices, but never longer than shared memory holds
		int64_t fit = (int64_t)(ws_cap / per_split);
		int64_t least = (max_ctx + room - 1) / room;
		splits = fit > least ? fit : least;
		if (splits < 1)
			splits = 1;
		part = (max_ctx + splits - 1) / splits;
		part = (part + 15) & ~15LL;
		splits = (max_ctx + part - 1) / part;
	}
	ret->part = (int32_t)part;
	ret->n_splits = (int32_t)splits;
	if (splits > 1)
		ret->ws_bytes = per_split * (size_t)splits;
}

template <typename T, int HDM, int BK>
static cudaError_t launch_prefill(cudaStream_t s, const attn_args &a)
{
	dim3 grid((a.n_tokens + PF_BQ - 1) / PF_BQ, a.n_heads);
	attn_prefill_kernel<T, HDM, BK><<<grid, PF_THREADS, prefill_smem(HDM, BK), s>>>(a);
	return cudaGetLastError();
}

template <typename T, int DPL> static cudaError_t launch_split(cudaStream_t s, const attn_args &a)
{
	dim3 grid(a.n_tokens, a.n_heads, a.n_splits);
	attn_split_kernel<T, DPL><<<grid, SP_THREADS, split_smem(a.part, DPL), s>>>(a);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess || a.n_splits == 1)
		return e;
	attn_combine_kernel<<<(unsigned)((int64_t)a.n_tokens * a.n_heads), 128,
			      (size_t)a.n_splits * sizeof(float), s>>>(a);
	return cudaGetLastError();
}

extern "C" cudaError_t allm_cuda_attention(cudaStream_t s, float *out, const float *q,
					   const void *pool, const struct allm_kv_layout *lay,
					   int32_t layer, int32_t n_heads, float scale,
					   const struct allm_attn_meta *meta,
					   const struct allm_cuda_attn_plan *plan, void *ws)
{
	if (meta->n_tokens <= 0)
		return cudaSuccess;
	if (n_heads <= 0 || lay->n_kv_heads <= 0 || n_heads % lay->n_kv_heads || n_heads > 65535)
		return cudaErrorInvalidValue;
	attn_args a;
	a.out = out;
	a.q = q;
	a.pool = pool;
	a.g = {lay->n_layers, layer, lay->n_kv_heads, lay->head_dim, lay->block_size};
	a.n_heads = n_heads;
	a.group = n_heads / lay->n_kv_heads;
	a.scale = scale;
	a.n_tokens = meta->n_tokens;
	a.max_blocks = meta->max_blocks_per_seq;
	a.tok_seq = meta->tok_seq;
	a.tok_pos = meta->tok_pos;
	a.block_tables = meta->block_tables;
	a.window = meta->window;
	a.n_splits = plan->n_splits;
	a.part = plan->part;
	a.ws_acc = (float *)ws;
	a.ws_ml = a.ws_acc + (size_t)meta->n_tokens * n_heads * plan->n_splits * lay->head_dim;
	const int32_t hd = lay->head_dim;
	return dispatch_dtype(lay->dtype, [&](auto tag) {
		using T = decltype(tag);
		if (plan->prefill) {
			switch (prefill_hdm(hd)) {
			case 64: return launch_prefill<T, 64, 32>(s, a);
			case 128: return launch_prefill<T, 128, 32>(s, a);
			default:
				return plan->prefill_bk == 32 ? launch_prefill<T, 256, 32>(s, a)
							      : launch_prefill<T, 256, 16>(s, a);
			}
		}
		if (a.n_splits > 65535)
			return cudaErrorInvalidValue;
		switch (split_dpl(hd)) {
		case 1: return launch_split<T, 1>(s, a);
		case 2: return launch_split<T, 2>(s, a);
		case 4: return launch_split<T, 4>(s, a);
		case 8: return launch_split<T, 8>(s, a);
		default: return launch_split<T, 32>(s, a);
		}
	});
}

// Raises each kernel's dynamic shared memory limit to what it may ask for.
template <typename T> static cudaError_t init_dtype(size_t optin)
{
	cudaError_t e = cudaSuccess;
	int lim = (int)optin;
#define OPT(kern) \
	if (e == cudaSuccess) \
	e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, lim)
	OPT((attn_prefill_kernel<T, 64, 32>));
	OPT((attn_prefill_kernel<T, 128, 32>));
	OPT((attn_prefill_kernel<T, 256, 32>));
	OPT((attn_prefill_kernel<T, 256, 16>));
	OPT((attn_split_kernel<T, 1>));
	OPT((attn_split_kernel<T, 2>));
	OPT((attn_split_kernel<T, 4>));
	OPT((attn_split_kernel<T, 8>));
	OPT((attn_split_kernel<T, 32>));
#undef OPT
	return e;
}

extern "C" cudaError_t allm_cuda_attention_init(size_t smem_optin)
{
	// every head_dim up to 256 has a prefill tile that fits (prefill_bk) on the
	// devices the backend accepts (sm_80+: at least 99 KB); the check keeps it so
	if (!prefill_bk(64, smem_optin) || !prefill_bk(128, smem_optin) || !prefill_bk(256, smem_optin))
		return cudaErrorInvalidValue;
	cudaError_t e = init_dtype<float>(smem_optin);
	if (e == cudaSuccess)
		e = init_dtype<__half>(smem_optin);
	if (e == cudaSuccess)
		e = init_dtype<__nv_bfloat16>(smem_optin);
	if (e == cudaSuccess)
		e = cudaFuncSetAttribute(attn_combine_kernel,
					 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_optin);
	return e;
}
