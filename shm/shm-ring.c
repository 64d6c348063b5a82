/* SPSC ring push/pop with acquire/release ordering; see shm-ring.h for the trust
 * model. Memory-order pairs used here:
 *
 *   producer                               consumer
 *   memcpy(slot, entry)                    tail = load_acquire(ctl->tail)   (B)
 *   store_release(ctl->tail, tail + 1) (A) memcpy(out, slot)
 *                                          store_release(ctl->head, h + 1) (C)
 *   head = load_acquire(ctl->head)     (D)
 *   memcpy(slot, next entry)  -- may reuse the slot only after (D) saw (C)
 *
 *   (A)->(B): the entry's bytes are visible before the consumer reads the slot.
 *   (C)->(D): the consumer's reads of a slot finish before the producer rewrites it.
 *
 * A hostile peer may write the slots while we copy them: we only ever copy bytes
 * into private memory and validate the copy, so the worst it gets is garbage in
 * its own requests.
 */
#include "shm-ring.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

static bool geometry_ok(uint32_t entries, uint32_t entry_size)
{
	return entries != 0 && (entries & (entries - 1)) == 0 &&
	       entries <= ALLM_SHM_MAX_RING_ENTRIES && entry_size != 0;
}

/* Returns 0 or -EINVAL. */
int allm_ring_ctl_init(struct allm_ring_ctl *ctl, uint32_t entries, uint32_t start)
{
	if (!ctl || !geometry_ok(entries, 1))
		return -EINVAL;
	memset(ctl, 0, sizeof(*ctl));
	/* Relaxed: the ring is not shared yet; handing the segment to the peer (fd
	 * passing, thread creation) orders these stores before its first access. */
	atomic_store_explicit(&ctl->head, start, memory_order_relaxed);
	atomic_store_explicit(&ctl->tail, start, memory_order_relaxed);
	atomic_store_explicit(&ctl->flags, 0, memory_order_relaxed);
	ctl->ring_mask = entries - 1;
	ctl->ring_entries = entries;
	return 0;
}

/* Returns 0, -EINVAL or -EPROTO; *ret untouched on failure. */
int allm_ring_prod_init(struct allm_ring_prod *ret, struct allm_ring_ctl *ctl, void *slots,
                        uint32_t entries, uint32_t entry_size)
{
	if (!ret || !ctl || !slots || !geometry_ok(entries, entry_size))
		return -EINVAL;
	/* Acquire on head: slots the consumer already released are free to reuse
	 * (pairs with its release store in allm_ring_pop()). Our own tail is read
	 * once here, at attach time, and from then on only stored. */
	uint32_t head = atomic_load_explicit(&ctl->head, memory_order_acquire);
	uint32_t tail = atomic_load_explicit(&ctl->tail, memory_order_relaxed);
	if (tail - head > entries)
		return -EPROTO;
	*ret = (struct allm_ring_prod){
		.ctl = ctl, .slots = slots, .entries = entries, .mask = entries - 1,
		.entry_size = entry_size, .tail = tail, .cached_head = head,
	};
	return 0;
}

/* Returns 0, -EINVAL or -EPROTO; *ret untouched on failure. */
int allm_ring_cons_init(struct allm_ring_cons *ret, struct allm_ring_ctl *ctl, void *slots,
                        uint32_t entries, uint32_t entry_size)
{
	if (!ret || !ctl || !slots || !geometry_ok(entries, entry_size))
		return -EINVAL;
	/* Acquire on tail: entries already published are visible to our copies
	 * (pairs with the producer's release store in allm_ring_push()). */
	uint32_t tail = atomic_load_explicit(&ctl->tail, memory_order_acquire);
	uint32_t head = atomic_load_explicit(&ctl->head, memory_order_relaxed);
	if (tail - head > entries)
		return -EPROTO;
	*ret = (struct allm_ring_cons){
		.ctl = ctl, .slots = slots, .entries = entries, .mask = entries - 1,
		.entry_size = entry_size, .head = head, .cached_tail = tail,
	};
	return 0;
}

/* Reloads the consumer's head. Returns the used slot count or -EPROTO. */
static int prod_refresh(struct allm_ring_prod *p)
{
	/* Acquire (D): pairs with the consumer's release store of head (C), so its
	 * reads of every slot it handed back happen before we overwrite them. */
	uint32_t head = atomic_load_explicit(&p->ctl->head, memory_order_acquire);
	uint32_t used = p->tail - head; /* free-running counters: wraps correctly */
	if (used > p->entries)
		return -EPROTO; /* head ahead of our tail, or too far behind it */
	p->cached_head = head;
	return (int)used;
}

/* Reloads the producer's tail. Returns the ready entry count or -EPROTO. */
static int cons_refresh(struct allm_ring_cons *c)
{
	/* Acquire (B): pairs with the producer's release store of tail (A), so the
	 * bytes of every entry before that tail are visible to our memcpy. */
	uint32_t tail = atomic_load_explicit(&c->ctl->tail, memory_order_acquire);
	uint32_t avail = tail - c->head;
	if (avail > c->entries)
		return -EPROTO; /* more entries than slots: the peer wrote nonsense */
	c->cached_tail = tail;
	return (int)avail;
}

/* Returns 0, -EAGAIN (full) or -EPROTO. */
int allm_ring_push(struct allm_ring_prod *p, const void *entry)
{
	/* The cached head is only ever behind the real one, so "not full" by the
	 * cache is true; reload only when the cache says full. */
	if (p->tail - p->cached_head >= p->entries) {
		int used = prod_refresh(p);
		if (used < 0)
			return used;
		if ((uint32_t)used == p->entries)
			return -EAGAIN;
	}
	memcpy(p->slots + (size_t)(p->tail & p->mask) * p->entry_size, entry, p->entry_size);
	p->tail++;
	/* Release (A): the memcpy into the slot above happens before the consumer
	 * can observe the new tail (pairs with its acquire load (B)). */
	atomic_store_explicit(&p->ctl->tail, p->tail, memory_order_release);
	return 0;
}

/* Returns 0, -EAGAIN (empty) or -EPROTO. */
int allm_ring_pop(struct allm_ring_cons *c, void *out)
{
	/* The cached tail is only ever behind the real one: entries it shows are
	 * there (and were made visible by the acquire that loaded it). */
	if (c->cached_tail == c->head) {
		int avail = cons_refresh(c);
		if (avail < 0)
			return avail;
		if (avail == 0)
			return -EAGAIN;
	}
	memcpy(out, c->slots + (size_t)(c->head & c->mask) * c->entry_size, c->entry_size);
	c->head++;
	/* Release (C): our reads of the slot (the memcpy above) complete before the
	 * producer can see the slot as free and rewrite it (pairs with (D)). */
	atomic_store_explicit(&c->ctl->head, c->head, memory_order_release);
	return 0;
}

/* Returns the ready entry count or -EPROTO. */
int allm_ring_count(struct allm_ring_cons *c)
{
	return cons_refresh(c);
}

/* Returns the free slot count or -EPROTO. */
int allm_ring_space(struct allm_ring_prod *p)
{
	int used = prod_refresh(p);
	return used < 0 ? used : (int)(p->entries - (uint32_t)used);
}
