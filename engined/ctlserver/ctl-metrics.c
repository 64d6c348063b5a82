/* Prometheus metrics of the control server: histograms fed by ctl_server_on_finish
 * and the `metrics` reply built from them and the engine's counters. Bucket
 * bounds are vLLM's (vllm/engine/metrics.py), so its Grafana dashboards read
 * ours unchanged. */
#include "ctl-enc-check.h"
#include "ctl-host.h"
#include "ctl-metrics.h"
#include "ctl-stats.h"

#include <math.h>
#include <string.h>

static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
				     0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
				     20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double tpot_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
				     0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
				     7.5,  10.0,  20.0, 40.0,  80.0};
static const double latency_bounds[] = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,
					5.0,  10.0, 15.0, 20.0,  30.0,  40.0,  50.0,
					60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

static void hist_init(struct ctl_hist *h, const double *b, int n)
{
	memset(h, 0, sizeof(*h));
	h->n_bounds = ALLM_MIN(n, CTL_HIST_MAX_BOUNDS);
	memcpy(h->bounds, b, (size_t)h->n_bounds * sizeof(*b));
}

/* 1, 2, 5, 10, 20, 50, ... up to max (vLLM's build_1_2_5_buckets). */
static void hist_init_125(struct ctl_hist *h, int32_t max)
{
	double b[CTL_HIST_MAX_BOUNDS];
	int n = 0;
	for (double p = 1; n < CTL_HIST_MAX_BOUNDS; p *= 10) {
		static const int mant[] = {1, 2, 5};
		for (int i = 0; i < 3 && n < CTL_HIST_MAX_BOUNDS; i++) {
			if (mant[i] * p > max)
				goto done;
			b[n++] = mant[i] * p;
		}
	}
done:
	hist_init(h, b, n);
}

static void hist_add(struct ctl_hist *h, double v)
{
	int i = 0;
	if (!isfinite(v))
		return;
	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void ctl_metrics_reset(struct ctl_metrics *m, int32_t max_model_len)
{
	memset(m, 0, sizeof(*m));
	hist_init(&m->ttft, ttft_bounds, (int)ALLM_ARRAY_SIZE(ttft_bounds));
	hist_init(&m->tpot, tpot_bounds, (int)ALLM_ARRAY_SIZE(tpot_bounds));
	hist_init(&m->e2e, latency_bounds, (int)ALLM_ARRAY_SIZE(latency_bounds));
	hist_init(&m->queue, latency_bounds, (int)ALLM_ARRAY_SIZE(latency_bounds));
	hist_init_125(&m->prompt, max_model_len > 0 ? max_model_len : 1);
	hist_init_125(&m->gen, max_model_len > 0 ? max_model_len : 1);
}

void ctl_metrics_on_finish(struct ctl_metrics *m, const struct allm_result *r)
{
	int32_t gen = r->n_generated;
	enum ctl_finish f;
	switch (r->end) {
	case ALLM_END_EOS:
	case ALLM_END_STOP_ID: f = CTL_FINISH_STOP; break;
	case ALLM_END_LENGTH: f = CTL_FINISH_LENGTH; break;
	case ALLM_END_CANCELLED: f = CTL_FINISH_ABORT; break;
	default: f = CTL_FINISH_ERROR;
	}
	m->finished[f]++;
	if (r->got_token && gen >= 1)
		hist_add(&m->ttft, r->first_token - r->arrival);
	/* one observation per request, its mean gap (vLLM v1 does the same) */
	if (r->got_token && gen >= 2)
		hist_add(&m->tpot, (r->finish - r->first_token) / (gen - 1));
	if (r->scheduled)
		hist_add(&m->queue, r->first_sched - r->arrival);
	hist_add(&m->e2e, r->finish - r->arrival);
	hist_add(&m->prompt, r->n_prompt);
	hist_add(&m->gen, gen);
}

/* --- the reply ------------------------------------------------------------------- */

/* The families in the reply, in the order ctl_metrics_encode writes them: the
 * array's count is this table's, and ctl_metrics_encode asserts that what it wrote
 * is exactly these families (one added below and not here fails every test that
 * asks for the metrics). */
static const char *const metric_families[] = {
	"vllm:num_requests_running",
	"vllm:num_requests_waiting",
	"vllm:num_requests_swapped",
	"vllm:gpu_cache_usage_perc",
	"vllm:cpu_cache_usage_perc",
	"vllm:num_preemptions_total",
	"vllm:prompt_tokens_total",
	"vllm:generation_tokens_total",
	"vllm:request_success_total",
	"vllm:time_to_first_token_seconds",
	"vllm:time_per_output_token_seconds",
	"vllm:e2e_request_latency_seconds",
	"vllm:request_queue_time_seconds",
	"vllm:request_prompt_tokens",
	"vllm:request_generation_tokens",
	"vllm:prefix_cache_queries_total",
	"vllm:prefix_cache_hits_total",
	"vllm:kv_cache_usage_perc",
	"allm_prefix_cache_hits_total",
	"allm_prefix_restores_total",
	"allm_preemptions_total",
	"allm_predictor_mape",
	"allm_blocks",
	"allm_memory_pool_bytes",
	"allm_memory_pool_decisions_total",
	"allm_max_running",
	"allm_slo_buffer_tokens",
	"allm_slo_buffer_decisions_total",
	"allm_phase_swaps_total",
	"allm_swap_bytes_total",
	"allm_recomputed_tokens_total",
	"allm_requests_failed_total",
	"allm_mean_weighted_turnaround",
	"allm_clients",
};

static void fam(struct allm_ctl_enc *e, const char *name, const char *type, const char *help,
		uint32_t n_samples)
{
	allm_ctl_enc_map(e, 4);
	allm_ctl_enc_kstr(e, "name", name);
	allm_ctl_enc_kstr(e, "type", type);
	allm_ctl_enc_kstr(e, "help", help);
	allm_ctl_enc_karray(e, "samples", n_samples);
}

/* {"labels": {model_name, k1: v1, k2: v2}} opening a sample map of n_more more keys;
 * k1/k2 may be NULL. */
static void labels(struct allm_ctl_enc *e, const char *model, uint32_t n_more, const char *k1,
		   const char *v1, const char *k2, const char *v2)
{
	allm_ctl_enc_map(e, 1 + n_more);
	allm_ctl_enc_kmap(e, "labels", 1 + (k1 != NULL) + (k2 != NULL));
	allm_ctl_enc_kstr(e, "model_name", model);
	if (k1)
		allm_ctl_enc_kstr(e, k1, v1);
	if (k2)
		allm_ctl_enc_kstr(e, k2, v2);
}

static void value(struct allm_ctl_enc *e, const char *model, const char *k1, const char *v1,
		  const char *k2, const char *v2, double v)
{
	labels(e, model, 1, k1, v1, k2, v2);
	allm_ctl_enc_kdouble(e, "value", v);
}

/* A family with one unlabelled (model_name only) sample. */
static void single(struct allm_ctl_enc *e, const char *model, const char *name, const char *type,
		   const char *help, double v)
{
	fam(e, name, type, help, 1);
	value(e, model, NULL, NULL, NULL, NULL, v);
}

static void hist(struct allm_ctl_enc *e, const char *model, const char *name, const char *help,
		 const struct ctl_hist *h)
{
	fam(e, name, "histogram", help, 1);
	labels(e, model, 4, NULL, NULL, NULL, NULL);
	allm_ctl_enc_karray(e, "bounds", (uint32_t)h->n_bounds);
	for (int i = 0; i < h->n_bounds; i++)
		allm_ctl_enc_double(e, h->bounds[i]);
	/* cumulative, as Prometheus wants them; the last one is le="+Inf" */
	allm_ctl_enc_karray(e, "counts", (uint32_t)h->n_bounds + 1);
	uint64_t cum = 0;
	for (int i = 0; i <= h->n_bounds; i++) {
		cum += h->counts[i];
		allm_ctl_enc_uint(e, cum);
	}
	allm_ctl_enc_kdouble(e, "sum", h->sum);
	allm_ctl_enc_str(e, "count");
	allm_ctl_enc_uint(e, h->count);
}

static double frac(int64_t used, int64_t total)
{
	return total > 0 ? (double)used / (double)total : 0;
}

void ctl_metrics_encode(const struct ctl_metrics *m, const struct ctl_host *h, struct ctl_stats *stats,
			struct allm_ctl_enc *e)
{
	const char *mn = h->rt->model_desc;
	struct allm_engine_stats st;
	struct ctl_stats_view v;
	allm_engine_get_stats(h->eng, &st);
	ctl_stats_view(stats, &v);

	size_t start = e->sb.size;
	allm_ctl_enc_map(e, 1);
	allm_ctl_enc_karray(e, "families", (uint32_t)ALLM_ARRAY_SIZE(metric_families));
	/* vLLM's names (15 families) */
	single(e, mn, "vllm:num_requests_running", "gauge",
	       "Number of requests in the running batch (KV cache in GPU blocks).", st.running);
	single(e, mn, "vllm:num_requests_waiting", "gauge",
	       "Number of requests waiting to be scheduled (new or recompute-preempted).", st.waiting);
	single(e, mn, "vllm:num_requests_swapped", "gauge",
	       "Number of requests swapped out to CPU blocks.", st.swapped);
	single(e, mn, "vllm:gpu_cache_usage_perc", "gauge",
	       "GPU KV-cache usage: fraction of GPU blocks in use (1 means 100 percent).",
	       frac(st.gpu_used, st.gpu_total));
	single(e, mn, "vllm:cpu_cache_usage_perc", "gauge",
	       "CPU KV-cache usage: fraction of CPU blocks in use (1 means 100 percent).",
	       frac(st.cpu_used, st.cpu_total));
	single(e, mn, "vllm:num_preemptions_total", "counter",
	       "Cumulative number of preemptions (swap, disk and recompute).",
	       (double)(st.preempt_swap + st.preempt_recompute + st.preempt_disk));
	single(e, mn, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
	       (double)st.prompt_tokens);
	single(e, mn, "vllm:generation_tokens_total", "counter",
	       "Number of generation tokens processed.", (double)st.generated_tokens);
	fam(e, "vllm:request_success_total", "counter",
	    "Count of finished requests by finish reason (abort: cancelled).", 3);
	value(e, mn, "finished_reason", "stop", NULL, NULL, (double)m->finished[CTL_FINISH_STOP]);
	value(e, mn, "finished_reason", "length", NULL, NULL, (double)m->finished[CTL_FINISH_LENGTH]);
	value(e, mn, "finished_reason", "abort", NULL, NULL, (double)m->finished[CTL_FINISH_ABORT]);
	hist(e, mn, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
	     &m->ttft);
	hist(e, mn, "vllm:time_per_output_token_seconds",
	     "Histogram of time per output token in seconds (one mean per request).", &m->tpot);
	hist(e, mn, "vllm:e2e_request_latency_seconds",
	     "Histogram of end to end request latency in seconds.", &m->e2e);
	hist(e, mn, "vllm:request_queue_time_seconds",
	     "Histogram of time spent waiting before first scheduled, in seconds.", &m->queue);
	hist(e, mn, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", &m->prompt);
	hist(e, mn, "vllm:request_generation_tokens", "Number of generation tokens processed.",
	     &m->gen);
	/* the prefix cache, as vLLM V1 names it (tokens; first admissions only) */
	single(e, mn, "vllm:prefix_cache_queries_total", "counter",
	       "Prompt tokens looked up in the prefix cache.", (double)st.pc_queried_tokens);
	single(e, mn, "vllm:prefix_cache_hits_total", "counter",
	       "Prompt tokens found in the prefix cache (any tier) and used.", (double)st.pc_hit_tokens);
	single(e, mn, "vllm:kv_cache_usage_perc", "gauge",
	       "KV-cache usage: fraction of device blocks requests hold (cached blocks nobody holds are "
	       "free to take; 1 means 100 percent).",
	       frac(st.gpu_used, st.gpu_total));
	/* ours (16 families) */
	fam(e, "allm_prefix_cache_hits_total", "counter",
	    "Prompt tokens found in the prefix cache, by the tier they were found in.", 3);
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++)
		value(e, mn, "tier", allm_kv_tier_name((enum allm_kv_tier)t), NULL, NULL, (double)st.pc_hit_tokens_tier[t]);
	fam(e, "allm_prefix_restores_total", "counter",
	    "Cached prefixes found in a lower tier, by that tier and the choice: restore, recompute, "
	    "or split (restore the head, recompute the rest).", 6);
	static const enum allm_choice choices[] = {ALLM_CHOICE_RESTORE, ALLM_CHOICE_RECOMPUTE, ALLM_CHOICE_SPLIT};
	for (int t = ALLM_KV_TIER_HOST; t < ALLM_KV_TIER_COUNT; t++)
		for (size_t c = 0; c < ALLM_ARRAY_SIZE(choices); c++)
			value(e, mn, "tier", allm_kv_tier_name((enum allm_kv_tier)t), "choice", allm_choice_name(choices[c]),
			      (double)st.pc_restores[t][choices[c]]);
	fam(e, "allm_preemptions_total", "counter", "Preemptions by kind (Alg. 1's choice).", 3);
	value(e, mn, "kind", "swap", NULL, NULL, (double)st.preempt_swap);
	value(e, mn, "kind", "recompute", NULL, NULL, (double)st.preempt_recompute);
	value(e, mn, "kind", "disk", NULL, NULL, (double)st.preempt_disk);
	fam(e, "allm_predictor_mape", "gauge",
	    "Rolling mean absolute percentage error of the cost predictors (NaN before a sample).", 3);
	value(e, mn, "predictor", "swap", NULL, NULL, st.mape_swap);
	value(e, mn, "predictor", "recompute", NULL, NULL, st.mape_recompute);
	value(e, mn, "predictor", "disk", NULL, NULL, st.disk_total ? st.mape_disk : NAN);
	fam(e, "allm_blocks", "gauge", "KV-cache blocks by pool and state (cached: held by the prefix cache "
	    "alone, reclaimable).", 9);
	value(e, mn, "pool", "gpu", "state", "used", st.gpu_used);
	value(e, mn, "pool", "gpu", "state", "cached", st.gpu_cached_free);
	value(e, mn, "pool", "gpu", "state", "free", st.gpu_total - st.gpu_used - st.gpu_cached_free);
	value(e, mn, "pool", "cpu", "state", "used", st.cpu_used);
	value(e, mn, "pool", "cpu", "state", "cached", st.cpu_cached);
	value(e, mn, "pool", "cpu", "state", "free", st.cpu_total - st.cpu_used - st.cpu_cached);
	value(e, mn, "pool", "disk", "state", "used", st.disk_used);
	value(e, mn, "pool", "disk", "state", "cached", st.disk_cached);
	value(e, mn, "pool", "disk", "state", "free", st.disk_total - st.disk_used - st.disk_cached);
	fam(e, "allm_memory_pool_bytes", "gauge", "Elastic memory: the pool's split between the KV "
	    "blocks and the activation scratch (0 without --memory-budget and elastic memory).", 2);
	value(e, mn, "part", "kv", NULL, NULL, st.elastic ? (double)st.gpu_total * (double)h->rt->kv->block_bytes : 0);
	value(e, mn, "part", "scratch", NULL, NULL, (double)st.scratch_bytes);
	fam(e, "allm_memory_pool_decisions_total", "counter",
	    "Elastic memory: blocks lent to the KV cache (inflate) or to the scratch (deflate).", 2);
	value(e, mn, "kind", "inflate", NULL, NULL, (double)st.inflations);
	value(e, mn, "kind", "deflate", NULL, NULL, (double)st.deflations);
	single(e, mn, "allm_max_running", "gauge", "The largest running batch since start.", (double)st.max_running);
	single(e, mn, "allm_slo_buffer_tokens", "gauge", "The SLO buffer: prompt tokens a step may carry "
	       "(0 without --slo-ttft-ms or --slo-tpot-ms).", (double)st.slo_buffer_tokens);
	fam(e, "allm_slo_buffer_decisions_total", "counter",
	    "The SLO buffer's moves: halved for TPOT (shrink), doubled for TTFT (grow).", 2);
	value(e, mn, "kind", "shrink", NULL, NULL, (double)st.slo_shrinks);
	value(e, mn, "kind", "grow", NULL, NULL, (double)st.slo_grows);
	single(e, mn, "allm_phase_swaps_total", "counter", "Decoding requests swapped to the host so that a "
	       "prefill chunk got its scratch (phase-aware placement).", (double)st.phase_swaps);
	fam(e, "allm_swap_bytes_total", "counter", "KV-cache bytes swapped, by direction and tier.", 4);
	value(e, mn, "direction", "out", "tier", "cpu", (double)st.swap_out_bytes);
	value(e, mn, "direction", "in", "tier", "cpu", (double)st.swap_in_bytes);
	value(e, mn, "direction", "out", "tier", "disk", (double)st.disk_write_bytes);
	value(e, mn, "direction", "in", "tier", "disk", (double)st.disk_read_bytes);
	single(e, mn, "allm_recomputed_tokens_total", "counter",
	       "Tokens prefilled again after recompute preemptions.", (double)st.recompute_tokens);
	single(e, mn, "allm_requests_failed_total", "counter",
	       "Requests that ended with an error.", (double)m->finished[CTL_FINISH_ERROR]);
	single(e, mn, "allm_mean_weighted_turnaround", "gauge",
	       "Mean weighted turnaround (finish-send)/(finish-first_scheduled) over the last 1000 "
	       "finished requests (NaN before one).",
	       v.mean_weighted_turnaround);
	single(e, mn, "allm_clients", "gauge", "Ring clients connected (an allm-gateway is one).",
	       h->ops->clients(h->user, NULL, 0));
	/* always on: a few KB unpacked a second; the keys do not depend on the run, so
	 * every test that asks fails on a drift, and a build never ships one */
	char why[128];
	if (ctl_enc_check_named(e, start, "families", metric_families, (uint32_t)ALLM_ARRAY_SIZE(metric_families), why,
				sizeof(why))) {
		fprintf(stderr, "metrics: %s\n", why);
		abort();
	}
}
