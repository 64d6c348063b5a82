/* GGUF tensor rows to f32: the element types and the 32-value block formats Q8_0,
 * Q4_0 and Q4_1, laid out as ggml writes them (ggml-common.h's block_q8_0, block_q4_0
 * and block_q4_1: an f16 scale, for Q4_1 an f16 minimum, then the quants; a Q4 byte j
 * holds value j in its low nibble and value j + 16 in its high one). */
#include "gguf-model.h"

#define QK 32 /* values per block of the three formats */

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

bool allm_gguf_dequant_supported(enum allm_gguf_ttype type)
{
	switch (type) {
	case ALLM_GGML_F32:
	case ALLM_GGML_F16:
	case ALLM_GGML_BF16:
	case ALLM_GGML_Q8_0:
	case ALLM_GGML_Q4_0:
	case ALLM_GGML_Q4_1:
		return true;
	default:
		return false;
	}
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
	default: ALLM_ASSERT(!"allm_gguf_dequant_rows: unsupported type"); break;
	}
}
