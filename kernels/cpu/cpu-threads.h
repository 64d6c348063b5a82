/* A small persistent thread pool for the CPU fast path.
 *
 * One job at a time: cpu_pool_run() splits [0, n_items) into contiguous chunks (a
 * few per thread), which the calling thread and the workers claim until none is
 * left; it returns when all are done. Each thread starts on a home range of
 * neighbouring chunks, in order, and then takes the chunks others have not begun,
 * so a descheduled worker delays only the chunk it holds. Between jobs the workers
 * spin briefly (a decode step issues many small ops back to back) and then sleep
 * on a condvar, so an idle engine burns no core.
 * Concurrent callers are serialized; fn must not call back into the same pool.
 *
 * Every item is processed by exactly one call of fn, on whichever thread claimed
 * it, so a job whose per-item arithmetic does not depend on the chunking gives the
 * same bits whatever the thread count and timing. */
#ifndef ALLM_CPU_THREADS_H
#define ALLM_CPU_THREADS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cpu_pool;

/* Creates a pool of n_threads threads in all, the caller of cpu_pool_run() being
 * one of them (so n_threads - 1 workers are started; n_threads <= 0 means online
 * cores). Returns 0 or -errno; *ret untouched on failure. The caller owns the pool
 * and frees it with cpu_pool_destroy(). */
int cpu_pool_create(int n_threads, struct cpu_pool **ret);
/* Stops and joins the workers, frees the scratch buffers. Accepts NULL. */
void cpu_pool_destroy(struct cpu_pool *p);
/* Threads in the pool, the caller included (1 for a NULL pool). */
int cpu_pool_size(const struct cpu_pool *p);

/* Runs fn(arg, begin, end) over contiguous chunks of [0, n_items), in parallel, the
 * calling thread included. A NULL pool, a 1-thread pool or n_items < 2 runs inline
 * as one call fn(arg, 0, n_items). */
void cpu_pool_run(struct cpu_pool *p, int64_t n_items,
		  void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);
/* Same, and fn also gets the index in [0, cpu_pool_size(p)) of the thread running
 * the chunk, e.g. to pick its cpu_pool_scratch(). */
void cpu_pool_run_tid(struct cpu_pool *p, int64_t n_items,
		      void (*fn)(void *arg, int tid, int64_t begin, int64_t end), void *arg);

/* Same, with chunks_per_thread chunks per thread instead of the default 4 (at
 * most 65535 chunks in all): finer chunks leave less for one thread to finish
 * alone at the end of a job, at the cost of more claims. */
void cpu_pool_run_chunks(struct cpu_pool *p, int64_t n_items, int chunks_per_thread,
			 void (*fn)(void *arg, int tid, int64_t begin, int64_t end), void *arg);

/* A per-thread scratch buffer of at least `bytes` bytes, 64-byte aligned, grown on
 * demand and kept until cpu_pool_destroy() (contents not preserved when it grows).
 * Only thread `tid` may call it, inside a job (or outside any job for tid 0 when no
 * job runs). Returns NULL when out of memory or for a NULL pool. */
void *cpu_pool_scratch(struct cpu_pool *p, int tid, size_t bytes);
/* Records code in *err unless another failure came first (a job's threads report
 * their first failure this way). */
void cpu_pool_fail(_Atomic int *err, int code);
/* The same inside a job whose threads report failure through *err: when out of
 * memory it stores -ENOMEM there unless another failure came first, and returns
 * NULL (the caller's thread stops). */
void *cpu_pool_scratch_or_fail(struct cpu_pool *p, int tid, size_t bytes, _Atomic int *err);

#ifdef __cplusplus
}
#endif

#endif
