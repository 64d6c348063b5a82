/* Description: with every layer windowed (a Mistral-shaped fixture: window 8, blocks of 8) the KV cache gives back the blocks the window passed: 16 requests generating 96 tokens (12 windows) each hold at most window/block_size + 2 blocks after every step and the pool at most that per running request, against a peak several times higher when every block is kept, and their greedy ids equal those of the run that keeps every block, with plentiful blocks, under swap, recompute and adaptive preemption, prefill in chunks, a disk tier, a pool shrunk mid-run and the prefix cache on and off; pools and block tables agree after every step (passed entries -1, refcounts = holders). */
#include "engine-fixture.h"

enum { N_REQ = 16, MAX_TOKENS = 96, BS = 8, WINDOW = 8 };
/* blocks a request may hold after a step: the window's, one it straddles, the next token's */
enum { BOUND = WINDOW / BS + 2 };

static int32_t ref_gen[N_REQ][MAX_TOKENS];
static int32_t dense_peak, plentiful_peak;

static int32_t make_prompt(const struct fx *f, int i, int32_t *ids)
{
	/* two in three share a 2-block "system prompt" (something for the prefix cache) */
	int32_t len = 5 + (i * 13) % 41, shared = i % 3 ? ALLM_MIN(len - 1, 2 * BS) : 0;
	fx_prompt(ids, shared, 99, f->m->cfg.vocab_size);
	fx_prompt(ids + shared, len - shared, (uint64_t)i + 7, f->m->cfg.vocab_size);
	return len;
}

struct run_cfg {
	const char *name;
	int32_t gpu, cpu, disk;
	enum allm_preempt_mode mode;
	enum allm_sched_mode sched;
	bool chunked;
	bool shrink; /* the GPU pool shrinks under the running batch mid-run, then grows back */
	bool dense; /* keep every block (the reference) */
};

static void run(const struct run_cfg *c, bool prefix)
{
	struct fx f;
	struct allm_err err = {{0}};
	struct fx_opts o = {.block_size = BS, .gpu_blocks = c->gpu, .cpu_blocks = c->cpu, .disk_blocks = c->disk,
			    .preempt = c->mode, .sched = c->sched, .pred = FX_PRED_CROSSOVER, .chunked = c->chunked,
			    .max_num_batched_tokens = c->chunked ? 16 : 0, .prefix_caching = prefix};
	if (fx_init(&f, &o))
		return;
	CHECK(f.kv->window == WINDOW, "%s: the engine set a window of %d, not %d", c->name, f.kv->window, WINDOW);
	if (c->dense)
		f.kv->window = 0; /* nothing goes back: every block held to the end */
	int32_t ids[64], peak = 0, peak_held = 0;
	for (int s = 0; s < 5000 && (f.n_req < N_REQ || !fx_idle(&f)); s++) {
		while (f.n_req < N_REQ && f.n_req < 2 * (f.step + 1))
			fx_submit_ids(&f, ids, make_prompt(&f, f.n_req, ids), MAX_TOKENS, 0);
		if (c->shrink && f.step == 30)
			CHECK(allm_engine_set_gpu_blocks(f.e, 18, &err) == 0, "%s", err.msg);
		if (c->shrink && f.step == 60)
			CHECK(allm_engine_set_gpu_blocks(f.e, c->gpu, &err) == 0, "%s", err.msg);
		fx_step(&f); /* fx_check_pools: the bound per request, tables against pools */
		struct allm_engine_stats st;
		allm_engine_get_stats(f.e, &st);
		int32_t used = allm_block_pool_used(&f.kv->gpu);
		peak = ALLM_MAX(peak, used);
		static const struct allm_request *v[N_REQ];
		int n = allm_engine_list(f.e, ALLM_REQ_RUNNING, v, N_REQ);
		for (int i = 0; i < n; i++)
			peak_held = ALLM_MAX(peak_held, allm_seq_held(&v[i]->seq));
		/* a whole prefill ends in its step, and then its passed blocks are gone */
		if (!c->dense && !c->chunked)
			CHECK(used <= n * BOUND, "%s step %lld: %d blocks used by %d running requests", c->name,
			      (long long)f.step, used, n);
	}
	CHECK(fx_idle(&f) && f.n_req == N_REQ, "%s: not drained", c->name);
	fx_check_end(&f, c->name);
	struct allm_engine_stats st;
	allm_engine_get_stats(f.e, &st);
	for (int i = 0; i < N_REQ; i++) {
		const struct fx_req *q = &f.req[i];
		if (q->n_gen != MAX_TOKENS)
			continue; /* fx_check_end reported it */
		if (c->dense && !prefix) {
			memcpy(ref_gen[i], q->gen, sizeof(ref_gen[i]));
			continue;
		}
		int first = -1;
		for (int k = 0; k < MAX_TOKENS && first < 0; k++)
			if (q->gen[k] != ref_gen[i][k])
				first = k;
		CHECK(first < 0, "%s%s: request %d (prompt %d, %d swaps, %d recomputes) differs at token %d", c->name,
		      prefix ? " +pc" : "", i, q->n_prompt, q->n_swap, q->n_recompute, first);
	}
	if (c->dense) {
		/* the bound is not vacuous: kept, the blocks pile up */
		CHECK(peak_held > 3 * BOUND, "%s: a request held at most %d blocks", c->name, peak_held);
		dense_peak = ALLM_MAX(dense_peak, peak);
	} else {
		CHECK(peak_held <= BOUND || c->chunked, "%s: a request held %d blocks", c->name, peak_held);
		if (c->gpu >= 256)
			plentiful_peak = ALLM_MAX(plentiful_peak, peak);
		CHECK(st.preempt_swap + st.preempt_disk + st.preempt_recompute == 0 || c->gpu < 256,
		      "%s: preempted with plentiful blocks", c->name);
	}
	if (c->mode == ALLM_PREEMPT_SWAP && c->gpu < 256 && !c->disk)
		CHECK(st.preempt_swap > 0, "%s: no swap", c->name);
	if (c->mode == ALLM_PREEMPT_RECOMPUTE && c->gpu < 256)
		CHECK(st.preempt_recompute > 0 && st.preempt_swap == 0, "%s: %lld recompute, %lld swap", c->name,
		      (long long)st.preempt_recompute, (long long)st.preempt_swap);
	if (c->disk)
		CHECK(st.preempt_disk > 0, "%s: no disk swap", c->name);
	printf("%-24s%s %3lld steps: peak %3d blocks used, %2d held by one request; %2lld swap, %2lld disk, "
	       "%2lld recompute preemptions; cached %lld tokens: %s\n",
	       c->name, prefix ? " +pc" : "   ", (long long)f.step, peak, peak_held, (long long)st.preempt_swap,
	       (long long)st.preempt_disk, (long long)st.preempt_recompute, (long long)st.pc_hit_tokens,
	       c->dense && !prefix ? "reference" : "ids identical");
	fx_fini(&f);
}

int main(void)
{
	/* the fixture's Mistral shape: every layer attends through a window of 8 */
	setenv("ALLM_FX_ARCH", "mistral", 1);
	if (fx_global_init())
		return 1;
	static const struct run_cfg cfgs[] = {
		{"dense (every block kept)", 512, 0, 0, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR, false, false, true},
		{"plentiful", 512, 0, 0, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR, false, false, false},
		{"tight swap", 20, 40, 0, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, false, false, false},
		{"tight recompute", 20, 40, 0, ALLM_PREEMPT_RECOMPUTE, ALLM_SCHED_FAIR, false, false, false},
		{"tight adaptive fcfs", 18, 40, 0, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FCFS, false, false, false},
		{"chunked adaptive", 20, 40, 0, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR, true, false, false},
		{"disk swap", 20, 1, 60, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, false, false, false},
		{"shrunk mid-run (swap)", 40, 40, 0, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, false, true, false},
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(cfgs); i++)
		for (int pc = 0; pc < 2; pc++)
			run(&cfgs[i], pc);
	/* what it buys: the same requests in a fraction of the blocks */
	CHECK(plentiful_peak <= N_REQ * BOUND && dense_peak > 3 * plentiful_peak,
	      "peak blocks: %d windowed, %d kept", plentiful_peak, dense_peak);
	printf("peak blocks with plentiful memory: %d with the window's blocks given back, %d with every block kept\n",
	       plentiful_peak, dense_peak);
	fx_global_fini();
	if (fx_failures) {
		fprintf(stderr, "%d check(s) failed\n", fx_failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
