/* The CPU backend's vtable. "Device" memory is host RAM; the two KV pools are still
 * two separate allocations so a swap is a real copy (DESIGN §5). Each op picks the
 * reference loops or the fast path from ctx->reference. */
#include "cpu-backend.h"
#include "cpu-gemm-qblock.h"
#include "cpu-threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#define CTX(be) ((struct cpu_ctx *)(be)->ctx)

static const char *cpu_name(allm_backend_t *be)
{
	return "cpu";
}

static const char *cpu_describe(allm_backend_t *be)
{
	return CTX(be)->desc;
}

static void cpu_destroy(allm_backend_t *be)
{
	if (!be)
		return;
	struct cpu_ctx *c = CTX(be);
	if (c) {
		cpu_fast_fini(c);
		allm_free(c);
	}
	allm_free(be);
}

static bool cpu_supports(allm_backend_t *be, enum allm_backend_op op, enum allm_dtype dt)
{
	/* GGUF block weights: matrices and embedding tables */
	if (allm_dtype_is_qblock(dt))
		return op == ALLM_OP_GEMM || op == ALLM_OP_EMBEDDING;
	return op < ALLM_OP_COUNT && dt < ALLM_DTYPE_COUNT;
}

/* Anonymous mappings: page aligned, zero like cudaMemset'd memory, and committed
 * lazily, so a large KV pool costs only the pages that are used. The first page
 * keeps the mapping's size for cpu_free(). */
#define CPU_HDR 4096

static int cpu_alloc(allm_backend_t *be, size_t bytes, void **ret_ptr)
{
	size_t total = bytes + CPU_HDR;
	if (total < bytes)
		return allm_err_set(&be->last_err, -ENOMEM, "cpu: cannot allocate %zu bytes", bytes);
	char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return allm_err_set(&be->last_err, -ENOMEM, "cpu: cannot allocate %zu bytes", bytes);
	memcpy(p, &total, sizeof(total));
	*ret_ptr = p + CPU_HDR;
	return 0;
}

static void cpu_free(allm_backend_t *be, void *ptr)
{
	if (!ptr)
		return;
	char *p = (char *)ptr - CPU_HDR;
	size_t total;
	memcpy(&total, p, sizeof(total));
	munmap(p, total);
}

/* Elastic memory's pages on host RAM. Every allocation is a private anonymous
 * mapping (cpu_alloc), so MADV_DONTNEED empties a page at once (it leaves the
 * RSS; the next touch maps a zero page in: MAP has nothing to do) and mincore
 * says what is mapped. Chosen over memfd + fallocate(PUNCH_HOLE): the same
 * effect with no file to keep. */
static int cpu_pages(allm_backend_t *be, void *ptr, size_t bytes, enum allm_pages_verb verb,
		     size_t *ret_bytes)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)ptr, hi = lo + bytes;
	uintptr_t in0 = (lo + ps - 1) & ~(uintptr_t)(ps - 1), in1 = hi & ~(uintptr_t)(ps - 1);
	uintptr_t ov0 = lo & ~(uintptr_t)(ps - 1), ov1 = (hi + ps - 1) & ~(uintptr_t)(ps - 1);
	switch (verb) {
	case ALLM_PAGES_SIZE:
		*ret_bytes = ps;
		return 0;
	case ALLM_PAGES_RETURN:
		/* only ever on our own mappings */
		if (in1 > in0 && madvise((void *)in0, in1 - in0, MADV_DONTNEED))
			return allm_err_set(&be->last_err, -errno, "cpu: madvise of %zu bytes: %s",
					    (size_t)(in1 - in0), strerror(errno));
		return 0;
	case ALLM_PAGES_MAP:
		return 0;
	case ALLM_PAGES_RESIDENT: {
		size_t pages = (ov1 - ov0) / ps, n = 0;
		unsigned char vec[4096];
		for (size_t off = 0; off < pages; off += sizeof(vec)) {
			size_t k = ALLM_MIN(sizeof(vec), pages - off);
			if (mincore((void *)(ov0 + off * ps), k * ps, vec))
				return allm_err_set(&be->last_err, -errno, "cpu: mincore: %s", strerror(errno));
			for (size_t i = 0; i < k; i++)
				n += vec[i] & 1;
		}
		*ret_bytes = n * ps;
		return 0;
	}
	}
	return allm_err_set(&be->last_err, -EINVAL, "cpu: unknown pages verb %d", (int)verb);
}

static int cpu_copy(allm_backend_t *be, void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
	return 0;
}

static int cpu_copy_async(allm_backend_t *be, void *dst, const void *src, size_t bytes,
			  enum allm_copy_dir dir)
{
	/* No copy engine on the CPU: the copy happens now and its time is what a
	 * later copy_wait() reports, so the swap predictor sees real costs. */
	double t0 = allm_now();
	memcpy(dst, src, bytes);
	CTX(be)->copy_seconds += allm_now() - t0;
	return 0;
}

static int cpu_copy_wait(allm_backend_t *be, double *ret_seconds)
{
	if (ret_seconds)
		*ret_seconds = CTX(be)->copy_seconds;
	CTX(be)->copy_seconds = 0.0;
	return 0;
}

static int cpu_synchronize(allm_backend_t *be)
{
	return 0;
}

static int cpu_mem_info(allm_backend_t *be, size_t *ret_free, size_t *ret_total)
{
	struct sysinfo si;
	if (sysinfo(&si))
		return -errno;
	*ret_total = (size_t)si.totalram * si.mem_unit;
	/* MemAvailable counts reclaimable cache; sysinfo's freeram does not. */
	size_t avail = (size_t)si.freeram * si.mem_unit;
	FILE *f = fopen("/proc/meminfo", "r");
	if (f) {
		char line[128];
		unsigned long long kb;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
				avail = (size_t)kb * 1024;
				break;
			}
		fclose(f);
	}
	*ret_free = avail;
	return 0;
}

static int cpu_embedding(allm_backend_t *be, float *y, const void *table, enum allm_dtype dt,
			 const int32_t *ids, int64_t n, int64_t dim)
{
	cpu_ref_embedding(y, table, dt, ids, n, dim);
	return 0;
}

static int cpu_rmsnorm(allm_backend_t *be, float *y, const float *x, const void *w,
		       enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	struct cpu_ctx *c = CTX(be);
	if (c->reference)
		cpu_ref_rmsnorm(y, x, w, dt, n, dim, eps);
	else
		cpu_fast_rmsnorm(c, y, x, w, dt, n, dim, eps);
	return 0;
}

static int cpu_layernorm(allm_backend_t *be, float *y, const float *x, const void *w,
			 const void *b, enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	cpu_ref_layernorm(y, x, w, b, dt, n, dim, eps);
	return 0;
}

static int cpu_gemm(allm_backend_t *be, float *y, const float *x, const void *w,
		    const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m)
{
	struct cpu_ctx *c = CTX(be);
	if (c->reference) {
		cpu_ref_gemm(y, x, w, bias, dt, n, k, m);
		return 0;
	}
	if (c->blas)
		return cpu_blas_gemm(c, y, x, w, bias, dt, n, k, m);
	return cpu_fast_gemm(c, y, x, w, bias, dt, n, k, m);
}

static int cpu_gemm_multi(allm_backend_t *be, int n_mats, float *const *ys, const float *x,
			  const void *const *ws, const void *const *biases, enum allm_dtype dt,
			  int64_t n, int64_t k, const int64_t *ms)
{
	struct cpu_ctx *c = CTX(be);
	if (!c->reference && !c->blas && cpu_fast_gemm_fuses(c, n_mats, dt, n, k, ms))
		return cpu_fast_gemm_multi(c, n_mats, ys, x, ws, biases, dt, n, k, ms);
	for (int i = 0; i < n_mats; i++) {
		int r = cpu_gemm(be, ys[i], x, ws[i], biases[i], dt, n, k, ms[i]);
		if (r)
			return r;
	}
	return 0;
}

static int cpu_rope(allm_backend_t *be, float *q, float *k, const int32_t *pos,
		    const float *inv_freq, int64_t n, int32_t n_heads, int32_t n_kv_heads,
		    int32_t head_dim)
{
	struct cpu_ctx *c = CTX(be);
	if (c->reference)
		cpu_ref_rope(q, k, pos, inv_freq, n, n_heads, n_kv_heads, head_dim);
	else
		cpu_fast_rope(c, q, k, pos, inv_freq, n, n_heads, n_kv_heads, head_dim);
	return 0;
}

/* A gated activation, act(gate) * up, by the reference loops or the fast path. */
static int gated(allm_backend_t *be, float *y, const float *gate, const float *up, int64_t n,
		 void (*ref)(float *, const float *, const float *, int64_t),
		 void (*fast)(struct cpu_ctx *, float *, const float *, const float *, int64_t))
{
	struct cpu_ctx *c = CTX(be);
	if (c->reference)
		ref(y, gate, up, n);
	else
		fast(c, y, gate, up, n);
	return 0;
}

static int cpu_silu_mul(allm_backend_t *be, float *y, const float *gate, const float *up,
			int64_t n)
{
	return gated(be, y, gate, up, n, cpu_ref_silu_mul, cpu_fast_silu_mul);
}

static int cpu_gelu_mul(allm_backend_t *be, float *y, const float *gate, const float *up,
			int64_t n)
{
	return gated(be, y, gate, up, n, cpu_ref_gelu_mul, cpu_fast_gelu_mul);
}

static int cpu_scale(allm_backend_t *be, float *y, const float *x, float s, int64_t n)
{
	cpu_ref_scale(y, x, s, n);
	return 0;
}

static int cpu_relu(allm_backend_t *be, float *y, const float *x, int64_t n)
{
	cpu_ref_relu(y, x, n);
	return 0;
}

static int cpu_add(allm_backend_t *be, float *y, const float *a, const float *b, int64_t n)
{
	struct cpu_ctx *c = CTX(be);
	if (c->reference)
		cpu_ref_add(y, a, b, n);
	else
		cpu_fast_add(c, y, a, b, n);
	return 0;
}

static int cpu_gather_rows(allm_backend_t *be, float *y, const float *x, const int32_t *rows,
			   int64_t n, int64_t dim)
{
	cpu_ref_gather_rows(y, x, rows, n, dim);
	return 0;
}

static int cpu_kv_write(allm_backend_t *be, void *kv_pool, const struct allm_kv_layout *lay,
			int32_t layer, const float *k, const float *v,
			const struct allm_attn_meta *meta)
{
	struct cpu_ctx *c = CTX(be);
	if (c->reference)
		cpu_ref_kv_write(kv_pool, lay, layer, k, v, meta);
	else
		cpu_fast_kv_write(c, kv_pool, lay, layer, k, v, meta);
	return 0;
}

static int cpu_attention(allm_backend_t *be, float *out, const float *q, const void *kv_pool,
			 const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
			 float scale, const struct allm_attn_meta *meta)
{
	struct cpu_ctx *c = CTX(be);
	int r = c->reference ? cpu_ref_attention(out, q, kv_pool, lay, layer, n_heads, scale, meta)
			     : cpu_fast_attention(c, out, q, kv_pool, lay, layer, n_heads, scale, meta);
	if (r)
		return allm_err_set(&be->last_err, r, "cpu: attention failed: out of memory");
	return 0;
}

static int cpu_argmax(allm_backend_t *be, int32_t *ret_ids, const float *logits, int64_t n,
		      int64_t vocab)
{
	cpu_ref_argmax(ret_ids, logits, n, vocab);
	return 0;
}

static int cpu_topk(allm_backend_t *be, float *ret_vals, int32_t *ret_ids, const float *logits,
		    int64_t n, int64_t vocab, int32_t k)
{
	if (k < 1 || k > ALLM_TOPK_MAX || k > vocab)
		return allm_err_set(&be->last_err, -EINVAL, "cpu: topk k=%d outside 1..min(%lld, %d)",
				    k, (long long)vocab, ALLM_TOPK_MAX);
	uint64_t scratch[ALLM_TOPK_MAX]; /* k (value, id) pairs */
	for (int64_t i = 0; i < n; i++)
		allm_topk_host(logits + i * vocab, vocab, k, ret_vals + i * k, ret_ids + i * k,
			       scratch);
	return 0;
}

static int cpu_timer_start(allm_backend_t *be)
{
	CTX(be)->timer_t0 = allm_now();
	return 0;
}

static int cpu_timer_stop(allm_backend_t *be, double *ret_seconds)
{
	*ret_seconds = allm_now() - CTX(be)->timer_t0;
	return 0;
}

static const struct allm_backend_i cpu_iface = {
	.version = ALLM_BACKEND_VERSION,
	.name = cpu_name,
	.describe = cpu_describe,
	.destroy = cpu_destroy,
	.supports = cpu_supports,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.host_alloc = cpu_alloc,
	.host_free = cpu_free,
	.upload = cpu_copy,
	.download = cpu_copy,
	.copy_async = cpu_copy_async,
	.copy_wait = cpu_copy_wait,
	.synchronize = cpu_synchronize,
	.mem_info = cpu_mem_info,
	.embedding = cpu_embedding,
	.rmsnorm = cpu_rmsnorm,
	.layernorm = cpu_layernorm,
	.gemm = cpu_gemm,
	.gemm_multi = cpu_gemm_multi,
	.rope = cpu_rope,
	.silu_mul = cpu_silu_mul,
	.relu = cpu_relu,
	.add = cpu_add,
	.gather_rows = cpu_gather_rows,
	.kv_write = cpu_kv_write,
	.attention = cpu_attention,
	.argmax = cpu_argmax,
	.timer_start = cpu_timer_start,
	.timer_stop = cpu_timer_stop,
	.topk = cpu_topk,
	.gelu_mul = cpu_gelu_mul,
	.scale = cpu_scale,
	.pages = cpu_pages,
};

int allm_backend_cpu_create(const struct allm_backend_opts *opts, allm_backend_t **ret,
			    struct allm_err *err)
{
	struct allm_backend_opts def = {0};
	allm_backend_t *be = allm_calloc(1, sizeof(*be));
	struct cpu_ctx *c = allm_calloc(1, sizeof(*c));
	int r = -ENOMEM;

	if (!opts)
		opts = &def;
	if (!be || !c) {
		allm_err_set(err, r, "cpu backend: out of memory");
		goto fail;
	}
	be->iface = &cpu_iface;
	be->ctx = c;
	be->device_is_host = true;
	c->reference = opts->reference;
	c->blas = opts->blas && !opts->reference;
	c->n_threads = opts->n_threads > 0 ? opts->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (c->n_threads < 1)
		c->n_threads = 1;
	if (c->reference) {
		snprintf(c->desc, sizeof(c->desc), "cpu (reference loops, 1 thread)");
	} else {
		r = cpu_fast_init(c, opts->cpu_isa, err);
		if (r)
			goto fail;
		cpu_qb_set_env(opts->env);
		if (c->blas && (r = cpu_blas_init(c, opts->env ? opts->env->openblas : NULL, err))) {
			cpu_fast_fini(c);
			goto fail;
		}
		snprintf(c->desc, sizeof(c->desc), "cpu (%d threads, gemm: %s)", c->n_threads,
			 c->blas ? "openblas" : cpu_fast_gemm_name(c));
	}
	*ret = be;
	return 0;
fail:
	allm_free(c);
	allm_free(be);
	return r;
}
