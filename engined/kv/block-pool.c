#include "block-pool.h"

#include <errno.h>

int allm_block_pool_init(struct allm_block_pool *p, int32_t n_blocks)
{
	memset(p, 0, sizeof(*p));
	if (n_blocks < 0)
		return -EINVAL;
	p->free_ids = allm_malloc((size_t)ALLM_MAX(n_blocks, 1) * sizeof(*p->free_ids));
	p->owner = allm_malloc((size_t)ALLM_MAX(n_blocks, 1) * sizeof(*p->owner));
	if (!p->free_ids || !p->owner) {
		allm_block_pool_fini(p);
		return -ENOMEM;
	}
	p->n_total = p->n_free = p->capacity = n_blocks;
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
	allm_free(p->free_ids);
	allm_free(p->owner);
	memset(p, 0, sizeof(*p));
}

int allm_block_pool_alloc(struct allm_block_pool *p, int64_t owner, int32_t *ret_id)
{
	if (p->n_free == 0)
		return -ENOSPC;
	int32_t id = p->free_ids[--p->n_free];
	p->owner[id] = owner;
	*ret_id = id;
	return 0;
}

int allm_block_pool_release(struct allm_block_pool *p, int64_t owner, int32_t id)
{
	if (id < 0 || id >= p->capacity || owner < 0 || p->owner[id] != owner)
		return -EINVAL;
	if (p->deficit > 0) {
		/* paying back a shrink: this block leaves the pool */
		p->owner[id] = ALLM_BLOCK_RETIRED;
		p->n_retired++;
		p->deficit--;
		return 0;
	}
	p->owner[id] = ALLM_BLOCK_FREE;
	p->free_ids[p->n_free++] = id;
	return 0;
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

int allm_block_pool_resize(struct allm_block_pool *p, int32_t n)
{
	if (n < 0)
		return -EINVAL;
	int32_t cap = allm_block_pool_capacity_needed(p, n);
	if (cap > p->capacity) {
		int32_t *f = allm_realloc(p->free_ids, (size_t)cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		p->free_ids = f;
		int64_t *o = allm_realloc(p->owner, (size_t)cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		p->owner = o;
	}
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
		p->deficit += shrink;
	}
	p->n_total = n;
	return 0;
}

int allm_block_pool_check(const struct allm_block_pool *p)
{
	int32_t n_owned = 0, n_ret = 0;
	uint8_t *seen = allm_calloc((size_t)ALLM_MAX(p->capacity, 1), 1);
	int r = 0;
	if (!seen)
		return -ENOMEM;
	if (p->n_free < 0 || p->n_free > p->capacity || p->deficit < 0)
		r = -EFAULT;
	for (int32_t i = 0; !r && i < p->n_free; i++) {
		int32_t id = p->free_ids[i];
		if (id < 0 || id >= p->capacity || seen[id] || p->owner[id] != ALLM_BLOCK_FREE)
			r = -EFAULT;
		else
			seen[id] = 1;
	}
	for (int32_t i = 0; !r && i < p->capacity; i++) {
		if (p->owner[i] == ALLM_BLOCK_RETIRED)
			n_ret++;
		else if (p->owner[i] >= 0)
			n_owned++;
		else if (p->owner[i] == ALLM_BLOCK_FREE && !seen[i])
			r = -EFAULT; /* marked free but not in the stack: a leak */
	}
	if (!r && (n_ret != p->n_retired || n_owned + p->n_free + n_ret != p->capacity ||
		   p->n_total + p->deficit != p->capacity - p->n_retired))
		r = -EFAULT;
	allm_free(seen);
	return r;
}
