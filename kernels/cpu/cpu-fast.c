/* The CPU fast path outside the GEMM (cpu-gemm.c): parallel attention and row-wise
 * ops, and the lifetime of the thread pool and the GEMM level.
 *
 * Attention is computed per (token, head) in one fixed order, whatever the batch
 * (the reference's cpu_attention_one on the portable level, its SIMD twin on the
 * x86 levels), so it is batch-invariant. */
#include "cpu-backend.h"
#include "cpu-gemm.h"
#include "cpu-threads.h"

#include <errno.h>
#include <stdatomic.h>

/* --- attention -------------------------------------------------------------------- */

struct attn_job {
	float *out; /* (n_tokens, n_heads * head_dim) */
	const float *q; /* (n_tokens, n_heads * head_dim) */
	const void *kv_pool;
	const struct allm_kv_layout *lay;
	int32_t layer, n_heads, group; /* group: query heads per kv head */
	float scale;
	const struct allm_attn_meta *meta;
	struct cpu_pool *pool;
	bool wide; /* an AVX-512 level: cpu_attention_tile_simd's outputs 16 dims wide */
	int32_t heads; /* > 0: a token alone takes this many KV heads at once
			* (cpu_attention_heads_simd), its first item doing them */
	void (*one)(float *out_row, const float *q_row, const void *kv_pool,
		    const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
		    const int32_t *block_table, int32_t p0, int32_t ctx_len, float scale, float *scores);
	_Atomic int err;
};

/* Items are (token, head) pairs, each computed by cpu_attention_one exactly as the
 * reference does, so the output is bit-identical to it and batch-invariant. */
static void attn_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct attn_job *a = arg;
	const struct allm_attn_meta *meta = a->meta;
	int32_t hd = a->lay->head_dim;

	for (int64_t it = begin; it < end; it++) {
		int32_t t = (int32_t)(it / a->n_heads), h = (int32_t)(it % a->n_heads);
		int32_t ctx = meta->tok_pos[t] + 1; /* causal: itself and everything before */
		int32_t p0 = cpu_window_start(meta, t); /* or its window's */
		float *scores = cpu_pool_scratch_or_fail(a->pool, tid, (size_t)ALLM_MAX(ctx - p0, 1) * 4, &a->err);
		if (!scores)
			return;
		const int32_t *bt = meta->block_tables +
				    (size_t)meta->tok_seq[t] * meta->max_blocks_per_seq;
		size_t row = ((size_t)t * a->n_heads + h) * hd;
		a->one(a->out + row, a->q + row, a->kv_pool, a->lay, a->layer, h / a->group, bt, p0, ctx,
		       a->scale, scores);
	}
}

/* Tiles: items are (token, KV head) pairs, and the token that starts a tile does
 * the whole tile: up to CPU_ATT_TILE_Q / group consecutive tokens of one sequence,
 * cut where a position is a multiple of that (so a token knows alone whether it
 * starts one: no list to build), whose queries are those tokens' heads of the KV
 * head's group (cpu_attention_tile_simd: the same bits as one at a time). */
static bool same_run(const struct allm_attn_meta *meta, int32_t t)
{
	return t > 0 && meta->tok_seq[t] == meta->tok_seq[t - 1] &&
	       meta->tok_pos[t] == meta->tok_pos[t - 1] + 1;
}

/* Whether token t's tile is t alone (a decode, or a prompt token at a tile's
 * cut with the next one starting the next tile). */
static bool alone(const struct allm_attn_meta *meta, int32_t t, int32_t per_tile)
{
	return !(same_run(meta, t) && meta->tok_pos[t] % per_tile) &&
	       !(t + 1 < meta->n_tokens && same_run(meta, t + 1) && meta->tok_pos[t + 1] % per_tile);
}

static void attn_tile_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct attn_job *a = arg;
	const struct allm_attn_meta *meta = a->meta;
	int32_t hd = a->lay->head_dim, n_kv = a->lay->n_kv_heads, per_tile = CPU_ATT_TILE_Q / a->group;
	float *out_rows[CPU_ATT_TILE_Q];
	const float *q_rows[CPU_ATT_TILE_Q];
	int32_t ctx[CPU_ATT_TILE_Q], q_kvh[CPU_ATT_TILE_Q];
	/* 8-dim heads: a token alone takes all its heads in one tile (its KV heads
	 * are neighbours in each K/V row), so that 8 queries' chains overlap instead
	 * of a GQA group's 1-2 (stories260K's decodes: attention is most of a step) */
	bool heads_together = hd == 8 && a->n_heads <= CPU_ATT_TILE_Q;

	for (int64_t it = begin; it < end; it++) {
		int32_t t0 = (int32_t)(it / n_kv), kvh = (int32_t)(it % n_kv), n_q = 0, stride = 0;
		bool mixed = heads_together && n_kv > 1 && alone(meta, t0, per_tile);
		if (same_run(meta, t0) && meta->tok_pos[t0] % per_tile)
			continue; /* inside a tile its first token does */
		if (mixed && kvh)
			continue; /* the token's KV head 0 item does all its heads */
		if (a->heads && alone(meta, t0, per_tile)) { /* never with mixed (8-dim heads) */
			if (kvh % a->heads)
				continue; /* the group's first item does it */
			int32_t kh1 = ALLM_MIN(kvh + a->heads, n_kv), ctx0 = meta->tok_pos[t0] + 1;
			size_t row = (size_t)t0 * (size_t)a->n_heads * (size_t)hd;
			float *sc = cpu_pool_scratch_or_fail(
				a->pool, tid, (size_t)(kh1 - kvh) * (size_t)a->group * (size_t)ctx0 * 4, &a->err);
			if (!sc)
				return;
			if (!cpu_attention_heads_simd(a->out + row, a->q + row, ctx0, a->kv_pool, a->lay,
						      a->layer, kvh, kh1, a->group,
						      meta->block_tables + (size_t)meta->tok_seq[t0] *
									   meta->max_blocks_per_seq,
						      a->scale, sc)) {
				/* cannot happen (cpu_fast_attention checked the shape) */
				cpu_pool_fail(&a->err, -EINVAL);
				return;
			}
			continue;
		}
		if (mixed) {
			for (int32_t h = 0; h < a->n_heads; h++, n_q++) {
				size_t row = ((size_t)t0 * a->n_heads + (size_t)h) * hd;
				out_rows[n_q] = a->out + row;
				q_rows[n_q] = a->q + row;
				ctx[n_q] = stride = meta->tok_pos[t0] + 1;
				q_kvh[n_q] = h / a->group;
			}
		}
		for (int32_t t = t0; !mixed && t < meta->n_tokens &&
				     (t == t0 || (same_run(meta, t) && meta->tok_pos[t] % per_tile)); t++)
			for (int32_t g = 0; g < a->group; g++, n_q++) {
				size_t row = ((size_t)t * a->n_heads + (size_t)kvh * a->group + g) * hd;
				out_rows[n_q] = a->out + row;
				q_rows[n_q] = a->q + row;
				ctx[n_q] = meta->tok_pos[t] + 1;
				stride = ALLM_MAX(stride, ctx[n_q]);
			}
		float *scores = cpu_pool_scratch_or_fail(a->pool, tid, (size_t)n_q * (size_t)stride * 4,
							 &a->err);
		if (!scores)
			return;
		const int32_t *bt = meta->block_tables +
				    (size_t)meta->tok_seq[t0] * meta->max_blocks_per_seq;
		if (!cpu_attention_tile_simd(out_rows, q_rows, ctx, n_q, a->kv_pool, a->lay, a->layer, kvh,
					     bt, a->scale, scores, stride, a->wide, mixed ? q_kvh : NULL)) {
			/* cannot happen (cpu_fast_attention checked the shape): said, not skipped */
			cpu_pool_fail(&a->err, -EINVAL);
			return;
		}
	}
}

int cpu_fast_attention(struct cpu_ctx *c, float *out, const float *q, const void *kv_pool,
		       const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
		       float scale, const struct allm_attn_meta *meta)
{
	if (lay->n_kv_heads <= 0 || n_heads <= 0 || n_heads % lay->n_kv_heads)
		return -EINVAL;
	if (meta->n_tokens <= 0)
		return 0;
	struct attn_job a = {
		.out = out, .q = q, .kv_pool = kv_pool, .lay = lay, .layer = layer,
		.n_heads = n_heads, .group = n_heads / lay->n_kv_heads, .scale = scale,
		.meta = meta, .pool = c->pool,
		.wide = c->level->isa >= ALLM_CPU_ISA_AVX512,
		.one = c->level->isa == ALLM_CPU_ISA_PORTABLE ? cpu_attention_one
							      : cpu_attention_one_simd,
	};
	/* a sliding window: (token, head) items, each from its window's first
	 * position (the tiles below read every position from 0) */
	if (meta->window > 0) {
		cpu_pool_run_tid(c->pool, (int64_t)meta->n_tokens * n_heads, attn_worker, &a);
		return atomic_load(&a.err);
	}
	/* a decode's heads in groups (cpu_attention_heads_simd): at least one group
	 * per thread, at most CPU_ATT_HEADS_MAX heads in one */
	if (a.wide && lay->head_dim % 16 == 0 && a.group <= CPU_ATT_TILE_Q) {
		int32_t per_token = (int32_t)ALLM_MIN(
			(int64_t)lay->n_kv_heads,
			ALLM_MAX((int64_t)1, ((int64_t)cpu_pool_size(c->pool) + meta->n_tokens - 1) /
						     meta->n_tokens));
		a.heads = ALLM_MIN((lay->n_kv_heads + per_token - 1) / per_token, CPU_ATT_HEADS_MAX);
	}
	if (c->level->isa != ALLM_CPU_ISA_PORTABLE && lay->head_dim % 8 == 0 &&
	    a.group <= CPU_ATT_TILE_Q)
		cpu_pool_run_tid(c->pool, (int64_t)meta->n_tokens * lay->n_kv_heads, attn_tile_worker, &a);
	else
		cpu_pool_run_tid(c->pool, (int64_t)meta->n_tokens * n_heads, attn_worker, &a);
	return atomic_load(&a.err);
}

/* --- element-wise ---------------------------------------------------------------- */

#define ELEMWISE_CHUNK 4096 /* elements per item: small enough to share, big enough to pay */

struct act_job {
	float *y;
	const float *gate, *up;
	int64_t n;
	void (*fn)(float *y, const float *gate, const float *up, int64_t n);
};

static void act_worker(void *arg, int64_t begin, int64_t end)
{
	struct act_job *j = arg;
	int64_t b = begin * ELEMWISE_CHUNK, e = ALLM_MIN(j->n, end * ELEMWISE_CHUNK);
	j->fn(j->y + b, j->gate + b, j->up + b, e - b);
}

void cpu_fast_silu_mul(struct cpu_ctx *c, float *y, const float *gate, const float *up, int64_t n)
{
	struct act_job j = {y, gate, up, n,
			    c->level->isa != ALLM_CPU_ISA_PORTABLE ? cpu_silu_mul_simd : cpu_ref_silu_mul};
	cpu_pool_run(c->pool, (n + ELEMWISE_CHUNK - 1) / ELEMWISE_CHUNK, act_worker, &j);
}

void cpu_fast_gelu_mul(struct cpu_ctx *c, float *y, const float *gate, const float *up, int64_t n)
{
	struct act_job j = {y, gate, up, n,
			    c->level->isa != ALLM_CPU_ISA_PORTABLE ? cpu_gelu_mul_simd : cpu_ref_gelu_mul};
	cpu_pool_run(c->pool, (n + ELEMWISE_CHUNK - 1) / ELEMWISE_CHUNK, act_worker, &j);
}

/* --- row-wise ops ------------------------------------------------------------------ */

/* RMSNorm, RoPE and add with each row (token, or chunk of elements) computed by the
 * reference's own code, rows on all threads: the bits are the reference's, and the
 * scalar norm of 128 rows no longer leaves the other threads waiting (2-3 % of a
 * 128-token prefill). */
#define ROWS_PARALLEL (1 << 14) /* elements below which the wake-up costs more */

struct rows_job {
	float *y, *q, *k;
	const float *x, *b, *inv_freq;
	const void *w;
	const int32_t *pos;
	enum allm_dtype dt;
	int64_t n, dim;
	int32_t n_heads, n_kv_heads, head_dim;
	float eps;
	bool simd; /* an x86 level: cpu_rmsnorm_simd (the reference's bits, 16 rows at once) */
};

static void rmsnorm_worker(void *arg, int64_t begin, int64_t end)
{
	struct rows_job *j = arg;
	(j->simd ? cpu_rmsnorm_simd : cpu_ref_rmsnorm)(j->y + begin * j->dim, j->x + begin * j->dim,
						      j->w, j->dt, end - begin, j->dim, j->eps);
}

void cpu_fast_rmsnorm(struct cpu_ctx *c, float *y, const float *x, const void *w,
		      enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	struct rows_job j = { .y = y, .x = x, .w = w, .dt = dt, .n = n, .dim = dim, .eps = eps,
			      .simd = c->level->isa != ALLM_CPU_ISA_PORTABLE };
	cpu_pool_run(n * dim < ROWS_PARALLEL ? NULL : c->pool, n, rmsnorm_worker, &j);
}

static void rope_worker(void *arg, int64_t begin, int64_t end)
{
	struct rows_job *j = arg;
	cpu_ref_rope(j->q + begin * j->n_heads * j->head_dim, j->k + begin * j->n_kv_heads * j->head_dim,
		     j->pos + begin, j->inv_freq, end - begin, j->n_heads, j->n_kv_heads, j->head_dim);
}

void cpu_fast_rope(struct cpu_ctx *c, float *q, float *k, const int32_t *pos, const float *inv_freq,
		   int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim)
{
	struct rows_job j = { .q = q, .k = k, .pos = pos, .inv_freq = inv_freq, .n = n,
			      .n_heads = n_heads, .n_kv_heads = n_kv_heads, .head_dim = head_dim };
	bool small = n * (int64_t)(n_heads + n_kv_heads) * head_dim < ROWS_PARALLEL;
	cpu_pool_run(small ? NULL : c->pool, n, rope_worker, &j);
}

static void add_worker(void *arg, int64_t begin, int64_t end)
{
	struct rows_job *j = arg;
	int64_t b = begin * ELEMWISE_CHUNK, e = ALLM_MIN(j->n, end * ELEMWISE_CHUNK);
	cpu_ref_add(j->y + b, j->x + b, j->b + b, e - b);
}

void cpu_fast_add(struct cpu_ctx *c, float *y, const float *a, const float *b, int64_t n)
{
	struct rows_job j = { .y = y, .x = a, .b = b, .n = n };
	cpu_pool_run(n < ROWS_PARALLEL ? NULL : c->pool, (n + ELEMWISE_CHUNK - 1) / ELEMWISE_CHUNK,
		     add_worker, &j);
}

/* K/V writes: on x86 levels 16-bit pools are converted 8 values at a time, with
 * the reference's bits. */
void cpu_fast_kv_write(struct cpu_ctx *c, void *kv_pool, const struct allm_kv_layout *lay,
		       int32_t layer, const float *k, const float *v,
		       const struct allm_attn_meta *meta)
{
	(c->level->isa == ALLM_CPU_ISA_PORTABLE ? cpu_ref_kv_write
						: cpu_kv_write_simd)(kv_pool, lay, layer, k, v, meta);
}

/* --- lifetime ---------------------------------------------------------------------- */

int cpu_fast_init(struct cpu_ctx *c, enum allm_cpu_isa isa, struct allm_err *err)
{
	if ((unsigned)isa >= ALLM_CPU_ISA_COUNT)
		return allm_err_set(err, -EINVAL, "cpu backend: unknown SIMD level %d", (int)isa);
	if (isa == ALLM_CPU_ISA_AUTO)
		isa = allm_cpu_isa_best();
	if (!allm_cpu_isa_supported(isa))
		return allm_err_set(err, -ENOTSUP,
				    "cpu backend: this CPU cannot run --cpu-isa %s (the best it has "
				    "is %s)", allm_cpu_isa_name(isa),
				    allm_cpu_isa_name(allm_cpu_isa_best()));
	c->level = cpu_gemm_level(isa);
	pthread_mutex_init(&c->gemm_mu, NULL);
	int r = cpu_pool_create(c->n_threads, &c->pool);
	if (r) {
		pthread_mutex_destroy(&c->gemm_mu);
		c->level = NULL;
		return allm_err_set(err, r, "cpu backend: cannot start %d threads", c->n_threads);
	}
	c->n_threads = cpu_pool_size(c->pool);
	return 0;
}

void cpu_fast_fini(struct cpu_ctx *c)
{
	if (!c->level)
		return;
	cpu_pool_destroy(c->pool);
	c->pool = NULL;
	pthread_mutex_destroy(&c->gemm_mu);
	allm_free(c->xbuf_raw);
	allm_free(c->bbuf_raw);
	c->xbuf = c->xbuf_raw = c->bbuf = c->bbuf_raw = NULL;
	c->level = NULL;
}
