/* GGUF's block formats Q8_0, Q4_0 and Q4_1 (ALLM_DTYPE_Q8_0/Q4_0/Q4_1), byte for
 * byte as a GGUF file stores them, so a file's tensors are used in place.
 *
 * A matrix [m, k] is m rows of allm_qb_blocks(k) blocks each, rows back to back (no
 * padding: a row is allm_qb_row_bytes(dt, k) bytes). A block holds 32 consecutive
 * weights of a row (little-endian f16 scalars):
 *     Q8_0  f16 d, int8 q[32]                              34 bytes, w = q * d
 *     Q4_0  f16 d, uint8 qs[16]                            18 bytes, w = (q - 8) * d
 *     Q4_1  f16 d, f16 m, uint8 qs[16]                     20 bytes, w = q * d + m
 * where for the 4-bit formats element j < 16 is the low nibble of qs[j] and element
 * j + 16 its high nibble. GGUF requires k to be a multiple of 32; --quant also takes
 * other k, the last block then holding weights past k that no kernel reads (the
 * activations are zero there).
 *
 * Quantizing (--quant q8_0|q4_0|q4_1) follows ggml's reference quantizers
 * (quantize_row_q8_0_ref and friends: the scale from the block's absolute maximum,
 * signed maximum, or min and max), so a checkpoint quantized here holds the bytes
 * llama.cpp's quantizer would write for the same f32 values. */
#ifndef ALLM_QBLOCK_H
#define ALLM_QBLOCK_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALLM_QB_BLOCK 32 /* weights per block, every format */

/* Bytes of one block of dt (a block format). */
static inline size_t allm_qb_block_bytes(enum allm_dtype dt)
{
	return dt == ALLM_DTYPE_Q8_0 ? 34 : dt == ALLM_DTYPE_Q4_0 ? 18 : 20;
}

/* Blocks of a row of k weights. */
static inline int64_t allm_qb_blocks(int64_t k)
{
	return (k + ALLM_QB_BLOCK - 1) / ALLM_QB_BLOCK;
}

static inline size_t allm_qb_row_bytes(enum allm_dtype dt, int64_t k)
{
	return (size_t)allm_qb_blocks(k) * allm_qb_block_bytes(dt);
}

/* Bytes of an [m, k] matrix. */
static inline size_t allm_qb_bytes(enum allm_dtype dt, int64_t m, int64_t k)
{
	return (size_t)m * allm_qb_row_bytes(dt, k);
}

/* Where weights go from a block: its scale d, Q4_1's min m, the quants. */
static inline size_t allm_qb_qs_offset(enum allm_dtype dt)
{
	return dt == ALLM_DTYPE_Q4_1 ? 4 : 2;
}

/* The quant of element j (0..31) of the block at blk, as the integer the formula
 * above multiplies: Q8_0 -128..127, Q4_0 -8..7, Q4_1 0..15. */
static inline int allm_qb_quant(enum allm_dtype dt, const uint8_t *blk, int j)
{
	const uint8_t *qs = blk + allm_qb_qs_offset(dt);
	if (dt == ALLM_DTYPE_Q8_0)
		return (int8_t)qs[j];
	int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
	return dt == ALLM_DTYPE_Q4_0 ? q - 8 : q;
}

/* A block's scale d and (Q4_1) min m, as f32. */
static inline float allm_qb_d(const uint8_t *blk)
{
	return allm_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
}

static inline float allm_qb_m(const uint8_t *blk)
{
	return allm_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
}

/* Block b of row i of an [*, k] matrix. */
static inline const uint8_t *allm_qb_block(const void *w, enum allm_dtype dt, int64_t k,
					   int64_t i, int64_t b)
{
	return (const uint8_t *)w + (size_t)i * allm_qb_row_bytes(dt, k) +
	       (size_t)b * allm_qb_block_bytes(dt);
}

/* Weight (i, p) as f32: q * d, or q * d + m (Q4_1). */
static inline float allm_qb_get(const void *w, enum allm_dtype dt, int64_t k, int64_t i,
				int64_t p)
{
	const uint8_t *blk = allm_qb_block(w, dt, k, i, p / ALLM_QB_BLOCK);
	float v = (float)allm_qb_quant(dt, blk, (int)(p % ALLM_QB_BLOCK)) * allm_qb_d(blk);
	return dt == ALLM_DTYPE_Q4_1 ? v + allm_qb_m(blk) : v;
}

/* Quantizes n_rows rows of k f32 values (src, row-major) into rows row0.. of the
 * dt matrix at dst (ggml's reference quantizers; a partial last block is quantized
 * as if zeros followed). */
void allm_qb_quantize_rows(enum allm_dtype dt, void *dst, int64_t k, int64_t row0,
			   const float *src, int64_t n_rows);

/* Row i of the matrix as k f32 values. */
void allm_qb_dequantize_row(enum allm_dtype dt, float *dst, const void *w, int64_t k,
			    int64_t i);

#ifdef __cplusplus
}
#endif

#endif
