/* The portable GEMM level: plain C, the reference's arithmetic (one sequential
 * mul-then-add chain per output element, ISO C: no contraction into FMA), so it is
 * bit-identical to cpu_ref_gemm on any machine. Used where no SIMD level exists,
 * or when asked for (--cpu-isa portable). GGUF block weights are the exception: they
 * take the one order every level shares (cpu-gemm-qblock.c), int8 activations
 * included, so the reference (f32 activations) is their bound, not their bits. */
#include "cpu-gemm.h"
#include "cpu-gemm-qblock.h"

#define PORTABLE_ROWS 4
#define PORTABLE_COLS 4

static void tile_portable(const struct gemm_tile *t, enum allm_dtype dt)
{
	float *part = t->part;
	for (int r = 0; r < t->rows; r++) {
		const float *x = (const float *)((const char *)t->x + (size_t)r * t->x_stride);
		for (int c = 0; c < t->cols; c++) {
			const char *w = (const char *)t->w + (size_t)c * t->w_stride;
			float acc = t->first ? 0.0f : part[(r * t->cols + c) * 16];
			for (int64_t p = t->p0; p < t->p0 + t->kc; p++)
				acc += x[p] * gemm_wval(w, dt, t->k, 0, p - t->w_p0);
			if (!t->last)
				part[(r * t->cols + c) * 16] = acc;
			else
				t->y[r * t->ldy + c] = t->bias ? acc + t->bias[c] : acc;
		}
	}
}

static void tile_f32(const struct gemm_tile *t) { tile_portable(t, ALLM_DTYPE_F32); }
static void tile_f16(const struct gemm_tile *t) { tile_portable(t, ALLM_DTYPE_F16); }
static void tile_bf16(const struct gemm_tile *t) { tile_portable(t, ALLM_DTYPE_BF16); }

#define KERN(fn) { .max_rows = PORTABLE_ROWS, .max_cols = PORTABLE_COLS, .tile = fn }
static const struct gemm_kern k_f32 = KERN(tile_f32), k_f16 = KERN(tile_f16), k_bf16 = KERN(tile_bf16);

QB_KERN_TABLE(static, k_qb, qb, qb_impl_portable)

const struct gemm_level gemm_level_portable = {
	ALLM_CPU_ISA_PORTABLE, &k_f32, &k_f16, &k_bf16, k_qb,
};
