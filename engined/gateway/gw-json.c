/* What goes back to OpenAI clients (gw-openai.h): server-sent event chunks
 * (`data: {...}` + blank line, ending with `data: [DONE]`), errors, usage, and
 * the log-probabilities of tokens (streamed here, whole in gw-body.c). */
#include "gw-openai.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gw_api_finish_name(int finish, bool called)
{
	switch (finish) {
	case ALLM_FINISH_EOS:
	case ALLM_FINISH_STOP: return called ? "tool_calls" : "stop";
	case ALLM_FINISH_LENGTH: return "length";
	default: return "abort"; /* cancelled (vLLM's word) */
	}
}

/* Generated text as a JSON string: the engine sends valid UTF-8 (its detokenizer
 * replaces broken sequences), but never trust that with a peer's bytes. */
json_t *gw_api_text_json(const char *p, size_t n)
{
	json_t *j = json_stringn(p, n);
	return j ? j : json_string("\xef\xbf\xbd");
}

static char *dump(json_t *j, size_t *len)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (s)
		*len = strlen(s);
	return s;
}

char *gw_api_error_json(const struct gw_api_err *e, size_t *len)
{
	json_t *err = json_pack("{s:s, s:s, s:o, s:o}", "message", e->msg, "type", e->type, "param",
				e->param[0] ? json_string(e->param) : json_null(), "code",
				e->code[0] ? json_string(e->code) : json_null());
	return dump(err ? json_pack("{s:o}", "error", err) : NULL, len);
}

json_t *gw_api_usage_json(uint32_t p, uint32_t g, uint32_t cached)
{
	/* prompt_tokens_details.cached_tokens: served from the prefix cache (OpenAI's, vLLM's) */
	return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)p, "completion_tokens",
			 (json_int_t)g, "total_tokens", (json_int_t)p + g, "prompt_tokens_details", "cached_tokens",
			 (json_int_t)cached);
}

/* --- log-probabilities ---------------------------------------------------------------- */

int gw_toktext_init(struct gw_toktext *t, const struct gw_model *m)
{
	*t = (struct gw_toktext){.m = m};
	if (!m->tok)
		return 0;
	t->cap = allm_detok_piece_cap(m->tok) * 2 + 1;
	if (!(t->piece = malloc(t->cap)) || allm_detok_create(m->tok, true, &t->d)) {
		gw_toktext_free(t);
		return -ENOMEM;
	}
	return 0;
}

void gw_toktext_free(struct gw_toktext *t)
{
	allm_detok_free(t->d);
	free(t->piece);
	t->d = NULL;
	t->piece = NULL;
}

/* The text token id stands for after token prev (-1: none): a detokenizer fed
 * prev first keeps SentencePiece's leading space, as the token reads in the
 * output. Without a tokenizer, vLLM's "token_id:N". Valid UTF-8 (U+FFFD for a
 * lone byte token); NULL when out of memory. One decoder serves every call: a
 * flush resets it, so each token is decoded afresh. */
static json_t *token_text(struct gw_toktext *t, int32_t prev, int32_t id)
{
	char buf[64];
	if (!t->m->tok) {
		snprintf(buf, sizeof(buf), "token_id:%d", id);
		return json_string(buf);
	}
	allm_detok_flush(t->d, t->piece, t->cap); /* what the last call left */
	if (prev < 0 || allm_detok_push(t->d, prev, t->piece, t->cap) < 0)
		allm_detok_flush(t->d, t->piece, t->cap); /* no context: start afresh */
	int n = allm_detok_push(t->d, id, t->piece, t->cap);
	int k = n >= 0 ? allm_detok_flush(t->d, t->piece + n, t->cap - (size_t)n) : -1;
	return n >= 0 && k >= 0 ? gw_api_text_json(t->piece, (size_t)(n + k)) : json_string("");
}

/* [a token's own bytes] (chat's "bytes"): what it decodes to, so a client can join
 * the bytes of tokens that split a character (their text is U+FFFD each, as
 * OpenAI's and vLLM's); a special token's, and without a tokenizer, its text's. */
static json_t *bytes_json(const struct gw_toktext *t, int32_t id, json_t *text)
{
	json_t *a = json_array();
	size_t n = 0;
	const unsigned char *p = NULL;
	if (t->m->tok && !allm_tokenizer_is_special(t->m->tok, id))
		p = (const unsigned char *)allm_tokenizer_token_bytes(t->m->tok, id, &n);
	if (!p) {
		p = (const unsigned char *)json_string_value(text);
		n = p ? json_string_length(text) : 0;
	}
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer(p[i]));
	return a;
}

/* The token token i follows: the one before it, or prev for the first. */
static int32_t before(const struct gw_lps *l, size_t i, int32_t prev)
{
	return i ? gw_lps_at(l, i - 1)->token_id : prev;
}

json_t *gw_lp_token_json(struct gw_toktext *t, const struct gw_lps *l, size_t i, int32_t prev)
{
	return token_text(t, before(l, i, prev), gw_lps_at(l, i)->token_id);
}

json_t *gw_lp_top_json(struct gw_toktext *t, const struct gw_lps *l, size_t i, int32_t prev)
{
	const struct allm_logprob *e = gw_lps_at(l, i);
	int32_t p = before(l, i, prev);
	json_t *top = json_object(), *s = token_text(t, p, e->token_id);
	for (uint32_t k = 0; top && s && k < l->n_top[i]; k++) {
		json_t *tt = token_text(t, p, e[1 + k].token_id);
		if (!tt)
			goto fail;
		json_object_set_new(top, json_string_value(tt), json_real(e[1 + k].logprob));
		json_decref(tt);
	}
	if (!top || !s)
		goto fail;
	/* completions: "always the logprob of the sampled token", up to k + 1 entries */
	if (!json_object_get(top, json_string_value(s)))
		json_object_set_new(top, json_string_value(s), json_real(e->logprob));
	json_decref(s);
	return top;
fail:
	json_decref(top);
	json_decref(s);
	return NULL;
}

json_t *gw_lp_chat_json(struct gw_toktext *t, const struct gw_lps *l, size_t i, int32_t prev)
{
	const struct allm_logprob *e = gw_lps_at(l, i);
	int32_t p = before(l, i, prev);
	json_t *top = json_array(), *s = token_text(t, p, e->token_id);
	for (uint32_t k = 0; top && s && k < l->n_top[i]; k++) {
		json_t *tt = token_text(t, p, e[1 + k].token_id);
		if (!tt)
			goto fail;
		json_array_append_new(top, json_pack("{s:O, s:f, s:o}", "token", tt, "logprob",
						     (double)e[1 + k].logprob, "bytes", bytes_json(t, e[1 + k].token_id, tt)));
		json_decref(tt);
	}
	if (!top || !s)
		goto fail;
	json_t *o = json_pack("{s:O, s:f, s:o, s:o}", "token", s, "logprob", (double)e->logprob, "bytes",
			      bytes_json(t, e->token_id, s), "top_logprobs", top);
	json_decref(s);
	return o;
fail:
	json_decref(top);
	json_decref(s);
	return NULL;
}

json_t *gw_api_logprobs_json(const struct gw_req *r, const struct gw_lps *l, size_t from, size_t n, int32_t prev,
			     const size_t *offsets)
{
	struct gw_toktext t;
	json_t *o = NULL, *tokens = json_array(), *lp = json_array(), *tops = json_array(), *offs = json_array();
	bool ok = !gw_toktext_init(&t, r->model);
	for (size_t i = from; ok && i < from + n && i < l->n && tokens && lp && tops && offs; i++) {
		if (r->chat) {
			json_t *c = gw_lp_chat_json(&t, l, i, prev);
			if (!c)
				break;
			json_array_append_new(tokens, c);
			continue;
		}
		json_t *s = gw_lp_token_json(&t, l, i, prev), *top = s ? gw_lp_top_json(&t, l, i, prev) : NULL;
		if (!top) {
			json_decref(s);
			break;
		}
		json_array_append_new(tokens, s);
		json_array_append_new(lp, json_real(gw_lps_at(l, i)->logprob));
		json_array_append_new(tops, top);
		json_array_append_new(offs, json_integer(offsets ? (json_int_t)offsets[i - from] : 0));
	}
	if (ok)
		gw_toktext_free(&t);
	if (r->chat)
		o = json_pack("{s:O}", "content", tokens);
	else
		o = json_pack("{s:O, s:O, s:O, s:O}", "tokens", tokens, "token_logprobs", lp, "top_logprobs", tops,
			      "text_offset", offs);
	json_decref(tokens);
	json_decref(lp);
	json_decref(tops);
	json_decref(offs);
	return o;
}

/* The prompt's last id, which the first generated token follows (-1: unknown). */
int32_t gw_api_last_prompt_id(const struct gw_req *r)
{
	return r->ids && r->n_ids ? r->ids[r->n_ids - 1] : -1;
}

/* Appends "data: " + j + "\n\n" to the buffer (j is consumed). */
static int sse(json_t *j, char **buf, size_t *len, size_t *cap)
{
	size_t n = 0;
	char *s = dump(j, &n);
	if (!s)
		return -ENOMEM;
	size_t need = *len + n + 8;
	if (need > *cap) {
		size_t c = *cap ? *cap : 512;
		while (c < need)
			c *= 2;
		char *b = realloc(*buf, c);
		if (!b) {
			free(s);
			return -ENOMEM;
		}
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, "data: ", 6);
	memcpy(*buf + *len + 6, s, n);
	memcpy(*buf + *len + 6 + n, "\n\n", 2);
	*len += n + 8;
	free(s);
	return 0;
}

static json_t *chunk(const struct gw_req *r, json_t *choices)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", r->id, "object",
			 r->chat ? "chat.completion.chunk" : "text_completion", "created",
			 (json_int_t)r->created, "model", r->model->id, "choices", choices);
}

int gw_api_sse_chunk(const struct gw_req *r, bool first, const char *text, size_t n, json_t *logprobs,
		     const char *finish, char **buf, size_t *len, size_t *cap)
{
	json_t *fin = finish ? json_string(finish) : json_null(), *choice;
	json_t *lp = logprobs ? logprobs : json_null();
	if (r->chat) {
		json_t *delta = json_object();
		if (first)
			json_object_set_new(delta, "role", json_string("assistant"));
		if (text)
			json_object_set_new(delta, "content", gw_api_text_json(text, n));
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)r->index, "delta", delta, "logprobs", lp,
				   "finish_reason", fin);
	} else {
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)r->index, "text",
				   gw_api_text_json(text ? text : "", text ? n : 0), "logprobs", lp, "finish_reason",
				   fin);
	}
	return sse(choice ? chunk(r, json_pack("[o]", choice)) : NULL, buf, len, cap);
}

int gw_api_sse_tool_delta(const struct gw_req *r, bool first, json_t *call, char **buf, size_t *len, size_t *cap)
{
	json_t *delta = call ? json_pack("{s:[o]}", "tool_calls", call) : NULL;
	if (delta && first)
		json_object_set_new(delta, "role", json_string("assistant"));
	json_t *choice = delta ? json_pack("{s:i, s:o, s:n, s:n}", "index", (int)r->index, "delta", delta, "logprobs",
					   "finish_reason")
			       : NULL;
	return sse(choice ? chunk(r, json_pack("[o]", choice)) : NULL, buf, len, cap);
}

int gw_api_sse_usage(const struct gw_req *r, uint32_t n_prompt, uint32_t n_gen, uint32_t n_cached, char **buf,
		     size_t *len, size_t *cap)
{
	json_t *c = chunk(r, json_array());
	if (c)
		json_object_set_new(c, "usage", gw_api_usage_json(n_prompt, n_gen, n_cached));
	return sse(c, buf, len, cap);
}

int gw_api_sse_error(const struct gw_api_err *e, char **buf, size_t *len, size_t *cap)
{
	json_t *err = json_pack("{s:s, s:s, s:n, s:o}", "message", e->msg, "type", e->type, "param",
				"code", e->code[0] ? json_string(e->code) : json_null());
	return sse(err ? json_pack("{s:o}", "error", err) : NULL, buf, len, cap);
}

int gw_api_sse_done(char **buf, size_t *len, size_t *cap)
{
	static const char done[] = "data: [DONE]\n\n";
	size_t n = sizeof(done) - 1;
	if (*len + n > *cap) {
		size_t c = *cap ? *cap * 2 : 512;
		while (c < *len + n)
			c *= 2;
		char *b = realloc(*buf, c);
		if (!b)
			return -ENOMEM;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, done, n);
	*len += n;
	return 0;
}
