/* Description: elastic memory (DESIGN §5c) on the CPU backend with stories260K and --dummy tiny: under one --memory-budget tight enough that the static split preempts, staggered arrivals make the scheduler inflate and deflate the pool every few steps; the generated ids are bit-identical with elastic memory on and off under the adaptive, swap and recompute policies, the elastic run holds a larger running batch, and after every step the pool's invariants hold (the KV share and the scratch fit the pool, no retired block and no scratch past its share holds pages); idle, and after every request of a client is cancelled mid-flight, only blocks held map pages and the scratch none.
 * `test-elastic cuda` (suite gpu, exit 77 without a GPU): the same runs on CUDA with stories260K and --dummy medium (blocks near the VMM chunk), where the pages are the VMM arena's chunks (kernels/cuda/cuda-vmm.c): the ids with the arena equal those of the cudaMalloc fallback (ALLM_CUDA_VMM=0) under the same schedule (swap, recompute), pages really moved (fewer mapped than the reservation at some step), the invariants hold every step on the chunks, nothing stays mapped at idle; ids against the static split are compared and reported (CUDA's kernels are not batch-invariant, so only the CPU run asserts that) */
#include "engine-calib.h"
#include "engine.h"
#include "engine-internal.h"
#include "executor.h"
#include "kv-elastic.h"
#include "predictor.h"
#include "runtime.h"
#include "test-check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_REQ = 20, EVERY = 3 };

struct out {
	uint64_t hash[N_REQ];
	int32_t n[N_REQ];
	int done;
};

static void on_finish(void *user, const struct allm_result *res)
{
	struct out *o = user;
	uint64_t h = 1469598103934665603ull;
	for (int32_t i = 0; i < res->n_generated; i++)
		h = (h ^ (uint32_t)res->generated[i]) * 1099511628211ull;
	o->hash[res->tag] = h;
	o->n[res->tag] = res->n_generated;
	o->done++;
}

struct result {
	struct out out;
	struct allm_engine_stats st;
	int64_t min_resident, max_resident; /* pages mapped after a step (pool + scratch) */
	size_t reserved; /* the device pool's and the scratch's reservations, bytes */
	size_t page; /* the device pool's page (0: its pages cannot move) */
};

static bool prefix_caching; /* the last case: blocks the cache holds stay mapped */
static const char *device = "cpu";
static bool no_vmm; /* cuda: ALLM_CUDA_VMM=0, the cudaMalloc fallback */

static void opts(struct allm_engine_opts *o, const char *dummy, double budget, bool elastic,
		 enum allm_preempt_mode pm)
{
	allm_engine_opts_default(o);
	allm_backend_env_read(&o->backend_env);
	o->dummy = dummy;
	o->device = device;
	o->threads = 1;
	o->memory_budget_gib = budget;
	o->elastic_memory = elastic;
	o->max_num_batched_tokens = 128;
	o->max_num_seqs = 64;
	o->swap_space_gib = 0.0625;
	o->preempt = pm;
	o->prefix_caching = prefix_caching;
	/* CUDA's kernels are not batch-invariant: its runs compare under one
	 * schedule, which fair's clock-driven priorities would not promise */
	if (!strcmp(device, "cuda"))
		o->sched = ALLM_SCHED_FCFS;
}

/* The budget: the weights, activations for a 128-token step, and `blocks`
 * KV blocks (the static split's share). */
static double budget_for(const char *dummy, int32_t blocks)
{
	struct allm_engine_opts o;
	struct allm_runtime *rt;
	struct allm_err err = {{0}};
	opts(&o, dummy, 1, false, ALLM_PREEMPT_ADAPTIVE);
	if (allm_runtime_open(&o, 0, NULL, NULL, &rt, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	double b = (double)rt->model->arena_bytes + (double)allm_executor_scratch_bytes(&rt->model->cfg, 128) +
		   ((double)blocks + 0.5) * (double)rt->kv->block_bytes;
	allm_runtime_close(rt);
	return b / 1073741824.0;
}

/* Runs N_REQ greedy requests arriving one every EVERY steps (cancel_at > 0:
 * cancels everything after that many steps, as when the client dies). */
static void run(const char *dummy, double budget, bool elastic, enum allm_preempt_mode pm, int cancel_at,
		struct result *res)
{
	struct allm_engine_opts o;
	struct allm_runtime *rt;
	struct allm_predictor_key key;
	struct allm_predictor *pred;
	struct allm_engine *e;
	struct allm_err err = {{0}};
	memset(res, 0, sizeof(*res));
	res->min_resident = INT64_MAX;
	opts(&o, dummy, budget, elastic, pm);
	if (no_vmm)
		o.backend_env.cuda_no_vmm = true; /* what ALLM_CUDA_VMM=0 sets */
	int ro = allm_runtime_open(&o, 0, NULL, NULL, &rt, &err);
	if (ro) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	struct allm_engine_config ec;
	allm_engine_config_from_opts(&o, &ec);
	struct allm_engine_events ev = {.user = &res->out, .on_finish = on_finish};
	allm_engine_predictor_key(rt->model, rt->kv, &key);
	if (allm_predictor_create(&key, &pred) || allm_engine_create(rt->model, rt->kv, pred, &ec, &ev, &e, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	int64_t ids[N_REQ];
	uint64_t rng = 0x1234567ull;
	int submitted = 0;
	for (int step = 0; res->out.done < N_REQ; step++) {
		if (submitted < N_REQ && step % EVERY == 0) {
			int32_t prompt[96];
			int32_t n = 24 + (int32_t)(rng % 64);
			for (int32_t i = 0; i < n; i++) {
				rng = rng * 6364136223846793005ull + 1442695040888963407ull;
				prompt[i] = 1 + (int32_t)((rng >> 33) % (uint64_t)(rt->model->cfg.vocab_size - 1));
			}
			struct allm_submit s = {.prompt = prompt, .n_prompt = n, .tag = (uint64_t)submitted};
			allm_params_init(&s.params);
			s.params.temperature = 0;
			s.params.ignore_eos = true;
			s.params.max_tokens = 96 + (int32_t)(rng % 64);
			if (allm_engine_submit(e, &s, &ids[submitted], &err)) {
				fprintf(stderr, "%s\n", err.msg);
				exit(1);
			}
			submitted++;
		}
		if (cancel_at > 0 && step == cancel_at) {
			for (int i = 0; i < submitted; i++)
				allm_engine_cancel(e, ids[i]);
			res->out.done = N_REQ;
			break;
		}
		int64_t over = res->st.over_budget_steps;
		if (allm_engine_step(e, &err) < 0) {
			fprintf(stderr, "step: %s\n", err.msg);
			exit(1);
		}
		CHECK(allm_block_pool_check(&rt->kv->gpu) == 0, "step %d", step);
		allm_engine_get_stats(e, &res->st);
		/* a step counted over budget (the CPU runs assert none) knowingly
		 * maps scratch past its share; the next one gives it back */
		if (res->st.over_budget_steps == over)
			CHECK(allm_engine_elastic_check(e, false, &err) == 0, "step %d: %s", step, err.msg);
		res->min_resident = ALLM_MIN(res->min_resident, res->st.resident_bytes);
		res->max_resident = ALLM_MAX(res->max_resident, res->st.resident_bytes);
	}
	CHECK(allm_engine_idle(e), "requests left");
	CHECK(allm_engine_elastic_check(e, true, &err) == 0, "idle: %s", err.msg);
	allm_engine_get_stats(e, &res->st);
	/* idle, nothing cached: at most the partial last page of the pool and of
	 * the scratch stay (a CPU page; on CUDA the arena takes those too) */
	size_t page = res->page = allm_mem_page(rt->kv->be, rt->kv->dev);
	if (elastic && !prefix_caching && page)
		CHECK((size_t)res->st.resident_bytes <= 2 * page, "idle: %lld bytes of pages mapped",
		      (long long)res->st.resident_bytes);
	res->reserved = (size_t)rt->kv->gpu.capacity * rt->kv->block_bytes +
			allm_executor_scratch_bytes(&rt->model->cfg, e->ex->cap_tokens);
	allm_engine_free(e);
	allm_predictor_free(pred);
	allm_runtime_close(rt);
}

static void model(const char *dummy)
{
	const char *name = dummy ? dummy : "stories260K";
	double budget = budget_for(dummy, 40);
	static const enum allm_preempt_mode pms[] = {ALLM_PREEMPT_ADAPTIVE, ALLM_PREEMPT_SWAP, ALLM_PREEMPT_RECOMPUTE};
	for (size_t p = 0; p < ALLM_ARRAY_SIZE(pms); p++) {
		struct result off, on;
		run(dummy, budget, false, pms[p], 0, &off);
		run(dummy, budget, true, pms[p], 0, &on);
		const char *pn = allm_preempt_name(pms[p]);
		for (int i = 0; i < N_REQ; i++)
			CHECK(off.out.hash[i] == on.out.hash[i] && off.out.n[i] == on.out.n[i],
			      "%s %s: request %d differs with elastic memory (%d vs %d tokens)", name, pn, i,
			      off.out.n[i], on.out.n[i]);
		CHECK(!off.st.elastic && on.st.elastic, "%s: elastic flags", name);
		/* recompute's admission keeps room for growth: fewer run, none preempted */
		CHECK(pms[p] == ALLM_PREEMPT_RECOMPUTE || off.st.preempt_swap + off.st.preempt_recompute > 0,
		      "%s %s: the static split never preempted", name, pn);
		CHECK(on.st.max_running > off.st.max_running, "%s %s: elastic ran %d at most, static %d", name, pn,
		      on.st.max_running, off.st.max_running);
		/* the stress: the line moves both ways, again and again */
		CHECK(on.st.inflations >= 5 && on.st.deflations >= 5, "%s %s: %lld inflations, %lld deflations",
		      name, pn, (long long)on.st.inflations, (long long)on.st.deflations);
		CHECK(on.st.over_budget_steps == 0, "%s %s: %lld steps over budget", name, pn,
		      (long long)on.st.over_budget_steps);
		printf("%s %s: largest batch static %d, elastic %d; preemptions static %lld, elastic %lld; "
		       "pool decisions %lld inflate, %lld deflate\n",
		       name, pn, off.st.max_running, on.st.max_running,
		       (long long)(off.st.preempt_swap + off.st.preempt_recompute),
		       (long long)(on.st.preempt_swap + on.st.preempt_recompute), (long long)on.st.inflations,
		       (long long)on.st.deflations);
	}
	/* a client dies mid-flight: its requests cancelled, nothing stays mapped */
	struct result c;
	run(dummy, budget, true, ALLM_PREEMPT_ADAPTIVE, 25, &c);
	/* with the prefix cache: a deflation may reclaim cached blocks nobody
	 * holds (evicted down the tiers), idle keeps what the cache holds mapped */
	struct result pc_off, pc_on;
	prefix_caching = true;
	run(dummy, budget, false, ALLM_PREEMPT_ADAPTIVE, 0, &pc_off);
	run(dummy, budget, true, ALLM_PREEMPT_ADAPTIVE, 0, &pc_on);
	prefix_caching = false;
	for (int i = 0; i < N_REQ; i++)
		CHECK(pc_off.out.hash[i] == pc_on.out.hash[i] && pc_off.out.n[i] == pc_on.out.n[i],
		      "%s, prefix caching: request %d differs with elastic memory", name, i);
}

/* CUDA: the VMM arena against the cudaMalloc fallback under one schedule. */
static void model_cuda(const char *dummy)
{
	const char *name = dummy ? dummy : "stories260K";
	double budget = budget_for(dummy, 40);
	static const enum allm_preempt_mode pms[] = {ALLM_PREEMPT_SWAP, ALLM_PREEMPT_RECOMPUTE};
	for (size_t p = 0; p < ALLM_ARRAY_SIZE(pms); p++) {
		struct result off, vmm, plain;
		const char *pn = allm_preempt_name(pms[p]);
		run(dummy, budget, false, pms[p], 0, &off);
		run(dummy, budget, true, pms[p], 0, &vmm);
		no_vmm = true;
		run(dummy, budget, true, pms[p], 0, &plain);
		no_vmm = false;
		int differ = 0;
		for (int i = 0; i < N_REQ; i++) {
			CHECK(vmm.out.hash[i] == plain.out.hash[i] && vmm.out.n[i] == plain.out.n[i],
			      "%s %s: request %d differs between the VMM arena and cudaMalloc (%d vs %d tokens)",
			      name, pn, i, vmm.out.n[i], plain.out.n[i]);
			differ += off.out.hash[i] != vmm.out.hash[i];
		}
		CHECK(vmm.st.inflations == plain.st.inflations && vmm.st.deflations == plain.st.deflations,
		      "%s %s: the schedules differ (%lld/%lld vs %lld/%lld pool decisions)", name, pn,
		      (long long)vmm.st.inflations, (long long)vmm.st.deflations,
		      (long long)plain.st.inflations, (long long)plain.st.deflations);
		CHECK(vmm.st.inflations >= 5 && vmm.st.deflations >= 5, "%s %s: %lld inflations, %lld deflations",
		      name, pn, (long long)vmm.st.inflations, (long long)vmm.st.deflations);
		CHECK(plain.max_resident == 0, "%s %s: the fallback reported pages", name, pn);
		/* the arena gave chunks back: below the reservations at every step
		 * (a pool smaller than a chunk is a cudaMalloc, stories260K's) */
		CHECK(!vmm.page || (vmm.max_resident > 0 && (size_t)vmm.max_resident < vmm.reserved),
		      "%s %s: %lld bytes mapped at most, %zu reserved", name, pn, (long long)vmm.max_resident,
		      vmm.reserved);
		printf("%s %s: %zu-byte pages, mapped %.1f..%.1f MiB of %.1f MiB reserved; largest batch static %d, elastic %d; "
		       "%d of %d requests differ from the static split (CUDA is not batch-invariant)\n",
		       name, pn, vmm.page, vmm.min_resident / 1048576.0, vmm.max_resident / 1048576.0,
		       vmm.reserved / 1048576.0, off.st.max_running, vmm.st.max_running, differ, N_REQ);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "cuda")) {
		struct allm_err err = {{0}};
		allm_backend_t *be = NULL;
		struct allm_backend_env env;
		allm_backend_env_read(&env);
		struct allm_backend_opts bo = {.env = &env};
		int r = allm_backend_create("cuda", &bo, &be, NULL, 0, &err);
		if (r == -ENODEV || r == -ENOSYS) {
			printf("SKIP: %s\n", err.msg);
			return 77;
		}
		if (r) {
			fprintf(stderr, "FAIL: %s\n", err.msg);
			return 1;
		}
		printf("%s\n", be->iface->describe(be));
		allm_backend_destroy(be);
		device = "cuda";
		model_cuda(NULL);
		model_cuda("medium");
		if (n_fail)
			fprintf(stderr, "%d n_fail\n", n_fail);
		return n_fail ? 1 : 0;
	}
	model(NULL); /* the embedded stories260K */
	model("tiny");
	if (n_fail)
		fprintf(stderr, "%d n_fail\n", n_fail);
	return n_fail ? 1 : 0;
}
