/* Single-producer single-consumer rings over shared memory.
 *
 * A ring is a struct allm_ring_ctl (head, tail, flags; see protocol.h) plus an
 * array of `entries` fixed-size slots. Each side holds a private view: the
 * geometry it trusts (never re-read from shared memory), its own index (the
 * producer's tail, the consumer's head) and a cached copy of the peer's index.
 *
 * The peer may be hostile: it can write any value into the control block or the
 * slots at any time. The views therefore
 *   - keep their own index privately and only ever store it, never load it back;
 *   - reject a peer index that would put more than `entries` entries in the ring
 *     (-EPROTO) instead of reading or writing outside the slot array;
 *   - copy a slot out before returning it (the consumer never works on shared
 *     memory in place), so a peer rewriting a slot afterwards changes nothing.
 * Slot indices are always (counter & mask) with the private mask, so no value a
 * peer writes can send an access outside the slot array.
 */
#ifndef ALLM_SHM_RING_H
#define ALLM_SHM_RING_H

#include <adaptivellm/protocol.h>

#include <stdbool.h>
#include <stdint.h>

/* One iteration of a busy-wait: tells the CPU we are spinning (lets the sibling
 * hyperthread run and saves power) without giving up the core. */
static inline void allm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Producer's view of a ring. Plain struct: the caller owns its storage. */
struct allm_ring_prod {
	struct allm_ring_ctl *ctl; /* shared */
	uint8_t *slots;            /* shared: entries * entry_size bytes */
	uint32_t entries;          /* trusted copy, power of two */
	uint32_t mask;             /* entries - 1 */
	uint32_t entry_size;       /* bytes per slot */
	uint32_t tail;             /* ours: next slot to fill (also stored in ctl->tail) */
	uint32_t cached_head;      /* the consumer's head as last loaded */
};

/* Consumer's view of a ring. */
struct allm_ring_cons {
	struct allm_ring_ctl *ctl;
	uint8_t *slots;
	uint32_t entries;
	uint32_t mask;
	uint32_t entry_size;
	uint32_t head;        /* ours: next entry to consume (also stored in ctl->head) */
	uint32_t cached_tail; /* the producer's tail as last loaded */
};

/* Initializes a control block for a ring of `entries` slots (power of two), with
 * head == tail == start (tests start near UINT32_MAX to cross the wrap) and no
 * flags. Call before the ring is shared. Returns 0 or -EINVAL. */
int allm_ring_ctl_init(struct allm_ring_ctl *ctl, uint32_t entries, uint32_t start);

/* Attach a producer (consumer) view to a ring. `entries` and `entry_size` are the
 * caller's own trusted values. The current tail and head are loaded once; if they
 * are inconsistent (more than `entries` apart) the ring is corrupt.
 * Returns 0, -EINVAL (bad geometry) or -EPROTO (corrupt indices); *ret is left
 * untouched on failure. */
int allm_ring_prod_init(struct allm_ring_prod *ret, struct allm_ring_ctl *ctl, void *slots,
                        uint32_t entries, uint32_t entry_size);
int allm_ring_cons_init(struct allm_ring_cons *ret, struct allm_ring_ctl *ctl, void *slots,
                        uint32_t entries, uint32_t entry_size);

/* Copies entry_size bytes from `entry` into the next slot and publishes it.
 * Returns 0, -EAGAIN (full) or -EPROTO (the consumer's head is impossible). */
int allm_ring_push(struct allm_ring_prod *prod, const void *entry);

/* Copies the oldest entry into `out` (entry_size bytes) and hands its slot back.
 * Returns 0, -EAGAIN (empty) or -EPROTO (the producer's tail is impossible).
 * `out` then holds whatever bytes the peer wrote: validate before use. */
int allm_ring_pop(struct allm_ring_cons *cons, void *out);

/* Entries ready to pop (consumer side), or -EPROTO. */
int allm_ring_count(struct allm_ring_cons *cons);

/* Free slots (producer side), or -EPROTO. */
int allm_ring_space(struct allm_ring_prod *prod);

#endif
