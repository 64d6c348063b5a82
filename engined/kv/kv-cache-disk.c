/* The KV cache's side of the disk tier (kv-disk.h): moving a request's blocks
 * between the device pool and disk blocks, straight from and into device memory
 * when it is host memory, else through a host stage with the backend's copies;
 * a simulated device's disk is timed by its profile. */
#include "kv-cache-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Blocks of host staging for disk I/O of a device that is not host memory: the
 * disk side goes at this many blocks at a time. */
#define KV_STAGE_BLOCKS 64

int allm_kv_attach_disk(struct allm_kv_cache *kv, const char *dir, int32_t n_blocks, char *note,
			size_t note_len, struct allm_err *err)
{
	int r;
	if (kv->disk)
		return allm_err_set(err, -EEXIST, "the KV cache already has a disk tier");
	if (!kv->be->device_is_host) {
		size_t bytes;
		if ((r = kvc_pool_bytes(kv, KV_STAGE_BLOCKS, &bytes, err)))
			return r;
		if ((r = kv->be->iface->host_alloc(kv->be, bytes, &kv->stage)))
			return allm_err_set(err, r, "cannot allocate disk staging: %s",
					    allm_backend_last_error(kv->be));
		kv->stage_blocks = KV_STAGE_BLOCKS;
	}
	if (kv->be->simulated) {
		/* no file: the profile's disk model times each transfer */
		if (allm_backend_charge_disk(kv->be, true, 0, 0) < 0)
			return allm_err_set(err, -ENOTSUP, "the simulated device's profile has no disk "
					    "model (\"disk\": read/write bandwidth and latency)");
		snprintf(note, note_len, "disk KV tier simulated: %d blocks, timed by the profile",
			 n_blocks);
		return allm_kv_disk_open_virtual(n_blocks, kv->block_bytes, &kv->disk, err);
	}
	return allm_kv_disk_open(dir, n_blocks, kv->block_bytes, &kv->disk, note, note_len, err);
}

struct allm_block_pool *allm_kv_disk_blocks(struct allm_kv_cache *kv)
{
	return kv->disk ? allm_kv_disk_pool(kv->disk) : NULL;
}

int allm_kv_resize_disk(struct allm_kv_cache *kv, int32_t n, struct allm_err *err)
{
	if (!kv->disk)
		return allm_err_set(err, -ENOTSUP, "no disk tier (start with --disk-swap-space)");
	return allm_kv_disk_resize(kv->disk, n, err);
}

bool allm_kv_disk_behind_room(struct allm_kv_cache *kv, int32_t n)
{
	return kv->disk && kv->be->device_is_host && allm_kv_disk_behind_free(kv->disk) >= n;
}

void allm_kv_disk_release(struct allm_kv_cache *kv, int64_t owner, const int32_t *ids, int32_t n)
{
	/* a block changes hands only once its write behind has landed (an error
	 * here leaves nothing to protect: the ring no longer writes) */
	allm_kv_disk_drain(kv->disk, ids, n);
	for (int32_t i = 0; i < n; i++) {
		int r = allm_block_pool_release(allm_kv_disk_pool(kv->disk), owner, ids[i]);
		ALLM_ASSERT(r == 0);
	}
}

/* Moves n blocks between device ids and disk ids: straight from or into device
 * memory when it is host memory, else through the staging buffer with the
 * backend's copies (write: device -> stage -> disk; read: disk -> stage -> device). */
/* What a disk transfer of n blocks tells its caller: seconds as the caller
 * waited, the disk's parts in st. */
static struct allm_swap_result disk_result(const struct allm_kv_cache *kv, int32_t n, double seconds,
					   const struct allm_kv_disk_io_stat *st, bool behind)
{
	return (struct allm_swap_result){.seconds = seconds, .n_runs = st->runs,
					 .bytes = (uint64_t)kv->block_bytes * (uint64_t)n, .behind = behind,
					 .disk = *st};
}

static int disk_xfer(struct allm_kv_cache *kv, bool write, bool behind_ok, const int32_t *dev,
		     const int32_t *disk, int32_t n, struct allm_swap_result *res, struct allm_err *err)
{
	bool behind = false;
	allm_backend_t *be = kv->be;
	struct allm_kv_disk_io_stat st = {0}, tot = {0};
	int32_t k;
	int r = 0;
	if (be->device_is_host) {
		/* a write goes behind when the stage has room: the step waits for a
		 * copy (tot.io_seconds stays 0: the file's I/O happens later, unseen) */
		if (write && behind_ok &&
		    (r = allm_kv_disk_write_behind(kv->disk, kv->dev, dev, disk, n, &tot.seconds, err)) == 0) {
			tot.runs = allm_kv_count_runs(dev, disk, n);
			behind = true;
			goto out;
		}
		if (r && r != -EAGAIN)
			return r;
		r = allm_kv_disk_io(kv->disk, write, kv->dev, dev, disk, n, &tot, err);
		goto out;
	}
	int32_t *seq = allm_malloc((size_t)ALLM_MAX(kv->stage_blocks, 1) * sizeof(int32_t));
	if (!seq)
		return allm_err_set(err, -ENOMEM, "out of memory");
	for (int32_t i = 0; i < kv->stage_blocks; i++)
		seq[i] = i;
	for (int32_t i = 0; i < n && !r; i += k) {
		k = ALLM_MIN(kv->stage_blocks, n - i);
		double t0 = allm_backend_clock(be); /* a simulated device's time is its clock's */
		for (int32_t j = 0; j < k && write && !r; j++)
			r = be->iface->copy_async(be, (char *)kv->stage + (size_t)j * kv->block_bytes,
						  (char *)kv->dev + (size_t)dev[i + j] * kv->block_bytes,
						  kv->block_bytes, ALLM_COPY_D2H);
		if (write && !r)
			r = be->iface->copy_wait(be, NULL);
		if (r) {
			allm_err_set(err, r, "disk staging copy failed: %s", allm_backend_last_error(be));
			break;
		}
		r = allm_kv_disk_io(kv->disk, write, kv->stage, seq, disk + i, k, &st, err);
		if (!r)
			allm_backend_charge_disk(be, write, (uint64_t)k * kv->block_bytes, st.runs);
		tot.runs += st.runs;
		tot.waited_seconds += st.waited_seconds;
		for (int32_t j = 0; j < k && !write && !r; j++)
			r = be->iface->copy_async(be, (char *)kv->dev + (size_t)dev[i + j] * kv->block_bytes,
						  (char *)kv->stage + (size_t)j * kv->block_bytes,
						  kv->block_bytes, ALLM_COPY_H2D);
		if (!write && !r && (r = be->iface->copy_wait(be, NULL)))
			allm_err_set(err, r, "disk staging copy failed: %s", allm_backend_last_error(be));
		tot.seconds += allm_backend_clock(be) - t0;
	}
	allm_free(seq);
	/* through the host stage: the disk model's time includes the staging copies */
	tot.io_seconds = tot.seconds - tot.waited_seconds;
out:
	if (res && !r)
		*res = disk_result(kv, n, tot.seconds, &tot, behind);
	return r;
}

/* Takes n blocks of pool p for owner into ids; -ENOSPC (nothing taken) if short. */
static int take(struct allm_block_pool *p, int64_t owner, int32_t n, int32_t *ids)
{
	if (p->n_free < n)
		return -ENOSPC;
	for (int32_t i = 0; i < n; i++) {
		int r = allm_block_pool_alloc(p, owner, &ids[i]);
		ALLM_ASSERT(r == 0);
	}
	return 0;
}

static void give_back(struct allm_block_pool *p, int64_t owner, const int32_t *ids, int32_t n)
{
	for (int32_t i = 0; i < n; i++) {
		int r = allm_block_pool_release(p, owner, ids[i]);
		ALLM_ASSERT(r == 0);
	}
}

/* Fresh destination pages are faulted in outside the timed read (swap() does
 * the same), so the measured cost is the transfer's. */
static void touch_fresh(struct allm_kv_cache *kv, const int32_t *dev, int32_t n)
{
	for (int32_t i = 0; kv->touched_dev && i < n; i++)
		if (!kv->touched_dev[dev[i]]) {
			memset((char *)kv->dev + (size_t)dev[i] * kv->block_bytes, 0, kv->block_bytes);
			kv->touched_dev[dev[i]] = 1;
		}
}

int allm_kv_disk_out(struct allm_kv_cache *kv, int64_t owner, const int32_t *gpu, int32_t n,
		     int32_t *ret_disk, struct allm_swap_result *res, struct allm_err *err)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	int r;
	if (!dp)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (take(dp, owner, n, ret_disk))
		return allm_err_set(err, -ENOSPC, "disk pool has %d free blocks, %d needed", dp->n_free, n);
	if ((r = disk_xfer(kv, true, true, gpu, ret_disk, n, res, err))) {
		allm_kv_disk_drain(kv->disk, ret_disk, n);
		give_back(dp, owner, ret_disk, n);
		return r;
	}
	give_back(&kv->gpu, owner, gpu, n);
	return 0;
}

int allm_kv_disk_in(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
		    int32_t *ret_gpu, struct allm_swap_result *res, struct allm_err *err)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	int r;
	if (!dp)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (take(&kv->gpu, owner, n, ret_gpu))
		return allm_err_set(err, -ENOSPC, "GPU pool has %d free blocks, %d needed", kv->gpu.n_free,
				    n);
	touch_fresh(kv, ret_gpu, n);
	if ((r = disk_xfer(kv, false, false, ret_gpu, disk, n, res, err))) {
		give_back(&kv->gpu, owner, ret_gpu, n);
		return r;
	}
	give_back(dp, owner, disk, n);
	return 0;
}

int allm_kv_disk_in_start(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
			  int32_t *ret_gpu, int32_t *ret_ticket, struct allm_err *err)
{
	if (!kv->disk)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (!kv->be->device_is_host || kv->be->simulated)
		return -EAGAIN;
	if (take(&kv->gpu, owner, n, ret_gpu))
		return allm_err_set(err, -ENOSPC, "GPU pool has %d free blocks, %d needed", kv->gpu.n_free,
				    n);
	touch_fresh(kv, ret_gpu, n);
	int r = allm_kv_disk_read_start(kv->disk, kv->dev, ret_gpu, disk, n, ret_ticket, err);
	if (r)
		give_back(&kv->gpu, owner, ret_gpu, n);
	return r;
}

int allm_kv_disk_in_wait(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
			 const int32_t *gpu, int32_t ticket, struct allm_swap_result *res,
			 struct allm_err *err)
{
	struct allm_kv_disk_io_stat st = {0};
	int r = allm_kv_disk_read_wait(kv->disk, ticket, &st, err);
	if (r) {
		give_back(&kv->gpu, owner, gpu, n);
		return r;
	}
	give_back(allm_kv_disk_blocks(kv), owner, disk, n);
	if (res)
		*res = disk_result(kv, n, st.seconds, &st, false);
	return 0;
}

int allm_kv_demote(struct allm_kv_cache *kv, int64_t owner, const int32_t *cpu, int32_t n,
		   int32_t *ret_disk, struct allm_swap_result *res, struct allm_err *err)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	struct allm_kv_disk_io_stat st = {0};
	int r;
	if (!dp)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (take(dp, owner, n, ret_disk))
		return allm_err_set(err, -ENOSPC, "disk pool has %d free blocks, %d needed", dp->n_free, n);
	if ((r = allm_kv_disk_io(kv->disk, true, kv->host, cpu, ret_disk, n, &st, err))) {
		give_back(dp, owner, ret_disk, n);
		return r;
	}
	if (kv->be->simulated) { /* the simulated write is all the profile's */
		double t = allm_backend_charge_disk(kv->be, true, (uint64_t)kv->block_bytes * (uint64_t)n, st.runs);
		st = (struct allm_kv_disk_io_stat){.seconds = t, .runs = st.runs, .io_seconds = t};
	}
	give_back(&kv->cpu, owner, cpu, n);
	if (res)
		*res = disk_result(kv, n, st.seconds, &st, false);
	return 0;
}

double allm_kv_time_disk(struct allm_kv_cache *kv, int dir, int32_t n, int32_t n_runs)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	int32_t span = n + n_runs;
	if (!dp || n <= 0 || n_runs <= 0 || n_runs > n || span > kv->gpu.capacity ||
	    span > dp->capacity)
		return -EINVAL;
	if (allm_block_pool_used(&kv->gpu) || allm_block_pool_used(dp))
		return -EBUSY;
	int32_t *mem = allm_malloc((size_t)n * sizeof(int32_t)),
		*disk = allm_malloc((size_t)n * sizeof(int32_t));
	if (!mem || !disk) {
		allm_free(mem);
		allm_free(disk);
		return -ENOMEM;
	}
	/* runs separated by a one-block gap on the disk side, as in time_copy */
	int32_t room = ALLM_MIN(kv->gpu.capacity, dp->capacity) - span;
	int32_t base = room > 0 ? (int32_t)(kv->calib_cursor % (uint32_t)(room + 1)) : 0;
	kv->calib_cursor += (uint32_t)span;
	int32_t per = n / n_runs, k = 0;
	for (int32_t r = 0; r < n_runs; r++) {
		int32_t len = r == n_runs - 1 ? n - k : per;
		for (int32_t i = 0; i < len; i++, k++) {
			mem[k] = base + k;
			disk[k] = base + k + r;
		}
	}
	kvc_touch_range(kv, true, base, span);
	struct allm_swap_result res;
	/* the disk's own cost, waited for: a write behind is priced as the copy it
	 * is (the swap model), this one for when the stage is full */
	int rc = disk_xfer(kv, dir == 0, false, mem, disk, n, &res, NULL);
	allm_free(mem);
	allm_free(disk);
	return rc ? rc : res.seconds;
}
