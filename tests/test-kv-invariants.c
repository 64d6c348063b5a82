/* Description: 20k seeded random alloc/free/swap-out/swap-in/resize operations on a CPU-backend KV cache keep both block pools consistent (one owner per block, free+used+retired accounting, deficit paid back by releases) and every block's contents intact across swaps and pool reallocation; then 20k random operations under a prefix cache over device, host and disk (shared hits, publishing, evictions down the tiers, restores, resizes of all three pools, cache resets) keep refcounts equal to holders, free + used + cached-free + retired = capacity in every pool, every cached block's bytes those of its tokens, and nothing left after the last release and a reset. */
#include "backend.h"
#include "block-pool.h"
#include "kv-cache.h"
#include "prefix-cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int n_fail;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			n_fail++; \
			if (n_fail < 30) { \
				fprintf(stderr, "FAIL %s:%d (op %d): %s: ", __FILE__, __LINE__, op_no, #cond); \
				fprintf(stderr, __VA_ARGS__); \
				fputc('\n', stderr); \
			} \
		} \
	} while (0)

enum { N_OWNERS = 10, MAX_BLOCKS = 64, N_OPS = 20000 };
enum where { NOWHERE, ON_GPU, ON_CPU };

struct owner {
	enum where where;
	int32_t n;
	int32_t ids[MAX_BLOCKS]; /* block ids in the pool it is in */
	uint32_t seed[MAX_BLOCKS]; /* pattern of each logical block */
	int32_t prev_gpu[MAX_BLOCKS]; /* GPU ids before the last swap out */
};

static int op_no;
static struct owner own[N_OWNERS];
static uint64_t rng = 0x5eed1234abcdull;
static uint32_t next_seed = 1;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static uint32_t pat(uint32_t seed, size_t j)
{
	uint64_t z = (uint64_t)seed * 0x9E3779B97F4A7C15ull + j;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return (uint32_t)(z ^ (z >> 31));
}

static uint32_t *block_mem(struct allm_kv_cache *kv, enum where w, int32_t id)
{
	return (uint32_t *)((char *)(w == ON_GPU ? kv->dev : kv->host) + (size_t)id * kv->block_bytes);
}

static void fill(struct allm_kv_cache *kv, int32_t id, uint32_t seed)
{
	uint32_t *m = block_mem(kv, ON_GPU, id);
	for (size_t j = 0; j < kv->block_bytes / 4; j++)
		m[j] = pat(seed, j);
}

/* The whole state against the tracked owners. */
static void check_all(struct allm_kv_cache *kv)
{
	struct allm_block_pool *pools[2] = {&kv->gpu, &kv->cpu};
	for (int p = 0; p < 2; p++) {
		struct allm_block_pool *bp = pools[p];
		const char *pn = p ? "CPU" : "GPU";
		CHECK(allm_block_pool_check(bp) == 0, "%s pool check", pn);
		int32_t used = allm_block_pool_used(bp), tracked = 0;
		uint8_t *seen = calloc((size_t)ALLM_MAX(bp->capacity, 1), 1);
		for (int o = 0; o < N_OWNERS; o++) {
			if (own[o].where != (p ? ON_CPU : ON_GPU))
				continue;
			for (int32_t i = 0; i < own[o].n; i++) {
				int32_t id = own[o].ids[i];
				CHECK(id >= 0 && id < bp->capacity, "%s id %d out of range", pn, id);
				if (id < 0 || id >= bp->capacity)
					continue;
				CHECK(!seen[id], "%s block %d has two owners", pn, id);
				seen[id] = 1;
				CHECK(bp->owner[id] == o, "%s block %d: pool says owner %lld, tracked %d", pn, id,
				      (long long)bp->owner[id], o);
				tracked++;
				/* contents */
				const uint32_t *m = block_mem(kv, own[o].where, id);
				size_t bad = 0;
				for (size_t j = 0; j < kv->block_bytes / 4; j++)
					bad += m[j] != pat(own[o].seed[i], j);
				CHECK(bad == 0, "%s block %d (owner %d, logical %d): %zu words corrupted", pn, id, o,
				      i, bad);
			}
		}
		int32_t owned = 0;
		for (int32_t id = 0; id < bp->capacity; id++)
			owned += bp->owner[id] >= 0;
		CHECK(owned == tracked && used == tracked, "%s: pool has %d owned / %d used, tracked %d",
		      pn, owned, used, tracked);
		CHECK(bp->capacity == bp->n_free + used + bp->n_retired,
		      "%s: capacity %d != free %d + used %d + retired %d", pn, bp->capacity, bp->n_free,
		      used, bp->n_retired);
		/* the deficit is exactly what is used above the configured count */
		CHECK(bp->deficit == ALLM_MAX(0, used - bp->n_total) &&
			      bp->n_free == ALLM_MAX(0, bp->n_total - used),
		      "%s: total %d used %d: free %d deficit %d", pn, bp->n_total, used, bp->n_free,
		      bp->deficit);
		free(seen);
	}
}

struct pool_snap {
	int32_t n_free, deficit, n_retired, n_total, capacity;
};

static struct pool_snap snap(const struct allm_block_pool *p)
{
	return (struct pool_snap){p->n_free, p->deficit, p->n_retired, p->n_total, p->capacity};
}

static bool same(struct pool_snap a, struct pool_snap b)
{
	return !memcmp(&a, &b, sizeof(a));
}

/* After k blocks went back to a pool that owed d: min(k, d) retired, the rest free. */
static void check_release(struct pool_snap before, const struct allm_block_pool *p, int32_t k,
			  const char *what)
{
	int32_t pay = ALLM_MIN(k, before.deficit);
	CHECK(p->deficit == before.deficit - pay && p->n_retired == before.n_retired + pay &&
		      p->n_free == before.n_free + (k - pay),
	      "%s of %d blocks: deficit %d->%d, retired %d->%d, free %d->%d", what, k, before.deficit,
	      p->deficit, before.n_retired, p->n_retired, before.n_free, p->n_free);
}

/* --- phase 2: the pools under a prefix cache ------------------------------------------- */

enum { P_OWNERS = 8, P_OPS = 20000, P_TOPICS = 4, P_MAX = 8 };

/* A sequence of cached-able blocks: block i of topic t has seed t * 100 + i (two
 * owners of one topic share a prefix), its tokens derive from the seed. */
struct powner {
	int32_t n; /* blocks in its table */
	int32_t topic;
	int32_t ids[P_MAX + 16]; /* device blocks: a chain of P_MAX at most, then fillers */
	uint32_t seed[P_MAX + 16];
	int32_t n_chain; /* leading blocks that are the topic's chain */
};

static struct powner pown[P_OWNERS];
static int64_t p_restored, p_shared, p_published, p_resets, p_lower_hits;

static void seed_tokens(uint32_t seed, int32_t *tok)
{
	tok[0] = (int32_t)(seed & 0x7fffffff);
	tok[1] = (int32_t)((seed * 2654435761u) & 0x7fff);
}

static bool block_is(struct allm_kv_cache *kv, bool device, int32_t id, uint32_t seed)
{
	const uint32_t *m = (const uint32_t *)((char *)(device ? kv->dev : kv->host) + (size_t)id * kv->block_bytes);
	for (size_t j = 0; j < kv->block_bytes / 4; j++)
		if (m[j] != pat(seed, j))
			return false;
	return true;
}

/* Everything at once: pools, cache, refcounts = holders, contents. */
static void pcheck(struct allm_kv_cache *kv, struct allm_prefix_cache *pc)
{
	struct allm_block_pool *pools[3] = {&kv->gpu, &kv->cpu, allm_kv_disk_blocks(kv)};
	for (int t = 0; t < 3; t++) {
		struct allm_block_pool *p = pools[t];
		CHECK(allm_block_pool_check(p) == 0, "tier %d pool check", t);
		CHECK(p->capacity == p->n_free + allm_block_pool_used(p) + p->n_cached + p->n_retired,
		      "tier %d: capacity %d != free %d + used %d + cached-free %d + retired %d", t, p->capacity,
		      p->n_free, allm_block_pool_used(p), p->n_cached, p->n_retired);
	}
	CHECK(allm_pc_check(pc) == 0, "prefix cache check");
	int32_t *holders = calloc((size_t)kv->gpu.capacity, sizeof(int32_t));
	for (int o = 0; o < P_OWNERS; o++)
		for (int32_t i = 0; i < pown[o].n; i++) {
			int32_t id = pown[o].ids[i];
			CHECK(kv->gpu.owner[id] == o || kv->gpu.owner[id] == ALLM_BLOCK_CACHED, "owner %d block %d: pool owner %lld",
			      o, id, (long long)kv->gpu.owner[id]);
			holders[id]++;
			CHECK(block_is(kv, true, id, pown[o].seed[i]), "owner %d block %d (logical %d) corrupted", o, id, i);
		}
	for (int32_t id = 0; id < kv->gpu.capacity; id++)
		CHECK(kv->gpu.owner[id] == ALLM_BLOCK_CACHED ? kv->gpu.refs[id] == holders[id] : holders[id] <= 1,
		      "device block %d: %d refs, %d holders", id, kv->gpu.refs[id], holders[id]);
	free(holders);
	/* every cached block in memory holds its tokens' bytes */
	for (int32_t e = 0; e < allm_pc_capacity(pc); e++) {
		const struct allm_pc_entry *x = allm_pc_entry(pc, e);
		if (!x || x->tier == ALLM_KV_TIER_DISK)
			continue;
		const int32_t *tok = allm_pc_tokens(pc, e);
		CHECK(block_is(kv, x->tier == ALLM_KV_TIER_DEVICE, x->block, (uint32_t)tok[0]),
		      "entry %d (%s block %d) does not hold its tokens' bytes", e, allm_kv_tier_name(x->tier), x->block);
	}
}

static void prelease(struct allm_kv_cache *kv, int o)
{
	struct powner *w = &pown[o];
	for (int32_t i = w->n - 1; i >= 0; i--)
		CHECK(allm_block_pool_release(&kv->gpu, o, w->ids[i]) == 0, "release of owner %d block %d", o, w->ids[i]);
	w->n = w->n_chain = 0;
}

/* Owner o takes topic t's chain of len blocks: cached ones shared or restored,
 * the rest filled and published. */
static void pbuild(struct allm_kv_cache *kv, struct allm_prefix_cache *pc, int o, int32_t t, int32_t len)
{
	struct powner *w = &pown[o];
	struct allm_pc_domain dom = {.uid = 1};
	struct allm_pc_key root, keys[P_MAX];
	int32_t tok[P_MAX * 2], ent[P_MAX];
	allm_pc_root(pc, &dom, &root);
	for (int32_t i = 0; i < len; i++) {
		seed_tokens((uint32_t)(t * 100 + i), tok + 2 * i);
		allm_pc_next_key(pc, i ? &keys[i - 1] : &root, tok + 2 * i, &keys[i]);
	}
	int32_t m = allm_pc_match(pc, &dom, keys, tok, len, ent);
	int32_t dev = 0, low[P_MAX], n_low = 0, got[P_MAX];
	for (; dev < m && allm_pc_entry(pc, ent[dev])->tier == ALLM_KV_TIER_DEVICE; dev++) {
		CHECK(allm_pc_take(pc, ent[dev], &w->ids[dev]) == 0, "take");
		w->seed[dev] = (uint32_t)(t * 100 + dev);
		p_shared++;
	}
	w->n = dev;
	for (int32_t i = dev; i < m; i++)
		low[n_low++] = ent[i];
	if (n_low) {
		struct allm_swap_result res[ALLM_KV_TIER_COUNT];
		struct allm_err e2 = {{0}};
		int rc = allm_pc_restore(pc, o, low, n_low, got, res, &e2);
		CHECK(rc == 0 || rc == -ENOSPC, "restore: %d %s", rc, e2.msg);
		if (rc == 0) {
			for (int32_t i = 0; i < n_low; i++) {
				w->ids[w->n] = got[i];
				w->seed[w->n] = (uint32_t)(t * 100 + w->n);
				w->n++;
			}
			p_restored += n_low;
			p_lower_hits++;
		}
	}
	/* the rest: new blocks, filled, published */
	while (w->n < len) {
		int32_t id, e;
		if (allm_block_pool_alloc(&kv->gpu, o, &id))
			break;
		uint32_t sd = (uint32_t)(t * 100 + w->n);
		fill(kv, id, sd);
		w->ids[w->n] = id;
		w->seed[w->n] = sd;
		int32_t parent = w->n ? ent[w->n - 1] : -1;
		int rc = allm_pc_publish(pc, o, id, &keys[w->n], parent, w->n, tok + 2 * w->n, &dom, &e);
		CHECK(rc >= 0, "publish: %d", rc);
		ent[w->n] = e;
		p_published += rc == 1;
		w->n++;
	}
	w->n_chain = w->n;
	w->topic = t;
}

static void test_prefix_cache_pools(void)
{
	struct allm_err err = {{0}};
	allm_backend_t *be = NULL;
	struct allm_kv_cache *kv = NULL;
	struct allm_prefix_cache *pc = NULL;
	struct allm_backend_opts bo = {.n_threads = 1};
	struct allm_kv_layout lay = {1, 1, 4, 2, ALLM_DTYPE_F32}; /* 64-byte blocks of 2 tokens */
	char dir[] = "/tmp/allm-kvinv-XXXXXX", note[256];
	if (!mkdtemp(dir) || allm_backend_cpu_create(&bo, &be, &err) || allm_kv_cache_create(be, &lay, 20, 10, &kv, &err) ||
	    allm_kv_attach_disk(kv, dir, 16, note, sizeof(note), &err) ||
	    allm_prefix_cache_create(kv, "test-model", &pc)) {
		fprintf(stderr, "setup: %s\n", err.msg);
		n_fail++;
		return;
	}
	int64_t n_ops[7] = {0};
	static const char *names[7] = {"build", "release", "filler", "resize-gpu", "resize-cpu", "resize-disk", "reset"};
	for (op_no = 0; op_no < P_OPS; op_no++) {
		int o = (int)rnd(P_OWNERS);
		struct powner *w = &pown[o];
		uint32_t r = rnd(100);
		int kind = r < 40 ? 0 : r < 70 ? 1 : r < 82 ? 2 : r < 88 ? 3 : r < 93 ? 4 : r < 98 ? 5 : 6;
		n_ops[kind]++;
		switch (kind) {
		case 0:
			if (w->n == 0)
				pbuild(kv, pc, o, (int32_t)rnd(P_TOPICS), 1 + (int32_t)rnd(P_MAX));
			break;
		case 1:
			prelease(kv, o);
			break;
		case 2: /* pressure: exclusive blocks that reclaim cached ones */
			for (int32_t k = 1 + (int32_t)rnd(6); k > 0 && w->n < P_MAX + 16; k--) {
				int32_t id;
				if (allm_block_pool_alloc(&kv->gpu, o, &id))
					break;
				w->seed[w->n] = 100000 + next_seed++;
				fill(kv, id, w->seed[w->n]);
				w->ids[w->n++] = id;
			}
			break;
		case 3:
			CHECK(allm_kv_resize_gpu(kv, 8 + (int32_t)rnd(30), &err) == 0, "%s", err.msg);
			break;
		case 4:
			CHECK(allm_kv_resize_cpu(kv, (int32_t)rnd(20), &err) == 0, "%s", err.msg);
			break;
		case 5:
			CHECK(allm_kv_resize_disk(kv, (int32_t)rnd(24), &err) == 0, "%s", err.msg);
			break;
		case 6: {
			allm_pc_reset(pc);
			p_resets++;
			/* nothing nobody holds is left */
			CHECK(kv->gpu.n_cached == 0 && kv->cpu.n_cached == 0 && allm_kv_disk_blocks(kv)->n_cached == 0,
			      "after a reset: %d/%d/%d cached-free", kv->gpu.n_cached, kv->cpu.n_cached,
			      allm_kv_disk_blocks(kv)->n_cached);
			break;
		}
		}
		pcheck(kv, pc);
		if (n_fail >= 30)
			break;
	}
	for (int o = 0; o < P_OWNERS; o++)
		prelease(kv, o);
	pcheck(kv, pc);
	allm_pc_reset(pc);
	struct allm_pc_stats st;
	allm_pc_get_stats(pc, &st);
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	CHECK(allm_block_pool_used(&kv->gpu) == 0 && allm_block_pool_used(&kv->cpu) == 0 && allm_block_pool_used(dp) == 0 &&
		      kv->gpu.n_cached + kv->cpu.n_cached + dp->n_cached == 0 &&
		      st.blocks[0] + st.blocks[1] + st.blocks[2] == 0,
	      "end: used %d/%d/%d, cached %d/%d/%d", allm_block_pool_used(&kv->gpu), allm_block_pool_used(&kv->cpu),
	      allm_block_pool_used(dp), kv->gpu.n_cached, kv->cpu.n_cached, dp->n_cached);
	/* what this phase is about did happen */
	CHECK(p_shared > 500 && p_restored > 200 && st.written[1] > 100 && st.written[2] > 50 &&
		      st.restored[1] > 20 && st.restored[2] > 20 && st.dropped[2] > 10,
	      "shared %lld, restored %lld (host %lld, disk %lld), written host %lld disk %lld, dropped from disk %lld",
	      (long long)p_shared, (long long)p_restored, (long long)st.restored[1], (long long)st.restored[2],
	      (long long)st.written[1], (long long)st.written[2], (long long)st.dropped[2]);
	printf("prefix cache: %d ops:", P_OPS);
	for (int k = 0; k < 7; k++)
		printf(" %s %lld", names[k], (long long)n_ops[k]);
	printf("\n%lld shared hits, %lld blocks restored (host %lld, disk %lld), %lld published; written host %lld disk "
	       "%lld; dropped device %lld host %lld disk %lld; %lld resets\n",
	       (long long)p_shared, (long long)p_restored, (long long)st.restored[1], (long long)st.restored[2],
	       (long long)p_published, (long long)st.written[1], (long long)st.written[2], (long long)st.dropped[0],
	       (long long)st.dropped[1], (long long)st.dropped[2], (long long)p_resets);
	allm_prefix_cache_free(pc);
	allm_kv_cache_free(kv);
	allm_backend_destroy(be);
	rmdir(dir);
}

int main(void)
{
	struct allm_err err = {{0}};
	allm_backend_t *be = NULL;
	struct allm_kv_cache *kv = NULL;
	struct allm_backend_opts bo = {.n_threads = 1};
	struct allm_kv_layout lay = {1, 1, 4, 2, ALLM_DTYPE_F32}; /* 64-byte blocks */
	if (allm_backend_cpu_create(&bo, &be, &err) || allm_kv_cache_create(be, &lay, 24, 16, &kv, &err)) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return 1;
	}
	int64_t n_ops[8] = {0}, n_enospc = 0, n_moved_in = 0, n_realloc_with_data = 0;
	int64_t n_deficit_states = 0, n_paid = 0;
	static const char *op_names[8] = {"alloc",  "free",	"swap-out",   "swap-in",
					  "trim",   "resize-gpu", "resize-cpu", "double-free"};
	for (op_no = 0; op_no < N_OPS; op_no++) {
		int o = (int)rnd(N_OWNERS);
		struct owner *w = &own[o];
		uint32_t r = rnd(100);
		int kind = r < 30 ? 0 : r < 42 ? 1 : r < 57 ? 2 : r < 72 ? 3 : r < 78 ? 4 : r < 87 ? 5 : r < 96 ? 6 : 7;
		n_ops[kind]++;
		switch (kind) {
		case 0: { /* alloc 1..4 GPU blocks */
			if (w->where == ON_CPU)
				break;
			int32_t k = 1 + (int32_t)rnd(4);
			for (int32_t i = 0; i < k && w->n < MAX_BLOCKS; i++) {
				int32_t id = -1;
				struct pool_snap b = snap(&kv->gpu);
				int rc = allm_block_pool_alloc(&kv->gpu, o, &id);
				if (rc) {
					CHECK(rc == -ENOSPC && b.n_free == 0 && same(b, snap(&kv->gpu)),
					      "alloc failed with %d, %d free", rc, b.n_free);
					n_enospc++;
					break;
				}
				w->where = ON_GPU;
				w->ids[w->n] = id;
				w->seed[w->n] = next_seed++;
				fill(kv, id, w->seed[w->n]);
				w->n++;
			}
			break;
		}
		case 1: { /* free everything the owner holds */
			if (w->where == NOWHERE)
				break;
			struct allm_block_pool *p = w->where == ON_GPU ? &kv->gpu : &kv->cpu;
			struct pool_snap b = snap(p);
			n_paid += b.deficit > 0;
			for (int32_t i = 0; i < w->n; i++)
				CHECK(allm_block_pool_release(p, o, w->ids[i]) == 0, "release %d", w->ids[i]);
			check_release(b, p, w->n, "free");
			w->n = 0;
			w->where = NOWHERE;
			break;
		}
		case 2:
		case 3: { /* swap out / in */
			bool out = kind == 2;
			if (w->where != (out ? ON_GPU : ON_CPU) || w->n == 0)
				break;
			struct allm_block_pool *from = out ? &kv->gpu : &kv->cpu, *to = out ? &kv->cpu : &kv->gpu;
			struct pool_snap bf = snap(from), bt = snap(to);
			int32_t dst[MAX_BLOCKS];
			struct allm_swap_result res = {0};
			int rc = out ? allm_kv_swap_out(kv, o, w->ids, w->n, dst, &res, &err)
				     : allm_kv_swap_in(kv, o, w->ids, w->n, dst, &res, &err);
			if (bt.n_free < w->n) {
				CHECK(rc == -ENOSPC && same(bf, snap(from)) && same(bt, snap(to)),
				      "swap of %d blocks into %d free: %d", w->n, bt.n_free, rc);
				n_enospc++;
				break;
			}
			CHECK(rc == 0, "swap %s: %s", out ? "out" : "in", err.msg);
			if (rc)
				break;
			CHECK(res.bytes == (uint64_t)w->n * kv->block_bytes &&
				      res.n_runs == allm_kv_count_runs(w->ids, dst, w->n) && res.n_runs >= 1,
			      "swap result: %llu bytes, %d runs", (unsigned long long)res.bytes, res.n_runs);
			CHECK(to->n_free == bt.n_free - w->n && to->deficit == bt.deficit,
			      "swap target pool: free %d->%d", bt.n_free, to->n_free);
			check_release(bf, from, w->n, out ? "swap out" : "swap in");
			n_paid += bf.deficit > 0;
			if (out)
				memcpy(w->prev_gpu, w->ids, sizeof(int32_t) * (size_t)w->n);
			else if (memcmp(w->prev_gpu, dst, sizeof(int32_t) * (size_t)w->n))
				n_moved_in++;
			memcpy(w->ids, dst, sizeof(int32_t) * (size_t)w->n);
			w->where = out ? ON_CPU : ON_GPU;
			break;
		}
		case 4: { /* give back the last block (a sequence trimmed) */
			if (w->where == NOWHERE || w->n == 0)
				break;
			struct allm_block_pool *p = w->where == ON_GPU ? &kv->gpu : &kv->cpu;
			struct pool_snap b = snap(p);
			CHECK(allm_block_pool_release(p, o, w->ids[w->n - 1]) == 0, "trim");
			check_release(b, p, 1, "trim");
			if (--w->n == 0)
				w->where = NOWHERE;
			break;
		}
		case 5:
		case 6: { /* resize a pool, often below what is in use */
			bool gpu = kind == 5;
			struct allm_block_pool *p = gpu ? &kv->gpu : &kv->cpu;
			/* the range widens over the run so the memory keeps being regrown */
			int32_t span = 40 + op_no / 200;
			int32_t n = gpu ? 1 + (int32_t)rnd((uint32_t)span) : (int32_t)rnd((uint32_t)span - 7);
			void *mem = gpu ? kv->dev : kv->host;
			int32_t used = allm_block_pool_used(p);
			int rc = gpu ? allm_kv_resize_gpu(kv, n, &err) : allm_kv_resize_cpu(kv, n, &err);
			CHECK(rc == 0, "resize %s to %d: %s", gpu ? "gpu" : "cpu", n, err.msg);
			CHECK(p->n_total == n, "n_total %d after resize to %d", p->n_total, n);
			if ((gpu ? kv->dev : kv->host) != mem && used > 0)
				n_realloc_with_data++;
			n_deficit_states += p->deficit > 0;
			break;
		}
		case 7: { /* a double free or a release by the wrong owner changes nothing */
			if (w->where == NOWHERE || w->n == 0)
				break;
			struct allm_block_pool *p = w->where == ON_GPU ? &kv->gpu : &kv->cpu;
			struct pool_snap b = snap(p);
			int other = (o + 1) % N_OWNERS;
			CHECK(allm_block_pool_release(p, other, w->ids[0]) == -EINVAL, "release by owner %d",
			      other);
			CHECK(allm_block_pool_release(p, o, p->capacity) == -EINVAL, "release past capacity");
			CHECK(same(b, snap(p)) && p->owner[w->ids[0]] == o, "a refused release changed the pool");
			break;
		}
		}
		check_all(kv);
		if (n_fail >= 30)
			break;
	}
	/* release everything: both pools end empty, the deficits paid */
	for (int o = 0; o < N_OWNERS; o++) {
		struct owner *w = &own[o];
		struct allm_block_pool *p = w->where == ON_GPU ? &kv->gpu : &kv->cpu;
		for (int32_t i = 0; i < w->n; i++)
			CHECK(allm_block_pool_release(p, o, w->ids[i]) == 0, "final release");
		w->n = 0;
		w->where = NOWHERE;
	}
	check_all(kv);
	CHECK(allm_block_pool_used(&kv->gpu) == 0 && allm_block_pool_used(&kv->cpu) == 0 &&
		      kv->gpu.deficit == 0 && kv->cpu.deficit == 0 && kv->gpu.n_free == kv->gpu.n_total &&
		      kv->cpu.n_free == kv->cpu.n_total,
	      "end: GPU %d used %d free of %d, CPU %d used %d free of %d",
	      allm_block_pool_used(&kv->gpu), kv->gpu.n_free, kv->gpu.n_total,
	      allm_block_pool_used(&kv->cpu), kv->cpu.n_free, kv->cpu.n_total);
	/* the scenarios this test is about did happen */
	CHECK(n_deficit_states > 50 && n_paid > 50, "shrinks below use: %lld, paid back: %lld",
	      (long long)n_deficit_states, (long long)n_paid);
	CHECK(n_moved_in > 50, "swap-ins to other ids: %lld", (long long)n_moved_in);
	CHECK(n_realloc_with_data > 10, "reallocations with live data: %lld",
	      (long long)n_realloc_with_data);
	printf("%d ops:", N_OPS);
	for (int k = 0; k < 8; k++)
		printf(" %s %lld", op_names[k], (long long)n_ops[k]);
	printf("\n%lld refused for lack of space, %lld resizes left a deficit, %lld releases paid one "
	       "back, %lld swap-ins landed on other ids, %lld reallocations moved live data; final "
	       "capacity GPU %d CPU %d\n",
	       (long long)n_enospc, (long long)n_deficit_states, (long long)n_paid,
	       (long long)n_moved_in, (long long)n_realloc_with_data, kv->gpu.capacity, kv->cpu.capacity);
	allm_kv_cache_free(kv);
	allm_backend_destroy(be);
	test_prefix_cache_pools();
	if (n_fail) {
		fprintf(stderr, "%d check(s) failed\n", n_fail);
		return 1;
	}
	printf("ok\n");
	return 0;
}
