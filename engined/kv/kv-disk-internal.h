/* Inside the disk tier (kv-disk.c: the file and the I/O a caller waits for;
 * kv-disk-bg.c: the I/O in the background, writes behind and reads ahead). Not
 * for use outside engined/kv. */
#ifndef ALLM_KV_DISK_INTERNAL_H
#define ALLM_KV_DISK_INTERNAL_H

#include "kv-disk.h"

#include <liburing.h>

/* I/Os in flight at once, and the largest single I/O: a long run is split so
 * that the device sees several requests at a time. */
#define DISK_QD 64
#define DISK_MAX_IO (1u << 20)
/* O_DIRECT wants addresses, lengths and offsets aligned to the device's logical
 * block; 4 KiB covers every device in common use. */
#define DISK_ALIGN 4096
/* Write-behind: host memory its stage may take, unless that holds fewer than
 * WB_MIN_SLOTS blocks (the blocks of a 7B-13B model on a GPU are 8-13 MB: a
 * stage of 4-8 of them would take no victim whole), and its ring's depth. */
#define WB_BYTES ((size_t)64 << 20)
#define WB_MIN_SLOTS 32
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
	/* Test and benchmark hook (ALLM_KV_DISK_THROTTLE_MBPS, read at open): bytes
	 * per second every transfer is held to (no background I/O then); 0 = off */
	double throttle_bps;
	/* Test hook: writes behind stay queued, not submitted, until something waits
	 * for one (a drain), so a test sees them in flight however fast the disk. */
	bool hold_writes;
	/* Test hook: the writes-behind ring refuses every submission (-EIO), as a
	 * ring that failed would. */
	bool fail_wb_submit;
	/* Test hook: the reads' ring fails (-EIO) as the kernel takes a
	 * submission, so reads are in the kernel when the pool gives up on it. */
	bool fail_rd_after;
	/* Writes behind (allm_kv_disk_write_behind): blocks copied into stage
	 * slots and written from there on a second ring; kv-disk-bg.c. */
	struct io_uring wb_ring;
	bool have_wb; /* background I/O is on: the stage, the rings, the reaper */
	bool wb_failed; /* wb_ring failed: no more writes behind, none waited for */
	char *stage_raw, *stage; /* wb_slots slots of block_bytes, DISK_ALIGN-aligned */
	struct allm_kv_disk_host host; /* zero: the stage is allm_malloc'd, filled by memcpy */
	int32_t wb_slots, n_free_slots, in_flight;
	int32_t stage_blocks; /* wb_slots; of a virtual pool, what a real one would have */
	int32_t *free_slots; /* stack of free slot numbers */
	int32_t *slot_block; /* [wb_slots] disk block each in-flight slot writes */
	/* [file_blocks] 1 + the slot whose write of the block is in flight, 0 for
	 * none: at most one is (a block is drained before it is staged again), and
	 * until it lands the slot holds the block's newest contents */
	int32_t *staged;
	uint8_t *bad; /* [file_blocks] its last write-behind failed */
	int bad_errno; /* why, for the error of the read that finds it */
	/* Reads ahead (allm_kv_disk_read_start) on a third ring, and the reaper
	 * thread that takes both rings' completions; kv-disk-bg.c. NULL without
	 * background I/O. */
	struct kvd_bg *bg;
};


/* One I/O: len bytes at file offset off to or from buf. */
struct disk_op {
	char *buf;
	uint64_t off;
	size_t len;
};

/* A growable list of I/Os. */
struct kvd_ops {
	struct disk_op *v;
	int64_t n, cap;
};

/* kv-disk.c */
/* -EINVAL with err unless every disk id is inside the file. */
int kvd_check_ids(const struct allm_kv_disk *d, const int32_t *disk_ids, int32_t n, struct allm_err *err);
/* Appends to ops the I/Os that move blocks mem_ids[i] of base to or from disk
 * blocks disk_ids[i]: runs of consecutive blocks coalesced, split at
 * DISK_MAX_IO. A read skips the blocks it takes from the stage (after
 * kvd_copy_staged) and refuses a block whose write behind failed (-EIO). The
 * runs, or -errno with err (ops then holds part of them). */
int kvd_plan(struct allm_kv_disk *d, bool write, void *base, const int32_t *mem_ids, const int32_t *disk_ids,
	     int32_t n, struct kvd_ops *ops, struct allm_err *err);
/* op with pread/pwrite, or the injected fault standing in for it. */
int kvd_sync_op(struct allm_kv_disk *d, bool write, const struct disk_op *op);
/* Prepares op as I/O number idx of a ring, or the injected fault standing in
 * for its completion (user_data: see SHORT_BIT). */
void kvd_prep_op(struct allm_kv_disk *d, struct io_uring_sqe *sqe, bool write, const struct disk_op *op,
		 uint64_t idx);

/* The outcome of ring I/O op from its completion (user_data data, res): 0 or
 * -errno, the injected fault included; a short transfer gets its rest done
 * synchronously (*ret_rest, may be NULL, says so). */
int kvd_complete_op(struct allm_kv_disk *d, bool write, const struct disk_op *op, uint64_t data, int res,
		    bool *ret_rest);

/* kv-disk-bg.c */
/* Slots of the stage of a pool of file_blocks blocks of block_bytes. */
int32_t kvd_stage_slots(int64_t file_blocks, size_t block_bytes);
/* Background I/O: the stage, the writes-behind and reads-ahead rings and their
 * reaper. -errno (then kvd_bg_fini: every I/O waits for the disk). */
int kvd_bg_init(struct allm_kv_disk *d);
/* Waits for the background I/O in flight, stops the reaper, frees. */
void kvd_bg_fini(struct allm_kv_disk *d);
/* Waits until no write behind of blocks ids[0..n) (ids NULL: of any block) is
 * in flight. 0 or -errno. */
int kvd_wb_drain(struct allm_kv_disk *d, const int32_t *ids, int32_t n);
/* Copies the blocks of a read whose writes behind are still in flight from the
 * stage (completing the writes that have landed first); their count, the time
 * in *ret_seconds. */
int32_t kvd_copy_staged(struct allm_kv_disk *d, void *base, const int32_t *mem_ids,
			const int32_t *disk_ids, int32_t n, double *ret_seconds);
/* Whether a read of blk takes it from the stage (after kvd_copy_staged). */
bool kvd_from_stage(const struct allm_kv_disk *d, int32_t blk);

#endif
