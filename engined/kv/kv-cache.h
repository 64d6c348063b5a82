/* The paged KV cache and its block manager: the device ("GPU") pool the model
 * attends over and the host ("CPU") pool preempted requests swap into. One block
 * holds K and V of every layer for block_size tokens, contiguous (DESIGN §5), so a
 * swap of a run of consecutive blocks is one copy. The two pools are separate
 * allocations on every backend: a swap is a real copy, never aliasing. */
#ifndef ALLM_KV_CACHE_H
#define ALLM_KV_CACHE_H

#include "backend.h"
#include "block-pool.h"
#include "kv-disk.h"

/* The tiers a KV block can live in (DESIGN §5, §5b). */
enum allm_kv_tier {
	ALLM_KV_TIER_DEVICE = 0, /* the pool the model attends over */
	ALLM_KV_TIER_HOST = 1, /* the host ("CPU") pool */
	ALLM_KV_TIER_DISK = 2, /* the disk tier, when there is one */
	ALLM_KV_TIER_COUNT = 3,
};

/* "device", "host", "disk". */
const char *allm_kv_tier_name(enum allm_kv_tier t);

struct allm_prefix_cache;
struct kvc_disk_i;

struct allm_kv_cache {
	allm_backend_t *be; /* not owned */
	struct allm_kv_layout lay;
	size_t block_bytes;
	void *dev; /* device memory for gpu.capacity blocks */
	void *host; /* host memory (pinned on CUDA) for cpu.capacity blocks */
	struct allm_block_pool gpu; /* the device ("GPU") pool */
	struct allm_block_pool cpu; /* the host ("CPU") swap pool */
	/* Blocks of host-addressable pools already written once. The CPU backend maps
	 * pools lazily (pre-faulting gigabytes takes seconds), so a block's first use
	 * would pay page faults inside a timed swap; swaps touch fresh destination
	 * blocks first, untimed, so measured costs are those of resident memory, as
	 * with cudaMalloc'd and pinned memory. */
	uint8_t *touched_dev; /* [gpu.capacity], NULL when device memory is not host */
	uint8_t *touched_host; /* [cpu.capacity] */
	uint32_t calib_cursor; /* where the next calibration copy starts */
	void *scrub; /* calibration on host memory: written to empty the L2 caches */
	size_t scrub_len;
	struct allm_kv_disk *disk; /* the disk tier, NULL when off */
	const struct kvc_disk_i *dtier; /* its kind (a file or a simulated device's), NULL when off */
	/* Disk I/O through host memory with the backend's copies: a device that is
	 * not host memory (a GPU, the simulator), or the CPU backend told to
	 * (env.staged, for tests: a GPU's path, bit for bit, where there is none). */
	bool staged;
	struct allm_kv_env env; /* the program's hooks (allm_kv_set_env); zero: none */
	void *stage; /* its host staging for copies (staged) */
	int32_t stage_blocks;
	int32_t *stage_ids; /* [stage_blocks] 0, 1, ...: the stage's blocks, for allm_kv_disk_io */
	struct kvc_ahead *ahead; /* reads ahead through host memory (staged): kv-cache-disk.c */
	int32_t n_ahead, cap_ahead;
	/* their arena: n_ahead_slots blocks, as many as the stage of writes behind
	 * holds (allocated at the first; none on a simulated device), and its free
	 * slots */
	char *ahead_raw, *ahead_mem;
	int32_t *ahead_free;
	int32_t n_ahead_slots, n_ahead_free;
	struct allm_prefix_cache *pc; /* the prefix cache over these pools (not owned), or NULL */
	/* elastic memory (DESIGN §5c): bytes of the one pool the device blocks and
	 * the activation scratch share under --memory-budget; the device pool's
	 * memory holds all of it as blocks and the engine retires what scratch
	 * takes (kv-elastic.h). 0: a static split. */
	size_t elastic_pool;
	/* > 0: the window every layer of the model attends through (set by the
	 * engine from allm_model_passed_window; 0: some layer reads everything). A
	 * sequence gives back the device blocks that lie wholly before the window
	 * of the next position it feeds (allm_seq_pass_window): one block holds K
	 * and V of every layer, so with local and global layers (Gemma 3) no block
	 * is ever passed by all of them and nothing goes back. */
	int32_t window;
};

/* Outcome of one swap: how long the copies took on the device and how many
 * coalesced copies it took. */
struct allm_swap_result {
	double seconds;
	int32_t n_runs;
	uint64_t bytes;
	bool behind; /* a disk write that went behind: seconds are its copy to the stage */
	/* a disk transfer: its parts (kv-disk.h), disk.io_seconds the file's I/O
	 * alone, which is what the disk model learns from (0 for a write behind:
	 * that happens later, unseen; through a GPU's host stage it includes the
	 * staging copies) */
	struct allm_kv_disk_io_stat disk;
};

int allm_kv_cache_create(allm_backend_t *be, const struct allm_kv_layout *lay,
			 int32_t n_gpu_blocks, int32_t n_cpu_blocks, struct allm_kv_cache **ret,
			 struct allm_err *err);
void allm_kv_cache_free(struct allm_kv_cache *kv);

/* Blocks needed to hold n tokens. */
static inline int32_t allm_kv_blocks_for(const struct allm_kv_cache *kv, int64_t n_tokens)
{
	return (int32_t)((n_tokens + kv->lay.block_size - 1) / kv->lay.block_size);
}

/* Device blocks that fit in `bytes`. */
int32_t allm_kv_blocks_in(const struct allm_kv_layout *lay, size_t bytes);

/* Changes a pool's configured block count at run time. Growing past the memory
 * held reallocates it (contents kept). Shrinking below what is in use leaves a
 * deficit in the pool that the scheduler must preempt away. */
int allm_kv_resize_gpu(struct allm_kv_cache *kv, int32_t n, struct allm_err *err);
int allm_kv_resize_cpu(struct allm_kv_cache *kv, int32_t n, struct allm_err *err);

/* Coalesced copies needed to move blocks src[i] -> dst[i]: runs where both sides
 * are consecutive ids (dst NULL: runs of consecutive ids in src alone). */
int32_t allm_kv_count_runs(const int32_t *src, const int32_t *dst, int32_t n);

/* Swap out: takes n CPU blocks for `owner` into ret_cpu, copies the n GPU blocks
 * there, releases the GPU blocks. -ENOSPC (nothing changed) when the CPU pool has
 * fewer than n free blocks. */
int allm_kv_swap_out(struct allm_kv_cache *kv, int64_t owner, const int32_t *gpu, int32_t n,
		     int32_t *ret_cpu, struct allm_swap_result *res, struct allm_err *err);
/* Swap in: the reverse; -ENOSPC when the GPU pool has fewer than n free blocks. */
int allm_kv_swap_in(struct allm_kv_cache *kv, int64_t owner, const int32_t *cpu, int32_t n,
		    int32_t *ret_gpu, struct allm_swap_result *res, struct allm_err *err);

/* The pool of a tier, NULL where there is none (no disk tier). */
struct allm_block_pool *allm_kv_tier_pool(struct allm_kv_cache *kv, enum allm_kv_tier t);

/* Copies n blocks src[i] of tier `from` to blocks dst[i] of tier `to` (taken by
 * the caller; nothing is taken or released here) and waits for the copies:
 * device <-> host, device <-> disk (a write may go behind), host -> disk. For the
 * prefix cache's demotions and restores. res: what it took (may be NULL).
 * -ENOTSUP for another pair, else 0 or -errno with err. */
int allm_kv_tier_copy(struct allm_kv_cache *kv, enum allm_kv_tier from, const int32_t *src,
		      enum allm_kv_tier to, const int32_t *dst, int32_t n, struct allm_swap_result *res,
		      struct allm_err *err);

/* --- the disk tier (kv-disk.h) ---------------------------------------------------- */

/* Adds a disk pool of n_blocks in dir. note: one line on how it was opened. */
/* The program's test and benchmark hooks (kv-disk.h), before a disk tier or a
 * prefix cache is attached. */
void allm_kv_set_env(struct allm_kv_cache *kv, const struct allm_kv_env *env);
int allm_kv_attach_disk(struct allm_kv_cache *kv, const char *dir, int32_t n_blocks, char *note,
			size_t note_len, struct allm_err *err);
/* The disk pool, or NULL when there is no disk tier. */
struct allm_block_pool *allm_kv_disk_blocks(struct allm_kv_cache *kv);
int allm_kv_resize_disk(struct allm_kv_cache *kv, int32_t n, struct allm_err *err);
/* Device -> disk: takes n disk blocks into ret_disk, writes the n GPU blocks there
 * (staged through host memory when the device is not; written behind when the
 * stage of writes behind has room: allm_kv_disk_behind_room),
 * releases the GPU blocks. -ENOSPC when the disk pool is short; on any failure
 * nothing changed. */
int allm_kv_disk_out(struct allm_kv_cache *kv, int64_t owner, const int32_t *gpu, int32_t n,
		     int32_t *ret_disk, struct allm_swap_result *res, struct allm_err *err);
/* Disk -> device: takes n GPU blocks into ret_gpu, reads the disk blocks there,
 * releases the disk blocks. On failure (EIO, a short read) the GPU blocks go back
 * and the disk blocks stay the caller's: their contents are not trusted. */
int allm_kv_disk_in(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
		    int32_t *ret_gpu, struct allm_swap_result *res, struct allm_err *err);
/* Disk -> device in the background: takes n GPU blocks into ret_gpu and starts
 * reading the disk blocks there (allm_kv_disk_read_start); the caller computes,
 * then must call allm_kv_disk_in_wait before touching those blocks (through
 * host memory when the device is not: disk -> a host buffer ahead, host ->
 * device at the wait; a simulated device's disk reads on its own time line).
 * -EAGAIN (nothing taken, no err) where reads cannot go ahead (no io_uring, the
 * host buffers of reads ahead full): use allm_kv_disk_in. -ENOSPC as allm_kv_disk_in;
 * other errors as its failures (the GPU blocks went back). */
int allm_kv_disk_in_start(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
			  int32_t *ret_gpu, int32_t *ret_ticket, struct allm_err *err);
/* Waits for it; then as allm_kv_disk_in: the disk blocks are released, or on
 * failure the GPU blocks go back and the disk blocks stay the caller's.
 * res->seconds is what the caller waited, res->disk.io_seconds the read's own time. */
int allm_kv_disk_in_wait(struct allm_kv_cache *kv, int64_t owner, const int32_t *disk, int32_t n,
			 const int32_t *gpu, int32_t ticket, struct allm_swap_result *res,
			 struct allm_err *err);
/* Host -> disk (a swapped request demoted to make room in the host pool): takes
 * n disk blocks, writes the host blocks there, releases the host blocks. */
int allm_kv_demote(struct allm_kv_cache *kv, int64_t owner, const int32_t *cpu, int32_t n,
		   int32_t *ret_disk, struct allm_swap_result *res, struct allm_err *err);
/* Whether a swap-out of n blocks to disk would go behind now (a copy to the
 * stage) rather than wait for the disk. */
bool allm_kv_disk_behind_room(struct allm_kv_cache *kv, int32_t n);
/* Blocks whose writes to disk are in flight (a read queues behind them). */
int32_t allm_kv_disk_queued_blocks(struct allm_kv_cache *kv);
/* Releases every disk block of owner in ids[0..n). */
void allm_kv_disk_release(struct allm_kv_cache *kv, int64_t owner, const int32_t *ids, int32_t n);
/* Times a disk write (waited for: what a swap-out costs when the stage is full)
 * or read of n blocks as n_runs runs, over scratch blocks, only
 * while the device and disk pools are unused (-EBUSY otherwise). For
 * calibration. Seconds or a negative errno. */
double allm_kv_time_disk(struct allm_kv_cache *kv, enum allm_disk_dir dir, int32_t n, int32_t n_runs);

/* Times a copy of n blocks in direction dir (ALLM_COPY_D2H or H2D) as n_runs runs,
 * over blocks of both pools as scratch: only while both pools are unused (-EBUSY
 * otherwise). For calibration.
 * Returns seconds, or a negative errno. */
double allm_kv_time_copy(struct allm_kv_cache *kv, enum allm_copy_dir dir, int32_t n, int32_t n_runs);

/* The regret probe's swap (the engine's probe_other): copies the n device blocks
 * gpu[] out to n host blocks taken for the moment and back into the same device
 * blocks (contents unchanged), as swapping them out and in would, while serving;
 * *ret_out and *ret_in get the two copies' seconds. 0; -ENOSPC when the host pool
 * has fewer than n free blocks (nothing copied); -ENOMEM; a copy's error (the
 * device blocks are then not to be trusted: call it only on blocks about to be
 * dropped). */
int allm_kv_time_roundtrip(struct allm_kv_cache *kv, const int32_t *gpu, int32_t n, double *ret_out,
			   double *ret_in);

#endif
