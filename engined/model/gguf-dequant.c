/* GGUF tensor rows to f32 and to the engine's block formats: the element types
 * here, every block format through the one dequantizer (kernels/qblock.h, whose
 * formats are the file's own: a block tensor is kept as the file stores it). */
#include "gguf-model.h"
#include "qblock.h"

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
	case ALLM_GGML_Q4_1: return ALLM_DTYPE_Q4_1;
	case ALLM_GGML_Q5_0: return ALLM_DTYPE_Q5_0;
	case ALLM_GGML_Q5_1: return ALLM_DTYPE_Q5_1;
	case ALLM_GGML_Q4_K: return ALLM_DTYPE_Q4_K;
	case ALLM_GGML_Q5_K: return ALLM_DTYPE_Q5_K;
	case ALLM_GGML_Q6_K: return ALLM_DTYPE_Q6_K;
	default: return ALLM_DTYPE_COUNT;
	}
}

bool allm_gguf_blocks_as(enum allm_gguf_ttype type, enum allm_dtype dt)
{
	return dt != ALLM_DTYPE_COUNT && allm_gguf_native_dtype(type) == dt;
}

/* Row row0's first byte. */
static const uint8_t *row_at(const struct allm_gguf_tensor *t, int64_t row0)
{
	uint32_t block = 1, bytes = 4;
	allm_gguf_ttype_info(t->type, &block, &bytes);
	return (const uint8_t *)t->data + (size_t)row0 * (size_t)(t->ne[0] / block) * bytes;
}

void allm_gguf_rows_as_blocks(const struct allm_gguf_tensor *t, int64_t row0, int64_t n_rows,
			      enum allm_dtype dt, void *dst)
{
	ALLM_ASSERT(allm_gguf_blocks_as(t->type, dt));
	memcpy(dst, row_at(t, row0), (size_t)n_rows * allm_row_bytes(dt, t->ne[0]));
}

void allm_gguf_dequant_rows(const struct allm_gguf_tensor *t, int64_t row0, int64_t n_rows,
			    float *dst)
{
	int64_t cols = t->ne[0];
	const uint8_t *src = row_at(t, row0);
	size_t n = (size_t)(n_rows * cols);
	enum allm_dtype dt = allm_gguf_native_dtype(t->type);
	switch (t->type) {
	case ALLM_GGML_F32: memcpy(dst, src, n * sizeof(float)); break;
	/* byte by byte: general.alignment may be 1, the data need not be 2-aligned */
	case ALLM_GGML_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = allm_f16_to_f32(allm_le16(src + 2 * i));
		break;
	case ALLM_GGML_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = allm_bf16_to_f32(allm_le16(src + 2 * i));
		break;
	default:
		ALLM_ASSERT(allm_dtype_is_qblock(dt));
		for (int64_t r = 0; r < n_rows; r++)
			allm_qb_dequantize_row(dt, dst + r * cols, src, cols, r);
		break;
	}
}
