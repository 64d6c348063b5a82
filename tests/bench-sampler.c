/* Microseconds per token of the host sampler on one logits row, for the sampling
 * settings clients send (not a test):
 *   build/tests/bench-sampler [-V vocab] [-n draws]
 * The row is seeded and shaped like a language model's: a bulk around 0 and a few
 * tokens far above it. Each setting prints one line as it finishes. */
#include "sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A sum of 4 uniforms (about normal, sd 1.15) times 2, and 1 token in 500 lifted by 8-16. */
static void make_row(float *l, int32_t V)
{
	struct allm_rng r;
	allm_rng_seed(&r, 1234);
	for (int32_t i = 0; i < V; i++) {
		double u = allm_rng_unit(&r) + allm_rng_unit(&r) + allm_rng_unit(&r) + allm_rng_unit(&r);
		l[i] = (float)((u - 2.0) * 2.0);
		if (allm_rng_next(&r) % 500 == 0)
			l[i] += (float)(8.0 + 8.0 * allm_rng_unit(&r));
	}
}

int main(int argc, char **argv)
{
	int32_t V = 32000;
	int n = 2000;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-V"))
			V = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			n = atoi(argv[i + 1]);
		else
			break;
	}
	if (V < 2 || n < 1) {
		fprintf(stderr, "usage: bench-sampler [-V vocab >= 2] [-n draws >= 1]\n");
		return 2;
	}
	static const struct {
		const char *name;
		float t, top_p;
		int32_t top_k;
	} set[] = {
		{ "greedy", 0.0f, 1.0f, 0 },
		{ "temperature 1 (whole row)", 1.0f, 1.0f, 0 },
		{ "top_p 0.9", 1.0f, 0.9f, 0 },
		{ "top_k 40", 1.0f, 1.0f, 40 },
		{ "top_k 40, top_p 0.95, T 0.8", 0.8f, 0.95f, 40 },
		{ "top_k 1000 (past the device top-k)", 1.0f, 1.0f, 1000 },
	};
	float *l = malloc((size_t)V * sizeof(float));
	if (!l)
		return 1;
	make_row(l, V);
	printf("bench-sampler: vocab %d, %d draws a setting\n", V, n);
	int rc = 0;
	for (size_t c = 0; c < sizeof(set) / sizeof(set[0]); c++) {
		struct allm_params p;
		struct allm_sampler s;
		allm_params_init(&p);
		p.temperature = set[c].t, p.top_p = set[c].top_p, p.top_k = set[c].top_k, p.seed = 7;
		if (allm_sampler_init(&s, &p, NULL, 0, V)) {
			fprintf(stderr, "bench-sampler: out of memory\n");
			rc = 1;
			break;
		}
		uint64_t check = 0;
		double t0 = now_s();
		for (int i = 0; i < n; i++)
			check += (uint64_t)allm_sampler_sample(&s, l);
		double us = (now_s() - t0) * 1e6 / n;
		allm_sampler_fini(&s);
		printf("%-38s %9.1f us/token (id sum %llu)\n", set[c].name, us, (unsigned long long)check);
		fflush(stdout);
	}
	free(l);
	return rc;
}
