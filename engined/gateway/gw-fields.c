/* The fields of the OpenAI API's request bodies this gateway knows, and what it
 * does with each (gw-fields.h). Sampling parameters are not listed here: every
 * row of the parameter table (include/adaptivellm/params.h) with a JSON key is
 * applied, on both endpoints. */
#include "gw-fields.h"

#include <adaptivellm/params.h>

#include <stdint.h>
#include <string.h>

#define C GW_EP_COMPLETIONS
#define H GW_EP_CHAT
#define M GW_EP_MESSAGE
#define T GW_EP_TOKENIZE
#define D GW_EP_DETOKENIZE

/* Tool calling is a chat's (gw-tools.c); the older functions API is not taken. */
#define TOOLS "tool calling is on POST /v1/chat/completions (tools, tool_choice)"

static const struct gw_field {
	const char *name;
	unsigned ep;             /* GW_EP_* it belongs to */
	enum gw_field_kind kind;
	const char *neutral;     /* REFUSED: the JSON value accepted as "not asked for"
				  * (null always is), NULL: none besides null */
	const char *why;         /* what it does here, or why it is refused or ignored */
} fields[] = {
	/* applied (read by gw-openai.c, gw-prompt.c) */
	{"model", C | H | T | D, GW_FIELD_APPLIED, NULL, "must name the served model (404 otherwise)"},
	{"prompt", C | T, GW_FIELD_APPLIED, NULL, "a text, token ids, or a batch of either (/tokenize: a text)"},
	{"messages", H | T, GW_FIELD_APPLIED, NULL, "rendered by the model's chat template"},
	{"tokens", D, GW_FIELD_APPLIED, NULL, "the token ids to decode"},
	{"add_special_tokens", T, GW_FIELD_APPLIED, NULL, "BOS and the like as the tokenizer adds them (default: "
							  "true for a prompt, false for messages)"},
	{"return_token_strs", T, GW_FIELD_APPLIED, NULL, "each token's text too (token_strs)"},
	{"n", C | H, GW_FIELD_APPLIED, NULL, "choices per prompt"},
	{"best_of", C, GW_FIELD_APPLIED, NULL, "1 or n: choices are not ranked"},
	{"stream", C | H, GW_FIELD_APPLIED, NULL, "server-sent events"},
	{"stream_options", C | H, GW_FIELD_APPLIED, NULL, "include_usage"},
	{"stop", C | H, GW_FIELD_APPLIED, NULL, "stop strings"},
	{"stop_token_ids", C | H, GW_FIELD_APPLIED, NULL, "stop token ids (vLLM's)"},
	{"logit_bias", C | H, GW_FIELD_APPLIED, NULL, "token id -> bias"},
	{"top_logprobs", H, GW_FIELD_APPLIED, NULL, "alternatives per token (with logprobs: true)"},
	{"max_completion_tokens", H, GW_FIELD_APPLIED, NULL, "max_tokens' new name"},
	{"echo", C, GW_FIELD_APPLIED, NULL, "the prompt's text before the output"},
	{"add_generation_prompt", H | T, GW_FIELD_APPLIED, NULL, "the template's assistant header (vLLM's)"},
	{"cache_salt", C | H, GW_FIELD_APPLIED, NULL, "shares cached KV only within the same salt (vLLM's)"},
	/* structured output (gw-structured.c): one grammar a request, compiled here first */
	{"response_format", C | H, GW_FIELD_APPLIED, NULL, "type text, json_object (llama.cpp's: with a schema) or "
							 "json_schema {schema, strict}: the output follows it"},
	{"grammar", C | H, GW_FIELD_APPLIED, NULL, "a GBNF grammar the output follows (llama.cpp's)"},
	{"json_schema", C | H, GW_FIELD_APPLIED, NULL, "a JSON Schema the output follows (llama.cpp's)"},
	{"structured_outputs", C | H, GW_FIELD_APPLIED, NULL, "one of json, regex, choice, grammar, json_object "
							      "(vLLM's)"},
	{"guided_json", C | H, GW_FIELD_APPLIED, NULL, "a JSON Schema (vLLM's older name)"},
	{"guided_regex", C | H, GW_FIELD_APPLIED, NULL, "a regular expression the whole output matches (vLLM's)"},
	{"guided_choice", C | H, GW_FIELD_APPLIED, NULL, "a list of strings: the output is one of them (vLLM's)"},
	{"guided_grammar", C | H, GW_FIELD_APPLIED, NULL, "a GBNF grammar (vLLM's older name)"},
	{"role", M, GW_FIELD_APPLIED, NULL, "system, developer (as system), user, assistant, tool"},
	{"content", M, GW_FIELD_APPLIED, NULL, "a text or text parts; null for an assistant's"},
	{"tool_call_id", M, GW_FIELD_APPLIED, NULL, "a tool message's call id, as the template renders it"},
	{"name", M, GW_FIELD_APPLIED, NULL, "passed to the template (most render none)"},
	{"tool_calls", M, GW_FIELD_APPLIED, NULL, "an assistant's calls, rendered by the template"},
	/* tool calling (gw-tools.c) */
	{"tools", H, GW_FIELD_APPLIED, NULL, "functions the model may call: rendered by the model's template, or "
					     "the gateway's Hermes preamble"},
	{"tool_choice", H, GW_FIELD_APPLIED, NULL, "none, auto, required or a named function (the last two held to "
						   "a call by a grammar)"},
	{"parallel_tool_calls", H, GW_FIELD_APPLIED, NULL, "false: one call at most"},
	/* refused unless neutral */
	{"suffix", C, GW_FIELD_REFUSED, "\"\"", "insertion (a suffix) is not supported"},
	{"priority", C | H, GW_FIELD_REFUSED, "0", "the engine orders requests by its own fairness"},
	{"typical_p", C | H, GW_FIELD_REFUSED, "1", "typical sampling is not implemented"},
	{"audio", H, GW_FIELD_REFUSED, NULL, "the model makes text only"},
	{"modalities", H, GW_FIELD_REFUSED, "[\"text\"]", "the model makes text only"},
	{"prediction", H, GW_FIELD_REFUSED, NULL, "predicted outputs are not supported"},
	{"reasoning_effort", H, GW_FIELD_REFUSED, NULL, "the model has no reasoning setting here"},
	{"web_search_options", H, GW_FIELD_REFUSED, NULL, "this server does not search the web"},
	{"tools", C, GW_FIELD_REFUSED, "[]", TOOLS},
	{"tool_choice", C, GW_FIELD_REFUSED, "\"none\"", TOOLS},
	{"functions", H, GW_FIELD_REFUSED, "[]", "the deprecated functions API: send tools"},
	{"function_call", H, GW_FIELD_REFUSED, "\"none\"", "the deprecated functions API: send tool_choice"},
	/* accepted without effect: the short list the README repeats */
	{"user", C | H, GW_FIELD_IGNORED, NULL, "an end-user id for a provider's abuse monitoring"},
	{"metadata", H, GW_FIELD_IGNORED, NULL, "tags for a provider's stored completions"},
	{"store", H, GW_FIELD_IGNORED, NULL, "nothing is stored"},
	{"service_tier", C | H, GW_FIELD_IGNORED, NULL, "one tier"},
};

static const struct gw_field *find(const char *k, unsigned ep)
{
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if ((fields[i].ep & ep) && !strcmp(fields[i].name, k))
			return &fields[i];
	return NULL;
}

/* A row of the parameter table by its JSON key (a sampling parameter). */
static bool param_key(const char *k)
{
	const struct allm_param_desc *d;
	for (size_t i = 0; (d = allm_param_desc(i)); i++)
		if (d->json && !strcmp(d->json, k))
			return true;
	return false;
}

/* Whether v is the row's neutral value (null always is). */
static bool neutral(const struct gw_field *f, json_t *v)
{
	if (json_is_null(v))
		return true;
	if (!f->neutral)
		return false;
	json_t *n = json_loads(f->neutral, JSON_DECODE_ANY, NULL);
	bool eq = n && (json_equal(n, v) || (json_is_number(n) && json_is_number(v) &&
					     json_number_value(n) == json_number_value(v)));
	json_decref(n);
	return eq;
}

static const char *endpoint_name(unsigned ep)
{
	switch (ep) {
	case M: return "a chat message";
	case H: return "POST /v1/chat/completions";
	case T: return "POST /tokenize";
	case D: return "POST /detokenize";
	default: return "POST /v1/completions";
	}
}

const char *gw_fields_refused(json_t *b, unsigned ep, char *why, size_t len)
{
	const char *k;
	json_t *v;
	json_object_foreach(b, k, v) {
		const struct gw_field *f = find(k, ep);
		if (!f && (ep & (C | H)) && param_key(k))
			continue;
		if (!f) {
			snprintf(why, len,
				 "'%.60s' is not a field of %s this server knows (refused rather than ignored; the "
				 "fields it takes are in docs/USAGE.md, section 'OpenAI-compatible HTTP')",
				 k, endpoint_name(ep));
			return k;
		}
		if (f->kind == GW_FIELD_REFUSED && !neutral(f, v)) {
			snprintf(why, len, "'%s' is not supported by this server: %s", k, f->why);
			return k;
		}
	}
	return NULL;
}

void gw_fields_list(FILE *f)
{
	static const char *kind[] = {"applied", "accepted-without-effect", "refused"};
	const struct allm_param_desc *d;
	for (size_t i = 0; (d = allm_param_desc(i)); i++)
		if (d->json)
			fprintf(f, "completions,chat applied %s: %s\n", d->json, d->help);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const struct gw_field *r = &fields[i];
		char eps[40];
		static const char *names[] = {"completions", "chat", "message", "tokenize", "detokenize"};
		int k = 0;
		for (unsigned b = 0; b < 5; b++)
			if (r->ep & (1u << b))
				k += snprintf(eps + k, sizeof(eps) - (size_t)k, "%s%s", k ? "," : "", names[b]);
		fprintf(f, "%s %s %s: %s", eps, kind[r->kind], r->name, r->why);
		if (r->neutral)
			fprintf(f, " (%s accepted)", r->neutral);
		fputc('\n', f);
	}
}
