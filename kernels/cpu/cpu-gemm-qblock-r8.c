/* GGUF block weights on AVX2, prefill (R8_MIN_TOK+ tokens): an item's rows repacked
 * eight at a time into row-interleaved groups, then a register-tiled outer product.
 *
 * The file's blocks hold a row's 32 (or 256) values together, so a SIMD dot product
 * of one row ends with one integer spread over 8 lanes, and the per-token items
 * (cpu-gemm-qblock-x86.c) spend a third of their work transposing and adding lanes
 * back to one per row, and unpack every row's nibbles again for every token. Here
 * an item's 8 rows x 32 blocks (one chunk, ~10 KB: L1) are unpacked once into
 * [block][group g][row r][4 values] (the value bytes as vpmaddubsw wants them: each
 * 32-bit lane one row's 4 values 4g..4g+3) with the rows' scales as 8-lane vectors,
 * and each group's vector meets a broadcast of 4 activations of each of 4 tokens.
 * A lane then holds one row's exact block integer with no transposition, and the
 * fmas run 8 rows wide. This is the layout llama.cpp repacks its files into at
 * load (Q4_0x8, Q4_Kx8); made per item from the file's bytes instead, it costs
 * about two tokens' worth of one pass (so from R8_MIN_TOK tokens on) and leaves
 * the file's bytes where they are: mapped in place, the one layout every level,
 * the dequantizer, a tied embedding table and the decode GEMVs read.
 *
 * Bits: each row and token gets the exact block integer (super-block integer for
 * the K formats) that cpu-gemm.h's order names, then the same fmas in the same
 * block order, so the results equal the portable family's bit for bit whatever the
 * batch (the tests: test-cpu-gemm, test-cpu-gemm-kquant, shapes of 4+ tokens). */
#include "cpu-gemm-qblock.h"
#include "cpu-gemm-x86.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef GEMM_X86

#define T2 __attribute__((target("avx2,fma,f16c")))

#define R8_TOK 4 /* tokens a pass takes at once */
#define R8_CH 32 /* blocks of 32 values per chunk (K: 4 super-blocks) */

/* One chunk of 8 rows, unpacked. */
struct r8_chunk {
	__m256i q[R8_CH][8]; /* [block][g]: 32-bit lane r = row r's values 4g..4g+3 */
	__m256 d[R8_CH], m[R8_CH]; /* the rows' d (and Q4_1/Q5_1's m) per block; K: d, dmin per super-block */
	__m256i sc[2 * R8_CH]; /* K: int16 pairs (sc, sc), a pair per row: Q4_K/Q5_K per
				* sub-block of 32, Q6_K per group of 16 */
	__m256i mn[R8_CH / 8][4]; /* K: per super-block, int16 pairs (m_2p, m_2p+1), a pair per row */
};

/* 8 rows of 8 dwords each -> out[g] = the rows' dword g, row r in lane r. */
INL T2 void tr8(const __m256i *v, __m256i *out)
{
	__m256i t[8], u[8];
	UNROLL
	for (int i = 0; i < 4; i++) { /* rows 2i, 2i + 1: groups {0,1 | 4,5}, {2,3 | 6,7} */
		t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
		t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
	}
	UNROLL
	for (int h = 0; h < 2; h++) { /* rows 4h..4h+3: u[4h + g'] = group g' | g' + 4 */
		u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
		u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
	}
	UNROLL
	for (int g = 0; g < 4; g++) {
		out[g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x20);
		out[g + 4] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x31);
	}
}

/* 16 (0 or 16) per value of 32 whose bit in the 32-bit word h is set: value i in byte i. */
INL T2 __m256i fifth32(uint32_t h)
{
	const __m256i ctl = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
	const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
	__m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), ctl), bit);
	return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* One row's block of a 32-value format as 32 value bytes in order (Q8_0: int8 q;
 * the others: unsigned q, the offset taken out after the integer). */
INL T2 __m256i row32(const enum allm_dtype dt, const uint8_t *blk)
{
	const uint8_t *qs = blk + allm_qb_qs_offset(dt);
	if (dt == ALLM_DTYPE_Q8_0)
		return _mm256_loadu_si256((const __m256i *)qs);
	const __m128i z = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(15);
	__m256i v = _mm256_setr_m128i(_mm_and_si128(z, m4), _mm_and_si128(_mm_srli_epi16(z, 4), m4));
	if (dt == ALLM_DTYPE_Q5_0 || dt == ALLM_DTYPE_Q5_1)
		v = _mm256_or_si256(v, fifth32(rd32(qs - 4)));
	return v;
}

/* Rows w0 + r rb (r < 8), blocks [b0, b0 + nbc) into c; next: the next item's rows
 * (their share of these blocks prefetched), or NULL. */
INL T2 void pack32(const enum allm_dtype dt, const struct qb_job *j, const uint8_t *w0, int64_t b0,
		   int nbc, struct r8_chunk *c, const uint8_t *next)
{
	for (int b = 0; b < nbc; b++) {
		const size_t off = (size_t)(b0 + b) * j->bb;
		if (next)
			for (size_t o = 0; o < QB_OUT * j->bb; o += 64)
				_mm_prefetch((const char *)next + off * QB_OUT + o, _MM_HINT_T1);
		__m256i v[8];
		uint16_t d[8], m[8];
		UNROLL
		for (int r = 0; r < 8; r++) {
			const uint8_t *blk = w0 + (size_t)r * j->rb + off;
			v[r] = row32(dt, blk);
			d[r] = allm_le16(blk);
			m[r] = allm_le16(blk + 2);
		}
		tr8(v, c->q[b]);
		c->d[b] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
		c->m[b] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)m));
	}
}

/* Q6_K: super-blocks [s0, s0 + ns) of the 8 rows into c, the values as q - 32 (int8). */
INL T2 void pack_k6(const struct qb_job *j, const uint8_t *w0, int64_t s0, int ns, struct r8_chunk *c,
		    const uint8_t *next)
{
	const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), o32 = _mm256_set1_epi8(32);
	for (int s = 0; s < ns; s++) {
		const size_t off = (size_t)(s0 + s) * j->bb;
		UNROLL
		for (int jj = 0; jj < 8; jj++) { /* sub-block jj = 4 hh + cc, as k6_row reads it */
			const int hh = jj / 4, cc = jj % 4;
			if (next && cc % 2 == 0)
				for (size_t o = 0; o < QB_OUT * j->bb / 4; o += 64)
					_mm_prefetch((const char *)next + off * QB_OUT + (jj / 2) * QB_OUT * j->bb / 4 + o,
						     _MM_HINT_T1);
			__m256i v[8];
			UNROLL
			for (int r = 0; r < 8; r++) {
				const struct allm_block_q6_K *b = (const struct allm_block_q6_K *)(w0 + (size_t)r * j->rb + off);
				const __m256i l = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * hh + 32 * (cc % 2)));
				const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * hh));
				__m256i nib = cc < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
				__m256i hi2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * cc), m2);
				v[r] = _mm256_sub_epi8(_mm256_or_si256(nib, _mm256_slli_epi16(hi2, 4)), o32);
			}
			tr8(v, c->q[8 * s + jj]);
		}
		int16_t sc[16][16];
		uint16_t d[8];
		for (int r = 0; r < 8; r++) {
			const struct allm_block_q6_K *b = (const struct allm_block_q6_K *)(w0 + (size_t)r * j->rb + off);
			for (int g = 0; g < 16; g++)
				sc[g][2 * r] = sc[g][2 * r + 1] = b->scales[g];
			d[r] = allm_le16(b->d);
		}
		for (int g = 0; g < 16; g++)
			c->sc[16 * s + g] = _mm256_loadu_si256((const __m256i *)sc[g]);
		c->d[s] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
	}
}

/* Q4_K/Q5_K: super-blocks [s0, s0 + ns) of the 8 rows into c. */
INL T2 void pack_k(const enum allm_dtype dt, const struct qb_job *j, const uint8_t *w0, int64_t s0,
		   int ns, struct r8_chunk *c, const uint8_t *next)
{
	const __m256i m4 = _mm256_set1_epi8(15), f = _mm256_set1_epi8(16);
	const size_t qo = dt == ALLM_DTYPE_Q4_K ? offsetof(struct allm_block_q4_K, qs)
						: offsetof(struct allm_block_q5_K, qs);
	for (int s = 0; s < ns; s++) {
		const size_t off = (size_t)(s0 + s) * j->bb;
		UNROLL
		for (int cc = 0; cc < 4; cc++) { /* sub-blocks 2cc (low nibbles), 2cc + 1 (high) */
			if (next) /* a quarter of the next item's share at a time (bursts stall) */
				for (size_t o = 0; o < QB_OUT * j->bb / 4; o += 64)
					_mm_prefetch((const char *)next + off * QB_OUT + cc * QB_OUT * j->bb / 4 + o,
						     _MM_HINT_T1);
			__m256i lo[8], hi[8];
			UNROLL
			for (int r = 0; r < 8; r++) {
				const uint8_t *blk = w0 + (size_t)r * j->rb + off;
				const __m256i z = _mm256_loadu_si256((const __m256i *)(blk + qo + 32 * cc));
				lo[r] = _mm256_and_si256(z, m4);
				hi[r] = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
				if (dt == ALLM_DTYPE_Q5_K) {
					const __m256i hb = _mm256_loadu_si256(
						(const __m256i *)(blk + offsetof(struct allm_block_q5_K, qh)));
					const __m256i b0 = _mm256_set1_epi8((char)(1 << 2 * cc));
					const __m256i b1 = _mm256_set1_epi8((char)(2 << 2 * cc));
					lo[r] = _mm256_or_si256(lo[r], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b0), b0), f));
					hi[r] = _mm256_or_si256(hi[r], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b1), b1), f));
				}
			}
			tr8(lo, c->q[8 * s + 2 * cc]);
			tr8(hi, c->q[8 * s + 2 * cc + 1]);
		}
		int16_t sc[8][16], mn[4][16];
		uint16_t d[8], dm[8];
		for (int r = 0; r < 8; r++) {
			const struct allm_block_q4_K *b = (const struct allm_block_q4_K *)(w0 + (size_t)r * j->rb + off);
			for (int jj = 0; jj < 8; jj++) {
				int scv, mv;
				allm_qb_k_scale_min(b->scales, jj, &scv, &mv);
				sc[jj][2 * r] = sc[jj][2 * r + 1] = (int16_t)scv;
				mn[jj / 2][2 * r + jj % 2] = (int16_t)mv;
			}
			d[r] = allm_le16(b->d);
			dm[r] = allm_le16(b->dmin);
		}
		for (int jj = 0; jj < 8; jj++)
			c->sc[8 * s + jj] = _mm256_loadu_si256((const __m256i *)sc[jj]);
		for (int p = 0; p < 4; p++)
			c->mn[s][p] = _mm256_loadu_si256((const __m256i *)mn[p]);
		c->d[s] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
		c->m[s] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dm));
	}
}

/* 4 activations of a token from p, in every 32-bit lane. */
INL T2 __m256i bc4(const int8_t *p)
{
	return _mm256_set1_epi32((int)rd32((const uint8_t *)p));
}

/* Groups [g0, g0 + 4) or all 8 of one unpacked block against R tokens' xq (32 values
 * each): a[t] += the int16 pairs (|.| <= 16 products of 15 x 127, or 8 of 31 x 127). */
INL T2 void groups16(const int R, const __m256i *q, int g0, int ng, const int8_t *const *xq, __m256i *a)
{
	UNROLL
	for (int g = g0; g < g0 + ng; g++) {
		const __m256i w = _mm256_load_si256(&q[g]);
		UNROLL
		for (int t = 0; t < R; t++)
			a[t] = _mm256_add_epi16(a[t], _mm256_maddubs_epi16(w, bc4(xq[t] + 4 * g)));
	}
}

/* One block's exact integers of R tokens (lane = row): is[t]. */
INL T2 void block_int(const int R, const enum allm_dtype dt, const __m256i *q, const int8_t *const *xq,
		      __m256i *is)
{
	const __m256i ones = _mm256_set1_epi16(1);
	UNROLL
	for (int t = 0; t < R; t++)
		is[t] = _mm256_setzero_si256();
	if (dt == ALLM_DTYPE_Q8_0) { /* |q| x sign-moved x: pairs <= 2 * 128 * 127, to int32 at once */
		UNROLL
		for (int g = 0; g < 8; g++) {
			const __m256i w = _mm256_load_si256(&q[g]), wa = _mm256_abs_epi8(w);
			UNROLL
			for (int t = 0; t < R; t++)
				is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(bc4(xq[t] + 4 * g), w)), ones));
		}
		return;
	}
	const bool five = dt == ALLM_DTYPE_Q5_0 || dt == ALLM_DTYPE_Q5_1 || dt == ALLM_DTYPE_Q5_K;
	for (int h = 0; h < (five ? 2 : 1); h++) {
		__m256i a[R8_TOK];
		UNROLL
		for (int t = 0; t < R; t++)
			a[t] = _mm256_setzero_si256();
		groups16(R, q, five ? 4 * h : 0, five ? 4 : 8, xq, a);
		UNROLL
		for (int t = 0; t < R; t++)
			is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(a[t], ones));
	}
}

/* acc[t] (token t of x) += blocks [0, nbc) of c, which are the row's blocks b0.. */
INL T2 void run32(const int R, const enum allm_dtype dt, const struct r8_chunk *c, int nbc,
		  const struct qb_xrow *x, int64_t b0, __m256 *acc)
{
	for (int b = 0; b < nbc; b++) {
		const int64_t bg = b0 + b;
		const int8_t *xq[R8_TOK];
		__m256i is[R8_TOK];
		UNROLL
		for (int t = 0; t < R; t++)
			xq[t] = x[t].xq + 32 * bg;
		block_int(R, dt, c->q[b], xq, is);
		const __m256 d = c->d[b];
		UNROLL
		for (int t = 0; t < R; t++) {
			if (dt == ALLM_DTYPE_Q4_0) /* (q - 8) x */
				is[t] = _mm256_sub_epi32(is[t], _mm256_set1_epi32(8 * x[t].s[bg]));
			if (dt == ALLM_DTYPE_Q5_0) /* (q - 16) x */
				is[t] = _mm256_sub_epi32(is[t], _mm256_set1_epi32(16 * x[t].s[bg]));
			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[t]), _mm256_mul_ps(d, _mm256_set1_ps(x[t].dx[bg])), acc[t]);
			if (allm_qb_has_min(dt))
				acc[t] = _mm256_fmadd_ps(c->m[b], _mm256_set1_ps(x[t].sx[bg]), acc[t]);
		}
	}
}

/* Q4_K/Q5_K: acc[t] += super-blocks [0, ns) of c, the rows' super-blocks s0.. */
INL T2 void run_k(const int R, const enum allm_dtype dt, const struct r8_chunk *c, int ns,
		  const struct qb_xrow *x, int64_t s0, __m256 *acc)
{
	for (int s = 0; s < ns; s++) {
		const int64_t sg = s0 + s;
		__m256i I[R8_TOK], M[R8_TOK];
		UNROLL
		for (int t = 0; t < R; t++)
			I[t] = _mm256_setzero_si256();
		for (int jj = 0; jj < 8; jj++) { /* I = sum of sc_j x (sub-block j's integer) */
			const int8_t *xq[R8_TOK];
			__m256i is[R8_TOK];
			UNROLL
			for (int t = 0; t < R; t++)
				xq[t] = x[t].xq + 256 * sg + 32 * jj;
			if (dt == ALLM_DTYPE_Q6_K) { /* two groups of 16, each times its int8 scale */
				const __m256i *q = c->q[8 * s + jj];
				UNROLL
				for (int h = 0; h < 2; h++) {
					__m256i a[R8_TOK];
					UNROLL
					for (int t = 0; t < R; t++)
						a[t] = _mm256_setzero_si256();
					UNROLL
					for (int g = 4 * h; g < 4 * h + 4; g++) { /* |q - 32| x sign-moved x: 8 products <= 32 x 127 */
						const __m256i w = _mm256_load_si256(&q[g]), wa = _mm256_abs_epi8(w);
						UNROLL
						for (int t = 0; t < R; t++)
							a[t] = _mm256_add_epi16(a[t], _mm256_maddubs_epi16(wa, _mm256_sign_epi8(bc4(xq[t] + 4 * g), w)));
					}
					const __m256i sc = c->sc[16 * s + 2 * jj + h];
					UNROLL
					for (int t = 0; t < R; t++)
						I[t] = _mm256_add_epi32(I[t], _mm256_madd_epi16(a[t], sc));
				}
				continue;
			}
			/* block_int's int16 pairs, each times sc_j: as exact as sc_j x their sum */
			const __m256i *q = c->q[8 * s + jj], sc = c->sc[8 * s + jj];
			const bool five = dt == ALLM_DTYPE_Q5_K;
			UNROLL
			for (int t = 0; t < R; t++)
				is[t] = _mm256_setzero_si256();
			for (int h = 0; h < (five ? 2 : 1); h++) {
				__m256i a[R8_TOK];
				UNROLL
				for (int t = 0; t < R; t++)
					a[t] = _mm256_setzero_si256();
				groups16(R, q, five ? 4 * h : 0, five ? 4 : 8, xq, a);
				UNROLL
				for (int t = 0; t < R; t++)
					is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(a[t], sc));
			}
			UNROLL
			for (int t = 0; t < R; t++)
				I[t] = _mm256_add_epi32(I[t], is[t]);
		}
		if (dt == ALLM_DTYPE_Q6_K) {
			UNROLL
			for (int t = 0; t < R; t++)
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[t]), _mm256_mul_ps(c->d[s], _mm256_set1_ps(x[t].dx[8 * sg])), acc[t]);
			continue;
		}
		UNROLL
		for (int t = 0; t < R; t++) { /* M = sum of m_j x s_j: pairs of sub-blocks */
			const __m128i sp = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(x[t].s + 8 * sg)),
							   _mm_loadu_si128((const __m128i *)(x[t].s + 8 * sg + 4)));
			M[t] = _mm256_madd_epi16(c->mn[s][0], _mm256_broadcastd_epi32(sp));
			M[t] = _mm256_add_epi32(M[t], _mm256_madd_epi16(c->mn[s][1], _mm256_broadcastd_epi32(_mm_shuffle_epi32(sp, 0x55))));
			M[t] = _mm256_add_epi32(M[t], _mm256_madd_epi16(c->mn[s][2], _mm256_broadcastd_epi32(_mm_shuffle_epi32(sp, 0xaa))));
			M[t] = _mm256_add_epi32(M[t], _mm256_madd_epi16(c->mn[s][3], _mm256_broadcastd_epi32(_mm_shuffle_epi32(sp, 0xff))));
			const __m256 dx = _mm256_set1_ps(x[t].dx[8 * sg]);
			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[t]), _mm256_mul_ps(c->d[s], dx), acc[t]);
			acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), M[t])),
						 _mm256_mul_ps(c->m[s], dx), acc[t]);
		}
	}
}

/* R tokens from t over one chunk: the running sums live in y between chunks (a
 * float stored and loaded back is the same float), the bias added after the last. */
INL T2 void pass(const int R, const enum allm_dtype dt, const struct qb_job *j, const struct qb_mat *mt,
		 int64_t o8, const struct r8_chunk *c, int64_t b0, int nbc, int64_t t)
{
	const bool kf = allm_qb_is_k(dt), first = b0 == 0, last = b0 + nbc == j->nb;
	struct qb_xrow x[R8_TOK];
	__m256 acc[R8_TOK];
	UNROLL
	for (int i = 0; i < R; i++) {
		x[i] = qb_xrow(j->xbuf, j->k, t + i);
		acc[i] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(mt->y + (t + i) * mt->m + o8);
	}
	if (kf)
		run_k(R, dt, c, nbc / 8, x, b0 / 8, acc);
	else
		run32(R, dt, c, nbc, x, b0, acc);
	UNROLL
	for (int i = 0; i < R; i++) {
		if (last && mt->bias)
			acc[i] = _mm256_add_ps(acc[i], _mm256_loadu_ps(mt->bias + o8));
		_mm256_storeu_ps(mt->y + (t + i) * mt->m + o8, acc[i]);
	}
}

INL T2 void item_dt(const enum allm_dtype dt, const struct qb_job *j, const struct qb_mat *mt,
		    int64_t o, int64_t t0, int64_t t1, const uint8_t *next)
{
	struct r8_chunk c __attribute__((aligned(32)));
	const bool kf = allm_qb_is_k(dt);
	for (int h = 0; h < 2; h++) {
		const int64_t o8 = o + 8 * h;
		const uint8_t *w0 = mt->w + (size_t)o8 * j->rb;
		for (int64_t b0 = 0; b0 < j->nb; b0 += R8_CH) {
			const int nbc = (int)ALLM_MIN((int64_t)R8_CH, j->nb - b0);
			const uint8_t *pf = h == 1 ? next : NULL;
			if (dt == ALLM_DTYPE_Q6_K)
				pack_k6(j, w0, b0 / 8, nbc / 8, &c, pf);
			else if (kf)
				pack_k(dt, j, w0, b0 / 8, nbc / 8, &c, pf);
			else
				pack32(dt, j, w0, b0, nbc, &c, pf);
			for (int64_t t = t0; t < t1; t += R8_TOK) {
				switch (ALLM_MIN((int64_t)R8_TOK, t1 - t)) {
				case 1: pass(1, dt, j, mt, o8, &c, b0, nbc, t); break;
				case 2: pass(2, dt, j, mt, o8, &c, b0, nbc, t); break;
				case 3: pass(3, dt, j, mt, o8, &c, b0, nbc, t); break;
				default: pass(4, dt, j, mt, o8, &c, b0, nbc, t); break;
				}
			}
		}
	}
}

/* ALLM_QB_R8=off (qb_r8_off): the per-token items only (to measure one against
 * the other; the bits are the same). */
T2 bool qb_r8_item(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0, int64_t t1,
		   const uint8_t *next)
{
	if (t1 - t0 < QB_R8_MIN_TOK || mt->m - o < QB_OUT)
		return false;
	if (atomic_load_explicit(&qb_r8_off, memory_order_relaxed))
		return false;
	switch (j->dt) {
	case ALLM_DTYPE_Q8_0: item_dt(ALLM_DTYPE_Q8_0, j, mt, o, t0, t1, next); return true;
	case ALLM_DTYPE_Q4_0: item_dt(ALLM_DTYPE_Q4_0, j, mt, o, t0, t1, next); return true;
	case ALLM_DTYPE_Q4_1: item_dt(ALLM_DTYPE_Q4_1, j, mt, o, t0, t1, next); return true;
	case ALLM_DTYPE_Q5_0: item_dt(ALLM_DTYPE_Q5_0, j, mt, o, t0, t1, next); return true;
	case ALLM_DTYPE_Q5_1: item_dt(ALLM_DTYPE_Q5_1, j, mt, o, t0, t1, next); return true;
	case ALLM_DTYPE_Q4_K: item_dt(ALLM_DTYPE_Q4_K, j, mt, o, t0, t1, next); return true;
	case ALLM_DTYPE_Q5_K: item_dt(ALLM_DTYPE_Q5_K, j, mt, o, t0, t1, next); return true;
	case ALLM_DTYPE_Q6_K: item_dt(ALLM_DTYPE_Q6_K, j, mt, o, t0, t1, next); return true;
	default: return false;
	}
}

#endif /* GEMM_X86 */
