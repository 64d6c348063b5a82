/* Running a step's batch: the forward pass over the rows the scheduler picked
 * (decodes, whole prefills, or prefill chunks), sampling each row that finished
 * its prompt or decoded, retiring the requests that are done, and feeding the
 * recompute predictor what a step with prefill work cost. What goes into a
 * batch is decided in engine-step.c. */
#include "engine-calib.h"
#include "engine-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

/* Whether row r fed only part of its uncached tokens this step: its logits row
 * is not a next-token distribution, so nothing is sampled (and its RNG, which
 * makes outputs reproducible across preemptions, is left alone). */
static bool partial(const struct allm_request *r)
{
	return r->chunk > 0 && r->seq.n_cached + r->chunk < r->seq.n_tokens;
}

/* Whether id ends r: ALLM_END_STOP_ID (a stop id, even one that is an EOS too),
 * ALLM_END_EOS, or ALLM_END_NONE. */
static enum allm_end stop_of(const struct allm_engine *e, const struct allm_request *r, int32_t id)
{
	const struct allm_params *p = &r->sampler.p;
	if (p->ignore_eos)
		return ALLM_END_NONE;
	for (uint32_t i = 0; i < p->n_stop; i++)
		if (p->stop_ids[i] == id)
			return ALLM_END_STOP_ID;
	const struct allm_model_config *c = &e->model->cfg;
	for (int i = 0; i < c->n_eos; i++)
		if (c->eos_ids[i] == id)
			return ALLM_END_EOS;
	return ALLM_END_NONE;
}

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

/* The next token from a request's row of logits on the host: its penalties
 * and logit bias first (they change the row), then its sampling;
 * log-probabilities, when asked, of the row as the model gave it. */
static int32_t sample_row(const struct allm_engine *e, struct allm_request *r, float *row)
{
	struct allm_sampler *s = &r->sampler;
	const float *raw = row;
	if (allm_sampler_processed(s)) {
		if (s->raw) {
			memcpy(s->raw, row, (size_t)s->vocab * sizeof(float));
			raw = s->raw;
		}
		if (allm_params_penalized(&s->p))
			allm_sampler_penalize(s, row, r->seq.tokens, r->seq.n_prompt, r->seq.n_tokens);
		allm_sampler_apply_bias(s, row);
		/* min_tokens: no stop token before it (ignore_eos: none stops anyway) */
		if (s->mask_stops) {
			const struct allm_model_config *c = &e->model->cfg;
			allm_sampler_mask(s, row, c->eos_ids, c->n_eos);
			allm_sampler_mask(s, row, s->p.stop_ids, (int32_t)s->p.n_stop);
		}
	}
	int32_t id = allm_sampler_sample_grammar(s, row);
	if (s->p.logprobs > 0)
		allm_sampler_logprobs(s, raw, id, &r->lp);
	return id;
}

/* r's cached count grew: the prefix cache takes its new full blocks, then
 * the blocks every layer's window has passed go back to the pool. */
static void cached_grew(struct allm_engine *e, struct allm_request *r)
{
	allm_engine_prefix_publish(e, r);
	allm_seq_pass_window(&r->seq, e->kv);
}

/* Samples the next token of each row that has one and retires the requests that
 * are done; partial rows only advance their cached count. */
static void emit(struct allm_engine *e, struct allm_rq_vec *sel)
{
	int32_t V = e->model->cfg.vocab_size;
	double now = allm_engine_now(e); /* the tokens exist from now: after the forward */
	const int32_t *picked = e->ex->device_sampling ? e->ex->picked : NULL;
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *r = sel->v[i];
		if (partial(r)) {
			r->seq.n_cached += r->chunk;
			cached_grew(e, r);
			continue;
		}
		r->seq.n_cached = r->seq.n_tokens;
		r->prefilling = false;
		cached_grew(e, r);
		int32_t id = picked ? picked[i] : sample_row(e, r, e->logits + (size_t)i * V);
		if (allm_seq_append(&r->seq, id)) {
			allm_engine_retire(e, r, ALLM_END_ERROR, -ENOMEM, "out of memory");
			continue;
		}
		/* min_tokens met (or moot with ignore_eos): no more masking, so the
		 * row needs no copy and no whole download for it from here on */
		if (r->sampler.mask_stops &&
		    (r->sampler.p.ignore_eos || allm_request_n_generated(r) >= r->sampler.p.min_tokens))
			r->sampler.mask_stops = false;
		if (!r->first_token) {
			r->first_token = now;
			allm_slo_first_token(e, r, now);
		}
		e->st.generated_tokens++;
		if (e->ev.on_token) {
			struct allm_token_out t = {
				.id = r->id,
				.tag = r->tag,
				.user = r->user,
				.token = id,
				.index = allm_request_n_generated(r) - 1,
				.lp = r->sampler.p.logprobs > 0 ? &r->lp : NULL,
			};
			e->ev.on_token(e->ev.user, &t);
		}
		enum allm_end stop = stop_of(e, r, id);
		if (stop != ALLM_END_NONE)
			allm_engine_retire(e, r, stop, 0, NULL);
		else if (allm_request_n_generated(r) >= r->sampler.p.max_tokens ||
			 r->seq.n_tokens >= e->model->cfg.max_pos)
			allm_engine_retire(e, r, ALLM_END_LENGTH, 0, NULL);
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
		if (partial(sel->v[i]))
			continue;
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
		if (partial(sel->v[i]))
			continue;
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
			picked[i] = sample_row(e, sel->v[i], e->logits + (size_t)i * V);
		}
	}
	return 0;
}

/* The shape a row adds to a step's cost (predictor.h): n new tokens after p. */
static void add_row(struct allm_prefill_shape *s, int32_t p, int32_t n)
{
	s->n_seqs++;
	s->tokens += n;
	s->tokens_sq += ((double)p + n) * ((double)p + n) - (double)p * p;
}

/* Attaches the measured cost to r's pending preemption decision. */
void allm_engine_attach_measured(struct allm_engine *e, struct allm_request *r, double seconds)
{
	struct allm_decision *d = allm_engine_pending_decision(e, r);
	r->pending_decision = -1;
	if (!d)
		return;
	d->measured_s = seconds;
	/* a simulated device's seconds are virtual, all its own work: the host
	 * thread's CPU time says nothing about them (and would make two runs' logs
	 * differ) */
	d->oncpu_frac = e->model->be->simulated ? 1.0
			: seconds > 0 && r->pending_oncpu_s >= 0 ? ALLM_MIN(1.0, r->pending_oncpu_s / seconds)
								 : NAN;
	r->pending_oncpu_s = 0;
	allm_decision_error_observe(&e->derr, d);
	if (d->kind == ALLM_DECISION_PREEMPT && d->choice == ALLM_CHOICE_RECOMPUTE && d->parts.rc_factor > 0)
		allm_predictor_observe_recompute_decision(e->pred, d->pred_recompute_s / d->parts.rc_factor, seconds);
	if (e->ev.on_decision)
		e->ev.on_decision(e->ev.user, d, true);
}

/* After a step that prefilled: learn its cost, and hand each re-prefill its
 * share of the time. A whole-prompt prefill step (chunked prefill off) is the
 * paper's recompute: the victim's share of that step. A chunked step carries
 * decodes and chunks: each chunk's share is its marginal predicted cost over the
 * step's predicted cost, summed over the steps its re-prefill rides in. */
/* A re-prefill's parts (allm_decision_parts): the step it rode in, in all,
 * and its own tokens and attention pairs (c: its row's shape). */
static void add_parts(struct allm_engine *e, struct allm_request *q, const struct allm_prefill_shape *step,
		      const struct allm_prefill_shape *c, double secs, int64_t faults)
{
	struct allm_decision *d = allm_engine_pending_decision(e, q);
	if (!d)
		return;
	d->parts.steps++;
	d->parts.step_tokens += (int32_t)ALLM_MIN(step->tokens, (int64_t)INT32_MAX);
	d->parts.step_seqs += step->n_seqs;
	d->parts.step_s += secs;
	d->parts.tokens += (double)c->tokens;
	d->parts.pairs += c->tokens_sq / 2;
	d->parts.faults += faults;
}

static void learn(struct allm_engine *e, struct allm_rq_vec *sel, const struct allm_prefill_shape *step,
		  double secs, double cpu, int64_t faults)
{
	/* the share of the step the engine thread was on a CPU (NAN: unknown) */
	double oncpu = secs > 0 && cpu >= 0 ? ALLM_MIN(1.0, cpu / secs) : NAN;
	double pred_step = allm_predict_prefill(e->pred, step);
	allm_predictor_observe_prefill(e->pred, step, secs);
	if (e->pred->estimated)
		allm_engine_predictor_learned(e);
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *q = sel->v[i];
		if (q->chunk > 0 && q->rr_decision >= 0) {
			/* a cached prefix recomputed: its share of the step, as a re-prefill's */
			struct allm_prefill_shape c = {0};
			add_row(&c, q->seq.n_cached, q->chunk);
			double share = pred_step > 0 ? secs * ALLM_MIN(1.0, allm_predict_prefill_marginal(e->pred, &c) / pred_step) : 0;
			allm_engine_prefix_learn(e, q, q->seq.n_cached, q->seq.n_cached + q->chunk, share);
		}
		if (q->chunk <= 0 || q->pending_decision < 0)
			continue;
		e->st.recompute_tokens += q->chunk;
		struct allm_prefill_shape mine_c = {0};
		add_row(&mine_c, q->seq.n_cached, q->chunk);
		add_parts(e, q, step, &mine_c, secs, faults);
		if (!e->cfg.chunked_prefill) {
			double mine = allm_predict_recompute(e->pred, q->seq.n_tokens);
			double share = pred_step > 0 ? secs * ALLM_MIN(1.0, mine / pred_step) : secs;
			q->pending_oncpu_s = share * oncpu;
			allm_engine_attach_measured(e, q, share);
			continue;
		}
		struct allm_prefill_shape c = {0};
		add_row(&c, q->seq.n_cached, q->chunk);
		double share = pred_step > 0
				       ? secs * ALLM_MIN(1.0, allm_predict_prefill_marginal(e->pred, &c) / pred_step)
				       : 0;
		q->pending_rc_s += share;
		q->pending_oncpu_s += share * oncpu;
		if (!partial(q))
			allm_engine_attach_measured(e, q, q->pending_rc_s);
	}
}

int allm_engine_run_batch(struct allm_engine *e, struct allm_rq_vec *sel, struct allm_err *err)
{
	struct allm_prefill_shape shape = {0};
	int64_t prefill_tokens = 0, decodes = 0;
	int r;
	if (!sel->n)
		return 0;
	if ((r = reserve_io(e, sel->n)))
		return allm_err_set(err, r, "out of memory");
	for (int32_t i = 0; i < sel->n; i++) {
		struct allm_request *q = sel->v[i];
		if ((r = allm_seq_reserve(&q->seq, e->kv, q->seq.n_tokens)))
			return allm_err_set(err, r, "internal: no block for a scheduled request");
		allm_seq_batch_entry(&q->seq, &e->batch[i]);
		if (q->chunk <= 0 && q->prefilling)
			q->chunk = e->batch[i].n_new; /* no chunk given: the rest of its prompt */
		if (q->chunk > 0) {
			/* a prompt (or re-prefill) row: chunk tokens of it */
			e->batch[i].n_new = q->chunk;
			prefill_tokens += q->chunk;
		} else {
			decodes++;
		}
		add_row(&shape, e->batch[i].start_pos, e->batch[i].n_new);
	}
	bool dev = e->ex->device_sampling;
	double cpu0 = allm_engine_thread_cpu();
	int64_t flt0 = allm_engine_thread_faults();
	r = allm_executor_forward(e->ex, e->batch, sel->n, false, dev ? NULL : e->logits, err);
	if (!r && dev)
		r = sample_on_device(e, sel, err);
	if (r) {
		/* the backend failed for this batch: fail its requests, keep serving */
		char msg[160];
		snprintf(msg, sizeof(msg), "backend: %.150s", err->msg);
		for (int32_t i = 0; i < sel->n; i++)
			allm_engine_retire(e, sel->v[i], ALLM_END_ERROR, r, msg); /* the backend's errno */
		return r;
	}
	e->st.prefill_steps += prefill_tokens > 0;
	e->st.decode_steps += decodes > 0;
	e->st.mixed_steps += prefill_tokens > 0 && decodes > 0;
	e->st.prompt_tokens += prefill_tokens;
	double cpu = allm_engine_thread_cpu() - cpu0;
	/* every step, decodes too, tells how much of the machine the engine has */
	if (!e->model->be->simulated && e->ex->last_seconds > 0)
		allm_predictor_observe_oncpu(e->pred, cpu / e->ex->last_seconds);
	if (prefill_tokens > 0)
		learn(e, sel, &shape, e->ex->last_seconds, cpu, allm_engine_thread_faults() - flt0);
	emit(e, sel);
	return (int)ALLM_MIN(prefill_tokens + decodes, (int64_t)INT32_MAX);
}
