#include "block-pool.h"

#include <errno.h>

static void free_arrays(struct allm_block_pool *p)
{
	allm_free(p->free_ids);
	allm_free(p->owner);
	allm_free(p->refs);
	allm_free(p->lru_prev);
	allm_free(p->lru_next);
}

int allm_block_pool_init(struct allm_block_pool *p, int32_t n_blocks)
{
	memset(p, 0, sizeof(*p));
	if (n_blocks < 0)
		return -EINVAL;
	size_t n = (size_t)ALLM_MAX(n_blocks, 1);
	p->free_ids = allm_malloc(n * sizeof(*p->free_ids));
	p->owner = allm_malloc(n * sizeof(*p->owner));
	p->refs = allm_calloc(n, sizeof(*p->refs));
	p->lru_prev = allm_malloc(n * sizeof(*p->lru_prev));
	p->lru_next = allm_malloc(n * sizeof(*p->lru_next));
	if (!p->free_ids || !p->owner || !p->refs || !p->lru_prev || !p->lru_next) {
		allm_block_pool_fini(p);
		return -ENOMEM;
	}
	p->n_total = p->n_free = p->capacity = n_blocks;
	p->lru_head = p->lru_tail = -1;
	for (int32_t i = 0; i < n_blocks; i++) {
		p->free_ids[i] = n_blocks - 1 - i; /* top of stack = block 0 */
		p->owner[i] = ALLM_BLOCK_FREE;
	}
	return 0;
}

void allm_block_pool_fini(struct allm_block_pool *p)
{
	if (!p)
		return;
	free_arrays(p);
	memset(p, 0, sizeof(*p));
}

/* --- the LRU list of cached-free blocks ------------------------------------------ */

static void lru_push(struct allm_block_pool *p, int32_t id)
{
	p->lru_prev[id] = p->lru_tail;
	p->lru_next[id] = -1;
	if (p->lru_tail >= 0)
		p->lru_next[p->lru_tail] = id;
	else
		p->lru_head = id;
	p->lru_tail = id;
	p->n_cached++;
}

static void lru_unlink(struct allm_block_pool *p, int32_t id)
{
	int32_t a = p->lru_prev[id], b = p->lru_next[id];
	if (a >= 0)
		p->lru_next[a] = b;
	else
		p->lru_head = b;
	if (b >= 0)
		p->lru_prev[b] = a;
	else
		p->lru_tail = a;
	p->n_cached--;
}

/* A block leaves use: free, or retired while a shrink is owed. */
static void put_back(struct allm_block_pool *p, int32_t id)
{
	p->refs[id] = 0;
	if (p->deficit > 0) {
		/* paying back a shrink: this block leaves the pool */
		p->owner[id] = ALLM_BLOCK_RETIRED;
		p->n_retired++;
		p->deficit--;
		return;
	}
	p->owner[id] = ALLM_BLOCK_FREE;
	p->free_ids[p->n_free++] = id;
}

/* Takes the least recently used cached-free block back from the cache: its
 * entry is evicted, the block is free again (or retired). */
static void reclaim(struct allm_block_pool *p)
{
	int32_t id = p->lru_head;
	lru_unlink(p, id);
	if (p->evict)
		p->evict(p->evict_ctx, p, id);
	put_back(p, id);
}

int allm_block_pool_alloc(struct allm_block_pool *p, int64_t owner, int32_t *ret_id)
{
	/* a reclaimed block may go to pay a deficit: keep going while any is left */
	while (p->n_free == 0 && p->n_cached > 0)
		reclaim(p);
	if (p->n_free == 0)
		return -ENOSPC;
	int32_t id = p->free_ids[--p->n_free];
	p->owner[id] = owner;
	*ret_id = id;
	return 0;
}

int allm_block_pool_release(struct allm_block_pool *p, int64_t owner, int32_t id)
{
	if (id < 0 || id >= p->capacity || owner < 0)
		return -EINVAL;
	if (p->owner[id] == ALLM_BLOCK_CACHED) {
		if (p->refs[id] <= 0)
			return -EINVAL; /* nobody holds it: a double free */
		if (--p->refs[id] > 0)
			return 0;
		if (p->deficit > 0) {
			/* a shrink is owed: the last holder's release pays it */
			if (p->evict)
				p->evict(p->evict_ctx, p, id);
			put_back(p, id);
			return 0;
		}
		lru_push(p, id);
		return 0;
	}
	if (p->owner[id] != owner)
		return -EINVAL;
	put_back(p, id);
	return 0;
}

int allm_block_pool_cache(struct allm_block_pool *p, int64_t owner, int32_t id)
{
	if (id < 0 || id >= p->capacity || owner < 0 || p->owner[id] != owner)
		return -EINVAL;
	p->owner[id] = ALLM_BLOCK_CACHED;
	p->refs[id] = 1;
	return 0;
}

int allm_block_pool_ref(struct allm_block_pool *p, int32_t id)
{
	if (id < 0 || id >= p->capacity || p->owner[id] != ALLM_BLOCK_CACHED)
		return -EINVAL;
	if (p->refs[id]++ == 0)
		lru_unlink(p, id);
	return 0;
}

int allm_block_pool_uncache(struct allm_block_pool *p, int32_t id)
{
	if (id < 0 || id >= p->capacity || p->owner[id] != ALLM_BLOCK_CACHED)
		return -EINVAL;
	if (p->refs[id] > 0)
		return -EBUSY;
	lru_unlink(p, id);
	put_back(p, id);
	return 0;
}

void allm_block_pool_touch(struct allm_block_pool *p, int32_t id)
{
	if (id < 0 || id >= p->capacity || p->owner[id] != ALLM_BLOCK_CACHED || p->refs[id] > 0)
		return;
	lru_unlink(p, id);
	lru_push(p, id);
}

int32_t allm_block_pool_capacity_needed(const struct allm_block_pool *p, int32_t n)
{
	/* after the resize, capacity - n_retired = n + the deficit still owed; every
	 * existing id can be brought back, so only the excess needs new ids */
	if (n <= p->n_total)
		return p->capacity;
	int32_t owed = ALLM_MAX(0, p->deficit - (n - p->n_total));
	return ALLM_MAX(p->capacity, n + owed);
}

/* Grows every per-block array to cap entries. */
static int grow_arrays(struct allm_block_pool *p, int32_t cap)
{
	int32_t *f = allm_realloc(p->free_ids, (size_t)cap * sizeof(*f));
	if (!f)
		return -ENOMEM;
	p->free_ids = f;
	int64_t *o = allm_realloc(p->owner, (size_t)cap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	p->owner = o;
	int32_t **a[] = {&p->refs, &p->lru_prev, &p->lru_next};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(a); i++) {
		int32_t *v = allm_realloc(*a[i], (size_t)cap * sizeof(int32_t));
		if (!v)
			return -ENOMEM;
		*a[i] = v;
	}
	for (int32_t id = p->capacity; id < cap; id++)
		p->refs[id] = 0;
	return 0;
}

int allm_block_pool_resize(struct allm_block_pool *p, int32_t n)
{
	if (n < 0)
		return -EINVAL;
	int32_t cap = allm_block_pool_capacity_needed(p, n);
	if (cap > p->capacity && grow_arrays(p, cap))
		return -ENOMEM;
	if (n >= p->n_total) {
		int32_t grow = n - p->n_total;
		int32_t pay = ALLM_MIN(grow, p->deficit); /* forgive what was still owed */
		p->deficit -= pay;
		grow -= pay;
		/* bring back retired blocks, lowest id first */
		for (int32_t id = 0; grow > 0 && p->n_retired > 0 && id < p->capacity; id++) {
			if (p->owner[id] != ALLM_BLOCK_RETIRED)
				continue;
			p->owner[id] = ALLM_BLOCK_FREE;
			p->free_ids[p->n_free++] = id;
			p->n_retired--;
			grow--;
		}
		/* then brand-new ids; pushed so the lowest is handed out first */
		for (int32_t id = cap - 1; id >= p->capacity; id--) {
			p->owner[id] = ALLM_BLOCK_FREE;
			p->free_ids[p->n_free++] = id;
		}
		p->capacity = cap;
	} else {
		int32_t shrink = p->n_total - n;
		while (shrink > 0 && p->n_free > 0) {
			int32_t id = p->free_ids[--p->n_free];
			p->owner[id] = ALLM_BLOCK_RETIRED;
			p->n_retired++;
			shrink--;
		}
		/* then what the cache holds and nobody uses, evicted cleanly */
		p->deficit += shrink;
		while (p->deficit > 0 && p->n_cached > 0)
			reclaim(p);
	}
	p->n_total = n;
	return 0;
}

int allm_block_pool_check(const struct allm_block_pool *p)
{
	int32_t n_owned = 0, n_ret = 0, n_cfree = 0, n_lru = 0;
	uint8_t *seen = allm_calloc((size_t)ALLM_MAX(p->capacity, 1), 1);
	int r = 0;
	if (!seen)
		return -ENOMEM;
	if (p->n_free < 0 || p->n_free > p->capacity || p->deficit < 0 || p->n_cached < 0)
		r = -EFAULT;
	for (int32_t i = 0; !r && i < p->n_free; i++) {
		int32_t id = p->free_ids[i];
		if (id < 0 || id >= p->capacity || seen[id] || p->owner[id] != ALLM_BLOCK_FREE)
			r = -EFAULT;
		else
			seen[id] = 1;
	}
	/* the LRU list: cached blocks with refs 0, each once, linked both ways */
	for (int32_t id = p->lru_head, prev = -1; !r && id >= 0; prev = id, id = p->lru_next[id]) {
		if (id >= p->capacity || seen[id] || p->owner[id] != ALLM_BLOCK_CACHED || p->refs[id] != 0 ||
		    p->lru_prev[id] != prev || ++n_lru > p->capacity)
			r = -EFAULT;
		else
			seen[id] = 2;
		if (!r && p->lru_next[id] < 0 && p->lru_tail != id)
			r = -EFAULT;
	}
	for (int32_t i = 0; !r && i < p->capacity; i++) {
		if (p->owner[i] == ALLM_BLOCK_RETIRED)
			n_ret++;
		else if (p->owner[i] >= 0)
			n_owned++;
		else if (p->owner[i] == ALLM_BLOCK_CACHED) {
			if (p->refs[i] < 0 || (p->refs[i] == 0) != (seen[i] == 2))
				r = -EFAULT; /* a cached-free block off the list, or a held one on it */
			if (p->refs[i] > 0)
				n_owned++;
			else
				n_cfree++;
		} else if (p->owner[i] == ALLM_BLOCK_FREE && !seen[i])
			r = -EFAULT; /* marked free but not in the stack: a leak */
		else if (p->owner[i] != ALLM_BLOCK_FREE)
			r = -EFAULT;
		if (!r && p->owner[i] != ALLM_BLOCK_CACHED && p->refs[i] != 0)
			r = -EFAULT;
	}
	if (!r && (n_ret != p->n_retired || n_cfree != p->n_cached || n_lru != p->n_cached ||
		   n_owned + p->n_free + n_ret + n_cfree != p->capacity ||
		   n_owned != allm_block_pool_used(p) ||
		   p->n_total + p->deficit != p->capacity - p->n_retired))
		r = -EFAULT;
	allm_free(seen);
	return r;
}
