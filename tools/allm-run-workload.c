/* allm-run --workload: an offline batch run of a workload through the engine's
 * step loop (all requests at t = 0, or Poisson arrivals), printing the summary of
 * DESIGN §12. Start-up work (load, calibration) is not in the measured time. */
#include "allm-run.h"
#include "decision-error.h"

#include "engine-calib.h"
#include "metrics.h"
#include "progress.h"
#include "sim/sim-backend.h"
#include "workload.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct wl_run {
	FILE *decisions; /* --decisions: one JSON line per decision once its cost is known */
	struct allm_req_record *recs; /* indexed by workload index */
	int32_t **gen; /* generated ids per request */
	int64_t done;
	int64_t n;
	double last_draw;
};

static void on_finish(void *user, const struct allm_result *r)
{
	struct wl_run *w = user;
	struct allm_req_record *rec = &w->recs[r->tag];
	int32_t n = r->n_generated;
	rec->first_sched_s = r->first_sched;
	rec->first_token_s = r->first_token;
	rec->finish_s = r->finish;
	rec->n_prompt = r->n_prompt;
	rec->n_generated = n;
	rec->n_preempt_swap = r->n_preempt_swap;
	rec->n_cached = r->n_cached;
	rec->n_preempt_recompute = r->n_preempt_recompute;
	w->gen[r->tag] = allm_malloc((size_t)ALLM_MAX(n, 1) * sizeof(int32_t));
	if (w->gen[r->tag])
		memcpy(w->gen[r->tag], r->generated, (size_t)n * sizeof(int32_t));
	rec->generated = w->gen[r->tag];
	snprintf(rec->finish_reason, sizeof(rec->finish_reason), "%s", allm_end_name(r->end));
	if (r->end == ALLM_END_ERROR)
		fprintf(stderr, "\nallm-run: request %lld failed: %s\n", (long long)r->tag, r->error);
	w->done++;
}

/* Writes a decision when its measured cost arrives (or at the end, unmeasured). */
static void write_decision(FILE *f, const struct allm_decision *d)
{
	json_t *j = json_pack("{s:I, s:s, s:f, s:I, s:I, s:i, s:i, s:f, s:f, s:f, s:s, s:s, s:b}", "seq",
			      (json_int_t)d->seq_no, "kind", d->kind == ALLM_DECISION_RESTORE ? "restore" : "preempt",
			      "time", d->time, "request", (json_int_t)d->req_id,
			      "tag", (json_int_t)d->tag, "tokens", d->n_tokens, "blocks", d->n_blocks,
			      "priority", d->priority, "pred_swap_s", d->pred_swap_s,
			      "pred_recompute_s", d->pred_recompute_s, "choice",
			      allm_choice_name(d->choice), "reason", allm_reason_text(d->reason), "estimated",
			      (int)d->estimated);
	if (!j)
		return;
	if (isfinite(d->pred_disk_s))
		json_object_set_new(j, "pred_disk_s", json_real(d->pred_disk_s));
	if (d->kind == ALLM_DECISION_RESTORE) {
		json_object_set_new(j, "tier", json_string(allm_kv_tier_name(d->tier)));
		json_object_set_new(j, "restored_blocks", json_integer(d->n_restored));
	}
	json_object_set_new(j, "measured_s", isfinite(d->measured_s) ? json_real(d->measured_s) : json_null());
	if (isfinite(d->oncpu_frac))
		json_object_set_new(j, "oncpu_frac", json_real(d->oncpu_frac));
	if (d->kind == ALLM_DECISION_PREEMPT) {
		/* what the cost was made of (bench/cost-explain.py fits these) */
		const struct allm_decision_parts *pt = &d->parts;
		json_t *parts = json_pack("{s:i, s:i, s:i, s:f, s:f, s:f, s:i, s:I, s:f, s:f}", "steps", pt->steps,
					  "step_tokens", pt->step_tokens, "step_seqs", pt->step_seqs, "step_s",
					  pt->step_s, "tokens", pt->tokens, "pairs", pt->pairs, "runs", pt->runs,
					  "faults", (json_int_t)pt->faults, "oncpu_before", pt->oncpu_before,
					  "rc_factor", pt->rc_factor);
		if (parts)
			json_object_set_new(j, "parts", parts);
	}
	if (isfinite(d->other_measured_s)) {
		json_object_set_new(j, "other_measured_s", json_real(d->other_measured_s));
		json_object_set_new(j, "regret", json_boolean(allm_decision_regret(d)));
	}
	json_dumpf(j, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', f);
	json_decref(j);
}

static void on_decision(void *user, const struct allm_decision *d, bool measured)
{
	struct wl_run *w = user;
	if (w->decisions && measured)
		write_decision(w->decisions, d);
}

/* Elastic memory's decisions go to the same file, kind "pool". */
static void on_pool(void *user, const struct allm_pool_decision *d)
{
	struct wl_run *w = user;
	if (!w->decisions)
		return;
	bool slo = d->reason == ALLM_POOL_SLO_TPOT || d->reason == ALLM_POOL_SLO_TTFT;
	const char *choice = slo ? (d->inflate ? "shrink" : "grow") : d->inflate ? "inflate" : "deflate";
	json_t *j = json_pack("{s:s, s:I, s:f, s:s, s:s, s:i, s:i, s:I, s:I, s:I}", "kind", "pool", "seq",
			      (json_int_t)d->seq_no, "time", d->time, "choice", choice,
			      "reason", allm_pool_reason_name(d->reason), "blocks", d->blocks, "kv_blocks",
			      d->kv_blocks, "scratch_tokens", (json_int_t)d->scratch_tokens, "scratch_bytes",
			      (json_int_t)d->scratch_bytes, "buffer_tokens", (json_int_t)d->buffer_tokens);
	if (!j)
		return;
	if (slo) { /* what the window saw against its target */
		json_object_set_new(j, "observed_ms", json_real(d->observed_ms));
		json_object_set_new(j, "target_ms", json_real(d->target_ms));
	}
	json_dumpf(j, w->decisions, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', w->decisions);
	json_decref(j);
}

static void calib_progress(void *user, int done, int total)
{
	struct allm_progress *p = user;
	allm_progress_steps(p, (uint64_t)done, (uint64_t)total);
}

/* A disk I/O failed and a request fell back to recompute: one line. */
static void on_note(void *user, const char *msg)
{
	fprintf(stderr, "allm-run: warning: %s\n", msg);
}

static void print_table(const struct allm_run_summary *s, const struct run_args *a,
			const struct allm_engine_stats *st)
{
	fprintf(stderr,
		"workload %s: %lld requests in %.2f s | %.1f tok/s (gen %.1f tok/s), %.2f req/s | "
		"mean weighted turnaround %.3f\n"
		"  TTFT p50 %.1f ms p99 %.1f ms | TPOT p50 %.2f ms p99 %.2f ms | e2e p50 %.1f ms\n"
		"  preemptions: swap %lld, recompute %lld, disk %lld | predictor MAPE: swap %.2f %%, recompute %.2f %%\n"
		"  decisions: %lld measured, MAPE swap %.2f %%, recompute %.2f %% | regret %lld of %lld probed\n"
		"  policy %s/%s | largest running batch %d | outputs_sha256 %s\n",
		a->workload, (long long)s->requests, s->duration_s, s->throughput_tok_s,
		s->gen_throughput_tok_s, s->req_s, s->mean_weighted_turnaround, s->ttft_ms.p50,
		s->ttft_ms.p99, s->tpot_ms.p50, s->tpot_ms.p99, s->e2e_ms.p50,
		(long long)s->preempt_swap, (long long)s->preempt_recompute, (long long)s->preempt_disk, s->mape_swap,
		s->mape_recompute, (long long)s->dec_measured, s->dec_mape_swap, s->dec_mape_recompute,
		(long long)s->dec_regret, (long long)s->dec_probed, allm_preempt_name(a->eng.preempt), allm_sched_name(a->eng.sched),
		st->max_running, s->outputs_sha256);
}

static double sim_wall(allm_backend_t *be)
{
	return be->simulated ? allm_sim_wall_seconds(be) : 0;
}

static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double sim_cpu(allm_backend_t *be)
{
	return be->simulated ? allm_sim_cpu_seconds(be) : 0;
}

/* What a simulated run adds to the summary: the profile, and the time the
 * engine's own host work took per step (the run's time minus the time spent in
 * the simulated device), the scheduler overhead at this batch size: in wall time
 * and in this thread's CPU time (which a loaded machine does not inflate). */
static json_t *sim_json(allm_backend_t *be, const struct allm_engine_stats *st, double wall,
			double simwall, double cpu, double simcpu)
{
	const struct allm_sim_profile *p = allm_sim_get_profile(be);
	double steps = (double)ALLM_MAX(st->steps, 1);
	return json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f}", "profile", p->name,
			 "profile_hash", p->hash, "wall_s", wall, "device_wall_s", simwall, "cpu_s", cpu,
			 "device_cpu_s", simcpu, "steps", (json_int_t)st->steps, "wall_per_step_ms",
			 wall / steps * 1e3, "host_per_step_ms", (wall - simwall) / steps * 1e3,
			 "host_cpu_per_step_ms", (cpu - simcpu) / steps * 1e3);
}

static int build_workload(struct allm_runtime *rt, const struct run_args *a,
			  struct allm_workload **ret)
{
	const struct allm_model_config *c = &rt->model->cfg;
	struct allm_err err = {{0}};
	struct allm_wl_opts o = {
		.name_or_file = a->workload,
		.n = a->n_requests,
		.max_output = a->max_output,
		.seed = a->params.seed,
		.rate = a->rate,
		.output_dist = a->output_dist,
	};
	if (allm_workload_for_model(&o, c, rt->tok, ret, &err)) {
		fprintf(stderr, "allm-run: --workload: %s\n", err.msg);
		return -1;
	}
	/* in-process, nothing else could encode a text prompt */
	for (int64_t i = 0; i < (*ret)->n; i++) {
		if ((*ret)->reqs[i].n_prompt == 0) {
			fprintf(stderr, "allm-run: --workload line %lld has a text prompt but the "
					"model has no tokenizer.json\n", (long long)i + 1);
			allm_workload_free(*ret);
			*ret = NULL;
			return -1;
		}
	}
	if ((*ret)->n_clipped)
		fprintf(stderr, "allm-run: %lld requests clipped to fit the context of %d tokens\n",
			(long long)(*ret)->n_clipped, c->max_pos);
	return 0;
}

int allm_run_workload(struct allm_runtime *rt, const struct run_args *a)
{
	struct allm_err err = {{0}};
	struct allm_workload *w = NULL;
	struct allm_predictor *pred = NULL;
	struct allm_engine *e = NULL;
	struct wl_run run = {0};
	struct allm_predictor_key key;
	struct allm_progress cp = {.label = "calibrating predictors"};
	struct allm_progress rp = {.label = "requests"};
	char note[600] = "";
	int rc = 1;

	if (build_workload(rt, a, &w))
		return 1;
	run.n = w->n;
	run.recs = allm_calloc((size_t)w->n, sizeof(*run.recs));
	run.gen = allm_calloc((size_t)w->n, sizeof(*run.gen));
	if (!run.recs || !run.gen)
		goto out;
	allm_engine_predictor_key(rt->model, rt->kv, &key);
	if (allm_predictor_create(&key, &pred))
		goto out;
	struct allm_engine_config ec;
	allm_engine_config_from_opts(&a->eng, &ec);
	ec.probe_other = a->probe_regret;
	struct allm_engine_events ev = {.user = &run, .on_finish = on_finish, .on_decision = on_decision,
					.on_note = on_note, .on_pool = on_pool};
	if (a->decisions && !(run.decisions = fopen(a->decisions, "w"))) {
		fprintf(stderr, "allm-run: --decisions %s: %s\n", a->decisions, strerror(errno));
		goto out;
	}
	if (allm_engine_create(rt->model, rt->kv, pred, &ec, &ev, &e, &err) ||
	    allm_engine_prepare_predictor(e, a->eng.profile, a->eng.calibrate_at_start, calib_progress, &cp, note, sizeof(note),
					  &err)) {
		fprintf(stderr, "allm-run: %s\n", err.msg);
		goto out;
	}
	if (note[0])
		fprintf(stderr, "allm-run: %s\n", note);
	fprintf(stderr, "allm-run: KV blocks: %d GPU, %d CPU (block size %d, %s, %.1f KiB each)\n",
		rt->kv->gpu.n_total, rt->kv->cpu.n_total, rt->kv->lay.block_size,
		allm_dtype_name(rt->kv->lay.dtype), rt->kv->block_bytes / 1024.0);
	if (rt->memory_note[0])
		fprintf(stderr, "allm-run: %s\n", rt->memory_note);
	allm_engine_reset_stats(e);

	/* the device's clock: a simulated device's runs are in simulated time */
	allm_backend_t *be = rt->be;
	double t0 = allm_backend_clock(be), wall0 = allm_now(), simwall0 = sim_wall(be);
	double cpu0 = thread_cpu(), simcpu0 = sim_cpu(be);
	int64_t next = 0;
	while (run.done < w->n) {
		double now = allm_backend_clock(be);
		for (; next < w->n && t0 + w->reqs[next].arrival_s <= now; next++) {
			const struct allm_wl_request *q = &w->reqs[next];
			struct allm_submit s = {
				.prompt = q->prompt_ids,
				.n_prompt = q->n_prompt,
				.params = a->params,
				.grammar = a->compiled, /* --json-schema etc.: every request */
				.tag = (uint64_t)q->index,
				.arrival = t0 + q->arrival_s,
			};
			/* each request its own stream: seed + index, so outputs do not depend
			 * on the order requests happen to be sampled in */
			s.params.seed = a->params.seed + (uint64_t)q->index;
			s.params.max_tokens = q->max_tokens;
			run.recs[q->index].index = q->index;
			run.recs[q->index].send_s = s.arrival;
			if (allm_engine_submit(e, &s, NULL, &err)) {
				fprintf(stderr, "\nallm-run: request %lld rejected: %s\n", (long long)q->index, err.msg);
				struct allm_req_record *rec = &run.recs[q->index];
				rec->first_sched_s = rec->first_token_s = rec->finish_s = now;
				rec->n_prompt = q->n_prompt;
				snprintf(rec->finish_reason, sizeof(rec->finish_reason), "error");
				run.done++;
			}
		}
		if (allm_engine_idle(e)) {
			if (next < w->n)
				allm_backend_clock_wait_until(be, t0 + w->reqs[next].arrival_s);
			continue;
		}
		if (allm_engine_step(e, &err) < 0)
			fprintf(stderr, "\nallm-run: step failed: %s\n", err.msg);
		allm_progress_steps(&rp, (uint64_t)run.done, (uint64_t)w->n);
	}
	double t1 = allm_backend_clock(be);
	double wall = allm_now() - wall0, simwall = sim_wall(be) - simwall0;
	double cpu = thread_cpu() - cpu0, simcpu = sim_cpu(be) - simcpu0;

	struct allm_run_summary sum;
	struct allm_engine_stats st;
	allm_engine_get_stats(e, &st);
	allm_metrics_summarize(run.recs, w->n, t0, t1, &sum);
	sum.preempt_swap = st.preempt_swap;
	sum.preempt_recompute = st.preempt_recompute;
	sum.mape_swap = st.mape_swap;
	sum.mape_recompute = st.mape_recompute;
	sum.dec_mape_swap = st.dec_mape_swap;
	sum.dec_mape_recompute = st.dec_mape_recompute;
	sum.dec_measured = st.dec_measured;
	sum.dec_probed = st.dec_probed;
	sum.dec_regret = st.dec_regret;
	sum.has_disk = rt->kv->disk != NULL;
	sum.preempt_disk = st.preempt_disk;
	sum.mape_disk = st.mape_disk;
	sum.prefix = (struct allm_prefix_summary){
		.present = true, .enabled = allm_engine_get_config(e)->prefix_caching,
		.queried_tokens = st.pc_queried_tokens, .hit_tokens = st.pc_hit_tokens,
		.restored_tokens = st.pc_restored_tokens, .recomputed_cached_tokens = st.pc_recomputed_cached_tokens,
	};
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++) {
		sum.prefix.hit_tokens_by_tier[t] = st.pc_hit_tokens_tier[t];
		sum.prefix.cached_blocks[t] = st.pc_blocks[t];
	}
	if (a->records) {
		FILE *f = fopen(a->records, "w");
		if (!f) {
			fprintf(stderr, "allm-run: --records %s: %s\n", a->records, strerror(errno));
			goto out;
		}
		for (int64_t i = 0; i < w->n; i++) {
			json_t *j = allm_metrics_record_json(&run.recs[i]);
			if (j) {
				json_dumpf(j, f, JSON_COMPACT);
				fputc('\n', f);
				json_decref(j);
			}
		}
		fclose(f);
	}
	if (a->json) {
		json_t *j = allm_metrics_summary_json(&sum);
		json_object_set_new(j, "model", json_string(rt->model_desc));
		json_object_set_new(j, "device", json_string(rt->be->iface->describe(rt->be)));
		json_object_set_new(j, "policy", json_pack("{s:s, s:s}", "preempt",
							   allm_preempt_name(a->eng.preempt), "sched",
							   allm_sched_name(a->eng.sched)));
		json_object_set_new(j, "blocks", json_pack("{s:i, s:i, s:i, s:i}", "gpu", rt->kv->gpu.n_total,
							   "cpu", rt->kv->cpu.n_total, "disk", st.disk_total,
							   "block_size", rt->kv->lay.block_size));
		if (rt->kv->disk)
			json_object_set_new(j, "disk_bytes", json_pack("{s:I, s:I, s:I, s:I, s:I}", "write",
								       (json_int_t)st.disk_write_bytes, "read",
								       (json_int_t)st.disk_read_bytes, "demotions",
								       (json_int_t)st.demotions, "stage_hits",
								       (json_int_t)st.disk_stage_hits, "reads_ahead",
								       (json_int_t)st.disk_reads_ahead));
		json_object_set_new(j, "swapped_bytes", json_pack("{s:I, s:I}", "out",
								  (json_int_t)st.swap_out_bytes, "in",
								  (json_int_t)st.swap_in_bytes));
		json_object_set_new(j, "recomputed_tokens", json_integer(st.recompute_tokens));
		json_object_set_new(j, "steps", json_pack("{s:I, s:I, s:I}", "decode",
							  (json_int_t)(st.decode_steps - st.mixed_steps),
							  "mixed", (json_int_t)st.mixed_steps, "prefill",
							  (json_int_t)(st.prefill_steps - st.mixed_steps)));
		json_object_set_new(j, "max_running", json_integer(st.max_running));
		json_object_set_new(j, "memory", json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I}", "elastic", st.elastic,
							   "pool_bytes", (json_int_t)st.pool_bytes, "inflations",
							   (json_int_t)st.inflations, "deflations", (json_int_t)st.deflations,
							   "blocks_inflated", (json_int_t)st.blocks_inflated,
							   "blocks_deflated", (json_int_t)st.blocks_deflated,
							   "over_budget_steps", (json_int_t)st.over_budget_steps));
		json_object_set_new(j, "slo", json_pack("{s:I, s:I, s:I, s:I}", "buffer_tokens",
							(json_int_t)st.slo_buffer_tokens, "shrinks", (json_int_t)st.slo_shrinks,
							"grows", (json_int_t)st.slo_grows, "phase_swaps",
							(json_int_t)st.phase_swaps));
		json_object_set_new(j, "wasted_prefill_tokens", json_integer(st.wasted_prefill_tokens));
		json_object_set_new(j, "max_wait_steps", json_integer(st.max_wait_steps));
		json_object_set_new(j, "max_wait_ratio", json_real(st.max_wait_ratio));
		if (be->simulated)
			json_object_set_new(j, "simulated", sim_json(be, &st, wall, simwall, cpu, simcpu));
		char *s = json_dumps(j, JSON_PRESERVE_ORDER | JSON_INDENT(2));
		json_decref(j);
		if (!s)
			goto out;
		puts(s);
		free(s);
	} else {
		print_table(&sum, a, &st);
	}
	if (be->simulated)
		fprintf(stderr, "allm-run: SIMULATED on %s: times are the profile's virtual clock "
			"(%.2f s wall); outputs are not meaningful text\n", be->iface->describe(be), wall);
	rc = 0;
out:
	if (run.gen)
		for (int64_t i = 0; i < run.n; i++)
			allm_free(run.gen[i]);
	allm_free(run.gen);
	allm_free(run.recs);
	if (run.decisions)
		fclose(run.decisions);
	allm_engine_free(e);
	allm_predictor_free(pred);
	allm_workload_free(w);
	return rc;
}
