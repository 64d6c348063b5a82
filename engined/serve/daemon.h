/* allm-engined's private state: the engine, the event loop, and the clients that
 * talk to it through shared-memory rings (DESIGN §2, §8). */
#ifndef ALLM_DAEMON_H
#define ALLM_DAEMON_H

#include "engine.h"
#include "event-loop.h"
#include "runtime.h"
#include "grammar.h"

#include "adaptivellm/protocol.h"
#include "shm-doorbell.h"
#include "shm-segment.h"

#include <stdarg.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Most CQEs a client may leave undrained before its requests fail. */
#define ALLM_D_BACKLOG_MAX 4096
/* Room above that for the FINAL entries of those failures; a FINAL that finds no
 * room waits in its request's struct dreq instead (never dropped). */
#define ALLM_D_BACKLOG_HARD (ALLM_D_BACKLOG_MAX + 1024)
/* SQEs taken from one client per loop turn, so one busy client cannot starve others. */
#define ALLM_D_SQ_BATCH 64

/* Defaults of the limits on what peers can make the engine hold (DESIGN §8);
 * each is an allm-engined flag. */
#define ALLM_D_MAX_CLIENTS 64 /* --max-clients */
#define ALLM_D_HANDSHAKE_S 2.0 /* --handshake-timeout: accept -> mapped ack */
#define ALLM_D_MAX_QUEUED 16384 /* --max-queued: requests in flight, all clients */
#define ALLM_D_MAX_QUEUED_UID 8192 /* --max-queued-per-uid */
#define ALLM_D_MAX_QUEUED_CLIENT 4096 /* --max-queued-per-client */
#define ALLM_D_MAX_PROMPT_BYTES (INT64_C(256) << 20) /* --max-prompt-bytes (4 B a token) */
#define ALLM_D_MAX_PROMPT_BYTES_UID (INT64_C(128) << 20) /* --max-prompt-bytes-per-uid */
/* A refused uid's connections are logged one line per this many seconds at most. */
#define ALLM_D_REFUSED_LOG_S 10.0
/* File descriptors a client costs (socket, two doorbells, segment) and those kept
 * free for everything else: the control plane's peers (libzmq aborts when an
 * accept of its own fails with EMFILE), weight files, calibration. */
#define ALLM_D_FDS_PER_CLIENT 4
#define ALLM_D_FD_RESERVE 96

#include "ctl-kvevents-sec.h"
#include "ctl-server.h"

enum dclient_state {
	DC_HELLO, /* waiting for struct allm_hello */
	DC_ACK, /* welcome sent, waiting for the mapped ack */
	DC_READY, /* serving */
	DC_DEAD, /* hung up: reaped at the end of the loop turn */
};

/* What one uid holds (the per-uid caps); one per uid the engine serves. */
struct duid {
	uid_t uid;
	int64_t queued; /* requests in flight */
	int64_t prompt_bytes; /* their prompts, 4 bytes a token */
};

struct dreq;

struct dclient {
	struct daemon *d;
	uint32_t id;
	int sock; /* the lease */
	uid_t uid;
	pid_t pid; /* from SO_PEERCRED at accept, for the control plane's client list */
	struct duid *acct; /* its uid's account */
	enum dclient_state state;
	double born; /* accepted at (allm_now): the handshake must end by born + timeout */
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
	struct dreq *reqs; /* its requests in flight and FINALs owed: found in O(1) */
	uint32_t n_owed; /* FINALs waiting in their dreq for room */
	int64_t inflight; /* requests in the engine */
	int64_t prompt_bytes; /* their prompts, 4 bytes a token */
	uint64_t submitted, rejected;
	struct dclient *next;
};

/* Per engine request (allm_request.user), on its client's list from submit until
 * the client has its FINAL (or is gone). */
struct dreq {
	struct dclient *c; /* NULL once the client is gone */
	struct dreq *prev, *next; /* c->reqs */
	struct allm_request *r; /* the engine's, NULL once finished */
	int64_t id; /* r->id, for CANCEL */
	uint64_t user_tag;
	struct duid *acct; /* its uid's account (d->uids: outlives the client) */
	int64_t prompt_bytes; /* what it counts against the caps */
	struct allm_detok *detok; /* NULL when the model has no tokenizer */
	uint32_t n_gen;
	bool owed; /* finished, its FINAL below waits for room in the client's CQ */
	struct allm_cqe final;
};

struct daemon {
	struct allm_runtime *rt;
	/* grammars (issue 51): the model's tokens as bytes, the compiled grammars
	 * by hash (shared across requests and clients: a grammar holds no prompt),
	 * and where a request's text is copied out of its arena; NULL without a
	 * tokenizer */
	struct allm_grammar_vocab *gvocab;
	struct allm_grammar_cache *grammars;
	char *grammar_buf; /* [ALLM_GRAMMAR_TEXT_MAX] */
	struct allm_engine *eng;
	struct allm_predictor *pred;
	struct allm_loop *loop;
	const char *name;
	char runtime_dir[512];
	int runtime_fd; /* the runtime directory, opened and checked: the socket is made in it */
	char sock_name[80]; /* NAME.sock, in runtime_fd */
	char sock_path[600];
	/* .NAME.sock: bound here first, renamed to sock_name once the control plane is
	 * up and "serving" is logged, so that the socket appearing means the engine is
	 * ready (a script or test waiting for it may run allmctl at once) */
	char sock_tmp_name[82];
	bool sock_published;
	int listen_fd;
	bool listen_watched; /* false while paused: at --max-clients or out of fds */
	bool listen_paused; /* paused by a limit (not by shutdown): say when it resumes */
	double listen_retry; /* out of fds: when to try accepting again */
	double limit_logged; /* when "at the client limit" was last said */
	double refused_logged; /* when a refused uid was last said (0: never) */
	uint64_t refused_quiet; /* refusals not logged since */
	int signal_fd; /* eventfd the signal handler bumps */
	int tick_fd; /* timerfd, 10 Hz */
	bool posix_shm; /* --shm posix */
	bool share_prefix_cache; /* --share-prefix-cache: cached blocks shared across uids */
	struct ctl_kvevents_opts kv_events; /* --kv-events-*: endpoint NULL (off) by default */
	char kv_events_topic[256]; /* --kv-events-topic; default kv@NAME@MODEL (llm-d's form) */
	bool kv_events_topic_set;
	uid_t allow_uids[16];
	int n_allow_uids;
	struct duid uids[17]; /* accounts: our uid and each --allow-uid, made on first use */
	int n_uids;
	enum allm_log_level log_level;
	struct dclient *clients;
	uint32_t next_client_id;
	int n_clients; /* on the list, any state: what --max-clients bounds */
	/* limits (flags; the defaults above) */
	int max_clients;
	double handshake_timeout;
	int64_t max_queued, max_queued_uid, max_queued_client;
	int64_t max_prompt_bytes, max_prompt_bytes_uid;
	int64_t queued, prompt_bytes; /* held now, all clients */
	/* prompts are refused by length before they are copied: a token prompt
	 * longer than the context, a text longer than max_text_bytes (which could
	 * not encode into the context); the copy goes to prompt_buf, sized for the
	 * longer of the two */
	size_t max_text_bytes;
	uint8_t *prompt_buf;
	size_t prompt_buf_cap;
	/* one decoded piece of a request's text (allm_detok_piece_cap: any token's) */
	char *piece;
	size_t piece_cap;
	bool draining; /* SIGTERM or `shutdown`: no new work, finish what is in flight, exit */
	bool paused; /* `drain` (control plane): no new work, but the engine stays up */
	struct ctl_server *ctl; /* the control plane; NULL if it could not start */
	char profile_path[4096]; /* where `calibrate` saves the predictor profile, or "" */
	double drain_deadline; /* shutdown: everything ends by then */
	double shutdown_timeout;
	bool stop;
};

void dlog(const struct daemon *d, enum allm_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void vdlog(const struct daemon *d, enum allm_log_level level, const char *fmt, va_list ap);
/* Stops admitting work (the socket goes, submissions get a FINAL error), lets
 * what is in flight finish within --shutdown-timeout, then the daemon exits 0:
 * SIGTERM/SIGINT and the control plane's `shutdown` both end up here. */
void daemon_begin_shutdown(struct daemon *d, const char *why);

/* daemon-client.c: sessions */
void daemon_on_listen(struct allm_loop *l, int fd, uint32_t revents, void *user);
/* A new connection s (ours now) from the peer cr: refused (a welcome saying why,
 * then closed) or on the client list waiting for its hello. */
void daemon_client_add(struct daemon *d, int s, const struct ucred *cr);
/* A ready client over a new segment with no socket (the fuzz target). */
int daemon_client_attach(struct daemon *d, const struct allm_shm_layout *want,
			 struct dclient **ret);
/* Pushes backlogged CQEs and owed FINALs, rings CQ doorbells, reaps dead clients. */
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
/* The periodic work of sessions (the 10 Hz tick): handshakes past their
 * timeout are closed, a listener paused for want of fds tries again. */
void daemon_client_tick(struct daemon *d, double now);
/* Starts and stops watching the listening socket (at --max-clients, out of fds). */
void daemon_listen_pause(struct daemon *d);
void daemon_listen_resume(struct daemon *d);
/* The account of uid (made on first use); NULL when the table is full. */
struct duid *daemon_uid_account(struct daemon *d, uid_t uid);

/* daemon-request.c: requests */
/* The limits' defaults (ALLM_D_*), before flags change them. */
void daemon_limits_default(struct daemon *d);
/* Sizes the prompt limits, the buffer prompts are copied to and the one text
 * pieces are decoded to from the model (context, tokenizer). 0 or -ENOMEM. */
int daemon_prompt_limits(struct daemon *d);
/* Drains every client's SQ (bounded per client) into the engine. */
void daemon_pump_sq(struct daemon *d);
/* Handles one SQE (already copied out of the ring) from client c. */
void daemon_handle_sqe(struct daemon *d, struct dclient *c, const struct allm_sqe *q);
/* Whether c's backlog can take one more CQE (the answer to one SQE): pumping
 * stops before an SQE whose answer would have nowhere to go. */
bool daemon_can_answer(struct dclient *c);
/* Cancels every request of client c (their FINALs go out through on_finish);
 * with forget, c is going away: its requests end without writing to it and its
 * owed FINALs are dropped. O(its requests): no scan of the engine's queues. */
void daemon_cancel_requests(struct daemon *d, struct dclient *c, bool forget);
/* Moves owed FINALs of c into its CQ or backlog while there is room. */
void daemon_push_owed(struct daemon *d, struct dclient *c);
/* Engine events: tokens and finishes become CQEs. */
void daemon_on_token(void *user, const struct allm_token_out *t);
void daemon_on_finish(void *user, const struct allm_result *res);

#endif
