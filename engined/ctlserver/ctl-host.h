/* What the control server knows of the program that hosts it (ctl-server.h): its
 * engine and names, and the few things only the host can do, as struct ctl_host.
 * Its own header so that the server's private pieces (ctl-internal.h) need it and
 * not the server's API: ctl-server.c includes those, never the other way. */
#ifndef ALLM_CTL_HOST_H
#define ALLM_CTL_HOST_H

#include "runtime.h"
#include "engine.h"

#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>

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

#endif
