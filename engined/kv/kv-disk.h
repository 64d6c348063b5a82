/* The third KV tier (DESIGN §5): a pool of blocks in one file on local disk,
 * read and written with io_uring (many I/Os in flight, runs of consecutive blocks
 * coalesced), O_DIRECT where the filesystem and the block size allow. The file
 * is opened O_TMPFILE, so it has no name and nothing is left behind after any
 * exit, kill -9 included.
 *
 * A write may go behind (allm_kv_disk_write_behind): its blocks are copied into
 * a stage in host memory and written from there while the caller goes on, so a
 * swap-out costs the step a copy, not the disk's latency, and a read that comes
 * before the write has landed copies from the stage. A read may go ahead
 * (allm_kv_disk_read_start): its I/O runs while the caller computes. Every other
 * call waits for the I/O it submits, after the writes behind in flight. */
#ifndef ALLM_KV_DISK_H
#define ALLM_KV_DISK_H

#include "block-pool.h"

#include <stdbool.h>
#include <stdint.h>

struct allm_kv_disk;

/* Test and benchmark hooks of the KV tiers. The program reads them from the
 * environment once (allm_kv_env_read) and hands them down (allm_kv_set_env,
 * allm_kv_disk_open); library code never calls getenv. Zero: none. */
struct allm_kv_env {
	bool no_io_uring; /* ALLM_NO_IO_URING (set, not "0"): pread/pwrite, no background I/O */
	bool staged; /* ALLM_KV_STAGED=1: the CPU backend's disk I/O goes through the
		      * staging a GPU needs (a GPU's path, bit for bit, where there is none) */
	double throttle_mbps; /* ALLM_KV_DISK_THROTTLE_MBPS: a disk of this many MB/s */
	const char *fault; /* ALLM_KV_DISK_FAULT: injected disk failures (kv-disk.c) */
	bool prefix_collide; /* ALLM_PREFIX_TEST_COLLIDE=1: every block key collides */
};

/* The hooks above from this process's environment (programs and tests call it). */
void allm_kv_env_read(struct allm_kv_env *ret);

/* A disk transfer's direction (calibration, the disk predictor's two rows). */
enum allm_disk_dir {
	ALLM_DISK_WRITE = 0, /* memory -> disk (a swap out) */
	ALLM_DISK_READ = 1, /* disk -> memory (a swap in, a restore) */
};

/* Opens a pool of n_blocks blocks of block_bytes in directory dir. note gets one
 * line on how (O_DIRECT or buffered and why, O_TMPFILE or a name unlinked at
 * once). 0 or -errno with err naming the directory and the problem. */
int allm_kv_disk_open(const char *dir, int32_t n_blocks, size_t block_bytes, const struct allm_kv_env *env,
		      struct allm_kv_disk **ret, char *note, size_t note_len, struct allm_err *err);
/* A pool with no file, for a simulated device (kernels/sim): the same ids and
 * owners, I/O only counts its runs (the caller charges the simulated time). */
int allm_kv_disk_open_virtual(int32_t n_blocks, size_t block_bytes, struct allm_kv_disk **ret,
			      struct allm_err *err);
/* Closes the file (its blocks are gone) and frees. Accepts NULL. */
void allm_kv_disk_close(struct allm_kv_disk *d);

/* The pool's bookkeeping (ids, owners, resize deficit). */
struct allm_block_pool *allm_kv_disk_pool(struct allm_kv_disk *d);
/* Resizes the pool (the file grows as needed). 0 or -errno. */
int allm_kv_disk_resize(struct allm_kv_disk *d, int32_t n, struct allm_err *err);

/* What one allm_kv_disk_io took. */
struct allm_kv_disk_io_stat {
	double seconds; /* wall time of the call */
	int32_t runs; /* coalesced runs that went to or came from the file */
	int32_t staged; /* blocks a read copied from the stage (their write behind in flight) */
	double staged_seconds; /* of seconds, those copies */
	double waited_seconds; /* of seconds, the wait for writes behind still in flight */
	/* the file's I/O alone (what the disk model learns): of seconds, the rest;
	 * of a read ahead, the disk's busy time while it ran (its share by bytes
	 * when other I/O ran beside it), whatever the caller did meanwhile */
	double io_seconds;
	bool io_shared; /* a read ahead that shared the disk with other I/O: io_seconds is a share */
};

/* Writes blocks mem_ids[i] of the memory at base (block_bytes apart) to disk
 * blocks disk_ids[i], or reads them back (write false). Waits for all of it; a
 * read of a block whose write behind is still in flight copies it from the
 * stage, and what goes to the file first waits for every write behind in
 * flight. st (may be NULL) gets the times and runs. 0, or
 * -errno with err (EIO, ENOSPC, a short transfer) after which the destination's
 * contents are undefined. */
int allm_kv_disk_io(struct allm_kv_disk *d, bool write, void *base, const int32_t *mem_ids,
		    const int32_t *disk_ids, int32_t n, struct allm_kv_disk_io_stat *st,
		    struct allm_err *err);

/* Reads ahead: starts reading disk blocks disk_ids[i] into blocks mem_ids[i] of
 * base and returns a ticket at once; those blocks are the kernel's until
 * allm_kv_disk_read_wait(ticket), which every started read needs. As
 * allm_kv_disk_io, blocks whose writes behind are in flight are copied from the
 * stage; the others have none in flight, and their I/O does not wait for the
 * writes of other blocks (it shares the disk with them). -EAGAIN (nothing
 * started, no err) when this pool cannot read ahead (no io_uring, a virtual
 * pool): use allm_kv_disk_io. 0 or -errno with err (-EIO: a block whose write
 * behind failed). */
int allm_kv_disk_read_start(struct allm_kv_disk *d, void *base, const int32_t *mem_ids,
			    const int32_t *disk_ids, int32_t n, int32_t *ret_ticket, struct allm_err *err);
/* Waits for a read ahead; st (may be NULL): seconds is what both calls took of
 * the caller's time, io_seconds the read's own. 0 or -errno with err (EIO, a
 * short read), after which the destination's contents are undefined. */
int allm_kv_disk_read_wait(struct allm_kv_disk *d, int32_t ticket, struct allm_kv_disk_io_stat *st,
			   struct allm_err *err);

/* Copies blocks mem_ids[i] of base (with allm_kv_disk_set_host's fill: of the
 * caller's memory, base unused) into the stage and queues their writes to
 * disk_ids[i]; returns without waiting for them. -EAGAIN (nothing done, no err)
 * when there is no write-behind here (no io_uring, a virtual pool) or its stage
 * lacks room: write with allm_kv_disk_io instead. A write that fails later makes
 * the read of that block fail with -EIO (err names the write's errno). *ret_seconds is what
 * the caller waited. 0 or -errno with err. */
int allm_kv_disk_write_behind(struct allm_kv_disk *d, const void *base, const int32_t *mem_ids,
			      const int32_t *disk_ids, int32_t n, double *ret_seconds, struct allm_err *err);
/* For a caller whose blocks are not in host memory (a GPU's): the stage of
 * writes behind is allocated with alloc (pinned memory, which the device copies
 * into at full speed) and a write behind fills a slot with fill(ctx, slot,
 * mem_id) instead of copying from base (its blocks' bytes are in the slot when
 * it returns; 0 or -errno, after which no write goes behind any more and those
 * in flight are read back as failed). */
struct allm_kv_disk_host {
	int (*alloc)(void *ctx, size_t bytes, void **ret);
	void (*free)(void *ctx, void *p);
	int (*fill)(void *ctx, void *slot, int32_t mem_id);
	void *ctx;
};
/* Takes h for pool d, right after allm_kv_disk_open (no I/O yet): the stage
 * moves into memory from h->alloc. 0, or -errno with err when that allocation
 * fails: the pool then has no background I/O (every I/O waits), and works. */
int allm_kv_disk_set_host(struct allm_kv_disk *d, const struct allm_kv_disk_host *h, struct allm_err *err);

/* Blocks the stage of writes behind holds (of a virtual pool: those a real one
 * of its size would hold). */
int32_t allm_kv_disk_stage_blocks(const struct allm_kv_disk *d);
/* Blocks a write behind could take now (0 without write-behind). */
int32_t allm_kv_disk_behind_free(struct allm_kv_disk *d);
/* Waits for the writes behind to blocks ids[0..n) (ids NULL: all of them), so
 * they can change hands. 0 or -errno. */
int allm_kv_disk_drain(struct allm_kv_disk *d, const int32_t *ids, int32_t n);
/* I/Os that pools of this process were closed with still in the kernel, after
 * waiting for them (a failed ring: normally 0). Their memory was kept. */
int64_t allm_kv_disk_abandoned_ios(void);

#endif
