/* One scheduler step (DESIGN §6): Alg. 1 (Mem_Schedule) preempts until the running
 * batch's next tokens fit, choosing per victim between swap and recompute from
 * predicted costs; Alg. 2 (Req_Schedule) then admits either swapped or waiting
 * requests, whichever group is more urgent; then the batch runs
 * (engine-forward.c). fcfs reproduces vLLM 0.2's order.
 *
 * With the config's zero values this is the paper's engine: a step either
 * prefills newly admitted prompts or decodes the running batch. The rest is ours:
 *  - chunked prefill: a step decodes the running batch and carries prefill
 *    chunks up to max_num_batched_tokens tokens; long prompts span steps;
 *  - fair without thrash (fair, admit_lookahead > 0): admission leaves the
 *    running batch and each newcomer room to grow admit_lookahead steps (all
 *    their growth while the host pool could not take a victim, since the next
 *    preemption would then recompute), takes nobody in a step that had to
 *    preempt, and swaps back in first while the host pool is full. Without it
 *    fair admits into the blocks a preemption just freed and the next block
 *    boundary evicts what it admitted: on summary at 16 sequences, 270 recomputes
 *    (77k tokens prefilled again) against fcfs's 1 (bench/README.md, "Scheduler
 *    quality", has the measurements; a minimum residency after admission was
 *    tried and changed nothing, so it is not here);
 *  - aging (fair only): a request that waited past max_wait_factor x its own
 *    service time is admitted first, room is made for it (from requests that
 *    did not wait long themselves: aging_victim), and it is no victim;
 *  - admission by commitment (fair, admit_overcommit > 0): new prompts wait
 *    while the KV that everyone admitted would hold at their longest exceeds
 *    admit_overcommit x the blocks of every tier (commitment_cap). */
#include "engine-internal.h"
#include "engine-policy.h"

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

/* Admission: most urgent first (fair: aged requests before the others) / oldest
 * first (fcfs). */
static int urgent_fair(const void *a, const void *b)
{
	const struct allm_request *x = *(struct allm_request *const *)a, *y = *(struct allm_request *const *)b;
	if (x->aged != y->aged)
		return x->aged ? -1 : 1;
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

static bool fair(const struct allm_engine *e)
{
	return e->cfg.sched == ALLM_SCHED_FAIR;
}

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

/* Neither the host pool nor the disk could take the next victim (the longest
 * running request): a preemption now would recompute. */
static bool host_pool_full(const struct allm_engine *e)
{
	int32_t biggest = 0;
	for (int32_t i = 0; i < e->running.n; i++)
		biggest = ALLM_MAX(biggest, allm_seq_held(&e->running.v[i]->seq));
	struct allm_block_pool *dp = allm_kv_disk_blocks(e->kv);
	return !allm_policy_of(e->cfg.preempt)->swaps ||
	       (allm_block_pool_avail(&e->kv->cpu) < biggest && (!dp || allm_block_pool_avail(dp) < biggest));
}

/* Fair with headroom: swapped requests go back first while the host pool is
 * full, so that the next preemptions can swap instead of recomputing (fcfs gets
 * this from its swapped-first order; fair's wait/length ranks swapped requests,
 * which are longer, behind the newcomers and left the host pool full). */
static bool swap_pressure(const struct allm_engine *e)
{
	return fair(e) && e->cfg.admit_lookahead > 0 && e->running.n > 0 && host_pool_full(e);
}

/* Steps of growth admission leaves room for: admit_lookahead while a victim
 * could still be swapped (cheap), all of it when the next one would recompute
 * (a prefill thrown away). */
static int64_t headroom(const struct allm_engine *e)
{
	return host_pool_full(e) ? INT32_MAX : e->cfg.admit_lookahead;
}

/* Blocks the running batch needs to grow admit_lookahead more tokens each
 * (capped by each one's longest length), beyond its next token's. */
static int32_t lookahead_need(const struct allm_engine *e)
{
	int32_t need = 0;
	if (!fair(e) || e->cfg.admit_lookahead <= 0)
		return 0;
	int64_t room = headroom(e); /* a scan of running itself: once, not per request */
	for (int32_t i = 0; i < e->running.n; i++) {
		const struct allm_request *r = e->running.v[i];
		int64_t len = ALLM_MIN((int64_t)r->seq.n_tokens + room,
				       (int64_t)allm_engine_max_len(e, r));
		need += ALLM_MAX(0, allm_kv_blocks_for(e->kv, len) - ALLM_MAX(r->seq.n_blocks,
							allm_kv_blocks_for(e->kv, r->seq.n_tokens)));
	}
	return need;
}

/* Whether fair's Alg. 1 passes r over while there is another victim: an aged
 * request, whose wait must stay bounded. */
static bool protected(const struct allm_engine *e, const struct allm_request *r)
{
	return fair(e) && r->aged;
}

/* Steps r had waited when it was last admitted or swapped in (a wait, as aging
 * counts it: since arrival, less the steps spent generating). */
static int64_t admit_wait(const struct allm_request *r)
{
	return r->admit_step - r->arrival_step - r->gen_at_admit;
}

/* Whether room for an aged request may evict r: not a protected one, nor one
 * that itself waited half its own bound before it got in. Aging is against
 * starvation, not overload: when a burst has everyone waiting about as long
 * (every request at t = 0, max_num_seqs 8), evicting such a request only moves
 * the overrun to it; doing so evicted 8 requests 1-7 tokens short of done
 * (bench/README.md, "Scheduler quality"). */
static bool aging_victim(const struct allm_engine *e, const struct allm_request *r)
{
	return !protected(e, r) &&
	       (double)admit_wait(r) * 2 < e->cfg.max_wait_factor * (double)allm_engine_service_steps(e, r);
}

/* Index in running (in victim order) of the next victim: the first one not
 * protected, else the first; for_aged: the first aging_victim, else -1. */
static int32_t next_victim(const struct allm_engine *e, bool for_aged)
{
	for (int32_t i = 0; i < e->running.n; i++)
		if (for_aged ? aging_victim(e, e->running.v[i]) : !protected(e, e->running.v[i]))
			return i;
	return for_aged ? -1 : 0;
}

void allm_engine_admitted(struct allm_engine *e, struct allm_request *r, double now)
{
	r->state = ALLM_REQ_RUNNING;
	if (!r->first_sched) {
		int64_t wait = e->step_no - r->arrival_step;
		r->first_sched = now;
		e->st.max_wait_steps = ALLM_MAX(e->st.max_wait_steps, wait);
		e->st.max_wait_ratio = ALLM_MAX(e->st.max_wait_ratio,
						(double)wait / (double)allm_engine_service_steps(e, r));
	}
	r->admit_step = e->step_no;
	r->gen_at_admit = allm_request_n_generated(r);
}

/* --- Alg. 1: preemption (the choice per victim: engine-preempt.c) -------------- */

/* Preempts, in victim order, until the running batch's next tokens, `extra`
 * blocks and a shrink's deficit fit (with_lookahead: and the admission headroom
 * too) and at most max_running requests run; fair passes over protected requests
 * while others remain; for_aged: evicts aging victims only. The running batch
 * must already be in victim order. Returns how many were preempted. */
static int make_room(struct allm_engine *e, int32_t extra, bool with_lookahead, int32_t max_running,
		     bool for_aged, double now)
{
	int n = 0;
	while (e->running.n > 0 &&
	       (e->running.n > max_running ||
		running_need(e) + (with_lookahead ? lookahead_need(e) : 0) + extra + e->kv->gpu.deficit >
			allm_block_pool_avail(&e->kv->gpu))) {
		int32_t i = next_victim(e, for_aged);
		if (i < 0)
			break;
		struct allm_request *v = e->running.v[i];
		allm_rq_remove_at(&e->running, i);
		allm_engine_preempt(e, v, now);
		n++;
	}
	return n;
}

/* Alg. 1: preempts until the running batch's next tokens fit (and a shrink's
 * deficit is paid). Returns whether anything was preempted. */
static bool mem_schedule(struct allm_engine *e, double now)
{
	order(&e->running, fair(e) ? victim_fair : victim_fcfs, now);
	return make_room(e, 0, false, INT32_MAX, false, now) > 0;
}

/* --- aging ----------------------------------------------------------------------- */

/* Marks the waiting and swapped requests that have waited past max_wait_factor x
 * their own service time (in steps). A request's wait is the steps since it
 * arrived less the steps it spent generating (one token each). */
static void age(struct allm_engine *e)
{
	if (!fair(e) || e->cfg.max_wait_factor <= 0)
		return;
	struct allm_rq_vec *qs[] = {&e->waiting, &e->swapped};
	for (size_t q = 0; q < ALLM_ARRAY_SIZE(qs); q++)
		for (int32_t i = 0; i < qs[q]->n; i++) {
			struct allm_request *r = qs[q]->v[i];
			if (r->aged)
				continue;
			int64_t wait = e->step_no - r->arrival_step - allm_request_n_generated(r);
			if ((double)wait > e->cfg.max_wait_factor * (double)allm_engine_service_steps(e, r)) {
				r->aged = true;
				e->st.aged++;
			}
		}
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
			if (need <= allm_elastic_max_blocks(e)) {
				i++;
				continue;
			}
			snprintf(msg, sizeof(msg), "needs %d KV blocks but the GPU pool now has %d", need,
				 e->kv->gpu.n_total);
			allm_engine_retire(e, r, ALLM_END_ERROR, -E2BIG, msg);
		}
}

static double mean_priority(const struct allm_rq_vec *q, double now)
{
	double s = 0;
	for (int32_t i = 0; i < q->n; i++)
		s += allm_engine_priority(q->v[i], now);
	return q->n ? s / q->n : 0;
}

/* GPU blocks admitting r takes now (a prompt: less the cached blocks others
 * hold already, by its plan; a swapped request: less those its window passed). */
static int32_t admit_blocks(const struct allm_engine *e, const struct allm_request *r, bool prefill)
{
	int32_t b = allm_kv_blocks_for(e->kv, r->seq.n_tokens);
	return prefill ? allm_engine_prefix_blocks(e, r, b)
		       : ALLM_MAX(ALLM_MAX(r->n_cpu_blocks, r->n_disk_blocks), b - r->seq.n_gone);
}

/* Blocks r holds at its longest (prompt + max output). */
static int64_t full_blocks(const struct allm_engine *e, const struct allm_request *r)
{
	return allm_kv_blocks_for(e->kv, allm_engine_max_len(e, r));
}

/* Fair with admit_overcommit: the most KV, at everyone's longest, that the
 * admitted requests may come to hold; 0 = no cap. Headroom looks a few steps
 * ahead, so a burst of short prompts into an empty batch is admitted whole and
 * grows into preemptions together; once the host pool is full of fair's
 * swapped requests (long ones, ranked behind every newcomer), each further
 * victim is recomputed. Committing no more than the device, host and disk
 * blocks can hold leaves swap room for nearly every victim: on stories260K
 * chatbot at 32-128 sequences 1.0 cut fair's recomputed tokens from 11-14k to
 * 1.7k and took its throughput from 0.79-0.86x to 0.89-1.01x fcfs's, but the
 * batch holds fewer requests early, so mean weighted turnaround went from
 * 0.45-0.56x to 1.1-1.6x fcfs's; on summary it cut them from 3.5k to 0.3k at
 * the same turnaround (bench/README.md, "Admission by commitment"). The knob
 * is that trade, off by default. */
static double commitment_cap(const struct allm_engine *e)
{
	if (!fair(e) || e->cfg.admit_overcommit <= 0)
		return 0;
	struct allm_block_pool *dp = allm_kv_disk_blocks(e->kv);
	int64_t tiers = e->kv->gpu.n_total;
	if (allm_policy_of(e->cfg.preempt)->swaps)
		tiers += e->kv->cpu.n_total + (dp ? dp->n_total : 0);
	return e->cfg.admit_overcommit * (double)tiers;
}

/* Blocks the running, loading and swapped requests hold at their longest. */
static int64_t committed_blocks(const struct allm_engine *e)
{
	const struct allm_rq_vec *qs[] = {&e->running, &e->loading, &e->swapped};
	int64_t n = 0;
	for (size_t q = 0; q < ALLM_ARRAY_SIZE(qs); q++)
		for (int32_t i = 0; i < qs[q]->n; i++)
			n += full_blocks(e, qs[q]->v[i]);
	return n;
}

/* The same plus its growth over admit_lookahead steps (fair): what admission
 * must leave free so that the newcomer is not the next victim. */
static int32_t admit_blocks_ahead(const struct allm_engine *e, const struct allm_request *r,
				  bool prefill, int64_t room)
{
	int32_t now = admit_blocks(e, r, prefill);
	if (!fair(e) || e->cfg.admit_lookahead <= 0)
		return now;
	int64_t len = ALLM_MIN((int64_t)r->seq.n_tokens + room, (int64_t)allm_engine_max_len(e, r));
	return ALLM_MAX(now, allm_kv_blocks_for(e->kv, len));
}

/* Picks from q (already ordered) while the blocks and limits allow; stops at the
 * first that does not fit, so order is respected. For prefills, tokens is the
 * step's prompt-token budget: without chunking a prompt longer than it still
 * runs, alone; with chunking each admitted prompt takes what is left of it (at
 * least one token) and its chunk is set. */
static void pick(struct allm_engine *e, const struct allm_rq_vec *q, bool prefill,
		 int32_t budget, int32_t slots, int64_t tokens, struct allm_rq_vec *out)
{
	int64_t used = 0, room = fair(e) && e->cfg.admit_lookahead > 0 ? headroom(e) : 0;
	/* swapped requests are committed already: the cap holds back new prompts */
	double cap = prefill ? commitment_cap(e) : 0;
	int64_t committed = cap > 0 ? committed_blocks(e) : 0;
	out->n = 0;
	for (int32_t i = 0; i < q->n && out->n < slots; i++) {
		struct allm_request *r = q->v[i];
		if (prefill) /* what the prefix cache has of it: fewer blocks and tokens */
			allm_engine_prefix_plan(e, r);
		int32_t b = admit_blocks_ahead(e, r, prefill, room);
		int64_t want = r->seq.n_tokens - r->seq.n_cached - (prefill ? allm_engine_prefix_tokens(e, r) : 0);
		if (b > budget)
			break;
		/* an aged request must not wait on the cap; nor may one alone */
		if (cap > 0 && !r->aged && committed > 0 && (double)(committed + full_blocks(e, r)) > cap)
			break;
		if (prefill && e->cfg.chunked_prefill) {
			if (used >= tokens)
				break;
			want = ALLM_MIN(want, tokens - used);
		} else if (prefill && out->n > 0 && used + want > tokens) {
			break;
		}
		if (allm_rq_push(out, r))
			break;
		if (prefill)
			r->chunk = (int32_t)want;
		budget -= b;
		used += want;
		if (cap > 0)
			committed += full_blocks(e, r);
	}
}

static void swap_in(struct allm_engine *e, struct allm_rq_vec *sel, double now)
{
	/* from disk, the read goes ahead: it runs while this step computes, and
	 * the request joins the batch after it (finish_loads) */
	for (int32_t i = 0; i < sel->n; i++)
		if (!allm_engine_load_start(e, sel->v[i], now))
			allm_engine_swap_in(e, sel->v[i], now);
}

/* The most urgent request waiting or swapped when it is aged, else NULL; *prefill
 * says which queue (both already in urgent_fair order). */
static struct allm_request *aged_head(struct allm_engine *e, bool *prefill)
{
	struct allm_request *head = NULL;
	if (e->waiting.n && e->waiting.v[0]->aged)
		head = e->waiting.v[0], *prefill = true;
	if (e->swapped.n && e->swapped.v[0]->aged && (!head || urgent_fair(&e->swapped.v[0], &head) < 0))
		head = e->swapped.v[0], *prefill = false;
	return head;
}

/* Fair with aging: when the most urgent request waiting or swapped is aged and
 * does not fit (blocks, or a slot of max_num_seqs: long decodes can hold every
 * slot for longer than the bound), evicts aging victims until it does, so its
 * wait stays bounded however many others keep arriving. */
static void room_for_aged(struct allm_engine *e, double now)
{
	bool prefill = false;
	struct allm_request *head = aged_head(e, &prefill);
	if (!head)
		return;
	order(&e->running, victim_fair, now);
	make_room(e, admit_blocks_ahead(e, head, prefill, headroom(e)), true, e->cfg.max_num_seqs - 1,
		  true, now);
}

/* Admitted waiting requests leave the queue for the running batch, with what
 * the prefix cache holds of them: every one's device blocks held first, so
 * that one's restore does not reclaim another's. */
static int admit_prompts(struct allm_engine *e, struct allm_rq_vec *w, double now)
{
	for (int32_t i = 0; i < w->n; i++)
		allm_engine_prefix_hold(e, w->v[i]);
	for (int32_t i = 0; i < w->n; i++)
		allm_engine_prefix_restore(e, w->v[i], now);
	for (int32_t i = 0; i < w->n; i++) {
		struct allm_request *r = w->v[i];
		allm_rq_remove(&e->waiting, r);
		allm_engine_admitted(e, r, now);
		r->prefilling = true;
		if (allm_rq_push(&e->running, r)) {
			allm_engine_retire(e, r, ALLM_END_ERROR, -ENOMEM, "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

/* Prompt tokens a chunked step can still carry after its decodes and the
 * chunks of the prompts already being prefilled (whose chunks are set here,
 * oldest admission first), within the SLO buffer's prompt tokens. */
static int64_t continue_prefills(struct allm_engine *e)
{
	int64_t left = e->cfg.max_num_batched_tokens, prompt = allm_slo_prompt_tokens(e);
	for (int32_t i = 0; i < e->running.n; i++) {
		struct allm_request *r = e->running.v[i];
		r->chunk = 0;
		if (!r->prefilling)
			left--; /* a decode row */
	}
	/* running is in victim order; partial prefills go in admission order */
	for (;;) {
		struct allm_request *best = NULL;
		for (int32_t i = 0; i < e->running.n; i++) {
			struct allm_request *r = e->running.v[i];
			if (r->chunk || !r->prefilling)
				continue;
			if (!best || r->admit_step < best->admit_step ||
			    (r->admit_step == best->admit_step && r->id < best->id))
				best = r;
		}
		if (!best)
			break;
		/* a prefill in progress always moves, by at least one token */
		best->chunk = (int32_t)ALLM_MAX(1, ALLM_MIN(ALLM_MIN(left, prompt), best->seq.n_tokens - best->seq.n_cached));
		left -= best->chunk;
		prompt -= best->chunk;
	}
	return ALLM_MAX(ALLM_MIN(left, prompt), 0);
}

/* A prefill swapped out mid-way and back in this step (swapped_in leaves its
 * chunk at 0, and continue_prefills ran before it was back) gets a chunk of
 * what the step's prompt tokens leave, at least one token as every prefill in
 * progress. Without one run_batch took the rest of its prompt: past
 * max_num_batched_tokens and the SLO buffer, and past the scratch, which
 * allm_elastic_fit cannot cut (it shrinks chunks only), so the step ran over
 * the memory budget. Which requests are swapped mid-prefill follows the
 * measured step times (the adaptive policy's costs, fair's ages), hence seen
 * only on some runs (tests/test-elastic-slo.c under load). */
static void chunk_swapped_in(struct allm_engine *e, const struct allm_rq_vec *w, int64_t tokens)
{
	for (int32_t i = 0; i < w->n; i++)
		tokens -= w->v[i]->chunk; /* the new prompts' chunks (pick) */
	for (int32_t i = 0; i < e->running.n; i++) {
		struct allm_request *r = e->running.v[i];
		if (!r->prefilling || r->chunk > 0)
			continue;
		r->chunk = (int32_t)ALLM_MAX(1, ALLM_MIN(tokens, r->seq.n_tokens - r->seq.n_cached));
		tokens -= r->chunk;
	}
}

/* The reads ahead started this step land; their requests join the running
 * batch. */
static void finish_loads(struct allm_engine *e, double now)
{
	while (e->loading.n)
		allm_engine_load_finish(e, e->loading.v[0], now, true);
}

int allm_engine_step(struct allm_engine *e, struct allm_err *err)
{
	allm_backend_host_step(e->model->be); /* a simulated device waits for the host */
	double now = allm_engine_now(e);
	bool chunked = e->cfg.chunked_prefill;
	e->step_no++;
	e->st.steps++;
	allm_slo_sync(e);
	allm_elastic_begin(e, running_need(e) + e->kv->gpu.deficit - allm_block_pool_avail(&e->kv->gpu));
	fail_unfittable(e);
	bool preempted = mem_schedule(e, now);
	age(e);
	if (fair(e)) {
		for (int32_t i = 0; i < e->waiting.n; i++)
			allm_engine_prefix_hint(e, e->waiting.v[i]);
		order(&e->swapped, urgent_fair, now);
		order(&e->waiting, urgent_fair, now);
		if (e->cfg.max_wait_factor > 0)
			room_for_aged(e, now);
	}

	int64_t tokens = chunked ? continue_prefills(e)
				 : ALLM_MIN((int64_t)e->cfg.max_num_batched_tokens, allm_slo_prompt_tokens(e));
	int32_t budget = allm_block_pool_avail(&e->kv->gpu) - e->kv->gpu.deficit - running_need(e) - lookahead_need(e);
	int32_t slots = e->cfg.max_num_seqs - e->running.n;
	struct allm_rq_vec *s_sche = &e->sel, *w_sche = &e->sel2;
	s_sche->n = w_sche->n = 0;
	/* anti-thrash: blocks a preemption just freed are not handed to a newcomer
	 * that the next block boundary would evict (an aged request still goes) */
	bool aged_prefill;
	bool hold = fair(e) && e->cfg.admit_lookahead > 0 && preempted && !aged_head(e, &aged_prefill);
	if (budget > 0 && slots > 0 && !hold) {
		if (!fair(e)) {
			/* vLLM 0.2: swapped first; new prompts only when nothing is swapped;
			 * no swap-in in a step that had to preempt */
			if (e->swapped.n == 0) {
				order(&e->waiting, urgent_fcfs, now);
				pick(e, &e->waiting, true, budget, slots, tokens, w_sche);
			} else if (!preempted) {
				order(&e->swapped, urgent_fcfs, now);
				pick(e, &e->swapped, false, budget, slots, tokens, s_sche);
			}
		} else {
			pick(e, &e->swapped, false, budget, slots, tokens, s_sche);
			pick(e, &e->waiting, true, budget, slots, tokens, w_sche);
			/* Alg. 2: the more urgent group wins; ties go to the swapped ones; an
			 * aged head wins for its group */
			if (w_sche->n && s_sche->n) {
				bool w_aged = w_sche->v[0]->aged, s_aged = s_sche->v[0]->aged;
				if (s_aged || (!w_aged && (swap_pressure(e) || mean_priority(w_sche, now) <= mean_priority(s_sche, now))))
					w_sche->n = 0;
				else
					s_sche->n = 0;
			}
		}
	}

	struct allm_rq_vec *sel = &e->sel;
	if (!chunked && w_sche->n) {
		/* the paper's prefill step: the new prompts alone, no decode */
		if (admit_prompts(e, w_sche, now))
			return allm_err_set(err, -ENOMEM, "out of memory");
		sel = w_sche;
	} else {
		if (s_sche->n)
			swap_in(e, s_sche, now);
		if (admit_prompts(e, w_sche, now))
			goto oom;
		/* with nothing to compute meanwhile, the reads ahead are waited for
		 * and their requests run now */
		if (!e->running.n)
			finish_loads(e, now);
		if (chunked)
			chunk_swapped_in(e, w_sche, tokens);
		/* the running batch: decodes, prefills in progress, the new prompts */
		sel->n = 0;
		for (int32_t i = 0; i < e->running.n; i++) {
			struct allm_request *r = e->running.v[i];
			if (!chunked)
				r->chunk = 0;
			if (allm_rq_push(sel, r))
				goto oom;
		}
	}
	allm_elastic_fit(e, sel, allm_block_pool_avail(&e->kv->gpu) - e->kv->gpu.deficit - running_need(e));
	allm_slo_before(e, sel);
	int rc = allm_engine_run_batch(e, sel, err);
	allm_slo_after(e);
	finish_loads(e, allm_engine_now(e));
	allm_elastic_end(e);
	return rc;
oom:
	finish_loads(e, now); /* the reads ahead land either way */
	return allm_err_set(err, -ENOMEM, "out of memory");
}
