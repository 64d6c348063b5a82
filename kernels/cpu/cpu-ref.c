/* The CPU reference ops: plain loops, one thread, f32 math. Every other backend
 * and the fast path are tested against these, so clarity beats speed here. */
#include "cpu-backend.h"
#include "qblock.h"

#include <math.h>

/* Element i of a weight vector stored as dt. */
static inline float wload(const void *w, enum allm_dtype dt, size_t i)
{
	switch (dt) {
	case ALLM_DTYPE_F16: return allm_f16_to_f32(((const uint16_t *)w)[i]);
	case ALLM_DTYPE_BF16: return allm_bf16_to_f32(((const uint16_t *)w)[i]);
	default: return ((const float *)w)[i];
	}
}

/* Element (row, col) of a matrix with `cols` columns stored as dt (the GGUF block
 * formats: q * d, or q * d + m). */
static inline float mload(const void *w, enum allm_dtype dt, int64_t cols, int64_t row,
			  int64_t col)
{
	if (allm_dtype_is_qblock(dt))
		return allm_qb_get(w, dt, cols, row, col);
	return wload(w, dt, (size_t)row * cols + col);
}

void cpu_ref_embedding(float *y, const void *table, enum allm_dtype dt, const int32_t *ids,
		       int64_t n, int64_t dim)
{
	for (int64_t i = 0; i < n; i++) { /* ids were range-checked by the caller */
		if (allm_dtype_is_qblock(dt)) { /* mload's values, a block's scale read once */
			allm_qb_dequantize_row(dt, y + i * dim, table, dim, ids[i]);
			continue;
		}
		for (int64_t j = 0; j < dim; j++)
			y[i * dim + j] = mload(table, dt, dim, ids[i], j);
	}
}

void cpu_ref_rmsnorm(float *y, const float *x, const void *w, enum allm_dtype dt,
		     int64_t n, int64_t dim, float eps)
{
	for (int64_t i = 0; i < n; i++) {
		const float *xr = x + i * dim; // (dim)
		float ss = 0.0f;
		for (int64_t j = 0; j < dim; j++)
			ss += xr[j] * xr[j];
		float inv = 1.0f / sqrtf(ss / (float)dim + eps);
		cpu_ref_rmsnorm_scaled(y + i * dim, xr, w, dt, 0, dim, inv);
	}
}

void cpu_ref_rmsnorm_scaled(float *y, const float *x, const void *w, enum allm_dtype dt,
			    int64_t w0, int64_t len, float inv)
{
	for (int64_t j = 0; j < len; j++)
		y[j] = x[j] * inv * wload(w, dt, (size_t)(w0 + j));
}

void cpu_ref_layernorm(float *y, const float *x, const void *w, const void *b,
		       enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	for (int64_t i = 0; i < n; i++) {
		const float *xr = x + i * dim; // (dim)
		float mean = 0.0f, var = 0.0f;
		for (int64_t j = 0; j < dim; j++)
			mean += xr[j];
		mean /= (float)dim;
		for (int64_t j = 0; j < dim; j++)
			var += (xr[j] - mean) * (xr[j] - mean);
		var /= (float)dim;
		float inv = 1.0f / sqrtf(var + eps);
		for (int64_t j = 0; j < dim; j++) {
			float v = (xr[j] - mean) * inv;
			if (w)
				v *= wload(w, dt, j);
			if (b)
				v += wload(b, dt, j);
			y[i * dim + j] = v;
		}
	}
}

void cpu_ref_gemm(float *y, const float *x, const void *w, const void *bias,
		  enum allm_dtype dt, int64_t n, int64_t k, int64_t m)
{
	for (int64_t i = 0; i < n; i++) {
		for (int64_t o = 0; o < m; o++) {
			float acc = 0.0f;
			for (int64_t j = 0; j < k; j++)
				acc += x[i * k + j] * mload(w, dt, k, o, j);
			if (bias) /* a quantized GEMM's bias is f32 */
				acc += wload(bias, allm_dtype_is_qblock(dt) ? ALLM_DTYPE_F32 : dt, o);
			y[i * m + o] = acc;
		}
	}
}

/* Rotate-half: dims i and i + hd/2 form a pair (HF Llama / GPT-NeoX layout). */
static void rope_row(float *v, int32_t n_heads, int32_t hd, const float *cs, const float *sn)
{
	int32_t half = hd / 2;
	for (int32_t h = 0; h < n_heads; h++) {
		float *r = v + (size_t)h * hd;
		for (int32_t i = 0; i < half; i++) {
			float a = r[i], b = r[i + half];
			r[i] = a * cs[i] - b * sn[i];
			r[i + half] = b * cs[i] + a * sn[i];
		}
	}
}

void cpu_ref_rope(float *q, float *k, const int32_t *pos, const float *inv_freq, int64_t n,
		  int32_t n_heads, int32_t n_kv_heads, int32_t head_dim)
{
	int32_t half = head_dim / 2;
	float cs[512], sn[512]; /* head_dim <= 1024 is checked by the model loader */
	for (int64_t t = 0; t < n; t++) {
		for (int32_t i = 0; i < half; i++) {
			/* angle in double: positions up to 1e6 times freq keep precision */
			double ang = (double)pos[t] * (double)inv_freq[i];
			cs[i] = (float)cos(ang);
			sn[i] = (float)sin(ang);
		}
		rope_row(q + t * (int64_t)n_heads * head_dim, n_heads, head_dim, cs, sn);
		rope_row(k + t * (int64_t)n_kv_heads * head_dim, n_kv_heads, head_dim, cs, sn);
	}
}

void cpu_ref_silu_mul(float *y, const float *gate, const float *up, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float g = gate[i];
		y[i] = g / (1.0f + expf(-g)) * up[i];
	}
}

void cpu_ref_gelu_mul(float *y, const float *gate, const float *up, int64_t n)
{
	const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
	for (int64_t i = 0; i < n; i++) {
		float g = gate[i];
		y[i] = 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g))) * up[i];
	}
}

void cpu_ref_scale(float *y, const float *x, float s, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] * s;
}

void cpu_ref_relu(float *y, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void cpu_ref_add(float *y, const float *a, const float *b, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}

void cpu_ref_gather_rows(float *y, const float *x, const int32_t *rows, int64_t n,
			 int64_t dim)
{
	for (int64_t i = 0; i < n; i++)
		memmove(y + i * dim, x + (int64_t)rows[i] * dim, (size_t)dim * sizeof(float));
}

void cpu_ref_argmax(int32_t *ret_ids, const float *logits, int64_t n, int64_t vocab)
{
	for (int64_t i = 0; i < n; i++) {
		const float *r = logits + i * vocab;
		int32_t best = 0;
		for (int64_t j = 1; j < vocab; j++)
			if (r[j] > r[best]) /* strict: the lowest id wins a tie */
				best = (int32_t)j;
		ret_ids[i] = best;
	}
}
