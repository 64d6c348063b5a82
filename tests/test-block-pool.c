/* Description: KV block pool bookkeeping (order, exhaustion, bad releases, random-op invariants) and all-or-nothing sequence reservation on a CPU KV cache. */
#include "backend.h"
#include "block-pool.h"
#include "kv-cache.h"
#include "sequence.h"

#include <stdio.h>
#include <stdlib.h>

#include "test-check.h"

/* A copy of a pool's whole state, to prove a rejected call changed nothing. */
struct snap {
	int32_t n_total, n_free, capacity, n_retired, deficit;
	int32_t *free_ids;
	int64_t *owner;
};

static void snap_take(struct snap *s, const struct allm_block_pool *p)
{
	size_t n = (size_t)ALLM_MAX(p->capacity, 1);
	s->n_total = p->n_total;
	s->n_free = p->n_free;
	s->capacity = p->capacity;
	s->n_retired = p->n_retired;
	s->deficit = p->deficit;
	s->free_ids = malloc(n * sizeof(int32_t));
	s->owner = malloc(n * sizeof(int64_t));
	memcpy(s->free_ids, p->free_ids, (size_t)p->capacity * sizeof(int32_t));
	memcpy(s->owner, p->owner, (size_t)p->capacity * sizeof(int64_t));
}

static bool snap_same(const struct snap *s, const struct allm_block_pool *p)
{
	return s->n_total == p->n_total && s->n_free == p->n_free && s->capacity == p->capacity &&
	       s->n_retired == p->n_retired && s->deficit == p->deficit &&
	       !memcmp(s->free_ids, p->free_ids, (size_t)p->n_free * sizeof(int32_t)) &&
	       !memcmp(s->owner, p->owner, (size_t)p->capacity * sizeof(int64_t));
}

static void snap_free(struct snap *s)
{
	free(s->free_ids);
	free(s->owner);
}

static void test_order_and_exhaustion(void)
{
	struct allm_block_pool p;
	int32_t id = -7;
	CHECK(allm_block_pool_init(&p, 8) == 0, "init");
	CHECK(p.n_total == 8 && p.n_free == 8 && allm_block_pool_used(&p) == 0, "fresh counts");
	for (int32_t i = 0; i < 8; i++) {
		CHECK(allm_block_pool_alloc(&p, 100 + i, &id) == 0, "alloc %d", i);
		CHECK(id == i, "fresh pool handed out %d, want %d", id, i);
		CHECK(p.owner[id] == 100 + i, "owner of %d is %lld", id, (long long)p.owner[id]);
	}
	CHECK(allm_block_pool_used(&p) == 8 && p.n_free == 0, "full pool counts");
	id = -7;
	CHECK(allm_block_pool_alloc(&p, 1, &id) == -ENOSPC, "alloc from a full pool");
	CHECK(id == -7, "a failed alloc wrote *ret_id = %d", id);
	CHECK(allm_block_pool_check(&p) == 0, "check on a full pool");

	/* release and reuse: the block just returned is the next one handed out */
	CHECK(allm_block_pool_release(&p, 105, 5) == 0, "release 5");
	CHECK(allm_block_pool_release(&p, 102, 2) == 0, "release 2");
	CHECK(p.n_free == 2, "n_free after two releases is %d", p.n_free);
	CHECK(allm_block_pool_check(&p) == 0, "check after releases");
	CHECK(allm_block_pool_alloc(&p, 200, &id) == 0 && id == 2, "reuse gave %d, want 2 (LIFO)", id);
	CHECK(allm_block_pool_alloc(&p, 201, &id) == 0 && id == 5, "reuse gave %d, want 5", id);
	CHECK(allm_block_pool_alloc(&p, 202, &id) == -ENOSPC, "pool should be full again");
	for (int32_t i = 0; i < 8; i++)
		CHECK(allm_block_pool_release(&p, p.owner[i], i) == 0, "release all: %d", i);
	CHECK(p.n_free == 8 && allm_block_pool_check(&p) == 0, "all free again");
	allm_block_pool_fini(&p);
	allm_block_pool_fini(&p); /* fini twice / on a zeroed pool is fine */

	/* an empty pool is valid and always full */
	CHECK(allm_block_pool_init(&p, 0) == 0, "init 0");
	CHECK(allm_block_pool_alloc(&p, 1, &id) == -ENOSPC, "alloc from an empty pool");
	CHECK(allm_block_pool_check(&p) == 0, "check of an empty pool");
	allm_block_pool_fini(&p);
	CHECK(allm_block_pool_init(&p, -1) != 0, "init with -1 blocks accepted");
	allm_block_pool_fini(&p);
}

static void test_bad_releases(void)
{
	struct allm_block_pool p;
	struct snap s;
	int32_t a, b;
	CHECK(allm_block_pool_init(&p, 4) == 0, "init");
	allm_block_pool_alloc(&p, 10, &a);
	allm_block_pool_alloc(&p, 11, &b);
	snap_take(&s, &p);
	struct {
		int64_t owner;
		int32_t id;
		const char *what;
	} bad[] = {
		{10, b, "wrong owner"},
		{11, a, "wrong owner"},
		{10, 2, "free block (never allocated)"},
		{10, -1, "negative id"},
		{10, 4, "id == n_total"},
		{10, INT32_MAX, "huge id"},
		{ALLM_BLOCK_FREE, 3, "owner FREE on a free block"},
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(bad); i++) {
		int r = allm_block_pool_release(&p, bad[i].owner, bad[i].id);
		CHECK(r == -EINVAL, "%s: release returned %d, want -EINVAL", bad[i].what, r);
		CHECK(snap_same(&s, &p), "%s: a rejected release changed the pool", bad[i].what);
	}
	/* double free */
	CHECK(allm_block_pool_release(&p, 10, a) == 0, "first release");
	snap_free(&s);
	snap_take(&s, &p);
	CHECK(allm_block_pool_release(&p, 10, a) == -EINVAL, "double free accepted");
	CHECK(snap_same(&s, &p), "a rejected double free changed the pool");
	CHECK(allm_block_pool_check(&p) == 0, "check after rejected releases");
	CHECK(p.n_free == 3, "n_free is %d, want 3", p.n_free);
	snap_free(&s);
	allm_block_pool_fini(&p);
}

/* The check must notice corruption, or the random test below proves nothing. */
static void test_check_detects(void)
{
	struct allm_block_pool p;
	int32_t id;
	allm_block_pool_init(&p, 4);
	allm_block_pool_alloc(&p, 1, &id);
	CHECK(allm_block_pool_check(&p) == 0, "check of a good pool");
	p.owner[id] = ALLM_BLOCK_FREE; /* used block without an owner: leak */
	CHECK(allm_block_pool_check(&p) == -EFAULT, "check missed a block neither free nor owned");
	p.owner[id] = 1;
	p.free_ids[0] = p.free_ids[1]; /* an id twice in the free stack */
	CHECK(allm_block_pool_check(&p) == -EFAULT, "check missed a duplicate free id");
	allm_block_pool_fini(&p);
}

static void test_random_ops(void)
{
	enum { N = 48, OPS = 10000, OWNERS = 6 };
	struct allm_block_pool p;
	int64_t model[N]; /* who the test thinks owns each block */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int n_alloc = 0, n_rel = 0, n_full = 0, n_bad = 0, fails_before = n_fail;
	CHECK(allm_block_pool_init(&p, N) == 0, "init");
	for (int i = 0; i < N; i++)
		model[i] = ALLM_BLOCK_FREE;
	for (int op = 0; op < OPS && n_fail == fails_before; op++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(x >> 33);
		int64_t owner = r % OWNERS;
		int32_t id = (int32_t)((r >> 8) % N);
		int used = 0;
		for (int i = 0; i < N; i++)
			used += model[i] != ALLM_BLOCK_FREE;
		/* drift between mostly allocating and mostly releasing so both full
		 * and empty pools are visited */
		bool alloc_phase = (op / 700) % 2 == 0;
		int kind = (r >> 20) % 10;
		if (kind == 0) {
			/* a release that must be rejected */
			int64_t wrong = model[id] == ALLM_BLOCK_FREE ? owner : model[id] + 1;
			int rr = allm_block_pool_release(&p, wrong, id);
			CHECK(rr == -EINVAL, "op %d: bad release of %d by %lld returned %d", op, id,
			      (long long)wrong, rr);
			n_bad++;
		} else if (alloc_phase ? kind < 8 : kind < 3) {
			int32_t got;
			int rr = allm_block_pool_alloc(&p, owner, &got);
			if (used == N) {
				CHECK(rr == -ENOSPC, "op %d: alloc from a full pool returned %d", op, rr);
				n_full++;
			} else {
				CHECK(rr == 0, "op %d: alloc with %d free returned %d", op, N - used, rr);
				if (rr == 0) {
					CHECK(got >= 0 && got < N && model[got] == ALLM_BLOCK_FREE,
					      "op %d: handed out %d, which is in use", op, got);
					if (got >= 0 && got < N)
						model[got] = owner;
					n_alloc++;
				}
			}
		} else {
			/* release some used block (search from a random start) */
			for (int k = 0; k < N; k++) {
				int32_t b = (id + k) % N;
				if (model[b] == ALLM_BLOCK_FREE)
					continue;
				int rr = allm_block_pool_release(&p, model[b], b);
				CHECK(rr == 0, "op %d: release of %d by its owner returned %d", op, b, rr);
				model[b] = ALLM_BLOCK_FREE;
				n_rel++;
				break;
			}
		}
		used = 0;
		for (int i = 0; i < N; i++) {
			used += model[i] != ALLM_BLOCK_FREE;
			if (p.owner[i] != model[i]) {
				CHECK(0, "op %d: block %d owner %lld, want %lld", op, i, (long long)p.owner[i],
				      (long long)model[i]);
				break;
			}
		}
		CHECK(allm_block_pool_check(&p) == 0, "op %d: check failed", op);
		CHECK(p.n_free + allm_block_pool_used(&p) == p.n_total && allm_block_pool_used(&p) == used,
		      "op %d: free %d + used %d != total %d (model used %d)", op, p.n_free,
		      allm_block_pool_used(&p), p.n_total, used);
	}
	CHECK(n_alloc > 1000 && n_rel > 1000 && n_full > 10 && n_bad > 500,
	      "random ops did not exercise every case: alloc %d release %d full %d bad %d", n_alloc,
	      n_rel, n_full, n_bad);
	allm_block_pool_fini(&p);
}

static void test_seq_reserve(void)
{
	allm_backend_t *be = NULL;
	struct allm_kv_cache *kv = NULL;
	struct allm_err err = {{0}};
	struct allm_backend_opts bo = {.n_threads = 1};
	struct allm_kv_layout lay = {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .block_size = 4,
				     .dtype = ALLM_DTYPE_F32};
	struct allm_seq a, b, c;
	int32_t prompt[5] = {1, 2, 3, 4, 5};
	struct snap s;

	if (allm_backend_cpu_create(&bo, &be, &err)) {
		CHECK(0, "cpu backend: %s", err.msg);
		return;
	}
	CHECK(allm_kv_cache_create(be, &lay, 0, 0, &kv, &err) == -EINVAL, "a 0-block KV cache accepted");
	kv = NULL;
	if (allm_kv_cache_create(be, &lay, 10, 0, &kv, &err)) {
		CHECK(0, "kv cache: %s", err.msg);
		allm_backend_destroy(be);
		return;
	}
	CHECK(kv->block_bytes == (size_t)2 * 2 * 4 * 2 * 8 * 4, "block_bytes %zu", kv->block_bytes);
	CHECK(allm_kv_blocks_in(&lay, kv->block_bytes * 3 + 1) == 3, "blocks_in");
	CHECK(allm_kv_blocks_for(kv, 0) == 0 && allm_kv_blocks_for(kv, 1) == 1 &&
	      allm_kv_blocks_for(kv, 4) == 1 && allm_kv_blocks_for(kv, 5) == 2, "blocks_for");

	allm_seq_init(&a, 1, prompt, 5);
	allm_seq_init(&b, 2, prompt, 5);
	allm_seq_init(&c, 3, prompt, 5);

	/* growth one block at a time */
	CHECK(allm_seq_reserve(&a, kv, 1) == 0 && a.n_blocks == 1, "reserve 1 token");
	CHECK(allm_seq_reserve(&a, kv, 4) == 0 && a.n_blocks == 1, "reserve 4 tokens: %d blocks", a.n_blocks);
	CHECK(allm_seq_reserve(&a, kv, 5) == 0 && a.n_blocks == 2, "reserve 5 tokens: %d blocks", a.n_blocks);
	CHECK(allm_seq_reserve(&a, kv, 2) == 0 && a.n_blocks == 2, "a smaller reserve shrank the table");
	CHECK(allm_seq_reserve(&a, kv, 20) == 0 && a.n_blocks == 5, "reserve 20: %d blocks", a.n_blocks);
	for (int i = 0; i < a.n_blocks; i++)
		CHECK(a.blocks[i] == i && kv->gpu.owner[a.blocks[i]] == 1, "a block %d = %d", i, a.blocks[i]);
	CHECK(kv->gpu.n_free == 5, "n_free %d", kv->gpu.n_free);

	/* b needs 8 blocks, 5 are free: all or nothing */
	snap_take(&s, &kv->gpu);
	CHECK(allm_seq_reserve(&b, kv, 30) == -ENOSPC, "reserve beyond free blocks");
	CHECK(b.n_blocks == 0, "a failed reserve left %d blocks in the table", b.n_blocks);
	CHECK(snap_same(&s, &kv->gpu), "a failed reserve took blocks from the pool");
	snap_free(&s);
	/* partial growth of a sequence that already holds blocks: also nothing */
	CHECK(allm_seq_reserve(&b, kv, 8) == 0 && b.n_blocks == 2, "b reserve 8");
	snap_take(&s, &kv->gpu);
	CHECK(allm_seq_reserve(&b, kv, 4 * 6) == -ENOSPC, "b growth to 6 blocks with 3 free");
	CHECK(b.n_blocks == 2, "a failed growth changed the table to %d blocks", b.n_blocks);
	CHECK(snap_same(&s, &kv->gpu), "a failed growth took blocks from the pool");
	snap_free(&s);
	CHECK(allm_seq_reserve(&b, kv, 4 * 5) == 0 && b.n_blocks == 5, "b exactly fills the pool");
	CHECK(kv->gpu.n_free == 0, "pool not full");
	CHECK(allm_seq_reserve(&c, kv, 1) == -ENOSPC && c.n_blocks == 0, "c got a block from a full pool");
	CHECK(allm_block_pool_check(&kv->gpu) == 0, "check with two sequences");

	/* release returns everything and forgets cached K/V */
	a.n_cached = 17;
	allm_seq_release(&a, kv);
	CHECK(a.n_blocks == 0 && a.n_cached == 0, "release left %d blocks, n_cached %d", a.n_blocks, a.n_cached);
	CHECK(kv->gpu.n_free == 5, "n_free after release %d", kv->gpu.n_free);
	for (int i = 0; i < kv->gpu.n_total; i++)
		CHECK(kv->gpu.owner[i] != 1, "block %d still owned by the released sequence", i);
	CHECK(allm_seq_reserve(&c, kv, 20) == 0 && c.n_blocks == 5, "c reuses a's blocks");
	CHECK(allm_block_pool_check(&kv->gpu) == 0, "check after reuse");

	/* batch entry covers the uncached tail */
	struct allm_batch_seq e;
	c.n_cached = 3;
	allm_seq_append(&c, 42);
	allm_seq_batch_entry(&c, &e);
	CHECK(e.n_new == 3 && e.start_pos == 3 && e.tokens[2] == 42 && e.n_blocks == 5 &&
	      e.block_table == c.blocks, "batch entry n_new %d start %d", e.n_new, e.start_pos);
	for (int i = 0; i < 100; i++)
		allm_seq_append(&c, i); /* growth past the initial capacity */
	CHECK(c.n_tokens == 106 && c.tokens[105] == 99 && c.tokens[4] == 5, "append grew wrongly");

	/* fini with the cache releases the blocks */
	allm_seq_fini(&b, kv);
	allm_seq_fini(&c, kv);
	allm_seq_fini(&a, kv);
	CHECK(kv->gpu.n_free == kv->gpu.n_total, "leak: %d of %d blocks free after every sequence ended",
	      kv->gpu.n_free, kv->gpu.n_total);
	CHECK(allm_block_pool_check(&kv->gpu) == 0, "final check");
	allm_kv_cache_free(kv);
	allm_kv_cache_free(NULL);
	allm_backend_destroy(be);
}

int main(void)
{
	size_t mem0 = allm_mem_in_use();
	test_order_and_exhaustion();
	test_bad_releases();
	test_check_detects();
	test_random_ops();
	test_seq_reserve();
	CHECK(allm_mem_in_use() == mem0, "leaked %zu bytes of counted allocations",
	      allm_mem_in_use() - mem0);
	if (n_fail) {
		fprintf(stderr, "test-block-pool: %d failure(s)\n", n_fail);
		return 1;
	}
	printf("test-block-pool: ok\n");
	return 0;
}
