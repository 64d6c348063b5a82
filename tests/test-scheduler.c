/* Description: the engine scheduler on a fake clock: Alg. 1 victim order (fair: lowest priority first; fcfs: newest first), swap-vs-recompute per policy and predicted cost, Alg. 2 group choice (mean priority, ties to swapped), fcfs swapped-first, no starvation under fair, cached prompts first within the aging bound. */
#include "engine-fixture.h"

static const int32_t w_prompt[10] = {5, 9, 13, 17, 21, 25, 29, 33, 37, 40};
static const double w_age[10] = {0, 13, 2, 27, 5, 8, 31, 1, 19, 4};

static void submit_workload(struct fx *f, int32_t max_tokens)
{
	for (int i = 0; i < 10; i++)
		fx_submit(f, w_prompt[i], max_tokens, f->now - w_age[i], (uint64_t)i + 1);
}

/* 1. Alg. 1 victim order, under growth and under a GPU shrink that needs several
 * victims in one step. The fixture checks each victim against the requests left
 * running at the moment it is chosen. */
static void test_victim_order(enum allm_sched_mode sched)
{
	const char *name = sched == ALLM_SCHED_FAIR ? "fair" : "fcfs";
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 40, .cpu_blocks = 400,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = sched, .pred = FX_PRED_SWAP_CHEAP};
	struct allm_err err = {{0}};
	if (fx_init(&f, &o))
		return;
	submit_workload(&f, 30);
	int64_t before_shrink = 0;
	for (int s = 0; s < 3000 && !fx_idle(&f); s++) {
		if (f.step == 12) {
			before_shrink = f.n_dec;
			CHECK(allm_engine_set_gpu_blocks(f.e, 20, &err) == 0, "%s", err.msg);
			int n0 = f.n_dec;
			fx_step(&f);
			CHECK(f.n_dec - n0 >= 2, "%s: the shrink to 20 blocks preempted %d requests", name,
			      f.n_dec - n0);
			continue;
		}
		if (f.step == 40)
			CHECK(allm_engine_set_gpu_blocks(f.e, 40, &err) == 0, "%s", err.msg);
		fx_step(&f);
	}
	fx_check_end(&f, name);
	CHECK(before_shrink >= 1, "%s: growth alone never preempted", name);
	CHECK(f.n_dec >= 6, "%s: only %d preemptions", name, f.n_dec);
	CHECK(f.max_victims_per_step >= 2, "%s: never more than one victim per step", name);

	/* the decision log agrees with what the events said, in order */
	struct allm_decision *log = calloc((size_t)f.n_dec + 1, sizeof(*log));
	int n = allm_engine_decisions(f.e, 0, log, f.n_dec + 1);
	CHECK(n == f.n_dec, "%s: log has %d decisions, events %d", name, n, f.n_dec);
	for (int i = 0; i < n && i < f.n_dec; i++) {
		CHECK(log[i].seq_no == i && log[i].req_id == f.dec[i].d.req_id &&
			      log[i].choice == f.dec[i].d.choice && log[i].priority == f.dec[i].d.priority,
		      "%s: log entry %d differs from its event", name, i);
		CHECK(isfinite(log[i].measured_s), "%s: log entry %d never measured", name, i);
		if (i > 0 && log[i].time == log[i - 1].time) {
			if (sched == ALLM_SCHED_FAIR)
				CHECK(log[i - 1].priority <= log[i].priority, "fair: log %d pri %g > next %g", i,
				      log[i - 1].priority, log[i].priority);
			else
				CHECK(f.req[log[i - 1].tag].arrival >= f.req[log[i].tag].arrival,
				      "fcfs: log %d older than the next victim", i);
		}
	}
	free(log);
	printf("victim order %-4s: %d preemptions (%lld swap, %lld recompute), up to %d in one step, "
	       "%lld steps\n",
	       name, f.n_dec, (long long)f.n_swap_choice, (long long)f.n_rc_choice,
	       f.max_victims_per_step, (long long)f.step);
	fx_fini(&f);
}

/* 2. Swap vs recompute. The fixture checks every decision against the policy
 * table; here each scenario must also show the cases it is about. */
struct t2_result {
	int n_dec;
	int64_t swaps, recomputes, full;
};

static struct t2_result run_policy(enum allm_preempt_mode mode, enum fx_pred pred,
				   int32_t cpu_blocks)
{
	struct fx f;
	struct t2_result res = {0};
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 32, .cpu_blocks = cpu_blocks,
			    .preempt = mode, .sched = ALLM_SCHED_FAIR, .pred = pred};
	if (fx_init(&f, &o))
		return res;
	submit_workload(&f, 30);
	CHECK(fx_drain(&f, 3000), "%s: not drained", allm_preempt_name(mode));
	fx_check_end(&f, allm_preempt_name(mode));
	struct allm_engine_stats st;
	allm_engine_get_stats(f.e, &st);
	CHECK(st.preempt_swap == f.n_swap_choice && st.preempt_recompute == f.n_rc_choice,
	      "stats say %lld swap %lld recompute, events %lld/%lld", (long long)st.preempt_swap,
	      (long long)st.preempt_recompute, (long long)f.n_swap_choice, (long long)f.n_rc_choice);
	if (f.n_swap_choice)
		CHECK(st.swap_out_bytes > 0 && st.swap_in_bytes == st.swap_out_bytes,
		      "swap bytes out %lld in %lld", (long long)st.swap_out_bytes,
		      (long long)st.swap_in_bytes);
	if (f.n_rc_choice)
		CHECK(st.recompute_tokens > 0, "no recompute tokens after %lld recomputes",
		      (long long)f.n_rc_choice);
	for (int i = 0; i < f.n_dec; i++)
		CHECK(f.dec[i].measured && f.dec[i].d.measured_s >= 0, "decision %d not measured", i);
	res.n_dec = f.n_dec;
	res.swaps = f.n_swap_choice;
	res.recomputes = f.n_rc_choice;
	res.full = f.n_reason_full;
	printf("policy %-9s pred %-10s cpu %3d: %d preemptions, %lld swap, %lld recompute (%lld with "
	       "the CPU pool full)\n",
	       allm_preempt_name(mode),
	       pred == FX_PRED_SWAP_CHEAP ? "swap<rc" : pred == FX_PRED_RC_CHEAP ? "rc<swap" : "crossover",
	       cpu_blocks, f.n_dec, (long long)f.n_swap_choice, (long long)f.n_rc_choice,
	       (long long)f.n_reason_full);
	fx_fini(&f);
	return res;
}

static void test_swap_vs_recompute(void)
{
	struct t2_result r;
	/* swap predicted cheaper, small CPU pool: swaps, then recomputes once full */
	r = run_policy(ALLM_PREEMPT_ADAPTIVE, FX_PRED_SWAP_CHEAP, 12);
	CHECK(r.swaps > 0 && r.full > 0 && r.recomputes == r.full,
	      "adaptive/swap cheaper: %lld swap, %lld full, %lld recompute", (long long)r.swaps,
	      (long long)r.full, (long long)r.recomputes);
	/* ... and a CPU pool big enough for everything: swaps only */
	r = run_policy(ALLM_PREEMPT_ADAPTIVE, FX_PRED_SWAP_CHEAP, 400);
	CHECK(r.swaps > 0 && r.recomputes == 0, "adaptive/swap cheaper/big CPU: %lld recompute",
	      (long long)r.recomputes);
	/* recompute predicted cheaper: recomputes, though the CPU pool has room */
	r = run_policy(ALLM_PREEMPT_ADAPTIVE, FX_PRED_RC_CHEAP, 400);
	CHECK(r.n_dec > 0 && r.swaps == 0, "adaptive/recompute cheaper: %lld swaps", (long long)r.swaps);
	/* policy recompute never swaps, even when swapping is predicted cheaper */
	r = run_policy(ALLM_PREEMPT_RECOMPUTE, FX_PRED_SWAP_CHEAP, 400);
	CHECK(r.n_dec > 0 && r.swaps == 0, "recompute policy: %lld swaps", (long long)r.swaps);
	/* policy swap swaps although recompute is predicted cheaper, and falls back to
	 * recompute (never aborts: fx_check_end) when the CPU pool is full */
	r = run_policy(ALLM_PREEMPT_SWAP, FX_PRED_RC_CHEAP, 12);
	CHECK(r.swaps > 0 && r.full > 0 && r.recomputes == r.full,
	      "swap policy: %lld swap, %lld full, %lld recompute", (long long)r.swaps, (long long)r.full,
	      (long long)r.recomputes);
	/* policy swap with no CPU pool at all: recomputes only, nothing fails */
	r = run_policy(ALLM_PREEMPT_SWAP, FX_PRED_SWAP_CHEAP, 0);
	CHECK(r.n_dec > 0 && r.swaps == 0 && r.full == r.recomputes, "swap policy, no CPU pool");
	/* costs that depend on the length: adaptive picks both kinds */
	r = run_policy(ALLM_PREEMPT_ADAPTIVE, FX_PRED_CROSSOVER, 400);
	CHECK(r.swaps > 0 && r.recomputes > 0, "adaptive/crossover: %lld swap, %lld recompute",
	      (long long)r.swaps, (long long)r.recomputes);
}

/* 3. Alg. 2. Builds a state with swapped requests, makes every candidate fit (a
 * big GPU pool), adds waiting requests whose priorities are set through their
 * arrival times, and checks which group the next step admits. */
enum t3_case { T3_WAITING_WINS, T3_SWAPPED_WINS, T3_TIE };

static void test_alg2_case(enum t3_case c)
{
	static const char *names[] = {"waiting mean higher", "swapped mean higher", "tie"};
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 16, .cpu_blocks = 400,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP};
	struct allm_err err = {{0}};
	const struct allm_request *sw[64];
	if (fx_init(&f, &o))
		return;
	for (int i = 0; i < 4; i++)
		fx_submit(&f, 6 + 2 * i, 40, f.now - 3 * i, (uint64_t)100 + i);
	int ns = 0;
	for (int s = 0; s < 300; s++) {
		struct allm_engine_stats st;
		allm_engine_get_stats(f.e, &st);
		if (st.swapped >= (c == T3_TIE ? 1 : 2) && st.waiting == 0)
			break;
		fx_step(&f);
	}
	ns = allm_engine_list(f.e, ALLM_REQ_SWAPPED, sw, 64);
	CHECK(ns >= (c == T3_TIE ? 1 : 2), "%s: no state with swapped requests (%d)", names[c], ns);
	if (ns < 1) {
		fx_fini(&f);
		return;
	}
	CHECK(allm_engine_set_gpu_blocks(f.e, 512, &err) == 0, "%s", err.msg);
	double now = f.now; /* the next step's clock */
	double sum = 0, mx = -INFINITY;
	for (int i = 0; i < ns; i++) {
		double p = fx_pri(now, f.req[sw[i]->tag].arrival, sw[i]->seq.n_tokens);
		sum += p;
		mx = fmax(mx, p);
	}
	double mean_s = sum / ns;
	int first_w = f.n_req, n_w = 0;
	if (c == T3_WAITING_WINS) {
		/* two waiting requests, each below the most urgent swapped one when the
		 * swapped ones differ, but above the swapped mean */
		double p = mx > mean_s ? 0.5 * (mean_s + mx) : mean_s * 1.5;
		for (int i = 0; i < 2; i++, n_w++)
			fx_submit(&f, 8, 10, now - p * 8, (uint64_t)200 + i);
	} else if (c == T3_SWAPPED_WINS) {
		/* one waiting request more urgent than every swapped one, diluted by fresh
		 * ones (priority 0) below the swapped mean */
		double p = mx * 1.5;
		fx_submit(&f, 8, 10, now - p * 8, 300);
		n_w++;
		int k = (int)ceil(p / mean_s) + 1;
		for (int i = 0; i < k; i++, n_w++)
			fx_submit(&f, 8, 10, now, (uint64_t)301 + i);
	} else {
		/* copies of the swapped requests: same length, same arrival, same priorities */
		for (int i = 0; i < ns; i++, n_w++)
			fx_submit_ids(&f, sw[i]->seq.tokens, sw[i]->seq.n_tokens, 10,
				      f.req[sw[i]->tag].arrival);
	}
	double wsum = 0;
	for (int i = first_w; i < f.n_req; i++)
		wsum += fx_pri(now, f.req[i].arrival, f.req[i].n_prompt);
	double mean_w = wsum / n_w;
	bool expect_waiting = mean_w > mean_s;
	CHECK(expect_waiting == (c == T3_WAITING_WINS), "%s: set-up gave means %g (waiting) %g (swapped)",
	      names[c], mean_w, mean_s);
	if (c == T3_TIE)
		CHECK(mean_w == mean_s, "tie: %.17g vs %.17g", mean_w, mean_s);

	struct allm_engine_stats st0, st1;
	allm_engine_get_stats(f.e, &st0);
	int running_tags[64], nr = 0;
	const struct allm_request *run[64];
	int n_run = allm_engine_list(f.e, ALLM_REQ_RUNNING, run, 64);
	for (int i = 0; i < n_run; i++)
		running_tags[nr++] = (int)run[i]->tag;
	int swapped_tags[64];
	for (int i = 0; i < ns; i++)
		swapped_tags[i] = (int)sw[i]->tag;
	int32_t gen0[128];
	for (int i = 0; i < f.n_req && i < 128; i++)
		gen0[i] = f.req[i].n_gen;
	fx_step(&f);
	allm_engine_get_stats(f.e, &st1);
	if (expect_waiting) {
		CHECK(st1.prefill_steps == st0.prefill_steps + 1, "%s: no prefill", names[c]);
		CHECK(st1.swapped == ns, "%s: %d swapped after, %d before", names[c], st1.swapped, ns);
		for (int i = first_w; i < f.n_req; i++)
			CHECK(f.req[i].post_state == ALLM_REQ_RUNNING && f.req[i].n_gen == 1,
			      "%s: waiting request %d not prefilled", names[c], i);
		for (int i = 0; i < nr; i++)
			CHECK(f.req[running_tags[i]].n_gen == gen0[running_tags[i]],
			      "%s: running request %d decoded in a prefill step", names[c], running_tags[i]);
	} else {
		CHECK(st1.prefill_steps == st0.prefill_steps, "%s: prefilled", names[c]);
		CHECK(st1.swapped == 0 && st1.waiting == n_w, "%s: swapped %d waiting %d", names[c],
		      st1.swapped, st1.waiting);
		for (int i = 0; i < ns; i++)
			CHECK(f.req[swapped_tags[i]].post_state == ALLM_REQ_RUNNING &&
				      f.req[swapped_tags[i]].n_gen == gen0[swapped_tags[i]] + 1,
			      "%s: swapped request %d not resumed", names[c], swapped_tags[i]);
		for (int i = first_w; i < f.n_req; i++)
			CHECK(f.req[i].n_gen == 0, "%s: waiting request %d ran", names[c], i);
	}
	CHECK(fx_drain(&f, 3000), "%s: not drained", names[c]);
	fx_check_end(&f, names[c]);
	printf("alg2 %-19s: %d swapped (mean pri %.4f, max %.4f) vs %d waiting (mean %.4f): %s "
	       "admitted\n",
	       names[c], ns, mean_s, mx, n_w, mean_w, expect_waiting ? "waiting" : "swapped");
	fx_fini(&f);
}

/* fcfs: with swapped requests, old waiting ones wait; the oldest swapped request
 * comes back first when only one fits; the fixture checks that no fcfs step
 * prefills while anything is swapped. */
static void test_alg2_fcfs(void)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 16, .cpu_blocks = 400,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FCFS,
			    .pred = FX_PRED_SWAP_CHEAP};
	struct allm_err err = {{0}};
	const struct allm_request *sw[64], *run[64];
	if (fx_init(&f, &o))
		return;
	for (int i = 0; i < 4; i++)
		fx_submit(&f, 6 + 2 * i, 40, f.now - 3 * i, (uint64_t)100 + i);
	for (int s = 0; s < 300; s++) {
		struct allm_engine_stats st;
		allm_engine_get_stats(f.e, &st);
		if (st.swapped >= 2 && st.waiting == 0)
			break;
		fx_step(&f);
	}
	int ns = allm_engine_list(f.e, ALLM_REQ_SWAPPED, sw, 64);
	CHECK(ns >= 2, "fcfs: no state with 2 swapped requests");
	if (ns < 2) {
		fx_fini(&f);
		return;
	}
	/* the oldest swapped request */
	int oldest = (int)sw[0]->tag;
	for (int i = 1; i < ns; i++)
		if (f.req[sw[i]->tag].arrival < f.req[oldest].arrival)
			oldest = (int)sw[i]->tag;
	/* waiting requests older than everything (fcfs would pick them first if it
	 * looked at waiting at all) */
	int w0 = f.n_req;
	for (int i = 0; i < 3; i++)
		fx_submit(&f, 5, 10, 1.0 + i, (uint64_t)400 + i);
	CHECK(allm_engine_set_gpu_blocks(f.e, 512, &err) == 0, "%s", err.msg);
	int n_run = allm_engine_list(f.e, ALLM_REQ_RUNNING, run, 64);
	CHECK(allm_engine_set_limits(f.e, n_run + 1, 4096, &err) == 0, "%s", err.msg);
	fx_step(&f);
	CHECK(f.req[oldest].post_state == ALLM_REQ_RUNNING, "fcfs: oldest swapped request not resumed");
	for (int i = w0; i < f.n_req; i++)
		CHECK(f.req[i].post_state == ALLM_REQ_WAITING, "fcfs: waiting request %d ran", i);
	CHECK(allm_engine_set_limits(f.e, 64, 4096, &err) == 0, "%s", err.msg);
	/* next: the rest of the swapped ones, then the waiting ones, oldest first */
	int64_t step_w = -1;
	for (int s = 0; s < 3000 && !fx_idle(&f); s++) {
		struct allm_engine_stats st;
		allm_engine_get_stats(f.e, &st);
		fx_step(&f);
		if (step_w < 0 && f.req[w0].n_gen > 0) {
			step_w = f.step;
			CHECK(st.swapped == 0, "fcfs: prefilled with %d swapped", st.swapped);
		}
	}
	fx_check_end(&f, "fcfs");
	CHECK(f.n_steps_both_queues >= 1, "fcfs: never had swapped and waiting requests together");
	printf("alg2 fcfs: oldest swapped request resumed first; waiting ones prefilled at step %lld "
	       "once nothing was swapped (%lld steps began with both queues non-empty)\n",
	       (long long)step_w, (long long)f.n_steps_both_queues);
	fx_fini(&f);
}

/* 4. No starvation: one long request (60 + 60 tokens) submitted first, then a short
 * one (4..8 + 6..8 tokens) arriving every step for STREAM_STEPS steps; 64 GPU
 * blocks of 4 tokens, 16 CPU blocks (too few to swap the long one out once it has
 * grown). The load is sustainable (short requests get their first token within a
 * few steps), so any wait that grows with the stream is starvation.
 * Bounds, in steps from arrival to the last token, under fair:
 *  - long request: LONG_BOUND = 250. It needs 60 decodes; with a prefill step
 *    between decodes at worst that is 120 steps, plus re-prefills after
 *    preemptions. It must also finish while the stream is still running
 *    (finish < STREAM_STEPS), i.e. it is not merely served once the stream stops.
 *  - short requests: SHORT_BOUND = 60 (at most 8 decodes, but a decode step only
 *    comes when no new prompt fits, so they wait for the pool to fill).
 * fcfs runs the same workload for comparison (reported, not bounded). */
enum { STREAM_STEPS = 600, LONG_BOUND = 250, SHORT_BOUND = 60 };

static void test_starvation(enum allm_sched_mode sched, enum allm_preempt_mode mode)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 64, .cpu_blocks = 16,
			    .preempt = mode, .sched = sched, .pred = FX_PRED_SWAP_CHEAP};
	if (fx_init(&f, &o))
		return;
	int long_tag = fx_submit(&f, 60, 60, 0, 7);
	for (int s = 0; s < 5000 && (f.step < STREAM_STEPS || !fx_idle(&f)); s++) {
		if (f.step < STREAM_STEPS)
			fx_submit(&f, 4 + (int)(f.step % 5), 6 + (int)(f.step % 3), 0, (uint64_t)f.step + 1000);
		fx_step(&f);
	}
	CHECK(fx_idle(&f), "starvation: not drained");
	fx_check_end(&f, "starvation");
	int64_t max_short = 0, max_first = 0;
	int worst = -1;
	for (int i = 0; i < f.n_req; i++) {
		const struct fx_req *q = &f.req[i];
		if (!q->done)
			continue;
		max_first = ALLM_MAX(max_first, q->first_token_step - q->submit_step);
		int64_t w = q->finish_step - q->submit_step;
		if (i != long_tag && w > max_short) {
			max_short = w;
			worst = i;
		}
	}
	const struct fx_req *lq = &f.req[long_tag];
	int64_t long_wait = lq->done ? lq->finish_step - lq->submit_step : -1;
	const char *name = allm_preempt_name(mode);
	if (sched == ALLM_SCHED_FAIR) {
		CHECK(lq->done && long_wait <= LONG_BOUND && lq->finish_step < STREAM_STEPS,
		      "fair/%s: the long request took %lld steps (bound %d, stream of %d)", name,
		      (long long)long_wait, LONG_BOUND, STREAM_STEPS);
		CHECK(max_short <= SHORT_BOUND, "fair/%s: short request %d took %lld steps (bound %d)",
		      name, worst, (long long)max_short, SHORT_BOUND);
	}
	printf("starvation %s/%-9s: %d requests over %lld steps; long request finished %lld steps "
	       "after arrival (%d swaps, %d recomputes); short requests: max %lld steps to finish, "
	       "max %lld to first token\n",
	       sched == ALLM_SCHED_FAIR ? "fair" : "fcfs", name, f.n_req, (long long)f.step,
	       (long long)long_wait, lq->n_swap, lq->n_recompute, (long long)max_short,
	       (long long)max_first);
	fx_fini(&f);
}

/* 6. Cached work first, within fairness (DESIGN §6): a waiting prompt ranks by
 * the part of it the prefix cache does not hold, so one whose prefix is cached
 * goes ahead of a cold one of the same length and age (without the cache, or
 * with a cache that holds nothing of it, the older id goes first); and a
 * stream of cached prompts, each outranking it, holds a cold prompt no longer
 * than its aging bound (without aging the same stream holds it far longer). */
static int run_pair(bool prefix, bool share, int32_t *ret_order)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 64, .cpu_blocks = 16, .max_num_seqs = 1,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP, .prefix_caching = prefix};
	if (fx_init(&f, &o))
		return -1;
	int32_t seen[40], cold[40], vocab = f.m->cfg.vocab_size;
	fx_prompt(seen, 40, 11, vocab);
	fx_prompt(cold, 40, 12, vocab);
	fx_submit_ids(&f, seen, 40, 2, 0);
	CHECK(fx_drain(&f, 200), "pair: the first request never finished");
	/* the cold one first (older id), then one sharing 36 tokens with the one
	 * that ran (or, share = false, none), both 10 s old */
	int c = fx_submit_ids(&f, cold, 40, 2, f.now - 10);
	if (!share)
		seen[0] ^= 1;
	seen[39] ^= 1;
	int w = fx_submit_ids(&f, seen, 40, 2, f.now - 10);
	CHECK(fx_drain(&f, 200), "pair: not drained");
	fx_check_end(&f, "pair");
	*ret_order = f.req[w].first_token_step < f.req[c].first_token_step ? 1 : 0;
	fx_fini(&f);
	return 0;
}

/* Steps from a cold 60-token prompt's arrival to its first token, under a
 * stream of prompts that share a cached 36-token prefix, one every 3 steps
 * (two slots serve them as they come: no one ages but the cold one). */
static int64_t cold_wait(double max_wait_factor)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 64, .cpu_blocks = 16, .max_num_seqs = 2,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP, .prefix_caching = true,
			    .max_wait_factor = max_wait_factor};
	if (fx_init(&f, &o))
		return -1;
	int32_t ids[40], vocab = f.m->cfg.vocab_size;
	fx_prompt(ids, 40, 21, vocab);
	fx_submit_ids(&f, ids, 40, 1, 0);
	fx_drain(&f, 200);
	int cold = -1;
	for (int s = 0; s < 3000 && (f.step < 400 || !fx_idle(&f)); s++) {
		if (f.step == 50) /* into a queue of cached prompts */
			cold = fx_submit(&f, 60, 4, 0, 99);
		if (f.step < 400 && f.step % 3 == 0) { /* the two slots keep up */
			ids[39] = (int32_t)(f.step % vocab);
			fx_submit_ids(&f, ids, 40, 8, 0);
		}
		fx_step(&f);
	}
	fx_check_end(&f, "cold under cached");
	const struct fx_req *q = &f.req[cold];
	int64_t wait = cold >= 0 && q->first_token_step >= 0 ? q->first_token_step - q->submit_step : INT64_MAX;
	fx_fini(&f);
	return wait;
}

static void test_prefix_admission(void)
{
	int32_t order[3] = {-1, -1, -1};
	if (run_pair(true, true, &order[0]) || run_pair(false, true, &order[1]) ||
	    run_pair(true, false, &order[2]))
		return;
	CHECK(order[0] == 1, "fair: a prompt with 36 of 40 tokens cached did not go before a cold one");
	CHECK(order[1] == 0, "fair without a cache: the younger id went first");
	CHECK(order[2] == 0, "fair: a prompt sharing nothing cached went before an older one");
	/* aging: F x the cold one's service (one prefill + 4 decodes = 5 steps) */
	const double factor = 8;
	int64_t bound = (int64_t)(factor * 5) + 10, aged = cold_wait(factor), free_run = cold_wait(0);
	CHECK(aged <= bound, "fair: a cold prompt waited %lld steps under cached ones (aging bound %lld)",
	      (long long)aged, (long long)bound);
	CHECK(free_run > 2 * bound, "fair without aging: the cached stream held the cold prompt only %lld "
	      "steps (the workload no longer tests the bound)", (long long)free_run);
	printf("cached first: cold prompt's wait %lld steps with aging (bound %lld), %lld without\n",
	       (long long)aged, (long long)bound, (long long)free_run);
}

int main(void)
{
	if (fx_global_init())
		return 1;
	test_victim_order(ALLM_SCHED_FAIR);
	test_victim_order(ALLM_SCHED_FCFS);
	test_swap_vs_recompute();
	test_alg2_case(T3_WAITING_WINS);
	test_alg2_case(T3_SWAPPED_WINS);
	test_alg2_case(T3_TIE);
	test_alg2_fcfs();
	test_starvation(ALLM_SCHED_FAIR, ALLM_PREEMPT_ADAPTIVE);
	test_starvation(ALLM_SCHED_FAIR, ALLM_PREEMPT_RECOMPUTE);
	test_starvation(ALLM_SCHED_FAIR, ALLM_PREEMPT_SWAP);
	test_starvation(ALLM_SCHED_FCFS, ALLM_PREEMPT_ADAPTIVE);
	test_prefix_admission();
	fx_global_fini();
	if (fx_failures) {
		fprintf(stderr, "%d check(s) failed\n", fx_failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
