/* One benchmark run against one engine, through libadaptivellm: the same workload
 * allm-run --workload builds (same generator, clipping and per-request seeds), sent
 * at t = 0 or at Poisson arrival times, under an optional cap on requests in flight,
 * with every event timed on the client's clock (DESIGN §10: TTFT is what the client
 * sees). One thread; the client waits on the CQ doorbell between events. */
#include "allm-bench.h"

#include "model.h"
#include "progress.h"
#include "model-writer.h"
#include "tokenizer.h"

#include <adaptivellm/client.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "allm-bench"
/* Rings and arena asked for: a whole paper workload (1000 requests) can sit in
 * the SQ/arena at t = 0 and a decode step of 256 sequences fits the CQ. */
#define BENCH_SQ_ENTRIES 4096
#define BENCH_CQ_ENTRIES 16384
#define BENCH_ARENA (16u << 20)
/* Longest sleep between checks of arrivals and of the interrupt flag. */
#define BENCH_WAIT_MS 100
/* Connection attempts 10 ms apart while an engine is between bind and listen. */
#define BENCH_CONNECT_TRIES 200

/* The model's vocabulary and context decide the synthetic ids and the clipping,
 * exactly as allm-run sees them; its tokenizer (if any) encodes text prompts of a
 * JSONL workload so that clipping applies to them too. `ref` is the engine's model
 * as its welcome names it: a directory, "dummy:PRESET" or "default". */
static int load_model_info(const struct bench_opts *o, const char *ref,
			   struct allm_model_config *cfg, struct allm_tokenizer **tok)
{
	struct allm_err err = {{0}};
	int r;
	*tok = NULL;
	if (o->dummy || !strncmp(ref, "dummy:", 6)) {
		r = allm_model_config_preset(o->dummy ? o->dummy : ref + 6, cfg, &err);
	} else {
		struct allm_vdir disk = allm_vdir_disk(o->model_dir ? o->model_dir : ref);
		const struct allm_vdir *dir =
			!o->model_dir && !strcmp(ref, "default") ? allm_default_model() : &disk;
		r = allm_model_config_load_from(dir, cfg, &err);
		if (!r && allm_tokenizer_load_from(dir, tok, &err) < 0)
			*tok = NULL; /* no tokenizer: text prompts go to the engine as text */
	}
	if (r)
		fprintf(stderr, PROG ": cannot read the config of the engine's model '%s': %s\n", ref,
			err.msg[0] ? err.msg : "unknown");
	return r ? -1 : 0;
}

/* The trace allm-run --workload builds (workload-model.c), so the hashes agree. */
static int build_workload(const struct bench_opts *o, const struct allm_model_config *c,
			  const struct allm_tokenizer *tok, struct allm_workload **ret)
{
	struct allm_err err = {{0}};
	struct allm_wl_opts wo = {
		.name_or_file = o->workload,
		.n = o->n,
		.max_output = o->max_output,
		.seed = o->params.seed,
		.rate = o->rate,
		.output_dist = o->output_dist,
	};
	if (allm_workload_for_model(&wo, c, tok, ret, &err)) {
		fprintf(stderr, PROG ": --workload: %s\n", err.msg);
		return -1;
	}
	if ((*ret)->n_clipped)
		fprintf(stderr, PROG ": %lld requests clipped to fit the context of %d tokens\n",
			(long long)(*ret)->n_clipped, c->max_pos);
	return 0;
}

/* The state of a run in flight. */
struct run_state {
	struct bench_result *res;
	double t0;            /* allm_now() of the first send: time 0 of the records */
	int64_t sent, done, in_flight;
	int32_t *gen_cap;     /* allocated slots of res->gen[i] */
	struct allm_progress bar;
};

static int push_token(struct run_state *s, int64_t i, int32_t id)
{
	struct allm_req_record *rec = &s->res->recs[i];
	if (rec->n_generated == s->gen_cap[i]) {
		int32_t cap = s->gen_cap[i] ? s->gen_cap[i] * 2 : 64;
		int32_t *v = allm_realloc(s->res->gen[i], (size_t)cap * sizeof(int32_t));
		if (!v)
			return -ENOMEM;
		s->res->gen[i] = v;
		s->gen_cap[i] = cap;
	}
	s->res->gen[i][rec->n_generated++] = id;
	return 0;
}

/* One inter-token gap (ITL): what chunked prefill bounds, where a request's mean
 * TPOT averages a stall over all its tokens. */
static int push_gap(struct bench_result *r, double gap)
{
	if (r->n_itl == r->cap_itl) {
		int64_t cap = r->cap_itl ? r->cap_itl * 2 : 4096;
		double *v = allm_realloc(r->itl, (size_t)cap * sizeof(double));
		if (!v)
			return -ENOMEM;
		r->itl = v;
		r->cap_itl = cap;
	}
	r->itl[r->n_itl++] = gap;
	return 0;
}

static void on_final(struct run_state *s, int64_t i, const struct allm_event *ev, double now)
{
	struct bench_result *res = s->res;
	struct allm_req_record *rec = &res->recs[i];
	rec->finish_s = now;
	if (rec->n_generated == 0)
		rec->first_token_s = now;
	/* the engine's span from first scheduling to finish, anchored at our finish:
	 * (finish - send) / (finish - first_sched) is then the client-side weighted
	 * turnaround, with no need to share a clock with the engine */
	double busy = ev->total_us >= ev->queue_us ? (double)(ev->total_us - ev->queue_us) / 1e6 : 0;
	rec->first_sched_s = ALLM_MAX(rec->send_s, now - busy);
	rec->n_prompt = (int32_t)ev->n_prompt;
	rec->n_cached = (int32_t)ev->n_cached;
	rec->generated = res->gen[i];
	res->n_preempt[i] = ev->n_preemptions;
	res->engine_us[3 * i] = ev->queue_us;
	res->engine_us[3 * i + 1] = ev->ttft_us;
	res->engine_us[3 * i + 2] = ev->total_us;
	snprintf(rec->finish_reason, sizeof(rec->finish_reason), "%s",
		 allm_finish_reason_name(ev->finish_reason));
	if (ev->finish_reason == ALLM_FINISH_ERROR) {
		if (res->n_failed++ < 5)
			fprintf(stderr, "\n" PROG ": request %lld failed: %s\n", (long long)i,
				ev->error ? ev->error : "unknown error");
	}
	s->done++;
	s->in_flight--;
}

/* Takes every event that is ready (waiting up to timeout_ms for the first).
 * Returns 0, or a negative errno when the engine went away. */
static int drain_events(allm_client_t *c, struct run_state *s, int timeout_ms)
{
	struct allm_event ev;
	int r;
	while ((r = allm_client_wait(c, &ev, timeout_ms)) == 1) {
		timeout_ms = 0;
		double now = allm_now() - s->t0;
		if (ev.user_tag >= (uint64_t)s->res->n)
			continue; /* not ours: the engine echoes tags as given */
		int64_t i = (int64_t)ev.user_tag;
		if (ev.kind == ALLM_EVENT_TOKEN && ev.token_id >= 0) {
			if (s->res->recs[i].n_generated == 0)
				s->res->recs[i].first_token_s = now;
			else if (push_gap(s->res, now - s->res->last_token_s[i]))
				return -ENOMEM;
			s->res->last_token_s[i] = now;
			if (push_token(s, i, ev.token_id))
				return -ENOMEM;
		} else if (ev.kind == ALLM_EVENT_FINAL) {
			on_final(s, i, &ev, now);
		}
	}
	return r == -EINTR ? 0 : r;
}

static int send_one(allm_client_t *c, const struct bench_opts *o, struct run_state *s,
		    const struct allm_wl_request *q)
{
	struct allm_request_params p;
	allm_request_params_init(&p);
	if (q->n_prompt > 0) {
		p.prompt_ids = q->prompt_ids;
		p.n_prompt_ids = (size_t)q->n_prompt;
	} else {
		p.prompt = q->prompt_text;
		p.prompt_len = strlen(q->prompt_text);
	}
	p.params = o->params;
	p.params.max_tokens = q->max_tokens;
	/* request i samples with seed + i, as allm-run does: outputs do not depend on
	 * the order requests happen to be scheduled in */
	p.params.seed = o->params.seed + (uint64_t)q->index;
	p.user_tag = (uint64_t)q->index;
	int r = allm_client_submit(c, &p);
	if (r == 0) {
		struct allm_req_record *rec = &s->res->recs[q->index];
		rec->send_s = allm_now() - s->t0;
		s->sent++;
		s->in_flight++;
	}
	return r;
}

/* Sends what is due, takes events, until every request has its FINAL. */
static int drive(allm_client_t *c, const struct bench_opts *o, const struct allm_workload *w,
		 struct run_state *s)
{
	while (s->done < w->n) {
		if (bench_interrupted) {
			fprintf(stderr, "\n" PROG ": interrupted\n");
			return -EINTR;
		}
		double now = allm_now() - s->t0;
		while (s->sent < w->n && w->reqs[s->sent].arrival_s <= now &&
		       (o->concurrency == 0 || s->in_flight < o->concurrency)) {
			int r = send_one(c, o, s, &w->reqs[s->sent]);
			if (r == -EAGAIN)
				break; /* SQ or arena full: events first, then retry */
			if (r < 0) {
				fprintf(stderr, "\n" PROG ": submit: %s\n", strerror(-r));
				return r;
			}
		}
		int timeout = BENCH_WAIT_MS;
		if (s->sent < w->n && (o->concurrency == 0 || s->in_flight < o->concurrency)) {
			double due = (w->reqs[s->sent].arrival_s - now) * 1e3;
			timeout = (int)ALLM_MIN((double)BENCH_WAIT_MS, ALLM_MAX(due, 0.0));
			if (s->in_flight == 0 && due <= 0)
				timeout = 1; /* SQ full with nothing in flight cannot happen; be safe */
		}
		int r = drain_events(c, s, timeout);
		if (r < 0) {
			fprintf(stderr, "\n" PROG ": lost the engine: %s\n", strerror(-r));
			return r;
		}
		if (!o->quiet)
			allm_progress_steps(&s->bar, (uint64_t)s->done, (uint64_t)w->n);
	}
	return 0;
}

static int alloc_result(struct bench_result *r, int64_t n)
{
	r->n = n;
	r->recs = allm_calloc((size_t)n, sizeof(*r->recs));
	r->gen = allm_calloc((size_t)n, sizeof(*r->gen));
	r->n_preempt = allm_calloc((size_t)n, sizeof(*r->n_preempt));
	r->engine_us = allm_calloc((size_t)n * 3, sizeof(*r->engine_us));
	r->last_token_s = allm_calloc((size_t)n, sizeof(*r->last_token_s));
	if (!r->recs || !r->gen || !r->n_preempt || !r->engine_us || !r->last_token_s)
		return -ENOMEM;
	for (int64_t i = 0; i < n; i++)
		r->recs[i].index = i;
	return 0;
}

bool bench_simulated(const json_t *status)
{
	const char *dev = json_string_value(json_object_get(status, "device"));
	return dev && !strncmp(dev, "sim:", 4);
}

/* A simulated engine's times are its virtual clock's, which the client cannot see:
 * the records are rebuilt from what each FINAL carries (queue, TTFT and total on
 * the engine's clock, from the request's arrival there), each request sent at its
 * workload arrival time, and the run lasts until the last finish. */
static int use_engine_times(const struct bench_opts *o, const struct allm_workload *w,
			    struct bench_result *r)
{
	double end = 0;
	for (int64_t i = 0; i < w->n; i++) {
		struct allm_req_record *rec = &r->recs[w->reqs[i].index];
		const uint64_t *us = &r->engine_us[3 * w->reqs[i].index];
		rec->send_s = w->reqs[i].arrival_s;
		rec->first_sched_s = rec->send_s + us[0] / 1e6;
		rec->first_token_s = rec->send_s + us[1] / 1e6;
		rec->finish_s = rec->send_s + us[2] / 1e6;
		end = ALLM_MAX(end, rec->finish_s);
	}
	if (o->rate > 0)
		fprintf(stderr, PROG ": warning: --rate with a simulated engine: requests are sent on "
				"the wall clock but timed on the engine's virtual clock from when it took "
				"them; for Poisson arrivals in simulated time use allm-run --workload --rate\n");
	r->duration_s = end;
	return allm_metrics_summarize(r->recs, w->n, 0, end, &r->sum) ? -1 : 0;
}

int bench_run(const struct bench_opts *o, const char *runtime_dir, const char *name,
	      struct bench_result *ret)
{
	struct allm_client_opts co = {
		.name = name,
		.runtime_dir = runtime_dir,
		.sq_entries = BENCH_SQ_ENTRIES,
		.cq_entries = BENCH_CQ_ENTRIES,
		.arena_size = BENCH_ARENA,
	};
	struct allm_model_config cfg;
	struct allm_tokenizer *tok = NULL;
	struct allm_workload *w = NULL;
	allm_client_t *c = NULL;
	struct run_state s = {.res = ret, .bar = {.label = "requests"}};
	char err[256];
	int rc = -1, r;

	memset(ret, 0, sizeof(*ret));
	/* The socket file appears at bind(), a moment before listen(): a spawned
	 * engine seen that early refuses; it is ready a few milliseconds later. */
	for (int tries = 0;; tries++) {
		r = allm_client_connect(&co, &c, err, sizeof(err));
		if (r != -ECONNREFUSED || tries == BENCH_CONNECT_TRIES || bench_interrupted)
			break;
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	if (r < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return -1;
	}
	snprintf(ret->model, sizeof(ret->model), "%s", allm_client_model(c));
	if (load_model_info(o, ret->model, &cfg, &tok) || build_workload(o, &cfg, tok, &w))
		goto out;
	if (alloc_result(ret, w->n) || !(s.gen_cap = allm_calloc((size_t)w->n, sizeof(int32_t)))) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	if ((r = bench_ctl_reset_stats(runtime_dir, name, err, sizeof(err))) < 0 && r != -ENOTCONN)
		fprintf(stderr, PROG ": warning: reset-stats: %s (counts may include earlier "
				"work)\n", err);
	s.t0 = allm_now();
	if (drive(c, o, w, &s))
		goto out;
	ret->duration_s = allm_now() - s.t0;
	for (int64_t i = 0; i < w->n; i++)
		ret->recs[i].generated = ret->gen[i];
	if (allm_metrics_summarize(ret->recs, w->n, 0, ret->duration_s, &ret->sum)) {
		fprintf(stderr, PROG ": cannot summarize the run\n");
		goto out;
	}
	ret->itl_ms = allm_metrics_pctl(ret->itl, ret->n_itl); /* sorts the gaps */
	ret->itl_ms.p50 *= 1e3, ret->itl_ms.p90 *= 1e3, ret->itl_ms.p99 *= 1e3, ret->itl_ms.mean *= 1e3;
	ret->itl_max_ms = ret->n_itl ? ret->itl[ret->n_itl - 1] * 1e3 : NAN;
	if ((r = bench_ctl_status(runtime_dir, name, &ret->status, err, sizeof(err))) < 0)
		fprintf(stderr, PROG ": warning: status: %s (no preemption counts by kind)\n", err);
	if (ret->status && bench_simulated(ret->status)) {
		if (use_engine_times(o, w, ret)) {
			fprintf(stderr, PROG ": cannot summarize the run\n");
			goto out;
		}
		/* the gaps were wall clock; the engine's clock is virtual */
		ret->itl_ms = (struct allm_pctl){NAN, NAN, NAN, NAN};
		ret->itl_max_ms = NAN;
	}
	rc = 0;
out:
	allm_free(s.gen_cap);
	allm_workload_free(w);
	allm_tokenizer_free(tok);
	allm_client_disconnect(c);
	return rc;
}

void bench_result_free(struct bench_result *r)
{
	if (!r)
		return;
	for (int64_t i = 0; r->gen && i < r->n; i++)
		allm_free(r->gen[i]);
	allm_free(r->gen);
	allm_free(r->recs);
	allm_free(r->n_preempt);
	allm_free(r->engine_us);
	allm_free(r->last_token_s);
	allm_free(r->itl);
	json_decref(r->status);
	memset(r, 0, sizeof(*r));
}
