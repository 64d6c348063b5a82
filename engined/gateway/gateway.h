/* allm-gateway's pieces (DESIGN §9b): an OpenAI-compatible HTTP server (libmicrohttpd)
 * in front of one engine, which it reaches as an ordinary ring client
 * (libadaptivellm) and, for /metrics, through the control plane (liballm-ctl).
 *
 * Threads: libmicrohttpd's pool runs the HTTP side (gw-http.c: parsing, tokenizing,
 * responses); one pump thread (gw-engine.c) owns the ring client and moves
 * requests in and events out. They meet in struct gw_req under gw->lock. A
 * connection waiting for the engine is suspended in libmicrohttpd and resumed by
 * the pump when there is something to send. */
#ifndef ALLM_GATEWAY_H
#define ALLM_GATEWAY_H

#include "chat-template.h"
#include "gw-cors.h"
#include "gw-opts.h"
#include "gw-text.h"
#include "tokenizer.h"

#include <adaptivellm/client.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct MHD_Connection;
struct MHD_Daemon;
struct pollfd;
struct gw_scrape;
struct allm_ctl_client;


/* What the gateway knows of the model the engine serves: immutable once built,
 * shared by reference count (a reconnect to an engine serving another model
 * swaps it while old requests still hold the previous one). */
struct gw_model {
	atomic_int refs;
	char id[256];            /* the model id of /v1/models and the `model` field */
	struct allm_tokenizer *tok; /* NULL: text prompts go to the engine as text */
	int32_t context;         /* max_position_embeddings; 0 = unknown */
	struct allm_chat_template *tmpl; /* NULL: chat completions refused with why */
	struct allm_chat_template *tmpl_tools; /* the "tool_use" one of a named list, for requests with tools; else NULL */
	int tool_format;         /* enum gw_tool_format (gw-tools.h): how its template has the model call tools */
	bool tool_section;       /* its template renders `tools` (else the gateway's preamble does) */
	char why_no_chat[320];
	char source[300];        /* where the tokenizer came from, for the log */
	char engine[128];        /* the model as the engine named it (its welcome) */
};

enum gw_phase {
	GW_QUEUED,    /* handed to the pump, not yet on the ring */
	GW_SUBMITTED, /* on the ring, no answer yet */
	GW_ACCEPTED,  /* the engine took it: tokens may come */
	GW_DONE,      /* finished, failed or refused: nothing more comes */
};

/* Bytes of the gateway's secret in every request's cache scope (gw_req_scope_cache). */
#define GW_CACHE_SECRET_BYTES 32

/* Choices per HTTP request at most: prompts of a batch x n. */
#define GW_MAX_CHOICES 128
/* Log-probabilities one request may make the gateway hold: choices x max_tokens x
 * (1 + alternatives), 8 bytes each (struct gw_lps), so 8 MiB a response at most;
 * more is refused with a 400 that names this limit (gw_api_parse). */
#define GW_MAX_LOGPROB_ENTRIES (1 << 20)

/* A choice's log-probabilities, compact: per token `stride` entries, the token
 * sampled then its alternatives best first (n_top[i] of them used). The pump
 * appends (gw_lps_push, under lock); once the choice is DONE nobody writes. */
struct gw_lps {
	struct allm_logprob *v; /* n x stride */
	uint8_t *n_top;         /* per token: alternatives used (<= stride - 1) */
	size_t n, cap;          /* tokens kept, and room */
	uint32_t stride;        /* 1 + k (params.logprobs) */
};

/* Token i's sampled entry; its alternatives follow it (n_top[i] of them). */
static inline const struct allm_logprob *gw_lps_at(const struct gw_lps *l, size_t i)
{
	return l->v + i * l->stride;
}
/* Appends a token's (0, -ENOMEM); copies tokens [from, from + n) of src into an
 * empty dst (0, -ENOMEM); frees (accepts an empty one). gw-slots.c. */
int gw_lps_push(struct gw_lps *l, const struct allm_logprobs *lp);
int gw_lps_copy(struct gw_lps *dst, const struct gw_lps *src, size_t from, size_t n);
void gw_lps_free(struct gw_lps *l);

struct gw_user;

/* One generation request: one choice of an HTTP request (its `n`, for each of its
 * prompts). The HTTP side
 * fills the first block and never changes it after enqueueing; everything below
 * `lock:` is guarded by gw->lock. The first choice, the lead, stands for the HTTP
 * request: it alone holds the connection (conn, sock, suspended) and the list of
 * choices; each other choice holds a reference to it. */
struct gw_req {
	struct gw *gw;
	struct gw_req *lead;     /* choice 0 (itself for it) */
	struct gw_req **choices; /* the lead's: every choice, [0] the lead (owned) */
	uint32_t n_choices;      /* the lead's: prompts x n */
	uint32_t n_per_prompt;   /* the lead's: n (choice k * n is prompt k's first) */
	uint32_t index;          /* this choice's */
	struct MHD_Connection *conn;
	int sock;                /* the connection's socket, watched for hang-ups */
	bool chat, stream, include_usage;
	bool tools_on;           /* chat with tools (tool_choice not none): the output is parsed for calls */
	bool tools_one;          /* ... one call at most (parallel_tool_calls false, or the format's) */
	uint8_t tool_format;     /* ... in this format (enum gw_tool_format) */
	char id[48];             /* "cmpl-..." / "chatcmpl-..." */
	long long created;       /* unix time */
	struct gw_model *model;  /* a reference */
	int32_t *ids;            /* prompt ids (owned), or ... */
	size_t n_ids;
	char *text;              /* ... a text prompt for the engine to tokenize (owned) */
	size_t text_len;
	struct allm_params params; /* its parameters (the table's, params.h); the pump
				    * submits them with the prompt and logit bias */
	struct gw_stops stops;   /* stop strings (owned) */
	char *echo;              /* completions' echo: the prompt's text, sent before the output (owned) */
	size_t echo_len;
	struct allm_logit_bias *logit_bias; /* owned */
	uint32_t n_logit_bias;
	char *grammar;           /* the grammar text of params.grammar_kind (gw-structured.c,
				  * gw-tools.c), NULL for none or json_object (owned) */
	size_t grammar_len;
	struct gw_req *owner;    /* NULL: ids, text, echo, logit_bias and grammar are its own; else
				  * they are this choice's (its prompt's first), shared by
				  * the n choices of a prompt, and it holds a reference to
				  * it (once enqueued): 128 choices, one prompt (issue 49) */

	/* lock: */
	enum gw_phase phase;
	uint64_t tag;            /* user_tag on the ring: slot index and generation */
	uint64_t request_id;     /* the engine's, once ACCEPTED */
	bool accepted;           /* the engine took it (an error after this streams) */
	bool suspended;          /* the lead's connection is suspended; whoever clears this resumes it */
	bool hung_up;            /* the HTTP client went away: cancel in the engine */
	bool cancel_sent;
	struct gw_text out;      /* generated text, with stop strings applied */
	struct gw_lps lps;       /* params.logprobs > 0: each token's, in order */
	uint32_t n_tokens;       /* tokens received */
	int finish;              /* enum allm_finish_reason, once DONE */
	uint32_t n_prompt, n_generated; /* from the engine's FINAL */
	uint32_t n_cached;       /* prompt tokens the engine's prefix cache served (FINAL) */
	int http_status;         /* 0, or the error's status once DONE */
	char err_type[40], err[256];
	int refs;                /* HTTP side + pump side */
	struct gw_req *next;     /* on gw->cancels */
	bool queued_cancel;      /* on gw->cancels */
	struct gw_user *user;    /* whose it is (the lead's user; a reference each choice) */
	struct gw_req *uprev, *unext; /* in its user's queue while QUEUED (gw-users.c) */
	uint64_t useq;           /* admission order: the user's queue is sorted by it */
	bool on_engine;          /* SUBMITTED or ACCEPTED: counts in its user's inflight */
	uint32_t watch_turn;     /* the lead's: its socket is in this turn's poll set */
};

struct gw {
	struct gw_opts o;
	struct MHD_Daemon *httpd;
	int port;                 /* bound port */
	int quiesced_fd;          /* the listening socket once quiesced, -1: closed after
				   * MHD_stop_daemon (its threads may use it until then) */
	pthread_mutex_t lock;
	/* lock: */
	struct gw_model *model;   /* current (reference held); NULL before the first engine */
	bool engine_up;           /* the ring client is connected */
	struct gw_user **users;   /* by key hash (gw-users.c): users with choices not DONE */
	uint32_t n_users;
	struct gw_user *rr;       /* users with choices waiting, in turn (a ring) */
	uint64_t next_useq;
	int64_t engine_inflight;  /* choices on the engine (SUBMITTED or ACCEPTED) */
	bool engine_full;         /* the engine refused for its caps: wait for a FINAL */
	bool sq_full;             /* the SQ had no room this turn */
	double engine_heard;      /* allm_now() the engine last said something (ring or ctl) */
	int engine_max_seqs;      /* the engine's max_num_seqs (its status), 0: not known yet */
	bool want_limits;         /* connected anew: gw-ctl.c reads the engine's limits */
	bool engine_paused;       /* its status says draining, drained or shutting down:
				   * /health says 503, so a load balancer sends no more */
	double connected_at;      /* allm_now() of the connection */
	long long engine_created; /* unix time the engine started (its status' uptime; until
				   * known, the gateway's start): /v1/models' `created` */
	struct gw_req *cancels;   /* hung up, or a cancel the full SQ refused: the pump sends */
	bool cancels_blocked;     /* the SQ refused a cancel this turn */
	struct gw_req **slots;    /* in-flight requests by tag slot */
	uint32_t n_slots, *gens;  /* slot capacity; generation per slot */
	uint32_t *free_slots, n_free;
	int64_t live;             /* requests not yet freed */
	atomic_bool stopping;     /* shutdown: refuse new requests (read by the HTTP threads without the lock) */
	bool aborting;            /* shutdown's deadline passed: end what still runs */
	bool quit;                /* the pump exits */
	/* pump: */
	pthread_t pump;
	int wake_fd;              /* eventfd: HTTP side -> pump */
	atomic_bool pump_sleeping;
	struct pollfd *watch_fds;   /* the pump's poll set (gw-engine.c) ... */
	struct gw_req **watch_reqs; /* ... and the request of each socket in it */
	allm_client_t *client;
	double next_connect;      /* allm_now() of the next connection attempt */
	bool said_down;           /* logged that the engine is unreachable */
	/* connection deadlines (gw-conns.c): */
	pthread_mutex_t conns_lock;
	struct gw_conn *conns;     /* every open connection */
	pthread_t reaper;
	atomic_bool reaper_stop;
	/* the control plane (gw-ctl.c): /metrics and the engine's liveness */
	pthread_mutex_t ctl_lock;
	pthread_cond_t ctl_cond;
	struct allm_ctl_client *ctl;
	pthread_t ctl_thread;
	bool ctl_started, ctl_stop;  /* ctl_lock */
	struct gw_scrape **scrapes;  /* ctl_lock: GET /metrics waiting for the next call */
	uint32_t n_scrapes;
	char *metrics_text;          /* ctl_lock: the last `metrics` answer rendered (gw-ctl.c) */
	size_t metrics_len;
	double metrics_at;           /* ctl_lock: allm_now() it came */
	double metrics_asked;        /* ctl_lock: allm_now() of the last GET /metrics */
	double metrics_tried;        /* ctl_lock: allm_now() of the last refresh asked */
	uint64_t seed_state;      /* for requests without a seed */
	uint8_t cache_secret[GW_CACHE_SECRET_BYTES]; /* random per process: scopes the prefix
						       * cache (gw_req_scope_cache) */
};

/* Choice i (< n_choices) of the lead r: r itself for n = 1. */
static inline struct gw_req *gw_choice(const struct gw_req *r, uint32_t i)
{
	return r->choices ? r->choices[i] : (struct gw_req *)r;
}

/* Whether choice r is the first of its prompt (its prompt counts once in usage). */
static inline bool gw_prompt_first(const struct gw_req *r)
{
	return r->lead->n_per_prompt <= 1 || r->index % r->lead->n_per_prompt == 0;
}

/* gw-log.c */
void gw_log(const struct gw *gw, enum allm_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* gw-model.c */
/* Builds the model description from a directory (disk, or the embedded default when
 * dir is NULL) or, for engine strings like "dummy:tiny", one with no tokenizer.
 * Never fails for a missing tokenizer: the model then has none and says why. */
int gw_model_load(const struct gw_opts *o, const char *engine_model, struct gw_model **ret);
struct gw_model *gw_model_ref(struct gw_model *m);
void gw_model_unref(struct gw_model *m);

/* gw-state.c: what the layers share under gw->lock (and the pump's doorbell) */
/* The current model (a new reference) or NULL, and whether the engine is up. */
struct gw_model *gw_state_model(struct gw *gw, bool *up);
/* Seconds since the engine last said anything (ring or control plane); 0 while
 * no engine is connected. */
double gw_state_silence(struct gw *gw);
/* Wakes the pump if it sleeps (after changing what it should look at). */
void gw_wake_pump(struct gw *gw);

#endif
