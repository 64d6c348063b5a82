/* The KV cache's side of the disk tier (kv-disk.h): moving a request's blocks
 * between the device pool and disk blocks. Straight from and into device memory
 * when it is host memory; else ("staged": a GPU, the simulator) through host
 * memory with the backend's copies: a write behind fills the disk tier's stage
 * by device -> host copies, a read ahead lands in an arena of host slots and is
 * copied in at its wait, a transfer that waits goes through kv->stage.
 *
 * What a disk that is a file does differently from a simulated device's is
 * behind struct kvc_disk_i (kv-cache-internal.h): the file's implementation is
 * here (kvc_disk_file), the simulated one in kv-disk-sim.c; attach picks one. */
#include "kv-cache-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host staging for the disk transfers a device that is not host memory waits
 * for: they go at this many blocks at a time, at most KV_STAGE_BYTES of pinned
 * memory (a 13B model's 13 MB blocks: 5 at a time, not 64 = 838 MB), at least
 * one block. Writes behind and reads ahead have their own (kv-disk, the arena). */
#define KV_STAGE_BLOCKS 64
#define KV_STAGE_BYTES ((size_t)64 << 20)

/* The disk tier's stage in the backend's host memory (pinned on a GPU), filled
 * by device -> host copies: a write behind copies each block once. */
static int host_alloc(void *ctx, size_t bytes, void **ret)
{
	struct allm_kv_cache *kv = ctx;
	return kv->be->iface->host_alloc(kv->be, bytes, ret);
}

static void host_free(void *ctx, void *p)
{
	struct allm_kv_cache *kv = ctx;
	kv->be->iface->host_free(kv->be, p);
}

static int stage_fill(void *ctx, void *slot, int32_t mem_id)
{
	struct allm_kv_cache *kv = ctx;
	allm_backend_t *be = kv->be;
	int r = be->iface->copy_async(be, slot, (char *)kv->dev + (size_t)mem_id * kv->block_bytes, kv->block_bytes,
				      ALLM_COPY_D2H);
	return r ? r : be->iface->copy_wait(be, NULL);
}

void allm_kv_set_env(struct allm_kv_cache *kv, const struct allm_kv_env *env)
{
	kv->env = env ? *env : (struct allm_kv_env){0};
}

int allm_kv_attach_disk(struct allm_kv_cache *kv, const char *dir, int32_t n_blocks, char *note,
			size_t note_len, struct allm_err *err)
{
	int r;
	if (kv->disk)
		return allm_err_set(err, -EEXIST, "the KV cache already has a disk tier");
	kv->staged = !kv->be->device_is_host || kv->env.staged;
	if (kv->staged) {
		size_t bytes;
		int32_t n = (int32_t)ALLM_MAX((size_t)1, ALLM_MIN((size_t)KV_STAGE_BLOCKS, KV_STAGE_BYTES / kv->block_bytes));
		if ((r = kvc_pool_bytes(kv, n, &bytes, err)))
			return r;
		if ((r = kv->be->iface->host_alloc(kv->be, bytes, &kv->stage)))
			return allm_err_set(err, r, "cannot allocate disk staging: %s",
					    allm_backend_last_error(kv->be));
		if (!(kv->stage_ids = allm_malloc((size_t)n * sizeof(int32_t))))
			return allm_err_set(err, -ENOMEM, "out of memory");
		for (int32_t i = 0; i < n; i++)
			kv->stage_ids[i] = i;
		kv->stage_blocks = n;
	}
	/* the one place that asks which kind of disk this is */
	const struct kvc_disk_i *t = kv->be->simulated ? &kvc_disk_sim : &kvc_disk_file;
	if ((r = t->open(kv, dir, n_blocks, note, note_len, err)))
		return r;
	kv->dtier = t;
	if (!kv->staged)
		return 0;
	/* reads ahead through host memory: an arena of the stage's size (0 where
	 * the disk has no background I/O: reads wait) */
	int32_t slots = allm_kv_disk_stage_blocks(kv->disk);
	kv->ahead_free = allm_malloc((size_t)ALLM_MAX(slots, 1) * sizeof(int32_t));
	if (!kv->ahead_free) {
		allm_kv_disk_close(kv->disk);
		kv->disk = NULL;
		kvc_ahead_fini(kv);
		kv->dtier = NULL;
		return allm_err_set(err, -ENOMEM, "out of memory");
	}
	for (int32_t i = 0; i < slots; i++)
		kv->ahead_free[i] = slots - 1 - i;
	kv->n_ahead_slots = kv->n_ahead_free = slots;
	return 0;
}

static int file_open(struct allm_kv_cache *kv, const char *dir, int32_t n_blocks, char *note, size_t note_len,
		     struct allm_err *err)
{
	int r = allm_kv_disk_open(dir, n_blocks, kv->block_bytes, &kv->env, &kv->disk, note, note_len, err);
	if (r || !kv->staged)
		return r;
	struct allm_err e2 = {{0}};
	struct allm_kv_disk_host h = {host_alloc, host_free, stage_fill, kv};
	if (allm_kv_disk_set_host(kv->disk, &h, &e2)) {
		size_t len = strlen(note);
		snprintf(note + len, note_len - len, "; %s: disk I/O waits", e2.msg);
	}
	return 0;
}

int allm_kv_resize_disk(struct allm_kv_cache *kv, int32_t n, struct allm_err *err)
{
	if (!kv->disk)
		return allm_err_set(err, -ENOTSUP, "no disk tier (start with --disk-swap-space)");
	return allm_kv_disk_resize(kv->disk, n, err);
}

static int32_t file_stage_total(struct allm_kv_cache *kv)
{
	return allm_kv_disk_stage_blocks(kv->disk);
}

static int32_t file_stage_free(struct allm_kv_cache *kv)
{
	return allm_kv_disk_behind_free(kv->disk);
}

bool allm_kv_disk_behind_room(struct allm_kv_cache *kv, int32_t n)
{
	return kv->disk && kv->dtier->stage_free(kv) >= n;
}

int32_t allm_kv_disk_queued_blocks(struct allm_kv_cache *kv)
{
	if (!kv->disk)
		return 0;
	int32_t stage = kv->dtier->stage_total(kv), room = kv->dtier->stage_free(kv);
	return stage > room ? stage - room : 0;
}

static void give_back(struct allm_block_pool *p, int64_t owner, const int32_t *ids, int32_t n)
{
	for (int32_t i = 0; i < n; i++) {
		int r = allm_block_pool_release(p, owner, ids[i]);
		ALLM_ASSERT(r == 0);
	}
}

void allm_kv_disk_release(struct allm_kv_cache *kv, int64_t owner, const int32_t *ids, int32_t n)
{
	/* a block changes hands only once its write behind has landed (an error
	 * here leaves nothing to protect: the ring no longer writes) */
	allm_kv_disk_drain(kv->disk, ids, n);
	give_back(allm_kv_disk_pool(kv->disk), owner, ids, n);
}

/* What a disk transfer of n blocks tells its caller: seconds as the caller
 * waited, the disk's parts in st. */
static struct allm_swap_result disk_result(const struct allm_kv_cache *kv, int32_t n, double seconds,
					   const struct allm_kv_disk_io_stat *st, bool behind)
{
	return (struct allm_swap_result){.seconds = seconds, .n_runs = st->runs,
					 .bytes = (uint64_t)kv->block_bytes * (uint64_t)n, .behind = behind,
					 .disk = *st};
}

/* A write behind to the file: from device memory straight, or (staged)
 * device -> the disk tier's stage (the copies the caller waits for,
 * stage_fill), written from there in the background. */
static int file_write_behind(struct allm_kv_cache *kv, const int32_t *dev, const int32_t *disk, int32_t n,
			     double *ret_seconds, struct allm_err *err)
{
	if (!kv->staged)
		return allm_kv_disk_write_behind(kv->disk, kv->dev, dev, disk, n, ret_seconds, err);
	double t0 = allm_backend_clock(kv->be);
	int r = allm_kv_disk_write_behind(kv->disk, NULL, dev, disk, n, NULL, err);
	*ret_seconds = allm_backend_clock(kv->be) - t0;
	return r;
}

/* Moves n blocks between device ids and disk ids, waiting for it: straight
 * from or into device memory when it is host memory, else through the stage
 * with the backend's copies (write: device -> stage -> disk; read: disk ->
 * stage -> device). A write goes behind instead when behind_ok and the stage
 * of writes behind has room: the step waits for copies (tot.io_seconds stays
 * 0: the file's I/O happens later, unseen). */
static int disk_xfer(struct allm_kv_cache *kv, bool write, bool behind_ok, const int32_t *dev,
		     const int32_t *disk, int32_t n, struct allm_swap_result *res, struct allm_err *err)
{
	bool behind = false;
	allm_backend_t *be = kv->be;
	struct allm_kv_disk_io_stat st = {0}, tot = {0};
	int32_t k;
	int r = 0;
	/* straight from device memory the disk's own stage check decides (-EAGAIN);
	 * through host memory the room is checked first */
	if (write && behind_ok && (!kv->staged || allm_kv_disk_behind_room(kv, n))) {
		if ((r = kv->dtier->write_behind(kv, dev, disk, n, &tot.seconds, err)) == 0) {
			tot.runs = allm_kv_count_runs(dev, disk, n);
			behind = true;
			goto out;
		}
		if (r != -EAGAIN)
			goto out;
		r = 0; /* written again below, waited for: the file ends up right */
	}
	if (!kv->staged) {
		r = allm_kv_disk_io(kv->disk, write, kv->dev, dev, disk, n, &tot, err);
		goto out;
	}
	for (int32_t i = 0; i < n && !r; i += k) {
		k = ALLM_MIN(kv->stage_blocks, n - i);
		double t1 = allm_backend_clock(be);
		if (write && (r = kvc_stage_copy(kv, true, kv->stage, NULL, dev + i, k, err)))
			break;
		r = allm_kv_disk_io(kv->disk, write, kv->stage, kv->stage_ids, disk + i, k, &st, err);
		if (!r && kv->dtier->waited)
			kv->dtier->waited(kv, write, k, &st);
		tot.runs += st.runs;
		tot.waited_seconds += st.waited_seconds;
		if (!write && !r)
			r = kvc_stage_copy(kv, false, kv->stage, NULL, dev + i, k, err);
		tot.seconds += allm_backend_clock(be) - t1;
	}
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
	if (allm_block_pool_avail(p) < n)
		return -ENOSPC;
	for (int32_t i = 0; i < n; i++) {
		int r = allm_block_pool_alloc(p, owner, &ids[i]);
		ALLM_ASSERT(r == 0);
	}
	return 0;
}

static int gpu_short(const struct allm_kv_cache *kv, int32_t n, struct allm_err *err)
{
	return allm_err_set(err, -ENOSPC, "GPU pool has %d free blocks, %d needed", allm_block_pool_avail(&kv->gpu), n);
}

/* Fresh destination pages are faulted in outside the timed read (swap() does
 * the same), so the measured cost is the transfer's. */
static void touch_fresh(struct allm_kv_cache *kv, const int32_t *dev, int32_t n)
{
	kvc_touch_ids(kv, true, dev, n);
}

int allm_kv_disk_out(struct allm_kv_cache *kv, int64_t owner, const int32_t *gpu, int32_t n,
		     int32_t *ret_disk, struct allm_swap_result *res, struct allm_err *err)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	int r;
	if (!dp)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (take(dp, owner, n, ret_disk))
		return allm_err_set(err, -ENOSPC, "disk pool has %d free blocks, %d needed", allm_block_pool_avail(dp), n);
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
		return gpu_short(kv, n, err);
	touch_fresh(kv, ret_gpu, n);
	if ((r = disk_xfer(kv, false, false, ret_gpu, disk, n, res, err))) {
		give_back(&kv->gpu, owner, ret_gpu, n);
		return r;
	}
	give_back(dp, owner, disk, n);
	return 0;
}

/* O_DIRECT's alignment (kv-disk-internal.h's DISK_ALIGN) */
#define KVC_ALIGN 4096

static void ahead_free(struct allm_kv_cache *kv, struct kvc_ahead *a)
{
	for (int32_t j = 0; j < a->n; j++)
		kv->ahead_free[kv->n_ahead_free++] = a->slots[j];
	allm_free(a->slots);
	*a = (struct kvc_ahead){0};
}

/* The file's read ahead: disk -> slots of the reads' arena (allocated at the
 * first), the copies to the device at the wait. */
static int file_ahead_start(struct allm_kv_cache *kv, struct kvc_ahead *a, const int32_t *disk, int32_t n,
			    struct allm_err *err)
{
	int r;
	if (!kv->ahead_mem) {
		size_t bytes;
		if ((r = kvc_pool_bytes(kv, kv->n_ahead_slots, &bytes, err)))
			return r;
		if ((r = kv->be->iface->host_alloc(kv->be, bytes + KVC_ALIGN, (void **)&kv->ahead_raw)))
			return allm_err_set(err, r, "cannot allocate host memory for reads ahead: %s",
					    allm_backend_last_error(kv->be));
		kv->ahead_mem = (char *)(((uintptr_t)kv->ahead_raw + KVC_ALIGN - 1) & ~(uintptr_t)(KVC_ALIGN - 1));
	}
	return allm_kv_disk_read_start(kv->disk, kv->ahead_mem, a->slots, disk, n, &a->disk_ticket, err);
}

static int file_ahead_wait(struct allm_kv_cache *kv, struct kvc_ahead *a, struct allm_kv_disk_io_stat *st,
			   struct allm_err *err)
{
	int r = allm_kv_disk_read_wait(kv->disk, a->disk_ticket, st, err);
	st->seconds -= a->start_seconds; /* counted by the caller */
	return r;
}

static int file_ahead_copy(struct allm_kv_cache *kv, struct kvc_ahead *a, const int32_t *gpu, int32_t n,
			   struct allm_err *err)
{
	return kvc_stage_copy(kv, false, kv->ahead_mem, a->slots, gpu, n, err);
}

/* Starts a read ahead through host memory: slots of the reads' arena, then the
 * disk's own start (kvc_disk_i.ahead_start); the copies to the device come at
 * the wait. The arena holds what the stage of
 * writes behind does; allm_kv_disk_in_start checked it has n free slots. */
static int staged_ahead(struct allm_kv_cache *kv, const int32_t *disk, int32_t n, int32_t *ret_ticket,
			struct allm_err *err)
{
	int32_t i;
	int r = 0;
	for (i = 0; i < kv->n_ahead && kv->ahead[i].live; i++)
		;
	if (i == kv->cap_ahead) {
		int32_t cap = ALLM_MAX(8, kv->cap_ahead * 2);
		struct kvc_ahead *v = allm_realloc(kv->ahead, (size_t)cap * sizeof(*v));
		if (!v)
			return allm_err_set(err, -ENOMEM, "out of memory");
		memset(v + kv->cap_ahead, 0, (size_t)(cap - kv->cap_ahead) * sizeof(*v));
		kv->ahead = v;
		kv->cap_ahead = cap;
	}
	struct kvc_ahead *a = &kv->ahead[i];
	double t0 = allm_backend_clock(kv->be);
	int32_t *slots = allm_malloc((size_t)ALLM_MAX(n, 1) * sizeof(int32_t));
	if (!slots)
		return allm_err_set(err, -ENOMEM, "out of memory");
	*a = (struct kvc_ahead){.live = true, .slots = slots, .runs = allm_kv_count_runs(disk, NULL, n)};
	for (a->n = 0; a->n < n; a->n++)
		a->slots[a->n] = kv->ahead_free[--kv->n_ahead_free];
	if ((r = kv->dtier->ahead_start(kv, a, disk, n, err))) {
		ahead_free(kv, a);
		return r;
	}
	kv->n_ahead = ALLM_MAX(kv->n_ahead, i + 1);
	a->start_seconds = allm_backend_clock(kv->be) - t0;
	*ret_ticket = i;
	return 0;
}

/* Waits for a read ahead through host memory and copies its blocks to the
 * device blocks gpu[0..n). st: as allm_kv_disk_read_wait's, the copies
 * counted in (the disk model's time through a stage includes them, as a
 * staged read that waits). */
static int staged_ahead_wait(struct allm_kv_cache *kv, int32_t ticket, const int32_t *gpu, int32_t n,
			     struct allm_kv_disk_io_stat *st, struct allm_err *err)
{
	allm_backend_t *be = kv->be;
	ALLM_ASSERT(ticket >= 0 && ticket < kv->n_ahead && kv->ahead[ticket].live && kv->ahead[ticket].n == n);
	struct kvc_ahead *a = &kv->ahead[ticket];
	double t0 = allm_backend_clock(be);
	int r = 0;
	*st = (struct allm_kv_disk_io_stat){0};
	r = kv->dtier->ahead_wait(kv, a, st, err);
	double t1 = allm_backend_clock(be);
	if (!r)
		r = kv->dtier->ahead_copy(kv, a, gpu, n, err);
	double now = allm_backend_clock(be);
	st->seconds += a->start_seconds + (now - t0);
	st->io_seconds += now - t1;
	ahead_free(kv, a);
	return r;
}

int allm_kv_disk_in_start(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
			  int32_t *ret_gpu, int32_t *ret_ticket, struct allm_err *err)
{
	if (!kv->disk)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (kv->staged && kv->n_ahead_free < n)
		return -EAGAIN; /* the reads' arena is full: this one waits */
	if (take(&kv->gpu, owner, n, ret_gpu))
		return gpu_short(kv, n, err);
	touch_fresh(kv, ret_gpu, n);
	int r = kv->staged ? staged_ahead(kv, disk, n, ret_ticket, err)
			   : allm_kv_disk_read_start(kv->disk, kv->dev, ret_gpu, disk, n, ret_ticket, err);
	if (r)
		give_back(&kv->gpu, owner, ret_gpu, n);
	return r;
}

int allm_kv_disk_in_wait(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
			 const int32_t *gpu, int32_t ticket, struct allm_swap_result *res,
			 struct allm_err *err)
{
	struct allm_kv_disk_io_stat st = {0};
	int r = kv->staged ? staged_ahead_wait(kv, ticket, gpu, n, &st, err)
			   : allm_kv_disk_read_wait(kv->disk, ticket, &st, err);
	if (r) {
		give_back(&kv->gpu, owner, gpu, n);
		return r;
	}
	give_back(allm_kv_disk_blocks(kv), owner, disk, n);
	if (res)
		*res = disk_result(kv, n, st.seconds, &st, false);
	return 0;
}

/* Writes host blocks cpu[i] to disk blocks disk[i] and waits. */
static int host_to_disk(struct allm_kv_cache *kv, const int32_t *cpu, const int32_t *disk, int32_t n,
			struct allm_swap_result *res, struct allm_err *err)
{
	struct allm_kv_disk_io_stat st = {0};
	int r = allm_kv_disk_io(kv->disk, true, kv->host, cpu, disk, n, &st, err);
	if (r)
		return r;
	if (kv->dtier->host_written)
		kv->dtier->host_written(kv, n, &st);
	if (res)
		*res = disk_result(kv, n, st.seconds, &st, false);
	return 0;
}

int allm_kv_tier_copy(struct allm_kv_cache *kv, enum allm_kv_tier from, const int32_t *src,
		      enum allm_kv_tier to, const int32_t *dst, int32_t n, struct allm_swap_result *res,
		      struct allm_err *err)
{
	struct allm_swap_result tmp;
	if (!res)
		res = &tmp;
	if ((from == ALLM_KV_TIER_DISK || to == ALLM_KV_TIER_DISK) && !kv->disk)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (from == ALLM_KV_TIER_DEVICE && to == ALLM_KV_TIER_HOST) {
		kvc_touch_ids(kv, false, dst, n);
		return kvc_copy_blocks(kv, src, dst, n, true, res, err);
	}
	if (from == ALLM_KV_TIER_HOST && to == ALLM_KV_TIER_DEVICE) {
		kvc_touch_ids(kv, true, dst, n);
		return kvc_copy_blocks(kv, src, dst, n, false, res, err);
	}
	if (from == ALLM_KV_TIER_DEVICE && to == ALLM_KV_TIER_DISK)
		return disk_xfer(kv, true, true, src, dst, n, res, err);
	if (from == ALLM_KV_TIER_DISK && to == ALLM_KV_TIER_DEVICE) {
		touch_fresh(kv, dst, n);
		return disk_xfer(kv, false, false, dst, src, n, res, err);
	}
	if (from == ALLM_KV_TIER_HOST && to == ALLM_KV_TIER_DISK)
		return host_to_disk(kv, src, dst, n, res, err);
	return allm_err_set(err, -ENOTSUP, "no copy from the %s tier to the %s tier", allm_kv_tier_name(from),
			    allm_kv_tier_name(to));
}

int allm_kv_demote(struct allm_kv_cache *kv, int64_t owner, const int32_t *cpu, int32_t n,
		   int32_t *ret_disk, struct allm_swap_result *res, struct allm_err *err)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	int r;
	if (!dp)
		return allm_err_set(err, -ENOTSUP, "no disk tier");
	if (take(dp, owner, n, ret_disk))
		return allm_err_set(err, -ENOSPC, "disk pool has %d free blocks, %d needed", allm_block_pool_avail(dp), n);
	if ((r = host_to_disk(kv, cpu, ret_disk, n, res, err))) {
		give_back(dp, owner, ret_disk, n);
		return r;
	}
	give_back(&kv->cpu, owner, cpu, n);
	return 0;
}

double allm_kv_time_disk(struct allm_kv_cache *kv, enum allm_disk_dir dir, int32_t n, int32_t n_runs)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	int32_t span = n + n_runs;
	if (!dp || n <= 0 || n_runs <= 0 || n_runs > n || span > kv->gpu.capacity ||
	    span > dp->capacity)
		return -EINVAL;
	if (allm_block_pool_used(&kv->gpu) || allm_block_pool_used(dp) || kv->gpu.n_cached || dp->n_cached)
		return -EBUSY;
	/* runs separated by a one-block gap on the disk side, as in time_copy */
	int32_t *disk, *mem, base = kvc_calib_ids(kv, dp->capacity, n, n_runs, &disk, &mem);
	if (base < 0)
		return base;
	int rt = kvc_touch_range(kv, true, base, span);
	if (rt) {
		allm_free(mem);
		allm_free(disk);
		return rt;
	}
	struct allm_swap_result res;
	/* the disk's own cost, waited for: a write behind is priced as the copy it
	 * is (the swap model), this one for when the stage is full */
	int rc = disk_xfer(kv, dir == ALLM_DISK_WRITE, false, mem, disk, n, &res, NULL);
	allm_free(mem);
	allm_free(disk);
	return rc ? rc : res.seconds;
}

const struct kvc_disk_i kvc_disk_file = {
	.version = 1,
	.name = "file",
	.open = file_open,
	.stage_total = file_stage_total,
	.stage_free = file_stage_free,
	.write_behind = file_write_behind,
	.waited = NULL, /* the file's I/O was timed as it ran */
	.ahead_start = file_ahead_start,
	.ahead_wait = file_ahead_wait,
	.ahead_copy = file_ahead_copy,
	.host_written = NULL,
};
