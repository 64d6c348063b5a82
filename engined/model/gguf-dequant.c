/* GGUF tensor rows to f32: the element types, the 32-value block formats Q8_0,
 * Q4_0 and Q4_1, laid out as ggml writes them (ggml-common.h's block_q8_0, block_q4_0
 * and block_q4_1: an f16 scale, for Q4_1 an f16 minimum, then the quants; a Q4 byte j
 * holds value j in its low nibble and value j + 16 in its high one), and the
 * Q5_0 and Q5_1 (block_q5_0, block_q5_1), the 256-value "K" formats Q4_K and Q6_K
 * (block_q4_K, block_q6_K; below). And the rows of a block tensor as the engine's
 * block formats (kernels/qblock.h): as stored, Q4_K's sub-blocks as Q4_1 blocks, Q5_0
 * blocks as Q8_0 ones. */
#include "gguf-model.h"
#include "qblock.h"

#define QK 32 /* values per block of the three formats */
#define QK_K 256 /* values per block of the K formats */
#define Q4_K_BYTES 144
#define Q6_K_BYTES 210

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void deq_q8_0(float *y, const uint8_t *b, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, b += 2 + QK) {
		float d = allm_f16_to_f32(rd16(b));
		for (int j = 0; j < QK; j++)
			*y++ = d * (float)(int8_t)b[2 + j];
	}
}

static void deq_q4_0(float *y, const uint8_t *b, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, b += 2 + QK / 2, y += QK) {
		float d = allm_f16_to_f32(rd16(b));
		for (int j = 0; j < QK / 2; j++) {
			y[j] = d * (float)((b[2 + j] & 0x0F) - 8);
			y[j + QK / 2] = d * (float)((b[2 + j] >> 4) - 8);
		}
	}
}

static void deq_q4_1(float *y, const uint8_t *b, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, b += 4 + QK / 2, y += QK) {
		float d = allm_f16_to_f32(rd16(b)), m = allm_f16_to_f32(rd16(b + 2));
		for (int j = 0; j < QK / 2; j++) {
			/* ggml computes x * d + m: the same rounding as here */
			y[j] = (float)(b[4 + j] & 0x0F) * d + m;
			y[j + QK / 2] = (float)(b[4 + j] >> 4) * d + m;
		}
	}
}

/* Q5_0: f16 d, 4 bytes qh (bit j: the fifth bit of value j), the 16 bytes of Q4_0's
 * low nibbles; x = d * (q - 16). Q5_1: f16 d, f16 m, qh, qs; x = q * d + m. */
static int q5_quant(const uint8_t *qh, const uint8_t *qs, int j)
{
	uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
	int lo = j < QK / 2 ? qs[j] & 0xF : qs[j - QK / 2] >> 4;
	return lo | (int)((h >> j) & 1) << 4;
}

static void deq_q5_0(float *y, const uint8_t *b, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, b += 22) {
		float d = allm_f16_to_f32(rd16(b));
		for (int j = 0; j < QK; j++)
			*y++ = (float)(q5_quant(b + 2, b + 6, j) - 16) * d;
	}
}

static void deq_q5_1(float *y, const uint8_t *b, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, b += 24) {
		float d = allm_f16_to_f32(rd16(b)), m = allm_f16_to_f32(rd16(b + 2));
		for (int j = 0; j < QK; j++)
			*y++ = (float)q5_quant(b + 4, b + 8, j) * d + m;
	}
}

/* Q4_K: f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins, 128 bytes of
 * quants. Sub-block j (32 values) is x = (d * sc_j) * q - dmin * m_j, q 0..15; the
 * 32 bytes at 32 * (j / 2) hold sub-block j in their low nibbles for even j, in their
 * high ones for odd j. Scales 0-3 are the low 6 bits of bytes 0-3 (mins: 4-7), 4-7
 * the low (mins: high) nibble of bytes 8-11 with bits 4-5 from the top 2 bits of
 * bytes 0-3 (mins: 4-7), as ggml's get_scale_min_k4. */
static void q4_k_scale_min(const uint8_t *sc, int j, int *ret_sc, int *ret_m)
{
	if (j < 4) {
		*ret_sc = sc[j] & 63;
		*ret_m = sc[j + 4] & 63;
	} else {
		*ret_sc = (sc[j + 4] & 0xF) | (sc[j - 4] >> 6) << 4;
		*ret_m = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
	}
}

/* Sub-block j of a Q4_K block: its scale and min as ggml's dequantize_row_q4_K
 * computes them (f32 products of an f16 and a 6-bit integer: exact), and its quants. */
static void q4_k_sub(const uint8_t *b, int j, float *ret_d, float *ret_m, uint8_t q[QK])
{
	int sc, m;
	q4_k_scale_min(b + 4, j, &sc, &m);
	*ret_d = allm_f16_to_f32(rd16(b)) * (float)sc;
	*ret_m = allm_f16_to_f32(rd16(b + 2)) * (float)m;
	const uint8_t *qs = b + 16 + 32 * (j / 2);
	for (int l = 0; l < QK; l++)
		q[l] = j % 2 ? qs[l] >> 4 : qs[l] & 0xF;
}

static void deq_q4_k(float *y, const uint8_t *b, int64_t nb)
{
	uint8_t q[QK];
	for (int64_t i = 0; i < nb; i++, b += Q4_K_BYTES)
		for (int j = 0; j < QK_K / QK; j++) {
			float d, m;
			q4_k_sub(b, j, &d, &m, q);
			for (int l = 0; l < QK; l++)
				*y++ = d * (float)q[l] - m;
		}
}

/* Q6_K: 128 bytes of low nibbles ql, 64 of high 2-bit pairs qh, 16 int8 scales, f16
 * d. Value i = 128 h + 32 k + l (h half, k quarter, l 0..31) is
 * (d * scale[8 h + 2 k + l / 16]) * (q - 32), q = its low nibble from ql[64 h + l + 32
 * (k % 2)] (the high nibble for k >= 2) and bits 4-5 from qh[32 h + l] >> 2 k. */
static void deq_q6_k(float *y, const uint8_t *b, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, b += Q6_K_BYTES) {
		const uint8_t *ql = b, *qh = b + 128;
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = allm_f16_to_f32(rd16(b + 208));
		for (int h = 0; h < 2; h++)
			for (int k = 0; k < 4; k++)
				for (int l = 0; l < 32; l++) {
					uint8_t lo = ql[64 * h + l + 32 * (k % 2)];
					int q = ((k < 2 ? lo & 0xF : lo >> 4) | ((qh[32 * h + l] >> (2 * k)) & 3) << 4) - 32;
					*y++ = d * (float)sc[8 * h + 2 * k + l / 16] * (float)q;
				}
	}
}

bool allm_gguf_dequant_supported(enum allm_gguf_ttype type)
{
	return allm_gguf_native_dtype(type) != ALLM_DTYPE_COUNT;
}

enum allm_dtype allm_gguf_native_dtype(enum allm_gguf_ttype type)
{
	switch (type) {
	case ALLM_GGML_F32: return ALLM_DTYPE_F32;
	case ALLM_GGML_F16: return ALLM_DTYPE_F16;
	case ALLM_GGML_BF16: return ALLM_DTYPE_BF16;
	case ALLM_GGML_Q8_0: return ALLM_DTYPE_Q8_0;
	case ALLM_GGML_Q4_0: return ALLM_DTYPE_Q4_0;
	case ALLM_GGML_Q4_1:
	case ALLM_GGML_Q4_K: return ALLM_DTYPE_Q4_1;
	case ALLM_GGML_Q5_0:
	case ALLM_GGML_Q5_1:
	case ALLM_GGML_Q6_K: return ALLM_DTYPE_Q8_0;
	default: return ALLM_DTYPE_COUNT;
	}
}

bool allm_gguf_blocks_as(enum allm_gguf_ttype type, enum allm_dtype dt)
{
	return ((type == ALLM_GGML_Q8_0 || type == ALLM_GGML_Q5_0) && dt == ALLM_DTYPE_Q8_0) ||
	       (type == ALLM_GGML_Q4_0 && dt == ALLM_DTYPE_Q4_0) ||
	       ((type == ALLM_GGML_Q4_1 || type == ALLM_GGML_Q4_K) && dt == ALLM_DTYPE_Q4_1);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* A Q4_K block's eight sub-blocks as eight Q4_1 blocks: the same quants, d and min
 * rounded to f16 (x = q * d + m with m = -(dmin * m_j)). */
static void q4_k_to_q4_1(uint8_t *out, const uint8_t *b, int64_t nb)
{
	uint8_t q[QK];
	for (int64_t i = 0; i < nb; i++, b += Q4_K_BYTES)
		for (int j = 0; j < QK_K / QK; j++, out += 20) {
			float d, m;
			q4_k_sub(b, j, &d, &m, q);
			put16(out, allm_f32_to_f16(d));
			put16(out + 2, allm_f32_to_f16(-m));
			for (int l = 0; l < QK / 2; l++)
				out[4 + l] = (uint8_t)(q[l] | q[l + QK / 2] << 4);
		}
}

/* Q5_0 blocks as Q8_0 ones: the same d, the quants q - 16 as int8 (exact). */
static void q5_0_to_q8_0(uint8_t *out, const uint8_t *b, int64_t nb)
{
	for (int64_t i = 0; i < nb; i++, b += 22, out += 34) {
		out[0] = b[0];
		out[1] = b[1];
		for (int j = 0; j < QK; j++)
			out[2 + j] = (uint8_t)(int8_t)(q5_quant(b + 2, b + 6, j) - 16);
	}
}

void allm_gguf_rows_as_blocks(const struct allm_gguf_tensor *t, int64_t row0, int64_t n_rows,
			      enum allm_dtype dt, void *dst)
{
	uint32_t block = 1, bytes = 4;
	allm_gguf_ttype_info(t->type, &block, &bytes);
	ALLM_ASSERT(allm_gguf_blocks_as(t->type, dt));
	int64_t cols = t->ne[0], nb = n_rows * (cols / block);
	const uint8_t *src = (const uint8_t *)t->data + (size_t)row0 * (size_t)(cols / block) * bytes;
	if (t->type == ALLM_GGML_Q4_K)
		q4_k_to_q4_1(dst, src, nb);
	else if (t->type == ALLM_GGML_Q5_0)
		q5_0_to_q8_0(dst, src, nb);
	else
		memcpy(dst, src, (size_t)n_rows * allm_qb_row_bytes(dt, cols));
}

void allm_gguf_dequant_rows(const struct allm_gguf_tensor *t, int64_t row0, int64_t n_rows,
			    float *dst)
{
	uint32_t block = 1, bytes = 4;
	allm_gguf_ttype_info(t->type, &block, &bytes);
	int64_t cols = t->ne[0], nb = n_rows * (cols / block);
	const uint8_t *src = (const uint8_t *)t->data + (size_t)row0 * (size_t)(cols / block) * bytes;
	size_t n = (size_t)(n_rows * cols);
	switch (t->type) {
	case ALLM_GGML_F32: memcpy(dst, src, n * sizeof(float)); break;
	/* byte by byte: general.alignment may be 1, the data need not be 2-aligned */
	case ALLM_GGML_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = allm_f16_to_f32(rd16(src + 2 * i));
		break;
	case ALLM_GGML_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = allm_bf16_to_f32(rd16(src + 2 * i));
		break;
	case ALLM_GGML_Q8_0: deq_q8_0(dst, src, nb); break;
	case ALLM_GGML_Q4_0: deq_q4_0(dst, src, nb); break;
	case ALLM_GGML_Q4_1: deq_q4_1(dst, src, nb); break;
	case ALLM_GGML_Q5_0: deq_q5_0(dst, src, nb); break;
	case ALLM_GGML_Q5_1: deq_q5_1(dst, src, nb); break;
	case ALLM_GGML_Q4_K: deq_q4_k(dst, src, nb); break;
	case ALLM_GGML_Q6_K: deq_q6_k(dst, src, nb); break;
	default: ALLM_ASSERT(!"allm_gguf_dequant_rows: unsupported type"); break;
	}
}
