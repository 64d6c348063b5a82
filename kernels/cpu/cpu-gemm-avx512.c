/* GEMM levels avx512 (AVX-512 F/BW/VL), avx512-vnni (+ VNNI: the GGUF block
 * formats' vpdpbusd items, cpu-gemm-qblock-x86.c) and avx512-bf16 (+ BF16: bf16 x
 * bf16 with vdpbf16ps), and the float kernels of the AMX levels. Per-function
 * target attributes; nothing here runs unless cpu-isa.c found the instructions and
 * the OS saves ZMM state. One zmm holds an output element's 16 partial sums, in the
 * order cpu-gemm.h defines. */
#include "cpu-gemm.h"
#include "cpu-gemm-x86.h"
#include "cpu-gemm-qblock.h"

#ifdef GEMM_X86

#define T5B __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16")))

/* FMA tiles: 6 rows x 4 columns (24 accumulators, 4 W vectors, 1 x): in the blocked
 * path the block of W streams from L2 and the 6 rows of x sit in L1, so few columns
 * and many rows load the least from L2 per FMA (measured: 6x4 > 4x5 > 8x3). */
#define AVX512_ROWS 6
#define AVX512_COLS 4
#ifndef AVX512_DECODE_COLS
#define AVX512_DECODE_COLS 8 /* n <= 2: 2 x 8 tiles, 8 rows of W streaming */
#endif
#define FMA_ACC_COLS (AVX512_DECODE_COLS > AVX512_COLS ? AVX512_DECODE_COLS : AVX512_COLS)

/* The lane tree of cpu-gemm.h: lanes j + j+8, then j + j+4, j + j+2, j + j+1. */
INL T5 float reduce16(__m512 v)
{
	__m256 lo = _mm512_castps512_ps256(v);
	__m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
	__m256 h8 = _mm256_add_ps(lo, hi);
	__m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
	__m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
	return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

/* Loads or reduces the accumulators of a tile (part: one zmm per element). */
#define TILE_BEGIN(acc, R, C, t) \
	UNROLL \
	for (int r_ = 0; r_ < R; r_++) \
		UNROLL \
		for (int c_ = 0; c_ < C; c_++) \
			acc[r_][c_] = (t)->first ? _mm512_setzero_ps() \
						 : ((const __m512 *)(t)->part)[r_ * C + c_];
/* Four reductions at once, the same tree per element (cpu-gemm.h): lanes j + j+8
 * (quarters 0+2, 1+3), then j + j+4, j + j+2, j + j+1; results a, b, c, d. */
INL T5 __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d)
{
	__m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
	__m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
	__m512 s4 = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88),
				  _mm512_shuffle_f32x4(ab, cd, 0xdd));
	__m512 s2 = _mm512_add_ps(s4, _mm512_permute_ps(s4, 0x4e));
	__m512 s1 = _mm512_add_ps(s2, _mm512_permute_ps(s2, 0xb1));
	return _mm512_castps512_ps128(
		_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s1));
}

/* Stores the partial sums, or reduces them into y (+ bias). */
#define TILE_END(acc, R, C, t) \
	do { \
		if (!(t)->last) { \
			UNROLL \
			for (int r_ = 0; r_ < R; r_++) \
				UNROLL \
				for (int c_ = 0; c_ < C; c_++) \
					((__m512 *)(t)->part)[r_ * C + c_] = acc[r_][c_]; \
			break; \
		} \
		UNROLL \
		for (int r_ = 0; r_ < R; r_++) { \
			float *y_ = (t)->y + r_ * (t)->ldy; \
			int c_ = 0; \
			UNROLL \
			for (; c_ + 4 <= C; c_ += 4) { \
				__m128 s_ = reduce4(acc[r_][c_], acc[r_][c_ + 1], acc[r_][c_ + 2], \
						    acc[r_][c_ + 3]); \
				if ((t)->bias) \
					s_ = _mm_add_ps(s_, _mm_loadu_ps((t)->bias + c_)); \
				_mm_storeu_ps(y_ + c_, s_); \
			} \
			UNROLL \
			for (; c_ < C; c_++) { \
				float s_ = reduce16(acc[r_][c_]); \
				y_[c_] = (t)->bias ? s_ + (t)->bias[c_] : s_; \
			} \
		} \
	} while (0)

/* One step of 16 k of the FMA tile. */
INL T5 void fma_step(const int R, const int C, const enum allm_dtype dt,
		     __m512 acc[AVX512_ROWS][FMA_ACC_COLS], const float *const *x,
		     const char *const *w, int64_t p, int64_t w_p0, const __mmask16 m, size_t pf)
{
	const int eb = dt == ALLM_DTYPE_F32 ? 4 : 2;
	__m512 wv[FMA_ACC_COLS];
	UNROLL
	for (int c = 0; c < C; c++) {
		if (pf && ((p - w_p0) * eb & 63) == 0) /* once per cache line */
			_mm_prefetch(w[c] + (p - w_p0) * eb + pf, _MM_HINT_T1);
		wv[c] = w16(dt, w[c], p - w_p0, m);
	}
	UNROLL
	for (int r = 0; r < R; r++) {
		__m512 xv = m == 0xffff ? _mm512_loadu_ps(x[r] + p) : _mm512_maskz_loadu_ps(m, x[r] + p);
		UNROLL
		for (int c = 0; c < C; c++)
			acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
	}
}

/* The FMA tile: R x C elements over [p0, p0 + kc), f32 activations. */
INL T5 void tile_fma(const int R, const int C, const enum allm_dtype dt,
		     const struct gemm_tile *t)
{
	__m512 acc[AVX512_ROWS][FMA_ACC_COLS];
	const float *x[AVX512_ROWS];
	const char *w[FMA_ACC_COLS];
	TILE_BEGIN(acc, R, C, t);
	UNROLL
	for (int r = 0; r < R; r++)
		x[r] = (const float *)((const char *)t->x + (size_t)r * t->x_stride);
	UNROLL
	for (int c = 0; c < C; c++)
		w[c] = (const char *)t->w + (size_t)c * t->w_stride;
	int64_t p = t->p0, end = t->p0 + t->kc;
	for (; p + 16 <= end; p += 16)
		fma_step(R, C, dt, acc, x, w, p, t->w_p0, 0xffff, t->prefetch);
	if (p < end)
		fma_step(R, C, dt, acc, x, w, p, t->w_p0, (__mmask16)((1u << (end - p)) - 1), 0);
	TILE_END(acc, R, C, t);
}

#define FMA_TILE(R, C, DT) tile_fma(R, C, DT, t)
static T5 void tile_f32(const struct gemm_tile *t) { TILE_DISPATCH_6x4_2x8(FMA_TILE, ALLM_DTYPE_F32); }
static T5 void tile_f16(const struct gemm_tile *t) { TILE_DISPATCH_6x4_2x8(FMA_TILE, ALLM_DTYPE_F16); }
static T5 void tile_bf16(const struct gemm_tile *t) { TILE_DISPATCH_6x4_2x8(FMA_TILE, ALLM_DTYPE_BF16); }

/* --- bf16 x bf16 (AVX512_BF16) ------------------------------------------------- */

/* Activations rounded to bf16 (nearest even), k32 per row, zero past k. */
static size_t bf16x_row_bytes(int64_t k)
{
	return ((size_t)gemm_k32(k) * 2 + 63) & ~(size_t)63;
}

static T5B void bf16x_prep(void *dst, const float *x, int64_t k)
{
	const int64_t k32 = gemm_k32(k);
	for (int64_t p = 0; p < k32; p += 32) {
		__mmask16 m0 = 0xffff, m1 = 0xffff;
		if (p + 32 > k) {
			int64_t rem = k - p;
			m0 = rem >= 16 ? 0xffff : (__mmask16)((1u << rem) - 1);
			m1 = rem <= 16 ? 0 : (__mmask16)((1u << (rem - 16)) - 1);
		}
		__m512 lo = _mm512_maskz_loadu_ps(m0, x + p), hi = _mm512_maskz_loadu_ps(m1, x + p + 16);
		_mm512_storeu_si512((char *)dst + p * 2, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
	}
}

INL T5B void tile_dpbf16(const int R, const int C, const struct gemm_tile *t)
{
	__m512 acc[AVX512_ROWS][FMA_ACC_COLS];
	const uint16_t *x[AVX512_ROWS], *w[FMA_ACC_COLS];
	TILE_BEGIN(acc, R, C, t);
	UNROLL
	for (int r = 0; r < R; r++)
		x[r] = (const uint16_t *)((const char *)t->x + (size_t)r * t->x_stride);
	UNROLL
	for (int c = 0; c < C; c++)
		w[c] = (const uint16_t *)((const char *)t->w + (size_t)c * t->w_stride);
	int64_t p = t->p0, end = t->p0 + t->kc;
	__mmask32 m = 0xffffffffu;
	/* the prefetch distance in a register, and plain loads but for the last
	 * step: its reload from *t, and masked loads, had the decode chain 1-1.5 %
	 * slower against a plain read (bench-decode-gemv, 3 of 3 alternations) */
	const size_t pf = t->prefetch;
	for (;;) {
		if (p + 32 > end) {
			if (p >= end)
				break;
			m = (__mmask32)((1ull << (end - p)) - 1);
		}
		__m512bh wv[FMA_ACC_COLS];
		UNROLL
		for (int c = 0; c < C; c++) {
			if (pf)
				_mm_prefetch((const char *)(w[c] + p) + pf, _MM_HINT_T1);
			wv[c] = m == 0xffffffffu ? (__m512bh)_mm512_loadu_si512(w[c] + p)
						 : (__m512bh)_mm512_maskz_loadu_epi16(m, w[c] + p);
		}
		UNROLL
		for (int r = 0; r < R; r++) { /* rows are zero-padded to k32 */
			__m512bh xv = (__m512bh)_mm512_loadu_si512(x[r] + p);
			UNROLL
			for (int c = 0; c < C; c++)
				acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv, wv[c]);
		}
		p += 32;
	}
	TILE_END(acc, R, C, t);
}

#define BF16_TILE(R, C, unused) tile_dpbf16(R, C, t)
static T5B void tile_bf16_dp(const struct gemm_tile *t) { TILE_DISPATCH_6x4_2x8(BF16_TILE, 0); }

/* --- the levels ------------------------------------------------------------------ */

/* From this many rows and this k on, the outer-product driver (cpu-gemm-avx512-op.c):
 * the same bits, faster once its packing of W is shared by enough rows and its 16
 * passes over k are long enough (measured, 2 threads: 256 x k x 512 is slower at
 * k = 64 and 128, faster from 192). */
#define AVX512_OP_ROWS 16
#define AVX512_OP_K 192
#define KERN(fn, conv, op, multi) \
	{ .max_rows = AVX512_ROWS, .max_cols = AVX512_COLS, .decode_cols = AVX512_DECODE_COLS, \
	  .tile = fn, .w_to_f32 = conv, .tile_f32 = tile_f32, .whole_x_bytes = gemm_op_x_bytes, \
	  .whole = op, .whole_min_rows = AVX512_OP_ROWS, .whole_min_k = AVX512_OP_K, \
	  .whole_multi = multi }
static const struct gemm_kern
	k_f32 = KERN(tile_f32, gemm_f32_copy, gemm_op_f32, gemm_op_multi_f32),
	k_f16 = KERN(tile_f16, gemm_avx2_f16_to_f32, gemm_op_f16, gemm_op_multi_f16),
	k_bf16 = KERN(tile_bf16, gemm_avx2_bf16_to_f32, gemm_op_bf16, gemm_op_multi_bf16);
/* Decode streams 8 rows of W at once, as the f32/f16 kernels do: end to end the bf16
 * dot-product kernel had measured no better than 4 (99-108 vs 110-114 tok/s, within
 * an AMD EPYC's noise), but bench-decode-gemv, alternating 4 and 8 rows step by
 * step, has 8 rows 2.5-9 % faster in each of 3 runs. Bits do not change: each
 * output keeps its own chain and reduction tree. */
static const struct gemm_kern k_bf16_dp = {
	.max_rows = AVX512_ROWS, .max_cols = AVX512_COLS, .decode_cols = AVX512_DECODE_COLS, .tile = tile_bf16_dp,
	.x_prep = bf16x_prep, .x_row_bytes = bf16x_row_bytes,
};

/* GGUF block weights (cpu-gemm-qblock-x86.c): without VNNI the AVX2 family's
 * kernels, with it the 16-row vpdpbusd items */
#define QB_AVX2 gemm_qb_avx2
#define QB_VNNI gemm_qb_vnni
const struct gemm_level gemm_level_avx512 = { ALLM_CPU_ISA_AVX512, &k_f32, &k_f16, &k_bf16, QB_AVX2 };
const struct gemm_level gemm_level_avx512_vnni = {
	ALLM_CPU_ISA_AVX512_VNNI, &k_f32, &k_f16, &k_bf16, QB_VNNI,
};
const struct gemm_level gemm_level_avx512_bf16 = {
	ALLM_CPU_ISA_AVX512_BF16, &k_f32, &k_f16, &k_bf16_dp, QB_VNNI,
};
/* bf16 weights on AMX tiles (cpu-gemm-amx.c), the rest as avx512-vnni */
static const struct gemm_kern k_bf16_amx = {
	.whole_x_bytes = gemm_amx_x_bytes, .whole = gemm_amx_bf16,
};
const struct gemm_level gemm_level_amx_bf16 = {
	ALLM_CPU_ISA_AMX_BF16, &k_f32, &k_f16, &k_bf16_amx, QB_VNNI,
};
/* and GGUF block weights on tiles from a few tokens on (cpu-gemm-qblock-amx.c) */
const struct gemm_level gemm_level_amx_int8 = {
	ALLM_CPU_ISA_AMX_INT8, &k_f32, &k_f16, &k_bf16_amx, gemm_qb_amx,
};

#endif /* GEMM_X86 */
