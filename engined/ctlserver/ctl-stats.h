/* The control plane's rolling figures (DESIGN §10): tokens/s over the last ~1 s
 * from the engine's cumulative counters, and latency percentiles and the mean
 * weighted turnaround over the last CTL_STATS_WINDOW finished requests. Same
 * definitions as metrics.h (percentiles interpolate between closest ranks, as
 * numpy does), computed from a ring instead of a run's full record list. */
#ifndef ALLM_CTL_STATS_H
#define ALLM_CTL_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"

#define CTL_STATS_WINDOW 1000
/* 10 Hz samples of the token counters: 1 s plus one */
#define CTL_STATS_RATE_SAMPLES 11

struct ctl_stats {
	/* per finished request, ring of CTL_STATS_WINDOW; NAN where it does not apply
	 * (no token: no TTFT; fewer than two: no TPOT) */
	double ttft_ms[CTL_STATS_WINDOW], tpot_ms[CTL_STATS_WINDOW], e2e_ms[CTL_STATS_WINDOW];
	double wta[CTL_STATS_WINDOW]; /* weighted turnaround, >= 1 */
	int32_t n, head;              /* valid entries, next slot */
	/* (time, prompt+generated, generated) samples, ring */
	double rate_t[CTL_STATS_RATE_SAMPLES];
	int64_t rate_all[CTL_STATS_RATE_SAMPLES], rate_gen[CTL_STATS_RATE_SAMPLES];
	int32_t rate_n, rate_head;
	double scratch[CTL_STATS_WINDOW]; /* sorting space */
};

struct ctl_stats_view {
	double throughput_tok_s, gen_throughput_tok_s; /* 0 before two samples */
	struct allm_pctl ttft, tpot, e2e; /* milliseconds; NAN when no request qualifies */
	double mean_weighted_turnaround; /* NAN before any request finished */
};

void ctl_stats_reset(struct ctl_stats *s);
struct allm_result;
/* One finished request (the engine's result, engine.h). */
void ctl_stats_add(struct ctl_stats *s, const struct allm_result *r);
/* The per-request figures ctl_stats_add records, for the `request` telemetry:
 * NAN where they do not apply (no token, one token). */
void ctl_stats_request(const struct allm_result *r, double *ttft_ms, double *tpot_ms, double *e2e_ms,
		       double *wta);
/* A sample of the engine's cumulative token counters at time t (10 Hz). A counter
 * going backwards (reset-stats) restarts the window. */
void ctl_stats_sample(struct ctl_stats *s, double t, int64_t all_tokens, int64_t gen_tokens);
void ctl_stats_view(struct ctl_stats *s, struct ctl_stats_view *ret);

#endif
