/* Option parsing shared by the GEMM benchmarks (bench-gemm, bench-decode-gemv). */
#ifndef ALLM_BENCH_OPTS_H
#define ALLM_BENCH_OPTS_H

#include "backend.h"

#include <string.h>

/* -d: a weight dtype name, or "int8" for the q8 weights of --quant int8. */
static inline int bench_dtype_parse(const char *s, enum allm_dtype *ret)
{
	if (!strcmp(s, "int8")) {
		*ret = ALLM_DTYPE_Q8;
		return 0;
	}
	return allm_dtype_parse(s, ret);
}

#endif
