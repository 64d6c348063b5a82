/* Per-request records and the run summary of DESIGN §10/§12, shared by allm-run
 * --workload and allm-bench so both report the same numbers under the same keys.
 *
 * Definitions (all latencies in milliseconds in the summary):
 *   duration          end_s - start_s
 *   throughput_tok_s  (prompt_tokens + generated_tokens) / duration; gen_throughput
 *                     counts generated tokens only; req_s = requests / duration
 *                     (all 0 when duration is 0).
 *   weighted turnaround of a request: (finish - send) / (finish - first_sched),
 *                     1 when the denominator is not positive (never scheduled, or
 *                     finished the instant it was scheduled), and at least 1;
 *                     mean_weighted_turnaround is the mean over all requests.
 *   TTFT              first_token - send, over requests with n_generated >= 1.
 *   TPOT              (finish - first_token) / (n_generated - 1), over requests with
 *                     n_generated >= 2 (one token has no gap).
 *   e2e               finish - send, over all requests.
 *   percentiles       linear interpolation between closest ranks on the sorted values
 *                     x[0..m-1] (numpy's default): rank = p/100 * (m - 1),
 *                     x[floor(rank)] + frac(rank) * (x[floor(rank)+1] - x[floor(rank)]).
 *                     NAN (JSON null) when no request qualifies.
 *   outputs_sha256    SHA-256 over the requests sorted by index (not finish order):
 *                     for each, its generated ids as little-endian int32, then one
 *                     int32 -1 (ff ff ff ff) as a separator, so that [1,2][3] and
 *                     [1][2,3] differ. Lower-case hex. Equal hashes = equal outputs.
 *   preemptions       sums of the per-record counts.
 *   predictor_mape    not derivable from the records: summarize sets NAN and the
 *                     caller fills in the predictor's figures (JSON null while NAN).
 *   decision_mape     the same for the decisions' own error (the prediction of the
 *                     path a victim took against its measured cost), with how many
 *                     were measured, probed (the other path timed) and regretted. */
#ifndef ALLM_METRICS_H
#define ALLM_METRICS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Times are seconds on one clock shared with start_s/end_s. Only differences are
 * used, so absolute allm_now() values work; allm-run/allm-bench store them relative
 * to the run start (allm_now() - start) so that the JSONL records read naturally. */
struct allm_req_record {
	int64_t index;        /* the request's index in the workload; unique within a run */
	double send_s;        /* the client sent it (its arrival) */
	double first_sched_s; /* the scheduler first ran it (prefill began) */
	double first_token_s; /* the first generated token became visible to the client */
	double finish_s;      /* the last token / the finish event */
	int32_t n_prompt, n_generated;
	int32_t n_preempt_swap, n_preempt_recompute; /* times this request was preempted, by kind */
	const int32_t *generated; /* borrowed, n_generated ids; NULL only if n_generated is 0 */
	char finish_reason[32];   /* "length", "stop", "cancelled", ... */
	int32_t n_cached;         /* prompt tokens the prefix cache served */
};

struct allm_pctl {
	double p50, p90, p99, mean; /* NAN when there is no value */
};

/* The prefix cache over a run (DESIGN §9's prefix_cache keys); tiers in the
 * order device, host, disk. */
struct allm_prefix_summary {
	bool present; /* the summary has a prefix_cache object */
	bool enabled;
	int64_t queried_tokens, hit_tokens;
	int64_t hit_tokens_by_tier[3];
	int64_t cached_blocks[3];
	int64_t restored_tokens, recomputed_cached_tokens;
};

struct allm_run_summary {
	int64_t requests;
	double duration_s, throughput_tok_s, gen_throughput_tok_s, req_s, mean_weighted_turnaround;
	struct allm_pctl ttft_ms, tpot_ms, e2e_ms;
	int64_t preempt_swap, preempt_recompute;
	double mape_swap, mape_recompute; /* NAN unless the caller fills them */
	bool has_disk; /* a disk tier: preemptions and predictor_mape gain "disk" */
	int64_t preempt_disk;
	double mape_disk;
	double dec_mape_swap, dec_mape_recompute; /* NAN unless the caller fills them */
	int64_t dec_measured, dec_probed, dec_regret;
	char outputs_sha256[65];
	int64_t prompt_tokens, generated_tokens;
	struct allm_prefix_summary prefix; /* filled by the caller (not in records) */
};

/* p50/p90/p99 (interpolated between closest ranks, as numpy does) and the mean of
 * x[0..m), in x's units; sorts x in place. All NAN when m is 0. */
struct allm_pctl allm_metrics_pctl(double *x, int64_t m);
/* (finish - send) / (finish - first_sched), at least 1 (1 when it finished the
 * instant it was scheduled; clock jitter cannot push it below 1). */
double allm_metrics_weighted_turnaround(double send, double first_sched, double finish);

/* Summarizes n records (any order) of a run from start_s to end_s into *ret.
 * Returns 0; -EINVAL if end_s < start_s, n < 0, recs is NULL with n > 0, an index
 * repeats, or a record has n_generated > 0 with generated NULL (the hash would lie);
 * -ENOMEM. *ret is untouched on failure. */
int allm_metrics_summarize(const struct allm_req_record *recs, int64_t n, double start_s,
			   double end_s, struct allm_run_summary *ret);

/* The DESIGN §12 summary object (non-finite numbers as null). New reference owned by
 * the caller (json_decref); NULL on allocation failure. */
json_t *allm_metrics_summary_json(const struct allm_run_summary *s);

/* One per-request JSONL record: index, the four times as given, queue_ms, ttft_ms,
 * tpot_ms, e2e_ms, weighted_turnaround, n_prompt, n_generated, cached_tokens, preemptions
 * {swap, recompute}, finish_reason, generated (ids). New reference; NULL on
 * allocation failure. */
json_t *allm_metrics_record_json(const struct allm_req_record *r);

#ifdef __cplusplus
}
#endif

#endif
