/* Description: every GGUF block format the loader reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) dequantizes, through the one dequantizer (kernels/qblock.h), byte for byte to what gguf-py's own numpy dequantization gives for 3 rows of random blocks (tests/data/gguf-blocks/blocks.gguf, made once by make.py beside it); every one goes in as its own format, the file's bytes unchanged (no re-quantization); each type's storage dtype under --dtype auto; the types it does not read (Q2_K, Q3_K, IQ4_XS) are refused. Usage: test-gguf-blocks blocks.gguf */
#include "gguf-model.h"
#include "qblock.h"
#include "test-check.h"

#include <math.h>
#include <stdlib.h>

static const struct {
	const char *name;
	enum allm_gguf_ttype type;
	enum allm_dtype native; /* its storage dtype under file types */
} formats[] = {
	{"q8_0", ALLM_GGML_Q8_0, ALLM_DTYPE_Q8_0},
	{"q4_0", ALLM_GGML_Q4_0, ALLM_DTYPE_Q4_0},
	{"q4_1", ALLM_GGML_Q4_1, ALLM_DTYPE_Q4_1},
	{"q5_0", ALLM_GGML_Q5_0, ALLM_DTYPE_Q5_0},
	{"q5_1", ALLM_GGML_Q5_1, ALLM_DTYPE_Q5_1},
	{"q4_k", ALLM_GGML_Q4_K, ALLM_DTYPE_Q4_K},
	{"q5_k", ALLM_GGML_Q5_K, ALLM_DTYPE_Q5_K},
	{"q6_k", ALLM_GGML_Q6_K, ALLM_DTYPE_Q6_K},
};

/* The rows of t as the engine's blocks of dt: the file's bytes, and their values
 * (the one dequantizer on the engine's copy) gguf-py's. */
static void as_blocks(const struct allm_gguf_tensor *t, enum allm_dtype dt, const float *ref,
		      const char *name)
{
	int64_t rows = t->ne[1], cols = t->ne[0];
	size_t bytes = allm_qb_bytes(dt, rows, cols);
	uint8_t *b = malloc(bytes);
	float *y = malloc((size_t)cols * sizeof(float));
	int bad = 0;
	CHECK(t->nbytes == bytes, "%s: %zu bytes as %s, %llu in the file", name, bytes, allm_dtype_name(dt),
	      (unsigned long long)t->nbytes);
	allm_gguf_rows_as_blocks(t, 0, rows, dt, b);
	CHECK(!memcmp(b, t->data, bytes), "%s: not the file's bytes", name);
	for (int64_t r = 0; r < rows; r++) {
		allm_qb_dequantize_row(dt, y, b, cols, r);
		bad += memcmp(y, ref + r * cols, (size_t)cols * sizeof(float)) != 0;
	}
	CHECK(bad == 0, "%s as %s blocks: %d rows off", name, allm_dtype_name(dt), bad);
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
		CHECK(allm_gguf_blocks_as(t->type, formats[i].native), "%s: not kept as blocks", formats[i].name);
		as_blocks(t, formats[i].native, ref, formats[i].name);
		free(y);
	}
	/* the element types, and one the engine does not load */
	CHECK(allm_gguf_native_dtype(ALLM_GGML_F16) == ALLM_DTYPE_F16 &&
	      allm_gguf_native_dtype(ALLM_GGML_BF16) == ALLM_DTYPE_BF16 &&
	      allm_gguf_native_dtype(ALLM_GGML_F32) == ALLM_DTYPE_F32 &&
	      !allm_gguf_dequant_supported(ALLM_GGML_Q2_K) && !allm_gguf_dequant_supported(ALLM_GGML_Q3_K) &&
	      !allm_gguf_dequant_supported(23 /* IQ4_XS */), "element types");
	/* the block geometry the reader checks files against: the structs' sizes */
	uint32_t block = 0, bytes = 0;
	CHECK(allm_gguf_ttype_info(ALLM_GGML_Q5_K, &block, &bytes) && block == 256 && bytes == 176 &&
	      allm_gguf_ttype_info(ALLM_GGML_Q6_K, &block, &bytes) && bytes == allm_qb_block_bytes(ALLM_DTYPE_Q6_K) &&
	      !allm_gguf_ttype_info(4, &block, &bytes) && !allm_gguf_ttype_info(42, &block, &bytes),
	      "block geometry");
	allm_gguf_close(g);
	if (n_fail)
		return 1;
	printf("test-gguf-blocks: all checks passed\n");
	return 0;
}
