/* Description: the SLO buffer and phase-aware placement of elastic memory (issue 52), on the CPU backend with stories260K under a --memory-budget tight enough that prefill chunks run short of scratch. The SLO buffer: a TPOT target every step misses halves it window by window down to a block (each move a pool decision with what was observed over the target, the steps' prompt tokens within it), then, set live, a TTFT target every prompt misses doubles it back to max_num_batched_tokens; under the swap policy, on a clock of ticks so that its schedule is the same at any load, prefills swapped out mid-way come back with chunks within the buffer and the scratch (no step over the budget); targets no step misses move nothing and, without elastic memory, change no output, step or preemption. Phase-aware placement: under the swap policy decoding requests are swapped to the host so that a prefill's chunk gets its scratch (decisions with reason "phase", their predicted chunk cost and their measured round trip once the KV is back), and the generated ids are bit-identical with it on and off under the adaptive, swap and recompute policies, the pool's invariants holding after every step. */
#include "engine-calib.h"
#include "engine.h"
#include "executor.h"
#include "predictor.h"
#include "runtime.h"
#include "test-check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_REQ = 16, EVERY = 3, MAX_POOL = 256, MAX_DEC = 512 };

struct run_cfg {
	double budget; /* GiB; 0: no --memory-budget */
	enum allm_preempt_mode pm;
	bool phase;
	double ttft_ms, tpot_ms;
	int switch_at; /* > 0: at that step the SLOs become (switch_ttft_ms, 0) */
	double switch_ttft_ms;
	bool ticks; /* the engine's clock: a tick per reading (the schedule follows no wall clock) */
};

struct result {
	uint64_t hash[N_REQ];
	int32_t n[N_REQ];
	int done;
	int64_t steps;
	struct allm_engine_stats st;
	struct allm_pool_decision pool[MAX_POOL];
	int n_pool;
	struct allm_decision dec[MAX_DEC]; /* the phase decisions, measured */
	int n_dec, n_phase_taken;
	int64_t most_prompt_over; /* a step's prompt tokens past the buffer (most) */
};

static void on_finish(void *user, const struct allm_result *res)
{
	struct result *o = user;
	uint64_t h = 1469598103934665603ull;
	for (int32_t i = 0; i < res->n_generated; i++)
		h = (h ^ (uint32_t)res->generated[i]) * 1099511628211ull;
	o->hash[res->tag] = h;
	o->n[res->tag] = res->n_generated;
	o->done++;
}

static void on_pool(void *user, const struct allm_pool_decision *d)
{
	struct result *o = user;
	if ((d->reason == ALLM_POOL_SLO_TPOT || d->reason == ALLM_POOL_SLO_TTFT) && o->n_pool < MAX_POOL)
		o->pool[o->n_pool++] = *d;
}

static bool phase_reason(enum allm_reason r)
{
	return r == ALLM_REASON_PHASE_SWAP_CHEAPER || r == ALLM_REASON_PHASE_SWAP_POLICY;
}

static void on_decision(void *user, const struct allm_decision *d, bool measured)
{
	struct result *o = user;
	if (!phase_reason(d->reason))
		return;
	if (!measured)
		o->n_phase_taken++;
	else if (o->n_dec < MAX_DEC)
		o->dec[o->n_dec++] = *d;
}

static double tick(void *user)
{
	return (double)(*(int64_t *)user += 1) * 1e-4;
}

static void opts(struct allm_engine_opts *o, const struct run_cfg *c)
{
	allm_engine_opts_default(o);
	o->device = "cpu";
	o->threads = 1;
	o->memory_budget_gib = c->budget;
	o->elastic_memory = c->budget > 0;
	o->max_num_batched_tokens = 128;
	o->max_num_seqs = 64;
	o->swap_space_gib = 0.0625;
	o->preempt = c->pm;
	o->phase_placement = c->phase;
	o->slo_ttft_ms = c->ttft_ms;
	o->slo_tpot_ms = c->tpot_ms;
}

/* The budget: the weights, activations for a 64-token step, and `blocks` KV
 * blocks: a 128-token chunk is short of scratch while the batch decodes. */
static double budget_for(int32_t blocks)
{
	struct allm_engine_opts o;
	struct allm_runtime *rt;
	struct allm_err err = {{0}};
	struct run_cfg c = {.budget = 1};
	opts(&o, &c);
	if (allm_runtime_open(&o, 0, NULL, NULL, &rt, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	double b = (double)rt->model->arena_bytes + (double)allm_executor_scratch_bytes(&rt->model->cfg, 64) +
		   ((double)blocks + 0.5) * (double)rt->kv->block_bytes;
	allm_runtime_close(rt);
	return b / 1073741824.0;
}

/* N_REQ greedy requests, long prompts, one every EVERY steps. */
static void run(const struct run_cfg *c, struct result *res)
{
	struct allm_engine_opts o;
	struct allm_runtime *rt;
	struct allm_predictor_key key;
	struct allm_predictor *pred;
	struct allm_engine *e;
	struct allm_err err = {{0}};
	memset(res, 0, sizeof(*res));
	opts(&o, c);
	if (allm_runtime_open(&o, 0, NULL, NULL, &rt, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	struct allm_engine_config ec;
	allm_engine_config_from_opts(&o, &ec);
	int64_t ticks = 0;
	if (c->ticks)
		ec.clock = tick, ec.clock_user = &ticks;
	struct allm_engine_events ev = {.user = res, .on_finish = on_finish, .on_pool = on_pool,
					.on_decision = on_decision};
	allm_engine_predictor_key(rt->model, rt->kv, &key);
	if (allm_predictor_create(&key, &pred) || allm_engine_create(rt->model, rt->kv, pred, &ec, &ev, &e, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	uint64_t rng = 0x7654321ull;
	int submitted = 0;
	for (int step = 0; res->done < N_REQ; step++) {
		if (submitted < N_REQ && step % EVERY == 0) {
			int32_t prompt[200];
			int32_t n = 100 + (int32_t)(rng % 90);
			for (int32_t i = 0; i < n; i++) {
				rng = rng * 6364136223846793005ull + 1442695040888963407ull;
				prompt[i] = 1 + (int32_t)((rng >> 33) % (uint64_t)(rt->model->cfg.vocab_size - 1));
			}
			struct allm_submit s = {.prompt = prompt, .n_prompt = n, .tag = (uint64_t)submitted};
			allm_params_init(&s.params);
			s.params.temperature = 0;
			s.params.ignore_eos = true;
			s.params.max_tokens = 40 + (int32_t)(rng % 40);
			int64_t id;
			if (allm_engine_submit(e, &s, &id, &err)) {
				fprintf(stderr, "%s\n", err.msg);
				exit(1);
			}
			submitted++;
		}
		if (c->switch_at > 0 && step == c->switch_at) {
			ec = *allm_engine_get_config(e);
			ec.slo_tpot_ms = 0;
			ec.slo_ttft_ms = c->switch_ttft_ms;
			if (allm_engine_set_config(e, &ec, &err)) {
				fprintf(stderr, "set: %s\n", err.msg);
				exit(1);
			}
		}
		struct allm_engine_stats before;
		allm_engine_get_stats(e, &before);
		int tokens = allm_engine_step(e, &err);
		if (tokens < 0) {
			fprintf(stderr, "step: %s\n", err.msg);
			exit(1);
		}
		/* the buffer in force this step bounds its prompt tokens (decode rows:
		 * at most the running and swapped requests before it) */
		if (before.slo_buffer_tokens > 0)
			res->most_prompt_over = ALLM_MAX(res->most_prompt_over,
							 tokens - (int64_t)before.running - before.swapped -
								 before.slo_buffer_tokens);
		res->steps++;
		if (step > 5000) { /* a stuck scheduler: fail, not hang */
			allm_engine_get_stats(e, &before);
			CHECK(0, "step %d: %d done; waiting %d running %d swapped %d; buffer %lld, gpu %d/%d", step,
			      res->done, before.waiting, before.running, before.swapped,
			      (long long)before.slo_buffer_tokens, before.gpu_used, before.gpu_total);
			exit(1);
		}
		CHECK(allm_block_pool_check(&rt->kv->gpu) == 0, "step %d", step);
		CHECK(allm_engine_elastic_check(e, false, &err) == 0, "%s%s%s, step %d: %s", allm_preempt_name(c->pm), c->phase ? " phase" : "", c->tpot_ms > 0 ? " slo" : "", step, err.msg);
	}
	CHECK(allm_engine_idle(e), "requests left");
	allm_engine_get_stats(e, &res->st);
	/* the scratch's pages stay within its share (checked above) only while no
	 * step overruns it */
	CHECK(res->st.over_budget_steps == 0, "%s: %lld steps over budget", allm_preempt_name(c->pm),
	      (long long)res->st.over_budget_steps);
	allm_engine_free(e);
	allm_predictor_free(pred);
	allm_runtime_close(rt);
}

static bool same(const struct result *a, const struct result *b)
{
	for (int i = 0; i < N_REQ; i++)
		if (a->hash[i] != b->hash[i] || a->n[i] != b->n[i])
			return false;
	return true;
}

static void slo_buffer(double budget)
{
	/* TPOT missed by every step (the least target there is), then TTFT */
	struct run_cfg c = {.budget = budget, .pm = ALLM_PREEMPT_ADAPTIVE, .tpot_ms = 0.001, .switch_at = 60,
			    .switch_ttft_ms = 0.001};
	struct result r;
	run(&c, &r);
	int shrinks = 0, grows = 0, i = 0;
	int64_t buf = 128;
	for (; i < r.n_pool && r.pool[i].reason == ALLM_POOL_SLO_TPOT; i++, shrinks++) {
		const struct allm_pool_decision *d = &r.pool[i];
		CHECK(d->inflate && d->buffer_tokens == ALLM_MAX(16, buf / 2), "shrink %d: to %lld from %lld", i,
		      (long long)d->buffer_tokens, (long long)buf);
		CHECK(d->observed_ms > d->target_ms && d->target_ms == 0.001, "shrink %d: %g ms against %g", i,
		      d->observed_ms, d->target_ms);
		buf = d->buffer_tokens;
	}
	CHECK(shrinks == 3 && buf == 16, "TPOT: %d shrinks, to %lld tokens", shrinks, (long long)buf);
	for (; i < r.n_pool && r.pool[i].reason == ALLM_POOL_SLO_TTFT; i++, grows++) {
		const struct allm_pool_decision *d = &r.pool[i];
		CHECK(!d->inflate && d->buffer_tokens == ALLM_MIN(128, buf * 2), "grow %d: to %lld from %lld", i,
		      (long long)d->buffer_tokens, (long long)buf);
		CHECK(d->observed_ms > d->target_ms, "grow %d: %g ms against %g", i, d->observed_ms, d->target_ms);
		buf = d->buffer_tokens;
	}
	CHECK(grows == 3 && buf == 128 && i == r.n_pool, "TTFT: %d grows to %lld tokens; %d decisions", grows,
	      (long long)buf, r.n_pool);
	CHECK(r.st.slo_shrinks == 3 && r.st.slo_grows == 3 && r.st.slo_buffer_tokens == 128,
	      "stats: %lld shrinks, %lld grows, buffer %lld", (long long)r.st.slo_shrinks,
	      (long long)r.st.slo_grows, (long long)r.st.slo_buffer_tokens);
	CHECK(r.most_prompt_over <= 0, "a step carried %lld prompt tokens past the buffer",
	      (long long)r.most_prompt_over);
	printf("SLO buffer: %d shrinks (TPOT), %d grows (TTFT), %lld steps\n", shrinks, grows, (long long)r.steps);

	/* the swap policy on a clock of ticks (the schedule follows no wall
	 * clock, where the adaptive policy's choices above follow measured times):
	 * prefills swapped out mid-way come back, and their chunks stay within
	 * the buffer and the scratch (run's over-budget and elastic checks) */
	struct run_cfg sw = {.budget = budget, .pm = ALLM_PREEMPT_SWAP, .switch_at = 60, .switch_ttft_ms = 0.001,
			      .ticks = true};
	run(&sw, &r);
	CHECK(r.st.preempt_swap > 0 && r.st.slo_buffer_tokens == 128, "swap: %lld swaps, buffer %lld",
	      (long long)r.st.preempt_swap, (long long)r.st.slo_buffer_tokens);
	CHECK(r.most_prompt_over <= 0, "swap: a step carried %lld prompt tokens past the buffer",
	      (long long)r.most_prompt_over);
	printf("SLO buffer, swap policy: %lld swaps, %lld steps\n", (long long)r.st.preempt_swap, (long long)r.steps);

	/* targets nobody misses: nothing moves; without elastic memory (no
	 * reserve) the run is the one without SLOs, step for step */
	struct run_cfg off = {.pm = ALLM_PREEMPT_ADAPTIVE}, met = off;
	met.ttft_ms = met.tpot_ms = 1e7;
	struct result a, b;
	run(&off, &a);
	run(&met, &b);
	CHECK(same(&a, &b) && a.steps == b.steps && a.st.preempt_swap == b.st.preempt_swap &&
		      a.st.preempt_recompute == b.st.preempt_recompute,
	      "met SLOs changed the run: %lld vs %lld steps", (long long)a.steps, (long long)b.steps);
	CHECK(b.n_pool == 0 && b.st.slo_buffer_tokens == 128 && a.st.slo_buffer_tokens == 0,
	      "met SLOs: %d decisions, buffer %lld (off: %lld)", b.n_pool, (long long)b.st.slo_buffer_tokens,
	      (long long)a.st.slo_buffer_tokens);
}

static void phase(double budget)
{
	static const enum allm_preempt_mode pms[] = {ALLM_PREEMPT_ADAPTIVE, ALLM_PREEMPT_SWAP, ALLM_PREEMPT_RECOMPUTE};
	for (size_t p = 0; p < ALLM_ARRAY_SIZE(pms); p++) {
		const char *pn = allm_preempt_name(pms[p]);
		struct run_cfg c = {.budget = budget, .pm = pms[p]};
		struct result off, on;
		run(&c, &off);
		c.phase = true;
		run(&c, &on);
		CHECK(same(&off, &on), "%s: outputs differ with phase-aware placement", pn);
		CHECK(off.st.phase_swaps == 0 && off.n_phase_taken == 0, "%s: phase swaps while off", pn);
		CHECK(on.st.phase_swaps == on.n_phase_taken, "%s: %lld phase swaps, %d decisions", pn,
		      (long long)on.st.phase_swaps, on.n_phase_taken);
		if (pms[p] == ALLM_PREEMPT_RECOMPUTE)
			CHECK(on.n_phase_taken == 0, "recompute: %d phase swaps", on.n_phase_taken);
		if (pms[p] == ALLM_PREEMPT_SWAP) /* the policy takes every one the host has room for */
			CHECK(on.n_phase_taken > 0, "swap: no phase decision taken");
		/* every one taken came back: measured, its round trip priced and the
		 * chunk it saved priced */
		CHECK(on.n_dec == on.n_phase_taken, "%s: %d of %d phase decisions measured", pn, on.n_dec,
		      on.n_phase_taken);
		for (int i = 0; i < on.n_dec; i++) {
			const struct allm_decision *d = &on.dec[i];
			CHECK(d->choice == ALLM_CHOICE_SWAP && isfinite(d->pred_chunk_s) && d->pred_chunk_s > 0 &&
				      d->pred_swap_s > 0 && d->measured_s > 0,
			      "%s: decision %lld: chunk %g s, swap %g s, measured %g s", pn, (long long)d->seq_no,
			      d->pred_chunk_s, d->pred_swap_s, d->measured_s);
			CHECK(pms[p] != ALLM_PREEMPT_ADAPTIVE || d->pred_swap_s < d->pred_chunk_s,
			      "adaptive: swapped at %g s for a chunk of %g s", d->pred_swap_s, d->pred_chunk_s);
		}
		printf("phase placement, %s: %d swaps out for a prefill; deflations %lld off, %lld on; "
		       "steps %lld off, %lld on\n",
		       pn, on.n_phase_taken, (long long)off.st.deflations, (long long)on.st.deflations,
		       (long long)off.steps, (long long)on.steps);
	}
}

int main(void)
{
	double budget = budget_for(30);
	slo_buffer(budget);
	phase(budget);
	if (n_fail)
		fprintf(stderr, "%d n_fail\n", n_fail);
	return n_fail ? 1 : 0;
}
