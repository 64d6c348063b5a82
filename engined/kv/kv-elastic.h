/* Elastic memory's pages (DESIGN §5c): one budget from which the KV blocks and
 * the activation scratch of each step are drawn. The block pool's retired
 * blocks (parked by a shrink, block-pool.h) are the KV share given to scratch;
 * on host memory their pages go back to the kernel, as do the scratch's beyond
 * what a step needs, and every free block's when the engine idles. A page is
 * mapped again by the first write after (zero-filled): the "virtual tensor"
 * of eLLM, with the CPU's MMU doing what CUDA's VMM does on a GPU. On a
 * simulated device the split is bookkeeping only (the modelled pool). */
#ifndef ALLM_KV_ELASTIC_H
#define ALLM_KV_ELASTIC_H

#include "kv-cache.h"

/* Returns the whole pages inside [p, p + n) to the kernel (MADV_DONTNEED on
 * private anonymous memory: the next touch maps a zero page). */
void allm_mem_release(void *p, size_t n);
/* Bytes of the pages overlapping [p, p + n) that are mapped now (mincore). */
size_t allm_mem_resident(const void *p, size_t n);

/* Whether the device pool's pages are host memory this process can return
 * (the CPU backend; not a GPU, not a simulated device). */
bool allm_kv_pages_returnable(const struct allm_kv_cache *kv);
/* `maybe` [gpu.capacity] is the caller's map of device blocks that may hold
 * pages. allm_kv_mark_pages sets it for every block not retired (call it after
 * the pool grows: those blocks may be written from now on);
 * allm_kv_return_pages returns the pages of every retired block (and with
 * free_too of every free one) still marked, unmarks them and counts them as
 * untouched (a swap into one pre-faults it again, kv-cache.h), and returns how
 * many it returned. */
void allm_kv_mark_pages(const struct allm_kv_cache *kv, uint8_t *maybe);
int32_t allm_kv_return_pages(struct allm_kv_cache *kv, uint8_t *maybe, bool free_too);
/* Bytes of the device pool mapped now (0 where not returnable). */
size_t allm_kv_resident_bytes(const struct allm_kv_cache *kv);

#endif
