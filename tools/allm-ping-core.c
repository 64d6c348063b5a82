/* The measurement behind allm-ping and allm-bench --ping: see allm-ping.h. */
#include "allm-ping.h"

#include "shm-doorbell.h"
#include "shm-ring.h"
#include "shm-segment.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static struct allm_ping_result summarize(uint64_t *ns, long n)
{
	struct allm_ping_result r = {.n = n};
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

static int ring_mode(bool sleep, uint64_t spin_ns, long n, struct allm_ping_result *res,
		     char *err, size_t errlen)
{
	struct ring_pair rp = {.sq_db = {.fd = -1}, .cq_db = {.fd = -1}};
	struct allm_shm_layout want = {.sq_entries = 64, .cq_entries = 64, .arena_size = 4096};
	struct allm_ring_prod sq;
	struct allm_ring_cons cq;
	uint64_t *ns = NULL;
	pid_t pid = -1;
	int rc = -1, r;

	if ((r = allm_shm_segment_create(&want, false, &rp.seg)) ||
	    (r = allm_doorbell_create(&rp.sq_db)) || (r = allm_doorbell_create(&rp.cq_db))) {
		snprintf(err, errlen, "cannot create a segment: %s", strerror(-r));
		goto out;
	}
	if (allm_shm_segment_sq_prod(rp.seg, &sq) || allm_shm_segment_cq_cons(rp.seg, &cq) ||
	    !(ns = malloc((size_t)n * sizeof(*ns)))) {
		snprintf(err, errlen, "cannot set up the rings");
		goto out;
	}
	/* The responder inherits the MAP_SHARED mapping and the doorbell fds. */
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "cannot fork a responder: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		_exit(ring_responder(&rp, sleep, spin_ns));
	long warm = n / 10;
	rc = 0;
	for (long i = 0; i < warm + n; i++) {
		struct allm_sqe q;
		struct allm_cqe e;
		memset(&q, 0, sizeof(q));
		q.opcode = ALLM_SQE_OP_NOP;
		q.user_tag = (uint64_t)i;
		uint64_t t0 = now_ns();
		if (push_wake(&sq, &rp.sq_db, &q, sleep) || pop_wait(&cq, &rp.cq_db, &e, sleep, spin_ns) ||
		    e.user_tag != (uint64_t)i) {
			snprintf(err, errlen, "ring round trip %ld failed", i);
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
	if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		snprintf(err, errlen, "the ring responder failed");
		rc = -1;
	}
	if (!rc)
		*res = summarize(ns, n);
out:
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

static int uds_mode(long n, struct allm_ping_result *res, char *err, size_t errlen)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot fork a responder: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
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
			snprintf(err, errlen, "socket round trip %ld failed", i);
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


int allm_ping_measure(long n, double spin_us, struct allm_ping_report *ret, char *err,
		      size_t errlen)
{
	struct allm_ping_report r;
	if (n < 1) {
		snprintf(err, errlen, "at least one round trip needed");
		return -1;
	}
	if (ring_mode(false, 0, n, &r.ring_spin, err, errlen) ||
	    ring_mode(true, (uint64_t)(spin_us * 1e3), n, &r.ring_sleep, err, errlen) ||
	    uds_mode(n, &r.uds, err, errlen))
		return -1;
	*ret = r;
	return 0;
}

void allm_ping_print(FILE *f, const char *prog, const struct allm_ping_report *r, bool json)
{
	const char *names[] = {"ring_spin", "ring_sleep", "uds"};
	const struct allm_ping_result *rs[] = {&r->ring_spin, &r->ring_sleep, &r->uds};
	if (json) {
		fprintf(f, "{");
		for (int i = 0; i < 3; i++)
			fprintf(f, "%s\"%s\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, "
				   "\"mean\": %.3f, \"n\": %ld}",
				i ? ", " : "", names[i], rs[i]->p50, rs[i]->p90, rs[i]->p99, rs[i]->mean,
				rs[i]->n);
		fprintf(f, "}\n");
		return;
	}
	fprintf(f, "%s: %ld round trips per mode, %d-byte messages, responder in a forked "
		   "process\n%-11s %9s %9s %9s %9s   (microseconds)\n",
		prog, r->ring_spin.n, MSG_SIZE, "mode", "p50", "p90", "p99", "mean");
	for (int i = 0; i < 3; i++)
		fprintf(f, "%-11s %9.2f %9.2f %9.2f %9.2f\n", names[i], rs[i]->p50, rs[i]->p90,
			rs[i]->p99, rs[i]->mean);
}
