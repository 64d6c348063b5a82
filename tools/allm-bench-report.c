/* What allm-bench prints: the DESIGN §12 summary (engined/workload/metrics.c builds it, as for
 * allm-run --workload) completed with what only the engine knows (its `status`),
 * per-request JSONL records, and the human-readable tables. */
#include "allm-bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define PROG "allm-bench"

/* A copy of status[path] ("a.b"), or null when absent. */
static json_t *status_get(const json_t *status, const char *path)
{
	char key[64];
	const json_t *x = status;
	const char *p = path;
	while (x && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		snprintf(key, sizeof(key), "%.*s", (int)n, p);
		x = json_object_get(x, key);
		p += n + (dot ? 1 : 0);
	}
	return x ? json_deep_copy(x) : json_null();
}

static int64_t total_preemptions(const struct bench_result *r)
{
	int64_t n = 0;
	for (int64_t i = 0; i < r->n; i++)
		n += r->n_preempt[i];
	return n;
}

/* {p50, p90, p99, mean, max} of the inter-token gaps, null where there are none. */
static json_t *itl_json(const struct allm_pctl *p, double max)
{
	double v[5] = {p->p50, p->p90, p->p99, p->mean, max};
	const char *k[5] = {"p50", "p90", "p99", "mean", "max"};
	json_t *o = json_object();
	for (int i = 0; o && i < 5; i++)
		json_object_set_new(o, k[i], isfinite(v[i]) ? json_real(v[i]) : json_null());
	return o;
}

json_t *bench_summary_json(const struct bench_result *r)
{
	json_t *j = allm_metrics_summary_json(&r->sum);
	if (!j)
		return NULL;
	const json_t *st = r->status;
	/* the engine counts by kind; FINAL events only carry each request's total,
	 * which is kept beside them as a cross-check */
	json_t *pre = json_pack("{s:o, s:o, s:I}", "swap", status_get(st, "preemptions.swap"),
				"recompute", status_get(st, "preemptions.recompute"), "total",
				(json_int_t)total_preemptions(r));
	json_t *mape = json_pack("{s:o, s:o}", "swap", status_get(st, "predictor_mape.swap"),
				 "recompute", status_get(st, "predictor_mape.recompute"));
	/* a disk tier: its counts beside the others */
	json_t *disk_total = status_get(st, "blocks.disk.total");
	if (json_integer_value(disk_total) > 0) {
		json_object_set_new(pre, "disk", status_get(st, "preemptions.disk"));
		json_object_set_new(mape, "disk", status_get(st, "predictor_mape.disk"));
	}
	json_decref(disk_total);
	int bad = json_object_set_new(j, "preemptions", pre) |
		  json_object_set_new(j, "predictor_mape", mape) |
		  json_object_set_new(j, "failed", json_integer(r->n_failed)) |
		  json_object_set_new(j, "model", json_string(r->model)) |
		  json_object_set_new(j, "device", status_get(st, "device")) |
		  json_object_set_new(j, "policy", status_get(st, "policy")) |
		  json_object_set_new(j, "limits", status_get(st, "limits")) |
		  json_object_set_new(j, "blocks",
				      json_pack("{s:o, s:o, s:o}", "gpu",
						status_get(st, "blocks.gpu.total"), "cpu",
						status_get(st, "blocks.cpu.total"), "block_size",
						status_get(st, "block_size"))) |
		  json_object_set_new(j, "swapped_bytes", status_get(st, "swapped_bytes")) |
		  json_object_set_new(j, "prefix_cache", status_get(st, "prefix_cache")) |
		  json_object_set_new(j, "recomputed_tokens", status_get(st, "recomputed_tokens")) |
		  json_object_set_new(j, "steps", status_get(st, "steps")) |
		  json_object_set_new(j, "wasted_prefill_tokens", status_get(st, "wasted_prefill_tokens")) |
		  json_object_set_new(j, "max_wait_steps", status_get(st, "max_wait_steps")) |
		  json_object_set_new(j, "max_wait_ratio", status_get(st, "max_wait_ratio")) |
		  json_object_set_new(j, "itl_ms", itl_json(&r->itl_ms, r->itl_max_ms)) |
		  (st && bench_simulated(st)
			   ? json_object_set_new(j, "simulated",
						 json_string("times are the simulated device's virtual clock "
							     "(engine-side, from each FINAL event)"))
			   : 0);
	if (bad) {
		json_decref(j);
		return NULL;
	}
	return j;
}

int bench_write_records(const struct bench_result *r, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, PROG ": --records %s: %s\n", path, strerror(errno));
		return -1;
	}
	int rc = 0;
	for (int64_t i = 0; i < r->n && !rc; i++) {
		json_t *j = allm_metrics_record_json(&r->recs[i]);
		const uint64_t *us = &r->engine_us[3 * i];
		/* per kind only the engine's status knows; a FINAL has the total */
		rc = !j || json_object_set_new(j, "preemptions",
					       json_pack("{s:n, s:n, s:I}", "swap", "recompute",
							 "total", (json_int_t)r->n_preempt[i])) ||
		     json_object_set_new(j, "engine_ms",
					 json_pack("{s:f, s:f, s:f}", "queue", us[0] / 1e3, "ttft",
						   us[1] / 1e3, "total", us[2] / 1e3)) ||
		     json_dumpf(j, f, JSON_COMPACT | JSON_PRESERVE_ORDER) || fputc('\n', f) == EOF;
		json_decref(j);
	}
	if (fclose(f) || rc) {
		fprintf(stderr, PROG ": --records %s: write failed\n", path);
		return -1;
	}
	return 0;
}

static double num(const json_t *j, const char *path)
{
	json_t *v = status_get(j, path);
	double x = json_is_number(v) ? json_number_value(v) : NAN;
	json_decref(v);
	return x;
}

void bench_print_summary(FILE *f, const struct bench_opts *o, const struct bench_result *r)
{
	const struct allm_run_summary *s = &r->sum;
	const json_t *st = r->status;
	fprintf(f,
		"%s on %s: %lld requests (%lld failed) in %.2f s | %.1f tok/s (gen %.1f tok/s), "
		"%.2f req/s | mean weighted turnaround %.3f\n"
		"  TTFT p50 %.1f ms p99 %.1f ms | TPOT p50 %.2f ms p99 %.2f ms | ITL p50 %.2f ms "
		"p99 %.2f ms | e2e p50 %.1f ms p99 %.1f ms\n"
		"  preemptions: swap %.0f, recompute %.0f (total %lld) | predictor MAPE: swap %.2f %%, "
		"recompute %.2f %%\n"
		"  outputs_sha256 %s\n",
		o->workload, r->model, (long long)s->requests, (long long)r->n_failed, s->duration_s,
		s->throughput_tok_s, s->gen_throughput_tok_s, s->req_s, s->mean_weighted_turnaround,
		s->ttft_ms.p50, s->ttft_ms.p99, s->tpot_ms.p50, s->tpot_ms.p99, r->itl_ms.p50,
		r->itl_ms.p99, s->e2e_ms.p50, s->e2e_ms.p99, num(st, "preemptions.swap"), num(st, "preemptions.recompute"),
		(long long)total_preemptions(r), num(st, "predictor_mape.swap"),
		num(st, "predictor_mape.recompute"), s->outputs_sha256);
	if (st && bench_simulated(st))
		fprintf(f, "  SIMULATED on %s: times are its virtual clock; outputs are not meaningful "
			"text\n", json_string_value(json_object_get(st, "device")));
}

void bench_print_compare(FILE *f, const char *key, json_t *runs)
{
	size_t i;
	json_t *run;
	fprintf(f, "%-16s %9s %9s %7s %8s %9s %8s %9s %6s %6s %7s %7s  %s\n", key, "tok/s",
		"gen tok/s", "req/s", "mean WT", "TTFT p50", "TPOT p50", "e2e p50", "swaps",
		"recomp", "MAPE sw", "MAPE rc", "outputs");
	json_array_foreach(runs, i, run) {
		json_t *v = json_object_get(json_object_get(run, "setting"), key);
		char val[32];
		if (json_is_string(v))
			snprintf(val, sizeof(val), "%s", json_string_value(v));
		else
			snprintf(val, sizeof(val), "%g", json_number_value(v));
		const char *h = json_string_value(json_object_get(run, "outputs_sha256"));
		fprintf(f, "%-16s %9.1f %9.1f %7.2f %8.3f %9.1f %8.2f %9.1f %6.0f %6.0f %7.2f %7.2f  %.12s\n",
			val, num(run, "throughput_tok_s"), num(run, "gen_throughput_tok_s"),
			num(run, "req_s"), num(run, "mean_weighted_turnaround"), num(run, "ttft_ms.p50"),
			num(run, "tpot_ms.p50"), num(run, "e2e_ms.p50"), num(run, "preemptions.swap"),
			num(run, "preemptions.recompute"), num(run, "predictor_mape.swap"),
			num(run, "predictor_mape.recompute"), h ? h : "-");
	}
}
