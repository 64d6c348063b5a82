/* GGUF's block formats as the engine computes them (ALLM_DTYPE_Q8_0 .. Q6_K), byte
 * for byte as a GGUF file stores them (common/gguf-blocks.h: the structs), so a
 * file's tensors are used in place; and the one dequantizer of every block format
 * (the GGUF loader's too).
 *
 * A matrix [m, k] is m rows of blocks, rows back to back (no padding: a row is
 * allm_qb_row_bytes(dt, k) bytes). The 32-value formats (little-endian f16 scalars):
 *     Q8_0  f16 d, int8 q[32]                              34 bytes, w = q * d
 *     Q4_0  f16 d, uint8 qs[16]                            18 bytes, w = (q - 8) * d
 *     Q4_1  f16 d, f16 m, uint8 qs[16]                     20 bytes, w = q * d + m
 *     Q5_0  f16 d, u32 qh, uint8 qs[16]                    22 bytes, w = (q - 16) * d
 *     Q5_1  f16 d, f16 m, u32 qh, uint8 qs[16]             24 bytes, w = q * d + m
 * where for the 4-bit formats element j < 16 is the low nibble of qs[j] and element
 * j + 16 its high nibble, and Q5's fifth bit of element j is bit j of qh. The K
 * formats hold 256 values a super-block in eight sub-blocks of 32:
 *     Q4_K  f16 d, f16 dmin, 12 bytes of 6-bit scales sc_j and mins m_j, qs[128]
 *           144 bytes; sub-block j: w = (d * sc_j) * q - dmin * m_j, q 0..15, the
 *           low nibbles of qs[32 (j / 2) ..+32] for even j, the high ones for odd j
 *     Q5_K  as Q4_K with qh[32] before qs: bit j of qh[l] is the fifth bit of value
 *           l of sub-block j; 176 bytes
 *     Q6_K  ql[128], qh[64], int8 sc[16], f16 d; 210 bytes; value 128 h + 32 c + l
 *           (h 0..1, c 0..3, l 0..31) is (d * sc[8 h + 2 c + l / 16]) * (q - 32), q =
 *           the low (c < 2) or high nibble of ql[64 h + 32 (c % 2) + l] with bits 4-5
 *           from qh[32 h + l] >> 2 c
 * (the float operations of each formula in the order written: ggml's). GGUF
 * requires k to be a multiple of the block; --quant (Q8_0, Q4_0, Q4_1 only) also
 * takes other k, the last block then holding weights past k that no kernel reads
 * (the activations are zero there).
 *
 * Quantizing (--quant q8_0|q4_0|q4_1) follows ggml's reference quantizers
 * (quantize_row_q8_0_ref and friends: the scale from the block's absolute maximum,
 * signed maximum, or min and max), so a checkpoint quantized here holds the bytes
 * llama.cpp's quantizer would write for the same f32 values. */
#ifndef ALLM_QBLOCK_H
#define ALLM_QBLOCK_H

#include "common.h"
#include "gguf-blocks.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ALLM_QB_BLOCK ALLM_QK /* values per block of the 32-value formats, per K sub-block */

/* Whether dt holds 256-value super-blocks (Q4_K, Q5_K, Q6_K). */
static inline bool allm_qb_is_k(enum allm_dtype dt)
{
	return dt == ALLM_DTYPE_Q4_K || dt == ALLM_DTYPE_Q5_K || dt == ALLM_DTYPE_Q6_K;
}

/* Values of one block of dt: 32 or 256. */
static inline int64_t allm_qb_values(enum allm_dtype dt)
{
	return allm_qb_is_k(dt) ? ALLM_QK_K : ALLM_QK;
}

/* Bytes of one block of dt; 0 for a dtype that is not a block format (never a
 * guess: a caller sizing such a dtype's rows gets nothing). */
static inline size_t allm_qb_block_bytes(enum allm_dtype dt)
{
	switch (dt) {
	case ALLM_DTYPE_Q8_0: return sizeof(struct allm_block_q8_0);
	case ALLM_DTYPE_Q4_0: return sizeof(struct allm_block_q4_0);
	case ALLM_DTYPE_Q4_1: return sizeof(struct allm_block_q4_1);
	case ALLM_DTYPE_Q5_0: return sizeof(struct allm_block_q5_0);
	case ALLM_DTYPE_Q5_1: return sizeof(struct allm_block_q5_1);
	case ALLM_DTYPE_Q4_K: return sizeof(struct allm_block_q4_K);
	case ALLM_DTYPE_Q5_K: return sizeof(struct allm_block_q5_K);
	case ALLM_DTYPE_Q6_K: return sizeof(struct allm_block_q6_K);
	default: return 0;
	}
}

/* 32-value (sub-)blocks of a row of k weights. */
static inline int64_t allm_qb_blocks(int64_t k)
{
	return (k + ALLM_QB_BLOCK - 1) / ALLM_QB_BLOCK;
}

static inline size_t allm_qb_row_bytes(enum allm_dtype dt, int64_t k)
{
	int64_t v = allm_qb_values(dt);
	return (size_t)((k + v - 1) / v) * allm_qb_block_bytes(dt);
}

/* Bytes of a row of k values stored as dt: its blocks, or k plain elements. */
static inline size_t allm_row_bytes(enum allm_dtype dt, int64_t k)
{
	return allm_dtype_is_qblock(dt) ? allm_qb_row_bytes(dt, k) : (size_t)k * allm_dtype_size(dt);
}

/* Bytes of an [m, k] matrix. */
static inline size_t allm_qb_bytes(enum allm_dtype dt, int64_t m, int64_t k)
{
	return (size_t)m * allm_qb_row_bytes(dt, k);
}

/* Where the quants of a 32-value format's block start (after d, m, qh). */
static inline size_t allm_qb_qs_offset(enum allm_dtype dt)
{
	switch (dt) {
	case ALLM_DTYPE_Q4_1: return offsetof(struct allm_block_q4_1, qs);
	case ALLM_DTYPE_Q5_0: return offsetof(struct allm_block_q5_0, qs);
	case ALLM_DTYPE_Q5_1: return offsetof(struct allm_block_q5_1, qs);
	default: return offsetof(struct allm_block_q8_0, qs); /* Q8_0, Q4_0: after d */
	}
}

/* Whether a 32-value format has a min m (w = q * d + m). */
static inline bool allm_qb_has_min(enum allm_dtype dt)
{
	return dt == ALLM_DTYPE_Q4_1 || dt == ALLM_DTYPE_Q5_1;
}

/* The quant of element j (0..31) of a 32-value format's block at blk, as the integer
 * the formula above multiplies: Q8_0 -128..127, Q4_0 -8..7, Q4_1 0..15, Q5_0
 * -16..15, Q5_1 0..31. */
static inline int allm_qb_quant(enum allm_dtype dt, const uint8_t *blk, int j)
{
	const uint8_t *qs = blk + allm_qb_qs_offset(dt);
	if (dt == ALLM_DTYPE_Q8_0)
		return (int8_t)qs[j];
	int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
	if (dt == ALLM_DTYPE_Q5_0 || dt == ALLM_DTYPE_Q5_1)
		q |= (int)(allm_le32(qs - 4) >> j & 1) << 4; /* qh just before qs */
	return dt == ALLM_DTYPE_Q4_0 ? q - 8 : dt == ALLM_DTYPE_Q5_0 ? q - 16 : q;
}

/* A 32-value format's block scale d and min m, as f32. */
static inline float allm_qb_d(const uint8_t *blk)
{
	return allm_f16_to_f32(allm_le16(blk));
}

static inline float allm_qb_m(const uint8_t *blk)
{
	return allm_f16_to_f32(allm_le16(blk + 2));
}

/* Q4_K/Q5_K: sub-block j's 6-bit scale and min from the 12 packed bytes (ggml's
 * get_scale_min_k4): j < 4 the low 6 bits of bytes j (scale) and j + 4 (min); j >= 4
 * the low (scale) or high (min) nibble of byte j + 4, with bits 4-5 from the top two
 * bits of byte j - 4 (scale) or j (min). */
static inline void allm_qb_k_scale_min(const uint8_t *sc, int j, int *ret_sc, int *ret_m)
{
	if (j < 4) {
		*ret_sc = sc[j] & 63;
		*ret_m = sc[j + 4] & 63;
	} else {
		*ret_sc = (sc[j + 4] & 0xF) | (sc[j - 4] >> 6) << 4;
		*ret_m = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
	}
}

/* The quant of value l (0..31) of sub-block j of a K super-block, as the formula
 * multiplies it: Q4_K 0..15, Q5_K 0..31, Q6_K -32..31. */
static inline int allm_qb_k_quant(enum allm_dtype dt, const uint8_t *blk, int j, int l)
{
	if (dt == ALLM_DTYPE_Q6_K) {
		const struct allm_block_q6_K *b = (const struct allm_block_q6_K *)blk;
		int h = j / 4, c = j % 4;
		uint8_t lo = b->ql[64 * h + 32 * (c % 2) + l];
		return ((c < 2 ? lo & 0xF : lo >> 4) | ((b->qh[32 * h + l] >> (2 * c)) & 3) << 4) - 32;
	}
	const uint8_t *qs = blk + (dt == ALLM_DTYPE_Q4_K ? offsetof(struct allm_block_q4_K, qs)
							 : offsetof(struct allm_block_q5_K, qs));
	int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
	if (dt == ALLM_DTYPE_Q5_K)
		q |= ((((const struct allm_block_q5_K *)blk)->qh[l] >> j) & 1) << 4;
	return q;
}

/* Block b (of allm_qb_values(dt) weights) of row i of an [*, k] matrix. */
static inline const uint8_t *allm_qb_block(const void *w, enum allm_dtype dt, int64_t k,
					   int64_t i, int64_t b)
{
	return (const uint8_t *)w + (size_t)i * allm_qb_row_bytes(dt, k) +
	       (size_t)b * allm_qb_block_bytes(dt);
}

/* Value j of the block at blk, as allm_qb_dequantize_row gives it. */
float allm_qb_value(enum allm_dtype dt, const uint8_t *blk, int j);

/* Weight (i, p) as f32. */
static inline float allm_qb_get(const void *w, enum allm_dtype dt, int64_t k, int64_t i,
				int64_t p)
{
	int64_t v = allm_qb_values(dt);
	return allm_qb_value(dt, allm_qb_block(w, dt, k, i, p / v), (int)(p % v));
}

/* Quantizes n_rows rows of k f32 values (src, row-major) into rows row0.. of the
 * dt matrix at dst (Q8_0, Q4_0 or Q4_1: ggml's reference quantizers; a partial last
 * block is quantized as if zeros followed). */
void allm_qb_quantize_rows(enum allm_dtype dt, void *dst, int64_t k, int64_t row0,
			   const float *src, int64_t n_rows);

/* Row i of the matrix as k f32 values: the formulas above, float for float what
 * ggml's dequantize_row_* (and gguf-py's numpy restatement) give. */
void allm_qb_dequantize_row(enum allm_dtype dt, float *dst, const void *w, int64_t k,
			    int64_t i);

#ifdef __cplusplus
}
#endif

#endif
