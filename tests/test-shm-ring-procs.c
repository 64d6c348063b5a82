/* Description: SPSC rings across two processes over a real memfd segment: the parent creates the segment and both doorbells and hands them to a forked child by SCM_RIGHTS (the child maps the fd itself); 10^7 sequence-checked entries flow each way at once (SQ parent->child, CQ child->parent), each side sleeping on its eventfd doorbell with NEED_WAKEUP after a short spin; then a phase with 8-slot rings and no spin so that nearly every entry sleeps and wakes; no entry is lost, duplicated, reordered or torn and no wake-up is lost.
 *
 * Usage: test-shm-ring-procs [N]   (N entries per direction in the big phase, default 10^7)
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

#include "test-check.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
	uint64_t z = x + UINT64_C(0x9E3779B97F4A7C15);
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Both entry kinds are 128 bytes: seq at 8 (user_tag), a check word at 16
 * (request_id), and the complement of seq in the last 8 bytes (a torn copy shows). */
static void fill(uint8_t *e, uint64_t seq, uint64_t salt)
{
	uint64_t chk = mix(seq ^ salt), inv = ~seq;
	memset(e, (int)(seq & 0xFF), 128);
	memcpy(e + 8, &seq, 8);
	memcpy(e + 16, &chk, 8);
	memcpy(e + 120, &inv, 8);
}

static bool check_entry(const uint8_t *e, uint64_t seq, uint64_t salt)
{
	uint64_t s, chk, inv;
	memcpy(&s, e + 8, 8);
	memcpy(&chk, e + 16, 8);
	memcpy(&inv, e + 120, 8);
	return s == seq && chk == mix(seq ^ salt) && inv == ~seq && e[40] == (uint8_t)(seq & 0xFF);
}

struct phase {
	uint64_t n;   /* entries per direction */
	int spin;     /* idle polls before sleeping on the doorbell */
	uint32_t entries; /* ring slots */
};

struct stats {
	uint64_t sent, recvd, bad, sleeps, rings, timeouts, lost;
	double seconds;
};

/* One side: produces n entries on prod (salt_out), consumes n from cons (salt_in),
 * ringing peer_db when the peer sleeps and sleeping on own_db when idle. */
static void run_side(struct allm_ring_prod *prod, struct allm_ring_cons *cons,
		     struct allm_doorbell *peer_db, struct allm_doorbell *own_db,
		     const struct phase *ph, uint64_t salt_out, uint64_t salt_in, struct stats *st)
{
	uint8_t e[128];
	uint64_t n = ph->n;
	int idle = 0;
	double t0 = now_s();
	memset(st, 0, sizeof(*st));
	while (st->sent < n || st->recvd < n) {
		int pushed = 0, popped = 0;
		while (st->sent < n && pushed < 64) {
			fill(e, st->sent, salt_out);
			int r = allm_ring_push(prod, e);
			if (r == -EAGAIN)
				break;
			if (r) {
				st->bad++;
				return;
			}
			st->sent++;
			pushed++;
		}
		if (pushed && allm_ring_needs_wakeup(prod)) {
			allm_doorbell_ring(peer_db);
			st->rings++;
		}
		while (st->recvd < n && popped < 64) {
			int r = allm_ring_pop(cons, e);
			if (r == -EAGAIN)
				break;
			if (r) {
				st->bad++;
				return;
			}
			if (!check_entry(e, st->recvd, salt_in) && st->bad++ < 5) {
				uint64_t got;
				memcpy(&got, e + 8, 8);
				fprintf(stderr, "entry %llu: got seq %llu or a torn copy\n",
					(unsigned long long)st->recvd, (unsigned long long)got);
			}
			st->recvd++;
			popped++;
		}
		if (pushed || popped) {
			idle = 0;
			continue;
		}
		if (idle++ < ph->spin) {
			allm_cpu_relax();
			continue;
		}
		idle = 0;
		if (st->recvd < n) {
			/* nothing to pop (and nothing we can push): sleep until the peer rings */
			if (allm_ring_prepare_sleep(cons)) {
				st->sleeps++;
				int w = allm_doorbell_wait(own_db, 2000);
				allm_doorbell_drain(own_db, NULL);
				allm_ring_finish_sleep(cons);
				if (w == -ETIMEDOUT) {
					st->timeouts++;
					if (allm_ring_count(cons) > 0)
						st->lost++; /* entries waited and nobody rang */
				}
			}
		} else {
			sched_yield(); /* only our pushes are left and the ring is full */
		}
	}
	st->seconds = now_s() - t0;
}

static int send_fds(int sock, const void *msg, size_t len, const int *fds, int nfd)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = {(void *)msg, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfd);
	return sendmsg(sock, &mh, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_fds(int sock, void *msg, size_t len, int *fds, int nfd)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {msg, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)len)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int) * (size_t)nfd))
		return -1;
	memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)nfd);
	return 0;
}

#define SALT_SQ UINT64_C(0x5151)
#define SALT_CQ UINT64_C(0xC0C0)

/* The child: receives a phase with its segment and doorbells, runs the engine's
 * half (consumes the SQ, produces the CQ), reports its stats; until the parent
 * closes the socket. */
static int child_main(int sock)
{
	for (;;) {
		struct phase ph;
		int fds[3];
		if (recv_fds(sock, &ph, sizeof(ph), fds, 3))
			return 0; /* the parent is done */
		struct allm_shm_segment *seg;
		struct allm_doorbell sq_db, cq_db;
		struct allm_ring_cons sq;
		struct allm_ring_prod cq;
		if (allm_shm_segment_map_fd(fds[0], &seg) || allm_doorbell_from_fd(&sq_db, fds[1]) ||
		    allm_doorbell_from_fd(&cq_db, fds[2]) || allm_shm_segment_sq_cons(seg, &sq) ||
		    allm_shm_segment_cq_prod(seg, &cq)) {
			fprintf(stderr, "child: cannot map the segment\n");
			return 1;
		}
		close(fds[0]);
		struct stats st;
		run_side(&cq, &sq, &cq_db, &sq_db, &ph, SALT_CQ, SALT_SQ, &st);
		if (send(sock, &st, sizeof(st), 0) != (ssize_t)sizeof(st))
			return 1;
		allm_doorbell_close(&sq_db);
		allm_doorbell_close(&cq_db);
		allm_shm_segment_destroy(seg);
	}
}

static void run_phase(int sock, const char *name, const struct phase *ph)
{
	struct allm_shm_layout want = {.sq_entries = ph->entries, .cq_entries = ph->entries,
				       .arena_size = 4096};
	struct allm_shm_segment *seg;
	struct allm_doorbell sq_db, cq_db;
	struct allm_ring_prod sq;
	struct allm_ring_cons cq;
	if (allm_shm_segment_create(&want, false, &seg) || allm_doorbell_create(&sq_db) ||
	    allm_doorbell_create(&cq_db) || allm_shm_segment_sq_prod(seg, &sq) ||
	    allm_shm_segment_cq_cons(seg, &cq)) {
		fprintf(stderr, "cannot create the segment\n");
		exit(1);
	}
	int fds[3] = {seg->fd, allm_doorbell_fd(&sq_db), allm_doorbell_fd(&cq_db)};
	if (send_fds(sock, ph, sizeof(*ph), fds, 3)) {
		perror("sendmsg");
		exit(1);
	}
	struct stats me, peer;
	run_side(&sq, &cq, &sq_db, &cq_db, ph, SALT_SQ, SALT_CQ, &me);
	if (recv(sock, &peer, sizeof(peer), MSG_WAITALL) != (ssize_t)sizeof(peer)) {
		fprintf(stderr, "%s: the child died\n", name);
		exit(1);
	}
	CHECK(me.sent == ph->n && me.recvd == ph->n && me.bad == 0, "%s parent: sent %llu recvd %llu bad %llu",
	      name, (unsigned long long)me.sent, (unsigned long long)me.recvd, (unsigned long long)me.bad);
	CHECK(peer.sent == ph->n && peer.recvd == ph->n && peer.bad == 0,
	      "%s child: sent %llu recvd %llu bad %llu", name, (unsigned long long)peer.sent,
	      (unsigned long long)peer.recvd, (unsigned long long)peer.bad);
	CHECK(me.lost == 0 && peer.lost == 0, "%s: lost wake-ups: parent %llu, child %llu", name,
	      (unsigned long long)me.lost, (unsigned long long)peer.lost);
	printf("%s: %llu entries each way in %.2f s (%.1f M/s per direction); sleeps: parent %llu, "
	       "child %llu; doorbell rings: parent %llu, child %llu; timeouts %llu\n",
	       name, (unsigned long long)ph->n, me.seconds, ph->n / me.seconds / 1e6,
	       (unsigned long long)me.sleeps, (unsigned long long)peer.sleeps,
	       (unsigned long long)me.rings, (unsigned long long)peer.rings,
	       (unsigned long long)(me.timeouts + peer.timeouts));
	if (!strcmp(name, "sleepy"))
		CHECK(me.sleeps + peer.sleeps > 0 && me.rings + peer.rings > 0,
		      "%s: the doorbells were never used", name);
	allm_doorbell_close(&sq_db);
	allm_doorbell_close(&cq_db);
	allm_shm_segment_destroy(seg);
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000u;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(child_main(sv[1]));
	}
	close(sv[1]);
	struct phase big = {.n = n, .spin = 256, .entries = 256};
	struct phase sleepy = {.n = n / 100 ? n / 100 : 1, .spin = 0, .entries = 8};
	run_phase(sv[0], "big", &big);
	run_phase(sv[0], "sleepy", &sleepy);
	close(sv[0]);
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status %d", status);
	if (n_fail) {
		fprintf(stderr, "%d failures\n", n_fail);
		return 1;
	}
	printf("shm-ring-procs: all checks passed\n");
	return 0;
}
