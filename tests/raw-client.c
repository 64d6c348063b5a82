/* Raw clients for the hostile daemon tests: see raw-client.h. */
#include "raw-client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

char raw_path[600];

double raw_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void raw_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t rng_state = 0x1234567;
uint64_t raw_rnd(void)
{
	uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}


int raw_socket(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, raw_path, strlen(raw_path) + 1); /* length checked in main */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	return fd;
}

ssize_t raw_read_welcome(int fd, struct allm_welcome *w, int *fds, int *nfd, int flags)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {w, sizeof(*w)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
	*nfd = 0;
	/* nothing read: the control buffer is not the kernel's */
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); n > 0 && cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			*nfd = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(cm), (size_t)*nfd * sizeof(int));
		}
	return n;
}

ssize_t raw_recv_welcome(int fd, struct allm_welcome *w, int *fds, int *nfd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	*nfd = 0;
	if (poll(&p, 1, 5000) <= 0)
		return -1;
	return raw_read_welcome(fd, w, fds, nfd, MSG_WAITALL);
}

struct allm_hello raw_hello(uint32_t flags)
{
	struct allm_hello h = {.magic = ALLM_HELLO_MAGIC, .abi_version = ALLM_SHM_ABI_VERSION,
			       .flags = flags};
	return h;
}

/* The handshake done by hand; ack: send the mapped ack. Returns a raw client. */
struct raw *raw_connect(const struct allm_hello *h, bool ack)
{
	struct raw *r = calloc(1, sizeof(*r));
	if (!r)
		exit(2);
	r->sock = raw_socket();
	if (send(r->sock, h, sizeof(*h), MSG_NOSIGNAL) != (ssize_t)sizeof(*h)) {
		perror("send hello");
		exit(1);
	}
	struct allm_welcome w;
	int fds[8], nfd;
	ssize_t n = raw_recv_welcome(r->sock, &w, fds, &nfd);
	if (n != (ssize_t)sizeof(w) || w.magic != ALLM_WELCOME_MAGIC || w.status != 0) {
		fprintf(stderr, "FAIL: raw handshake: %zd bytes, status %d (%s)\n", n, w.status, w.message);
		exit(1);
	}
	int k = 0, e;
	if (w.shm_name[0])
		e = allm_shm_segment_open_posix(w.shm_name, &r->seg);
	else
		e = allm_shm_segment_map_fd(fds[k++], &r->seg);
	if (e || nfd != k + 2 || allm_doorbell_from_fd(&r->sq_db, fds[k]) ||
	    allm_doorbell_from_fd(&r->cq_db, fds[k + 1]) || allm_shm_segment_sq_prod(r->seg, &r->sq) ||
	    allm_shm_segment_cq_cons(r->seg, &r->cq)) {
		fprintf(stderr, "FAIL: raw client: cannot map the segment (%d, %d fds)\n", e, nfd);
		exit(1);
	}
	if (!w.shm_name[0])
		close(fds[0]);
	memcpy(r->shm_name, w.shm_name, sizeof(r->shm_name));
	r->arena_size = (uint32_t)r->seg->layout.arena_size;
	if (ack) {
		char m = ALLM_MAPPED_ACK;
		if (send(r->sock, &m, 1, MSG_NOSIGNAL) != 1)
			exit(1);
	}
	return r;
}

struct raw *raw_connect_f(uint32_t flags, bool ack)
{
	struct allm_hello h = raw_hello(flags);
	return raw_connect(&h, ack);
}

void raw_close(struct raw *r)
{
	close(r->sock);
	allm_doorbell_close(&r->sq_db);
	allm_doorbell_close(&r->cq_db);
	allm_shm_segment_destroy(r->seg);
	free(r);
}

void raw_push(struct raw *r, const struct allm_sqe *q)
{
	double deadline = raw_now() + 5;
	while (allm_ring_push(&r->sq, q) == -EAGAIN && raw_now() < deadline)
		raw_sleep_ms(1);
	if (allm_ring_needs_wakeup(&r->sq))
		allm_doorbell_ring(&r->sq_db);
}

/* Pops every CQE ready into the per-tag tables. */
void raw_pump(struct raw *r)
{
	struct allm_cqe e;
	while (allm_ring_pop(&r->cq, &e) == 0) {
		r->cqes++;
		if (e.user_tag >= MAX_TAG)
			continue;
		if (e.kind == ALLM_CQE_FINAL) {
			r->finals[e.user_tag]++;
			r->last_final[e.user_tag] = e;
		} else if (e.kind == ALLM_CQE_ACCEPTED) {
			r->accepted[e.user_tag]++;
			r->request_id[e.user_tag] = e.request_id;
		} else if (e.kind == ALLM_CQE_TOKEN && e.user_tag < 4 && e.u.token.token_id >= 0 &&
			   !(e.flags & ALLM_CQE_F_CONTINUED) && r->nids[e.user_tag] < 512) {
			r->ids[e.user_tag][r->nids[e.user_tag]++] = e.u.token.token_id;
		}
	}
}

/* Waits until every tag in [lo, hi) has its FINAL (5 s per call at most). */
bool raw_wait_finals(struct raw *r, uint64_t lo, uint64_t hi)
{
	double deadline = raw_now() + 10;
	for (;;) {
		raw_pump(r);
		bool all = true;
		for (uint64_t t = lo; t < hi && all; t++)
			all = r->finals[t] > 0;
		if (all)
			return true;
		if (raw_now() > deadline)
			return false;
		raw_sleep_ms(1);
	}
}

/* Whether the engine closed the socket within ms. */
bool raw_hung_up(int fd, int ms)
{
	double deadline = raw_now() + ms / 1000.0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((deadline - raw_now()) * 1000);
		if (left < 0)
			return false;
		if (poll(&p, 1, left) > 0) {
			char b[256];
			ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				return true;
		}
	}
}

struct allm_sqe raw_submit_sqe(struct raw *r, uint64_t tag, uint32_t off, uint32_t len, uint8_t kind)
{
	struct allm_sqe q;
	struct allm_params p;
	memset(&q, 0, sizeof(q));
	q.opcode = ALLM_SQE_OP_SUBMIT;
	q.prompt_kind = kind;
	q.user_tag = tag;
	q.prompt_off = off;
	q.prompt_len = len;
	q.params_size = sizeof(p);
	allm_params_init(&p);
	p.max_tokens = 4;
	p.temperature = 0;
	uint64_t at = allm_sqe_params_off(off, len);
	if (at + sizeof(p) <= r->arena_size) /* a prompt past the arena: its params too */
		memcpy(allm_shm_segment_arena(r->seg) + at, &p, sizeof(p));
	return q;
}

struct allm_params *raw_params(struct raw *r, const struct allm_sqe *q)
{
	uint64_t at = allm_sqe_params_off(q->prompt_off, q->prompt_len);
	return at + sizeof(struct allm_params) <= r->arena_size && at % 8 == 0
		       ? (struct allm_params *)(allm_shm_segment_arena(r->seg) + at)
		       : NULL;
}

