/* What goes back to OpenAI clients (gw-openai.h): whole responses, server-sent
 * event chunks (`data: {...}` + blank line, ending with `data: [DONE]`), errors. */
#include "gw-openai.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gw_api_finish_name(int finish)
{
	switch (finish) {
	case ALLM_FINISH_EOS:
	case ALLM_FINISH_STOP: return "stop";
	case ALLM_FINISH_LENGTH: return "length";
	default: return "abort"; /* cancelled (vLLM's word) */
	}
}

/* Generated text as a JSON string: the engine sends valid UTF-8 (its detokenizer
 * replaces broken sequences), but never trust that with a peer's bytes. */
static json_t *text_json(const char *p, size_t n)
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

static json_t *usage(uint32_t p, uint32_t g, uint32_t cached)
{
	/* prompt_tokens_details.cached_tokens: served from the prefix cache (OpenAI's, vLLM's) */
	return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)p, "completion_tokens",
			 (json_int_t)g, "total_tokens", (json_int_t)p + g, "prompt_tokens_details", "cached_tokens",
			 (json_int_t)cached);
}

/* --- log-probabilities ---------------------------------------------------------------- */

/* The text token id stands for after token prev (-1: none): a detokenizer fed
 * prev first keeps SentencePiece's leading space, as the token reads in the
 * output. Without a tokenizer, vLLM's "token_id:N". Valid UTF-8 (U+FFFD for a
 * lone byte token); NULL when out of memory. */
static json_t *token_text(const struct gw_model *m, int32_t prev, int32_t id)
{
	char buf[64], *piece = NULL;
	struct allm_detok *d = NULL;
	json_t *j = NULL;
	if (!m->tok) {
		snprintf(buf, sizeof(buf), "token_id:%d", id);
		return json_string(buf);
	}
	size_t cap = allm_detok_piece_cap(m->tok) * 2 + 1;
	if (!(piece = malloc(cap)) || allm_detok_create(m->tok, true, &d))
		goto out;
	if (prev < 0 || allm_detok_prime(d, &prev, 1))
		allm_detok_flush(d, piece, cap); /* no context: start afresh */
	int n = allm_detok_push(d, id, piece, cap);
	int k = n >= 0 ? allm_detok_flush(d, piece + n, cap - (size_t)n) : -1;
	j = n >= 0 && k >= 0 ? text_json(piece, (size_t)(n + k)) : json_string("");
out:
	allm_detok_free(d);
	free(piece);
	return j;
}

/* [the UTF-8 bytes of a token's text] (chat's "bytes") */
static json_t *bytes_json(json_t *text)
{
	json_t *a = json_array();
	const unsigned char *p = (const unsigned char *)json_string_value(text);
	for (size_t i = 0; a && p && i < json_string_length(text); i++)
		json_array_append_new(a, json_integer(p[i]));
	return a;
}

json_t *gw_api_logprobs_json(const struct gw_req *r, const struct allm_cqe_logprobs *lps, size_t n, int32_t prev,
			     const size_t *offsets)
{
	json_t *o = NULL, *tokens = json_array(), *lp = json_array(), *tops = json_array(), *offs = json_array();
	for (size_t i = 0; i < n && tokens && lp && tops && offs; i++) {
		const struct allm_cqe_logprobs *l = &lps[i];
		json_t *t = token_text(r->model, i ? lps[i - 1].sampled.token_id : prev, l->sampled.token_id);
		json_t *top = r->chat ? json_array() : json_object();
		for (uint32_t k = 0; t && top && k < l->n_top && k < ALLM_LOGPROBS_MAX; k++) {
			json_t *tt = token_text(r->model, i ? lps[i - 1].sampled.token_id : prev, l->top[k].token_id);
			if (!tt)
				break;
			if (r->chat)
				json_array_append_new(top, json_pack("{s:O, s:f, s:o}", "token", tt, "logprob",
								     (double)l->top[k].logprob, "bytes", bytes_json(tt)));
			else
				json_object_set_new(top, json_string_value(tt), json_real(l->top[k].logprob));
			json_decref(tt);
		}
		if (!t || !top) {
			json_decref(t);
			json_decref(top);
			break;
		}
		/* completions: "always the logprob of the sampled token", up to k + 1 entries */
		if (!r->chat && !json_object_get(top, json_string_value(t)))
			json_object_set_new(top, json_string_value(t), json_real(l->sampled.logprob));
		if (r->chat) {
			json_array_append_new(tokens, json_pack("{s:O, s:f, s:o, s:o}", "token", t, "logprob",
								(double)l->sampled.logprob, "bytes", bytes_json(t),
								"top_logprobs", top));
		} else {
			json_array_append(tokens, t);
			json_array_append_new(lp, json_real(l->sampled.logprob));
			json_array_append_new(tops, top);
			json_array_append_new(offs, json_integer(offsets ? (json_int_t)offsets[i] : 0));
		}
		json_decref(t);
	}
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

/* One choice of a whole response. */
static json_t *choice_json(const struct gw_req *r)
{
	json_t *lp = NULL, *text;
	if (r->echo) { /* completions' echo: the prompt, then the output */
		char *both = malloc(r->echo_len + r->out.ready + 1);
		if (both) {
			memcpy(both, r->echo, r->echo_len);
			memcpy(both + r->echo_len, r->out.buf ? r->out.buf : "", r->out.ready);
		}
		text = both ? text_json(both, r->echo_len + r->out.ready) : NULL;
		free(both);
	} else {
		text = text_json(r->out.buf ? r->out.buf : "", r->out.ready);
	}
	if (r->params.logprobs > 0) {
		/* where each token's text starts: its piece's (out.ends), within the text */
		size_t *offs = malloc((r->n_lps + 1) * sizeof(*offs));
		for (size_t i = 0; offs && i < r->n_lps; i++)
			offs[i] = ALLM_MIN(i == 0 ? 0 : i - 1 < r->out.n_ends ? r->out.ends[i - 1] : r->out.ready,
					   r->out.ready);
		lp = offs ? gw_api_logprobs_json(r, r->lps, r->n_lps, gw_api_last_prompt_id(r), offs) : NULL;
		free(offs);
	}
	if (r->chat)
		return json_pack("{s:i, s:{s:s, s:o}, s:o, s:s}", "index", (int)r->index, "message", "role",
				 "assistant", "content", text, "logprobs", lp ? lp : json_null(),
				 "finish_reason", gw_api_finish_name(r->finish));
	return json_pack("{s:i, s:o, s:o, s:s}", "index", (int)r->index, "text", text, "logprobs",
			 lp ? lp : json_null(), "finish_reason", gw_api_finish_name(r->finish));
}

char *gw_api_response_json(const struct gw_req *lead, size_t *len)
{
	/* usage: each prompt once, the completions of every choice */
	json_t *choices = json_array();
	uint32_t n_gen = 0, n_prompt = 0, n_cached = 0;
	for (uint32_t i = 0; choices && i < lead->n_choices; i++) {
		const struct gw_req *r = gw_choice(lead, i);
		json_t *c = choice_json(r);
		if (!c || json_array_append_new(choices, c)) {
			json_decref(choices);
			return NULL;
		}
		n_gen += r->n_generated;
		if (gw_prompt_first(r)) {
			n_prompt += r->n_prompt;
			n_cached += r->n_cached;
		}
	}
	if (!choices)
		return NULL;
	json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", lead->id, "object",
			      lead->chat ? "chat.completion" : "text_completion", "created",
			      (json_int_t)lead->created, "model", lead->model->id, "choices", choices, "usage",
			      usage(n_prompt, n_gen, n_cached));
	return dump(j, len);
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
			json_object_set_new(delta, "content", text_json(text, n));
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)r->index, "delta", delta, "logprobs", lp,
				   "finish_reason", fin);
	} else {
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)r->index, "text",
				   text_json(text ? text : "", text ? n : 0), "logprobs", lp, "finish_reason",
				   fin);
	}
	return sse(choice ? chunk(r, json_pack("[o]", choice)) : NULL, buf, len, cap);
}

int gw_api_sse_usage(const struct gw_req *r, uint32_t n_prompt, uint32_t n_gen, uint32_t n_cached, char **buf,
		     size_t *len, size_t *cap)
{
	json_t *c = chunk(r, json_array());
	if (c)
		json_object_set_new(c, "usage", usage(n_prompt, n_gen, n_cached));
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
