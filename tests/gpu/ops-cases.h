/* The cases of the backend conformance test (backend-ops.c): each names an op, a
 * dtype and a shape, lists its device buffers with their initial host contents
 * and how each output is compared, and a call that runs the op on a backend. */
#ifndef ALLM_TEST_OPS_CASES_H
#define ALLM_TEST_OPS_CASES_H

#include "backend.h"

#include <math.h>

#define OP_MAX_BUFS 8

enum op_cmp {
	OP_CMP_NONE, /* an input */
	OP_CMP_NMSE, /* f32: normalised MSE <= limit */
	OP_CMP_EQ, /* f32: every value == (so -0.0 == +0.0) */
	OP_CMP_BYTES, /* identical bytes (ids, KV pools, copies) */
};

struct op_buf {
	void *host; /* initial contents (NULL: sentinels, so unwritten outputs show) */
	size_t bytes;
	enum op_cmp cmp;
	double limit; /* OP_CMP_NMSE */
};

struct op_case {
	char name[160];
	enum allm_backend_op op;
	enum allm_dtype dt;
	int nb;
	struct op_buf b[OP_MAX_BUFS];
	/* runs the op; d[i] = device address of buffer i */
	int (*call)(allm_backend_t *be, void **d, const struct op_case *c);
	int64_t n, k, m; /* sizes, per op */
	int32_t n_heads, layer;
	float eps, scale;
	bool with_w, with_b, in_place;
	struct allm_kv_layout lay;
	int32_t n_tokens, n_seqs, max_blocks, max_ctx; /* attention / kv_write */
	int32_t window; /* attention: a sliding window (op ALLM_OP_SLIDING_WINDOW) */
};

/* All cases; *ret is malloc'ed. Returns how many. */
int ops_build_cases(struct op_case **ret);
void ops_free_cases(struct op_case *c, int n);

#endif
