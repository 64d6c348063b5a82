/* A sequence: its tokens (prompt + generated) and its block table in the device
 * pool. The scheduler moves sequences between queues; this file only keeps their
 * tokens and blocks consistent. */
#ifndef ALLM_SEQUENCE_H
#define ALLM_SEQUENCE_H

#include "executor.h"
#include "kv-cache.h"
#include "prefix-cache.h"

struct allm_seq {
	int64_t id; /* owner id in the block pool */
	int32_t *tokens; /* [n_tokens] prompt then generated */
	int32_t n_tokens;
	int32_t cap_tokens;
	int32_t n_prompt;
	int32_t n_cached; /* leading tokens whose K/V are in the cache */
	int32_t *blocks; /* block table: device block ids (owned, or cached and held) */
	int32_t n_blocks; /* entries of the table (n_tokens' positions it covers) */
	int32_t cap_blocks;
	/* leading entries given back (-1) because every layer's window has passed
	 * them (allm_seq_pass_window): the device holds blocks[n_gone .. n_blocks),
	 * and a swap moves only those */
	int32_t n_gone;
	/* the prefix cache's view (prefix-cache.h): keys[i] of full block i (the
	 * chain from root), for i < n_keys */
	struct allm_pc_key root;
	struct allm_pc_key *keys;
	int32_t n_keys, cap_keys;
	/* leading blocks whose cache entries are known (found or published);
	 * link_ent/link_gen: the entry of block n_linked - 1, parent of the next */
	int32_t n_linked;
	int32_t link_ent;
	uint32_t link_gen;
};

int allm_seq_init(struct allm_seq *s, int64_t id, const int32_t *prompt, int32_t n);
void allm_seq_fini(struct allm_seq *s, struct allm_kv_cache *kv);
int allm_seq_append(struct allm_seq *s, int32_t token);
/* Makes the block table cover n_total tokens, all or nothing: -ENOSPC (and no
 * block taken) when the pool has too few free blocks. */
int allm_seq_reserve(struct allm_seq *s, struct allm_kv_cache *kv, int32_t n_total);
/* Blocks it holds on the device (the table less what windows passed). */
static inline int32_t allm_seq_held(const struct allm_seq *s)
{
	return s->n_blocks - s->n_gone;
}
/* With kv->window > 0: gives back the blocks that lie wholly before the window
 * of the next position it feeds (n_cached: a token there reads positions
 * n_cached - window + 1 .. n_cached, and every later one less), their entries
 * becoming -1. A cached block loses this holder only (prefix-cache.h: it stays
 * cached for others). Call after n_cached grew and the prefix cache had its
 * look at the new full blocks. Returns how many went back. */
int32_t allm_seq_pass_window(struct allm_seq *s, struct allm_kv_cache *kv);
/* Returns every block to the pool, the last first (cached ones go on the
 * pool's LRU list tail first, so a chain's tail is reclaimed before its
 * head), and forgets the cached K/V (n_cached = 0). */
void allm_seq_release(struct allm_seq *s, struct allm_kv_cache *kv);
/* Computes the keys of the full blocks among the first n_tokens tokens (up to
 * n_tokens / block_size). 0 or -ENOMEM. */
int allm_seq_keys(struct allm_seq *s, const struct allm_prefix_cache *pc, int32_t n_tokens);
/* The batch entry that feeds every token not yet cached. */
void allm_seq_batch_entry(const struct allm_seq *s, struct allm_batch_seq *ret);

#endif
