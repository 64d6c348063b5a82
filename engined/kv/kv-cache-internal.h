/* What kv-cache.c (the pools' memory, swaps) and kv-cache-disk.c (the disk
 * tier's transfers) share. Not for use outside engined/kv. */
#ifndef ALLM_KV_CACHE_INTERNAL_H
#define ALLM_KV_CACHE_INTERNAL_H

#include "kv-cache.h"

/* Bytes of n blocks (n < 1 counts as 1) in *ret, or -EOVERFLOW with err. */
int kvc_pool_bytes(const struct allm_kv_cache *kv, int32_t n, size_t *ret, struct allm_err *err);
/* Writes blocks [first, first + n) of the device (or host) pool once, where the
 * backend maps them lazily, so a timed copy does not pay their page faults. */
void kvc_touch_range(struct allm_kv_cache *kv, bool device, int32_t first, int32_t n);

/* Frees the disk side's buffers, once the disk is closed (kv-cache-disk.c). */
void kvc_disk_fini(struct allm_kv_cache *kv);

#endif
