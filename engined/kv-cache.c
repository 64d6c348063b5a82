#include "kv-cache.h"

#include <errno.h>

int32_t allm_kv_blocks_in(const struct allm_kv_layout *lay, size_t bytes)
{
	size_t b = bytes / allm_kv_block_bytes(lay);
	return b > INT32_MAX ? INT32_MAX : (int32_t)b;
}

int allm_kv_cache_create(allm_backend_t *be, const struct allm_kv_layout *lay,
			 int32_t n_gpu_blocks, struct allm_kv_cache **ret, struct allm_err *err)
{
	struct allm_kv_cache *kv = allm_calloc(1, sizeof(*kv));
	size_t bytes;
	int r;
	if (!kv)
		return allm_err_set(err, -ENOMEM, "out of memory");
	kv->be = be;
	kv->lay = *lay;
	kv->block_bytes = allm_kv_block_bytes(lay);
	if (n_gpu_blocks <= 0) {
		r = allm_err_set(err, -EINVAL, "the KV cache needs at least one block (got %d)",
				 n_gpu_blocks);
		goto fail;
	}
	if (!allm_mul_size(kv->block_bytes, (size_t)n_gpu_blocks, &bytes)) {
		r = allm_err_set(err, -EOVERFLOW, "KV cache size overflows");
		goto fail;
	}
	if ((r = be->iface->alloc(be, bytes, &kv->dev))) {
		allm_err_set(err, r, "cannot allocate %d KV blocks (%.1f MiB): %s", n_gpu_blocks,
			     bytes / 1048576.0, allm_backend_last_error(be));
		goto fail;
	}
	if ((r = allm_block_pool_init(&kv->gpu, n_gpu_blocks))) {
		allm_err_set(err, r, "out of memory");
		goto fail;
	}
	*ret = kv;
	return 0;
fail:
	allm_kv_cache_free(kv);
	return r;
}

void allm_kv_cache_free(struct allm_kv_cache *kv)
{
	if (!kv)
		return;
	if (kv->dev)
		kv->be->iface->free(kv->be, kv->dev);
	allm_block_pool_fini(&kv->gpu);
	allm_free(kv);
}
