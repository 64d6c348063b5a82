/* The driver of GEMMs of GGUF block weights (cpu-gemm-qblock.h), and the portable
 * family's kernels: the order of cpu-gemm.h in plain C, which every other family
 * reproduces bit for bit. */
#include "cpu-gemm-qblock.h"
#include "cpu-threads.h"

#include <math.h>
#include <stdatomic.h>

/* Decode GEMVs (1-2 tokens) cut into this many chunks per thread, as cpu-gemm.c's. */
#define QB_DECODE_CHUNKS 16
/* Quantizing this many activations is worth the workers too (cpu-gemm.c's). */
#define QB_PREP_PARALLEL (1 << 16)

_Atomic int qb_scales_forced = -1;
_Atomic bool qb_r8_off;

void cpu_qb_set_env(const struct allm_backend_env *env)
{
	atomic_store(&qb_scales_forced, env && env->qb_scales ? env->qb_scales - 1 : -1);
	atomic_store(&qb_r8_off, env && env->qb_r8_off);
}

void qb_x_prep_scalar(void *dst, const float *x, int64_t k, int64_t grain)
{
	const int64_t nb = allm_qb_blocks(k), per = grain / 32;
	int8_t *xq = dst;
	float *dx = (float *)(xq + 32 * nb), *sx = dx + nb;
	int32_t *s = (int32_t *)(sx + nb);
	int16_t *h = (int16_t *)(s + nb);
	for (int64_t g = 0; g < nb; g += per) { /* a grain: `per` blocks of 32 */
		float amax = 0.0f;
		for (int64_t p = 32 * g; p < 32 * (g + per) && p < k; p++)
			amax = fmaxf(amax, fabsf(x[p]));
		float id = amax > 0.0f ? 127.0f / amax : 0.0f;
		for (int64_t b = g; b < g + per && b < nb; b++) {
			int32_t half[2] = { 0, 0 };
			for (int i = 0; i < 32; i++) {
				/* the product rounded to f32, then to the nearest integer, ties
				 * to even: what cvtps2dq does to the SIMD families' product */
				long q = b * 32 + i < k ? lrintf(x[b * 32 + i] * id) : 0;
				xq[b * 32 + i] = (int8_t)q;
				half[i / 16] += (int32_t)q;
			}
			int32_t sum = half[0] + half[1];
			dx[b] = amax / 127.0f;
			s[b] = sum;
			h[2 * b] = (int16_t)half[0];
			h[2 * b + 1] = (int16_t)half[1];
			sx[b] = dx[b] * (float)sum;
		}
	}
}

/* The order of cpu-gemm.h for one output of one token: the 32-value formats. */
static float dot_scalar(enum allm_dtype dt, const uint8_t *row, size_t bb, struct qb_xrow x,
			int64_t nb)
{
	float acc = 0.0f;
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *blk = row + (size_t)b * bb;
		int32_t dot = 0; /* exact: |dot| <= 32 * 128 * 127 */
		for (int i = 0; i < 32; i++)
			dot += allm_qb_quant(dt, blk, i) * x.xq[b * 32 + i];
		float scale = allm_qb_d(blk) * x.dx[b];
		acc = fmaf((float)dot, scale, acc);
		if (allm_qb_has_min(dt))
			acc = fmaf(allm_qb_m(blk), x.sx[b], acc);
	}
	return acc;
}

/* The K formats: per super-block B (8 blocks of 32 sharing one activation scale
 * dx), I = sum over sub-blocks j of sc_j * (the exact integer sum of q * xq) (Q6_K:
 * over its 16 groups of 16 with their int8 scales), then acc = fma((float)I, d * dx,
 * acc); Q4_K/Q5_K then M = sum of m_j * s_j, acc = fma((float)-M, dmin * dx, acc).
 * |I| < 2^28, |M| < 2^21: exact in int32. */
static float dot_scalar_k(enum allm_dtype dt, const uint8_t *row, size_t bb, struct qb_xrow x,
			  int64_t nb)
{
	float acc = 0.0f;
	for (int64_t sb = 0; sb < nb / 8; sb++) {
		const uint8_t *blk = row + (size_t)sb * bb;
		const int8_t *xq = x.xq + sb * 256;
		int32_t isum = 0, msum = 0;
		for (int j = 0; j < 8; j++) {
			int32_t dot[2] = {0, 0}; /* the two groups of 16 */
			for (int l = 0; l < 32; l++)
				dot[l / 16] += allm_qb_k_quant(dt, blk, j, l) * xq[32 * j + l];
			if (dt == ALLM_DTYPE_Q6_K) {
				const int8_t *sc = ((const struct allm_block_q6_K *)blk)->scales;
				isum += sc[2 * j] * dot[0] + sc[2 * j + 1] * dot[1];
			} else {
				int sc, m;
				allm_qb_k_scale_min(((const struct allm_block_q4_K *)blk)->scales, j, &sc, &m);
				isum += sc * (dot[0] + dot[1]);
				msum += m * x.s[sb * 8 + j];
			}
		}
		const float dx = x.dx[sb * 8];
		if (dt == ALLM_DTYPE_Q6_K) {
			const struct allm_block_q6_K *b = (const struct allm_block_q6_K *)blk;
			acc = fmaf((float)isum, allm_f16_to_f32(allm_le16(b->d)) * dx, acc);
		} else {
			const struct allm_block_q4_K *b = (const struct allm_block_q4_K *)blk;
			acc = fmaf((float)isum, allm_f16_to_f32(allm_le16(b->d)) * dx, acc);
			acc = fmaf((float)-msum, allm_f16_to_f32(allm_le16(b->dmin)) * dx, acc);
		}
	}
	return acc;
}

static void item_scalar(const struct qb_job *j, const struct qb_mat *mt, int64_t o, int64_t t0,
			int64_t t1, const uint8_t *next)
{
	(void)next;
	int rows = (int)ALLM_MIN((int64_t)QB_OUT, mt->m - o);
	for (int64_t t = t0; t < t1; t++) {
		struct qb_xrow x = qb_xrow(j->xbuf, j->k, t);
		for (int r = 0; r < rows; r++) {
			const uint8_t *row = mt->w + (size_t)(o + r) * j->rb;
			float acc = allm_qb_is_k(j->dt) ? dot_scalar_k(j->dt, row, j->bb, x, j->nb)
							: dot_scalar(j->dt, row, j->bb, x, j->nb);
			mt->y[t * mt->m + o + r] = mt->bias ? acc + mt->bias[o + r] : acc;
		}
	}
}

const struct qb_impl qb_impl_portable = { .x_prep = qb_x_prep_scalar, .item = item_scalar };

/* --- the driver ------------------------------------------------------------------ */

size_t gemm_qb_x_bytes(int64_t n, int64_t k)
{
	size_t b = (size_t)n * qb_x_row_bytes(k);
#ifdef GEMM_X86
	b += qb_amx_x_bytes(n, k);
#endif
	return b;
}

struct qb_run {
	struct qb_job *j;
	const struct qb_impl *impl;
	const float *x;
	char *xbuf;
};

static void prep_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	(void)tid;
	struct qb_run *r = arg;
	for (int64_t t = begin; t < end; t++)
		r->impl->x_prep(r->xbuf + (size_t)t * qb_x_row_bytes(r->j->k), r->x + t * r->j->k,
				r->j->k, qb_grain(r->j->dt));
}

/* The W rows of item `it` (prefetched), or NULL past the job's items. */
static const uint8_t *item_rows(const struct qb_job *j, int mi, int64_t it)
{
	if (it >= j->first[j->n_mats])
		return NULL;
	int ni = mi;
	while (ni < j->n_mats && j->first[ni + 1] <= it)
		ni++;
	const struct qb_mat *nm = &j->mat[ni];
	return nm->w + (size_t)((it - j->first[ni]) * QB_OUT) * j->rb;
}

static void item_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	(void)tid;
	struct qb_run *r = arg;
	const struct qb_job *j = r->j;
	int mi = 0;
	while (j->first[mi + 1] <= begin)
		mi++;
	/* the first item's rows: the items prefetch only the rows of the item after
	 * them (as cpu-gemm.c's tiles do) */
	const uint8_t *w0 = item_rows(j, mi, begin);
	size_t len = (size_t)ALLM_MIN((int64_t)QB_OUT, j->mat[mi].m - (begin - j->first[mi]) * QB_OUT) * j->rb;
	for (size_t o = 0; o < len; o += 64)
		__builtin_prefetch(w0 + o, 0, 2);
	for (int64_t it = begin; it < end; it++) {
		while (j->first[mi + 1] <= it)
			mi++;
		const struct qb_mat *mt = &j->mat[mi];
		/* one item ahead (two or three measured no better on the Qwen2.5 chain of
		 * bench-decode-gemv, though under load); the chunk's last item fetches the
		 * first of the next chunk: a thread's chunks run on from one another
		 * (cpu-threads.c's home ranges), and a chunk that began on rows nobody had
		 * asked for stalled its thread on the burst above (5 % of a Qwen2.5 0.5B
		 * decode step, perf) */
		r->impl->item(j, mt, (it - j->first[mi]) * QB_OUT, 0, j->n, item_rows(j, mi, it + 1));
	}
}

int gemm_qb_run(const struct qb_impl *impl, enum allm_dtype dt, struct cpu_pool *pool,
		bool inline_run, void *xbuf, int n_mats, float *const *ys, const float *x,
		const void *const *ws, const float *const *biases, int64_t n, int64_t k,
		const int64_t *ms)
{
	if (allm_qb_is_k(dt) && k % ALLM_QK_K)
		return -EINVAL; /* a file's K rows are whole super-blocks */
	struct qb_job j = {
		.dt = dt, .n_mats = n_mats, .xbuf = xbuf, .n = n, .k = k, .nb = allm_qb_blocks(k),
		.rb = allm_qb_row_bytes(dt, k), .bb = allm_qb_block_bytes(dt), .pool = pool,
	};
	for (int i = 0; i < n_mats; i++) {
		j.mat[i] = (struct qb_mat){ ys[i], ws[i], biases[i], ms[i] };
		j.first[i + 1] = j.first[i] + (ms[i] + QB_OUT - 1) / QB_OUT;
	}
	struct qb_run r = { &j, impl, x, xbuf };
	gemm_run_items(pool, inline_run || n * k < QB_PREP_PARALLEL, n, prep_worker, &r);
	/* the AMX tiles take the formats whose quants they unpack (Q8_0, Q4_0, Q4_1) */
	if (impl->whole && n >= impl->whole_min_rows && dt <= ALLM_DTYPE_Q4_1)
		return impl->whole(&j, inline_run, (char *)xbuf + (size_t)n * qb_x_row_bytes(k));
	if (!inline_run && n <= 2)
		cpu_pool_run_chunks(pool, j.first[n_mats], QB_DECODE_CHUNKS, item_worker, &r);
	else
		gemm_run_items(pool, inline_run, j.first[n_mats], item_worker, &r);
	return atomic_load(&j.err);
}
