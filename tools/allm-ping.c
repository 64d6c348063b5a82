/* allm-ping: round-trip latency of the shared-memory rings against a Unix socket,
 * measured by the same tool in the same run (DESIGN §8). No engine is needed: it
 * forks its own responder process.
 *
 *   allm-ping [-n N] [--json] [--spin-us S]
 *
 * Modes, N timed round trips each (after N/10 untimed warm-up ones):
 *   ring_spin   the client pushes an SQE-sized entry (128 B) on an SQ ring of a
 *               memfd segment, the responder pops it and pushes a CQE-sized reply on
 *               the CQ ring; both sides busy-poll (yielding the CPU now and then, so
 *               that a single core still makes progress);
 *   ring_sleep  the same, but each side sleeps on its eventfd doorbell with the
 *               NEED_WAKEUP protocol after spinning --spin-us microseconds (default
 *               0: sleep at once), and the other side rings only when asked;
 *   uds         128-byte messages both ways over a SOCK_STREAM Unix socket pair.
 * Prints p50/p90/p99/mean in microseconds per mode, or with --json one object
 * {"ring_spin": {"p50", "p90", "p99", "mean", "n"}, "ring_sleep": {...}, "uds": {...}}.
 */
#include "shm-doorbell.h"
#include "shm-ring.h"
#include "shm-segment.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "allm-ping"
#define MSG_SIZE 128
#define STOP_SEQ UINT64_MAX
/* Busy-poll iterations between two sched_yield() calls. */
#define YIELD_EVERY 4096

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct result {
	double p50, p90, p99, mean;
	long n;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static struct result summarize(uint64_t *ns, long n)
{
	struct result r = {.n = n};
	double sum = 0;
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	for (long i = 0; i < n; i++)
		sum += (double)ns[i];
	r.mean = sum / (double)n / 1e3;
	r.p50 = ns[(n - 1) * 50 / 100] / 1e3;
	r.p90 = ns[(n - 1) * 90 / 100] / 1e3;
	r.p99 = ns[(n - 1) * 99 / 100] / 1e3;
	return r;
}

/* --- the rings -------------------------------------------------------------- */

struct ring_pair {
	struct allm_shm_segment *seg;
	struct allm_doorbell sq_db, cq_db;
};

/* Pops one entry: busy-polls, or (sleep) spins spin_ns then sleeps on db with the
 * NEED_WAKEUP protocol. Returns 0 or -1. */
static int pop_wait(struct allm_ring_cons *cons, struct allm_doorbell *db, void *out, bool sleep,
		    uint64_t spin_ns)
{
	uint64_t start = sleep && spin_ns ? now_ns() : 0;
	for (unsigned i = 1;; i++) {
		int r = allm_ring_pop(cons, out);
		if (r == 0)
			return 0;
		if (r != -EAGAIN)
			return -1;
		if (!sleep) {
			if (i % YIELD_EVERY == 0)
				sched_yield();
			else
				allm_cpu_relax();
			continue;
		}
		if (spin_ns && now_ns() - start < spin_ns) {
			allm_cpu_relax();
			continue;
		}
		if (allm_ring_prepare_sleep(cons)) {
			allm_doorbell_wait(db, 1000);
			allm_doorbell_drain(db, NULL);
			allm_ring_finish_sleep(cons);
		}
	}
}

static int push_wake(struct allm_ring_prod *prod, struct allm_doorbell *db, const void *e, bool sleep)
{
	for (unsigned i = 1;; i++) {
		int r = allm_ring_push(prod, e);
		if (r == 0)
			break;
		if (r != -EAGAIN)
			return -1;
		if (i % YIELD_EVERY == 0)
			sched_yield();
		else
			allm_cpu_relax();
	}
	if (sleep && allm_ring_needs_wakeup(prod))
		allm_doorbell_ring(db);
	return 0;
}

/* The responder: pops SQEs and answers each with a CQE until STOP_SEQ. */
static int ring_responder(struct ring_pair *rp, bool sleep, uint64_t spin_ns)
{
	struct allm_ring_cons sq;
	struct allm_ring_prod cq;
	if (allm_shm_segment_sq_cons(rp->seg, &sq) || allm_shm_segment_cq_prod(rp->seg, &cq))
		return 1;
	for (;;) {
		struct allm_sqe q;
		struct allm_cqe e;
		if (pop_wait(&sq, &rp->sq_db, &q, sleep, spin_ns))
			return 1;
		if (q.user_tag == STOP_SEQ)
			return 0;
		memset(&e, 0, sizeof(e));
		e.kind = ALLM_CQE_TOKEN;
		e.user_tag = q.user_tag;
		if (push_wake(&cq, &rp->cq_db, &e, sleep))
			return 1;
	}
}

static int ring_mode(bool sleep, uint64_t spin_ns, long n, struct result *res)
{
	struct ring_pair rp;
	struct allm_shm_layout want = {.sq_entries = 64, .cq_entries = 64, .arena_size = 4096};
	int r = allm_shm_segment_create(&want, false, &rp.seg);
	if (r || allm_doorbell_create(&rp.sq_db) || allm_doorbell_create(&rp.cq_db)) {
		fprintf(stderr, PROG ": cannot create a segment: %s\n", strerror(r ? -r : errno));
		return -1;
	}
	/* The responder inherits the MAP_SHARED mapping and the doorbell fds. */
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(ring_responder(&rp, sleep, spin_ns));
	struct allm_ring_prod sq;
	struct allm_ring_cons cq;
	if (allm_shm_segment_sq_prod(rp.seg, &sq) || allm_shm_segment_cq_cons(rp.seg, &cq))
		return -1;
	long warm = n / 10;
	uint64_t *ns = malloc((size_t)n * sizeof(*ns));
	if (!ns)
		return -1;
	int rc = 0;
	for (long i = 0; i < warm + n; i++) {
		struct allm_sqe q;
		struct allm_cqe e;
		memset(&q, 0, sizeof(q));
		q.opcode = ALLM_OP_NOP;
		q.user_tag = (uint64_t)i;
		uint64_t t0 = now_ns();
		if (push_wake(&sq, &rp.sq_db, &q, sleep) || pop_wait(&cq, &rp.cq_db, &e, sleep, spin_ns) ||
		    e.user_tag != (uint64_t)i) {
			fprintf(stderr, PROG ": ring round trip %ld failed\n", i);
			rc = -1;
			break;
		}
		if (i >= warm)
			ns[i - warm] = now_ns() - t0;
	}
	struct allm_sqe stop;
	memset(&stop, 0, sizeof(stop));
	stop.user_tag = STOP_SEQ;
	if (rc)
		kill(pid, SIGKILL);
	else
		push_wake(&sq, &rp.sq_db, &stop, sleep);
	int status;
	waitpid(pid, &status, 0);
	if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		rc = -1;
	if (!rc)
		*res = summarize(ns, n);
	free(ns);
	allm_doorbell_close(&rp.sq_db);
	allm_doorbell_close(&rp.cq_db);
	allm_shm_segment_destroy(rp.seg);
	return rc;
}

/* --- the Unix socket ---------------------------------------------------------- */

static int io_all(int fd, void *buf, size_t len, bool wr)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t k = wr ? write(fd, p, len) : read(fd, p, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

static int uds_mode(long n, struct result *res)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		uint8_t m[MSG_SIZE];
		close(sv[0]);
		while (io_all(sv[1], m, sizeof(m), false) == 0)
			if (io_all(sv[1], m, sizeof(m), true))
				_exit(1);
		_exit(0); /* EOF: done */
	}
	close(sv[1]);
	long warm = n / 10;
	uint64_t *ns = malloc((size_t)n * sizeof(*ns));
	int rc = ns ? 0 : -1;
	for (long i = 0; !rc && i < warm + n; i++) {
		uint8_t m[MSG_SIZE];
		memset(m, (int)(i & 0xFF), sizeof(m));
		memcpy(m, &i, sizeof(i));
		uint64_t t0 = now_ns();
		long back;
		if (io_all(sv[0], m, sizeof(m), true) || io_all(sv[0], m, sizeof(m), false) ||
		    (memcpy(&back, m, sizeof(back)), back != i)) {
			fprintf(stderr, PROG ": socket round trip %ld failed\n", i);
			rc = -1;
			break;
		}
		if (i >= warm)
			ns[i - warm] = now_ns() - t0;
	}
	close(sv[0]);
	int status;
	waitpid(pid, &status, 0);
	if (!rc)
		*res = summarize(ns, n);
	free(ns);
	return rc;
}

/* --- main ------------------------------------------------------------------------ */

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
	struct result spin, slp, uds;
	if (ring_mode(false, 0, n, &spin) || ring_mode(true, (uint64_t)(spin_us * 1e3), n, &slp) ||
	    uds_mode(n, &uds))
		return 1;
	const char *names[] = {"ring_spin", "ring_sleep", "uds"};
	const struct result *rs[] = {&spin, &slp, &uds};
	if (json) {
		printf("{");
		for (int i = 0; i < 3; i++)
			printf("%s\"%s\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"mean\": %.3f, "
			       "\"n\": %ld}",
			       i ? ", " : "", names[i], rs[i]->p50, rs[i]->p90, rs[i]->p99, rs[i]->mean,
			       rs[i]->n);
		printf("}\n");
	} else {
		printf(PROG ": %ld round trips per mode, %d-byte messages, responder in a forked "
			    "process\n%-11s %9s %9s %9s %9s   (microseconds)\n",
		       n, MSG_SIZE, "mode", "p50", "p90", "p99", "mean");
		for (int i = 0; i < 3; i++)
			printf("%-11s %9.2f %9.2f %9.2f %9.2f\n", names[i], rs[i]->p50, rs[i]->p90,
			       rs[i]->p99, rs[i]->mean);
	}
	return 0;
}
