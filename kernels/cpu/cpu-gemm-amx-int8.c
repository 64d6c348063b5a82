/* GEMM level amx-int8, int8 weights (--quant int8) against int8 activations on
 * Intel AMX tiles (TDPBSSD); everything else as amx-bf16.
 *
 * As in cpu-gemm-amx.c the product is yᵀ = W · xᵀ: 16 rows of W's quants, read in
 * place, are the A operand; the activations, quantized per block of 32 exactly as
 * the VNNI levels quantize them (gemm_q8x_prep), are rearranged once per call into
 * the B layout (4 consecutive k of a token in a dword, 16 tokens a row), their block
 * scales beside them. One TDPBSSD per block of 32 k gives that block's exact
 * integer dot products for 16 outputs x 16 tokens; AVX-512 then scales them and
 * accumulates in f32. Two C tiles take turns, so a block's tile multiply runs
 * while the previous block is scaled.
 *
 * The order (cpu-gemm.h), per output element: from +0, for each block b in
 * increasing order, acc = fma((float)I_b, dw_b * dx_b, acc), where I_b is the exact
 * integer sum of the block's 32 products (|I_b| < 2^24, so exact in f32 too); then
 * y = acc + bias. Nothing in it depends on n, on the tile an element falls in or on
 * the thread, so rows are batch-invariant; and the formula is exact arithmetic plus
 * one fma per block, so a scalar restatement of it gives the same bits
 * (tests/test-cpu-gemm.c checks that).
 *
 * Decode (a few rows) does not go through the tiles: a tile multiply is as dear for
 * one token as for 16, and there W streams from memory. AVX512-VNNI computes the
 * same block integers there (dpbusd: exact sums of 4 products per lane, then the 8
 * lanes of a block added, integers, in any order) and the same fma per block, so
 * the bits do not depend on which path a call took. */
#include "cpu-gemm.h"
#include "cpu-gemm-x86.h"
#include "cpu-threads.h"

#include <errno.h>
#include <stdatomic.h>

#ifdef GEMM_X86

#define TI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,amx-tile,amx-int8")))
#define TV __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

#define Q8_OUT 16 /* outputs per item: one A tile */
#define Q8_TOK 16 /* tokens per B tile */
#define Q8_K 32 /* k per TDPBSSD: one scale block */
/* Up to this many rows the VNNI path, above it the tiles. Measured on --dummy
 * medium --quant int8, batched decode (allm-run, 2 threads): 2 sequences 584 vs
 * 499-543 tok/s for VNNI, 4 sequences 628-637 vs 710-736 for the tiles. */
#ifndef Q8_DECODE_ROWS
#define Q8_DECODE_ROWS 2
#endif
/* tile registers (literal numbers: the intrinsics paste them into the asm): C of
 * even and odd blocks, their A and B operands */
#define T_C0 0
#define T_C1 1
#define T_A0 4
#define T_A1 5
#define T_B0 6
#define T_B1 7

struct q8_job {
	float *y;
	const int8_t *xr; /* decode: [n] rows of gemm_q8x_prep */
	uint32_t *xp; /* [groups][k32 / 4][16]: 4 int8 of a token per dword */
	float *dxp; /* [groups][nb][16]: the activations' block scales */
	const float *x;
	const uint8_t *w;
	const float *bias;
	int64_t n, k, m, k32, nb, groups;
	size_t rb; /* bytes per W row (quant.h) */
	struct cpu_pool *pool;
	_Atomic int err;
};

static int64_t q8_groups(int64_t n)
{
	return (n + Q8_TOK - 1) / Q8_TOK;
}

static size_t group_xp_bytes(int64_t k32)
{
	return (size_t)k32 / 4 * Q8_TOK * 4;
}

static size_t group_dx_bytes(int64_t k32)
{
	return (size_t)k32 / Q8_K * Q8_TOK * 4;
}

size_t gemm_amx_q8_x_bytes(int64_t n, int64_t k)
{
	int64_t k32 = allm_q8_k32(k);
	if (n <= Q8_DECODE_ROWS)
		return (size_t)n * gemm_q8x_row_bytes(k);
	return (size_t)q8_groups(n) * (group_xp_bytes(k32) + group_dx_bytes(k32));
}

/* Token groups [begin, end) into the B layout; tokens past n are zeros. */
static void q8_pack_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct q8_job *j = arg;
	const int64_t quads = j->k32 / 4;
	int8_t *row = cpu_pool_scratch_or_fail(j->pool, tid, gemm_q8x_row_bytes(j->k), &j->err);
	if (!row)
		return;
	const float *dx = (const float *)(row + 2 * j->k32); /* gemm_q8x_prep's layout */
	for (int64_t g = begin; g < end; g++) {
		uint32_t *dst = j->xp + (size_t)g * quads * Q8_TOK;
		float *dxd = j->dxp + (size_t)g * j->nb * Q8_TOK;
		int nt = (int)ALLM_MIN((int64_t)Q8_TOK, j->n - g * Q8_TOK);
		if (nt < Q8_TOK) {
			memset(dst, 0, group_xp_bytes(j->k32));
			memset(dxd, 0, group_dx_bytes(j->k32));
		}
		for (int t = 0; t < nt; t++) {
			gemm_q8x_prep(row, j->x + (g * Q8_TOK + t) * j->k, j->k);
			for (int64_t q = 0; q < quads; q++)
				memcpy(dst + q * Q8_TOK + t, row + 4 * q, 4);
			for (int64_t b = 0; b < j->nb; b++)
				dxd[b * Q8_TOK + t] = dx[b];
		}
	}
}

/* The W rows of the item after item it (in this thread's [.., end)), for the
 * prefetch: NULL when there is none or it would run past m. Rows of medium's
 * int8 W are 832-2240 bytes, too short for the hardware prefetcher to catch 16 of
 * them at once (without it decode ran at half the VNNI level's rate). */
static const uint8_t *next_rows(const struct q8_job *j, int64_t it, int64_t end)
{
	int64_t o = (it + 1) * Q8_OUT;
	return it + 1 < end && o + Q8_OUT <= j->m ? j->w + (size_t)o * j->rb : NULL;
}

/* One block's integers (a stored C tile) scaled into the 16 accumulators (one per
 * output row, a lane per token). */
INL TI void q8_scale(__m512 acc[Q8_OUT], const int32_t *ct, const float *dwf, int64_t nb,
		     int64_t b, __m512 dxv)
{
	_Pragma("GCC unroll 16")
	for (int r = 0; r < Q8_OUT; r++)
		acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ct + r * Q8_TOK)),
					 _mm512_mul_ps(_mm512_set1_ps(dwf[r * nb + b]), dxv), acc[r]);
}

/* acc (16 outputs from o, 16 tokens from tok0) into y, plus the bias. */
static TI void q8_store(const struct q8_job *j, __m512 acc[Q8_OUT], float *yt, int64_t o,
			int64_t tok0)
{
	_Pragma("GCC unroll 16")
	for (int r = 0; r < Q8_OUT; r++)
		_mm512_storeu_ps(yt + r * Q8_TOK, acc[r]);
	gemm_tile_to_y(j->y, j->n, j->m, j->bias, yt, o, tok0);
}

/* All of k for 16 outputs (A from a, lda apart) and one token group. */
static TI void q8_group(const struct q8_job *j, const uint8_t *a, size_t lda, int64_t g,
			const uint8_t *next, const float *dwf, int32_t *c0, int32_t *c1,
			__m512 acc[Q8_OUT])
{
	const uint32_t *bg = j->xp + (size_t)g * (j->k32 / 4) * Q8_TOK;
	const float *dxg = j->dxp + (size_t)g * j->nb * Q8_TOK;
	const int64_t nb = j->nb;
#define A_OF(b) (a + (b) * Q8_K)
#define B_OF(b) (bg + (b) * (Q8_K / 4) * Q8_TOK)
	_Pragma("GCC unroll 16")
	for (int r = 0; r < Q8_OUT; r++)
		acc[r] = _mm512_setzero_ps();
	_tile_zero(T_C0);
	_tile_loadd(T_A0, A_OF(0), lda);
	_tile_loadd(T_B0, B_OF(0), Q8_TOK * 4);
	_tile_dpbssd(T_C0, T_A0, T_B0);
	for (int64_t b = 0; b < nb; b += 2) {
		bool odd = b + 1 < nb;
		if (next) /* the next item's rows (next_rows), a line each per two blocks */
			for (int r = 0; r < Q8_OUT; r++)
				_mm_prefetch((const char *)next + (size_t)r * lda + b * Q8_K, _MM_HINT_T0);
		if (odd) {
			_tile_zero(T_C1);
			_tile_loadd(T_A1, A_OF(b + 1), lda);
			_tile_loadd(T_B1, B_OF(b + 1), Q8_TOK * 4);
			_tile_dpbssd(T_C1, T_A1, T_B1);
		}
		_tile_stored(T_C0, c0, Q8_TOK * 4);
		q8_scale(acc, c0, dwf, nb, b, _mm512_loadu_ps(dxg + b * Q8_TOK));
		if (b + 2 < nb) {
			_tile_zero(T_C0);
			_tile_loadd(T_A0, A_OF(b + 2), lda);
			_tile_loadd(T_B0, B_OF(b + 2), Q8_TOK * 4);
			_tile_dpbssd(T_C0, T_A0, T_B0);
		}
		if (odd) {
			_tile_stored(T_C1, c1, Q8_TOK * 4);
			q8_scale(acc, c1, dwf, nb, b + 1, _mm512_loadu_ps(dxg + (b + 1) * Q8_TOK));
		}
	}
#undef A_OF
#undef B_OF
}

static TI void q8_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct q8_job *j = arg;
	const int64_t nb = j->nb;
	/* two C tiles, the output transposed, the scales as f32, a padded W copy for
	 * the last item when m is not a multiple of 16 */
	size_t ct_bytes = 2 * Q8_OUT * Q8_TOK * 4, yt_bytes = Q8_OUT * Q8_TOK * 4;
	size_t dwf_bytes = ((size_t)Q8_OUT * nb * 4 + 63) & ~(size_t)63;
	char *s = cpu_pool_scratch_or_fail(j->pool, tid, ct_bytes + yt_bytes + dwf_bytes + Q8_OUT * j->rb,
					   &j->err);
	if (!s)
		return;
	int32_t *c0 = (int32_t *)s, *c1 = c0 + Q8_OUT * Q8_TOK;
	float *yt = (float *)(s + ct_bytes), *dwf = (float *)(s + ct_bytes + yt_bytes);
	uint8_t *wpad = (uint8_t *)s + ct_bytes + yt_bytes + dwf_bytes;
	struct gemm_amx_cfg cfg = { .palette = 1 };
	cfg.rows[T_C0] = cfg.rows[T_C1] = Q8_OUT, cfg.colsb[T_C0] = cfg.colsb[T_C1] = Q8_TOK * 4;
	cfg.rows[T_A0] = cfg.rows[T_A1] = Q8_OUT, cfg.colsb[T_A0] = cfg.colsb[T_A1] = Q8_K;
	cfg.rows[T_B0] = cfg.rows[T_B1] = Q8_K / 4, cfg.colsb[T_B0] = cfg.colsb[T_B1] = Q8_TOK * 4;
	_tile_loadconfig(&cfg);

	for (int64_t it = begin; it < end; it++) {
		int64_t o = it * Q8_OUT;
		int rows = (int)ALLM_MIN((int64_t)Q8_OUT, j->m - o);
		const uint8_t *a = j->w + (size_t)o * j->rb;
		if (rows < Q8_OUT) { /* rows past m: zeros (quants and scales) */
			memset(wpad, 0, Q8_OUT * j->rb);
			memcpy(wpad, a, (size_t)rows * j->rb);
			/* tileloadd is an asm without a memory operand: keep these stores
			 * before the tile loads that read them */
			__asm__ volatile("" ::: "memory");
			a = wpad;
		}
		for (int r = 0; r < Q8_OUT; r++) {
			const uint16_t *d = (const uint16_t *)(a + (size_t)r * j->rb + j->k32);
			for (int64_t b = 0; b < nb; b++)
				dwf[r * nb + b] = gemm_bf16f(d[b]);
		}
		const uint8_t *next = next_rows(j, it, end);
		for (int64_t g = 0; g < j->groups; g++) {
			__m512 acc[Q8_OUT];
			q8_group(j, a, j->rb, g, g == 0 ? next : NULL, dwf, c0, c1, acc);
			q8_store(j, acc, yt, o, g * Q8_TOK);
		}
	}
	/* a thread holding tile data makes every context switch save 8 KiB more */
	_tile_release();
}

/* --- decode: AVX512-VNNI, the same integers and the same fma per block ---------- */

/* The exact integer sums of one 64-byte chunk for 16 rows: v[r] lane j holds 4
 * products of row r; block 2q is lanes 0-7, block 2q + 1 lanes 8-15. Returns them
 * transposed: e (block 2q) and o (block 2q + 1), lane r = row r. */
INL TV void chunk_sums(const __m512i v[Q8_OUT], __m512i *e, __m512i *o)
{
	__m512i x[8], y[4], z[2];
	for (int i = 0; i < 8; i++) /* per 128-bit lane: a0+a2, b0+b2, a1+a3, b1+b3 */
		x[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
					_mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
	for (int i = 0; i < 4; i++) /* per 128-bit lane: the 4 sums of rows 4i .. 4i + 3 */
		y[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(x[2 * i], x[2 * i + 1]),
					_mm512_unpackhi_epi64(x[2 * i], x[2 * i + 1]));
	for (int i = 0; i < 2; i++) /* lanes: even block of y[2i], odd, even of y[2i+1], odd */
		z[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(y[2 * i], y[2 * i + 1], 0x88),
					_mm512_shuffle_i32x4(y[2 * i], y[2 * i + 1], 0xdd));
	*e = _mm512_shuffle_i32x4(z[0], z[1], 0x88);
	*o = _mm512_shuffle_i32x4(z[0], z[1], 0xdd);
}

/* 16 outputs from o (W rows at a, `rows` of them real) for every token. */
static TV void q8_decode_item(const struct q8_job *j, const uint8_t *a, int64_t o, int rows,
			      const uint8_t *next, float *dwt, float *yt)
{
	const int64_t nb = j->nb, quads = j->k32 / 64;
	const size_t xrb = gemm_q8x_row_bytes(j->k);
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	const uint8_t *w[Q8_OUT];
	for (int r = 0; r < Q8_OUT; r++) /* rows past m read the last real one, unused */
		w[r] = a + (size_t)ALLM_MIN(r, rows - 1) * j->rb;
	for (int64_t b = 0; b < nb; b++) /* the scales of block b, lane r = row r */
		for (int r = 0; r < Q8_OUT; r++)
			dwt[b * Q8_OUT + r] = gemm_bf16f(((const uint16_t *)(w[r] + j->k32))[b]);
	for (int64_t t = 0; t < j->n; t++) {
		const int8_t *xq = j->xr + (size_t)t * xrb;
		const int32_t *corr = (const int32_t *)(xq + j->k32);
		const float *dx = (const float *)(xq + 2 * j->k32);
		__m512 acc = _mm512_setzero_ps();
		for (int64_t q = 0; q <= quads; q++) {
			bool half = q == quads; /* an odd last block: 32 bytes */
			if (half && nb % 2 == 0)
				break;
			const __mmask64 mb = half ? 0xffffffffull : ~0ull;
			__m512i xv = _mm512_maskz_loadu_epi8(mb, xq + q * 64);
			__m512i cv = _mm512_maskz_loadu_epi32(half ? 0x00ff : 0xffff, corr + q * 16);
			__m512i v[Q8_OUT], e, od;
			/* W streams from memory in rows of a few hundred bytes, too short for
			 * the hardware prefetcher: the next item's rows are asked for as this
			 * one goes (its first token only: the others find W in L1/L2) */
			if (next && t == 0)
				for (int r = 0; r < Q8_OUT; r++)
					_mm_prefetch((const char *)next + (size_t)r * j->rb + q * 64, _MM_HINT_T0);
			_Pragma("GCC unroll 16")
			for (int r = 0; r < Q8_OUT; r++)
				v[r] = _mm512_dpbusd_epi32(
					cv, _mm512_xor_si512(_mm512_maskz_loadu_epi8(mb, w[r] + q * 64), flip), xv);
			chunk_sums(v, &e, &od);
			acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(e),
					      _mm512_mul_ps(_mm512_loadu_ps(dwt + 2 * q * Q8_OUT),
							    _mm512_set1_ps(dx[2 * q])), acc);
			if (!half)
				acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(od),
						      _mm512_mul_ps(_mm512_loadu_ps(dwt + (2 * q + 1) * Q8_OUT),
								    _mm512_set1_ps(dx[2 * q + 1])), acc);
		}
		_mm512_storeu_ps(yt, acc);
		float *y = j->y + t * j->m + o;
		for (int r = 0; r < rows; r++)
			y[r] = j->bias ? yt[r] + j->bias[o + r] : yt[r];
	}
}

static TV void q8_decode_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct q8_job *j = arg;
	size_t dwt_bytes = ((size_t)j->nb * Q8_OUT * 4 + 63) & ~(size_t)63;
	char *s = cpu_pool_scratch_or_fail(j->pool, tid, dwt_bytes + Q8_OUT * 4, &j->err);
	if (!s)
		return;
	for (int64_t it = begin; it < end; it++) {
		int64_t o = it * Q8_OUT;
		const uint8_t *next = next_rows(j, it, end);
		q8_decode_item(j, j->w + (size_t)o * j->rb, o, (int)ALLM_MIN((int64_t)Q8_OUT, j->m - o),
			       next, (float *)s, (float *)(s + dwt_bytes));
	}
}

static void q8_prep_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	(void)tid;
	struct q8_job *j = arg;
	for (int64_t t = begin; t < end; t++)
		gemm_q8x_prep((int8_t *)j->xr + (size_t)t * gemm_q8x_row_bytes(j->k), j->x + t * j->k, j->k);
}

int gemm_amx_q8(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x,
		const void *w, const float *bias, int64_t n, int64_t k, int64_t m)
{
	int64_t k32 = allm_q8_k32(k), groups = q8_groups(n);
	struct q8_job j = {
		.y = y, .xp = xbuf, .dxp = (float *)((char *)xbuf + groups * group_xp_bytes(k32)),
		.x = x, .w = w, .bias = bias, .n = n, .k = k, .m = m, .k32 = k32, .nb = k32 / Q8_K,
		.groups = groups, .rb = allm_q8_row_bytes(k), .pool = pool,
	};
	if (n <= Q8_DECODE_ROWS) {
		j.xr = xbuf;
		gemm_run_items(pool, true, n, q8_prep_worker, &j);
		gemm_run_items(pool, inline_run, (m + Q8_OUT - 1) / Q8_OUT, q8_decode_worker, &j);
		return atomic_load(&j.err);
	}
	gemm_run_items(pool, inline_run || groups < 2, groups, q8_pack_worker, &j);
	if (atomic_load(&j.err))
		return atomic_load(&j.err);
	gemm_run_items(pool, inline_run, (m + Q8_OUT - 1) / Q8_OUT, q8_worker, &j);
	return atomic_load(&j.err);
}

#endif /* GEMM_X86 */
