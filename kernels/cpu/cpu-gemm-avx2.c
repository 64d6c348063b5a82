/* GEMM levels avx2 (AVX2 + FMA + F16C) and avx2-vnni (+ AVX-VNNI: the same float
 * kernels; GGUF block weights take cpu-gemm-qblock-x86.c's AVX2 family on both).
 * Per-function target attributes: the file builds with the project's portable
 * flags and these functions only run once cpu-isa.c found the instructions (and
 * the OS state).
 *
 * Every output element keeps 8 partial sums in one ymm, the order cpu-gemm.h
 * defines for these levels. (16 lanes in two ymm would equal the AVX-512 levels'
 * bits, but with 16 registers that leaves 2 x 2 tiles that load as much as they
 * compute: a third of the speed of the 4 x 3 tiles below.) */
#include "cpu-gemm.h"
#include "cpu-gemm-x86.h"
#include "cpu-gemm-qblock.h"

#ifdef GEMM_X86

#define T2 __attribute__((target("avx2,fma,f16c")))

#define AVX2_ROWS 4 /* tile: 4 rows x 3 columns = 12 accumulators, 3 W, 1 x */
#define AVX2_COLS 3

/* The 8-lane tree: lanes j + j+4, then j + j+2, then j + j+1. */
INL T2 float reduce8(__m256 v)
{
	__m128 h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	__m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
	return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

/* 8 weights of a row from element e, as f32. */
INL T2 __m256 w8(const enum allm_dtype dt, const char *row, int64_t e)
{
	switch (dt) {
	case ALLM_DTYPE_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + e)));
	case ALLM_DTYPE_BF16:
		return _mm256_castsi256_ps(_mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + e))),
			16));
	default:
		return _mm256_loadu_ps((const float *)row + e);
	}
}

/* Loads or stores a tile's partial sums; or reduces them into y (+ bias). */
#define TILE2_BEGIN(acc, R, C, t) \
	UNROLL \
	for (int r_ = 0; r_ < R; r_++) \
		UNROLL \
		for (int c_ = 0; c_ < C; c_++) \
			acc[r_][c_] = (t)->first ? _mm256_setzero_ps() \
						 : ((const __m256 *)(t)->part)[r_ * C + c_];
#define TILE2_END(acc, R, C, t) \
	UNROLL \
	for (int r_ = 0; r_ < R; r_++) \
		UNROLL \
		for (int c_ = 0; c_ < C; c_++) { \
			if (!(t)->last) { \
				((__m256 *)(t)->part)[r_ * C + c_] = acc[r_][c_]; \
				continue; \
			} \
			float s_ = reduce8(acc[r_][c_]); \
			(t)->y[r_ * (t)->ldy + c_] = (t)->bias ? s_ + (t)->bias[c_] : s_; \
		}

/* One step of 8 k: x from xs[r] + e_x, W from ws[c] + e_w (their own indices, so
 * the k tail can run over zero-padded copies). */
INL T2 void fma_step(const int R, const int C, const enum allm_dtype dt,
		     __m256 acc[AVX2_ROWS][AVX2_COLS], const float *const *xs, int64_t ex,
		     const char *const *ws, int64_t ew, size_t pf)
{
	const int eb = dt == ALLM_DTYPE_F32 ? 4 : 2;
	__m256 wv[AVX2_COLS];
	UNROLL
	for (int c = 0; c < C; c++) {
		if (pf && (ew * eb & 63) == 0) /* once per cache line */
			_mm_prefetch(ws[c] + ew * eb + pf, _MM_HINT_T1);
		wv[c] = w8(dt, ws[c], ew);
	}
	UNROLL
	for (int r = 0; r < R; r++) {
		__m256 xv = _mm256_loadu_ps(xs[r] + ex);
		UNROLL
		for (int c = 0; c < C; c++)
			acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
	}
}

/* The FMA tile: R x C elements, 8 lanes each, over [p0, p0 + kc). */
INL T2 void tile_fma(const int R, const int C, const enum allm_dtype dt,
		     const struct gemm_tile *t)
{
	__m256 acc[AVX2_ROWS][AVX2_COLS];
	const float *x[AVX2_ROWS];
	const char *w[AVX2_COLS];
	TILE2_BEGIN(acc, R, C, t);
	UNROLL
	for (int r = 0; r < R; r++)
		x[r] = (const float *)((const char *)t->x + (size_t)r * t->x_stride);
	UNROLL
	for (int c = 0; c < C; c++)
		w[c] = (const char *)t->w + (size_t)c * t->w_stride;
	int64_t p = t->p0, end = t->p0 + t->kc;
	for (; p + 8 <= end; p += 8)
		fma_step(R, C, dt, acc, x, p, w, p - t->w_p0, t->prefetch);
	if (p < end) { /* the k tail: one step over zero-padded f32 copies */
		int rem = (int)(end - p);
		float xt[AVX2_ROWS][8], wt[AVX2_COLS][8];
		const float *xp[AVX2_ROWS];
		const char *wp[AVX2_COLS];
		UNROLL
		for (int r = 0; r < R; r++) {
			for (int i = 0; i < 8; i++)
				xt[r][i] = i < rem ? x[r][p + i] : 0.0f;
			xp[r] = xt[r];
		}
		UNROLL
		for (int c = 0; c < C; c++) {
			for (int i = 0; i < 8; i++)
				wt[c][i] = i < rem ? gemm_wval(w[c], dt, t->k, 0, p + i - t->w_p0) : 0.0f;
			wp[c] = (const char *)wt[c];
		}
		fma_step(R, C, ALLM_DTYPE_F32, acc, xp, 0, wp, 0, 0);
	}
	TILE2_END(acc, R, C, t);
}

#define FMA_TILE(R, C, DT) tile_fma(R, C, DT, t)
static T2 void tile_f32(const struct gemm_tile *t) { TILE_DISPATCH_4x3(FMA_TILE, ALLM_DTYPE_F32); }
static T2 void tile_f16(const struct gemm_tile *t) { TILE_DISPATCH_4x3(FMA_TILE, ALLM_DTYPE_F16); }
static T2 void tile_bf16(const struct gemm_tile *t) { TILE_DISPATCH_4x3(FMA_TILE, ALLM_DTYPE_BF16); }

/* W rows to f32 for the blocked path: the values w8() computes. */
INL T2 void to_f32(const enum allm_dtype dt, float *dst, const void *w, size_t w_stride,
		   int64_t k, int64_t p0, int64_t kc, int cols)
{
	for (int c = 0; c < cols; c++) {
		const char *row = (const char *)w + (size_t)c * w_stride;
		float *o = dst + (size_t)c * gemm_conv_ld(kc);
		int64_t i = 0;
		for (; i + 8 <= kc; i += 8)
			_mm256_storeu_ps(o + i, w8(dt, row, p0 + i));
		for (; i < kc; i++)
			o[i] = gemm_wval(row, dt, k, 0, p0 + i);
	}
}

/* f32 W is copied too: a contiguous block in L2 streams better than rows strided by k. */
void gemm_f32_copy(float *d, const void *w, size_t s, int64_t k, int64_t p0, int64_t kc,
		   int cols)
{
	for (int c = 0; c < cols; c++)
		memcpy(d + (size_t)c * gemm_conv_ld(kc), (const float *)((const char *)w + (size_t)c * s) + p0,
		       (size_t)kc * sizeof(float));
}

T2 void gemm_avx2_f16_to_f32(float *d, const void *w, size_t s, int64_t k, int64_t p0, int64_t kc,
			  int cols)
{
	to_f32(ALLM_DTYPE_F16, d, w, s, k, p0, kc, cols);
}

T2 void gemm_avx2_bf16_to_f32(float *d, const void *w, size_t s, int64_t k, int64_t p0, int64_t kc,
			   int cols)
{
	to_f32(ALLM_DTYPE_BF16, d, w, s, k, p0, kc, cols);
}

#define KERN(fn, conv) \
	{ .max_rows = AVX2_ROWS, .max_cols = AVX2_COLS, .tile = fn, .w_to_f32 = conv, \
	  .tile_f32 = tile_f32 }
static const struct gemm_kern k_f32 = KERN(tile_f32, gemm_f32_copy), k_f16 = KERN(tile_f16, gemm_avx2_f16_to_f32),
			       k_bf16 = KERN(tile_bf16, gemm_avx2_bf16_to_f32);

#define QB_AVX2 gemm_qb_avx2
const struct gemm_level gemm_level_avx2 = { ALLM_CPU_ISA_AVX2, &k_f32, &k_f16, &k_bf16, QB_AVX2 };
const struct gemm_level gemm_level_avx2_vnni = { ALLM_CPU_ISA_AVX2_VNNI, &k_f32, &k_f16, &k_bf16, QB_AVX2 };

#endif /* GEMM_X86 */
