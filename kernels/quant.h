/* int8 weights (ALLM_DTYPE_Q8, --quant int8): symmetric, one scale per block of 32
 * values along a row (the reduction dimension k of y = x · Wᵀ).
 *
 * A matrix [m, k] is m self-contained rows of allm_q8_row_bytes(k) bytes each:
 *     int8  q[k32]          k32 = k rounded up to 32; q = 0 past k
 *     bf16  d[k32 / 32]     the block scales
 *     zero padding to a multiple of 64 bytes (rows stay cache-line aligned)
 * and value(i, p) = q[i][p] * d[i][p / 32], computed in f32 (the product of an
 * int8 and a bf16 is exact in f32).
 *
 * Quantizing a block: d = max|w| / 127 rounded up to bf16 (bf16 keeps f32's range:
 * tiny blocks keep their precision; rounding d up only widens the grid by < 0.4 %
 * and means no value is clipped), q = round-to-nearest-even(w / d) in [-127, 127].
 * So |w - q·d| <= d / 2 for every weight. */
#ifndef ALLM_QUANT_H
#define ALLM_QUANT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALLM_Q8_BLOCK 32

/* k rounded up to a whole number of blocks. */
static inline int64_t allm_q8_k32(int64_t k)
{
	return (k + ALLM_Q8_BLOCK - 1) / ALLM_Q8_BLOCK * ALLM_Q8_BLOCK;
}

/* Bytes of one row of k values. */
static inline size_t allm_q8_row_bytes(int64_t k)
{
	size_t k32 = (size_t)allm_q8_k32(k);
	return (k32 + k32 / ALLM_Q8_BLOCK * 2 + 63) & ~(size_t)63;
}

/* Bytes of an [m, k] matrix. */
static inline size_t allm_q8_bytes(int64_t m, int64_t k)
{
	return (size_t)m * allm_q8_row_bytes(k);
}

/* Row i's quants and scales. */
static inline const int8_t *allm_q8_row_q(const void *w, int64_t k, int64_t i)
{
	return (const int8_t *)w + (size_t)i * allm_q8_row_bytes(k);
}

static inline const uint16_t *allm_q8_row_d(const void *w, int64_t k, int64_t i)
{
	return (const uint16_t *)(allm_q8_row_q(w, k, i) + allm_q8_k32(k));
}

/* Weight (i, p) as f32, the way every kernel dequantizes it. */
static inline float allm_q8_get(const void *w, int64_t k, int64_t i, int64_t p)
{
	return (float)allm_q8_row_q(w, k, i)[p] *
	       allm_bf16_to_f32(allm_q8_row_d(w, k, i)[p / ALLM_Q8_BLOCK]);
}

/* Quantizes n_rows rows of k f32 values (src, row-major) into rows row0.. of the
 * matrix at dst. */
void allm_q8_quantize_rows(void *dst, int64_t k, int64_t row0, const float *src,
			   int64_t n_rows);

/* Row i of the matrix as k f32 values. */
void allm_q8_dequantize_row(float *dst, const void *w, int64_t k, int64_t i);

/* The bf16 scale of a block whose largest magnitude is amax. */
uint16_t allm_q8_scale(float amax);

#ifdef __cplusplus
}
#endif

#endif
