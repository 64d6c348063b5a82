/* The AVX-512 levels' GEMM for many rows with float weights (f32, f16, bf16), as an
 * outer product: a zmm holds 16 *outputs* of one token, each FMA broadcasts one
 * activation against 16 weights, so nothing is reduced across lanes in the hot
 * loop and a tile of 14 tokens x 32 outputs does
 * 28 FMAs per 2 weight loads (the dot-product tiles of cpu-gemm-avx512.c do 24
 * per 4 weight loads from L2, and then reduce every element across its lanes).
 *
 * Same bits as those tiles (cpu-gemm.h, "avx512"): their lane j of an element is
 * the fma chain over p = j, j + 16, ... in increasing p from +0, then the lanes
 * meet in one fixed tree. Here the 16 residues j are 16 passes over k, each pass
 * the same chain for 16 outputs at once, and the passes run in bit-reversed order
 * (0, 8, 4, 12, 2, ...) so that each finished pass meets its partner in the tree
 * at once: l[j] + l[j+8], then s8[j] + s8[j+4], ... (a stack of at most 4
 * partial results, a binary counter). Only the order of whole passes differs from
 * the tiles, and every pass is independent of the others, so the result of each
 * element, and so the bits, do not change: this is an implementation of the same
 * order, picked by the row count and k, and batch invariance holds across the
 * switch.
 *
 * Layouts, both packed per call: activations per tile of up to 14 tokens as
 * [residue j][step i][token] (x[token][16 i + j]); W per panel of 32 outputs as
 * [j][i][output] (W[output][16 i + j], converted to f32). Rows past n, outputs
 * past m and k past its end are zeros (zero steps leave a chain unchanged). Up to
 * GEMM_MULTI_MAX matrices of the same activations (q, k, v) share one packing and
 * one job. */
#include "cpu-gemm.h"
#include "cpu-gemm-x86.h"
#include "cpu-threads.h"

#include <errno.h>
#include <stdatomic.h>

#ifdef GEMM_X86

#define OP_R 14 /* tokens per tile at most: 28 accumulators, 2 weight vectors, 1 broadcast */
#define OP_OUT 32 /* outputs per tile and per panel (two zmm) */
#define OP_PF 8 /* steps a tile prefetches its packed operands ahead */
#define OP_GROUP_BYTES (512 << 10) /* packed W of one work item, at most (L2: 2 MiB) */
#define OP_X_L2_BYTES (1 << 20) /* packed activations that stay in L2 across panels */
/* Loops over up to 16 vectors, fully unrolled: an array indexed in a loop that is
 * not gets kept in memory (the tile's accumulators: measured 89 % -> 99 % of the
 * FMA peak once they stay in registers). */
#define UNROLL16 _Pragma("GCC unroll 16")

/* One matrix of a call, and its work items. */
struct op_mat {
	float *y;
	const char *w;
	const float *bias;
	int64_t m;
	int64_t group; /* panels per work item */
	int64_t item0; /* its first item among the call's */
};

struct op_job {
	enum allm_dtype dt;
	const float *x;
	float *xp; /* per row tile, [16][k16][its rows] */
	size_t w_stride;
	int64_t n, k, k16, row_tiles;
	int64_t threads, items;
	int n_mats;
	struct op_mat mats[GEMM_MULTI_MAX]; /* matrices of the same activations */
	struct cpu_pool *pool;
	_Atomic int err;
};

/* A linear range of W to pull into L2, a line every (mask + 1) steps of a pass. */
struct op_ahead {
	const char *next, *end;
	int64_t mask;
};

/* 16 x 16 transpose in registers: v[a][b] -> v[b][a]. */
INL T5 void transpose16(__m512 v[16])
{
	__m512 t[16], u[16];
	UNROLL16
	for (int a = 0; a < 16; a += 2) { /* pairs of rows, per 128-bit lane */
		t[a] = _mm512_unpacklo_ps(v[a], v[a + 1]);
		t[a + 1] = _mm512_unpackhi_ps(v[a], v[a + 1]);
	}
	UNROLL16
	for (int g = 0; g < 4; g++) { /* u[4g + c]: lane l = column 4l + c of rows 4g..4g+3 */
		__m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
		__m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
		u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
		u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
		u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
		u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
	}
	UNROLL16
	for (int c = 0; c < 4; c++) { /* the 4 x 4 transpose of 128-bit lanes */
		__m512 w0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
		__m512 w1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xee);
		__m512 w2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
		__m512 w3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xee);
		v[c] = _mm512_shuffle_f32x4(w0, w2, 0x88);
		v[4 + c] = _mm512_shuffle_f32x4(w0, w2, 0xdd);
		v[8 + c] = _mm512_shuffle_f32x4(w1, w3, 0x88);
		v[12 + c] = _mm512_shuffle_f32x4(w1, w3, 0xdd);
	}
}

static __mmask16 k_mask(int64_t k, int64_t p)
{
	int64_t rem = k - p;
	return rem >= 16 ? 0xffff : rem <= 0 ? 0 : (__mmask16)((1u << rem) - 1);
}

/* Row tile rt: its first row and its rows. The rows are spread evenly over the
 * fewest tiles of at most OP_R (128 rows: 8 of 13 and 2 of 12), so no tile
 * computes rows that do not exist. */
static int op_rows(const struct op_job *j, int64_t rt, int64_t *r0)
{
	int64_t base = j->n / j->row_tiles, extra = j->n % j->row_tiles;
	*r0 = rt * base + ALLM_MIN(rt, extra);
	return (int)(base + (rt < extra));
}

/* Activations of row tiles [begin, end) into their packed layout (at r0 * 16 * k16:
 * the tiles before hold r0 rows). */
static T5 void op_pack_x(void *arg, int tid, int64_t begin, int64_t end)
{
	(void)tid;
	const struct op_job *j = arg;
	/* locals: the masked stores could alias *j, and its fields would be reloaded */
	const int64_t k16 = j->k16, k = j->k;
	const float *x = j->x;
	for (int64_t rt = begin; rt < end; rt++) {
		int64_t r0;
		const int rows = op_rows(j, rt, &r0);
		const __mmask16 rm = (__mmask16)((1u << rows) - 1);
		float *dst = j->xp + (size_t)r0 * 16 * k16;
		const float *xr = x + r0 * k;
		for (int64_t i = 0; i < k16; i++) {
			__m512 v[16];
			const __mmask16 km = k_mask(k, 16 * i);
			UNROLL16
			for (int a = 0; a < 16; a++)
				v[a] = a < rows ? _mm512_maskz_loadu_ps(km, xr + a * k + 16 * i) : _mm512_setzero_ps();
			transpose16(v);
			UNROLL16
			for (int b = 0; b < 16; b++)
				_mm512_mask_storeu_ps(dst + ((size_t)b * k16 + i) * rows, rm, v[b]);
		}
	}
}

/* W rows [o0, o0 + 32) as f32 into the panel layout (dt a constant when inlined). */
INL T5 void op_pack_w_dt(const enum allm_dtype dt, float *dst, const struct op_job *j,
			 const struct op_mat *mt, int64_t o0)
{
	for (int h = 0; h < 2; h++) {
		/* rows past m: zeros (their pointer stays on a real row, never read) */
		int64_t valid = ALLM_MAX((int64_t)0, ALLM_MIN((int64_t)16, mt->m - o0 - 16 * h));
		const char *rows[16];
		UNROLL16
		for (int a = 0; a < 16; a++)
			rows[a] = mt->w + (size_t)(o0 + 16 * h + ALLM_MIN((int64_t)a, valid - 1)) * j->w_stride;
		for (int64_t i = 0; i < j->k16; i++) {
			__mmask16 km = k_mask(j->k, 16 * i);
			__m512 v[16];
			UNROLL16
			for (int a = 0; a < 16; a++)
				v[a] = a < valid ? w16(dt, rows[a], 16 * i, km) : _mm512_setzero_ps();
			transpose16(v);
			UNROLL16
			for (int b = 0; b < 16; b++)
				_mm512_store_ps(dst + ((size_t)b * j->k16 + i) * OP_OUT + 16 * h, v[b]);
		}
	}
}

static T5 void op_pack_w(float *dst, const struct op_job *j, const struct op_mat *mt, int64_t o0)
{
	switch (j->dt) {
	case ALLM_DTYPE_F16: op_pack_w_dt(ALLM_DTYPE_F16, dst, j, mt, o0); break;
	case ALLM_DTYPE_BF16: op_pack_w_dt(ALLM_DTYPE_BF16, dst, j, mt, o0); break;
	default: op_pack_w_dt(ALLM_DTYPE_F32, dst, j, mt, o0); break;
	}
}

/* One tile: R tokens x cols outputs (of 32), y at (token 0, output 0). */
INL T5 void op_tile_r(const int R, const float *xp, const float *wp, int64_t k16, float *y,
		      int64_t ldy, int cols, const float *bias, struct op_ahead *ahead)
{
	__m512 acc[OP_R][2];
	/* the tree's pending partial results, deepest first */
	float stack[4][OP_R][OP_OUT] __attribute__((aligned(64)));
	int sp = 0;
	for (int q = 0; q < 16; q++) {
		/* bit-reversed: 0, 8, 4, 12, 2, 10, 6, 14, 1, 9, ... */
		int jr = ((q & 1) << 3) | ((q & 2) << 1) | ((q & 4) >> 1) | ((q & 8) >> 3);
		const float *xj = xp + (size_t)jr * k16 * R, *wj = wp + (size_t)jr * k16 * OP_OUT;
		UNROLL16
		for (int r = 0; r < R; r++)
			acc[r][0] = acc[r][1] = _mm512_setzero_ps();
		for (int64_t i = 0; i < k16; i++) {
			if (!(i & ahead->mask) && ahead->next < ahead->end) {
				_mm_prefetch(ahead->next, _MM_HINT_T1);
				ahead->next += 64;
			}
			/* both streams into L1 a few steps ahead (measured: without it,
			 * 5-20 % slower at 128 rows) */
			_mm_prefetch((const char *)(wj + (i + OP_PF) * OP_OUT), _MM_HINT_T0);
			_mm_prefetch((const char *)(wj + (i + OP_PF) * OP_OUT + 16), _MM_HINT_T0);
			_mm_prefetch((const char *)(xj + (i + OP_PF) * R), _MM_HINT_T0);
			__m512 w0 = _mm512_load_ps(wj + i * OP_OUT), w1 = _mm512_load_ps(wj + i * OP_OUT + 16);
			UNROLL16
			for (int r = 0; r < R; r++) {
				__m512 xb = _mm512_set1_ps(xj[i * R + r]);
				acc[r][0] = _mm512_fmadd_ps(xb, w0, acc[r][0]);
				acc[r][1] = _mm512_fmadd_ps(xb, w1, acc[r][1]);
			}
		}
		/* pass q completes (trailing ones of q) levels of the tree: the earlier
		 * partner, of the lower residue, is the left operand */
		for (int t = q; t & 1; t >>= 1) {
			sp--;
			UNROLL16
			for (int r = 0; r < R; r++) {
				acc[r][0] = _mm512_add_ps(_mm512_load_ps(&stack[sp][r][0]), acc[r][0]);
				acc[r][1] = _mm512_add_ps(_mm512_load_ps(&stack[sp][r][16]), acc[r][1]);
			}
		}
		if (q == 15)
			break;
		UNROLL16
		for (int r = 0; r < R; r++) {
			_mm512_store_ps(&stack[sp][r][0], acc[r][0]);
			_mm512_store_ps(&stack[sp][r][16], acc[r][1]);
		}
		sp++;
	}
	__mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
	__mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
	__m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
	__m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
	UNROLL16
	for (int r = 0; r < R; r++) {
		__m512 s0 = bias ? _mm512_add_ps(acc[r][0], b0) : acc[r][0];
		__m512 s1 = bias ? _mm512_add_ps(acc[r][1], b1) : acc[r][1];
		_mm512_mask_storeu_ps(y + r * ldy, m0, s0);
		_mm512_mask_storeu_ps(y + r * ldy + 16, m1, s1);
	}
}

#define OP_TILE_CASE(R) \
	case R: op_tile_r(R, xp, wp, k16, y, ldy, cols, bias, ahead); return;
static T5 void op_tile(const float *xp, const float *wp, int64_t k16, float *y, int64_t ldy,
		       int rows, int cols, const float *bias, struct op_ahead *ahead)
{
	switch (rows) {
		OP_TILE_CASE(1) OP_TILE_CASE(2) OP_TILE_CASE(3) OP_TILE_CASE(4) OP_TILE_CASE(5)
		OP_TILE_CASE(6) OP_TILE_CASE(7) OP_TILE_CASE(8) OP_TILE_CASE(9) OP_TILE_CASE(10)
		OP_TILE_CASE(11) OP_TILE_CASE(12) OP_TILE_CASE(13) OP_TILE_CASE(14)
	}
}

/* The matrix of item `it`, and the item's group of panels in it. */
static const struct op_mat *op_item(const struct op_job *j, int64_t it, int64_t *g)
{
	int i = j->n_mats - 1;
	while (i > 0 && it < j->mats[i].item0)
		i--;
	*g = it - j->mats[i].item0;
	return &j->mats[i];
}

/* Items [begin, end), each a group of one matrix's panels: a group is packed once
 * (it fits L2 beside a row tile), then each row tile meets all of its panels while
 * the tile's activations sit in L1/L2, so activations stream from memory once per
 * group, not per panel (2048 rows of 768 are 6 MiB: more than L2). */
static T5 void op_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct op_job *j = arg;
	const size_t panel = (size_t)j->k16 * 16 * OP_OUT; /* floats */
	int64_t max_group = 1;
	for (int i = 0; i < j->n_mats; i++)
		max_group = ALLM_MAX(max_group, j->mats[i].group);
	float *wp = cpu_pool_scratch_or_fail(j->pool, tid, panel * 4 * (size_t)max_group, &j->err);
	if (!wp)
		return;
	for (int64_t it = begin; it < end; it++) {
		int64_t g;
		const struct op_mat *mt = op_item(j, it, &g);
		const int64_t gcols = mt->group * OP_OUT, c0 = g * gcols;
		int np = (int)((ALLM_MIN(gcols, mt->m - c0) + OP_OUT - 1) / OP_OUT);
		for (int p = 0; p < np; p++)
			op_pack_w(wp + p * panel, j, mt, c0 + p * OP_OUT);
		/* the next item's rows (contiguous in W) come from DRAM while this one
		 * computes, a line every few steps of the tiles; after a chunk's last
		 * item too: a thread's next chunk is the one after it in its home range
		 * (cpu-threads.c), unless that range is done */
		struct op_ahead ahead = { .next = NULL, .end = NULL, .mask = 0 };
		int64_t next = it + 1;
		if (next < j->items) {
			int64_t g2;
			const struct op_mat *m2 = op_item(j, next, &g2);
			const int64_t gc2 = m2->group * OP_OUT;
			ahead.next = m2->w + (size_t)(g2 * gc2) * j->w_stride;
			ahead.end = m2->w + (size_t)ALLM_MIN((g2 + 1) * gc2, m2->m) * j->w_stride;
			int64_t steps = j->row_tiles * np * 16 * j->k16, lines = (ahead.end - ahead.next) / 64 + 1;
			while (ahead.mask * 2 + 1 < steps / lines)
				ahead.mask = ahead.mask * 2 + 1;
		}
		for (int64_t rt = 0; rt < j->row_tiles; rt++) {
			int64_t r0;
			int rows = op_rows(j, rt, &r0);
			for (int p = 0; p < np; p++) {
				int64_t o0 = c0 + p * OP_OUT;
				op_tile(j->xp + (size_t)r0 * 16 * j->k16, wp + p * panel, j->k16,
					mt->y + r0 * mt->m + o0, mt->m, rows,
					(int)ALLM_MIN((int64_t)OP_OUT, mt->m - o0), mt->bias ? mt->bias + o0 : NULL,
					&ahead);
			}
		}
	}
}

/* (cpu-gemm.h) */
size_t gemm_op_x_bytes(int64_t n, int64_t k)
{
	return (size_t)n * 16 * (size_t)((k + 15) / 16) * 4;
}

/* Panels per item of an m-output matrix: one while the packed activations fit L2
 * beside a panel (then the next panel is prefetched while this one computes); else
 * at most what fits OP_GROUP_BYTES, and the size whose items share out most evenly
 * over the threads (64 panels on 2 threads: 16 x 4, not 13 x 5), the larger on a
 * tie. */
static int64_t op_group(const struct op_job *j, int64_t m)
{
	int64_t panels = (m + OP_OUT - 1) / OP_OUT, best = -1, group = 1;
	int64_t fit = (int64_t)(OP_GROUP_BYTES / ((size_t)j->k16 * 16 * OP_OUT * 4));
	if (gemm_op_x_bytes(j->n, j->k) <= OP_X_L2_BYTES)
		fit = 1;
	for (int64_t g = ALLM_MAX((int64_t)1, ALLM_MIN(fit, panels)); g >= 1; g--) {
		int64_t items = (panels + g - 1) / g, load = (items + j->threads - 1) / j->threads * g;
		if (best < 0 || load < best)
			best = load, group = g;
	}
	return group;
}

/* n_mats matrices of the same activations: packed once, all the matrices' items in
 * one job. */
static int op_gemm(enum allm_dtype dt, struct cpu_pool *pool, bool inline_run, void *xbuf,
		   int n_mats, float *const *ys, const float *x, const void *const *ws,
		   const float *const *biases, int64_t n, int64_t k, const int64_t *ms)
{
	if (n_mats < 1 || n_mats > GEMM_MULTI_MAX)
		return -EINVAL;
	struct op_job j = {
		.dt = dt, .x = x, .xp = xbuf, .w_stride = gemm_w_stride(dt, k), .n = n, .k = k,
		.k16 = (k + 15) / 16, .row_tiles = (n + OP_R - 1) / OP_R,
		.threads = cpu_pool_size(pool), .n_mats = n_mats, .pool = pool,
	};
	for (int i = 0; i < n_mats; i++) {
		struct op_mat *mt = &j.mats[i];
		*mt = (struct op_mat){ .y = ys[i], .w = ws[i], .bias = biases[i], .m = ms[i],
				       .group = op_group(&j, ms[i]), .item0 = j.items };
		j.items += ((ms[i] + OP_OUT - 1) / OP_OUT + mt->group - 1) / mt->group;
	}
	gemm_run_items(pool, inline_run || j.row_tiles < 2, j.row_tiles, op_pack_x, &j);
	gemm_run_items(pool, inline_run, j.items, op_worker, &j);
	return atomic_load(&j.err);
}

#define OP_DT(name, multi, dt) \
	int name(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x, \
		 const void *w, const float *bias, int64_t n, int64_t k, int64_t m) \
	{ \
		return op_gemm(dt, pool, inline_run, xbuf, 1, &y, x, &w, &bias, n, k, &m); \
	} \
	GEMM_OP_MULTI(multi) \
	{ \
		return op_gemm(dt, pool, inline_run, xbuf, n_mats, ys, x, ws, biases, n, k, ms); \
	}
OP_DT(gemm_op_f32, gemm_op_multi_f32, ALLM_DTYPE_F32)
OP_DT(gemm_op_f16, gemm_op_multi_f16, ALLM_DTYPE_F16)
OP_DT(gemm_op_bf16, gemm_op_multi_bf16, ALLM_DTYPE_BF16)

#endif /* GEMM_X86 */
