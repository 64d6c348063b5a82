/* GGUF block weights on AMX tiles (the amx-int8 level, many tokens): yᵀ = W · xᵀ,
 * W the A operand (16 output rows), the tokens the B operand (16 columns), as
 * cpu-gemm-amx.c does for bf16. An item's 16 W rows are unpacked once into int8 A tiles
 * (a block of 32 quants a row, the integer of the format's formula: Q8_0 as stored,
 * Q4_0 q - 8, Q4_1 q) and f32 scales; the tokens, quantized as every family
 * quantizes them (cpu-gemm-qblock.h), are packed once per call into the B layout
 * (4 consecutive k of a token in a dword, 16 tokens a row). One TDPBSSD per block
 * gives the block's exact integers for 16 outputs x 16 tokens, and AVX-512 does the
 * fma per block of cpu-gemm.h with them (Q4_1: and the min's), so the bits are the
 * other families'. Two C tiles take turns, so one block's multiply runs while the
 * previous block is scaled. */
#include "cpu-gemm-qblock.h"
#include "cpu-gemm-x86.h"
#include "cpu-threads.h"

#include <stdatomic.h>

#ifdef GEMM_X86

#define TI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,amx-tile,amx-int8")))

#define QB_TOK 16 /* tokens per B tile */
/* From this many tokens the tiles, below them the VNNI items (qb_item_vnni: a tile
 * multiply costs as much for 1 token as for 16, and the unpacking of W per item
 * is shared by fewer tokens). */
#ifndef QB_AMX_MIN_ROWS
#define QB_AMX_MIN_ROWS 4
#endif
#define T_C0 0
#define T_C1 1
#define T_A0 4
#define T_A1 5
#define T_B0 6
#define T_B1 7

static int64_t groups_of(int64_t n)
{
	return (n + QB_TOK - 1) / QB_TOK;
}

/* One token group's packed activations: xp [k32 / 4][16] dwords, dx and sx [nb][16]. */
static size_t group_bytes(int64_t nb)
{
	return (size_t)nb * (8 * QB_TOK * 4 + 2 * QB_TOK * 4);
}

size_t qb_amx_x_bytes(int64_t n, int64_t k)
{
	return (size_t)groups_of(n) * group_bytes(allm_qb_blocks(k));
}

struct amx_run {
	struct qb_job *j;
	char *packed; /* groups of group_bytes(nb) */
};

static void pack_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	(void)tid;
	struct amx_run *a = arg;
	const struct qb_job *j = a->j;
	const int64_t nb = j->nb;
	for (int64_t g = begin; g < end; g++) {
		char *gp = a->packed + (size_t)g * group_bytes(nb);
		uint32_t *xp = (uint32_t *)gp;
		float *dxp = (float *)(gp + (size_t)nb * 8 * QB_TOK * 4), *sxp = dxp + nb * QB_TOK;
		int nt = (int)ALLM_MIN((int64_t)QB_TOK, j->n - g * QB_TOK);
		if (nt < QB_TOK)
			memset(gp, 0, group_bytes(nb));
		for (int t = 0; t < nt; t++) {
			struct qb_xrow x = qb_xrow(j->xbuf, j->k, g * QB_TOK + t);
			for (int64_t q = 0; q < nb * 8; q++)
				memcpy(xp + q * QB_TOK + t, x.xq + 4 * q, 4);
			for (int64_t b = 0; b < nb; b++) {
				dxp[b * QB_TOK + t] = x.dx[b];
				sxp[b * QB_TOK + t] = x.sx[b];
			}
		}
	}
}

/* Rows [o, o + 16) of mt (rows past m: the last real one) into A tiles [nb][16][32]
 * and scales [nb][16] (mins after them). */
static TI void unpack_item(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int8_t *a,
			   float *dw, float *mw)
{
	const enum allm_dtype dt = j->dt;
	const size_t qo = allm_qb_qs_offset(dt);
	const int rows = (int)ALLM_MIN((int64_t)QB_OUT, mt->m - o);
	const __m128i m4 = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
	for (int r = 0; r < QB_OUT; r++) {
		const uint8_t *row = mt->w + (size_t)(o + ALLM_MIN(r, rows - 1)) * j->rb;
		for (int64_t b = 0; b < j->nb; b++) {
			const uint8_t *blk = row + (size_t)b * j->bb;
			int8_t *dst = a + ((size_t)b * QB_OUT + r) * 32;
			uint16_t h[2];
			memcpy(h, blk, 4);
			dw[b * QB_OUT + r] = _cvtsh_ss(h[0]);
			if (dt == ALLM_DTYPE_Q4_1)
				mw[b * QB_OUT + r] = _cvtsh_ss(h[1]);
			if (dt == ALLM_DTYPE_Q8_0) {
				memcpy(dst, blk + qo, 32);
				continue;
			}
			__m128i z = _mm_loadu_si128((const __m128i *)(blk + qo));
			__m128i lo = _mm_and_si128(z, m4), hi = _mm_and_si128(_mm_srli_epi16(z, 4), m4);
			if (dt == ALLM_DTYPE_Q4_0)
				lo = _mm_sub_epi8(lo, eight), hi = _mm_sub_epi8(hi, eight);
			_mm_storeu_si128((__m128i *)dst, lo);
			_mm_storeu_si128((__m128i *)(dst + 16), hi);
		}
	}
}

/* One block's integers (a stored C tile: row r = output, lane = token) into the 16
 * accumulators: the fma(s) of cpu-gemm.h. */
INL TI void scale_block(const enum allm_dtype dt, __m512 acc[QB_OUT], const int32_t *ct,
			const float *dw, const float *mw, __m512 dxv, __m512 sxv)
{
	_Pragma("GCC unroll 16")
	for (int r = 0; r < QB_OUT; r++) {
		acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ct + r * QB_TOK)),
					 _mm512_mul_ps(_mm512_set1_ps(dw[r]), dxv), acc[r]);
		if (dt == ALLM_DTYPE_Q4_1)
			acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(mw[r]), sxv, acc[r]);
	}
}

/* All of k for one item (A tiles at a) and one token group. */
INL TI void run_group(const enum allm_dtype dt, const struct qb_job *j, const int8_t *a,
		      const float *dw, const float *mw, const char *gp, int32_t *c0, int32_t *c1,
		      __m512 acc[QB_OUT])
{
	const int64_t nb = j->nb;
	const uint32_t *xp = (const uint32_t *)gp;
	const float *dxp = (const float *)(gp + (size_t)nb * 8 * QB_TOK * 4), *sxp = dxp + nb * QB_TOK;
#define A_OF(b) (a + (size_t)(b) * QB_OUT * 32)
#define B_OF(b) (xp + (size_t)(b) * 8 * QB_TOK)
#define SCALE(b, c) \
	scale_block(dt, acc, c, dw + (b) * QB_OUT, mw + (b) * QB_OUT, _mm512_loadu_ps(dxp + (b) * QB_TOK), \
		    _mm512_loadu_ps(sxp + (b) * QB_TOK))
	_Pragma("GCC unroll 16")
	for (int r = 0; r < QB_OUT; r++)
		acc[r] = _mm512_setzero_ps();
	_tile_zero(T_C0);
	_tile_loadd(T_A0, A_OF(0), 32);
	_tile_loadd(T_B0, B_OF(0), QB_TOK * 4);
	_tile_dpbssd(T_C0, T_A0, T_B0);
	for (int64_t b = 0; b < nb; b += 2) {
		bool odd = b + 1 < nb;
		if (odd) {
			_tile_zero(T_C1);
			_tile_loadd(T_A1, A_OF(b + 1), 32);
			_tile_loadd(T_B1, B_OF(b + 1), QB_TOK * 4);
			_tile_dpbssd(T_C1, T_A1, T_B1);
		}
		_tile_stored(T_C0, c0, QB_TOK * 4);
		SCALE(b, c0);
		if (b + 2 < nb) {
			_tile_zero(T_C0);
			_tile_loadd(T_A0, A_OF(b + 2), 32);
			_tile_loadd(T_B0, B_OF(b + 2), QB_TOK * 4);
			_tile_dpbssd(T_C0, T_A0, T_B0);
		}
		if (odd) {
			_tile_stored(T_C1, c1, QB_TOK * 4);
			SCALE(b + 1, c1);
		}
	}
#undef A_OF
#undef B_OF
#undef SCALE
}

INL TI void amx_items(const enum allm_dtype dt, struct amx_run *ar, int tid, int64_t begin,
		      int64_t end)
{
	struct qb_job *j = ar->j;
	const int64_t nb = j->nb;
	size_t a_bytes = (size_t)nb * QB_OUT * 32, s_bytes = (size_t)nb * QB_OUT * 4;
	size_t ct_bytes = 2 * QB_OUT * QB_TOK * 4, yt_bytes = QB_OUT * QB_TOK * 4;
	char *s = cpu_pool_scratch_or_fail(j->pool, tid, ct_bytes + yt_bytes + a_bytes + 2 * s_bytes, &j->err);
	if (!s)
		return;
	int32_t *c0 = (int32_t *)s, *c1 = c0 + QB_OUT * QB_TOK;
	float *yt = (float *)(s + ct_bytes);
	int8_t *a = (int8_t *)(s + ct_bytes + yt_bytes);
	float *dw = (float *)(s + ct_bytes + yt_bytes + a_bytes), *mw = dw + nb * QB_OUT;
	struct gemm_amx_cfg cfg = { .palette = 1 };
	cfg.rows[T_C0] = cfg.rows[T_C1] = QB_OUT, cfg.colsb[T_C0] = cfg.colsb[T_C1] = QB_TOK * 4;
	cfg.rows[T_A0] = cfg.rows[T_A1] = QB_OUT, cfg.colsb[T_A0] = cfg.colsb[T_A1] = 32;
	cfg.rows[T_B0] = cfg.rows[T_B1] = 8, cfg.colsb[T_B0] = cfg.colsb[T_B1] = QB_TOK * 4;
	_tile_loadconfig(&cfg);
	int mi = 0;
	for (int64_t it = begin; it < end; it++) {
		while (j->first[mi + 1] <= it)
			mi++;
		const struct qb_mat *mt = &j->mat[mi];
		int64_t o = (it - j->first[mi]) * QB_OUT;
		unpack_item(j, mt, o, a, dw, mw);
		/* tileloadd is an asm without a memory operand: keep the stores above
		 * before the tile loads that read them */
		__asm__ volatile("" ::: "memory");
		for (int64_t g = 0; g < groups_of(j->n); g++) {
			__m512 acc[QB_OUT];
			run_group(dt, j, a, dw, mw, ar->packed + (size_t)g * group_bytes(nb), c0, c1, acc);
			_Pragma("GCC unroll 16")
			for (int r = 0; r < QB_OUT; r++)
				_mm512_storeu_ps(yt + r * QB_TOK, acc[r]);
			gemm_tile_to_y(mt->y, j->n, mt->m, mt->bias, yt, o, g * QB_TOK);
		}
	}
	/* a thread holding tile data makes every context switch save 8 KiB more */
	_tile_release();
}

static TI void amx_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct amx_run *ar = arg;
	switch (ar->j->dt) {
	case ALLM_DTYPE_Q8_0: amx_items(ALLM_DTYPE_Q8_0, ar, tid, begin, end); break;
	case ALLM_DTYPE_Q4_0: amx_items(ALLM_DTYPE_Q4_0, ar, tid, begin, end); break;
	default: amx_items(ALLM_DTYPE_Q4_1, ar, tid, begin, end); break;
	}
}

int qb_amx_whole(struct qb_job *j, bool inline_run, void *extra)
{
	struct amx_run ar = { j, extra };
	int64_t groups = groups_of(j->n);
	gemm_run_items(j->pool, inline_run || groups < 2, groups, pack_worker, &ar);
	gemm_run_items(j->pool, inline_run, j->first[j->n_mats], amx_worker, &ar);
	return atomic_load(&j->err);
}

const struct qb_impl qb_impl_amx = {
	.x_prep = qb_x_prep_avx2, .item = qb_item_vnni, .whole = qb_amx_whole,
	.whole_min_rows = QB_AMX_MIN_ROWS,
};

#endif /* GEMM_X86 */
