/* int8 weights: quantizing at load, dequantizing a row (format in quant.h). */
#include "quant.h"

#include <math.h>

uint16_t allm_q8_scale(float amax)
{
	float d = amax / 127.0f;
	uint32_t u;
	memcpy(&u, &d, 4);
	if (u & 0xffff) /* round up: no |w| / d may exceed 127 */
		u += 0x10000;
	return (uint16_t)(u >> 16);
}

void allm_q8_quantize_rows(void *dst, int64_t k, int64_t row0, const float *src,
			   int64_t n_rows)
{
	int64_t k32 = allm_q8_k32(k);
	size_t rb = allm_q8_row_bytes(k);
	for (int64_t i = 0; i < n_rows; i++) {
		char *row = (char *)dst + (size_t)(row0 + i) * rb;
		int8_t *q = (int8_t *)row;
		uint16_t *d = (uint16_t *)(row + k32);
		const float *s = src + i * k;
		memset(row, 0, rb);
		for (int64_t b = 0; b * ALLM_Q8_BLOCK < k; b++) {
			int64_t p0 = b * ALLM_Q8_BLOCK, p1 = ALLM_MIN(k, p0 + ALLM_Q8_BLOCK);
			float amax = 0.0f;
			for (int64_t p = p0; p < p1; p++) {
				float a = fabsf(s[p]);
				amax = a > amax ? a : amax;
			}
			d[b] = allm_q8_scale(amax);
			float scale = allm_bf16_to_f32(d[b]);
			for (int64_t p = p0; p < p1 && scale > 0.0f; p++) {
				/* |w| / scale <= 127 by the rounding up of scale */
				long v = lrintf(s[p] / scale); /* half to even */
				q[p] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
			}
		}
	}
}

void allm_q8_dequantize_row(float *dst, const void *w, int64_t k, int64_t i)
{
	for (int64_t p = 0; p < k; p++)
		dst[p] = allm_q8_get(w, k, i, p);
}
