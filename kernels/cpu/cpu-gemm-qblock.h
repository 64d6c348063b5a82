/* GEMMs of GGUF block weights (Q8_0, Q4_0, Q4_1; kernels/qblock.h) on the CPU fast
 * path: one driver (cpu-gemm-qblock.c: activation quantization, items of 16 outputs,
 * threads) and one item kernel per SIMD family (portable C in the driver, AVX2 and
 * AVX-512 in cpu-gemm-qblock-x86.c, AMX tiles for many rows in
 * cpu-gemm-qblock-amx.c).
 *
 * Every level computes the same bits (the order is in cpu-gemm.h): the activations
 * are quantized per block of 32 by one formula, a block's integer dot product is
 * exact whatever instructions add it up, and what follows is one fma (Q4_1: two)
 * per block in increasing block order. */
#ifndef ALLM_CPU_GEMM_QBLOCK_H
#define ALLM_CPU_GEMM_QBLOCK_H

#include "cpu-gemm.h"
#include "qblock.h"

#define QB_OUT 16 /* outputs (W rows) per item */

/* Bytes of one token's prepared activations for a k of nb blocks:
 *   int8 xq[32 nb] | f32 dx[nb] | f32 sx[nb] | int32 s[nb]   (padded to 64)
 * xq = round-half-even(x * 127 / amax) per block (zero past k), dx = amax / 127,
 * s = the block's sum of xq, sx = dx * (float)s (Q4_1's min term). */
static inline size_t qb_x_row_bytes(int64_t k)
{
	size_t nb = (size_t)allm_qb_blocks(k);
	return (32 * nb + 12 * nb + 63) & ~(size_t)63;
}

struct qb_xrow {
	const int8_t *xq;
	const float *dx, *sx;
	const int32_t *s;
};

static inline struct qb_xrow qb_xrow(const void *xbuf, int64_t k, int64_t t)
{
	int64_t nb = allm_qb_blocks(k);
	const char *r = (const char *)xbuf + (size_t)t * qb_x_row_bytes(k);
	struct qb_xrow x = { (const int8_t *)r, (const float *)(r + 32 * nb),
			     (const float *)(r + 36 * nb), (const int32_t *)(r + 40 * nb) };
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
	/* One token's activations into dst (qb_x_row_bytes(k)); every family's bytes
	 * are the same. */
	void (*x_prep)(void *dst, const float *x, int64_t k);
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

/* The portable family (scalar C: the order of cpu-gemm.h written out). */
extern const struct qb_impl qb_impl_portable;
void qb_x_prep_scalar(void *dst, const float *x, int64_t k);
#ifdef GEMM_X86
extern const struct qb_impl qb_impl_avx2, qb_impl_avx512_vnni, qb_impl_amx;
/* The levels' gemm_kern entries: [0] q8_0, [1] q4_0, [2] q4_1. */
extern const struct gemm_kern gemm_qb_avx2[3], gemm_qb_vnni[3], gemm_qb_amx[3];
void qb_x_prep_avx2(void *dst, const float *x, int64_t k);
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

#endif
