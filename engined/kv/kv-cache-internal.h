/* What kv-cache.c (the pools' memory, swaps) and kv-cache-disk.c (the disk
 * tier's transfers) share. Not for use outside engined/kv. */
#ifndef ALLM_KV_CACHE_INTERNAL_H
#define ALLM_KV_CACHE_INTERNAL_H

#include "kv-cache.h"

/* Bytes of n blocks (n < 1 counts as 1) in *ret, or -EOVERFLOW with err. */
int kvc_pool_bytes(const struct allm_kv_cache *kv, int32_t n, size_t *ret, struct allm_err *err);
/* Writes blocks [first, first + n) of the device (or host) pool once, where the
 * backend maps them lazily, so a timed copy does not pay their page faults;
 * maps them first where the backend must (0, or -errno: not to be copied to). */
int kvc_touch_range(struct allm_kv_cache *kv, bool device, int32_t first, int32_t n);

/* Scratch ids for a calibration transfer of n blocks as exactly n_runs runs
 * between the device pool and a pool of other_capacity blocks: *ret_gapped (runs
 * a block apart) and *ret_plain (consecutive), both allm_malloc'ed, starting
 * where the last calibration left off. The first id, or -ENOMEM. The caller
 * checked n + n_runs fits both pools. */
int32_t kvc_calib_ids(struct allm_kv_cache *kv, int32_t other_capacity, int32_t n, int32_t n_runs, int32_t **ret_gapped,
		      int32_t **ret_plain);
/* Queues the copies of device blocks src[i] -> host blocks dst[i] (out) or
 * back (!out), one per coalesced run, and waits. */
int kvc_copy_blocks(struct allm_kv_cache *kv, const int32_t *src, const int32_t *dst, int32_t n, bool out,
		    struct allm_swap_result *res, struct allm_err *err);
/* Writes the not-yet-touched blocks among ids[0..n) of the device (or host)
 * pool once, untimed (see touched_dev). */
void kvc_touch_ids(struct allm_kv_cache *kv, bool device, const int32_t *ids, int32_t n);
/* Copies device blocks dev[0..n) into blocks of host memory at base (the j-th
 * into block slots[j], or j when slots is NULL) with the backend's copies, or back
 * (!to_host), and waits for them. */
int kvc_stage_copy(struct allm_kv_cache *kv, bool to_host, char *base, const int32_t *slots, const int32_t *dev,
		   int32_t n, struct allm_err *err);

/* A read ahead through host memory (staged): kv-cache-disk.c keeps them. */
struct kvc_ahead {
	bool live;
	int32_t disk_ticket; /* the disk tier's (a real disk) */
	int32_t *slots; /* [n] the slots of kv->ahead_mem its blocks come into */
	int32_t n, runs;
	double start, end; /* a simulated disk: the read's span on its line */
	double start_seconds; /* what starting it took of the caller's time */
};

/* The disk tier behind the KV cache: what differs between a disk that is a file
 * (kv-disk.h: io_uring, a stage of writes behind, reads ahead; kv-cache-disk.c)
 * and a simulated device's (no file: one line of transfers beside its clock,
 * kernels' struct allm_sim_disk_i; kv-disk-sim.c). Chosen once, at
 * allm_kv_attach_disk; kv-cache-disk.c holds what both share and asks no more
 * which one it has. Members work on kv->disk's ids. */
struct kvc_disk_i {
	int version; /* 1 */
	const char *name;
	/* opens kv->disk (n_blocks of kv->block_bytes); note: one line on how */
	int (*open)(struct allm_kv_cache *kv, const char *dir, int32_t n_blocks, char *note, size_t note_len,
		    struct allm_err *err);
	/* the stage of writes behind: blocks it holds, and those free now */
	int32_t (*stage_total)(struct allm_kv_cache *kv);
	int32_t (*stage_free)(struct allm_kv_cache *kv);
	/* write behind: device blocks dev[i] -> disk[i] while the caller goes on
	 * (through host memory when staged); *ret_seconds what the caller waited.
	 * -EAGAIN: nothing lost, the caller writes and waits instead */
	int (*write_behind)(struct allm_kv_cache *kv, const int32_t *dev, const int32_t *disk, int32_t n,
			    double *ret_seconds, struct allm_err *err);
	/* a staged transfer of k blocks the caller waited for went through the disk:
	 * st gets the disk's time (a simulated disk: its line's); NULL: nothing to add */
	void (*waited)(struct allm_kv_cache *kv, bool write, int32_t k, struct allm_kv_disk_io_stat *st);
	/* read ahead through host memory (staged): disk[0..n) -> a's slots */
	int (*ahead_start)(struct allm_kv_cache *kv, struct kvc_ahead *a, const int32_t *disk, int32_t n,
			   struct allm_err *err);
	/* waits for a's read (st as allm_kv_disk_read_wait's), then copies its
	 * blocks to the device blocks gpu[0..n) */
	int (*ahead_wait)(struct allm_kv_cache *kv, struct kvc_ahead *a, struct allm_kv_disk_io_stat *st,
			  struct allm_err *err);
	int (*ahead_copy)(struct allm_kv_cache *kv, struct kvc_ahead *a, const int32_t *gpu, int32_t n,
			  struct allm_err *err);
	/* a host -> disk write of n blocks waited for: st the disk's time; NULL: as measured */
	void (*host_written)(struct allm_kv_cache *kv, int32_t n, struct allm_kv_disk_io_stat *st);
};

/* Frees the reads ahead's arena and records, once kv->disk is closed. */
void kvc_ahead_fini(struct allm_kv_cache *kv);

/* The two implementations. */
extern const struct kvc_disk_i kvc_disk_file; /* kv-cache-disk.c */
extern const struct kvc_disk_i kvc_disk_sim;  /* kv-disk-sim.c */

#endif
