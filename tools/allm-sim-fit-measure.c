/* allm-sim-fit's measurements, in place: the model runs real forwards on the CPU
 * backend over a grid of batch shapes, through a proxy of the backend's vtable
 * that times every op as the executor calls it. In place, not in a loop of one
 * op: between a forward's GEMMs come single-threaded ops during which the
 * backend's workers go to sleep, K/V writes land on scattered pool pages, and
 * caches hold what a forward leaves in them; an op timed alone misses all three
 * (2-3x on GEMMs here). Samples of equal shape are reduced to their median. */
#include "allm-sim-fit.h"

#include "runtime.h"
#include "sequence.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- the clock ----------------------------------------------------------------------- */

static double thread_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Timings read the wall clock (allm_now). --clock cpu (one backend thread) wants an
 * op's cost without the time other processes took, but reading this thread's CPU
 * time around every op costs more than many ops do: on an AMD EPYC VM it is a
 * 0.5 us system call (the wall clock 22 ns), and even with each reading's cost
 * taken off, stories260K's forwards of ~50 ops of a few us came out 15-28 %
 * dearer in the fitted profile than in reality (sim-validate's runs 6-14 % slow,
 * 2-4 % with the wall clock). So ops are timed on the wall clock always, and
 * under --clock cpu the thread's CPU time is read around whole forwards only: a
 * forward whose wall time exceeds its CPU time (the thread was off the CPU) is
 * timed again, what the proxy recorded in it dropped. */
static bool guard_cpu;

/* What one reading of the wall clock costs, and how many the proxy took. Each timed op
 * includes about one reading's cost, and a forward all of its ops' readings; so
 * both are taken off. */
static double clk_cost;
static int64_t clk_calls;

static double tick(void)
{
	clk_calls++;
	return allm_now();
}

void fit_clock_init(bool guard)
{
	double d[201];
	guard_cpu = guard;
	for (int i = 0; i < 201; i++) {
		double a = allm_now();
		d[i] = allm_now() - a;
	}
	clk_cost = allm_median(d, 201); /* a preemption in one pair does not count */
}

/* --- the proxy --------------------------------------------------------------------- */

static struct fit *rec; /* where samples go; NULL while not recording */
static allm_backend_t real; /* a copy of the CPU backend the proxy forwards to */
static double last_download_s; /* the forward's logits download, charged to argmax */

static void *grow(void *v, int *cap, int n, size_t sz)
{
	if (n < *cap)
		return v;
	int c = *cap ? *cap * 2 : 1024;
	void *p = realloc(v, (size_t)c * sz);
	if (!p) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	*cap = c;
	return p;
}

static void add_stream(int op, double bytes, double t)
{
	if (!rec)
		return;
	rec->ss = grow(rec->ss, &rec->cap_ss, rec->nss, sizeof(*rec->ss));
	rec->ss[rec->nss++] = (struct ssample){op, bytes, t};
}

static void add_link(int dir, double bytes, double t)
{
	if (!rec)
		return;
	rec->ls = grow(rec->ls, &rec->cap_ls, rec->nls, sizeof(*rec->ls));
	rec->ls[rec->nls++] = (struct ssample){dir, bytes, t};
}

#define R real.iface
#define TIMED(call) \
	double t0 = tick(); \
	int r = (call); \
	double t = ALLM_MAX(0.0, tick() - t0 - clk_cost)

static int p_embedding(allm_backend_t *be, float *y, const void *tb, enum allm_dtype dt, const int32_t *ids,
		       int64_t n, int64_t dim)
{
	TIMED(R->embedding(&real, y, tb, dt, ids, n, dim));
	add_stream(ALLM_OP_EMBEDDING, allm_sim_bytes_embedding(n, dim, dt), t);
	return r;
}

static int p_rmsnorm(allm_backend_t *be, float *y, const float *x, const void *w, enum allm_dtype dt, int64_t n,
		     int64_t dim, float eps)
{
	TIMED(R->rmsnorm(&real, y, x, w, dt, n, dim, eps));
	add_stream(ALLM_OP_RMSNORM, allm_sim_bytes_norm(n, dim, dt, 1), t);
	return r;
}

static int p_layernorm(allm_backend_t *be, float *y, const float *x, const void *w, const void *b,
		       enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	TIMED(R->layernorm(&real, y, x, w, b, dt, n, dim, eps));
	add_stream(ALLM_OP_LAYERNORM, allm_sim_bytes_norm(n, dim, dt, 2), t);
	return r;
}

static int p_gemm(allm_backend_t *be, float *y, const float *x, const void *w, const void *b, enum allm_dtype dt,
		  int64_t n, int64_t k, int64_t m)
{
	TIMED(R->gemm(&real, y, x, w, b, dt, n, k, m));
	if (rec) {
		rec->gs = grow(rec->gs, &rec->cap_gs, rec->ngs, sizeof(*rec->gs));
		rec->gs[rec->ngs++] = (struct gsample){dt, k, m, n, t};
	}
	return r;
}

static int p_rope(allm_backend_t *be, float *q, float *k, const int32_t *pos, const float *f, int64_t n, int32_t h,
		  int32_t kvh, int32_t hd)
{
	TIMED(R->rope(&real, q, k, pos, f, n, h, kvh, hd));
	add_stream(ALLM_OP_ROPE, allm_sim_bytes_rope(n, h, kvh, hd), t);
	return r;
}

static int p_silu_mul(allm_backend_t *be, float *y, const float *g, const float *u, int64_t n)
{
	TIMED(R->silu_mul(&real, y, g, u, n));
	add_stream(ALLM_OP_SILU_MUL, allm_sim_bytes_elementwise(n, 3), t);
	return r;
}

static int p_relu(allm_backend_t *be, float *y, const float *x, int64_t n)
{
	TIMED(R->relu(&real, y, x, n));
	add_stream(ALLM_OP_RELU, allm_sim_bytes_elementwise(n, 2), t);
	return r;
}

static int p_add(allm_backend_t *be, float *y, const float *a, const float *b, int64_t n)
{
	TIMED(R->add(&real, y, a, b, n));
	add_stream(ALLM_OP_ADD, allm_sim_bytes_elementwise(n, 3), t);
	return r;
}

static int p_gather(allm_backend_t *be, float *y, const float *x, const int32_t *rows, int64_t n, int64_t dim)
{
	TIMED(R->gather_rows(&real, y, x, rows, n, dim));
	add_stream(ALLM_OP_GATHER_ROWS, allm_sim_bytes_gather(n, dim), t);
	return r;
}

static int p_kv_write(allm_backend_t *be, void *pool, const struct allm_kv_layout *lay, int32_t l, const float *k,
		      const float *v, const struct allm_attn_meta *m)
{
	TIMED(R->kv_write(&real, pool, lay, l, k, v, m));
	add_stream(ALLM_OP_KV_WRITE, allm_sim_bytes_kv_write(lay, m->n_tokens), t);
	return r;
}

static int p_attention(allm_backend_t *be, float *out, const float *q, const void *pool,
		       const struct allm_kv_layout *lay, int32_t l, int32_t h, float scale,
		       const struct allm_attn_meta *m)
{
	TIMED(R->attention(&real, out, q, pool, lay, l, h, scale, m));
	if (rec) {
		rec->as = grow(rec->as, &rec->cap_as, rec->nas, sizeof(*rec->as));
		struct apt *a = &rec->as[rec->nas++];
		a->lay = *lay;
		a->heads = h;
		allm_sim_attn_shape_from(m->tok_pos, m->tok_seq, m->n_tokens, &a->s);
		a->t = t;
	}
	return r;
}

static int p_upload(allm_backend_t *be, void *d, const void *s, size_t bytes)
{
	TIMED(R->upload(&real, d, s, bytes));
	add_link(ALLM_COPY_H2D, (double)bytes, t);
	return r;
}

static int p_download(allm_backend_t *be, void *d, const void *s, size_t bytes)
{
	TIMED(R->download(&real, d, s, bytes));
	last_download_s = t;
	return r;
}
#undef TIMED
#undef R

int fit_proxy_install(allm_backend_t *be)
{
	static struct allm_backend_i proxy;
	real = *be;
	proxy = *be->iface;
	proxy.embedding = p_embedding;
	proxy.rmsnorm = p_rmsnorm;
	proxy.layernorm = p_layernorm;
	proxy.gemm = p_gemm;
	/* the executor then calls gemm once per matrix, each timed as its own shape
	 * (the simulated device prices GEMMs one by one) */
	proxy.gemm_multi = NULL;
	proxy.rope = p_rope;
	proxy.silu_mul = p_silu_mul;
	proxy.relu = p_relu;
	proxy.add = p_add;
	proxy.gather_rows = p_gather;
	proxy.kv_write = p_kv_write;
	proxy.attention = p_attention;
	proxy.upload = p_upload;
	proxy.download = p_download;
	be->iface = &proxy;
	return 0;
}

void fit_proxy_record(struct fit *f)
{
	rec = f;
}

void fit_proxy_mark(const struct fit *f, int mark[4])
{
	mark[0] = f ? f->ngs : 0, mark[1] = f ? f->nas : 0;
	mark[2] = f ? f->nss : 0, mark[3] = f ? f->nls : 0;
}

void fit_proxy_rewind(struct fit *f, const int mark[4])
{
	if (f)
		f->ngs = mark[0], f->nas = mark[1], f->nss = mark[2], f->nls = mark[3];
}

/* --- forwards over a grid of batch shapes ------------------------------------------ */

int fit_forward(struct allm_runtime *rt, const struct fit_shape *sh, int reps, double *ret_mean,
		struct fit *f)
{
	int32_t n = sh->n_dec + sh->n_pre;
	struct allm_seq *seqs = allm_calloc((size_t)n, sizeof(*seqs));
	struct allm_batch_seq *b = allm_calloc((size_t)n, sizeof(*b));
	int32_t *ids = allm_malloc(4096 * sizeof(int32_t));
	float *logits = allm_malloc((size_t)n * rt->model->cfg.vocab_size * sizeof(float));
	int32_t *picks = allm_malloc((size_t)n * 40 * sizeof(int32_t));
	float *vals = allm_malloc((size_t)n * 40 * sizeof(float));
	struct allm_executor *ex = NULL;
	struct allm_err err = {{0}};
	double v[MAX_REPEAT];
	int32_t made = 0, V = rt->model->cfg.vocab_size;
	int rc = -1;
	if (!seqs || !b || !ids || !logits || !picks || !vals || allm_executor_create(rt->model, rt->kv, &ex, &err))
		goto out;
	for (int32_t i = 0; i < 4096; i++)
		ids[i] = (int32_t)((i * 2654435761u + 7) % (uint32_t)V);
	for (; made < n; made++) {
		bool dec = made < sh->n_dec;
		int32_t len = dec ? sh->ctx : sh->len;
		if (allm_seq_init(&seqs[made], 1000 + made, ids + made % 64, len) ||
		    allm_seq_reserve(&seqs[made], rt->kv, len)) {
			made++;
			goto out;
		}
		seqs[made].n_cached = dec ? len - 1 : 0;
		allm_seq_batch_entry(&seqs[made], &b[made]);
	}
	/* device time as the engine's clock sees it; the CPU engine downloads the
	 * logits and samples on the host, which a simulated device charges to argmax */
	float *ret = rt->be->simulated ? NULL : logits;
	if (allm_executor_forward(ex, b, n, false, ret, &err)) /* warm-up */
		goto out;
	for (int r = 0, retries = 0; r < reps; r++) {
		int mark[4];
		fit_proxy_mark(f, mark);
		fit_proxy_record(f);
		int64_t calls0 = clk_calls;
		double c0 = guard_cpu ? thread_cpu_now() : 0, w0 = allm_now();
		int e = allm_executor_forward(ex, b, n, false, ret, &err);
		double w1 = allm_now(), c1 = guard_cpu ? thread_cpu_now() : 0;
		fit_proxy_record(NULL);
		if (e)
			goto out;
		/* off the CPU for more than 2 % (+ 2 us) of the forward: again, up to
		 * 50 times (a machine that never leaves us alone keeps its timings) */
		if (guard_cpu && (w1 - w0) - (c1 - c0) > 0.02 * (w1 - w0) + 2e-6 && retries++ < 50) {
			fit_proxy_rewind(f, mark);
			r--;
			continue;
		}
		/* the device's own timer, less the proxy's readings inside it */
		v[r] = ex->last_seconds;
		if (!rt->be->simulated)
			v[r] = ALLM_MAX(0.0, v[r] - (double)(clk_calls - calls0) * clk_cost);
		if (f && !rt->be->simulated) {
			double t0 = allm_now();
			rt->be->iface->argmax(rt->be, picks, logits, n, V);
			double t = allm_now() - t0 + last_download_s;
			add_stream_to(f, ALLM_OP_ARGMAX, allm_sim_bytes_logits(n, V), t);
			t0 = allm_now();
			rt->be->iface->topk(rt->be, vals, picks, logits, n, V, 40);
			add_stream_to(f, ALLM_OP_TOPK, allm_sim_bytes_logits(n, V), allm_now() - t0);
		}
	}
	double sum = 0;
	for (int r = 0; r < reps; r++)
		sum += v[r];
	*ret_mean = sum / reps;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, PROG ": forward of %d decodes @%d + %d x %d failed: %s\n", sh->n_dec, sh->ctx,
			sh->n_pre, sh->len, err.msg[0] ? err.msg : "out of memory or KV blocks");
	for (int32_t i = 0; i < made; i++)
		allm_seq_fini(&seqs[i], rt->kv);
	allm_executor_free(ex);
	allm_free(seqs);
	allm_free(b);
	allm_free(ids);
	allm_free(logits);
	allm_free(picks);
	allm_free(vals);
	return rc;
}

void add_stream_to(struct fit *f, int op, double bytes, double t)
{
	struct fit *saved = rec;
	rec = f;
	add_stream(op, bytes, t);
	rec = saved;
}

/* The grid: decodes of 1..256 sequences at three context lengths, prefills of
 * 1..4 prompts of 8..2048 tokens, two mixed steps; K/V of at most 32768 tokens. */
int fit_grid(const struct allm_model_config *c, struct fit_shape *ret, int max)
{
	/* 12 and 15: the CPU GEMM reads W in place up to 15 rows and takes another
	 * path from 16 (cpu-gemm.h), so a row count between 8 and 16 costs nearly what
	 * 8 does; the measured tables need points on both sides of that step, or their
	 * interpolation prices 12 rows 40 % over */
	static const int32_t dec[] = {1, 2, 4, 8, 12, 15, 16, 24, 32, 48, 64, 96, 128, 192, 256};
	static const int32_t ctx[] = {32, 128, 512};
	static const int32_t pre_n[] = {1, 2, 4};
	static const int32_t pre_len[] = {8, 32, 128, 512, 2048};
	int n = 0;
	for (size_t j = 0; j < ALLM_ARRAY_SIZE(ctx); j++)
		for (size_t i = 0; i < ALLM_ARRAY_SIZE(dec); i++)
			if (ctx[j] < c->max_pos && dec[i] * ctx[j] <= 32768 && n < max)
				ret[n++] = (struct fit_shape){dec[i], ctx[j], 0, 0};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(pre_n); i++)
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(pre_len); j++) {
			int32_t len = ALLM_MIN(pre_len[j], c->max_pos - 1);
			if (pre_n[i] * len <= 2048 && n < max && (j == 0 || len != ALLM_MIN(pre_len[j - 1], c->max_pos - 1)))
				ret[n++] = (struct fit_shape){0, 0, pre_n[i], len};
		}
	if (n + 2 <= max && 128 < c->max_pos) {
		ret[n++] = (struct fit_shape){32, 128, 1, 64};
		ret[n++] = (struct fit_shape){64, 128, 1, 256 < c->max_pos ? 256 : 64};
	}
	return n;
}

/* Disk tier transfers of 1 to 64 blocks: the median of f->repeat each. */
static void fit_disk(struct fit *f, struct allm_kv_cache *kv)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	for (int d = 0; dp && d < 2; d++)
		for (int32_t n = 1; n <= 64 && n + 1 <= ALLM_MIN(kv->gpu.capacity, dp->capacity); n *= 2) {
			double v[MAX_REPEAT];
			int k = 0;
			for (int r = 0; r < f->repeat; r++) {
				double t = allm_kv_time_disk(kv, d ? ALLM_DISK_READ : ALLM_DISK_WRITE, n, 1);
				if (t >= 0)
					v[k++] = t;
			}
			if (k && f->dn[d] < 256) {
				f->dx[d][f->dn[d]] = (double)n * kv->block_bytes;
				f->dt[d][f->dn[d]++] = allm_median(v, k);
			}
		}
}

/* Copies of 1 to 64 KV blocks between the pools, as a swap makes them. */
void fit_copies(struct fit *f, struct allm_kv_cache *kv)
{
	for (int d = 0; d < 2; d++)
		for (int32_t n = 1; n <= 64 && n + 1 <= ALLM_MIN(kv->gpu.capacity, kv->cpu.capacity); n *= 2)
			for (int r = 0; r < f->repeat; r++) {
				double t = allm_kv_time_copy(kv, d ? ALLM_COPY_H2D : ALLM_COPY_D2H, n, 1);
				if (t >= 0)
					add_link_to(f, d == 0 ? ALLM_COPY_D2H : ALLM_COPY_H2D, (double)n * kv->block_bytes, t);
			}
	fit_disk(f, kv);
}

void add_link_to(struct fit *f, int dir, double bytes, double t)
{
	struct fit *saved = rec;
	rec = f;
	add_link(dir, bytes, t);
	rec = saved;
}

/* Seconds of a 256-row GEMM of shape (k, m) with weights of dtype dt, alone. */
double gemm_dtype_seconds(allm_backend_t *be, int64_t k, int64_t m, enum allm_dtype dt, int reps)
{
	void *x = NULL, *y = NULL, *w = NULL;
	double v[MAX_REPEAT], t = NAN;
	if (be->iface->alloc(be, (size_t)(256 * k) * 4, &x) || be->iface->alloc(be, (size_t)(256 * m) * 4, &y) ||
	    be->iface->alloc(be, (size_t)(k * m) * allm_dtype_size(dt), &w))
		goto out;
	be->iface->gemm(be, y, x, w, NULL, dt, 256, k, m);
	for (int r = 0; r < reps; r++) {
		double t0 = allm_now();
		be->iface->gemm(be, y, x, w, NULL, dt, 256, k, m);
		v[r] = allm_now() - t0;
	}
	t = allm_median(v, reps);
out:
	if (x)
		be->iface->free(be, x);
	if (y)
		be->iface->free(be, y);
	if (w)
		be->iface->free(be, w);
	return t;
}
