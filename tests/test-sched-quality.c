/* Description: the scheduler beyond the paper, on a fake clock: fair's admission headroom never admits a request that growth evicts within the headroom (the paper's fair does, and recomputes far more); aging bounds the wait of a long request under sustained overload to max_wait_factor x its service steps, also when long decodes hold every slot (the paper's fair lets it wait past that), and evicts nobody in a burst where everyone waited as long, nor lets an aged request wait on the commitment cap; admission by commitment keeps what the admitted requests would hold at their longest within the device and host blocks, and a burst that makes fair recompute without it recomputes at most a quarter as often; chunked prefill splits a prompt longer than max_num_batched_tokens over steps while the running batch keeps decoding every step, and the recompute predictor learns from those mixed steps. */
#include "engine-fixture.h"

/* --- 1. admission headroom ---------------------------------------------------------- */

struct victim_log {
	int n;
	int young; /* preempted fewer than `window` steps after the last admission */
	int64_t window;
	int64_t last_admit; /* fixture step of the last admission (-1: none yet) */
};

static struct victim_log vlog;

static void headroom_on_decision(void *user, const struct allm_decision *d, bool measured)
{
	struct fx *f = user;
	fx_on_decision(user, d, measured);
	if (measured)
		return;
	vlog.n++;
	if (vlog.last_admit >= 0 && f->step - vlog.last_admit < vlog.window)
		vlog.young++;
}

/* fx_step, noting the step of every admission (waiting or swapped -> running). */
static void headroom_step(struct fx *f)
{
	fx_step(f);
	for (int i = 0; i < f->n_req; i++)
		if (f->req[i].pre_state != ALLM_REQ_RUNNING && f->req[i].pre_state != ALLM_REQ_FINISHED &&
		    (f->req[i].post_state == ALLM_REQ_RUNNING || f->req[i].n_gen > f->req[i].pre_gen))
			vlog.last_admit = f->step - 1;
}

/* burst: long-ish prompts at once on a tight pool (the summary workload in
 * small); else short requests growing while long prompts arrive later, into the
 * blocks the short ones will need. */
static void headroom_run(bool burst, int32_t lookahead, struct allm_engine_stats *ret,
			 struct victim_log *log)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 48, .cpu_blocks = 12,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP, .lookahead = lookahead};
	memset(&vlog, 0, sizeof(vlog));
	vlog.window = lookahead ? lookahead : 4;
	vlog.last_admit = -1;
	if (fx_init(&f, &o))
		return;
	struct allm_engine_events ev = {.user = &f, .on_token = fx_on_token,
					.on_finish = fx_on_finish, .on_decision = headroom_on_decision};
	/* the fixture's engine, re-created with the logging event */
	allm_engine_free(f.e);
	struct allm_err err = {{0}};
	struct allm_engine_config ec = {.max_num_seqs = 16, .max_num_batched_tokens = 4096,
					.preempt = o.preempt, .sched = o.sched,
					.admit_lookahead = lookahead, .clock = fx_clock, .clock_user = &f};
	CHECK(allm_engine_create(f.m, f.kv, f.pred, &ec, &ev, &f.e, &err) == 0, "%s", err.msg);
	if (burst) {
		for (int i = 0; i < 24; i++)
			fx_submit(&f, 10 + (i * 7) % 30, 24, 0, (uint64_t)i + 5);
	} else {
		for (int i = 0; i < 6; i++)
			fx_submit(&f, 8, 40, 0, (uint64_t)i + 5);
		for (int s = 0; s < 60; s++) {
			if (s % 10 == 3)
				fx_submit(&f, 60, 4, 0, (uint64_t)s + 100);
			headroom_step(&f);
		}
	}
	for (int s = 0; s < 5000 && !fx_idle(&f); s++)
		headroom_step(&f);
	CHECK(fx_idle(&f), "lookahead %d: not drained", lookahead);
	fx_check_end(&f, "headroom");
	allm_engine_get_stats(f.e, ret);
	*log = vlog;
	fx_fini(&f);
}

static void test_headroom(void)
{
	struct allm_engine_stats paper, ours;
	struct victim_log lp, lo;
	/* late long prompts: the paper's fair admits each into the blocks the
	 * running batch is about to grow into and evicts it a few steps later */
	headroom_run(false, 0, &paper, &lp);
	headroom_run(false, 4, &ours, &lo);
	printf("headroom, late long prompts: paper fair %d victims (%d within 4 steps of an admission), "
	       "%lld tokens recomputed; headroom 4: %d victims (%d young), %lld tokens\n",
	       lp.n, lp.young, (long long)paper.recompute_tokens, lo.n, lo.young,
	       (long long)ours.recompute_tokens);
	/* the scenario thrashes without headroom, or the check below proves nothing */
	CHECK(lo.young == 0, "headroom 4: %d preemptions within 4 steps of an admission", lo.young);
	/* a burst of long prompts: far fewer tokens prefilled twice */
	headroom_run(true, 0, &paper, &lp);
	headroom_run(true, 4, &ours, &lo);
	printf("headroom, burst: paper fair %d victims, %lld recomputes, %lld tokens recomputed; "
	       "headroom 4: %d victims (%d young), %lld recomputes, %lld tokens\n",
	       lp.n, (long long)paper.preempt_recompute, (long long)paper.recompute_tokens, lo.n,
	       lo.young, (long long)ours.preempt_recompute, (long long)ours.recompute_tokens);
	CHECK(lp.young > 0, "paper fair never preempted right after admitting: the test shows nothing");
	CHECK(lo.young == 0, "headroom 4: %d preemptions within 4 steps of an admission", lo.young);
	CHECK(ours.recompute_tokens * 2 <= paper.recompute_tokens,
	      "headroom recomputed %lld tokens, the paper's fair %lld", (long long)ours.recompute_tokens,
	      (long long)paper.recompute_tokens);
}

/* --- 2. aging ------------------------------------------------------------------------ */

/* Two short prompts arrive every step (more than the batch can serve), each
 * generating short_out tokens, and one long prompt arrives at step 10; returns
 * how many steps it waited for its first token and its service steps. With
 * short_out long and the pool large, long decodes hold every slot of
 * max_num_seqs for longer than the bound: aging must free a slot, not only
 * blocks. */
static void aging_run(double factor, int32_t short_out, int32_t gpu_blocks, double overcommit,
		      int64_t *ret_wait, int64_t *ret_service, int64_t *ret_aged)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = gpu_blocks, .cpu_blocks = 40,
			    .max_num_seqs = 6, .preempt = ALLM_PREEMPT_ADAPTIVE,
			    .sched = ALLM_SCHED_FAIR, .pred = FX_PRED_SWAP_CHEAP,
			    .max_wait_factor = factor, .overcommit = overcommit};
	*ret_wait = *ret_service = -1;
	if (fx_init(&f, &o))
		return;
	int long_tag = -1;
	for (int s = 0; s < 400; s++) {
		fx_submit(&f, 4, short_out, 0, (uint64_t)(2 * s + 1));
		fx_submit(&f, 5, short_out, 0, (uint64_t)(2 * s + 2));
		if (s == 10) {
			long_tag = fx_submit(&f, 40, 6, 0, 999);
			*ret_service = allm_engine_service_steps(f.e, fx_live(&f, long_tag));
		}
		fx_step(&f);
		if (long_tag >= 0 && f.req[long_tag].first_token_step >= 0)
			break;
	}
	struct allm_engine_stats st;
	allm_engine_get_stats(f.e, &st);
	*ret_aged = st.aged;
	if (long_tag >= 0 && f.req[long_tag].first_token_step >= 0)
		*ret_wait = f.req[long_tag].first_token_step - f.req[long_tag].submit_step;
	/* the overload is real: short requests are still queued */
	CHECK(st.waiting > 20, "factor %g: only %d waiting at the end: no overload", factor, st.waiting);
	fx_fini(&f);
}

/* overcommit > 0: admission by commitment too, tight enough that the short
 * requests alone fill it: the aged request must not wait on it. */
static void test_aging(int32_t short_out, int32_t gpu_blocks, double overcommit)
{
	const double F = 3;
	int64_t w_paper, s_paper, w_aged, s_aged, a_paper, a_aged;
	aging_run(0, short_out, gpu_blocks, overcommit, &w_paper, &s_paper, &a_paper);
	aging_run(F, short_out, gpu_blocks, overcommit, &w_aged, &s_aged, &a_aged);
	printf("aging (others generate %d tokens, %d blocks, overcommit %g): a 40-token prompt under "
	       "overload waited %lld steps with the paper's fair, %lld with max_wait_factor %g (its "
	       "service: %lld steps, bound %lld)\n", short_out, gpu_blocks, overcommit,
	       (long long)w_paper, (long long)w_aged, F, (long long)s_aged, (long long)(F * s_aged));
	CHECK(s_aged > 0, "no service steps");
	/* the bound is counted in steps; the request is marked at the start of the
	 * step past it and admitted in that step */
	CHECK(w_aged >= 0 && w_aged <= (int64_t)(F * s_aged) + 1, "waited %lld steps, bound %g x %lld",
	      (long long)w_aged, F, (long long)s_aged);
	CHECK(a_aged >= 1, "nothing was ever aged");
	CHECK(w_paper < 0 || w_paper > (int64_t)(F * s_paper) + 1,
	      "the paper's fair served it within the bound too (%lld steps): the test shows nothing",
	      (long long)w_paper);
	CHECK(a_paper == 0, "aging off, yet %lld requests aged", (long long)a_paper);
}

/* A burst: every request at once, more than max_num_seqs, plenty of blocks, so
 * later waves wait past the bound only because the burst is an overload. The
 * aged requests have waited no longer than the ones running (admitted after
 * long waits of their own), so evicting those would only move the overrun:
 * aging must evict nobody here (fcfs would not either). */
static void test_aging_burst(void)
{
	const double F = 2;
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 200, .cpu_blocks = 40, .max_num_seqs = 4,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP, .max_wait_factor = F};
	if (fx_init(&f, &o))
		return;
	for (int i = 0; i < 40; i++)
		fx_submit(&f, 4 + i % 3, 10, 0, (uint64_t)i + 1);
	CHECK(fx_drain(&f, 2000), "burst: not drained");
	fx_check_end(&f, "aging burst");
	struct allm_engine_stats st;
	allm_engine_get_stats(f.e, &st);
	printf("aging, a burst of 40 at once into 4 slots (bound %g x 11 steps): %lld aged, %lld swaps, "
	       "%lld recomputes, longest wait %.1f x service\n", F, (long long)st.aged,
	       (long long)st.preempt_swap, (long long)st.preempt_recompute, st.max_wait_ratio);
	CHECK(st.aged > 0, "nothing aged: the burst shows nothing");
	CHECK(st.preempt_swap + st.preempt_recompute == 0,
	      "aging evicted %lld requests that had waited as long as the aged ones",
	      (long long)(st.preempt_swap + st.preempt_recompute));
	fx_fini(&f);
}

/* --- 3. admission by commitment ------------------------------------------------------- */

/* A burst of short prompts with long outputs (chatbot) on a tight pool with a
 * small host pool, fair with headroom, admission by commitment at factor F (0:
 * off). Returns the stats and the most blocks the admitted requests (running or
 * swapped) would hold at their longest, over the run, while more than one was
 * admitted. */
static void overcommit_run(double F, struct allm_engine_stats *ret, int64_t *ret_committed)
{
	struct fx f;
	const int32_t BS = 4, OUT = 24;
	struct fx_opts o = {.block_size = BS, .gpu_blocks = 32, .cpu_blocks = 12, .max_num_seqs = 16,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP, .lookahead = 4, .overcommit = F};
	*ret_committed = -1;
	if (fx_init(&f, &o))
		return;
	for (int i = 0; i < 24; i++)
		fx_submit(&f, 3 + i % 4, OUT, 0, (uint64_t)i + 11);
	for (int s = 0; s < 3000 && !fx_idle(&f); s++) {
		fx_step(&f);
		int64_t committed = 0;
		int n = 0;
		for (int i = 0; i < f.n_req; i++)
			if (f.req[i].post_state == ALLM_REQ_RUNNING || f.req[i].post_state == ALLM_REQ_SWAPPED) {
				committed += (f.req[i].n_prompt + f.req[i].max_tokens + BS - 1) / BS;
				n++;
			}
		if (n > 1)
			*ret_committed = ALLM_MAX(*ret_committed, committed);
	}
	CHECK(fx_idle(&f), "overcommit %g: not drained", F);
	fx_check_end(&f, "overcommit");
	allm_engine_get_stats(f.e, ret);
	fx_fini(&f);
}

static void test_overcommit(void)
{
	const int64_t TIERS = 32 + 12;
	struct allm_engine_stats off, on;
	int64_t c_off, c_on;
	overcommit_run(0, &off, &c_off);
	overcommit_run(1, &on, &c_on);
	printf("overcommit, a burst of 24 short prompts (%lld device + host blocks): off %lld swaps, "
	       "%lld recomputes, %lld blocks committed at most; 1.0: %lld swaps, %lld recomputes, %lld "
	       "blocks\n", (long long)TIERS, (long long)off.preempt_swap, (long long)off.preempt_recompute,
	       (long long)c_off, (long long)on.preempt_swap, (long long)on.preempt_recompute, (long long)c_on);
	/* without the cap the burst overflows the host pool, or the test shows nothing */
	CHECK(off.preempt_recompute > 0 && c_off > TIERS, "off: %lld recomputes, %lld committed",
	      (long long)off.preempt_recompute, (long long)c_off);
	CHECK(c_on > 0 && c_on <= TIERS, "1.0: %lld blocks committed, the tiers hold %lld", (long long)c_on,
	      (long long)TIERS);
	/* the tiers' sum holds everyone at their longest, but a victim moves whole:
	 * the host's free blocks can still be one short of the one Alg. 1 picks */
	CHECK(on.preempt_recompute * 4 <= off.preempt_recompute, "1.0: %lld recomputes, off %lld",
	      (long long)on.preempt_recompute, (long long)off.preempt_recompute);
}

/* --- 4. chunked prefill ----------------------------------------------------------------- */

static void test_chunked(void)
{
	struct fx f;
	const int32_t T = 16, LONG = 100, N_DEC = 3;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 200, .cpu_blocks = 0,
			    .max_num_batched_tokens = T, .preempt = ALLM_PREEMPT_ADAPTIVE,
			    .sched = ALLM_SCHED_FAIR, .pred = FX_PRED_SWAP_CHEAP, .chunked = true};
	if (fx_init(&f, &o))
		return;
	for (int i = 0; i < N_DEC; i++)
		fx_submit(&f, 6, 60, 0, (uint64_t)i + 1);
	fx_step(&f); /* their prompts: 18 tokens, two chunks */
	fx_step(&f);
	for (int i = 0; i < N_DEC; i++)
		CHECK(f.req[i].n_gen >= 1, "short request %d: no token after its prefill", i);
	struct allm_predictor_info in0, in1;
	allm_predictor_get_info(f.pred, &in0);
	struct allm_engine_stats st0, st1;
	allm_engine_get_stats(f.e, &st0);
	int lt = fx_submit(&f, LONG, 8, 0, 77);
	int64_t want = (LONG + (T - N_DEC) - 1) / (T - N_DEC); /* chunks of 13 beside 3 decodes */
	int64_t steps = 0;
	while (f.req[lt].n_gen == 0 && steps < 100) {
		int32_t g[3];
		for (int i = 0; i < N_DEC; i++)
			g[i] = f.req[i].n_gen;
		if (f.freeze)
			f.frozen = *f.pred; /* let this test's predictor learn */
		fx_step(&f);
		steps++;
		for (int i = 0; i < N_DEC; i++)
			CHECK(f.req[i].n_gen == g[i] + 1, "step %lld: decode %d got %d tokens while the long "
			      "prompt filled", (long long)steps, i, f.req[i].n_gen - g[i]);
	}
	allm_engine_get_stats(f.e, &st1);
	allm_predictor_get_info(f.pred, &in1);
	printf("chunked: a %d-token prompt with max_num_batched_tokens %d beside %d decodes took %lld "
	       "steps (%lld mixed); %lld prefill observations\n",
	       LONG, T, N_DEC, (long long)steps, (long long)(st1.mixed_steps - st0.mixed_steps),
	       (long long)(in1.n_prefill_obs - in0.n_prefill_obs));
	CHECK(steps == want, "first token after %lld steps, expected %lld", (long long)steps,
	      (long long)want);
	CHECK(st1.mixed_steps - st0.mixed_steps == steps, "%lld mixed steps of %lld",
	      (long long)(st1.mixed_steps - st0.mixed_steps), (long long)steps);
	CHECK(st1.prefill_steps - st1.mixed_steps == st0.prefill_steps - st0.mixed_steps,
	      "a prefill-only step while decodes were running");
	CHECK(in1.n_prefill_obs - in0.n_prefill_obs == steps, "the predictor learned from %lld of %lld "
	      "mixed steps", (long long)(in1.n_prefill_obs - in0.n_prefill_obs), (long long)steps);
	CHECK(fx_drain(&f, 1000), "not drained");
	fx_check_end(&f, "chunked");
	fx_fini(&f);
}

int main(void)
{
	if (fx_global_init())
		return 1;
	test_headroom();
	test_aging(6, 40, 0);    /* short decodes: blocks are what the long prompt lacks */
	test_aging(100, 400, 0); /* long decodes: every slot is held past the bound */
	test_aging(100, 400, 0.36); /* and the commitment cap is full too */
	test_aging_burst();
	test_overcommit();
	test_chunked();
	fx_global_fini();
	if (fx_failures) {
		fprintf(stderr, "%d failure(s)\n", fx_failures);
		return 1;
	}
	printf("all scheduler-quality checks passed\n");
	return 0;
}
