/* Description: the CPU GEMM at every SIMD level this machine supports, f32/f16/bf16
 * and GGUF block (Q8_0, Q4_0, Q4_1) weights: bit for bit against a scalar emulation of the level's documented
 * reduction order (kernels/cpu/cpu-gemm.h), within a stated bound of the exact
 * (double) result, and batch-invariant: a row's bits never depend on the rows
 * around it, the number of rows or the thread count. */
#include "backend.h"
#include "qblock.h"
#include "test-check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static uint64_t rng = 0x243f6a8885a308d3ull;

static float frand(void) /* uniform in [-1, 1) */
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static const enum allm_dtype dts[] = {ALLM_DTYPE_F32,  ALLM_DTYPE_F16,  ALLM_DTYPE_BF16,
				      ALLM_DTYPE_Q8_0, ALLM_DTYPE_Q4_0, ALLM_DTYPE_Q4_1};

/* --qblock-only: the GGUF block formats alone (the runs with each scale fetch forced,
 * ALLM_QB_SCALES). */
static bool qb_only;

/* Weights whose bias is f32 (the quantized formats). */
static bool f32_bias(enum allm_dtype dt)
{
	return allm_dtype_is_qblock(dt);
}

/* W [m, k] of dtype dt from random values; *ret_f = the values as stored (f32). */
static void *make_w(enum allm_dtype dt, int64_t m, int64_t k, float **ret_f)
{
	float *f = malloc((size_t)(m * k) * sizeof(float) + 4);
	for (int64_t i = 0; i < m * k; i++)
		f[i] = 0.1f * frand();
	if (m * k > 3)
		f[m * k / 3] = 0.0f; /* a zero block start, and a tiny value */
	void *w;
	if (allm_dtype_is_qblock(dt)) {
		w = malloc(allm_qb_bytes(dt, m, k));
		allm_qb_quantize_rows(dt, w, k, 0, f, m);
		for (int64_t i = 0; i < m; i++)
			allm_qb_dequantize_row(dt, f + i * k, w, k, i);
	} else {
		w = malloc((size_t)(m * k) * allm_dtype_size(dt) + 4);
		allm_from_f32(w, f, dt, (size_t)(m * k));
		allm_to_f32(f, w, dt, (size_t)(m * k));
	}
	*ret_f = f;
	return w;
}

/* --- the documented orders, restated in scalar C ---------------------------- */

/* The lane tree: l[j] + l[j + lanes/2] first, halving down to one. */
static float tree(float *l, int lanes)
{
	for (int h = lanes / 2; h >= 1; h /= 2)
		for (int j = 0; j < h; j++)
			l[j] = l[j] + l[j + h];
	return l[0];
}

/* avx2 (8) / avx512 (16): fma chains, lane = p mod lanes, then the tree. */
static float emu_fma(const float *x, const float *w, int64_t k, int lanes)
{
	float l[16] = {0};
	for (int64_t p = 0; p < k; p++)
		l[p % lanes] = fmaf(x[p], w[p], l[p % lanes]);
	return tree(l, lanes);
}

/* Block b of x quantized as the block formats' kernels do: xq = round-half-even(x * 127 /
 * amax) (zeros past k); returns dx = amax / 127. */
static float quant_block(const float *x, int64_t k, int64_t b, int32_t xq[32])
{
	float amax = 0.0f, xs[32];
	for (int i = 0; i < 32; i++) {
		xs[i] = b * 32 + i < k ? x[b * 32 + i] : 0.0f;
		amax = fmaxf(amax, fabsf(xs[i]));
	}
	float id = amax > 0.0f ? 127.0f / amax : 0.0f;
	for (int i = 0; i < 32; i++)
		xq[i] = (int32_t)nearbyintf(xs[i] * id);
	return amax / 127.0f;
}

/* GGUF blocks (every level): x quantized per block of 32 (quant_block); per block the exact integer
 * sum of xq times the block's integers (read here from the bytes as GGUF documents
 * them: Q8_0 d q[32]; Q4_0 d qs[16], element i < 16 the low nibble of qs[i] minus
 * 8, i + 16 its high nibble minus 8; Q4_1 d m qs[16], the nibbles as they are);
 * acc = fma(I, d * dx, acc), and for Q4_1 acc = fma(m, dx * sum(xq), acc). */
static float emu_qb(enum allm_dtype dt, const float *x, const void *w, int64_t k, int64_t row)
{
	size_t bb = dt == ALLM_DTYPE_Q8_0 ? 34 : dt == ALLM_DTYPE_Q4_0 ? 18 : 20;
	int64_t nb = (k + 31) / 32;
	const uint8_t *r = (const uint8_t *)w + (size_t)row * nb * bb;
	float acc = 0.0f;
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *blk = r + b * bb;
		int32_t xq[32], sum = 0, sx = 0;
		float dx = quant_block(x, k, b, xq);
		for (int i = 0; i < 32; i++) {
			int q;
			if (dt == ALLM_DTYPE_Q8_0)
				q = (int8_t)blk[2 + i];
			else {
				const uint8_t *qs = blk + (dt == ALLM_DTYPE_Q4_1 ? 4 : 2);
				q = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
				q -= dt == ALLM_DTYPE_Q4_0 ? 8 : 0;
			}
			sum += xq[i] * q;
			sx += xq[i];
		}
		acc = fmaf((float)sum, allm_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * dx, acc);
		if (dt == ALLM_DTYPE_Q4_1)
			acc = fmaf(allm_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8)), dx * (float)sx, acc);
	}
	return acc;
}

/* --- per level ------------------------------------------------------------------ */

struct shape {
	int64_t n, k, m;
};

static const struct shape shapes[] = {
	{1, 1, 1},     {1, 7, 5},       {2, 16, 17},    {3, 31, 33},     {4, 32, 6},
	{5, 33, 11},   {1, 64, 300},    {8, 100, 21},   {9, 300, 12},    {13, 512, 7},
	{6, 513, 16},  {33, 600, 10},   {1, 1031, 23},  {17, 1031, 9},   {2, 4096, 5},
	{40, 65, 26},
	/* 16+ rows and k >= 192 on the AVX-512 levels: the outer-product driver (uneven
	 * row tiles, outputs past a panel of 32, k tails, long k) */
	{16, 200, 33}, {29, 207, 100},  {50, 1100, 70}, {100, 250, 65},
};

/* y of level `be` against the emulation (or the reference, or a bound). */
static void test_level_values(allm_backend_t *be, allm_backend_t *ref, enum allm_cpu_isa isa)
{
	for (size_t di = 0; di < ALLM_ARRAY_SIZE(dts); di++)
		for (size_t s = 0; s < ALLM_ARRAY_SIZE(shapes); s++) {
			enum allm_dtype dt = dts[di];
			if (qb_only && !allm_dtype_is_qblock(dt))
				continue;
			int64_t n = shapes[s].n, k = shapes[s].k, m = shapes[s].m;
			float *x = malloc((size_t)(n * k) * 4), *wf, *y = malloc((size_t)(n * m + 8) * 4);
			float *yr = malloc((size_t)(n * m) * 4), *bias = malloc((size_t)m * 4);
			for (int64_t i = 0; i < n * k; i++)
				x[i] = frand();
			for (int64_t i = 0; i < m; i++)
				bias[i] = 0.5f * frand();
			void *w = make_w(dt, m, k, &wf);
			/* bias: f32 for blocks, else in dt (values exactly
			 * representable: from wf) */
			void *b = f32_bias(dt) ? (void *)bias : malloc((size_t)m * 4);
			if (!f32_bias(dt)) {
				allm_from_f32(b, bias, dt, (size_t)m);
				allm_to_f32(bias, b, dt, (size_t)m);
			}
			for (int i = 0; i < 8; i++)
				memcpy(&y[n * m + i], "\xad\xde\xc0\x7f", 4);
			int r = be->iface->gemm(be, y, x, w, b, dt, n, k, m);
			CHECK(r == 0, "gemm returned %d", r);
			CHECK(!memcmp(&y[n * m], "\xad\xde\xc0\x7f", 4), "%s: wrote past y",
			      allm_cpu_isa_name(isa));
			ref->iface->gemm(ref, yr, x, w, b, dt, n, k, m);
			size_t bad = 0, first = 0;
			float first_want = 0.0f;
			double worst = 0.0;
			for (int64_t i = 0; i < n; i++)
				for (int64_t o = 0; o < m; o++) {
					const float *xr = x + i * k, *wr = wf + o * k;
					float got = y[i * m + o], want;
					double exact = bias[o], mag = fabs(bias[o]);
					for (int64_t p = 0; p < k; p++) {
						exact += (double)xr[p] * wr[p];
						mag += fabs((double)xr[p] * wr[p]);
					}
					bool qb = allm_dtype_is_qblock(dt);
					bool dpbf16 = dt == ALLM_DTYPE_BF16 && isa >= ALLM_CPU_ISA_AVX512_BF16;
					int lanes = isa >= ALLM_CPU_ISA_AVX512 ? 16 : 8;
					if (qb) /* every level, portable included */
						want = emu_qb(dt, xr, w, k, o) + bias[o];
					else if (isa == ALLM_CPU_ISA_PORTABLE)
						want = yr[i * m + o]; /* the reference, bit for bit */
					else if (!dpbf16)
						want = emu_fma(xr, wr, k, lanes) + bias[o];
					else
						want = got; /* bound only (below) */
					if (memcmp(&got, &want, 4) && !bad++) {
						first = (size_t)(i * m + o);
						first_want = want;
					}
					/* the bound: float error of the order, plus the rounding of
					 * activations where the level rounds them (bf16: 2^-9 each,
					 * blocks: half an int8 step of amax / 127 per value) */
					double ulp = 0x1p-24, lim = (double)(k + 8) * 2 * ulp * mag;
					if (dpbf16)
						lim += 0x1p-8 * mag;
					for (int64_t p = 0; qb && p < k; p += 32) {
						double amax = 0, sw = 0; /* half an int8 step per value */
						for (int64_t q = p; q < p + 32 && q < k; q++) {
							amax = fmax(amax, fabs(xr[q]));
							sw += fabs(wr[q]);
						}
						lim += 1.01 * amax / 254 * sw;
					}
					double e = fabs((double)got - exact) / (lim > 0 ? lim : 1);
					if (!(e <= worst))
						worst = isnan(e) ? INFINITY : e;
				}
			CHECK(bad == 0, "%s %s n=%lld k=%lld m=%lld: %zu of %lld elements differ from "
			      "the documented order (first at %zu: %a vs %a)", allm_cpu_isa_name(isa),
			      allm_dtype_name(dt), (long long)n, (long long)k, (long long)m, bad,
			      (long long)(n * m), first, y[first], first_want);
			CHECK(worst <= 1.0, "%s %s n=%lld k=%lld m=%lld: error %.2f x its bound",
			      allm_cpu_isa_name(isa), allm_dtype_name(dt), (long long)n, (long long)k,
			      (long long)m, worst);
			if (b != bias)
				free(b);
			free(x), free(wf), free(w), free(y), free(yr), free(bias);
		}
}

/* Rows of every n equal the rows of the 40-row call; a row alone and amid other rows
 * too; on 1, 2 and 3 threads. */
static void test_level_invariance(allm_backend_t **bes, int n_bes, enum allm_cpu_isa isa)
{
	static const int64_t km[][2] = {{64, 172}, {288, 77}, {1031, 64}, {33, 9}};
	static const int64_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 15, 16, 17, 29, 33, 40};
	const int64_t nmax = 40;
	for (size_t di = 0; di < ALLM_ARRAY_SIZE(dts); di++)
		for (size_t s = 0; s < ALLM_ARRAY_SIZE(km); s++) {
			enum allm_dtype dt = dts[di];
			if (qb_only && !allm_dtype_is_qblock(dt))
				continue;
			int64_t k = km[s][0], m = km[s][1];
			float *x = malloc((size_t)(nmax * k) * 4), *x2 = malloc((size_t)(nmax * k) * 4), *wf;
			float *full = malloc((size_t)(nmax * m) * 4), *y = malloc((size_t)(nmax * m) * 4);
			for (int64_t i = 0; i < nmax * k; i++)
				x[i] = frand(), x2[i] = 2.0f * frand();
			void *w = make_w(dt, m, k, &wf);
			bes[0]->iface->gemm(bes[0], full, x, w, NULL, dt, nmax, k, m);
			for (int f = 0; f < n_bes; f++) {
				allm_backend_t *be = bes[f];
				for (size_t j = 0; j < ALLM_ARRAY_SIZE(ns); j++) {
					be->iface->gemm(be, y, x, w, NULL, dt, ns[j], k, m);
					CHECK(!memcmp(y, full, (size_t)(ns[j] * m) * 4),
					      "%s %s k=%lld m=%lld: rows of n=%lld differ from n=%lld "
					      "(backend %d)", allm_cpu_isa_name(isa), allm_dtype_name(dt),
					      (long long)k, (long long)m, (long long)ns[j], (long long)nmax, f);
				}
				for (int64_t i = 0; i < nmax; i += 7) {
					be->iface->gemm(be, y, x + i * k, w, NULL, dt, 1, k, m);
					CHECK(!memcmp(y, full + i * m, (size_t)m * 4),
					      "%s %s: row %lld alone differs", allm_cpu_isa_name(isa),
					      allm_dtype_name(dt), (long long)i);
					int64_t p = (i * 5 + 3) % nmax;
					float *xm = malloc((size_t)(nmax * k) * 4);
					memcpy(xm, x2, (size_t)(nmax * k) * 4);
					memcpy(xm + p * k, x + i * k, (size_t)k * 4);
					be->iface->gemm(be, y, xm, w, NULL, dt, nmax, k, m);
					CHECK(!memcmp(y + p * m, full + i * m, (size_t)m * 4),
					      "%s %s: row %lld amid other rows differs", allm_cpu_isa_name(isa),
					      allm_dtype_name(dt), (long long)i);
					free(xm);
				}
			}
			free(x), free(x2), free(wf), free(w), free(full), free(y);
		}
}

/* gemm_multi (matrices of the same x at once) gives each matrix gemm's own bits,
 * biases included, on both sides of the row count where the level switches path.
 * The matrices are big enough for the pool at one row (decode runs them as one
 * job, a thread's items crossing from one matrix into the next). */
static void test_level_multi(allm_backend_t *be, enum allm_cpu_isa isa)
{
	static const int64_t ns[] = {1, 2, 9, 16, 40};
	static const int64_t ms[3] = {700, 37, 330};
	const int64_t k = 200; /* the outer-product path from 16 rows (cpu-gemm-avx512.c) */
	for (size_t di = 0; di < ALLM_ARRAY_SIZE(dts); di++)
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(ns); j++) {
			enum allm_dtype dt = dts[di];
			if (qb_only && !allm_dtype_is_qblock(dt))
				continue;
			int64_t n = ns[j];
			float *x = malloc((size_t)(n * k) * 4), *wf[3], *ys[3], *want[3], bias[700];
			void *ws[3], *bs[3];
			for (int64_t i = 0; i < n * k; i++)
				x[i] = frand();
			for (int i = 0; i < 700; i++)
				bias[i] = 0.5f * frand();
			for (int i = 0; i < 3; i++) {
				ws[i] = make_w(dt, ms[i], k, &wf[i]);
				bs[i] = NULL;
				if (i == 1) { /* one matrix with a bias, stored as the level takes it */
					bs[i] = malloc(700 * 4);
					if (f32_bias(dt))
						memcpy(bs[i], bias, 700 * 4);
					else
						allm_from_f32(bs[i], bias, dt, 700);
				}
				ys[i] = malloc((size_t)(n * ms[i]) * 4);
				want[i] = malloc((size_t)(n * ms[i]) * 4);
				be->iface->gemm(be, want[i], x, ws[i], bs[i], dt, n, k, ms[i]);
			}
			CHECK(be->iface->gemm_multi, "%s: no gemm_multi", allm_cpu_isa_name(isa));
			int r = be->iface->gemm_multi(be, 3, ys, x, (const void *const *)ws,
						      (const void *const *)bs, dt, n, k, ms);
			CHECK(r == 0, "gemm_multi returned %d", r);
			for (int i = 0; i < 3; i++) {
				CHECK(!memcmp(ys[i], want[i], (size_t)(n * ms[i]) * 4),
				      "%s %s n=%lld: gemm_multi matrix %d differs from gemm",
				      allm_cpu_isa_name(isa), allm_dtype_name(dt), (long long)n, i);
				free(ws[i]), free(wf[i]), free(bs[i]), free(ys[i]), free(want[i]);
			}
			free(x);
		}
}

int main(int argc, char **argv)
{
	qb_only = argc > 1 && !strcmp(argv[1], "--qblock-only");
	struct allm_err err = {{0}};
	struct allm_backend_opts o_ref = {.reference = true};
	struct allm_backend_env env; /* ALLM_QB_SCALES: tests/meson.build runs both */
	allm_backend_env_read(&env);
	allm_backend_t *ref = NULL;
	if (allm_backend_cpu_create(&o_ref, &ref, &err)) {
		fprintf(stderr, "reference backend: %s\n", err.msg);
		return 1;
	}
	int tested = 0;
	for (int isa = ALLM_CPU_ISA_PORTABLE; isa < ALLM_CPU_ISA_COUNT; isa++) {
		if (!allm_cpu_isa_supported((enum allm_cpu_isa)isa)) {
			printf("%-12s not supported by this CPU: skipped\n", allm_cpu_isa_name(isa));
			continue;
		}
		allm_backend_t *bes[3] = {NULL};
		for (int t = 0; t < 3; t++) {
			struct allm_backend_opts o = {.n_threads = t + 1, .cpu_isa = (enum allm_cpu_isa)isa,
						      .env = &env};
			if (allm_backend_cpu_create(&o, &bes[t], &err)) {
				fprintf(stderr, "level %s: %s\n", allm_cpu_isa_name(isa), err.msg);
				return 1;
			}
		}
		printf("%-12s %s\n", allm_cpu_isa_name(isa), bes[1]->iface->describe(bes[1]));
		test_level_values(bes[1], ref, (enum allm_cpu_isa)isa);
		test_level_invariance(bes, 3, (enum allm_cpu_isa)isa);
		test_level_multi(bes[1], (enum allm_cpu_isa)isa);
		for (int t = 0; t < 3; t++)
			allm_backend_destroy(bes[t]);
		tested++;
	}
	/* A level asked for that this machine lacks (or that does not exist) fails the
	 * creation with a reason, and nothing is leaked. */
	struct allm_backend_opts bad = {.cpu_isa = ALLM_CPU_ISA_COUNT};
	allm_backend_t *be = NULL;
	CHECK(allm_backend_cpu_create(&bad, &be, &err) == -EINVAL && !be && err.msg[0],
	      "an unknown level was accepted");
	enum allm_cpu_isa parsed;
	CHECK(allm_cpu_isa_parse("avx512-bf16", &parsed) == 0 && parsed == ALLM_CPU_ISA_AVX512_BF16,
	      "parse avx512-bf16");
	CHECK(allm_cpu_isa_parse("amx-bf16", &parsed) == 0 && parsed == ALLM_CPU_ISA_AMX_BF16,
	      "parse amx-bf16");
	CHECK(allm_cpu_isa_parse("amx-int8", &parsed) == 0 && parsed == ALLM_CPU_ISA_AMX_INT8,
	      "parse amx-int8");
	CHECK(allm_cpu_isa_parse("sse9", &parsed) == -EINVAL, "parse accepted sse9");
	allm_backend_destroy(ref);
	if (n_fail) {
		fprintf(stderr, "%d failures\n", n_fail);
		return 1;
	}
	printf("ok: %d levels\n", tested);
	return 0;
}
