/* Private to the CPU backend: its state and the two implementations of the ops,
 * the naive reference loops (cpu-ref.c, cpu-attention.c) and the fast path
 * (cpu-fast.c: threads, attention; cpu-gemm*.c: the SIMD GEMM levels). The vtable
 * in cpu-backend.c picks one per op from ctx->reference. */
#ifndef ALLM_CPU_BACKEND_H
#define ALLM_CPU_BACKEND_H

#include "backend.h"

#include <pthread.h>

struct cpu_pool;
struct gemm_level;

struct cpu_ctx {
	int n_threads;
	bool reference; /* true: naive loops only, single thread */
	bool blas; /* GEMM through OpenBLAS (fast, not batch-invariant) */
	struct cpu_pool *pool; /* NULL in reference mode */
	const struct gemm_level *level; /* the SIMD level every GEMM uses (cpu-gemm.h) */
	pthread_mutex_t gemm_mu; /* guards the buffers below across concurrent callers */
	void *xbuf, *xbuf_raw; /* prepared activations (bf16 / int8 rows), aligned / raw */
	size_t xbuf_cap;
	void *bbuf, *bbuf_raw; /* the bias as f32 */
	size_t bbuf_cap;
	char desc[160];
	double timer_t0; /* timer_start() wall clock */
	double copy_seconds; /* time spent in copy_async since the last copy_wait */
};

/* --- reference ops (single-threaded, obvious loops) ------------------------ */

void cpu_ref_embedding(float *y, const void *table, enum allm_dtype dt, const int32_t *ids,
		       int64_t n, int64_t dim);
void cpu_ref_rmsnorm(float *y, const float *x, const void *w, enum allm_dtype dt,
		     int64_t n, int64_t dim, float eps);
/* Its second half for one row: y[j] = x[j] * inv * w[w0 + j], j < len. */
void cpu_ref_rmsnorm_scaled(float *y, const float *x, const void *w, enum allm_dtype dt,
			    int64_t w0, int64_t len, float inv);
void cpu_ref_layernorm(float *y, const float *x, const void *w, const void *b,
		       enum allm_dtype dt, int64_t n, int64_t dim, float eps);
/* y[n, m] = x[n, k] · W[m, k]ᵀ (+ bias) */
void cpu_ref_gemm(float *y, const float *x, const void *w, const void *bias,
		  enum allm_dtype dt, int64_t n, int64_t k, int64_t m);
void cpu_ref_rope(float *q, float *k, const int32_t *pos, const float *inv_freq, int64_t n,
		  int32_t n_heads, int32_t n_kv_heads, int32_t head_dim);
void cpu_ref_silu_mul(float *y, const float *gate, const float *up, int64_t n);
void cpu_ref_relu(float *y, const float *x, int64_t n);
void cpu_ref_add(float *y, const float *a, const float *b, int64_t n);
void cpu_ref_gather_rows(float *y, const float *x, const int32_t *rows, int64_t n,
			 int64_t dim);
void cpu_ref_kv_write(void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		      const float *k, const float *v, const struct allm_attn_meta *meta);
/* Its loop, 16-bit pools filled by to16 (allm_from_f32 or a SIMD twin with its bits). */
void cpu_kv_write_with(void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		       const float *k, const float *v, const struct allm_attn_meta *meta,
		       void (*to16)(void *dst, const float *src, enum allm_dtype dt, size_t n));
void cpu_ref_argmax(int32_t *ret_ids, const float *logits, int64_t n, int64_t vocab);
/* y = gelu_tanh(gate) * up (backend.h) */
void cpu_ref_gelu_mul(float *y, const float *gate, const float *up, int64_t n);
void cpu_ref_scale(float *y, const float *x, float s, int64_t n);

/* Attention of query token t, head h: out_row[head_dim] from q_row[head_dim] over
 * positions p0 .. ctx_len - 1 (p0 > 0: a sliding window, cpu_window_start).
 * `scores` is scratch of at least ctx_len - p0 floats. The reduction order
 * (keys in position order, one pass softmax then weighted sum) is fixed, so the
 * result for a token does not depend on the rest of the batch (DESIGN §6). */
void cpu_attention_one(float *out_row, const float *q_row, const void *kv_pool,
		       const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
		       const int32_t *block_table, int32_t p0, int32_t ctx_len, float scale,
		       float *scores);
/* The same with AVX2 + FMA (cpu-simd.c): its own fixed order, used by every x86
 * SIMD level. */
void cpu_attention_one_simd(float *out_row, const float *q_row, const void *kv_pool,
			    const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
			    const int32_t *block_table, int32_t p0, int32_t ctx_len, float scale,
			    float *scores);
/* The first position token t attends to: 0, or with a sliding window the oldest
 * of its last meta->window positions. */
static inline int32_t cpu_window_start(const struct allm_attn_meta *meta, int32_t t)
{
	int32_t p0 = meta->window > 0 ? meta->tok_pos[t] + 1 - meta->window : 0;
	return p0 > 0 ? p0 : 0;
}
/* Queries per tile of cpu_attention_tile_simd. */
#define CPU_ATT_TILE_Q 32
/* The same for n_q <= CPU_ATT_TILE_Q queries that share a sequence and a KV head:
 * query j (q_rows[j] -> out_rows[j], context ctx_lens[j]) gets the bits of
 * cpu_attention_one_simd alone; keys and values are read once per block of
 * positions for the whole tile. `scores` holds n_q rows of `stride` >= every
 * ctx_lens[j] floats. wide: the CPU has AVX-512 (the outputs' fma chains run 16
 * dims to a register; the same bits). q_kv_head (NULL: every query reads kv_head)
 * lets 8-dim heads mix KV heads of the same rows in one tile, query j reading
 * q_kv_head[j] >= kv_head: a decode's heads together, whose chains then overlap
 * (one query per KV head leaves each chain waiting on its own latency). Returns
 * false (nothing done) where it does not apply: a head size not a multiple of 8,
 * q_kv_head with another head size or out of range, or no x86 SIMD in this build. */
bool cpu_attention_tile_simd(float *const *out_rows, const float *const *q_rows,
			     const int32_t *ctx_lens, int32_t n_q, const void *kv_pool,
			     const struct allm_kv_layout *lay, int32_t layer, int32_t kv_head,
			     const int32_t *block_table, float scale, float *scores, int32_t stride,
			     bool wide, const int32_t *q_kv_head);
/* A token alone (a decode: context ctx) over KV heads [kh0, kh1), `group` query
 * heads each (q and out: the token's rows of all query heads), on an AVX-512 level:
 * each query gets the bits of cpu_attention_one_simd alone; a block of positions is
 * read for all those heads at once, the next block's rows prefetched in address
 * order (one head at a time reads a few hundred bytes of every K/V row). `scores`
 * holds (kh1 - kh0) x group x ctx floats. Returns false (nothing done) where it does
 * not apply: a head size not a multiple of 16, more than CPU_ATT_HEADS_MAX KV heads
 * or more than CPU_ATT_TILE_Q queries per head, or no x86 SIMD in this build (the
 * caller checks that the CPU has AVX-512). */
#define CPU_ATT_HEADS_MAX 16 /* KV heads of one cpu_attention_heads_simd call */
bool cpu_attention_heads_simd(float *out, const float *q, int32_t ctx, const void *kv_pool,
			      const struct allm_kv_layout *lay, int32_t layer, int32_t kh0, int32_t kh1,
			      int32_t group, const int32_t *block_table, float scale, float *scores);
/* y = gelu_tanh(gate) * up with AVX2 + FMA (tanh from the vector exp; |err| <
 * 1e-6 of |up| * (|gate| + 1) against the reference). */
void cpu_gelu_mul_simd(float *y, const float *gate, const float *up, int64_t n);
/* y = silu(gate) * up with AVX2 + FMA and a vector exp (|rel err| < 1e-6). */
void cpu_silu_mul_simd(float *y, const float *gate, const float *up, int64_t n);
/* cpu_ref_kv_write bit for bit, 16-bit pools converted 8 values at a time. */
void cpu_kv_write_simd(void *kv_pool, const struct allm_kv_layout *lay, int32_t layer,
		       const float *k, const float *v, const struct allm_attn_meta *meta);
/* cpu_ref_rmsnorm bit for bit, 16 rows' sums at once (AVX2 gathers). */
void cpu_rmsnorm_simd(float *y, const float *x, const void *w, enum allm_dtype dt, int64_t n,
		      int64_t dim, float eps);
/* Whole batch, single thread. */
int cpu_ref_attention(float *out, const float *q, const void *kv_pool,
		      const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
		      float scale, const struct allm_attn_meta *meta);

/* --- fast path (cpu-fast.c) -------------------------------------------------- */
/* Same contracts as the reference ops; results for one row never depend on how
 * many other rows are in the call (batch invariance, DESIGN §6). */
/* Starts the threads and picks the GEMM level (isa: AUTO or one this CPU has). */
int cpu_fast_init(struct cpu_ctx *c, enum allm_cpu_isa isa, struct allm_err *err);
void cpu_fast_fini(struct cpu_ctx *c);
/* Whether cpu_fast_gemm_multi takes these matrices together: always on the tile
 * path (few rows, or a level without a whole-call driver), and where the
 * whole-call driver runs, if the level has one for several matrices; else the
 * caller runs one GEMM each. */
bool cpu_fast_gemm_fuses(struct cpu_ctx *c, int n_mats, enum allm_dtype dt, int64_t n, int64_t k,
			 const int64_t *ms);
int cpu_fast_gemm_multi(struct cpu_ctx *c, int n_mats, float *const *ys, const float *x,
			const void *const *ws, const void *const *biases, enum allm_dtype dt,
			int64_t n, int64_t k, const int64_t *ms);
int cpu_fast_gemm(struct cpu_ctx *c, float *y, const float *x, const void *w,
		  const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m);
/* silu_mul over the threads (the SIMD version on x86 levels). */
void cpu_fast_silu_mul(struct cpu_ctx *c, float *y, const float *gate, const float *up, int64_t n);
/* gelu_mul likewise. */
void cpu_fast_gelu_mul(struct cpu_ctx *c, float *y, const float *gate, const float *up, int64_t n);
void cpu_fast_rmsnorm(struct cpu_ctx *c, float *y, const float *x, const void *w,
		      enum allm_dtype dt, int64_t n, int64_t dim, float eps);
void cpu_fast_rope(struct cpu_ctx *c, float *q, float *k, const int32_t *pos, const float *inv_freq,
		   int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim);
void cpu_fast_add(struct cpu_ctx *c, float *y, const float *a, const float *b, int64_t n);
void cpu_fast_kv_write(struct cpu_ctx *c, void *kv_pool, const struct allm_kv_layout *lay,
		       int32_t layer, const float *k, const float *v,
		       const struct allm_attn_meta *meta);
int cpu_fast_attention(struct cpu_ctx *c, float *out, const float *q, const void *kv_pool,
		       const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
		       float scale, const struct allm_attn_meta *meta);
/* OpenBLAS GEMM (cpu-gemm-blas.c), --gemm openblas; init opens the library. */
int cpu_blas_gemm(struct cpu_ctx *c, float *y, const float *x, const void *w,
		  const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m);
int cpu_blas_init(struct cpu_ctx *c, const char *name, struct allm_err *err);
/* Name of the GEMM level in use, for describe() ("avx2", "avx512-bf16"...). */
const char *cpu_fast_gemm_name(struct cpu_ctx *c);

#endif
