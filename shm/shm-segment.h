/* The per-client shared-memory segment: header + SQ + CQ + prompt arena (layout
 * in include/adaptivellm/protocol.h).
 *
 * The engine creates it (allm_shm_segment_create), passes the fd to the client,
 * and the client maps it (allm_shm_segment_map_fd), validating the header.
 *
 * Trust: the header lives in memory the client can write. The engine therefore
 * keeps its OWN copy of the layout in struct allm_shm_segment (filled in at
 * creation) and never re-reads sizes, offsets or ring geometry from the header
 * after writing it. The client, which trusts the engine but not the bytes, takes
 * one snapshot of the header when mapping, validates the snapshot and uses only
 * it afterwards.
 */
#ifndef ALLM_SHM_SEGMENT_H
#define ALLM_SHM_SEGMENT_H

#include <adaptivellm/protocol.h>

#include "shm-ring.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where everything lies in a segment. The first three fields are what a creator
 * asks for; allm_shm_layout_compute() fills in the rest. */
struct allm_shm_layout {
	uint32_t sq_entries; /* asked: rounded up to a power of two */
	uint32_t cq_entries; /* asked: rounded up to a power of two */
	uint64_t arena_size; /* asked: rounded up to ALLM_SHM_ALIGN */
	uint64_t sq_offset;    /* computed, from the segment start */
	uint64_t cq_offset;    /* computed */
	uint64_t arena_offset; /* computed */
	uint64_t total_size;   /* computed: rounded up to the page size */
};

struct allm_shm_segment {
	uint8_t *base;                 /* MAP_SHARED mapping of total_size bytes */
	int fd;                        /* the memfd / shm object; owned */
	struct allm_shm_layout layout; /* trusted copy, never re-read from the header */
	char posix_name[64];           /* creator, --shm posix: the name until unlinked */
	/* shm-guard.c: set by the SIGBUS handler when the peer truncated the object
	 * under our mapping (then base maps private zeros: the peer must be dropped) */
	volatile sig_atomic_t faulted;
	bool guarded;                           /* on the guard's list */
	struct allm_shm_segment *_Atomic guard_next; /* that list, read by the handler */
};

/* Rounds `want` into a full layout (power-of-two rings, 64-byte-aligned regions,
 * page-sized total). Returns 0 or -EINVAL (zero entries, more than
 * ALLM_SHM_MAX_RING_ENTRIES, or an arena over ALLM_SHM_MAX_ARENA_SIZE). */
int allm_shm_layout_compute(const struct allm_shm_layout *want, struct allm_shm_layout *ret);

/* Engine side: creates, sizes and maps a segment and writes its header and ring
 * control blocks (head = tail = 0). With posix false: a sealed memfd
 * (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL), so a peer can never truncate it. With
 * posix true: shm_open() of a random "/allm-..." name (O_CREAT|O_EXCL, 0600); the
 * caller unlinks it with allm_shm_segment_unlink() once the peer has mapped it
 * (destroy unlinks it too if still named).
 * Returns 0, -EINVAL or -errno; on success the caller owns *ret (destroy). */
int allm_shm_segment_create(const struct allm_shm_layout *want, bool posix,
                            struct allm_shm_segment **ret);

/* Client side: maps the segment behind `fd` (the segment keeps its own duplicate;
 * the caller still owns `fd`), and validates a snapshot of its header: magic,
 * version, header and entry sizes, power-of-two rings within limits, every region
 * 64-byte aligned, inside the file and not overlapping another, total_size equal
 * to the file size, the ring control copies consistent.
 * Returns 0, -EPROTO (bad header; nothing stays mapped) or -errno; on success the
 * caller owns *ret, untouched on failure. */
int allm_shm_segment_map_fd(int fd, struct allm_shm_segment **ret);

/* Client side, --shm posix: opens `name` read-write and maps it as map_fd does. */
int allm_shm_segment_open_posix(const char *name, struct allm_shm_segment **ret);

/* Removes the POSIX name (no-op for memfd or when already unlinked).
 * Returns 0 or -errno. */
int allm_shm_segment_unlink(struct allm_shm_segment *seg);

/* Unmaps, closes, and unlinks a name still held. Accepts NULL. */
void allm_shm_segment_destroy(struct allm_shm_segment *seg);

/* The header in shared memory (written by the creator; peers may scribble). */
struct allm_shm_header *allm_shm_segment_header(const struct allm_shm_segment *seg);

/* Ring views over the segment, built from the trusted layout. The engine uses
 * sq_cons + cq_prod, the client sq_prod + cq_cons. Return as allm_ring_*_init. */
int allm_shm_segment_sq_prod(struct allm_shm_segment *seg, struct allm_ring_prod *ret);
int allm_shm_segment_sq_cons(struct allm_shm_segment *seg, struct allm_ring_cons *ret);
int allm_shm_segment_cq_prod(struct allm_shm_segment *seg, struct allm_ring_prod *ret);
int allm_shm_segment_cq_cons(struct allm_shm_segment *seg, struct allm_ring_cons *ret);

/* The prompt arena: layout.arena_size bytes. */
uint8_t *allm_shm_segment_arena(const struct allm_shm_segment *seg);

/* Copies arena bytes [off, off + len) to dst (capacity dst_cap). 64-bit range
 * checks, no overflow: -EINVAL if the range is not inside the arena, -E2BIG if
 * len > dst_cap; 0 on success. Used by the engine on an SQE's (prompt_off,
 * prompt_len), so the bytes are copied once into private memory. */
int allm_shm_arena_copy_out(const struct allm_shm_segment *seg, uint64_t off, uint64_t len,
                            void *dst, size_t dst_cap);

/* Client side: copies len bytes from src into the arena at off. Same checks
 * (-EINVAL if outside the arena). */
int allm_shm_arena_copy_in(struct allm_shm_segment *seg, uint64_t off, const void *src,
                           uint64_t len);

#endif
