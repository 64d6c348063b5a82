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
	p->n_total = p->n_free = n_blocks;
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
	if (id < 0 || id >= p->n_total || p->owner[id] != owner || owner == ALLM_BLOCK_FREE)
		return -EINVAL;
	p->owner[id] = ALLM_BLOCK_FREE;
	p->free_ids[p->n_free++] = id;
	return 0;
}

int allm_block_pool_check(const struct allm_block_pool *p)
{
	int32_t n_owned = 0;
	uint8_t *seen = allm_calloc((size_t)ALLM_MAX(p->n_total, 1), 1);
	int r = 0;
	if (!seen)
		return -ENOMEM;
	if (p->n_free < 0 || p->n_free > p->n_total)
		r = -EFAULT;
	for (int32_t i = 0; !r && i < p->n_free; i++) {
		int32_t id = p->free_ids[i];
		if (id < 0 || id >= p->n_total || seen[id] || p->owner[id] != ALLM_BLOCK_FREE)
			r = -EFAULT;
		else
			seen[id] = 1;
	}
	for (int32_t i = 0; !r && i < p->n_total; i++)
		n_owned += p->owner[i] != ALLM_BLOCK_FREE;
	if (!r && n_owned + p->n_free != p->n_total)
		r = -EFAULT;
	allm_free(seen);
	return r;
}
