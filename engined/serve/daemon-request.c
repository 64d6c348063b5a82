/* allm-engined's request traffic: the SQ entries clients submit (copied out of
 * shared memory and validated before use: the segment is hostile, DESIGN §8)
 * become engine requests, and the engine's tokens and finishes become CQ entries,
 * with a bounded backlog for clients that stop draining. */
#include "daemon.h"

#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- CQEs ------------------------------------------------------------------------ */

/* Hands a CQE to the client: into the CQ when the backlog is empty and there is
 * room, else into the backlog. A backlog past ALLM_D_BACKLOG_MAX means the client
 * stopped draining: its requests are failed (their FINALs still fit, up to the
 * hard cap); tokens for a stalled client are dropped. */
static void emit(struct daemon *d, struct dclient *c, const struct allm_cqe *e)
{
	if (c->state != DC_READY)
		return;
	int r = c->bl_n == 0 ? allm_ring_push(&c->cq, e) : -EAGAIN;
	if (r == 0) {
		c->cq_pushed = true;
		return;
	}
	if (r == -EPROTO) {
		dlog(d, 1, "client %u: corrupt completion ring: disconnecting", c->id);
		c->state = DC_DEAD;
		return;
	}
	if (c->stalled && e->kind == ALLM_CQE_TOKEN)
		return;
	if (c->bl_n >= ALLM_D_BACKLOG_HARD)
		return;
	if (c->bl_n == c->bl_cap) {
		uint32_t cap = c->bl_cap ? c->bl_cap * 2 : 64;
		struct allm_cqe *b = allm_malloc((size_t)cap * sizeof(*b));
		if (!b)
			return;
		for (uint32_t i = 0; i < c->bl_n; i++)
			b[i] = c->backlog[(c->bl_head + i) % c->bl_cap];
		allm_free(c->backlog);
		c->backlog = b;
		c->bl_cap = cap;
		c->bl_head = 0;
	}
	c->backlog[(c->bl_head + c->bl_n) % c->bl_cap] = *e;
	c->bl_n++;
	if (c->bl_n > ALLM_D_BACKLOG_MAX && !c->stalled) {
		/* its requests are failed by daemon_flush(), outside the engine step
		 * that may be calling us */
		c->stalled = true;
		dlog(d, 1, "client %u stopped draining its completion queue: failing its requests", c->id);
	}
}

static void emit_final_error(struct daemon *d, struct dclient *c, uint64_t tag, int32_t status,
			     const char *msg)
{
	struct allm_cqe e;
	memset(&e, 0, sizeof(e));
	e.kind = ALLM_CQE_FINAL;
	e.finish_reason = ALLM_FINISH_ERROR;
	e.status = status;
	e.user_tag = tag;
	snprintf(e.u.final.error, sizeof(e.u.final.error), "%s", msg);
	emit(d, c, &e);
	c->rejected++;
}

/* A text piece as TOKEN entries: pieces longer than one entry are split on the
 * byte level with ALLM_CQE_F_CONTINUED on all but the last part. */
static void emit_text(struct daemon *d, struct dclient *c, const struct allm_request *r,
		      int32_t token, uint32_t index, const char *text, size_t len)
{
	struct allm_cqe e;
	do {
		size_t part = ALLM_MIN(len, (size_t)ALLM_CQE_TEXT_MAX);
		memset(&e, 0, sizeof(e));
		e.kind = ALLM_CQE_TOKEN;
		e.flags = part < len ? ALLM_CQE_F_CONTINUED : 0;
		e.text_len = (uint8_t)part;
		e.user_tag = ((struct dreq *)r->user)->user_tag;
		e.request_id = (uint64_t)r->id;
		e.u.token.token_id = token;
		e.u.token.index = index;
		memcpy(e.u.token.text, text, part);
		emit(d, c, &e);
		text += part;
		len -= part;
	} while (len > 0);
}

void daemon_on_token(void *user, struct allm_request *r, int32_t token)
{
	struct daemon *d = user;
	struct dreq *dr = r->user;
	char piece[1024];
	int n = 0;
	if (!dr->c)
		return;
	if (dr->detok) {
		n = allm_detok_push(dr->detok, token, piece, sizeof(piece));
		if (n < 0)
			n = 0;
	}
	emit_text(d, dr->c, r, token, dr->n_gen++, piece, (size_t)n);
}

static uint64_t us(double a, double b)
{
	return b > a ? (uint64_t)((b - a) * 1e6) : 0;
}

void daemon_on_finish(void *user, struct allm_request *r)
{
	struct daemon *d = user;
	struct dreq *dr = r->user;
	struct dclient *c = dr->c;
	if (c) {
		char piece[1024];
		int n = dr->detok ? allm_detok_flush(dr->detok, piece, sizeof(piece)) : 0;
		if (n > 0)
			emit_text(d, c, r, -1, dr->n_gen, piece, (size_t)n);
		struct allm_cqe e;
		memset(&e, 0, sizeof(e));
		e.kind = ALLM_CQE_FINAL;
		e.user_tag = dr->user_tag;
		e.request_id = (uint64_t)r->id;
		int32_t last = r->seq.n_tokens > r->seq.n_prompt ? r->seq.tokens[r->seq.n_tokens - 1] : -1;
		bool by_stop_id = false;
		for (int i = 0; i < r->n_stop; i++)
			by_stop_id |= r->stop_ids[i] == last;
		switch (r->finish_kind) {
		case ALLM_END_STOP: e.finish_reason = by_stop_id ? ALLM_FINISH_STOP : ALLM_FINISH_EOS; break;
		case ALLM_END_LENGTH: e.finish_reason = ALLM_FINISH_LENGTH; break;
		case ALLM_END_CANCELLED: e.finish_reason = ALLM_FINISH_CANCELLED; break;
		default:
			e.finish_reason = ALLM_FINISH_ERROR;
			e.status = -EIO;
			snprintf(e.u.final.error, sizeof(e.u.final.error), "%.63s",
				 c->stalled ? "client not draining its completion queue" : r->error);
		}
		if (c->stalled && r->finish_kind == ALLM_END_CANCELLED) {
			e.finish_reason = ALLM_FINISH_ERROR;
			e.status = -ENOBUFS;
			snprintf(e.u.final.error, sizeof(e.u.final.error),
				 "client not draining its completion queue");
		}
		e.u.final.queue_us = us(r->arrival, r->first_sched ? r->first_sched : r->finish);
		e.u.final.ttft_us = us(r->arrival, r->first_token ? r->first_token : r->finish);
		e.u.final.total_us = us(r->arrival, r->finish);
		e.u.final.n_prompt = (uint32_t)r->seq.n_prompt;
		e.u.final.n_generated = (uint32_t)allm_request_n_generated(r);
		e.u.final.n_preemptions = (uint32_t)(r->n_preempt_swap + r->n_preempt_recompute);
		emit(d, c, &e);
		c->inflight--;
	}
	allm_detok_free(dr->detok);
	allm_free(dr);
}

/* --- SQEs ------------------------------------------------------------------------ */

static void handle_submit(struct daemon *d, struct dclient *c, const struct allm_sqe *q)
{
	const struct allm_model_config *mc = &d->rt->model->cfg;
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0;
	if (d->draining)
		return emit_final_error(d, c, q->user_tag, -ESHUTDOWN, "engine shutting down");
	if (d->paused)
		return emit_final_error(d, c, q->user_tag, -EBUSY,
					"engine draining (allmctl drain): new requests refused");
	if (c->inflight >= ALLM_D_MAX_INFLIGHT)
		return emit_final_error(d, c, q->user_tag, -EAGAIN, "too many requests in flight");
	/* still not draining: no new work (its tokens would only be dropped) */
	if (c->stalled)
		return emit_final_error(d, c, q->user_tag, -ENOBUFS,
					"client not draining its completion queue");
	if (q->flags || q->n_stop > ALLM_SQE_MAX_STOP || q->max_tokens <= 0)
		return emit_final_error(d, c, q->user_tag, -EINVAL, "bad flags, n_stop or max_tokens");
	if (q->prompt_kind != ALLM_PROMPT_TEXT && q->prompt_kind != ALLM_PROMPT_TOKENS)
		return emit_final_error(d, c, q->user_tag, -EINVAL, "bad prompt_kind");
	/* bounds-checked copy out of the arena into private memory, before any use */
	if (allm_shm_arena_copy_out(c->seg, q->prompt_off, q->prompt_len, c->prompt_buf,
				    (size_t)c->seg->layout.arena_size))
		return emit_final_error(d, c, q->user_tag, -EINVAL, "prompt outside the arena");
	if (q->prompt_kind == ALLM_PROMPT_TOKENS) {
		if (q->prompt_len % 4 || q->prompt_len == 0)
			return emit_final_error(d, c, q->user_tag, -EINVAL, "token prompt length not a multiple of 4");
		n = q->prompt_len / 4;
		ids = allm_malloc(n * sizeof(int32_t));
		if (!ids)
			return emit_final_error(d, c, q->user_tag, -ENOMEM, "out of memory");
		memcpy(ids, c->prompt_buf, n * sizeof(int32_t));
	} else {
		if (!d->rt->tok)
			return emit_final_error(d, c, q->user_tag, -EINVAL, "model has no tokenizer: send token ids");
		if (allm_tokenizer_encode(d->rt->tok, (const char *)c->prompt_buf, q->prompt_len, true,
					  &ids, &n, &err))
			return emit_final_error(d, c, q->user_tag, -EINVAL, err.msg);
	}
	struct dreq *dr = allm_calloc(1, sizeof(*dr));
	if (!dr) {
		allm_free(ids);
		return emit_final_error(d, c, q->user_tag, -ENOMEM, "out of memory");
	}
	dr->c = c;
	dr->user_tag = q->user_tag;
	if (d->rt->tok && allm_detok_create(d->rt->tok, true, &dr->detok))
		dr->detok = NULL;
	struct allm_submit s = {
		.prompt = ids,
		.n_prompt = (int32_t)ALLM_MIN(n, (size_t)INT32_MAX),
		.max_tokens = ALLM_MIN(q->max_tokens, mc->max_pos),
		.sampling = {.temperature = q->temperature, .top_k = q->top_k > 0 ? q->top_k : 0,
			     .top_p = q->top_p, .seed = q->seed},
		.ignore_eos = q->ignore_eos != 0,
		.n_stop = (int32_t)q->n_stop,
		.tag = q->user_tag,
		.user = dr,
	};
	memcpy(s.stop_ids, q->stop_ids, sizeof(q->stop_ids));
	int64_t id;
	int r = allm_engine_submit(d->eng, &s, &id, &err);
	allm_free(ids);
	if (r) {
		allm_detok_free(dr->detok);
		allm_free(dr);
		return emit_final_error(d, c, q->user_tag, r, err.msg);
	}
	c->inflight++;
	c->submitted++;
	struct allm_cqe e;
	memset(&e, 0, sizeof(e));
	e.kind = ALLM_CQE_ACCEPTED;
	e.user_tag = q->user_tag;
	e.request_id = (uint64_t)id;
	emit(d, c, &e);
}

void daemon_handle_sqe(struct daemon *d, struct dclient *c, const struct allm_sqe *q)
{
	switch (q->opcode) {
	case ALLM_OP_NOP:
		return;
	case ALLM_OP_SUBMIT:
		return handle_submit(d, c, q);
	case ALLM_OP_CANCEL: {
		/* only the owner may cancel; an unknown id is a no-op */
		struct dreq *dr = q->request_id <= INT64_MAX
					  ? allm_engine_request_user(d->eng, (int64_t)q->request_id)
					  : NULL;
		if (dr && dr->c == c)
			allm_engine_cancel(d->eng, (int64_t)q->request_id);
		return;
	}
	default:
		return emit_final_error(d, c, q->user_tag, -EINVAL, "unknown opcode");
	}
}

void daemon_pump_sq(struct daemon *d)
{
	for (struct dclient *c = d->clients; c; c = c->next) {
		if (c->state != DC_READY)
			continue;
		struct allm_sqe q; /* a private copy: the slot itself is never read again */
		for (int i = 0; i < ALLM_D_SQ_BATCH; i++) {
			int r = allm_ring_pop(&c->sq, &q);
			if (r == -EAGAIN)
				break;
			if (r) {
				dlog(d, 1, "client %u: corrupt submission ring (%s): disconnecting", c->id,
				     strerror(-r));
				c->state = DC_DEAD;
				break;
			}
			daemon_handle_sqe(d, c, &q);
		}
	}
}

/* --- cancellation -------------------------------------------------------------- */

void daemon_cancel_requests(struct daemon *d, struct dclient *c)
{
	const struct allm_request *rs[256];
	enum allm_req_state qs[] = {ALLM_REQ_RUNNING, ALLM_REQ_SWAPPED, ALLM_REQ_WAITING};
	for (int q = 0; q < 3; q++) {
		int k;
		do {
			int64_t ids[256];
			int n = allm_engine_list(d->eng, qs[q], rs, 256);
			k = 0;
			for (int i = 0; i < n; i++) {
				const struct dreq *dr = rs[i]->user;
				if (dr && dr->c == c)
					ids[k++] = rs[i]->id;
			}
			for (int i = 0; i < k; i++)
				allm_engine_cancel(d->eng, ids[i]);
		} while (k > 0);
	}
}

