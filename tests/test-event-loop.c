/* Description: the event loop (io_uring, and its epoll fallback) delivers readiness, re-arms, survives unwatch from inside a callback and fd reuse, reports hang-ups, and times out when idle. */
#include "event-loop.h"
#include "test-check.h"

#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct counter {
	int calls;
	uint32_t last;
	bool drain; /* read the eventfd so it stops being readable */
	bool unwatch_self;
};

static void on_event(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	struct counter *c = user;
	c->calls++;
	c->last = revents;
	if (c->drain) {
		uint64_t v;
		if (read(fd, &v, sizeof(v)) < 0) {
		}
	}
	if (c->unwatch_self)
		allm_loop_unwatch(l, fd);
}

static void poke(int efd)
{
	uint64_t one = 1;
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		abort();
}

/* Runs the loop until cond or 200 rounds of 10 ms. */
#define RUN_UNTIL(l, cond) \
	for (int _i = 0; _i < 200 && !(cond); _i++) \
	allm_loop_run_once(l, 10)

static void run(bool force_epoll)
{
	struct allm_loop *l = NULL;
	struct allm_err err = {{0}};
	if (allm_loop_create(force_epoll, &l, &err)) {
		CHECK(0, "create: %s", err.msg);
		return;
	}
	const char *be = allm_loop_backend(l);
	printf("backend %s (uring error %d)\n", be, allm_loop_uring_error(l));
	if (force_epoll)
		CHECK(!strcmp(be, "epoll"), "forced epoll but got %s", be);

	/* 1. readiness, delivered once per event after draining, and re-armed */
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct counter c = {.drain = true};
	CHECK(allm_loop_watch(l, efd, POLLIN, on_event, &c) == 0, "%s: watch", be);
	CHECK(allm_loop_watch(l, efd, POLLIN, on_event, &c) == -EEXIST, "%s: second watch accepted", be);
	CHECK(allm_loop_run_once(l, 20) == 0 && c.calls == 0, "%s: event without a write", be);
	for (int i = 1; i <= 5; i++) {
		poke(efd);
		RUN_UNTIL(l, c.calls >= i);
		CHECK(c.calls == i && (c.last & POLLIN), "%s: write %d gave %d calls", be, i, c.calls);
	}
	/* 2. unwatch: no more callbacks, even with the fd readable */
	CHECK(allm_loop_unwatch(l, efd) == 0, "%s: unwatch", be);
	CHECK(allm_loop_unwatch(l, efd) == -ENOENT, "%s: double unwatch", be);
	poke(efd);
	for (int i = 0; i < 5; i++)
		allm_loop_run_once(l, 5);
	CHECK(c.calls == 5, "%s: callback after unwatch (%d)", be, c.calls);
	close(efd);

	/* 3. fd number reuse after close: the new watcher gets its own events only */
	int efd2 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct counter c2 = {.drain = true};
	CHECK(allm_loop_watch(l, efd2, POLLIN, on_event, &c2) == 0, "%s: watch reused fd", be);
	poke(efd2);
	RUN_UNTIL(l, c2.calls >= 1);
	CHECK(c2.calls == 1 && c.calls == 5, "%s: reuse: %d / %d calls", be, c2.calls, c.calls);

	/* 4. unwatch from inside the callback, fd left readable */
	struct counter c3 = {.unwatch_self = true};
	allm_loop_unwatch(l, efd2);
	CHECK(allm_loop_watch(l, efd2, POLLIN, on_event, &c3) == 0, "%s: rewatch", be);
	poke(efd2);
	RUN_UNTIL(l, c3.calls >= 1);
	for (int i = 0; i < 5; i++)
		allm_loop_run_once(l, 5);
	CHECK(c3.calls == 1, "%s: self-unwatch got %d calls", be, c3.calls);
	close(efd2);

	/* 5. hang-up of a peer socket (a client that died) */
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	struct counter c4 = {.unwatch_self = true};
	CHECK(allm_loop_watch(l, sv[0], POLLIN, on_event, &c4) == 0, "%s: watch socket", be);
	close(sv[1]);
	RUN_UNTIL(l, c4.calls >= 1);
	CHECK(c4.calls == 1 && (c4.last & (POLLHUP | POLLIN)), "%s: hang-up: %d calls, revents %#x", be,
	      c4.calls, c4.last);
	close(sv[0]);

	/* 6. many fds at once: each fires exactly once */
	enum { N = 100 };
	int fds[N];
	struct counter cs[N];
	memset(cs, 0, sizeof(cs));
	for (int i = 0; i < N; i++) {
		fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		cs[i].drain = true;
		CHECK(allm_loop_watch(l, fds[i], POLLIN, on_event, &cs[i]) == 0, "%s: watch %d", be, i);
		poke(fds[i]);
	}
	int total = 0;
	for (int r = 0; r < 200 && total < N; r++) {
		allm_loop_run_once(l, 10);
		total = 0;
		for (int i = 0; i < N; i++)
			total += cs[i].calls;
	}
	CHECK(total == N, "%s: %d fds ready, %d callbacks", be, N, total);
	for (int i = 0; i < N; i++) {
		allm_loop_unwatch(l, fds[i]);
		close(fds[i]);
	}
	/* 7. idle: a timeout, no callback */
	double t0 = allm_now();
	CHECK(allm_loop_run_once(l, 50) == 0, "%s: idle run dispatched something", be);
	CHECK(allm_now() - t0 >= 0.03, "%s: idle run returned after %.3f s", be, allm_now() - t0);
	allm_loop_free(l);
}

int main(void)
{
	run(false);
	run(true);
	return n_fail ? 1 : 0;
}
