/* The whole (non-streamed) answer of a finished request, written as the client
 * reads it. A request of n = 128 with 10 log-probabilities a token and 480 tokens
 * answers 17 MB of JSON; built at once, under the lock the pump needs, it stopped
 * the pump from draining the engine's completion queue until the engine failed
 * the gateway's every request (issue 37 item 1). Here nothing is built under the
 * lock (the choices are DONE: nobody writes them any more), and the JSON is made
 * one element at a time, as libmicrohttpd asks for more: the gateway holds the
 * choices' raw tokens (bounded by GW_MAX_LOGPROB_ENTRIES) and one small buffer,
 * never the document. An answer that fits GW_BODY_INLINE goes out whole, with a
 * Content-Length, as before.
 *
 * The bytes are those jansson's JSON_COMPACT makes of the same objects: every
 * element is a jansson value dumped alone, and the punctuation between them is
 * what jansson writes. */
#include "gw-body.h"

#include "gw-openai.h"
#include "gw-pump.h"
#include "gw-tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An answer up to this size is sent whole, with its length (the usual case). */
#define GW_BODY_INLINE (64 * 1024)
/* libmicrohttpd's block for the callback's reads (each connection's memory pool,
 * gw-http.c, must hold it). */
#define GW_BODY_BLOCK (16 * 1024)

/* Where the writer is: the document is head, choices, tail; a choice is its
 * opening (index, text), its log-probabilities section by section, token by
 * token, and its end (finish_reason). */
enum body_part {
	B_HEAD,
	B_CHOICE,      /* a choice's opening, up to "logprobs": */
	B_LP_TOKENS,   /* completions: "tokens" */
	B_LP_VALUES,   /* completions: "token_logprobs" */
	B_LP_TOPS,     /* completions: "top_logprobs" */
	B_LP_OFFSETS,  /* completions: "text_offset" */
	B_LP_CHAT,     /* chat: "content" */
	B_CHOICE_END,
	B_TAIL,
	B_END,
};

struct gw_body {
	struct gw *gw;
	struct gw_req *lead;  /* a reference to each choice while the body lives */
	struct gw_toktext tt; /* decodes tokens of the current choice's model */
	enum body_part part;
	uint32_t choice;      /* current choice */
	size_t tok;           /* current token in a log-probability section */
	bool called;          /* the current choice called tools (finish_reason tool_calls) */
	char *buf;            /* made, not yet handed over: buf[off, len) */
	size_t len, cap, off;
};

static int put(struct gw_body *b, const char *s, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		char *p = realloc(b->buf, cap);
		if (!p)
			return -1;
		b->buf = p;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	return 0;
}

static int puts_(struct gw_body *b, const char *s)
{
	return put(b, s, strlen(s));
}

/* j dumped compactly (j is consumed; NULL: out of memory). */
static int put_json(struct gw_body *b, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	json_decref(j);
	int r = s ? puts_(b, s) : -1;
	free(s);
	return r;
}

static int put_fmt(struct gw_body *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put_fmt(struct gw_body *b, const char *fmt, ...)
{
	char s[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= sizeof(s) ? -1 : put(b, s, (size_t)n);
}

static const struct gw_req *cur(const struct gw_body *b)
{
	return gw_choice(b->lead, b->choice);
}

/* A chat choice with tools: "message":{"role", "content" (null when it is only
 * calls), "tool_calls"},"logprobs":null (refused with tools: gw-tools.c). */
static int tool_message(struct gw_body *b, const struct gw_req *r)
{
	struct gw_tool_parse p;
	const char *content;
	size_t n;
	uint32_t first;
	gw_tool_parse_init(&p, (enum gw_tool_format)r->tool_format, r->tools_one);
	int rc = gw_tool_parse_feed(&p, r->out.buf ? r->out.buf : "", r->out.ready, true, &content, &n, &first);
	json_t *msg = rc ? NULL : json_pack("{s:s, s:o}", "role", "assistant", "content",
					   n || !p.n_calls ? gw_api_text_json(content, n) : json_null());
	if (msg && p.n_calls) {
		json_t *l = json_array();
		for (uint32_t i = 0; i < p.n_calls; i++)
			json_array_append_new(l, gw_tool_call_json(&p.calls[i]));
		json_object_set_new(msg, "tool_calls", l);
	}
	b->called = p.n_calls > 0;
	gw_tool_parse_free(&p);
	rc = puts_(b, "\"message\":") | put_json(b, msg) | puts_(b, ",\"logprobs\":null");
	b->part = B_CHOICE_END;
	return rc;
}

/* {"index":i,"text":"..." or "message":{...},"logprobs": */
static int choice_open(struct gw_body *b)
{
	const struct gw_req *r = cur(b);
	json_t *text;
	if (r->echo) { /* completions' echo: the prompt, then the output */
		char *both = malloc(r->echo_len + r->out.ready + 1);
		if (both) {
			memcpy(both, r->echo, r->echo_len);
			memcpy(both + r->echo_len, r->out.buf ? r->out.buf : "", r->out.ready);
		}
		text = both ? gw_api_text_json(both, r->echo_len + r->out.ready) : NULL;
		free(both);
	} else {
		text = gw_api_text_json(r->out.buf ? r->out.buf : "", r->out.ready);
	}
	int rc = put_fmt(b, "%s{\"index\":%u,", b->choice ? "," : "", r->index);
	b->called = false;
	if (r->tools_on) {
		json_decref(text);
		return tool_message(b, r) | rc;
	}
	if (r->chat)
		rc |= puts_(b, "\"message\":{\"role\":\"assistant\",\"content\":") | put_json(b, text) | puts_(b, "},");
	else
		rc |= puts_(b, "\"text\":") | put_json(b, text) | puts_(b, ",");
	rc |= puts_(b, "\"logprobs\":");
	b->tok = 0;
	if (r->params.logprobs <= 0) {
		rc |= puts_(b, "null");
		b->part = B_CHOICE_END;
	} else {
		rc |= puts_(b, r->chat ? "{\"content\":[" : "{\"tokens\":[");
		b->part = r->chat ? B_LP_CHAT : B_LP_TOKENS;
	}
	return rc;
}

/* Where token i's text starts in the choice's text: its piece's (out.ends). */
static size_t text_offset(const struct gw_req *r, size_t i)
{
	size_t at = i == 0 ? 0 : i - 1 < r->out.n_ends ? r->out.ends[i - 1] : r->out.ready;
	return ALLM_MIN(at, r->out.ready);
}

/* One token of the current log-probability section, or the section's end. */
static int lp_step(struct gw_body *b)
{
	const struct gw_req *r = cur(b);
	const struct gw_lps *l = &r->lps;
	int32_t prev = gw_api_last_prompt_id(r);
	size_t i = b->tok;
	if (i == l->n) { /* the section ends; the next one opens */
		static const char *const next[] = {
			[B_LP_TOKENS] = "],\"token_logprobs\":[",
			[B_LP_VALUES] = "],\"top_logprobs\":[",
			[B_LP_TOPS] = "],\"text_offset\":[",
			[B_LP_OFFSETS] = "]}",
			[B_LP_CHAT] = "]}",
		};
		int rc = puts_(b, next[b->part]);
		b->part = b->part == B_LP_OFFSETS || b->part == B_LP_CHAT ? B_CHOICE_END : b->part + 1;
		b->tok = 0;
		return rc;
	}
	int rc = i ? puts_(b, ",") : 0;
	switch (b->part) {
	case B_LP_TOKENS: rc |= put_json(b, gw_lp_token_json(&b->tt, l, i, prev)); break;
	case B_LP_VALUES: rc |= put_json(b, json_real(gw_lps_at(l, i)->logprob)); break;
	case B_LP_TOPS: rc |= put_json(b, gw_lp_top_json(&b->tt, l, i, prev)); break;
	case B_LP_OFFSETS: rc |= put_json(b, json_integer((json_int_t)text_offset(r, i))); break;
	default: rc |= put_json(b, gw_lp_chat_json(&b->tt, l, i, prev)); break;
	}
	b->tok++;
	return rc;
}

/* ],"usage":{...}} : each prompt once, the completions of every choice */
static int tail(struct gw_body *b)
{
	uint32_t n_gen = 0, n_prompt = 0, n_cached = 0;
	for (uint32_t i = 0; i < b->lead->n_choices; i++) {
		const struct gw_req *r = gw_choice(b->lead, i);
		n_gen += r->n_generated;
		if (gw_prompt_first(r)) {
			n_prompt += r->n_prompt;
			n_cached += r->n_cached;
		}
	}
	return puts_(b, "],\"usage\":") | put_json(b, gw_api_usage_json(n_prompt, n_gen, n_cached)) | puts_(b, "}");
}

/* Writes the next part of the document. 0, or -1 when out of memory. */
static int step(struct gw_body *b)
{
	const struct gw_req *lead = b->lead;
	switch (b->part) {
	case B_HEAD: {
		/* {"id":...,"object":...,"created":N,"model":...,"choices":[ */
		int rc = puts_(b, "{\"id\":") | put_json(b, json_string(lead->id)) | puts_(b, ",\"object\":") |
			 put_json(b, json_string(lead->chat ? "chat.completion" : "text_completion")) |
			 put_fmt(b, ",\"created\":%lld,\"model\":", lead->created) |
			 put_json(b, json_string(lead->model->id)) | puts_(b, ",\"choices\":[");
		b->part = lead->n_choices ? B_CHOICE : B_TAIL;
		return rc;
	}
	case B_CHOICE: return choice_open(b);
	case B_CHOICE_END: {
		int rc = puts_(b, ",\"finish_reason\":") | put_json(b, json_string(gw_api_finish_name(cur(b)->finish, b->called))) |
			 puts_(b, "}");
		b->part = ++b->choice < lead->n_choices ? B_CHOICE : B_TAIL;
		return rc;
	}
	case B_TAIL:
		b->part = B_END;
		return tail(b);
	case B_END: return 0;
	default: return lp_step(b);
	}
}

/* Makes at least want bytes (or the rest of the document) ready in buf. */
static int fill(struct gw_body *b, size_t want)
{
	if (b->off) { /* what the last read left goes first */
		memmove(b->buf, b->buf + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	while (b->len - b->off < want && b->part != B_END)
		if (step(b))
			return -1;
	return 0;
}

/* Under lock: the body's references to every choice (the lead last). */
static void body_free(void *cls)
{
	struct gw_body *b = cls;
	pthread_mutex_lock(&b->gw->lock);
	gw_req_drop_choices_locked(b->gw, b->lead);
	pthread_mutex_unlock(&b->gw->lock);
	gw_toktext_free(&b->tt);
	free(b->buf);
	free(b);
}

static ssize_t body_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct gw_body *b = cls;
	(void)pos;
	if (b->off == b->len && b->part == B_END)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (fill(b, max))
		return MHD_CONTENT_READER_END_WITH_ERROR; /* out of memory: the client sees it cut */
	size_t n = ALLM_MIN(b->len - b->off, max);
	memcpy(out, b->buf + b->off, n);
	b->off += n;
	return (ssize_t)n;
}

enum MHD_Result gw_body_respond(struct gw *gw, struct MHD_Connection *c, struct gw_req *lead)
{
	struct gw_body *b = calloc(1, sizeof(*b));
	if (!b)
		return MHD_NO;
	b->gw = gw;
	b->lead = lead;
	if (gw_toktext_init(&b->tt, lead->model)) {
		free(b);
		return MHD_NO;
	}
	pthread_mutex_lock(&gw->lock);
	gw_req_hold_choices_locked(lead);
	pthread_mutex_unlock(&gw->lock);
	struct MHD_Response *res = NULL;
	if (fill(b, GW_BODY_INLINE + 1)) {
		body_free(b);
	} else if (b->part == B_END) {
		/* all of it: sent whole, with its length; the buffer is libmicrohttpd's */
		res = MHD_create_response_from_buffer(b->len, b->buf, MHD_RESPMEM_MUST_FREE);
		if (res)
			b->buf = NULL;
		body_free(b);
	} else {
		res = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, GW_BODY_BLOCK, body_read, b, body_free);
		if (!res)
			body_free(b);
	}
	if (!res)
		return MHD_NO;
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	gw_cors_answer(&gw->o.cors, c, res);
	enum MHD_Result ok = MHD_queue_response(c, 200, res);
	MHD_destroy_response(res);
	return ok;
}
