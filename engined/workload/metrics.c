/* Run summary and per-request records; the definitions are in metrics.h. */
#include "metrics.h"

#include <math.h>
#include <stdlib.h>

#include "sha256.h"
#include "common.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double percentile_sorted(const double *x, int64_t m, double p)
{
	double rank = p / 100.0 * (double)(m - 1);
	int64_t lo = (int64_t)floor(rank);
	if (lo >= m - 1)
		return x[m - 1];
	return x[lo] + (rank - (double)lo) * (x[lo + 1] - x[lo]);
}

struct allm_pctl allm_metrics_pctl(double *x, int64_t m)
{
	struct allm_pctl s = {NAN, NAN, NAN, NAN};
	if (m <= 0)
		return s;
	qsort(x, (size_t)m, sizeof(*x), cmp_double);
	double sum = 0.0;
	for (int64_t i = 0; i < m; i++)
		sum += x[i];
	s.p50 = percentile_sorted(x, m, 50.0);
	s.p90 = percentile_sorted(x, m, 90.0);
	s.p99 = percentile_sorted(x, m, 99.0);
	s.mean = sum / (double)m;
	return s;
}

/* Seconds in x, milliseconds out. */
static struct allm_pctl stats_ms(double *x, int64_t m)
{
	struct allm_pctl s = allm_metrics_pctl(x, m);
	s.p50 *= 1e3;
	s.p90 *= 1e3;
	s.p99 *= 1e3;
	s.mean *= 1e3;
	return s;
}

double allm_metrics_weighted_turnaround(double send, double first_sched, double finish)
{
	double den = finish - first_sched;
	if (!(den > 0.0))
		return 1.0;
	double w = (finish - send) / den;
	return w >= 1.0 ? w : 1.0; /* clock jitter can put first_sched a hair before send */
}

static double weighted_turnaround(const struct allm_req_record *r)
{
	return allm_metrics_weighted_turnaround(r->send_s, r->first_sched_s, r->finish_s);
}

static int cmp_rec_index(const void *a, const void *b)
{
	int64_t x = (*(const struct allm_req_record *const *)a)->index;
	int64_t y = (*(const struct allm_req_record *const *)b)->index;
	return (x > y) - (x < y);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* byidx: records sorted by index. */
static void outputs_hash(const struct allm_req_record *const *byidx, int64_t n, char hex[65])
{
	struct allm_sha256 c;
	uint8_t buf[256], d[32];
	size_t nb = 0;
	allm_sha256_init(&c);
	for (int64_t i = 0; i < n; i++) {
		const struct allm_req_record *r = byidx[i];
		for (int32_t k = 0; k <= r->n_generated; k++) {
			uint32_t v = k < r->n_generated ? (uint32_t)r->generated[k] : UINT32_MAX;
			put_le32(buf + nb, v);
			nb += 4;
			if (nb == sizeof(buf)) {
				allm_sha256_update(&c, buf, nb);
				nb = 0;
			}
		}
	}
	allm_sha256_update(&c, buf, nb);
	allm_sha256_final(&c, d);
	allm_sha256_hex(d, hex);
}

int allm_metrics_summarize(const struct allm_req_record *recs, int64_t n, double start_s,
			   double end_s, struct allm_run_summary *ret)
{
	struct allm_run_summary s = {0};
	const struct allm_req_record **byidx = NULL;
	double *ttft = NULL, *tpot = NULL, *e2e = NULL;
	int64_t n_ttft = 0, n_tpot = 0;
	double wt_sum = 0.0;
	int rc = 0;

	if (n < 0 || (n > 0 && !recs) || !(end_s >= start_s))
		return -EINVAL;
	size_t m = n > 0 ? (size_t)n : 1;
	byidx = allm_malloc(m * sizeof(*byidx));
	ttft = allm_malloc(m * sizeof(double));
	tpot = allm_malloc(m * sizeof(double));
	e2e = allm_malloc(m * sizeof(double));
	if (!byidx || !ttft || !tpot || !e2e) {
		rc = -ENOMEM;
		goto out;
	}

	for (int64_t i = 0; i < n; i++) {
		const struct allm_req_record *r = &recs[i];
		if (r->n_generated < 0 || (r->n_generated > 0 && !r->generated)) {
			rc = -EINVAL;
			goto out;
		}
		byidx[i] = r;
		s.prompt_tokens += r->n_prompt;
		s.generated_tokens += r->n_generated;
		s.preempt_swap += r->n_preempt_swap;
		s.preempt_recompute += r->n_preempt_recompute;
		wt_sum += weighted_turnaround(r);
		e2e[i] = r->finish_s - r->send_s;
		if (r->n_generated >= 1)
			ttft[n_ttft++] = r->first_token_s - r->send_s;
		if (r->n_generated >= 2)
			tpot[n_tpot++] = (r->finish_s - r->first_token_s) / (double)(r->n_generated - 1);
	}
	if (n > 0)
		qsort(byidx, (size_t)n, sizeof(*byidx), cmp_rec_index);
	for (int64_t i = 1; i < n; i++) {
		if (byidx[i]->index == byidx[i - 1]->index) {
			rc = -EINVAL;
			goto out;
		}
	}
	outputs_hash(byidx, n, s.outputs_sha256);

	s.requests = n;
	s.duration_s = end_s - start_s;
	if (s.duration_s > 0.0) {
		s.throughput_tok_s = (double)(s.prompt_tokens + s.generated_tokens) / s.duration_s;
		s.gen_throughput_tok_s = (double)s.generated_tokens / s.duration_s;
		s.req_s = (double)n / s.duration_s;
	}
	s.mean_weighted_turnaround = n > 0 ? wt_sum / (double)n : NAN;
	s.ttft_ms = stats_ms(ttft, n_ttft);
	s.tpot_ms = stats_ms(tpot, n_tpot);
	s.e2e_ms = stats_ms(e2e, n);
	s.mape_swap = NAN;
	s.mape_recompute = NAN;
	s.dec_mape_swap = s.dec_mape_recompute = NAN;
	*ret = s;
out:
	allm_free(byidx);
	allm_free(ttft);
	allm_free(tpot);
	allm_free(e2e);
	return rc;
}

/* JSON has no NaN/Inf: they become null. */
static json_t *num(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *pctl_json(double p50, double p90, double p99, double mean)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = json_object_set_new(o, "p50", num(p50)) | json_object_set_new(o, "p90", num(p90)) |
		  json_object_set_new(o, "p99", num(p99)) | json_object_set_new(o, "mean", num(mean));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *pair_json(const char *k1, json_t *v1, const char *k2, json_t *v2)
{
	json_t *o = json_object();
	if (!o) {
		json_decref(v1);
		json_decref(v2);
		return NULL;
	}
	if (json_object_set_new(o, k1, v1) | json_object_set_new(o, k2, v2)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *allm_metrics_summary_json(const struct allm_run_summary *s)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	bad |= json_object_set_new(o, "requests", json_integer(s->requests));
	bad |= json_object_set_new(o, "duration_s", num(s->duration_s));
	bad |= json_object_set_new(o, "throughput_tok_s", num(s->throughput_tok_s));
	bad |= json_object_set_new(o, "gen_throughput_tok_s", num(s->gen_throughput_tok_s));
	bad |= json_object_set_new(o, "req_s", num(s->req_s));
	bad |= json_object_set_new(o, "mean_weighted_turnaround", num(s->mean_weighted_turnaround));
	bad |= json_object_set_new(o, "ttft_ms", pctl_json(s->ttft_ms.p50, s->ttft_ms.p90,
							   s->ttft_ms.p99, s->ttft_ms.mean));
	bad |= json_object_set_new(o, "tpot_ms", pctl_json(s->tpot_ms.p50, s->tpot_ms.p90,
							   s->tpot_ms.p99, s->tpot_ms.mean));
	bad |= json_object_set_new(o, "e2e_ms", pctl_json(s->e2e_ms.p50, s->e2e_ms.p90,
							  s->e2e_ms.p99, s->e2e_ms.mean));
	bad |= json_object_set_new(o, "preemptions",
				   pair_json("swap", json_integer(s->preempt_swap), "recompute",
					     json_integer(s->preempt_recompute)));
	bad |= json_object_set_new(o, "predictor_mape",
				   pair_json("swap", num(s->mape_swap), "recompute",
					     num(s->mape_recompute)));
	bad |= json_object_set_new(o, "decision_mape",
				   json_pack("{s:o, s:o, s:I, s:I, s:I}", "swap", num(s->dec_mape_swap), "recompute",
					     num(s->dec_mape_recompute), "measured", (json_int_t)s->dec_measured,
					     "probed", (json_int_t)s->dec_probed, "regret", (json_int_t)s->dec_regret));
	if (s->has_disk) {
		bad |= json_object_set_new(json_object_get(o, "preemptions"), "disk",
					   json_integer(s->preempt_disk));
		bad |= json_object_set_new(json_object_get(o, "predictor_mape"), "disk", num(s->mape_disk));
	}
	if (s->prefix.present) {
		const struct allm_prefix_summary *p = &s->prefix;
		bad |= json_object_set_new(o, "prefix_cache",
					   json_pack("{s:b, s:I, s:I, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:I, s:I}",
						     "enabled", p->enabled, "queried_tokens", (json_int_t)p->queried_tokens,
						     "hit_tokens", (json_int_t)p->hit_tokens, "hit_tokens_by_tier",
						     "device", (json_int_t)p->hit_tokens_by_tier[0], "host",
						     (json_int_t)p->hit_tokens_by_tier[1], "disk",
						     (json_int_t)p->hit_tokens_by_tier[2], "cached_blocks", "device",
						     (json_int_t)p->cached_blocks[0], "host", (json_int_t)p->cached_blocks[1],
						     "disk", (json_int_t)p->cached_blocks[2], "restored_tokens",
						     (json_int_t)p->restored_tokens, "recomputed_cached_tokens",
						     (json_int_t)p->recomputed_cached_tokens));
	}
	bad |= json_object_set_new(o, "outputs_sha256", json_string(s->outputs_sha256));
	bad |= json_object_set_new(o, "prompt_tokens", json_integer(s->prompt_tokens));
	bad |= json_object_set_new(o, "generated_tokens", json_integer(s->generated_tokens));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *allm_metrics_record_json(const struct allm_req_record *r)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	double tpot = r->n_generated >= 2
			      ? (r->finish_s - r->first_token_s) / (double)(r->n_generated - 1) * 1e3
			      : NAN;
	double ttft = r->n_generated >= 1 ? (r->first_token_s - r->send_s) * 1e3 : NAN;
	bad |= json_object_set_new(o, "index", json_integer(r->index));
	bad |= json_object_set_new(o, "send_s", num(r->send_s));
	bad |= json_object_set_new(o, "first_sched_s", num(r->first_sched_s));
	bad |= json_object_set_new(o, "first_token_s", num(r->first_token_s));
	bad |= json_object_set_new(o, "finish_s", num(r->finish_s));
	bad |= json_object_set_new(o, "queue_ms", num((r->first_sched_s - r->send_s) * 1e3));
	bad |= json_object_set_new(o, "ttft_ms", num(ttft));
	bad |= json_object_set_new(o, "tpot_ms", num(tpot));
	bad |= json_object_set_new(o, "e2e_ms", num((r->finish_s - r->send_s) * 1e3));
	bad |= json_object_set_new(o, "weighted_turnaround", num(weighted_turnaround(r)));
	bad |= json_object_set_new(o, "n_prompt", json_integer(r->n_prompt));
	bad |= json_object_set_new(o, "n_generated", json_integer(r->n_generated));
	bad |= json_object_set_new(o, "cached_tokens", json_integer(r->n_cached));
	bad |= json_object_set_new(o, "preemptions",
				   pair_json("swap", json_integer(r->n_preempt_swap), "recompute",
					     json_integer(r->n_preempt_recompute)));
	bad |= json_object_set_new(o, "finish_reason", json_stringn(
		r->finish_reason, strnlen(r->finish_reason, sizeof(r->finish_reason))));
	json_t *ids = json_array();
	for (int32_t k = 0; ids && r->generated && k < r->n_generated; k++)
		bad |= json_array_append_new(ids, json_integer(r->generated[k]));
	bad |= json_object_set_new(o, "generated", ids);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}
