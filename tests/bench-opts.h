/* Option parsing shared by the GEMM benchmarks (bench-gemm, bench-decode-gemv). */
#ifndef ALLM_BENCH_OPTS_H
#define ALLM_BENCH_OPTS_H

#include "backend.h"
#include "qblock.h"

#include <stdlib.h>
#include <string.h>

/* -d: a weight dtype name or a GGUF block format (q8_0, q4_0, q4_1, ...). */
static inline int bench_dtype_parse(const char *s, enum allm_dtype *ret)
{
	static const struct { const char *name; enum allm_dtype dt; } q[] = {
		{"q8_0", ALLM_DTYPE_Q8_0}, {"q4_0", ALLM_DTYPE_Q4_0},
		{"q4_1", ALLM_DTYPE_Q4_1}, {"q5_0", ALLM_DTYPE_Q5_0}, {"q5_1", ALLM_DTYPE_Q5_1},
		{"q4_k", ALLM_DTYPE_Q4_K}, {"q5_k", ALLM_DTYPE_Q5_K}, {"q6_k", ALLM_DTYPE_Q6_K},
	};
	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
		if (!strcmp(s, q[i].name)) {
			*ret = q[i].dt;
			return 0;
		}
	return allm_dtype_parse(s, ret);
}

/* Bytes of an m x k weight matrix of dt. */
static inline size_t bench_w_bytes(enum allm_dtype dt, int64_t m, int64_t k)
{
	if (allm_dtype_is_qblock(dt))
		return allm_qb_bytes(dt, m, k);
	return (size_t)(m * k) * allm_dtype_size(dt);
}

/* f[m * k] into w in dt. The formats --quant does not write (Q5_0 .. Q6_K) get
 * random quants instead, their f16 scales 2^-8 (what they compute does not matter
 * here, only how fast). */
static inline void bench_w_store(enum allm_dtype dt, void *w, const float *f, int64_t m, int64_t k)
{
	if (dt >= ALLM_DTYPE_Q5_0 && dt <= ALLM_DTYPE_Q6_K) {
		size_t bytes = allm_qb_bytes(dt, m, k), bb = allm_qb_block_bytes(dt);
		uint8_t *p = w;
		uint32_t r = 12345;
		for (size_t i = 0; i < bytes; i++)
			p[i] = (uint8_t)((r = r * 1103515245u + 12345u) >> 16);
		size_t d_at = dt == ALLM_DTYPE_Q6_K ? 208 : 0; /* d, and Q5_1/Q4_K/Q5_K's m or dmin after it */
		bool two = dt == ALLM_DTYPE_Q5_1 || dt == ALLM_DTYPE_Q4_K || dt == ALLM_DTYPE_Q5_K;
		for (size_t b = 0; b < bytes / bb; b++) {
			p[b * bb + d_at] = 0, p[b * bb + d_at + 1] = 0x1c;
			if (two)
				p[b * bb + 2] = 0, p[b * bb + 3] = 0x1c;
		}
		(void)f;
		return;
	}
	if (allm_dtype_is_qblock(dt))
		allm_qb_quantize_rows(dt, w, k, 0, f, m);
	else
		allm_from_f32(w, f, dt, (size_t)(m * k));
}

/* The options both take: -t threads, -s seconds, -i ISA, -d dtype. Returns 1 when
 * opt is one of them and its value parsed, 0 when opt is not one of them, -1 on a
 * bad value (the caller prints its usage). */
static inline int bench_common_opt(int opt, const char *arg, struct allm_backend_opts *o,
				   double *min_s, enum allm_dtype *dt)
{
	switch (opt) {
	case 't': o->n_threads = atoi(arg); return 1;
	case 's': *min_s = atof(arg); return 1;
	case 'i': return allm_cpu_isa_parse(arg, &o->cpu_isa) == 0 ? 1 : -1;
	case 'd': return bench_dtype_parse(arg, dt) == 0 ? 1 : -1;
	default: return 0;
	}
}

#endif
