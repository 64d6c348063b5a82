/* Round-trip latency of the shared-memory rings against a Unix socket (DESIGN §8),
 * measured in one run against a responder process forked for the purpose (no
 * engine needed). allm-ping and allm-bench --ping both call this, so the two
 * report the same numbers from the same code.
 *
 * Modes, n timed round trips each (after n/10 untimed warm-up ones):
 *   ring_spin   the client pushes an SQE-sized entry (128 B) on an SQ ring of a
 *               memfd segment, the responder pops it and pushes a CQE-sized reply on
 *               the CQ ring; both sides busy-poll (yielding the CPU now and then, so
 *               that a single core still makes progress);
 *   ring_sleep  the same, but each side sleeps on its eventfd doorbell with the
 *               NEED_WAKEUP protocol after spinning spin_us microseconds (0: sleep
 *               at once), and the other side rings only when asked;
 *   uds         128-byte messages both ways over a SOCK_STREAM Unix socket pair. */
#ifndef ALLM_PING_H
#define ALLM_PING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Microseconds per round trip over n samples. */
struct allm_ping_result {
	double p50, p90, p99, mean;
	long n;
};

struct allm_ping_report {
	struct allm_ping_result ring_spin, ring_sleep, uds;
};

/* Runs the three modes. Returns 0, or -1 with a one-line reason in err. The caller
 * must ignore SIGPIPE (the socket responder may be gone when a write fails). */
int allm_ping_measure(long n, double spin_us, struct allm_ping_report *ret, char *err,
		      size_t errlen);

/* Prints the report: with json one object {"ring_spin": {p50,p90,p99,mean,n},
 * "ring_sleep": {...}, "uds": {...}} and a newline, else a table under a header
 * line naming prog. */
void allm_ping_print(FILE *f, const char *prog, const struct allm_ping_report *r, bool json);

#endif
