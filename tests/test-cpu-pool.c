/* Description: the CPU thread pool (kernels/cpu/cpu-threads.c): every item of every
 * job is run exactly once whatever the thread count and item count; each thread
 * takes its own home range front to back, and a thread that finished its range
 * takes what another has not begun from the back of that one's range, so a worker
 * stuck in a chunk (a descheduled vCPU) delays nothing but that chunk. */
#include "cpu-threads.h"
#include "common.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test-check.h"

struct count_job {
	_Atomic int *seen; /* per item */
	_Atomic int *by_tid; /* items per thread */
};

static void count_fn(void *arg, int tid, int64_t begin, int64_t end)
{
	struct count_job *j = arg;
	for (int64_t i = begin; i < end; i++)
		atomic_fetch_add(&j->seen[i], 1);
	atomic_fetch_add(&j->by_tid[tid], (int)(end - begin));
}

/* Each item exactly once, over many back-to-back jobs of assorted sizes and
 * chunkings. */
static void test_exactly_once(void)
{
	static const int64_t sizes[] = { 1, 2, 3, 7, 8, 9, 64, 1000, 100003 };
	for (int threads = 1; threads <= 4; threads++) {
		struct cpu_pool *p = NULL;
		CHECK(cpu_pool_create(threads, &p) == 0, "cpu_pool_create(%d)", threads);
		if (!p)
			continue;
		CHECK(cpu_pool_size(p) == threads, "size %d, want %d", cpu_pool_size(p), threads);
		for (size_t s = 0; s < ALLM_ARRAY_SIZE(sizes); s++)
			for (int rep = 0; rep < 50; rep++) {
				int64_t n = sizes[s];
				_Atomic int *seen = calloc((size_t)n, sizeof(*seen));
				_Atomic int by_tid[4] = { 0 };
				struct count_job j = { seen, by_tid };
				/* the default chunking, and one to many chunks per thread */
				static const int cpt[] = { 1, 16, 1 << 20 };
				if (rep % 4 == 0)
					cpu_pool_run_tid(p, n, count_fn, &j);
				else
					cpu_pool_run_chunks(p, n, cpt[rep % 4 - 1], count_fn, &j);
				int64_t bad = 0, sum = 0;
				for (int64_t i = 0; i < n; i++)
					bad += seen[i] != 1;
				for (int t = 0; t < 4; t++)
					sum += by_tid[t];
				CHECK(bad == 0, "%d threads, %lld items: %lld not run exactly once", threads,
				      (long long)n, (long long)bad);
				CHECK(sum == n, "%d threads, %lld items: threads report %lld", threads,
				      (long long)n, (long long)sum);
				free(seen);
				if (bad)
					break;
			}
		cpu_pool_destroy(p);
	}
}

/* Two threads, 8 one-item chunks: homes [0, 4) (the caller) and [4, 8) (the worker).
 * The worker stops 200 ms in the first chunk it takes (chunk 4, its home's front);
 * the caller, 5 ms a chunk, must meanwhile run its own range in order and then the
 * worker's from the back. */
struct order_job {
	int caller_items[8];
	_Atomic int n_caller;
	_Atomic int worker_items;
	_Atomic bool worker_slept;
};

static void order_fn(void *arg, int tid, int64_t begin, int64_t end)
{
	struct order_job *j = arg;
	if (tid == 0) { /* 5 ms a chunk: the worker has time to claim its first */
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		for (int64_t i = begin; i < end; i++)
			j->caller_items[atomic_fetch_add(&j->n_caller, 1)] = (int)i;
		return;
	}
	atomic_fetch_add(&j->worker_items, (int)(end - begin));
	if (!atomic_exchange(&j->worker_slept, true)) {
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static void test_home_ranges_and_stealing(void)
{
	struct cpu_pool *p = NULL;
	CHECK(cpu_pool_create(2, &p) == 0, "cpu_pool_create(2)");
	if (!p)
		return;
	int stuck = 0;
	for (int rep = 0; rep < 3; rep++) {
		struct order_job j = { .n_caller = 0 };
		cpu_pool_run_tid(p, 8, order_fn, &j);
		int nc = atomic_load(&j.n_caller), nw = atomic_load(&j.worker_items);
		CHECK(nc + nw == 8, "rep %d: %d + %d items run", rep, nc, nw);
		/* the worker ran at most the one chunk it was stuck in */
		CHECK(nw <= 1, "rep %d: the worker ran %d items while stuck: nobody took its range", rep,
		      nw);
		stuck += nw == 1;
		/* the caller: its home front to back, then the worker's from the back */
		static const int want[8] = { 0, 1, 2, 3, 7, 6, 5, 4 };
		for (int i = 0; i < nc && i < 8; i++)
			CHECK(j.caller_items[i] == want[i], "rep %d: the caller's item %d was %d, want %d",
			      rep, i, j.caller_items[i], want[i]);
	}
	/* (a worker that woke after the caller had taken everything ran nothing) */
	CHECK(stuck > 0, "the worker never took a chunk in 3 jobs of 40 ms");
	cpu_pool_destroy(p);
}

int main(void)
{
	test_exactly_once();
	test_home_ranges_and_stealing();
	if (n_fail) {
		fprintf(stderr, "%d failure(s)\n", n_fail);
		return 1;
	}
	printf("ok\n");
	return 0;
}
