/* Paged KV cache writes and paged causal attention, reference version.
 * K and V are only ever reached through a sequence's block table. */
#include "cpu-backend.h"

#include <math.h>

/* Element offset of (block, layer, kind, token-in-block, head) in the pool. */
static inline size_t kv_off(const struct allm_kv_layout *l, int64_t block, int32_t layer,
			    int kind, int32_t off, int32_t head)
{
	return ((((size_t)block * l->n_layers + layer) * 2 + kind) * l->block_size + off) *
		       l->n_kv_heads * l->head_dim +
	       (size_t)head * l->head_dim;
}

/* (cpu-backend.h) */
void cpu_kv_write_with(void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		       const float *k, const float *v, const struct allm_attn_meta *meta,
		       void (*to16)(void *dst, const float *src, enum allm_dtype dt, size_t n))
{
	const int32_t kvd = lay->n_kv_heads * lay->head_dim;
	const size_t es = allm_dtype_size(lay->dtype);
	for (int32_t t = 0; t < meta->n_tokens; t++) {
		int64_t blk = meta->slot[t] / lay->block_size;
		int32_t off = meta->slot[t] % lay->block_size;
		for (int kind = 0; kind < 2; kind++) {
			char *dst = (char *)kv_pool + kv_off(lay, blk, layer, kind, off, 0) * es;
			const float *src = (kind ? v : k) + (size_t)t * kvd;
			if (lay->dtype == ALLM_DTYPE_F32)
				memcpy(dst, src, (size_t)kvd * sizeof(float));
			else
				to16(dst, src, lay->dtype, (size_t)kvd);
		}
	}
}

void cpu_ref_kv_write(void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		      const float *k, const float *v, const struct allm_attn_meta *meta)
{
	cpu_kv_write_with(kv_pool, lay, layer, k, v, meta, allm_from_f32);
}

static inline float kv_load(const void *pool, enum allm_dtype dt, size_t at)
{
	switch (dt) {
	case ALLM_DTYPE_F16: return allm_f16_to_f32(((const uint16_t *)pool)[at]);
	case ALLM_DTYPE_BF16: return allm_bf16_to_f32(((const uint16_t *)pool)[at]);
	default: return ((const float *)pool)[at];
	}
}

void cpu_attention_one(float *out_row, const float *q_row, const void *kv_pool,
		       const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
		       const int32_t *block_table, int32_t p0, int32_t ctx_len, float scale,
		       float *scores)
{
	int32_t hd = lay->head_dim, bs = lay->block_size, n = ctx_len - p0;
	enum allm_dtype dt = lay->dtype;
	float mx = -INFINITY;

	/* scores[i] is position p0 + i's */
	for (int32_t i = 0; i < n; i++) {
		int32_t p = p0 + i;
		size_t at = kv_off(lay, block_table[p / bs], layer, 0, p % bs, kv_head);
		float s = 0.0f;
		if (dt == ALLM_DTYPE_F32) {
			const float *kr = (const float *)kv_pool + at;
			for (int32_t d = 0; d < hd; d++)
				s += q_row[d] * kr[d];
		} else {
			for (int32_t d = 0; d < hd; d++)
				s += q_row[d] * kv_load(kv_pool, dt, at + d);
		}
		s *= scale;
		scores[i] = s;
		if (s > mx)
			mx = s;
	}
	float sum = 0.0f;
	for (int32_t i = 0; i < n; i++) {
		scores[i] = expf(scores[i] - mx);
		sum += scores[i];
	}
	float inv = 1.0f / sum;
	for (int32_t d = 0; d < hd; d++)
		out_row[d] = 0.0f;
	for (int32_t i = 0; i < n; i++) {
		int32_t p = p0 + i;
		size_t at = kv_off(lay, block_table[p / bs], layer, 1, p % bs, kv_head);
		float w = scores[i] * inv;
		if (dt == ALLM_DTYPE_F32) {
			const float *vr = (const float *)kv_pool + at;
			for (int32_t d = 0; d < hd; d++)
				out_row[d] += w * vr[d];
		} else {
			for (int32_t d = 0; d < hd; d++)
				out_row[d] += w * kv_load(kv_pool, dt, at + d);
		}
	}
}

int cpu_ref_attention(float *out, const float *q, const void *kv_pool,
		      const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
		      float scale, const struct allm_attn_meta *meta)
{
	int32_t hd = lay->head_dim;
	int32_t group = n_heads / lay->n_kv_heads; /* query heads per kv head (GQA) */
	float *scores = allm_malloc((size_t)ALLM_MAX(meta->max_ctx, 1) * sizeof(float));
	if (!scores)
		return -ENOMEM;
	for (int32_t t = 0; t < meta->n_tokens; t++) {
		const int32_t *bt = meta->block_tables +
				    (size_t)meta->tok_seq[t] * meta->max_blocks_per_seq;
		int32_t ctx = meta->tok_pos[t] + 1; /* causal: itself and everything before */
		int32_t p0 = cpu_window_start(meta, t); /* or the last window positions */
		for (int32_t h = 0; h < n_heads; h++) {
			size_t row = ((size_t)t * n_heads + h) * hd;
			cpu_attention_one(out + row, q + row, kv_pool, lay, layer, h / group, bt,
					  p0, ctx, scale, scores);
		}
	}
	allm_free(scores);
	return 0;
}
