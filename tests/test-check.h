/* The failure-counting check the unit tests share: a failed CHECK prints where and
 * why and counts, the test goes on and exits 1 at the end if n_fail > 0. */
#ifndef ALLM_TEST_CHECK_H
#define ALLM_TEST_CHECK_H

#include <stdio.h>

static int n_fail __attribute__((unused)); /* a harness may include it for a test that keeps its own count */

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			n_fail++; \
		} \
	} while (0)

#endif
