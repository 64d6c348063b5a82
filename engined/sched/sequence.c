#include "sequence.h"

#include <errno.h>

int allm_seq_init(struct allm_seq *s, int64_t id, const int32_t *prompt, int32_t n)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->cap_tokens = ALLM_MAX(n + 16, 32);
	s->tokens = allm_malloc((size_t)s->cap_tokens * sizeof(int32_t));
	if (!s->tokens)
		return -ENOMEM;
	memcpy(s->tokens, prompt, (size_t)n * sizeof(int32_t));
	s->n_tokens = s->n_prompt = n;
	return 0;
}

void allm_seq_fini(struct allm_seq *s, struct allm_kv_cache *kv)
{
	if (kv)
		allm_seq_release(s, kv);
	allm_free(s->tokens);
	allm_free(s->blocks);
	memset(s, 0, sizeof(*s));
}

int allm_seq_append(struct allm_seq *s, int32_t token)
{
	if (s->n_tokens == s->cap_tokens) {
		int32_t cap = s->cap_tokens * 2;
		int32_t *t = allm_realloc(s->tokens, (size_t)cap * sizeof(int32_t));
		if (!t)
			return -ENOMEM;
		s->tokens = t;
		s->cap_tokens = cap;
	}
	s->tokens[s->n_tokens++] = token;
	return 0;
}

int allm_seq_reserve(struct allm_seq *s, struct allm_kv_cache *kv, int32_t n_total)
{
	int32_t need = allm_kv_blocks_for(kv, n_total);
	if (need <= s->n_blocks)
		return 0;
	if (need - s->n_blocks > kv->gpu.n_free)
		return -ENOSPC;
	if (need > s->cap_blocks) {
		int32_t cap = ALLM_MAX(need, s->cap_blocks * 2);
		int32_t *b = allm_realloc(s->blocks, (size_t)cap * sizeof(int32_t));
		if (!b)
			return -ENOMEM;
		s->blocks = b;
		s->cap_blocks = cap;
	}
	while (s->n_blocks < need) {
		int r = allm_block_pool_alloc(&kv->gpu, s->id, &s->blocks[s->n_blocks]);
		ALLM_ASSERT(r == 0); /* n_free was checked above */
		s->n_blocks++;
	}
	return 0;
}

void allm_seq_release(struct allm_seq *s, struct allm_kv_cache *kv)
{
	for (int32_t i = 0; i < s->n_blocks; i++) {
		int r = allm_block_pool_release(&kv->gpu, s->id, s->blocks[i]);
		ALLM_ASSERT(r == 0);
	}
	s->n_blocks = 0;
	s->n_cached = 0;
}

void allm_seq_batch_entry(const struct allm_seq *s, struct allm_batch_seq *ret)
{
	ret->tokens = s->tokens + s->n_cached;
	ret->n_new = s->n_tokens - s->n_cached;
	ret->start_pos = s->n_cached;
	ret->block_table = s->blocks;
	ret->n_blocks = s->n_blocks;
}
