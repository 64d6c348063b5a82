/* A streamed answer (server-sent events) of one generation request and its
 * choices: each choice's token pieces as chunks by index, their finishes, usage
 * and [DONE]; an error event when a choice fails. libmicrohttpd pulls it
 * (stream_read); with nothing to send the connection is suspended until the
 * pump resumes it. */
#include "gw-stream.h"

#include "gw-openai.h"
#include "gw-pump.h"
#include "gw-tools.h"

#include <stdlib.h>
#include <string.h>

/* libmicrohttpd's block for the callback's reads; each connection's memory pool
 * (gw-http.c) must hold it. */
#define GW_SSE_BLOCK (8 * 1024)

/* Where a stream is with one choice. */
struct gw_stream_choice {
	bool role_sent;     /* chat: its first chunk (role) went out */
	size_t pieces_sent; /* text pieces (one per token, a flush last) sent so far */
	size_t text_sent;   /* and their bytes (completions' text_offset) */
	bool echo_sent;     /* completions' echo: the prompt's chunk went out */
	bool finish_sent;   /* its last chunk (finish_reason) went out */
	bool tp_on;         /* a chat with tools: its text goes through tp */
	struct gw_tool_parse tp; /* ... which holds what may be a call until it is known */
};

/* A streamed response: its own reference to each choice, because libmicrohttpd
 * may destroy the response after the request's completion callback. */
struct gw_stream {
	struct gw *gw;
	struct gw_req *r; /* the lead */
	struct MHD_Connection *conn;
	char *buf;        /* formatted events not yet handed over */
	size_t len, cap, off;
	struct gw_stream_choice *cs; /* one per choice */
	bool ended;       /* [DONE] is in buf */
};

/* What one choice has for the stream, copied under the lock. */
struct gw_pending {
	char *text;
	size_t n, *ends, n_pieces;
	struct gw_lps lp; /* the pieces' tokens' (fewer when the engine sent none) */
	int32_t lp_prev;
	bool done;
	int finish;
};

/* Under lock: takes what choice r has that the stream has not sent (out of
 * memory: nothing, and not done, so it is tried again later). */
static void take_pending(struct gw_req *r, const struct gw_stream_choice *st, struct gw_pending *p)
{
	p->done = r->phase == GW_DONE;
	p->finish = r->finish;
	p->lp_prev = -1;
	if (r->out.ready == 0 && r->out.n_ends == 0)
		return;
	p->n = r->out.ready;
	p->text = malloc(p->n + 1);
	p->ends = malloc((r->out.n_ends + 1) * sizeof(*p->ends));
	if (!p->text || !p->ends) {
		p->n = 0;
		p->done = false;
		return;
	}
	memcpy(p->text, r->out.buf, p->n);
	p->n_pieces = gw_text_pieces(&r->out, p->ends);
	gw_text_consume(&r->out);
	/* piece k is token k's text (the decoder's flush, last, has none) */
	size_t at = st->pieces_sent;
	gw_lps_copy(&p->lp, &r->lps, at, at < r->lps.n ? ALLM_MIN(p->n_pieces, r->lps.n - at) : 0);
	p->lp_prev = at > 0 && at - 1 < r->lps.n ? gw_lps_at(&r->lps, at - 1)->token_id : gw_api_last_prompt_id(r);
}

/* put_choice for a chat with tools: content as it is known not to start a call,
 * then each call as OpenAI streams them (index, id, type and name first, then
 * the arguments), finish_reason "tool_calls" after calls. */
static int put_tools(struct gw_stream *s, struct gw_req *r, struct gw_stream_choice *st, const struct gw_pending *p,
		     bool failed)
{
	const char *content;
	size_t n;
	uint32_t first;
	int rc = 0;
	bool end = p->done && !failed;
	if (!st->tp_on) {
		gw_tool_parse_init(&st->tp, (enum gw_tool_format)r->tool_format, r->tools_one);
		st->tp_on = true;
	}
	if (gw_tool_parse_feed(&st->tp, p->text ? p->text : "", p->n, end, &content, &n, &first))
		return -1;
	if (!st->role_sent) { /* at once, as without tools: the client sees the answer started */
		rc |= gw_api_sse_chunk(r, true, "", 0, NULL, NULL, &s->buf, &s->len, &s->cap);
		st->role_sent = true;
	}
	if (n)
		rc |= gw_api_sse_chunk(r, false, content, n, NULL, NULL, &s->buf, &s->len, &s->cap);
	for (uint32_t i = first; i < st->tp.n_calls; i++) {
		rc |= gw_api_sse_tool_delta(r, false, gw_tool_call_delta_json(&st->tp.calls[i], i, true), &s->buf,
					    &s->len, &s->cap);
		rc |= gw_api_sse_tool_delta(r, false, gw_tool_call_delta_json(&st->tp.calls[i], i, false), &s->buf,
					    &s->len, &s->cap);
	}
	st->pieces_sent += p->n_pieces;
	st->text_sent += p->n;
	if (p->done && !failed && !st->finish_sent) {
		rc |= gw_api_sse_chunk(r, false, NULL, 0, NULL, gw_api_finish_name(p->finish, st->tp.n_calls > 0),
				       &s->buf, &s->len, &s->cap);
		st->finish_sent = true;
	}
	return rc;
}

/* Formats choice r's pending pieces (and its finish, once done) into s->buf. */
static int put_choice(struct gw_stream *s, struct gw_req *r, struct gw_stream_choice *st,
		      const struct gw_pending *p, bool failed)
{
	/* one event per token's text, as OpenAI and vLLM send them (clients count
	 * events); chat's first event also carries the role */
	int rc = 0;
	size_t at = 0;
	if (r->tools_on)
		return put_tools(s, r, st, p, failed);
	if (r->echo && !st->echo_sent) { /* the prompt first, as vLLM streams an echo */
		rc |= gw_api_sse_chunk(r, false, r->echo, r->echo_len, NULL, NULL, &s->buf, &s->len, &s->cap);
		st->echo_sent = true;
	}
	if (r->chat && !st->role_sent && p->n_pieces == 0) {
		rc |= gw_api_sse_chunk(r, true, "", 0, NULL, NULL, &s->buf, &s->len, &s->cap);
		st->role_sent = true;
	}
	for (size_t i = 0; i < p->n_pieces; i++) {
		size_t off = st->text_sent + at;
		json_t *lj = i < p->lp.n ? gw_api_logprobs_json(r, &p->lp, i, 1, p->lp_prev, &off) : NULL;
		rc |= gw_api_sse_chunk(r, r->chat && !st->role_sent, p->text + at, p->ends[i] - at, lj, NULL,
				       &s->buf, &s->len, &s->cap);
		st->role_sent = true;
		at = p->ends[i];
	}
	st->pieces_sent += p->n_pieces;
	st->text_sent += at;
	if (p->done && !failed && !st->finish_sent) {
		rc |= gw_api_sse_chunk(r, false, NULL, 0, NULL, gw_api_finish_name(p->finish, false), &s->buf, &s->len,
				       &s->cap);
		st->finish_sent = true;
	}
	return rc;
}

static void pending_free(struct gw_pending *p, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		free(p[k].text);
		free(p[k].ends);
		gw_lps_free(&p[k].lp);
	}
	free(p);
}

/* Formats what the request's choices have for the stream into s->buf. Returns 1
 * when there was something (or the end), 0 when the connection was suspended to
 * wait, -1 when the client is gone. */
static int stream_fill(struct gw_stream *s, struct MHD_Connection *c)
{
	struct gw *gw = s->gw;
	struct gw_req *lead = s->r;
	uint32_t n = lead->n_choices;
	struct gw_pending *p = calloc(n, sizeof(*p));
	struct gw_api_err e = {0};
	uint32_t np = 0, ng = 0, nc = 0;
	bool any = false, all_done = true;
	if (!p)
		return -1;
	pthread_mutex_lock(&gw->lock);
	if (lead->hung_up) {
		pthread_mutex_unlock(&gw->lock);
		free(p);
		return -1;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct gw_req *r = gw_choice(lead, k);
		take_pending(r, &s->cs[k], &p[k]);
		any |= p[k].n_pieces > 0 || (p[k].done && !s->cs[k].finish_sent);
		all_done &= p[k].done;
		if (gw_prompt_first(r))
			np += r->n_prompt, nc += r->n_cached;
		ng += r->n_generated;
		if (p[k].done && r->http_status && !e.status)
			gw_api_fail(&e, r->http_status, r->err_type, NULL, NULL, "%s", r->err);
	}
	if (!any) {
		/* nothing yet: the pump resumes us when tokens come */
		lead->suspended = true;
		MHD_suspend_connection(c);
		pthread_mutex_unlock(&gw->lock);
		pending_free(p, n);
		gw_wake_pump(gw); /* so it watches this socket for a hang-up */
		return 0;
	}
	pthread_mutex_unlock(&gw->lock);

	int rc = 0;
	for (uint32_t k = 0; k < n; k++)
		rc |= put_choice(s, gw_choice(lead, k), &s->cs[k], &p[k], e.status != 0);
	pending_free(p, n);
	/* a failed choice ends the stream (the others are cancelled at its end) */
	if (e.status || all_done) {
		if (e.status)
			rc |= gw_api_sse_error(&e, &s->buf, &s->len, &s->cap);
		else if (lead->include_usage)
			rc |= gw_api_sse_usage(lead, np, ng, nc, &s->buf, &s->len, &s->cap);
		rc |= gw_api_sse_done(&s->buf, &s->len, &s->cap);
		s->ended = true;
	}
	return rc ? -1 : 1;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct gw_stream *s = cls;
	/* a fill may format nothing (a tool call's text held): fill again, which
	 * suspends when nothing is pending */
	while (s->off == s->len) {
		if (s->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		s->off = s->len = 0;
		int r = stream_fill(s, s->conn);
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r == 0)
			return 0; /* suspended: called again once resumed */
	}
	size_t n = s->len - s->off < max ? s->len - s->off : max;
	memcpy(out, s->buf + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

/* Under lock: the stream's references to every choice (the lead last). */
static void stream_unref_locked(struct gw_stream *s)
{
	gw_req_drop_choices_locked(s->gw, s->r);
}

static void stream_free(void *cls)
{
	struct gw_stream *s = cls;
	for (uint32_t i = 0; i < s->r->n_choices; i++) /* before the choices may go */
		gw_tool_parse_free(&s->cs[i].tp);
	pthread_mutex_lock(&s->gw->lock);
	stream_unref_locked(s);
	pthread_mutex_unlock(&s->gw->lock);
	free(s->buf);
	free(s->cs);
	free(s);
}

enum MHD_Result gw_stream_start(struct gw *gw, struct MHD_Connection *c, struct gw_req *lead)
{
	struct gw_stream *s = calloc(1, sizeof(*s));
	if (!s || !(s->cs = calloc(lead->n_choices, sizeof(*s->cs)))) {
		free(s);
		return MHD_NO;
	}
	s->gw = gw;
	s->conn = c;
	s->r = lead;
	pthread_mutex_lock(&gw->lock);
	gw_req_hold_choices_locked(s->r);
	pthread_mutex_unlock(&gw->lock);
	struct MHD_Response *res =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, GW_SSE_BLOCK, stream_read, s, stream_free);
	if (!res) {
		stream_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	MHD_add_response_header(res, "X-Accel-Buffering", "no"); /* nginx: do not buffer */
	gw_cors_answer(&gw->o.cors, c, res);
	enum MHD_Result ok = MHD_queue_response(c, 200, res);
	MHD_destroy_response(res);
	return ok;
}

