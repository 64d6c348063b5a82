/* GGUF block formats: quantizing at load (--quant q8_0|q4_0|q4_1) and the one
 * dequantizer (formats in qblock.h). The quantizers restate ggml's reference ones
 * (ggml-quants.c, quantize_row_q{8_0,4_0,4_1}_ref) so the bytes agree with
 * llama.cpp's for the same input; the dequantizer its dequantize_row_* float for
 * float (tests/test-gguf-blocks.c holds it to gguf-py's). */
#include "qblock.h"

#include <float.h>
#include <math.h>

static void put_f16(uint8_t *p, float f)
{
	uint16_t h = allm_f32_to_f16(f);
	p[0] = (uint8_t)h;
	p[1] = (uint8_t)(h >> 8);
}

static void quantize_q8_0(uint8_t *blk, const float *x)
{
	float amax = 0.0f;
	for (int j = 0; j < 32; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	put_f16(blk, d);
	for (int j = 0; j < 32; j++)
		blk[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id); /* |x * id| <= 127 */
}

/* The scale from the value of largest magnitude, signed, so that it maps to -8
 * exactly and the other side of zero gets the 7 steps (ggml's choice). */
static void quantize_q4_0(uint8_t *blk, const float *x)
{
	float amax = 0.0f, max = 0.0f;
	for (int j = 0; j < 32; j++)
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	put_f16(blk, d);
	for (int j = 0; j < 16; j++) {
		int lo = (int8_t)(x[j] * id + 8.5f), hi = (int8_t)(x[j + 16] * id + 8.5f);
		lo = lo < 15 ? lo : 15;
		hi = hi < 15 ? hi : 15;
		blk[2 + j] = (uint8_t)(lo | hi << 4);
	}
}

static void quantize_q4_1(uint8_t *blk, const float *x)
{
	float min = FLT_MAX, max = -FLT_MAX;
	for (int j = 0; j < 32; j++) {
		min = x[j] < min ? x[j] : min;
		max = x[j] > max ? x[j] : max;
	}
	const float d = (max - min) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	put_f16(blk, d);
	put_f16(blk + 2, min);
	for (int j = 0; j < 16; j++) {
		int lo = (int8_t)((x[j] - min) * id + 0.5f), hi = (int8_t)((x[j + 16] - min) * id + 0.5f);
		lo = lo < 15 ? lo : 15;
		hi = hi < 15 ? hi : 15;
		blk[4 + j] = (uint8_t)(lo | hi << 4);
	}
}

void allm_qb_quantize_rows(enum allm_dtype dt, void *dst, int64_t k, int64_t row0,
			   const float *src, int64_t n_rows)
{
	size_t rb = allm_qb_row_bytes(dt, k), bb = allm_qb_block_bytes(dt);
	for (int64_t i = 0; i < n_rows; i++) {
		uint8_t *row = (uint8_t *)dst + (size_t)(row0 + i) * rb;
		for (int64_t b = 0; b < allm_qb_blocks(k); b++) {
			float x[32] = {0}; /* a partial last block: zeros past k */
			int64_t p0 = b * ALLM_QB_BLOCK, len = ALLM_MIN(k - p0, (int64_t)ALLM_QB_BLOCK);
			memcpy(x, src + i * k + p0, (size_t)len * sizeof(float));
			uint8_t *blk = row + (size_t)b * bb;
			if (dt == ALLM_DTYPE_Q8_0)
				quantize_q8_0(blk, x);
			else if (dt == ALLM_DTYPE_Q4_0)
				quantize_q4_0(blk, x);
			else if (dt == ALLM_DTYPE_Q4_1)
				quantize_q4_1(blk, x);
			else
				ALLM_ASSERT(!"allm_qb_quantize_rows: --quant writes Q8_0, Q4_0, Q4_1 only");
		}
	}
}

/* Value l of sub-block j of a K super-block. */
static float k_value(enum allm_dtype dt, const uint8_t *blk, int j, int l)
{
	float q = (float)allm_qb_k_quant(dt, blk, j, l);
	if (dt == ALLM_DTYPE_Q6_K) {
		const struct allm_block_q6_K *b = (const struct allm_block_q6_K *)blk;
		return allm_f16_to_f32(allm_le16(b->d)) * (float)b->scales[2 * j + l / 16] * q;
	}
	const struct allm_block_q4_K *b = (const struct allm_block_q4_K *)blk; /* Q5_K: same head */
	int sc, m;
	allm_qb_k_scale_min(b->scales, j, &sc, &m);
	float d = allm_f16_to_f32(allm_le16(b->d)) * (float)sc;
	float dm = allm_f16_to_f32(allm_le16(b->dmin)) * (float)m;
	return d * q - dm;
}

float allm_qb_value(enum allm_dtype dt, const uint8_t *blk, int j)
{
	if (allm_qb_is_k(dt))
		return k_value(dt, blk, j / ALLM_QB_BLOCK, j % ALLM_QB_BLOCK);
	float v = (float)allm_qb_quant(dt, blk, j) * allm_qb_d(blk);
	return allm_qb_has_min(dt) ? v + allm_qb_m(blk) : v;
}

void allm_qb_dequantize_row(enum allm_dtype dt, float *dst, const void *w, int64_t k,
			    int64_t i)
{
	const int64_t v = allm_qb_values(dt);
	for (int64_t b = 0; b * v < k; b++) {
		const uint8_t *blk = allm_qb_block(w, dt, k, i, b);
		for (int j = 0; j < v && b * v + j < k; j++)
			dst[b * v + j] = allm_qb_value(dt, blk, j);
	}
}
