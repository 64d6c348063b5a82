/* Description: hostile clients against a real allm-engined (run by daemon-hostile.sh): raw handshakes over the socket with shm/ calls (not clientlib) pushing malformed SQEs (bad offsets, huge lengths, offset overflow, bad token prompts, unknown opcodes, bad flags, reserved bytes set (SQEs of every opcode, hellos), odd sampling values, penalties, logprobs, logit bias entries (too many, past the arena, out of range), min_tokens and grammars (not compiling, kind out of range, length past the limit or the arena, text without a kind), random garbage, a scribbled header, cancelling another client's request), a corrupt SQ tail, a corrupt CQ head, bytes on the lease after the ack, garbage or partial hellos, silent and never-acking connections; each gets error FINALs or is disconnected, the daemon stays up, and a normal libadaptivellm client connected throughout keeps getting its exact ids.
 *
 *   daemon-hostile --name NAME --runtime-dir DIR --expect FILE --daemon-pid PID
 *   FILE: one line "I\tIDS,...\tEXPECTED IDS" (greedy, 24 tokens), as daemon-common.sh
 *   writes. At the end it SIGTERMs the daemon while its silent connections are still
 *   open and waits until the daemon closes them.
 */
#include <adaptivellm/client.h>

#include "raw-client.h"

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
static pid_t g_daemon;
static int32_t g_prompt[64], g_want[512];
static size_t g_nprompt, g_nwant;

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
	p.params.max_tokens = (int32_t)g_nwant;
	p.params.temperature = 0;
	p.user_tag = 42;
	int r = allm_client_submit(g_normal, &p);
	CHECK(r == 0, "after %s: normal submit: %s", after, strerror(-r));
	if (r)
		return;
	int32_t got[512];
	size_t n = 0;
	int reason = 0;
	double deadline = raw_now() + 20;
	while (!reason && raw_now() < deadline) {
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
	q = raw_submit_sqe(r, t++, A + 100, 16, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, A, 1, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 0, 0xFFFFFFFFu, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 0, A + 1, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 0xFFFFFFF0u, 0x20, ALLM_PROMPT_TEXT), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, A - 4, 8, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	/* token prompts: length not a multiple of 4, empty, ids outside the vocabulary
	 * (each prompt and the parameters after it apart from every other's: the
	 * engine reads them while later ones are written) */
	int32_t bad1[] = {1, 100000}, bad2[] = {1, -5}, bad3[] = {INT32_MAX};
	memcpy(arena + 0, bad1, sizeof(bad1));
	memcpy(arena + 256, bad2, sizeof(bad2));
	memcpy(arena + 512, bad3, sizeof(bad3));
	q = raw_submit_sqe(r, t++, 0, 6, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 1024, 0, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 0, sizeof(bad1), ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 256, sizeof(bad2), ALLM_PROMPT_TOKENS), raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 512, sizeof(bad3), ALLM_PROMPT_TOKENS), raw_push(r, &q);
	/* a token prompt longer than the model's context */
	int32_t *lng = (int32_t *)(arena + 4096);
	for (int i = 0; i < 5000; i++)
		lng[i] = 1 + i % 300;
	q = raw_submit_sqe(r, t++, 4096, 5000 * 4, ALLM_PROMPT_TOKENS), raw_push(r, &q);
	/* bad fields */
	memcpy(arena + 2048, "hello", 5);
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.opcode = 77, raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.opcode = 255, raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.flags = 0x80, raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.prompt_kind = 9, raw_push(r, &q);
	/* the parameters' size: none, short of the first version's, past the most */
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.params_size = 0, raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.params_size = ALLM_PARAMS_SIZE_VER0 - 8,
	raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.params_size = ALLM_PARAMS_SIZE_MAX + 8,
	raw_push(r, &q);
	q = raw_submit_sqe(r, t++, 2048, 5, ALLM_PROMPT_TEXT), q.params_size = 0xFFFFFFFFu, raw_push(r, &q);
	/* parameters past the arena's end */
	q = raw_submit_sqe(r, t++, A - 16, 5, ALLM_PROMPT_TEXT), raw_push(r, &q);
	/* bad parameters, each its own copy in the arena (a slot of 256 bytes from 32 KiB) */
	static const struct {
		int field; /* 0 n_stop, 1 max_tokens, 2 size field differs from the SQE's */
		int64_t v;
	} bad[] = {{0, 5}, {0, 0xFFFFFFFF}, {1, 0}, {1, INT32_MIN}, {2, sizeof(struct allm_params) + 8}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint32_t at = 32768 + 256 * (uint32_t)i;
		memcpy(arena + at, "hello", 5);
		q = raw_submit_sqe(r, t++, at, 5, ALLM_PROMPT_TEXT);
		struct allm_params *p = raw_params(r, &q);
		if (bad[i].field == 0)
			p->n_stop = (uint32_t)bad[i].v;
		else if (bad[i].field == 1)
			p->max_tokens = (int32_t)bad[i].v;
		else
			p->size = (uint32_t)bad[i].v;
		raw_push(r, &q);
	}
	expect_errors(r, 100, t, "malformed SQEs");
	check_normal("malformed SQEs");
}

/* A SUBMIT of "hello" with its own copy of the parameters in the arena (a slot
 * of 256 bytes from 32 KiB per tag from 300), to change before it is pushed. */
static struct allm_params *odd(struct raw *r, uint64_t t, struct allm_sqe *q)
{
	uint32_t at = 32768 + 256 * (uint32_t)(t - 300);
	memcpy(allm_shm_segment_arena(r->seg) + at, "hello", 5);
	*q = raw_submit_sqe(r, t, at, 5, ALLM_PROMPT_TEXT);
	return raw_params(r, q);
}

/* Tags 300..: odd but not necessarily invalid values: any FINAL will do, no crash. */
static void odd_values(struct raw *r)
{
	uint8_t *arena = allm_shm_segment_arena(r->seg);
	uint64_t t = 300;
	struct allm_sqe q;
	struct allm_params *p;

	float temps[] = {NAN, -1.0f, INFINITY, -INFINITY, 1e30f, 1e-30f};
	for (size_t i = 0; i < sizeof(temps) / sizeof(temps[0]); i++)
		p = odd(r, t++, &q), p->temperature = temps[i], raw_push(r, &q);
	float tps[] = {NAN, 0.0f, -1.0f, 7.0f, 1e-30f};
	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++)
		p = odd(r, t++, &q), p->temperature = 1, p->top_p = tps[i], raw_push(r, &q);
	p = odd(r, t++, &q), p->temperature = 1, p->top_k = INT32_MIN, raw_push(r, &q);
	p = odd(r, t++, &q), p->temperature = 1, p->top_k = INT32_MAX, raw_push(r, &q);
	p = odd(r, t++, &q), p->max_tokens = INT32_MAX, raw_push(r, &q);
	p = odd(r, t++, &q), p->n_stop = 4, p->stop_ids[0] = -1, p->stop_ids[1] = INT32_MAX,
	p->stop_ids[2] = INT32_MIN, raw_push(r, &q);
	p = odd(r, t++, &q), p->ignore_eos = 0xFF, raw_push(r, &q);
	p = odd(r, t++, &q), memset(q.reserved, 0xAB, sizeof(q.reserved)), raw_push(r, &q);
	/* penalties out of range or not numbers: each an error FINAL */
	uint64_t pen0 = t;
	static const float bad_pen[][3] = {{NAN, 0, 0}, {-1, 0, 0}, {11, 0, 0}, {1, INFINITY, 0}, {1, -2.5f, 0},
					   {1, 0, NAN}, {1, 0, 1e30f}, {0, 0, 0}};
	for (size_t i = 0; i < sizeof(bad_pen) / sizeof(bad_pen[0]); i++)
		p = odd(r, t++, &q), p->repetition_penalty = bad_pen[i][0], p->frequency_penalty = bad_pen[i][1],
		p->presence_penalty = bad_pen[i][2], raw_push(r, &q);
	for (int i = 0; i < 2; i++) /* logprobs past the most alternatives */
		p = odd(r, t++, &q), p->logprobs = i ? 255 : 2 + ALLM_LOGPROBS_MAX, raw_push(r, &q);
	/* logit bias entries: too many, past the arena, out of range (they follow
	 * the parameters) */
	struct allm_logit_bias lb[3] = {{5, NAN}, {-7, 1}, {1 << 30, 1}};
	p = odd(r, t++, &q), q.n_logit_bias = ALLM_LOGIT_BIAS_MAX + 1, raw_push(r, &q);
	q = raw_submit_sqe(r, t++, r->arena_size - 8 - sizeof(struct allm_params), 5, ALLM_PROMPT_TEXT);
	q.n_logit_bias = 2, raw_push(r, &q);
	for (int i = 0; i < 3; i++) {
		p = odd(r, t++, &q);
		memcpy(arena + allm_logit_bias_off(q.prompt_off, q.prompt_len, q.params_size), &lb[i], sizeof(lb[i]));
		q.n_logit_bias = 1, raw_push(r, &q);
	}
	p = odd(r, t++, &q), p->max_tokens = 4, p->min_tokens = 5, raw_push(r, &q);
	p = odd(r, t++, &q), p->min_tokens = -1, raw_push(r, &q);
	/* grammars (issue 51): text that does not compile, a kind out of range, a
	 * length past the limit or the arena, text without a kind */
	p = odd(r, t++, &q), p->grammar_kind = ALLM_GRAMMAR_GBNF, q.grammar_len = 5,
	memcpy(arena + allm_grammar_text_off(q.prompt_off, q.prompt_len, q.params_size, 0), "\x01((\xff", 5),
	raw_push(r, &q);
	p = odd(r, t++, &q), p->grammar_kind = 9, raw_push(r, &q);
	p = odd(r, t++, &q), p->grammar_kind = ALLM_GRAMMAR_REGEX, q.grammar_len = ALLM_GRAMMAR_TEXT_MAX + 1,
	raw_push(r, &q);
	q = raw_submit_sqe(r, t++, r->arena_size - 8 - sizeof(struct allm_params), 5, ALLM_PROMPT_TEXT);
	raw_params(r, &q)->grammar_kind = ALLM_GRAMMAR_JSON_SCHEMA, q.grammar_len = 64, raw_push(r, &q);
	p = odd(r, t++, &q), q.grammar_len = 3, raw_push(r, &q);
	/* a parameter this engine does not know (a newer client's): refused, not dropped */
	p = odd(r, t++, &q), q.params_size = p->size = sizeof(*p) + 8, memset((char *)p + sizeof(*p), 0, 8),
	((char *)p)[sizeof(*p) + 3] = 1, raw_push(r, &q);
	uint64_t pen1 = t;
	q = raw_submit_sqe(r, t++, 192, 0, ALLM_PROMPT_TEXT), raw_push(r, &q); /* empty text */
	memcpy(arena + 256, "\xff\xfe\xc0\x80\xed\xa0\x80 \xf4\x90\x80\x80", 12);
	q = raw_submit_sqe(r, t++, 256, 12, ALLM_PROMPT_TEXT), raw_push(r, &q); /* invalid UTF-8 */
	memset(arena + 65536, 'a', 20000);
	q = raw_submit_sqe(r, t++, 65536, 20000, ALLM_PROMPT_TEXT), raw_push(r, &q); /* long text */
	CHECK(raw_wait_finals(r, 300, t), "odd values: not every request got a FINAL");
	int errs = 0;
	for (uint64_t i = 300; i < t; i++) {
		CHECK(r->finals[i] == 1, "odd values: tag %llu got %d FINALs", (unsigned long long)i,
		      r->finals[i]);
		errs += r->last_final[i].finish_reason == ALLM_FINISH_ERROR;
	}
	for (uint64_t i = pen0; i < pen1; i++) {
		char msg[ALLM_CQE_ERROR_MAX + 1] = {0}; /* NUL-padded, not always NUL-ended */
		memcpy(msg, r->last_final[i].u.final.error, ALLM_CQE_ERROR_MAX);
		CHECK(r->last_final[i].finish_reason == ALLM_FINISH_ERROR &&
			      (strstr(msg, "penalty") || strstr(msg, "logprobs") || strstr(msg, "logit_bias") ||
			       strstr(msg, "min_tokens") || strstr(msg, "does not know") || strstr(msg, "grammar") ||
			       strstr(msg, "GBNF")),
		      "a bad penalty, logprobs or parameter (tag %llu) was not refused: '%s'", (unsigned long long)i, msg);
	}
	char which[64] = "";
	for (uint64_t i = 300; i < t && i - 300 < sizeof(which) - 1; i++)
		which[i - 300] = r->last_final[i].finish_reason == ALLM_FINISH_ERROR ? 'E' : '.';
	printf("ok: odd sampling/stop/length values: %llu requests ended (%d with an error: %s)\n",
	       (unsigned long long)(t - 300), errs, which);
	check_normal("odd sampling values");
}

/* Tags 1000..1399: random garbage entries; SUBMITs among them get a flag so they
 * are surely invalid; NOP and CANCEL (with zero reserved bytes) are never answered. */
static void garbage_sqes(struct raw *r)
{
	struct allm_sqe q;
	int expect_final = 0;
	for (uint64_t i = 1000; i < 1400; i++) {
		uint64_t w[16];
		for (int k = 0; k < 16; k++)
			w[k] = raw_rnd();
		memcpy(&q, w, sizeof(q));
		q.user_tag = i;
		if (q.opcode == ALLM_SQE_OP_SUBMIT)
			q.flags |= 1;
		bool answered = q.opcode != ALLM_SQE_OP_NOP && q.opcode != ALLM_SQE_OP_CANCEL;
		if (i % 7 == 0)
			q.opcode = ALLM_SQE_OP_NOP, answered = false;
		if (i % 11 == 0)
			q.opcode = ALLM_SQE_OP_CANCEL, answered = false;
		if (!answered) { /* reserved bytes set would be answered (reserved_fields) */
			memset(q.reserved, 0, sizeof(q.reserved));
			q.reserved0 = 0;
			q.reserved1 = 0;
			q.params_size = 0;
			q.n_logit_bias = 0;
			q.grammar_len = 0;
		}
		expect_final += answered;
		raw_push(r, &q);
		if (!answered)
			r->finals[i] = -1000; /* marks "no FINAL expected" */
	}
	double deadline = raw_now() + 10;
	int got = 0;
	do {
		raw_pump(r);
		got = 0;
		for (uint64_t i = 1000; i < 1400; i++)
			got += r->finals[i] == 1;
		if (got < expect_final)
			raw_sleep_ms(1);
	} while (got < expect_final && raw_now() < deadline);
	raw_sleep_ms(20);
	raw_pump(r);
	int wrong = 0;
	for (uint64_t i = 1000; i < 1400; i++)
		wrong += r->finals[i] != 1 && r->finals[i] != -1000;
	CHECK(got == expect_final && wrong == 0, "garbage: %d of %d FINALs, %d wrong", got, expect_final,
	      wrong);
	printf("ok: 400 garbage SQEs: %d error FINALs, NOPs and CANCELs silent\n", got);
	check_normal("garbage SQEs");
}

/* Tags 1500..: reserved SQE bytes must be zero, whatever the opcode (issue 13): a
 * SUBMIT that is valid otherwise, a NOP and a CANCEL each get an -EINVAL FINAL
 * that says so, and nothing runs. */
static void reserved_fields(struct raw *r)
{
	memcpy(allm_shm_segment_arena(r->seg), g_prompt, g_nprompt * 4);
	struct allm_sqe q = raw_submit_sqe(r, 1500, 0, (uint32_t)(g_nprompt * 4), ALLM_PROMPT_TOKENS);
	q.reserved[sizeof(q.reserved) - 1] = 1;
	raw_push(r, &q);
	memset(&q, 0, sizeof(q));
	q.opcode = ALLM_SQE_OP_NOP;
	q.user_tag = 1501;
	q.reserved[0] = 0x80;
	raw_push(r, &q);
	q.opcode = ALLM_SQE_OP_CANCEL;
	q.user_tag = 1502;
	q.request_id = 12345;
	raw_push(r, &q);
	q.reserved[0] = 0; /* the byte after prompt_kind is reserved too */
	q.reserved0 = 1;
	q.user_tag = 1503;
	raw_push(r, &q);
	q.reserved0 = 0; /* and the two after n_logit_bias */
	q.reserved1 = 1;
	q.user_tag = 1504;
	raw_push(r, &q);
	q.reserved1 = 0; /* a grammar's length means nothing to a CANCEL */
	q.grammar_len = 5;
	q.user_tag = 1505;
	raw_push(r, &q);
	expect_errors(r, 1500, 1506, "reserved SQE bytes set");
	for (uint64_t t = 1500; t < 1506; t++)
		CHECK(r->last_final[t].status == -EINVAL &&
			      strstr(r->last_final[t].u.final.error, "reserved SQE bytes must be zero"),
		      "reserved SQE bytes: tag %llu: status %d '%.64s'", (unsigned long long)t,
		      r->last_final[t].status, r->last_final[t].u.final.error);
	check_normal("reserved SQE bytes");
}

/* Cancelling another client's request does nothing. */
static void foreign_cancel(struct raw *r)
{
	struct allm_sqe q;
	struct allm_request_params p;
	allm_request_params_init(&p);
	p.prompt_ids = g_prompt;
	p.n_prompt_ids = g_nprompt;
	p.params.max_tokens = 100;
	p.params.ignore_eos = true;
	p.params.temperature = 0;
	p.user_tag = 9;
	CHECK(allm_client_submit(g_normal, &p) == 0, "normal submit");
	struct allm_event ev;
	int reason = 0;
	uint32_t ngen = 0;
	bool sent = false;
	double deadline = raw_now() + 20;
	while (!reason && raw_now() < deadline) {
		int w = allm_client_wait(g_normal, &ev, 200);
		if (w <= 0)
			continue;
		if (ev.kind == ALLM_EVENT_ACCEPTED && !sent) {
			memset(&q, 0, sizeof(q));
			q.opcode = ALLM_SQE_OP_CANCEL;
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
	q = raw_submit_sqe(r, 0, 0, (uint32_t)(g_nprompt * 4), ALLM_PROMPT_TOKENS);
	raw_params(r, &q)->max_tokens = (int32_t)g_nwant;
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

/* A newer client's parameters (struct allm_params grown by 8 bytes it knows and
 * this engine does not): served exactly as ever while those bytes are zero (the
 * knob off), refused with -E2BIG, not run without it, when one is set. */
static void newer_params(void)
{
	struct raw *r = raw_connect_f(0, true);
	uint8_t *arena = allm_shm_segment_arena(r->seg);
	for (uint64_t tag = 0; tag < 2; tag++) {
		uint32_t at = 4096 * (uint32_t)tag;
		memcpy(arena + at, g_prompt, g_nprompt * 4);
		struct allm_sqe q = raw_submit_sqe(r, tag, at, (uint32_t)(g_nprompt * 4), ALLM_PROMPT_TOKENS);
		struct allm_params *p = raw_params(r, &q);
		p->max_tokens = (int32_t)g_nwant;
		q.params_size = p->size = sizeof(*p) + 8;
		memset((uint8_t *)p + sizeof(*p), 0, 8);
		((uint8_t *)p)[sizeof(*p) + 5] = tag ? 7 : 0;
		raw_push(r, &q);
	}
	CHECK(raw_wait_finals(r, 0, 2), "newer params: no FINALs");
	CHECK(r->nids[0] == g_nwant && !memcmp(r->ids[0], g_want, g_nwant * 4) &&
		      r->last_final[0].finish_reason == ALLM_FINISH_LENGTH,
	      "newer params, new knob off: %zu ids, reason %d", r->nids[0], r->last_final[0].finish_reason);
	CHECK(r->accepted[1] == 0 && r->nids[1] == 0 && r->last_final[1].finish_reason == ALLM_FINISH_ERROR &&
		      r->last_final[1].status == -E2BIG,
	      "newer params, new knob set: reason %d status %d", r->last_final[1].finish_reason,
	      r->last_final[1].status);
	printf("ok: a newer client's params: served with its new knob off, -E2BIG with it on\n");
	raw_close(r);
	check_normal("a newer client's params");
}

static void bad_sqes(void)
{
	struct raw *r = raw_connect_f(0, true);
	malformed_sqes(r);
	odd_values(r);
	garbage_sqes(r);
	reserved_fields(r);
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
	CHECK(raw_hung_up(r->sock, 5000), "corrupt SQ tail: not disconnected");
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
	raw_sleep_ms(50);
	atomic_store(&h->sq_ctl.tail, 1u);
	allm_doorbell_ring(&r->sq_db);
	CHECK(raw_hung_up(r->sock, 5000), "SQ tail behind the head: not disconnected");
	printf("ok: SQ tail behind the head: disconnected\n");
	raw_close(r);
	check_normal("an SQ tail moved back");

	/* the CQ head far ahead of the tail while requests stream: the engine cannot
	 * publish; it disconnects the client (its requests are cancelled) */
	r = raw_connect_f(0, true);
	h = allm_shm_segment_header(r->seg);
	memcpy(allm_shm_segment_arena(r->seg), g_prompt, g_nprompt * 4);
	for (int i = 0; i < 8; i++) {
		q = raw_submit_sqe(r, (uint64_t)i, 0, (uint32_t)(g_nprompt * 4), ALLM_PROMPT_TOKENS);
		raw_params(r, &q)->max_tokens = 300;
		raw_params(r, &q)->ignore_eos = 1;
		raw_push(r, &q);
	}
	raw_sleep_ms(5);
	atomic_store(&h->cq_ctl.head, atomic_load(&h->cq_ctl.tail) + 5000000u);
	check_normal("a corrupt CQ head");
	CHECK(raw_hung_up(r->sock, 5000), "corrupt CQ head: not disconnected");
	printf("ok: corrupt CQ head: disconnected, the others keep working\n");
	raw_close(r);

	/* bytes on the lease after the ack: disconnected */
	r = raw_connect_f(0, true);
	if (send(r->sock, "xyz", 3, MSG_NOSIGNAL) != 3) {
	}
	CHECK(raw_hung_up(r->sock, 5000), "bytes on the lease: not disconnected");
	printf("ok: bytes on the lease after the ack: disconnected\n");
	raw_close(r);
}

static void bad_hellos(int *held, int *n_held)
{
	/* garbage instead of a hello: an error welcome, then a hang-up */
	int fd = raw_socket();
	uint8_t junk[sizeof(struct allm_hello)];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)raw_rnd();
	if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) != (ssize_t)sizeof(junk))
		exit(1);
	struct allm_welcome w;
	int fds[8], nfd;
	ssize_t n = raw_recv_welcome(fd, &w, fds, &nfd);
	CHECK(n == (ssize_t)sizeof(w) && w.magic == ALLM_WELCOME_MAGIC && w.status == -EPROTO && nfd == 0,
	      "garbage hello: %zd bytes, status %d, %d fds", n, n > 0 ? w.status : 0, nfd);
	CHECK(raw_hung_up(fd, 5000), "garbage hello: not disconnected");
	close(fd);
	printf("ok: a garbage hello gets an -EPROTO welcome and a hang-up\n");

	/* a wrong ABI version */
	fd = raw_socket();
	struct allm_hello hh = raw_hello(0);
	hh.abi_version = 99;
	if (send(fd, &hh, sizeof(hh), MSG_NOSIGNAL) != (ssize_t)sizeof(hh))
		exit(1);
	n = raw_recv_welcome(fd, &w, fds, &nfd);
	CHECK(n == (ssize_t)sizeof(w) && w.status == -EPROTO && nfd == 0, "ABI 99: status %d", w.status);
	close(fd);

	/* reserved hello fields and unknown flags: refused (a later ABI may use them) */
	for (int k = 0; k < 2; k++) {
		fd = raw_socket();
		hh = raw_hello(0);
		if (k == 0)
			hh.reserved = 1;
		else
			hh.flags = 1u << 7;
		if (send(fd, &hh, sizeof(hh), MSG_NOSIGNAL) != (ssize_t)sizeof(hh))
			exit(1);
		n = raw_recv_welcome(fd, &w, fds, &nfd);
		CHECK(n == (ssize_t)sizeof(w) && w.status == -EINVAL && nfd == 0 && raw_hung_up(fd, 5000),
		      "hello with %s: %zd bytes, status %d, %d fds", k ? "flag bit 7" : "reserved = 1", n,
		      n > 0 ? w.status : 0, nfd);
		close(fd);
	}
	printf("ok: hellos with reserved fields or unknown flags get -EINVAL\n");
	hh = raw_hello(0);
	hh.abi_version = 99;

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
	struct allm_hello big = raw_hello(0);
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
	snprintf(raw_path, sizeof(raw_path), "%s/%s.sock", g_dir, g_name);
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
	newer_params();
	corrupt_rings();
	check_normal("everything");

	/* SIGTERM with the silent connections still open: the daemon closes them */
	allm_client_disconnect(g_normal);
	kill(g_daemon, SIGTERM);
	for (int i = 0; i < n_held; i++)
		CHECK(raw_hung_up(held[i], 10000), "held connection %d not closed by the stopping daemon", i);
	printf("ok: SIGTERM closes the silent connections\n");
	if (n_fail)
		fprintf(stderr, "%d failures\n", n_fail);
	return n_fail ? 1 : 0;
}
