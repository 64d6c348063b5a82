/* Private to engined/ctlserver/ctl-*.c: the control server's state and the pieces the
 * command handlers and telemetry share. */
#ifndef ALLM_CTL_INTERNAL_H
#define ALLM_CTL_INTERNAL_H

#include "ctl-kvevents.h"
#include "ctl-metrics.h"
#include "ctl-proto.h"
#include "ctl-host.h"
#include "ctl-stats.h"

#include <adaptivellm/errtext.h>

/* Most entries of client_list in a status map: the map stays bounded whatever
 * the number of clients (`clients` still counts them all). */
#define CTL_STATUS_MAX_CLIENTS 64
/* Entries per queue in status.top. */
#define CTL_STATUS_TOP 5

struct ctl_server {
	struct ctl_host h; /* the program serving us, copied at start */
	void *zctx;
	void *router; /* commands: [identity][delimiter?][body] */
	void *pub;    /* telemetry: [topic][body] */
	int router_fd; /* its ZMQ_FD, watched in the loop; -1 when not */
	char ctl_path[600], pub_path[600]; /* socket files, removed at stop */
	struct allm_ctl_enc out; /* the reply / telemetry being built (reused) */
	struct allm_ctl_enc body; /* a result map, before it goes into the reply */
	double start; /* allm_now() at start: uptime and telemetry times */
	double clock0; /* the engine's clock at start (virtual on a simulated device) */
	struct ctl_stats stats;
	struct ctl_metrics metrics; /* Prometheus counters and histograms (ctl-metrics.c) */
	struct ctl_kvevents *kv; /* KV events (--kv-events-endpoint), or NULL */
	bool calibrating; /* inside `calibrate`: status.state says so */
	uint64_t n_commands, n_errors; /* handled, and answered with an error */
};

/* A log line through the host. */
void ctl_log(const struct ctl_server *s, enum allm_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ctl-commands.c: handles one decoded command. On success the result map is in
 * s->body and 0 is returned; on failure err holds the reply's error text and
 * nothing changed. */
int ctl_dispatch(struct ctl_server *s, const msgpack_object *req, char *err, size_t errlen);


/* ctl-settings.c: `set`; status's maps of the settings table's STATUS column
 * (how many entries map has, and its KEY: value pairs into e). */
/* `set`: on success the keys changed, " gpu_blocks preempt", in log (loglen
 * bytes) for the caller's log line. */
int ctl_cmd_set(struct ctl_server *s, const msgpack_object *args, char *err, size_t errlen, char *log,
		size_t loglen);
int ctl_status_settings_count(const char *map);
void ctl_encode_status_settings(const struct ctl_server *s, struct allm_ctl_enc *e, const char *map);

/* ctl-telemetry.c */
/* The status map (PROTOCOL.md) into e. */
void ctl_encode_status(struct ctl_server *s, struct allm_ctl_enc *e);
/* Sends e's bytes on topic (drops when the subscriber queues are full). */
void ctl_publish(struct ctl_server *s, const char *topic, const struct allm_ctl_enc *e);
/* "serving", "draining", "drained", "shutting_down", "calibrating". */
const char *ctl_state_name(const struct ctl_server *s);
/* Requests in all three queues. */
int64_t ctl_in_flight(const struct ctl_server *s);

/* ctl-prefix.c: the status map's prefix_cache and prefix_tiers entries (two). */
void ctl_encode_prefix(struct allm_ctl_enc *e, const struct allm_engine_stats *st, bool enabled);

#endif
