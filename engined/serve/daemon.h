/* allm-engined's private state: the engine, the event loop, and the clients that
 * talk to it through shared-memory rings (DESIGN §2, §8). */
#ifndef ALLM_DAEMON_H
#define ALLM_DAEMON_H

#include "engine.h"
#include "event-loop.h"
#include "runtime.h"

#include "adaptivellm/protocol.h"
#include "shm-doorbell.h"
#include "shm-segment.h"

#include <stdarg.h>
#include <sys/types.h>

/* Most CQEs a client may leave undrained before its requests fail. */
#define ALLM_D_BACKLOG_MAX 4096
/* Room above that for the FINAL entries of those failures. */
#define ALLM_D_BACKLOG_HARD (ALLM_D_BACKLOG_MAX + 1024)
/* Requests one client may have in flight. */
#define ALLM_D_MAX_INFLIGHT 4096
/* SQEs taken from one client per loop turn, so one busy client cannot starve others. */
#define ALLM_D_SQ_BATCH 64

#include "ctl-server.h"

enum dclient_state {
	DC_HELLO, /* waiting for struct allm_hello */
	DC_ACK, /* welcome sent, waiting for the mapped ack */
	DC_READY, /* serving */
	DC_DEAD, /* hung up: reaped at the end of the loop turn */
};

struct dclient {
	struct daemon *d;
	uint32_t id;
	int sock; /* the lease */
	uid_t uid;
	pid_t pid; /* from SO_PEERCRED at accept, for the control plane's client list */
	enum dclient_state state;
	uint8_t hello_buf[sizeof(struct allm_hello)];
	size_t hello_got;
	struct allm_shm_segment *seg;
	struct allm_ring_cons sq; /* the engine consumes the SQ */
	struct allm_ring_prod cq; /* and produces the CQ */
	struct allm_doorbell sq_db, cq_db;
	bool cq_pushed; /* entries pushed this turn: maybe ring cq_db */
	struct allm_cqe *backlog; /* ring of CQEs the CQ had no room for */
	uint32_t bl_head, bl_n, bl_cap;
	bool stalled; /* backlog overflowed: its requests are failed */
	bool stall_handled; /* ...and that was done */
	int64_t inflight;
	uint64_t submitted, rejected;
	uint8_t *prompt_buf; /* arena_size bytes: private copy of one prompt */
	struct dclient *next;
};

/* Per engine request (allm_request.user). */
struct dreq {
	struct dclient *c; /* NULL once the client is gone */
	uint64_t user_tag;
	struct allm_detok *detok; /* NULL when the model has no tokenizer */
	uint32_t n_gen;
};

struct daemon {
	struct allm_runtime *rt;
	struct allm_engine *eng;
	struct allm_predictor *pred;
	struct allm_loop *loop;
	const char *name;
	char runtime_dir[512];
	char sock_path[600];
	int listen_fd;
	int signal_fd; /* eventfd the signal handler bumps */
	int tick_fd; /* timerfd, 10 Hz */
	bool posix_shm; /* --shm posix */
	uid_t allow_uids[16];
	int n_allow_uids;
	int log_level; /* 0 error, 1 warn, 2 info, 3 debug */
	struct dclient *clients;
	uint32_t next_client_id;
	bool draining; /* SIGTERM or `shutdown`: no new work, finish what is in flight, exit */
	bool paused; /* `drain` (control plane): no new work, but the engine stays up */
	struct ctl_server *ctl; /* the control plane; NULL if it could not start */
	char profile_path[4096]; /* where `calibrate` saves the predictor profile, or "" */
	double drain_deadline;
	double shutdown_timeout;
	bool stop;
};

void dlog(const struct daemon *d, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void vdlog(const struct daemon *d, int level, const char *fmt, va_list ap);
/* Stops admitting work (the socket goes, submissions get a FINAL error), lets
 * what is in flight finish within --shutdown-timeout, then the daemon exits 0:
 * SIGTERM/SIGINT and the control plane's `shutdown` both end up here. */
void daemon_begin_shutdown(struct daemon *d, const char *why);

/* daemon-client.c: sessions */
void daemon_on_listen(struct allm_loop *l, int fd, uint32_t revents, void *user);
/* A ready client over a new segment with no socket (the fuzz target). */
int daemon_client_attach(struct daemon *d, const struct allm_shm_layout *want,
			 struct dclient **ret);
/* Pushes backlogged CQEs, rings CQ doorbells, reaps dead clients. */
void daemon_flush(struct daemon *d);
/* Before the loop sleeps: sets NEED_WAKEUP on every ready client's SQ; false
 * (flags cleared again) when some SQ already has entries. */
bool daemon_prepare_sleep(struct daemon *d);
void daemon_finish_sleep(struct daemon *d);
/* Closes every client (shutdown). */
void daemon_close_clients(struct daemon *d);
/* The control plane's client list: returns how many clients are ready and
 * fills up to max of them (a struct ctl_host op; user is the daemon). */
uint32_t daemon_client_list(void *user, struct ctl_client_info *ret, uint32_t max);
/* Whether some client still has CQEs waiting for room. */
bool daemon_backlogged(const struct daemon *d);

/* daemon-request.c: requests */
/* Drains every client's SQ (bounded per client) into the engine. */
void daemon_pump_sq(struct daemon *d);
/* Handles one SQE (already copied out of the ring) from client c. */
void daemon_handle_sqe(struct daemon *d, struct dclient *c, const struct allm_sqe *q);
/* Cancels every request of client c (on_finish sends their FINALs); c NULL: the
 * requests whose client is gone. */
void daemon_cancel_requests(struct daemon *d, struct dclient *c);
/* Engine events: tokens and finishes become CQEs. */
void daemon_on_token(void *user, struct allm_request *r, int32_t token);
void daemon_on_finish(void *user, struct allm_request *r);

#endif
