/* Elastic memory's pages: returning a retired block's pages and counting
 * what is mapped (kv-elastic.h), through the backend's pages op: madvise and
 * mincore on the CPU, the VMM arena on CUDA, bookkeeping on a simulated
 * device (backend.h, version 5). */
#include "kv-elastic.h"

void allm_mem_release(allm_backend_t *be, void *p, size_t n)
{
	/* a failure leaves the pages mapped: the memory is not lent, nothing breaks */
	(void)allm_backend_pages(be, p, n, ALLM_PAGES_RETURN, NULL);
}

int allm_mem_map(allm_backend_t *be, void *p, size_t n)
{
	int r = allm_backend_pages(be, p, n, ALLM_PAGES_MAP, NULL);
	return r == -ENOTSUP ? 0 : r; /* memory that never moves is mapped */
}

size_t allm_mem_resident(allm_backend_t *be, const void *p, size_t n)
{
	size_t res = 0;
	if (!p || !n || allm_backend_pages(be, (void *)p, n, ALLM_PAGES_RESIDENT, &res))
		return 0;
	return res;
}

size_t allm_mem_page(allm_backend_t *be, const void *p)
{
	size_t ps = 0;
	if (!p || allm_backend_pages(be, (void *)p, 1, ALLM_PAGES_SIZE, &ps))
		return 0;
	return ps;
}

bool allm_kv_pages_returnable(const struct allm_kv_cache *kv)
{
	return kv->dev && allm_mem_page(kv->be, kv->dev) > 0;
}

int allm_kv_mark_pages(const struct allm_kv_cache *kv, uint8_t *maybe)
{
	const struct allm_block_pool *p = &kv->gpu;
	for (int32_t id = 0; id < p->capacity;) {
		if (maybe[id] || p->owner[id] == ALLM_BLOCK_RETIRED) {
			id++;
			continue;
		}
		int32_t end = id; /* a run of such blocks: one call */
		while (end < p->capacity && !maybe[end] && p->owner[end] != ALLM_BLOCK_RETIRED)
			end++;
		int r = allm_mem_map(kv->be, (char *)kv->dev + (size_t)id * kv->block_bytes,
				     (size_t)(end - id) * kv->block_bytes);
		if (r)
			return r;
		memset(maybe + id, 1, (size_t)(end - id));
		id = end;
	}
	return 0;
}

static bool returnable_block(const struct allm_block_pool *p, const uint8_t *maybe, int32_t id, bool free_too)
{
	int64_t o = p->owner[id];
	return maybe[id] && (o == ALLM_BLOCK_RETIRED || (free_too && o == ALLM_BLOCK_FREE));
}

int32_t allm_kv_return_pages(struct allm_kv_cache *kv, uint8_t *maybe, bool free_too)
{
	if (!allm_kv_pages_returnable(kv))
		return 0;
	const struct allm_block_pool *p = &kv->gpu;
	int32_t n = 0;
	for (int32_t id = 0; id < p->capacity;) {
		if (!returnable_block(p, maybe, id, free_too)) {
			id++;
			continue;
		}
		int32_t end = id; /* a run of consecutive such blocks: one call */
		for (; end < p->capacity && returnable_block(p, maybe, end, free_too); end++)
			maybe[end] = 0;
		if (kv->touched_dev)
			memset(kv->touched_dev + id, 0, (size_t)(end - id));
		allm_mem_release(kv->be, (char *)kv->dev + (size_t)id * kv->block_bytes, (size_t)(end - id) * kv->block_bytes);
		n += end - id;
		id = end;
	}
	return n;
}

size_t allm_kv_resident_bytes(const struct allm_kv_cache *kv)
{
	if (!allm_kv_pages_returnable(kv))
		return 0;
	return allm_mem_resident(kv->be, kv->dev, (size_t)kv->gpu.capacity * kv->block_bytes);
}
