/* Description: hostile clients against a real allm-engined (run by daemon-hostile.sh): raw handshakes over the socket with shm/ calls (not clientlib) pushing malformed SQEs (bad offsets, huge lengths, offset overflow, bad token prompts, unknown opcodes, bad flags, odd sampling values, random garbage, a scribbled header, cancelling another client's request), a corrupt SQ tail, a corrupt CQ head, bytes on the lease after the ack, garbage or partial hellos, silent and never-acking connections; each gets error FINALs or is disconnected, the daemon stays up, and a normal libadaptivellm client connected throughout keeps getting its exact ids.
 *
 *   daemon-hostile --name NAME --runtime-dir DIR --expect FILE --daemon-pid PID
 *   FILE: one line "I\tIDS,...\tEXPECTED IDS" (greedy, 24 tokens), as daemon-common.sh
 *   writes. At the end it SIGTERMs the daemon while its silent connections are still
 *   open and waits until the daemon closes them.
 */
#include <adaptivellm/client.h>

#include "shm-doorbell.h"
#include "shm-ring.h"
#include "shm-segment.h"

#include <errno.h>
#include <math.h> /* NAN, INFINITY */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "test-check.h"

static const char *g_name, *g_dir;
static char g_path[600];
static pid_t g_daemon;
static int32_t g_prompt[64], g_want[512];
static size_t g_nprompt, g_nwant;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t rng_state = 0x1234567;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static bool daemon_alive(void)
{
	return kill(g_daemon, 0) == 0;
}

/* --- the normal client ------------------------------------------------------- */

static allm_client_t *g_normal;

/* One greedy request on the normal client: its ids must be the expected ones. */
static void check_normal(const char *after)
{
	struct allm_request_params p;
	allm_request_params_init(&p);
	p.prompt_ids = g_prompt;
	p.n_prompt_ids = g_nprompt;
	p.max_tokens = (int32_t)g_nwant;
	p.temperature = 0;
	p.user_tag = 42;
	int r = allm_client_submit(g_normal, &p);
	CHECK(r == 0, "after %s: normal submit: %s", after, strerror(-r));
	if (r)
		return;
	int32_t got[512];
	size_t n = 0;
	int reason = 0;
	double deadline = now_s() + 20;
	while (!reason && now_s() < deadline) {
		struct allm_event ev;
		r = allm_client_wait(g_normal, &ev, 200);
		if (r == 0 || r == -EINTR)
			continue;
		if (r < 0)
			break;
		if (ev.kind == ALLM_EVENT_TOKEN && ev.token_id >= 0 && n < 512)
			got[n++] = ev.token_id;
		if (ev.kind == ALLM_EVENT_FINAL)
			reason = ev.finish_reason;
	}
	CHECK(r >= 0 && (reason == ALLM_FINISH_LENGTH || reason == ALLM_FINISH_EOS) && n == g_nwant &&
		      !memcmp(got, g_want, n * sizeof(int32_t)),
	      "after %s: the normal client got %zu ids, reason %d, r %d", after, n, reason, r);
	CHECK(daemon_alive(), "after %s: the daemon is gone", after);
	if (!n_fail)
		printf("ok: normal client served after %s\n", after);
}

/* --- raw clients --------------------------------------------------------------- */

struct raw {
	int sock;
	struct allm_shm_segment *seg;
	struct allm_ring_prod sq;
	struct allm_ring_cons cq;
	struct allm_doorbell sq_db, cq_db;
	uint32_t arena_size;
	/* what came back, per user_tag < MAX_TAG */
	int finals[4096];
	struct allm_cqe last_final[4096];
	int accepted[4096];
	uint64_t request_id[4096];
	int32_t ids[4][512]; /* tokens of tags 0..3 */
	size_t nids[4];
	uint64_t cqes;
};
#define MAX_TAG 4096

static int raw_socket(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, g_path, strlen(g_path) + 1); /* length checked in main */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	return fd;
}

/* Reads a welcome (and its fds) within 5 s. Returns bytes read (0: EOF), -1. */
static ssize_t recv_welcome(int fd, struct allm_welcome *w, int *fds, int *nfd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 5000) <= 0)
		return -1;
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {w, sizeof(*w)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	*nfd = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			*nfd = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(cm), (size_t)*nfd * sizeof(int));
		}
	return n;
}

static struct allm_hello hello(uint32_t flags)
{
	struct allm_hello h = {.magic = ALLM_HELLO_MAGIC, .abi_version = ALLM_SHM_ABI_VERSION,
			       .flags = flags};
	return h;
}

/* The handshake done by hand; ack: send the mapped ack. Returns a raw client. */
static struct raw *raw_connect(const struct allm_hello *h, bool ack)
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
	ssize_t n = recv_welcome(r->sock, &w, fds, &nfd);
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
	r->arena_size = (uint32_t)r->seg->layout.arena_size;
	if (ack) {
		char m = ALLM_MAPPED_ACK;
		if (send(r->sock, &m, 1, MSG_NOSIGNAL) != 1)
			exit(1);
	}
	return r;
}

static struct raw *raw_connect_f(uint32_t flags, bool ack)
{
	struct allm_hello h = hello(flags);
	return raw_connect(&h, ack);
}

static void raw_close(struct raw *r)
{
	close(r->sock);
	allm_doorbell_close(&r->sq_db);
	allm_doorbell_close(&r->cq_db);
	allm_shm_segment_destroy(r->seg);
	free(r);
}

static void raw_push(struct raw *r, const struct allm_sqe *q)
{
	double deadline = now_s() + 5;
	while (allm_ring_push(&r->sq, q) == -EAGAIN && now_s() < deadline)
		sleep_ms(1);
	if (allm_ring_needs_wakeup(&r->sq))
		allm_doorbell_ring(&r->sq_db);
}

/* Pops every CQE ready into the per-tag tables. */
static void raw_pump(struct raw *r)
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
static bool raw_wait_finals(struct raw *r, uint64_t lo, uint64_t hi)
{
	double deadline = now_s() + 10;
	for (;;) {
		raw_pump(r);
		bool all = true;
		for (uint64_t t = lo; t < hi && all; t++)
			all = r->finals[t] > 0;
		if (all)
			return true;
		if (now_s() > deadline)
			return false;
		sleep_ms(1);
	}
}

/* Whether the engine closed the socket within ms. */
static bool hung_up(int fd, int ms)
{
	double deadline = now_s() + ms / 1000.0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((deadline - now_s()) * 1000);
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

static struct allm_sqe submit_sqe(uint64_t tag, uint32_t off, uint32_t len, uint8_t kind)
{
	struct allm_sqe q;
	memset(&q, 0, sizeof(q));
	q.opcode = ALLM_OP_SUBMIT;
	q.prompt_kind = kind;
	q.max_tokens = 4;
	q.user_tag = tag;
	q.prompt_off = off;
	q.prompt_len = len;
	q.top_p = 1;
	return q;
}

/* Tags answered with FINAL ERROR. */
static void expect_errors(struct raw *r, uint64_t lo, uint64_t hi, const char *what)
{
	bool all = raw_wait_finals(r, lo, hi);
	CHECK(all, "%s: not every bad SQE got a FINAL", what);
	for (uint64_t t = lo; t < hi; t++) {
		const struct allm_cqe *e = &r->last_final[t];
		CHECK(r->finals[t] == 1 && e->finish_reason == ALLM_FINISH_ERROR && e->status < 0 &&
			      r->accepted[t] == 0,
		      "%s: tag %llu: %d finals, reason %d, status %d, accepted %d", what,
		      (unsigned long long)t, r->finals[t], e->finish_reason, e->status, r->accepted[t]);
	}
	printf("ok: %s: %llu error FINALs\n", what, (unsigned long long)(hi - lo));
}

/* --- the cases ---------------------------------------------------------------- */

/* Tags 100..: SQEs the engine must refuse. */
static void malformed_sqes(struct raw *r)
{
	uint8_t *arena = allm_shm_segment_arena(r->seg);
	uint32_t A = r->arena_size;
	uint64_t t = 100;
	struct allm_sqe q;

	/* prompt ranges outside the arena */
	q = submit_sqe(t++, A + 100, 16, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = submit_sqe(t++, A, 1, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = submit_sqe(t++, 0, 0xFFFFFFFFu, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = submit_sqe(t++, 0, A + 1, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = submit_sqe(t++, 0xFFFFFFF0u, 0x20, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = submit_sqe(t++, A - 4, 8, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	/* token prompts: length not a multiple of 4, empty, ids outside the vocabulary */
	int32_t bad1[] = {1, 100000}, bad2[] = {1, -5}, bad3[] = {INT32_MAX};
	memcpy(arena + 0, bad1, sizeof(bad1));
	memcpy(arena + 64, bad2, sizeof(bad2));
	memcpy(arena + 128, bad3, sizeof(bad3));
	q = submit_sqe(t++, 0, 6, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = submit_sqe(t++, 0, 0, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = submit_sqe(t++, 0, sizeof(bad1), ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = submit_sqe(t++, 64, sizeof(bad2), ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = submit_sqe(t++, 128, sizeof(bad3), ALLM_PROMPT_TOKENS), raw_push(r, &q);
	/* a token prompt longer than the model's context */
	int32_t *lng = (int32_t *)(arena + 4096);
	for (int i = 0; i < 5000; i++)
		lng[i] = 1 + i % 300;
	q = submit_sqe(t++, 4096, 5000 * 4, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	/* bad fields */
	memcpy(arena + 192, "hello", 5);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.opcode = 77, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.opcode = 255, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.flags = 0x80, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.prompt_kind = 9, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.n_stop = 5, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.n_stop = 0xFFFFFFFFu, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.max_tokens = 0, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.max_tokens = INT32_MIN, raw_push(r, &q);
	expect_errors(r, 100, t, "malformed SQEs");
	check_normal("malformed SQEs");
}

/* Tags 300..: odd but not necessarily invalid values: any FINAL will do, no crash. */
static void odd_values(struct raw *r)
{
	uint8_t *arena = allm_shm_segment_arena(r->seg);
	uint64_t t = 300;
	struct allm_sqe q;

	float temps[] = {NAN, -1.0f, INFINITY, -INFINITY, 1e30f, 1e-30f};
	for (size_t i = 0; i < sizeof(temps) / sizeof(temps[0]); i++)
		q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.temperature = temps[i], raw_push(r, &q);
	float tps[] = {NAN, 0.0f, -1.0f, 7.0f, 1e-30f};
	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++)
		q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.temperature = 1, q.top_p = tps[i],
		raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.temperature = 1, q.top_k = INT32_MIN, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.temperature = 1, q.top_k = INT32_MAX, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.max_tokens = INT32_MAX, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.n_stop = 4,
	q.stop_ids[0] = -1, q.stop_ids[1] = INT32_MAX, q.stop_ids[2] = INT32_MIN, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), q.ignore_eos = 0xFF, raw_push(r, &q);
	q = submit_sqe(t++, 192, 5, ALLM_PROMPT_TEXT), memset(q.reserved, 0xAB, sizeof(q.reserved)),
	raw_push(r, &q);
	q = submit_sqe(t++, 192, 0, ALLM_PROMPT_TEXT), raw_push(r, &q); /* empty text */
	memcpy(arena + 256, "\xff\xfe\xc0\x80\xed\xa0\x80 \xf4\x90\x80\x80", 12);
	q = submit_sqe(t++, 256, 12, ALLM_PROMPT_TEXT), raw_push(r, &q); /* invalid UTF-8 */
	memset(arena + 65536, 'a', 20000);
	q = submit_sqe(t++, 65536, 20000, ALLM_PROMPT_TEXT), raw_push(r, &q); /* long text */
	CHECK(raw_wait_finals(r, 300, t), "odd values: not every request got a FINAL");
	int errs = 0;
	for (uint64_t i = 300; i < t; i++) {
		CHECK(r->finals[i] == 1, "odd values: tag %llu got %d FINALs", (unsigned long long)i,
		      r->finals[i]);
		errs += r->last_final[i].finish_reason == ALLM_FINISH_ERROR;
	}
	char which[64] = "";
	for (uint64_t i = 300; i < t && i - 300 < sizeof(which) - 1; i++)
		which[i - 300] = r->last_final[i].finish_reason == ALLM_FINISH_ERROR ? 'E' : '.';
	printf("ok: odd sampling/stop/length values: %llu requests ended (%d with an error: %s)\n",
	       (unsigned long long)(t - 300), errs, which);
	check_normal("odd sampling values");
}

/* Tags 1000..1399: random garbage entries; SUBMITs among them get a flag so they
 * are surely invalid; NOP and CANCEL are never answered. */
static void garbage_sqes(struct raw *r)
{
	struct allm_sqe q;
	int expect_final = 0;
	for (uint64_t i = 1000; i < 1400; i++) {
		uint64_t w[16];
		for (int k = 0; k < 16; k++)
			w[k] = rnd();
		memcpy(&q, w, sizeof(q));
		q.user_tag = i;
		if (q.opcode == ALLM_OP_SUBMIT)
			q.flags |= 1;
		bool answered = q.opcode != ALLM_OP_NOP && q.opcode != ALLM_OP_CANCEL;
		if (i % 7 == 0)
			q.opcode = ALLM_OP_NOP, answered = false;
		if (i % 11 == 0)
			q.opcode = ALLM_OP_CANCEL, answered = false;
		expect_final += answered;
		raw_push(r, &q);
		if (!answered)
			r->finals[i] = -1000; /* marks "no FINAL expected" */
	}
	double deadline = now_s() + 10;
	int got = 0;
	do {
		raw_pump(r);
		got = 0;
		for (uint64_t i = 1000; i < 1400; i++)
			got += r->finals[i] == 1;
		if (got < expect_final)
			sleep_ms(1);
	} while (got < expect_final && now_s() < deadline);
	sleep_ms(20);
	raw_pump(r);
	int wrong = 0;
	for (uint64_t i = 1000; i < 1400; i++)
		wrong += r->finals[i] != 1 && r->finals[i] != -1000;
	CHECK(got == expect_final && wrong == 0, "garbage: %d of %d FINALs, %d wrong", got, expect_final,
	      wrong);
	printf("ok: 400 garbage SQEs: %d error FINALs, NOPs and CANCELs silent\n", got);
	check_normal("garbage SQEs");
}

/* Cancelling another client's request does nothing. */
static void foreign_cancel(struct raw *r)
{
	struct allm_sqe q;
	struct allm_request_params p;
	allm_request_params_init(&p);
	p.prompt_ids = g_prompt;
	p.n_prompt_ids = g_nprompt;
	p.max_tokens = 100;
	p.ignore_eos = true;
	p.temperature = 0;
	p.user_tag = 9;
	CHECK(allm_client_submit(g_normal, &p) == 0, "normal submit");
	struct allm_event ev;
	int reason = 0;
	uint32_t ngen = 0;
	bool sent = false;
	double deadline = now_s() + 20;
	while (!reason && now_s() < deadline) {
		int w = allm_client_wait(g_normal, &ev, 200);
		if (w <= 0)
			continue;
		if (ev.kind == ALLM_EVENT_ACCEPTED && !sent) {
			memset(&q, 0, sizeof(q));
			q.opcode = ALLM_OP_CANCEL;
			q.request_id = ev.request_id;
			q.user_tag = 1;
			raw_push(r, &q);
			sent = true;
		}
		if (ev.kind == ALLM_EVENT_FINAL) {
			reason = ev.finish_reason;
			ngen = ev.n_generated;
		}
	}
	CHECK(sent && reason == ALLM_FINISH_LENGTH && ngen == 100,
	      "another client's CANCEL: the request ended %d after %u tokens", reason, ngen);
	printf("ok: a CANCEL from another client does not touch the request\n");
}

/* The header scribbled over (the engine never re-reads it), then doorbell spam. */
static void scribbled_header(struct raw *r)
{
	uint8_t *arena = allm_shm_segment_arena(r->seg);
	struct allm_sqe q;
	struct allm_shm_header *h = allm_shm_segment_header(r->seg);
	h->sq_entries = 1u << 30;
	h->sq_offset = UINT64_MAX - 7;
	h->cq_offset = 3;
	h->arena_offset = UINT64_MAX;
	h->arena_size = UINT64_MAX;
	h->total_size = 1;
	h->sq_ctl.ring_mask = 0xFFFFFFFFu;
	h->sq_ctl.ring_entries = 0;
	h->cq_ctl.ring_mask = 0xFFFFFFFFu;
	h->cq_ctl.ring_entries = 3;
	memset(h->reserved, 0xFF, sizeof(h->reserved));
	memcpy(arena, g_prompt, g_nprompt * 4);
	q = submit_sqe(0, 0, (uint32_t)(g_nprompt * 4), ALLM_PROMPT_TOKENS);
	q.max_tokens = (int32_t)g_nwant;
	q.top_p = 1;
	raw_push(r, &q);
	CHECK(raw_wait_finals(r, 0, 1), "scribbled header: no FINAL");
	CHECK(r->nids[0] == g_nwant && !memcmp(r->ids[0], g_want, g_nwant * 4) &&
		      r->last_final[0].finish_reason == ALLM_FINISH_LENGTH,
	      "scribbled header: got %zu ids, reason %d", r->nids[0], r->last_final[0].finish_reason);
	printf("ok: a scribbled header changes nothing: exact ids\n");

	/* doorbell spam: the counter at its maximum, rung thousands of times */
	uint64_t big = UINT64_MAX - 1;
	if (write(allm_doorbell_fd(&r->sq_db), &big, 8) != 8) {
	}
	for (int i = 0; i < 10000; i++)
		allm_doorbell_ring(&r->sq_db);
	check_normal("doorbell spam");
}

static void bad_sqes(void)
{
	struct raw *r = raw_connect_f(0, true);
	malformed_sqes(r);
	odd_values(r);
	garbage_sqes(r);
	foreign_cancel(r);
	scribbled_header(r);
	raw_close(r);
}

static void corrupt_rings(void)
{
	/* the SQ tail far ahead of the head: disconnected */
	struct raw *r = raw_connect_f(0, true);
	struct allm_shm_header *h = allm_shm_segment_header(r->seg);
	uint32_t head = atomic_load(&h->sq_ctl.head);
	atomic_store(&h->sq_ctl.tail, head + 1000000u);
	allm_doorbell_ring(&r->sq_db);
	CHECK(hung_up(r->sock, 5000), "corrupt SQ tail: not disconnected");
	printf("ok: corrupt SQ tail: disconnected\n");
	raw_close(r);
	check_normal("a corrupt SQ tail");

	/* the SQ tail moved backwards (behind the engine's head) */
	r = raw_connect_f(0, true);
	h = allm_shm_segment_header(r->seg);
	struct allm_sqe q;
	memset(&q, 0, sizeof(q));
	for (int i = 0; i < 4; i++)
		raw_push(r, &q); /* NOPs: the engine's head moves to 4 */
	sleep_ms(50);
	atomic_store(&h->sq_ctl.tail, 1u);
	allm_doorbell_ring(&r->sq_db);
	CHECK(hung_up(r->sock, 5000), "SQ tail behind the head: not disconnected");
	printf("ok: SQ tail behind the head: disconnected\n");
	raw_close(r);
	check_normal("an SQ tail moved back");

	/* the CQ head far ahead of the tail while requests stream: the engine cannot
	 * publish; it disconnects the client (its requests are cancelled) */
	r = raw_connect_f(0, true);
	h = allm_shm_segment_header(r->seg);
	memcpy(allm_shm_segment_arena(r->seg), g_prompt, g_nprompt * 4);
	for (int i = 0; i < 8; i++) {
		q = submit_sqe((uint64_t)i, 0, (uint32_t)(g_nprompt * 4), ALLM_PROMPT_TOKENS);
		q.max_tokens = 300;
		q.ignore_eos = 1;
		raw_push(r, &q);
	}
	sleep_ms(5);
	atomic_store(&h->cq_ctl.head, atomic_load(&h->cq_ctl.tail) + 5000000u);
	check_normal("a corrupt CQ head");
	CHECK(hung_up(r->sock, 5000), "corrupt CQ head: not disconnected");
	printf("ok: corrupt CQ head: disconnected, the others keep working\n");
	raw_close(r);

	/* bytes on the lease after the ack: disconnected */
	r = raw_connect_f(0, true);
	if (send(r->sock, "xyz", 3, MSG_NOSIGNAL) != 3) {
	}
	CHECK(hung_up(r->sock, 5000), "bytes on the lease: not disconnected");
	printf("ok: bytes on the lease after the ack: disconnected\n");
	raw_close(r);
}

static void bad_hellos(int *held, int *n_held)
{
	/* garbage instead of a hello: an error welcome, then a hang-up */
	int fd = raw_socket();
	uint8_t junk[sizeof(struct allm_hello)];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rnd();
	if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) != (ssize_t)sizeof(junk))
		exit(1);
	struct allm_welcome w;
	int fds[8], nfd;
	ssize_t n = recv_welcome(fd, &w, fds, &nfd);
	CHECK(n == (ssize_t)sizeof(w) && w.magic == ALLM_WELCOME_MAGIC && w.status == -EPROTO && nfd == 0,
	      "garbage hello: %zd bytes, status %d, %d fds", n, n > 0 ? w.status : 0, nfd);
	CHECK(hung_up(fd, 5000), "garbage hello: not disconnected");
	close(fd);
	printf("ok: a garbage hello gets an -EPROTO welcome and a hang-up\n");

	/* a wrong ABI version */
	fd = raw_socket();
	struct allm_hello hh = hello(0);
	hh.abi_version = 99;
	if (send(fd, &hh, sizeof(hh), MSG_NOSIGNAL) != (ssize_t)sizeof(hh))
		exit(1);
	n = recv_welcome(fd, &w, fds, &nfd);
	CHECK(n == (ssize_t)sizeof(w) && w.status == -EPROTO && nfd == 0, "ABI 99: status %d", w.status);
	close(fd);

	/* 5 bytes then a hang-up; 10 bytes then silence; nothing at all */
	fd = raw_socket();
	if (send(fd, junk, 5, MSG_NOSIGNAL) != 5)
		exit(1);
	close(fd);
	fd = raw_socket();
	if (send(fd, &hh, 10, MSG_NOSIGNAL) != 10)
		exit(1);
	held[(*n_held)++] = fd;
	held[(*n_held)++] = raw_socket();
	/* absurd ring and arena sizes: clamped, served */
	struct allm_hello big = hello(0);
	big.sq_entries = big.cq_entries = big.arena_size = 0xFFFFFFFFu;
	struct raw *r = raw_connect(&big, true);
	CHECK(r->seg->layout.sq_entries <= ALLM_SHM_MAX_RING_ENTRIES &&
		      r->seg->layout.arena_size <= ALLM_SHM_MAX_ARENA_SIZE,
	      "absurd hello: sq %u arena %llu", r->seg->layout.sq_entries,
	      (unsigned long long)r->seg->layout.arena_size);
	raw_close(r);
	/* a POSIX segment whose client never acks: held open until the end */
	r = raw_connect_f(ALLM_HELLO_F_POSIX, false);
	held[(*n_held)++] = dup(r->sock);
	raw_close(r);
	check_normal("bad, partial and silent hellos");
}

static int parse_ids(const char *s, int32_t *v, size_t cap)
{
	size_t n = 0;
	while (*s && n < cap) {
		char *end;
		long x = strtol(s, &end, 10);
		if (end == s)
			break;
		v[n++] = (int32_t)x;
		s = end;
		while (*s == ',' || *s == ' ')
			s++;
	}
	return (int)n;
}

int main(int argc, char **argv)
{
	const char *expect = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--name"))
			g_name = argv[i + 1];
		else if (!strcmp(argv[i], "--runtime-dir"))
			g_dir = argv[i + 1];
		else if (!strcmp(argv[i], "--expect"))
			expect = argv[i + 1];
		else if (!strcmp(argv[i], "--daemon-pid"))
			g_daemon = (pid_t)atoi(argv[i + 1]);
	}
	if (!g_name || !g_dir || !expect || g_daemon <= 0) {
		fprintf(stderr, "usage: daemon-hostile --name N --runtime-dir D --expect F --daemon-pid P\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(g_path, sizeof(g_path), "%s/%s.sock", g_dir, g_name);
	FILE *f = fopen(expect, "r");
	char line[8192];
	if (strlen(g_dir) + strlen(g_name) + 8 > sizeof(((struct sockaddr_un *)0)->sun_path))
		return 2;
	if (!f || !fgets(line, sizeof(line), f)) {
		perror(expect);
		return 2;
	}
	fclose(f);
	char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
	if (line[0] != 'I' || !t2)
		return 2;
	*t2 = '\0';
	g_nprompt = (size_t)parse_ids(t1 + 1, g_prompt, 64);
	g_nwant = (size_t)parse_ids(t2 + 1, g_want, 512);

	char err[256];
	struct allm_client_opts co = {.name = g_name, .runtime_dir = g_dir};
	if (allm_client_connect(&co, &g_normal, err, sizeof(err))) {
		fprintf(stderr, "FAIL: normal client: %s\n", err);
		return 1;
	}
	check_normal("connecting");
	int held[16], n_held = 0;
	bad_hellos(held, &n_held);
	bad_sqes();
	corrupt_rings();
	check_normal("everything");

	/* SIGTERM with the silent connections still open: the daemon closes them */
	allm_client_disconnect(g_normal);
	kill(g_daemon, SIGTERM);
	for (int i = 0; i < n_held; i++)
		CHECK(hung_up(held[i], 10000), "held connection %d not closed by the stopping daemon", i);
	printf("ok: SIGTERM closes the silent connections\n");
	if (n_fail)
		fprintf(stderr, "%d failures\n", n_fail);
	return n_fail ? 1 : 0;
}
