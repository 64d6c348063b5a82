/* OpenAI request bodies -> gw_req (gw-openai.h). Every field is checked for type
 * and range before anything is allocated for the engine; a field this gateway does
 * not apply is refused by name (gw-fields.c says which are accepted without
 * effect), never silently ignored. */
#include "gw-fields.h"
#include "gw-openai.h"
#include "gw-structured.h"
#include "gw-tools.h"

#include "sha256.h"

#include "common.h"
#include "tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* OpenAI's default max_tokens for /v1/completions. */
#define GW_COMPLETIONS_MAX_TOKENS 16

/* --- typed fields (absent or null: the default stays) ---------------------------- */

static int get_int(json_t *b, const char *k, int64_t lo, int64_t hi, int64_t *v,
		   struct gw_api_err *e)
{
	json_t *j = json_object_get(b, k);
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_integer(j))
		return gw_api_bad(e, k, "'%s' must be an integer", k);
	json_int_t x = json_integer_value(j);
	if (x < lo || x > hi)
		return gw_api_bad(e, k, "'%s' must be in %lld..%lld (got %lld)", k, (long long)lo,
			   (long long)hi, (long long)x);
	*v = x;
	return 0;
}

/* The JSON value j of key k into d's field of p, typed and in range as the table
 * (params.h) says: numbers for F32, integers for I32 and U64 (any int64 is a
 * seed), true/false for BOOL; vLLM's -1 for off where the row takes it; a
 * PLUS_ONE row's users count from 0. */
static int set_param(struct allm_params *p, const struct allm_param_desc *d, const char *k, json_t *j,
		     struct gw_api_err *e)
{
	char range[48];
	double v;
	switch (d->type) {
	case ALLM_PARAM_BOOL:
		if (!json_is_boolean(j))
			return gw_api_bad(e, k, "'%s' must be true or false", k);
		v = json_is_true(j);
		break;
	case ALLM_PARAM_U64:
		if (!json_is_integer(j))
			return gw_api_bad(e, k, "'%s' must be an integer", k);
		uint64_t q = (uint64_t)json_integer_value(j); /* two's complement: any int64 */
		memcpy((char *)p + d->offset, &q, sizeof(q));
		return 0;
	case ALLM_PARAM_I32:
		if (!json_is_integer(j))
			return gw_api_bad(e, k, "'%s' must be an integer", k);
		v = (double)json_integer_value(j);
		break;
	default:
		if (!json_is_number(j))
			return gw_api_bad(e, k, "'%s' must be a number", k);
		v = json_number_value(j);
	}
	double user = v;
	if ((d->flags & ALLM_PARAM_F_JSON_NEG1) && v == -1)
		v = d->off;
	else if (d->flags & ALLM_PARAM_F_PLUS_ONE)
		v += 1;
	if (((d->flags & ALLM_PARAM_F_PLUS_ONE) && v == d->off) || allm_param_set(p, d, v))
		return gw_api_bad(e, k, "'%s' must be %s (got %g)", k, allm_param_range_text(d, range, sizeof(range)),
				  user);
	return 0;
}

/* Every row of the table with a plain JSON key (not JSON_CUSTOM) read into p;
 * bit i of *seen set for row i present. */
static int parse_rows(json_t *b, struct allm_params *p, uint64_t *seen, struct gw_api_err *e)
{
	const struct allm_param_desc *d;
	*seen = 0;
	for (size_t i = 0; (d = allm_param_desc(i)); i++) {
		json_t *j = d->json && !(d->flags & ALLM_PARAM_F_JSON_CUSTOM) ? json_object_get(b, d->json) : NULL;
		if (!j || json_is_null(j))
			continue;
		*seen |= UINT64_C(1) << i;
		if (set_param(p, d, d->json, j, e))
			return -1;
	}
	return 0;
}

/* Whether the row of field name was in the body (parse_rows' *seen). */
static bool seen_row(uint64_t seen, const char *name)
{
	const struct allm_param_desc *d;
	for (size_t i = 0; (d = allm_param_desc(i)); i++)
		if (!strcmp(d->name, name))
			return seen & (UINT64_C(1) << i);
	return false;
}

/* --- sampling and the rest ------------------------------------------------------- */

static int parse_stop(json_t *b, struct gw_req *r, struct gw_api_err *e)
{
	json_t *s = json_object_get(b, "stop"), *v;
	size_t i;
	if (!s || json_is_null(s))
		return 0;
	if (json_is_string(s)) {
		if (gw_stops_add(&r->stops, json_string_value(s), json_string_length(s)))
			return gw_api_bad(e, "stop", "'stop' must be 1..%d bytes", GW_MAX_STOP_LEN);
		return 0;
	}
	if (!json_is_array(s))
		return gw_api_bad(e, "stop", "'stop' must be a string or a list of strings");
	json_array_foreach(s, i, v) {
		if (!json_is_string(v) || gw_stops_add(&r->stops, json_string_value(v), json_string_length(v)))
			return gw_api_bad(e, "stop", "'stop' takes at most %d strings of 1..%d bytes", GW_MAX_STOPS,
				   GW_MAX_STOP_LEN);
	}
	return 0;
}

/* Completions: "logprobs": k alternatives; chat: "logprobs": true and
 * "top_logprobs": k. Both into the table's logprobs row (1 + k; 0 for none). */
static int parse_logprobs(json_t *b, bool chat, struct allm_params *p, struct gw_api_err *e)
{
	const struct allm_param_desc *d = allm_param_find("logprobs");
	json_t *j = json_object_get(b, "logprobs"), *t = json_object_get(b, "top_logprobs");
	bool on = false;
	if (!chat)
		return j && !json_is_null(j) ? set_param(p, d, "logprobs", j, e) : 0;
	if (gw_api_get_bool(b, "logprobs", &on, e))
		return -1;
	if (!on && t && !json_is_null(t))
		return gw_api_bad(e, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
	if (!on)
		return 0;
	if (t && !json_is_null(t))
		return set_param(p, d, "top_logprobs", t, e);
	p->logprobs = 1; /* the sampled token's alone */
	return 0;
}

/* "logit_bias": {"token id": bias, ...}, as the table's limits say (params.h);
 * the engine checks the ids against its vocabulary. */
static int parse_logit_bias(json_t *b, struct gw_req *r, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, "logit_bias"), *v;
	const char *k;
	char why[160];
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_object(j) || json_object_size(j) > ALLM_LOGIT_BIAS_MAX)
		return gw_api_bad(e, "logit_bias", "'logit_bias' must map at most %d token ids to biases", ALLM_LOGIT_BIAS_MAX);
	size_t n = json_object_size(j), i = 0;
	if (!n)
		return 0;
	if (!(r->logit_bias = malloc(n * sizeof(*r->logit_bias))))
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	json_object_foreach(j, k, v) {
		char *end;
		errno = 0;
		long id = strtol(k, &end, 10);
		if (!*k || *end || errno || id < 0 || id > INT32_MAX)
			return gw_api_bad(e, "logit_bias", "'logit_bias' keys must be token ids (got '%.40s')", k);
		if (!json_is_number(v))
			return gw_api_bad(e, "logit_bias", "'logit_bias' values must be numbers");
		r->logit_bias[i++] = (struct allm_logit_bias){(int32_t)id, (float)json_number_value(v)};
	}
	r->n_logit_bias = (uint32_t)n;
	if (allm_logit_bias_check(r->logit_bias, n, why, sizeof(why)))
		return gw_api_bad(e, "logit_bias", "%s", why);
	return 0;
}

/* "stop_token_ids": [id, ...], as many as the table's stop ids take. */
static int parse_stop_ids(json_t *b, struct allm_params *p, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, "stop_token_ids"), *v;
	size_t i;
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_array(j) || json_array_size(j) > ALLM_PARAMS_MAX_STOP)
		return gw_api_bad(e, "stop_token_ids", "'stop_token_ids' takes at most %d ids", ALLM_PARAMS_MAX_STOP);
	json_array_foreach(j, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
			return gw_api_bad(e, "stop_token_ids", "'stop_token_ids' must be token ids");
		p->stop_ids[i] = (int32_t)json_integer_value(v);
	}
	p->n_stop = (uint32_t)json_array_size(j);
	return 0;
}

/* The request's parameters: the table's rows, then what the OpenAI API spells
 * per endpoint (max_completion_tokens, logprobs), the choices (n, best_of), and
 * fields refused by name. */
static int parse_sampling(json_t *b, bool chat, struct gw_req *r, int64_t *ret_n, struct gw_api_err *e)
{
	struct allm_params *p = &r->params;
	int64_t n = 1, best_of = 1;
	uint64_t seen;
	json_t *j;
	allm_params_init(p);
	if (parse_rows(b, p, &seen, e) || get_int(b, "n", 1, GW_MAX_CHOICES, &n, e) ||
	    get_int(b, "best_of", 1, GW_MAX_CHOICES, &best_of, e) || parse_stop(b, r, e) ||
	    parse_logprobs(b, chat, p, e) || parse_stop_ids(b, p, e))
		return -1;
	bool given = seen_row(seen, "max_tokens");
	j = json_object_get(b, "max_completion_tokens");
	if (chat && j && !json_is_null(j)) {
		if (set_param(p, allm_param_find("max_tokens"), "max_completion_tokens", j, e))
			return -1;
		given = true;
	}
	/* --max-tokens-default, else OpenAI's defaults: 16 for completions; for chat
	 * whatever room the context leaves (0 until the prompt is known) */
	if (!given)
		p->max_tokens = r->gw->o.max_tokens_default ? r->gw->o.max_tokens_default
			      : chat			  ? 0
							  : GW_COMPLETIONS_MAX_TOKENS;
	/* best_of would rank the choices by their log-probability: none are ranked here */
	if (best_of != 1 && best_of != n)
		return gw_api_bad(e, "best_of", "'best_of' must be 1 or n: choices are not ranked");
	*ret_n = n;
	if (parse_logit_bias(b, r, e))
		return -1;
	r->lps.stride = p->logprobs > 0 ? (uint32_t)p->logprobs : 1;
	/* no seed: a fresh one per request, as OpenAI's server samples */
	if (!seen_row(seen, "seed") && getrandom(&p->seed, sizeof(p->seed), 0) != sizeof(p->seed))
		p->seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)r;
	return 0;
}

/* cache_salt (vLLM's): a non-empty string; the request then shares cached KV
 * only with requests of the same salt. Its digest goes into the params; the
 * user is mixed in when the request is sent (gw_req_scope_cache). */
static int parse_cache_salt(json_t *b, struct gw_req *r, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, "cache_salt");
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_string(j) || json_string_length(j) == 0 || json_string_length(j) > 4096)
		return gw_api_bad(e, "cache_salt", "'cache_salt' must be a non-empty string (at most 4096 bytes)");
	uint8_t d[32];
	struct allm_sha256 h;
	allm_sha256_init(&h);
	allm_sha256_update(&h, json_string_value(j), json_string_length(j));
	allm_sha256_final(&h, d);
	memcpy(r->params.cache_salt, d, sizeof(r->params.cache_salt));
	return 0;
}

void gw_req_scope_cache(struct gw_req *r, const uint8_t secret[GW_CACHE_SECRET_BYTES], const char *user,
			const char *bearer)
{
	/* requests share a cached prefix only with the same user (the identity the
	 * quotas use: an API key of several, else the client's address), the same
	 * bearer presented and the same cache_salt (DESIGN §5b). Never all zero: the
	 * gateway's domain is its own, not the one ring clients of its uid share
	 * without a salt, and the secret (this process's) keeps a ring client from
	 * computing a gateway user's salt (issue 49 item 3). */
	uint8_t d[32];
	struct allm_sha256 h;
	allm_sha256_init(&h);
	allm_sha256_update(&h, "allm-gateway-cache-scope", 25);
	allm_sha256_update(&h, secret, GW_CACHE_SECRET_BYTES);
	allm_sha256_update(&h, user, strlen(user) + 1);
	allm_sha256_update(&h, bearer ? bearer : "", bearer ? strlen(bearer) + 1 : 1);
	allm_sha256_update(&h, r->params.cache_salt, sizeof(r->params.cache_salt));
	allm_sha256_final(&h, d);
	memcpy(r->params.cache_salt, d, sizeof(r->params.cache_salt));
}

static void new_id(struct gw_req *r, const char *prefix)
{
	unsigned char b[12] = {0};
	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		memcpy(b, &r, sizeof(r) < sizeof(b) ? sizeof(r) : sizeof(b));
	int k = snprintf(r->id, sizeof(r->id), "%s", prefix);
	for (size_t i = 0; i < sizeof(b); i++)
		k += snprintf(r->id + k, sizeof(r->id) - (size_t)k, "%02x", b[i]);
}

int gw_api_check_model(json_t *b, const struct gw_model *m, struct gw_api_err *e)
{
	json_t *model = json_object_get(b, "model");
	if (!model || json_is_null(model) || (json_is_string(model) && !strcmp(json_string_value(model), m->id)))
		return 0;
	return gw_api_fail(e, 404, "invalid_request_error", "model_not_found", "model",
			   "The model `%.200s` does not exist (this server serves `%s`)",
			   json_is_string(model) ? json_string_value(model) : "?", m->id);
}

void gw_api_discard(struct gw_req *r)
{
	if (!r)
		return;
	for (uint32_t i = 1; i < r->n_choices; i++)
		gw_api_discard(r->choices[i]);
	free(r->choices);
	if (!r->owner) {
		free(r->ids);
		free(r->logit_bias);
		free(r->grammar);
		free(r->echo);
		free(r->text);
	}
	gw_lps_free(&r->lps);
	gw_stops_free(&r->stops);
	gw_model_unref(r->model);
	free(r);
}

int gw_api_parse(struct gw *gw, struct gw_model *m, bool chat, const char *body, size_t len,
		 struct gw_req **ret, struct gw_api_err *e)
{
	int64_t n = 1;
	json_error_t jerr;
	json_t *b = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	struct gw_req *r = NULL;
	if (!b)
		return gw_api_bad(e, NULL, "the body is not valid JSON: %s (line %d, column %d)", jerr.text,
			   jerr.line, jerr.column);
	if (!json_is_object(b)) {
		gw_api_bad(e, NULL, "the body must be a JSON object");
		goto fail;
	}
	/* every field is applied, or accepted without effect, or refused (gw-fields.c) */
	char why[300];
	const char *k = gw_fields_refused(b, chat ? GW_EP_CHAT : GW_EP_COMPLETIONS, why, sizeof(why));
	if (k) {
		gw_api_bad(e, k, "%s", why);
		goto fail;
	}
	if (gw_api_check_model(b, m, e))
		goto fail;
	if (!(r = calloc(1, sizeof(*r)))) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		goto fail;
	}
	r->gw = gw;
	r->lead = r;
	r->sock = -1;
	r->chat = chat;
	r->model = gw_model_ref(m);
	if (parse_sampling(b, chat, r, &n, e) || gw_api_get_bool(b, "stream", &r->stream, e) ||
	    parse_cache_salt(b, r, e))
		goto fail;
	struct gw_grammar g;
	int gr = gw_structured_parse(b, &g, e);
	r->params.grammar_kind = (int32_t)g.kind;
	r->grammar = g.text;
	r->grammar_len = g.len;
	if (gr || (chat && gw_tools_parse(b, m, r, e)))
		goto fail;
	json_t *so = json_object_get(b, "stream_options");
	if (so && !json_is_null(so)) {
		if (!r->stream) {
			gw_api_bad(e, "stream_options", "'stream_options' is only allowed with \"stream\": true");
			goto fail;
		}
		if (gw_api_get_bool(so, "include_usage", &r->include_usage, e))
			goto fail;
	}
	if (chat ? gw_prompt_chat(gw, b, m, r, e) : gw_prompt_completion(b, m, r, e))
		goto fail;
	/* chat's default: whatever room the context leaves (the engine stops there) */
	if (r->params.max_tokens == 0)
		r->params.max_tokens = m->context > 0 ? m->context - (int32_t)r->n_ids : INT32_MAX;
	/* each row was checked as it was read; what is left are the rules between
	 * rows (min_tokens <= max_tokens), the table's as the engine applies them */
	if (allm_params_check(&r->params, why, sizeof(why))) {
		gw_api_bad(e, "min_tokens", "%s", why);
		goto fail;
	}
	new_id(r, chat ? "chatcmpl-" : "cmpl-");
	r->created = (long long)time(NULL);
	r->n_choices = 1;
	if (gw_prompt_choices(b, m, r, (uint32_t)n, e))
		goto fail;
	/* what the answer makes the gateway hold: refused up front, not run out of
	 * memory at the end (a whole response keeps every token's until it is sent) */
	uint64_t entries = (uint64_t)r->n_choices * (uint64_t)r->params.max_tokens * (uint64_t)r->params.logprobs;
	if (entries > GW_MAX_LOGPROB_ENTRIES) {
		gw_api_bad(e, chat ? "top_logprobs" : "logprobs",
			   "choices x max_tokens x (1 + %s) = %u x %d x %d = %llu log-probabilities, above this "
			   "server's limit of %d a request: lower n, max_tokens or %s",
			   chat ? "top_logprobs" : "logprobs", r->n_choices, r->params.max_tokens, r->params.logprobs,
			   (unsigned long long)entries, GW_MAX_LOGPROB_ENTRIES, chat ? "top_logprobs" : "logprobs");
		goto fail;
	}
	json_decref(b);
	*ret = r;
	return 0;
fail:
	gw_api_discard(r);
	json_decref(b);
	return -1;
}
