/* A pool of fixed-size KV blocks identified by index: which are free, and who owns
 * each used one. Pure bookkeeping; the memory lives in struct allm_kv_cache. */
#ifndef ALLM_BLOCK_POOL_H
#define ALLM_BLOCK_POOL_H

#include "util.h"

#define ALLM_BLOCK_FREE (-1)

struct allm_block_pool {
	int32_t n_total; /* blocks in the pool */
	int32_t n_free;
	int32_t *free_ids; /* stack of free block ids; top = next handed out */
	int64_t *owner; /* [n_total] owning sequence id, or ALLM_BLOCK_FREE */
};

/* 0 or -ENOMEM. Blocks are handed out lowest id first from a fresh pool, so
 * placements are deterministic. */
int allm_block_pool_init(struct allm_block_pool *p, int32_t n_blocks);
void allm_block_pool_fini(struct allm_block_pool *p);

/* Takes a free block for `owner`: 0 and *ret_id, or -ENOSPC when none is free. */
int allm_block_pool_alloc(struct allm_block_pool *p, int64_t owner, int32_t *ret_id);
/* Returns a block; -EINVAL if it is out of range or not owned by `owner`
 * (double free), leaving the pool unchanged. */
int allm_block_pool_release(struct allm_block_pool *p, int64_t owner, int32_t id);

static inline int32_t allm_block_pool_used(const struct allm_block_pool *p)
{
	return p->n_total - p->n_free;
}

/* Checks free + used == total, no id twice in the free stack, and that free
 * blocks have no owner. 0 or -EFAULT. For tests and debug builds. */
int allm_block_pool_check(const struct allm_block_pool *p);

#endif
