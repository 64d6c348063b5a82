/* GEMM level amx-bf16: bf16 weights meet bf16 activations on Intel AMX tiles
 * (TDPBF16PS), f32 accumulation. Its own driver, not the tile framework of
 * cpu-gemm.c: an AMX tile holds 16 whole output elements per row, not one
 * element's 16 partial sums, so nothing is left to reduce.
 *
 * The product is computed transposed, yᵀ = W · xᵀ: W in its own row-major layout
 * is exactly AMX's A operand (rows of contiguous k, read in place, no repacking),
 * and only the activations are rearranged, once per call, into the B operand's
 * layout (pairs of k per token, 16 tokens a row). An item is 32 outputs (two A
 * tiles), run against every pair of 16-token groups (two B tiles), four C tiles.
 *
 * Batch invariance (DESIGN §6): every output element is accumulated from +0 by
 * TDPBF16PS over k in blocks of 32, in increasing k, with the same tile shapes
 * whatever n is (a group short of 16 tokens is padded with zeros, k past its end
 * too), and a tile's element depends only on its own row of A and column of B.
 * So a row alone, or amid any other rows, on any thread, gives the same bits
 * (tests/test-cpu-gemm.c checks it; the hardware's rounding inside one TDPBF16PS
 * is its own, so the order is pinned by the instruction, not by a formula). */
#include "cpu-gemm.h"
#include "cpu-gemm-x86.h"
#include "cpu-threads.h"

#include <errno.h>
#include <stdatomic.h>

#ifdef GEMM_X86

#define TA __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

#define AMX_OUT 32 /* outputs per item: two A tiles of 16 W rows */
#define AMX_TOK 16 /* tokens per B tile */
#define AMX_K 32 /* k per TDPBF16PS: 16 pairs */

struct amx_job {
	float *y;
	const uint32_t *xp; /* [groups][k32 / 2][16] bf16 pairs */
	const float *x;
	const uint16_t *w;
	const float *bias;
	int64_t n, k, m, k32, groups;
	struct cpu_pool *pool;
	_Atomic int err;
};

static int64_t amx_groups(int64_t n)
{
	return (n + AMX_TOK - 1) / AMX_TOK;
}

size_t gemm_amx_x_bytes(int64_t n, int64_t k)
{
	return (size_t)amx_groups(n) * (size_t)gemm_k32(k) / 2 * AMX_TOK * 4;
}

/* Activations of groups [begin, end) into the B layout: token t's pair (2q, 2q + 1)
 * is dword q * 16 + t % 16 of its group, rounded to nearest-even bf16 as the
 * avx512-bf16 level rounds them; zeros past n and past k. */
static TA void amx_pack_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	(void)tid;
	struct amx_job *j = arg;
	const int64_t pairs = j->k32 / 2;
	for (int64_t g = begin; g < end; g++) {
		uint32_t *dst = (uint32_t *)j->xp + (size_t)g * pairs * AMX_TOK;
		int nt = (int)ALLM_MIN((int64_t)AMX_TOK, j->n - g * AMX_TOK);
		if (nt < AMX_TOK) /* decode: one token of 16, the rest zeros */
			memset(dst, 0, (size_t)pairs * AMX_TOK * 4);
		for (int t = 0; t < nt; t++) {
			int64_t tok = g * AMX_TOK + t;
			for (int64_t p = 0; p < j->k32; p += 32) {
				__m512i v;
				{
					const float *x = j->x + tok * j->k;
					int64_t rem = j->k - p;
					__mmask16 m0 = rem >= 16 ? 0xffff : rem <= 0 ? 0 : (__mmask16)((1u << rem) - 1);
					__mmask16 m1 = rem >= 32 ? 0xffff : rem <= 16 ? 0
							     : (__mmask16)((1u << (rem - 16)) - 1);
					__m512 lo = _mm512_maskz_loadu_ps(m0, x + p);
					__m512 hi = _mm512_maskz_loadu_ps(m1, x + p + 16);
					v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
				}
				/* 16 dwords (pairs p/2 .. p/2 + 15) to 16 rows of the group */
				uint32_t d[16];
				_mm512_storeu_si512(d, v);
				uint32_t *col = dst + (size_t)(p / 2) * AMX_TOK + t;
				for (int q = 0; q < 16; q++)
					col[(size_t)q * AMX_TOK] = d[q];
			}
		}
	}
}

/* C tile (16 outputs x 16 tokens, as stored) into y, plus the bias. */
static void amx_store(const struct amx_job *j, const float *ct, int64_t o, int64_t tok0)
{
	gemm_tile_to_y(j->y, j->n, j->m, j->bias, ct, o, tok0);
}

/* Rows [o, o + rows) of W, k [p0, k), into a zero-padded [32][ld] bf16 block. */
static void amx_copy_w(uint16_t *dst, int64_t ld, const struct amx_job *j, int64_t o, int rows,
		       int64_t p0)
{
	memset(dst, 0, (size_t)AMX_OUT * ld * 2);
	for (int r = 0; r < rows; r++)
		memcpy(dst + r * ld, j->w + (o + r) * j->k + p0, (size_t)(j->k - p0) * 2);
	/* GCC's tileloadd is an asm without a memory operand: without this barrier the
	 * compiler may sink these stores past the tile loads that read them */
	__asm__ volatile("" ::: "memory");
}

/* One block of 32 k: C0 += A0 B0, C1 += A1 B0, and with a second token group
 * C2 += A0 B1, C3 += A1 B1. */
INL TA void amx_block(const uint16_t *a0, const uint16_t *a1, size_t lda, const uint32_t *b0,
		      const uint32_t *b1, bool two)
{
	_tile_loadd(4, a0, lda);
	_tile_loadd(5, a1, lda);
	_tile_loadd(6, b0, 64);
	_tile_dpbf16ps(0, 4, 6);
	_tile_dpbf16ps(1, 5, 6);
	if (two) {
		_tile_loadd(7, b1, 64);
		_tile_dpbf16ps(2, 4, 7);
		_tile_dpbf16ps(3, 5, 7);
	}
}

static TA void amx_worker(void *arg, int tid, int64_t begin, int64_t end)
{
	struct amx_job *j = arg;
	const int64_t pairs = j->k32 / 2, full_kb = j->k / AMX_K;
	/* a whole padded block (the last item, when m is not a multiple of 32), the
	 * k tail of a full block, the C tile on its way to y */
	size_t pad = (size_t)AMX_OUT * j->k32 * 2, tail = AMX_OUT * AMX_K * 2;
	char *s = cpu_pool_scratch_or_fail(j->pool, tid, pad + tail + 16 * AMX_TOK * 4, &j->err);
	if (!s)
		return;
	uint16_t *wpad = (uint16_t *)s, *wtail = (uint16_t *)(s + pad);
	float *ct = (float *)(s + pad + tail);
	struct gemm_amx_cfg cfg = { .palette = 1 };
	for (int t = 0; t < 8; t++)
		cfg.rows[t] = 16, cfg.colsb[t] = 64;
	_tile_loadconfig(&cfg);

	for (int64_t it = begin; it < end; it++) {
		int64_t o = it * AMX_OUT;
		int rows = (int)ALLM_MIN((int64_t)AMX_OUT, j->m - o);
		const uint16_t *a = j->w + o * j->k;
		size_t lda = (size_t)j->k * 2;
		int64_t nkb = full_kb;
		bool has_tail = j->k % AMX_K != 0;
		if (rows < AMX_OUT) { /* rows past m: all of it from a padded copy */
			amx_copy_w(wpad, j->k32, j, o, rows, 0);
			a = wpad, lda = (size_t)j->k32 * 2, nkb = j->k32 / AMX_K, has_tail = false;
		} else if (has_tail) { /* the last k block reads past each row: a copy */
			amx_copy_w(wtail, AMX_K, j, o, AMX_OUT, full_kb * AMX_K);
		}
		const uint16_t *a1 = (const uint16_t *)((const char *)a + 16 * lda);
		for (int64_t g = 0; g < j->groups; g += 2) {
			const uint32_t *b0 = j->xp + (size_t)g * pairs * AMX_TOK;
			const uint32_t *b1 = b0 + (size_t)pairs * AMX_TOK;
			bool two = g + 1 < j->groups;
			_tile_zero(0);
			_tile_zero(1);
			_tile_zero(2);
			_tile_zero(3);
			for (int64_t kb = 0; kb < nkb; kb++)
				amx_block(a + kb * AMX_K, a1 + kb * AMX_K, lda, b0 + kb * 16 * AMX_TOK,
					  b1 + kb * 16 * AMX_TOK, two);
			if (has_tail) /* the copy of the last k block, 32 rows of 64 bytes */
				amx_block(wtail, wtail + 16 * AMX_K, AMX_K * 2, b0 + full_kb * 16 * AMX_TOK,
					  b1 + full_kb * 16 * AMX_TOK, two);
			_tile_stored(0, ct, AMX_TOK * 4);
			amx_store(j, ct, o, g * AMX_TOK);
			if (rows > 16) {
				_tile_stored(1, ct, AMX_TOK * 4);
				amx_store(j, ct, o + 16, g * AMX_TOK);
			}
			if (two) {
				_tile_stored(2, ct, AMX_TOK * 4);
				amx_store(j, ct, o, (g + 1) * AMX_TOK);
				if (rows > 16) {
					_tile_stored(3, ct, AMX_TOK * 4);
					amx_store(j, ct, o + 16, (g + 1) * AMX_TOK);
				}
			}
		}
	}
	/* back to the init state: a thread holding tile data makes every context
	 * switch save 8 KiB more */
	_tile_release();
}

int gemm_amx_bf16(struct cpu_pool *pool, bool inline_run, void *xbuf, float *y, const float *x,
		  const void *w, const float *bias, int64_t n, int64_t k, int64_t m)
{
	struct amx_job j = {
		.y = y, .xp = xbuf, .x = x, .w = w, .bias = bias, .n = n, .k = k, .m = m,
		.k32 = gemm_k32(k), .groups = amx_groups(n), .pool = pool,
	};
	gemm_run_items(pool, inline_run || j.groups < 2, j.groups, amx_pack_worker, &j);
	gemm_run_items(pool, inline_run, (m + AMX_OUT - 1) / AMX_OUT, amx_worker, &j);
	return atomic_load(&j.err);
}

#endif /* GEMM_X86 */
