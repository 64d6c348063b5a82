/* allm-engined's request traffic: the SQ entries clients submit (refused by length
 * and by the caps before anything is copied, then copied out of shared memory and
 * validated before use: the segment is hostile, DESIGN §8) become engine requests,
 * and the engine's tokens and finishes become CQ entries, with a bounded backlog
 * for clients that stop draining. Every request is on its client's list (struct
 * dreq) from its acceptance until its FINAL is delivered: cancelling a client's
 * requests never scans the engine's queues, and a FINAL that finds no room waits
 * there instead of being lost. */
#include "daemon.h"

#include "shm-guard.h"
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- CQEs ------------------------------------------------------------------------ */

/* Doubles c's backlog array. 0 or -ENOMEM. */
static int backlog_grow(struct dclient *c)
{
	uint32_t cap = c->bl_cap ? c->bl_cap * 2 : 64;
	struct allm_cqe *b = allm_malloc((size_t)cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->bl_n; i++)
		b[i] = c->backlog[(c->bl_head + i) % c->bl_cap];
	allm_free(c->backlog);
	c->backlog = b;
	c->bl_cap = cap;
	c->bl_head = 0;
	return 0;
}

/* Hands a CQE to the client: into the CQ when the backlog is empty and there is
 * room, else into the backlog. A backlog past ALLM_D_BACKLOG_MAX means the client
 * stopped draining: its requests are failed (their FINALs still fit, up to the
 * hard cap); tokens for a stalled client are dropped. Returns 0 (delivered,
 * queued, or dropped on purpose) or -ENOSPC: an ACCEPTED or FINAL found no room
 * (hard cap reached, or no memory to grow) and the caller must keep it. */
static int emit(struct daemon *d, struct dclient *c, const struct allm_cqe *e)
{
	if (c->state != DC_READY)
		return 0; /* going away: nothing will read it */
	int r = c->bl_n == 0 ? allm_ring_push(&c->cq, e) : -EAGAIN;
	if (r == 0) {
		c->cq_pushed = true;
		return 0;
	}
	if (r == -EPROTO) {
		if (!allm_shm_guard_faulted(c->seg)) /* else daemon_flush says why */
			dlog(d, ALLM_LOG_WARN, "client %u: corrupt completion ring: disconnecting", c->id);
		c->state = DC_DEAD;
		return 0;
	}
	if (c->stalled && e->kind == ALLM_CQE_TOKEN)
		return 0;
	if (c->bl_n >= ALLM_D_BACKLOG_HARD || (c->bl_n == c->bl_cap && backlog_grow(c))) {
		if (e->kind != ALLM_CQE_TOKEN)
			return -ENOSPC;
		/* no memory for its tokens: fail its requests as if it had stalled */
		c->stalled = true;
		return 0;
	}
	c->backlog[(c->bl_head + c->bl_n) % c->bl_cap] = *e;
	c->bl_n++;
	if (c->bl_n > ALLM_D_BACKLOG_MAX && !c->stalled) {
		/* its requests are failed by daemon_flush(), outside the engine step
		 * that may be calling us */
		c->stalled = true;
		dlog(d, ALLM_LOG_WARN, "client %u stopped draining its completion queue: failing its requests", c->id);
	}
	return 0;
}

bool daemon_can_answer(struct dclient *c)
{
	if (c->bl_n == 0 && allm_ring_space(&c->cq) > 0)
		return true;
	if (c->bl_n >= ALLM_D_BACKLOG_HARD)
		return false;
	return c->bl_n < c->bl_cap || backlog_grow(c) == 0;
}

/* A submission refused before it became a request: one FINAL with request_id 0
 * (daemon_can_answer() made room for it before the SQE was taken). Returns -1. */
static int refuse(struct daemon *d, struct dclient *c, uint64_t tag, int32_t status,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int refuse(struct daemon *d, struct dclient *c, uint64_t tag, int32_t status,
		  const char *fmt, ...)
{
	struct allm_cqe e;
	memset(&e, 0, sizeof(e));
	e.kind = ALLM_CQE_FINAL;
	e.finish_reason = ALLM_FINISH_ERROR;
	e.status = status;
	e.user_tag = tag;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.u.final.error, sizeof(e.u.final.error), fmt, ap);
	va_end(ap);
	if (emit(d, c, &e))
		dlog(d, ALLM_LOG_ERROR, "client %u: no room for a refusal (tag %llu)", c->id, (unsigned long long)tag);
	c->rejected++;
	return -1;
}

/* A text piece as TOKEN entries: pieces longer than one entry are split on the
 * byte level with ALLM_CQE_F_CONTINUED on all but the last part. */
static void emit_text(struct daemon *d, struct dclient *c, const struct dreq *dr, int64_t id,
		      int32_t token, uint32_t index, const char *text, size_t len)
{
	struct allm_cqe e;
	do {
		size_t part = ALLM_MIN(len, (size_t)ALLM_CQE_TEXT_MAX);
		memset(&e, 0, sizeof(e));
		e.kind = ALLM_CQE_TOKEN;
		e.flags = part < len ? ALLM_CQE_F_CONTINUED : 0;
		e.text_len = (uint8_t)part;
		e.user_tag = dr->user_tag;
		e.request_id = (uint64_t)id;
		e.u.token.token_id = token;
		e.u.token.index = index;
		if (part)
			memcpy(e.u.token.text, text, part);
		emit(d, c, &e);
		text += part;
		len -= part;
	} while (len > 0);
}


/* The token's LOGPROBS entries, right before its TOKEN entries: one, or a
 * chain of them when it has more alternatives than one holds (protocol.h). */
static void emit_logprobs(struct daemon *d, struct dclient *c, const struct dreq *dr,
			  const struct allm_token_out *t, uint32_t index)
{
	int32_t from = 0;
	do {
		int32_t n = ALLM_MIN(t->lp->n_top - from, (int32_t)ALLM_CQE_LOGPROBS_TOP);
		struct allm_cqe e;
		memset(&e, 0, sizeof(e));
		e.kind = ALLM_CQE_LOGPROBS;
		e.flags = from + n < t->lp->n_top ? ALLM_CQE_F_CONTINUED : 0;
		e.user_tag = dr->user_tag;
		e.request_id = (uint64_t)t->id;
		e.u.logprobs.index = index;
		e.u.logprobs.n_top = (uint32_t)n;
		e.u.logprobs.sampled = (struct allm_logprob){t->lp->id, t->lp->logprob};
		for (int32_t i = 0; i < n; i++)
			e.u.logprobs.top[i] = (struct allm_logprob){t->lp->top_id[from + i], t->lp->top_logprob[from + i]};
		emit(d, c, &e);
		from += n;
	} while (from < t->lp->n_top);
}

void daemon_on_token(void *user, const struct allm_token_out *t)
{
	struct daemon *d = user;
	struct dreq *dr = t->user;
	int n = 0;
	if (!dr->c)
		return;
	if (t->lp)
		emit_logprobs(d, dr->c, dr, t, dr->n_gen);
	if (dr->detok) {
		/* piece_cap fits any token: only an id outside the vocabulary fails */
		n = allm_detok_push(dr->detok, t->token, d->piece, d->piece_cap);
		if (n < 0)
			n = 0;
	}
	emit_text(d, dr->c, dr, t->id, t->token, dr->n_gen++, d->piece, (size_t)n);
}

static uint64_t us(double a, double b)
{
	return b > a ? (uint64_t)((b - a) * 1e6) : 0;
}

/* --- the per-client list and the caps -------------------------------------------- */

static void link_req(struct dclient *c, struct dreq *dr)
{
	dr->c = c;
	dr->prev = NULL;
	dr->next = c->reqs;
	if (c->reqs)
		c->reqs->prev = dr;
	c->reqs = dr;
}

static void unlink_req(struct dclient *c, struct dreq *dr)
{
	if (dr->prev)
		dr->prev->next = dr->next;
	else
		c->reqs = dr->next;
	if (dr->next)
		dr->next->prev = dr->prev;
	dr->prev = dr->next = NULL;
}

/* What a request holds against the caps: +1 when accepted, -1 when it ends. */
static void account(struct daemon *d, struct dclient *c, struct duid *u, int64_t bytes, int sign)
{
	d->queued += sign;
	d->prompt_bytes += sign * bytes;
	if (u) {
		u->queued += sign;
		u->prompt_bytes += sign * bytes;
	}
	if (c) {
		c->inflight += sign;
		c->prompt_bytes += sign * bytes;
	}
}

static void free_req(struct dreq *dr)
{
	allm_detok_free(dr->detok);
	allm_free(dr);
}

void daemon_on_finish(void *user, const struct allm_result *res)
{
	struct daemon *d = user;
	struct dreq *dr = res->user;
	struct dclient *c = dr->c;
	dr->r = NULL;
	account(d, c, dr->acct, dr->prompt_bytes, -1);
	if (!c) {
		free_req(dr);
		return;
	}
	int n = dr->detok ? allm_detok_flush(dr->detok, d->piece, d->piece_cap) : 0;
	if (n > 0)
		emit_text(d, c, dr, res->id, -1, dr->n_gen, d->piece, (size_t)n);
	struct allm_cqe *e = &dr->final;
	memset(e, 0, sizeof(*e));
	e->kind = ALLM_CQE_FINAL;
	e->user_tag = dr->user_tag;
	e->request_id = (uint64_t)res->id;
	switch (res->end) {
	case ALLM_END_EOS: e->finish_reason = ALLM_FINISH_EOS; break;
	case ALLM_END_STOP_ID: e->finish_reason = ALLM_FINISH_STOP; break;
	case ALLM_END_LENGTH: e->finish_reason = ALLM_FINISH_LENGTH; break;
	case ALLM_END_CANCELLED: e->finish_reason = ALLM_FINISH_CANCELLED; break;
	default:
		e->finish_reason = ALLM_FINISH_ERROR;
		/* the engine's cause (the backend's errno, -ENOMEM, -E2BIG...), as it said it */
		e->status = res->status < 0 && res->status > -4096 ? res->status : -EIO;
		snprintf(e->u.final.error, sizeof(e->u.final.error), "%s",
			 c->stalled ? "client not draining its completion queue" : res->error);
	}
	if (c->stalled && res->end == ALLM_END_CANCELLED) {
		e->finish_reason = ALLM_FINISH_ERROR;
		e->status = -ENOBUFS;
		snprintf(e->u.final.error, sizeof(e->u.final.error),
			 "client not draining its completion queue");
	}
#define ALLM_FINAL_US(a, b) us(a, b)
#define FILL_(type, name, from, doc) e->u.final.name = from;
	ALLM_FINAL_FIELDS(FILL_)
#undef FILL_
	if (emit(d, c, e) == -ENOSPC) {
		/* a request always ends: this FINAL waits here for room (daemon_flush) */
		dr->owed = true;
		c->n_owed++;
		return;
	}
	unlink_req(c, dr);
	free_req(dr);
}

void daemon_push_owed(struct daemon *d, struct dclient *c)
{
	for (struct dreq *dr = c->reqs, *next; dr && c->n_owed > 0; dr = next) {
		next = dr->next;
		if (!dr->owed)
			continue;
		if (emit(d, c, &dr->final) == -ENOSPC)
			return;
		c->n_owed--;
		unlink_req(c, dr);
		free_req(dr);
	}
}

void daemon_cancel_requests(struct daemon *d, struct dclient *c, bool forget)
{
	for (struct dreq *dr = c->reqs, *next; dr; dr = next) {
		next = dr->next; /* on_finish frees dr (or keeps it, owed) */
		if (forget) {
			unlink_req(c, dr);
			if (dr->owed) { /* finished and counted already */
				c->n_owed--;
				free_req(dr);
				continue;
			}
			dr->c = NULL; /* on_finish settles its uid's and the engine's counts */
		}
		if (dr->r)
			allm_engine_cancel_req(d->eng, dr->r);
	}
}

/* --- SQEs ------------------------------------------------------------------------ */

void daemon_limits_default(struct daemon *d)
{
	d->max_clients = ALLM_D_MAX_CLIENTS;
	d->handshake_timeout = ALLM_D_HANDSHAKE_S;
	d->max_queued = ALLM_D_MAX_QUEUED;
	d->max_queued_uid = ALLM_D_MAX_QUEUED_UID;
	d->max_queued_client = ALLM_D_MAX_QUEUED_CLIENT;
	d->max_prompt_bytes = ALLM_D_MAX_PROMPT_BYTES;
	d->max_prompt_bytes_uid = ALLM_D_MAX_PROMPT_BYTES_UID;
}

/* Token prompts: the context bounds them; text: the context times the longest
 * token's text, so no text that could fit is refused, and copying or encoding one
 * is bounded by the model, not by the client's arena. */
int daemon_prompt_limits(struct daemon *d)
{
	const struct allm_model_config *mc = &d->rt->model->cfg;
	size_t ids = (size_t)(mc->max_pos > 1 ? mc->max_pos - 1 : 1) * sizeof(int32_t);
	d->max_text_bytes = 0;
	if (d->rt->tok) {
		/* a token of k bytes covers at most k bytes of text (plus what a
		 * normalizer may fold); the cap of 32 a token keeps encoding on the
		 * loop short for long-context models: a text averaging more than
		 * that per token is refused as too long */
		size_t per = ALLM_MIN(allm_tokenizer_max_token_bytes(d->rt->tok) + 4, (size_t)32);
		d->max_text_bytes = (size_t)mc->max_pos * per;
	}
	d->prompt_buf_cap = ALLM_MAX(ids, d->max_text_bytes);
	d->prompt_buf = allm_malloc(d->prompt_buf_cap);
	d->piece_cap = d->rt->tok ? allm_detok_piece_cap(d->rt->tok) : 1;
	d->piece = allm_malloc(d->piece_cap);
	/* 64 compiled grammars kept: an agent's few schemas compile once */
	if (d->rt->tok && (allm_grammar_vocab_from_tokenizer(d->rt->tok, &d->gvocab) ||
			   allm_grammar_cache_create(d->gvocab, 64, &d->grammars) ||
			   !(d->grammar_buf = allm_malloc(ALLM_GRAMMAR_TEXT_MAX))))
		return -ENOMEM;
	return d->prompt_buf && d->piece ? 0 : -ENOMEM;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* The caps on what is in flight (DESIGN §8): -EAGAIN refusals, which the gateway
 * answers with HTTP 429. bytes: the prompt's size as the engine will hold it.
 * Returns true when c may add one request of that size. */
static bool within_caps(struct daemon *d, struct dclient *c, uint64_t tag, int64_t bytes)
{
	const struct duid *u = c->acct;
	/* each message fits the 63 characters of a CQE */
	if (c->inflight >= d->max_queued_client)
		refuse(d, c, tag, -EAGAIN, "client: %lld requests in flight (--max-queued-per-client)",
		       (long long)c->inflight);
	else if (u->queued >= d->max_queued_uid)
		refuse(d, c, tag, -EAGAIN, "uid %u: %lld requests in flight (--max-queued-per-uid)",
		       (unsigned)u->uid, (long long)u->queued);
	else if (d->queued >= d->max_queued)
		refuse(d, c, tag, -EAGAIN, "engine: %lld requests in flight (--max-queued)",
		       (long long)d->queued);
	else if (u->prompt_bytes + bytes > d->max_prompt_bytes_uid)
		refuse(d, c, tag, -EAGAIN, "uid %u: prompt bytes at cap (--max-prompt-bytes-per-uid)",
		       (unsigned)u->uid);
	else if (d->prompt_bytes + bytes > d->max_prompt_bytes)
		refuse(d, c, tag, -EAGAIN, "engine: prompt bytes at cap (--max-prompt-bytes)");
	else
		return true;
	return false;
}

/* Checks a SUBMIT before any prompt byte is read: 0, or -1 with the refusal sent. */
static int precheck_submit(struct daemon *d, struct dclient *c, const struct allm_sqe *q)
{
	const struct allm_model_config *mc = &d->rt->model->cfg;
	uint64_t t = q->user_tag;
	if (d->draining)
		return refuse(d, c, t, -ESHUTDOWN, "engine shutting down");
	if (d->paused)
		return refuse(d, c, t, -EBUSY, "engine draining (allmctl drain): new requests refused");
	/* still not draining: no new work (its tokens would only be dropped) */
	if (c->stalled)
		return refuse(d, c, t, -ENOBUFS, "client not draining its completion queue");
	if (q->flags)
		return refuse(d, c, t, -EINVAL, "bad flags");
	if (q->params_size < ALLM_PARAMS_SIZE_VER0 || q->params_size > ALLM_PARAMS_SIZE_MAX)
		return refuse(d, c, t, q->params_size > ALLM_PARAMS_SIZE_MAX ? -E2BIG : -EINVAL,
			      "params of %u bytes (want %d..%d)", q->params_size, ALLM_PARAMS_SIZE_VER0,
			      ALLM_PARAMS_SIZE_MAX);
	if (q->n_logit_bias > ALLM_LOGIT_BIAS_MAX)
		return refuse(d, c, t, -EINVAL, "logit_bias takes at most %d tokens (got %u)", ALLM_LOGIT_BIAS_MAX,
			      q->n_logit_bias);
	if (q->prompt_kind != ALLM_PROMPT_TEXT && q->prompt_kind != ALLM_PROMPT_TOKENS)
		return refuse(d, c, t, -EINVAL, "bad prompt_kind");
	/* by length, before one byte is copied or tokenized (DESIGN §8) */
	if (q->prompt_kind == ALLM_PROMPT_TOKENS) {
		if (q->prompt_len % 4 || q->prompt_len == 0)
			return refuse(d, c, t, -EINVAL, "token prompt length not a multiple of 4");
		if (q->prompt_len / 4 >= (uint32_t)mc->max_pos)
			return refuse(d, c, t, -E2BIG, "prompt of %u tokens: the context is %d",
						q->prompt_len / 4, mc->max_pos);
	} else {
		if (!d->rt->tok)
			return refuse(d, c, t, -EINVAL, "model has no tokenizer: send token ids");
		if (q->prompt_len > d->max_text_bytes)
			return refuse(d, c, t, -E2BIG, "text of %u bytes cannot fit %d tokens (max %zu B)",
						q->prompt_len, mc->max_pos, d->max_text_bytes);
	}
	/* a text's size in tokens is known after encoding; until then its bytes
	 * bound it (a token covers at least one byte, plus BOS) */
	int64_t est = q->prompt_kind == ALLM_PROMPT_TOKENS ? q->prompt_len : 0;
	return within_caps(d, c, t, est) ? 0 : -1;
}

/* The parameters of a SUBMIT, out of the arena into s (a copy in this build's
 * layout, checked against the table) and its logit bias entries into bias[]: 0,
 * or -1 with the refusal sent. */
static int read_params(struct daemon *d, struct dclient *c, const struct allm_sqe *q, struct allm_submit *s,
		       struct allm_logit_bias *bias)
{
	uint8_t raw[ALLM_PARAMS_SIZE_MAX];
	char why[ALLM_CQE_ERROR_MAX];
	int r;
	uint64_t at = allm_sqe_params_off(q->prompt_off, q->prompt_len);
	if (allm_shm_arena_copy_out(c->seg, at, q->params_size, raw, sizeof(raw)))
		return refuse(d, c, q->user_tag, -EINVAL, "params outside the arena");
	if ((r = allm_params_from_wire(&s->params, raw, q->params_size, why, sizeof(why))) ||
	    (r = allm_params_check(&s->params, why, sizeof(why))))
		return refuse(d, c, q->user_tag, r, "%s", why);
	if (q->n_logit_bias) {
		at = allm_logit_bias_off(q->prompt_off, q->prompt_len, q->params_size);
		if (allm_shm_arena_copy_out(c->seg, at, (uint64_t)q->n_logit_bias * sizeof(*bias), bias,
					    ALLM_LOGIT_BIAS_MAX * sizeof(*bias)))
			return refuse(d, c, q->user_tag, -EINVAL, "logit_bias entries outside the arena");
		s->bias = bias;
		s->n_bias = q->n_logit_bias; /* the engine's submit checks them */
	}
	if (q->grammar_len > ALLM_GRAMMAR_TEXT_MAX)
		return refuse(d, c, q->user_tag, -E2BIG, "grammar text of %u bytes (at most %u)", q->grammar_len,
			      ALLM_GRAMMAR_TEXT_MAX);
	if (q->grammar_len && !s->params.grammar_kind)
		return refuse(d, c, q->user_tag, -EINVAL, "grammar text without params.grammar_kind");
	if (s->params.grammar_kind) {
		struct allm_err err = { { 0 } };
		if (!d->grammars)
			return refuse(d, c, q->user_tag, -EINVAL, "model has no tokenizer: grammars need one");
		at = allm_grammar_text_off(q->prompt_off, q->prompt_len, q->params_size, q->n_logit_bias);
		if (q->grammar_len && allm_shm_arena_copy_out(c->seg, at, q->grammar_len, d->grammar_buf,
							      ALLM_GRAMMAR_TEXT_MAX))
			return refuse(d, c, q->user_tag, -EINVAL, "grammar text outside the arena");
		/* compiled here, on the loop: a grammar that does not compile is the
		 * request's error, naming the place; the cache makes a repeated
		 * grammar free */
		if ((r = allm_grammar_cache_get(d->grammars, (int)s->params.grammar_kind, d->grammar_buf,
						q->grammar_len, &s->grammar, &err)))
			return refuse(d, c, q->user_tag, r, "%s", err.msg); /* names its kind */
	}
	return 0;
}

static int submit_read(struct daemon *d, struct dclient *c, const struct allm_sqe *q, struct allm_submit *sp);

static int handle_submit(struct daemon *d, struct dclient *c, const struct allm_sqe *q)
{
	struct allm_logit_bias bias[ALLM_LOGIT_BIAS_MAX];
	struct allm_submit s = {.tag = q->user_tag, .cache_uid = (uint32_t)c->acct->uid};
	if (precheck_submit(d, c, q) || read_params(d, c, q, &s, bias))
		return -1;
	int r = submit_read(d, c, q, &s);
	allm_grammar_unref(s.grammar); /* the request holds its own reference */
	return r;
}

/* The rest of a SUBMIT, its parameters read into *sp: the prompt, then the engine. */
static int submit_read(struct daemon *d, struct dclient *c, const struct allm_sqe *q, struct allm_submit *sp)
{
	const struct allm_model_config *mc = &d->rt->model->cfg;
	struct allm_err err = {{0}};
	struct allm_submit s = *sp;
	int32_t *ids = NULL;
	size_t n = 0;
	/* the engine bounds the length by the context itself; this keeps
	 * n_prompt + max_tokens within int32_t for whoever adds them */
	s.params.max_tokens = ALLM_MIN(s.params.max_tokens, mc->max_pos);
	s.params.min_tokens = ALLM_MIN(s.params.min_tokens, s.params.max_tokens);
	/* bounds-checked copy out of the arena into private memory, before any use */
	if (allm_shm_arena_copy_out(c->seg, q->prompt_off, q->prompt_len, d->prompt_buf, d->prompt_buf_cap))
		return refuse(d, c, q->user_tag, -EINVAL, "prompt outside the arena");
	if (q->prompt_kind == ALLM_PROMPT_TOKENS) {
		n = q->prompt_len / 4;
		ids = allm_malloc(n * sizeof(int32_t));
		if (!ids)
			return refuse(d, c, q->user_tag, -ENOMEM, "out of memory");
		memcpy(ids, d->prompt_buf, n * sizeof(int32_t));
	} else {
		if (allm_tokenizer_encode(d->rt->tok, (const char *)d->prompt_buf, q->prompt_len, true,
					  &ids, &n, &err))
			return refuse(d, c, q->user_tag, -EINVAL, "%s", err.msg);
		if (!within_caps(d, c, q->user_tag, (int64_t)(n * sizeof(int32_t)))) {
			allm_free(ids);
			return -1;
		}
	}
	struct dreq *dr = allm_calloc(1, sizeof(*dr));
	if (!dr) {
		allm_free(ids);
		return refuse(d, c, q->user_tag, -ENOMEM, "out of memory");
	}
	dr->user_tag = q->user_tag;
	dr->prompt_bytes = (int64_t)(n * sizeof(int32_t));
	/* text events continue the prompt's text (a leading space kept) */
	if (d->rt->tok && (allm_detok_create(d->rt->tok, true, &dr->detok) ||
			   allm_detok_prime(dr->detok, ids, n))) {
		allm_detok_free(dr->detok);
		dr->detok = NULL;
	}
	s.prompt = ids;
	s.n_prompt = (int32_t)ALLM_MIN(n, (size_t)INT32_MAX);
	s.user = dr;
	int r = allm_engine_submit_req(d->eng, &s, &dr->r, &err);
	allm_free(ids);
	if (r) {
		free_req(dr);
		return refuse(d, c, q->user_tag, r, "%s", err.msg);
	}
	dr->id = dr->r->id;
	dr->acct = c->acct;
	link_req(c, dr);
	account(d, c, c->acct, dr->prompt_bytes, +1);
	c->submitted++;
	struct allm_cqe e;
	memset(&e, 0, sizeof(e));
	e.kind = ALLM_CQE_ACCEPTED;
	e.user_tag = q->user_tag;
	e.request_id = (uint64_t)dr->id;
	if (emit(d, c, &e))
		dlog(d, ALLM_LOG_ERROR, "client %u: no room for an ACCEPTED (request %lld)", c->id, (long long)dr->id);
	return 0;
}

void daemon_handle_sqe(struct daemon *d, struct dclient *c, const struct allm_sqe *q)
{
	/* reserved bytes are zero, so a later ABI version can give them a meaning */
	if (!all_zero(q->reserved, sizeof(q->reserved)) || q->reserved0 || q->reserved1 ||
	    (q->opcode != ALLM_SQE_OP_SUBMIT && (q->params_size || q->n_logit_bias || q->grammar_len))) {
		refuse(d, c, q->user_tag, -EINVAL, "reserved SQE bytes must be zero");
		return;
	}
	switch (q->opcode) {
	case ALLM_SQE_OP_NOP:
		return;
	case ALLM_SQE_OP_SUBMIT:
		handle_submit(d, c, q);
		return;
	case ALLM_SQE_OP_CANCEL:
		/* only the owner may cancel, so only its own list is searched; an
		 * unknown id is a no-op */
		for (struct dreq *dr = c->reqs; dr; dr = dr->next)
			if (dr->r && (uint64_t)dr->id == q->request_id) {
				allm_engine_cancel_req(d->eng, dr->r);
				break;
			}
		return;
	default:
		refuse(d, c, q->user_tag, -EINVAL, "unknown opcode");
	}
}

void daemon_pump_sq(struct daemon *d)
{
	for (struct dclient *c = d->clients; c; c = c->next) {
		if (c->state != DC_READY)
			continue;
		struct allm_sqe q; /* a private copy: the slot itself is never read again */
		/* an SQE is taken only when its answer has room: a client that does
		 * not drain its CQ is not read either, and its SQ fills */
		for (int i = 0; i < ALLM_D_SQ_BATCH && daemon_can_answer(c); i++) {
			int r = allm_ring_pop(&c->sq, &q);
			if (allm_shm_guard_faulted(c->seg))
				break; /* truncated: what we read is zeros; daemon_flush drops it */
			if (r == -EAGAIN)
				break;
			if (r) {
				dlog(d, ALLM_LOG_WARN, "client %u: corrupt submission ring (%s): disconnecting", c->id,
				     strerror(-r));
				c->state = DC_DEAD;
				break;
			}
			daemon_handle_sqe(d, c, &q);
		}
	}
}
