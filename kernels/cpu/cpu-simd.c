/* Attention, SiLU and RMSNorm with AVX2 + FMA, for every x86 SIMD level (the portable level
 * keeps the reference's loops).
 *
 * Paged attention of one (token, head): the order is fixed
 * per (token, head) and independent of the batch, as DESIGN §6 asks:
 *   score[p] = scale * (8-lane fma chain over d, lane tree j + j+4, j + j+2, j + j+1)
 *   w[p]     = exp(score[p] - max) (a vector exp: |rel err| < 2e-7), sum in p order
 *   out[d]   = fma chain over p of (w[p] * (1 / sum)) * v[p][d], per d
 * Positions are scored four at a time (independent chains hide the FMA latency);
 * each position's arithmetic is the same whichever group it falls in. On AVX-512
 * levels the tiles' outputs run 16 dims to a register (cpu-backend.h: `wide`):
 * each d is its own chain, so the width does not change its bits. */
#include "cpu-backend.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T2 __attribute__((target("avx2,fma,f16c")))
#define T5 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define INL static inline __attribute__((always_inline))

static inline size_t kv_off(const struct allm_kv_layout *l, int64_t block, int32_t layer,
			    int kind, int32_t off, int32_t head)
{
	return ((((size_t)block * l->n_layers + layer) * 2 + kind) * l->block_size + off) *
		       l->n_kv_heads * l->head_dim +
	       (size_t)head * l->head_dim;
}

/* 8 K or V values from element `at` of the pool, as f32. */
INL T2 __m256 kv8(const enum allm_dtype dt, const void *pool, size_t at)
{
	if (dt == ALLM_DTYPE_F32)
		return _mm256_loadu_ps((const float *)pool + at);
	__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)pool + at));
	if (dt == ALLM_DTYPE_F16)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INL T2 float reduce8(__m256 v)
{
	__m128 h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	__m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
	return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

/* exp(x) for x <= 0 (scores minus their max): x = n ln2 + r, |r| <= ln2 / 2, a
 * degree-6 polynomial for e^r, times 2^n; below -87 the result is 0. */
INL T2 __m256 exp8(__m256 x)
{
	const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
	x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
	r = _mm256_fnmadd_ps(n, ln2_lo, r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* exp(score - max) in place over [0, n), 8 at a time (the softmax weights). */
INL T2 void exp_row(float *sc, int32_t n, float mx)
{
	const __m256 mxv = _mm256_set1_ps(mx);
	int32_t p = 0;
	for (; p + 8 <= n; p += 8)
		_mm256_storeu_ps(sc + p, exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + p), mxv)));
	if (p < n) {
		float t[8] = {0};
		memcpy(t, sc + p, (size_t)(n - p) * sizeof(float));
		_mm256_storeu_ps(t, exp8(_mm256_sub_ps(_mm256_loadu_ps(t), mxv)));
		memcpy(sc + p, t, (size_t)(n - p) * sizeof(float));
	}
}

/* Scores of positions p..p+3 (score4) or p (score1) for one query into scores[0..]:
 * an 8-lane fma chain over the head's dims, the lane tree, times scale; the running
 * max. */
INL T2 void score4(const enum allm_dtype dt, float *scores, float *mx, const float *q_row,
		   const void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		   int32_t kv_head, const int32_t *block_table, int32_t p, float scale)
{
	const int32_t hd = lay->head_dim, bs = lay->block_size;
	size_t at[4];
	__m256 acc[4];
	for (int i = 0; i < 4; i++) {
		at[i] = kv_off(lay, block_table[(p + i) / bs], layer, 0, (p + i) % bs, kv_head);
		acc[i] = _mm256_setzero_ps();
	}
	for (int32_t d = 0; d < hd; d += 8) {
		__m256 qv = _mm256_loadu_ps(q_row + d);
		for (int i = 0; i < 4; i++)
			acc[i] = _mm256_fmadd_ps(qv, kv8(dt, kv_pool, at[i] + d), acc[i]);
	}
	for (int i = 0; i < 4; i++) {
		scores[i] = reduce8(acc[i]) * scale;
		*mx = scores[i] > *mx ? scores[i] : *mx;
	}
}

INL T2 void score1(const enum allm_dtype dt, float *scores, float *mx, const float *q_row,
		   const void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		   int32_t kv_head, const int32_t *block_table, int32_t p, float scale)
{
	const int32_t hd = lay->head_dim, bs = lay->block_size;
	size_t at = kv_off(lay, block_table[p / bs], layer, 0, p % bs, kv_head);
	__m256 acc = _mm256_setzero_ps();
	for (int32_t d = 0; d < hd; d += 8)
		acc = _mm256_fmadd_ps(_mm256_loadu_ps(q_row + d), kv8(dt, kv_pool, at + d), acc);
	scores[0] = reduce8(acc) * scale;
	*mx = scores[0] > *mx ? scores[0] : *mx;
}

INL T2 void attend(const enum allm_dtype dt, float *out_row, const float *q_row,
		   const void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		   int32_t kv_head, const int32_t *block_table, int32_t p0, int32_t ctx_len, float scale,
		   float *scores)
{
	const int32_t hd = lay->head_dim, bs = lay->block_size, n = ctx_len - p0;
	float mx = -INFINITY;
	int32_t p = p0;
	for (; p + 4 <= ctx_len; p += 4)
		score4(dt, scores + (p - p0), &mx, q_row, kv_pool, lay, layer, kv_head, block_table, p, scale);
	for (; p < ctx_len; p++)
		score1(dt, scores + (p - p0), &mx, q_row, kv_pool, lay, layer, kv_head, block_table, p, scale);
	/* softmax weights; the sum runs in p order */
	exp_row(scores, n, mx);
	float sum = 0.0f;
	for (int32_t i = 0; i < n; i++)
		sum += scores[i];
	const float inv = 1.0f / sum;
	/* out, 64 dims at a time in registers */
	for (int32_t d0 = 0; d0 < hd; d0 += 64) {
		int nv = (int)ALLM_MIN((int32_t)8, (hd - d0) / 8);
		__m256 acc[8];
		for (int i = 0; i < 8; i++)
			acc[i] = _mm256_setzero_ps();
		for (p = p0; p < ctx_len; p++) {
			size_t at = kv_off(lay, block_table[p / bs], layer, 1, p % bs, kv_head) + d0;
			__m256 w = _mm256_set1_ps(scores[p - p0] * inv);
			for (int i = 0; i < nv; i++)
				acc[i] = _mm256_fmadd_ps(w, kv8(dt, kv_pool, at + 8 * i), acc[i]);
		}
		for (int i = 0; i < nv; i++)
			_mm256_storeu_ps(out_row + d0 + 8 * i, acc[i]);
	}
}

/* --- a tile of queries over the same keys ---------------------------------------
 * The queries of one tile share a sequence and a KV head (consecutive tokens of a
 * prompt chunk, the query heads of a GQA group); each gets exactly the arithmetic
 * of attend() above, in the same order, so its bits are those of attend() alone.
 * What changes is the loop nest: positions go by blocks of ATT_POS, and every query
 * of the tile scores (then accumulates) a block while its keys (values) are in L1,
 * instead of each query streaming the whole context from L2 or memory. The output
 * accumulators live in out_rows between blocks: a store and a reload are exact.
 *
 * And what costs nothing in bits but a lot in time at small head sizes (8 dims:
 * stories260K): eight positions are scored at once and their eight lane trees run
 * side by side in one transposed reduction; a position's address comes from a
 * cursor over the block table instead of a division; the fma chains of several
 * queries (their weight sums, and their outputs when a head fits one vector)
 * advance together, so the chains' latency overlaps instead of adding up. On
 * AVX-512 levels (`wide`) the same arithmetic also shares loads: 3 queries score
 * each key row together (3 x 8 ymm accumulators need the 32 registers of AVX-512),
 * and the outputs run 16 dims to a register with 6 queries per V row. */
#define ATT_POS 64 /* positions per block: K or V of 64 x 64 f32 dims is 16 KiB */
#define ATT_CHAINS 8 /* query chains interleaved */

/* Where position p's K (kind 0) or V (kind 1) row of one KV head lives, position
 * after position without dividing. */
struct kv_cursor {
	const struct allm_kv_layout *lay;
	const int32_t *bt;
	int32_t layer, kind, head, off;
	int64_t blk;
	size_t base, rs; /* block's row 0; elements between rows */
};

INL void kv_cursor_at(struct kv_cursor *c, int32_t p)
{
	c->blk = p / c->lay->block_size;
	c->off = p % c->lay->block_size;
	c->base = kv_off(c->lay, c->bt[c->blk], c->layer, c->kind, 0, c->head);
}

INL size_t kv_cursor_next(struct kv_cursor *c)
{
	size_t at = c->base + (size_t)c->off * c->rs;
	if (++c->off == c->lay->block_size) {
		c->off = 0;
		c->blk++;
		/* the table may end here: read the next entry only when it is needed */
		c->base = SIZE_MAX;
	}
	return at;
}

INL size_t kv_cursor_row(struct kv_cursor *c)
{
	if (c->base == SIZE_MAX)
		c->base = kv_off(c->lay, c->bt[c->blk], c->layer, c->kind, 0, c->head);
	return kv_cursor_next(c);
}

INL struct kv_cursor kv_cursor_make(const struct allm_kv_layout *lay, const int32_t *bt,
				    int32_t layer, int kind, int32_t head, int32_t p)
{
	struct kv_cursor c = { .lay = lay, .bt = bt, .layer = layer, .kind = kind, .head = head,
			       .rs = (size_t)lay->n_kv_heads * lay->head_dim };
	kv_cursor_at(&c, p);
	return c;
}

/* reduce8() of eight vectors at once, result i in lane i: the same adds (s8 = lo +
 * hi, then lanes j + j+2, then 0 + 1) for every vector, in a transposed layout. */
INL T2 __m256 reduce8x8(const __m256 *a)
{
	__m256 t[4], w[2];
	for (int i = 0; i < 4; i++)
		t[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
				     _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
	for (int i = 0; i < 2; i++)
		w[i] = _mm256_add_ps(_mm256_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44),
				     _mm256_shuffle_ps(t[2 * i], t[2 * i + 1], 0xee));
	__m256 z = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], 0x88), _mm256_shuffle_ps(w[0], w[1], 0xdd));
	/* z holds s0 s2 s4 s6 | s1 s3 s5 s7 */
	return _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Scores of positions [p, end) of one query into sc (score4/score1's arithmetic),
 * the running maximum in *mxv; the cursor stands at p; the query's keys are `off`
 * elements past the cursor's rows (another KV head of the same rows). */
INL T2 void score_run(const enum allm_dtype dt, float *sc, __m256 *mxv, const float *q_row,
		      const void *kv_pool, struct kv_cursor *kc, int32_t p, int32_t end, float scale,
		      size_t off)
{
	const int32_t hd = kc->lay->head_dim;
	const __m256 sv = _mm256_set1_ps(scale);
	for (; p + 8 <= end; p += 8) {
		size_t at[8];
		__m256 acc[8];
		for (int i = 0; i < 8; i++) {
			at[i] = kv_cursor_row(kc) + off;
			acc[i] = _mm256_setzero_ps();
		}
		for (int32_t d = 0; d < hd; d += 8) {
			__m256 qv = _mm256_loadu_ps(q_row + d);
			for (int i = 0; i < 8; i++)
				acc[i] = _mm256_fmadd_ps(qv, kv8(dt, kv_pool, at[i] + d), acc[i]);
		}
		__m256 s = _mm256_mul_ps(reduce8x8(acc), sv);
		_mm256_storeu_ps(sc + p, s);
		*mxv = _mm256_max_ps(s, *mxv); /* NaN scores are passed over, as score4 does */
	}
	for (; p < end; p++) {
		size_t at = kv_cursor_row(kc) + off;
		__m256 acc = _mm256_setzero_ps();
		for (int32_t d = 0; d < hd; d += 8)
			acc = _mm256_fmadd_ps(_mm256_loadu_ps(q_row + d), kv8(dt, kv_pool, at + d), acc);
		sc[p] = reduce8(acc) * scale;
		*mxv = _mm256_max_ps(_mm256_set1_ps(sc[p]), *mxv);
	}
}

/* score_run's arithmetic for n_q queries of 8-dim heads over the same positions
 * [p, end), query j's keys off[j] elements past the cursor's rows (its KV head):
 * the rows' addresses once for all queries. Stops at the last whole group of 8
 * and returns where (score_run takes the rest, so each position lands in the same
 * group and lane either way). */
INL T2 int32_t score_heads_hd8(const enum allm_dtype dt, float *scores, int32_t stride,
			       __m256 *mxv, const float *const *q_rows, int32_t n_q,
			       const void *kv_pool, struct kv_cursor *kc, int32_t p, int32_t end,
			       float scale, const size_t *off)
{
	const __m256 sv = _mm256_set1_ps(scale);
	const size_t rs = kc->rs;
	for (; p + 8 <= end; p += 8) {
		size_t at[8];
		for (int i = 0; i < 8; i++)
			at[i] = kv_cursor_row(kc);
		/* the usual case, 8 rows of one block: one base per query, the rows a
		 * constant stride apart (no addresses to keep per row and query) */
		bool one_block = at[7] == at[0] + 7 * rs;
		for (int32_t j = 0; j < n_q; j++) {
			const __m256 qv = _mm256_loadu_ps(q_rows[j]);
			__m256 acc[8];
			if (one_block) {
				const size_t a0 = at[0] + off[j];
				for (int i = 0; i < 8; i++)
					acc[i] = _mm256_fmadd_ps(qv, kv8(dt, kv_pool, a0 + (size_t)i * rs),
								 _mm256_setzero_ps());
			} else {
				for (int i = 0; i < 8; i++)
					acc[i] = _mm256_fmadd_ps(qv, kv8(dt, kv_pool, at[i] + off[j]),
								 _mm256_setzero_ps());
			}
			__m256 sc = _mm256_mul_ps(reduce8x8(acc), sv);
			_mm256_storeu_ps(scores + (size_t)j * stride + p, sc);
			mxv[j] = _mm256_max_ps(sc, mxv[j]);
		}
	}
	return p;
}

INL T2 float max8(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* Each query's weight sum in p order (attend()'s), nj <= ATT_CHAINS sums moving
 * together: called with a constant nj, so that they stay in registers. */
INL void sum_group(const int nj, const float *sc, int32_t stride, const int32_t *ctx, float *sum)
{
	int32_t common = INT32_MAX;
	float s[ATT_CHAINS];
	for (int j = 0; j < nj; j++) {
		common = ALLM_MIN(common, ctx[j]);
		s[j] = 0.0f;
	}
	for (int32_t p = 0; p < common; p++)
		for (int j = 0; j < nj; j++)
			s[j] += sc[(size_t)j * stride + p];
	for (int j = 0; j < nj; j++) {
		for (int32_t p = common; p < ctx[j]; p++)
			s[j] += sc[(size_t)j * stride + p];
		sum[j] = s[j];
	}
}

/* Outputs of a head of 8 dims over positions [pb, end_j) of block pb (sc: the
 * weights, already times 1 / sum): one vector per query, nj <= ATT_CHAINS
 * (constant) queries' chains side by side while all of them have positions left,
 * then each alone. Query j's values are off[j] elements past the cursor's rows
 * (NULL: none). */
INL T2 void pv_group_hd8(const int nj, const enum allm_dtype dt, float *const *out_rows,
			 const float *sc, int32_t stride, const int32_t *ctx, const void *kv_pool,
			 struct kv_cursor *vc, int32_t pb, const size_t *off)
{
	int32_t bend = pb + ATT_POS, common = bend;
	__m256 acc[ATT_CHAINS];
	for (int j = 0; j < nj; j++) {
		common = ALLM_MIN(common, ctx[j]);
		acc[j] = _mm256_loadu_ps(out_rows[j]);
	}
	kv_cursor_at(vc, pb);
	int32_t p = pb;
	if (!off) {
		for (; p < common; p++) {
			__m256 v = kv8(dt, kv_pool, kv_cursor_row(vc));
			for (int j = 0; j < nj; j++)
				acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(sc[(size_t)j * stride + p]), v,
							 acc[j]);
		}
	} else {
		for (; p < common; p++) {
			size_t row = kv_cursor_row(vc);
			for (int j = 0; j < nj; j++)
				acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(sc[(size_t)j * stride + p]),
							 kv8(dt, kv_pool, row + off[j]), acc[j]);
		}
	}
	for (int j = 0; j < nj; j++) {
		int32_t end = ALLM_MIN(bend, ctx[j]);
		size_t o = off ? off[j] : 0;
		struct kv_cursor c = *vc;
		for (int32_t pp = p; pp < end; pp++)
			acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(sc[(size_t)j * stride + pp]),
						 kv8(dt, kv_pool, kv_cursor_row(&c) + o), acc[j]);
		_mm256_storeu_ps(out_rows[j], acc[j]);
	}
}

/* Groups of up to ATT_CHAINS queries, each group's size a constant in its call. */
#define CHAIN_GROUPS(n_q, CALL) \
	for (int32_t j0 = 0; j0 < (n_q); j0 += ATT_CHAINS) \
		switch (ALLM_MIN(ATT_CHAINS, (n_q) - j0)) { \
		case 1: CALL(1); break; \
		case 2: CALL(2); break; \
		case 3: CALL(3); break; \
		case 4: CALL(4); break; \
		case 5: CALL(5); break; \
		case 6: CALL(6); break; \
		case 7: CALL(7); break; \
		default: CALL(8); break; \
		}

/* --- outputs 16 dims to a register (AVX-512 levels) ------------------------------- */
#define PV_Q 6 /* queries whose chains share each V row: 6 x 4 accumulators */

/* 16 K or V values from element `at` of the pool, as f32. */
INL T5 __m512 kv16(const enum allm_dtype dt, const void *pool, size_t at)
{
	if (dt == ALLM_DTYPE_F32)
		return _mm512_loadu_ps((const float *)pool + at);
	__m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)pool + at));
	if (dt == ALLM_DTYPE_F16)
		return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Dims [d0, d0 + 16 nv) of nj queries' outputs over block pb (w: the weights,
 * already times 1 / sum): an outer product of the weights and the V rows, each
 * (query, d) the same fma chain over p as pv_group_hd8 and the ymm loop run; the
 * nj queries share each V row while all of them have positions left. */
INL T5 void pv_group_512(const int nj, const int nv, const enum allm_dtype dt,
			 float *const *out_rows, const float *w, int32_t stride, const int32_t *ctx,
			 const void *kv_pool, struct kv_cursor *vc, int32_t pb, int32_t d0)
{
	int32_t bend = pb + ATT_POS, common = bend;
	__m512 acc[PV_Q][4];
	_Pragma("GCC unroll 8")
	for (int j = 0; j < nj; j++) {
		common = ALLM_MIN(common, ctx[j]);
		_Pragma("GCC unroll 4")
		for (int i = 0; i < nv; i++)
			acc[j][i] = _mm512_loadu_ps(out_rows[j] + d0 + 16 * i);
	}
	kv_cursor_at(vc, pb);
	int32_t p = pb;
	for (; p < common; p++) {
		size_t at = kv_cursor_row(vc) + d0;
		__m512 v[4];
		_Pragma("GCC unroll 4")
		for (int i = 0; i < nv; i++)
			v[i] = kv16(dt, kv_pool, at + 16 * (size_t)i);
		_Pragma("GCC unroll 8")
		for (int j = 0; j < nj; j++) {
			__m512 b = _mm512_set1_ps(w[(size_t)j * stride + p]);
			_Pragma("GCC unroll 4")
			for (int i = 0; i < nv; i++)
				acc[j][i] = _mm512_fmadd_ps(b, v[i], acc[j][i]);
		}
	}
	_Pragma("GCC unroll 8")
	for (int j = 0; j < nj; j++) {
		int32_t end = ALLM_MIN(bend, ctx[j]);
		struct kv_cursor c = *vc;
		for (int32_t pp = p; pp < end; pp++) {
			size_t at = kv_cursor_row(&c) + d0;
			__m512 b = _mm512_set1_ps(w[(size_t)j * stride + pp]);
			_Pragma("GCC unroll 4")
			for (int i = 0; i < nv; i++)
				acc[j][i] = _mm512_fmadd_ps(b, kv16(dt, kv_pool, at + 16 * (size_t)i), acc[j][i]);
		}
		_Pragma("GCC unroll 4")
		for (int i = 0; i < nv; i++)
			_mm512_storeu_ps(out_rows[j] + d0 + 16 * i, acc[j][i]);
	}
}

/* Scores of nj (constant, <= SC_Q) queries over the positions [p, end) they all
 * have, 8 at a time: each key row is loaded once for the group (the 32 ymm
 * registers of AVX-512 hold 3 x 8 accumulators), each query's arithmetic is
 * score_run's. Returns the first position not done (end less a remainder < 8). */
#define SC_Q 3
INL T5 int32_t score_group_512(const int nj, const enum allm_dtype dt, float *sc, int32_t stride,
			       __m256 *mxv, const float *const *q_rows, const void *kv_pool,
			       struct kv_cursor *kc, int32_t p, int32_t end, float scale)
{
	const int32_t hd = kc->lay->head_dim;
	const __m256 sv = _mm256_set1_ps(scale);
	for (; p + 8 <= end; p += 8) {
		size_t at[8];
		__m256 acc[SC_Q][8];
		_Pragma("GCC unroll 8")
		for (int i = 0; i < 8; i++) {
			at[i] = kv_cursor_row(kc);
			_Pragma("GCC unroll 3")
			for (int j = 0; j < nj; j++)
				acc[j][i] = _mm256_setzero_ps();
		}
		for (int32_t d = 0; d < hd; d += 8) {
			__m256 qv[SC_Q];
			_Pragma("GCC unroll 3")
			for (int j = 0; j < nj; j++)
				qv[j] = _mm256_loadu_ps(q_rows[j] + d);
			_Pragma("GCC unroll 8")
			for (int i = 0; i < 8; i++) {
				__m256 k = kv8(dt, kv_pool, at[i] + d);
				_Pragma("GCC unroll 3")
				for (int j = 0; j < nj; j++)
					acc[j][i] = _mm256_fmadd_ps(qv[j], k, acc[j][i]);
			}
		}
		_Pragma("GCC unroll 3")
		for (int j = 0; j < nj; j++) {
			__m256 v = _mm256_mul_ps(reduce8x8(acc[j]), sv);
			_mm256_storeu_ps(sc + (size_t)j * stride + p, v);
			mxv[j] = _mm256_max_ps(v, mxv[j]);
		}
	}
	return p;
}

/* Block pb's scores of every query: groups of SC_Q over their common positions,
 * then each query's own rest by score_run. */
INL T5 void score_block_512(const enum allm_dtype dt, float *scores, int32_t stride, __m256 *mxv,
			    const float *const *q_rows, const int32_t *ctx, int32_t n_q,
			    const void *kv_pool, struct kv_cursor *kc, int32_t pb, float scale)
{
	for (int32_t j0 = 0; j0 < n_q; j0 += SC_Q) {
		int nj = (int)ALLM_MIN(SC_Q, n_q - j0);
		int32_t common = pb + ATT_POS;
		for (int j = 0; j < nj; j++)
			common = ALLM_MIN(common, ctx[j0 + j]);
		int32_t p = pb;
		float *sc = scores + (size_t)j0 * stride;
		if (common > pb) {
			kv_cursor_at(kc, pb);
#define SCORE_GROUP(n) score_group_512(n, dt, sc, stride, mxv + j0, q_rows + j0, kv_pool, kc, pb, \
				       common, scale)
			p = nj == 1 ? SCORE_GROUP(1) : nj == 2 ? SCORE_GROUP(2) : SCORE_GROUP(3);
#undef SCORE_GROUP
		}
		for (int j = 0; j < nj; j++) {
			int32_t end = ALLM_MIN(pb + ATT_POS, ctx[j0 + j]);
			if (p >= end)
				continue;
			kv_cursor_at(kc, p);
			score_run(dt, sc + (size_t)j * stride, &mxv[j0 + j], q_rows[j0 + j], kv_pool, kc, p, end,
				  scale, 0);
		}
	}
}

/* Groups of up to PV_Q queries, the group's size and nv constants in each call. */
#define PV_GROUP_CASE(nj, nv) \
	case nj: pv_group_512(nj, nv, dt, out_rows + j0, w + (size_t)j0 * stride, stride, ctx + j0, \
			      kv_pool, vc, pb, d0); break;
#define PV_GROUPS(nv) \
	for (int32_t j0 = 0; j0 < n_q; j0 += PV_Q) \
		switch (ALLM_MIN(PV_Q, n_q - j0)) { \
			PV_GROUP_CASE(1, nv) PV_GROUP_CASE(2, nv) PV_GROUP_CASE(3, nv) \
			PV_GROUP_CASE(4, nv) PV_GROUP_CASE(5, nv) default: PV_GROUP_CASE(6, nv) \
		}

/* The block's outputs of every query, head_dim a multiple of 16. */
INL T5 void pv_block_512(const enum allm_dtype dt, float *const *out_rows, const float *w,
			 int32_t stride, const int32_t *ctx, int32_t n_q, const void *kv_pool,
			 struct kv_cursor *vc, int32_t pb, int32_t hd)
{
	int32_t d0 = 0;
	for (; d0 + 64 <= hd; d0 += 64)
		PV_GROUPS(4)
	for (; d0 < hd; d0 += 16)
		PV_GROUPS(1)
}

#define PV512_ARGS                                                                     \
	float *const *o, const float *w, int32_t stride, const int32_t *ctx, int32_t n_q,   \
		const void *kv, struct kv_cursor *vc, int32_t pb, int32_t hd
#define SC512_ARGS                                                                     \
	float *scores, int32_t stride, __m256 *mxv, const float *const *q, const int32_t *ctx,  \
		int32_t n_q, const void *kv, struct kv_cursor *kc, int32_t pb, float scale
static T5 void score_block_512_f32(SC512_ARGS)
{
	score_block_512(ALLM_DTYPE_F32, scores, stride, mxv, q, ctx, n_q, kv, kc, pb, scale);
}
static T5 void score_block_512_f16(SC512_ARGS)
{
	score_block_512(ALLM_DTYPE_F16, scores, stride, mxv, q, ctx, n_q, kv, kc, pb, scale);
}
static T5 void score_block_512_bf16(SC512_ARGS)
{
	score_block_512(ALLM_DTYPE_BF16, scores, stride, mxv, q, ctx, n_q, kv, kc, pb, scale);
}

static T5 void pv_block_512_f32(PV512_ARGS)
{
	pv_block_512(ALLM_DTYPE_F32, o, w, stride, ctx, n_q, kv, vc, pb, hd);
}
static T5 void pv_block_512_f16(PV512_ARGS)
{
	pv_block_512(ALLM_DTYPE_F16, o, w, stride, ctx, n_q, kv, vc, pb, hd);
}
static T5 void pv_block_512_bf16(PV512_ARGS)
{
	pv_block_512(ALLM_DTYPE_BF16, o, w, stride, ctx, n_q, kv, vc, pb, hd);
}

/* Scores to softmax weights, each query as attend(): the exps, the sums, then the
 * weights each times its query's 1 / sum (in place: the same products the fma
 * chains of the outputs took one by one); the output rows zeroed for those chains. */
INL T2 void att_weights(float *scores, int32_t stride, const int32_t *ctx, int32_t n_q,
			const __m256 *mxv, float *const *out_rows, int32_t hd)
{
	float sum[CPU_ATT_TILE_Q];
	for (int32_t j = 0; j < n_q; j++)
		exp_row(scores + (size_t)j * stride, ctx[j], max8(mxv[j]));
#define SUM(nj) sum_group(nj, scores + (size_t)j0 * stride, stride, ctx + j0, sum + j0)
	CHAIN_GROUPS(n_q, SUM)
#undef SUM
	for (int32_t j = 0; j < n_q; j++) {
		const float inv = 1.0f / sum[j];
		float *sc = scores + (size_t)j * stride;
		int32_t p = 0;
		for (; p + 8 <= ctx[j]; p += 8)
			_mm256_storeu_ps(sc + p, _mm256_mul_ps(_mm256_loadu_ps(sc + p), _mm256_set1_ps(inv)));
		for (; p < ctx[j]; p++)
			sc[p] *= inv;
		memset(out_rows[j], 0, (size_t)hd * sizeof(float));
	}
}

INL T2 void attend_tile(const enum allm_dtype dt, float *const *out_rows,
			const float *const *q_rows, const int32_t *ctx, int32_t n_q,
			const void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
			int32_t kv_head, const int32_t *block_table, float scale, float *scores,
			int32_t stride, bool wide, const size_t *off)
{
	const int32_t hd = lay->head_dim;
	__m256 mxv[CPU_ATT_TILE_Q];
	int32_t max_ctx = 0;
	for (int32_t j = 0; j < n_q; j++) {
		mxv[j] = _mm256_set1_ps(-INFINITY);
		max_ctx = ALLM_MAX(max_ctx, ctx[j]);
	}
	static const size_t no_off[CPU_ATT_TILE_Q]; /* every query on kv_head */
	struct kv_cursor kc = kv_cursor_make(lay, block_table, layer, 0, kv_head, 0);
	struct kv_cursor vc = kv_cursor_make(lay, block_table, layer, 1, kv_head, 0);
	/* scores, a block of positions for every query while its keys are in L1 */
	for (int32_t pb = 0; pb < max_ctx; pb += ATT_POS) {
		if (wide && hd > 8) { /* 8 dims: one fma per position, nothing to share */
			(dt == ALLM_DTYPE_F16    ? score_block_512_f16
			 : dt == ALLM_DTYPE_BF16 ? score_block_512_bf16
						 : score_block_512_f32)(scores, stride, mxv, q_rows, ctx, n_q,
									kv_pool, &kc, pb, scale);
			continue;
		}
		int32_t p0 = pb;
		if (hd == 8) { /* the positions all queries share first, their rows found once */
			int32_t common = pb + ATT_POS;
			for (int32_t j = 0; j < n_q; j++)
				common = ALLM_MIN(common, ctx[j]);
			if (common > pb) {
				kv_cursor_at(&kc, pb);
				p0 = score_heads_hd8(dt, scores, stride, mxv, q_rows, n_q, kv_pool, &kc, pb,
						     common, scale, off ? off : no_off);
			}
		}
		for (int32_t j = 0; j < n_q; j++) {
			int32_t end = ALLM_MIN(pb + ATT_POS, ctx[j]);
			if (p0 >= end)
				continue;
			kv_cursor_at(&kc, p0);
			score_run(dt, scores + (size_t)j * stride, &mxv[j], q_rows[j], kv_pool, &kc, p0,
				  end, scale, off ? off[j] : 0);
		}
	}
	att_weights(scores, stride, ctx, n_q, mxv, out_rows, hd);
	/* out: each query's fma chain over positions, continued block after block */
	for (int32_t pb = 0; pb < max_ctx; pb += ATT_POS) {
		if (hd == 8) {
#define PV(nj) pv_group_hd8(nj, dt, out_rows + j0, scores + (size_t)j0 * stride, stride, ctx + j0, \
			    kv_pool, &vc, pb, off ? off + j0 : NULL)
			CHAIN_GROUPS(n_q, PV)
#undef PV
			continue;
		}
		if (wide && hd % 16 == 0) {
			(dt == ALLM_DTYPE_F16    ? pv_block_512_f16
			 : dt == ALLM_DTYPE_BF16 ? pv_block_512_bf16
						 : pv_block_512_f32)(out_rows, scores, stride, ctx, n_q,
								     kv_pool, &vc, pb, hd);
			continue;
		}
		for (int32_t j = 0; j < n_q; j++) {
			int32_t end = ALLM_MIN(pb + ATT_POS, ctx[j]);
			const float *sc = scores + (size_t)j * stride;
			for (int32_t d0 = 0; d0 < hd && pb < end; d0 += 64) {
				int nv = (int)ALLM_MIN((int32_t)8, (hd - d0) / 8);
				__m256 acc[8];
				for (int i = 0; i < nv; i++)
					acc[i] = _mm256_loadu_ps(out_rows[j] + d0 + 8 * i);
				kv_cursor_at(&vc, pb);
				for (int32_t p = pb; p < end; p++) {
					size_t at = kv_cursor_row(&vc) + d0;
					__m256 w = _mm256_set1_ps(sc[p]);
					for (int i = 0; i < nv; i++)
						acc[i] = _mm256_fmadd_ps(w, kv8(dt, kv_pool, at + 8 * i), acc[i]);
				}
				for (int i = 0; i < nv; i++)
					_mm256_storeu_ps(out_rows[j] + d0 + 8 * i, acc[i]);
			}
		}
	}
}
#define TILE_ARGS                                                                        \
	float *const *o, const float *const *q, const int32_t *ctx, int32_t n_q, const void *kv, \
		const struct allm_kv_layout *l, int32_t layer, int32_t h, const int32_t *bt,      \
		float s, float *sc, int32_t stride, bool wide, const size_t *off
static T2 void attend_tile_f32(TILE_ARGS)
{
	attend_tile(ALLM_DTYPE_F32, o, q, ctx, n_q, kv, l, layer, h, bt, s, sc, stride, wide, off);
}
static T2 void attend_tile_f16(TILE_ARGS)
{
	attend_tile(ALLM_DTYPE_F16, o, q, ctx, n_q, kv, l, layer, h, bt, s, sc, stride, wide, off);
}
static T2 void attend_tile_bf16(TILE_ARGS)
{
	attend_tile(ALLM_DTYPE_BF16, o, q, ctx, n_q, kv, l, layer, h, bt, s, sc, stride, wide, off);
}

/* --- a token alone over several KV heads (AVX-512 levels) -------------------------
 * One KV head's K (V) rows are a whole row apart (n_kv_heads x head_dim elements),
 * so a head at a time reads 256 bytes of every 3 KiB (f32, --dummy medium): the
 * hardware's prefetchers fetch neighbours that the other heads read later, and the
 * DRAM stream breaks at every row; a decode's attention read its K/V at about 21
 * GB/s where a plain read gets 33. Here a block of ATT_POS positions is done for
 * all of the token's heads [kh0, kh1) in turn (the block's rows stay in L2 between
 * heads), while the rows of the next block, all of those heads' bytes, are asked
 * for into L2 in address order, a share after each head's block. Each head's
 * arithmetic is attend_tile's, in the same order: the same bits. */

/* The rows [0, end) of one kind, the bytes of heads [kh0, kh1) in each, prefetched
 * into L2 a few lines at a time in address order. */
struct rows_ahead {
	struct kv_cursor c; /* at row p, head kh0 */
	const char *pool, *row; /* row: the current row's first line, NULL before it */
	size_t eb, lines, line; /* bytes per element; lines per row; next line */
	int32_t p, end;
};

INL void rows_ahead_init(struct rows_ahead *a, const struct allm_kv_layout *lay, const int32_t *bt,
			 int32_t layer, int kind, int32_t kh0, int32_t kh1, const void *pool,
			 size_t eb, int32_t end)
{
	a->c = kv_cursor_make(lay, bt, layer, kind, kh0, 0);
	a->pool = pool, a->row = NULL, a->eb = eb, a->line = 0, a->p = 0, a->end = end;
	/* a row's bytes may start inside a line: one line more covers their end */
	a->lines = ((size_t)(kh1 - kh0) * (size_t)lay->head_dim * eb + 63) / 64 + 1;
}

INL void rows_ahead_step(struct rows_ahead *a, int64_t lines)
{
	for (; lines > 0 && a->p < a->end; lines--) {
		if (!a->row)
			a->row = (const char *)((uintptr_t)(a->pool + kv_cursor_row(&a->c) * a->eb) &
						~(uintptr_t)63);
		_mm_prefetch(a->row + a->line * 64, _MM_HINT_T1);
		if (++a->line == a->lines)
			a->line = 0, a->row = NULL, a->p++;
	}
}

INL T5 void attend_heads(const enum allm_dtype dt, float *out, const float *q, int32_t ctx,
			 const void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
			 int32_t kh0, int32_t kh1, int32_t group, const int32_t *bt, float scale,
			 float *scores)
{
	const int32_t hd = lay->head_dim, nh = kh1 - kh0;
	const size_t eb = dt == ALLM_DTYPE_F32 ? 4 : 2;
	struct kv_cursor kc[CPU_ATT_HEADS_MAX], vc[CPU_ATT_HEADS_MAX];
	__m256 mxv[CPU_ATT_HEADS_MAX * CPU_ATT_TILE_Q];
	float *out_rows[CPU_ATT_HEADS_MAX * CPU_ATT_TILE_Q];
	const float *q_rows[CPU_ATT_HEADS_MAX * CPU_ATT_TILE_Q];
	int32_t ctxs[CPU_ATT_TILE_Q];
	for (int32_t g = 0; g < group; g++)
		ctxs[g] = ctx;
	for (int32_t k = 0; k < nh; k++) {
		kc[k] = kv_cursor_make(lay, bt, layer, 0, kh0 + k, 0);
		vc[k] = kv_cursor_make(lay, bt, layer, 1, kh0 + k, 0);
		for (int32_t g = 0; g < group; g++) {
			size_t row = ((size_t)(kh0 + k) * (size_t)group + (size_t)g) * (size_t)hd;
			out_rows[k * group + g] = out + row;
			q_rows[k * group + g] = q + row;
			mxv[k * group + g] = _mm256_set1_ps(-INFINITY);
		}
	}
	const size_t hs = (size_t)group * (size_t)ctx; /* one head's scores */
	struct rows_ahead ahead;
	rows_ahead_init(&ahead, lay, bt, layer, 0, kh0, kh1, kv_pool, eb, ctx);
	const int64_t per_step = ((int64_t)ATT_POS * (int64_t)ahead.lines + nh - 1) / nh;
	rows_ahead_step(&ahead, ATT_POS * (int64_t)ahead.lines); /* the first block */
	for (int32_t pb = 0; pb < ctx; pb += ATT_POS)
		for (int32_t k = 0; k < nh; k++) {
			rows_ahead_step(&ahead, per_step);
			(dt == ALLM_DTYPE_F16    ? score_block_512_f16
			 : dt == ALLM_DTYPE_BF16 ? score_block_512_bf16
						 : score_block_512_f32)(scores + k * hs, ctx, mxv + k * group,
									q_rows + k * group, ctxs, group,
									kv_pool, &kc[k], pb, scale);
		}
	rows_ahead_init(&ahead, lay, bt, layer, 1, kh0, kh1, kv_pool, eb, ctx);
	rows_ahead_step(&ahead, ATT_POS * (int64_t)ahead.lines); /* during the softmax */
	for (int32_t k = 0; k < nh; k++)
		att_weights(scores + k * hs, ctx, ctxs, group, mxv + k * group, out_rows + k * group, hd);
	for (int32_t pb = 0; pb < ctx; pb += ATT_POS)
		for (int32_t k = 0; k < nh; k++) {
			rows_ahead_step(&ahead, per_step);
			(dt == ALLM_DTYPE_F16    ? pv_block_512_f16
			 : dt == ALLM_DTYPE_BF16 ? pv_block_512_bf16
						 : pv_block_512_f32)(out_rows + k * group, scores + k * hs, ctx,
								     ctxs, group, kv_pool, &vc[k], pb, hd);
		}
}

#define HEADS_ARGS                                                                        \
	float *out, const float *q, int32_t ctx, const void *kv, const struct allm_kv_layout *l, \
		int32_t layer, int32_t kh0, int32_t kh1, int32_t group, const int32_t *bt, float s,  \
		float *sc
static T5 void attend_heads_f32(HEADS_ARGS)
{
	attend_heads(ALLM_DTYPE_F32, out, q, ctx, kv, l, layer, kh0, kh1, group, bt, s, sc);
}
static T5 void attend_heads_f16(HEADS_ARGS)
{
	attend_heads(ALLM_DTYPE_F16, out, q, ctx, kv, l, layer, kh0, kh1, group, bt, s, sc);
}
static T5 void attend_heads_bf16(HEADS_ARGS)
{
	attend_heads(ALLM_DTYPE_BF16, out, q, ctx, kv, l, layer, kh0, kh1, group, bt, s, sc);
}

bool cpu_attention_heads_simd(float *out, const float *q, int32_t ctx, const void *kv_pool,
			      const struct allm_kv_layout *lay, int32_t layer, int32_t kh0, int32_t kh1,
			      int32_t group, const int32_t *block_table, float scale, float *scores)
{
	const int32_t hd = lay->head_dim;
	if (hd % 16 || ctx < 1 || kh0 < 0 || kh1 <= kh0 || kh1 > lay->n_kv_heads ||
	    kh1 - kh0 > CPU_ATT_HEADS_MAX || group < 1 || group > CPU_ATT_TILE_Q)
		return false;
	(lay->dtype == ALLM_DTYPE_F16    ? attend_heads_f16
	 : lay->dtype == ALLM_DTYPE_BF16 ? attend_heads_bf16
					 : attend_heads_f32)(out, q, ctx, kv_pool, lay, layer, kh0, kh1,
							     group, block_table, scale, scores);
	return true;
}

bool cpu_attention_tile_simd(float *const *out_rows, const float *const *q_rows,
			     const int32_t *ctx_lens, int32_t n_q, const void *kv_pool,
			     const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
			     const int32_t *block_table, float scale, float *scores, int32_t stride,
			     bool wide, const int32_t *q_kv_head)
{
	size_t off[CPU_ATT_TILE_Q];
	if (lay->head_dim % 8 || n_q < 1 || n_q > CPU_ATT_TILE_Q || (q_kv_head && lay->head_dim != 8))
		return false;
	for (int32_t j = 0; q_kv_head && j < n_q; j++) {
		if (q_kv_head[j] < kv_head || q_kv_head[j] >= lay->n_kv_heads)
			return false;
		off[j] = (size_t)(q_kv_head[j] - kv_head) * (size_t)lay->head_dim;
	}
	const size_t *o = q_kv_head ? off : NULL;
	switch (lay->dtype) {
	case ALLM_DTYPE_F16:
		attend_tile_f16(out_rows, q_rows, ctx_lens, n_q, kv_pool, lay, layer, kv_head,
				block_table, scale, scores, stride, wide, o);
		break;
	case ALLM_DTYPE_BF16:
		attend_tile_bf16(out_rows, q_rows, ctx_lens, n_q, kv_pool, lay, layer, kv_head,
				 block_table, scale, scores, stride, wide, o);
		break;
	default:
		attend_tile_f32(out_rows, q_rows, ctx_lens, n_q, kv_pool, lay, layer, kv_head,
				block_table, scale, scores, stride, wide, o);
	}
	return true;
}

static T2 void attend_f32(float *o, const float *q, const void *kv, const struct allm_kv_layout *l,
			int32_t layer, int32_t h, const int32_t *bt, int32_t p0, int32_t n, float s,
			float *sc)
{
	attend(ALLM_DTYPE_F32, o, q, kv, l, layer, h, bt, p0, n, s, sc);
}

static T2 void attend_f16(float *o, const float *q, const void *kv, const struct allm_kv_layout *l,
			int32_t layer, int32_t h, const int32_t *bt, int32_t p0, int32_t n, float s,
			float *sc)
{
	attend(ALLM_DTYPE_F16, o, q, kv, l, layer, h, bt, p0, n, s, sc);
}

static T2 void attend_bf16(float *o, const float *q, const void *kv, const struct allm_kv_layout *l,
			int32_t layer, int32_t h, const int32_t *bt, int32_t p0, int32_t n, float s,
			float *sc)
{
	attend(ALLM_DTYPE_BF16, o, q, kv, l, layer, h, bt, p0, n, s, sc);
}

void cpu_attention_one_simd(float *out_row, const float *q_row, const void *kv_pool,
			    const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
			    const int32_t *block_table, int32_t p0, int32_t ctx_len, float scale,
			    float *scores)
{
	if (lay->head_dim % 8) { /* odd head sizes: the reference loops */
		cpu_attention_one(out_row, q_row, kv_pool, lay, layer, kv_head, block_table, p0, ctx_len,
				  scale, scores);
		return;
	}
	switch (lay->dtype) {
	case ALLM_DTYPE_F16:
		attend_f16(out_row, q_row, kv_pool, lay, layer, kv_head, block_table, p0, ctx_len, scale, scores);
		break;
	case ALLM_DTYPE_BF16:
		attend_bf16(out_row, q_row, kv_pool, lay, layer, kv_head, block_table, p0, ctx_len, scale, scores);
		break;
	default:
		attend_f32(out_row, q_row, kv_pool, lay, layer, kv_head, block_table, p0, ctx_len, scale, scores);
	}
}

/* silu(g) = g / (1 + exp(-g)), 8 at a time (exp8 needs x <= 0: for g > 0, exp(-g)
 * <= 1 directly; for g < 0, g / (1 + e^-g) = g e^g / (1 + e^g)). */
INL T2 __m256 silu8(__m256 g)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	__m256 e = exp8(_mm256_or_ps(g, sign)); /* exp(-|g|) */
	__m256 pos = _mm256_div_ps(g, _mm256_add_ps(one, e));
	__m256 neg = _mm256_div_ps(_mm256_mul_ps(g, e), _mm256_add_ps(one, e));
	return _mm256_blendv_ps(pos, neg, g); /* by the sign bit of g */
}

/* gelu_tanh(g) = 0.5 g (1 + tanh(z)), z = sqrt(2/pi) (g + 0.044715 g^3), 8 at a time:
 * tanh(|z|) = (1 - e) / (1 + e) with e = exp(-2|z|) <= 1 (exp8's range), the sign
 * put back after. */
INL T2 __m256 gelu8(__m256 g)
{
	const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f);
	const __m256 c = _mm256_set1_ps(0.7978845608028654f), k = _mm256_set1_ps(0.044715f);
	__m256 z = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(k, g), _mm256_mul_ps(g, g), g));
	__m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), _mm256_andnot_ps(sign, z)));
	__m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
	t = _mm256_or_ps(t, _mm256_and_ps(z, sign)); /* tanh(z) = sign(z) tanh(|z|) */
	return _mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, t));
}

/* y = act(gate) * up, 8 at a time, the tail through a zero-padded 8 */
INL T2 void gated_avx2(float *y, const float *gate, const float *up, int64_t n, bool gelu)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 g = _mm256_loadu_ps(gate + i);
		__m256 a = gelu ? gelu8(g) : silu8(g);
		_mm256_storeu_ps(y + i, _mm256_mul_ps(a, _mm256_loadu_ps(up + i)));
	}
	if (i < n) {
		float g[8] = {0}, u[8] = {0}, t[8];
		memcpy(g, gate + i, (size_t)(n - i) * 4);
		memcpy(u, up + i, (size_t)(n - i) * 4);
		__m256 a = gelu ? gelu8(_mm256_loadu_ps(g)) : silu8(_mm256_loadu_ps(g));
		_mm256_storeu_ps(t, _mm256_mul_ps(a, _mm256_loadu_ps(u)));
		memcpy(y + i, t, (size_t)(n - i) * 4);
	}
}

static T2 void silu_mul_avx2(float *y, const float *gate, const float *up, int64_t n)
{
	gated_avx2(y, gate, up, n, false);
}

static T2 void gelu_mul_avx2(float *y, const float *gate, const float *up, int64_t n)
{
	gated_avx2(y, gate, up, n, true);
}

void cpu_silu_mul_simd(float *y, const float *gate, const float *up, int64_t n)
{
	silu_mul_avx2(y, gate, up, n);
}

void cpu_gelu_mul_simd(float *y, const float *gate, const float *up, int64_t n)
{
	gelu_mul_avx2(y, gate, up, n);
}

/* One row's y = (x * inv) * w, rounded as the reference rounds it, 8 at a time: the
 * weight's conversion to f32 is exact whichever way it is done (here F16C or a
 * shift instead of the reference's per-element call). */
INL T2 void rmsnorm_scale_row(float *y, const float *x, const void *w, enum allm_dtype dt,
			      int64_t dim, float inv)
{
	const __m256 iv = _mm256_set1_ps(inv);
	int64_t j = 0;
	for (; j + 8 <= dim; j += 8)
		_mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), iv),
						      kv8(dt, w, (size_t)j)));
	if (j < dim) /* the tail by the reference's own loop */
		cpu_ref_rmsnorm_scaled(y + j, x + j, w, dt, j, dim - j, inv);
}

/* 16 rows: lane r of two registers runs row r's chain of the reference (ss = ss +
 * x * x in increasing j, a rounded product then a rounded sum: ISO C compiles
 * these intrinsics without contracting them into an FMA), so each row's sum is
 * the reference's bit for bit, 16 chains at once instead of one; then each row's
 * scale and y = (x * inv) * w exactly as the reference rounds them. */
static T2 void rmsnorm16_avx2(float *y, const float *x, const void *w, enum allm_dtype dt,
			      int64_t dim, float eps)
{
	const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
					       _mm256_set1_epi32((int)dim));
	const float *x8 = x + 8 * dim;
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	for (int64_t j = 0; j < dim; j++) {
		__m256 a0 = _mm256_i32gather_ps(x + j, idx, 4), a1 = _mm256_i32gather_ps(x8 + j, idx, 4);
		s0 = _mm256_add_ps(s0, _mm256_mul_ps(a0, a0));
		s1 = _mm256_add_ps(s1, _mm256_mul_ps(a1, a1));
	}
	float ss[16];
	_mm256_storeu_ps(ss, s0);
	_mm256_storeu_ps(ss + 8, s1);
	for (int r = 0; r < 16; r++)
		rmsnorm_scale_row(y + r * dim, x + r * dim, w, dt, dim,
				  1.0f / sqrtf(ss[r] / (float)dim + eps));
}

/* A row alone (a decode step's norms): the reference's chain, one rounded product
 * and one rounded sum per element (scalar intrinsics, never an FMA), then the
 * scaling 8 wide. The reference's per-element weight conversion made a 768-wide
 * f16 norm take 7.5-8.6 us of a decode step's layer (AMD EPYC, --dummy medium),
 * two per layer: 2-3 % of the step. */
static T2 void rmsnorm1_avx2(float *y, const float *x, const void *w, enum allm_dtype dt,
			     int64_t dim, float eps)
{
	__m128 ss = _mm_setzero_ps();
	for (int64_t j = 0; j < dim; j++) {
		__m128 a = _mm_load_ss(x + j);
		ss = _mm_add_ss(ss, _mm_mul_ss(a, a));
	}
	rmsnorm_scale_row(y, x, w, dt, dim, 1.0f / sqrtf(_mm_cvtss_f32(ss) / (float)dim + eps));
}

void cpu_rmsnorm_simd(float *y, const float *x, const void *w, enum allm_dtype dt, int64_t n,
		      int64_t dim, float eps)
{
	int64_t i = 0;
	if ((int64_t)dim * 15 < INT32_MAX) /* the gather's offsets */
		for (; i + 16 <= n; i += 16)
			rmsnorm16_avx2(y + i * dim, x + i * dim, w, dt, dim, eps);
	for (; i < n; i++)
		rmsnorm1_avx2(y + i * dim, x + i * dim, w, dt, dim, eps);
}

/* f32 -> f16 or bf16, 8 at a time, as allm_f32_to_f16 / allm_f32_to_bf16 round
 * them: nearest even (f16: F16C, which overflows to inf and rounds subnormals as
 * they do; bf16: their integer rounding), and NaN lanes set as they set them (f16:
 * sign | 0x7e00; bf16: the top half | 0x40), so the bits are theirs. */
static T2 void to16_avx2(void *dst16, const float *src, enum allm_dtype dt, size_t n)
{
	uint16_t *dst = dst16;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(src + i);
		__m256i xi = _mm256_castps_si256(x), hi = _mm256_srli_epi32(xi, 16);
		__m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)), v;
		if (dt == ALLM_DTYPE_F16) {
			__m256i h = _mm256_cvtepu16_epi32(
				_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
			__m256i qnan = _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi32(0x8000)),
						       _mm256_set1_epi32(0x7e00));
			v = _mm256_blendv_epi8(h, qnan, nan);
		} else {
			__m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
			__m256i r = _mm256_srli_epi32(
				_mm256_add_epi32(xi, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
			v = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
		}
		/* 8 x 32 bits -> 8 x 16 (values < 65536: packus keeps them) */
		__m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
		_mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(p));
	}
	if (i < n)
		allm_from_f32(dst + i, src + i, dt, n - i);
}

void cpu_kv_write_simd(void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		       const float *k, const float *v, const struct allm_attn_meta *meta)
{
	cpu_kv_write_with(kv_pool, lay, layer, k, v, meta, to16_avx2);
}

#else

bool cpu_attention_heads_simd(float *out, const float *q, int32_t ctx, const void *kv_pool,
			      const struct allm_kv_layout *lay, int32_t layer, int32_t kh0, int32_t kh1,
			      int32_t group, const int32_t *block_table, float scale, float *scores)
{
	return false;
}

void cpu_kv_write_simd(void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		       const float *k, const float *v, const struct allm_attn_meta *meta)
{
	cpu_ref_kv_write(kv_pool, lay, layer, k, v, meta);
}

void cpu_rmsnorm_simd(float *y, const float *x, const void *w, enum allm_dtype dt, int64_t n,
		      int64_t dim, float eps)
{
	cpu_ref_rmsnorm(y, x, w, dt, n, dim, eps);
}

void cpu_silu_mul_simd(float *y, const float *gate, const float *up, int64_t n)
{
	cpu_ref_silu_mul(y, gate, up, n);
}

void cpu_gelu_mul_simd(float *y, const float *gate, const float *up, int64_t n)
{
	cpu_ref_gelu_mul(y, gate, up, n);
}

bool cpu_attention_tile_simd(float *const *out_rows, const float *const *q_rows,
			     const int32_t *ctx_lens, int32_t n_q, const void *kv_pool,
			     const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
			     const int32_t *block_table, float scale, float *scores, int32_t stride,
			     bool wide, const int32_t *q_kv_head)
{
	(void)out_rows, (void)q_rows, (void)ctx_lens, (void)n_q, (void)kv_pool, (void)lay;
	(void)layer, (void)kv_head, (void)block_table, (void)scale, (void)scores, (void)stride;
	(void)wide, (void)q_kv_head;
	return false; /* no SIMD here: the caller takes one query at a time */
}

void cpu_attention_one_simd(float *out_row, const float *q_row, const void *kv_pool,
			    const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
			    const int32_t *block_table, int32_t p0, int32_t ctx_len, float scale,
			    float *scores)
{
	cpu_attention_one(out_row, q_row, kv_pool, lay, layer, kv_head, block_table, p0, ctx_len, scale,
			  scores);
}

#endif
