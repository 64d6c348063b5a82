/* One scheduler step (DESIGN §6): Alg. 1 (Mem_Schedule) preempts until the running
 * batch's next tokens fit, choosing per victim between swap and recompute from
 * predicted costs; Alg. 2 (Req_Schedule) then admits either swapped or waiting
 * requests, whichever group is more urgent; then one decode of the running batch
 * (a prefill step does not decode). fcfs reproduces vLLM 0.2's order. */
#include "engine-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* --- ordering ------------------------------------------------------------------ */

static double sort_now;

/* Alg. 1 victims first: lowest priority (fair) / newest arrival (fcfs). Ties by
 * id so the order is total and runs are reproducible. */
static int victim_fair(const void *a, const void *b)
{
	const struct allm_request *x = *(struct allm_request *const *)a, *y = *(struct allm_request *const *)b;
	double px = allm_engine_priority(x, sort_now), py = allm_engine_priority(y, sort_now);
	if (px != py)
		return px < py ? -1 : 1;
	return x->id > y->id ? -1 : x->id < y->id; /* newer first among equals */
}

static int victim_fcfs(const void *a, const void *b)
{
	const struct allm_request *x = *(struct allm_request *const *)a, *y = *(struct allm_request *const *)b;
	if (x->arrival != y->arrival)
		return x->arrival > y->arrival ? -1 : 1;
	return x->id > y->id ? -1 : x->id < y->id;
}

/* Admission: most urgent first (fair) / oldest first (fcfs). */
static int urgent_fair(const void *a, const void *b)
{
	return -victim_fair(a, b);
}

static int urgent_fcfs(const void *a, const void *b)
{
	return -victim_fcfs(a, b);
}

static void order(struct allm_rq_vec *q, int (*cmp)(const void *, const void *), double now)
{
	sort_now = now; /* the engine is single-threaded */
	if (q->n > 1)
		qsort(q->v, (size_t)q->n, sizeof(q->v[0]), cmp);
}

/* --- helpers ---------------------------------------------------------------------- */

/* GPU blocks r still needs before its next decode can write its last token. */
static int32_t decode_need(const struct allm_engine *e, const struct allm_request *r)
{
	return ALLM_MAX(0, allm_kv_blocks_for(e->kv, r->seq.n_tokens) - r->seq.n_blocks);
}

static int32_t running_need(const struct allm_engine *e)
{
	int32_t need = 0;
	for (int32_t i = 0; i < e->running.n; i++)
		need += decode_need(e, e->running.v[i]);
	return need;
}

static struct allm_decision *record(struct allm_engine *e)
{
	struct allm_decision *d = &e->dlog[e->n_decisions % ALLM_ENGINE_DECISIONS];
	memset(d, 0, sizeof(*d));
	d->seq_no = e->n_decisions++;
	d->measured_s = NAN;
	return d;
}

struct allm_decision *allm_engine_pending_decision(struct allm_engine *e, struct allm_request *r)
{
	if (r->pending_decision < 0 || r->pending_decision < e->n_decisions - ALLM_ENGINE_DECISIONS)
		return NULL;
	struct allm_decision *d = &e->dlog[r->pending_decision % ALLM_ENGINE_DECISIONS];
	return d->seq_no == r->pending_decision ? d : NULL;
}

static void attach_measured(struct allm_engine *e, struct allm_request *r, double seconds)
{
	struct allm_decision *d = allm_engine_pending_decision(e, r);
	r->pending_decision = -1;
	if (!d)
		return;
	d->measured_s = seconds;
	if (e->ev.on_decision)
		e->ev.on_decision(e->ev.user, d, true);
}

static bool is_stop(const struct allm_engine *e, const struct allm_request *r, int32_t id)
{
	if (r->ignore_eos)
		return false;
	const struct allm_model_config *c = &e->model->cfg;
	for (int i = 0; i < c->n_eos; i++)
		if (c->eos_ids[i] == id)
			return true;
	for (int i = 0; i < r->n_stop; i++)
		if (r->stop_ids[i] == id)
			return true;
	return false;
}

/* --- Alg. 1: preemption -------------------------------------------------------- */

static void preempt(struct allm_engine *e, struct allm_request *v, double now)
{
	struct allm_kv_cache *kv = e->kv;
	int32_t n = v->seq.n_blocks;
	uint64_t bytes = (uint64_t)n * kv->block_bytes;
	/* CPU blocks come off a stack, so they are mostly consecutive: the runs of the
	 * copy are the runs of the GPU block table. */
	int32_t runs = 1;
	for (int32_t i = 1; i < n; i++)
		if (v->seq.blocks[i] != v->seq.blocks[i - 1] + 1)
			runs++;
	struct allm_decision *d = record(e);
	d->time = now;
	d->req_id = v->id;
	d->tag = v->tag;
	d->n_tokens = v->seq.n_tokens;
	d->n_blocks = n;
	d->priority = allm_engine_priority(v, now);
	d->pred_swap_s = allm_predict_swap(e->pred, 0, bytes, runs) +
			 allm_predict_swap(e->pred, 1, bytes, runs);
	/* recompute re-prefills everything it had: prompt + generated so far */
	d->pred_recompute_s = allm_predict_recompute(e->pred, v->seq.n_tokens);
	bool fits = kv->cpu.n_free >= n && n > 0;
	switch (e->cfg.preempt) {
	case ALLM_PREEMPT_RECOMPUTE:
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = "policy recompute";
		break;
	case ALLM_PREEMPT_SWAP:
		d->choice = fits ? ALLM_CHOICE_SWAP : ALLM_CHOICE_RECOMPUTE;
		d->reason = fits ? "policy swap" : "policy swap, CPU pool full";
		break;
	default:
		if (d->pred_swap_s < d->pred_recompute_s) {
			d->choice = fits ? ALLM_CHOICE_SWAP : ALLM_CHOICE_RECOMPUTE;
			d->reason = fits ? "swap cheaper" : "swap cheaper, CPU pool full";
		} else {
			d->choice = ALLM_CHOICE_RECOMPUTE;
			d->reason = "recompute cheaper";
		}
	}
	if (d->choice == ALLM_CHOICE_SWAP) {
		struct allm_swap_result res;
		int32_t *cpu = allm_realloc(v->cpu_blocks, (size_t)ALLM_MAX(n, 1) * sizeof(int32_t));
		if (cpu) {
			v->cpu_blocks = cpu;
			if (allm_kv_swap_out(kv, v->id, v->seq.blocks, n, cpu, &res, NULL) == 0) {
				v->n_cpu_blocks = n;
				v->seq.n_blocks = 0; /* the GPU blocks went back to the pool */
				v->pending_swap_out_s = res.seconds;
				allm_predictor_observe_swap(e->pred, 0, res.bytes, res.n_runs, res.seconds);
				e->st.swap_out_bytes += (int64_t)res.bytes;
				e->st.preempt_swap++;
				v->n_preempt_swap++;
				v->state = ALLM_REQ_SWAPPED;
				v->pending_decision = d->seq_no;
				if (e->ev.on_decision)
					e->ev.on_decision(e->ev.user, d, false);
				if (allm_rq_push(&e->swapped, v))
					allm_engine_retire(e, v, ALLM_END_ERROR, "out of memory");
				return;
			}
		}
		/* the copy failed: dropping the KV loses nothing but time */
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = "swap failed";
	}
	allm_seq_release(&v->seq, kv);
	e->st.preempt_recompute++;
	v->n_preempt_recompute++;
	v->state = ALLM_REQ_WAITING;
	v->pending_decision = d->seq_no;
	if (e->ev.on_decision)
		e->ev.on_decision(e->ev.user, d, false);
	if (allm_rq_push(&e->waiting, v))
		allm_engine_retire(e, v, ALLM_END_ERROR, "out of memory");
}

/* Preempts until the running batch's next tokens fit (and a shrink's deficit is
 * paid). Returns whether anything was preempted. */
static bool mem_schedule(struct allm_engine *e, double now)
{
	bool any = false;
	order(&e->running, e->cfg.sched == ALLM_SCHED_FCFS ? victim_fcfs : victim_fair, now);
	int32_t need = running_need(e);
	while (e->running.n > 0 && need + e->kv->gpu.deficit > e->kv->gpu.n_free) {
		struct allm_request *v = e->running.v[0];
		allm_rq_remove_at(&e->running, 0);
		need -= decode_need(e, v);
		preempt(e, v, now);
		any = true;
	}
	return any;
}

/* --- Alg. 2: admission ----------------------------------------------------------- */

/* Requests that can never fit the GPU pool as it is now (it may have shrunk) fail
 * instead of waiting forever. */
static void fail_unfittable(struct allm_engine *e)
{
	struct allm_rq_vec *qs[] = {&e->waiting, &e->swapped};
	char msg[160];
	for (size_t q = 0; q < ALLM_ARRAY_SIZE(qs); q++)
		for (int32_t i = 0; i < qs[q]->n;) {
			struct allm_request *r = qs[q]->v[i];
			int32_t need = allm_kv_blocks_for(e->kv, allm_engine_max_len(e, r));
			if (need <= e->kv->gpu.n_total) {
				i++;
				continue;
			}
			snprintf(msg, sizeof(msg), "needs %d KV blocks but the GPU pool now has %d", need,
				 e->kv->gpu.n_total);
			allm_engine_retire(e, r, ALLM_END_ERROR, msg);
		}
}

static double mean_priority(const struct allm_rq_vec *q, double now)
{
	double s = 0;
	for (int32_t i = 0; i < q->n; i++)
		s += allm_engine_priority(q->v[i], now);
	return q->n ? s / q->n : 0;
}

/* Picks from q (already ordered) while the blocks and limits allow; stops at the
 * first that does not fit, so order is respected. */
static void pick(struct allm_engine *e, const struct allm_rq_vec *q, bool prefill,
		 int32_t budget, int32_t slots, struct allm_rq_vec *out)
{
	int64_t tokens = 0;
	out->n = 0;
	for (int32_t i = 0; i < q->n && out->n < slots; i++) {
		struct allm_request *r = q->v[i];
		int32_t b = prefill ? allm_kv_blocks_for(e->kv, r->seq.n_tokens)
				    : ALLM_MAX(r->n_cpu_blocks, allm_kv_blocks_for(e->kv, r->seq.n_tokens));
		if (b > budget)
			break;
		/* a prompt longer than the token budget still runs, alone */
		if (prefill && out->n > 0 && tokens + r->seq.n_tokens > e->cfg.max_num_batched_tokens)
			break;
		if (allm_rq_push(out, r))
			break;
		budget -= b;
		tokens += r->seq.n_tokens;
	}
}

static void swap_in(struct allm_engine *e, struct allm_rq_vec *sel)
{
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *r = sel->v[i];
		struct allm_swap_result res;
		struct allm_err err;
		int32_t n = r->n_cpu_blocks;
		allm_rq_remove(&e->swapped, r);
		if (allm_kv_swap_in(e->kv, r->id, r->cpu_blocks, n, r->seq.blocks, &res, &err)) {
			allm_engine_retire(e, r, ALLM_END_ERROR, err.msg);
			continue;
		}
		r->seq.n_blocks = n;
		r->n_cpu_blocks = 0;
		r->state = ALLM_REQ_RUNNING;
		allm_predictor_observe_swap(e->pred, 1, res.bytes, res.n_runs, res.seconds);
		e->st.swap_in_bytes += (int64_t)res.bytes;
		attach_measured(e, r, r->pending_swap_out_s + res.seconds);
		if (allm_rq_push(&e->running, r))
			allm_engine_retire(e, r, ALLM_END_ERROR, "out of memory");
	}
}

/* --- forward passes --------------------------------------------------------------- */

static int reserve_io(struct allm_engine *e, int32_t rows)
{
	if (rows > e->logits_rows) {
		float *l = allm_realloc(e->logits, (size_t)rows * e->model->cfg.vocab_size * sizeof(float));
		if (!l)
			return -ENOMEM;
		e->logits = l;
		e->logits_rows = rows;
	}
	if (rows > e->batch_cap) {
		struct allm_batch_seq *b = allm_realloc(e->batch, (size_t)rows * sizeof(*b));
		if (!b)
			return -ENOMEM;
		e->batch = b;
		e->batch_cap = rows;
	}
	return 0;
}

/* Samples the next token of each request from its logits row and retires the
 * ones that are done. */
static void emit(struct allm_engine *e, struct allm_rq_vec *sel)
{
	int32_t V = e->model->cfg.vocab_size;
	double now = allm_engine_now(e); /* the tokens exist from now: after the forward */
	const int32_t *picked = e->ex->device_sampling ? e->ex->picked : NULL;
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *r = sel->v[i];
		r->seq.n_cached = r->seq.n_tokens;
		int32_t id = picked ? picked[i]
				    : allm_sampler_sample(&r->sampler, e->logits + (size_t)i * V);
		if (allm_seq_append(&r->seq, id)) {
			allm_engine_retire(e, r, ALLM_END_ERROR, "out of memory");
			continue;
		}
		if (!r->first_token)
			r->first_token = now;
		e->st.generated_tokens++;
		if (e->ev.on_token)
			e->ev.on_token(e->ev.user, r, id);
		if (is_stop(e, r, id))
			allm_engine_retire(e, r, ALLM_END_STOP, NULL);
		else if (allm_request_n_generated(r) >= r->max_tokens ||
			 r->seq.n_tokens >= e->model->cfg.max_pos)
			allm_engine_retire(e, r, ALLM_END_LENGTH, NULL);
	}
}

/* Device sampling (a GPU backend): the logits stay on the device; greedy rows
 * come back as argmax ids, top-k rows as their k best (value, id) candidates
 * that the request's own sampler and RNG finish on the host (the same
 * arithmetic as allm_sampler_sample on the full row), and only rows with other
 * settings are downloaded whole. The ids go to e->ex->picked for emit(). */
static int sample_on_device(struct allm_engine *e, struct allm_rq_vec *sel, struct allm_err *err)
{
	int32_t V = e->model->cfg.vocab_size, k = 0;
	bool want_argmax = false;
	int32_t *picked = allm_executor_picked(e->ex, sel->n);
	const int32_t *am = NULL, *tk_ids = NULL;
	const float *tk_vals = NULL;
	int r;
	if (!picked)
		return allm_err_set(err, -ENOMEM, "out of memory");
	for (int32_t i = 0; i < sel->n; i++) {
		const struct allm_sampler *s = &sel->v[i]->sampler;
		switch (allm_sampler_need(s)) {
		case ALLM_SAMPLE_ARGMAX: want_argmax = true; break;
		case ALLM_SAMPLE_TOPK: k = ALLM_MAX(k, s->p.top_k); break;
		default: break;
		}
	}
	if ((want_argmax || k) &&
	    (r = allm_executor_reduce(e->ex, want_argmax, k, &am, &tk_vals, &tk_ids, err)))
		return r;
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_sampler *s = &sel->v[i]->sampler;
		switch (allm_sampler_need(s)) {
		case ALLM_SAMPLE_ARGMAX:
			picked[i] = am[i];
			break;
		case ALLM_SAMPLE_TOPK:
			/* a row's top top_k is the prefix of its top k */
			picked[i] = allm_sampler_sample_topk(s, tk_vals + (size_t)i * k,
							     tk_ids + (size_t)i * k);
			break;
		default:
			if ((r = allm_executor_download_row(e->ex, i, e->logits + (size_t)i * V, err)))
				return r;
			picked[i] = allm_sampler_sample(s, e->logits + (size_t)i * V);
		}
	}
	return 0;
}

static int forward(struct allm_engine *e, struct allm_rq_vec *sel, struct allm_err *err)
{
	int r;
	if ((r = reserve_io(e, sel->n)))
		return allm_err_set(err, r, "out of memory");
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *q = sel->v[i];
		if ((r = allm_seq_reserve(&q->seq, e->kv, q->seq.n_tokens)))
			return allm_err_set(err, r, "internal: no block for a scheduled request");
		allm_seq_batch_entry(&q->seq, &e->batch[i]);
	}
	bool dev = e->ex->device_sampling;
	r = allm_executor_forward(e->ex, e->batch, sel->n, false, dev ? NULL : e->logits, err);
	if (!r && dev)
		r = sample_on_device(e, sel, err);
	if (r) {
		/* the backend failed for this batch: fail its requests, keep serving */
		char msg[160];
		snprintf(msg, sizeof(msg), "backend: %.150s", err->msg);
		for (int32_t i = 0; i < sel->n; i++)
			allm_engine_retire(e, sel->v[i], ALLM_END_ERROR, msg);
	}
	return r;
}

static int prefill(struct allm_engine *e, struct allm_rq_vec *sel, double now,
		   struct allm_err *err)
{
	struct allm_prefill_shape shape = {0};
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *r = sel->v[i];
		allm_rq_remove(&e->waiting, r);
		r->state = ALLM_REQ_RUNNING;
		if (!r->first_sched)
			r->first_sched = now;
		if (allm_rq_push(&e->running, r)) {
			allm_engine_retire(e, r, ALLM_END_ERROR, "out of memory");
			return allm_err_set(err, -ENOMEM, "out of memory");
		}
		int64_t n = r->seq.n_tokens - r->seq.n_cached;
		shape.n_seqs++;
		shape.tokens += n;
		shape.tokens_sq += (double)n * (double)n;
	}
	int r = forward(e, sel, err);
	if (r)
		return r;
	double secs = e->ex->last_seconds;
	double pred_total = allm_predict_prefill(e->pred, &shape);
	allm_predictor_observe_prefill(e->pred, &shape, secs);
	e->st.prefill_steps++;
	e->st.prompt_tokens += shape.tokens;
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *q = sel->v[i];
		if (q->pending_decision >= 0) {
			/* a recompute preemption paid off now: its share of this prefill */
			double mine = allm_predict_recompute(e->pred, q->seq.n_tokens);
			e->st.recompute_tokens += q->seq.n_tokens;
			attach_measured(e, q, pred_total > 0 ? secs * ALLM_MIN(1.0, mine / pred_total) : secs);
		}
	}
	emit(e, sel);
	return (int)shape.tokens;
}

static int decode(struct allm_engine *e, struct allm_err *err)
{
	struct allm_rq_vec *sel = &e->sel;
	sel->n = 0;
	for (int32_t i = 0; i < e->running.n; i++)
		if (allm_rq_push(sel, e->running.v[i]))
			return allm_err_set(err, -ENOMEM, "out of memory");
	if (!sel->n)
		return 0;
	int r = forward(e, sel, err);
	if (r)
		return r;
	e->st.decode_steps++;
	emit(e, sel);
	return sel->n;
}

int allm_engine_step(struct allm_engine *e, struct allm_err *err)
{
	double now = allm_engine_now(e);
	e->st.steps++;
	fail_unfittable(e);
	bool preempted = mem_schedule(e, now);

	int32_t budget = e->kv->gpu.n_free - e->kv->gpu.deficit - running_need(e);
	int32_t slots = e->cfg.max_num_seqs - e->running.n;
	struct allm_rq_vec *s_sche = &e->sel, *w_sche = &e->sel2;
	s_sche->n = w_sche->n = 0;
	if (budget > 0 && slots > 0) {
		if (e->cfg.sched == ALLM_SCHED_FCFS) {
			/* vLLM 0.2: swapped first; new prompts only when nothing is swapped;
			 * no swap-in in a step that had to preempt */
			if (e->swapped.n == 0) {
				order(&e->waiting, urgent_fcfs, now);
				pick(e, &e->waiting, true, budget, slots, w_sche);
			} else if (!preempted) {
				order(&e->swapped, urgent_fcfs, now);
				pick(e, &e->swapped, false, budget, slots, s_sche);
			}
		} else {
			order(&e->swapped, urgent_fair, now);
			order(&e->waiting, urgent_fair, now);
			pick(e, &e->swapped, false, budget, slots, s_sche);
			pick(e, &e->waiting, true, budget, slots, w_sche);
			/* Alg. 2: the more urgent group wins; ties go to the swapped ones */
			if (w_sche->n && s_sche->n) {
				if (mean_priority(w_sche, now) <= mean_priority(s_sche, now))
					w_sche->n = 0;
				else
					s_sche->n = 0;
			}
		}
	}
	if (w_sche->n) {
		int n = prefill(e, w_sche, now, err);
		return n; /* a prefill step does not decode */
	}
	if (s_sche->n)
		swap_in(e, s_sche);
	return decode(e, err);
}
