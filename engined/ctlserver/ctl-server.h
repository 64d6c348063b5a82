/* allm-engined's control server (DESIGN §9, ctl/PROTOCOL.md): a ROUTER for
 * commands and a PUB for telemetry, both ipc:// in the runtime directory. It
 * reads and retunes the engine, and learns everything else about the program
 * that hosts it (its clients, whether it drains) through struct ctl_host: it
 * never includes serve/ headers, so the arrows run one way (DESIGN §1).
 * Every call on the host's loop thread. */
#ifndef ALLM_CTL_SERVER_H
#define ALLM_CTL_SERVER_H

#include "runtime.h"
#include "engine.h"

#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>

struct ctl_server;
struct ctl_kvevents_opts;

/* Whether the host admits new work (status.state, `drain`, `resume`). */
enum ctl_host_state {
	CTL_HOST_SERVING,
	CTL_HOST_PAUSED, /* `drain`: new requests refused, the engine stays up */
	CTL_HOST_SHUTTING_DOWN, /* SIGTERM or `shutdown`: finishing, then exit */
};

/* One connected ring client, as status.client_list shows it. */
struct ctl_client_info {
	uint32_t id;
	pid_t pid;
	uid_t uid;
	int64_t in_flight;
	uint64_t submitted, rejected;
	double ring_fill; /* CQ fill 0..1, NAN when unknown */
	uint32_t backlog; /* CQEs waiting for room in its CQ */
};

/* What the host does for the control server; every member is required. */
struct ctl_host_ops {
	/* one log line at level 0 error .. 3 debug */
	void (*log)(void *user, enum allm_log_level level, const char *fmt, va_list ap);
	enum ctl_host_state (*state)(void *user);
	/* `drain` (true) and `resume` (false); never called while shutting down */
	void (*set_paused)(void *user, bool paused);
	/* `shutdown`: stop admitting, finish in flight, exit 0 */
	void (*shutdown)(void *user, const char *why);
	/* Ready clients: returns how many there are and fills up to max of them. */
	uint32_t (*clients)(void *user, struct ctl_client_info *ret, uint32_t max);
	/* The client that submitted a request (its allm_submit.user), 0 when none. */
	uint32_t (*request_client)(void *user, const void *req_user);
};

/* The host's engine and names, handed over at start; not owned, and they must
 * outlive the server. */
struct ctl_host {
	const struct ctl_host_ops *ops;
	void *user; /* passed to every op */
	struct allm_runtime *rt; /* model, backend, KV cache */
	struct allm_engine *eng;
	struct allm_predictor *pred;
	const char *name; /* engine name: NAME.ctl / NAME.pub */
	const char *runtime_dir;
	const char *profile_path; /* where `calibrate` saves the profile, or "" */
	/* --kv-events-*: the KV events' endpoint (NULL: off), topic, keys
	 * (ctl-kvevents.h) */
	const struct ctl_kvevents_opts *kv_events;
};

/* Binds DIR/NAME.ctl and DIR/NAME.pub (replacing stale socket files of a dead
 * engine: the caller already made sure no engine of this name runs). The host
 * watches ctl_server_fd() and calls ctl_server_pump() when it fires. Copies
 * *host. 0 or -errno, with a reason logged. */
int ctl_server_start(const struct ctl_host *host, struct ctl_server **ret);
/* Closes both sockets (the last replies get a bounded moment to leave), removes
 * the socket files, frees. Accepts NULL. The host stops watching the fd first. */
void ctl_server_stop(struct ctl_server *s);
/* The ROUTER's ZMQ_FD: readable (edge-triggered) when commands may wait. */
int ctl_server_fd(const struct ctl_server *s);

/* Handles every command waiting on the ROUTER. The host calls it on every loop
 * turn as well as when the fd fires: the fd is edge-triggered and a send may
 * consume its edge, so waiting messages are never left for the next wake-up.
 * True when it stopped with commands still waiting (a per-turn budget): the host
 * must not sleep then. */
bool ctl_server_pump(struct ctl_server *s);
/* The 10 Hz tick: samples the token counters and publishes `stats`. */
void ctl_server_tick(struct ctl_server *s);
/* After each loop turn's step and commands: publishes the KV events they made
 * (one batch), when --kv-events-endpoint is on. */
void ctl_server_flush_events(struct ctl_server *s);
/* Stops the KV events before the engine (and its prefix cache) is freed. */
void ctl_server_stop_events(struct ctl_server *s);

/* Engine events, forwarded by the host: `request` and `decision` telemetry and
 * the rolling latency window. */
void ctl_server_on_finish(struct ctl_server *s, const struct allm_result *res, uint32_t client_id);
void ctl_server_on_decision(struct ctl_server *s, const struct allm_decision *dec, bool measured);

#endif
