/* The client's half of the rings: submitting requests (prompt arena + SQ), and
 * turning CQ entries into events (validation, piece reassembly, spin-then-sleep
 * waiting on the doorbell). The handshake lives in client-connect.c. */
#include "client-internal.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Arena spans start on this boundary (int32 ids need 4; 8 keeps it simple). */
#define ARENA_ALIGN 8u
/* A token's text piece longer than this is a broken engine, not a token. */
#define PIECE_MAX (64u * 1024)
/* Pieces reassembled at once (one per request with a split piece in flight). */
#define PARTIALS_MAX 4096u

static int fail(struct allm_client *c, int r)
{
	c->dead = r;
	return r;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int allm_client_attach(struct allm_client *c)
{
	int r;
	if ((r = allm_shm_segment_sq_prod(c->seg, &c->sq)) ||
	    (r = allm_shm_segment_cq_cons(c->seg, &c->cq)))
		return r;
	/* The segment header was validated against ALLM_SHM_MAX_ARENA_SIZE (1 GiB), so
	 * the arena size and every offset in it fit the SQE's uint32_t fields. */
	if (c->seg->layout.arena_size > UINT32_MAX)
		return -EPROTO;
	c->arena = allm_shm_segment_arena(c->seg);
	c->arena_size = (uint32_t)c->seg->layout.arena_size;
	return 0;
}

_Static_assert(sizeof(struct allm_event) == ALLM_EVENT_SIZE_VER1, "a new event field needs a new size");

/* Returns 0 or -EINVAL; see client.h. */
int allm_request_params_init_sized(struct allm_request_params *p, size_t size)
{
	size_t at = offsetof(struct allm_request_params, params);
	if (size < at + ALLM_PARAMS_SIZE_VER0)
		return -EINVAL;
	memset(p, 0, at);
	return allm_params_init_sized(&p->params, size - at);
}

/* --- the lease ------------------------------------------------------------ */

/* Whether the engine is still there: 0, or -EPIPE once the lease socket hung up.
 * The engine sends nothing after its welcome; stray bytes are read and ignored. */
static int check_lease(struct allm_client *c)
{
	for (;;) {
		struct pollfd p = { .fd = c->sock, .events = POLLIN };
		int n = poll(&p, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
			return -EPIPE;
		char buf[64];
		ssize_t k = recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
			return -EPIPE;
		if (k < 0)
			return 0;
	}
}

/* --- prompt arena ----------------------------------------------------------- */

/* Reserves len bytes (len > 0, rounded up to ARENA_ALIGN, <= arena_size) and
 * records the span. Returns 0 with *ret_off, -EAGAIN (no room now) or -ENOMEM. */
static int arena_alloc(struct allm_client *c, uint32_t len, uint64_t user_tag, uint32_t *ret_off)
{
	uint32_t off;
	if (c->spans_n == 0) {
		c->arena_head = c->arena_tail = 0; /* empty: start over, no fragmentation */
		off = 0;
	} else if (c->arena_head > c->arena_tail) {
		/* not wrapped: free space is [head, size) then [0, tail) */
		if (c->arena_size - c->arena_head >= len)
			off = c->arena_head;
		else if (c->arena_tail >= len)
			off = 0; /* wrap; [head, size) stays unused until tail passes it */
		else
			return -EAGAIN;
	} else {
		/* wrapped (head <= tail with live spans): free space is [head, tail) */
		if (c->arena_tail - c->arena_head >= len)
			off = c->arena_head;
		else
			return -EAGAIN;
	}
	if (c->spans_n == c->spans_cap) {
		size_t cap = c->spans_cap ? c->spans_cap * 2 : 16;
		struct allm_arena_span *s = malloc(cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		for (size_t i = 0; i < c->spans_n; i++)
			s[i] = c->spans[(c->spans_first + i) & (c->spans_cap - 1)];
		free(c->spans);
		c->spans = s;
		c->spans_cap = cap;
		c->spans_first = 0;
	}
	struct allm_arena_span *s = &c->spans[(c->spans_first + c->spans_n) & (c->spans_cap - 1)];
	*s = (struct allm_arena_span){ .user_tag = user_tag, .off = off, .len = len };
	if (c->spans_n++ == 0)
		c->arena_tail = off;
	c->arena_head = off + len;
	*ret_off = off;
	return 0;
}

/* Gives back the newest span (a submit that failed after allocating). */
static void arena_unalloc_last(struct allm_client *c)
{
	c->spans_n--;
	if (c->spans_n == 0) {
		c->arena_head = c->arena_tail = 0;
		return;
	}
	struct allm_arena_span *s = &c->spans[(c->spans_first + c->spans_n - 1) & (c->spans_cap - 1)];
	c->arena_head = s->off + s->len;
}

/* The engine has copied the prompt of the oldest unanswered request tagged
 * user_tag: free its span and reclaim every answered span at the old end.
 * Returns 0, or -ENOENT if no such request is waiting. */
static int arena_free_tag(struct allm_client *c, uint64_t user_tag)
{
	size_t i;
	for (i = 0; i < c->spans_n; i++) {
		struct allm_arena_span *s = &c->spans[(c->spans_first + i) & (c->spans_cap - 1)];
		if (!s->freed && s->user_tag == user_tag) {
			s->freed = true;
			break;
		}
	}
	if (i == c->spans_n)
		return -ENOENT;
	while (c->spans_n && c->spans[c->spans_first].freed) {
		c->spans_first = (c->spans_first + 1) & (c->spans_cap - 1);
		c->spans_n--;
	}
	if (c->spans_n)
		c->arena_tail = c->spans[c->spans_first].off;
	else
		c->arena_head = c->arena_tail = 0;
	return 0;
}

/* --- submission ------------------------------------------------------------ */

/* Publishes one SQE and rings the engine if it sleeps. 0, -EAGAIN or -EPROTO. */
static int push_sqe(struct allm_client *c, const struct allm_sqe *e)
{
	/* The push's release store of the tail orders our earlier arena writes before
	 * it: the engine, after its acquire load of the tail, sees the prompt bytes. */
	int r = allm_ring_push(&c->sq, e);
	if (r == -EPROTO)
		return fail(c, r);
	if (r)
		return r;
	if (allm_ring_needs_wakeup(&c->sq))
		allm_doorbell_ring(&c->sq_db); /* only fails on a closed fd: nothing to do */
	return 0;
}

/* The prompt of p: 0 with its bytes, or -EINVAL / -E2BIG. */
static int check_prompt(const struct allm_request_params *p, uint64_t *ret_bytes)
{
	bool text = p->prompt != NULL, ids = p->prompt_ids != NULL;
	if (text == ids)
		return -EINVAL;
	if (text ? p->prompt_len == 0 : p->n_prompt_ids == 0)
		return -EINVAL;
	if (ids) {
		if (p->n_prompt_ids > UINT32_MAX / sizeof(int32_t))
			return -E2BIG;
		for (size_t i = 0; i < p->n_prompt_ids; i++)
			if (p->prompt_ids[i] < 0)
				return -EINVAL;
	}
	*ret_bytes = text ? (uint64_t)p->prompt_len : (uint64_t)p->n_prompt_ids * sizeof(int32_t);
	return 0;
}

/* allm_client_submit as programs built now bind to it (ADAPTIVELLM_1, the
 * default); client-compat.c keeps the old struct's at ADAPTIVELLM_0. Both are
 * the one name in client.h's sense: the version says which struct it takes. */
__asm__(".symver allm_client_submit_v1,allm_client_submit@@ADAPTIVELLM_1");

static int submit(allm_client_t *c, const struct allm_request_params *p, const char *grammar, size_t grammar_len);

/* Returns 0 or -errno; see client.h. */
int allm_client_submit_v1(allm_client_t *c, const struct allm_request_params *p)
{
	return submit(c, p, NULL, 0);
}

/* Returns 0 or -errno; see client.h. */
int allm_client_submit_grammar(allm_client_t *c, const struct allm_request_params *p, const char *text, size_t len)
{
	if (len && !text)
		return -EINVAL;
	return submit(c, p, text, len);
}

static int submit(allm_client_t *c, const struct allm_request_params *p, const char *grammar, size_t grammar_len)
{
	struct allm_params params;
	uint64_t bytes;
	uint32_t off;
	int r;

	if (!c || !p)
		return -EINVAL;
	if (c->dead)
		return c->dead;
	/* the caller's params as this library's layout (what it did not know is
	 * off), then the table's checks: the engine checks again, but a bad value
	 * is the caller's error to hear now */
	if ((r = check_prompt(p, &bytes)) ||
	    (r = allm_params_from_wire(&params, &p->params, p->params.size, NULL, 0)) ||
	    (r = allm_params_check(&params, NULL, 0)))
		return r;
	if ((p->n_logit_bias && !p->logit_bias) ||
	    allm_logit_bias_check(p->logit_bias, p->n_logit_bias, NULL, 0))
		return -EINVAL;
	/* a grammar text needs its kind, and a kind other than json_object its text */
	if (grammar_len > ALLM_GRAMMAR_TEXT_MAX)
		return -E2BIG;
	if ((grammar_len && !params.grammar_kind) ||
	    (!grammar_len && params.grammar_kind && params.grammar_kind != ALLM_GRAMMAR_JSON_OBJECT))
		return -EINVAL;
	/* prompt, params, logit bias, grammar text: one span (protocol.h) */
	uint64_t prompt_bytes = bytes, params_at = allm_sqe_params_off(0, bytes);
	uint64_t bias_at = allm_logit_bias_off(0, bytes, sizeof(params));
	uint64_t grammar_at = allm_grammar_text_off(0, bytes, sizeof(params), p->n_logit_bias);
	bytes = grammar_len ? grammar_at + grammar_len
			    : bias_at + (uint64_t)p->n_logit_bias * sizeof(struct allm_logit_bias);
	if (bytes > c->arena_size)
		return -E2BIG;
	if ((r = check_lease(c)))
		return fail(c, r);
	if ((r = allm_ring_space(&c->sq)) <= 0)
		return r == 0 ? -EAGAIN : fail(c, -EPROTO);
	uint32_t len = (uint32_t)((bytes + ARENA_ALIGN - 1) & ~(uint64_t)(ARENA_ALIGN - 1));
	if (len > c->arena_size)
		len = (uint32_t)bytes; /* an arena of odd size: the exact length still fits */
	if ((r = arena_alloc(c, len, p->user_tag, &off)))
		return r;

	/* Token ids go in as little-endian int32 (protocol.h: the host's order, which
	 * is little-endian), so a plain copy is the wire format. */
	const void *src = p->prompt ? (const void *)p->prompt : (const void *)p->prompt_ids;
	allm_shm_arena_copy_in(c->seg, off, src, prompt_bytes); /* in range: allocated above */
	allm_shm_arena_copy_in(c->seg, off + params_at, &params, sizeof(params));
	if (p->n_logit_bias)
		allm_shm_arena_copy_in(c->seg, off + bias_at, p->logit_bias,
				       (uint64_t)p->n_logit_bias * sizeof(struct allm_logit_bias));
	if (grammar_len)
		allm_shm_arena_copy_in(c->seg, off + grammar_at, grammar, grammar_len);

	struct allm_sqe e = {
		.opcode = ALLM_SQE_OP_SUBMIT,
		.prompt_kind = p->prompt ? ALLM_PROMPT_TEXT : ALLM_PROMPT_TOKENS,
		.params_size = (uint32_t)sizeof(params),
		.user_tag = p->user_tag,
		.prompt_off = off,
		.prompt_len = (uint32_t)prompt_bytes,
		.n_logit_bias = (uint16_t)p->n_logit_bias,
		.grammar_len = (uint32_t)grammar_len,
	};
	if ((r = push_sqe(c, &e)))
		arena_unalloc_last(c); /* -EAGAIN cannot happen (space checked); -EPROTO */
	return r;
}

/* Returns 0 or -errno; see client.h. */
int allm_client_cancel(allm_client_t *c, uint64_t request_id)
{
	if (!c || request_id == 0)
		return -EINVAL;
	if (c->dead)
		return c->dead;
	struct allm_sqe e = { .opcode = ALLM_SQE_OP_CANCEL, .request_id = request_id };
	return push_sqe(c, &e);
}

/* --- completion: validating entries and building events -------------------- */

static struct allm_partial_piece *find_partial(struct allm_client *c, uint64_t request_id)
{
	for (size_t i = 0; i < c->n_partials; i++)
		if (c->partials[i].request_id == request_id)
			return &c->partials[i];
	return NULL;
}

static void drop_partial(struct allm_client *c, struct allm_partial_piece *pp)
{
	free(pp->buf);
	*pp = c->partials[--c->n_partials];
}

/* Appends one part to the piece of request_id (creating it). 0, -EPROTO (too long
 * or too many pieces at once) or -ENOMEM. */
static int partial_append(struct allm_client *c, uint64_t request_id, const char *s, size_t n)
{
	struct allm_partial_piece *pp = find_partial(c, request_id);
	if (!pp) {
		if (c->n_partials >= PARTIALS_MAX)
			return -EPROTO;
		if (c->n_partials == c->partials_cap) {
			size_t cap = c->partials_cap ? c->partials_cap * 2 : 4;
			void *t = realloc(c->partials, cap * sizeof(*c->partials));
			if (!t)
				return -ENOMEM;
			c->partials = t;
			c->partials_cap = cap;
		}
		pp = &c->partials[c->n_partials++];
		*pp = (struct allm_partial_piece){ .request_id = request_id };
	}
	if (pp->len + n > PIECE_MAX)
		return -EPROTO;
	if (pp->len + n > pp->cap) {
		size_t cap = pp->cap ? pp->cap * 2 : 256;
		while (cap < pp->len + n)
			cap *= 2;
		char *t = realloc(pp->buf, cap);
		if (!t)
			return -ENOMEM;
		pp->buf = t;
		pp->cap = cap;
	}
	memcpy(pp->buf + pp->len, s, n);
	pp->len += n;
	return 0;
}

/* The common shape of an entry, per kind. Returns 0 or -EPROTO. */
static int validate_cqe(const struct allm_cqe *e)
{
	switch (e->kind) {
	case ALLM_CQE_ACCEPTED:
		if (e->flags || e->finish_reason || e->status || e->request_id == 0)
			return -EPROTO;
		return 0;
	case ALLM_CQE_TOKEN:
		if ((e->flags & ~ALLM_CQE_F_CONTINUED) || e->finish_reason || e->status ||
		    e->request_id == 0 || e->text_len > ALLM_CQE_TEXT_MAX)
			return -EPROTO;
		return 0;
	case ALLM_CQE_LOGPROBS: {
		const struct allm_cqe_logprobs *l = &e->u.logprobs;
		bool zero = true;
		for (size_t i = 0; i < sizeof(l->reserved); i++)
			zero &= l->reserved[i] == 0;
		if ((e->flags & ~ALLM_CQE_F_CONTINUED) || e->finish_reason || e->status || e->request_id == 0 ||
		    e->text_len || l->n_top > ALLM_CQE_LOGPROBS_TOP || !zero)
			return -EPROTO;
		return 0;
	}
	case ALLM_CQE_FINAL:
		if (e->flags || e->finish_reason == ALLM_FINISH_NONE ||
		    e->finish_reason > ALLM_FINISH_ERROR || e->status > 0 || e->status < -4095 ||
		    e->u.final.n_cached > e->u.final.n_prompt)
			return -EPROTO;
		return 0;
	default:
		return -EPROTO;
	}
}

/* The TOKEN entry e: 0 (a part of a piece, no event yet), 1 (event), <0. */
static int token_event(struct allm_client *c, const struct allm_cqe *e, struct allm_event *ev)
{
	const struct allm_cqe_token *t = &e->u.token;
	struct allm_partial_piece *pp;
	int r;
	if (e->flags & ALLM_CQE_F_CONTINUED)
		return partial_append(c, e->request_id, t->text, e->text_len);
	if ((pp = find_partial(c, e->request_id))) {
		if ((r = partial_append(c, e->request_id, t->text, e->text_len)))
			return r;
		pp = find_partial(c, e->request_id);
		/* hand the reassembled buffer over to the event: swap, no copy */
		char *b = c->text;
		c->text = pp->buf;
		c->text_cap = pp->cap;
		ev->text_len = pp->len;
		pp->buf = b;
		drop_partial(c, pp);
	} else {
		if (c->text_cap < ALLM_CQE_TEXT_MAX) {
			char *b = realloc(c->text, 256);
			if (!b)
				return -ENOMEM;
			c->text = b;
			c->text_cap = 256;
		}
		memcpy(c->text, t->text, e->text_len);
		ev->text_len = e->text_len;
	}
	ev->text = c->text;
	ev->token_id = t->token_id;
	return 1;
}

/* A LOGPROBS entry: the first of its token's, or the next of a chain (the same
 * request and token, right after one flagged continued). 0 or -EPROTO. */
static int logprobs_entry(struct allm_client *c, const struct allm_cqe *e)
{
	const struct allm_cqe_logprobs *l = &e->u.logprobs;
	if (c->lp_request && c->lp_more) {
		struct allm_logprobs *a = &c->lp_all;
		if (c->lp_request != e->request_id || l->index != a->index || l->sampled.token_id != a->sampled.token_id ||
		    a->n_top + l->n_top > ALLM_LOGPROBS_MAX)
			return -EPROTO;
		memcpy(a->top + a->n_top, l->top, l->n_top * sizeof(*l->top));
		a->n_top += l->n_top;
	} else {
		c->lp = *l;
		c->lp_all = (struct allm_logprobs){.index = l->index, .n_top = l->n_top, .sampled = l->sampled};
		memcpy(c->lp_all.top, l->top, l->n_top * sizeof(*l->top));
		c->lp_request = e->request_id;
	}
	c->lp_more = e->flags & ALLM_CQE_F_CONTINUED;
	return 0;
}

/* Turns one validated-or-not CQE into an event. Returns 1 (event), 0 (consumed,
 * no event yet), -EPROTO or -ENOMEM. */
static int handle_cqe(struct allm_client *c, const struct allm_cqe *e, struct allm_event *ev)
{
	if (validate_cqe(e))
		return -EPROTO;
	memset(ev, 0, sizeof(*ev));
	ev->user_tag = e->user_tag;
	ev->request_id = e->request_id;
	switch (e->kind) {
	case ALLM_CQE_ACCEPTED:
		/* The engine has copied the prompt out: its arena span is free again. */
		if (arena_free_tag(c, e->user_tag))
			return -EPROTO; /* accepted something we never submitted */
		ev->kind = ALLM_EVENT_ACCEPTED;
		return 1;
	case ALLM_CQE_LOGPROBS:
		return logprobs_entry(c, e);
	case ALLM_CQE_TOKEN: {
		ev->kind = ALLM_EVENT_TOKEN;
		int r = token_event(c, e, ev);
		if (r == 1 && c->lp_request == e->request_id) {
			if (c->lp_more)
				return -EPROTO; /* the rest of its alternatives never came */
			ev->logprobs = &c->lp; /* valid until the next call, as the rest */
			ev->all_logprobs = &c->lp_all;
			c->lp_request = 0;
		}
		return r;
	}
	default: { /* ALLM_CQE_FINAL */
		const struct allm_cqe_final *f = &e->u.final;
		struct allm_partial_piece *pp;
		if (c->lp_request == e->request_id) {
			c->lp_request = 0; /* its token never came: nothing to show */
			c->lp_more = false;
		}
		if (e->request_id == 0)
			arena_free_tag(c, e->user_tag); /* refused before acceptance */
		else if ((pp = find_partial(c, e->request_id)))
			drop_partial(c, pp); /* a piece cut short by the end: nothing to show */
		size_t n = strnlen(f->error, sizeof(f->error));
		memcpy(c->error, f->error, n);
		c->error[n] = '\0';
		ev->kind = ALLM_EVENT_FINAL;
		ev->finish_reason = e->finish_reason;
		ev->status = e->status;
		if (e->finish_reason == ALLM_FINISH_ERROR)
			ev->error = n ? c->error : "request failed";
#define COPY_(type, name, from, doc) ev->name = f->name;
		ALLM_FINAL_FIELDS(COPY_)
#undef COPY_
		return 1;
	}
	}
}

/* Pops entries until one makes an event. 1, 0 (ring empty), -EPROTO, -ENOMEM. */
static int next_event(struct allm_client *c, struct allm_event *ev)
{
	for (;;) {
		struct allm_cqe e;
		int r = allm_ring_pop(&c->cq, &e);
		if (r == -EAGAIN)
			return 0;
		if (r)
			return fail(c, -EPROTO);
		r = handle_cqe(c, &e, ev);
		if (r == -EPROTO)
			return fail(c, r);
		if (r)
			return r;
	}
}

/* --- waiting ---------------------------------------------------------------- */

static void disarm(struct allm_client *c)
{
	if (c->armed) {
		allm_ring_finish_sleep(&c->cq);
		c->armed = false;
	}
}

/* The ring looked empty: report a dead engine, or make sure the engine will ring
 * the CQ doorbell on its next entry. Returns 1 (an event after all), 0 (armed,
 * the doorbell holds no stale ring), or <0. */
static int on_empty(struct allm_client *c, struct allm_event *ev)
{
	int r;
	if (check_lease(c)) {
		/* Entries published just before the engine died still count. */
		if ((r = next_event(c, ev)) != 0)
			return r;
		return fail(c, -EPIPE);
	}
	/* Empty the doorbell before checking the ring (prepare_sleep re-checks it):
	 * a ring that comes after this drain is a real one, never lost. */
	allm_doorbell_drain(&c->cq_db, NULL);
	if (!c->armed) {
		if (allm_ring_prepare_sleep(&c->cq)) {
			c->armed = true;
			return 0;
		}
		/* entries arrived meanwhile (or the ring is corrupt: next_event says) */
	}
	if ((r = next_event(c, ev)) != 0) {
		disarm(c);
		return r;
	}
	return 0;
}

/* The caller's event is ev_size bytes (its build's struct allm_event): it gets
 * what fits of the whole one, and fields this library does not know (a newer
 * program's) read as zero. */
static int give_event(struct allm_event *ev, size_t ev_size, const struct allm_event *full, int r)
{
	if (r != 1)
		return r;
	memcpy(ev, full, ev_size < sizeof(*full) ? ev_size : sizeof(*full));
	if (ev_size > sizeof(*full))
		memset((char *)ev + sizeof(*full), 0, ev_size - sizeof(*full));
	return r;
}

static int poll_event(allm_client_t *c, struct allm_event *ev)
{
	int r;
	if (c->dead)
		return c->dead;
	if ((r = next_event(c, ev)) != 0) {
		if (r > 0)
			disarm(c);
		return r;
	}
	return on_empty(c, ev);
}

/* Returns 1, 0 or -errno; see client.h. */
int allm_client_poll_sized(allm_client_t *c, struct allm_event *ev, size_t ev_size)
{
	struct allm_event full;
	if (!c || !ev || ev_size < ALLM_EVENT_SIZE_VER0)
		return -EINVAL;
	return give_event(ev, ev_size, &full, poll_event(c, &full));
}

static int wait_event(allm_client_t *c, struct allm_event *ev, int timeout_ms)
{
	if (c->dead)
		return c->dead;
	uint64_t start = now_us();
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000u;
	uint64_t spin_end = start + (uint64_t)c->spin_us;
	int r;

	/* Spin: while tokens flow, the next entry is usually microseconds away and a
	 * sleep would cost two context switches. */
	for (;;) {
		if ((r = next_event(c, ev)) != 0) {
			if (r > 0)
				disarm(c);
			return r;
		}
		uint64_t t = now_us();
		if (t >= spin_end || t >= deadline)
			break;
		for (int i = 0; i < 64; i++)
			allm_cpu_relax();
	}
	/* Sleep on the doorbell and the lease until an entry, a hang-up or the end. */
	for (;;) {
		if ((r = on_empty(c, ev)) != 0)
			return r;
		uint64_t t = now_us();
		if (t >= deadline)
			return 0;
		int ms = -1;
		if (deadline != UINT64_MAX) {
			uint64_t left = (deadline - t + 999) / 1000;
			ms = left > INT32_MAX ? INT32_MAX : (int)left;
		}
		struct pollfd p[2] = {
			{ .fd = allm_doorbell_fd(&c->cq_db), .events = POLLIN },
			{ .fd = c->sock, .events = POLLIN },
		};
		if (poll(p, 2, ms) < 0) {
			if (errno == EINTR)
				return -EINTR;
			return -errno;
		}
		/* Whatever woke us (doorbell, hang-up, timeout), on_empty sorts it out. */
	}
}

/* Returns 1, 0, -EINTR or -errno; see client.h. */
int allm_client_wait_sized(allm_client_t *c, struct allm_event *ev, size_t ev_size, int timeout_ms)
{
	struct allm_event full;
	if (!c || !ev || ev_size < ALLM_EVENT_SIZE_VER0)
		return -EINVAL;
	return give_event(ev, ev_size, &full, wait_event(c, &full, timeout_ms));
}

const char *allm_finish_reason_name(int finish_reason)
{
	switch (finish_reason) {
	case ALLM_FINISH_NONE: return "none";
	case ALLM_FINISH_EOS: return "eos";
	case ALLM_FINISH_LENGTH: return "length";
	case ALLM_FINISH_STOP: return "stop";
	case ALLM_FINISH_CANCELLED: return "cancelled";
	case ALLM_FINISH_ERROR: return "error";
	default: return "unknown";
	}
}
