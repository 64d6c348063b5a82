#include "kv-disk.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* I/Os in flight at once, and the largest single I/O: a long run is split so
 * that the device sees several requests at a time. */
#define DISK_QD 64
#define DISK_MAX_IO (1u << 20)
/* O_DIRECT wants addresses, lengths and offsets aligned to the device's logical
 * block; 4 KiB covers every device in common use. */
#define DISK_ALIGN 4096
/* Write-behind: host memory its stage may take, and its ring's depth. */
#define WB_BYTES ((size_t)64 << 20)
#define WB_QD 256
/* user_data: op index (write-behind: stage slot) | injected errno << 40 |
 * SHORT_BIT for an injected short one */
#define SHORT_BIT (1ull << 39)

struct allm_kv_disk {
	int fd;
	size_t block_bytes;
	int64_t file_blocks; /* blocks the file is sized for */
	struct allm_block_pool pool;
	struct io_uring ring;
	bool have_ring; /* else pread/pwrite */
	/* Test hook (ALLM_KV_DISK_FAULT, read at open): the n-th write or read
	 * I/O of this pool fails with the given errno or comes back short. */
	int fault_errno;
	bool fault_write, fault_short, fault_on; /* fault_on: every I/O from fault_at on ("N+") */
	int64_t fault_at, n_io[2];
	/* Test hook: writes behind stay queued, not submitted, until something waits
	 * for one (a drain), so a test sees them in flight however fast the disk. */
	bool hold_writes;
	/* Write-behind (allm_kv_disk_write_behind): blocks copied into stage slots and
	 * written from there on a second ring, reaped later. */
	struct io_uring wb_ring;
	bool have_wb; /* the stage and wb_ring exist */
	bool wb_failed; /* wb_ring failed: no more writes behind, none waited for */
	char *stage_raw, *stage; /* wb_slots slots of block_bytes, DISK_ALIGN-aligned */
	int32_t wb_slots, n_free_slots, in_flight;
	int32_t *free_slots; /* stack of free slot numbers */
	int32_t *slot_block; /* [wb_slots] disk block each in-flight slot writes */
	/* [file_blocks] 1 + the slot whose write of the block is in flight, 0 for
	 * none: at most one is (a block is drained before it is staged again), and
	 * until it lands the slot holds the block's newest contents */
	int32_t *staged;
	uint8_t *bad; /* [file_blocks] its last write-behind failed */
	int bad_errno; /* why, for the error of the read that finds it */
};

struct allm_block_pool *allm_kv_disk_pool(struct allm_kv_disk *d)
{
	return &d->pool;
}

/* "eio-write=3", "enospc-write=1", "eio-read=2", "short-read=1" (that I/O only;
 * "eio-read=2+": that one and every later one), "no-tmpfile", "no-direct",
 * "hold-writes": see struct allm_kv_disk. */
static void parse_fault(struct allm_kv_disk *d, const char *f, bool *no_tmpfile, bool *no_direct)
{
	char kind[32];
	long long at = 0;
	if (!f || !*f)
		return;
	*no_tmpfile = strstr(f, "no-tmpfile") != NULL;
	*no_direct = strstr(f, "no-direct") != NULL;
	d->hold_writes = strstr(f, "hold-writes") != NULL;
	if (sscanf(f, "%31[a-z-]=%lld", kind, &at) != 2 || at < 1)
		return;
	d->fault_at = at;
	d->fault_on = strchr(f, '+') != NULL;
	d->fault_write = strstr(kind, "write") != NULL;
	d->fault_short = !strncmp(kind, "short", 5);
	d->fault_errno = !strncmp(kind, "enospc", 6) ? ENOSPC : EIO;
}

/* One I/O: len bytes at file offset off to or from buf. */
struct disk_op {
	char *buf;
	uint64_t off;
	size_t len;
};

/* The injected fault for the next I/O in this direction, if any: 0, -errno, or 1
 * for a short transfer. */
static int fault_now(struct allm_kv_disk *d, bool write)
{
	int64_t k = ++d->n_io[write];
	if (!d->fault_at || d->fault_write != write || k < d->fault_at || (k > d->fault_at && !d->fault_on))
		return 0;
	return d->fault_short ? 1 : -d->fault_errno;
}

/* pwrite / pread of all len bytes (EINTR retried). 0 or -errno (-EIO: the file
 * ended). */
static int rw_all(int fd, bool write, char *buf, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t k = write ? pwrite(fd, buf + done, len - done, (off_t)(off + done))
				  : pread(fd, buf + done, len - done, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		done += (size_t)k;
	}
	return 0;
}

static int sync_op(struct allm_kv_disk *d, bool write, const struct disk_op *op)
{
	int f = fault_now(d, write);
	if (f < 0)
		return f;
	if (f) { /* an injected short transfer: half, then the file "ends" */
		int r = rw_all(d->fd, write, op->buf, op->len / 2, op->off);
		return r ? r : -EIO;
	}
	return rw_all(d->fd, write, op->buf, op->len, op->off);
}

/* Prepares op as the ring's I/O number idx, or the injected fault standing in
 * for its completion (user_data: see SHORT_BIT). */
static void prep_op(struct allm_kv_disk *d, struct io_uring_sqe *sqe, bool write, const struct disk_op *op,
		    uint64_t idx)
{
	int f = fault_now(d, write);
	if (f < 0) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, idx | (uint64_t)(-f) << 40);
		return;
	}
	size_t len = f ? op->len / 2 : op->len;
	if (write)
		io_uring_prep_write(sqe, d->fd, op->buf, (unsigned)len, op->off);
	else
		io_uring_prep_read(sqe, d->fd, op->buf, (unsigned)len, op->off);
	io_uring_sqe_set_data64(sqe, idx | (f ? SHORT_BIT : 0));
}

/* ---- write-behind ---------------------------------------------------------------
 * A block written behind is copied into a stage slot and its write queued on
 * wb_ring; the caller's memory is free at once. A read, a release or a resize
 * first waits for the writes of the blocks it touches (drain); a failed write
 * marks its block bad, and the read that finds it fails as a failed read does
 * (the engine recomputes that request). */

static void wb_fini(struct allm_kv_disk *d)
{
	if (d->have_wb)
		io_uring_queue_exit(&d->wb_ring);
	d->have_wb = d->wb_failed = false;
	allm_free(d->stage_raw);
	allm_free(d->free_slots);
	allm_free(d->slot_block);
	allm_free(d->staged);
	allm_free(d->bad);
	d->stage_raw = d->stage = NULL;
	d->free_slots = d->slot_block = d->staged = NULL;
	d->bad = NULL;
	d->wb_slots = d->n_free_slots = d->in_flight = 0;
}

/* Up to WB_BYTES of slots (one at least), the ring, the per-block counts. */
static int wb_init(struct allm_kv_disk *d)
{
	int64_t slots = ALLM_MIN(d->file_blocks, ALLM_MAX((int64_t)1, (int64_t)(WB_BYTES / d->block_bytes)));
	d->stage_raw = allm_malloc((size_t)slots * d->block_bytes + DISK_ALIGN);
	d->free_slots = allm_malloc((size_t)slots * sizeof(int32_t));
	d->slot_block = allm_calloc((size_t)slots, sizeof(int32_t));
	d->staged = allm_calloc((size_t)d->file_blocks, sizeof(int32_t));
	d->bad = allm_calloc((size_t)d->file_blocks, 1);
	if (!d->stage_raw || !d->free_slots || !d->slot_block || !d->staged || !d->bad)
		return -ENOMEM;
	if (io_uring_queue_init(WB_QD, &d->wb_ring, 0))
		return -EIO;
	d->have_wb = true;
	d->stage = (char *)(((uintptr_t)d->stage_raw + DISK_ALIGN - 1) & ~(uintptr_t)(DISK_ALIGN - 1));
	d->wb_slots = (int32_t)slots;
	for (int32_t i = 0; i < d->wb_slots; i++)
		d->free_slots[i] = d->wb_slots - 1 - i;
	d->n_free_slots = d->wb_slots;
	return 0;
}

/* Finishes one write-behind from its completion: a short write gets its rest
 * written synchronously; a failure marks the block bad. */
static void wb_complete(struct allm_kv_disk *d, struct io_uring_cqe *cqe)
{
	uint64_t data = io_uring_cqe_get_data64(cqe);
	int32_t slot = (int32_t)(data & 0xffffffffu);
	int res = cqe->res, injected = (int)(data >> 40), e = 0;
	io_uring_cqe_seen(&d->wb_ring, cqe);
	int32_t blk = d->slot_block[slot];
	size_t bb = d->block_bytes;
	if (injected)
		e = -injected;
	else if (res < 0)
		e = res;
	else if (data & SHORT_BIT)
		e = -EIO;
	if (!e && (size_t)res < bb) /* a short write: the rest, waited for */
		e = rw_all(d->fd, true, d->stage + (size_t)slot * bb + res, bb - (size_t)res,
			   (uint64_t)blk * bb + (uint64_t)res);
	if (e) {
		d->bad[blk] = 1;
		d->bad_errno = -e;
	}
	d->staged[blk] = 0;
	d->free_slots[d->n_free_slots++] = slot;
	d->in_flight--;
}

static bool wb_on(const struct allm_kv_disk *d)
{
	return d->have_wb && !d->wb_failed;
}

/* Completes what has finished, without waiting. */
static void wb_reap(struct allm_kv_disk *d)
{
	struct io_uring_cqe *cqe;
	while (d->in_flight > 0 && io_uring_peek_cqe(&d->wb_ring, &cqe) == 0)
		wb_complete(d, cqe);
}

/* Waits for one completion. 0 or -errno (the ring itself failed). */
static int wb_wait_one(struct allm_kv_disk *d)
{
	struct io_uring_cqe *cqe;
	int r;
	do /* what is queued goes to the kernel first (hold_writes keeps some back) */
		r = io_uring_submit_and_wait(&d->wb_ring, 1);
	while (r == -EINTR);
	if (r < 0 && r != -EAGAIN && r != -EBUSY)
		return r;
	do
		r = io_uring_wait_cqe(&d->wb_ring, &cqe);
	while (r == -EINTR);
	if (r < 0)
		return r;
	wb_complete(d, cqe);
	return 0;
}

static bool wb_busy(const struct allm_kv_disk *d, const int32_t *ids, int32_t n)
{
	if (!ids)
		return d->in_flight > 0;
	for (int32_t i = 0; i < n; i++)
		if (ids[i] >= 0 && ids[i] < d->file_blocks && d->staged[ids[i]])
			return true;
	return false;
}

/* Waits until no write-behind of blocks ids[0..n) (ids NULL: of any block) is
 * in flight. 0 or -errno. */
static int wb_drain(struct allm_kv_disk *d, const int32_t *ids, int32_t n)
{
	if (!wb_on(d))
		return 0;
	wb_reap(d);
	while (wb_busy(d, ids, n)) {
		int r = wb_wait_one(d);
		if (r)
			return r;
	}
	return 0;
}

/* An unnamed file in dir: O_TMPFILE, or (where the filesystem lacks it) a
 * random name unlinked at once. */
static int open_file(const char *dir, int flags, bool no_tmpfile, bool *ret_named)
{
	int fd = no_tmpfile ? -1 : open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC | flags, 0600);
	*ret_named = false;
	if (fd >= 0)
		return fd;
	if (!no_tmpfile && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	char path[4200];
	snprintf(path, sizeof(path), "%s/.allm-kv-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC | flags);
	if (fd < 0)
		return -errno;
	unlink(path);
	*ret_named = true;
	return fd;
}

int allm_kv_disk_open(const char *dir, int32_t n_blocks, size_t block_bytes,
		      struct allm_kv_disk **ret, char *note, size_t note_len, struct allm_err *err)
{
	struct allm_kv_disk *d = allm_calloc(1, sizeof(*d));
	bool no_tmpfile = false, no_direct = false, named = false, direct = false;
	struct stat st;
	int r;
	note[0] = 0;
	if (!d)
		return allm_err_set(err, -ENOMEM, "out of memory");
	d->fd = -1;
	d->block_bytes = block_bytes;
	parse_fault(d, getenv("ALLM_KV_DISK_FAULT"), &no_tmpfile, &no_direct);
	if (n_blocks < 1 || block_bytes == 0) {
		r = allm_err_set(err, -EINVAL, "the disk KV pool needs at least one block");
		goto fail;
	}
	if (stat(dir, &st)) {
		r = allm_err_set(err, -errno, "disk swap directory %s: %s", dir, strerror(errno));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		r = allm_err_set(err, -ENOTDIR, "disk swap directory %s: not a directory", dir);
		goto fail;
	}
	const char *why = "";
	if (block_bytes % DISK_ALIGN)
		why = "a KV block is not a multiple of 4 KiB";
	else if (no_direct)
		why = "disabled";
	else {
		d->fd = open_file(dir, O_DIRECT, no_tmpfile, &named);
		direct = d->fd >= 0;
		if (!direct)
			why = "the filesystem refuses it";
	}
	if (d->fd < 0)
		d->fd = open_file(dir, 0, no_tmpfile, &named);
	if (d->fd < 0) {
		r = allm_err_set(err, d->fd, "cannot create the disk KV file in %s: %s", dir,
				 strerror(-d->fd));
		goto fail;
	}
	if (ftruncate(d->fd, (off_t)((uint64_t)n_blocks * block_bytes))) {
		r = allm_err_set(err, -errno, "cannot size the disk KV file in %s to %d blocks: %s", dir,
				 n_blocks, strerror(errno));
		goto fail;
	}
	d->file_blocks = n_blocks;
	if ((r = allm_block_pool_init(&d->pool, n_blocks))) {
		allm_err_set(err, r, "out of memory");
		goto fail;
	}
	d->have_ring = !getenv("ALLM_NO_IO_URING") && io_uring_queue_init(DISK_QD, &d->ring, 0) == 0;
	if (d->have_ring && wb_init(d))
		wb_fini(d); /* without its memory or ring, writes wait for the disk */
	char how[160];
	if (direct)
		snprintf(how, sizeof(how), "O_DIRECT");
	else
		snprintf(how, sizeof(how), "buffered I/O (O_DIRECT: %s)", why);
	snprintf(note, note_len, "disk KV tier: %d blocks (%.2f GiB) in %s, %s, %s, %s%s", n_blocks,
		 (double)n_blocks * block_bytes / 1073741824.0, dir, how,
		 named ? "no O_TMPFILE here: a name unlinked at once" : "O_TMPFILE",
		 d->have_ring ? "io_uring" : "pread/pwrite", d->have_wb ? ", write-behind" : "");
	*ret = d;
	return 0;
fail:
	allm_kv_disk_close(d);
	return r;
}

int allm_kv_disk_open_virtual(int32_t n_blocks, size_t block_bytes, struct allm_kv_disk **ret,
			      struct allm_err *err)
{
	struct allm_kv_disk *d = allm_calloc(1, sizeof(*d));
	if (!d)
		return allm_err_set(err, -ENOMEM, "out of memory");
	d->fd = -1;
	d->block_bytes = block_bytes;
	d->file_blocks = INT32_MAX; /* no file to grow */
	if (n_blocks < 1 || block_bytes == 0 || allm_block_pool_init(&d->pool, n_blocks)) {
		allm_free(d);
		return allm_err_set(err, n_blocks < 1 ? -EINVAL : -ENOMEM,
				    "the disk KV pool needs at least one block");
	}
	*ret = d;
	return 0;
}

void allm_kv_disk_close(struct allm_kv_disk *d)
{
	if (!d)
		return;
	wb_drain(d, NULL, 0); /* the kernel reads the stage until each write completes */
	wb_fini(d);
	if (d->have_ring)
		io_uring_queue_exit(&d->ring);
	if (d->fd >= 0)
		close(d->fd);
	allm_block_pool_fini(&d->pool);
	allm_free(d);
}

int allm_kv_disk_resize(struct allm_kv_disk *d, int32_t n, struct allm_err *err)
{
	if (n < 0)
		return allm_err_set(err, -EINVAL, "disk blocks must be >= 0 (got %d)", n);
	int32_t cap = allm_block_pool_capacity_needed(&d->pool, n);
	if (cap > d->file_blocks && d->fd >= 0) {
		if (d->have_wb) { /* also after the ring failed: the marks stay read */
			int32_t *pend = allm_realloc(d->staged, (size_t)cap * sizeof(*pend));
			if (pend)
				d->staged = pend;
			uint8_t *bad = pend ? allm_realloc(d->bad, (size_t)cap) : NULL;
			if (bad)
				d->bad = bad;
			if (!pend || !bad)
				return allm_err_set(err, -ENOMEM, "out of memory");
			memset(d->staged + d->file_blocks, 0, (size_t)(cap - d->file_blocks) * sizeof(*pend));
			memset(d->bad + d->file_blocks, 0, (size_t)(cap - d->file_blocks));
		}
		if (ftruncate(d->fd, (off_t)((uint64_t)cap * d->block_bytes)))
			return allm_err_set(err, -errno, "cannot grow the disk KV file to %d blocks: %s", cap,
					    strerror(errno));
		d->file_blocks = cap;
	}
	int r = allm_block_pool_resize(&d->pool, n);
	return r ? allm_err_set(err, r, "out of memory") : 0;
}

/* Runs the ops through the ring, DISK_QD at a time. A short transfer gets one
 * synchronous retry of its rest (a regular file may return less than asked). */
static int ring_ops(struct allm_kv_disk *d, bool write, struct disk_op *ops, int64_t n)
{
	int64_t next = 0, inflight = 0, rc = 0;
	while (next < n || inflight > 0) {
		while (next < n && inflight < DISK_QD) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);
			if (!sqe)
				break;
			prep_op(d, sqe, write, &ops[next], (uint64_t)next);
			next++;
			inflight++;
		}
		int s = io_uring_submit(&d->ring);
		if (s < 0 && s != -EINTR && s != -EAGAIN && !rc)
			rc = s;
		struct io_uring_cqe *cqe;
		int w = io_uring_wait_cqe(&d->ring, &cqe);
		if (w == -EINTR)
			continue;
		if (w < 0)
			return (int)(rc ? rc : w);
		uint64_t data = io_uring_cqe_get_data64(cqe);
		int64_t i = (int64_t)(data & (SHORT_BIT - 1));
		int res = cqe->res, injected = (int)(data >> 40);
		io_uring_cqe_seen(&d->ring, cqe);
		inflight--;
		if (injected) {
			rc = rc ? rc : -injected;
			continue;
		}
		if (res < 0) {
			rc = rc ? rc : res;
		} else if (data & SHORT_BIT) {
			rc = rc ? rc : -EIO;
		} else if ((size_t)res < ops[i].len) {
			struct disk_op rest = {ops[i].buf + res, ops[i].off + (uint64_t)res,
					       ops[i].len - (size_t)res};
			int k = sync_op(d, write, &rest);
			if (k && !rc)
				rc = k;
		}
	}
	return (int)rc;
}

/* Whether block i of a read comes from the stage: its write behind is still in
 * flight, and the slot holds what the write will put on disk. */
static bool from_stage(const struct allm_kv_disk *d, bool write, int32_t blk)
{
	return !write && wb_on(d) && d->staged[blk];
}

int allm_kv_disk_io(struct allm_kv_disk *d, bool write, void *base, const int32_t *mem_ids,
		    const int32_t *disk_ids, int32_t n, struct allm_kv_disk_io_stat *st, struct allm_err *err)
{
	size_t bb = d->block_bytes;
	int64_t n_ops = 0, cap = 0;
	int32_t runs = 0, staged = 0;
	struct disk_op *ops = NULL;
	int r = 0;
	double t0 = allm_now(), t_stage = 0, t_wait = 0;
	for (int32_t i = 0; i < n; i++)
		if (disk_ids[i] < 0 || disk_ids[i] >= d->file_blocks) {
			r = allm_err_set(err, -EINVAL, "disk block %d outside the file", disk_ids[i]);
			goto out;
		}
	if (!write && wb_on(d)) {
		/* a read does not wait for a write in flight of its block: the stage
		 * has the data */
		wb_reap(d);
		double ts = allm_now();
		for (int32_t i = 0; i < n; i++)
			if (from_stage(d, write, disk_ids[i])) {
				memcpy((char *)base + (size_t)mem_ids[i] * bb,
				       d->stage + (size_t)(d->staged[disk_ids[i]] - 1) * bb, bb);
				staged++;
			}
		t_stage = allm_now() - ts;
	}
	for (int32_t i = 0; i < n;) {
		if (from_stage(d, write, disk_ids[i])) {
			i++;
			continue;
		}
		int32_t j = i + 1;
		while (j < n && mem_ids[j] == mem_ids[j - 1] + 1 && disk_ids[j] == disk_ids[j - 1] + 1 &&
		       !from_stage(d, write, disk_ids[j]))
			j++;
		runs++;
		/* a run, split into pieces of at most DISK_MAX_IO (whole blocks) */
		size_t per = ALLM_MAX((size_t)1, DISK_MAX_IO / bb) * bb;
		for (size_t off = 0, len = bb * (size_t)(j - i); off < len; off += per) {
			if (n_ops == cap) {
				cap = ALLM_MAX(64, cap * 2);
				struct disk_op *o = allm_realloc(ops, (size_t)cap * sizeof(*ops));
				if (!o) {
					r = allm_err_set(err, -ENOMEM, "out of memory");
					goto out;
				}
				ops = o;
			}
			ops[n_ops++] = (struct disk_op){(char *)base + (size_t)mem_ids[i] * bb + off,
							(uint64_t)disk_ids[i] * bb + off,
							ALLM_MIN(per, len - off)};
		}
		i = j;
	}
	if (n_ops > 0) {
		/* The writes behind still in flight go first, all of them: a write to
		 * one of these blocks must land before this I/O (a read must see it, a
		 * write must not be overtaken by it), and the disk would serve the
		 * others ahead of this I/O anyway (it did: a read queued behind 15 MB
		 * of writes took 2.3x its time). Waited for apart, this I/O's time is
		 * the disk's for it alone, what the disk model learns. */
		double tw = allm_now();
		r = wb_drain(d, NULL, 0);
		t_wait = allm_now() - tw;
		if (r) {
			allm_err_set(err, r, "disk KV write-behind failed: %s", strerror(-r));
			goto out;
		}
	}
	for (int64_t k = 0; !write && d->bad && k < n_ops; k++)
		for (uint64_t blk = ops[k].off / bb; blk < (ops[k].off + ops[k].len) / bb; blk++)
			if (d->bad[blk]) {
				/* EIO, whatever the write's errno: the read is what fails now
				 * (ENOSPC here would read as "no room in the GPU pool") */
				r = allm_err_set(err, -EIO, "disk KV write of block %d failed earlier: %s",
						 (int)blk, strerror(d->bad_errno));
				goto out;
			}
	if (d->fd < 0) {
		/* virtual: nothing moves */
	} else if (d->have_ring) {
		r = ring_ops(d, write, ops, n_ops);
	} else {
		for (int64_t k = 0; k < n_ops && !r; k++)
			r = sync_op(d, write, &ops[k]);
	}
	for (int32_t i = 0; write && !r && d->bad && i < n; i++)
		d->bad[disk_ids[i]] = 0;
	if (r)
		allm_err_set(err, r, "disk KV %s failed: %s", write ? "write" : "read", strerror(-r));
out:
	allm_free(ops);
	if (st) {
		st->seconds = allm_now() - t0;
		st->runs = runs;
		st->staged = staged;
		st->staged_seconds = t_stage;
		st->waited_seconds = t_wait;
	}
	return r;
}

int32_t allm_kv_disk_behind_free(struct allm_kv_disk *d)
{
	if (!wb_on(d))
		return 0;
	wb_reap(d);
	return d->n_free_slots;
}

int allm_kv_disk_drain(struct allm_kv_disk *d, const int32_t *ids, int32_t n)
{
	return wb_drain(d, ids, n);
}

int allm_kv_disk_write_behind(struct allm_kv_disk *d, const void *base, const int32_t *mem_ids,
			      const int32_t *disk_ids, int32_t n, double *ret_seconds, struct allm_err *err)
{
	double t0 = allm_now();
	size_t bb = d->block_bytes;
	if (!wb_on(d))
		return -EAGAIN;
	wb_reap(d);
	if (d->n_free_slots < n)
		return -EAGAIN;
	for (int32_t i = 0; i < n; i++)
		if (disk_ids[i] < 0 || disk_ids[i] >= d->file_blocks)
			return allm_err_set(err, -EINVAL, "disk block %d outside the file", disk_ids[i]);
	/* an earlier write of one of these blocks must not land after this one */
	int r = wb_drain(d, disk_ids, n);
	for (int32_t i = 0; i < n && !r; i++) {
		struct io_uring_sqe *sqe;
		while (!r && !(sqe = io_uring_get_sqe(&d->wb_ring))) {
			/* the ring is full: hand it what is queued, take a completion */
			io_uring_submit(&d->wb_ring);
			r = d->in_flight > 0 ? wb_wait_one(d) : -EBUSY;
		}
		if (r)
			break;
		int32_t slot = d->free_slots[--d->n_free_slots], blk = disk_ids[i];
		char *buf = d->stage + (size_t)slot * bb;
		memcpy(buf, (const char *)base + (size_t)mem_ids[i] * bb, bb);
		d->slot_block[slot] = blk;
		d->staged[blk] = slot + 1;
		d->bad[blk] = 0;
		d->in_flight++;
		prep_op(d, sqe, true, &(struct disk_op){buf, (uint64_t)blk * bb, bb}, (uint64_t)slot);
	}
	/* the kernel short of resources: let completions free some, a while */
	int s = 0, tries = 0;
	while (!d->hold_writes && (s = io_uring_submit(&d->wb_ring)) < 0 && (s == -EINTR || s == -EAGAIN || s == -EBUSY) &&
	       tries++ < 1000) {
		struct __kernel_timespec ts = {0, 1000000};
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe_timeout(&d->wb_ring, &cqe, &ts) == 0)
			wb_complete(d, cqe);
	}
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
		allm_err_set(err, r, "disk KV write-behind failed: %s", strerror(-r));
		return r;
	}
	if (ret_seconds)
		*ret_seconds = allm_now() - t0;
	return 0;
}
