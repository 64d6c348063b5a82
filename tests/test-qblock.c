/* Description: GGUF's block formats (kernels/qblock.h): hand-made Q8_0/Q4_0/Q4_1 blocks read back as the format defines them (nibble order, min, scale), the quantizers give ggml's bytes for known blocks and stay within half a step (Q4_0: a step on its short side) on random rows (k not a multiple of 32 too), and the loader entry for a file's block bytes copies them as they are when the model stores that format and dequantizes them otherwise. */
#include "model.h"
#include "qblock.h"
#include "test-check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void put_f16(uint8_t *p, float f)
{
	uint16_t h = allm_f32_to_f16(f);
	p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* Blocks written byte by byte, read back through allm_qb_get. */
static void test_layout(void)
{
	uint8_t row[3 * 20] = {0};
	/* Q8_0: d = 0.5, q[j] = j - 16 */
	put_f16(row, 0.5f);
	for (int j = 0; j < 32; j++)
		row[2 + j] = (uint8_t)(int8_t)(j - 16);
	for (int j = 0; j < 32; j++)
		CHECK(allm_qb_get(row, ALLM_DTYPE_Q8_0, 32, 0, j) == 0.5f * (float)(j - 16), "q8_0 element %d", j);
	/* Q4_0: two blocks; element j < 16 the low nibble of qs[j], j + 16 its high */
	memset(row, 0, sizeof(row));
	put_f16(row, 0.25f);
	put_f16(row + 18, -2.0f);
	for (int j = 0; j < 16; j++) {
		row[2 + j] = (uint8_t)(j | (15 - j) << 4);
		row[20 + j] = (uint8_t)(8 | 8 << 4);
	}
	for (int j = 0; j < 16; j++) {
		CHECK(allm_qb_get(row, ALLM_DTYPE_Q4_0, 64, 0, j) == 0.25f * (float)(j - 8), "q4_0 low %d", j);
		CHECK(allm_qb_get(row, ALLM_DTYPE_Q4_0, 64, 0, j + 16) == 0.25f * (float)(7 - j), "q4_0 high %d", j);
		CHECK(allm_qb_get(row, ALLM_DTYPE_Q4_0, 64, 0, 32 + j) == 0.0f, "q4_0 block 1 %d", j);
	}
	/* Q4_1: d = 1, m = -3.5 */
	memset(row, 0, sizeof(row));
	put_f16(row, 1.0f);
	put_f16(row + 2, -3.5f);
	for (int j = 0; j < 16; j++)
		row[4 + j] = (uint8_t)(j << 4 | 3);
	for (int j = 0; j < 16; j++) {
		CHECK(allm_qb_get(row, ALLM_DTYPE_Q4_1, 32, 0, j) == 3.0f - 3.5f, "q4_1 low %d", j);
		CHECK(allm_qb_get(row, ALLM_DTYPE_Q4_1, 32, 0, 16 + j) == (float)j - 3.5f, "q4_1 high %d", j);
	}
	CHECK(allm_qb_row_bytes(ALLM_DTYPE_Q8_0, 64) == 68 && allm_qb_row_bytes(ALLM_DTYPE_Q4_0, 33) == 36 &&
	      allm_qb_row_bytes(ALLM_DTYPE_Q4_1, 32) == 20, "row bytes");
}

/* ggml's choices on a block whose values are known: Q4_0's scale from the signed
 * value of largest magnitude (-8 maps onto it), Q4_1's from min and max, Q8_0's
 * from amax / 127. */
static void test_known(void)
{
	float x[32];
	for (int j = 0; j < 32; j++)
		x[j] = (float)(j - 12) * 0.125f; /* -1.5 .. 2.375: largest magnitude 2.375 */
	uint8_t b[34];
	allm_qb_quantize_rows(ALLM_DTYPE_Q4_0, b, 32, 0, x, 1);
	CHECK(allm_qb_d(b) == allm_f16_to_f32(allm_f32_to_f16(2.375f / -8.0f)), "q4_0 d %g", allm_qb_d(b));
	CHECK((b[2 + 15] >> 4) == 0, "q4_0: the largest value is quant 0 (-8 steps of a negative d)");
	allm_qb_quantize_rows(ALLM_DTYPE_Q4_1, b, 32, 0, x, 1);
	CHECK(allm_qb_m(b) == -1.5f && allm_qb_d(b) == allm_f16_to_f32(allm_f32_to_f16(3.875f / 15.0f)),
	      "q4_1 d %g m %g", allm_qb_d(b), allm_qb_m(b));
	CHECK((b[4] & 15) == 0 && (b[4 + 15] >> 4) == 15, "q4_1: min -> 0, max -> 15");
	allm_qb_quantize_rows(ALLM_DTYPE_Q8_0, b, 32, 0, x, 1);
	CHECK(allm_qb_d(b) == allm_f16_to_f32(allm_f32_to_f16(2.375f / 127.0f)), "q8_0 d");
	CHECK((int8_t)b[2 + 31] == 127 && (int8_t)b[2 + 12] == 0, "q8_0 quants");
}

/* Random rows: every weight within its format's bound of the value quantized. */
static void test_roundtrip(void)
{
	static const enum allm_dtype dts[] = {ALLM_DTYPE_Q8_0, ALLM_DTYPE_Q4_0, ALLM_DTYPE_Q4_1};
	static const int64_t ks[] = {1, 31, 32, 33, 100, 256};
	uint64_t st = 7;
	for (size_t d = 0; d < 3; d++)
		for (size_t i = 0; i < ALLM_ARRAY_SIZE(ks); i++) {
			int64_t k = ks[i], m = 5;
			float *x = malloc((size_t)(m * k) * 4), *y = malloc((size_t)k * 4);
			for (int64_t p = 0; p < m * k; p++)
				x[p] = (float)((allm_splitmix64(&st) >> 40) * 0x1p-23) - 1.0f;
			uint8_t *w = malloc(allm_qb_bytes(dts[d], m, k));
			allm_qb_quantize_rows(dts[d], w, k, 0, x, m);
			for (int64_t r = 0; r < m; r++) {
				allm_qb_dequantize_row(dts[d], y, w, k, r);
				for (int64_t p = 0; p < k; p++) {
					const uint8_t *blk = allm_qb_block(w, dts[d], k, r, p / 32);
					float step = fabsf(allm_qb_d(blk));
					float err = fabsf(y[p] - x[r * k + p]);
					/* half a step, plus the f16 rounding of d (and of Q4_1's
					 * m) times the largest quant; Q4_0's side opposite its
					 * largest magnitude has 7 steps for the 8 of the other
					 * (ggml's choice), so up to a whole step there */
					float qmax = dts[d] == ALLM_DTYPE_Q8_0 ? 127.0f : 15.0f;
					float lim = (dts[d] == ALLM_DTYPE_Q4_0 ? 1.0f : 0.5f) * step + qmax * step * 0x1p-10f;
					if (dts[d] == ALLM_DTYPE_Q4_1)
						lim += fabsf(allm_qb_m(blk)) * 0x1p-10f;
					CHECK(err <= lim + 1e-7f, "%s k=%lld (%lld, %lld): %g vs %g, step %g",
					      allm_dtype_name(dts[d]), (long long)k, (long long)r, (long long)p, y[p],
					      x[r * k + p], step);
				}
			}
			free(x), free(y), free(w);
		}
}

/* allm_model_spec_store_blocks: the file's bytes in place, or dequantized. */
static void test_store_blocks(void)
{
	struct allm_err err = {{0}};
	struct allm_backend_opts bo = {.reference = true};
	allm_backend_t *be = NULL;
	struct allm_model_config cfg;
	CHECK(allm_backend_cpu_create(&bo, &be, &err) == 0, "backend: %s", err.msg);
	CHECK(allm_model_config_preset("tiny", &cfg, &err) == 0, "preset: %s", err.msg);
	const int64_t rows = 6, cols = 96;
	float *x = malloc((size_t)(rows * cols) * 4), *want = malloc((size_t)cols * 4);
	for (int64_t p = 0; p < rows * cols; p++)
		x[p] = sinf((float)p);
	uint8_t *file = malloc(allm_qb_bytes(ALLM_DTYPE_Q4_1, rows, cols));
	allm_qb_quantize_rows(ALLM_DTYPE_Q4_1, file, cols, 0, x, rows);
	void *slot = NULL;
	struct allm_weight_spec s = { .name = "w", .shape = {rows, cols}, .n_dims = 2, .slot = &slot,
				      .kind = ALLM_WKIND_MATRIX };
	static const enum allm_dtype stores[] = {ALLM_DTYPE_Q4_1, ALLM_DTYPE_F32, ALLM_DTYPE_Q8_0};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(stores); i++) {
		struct allm_model *m = NULL;
		CHECK(allm_model_create_shell(be, &cfg, stores[i], &m, &err) == 0, "shell: %s", err.msg);
		s.dt = &m->layers[0].wq_dt; /* a matrix of the shell: of its wdtype */
		size_t bytes = allm_model_spec_bytes(m, &s);
		uint8_t *dst = calloc(1, bytes);
		/* two runs of rows, the second first (a loader that reorders rows) */
		size_t rb = allm_qb_row_bytes(ALLM_DTYPE_Q4_1, cols);
		CHECK(allm_model_spec_store_blocks(m, &s, dst, 2, ALLM_DTYPE_Q4_1, file + 2 * rb, rows - 2) == 0, "store");
		CHECK(allm_model_spec_store_blocks(m, &s, dst, 0, ALLM_DTYPE_Q4_1, file, 2) == 0, "store");
		if (stores[i] == ALLM_DTYPE_Q4_1)
			CHECK(bytes == allm_qb_bytes(ALLM_DTYPE_Q4_1, rows, cols) && !memcmp(dst, file, bytes),
			      "q4_1 into a q4_1 model: not the file's bytes");
		for (int64_t r = 0; stores[i] == ALLM_DTYPE_F32 && r < rows; r++) {
			allm_qb_dequantize_row(ALLM_DTYPE_Q4_1, want, file, cols, r);
			CHECK(!memcmp((float *)dst + r * cols, want, (size_t)cols * 4), "f32 row %lld", (long long)r);
		}
		if (stores[i] == ALLM_DTYPE_Q8_0) { /* requantized from the dequantized values */
			uint8_t *again = malloc(bytes);
			for (int64_t r = 0; r < rows; r++) {
				allm_qb_dequantize_row(ALLM_DTYPE_Q4_1, want, file, cols, r);
				allm_qb_quantize_rows(ALLM_DTYPE_Q8_0, again, cols, r, want, 1);
			}
			CHECK(!memcmp(dst, again, bytes), "q4_1 into a q8_0 model");
			free(again);
		}
		CHECK(allm_model_spec_store_blocks(m, &s, dst, 0, ALLM_DTYPE_F16, file, 1) == -EINVAL,
		      "f16 taken as block bytes");
		free(dst);
		allm_model_free(m);
	}
	free(x), free(want), free(file);
	allm_backend_destroy(be);
}

int main(void)
{
	test_layout();
	test_known();
	test_roundtrip();
	test_store_blocks();
	if (n_fail) {
		fprintf(stderr, "%d failures\n", n_fail);
		return 1;
	}
	printf("ok\n");
	return 0;
}
