/* Doorbells (eventfd) and the spin-then-sleep wake-up protocol of the rings.
 *
 * Each ring has one doorbell, owned by its consumer: the consumer sleeps on it,
 * the producer rings it. Ringing costs a syscall, so a producer rings only when
 * the consumer has announced it is going to sleep (ALLM_RING_NEED_WAKEUP), as
 * io_uring's SQPOLL thread does.
 *
 * Consumer loop:
 *
 *	for (;;) {
 *		while (allm_ring_pop(cons, &e) == 0)
 *			handle(&e);
 *		... spin / poll a little ...
 *		if (allm_ring_prepare_sleep(cons)) {   // flag set and ring still empty
 *			allm_doorbell_wait(&db, timeout);   // or io_uring/epoll on the fd
 *			allm_doorbell_drain(&db, NULL);
 *			allm_ring_finish_sleep(cons);
 *		}
 *	}
 *
 * Producer:
 *
 *	allm_ring_push(prod, &e);
 *	if (allm_ring_needs_wakeup(prod))
 *		allm_doorbell_ring(&db);
 */
#ifndef ALLM_SHM_DOORBELL_H
#define ALLM_SHM_DOORBELL_H

#include "shm-ring.h"

#include <stdbool.h>
#include <stdint.h>

struct allm_doorbell {
	int fd; /* eventfd, non-blocking, close-on-exec; -1 when closed */
};

/* Creates a new eventfd doorbell (counter 0). Returns 0 or -errno; *ret is left
 * untouched on failure. The caller owns the fd: allm_doorbell_close(). */
int allm_doorbell_create(struct allm_doorbell *ret);

/* Adopts an eventfd received from the peer (takes ownership of `fd` on success).
 * Checks it is an eventfd and makes it non-blocking. Returns 0, -EINVAL (not an
 * eventfd) or -errno. */
int allm_doorbell_from_fd(struct allm_doorbell *ret, int fd);

/* Adds 1 to the counter: wakes a sleeper. A counter already at its maximum is a
 * wake-up already pending, so that counts as success. Returns 0 or -errno. */
int allm_doorbell_ring(const struct allm_doorbell *db);

/* Reads and resets the counter without blocking; *ret_count (may be NULL) gets
 * the number of rings since the last drain, 0 if none. Returns 0 or -errno. */
int allm_doorbell_drain(const struct allm_doorbell *db, uint64_t *ret_count);

/* Blocks until the doorbell has been rung (does not drain it) or timeout_ms
 * passes (-1: forever). Returns 0, -ETIMEDOUT or -errno. */
int allm_doorbell_wait(const struct allm_doorbell *db, int timeout_ms);

/* The fd, for poll/epoll/io_uring. */
int allm_doorbell_fd(const struct allm_doorbell *db);

/* Closes the fd; accepts a closed or NULL doorbell. */
void allm_doorbell_close(struct allm_doorbell *db);

/* Consumer: announce a sleep. Sets ALLM_RING_NEED_WAKEUP, then re-checks the ring.
 * Returns true if the ring is still empty (the caller may now sleep on its
 * doorbell and must call allm_ring_finish_sleep() after waking); false if entries
 * arrived meanwhile (or the ring is corrupt), in which case the flag is cleared
 * again and the caller must not sleep. */
bool allm_ring_prepare_sleep(struct allm_ring_cons *cons);

/* Consumer: clear ALLM_RING_NEED_WAKEUP after waking up. */
void allm_ring_finish_sleep(struct allm_ring_cons *cons);

/* Producer: after publishing entries, whether the consumer asked to be woken (the
 * caller then rings its doorbell). */
bool allm_ring_needs_wakeup(struct allm_ring_prod *prod);

#endif
