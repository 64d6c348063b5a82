/* eventfd doorbells and the NEED_WAKEUP sleep protocol.
 *
 * The lost wake-up race. Without care:
 *
 *   consumer                           producer
 *   sees the ring empty
 *                                      publishes an entry (store tail)
 *                                      reads flags: no NEED_WAKEUP -> no ring
 *   sets NEED_WAKEUP, sleeps           ... forever: the entry waits unseen
 *
 * Each side stores one word and then loads the other side's word:
 *
 *   consumer (prepare_sleep)           producer (push + needs_wakeup)
 *   store flags |= NEED_WAKEUP   (1)   store tail                   (3)
 *   fence seq_cst                      fence seq_cst
 *   load tail                    (2)   load flags                   (4)
 *
 * Acquire/release is not enough here: it orders a store before later stores and
 * a load before later loads, but never a store before a later load, so both loads
 * could see the old values (on x86 the store buffer does exactly that). The two
 * seq_cst fences are ordered in their single total order; whichever comes second,
 * its thread's load must see the other thread's store made before the first
 * fence. So either (2) sees the new tail (the consumer does not sleep) or (4) sees
 * NEED_WAKEUP (the producer rings), or both (a spare ring: harmless). The eventfd
 * counter keeps a ring that comes before the consumer reaches poll(), so a ring
 * between (2) and the sleep is not lost either.
 */
#include "shm-doorbell.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Returns 0 or -errno; *ret untouched on failure. */
int allm_doorbell_create(struct allm_doorbell *ret)
{
	if (!ret)
		return -EINVAL;
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	ret->fd = fd;
	return 0;
}

/* An eventfd shows up in /proc/self/fdinfo with an "eventfd-count" line. */
static bool fd_is_eventfd(int fd)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	int pfd = open(path, O_RDONLY | O_CLOEXEC);
	if (pfd < 0)
		return true; /* no /proc: cannot tell, the read/write checks still apply */
	ssize_t n = read(pfd, buf, sizeof(buf) - 1);
	close(pfd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	return strstr(buf, "eventfd-count") != NULL;
}

/* Returns 0, -EINVAL or -errno; takes ownership of fd only on success. */
int allm_doorbell_from_fd(struct allm_doorbell *ret, int fd)
{
	if (!ret || fd < 0)
		return -EINVAL;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if (!fd_is_eventfd(fd))
		return -EINVAL;
	if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	ret->fd = fd;
	return 0;
}

/* Returns 0 or -errno. */
int allm_doorbell_ring(const struct allm_doorbell *db)
{
	uint64_t one = 1;
	for (;;) {
		ssize_t n = write(db->fd, &one, sizeof(one));
		if (n == (ssize_t)sizeof(one))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0; /* counter saturated: a wake-up is pending anyway */
		return n < 0 ? -errno : -EIO;
	}
}

/* Returns 0 or -errno. */
int allm_doorbell_drain(const struct allm_doorbell *db, uint64_t *ret_count)
{
	uint64_t v = 0;
	for (;;) {
		ssize_t n = read(db->fd, &v, sizeof(v));
		if (n == (ssize_t)sizeof(v))
			break;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			v = 0; /* not rung */
			break;
		}
		return n < 0 ? -errno : -EIO;
	}
	if (ret_count)
		*ret_count = v;
	return 0;
}

/* Returns 0, -ETIMEDOUT or -errno. */
int allm_doorbell_wait(const struct allm_doorbell *db, int timeout_ms)
{
	struct pollfd p = { .fd = db->fd, .events = POLLIN };
	for (;;) {
		int r = poll(&p, 1, timeout_ms);
		if (r > 0)
			return (p.revents & (POLLERR | POLLNVAL)) ? -EIO : 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
		/* EINTR: retry with the full timeout; callers use timeouts as a bound,
		 * not as a clock. */
	}
}

int allm_doorbell_fd(const struct allm_doorbell *db)
{
	return db->fd;
}

void allm_doorbell_close(struct allm_doorbell *db)
{
	if (!db || db->fd < 0)
		return;
	close(db->fd);
	db->fd = -1;
}

bool allm_ring_prepare_sleep(struct allm_ring_cons *c)
{
	/* (1) Announce the sleep. Relaxed: the fence below orders it. Only the
	 * consumer writes flags, so a plain store of our own value is enough (we do
	 * not read back a value a hostile producer may have put there). */
	atomic_store_explicit(&c->ctl->flags, ALLM_RING_NEED_WAKEUP, memory_order_relaxed);
	/* seq_cst fence: orders the flag store (1) before the tail load (2); pairs
	 * with the fence in allm_ring_needs_wakeup() (see the top of this file). */
	atomic_thread_fence(memory_order_seq_cst);
	/* (2) Re-check. allm_ring_count() loads tail with acquire, so entries it
	 * reports are visible to the pops that follow. */
	int n = allm_ring_count(c);
	if (n == 0)
		return true;
	/* Work arrived (or the ring is corrupt: the caller's pop will say -EPROTO):
	 * do not sleep, and take the request back so the producer stops ringing. */
	allm_ring_finish_sleep(c);
	return false;
}

void allm_ring_finish_sleep(struct allm_ring_cons *c)
{
	/* Relaxed: a stale NEED_WAKEUP seen by the producer only costs a spare ring;
	 * the next prepare_sleep() orders its own store with a fence. */
	atomic_store_explicit(&c->ctl->flags, 0, memory_order_relaxed);
}

bool allm_ring_needs_wakeup(struct allm_ring_prod *p)
{
	/* seq_cst fence: orders the tail store (3) made by allm_ring_push() before
	 * the flag load (4); pairs with the fence in allm_ring_prepare_sleep(). */
	atomic_thread_fence(memory_order_seq_cst);
	/* (4) Relaxed: the fence gives the ordering; any value a peer writes is
	 * harmless (at worst a spare or a missing ring for its own requests). */
	uint32_t f = atomic_load_explicit(&p->ctl->flags, memory_order_relaxed);
	return (f & ALLM_RING_NEED_WAKEUP) != 0;
}
