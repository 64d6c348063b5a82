#include "kv-disk-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* The disk tier's background I/O: writes behind (a swap-out costs the step a
 * copy into the stage), reads ahead (a swap-in's read runs while the step
 * computes). Each has its ring; both rings post their completions to one
 * eventfd, and a reaper thread takes every completion as it arrives and stamps
 * it with the time, since the caller is computing then and looks only later.
 * Everything else happens on the caller's thread (bg_pump).
 *
 * The disk's time for a read: the disk is busy from an I/O handed to the kernel
 * while none was in flight until none is. A read alone in such a period took
 * all of it; reads and writes that overlapped share it in proportion to their
 * bytes, an estimate only (the disk serves some of them in parallel), which
 * the disk model does not learn from (io_shared). */

#define RD_QD 256
#define DONE_CAP 4096 /* completions stamped but not handled yet */

struct kvd_done {
	uint64_t data;
	int res;
	bool write;
	double t;
};

struct kvd_ticket {
	int rc;
	int32_t ops_left, staged, runs;
	uint64_t busy_bytes; /* its bytes in the busy period now open */
	double io_seconds, staged_seconds, start_seconds;
	bool shared; /* it shared the disk with other I/O */
	bool live;
};

struct kvd_bg {
	struct io_uring ring; /* reads ahead */
	bool have_ring;
	int efd; /* both rings' completions */
	pthread_t reaper;
	bool have_reaper;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under mu */
	struct kvd_done done[DONE_CAP];
	int32_t n_done;
	bool full; /* completions left in a ring for want of room in done[] */
	bool stop;
	int dead; /* the eventfd or the reads' ring failed: -errno; nothing completes any more */
	/* the caller's */
	int failed; /* dead as last seen under mu (wb_on reads it without the lock) */
	bool busy_broken; /* writes counted busy that may never complete (wb_ring failed) */
	struct kvd_done batch[DONE_CAP];
	struct kvd_ops ops; /* this batch of reads' I/Os, submitted up to next */
	int32_t *op_ticket; /* [cap_ticket >= ops.n] the read each belongs to */
	int64_t cap_ticket, next, inflight;
	struct kvd_ticket *t; /* this batch's reads */
	int32_t n_t, cap_t, live;
	int64_t busy_ops; /* I/Os of both rings in the kernel */
	double busy_t0;
	uint64_t busy_bytes;
	bool busy_writes; /* the period has writes in it */
};

/* ---- the reaper -------------------------------------------------------------------- */

/* Seconds this thread has waited for a core since it started (the kernel's
 * run_delay in /proc/thread-self/schedstat), or 0 where that cannot be read. */
static double run_delay(int fd)
{
	char buf[96];
	unsigned long long on_cpu, delay;
	ssize_t k = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
	if (k <= 0)
		return 0;
	buf[k] = 0;
	return sscanf(buf, "%llu %llu", &on_cpu, &delay) == 2 ? (double)delay * 1e-9 : 0;
}

/* Moves ring's completions into done[] (under mu). */
static void take(struct kvd_bg *bg, struct io_uring *ring, bool write, double now)
{
	struct io_uring_cqe *cqe;
	while (io_uring_peek_cqe(ring, &cqe) == 0) {
		if (bg->n_done == DONE_CAP) {
			bg->full = true; /* the caller wakes us again once it has taken some */
			return;
		}
		bg->done[bg->n_done++] = (struct kvd_done){io_uring_cqe_get_data64(cqe), cqe->res, write, now};
		io_uring_cqe_seen(ring, cqe);
	}
}

static void *reaper(void *arg)
{
	struct allm_kv_disk *d = arg;
	struct kvd_bg *bg = d->bg;
	/* The step's threads keep every core busy while I/O completes, so this
	 * thread may wake a while after a completion arrived: that wait for a
	 * core, as the kernel counts it, comes off the stamp. */
	int sfd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	for (bool stop = false; !stop;) {
		uint64_t v;
		double d0 = run_delay(sfd);
		ssize_t k = read(bg->efd, &v, sizeof(v));
		double now = allm_now();
		now -= run_delay(sfd) - d0;
		if (k < 0 && errno == EINTR)
			continue;
		pthread_mutex_lock(&bg->mu);
		if (k != (ssize_t)sizeof(v)) {
			bg->dead = k < 0 ? -errno : -EIO;
		} else if (!bg->dead) { /* dead: nobody handles them; kvd_bg_fini reaps */
			take(bg, &d->wb_ring, true, now);
			take(bg, &bg->ring, false, now);
		}
		stop = bg->stop || bg->dead;
		pthread_cond_broadcast(&bg->cv);
		pthread_mutex_unlock(&bg->mu);
	}
	if (sfd >= 0)
		close(sfd);
	return NULL;
}

/* ---- the disk's busy periods --------------------------------------------------------- */

static void busy_start(struct kvd_bg *bg, size_t bytes, bool write)
{
	if (!bg->busy_ops++) {
		bg->busy_t0 = allm_now();
		bg->busy_bytes = 0;
		bg->busy_writes = false;
	}
	bg->busy_bytes += bytes;
	bg->busy_writes |= write;
}

/* An I/O of the period completed at t; the last one gives the reads their time. */
static void busy_done(struct kvd_bg *bg, double t)
{
	if (--bg->busy_ops > 0)
		return;
	double busy = ALLM_MAX(t - bg->busy_t0, 0.0);
	int32_t reads = 0;
	for (int32_t k = 0; k < bg->n_t; k++)
		reads += bg->t[k].busy_bytes > 0;
	for (int32_t k = 0; k < bg->n_t; k++)
		if (bg->t[k].busy_bytes) {
			bg->t[k].io_seconds += busy * (double)bg->t[k].busy_bytes / (double)bg->busy_bytes;
			bg->t[k].shared |= bg->busy_writes || reads > 1;
			bg->t[k].busy_bytes = 0;
		}
}

/* ---- writes behind --------------------------------------------------------------
 * A block written behind is copied into a stage slot and its write queued on
 * wb_ring; the caller's memory is free at once. A read of the block before the
 * write lands copies it from the slot; a read from the file, a write, a release
 * or a resize first waits for writes in flight (drain); a failed write marks its
 * block bad, and the read that finds it fails as a failed read does (the engine
 * recomputes that request). */

static bool wb_on(const struct allm_kv_disk *d)
{
	return d->have_wb && !d->wb_failed && !d->bg->failed;
}

/* Finishes one write behind from its completion: a short write gets its rest
 * written synchronously; a failure marks the block bad. */
static void wb_complete(struct allm_kv_disk *d, const struct kvd_done *c)
{
	int32_t slot = (int32_t)(c->data & 0xffffffffu);
	int32_t blk = d->slot_block[slot];
	size_t bb = d->block_bytes;
	struct disk_op op = {d->stage + (size_t)slot * bb, (uint64_t)blk * bb, bb};
	int e = kvd_complete_op(d, true, &op, c->data, c->res, NULL);
	if (e) {
		d->bad[blk] = 1;
		d->bad_errno = -e;
	}
	d->staged[blk] = 0;
	d->free_slots[d->n_free_slots++] = slot;
	d->in_flight--;
	busy_done(d->bg, c->t);
}

/* ---- reads ahead ------------------------------------------------------------------
 * allm_kv_disk_read_start queues a read's I/Os and returns a ticket; the caller
 * computes, then waits with allm_kv_disk_read_wait. Tickets of one batch stay
 * valid until each has been waited for, then the batch starts over. */

/* One read completion: a short read gets its rest read synchronously. */
static void rd_complete(struct allm_kv_disk *d, const struct kvd_done *c)
{
	struct kvd_bg *bg = d->bg;
	int64_t i = (int64_t)(c->data & (SHORT_BIT - 1));
	struct kvd_ticket *t = &bg->t[bg->op_ticket[i]];
	bool rest;
	bg->inflight--;
	int e = kvd_complete_op(d, false, &bg->ops.v[i], c->data, c->res, &rest);
	double end = rest ? allm_now() : c->t;
	if (e && !t->rc)
		t->rc = e;
	t->ops_left--;
	busy_done(bg, end);
}

/* Hands the queued reads to the kernel, RD_QD at a time; returns how many
 * are still only queued (the kernel short of resources) or -errno when the
 * ring failed. */
static int rd_submit(struct allm_kv_disk *d)
{
	struct kvd_bg *bg = d->bg;
	while (bg->next < bg->ops.n && bg->inflight < RD_QD) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&bg->ring);
		if (!sqe)
			break;
		const struct disk_op *o = &bg->ops.v[bg->next];
		kvd_prep_op(d, sqe, false, o, (uint64_t)bg->next);
		bg->t[bg->op_ticket[bg->next]].busy_bytes += o->len;
		busy_start(bg, o->len, false);
		bg->next++;
		bg->inflight++;
	}
	if (!io_uring_sq_ready(&bg->ring))
		return 0;
	if (d->fail_rd_after) {
		/* test hook: the ring dies as the kernel takes these reads */
		pthread_mutex_lock(&bg->mu);
		bg->dead = -EIO;
		pthread_mutex_unlock(&bg->mu);
		io_uring_submit(&bg->ring);
		return -EIO;
	}
	int s = io_uring_submit(&bg->ring);
	if (s < 0 && s != -EINTR && s != -EAGAIN && s != -EBUSY)
		return s;
	return (int)io_uring_sq_ready(&bg->ring);
}

/* ---- the caller's side of the reaper --------------------------------------------------- */

/* Submits the queued reads and handles the completions stamped so far; with
 * wait, at least one (waiting at most wait_s when > 0, for ever when < 0). 0 or
 * -errno when the background I/O failed. */
static int bg_pump(struct allm_kv_disk *d, double wait_s)
{
	struct kvd_bg *bg = d->bg;
	int queued = rd_submit(d);
	double until = allm_now() + wait_s;
	pthread_mutex_lock(&bg->mu);
	if (queued < 0 && !bg->dead)
		bg->dead = queued;
	while (wait_s != 0 && !bg->n_done && !bg->dead) {
		if (queued > 0 || wait_s > 0) {
			/* the kernel refused some reads, or a bounded wait: a millisecond
			 * at a time, the reads offered again */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&bg->cv, &bg->mu, &ts);
			pthread_mutex_unlock(&bg->mu);
			queued = rd_submit(d);
			pthread_mutex_lock(&bg->mu);
			if (queued < 0 && !bg->dead)
				bg->dead = queued;
			if (wait_s > 0 && allm_now() >= until)
				break;
		} else {
			pthread_cond_wait(&bg->cv, &bg->mu);
		}
	}
	int32_t n = bg->n_done;
	memcpy(bg->batch, bg->done, (size_t)n * sizeof(bg->done[0]));
	bg->n_done = 0;
	bool full = bg->full;
	bg->full = false;
	int dead = bg->failed = bg->dead;
	pthread_mutex_unlock(&bg->mu);
	if (full) /* completions still wait in a ring: the reaper takes them now */
		eventfd_write(bg->efd, 1);
	for (int32_t i = 0; i < n; i++) {
		if (bg->batch[i].write)
			wb_complete(d, &bg->batch[i]);
		else
			rd_complete(d, &bg->batch[i]);
	}
	return dead;
}

/* ---- setup ------------------------------------------------------------------------- */

int32_t kvd_stage_slots(int64_t file_blocks, size_t block_bytes)
{
	int64_t slots = ALLM_MAX((int64_t)WB_MIN_SLOTS, (int64_t)(WB_BYTES / block_bytes));
	return (int32_t)ALLM_MAX((int64_t)1, ALLM_MIN(file_blocks, slots));
}

int kvd_bg_init(struct allm_kv_disk *d)
{
	int64_t slots = kvd_stage_slots(d->file_blocks, d->block_bytes);
	struct kvd_bg *bg = d->bg = allm_calloc(1, sizeof(*bg));
	if (!bg)
		return -ENOMEM;
	bg->efd = -1;
	d->stage_raw = allm_malloc((size_t)slots * d->block_bytes + DISK_ALIGN);
	d->free_slots = allm_malloc((size_t)slots * sizeof(int32_t));
	d->slot_block = allm_calloc((size_t)slots, sizeof(int32_t));
	d->staged = allm_calloc((size_t)d->file_blocks, sizeof(int32_t));
	d->bad = allm_calloc((size_t)d->file_blocks, 1);
	if (!d->stage_raw || !d->free_slots || !d->slot_block || !d->staged || !d->bad)
		return -ENOMEM;
	/* liburing returns -errno: it passes through (-EPERM where io_uring is
	 * disabled, -ENOMEM past the locked-memory limit) */
	int r;
	if ((r = io_uring_queue_init(WB_QD, &d->wb_ring, 0)) < 0)
		return r;
	d->have_wb = true; /* from here on kvd_bg_fini exits wb_ring */
	if ((r = io_uring_queue_init(RD_QD, &bg->ring, 0)) < 0)
		return r;
	bg->have_ring = true;
	if ((bg->efd = eventfd(0, EFD_CLOEXEC)) < 0)
		return -errno;
	if ((r = io_uring_register_eventfd(&d->wb_ring, bg->efd)) < 0 ||
	    (r = io_uring_register_eventfd(&bg->ring, bg->efd)) < 0)
		return r;
	pthread_mutex_init(&bg->mu, NULL);
	pthread_cond_init(&bg->cv, NULL);
	if ((r = pthread_create(&bg->reaper, NULL, reaper, d)))
		return -r;
	bg->have_reaper = true;
	d->stage = (char *)(((uintptr_t)d->stage_raw + DISK_ALIGN - 1) & ~(uintptr_t)(DISK_ALIGN - 1));
	d->wb_slots = d->stage_blocks = (int32_t)slots;
	for (int32_t i = 0; i < d->wb_slots; i++)
		d->free_slots[i] = d->wb_slots - 1 - i;
	d->n_free_slots = d->wb_slots;
	return 0;
}

/* I/Os that pools were closed with still in the kernel (process-wide). */
static _Atomic int64_t abandoned;

int64_t allm_kv_disk_abandoned_ios(void)
{
	return abandoned;
}

/* Takes n completions off ring, waiting for each at most until the deadline;
 * returns how many did not come. */
static int64_t reap(struct io_uring *ring, int64_t n, double deadline)
{
	while (n > 0) {
		struct io_uring_cqe *cqe;
		double left = deadline - allm_now();
		if (left <= 0)
			break;
		struct __kernel_timespec ts = {.tv_sec = (long long)left,
					       .tv_nsec = (long long)((left - (double)(long long)left) * 1e9)};
		int e = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
		if (e == -EINTR)
			continue;
		if (e)
			break;
		io_uring_cqe_seen(ring, cqe);
		n--;
	}
	return n;
}

/* After the reaper stopped: the I/Os a dead ring (or a failed writes' ring)
 * still has in the kernel read the stage and write the callers' memory until
 * each completes, whatever the process frees meanwhile. They are waited for
 * on the rings themselves, up to KVD_FINI_WAIT_S; the stage of any that never
 * complete is left allocated (counted in allm_kv_disk_abandoned_ios). Returns
 * whether the stage may be freed. */
#define KVD_FINI_WAIT_S 10.0
static bool bg_reap_left(struct allm_kv_disk *d)
{
	struct kvd_bg *bg = d->bg;
	/* what the reaper took but nobody handled */
	for (int32_t i = 0; i < bg->n_done; i++)
		if (bg->done[i].write)
			wb_complete(d, &bg->done[i]);
		else
			rd_complete(d, &bg->done[i]);
	bg->n_done = 0;
	/* issued to the kernel and not completed: counted, less what is still in
	 * the submission queue (the kernel never took it) */
	int64_t rd = bg->have_ring ? bg->inflight - (int64_t)io_uring_sq_ready(&bg->ring) : 0;
	int64_t wr = d->in_flight - (int64_t)io_uring_sq_ready(&d->wb_ring);
	double deadline = allm_now() + KVD_FINI_WAIT_S;
	int64_t left = (rd > 0 ? reap(&bg->ring, rd, deadline) : 0) + (wr > 0 ? reap(&d->wb_ring, wr, deadline) : 0);
	abandoned += left;
	return left == 0;
}

void kvd_bg_fini(struct allm_kv_disk *d)
{
	struct kvd_bg *bg = d->bg;
	bool free_stage = true;
	if (bg && bg->have_reaper) {
		/* the kernel reads the stage and writes the callers' memory until
		 * each I/O completes: wait (hold_writes: what it held goes now) */
		if (d->hold_writes && wb_on(d))
			kvd_wb_drain(d, NULL, 0);
		while (((wb_on(d) && d->in_flight > 0) || bg->inflight > 0) && !bg_pump(d, -1))
			;
		pthread_mutex_lock(&bg->mu);
		bg->stop = true;
		pthread_mutex_unlock(&bg->mu);
		eventfd_write(bg->efd, 1);
		pthread_join(bg->reaper, NULL);
		free_stage = bg_reap_left(d);
		pthread_cond_destroy(&bg->cv);
		pthread_mutex_destroy(&bg->mu);
	}
	if (bg && bg->have_ring)
		io_uring_queue_exit(&bg->ring);
	if (d->have_wb)
		io_uring_queue_exit(&d->wb_ring);
	if (bg && bg->efd >= 0)
		close(bg->efd);
	if (bg) {
		allm_free(bg->ops.v);
		allm_free(bg->op_ticket);
		allm_free(bg->t);
		allm_free(bg);
	}
	d->bg = NULL;
	d->have_wb = d->wb_failed = false;
	/* a stage the kernel may still read is kept, never freed */
	if (free_stage && d->host.free && d->stage_raw)
		d->host.free(d->host.ctx, d->stage_raw);
	else if (free_stage)
		allm_free(d->stage_raw);
	allm_free(d->free_slots);
	allm_free(d->slot_block);
	allm_free(d->staged);
	allm_free(d->bad);
	d->stage_raw = d->stage = NULL;
	d->free_slots = d->slot_block = d->staged = NULL;
	d->bad = NULL;
	d->wb_slots = d->n_free_slots = d->in_flight = d->stage_blocks = 0;
}

/* ---- writes behind: the calls ------------------------------------------------------ */

static bool wb_busy(const struct allm_kv_disk *d, const int32_t *ids, int32_t n)
{
	if (!ids)
		return d->in_flight > 0;
	for (int32_t i = 0; i < n; i++)
		if (ids[i] >= 0 && ids[i] < d->file_blocks && d->staged[ids[i]])
			return true;
	return false;
}

int kvd_wb_drain(struct allm_kv_disk *d, const int32_t *ids, int32_t n)
{
	if (!wb_on(d))
		return 0;
	if (d->hold_writes && io_uring_sq_ready(&d->wb_ring)) {
		for (unsigned k = io_uring_sq_ready(&d->wb_ring); k > 0; k--)
			busy_start(d->bg, d->block_bytes, true);
		if (io_uring_submit(&d->wb_ring) < 0)
			return -EIO;
	}
	int r = bg_pump(d, 0);
	while (!r && wb_busy(d, ids, n))
		r = bg_pump(d, -1);
	return r;
}

bool kvd_from_stage(const struct allm_kv_disk *d, int32_t blk)
{
	return wb_on(d) && d->staged[blk];
}

int32_t kvd_copy_staged(struct allm_kv_disk *d, void *base, const int32_t *mem_ids,
			const int32_t *disk_ids, int32_t n, double *ret_seconds)
{
	int32_t k = 0;
	double t0 = allm_now();
	if (wb_on(d)) {
		bg_pump(d, 0);
		for (int32_t i = 0; i < n; i++)
			if (d->staged[disk_ids[i]]) {
				memcpy((char *)base + (size_t)mem_ids[i] * d->block_bytes,
				       d->stage + (size_t)(d->staged[disk_ids[i]] - 1) * d->block_bytes,
				       d->block_bytes);
				k++;
			}
	}
	*ret_seconds = allm_now() - t0;
	return k;
}

int32_t allm_kv_disk_behind_free(struct allm_kv_disk *d)
{
	if (!wb_on(d))
		return 0;
	bg_pump(d, 0);
	return d->n_free_slots;
}

int allm_kv_disk_set_host(struct allm_kv_disk *d, const struct allm_kv_disk_host *h, struct allm_err *err)
{
	if (!wb_on(d)) {
		d->host = *h;
		return 0;
	}
	ALLM_ASSERT(d->in_flight == 0 && d->bg->inflight == 0);
	void *raw = NULL;
	int r = h->alloc(h->ctx, (size_t)d->wb_slots * d->block_bytes + DISK_ALIGN, &raw);
	if (r) {
		kvd_bg_fini(d); /* frees the old stage: every I/O waits from here on */
		d->host = *h;
		return allm_err_set(err, r, "cannot allocate the disk tier's stage in host memory");
	}
	allm_free(d->stage_raw);
	d->host = *h;
	d->stage_raw = raw;
	d->stage = (char *)(((uintptr_t)raw + DISK_ALIGN - 1) & ~(uintptr_t)(DISK_ALIGN - 1));
	return 0;
}

int32_t allm_kv_disk_stage_blocks(const struct allm_kv_disk *d)
{
	return d->stage_blocks;
}

int allm_kv_disk_drain(struct allm_kv_disk *d, const int32_t *ids, int32_t n)
{
	return kvd_wb_drain(d, ids, n);
}

int allm_kv_disk_write_behind(struct allm_kv_disk *d, const void *base, const int32_t *mem_ids,
			      const int32_t *disk_ids, int32_t n, double *ret_seconds, struct allm_err *err)
{
	double t0 = allm_now();
	size_t bb = d->block_bytes;
	if (!wb_on(d))
		return -EAGAIN;
	bg_pump(d, 0);
	if (d->n_free_slots < n)
		return -EAGAIN;
	int r = kvd_check_ids(d, disk_ids, n, err);
	if (r)
		return r;
	/* an earlier write of one of these blocks must not land after this one */
	r = kvd_wb_drain(d, disk_ids, n);
	for (int32_t i = 0; i < n && !r; i++) {
		int32_t slot = d->free_slots[--d->n_free_slots], blk = disk_ids[i];
		char *buf = d->stage + (size_t)slot * bb;
		if (d->host.fill && (r = d->host.fill(d->host.ctx, buf, mem_ids[i]))) {
			d->free_slots[d->n_free_slots++] = slot;
			break;
		}
		if (!d->host.fill)
			memcpy(buf, (const char *)base + (size_t)mem_ids[i] * bb, bb);
		/* the SQE only now: one taken and left unprepared would go to the
		 * kernel with whatever it held before */
		struct io_uring_sqe *sqe;
		while (!r && !(sqe = io_uring_get_sqe(&d->wb_ring))) {
			/* the ring is full: hand it what is queued, take a completion */
			io_uring_submit(&d->wb_ring);
			r = d->in_flight > 0 ? bg_pump(d, 0.001) : -EBUSY;
		}
		if (r) {
			d->free_slots[d->n_free_slots++] = slot;
			break;
		}
		d->slot_block[slot] = blk;
		d->staged[blk] = slot + 1;
		d->bad[blk] = 0;
		d->in_flight++;
		if (!d->hold_writes) /* held ones count once they go (kvd_wb_drain) */
			busy_start(d->bg, bb, true);
		kvd_prep_op(d, sqe, true, &(struct disk_op){buf, (uint64_t)blk * bb, bb}, (uint64_t)slot);
	}
	/* the kernel short of resources: let completions free some, a while */
	int s = 0, tries = 0;
	while (!d->hold_writes && (s = d->fail_wb_submit ? -EIO : io_uring_submit(&d->wb_ring)) < 0 &&
	       (s == -EINTR || s == -EAGAIN || s == -EBUSY) && tries++ < 1000)
		bg_pump(d, 0.001);
	if (!r && s < 0)
		r = s;
	if (r) {
		/* The ring failed: stop writing behind. Which of its writes reached the
		 * kernel is unknown, so every block still in flight is marked bad: its
		 * read fails and that request is recomputed, nothing stale is read. */
		for (int32_t i = 0; i < d->wb_slots; i++)
			if (d->staged[d->slot_block[i]] == i + 1)
				d->bad[d->slot_block[i]] = 1;
		d->bad_errno = -r;
		d->wb_failed = true;
		d->bg->busy_broken = true;
		allm_err_set(err, r, "disk KV write-behind failed: %s", strerror(-r));
		return r;
	}
	if (ret_seconds)
		*ret_seconds = allm_now() - t0;
	return 0;
}

/* ---- reads ahead: the calls -------------------------------------------------------- */

int allm_kv_disk_read_start(struct allm_kv_disk *d, void *base, const int32_t *mem_ids,
			    const int32_t *disk_ids, int32_t n, int32_t *ret_ticket, struct allm_err *err)
{
	struct kvd_bg *bg = d->bg;
	double t0 = allm_now();
	int r;
	if (!bg || !wb_on(d))
		return -EAGAIN;
	if ((r = kvd_check_ids(d, disk_ids, n, err)))
		return r;
	if (bg->n_t == bg->cap_t) {
		int32_t cap = ALLM_MAX(16, bg->cap_t * 2);
		struct kvd_ticket *t = allm_realloc(bg->t, (size_t)cap * sizeof(*t));
		if (!t)
			return allm_err_set(err, -ENOMEM, "out of memory");
		bg->t = t;
		bg->cap_t = cap;
	}
	int32_t id = bg->n_t;
	struct kvd_ticket *t = &bg->t[id];
	*t = (struct kvd_ticket){0};
	/* blocks whose writes are in flight come from the stage; the others have
	 * none in flight, so nothing needs to land first (the disk may serve the
	 * writes beside this read: the busy period shares them out) */
	t->staged = kvd_copy_staged(d, base, mem_ids, disk_ids, n, &t->staged_seconds);
	int64_t first = bg->ops.n;
	if ((r = kvd_plan(d, false, base, mem_ids, disk_ids, n, &bg->ops, err)) < 0) {
		bg->ops.n = first;
		return r;
	}
	t->runs = r;
	if (bg->cap_ticket < bg->ops.cap) {
		int32_t *tk = allm_realloc(bg->op_ticket, (size_t)bg->ops.cap * sizeof(*tk));
		if (!tk) {
			bg->ops.n = first;
			return allm_err_set(err, -ENOMEM, "out of memory");
		}
		bg->op_ticket = tk;
		bg->cap_ticket = bg->ops.cap;
	}
	for (int64_t k = first; k < bg->ops.n; k++)
		bg->op_ticket[k] = id;
	t->ops_left = (int32_t)(bg->ops.n - first);
	t->live = true;
	bg->n_t++;
	bg->live++;
	bg_pump(d, 0);
	bg->t[id].start_seconds = allm_now() - t0;
	*ret_ticket = id;
	return 0;
}

int allm_kv_disk_read_wait(struct allm_kv_disk *d, int32_t ticket, struct allm_kv_disk_io_stat *st,
			   struct allm_err *err)
{
	struct kvd_bg *bg = d->bg;
	ALLM_ASSERT(bg && ticket >= 0 && ticket < bg->n_t && bg->t[ticket].live);
	double t0 = allm_now();
	/* until its I/O is done and the disk's busy period with it ended (the I/O
	 * beside it is waited for too: its time is a share) */
	while (bg->t[ticket].ops_left > 0 || (bg->t[ticket].busy_bytes && !bg->busy_broken)) {
		int dead = bg_pump(d, -1);
		if (dead) {
			/* nothing completes any more: what reaches the read's memory is
			 * unknown, the read fails */
			if (bg->t[ticket].ops_left > 0 && !bg->t[ticket].rc)
				bg->t[ticket].rc = dead;
			break;
		}
	}
	struct kvd_ticket *t = &bg->t[ticket];
	if (st)
		*st = (struct allm_kv_disk_io_stat){
			.seconds = t->start_seconds + (allm_now() - t0), .runs = t->runs, .staged = t->staged,
			.staged_seconds = t->staged_seconds, .io_seconds = t->io_seconds,
			.io_shared = t->shared};
	int r = t->rc;
	if (r)
		allm_err_set(err, r, "disk KV read failed: %s", strerror(-r));
	t->live = false;
	if (--bg->live == 0 && bg->inflight == 0) /* every read of the batch is done */
		bg->ops.n = bg->next = bg->n_t = 0;
	return r;
}
