/* Elastic memory (DESIGN §5c, the eLLM design): one pool under --memory-budget
 * from which both the KV blocks and each step's activation scratch are drawn.
 * The device pool's memory spans the whole pool; the blocks the pool retires
 * (block-pool.h) are the scratch's share, their pages returned on host memory
 * (kv-elastic.h). The scheduler moves the line:
 *   inflate  (scratch -> KV) when no prompt waits (the decode phase needs one
 *            token of scratch a request) or the running batch's next tokens
 *            need blocks: before Alg. 1 would preempt, the scratch gives back
 *            all but what the step's rows need;
 *   deflate  (KV -> scratch) lazily, just before a step whose tokens need
 *            more scratch than it holds, from free blocks only; prompt chunks
 *            shrink where those are short (chunked prefill bounds a step), so
 *            taking memory for activations never preempts. A running request's
 *            KV still leaves the device only through Alg. 1 (swap, disk or
 *            recompute, the cost model's choice), which the KV share's size
 *            drives like any shrink of the pool.
 * Both are decisions: counted, reported (on_pool) and shown in status. */
#include "engine-internal.h"
#include "kv-elastic.h"

#include <errno.h>
#include <math.h>
#include <string.h>

const char *allm_pool_reason_name(enum allm_pool_reason r)
{
	switch (r) {
	case ALLM_POOL_DECODE_PHASE: return "decode phase";
	case ALLM_POOL_KV_SHORT: return "KV short";
	case ALLM_POOL_PREFILL: return "prefill";
	case ALLM_POOL_SLO_TPOT: return "TPOT over SLO";
	case ALLM_POOL_SLO_TTFT: return "TTFT over SLO";
	}
	return "?";
}

static size_t scratch_bytes(const struct allm_engine *e, int64_t T)
{
	return allm_executor_scratch_bytes(&e->model->cfg, T);
}

/* The KV share when the scratch holds T tokens. */
static int32_t share_blocks(const struct allm_engine *e, int64_t T)
{
	size_t s = scratch_bytes(e, T);
	size_t left = e->el.pool > s ? e->el.pool - s : 0;
	int32_t n = (int32_t)ALLM_MIN(left / e->kv->block_bytes, (size_t)e->kv->gpu.capacity);
	return ALLM_MAX(n, 1);
}

/* The most tokens of scratch that leave the KV share at least n blocks. */
static int64_t tokens_leaving(const struct allm_engine *e, int32_t n)
{
	int64_t lo = 0, hi = e->ex->cap_tokens;
	while (lo < hi) { /* share_blocks falls as T grows */
		int64_t mid = lo + (hi - lo + 1) / 2;
		if (share_blocks(e, mid) >= n)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static void decide(struct allm_engine *e, bool inflate, enum allm_pool_reason why, int32_t blocks)
{
	struct allm_pool_decision d = {
		.seq_no = e->el.n_pool_decisions++,
		.time = allm_engine_now(e),
		.inflate = inflate,
		.reason = why,
		.blocks = blocks,
		.kv_blocks = e->kv->gpu.n_total,
		.scratch_tokens = e->el.scratch_tokens,
		.scratch_bytes = (int64_t)scratch_bytes(e, e->el.scratch_tokens),
		.buffer_tokens = e->slo.buffer,
		.observed_ms = NAN,
		.target_ms = NAN,
	};
	if (inflate) {
		e->st.inflations++;
		e->st.blocks_inflated += blocks;
	} else {
		e->st.deflations++;
		e->st.blocks_deflated += blocks;
	}
	if (e->ev.on_pool)
		e->ev.on_pool(e->ev.user, &d);
}

/* Moves the line so that the scratch holds T tokens: the KV share grows (its
 * new blocks may be written from now on) or shrinks (the retired blocks'
 * pages go back). The caller made sure a shrink takes only free blocks. */
static void set_scratch(struct allm_engine *e, int64_t T, enum allm_pool_reason why)
{
	struct allm_kv_cache *kv = e->kv;
	int32_t n = share_blocks(e, T), was = kv->gpu.n_total;
	struct allm_err err = {{0}};
	if (n == was) {
		if (T < e->el.scratch_tokens)
			allm_executor_trim(e->ex, T);
		e->el.scratch_tokens = T;
		return;
	}
	if (allm_kv_resize_gpu(kv, n, &err))
		return; /* never grows past the memory held: the pool's arrays only (-ENOMEM) */
	if (n > was) {
		/* the scratch's pages go first, so a device that maps (CUDA's VMM)
		 * never holds both; blocks it cannot map are retired again */
		allm_executor_trim(e->ex, T);
		if (allm_kv_mark_pages(kv, e->el.maybe)) {
			/* the shrink may retire other free blocks than the unmapped
			 * ones: their chunks go back, then the rest is mapped */
			(void)allm_kv_resize_gpu(kv, was, &err);
			allm_kv_return_pages(kv, e->el.maybe, false);
			(void)allm_kv_mark_pages(kv, e->el.maybe);
			e->el.scratch_tokens = ALLM_MIN(e->el.scratch_tokens, T);
			return;
		}
		e->el.scratch_tokens = T;
	} else {
		e->el.scratch_tokens = T;
		allm_kv_return_pages(kv, e->el.maybe, false);
	}
	decide(e, n > was, why, n > was ? n - was : was - n);
}

int allm_elastic_init(struct allm_engine *e, struct allm_err *err)
{
	struct allm_kv_cache *kv = e->kv;
	const struct allm_model_config *c = &e->model->cfg;
	if (!kv->elastic_pool)
		return 0;
	e->el.pool = kv->elastic_pool;
	e->el.maybe = allm_calloc((size_t)kv->gpu.capacity, 1);
	if (!e->el.maybe)
		return allm_err_set(err, -ENOMEM, "out of memory");
	/* the scratch's reservation: the largest step (a chunk and a full batch of
	 * decodes; without chunking, a whole prompt) the pool could hold */
	int64_t most = ALLM_MAX((int64_t)e->cfg.max_num_batched_tokens, (int64_t)c->max_pos) + e->cfg.max_num_seqs;
	int64_t per = (int64_t)ALLM_MAX(scratch_bytes(e, 1), (size_t)1);
	int r = allm_executor_set_elastic(e->ex, ALLM_MAX(1, ALLM_MIN(most, (int64_t)(e->el.pool / (size_t)per))), err);
	if (r)
		return r;
	if ((r = allm_kv_mark_pages(kv, e->el.maybe)))
		return allm_err_set(err, r, "cannot map the KV pool: %s", allm_backend_last_error(kv->be));
	/* idle: the KV share takes everything but a block's worth of tokens */
	int64_t T0 = ALLM_MIN((int64_t)kv->lay.block_size, e->ex->cap_tokens);
	e->el.scratch_tokens = -1; /* not set yet: set_scratch decides nothing */
	if ((r = allm_kv_resize_gpu(kv, share_blocks(e, T0), err)))
		return r;
	allm_kv_return_pages(kv, e->el.maybe, false);
	e->el.scratch_tokens = T0;
	e->el.sweep = true;
	return 0;
}

void allm_elastic_fini(struct allm_engine *e)
{
	allm_free(e->el.maybe);
	e->el.maybe = NULL;
}

/* The scratch the next step keeps at least: a token for every row (running,
 * loading back, and as many newcomers as may join) and, while prompts wait or
 * prefill, a minimum chunk, so a prompt always moves; with reserve and an SLO
 * set, the SLO buffer instead when larger (engine-slo.c). */
static int64_t floor_tokens(const struct allm_engine *e, bool prefilling, bool reserve)
{
	int64_t T = (int64_t)e->running.n + e->loading.n;
	if (e->waiting.n || prefilling)
		T += ALLM_MIN((int64_t)e->waiting.n, (int64_t)ALLM_MAX(0, e->cfg.max_num_seqs - e->running.n)) +
		     ALLM_MAX(4 * (int64_t)e->kv->lay.block_size, reserve ? e->slo.buffer : 0);
	return ALLM_MIN(ALLM_MAX(T, 1), e->ex->cap_tokens);
}

static bool any_prefilling(const struct allm_engine *e)
{
	for (int32_t i = 0; i < e->running.n; i++)
		if (e->running.v[i]->prefilling)
			return true;
	return false;
}

void allm_elastic_begin(struct allm_engine *e, int32_t short_blocks)
{
	if (!e->el.pool)
		return;
	if (e->el.sweep) {
		/* the first step: calibration may have timed copies over any block
		 * (allm_kv_time_copy), retired ones too: every one's pages go back */
		memset(e->el.maybe, 1, (size_t)e->kv->gpu.capacity);
		allm_kv_return_pages(e->kv, e->el.maybe, false);
		allm_kv_mark_pages(e->kv, e->el.maybe);
		e->el.sweep = false;
	}
	if (e->el.trimmed) { /* free blocks may be written again */
		if (allm_kv_mark_pages(e->kv, e->el.maybe)) {
			/* the device is short of memory (another process took it):
			 * the free blocks it could not map are lent to nobody */
			struct allm_err err = {{0}};
			const struct allm_block_pool *p = &e->kv->gpu;
			(void)allm_kv_resize_gpu(e->kv, ALLM_MAX(1, p->n_total - p->n_free), &err);
			allm_kv_return_pages(e->kv, e->el.maybe, false);
			(void)allm_kv_mark_pages(e->kv, e->el.maybe);
		}
		e->el.trimmed = false;
	}
	/* a step over budget (allm_elastic_fit) mapped scratch past the share */
	allm_executor_trim(e->ex, e->el.scratch_tokens);
	bool prefilling = any_prefilling(e);
	/* the first waiting prompt cannot get its blocks: admission's turn */
	bool head_short = e->waiting.n && allm_kv_blocks_for(e->kv, e->waiting.v[0]->seq.n_tokens) > -short_blocks;
	/* the SLO buffer is kept from the running batch's growth only (Alg. 1
	 * preempts instead): admission may always take it, so that whatever
	 * waits can get in once nothing runs */
	int64_t T;
	enum allm_pool_reason why = ALLM_POOL_KV_SHORT;
	if (short_blocks > 0)
		T = floor_tokens(e, prefilling, true);
	else if (!e->waiting.n && !prefilling)
		T = floor_tokens(e, prefilling, false), why = ALLM_POOL_DECODE_PHASE;
	else if (head_short)
		T = floor_tokens(e, prefilling, false);
	else
		return;
	if (T < e->el.scratch_tokens)
		set_scratch(e, T, why);
}

/* Phase-aware placement (eLLM's phase-aware scheduling, as a cost-model
 * choice): the step's prompt tokens T exceed the scratch that free blocks
 * allow (fit); decoding requests, lowest priority first, are priced as
 * victims whose blocks would raise it (engine-preempt.c, the policy's
 * phase: their swap's round trip against the prompt's tokens waiting for a
 * step of their own). Those taken go to the host and sit out this step;
 * admission brings them back (Alg. 2) when the next steps' scratch shrinks
 * again (the decode phase inflates). */
static void phase_out(struct allm_engine *e, struct allm_rq_vec *sel, int64_t *T, int64_t *fit, int32_t *lend,
		      int32_t spare)
{
	double now = allm_engine_now(e);
	for (int32_t i = 0; i < e->running.n && *T > *fit;) {
		struct allm_request *v = e->running.v[i]; /* in victim order (mem_schedule) */
		int32_t n = allm_seq_held(&v->seq);
		/* one just back (swapped in this step) does not go out again */
		if (v->prefilling || n <= 0 || v->admit_step == e->step_no) {
			i++;
			continue;
		}
		int64_t more = tokens_leaving(e, e->kv->gpu.n_total - (*lend + n)) - *fit;
		if (more <= 0)
			break; /* a block's scratch is more than any one victim frees */
		int32_t avail = allm_block_pool_avail(&e->kv->gpu);
		bool in_sel = false;
		for (int32_t k = 0; k < sel->n && !in_sel; k++)
			in_sel = sel->v[k] == v;
		if (!allm_engine_phase_out(e, v, ALLM_MIN(more, *T - *fit), now)) {
			i++;
			continue;
		}
		if (in_sel) { /* its decode row leaves the step */
			allm_rq_remove(sel, v);
			(*T)--;
		}
		/* blocks it shared with the prefix cache stay: only what it freed */
		spare += allm_block_pool_avail(&e->kv->gpu) - avail;
		*lend = ALLM_MAX(0, ALLM_MIN(spare, allm_block_pool_avail(&e->kv->gpu)));
		*fit = ALLM_MAX(e->el.scratch_tokens, tokens_leaving(e, e->kv->gpu.n_total - *lend));
	}
}

void allm_elastic_fit(struct allm_engine *e, struct allm_rq_vec *sel, int32_t spare)
{
	e->st.max_running = ALLM_MAX(e->st.max_running, e->running.n);
	if (!e->el.pool || !sel->n)
		return;
	int64_t T = 0;
	for (int32_t i = 0; i < sel->n; i++) {
		const struct allm_request *r = sel->v[i];
		T += r->chunk > 0 ? r->chunk : r->prefilling ? r->seq.n_tokens - r->seq.n_cached : 1;
	}
	if (T <= e->el.scratch_tokens)
		return;
	/* the most the free blocks allow (never below what is held) */
	int32_t lend = ALLM_MAX(0, ALLM_MIN(spare, allm_block_pool_avail(&e->kv->gpu)));
	int64_t fit = ALLM_MAX(e->el.scratch_tokens, tokens_leaving(e, e->kv->gpu.n_total - lend));
	if (T > fit && e->cfg.phase_placement)
		phase_out(e, sel, &T, &fit, &lend, spare);
	if (T > fit && e->cfg.chunked_prefill) {
		/* prompt chunks shrink, the newest first, each by at most all but a token */
		for (int32_t i = sel->n - 1; i >= 0 && T > fit; i--) {
			struct allm_request *r = sel->v[i];
			if (r->chunk <= 1)
				continue;
			int32_t cut = (int32_t)ALLM_MIN((int64_t)r->chunk - 1, T - fit);
			r->chunk -= cut;
			T -= cut;
		}
	}
	if (T > fit) {
		e->st.over_budget_steps++; /* the reservation holds it; the budget is overrun this step */
		T = fit;
	}
	if (T > e->el.scratch_tokens)
		set_scratch(e, T, ALLM_POOL_PREFILL);
}

void allm_elastic_end(struct allm_engine *e)
{
	if (!e->el.pool || e->el.trimmed || e->waiting.n || e->running.n || e->swapped.n || e->loading.n)
		return;
	/* idle: the pages of every free block and of the scratch go back; what
	 * stays mapped is what the prefix cache keeps */
	memset(e->el.maybe, 1, (size_t)e->kv->gpu.capacity); /* whatever wrote them */
	allm_kv_return_pages(e->kv, e->el.maybe, true);
	allm_executor_trim(e->ex, 0);
	e->el.trimmed = true;
}

int32_t allm_elastic_max_blocks(const struct allm_engine *e)
{
	return e->el.pool ? share_blocks(e, floor_tokens(e, true, false)) : e->kv->gpu.n_total;
}

int allm_engine_elastic_check(const struct allm_engine *e, bool idle, struct allm_err *err)
{
	const struct allm_kv_cache *kv = e->kv;
	const struct allm_block_pool *p = &kv->gpu;
	if (!e->el.pool)
		return 0;
	size_t kv_bytes = (size_t)p->n_total * kv->block_bytes, s = scratch_bytes(e, e->el.scratch_tokens);
	if (kv_bytes + s > e->el.pool)
		return allm_err_set(err, -EFAULT, "KV share %zu + scratch %zu bytes exceed the pool's %zu",
				    kv_bytes, s, e->el.pool);
	if (!allm_kv_pages_returnable(kv))
		return 0;
	size_t page = allm_mem_page(kv->be, kv->dev), mapped_blocks = 0;
	for (int32_t id = 0; id < p->capacity; id++) {
		size_t res = allm_mem_resident(kv->be, (const char *)kv->dev + (size_t)id * kv->block_bytes, kv->block_bytes);
		bool held = p->owner[id] >= 0 || p->owner[id] == ALLM_BLOCK_CACHED;
		/* a block's pages, less the two it may share with its neighbours */
		if (res > 2 * page && (p->owner[id] == ALLM_BLOCK_RETIRED || (idle && !held)))
			return allm_err_set(err, -EFAULT, "%s block %d holds %zu bytes of pages",
					    p->owner[id] == ALLM_BLOCK_RETIRED ? "retired" : "free", id, res);
		mapped_blocks += held;
	}
	size_t res_s = allm_executor_scratch_resident(e->ex);
	size_t lim_s = idle ? 0 : s;
	if (res_s > lim_s + 2 * page)
		return allm_err_set(err, -EFAULT, "scratch maps %zu bytes, its share is %zu", res_s, lim_s);
	if (allm_kv_resident_bytes(kv) > (idle ? mapped_blocks * kv->block_bytes : kv_bytes) +
						 (size_t)p->capacity * 2 * page)
		return allm_err_set(err, -EFAULT, "the device pool maps %zu bytes for %zu held blocks",
				    allm_kv_resident_bytes(kv), mapped_blocks);
	return 0;
}
