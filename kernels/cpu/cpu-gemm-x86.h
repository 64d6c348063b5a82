/* Shared by the x86 GEMM levels: intrinsics, the tile dispatchers (a switch that
 * turns the run-time tile shape into a call with constant R and C, so each shape
 * is compiled with its accumulators in registers) and the W conversions to f32. */
#ifndef ALLM_CPU_GEMM_X86_H
#define ALLM_CPU_GEMM_X86_H

#include "cpu-gemm.h"

#ifdef GEMM_X86
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
/* Before every loop over a tile's rows or columns: fully unrolled, the accumulator
 * arrays become registers (GCC does not keep an array in registers otherwise). */
#define UNROLL _Pragma("GCC unroll 8")

/* bf16 -> f32 without a call (allm_bf16_to_f32 lives in another file). */
static inline float gemm_bf16f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* The AVX-512 levels' baseline (F/BW/VL), for code shared by their files. */
#define T5 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

/* 16 weights of a row from element e as f32, lanes past m zero. */
INL T5 __m512 w16(const enum allm_dtype dt, const char *row, int64_t e, const __mmask16 m)
{
	const bool all = m == 0xffff; /* a constant wherever this is inlined */
	switch (dt) {
	case ALLM_DTYPE_F16: {
		const uint16_t *h = (const uint16_t *)row + e;
		return _mm512_cvtph_ps(all ? _mm256_loadu_si256((const __m256i *)h)
					   : _mm256_maskz_loadu_epi16(m, h));
	}
	case ALLM_DTYPE_BF16: {
		const uint16_t *h = (const uint16_t *)row + e;
		__m256i v = all ? _mm256_loadu_si256((const __m256i *)h) : _mm256_maskz_loadu_epi16(m, h);
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
	}
	default:
		return all ? _mm512_loadu_ps((const float *)row + e)
			   : _mm512_maskz_loadu_ps(m, (const float *)row + e);
	}
}

#define TILE_ROW_2(F, R, A) \
	case R * 16 + 1: F(R, 1, A); return; \
	case R * 16 + 2: F(R, 2, A); return;
#define TILE_ROW_3(F, R, A) TILE_ROW_2(F, R, A) case R * 16 + 3: F(R, 3, A); return;
#define TILE_ROW_4(F, R, A) TILE_ROW_3(F, R, A) case R * 16 + 4: F(R, 4, A); return;
/* columns 5-8 only (wide decode tiles) */
#define TILE_ROW_5TO8(F, R, A) \
	case R * 16 + 5: F(R, 5, A); return; \
	case R * 16 + 6: F(R, 6, A); return; \
	case R * 16 + 7: F(R, 7, A); return; \
	case R * 16 + 8: F(R, 8, A); return;

#define TILE_DISPATCH_4x3(F, A) \
	switch (t->rows * 16 + t->cols) { \
		TILE_ROW_3(F, 1, A) TILE_ROW_3(F, 2, A) TILE_ROW_3(F, 3, A) TILE_ROW_3(F, 4, A) }
#define TILE_DISPATCH_3x4(F, A) \
	switch (t->rows * 16 + t->cols) { TILE_ROW_4(F, 1, A) TILE_ROW_4(F, 2, A) TILE_ROW_4(F, 3, A) }
#define TILE_DISPATCH_6x4(F, A) \
	switch (t->rows * 16 + t->cols) { \
		TILE_ROW_4(F, 1, A) TILE_ROW_4(F, 2, A) TILE_ROW_4(F, 3, A) TILE_ROW_4(F, 4, A) \
		TILE_ROW_4(F, 5, A) TILE_ROW_4(F, 6, A) }
/* 3 x 4 tiles, and 1-2 x 5-8 for decode */
#define TILE_DISPATCH_3x4_2x8(F, A) \
	switch (t->rows * 16 + t->cols) { \
		TILE_ROW_4(F, 1, A) TILE_ROW_4(F, 2, A) TILE_ROW_4(F, 3, A) TILE_ROW_5TO8(F, 1, A) \
		TILE_ROW_5TO8(F, 2, A) }
/* 6 x 4 tiles, and 1-2 x 5-8 for decode */
#define TILE_DISPATCH_6x4_2x8(F, A) \
	switch (t->rows * 16 + t->cols) { \
		TILE_ROW_4(F, 1, A) TILE_ROW_4(F, 2, A) TILE_ROW_4(F, 3, A) TILE_ROW_4(F, 4, A) \
		TILE_ROW_4(F, 5, A) TILE_ROW_4(F, 6, A) TILE_ROW_5TO8(F, 1, A) TILE_ROW_5TO8(F, 2, A) }

/* The 64-byte tile configuration of palette 1 (Intel SDM, LDTILECFG), for the AMX
 * drivers (cpu-gemm-amx.c, cpu-gemm-qblock-amx.c). */
struct gemm_amx_cfg {
	uint8_t palette, start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* W to f32 for the blocked path (exact conversions: any level may use them). */
void gemm_f32_copy(float *d, const void *w, size_t s, int64_t k, int64_t p0, int64_t kc,
		   int cols);
void gemm_avx2_f16_to_f32(float *d, const void *w, size_t s, int64_t k, int64_t p0, int64_t kc,
			  int cols);
void gemm_avx2_bf16_to_f32(float *d, const void *w, size_t s, int64_t k, int64_t p0,
			   int64_t kc, int cols);

#endif
#endif
