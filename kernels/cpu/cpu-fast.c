/* The CPU fast path: a thread pool, a blocked SIMD GEMM and parallel attention.
 *
 * Batch invariance (DESIGN §6) is the constraint everything here is built around:
 * the bits of output row i must not depend on how many rows share the call. OpenBLAS
 * 0.3.21 fails that (sgemm rows differ between n = 1, 7, 33... and its n = 1 path
 * differs from sgemv), so the GEMM is our own, and it does exactly the reference's
 * arithmetic: per output element one sequential chain over k,
 *     acc = 0; for p in 0..k-1: acc = acc + x[p] * w[p] (mul, then add: no FMA);
 *     acc = acc + bias
 * SIMD runs across output columns (8 columns per ymm lane group), never across k, so
 * neither the SIMD width, nor the register blocking over rows, nor the cache blocking
 * over k (a partial sum is stored to y and reloaded, which is exact), nor the thread
 * split can change a single rounding. The result is bit-identical to cpu_ref_gemm on
 * every path, AVX2 or portable, whatever n and the thread count.
 *
 * Why no FMA: a fused multiply-add rounds once where the reference rounds twice, so
 * fast and reference would differ; and on the Zen 4 machines we run on, mul and add
 * issue on separate pipes, so mul+add costs no throughput (the add's 3-cycle latency
 * is hidden by 12 independent accumulators).
 *
 * Layout of the GEMM: W (HF [out, in], f32/f16/bf16) is packed per (column tile,
 * k chunk) into f32 panels of GEMM_NR columns, k-major ([kc][16]), converting f16/bf16
 * on the way; a GEMM_MR x GEMM_NR micro-kernel then broadcasts one x element per row
 * and multiplies it into two ymm of W. Threads take whole (column tile, row group)
 * items. Calls of at most GEMV_MAX_ROWS rows (decode) skip the packing: W is read
 * once anyway, so 8x8 blocks are transposed in registers and used at once.
 *
 * The portable engine writes `acc += x * w` like the reference, so it matches it
 * under the same compiler flags (ISO C mode: no FMA contraction). */
#include "cpu-backend.h"
#include "cpu-threads.h"

#include <errno.h>
#include <stdatomic.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_AVX2 1
#endif

#define GEMM_MR 6 /* rows per micro-tile */
#define GEMM_NR 16 /* columns per micro-tile = one packed panel (two ymm) */
#define GEMM_KC 256 /* k chunk: a packed panel (16 KiB) and 6 x rows stay in L1/L2 */
#define GEMM_NC 128 /* columns per work item: the packed tile (128 KiB) stays in L2 */
#define GEMM_FEW_ROWS 24 /* up to this many rows, k chunks of 2 * GEMM_KC */
#define GEMM_INLINE_MACS (1 << 17) /* smaller calls run on the calling thread only */

/* --- weight loads, as the reference does them --------------------------------- */

static inline float wval(const void *w, enum allm_dtype dt, size_t i)
{
	switch (dt) {
	case ALLM_DTYPE_F16: return allm_f16_to_f32(((const uint16_t *)w)[i]);
	case ALLM_DTYPE_BF16: return allm_bf16_to_f32(((const uint16_t *)w)[i]);
	default: return ((const float *)w)[i];
	}
}

/* One GEMM call, shared by all threads. */
struct gemm_job {
	float *y; /* (n, m) */
	const float *x; /* (n, k) */
	const void *w; /* (m, k) in dt */
	const void *bias; /* (m) in dt, or NULL */
	enum allm_dtype dt;
	int64_t n, k, m;
	int64_t nc; /* columns per item (multiple of GEMM_NR) */
	int64_t kc; /* k chunk */
	int64_t mc; /* rows per item (multiple of GEMM_MR) */
	int64_t n_col_tiles, n_row_groups;
	struct cpu_pool *pool;
	_Atomic int err; /* first failure of any thread */
};

/* Fills 16 floats with bias[c0 .. c0 + valid), zero beyond. */
static void bias_tile(float *dst, const void *bias, enum allm_dtype dt, int64_t c0, int valid)
{
	for (int c = 0; c < GEMM_NR; c++)
		dst[c] = c < valid ? wval(bias, dt, (size_t)(c0 + c)) : 0.0f;
}

/* Scalar packing of one panel: dst[kk][c] = W[c0 + c][p0 + kk] for kk in [kk0, kc),
 * zero for columns past `valid`. */
static void pack_panel_scalar(float *dst, const void *w, enum allm_dtype dt, int64_t k,
			      int64_t c0, int valid, int64_t p0, int64_t kk0, int64_t kc)
{
	for (int64_t kk = kk0; kk < kc; kk++)
		for (int c = 0; c < GEMM_NR; c++)
			dst[kk * GEMM_NR + c] =
				c < valid ? wval(w, dt, (size_t)(c0 + c) * k + p0 + kk) : 0.0f;
}

/* --- portable path ------------------------------------------------------------- */

/* c[r][0..16) (+)= sum over kk of x[r][kk] * pw[kk][..], in k order, then + bias. */
static void kern_portable(int rows, int64_t kc, const float *x, int64_t ldx, const float *pw,
			  float *c, int64_t ldc, bool first, const float *bias16)
{
	float acc[GEMM_MR][GEMM_NR];
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < GEMM_NR; j++)
			acc[r][j] = first ? 0.0f : c[r * ldc + j];
	for (int64_t kk = 0; kk < kc; kk++)
		for (int r = 0; r < rows; r++) {
			float xv = x[r * ldx + kk];
			for (int j = 0; j < GEMM_NR; j++)
				acc[r][j] += xv * pw[kk * GEMM_NR + j];
		}
	for (int r = 0; r < rows; r++)
		for (int j = 0; j < GEMM_NR; j++)
			c[r * ldc + j] = bias16 ? acc[r][j] + bias16[j] : acc[r][j];
}

static void pack_portable(float *dst, const void *w, enum allm_dtype dt, int64_t k, int64_t m,
			  int64_t j0, int64_t ncols, int64_t p0, int64_t kc)
{
	for (int64_t q = 0; q * GEMM_NR < ncols; q++) {
		int64_t c0 = j0 + q * GEMM_NR;
		int valid = (int)ALLM_MIN((int64_t)GEMM_NR, m - c0);
		pack_panel_scalar(dst + q * kc * GEMM_NR, w, dt, k, c0, valid, p0, 0, kc);
	}
}

/* --- AVX2 path ------------------------------------------------------------------- */
#ifdef HAVE_X86_AVX2
#include <cpuid.h>
#endif
#ifdef HAVE_X86_AVX2
/* No "fma" in the target on purpose: the compiler must not fuse mul and add. */
#define AVX2_FN __attribute__((target("avx2,f16c")))

/* 8 consecutive weights from row `row` at column `p`, as f32. */
static inline AVX2_FN __m256 load8_avx2(const void *w, enum allm_dtype dt, size_t at)
{
	if (dt == ALLM_DTYPE_F32)
		return _mm256_loadu_ps((const float *)w + at);
	__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + at));
	if (dt == ALLM_DTYPE_F16)
		return _mm256_cvtph_ps(h); /* exact, as allm_f16_to_f32 */
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Transposes 8 rows of 8 (r[i][j] -> r[j][i]). */
static inline AVX2_FN void transpose8_avx2(__m256 r[8])
{
	__m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
	__m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
	__m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
	__m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
	__m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
	__m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
	__m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
	__m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
	r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
	r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
	r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
	r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
	r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
	r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
	r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
	r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

static AVX2_FN void pack_avx2(float *dst, const void *w, enum allm_dtype dt, int64_t k,
			      int64_t m, int64_t j0, int64_t ncols, int64_t p0, int64_t kc)
{
	for (int64_t q = 0; q * GEMM_NR < ncols; q++) {
		int64_t c0 = j0 + q * GEMM_NR;
		float *pd = dst + q * kc * GEMM_NR;
		int valid = (int)ALLM_MIN((int64_t)GEMM_NR, m - c0);
		if (valid < GEMM_NR) { /* the last, partial panel of W */
			pack_panel_scalar(pd, w, dt, k, c0, valid, p0, 0, kc);
			continue;
		}
		int64_t kk = 0;
		for (; kk + 8 <= kc; kk += 8)
			for (int h = 0; h < 2; h++) {
				__m256 r[8];
#pragma GCC unroll 8
				for (int i = 0; i < 8; i++)
					r[i] = load8_avx2(w, dt, (size_t)(c0 + h * 8 + i) * k + p0 + kk);
				transpose8_avx2(r);
				for (int i = 0; i < 8; i++)
					_mm256_store_ps(pd + (kk + i) * GEMM_NR + h * 8, r[i]);
			}
		pack_panel_scalar(pd, w, dt, k, c0, GEMM_NR, p0, kk, kc);
	}
}

/* Few rows (decode): W is read once, so packing it costs more than it saves.
 * Transposes 8 columns x 8 k in registers and multiplies them in at once; the
 * arithmetic per element is the same chain as the packed kernel's. Columns
 * [c0, c0 + 16) of rows [0, rows) of y, all of k; rows <= GEMV_MAX_ROWS. */
static inline __attribute__((always_inline)) AVX2_FN void
gemv_avx2_rows(const int rows, const enum allm_dtype dt, const float *x, int64_t k,
	       const void *w, int64_t c0, float *y, int64_t m, const float *bias16)
{
	__m256 acc[4][2];
#pragma GCC unroll 4
	for (int r = 0; r < rows; r++)
		acc[r][0] = acc[r][1] = _mm256_setzero_ps();
	int64_t kk = 0;
	for (; kk + 8 <= k; kk += 8) {
		for (int h = 0; h < 2; h++) {
			__m256 v[8];
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++)
				v[i] = load8_avx2(w, dt, (size_t)(c0 + h * 8 + i) * k + kk);
			transpose8_avx2(v);
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++)
#pragma GCC unroll 4
				for (int r = 0; r < rows; r++) {
					__m256 xb = _mm256_broadcast_ss(x + r * k + kk + i);
					acc[r][h] = _mm256_add_ps(acc[r][h], _mm256_mul_ps(xb, v[i]));
				}
		}
	}
	for (; kk < k; kk++) { /* k tail, same chain */
		float col[GEMM_NR];
		for (int c = 0; c < GEMM_NR; c++)
			col[c] = wval(w, dt, (size_t)(c0 + c) * k + kk);
		__m256 v0 = _mm256_loadu_ps(col), v1 = _mm256_loadu_ps(col + 8);
		for (int r = 0; r < rows; r++) {
			__m256 xb = _mm256_broadcast_ss(x + r * k + kk);
			acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_mul_ps(xb, v0));
			acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_mul_ps(xb, v1));
		}
	}
	for (int r = 0; r < rows; r++) {
		if (bias16) {
			acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_loadu_ps(bias16));
			acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_loadu_ps(bias16 + 8));
		}
		_mm256_storeu_ps(y + r * m + c0, acc[r][0]);
		_mm256_storeu_ps(y + r * m + c0 + 8, acc[r][1]);
	}
}

static AVX2_FN void gemv_avx2(int rows, const float *x, int64_t k, const void *w,
			      enum allm_dtype dt, int64_t c0, float *y, int64_t m,
			      const float *bias16)
{
#define GEMV_CASE(R, DT)                                                   \
	if (rows == R && dt == DT) {                                       \
		gemv_avx2_rows(R, DT, x, k, w, c0, y, m, bias16);          \
		return;                                                    \
	}
	GEMV_CASE(1, ALLM_DTYPE_F32)
	GEMV_CASE(2, ALLM_DTYPE_F32)
	GEMV_CASE(1, ALLM_DTYPE_F16)
	GEMV_CASE(2, ALLM_DTYPE_F16)
	GEMV_CASE(1, ALLM_DTYPE_BF16)
	GEMV_CASE(2, ALLM_DTYPE_BF16)
	GEMV_CASE(3, ALLM_DTYPE_F32)
	GEMV_CASE(4, ALLM_DTYPE_F32)
	GEMV_CASE(3, ALLM_DTYPE_F16)
	GEMV_CASE(4, ALLM_DTYPE_F16)
	GEMV_CASE(3, ALLM_DTYPE_BF16)
	GEMV_CASE(4, ALLM_DTYPE_BF16)
#undef GEMV_CASE
}

/* The micro-kernel: ROWS x 16 accumulators in registers. ROWS is a constant in
 * every instantiation below, so the row loops unroll and acc stays in ymm. */
static inline __attribute__((always_inline)) AVX2_FN void
kern_avx2_rows(const int rows, int64_t kc, const float *x, int64_t ldx, const float *pw,
	       float *c, int64_t ldc, bool first, const float *bias16)
{
	__m256 a0[GEMM_MR], a1[GEMM_MR];
#pragma GCC unroll 6
	for (int r = 0; r < rows; r++) {
		a0[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + r * ldc);
		a1[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + r * ldc + 8);
	}
	for (int64_t kk = 0; kk < kc; kk++) {
		__m256 w0 = _mm256_load_ps(pw + kk * GEMM_NR);
		__m256 w1 = _mm256_load_ps(pw + kk * GEMM_NR + 8);
#pragma GCC unroll 6
		for (int r = 0; r < rows; r++) {
			__m256 xb = _mm256_broadcast_ss(x + r * ldx + kk);
			a0[r] = _mm256_add_ps(a0[r], _mm256_mul_ps(xb, w0));
			a1[r] = _mm256_add_ps(a1[r], _mm256_mul_ps(xb, w1));
		}
	}
	if (bias16) {
		__m256 b0 = _mm256_loadu_ps(bias16), b1 = _mm256_loadu_ps(bias16 + 8);
#pragma GCC unroll 6
		for (int r = 0; r < rows; r++) {
			a0[r] = _mm256_add_ps(a0[r], b0);
			a1[r] = _mm256_add_ps(a1[r], b1);
		}
	}
#pragma GCC unroll 6
	for (int r = 0; r < rows; r++) {
		_mm256_storeu_ps(c + r * ldc, a0[r]);
		_mm256_storeu_ps(c + r * ldc + 8, a1[r]);
	}
}

static AVX2_FN void kern_avx2(int rows, int64_t kc, const float *x, int64_t ldx,
			      const float *pw, float *c, int64_t ldc, bool first,
			      const float *bias16)
{
	switch (rows) {
	case 6: kern_avx2_rows(6, kc, x, ldx, pw, c, ldc, first, bias16); break;
	case 5: kern_avx2_rows(5, kc, x, ldx, pw, c, ldc, first, bias16); break;
	case 4: kern_avx2_rows(4, kc, x, ldx, pw, c, ldc, first, bias16); break;
	case 3: kern_avx2_rows(3, kc, x, ldx, pw, c, ldc, first, bias16); break;
	case 2: kern_avx2_rows(2, kc, x, ldx, pw, c, ldc, first, bias16); break;
	default: kern_avx2_rows(1, kc, x, ldx, pw, c, ldc, first, bias16); break;
	}
}
#endif /* HAVE_X86_AVX2 */

/* --- engine selection, once per process ---------------------------------------- */

struct gemm_engine {
	const char *name;
	void (*pack)(float *dst, const void *w, enum allm_dtype dt, int64_t k, int64_t m,
		     int64_t j0, int64_t ncols, int64_t p0, int64_t kc);
	void (*kern)(int rows, int64_t kc, const float *x, int64_t ldx, const float *pw,
		     float *c, int64_t ldc, bool first, const float *bias16);
	/* Optional: full 16-column panels for n <= GEMV_MAX_ROWS, unpacked W. */
	void (*gemv)(int rows, const float *x, int64_t k, const void *w, enum allm_dtype dt,
		     int64_t c0, float *y, int64_t m, const float *bias16);
};

#define GEMV_MAX_ROWS 4

static const struct gemm_engine engine_portable = { "portable", pack_portable, kern_portable,
						    NULL };
#ifdef HAVE_X86_AVX2
static const struct gemm_engine engine_avx2 = { "avx2", pack_avx2, kern_avx2, gemv_avx2 };
#endif

/* Both engines give the same bits, so the choice could even change at run time;
 * it is still made once, so a process never mixes them. */
static const struct gemm_engine *gemm_engine(void)
{
	static const struct gemm_engine *_Atomic chosen;
	const struct gemm_engine *e = atomic_load_explicit(&chosen, memory_order_acquire);
	if (e)
		return e;
	e = &engine_portable;
#ifdef HAVE_X86_AVX2
	/* F16C through cpuid: clang 14's __builtin_cpu_supports has no "f16c" */
	unsigned a, b, c, dx;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &dx) && (c & bit_F16C))
		e = &engine_avx2;
#endif
	atomic_store_explicit(&chosen, e, memory_order_release);
	return e;
}

/* --- GEMM driver ------------------------------------------------------------------ */

/* One item: rows [r0, r1) x columns [j0, j0 + ncols) of y, all of k. */
static void gemm_item(struct gemm_job *g, const struct gemm_engine *e, float *pack,
		     int64_t r0, int64_t r1, int64_t j0, int64_t ncols)
{
	const int64_t k = g->k, m = g->m;
	float tile[GEMM_MR * GEMM_NR]; /* a partial column panel's y */
	float b16[GEMM_NR];

	for (int64_t p0 = 0; p0 < k; p0 += g->kc) {
		int64_t kc = ALLM_MIN(g->kc, k - p0);
		bool first = p0 == 0, last = p0 + kc == k;
		e->pack(pack, g->w, g->dt, k, m, j0, ncols, p0, kc);
		for (int64_t q = 0; q * GEMM_NR < ncols; q++) {
			int64_t c0 = j0 + q * GEMM_NR;
			int valid = (int)ALLM_MIN((int64_t)GEMM_NR, m - c0);
			const float *pw = pack + q * kc * GEMM_NR;
			const float *bias16 = NULL;
			if (last && g->bias) {
				bias_tile(b16, g->bias, g->dt, c0, valid);
				bias16 = b16;
			}
			for (int64_t i0 = r0; i0 < r1; i0 += GEMM_MR) {
				int rows = (int)ALLM_MIN((int64_t)GEMM_MR, r1 - i0);
				const float *xa = g->x + i0 * k + p0;
				float *yc = g->y + i0 * m + c0;
				if (valid == GEMM_NR) {
					e->kern(rows, kc, xa, k, pw, yc, m, first, bias16);
					continue;
				}
				for (int r = 0; r < rows && !first; r++)
					memcpy(tile + r * GEMM_NR, yc + r * m, (size_t)valid * 4);
				e->kern(rows, kc, xa, k, pw, tile, GEMM_NR, first, bias16);
				for (int r = 0; r < rows; r++)
					memcpy(yc + r * m, tile + r * GEMM_NR, (size_t)valid * 4);
			}
		}
	}
}

static void gemm_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct gemm_job *g = arg;
	const struct gemm_engine *e = gemm_engine();
	float *pack = cpu_pool_scratch(g->pool, tid, (size_t)g->nc * g->kc * sizeof(float));
	if (!pack) {
		int zero = 0;
		atomic_compare_exchange_strong(&g->err, &zero, -ENOMEM);
		return;
	}
	/* Items are column-tile major so that a thread's items share W tiles. */
	for (int64_t it = begin; it < end; it++) {
		int64_t ct = it / g->n_row_groups, rg = it % g->n_row_groups;
		int64_t j0 = ct * g->nc, r0 = rg * g->mc;
		gemm_item(g, e, pack, r0, ALLM_MIN(r0 + g->mc, g->n), j0,
			  ALLM_MIN(g->nc, g->m - j0));
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

/* Runs fn over [0, n_items) on the pool, or all of it on the calling thread (as the
 * pool's thread 0, whose scratch it uses) when `inline_run`. */
static void run_items(struct cpu_pool *pool, bool inline_run, int64_t n_items,
		      void (*fn)(void *arg, int tid, int64_t begin, int64_t end), void *arg)
{
	if (!inline_run) {
		cpu_pool_run_tid(pool, n_items, fn, arg);
		return;
	}
	struct inline_run r = { fn, arg, n_items };
	cpu_pool_run_tid(pool, 1, inline_trampoline, &r);
}

/* Few rows: items are 16-column panels, W read straight from its rows. */
static void gemv_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct gemm_job *g = arg;
	const struct gemm_engine *e = gemm_engine();
	float b16[GEMM_NR];

	for (int64_t q = begin; q < end; q++) {
		int64_t c0 = q * GEMM_NR;
		int valid = (int)ALLM_MIN((int64_t)GEMM_NR, g->m - c0);
		if (g->bias)
			bias_tile(b16, g->bias, g->dt, c0, valid);
		if (valid == GEMM_NR) {
			e->gemv((int)g->n, g->x, g->k, g->w, g->dt, c0, g->y, g->m,
				g->bias ? b16 : NULL);
			continue;
		}
		for (int64_t i = 0; i < g->n; i++) /* last partial panel: the same chain */
			for (int c = 0; c < valid; c++) {
				float acc = 0.0f;
				for (int64_t p = 0; p < g->k; p++)
					acc += g->x[i * g->k + p] *
					       wval(g->w, g->dt, (size_t)(c0 + c) * g->k + p);
				if (g->bias)
					acc += b16[c];
				g->y[i * g->m + c0 + c] = acc;
			}
	}
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
	struct gemm_job g = {
		.y = y, .x = x, .w = w, .bias = bias, .dt = dt, .n = n, .k = k, .m = m,
		.nc = GEMM_NC, .kc = GEMM_KC, .pool = c->pool,
	};
	if (n <= GEMM_FEW_ROWS) /* W is reused by few rows: longer k runs stream better */
		g.kc = 2 * GEMM_KC;
	const struct gemm_engine *e = gemm_engine();
	/* Below ~GEMM_INLINE_MACS the wake-up of the workers costs more than it saves. */
	bool inline_run = (double)n * (double)k * (double)m < GEMM_INLINE_MACS;
	if (e->gemv && n <= GEMV_MAX_ROWS) {
		run_items(c->pool, inline_run, (m + GEMM_NR - 1) / GEMM_NR, gemv_worker, &g);
		return 0;
	}
	int threads = cpu_pool_size(c->pool);
	g.n_col_tiles = (m + g.nc - 1) / g.nc;
	/* Too few column tiles to feed the threads: split the rows too. The blocking
	 * never changes an element's arithmetic, only who computes it. */
	int64_t row_blocks = (n + GEMM_MR - 1) / GEMM_MR;
	int64_t want = ALLM_MAX((int64_t)1, (2 * threads + g.n_col_tiles - 1) / g.n_col_tiles);
	int64_t groups = ALLM_MIN(row_blocks, want);
	g.mc = (row_blocks + groups - 1) / groups * GEMM_MR;
	g.n_row_groups = (n + g.mc - 1) / g.mc;
	run_items(c->pool, inline_run, g.n_col_tiles * g.n_row_groups, gemm_worker, &g);
	return atomic_load(&g.err);
}

const char *cpu_fast_gemm_name(struct cpu_ctx *c)
{
	return gemm_engine()->name;
}

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
		float *scores = cpu_pool_scratch(a->pool, tid, (size_t)ALLM_MAX(ctx, 1) * 4);
		if (!scores) {
			int zero = 0;
			atomic_compare_exchange_strong(&a->err, &zero, -ENOMEM);
			return;
		}
		const int32_t *bt = meta->block_tables +
				    (size_t)meta->tok_seq[t] * meta->max_blocks_per_seq;
		size_t row = ((size_t)t * a->n_heads + h) * hd;
		cpu_attention_one(a->out + row, a->q + row, a->kv_pool, a->lay, a->layer,
				  h / a->group, bt, ctx, a->scale, scores);
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
	};
	cpu_pool_run_tid(c->pool, (int64_t)meta->n_tokens * n_heads, attn_worker, &a);
	return atomic_load(&a.err);
}

/* --- lifetime ---------------------------------------------------------------------- */

int cpu_fast_init(struct cpu_ctx *c, struct allm_err *err)
{
	int r = cpu_pool_create(c->n_threads, &c->pool);
	if (r)
		return allm_err_set(err, r, "cpu backend: cannot start %d threads", c->n_threads);
	c->n_threads = cpu_pool_size(c->pool);
	gemm_engine(); /* decide the GEMM engine before any call races for it */
	return 0;
}

void cpu_fast_fini(struct cpu_ctx *c)
{
	cpu_pool_destroy(c->pool);
	c->pool = NULL;
}
