/* Elastic memory's pages: returning a retired block's pages and counting
 * what is mapped (kv-elastic.h). Chosen over memfd + fallocate(PUNCH_HOLE):
 * the CPU backend's pools are private anonymous mappings already, which
 * MADV_DONTNEED empties at once with the same effect (the pages leave the
 * process's RSS; the next write faults a zero page in) and no file to keep. */
#include "kv-elastic.h"

#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
	static size_t ps;
	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

void allm_mem_release(void *p, size_t n)
{
	size_t ps = page_size();
	uintptr_t a = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1);
	uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(ps - 1);
	if (b > a)
		(void)madvise((void *)a, b - a, MADV_DONTNEED); /* only ever on our own mappings */
}

size_t allm_mem_resident(const void *p, size_t n)
{
	size_t ps = page_size();
	if (!p || !n)
		return 0;
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(ps - 1);
	uintptr_t b = ((uintptr_t)p + n + ps - 1) & ~(uintptr_t)(ps - 1);
	size_t pages = (b - a) / ps, res = 0;
	unsigned char vec[4096];
	for (size_t off = 0; off < pages; off += sizeof(vec)) {
		size_t k = ALLM_MIN(sizeof(vec), pages - off);
		if (mincore((void *)(a + off * ps), k * ps, vec))
			return 0;
		for (size_t i = 0; i < k; i++)
			res += vec[i] & 1;
	}
	return res * ps;
}

bool allm_kv_pages_returnable(const struct allm_kv_cache *kv)
{
	return kv->be->device_is_host && !kv->be->simulated && kv->dev && kv->touched_dev;
}

void allm_kv_mark_pages(const struct allm_kv_cache *kv, uint8_t *maybe)
{
	for (int32_t id = 0; id < kv->gpu.capacity; id++)
		if (kv->gpu.owner[id] != ALLM_BLOCK_RETIRED)
			maybe[id] = 1;
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
			maybe[end] = kv->touched_dev[end] = 0;
		allm_mem_release((char *)kv->dev + (size_t)id * kv->block_bytes, (size_t)(end - id) * kv->block_bytes);
		n += end - id;
		id = end;
	}
	return n;
}

size_t allm_kv_resident_bytes(const struct allm_kv_cache *kv)
{
	if (!allm_kv_pages_returnable(kv))
		return 0;
	return allm_mem_resident(kv->dev, (size_t)kv->gpu.capacity * kv->block_bytes);
}
