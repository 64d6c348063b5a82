/* allm-sim-fit's measurements: the real CPU backend's ops, called as the engine
 * calls them, on grids of shapes; every point is the median of f->repeat timings. */
#include "allm-sim-fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t gemm_rows[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
				    384, 512, 768, 1024, 1536, 2048};
static const int64_t op_rows[] = {1, 4, 16, 64, 256, 1024};

typedef void (*run_fn)(struct fit *f, void *job);

/* Seconds per call of run: the mean over a burst of calls lasting BURST_S (the
 * engine calls ops back to back, and on a shared machine a mean over a burst
 * includes the time other processes take, as a real run's wall time does), the
 * median of f->repeat bursts after a warm-up call. Records the bursts' spread. */
#define BURST_S 0.01

static double time_op(struct fit *f, run_fn run, void *job)
{
	double v[MAX_REPEAT];
	run(f, job);
	for (int i = 0; i < f->repeat; i++) {
		double t0 = allm_now(), t;
		int64_t calls = 0;
		do {
			run(f, job);
			calls++;
		} while ((t = allm_now() - t0) < BURST_S);
		v[i] = t / (double)calls;
	}
	double lo = v[0], hi = v[0];
	for (int i = 1; i < f->repeat; i++) {
		lo = fmin(lo, v[i]);
		hi = fmax(hi, v[i]);
	}
	double med = fit_median(v, f->repeat);
	if (f->n_spread < MAX_PTS && med > 0)
		f->spread[f->n_spread++] = (hi - lo) / med;
	return fmax(med, 1e-9);
}

static void *dev_alloc(struct fit *f, size_t bytes)
{
	void *p = NULL;
	if (f->be->iface->alloc(f->be, bytes, &p)) {
		fprintf(stderr, PROG ": cannot allocate %zu bytes\n", bytes);
		exit(1);
	}
	/* fault the pages in: the engine's buffers are resident when timed */
	memset(p, 0, bytes);
	return p;
}

/* ---- GEMM ---------------------------------------------------------------------- */

struct gemm_job {
	float *y, *x;
	void *w[8];
	int copies, next; /* weights rotate as a forward's layers do, so caches hold what they would */
	enum allm_dtype dt;
	int64_t n, k, m;
};

static void run_gemm(struct fit *f, void *job)
{
	struct gemm_job *g = job;
	f->be->iface->gemm(f->be, g->y, g->x, g->w[g->next], NULL, g->dt, g->n, g->k, g->m);
	g->next = (g->next + 1) % g->copies;
}

static bool shape_done(struct fit *f, int64_t k, int64_t m)
{
	size_t i;
	json_t *s;
	json_array_foreach(f->shapes, i, s)
		if (json_integer_value(json_object_get(s, "k")) == k && json_integer_value(json_object_get(s, "m")) == m)
			return true;
	return false;
}

void measure_gemm(struct fit *f, int64_t k, int64_t m, int copies)
{
	if (shape_done(f, k, m))
		return;
	int64_t nmax = gemm_rows[ALLM_ARRAY_SIZE(gemm_rows) - 1];
	struct gemm_job g = {.copies = ALLM_MAX(1, ALLM_MIN(copies, 8)), .dt = ALLM_DTYPE_F32, .k = k, .m = m};
	g.x = dev_alloc(f, (size_t)(nmax * k) * 4);
	g.y = dev_alloc(f, (size_t)(nmax * m) * 4);
	for (int i = 0; i < g.copies; i++) {
		g.w[i] = dev_alloc(f, (size_t)(k * m) * 4);
		for (int64_t j = 0; j < k * m; j++)
			((float *)g.w[i])[j] = (float)((j * 7 + i) % 13) * 0.01f;
	}
	json_t *pts = json_array();
	for (size_t r = 0; r < ALLM_ARRAY_SIZE(gemm_rows); r++) {
		g.n = gemm_rows[r];
		double t = time_op(f, run_gemm, &g);
		json_array_append_new(pts, json_pack("[I, f]", (json_int_t)g.n, t));
		if (f->ng < MAX_PTS)
			f->g[f->ng++] = (struct gpt){(double)g.n, (double)k, (double)m, t};
	}
	json_array_append_new(f->shapes, json_pack("{s:s, s:I, s:I, s:o, s:s}", "dtype", "f32", "k",
						   (json_int_t)k, "m", (json_int_t)m, "points", pts,
						   "source", "measured: median of repeats (fitted.repeat)"));
	for (int i = 0; i < g.copies; i++)
		f->be->iface->free(f->be, g.w[i]);
	f->be->iface->free(f->be, g.x);
	f->be->iface->free(f->be, g.y);
	if (!f->quiet)
		fprintf(stderr, PROG ": gemm %lld x %lld measured\n", (long long)k, (long long)m);
}

/* Seconds of a 256-row GEMM of the largest shape with weights of dtype dt. */
double gemm_dtype_seconds(struct fit *f, int64_t k, int64_t m, enum allm_dtype dt)
{
	struct gemm_job g = {.copies = 1, .dt = dt, .n = 256, .k = k, .m = m};
	g.x = dev_alloc(f, (size_t)(256 * k) * 4);
	g.y = dev_alloc(f, (size_t)(256 * m) * 4);
	g.w[0] = dev_alloc(f, (size_t)(k * m) * allm_dtype_size(dt));
	double t = time_op(f, run_gemm, &g);
	f->be->iface->free(f->be, g.w[0]);
	f->be->iface->free(f->be, g.x);
	f->be->iface->free(f->be, g.y);
	return t;
}

/* ---- attention ----------------------------------------------------------------- */

struct attn_job {
	float *out, *q;
	void *pool;
	struct allm_kv_layout lay;
	int32_t heads;
	struct allm_attn_meta meta;
};

static void run_attn(struct fit *f, void *job)
{
	struct attn_job *a = job;
	f->be->iface->attention(f->be, a->out, a->q, a->pool, &a->lay, 0, a->heads, 0.125f, &a->meta);
}

/* Times n_seqs sequences of ctx tokens each feeding their last n_new tokens. */
static void attn_point(struct fit *f, struct attn_job *a, int32_t *pos, int32_t *seq, int32_t *bt,
		       int32_t n_seqs, int32_t ctx, int32_t n_new)
{
	int32_t bs = a->lay.block_size, bps = (ctx + bs - 1) / bs, T = n_seqs * n_new;
	for (int32_t s = 0; s < n_seqs; s++) {
		for (int32_t b = 0; b < bps; b++)
			bt[s * bps + b] = s * bps + b;
		for (int32_t i = 0; i < n_new; i++) {
			pos[s * n_new + i] = ctx - n_new + i;
			seq[s * n_new + i] = s;
		}
	}
	a->meta = (struct allm_attn_meta){.n_tokens = T, .n_seqs = n_seqs, .max_blocks_per_seq = bps,
					  .max_ctx = ctx, .tok_seq = seq, .tok_pos = pos, .block_tables = bt};
	double t = time_op(f, run_attn, a);
	if (f->na < (int)ALLM_ARRAY_SIZE(f->a)) {
		struct apt *p = &f->a[f->na++];
		p->lay = a->lay;
		p->heads = a->heads;
		allm_sim_attn_shape_from(pos, seq, T, &p->s);
		p->t = t;
	}
}

#define ATTN_MAX_TOKENS 32768 /* K/V tokens a grid point may hold */

void measure_attention(struct fit *f, const struct allm_model_config *c)
{
	static const int32_t dec_seqs[] = {1, 4, 16, 64, 128, 256};
	static const int32_t ctxs[] = {16, 64, 256, 512, 1024};
	static const int32_t pre_seqs[] = {1, 2, 4};
	struct attn_job a = {.heads = c->n_heads,
			     .lay = {1, c->n_kv_heads, c->head_dim, 16, ALLM_DTYPE_F32}};
	size_t blocks = ATTN_MAX_TOKENS / 16 + 64;
	a.pool = dev_alloc(f, blocks * allm_kv_block_bytes(&a.lay));
	a.q = dev_alloc(f, (size_t)4096 * c->n_heads * c->head_dim * 4);
	a.out = dev_alloc(f, (size_t)4096 * c->n_heads * c->head_dim * 4);
	int32_t *pos = dev_alloc(f, 4096 * 4), *seq = dev_alloc(f, 4096 * 4), *bt = dev_alloc(f, blocks * 4);
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(ctxs); i++) {
		int32_t ctx = ctxs[i];
		if (ctx > c->max_pos)
			continue;
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(dec_seqs); j++)
			if ((int64_t)dec_seqs[j] * ctx <= ATTN_MAX_TOKENS)
				attn_point(f, &a, pos, seq, bt, dec_seqs[j], ctx, 1);
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(pre_seqs); j++)
			if ((int64_t)pre_seqs[j] * ctx <= 2048)
				attn_point(f, &a, pos, seq, bt, pre_seqs[j], ctx, ctx);
	}
	f->be->iface->free(f->be, a.pool);
	f->be->iface->free(f->be, a.q);
	f->be->iface->free(f->be, a.out);
	f->be->iface->free(f->be, pos);
	f->be->iface->free(f->be, seq);
	f->be->iface->free(f->be, bt);
	if (!f->quiet)
		fprintf(stderr, PROG ": attention (%d heads, %d kv heads, head_dim %d) measured\n",
			c->n_heads, c->n_kv_heads, c->head_dim);
}

/* ---- streaming ops and copies ------------------------------------------------------ */

struct op_job {
	enum allm_backend_op op;
	const struct allm_model_config *c;
	int64_t n;
	float *a, *b, *y, *big; /* activations of up to 1024 x max(F, V) */
	void *w; /* an embedding table / norm weights */
	int32_t *ids, *pos;
	void *pool;
	struct allm_kv_layout lay;
	struct allm_attn_meta meta;
	float *inv_freq;
};

static void run_stream(struct fit *f, void *job)
{
	struct op_job *j = job;
	const struct allm_backend_i *B = f->be->iface;
	const struct allm_model_config *c = j->c;
	int64_t D = c->hidden, F = c->intermediate, V = c->vocab_size;
	switch (j->op) {
	case ALLM_OP_EMBEDDING: B->embedding(f->be, j->y, j->w, ALLM_DTYPE_F32, j->ids, j->n, D); break;
	case ALLM_OP_RMSNORM: B->rmsnorm(f->be, j->y, j->a, j->w, ALLM_DTYPE_F32, j->n, D, 1e-5f); break;
	case ALLM_OP_LAYERNORM:
		B->layernorm(f->be, j->y, j->a, j->w, j->w, ALLM_DTYPE_F32, j->n, D, 1e-5f);
		break;
	case ALLM_OP_ROPE:
		B->rope(f->be, j->a, j->b, j->pos, j->inv_freq, j->n, c->n_heads, c->n_kv_heads, c->head_dim);
		break;
	case ALLM_OP_SILU_MUL: B->silu_mul(f->be, j->big, j->big, j->big, j->n * F); break;
	case ALLM_OP_RELU: B->relu(f->be, j->big, j->big, j->n * F); break;
	case ALLM_OP_ADD: B->add(f->be, j->y, j->y, j->a, j->n * D); break;
	case ALLM_OP_GATHER_ROWS: B->gather_rows(f->be, j->y, j->a, j->pos, j->n, D); break;
	case ALLM_OP_KV_WRITE: B->kv_write(f->be, j->pool, &j->lay, 0, j->a, j->b, &j->meta); break;
	case ALLM_OP_ARGMAX:
		/* the CPU engine downloads the logits and picks on the host: both count */
		B->download(f->be, j->y, j->big, (size_t)(j->n * V) * 4);
		B->argmax(f->be, j->ids, j->y, j->n, V);
		break;
	case ALLM_OP_TOPK: B->topk(f->be, j->y, j->ids, j->big, j->n, V, 40); break;
	default: break;
	}
}

static double stream_bytes(const struct op_job *j)
{
	const struct allm_model_config *c = j->c;
	switch (j->op) {
	case ALLM_OP_EMBEDDING: return allm_sim_bytes_embedding(j->n, c->hidden, ALLM_DTYPE_F32);
	case ALLM_OP_RMSNORM: return allm_sim_bytes_norm(j->n, c->hidden, ALLM_DTYPE_F32, 1);
	case ALLM_OP_LAYERNORM: return allm_sim_bytes_norm(j->n, c->hidden, ALLM_DTYPE_F32, 2);
	case ALLM_OP_ROPE: return allm_sim_bytes_rope(j->n, c->n_heads, c->n_kv_heads, c->head_dim);
	case ALLM_OP_SILU_MUL: return allm_sim_bytes_elementwise(j->n * c->intermediate, 3);
	case ALLM_OP_RELU: return allm_sim_bytes_elementwise(j->n * c->intermediate, 2);
	case ALLM_OP_ADD: return allm_sim_bytes_elementwise(j->n * c->hidden, 3);
	case ALLM_OP_GATHER_ROWS: return allm_sim_bytes_gather(j->n, c->hidden);
	case ALLM_OP_KV_WRITE: return allm_sim_bytes_kv_write(&j->lay, j->n);
	default: return allm_sim_bytes_logits(j->n, c->vocab_size);
	}
}

void measure_stream(struct fit *f, const struct allm_model_config *c)
{
	static const enum allm_backend_op ops[] = {
		ALLM_OP_EMBEDDING, ALLM_OP_RMSNORM, ALLM_OP_LAYERNORM, ALLM_OP_ROPE, ALLM_OP_SILU_MUL,
		ALLM_OP_RELU, ALLM_OP_ADD, ALLM_OP_GATHER_ROWS, ALLM_OP_KV_WRITE, ALLM_OP_ARGMAX, ALLM_OP_TOPK};
	int64_t nmax = op_rows[ALLM_ARRAY_SIZE(op_rows) - 1];
	int64_t wide = ALLM_MAX(ALLM_MAX(c->intermediate, c->vocab_size), c->hidden);
	int64_t qk = (int64_t)(c->n_heads + c->n_kv_heads) * c->head_dim;
	struct op_job j = {.c = c, .lay = {1, c->n_kv_heads, c->head_dim, 16, ALLM_DTYPE_F32}};
	j.a = dev_alloc(f, (size_t)(nmax * ALLM_MAX(qk, c->hidden)) * 4);
	j.b = dev_alloc(f, (size_t)(nmax * ALLM_MAX(qk, c->hidden)) * 4);
	j.y = dev_alloc(f, (size_t)(nmax * wide) * 4);
	j.big = dev_alloc(f, (size_t)(nmax * wide) * 4);
	j.w = dev_alloc(f, (size_t)c->vocab_size * c->hidden * 4);
	j.ids = dev_alloc(f, (size_t)nmax * 40 * 4);
	j.pos = dev_alloc(f, (size_t)nmax * 4);
	j.inv_freq = dev_alloc(f, (size_t)c->head_dim * 4);
	j.pool = dev_alloc(f, (size_t)(nmax / 16 + 1) * allm_kv_block_bytes(&j.lay));
	int32_t *seq = dev_alloc(f, (size_t)nmax * 4), *slot = dev_alloc(f, (size_t)nmax * 4);
	for (int64_t i = 0; i < nmax; i++) {
		j.ids[i] = (int32_t)((i * 2654435761u) % (uint32_t)c->vocab_size);
		j.pos[i] = (int32_t)i;
		slot[i] = (int32_t)i;
	}
	for (int i = 0; i < c->head_dim / 2; i++)
		j.inv_freq[i] = powf(10000.0f, -2.0f * i / c->head_dim);
	for (size_t o = 0; o < ALLM_ARRAY_SIZE(ops); o++) {
		j.op = ops[o];
		for (size_t r = 0; r < ALLM_ARRAY_SIZE(op_rows); r++) {
			j.n = op_rows[r];
			j.meta = (struct allm_attn_meta){.n_tokens = (int32_t)j.n, .n_seqs = 1, .tok_seq = seq,
							 .tok_pos = j.pos, .slot = slot};
			double t = time_op(f, run_stream, &j);
			int *n = &f->sn[j.op];
			if (*n < 256) {
				f->sx[j.op][*n] = stream_bytes(&j);
				f->st[j.op][(*n)++] = t;
			}
		}
	}
	void *bufs[] = {j.a, j.b, j.y, j.big, j.w, j.ids, j.pos, j.inv_freq, j.pool, seq, slot};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(bufs); i++)
		f->be->iface->free(f->be, bufs[i]);
	if (!f->quiet)
		fprintf(stderr, PROG ": streaming ops of width %d measured\n", c->hidden);
}

struct copy_job {
	char *src, *dst;
	size_t bytes;
	enum allm_copy_dir dir;
};

static void run_copy(struct fit *f, void *job)
{
	struct copy_job *c = job;
	double s;
	f->be->iface->copy_async(f->be, c->dst, c->src, c->bytes, c->dir);
	f->be->iface->copy_wait(f->be, &s);
}

/* Copies of a model's KV blocks, 1 to 64 at a time, between two resident pools. */
void measure_copies(struct fit *f, size_t block_bytes)
{
	size_t max = 64 * block_bytes;
	struct copy_job c = {.src = dev_alloc(f, max), .dst = dev_alloc(f, max)};
	for (int d = 0; d < 2; d++)
		for (size_t n = 1; n <= 64; n *= 2) {
			c.bytes = n * block_bytes;
			c.dir = d ? ALLM_COPY_H2D : ALLM_COPY_D2H;
			double t = time_op(f, run_copy, &c);
			if (f->cn[d] < 64) {
				f->cx[d][f->cn[d]] = (double)c.bytes;
				f->ct[d][f->cn[d]++] = t;
			}
		}
	f->be->iface->free(f->be, c.src);
	f->be->iface->free(f->be, c.dst);
}

