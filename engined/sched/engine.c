/* The engine's requests and queues: submission, cancellation, retirement, run-time
 * settings, stats and the decision log. The step itself is in engine-step.c. */
#include "engine-internal.h"
#include "grammar.h"
#include "kv-elastic.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

/* The device's clock: wall time, or a simulated device's virtual time. */
static double default_clock(void *user)
{
	return allm_backend_clock(user);
}

double allm_engine_now(const struct allm_engine *e)
{
	return e->cfg.clock(e->cfg.clock_user);
}

double allm_engine_priority(const struct allm_request *r, double now)
{
	/* new work only (a recompute victim is back for its own blocks) */
	bool fresh = r->state == ALLM_REQ_WAITING && !r->admitted_once;
	int32_t len = r->seq.n_tokens - (fresh ? r->cached_hint : 0);
	return (now - r->arrival) / (double)ALLM_MAX(len, 1);
}

void allm_engine_info(const struct allm_request *r, double now, struct allm_request_info *ret)
{
	*ret = (struct allm_request_info){
		.id = r->id,
		.tag = r->tag,
		.user = r->user,
		.state = r->state,
		.n_prompt = r->seq.n_prompt,
		.n_generated = allm_request_n_generated(r),
		.length = r->seq.n_tokens,
		.blocks_gpu = allm_seq_held(&r->seq),
		.blocks_cpu = r->n_cpu_blocks,
		.n_preemptions = r->n_preempt_swap + r->n_preempt_recompute,
		.age_s = now - r->arrival,
		.priority = allm_engine_priority(r, now),
	};
}

int allm_rq_push(struct allm_rq_vec *q, struct allm_request *r)
{
	if (q->n == q->cap) {
		int32_t cap = ALLM_MAX(16, q->cap * 2);
		struct allm_request **v = allm_realloc(q->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		q->v = v;
		q->cap = cap;
	}
	q->v[q->n++] = r;
	return 0;
}

void allm_rq_remove_at(struct allm_rq_vec *q, int32_t i)
{
	memmove(&q->v[i], &q->v[i + 1], (size_t)(q->n - i - 1) * sizeof(q->v[0]));
	q->n--;
}

bool allm_rq_remove(struct allm_rq_vec *q, const struct allm_request *r)
{
	for (int32_t i = 0; i < q->n; i++)
		if (q->v[i] == r) {
			allm_rq_remove_at(q, i);
			return true;
		}
	return false;
}

int64_t allm_engine_thread_faults(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru))
		return 0;
	return (int64_t)ru.ru_minflt + (int64_t)ru.ru_majflt;
}

double allm_engine_thread_cpu(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return NAN;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int allm_engine_create(struct allm_model *model, struct allm_kv_cache *kv,
		       struct allm_predictor *pred, const struct allm_engine_config *cfg,
		       const struct allm_engine_events *ev, struct allm_engine **ret,
		       struct allm_err *err)
{
	struct allm_engine *e = allm_calloc(1, sizeof(*e));
	int r;
	if (!e)
		return allm_err_set(err, -ENOMEM, "out of memory");
	e->model = model;
	e->kv = kv;
	e->pred = pred;
	e->cfg = *cfg;
	if (!e->cfg.clock) {
		e->cfg.clock = default_clock;
		e->cfg.clock_user = model->be;
	}
	if (ev)
		e->ev = *ev;
	e->next_id = 1;
	e->dlog = allm_calloc(ALLM_ENGINE_DECISIONS, sizeof(*e->dlog));
	if (!e->dlog) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	if ((r = allm_engine_config_check(cfg, err)))
		goto fail;
	if ((r = allm_executor_create(model, kv, &e->ex, err)))
		goto fail;
	if (kv->pc) {
		r = allm_err_set(err, -EBUSY, "the KV cache already has a prefix cache (another engine)");
		goto fail;
	}
	if ((r = allm_engine_prefix_create(e, err)) || (r = allm_elastic_init(e, err)))
		goto fail;
	/* every layer windowed: blocks all windows passed go back (sequence.h) */
	kv->window = allm_model_passed_window(&model->cfg);
	allm_engine_reset_stats(e);
	*ret = e;
	return 0;
fail:
	allm_engine_free(e);
	return r;
}

static void free_request(struct allm_request *r)
{
	allm_free(r->plan.ent);
	allm_free(r->plan.gen);
	allm_seq_fini(&r->seq, NULL);
	allm_sampler_fini(&r->sampler);
	allm_free(r->cpu_blocks);
	allm_free(r->disk_blocks);
	allm_free(r);
}

void allm_engine_drop_blocks(struct allm_engine *e, struct allm_request *r)
{
	allm_seq_release(&r->seq, e->kv);
	for (int32_t i = 0; i < r->n_cpu_blocks; i++) {
		int rc = allm_block_pool_release(&e->kv->cpu, r->id, r->cpu_blocks[i]);
		ALLM_ASSERT(rc == 0);
	}
	r->n_cpu_blocks = 0;
	if (r->n_disk_blocks)
		allm_kv_disk_release(e->kv, r->id, r->disk_blocks, r->n_disk_blocks);
	r->n_disk_blocks = 0;
}

const char *allm_end_name(enum allm_end end)
{
	switch (end) {
	case ALLM_END_EOS:
	case ALLM_END_STOP_ID: return "stop";
	case ALLM_END_LENGTH: return "length";
	case ALLM_END_CANCELLED: return "cancelled";
	default: return "error";
	}
}

/* What on_finish hands out; the one place "never scheduled" reads as the finish. */
static void result_of(const struct allm_request *r, struct allm_result *res)
{
	*res = (struct allm_result){
		.id = r->id,
		.tag = r->tag,
		.user = r->user,
		.end = r->finish_kind,
		.status = r->finish_kind == ALLM_END_ERROR ? r->status : 0,
		.error = r->finish_kind == ALLM_END_ERROR ? r->error : "",
		.n_prompt = r->seq.n_prompt,
		.n_generated = allm_request_n_generated(r),
		.generated = r->seq.tokens + r->seq.n_prompt,
		.n_cached = r->cached_tokens,
		.n_preempt_swap = r->n_preempt_swap,
		.n_preempt_recompute = r->n_preempt_recompute,
		.arrival = r->arrival,
		.first_sched = r->first_sched > 0 ? r->first_sched : r->finish,
		.first_token = r->first_token > 0 ? r->first_token : r->finish,
		.finish = r->finish,
		.scheduled = r->first_sched > 0,
		.got_token = r->first_token > 0,
	};
}

void allm_engine_retire(struct allm_engine *e, struct allm_request *r, enum allm_end how, int status,
			const char *error)
{
	switch (r->state) {
	case ALLM_REQ_WAITING: allm_rq_remove(&e->waiting, r); break;
	case ALLM_REQ_RUNNING: allm_rq_remove(&e->running, r); break;
	case ALLM_REQ_SWAPPED:
		if (r->load_ticket >= 0) /* its read ahead lands first: the blocks are the kernel's till then */
			allm_engine_load_finish(e, r, allm_engine_now(e), false);
		else
			allm_rq_remove(&e->swapped, r);
		break;
	default: break;
	}
	allm_engine_prefix_settle(e, r);
	allm_engine_drop_blocks(e, r);
	r->state = ALLM_REQ_FINISHED;
	r->finish_kind = how;
	r->status = how != ALLM_END_ERROR ? 0 : status < 0 ? status : -EIO; /* an error always has a cause */
	r->finish = allm_engine_now(e);
	if (error)
		snprintf(r->error, sizeof(r->error), "%s", error);
	if (how == ALLM_END_ERROR)
		e->st.failed++;
	else
		e->st.finished++;
	if (e->ev.on_finish) {
		struct allm_result res;
		result_of(r, &res);
		e->ev.on_finish(e->ev.user, &res);
	}
	free_request(r);
}

void allm_engine_free(struct allm_engine *e)
{
	if (!e)
		return;
	struct allm_rq_vec *qs[] = {&e->loading, &e->running, &e->swapped, &e->waiting};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(qs); i++)
		while (qs[i]->n)
			allm_engine_retire(e, qs[i]->v[0], ALLM_END_CANCELLED, 0, NULL);
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(qs); i++)
		allm_free(qs[i]->v);
	allm_free(e->sel.v);
	allm_free(e->sel2.v);
	allm_elastic_fini(e);
	allm_prefix_cache_free(e->pc);
	allm_executor_free(e->ex);
	allm_free(e->dlog);
	allm_free(e->logits);
	allm_free(e->batch);
	allm_free(e);
}

int64_t allm_engine_service_steps(const struct allm_engine *e, const struct allm_request *r)
{
	int64_t chunk = e->cfg.chunked_prefill ? ALLM_MAX(e->cfg.max_num_batched_tokens, 1) : INT32_MAX;
	int64_t out = allm_engine_max_len(e, r) - r->seq.n_prompt;
	return (r->seq.n_prompt + chunk - 1) / chunk + ALLM_MAX(out, 1);
}

int32_t allm_engine_max_len(const struct allm_engine *e, const struct allm_request *r)
{
	int64_t n = (int64_t)r->seq.n_prompt + r->sampler.p.max_tokens;
	return (int32_t)ALLM_MIN(n, (int64_t)e->model->cfg.max_pos);
}

int allm_engine_submit(struct allm_engine *e, const struct allm_submit *s, int64_t *ret_id,
		       struct allm_err *err)
{
	const struct allm_model_config *c = &e->model->cfg;
	struct allm_request *r;
	char why[200];
	int rc;

	if (s->n_prompt <= 0)
		return allm_err_set(err, -EINVAL, "empty prompt");
	if (s->n_prompt >= c->max_pos)
		return allm_err_set(err, -EINVAL,
				    "prompt of %d tokens does not fit the context of %d tokens",
				    s->n_prompt, c->max_pos);
	for (int32_t i = 0; i < s->n_prompt; i++)
		if (s->prompt[i] < 0 || s->prompt[i] >= c->vocab_size)
			return allm_err_set(err, -EINVAL,
					    "prompt token %d (at %d) is outside the vocabulary (0..%d)",
					    s->prompt[i], i, c->vocab_size - 1);
	/* the table's ranges (params.h), then what only the model knows */
	if (s->params.size != sizeof(s->params))
		return allm_err_set(err, -EINVAL, "params.size %u: use allm_params_init", s->params.size);
	if (s->n_bias < 0 || (s->n_bias && !s->bias))
		return allm_err_set(err, -EINVAL, "no logit bias entries for n_bias %d", s->n_bias);
	if ((rc = allm_params_check(&s->params, why, sizeof(why))) ||
	    (rc = allm_logit_bias_check(s->bias, (size_t)s->n_bias, why, sizeof(why))))
		return allm_err_set(err, rc, "%s", why);
	for (int32_t i = 0; i < s->n_bias; i++)
		if (s->bias[i].token_id >= c->vocab_size)
			return allm_err_set(err, -EINVAL, "logit_bias: token %d is outside the vocabulary (0..%d)",
					    s->bias[i].token_id, c->vocab_size - 1);
	int64_t longest = ALLM_MIN((int64_t)s->n_prompt + s->params.max_tokens, (int64_t)c->max_pos);
	int32_t need = allm_kv_blocks_for(e->kv, longest);
	if (need > e->kv->gpu.n_total)
		return allm_err_set(err, -E2BIG,
				    "request needs %d KV blocks (%lld tokens) but the GPU pool has %d",
				    need, (long long)longest, e->kv->gpu.n_total);

	r = allm_calloc(1, sizeof(*r));
	if (!r)
		return allm_err_set(err, -ENOMEM, "out of memory");
	r->id = e->next_id++;
	if ((rc = allm_seq_init(&r->seq, r->id, s->prompt, s->n_prompt))) {
		free_request(r);
		return allm_err_set(err, rc, "request sequence: %s", rc == -ENOMEM ? "out of memory" : strerror(-rc));
	}
	if ((rc = allm_sampler_init(&r->sampler, &s->params, s->bias, s->n_bias, c->vocab_size))) {
		free_request(r); /* the sampler's own errno: a refused parameter is not memory */
		return allm_err_set(err, rc, "sampler: %s", rc == -ENOMEM ? "out of memory" : strerror(-rc));
	}
	if (s->grammar) {
		/* the ends a grammar allows where it may end: EOS and the stop ids */
		int32_t ends[ALLM_MAX_EOS + ALLM_PARAMS_MAX_STOP], n_end = 0;
		for (int i = 0; i < c->n_eos; i++)
			ends[n_end++] = c->eos_ids[i];
		for (uint32_t i = 0; i < s->params.n_stop; i++)
			ends[n_end++] = s->params.stop_ids[i];
		struct allm_grammar_matcher *m;
		if ((rc = allm_grammar_matcher_create(s->grammar, ends, n_end, &m))) {
			free_request(r);
			return allm_err_set(err, -ENOMEM, "out of memory");
		}
		allm_sampler_set_grammar(&r->sampler, m);
	}
	allm_engine_prefix_init(e, r, s);
	r->tag = s->tag;
	r->user = s->user;
	r->arrival = s->arrival > 0 ? s->arrival : allm_engine_now(e);
	r->arrival_step = e->step_no;
	r->pending_decision = -1;
	r->load_ticket = -1;
	r->state = ALLM_REQ_WAITING;
	if (allm_rq_push(&e->waiting, r)) {
		free_request(r);
		return allm_err_set(err, -ENOMEM, "out of memory");
	}
	if (ret_id)
		*ret_id = r->id;
	return 0;
}

static struct allm_request *find(const struct allm_engine *e, int64_t id)
{
	const struct allm_rq_vec *qs[] = {&e->running, &e->swapped, &e->waiting, &e->loading};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(qs); i++)
		for (int32_t j = 0; j < qs[i]->n; j++)
			if (qs[i]->v[j]->id == id)
				return qs[i]->v[j];
	return NULL;
}

void *allm_engine_request_user(const struct allm_engine *e, int64_t id)
{
	struct allm_request *r = find(e, id);
	return r ? r->user : NULL;
}

int allm_engine_cancel(struct allm_engine *e, int64_t id)
{
	struct allm_request *r = find(e, id);
	if (!r)
		return -ENOENT;
	allm_engine_retire(e, r, ALLM_END_CANCELLED, 0, NULL);
	allm_elastic_end(e);
	return 0;
}

int allm_engine_submit_req(struct allm_engine *e, const struct allm_submit *s,
			   struct allm_request **ret_req, struct allm_err *err)
{
	int64_t id;
	int rc = allm_engine_submit(e, s, &id, err);
	if (rc)
		return rc;
	/* submit queues at the end of waiting; find() covers any other placement */
	struct allm_request *r = e->waiting.n ? e->waiting.v[e->waiting.n - 1] : NULL;
	*ret_req = r && r->id == id ? r : find(e, id);
	return 0;
}

void allm_engine_cancel_req(struct allm_engine *e, struct allm_request *r)
{
	if (r->state != ALLM_REQ_FINISHED)
		allm_engine_retire(e, r, ALLM_END_CANCELLED, 0, NULL);
	allm_elastic_end(e); /* the last one gone (a client's death): pages go back now */
}

bool allm_engine_idle(const struct allm_engine *e)
{
	return !e->waiting.n && !e->running.n && !e->swapped.n;
}

int allm_engine_set_gpu_blocks(struct allm_engine *e, int32_t n, struct allm_err *err)
{
	if (e->el.pool)
		return allm_err_set(err, -EBUSY, "elastic memory sizes the device pool from --memory-budget");
	/* a shrink below use leaves a deficit that the next step's Alg. 1 preempts away */
	return allm_kv_resize_gpu(e->kv, n, err);
}

/* A swapped request whose copy a shrink took: its KV is dropped and it
 * recomputes (DESIGN §5); the decision ends as a recompute. */
static void lose_copy(struct allm_engine *e, struct allm_request *v, enum allm_reason why)
{
	bool disk = v->n_disk_blocks > 0;
	allm_engine_drop_blocks(e, v);
	v->seq.n_cached = 0;
	v->state = ALLM_REQ_WAITING;
	v->n_preempt_recompute++;
	v->n_preempt_swap--; /* re-labelled: this preemption ends as a recompute */
	e->st.preempt_recompute++;
	if (disk)
		e->st.preempt_disk--;
	else
		e->st.preempt_swap--;
	/* the decision ends as a recompute: say so, and let the re-prefill attach
	 * its measured cost */
	struct allm_decision *d = allm_engine_pending_decision(e, v);
	if (d) {
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = why;
	} else {
		v->pending_decision = -1;
	}
	if (allm_rq_push(&e->waiting, v))
		allm_engine_retire(e, v, ALLM_END_ERROR, -ENOMEM, "out of memory");
}

/* Requests whose copy sits in the shrunk pool lose it, newest swapped first,
 * until the pool's deficit is paid. */
static void pay_deficit(struct allm_engine *e, struct allm_block_pool *p, bool disk, enum allm_reason why)
{
	for (int32_t i = e->swapped.n - 1; i >= 0 && p->deficit > 0; i--) {
		struct allm_request *v = e->swapped.v[i];
		if ((disk ? v->n_disk_blocks : v->n_cpu_blocks) == 0)
			continue;
		allm_rq_remove_at(&e->swapped, i);
		lose_copy(e, v, why);
	}
}

int allm_engine_set_cpu_blocks(struct allm_engine *e, int32_t n, struct allm_err *err)
{
	int r = allm_kv_resize_cpu(e->kv, n, err);
	if (r)
		return r;
	pay_deficit(e, &e->kv->cpu, false, ALLM_REASON_HOST_SHRANK);
	return 0;
}

int allm_engine_set_disk_blocks(struct allm_engine *e, int32_t n, struct allm_err *err)
{
	int r = allm_kv_resize_disk(e->kv, n, err);
	if (r)
		return r;
	pay_deficit(e, allm_kv_disk_blocks(e->kv), true, ALLM_REASON_DISK_SHRANK);
	return 0;
}

void allm_engine_set_preempt(struct allm_engine *e, enum allm_preempt_mode m)
{
	e->cfg.preempt = m;
}

void allm_engine_set_sched(struct allm_engine *e, enum allm_sched_mode m)
{
	e->cfg.sched = m;
}

/* One number of the config against its row's range (settings.h). */
static int check_num(enum allm_setting_id id, double x, struct allm_err *err)
{
	const struct allm_setting_desc *d = allm_setting_desc(id);
	char range[96];
	if (allm_setting_in_range(d, x))
		return 0;
	allm_setting_range_text(d, range, sizeof(range));
	return allm_err_set(err, -EINVAL, "%s must be in %s (got %g)", d->key, range, x);
}

int allm_engine_config_check(const struct allm_engine_config *cfg, struct allm_err *err)
{
	int r = 0;
#define CHKT_I32(id) check_num(ALLM_SETTING_##id, (double)cfg->id, err)
#define CHKT_F64(id) check_num(ALLM_SETTING_##id, cfg->id, err)
#define CHKT_WORD(id) 0
#define CHKT_BOOL(id) 0
#define CHK_CFG(id, type) \
	if (!r)           \
		r = CHKT_##type(id);
#define CHK_POOL(id, type)
#define CHK_NO(id, type)
#define CHK_(id, key, type, opt, live, ...) CHK_##live(id, type)
	ALLM_SETTINGS_TABLE(CHK_)
#undef CHK_
	return r;
}

int allm_engine_set_config(struct allm_engine *e, const struct allm_engine_config *cfg,
			   struct allm_err *err)
{
	int r = allm_engine_config_check(cfg, err);
	if (r)
		return r;
	if (!cfg->prefix_caching && e->cfg.prefix_caching && e->pc)
		allm_pc_reset(e->pc);
#define SET_CFG(id) e->cfg.id = cfg->id;
#define SET_POOL(id)
#define SET_NO(id)
#define SET_(id, key, type, opt, live, ...) SET_##live(id)
	ALLM_SETTINGS_TABLE(SET_)
#undef SET_
	return 0;
}

int allm_engine_set_limits(struct allm_engine *e, int32_t max_num_seqs,
			   int32_t max_num_batched_tokens, struct allm_err *err)
{
	struct allm_engine_config c = e->cfg;
	c.max_num_seqs = max_num_seqs;
	c.max_num_batched_tokens = max_num_batched_tokens;
	return allm_engine_set_config(e, &c, err);
}

int32_t allm_engine_cache_reset(struct allm_engine *e)
{
	return e->pc ? allm_pc_reset(e->pc) : 0;
}

struct allm_prefix_cache *allm_engine_prefix_cache(struct allm_engine *e)
{
	return e->pc;
}

const struct allm_engine_config *allm_engine_get_config(const struct allm_engine *e)
{
	return &e->cfg;
}

void allm_engine_get_stats(const struct allm_engine *e, struct allm_engine_stats *ret)
{
	*ret = e->st;
	ret->waiting = e->waiting.n;
	ret->running = e->running.n;
	ret->swapped = e->swapped.n;
	ret->gpu_total = e->kv->gpu.n_total;
	ret->gpu_used = allm_block_pool_used(&e->kv->gpu);
	ret->gpu_free = allm_block_pool_avail(&e->kv->gpu);
	ret->gpu_cached_free = e->kv->gpu.n_cached;
	ret->gpu_deficit = e->kv->gpu.deficit;
	ret->cpu_total = e->kv->cpu.n_total;
	ret->cpu_used = allm_block_pool_used(&e->kv->cpu);
	ret->mape_swap = e->pred ? allm_predictor_mape_swap(e->pred) : NAN;
	ret->mape_disk = e->pred ? allm_predictor_mape_disk(e->pred) : NAN;
	struct allm_block_pool *dp = allm_kv_disk_blocks(e->kv);
	ret->disk_total = dp ? dp->n_total : 0;
	ret->disk_used = dp ? allm_block_pool_used(dp) : 0;
	if (e->pc) {
		allm_pc_get_stats(e->pc, &ret->pc);
		memcpy(ret->pc_blocks, ret->pc.blocks, sizeof(ret->pc_blocks));
		ret->cpu_cached = ret->pc_blocks[ALLM_KV_TIER_HOST];
		ret->disk_cached = ret->pc_blocks[ALLM_KV_TIER_DISK];
	}
	ret->mape_recompute = e->pred ? allm_predictor_mape_recompute(e->pred) : NAN;
	ret->dec_mape_swap = allm_decision_error_mape(&e->derr, ALLM_CHOICE_SWAP);
	ret->dec_mape_recompute = allm_decision_error_mape(&e->derr, ALLM_CHOICE_RECOMPUTE);
	ret->dec_measured = e->derr.n[0] + e->derr.n[1] + e->derr.n[2];
	ret->dec_probed = e->derr.probed;
	ret->dec_regret = e->derr.regret;
	ret->slo_buffer_tokens = e->slo.buffer;
	ret->elastic = e->el.pool > 0;
	if (ret->elastic) {
		ret->pool_bytes = (int64_t)e->el.pool;
		ret->scratch_bytes = (int64_t)allm_executor_scratch_bytes(&e->model->cfg, e->el.scratch_tokens);
		ret->resident_bytes = (int64_t)(allm_kv_resident_bytes(e->kv) + allm_executor_scratch_resident(e->ex));
	}
}

void allm_engine_reset_stats(struct allm_engine *e)
{
	memset(&e->st, 0, sizeof(e->st));
	memset(&e->derr, 0, sizeof(e->derr));
	if (e->pc)
		allm_pc_reset_stats(e->pc);
}

int allm_engine_decisions(const struct allm_engine *e, int64_t since, struct allm_decision *ret,
			  int max)
{
	int64_t first = ALLM_MAX(since, e->n_decisions - ALLM_ENGINE_DECISIONS);
	int n = 0;
	for (int64_t s = ALLM_MAX(first, 0); s < e->n_decisions && n < max; s++)
		ret[n++] = e->dlog[s % ALLM_ENGINE_DECISIONS];
	return n;
}

int allm_engine_list(const struct allm_engine *e, enum allm_req_state q,
		     const struct allm_request **ret, int max)
{
	const struct allm_rq_vec *v = q == ALLM_REQ_RUNNING ? &e->running
				      : q == ALLM_REQ_SWAPPED ? &e->swapped
							      : &e->waiting;
	int n = 0;
	for (int32_t i = 0; i < v->n && n < max; i++)
		ret[n++] = v->v[i];
	/* during a step, those whose disk reads run ahead are still swapped */
	for (int32_t i = 0; q == ALLM_REQ_SWAPPED && i < e->loading.n && n < max; i++)
		ret[n++] = e->loading.v[i];
	return n;
}
