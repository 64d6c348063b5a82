/* The OpenBLAS GEMM, selectable with --gemm openblas. Not the default: OpenBLAS
 * picks kernels by matrix shape, so the bits of a row change with the number of
 * rows in the call (measured on 0.3.21: 18 of 25 (k, m) shapes differ between
 * n = 1 and n = 2..100). Outputs then depend on what else is batched and a
 * recompute prefill no longer reproduces the decoded K/V exactly (DESIGN §6).
 *
 * The library is opened only when that is asked for: linked in, its constructor
 * starts a thread per core that spins ~100 ms in sched_yield at every start of
 * every program (on 2 cores, beside model load and the calibration's timings),
 * for a GEMM the default path never calls. */
#include "cpu-backend.h"
#include "qblock.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* $ALLM_OPENBLAS names another build (a path or a soname) */
#define BLAS_SONAME "libopenblas.so.0"

static __typeof__(&cblas_sgemm) blas_sgemm;
static __typeof__(&openblas_set_num_threads) blas_set_threads;
static char blas_error[200];
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static const char *blas_name; /* the first cpu_blas_init's: OpenBLAS is loaded once */

static void blas_open(void)
{
	const char *name = blas_name;
	if (!name || !*name)
		name = BLAS_SONAME;
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(blas_error, sizeof(blas_error), "%s", dlerror());
		return;
	}
	/* POSIX's way to turn a dlsym result into a function pointer */
	*(void **)&blas_sgemm = dlsym(h, "cblas_sgemm");
	*(void **)&blas_set_threads = dlsym(h, "openblas_set_num_threads");
	if (!blas_sgemm || !blas_set_threads) {
		snprintf(blas_error, sizeof(blas_error), "%s lacks cblas_sgemm or openblas_set_num_threads",
			 name);
		blas_sgemm = NULL;
	}
}

/* Rows of W converted to f32 per sgemm call when W is stored as f16/bf16. */
#define BLAS_W_ROWS 256

int cpu_blas_gemm(struct cpu_ctx *c, float *y, const float *x, const void *w,
		  const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m)
{
	if (n <= 0 || m <= 0)
		return 0;
	if (dt == ALLM_DTYPE_F32) {
		blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)m, (blasint)k,
			   1.0f, x, (blasint)k, w, (blasint)k, 0.0f, y, (blasint)m);
	} else {
		float *tile = allm_malloc((size_t)BLAS_W_ROWS * (size_t)k * sizeof(float));
		if (!tile)
			return -ENOMEM;
		size_t esz = allm_dtype_size(dt);
		for (int64_t o = 0; o < m; o += BLAS_W_ROWS) {
			int64_t rows = ALLM_MIN((int64_t)BLAS_W_ROWS, m - o);
			if (allm_dtype_is_qblock(dt))
				for (int64_t i = 0; i < rows; i++)
					allm_qb_dequantize_row(dt, tile + i * k, w, k, o + i);
			else
				allm_to_f32(tile, (const char *)w + (size_t)o * k * esz, dt,
					    (size_t)(rows * k));
			blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)rows,
				   (blasint)k, 1.0f, x, (blasint)k, tile, (blasint)k, 0.0f, y + o,
				   (blasint)m);
		}
		allm_free(tile);
	}
	if (bias) {
		float *b = allm_malloc((size_t)m * sizeof(float));
		if (!b)
			return -ENOMEM;
		/* a quantized GEMM's bias is f32 */
		allm_to_f32(b, bias, allm_dtype_is_qblock(dt) ? ALLM_DTYPE_F32 : dt,
			    (size_t)m);
		for (int64_t i = 0; i < n; i++)
			for (int64_t o = 0; o < m; o++)
				y[i * m + o] += b[o];
		allm_free(b);
	}
	return 0;
}

int cpu_blas_init(struct cpu_ctx *c, const char *name, struct allm_err *err)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&mu);
	if (!blas_name && name)
		blas_name = name;
	pthread_mutex_unlock(&mu);
	pthread_once(&blas_once, blas_open);
	if (!blas_sgemm)
		return allm_err_set(err, -ENOENT, "--gemm openblas: cannot load OpenBLAS (%s)", blas_error);
	blas_set_threads(c->n_threads);
	return 0;
}
