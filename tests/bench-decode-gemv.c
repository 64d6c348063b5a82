/* Description: the GEMVs of one batch-1 decode step of a Llama shape, alone: every
 * layer's q, k, v, o, gate, up and down (each layer its own weights, so the chain
 * streams from DRAM as a decode does) and the LM head, in the executor's order and
 * through the same backend calls (gemm_multi for q/k/v and gate/up). It prints the
 * chain's weight read rate, the ceiling of batch-1 decode on this machine: what a
 * step spends beyond it goes to attention, norms, sampling and the pool (compare
 * `allm-run --bench` at batch 1).
 *
 * Each step is followed by a plain read of the same weights on as many threads (a
 * thread sums its half of each matrix, as bench-cpu-probe reads), so the chain is
 * measured against the bandwidth of the same moment: on a shared host the read
 * rate moves by half within seconds (33-57 GB/s on a 2-vCPU AMD EPYC), and
 * `paired_ratio` (the median of chain rate / read rate over neighbouring pairs)
 * stays put where the two medians alone do not.
 *
 * With -g FILE.gguf the chain is instead every matrix of that file in its own
 * type (Q4_K, Q6_K, ...: the blocks as stored), in the file's order, each as one
 * gemm: the decode GEMVs of a model the engine may not run end to end (its token
 * table left out unless it is also the head); -T TYPE keeps the matrices of one
 * type only (the bandwidth of that format's kernel).
 *
 * usage: bench-decode-gemv [-t threads] [-d f32|f16|bf16|q8_0|q4_0|q4_1] [-i ISA] [-s seconds]
 *                          [-L layers] [-D hidden] [-F mlp] [-V vocab] [-n rows]
 *                          [-g FILE.gguf [-T q4_k|q6_k|...]]
 * Defaults: --dummy medium's shape (12 x 768, MLP 2048, vocab 32000), n = 1, 3 s,
 * the backend's thread count (all cores). */
#include "backend.h"
#include "bench-opts.h"
#include "gguf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { M_Q, M_K, M_V, M_O, M_G, M_U, M_D, M_PER_LAYER };

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float frand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((int64_t)(rng_state >> 40) % 2001 - 1000) / 1000.0f * 0.05f;
}

/* An m x k matrix of dtype dt with small random values. */
static void *make_w(enum allm_dtype dt, int64_t m, int64_t k, size_t *bytes)
{
	size_t n = (size_t)(m * k);
	float *f = malloc(n * sizeof(float));
	*bytes = bench_w_bytes(dt, m, k);
	void *w = aligned_alloc(64, (*bytes + 63) & ~(size_t)63);
	if (!f || !w) {
		free(f);
		free(w);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		f[i] = frand();
	bench_w_store(dt, w, f, m, k);
	free(f);
	return w;
}

/* The plain read: threads sum their slice of every buffer, started and stopped by
 * barriers; the main thread is reader 0. */
struct reader {
	void *const *bufs;
	const size_t *lens;
	int n_bufs, n_threads, id;
	pthread_barrier_t *start, *stop;
	volatile bool *quit;
	uint64_t sink;
};

typedef uint64_t v8u64 __attribute__((vector_size(64)));

static uint64_t read_slices(struct reader *r)
{
	v8u64 a = { 0 }, b = { 0 };
	for (int i = 0; i < r->n_bufs; i++) {
		size_t lines = r->lens[i] / 64;
		size_t l0 = lines * (size_t)r->id / (size_t)r->n_threads;
		size_t l1 = lines * (size_t)(r->id + 1) / (size_t)r->n_threads;
		const v8u64 *p = (const v8u64 *)r->bufs[i];
		size_t l = l0;
		for (; l + 2 <= l1; l += 2)
			a += p[l], b += p[l + 1];
		if (l < l1)
			a += p[l];
	}
	a += b;
	uint64_t s = 0;
	for (int j = 0; j < 8; j++)
		s += a[j];
	return s;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	for (;;) {
		pthread_barrier_wait(r->start);
		if (*r->quit)
			return NULL;
		r->sink += read_slices(r);
		pthread_barrier_wait(r->stop);
	}
}

/* The file's matrices (see -g): their dtype (the ggml type's own), k and m. */
struct file_mat {
	enum allm_dtype dt;
	int64_t k, m;
	char name[64];
};

static enum allm_dtype file_dtype(enum allm_gguf_ttype t)
{
	switch (t) {
	case ALLM_GGML_F32: return ALLM_DTYPE_F32;
	case ALLM_GGML_F16: return ALLM_DTYPE_F16;
	case ALLM_GGML_BF16: return ALLM_DTYPE_BF16;
	case ALLM_GGML_Q8_0: return ALLM_DTYPE_Q8_0;
	case ALLM_GGML_Q4_0: return ALLM_DTYPE_Q4_0;
	case ALLM_GGML_Q4_1: return ALLM_DTYPE_Q4_1;
	case ALLM_GGML_Q5_0: return ALLM_DTYPE_Q5_0;
	case ALLM_GGML_Q5_1: return ALLM_DTYPE_Q5_1;
	case ALLM_GGML_Q4_K: return ALLM_DTYPE_Q4_K;
	case ALLM_GGML_Q5_K: return ALLM_DTYPE_Q5_K;
	case ALLM_GGML_Q6_K: return ALLM_DTYPE_Q6_K;
	default: return ALLM_DTYPE_COUNT;
	}
}

/* Copies the file's matrices (of type `only` unless it is NULL) into w; returns
 * their count, or -1. */
static int load_file(const char *path, const char *only, void **w, size_t *lens, struct file_mat *fm,
		     int cap)
{
	struct allm_err err = { { 0 } };
	struct allm_gguf *g = NULL;
	if (allm_gguf_open(path, &g, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	bool has_head = allm_gguf_find_tensor(g, "output.weight") != NULL;
	int n = 0;
	for (uint64_t i = 0; i < g->n_tensors && n < cap; i++) {
		const struct allm_gguf_tensor *t = &g->tensors[i];
		enum allm_dtype dt = file_dtype(t->type);
		if (t->n_dims != 2 || (has_head && !strcmp(t->name, "token_embd.weight")))
			continue;
		if (dt == ALLM_DTYPE_COUNT) {
			fprintf(stderr, "%s: %s has type %s: left out\n", path, t->name, allm_gguf_ttype_name(t->type));
			continue;
		}
		if (only && strcmp(allm_dtype_name(dt), only))
			continue;
		fm[n].dt = dt, fm[n].k = t->ne[0], fm[n].m = t->ne[1];
		snprintf(fm[n].name, sizeof(fm[n].name), "%s", t->name);
		lens[n] = t->nbytes;
		w[n] = aligned_alloc(64, (t->nbytes + 63) & ~(size_t)63);
		if (!w[n])
			return -1;
		memcpy(w[n], t->data, t->nbytes);
		n++;
	}
	allm_gguf_close(g);
	return n;
}

/* CPU seconds of the whole process (every thread): on a host busier than its cores
 * the rate per CPU second is what a kernel does with the core it is given. */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct allm_backend_env env; /* ALLM_QB_R8, ALLM_QB_SCALES, ALLM_OPENBLAS */
	allm_backend_env_read(&env);
	struct allm_backend_opts o = { .env = &env };
	enum allm_dtype dt = ALLM_DTYPE_F32;
	int64_t L = 12, D = 768, F = 2048, V = 32000, n = 1;
	double min_s = 3.0;
	const char *file = NULL, *only = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "t:d:i:s:L:D:F:V:n:g:T:")) != -1) {
		int c = bench_common_opt(opt, optarg, &o, &min_s, &dt);
		if (c > 0)
			continue;
		switch (c < 0 ? '?' : opt) {
		case 'L': L = atol(optarg); break;
		case 'D': D = atol(optarg); break;
		case 'F': F = atol(optarg); break;
		case 'V': V = atol(optarg); break;
		case 'n': n = atol(optarg); break;
		case 'g': file = optarg; break;
		case 'T': only = optarg; break;
		default:
		usage:
			fprintf(stderr, "usage: %s [-t threads] [-d f32|f16|bf16|q8_0|q4_0|q4_1] [-i ISA] "
					"[-s seconds] [-L layers] [-D hidden] [-F mlp] [-V vocab] "
					"[-n rows] [-g FILE.gguf [-T TYPE]]\n", argv[0]);
			return 2;
		}
	}
	if (L <= 0 || D <= 0 || F <= 0 || V <= 0 || n <= 0 || n > 64)
		goto usage;

	allm_backend_t *be = NULL;
	struct allm_err err = { { 0 } };
	if (allm_backend_cpu_create(&o, &be, &err)) {
		fprintf(stderr, "backend: %s\n", err.msg);
		return 1;
	}
	const int64_t shape_k[M_PER_LAYER] = { D, D, D, D, D, D, F };
	const int64_t shape_m[M_PER_LAYER] = { D, D, D, D, F, F, D };
	/* every layer's matrices, then the LM head; their bytes, for the plain read */
	int n_bufs = (int)(L * M_PER_LAYER) + 1;
	void **w = calloc((size_t)n_bufs, sizeof(void *)), *head;
	size_t *lens = calloc((size_t)n_bufs, sizeof(size_t)), total = 0;
	float *x = malloc((size_t)(n * ALLM_MAX(F, D)) * sizeof(float));
	float *y[M_PER_LAYER], *logits = malloc((size_t)(n * V) * sizeof(float));
	for (int i = 0; i < M_PER_LAYER; i++)
		y[i] = malloc((size_t)(n * ALLM_MAX(F, D)) * sizeof(float));
	if (!w || !lens || !x || !logits) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	struct file_mat *fm = NULL;
	int64_t kmax = ALLM_MAX(F, D), mmax = ALLM_MAX(F, D);
	if (file) { /* the file's matrices instead */
		enum { CAP = 4096 };
		fm = calloc(CAP, sizeof(*fm));
		free(w), free(lens);
		w = calloc(CAP, sizeof(void *)), lens = calloc(CAP, sizeof(size_t));
		if (!fm || !w || !lens || (n_bufs = load_file(file, only, w, lens, fm, CAP)) <= 0) {
			fprintf(stderr, "%s: no matrices%s%s\n", file, only ? " of type " : "", only ? only : "");
			return 1;
		}
		for (int i = 0; i < n_bufs; i++) {
			kmax = ALLM_MAX(kmax, fm[i].k), mmax = ALLM_MAX(mmax, fm[i].m);
			total += lens[i];
		}
		free(x), free(y[0]);
		x = malloc((size_t)(n * kmax) * sizeof(float));
		y[0] = malloc((size_t)(n * mmax) * sizeof(float));
		fprintf(stderr, "bench-decode-gemv: %d matrices of %s, %.1f MB\n", n_bufs, file, total / 1e6);
	}
	for (int i = 0; i < n_bufs && !file; i++) {
		bool is_head = i == n_bufs - 1;
		int64_t m = is_head ? V : shape_m[i % M_PER_LAYER], k = is_head ? D : shape_k[i % M_PER_LAYER];
		if (!(w[i] = make_w(dt, m, k, &lens[i]))) {
			fprintf(stderr, "out of memory\n");
			return 1;
		}
		total += lens[i];
	}
	head = w[n_bufs - 1];
	for (int64_t i = 0; i < n * kmax; i++)
		x[i] = frand() * 20.0f;

	/* the readers, one per backend thread */
	int n_threads = o.n_threads > 0 ? o.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	struct reader *rd = calloc((size_t)n_threads, sizeof(*rd));
	pthread_t *th = calloc((size_t)n_threads, sizeof(*th));
	pthread_barrier_t start, stop;
	volatile bool quit = false;
	if (!rd || !th) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	pthread_barrier_init(&start, NULL, (unsigned)n_threads);
	pthread_barrier_init(&stop, NULL, (unsigned)n_threads);
	for (int i = 0; i < n_threads; i++) {
		rd[i] = (struct reader){ w, lens, n_bufs, n_threads, i, &start, &stop, &quit, 0 };
		if (i && pthread_create(&th[i], NULL, reader_main, &rd[i])) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	}

	/* step, read, step, read...: the executor's order and calls, then the plain read */
	size_t cap = 4096, n_t = 0;
	double *t = malloc(cap * sizeof(double)), *tr = malloc(cap * sizeof(double));
	double *ratio = malloc(cap * sizeof(double)), t0 = allm_now();
	int r = 0;
	if (!t || !tr || !ratio) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	double cpu_step = 0, cpu_read = 0;
	while (!r && n_t < cap && (allm_now() - t0 < min_s || n_t < 5)) {
		double c0 = cpu_now();
		double s0 = allm_now();
		for (int i = 0; file && i < n_bufs && !r; i++)
			r = be->iface->gemm(be, y[0], x, w[i], NULL, fm[i].dt, n, fm[i].k, fm[i].m);
		for (int64_t l = 0; l < L && !r && !file; l++) {
			void *const *lw = &w[l * M_PER_LAYER];
			const void *qkv_w[3] = { lw[M_Q], lw[M_K], lw[M_V] }, *gu_w[2] = { lw[M_G], lw[M_U] };
			const void *nob[3] = { NULL, NULL, NULL };
			float *const qkv_y[3] = { y[M_Q], y[M_K], y[M_V] }, *const gu_y[2] = { y[M_G], y[M_U] };
			const int64_t qkv_m[3] = { D, D, D }, gu_m[2] = { F, F };
			r = be->iface->gemm_multi(be, 3, qkv_y, x, qkv_w, nob, dt, n, D, qkv_m);
			if (!r)
				r = be->iface->gemm(be, y[M_O], x, lw[M_O], NULL, dt, n, D, D);
			if (!r)
				r = be->iface->gemm_multi(be, 2, gu_y, x, gu_w, nob, dt, n, D, gu_m);
			if (!r)
				r = be->iface->gemm(be, y[M_D], x, lw[M_D], NULL, dt, n, F, D);
		}
		if (!r && !file)
			r = be->iface->gemm(be, logits, x, head, NULL, dt, n, D, V);
		double s1 = allm_now(), c1 = cpu_now();
		pthread_barrier_wait(&start);
		rd[0].sink += read_slices(&rd[0]);
		pthread_barrier_wait(&stop);
		double s2 = allm_now(), c2 = cpu_now();
		cpu_step += c1 - c0, cpu_read += c2 - c1;
		t[n_t] = s1 - s0, tr[n_t] = s2 - s1;
		ratio[n_t] = tr[n_t] / t[n_t];
		n_t++;
	}
	quit = true;
	pthread_barrier_wait(&start);
	for (int i = 1; i < n_threads; i++)
		pthread_join(th[i], NULL);
	if (r) {
		fprintf(stderr, "gemm failed: %d\n", r);
		return 1;
	}
	qsort(t, n_t, sizeof(double), cmp_double);
	qsort(tr, n_t, sizeof(double), cmp_double);
	qsort(ratio, n_t, sizeof(double), cmp_double);
	printf("backend %s\n", be->iface->describe(be));
	if (file) {
		printf("file %s\n", file);
		printf("matrices %d\n", n_bufs);
	}
	printf("weights %s\n", file ? (only ? only : "the file's") : allm_dtype_name(dt));
	printf("rows %lld\n", (long long)n);
	printf("bytes_per_step %zu\n", total);
	printf("steps %zu\n", n_t);
	printf("best_ms %.3f\n", t[0] * 1e3);
	printf("median_ms %.3f\n", t[n_t / 2] * 1e3);
	printf("best_gbs %.2f\n", total / t[0] * 1e-9);
	printf("median_gbs %.2f\n", total / t[n_t / 2] * 1e-9);
	printf("read_best_gbs %.2f\n", total / tr[0] * 1e-9);
	printf("read_median_gbs %.2f\n", total / tr[n_t / 2] * 1e-9);
	printf("paired_ratio %.3f\n", ratio[n_t / 2]);
	/* per CPU second (all threads): a loaded host's time slices left out */
	printf("cpu_gbs %.2f\n", (double)total * (double)n_t / cpu_step * 1e-9);
	printf("read_cpu_gbs %.2f\n", (double)total * (double)n_t / cpu_read * 1e-9);
	printf("cpu_ratio %.3f\n", cpu_read / cpu_step);
	printf("paired_ratio_p10_p90 %.3f %.3f\n", ratio[n_t / 10], ratio[n_t * 9 / 10]);
	if (rd[0].sink == 42) /* keeps the reads */
		fputc(' ', stderr);
	free(t), free(tr), free(ratio), free(lens), free(rd), free(th);
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&stop);
	for (int i = 0; i < n_bufs; i++)
		free(w[i]);
	free(w);
	free(fm);
	free(x);
	free(logits);
	for (int i = 0; i < M_PER_LAYER; i++)
		free(y[i]);
	allm_backend_destroy(be);
	return 0;
}
