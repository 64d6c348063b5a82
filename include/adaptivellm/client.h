/* libadaptivellm: the client side of AdaptiveLLM-C.
 *
 * A client connects to a running allm-engined over its Unix socket
 * ($ALLM_RUNTIME_DIR/<name>.sock), receives a shared-memory segment with two rings
 * (see protocol.h), then submits generation requests on the SQ ring and reads
 * their events (ACCEPTED, one TOKEN per generated token, FINAL) from the CQ ring.
 * No system call is needed per token while the client is busy polling; a client
 * that sleeps is woken through an eventfd doorbell.
 *
 *	struct allm_client_opts o = {0};            // all defaults
 *	allm_client_t *c;
 *	char err[256];
 *	if (allm_client_connect(&o, &c, err, sizeof(err)) < 0) { puts(err); ... }
 *	struct allm_request_params p;
 *	allm_request_params_init(&p);
 *	p.prompt = "Once upon a time"; p.prompt_len = strlen(p.prompt);
 *	p.params.temperature = 0;                 // params.h: every parameter
 *	allm_client_submit(c, &p);
 *	struct allm_event ev;
 *	while (allm_client_wait(c, &ev, -1) == 1) {
 *		if (ev.kind == ALLM_EVENT_TOKEN) fwrite(ev.text, 1, ev.text_len, stdout);
 *		if (ev.kind == ALLM_EVENT_FINAL) break;
 *	}
 *	allm_client_disconnect(c);
 *
 * Errors: every call returns 0 (or a count) on success and a negative errno on
 * failure; the library never prints, never exits and never raises a signal
 * (SIGPIPE included).
 *
 * Threads: a handle is used by one thread at a time (the calls keep private
 * state: the arena allocator, the ring views, the event text buffer); calls on
 * different handles are independent and may run in parallel. A program that wants
 * several threads submitting either opens one handle per thread or serializes
 * the calls on a shared handle with its own mutex. Each function below repeats
 * its own rule.
 *
 * Sticky failures: once a call has returned -EPIPE (the engine went away) or
 * -EPROTO (the engine wrote something the protocol forbids), the handle is dead:
 * every later call returns the same error. Disconnect it and connect again.
 *
 * Growing: struct allm_request_params ends with struct allm_params (params.h),
 * which carries its size, and struct allm_event is read by its size too (the
 * inline wrappers below pass sizeof as this program was built): new parameters
 * and new result fields need no new soname, and a program keeps working with a
 * newer library and engine (and an older one, as long as it sets nothing they
 * do not know).
 *
 * Link with `pkg-config --cflags --libs adaptivellm`.
 */
#ifndef ADAPTIVELLM_CLIENT_H
#define ADAPTIVELLM_CLIENT_H

#include <adaptivellm/params.h>
#include <adaptivellm/protocol.h>
#include <adaptivellm/version.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One connection to one engine. Opaque. */
typedef struct allm_client allm_client_t;

/* Connection options. Zero-initialize, then set what you need: every zero field
 * means "the default". */
struct allm_client_opts {
	const char *name;        /* engine name (allm-engined --name), default "default";
	                          * a plain file name: no '/' */
	const char *runtime_dir; /* where <name>.sock lives; default $ALLM_RUNTIME_DIR,
	                          * else $XDG_RUNTIME_DIR/adaptivellm, else
	                          * /tmp/adaptivellm-$UID */
	uint32_t sq_entries;     /* submission ring slots wanted; 0 = the engine's default
	                          * (the engine clamps and rounds to a power of two) */
	uint32_t cq_entries;     /* completion ring slots wanted; 0 = engine default */
	uint32_t arena_size;     /* prompt arena bytes wanted; 0 = engine default. It
	                          * bounds the bytes of prompts submitted but not yet
	                          * accepted, and the largest single prompt */
	bool posix_shm;          /* ask for a named shm_open() segment instead of a memfd: a
	                          * wish, granted by an engine run with --shm posix */
	int timeout_ms;          /* connect + handshake limit; 0 = 5000, < 0 = no limit */
	int spin_us;             /* allm_client_wait() busy-polls the ring this long before
	                          * it sleeps on the doorbell; 0 = 50, < 0 = never spin */
};

/* Connects to the engine and performs the handshake of protocol.h (hello, welcome
 * with the segment and doorbell fds, mapped ack). The socket then stays open as
 * the client's lease.
 * Returns 0 and a new handle in *ret (the caller owns it: allm_client_disconnect),
 * or a negative errno with *ret untouched and, when err != NULL, a one-line
 * message in err (always NUL-terminated, truncated to errlen):
 *   -ENOENT / -ECONNREFUSED / -EACCES ...  "cannot connect to PATH: ..." (no engine)
 *   -ETIMEDOUT  "no engine answers at PATH" (nothing answered within timeout_ms)
 *   -EPROTO     the engine's answer or segment is malformed, or from another ABI
 *   -EINVAL     bad options (name with '/', path too long for a socket, a bad
 *               $ALLM_ENGINE_UID)
 *   -EPERM      the runtime directory is not the engine's (owned by another uid,
 *               a symlink, writable by others) or the process listening runs as
 *               another uid (SO_PEERCRED): nothing was sent. The engine's uid is
 *               ours unless $ALLM_ENGINE_UID names another (an engine started by
 *               another user with --allow-uid).
 *   any negative status the engine refused us with, err holding its message.
 * Thread-safety: may be called from any thread; it touches no global state. */
int allm_client_connect(const struct allm_client_opts *opts, allm_client_t **ret, char *err,
                        size_t errlen);

/* Closes the lease socket, unmaps the segment and frees the handle. The engine
 * sees the socket close and cancels every request of this client still in flight.
 * Accepts NULL. Thread-safety: the handle must not be in use by another thread. */
void allm_client_disconnect(allm_client_t *c);

/* One generation request. Start from allm_request_params_init(). */
struct allm_request_params {
	const char *prompt;        /* UTF-8 text prompt (the engine tokenizes it) ... */
	size_t prompt_len;         /* ... of this many bytes (no NUL needed) */
	const int32_t *prompt_ids; /* or: token ids, taken as given (no BOS added) ... */
	size_t n_prompt_ids;       /* ... this many; exactly one of text / ids is set */
	uint64_t user_tag;         /* yours: echoed in every event of this request */
	const struct allm_logit_bias *logit_bias; /* added to those tokens' logits ... */
	uint32_t n_logit_bias;     /* ... this many (params.h: ALLM_LOGIT_BIAS_MAX, ids >= 0,
				    * biases in range); they travel in the arena */
	/* Everything else: length, sampling, penalties, log-probabilities, stop ids,
	 * cache salt. params.h's table gives each one's range, default and meaning.
	 * Last, so it grows without moving the members above (which never change):
	 * params.size, set by allm_request_params_init, says how much of it this
	 * program knows. */
	struct allm_params params;
};

/* Fills *p (size bytes: allm_request_params_init passes sizeof(*p)) with no
 * prompt and the table's defaults (max_tokens 128, temperature 1, every other
 * knob off). Returns 0, or -EINVAL when size is too small to be one.
 * Thread-safe (touches only *p). */
int allm_request_params_init_sized(struct allm_request_params *p, size_t size);
static inline void allm_request_params_init(struct allm_request_params *p)
{
	allm_request_params_init_sized(p, sizeof(*p));
}

/* Queues one request: copies the prompt into the shared arena and publishes an
 * SQE (ringing the engine's doorbell if it sleeps). Returns immediately; the
 * request's events arrive through allm_client_poll / allm_client_wait, the first
 * one being ACCEPTED (with the engine's request_id) or, if the engine refused the
 * request, a FINAL with finish_reason ALLM_FINISH_ERROR and request_id 0.
 * The caller may reuse the prompt memory as soon as this returns.
 * Returns:
 *   0        queued;
 *   -EAGAIN  the SQ ring or the prompt arena is full: consume events (arena space
 *            comes back when the engine accepts earlier requests), then retry;
 *   -EINVAL  bad parameters (no prompt or both kinds, empty prompt, negative id,
 *            a parameter outside its range (allm_params_check says which), a
 *            logit bias entry out of range or more than ALLM_LOGIT_BIAS_MAX);
 *   -E2BIG   (also) params set that this library does not know (a program
 *            built against a newer params.h than the library it runs with);
 *   -E2BIG   the prompt is larger than the whole arena (ask for a bigger
 *            arena_size when connecting);
 *   -ENOMEM, -EPIPE (engine gone), -EPROTO (handle dead).
 * Thread-safety: one thread per handle. */
int allm_client_submit(allm_client_t *c, const struct allm_request_params *p);

/* As allm_client_submit, constrained by a grammar: p->params.grammar_kind (enum
 * allm_grammar_kind, params.h) says what text[0..len) is: GBNF, a JSON Schema, a
 * regex, a JSON array of strings to choose from, or nothing (json_object, len 0).
 * The text travels in the arena beside the prompt (at most ALLM_GRAMMAR_TEXT_MAX
 * bytes). A grammar the engine cannot compile ends the request with a FINAL
 * ALLM_FINISH_ERROR whose error names the place ("GBNF line 3 col 7: ...",
 * "JSON Schema at /properties/a: ..."). Returns as allm_client_submit, and
 * -EINVAL for text without a kind or a kind (other than json_object) without
 * text, -E2BIG for a text longer than ALLM_GRAMMAR_TEXT_MAX. An engine older than
 * grammars refuses the request (a parameter it does not know). */
int allm_client_submit_grammar(allm_client_t *c, const struct allm_request_params *p, const char *text,
			       size_t len);

/* Asks the engine to cancel request_id (from its ACCEPTED event). The request
 * then ends with a FINAL event whose finish_reason is ALLM_FINISH_CANCELLED (or
 * its normal end, if that came first). Returns 0, -EAGAIN (SQ ring full: consume
 * events and retry), -EINVAL (request_id 0), -EPIPE, -EPROTO.
 * Thread-safety: one thread per handle. */
int allm_client_cancel(allm_client_t *c, uint64_t request_id);

enum allm_event_kind {
	ALLM_EVENT_ACCEPTED = 1, /* the engine took the request: request_id is valid */
	ALLM_EVENT_TOKEN = 2,    /* one generated token and its text piece */
	ALLM_EVENT_FINAL = 3,    /* the request ended; no more events for it */
};

/* A token's log-probabilities whole: its LOGPROBS entries joined (protocol.h). */
struct allm_logprobs {
	uint32_t index;  /* the token's index in the request's output */
	uint32_t n_top;  /* entries used in top, <= ALLM_LOGPROBS_MAX */
	struct allm_logprob sampled; /* the token sampled */
	struct allm_logprob top[ALLM_LOGPROBS_MAX]; /* the most likely, best first
						     * (lower id first on a tie) */
};

/* One event. Pointers in it stay valid until the next call on the same handle. */
struct allm_event {
	enum allm_event_kind kind;
	uint64_t user_tag;   /* the request's user_tag */
	uint64_t request_id; /* the engine's id; 0 in the FINAL of a refused request */
	/* TOKEN */
	int32_t token_id;    /* the sampled token; -1 for text the detokenizer held back
	                      * and flushed at the end (just before FINAL) */
	const char *text;    /* the token's whole text piece (reassembled if the engine
	                      * split it over several entries), UTF-8, NOT NUL-terminated
	                      * ... */
	size_t text_len;     /* ... this many bytes; may be 0 (a token whose text is
	                      * still incomplete UTF-8 arrives with a later one) */
	const struct allm_cqe_logprobs *logprobs; /* the token's log-probabilities when
	                      * the request asked (params.logprobs), else NULL: its
	                      * first ALLM_CQE_LOGPROBS_TOP alternatives (what a
	                      * program built before all_logprobs can read) */
	/* FINAL */
	int finish_reason;   /* enum allm_finish_reason (protocol.h) */
	int32_t status;      /* 0, or a negative errno with ALLM_FINISH_ERROR */
	const char *error;   /* ALLM_FINISH_ERROR: the engine's message (NUL-terminated);
	                      * NULL otherwise */
	/* the finish record's counters (protocol.h, ALLM_FINAL_FIELDS: queue_us,
	 * ttft_us, total_us, n_prompt, n_generated, n_preemptions, n_cached) */
	ALLM_FINAL_FIELDS(ALLM_FINAL_DECL_)
	/* TOKEN: every alternative the request asked for (up to ALLM_LOGPROBS_MAX),
	 * NULL exactly when logprobs is */
	const struct allm_logprobs *all_logprobs;
	/* new fields go here, at the end (read by size: allm_client_poll) */
};
/* The sizes struct allm_event had, oldest first; VER0 is the least a caller
 * may pass. */
#define ALLM_EVENT_SIZE_VER0 112
#define ALLM_EVENT_SIZE_VER1 120 /* + all_logprobs */

/* Takes the next event without blocking. Returns 1 (an event in *ev), 0 (none
 * ready), -EPIPE (the engine went away: the lease socket hung up; events the
 * engine published before dying are still delivered first), -EPROTO (the engine
 * wrote a malformed entry; the handle is dead).
 * When it returns 0 it has asked the engine to ring the doorbell on the next
 * entry, so a caller with its own event loop may now sleep until
 * allm_client_fd() is readable (and allm_client_lease_fd() for a hang-up), then
 * call allm_client_poll() again (which also empties the doorbell).
 * ev_size: sizeof(struct allm_event) as the caller was built (the inline
 * allm_client_poll passes it): the library fills that much (-EINVAL below
 * ALLM_EVENT_SIZE_VER0).
 * Thread-safety: one thread per handle. */
int allm_client_poll_sized(allm_client_t *c, struct allm_event *ev, size_t ev_size);
static inline int allm_client_poll(allm_client_t *c, struct allm_event *ev)
{
	return allm_client_poll_sized(c, ev, sizeof(*ev));
}

/* Takes the next event, blocking for up to timeout_ms (-1: forever, 0: like
 * allm_client_poll): it busy-polls the ring for spin_us first (the lowest
 * latency while tokens are flowing), then sleeps on the CQ doorbell and the
 * lease socket. Returns 1 (event), 0 (timeout), -EINTR (a signal arrived while
 * sleeping; nothing is lost, call again), -EPIPE, -EPROTO. ev_size as for
 * allm_client_poll_sized.
 * Thread-safety: one thread per handle. */
int allm_client_wait_sized(allm_client_t *c, struct allm_event *ev, size_t ev_size, int timeout_ms);
static inline int allm_client_wait(allm_client_t *c, struct allm_event *ev, int timeout_ms)
{
	return allm_client_wait_sized(c, ev, sizeof(*ev), timeout_ms);
}

/* The CQ doorbell (an eventfd) for the caller's own poll/epoll loop: readable
 * after the engine published entries while the client slept (see
 * allm_client_poll). Do not read or close it. Thread-safety: any thread. */
int allm_client_fd(allm_client_t *c);

/* The lease socket, for the caller's own loop: readable or hung up once the
 * engine went away. Do not read, write or close it. Thread-safety: any thread. */
int allm_client_lease_fd(allm_client_t *c);

/* The model the engine serves (from its welcome message), NUL-terminated, owned
 * by the handle. Thread-safety: any thread. */
const char *allm_client_model(allm_client_t *c);

/* The engine's number for this client (from its welcome; allmctl shows it).
 * Thread-safety: any thread. */
uint32_t allm_client_id(allm_client_t *c);

/* A finish reason as a word: "none", "eos", "length", "stop", "cancelled",
 * "error", or "unknown". Static strings; thread-safe. */
const char *allm_finish_reason_name(int finish_reason);

#ifdef __cplusplus
}
#endif

#endif
