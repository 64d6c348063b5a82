/* The control server's Prometheus metrics (DESIGN §10): counters and histograms
 * accumulated from the requests it sees finish, and the `metrics` command's reply
 * (ctl/PROTOCOL.md) — metric families with vLLM's names where vLLM has the metric
 * and allm_* for ours. ctl/ctl-prom.c turns that reply into Prometheus text, for
 * `allmctl metrics` and allm-gateway's GET /metrics alike. */
#ifndef ALLM_CTL_METRICS_H
#define ALLM_CTL_METRICS_H

#include "engine.h"

#include <stdint.h>

/* Most bucket bounds of one histogram (vLLM's longest list has 22). */
#define CTL_HIST_MAX_BOUNDS 32

struct ctl_hist {
	double bounds[CTL_HIST_MAX_BOUNDS]; /* upper bounds, increasing; +Inf is implicit */
	int n_bounds;
	uint64_t counts[CTL_HIST_MAX_BOUNDS + 1]; /* per bucket (not cumulative); last: +Inf */
	double sum;
	uint64_t count;
};

/* Finish kinds as vLLM's request_success_total labels them, plus errors. */
enum ctl_finish { CTL_FINISH_STOP, CTL_FINISH_LENGTH, CTL_FINISH_ABORT, CTL_FINISH_ERROR, CTL_FINISH_N };

struct ctl_metrics {
	struct ctl_hist ttft;   /* arrival -> first token, s */
	struct ctl_hist tpot;   /* mean gap between tokens of one request, s */
	struct ctl_hist e2e;    /* arrival -> finish, s */
	struct ctl_hist queue;  /* arrival -> first scheduled, s */
	struct ctl_hist prompt; /* prompt tokens per request */
	struct ctl_hist gen;    /* generated tokens per request */
	uint64_t finished[CTL_FINISH_N];
};

/* Empties every histogram and counter; max_model_len sizes the token-count
 * histograms' 1-2-5 buckets, as vLLM does. */
void ctl_metrics_reset(struct ctl_metrics *m, int32_t max_model_len);
/* One finished request (any reason). */
void ctl_metrics_on_finish(struct ctl_metrics *m, const struct allm_result *r);

struct ctl_host;
struct ctl_stats;
struct allm_ctl_enc;
/* The `metrics` result map ({"families": [...]}, PROTOCOL.md) into e: m's, the
 * host's engine's and the rolling stats' figures. (Not the server's state: ctl-internal.h
 * holds a struct ctl_metrics, so this file never includes it.) */
void ctl_metrics_encode(const struct ctl_metrics *m, const struct ctl_host *h, struct ctl_stats *stats,
			struct allm_ctl_enc *e);

#endif
