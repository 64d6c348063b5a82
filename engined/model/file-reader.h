/* Bulk reads of byte ranges of files straight into caller memory, with io_uring.
 *
 * The caller queues (fd, offset, length, destination) ranges with allm_fr_add() and
 * then runs them all with allm_fr_run(). Each range is cut into chunks (8 MiB by
 * default) and up to queue_depth chunks (32 by default) are in flight at once, so a
 * multi-GiB weight file keeps the disk queue full while no bounce buffer is needed:
 * the kernel copies into the destination. Short reads are resubmitted for the rest,
 * -EAGAIN/-EINTR completions are retried.
 *
 * Where io_uring cannot be set up (containers often forbid it: -EPERM, -ENOSYS) the
 * same chunks are read with a pread() loop instead; the program can ask which path
 * the last run took to log it once. allm_fr_force_pread() forces the pread path
 * (ALLM_NO_IO_URING=1, which the program reads and passes down: the model loader's
 * allm_model_load_opts.no_io_uring; tests compare the two). */
#ifndef ALLM_FILE_READER_H
#define ALLM_FILE_READER_H

#include "common.h"

#define ALLM_FR_DEFAULT_DEPTH 32
#define ALLM_FR_DEFAULT_CHUNK ((size_t)8 << 20)
/* io_uring read lengths are 32-bit; keep a chunk well below that. */
#define ALLM_FR_MAX_CHUNK ((size_t)1 << 30)

/* Same shape as allm_progress_fn in safetensors.h: bytes done so far of total. */
typedef void (*allm_fr_progress_fn)(void *user, uint64_t done, uint64_t total);

struct allm_fr;

/* Creates an empty reader. queue_depth 0 and chunk_size 0 pick the defaults;
 * chunk_size is rounded down to a multiple of 4 KiB (at least 4 KiB) and capped at
 * ALLM_FR_MAX_CHUNK. Returns 0 and a reader the caller frees with allm_fr_destroy(),
 * or -EINVAL / -ENOMEM. */
int allm_fr_create(unsigned queue_depth, size_t chunk_size, struct allm_fr **ret,
		   struct allm_err *err);
/* Reads with pread from now on, no io_uring. */
void allm_fr_force_pread(struct allm_fr *fr);
/* Frees the reader (NULL allowed). Does not close any fd given to allm_fr_add(). */
void allm_fr_destroy(struct allm_fr *fr);

/* Queues a read of len bytes at offset of fd into dst. fd and dst must stay valid
 * until allm_fr_run() returns; path is only used in error messages and is borrowed
 * for as long (it may be NULL). len 0 is a no-op. Returns 0, -EINVAL (bad fd, NULL
 * dst, offset + len overflows) or -ENOMEM. */
int allm_fr_add(struct allm_fr *fr, int fd, uint64_t offset, uint64_t len, void *dst,
		const char *path, struct allm_err *err);

/* Reads everything queued since the last run; progress (may be NULL) is called after
 * each completed chunk with the bytes done so far and the total. Returns 0, or
 * -errno of the first failed read with err naming the file and offset (-EIO when a
 * file ends before the range does). On failure the destinations hold partial data,
 * but no read is left in flight: the caller may free them at once. The queue is
 * emptied either way. */
int allm_fr_run(struct allm_fr *fr, allm_fr_progress_fn progress, void *user,
		struct allm_err *err);

/* Whether the last allm_fr_run() of this reader used io_uring (false before any). */
bool allm_fr_used_uring(const struct allm_fr *fr);

/* Process-wide view of the last allm_fr_run() that finished, for one log line:
 * true when it read with io_uring. */
bool allm_fr_last_used_uring(void);
/* Why that run fell back to pread: -errno from io_uring_queue_init(), -ENOTSUP when
 * allm_fr_force_pread (ALLM_NO_IO_URING) forced it, 0 when it used io_uring (or no run happened yet). */
int allm_fr_last_fallback_reason(void);

#endif
