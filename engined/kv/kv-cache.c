#include "kv-cache-internal.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

int32_t allm_kv_blocks_in(const struct allm_kv_layout *lay, size_t bytes)
{
	size_t b = bytes / allm_kv_block_bytes(lay);
	return b > INT32_MAX ? INT32_MAX : (int32_t)b;
}

int kvc_pool_bytes(const struct allm_kv_cache *kv, int32_t n, size_t *ret, struct allm_err *err)
{
	if (!allm_mul_size(kv->block_bytes, (size_t)ALLM_MAX(n, 1), ret))
		return allm_err_set(err, -EOVERFLOW, "KV pool of %d blocks overflows", n);
	return 0;
}

int allm_kv_cache_create(allm_backend_t *be, const struct allm_kv_layout *lay,
			 int32_t n_gpu_blocks, int32_t n_cpu_blocks, struct allm_kv_cache **ret,
			 struct allm_err *err)
{
	struct allm_kv_cache *kv = allm_calloc(1, sizeof(*kv));
	size_t bytes;
	int r;
	if (!kv)
		return allm_err_set(err, -ENOMEM, "out of memory");
	kv->be = be;
	kv->lay = *lay;
	kv->block_bytes = allm_kv_block_bytes(lay);
	if (n_gpu_blocks <= 0 || n_cpu_blocks < 0) {
		r = allm_err_set(err, -EINVAL, "the KV cache needs at least one GPU block (got %d) "
				 "and a CPU block count >= 0 (got %d)", n_gpu_blocks, n_cpu_blocks);
		goto fail;
	}
	if ((r = kvc_pool_bytes(kv, n_gpu_blocks, &bytes, err)))
		goto fail;
	if ((r = be->iface->alloc(be, bytes, &kv->dev))) {
		allm_err_set(err, r, "cannot allocate %d KV blocks (%.1f MiB): %s", n_gpu_blocks,
			     bytes / 1048576.0, allm_backend_last_error(be));
		goto fail;
	}
	if ((r = kvc_pool_bytes(kv, n_cpu_blocks, &bytes, err)))
		goto fail;
	if ((r = be->iface->host_alloc(be, bytes, &kv->host))) {
		allm_err_set(err, r, "cannot allocate %d host swap blocks (%.1f MiB): %s", n_cpu_blocks,
			     bytes / 1048576.0, allm_backend_last_error(be));
		goto fail;
	}
	if ((r = allm_block_pool_init(&kv->gpu, n_gpu_blocks)) ||
	    (r = allm_block_pool_init(&kv->cpu, n_cpu_blocks))) {
		allm_err_set(err, r, "out of memory");
		goto fail;
	}
	/* a simulated device's pools are bookkeeping: nothing to pre-fault */
	if (!be->simulated)
		kv->touched_host = allm_calloc((size_t)ALLM_MAX(n_cpu_blocks, 1), 1);
	if (be->device_is_host)
		kv->touched_dev = allm_calloc((size_t)n_gpu_blocks, 1);
	if ((!be->simulated && !kv->touched_host) || (be->device_is_host && !kv->touched_dev)) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
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
	if (kv->host)
		kv->be->iface->host_free(kv->be, kv->host);
	allm_block_pool_fini(&kv->gpu);
	allm_block_pool_fini(&kv->cpu);
	allm_kv_disk_close(kv->disk);
	kvc_ahead_fini(kv);
	if (kv->stage)
		kv->be->iface->host_free(kv->be, kv->stage);
	allm_free(kv->stage_ids);
	allm_free(kv->touched_dev);
	allm_free(kv->touched_host);
	allm_free(kv->scrub);
	allm_free(kv);
}

/* Grows the memory behind a pool to `cap` blocks, keeping the first `old` blocks. */
static int grow_mem(struct allm_kv_cache *kv, bool device, int32_t old, int32_t cap,
		    struct allm_err *err)
{
	allm_backend_t *be = kv->be;
	size_t bytes;
	void *p = NULL;
	int r;
	if ((r = kvc_pool_bytes(kv, cap, &bytes, err)))
		return r;
	r = device ? be->iface->alloc(be, bytes, &p) : be->iface->host_alloc(be, bytes, &p);
	if (r)
		return allm_err_set(err, r, "cannot grow the %s pool to %d blocks: %s",
				    device ? "GPU" : "CPU", cap, allm_backend_last_error(be));
	void **mem = device ? &kv->dev : &kv->host;
	if (old > 0) {
		r = be->iface->copy_async(be, p, *mem, kv->block_bytes * (size_t)old,
					  device ? ALLM_COPY_D2D : ALLM_COPY_H2H);
		if (!r)
			r = be->iface->copy_wait(be, NULL);
		if (r) {
			device ? be->iface->free(be, p) : be->iface->host_free(be, p);
			return allm_err_set(err, r, "cannot copy the %s pool: %s", device ? "GPU" : "CPU",
					    allm_backend_last_error(be));
		}
	}
	device ? be->iface->free(be, *mem) : be->iface->host_free(be, *mem);
	*mem = p;
	return 0;
}

static int resize(struct allm_kv_cache *kv, bool device, int32_t n, struct allm_err *err)
{
	struct allm_block_pool *p = device ? &kv->gpu : &kv->cpu;
	if (n < (device ? 1 : 0))
		return allm_err_set(err, -EINVAL, "%s blocks must be >= %d (got %d)",
				    device ? "gpu" : "cpu", device ? 1 : 0, n);
	int32_t cap = allm_block_pool_capacity_needed(p, n);
	int r;
	uint8_t **touched = device ? &kv->touched_dev : &kv->touched_host;
	if (cap > p->capacity && *touched) {
		uint8_t *t = allm_realloc(*touched, (size_t)cap);
		if (!t)
			return allm_err_set(err, -ENOMEM, "out of memory");
		memset(t + p->capacity, 0, (size_t)(cap - p->capacity));
		*touched = t;
	}
	if (cap > p->capacity && (r = grow_mem(kv, device, p->capacity, cap, err)))
		return r;
	if ((r = allm_block_pool_resize(p, n)))
		return allm_err_set(err, r, "out of memory");
	return 0;
}

int allm_kv_resize_gpu(struct allm_kv_cache *kv, int32_t n, struct allm_err *err)
{
	return resize(kv, true, n, err);
}

int allm_kv_resize_cpu(struct allm_kv_cache *kv, int32_t n, struct allm_err *err)
{
	return resize(kv, false, n, err);
}

struct allm_block_pool *allm_kv_disk_blocks(struct allm_kv_cache *kv)
{
	return kv->disk ? allm_kv_disk_pool(kv->disk) : NULL;
}

int32_t allm_kv_count_runs(const int32_t *src, const int32_t *dst, int32_t n)
{
	int32_t runs = n > 0;
	for (int32_t i = 1; i < n; i++)
		if (src[i] != src[i - 1] + 1 || (dst && dst[i] != dst[i - 1] + 1))
			runs++;
	return runs;
}

const char *allm_kv_tier_name(enum allm_kv_tier t)
{
	static const char *const names[ALLM_KV_TIER_COUNT] = {"device", "host", "disk"};
	return (unsigned)t < ALLM_KV_TIER_COUNT ? names[t] : "?";
}

struct allm_block_pool *allm_kv_tier_pool(struct allm_kv_cache *kv, enum allm_kv_tier t)
{
	switch (t) {
	case ALLM_KV_TIER_DEVICE: return &kv->gpu;
	case ALLM_KV_TIER_HOST: return &kv->cpu;
	case ALLM_KV_TIER_DISK: return allm_kv_disk_blocks(kv);
	default: return NULL;
	}
}

/* Queues the copies of src[i] -> dst[i], one per coalesced run, and waits. */
int kvc_copy_blocks(struct allm_kv_cache *kv, const int32_t *src, const int32_t *dst,
		       int32_t n, bool out, struct allm_swap_result *res, struct allm_err *err)
{
	allm_backend_t *be = kv->be;
	char *s_base = out ? kv->dev : kv->host, *d_base = out ? kv->host : kv->dev;
	size_t bb = kv->block_bytes;
	int32_t runs = 0;
	int r = 0;
	for (int32_t i = 0; i < n;) {
		int32_t j = i + 1;
		while (j < n && src[j] == src[j - 1] + 1 && dst[j] == dst[j - 1] + 1)
			j++;
		r = be->iface->copy_async(be, d_base + (size_t)dst[i] * bb, s_base + (size_t)src[i] * bb,
					  bb * (size_t)(j - i), out ? ALLM_COPY_D2H : ALLM_COPY_H2D);
		if (r)
			break;
		runs++;
		i = j;
	}
	double secs = 0;
	int w = be->iface->copy_wait(be, &secs);
	if (r || w)
		return allm_err_set(err, r ? r : w, "swap %s failed: %s", out ? "out" : "in",
				    allm_backend_last_error(be));
	if (res)
		*res = (struct allm_swap_result){.seconds = secs, .n_runs = runs,
						 .bytes = (uint64_t)bb * (uint64_t)n};
	return 0;
}

static int swap(struct allm_kv_cache *kv, bool out, int64_t owner, const int32_t *src,
		int32_t n, int32_t *ret_dst, struct allm_swap_result *res, struct allm_err *err)
{
	struct allm_block_pool *from = out ? &kv->gpu : &kv->cpu, *to = out ? &kv->cpu : &kv->gpu;
	int r;
	if (allm_block_pool_avail(to) < n)
		return allm_err_set(err, -ENOSPC, "%s pool has %d free blocks, swap %s needs %d",
				    out ? "CPU" : "GPU", allm_block_pool_avail(to), out ? "out" : "in", n);
	for (int32_t i = 0; i < n; i++) {
		r = allm_block_pool_alloc(to, owner, &ret_dst[i]);
		ALLM_ASSERT(r == 0);
	}
	kvc_touch_ids(kv, !out, ret_dst, n);
	if ((r = kvc_copy_blocks(kv, src, ret_dst, n, out, res, err))) {
		for (int32_t i = 0; i < n; i++)
			allm_block_pool_release(to, owner, ret_dst[i]);
		return r;
	}
	for (int32_t i = 0; i < n; i++) {
		r = allm_block_pool_release(from, owner, src[i]);
		ALLM_ASSERT(r == 0);
	}
	return 0;
}

int allm_kv_swap_out(struct allm_kv_cache *kv, int64_t owner, const int32_t *gpu, int32_t n,
		     int32_t *ret_cpu, struct allm_swap_result *res, struct allm_err *err)
{
	return swap(kv, true, owner, gpu, n, ret_cpu, res, err);
}

int allm_kv_swap_in(struct allm_kv_cache *kv, int64_t owner, const int32_t *cpu, int32_t n,
		    int32_t *ret_gpu, struct allm_swap_result *res, struct allm_err *err)
{
	return swap(kv, false, owner, cpu, n, ret_gpu, res, err);
}

void kvc_touch_ids(struct allm_kv_cache *kv, bool device, const int32_t *ids, int32_t n)
{
	uint8_t *touched = device ? kv->touched_dev : kv->touched_host;
	char *base = device ? kv->dev : kv->host;
	for (int32_t i = 0; touched && i < n; i++)
		if (!touched[ids[i]]) {
			memset(base + (size_t)ids[i] * kv->block_bytes, 0, kv->block_bytes);
			touched[ids[i]] = 1;
		}
}

/* Writes every not-yet-touched block in [first, first + n) once (untimed).
 * Calibration's scratch blocks may be retired ones whose pages elastic memory
 * gave back: on a device that maps before writing (CUDA's VMM) they are
 * mapped first (the next sweep gives them back, engine-elastic.c). */
int kvc_touch_range(struct allm_kv_cache *kv, bool device, int32_t first, int32_t n)
{
	uint8_t *touched = device ? kv->touched_dev : kv->touched_host;
	char *base = device ? kv->dev : kv->host;
	int r = device && n > 0 ? allm_backend_pages(kv->be, base + (size_t)first * kv->block_bytes,
						      (size_t)n * kv->block_bytes, ALLM_PAGES_MAP, NULL) : 0;
	if (r && r != -ENOTSUP)
		return r; /* not mapped: not to be written */
	for (int32_t i = first; touched && i < first + n; i++)
		if (!touched[i]) {
			memset(base + (size_t)i * kv->block_bytes, 0, kv->block_bytes);
			touched[i] = 1;
		}
	return 0;
}

/* Pushes the blocks calibration just zeroed out of the per-core caches (L2)
 * by writing a buffer of twice their size, 8 MiB at least. On the CPU backend
 * a swap copies blocks the worker threads wrote steps ago, from the shared
 * cache or the other core's: timed right after touch_range, calibration copies
 * ran from L2 at ~42 GB/s and predicted the first swaps of stories260K at a
 * third of their time (3.4 vs 9.6 us for 120 KB; bench/README.md, "Swap
 * calibration from cold caches"). */
static void scrub_caches(struct allm_kv_cache *kv)
{
	if (!kv->scrub) {
		long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
		size_t len = ALLM_MIN((size_t)64 << 20, ALLM_MAX((size_t)8 << 20, l2 > 0 ? 2 * (size_t)l2 : 0));
		if (!(kv->scrub = allm_malloc(len)))
			return;
		kv->scrub_len = len;
	}
	memset(kv->scrub, 1, kv->scrub_len);
}

int32_t kvc_calib_ids(struct allm_kv_cache *kv, int32_t other_capacity, int32_t n, int32_t n_runs, int32_t **ret_gapped,
		      int32_t **ret_plain)
{
	int32_t span = n + n_runs;
	int32_t *gapped = allm_malloc((size_t)n * sizeof(int32_t)), *plain = allm_malloc((size_t)n * sizeof(int32_t));
	if (!gapped || !plain) {
		allm_free(gapped);
		allm_free(plain);
		return -ENOMEM;
	}
	/* Successive calls walk across the pools, so calibration copies, like real
	 * swaps, mostly miss the caches instead of re-copying the same hot blocks. */
	int32_t room = ALLM_MIN(kv->gpu.capacity, other_capacity) - span;
	int32_t base = room > 0 ? (int32_t)(kv->calib_cursor % (uint32_t)(room + 1)) : 0;
	kv->calib_cursor += (uint32_t)span;
	int32_t per = n / n_runs, k = 0;
	for (int32_t r = 0; r < n_runs; r++) {
		int32_t len = r == n_runs - 1 ? n - k : per;
		for (int32_t i = 0; i < len; i++, k++) {
			gapped[k] = base + k + r; /* gap of one between runs */
			plain[k] = base + k;
		}
	}
	*ret_gapped = gapped;
	*ret_plain = plain;
	return base;
}

double allm_kv_time_copy(struct allm_kv_cache *kv, enum allm_copy_dir dir, int32_t n, int32_t n_runs)
{
	/* scratch ids laid out so the copy takes exactly n_runs runs: runs separated
	 * by a one-block gap on the source side */
	int32_t span = n + n_runs;
	if (n <= 0 || n_runs <= 0 || n_runs > n || span > kv->gpu.capacity ||
	    span > kv->cpu.capacity)
		return -EINVAL;
	if (allm_block_pool_used(&kv->gpu) || allm_block_pool_used(&kv->cpu) || kv->gpu.n_cached || kv->cpu.n_cached)
		return -EBUSY; /* scratch copies would clobber live or cached K/V */
	int32_t *src, *dst, base = kvc_calib_ids(kv, kv->cpu.capacity, n, n_runs, &src, &dst);
	if (base < 0)
		return base;
	int rt = kvc_touch_range(kv, true, base, span);
	if (rt || (rt = kvc_touch_range(kv, false, base, span))) {
		allm_free(src);
		allm_free(dst);
		return rt;
	}
	if (kv->be->device_is_host)
		scrub_caches(kv);
	struct allm_swap_result res;
	int rc = kvc_copy_blocks(kv, src, dst, n, dir == 0, &res, NULL);
	allm_free(src);
	allm_free(dst);
	return rc ? rc : res.seconds;
}

int allm_kv_time_roundtrip(struct allm_kv_cache *kv, const int32_t *gpu, int32_t n, double *ret_out,
			   double *ret_in)
{
	const int64_t owner = INT64_MAX; /* no request's id */
	struct allm_swap_result res;
	int32_t *cpu, got = 0;
	int r = 0;
	if (n <= 0)
		return -EINVAL;
	if (allm_block_pool_avail(&kv->cpu) < n)
		return -ENOSPC;
	if (!(cpu = allm_malloc((size_t)n * sizeof(int32_t))))
		return -ENOMEM;
	for (; got < n; got++)
		if ((r = allm_block_pool_alloc(&kv->cpu, owner, &cpu[got])))
			goto out;
	kvc_touch_ids(kv, false, cpu, n);
	if ((r = kvc_copy_blocks(kv, gpu, cpu, n, true, &res, NULL)))
		goto out;
	*ret_out = res.seconds;
	if ((r = kvc_copy_blocks(kv, cpu, gpu, n, false, &res, NULL)))
		goto out;
	*ret_in = res.seconds;
out:
	for (int32_t i = 0; i < got; i++)
		allm_block_pool_release(&kv->cpu, owner, cpu[i]);
	allm_free(cpu);
	return r;
}

/* ---- staging through host memory ------------------------------------------------ */

/* Copies device blocks dev[0..n) into blocks of host memory at base (the
 * j-th into block slots[j], or j when slots is NULL) with the backend's copies,
 * or back (!to_host), and waits for them. */
int kvc_stage_copy(struct allm_kv_cache *kv, bool to_host, char *base, const int32_t *slots, const int32_t *dev,
		   int32_t n, struct allm_err *err)
{
	allm_backend_t *be = kv->be;
	size_t bb = kv->block_bytes;
	int r = 0;
	for (int32_t j = 0; j < n && !r; j++) {
		char *h = base + (size_t)(slots ? slots[j] : j) * bb, *d = (char *)kv->dev + (size_t)dev[j] * bb;
		r = to_host ? be->iface->copy_async(be, h, d, bb, ALLM_COPY_D2H)
			    : be->iface->copy_async(be, d, h, bb, ALLM_COPY_H2D);
	}
	if (!r)
		r = be->iface->copy_wait(be, NULL);
	if (r)
		allm_err_set(err, r, "disk staging copy failed: %s", allm_backend_last_error(be));
	return r;
}

void kvc_ahead_fini(struct allm_kv_cache *kv)
{
	/* the disk is closed: every read ahead has landed */
	for (int32_t i = 0; i < kv->n_ahead; i++)
		if (kv->ahead[i].live)
			allm_free(kv->ahead[i].slots);
	allm_free(kv->ahead);
	if (kv->ahead_raw)
		kv->be->iface->host_free(kv->be, kv->ahead_raw);
	allm_free(kv->ahead_free);
	kv->ahead = NULL;
	kv->ahead_raw = kv->ahead_mem = NULL;
	kv->ahead_free = NULL;
	kv->n_ahead = kv->cap_ahead = kv->n_ahead_slots = kv->n_ahead_free = 0;
}
