/* The disk tier of a simulated device (`--device sim:PROFILE`): no file, one
 * line of transfers in order beside the device's clock, as the real tier
 * behaves: a transfer the caller waits for starts once what was queued before
 * it (writes behind) is done; a write behind or a read ahead is queued and the
 * caller goes on. The simulator keeps the line and times it by its profile
 * (kernels' struct allm_sim_disk_i); this file is struct kvc_disk_i over it,
 * the KV cache's only knowledge of the simulator's disk. Always staged: a
 * simulated device is not host memory, so its blocks go through kv->stage with
 * the backend's copies, which the simulator times too. */
#include "kv-cache-internal.h"

#include <stdio.h>

static const struct allm_sim_disk_i *line(struct allm_kv_cache *kv)
{
	return allm_backend_sim_disk(kv->be);
}

static int sim_open(struct allm_kv_cache *kv, const char *dir, int32_t n_blocks, char *note, size_t note_len,
		    struct allm_err *err)
{
	(void)dir; /* no file: the profile's disk model times each transfer */
	if (allm_backend_charge_disk(kv->be, true, 0, 0) < 0)
		return allm_err_set(err, -ENOTSUP, "the simulated device's profile has no disk "
				    "model (\"disk\": read/write bandwidth and latency)");
	snprintf(note, note_len, "disk KV tier simulated: %d blocks, timed by the profile", n_blocks);
	return allm_kv_disk_open_virtual(n_blocks, kv->block_bytes, &kv->disk, err);
}

/* The stage of writes behind is as large as the reads' arena (attach). */
static int32_t sim_stage_total(struct allm_kv_cache *kv)
{
	return kv->n_ahead_slots;
}

/* Slots of the stage whose writes have landed by now. */
static int32_t sim_stage_free(struct allm_kv_cache *kv)
{
	return line(kv)->stage_free(kv->be, kv->n_ahead_slots);
}

/* The copies through our stage for their time, the write queued on the line,
 * each slot busy until it lands. The caller made sure of room. */
static int sim_write_behind(struct allm_kv_cache *kv, const int32_t *dev, const int32_t *disk, int32_t n,
			    double *ret_seconds, struct allm_err *err)
{
	double t0 = allm_backend_clock(kv->be);
	int r = 0;
	for (int32_t i = 0, k; i < n && !r; i += k) {
		k = ALLM_MIN(kv->stage_blocks, n - i);
		if ((r = kvc_stage_copy(kv, true, kv->stage, NULL, dev + i, k, err)))
			break;
		double end = line(kv)->queue(kv->be, true, (uint64_t)k * kv->block_bytes,
					    allm_kv_count_runs(disk + i, NULL, k), NULL);
		if (line(kv)->stage_take(kv->be, kv->n_ahead_slots, k, end))
			r = allm_err_set(err, -ENOMEM, "out of memory");
	}
	*ret_seconds = allm_backend_clock(kv->be) - t0;
	return r;
}

static void sim_waited(struct allm_kv_cache *kv, bool write, int32_t k, struct allm_kv_disk_io_stat *st)
{
	line(kv)->wait(kv->be, write, (uint64_t)k * kv->block_bytes, st->runs, &st->waited_seconds);
}

/* Queued on the line; the slots are only counted. */
static int sim_ahead_start(struct allm_kv_cache *kv, struct kvc_ahead *a, const int32_t *disk, int32_t n,
			   struct allm_err *err)
{
	(void)disk, (void)err;
	a->end = line(kv)->queue(kv->be, false, (uint64_t)n * kv->block_bytes, a->runs, &a->start);
	return 0;
}

static int sim_ahead_wait(struct allm_kv_cache *kv, struct kvc_ahead *a, struct allm_kv_disk_io_stat *st,
			  struct allm_err *err)
{
	(void)err;
	allm_backend_clock_wait_until(kv->be, a->end);
	st->runs = a->runs;
	st->io_seconds = a->end - a->start;
	return 0;
}

/* The copies' time: through the stage, as a staged read that waits. */
static int sim_ahead_copy(struct allm_kv_cache *kv, struct kvc_ahead *a, const int32_t *gpu, int32_t n,
			  struct allm_err *err)
{
	(void)a;
	int r = 0;
	for (int32_t i = 0, k; !r && i < n; i += k) {
		k = ALLM_MIN(kv->stage_blocks, n - i);
		r = kvc_stage_copy(kv, false, kv->stage, NULL, gpu + i, k, err);
	}
	return r;
}

/* The simulated write is all the profile's. */
static void sim_host_written(struct allm_kv_cache *kv, int32_t n, struct allm_kv_disk_io_stat *st)
{
	double queued, t = line(kv)->wait(kv->be, true, (uint64_t)kv->block_bytes * (uint64_t)n, st->runs, &queued);
	*st = (struct allm_kv_disk_io_stat){.seconds = t, .runs = st->runs, .waited_seconds = queued,
					    .io_seconds = t - queued};
}

const struct kvc_disk_i kvc_disk_sim = {
	.version = 1,
	.name = "simulated",
	.open = sim_open,
	.stage_total = sim_stage_total,
	.stage_free = sim_stage_free,
	.write_behind = sim_write_behind,
	.waited = sim_waited,
	.ahead_start = sim_ahead_start,
	.ahead_wait = sim_ahead_wait,
	.ahead_copy = sim_ahead_copy,
	.host_written = sim_host_written,
};
