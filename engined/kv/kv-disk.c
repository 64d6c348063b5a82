#include "kv-disk-internal.h"

#include "safe-file.h"

#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct allm_block_pool *allm_kv_disk_pool(struct allm_kv_disk *d)
{
	return &d->pool;
}

/* "eio-write=3", "enospc-write=1", "eio-read=2", "short-read=1" (that I/O only;
 * "eio-read=2+": that one and every later one), "no-tmpfile", "no-direct",
 * "hold-writes", "fail-wb-submit", "fail-rd-after": see struct allm_kv_disk. */
static void parse_fault(struct allm_kv_disk *d, const char *f, bool *no_tmpfile, bool *no_direct)
{
	char kind[32];
	long long at = 0;
	if (!f || !*f)
		return;
	*no_tmpfile = strstr(f, "no-tmpfile") != NULL;
	*no_direct = strstr(f, "no-direct") != NULL;
	d->hold_writes = strstr(f, "hold-writes") != NULL;
	d->fail_wb_submit = strstr(f, "fail-wb-submit") != NULL;
	d->fail_rd_after = strstr(f, "fail-rd-after") != NULL;
	if (sscanf(f, "%31[a-z-]=%lld", kind, &at) != 2 || at < 1)
		return;
	d->fault_at = at;
	d->fault_on = strchr(f, '+') != NULL;
	d->fault_write = strstr(kind, "write") != NULL;
	d->fault_short = !strncmp(kind, "short", 5);
	d->fault_errno = !strncmp(kind, "enospc", 6) ? ENOSPC : EIO;
}


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

int kvd_sync_op(struct allm_kv_disk *d, bool write, const struct disk_op *op)
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

void kvd_prep_op(struct allm_kv_disk *d, struct io_uring_sqe *sqe, bool write, const struct disk_op *op,
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

void allm_kv_env_read(struct allm_kv_env *ret)
{
	const char *u = getenv("ALLM_NO_IO_URING"), *st = getenv("ALLM_KV_STAGED");
	const char *th = getenv("ALLM_KV_DISK_THROTTLE_MBPS"), *c = getenv("ALLM_PREFIX_TEST_COLLIDE");
	memset(ret, 0, sizeof(*ret));
	ret->no_io_uring = u && *u && strcmp(u, "0");
	ret->staged = st && !strcmp(st, "1");
	ret->throttle_mbps = th ? strtod(th, NULL) : 0;
	if (!(ret->throttle_mbps > 0))
		ret->throttle_mbps = 0;
	ret->fault = getenv("ALLM_KV_DISK_FAULT");
	ret->prefix_collide = c && !strcmp(c, "1");
}

int allm_kv_disk_open(const char *dir, int32_t n_blocks, size_t block_bytes, const struct allm_kv_env *env,
		      struct allm_kv_disk **ret, char *note, size_t note_len, struct allm_err *err)
{
	static const struct allm_kv_env none;
	if (!env)
		env = &none;
	struct allm_kv_disk *d = allm_calloc(1, sizeof(*d));
	bool no_tmpfile = false, no_direct = false, named = false, direct = false;
	int r, dfd = -1;
	note[0] = 0;
	if (!d)
		return allm_err_set(err, -ENOMEM, "out of memory");
	d->fd = -1;
	d->block_bytes = block_bytes;
	parse_fault(d, env->fault, &no_tmpfile, &no_direct);
	if (n_blocks < 1 || block_bytes == 0) {
		r = allm_err_set(err, -EINVAL, "the disk KV pool needs at least one block");
		goto fail;
	}
	/* the file is made relative to the directory opened here, never by a second
	 * lookup of its path (safe-file.h); a symlink to a directory is followed, as
	 * the user named it, since the file has no name there anyway */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		r = allm_err_set(err, errno == ENOTDIR ? -ENOTDIR : -errno, "disk swap directory %s: %s", dir,
				 errno == ENOTDIR ? "not a directory" : strerror(errno));
		goto fail;
	}
	const char *why = "";
	if (block_bytes % DISK_ALIGN)
		why = "a KV block is not a multiple of 4 KiB";
	else if (no_direct)
		why = "disabled";
	else {
		d->fd = allm_file_unnamed(dfd, O_DIRECT, no_tmpfile, &named);
		direct = d->fd >= 0;
		if (!direct)
			why = "the filesystem refuses it";
	}
	if (d->fd < 0)
		d->fd = allm_file_unnamed(dfd, 0, no_tmpfile, &named);
	if (d->fd < 0) {
		r = allm_err_set(err, d->fd, "cannot create the disk KV file in %s: %s", dir,
				 d->fd == -EPERM ? "no O_TMPFILE there, and other users could swap a name in it "
						   "(writable by all, no sticky bit)"
						 : strerror(-d->fd));
		goto fail;
	}
	close(dfd);
	dfd = -1;
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
	/* without io_uring (ALLM_NO_IO_URING, or the kernel's -errno: -EPERM
	 * where it is disabled) I/O is pread/pwrite; the note says why */
	int no_ring = env->no_io_uring ? 0 : io_uring_queue_init(DISK_QD, &d->ring, 0);
	d->have_ring = !env->no_io_uring && no_ring == 0;
	/* Test and benchmark hook: a disk of this many MB/s (bench/prefix-restore.sh
	 * runs restores against 200, 50 and 10 MB/s disks). Every transfer waits
	 * its bytes' time at that rate, so there is no I/O behind or ahead. */
	d->throttle_bps = env->throttle_mbps * 1e6;
	int no_bg = 0;
	if (d->have_ring && (d->throttle_bps > 0 || (no_bg = kvd_bg_init(d))))
		kvd_bg_fini(d); /* without its memory, rings or thread, I/O waits for the disk */
	char how[160], io[120];
	if (direct)
		snprintf(how, sizeof(how), "O_DIRECT");
	else
		snprintf(how, sizeof(how), "buffered I/O (O_DIRECT: %s)", why);
	if (d->have_wb)
		snprintf(io, sizeof(io), "io_uring, write-behind, read-ahead");
	else if (d->have_ring)
		snprintf(io, sizeof(io), "io_uring%s%s%s", no_bg ? ", no write-behind (" : "",
			 no_bg ? strerror(-no_bg) : "", no_bg ? ")" : "");
	else
		snprintf(io, sizeof(io), "pread/pwrite%s%s%s", no_ring ? " (io_uring: " : "",
			 no_ring ? strerror(-no_ring) : "", no_ring ? ")" : "");
	snprintf(note, note_len, "disk KV tier: %d blocks (%.2f GiB) in %s, %s, %s, %s", n_blocks,
		 (double)n_blocks * block_bytes / 1073741824.0, dir, how,
		 named ? "no O_TMPFILE here: a name unlinked at once" : "O_TMPFILE", io);
	*ret = d;
	return 0;
fail:
	if (dfd >= 0)
		close(dfd);
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
	d->stage_blocks = kvd_stage_slots(n_blocks, block_bytes);
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
	kvd_bg_fini(d); /* waits: the kernel reads the stage until each write completes */
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
			kvd_prep_op(d, sqe, write, &ops[next], (uint64_t)next);
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
		int res = cqe->res;
		io_uring_cqe_seen(&d->ring, cqe);
		inflight--;
		int k = kvd_complete_op(d, write, &ops[data & (SHORT_BIT - 1)], data, res, NULL);
		if (k && !rc)
			rc = k;
	}
	return (int)rc;
}

int kvd_complete_op(struct allm_kv_disk *d, bool write, const struct disk_op *op, uint64_t data, int res,
		    bool *ret_rest)
{
	int injected = (int)(data >> 40);
	if (ret_rest)
		*ret_rest = false;
	if (injected)
		return -injected;
	if (res < 0)
		return res;
	if (data & SHORT_BIT)
		return -EIO;
	if ((size_t)res >= op->len)
		return 0;
	if (ret_rest)
		*ret_rest = true;
	struct disk_op rest = {op->buf + res, op->off + (uint64_t)res, op->len - (size_t)res};
	return kvd_sync_op(d, write, &rest);
}

int kvd_check_ids(const struct allm_kv_disk *d, const int32_t *disk_ids, int32_t n, struct allm_err *err)
{
	for (int32_t i = 0; i < n; i++)
		if (disk_ids[i] < 0 || disk_ids[i] >= d->file_blocks)
			return allm_err_set(err, -EINVAL, "disk block %d outside the file", disk_ids[i]);
	return 0;
}

int kvd_plan(struct allm_kv_disk *d, bool write, void *base, const int32_t *mem_ids, const int32_t *disk_ids,
	     int32_t n, struct kvd_ops *ops, struct allm_err *err)
{
	size_t bb = d->block_bytes, per = ALLM_MAX((size_t)1, DISK_MAX_IO / bb) * bb;
	int32_t runs = 0;
	for (int32_t i = 0; i < n;) {
		if (!write && kvd_from_stage(d, disk_ids[i])) {
			i++;
			continue;
		}
		int32_t j = i;
		for (; j < n && (j == i || (mem_ids[j] == mem_ids[j - 1] + 1 && disk_ids[j] == disk_ids[j - 1] + 1 &&
					    !(!write && kvd_from_stage(d, disk_ids[j])))); j++)
			if (!write && d->bad && d->bad[disk_ids[j]])
				/* EIO, whatever the write's errno: the read is what fails now
				 * (ENOSPC here would read as "no room in the GPU pool"). A
				 * block not taken from the stage has no write in flight, so
				 * its mark cannot change before the read. */
				return allm_err_set(err, -EIO, "disk KV write of block %d failed earlier: %s",
						    disk_ids[j], strerror(d->bad_errno));
		runs++;
		/* a run, split into pieces of at most DISK_MAX_IO (whole blocks) */
		for (size_t off = 0, len = bb * (size_t)(j - i); off < len; off += per) {
			if (ops->n == ops->cap) {
				int64_t cap = ALLM_MAX(64, ops->cap * 2);
				struct disk_op *v = allm_realloc(ops->v, (size_t)cap * sizeof(*v));
				if (!v)
					return allm_err_set(err, -ENOMEM, "out of memory");
				ops->v = v;
				ops->cap = cap;
			}
			ops->v[ops->n++] = (struct disk_op){(char *)base + (size_t)mem_ids[i] * bb + off,
							    (uint64_t)disk_ids[i] * bb + off, ALLM_MIN(per, len - off)};
		}
		i = j;
	}
	return runs;
}

int allm_kv_disk_io(struct allm_kv_disk *d, bool write, void *base, const int32_t *mem_ids,
		    const int32_t *disk_ids, int32_t n, struct allm_kv_disk_io_stat *st, struct allm_err *err)
{
	struct kvd_ops ops = {0};
	int32_t runs = 0, staged = 0;
	int r;
	double t0 = allm_now(), t_stage = 0, t_wait = 0;
	if ((r = kvd_check_ids(d, disk_ids, n, err)))
		goto out;
	/* a read does not wait for a write in flight of its block: the stage has
	 * the data */
	if (!write)
		staged = kvd_copy_staged(d, base, mem_ids, disk_ids, n, &t_stage);
	if ((r = kvd_plan(d, write, base, mem_ids, disk_ids, n, &ops, err)) < 0)
		goto out;
	runs = r;
	r = 0;
	if (ops.n > 0) {
		/* The writes behind still in flight go first, all of them: a write to
		 * one of these blocks must land before this I/O (a read must see it, a
		 * write must not be overtaken by it), and the disk would serve the
		 * others ahead of this I/O anyway (it did: a read queued behind 15 MB
		 * of writes took 2.3x its time). Waited for apart, this I/O's time is
		 * the disk's for it alone, what the disk model learns. */
		double tw = allm_now();
		r = kvd_wb_drain(d, NULL, 0);
		t_wait = allm_now() - tw;
		if (r) {
			allm_err_set(err, r, "disk KV write-behind failed: %s", strerror(-r));
			goto out;
		}
	}
	if (d->fd < 0) {
		/* virtual: nothing moves */
	} else if (d->have_ring) {
		r = ring_ops(d, write, ops.v, ops.n);
	} else {
		for (int64_t k = 0; k < ops.n && !r; k++)
			r = kvd_sync_op(d, write, &ops.v[k]);
	}
	for (int32_t i = 0; write && !r && d->bad && i < n; i++)
		d->bad[disk_ids[i]] = 0;
	if (r)
		allm_err_set(err, r, "disk KV %s failed: %s", write ? "write" : "read", strerror(-r));
	if (!r && d->throttle_bps > 0) {
		/* the throttled disk's time for these bytes, at least */
		double end = t0 + (double)n * (double)d->block_bytes / d->throttle_bps, wait = end - allm_now();
		if (wait > 0) {
			struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
out:
	allm_free(ops.v);
	if (st) {
		st->seconds = allm_now() - t0;
		st->runs = runs;
		st->staged = staged;
		st->staged_seconds = t_stage;
		st->waited_seconds = t_wait;
		st->io_seconds = st->seconds - t_stage - t_wait;
	}
	return r;
}

