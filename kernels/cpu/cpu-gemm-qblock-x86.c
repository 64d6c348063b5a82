/* GGUF block weights (Q8_0, Q4_0, Q4_1) on x86: the activation quantization (AVX2)
 * and the item kernels of the AVX2 family (avx2, avx2-vnni and avx512 levels:
 * vpmaddubsw pairs) and of the AVX512-VNNI family (avx512-vnni, avx512-bf16,
 * amx-bf16 levels, and amx-int8's few-row path: vpdpbusd quads). Both compute the
 * order of cpu-gemm.h, the portable family's bits (cpu-gemm-qblock.c).
 *
 * An item is 16 outputs (W rows) for some tokens. A block's exact integer dot
 * product is wanted per (row, token), and one fma per block on it; so the integers
 * of several rows are computed side by side in the lanes of a few registers and
 * then transposed-added until one lane holds one row's whole block (a lane per row,
 * in a fixed permutation of the rows: the block scales are gathered in that same
 * permutation and y is written through it). The quants are read as the file lays
 * them out: 4-bit blocks' 16 bytes of nibbles go into one 128-bit lane per row, the
 * low nibbles meeting the block's first 16 activations and the high nibbles its
 * last 16 (the byte order the format has, so nothing is shuffled); Q8_0's 32 bytes
 * into a 256-bit half. The scales (an f16 at the block's start, and Q4_1's min
 * after it) come in with one 32-bit gather per block for all 16 rows. */
#include "cpu-gemm-qblock.h"
#include "cpu-gemm-x86.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#ifdef GEMM_X86

#define T2 __attribute__((target("avx2,fma,f16c")))
#define T5V __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* Tokens an AVX512-VNNI item takes at once: their dot products share one unpacking
 * of the block's quants. */
#define QB_VNNI_TOK 4

/* --- activations (every family's bytes: qb_x_prep_scalar's) ------------------------ */

/* The largest |x| of one block of 32 (zeros past k). */
INL T2 float block_amax(const float *src)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 mx = _mm256_setzero_ps();
	for (int i = 0; i < 4; i++)
		mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(src + 8 * i)));
	__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

/* Block b's 32 values, from a zero-padded copy where the block passes k. */
static inline const float *block_src(const float *x, int64_t k, int64_t b, float tail[32])
{
	const float *src = x + b * 32;
	if (b * 32 + 32 <= k)
		return src;
	for (int i = 0; i < 32; i++)
		tail[i] = b * 32 + i < k ? src[i] : 0.0f;
	return tail;
}

T2 void qb_x_prep_avx2(void *dst, const float *x, int64_t k, int64_t grain)
{
	const int64_t nb = allm_qb_blocks(k), per = grain / 32;
	int8_t *xq = dst;
	float *dx = (float *)(xq + 32 * nb), *sx = dx + nb;
	int32_t *s = (int32_t *)(sx + nb);
	int16_t *h = (int16_t *)(s + nb);
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int64_t g = 0; g < nb; g += per) {
		float tail[32], amax = 0.0f;
		for (int64_t b = g; b < g + per && b < nb; b++)
			amax = fmaxf(amax, block_amax(block_src(x, k, b, tail)));
		__m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
		for (int64_t b = g; b < g + per && b < nb; b++) {
			const float *src = block_src(x, k, b, tail);
			__m256i q[4];
			for (int i = 0; i < 4; i++) /* round half to even (MXCSR default) */
				q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + 8 * i), id));
			__m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
			_mm256_storeu_si256((__m256i *)(xq + b * 32), _mm256_permutevar8x32_epi32(q8, order));
			/* the halves' sums: [lo, lo, hi, hi] per 128-bit lane, then [lo, hi] */
			__m256i hs = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
			__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(hs), _mm256_extracti128_si256(hs, 1));
			s4 = _mm_hadd_epi32(s4, s4);
			const int32_t h0 = _mm_cvtsi128_si32(s4), h1 = _mm_extract_epi32(s4, 1);
			dx[b] = amax / 127.0f;
			s[b] = h0 + h1;
			h[2 * b] = (int16_t)h0;
			h[2 * b + 1] = (int16_t)h1;
			sx[b] = dx[b] * (float)s[b];
		}
	}
}

/* The next item's W rows, a block's share of them per block, into L2 (where bb is
 * the format's constant, a fixed, unrolled run of lines). */
INL void prefetch_next(const uint8_t *next, int64_t b, size_t bb)
{
	if (!next)
		return;
	const uint8_t *p = next + (size_t)b * QB_OUT * bb;
	UNROLL
	for (size_t o = 0; o < QB_OUT * bb; o += 64)
		_mm_prefetch((const char *)p + o, _MM_HINT_T1);
}

/* y of one token from the 16 (AVX2: 8) sums in lane order: lane e is row perm[e]. */
static inline void store_rows(const struct qb_mat *mt, int64_t t, int64_t o, int rows,
			      const float *sums, const int8_t *perm, int lanes)
{
	float *y = mt->y + t * mt->m + o;
	for (int e = 0; e < lanes; e++) {
		int r = perm[e];
		if (r < rows)
			y[r] = mt->bias ? sums[e] + mt->bias[o + r] : sums[e];
	}
}

/* --- AVX2: 8 rows a pass, vpmaddubsw ------------------------------------------------ */

/* The lane order of the transposing sums, every 32-value format: 4-bit blocks pair
 * rows (0, 2), (1, 3), (4, 6), (5, 7) in one register (a 128-bit lane each), Q8_0
 * takes its rows in that order too, and both end with lane e = row perm2[e]: the
 * pairs' first rows, then their second. Rows r and r + 2 are the two 128-bit lanes
 * of heads8's registers, so a pair's fifth bits need one shuffle and no loads. */
static const int8_t perm2[8] = { 0, 1, 4, 5, 2, 3, 6, 7 };

/* Per 128-bit lane, a and b's lanes summed in pairs: [a0+a2, b0+b2, a1+a3, b1+b3]. */
INL T2 __m256i pair32(__m256i a, __m256i b)
{
	return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

INL T2 __m256i pair64(__m256i a, __m256i b)
{
	return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

/* The 8 block scales (and Q4_1 mins) of block b: one 32-bit word per row. */
/* How the items fetch the 8 or 16 rows' block scales: one gather, or a load per row
 * (idx: the offsets gidx holds). The same words either way, so the same bits; which
 * is faster is the CPU's affair (Zen 3: the loads, by 10-15 % on Q4_0's L2-resident
 * GEMV; a gather is cheap on Intel cores), so it is measured once per process
 * (qb_tune) rather than named per vendor. */
static int qb_loads8 = -1, qb_loads16 = -1; /* 1: loads, 0: gather; set once */

static inline int32_t ld32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* The scales (f16 low half) and mins (high half) of 8 blocks' first 32-bit words. */
INL T2 void scales_words(const enum allm_dtype dt, __m256i g, __m256 *d, __m256 *m)
{
	const __m256i dd = _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
	*d = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(dd), _mm256_extracti128_si256(dd, 1)));
	if (allm_qb_has_min(dt)) {
		__m256i mm = _mm256_srli_epi32(g, 16);
		*m = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(mm), _mm256_extracti128_si256(mm, 1)));
	}
}

INL T2 void scales8(const enum allm_dtype dt, const bool lds, const uint8_t *blk0, __m256i gidx,
		    const int32_t *idx, __m256 *d, __m256 *m)
{
	const __m256i g = lds ? _mm256_setr_epi32(ld32(blk0 + idx[0]), ld32(blk0 + idx[1]), ld32(blk0 + idx[2]),
						 ld32(blk0 + idx[3]), ld32(blk0 + idx[4]), ld32(blk0 + idx[5]),
						 ld32(blk0 + idx[6]), ld32(blk0 + idx[7]))
			      : _mm256_i32gather_epi32((const int *)blk0, gidx, 1);
	scales_words(dt, g, d, m);
}

/* Q5_0/Q5_1: the fifth bits of the rows whose 8 first block bytes (or just qh) are
 * 64-bit lane q of each 128-bit lane of g, as 16 (0 or 16) per byte, a 128-bit lane
 * per row, in the order of the quants' bytes; at: the offset of the two qh bytes
 * wanted within those 8 (qh + 0: values 0..15, qh + 2: 16..31). */
INL T2 __m256i q5_bits_g(__m256i g, int q, int at)
{
	const int64_t b0 = (int64_t)(8 * q + at) * 0x0101010101010101, b1 = b0 + 0x0101010101010101;
	const __m256i ctl = _mm256_setr_epi64x(b0, b1, b0, b1);
	const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
	__m256i v = _mm256_and_si256(_mm256_shuffle_epi8(g, ctl), bit);
	return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
}

/* The same from two rows' qh at ha, hb: values 0..15 (from = 0) or 16..31 (from = 2). */
INL T2 __m256i q5_bits(const uint8_t *ha, const uint8_t *hb, int from)
{
	int32_t a, b;
	memcpy(&a, ha, 4);
	memcpy(&b, hb, 4);
	return q5_bits_g(_mm256_setr_epi32(a, 0, 0, 0, b, 0, 0, 0), 0, from);
}

/* Where a half's 8 rows are. A full half is uniform: row r at p + r rs, every address
 * base + index * scale from two bases (p, p4 = p + 4 rs) and two strides (rs, 3 rs),
 * so its rows hold 4 registers; as 8 pointers they were reloaded from the stack every
 * block (a tenth of a Q5_0 block's instructions). The last half of a matrix whose m
 * is not a multiple of 16 lists its rows, those past m repeating the last real one. */
struct rows8 {
	const uint8_t *p, *p4;
	size_t rs, rs3;
	const uint8_t *const *w; /* listed rows (uni false) */
};

INL const uint8_t *row_at(const bool uni, const struct rows8 *rw, int r, size_t off)
{
	if (!uni)
		return rw->w[r] + off;
	const uint8_t *b = (r < 4 ? rw->p : rw->p4) + off;
	switch (r & 3) {
	case 0: return b;
	case 1: return b + rw->rs;
	case 2: return b + 2 * rw->rs;
	default: return b + rw->rs3;
	}
}

static inline int64_t ld64(const uint8_t *p)
{
	int64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* The first 8 bytes of block `off` of a uniform half's rows (scale, then the min or
 * the fifth bits, then quants), a 64-bit lane per row: g[0] rows 0, 1 | 2, 3, g[1]
 * rows 4, 5 | 6, 7. Every block is at least 18 bytes. */
INL T2 void heads8(const struct rows8 *rw, size_t off, __m256i g[2])
{
	UNROLL
	for (int h = 0; h < 2; h++)
		g[h] = _mm256_setr_epi64x(ld64(row_at(true, rw, 4 * h, off)), ld64(row_at(true, rw, 4 * h + 1, off)),
					  ld64(row_at(true, rw, 4 * h + 2, off)),
					  ld64(row_at(true, rw, 4 * h + 3, off)));
}

/* The 8 block scales (and mins) in perm2's order from heads8's registers: their
 * rows' first 32-bit words, [0, 1, 4, 5 | 2, 3, 6, 7] by one shuffle. */
INL T2 void scales_heads(const enum allm_dtype dt, const __m256i g[2], __m256 *d, __m256 *m)
{
	scales_words(dt, _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(g[0]), _mm256_castsi256_ps(g[1]), 0x88)),
		     d, m);
}


/* The rows of rw (an item's half), one token: the 8 sums in lane order. */
INL T2 __m256 half_avx2(const enum allm_dtype dt, const bool lds, const bool uni, const struct qb_job *j,
			const struct rows8 *rw, __m256i gidx, const int32_t *idx, struct qb_xrow x,
			const uint8_t *next)
{
	const size_t bb = allm_qb_block_bytes(dt), qo = allm_qb_qs_offset(dt);
	const int8_t *perm = perm2;
	const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < j->nb; b++) {
		const size_t off = (size_t)b * bb;
		prefetch_next(next, b, bb);
		__m256 d, m = _mm256_setzero_ps();
		const bool heads = uni && lds; /* else: scales8's loads or gather */
		__m256i g[2] = { _mm256_setzero_si256(), _mm256_setzero_si256() };
		if (heads) {
			heads8(rw, off, g);
			scales_heads(dt, g, &d, &m);
		} else {
			scales8(dt, lds, row_at(uni, rw, 0, off), gidx, idx, &d, &m);
		}
		__m256i isum;
		if (dt == ALLM_DTYPE_Q8_0) {
			__m256i xv = _mm256_loadu_si256((const __m256i *)(x.xq + b * 32)), p[8];
			UNROLL
			for (int r = 0; r < 8; r++) { /* |q| * sign-moved x: pairs fit int16 */
				__m256i q = _mm256_loadu_si256((const __m256i *)row_at(uni, rw, perm[r], off + qo));
				p[r] = _mm256_madd_epi16(
					_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(xv, q)), ones);
			}
			__m256i u0 = pair64(pair32(p[0], p[1]), pair32(p[2], p[3]));
			__m256i u1 = pair64(pair32(p[4], p[5]), pair32(p[6], p[7]));
			isum = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
						_mm256_permute2x128_si256(u0, u1, 0x31));
		} else {
			__m128i xl = _mm_loadu_si128((const __m128i *)(x.xq + b * 32));
			__m128i xh = _mm_loadu_si128((const __m128i *)(x.xq + b * 32 + 16));
			__m256i xlo = _mm256_broadcastsi128_si256(xl), xhi = _mm256_broadcastsi128_si256(xh), p[4];
			UNROLL
			for (int i = 0; i < 4; i++) {
				const int ri = perm[i]; /* rows ri and ri + 2 */
				const uint8_t *ra = row_at(uni, rw, ri, off), *rb = row_at(uni, rw, ri + 2, off);
				__m256i z = _mm256_inserti128_si256(
					_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(ra + qo))),
					_mm_loadu_si128((const __m128i *)(rb + qo)), 1);
				__m256i lo = _mm256_and_si256(z, m4), hi = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
				if (dt == ALLM_DTYPE_Q5_0 || dt == ALLM_DTYPE_Q5_1) { /* the fifth bits */
					if (heads) {
						lo = _mm256_or_si256(lo, q5_bits_g(g[i / 2], i % 2, (int)qo - 4));
						hi = _mm256_or_si256(hi, q5_bits_g(g[i / 2], i % 2, (int)qo - 2));
					} else {
						lo = _mm256_or_si256(lo, q5_bits(ra + qo - 4, rb + qo - 4, 0));
						hi = _mm256_or_si256(hi, q5_bits(ra + qo - 4, rb + qo - 4, 2));
					}
				}
				/* nibble x int8 pairs: |.| <= 2 * 15 * 127, twice that summed */
				p[i] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo),
									  _mm256_maddubs_epi16(hi, xhi)),
							 ones);
			}
			isum = pair64(pair32(p[0], p[1]), pair32(p[2], p[3]));
			if (dt == ALLM_DTYPE_Q4_0) /* (q - 8) x: take 8 sum(x) back out */
				isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * x.s[b]));
			if (dt == ALLM_DTYPE_Q5_0) /* (q - 16) x */
				isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(16 * x.s[b]));
		}
		acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(x.dx[b])), acc);
		if (allm_qb_has_min(dt))
			acc = _mm256_fmadd_ps(m, _mm256_set1_ps(x.sx[b]), acc);
	}
	return acc;
}

INL T2 void item_avx2_dt(const enum allm_dtype dt, const bool lds, const struct qb_job *j,
			 const struct qb_mat *mt, int64_t o, int64_t t0, int64_t t1, const uint8_t *next)
{
	const int rows = (int)ALLM_MIN((int64_t)QB_OUT, mt->m - o);
	const int8_t *perm = perm2;
	const uint8_t *base = mt->w + (size_t)o * j->rb;
	for (int h = 0; h < 2 && 8 * h < rows; h++) {
		const uint8_t *w[8];
		int32_t idx[8]; /* from row 8 h (< rows), the rows in lane order */
		for (int e = 0; e < 8; e++) { /* rows past m read the last real one, unused */
			w[e] = base + (size_t)ALLM_MIN(8 * h + e, rows - 1) * j->rb;
			idx[e] = (int32_t)((size_t)(ALLM_MIN(8 * h + perm[e], rows - 1) - 8 * h) * j->rb);
		}
		const struct rows8 rw = { w[0], w[0] + 4 * j->rb, j->rb, 3 * j->rb, w };
		const bool uni = 8 * h + 8 <= rows;
		__m256i gidx = _mm256_loadu_si256((const __m256i *)idx);
		int8_t perm_h[8];
		for (int e = 0; e < 8; e++)
			perm_h[e] = (int8_t)(8 * h + perm[e]);
		for (int64_t t = t0; t < t1; t++) {
			float sums[8];
			const uint8_t *pf = t == t0 && h == 1 ? next : NULL;
			struct qb_xrow x = qb_xrow(j->xbuf, j->k, t);
			__m256 s = uni ? half_avx2(dt, lds, true, j, &rw, gidx, idx, x, pf)
				       : half_avx2(dt, lds, false, j, &rw, gidx, idx, x, pf);
			_mm256_storeu_ps(sums, s);
			store_rows(mt, t, o, rows, sums, perm_h, 8);
		}
	}
}

/* --- AVX2, the K formats: 8 rows a pass, a super-block's integer per row ----------- */

/* The 8 rows' integer sums I (lane = row, in order) from their 8 per-row vectors. */
INL T2 __m256i rows8(const __m256i *a)
{
	__m256i u0 = pair64(pair32(a[0], a[1]), pair32(a[2], a[3]));
	__m256i u1 = pair64(pair32(a[4], a[5]), pair32(a[6], a[7]));
	return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* Q4_K/Q5_K: the eight 6-bit scales (bytes 0..7) and mins (8..15) of the 12 packed
 * bytes at p (u0, u1, u2 as 32-bit words; 4 more bytes of the block read, unused),
 * as allm_qb_k_scale_min unpacks them: scales 0-3 u0 & 0x3f.., scales 4-7 the low
 * nibbles of u2 with u0's top 2 bits of each byte above them, mins 0-3 u1 & 0x3f..,
 * mins 4-7 u2's high nibbles with u1's top bits. */
INL T2 __m128i k4_scales_mins(const uint8_t *p)
{
	const __m128i v = _mm_loadu_si128((const __m128i *)p);
	const __m128i m6 = _mm_set1_epi32(0x3f3f3f3f), m4 = _mm_set1_epi32(0x0f0f0f0f), m2 = _mm_set1_epi32(0x03030303);
	const __m128i lo6 = _mm_and_si128(v, m6); /* [scales 0-3, mins 0-3, ..] */
	const __m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(v, 6), m2), 4); /* u0's, u1's */
	const __m128i u2 = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa), _mm_setr_epi32(0, 4, 0, 0)), m4);
	return _mm_unpacklo_epi32(lo6, _mm_or_si128(u2, top)); /* [sc 0-3, sc 4-7, m 0-3, m 4-7] */
}

/* Tokens a K pass takes at once: their integer sums share one unpacking of a row's
 * quants and scales (prefill). */
#define QB_K_TOK 4

/* One row's super-block of Q4_K/Q5_K against R tokens' xq (256 values each): a[t],
 * the integer sum I in 8 lanes (to be added up), and mv[t], M = sum of m_j * s_j in
 * 4 lanes (likewise). */
INL T2 void k4_row(const int R, const enum allm_dtype dt, const uint8_t *blk, const int8_t *const *xq,
		   const __m128i *s16, __m256i *a, __m128i *mv)
{
	const __m256i m4 = _mm256_set1_epi8(15);
	const __m128i sm = k4_scales_mins(blk + offsetof(struct allm_block_q4_K, scales));
	const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
	UNROLL
	for (int t = 0; t < R; t++) {
		mv[t] = _mm_madd_epi16(mins, s16[t]);
		a[t] = _mm256_setzero_si256();
	}
	const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm)); /* 8 int16, twice */
	const uint8_t *qs = blk + (dt == ALLM_DTYPE_Q4_K ? offsetof(struct allm_block_q4_K, qs)
							 : offsetof(struct allm_block_q5_K, qs));
	__m256i hb = _mm256_setzero_si256();
	if (dt == ALLM_DTYPE_Q5_K)
		hb = _mm256_loadu_si256((const __m256i *)(blk + offsetof(struct allm_block_q5_K, qh)));
	UNROLL
	for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles) and 2c + 1 */
		__m256i z = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
		__m256i lo = _mm256_and_si256(z, m4), hi = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
		if (dt == ALLM_DTYPE_Q5_K) {
			const __m256i b0 = _mm256_set1_epi8((char)(1 << 2 * c)), b1 = _mm256_set1_epi8((char)(2 << 2 * c));
			const __m256i f = _mm256_set1_epi8(16);
			lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b0), b0), f));
			hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, b1), b1), f));
		}
		/* the scale of sub-block j as 16 int16: bytes 2j, 2j + 1 of sc */
		const __m256i s0 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 * (4 * c + 1) + 4 * c)));
		const __m256i s1 = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 * (4 * c + 3) + 4 * c + 2)));
		UNROLL
		for (int t = 0; t < R; t++) {
			/* q x pairs: |.| <= 2 * 31 * 127; times a 6-bit scale, twice: < 2^20 */
			__m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(xq[t] + 64 * c)));
			__m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xq[t] + 64 * c + 32)));
			a[t] = _mm256_add_epi32(a[t], _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1)));
		}
	}
}

/* v as it is here: a running sum added to in order (the compiler otherwise
 * re-associates an unrolled row's integer adds into one tree at the end and
 * spills every product to the stack until then). */
INL T2 void keep(__m256i *v)
{
	__asm__("" : "+x"(*v));
}

/* A 32-bit value from memory in all 8 lanes: vpbroadcastd m32, a load-port op (the
 * asm keeps the compiler from forwarding the store into a register shuffle). */
INL T2 __m256i bcast32_mem(const int32_t *p)
{
	__m256i r;
	__asm__("vpbroadcastd %1, %0" : "=x"(r) : "m"(*p));
	return r;
}

/* Decode: two rows' super-blocks of Q4_K/Q5_K (b0, b1) against one token's xq: a0,
 * a1 the integer sums I in 8 lanes each, *mv the M terms m_j s_j in 4 lanes per row
 * (row 0's in the low 128-bit lane). The two rows' scales and mins are unpacked
 * together, a 128-bit lane each, and set aside on the stack as 32-bit pairs (s_j,
 * s_j): each sub-block's scale comes back as one broadcast load (a load port)
 * instead of a vpshufb (the shuffle ports, which the nibbles' shifts need too).
 * Q5_K's fifth bits: qh shifted to bit 4 and masked (bit 2c, 2c + 1 of each byte
 * for sub-blocks 2c, 2c + 1), 3 ops per 32 quants instead of 4. The same exact
 * integers as k4_row. */
INL T2 void k4_rows2(const enum allm_dtype dt, const uint8_t *b0, const uint8_t *b1, const int8_t *xq,
		     __m256i s16, __m256i *a0, __m256i *a1, __m256i *mv)
{
	const size_t os = offsetof(struct allm_block_q4_K, scales);
	const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + os))),
						  _mm_loadu_si128((const __m128i *)(b1 + os)), 1);
	const __m256i m6 = _mm256_set1_epi32(0x3f3f3f3f), m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi32(0x03030303);
	const __m256i lo6 = _mm256_and_si256(v, m6);
	const __m256i top = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(v, 6), m2), 4);
	const __m256i u2 = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0xaa), _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0)),
					    m4);
	const __m256i sm = _mm256_unpacklo_epi32(lo6, _mm256_or_si256(u2, top)); /* [sc 0-7, m 0-7], per row */
	const __m256i zero = _mm256_setzero_si256();
	const __m256i sc = _mm256_unpacklo_epi8(sm, zero); /* 8 int16 per row */
	*mv = _mm256_madd_epi16(_mm256_unpackhi_epi8(sm, zero), s16);
	/* sp[8 (j / 4) + 4 r + j % 4]: row r's sub-block j as (s_j, s_j) */
	int32_t sp[16] __attribute__((aligned(32)));
	_mm256_store_si256((__m256i *)sp, _mm256_unpacklo_epi16(sc, sc));
	_mm256_store_si256((__m256i *)(sp + 8), _mm256_unpackhi_epi16(sc, sc));
	const size_t oq = dt == ALLM_DTYPE_Q4_K ? offsetof(struct allm_block_q4_K, qs) : offsetof(struct allm_block_q5_K, qs);
	const uint8_t *q0 = b0 + oq, *q1 = b1 + oq;
	__m256i h0 = zero, h1 = zero;
	const __m256i f = _mm256_set1_epi8(16);
	if (dt == ALLM_DTYPE_Q5_K) {
		h0 = _mm256_loadu_si256((const __m256i *)(b0 + offsetof(struct allm_block_q5_K, qh)));
		h1 = _mm256_loadu_si256((const __m256i *)(b1 + offsetof(struct allm_block_q5_K, qh)));
	}
	__m256i s0 = zero, s1 = zero;
	UNROLL
	for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles) and 2c + 1 */
		const __m256i x0 = _mm256_loadu_si256((const __m256i *)(xq + 64 * c));
		const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xq + 64 * c + 32));
		UNROLL
		for (int r = 0; r < 2; r++) {
			const __m256i z = _mm256_loadu_si256((const __m256i *)((r ? q1 : q0) + 32 * c));
			__m256i lo = _mm256_and_si256(z, m4), hi = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
			if (dt == ALLM_DTYPE_Q5_K) { /* bit 2c to bit 4, bit 2c + 1 to bit 4 */
				const __m256i hb = r ? h1 : h0;
				const __m256i bl = c < 2 ? _mm256_slli_epi16(hb, 4 - 2 * c) : c == 2 ? hb : _mm256_srli_epi16(hb, 2);
				const __m256i bh = c < 2 ? _mm256_slli_epi16(hb, 3 - 2 * c) : _mm256_srli_epi16(hb, 2 * c - 3);
				lo = _mm256_or_si256(lo, _mm256_and_si256(bl, f));
				hi = _mm256_or_si256(hi, _mm256_and_si256(bh, f));
			}
			const int j = 2 * c, e = 8 * (j / 4) + 4 * r + j % 4;
			const __m256i sl = bcast32_mem(sp + e), sh = bcast32_mem(sp + e + 1);
			/* q x pairs: |.| <= 2 * 31 * 127; times a 6-bit scale, twice: < 2^20 */
			const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), sl),
							   _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), sh));
			if (r) {
				s1 = _mm256_add_epi32(s1, p);
				keep(&s1);
			} else {
				s0 = _mm256_add_epi32(s0, p);
				keep(&s0);
			}
		}
	}
	*a0 = s0;
	*a1 = s1;
}


/* Word c (0-3) of each 128-bit lane of v in all four of the lane's words. vpshufd
 * wants its pattern as an immediate: a switch, which the unrolled callers fold to one
 * instruction and an -O1 build (the sanitizers') still compiles. */
INL T2 __m256i word_bcast(__m256i v, int c)
{
	switch (c) {
	case 0: return _mm256_shuffle_epi32(v, 0x00);
	case 1: return _mm256_shuffle_epi32(v, 0x55);
	case 2: return _mm256_shuffle_epi32(v, 0xaa);
	default: return _mm256_shuffle_epi32(v, 0xff);
	}
}

/* One row's super-block of Q6_K against R tokens: a[t], I in 8 lanes. The quants
 * enter unsigned (q + 32, 0..63: one vpmaddubsw with no sign trick) and the offset
 * comes out once per super-block from each token's sums per 16 (h16[t]): sum_g sc_g
 * (sum (q + 32) x - 32 h_g), the same exact integer. */
INL T2 void k6_row(const int R, const uint8_t *blk, const int8_t *const *xq, const int16_t *const *h16,
		   __m256i *a)
{
	const struct allm_block_q6_K *b = (const struct allm_block_q6_K *)blk;
	const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
	/* the 16 int8 scales as int16 pairs (s_g, s_g) in 32-bit words, the even groups
	 * in the low 128-bit lane and the odd ones in the high: da holds groups 0-7
	 * (word i: 2i low, 2i + 1 high), db groups 8-15. Sub-block j's two groups then
	 * sit at the same word of both lanes: one in-lane vpshufd with an immediate
	 * each (a cross-lane vpermd and its index vector before). Each byte is put in
	 * a word's top half and shifted down arithmetically: sign-extended. */
	const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
	const __m256i sb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b->scales));
	const __m256i da = _mm256_srai_epi16(
		_mm256_shuffle_epi8(sb, _mm256_setr_epi64x(0x0280028000800080, 0x0680068004800480,
							   0x0380038001800180, 0x0780078005800580)),
		8);
	const __m256i db = _mm256_srai_epi16(
		_mm256_shuffle_epi8(sb, _mm256_setr_epi64x(0x0a800a8008800880, 0x0e800e800c800c80,
							   0x0b800b8009800980, 0x0f800f800d800d80)),
		8);
	UNROLL
	for (int t = 0; t < R; t++) /* 32 sum_g sc_g h_g in 8 lanes, taken out first */
		a[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
					_mm256_slli_epi32(_mm256_madd_epi16(v, _mm256_loadu_si256((const __m256i *)h16[t])), 5));
	UNROLL
	for (int h = 0; h < 2; h++) {
		const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
		const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
		const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
		UNROLL
		for (int c = 0; c < 4; c++) { /* sub-block j = 4 h + c: groups 2j, 2j + 1 */
			const __m256i l = c % 2 ? l1 : l0;
			__m256i nib = c < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
			/* bits 2c, 2c + 1 of qh to bits 4-5 (the shifts move whole
			 * 16-bit words; the mask keeps each byte's own bits) */
			__m256i hi2 = c < 2 ? _mm256_slli_epi16(qh, 4 - 2 * c) : c == 2 ? qh : _mm256_srli_epi16(qh, 2);
			__m256i q = _mm256_or_si256(nib, _mm256_and_si256(hi2, m30));
			/* sub-block j = 4 h + c: word c of da (h = 0) or db */
			const __m256i sc = word_bcast(h ? db : da, c);
			UNROLL
			for (int t = 0; t < R; t++) {
				/* (q + 32) x pairs: <= 2 * 63 * 128 */
				__m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(xq[t] + 128 * h + 32 * c)));
				a[t] = _mm256_add_epi32(a[t], _mm256_madd_epi16(p, sc));
				keep(&a[t]);
			}
		}
	}
}

/* Decode: one row of a K format, one token, the super-blocks in order: its sum.
 * A row at a time (its integers reduced in place, the fmas scalar) keeps the
 * working set in registers; 8 rows side by side spilled a third of the
 * instructions. I and M are added up together and converted in the vector unit
 * (no trip through the integer registers). next: this row's share of the next
 * item's rows, prefetched. */
INL T2 float row_k1(const enum allm_dtype dt, const struct qb_job *j, const uint8_t *w,
		    struct qb_xrow x, const uint8_t *next)
{
	const size_t bb = j->bb;
	const __m128 neg_hi = _mm_setr_ps(0.0f, -0.0f, 0.0f, 0.0f);
	__m128 acc = _mm_setzero_ps();
	for (int64_t sb = 0; sb < j->nb / 8; sb++) {
		const uint8_t *blk = w + (size_t)sb * bb;
		const int8_t *xq = x.xq + sb * 256;
		if (next)
			for (size_t o = 0; o < 2 * bb; o += 64)
				_mm_prefetch((const char *)next + (size_t)sb * 2 * bb + o, _MM_HINT_T1);
		const __m128 dx = _mm_broadcast_ss(x.dx + sb * 8);
		__m256i a;
		__m128i mv = _mm_setzero_si128();
		__m128 d;
		if (dt == ALLM_DTYPE_Q6_K) {
			const int16_t *h16 = x.h + sb * 16;
			k6_row(1, blk, &xq, &h16, &a);
			d = _mm_cvtph_ps(_mm_cvtsi32_si128(allm_le16(((const struct allm_block_q6_K *)blk)->d)));
		} else {
			const __m128i s16 = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(x.s + sb * 8)),
							    _mm_loadu_si128((const __m128i *)(x.s + sb * 8 + 4)));
			k4_row(1, dt, blk, &xq, &s16, &a, &mv);
			d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)allm_le32(blk))); /* d, dmin */
		}
		/* [I, M, I, M] exactly, then as floats */
		__m128i t = _mm_hadd_epi32(_mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1)), mv);
		const __m128 f = _mm_cvtepi32_ps(_mm_hadd_epi32(t, t));
		const __m128 sd = _mm_xor_ps(_mm_mul_ps(d, dx), neg_hi); /* d dx, -(dmin dx) */
		acc = _mm_fmadd_ss(f, sd, acc);
		if (dt != ALLM_DTYPE_Q6_K) /* (float)-M (dmin dx): the same product as M (-(dmin dx)) */
			acc = _mm_fmadd_ss(_mm_movehdup_ps(f), _mm_movehdup_ps(sd), acc);
	}
	return _mm_cvtss_f32(acc);
}

/* Decode, two rows side by side (w0, w1), one token: their sums in lanes 0 and 1.
 * Each lane does row_k1's arithmetic (the same fmas in the same order); the two
 * rows share one reduction of their integers, one conversion and the fmas' issue,
 * a third of a row's instructions per super-block alone. next: the pair's share
 * of the next item's rows. */
INL T2 __m128 rows_k2(const enum allm_dtype dt, const struct qb_job *j, const uint8_t *w0,
		      const uint8_t *w1, struct qb_xrow x, const uint8_t *next)
{
	const size_t bb = j->bb;
	const __m128 neg = _mm_set1_ps(-0.0f);
	__m128 acc = _mm_setzero_ps();
	for (int64_t sb = 0; sb < j->nb / 8; sb++) {
		const uint8_t *b0 = w0 + (size_t)sb * bb, *b1 = w1 + (size_t)sb * bb;
		const int8_t *xq = x.xq + sb * 256;
		if (next)
			for (size_t o = 0; o < 4 * bb; o += 64)
				_mm_prefetch((const char *)next + (size_t)sb * 4 * bb + o, _MM_HINT_T1);
		const __m128 dx = _mm_broadcast_ss(x.dx + sb * 8);
		__m256i a0, a1;
		__m128i m0 = _mm_setzero_si128(), m1 = _mm_setzero_si128();
		__m128 d;
		if (dt == ALLM_DTYPE_Q6_K) {
			const size_t od = offsetof(struct allm_block_q6_K, d);
			const int16_t *h16 = x.h + sb * 16;
			k6_row(1, b0, &xq, &h16, &a0);
			k6_row(1, b1, &xq, &h16, &a1);
			d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)(allm_le16(b0 + od) | (uint32_t)allm_le16(b1 + od) << 16)));
		} else {
			const __m128i s16 = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(x.s + sb * 8)),
							    _mm_loadu_si128((const __m128i *)(x.s + sb * 8 + 4)));
			__m256i mv;
			k4_rows2(dt, b0, b1, xq, _mm256_broadcastsi128_si256(s16), &a0, &a1, &mv);
			m0 = _mm256_castsi256_si128(mv);
			m1 = _mm256_extracti128_si256(mv, 1);
			/* [d0, dmin0, d1, dmin1] */
			d = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)(allm_le32(b0) | (uint64_t)allm_le32(b1) << 32)));
		}
		/* [I0, I1, M0, M1] exactly, then as floats */
		const __m128i t = _mm_hadd_epi32(
			_mm_add_epi32(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1)),
			_mm_add_epi32(_mm256_castsi256_si128(a1), _mm256_extracti128_si256(a1, 1)));
		const __m128 f = _mm_cvtepi32_ps(_mm_hadd_epi32(t, _mm_hadd_epi32(m0, m1)));
		const __m128 sd = _mm_mul_ps(d, dx);
		if (dt == ALLM_DTYPE_Q6_K) {
			acc = _mm_fmadd_ps(f, sd, acc);
		} else { /* (float)-M (dmin dx): the same product as M (-(dmin dx)) */
			acc = _mm_fmadd_ps(f, _mm_shuffle_ps(sd, sd, 0x08), acc);
			acc = _mm_fmadd_ps(_mm_movehl_ps(f, f), _mm_xor_ps(_mm_shuffle_ps(sd, sd, 0x0d), neg), acc);
		}
	}
	return acc;
}

/* Decode, four rows (w, w + rb, w + 2 rb, w + 3 rb), one token: their sums in the
 * four lanes. Each lane does row_k1's arithmetic (the same fmas in the same order);
 * the four rows share one reduction of their integers (three 256-bit vphaddd for
 * the I, two for the M), one conversion, one scale product and the fmas' issue: half
 * the per-row cost of rows_k2's. next: the next item's rows at this quad's place
 * (a one-item lead for every quad, spread over the item). */
INL T2 __m128 rows_k4(const enum allm_dtype dt, const struct qb_job *j, const uint8_t *w, size_t rb,
		      struct qb_xrow x, const uint8_t *next)
{
	const size_t bb = j->bb;
	const __m128 neg = _mm_set1_ps(-0.0f);
	const __m256i dperm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	__m128 acc = _mm_setzero_ps();
	for (int64_t sb = 0; sb < j->nb / 8; sb++) {
		const uint8_t *b0 = w + (size_t)sb * bb, *b1 = b0 + rb, *b2 = b1 + rb, *b3 = b2 + rb;
		const int8_t *xq = x.xq + sb * 256;
		if (next)
			for (size_t o = 0; o < 4 * bb; o += 64)
				_mm_prefetch((const char *)next + (size_t)sb * 4 * bb + o, _MM_HINT_T1);
		const __m256 dx = _mm256_broadcast_ss(x.dx + sb * 8);
		__m256i a0, a1, a2, a3;
		__m128i ii;
		if (dt == ALLM_DTYPE_Q6_K) {
			const int16_t *h16 = x.h + sb * 16;
			k6_row(1, b0, &xq, &h16, &a0);
			k6_row(1, b1, &xq, &h16, &a1);
			k6_row(1, b2, &xq, &h16, &a2);
			k6_row(1, b3, &xq, &h16, &a3);
			const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
			ii = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)); /* [I0..I3] */
			const size_t od = offsetof(struct allm_block_q6_K, d);
			const uint64_t dd = allm_le16(b0 + od) | (uint64_t)allm_le16(b1 + od) << 16 |
					    (uint64_t)allm_le16(b2 + od) << 32 | (uint64_t)allm_le16(b3 + od) << 48;
			const __m128 sd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)dd)), _mm256_castps256_ps128(dx));
			acc = _mm_fmadd_ps(_mm_cvtepi32_ps(ii), sd, acc);
		} else {
			const __m128i s16 = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(x.s + sb * 8)),
							    _mm_loadu_si128((const __m128i *)(x.s + sb * 8 + 4)));
			const __m256i s16x2 = _mm256_broadcastsi128_si256(s16);
			__m256i mv01, mv23;
			k4_rows2(dt, b0, b1, xq, s16x2, &a0, &a1, &mv01);
			k4_rows2(dt, b2, b3, xq, s16x2, &a2, &a3, &mv23);
			const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
			ii = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)); /* [I0..I3] */
			/* [r0 r2 r0 r2 | r1 r3 r1 r3], then [M0..M3] */
			const __m256i mw = _mm256_hadd_epi32(mv01, mv23), mw2 = _mm256_hadd_epi32(mw, mw);
			const __m128i mm = _mm_unpacklo_epi32(_mm256_castsi256_si128(mw2), _mm256_extracti128_si256(mw2, 1));
			const __m256 f = _mm256_cvtepi32_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(ii), mm, 1));
			/* [d0 dmin0 .. d3 dmin3] to [d0..d3 | dmin0..dmin3], times dx */
			const __m128i dd = _mm_setr_epi32((int)allm_le32(b0), (int)allm_le32(b1), (int)allm_le32(b2),
							  (int)allm_le32(b3));
			const __m256 sd = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_cvtph_ps(dd), dperm), dx);
			acc = _mm_fmadd_ps(_mm256_castps256_ps128(f), _mm256_castps256_ps128(sd), acc);
			/* (float)-M (dmin dx): the same product as M (-(dmin dx)) */
			acc = _mm_fmadd_ps(_mm256_extractf128_ps(f, 1), _mm_xor_ps(_mm256_extractf128_ps(sd, 1), neg), acc);
		}
	}
	return acc;
}

/* 8 rows' M from their 4-lane vectors mv[0..8), lane = row. */
INL T2 __m256i rows8_m(const __m128i *mv)
{
	__m256i p[4];
	UNROLL
	for (int i = 0; i < 4; i++)
		p[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(mv[2 * i]), mv[2 * i + 1], 1);
	/* pair sums end with lane e = row 2 (e % 4) + e / 4: back to row order */
	return _mm256_permutevar8x32_epi32(pair64(pair32(p[0], p[1]), pair32(p[2], p[3])),
					   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Rows w[0..8) of a K format, R tokens from t: acc[i] the 8 sums of token t + i,
 * lane = row. gidx: the rows' offsets from w[0] (for the scales' gather). */
INL T2 void half_k(const int R, const enum allm_dtype dt, const struct qb_job *j, const uint8_t *const *w,
		   __m256i gidx, int64_t t, const uint8_t *next, __m256 *acc)
{
	const size_t bb = j->bb;
	struct qb_xrow x[QB_K_TOK];
	UNROLL
	for (int i = 0; i < R; i++) {
		x[i] = qb_xrow(j->xbuf, j->k, t + i);
		acc[i] = _mm256_setzero_ps();
	}
	const __m256i lo16 = _mm256_set1_epi32(0xffff);
	for (int64_t sb = 0; sb < j->nb / 8; sb++) {
		const size_t off = (size_t)sb * bb;
		const int8_t *xq[QB_K_TOK];
		const int16_t *h16[QB_K_TOK];
		__m128i s16[QB_K_TOK];
		UNROLL
		for (int i = 0; i < R; i++) {
			xq[i] = x[i].xq + sb * 256;
			h16[i] = x[i].h + sb * 16;
			s16[i] = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(x[i].s + sb * 8)),
						 _mm_loadu_si128((const __m128i *)(x[i].s + sb * 8 + 4)));
		}
		__m256i a[8][QB_K_TOK];
		__m128i mv[QB_K_TOK][8];
		UNROLL
		for (int r = 0; r < 8; r++) {
			const uint8_t *blk = w[r] + off;
			/* the next item's share of this super-block, a row's worth at a time: a
			 * burst of 36 lines stalls the core on its miss buffers (a fifth of
			 * the time, Zen 3) */
			if (next)
				for (size_t o = 0; o < 2 * bb; o += 64)
					_mm_prefetch((const char *)next + (size_t)sb * QB_OUT * bb + (size_t)r * 2 * bb + o,
						     _MM_HINT_T1);
			if (dt == ALLM_DTYPE_Q6_K) {
				k6_row(R, blk, xq, h16, a[r]);
			} else {
				__m128i m[QB_K_TOK];
				k4_row(R, dt, blk, xq, s16, a[r], m);
				UNROLL
				for (int i = 0; i < R; i++)
					mv[i][r] = m[i];
			}
		}
		/* the rows' f16 d (and dmin after it; Q6_K's d ends its block: read from two
		 * bytes before it, the top half) */
		__m256i g = _mm256_i32gather_epi32((const int *)(w[0] + off + (dt == ALLM_DTYPE_Q6_K ? 206 : 0)), gidx, 1);
		__m256i dd = dt == ALLM_DTYPE_Q6_K ? _mm256_srli_epi32(g, 16) : _mm256_and_si256(g, lo16);
		const __m256 d = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(dd), _mm256_extracti128_si256(dd, 1)));
		__m256 dm = _mm256_setzero_ps();
		if (dt != ALLM_DTYPE_Q6_K) {
			__m256i mm = _mm256_srli_epi32(g, 16);
			dm = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(mm), _mm256_extracti128_si256(mm, 1)));
		}
		UNROLL
		for (int i = 0; i < R; i++) {
			__m256i ai[8];
			UNROLL
			for (int r = 0; r < 8; r++)
				ai[r] = a[r][i];
			const __m256 dx = _mm256_set1_ps(x[i].dx[sb * 8]);
			acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows8(ai)), _mm256_mul_ps(d, dx), acc[i]);
			if (dt != ALLM_DTYPE_Q6_K) {
				__m256i msum = _mm256_sub_epi32(_mm256_setzero_si256(), rows8_m(mv[i]));
				acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dm, dx), acc[i]);
			}
		}
	}
}

/* Decode: the item's rows for token t, four at a time (rows_k4; a pair and a single
 * row for the last 1-3). Out of line per format:
 * inlined into the item with the several-token passes, it shared their register
 * allocation (dx and the masks went through the stack every super-block). */
INL T2 void rows_k1(const enum allm_dtype dt, const struct qb_job *j, const struct qb_mat *mt,
		    int64_t o, int64_t t, const uint8_t *next)
{
	const int rows = (int)ALLM_MIN((int64_t)QB_OUT, mt->m - o);
	const uint8_t *base = mt->w + (size_t)o * j->rb;
	const struct qb_xrow x = qb_xrow(j->xbuf, j->k, t);
	float *y = mt->y + t * mt->m + o;
	for (int r = 0; r < rows;) {
		const uint8_t *w = base + (size_t)r * j->rb;
		float v[4];
		int n;
		if (r + 3 < rows) { /* the next item's rows at these rows' place */
			_mm_storeu_ps(v, rows_k4(dt, j, w, j->rb, x, next ? next + (size_t)r * j->rb : NULL));
			n = 4;
		} else if (r + 1 < rows) {
			_mm_storeu_ps(v, rows_k2(dt, j, w, w + j->rb, x, NULL));
			n = 2;
		} else {
			v[0] = row_k1(dt, j, w, x, NULL);
			n = 1;
		}
		for (int i = 0; i < n; i++)
			y[r + i] = mt->bias ? v[i] + mt->bias[o + r + i] : v[i];
		r += n;
	}
}

#define ROWS_K1(name, dt) \
	static __attribute__((noinline)) T2 void name(const struct qb_job *j, const struct qb_mat *mt, \
						      int64_t o, int64_t t, const uint8_t *next) \
	{ \
		rows_k1(dt, j, mt, o, t, next); \
	}
ROWS_K1(rows_k1_q4_k, ALLM_DTYPE_Q4_K)
ROWS_K1(rows_k1_q5_k, ALLM_DTYPE_Q5_K)
ROWS_K1(rows_k1_q6_k, ALLM_DTYPE_Q6_K)

INL T2 void item_k_dt(const enum allm_dtype dt, const struct qb_job *j, const struct qb_mat *mt,
		      int64_t o, int64_t t0, int64_t t1, const uint8_t *next)
{
	const int rows = (int)ALLM_MIN((int64_t)QB_OUT, mt->m - o);
	const uint8_t *base = mt->w + (size_t)o * j->rb;
	if (t1 - t0 == 1) {
		(dt == ALLM_DTYPE_Q4_K ? rows_k1_q4_k : dt == ALLM_DTYPE_Q5_K ? rows_k1_q5_k : rows_k1_q6_k)(
			j, mt, o, t0, next);
		return;
	}
	for (int h = 0; h < 2 && 8 * h < rows; h++) {
		const uint8_t *w[8];
		int8_t perm_h[8];
		int32_t idx[8];
		for (int e = 0; e < 8; e++) { /* rows past m read the last real one, unused */
			w[e] = base + (size_t)ALLM_MIN(8 * h + e, rows - 1) * j->rb;
			idx[e] = (int32_t)(w[e] - w[0]);
			perm_h[e] = (int8_t)(8 * h + e);
		}
		const __m256i gidx = _mm256_loadu_si256((const __m256i *)idx);
		for (int64_t t = t0; t < t1; t += QB_K_TOK) {
			__m256 acc[QB_K_TOK];
			const uint8_t *pf = t == t0 && h == 1 ? next : NULL; /* later tokens find W in cache */
			switch (ALLM_MIN((int64_t)QB_K_TOK, t1 - t)) {
			case 2: half_k(2, dt, j, w, gidx, t, pf, acc); break;
			case 3: half_k(3, dt, j, w, gidx, t, pf, acc); break;
			default: half_k(4, dt, j, w, gidx, t, pf, acc); break;
			}
			for (int i = 0; i < QB_K_TOK && t + i < t1; i++) {
				float sums[8];
				_mm256_storeu_ps(sums, acc[i]);
				store_rows(mt, t + i, o, rows, sums, perm_h, 8);
			}
		}
	}
}

/* --- the scale fetch, measured once (qb_loads8/16) --------------------------------- */

/* A Q4_0 GEMV of 64 x 4096 (147 KB: in L2) for qb_tune: the job, its weights and its
 * token (any values: the time is what counts). */
struct tune_case {
	struct qb_job j;
	uint8_t *w;
	void *xbuf;
	float y[64];
};

static bool tune_case_make(struct tune_case *tc)
{
	enum { M = 64, K = 4096 };
	const size_t rb = allm_qb_row_bytes(ALLM_DTYPE_Q4_0, K), xb = qb_x_row_bytes(K);
	tc->w = aligned_alloc(64, (M * rb + 63) & ~(size_t)63);
	tc->xbuf = aligned_alloc(64, xb);
	float *x = malloc(K * sizeof(float));
	if (!tc->w || !tc->xbuf || !x) {
		free(tc->w), free(tc->xbuf), free(x);
		return false;
	}
	for (size_t i = 0; i < M * rb; i++)
		tc->w[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t b = 0; b < M * rb / 18; b++) /* d = 2^-7 */
		tc->w[18 * b] = 0, tc->w[18 * b + 1] = 0x20;
	for (int i = 0; i < K; i++)
		x[i] = (float)(i % 17) - 8.0f;
	qb_x_prep_avx2(tc->xbuf, x, K, 32);
	free(x);
	tc->j = (struct qb_job){ .dt = ALLM_DTYPE_Q4_0, .n_mats = 1, .xbuf = tc->xbuf, .n = 1, .k = K,
				 .nb = K / 32, .rb = rb, .bb = allm_qb_block_bytes(ALLM_DTYPE_Q4_0) };
	tc->j.mat[0] = (struct qb_mat){ tc->y, tc->w, NULL, M };
	return true;
}

/* ALLM_QB_SCALES=gather|loads (qb_scales_forced): the choice forced (the tests
 * run both); -1 if unset. */
static int tune_forced(void)
{
	return atomic_load(&qb_scales_forced);
}

/* The faster of the two fetches for the AVX2 items: the best of 7 alternating runs
 * of each (a few ms). */
static T2 void tune8(void)
{
	struct tune_case tc;
	if ((qb_loads8 = tune_forced()) >= 0 || !tune_case_make(&tc)) {
		qb_loads8 = qb_loads8 >= 0 ? qb_loads8 : 0;
		return;
	}
	double best[2] = { 1e30, 1e30 };
	for (int rep = 0; rep < 7; rep++)
		for (int v = 0; v < 2; v++) {
			double t0 = allm_now();
			for (int64_t o = 0; o < tc.j.mat[0].m; o += QB_OUT) {
				if (v)
					item_avx2_dt(ALLM_DTYPE_Q4_0, true, &tc.j, &tc.j.mat[0], o, 0, 1, NULL);
				else
					item_avx2_dt(ALLM_DTYPE_Q4_0, false, &tc.j, &tc.j.mat[0], o, 0, 1, NULL);
			}
			best[v] = fmin(best[v], allm_now() - t0);
		}
	qb_loads8 = best[1] < best[0];
	free(tc.w), free(tc.xbuf);
}

static pthread_once_t tune8_once = PTHREAD_ONCE_INIT, tune16_once = PTHREAD_ONCE_INIT;

/* The 32-value formats' items, out of line per format and scale fetch: inlined
 * into one function with every other format's passes they shared its register
 * allocation (row pointers and masks reloaded from the stack every block). */
#define ITEM_AVX2(name, dt) \
	static __attribute__((noinline)) T2 void name(const struct qb_job *j, const struct qb_mat *mt, \
						      int64_t o, int64_t t0, int64_t t1, const uint8_t *next) \
	{ \
		if (qb_loads8) \
			item_avx2_dt(dt, true, j, mt, o, t0, t1, next); \
		else \
			item_avx2_dt(dt, false, j, mt, o, t0, t1, next); \
	}
ITEM_AVX2(item_avx2_q8_0, ALLM_DTYPE_Q8_0)
ITEM_AVX2(item_avx2_q4_0, ALLM_DTYPE_Q4_0)
ITEM_AVX2(item_avx2_q4_1, ALLM_DTYPE_Q4_1)
ITEM_AVX2(item_avx2_q5_0, ALLM_DTYPE_Q5_0)
ITEM_AVX2(item_avx2_q5_1, ALLM_DTYPE_Q5_1)

T2 void qb_item_avx2(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0,
		     int64_t t1, const uint8_t *next)
{
	if (qb_r8_item(j, mt, o, t0, t1, next))
		return;
	pthread_once(&tune8_once, tune8);
	switch (j->dt) {
	case ALLM_DTYPE_Q8_0: item_avx2_q8_0(j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q4_0: item_avx2_q4_0(j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q4_1: item_avx2_q4_1(j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q5_0: item_avx2_q5_0(j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q5_1: item_avx2_q5_1(j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q4_K: item_k_dt(ALLM_DTYPE_Q4_K, j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q5_K: item_k_dt(ALLM_DTYPE_Q5_K, j, mt, o, t0, t1, next); break;
	default: item_k_dt(ALLM_DTYPE_Q6_K, j, mt, o, t0, t1, next); break;
	}
}

/* --- AVX512-VNNI: 16 rows, vpdpbusd -------------------------------------------------- */

/* Lane orders: 4-bit blocks put rows 4i..4i+3 in register i (a 128-bit lane each)
 * and end with lane e = row 4 (e % 4) + e / 4; Q8_0 puts rows 2i, 2i + 1 in register
 * i (a 256-bit half each) and ends with lane e = row 8 (L / 2) + L % 2 + 2 (e % 4),
 * L = e / 4. */
static const int8_t perm5_q4[16] = { 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15 };
static const int8_t perm5_q8[16] = { 0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15 };

INL T5V __m512i pair32_5(__m512i a, __m512i b)
{
	return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}

INL T5V __m512i pair64_5(__m512i a, __m512i b)
{
	return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

/* 16 rows' scales (and mins) of one block, gathered in lane order. */
INL T5V void scales16(const enum allm_dtype dt, const bool lds, const uint8_t *blk0, __m512i gidx,
		      const int32_t *idx, __m512 *d, __m512 *m)
{
	__m512i g = lds ? _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_setr_epi32(
						     ld32(blk0 + idx[0]), ld32(blk0 + idx[1]), ld32(blk0 + idx[2]),
						     ld32(blk0 + idx[3]), ld32(blk0 + idx[4]), ld32(blk0 + idx[5]),
						     ld32(blk0 + idx[6]), ld32(blk0 + idx[7]))),
					     _mm256_setr_epi32(ld32(blk0 + idx[8]), ld32(blk0 + idx[9]),
							       ld32(blk0 + idx[10]), ld32(blk0 + idx[11]),
							       ld32(blk0 + idx[12]), ld32(blk0 + idx[13]),
							       ld32(blk0 + idx[14]), ld32(blk0 + idx[15])),
					     1)
			: _mm512_i32gather_epi32(gidx, blk0, 1);
	*d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
	if (dt == ALLM_DTYPE_Q4_1)
		*m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
}

/* R tokens from t, 16 rows w[0..16): acc[i] += the tokens' blocks (cpu-gemm.h). */
INL T5V void run_vnni(const int R, const enum allm_dtype dt, const bool lds, const struct qb_job *j,
		      const uint8_t *const *w, __m512i gidx, const int32_t *idx, int64_t t,
		      const uint8_t *next, __m512 acc[QB_VNNI_TOK])
{
	const size_t bb = j->bb, qo = allm_qb_qs_offset(dt);
	const __m512i m4 = _mm512_set1_epi8(15), flip = _mm512_set1_epi8((char)0x80);
	struct qb_xrow x[QB_VNNI_TOK];
	UNROLL
	for (int i = 0; i < R; i++) {
		x[i] = qb_xrow(j->xbuf, j->k, t + i);
		acc[i] = _mm512_setzero_ps();
	}
	for (int64_t b = 0; b < j->nb; b++) {
		const size_t off = (size_t)b * bb;
		prefetch_next(next, b, bb);
		__m512 d, m = _mm512_setzero_ps();
		scales16(dt, lds, w[0] + off, gidx, idx, &d, &m);
		if (dt == ALLM_DTYPE_Q8_0) {
			__m512i z[8];
			UNROLL
			for (int i = 0; i < 8; i++) /* as unsigned: q + 128 */
				z[i] = _mm512_xor_si512(
					_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
								   (const __m256i *)(w[2 * i] + off + qo))),
							   _mm256_loadu_si256((const __m256i *)(w[2 * i + 1] + off + qo)), 1),
					flip);
			UNROLL
			for (int tt = 0; tt < R; tt++) {
				__m512i xb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[tt].xq + b * 32)));
				__m512i v[8];
				UNROLL
				for (int i = 0; i < 8; i++)
					v[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z[i], xb);
				__m512i u0 = pair64_5(pair32_5(v[0], v[1]), pair32_5(v[2], v[3]));
				__m512i u1 = pair64_5(pair32_5(v[4], v[5]), pair32_5(v[6], v[7]));
				__m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(u0, u1, 0x88),
							     _mm512_shuffle_i32x4(u0, u1, 0xdd));
				s = _mm512_sub_epi32(s, _mm512_set1_epi32(128 * x[tt].s[b])); /* the + 128 */
				acc[tt] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
							  _mm512_mul_ps(d, _mm512_set1_ps(x[tt].dx[b])), acc[tt]);
			}
		} else {
			__m512i lo[4], hi[4];
			UNROLL
			for (int i = 0; i < 4; i++) {
				__m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w[4 * i] + off + qo)));
				z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(w[4 * i + 1] + off + qo)), 1);
				z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(w[4 * i + 2] + off + qo)), 2);
				z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(w[4 * i + 3] + off + qo)), 3);
				lo[i] = _mm512_and_si512(z, m4);
				hi[i] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
			}
			UNROLL
			for (int tt = 0; tt < R; tt++) {
				__m512i xlo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(x[tt].xq + b * 32)));
				__m512i xhi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(x[tt].xq + b * 32 + 16)));
				__m512i v[4];
				UNROLL
				for (int i = 0; i < 4; i++)
					v[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[i], xlo),
								   hi[i], xhi);
				__m512i s = pair64_5(pair32_5(v[0], v[1]), pair32_5(v[2], v[3]));
				if (dt == ALLM_DTYPE_Q4_0) /* (q - 8) x: take 8 sum(x) back out */
					s = _mm512_sub_epi32(s, _mm512_set1_epi32(8 * x[tt].s[b]));
				acc[tt] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
							  _mm512_mul_ps(d, _mm512_set1_ps(x[tt].dx[b])), acc[tt]);
				if (dt == ALLM_DTYPE_Q4_1)
					acc[tt] = _mm512_fmadd_ps(m, _mm512_set1_ps(x[tt].sx[b]), acc[tt]);
			}
		}
	}
}

INL T5V void item_vnni_dt(const enum allm_dtype dt, const struct qb_job *j, const struct qb_mat *mt,
			  int64_t o, int64_t t0, int64_t t1, const uint8_t *next)
{
	const int rows = (int)ALLM_MIN((int64_t)QB_OUT, mt->m - o);
	const int8_t *perm = dt == ALLM_DTYPE_Q8_0 ? perm5_q8 : perm5_q4;
	const uint8_t *w[QB_OUT];
	int32_t idx[QB_OUT];
	for (int r = 0; r < QB_OUT; r++) { /* rows past m read the last real one, unused */
		w[r] = mt->w + (size_t)(o + ALLM_MIN(r, rows - 1)) * j->rb;
		idx[r] = (int32_t)((size_t)ALLM_MIN(perm[r], rows - 1) * j->rb);
	}
	const __m512i gidx = _mm512_loadu_si512(idx);
	const bool lds = qb_loads16 == 1;
	for (int64_t t = t0; t < t1; t += QB_VNNI_TOK) {
		__m512 acc[QB_VNNI_TOK];
		const uint8_t *pf = t == t0 ? next : NULL; /* later groups find W in cache */
		switch (ALLM_MIN((int64_t)QB_VNNI_TOK, t1 - t)) {
		case 1: run_vnni(1, dt, lds, j, w, gidx, idx, t, pf, acc); break;
		case 2: run_vnni(2, dt, lds, j, w, gidx, idx, t, pf, acc); break;
		case 3: run_vnni(3, dt, lds, j, w, gidx, idx, t, pf, acc); break;
		default: run_vnni(4, dt, lds, j, w, gidx, idx, t, pf, acc); break;
		}
		for (int i = 0; i < QB_VNNI_TOK && t + i < t1; i++) {
			float sums[QB_OUT];
			_mm512_storeu_ps(sums, acc[i]);
			store_rows(mt, t + i, o, rows, sums, perm, QB_OUT);
		}
	}
}

/* The same choice for the AVX512-VNNI items (a 16-element gather). */
static T5V void tune16(void)
{
	struct tune_case tc;
	if ((qb_loads16 = tune_forced()) >= 0 || !tune_case_make(&tc)) {
		qb_loads16 = qb_loads16 >= 0 ? qb_loads16 : 0;
		return;
	}
	double best[2] = { 1e30, 1e30 };
	for (int rep = 0; rep < 7; rep++)
		for (int v = 0; v < 2; v++) {
			qb_loads16 = v; /* read by item_vnni_dt: nobody else runs until this returns */
			double t0 = allm_now();
			for (int64_t o = 0; o < tc.j.mat[0].m; o += QB_OUT)
				item_vnni_dt(ALLM_DTYPE_Q4_0, &tc.j, &tc.j.mat[0], o, 0, 1, NULL);
			best[v] = fmin(best[v], allm_now() - t0);
		}
	qb_loads16 = best[1] < best[0];
	free(tc.w), free(tc.xbuf);
}

T5V void qb_item_vnni(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0,
		      int64_t t1, const uint8_t *next)
{
	pthread_once(&tune16_once, tune16);
	switch (j->dt) {
	case ALLM_DTYPE_Q8_0: item_vnni_dt(ALLM_DTYPE_Q8_0, j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q4_0: item_vnni_dt(ALLM_DTYPE_Q4_0, j, mt, o, t0, t1, next); break;
	case ALLM_DTYPE_Q4_1: item_vnni_dt(ALLM_DTYPE_Q4_1, j, mt, o, t0, t1, next); break;
	/* Q5_0, Q5_1 and the K formats: the AVX2 items, the same code as every level */
	default: qb_item_avx2(j, mt, o, t0, t1, next); break;
	}
}

const struct qb_impl qb_impl_avx2 = { .x_prep = qb_x_prep_avx2, .item = qb_item_avx2 };
const struct qb_impl qb_impl_avx512_vnni = { .x_prep = qb_x_prep_avx2, .item = qb_item_vnni };

/* The gemm_kern entries the levels point at (QB_KERN_TABLE's order). */
QB_KERN_TABLE(, gemm_qb_avx2, avx2, qb_impl_avx2)
QB_KERN_TABLE(, gemm_qb_vnni, vnni, qb_impl_avx512_vnni)
QB_KERN_TABLE(, gemm_qb_amx, amx, qb_impl_amx)

#endif /* GEMM_X86 */
