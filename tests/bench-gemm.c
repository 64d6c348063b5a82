/* Description: GEMM throughput of the CPU backend: fast path (one SIMD level) vs
 * OpenBLAS sgemm (for comparison only; it is not batch-invariant) and, with -r, the
 * reference loops, in GFLOP/s; and the fast path's weight read rate in GB/s.
 *
 * usage: bench-gemm [-t threads] [-d f32|f16|bf16|q8_0|q4_0|q4_1] [-i ISA] [-s seconds] [-r]
 *                   [n,k,m ...]
 * Default shapes: 1,4096,4096 16,4096,4096 128,4096,11008 1,64,512 5,64,172.
 * Each number is the fastest call seen in -s seconds (default 1); the reference is
 * timed on one call (it takes seconds on big shapes). */
#include "backend.h"
#include "bench-opts.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct shape {
	int64_t n, k, m;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((int64_t)(rng_state >> 40) % 2001 - 1000) / 1000.0f;
}

/* Fastest call of be->gemm (shared machines are noisy; the minimum is the stable
 * statistic), repeating for at least `min_s` (once if min_s <= 0). */
static double time_backend(allm_backend_t *be, float *y, const float *x, const void *w,
			   const void *b, enum allm_dtype dt, struct shape s, double min_s)
{
	double best = 1e30, t0 = allm_now();
	do {
		double t1 = allm_now();
		be->iface->gemm(be, y, x, w, b, dt, s.n, s.k, s.m);
		best = ALLM_MIN(best, allm_now() - t1);
	} while (allm_now() - t0 < min_s);
	return best;
}

static double time_blas(float *y, const float *x, const float *w, struct shape s, double min_s)
{
	double best = 1e30, t0 = allm_now();
	do {
		double t1 = allm_now();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s.n, (int)s.m,
			    (int)s.k, 1.0f, x, (int)s.k, w, (int)s.k, 0.0f, y, (int)s.m);
		best = ALLM_MIN(best, allm_now() - t1);
	} while (allm_now() - t0 < min_s);
	return best;
}

int main(int argc, char **argv)
{
	struct allm_backend_env env; /* ALLM_QB_R8, ALLM_QB_SCALES, ALLM_OPENBLAS */
	allm_backend_env_read(&env);
	struct allm_backend_opts o_ref = { .reference = true }, o_fast = { .env = &env };
	enum allm_dtype dt = ALLM_DTYPE_F32;
	double min_s = 1.0;
	struct shape shapes[32] = {
		{ 1, 4096, 4096 }, { 16, 4096, 4096 }, { 128, 4096, 11008 }, { 1, 64, 512 },
		{ 5, 64, 172 },
	};
	int n_shapes = 5, opt;
	bool with_ref = false;

	while ((opt = getopt(argc, argv, "t:d:s:i:r")) != -1) {
		int c = bench_common_opt(opt, optarg, &o_fast, &min_s, &dt);
		if (c > 0)
			continue;
		switch (c < 0 ? '?' : opt) {
		case 'r': with_ref = true; break;
		default:
			fprintf(stderr, "usage: %s [-t threads] [-d f32|f16|bf16|q8_0|q4_0|q4_1] [-i ISA] "
					"[-s seconds] [-r] [n,k,m ...]\n", argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		n_shapes = 0;
	for (int i = optind; i < argc && n_shapes < 32; i++) {
		struct shape *s = &shapes[n_shapes];
		if (sscanf(argv[i], "%ld,%ld,%ld", &s->n, &s->k, &s->m) != 3 || s->n <= 0 ||
		    s->k <= 0 || s->m <= 0) {
			fprintf(stderr, "bad shape '%s' (want n,k,m)\n", argv[i]);
			return 2;
		}
		n_shapes++;
	}

	allm_backend_t *ref = NULL, *fast = NULL;
	struct allm_err err = { { 0 } };
	if (allm_backend_cpu_create(&o_ref, &ref, &err) ||
	    allm_backend_cpu_create(&o_fast, &fast, &err)) {
		fprintf(stderr, "backend: %s\n", err.msg);
		return 1;
	}
	int blas_threads = o_fast.n_threads > 0 ? o_fast.n_threads
						: (int)sysconf(_SC_NPROCESSORS_ONLN);
	openblas_set_num_threads(blas_threads);
	printf("fast: %s; openblas: %s, %d threads; weights %s\n",
	       fast->iface->describe(fast), openblas_get_config(), blas_threads,
	       allm_dtype_name(dt));
	printf("%6s %6s %6s | %9s %9s %9s | %8s %8s | %8s\n", "n", "k", "m", "ref", "fast",
	       "openblas", "fast/ref", "fast/blas", "W GB/s");

	for (int i = 0; i < n_shapes; i++) {
		struct shape s = shapes[i];
		size_t nx = (size_t)(s.n * s.k), nw = (size_t)(s.m * s.k), ny = (size_t)(s.n * s.m);
		float *x = malloc(nx * 4), *wf = malloc(nw * 4), *y = malloc(ny * 4);
		size_t wbytes = bench_w_bytes(dt, s.m, s.k);
		void *w = malloc(wbytes);
		if (!x || !wf || !y || !w) {
			fprintf(stderr, "out of memory\n");
			return 1;
		}
		for (size_t j = 0; j < nx; j++)
			x[j] = frand();
		for (size_t j = 0; j < nw; j++)
			wf[j] = frand() * 0.05f;
		bench_w_store(dt, w, wf, s.m, s.k);
		double flop = 2.0 * (double)s.n * (double)s.k * (double)s.m;
		double t_ref = with_ref ? time_backend(ref, y, x, w, NULL, dt, s, 0.0) : NAN;
		double t_fast = time_backend(fast, y, x, w, NULL, dt, s, min_s);
		double t_blas = time_blas(y, x, wf, s, min_s);
		printf("%6ld %6ld %6ld | %9.2f %9.2f %9.2f | %7.1fx %7.2fx | %8.2f\n", s.n, s.k, s.m,
		       flop / t_ref * 1e-9, flop / t_fast * 1e-9, flop / t_blas * 1e-9,
		       t_ref / t_fast, t_blas / t_fast, wbytes / t_fast * 1e-9);
		fflush(stdout);
		free(x);
		free(wf);
		free(y);
		free(w);
	}
	allm_backend_destroy(fast);
	allm_backend_destroy(ref);
	return 0;
}
