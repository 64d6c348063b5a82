/* Description: libadaptivellm against a fake engine thread (real handshake, shm/ segment, rings and doorbells): memfd and POSIX connect, text and id prompts, event order with reassembled split pieces, logprobs attached to their tokens, arena reuse and -EAGAIN (arena, SQ), -E2BIG/-EINVAL, refused requests, cancel, doorbell sleep/wake and external-loop fd, wait timeout, engine death -> -EPIPE, garbage CQEs -> -EPROTO, connection errors. With `--serve DIR NAME` it runs the fake engine for tests/cli-allm.sh. */
#include <adaptivellm/client.h>

#include "shm-doorbell.h"
#include "shm-segment.h"
#include "test-check.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* --- the fake engine ---------------------------------------------------------
 * What it does with a SUBMIT depends on bits of the request's user_tag. */
#define TAG_HOLD (1ull << 60)    /* ACCEPTED only; FINAL(CANCELLED) when cancelled */
#define TAG_GARBAGE (1ull << 59) /* ACCEPTED, then a malformed entry (variant: low byte) */
#define TAG_DIE (1ull << 58)     /* ACCEPTED, then the engine closes everything */
#define TAG_REJECT (1ull << 57)  /* FINAL(ERROR) with request_id 0, no ACCEPTED */
#define TAG_DELAY (1ull << 56)   /* wait 50 ms before answering (the client sleeps) */
#define TAG_FLAGS (TAG_HOLD | TAG_GARBAGE | TAG_DIE | TAG_REJECT | TAG_DELAY)

#define LONG_PIECE 150 /* > ALLM_CQE_TEXT_MAX: sent as two entries */

struct fake {
	char dir[64];
	const char *name;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	int stop_fd; /* eventfd: the test tells the engine thread to quit */
	pthread_t th;
	bool refuse;         /* answer the hello with status -EBUSY */
	bool serve_forever;  /* --serve: accept clients one after another */
	atomic_int paused;   /* do not pop the SQ while set */
	atomic_int n_submits, n_cancels, n_bad_prompts, n_bad_sqes, n_clients;
	atomic_ullong last_cancel_id;
	char shm_name[64];   /* POSIX mode: the name used (unlinked after the ack) */
	atomic_bool shm_named; /* shm_name is written (the rings, mapped twice, carry no
				* ordering a race detector can see) */
};

/* One connected client, engine side. */
struct eng {
	struct fake *f;
	int cfd;
	struct allm_shm_segment *seg;
	struct allm_doorbell sq_db, cq_db;
	struct allm_ring_cons sq;
	struct allm_ring_prod cq;
	uint64_t next_id;
	uint64_t held_id[64], held_tag[64]; /* TAG_HOLD requests */
	int n_held;
};

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether the client closed its lease (or the test said stop). */
static bool eng_gone(struct eng *e)
{
	struct pollfd p[2] = { { .fd = e->cfd, .events = POLLIN }, { .fd = e->f->stop_fd, .events = POLLIN } };
	if (poll(p, 2, 0) <= 0)
		return false;
	if (p[1].revents)
		return true;
	char b;
	return recv(e->cfd, &b, 1, MSG_DONTWAIT) <= 0;
}

static int eng_push(struct eng *e, const struct allm_cqe *q)
{
	for (;;) {
		int r = allm_ring_push(&e->cq, q);
		if (r == 0) {
			if (allm_ring_needs_wakeup(&e->cq))
				allm_doorbell_ring(&e->cq_db);
			return 0;
		}
		if (r != -EAGAIN || eng_gone(e))
			return -EPIPE;
		msleep(1);
	}
}

static int push_token(struct eng *e, uint64_t tag, uint64_t id, int32_t tok, const char *s, size_t n)
{
	while (n > ALLM_CQE_TEXT_MAX) {
		struct allm_cqe q = { .kind = ALLM_CQE_TOKEN, .flags = ALLM_CQE_F_CONTINUED,
			.text_len = ALLM_CQE_TEXT_MAX, .user_tag = tag, .request_id = id };
		q.u.token.token_id = tok;
		memcpy(q.u.token.text, s, ALLM_CQE_TEXT_MAX);
		if (eng_push(e, &q))
			return -EPIPE;
		s += ALLM_CQE_TEXT_MAX;
		n -= ALLM_CQE_TEXT_MAX;
	}
	struct allm_cqe q = { .kind = ALLM_CQE_TOKEN, .text_len = (uint8_t)n, .user_tag = tag,
		.request_id = id };
	q.u.token.token_id = tok;
	memcpy(q.u.token.text, s, n);
	return eng_push(e, &q);
}

/* A token's LOGPROBS entries, as the engine chains them (protocol.h): token
 * tok at -0.5 - index, n alternatives tok + k at -k. */
static int push_logprobs(struct eng *e, uint64_t tag, uint64_t id, uint32_t index, int32_t tok, int n)
{
	int from = 0;
	do {
		int m = n - from < ALLM_CQE_LOGPROBS_TOP ? n - from : ALLM_CQE_LOGPROBS_TOP;
		struct allm_cqe q = { .kind = ALLM_CQE_LOGPROBS, .user_tag = tag, .request_id = id };
		q.flags = from + m < n ? ALLM_CQE_F_CONTINUED : 0;
		q.u.logprobs.index = index;
		q.u.logprobs.n_top = (uint32_t)m;
		q.u.logprobs.sampled = (struct allm_logprob){ tok, -0.5f - (float)index };
		for (int k = 0; k < m; k++)
			q.u.logprobs.top[k] = (struct allm_logprob){ tok + from + k, -(float)(from + k) };
		if (eng_push(e, &q))
			return -1;
		from += m;
	} while (from < n);
	return 0;
}

static int push_final(struct eng *e, uint64_t tag, uint64_t id, int reason, int32_t status,
		      uint32_t n_prompt, uint32_t n_gen, const char *msg)
{
	struct allm_cqe q = { .kind = ALLM_CQE_FINAL, .finish_reason = (uint8_t)reason,
		.status = status, .user_tag = tag, .request_id = id };
	q.u.final.queue_us = 1000;
	q.u.final.ttft_us = 2000;
	q.u.final.total_us = 3000;
	q.u.final.n_prompt = n_prompt;
	q.u.final.n_generated = n_gen;
	q.u.final.n_preemptions = 1;
	if (msg)
		strncpy(q.u.final.error, msg, sizeof(q.u.final.error));
	return eng_push(e, &q);
}

static void long_piece(char *buf)
{
	for (int i = 0; i < LONG_PIECE; i++)
		buf[i] = (char)('A' + i % 26);
}

/* Prompt contents the tests submit, so the engine can check what it copies out:
 * text: every byte 'a' + tag % 26; ids: i + tag % 256. */
static bool prompt_ok(const struct allm_sqe *s, const uint8_t *p)
{
	uint64_t t = s->user_tag & ~TAG_FLAGS;
	if (s->prompt_kind == ALLM_PROMPT_TEXT) {
		for (uint32_t i = 0; i < s->prompt_len; i++)
			if (p[i] != 'a' + t % 26)
				return false;
		return true;
	}
	if (s->prompt_kind != ALLM_PROMPT_TOKENS || s->prompt_len % 4)
		return false;
	for (uint32_t i = 0; i < s->prompt_len / 4; i++) {
		int32_t v;
		memcpy(&v, p + 4 * i, 4);
		if (v != (int32_t)(i + t % 256))
			return false;
	}
	return true;
}

static int garbage(struct eng *e, uint64_t tag, uint64_t id)
{
	struct allm_cqe q = { .kind = ALLM_CQE_TOKEN, .user_tag = tag, .request_id = id };
	switch (tag & 0xff) {
	case 0: q.kind = 0x7f; break;                      /* unknown kind */
	case 1: q.text_len = ALLM_CQE_TEXT_MAX + 1; break; /* text too long */
	case 2: q.kind = ALLM_CQE_FINAL; q.finish_reason = 9; break;
	case 3: q.kind = ALLM_CQE_ACCEPTED; q.user_tag = 12345; q.request_id = 99; break;
	case 4: q.flags = 0x80; break;                     /* unknown flag */
	case 5: q.kind = ALLM_CQE_LOGPROBS; q.u.logprobs.n_top = ALLM_CQE_LOGPROBS_TOP + 1; break;
	case 6: q.kind = ALLM_CQE_LOGPROBS; q.u.logprobs.reserved[3] = 1; break;
	case 7: /* a chain of alternatives cut short: its token follows at once */
		q.kind = ALLM_CQE_LOGPROBS;
		q.flags = ALLM_CQE_F_CONTINUED;
		q.u.logprobs.n_top = ALLM_CQE_LOGPROBS_TOP;
		if (eng_push(e, &q))
			return -1;
		q = (struct allm_cqe){ .kind = ALLM_CQE_TOKEN, .user_tag = tag, .request_id = id, .text_len = 1 };
		break;
	default: q.kind = ALLM_CQE_FINAL; q.finish_reason = ALLM_FINISH_EOS; q.status = 5; break;
	}
	return eng_push(e, &q);
}

/* One SUBMIT. Returns 0, or -EPIPE to end the connection. */
static int eng_submit(struct eng *e, const struct allm_sqe *s)
{
	static uint8_t prompt[1 << 16];
	uint64_t tag = s->user_tag;
	struct allm_params params;
	atomic_fetch_add(&e->f->n_submits, 1);
	if (allm_shm_arena_copy_out(e->seg, s->prompt_off, s->prompt_len, prompt, sizeof(prompt)) ||
	    !prompt_ok(s, prompt))
		atomic_fetch_add(&e->f->n_bad_prompts, 1);
	/* the parameters follow the prompt, as the library's own layout */
	if (s->params_size != sizeof(params) ||
	    allm_shm_arena_copy_out(e->seg, allm_sqe_params_off(s->prompt_off, s->prompt_len), sizeof(params),
				    &params, sizeof(params)) ||
	    params.size != sizeof(params) || allm_params_check(&params, NULL, 0))
		atomic_fetch_add(&e->f->n_bad_prompts, 1);
	uint32_t n_prompt = s->prompt_kind == ALLM_PROMPT_TOKENS ? s->prompt_len / 4 : s->prompt_len;
	/* The CLI test cannot set tags: it picks a behaviour by prompt text instead. */
	uint64_t how = tag;
	if (s->prompt_kind == ALLM_PROMPT_TEXT && s->prompt_len == 6 && !memcmp(prompt, "REJECT", 6))
		how |= TAG_REJECT;
	if (s->prompt_kind == ALLM_PROMPT_TEXT && s->prompt_len == 4 && !memcmp(prompt, "HOLD", 4))
		how |= TAG_HOLD;
	if (how & TAG_DELAY)
		msleep(50);
	if (how & TAG_REJECT)
		return push_final(e, tag, 0, ALLM_FINISH_ERROR, -EINVAL, 0, 0, "rejected: test");
	uint64_t id = ++e->next_id;
	struct allm_cqe acc = { .kind = ALLM_CQE_ACCEPTED, .user_tag = tag, .request_id = id };
	if (eng_push(e, &acc))
		return -EPIPE;
	if (how & TAG_DIE)
		return -EPIPE;
	if (how & TAG_GARBAGE)
		return garbage(e, tag, id);
	if (how & TAG_HOLD) {
		if (e->n_held < 64) {
			e->held_id[e->n_held] = id;
			e->held_tag[e->n_held++] = tag;
		}
		return 0;
	}
	if (s->prompt_kind == ALLM_PROMPT_TEXT && s->prompt_len == 6 && !memcmp(prompt, "ESCAPE", 6)) {
		/* text a JSON writer must escape: quotes, backslash, controls, a bad byte */
		static const char a[] = "say \"hi\"\\\n\t\x01", b[] = "\xff", c[] = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
		if (push_token(e, tag, id, 7, a, sizeof(a) - 1) || push_token(e, tag, id, 8, b, 1) ||
		    push_token(e, tag, id, 9, c, sizeof(c) - 1))
			return -EPIPE;
		return push_final(e, tag, id, ALLM_FINISH_EOS, 0, n_prompt, 3, NULL);
	}
	if (s->prompt_kind == ALLM_PROMPT_TEXT && s->prompt_len == 5 && !memcmp(prompt, "EMPTY", 5)) {
		/* a first token with no text (a held-back byte, a stripped space) */
		if (push_token(e, tag, id, 5, "", 0) || push_token(e, tag, id, 6, "ok", 2))
			return -EPIPE;
		return push_final(e, tag, id, ALLM_FINISH_EOS, 0, n_prompt, 2, NULL);
	}
	char piece[LONG_PIECE];
	long_piece(piece);
	/* logprobs: before the first two tokens only (the second's text spans entries) */
	if ((params.logprobs && push_logprobs(e, tag, id, 0, 100, params.logprobs - 1)) ||
	    push_token(e, tag, id, 100, "Hello", 5) ||
	    (params.logprobs && push_logprobs(e, tag, id, 1, 101, params.logprobs - 1)) ||
	    push_token(e, tag, id, 101, piece, LONG_PIECE) || push_token(e, tag, id, 102, ", world", 7))
		return -EPIPE;
	return push_final(e, tag, id, ALLM_FINISH_LENGTH, 0, n_prompt, 3, NULL);
}

static int eng_cancel(struct eng *e, const struct allm_sqe *s)
{
	atomic_fetch_add(&e->f->n_cancels, 1);
	atomic_store(&e->f->last_cancel_id, s->request_id);
	for (int i = 0; i < e->n_held; i++)
		if (e->held_id[i] == s->request_id) {
			uint64_t tag = e->held_tag[i];
			e->held_id[i] = e->held_id[--e->n_held];
			e->held_tag[i] = e->held_tag[e->n_held];
			return push_final(e, tag, s->request_id, ALLM_FINISH_CANCELLED, 0, 1, 0, NULL);
		}
	return 0;
}

/* The engine side of the handshake on an accepted socket. 0 or -1. */
static int eng_handshake(struct eng *e)
{
	struct fake *f = e->f;
	struct allm_hello h;
	if (recv(e->cfd, &h, sizeof(h), MSG_WAITALL) != (ssize_t)sizeof(h) ||
	    h.magic != ALLM_HELLO_MAGIC || h.abi_version != ALLM_SHM_ABI_VERSION)
		return -1;
	struct allm_welcome w = { .magic = ALLM_WELCOME_MAGIC, .abi_version = ALLM_SHM_ABI_VERSION,
		.client_id = 7 };
	if (f->refuse) {
		w.status = -EBUSY;
		snprintf(w.message, sizeof(w.message), "too many clients (test)");
		send(e->cfd, &w, sizeof(w), MSG_NOSIGNAL);
		return -1;
	}
	bool posix = h.flags & ALLM_HELLO_F_POSIX;
	struct allm_shm_layout want = { .sq_entries = h.sq_entries ? h.sq_entries : 8,
		.cq_entries = h.cq_entries ? h.cq_entries : 16,
		.arena_size = h.arena_size ? h.arena_size : 65536 };
	if (allm_shm_segment_create(&want, posix, &e->seg) || allm_doorbell_create(&e->sq_db) ||
	    allm_doorbell_create(&e->cq_db) || allm_shm_segment_sq_cons(e->seg, &e->sq) ||
	    allm_shm_segment_cq_prod(e->seg, &e->cq))
		return -1;
	int fds[3], n = 0;
	if (posix)
		snprintf(w.shm_name, sizeof(w.shm_name), "%s", e->seg->posix_name);
	else
		fds[n++] = e->seg->fd;
	fds[n++] = e->sq_db.fd;
	fds[n++] = e->cq_db.fd;
	snprintf(w.message, sizeof(w.message), "fake-model");
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(3 * sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = { .iov_base = &w, .iov_len = sizeof(w) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
		.msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	if (sendmsg(e->cfd, &m, MSG_NOSIGNAL) != (ssize_t)sizeof(w))
		return -1;
	char ack;
	if (recv(e->cfd, &ack, 1, MSG_WAITALL) != 1 || ack != ALLM_MAPPED_ACK)
		return -1;
	if (posix) {
		snprintf(f->shm_name, sizeof(f->shm_name), "%s", e->seg->posix_name);
		atomic_store(&f->shm_named, true);
		allm_shm_segment_unlink(e->seg);
	}
	return 0;
}

/* Serves one client until it goes away (or the test stops us). */
static void eng_serve(struct fake *f, int cfd)
{
	struct eng e = { .f = f, .cfd = cfd, .sq_db = { -1 }, .cq_db = { -1 } };
	atomic_fetch_add(&f->n_clients, 1);
	if (eng_handshake(&e))
		goto out;
	for (;;) {
		if (atomic_load(&f->paused)) {
			if (eng_gone(&e))
				break;
			msleep(1);
			continue;
		}
		struct allm_sqe s;
		int r = allm_ring_pop(&e.sq, &s);
		if (r == 0) {
			if (s.opcode == ALLM_SQE_OP_SUBMIT)
				r = eng_submit(&e, &s);
			else if (s.opcode == ALLM_SQE_OP_CANCEL)
				r = eng_cancel(&e, &s);
			else
				atomic_fetch_add(&f->n_bad_sqes, 1);
			if (r)
				break;
			continue;
		}
		if (r != -EAGAIN)
			break;
		/* Sleep until the client rings: no timeout, so a missing ring hangs the
		 * test (and meson's timeout reports it). */
		if (allm_ring_prepare_sleep(&e.sq)) {
			struct pollfd p[3] = { { .fd = e.sq_db.fd, .events = POLLIN },
				{ .fd = cfd, .events = POLLIN }, { .fd = f->stop_fd, .events = POLLIN } };
			poll(p, 3, -1);
			allm_doorbell_drain(&e.sq_db, NULL);
			allm_ring_finish_sleep(&e.sq);
			if (p[1].revents || p[2].revents) {
				if (eng_gone(&e))
					break;
			}
		}
	}
out:
	close(cfd);
	allm_doorbell_close(&e.sq_db);
	allm_doorbell_close(&e.cq_db);
	allm_shm_segment_destroy(e.seg);
}

static void *eng_thread(void *arg)
{
	struct fake *f = arg;
	do {
		struct pollfd p[2] = { { .fd = f->lfd, .events = POLLIN }, { .fd = f->stop_fd, .events = POLLIN } };
		if (poll(p, 2, -1) <= 0 || p[1].revents)
			break;
		int cfd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd >= 0)
			eng_serve(f, cfd);
	} while (f->serve_forever);
	return NULL;
}

/* Listens on DIR/NAME.sock; with start, runs the engine thread. */
static void fake_init(struct fake *f, const char *dir, const char *name, bool start)
{
	memset(f, 0, sizeof(*f));
	f->name = name;
	snprintf(f->dir, sizeof(f->dir), "%s", dir);
	snprintf(f->path, sizeof(f->path), "%s/%s.sock", dir, name);
	unlink(f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(f->lfd, 8)) {
		perror("fake engine: listen");
		exit(1);
	}
	f->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (start && pthread_create(&f->th, NULL, eng_thread, f)) {
		perror("pthread_create");
		exit(1);
	}
}

static void fake_stop(struct fake *f, bool started)
{
	uint64_t one = 1;
	if (write(f->stop_fd, &one, sizeof(one)) < 0)
		perror("write");
	if (started)
		pthread_join(f->th, NULL);
	close(f->lfd);
	close(f->stop_fd);
	unlink(f->path);
}

/* --- client-side helpers --------------------------------------------------------- */

static char tmpdir[64];

static allm_client_t *must_connect(struct allm_client_opts *o)
{
	allm_client_t *c = NULL;
	char err[256];
	o->runtime_dir = tmpdir;
	o->name = "t";
	int r = allm_client_connect(o, &c, err, sizeof(err));
	if (r) {
		fprintf(stderr, "FAIL connect: %d %s\n", r, err);
		exit(1);
	}
	return c;
}

/* A text prompt of n bytes for user_tag (see prompt_ok). */
static int submit_text(allm_client_t *c, uint64_t tag, size_t n)
{
	static char buf[1 << 16];
	memset(buf, 'a' + (int)((tag & ~TAG_FLAGS) % 26), n);
	struct allm_request_params p;
	allm_request_params_init(&p);
	p.prompt = buf;
	p.prompt_len = n;
	p.user_tag = tag;
	return allm_client_submit(c, &p);
}

static int submit_ids(allm_client_t *c, uint64_t tag, size_t n)
{
	static int32_t ids[1 << 14];
	for (size_t i = 0; i < n; i++)
		ids[i] = (int32_t)(i + (tag & ~TAG_FLAGS) % 256);
	struct allm_request_params p;
	allm_request_params_init(&p);
	p.prompt_ids = ids;
	p.n_prompt_ids = n;
	p.user_tag = tag;
	return allm_client_submit(c, &p);
}

/* Checks the full event sequence of a normal request (ACCEPTED, 3 TOKENs, FINAL).
 * Returns its request_id. */
static uint64_t expect_normal(allm_client_t *c, uint64_t tag, uint32_t n_prompt)
{
	struct allm_event ev;
	char piece[LONG_PIECE];
	long_piece(piece);
	int r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_ACCEPTED && ev.user_tag == tag && ev.request_id,
	      "r=%d kind=%d tag=%llx", r, ev.kind, (unsigned long long)ev.user_tag);
	uint64_t id = ev.request_id;
	static const struct { int32_t id; const char *s; size_t n; } want[3] = {
		{ 100, "Hello", 5 }, { 101, NULL, LONG_PIECE }, { 102, ", world", 7 } };
	for (int i = 0; i < 3; i++) {
		r = allm_client_wait(c, &ev, 5000);
		CHECK(r == 1 && ev.kind == ALLM_EVENT_TOKEN && ev.request_id == id && ev.user_tag == tag,
		      "token %d: r=%d kind=%d", i, r, ev.kind);
		CHECK(ev.token_id == want[i].id && ev.text_len == want[i].n &&
		      !memcmp(ev.text, want[i].s ? want[i].s : piece, want[i].n),
		      "token %d: id %d len %zu", i, ev.token_id, ev.text_len);
	}
	r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_FINAL && ev.request_id == id, "final: r=%d kind=%d", r,
	      ev.kind);
	CHECK(ev.finish_reason == ALLM_FINISH_LENGTH && ev.status == 0 && ev.error == NULL &&
	      ev.n_prompt == n_prompt && ev.n_generated == 3 && ev.queue_us == 1000 &&
	      ev.ttft_us == 2000 && ev.total_us == 3000 && ev.n_preemptions == 1,
	      "final fields: reason %d n_prompt %u", ev.finish_reason, ev.n_prompt);
	return id;
}

/* --- the tests ---------------------------------------------------------------------- */

static void test_basic(bool posix)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { .posix_shm = posix };
	allm_client_t *c = must_connect(&o);
	CHECK(!strcmp(allm_client_model(c), "fake-model"), "model '%s'", allm_client_model(c));
	CHECK(allm_client_id(c) == 7, "client id %u", allm_client_id(c));
	CHECK(allm_client_fd(c) >= 0 && allm_client_lease_fd(c) >= 0, "fds");
	CHECK(submit_text(c, 1, 11) == 0, "submit text");
	expect_normal(c, 1, 11);
	if (posix) { /* the engine answered, so it has had the ack and unlinked the name */
		CHECK(atomic_load(&f.shm_named) && f.shm_name[0] == '/', "posix mode: no name used");
		int fd = shm_open(f.shm_name, O_RDWR, 0);
		CHECK(fd < 0 && errno == ENOENT, "posix name %s still exists after the ack", f.shm_name);
		if (fd >= 0)
			close(fd);
	}
	CHECK(submit_ids(c, 2, 5) == 0, "submit ids");
	expect_normal(c, 2, 5);
	/* events by size: a newer program's longer event gets its unknown fields
	 * zeroed, a size below the first version's is refused */
	struct {
		struct allm_event ev;
		uint8_t more[24];
	} newer;
	memset(&newer, 0xAB, sizeof(newer));
	CHECK(allm_client_wait_sized(c, &newer.ev, ALLM_EVENT_SIZE_VER0 - 8, 100) == -EINVAL, "a short event");
	CHECK(submit_ids(c, 3, 5) == 0, "submit ids");
	CHECK(allm_client_wait_sized(c, &newer.ev, sizeof(newer), 5000) == 1 && newer.ev.kind == ALLM_EVENT_ACCEPTED &&
		      newer.ev.user_tag == 3,
	      "a newer program's event");
	bool zero = true;
	for (size_t i = 0; i < sizeof(newer.more); i++)
		zero &= newer.more[i] == 0;
	CHECK(zero, "a newer program's event fields this library lacks are not zero");
	for (int i = 0; i < 4; i++) /* the rest of it: 3 tokens, the FINAL */
		CHECK(allm_client_wait_sized(c, &newer.ev, sizeof(newer), 5000) == 1, "event %d", i);
	CHECK(newer.ev.kind == ALLM_EVENT_FINAL && newer.ev.n_generated == 3, "the last one: the FINAL");
	/* several in flight at once, events in submission order per request */
	for (uint64_t t = 10; t < 14; t++)
		CHECK(submit_text(c, t, 100 + t) == 0, "submit %llu", (unsigned long long)t);
	for (uint64_t t = 10; t < 14; t++)
		expect_normal(c, t, (uint32_t)(100 + t));
	/* nothing more: wait times out with 0 after about its timeout */
	struct allm_event ev;
	double t0 = now_s();
	int r = allm_client_wait(c, &ev, 60);
	double dt = now_s() - t0;
	CHECK(r == 0 && dt >= 0.055 && dt < 1.0, "wait timeout: r=%d after %.3f s", r, dt);
	CHECK(allm_client_poll(c, &ev) == 0, "poll on an empty ring");
	CHECK(atomic_load(&f.n_bad_prompts) == 0, "%d prompts arrived corrupted",
	      atomic_load(&f.n_bad_prompts));
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

static void test_params(void)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { .arena_size = 4096 };
	allm_client_t *c = must_connect(&o);
	struct allm_request_params p;
	int32_t ids[2] = { 1, 2 }, neg[2] = { 1, -3 };
	allm_request_params_init(&p);
	CHECK(p.params.max_tokens == 128 && p.params.temperature == 1.0f && p.params.top_p == 1.0f &&
		      p.params.size == sizeof(p.params),
	      "defaults");
	CHECK(allm_client_submit(c, &p) == -EINVAL, "no prompt");
	p.prompt = "x";
	p.prompt_len = 1;
	p.prompt_ids = ids;
	p.n_prompt_ids = 2;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "both prompts");
	p.prompt = NULL;
	p.prompt_ids = neg;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "negative id");
	p.prompt_ids = ids;
	p.n_prompt_ids = 0;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "empty ids");
	p.n_prompt_ids = 2;
	p.params.max_tokens = 0;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "max_tokens 0");
	p.params.max_tokens = 4;
	p.params.temperature = -1;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "temperature < 0");
	p.params.temperature = 0;
	p.params.top_p = 1.5f;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "top_p > 1");
	p.params.top_p = 1;
	p.params.n_stop = 5;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "5 stop ids");
	p.params.n_stop = 2;
	p.params.stop_ids[1] = -2;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "a negative stop id");
	p.params.n_stop = 0;
	p.params.size = 4;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "params not initialised");
	p.params.size = sizeof(p.params);
	/* a newer program's struct: longer; a knob this library lacks set is refused,
	 * left off (zero) it is not there */
	struct {
		struct allm_request_params p;
		uint8_t more[8];
	} newer;
	memcpy(&newer.p, &p, sizeof(p));
	memset(newer.more, 0, sizeof(newer.more));
	newer.p.params.size = sizeof(p.params) + 8;
	newer.more[3] = 1;
	CHECK(allm_client_submit(c, &newer.p) == -E2BIG, "params of a newer program, a new knob set");
	newer.more[3] = 0;
	newer.p.user_tag = 1; /* prompt_ok: ids 1, 2 */
	CHECK(allm_client_submit(c, &newer.p) == 0, "params of a newer program, its new knobs off");
	expect_normal(c, 1, 2);
	struct allm_logit_bias lb[ALLM_LOGIT_BIAS_MAX + 1] = { { 1, 1.0f } };
	p.logit_bias = lb;
	p.n_logit_bias = ALLM_LOGIT_BIAS_MAX + 1;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "301 logit biases");
	p.n_logit_bias = 1;
	lb[0].bias = NAN;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "a NaN bias");
	lb[0] = (struct allm_logit_bias){ -1, 1.0f };
	CHECK(allm_client_submit(c, &p) == -EINVAL, "a negative token id");
	p.logit_bias = NULL;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "biases without their array");
	p.n_logit_bias = 0;
	CHECK(allm_client_cancel(c, 0) == -EINVAL, "cancel 0");
	/* the arena holds the prompt and its parameters */
	const size_t fits = 4096 - sizeof(struct allm_params);
	CHECK(submit_text(c, 3, fits + 1) == -E2BIG, "prompt larger than the arena");
	CHECK(submit_ids(c, 3, 1025) == -E2BIG, "ids larger than the arena");
	CHECK(submit_text(c, 3, fits) == 0, "prompt exactly the arena");
	expect_normal(c, 3, (uint32_t)fits);
	CHECK(atomic_load(&f.n_submits) == 2, "bad params reached the engine: %d submits",
	      atomic_load(&f.n_submits));
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

/* The arena is reused: far more prompt bytes than it holds, in odd sizes, text and
 * ids mixed, with the client resubmitting on -EAGAIN. Every prompt must arrive
 * intact (the engine checks its bytes). */
static void test_arena_reuse(void)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { .arena_size = 4096, .sq_entries = 8, .cq_entries = 16 };
	allm_client_t *c = must_connect(&o);
	int n = 200, submitted = 0, finals = 0, eagain = 0;
	uint64_t total = 0;
	struct allm_event ev;
	while (finals < n) {
		while (submitted < n) {
			size_t len = 1 + (size_t)(submitted * 677) % 1500;
			int r = submitted % 3 ? submit_text(c, (uint64_t)submitted, len)
					      : submit_ids(c, (uint64_t)submitted, len / 4 + 1);
			if (r == -EAGAIN) {
				eagain++;
				break;
			}
			CHECK(r == 0, "submit %d: %d", submitted, r);
			if (r)
				goto out;
			total += len;
			submitted++;
		}
		int r = allm_client_wait(c, &ev, 5000);
		CHECK(r == 1, "wait: %d", r);
		if (r != 1)
			goto out;
		if (ev.kind == ALLM_EVENT_FINAL) {
			CHECK(ev.finish_reason == ALLM_FINISH_LENGTH, "finish %d", ev.finish_reason);
			finals++;
		}
	}
	CHECK(total > 10 * 4096, "only %llu bytes went through", (unsigned long long)total);
	CHECK(eagain > 0, "the arena never filled up");
out:
	CHECK(atomic_load(&f.n_bad_prompts) == 0, "%d prompts arrived corrupted",
	      atomic_load(&f.n_bad_prompts));
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

/* With the engine paused: the arena fills (-EAGAIN: 4 prompts of 900 bytes and
 * their parameters fit 4096, not 5), then frees on ACCEPTED; the
 * SQ fills (-EAGAIN) for submit and cancel. */
static void test_eagain(void)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", false);
	atomic_store(&f.paused, 1);
	pthread_create(&f.th, NULL, eng_thread, &f);
	struct allm_client_opts o = { .arena_size = 4096, .sq_entries = 16 };
	allm_client_t *c = must_connect(&o);
	struct allm_event ev;
	for (uint64_t t = 0; t < 4; t++)
		CHECK(submit_text(c, t, 900) == 0, "submit %llu", (unsigned long long)t);
	CHECK(submit_text(c, 4, 900) == -EAGAIN, "arena full");
	CHECK(allm_client_poll(c, &ev) == 0, "no events while paused");
	atomic_store(&f.paused, 0);
	int r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_ACCEPTED && ev.user_tag == 0, "first accepted");
	CHECK(submit_text(c, 4, 900) == 0, "the accepted prompt's span is free again");
	int finals = 0;
	while (finals < 5 && allm_client_wait(c, &ev, 5000) == 1)
		finals += ev.kind == ALLM_EVENT_FINAL;
	CHECK(finals == 5, "finals %d", finals);
	allm_client_disconnect(c);
	fake_stop(&f, true);

	/* SQ full: 4 slots */
	fake_init(&f, tmpdir, "t", false);
	atomic_store(&f.paused, 1);
	pthread_create(&f.th, NULL, eng_thread, &f);
	struct allm_client_opts o2 = { .sq_entries = 4, .cq_entries = 64 };
	c = must_connect(&o2);
	for (uint64_t t = 0; t < 4; t++)
		CHECK(submit_ids(c, t, 3) == 0, "submit %llu", (unsigned long long)t);
	CHECK(submit_ids(c, 4, 3) == -EAGAIN, "SQ full");
	CHECK(allm_client_cancel(c, 1) == -EAGAIN, "SQ full for cancel too");
	atomic_store(&f.paused, 0);
	finals = 0;
	bool resubmitted = false;
	while (finals < 5 && allm_client_wait(c, &ev, 5000) == 1) {
		finals += ev.kind == ALLM_EVENT_FINAL;
		if (!resubmitted && ev.kind == ALLM_EVENT_ACCEPTED)
			resubmitted = submit_ids(c, 4, 3) == 0;
	}
	CHECK(resubmitted && finals == 5, "finals %d", finals);
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

static void test_reject_cancel(void)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { .arena_size = 4096 };
	allm_client_t *c = must_connect(&o);
	struct allm_event ev;
	/* refused requests give their arena span back too (10 x 3000 B > 4096 B) */
	for (uint64_t t = 0; t < 10; t++) {
		CHECK(submit_text(c, TAG_REJECT | t, 3000) == 0, "submit rejected %llu",
		      (unsigned long long)t);
		int r = allm_client_wait(c, &ev, 5000);
		CHECK(r == 1 && ev.kind == ALLM_EVENT_FINAL && ev.request_id == 0 &&
		      ev.user_tag == (TAG_REJECT | t), "refusal: r=%d kind=%d", r, ev.kind);
		CHECK(ev.finish_reason == ALLM_FINISH_ERROR && ev.status == -EINVAL && ev.error &&
		      !strcmp(ev.error, "rejected: test"), "refusal fields: %s", ev.error ? ev.error : "(null)");
	}
	/* cancel: a held request ends CANCELLED once the CANCEL SQE reaches the engine */
	CHECK(submit_text(c, TAG_HOLD | 5, 10) == 0, "submit held");
	int r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_ACCEPTED, "held accepted");
	uint64_t id = ev.request_id;
	CHECK(allm_client_wait(c, &ev, 50) == 0, "held: nothing more until cancelled");
	CHECK(allm_client_cancel(c, id) == 0, "cancel");
	r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_FINAL && ev.request_id == id &&
	      ev.finish_reason == ALLM_FINISH_CANCELLED && ev.error == NULL, "cancelled final");
	CHECK(atomic_load(&f.n_cancels) == 1 && atomic_load(&f.last_cancel_id) == id,
	      "engine saw %d cancels (last id %llu)", atomic_load(&f.n_cancels),
	      (unsigned long long)atomic_load(&f.last_cancel_id));
	CHECK(atomic_load(&f.n_bad_sqes) == 0, "bad SQEs");
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

/* The client sleeps on the CQ doorbell and the engine must ring it; the same through
 * an external poll(2) loop on allm_client_fd(). */
static void test_sleep_wake(void)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { .spin_us = 10 };
	allm_client_t *c = must_connect(&o);
	struct allm_event ev;
	CHECK(submit_text(c, TAG_DELAY | 1, 8) == 0, "submit delayed");
	double t0 = now_s();
	int r = allm_client_wait(c, &ev, -1);
	double dt = now_s() - t0;
	CHECK(r == 1 && ev.kind == ALLM_EVENT_ACCEPTED && dt >= 0.04 && dt < 2.0,
	      "woken: r=%d after %.3f s", r, dt);
	for (int i = 0; i < 4; i++)
		CHECK(allm_client_wait(c, &ev, 5000) == 1, "rest of the request");

	CHECK(submit_text(c, TAG_DELAY | 2, 8) == 0, "submit delayed");
	CHECK(allm_client_poll(c, &ev) == 0, "poll before the answer");
	struct pollfd p = { .fd = allm_client_fd(c), .events = POLLIN };
	r = poll(&p, 1, 5000);
	CHECK(r == 1 && (p.revents & POLLIN), "the doorbell fd did not become readable: %d", r);
	int n = 0;
	while (n < 5) {
		r = allm_client_poll(c, &ev);
		if (r == 1) {
			n++;
			continue;
		}
		CHECK(r == 0, "poll: %d", r);
		if (r || poll(&p, 1, 5000) != 1)
			break;
	}
	CHECK(n == 5, "external loop got %d of 5 events", n);
	/* drained: the doorbell is quiet again, no busy loop for the caller */
	CHECK(allm_client_poll(c, &ev) == 0 && poll(&p, 1, 20) == 0, "doorbell still readable");
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

static void test_engine_death(void)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { 0 };
	allm_client_t *c = must_connect(&o);
	struct allm_event ev;
	CHECK(submit_text(c, TAG_DIE | 1, 8) == 0, "submit");
	int r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_ACCEPTED, "entries before the death still arrive: %d", r);
	r = allm_client_wait(c, &ev, 5000);
	CHECK(r == -EPIPE, "wait after engine death: %d", r);
	CHECK(allm_client_poll(c, &ev) == -EPIPE, "sticky -EPIPE (poll)");
	CHECK(submit_text(c, 2, 8) == -EPIPE, "sticky -EPIPE (submit)");
	CHECK(allm_client_cancel(c, 1) == -EPIPE, "sticky -EPIPE (cancel)");
	allm_client_disconnect(c);
	fake_stop(&f, true);

	/* death noticed by a non-blocking poll and by submit */
	fake_init(&f, tmpdir, "t", true);
	c = must_connect(&o);
	CHECK(submit_text(c, TAG_DIE | 1, 8) == 0, "submit");
	for (int i = 0; i < 500 && (r = allm_client_poll(c, &ev)) >= 0; i++)
		if (r == 0)
			msleep(2);
	CHECK(r == -EPIPE, "poll after engine death: %d", r);
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

/* A request with logprobs: its TOKEN events carry the LOGPROBS entries that
 * came just before them (a piece split over entries included; k alternatives
 * over as many entries as hold them: all in all_logprobs, the first entry's in
 * logprobs), the others NULL; and out-of-range logprobs never reach the engine. */
static void test_logprobs_k(int k)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { 0 };
	allm_client_t *c = must_connect(&o);
	struct allm_request_params p;
	struct allm_event ev;
	allm_request_params_init(&p);
	p.prompt = "ffff";
	p.prompt_len = 4;
	p.user_tag = 5;
	p.params.logprobs = 1 + ALLM_LOGPROBS_MAX + 1;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "logprobs past the most alternatives");
	p.params.logprobs = -1;
	CHECK(allm_client_submit(c, &p) == -EINVAL, "negative logprobs");
	p.params.logprobs = 1 + k;
	CHECK(allm_client_submit(c, &p) == 0, "submit with logprobs");
	int r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_ACCEPTED && !ev.logprobs && !ev.all_logprobs, "accepted");
	for (uint32_t i = 0; i < 3; i++) {
		r = allm_client_wait(c, &ev, 5000);
		CHECK(r == 1 && ev.kind == ALLM_EVENT_TOKEN && ev.token_id == 100 + (int32_t)i, "token %u", i);
		const struct allm_cqe_logprobs *l = ev.logprobs;
		const struct allm_logprobs *a = ev.all_logprobs;
		if (i == 2) {
			CHECK(!l && !a, "token 2 came without logprobs but has some");
			continue;
		}
		int first = k < ALLM_CQE_LOGPROBS_TOP ? k : ALLM_CQE_LOGPROBS_TOP;
		CHECK(l && l->index == i && l->sampled.token_id == 100 + (int32_t)i && l->sampled.logprob == -0.5f - i &&
			      l->n_top == (uint32_t)first && l->top[first - 1].token_id == 100 + first - 1 + (int32_t)i &&
			      l->top[first - 1].logprob == (float)(1 - first),
		      "k %d token %u: logprobs %s", k, i, l ? "wrong" : "missing");
		bool all = a && a->index == i && a->sampled.token_id == 100 + (int32_t)i && a->n_top == (uint32_t)k;
		for (int j = 0; all && j < k; j++)
			all = a->top[j].token_id == 100 + (int32_t)i + j && a->top[j].logprob == (float)-j;
		CHECK(all, "k %d token %u: all_logprobs %s", k, i, a ? "wrong" : "missing");
	}
	r = allm_client_wait(c, &ev, 5000);
	CHECK(r == 1 && ev.kind == ALLM_EVENT_FINAL && !ev.logprobs, "final");
	/* a program built before all_logprobs reads the first entry's alone */
	struct allm_event old;
	p.user_tag = 6;
	CHECK(allm_client_submit(c, &p) == 0, "submit again");
	CHECK(allm_client_wait_sized(c, &old, ALLM_EVENT_SIZE_VER0, 5000) == 1 && old.kind == ALLM_EVENT_ACCEPTED,
	      "accepted (old size)");
	old.all_logprobs = (const void *)&old; /* past its size: must stay untouched */
	CHECK(allm_client_wait_sized(c, &old, ALLM_EVENT_SIZE_VER0, 5000) == 1 && old.kind == ALLM_EVENT_TOKEN &&
		      old.logprobs && old.logprobs->n_top == (uint32_t)(k < ALLM_CQE_LOGPROBS_TOP ? k : ALLM_CQE_LOGPROBS_TOP) &&
		      old.all_logprobs == (const void *)&old,
	      "an old program's token event");
	while (allm_client_wait(c, &ev, 5000) == 1 && ev.kind != ALLM_EVENT_FINAL)
		;
	allm_client_disconnect(c);
	fake_stop(&f, true);
}

static void test_logprobs(void)
{
	test_logprobs_k(3);
	test_logprobs_k(ALLM_CQE_LOGPROBS_TOP);
	test_logprobs_k(ALLM_CQE_LOGPROBS_TOP + 1);
	test_logprobs_k(ALLM_LOGPROBS_MAX);
}

static void test_garbage(void)
{
	for (uint64_t v = 0; v < 9; v++) {
		struct fake f;
		fake_init(&f, tmpdir, "t", true);
		struct allm_client_opts o = { 0 };
		allm_client_t *c = must_connect(&o);
		struct allm_event ev;
		CHECK(submit_text(c, TAG_GARBAGE | v, 8) == 0, "submit");
		int r = allm_client_wait(c, &ev, 5000);
		CHECK(r == 1 && ev.kind == ALLM_EVENT_ACCEPTED, "variant %llu: accepted %d",
		      (unsigned long long)v, r);
		r = allm_client_wait(c, &ev, 5000);
		CHECK(r == -EPROTO, "variant %llu: garbage gave %d", (unsigned long long)v, r);
		CHECK(allm_client_poll(c, &ev) == -EPROTO && submit_text(c, 1, 8) == -EPROTO,
		      "variant %llu: -EPROTO is sticky", (unsigned long long)v);
		allm_client_disconnect(c);
		fake_stop(&f, true);
	}
}

static void test_connect_errors(void)
{
	allm_client_t *c = NULL;
	char err[512];
	struct allm_client_opts o = { .runtime_dir = tmpdir, .name = "nobody" };
	int r = allm_client_connect(&o, &c, err, sizeof(err));
	CHECK(r == -ENOENT && c == NULL, "missing socket: %d", r);
	CHECK(strstr(err, "cannot connect to") && strstr(err, "nobody.sock"), "message: %s", err);

	o.name = "a/b";
	r = allm_client_connect(&o, &c, err, sizeof(err));
	CHECK(r == -EINVAL && strstr(err, "bad engine name"), "bad name: %d %s", r, err);

	/* a socket that listens but never answers */
	struct fake f;
	fake_init(&f, tmpdir, "mute", false);
	o.name = "mute";
	o.timeout_ms = 150;
	double t0 = now_s();
	r = allm_client_connect(&o, &c, err, sizeof(err));
	double dt = now_s() - t0;
	CHECK(r == -ETIMEDOUT && strstr(err, "no engine answers at") && strstr(err, "mute.sock"),
	      "mute engine: %d %s", r, err);
	CHECK(dt >= 0.14 && dt < 2.0, "timeout took %.3f s", dt);
	fake_stop(&f, false);

	/* an engine that refuses with a status and a message */
	fake_init(&f, tmpdir, "t", false);
	f.refuse = true;
	pthread_create(&f.th, NULL, eng_thread, &f);
	o.name = "t";
	o.timeout_ms = 0;
	r = allm_client_connect(&o, &c, err, sizeof(err));
	CHECK(r == -EBUSY && strstr(err, "too many clients (test)"), "refused: %d %s", r, err);
	fake_stop(&f, true);

	/* the environment picks the runtime dir */
	fake_init(&f, tmpdir, "envname", true);
	setenv("ALLM_RUNTIME_DIR", tmpdir, 1);
	struct allm_client_opts oe = { .name = "envname" };
	r = allm_client_connect(&oe, &c, err, sizeof(err));
	CHECK(r == 0, "connect via $ALLM_RUNTIME_DIR: %d %s", r, err);
	allm_client_disconnect(c);
	unsetenv("ALLM_RUNTIME_DIR");
	fake_stop(&f, true);
	allm_client_disconnect(NULL);
}

/* The lease: disconnecting closes the socket and the engine notices. */
static void test_lease(void)
{
	struct fake f;
	fake_init(&f, tmpdir, "t", true);
	struct allm_client_opts o = { 0 };
	allm_client_t *c = must_connect(&o);
	CHECK(submit_text(c, TAG_HOLD | 1, 8) == 0, "submit");
	allm_client_disconnect(c); /* the engine thread sees the hang-up and returns */
	pthread_join(f.th, NULL);
	CHECK(atomic_load(&f.n_clients) == 1, "clients %d", atomic_load(&f.n_clients));
	fake_stop(&f, false);
}

/* --serve DIR NAME: a fake engine for the CLI test, until SIGTERM. */
static int serve(const char *dir, const char *name)
{
	static struct fake f;
	fake_init(&f, dir, name, false);
	f.serve_forever = true;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* the engine thread inherits the mask */
	pthread_create(&f.th, NULL, eng_thread, &f);
	int sig;
	sigwait(&set, &sig);
	fake_stop(&f, true);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--serve"))
		return serve(argv[2], argv[3]);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/allm-clientlib-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_basic(false);
	test_basic(true);
	test_params();
	test_arena_reuse();
	test_eagain();
	test_reject_cancel();
	test_sleep_wake();
	test_engine_death();
	test_logprobs();
	test_garbage();
	test_connect_errors();
	test_lease();
	rmdir(tmpdir);
	if (n_fail) {
		fprintf(stderr, "%d checks failed\n", n_fail);
		return 1;
	}
	printf("clientlib: all checks passed\n");
	return 0;
}
