/* The C side of bench/python-client.sh's round trip: the same loop as
 * `python-client.py rtt`, through libadaptivellm directly: submit a 1-token
 * request, time until the engine's ACCEPTED comes back (spinning 1 ms before
 * sleeping), then take its FINAL untimed. Prints {"accepted_us": {p50, p90, p99,
 * mean}, "n": N}. Built by the script with cc against include/ and the build's
 * library. Usage: ring-rtt ENGINE N */
#include <adaptivellm/client.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double q(const double *s, long n, double p)
{
	double x = (n - 1) * p;
	long lo = (long)x, hi = lo + 1 < n ? lo + 1 : n - 1;
	return s[lo] + (s[hi] - s[lo]) * (x - lo);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	long n = atol(argv[2]), warm = n / 10;
	struct allm_client_opts o = { .name = argv[1], .spin_us = 1000 };
	allm_client_t *c;
	char err[256];
	if (allm_client_connect(&o, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "ring-rtt: %s\n", err);
		return 1;
	}
	double *us = calloc((size_t)n, sizeof(*us));
	const int32_t id = 1;
	for (long i = 0; i < n + warm; i++) {
		struct allm_request_params p;
		allm_request_params_init(&p);
		p.prompt_ids = &id;
		p.n_prompt_ids = 1;
		p.params.max_tokens = 1;
		p.user_tag = (uint64_t)i + 1;
		double t = now_us();
		if (allm_client_submit(c, &p) < 0)
			return 1;
		struct allm_event ev;
		do {
			if (allm_client_wait(c, &ev, -1) != 1)
				return 1;
		} while (ev.kind != ALLM_EVENT_ACCEPTED);
		if (i >= warm)
			us[i - warm] = now_us() - t;
		do {
			if (allm_client_wait(c, &ev, -1) != 1)
				return 1;
		} while (ev.kind != ALLM_EVENT_FINAL);
	}
	qsort(us, (size_t)n, sizeof(*us), cmp);
	double sum = 0;
	for (long i = 0; i < n; i++)
		sum += us[i];
	printf("{\"accepted_us\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"mean\": %.3f}, \"n\": %ld}\n",
	       q(us, n, 0.5), q(us, n, 0.9), q(us, n, 0.99), sum / n, n);
	allm_client_disconnect(c);
	free(us);
	return 0;
}
