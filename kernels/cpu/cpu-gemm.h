/* The CPU fast path's GEMM, y[n, m] = x[n, k] · W[m, k]ᵀ (+ bias): one driver
 * (cpu-gemm.c: threads, cache blocking, activation preparation) and one set of
 * tile kernels per SIMD level (cpu-gemm-portable.c, -avx2.c, -avx512.c).
 *
 * Batch invariance (DESIGN §6). Each level computes every output element in one
 * fixed order that depends only on k, never on n, on where the row sits in the
 * batch, on the blocking or on the thread that runs it:
 *
 *   portable  acc = 0; for p in 0..k-1: acc = acc + x[p] * w[p] (mul, then add);
 *             y = acc + bias. The reference's arithmetic, bit for bit.
 *   avx512 (f32, f16 and bf16 weights): 16 partial sums, lane j = fma chain
 *             over p = j, j + 16, j + 32, ... in increasing p, starting from +0;
 *             then the lanes are added in one tree, s8[j] = l[j] + l[j+8],
 *             s4[j] = s8[j] + s8[j+4], s2[j] = s4[j] + s4[j+2], s = s2[0] + s2[1];
 *             y = s + bias. (From 16 rows and k = 192 on, cpu-gemm-avx512-op.c
 *             computes the same 16 chains and the same tree with 16 outputs per
 *             vector.)
 *   avx2:     the same with 8 lanes (p mod 8; tree from s4[j] = l[j] + l[j+4]).
 *   avx2-vnni, avx512-vnni: float weights as avx2 and avx512 (their VNNI serves
 *             the block formats below).
 *   avx512-bf16: as avx512-vnni, and bf16 weights meet bf16 activations (x rounded
 *             to nearest-even bf16): lane j accumulates vdpbf16ps over the pairs
 *             (32 i + 2 j, 32 i + 2 j + 1); then the 16-lane tree.
 *   amx-bf16: as avx512-vnni for f32 and f16 weights; bf16 weights meet bf16
 *             activations (rounded as avx512-bf16 rounds them) on AMX tiles: from
 *             +0, one TDPBF16PS per block of 32 k in increasing k (zero-padded past
 *             k), the same tile shapes for every n (cpu-gemm-amx.c); y = s + bias.
 *   amx-int8: as amx-bf16, and the block formats' integers on AMX tiles from a
 *             few tokens on (cpu-gemm-qblock-amx.c), with the bits below.
 *
 *   q8_0, q4_0, q4_1, q5_0, q5_1 (GGUF block weights, kernels/qblock.h; every
 *             level, portable included, computes these bits, cpu-gemm-qblock.h):
 *             each row of x is quantized per block of 32 (xq = round-half-even(
 *             x * 127 / amax), dx = amax / 127; and s_b, the block's sum of xq); per output
 *             element, from +0, for each block b in increasing order: acc =
 *             fma((float)I_b, dw_b * dx_b, acc), I_b the exact integer sum of the
 *             block's 32 products xq * q (q as in qblock.h's formula: q8_0
 *             -128..127, q4_0 -8..7, q4_1 0..15, q5_0 -16..15, q5_1 0..31); q4_1
 *             and q5_1 then acc = fma(m_b, dx_b * (float)s_b, acc); y = acc + bias.
 *             The integers may be added in any order (AVX2 pairs, VNNI quads, AMX
 *             tiles): they are exact.
 *   q4_k, q5_k, q6_k (GGUF's K formats, 256 weights a super-block; every level):
 *             x quantized as above but with one amax per 256 values (dx the same
 *             for the super-block's 8 blocks of 32; s_b still per 32); per output
 *             element, from +0, for each super-block B in increasing order: I_B =
 *             sum over its sub-blocks j of sc_j * (the exact integer sum of xq * q)
 *             (q4_k/q5_k: the 6-bit scale of each 32, q 0..15 / 0..31; q6_k: the
 *             int8 scale of each 16, q -32..31), acc = fma((float)I_B, d * dx_B,
 *             acc); q4_k/q5_k then M_B = sum of m_j * s_j (6-bit mins), acc =
 *             fma((float)-M_B, dmin * dx_B, acc); y = acc + bias. |I_B| < 2^28:
 *             exact in int32, added in any order. (One scale per 256 is ggml's
 *             Q8_K choice too: the integers of a super-block meet one float.)
 *
 * Zero steps past k change nothing (an accumulator that starts at +0 never becomes
 * -0 under fma with finite inputs), so tails are zero-padded or masked freely, and
 * a partial sum stored and reloaded between k chunks is exact. */
#ifndef ALLM_CPU_GEMM_H
#define ALLM_CPU_GEMM_H

#include "cpu-backend.h"
#include "qblock.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_X86 1
#endif

#ifndef GEMM_KC
#define GEMM_KC 1024 /* k chunk of the blocked path (a multiple of 64) */
#endif
/* Up to this many rows W is read in place, k in one piece. The blocked path's copy
 * of W into L2 pays for itself only once the row tiles reusing it are many: at 9-15
 * rows it ran at half the FLOP rate of 8 rows (f32, f16 and bf16, AVX2 and AVX-512
 * alike: 48-83 vs 75-152 GFLOP/s, tests/bench-gemm, one thread), and from 16 rows
 * the AVX-512 levels take the outer-product path anyway. */
#define GEMM_DIRECT_ROWS 15
#define GEMM_PART_BYTES 64 /* one output element's partial state between k chunks */
#define GEMM_MULTI_MAX 4 /* matrices of one cpu_fast_gemm_multi call, at most */

struct cpu_pool;

/* One tile: output rows [0, rows) x columns [0, cols) over k in [p0, p0 + kc). */
struct gemm_tile {
	const void *x; /* row 0 of the (prepared) activations */
	size_t x_stride; /* bytes between rows of x */
	const void *w; /* row of column 0 of W (its storage dtype, or converted f32) */
	size_t w_stride; /* bytes between W rows */
	int64_t w_p0; /* k index of w's first element (converted chunks start at p0) */
	int64_t k; /* the whole k (row layouts of prepared x depend on it) */
	int64_t p0, kc;
	int rows, cols;
	bool first, last; /* first chunk: start from 0; last: reduce and store y */
	void *part; /* [rows][cols] partial states, GEMM_PART_BYTES each */
	size_t prefetch; /* nonzero: W streams from memory, and each row's bytes at this
			  * distance (the next tile's rows) are prefetched as it goes */
	float *y; /* y of (row 0, column 0) */
	int64_t ldy;
	const float *bias; /* [cols] f32, or NULL */
};

/* k rounded up to a multiple of 32 (rows of bf16 activations and AMX tiles). */
static inline int64_t gemm_k32(int64_t k)
{
	return (k + 31) / 32 * 32;
}

/* Floats between rows of a converted W chunk of kc: one cache line more than kc, so
 * rows of a power-of-two k do not all fall into the same L1 sets. */
static inline int64_t gemm_conv_ld(int64_t kc)
{
	return kc + 16;
}

/* How a level computes a GEMM of one weight dtype. */
struct gemm_kern {
	int max_rows, max_cols; /* tile limits */
	int decode_cols; /* optional: wider tiles when n <= 2 (more W rows streaming) */
	/* Optional: prepares one row of x (k values) into dst; NULL: x used as is. */
	void (*x_prep)(void *dst, const float *x, int64_t k);
	size_t (*x_row_bytes)(int64_t k); /* with x_prep */
	/* A tile reading W in its storage dtype. */
	void (*tile)(const struct gemm_tile *t);
	/* Optional, for many rows: W rows [0, cols) over [p0, p0 + kc) to f32 rows
	 * gemm_conv_ld(kc) apart (exact: the values the tile would compute), then
	 * tile_f32 on them. */
	void (*w_to_f32)(float *dst, const void *w, size_t w_stride, int64_t k, int64_t p0,
			 int64_t kc, int cols);
	void (*tile_f32)(const struct gemm_tile *t);
	/* Optional: the whole GEMM by the level's own driver (AMX tiles), none of the
	 * above; xbuf holds whole_x_bytes(n, k) for the activations it prepares. */
	size_t (*whole_x_bytes)(int64_t n, int64_t k);
	int (*whole)(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x,
		     const void *w, const float *bias, int64_t n, int64_t k, int64_t m);
	/* The whole driver from this many rows and this k on (0: always); below, the
	 * tiles, which then must give the same bits. */
	int whole_min_rows, whole_min_k;
	/* Optional, with whole: several matrices of the same activations at once
	 * (prepared once, one job), each with whole's bits. */
	int (*whole_multi)(struct cpu_pool *pool, bool inline_run, void *xbuf, int n_mats,
			   float *const *ys, const float *x, const void *const *ws,
			   const float *const *biases, int64_t n, int64_t k, const int64_t *ms);
};

struct gemm_level {
	enum allm_cpu_isa isa;
	const struct gemm_kern *f32, *f16, *bf16;
	const struct gemm_kern *qb; /* GGUF blocks: [qb_dtype_index(dt)] (cpu-gemm-qblock.h) */
};

/* A whole_multi function named name. */
#define GEMM_OP_MULTI(name) \
	int name(struct cpu_pool *pool, bool inline_run, void *xbuf, int n_mats, float *const *ys, \
		 const float *x, const void *const *ws, const float *const *biases, int64_t n, \
		 int64_t k, const int64_t *ms)

extern const struct gemm_level gemm_level_portable;
#ifdef GEMM_X86
extern const struct gemm_level gemm_level_avx2, gemm_level_avx2_vnni;
extern const struct gemm_level gemm_level_avx512, gemm_level_avx512_vnni,
	gemm_level_avx512_bf16, gemm_level_amx_bf16, gemm_level_amx_int8;
/* The outer-product driver of the AVX-512 levels (cpu-gemm-avx512-op.c) for many
 * rows of float weights, bit for bit the avx512 tiles' order. */
size_t gemm_op_x_bytes(int64_t n, int64_t k);
int gemm_op_f32(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x,
		const void *w, const float *bias, int64_t n, int64_t k, int64_t m);
int gemm_op_f16(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x,
		const void *w, const float *bias, int64_t n, int64_t k, int64_t m);
int gemm_op_bf16(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x,
		 const void *w, const float *bias, int64_t n, int64_t k, int64_t m);
GEMM_OP_MULTI(gemm_op_multi_f32);
GEMM_OP_MULTI(gemm_op_multi_f16);
GEMM_OP_MULTI(gemm_op_multi_bf16);
/* The AMX driver (cpu-gemm-amx.c) for bf16 weights. */
size_t gemm_amx_x_bytes(int64_t n, int64_t k);
int gemm_amx_bf16(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x,
		  const void *w, const float *bias, int64_t n, int64_t k, int64_t m);
#endif

/* Runs fn over [0, n_items) on the pool, or all of it on the calling thread (as the
 * pool's thread 0, whose scratch it uses) when `inline_run`. */
void gemm_run_items(struct cpu_pool *pool, bool inline_run, int64_t n_items,
		    void (*fn)(void *arg, int tid, int64_t begin, int64_t end), void *arg);

/* A tile of 16 outputs x 16 tokens, row r = output o + r with a float per token
 * (as an AMX C tile stores them), into y (n x m) from token tok0, plus the bias;
 * outputs past m and tokens past n are not written. */
void gemm_tile_to_y(float *y, int64_t n, int64_t m, const float *bias, const float *tile, int64_t o,
		    int64_t tok0);

/* The level for isa (one this machine supports). */
const struct gemm_level *cpu_gemm_level(enum allm_cpu_isa isa);

/* Weight (row i, column p) of an [*, k] matrix stored as dt, as f32. */
static inline float gemm_wval(const void *w, enum allm_dtype dt, int64_t k, int64_t i,
			      int64_t p)
{
	switch (dt) {
	case ALLM_DTYPE_F16: return allm_f16_to_f32(((const uint16_t *)w)[i * k + p]);
	case ALLM_DTYPE_BF16: return allm_bf16_to_f32(((const uint16_t *)w)[i * k + p]);
	case ALLM_DTYPE_F32: return ((const float *)w)[i * k + p];
	default: return allm_qb_get(w, dt, k, i, p);
	}
}

/* Bytes between rows of W stored as dt. */
static inline size_t gemm_w_stride(enum allm_dtype dt, int64_t k)
{
	return allm_row_bytes(dt, k);
}

#endif
