/* The daemon's event loop (DESIGN §8): one io_uring watches every fd the engine
 * serves — the listening socket, client sockets, doorbell eventfds, ZeroMQ's
 * ZMQ_FD, a timerfd — with one-shot polls re-armed after each event. Where
 * io_uring is unavailable (containers, kernel.io_uring_disabled) the same API runs
 * on epoll, and allm_loop_backend() says which, for one log line.
 *
 * Single-threaded: every call on the loop's thread. A watcher's callback may
 * watch and unwatch any fd, its own included. */
#ifndef ALLM_EVENT_LOOP_H
#define ALLM_EVENT_LOOP_H

#include "common.h"

#include <poll.h>

struct allm_loop;

/* Called with the poll events that fired (POLLIN, POLLOUT, POLLHUP, POLLERR...). */
typedef void (*allm_loop_fn)(struct allm_loop *l, int fd, uint32_t revents, void *user);

/* force_epoll: skip io_uring (tests; allm-engined with ALLM_NO_IO_URING=1). */
int allm_loop_create(bool force_epoll, struct allm_loop **ret, struct allm_err *err);
void allm_loop_free(struct allm_loop *l);

/* Watches fd for events (POLLIN and/or POLLOUT) until unwatched: after each
 * delivery the poll is re-armed. One watcher per fd: -EEXIST for a second. */
int allm_loop_watch(struct allm_loop *l, int fd, uint32_t events, allm_loop_fn fn, void *user);
/* Stops watching fd; no callback for it runs after this returns. -ENOENT if not
 * watched. The caller may close fd right after. */
int allm_loop_unwatch(struct allm_loop *l, int fd);

/* Waits up to timeout_ms (0 = poll, -1 = forever) for events and dispatches them.
 * Returns the number of callbacks run, or -errno. */
int allm_loop_run_once(struct allm_loop *l, int timeout_ms);

/* "io_uring" or "epoll". */
const char *allm_loop_backend(const struct allm_loop *l);
/* Why io_uring was not used (-errno of io_uring_queue_init), 0 when it is. */
int allm_loop_uring_error(const struct allm_loop *l);

#endif
