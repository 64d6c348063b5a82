/* A pool of fixed-size KV blocks identified by index: which are free, and who owns
 * each used one. Pure bookkeeping; the memory lives in struct allm_kv_cache.
 *
 * The pool can be resized while blocks are in use (the control plane changes block
 * counts at run time). Ids live in [0, capacity); shrinking parks free blocks as
 * "retired" and, when too few are free, records a deficit that the scheduler pays
 * back by preempting: each block released while in deficit is retired instead of
 * freed. Invariant: capacity = n_free + used + n_retired and
 * n_total + deficit = capacity - n_retired. */
#ifndef ALLM_BLOCK_POOL_H
#define ALLM_BLOCK_POOL_H

#include "common.h"

#define ALLM_BLOCK_FREE (-1)
#define ALLM_BLOCK_RETIRED (-2)

struct allm_block_pool {
	int32_t n_total; /* blocks the pool should hold (the configured count) */
	int32_t n_free;
	int32_t capacity; /* ids ever created: [0, capacity) */
	int32_t n_retired; /* parked by a shrink */
	int32_t deficit; /* used blocks above n_total, to be preempted away */
	int32_t *free_ids; /* stack of free block ids; top = next handed out */
	int64_t *owner; /* [capacity] owning sequence id, ALLM_BLOCK_FREE or _RETIRED */
};

/* 0 or -ENOMEM. Blocks are handed out lowest id first from a fresh pool, so
 * placements are deterministic. */
int allm_block_pool_init(struct allm_block_pool *p, int32_t n_blocks);
void allm_block_pool_fini(struct allm_block_pool *p);

/* Takes a free block for `owner` (>= 0): 0 and *ret_id, or -ENOSPC when none is free. */
int allm_block_pool_alloc(struct allm_block_pool *p, int64_t owner, int32_t *ret_id);
/* Returns a block; -EINVAL if it is out of range or not owned by `owner`
 * (double free), leaving the pool unchanged. */
int allm_block_pool_release(struct allm_block_pool *p, int64_t owner, int32_t id);

/* Sets the configured count. Growing un-retires parked blocks first and creates
 * new ids past capacity (the caller grows the memory to match *before* using
 * them: see allm_block_pool_capacity_needed). Shrinking retires free blocks and
 * leaves a deficit when used > n. 0 or -ENOMEM/-EINVAL (pool unchanged). */
int allm_block_pool_resize(struct allm_block_pool *p, int32_t n);
/* Capacity a resize to n would need. */
int32_t allm_block_pool_capacity_needed(const struct allm_block_pool *p, int32_t n);

static inline int32_t allm_block_pool_used(const struct allm_block_pool *p)
{
	return p->capacity - p->n_free - p->n_retired;
}

/* Checks the invariants above, that no id is twice in the free stack, that free
 * blocks have no owner. 0 or -EFAULT. For tests and debug builds. */
int allm_block_pool_check(const struct allm_block_pool *p);

#endif
