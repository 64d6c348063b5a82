/* What goes back to OpenAI clients (gw-openai.h): whole responses, server-sent
 * event chunks (`data: {...}` + blank line, ending with `data: [DONE]`), errors. */
#include "gw-openai.h"

#include <errno.h>
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

static json_t *usage(uint32_t p, uint32_t g)
{
	return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)p, "completion_tokens",
			 (json_int_t)g, "total_tokens", (json_int_t)p + g);
}

char *gw_api_response_json(const struct gw_req *r, size_t *len)
{
	json_t *choice;
	json_t *text = text_json(r->out.buf ? r->out.buf : "", r->out.ready);
	if (r->chat)
		choice = json_pack("{s:i, s:{s:s, s:o}, s:n, s:s}", "index", 0, "message", "role",
				   "assistant", "content", text, "logprobs", "finish_reason",
				   gw_api_finish_name(r->finish));
	else
		choice = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "text", text, "logprobs",
				   "finish_reason", gw_api_finish_name(r->finish));
	json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", r->id, "object",
			      r->chat ? "chat.completion" : "text_completion", "created",
			      (json_int_t)r->created, "model", r->model->id, "choices", choice, "usage",
			      usage(r->n_prompt, r->n_generated));
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

int gw_api_sse_chunk(const struct gw_req *r, bool first, const char *text, size_t n,
		     const char *finish, char **buf, size_t *len, size_t *cap)
{
	json_t *fin = finish ? json_string(finish) : json_null(), *choice;
	if (r->chat) {
		json_t *delta = json_object();
		if (first)
			json_object_set_new(delta, "role", json_string("assistant"));
		if (text)
			json_object_set_new(delta, "content", text_json(text, n));
		choice = json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "delta", delta, "logprobs",
				   "finish_reason", fin);
	} else {
		choice = json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "text",
				   text_json(text ? text : "", text ? n : 0), "logprobs", "finish_reason",
				   fin);
	}
	return sse(choice ? chunk(r, json_pack("[o]", choice)) : NULL, buf, len, cap);
}

int gw_api_sse_usage(const struct gw_req *r, uint32_t n_prompt, uint32_t n_gen, char **buf,
		     size_t *len, size_t *cap)
{
	json_t *c = chunk(r, json_array());
	if (c)
		json_object_set_new(c, "usage", usage(n_prompt, n_gen));
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
