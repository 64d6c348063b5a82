/* The SLO buffer (DESIGN §5c, eLLM's SLO-aware buffer scaling): with
 * --slo-ttft-ms or --slo-tpot-ms set, a logical buffer caps the prompt tokens
 * a step carries and, with elastic memory, is the scratch that inflation
 * leaves while prompts wait or prefill (engine-elastic.c's floor), so the KV
 * share never grows into it. Over a window of ALLM_SLO_WINDOW steps:
 *   TPOT over its target (the window's decoding steps, their mean time):
 *     the buffer halves: smaller prefill chunks ride with the decodes, and
 *     the KV share may grow into what the scratch gave back;
 *   TTFT over its target (the worst first token of the window, and the age
 *     of every prompt still without one, whose TTFT is already that long):
 *     the buffer doubles: prompts get through in fewer steps.
 * Both violated: the one further over its target (observed / target) moves
 * it. The buffer stays within [block size, max_num_batched_tokens] and
 * starts at the top: steps carry as many prompt tokens as without SLOs (with
 * elastic memory the scratch for them is kept while prompts wait, where
 * without SLOs inflation may take it and a deflation has to win it back).
 * Each move is a pool decision (on_pool, ALLM_POOL_SLO_*) with what
 * was observed and the target. With neither set nothing here acts: the
 * engine runs bit for bit as without this file. */
#include "engine-internal.h"

enum { ALLM_SLO_WINDOW = 5 };

static bool slo_on(const struct allm_engine *e)
{
	return e->cfg.slo_ttft_ms > 0 || e->cfg.slo_tpot_ms > 0;
}

static int64_t lo(const struct allm_engine *e)
{
	return ALLM_MIN((int64_t)e->kv->lay.block_size, (int64_t)e->cfg.max_num_batched_tokens);
}

static void reset_window(struct allm_slo *s)
{
	s->steps = 0;
	s->tpot_sum = 0;
	s->tpot_n = 0;
	s->ttft_worst = -1;
}

/* Follows the settings: off drops the buffer; on (again) starts it at the
 * top; a new max_num_batched_tokens bounds it. */
void allm_slo_sync(struct allm_engine *e)
{
	struct allm_slo *s = &e->slo;
	if (!slo_on(e)) {
		s->buffer = 0;
		return;
	}
	if (!s->buffer) {
		s->buffer = e->cfg.max_num_batched_tokens;
		reset_window(s);
	}
	s->buffer = ALLM_MAX(lo(e), ALLM_MIN(s->buffer, (int64_t)e->cfg.max_num_batched_tokens));
}

int64_t allm_slo_prompt_tokens(const struct allm_engine *e)
{
	return e->slo.buffer > 0 ? e->slo.buffer : INT64_MAX;
}

void allm_slo_before(struct allm_engine *e, const struct allm_rq_vec *sel)
{
	struct allm_slo *s = &e->slo;
	if (!s->buffer)
		return;
	s->step_t0 = allm_engine_now(e);
	s->step_decodes = false;
	for (int32_t i = 0; i < sel->n && !s->step_decodes; i++)
		s->step_decodes = !sel->v[i]->prefilling;
}

void allm_slo_first_token(struct allm_engine *e, const struct allm_request *r, double now)
{
	struct allm_slo *s = &e->slo;
	if (s->buffer)
		s->ttft_worst = ALLM_MAX(s->ttft_worst, now - r->arrival);
}

static void move(struct allm_engine *e, enum allm_pool_reason why, int64_t to, double observed_s, double target_ms)
{
	struct allm_slo *s = &e->slo;
	bool shrink = to < s->buffer;
	s->buffer = to;
	if (shrink)
		e->st.slo_shrinks++;
	else
		e->st.slo_grows++;
	struct allm_pool_decision d = {
		.seq_no = e->el.n_pool_decisions++,
		.time = allm_engine_now(e),
		.inflate = shrink,
		.reason = why,
		.kv_blocks = e->kv->gpu.n_total,
		.scratch_tokens = e->el.pool ? e->el.scratch_tokens : 0,
		.scratch_bytes = e->el.pool ? (int64_t)allm_executor_scratch_bytes(&e->model->cfg, e->el.scratch_tokens) : 0,
		.buffer_tokens = to,
		.observed_ms = observed_s * 1e3,
		.target_ms = target_ms,
	};
	if (e->ev.on_pool)
		e->ev.on_pool(e->ev.user, &d);
}

void allm_slo_after(struct allm_engine *e)
{
	struct allm_slo *s = &e->slo;
	if (!s->buffer)
		return;
	double now = allm_engine_now(e);
	if (s->step_decodes) {
		s->tpot_sum += now - s->step_t0;
		s->tpot_n++;
	}
	if (++s->steps < ALLM_SLO_WINDOW)
		return;
	/* prompts without a first token yet: their TTFT is at least their age */
	double ttft = s->ttft_worst;
	const struct allm_rq_vec *qs[] = {&e->waiting, &e->running};
	for (size_t q = 0; q < ALLM_ARRAY_SIZE(qs); q++)
		for (int32_t i = 0; i < qs[q]->n; i++)
			if (!qs[q]->v[i]->first_token)
				ttft = ALLM_MAX(ttft, now - qs[q]->v[i]->arrival);
	double tpot = s->tpot_n ? s->tpot_sum / s->tpot_n : -1;
	double over_tpot = e->cfg.slo_tpot_ms > 0 && tpot >= 0 ? tpot * 1e3 / e->cfg.slo_tpot_ms : 0;
	double over_ttft = e->cfg.slo_ttft_ms > 0 && ttft >= 0 ? ttft * 1e3 / e->cfg.slo_ttft_ms : 0;
	reset_window(s);
	if (over_tpot > 1 && over_tpot >= over_ttft) {
		if (s->buffer > lo(e))
			move(e, ALLM_POOL_SLO_TPOT, ALLM_MAX(lo(e), s->buffer / 2), tpot, e->cfg.slo_tpot_ms);
	} else if (over_ttft > 1 && s->buffer < e->cfg.max_num_batched_tokens) {
		move(e, ALLM_POOL_SLO_TTFT, ALLM_MIN((int64_t)e->cfg.max_num_batched_tokens, s->buffer * 2), ttft,
		     e->cfg.slo_ttft_ms);
	}
}
