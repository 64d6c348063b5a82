/* The paged KV cache: the device block pool's memory and its bookkeeping. One block
 * holds K and V of every layer for block_size tokens, contiguous (DESIGN §5). */
#ifndef ALLM_KV_CACHE_H
#define ALLM_KV_CACHE_H

#include "backend.h"
#include "block-pool.h"

struct allm_kv_cache {
	allm_backend_t *be; /* not owned */
	struct allm_kv_layout lay;
	size_t block_bytes;
	void *dev; /* device memory of gpu.n_total blocks */
	struct allm_block_pool gpu; /* the device ("GPU") pool */
};

int allm_kv_cache_create(allm_backend_t *be, const struct allm_kv_layout *lay,
			 int32_t n_gpu_blocks, struct allm_kv_cache **ret, struct allm_err *err);
void allm_kv_cache_free(struct allm_kv_cache *kv);

/* Blocks needed to hold n tokens. */
static inline int32_t allm_kv_blocks_for(const struct allm_kv_cache *kv, int64_t n_tokens)
{
	return (int32_t)((n_tokens + kv->lay.block_size - 1) / kv->lay.block_size);
}

/* Device blocks that fit in `bytes`. */
int32_t allm_kv_blocks_in(const struct allm_kv_layout *lay, size_t bytes);

#endif
