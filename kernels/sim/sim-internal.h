/* Private to the simulated device: its state, shared by the vtable's memory and
 * clock half (sim-backend.c), its ops (sim-ops.c) and its memory map (sim-mem.c). */
#ifndef ALLM_SIM_INTERNAL_H
#define ALLM_SIM_INTERNAL_H

#include "sim-backend.h"
#include "sim-cost.h"

#include <time.h>

/* Device allocations up to this size are backed by real (lazily committed) host
 * pages, so the engine's step metadata and sampled ids can be written and read
 * back; larger ones (weights, activations, KV pools) are address space only. */
#define SIM_REAL_MAX ((size_t)16 << 20)

/* One allocation. */
struct sim_region {
	char *base;
	size_t bytes; /* as asked */
	size_t map; /* mapped length (page-rounded) */
	bool host; /* host_alloc: counts against no device memory */
	bool real; /* readable and writable; else PROT_NONE: a touch faults */
	uint8_t *gone; /* [chunks of SIM_PAGE] given back by the pages op; NULL: all backed */
};

/* The modelled page of elastic memory (the pages op): a GPU's VMM granularity. */
#define SIM_PAGE ((size_t)2 << 20)

struct sim_mem {
	struct sim_region *v;
	int32_t n, cap;
	size_t dev_used; /* device bytes allocated */
};

int sim_mem_alloc(struct sim_mem *m, size_t bytes, bool host, bool real, void **ret);
/* Frees an allocation of this map; returns its region's device bytes (0 for host). */
size_t sim_mem_free(struct sim_mem *m, void *p);
/* Whether [p, p + bytes) lies inside one real allocation. */
bool sim_mem_real(const struct sim_mem *m, const void *p, size_t bytes);
void sim_mem_fini(struct sim_mem *m);
/* The pages op (backend.h, version 5) on a device allocation, bookkeeping only:
 * which SIM_PAGE chunks a GPU's VMM would hold backed. -ENOTSUP for host memory,
 * -EINVAL for a range outside one allocation. */
int sim_mem_pages(struct sim_mem *m, void *p, size_t bytes, enum allm_pages_verb verb, size_t *ret_bytes);

/* What the current forward has fed, for deterministic results: each token's id and
 * position make a key; the rows gathered for the head pick their keys. */
struct sim_fwd {
	bool have_ids; /* the first embedding of this forward recorded ids */
	bool have_keys; /* keys built (first attention of this forward) */
	int64_t n_tok;
	int32_t *ids; /* [n_tok] */
	uint64_t *keys; /* [n_tok] */
	int64_t cap;
	uint64_t *sel; /* [n_sel] keys of the gathered rows */
	int64_t n_sel, sel_cap;
	const int32_t *meta_pos; /* the attention meta the shape below was computed for */
	struct allm_sim_attn_shape shape;
	const float *logits; /* output of the last gemm: the head's logits */
	int64_t logits_rows, logits_cols;
	uint64_t serial; /* forwards so far: keys of rows whose ids were unreadable */
};

/* Wall and CPU clocks at some instant. */
struct sim_stamp {
	double wall, cpu;
};

struct sim_ctx {
	struct allm_sim_profile *prof;
	struct sim_mem mem;
	char desc[320];
	double now; /* the virtual clock, seconds */
	/* its disk: when the line of transfers is next idle, and when the write
	 * behind in each of the disk tier's stage slots lands (free once past) */
	double disk_idle;
	double *slot_end;
	int32_t n_slot_end;
	double timer_t0;
	double copy_pending; /* seconds of async copies since the last copy_wait */
	double wall; /* wall seconds spent inside this backend's calls */
	double cpu; /* CPU seconds of this thread inside this backend's calls */
	bool in_fwd; /* between timer_start and timer_stop: the forward is timed whole */
	struct sim_stamp fwd0; /* clocks at timer_start */
	struct sim_fwd fwd;
};

#define SIM(be) ((struct sim_ctx *)(be)->ctx)

/* This thread's CPU time, seconds: with the wall clock, what the host spends in
 * the device (a shared machine's load inflates wall time, not CPU time). */
static inline double sim_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall and CPU clocks at the start of a call, read only outside a forward (a
 * forward is timed whole from timer_start to timer_stop, so its hundreds of ops
 * cost no clock reads). */
static inline struct sim_stamp sim_stamp(const struct sim_ctx *c)
{
	struct sim_stamp s = {0, 0};
	if (!c->in_fwd) {
		s.wall = allm_now();
		s.cpu = sim_cpu_now();
	}
	return s;
}

/* Advances the virtual clock by `seconds` of device time for a call that began at
 * st (sim_stamp). */
static inline void sim_charge(struct sim_ctx *c, double seconds, struct sim_stamp st)
{
	c->now += seconds;
	if (!c->in_fwd) {
		c->wall += allm_now() - st.wall;
		c->cpu += sim_cpu_now() - st.cpu;
	}
}

/* The ops of the vtable (sim-ops.c), as backend.h documents them. */
int sim_embedding(allm_backend_t *be, float *y, const void *table, enum allm_dtype dt,
			 const int32_t *ids, int64_t n, int64_t dim);
int sim_rmsnorm(allm_backend_t *be, float *y, const float *x, const void *w,
		       enum allm_dtype dt, int64_t n, int64_t dim, float eps);
int sim_layernorm(allm_backend_t *be, float *y, const float *x, const void *w,
			 const void *b, enum allm_dtype dt, int64_t n, int64_t dim, float eps);
int sim_gemm(allm_backend_t *be, float *y, const float *x, const void *w,
		    const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m);
int sim_rope(allm_backend_t *be, float *q, float *k, const int32_t *pos,
		    const float *inv_freq, int64_t n, int32_t n_heads, int32_t n_kv_heads,
		    int32_t head_dim);
int sim_silu_mul(allm_backend_t *be, float *y, const float *gate, const float *up,
			int64_t n);
int sim_relu(allm_backend_t *be, float *y, const float *x, int64_t n);
int sim_gelu_mul(allm_backend_t *be, float *y, const float *gate, const float *up, int64_t n);
int sim_scale(allm_backend_t *be, float *y, const float *x, float s, int64_t n);
int sim_add(allm_backend_t *be, float *y, const float *a, const float *b, int64_t n);
int sim_gather_rows(allm_backend_t *be, float *y, const float *x, const int32_t *rows,
			   int64_t n, int64_t dim);
int sim_kv_write(allm_backend_t *be, void *kv_pool, const struct allm_kv_layout *lay,
			int32_t layer, const float *k, const float *v,
			const struct allm_attn_meta *meta);
int sim_attention(allm_backend_t *be, float *out, const float *q, const void *kv_pool,
			 const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
			 float scale, const struct allm_attn_meta *meta);
int sim_argmax(allm_backend_t *be, int32_t *ret_ids, const float *logits, int64_t n,
		      int64_t vocab);
int sim_topk(allm_backend_t *be, float *ret_vals, int32_t *ret_ids, const float *logits,
		    int64_t n, int64_t vocab, int32_t k);
void sim_fwd_begin(struct sim_ctx *c);
void sim_fwd_fini(struct sim_fwd *f);
/* Fills dst with the values a download of [src, src + bytes) yields: synthesized
 * logits rows when src lies in the last logits, else zeros. */
void sim_fill_download(struct sim_ctx *c, void *dst, const void *src, size_t bytes);

#endif
