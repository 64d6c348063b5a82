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
	allm_free(s->keys);
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
	if (need - s->n_blocks > allm_block_pool_avail(&kv->gpu))
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
	for (int32_t i = s->n_blocks - 1; i >= s->n_gone; i--) {
		int r = allm_block_pool_release(&kv->gpu, s->id, s->blocks[i]);
		ALLM_ASSERT(r == 0);
	}
	s->n_blocks = 0;
	s->n_gone = 0;
	s->n_cached = 0;
	s->n_linked = 0;
}

int32_t allm_seq_pass_window(struct allm_seq *s, struct allm_kv_cache *kv)
{
	int32_t w = kv->window, bs = kv->lay.block_size, n = 0;
	if (w <= 0 || s->n_cached + 1 - w < bs)
		return 0;
	/* the last block is never passed: the next position lies in or after it */
	int32_t passed = ALLM_MIN((s->n_cached + 1 - w) / bs, s->n_blocks - 1);
	for (; s->n_gone < passed; s->n_gone++, n++) {
		int r = allm_block_pool_release(&kv->gpu, s->id, s->blocks[s->n_gone]);
		ALLM_ASSERT(r == 0);
		s->blocks[s->n_gone] = -1;
	}
	return n;
}

int allm_seq_keys(struct allm_seq *s, const struct allm_prefix_cache *pc, int32_t n_tokens)
{
	int32_t bs = allm_pc_block_size(pc), want = ALLM_MIN(n_tokens, s->n_tokens) / bs;
	if (want <= s->n_keys)
		return 0;
	if (want > s->cap_keys) {
		int32_t cap = ALLM_MAX(want, ALLM_MAX(8, s->cap_keys * 2));
		struct allm_pc_key *k = allm_realloc(s->keys, (size_t)cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		s->keys = k;
		s->cap_keys = cap;
	}
	for (; s->n_keys < want; s->n_keys++)
		allm_pc_next_key(pc, s->n_keys ? &s->keys[s->n_keys - 1] : &s->root,
				 s->tokens + (size_t)s->n_keys * bs, &s->keys[s->n_keys]);
	return 0;
}

void allm_seq_batch_entry(const struct allm_seq *s, struct allm_batch_seq *ret)
{
	ret->tokens = s->tokens + s->n_cached;
	ret->n_new = s->n_tokens - s->n_cached;
	ret->start_pos = s->n_cached;
	ret->block_table = s->blocks;
	ret->n_blocks = s->n_blocks;
}
