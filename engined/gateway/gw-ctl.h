/* The gateway's control-plane thread (gw-ctl.c): GET /metrics off the HTTP
 * threads, and the engine's liveness for /health. */
#ifndef ALLM_GW_CTL_H
#define ALLM_GW_CTL_H

#include "gateway.h"

#include <stdbool.h>
#include <stddef.h>

/* What a queued connection asks the engine's control server. */
enum gw_ctl_job {
	GW_CTL_METRICS,     /* GET /metrics: `metrics`, rendered as Prometheus text */
	GW_CTL_CACHE_RESET, /* POST /reset_prefix_cache: `cache-reset`, as JSON */
};

/* A connection waiting for the thread's next call of its job. */
struct gw_scrape {
	struct MHD_Connection *conn;
	enum gw_ctl_job job;
	bool done;   /* answered (the connection resumed): text, or err */
	char *text;  /* the answer's body (malloc'ed; the caller frees), NULL: err */
	size_t len;
	char err[256];
};

/* Opens the control-plane client and starts the thread. 0 or -errno (logged). */
int gw_ctl_start(struct gw *gw);
/* Answers the scrapes still waiting with 503, stops the thread, closes the client
 * (before libmicrohttpd stops: no connection may stay suspended). */
void gw_ctl_stop(struct gw *gw);
/* Suspends s->conn and queues s for the next call: 0; -EBUSY when too many wait
 * or the thread stops (answer 503 now, the connection was not suspended). */
int gw_ctl_scrape(struct gw *gw, struct gw_scrape *s);
/* The engine's figures kept from the last `metrics` call, as GET /metrics answers
 * them (their age said), at once: 0 with *text (malloc'ed) and *len; -EAGAIN when
 * none was kept yet (queue a scrape), -ENOMEM. Notes that /metrics is scraped, so
 * the thread keeps the figures fresh. */
int gw_ctl_metrics_now(struct gw *gw, char **text, size_t *len);
/* Wakes the thread to look again (a new engine: its limits are wanted). Not
 * under gw->lock. */
void gw_ctl_kick(struct gw *gw);

#endif
