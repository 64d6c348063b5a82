/* The CPU fast path's thread pool: persistent workers, one job at a time.
 *
 * A job is cut into n_chunks contiguous chunks, and each thread (the caller
 * included) gets a home range of neighbouring chunks, which it claims front to back
 * from its own atomic word (gen | hi | lo). A thread that has finished its range
 * takes chunks from the back of the others', so a worker that the OS has
 * descheduled (a 2-core machine shared with other processes) delays nothing: the
 * others take its chunks. Home ranges keep each thread on one run of neighbouring
 * items: a decode GEMV then streams one stretch of W per thread, whose software
 * prefetch runs on from one chunk into the next (one shared counter dealt chunks
 * alternately, and each chunk began with a cold stream: 2-5 % slower on an AMD
 * EPYC). The caller returns when `done` reaches n_chunks; a worker waking up late
 * finds the words belong to another job (or have no chunk left) and goes back to
 * sleep. Workers spin on `gen` for a short while after each job before sleeping on
 * `work_cv`. */
#include "cpu-threads.h"
#include "common.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a worker (or the caller waiting for workers) polls before sleeping.
 * Long enough to cover the gap between two ops of one step, short enough that an
 * idle engine goes quiet at once. */
#define POOL_SPIN_NS 100000
/* Then how long a worker keeps polling between sched_yield()s, before it sleeps:
 * other threads of this CPU run, but the CPU stays awake. A worker that slept
 * during a lone request's prefill (stories260K, 17 tokens, arrivals 50 ms
 * apart, 2 threads) made it 0.53-0.56 ms instead of 0.23-0.25 (the time with
 * one thread): on a virtual machine, waking a sleeping thread, whose virtual
 * CPU halted, costs hundreds of microseconds. */
#define POOL_YIELD_NS 2000000
/* Chunks per thread: a little slack so that a slow or late thread is made up for. */
#define POOL_CHUNKS_PER_THREAD 4
#define POOL_MAX_THREADS 1024

/* A home word: job generation (32 bits) | end of the range (16) | next chunk (16). */
#define HOME(gen, hi, lo) (((uint64_t)(gen) << 32) | ((uint64_t)(hi) << 16) | (uint64_t)(lo))
#define HOME_GEN(v) ((uint32_t)((v) >> 32))
#define HOME_HI(v) ((uint32_t)((v) >> 16) & 0xffff)
#define HOME_LO(v) ((uint32_t)(v) & 0xffff)

/* One thread's home range, on a cache line of its own (the owner and thieves CAS it). */
struct pool_home {
	_Atomic uint64_t w; /* see HOME() */
	char pad[64 - sizeof(uint64_t)];
};

struct pool_scratch {
	void *raw; /* allm_malloc'ed block */
	void *aligned; /* raw rounded up to 64 bytes */
	size_t cap; /* usable bytes from `aligned` */
	char pad[64 - 3 * sizeof(void *)]; /* one cache line per thread */
};

struct pool_worker {
	struct cpu_pool *pool;
	int tid; /* 1..n_threads-1; 0 is the caller of cpu_pool_run */
	pthread_t thread;
};

struct cpu_pool {
	int n_threads; /* caller included */
	int n_started; /* workers actually started (for a half-built pool) */
	struct pool_worker *workers; /* [n_threads - 1] */
	struct pool_scratch *scratch; /* [n_threads] */
	struct pool_home *home; /* [n_threads], 64-byte aligned in home_raw */
	void *home_raw;

	pthread_mutex_t run_mu; /* serializes cpu_pool_run callers */
	pthread_mutex_t mu; /* guards sleeping on the condvars */
	pthread_cond_t work_cv; /* gen changed or stop set */
	pthread_cond_t done_cv; /* done reached the job's n_chunks */

	/* The current job; written by the caller before the home words are published
	 * (release), read by a thread only after it claimed a chunk of that job
	 * (acquire), which also proves the job is still running. */
	void (*fn)(void *arg, int tid, int64_t begin, int64_t end);
	void *arg;
	int64_t n_items;
	int64_t n_chunks;

	_Atomic int64_t done; /* chunks of the current job finished */
	_Atomic uint32_t gen; /* bumped per job: wakes the workers */
	_Atomic bool stop; /* destroy: workers exit */
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Claims one chunk of job `gen` from home range `h`: its front for its owner, its
 * back for a thief. Returns the chunk, or -1 when the range has none left (or
 * belongs to another job). */
static int64_t claim(struct pool_home *h, uint32_t gen, bool owner)
{
	uint64_t v = atomic_load_explicit(&h->w, memory_order_relaxed);
	for (;;) {
		uint32_t lo = HOME_LO(v), hi = HOME_HI(v);
		if (HOME_GEN(v) != gen || lo >= hi)
			return -1;
		uint64_t nv = owner ? HOME(gen, hi, lo + 1) : HOME(gen, hi - 1, lo);
		/* acquire on success: pairs with the caller's release store of the
		 * word, so fn, arg and n_items of this job are visible; and the job
		 * cannot end before our chunk is done, so they stay valid. */
		if (atomic_compare_exchange_weak_explicit(&h->w, &v, nv, memory_order_acquire,
							  memory_order_relaxed))
			return owner ? lo : hi - 1;
	}
}

/* Runs chunks of job `gen`: this thread's home range, then the others' leftovers,
 * until none is left. */
static void run_chunks(struct cpu_pool *p, int tid, uint32_t gen)
{
	for (int i = 0; i < p->n_threads; i++) {
		int v = (tid + i) % p->n_threads;
		int64_t c;
		while ((c = claim(&p->home[v], gen, i == 0)) >= 0) {
			int64_t n = p->n_chunks;
			/* Chunk bounds depend only on (n_items, n_chunks). */
			int64_t b = p->n_items * c / n, e = p->n_items * (c + 1) / n;
			if (b < e)
				p->fn(p->arg, tid, b, e);
			/* release: the chunk's outputs happen before the caller sees done. */
			if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == n &&
			    tid != 0) {
				pthread_mutex_lock(&p->mu);
				pthread_cond_signal(&p->done_cv);
				pthread_mutex_unlock(&p->mu);
			}
		}
	}
}

/* Waits until gen differs from `seen` or stop is set; returns the new gen. */
static uint32_t wait_job(struct cpu_pool *p, uint32_t seen)
{
	int64_t t0 = now_ns();
	for (unsigned i = 1;; i++) {
		uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed);
		if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed))
			return g;
		cpu_relax();
		if ((i & 255) == 0 && now_ns() - t0 > POOL_SPIN_NS)
			break;
	}
	while (now_ns() - t0 < POOL_YIELD_NS) {
		uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed);
		if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed))
			return g;
		sched_yield();
	}
	pthread_mutex_lock(&p->mu);
	uint32_t g;
	while ((g = atomic_load_explicit(&p->gen, memory_order_relaxed)) == seen &&
	       !atomic_load_explicit(&p->stop, memory_order_relaxed))
		pthread_cond_wait(&p->work_cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	return g;
}

static void *worker_main(void *argp)
{
	struct pool_worker *w = argp;
	struct cpu_pool *p = w->pool;
	uint32_t seen = 0;

	for (;;) {
		seen = wait_job(p, seen);
		if (atomic_load_explicit(&p->stop, memory_order_relaxed))
			break;
		run_chunks(p, w->tid, seen);
	}
	return NULL;
}

int cpu_pool_size(const struct cpu_pool *p)
{
	return p ? p->n_threads : 1;
}

void cpu_pool_destroy(struct cpu_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store_explicit(&p->stop, true, memory_order_relaxed);
	pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n_started; i++)
		pthread_join(p->workers[i].thread, NULL);
	if (p->scratch)
		for (int i = 0; i < p->n_threads; i++)
			allm_free(p->scratch[i].raw);
	pthread_cond_destroy(&p->done_cv);
	pthread_cond_destroy(&p->work_cv);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->run_mu);
	allm_free(p->scratch);
	allm_free(p->home_raw);
	allm_free(p->workers);
	allm_free(p);
}

int cpu_pool_create(int n_threads, struct cpu_pool **ret)
{
	if (n_threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = n > 0 ? (int)ALLM_MIN(n, POOL_MAX_THREADS) : 1;
	}
	if (n_threads > POOL_MAX_THREADS)
		return -EINVAL;

	struct cpu_pool *p = allm_calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->n_threads = n_threads;
	pthread_mutex_init(&p->run_mu, NULL);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work_cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	p->scratch = allm_calloc((size_t)n_threads, sizeof(*p->scratch));
	p->workers = allm_calloc((size_t)n_threads, sizeof(*p->workers));
	p->home_raw = allm_calloc((size_t)n_threads + 1, sizeof(*p->home));
	p->home = p->home_raw ? (void *)(((uintptr_t)p->home_raw + 63) & ~(uintptr_t)63) : NULL;
	if (!p->scratch || !p->workers || !p->home) {
		cpu_pool_destroy(p);
		return -ENOMEM;
	}
	for (int i = 0; i < n_threads - 1; i++) {
		struct pool_worker *w = &p->workers[i];
		w->pool = p;
		w->tid = i + 1;
		int r = pthread_create(&w->thread, NULL, worker_main, w);
		if (r) {
			cpu_pool_destroy(p);
			return -r;
		}
		p->n_started++;
	}
	*ret = p;
	return 0;
}

static void wait_done(struct cpu_pool *p, int64_t n_chunks)
{
	int64_t t0 = now_ns();
	for (unsigned i = 1;; i++) {
		/* acquire: pairs with the workers' acq_rel increments of done. */
		if (atomic_load_explicit(&p->done, memory_order_acquire) == n_chunks)
			return;
		cpu_relax();
		if ((i & 255) == 0 && now_ns() - t0 > POOL_SPIN_NS)
			break;
	}
	pthread_mutex_lock(&p->mu);
	while (atomic_load_explicit(&p->done, memory_order_acquire) != n_chunks)
		pthread_cond_wait(&p->done_cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void cpu_pool_run_tid(struct cpu_pool *p, int64_t n_items,
		      void (*fn)(void *arg, int tid, int64_t begin, int64_t end), void *arg)
{
	cpu_pool_run_chunks(p, n_items, POOL_CHUNKS_PER_THREAD, fn, arg);
}

void cpu_pool_run_chunks(struct cpu_pool *p, int64_t n_items, int chunks_per_thread,
			 void (*fn)(void *arg, int tid, int64_t begin, int64_t end), void *arg)
{
	if (n_items <= 0)
		return;
	if (!p || p->n_threads == 1 || n_items < 2) {
		if (p)
			pthread_mutex_lock(&p->run_mu); /* tid 0's scratch is shared */
		fn(arg, 0, 0, n_items);
		if (p)
			pthread_mutex_unlock(&p->run_mu);
		return;
	}
	pthread_mutex_lock(&p->run_mu);
	chunks_per_thread = ALLM_MAX(1, chunks_per_thread);
	int64_t n_chunks = ALLM_MIN(ALLM_MIN(n_items, (int64_t)p->n_threads * chunks_per_thread),
				    0xffff);
	uint32_t gen = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
	p->fn = fn;
	p->arg = arg;
	p->n_items = n_items;
	p->n_chunks = n_chunks;
	atomic_store_explicit(&p->done, 0, memory_order_relaxed);
	/* release: the job fields above are visible to whoever claims a chunk. */
	for (int t = 0; t < p->n_threads; t++)
		atomic_store_explicit(&p->home[t].w,
				      HOME(gen, n_chunks * (t + 1) / p->n_threads,
					   n_chunks * t / p->n_threads),
				      memory_order_release);
	/* Bumped under mu so that a worker about to sleep cannot miss it. */
	pthread_mutex_lock(&p->mu);
	atomic_store_explicit(&p->gen, gen, memory_order_relaxed);
	pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->mu);

	run_chunks(p, 0, gen);
	wait_done(p, n_chunks);
	pthread_mutex_unlock(&p->run_mu);
}

struct plain_job {
	void (*fn)(void *arg, int64_t begin, int64_t end);
	void *arg;
};

static void plain_trampoline(void *argp, int tid, int64_t begin, int64_t end)
{
	struct plain_job *j = argp;
	j->fn(j->arg, begin, end);
}

void cpu_pool_run(struct cpu_pool *p, int64_t n_items,
		  void (*fn)(void *arg, int64_t begin, int64_t end), void *arg)
{
	struct plain_job j = { fn, arg };
	cpu_pool_run_tid(p, n_items, plain_trampoline, &j);
}

void *cpu_pool_scratch(struct cpu_pool *p, int tid, size_t bytes)
{
	if (!p || tid < 0 || tid >= p->n_threads)
		return NULL;
	struct pool_scratch *s = &p->scratch[tid];
	if (bytes <= s->cap && s->aligned)
		return s->aligned;
	if (bytes > SIZE_MAX - 64)
		return NULL;
	void *raw = allm_malloc(bytes + 64);
	if (!raw)
		return NULL;
	allm_free(s->raw);
	s->raw = raw;
	s->aligned = (void *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
	s->cap = bytes;
	return s->aligned;
}

void cpu_pool_fail(_Atomic int *err, int code)
{
	int zero = 0;
	atomic_compare_exchange_strong(err, &zero, code);
}

void *cpu_pool_scratch_or_fail(struct cpu_pool *p, int tid, size_t bytes, _Atomic int *err)
{
	void *s = cpu_pool_scratch(p, tid, bytes);
	if (!s)
		cpu_pool_fail(err, -ENOMEM);
	return s;
}
