/* Description: the CPU fast path against the reference loops, op by op (per-op error
 * limits, sentinels after every output), and batch invariance of attention: a
 * token's bits do not depend on the batch around it or on the thread count (the
 * GEMM levels have their own test, test-cpu-gemm.c). */
#include "backend.h"
#include "cpu/cpu-backend.h" /* cpu_attention_one_simd: the order tiles must keep */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16 /* sentinel floats after every output */
static const uint32_t SENTINEL = 0x7fc0dead; /* a NaN no op produces */

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond) && failures++ < 30) {                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
		}                                                             \
	} while (0)

static uint64_t rng = 0x243f6a8885a308d3ull;

static float frand(void) /* uniform in [-1, 1) */
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static void fill(float *p, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
}

/* An output buffer of n floats followed by GUARD sentinels. */
static float *out_alloc(size_t n)
{
	float *p = malloc((n + GUARD) * sizeof(float));
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n + GUARD; i++)
		memcpy(&p[i], &SENTINEL, 4);
	return p;
}

static bool guard_ok(const float *p, size_t n)
{
	for (size_t i = n; i < n + GUARD; i++)
		if (memcmp(&p[i], &SENTINEL, 4))
			return false;
	return true;
}

/* Weights of dtype dt with random values; the caller frees. */
static void *weights(enum allm_dtype dt, size_t n, float scale)
{
	float *f = malloc(n * sizeof(float));
	void *w = malloc(n * allm_dtype_size(dt) + 4);
	fill(f, n, scale);
	allm_from_f32(w, f, dt, n);
	free(f);
	return w;
}

/* Largest |a - b| / max(|b|, floor) over n elements; also counts non-identical bits. */
static double max_rel(const float *a, const float *b, size_t n, float floor_, size_t *ndiff)
{
	double worst = 0.0;
	*ndiff = 0;
	for (size_t i = 0; i < n; i++) {
		if (memcmp(&a[i], &b[i], 4))
			(*ndiff)++;
		double d = fabs((double)a[i] - (double)b[i]) / fmax(fabs((double)b[i]), floor_);
		if (!(d <= worst)) /* NaN counts as worst */
			worst = isnan(d) ? INFINITY : d;
	}
	return worst;
}

/* --- attention ------------------------------------------------------------------ */

struct attn_case {
	struct allm_kv_layout lay;
	int32_t n_heads;
	void *pool;
	int32_t n_seqs, max_blocks;
	int32_t seq_len[4];
	int32_t *block_tables; /* [n_seqs][max_blocks] */
};

/* Sequences with shuffled physical blocks over a pool filled with random K/V. */
static void attn_case_init(struct attn_case *c, enum allm_dtype dt, int32_t hd, int32_t kvh,
			   int32_t n_heads)
{
	static const int32_t lens[4] = { 37, 1, 16, 70 };
	memset(c, 0, sizeof(*c));
	c->lay = (struct allm_kv_layout){ .n_layers = 2, .n_kv_heads = kvh, .head_dim = hd,
					  .block_size = 16, .dtype = dt };
	c->n_heads = n_heads;
	c->n_seqs = 4;
	c->max_blocks = 5;
	memcpy(c->seq_len, lens, sizeof(lens));
	int32_t n_blocks = c->n_seqs * c->max_blocks;
	size_t elems = allm_kv_block_elems(&c->lay) * (size_t)n_blocks;
	c->pool = weights(dt, elems, 1.0f);
	c->block_tables = malloc((size_t)n_blocks * sizeof(int32_t));
	for (int32_t i = 0; i < n_blocks; i++)
		c->block_tables[i] = i;
	for (int32_t i = n_blocks - 1; i > 0; i--) { /* shuffle */
		int32_t j = (int32_t)(((uint32_t)(frand() * 1e6f) & 0xffff) % (uint32_t)(i + 1));
		int32_t t = c->block_tables[i];
		c->block_tables[i] = c->block_tables[j];
		c->block_tables[j] = t;
	}
}

/* Tokens (seq, pos) -> meta; arrays owned by the caller's buffers. */
static void make_meta(struct allm_attn_meta *meta, const struct attn_case *c,
		      const int32_t *seq, const int32_t *pos, int32_t *slot, int32_t n)
{
	int32_t mx = 0;
	for (int32_t t = 0; t < n; t++) {
		int32_t bs = c->lay.block_size;
		slot[t] = c->block_tables[seq[t] * c->max_blocks + pos[t] / bs] * bs + pos[t] % bs;
		mx = ALLM_MAX(mx, pos[t] + 1);
	}
	*meta = (struct allm_attn_meta){ .n_tokens = n, .n_seqs = c->n_seqs,
					 .max_blocks_per_seq = c->max_blocks, .max_ctx = mx,
					 .tok_seq = seq, .tok_pos = pos, .slot = slot,
					 .block_tables = c->block_tables };
}

static void test_attention(allm_backend_t *ref, allm_backend_t **fasts, int n_fasts)
{
	/* { head_dim, kv heads, heads }: 8 dims is stories260K's (one vector per head,
	 * where query chains are interleaved); 12 queries of a group make tiles of
	 * more than one chain group */
	static const int32_t cfg[][3] = { { 16, 2, 4 }, { 64, 1, 8 }, { 32, 3, 3 }, { 8, 4, 8 },
					  { 8, 1, 12 } };
	for (int dt = 0; dt < ALLM_DTYPE_COUNT; dt++) {
		for (size_t ci = 0; ci < ALLM_ARRAY_SIZE(cfg); ci++) {
			struct attn_case c;
			attn_case_init(&c, dt, cfg[ci][0], cfg[ci][1], cfg[ci][2]);
			/* A mixed batch: a whole prompt of seq 3, decodes of seqs 0..2. */
			int32_t seq[80], pos[80], slot[80], n = 0;
			for (int32_t p = 0; p < c.seq_len[3]; p++, n++)
				seq[n] = 3, pos[n] = p;
			for (int32_t s = 0; s < 3; s++, n++)
				seq[n] = s, pos[n] = c.seq_len[s] - 1;
			struct allm_attn_meta meta;
			make_meta(&meta, &c, seq, pos, slot, n);
			int32_t row = c.n_heads * c.lay.head_dim;
			size_t nq = (size_t)n * row, nd;
			float *q = malloc(nq * 4), *or = out_alloc(nq), *of = out_alloc(nq);
			fill(q, nq, 1.0f);
			float scale = 1.0f / sqrtf((float)c.lay.head_dim);
			int r = ref->iface->attention(ref, or, q, c.pool, &c.lay, 1, c.n_heads, scale,
						      &meta);
			CHECK(r == 0, "ref attention returned %d", r);
			for (int f = 0; f < n_fasts; f++) {
				r = fasts[f]->iface->attention(fasts[f], of, q, c.pool, &c.lay, 1,
							       c.n_heads, scale, &meta);
				CHECK(r == 0, "fast attention returned %d", r);
				/* outputs are convex combinations of V rows in [-1, 1]: a
				 * reordered f32 computation (SIMD levels) stays within 1e-5 */
				double e = max_rel(of, or, nq, 1.0f, &nd);
				CHECK(nd == 0 || e <= 1e-5, "attention %s hd=%d: error %g",
				      allm_dtype_name(dt), c.lay.head_dim, e);
				CHECK(guard_ok(of, nq), "attention wrote past out");
				/* Tiles of queries keep each query's order: the bits of
				 * cpu_attention_one_simd (one query at a time) */
				float *scores = malloc((size_t)meta.max_ctx * 4);
				int32_t group = c.n_heads / c.lay.n_kv_heads, bad = 0;
				for (int32_t t = 0; t < n; t++)
					for (int32_t h = 0; h < c.n_heads; h++) {
						float o[64];
						size_t at = (size_t)t * row + (size_t)h * c.lay.head_dim;
						cpu_attention_one_simd(o, q + at, c.pool, &c.lay, 1, h / group,
								       c.block_tables + seq[t] * c.max_blocks, 0,
								       pos[t] + 1, scale, scores);
						bad += memcmp(o, of + at, (size_t)c.lay.head_dim * 4) != 0;
					}
				CHECK(bad == 0, "attention %s hd=%d: %d (token, head) rows differ from "
				      "one query at a time", allm_dtype_name(dt), c.lay.head_dim, bad);
				free(scores);
				/* Each token alone: the prompt's tokens are tiles of several
				 * queries in the batch (positions past a 64-position block too),
				 * a tile of one alone */
				for (int32_t t = 0; t < n; t++) {
					struct allm_attn_meta m1;
					int32_t slot1;
					float *o1 = out_alloc((size_t)row);
					make_meta(&m1, &c, &seq[t], &pos[t], &slot1, 1);
					fasts[f]->iface->attention(fasts[f], o1, q + (size_t)t * row,
								   c.pool, &c.lay, 1, c.n_heads,
								   scale, &m1);
					CHECK(!memcmp(o1, of + (size_t)t * row, (size_t)row * 4),
					      "attention %s: token %d alone differs from in batch",
					      allm_dtype_name(dt), t);
					CHECK(guard_ok(o1, (size_t)row), "attention wrote past out");
					free(o1);
				}
			}
			free(q);
			free(or);
			free(of);
			free(c.pool);
			free(c.block_tables);
		}
	}
}

/* --- the other ops: whatever path the fast backend takes, it matches ------------ */

static void cmp_out(const char *op, const float *a, const float *b, size_t n, double lim)
{
	size_t nd;
	double e = max_rel(a, b, n, 1e-3f, &nd);
	CHECK(nd == 0 || e <= lim, "%s: rel err %g (%zu differ)", op, e, nd);
	CHECK(guard_ok(a, n), "%s: wrote past its output", op);
}

static void test_other_ops(allm_backend_t *ref, allm_backend_t *fast)
{
	const int64_t n = 9, dim = 96, vocab = 50;
	const int32_t nh = 4, nkv = 2, hd = 16;
	allm_backend_t *be[2] = { ref, fast };
	float *x = malloc((size_t)(n * dim) * 4), *x2 = malloc((size_t)(n * dim) * 4);
	fill(x, (size_t)(n * dim), 2.0f);
	fill(x2, (size_t)(n * dim), 2.0f);
	int32_t ids[9], rows[9], pos[9];
	for (int i = 0; i < n; i++) {
		ids[i] = (int32_t)((i * 17 + 3) % vocab);
		rows[i] = (int32_t)((i * 5 + 1) % n);
		pos[i] = i * 3;
	}
	for (int dt = 0; dt < ALLM_DTYPE_COUNT; dt++) {
		void *table = weights(dt, (size_t)(vocab * dim), 1.0f);
		void *w = weights(dt, (size_t)dim, 1.0f), *b = weights(dt, (size_t)dim, 1.0f);
		float *y[2];
		for (int i = 0; i < 2; i++) {
			y[i] = out_alloc((size_t)(n * dim));
			be[i]->iface->embedding(be[i], y[i], table, dt, ids, n, dim);
		}
		cmp_out("embedding", y[1], y[0], (size_t)(n * dim), 0);
		for (int i = 0; i < 2; i++)
			be[i]->iface->rmsnorm(be[i], y[i], x, w, dt, n, dim, 1e-5f);
		cmp_out("rmsnorm", y[1], y[0], (size_t)(n * dim), 1e-6);
		for (int i = 0; i < 2; i++)
			be[i]->iface->layernorm(be[i], y[i], x, w, b, dt, n, dim, 1e-5f);
		cmp_out("layernorm", y[1], y[0], (size_t)(n * dim), 1e-6);
		for (int i = 0; i < 2; i++)
			be[i]->iface->layernorm(be[i], y[i], x, NULL, NULL, dt, n, dim, 1e-5f);
		cmp_out("layernorm (no affine)", y[1], y[0], (size_t)(n * dim), 1e-6);
		free(y[0]);
		free(y[1]);
		free(table);
		free(w);
		free(b);
	}
	float *y[2], *q[2], *k[2];
	float inv_freq[8];
	for (int i = 0; i < hd / 2; i++)
		inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
	size_t nq = (size_t)(n * nh * hd), nk = (size_t)(n * nkv * hd), ne = (size_t)(n * dim);
	float *q0 = malloc(nq * 4), *k0 = malloc(nk * 4);
	fill(q0, nq, 1.0f);
	fill(k0, nk, 1.0f);
	for (int i = 0; i < 2; i++) {
		q[i] = out_alloc(nq);
		k[i] = out_alloc(nk);
		memcpy(q[i], q0, nq * 4);
		memcpy(k[i], k0, nk * 4);
		be[i]->iface->rope(be[i], q[i], k[i], pos, inv_freq, n, nh, nkv, hd);
	}
	cmp_out("rope q", q[1], q[0], nq, 1e-6);
	cmp_out("rope k", k[1], k[0], nk, 1e-6);
	for (int i = 0; i < 2; i++) {
		free(q[i]);
		free(k[i]);
		y[i] = out_alloc(ne);
	}
	for (int i = 0; i < 2; i++)
		be[i]->iface->silu_mul(be[i], y[i], x, x2, (int64_t)ne);
	cmp_out("silu_mul", y[1], y[0], ne, 1e-6);
	for (int i = 0; i < 2; i++)
		be[i]->iface->relu(be[i], y[i], x, (int64_t)ne);
	cmp_out("relu", y[1], y[0], ne, 0);
	for (int i = 0; i < 2; i++)
		be[i]->iface->add(be[i], y[i], x, x2, (int64_t)ne);
	cmp_out("add", y[1], y[0], ne, 0);
	for (int i = 0; i < 2; i++)
		be[i]->iface->gather_rows(be[i], y[i], x, rows, n, dim);
	cmp_out("gather_rows", y[1], y[0], ne, 0);
	if (ref->iface->argmax && fast->iface->argmax) {
		int32_t am[2][9 + GUARD];
		x[3 * dim + 7] = x[3 * dim + 9] = 100.0f; /* a tie: lowest id wins */
		for (int i = 0; i < 2; i++) {
			for (int j = 0; j < 9 + GUARD; j++)
				am[i][j] = -12345;
			be[i]->iface->argmax(be[i], am[i], x, n, dim);
		}
		CHECK(!memcmp(am[0], am[1], sizeof(am[0])), "argmax differs or wrote past ids");
		CHECK(am[1][3] == 7, "argmax tie: got %d, want 7", am[1][3]);
	}
	for (int i = 0; i < 2; i++)
		free(y[i]);

	/* kv_write: both pools identical afterwards, nothing outside the slots touched. */
	for (int dt = 0; dt < ALLM_DTYPE_COUNT; dt++) {
		struct attn_case c;
		attn_case_init(&c, dt, hd, nkv, nh);
		size_t bytes = allm_kv_block_bytes(&c.lay) * (size_t)(c.n_seqs * c.max_blocks);
		void *p[2] = { malloc(bytes), malloc(bytes) };
		memcpy(p[0], c.pool, bytes);
		memcpy(p[1], c.pool, bytes);
		int32_t seq[9], tp[9], slot[9];
		for (int t = 0; t < n; t++)
			seq[t] = t % 4, tp[t] = (t * 7) % c.seq_len[t % 4];
		struct allm_attn_meta meta;
		make_meta(&meta, &c, seq, tp, slot, (int32_t)n);
		for (int i = 0; i < 2; i++)
			be[i]->iface->kv_write(be[i], p[i], &c.lay, 1, k0, k0, &meta);
		CHECK(!memcmp(p[0], p[1], bytes), "kv_write %s: pools differ", allm_dtype_name(dt));
		CHECK(memcmp(p[0], c.pool, bytes), "kv_write %s: wrote nothing", allm_dtype_name(dt));
		free(p[0]);
		free(p[1]);
		free(c.pool);
		free(c.block_tables);
	}
	free(q0);
	free(k0);
	free(x);
	free(x2);
}

/* K/V writes into 16-bit pools: the fast path converts 8 values at a time and must
 * give the reference's bits for every value, the edges of both formats included. */
static void test_kv_write_edges(allm_backend_t *ref, allm_backend_t *fast)
{
	static const float edge[] = {
		0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e30f, -1e30f,
		1.0f + 0x1p-11f /* f16 tie, to even */, 1.0f + 3 * 0x1p-11f /* tie, up */,
		1.0f + 0x1p-8f /* bf16 tie */, 1.0f + 3 * 0x1p-8f, 0x1p-14f, 0x1.ff8p-15f,
		0x1p-24f /* smallest f16 subnormal */, 0x1p-25f /* tie to 0 */, 0x1.8p-25f,
		1e-40f /* f32 subnormal */, -1e-45f, 3.14159265f, -2.71828f, 1e-7f, 6.1e-5f,
	};
	const int32_t nkv = 3, hd = 9, kvd = nkv * hd, n = 5; /* 27 values a token: a tail of 3 */
	struct allm_kv_layout lay = { .n_layers = 2, .n_kv_heads = nkv, .head_dim = hd,
				      .block_size = 4 };
	float *k = malloc((size_t)(n * kvd) * 4), *v = malloc((size_t)(n * kvd) * 4);
	uint32_t nans[] = { 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u, 0x7fffffffu };
	for (int32_t i = 0; i < n * kvd; i++) {
		k[i] = edge[i % ALLM_ARRAY_SIZE(edge)] * (i % 7 == 3 ? -1.0f : 1.0f);
		v[i] = i % 5 == 0 ? INFINITY * (i % 10 ? 1.0f : -1.0f) : 1.0f / (float)(i + 1);
		if (i % 11 == 4)
			memcpy(&v[i], &nans[(i / 11) % 5], 4);
	}
	int32_t seq[5] = { 0, 0, 1, 1, 1 }, pos[5] = { 0, 1, 0, 1, 2 }, slot[5] = { 1, 6, 8, 9, 15 };
	int32_t bt[2][4] = { { 0, 1, 2, 3 }, { 2, 3, 0, 1 } };
	struct allm_attn_meta meta = { .n_tokens = n, .n_seqs = 2, .max_blocks_per_seq = 4,
				       .max_ctx = 3, .tok_seq = seq, .tok_pos = pos, .slot = slot,
				       .block_tables = &bt[0][0] };
	for (int d = 0; d < 2; d++) {
		lay.dtype = d ? ALLM_DTYPE_BF16 : ALLM_DTYPE_F16;
		size_t bytes = allm_kv_block_bytes(&lay) * 4;
		void *p[2] = { malloc(bytes), malloc(bytes) };
		memset(p[0], 0xa5, bytes);
		memset(p[1], 0xa5, bytes);
		ref->iface->kv_write(ref, p[0], &lay, 1, k, v, &meta);
		fast->iface->kv_write(fast, p[1], &lay, 1, k, v, &meta);
		size_t bad = 0;
		for (size_t i = 0; i < bytes / 2; i++)
			bad += ((uint16_t *)p[0])[i] != ((uint16_t *)p[1])[i];
		CHECK(bad == 0, "kv_write %s edges: %zu values differ from the reference",
		      allm_dtype_name(lay.dtype), bad);
		free(p[0]);
		free(p[1]);
	}
	free(k);
	free(v);
}

/* RMSNorm, RoPE and add over enough rows to run on all threads: each row is the
 * reference's own arithmetic, so the bits equal the reference's on any thread
 * count. */
static void test_rows_parallel(allm_backend_t *ref, allm_backend_t **fasts, int n_fast)
{
	const int64_t n = 40, dim = 768;
	const int32_t nh = 12, nkv = 4, hd = 64;
	size_t ne = (size_t)(n * dim), nq = (size_t)(n * nh * hd), nk = (size_t)(n * nkv * hd);
	float *x = malloc(ne * 4), *x2 = malloc(ne * 4), *q0 = malloc(nq * 4), *k0 = malloc(nk * 4);
	float *yr = malloc(ne * 4), *qr = malloc(nq * 4), *kr = malloc(nk * 4), inv_freq[32];
	int32_t pos[40];
	fill(x, ne, 2.0f);
	fill(x2, ne, 2.0f);
	fill(q0, nq, 1.0f);
	fill(k0, nk, 1.0f);
	for (int i = 0; i < hd / 2; i++)
		inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
	for (int i = 0; i < n; i++)
		pos[i] = 1000 + i * 7;
	for (int f = 0; f < n_fast; f++) {
		allm_backend_t *be[2] = { ref, fasts[f] };
		float *y = out_alloc(ne), *q = out_alloc(nq), *k = out_alloc(nk);
		/* 16 rows at a time on x86 levels, the rest by the reference; widths with
		 * and without a tail of 8; every weight dtype of a norm */
		static const int64_t dims[] = { 768, 100 };
		static const enum allm_dtype ndt[] = { ALLM_DTYPE_F32, ALLM_DTYPE_F16, ALLM_DTYPE_BF16 };
		for (size_t d = 0; d < ALLM_ARRAY_SIZE(dims); d++)
			for (size_t t = 0; t < ALLM_ARRAY_SIZE(ndt); t++) {
				void *w = weights(ndt[t], (size_t)dims[d], 1.0f);
				float *yn = out_alloc((size_t)(n * dims[d]));
				be[0]->iface->rmsnorm(be[0], yr, x, w, ndt[t], n, dims[d], 1e-5f);
				be[1]->iface->rmsnorm(be[1], yn, x, w, ndt[t], n, dims[d], 1e-5f);
				cmp_out("rmsnorm (all threads)", yn, yr, (size_t)(n * dims[d]), 0);
				free(w), free(yn);
			}
		memcpy(qr, q0, nq * 4), memcpy(kr, k0, nk * 4), memcpy(q, q0, nq * 4), memcpy(k, k0, nk * 4);
		be[0]->iface->rope(be[0], qr, kr, pos, inv_freq, n, nh, nkv, hd);
		be[1]->iface->rope(be[1], q, k, pos, inv_freq, n, nh, nkv, hd);
		cmp_out("rope q (all threads)", q, qr, nq, 0);
		cmp_out("rope k (all threads)", k, kr, nk, 0);
		be[0]->iface->add(be[0], yr, x, x2, (int64_t)ne);
		be[1]->iface->add(be[1], y, x, x2, (int64_t)ne);
		cmp_out("add (all threads)", y, yr, ne, 0);
		free(y), free(q), free(k);
	}
	free(x), free(x2), free(q0), free(k0), free(yr), free(qr), free(kr);
}

int main(void)
{
	struct allm_backend_opts o_ref = { .reference = true };
	struct allm_backend_opts o_fast[3] = { { .n_threads = 0 }, { .n_threads = 1 },
					       { .n_threads = 3 } };
	allm_backend_t *ref = NULL, *fasts[3] = { NULL };
	struct allm_err err = { { 0 } };

	if (allm_backend_cpu_create(&o_ref, &ref, &err)) {
		fprintf(stderr, "reference backend: %s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < 3; i++)
		if (allm_backend_cpu_create(&o_fast[i], &fasts[i], &err)) {
			fprintf(stderr, "fast backend: %s\n", err.msg);
			return 1;
		}
	printf("ref: %s\nfast: %s\n", ref->iface->describe(ref), fasts[0]->iface->describe(fasts[0]));

	test_attention(ref, fasts, 3);
	test_other_ops(ref, fasts[0]);
	test_rows_parallel(ref, fasts, 3);
	test_kv_write_edges(ref, fasts[0]);

	for (int i = 0; i < 3; i++)
		allm_backend_destroy(fasts[i]);
	allm_backend_destroy(ref);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
