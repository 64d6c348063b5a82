/* Description: the limits of this machine for bench/cpu-roofline.sh: read bandwidth
 * and peak f32 FMA rate (independent FMA chains in registers, the widest vectors the
 * CPU has), each the best of several timed passes. The read bandwidth is the fastest
 * of several ways to read a buffer far larger than the caches (a single way reads
 * slower than what a decode achieves on some hosts, so no one of them is the limit):
 *   contig    every thread sums its half (slice) of the buffer, one stream
 *   streams8  the slice as 8 parts read side by side, a line of each in turn (as a
 *             GEMV reads 8 rows of W)
 *   pf        contig with software prefetch 1 KiB ahead into L1 and 4 KiB into L2
 *   nta       contig with prefetchnta 1 KiB ahead (non-temporal: L2 not polluted)
 *   chunks    threads take 64 KiB chunks in turn (neighbouring memory at once)
 *   huge      contig on a second buffer of 2 MiB pages (MADV_HUGEPAGE)
 *   one       one thread reads the whole buffer (what one core can pull)
 *
 * usage: bench-cpu-probe [-t threads] [-m MiB] [-r reps]
 * prints: "read_gbs X" (the fastest pattern), "read_best NAME", "read_gbs_NAME Y" per
 * pattern (its best pass), "fma_gflops Y", and the vector width used. */
#include "backend.h"

#include <pthread.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define PROBE_X86 1
#endif

struct probe {
	int n_threads;
	bool wide; /* AVX-512 (else AVX2) */
	float *buf;
	float *huge; /* the same size in 2 MiB pages (NULL: not granted) */
	size_t n; /* floats in buf */
	int what; /* 0 read, 1 fma */
	int streams; /* read: interleaved streams per thread */
	int pattern; /* read: enum pattern */
	pthread_barrier_t start, stop;
	float sink[64];
	/* Each worker's own start and end: the main thread is one thread too many on a
	 * machine with as many cores as workers, and a clock read there after the start
	 * barrier can run late (measured: 2 threads "faster" than 3x one thread). */
	double t_start[256], t_end[256];
};

struct worker {
	struct probe *p;
	int id;
};

enum pattern { P_CONTIG, P_STREAMS8, P_PF, P_NTA, P_CHUNKS, P_HUGE, P_ONE, P_COUNT };
static const char *const pattern_name[P_COUNT] = {"contig", "streams8", "pf", "nta", "chunks",
						    "huge", "one"};
#define CHUNK_FLOATS (16384) /* 64 KiB */

#define FMA_ITERS 4000000L

#ifdef PROBE_X86
__attribute__((target("avx512f"))) static float read512(const float *a, size_t n)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	for (size_t i = 0; i + 64 <= n; i += 64) {
		s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
		s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
		s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
		s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

/* The slice as `streams` parts read side by side, a cache line of each in turn,
 * as the decode GEMV reads 4-8 rows of W at once: the limit is the faster way to
 * read (on an AMD EPYC VM 8 streams read 1-3 % faster than one). */
__attribute__((target("avx512f"))) static float read512_streams(const float *a, size_t n, int streams)
{
	size_t part = n / (size_t)streams / 16 * 16;
	__m512 s[8];
	for (int k = 0; k < 8; k++)
		s[k] = _mm512_setzero_ps();
	for (size_t i = 0; i < part; i += 16)
		for (int k = 0; k < streams; k++)
			s[k] = _mm512_add_ps(s[k], _mm512_load_ps(a + (size_t)k * part + i));
	for (int k = 1; k < 8; k++)
		s[0] = _mm512_add_ps(s[0], s[k]);
	return _mm512_reduce_add_ps(s[0]);
}

/* contig with software prefetch: 1 KiB ahead into L1, 4 KiB ahead into L2 (nta:
 * prefetchnta 1 KiB ahead instead). */
__attribute__((target("avx512f"))) static float read512_pf(const float *a, size_t n, bool nta)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	for (size_t i = 0; i + 64 <= n; i += 64) {
		if (nta) {
			_mm_prefetch((const char *)(a + i) + 1024, _MM_HINT_NTA);
		} else {
			_mm_prefetch((const char *)(a + i) + 1024, _MM_HINT_T0);
			_mm_prefetch((const char *)(a + i) + 4096, _MM_HINT_T1);
		}
		s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
		s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
		s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
		s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

/* Chunks id, id + threads, id + 2 threads, ... of the whole buffer. */
__attribute__((target("avx512f"))) static float read512_chunks(const float *a, size_t n, int id,
							      int threads)
{
	float r = 0.0f;
	for (size_t c = (size_t)id * CHUNK_FLOATS; c + CHUNK_FLOATS <= n; c += (size_t)threads * CHUNK_FLOATS)
		r += read512(a + c, CHUNK_FLOATS);
	return r;
}

__attribute__((target("avx2"))) static float read256(const float *a, size_t n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	for (size_t i = 0; i + 32 <= n; i += 32) {
		s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
		s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
		s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
		s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
	}
	float t[8];
	_mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

#define CHAINS 24 /* > latency x FMA ports, within 32 registers */
__attribute__((target("avx512f,fma"))) static float fma512(void)
{
	__m512 a[CHAINS], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-6f);
	for (int i = 0; i < CHAINS; i++)
		a[i] = _mm512_set1_ps((float)i);
	for (long it = 0; it < FMA_ITERS; it++) {
#pragma GCC unroll 24
		for (int i = 0; i < CHAINS; i++)
			a[i] = _mm512_fmadd_ps(a[i], x, y);
	}
	__m512 s = a[0];
	for (int i = 1; i < CHAINS; i++)
		s = _mm512_add_ps(s, a[i]);
	return _mm512_reduce_add_ps(s);
}

#define CHAINS2 12 /* 16 ymm registers */
__attribute__((target("avx2,fma"))) static float fma256(void)
{
	__m256 a[CHAINS2], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-6f);
	for (int i = 0; i < CHAINS2; i++)
		a[i] = _mm256_set1_ps((float)i);
	for (long it = 0; it < FMA_ITERS; it++) {
#pragma GCC unroll 12
		for (int i = 0; i < CHAINS2; i++)
			a[i] = _mm256_fmadd_ps(a[i], x, y);
	}
	float t[8], s = 0.0f;
	for (int i = 0; i < CHAINS2; i++) {
		_mm256_storeu_ps(t, a[i]);
		s += t[0] + t[7];
	}
	return s;
}
#endif

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct probe *p = w->p;
	size_t per = p->n / (size_t)p->n_threads / 64 * 64;
	const float *buf = p->pattern == P_HUGE ? p->huge : p->buf;
	float r = 0.0f;
	pthread_barrier_wait(&p->start);
	p->t_start[w->id] = allm_now();
#ifdef PROBE_X86
	if (p->what == 1)
		r = p->wide ? fma512() : fma256();
	else if (!p->wide)
		r = read256(buf + per * w->id, per);
	else if (p->pattern == P_STREAMS8)
		r = read512_streams(buf + per * w->id, per, 8);
	else if (p->pattern == P_PF || p->pattern == P_NTA)
		r = read512_pf(buf + per * w->id, per, p->pattern == P_NTA);
	else if (p->pattern == P_CHUNKS)
		r = read512_chunks(buf, p->n, w->id, p->n_threads);
	else if (p->pattern == P_ONE)
		r = read512(buf, p->n / 64 * 64);
	else
		r = read512(buf + per * w->id, per);
#endif
	p->t_end[w->id] = allm_now();
	p->sink[w->id % 64] = r;
	pthread_barrier_wait(&p->stop);
	return NULL;
}

/* One timed pass of all threads; seconds. */
static double pass(struct probe *p)
{
	pthread_t th[256];
	struct worker ws[256];
	int saved = p->n_threads;
	if (p->what == 0 && p->pattern == P_ONE)
		p->n_threads = 1;
	pthread_barrier_init(&p->start, NULL, (unsigned)p->n_threads + 1);
	pthread_barrier_init(&p->stop, NULL, (unsigned)p->n_threads + 1);
	for (int i = 0; i < p->n_threads; i++) {
		ws[i] = (struct worker){p, i};
		pthread_create(&th[i], NULL, worker_main, &ws[i]);
	}
	pthread_barrier_wait(&p->start);
	pthread_barrier_wait(&p->stop);
	for (int i = 0; i < p->n_threads; i++)
		pthread_join(th[i], NULL);
	double first = p->t_start[0], last = p->t_end[0];
	for (int i = 1; i < p->n_threads; i++) {
		first = ALLM_MIN(first, p->t_start[i]);
		last = ALLM_MAX(last, p->t_end[i]);
	}
	double t = last - first; /* the span in which all of the work was done */
	pthread_barrier_destroy(&p->start);
	pthread_barrier_destroy(&p->stop);
	p->n_threads = saved;
	return t;
}

int main(int argc, char **argv)
{
	struct probe p = {.n_threads = 2};
	long mib = 1024;
	int reps = 7, opt;
	while ((opt = getopt(argc, argv, "t:m:r:")) != -1) {
		switch (opt) {
		case 't': p.n_threads = atoi(optarg); break;
		case 'm': mib = atol(optarg); break;
		case 'r': reps = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-t threads] [-m MiB] [-r reps]\n", argv[0]);
			return 2;
		}
	}
	if (p.n_threads < 1 || p.n_threads > 256 || mib < 1 || reps < 1) {
		fprintf(stderr, "bench-cpu-probe: bad arguments\n");
		return 2;
	}
#ifndef PROBE_X86
	fprintf(stderr, "bench-cpu-probe: x86 only\n");
	return 1;
#else
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
		fprintf(stderr, "bench-cpu-probe: needs AVX2 + FMA\n");
		return 1;
	}
	p.wide = allm_cpu_isa_supported(ALLM_CPU_ISA_AVX512);
	p.n = (size_t)mib << 18;
	p.buf = aligned_alloc(64, p.n * sizeof(float));
	if (!p.buf) {
		fprintf(stderr, "bench-cpu-probe: cannot allocate %ld MiB\n", mib);
		return 1;
	}
	for (size_t i = 0; i < p.n; i++) /* touch every page; values that stay finite */
		p.buf[i] = (float)(i & 1023) * 1e-3f;
	size_t hbytes = (p.n * sizeof(float) + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	void *h = mmap(NULL, hbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h != MAP_FAILED) {
		madvise(h, hbytes, MADV_HUGEPAGE); /* a hint: the kernel may still use 4 KiB */
		p.huge = h;
		memcpy(p.huge, p.buf, p.n * sizeof(float));
	}
	double best_p[P_COUNT], best_f = 1e30;
	for (int k = 0; k < P_COUNT; k++)
		best_p[k] = 1e30;
	for (int i = 0; i < reps; i++) {
		p.what = 0;
		for (int k = 0; k < (p.wide ? P_COUNT : 1); k++) {
			if (k == P_HUGE && !p.huge)
				continue;
			p.pattern = k;
			best_p[k] = ALLM_MIN(best_p[k], pass(&p));
		}
		p.what = 1;
		best_f = ALLM_MIN(best_f, pass(&p));
	}
	size_t per_bytes = p.n / (size_t)p.n_threads / 64 * 64 * (size_t)p.n_threads * sizeof(float);
	double flops = (double)p.n_threads * FMA_ITERS * (p.wide ? CHAINS * 32.0 : CHAINS2 * 16.0);
	printf("threads %d\nvector %s\nbuffer_mib %ld\n", p.n_threads, p.wide ? "avx512" : "avx2", mib);
	int best = 0;
	double best_gbs = 0.0;
	for (int k = 0; k < P_COUNT; k++) {
		if (best_p[k] >= 1e30)
			continue;
		size_t bytes = k == P_ONE ? p.n / 64 * 64 * sizeof(float)
			       : k == P_CHUNKS ? p.n / CHUNK_FLOATS * CHUNK_FLOATS * sizeof(float) : per_bytes;
		double gbs = bytes / best_p[k] / 1e9;
		printf("read_gbs_%s %.2f\n", pattern_name[k], gbs);
		if (gbs > best_gbs)
			best_gbs = gbs, best = k;
	}
	printf("read_gbs %.2f\nread_best %s\nfma_gflops %.1f\n", best_gbs, pattern_name[best],
	       flops / best_f / 1e9);
	if (p.huge)
		munmap(p.huge, hbytes);
	free(p.buf);
	return 0;
#endif
}
