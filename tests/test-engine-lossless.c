/* Description: preemption, chunked prefill, run-time pool resizing and the prefix cache lose nothing: 24 greedy requests (three in four sharing a system prompt) give bit-identical ids with prefix caching off and on (hits on the device, blocks evicted to host and disk and restored or recomputed), with plentiful blocks, tight blocks under adaptive/recompute/swap, prompts chunked over steps (16 tokens a step, decodes riding along), fair with admission headroom and aging, GPU/CPU shrinks mid-run and policy switches, a disk tier (written behind, read ahead, faults, cancels while reading; also staged through host memory as on a GPU); cancels free every block; bad submits and sizes are rejected; min_tokens processes a row only until it is met. */
#include "engine-fixture.h"

enum { N_REQ = 24, MAX_TOKENS = 40, BS = 8 };
/* longest request: 62 + 40 tokens = 13 blocks of 8 */
enum { MAX_NEED = 13 };

static int32_t ref_gen[N_REQ][MAX_TOKENS];

static int32_t prompt_len(int i)
{
	return 3 + (i * 23) % 60;
}

/* Request i's prompt: three in four begin with one of three shared "system
 * prompts" (1, 3 or 5 blocks), so that the prefix cache has something to share. */
static int32_t make_prompt(const struct fx *f, int i, int32_t *ids)
{
	int32_t len = prompt_len(i), g = i % 4, shared = g == 3 ? 0 : ALLM_MIN(len - 1, BS * (1 + 2 * g));
	fx_prompt(ids, shared, 1000 + (uint64_t)g, f->m->cfg.vocab_size);
	fx_prompt(ids + shared, len - shared, (uint64_t)i + 77, f->m->cfg.vocab_size);
	return len;
}

/* The same requests in every run: two submitted per step. */
static void feed(struct fx *f)
{
	int32_t ids[128];
	while (f->n_req < N_REQ && f->n_req < 2 * (f->step + 1)) {
		int i = f->n_req;
		fx_submit_ids(f, ids, make_prompt(f, i, ids), MAX_TOKENS, 0);
	}
}

struct run_cfg {
	const char *name;
	int32_t gpu, cpu;
	enum allm_preempt_mode mode;
	enum allm_sched_mode sched;
	enum fx_pred pred;
	int resize; /* 1: GPU/CPU shrinks mid-run; 2: policy switches every few steps */
	bool chunked; /* chunked prefill, 16 tokens a step */
	int32_t lookahead; /* fair's admission headroom */
	double max_wait_factor; /* fair's aging */
	int32_t disk; /* disk tier blocks (0: none) */
	const char *fault; /* ALLM_KV_DISK_FAULT for this run */
	bool no_uring; /* pread/pwrite: disk reads wait (no read ahead) */
	bool cancel_loading; /* a request is cancelled mid-step while its read runs ahead */
	bool staged; /* ALLM_KV_STAGED=1: disk I/O through host memory, as on a GPU */
	bool prefix; /* prefix caching on (every configuration runs with it off and on) */
};

static void compare(struct fx *f, const char *name, bool reference)
{
	for (int i = 0; i < N_REQ && i < f->n_req; i++) {
		const struct fx_req *q = &f->req[i];
		if (q->n_gen != MAX_TOKENS)
			continue; /* fx_check_end reported it */
		if (reference) {
			memcpy(ref_gen[i], q->gen, sizeof(ref_gen[i]));
			continue;
		}
		int first = -1;
		for (int k = 0; k < MAX_TOKENS && first < 0; k++)
			if (q->gen[k] != ref_gen[i][k])
				first = k;
		CHECK(first < 0, "%s: request %d (prompt %d, %d swaps, %d recomputes) differs at token %d",
		      name, i, q->n_prompt, q->n_swap, q->n_recompute, first);
	}
}

/* Totals over the runs with prefix caching on. */
static int64_t tot_hits, tot_tier_hits[ALLM_KV_TIER_COUNT], tot_written[ALLM_KV_TIER_COUNT], tot_restore_dec;

static void run(const struct run_cfg *c, bool reference)
{
	struct fx f;
	struct allm_err err = {{0}};
	struct fx_opts o = {.block_size = BS, .gpu_blocks = c->gpu, .cpu_blocks = c->cpu,
			    .preempt = c->mode, .sched = c->sched, .pred = c->pred,
			    .chunked = c->chunked, .max_num_batched_tokens = c->chunked ? 16 : 0,
			    .lookahead = c->lookahead, .max_wait_factor = c->max_wait_factor,
			    .disk_blocks = c->disk, .prefix_caching = c->prefix};
	if (c->fault)
		setenv("ALLM_KV_DISK_FAULT", c->fault, 1);
	else
		unsetenv("ALLM_KV_DISK_FAULT");
	if (c->no_uring)
		setenv("ALLM_NO_IO_URING", "1", 1);
	else
		unsetenv("ALLM_NO_IO_URING");
	if (c->staged)
		setenv("ALLM_KV_STAGED", "1", 1);
	else
		unsetenv("ALLM_KV_STAGED");
	if (fx_init(&f, &o))
		return;
	CHECK(f.kv->staged == c->staged, "%s: staged %d", c->name, f.kv->staged);
	f.cancel_loading = c->cancel_loading;
	int64_t disk_shrunk = -1;
	int converted = 0, shrunk_cpu = 0;
	int64_t cpu_shrink_step = -1;
	for (int s = 0; s < 5000 && (f.n_req < N_REQ || !fx_idle(&f)); s++) {
		feed(&f);
		if (c->resize == 1) {
			struct allm_engine_stats st;
			allm_engine_get_stats(f.e, &st);
			if (f.step == 6)
				CHECK(allm_engine_set_gpu_blocks(f.e, MAX_NEED + 1, &err) == 0, "%s", err.msg);
			if (f.step == 70)
				CHECK(allm_engine_set_gpu_blocks(f.e, 40, &err) == 0, "%s", err.msg);
			if (f.step == 110)
				CHECK(allm_engine_set_gpu_blocks(f.e, MAX_NEED + 2, &err) == 0, "%s", err.msg);
			if (f.step == 150)
				CHECK(allm_engine_set_gpu_blocks(f.e, 200, &err) == 0, "%s", err.msg);
			/* the CPU pool shrinks under swapped requests twice, then comes back */
			if (shrunk_cpu < 2 && st.swapped >= 1 && f.step > cpu_shrink_step + 5) {
				int32_t keep = st.cpu_used / 3;
				int conv = fx_set_cpu_blocks(&f, keep);
				converted += conv;
				CHECK(conv >= 1, "%s: CPU shrink to %d (from %d used) converted nothing", c->name,
				      keep, st.cpu_used);
				struct allm_engine_stats st2;
				allm_engine_get_stats(f.e, &st2);
				CHECK(st2.cpu_used <= keep && st2.waiting == st.waiting + conv,
				      "%s: after the CPU shrink: %d used of %d, %d waiting", c->name, st2.cpu_used,
				      keep, st2.waiting);
				cpu_shrink_step = f.step;
				shrunk_cpu++;
			}
			if (shrunk_cpu && f.step == cpu_shrink_step + 3)
				fx_set_cpu_blocks(&f, c->cpu);
			/* the disk pool shrinks under disk-swapped requests, then comes back */
			if (c->disk && disk_shrunk < 0 && st.disk_used > 0) {
				fx_snapshot(&f, true);
				CHECK(allm_engine_set_disk_blocks(f.e, st.disk_used / 2, &err) == 0, "%s", err.msg);
				fx_snapshot(&f, false);
				for (int q = 0; q < f.n_req; q++)
					if (f.req[q].pre_state == ALLM_REQ_SWAPPED &&
					    f.req[q].post_state == ALLM_REQ_WAITING) {
						fx_drop_pending(&f, f.req[q].id);
						converted++;
					}
				fx_check_pools(&f);
				disk_shrunk = f.step;
			}
			if (c->disk && disk_shrunk >= 0 && f.step == disk_shrunk + 4)
				CHECK(allm_engine_set_disk_blocks(f.e, c->disk, &err) == 0, "%s", err.msg);
		}
		if (c->resize == 2 && f.step % 7 == 0) {
			static const enum allm_preempt_mode modes[] = {
				ALLM_PREEMPT_SWAP, ALLM_PREEMPT_ADAPTIVE, ALLM_PREEMPT_RECOMPUTE};
			f.preempt = modes[(f.step / 7) % 3];
			f.sched = (f.step / 7) % 2 ? ALLM_SCHED_FCFS : ALLM_SCHED_FAIR;
			allm_engine_set_preempt(f.e, f.preempt);
			allm_engine_set_sched(f.e, f.sched);
		}
		fx_step(&f);
	}
	CHECK(fx_idle(&f) && f.n_req == N_REQ, "%s: not drained", c->name);
	fx_check_end(&f, c->name);
	compare(&f, c->name, reference);
	struct allm_engine_stats st;
	allm_engine_get_stats(f.e, &st);
	/* with the cache, the faulted write may be a cached block's write behind,
	 * which shows only if that block is read again */
	bool write_fault_in_cache = c->prefix && c->fault && strstr(c->fault, "write");
	if (c->gpu >= 256) /* plentiful */
		CHECK(f.n_dec == 0, "%s: %d preemptions with plentiful blocks", c->name, f.n_dec);
	else if (f.kv->window > 0)
		; /* every layer windowed (ALLM_FX_ARCH=mistral): the blocks the windows
		   * passed went back, so these pools rarely run short and no kind of
		   * preemption is certain (test-kv-window preempts under windows) */
	else if (c->disk)
		CHECK(st.preempt_disk + st.disk_fallbacks > 0 && (!c->fault || st.disk_fallbacks + st.pc.write_errors + st.pc_restore_failures > 0 || write_fault_in_cache) &&
			      (c->no_uring ? st.disk_reads_ahead == 0 : st.disk_reads_ahead > 0),
		      "%s: %lld disk swaps, %lld fallbacks, %lld reads ahead", c->name,
		      (long long)st.preempt_disk, (long long)st.disk_fallbacks,
		      (long long)st.disk_reads_ahead);
	else if (c->chunked)
		CHECK(st.mixed_steps > 0 && st.preempt_swap + st.preempt_recompute > 0,
		      "%s: %lld mixed steps, %lld preemptions", c->name, (long long)st.mixed_steps,
		      (long long)(st.preempt_swap + st.preempt_recompute));
	else if (c->resize == 0 && c->mode == ALLM_PREEMPT_SWAP)
		CHECK(st.preempt_swap > 0, "%s: no swap", c->name);
	else if (c->resize == 0 && c->mode == ALLM_PREEMPT_RECOMPUTE)
		CHECK(st.preempt_recompute > 0 && st.preempt_swap == 0, "%s: %lld recompute %lld swap",
		      c->name, (long long)st.preempt_recompute, (long long)st.preempt_swap);
	else
		CHECK(st.preempt_swap > 0 && st.preempt_recompute > 0, "%s: %lld swap %lld recompute",
		      c->name, (long long)st.preempt_swap, (long long)st.preempt_recompute);
	if (c->prefix)
		CHECK(st.pc_hit_tokens > 0 && st.pc_queried_tokens > 0, "%s: prefix cache: %lld of %lld tokens hit",
		      c->name, (long long)st.pc_hit_tokens, (long long)st.pc_queried_tokens);
	else
		CHECK(st.pc_hit_tokens == 0 && st.pc_blocks[0] == 0, "%s: caching off, yet %lld tokens hit",
		      c->name, (long long)st.pc_hit_tokens);
	tot_hits += st.pc_hit_tokens;
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++) {
		tot_tier_hits[t] += st.pc_hit_tokens_tier[t];
		tot_written[t] += st.pc.written[t];
	}
	tot_restore_dec += f.n_restore_dec;
	if (c->cancel_loading && !f.kv->window)
		CHECK(f.cancelled_loading >= 0 && f.req[f.cancelled_loading].finish == ALLM_END_CANCELLED,
		      "%s: no request cancelled while its read ran ahead", c->name);
	if (c->resize == 1)
		CHECK(converted >= 2, "%s: only %d swapped requests converted", c->name, converted);
	printf("%-26s%s %3lld steps: %3lld swap, %3lld disk, %3lld recompute preemptions (%d by "
	       "shrinks, %lld disk fallbacks, %lld demotions, %lld reads ahead), %lld tokens recomputed, "
	       "up to %d victims in a step, cached %lld/%lld tokens (host %lld disk %lld, %lld restore "
	       "decisions): %s\n",
	       c->name, c->prefix ? " +pc" : "", (long long)f.step, (long long)st.preempt_swap, (long long)st.preempt_disk,
	       (long long)st.preempt_recompute, converted, (long long)st.disk_fallbacks,
	       (long long)st.demotions, (long long)st.disk_reads_ahead, (long long)st.recompute_tokens, f.max_victims_per_step,
	       (long long)st.pc_hit_tokens, (long long)st.pc_queried_tokens,
	       (long long)st.pc_hit_tokens_tier[ALLM_KV_TIER_HOST], (long long)st.pc_hit_tokens_tier[ALLM_KV_TIER_DISK],
	       (long long)f.n_restore_dec, reference ? "reference" : "ids identical");
	fx_fini(&f);
}

static void test_runs(void)
{
	/* name, GPU and CPU blocks, policies, predictor, resize, then the newer knobs */
#define R(n, g, c, m, sc, p, rs) .name = n, .gpu = g, .cpu = c, .mode = m, .sched = sc, .pred = p, .resize = rs
	static const struct run_cfg cfgs[] = {
		{R("plentiful", 512, 0, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0)},
		{R("tight adaptive", 26, 40, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0)},
		{R("tight recompute", 26, 40, ALLM_PREEMPT_RECOMPUTE, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0)},
		{R("tight swap", 26, 40, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0)},
		{R("tight swap fcfs", 26, 40, ALLM_PREEMPT_SWAP, ALLM_SCHED_FCFS, FX_PRED_CROSSOVER, 0)},
		{R("tight adaptive fcfs", 20, 12, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FCFS, FX_PRED_SWAP_CHEAP, 0)},
		{R("resized mid-run (swap)", 64, 64, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 1)},
		{R("resized mid-run (adaptive)", 64, 64, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR,
		   FX_PRED_CROSSOVER, 1)},
		{R("policy switches", 22, 24, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 2)},
		{R("chunked adaptive", 26, 40, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .chunked = true},
		{R("chunked recompute fcfs", 26, 40, ALLM_PREEMPT_RECOMPUTE, ALLM_SCHED_FCFS,
		   FX_PRED_CROSSOVER, 0), .chunked = true},
		{R("chunked headroom aging", 26, 12, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR,
		   FX_PRED_CROSSOVER, 0), .chunked = true, .lookahead = 4, .max_wait_factor = 2.0},
		{R("chunked resized (swap)", 64, 64, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 1),
		 .chunked = true},
		{R("chunked policy switches", 22, 24, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 2),
		 .chunked = true, .lookahead = 2, .max_wait_factor = 3.0},
		{R("disk adaptive", 26, 8, ALLM_PREEMPT_ADAPTIVE, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40},
		{R("disk swap", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40},
		{R("disk swap fcfs chunked", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FCFS, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .chunked = true},
		{R("disk resized (swap)", 64, 16, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 1),
		 .disk = 40},
		{R("disk read EIO", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .fault = "eio-read=2"},
		{R("disk write ENOSPC", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .fault = "enospc-write=2"},
		{R("disk short read", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .fault = "short-read=1"},
		{R("disk swap, reads wait", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .no_uring = true},
		{R("disk swap, cancel reading", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .cancel_loading = true},
		{R("disk swap, staged (GPU)", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .staged = true},
		{R("disk swap fcfs chunked, staged", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FCFS,
		   FX_PRED_CROSSOVER, 0), .disk = 40, .chunked = true, .staged = true},
		{R("disk read EIO, staged", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .fault = "eio-read=2", .staged = true},
		{R("disk staged, cancel reading", 26, 8, ALLM_PREEMPT_SWAP, ALLM_SCHED_FAIR, FX_PRED_CROSSOVER, 0),
		 .disk = 40, .cancel_loading = true, .staged = true},
	};
#undef R

	for (size_t i = 0; i < ALLM_ARRAY_SIZE(cfgs); i++)
		for (int pc = 0; pc < 2; pc++) {
			struct run_cfg c = cfgs[i];
			c.prefix = pc;
			run(&c, i == 0 && !pc);
		}
	/* the cache worked across tiers somewhere: blocks went down and came back */
	CHECK(tot_hits > 0 && tot_written[ALLM_KV_TIER_HOST] > 0 && tot_tier_hits[ALLM_KV_TIER_HOST] > 0 &&
		      tot_written[ALLM_KV_TIER_DISK] > 0 && tot_tier_hits[ALLM_KV_TIER_DISK] > 0 && tot_restore_dec > 0,
	      "prefix cache over all runs: %lld hits; host %lld written, %lld hit; disk %lld written, %lld hit; "
	      "%lld restore decisions",
	      (long long)tot_hits, (long long)tot_written[ALLM_KV_TIER_HOST], (long long)tot_tier_hits[ALLM_KV_TIER_HOST],
	      (long long)tot_written[ALLM_KV_TIER_DISK], (long long)tot_tier_hits[ALLM_KV_TIER_DISK],
	      (long long)tot_restore_dec);
	unsetenv("ALLM_KV_DISK_FAULT");
	unsetenv("ALLM_NO_IO_URING");
	unsetenv("ALLM_KV_STAGED");
}

/* Conversations: turn t + 1's prompt is turn t's prompt, its answer and 8 new
 * tokens, sent when turn t ends; the others' turns push a conversation's
 * blocks down the tiers meanwhile. */
enum { MT_CONV = 6, MT_TURNS = 5, MT_OUT = 8, MT_FIRST = 20, MT_ADD = 8 };
static int32_t mt_ref[MT_CONV][MT_TURNS][MT_OUT];

struct mt_cfg {
	const char *name;
	int32_t gpu, cpu, disk;
	enum allm_preempt_mode mode;
	bool chunked;
};

static void run_multiturn(const struct mt_cfg *c, bool prefix, bool reference)
{
	struct fx f;
	struct fx_opts o = {.block_size = BS, .gpu_blocks = c->gpu, .cpu_blocks = c->cpu, .disk_blocks = c->disk,
			    .preempt = c->mode, .sched = ALLM_SCHED_FAIR, .pred = FX_PRED_CROSSOVER,
			    .chunked = c->chunked, .max_num_batched_tokens = c->chunked ? 16 : 0,
			    .max_num_seqs = 2, .prefix_caching = prefix};
	unsetenv("ALLM_KV_DISK_FAULT");
	unsetenv("ALLM_NO_IO_URING");
	unsetenv("ALLM_KV_STAGED");
	if (fx_init(&f, &o))
		return;
	int32_t conv[MT_CONV][128], len[MT_CONV], turn[MT_CONV], tag[MT_CONV];
	for (int k = 0; k < MT_CONV; k++) {
		fx_prompt(conv[k], MT_FIRST, 4242 + (uint64_t)k, f.m->cfg.vocab_size);
		len[k] = MT_FIRST;
		turn[k] = 0;
		tag[k] = fx_submit_ids(&f, conv[k], len[k], MT_OUT, 0);
	}
	for (int s = 0; s < 20000 && !fx_idle(&f); s++) {
		fx_step(&f);
		for (int k = 0; k < MT_CONV; k++) {
			struct fx_req *q = &f.req[tag[k]];
			if (!q->done || turn[k] == MT_TURNS)
				continue;
			CHECK(q->n_gen == MT_OUT, "%s: conversation %d turn %d: %d tokens", c->name, k, turn[k], q->n_gen);
			if (reference)
				memcpy(mt_ref[k][turn[k]], q->gen, sizeof(mt_ref[k][turn[k]]));
			else
				CHECK(!memcmp(mt_ref[k][turn[k]], q->gen, sizeof(mt_ref[k][turn[k]])),
				      "%s%s: conversation %d turn %d differs", c->name, prefix ? " +pc" : "", k, turn[k]);
			if (++turn[k] == MT_TURNS)
				continue;
			memcpy(conv[k] + len[k], q->gen, MT_OUT * sizeof(int32_t));
			len[k] += MT_OUT;
			fx_prompt(conv[k] + len[k], MT_ADD, 777 + (uint64_t)(k * 31 + turn[k]), f.m->cfg.vocab_size);
			len[k] += MT_ADD;
			tag[k] = fx_submit_ids(&f, conv[k], len[k], MT_OUT, 0);
		}
	}
	CHECK(fx_idle(&f), "%s: not drained", c->name);
	fx_check_end(&f, c->name);
	struct allm_engine_stats st;
	allm_engine_get_stats(f.e, &st);
	if (prefix) {
		/* later turns find their conversation: on the device, or brought back
		 * from the host and the disk tier */
		CHECK(c->mode == ALLM_PREEMPT_RECOMPUTE ? st.pc_hit_tokens > 0 : st.pc_hit_tokens * 2 > st.pc_queried_tokens,
		      "%s: %lld of %lld tokens hit", c->name, (long long)st.pc_hit_tokens, (long long)st.pc_queried_tokens);
		if (c->mode != ALLM_PREEMPT_RECOMPUTE) {
			CHECK(!c->cpu || st.pc.written[ALLM_KV_TIER_HOST] > 0, "%s: nothing written to the host", c->name);
			CHECK(!c->disk || st.pc.written[ALLM_KV_TIER_DISK] > 0, "%s: nothing written to disk", c->name);
			CHECK(!(c->cpu || c->disk) || f.n_restore_dec > 0, "%s: no restore-or-recompute decision", c->name);
			CHECK(!c->cpu || st.pc_hit_tokens_tier[ALLM_KV_TIER_HOST] > 0, "%s: no hit in the host", c->name);
			CHECK(!c->disk || st.pc_hit_tokens_tier[ALLM_KV_TIER_DISK] > 0, "%s: no hit on disk", c->name);
		} else { /* nothing comes back from a lower tier: nothing goes there */
			CHECK(st.pc_restored_tokens == 0 && st.pc.written[ALLM_KV_TIER_HOST] + st.pc.written[ALLM_KV_TIER_DISK] == 0,
			      "%s: policy recompute restored %lld tokens, wrote %lld blocks down", c->name,
			      (long long)st.pc_restored_tokens,
			      (long long)(st.pc.written[ALLM_KV_TIER_HOST] + st.pc.written[ALLM_KV_TIER_DISK]));
		}
		/* nothing leaks: the cache lets go of everything */
		int32_t n = allm_engine_cache_reset(f.e);
		allm_engine_get_stats(f.e, &st);
		CHECK(n > 0 && st.pc_blocks[0] + st.pc_blocks[1] + st.pc_blocks[2] == 0 && st.gpu_cached_free == 0 &&
			      allm_block_pool_avail(&f.kv->gpu) == f.kv->gpu.n_total &&
			      allm_block_pool_avail(&f.kv->cpu) == f.kv->cpu.n_total,
		      "%s: after cache reset: %d dropped, %d/%d/%d cached", c->name, n, st.pc_blocks[0], st.pc_blocks[1],
		      st.pc_blocks[2]);
	}
	printf("multi-turn %-22s%s %4lld steps: cached %lld/%lld tokens (device %lld host %lld disk %lld), "
	       "restored %lld, recomputed %lld; %lld restore decisions (%lld recompute); written host %lld disk %lld, "
	       "%lld preemptions: %s\n",
	       c->name, prefix ? " +pc" : "", (long long)f.step, (long long)st.pc_hit_tokens,
	       (long long)st.pc_queried_tokens, (long long)st.pc_hit_tokens_tier[0], (long long)st.pc_hit_tokens_tier[1],
	       (long long)st.pc_hit_tokens_tier[2], (long long)st.pc_restored_tokens,
	       (long long)st.pc_recomputed_cached_tokens, (long long)f.n_restore_dec, (long long)f.n_restore_rc,
	       (long long)st.pc.written[1], (long long)st.pc.written[2],
	       (long long)(st.preempt_swap + st.preempt_disk + st.preempt_recompute), reference ? "reference" : "ids identical");
	fx_fini(&f);
}

static void test_multiturn(void)
{
	static const struct mt_cfg cfgs[] = {
		{"plentiful", 256, 0, 0, ALLM_PREEMPT_ADAPTIVE, false},
		{"tiers adaptive", 24, 12, 64, ALLM_PREEMPT_ADAPTIVE, false},
		{"tiers adaptive chunked", 24, 12, 64, ALLM_PREEMPT_ADAPTIVE, true},
		{"tiers swap", 24, 12, 64, ALLM_PREEMPT_SWAP, false},
		{"tiers recompute chunked", 24, 12, 64, ALLM_PREEMPT_RECOMPUTE, true},
		{"host only swap", 24, 48, 0, ALLM_PREEMPT_SWAP, true},
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(cfgs); i++)
		for (int pc = 0; pc < 2; pc++)
			run_multiturn(&cfgs[i], pc, i == 0 && !pc);
}

/* Cancels a running, a swapped and a waiting request (one that was preempted by
 * recompute if there is one); the rest still finish with the reference ids and
 * both pools end empty. */
static void test_cancel(bool prefix)
{
	struct fx f;
	struct fx_opts o = {.block_size = BS, .gpu_blocks = 26, .cpu_blocks = 40,
			    .preempt = ALLM_PREEMPT_SWAP, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_CROSSOVER, .prefix_caching = prefix};
	if (fx_init(&f, &o))
		return;
	int cancelled[3] = {-1, -1, -1};
	for (int s = 0; s < 5000 && (f.n_req < N_REQ || !fx_idle(&f)); s++) {
		feed(&f);
		struct allm_engine_stats st;
		allm_engine_get_stats(f.e, &st);
		if (cancelled[0] < 0 && st.running && st.swapped && st.waiting) {
			const struct allm_request *v[64];
			for (int q = 0; q < 3; q++) {
				int n = allm_engine_list(f.e, (enum allm_req_state)q, v, 64);
				int pick = 0;
				for (int i = 0; i < n; i++)
					if (v[i]->n_preempt_recompute + v[i]->n_preempt_swap > 0) {
						pick = i; /* prefer one that was preempted */
						break;
					}
				cancelled[q] = (int)v[pick]->tag;
			}
			for (int q = 0; q < 3; q++) {
				int64_t id = f.req[cancelled[q]].id;
				CHECK(fx_cancel(&f, cancelled[q]) == 0, "cancel of a %s request failed",
				      q == 0 ? "waiting" : q == 1 ? "running" : "swapped");
				CHECK(f.req[cancelled[q]].done && f.req[cancelled[q]].finish == ALLM_END_CANCELLED,
				      "cancelled request not finished as cancelled");
				CHECK(allm_engine_cancel(f.e, id) == -ENOENT, "second cancel");
			}
			CHECK(allm_engine_cancel(f.e, 999999) == -ENOENT, "cancel of an unknown id");
		}
		fx_step(&f);
	}
	CHECK(cancelled[0] >= 0, "cancel: never had a running, a swapped and a waiting request");
	CHECK(fx_idle(&f), "cancel: not drained");
	fx_check_end(&f, "cancel");
	for (int i = 0; i < N_REQ; i++) {
		const struct fx_req *q = &f.req[i];
		if (q->finish == ALLM_END_CANCELLED)
			continue;
		CHECK(q->n_gen == MAX_TOKENS && !memcmp(q->gen, ref_gen[i], sizeof(ref_gen[i])),
		      "cancel: request %d output changed", i);
	}
	struct allm_engine_stats st;
	allm_engine_get_stats(f.e, &st);
	CHECK(st.gpu_used == 0 && st.cpu_used == 0 && st.finished == N_REQ && st.failed == 0,
	      "cancel: used %d/%d, finished %lld failed %lld", st.gpu_used, st.cpu_used,
	      (long long)st.finished, (long long)st.failed);

	/* cancelling everything mid-run also leaves both pools empty */
	int base = f.n_req;
	int32_t ids[128];
	for (int i = 0; i < 12; i++)
		fx_submit_ids(&f, ids, make_prompt(&f, i, ids), MAX_TOKENS, 0);
	for (int s = 0; s < 40; s++)
		fx_step(&f);
	allm_engine_get_stats(f.e, &st);
	CHECK(st.running + st.swapped + st.waiting > 0, "cancel-all: nothing left to cancel");
	for (int i = base; i < f.n_req; i++)
		if (!f.req[i].done)
			CHECK(fx_cancel(&f, i) == 0, "cancel-all: request %d", i);
	allm_engine_get_stats(f.e, &st);
	CHECK(allm_engine_idle(f.e) && st.gpu_used == 0 && st.cpu_used == 0,
	      "cancel-all: used GPU %d CPU %d", st.gpu_used, st.cpu_used);
	fx_check_end(&f, "cancel-all");
	/* what the cache keeps, it lets go of */
	allm_engine_cache_reset(f.e);
	CHECK(allm_block_pool_avail(&f.kv->gpu) == f.kv->gpu.n_total && allm_block_pool_avail(&f.kv->cpu) == f.kv->cpu.n_total,
	      "cancel-all: after a cache reset %d/%d GPU and %d/%d CPU blocks can be taken", allm_block_pool_avail(&f.kv->gpu),
	      f.kv->gpu.n_total, allm_block_pool_avail(&f.kv->cpu), f.kv->cpu.n_total);
	printf("cancel%s: a waiting, a running and a swapped request cancelled, the others unchanged; "
	       "pools empty after cancelling everything\n", prefix ? " +pc" : "");
	fx_fini(&f);
}

/* Invalid requests and pool sizes are refused with a message and change nothing. */
static void test_bad_input(void)
{
	struct fx f;
	struct fx_opts o = {.block_size = BS, .gpu_blocks = 16, .cpu_blocks = 8,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP};
	struct allm_err err;
	if (fx_init(&f, &o))
		return;
	const struct allm_model_config *c = &f.m->cfg;
	int32_t *ids = calloc((size_t)c->max_pos + 8, sizeof(int32_t));
	for (int i = 0; i < c->max_pos + 8; i++)
		ids[i] = i % c->vocab_size;
	struct {
		const char *what;
		int32_t n_prompt, max_tokens, bad_id, want;
		float temperature;
	} cases[] = {
		{"empty prompt", 0, 10, 0, -EINVAL, 0},
		{"negative id", 10, 10, -1, -EINVAL, 0},
		{"id past the vocabulary", 10, 10, c->vocab_size, -EINVAL, 0},
		{"prompt as long as the context", c->max_pos, 10, 0, -EINVAL, 0},
		{"more blocks than the GPU pool", 100, 100, 0, -E2BIG, 0},
		{"max_tokens 0", 10, 0, 0, -EINVAL, 0},
		{"negative temperature", 10, 10, 0, -EINVAL, -1.0f},
	};
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(cases); k++) {
		int32_t saved = ids[5];
		if (cases[k].bad_id)
			ids[5] = cases[k].bad_id;
		struct allm_submit s = {.prompt = ids, .n_prompt = cases[k].n_prompt};
		allm_params_init(&s.params);
		s.params.max_tokens = cases[k].max_tokens;
		s.params.ignore_eos = 1;
		s.params.temperature = cases[k].temperature;
		int64_t id = -7;
		memset(&err, 0, sizeof(err));
		int r = allm_engine_submit(f.e, &s, &id, &err);
		ids[5] = saved;
		struct allm_engine_stats st;
		allm_engine_get_stats(f.e, &st);
		CHECK(r == cases[k].want, "%s: got %d, want %d", cases[k].what, r, cases[k].want);
		CHECK(err.msg[0] != 0, "%s: no message", cases[k].what);
		CHECK(id == -7 && st.waiting == 0 && allm_engine_idle(f.e), "%s: something was queued",
		      cases[k].what);
		printf("bad input %-32s -> %d: %s\n", cases[k].what, r, err.msg);
	}
	/* the largest request that fits is accepted: 16 blocks of 8 = 128 tokens */
	CHECK(fx_submit(&f, 100, 28, 0, 1) == 0, "a request of exactly the pool size was refused");

	/* pool sizes */
	memset(&err, 0, sizeof(err));
	CHECK(allm_engine_set_gpu_blocks(f.e, 0, &err) == -EINVAL && err.msg[0],
	      "set_gpu_blocks(0) accepted");
	CHECK(allm_engine_set_gpu_blocks(f.e, -3, &err) == -EINVAL, "set_gpu_blocks(-3) accepted");
	CHECK(allm_engine_set_cpu_blocks(f.e, -1, &err) == -EINVAL, "set_cpu_blocks(-1) accepted");
	CHECK(f.kv->gpu.n_total == 16 && f.kv->cpu.n_total == 8, "a refused resize changed the pools");
	CHECK(allm_engine_set_limits(f.e, 0, 100, &err) == -EINVAL, "max_num_seqs 0 accepted");
	CHECK(allm_engine_set_limits(f.e, 4, 0, &err) == -EINVAL, "max_num_batched_tokens 0 accepted");

	/* a queued request that no longer fits a shrunk GPU pool fails with a reason
	 * instead of waiting forever */
	CHECK(allm_engine_set_gpu_blocks(f.e, 8, &err) == 0, "%s", err.msg);
	fx_step(&f);
	CHECK(f.req[0].done && f.req[0].finish == ALLM_END_ERROR,
	      "a request needing 16 blocks still queued in an 8-block pool");
	CHECK(f.req[0].status == -E2BIG && strstr(f.req[0].error, "KV blocks"),
	      "the shrink's failure lost its cause: status %d, '%s'", f.req[0].status, f.req[0].error);
	CHECK(allm_engine_idle(f.e), "not idle");
	fx_check_pools(&f);
	printf("bad sizes refused; a request too big for the shrunk pool failed\n");
	free(ids);
	fx_fini(&f);
}

/* min_tokens holds the stop tokens back, and only until it is met: from then on
 * the row is sampled as it comes (a greedy one by argmax, on a GPU on the
 * device), not copied and masked every step of the request's life. */
static void test_min_tokens_ends(void)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 64, .cpu_blocks = 16, .preempt = ALLM_PREEMPT_ADAPTIVE,
			    .sched = ALLM_SCHED_FAIR, .pred = FX_PRED_SWAP_CHEAP};
	if (fx_init(&f, &o))
		return;
	f.min_tokens = 3;
	int tag = fx_submit(&f, 6, 10, 0, 7);
	fx_step(&f); /* the prefill: the first token */
	const struct allm_request *r = fx_live(&f, tag);
	CHECK(r && allm_sampler_need(&r->sampler) == ALLM_SAMPLE_FULL, "before min_tokens: the row is not whole");
	while (f.req[tag].n_gen < 3 && !f.req[tag].done)
		fx_step(&f);
	r = fx_live(&f, tag);
	CHECK(f.req[tag].n_gen >= 3 && (!r || allm_sampler_need(&r->sampler) == ALLM_SAMPLE_ARGMAX),
	      "min_tokens met after %d tokens, yet the row is still processed", f.req[tag].n_gen);
	CHECK(fx_drain(&f, 100), "not drained");
	fx_fini(&f);
}

/* The end says which stop it was: one of the request's stop ids (even one that
 * is an EOS too), or the model's EOS, each right after the token that ended it. */
static void test_stop_ends(void)
{
	struct fx f;
	struct fx_opts o = {.block_size = 4, .gpu_blocks = 64, .cpu_blocks = 16, .preempt = ALLM_PREEMPT_ADAPTIVE,
			    .sched = ALLM_SCHED_FAIR, .pred = FX_PRED_SWAP_CHEAP};
	if (fx_init(&f, &o))
		return;
	struct allm_model_config *c = &f.m->cfg;
	const struct allm_model_config saved = *c;
	int ref = fx_submit(&f, 6, 8, 0, 7); /* ignore_eos: all 8 */
	CHECK(fx_drain(&f, 100) && f.req[ref].n_gen == 8, "the reference: %d tokens", f.req[ref].n_gen);
	/* its third token ends the others; where it first stands */
	int32_t stop = f.req[ref].gen[2], at = 0;
	while (f.req[ref].gen[at] != stop)
		at++;
	c->n_eos = 1;
	c->eos_ids[0] = stop == 1 ? 2 : 1; /* an EOS it never makes before `at`... */
	for (int32_t i = 0; i <= at; i++)
		CHECK(f.req[ref].gen[i] != c->eos_ids[0], "pick another EOS for this test");
	struct {
		const char *what;
		int32_t stop_id, eos;
		enum allm_end want;
	} cases[] = {
		{"a stop id", stop, c->eos_ids[0], ALLM_END_STOP_ID},
		{"the EOS", -1, stop, ALLM_END_EOS},
		{"a stop id that is the EOS too", stop, stop, ALLM_END_STOP_ID},
	};
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(cases); k++) {
		f.stop_id = cases[k].stop_id;
		c->eos_ids[0] = cases[k].eos;
		int tag = fx_submit(&f, 6, 8, 0, 7);
		CHECK(fx_drain(&f, 100), "%s: not drained", cases[k].what);
		CHECK(f.req[tag].finish == cases[k].want && f.req[tag].n_gen == at + 1,
		      "%s: end %d after %d tokens, want %d after %d", cases[k].what, f.req[tag].finish,
		      f.req[tag].n_gen, cases[k].want, at + 1);
	}
	CHECK(!strcmp(allm_end_name(ALLM_END_EOS), "stop") && !strcmp(allm_end_name(ALLM_END_STOP_ID), "stop"),
	      "OpenAI names both ends stop");
	f.stop_id = 0;
	*c = saved;
	fx_fini(&f);
}

/* A backend op that fails fails the batch's requests with the backend's own
 * errno and words (not -EIO), and the engine serves the next request. */
static const struct allm_backend_i *real_iface;
static int fail_left;
static int failing_attention(allm_backend_t *be, float *out, const float *q, const void *kv_pool,
			     const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads, float scale,
			     const struct allm_attn_meta *meta)
{
	if (fail_left > 0 && --fail_left == 0)
		return allm_err_set(&be->last_err, -ENOSPC, "attention: injected failure");
	return real_iface->attention(be, out, q, kv_pool, lay, layer, n_heads, scale, meta);
}

static void test_backend_errno(void)
{
	struct fx f;
	struct fx_opts o = {.block_size = BS, .gpu_blocks = 64, .cpu_blocks = 8,
			    .preempt = ALLM_PREEMPT_ADAPTIVE, .sched = ALLM_SCHED_FAIR,
			    .pred = FX_PRED_SWAP_CHEAP};
	if (fx_init(&f, &o))
		return;
	static struct allm_backend_i proxy;
	real_iface = f.be->iface;
	proxy = *real_iface;
	proxy.attention = failing_attention;
	f.be->iface = &proxy;
	fail_left = 3; /* the third attention call: inside a forward */
	CHECK(fx_submit(&f, 20, 8, 0, 1) >= 0, "submit");
	CHECK(fx_submit(&f, 20, 8, 0, 2) >= 0, "submit");
	struct allm_err err = {{0}};
	int failed_steps = 0;
	for (int i = 0; i < 50 && !(f.req[0].done && f.req[1].done); i++)
		failed_steps += allm_engine_step(f.e, &err) < 0; /* the failed step says so; the engine goes on */
	CHECK(failed_steps == 1, "%d failed steps", failed_steps);
	CHECK(f.req[0].done && f.req[0].finish == ALLM_END_ERROR && f.req[0].status == -ENOSPC &&
		      strstr(f.req[0].error, "injected"),
	      "a backend failure's cause: end %d status %d '%s'", (int)f.req[0].finish, f.req[0].status,
	      f.req[0].error);
	CHECK(fx_submit(&f, 20, 8, 0, 3) >= 0, "submit after the failure");
	for (int i = 0; i < 50 && !f.req[2].done; i++)
		CHECK(allm_engine_step(f.e, &err) >= 0, "%s", err.msg);
	CHECK(f.req[2].done && f.req[2].finish == ALLM_END_LENGTH, "the engine serves on after a failed batch");
	f.be->iface = real_iface;
	printf("a failed backend op ends its batch with the backend's errno (%d) and words\n", f.req[0].status);
	fx_fini(&f);
}

int main(void)
{
	if (fx_global_init())
		return 1;
	test_runs();
	test_multiturn();
	test_cancel(false);
	test_cancel(true);
	test_bad_input();
	test_backend_errno();
	test_min_tokens_ends();
	test_stop_ends();
	fx_global_fini();
	if (fx_failures) {
		fprintf(stderr, "%d check(s) failed\n", fx_failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
