/* Description: SPSC shm rings: push/pop/full/empty across the 2^32 index wrap, 10M sequenced entries between two threads, spin-then-sleep with eventfd doorbells never losing a wake-up, and hostile indices/entries (-EPROTO, safe copies). */
#include "shm-doorbell.h"
#include "shm-ring.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test-check.h"

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: the test must not depend on the engine's util code */
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static uint64_t mix(uint64_t x)
{
	uint64_t s = x;
	return rng_next(&s);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One ring in private memory, laid out as in a segment. */
struct test_ring {
	struct allm_ring_ctl *ctl;
	uint8_t *slots;
	uint32_t entries, entry_size;
};

static void ring_alloc(struct test_ring *r, uint32_t entries, uint32_t entry_size, uint32_t start)
{
	r->ctl = aligned_alloc(64, sizeof(*r->ctl));
	r->slots = aligned_alloc(64, (size_t)entries * entry_size);
	if (!r->ctl || !r->slots) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	memset(r->slots, 0, (size_t)entries * entry_size);
	r->entries = entries;
	r->entry_size = entry_size;
	if (allm_ring_ctl_init(r->ctl, entries, start) != 0) {
		fprintf(stderr, "ctl_init failed\n");
		exit(1);
	}
}

static void ring_free(struct test_ring *r)
{
	free(r->ctl);
	free(r->slots);
}

struct ent {
	uint64_t seq;
	uint64_t chk;
};

/* --- single thread ----------------------------------------------------- */

static void test_fill_drain_wrap(void)
{
	struct test_ring tr;
	uint32_t start = UINT32_MAX - 3; /* the wrap is crossed in the first round */
	ring_alloc(&tr, 8, sizeof(struct ent), start);
	struct allm_ring_prod p;
	struct allm_ring_cons c;
	CHECK(allm_ring_prod_init(&p, tr.ctl, tr.slots, 8, sizeof(struct ent)) == 0, "prod init");
	CHECK(allm_ring_cons_init(&c, tr.ctl, tr.slots, 8, sizeof(struct ent)) == 0, "cons init");

	uint64_t seq = 0, want = 0;
	struct ent e, o;
	CHECK(allm_ring_pop(&c, &o) == -EAGAIN, "empty ring pops nothing");
	for (int round = 0; round < 5; round++) {
		int pushed = 0;
		for (;;) {
			e = (struct ent){ seq, mix(seq) };
			int r = allm_ring_push(&p, &e);
			if (r == -EAGAIN)
				break;
			CHECK(r == 0, "push %d", r);
			seq++;
			pushed++;
			if (pushed > 8)
				break;
		}
		CHECK(pushed == 8, "round %d: pushed %d into 8 slots", round, pushed);
		CHECK(allm_ring_count(&c) == 8, "count %d", allm_ring_count(&c));
		CHECK(allm_ring_space(&p) == 0, "space %d", allm_ring_space(&p));
		for (int i = 0; i < 8; i++) {
			CHECK(allm_ring_pop(&c, &o) == 0, "pop");
			CHECK(o.seq == want && o.chk == mix(want), "round %d: got %llu want %llu", round,
			      (unsigned long long)o.seq, (unsigned long long)want);
			want++;
		}
		CHECK(allm_ring_pop(&c, &o) == -EAGAIN, "drained ring pops nothing");
		CHECK(allm_ring_count(&c) == 0, "count after drain");
		CHECK(allm_ring_space(&p) == 8, "space after drain");
	}
	uint32_t head = atomic_load(&tr.ctl->head);
	CHECK(head < start && head == start + 40, "head wrapped to %u", head);

	/* Random interleaving against a model queue, across the wrap again. */
	ring_free(&tr);
	start = UINT32_MAX - 1000;
	ring_alloc(&tr, 16, sizeof(struct ent), start);
	allm_ring_prod_init(&p, tr.ctl, tr.slots, 16, sizeof(struct ent));
	allm_ring_cons_init(&c, tr.ctl, tr.slots, 16, sizeof(struct ent));
	uint64_t rs = 42, in_ring = 0;
	seq = want = 0;
	for (int op = 0; op < 200000 && n_fail < 10; op++) {
		if (rng_next(&rs) % 2) {
			e = (struct ent){ seq, mix(seq) };
			int r = allm_ring_push(&p, &e);
			CHECK(r == (in_ring == 16 ? -EAGAIN : 0), "push %d with %llu in ring", r,
			      (unsigned long long)in_ring);
			if (r == 0)
				seq++, in_ring++;
		} else {
			int r = allm_ring_pop(&c, &o);
			CHECK(r == (in_ring == 0 ? -EAGAIN : 0), "pop %d with %llu in ring", r,
			      (unsigned long long)in_ring);
			if (r == 0) {
				CHECK(o.seq == want && o.chk == mix(want), "out of order");
				want++, in_ring--;
			}
		}
		CHECK((uint64_t)allm_ring_count(&c) == in_ring, "count");
	}
	CHECK(atomic_load(&tr.ctl->head) < start, "second run crossed the wrap");
	ring_free(&tr);
}

/* --- two threads, 10 million entries ------------------------------------- */

#define N_STREAM 10000000ull

/* A stream entry: words[0] = sequence number, words[1] = mix(seq), every further
 * word = words[1] + index, so a torn or stale copy shows anywhere in the entry. */
struct big_ent {
	uint64_t words[sizeof(struct allm_cqe) / 8];
};

struct stream_arg {
	struct test_ring *tr;
	uint64_t sum; /* of words[1] over all entries */
	uint64_t errors;
};

static void *stream_producer(void *arg)
{
	struct stream_arg *a = arg;
	struct allm_ring_prod p;
	if (allm_ring_prod_init(&p, a->tr->ctl, a->tr->slots, a->tr->entries, a->tr->entry_size)) {
		a->errors++;
		return NULL;
	}
	uint32_t nw = a->tr->entry_size / 8;
	struct big_ent e;
	for (uint64_t i = 0; i < N_STREAM; i++) {
		e.words[0] = i;
		e.words[1] = mix(i);
		for (uint32_t k = 2; k < nw; k++)
			e.words[k] = e.words[1] + k;
		int spins = 0, r;
		while ((r = allm_ring_push(&p, &e)) == -EAGAIN) {
			if (++spins % 128 == 0)
				sched_yield(); /* 2-CPU CI machines: let the consumer run */
			else
				allm_cpu_relax();
		}
		if (r) {
			a->errors++;
			return NULL;
		}
		a->sum += e.words[1];
	}
	return NULL;
}

static void *stream_consumer(void *arg)
{
	struct stream_arg *a = arg;
	struct allm_ring_cons c;
	if (allm_ring_cons_init(&c, a->tr->ctl, a->tr->slots, a->tr->entries, a->tr->entry_size)) {
		a->errors++;
		return NULL;
	}
	uint32_t nw = a->tr->entry_size / 8;
	uint64_t idle = 0;
	for (uint64_t want = 0; want < N_STREAM;) {
		struct big_ent o;
		int r = allm_ring_pop(&c, &o);
		if (r == -EAGAIN) {
			if (++idle % 128 == 0)
				sched_yield();
			else
				allm_cpu_relax();
			continue;
		}
		if (r) {
			a->errors++;
			return NULL;
		}
		bool ok = o.words[0] == want && o.words[1] == mix(o.words[0]);
		for (uint32_t k = 2; k < nw; k++)
			ok &= o.words[k] == o.words[1] + k;
		if (!ok) {
			if (a->errors++ < 5)
				fprintf(stderr, "FAIL stream: got seq %llu want %llu\n",
				        (unsigned long long)o.words[0], (unsigned long long)want);
			want = o.words[0]; /* resynchronize to count further damage only */
		}
		a->sum += o.words[1];
		want++;
	}
	return NULL;
}

static void test_two_threads(uint32_t entry_size)
{
	struct test_ring tr;
	/* Start 5M below the wrap: the indices overflow halfway through. */
	ring_alloc(&tr, 1024, entry_size, UINT32_MAX - 5000000u);
	struct stream_arg pa = { .tr = &tr }, ca = { .tr = &tr };
	pthread_t pt, ct;
	double t0 = now_s();
	if (pthread_create(&ct, NULL, stream_consumer, &ca) ||
	    pthread_create(&pt, NULL, stream_producer, &pa)) {
		fprintf(stderr, "pthread_create failed\n");
		exit(1);
	}
	pthread_join(pt, NULL);
	pthread_join(ct, NULL);
	double dt = now_s() - t0;
	CHECK(pa.errors == 0 && ca.errors == 0, "producer errors %llu, consumer errors %llu",
	      (unsigned long long)pa.errors, (unsigned long long)ca.errors);
	CHECK(pa.sum == ca.sum, "checksums differ: lost, duplicated or damaged entries");
	CHECK(atomic_load(&tr.ctl->head) == (uint32_t)(UINT32_MAX - 5000000u + N_STREAM),
	      "final head");
	printf("two threads: %llu entries of %u B in %.3f s = %.1f M entries/s\n",
	       (unsigned long long)N_STREAM, entry_size, dt, (double)N_STREAM / dt / 1e6);
	ring_free(&tr);
}

/* --- spin-then-sleep with doorbells ------------------------------------ */

#define N_PINGPONG 20000
#define SLEEP_TIMEOUT_MS 2000

/* One direction: a ring plus the doorbell its consumer sleeps on. */
struct channel {
	struct test_ring tr;
	struct allm_doorbell db;
	struct allm_ring_prod p;
	struct allm_ring_cons c;
};

struct pingpong {
	struct channel req, resp;
	atomic_int lost;  /* a consumer slept with entries waiting and was never woken */
	atomic_int stop;
	uint64_t sleeps[2]; /* [0] main, [1] worker */
};

static void random_delay(uint64_t *rs)
{
	switch (rng_next(rs) % 5) {
	case 0:
		break;
	case 1: {
		uint64_t n = rng_next(rs) % 2000;
		for (uint64_t i = 0; i < n; i++)
			allm_cpu_relax();
		break;
	}
	case 2:
		sched_yield();
		break;
	default: {
		struct timespec ts = { 0, (long)(rng_next(rs) % 50000) };
		nanosleep(&ts, NULL);
		break;
	}
	}
}

static void send_one(struct channel *ch, uint64_t v, struct pingpong *pp)
{
	struct ent e = { v, mix(v) };
	while (allm_ring_push(&ch->p, &e) == -EAGAIN && !atomic_load(&pp->stop))
		sched_yield();
	if (allm_ring_needs_wakeup(&ch->p))
		allm_doorbell_ring(&ch->db);
}

/* Spin a random while, then sleep on the doorbell until an entry arrives.
 * Returns 0 with *out filled, or -1 if the test is stopping. */
static int recv_one(struct channel *ch, struct ent *out, uint64_t *rs, struct pingpong *pp,
                    uint64_t *sleeps)
{
	for (;;) {
		uint64_t spin = rng_next(rs) % 64;
		for (uint64_t i = 0; i <= spin; i++) {
			if (allm_ring_pop(&ch->c, out) == 0)
				return 0;
			allm_cpu_relax();
		}
		if (atomic_load(&pp->stop))
			return -1;
		/* Work between the last empty check and the sleep (as an engine step
		 * would do) widens the window a lost wake-up needs. */
		if (rng_next(rs) % 2)
			random_delay(rs);
		if (!allm_ring_prepare_sleep(&ch->c))
			continue; /* arrived meanwhile */
		(*sleeps)++;
		int r = allm_doorbell_wait(&ch->db, SLEEP_TIMEOUT_MS);
		allm_doorbell_drain(&ch->db, NULL);
		if (r == -ETIMEDOUT && allm_ring_count(&ch->c) > 0) {
			/* An entry sat in the ring for the whole timeout while we slept
			 * with NEED_WAKEUP set: its producer did not ring. */
			atomic_store(&pp->lost, 1);
			atomic_store(&pp->stop, 1);
		}
		allm_ring_finish_sleep(&ch->c);
	}
}

static void *pingpong_worker(void *arg)
{
	struct pingpong *pp = arg;
	uint64_t rs = 7;
	struct ent e;
	while (recv_one(&pp->req, &e, &rs, pp, &pp->sleeps[1]) == 0) {
		if (e.chk != mix(e.seq))
			atomic_store(&pp->stop, 1);
		if (e.seq == UINT64_MAX)
			break;
		random_delay(&rs);
		send_one(&pp->resp, e.seq, pp);
	}
	return NULL;
}

static void channel_init(struct channel *ch)
{
	ring_alloc(&ch->tr, 8, sizeof(struct ent), UINT32_MAX - 10);
	if (allm_doorbell_create(&ch->db) ||
	    allm_ring_prod_init(&ch->p, ch->tr.ctl, ch->tr.slots, 8, sizeof(struct ent)) ||
	    allm_ring_cons_init(&ch->c, ch->tr.ctl, ch->tr.slots, 8, sizeof(struct ent))) {
		fprintf(stderr, "channel setup failed\n");
		exit(1);
	}
}

static void test_sleep_wakeup(void)
{
	struct pingpong pp = { 0 };
	channel_init(&pp.req);
	channel_init(&pp.resp);
	pthread_t wt;
	if (pthread_create(&wt, NULL, pingpong_worker, &pp)) {
		fprintf(stderr, "pthread_create failed\n");
		exit(1);
	}
	uint64_t rs = 99, sent = 0, got = 0;
	double t0 = now_s();
	while (sent < N_PINGPONG && !atomic_load(&pp.stop)) {
		/* bursts of 1..4 requests, each answered */
		uint64_t burst = 1 + rng_next(&rs) % 4;
		for (uint64_t b = 0; b < burst; b++) {
			random_delay(&rs);
			send_one(&pp.req, sent++, &pp);
		}
		for (uint64_t b = 0; b < burst; b++) {
			struct ent e;
			if (recv_one(&pp.resp, &e, &rs, &pp, &pp.sleeps[0]) != 0)
				break;
			CHECK(e.seq == got, "response %llu, expected %llu", (unsigned long long)e.seq,
			      (unsigned long long)got);
			got++;
		}
	}
	atomic_store(&pp.stop, 1);
	send_one(&pp.req, UINT64_MAX, &pp); /* also wakes the worker if it sleeps */
	pthread_join(wt, NULL);
	CHECK(!atomic_load(&pp.lost), "lost wake-up: a sleeping consumer was not woken");
	CHECK(got == sent && sent >= N_PINGPONG, "answered %llu of %llu", (unsigned long long)got,
	      (unsigned long long)sent);
	/* Both sleeping paths must really have run, or the test proved nothing. */
	CHECK(pp.sleeps[0] > 100 && pp.sleeps[1] > 100, "sleeps: main %llu, worker %llu",
	      (unsigned long long)pp.sleeps[0], (unsigned long long)pp.sleeps[1]);
	printf("sleep/wake: %llu round trips in %.2f s, sleeps main %llu worker %llu\n",
	       (unsigned long long)got, now_s() - t0, (unsigned long long)pp.sleeps[0],
	       (unsigned long long)pp.sleeps[1]);
	for (int i = 0; i < 2; i++) {
		struct channel *ch = i ? &pp.resp : &pp.req;
		allm_doorbell_close(&ch->db);
		ring_free(&ch->tr);
	}
}

static void test_doorbell_basics(void)
{
	struct allm_doorbell db = { -1 };
	CHECK(allm_doorbell_create(&db) == 0 && allm_doorbell_fd(&db) >= 0, "create");
	uint64_t n = 99;
	CHECK(allm_doorbell_drain(&db, &n) == 0 && n == 0, "fresh doorbell drains 0 (got %llu)",
	      (unsigned long long)n);
	CHECK(allm_doorbell_wait(&db, 0) == -ETIMEDOUT, "unrung doorbell does not wake");
	for (int i = 0; i < 3; i++)
		CHECK(allm_doorbell_ring(&db) == 0, "ring");
	CHECK(allm_doorbell_wait(&db, 1000) == 0, "rung doorbell wakes");
	CHECK(allm_doorbell_drain(&db, &n) == 0 && n == 3, "drain counts 3 rings (got %llu)",
	      (unsigned long long)n);
	CHECK(allm_doorbell_wait(&db, 0) == -ETIMEDOUT, "drained doorbell does not wake");
	allm_doorbell_close(&db);
	CHECK(db.fd == -1, "closed");
	allm_doorbell_close(&db); /* twice is fine */
	allm_doorbell_close(NULL);

	int pfd[2];
	if (pipe(pfd) == 0) {
		struct allm_doorbell bad = { -1 };
		CHECK(allm_doorbell_from_fd(&bad, pfd[0]) == -EINVAL && bad.fd == -1,
		      "a pipe is not a doorbell");
		close(pfd[0]);
		close(pfd[1]);
	}
}

/* --- hostile peer ------------------------------------------------------ */

static void test_corruption(void)
{
	struct test_ring tr;
	struct allm_ring_prod p;
	struct allm_ring_cons c;
	struct ent e = { 1, 2 }, o;
	const uint32_t start = 100;

	/* Consumer: a tail more than `entries` ahead of head. */
	ring_alloc(&tr, 8, sizeof(struct ent), start);
	CHECK(allm_ring_cons_init(&c, tr.ctl, tr.slots, 8, sizeof(struct ent)) == 0, "init");
	atomic_store(&tr.ctl->tail, start + 9);
	CHECK(allm_ring_pop(&c, &o) == -EPROTO, "tail 9 ahead of an 8-slot ring");
	CHECK(allm_ring_count(&c) == -EPROTO, "count sees it too");
	atomic_store(&tr.ctl->tail, start + 0x80000000u);
	CHECK(allm_ring_pop(&c, &o) == -EPROTO, "tail 2^31 ahead");
	atomic_store(&tr.ctl->tail, start - 1);
	CHECK(allm_ring_pop(&c, &o) == -EPROTO, "tail behind head");
	CHECK(atomic_load(&tr.ctl->head) == start, "a rejected pop leaves head alone");
	/* A full ring is not corruption. */
	atomic_store(&tr.ctl->tail, start + 8);
	int n = 0;
	while (allm_ring_pop(&c, &o) == 0)
		n++;
	CHECK(n == 8, "popped %d of a full ring", n);
	/* Attaching to inconsistent indices fails, leaving the view untouched. */
	struct allm_ring_cons c2 = { .entries = 12345 };
	atomic_store(&tr.ctl->tail, atomic_load(&tr.ctl->head) + 100);
	CHECK(allm_ring_cons_init(&c2, tr.ctl, tr.slots, 8, sizeof(struct ent)) == -EPROTO &&
	      c2.entries == 12345, "cons_init on corrupt indices");
	CHECK(allm_ring_prod_init(&p, tr.ctl, tr.slots, 8, sizeof(struct ent)) == -EPROTO,
	      "prod_init on corrupt indices");
	ring_free(&tr);

	/* Producer: a head ahead of the tail (or far behind it). */
	ring_alloc(&tr, 8, sizeof(struct ent), start);
	CHECK(allm_ring_prod_init(&p, tr.ctl, tr.slots, 8, sizeof(struct ent)) == 0, "init");
	atomic_store(&tr.ctl->head, start + 1);
	CHECK(allm_ring_space(&p) == -EPROTO, "head ahead of tail");
	atomic_store(&tr.ctl->head, start);
	for (int i = 0; i < 8; i++)
		CHECK(allm_ring_push(&p, &e) == 0, "fill");
	atomic_store(&tr.ctl->head, start + 9); /* "consumed" one entry more than exist */
	CHECK(allm_ring_push(&p, &e) == -EPROTO, "push refreshes the head and rejects it");
	CHECK(atomic_load(&tr.ctl->tail) == start + 8, "rejected push leaves tail alone");
	atomic_store(&tr.ctl->head, start + 8 - 100);
	CHECK(allm_ring_push(&p, &e) == -EPROTO, "head too far behind");
	ring_free(&tr);

	/* Bad geometry. */
	ring_alloc(&tr, 8, sizeof(struct ent), 0);
	CHECK(allm_ring_ctl_init(tr.ctl, 6, 0) == -EINVAL, "6 entries");
	CHECK(allm_ring_ctl_init(tr.ctl, 0, 0) == -EINVAL, "0 entries");
	CHECK(allm_ring_prod_init(&p, tr.ctl, tr.slots, 12, 16) == -EINVAL, "12 entries");
	CHECK(allm_ring_cons_init(&c, tr.ctl, tr.slots, 8, 0) == -EINVAL, "0-byte entries");
	ring_free(&tr);

	/* Garbage entries under huge (but consistent) indices: copied out byte for
	 * byte into caller memory, nothing written past the entry. */
	enum { ES = sizeof(struct allm_sqe), GUARD = 64 };
	ring_alloc(&tr, 4, ES, UINT32_MAX - 1);
	uint64_t rs = 1234;
	for (size_t i = 0; i < 4 * ES; i++)
		tr.slots[i] = (uint8_t)rng_next(&rs);
	CHECK(allm_ring_cons_init(&c, tr.ctl, tr.slots, 4, ES) == 0, "init");
	atomic_store(&tr.ctl->tail, (uint32_t)(UINT32_MAX - 1 + 4));
	for (uint32_t k = 0; k < 4; k++) {
		uint8_t buf[ES + GUARD];
		memset(buf, 0xA5, sizeof(buf));
		CHECK(allm_ring_pop(&c, buf) == 0, "pop garbage %u", k);
		uint32_t slot = (UINT32_MAX - 1 + k) & 3;
		CHECK(memcmp(buf, tr.slots + slot * ES, ES) == 0, "garbage copied exactly");
		int guard_ok = 1;
		for (int g = 0; g < GUARD; g++)
			guard_ok &= buf[ES + g] == 0xA5;
		CHECK(guard_ok, "nothing written past the entry");
		/* the peer rewrites the slot after the pop: our copy must not change */
		uint8_t keep[ES];
		memcpy(keep, buf, ES);
		memset(tr.slots + slot * ES, 0x5A, ES);
		CHECK(memcmp(keep, buf, ES) == 0, "copy independent of the slot");
	}
	CHECK(allm_ring_pop(&c, &o) == -EAGAIN, "empty after garbage");
	ring_free(&tr);
}

int main(void)
{
	alarm(100); /* a lost wake-up or a livelock fails the test instead of hanging it */
	test_fill_drain_wrap();
	test_corruption();
	test_doorbell_basics();
	test_two_threads(16);
	test_two_threads(sizeof(struct allm_cqe));
	test_sleep_wakeup();
	if (n_fail) {
		fprintf(stderr, "%d check(s) failed\n", n_fail);
		return 1;
	}
	printf("all shm ring checks passed\n");
	return 0;
}
