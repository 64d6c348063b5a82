/* GEMMs of GGUF block weights (Q8_0 .. Q6_K; kernels/qblock.h) on the CPU fast
 * path: one driver (cpu-gemm-qblock.c: activation quantization, items of 16 outputs,
 * threads) and one item kernel per SIMD family (portable C in the driver, AVX2 and
 * AVX-512 in cpu-gemm-qblock-x86.c, AMX tiles for many rows in
 * cpu-gemm-qblock-amx.c).
 *
 * Every level computes the same bits (the order is in cpu-gemm.h): the activations
 * are quantized per block of 32 by one formula, a block's integer dot product is
 * exact whatever instructions add it up, and what follows is one fma (with a min:
 * two) per block in increasing block order; the K formats' activations share one
 * scale per super-block of 256, so their integer and its fmas are per super-block. */
#ifndef ALLM_CPU_GEMM_QBLOCK_H
#define ALLM_CPU_GEMM_QBLOCK_H

#include <stdatomic.h>
#include "cpu-gemm.h"
#include "qblock.h"

#define QB_OUT 16 /* outputs (W rows) per item */

/* The block dtypes, in the order of a level's table of them (gemm_level.qb). */
#define QB_N_DTYPES 8
static inline int qb_dtype_index(enum allm_dtype dt)
{
	return (int)dt - (int)ALLM_DTYPE_Q8_0; /* Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K */
}

/* Bytes of one token's prepared activations for a k of nb blocks of 32:
 *   int8 xq[32 nb] | f32 dx[nb] | f32 sx[nb] | int32 s[nb] | int16 h[2 nb]  (padded to 64)
 * xq = round-half-even(x * 127 / amax) (zero past k), amax the largest |x| of the
 * block's grain (32 values; 256 for the K formats: qb_grain), dx = amax / 127 (the
 * same for the 8 blocks of a super-block), s = the block's sum of xq, sx = dx *
 * (float)s (the min term of the 32-value formats), h = the sums of xq per 16 values
 * (|h| <= 16 * 127; Q6_K's offset of 32 taken out per scale group, as llama.cpp's
 * bsums do, instead of a sign trick per value). */
static inline size_t qb_x_row_bytes(int64_t k)
{
	size_t nb = (size_t)allm_qb_blocks(k);
	return (32 * nb + 16 * nb + 63) & ~(size_t)63;
}

/* Values that share one activation scale for weights of dt. */
static inline int64_t qb_grain(enum allm_dtype dt)
{
	return allm_qb_values(dt);
}

struct qb_xrow {
	const int8_t *xq;
	const float *dx, *sx;
	const int32_t *s;
	const int16_t *h;
};

static inline struct qb_xrow qb_xrow(const void *xbuf, int64_t k, int64_t t)
{
	int64_t nb = allm_qb_blocks(k);
	const char *r = (const char *)xbuf + (size_t)t * qb_x_row_bytes(k);
	struct qb_xrow x = { (const int8_t *)r, (const float *)(r + 32 * nb),
			     (const float *)(r + 36 * nb), (const int32_t *)(r + 40 * nb),
			     (const int16_t *)(r + 44 * nb) };
	return x;
}

/* One matrix of a call. */
struct qb_mat {
	float *y; /* [n, m] */
	const uint8_t *w; /* [m] rows of allm_qb_row_bytes(dt, k) */
	const float *bias; /* [m] f32, or NULL */
	int64_t m;
};

/* One call: up to GEMM_MULTI_MAX matrices of the same activations, as one job whose
 * items [first[i], first[i + 1]) are matrix i's groups of QB_OUT outputs. */
struct qb_job {
	enum allm_dtype dt;
	int n_mats;
	struct qb_mat mat[GEMM_MULTI_MAX];
	int64_t first[GEMM_MULTI_MAX + 1];
	const void *xbuf; /* n rows of qb_x_row_bytes(k) */
	int64_t n, k, nb;
	size_t rb, bb; /* bytes of a W row, of a block */
	struct cpu_pool *pool;
	_Atomic int err;
};

/* A family's kernels. */
struct qb_impl {
	/* One token's activations into dst (qb_x_row_bytes(k)), one scale per grain
	 * (32 or 256) values; every family's bytes are the same. */
	void (*x_prep)(void *dst, const float *x, int64_t k, int64_t grain);
	/* Outputs [o, o + min(QB_OUT, m - o)) of matrix mt for tokens [t0, t1): y
	 * (+ bias). next: the W rows the thread reads after these (prefetched as it
	 * goes), or NULL. */
	void (*item)(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0,
		     int64_t t1, const uint8_t *next);
	/* Optional: the whole call by the family's own driver from whole_min_rows
	 * tokens on (AMX tiles); xbuf then has room for qb_amx_x_bytes(n, k) more
	 * after the n prepared rows. */
	int (*whole)(struct qb_job *j, bool inline_run, void *extra);
	int whole_min_rows;
};

/* The program's block-format switches (struct allm_backend_env: ALLM_QB_SCALES,
 * ALLM_QB_R8), set by cpu_qb_set_env when a fast CPU backend is created. They are
 * process-wide like what they steer (the scale fetch is measured once per process):
 * the last backend created sets them, the fetch takes the value at its first use. */
extern _Atomic int qb_scales_forced; /* 0 gather, 1 loads, -1 measured */
extern _Atomic bool qb_r8_off; /* the per-token items only */
void cpu_qb_set_env(const struct allm_backend_env *env);

/* The portable family (scalar C: the order of cpu-gemm.h written out). */
extern const struct qb_impl qb_impl_portable;
void qb_x_prep_scalar(void *dst, const float *x, int64_t k, int64_t grain);
#ifdef GEMM_X86
extern const struct qb_impl qb_impl_avx2, qb_impl_avx512_vnni, qb_impl_amx;
/* The levels' gemm_kern entries, QB_KERN_DTYPES' order. */
extern const struct gemm_kern gemm_qb_avx2[QB_N_DTYPES], gemm_qb_vnni[QB_N_DTYPES],
	gemm_qb_amx[QB_N_DTYPES];
void qb_x_prep_avx2(void *dst, const float *x, int64_t k, int64_t grain);
/* Prefill (QB_R8_MIN_TOK+ tokens, a whole item of QB_OUT rows): the item's rows
 * repacked eight at a time into row-interleaved groups and computed as an outer
 * product (cpu-gemm-qblock-r8.c), the same bits. false where it does not apply
 * (the caller's kernels run). */
#define QB_R8_MIN_TOK 4
bool qb_r8_item(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0, int64_t t1,
		const uint8_t *next);
/* The AVX2 items of the formats the AVX512-VNNI family computes with them (Q5_0,
 * Q5_1 and the K formats): the same code on every x86 level, so its bits are
 * those the avx2 level's tests check. */
void qb_item_avx2(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0,
		  int64_t t1, const uint8_t *next);
/* AVX512-VNNI's item (the AMX family's few-row path). */
void qb_item_vnni(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0,
		  int64_t t1, const uint8_t *next);
size_t qb_amx_x_bytes(int64_t n, int64_t k);
int qb_amx_whole(struct qb_job *j, bool inline_run, void *extra);
#endif

/* The whole GEMM (n_mats matrices of the same x) with impl's kernels; xbuf holds
 * gemm_qb_x_bytes(n, k). */
size_t gemm_qb_x_bytes(int64_t n, int64_t k);
int gemm_qb_run(const struct qb_impl *impl, enum allm_dtype dt, struct cpu_pool *pool,
		bool inline_run, void *xbuf, int n_mats, float *const *ys, const float *x,
		const void *const *ws, const float *const *biases, int64_t n, int64_t k,
		const int64_t *ms);

/* gemm_kern entries (whole, whole_multi) of impl for dt: wrappers generated per
 * level and dtype. */
#define QB_KERN_FNS(name, impl, dt) \
	static int name(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, \
			const float *x, const void *w, const float *bias, int64_t n, int64_t k, \
			int64_t m) \
	{ \
		return gemm_qb_run(&(impl), dt, pool, inline_run, xbuf, 1, &y, x, &w, &bias, n, k, &m); \
	} \
	static GEMM_OP_MULTI(name##_multi) \
	{ \
		return gemm_qb_run(&(impl), dt, pool, inline_run, xbuf, n_mats, ys, x, ws, biases, n, \
				   k, ms); \
	}
#define QB_KERN(name) \
	{ .whole_x_bytes = gemm_qb_x_bytes, .whole = name, .whole_multi = name##_multi }

/* A level's table of every block dtype's entries with impl's kernels. */
#define QB_KERN_TABLE(storage, table, pre, impl) \
	QB_KERN_FNS(pre##_q8_0, impl, ALLM_DTYPE_Q8_0) \
	QB_KERN_FNS(pre##_q4_0, impl, ALLM_DTYPE_Q4_0) \
	QB_KERN_FNS(pre##_q4_1, impl, ALLM_DTYPE_Q4_1) \
	QB_KERN_FNS(pre##_q5_0, impl, ALLM_DTYPE_Q5_0) \
	QB_KERN_FNS(pre##_q5_1, impl, ALLM_DTYPE_Q5_1) \
	QB_KERN_FNS(pre##_q4_k, impl, ALLM_DTYPE_Q4_K) \
	QB_KERN_FNS(pre##_q5_k, impl, ALLM_DTYPE_Q5_K) \
	QB_KERN_FNS(pre##_q6_k, impl, ALLM_DTYPE_Q6_K) \
	storage const struct gemm_kern table[QB_N_DTYPES] = { QB_KERN(pre##_q8_0), QB_KERN(pre##_q4_0), QB_KERN(pre##_q4_1), \
			       QB_KERN(pre##_q5_0), QB_KERN(pre##_q5_1), QB_KERN(pre##_q4_k), \
			       QB_KERN(pre##_q5_k), QB_KERN(pre##_q6_k) };

#endif
