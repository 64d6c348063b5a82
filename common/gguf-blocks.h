/* Every GGUF block type, byte for byte as a GGUF file lays it out (ggml's
 * ggml-common.h), each size checked at compile time. The one home of the formats:
 * common/gguf.c takes the geometry it checks files against from these structs, and
 * kernels/qblock.h (the kernels' reading of the blocks, the one dequantizer) the
 * offsets it reads. Here, not in kernels/, because the GGUF reader needs them and
 * common/ depends on nothing of ours.
 *
 * Every member is bytes (alignment 1): a file's blocks need not be aligned
 * (general.alignment may be 1), so a pointer into a mapping may be cast to any of
 * these types. A scalar is little-endian; read it with allm_le16()/allm_le32(). */
#ifndef ALLM_GGUF_BLOCKS_H
#define ALLM_GGUF_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ALLM_QK 32 /* values per block of the 32-value formats */
#define ALLM_QK_K 256 /* values per super-block of the K and most IQ formats */
#define ALLM_K_SCALE_SIZE 12 /* Q4_K/Q5_K's packed 6-bit scales and mins */

typedef uint8_t allm_half[2]; /* an IEEE f16, little-endian */

/* x = d * q, q int8 */
struct allm_block_q8_0 { allm_half d; int8_t qs[ALLM_QK]; };
/* x = d * (q - 8); value j < 16 the low nibble of qs[j], j + 16 its high one */
struct allm_block_q4_0 { allm_half d; uint8_t qs[ALLM_QK / 2]; };
/* x = d * q + m */
struct allm_block_q4_1 { allm_half d, m; uint8_t qs[ALLM_QK / 2]; };
/* x = d * (q - 16); q's fifth bit of value j is bit j of qh (little-endian u32) */
struct allm_block_q5_0 { allm_half d; uint8_t qh[4]; uint8_t qs[ALLM_QK / 2]; };
/* x = d * q + m */
struct allm_block_q5_1 { allm_half d, m; uint8_t qh[4]; uint8_t qs[ALLM_QK / 2]; };
/* d * q, s = d * sum(q) (an activation format of ggml's) */
struct allm_block_q8_1 { allm_half d, s; int8_t qs[ALLM_QK]; };
struct allm_block_q2_K { uint8_t scales[ALLM_QK_K / 16], qs[ALLM_QK_K / 4]; allm_half d, dmin; };
struct allm_block_q3_K {
	uint8_t hmask[ALLM_QK_K / 8], qs[ALLM_QK_K / 4], scales[12];
	allm_half d;
};
/* Sub-block j (32 values) x = d * sc_j * q - dmin * m_j, q 0..15 (see qblock.h) */
struct allm_block_q4_K {
	allm_half d, dmin;
	uint8_t scales[ALLM_K_SCALE_SIZE], qs[ALLM_QK_K / 2];
};
/* As Q4_K with a fifth bit: q 0..31 */
struct allm_block_q5_K {
	allm_half d, dmin;
	uint8_t scales[ALLM_K_SCALE_SIZE], qh[ALLM_QK_K / 8], qs[ALLM_QK_K / 2];
};
/* Sixteen values x = d * sc * (q - 32), q 0..63, sc int8 */
struct allm_block_q6_K {
	uint8_t ql[ALLM_QK_K / 2], qh[ALLM_QK_K / 4];
	int8_t scales[ALLM_QK_K / 16];
	allm_half d;
};
struct allm_block_q8_K { uint8_t d[4]; int8_t qs[ALLM_QK_K]; uint8_t bsums[ALLM_QK_K / 16][2]; };
struct allm_block_iq2_xxs { allm_half d; uint8_t qs[ALLM_QK_K / 8][2]; };
struct allm_block_iq2_xs { allm_half d; uint8_t qs[ALLM_QK_K / 8][2], scales[ALLM_QK_K / 32]; };
struct allm_block_iq2_s {
	allm_half d;
	uint8_t qs[ALLM_QK_K / 4], qh[ALLM_QK_K / 32], scales[ALLM_QK_K / 32];
};
struct allm_block_iq3_xxs { allm_half d; uint8_t qs[3 * ALLM_QK_K / 8]; };
struct allm_block_iq3_s {
	allm_half d;
	uint8_t qs[ALLM_QK_K / 4], qh[ALLM_QK_K / 32], signs[ALLM_QK_K / 8], scales[ALLM_QK_K / 64];
};
struct allm_block_iq1_s { allm_half d; uint8_t qs[ALLM_QK_K / 8], qh[ALLM_QK_K / 32][2]; };
struct allm_block_iq1_m { uint8_t qs[ALLM_QK_K / 8], qh[ALLM_QK_K / 16], scales[ALLM_QK_K / 32]; };
struct allm_block_iq4_nl { allm_half d; uint8_t qs[ALLM_QK / 2]; };
struct allm_block_iq4_xs {
	allm_half d;
	uint8_t scales_h[2], scales_l[ALLM_QK_K / 64], qs[ALLM_QK_K / 2];
};
struct allm_block_tq1_0 {
	uint8_t qs[(ALLM_QK_K - 4 * ALLM_QK_K / 64) / 5], qh[ALLM_QK_K / 64];
	allm_half d;
};
struct allm_block_tq2_0 { uint8_t qs[ALLM_QK_K / 4]; allm_half d; };
struct allm_block_mxfp4 { uint8_t e, qs[ALLM_QK / 2]; }; /* 32 values */
struct allm_block_nvfp4 { uint8_t d[4], qs[32]; }; /* 64 values, a scale per 16 */
struct allm_block_q1_0 { allm_half d; uint8_t qs[16]; }; /* 128 values */

#define ALLM_BLOCK_SIZE_IS(t, n) static_assert(sizeof(struct allm_block_##t) == (n), #t " is " #n " bytes")
ALLM_BLOCK_SIZE_IS(q8_0, 34);
ALLM_BLOCK_SIZE_IS(q4_0, 18);
ALLM_BLOCK_SIZE_IS(q4_1, 20);
ALLM_BLOCK_SIZE_IS(q5_0, 22);
ALLM_BLOCK_SIZE_IS(q5_1, 24);
ALLM_BLOCK_SIZE_IS(q8_1, 36);
ALLM_BLOCK_SIZE_IS(q2_K, 84);
ALLM_BLOCK_SIZE_IS(q3_K, 110);
ALLM_BLOCK_SIZE_IS(q4_K, 144);
ALLM_BLOCK_SIZE_IS(q5_K, 176);
ALLM_BLOCK_SIZE_IS(q6_K, 210);
ALLM_BLOCK_SIZE_IS(q8_K, 292);
ALLM_BLOCK_SIZE_IS(iq2_xxs, 66);
ALLM_BLOCK_SIZE_IS(iq2_xs, 74);
ALLM_BLOCK_SIZE_IS(iq2_s, 82);
ALLM_BLOCK_SIZE_IS(iq3_xxs, 98);
ALLM_BLOCK_SIZE_IS(iq3_s, 110);
ALLM_BLOCK_SIZE_IS(iq1_s, 50);
ALLM_BLOCK_SIZE_IS(iq1_m, 56);
ALLM_BLOCK_SIZE_IS(iq4_nl, 18);
ALLM_BLOCK_SIZE_IS(iq4_xs, 136);
ALLM_BLOCK_SIZE_IS(tq1_0, 54);
ALLM_BLOCK_SIZE_IS(tq2_0, 66);
ALLM_BLOCK_SIZE_IS(mxfp4, 17);
ALLM_BLOCK_SIZE_IS(nvfp4, 36);
ALLM_BLOCK_SIZE_IS(q1_0, 18);
#undef ALLM_BLOCK_SIZE_IS

static inline uint16_t allm_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t allm_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#ifdef __cplusplus
}
#endif

#endif
