#include "event-loop.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

/* A watched fd. With io_uring, the watcher's address is the poll's user_data, so
 * an unwatched watcher must outlive its poll: it is parked as a zombie until the
 * kernel reports that poll finished (its completion or the cancellation's). */
struct watcher {
	int fd;
	uint32_t events;
	allm_loop_fn fn;
	void *user;
	bool armed; /* a poll is in flight (io_uring) */
	bool zombie; /* unwatched; freed when its poll completes */
	struct watcher *next;
};

struct allm_loop {
	bool uring; /* true: io_uring; false: epoll */
	int uring_err;
	struct io_uring ring;
	int epfd;
	struct watcher *watchers; /* live and zombie, singly linked */
};

/* user_data of poll-remove requests: their completions carry no watcher. */
#define CANCEL_TAG 1ull

static int uring_arm(struct allm_loop *l, struct watcher *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
	if (!sqe) {
		io_uring_submit(&l->ring); /* make room, then retry once */
		sqe = io_uring_get_sqe(&l->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_poll_add(sqe, w->fd, w->events);
	io_uring_sqe_set_data(sqe, w);
	w->armed = true;
	return 0;
}

int allm_loop_create(bool force_epoll, struct allm_loop **ret, struct allm_err *err)
{
	struct allm_loop *l = allm_calloc(1, sizeof(*l));
	if (!l)
		return allm_err_set(err, -ENOMEM, "out of memory");
	l->epfd = -1;
	if (force_epoll) {
		l->uring_err = -ENOTSUP;
	} else {
		l->uring_err = io_uring_queue_init(256, &l->ring, 0);
		l->uring = l->uring_err == 0;
	}
	if (!l->uring) {
		l->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (l->epfd < 0) {
			int r = -errno;
			allm_free(l);
			return allm_err_set(err, r, "epoll_create1: %s", strerror(-r));
		}
	}
	*ret = l;
	return 0;
}

static struct watcher *find(struct allm_loop *l, int fd)
{
	for (struct watcher *w = l->watchers; w; w = w->next)
		if (w->fd == fd && !w->zombie)
			return w;
	return NULL;
}

static void unlink_free(struct allm_loop *l, struct watcher *dead)
{
	for (struct watcher **p = &l->watchers; *p; p = &(*p)->next)
		if (*p == dead) {
			*p = dead->next;
			allm_free(dead);
			return;
		}
}

void allm_loop_free(struct allm_loop *l)
{
	if (!l)
		return;
	if (l->uring)
		io_uring_queue_exit(&l->ring); /* cancels every poll in flight */
	if (l->epfd >= 0)
		close(l->epfd);
	while (l->watchers) {
		struct watcher *w = l->watchers;
		l->watchers = w->next;
		allm_free(w);
	}
	allm_free(l);
}

int allm_loop_watch(struct allm_loop *l, int fd, uint32_t events, allm_loop_fn fn, void *user)
{
	if (fd < 0 || !fn)
		return -EINVAL;
	if (find(l, fd))
		return -EEXIST;
	struct watcher *w = allm_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->events = events;
	w->fn = fn;
	w->user = user;
	int r;
	if (l->uring) {
		r = uring_arm(l, w);
	} else {
		struct epoll_event ev = {.events = events, .data.ptr = w};
		r = epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
	}
	if (r) {
		allm_free(w);
		return r;
	}
	w->next = l->watchers;
	l->watchers = w;
	return 0;
}

int allm_loop_unwatch(struct allm_loop *l, int fd)
{
	struct watcher *w = find(l, fd);
	if (!w)
		return -ENOENT;
	if (!l->uring) {
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		unlink_free(l, w);
		return 0;
	}
	w->zombie = true; /* no callback from now on */
	if (!w->armed) {
		unlink_free(l, w);
		return 0;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
	if (!sqe) {
		io_uring_submit(&l->ring);
		sqe = io_uring_get_sqe(&l->ring);
	}
	if (sqe) {
		io_uring_prep_poll_remove(sqe, (__u64)(uintptr_t)w);
		io_uring_sqe_set_data64(sqe, CANCEL_TAG);
		/* submitted now: the caller may close fd right after we return */
		io_uring_submit(&l->ring);
	}
	return 0;
}

static int run_uring(struct allm_loop *l, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	int r, n = 0;
	io_uring_submit(&l->ring); /* re-arms queued by callbacks */
	if (timeout_ms < 0) {
		r = io_uring_wait_cqe(&l->ring, &cqe);
	} else {
		struct __kernel_timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};
		r = io_uring_wait_cqe_timeout(&l->ring, &cqe, &ts);
	}
	if (r == -ETIME || r == -EINTR)
		return 0;
	if (r < 0)
		return r;
	/* Drain what is ready now; callbacks may queue new polls, submitted next round. */
	unsigned head, seen = 0;
	struct watcher *ready[64];
	int32_t res[64];
	int k = 0;
	io_uring_for_each_cqe(&l->ring, head, cqe) {
		seen++;
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		if (tag == CANCEL_TAG)
			continue;
		struct watcher *w = io_uring_cqe_get_data(cqe);
		w->armed = false;
		if (k < (int)ALLM_ARRAY_SIZE(ready)) {
			ready[k] = w;
			res[k++] = cqe->res;
		} else {
			/* too many at once: re-arm, it fires again next round */
			if (!w->zombie)
				uring_arm(l, w);
		}
		if (k == (int)ALLM_ARRAY_SIZE(ready))
			break;
	}
	io_uring_cq_advance(&l->ring, seen);
	for (int i = 0; i < k; i++) {
		struct watcher *w = ready[i];
		if (w->zombie) {
			unlink_free(l, w);
			continue;
		}
		if (res[i] == -ECANCELED)
			continue;
		/* re-arm before the callback so it may unwatch (zombie) cleanly */
		uring_arm(l, w);
		uint32_t revents = res[i] < 0 ? POLLERR : (uint32_t)res[i];
		w->fn(l, w->fd, revents, w->user);
		n++;
	}
	io_uring_submit(&l->ring);
	return n;
}

static int run_epoll(struct allm_loop *l, int timeout_ms)
{
	struct epoll_event evs[64];
	int got = epoll_wait(l->epfd, evs, (int)ALLM_ARRAY_SIZE(evs), timeout_ms);
	if (got < 0)
		return errno == EINTR ? 0 : -errno;
	int n = 0;
	for (int i = 0; i < got; i++) {
		struct watcher *w = evs[i].data.ptr;
		/* an earlier callback in this batch may have unwatched it */
		bool live = false;
		for (struct watcher *x = l->watchers; x; x = x->next)
			if (x == w)
				live = true;
		if (!live)
			continue;
		w->fn(l, w->fd, evs[i].events, w->user);
		n++;
	}
	return n;
}

int allm_loop_run_once(struct allm_loop *l, int timeout_ms)
{
	if (!l->uring)
		return run_epoll(l, timeout_ms);
	/* completions of cancelled polls wake the ring without running a callback:
	 * keep waiting until something runs or the time is up */
	double deadline = allm_now() + timeout_ms / 1000.0;
	for (;;) {
		int n = run_uring(l, timeout_ms);
		if (n != 0 || timeout_ms == 0)
			return n;
		if (timeout_ms > 0) {
			double left = deadline - allm_now();
			if (left <= 0)
				return 0;
			timeout_ms = (int)(left * 1000.0) + 1;
		}
	}
}

const char *allm_loop_backend(const struct allm_loop *l)
{
	return l->uring ? "io_uring" : "epoll";
}

int allm_loop_uring_error(const struct allm_loop *l)
{
	return l->uring ? 0 : l->uring_err;
}
