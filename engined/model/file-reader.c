/* Bulk file reads with io_uring and a pread() fallback; see file-reader.h. */
#include "file-reader.h"

#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* One queued range. */
struct fr_range {
	int fd;
	uint64_t offset; /* file offset of the first byte */
	uint64_t len; /* bytes, > 0 */
	uint8_t *dst;
	const char *path; /* borrowed, for messages; may be NULL */
};

struct allm_fr {
	unsigned depth; /* most chunks in flight */
	size_t chunk; /* bytes per chunk, multiple of 4 KiB */
	struct fr_range *ranges;
	size_t n_ranges;
	size_t cap_ranges;
	uint64_t total; /* sum of the queued lengths, for progress */
	bool used_uring; /* how the last run read */
	bool force_pread; /* allm_fr_force_pread */
};

/* One chunk being read: what is left of it. */
struct fr_chunk {
	const struct fr_range *r;
	uint64_t offset; /* next file offset to read */
	uint8_t *dst; /* where that byte goes */
	size_t left; /* bytes still to read */
	size_t size; /* bytes of the whole chunk, credited to progress when done */
};

/* Walks the queued ranges chunk by chunk. */
struct fr_cursor {
	size_t range; /* index of the range the next chunk comes from */
	uint64_t pos; /* bytes of that range already handed out */
};

/* Written by every run, read by the program for its log line; relaxed is enough:
 * they carry no data another thread depends on. */
static atomic_bool last_used_uring;
static atomic_int last_fallback_reason;

int allm_fr_create(unsigned queue_depth, size_t chunk_size, struct allm_fr **ret,
		   struct allm_err *err)
{
	struct allm_fr *fr;

	if (queue_depth == 0)
		queue_depth = ALLM_FR_DEFAULT_DEPTH;
	if (queue_depth > 4096)
		return allm_err_set(err, -EINVAL, "file reader: queue depth %u above 4096",
				    queue_depth);
	if (chunk_size == 0)
		chunk_size = ALLM_FR_DEFAULT_CHUNK;
	chunk_size = ALLM_MIN(chunk_size, ALLM_FR_MAX_CHUNK);
	/* Page multiples keep every chunk but a range's first and last page aligned,
	 * which is what the page cache copies fastest. */
	chunk_size = ALLM_MAX(chunk_size & ~(size_t)4095, (size_t)4096);

	fr = allm_calloc(1, sizeof(*fr));
	if (!fr)
		return allm_err_set(err, -ENOMEM, "file reader: out of memory");
	fr->depth = queue_depth;
	fr->chunk = chunk_size;
	*ret = fr;
	return 0;
}

void allm_fr_destroy(struct allm_fr *fr)
{
	if (!fr)
		return;
	allm_free(fr->ranges);
	allm_free(fr);
}

int allm_fr_add(struct allm_fr *fr, int fd, uint64_t offset, uint64_t len, void *dst,
		const char *path, struct allm_err *err)
{
	uint64_t end;

	if (len == 0)
		return 0;
	if (fd < 0 || !dst)
		return allm_err_set(err, -EINVAL, "file reader: bad fd or NULL destination for %s",
				    path ? path : "(file)");
	/* pread and io_uring take signed 64-bit offsets. */
	if (__builtin_add_overflow(offset, len, &end) || end > (uint64_t)INT64_MAX)
		return allm_err_set(err, -EINVAL, "file reader: range %llu+%llu of %s overflows",
				    (unsigned long long)offset, (unsigned long long)len,
				    path ? path : "(file)");
	if (fr->n_ranges == fr->cap_ranges) {
		size_t cap = fr->cap_ranges ? fr->cap_ranges * 2 : 64, bytes;
		struct fr_range *nr;

		if (!allm_mul_size(cap, sizeof(*nr), &bytes))
			return allm_err_set(err, -ENOMEM, "file reader: too many ranges");
		nr = allm_realloc(fr->ranges, bytes);
		if (!nr)
			return allm_err_set(err, -ENOMEM, "file reader: out of memory");
		fr->ranges = nr;
		fr->cap_ranges = cap;
	}
	fr->ranges[fr->n_ranges++] = (struct fr_range){
		.fd = fd, .offset = offset, .len = len, .dst = dst, .path = path,
	};
	fr->total += len;
	return 0;
}

/* Hands out the next chunk; false when every range has been handed out. */
static bool fr_next_chunk(const struct allm_fr *fr, struct fr_cursor *cur,
			  struct fr_chunk *c)
{
	const struct fr_range *r;
	uint64_t n;

	if (cur->range >= fr->n_ranges)
		return false;
	r = &fr->ranges[cur->range];
	n = ALLM_MIN((uint64_t)fr->chunk, r->len - cur->pos);
	*c = (struct fr_chunk){
		.r = r, .offset = r->offset + cur->pos, .dst = r->dst + cur->pos,
		.left = (size_t)n, .size = (size_t)n,
	};
	cur->pos += n;
	if (cur->pos == r->len) {
		cur->range++;
		cur->pos = 0;
	}
	return true;
}

static const char *fr_path(const struct fr_chunk *c)
{
	return c->r->path ? c->r->path : "(file)";
}

/* Accounts for a read of res bytes (or -errno) into c. Returns 1 when the chunk is
 * complete, 0 when the rest must be read again, -errno on failure. */
static int fr_chunk_advance(struct fr_chunk *c, ssize_t res, struct allm_err *err)
{
	if (res == -EAGAIN || res == -EINTR)
		return 0;
	if (res < 0)
		return allm_err_set(err, (int)res, "read of %s at offset %llu failed: %s",
				    fr_path(c), (unsigned long long)c->offset, strerror((int)-res));
	if (res == 0)
		/* The header said the data is there; the file shrank since it was opened. */
		return allm_err_set(err, -EIO, "unexpected end of file reading %s at offset %llu",
				    fr_path(c), (unsigned long long)c->offset);
	c->offset += (uint64_t)res;
	c->dst += res;
	c->left -= (size_t)res;
	return c->left == 0;
}

static int fr_run_pread(struct allm_fr *fr, allm_fr_progress_fn progress, void *user,
			struct allm_err *err)
{
	struct fr_cursor cur = { 0 };
	struct fr_chunk c;
	uint64_t done = 0;

	while (fr_next_chunk(fr, &cur, &c)) {
		int r;

		do {
			ssize_t n = pread(c.r->fd, c.dst, c.left, (off_t)c.offset);

			r = fr_chunk_advance(&c, n < 0 ? -errno : n, err);
		} while (r == 0);
		if (r < 0)
			return r;
		done += c.size;
		if (progress)
			progress(user, done, fr->total);
	}
	return 0;
}

static void fr_prep(struct io_uring_sqe *sqe, struct fr_chunk *c)
{
	/* left <= chunk <= ALLM_FR_MAX_CHUNK fits the 32-bit length. */
	io_uring_prep_read(sqe, c->r->fd, c->dst, (unsigned)c->left, c->offset);
	io_uring_sqe_set_data(sqe, c);
}

/* Runs the queue through ring. Each of the depth chunk slots is either on the free
 * list or being read; a completion carries its slot as user data, and queued +
 * inflight never exceeds depth, so neither the submission nor the completion queue
 * can overflow. Once a read fails, nothing new is queued, but every
 * read already submitted is waited for: they write into the caller's memory, which
 * may be freed as soon as we return. */
static int fr_run_uring(struct allm_fr *fr, struct io_uring *ring, unsigned depth,
			allm_fr_progress_fn progress, void *user, struct allm_err *err)
{
	struct fr_cursor cur = { 0 };
	struct fr_chunk *chunks = NULL, **free_slots = NULL;
	unsigned n_free = depth, queued = 0, inflight = 0;
	uint64_t done = 0;
	int ret = 0;

	chunks = allm_calloc(depth, sizeof(*chunks));
	free_slots = allm_calloc(depth, sizeof(*free_slots));
	if (!chunks || !free_slots) {
		ret = allm_err_set(err, -ENOMEM, "file reader: out of memory");
		goto out;
	}
	for (unsigned i = 0; i < depth; i++)
		free_slots[i] = &chunks[i];

	for (;;) {
		struct io_uring_cqe *cqe;
		struct fr_chunk *c;
		int r;

		/* Fill every free slot with the next chunk; the ring has depth entries, so
		 * get_sqe cannot run out while a slot is free. */
		while (ret == 0 && n_free > 0) {
			struct io_uring_sqe *sqe;

			c = free_slots[n_free - 1];
			if (!fr_next_chunk(fr, &cur, c))
				break;
			sqe = io_uring_get_sqe(ring);
			ALLM_ASSERT(sqe);
			fr_prep(sqe, c);
			n_free--;
			queued++;
		}
		if (queued > 0) {
			r = io_uring_submit(ring);
			if (r > 0) {
				queued -= (unsigned)r;
				inflight += (unsigned)r;
			} else if (r != -EINTR && r != -EAGAIN && r != -EBUSY && ret == 0) {
				/* Queued entries stay unsubmitted; only inflight ones are drained. */
				ret = allm_err_set(err, r < 0 ? r : -EIO, "io_uring_submit: %s",
						   strerror(r < 0 ? -r : EIO));
			}
		}
		if (inflight == 0) {
			if (ret != 0 || (queued == 0 && cur.range >= fr->n_ranges))
				break;
			continue; /* submit was interrupted before anything went out: retry */
		}

		r = io_uring_wait_cqe(ring, &cqe);
		if (r == -EINTR || r == -EAGAIN)
			continue;
		if (r < 0) {
			/* Only -EINTR/-EAGAIN are expected from a valid ring; give up rather
			 * than spin. */
			ret = allm_err_set(err, r, "io_uring_wait_cqe: %s", strerror(-r));
			inflight = 0;
			break;
		}
		c = io_uring_cqe_get_data(cqe);
		r = fr_chunk_advance(c, cqe->res, ret == 0 ? err : NULL);
		io_uring_cqe_seen(ring, cqe);
		inflight--;
		if (r == 0 && ret == 0) {
			/* Short read or -EAGAIN: ask again for the rest, same slot. */
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

			ALLM_ASSERT(sqe);
			fr_prep(sqe, c);
			queued++;
			continue;
		}
		if (r < 0 && ret == 0)
			ret = r;
		free_slots[n_free++] = c;
		if (r == 1) {
			done += c->size;
			if (progress && ret == 0)
				progress(user, done, fr->total);
		}
	}
out:
	allm_free(chunks);
	allm_free(free_slots);
	return ret;
}

void allm_fr_force_pread(struct allm_fr *fr)
{
	fr->force_pread = true;
}

int allm_fr_run(struct allm_fr *fr, allm_fr_progress_fn progress, void *user,
		struct allm_err *err)
{
	struct io_uring ring;
	unsigned depth = 1;
	int ret, reason = 0;

	fr->used_uring = false;
	if (fr->n_ranges == 0) {
		ret = 0;
		goto out;
	}
	if (fr->force_pread) {
		reason = -ENOTSUP;
	} else {
		/* Never more entries than chunks: a small load needs no big ring. */
		uint64_t n_chunks = 0;

		for (size_t i = 0; i < fr->n_ranges && n_chunks < fr->depth; i++)
			n_chunks += (fr->ranges[i].len + fr->chunk - 1) / fr->chunk;
		depth = (unsigned)ALLM_MIN(n_chunks, (uint64_t)fr->depth);
		reason = io_uring_queue_init(depth, &ring, 0);
	}
	if (reason == 0) {
		fr->used_uring = true;
		ret = fr_run_uring(fr, &ring, depth, progress, user, err);
		io_uring_queue_exit(&ring);
	} else {
		ret = fr_run_pread(fr, progress, user, err);
	}
	atomic_store_explicit(&last_used_uring, fr->used_uring, memory_order_relaxed);
	atomic_store_explicit(&last_fallback_reason, reason, memory_order_relaxed);
out:
	fr->n_ranges = 0;
	fr->total = 0;
	return ret;
}

bool allm_fr_used_uring(const struct allm_fr *fr)
{
	return fr->used_uring;
}

bool allm_fr_last_used_uring(void)
{
	return atomic_load_explicit(&last_used_uring, memory_order_relaxed);
}

int allm_fr_last_fallback_reason(void)
{
	return atomic_load_explicit(&last_fallback_reason, memory_order_relaxed);
}
