/* Description: the CPU GEMM on GGUF's Q5_0, Q5_1, Q4_K, Q5_K and Q6_K blocks, computed in their own layouts at every SIMD level this machine supports: bit for bit against a scalar restatement of the documented order (kernels/cpu/cpu-gemm.h) read straight from the bytes as GGUF lays them out, within a stated bound of the exact (double) product with the dequantized weights, and batch-invariant (a row alone, amid other rows, any n, 1-3 threads, gemm_multi). The weights are random blocks (random quants, f16 scales in a sane range), so every bit pattern of the quants is met. */
#include "backend.h"
#include "qblock.h"
#include "test-check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t urand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

static float frand(void) /* uniform in [-1, 1) */
{
	return (float)(urand() & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static const enum allm_dtype dts[] = {ALLM_DTYPE_Q5_0, ALLM_DTYPE_Q5_1, ALLM_DTYPE_Q4_K,
				      ALLM_DTYPE_Q5_K, ALLM_DTYPE_Q6_K};

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* An f16 of magnitude 2^-12 .. 2^-6 (signed if asked). */
static uint16_t scale16(bool sign)
{
	float v = ldexpf(1.0f + (float)(urand() % 1024) / 1024.0f, -12 + (int)(urand() % 7));
	return allm_f32_to_f16(sign && urand() % 2 ? -v : v);
}

/* W [m, k] of random blocks of dt; *ret_f its values (the one dequantizer's). */
static void *make_w(enum allm_dtype dt, int64_t m, int64_t k, float **ret_f)
{
	size_t bytes = allm_qb_bytes(dt, m, k), bb = allm_qb_block_bytes(dt);
	uint8_t *w = malloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		w[i] = (uint8_t)urand();
	for (size_t b = 0; b < bytes / bb; b++) { /* the f16 fields */
		uint8_t *blk = w + b * bb;
		switch (dt) {
		case ALLM_DTYPE_Q5_0: put16(blk, scale16(true)); break;
		case ALLM_DTYPE_Q5_1: put16(blk, scale16(true)), put16(blk + 2, scale16(true)); break;
		case ALLM_DTYPE_Q6_K: put16(blk + 208, scale16(true)); break;
		default: put16(blk, scale16(false)), put16(blk + 2, scale16(false)); break;
		}
		if (b == 3) /* a zero scale */
			put16(blk + (dt == ALLM_DTYPE_Q6_K ? 208 : 0), 0);
	}
	float *f = malloc((size_t)(m * k) * sizeof(float));
	for (int64_t i = 0; i < m; i++)
		allm_qb_dequantize_row(dt, f + i * k, w, k, i);
	*ret_f = f;
	return w;
}

/* --- the documented order, restated from the bytes --------------------------------- */

static float h2f(const uint8_t *p)
{
	return allm_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* x quantized with one scale per `grain` values: xq = round-half-even(x * 127 /
 * amax) (zero past k), dx = amax / 127 per value. */
static void quant_x(const float *x, int64_t k, int64_t grain, int64_t kpad, int32_t *xq, float *dx)
{
	for (int64_t g = 0; g < kpad; g += grain) {
		float amax = 0.0f;
		for (int64_t p = g; p < g + grain && p < k; p++)
			amax = fmaxf(amax, fabsf(x[p]));
		float id = amax > 0.0f ? 127.0f / amax : 0.0f;
		for (int64_t p = g; p < g + grain; p++) {
			xq[p] = p < k ? (int32_t)nearbyintf(x[p] * id) : 0;
			dx[p] = amax / 127.0f;
		}
	}
}

/* Q5_0 (d, qh, qs) and Q5_1 (d, m, qh, qs): per block of 32 the exact integer sum of
 * xq * q (Q5_0: q - 16), acc = fma(I, d * dx, acc); Q5_1 then acc = fma(m, dx *
 * sum(xq), acc). */
static float emu_q5(enum allm_dtype dt, const float *x, const uint8_t *row, int64_t k)
{
	int64_t nb = (k + 31) / 32;
	int32_t *xq = malloc((size_t)nb * 32 * 4);
	float *dx = malloc((size_t)nb * 32 * 4), acc = 0.0f;
	quant_x(x, k, 32, nb * 32, xq, dx);
	bool one = dt == ALLM_DTYPE_Q5_1;
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *blk = row + b * (one ? 24 : 22), *qh = blk + (one ? 4 : 2), *qs = qh + 4;
		uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
		int32_t sum = 0, sx = 0;
		for (int i = 0; i < 32; i++) {
			int q = (i < 16 ? qs[i] & 15 : qs[i - 16] >> 4) | (int)((h >> i) & 1) << 4;
			sum += xq[32 * b + i] * (one ? q : q - 16);
			sx += xq[32 * b + i];
		}
		acc = fmaf((float)sum, h2f(blk) * dx[32 * b], acc);
		if (one)
			acc = fmaf(h2f(blk + 2), dx[32 * b] * (float)sx, acc);
	}
	free(xq), free(dx);
	return acc;
}

/* The K formats, x quantized per 256: per super-block I = sum of sc * (integer sums),
 * acc = fma(I, d * dx, acc); Q4_K/Q5_K then M = sum of m_j * (sum of sub-block j's
 * xq), acc = fma(-M, dmin * dx, acc). Q4_K/Q5_K: d, dmin, scales[12], (Q5_K: qh[32]),
 * qs[128]; Q6_K: ql[128], qh[64], int8 scales[16], d. */
static float emu_k(enum allm_dtype dt, const float *x, const uint8_t *row, int64_t k)
{
	int32_t *xq = malloc((size_t)k * 4);
	float *dx = malloc((size_t)k * 4), acc = 0.0f;
	quant_x(x, k, 256, k, xq, dx);
	for (int64_t sb = 0; sb < k / 256; sb++) {
		const int32_t *v = xq + 256 * sb;
		int32_t I = 0, M = 0;
		if (dt == ALLM_DTYPE_Q6_K) {
			const uint8_t *blk = row + 210 * sb, *ql = blk, *qh = blk + 128;
			const int8_t *sc = (const int8_t *)(blk + 192);
			for (int p = 0; p < 256; p++) { /* p = 128 h + 32 c + l */
				int h = p / 128, c = p % 128 / 32, l = p % 32;
				int lo = ql[64 * h + 32 * (c % 2) + l], hi = qh[32 * h + l] >> (2 * c) & 3;
				int q = ((c < 2 ? lo & 15 : lo >> 4) | hi << 4) - 32;
				I += sc[p / 16] * q * v[p];
			}
			acc = fmaf((float)I, h2f(blk + 208) * dx[256 * sb], acc);
			continue;
		}
		bool five = dt == ALLM_DTYPE_Q5_K;
		const uint8_t *blk = row + (five ? 176 : 144) * sb, *s = blk + 4;
		const uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16);
		for (int j = 0; j < 8; j++) {
			int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
			int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
			int32_t dot = 0, sx = 0;
			for (int l = 0; l < 32; l++) {
				int q = qs[32 * (j / 2) + l] >> (4 * (j % 2)) & 15;
				if (five)
					q |= (qh[l] >> j & 1) << 4;
				dot += q * v[32 * j + l];
				sx += v[32 * j + l];
			}
			I += sc * dot;
			M += m * sx;
		}
		acc = fmaf((float)I, h2f(blk) * dx[256 * sb], acc);
		acc = fmaf((float)-M, h2f(blk + 2) * dx[256 * sb], acc);
	}
	free(xq), free(dx);
	return acc;
}

static float emu(enum allm_dtype dt, const float *x, const void *w, int64_t k, int64_t row)
{
	const uint8_t *r = (const uint8_t *)w + (size_t)row * allm_qb_row_bytes(dt, k);
	return allm_qb_is_k(dt) ? emu_k(dt, x, r, k) : emu_q5(dt, x, r, k);
}

/* --- per level ------------------------------------------------------------------------ */

struct shape {
	int64_t n, k, m;
};

static const struct shape shapes_32[] = {
	{1, 32, 5}, {3, 33, 17}, {2, 64, 300}, {13, 512, 16}, {40, 96, 33},
	/* 4+ tokens over whole items of 16 rows: the repacked prefill items
	 * (cpu-gemm-qblock-r8.c), a chunk of 32 blocks and one more, 1-3 tokens left */
	{7, 1056, 32},
};
static const struct shape shapes_256[] = {
	{1, 256, 17}, {3, 512, 33}, {9, 768, 16}, {17, 256, 40}, {2, 2048, 100}, {40, 1024, 9},
	{5, 1280, 32}, {6, 2304, 16}, /* the repacked items: chunks of 4 super-blocks and a part */
	/* one token: the decode rows four, two and one at a time (an item's 16 rows, then 7) */
	{1, 768, 23}, {1, 2048, 30},
};

static void test_values(allm_backend_t *be, enum allm_cpu_isa isa, enum allm_dtype dt,
			const struct shape *sh)
{
	int64_t n = sh->n, k = sh->k, m = sh->m;
	float *x = malloc((size_t)(n * k) * 4), *wf, *y = malloc((size_t)(n * m + 1) * 4);
	float *bias = malloc((size_t)m * 4);
	for (int64_t i = 0; i < n * k; i++)
		x[i] = frand() * (i % 97 == 5 ? 8.0f : 1.0f); /* some outliers */
	for (int64_t i = 0; i < m; i++)
		bias[i] = 0.5f * frand();
	void *w = make_w(dt, m, k, &wf);
	memcpy(&y[n * m], "\xad\xde\xc0\x7f", 4);
	int r = be->iface->gemm(be, y, x, w, bias, dt, n, k, m);
	CHECK(r == 0, "%s %s: gemm returned %d", allm_cpu_isa_name(isa), allm_dtype_name(dt), r);
	CHECK(!memcmp(&y[n * m], "\xad\xde\xc0\x7f", 4), "%s: wrote past y", allm_cpu_isa_name(isa));
	size_t bad = 0;
	double worst = 0.0;
	int64_t grain = allm_qb_values(dt);
	for (int64_t i = 0; i < n; i++)
		for (int64_t o = 0; o < m; o++) {
			const float *xr = x + i * k, *wr = wf + o * k;
			float got = y[i * m + o], want = emu(dt, xr, w, k, o) + bias[o];
			if (memcmp(&got, &want, 4) && !bad++)
				fprintf(stderr, "%s %s n=%lld k=%lld m=%lld: y[%lld][%lld] %a, the order gives %a\n",
					allm_cpu_isa_name(isa), allm_dtype_name(dt), (long long)n, (long long)k,
					(long long)m, (long long)i, (long long)o, got, want);
			/* the bound: float error of the order, plus half an int8 step of each
			 * grain's amax / 127 per value */
			double exact = bias[o], mag = fabs(bias[o]), lim;
			for (int64_t p = 0; p < k; p++) {
				exact += (double)xr[p] * wr[p];
				mag += fabs((double)xr[p] * wr[p]);
			}
			lim = (double)(k + 8) * 2 * 0x1p-24 * mag;
			for (int64_t p = 0; p < k; p += grain) {
				double amax = 0, sw = 0;
				for (int64_t q = p; q < p + grain && q < k; q++) {
					amax = fmax(amax, fabs(xr[q]));
					sw += fabs(wr[q]);
				}
				lim += 1.01 * amax / 254 * sw;
			}
			double e = fabs((double)got - exact) / (lim > 0 ? lim : 1);
			if (!(e <= worst))
				worst = isnan(e) ? INFINITY : e;
		}
	CHECK(bad == 0, "%s %s n=%lld k=%lld m=%lld: %zu of %lld outputs differ from the documented order",
	      allm_cpu_isa_name(isa), allm_dtype_name(dt), (long long)n, (long long)k, (long long)m, bad,
	      (long long)(n * m));
	CHECK(worst <= 1.0, "%s %s n=%lld k=%lld m=%lld: error %.2f x its bound", allm_cpu_isa_name(isa),
	      allm_dtype_name(dt), (long long)n, (long long)k, (long long)m, worst);
	free(x), free(wf), free(w), free(y), free(bias);
}

/* Rows of every n, a row alone and amid other rows, 1-3 threads, and gemm_multi:
 * the bits of the 24-row call. */
static void test_invariance(allm_backend_t **bes, enum allm_cpu_isa isa, enum allm_dtype dt)
{
	static const int64_t ns[] = {1, 2, 3, 4, 5, 8, 15, 16, 17, 24};
	const int64_t nmax = 24, k = allm_qb_is_k(dt) ? 512 : 96, m = 70;
	float *x = malloc((size_t)(nmax * k) * 4), *x2 = malloc((size_t)(nmax * k) * 4), *wf, *wf2;
	float *full = malloc((size_t)(nmax * m) * 4), *y = malloc((size_t)(nmax * m) * 4);
	for (int64_t i = 0; i < nmax * k; i++)
		x[i] = frand(), x2[i] = 3.0f * frand();
	void *w = make_w(dt, m, k, &wf), *w2 = make_w(dt, 37, k, &wf2);
	bes[0]->iface->gemm(bes[0], full, x, w, NULL, dt, nmax, k, m);
	for (int f = 0; f < 3; f++) {
		allm_backend_t *be = bes[f];
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(ns); j++) {
			be->iface->gemm(be, y, x, w, NULL, dt, ns[j], k, m);
			CHECK(!memcmp(y, full, (size_t)(ns[j] * m) * 4), "%s %s: rows of n=%lld differ (%d threads)",
			      allm_cpu_isa_name(isa), allm_dtype_name(dt), (long long)ns[j], f + 1);
		}
		for (int64_t i = 0; i < nmax; i += 5) {
			int64_t p = (i * 7 + 3) % nmax;
			float *xm = malloc((size_t)(nmax * k) * 4);
			memcpy(xm, x2, (size_t)(nmax * k) * 4);
			memcpy(xm + p * k, x + i * k, (size_t)k * 4);
			be->iface->gemm(be, y, xm, w, NULL, dt, nmax, k, m);
			CHECK(!memcmp(y + p * m, full + i * m, (size_t)m * 4), "%s %s: row %lld amid others differs",
			      allm_cpu_isa_name(isa), allm_dtype_name(dt), (long long)i);
			free(xm);
		}
		/* two matrices of the same x at once: each with gemm's bits */
		int64_t ms[2] = {m, 37};
		float *y2 = malloc((size_t)(nmax * 37) * 4), *w2want = malloc((size_t)(nmax * 37) * 4);
		float *ys[2] = {y, y2};
		const void *ws[2] = {w, w2}, *bs[2] = {NULL, NULL};
		be->iface->gemm(be, w2want, x, w2, NULL, dt, 3, k, 37);
		CHECK(be->iface->gemm_multi(be, 2, ys, x, ws, bs, dt, 3, k, ms) == 0, "gemm_multi");
		CHECK(!memcmp(y, full, (size_t)(3 * m) * 4) && !memcmp(y2, w2want, (size_t)(3 * 37) * 4),
		      "%s %s: gemm_multi differs from gemm", allm_cpu_isa_name(isa), allm_dtype_name(dt));
		free(y2), free(w2want);
	}
	free(x), free(x2), free(wf), free(wf2), free(w), free(w2), free(full), free(y);
}

int main(void)
{
	struct allm_err err = {{0}};
	int tested = 0;
	for (int isa = ALLM_CPU_ISA_PORTABLE; isa < ALLM_CPU_ISA_COUNT; isa++) {
		if (!allm_cpu_isa_supported((enum allm_cpu_isa)isa)) {
			printf("%-12s not supported by this CPU: skipped\n", allm_cpu_isa_name(isa));
			continue;
		}
		allm_backend_t *bes[3] = {NULL};
		for (int t = 0; t < 3; t++) {
			struct allm_backend_opts o = {.n_threads = t + 1, .cpu_isa = (enum allm_cpu_isa)isa};
			if (allm_backend_cpu_create(&o, &bes[t], &err)) {
				fprintf(stderr, "level %s: %s\n", allm_cpu_isa_name(isa), err.msg);
				return 1;
			}
		}
		printf("%-12s %s\n", allm_cpu_isa_name(isa), bes[1]->iface->describe(bes[1]));
		for (size_t d = 0; d < ALLM_ARRAY_SIZE(dts); d++) {
			bool kf = allm_qb_is_k(dts[d]);
			const struct shape *sh = kf ? shapes_256 : shapes_32;
			size_t ns = kf ? ALLM_ARRAY_SIZE(shapes_256) : ALLM_ARRAY_SIZE(shapes_32);
			for (size_t s = 0; s < ns; s++)
				test_values(bes[1], (enum allm_cpu_isa)isa, dts[d], &sh[s]);
			test_invariance(bes, (enum allm_cpu_isa)isa, dts[d]);
		}
		for (int t = 0; t < 3; t++)
			allm_backend_destroy(bes[t]);
		tested++;
	}
	/* a K matrix whose rows are not whole super-blocks is refused, not misread */
	allm_backend_t *be = NULL;
	struct allm_backend_opts o = {.n_threads = 1};
	if (!allm_backend_cpu_create(&o, &be, &err)) {
		float x[288] = {0}, y[1];
		uint8_t w[2 * 144] = {0};
		CHECK(be->iface->gemm(be, y, x, w, NULL, ALLM_DTYPE_Q4_K, 1, 288, 1) != 0,
		      "a Q4_K row of 288 values was computed");
		allm_backend_destroy(be);
	}
	if (n_fail) {
		fprintf(stderr, "%d failures\n", n_fail);
		return 1;
	}
	printf("test-cpu-gemm-kquant: %d levels, all checks passed\n", tested);
	return 0;
}
