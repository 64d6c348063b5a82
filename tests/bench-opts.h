/* Option parsing shared by the GEMM benchmarks (bench-gemm, bench-decode-gemv). */
#ifndef ALLM_BENCH_OPTS_H
#define ALLM_BENCH_OPTS_H

#include "backend.h"

#include <stdlib.h>
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
