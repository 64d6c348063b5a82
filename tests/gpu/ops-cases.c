/* The conformance cases: every op of struct allm_backend_i x f32/f16/bf16 where
 * the op has a dtype x shapes that catch the usual bugs (1-element and odd
 * sizes, non-multiples of warp/block sizes, GQA, block sizes 1/16/32, prefill /
 * decode / mixed batches over shuffled block tables, argmax/top-k ties).
 *
 * Error limits (stated once, here): exact for data movement and integer
 * results (embedding, gather_rows, relu, add, kv_write, argmax, top-k); NMSE
 * <= 1e-10 for f32 math whose only freedom is the reduction order (norms, RoPE,
 * SiLU, attention over identical stored K/V, f32 GEMM); GEMM with 16-bit
 * weights may round activations to the weight dtype (cuBLAS needs A and B of
 * one type): NMSE <= 1e-6 for f16 (2^-11 rounding) and 1e-4 for bf16 (2^-8). */
#include "ops-cases.h"
#include "qblock.h"

#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t urand(uint32_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)((rng >> 33) % n);
}

static float frand(void) /* [-1, 1) */
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static float *rand_f32(size_t n, float scale)
{
	float *p = malloc(n * sizeof(float) + 4);
	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

/* n random values stored as dt (the host copy both backends upload) */
static void *rand_dt(enum allm_dtype dt, size_t n, float scale, float offset)
{
	float *f = rand_f32(n, scale);
	for (size_t i = 0; i < n; i++)
		f[i] += offset;
	void *p = malloc(n * allm_dtype_size(dt) + 4);
	allm_from_f32(p, f, dt, n);
	free(f);
	return p;
}

static int32_t *rand_ids(size_t n, uint32_t below)
{
	int32_t *p = malloc(n * sizeof(int32_t) + 4);
	for (size_t i = 0; i < n; i++)
		p[i] = (int32_t)urand(below);
	return p;
}

static struct op_case *cs;
static int ncs, capcs;

static struct op_case *add_case(enum allm_backend_op op, enum allm_dtype dt, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static struct op_case *add_case(enum allm_backend_op op, enum allm_dtype dt, const char *fmt, ...)
{
	if (ncs == capcs) {
		capcs = capcs ? capcs * 2 : 64;
		cs = realloc(cs, (size_t)capcs * sizeof(*cs));
	}
	struct op_case *c = &cs[ncs++];
	memset(c, 0, sizeof(*c));
	c->op = op;
	c->dt = dt;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->name, sizeof(c->name), fmt, ap);
	va_end(ap);
	return c;
}

static void buf(struct op_case *c, void *host, size_t bytes, enum op_cmp cmp, double limit)
{
	c->b[c->nb++] = (struct op_buf){host, bytes, cmp, limit};
}

#define F32B(n) ((size_t)(n) * sizeof(float))
#define I32B(n) ((size_t)(n) * sizeof(int32_t))
#define DTB(dt, n) ((size_t)(n) * allm_dtype_size(dt))
#define EXACT_F32 1e-10 /* NMSE for f32 math differing only in reduction order */

static const enum allm_dtype dts[] = {ALLM_DTYPE_F32, ALLM_DTYPE_F16, ALLM_DTYPE_BF16};

/* --- calls ------------------------------------------------------------------------ */

#define IF(be) ((be)->iface)

static int call_embedding(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->embedding(be, d[0], d[1], c->dt, d[2], c->n, c->k);
}

static int call_rmsnorm(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->rmsnorm(be, d[0], c->in_place ? d[0] : d[1], d[2], c->dt, c->n, c->k, c->eps);
}

static int call_layernorm(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->layernorm(be, d[0], c->in_place ? d[0] : d[1], c->with_w ? d[2] : NULL,
				 c->with_b ? d[3] : NULL, c->dt, c->n, c->k, c->eps);
}

static int call_gemm(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->gemm(be, d[0], d[1], d[2], c->with_b ? d[3] : NULL, c->dt, c->n, c->k, c->m);
}

static int call_rope(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->rope(be, d[0], d[1], d[2], d[3], c->n, c->n_heads, c->lay.n_kv_heads,
			     c->lay.head_dim);
}

static int call_silu_mul(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->silu_mul(be, d[0], c->in_place ? d[0] : d[1], d[2], c->n);
}

static int call_gelu_mul(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->gelu_mul(be, d[0], c->in_place ? d[0] : d[1], d[2], c->n);
}

static int call_scale(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->scale(be, d[0], c->in_place ? d[0] : d[1], c->scale, c->n);
}

static int call_relu(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->relu(be, d[0], c->in_place ? d[0] : d[1], c->n);
}

static int call_add(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->add(be, d[0], c->in_place ? d[0] : d[1], d[2], c->n);
}

static int call_gather(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->gather_rows(be, d[0], d[1], d[2], c->n, c->k);
}

static struct allm_attn_meta meta_of(void **d, const struct op_case *c, int first)
{
	return (struct allm_attn_meta){
		.n_tokens = c->n_tokens,
		.n_seqs = c->n_seqs,
		.max_blocks_per_seq = c->max_blocks,
		.max_ctx = c->max_ctx,
		.tok_seq = d[first],
		.tok_pos = d[first + 1],
		.slot = d[first + 2],
		.block_tables = d[first + 3],
		.window = c->window,
	};
}

static int call_kv_write(allm_backend_t *be, void **d, const struct op_case *c)
{
	struct allm_attn_meta m = meta_of(d, c, 3);
	return IF(be)->kv_write(be, d[0], &c->lay, c->layer, d[1], d[2], &m);
}

static int call_attention(allm_backend_t *be, void **d, const struct op_case *c)
{
	struct allm_attn_meta m = meta_of(d, c, 3);
	return IF(be)->attention(be, d[0], d[1], d[2], &c->lay, c->layer, c->n_heads, c->scale, &m);
}

static int call_argmax(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->argmax(be, d[0], d[1], c->n, c->k);
}

static int call_topk(allm_backend_t *be, void **d, const struct op_case *c)
{
	return IF(be)->topk(be, d[0], d[1], d[2], c->n, c->k, (int32_t)c->m);
}

/* --- builders ----------------------------------------------------------------------- */

static void rows_cases(void)
{
	static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 257}, {17, 1000}, {2, 4096}};
	for (size_t di = 0; di < 3; di++) {
		enum allm_dtype dt = dts[di];
		for (size_t s = 0; s < ALLM_ARRAY_SIZE(shapes); s++) {
			int64_t n = shapes[s][0], dim = shapes[s][1], V = 37;
			struct op_case *c = add_case(ALLM_OP_EMBEDDING, dt, "embedding %s n=%lld dim=%lld",
						     allm_dtype_name(dt), (long long)n, (long long)dim);
			c->n = n, c->k = dim, c->call = call_embedding;
			buf(c, NULL, F32B(n * dim), OP_CMP_BYTES, 0);
			buf(c, rand_dt(dt, (size_t)(V * dim), 1, 0), DTB(dt, V * dim), OP_CMP_NONE, 0);
			int32_t *ids = rand_ids((size_t)n, (uint32_t)V);
			ids[n - 1] = (int32_t)V - 1; /* the last row of the table */
			buf(c, ids, I32B(n), OP_CMP_NONE, 0);

			for (int ip = 0; ip < 2; ip++) {
				c = add_case(ALLM_OP_RMSNORM, dt, "rmsnorm %s n=%lld dim=%lld%s",
					     allm_dtype_name(dt), (long long)n, (long long)dim,
					     ip ? " in place" : "");
				c->n = n, c->k = dim, c->eps = 1e-5f, c->in_place = ip, c->call = call_rmsnorm;
				float *x = rand_f32((size_t)(n * dim), 3);
				buf(c, ip ? x : NULL, F32B(n * dim), OP_CMP_NMSE, EXACT_F32);
				buf(c, ip ? NULL : x, F32B(n * dim), OP_CMP_NONE, 0);
				if (ip) /* buffer 1 unused: keep a small dummy */
					c->b[1].bytes = 4;
				buf(c, rand_dt(dt, (size_t)dim, 0.2f, 1), DTB(dt, dim), OP_CMP_NONE, 0);
			}
			for (int v = 0; v < 3; v++) { /* w+b, w only, none; in place on the last */
				c = add_case(ALLM_OP_LAYERNORM, dt, "layernorm %s n=%lld dim=%lld%s%s%s",
					     allm_dtype_name(dt), (long long)n, (long long)dim,
					     v < 2 ? " +w" : "", v == 0 ? " +b" : "",
					     v == 2 ? " in place" : "");
				c->n = n, c->k = dim, c->eps = 1e-5f, c->call = call_layernorm;
				c->with_w = v < 2, c->with_b = v == 0, c->in_place = v == 2;
				float *x = rand_f32((size_t)(n * dim), 3);
				for (int64_t j = 0; j < n * dim; j++)
					x[j] += 2.0f; /* a mean to remove */
				buf(c, c->in_place ? x : NULL, F32B(n * dim), OP_CMP_NMSE, EXACT_F32);
				buf(c, c->in_place ? NULL : x, c->in_place ? 4 : F32B(n * dim), OP_CMP_NONE, 0);
				buf(c, rand_dt(dt, (size_t)dim, 0.2f, 1), DTB(dt, dim), OP_CMP_NONE, 0);
				buf(c, rand_dt(dt, (size_t)dim, 0.1f, 0), DTB(dt, dim), OP_CMP_NONE, 0);
			}
		}
	}
}

static void gemm_cases(void)
{
	static const int64_t shapes[][3] = {{1, 1, 1},    {1, 64, 17},  {3, 33, 65},
					    {17, 128, 129}, {64, 256, 96}, {1, 1024, 300},
					    {2, 0, 5}};
	static const double lim[] = {EXACT_F32, 1e-6, 1e-4};
	for (size_t di = 0; di < 3; di++) {
		enum allm_dtype dt = dts[di];
		for (size_t s = 0; s < ALLM_ARRAY_SIZE(shapes); s++)
			for (int bias = 0; bias < 2; bias++) {
				int64_t n = shapes[s][0], k = shapes[s][1], m = shapes[s][2];
				struct op_case *c = add_case(ALLM_OP_GEMM, dt, "gemm %s n=%lld k=%lld m=%lld%s",
							     allm_dtype_name(dt), (long long)n, (long long)k,
							     (long long)m, bias ? " +bias" : "");
				c->n = n, c->k = k, c->m = m, c->with_b = bias, c->call = call_gemm;
				buf(c, NULL, F32B(n * m), OP_CMP_NMSE, lim[di]);
				buf(c, rand_f32((size_t)(n * k) + 1, 1), F32B(n * k + 1), OP_CMP_NONE, 0);
				buf(c, rand_dt(dt, (size_t)(m * k) + 1, 1.0f / sqrtf((float)k + 1), 0),
				    DTB(dt, m * k + 1), OP_CMP_NONE, 0);
				buf(c, rand_dt(dt, (size_t)m, 0.1f, 0), DTB(dt, m), OP_CMP_NONE, 0);
			}
	}
}

/* GGUF block weights (Q8_0, Q4_0, Q4_1; --quant or a file's tensors): the reference
 * dequantizes them as every kernel does and multiplies f32 activations; the fast
 * path rounds activations to int8 per 32 (NMSE ~ 1e-5). The
 * bias is f32. Embedding rows dequantize exactly. */
static void qb_cases(void)
{
	static const enum allm_dtype qdts[] = {ALLM_DTYPE_Q8_0, ALLM_DTYPE_Q4_0, ALLM_DTYPE_Q4_1};
	static const int64_t shapes[][3] = {{1, 1, 1},  {1, 64, 17},   {3, 33, 65},   {17, 128, 129},
					    {64, 256, 96}, {1, 1024, 300}, {9, 700, 40}, {2, 768, 2048}};
	for (size_t di = 0; di < ALLM_ARRAY_SIZE(qdts); di++) {
		enum allm_dtype dt = qdts[di];
		for (size_t s = 0; s < ALLM_ARRAY_SIZE(shapes); s++)
			for (int bias = 0; bias < 2; bias++) {
				int64_t n = shapes[s][0], k = shapes[s][1], m = shapes[s][2];
				struct op_case *c = add_case(ALLM_OP_GEMM, dt, "gemm %s n=%lld k=%lld m=%lld%s",
							     allm_dtype_name(dt), (long long)n, (long long)k,
							     (long long)m, bias ? " +bias" : "");
				c->n = n, c->k = k, c->m = m, c->with_b = bias, c->call = call_gemm;
				buf(c, NULL, F32B(n * m), OP_CMP_NMSE, 1e-4);
				buf(c, rand_f32((size_t)(n * k) + 1, 1), F32B(n * k + 1), OP_CMP_NONE, 0);
				float *f = rand_f32((size_t)(m * k), 1.0f / sqrtf((float)k));
				void *q = malloc(allm_qb_bytes(dt, m, k) + 4);
				allm_qb_quantize_rows(dt, q, k, 0, f, m);
				free(f);
				buf(c, q, allm_qb_bytes(dt, m, k), OP_CMP_NONE, 0);
				buf(c, rand_f32((size_t)m, 0.1f), F32B(m), OP_CMP_NONE, 0);
			}
		static const int64_t eshapes[][2] = {{1, 1}, {5, 33}, {17, 1000}};
		for (size_t s = 0; s < ALLM_ARRAY_SIZE(eshapes); s++) {
			int64_t n = eshapes[s][0], dim = eshapes[s][1], V = 37;
			struct op_case *c = add_case(ALLM_OP_EMBEDDING, dt, "embedding %s n=%lld dim=%lld",
						     allm_dtype_name(dt), (long long)n, (long long)dim);
			c->n = n, c->k = dim, c->call = call_embedding;
			buf(c, NULL, F32B(n * dim), OP_CMP_BYTES, 0);
			float *f = rand_f32((size_t)(V * dim), 1);
			void *q = malloc(allm_qb_bytes(dt, V, dim) + 4);
			allm_qb_quantize_rows(dt, q, dim, 0, f, V);
			free(f);
			buf(c, q, allm_qb_bytes(dt, V, dim), OP_CMP_NONE, 0);
			int32_t *ids = rand_ids((size_t)n, (uint32_t)V);
			ids[n - 1] = (int32_t)V - 1;
			buf(c, ids, I32B(n), OP_CMP_NONE, 0);
		}
	}
}

static void elementwise_cases(void)
{
	static const int64_t sizes[] = {1, 31, 1000, 65537};
	for (size_t s = 0; s < ALLM_ARRAY_SIZE(sizes); s++)
		for (int ip = 0; ip < 2; ip++) {
			int64_t n = sizes[s];
			const char *tag = ip ? " in place" : "";
			struct op_case *c = add_case(ALLM_OP_SILU_MUL, ALLM_DTYPE_F32, "silu_mul n=%lld%s",
						     (long long)n, tag);
			c->n = n, c->in_place = ip, c->call = call_silu_mul;
			float *g = rand_f32((size_t)n, 6);
			buf(c, ip ? g : NULL, F32B(n), OP_CMP_NMSE, EXACT_F32);
			buf(c, ip ? NULL : g, ip ? 4 : F32B(n), OP_CMP_NONE, 0);
			buf(c, rand_f32((size_t)n, 2), F32B(n), OP_CMP_NONE, 0);

			/* GELU-tanh: the SIMD levels' tanh comes from their vector exp, within
			 * 1.2e-7 of tanhf near 0, where one value alone (n = 1) has no energy for
			 * a normalised error to be measured against: n >= 31 */
			c = add_case(ALLM_OP_GELU_MUL, ALLM_DTYPE_F32, "gelu_mul n=%lld%s", (long long)ALLM_MAX(n, 31), tag);
			c->n = ALLM_MAX(n, 31), c->in_place = ip, c->call = call_gelu_mul;
			g = rand_f32((size_t)c->n, 6);
			buf(c, ip ? g : NULL, F32B(c->n), OP_CMP_NMSE, 1e-12);
			buf(c, ip ? NULL : g, ip ? 4 : F32B(c->n), OP_CMP_NONE, 0);
			buf(c, rand_f32((size_t)c->n, 2), F32B(c->n), OP_CMP_NONE, 0);

			c = add_case(ALLM_OP_SCALE, ALLM_DTYPE_F32, "scale n=%lld%s", (long long)n, tag);
			c->n = n, c->in_place = ip, c->scale = 25.298221f, c->call = call_scale;
			float *e = rand_f32((size_t)n, 2);
			buf(c, ip ? e : NULL, F32B(n), OP_CMP_BYTES, 0);
			buf(c, ip ? NULL : e, ip ? 4 : F32B(n), OP_CMP_NONE, 0);

			c = add_case(ALLM_OP_RELU, ALLM_DTYPE_F32, "relu n=%lld%s", (long long)n, tag);
			c->n = n, c->in_place = ip, c->call = call_relu;
			float *x = rand_f32((size_t)n, 2);
			buf(c, ip ? x : NULL, F32B(n), OP_CMP_BYTES, 0);
			buf(c, ip ? NULL : x, ip ? 4 : F32B(n), OP_CMP_NONE, 0);

			c = add_case(ALLM_OP_ADD, ALLM_DTYPE_F32, "add n=%lld%s", (long long)n, tag);
			c->n = n, c->in_place = ip, c->call = call_add;
			float *a = rand_f32((size_t)n, 2);
			buf(c, ip ? a : NULL, F32B(n), OP_CMP_BYTES, 0);
			buf(c, ip ? NULL : a, ip ? 4 : F32B(n), OP_CMP_NONE, 0);
			buf(c, rand_f32((size_t)n, 2), F32B(n), OP_CMP_NONE, 0);
		}
	static const int64_t gshapes[][3] = {{1, 1, 1}, {5, 9, 3}, {64, 4096, 80}};
	for (size_t s = 0; s < ALLM_ARRAY_SIZE(gshapes); s++) {
		int64_t n = gshapes[s][0], dim = gshapes[s][1], src = gshapes[s][2];
		struct op_case *c = add_case(ALLM_OP_GATHER_ROWS, ALLM_DTYPE_F32,
					     "gather_rows n=%lld dim=%lld from %lld rows", (long long)n,
					     (long long)dim, (long long)src);
		c->n = n, c->k = dim, c->call = call_gather;
		buf(c, NULL, F32B(n * dim), OP_CMP_BYTES, 0);
		buf(c, rand_f32((size_t)(src * dim), 1), F32B(src * dim), OP_CMP_NONE, 0);
		buf(c, rand_ids((size_t)n, (uint32_t)src), I32B(n), OP_CMP_NONE, 0); /* repeats */
	}
	/* RoPE: (n, heads, kv heads, head_dim), positions up to 1e4 */
	static const int32_t rshapes[][4] = {{1, 1, 1, 2}, {3, 4, 4, 8}, {7, 8, 2, 64}, {5, 6, 3, 128},
					     {2, 2, 1, 256}};
	for (size_t s = 0; s < ALLM_ARRAY_SIZE(rshapes); s++) {
		int32_t n = rshapes[s][0], h = rshapes[s][1], hk = rshapes[s][2], hd = rshapes[s][3];
		struct op_case *c = add_case(ALLM_OP_ROPE, ALLM_DTYPE_F32, "rope n=%d heads=%d/%d hd=%d",
					     n, h, hk, hd);
		c->n = n, c->n_heads = h, c->lay.n_kv_heads = hk, c->lay.head_dim = hd;
		c->call = call_rope;
		buf(c, rand_f32((size_t)n * h * hd, 1), F32B((size_t)n * h * hd), OP_CMP_NMSE, EXACT_F32);
		buf(c, rand_f32((size_t)n * hk * hd, 1), F32B((size_t)n * hk * hd), OP_CMP_NMSE, EXACT_F32);
		buf(c, rand_ids((size_t)n, 10000), I32B(n), OP_CMP_NONE, 0);
		float *f = malloc(F32B(hd / 2) + 4);
		for (int i = 0; i < hd / 2; i++)
			f[i] = (float)pow(10000.0, -2.0 * i / hd);
		buf(c, f, F32B(hd / 2), OP_CMP_NONE, 0);
	}
}

/* A paged batch: sequences with ctx[i] tokens cached and nn[i] new ones, their
 * blocks scattered over a shuffled pool. Fills c's layout/meta fields and
 * returns the metadata buffers (tok_seq, tok_pos, slot, block_tables). */
static void paged_batch(struct op_case *c, int ns, const int32_t *ctx, const int32_t *nn,
			int32_t *ret_blocks, void **ret_meta)
{
	int32_t bs = c->lay.block_size, T = 0, maxb = 1, total_b = 0, maxc = 0;
	for (int s = 0; s < ns; s++) {
		int32_t nb = (ctx[s] + nn[s] + bs - 1) / bs;
		T += nn[s];
		total_b += nb;
		maxb = ALLM_MAX(maxb, nb);
		maxc = ALLM_MAX(maxc, ctx[s] + nn[s]);
	}
	int32_t pool_b = total_b + 3; /* spare blocks nobody owns */
	int32_t *perm = malloc(I32B(pool_b));
	for (int32_t i = 0; i < pool_b; i++)
		perm[i] = i;
	for (int32_t i = pool_b - 1; i > 0; i--) {
		int32_t j = (int32_t)urand((uint32_t)i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	int32_t *seq = malloc(I32B(T) + 4), *pos = malloc(I32B(T) + 4), *slot = malloc(I32B(T) + 4);
	int32_t *bt = calloc((size_t)ns * maxb + 1, sizeof(int32_t));
	int32_t t = 0, next = 0;
	for (int s = 0; s < ns; s++) {
		int32_t nb = (ctx[s] + nn[s] + bs - 1) / bs;
		for (int32_t b = 0; b < nb; b++)
			bt[s * maxb + b] = perm[next++];
		for (int32_t i = 0; i < nn[s]; i++, t++) {
			int32_t p = ctx[s] + i;
			seq[t] = s;
			pos[t] = p;
			slot[t] = bt[s * maxb + p / bs] * bs + p % bs;
		}
	}
	free(perm);
	c->n_tokens = T, c->n_seqs = ns, c->max_blocks = maxb, c->max_ctx = maxc;
	*ret_blocks = pool_b;
	ret_meta[0] = seq, ret_meta[1] = pos, ret_meta[2] = slot, ret_meta[3] = bt;
}

static void add_meta(struct op_case *c, void **meta)
{
	buf(c, meta[0], I32B(c->n_tokens), OP_CMP_NONE, 0);
	buf(c, meta[1], I32B(c->n_tokens), OP_CMP_NONE, 0);
	buf(c, meta[2], I32B(c->n_tokens), OP_CMP_NONE, 0);
	buf(c, meta[3], I32B((size_t)c->n_seqs * c->max_blocks), OP_CMP_NONE, 0);
}

struct batch_shape {
	const char *what;
	int ns;
	int32_t ctx[6], nn[6];
};

static const struct batch_shape batches[] = {
	{"prefill", 2, {0, 0}, {5, 37}},
	{"long prefill", 1, {0}, {300}},
	{"decode", 5, {0, 16, 299, 1024, 63}, {1, 1, 1, 1, 1}},
	{"mixed", 4, {20, 0, 100, 7}, {13, 1, 1, 40}},
};

static void attention_cases(void)
{
	/* (heads, kv heads, head_dim): MHA, GQA 4, GQA 3 (odd group), odd dims */
	static const int32_t heads[][3] = {{4, 4, 8}, {8, 2, 64}, {6, 2, 128}, {3, 1, 96}, {2, 1, 256}};
	static const int32_t bss[] = {1, 16, 32};
	for (size_t di = 0; di < 3; di++)
		for (size_t hi = 0; hi < ALLM_ARRAY_SIZE(heads); hi++)
			for (size_t bi = 0; bi < ALLM_ARRAY_SIZE(bss); bi++)
				for (size_t ba = 0; ba < ALLM_ARRAY_SIZE(batches); ba++) {
					enum allm_dtype dt = dts[di];
					const struct batch_shape *B = &batches[ba];
					int32_t h = heads[hi][0], hk = heads[hi][1], hd = heads[hi][2];
					/* keep the reference's work small: big heads get one shape */
					if (hd >= 128 && (bi != 1 || ba == 1))
						continue;
					for (int op = 0; op < 2; op++) {
						struct op_case *c = add_case(op ? ALLM_OP_ATTENTION : ALLM_OP_KV_WRITE,
									     dt, "%s %s heads=%d/%d hd=%d bs=%d %s",
									     op ? "attention" : "kv_write",
									     allm_dtype_name(dt), h, hk, hd, bss[bi],
									     B->what);
						c->lay = (struct allm_kv_layout){2, hk, hd, bss[bi], dt};
						c->layer = 1, c->n_heads = h, c->scale = 1.0f / sqrtf((float)hd);
						int32_t nblk;
						void *meta[4];
						paged_batch(c, B->ns, B->ctx, B->nn, &nblk, meta);
						size_t pool_e = allm_kv_block_elems(&c->lay) * (size_t)nblk;
						size_t kvd = (size_t)hk * hd, T = (size_t)c->n_tokens;
						if (op) {
							c->call = call_attention;
							buf(c, NULL, F32B(T * h * hd), OP_CMP_NMSE, EXACT_F32);
							buf(c, rand_f32(T * h * hd, 1), F32B(T * h * hd), OP_CMP_NONE, 0);
							buf(c, rand_dt(dt, pool_e, 1, 0), DTB(dt, pool_e), OP_CMP_NONE, 0);
						} else {
							c->call = call_kv_write;
							buf(c, rand_dt(dt, pool_e, 1, 0), DTB(dt, pool_e), OP_CMP_BYTES, 0);
							buf(c, rand_f32(T * kvd, 2), F32B(T * kvd), OP_CMP_NONE, 0);
							buf(c, rand_f32(T * kvd, 2), F32B(T * kvd), OP_CMP_NONE, 0);
						}
						add_meta(c, meta);
					}
				}
	/* sliding windows (Mistral, Gemma's local layers): shorter than a block, across
	 * blocks, and longer than every context (the whole context) */
	static const int32_t windows[] = {1, 5, 40, 4096};
	for (size_t di = 0; di < 3; di++)
		for (size_t wi = 0; wi < ALLM_ARRAY_SIZE(windows); wi++)
			for (size_t ba = 0; ba < ALLM_ARRAY_SIZE(batches); ba++) {
				enum allm_dtype dt = dts[di];
				const struct batch_shape *B = &batches[ba];
				int32_t h = 8, hk = 2, hd = 64, bs = 16;
				struct op_case *c = add_case(ALLM_OP_SLIDING_WINDOW, dt,
							     "attention %s heads=%d/%d hd=%d bs=%d %s window=%d",
							     allm_dtype_name(dt), h, hk, hd, bs, B->what, windows[wi]);
				c->lay = (struct allm_kv_layout){2, hk, hd, bs, dt};
				c->layer = 1, c->n_heads = h, c->scale = 1.0f / sqrtf((float)hd);
				c->window = windows[wi];
				int32_t nblk;
				void *meta[4];
				paged_batch(c, B->ns, B->ctx, B->nn, &nblk, meta);
				size_t pool_e = allm_kv_block_elems(&c->lay) * (size_t)nblk, T = (size_t)c->n_tokens;
				c->call = call_attention;
				buf(c, NULL, F32B(T * h * hd), OP_CMP_NMSE, EXACT_F32);
				buf(c, rand_f32(T * h * hd, 1), F32B(T * h * hd), OP_CMP_NONE, 0);
				buf(c, rand_dt(dt, pool_e, 1, 0), DTB(dt, pool_e), OP_CMP_NONE, 0);
				add_meta(c, meta);
			}
}

/* Logits with planted ties: the maximum repeated, a plateau across the k-th
 * place, -0.0 next to +0.0, or a constant row. */
static float *tie_rows(int64_t n, int64_t V, int kind)
{
	float *p = malloc(F32B(n * V) + 4);
	for (int64_t i = 0; i < n; i++) {
		float *r = p + i * V;
		for (int64_t j = 0; j < V; j++)
			r[j] = kind == 3 ? 0.25f : (float)(int)(frand() * 8) * 0.5f; /* coarse: many ties */
		if (kind == 1)
			for (int64_t j = 0; j < V; j += 3)
				r[j] = -0.0f, r[(j + 1) % V] = 0.0f;
		if (kind == 2 && V > 5) /* the max twice, not at the start */
			r[V / 2] = r[V - 1] = 100.0f;
	}
	return p;
}

static void sampling_cases(void)
{
	static const int64_t shapes[][2] = {{1, 1}, {3, 1000}, {5, 32000}, {2, 256}, {1, 50272}};
	for (size_t s = 0; s < ALLM_ARRAY_SIZE(shapes); s++)
		for (int kind = 0; kind < 4; kind++) {
			int64_t n = shapes[s][0], V = shapes[s][1];
			struct op_case *c = add_case(ALLM_OP_ARGMAX, ALLM_DTYPE_F32,
						     "argmax n=%lld vocab=%lld ties=%d", (long long)n,
						     (long long)V, kind);
			c->n = n, c->k = V, c->call = call_argmax;
			buf(c, NULL, I32B(n), OP_CMP_BYTES, 0);
			buf(c, tie_rows(n, V, kind), F32B(n * V), OP_CMP_NONE, 0);
			static const int32_t ks[] = {1, 2, 40, 256};
			for (size_t ki = 0; ki < ALLM_ARRAY_SIZE(ks); ki++) {
				int32_t k = ks[ki];
				if (k > V)
					continue;
				c = add_case(ALLM_OP_TOPK, ALLM_DTYPE_F32, "topk k=%d n=%lld vocab=%lld ties=%d",
					     k, (long long)n, (long long)V, kind);
				c->n = n, c->k = V, c->m = k, c->call = call_topk;
				buf(c, NULL, F32B(n * k), OP_CMP_EQ, 0);
				buf(c, NULL, I32B(n * k), OP_CMP_BYTES, 0);
				buf(c, tie_rows(n, V, kind), F32B(n * V), OP_CMP_NONE, 0);
			}
		}
}

int ops_build_cases(struct op_case **ret)
{
	rows_cases();
	gemm_cases();
	qb_cases();
	elementwise_cases();
	attention_cases();
	sampling_cases();
	*ret = cs;
	return ncs;
}

void ops_free_cases(struct op_case *c, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < c[i].nb; j++)
			free(c[i].b[j].host);
	free(c);
}
