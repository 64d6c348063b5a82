/* Elastic memory's pages (DESIGN §5c): one budget from which the KV blocks and
 * the activation scratch of each step are drawn. The block pool's retired
 * blocks (parked by a shrink, block-pool.h) are the KV share given to scratch;
 * their pages go back to the system through the backend's pages op
 * (backend.h), as do the scratch's beyond what a step needs, and every free
 * block's when the engine idles. On host memory (the CPU backend) a page is
 * mapped again by the first write after (zero-filled): the "virtual tensor" of
 * eLLM, with the CPU's MMU doing what CUDA's VMM does on a GPU, where the
 * backend maps chunks before the blocks or the scratch are written again. On a
 * simulated device the pages are bookkeeping (the modelled pool). */
#ifndef ALLM_KV_ELASTIC_H
#define ALLM_KV_ELASTIC_H

#include "kv-cache.h"

/* The backend's pages op on [p, p + n), a range of one device allocation.
 * allm_mem_release gives back the pages wholly inside (nothing where they
 * cannot move); allm_mem_map backs every page it overlaps before the next
 * write (0 / -errno: the range must not be written after a failure; nothing
 * to do on the CPU); allm_mem_resident counts the bytes of the overlapping
 * pages backed now (0 where pages cannot move); allm_mem_page is the page
 * size of the allocation at p, 0 where its pages cannot move. */
void allm_mem_release(allm_backend_t *be, void *p, size_t n);
int allm_mem_map(allm_backend_t *be, void *p, size_t n);
size_t allm_mem_resident(allm_backend_t *be, const void *p, size_t n);
size_t allm_mem_page(allm_backend_t *be, const void *p);

/* Whether the device pool's pages can go back (the backend's pages op
 * answers for the pool: the CPU, CUDA with VMM, a simulated device). */
bool allm_kv_pages_returnable(const struct allm_kv_cache *kv);
/* `maybe` [gpu.capacity] is the caller's map of device blocks that may hold
 * pages. allm_kv_mark_pages sets it for every block not retired and maps the
 * pages of those it newly sets (call it after the pool grows: those blocks
 * may be written from now on; 0 / -errno, the blocks it could not map left
 * unset: the caller must not let them be written);
 * allm_kv_return_pages returns the pages of every retired block (and with
 * free_too of every free one) still marked, unmarks them and counts them as
 * untouched (a swap into one pre-faults it again, kv-cache.h), and returns how
 * many it returned. */
int allm_kv_mark_pages(const struct allm_kv_cache *kv, uint8_t *maybe);
int32_t allm_kv_return_pages(struct allm_kv_cache *kv, uint8_t *maybe, bool free_too);
/* Bytes of the device pool mapped now (0 where not returnable). */
size_t allm_kv_resident_bytes(const struct allm_kv_cache *kv);

#endif
