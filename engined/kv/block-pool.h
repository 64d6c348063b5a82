/* A pool of fixed-size KV blocks identified by index: which are free, and who owns
 * each used one. Pure bookkeeping; the memory lives in struct allm_kv_cache.
 *
 * A block is free, retired (parked by a shrink), owned by one sequence, or
 * cached: it holds a prefix-cache entry (prefix-cache.h), is read-only, and is
 * held by refs[id] sequences (or pins). A cached block that nobody holds is
 * "cached-free": it keeps its contents for a later hit and sits on a
 * least-recently-used list, from which an allocation that finds no free block
 * reclaims it (the prefix cache's evict callback moves its entry to a lower
 * tier or drops it first). So what an allocation can get is
 * allm_block_pool_avail() = free + cached-free.
 *
 * The pool can be resized while blocks are in use (the control plane changes block
 * counts at run time). Ids live in [0, capacity); shrinking parks free blocks,
 * then reclaims cached-free ones, as "retired" and, when too few are left,
 * records a deficit that the scheduler pays back by preempting: each block
 * released while in deficit is retired instead of freed (a cached one once its
 * last holder lets go). Invariants: capacity = n_free + used + n_cached +
 * n_retired (used counts owned blocks and held cached ones) and
 * n_total + deficit = capacity - n_retired. */
#ifndef ALLM_BLOCK_POOL_H
#define ALLM_BLOCK_POOL_H

#include "common.h"

#define ALLM_BLOCK_FREE (-1)
#define ALLM_BLOCK_RETIRED (-2)
#define ALLM_BLOCK_CACHED (-3)

struct allm_block_pool;

/* Called with a cached-free block the pool is about to take back (it is off
 * the LRU list already, still ALLM_BLOCK_CACHED with refs 0, its contents
 * intact): the owner of the entry moves it away or forgets it, and must not
 * touch this pool's cached blocks meanwhile. */
typedef void (*allm_block_evict_fn)(void *ctx, struct allm_block_pool *p, int32_t id);

struct allm_block_pool {
	int32_t n_total; /* blocks the pool should hold (the configured count) */
	int32_t n_free;
	int32_t capacity; /* ids ever created: [0, capacity) */
	int32_t n_retired; /* parked by a shrink */
	int32_t deficit; /* used blocks above n_total, to be preempted away */
	int32_t n_cached; /* cached blocks with refs 0 (on the LRU list): reclaimable */
	int32_t *free_ids; /* stack of free block ids; top = next handed out */
	int64_t *owner; /* [capacity] owning sequence id, ALLM_BLOCK_FREE, _RETIRED or _CACHED */
	int32_t *refs; /* [capacity] holders of a cached block (0 otherwise) */
	/* [capacity] the cached-free blocks, least recently released first
	 * (lru_head); -1 ends the list */
	int32_t *lru_prev, *lru_next;
	int32_t lru_head, lru_tail;
	allm_block_evict_fn evict; /* NULL: a reclaimed block's entry is simply gone */
	void *evict_ctx;
};

/* 0 or -ENOMEM. Blocks are handed out lowest id first from a fresh pool, so
 * placements are deterministic. */
int allm_block_pool_init(struct allm_block_pool *p, int32_t n_blocks);
void allm_block_pool_fini(struct allm_block_pool *p);

/* Takes a free block for `owner` (>= 0), reclaiming the least recently used
 * cached-free block when none is free: 0 and *ret_id, or -ENOSPC when neither
 * is left. */
int allm_block_pool_alloc(struct allm_block_pool *p, int64_t owner, int32_t *ret_id);
/* Returns a block: one `owner` owns goes back (free, or retired in deficit);
 * a cached one loses a holder (the last one puts it on the LRU list, or in
 * deficit has it evicted and retired). -EINVAL if it is out of range, owned by
 * another, or a cached block nobody holds (double free), leaving the pool
 * unchanged. */
int allm_block_pool_release(struct allm_block_pool *p, int64_t owner, int32_t id);

/* `owner`'s block becomes cached, held once (by owner, who releases it like any
 * other). -EINVAL unless owner owns it. */
int allm_block_pool_cache(struct allm_block_pool *p, int64_t owner, int32_t id);
/* One more holder of cached block id (off the LRU list if it was on it).
 * -EINVAL unless it is cached. */
int allm_block_pool_ref(struct allm_block_pool *p, int32_t id);
/* The cache lets go of cached-free block id: it becomes free (retired in
 * deficit). -EBUSY while someone holds it, -EINVAL unless cached. */
int allm_block_pool_uncache(struct allm_block_pool *p, int32_t id);
/* Moves cached-free block id to the most recently used end (a hit that did
 * not take it). */
void allm_block_pool_touch(struct allm_block_pool *p, int32_t id);

/* Sets the configured count. Growing un-retires parked blocks first and creates
 * new ids past capacity (the caller grows the memory to match *before* using
 * them: see allm_block_pool_capacity_needed). Shrinking retires free blocks,
 * then reclaims cached-free ones (evict callback), and leaves a deficit when
 * used > n. 0 or -ENOMEM/-EINVAL (pool unchanged). */
int allm_block_pool_resize(struct allm_block_pool *p, int32_t n);
/* Capacity a resize to n would need. */
int32_t allm_block_pool_capacity_needed(const struct allm_block_pool *p, int32_t n);

/* Blocks held by sequences (owned, or cached and held). */
static inline int32_t allm_block_pool_used(const struct allm_block_pool *p)
{
	return p->capacity - p->n_free - p->n_retired - p->n_cached;
}

/* Blocks an allocation can get now: free + cached-free. */
static inline int32_t allm_block_pool_avail(const struct allm_block_pool *p)
{
	return p->n_free + p->n_cached;
}

/* Checks the invariants above, that no id is twice in the free stack, that free
 * blocks have no owner, that the LRU list holds exactly the cached blocks with
 * refs 0. 0 or -EFAULT. For tests and debug builds. */
int allm_block_pool_check(const struct allm_block_pool *p);

#endif
