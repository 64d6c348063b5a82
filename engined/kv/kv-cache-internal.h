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

/* Scratch ids for a calibration transfer of n blocks as exactly n_runs runs
 * between the device pool and a pool of other_capacity blocks: *ret_gapped (runs
 * a block apart) and *ret_plain (consecutive), both allm_malloc'ed, starting
 * where the last calibration left off. The first id, or -ENOMEM. The caller
 * checked n + n_runs fits both pools. */
int32_t kvc_calib_ids(struct allm_kv_cache *kv, int32_t other_capacity, int32_t n, int32_t n_runs, int32_t **ret_gapped,
		      int32_t **ret_plain);
/* Queues the copies of device blocks src[i] -> host blocks dst[i] (out) or
 * back (!out), one per coalesced run, and waits. */
int kvc_copy_blocks(struct allm_kv_cache *kv, const int32_t *src, const int32_t *dst, int32_t n, bool out,
		    struct allm_swap_result *res, struct allm_err *err);
/* Writes the not-yet-touched blocks among ids[0..n) of the device (or host)
 * pool once, untimed (see touched_dev). */
void kvc_touch_ids(struct allm_kv_cache *kv, bool device, const int32_t *ids, int32_t n);
/* Frees the disk side's buffers, once the disk is closed (kv-cache-disk.c). */
void kvc_disk_fini(struct allm_kv_cache *kv);

#endif
