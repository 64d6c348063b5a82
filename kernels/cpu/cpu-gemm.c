/* The GEMM driver of the CPU fast path: prepares the activations once (bf16 rows,
 * when the level's kernel wants them), converts the bias to f32, and cuts y
 * into column tiles that the threads claim. A tile of W columns is read from memory
 * once per call: few rows (decode) stream it in place, all of k at once; many rows
 * (prefill) take it in k chunks of GEMM_KC, converted to f32 once per chunk when
 * the kernel wants f32, while the activations of those k stay in L2 and each row
 * tile's partial sums wait in a small buffer. None of this changes an element's
 * arithmetic (cpu-gemm.h), so every row is batch-invariant. */
#include "cpu-gemm.h"
#include "cpu-threads.h"

#include <errno.h>
#include <stdatomic.h>

/* Below this many multiply-adds the wake-up of the workers costs more than it saves. */
#define GEMM_INLINE_MACS (1 << 17)
/* Bytes of W (as f32) one item of the blocked path holds in L2. */
#define GEMM_W_BLOCK_BYTES (384 << 10)
/* Chunks per thread of a decode GEMV (1-2 rows): it is one stream of W per thread
 * (cpu-threads.c's home ranges), so finer chunks cost little locality, and at the
 * end of the job a thread that ran out waits for less of the other's last chunk.
 * Against the pool's 4, alternating (AMD EPYC, --dummy medium, 2 threads): int8
 * (the since retired --quant int8 rows) decode +0 to +5 % in bench-decode-gemv's paired ratio, 171-208 vs 171-194 tok/s
 * end to end; f16 equal. 8-row batches measured no better, so they keep 4. */
#define GEMM_DECODE_CHUNKS 16
/* Preparing this many activations is worth the workers too. */
#define GEMM_PREP_PARALLEL (1 << 16)

const struct gemm_level *cpu_gemm_level(enum allm_cpu_isa isa)
{
	switch (isa) {
#ifdef GEMM_X86
	case ALLM_CPU_ISA_AVX2: return &gemm_level_avx2;
	case ALLM_CPU_ISA_AVX2_VNNI: return &gemm_level_avx2_vnni;
	case ALLM_CPU_ISA_AVX512: return &gemm_level_avx512;
	case ALLM_CPU_ISA_AVX512_VNNI: return &gemm_level_avx512_vnni;
	case ALLM_CPU_ISA_AVX512_BF16: return &gemm_level_avx512_bf16;
	case ALLM_CPU_ISA_AMX_BF16: return &gemm_level_amx_bf16;
	case ALLM_CPU_ISA_AMX_INT8: return &gemm_level_amx_int8;
#endif
	default: return &gemm_level_portable;
	}
}

/* One GEMM call, shared by all threads. */
struct gemm_job {
	const struct gemm_kern *kern;
	float *y; /* (n, m) */
	const void *x; /* row 0 of the (prepared) activations */
	size_t x_stride;
	const void *w; /* (m, k) in dt */
	size_t w_stride;
	const float *bias; /* (m) f32, or NULL */
	int64_t n, k, m;
	int R, C; /* tile limits */
	bool blocked; /* many rows: column blocks, k chunks, f32 conversion */
	int64_t cb; /* columns per item: C (direct) or a block of W that fits L2 */
	int64_t kc; /* k chunk (k when it fits) */
	struct cpu_pool *pool;
};

/* The matrices of one call (one, or up to GEMM_MULTI_MAX of the same activations)
 * as one pool job: items [first[j], first[j + 1]) are matrix j's column blocks, so
 * q, k and v (gate and up) cost one wake-up and one join instead of three (two),
 * and a thread's run of items streams on from one matrix into the next. */
struct gemm_set {
	struct gemm_job mat[GEMM_MULTI_MAX];
	int n_mats;
	int64_t first[GEMM_MULTI_MAX + 1];
	_Atomic int err; /* first failure of any thread */
};

/* Bytes of W per element of a row, as far as prefetching cares. */
static size_t w_elem_bytes(const struct gemm_job *g)
{
	return g->w_stride >= (size_t)g->k * 4 ? 4 : 2; /* f32, or f16 / bf16 */
}

/* The W rows a column block will read next, pulled into L2 a slice at a time while
 * the current block computes, so the conversion of the next block does not wait
 * on DRAM (its reads would otherwise stall the whole core). */
struct w_ahead {
	const char *w; /* row 0 of the region */
	size_t stride, off, len; /* between rows; bytes of each row to fetch */
	int64_t rows;
	int64_t total; /* lines in all */
	int64_t r; /* next line: row r, byte l of its part */
	size_t l;
};

static void w_ahead_init(struct w_ahead *a, const struct gemm_job *g, int64_t c0, int64_t ncols,
			 int64_t p0, int64_t kc)
{
	size_t eb = w_elem_bytes(g);
	a->w = (const char *)g->w + (size_t)c0 * g->w_stride;
	a->stride = g->w_stride, a->off = (size_t)p0 * eb, a->len = (size_t)kc * eb;
	a->rows = ncols;
	a->total = ncols * (int64_t)((a->len + 63) / 64);
	a->r = 0, a->l = 0;
}

static void w_ahead_step(struct w_ahead *a, int64_t lines)
{
	for (; lines > 0 && a->r < a->rows; lines--) {
		__builtin_prefetch(a->w + (size_t)a->r * a->stride + a->off + a->l, 0, 2);
		if ((a->l += 64) >= a->len)
			a->l = 0, a->r++;
	}
}

/* Columns [c0, c0 + ncols) of y, all rows, all of k: for each k chunk, the block of
 * W (converted once when the kernel wants f32) stays in L2 while each row tile of x
 * stays in L1 across the block's column tiles. next_c0: the block this thread does
 * next (-1: none), whose first chunk is prefetched during the last one of this. */
static void gemm_columns(const struct gemm_job *g, int64_t c0, int64_t ncols, int64_t next_c0,
			 char *part, float *conv)
{
	const struct gemm_kern *kn = g->kern;
	struct gemm_tile t = { .x_stride = g->x_stride, .k = g->k, .ldy = g->m };
	const char *w0 = (const char *)g->w + (size_t)c0 * g->w_stride;
	int64_t col_tiles = (ncols + g->C - 1) / g->C;
	size_t tile_part = (size_t)g->R * g->C * GEMM_PART_BYTES;

	for (int64_t p0 = 0; p0 < g->k; p0 += g->kc) {
		int64_t kc = ALLM_MIN(g->kc, g->k - p0);
		void (*fn)(const struct gemm_tile *) = kn->tile;
		const char *wb = w0;
		size_t ws = g->w_stride;
		t.w_p0 = 0;
		if (g->blocked && kn->w_to_f32) {
			kn->w_to_f32(conv, w0, g->w_stride, g->k, p0, kc, (int)ncols);
			fn = kn->tile_f32;
			wb = (const char *)conv, ws = (size_t)gemm_conv_ld(kc) * sizeof(float), t.w_p0 = p0;
		}
		t.w_stride = ws;
		/* few rows: W streams from DRAM in rows of a few KiB, too short for the
		 * hardware prefetcher to catch on; ask for the next tile's rows */
		t.prefetch = g->blocked ? 0 : (size_t)g->C * g->w_stride;
		t.p0 = p0, t.kc = kc;
		t.first = p0 == 0, t.last = p0 + kc == g->k;
		struct w_ahead ahead = {0};
		if (g->blocked && !t.last)
			w_ahead_init(&ahead, g, c0, ncols, p0 + kc, ALLM_MIN(g->kc, g->k - p0 - kc));
		else if (g->blocked && next_c0 >= 0)
			w_ahead_init(&ahead, g, next_c0, ALLM_MIN(g->cb, g->m - next_c0), 0,
				     ALLM_MIN(g->kc, g->k));
		int64_t row_tiles = (g->n + g->R - 1) / g->R;
		for (int64_t r0 = 0, rt = 0; r0 < g->n; r0 += g->R, rt++) {
			w_ahead_step(&ahead, (ahead.total + row_tiles - 1) / row_tiles);
			t.rows = (int)ALLM_MIN((int64_t)g->R, g->n - r0);
			t.x = (const char *)g->x + (size_t)r0 * g->x_stride;
			for (int64_t ct = 0; ct < col_tiles; ct++) {
				int64_t cc = ct * g->C;
				t.cols = (int)ALLM_MIN((int64_t)g->C, ncols - cc);
				t.w = wb + (size_t)cc * ws;
				t.y = g->y + r0 * g->m + c0 + cc;
				t.bias = g->bias ? g->bias + c0 + cc : NULL;
				t.part = part + (size_t)(rt * col_tiles + ct) * tile_part;
				fn(&t);
			}
		}
	}
}

static void gemm_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct gemm_set *set = arg;
	const struct gemm_job *g = &set->mat[0]; /* the tiling is the same for all */
	int64_t row_tiles = (g->n + g->R - 1) / g->R, col_tiles = (g->cb + g->C - 1) / g->C;
	size_t part_bytes = g->kc < g->k ? (size_t)(row_tiles * col_tiles) * g->R * g->C *
						   GEMM_PART_BYTES
					 : 0;
	size_t conv_bytes = g->blocked && g->kern->w_to_f32
				    ? (size_t)g->cb * gemm_conv_ld(g->kc) * sizeof(float) : 0;
	char *scratch = cpu_pool_scratch_or_fail(g->pool, tid, part_bytes + conv_bytes + 64, &set->err);
	if (!scratch)
		return;
	int j = 0;
	while (set->first[j + 1] <= begin)
		j++;
	if (!g->blocked) {
		/* the first tile's rows: the tiles ask only for the rows of the tile
		 * after them. A chunk that goes on from the thread's previous one has
		 * them on the way already; asking again measured no slower (skipping
		 * it 1-2 % slower, within noise), so every chunk asks */
		g = &set->mat[j];
		int64_t c0 = (begin - set->first[j]) * g->cb;
		const char *w0 = (const char *)g->w + (size_t)c0 * g->w_stride;
		size_t len = (size_t)ALLM_MIN((int64_t)g->C, g->m - c0) * g->w_stride;
		for (size_t o = 0; o < len; o += 64)
			__builtin_prefetch(w0 + o, 0, 2);
	}
	for (int64_t it = begin; it < end; it++) {
		while (set->first[j + 1] <= it)
			j++;
		g = &set->mat[j];
		int64_t c0 = (it - set->first[j]) * g->cb;
		bool next = it + 1 < end && it + 1 < set->first[j + 1];
		gemm_columns(g, c0, ALLM_MIN(g->cb, g->m - c0), next ? c0 + g->cb : -1, scratch,
			     (float *)(scratch + part_bytes));
	}
}

struct inline_run {
	void (*fn)(void *arg, int tid, int64_t begin, int64_t end);
	void *arg;
	int64_t n_items;
};

static void inline_trampoline(void *arg, int tid, int64_t begin, int64_t end)
{
	struct inline_run *r = arg;
	r->fn(r->arg, tid, 0, r->n_items);
}

/* (cpu-gemm.h) */
void gemm_run_items(struct cpu_pool *pool, bool inline_run, int64_t n_items,
		    void (*fn)(void *arg, int tid, int64_t begin, int64_t end), void *arg)
{
	if (!inline_run) {
		cpu_pool_run_tid(pool, n_items, fn, arg);
		return;
	}
	struct inline_run r = { fn, arg, n_items };
	cpu_pool_run_tid(pool, 1, inline_trampoline, &r);
}

/* (cpu-gemm.h) */
void gemm_tile_to_y(float *y, int64_t n, int64_t m, const float *bias, const float *tile, int64_t o,
		    int64_t tok0)
{
	int64_t nt = ALLM_MIN(16, n - tok0), no = ALLM_MIN(16, m - o);
	for (int64_t c = 0; c < nt; c++) {
		float *yr = y + (tok0 + c) * m + o;
		for (int64_t r = 0; r < no; r++)
			yr[r] = bias ? tile[r * 16 + c] + bias[o + r] : tile[r * 16 + c];
	}
}

/* Activation preparation, rows in parallel. */
struct prep_job {
	const struct gemm_kern *kern;
	char *dst;
	size_t stride;
	const float *x;
	int64_t k;
};

static void prep_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct prep_job *p = arg;
	for (int64_t i = begin; i < end; i++)
		p->kern->x_prep(p->dst + (size_t)i * p->stride, p->x + i * p->k, p->k);
}

/* A buffer of ctx that grows to `bytes` (64-byte aligned), kept for later calls. */
static void *ctx_buf(void **raw, void **aligned, size_t *cap, size_t bytes)
{
	if (*aligned && bytes <= *cap)
		return *aligned;
	void *r = allm_malloc(bytes + 64);
	if (!r)
		return NULL;
	allm_free(*raw);
	*raw = r;
	*aligned = (void *)(((uintptr_t)r + 63) & ~(uintptr_t)63);
	*cap = bytes;
	return *aligned;
}

/* The biases of n GEMMs (m[i] outputs each) as f32: in place for f32 and block
 * weights (their bias is f32), else converted into one buffer of ctx, a slice
 * each. */
static int biases_f32(struct cpu_ctx *c, int n, const void *const *bias, enum allm_dtype dt,
		      const int64_t *m, const float **ret)
{
	int64_t total = 0;
	for (int i = 0; i < n; i++) {
		ret[i] = bias[i];
		if (bias[i] && dt != ALLM_DTYPE_F32 && !allm_dtype_is_qblock(dt))
			total += m[i];
	}
	if (!total)
		return 0;
	float *b = ctx_buf(&c->bbuf_raw, &c->bbuf, &c->bbuf_cap, (size_t)total * sizeof(float));
	if (!b)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		if (bias[i]) {
			allm_to_f32(b, bias[i], dt, (size_t)m[i]);
			ret[i] = b;
			b += m[i];
		}
	return 0;
}

static const struct gemm_kern *kern_for(const struct gemm_level *lv, enum allm_dtype dt)
{
	switch (dt) {
	case ALLM_DTYPE_F32: return lv->f32;
	case ALLM_DTYPE_F16: return lv->f16;
	case ALLM_DTYPE_BF16: return lv->bf16;
	default: return allm_dtype_is_qblock(dt) ? &lv->qb[dt - ALLM_DTYPE_Q8_0] : NULL;
	}
}

/* Whether the level's whole-call driver takes n rows of k (else the tile path). */
static bool takes_whole(const struct gemm_kern *kn, int64_t n, int64_t k)
{
	return kn->whole && n >= kn->whole_min_rows && k >= kn->whole_min_k;
}

/* n_mats GEMMs of the same x (cpu_fast_gemm_fuses() said yes when n_mats > 1). */
static int gemm_locked(struct cpu_ctx *c, int n_mats, float *const *ys, const float *x,
		       const void *const *ws, const void *const *biases, enum allm_dtype dt,
		       int64_t n, int64_t k, const int64_t *ms)
{
	const struct gemm_kern *kn = kern_for(c->level, dt);
	if (!kn)
		return -EINVAL;
	double macs = 0;
	for (int i = 0; i < n_mats; i++)
		macs += (double)n * (double)k * (double)ms[i];
	bool inline_run = macs < GEMM_INLINE_MACS;
	const float *b[GEMM_MULTI_MAX];
	if (biases_f32(c, n_mats, biases, dt, ms, b))
		return -ENOMEM;
	if (takes_whole(kn, n, k)) {
		void *xbuf = ctx_buf(&c->xbuf_raw, &c->xbuf, &c->xbuf_cap, kn->whole_x_bytes(n, k));
		if (!xbuf)
			return -ENOMEM;
		if (n_mats == 1)
			return kn->whole(c->pool, inline_run, xbuf, ys[0], x, ws[0], b[0], n, k, ms[0]);
		if (!kn->whole_multi) /* cpu_fast_gemm_fuses() said no */
			return -EINVAL;
		return kn->whole_multi(c->pool, inline_run, xbuf, n_mats, ys, x, ws, b, n, k, ms);
	}
	if (!kn->tile)
		return -EINVAL;
	struct gemm_set set = { .n_mats = n_mats };
	struct gemm_job g = {
		.kern = kn, .x = x, .x_stride = (size_t)k * sizeof(float),
		.w_stride = gemm_w_stride(dt, k), .n = n, .k = k,
		.R = kn->max_rows, .C = kn->max_cols,
		.blocked = n > GEMM_DIRECT_ROWS,
		.cb = kn->max_cols, .kc = k, .pool = c->pool,
	};
	if (n <= 2 && kn->decode_cols) /* decode: more rows of W streaming at once */
		g.C = kn->decode_cols, g.cb = kn->decode_cols;
	if (g.blocked) {
		/* a block of W columns as f32 that fits L2 beside x; at most 16 tiles */
		g.kc = ALLM_MIN(k, (int64_t)GEMM_KC);
		int64_t cb = GEMM_W_BLOCK_BYTES / (g.kc * (int64_t)sizeof(float)) / g.C * g.C;
		g.cb = ALLM_MAX((int64_t)g.C, ALLM_MIN(cb, 16 * (int64_t)g.C));
	}
	if (kn->x_prep) {
		struct prep_job p = { kn, NULL, kn->x_row_bytes(k), x, k };
		p.dst = ctx_buf(&c->xbuf_raw, &c->xbuf, &c->xbuf_cap, (size_t)n * p.stride);
		if (!p.dst)
			return -ENOMEM;
		gemm_run_items(c->pool, n * k < GEMM_PREP_PARALLEL, n, prep_worker, &p);
		g.x = p.dst;
		g.x_stride = p.stride;
	}
	for (int i = 0; i < n_mats; i++) {
		set.mat[i] = g;
		set.mat[i].y = ys[i], set.mat[i].w = ws[i], set.mat[i].bias = b[i];
		set.mat[i].m = ms[i];
		set.first[i + 1] = set.first[i] + (ms[i] + g.cb - 1) / g.cb;
	}
	if (!inline_run && n <= 2)
		cpu_pool_run_chunks(c->pool, set.first[n_mats], GEMM_DECODE_CHUNKS, gemm_worker, &set);
	else
		gemm_run_items(c->pool, inline_run, set.first[n_mats], gemm_worker, &set);
	return atomic_load(&set.err);
}

int cpu_fast_gemm(struct cpu_ctx *c, float *y, const float *x, const void *w,
		  const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m)
{
	if (n <= 0 || m <= 0)
		return 0;
	if (k <= 0) { /* an empty sum: the reference gives 0 (+ bias) */
		cpu_ref_gemm(y, x, w, bias, dt, n, k, m);
		return 0;
	}
	pthread_mutex_lock(&c->gemm_mu); /* the shared preparation buffers */
	int r = gemm_locked(c, 1, &y, x, &w, &bias, dt, n, k, &m);
	pthread_mutex_unlock(&c->gemm_mu);
	return r;
}

/* (cpu-backend.h) */
bool cpu_fast_gemm_fuses(struct cpu_ctx *c, int n_mats, enum allm_dtype dt, int64_t n, int64_t k,
			 const int64_t *ms)
{
	const struct gemm_kern *kn = kern_for(c->level, dt);
	if (!kn || k <= 0 || n <= 0 || n_mats < 1 || n_mats > GEMM_MULTI_MAX)
		return false;
	if (takes_whole(kn, n, k) ? !kn->whole_multi : !kn->tile)
		return false;
	for (int i = 0; i < n_mats; i++)
		if (ms[i] <= 0)
			return false;
	return true;
}

/* Matrices of the same activations (q, k and v; gate and up) where
 * cpu_fast_gemm_fuses(): the activations prepared once, all the matrices as one
 * job, each with cpu_fast_gemm's bits. */
int cpu_fast_gemm_multi(struct cpu_ctx *c, int n_mats, float *const *ys, const float *x,
			const void *const *ws, const void *const *biases, enum allm_dtype dt,
			int64_t n, int64_t k, const int64_t *ms)
{
	pthread_mutex_lock(&c->gemm_mu);
	int r = gemm_locked(c, n_mats, ys, x, ws, biases, dt, n, k, ms);
	pthread_mutex_unlock(&c->gemm_mu);
	return r;
}

const char *cpu_fast_gemm_name(struct cpu_ctx *c)
{
	return allm_cpu_isa_name(c->level->isa);
}
