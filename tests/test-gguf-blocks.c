/* Description: every GGUF block format the loader reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K) dequantizes, byte for byte, to what gguf-py's own numpy dequantization gives for 3 rows of random blocks (tests/data/gguf-blocks/blocks.gguf, made once by make.py beside it); the formats the engine keeps as blocks go in as its formats (Q8_0/Q4_0/Q4_1 the file's bytes, Q5_0 as Q8_0 exactly, Q4_K as Q4_1 with only its scales and mins rounded to f16); each type's storage dtype under --dtype auto. Usage: test-gguf-blocks blocks.gguf */
#include "gguf-model.h"
#include "qblock.h"
#include "test-check.h"

#include <math.h>
#include <stdlib.h>

static const struct {
	const char *name;
	enum allm_gguf_ttype type;
	enum allm_dtype native; /* its storage dtype under file types */
	bool exact; /* the engine's blocks hold the same values */
} formats[] = {
	{"q8_0", ALLM_GGML_Q8_0, ALLM_DTYPE_Q8_0, true},
	{"q4_0", ALLM_GGML_Q4_0, ALLM_DTYPE_Q4_0, true},
	{"q4_1", ALLM_GGML_Q4_1, ALLM_DTYPE_Q4_1, true},
	{"q5_0", ALLM_GGML_Q5_0, ALLM_DTYPE_Q8_0, true},
	{"q5_1", ALLM_GGML_Q5_1, ALLM_DTYPE_Q8_0, false}, /* re-quantized at load */
	{"q4_k", ALLM_GGML_Q4_K, ALLM_DTYPE_Q4_1, false}, /* scales rounded to f16 */
	{"q6_k", ALLM_GGML_Q6_K, ALLM_DTYPE_Q8_0, false}, /* re-quantized at load */
};

/* The rows of t as the engine's blocks of dt, dequantized, against ref: exactly, or
 * (Q4_K as Q4_1) within what rounding a 32-value block's scale d and min m to f16
 * moves a value q * d + m, q <= 15: 2^-11 (15 |d| + |m|) <= 3 * 2^-11 * the block's
 * largest |value|. */
static void as_blocks(const struct allm_gguf_tensor *t, enum allm_dtype dt, bool exact,
		      const float *ref, const char *name)
{
	int64_t rows = t->ne[1], cols = t->ne[0];
	size_t bytes = allm_qb_bytes(dt, rows, cols);
	uint8_t *b = malloc(bytes);
	float *y = malloc((size_t)cols * sizeof(float));
	int bad = 0;
	allm_gguf_rows_as_blocks(t, 0, rows, dt, b);
	if (allm_gguf_native_dtype(t->type) == dt && t->nbytes == bytes)
		CHECK(!memcmp(b, t->data, bytes), "%s: not the file's bytes", name);
	double worst = 0;
	for (int64_t r = 0; r < rows; r++) {
		allm_qb_dequantize_row(dt, y, b, cols, r);
		for (int64_t c0 = 0; c0 < cols; c0 += ALLM_QB_BLOCK) {
			double mx = 0;
			for (int64_t c = c0; c < c0 + ALLM_QB_BLOCK; c++)
				mx = fmax(mx, fabs(ref[r * cols + c]));
			for (int64_t c = c0; c < c0 + ALLM_QB_BLOCK; c++) {
				double d = fabs((double)y[c] - ref[r * cols + c]);
				worst = fmax(worst, mx ? d / mx : 0);
				if (exact ? d != 0 : d > 3.0 / 2048 * mx + 1e-30)
					bad++;
			}
		}
	}
	printf("%s as %s blocks: largest error %.3g of its block's largest value\n", name, allm_dtype_name(dt),
	       worst);
	CHECK(bad == 0, "%s as %s blocks: %d values off", name, allm_dtype_name(dt), bad);
	free(b);
	free(y);
}

int main(int argc, char **argv)
{
	struct allm_err err = {{0}};
	struct allm_gguf *g = NULL;
	if (argc != 2 || allm_gguf_open(argv[1], &g, &err)) {
		fprintf(stderr, "usage: test-gguf-blocks blocks.gguf (%s)\n", err.msg);
		return 2;
	}
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(formats); i++) {
		char refname[32];
		snprintf(refname, sizeof(refname), "%s.ref", formats[i].name);
		const struct allm_gguf_tensor *t = allm_gguf_find_tensor(g, formats[i].name);
		const struct allm_gguf_tensor *rt = allm_gguf_find_tensor(g, refname);
		if (!t || !rt || t->type != formats[i].type || rt->type != ALLM_GGML_F32 ||
		    rt->ne[0] != t->ne[0] || rt->ne[1] != t->ne[1]) {
			CHECK(0, "%s: the fixture lacks it or its reference", formats[i].name);
			continue;
		}
		int64_t rows = t->ne[1], cols = t->ne[0];
		float *y = malloc((size_t)(rows * cols) * sizeof(float));
		float ref[3 * 512];
		CHECK(rows * cols <= 3 * 512, "fixture shape");
		memcpy(ref, rt->data, sizeof(ref)); /* the data may be unaligned */
		CHECK(allm_gguf_dequant_supported(t->type), "%s: not loadable", formats[i].name);
		/* two passes of rows, the second from its own first row, as the loader reads */
		allm_gguf_dequant_rows(t, 0, 1, y);
		allm_gguf_dequant_rows(t, 1, rows - 1, y + cols);
		int bad = 0;
		for (int64_t k = 0; k < rows * cols; k++)
			if (memcmp(&y[k], &ref[k], sizeof(float)) && bad++ < 3)
				fprintf(stderr, "%s: value %lld is %.9g, gguf-py %.9g\n", formats[i].name, (long long)k,
					y[k], ref[k]);
		printf("%s: %lld values, %d differ from gguf-py's\n", formats[i].name, (long long)(rows * cols), bad);
		CHECK(bad == 0, "%s: %d values differ from gguf-py's dequantization", formats[i].name, bad);
		CHECK(allm_gguf_native_dtype(t->type) == formats[i].native, "%s: stored as %s", formats[i].name,
		      allm_dtype_name(allm_gguf_native_dtype(t->type)));
		if (allm_gguf_blocks_as(t->type, formats[i].native))
			as_blocks(t, formats[i].native, formats[i].exact, ref, formats[i].name);
		else
			CHECK(!formats[i].exact, "%s: held exactly, yet not as blocks", formats[i].name);
		free(y);
	}
	/* the element types, and one the engine does not load */
	CHECK(allm_gguf_native_dtype(ALLM_GGML_F16) == ALLM_DTYPE_F16 &&
	      allm_gguf_native_dtype(ALLM_GGML_BF16) == ALLM_DTYPE_BF16 &&
	      allm_gguf_native_dtype(ALLM_GGML_F32) == ALLM_DTYPE_F32 &&
	      allm_gguf_native_dtype(ALLM_GGML_Q5_K) == ALLM_DTYPE_COUNT &&
	      !allm_gguf_dequant_supported(ALLM_GGML_Q2_K), "element types");
	allm_gguf_close(g);
	if (n_fail)
		return 1;
	printf("test-gguf-blocks: all checks passed\n");
	return 0;
}
