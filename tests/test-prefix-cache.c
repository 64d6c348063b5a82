/* Description: the prefix cache when a chain's parent block is dropped before its children (issue 49's soak: a router saw one block hash stored in two tiers at once): the children can never be hit again, so they leave at once (their blocks freed, KV events told), a child a request still holds stays silent until it is let go and is then reclaimed, never written down; the same chain stored again shows each key in one tier only; a child is never published under such an orphan; an eviction whose write-down reclaims the block's own parent loses nothing. Deterministic: each case built step by step on a CPU-backend KV cache of a few blocks. */
#include "backend.h"
#include "block-pool.h"
#include "kv-cache.h"
#include "prefix-cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int n_fail;
static const char *phase = "";

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			n_fail++;                                                         \
			fprintf(stderr, "FAIL %s:%d [%s]: %s: ", __FILE__, __LINE__, phase, #cond); \
			fprintf(stderr, __VA_ARGS__);                                     \
			fputc('\n', stderr);                                              \
		}                                                                         \
	} while (0)

/* --- what a router would see: per key, the tiers it is stored in ------------------------ */

enum { MAX_KEYS = 64 };
struct seen {
	struct allm_pc_key key[MAX_KEYS];
	int32_t in[MAX_KEYS][ALLM_KV_TIER_COUNT];
	int n;
};
static struct seen seen;
static struct allm_prefix_cache *cur_pc;

static int key_slot(const struct allm_pc_key *k)
{
	for (int i = 0; i < seen.n; i++)
		if (!memcmp(seen.key[i].b, k->b, sizeof(k->b)))
			return i;
	if (seen.n == MAX_KEYS)
		return -1;
	seen.key[seen.n] = *k;
	memset(seen.in[seen.n], 0, sizeof(seen.in[0]));
	return seen.n++;
}

static void on_change(void *ctx, enum allm_pc_change what, int32_t e, enum allm_kv_tier t)
{
	(void)ctx;
	if (what == ALLM_PC_CLEARED) {
		memset(seen.in, 0, sizeof(seen.in));
		return;
	}
	const struct allm_pc_entry *x = allm_pc_entry(cur_pc, e);
	CHECK(x != NULL, "event for free slot %d", e);
	if (!x)
		return;
	int s = key_slot(&x->key);
	if (s < 0)
		return;
	if (what == ALLM_PC_REMOVED) {
		CHECK(seen.in[s][t] == 1, "key %d removed from tier %d where it is %d times", s, t, seen.in[s][t]);
		seen.in[s][t]--;
		return;
	}
	int32_t total = 0;
	for (int k = 0; k < ALLM_KV_TIER_COUNT; k++)
		total += seen.in[s][k];
	CHECK(total == 0, "key %d stored in tier %d while stored in device %d, host %d, disk %d", s, t, seen.in[s][0],
	      seen.in[s][1], seen.in[s][2]);
	seen.in[s][t]++;
}

/* The cache's own count per tier equals what the events said (a router's index
 * against the engine's status, as the soak compares them). */
static void agree(void)
{
	struct allm_pc_stats st;
	allm_pc_get_stats(cur_pc, &st);
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++) {
		int32_t n = 0;
		for (int i = 0; i < seen.n; i++)
			n += seen.in[i][t];
		CHECK(n == st.blocks[t], "tier %d: %d stored as the events say, %d as the cache counts", t, n, st.blocks[t]);
	}
}

/* Tiers a key is stored in, as the events said. */
static int32_t stored(const struct allm_pc_key *k)
{
	int s = key_slot(k), n = 0;
	for (int t = 0; s >= 0 && t < ALLM_KV_TIER_COUNT; t++)
		n += seen.in[s][t];
	return n;
}

/* --- a cache of a few blocks ------------------------------------------------------------- */

struct rig {
	allm_backend_t *be;
	struct allm_kv_cache *kv;
	struct allm_prefix_cache *pc;
	struct allm_pc_domain dom;
};

static int rig_up(struct rig *r, int32_t n_device, int32_t n_host)
{
	struct allm_err err = {{0}};
	struct allm_backend_opts bo = {.n_threads = 1};
	struct allm_kv_layout lay = {1, 1, 4, 2, ALLM_DTYPE_F32}; /* blocks of 2 tokens */
	*r = (struct rig){.dom = {.uid = 7}};
	if (allm_backend_cpu_create(&bo, &r->be, &err) ||
	    allm_kv_cache_create(r->be, &lay, n_device, n_host, &r->kv, &err) ||
	    allm_prefix_cache_create(r->kv, "test-model", &r->pc)) {
		fprintf(stderr, "setup: %s\n", err.msg);
		n_fail++;
		return -1;
	}
	memset(&seen, 0, sizeof(seen));
	cur_pc = r->pc;
	allm_pc_set_observer(r->pc, &(struct allm_pc_observer){.changed = on_change});
	return 0;
}

static void rig_down(struct rig *r)
{
	CHECK(allm_pc_reset(r->pc) >= 0, "reset");
	for (int i = 0; i < seen.n; i++)
		CHECK(stored(&seen.key[i]) == 0, "key %d still stored after the last reset", i);
	CHECK(r->kv->gpu.n_cached == 0 && r->kv->cpu.n_cached == 0 && allm_block_pool_used(&r->kv->gpu) == 0,
	      "left: %d/%d cached, %d used", r->kv->gpu.n_cached, r->kv->cpu.n_cached, allm_block_pool_used(&r->kv->gpu));
	allm_prefix_cache_free(r->pc);
	allm_kv_cache_free(r->kv);
	allm_backend_destroy(r->be);
}

/* Chain `topic`'s keys and tokens for n blocks. */
static void chain(struct rig *r, int topic, int n, struct allm_pc_key *keys, int32_t *tok)
{
	struct allm_pc_key root;
	allm_pc_root(r->pc, &r->dom, &root);
	for (int i = 0; i < n; i++) {
		tok[2 * i] = 1000 * topic + i;
		tok[2 * i + 1] = 7;
		allm_pc_next_key(r->pc, i ? &keys[i - 1] : &root, tok + 2 * i, &keys[i]);
	}
}

/* owner computes block i of the chain itself and publishes it under parent:
 * its block (held by owner) in *blk, the entry back. */
static int32_t publish(struct rig *r, int64_t owner, const struct allm_pc_key *keys, const int32_t *tok, int i,
		       int32_t parent, int32_t *blk, int want_rc)
{
	int32_t e = -1;
	CHECK(allm_block_pool_alloc(&r->kv->gpu, owner, blk) == 0, "alloc for block %d", i);
	int rc = allm_pc_publish(r->pc, owner, *blk, &keys[i], parent, i, tok + 2 * i, &r->dom, &e);
	CHECK(rc == want_rc, "publish block %d: %d, wanted %d", i, rc, want_rc);
	CHECK(allm_pc_check(r->pc) == 0, "check after publish");
	agree();
	return e;
}

/* Evicts k cached device blocks (LRU first): an owner takes every free block
 * and k more, then gives them all back. */
static void evict_device(struct rig *r, int k)
{
	enum { X = 99 };
	int32_t ids[64], n = 0, want = r->kv->gpu.n_free + k;
	while (n < want && n < 64 && allm_block_pool_alloc(&r->kv->gpu, X, &ids[n]) == 0)
		n++;
	CHECK(n == want, "took %d device blocks, wanted %d", n, want);
	while (n > 0)
		allm_block_pool_release(&r->kv->gpu, X, ids[--n]);
	CHECK(allm_pc_check(r->pc) == 0, "check after evicting");
	agree();
}

/* --- the cases --------------------------------------------------------------------------- */

/* A parent dropped from the host while its child waits there; then the chain again. */
static void parent_dropped_first(void)
{
	struct rig r;
	phase = "parent dropped first";
	if (rig_up(&r, 4, 2))
		return;
	struct allm_pc_key k[2], z[1];
	int32_t t[4], tz[2], b0, b1, bz;
	chain(&r, 1, 2, k, t);
	chain(&r, 2, 1, z, tz);
	int32_t e0 = publish(&r, 1, k, t, 0, -1, &b0, 1);
	publish(&r, 1, k, t, 1, e0, &b1, 1);
	allm_block_pool_release(&r.kv->gpu, 1, b0); /* the parent is the older */
	allm_block_pool_release(&r.kv->gpu, 1, b1);
	evict_device(&r, 2); /* both to the host */
	CHECK(stored(&k[0]) == 1 && stored(&k[1]) == 1 && r.kv->cpu.n_cached == 2, "both on the host");
	publish(&r, 2, z, tz, 0, -1, &bz, 1);
	allm_block_pool_release(&r.kv->gpu, 2, bz);
	evict_device(&r, 1); /* z to the host reclaims the parent there (no disk) */
	CHECK(stored(&k[0]) == 0, "the parent went");
	CHECK(stored(&k[1]) == 0, "its child can never be hit again: it must go with it");
	CHECK(r.kv->cpu.n_cached == 1, "the child's host block is free again: %d cached", r.kv->cpu.n_cached);
	struct allm_pc_stats st;
	allm_pc_get_stats(r.pc, &st);
	CHECK(st.stranded == 1, "stranded %lld", (long long)st.stranded);
	/* the chain again: a miss, stored afresh, each key in one tier */
	int32_t ent[2];
	CHECK(allm_pc_match(r.pc, &r.dom, k, t, 2, ent) == 0, "a miss");
	int32_t f0 = publish(&r, 3, k, t, 0, -1, &b0, 1);
	publish(&r, 3, k, t, 1, f0, &b1, 1);
	CHECK(stored(&k[0]) == 1 && stored(&k[1]) == 1, "stored once each");
	CHECK(allm_pc_match(r.pc, &r.dom, k, t, 2, ent) == 2, "a hit of both");
	allm_block_pool_release(&r.kv->gpu, 3, b1);
	allm_block_pool_release(&r.kv->gpu, 3, b0);
	rig_down(&r);
}

/* A child a request holds while its parent (held by nobody) is dropped. */
static void held_child_orphaned(void)
{
	struct rig r;
	phase = "held child";
	if (rig_up(&r, 6, 1))
		return;
	struct allm_pc_key k[3], z[1];
	int32_t t[6], tz[2], a0, b0, b1, bz, c0, c1, x;
	chain(&r, 1, 3, k, t);
	chain(&r, 2, 1, z, tz);
	int32_t e0 = publish(&r, 1, k, t, 0, -1, &a0, 1);
	/* B computed block 0 too: A's entry stands, B's block stays B's own */
	CHECK(publish(&r, 2, k, t, 0, -1, &b0, 0) == e0, "the same entry");
	int32_t e1 = publish(&r, 2, k, t, 1, e0, &b1, 1); /* B holds the child */
	allm_block_pool_release(&r.kv->gpu, 1, a0);
	evict_device(&r, 1); /* the parent to the host */
	publish(&r, 3, z, tz, 0, -1, &bz, 1);
	allm_block_pool_release(&r.kv->gpu, 3, bz);
	evict_device(&r, 1); /* z to the host: the parent is dropped */
	CHECK(stored(&k[0]) == 0 && stored(&k[1]) == 0, "parent %d, held child %d tiers", stored(&k[0]),
	      stored(&k[1]));
	CHECK(allm_pc_entry(r.pc, e1) && allm_pc_entry(r.pc, e1)->orphan, "the held child is an orphan");
	allm_block_pool_release(&r.kv->gpu, 2, b1); /* let go and taken again: still nobody's cache */
	CHECK(allm_block_pool_ref(&r.kv->gpu, b1) == 0, "ref");
	agree();
	/* nothing may follow it */
	CHECK(allm_block_pool_alloc(&r.kv->gpu, 2, &x) == 0, "alloc");
	int32_t e2 = -1;
	CHECK(allm_pc_publish(r.pc, 2, x, &k[2], e1, 2, t + 4, &r.dom, &e2) == -ESTALE, "publish under an orphan");
	allm_block_pool_release(&r.kv->gpu, 2, x);
	/* C stores the chain again while B still holds the orphan */
	int32_t f0 = publish(&r, 4, k, t, 0, -1, &c0, 1);
	int32_t f1 = publish(&r, 4, k, t, 1, f0, &c1, 1);
	CHECK(f1 != e1 && stored(&k[1]) == 1, "one device copy heard of");
	/* B lets go: the orphan is reclaimed, not written down */
	allm_block_pool_release(&r.kv->gpu, 2, b1);
	allm_block_pool_release(&r.kv->gpu, 2, b0);
	struct allm_pc_stats before, after;
	allm_pc_get_stats(r.pc, &before);
	evict_device(&r, 1);
	allm_pc_get_stats(r.pc, &after);
	CHECK(!allm_pc_entry(r.pc, e1), "the orphan is gone");
	CHECK(after.written[ALLM_KV_TIER_HOST] == before.written[ALLM_KV_TIER_HOST], "the orphan was written down");
	CHECK(stored(&k[0]) == 1 && stored(&k[1]) == 1 && stored(&z[0]) == 1, "C's chain and z as they were");
	int32_t ent[2];
	CHECK(allm_pc_match(r.pc, &r.dom, k, t, 2, ent) == 2 && ent[1] == f1, "C's chain serves");
	allm_block_pool_release(&r.kv->gpu, 4, c1);
	allm_block_pool_release(&r.kv->gpu, 4, c0);
	rig_down(&r);
}

/* A device block's write-down needs the host's only block: its own parent's. */
static void write_down_reclaims_parent(void)
{
	struct rig r;
	phase = "write-down reclaims the parent";
	if (rig_up(&r, 4, 1))
		return;
	struct allm_pc_key k[2];
	int32_t t[4], b0, b1;
	chain(&r, 1, 2, k, t);
	int32_t e0 = publish(&r, 1, k, t, 0, -1, &b0, 1);
	publish(&r, 1, k, t, 1, e0, &b1, 1);
	allm_block_pool_release(&r.kv->gpu, 1, b0);
	allm_block_pool_release(&r.kv->gpu, 1, b1);
	evict_device(&r, 1); /* the parent to the host */
	CHECK(stored(&k[0]) == 1 && allm_pc_entry(r.pc, e0)->tier == ALLM_KV_TIER_HOST, "parent on the host");
	evict_device(&r, 1); /* the child: its write reclaims the parent, and it goes too */
	CHECK(stored(&k[0]) == 0 && stored(&k[1]) == 0, "parent %d, child %d tiers", stored(&k[0]), stored(&k[1]));
	CHECK(r.kv->cpu.n_cached == 0 && allm_block_pool_used(&r.kv->cpu) == 0 && r.kv->gpu.n_cached == 0,
	      "blocks left: host %d cached %d used, device %d cached", r.kv->cpu.n_cached,
	      allm_block_pool_used(&r.kv->cpu), r.kv->gpu.n_cached);
	rig_down(&r);
}

int main(void)
{
	parent_dropped_first();
	held_child_orphaned();
	write_down_reclaims_parent();
	if (n_fail) {
		fprintf(stderr, "%d failures\n", n_fail);
		return 1;
	}
	printf("prefix cache: dropped parents strand their children cleanly (3 cases)\n");
	return 0;
}
