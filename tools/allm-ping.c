/* allm-ping: round-trip latency of the shared-memory rings against a Unix socket,
 * measured by the same tool in the same run (DESIGN §8). No engine is needed: it
 * forks its own responder process.
 *
 *   allm-ping [-n N] [--json] [--spin-us S]
 *
 * The modes (ring_spin, ring_sleep, uds) are described in allm-ping.h; the
 * measurement lives in allm-ping-core.c, shared with allm-bench --ping.
 * Prints p50/p90/p99/mean in microseconds per mode, or with --json one object
 * {"ring_spin": {"p50", "p90", "p99", "mean", "n"}, "ring_sleep": {...}, "uds": {...}}.
 */
#include "allm-ping.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "allm-ping"

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [-n N] [--json] [--spin-us S]\n"
		   "Round-trip latency: shm rings (spinning; sleeping on eventfd doorbells) vs a\n"
		   "Unix socket, against a responder process it forks itself (no engine needed).\n"
		   "  -n N          timed round trips per mode (default 10000)\n"
		   "  --json        one JSON object: ring_spin, ring_sleep, uds: {p50,p90,p99,mean,n}\n"
		   "  --spin-us S   ring_sleep: spin this long before sleeping (default 0)\n");
}

int main(int argc, char **argv)
{
	long n = 10000;
	double spin_us = 0;
	bool json = false;
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i];
		char *end;
		if (!strcmp(f, "--json")) {
			json = true;
		} else if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(f, "-n") && i + 1 < argc) {
			n = strtol(argv[++i], &end, 10);
			if (*end || n < 1 || n > 100000000) {
				fprintf(stderr, PROG ": -n wants an integer in 1..100000000\n");
				return 2;
			}
		} else if (!strcmp(f, "--spin-us") && i + 1 < argc) {
			spin_us = strtod(argv[++i], &end);
			if (*end || !(spin_us >= 0 && spin_us <= 1e6)) {
				fprintf(stderr, PROG ": --spin-us wants a number in 0..1000000\n");
				return 2;
			}
		} else {
			fprintf(stderr, PROG ": unknown flag or missing value: %s\n", f);
			usage(stderr);
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	struct allm_ping_report rep;
	char err[256];
	if (allm_ping_measure(n, spin_us, &rep, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		return 1;
	}
	allm_ping_print(stdout, PROG, &rep, json);
	return 0;
}
