/* OpenAI request bodies -> gw_req (gw-openai.h). Every field is checked for type
 * and range before anything is allocated for the engine; fields the engine cannot
 * honour (tools, suffix, best_of, echo with logprobs) are refused by name rather than
 * silently ignored. Fields unknown here are ignored, as OpenAI's own server does
 * with extensions it does not know. */
#include "gw-openai.h"

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

/* Messages quote what the client sent (a JSON parser's excerpt of a bad body, a
 * model name cut at 200 bytes), which may not be UTF-8; the error body is JSON,
 * and a string that is not UTF-8 made it fail to serialize, so the client got a
 * dropped connection instead of its 400. Each byte that starts no valid sequence
 * becomes '?'. */
static void scrub_utf8(char *s)
{
	unsigned char *p = (unsigned char *)s;
	for (size_t n = strlen(s); n > 0;) {
		size_t ok = allm_tok_utf8_valid_prefix(p, n);
		p += ok, n -= ok;
		if (n)
			*p++ = '?', n--;
	}
}

int gw_api_fail(struct gw_api_err *e, int status, const char *type, const char *code,
		const char *param, const char *fmt, ...)
{
	va_list ap;
	e->status = status;
	snprintf(e->type, sizeof(e->type), "%s", type);
	snprintf(e->code, sizeof(e->code), "%s", code ? code : "");
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	scrub_utf8(e->msg);
	scrub_utf8(e->param);
	return -1;
}

int gw_api_bad(struct gw_api_err *e, const char *param, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return gw_api_fail(e, 400, "invalid_request_error", NULL, param, "%s", msg);
}

/* --- typed fields (absent or null: the default stays) ---------------------------- */

static int get_num(json_t *b, const char *k, double lo, double hi, double *v, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, k);
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_number(j))
		return gw_api_bad(e, k, "'%s' must be a number", k);
	double x = json_number_value(j);
	if (!(x >= lo && x <= hi))
		return gw_api_bad(e, k, "'%s' must be in [%g, %g] (got %g)", k, lo, hi, x);
	*v = x;
	return 0;
}

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

int gw_api_get_bool(json_t *b, const char *k, bool *v, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, k);
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_boolean(j))
		return gw_api_bad(e, k, "'%s' must be true or false", k);
	*v = json_is_true(j);
	return 0;
}

/* A field the engine cannot honour: accepted only at its neutral value. */
int gw_api_refuse_unless(json_t *b, const char *k, double neutral, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, k);
	if (!j || json_is_null(j) || (json_is_false(j) && neutral == 0) ||
	    (json_is_number(j) && json_number_value(j) == neutral) ||
	    ((json_is_object(j) || json_is_array(j)) && json_object_size(j) + json_array_size(j) == 0))
		return 0;
	return gw_api_bad(e, k, "'%s' is not supported by this server", k);
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

/* Completions: "logprobs": k (0..ALLM_LOGPROBS_MAX alternatives); chat:
 * "logprobs": true and "top_logprobs": k. *ret: 0 for none, else 1 + k (the
 * SQE's and the engine's encoding). */
static int parse_logprobs(json_t *b, bool chat, int32_t *ret, struct gw_api_err *e)
{
	int64_t k = 0;
	bool on = false;
	json_t *j = json_object_get(b, "logprobs");
	if (!chat) {
		if (get_int(b, "logprobs", 0, ALLM_LOGPROBS_MAX, &k, e))
			return -1;
		*ret = j && !json_is_null(j) ? 1 + (int32_t)k : 0;
		return 0;
	}
	if (gw_api_get_bool(b, "logprobs", &on, e) || get_int(b, "top_logprobs", 0, ALLM_LOGPROBS_MAX, &k, e))
		return -1;
	json_t *t = json_object_get(b, "top_logprobs");
	if (!on && t && !json_is_null(t))
		return gw_api_bad(e, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
	*ret = on ? 1 + (int32_t)k : 0;
	return 0;
}

/* "logit_bias": {"token id": bias in [-100, 100], ...}, at most
 * ALLM_LOGIT_BIAS_MAX; the engine checks the ids against its vocabulary. */
static int parse_logit_bias(json_t *b, struct gw_req *r, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, "logit_bias"), *v;
	const char *k;
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
		if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
			return gw_api_bad(e, "logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
		r->logit_bias[i++] = (struct allm_logit_bias){(int32_t)id, (float)json_number_value(v)};
	}
	r->n_logit_bias = (uint32_t)n;
	return 0;
}

static int parse_sampling(json_t *b, bool chat, struct gw_req *r, int64_t *ret_n, struct gw_api_err *e)
{
	struct allm_request_params *p = &r->params;
	double temp = 1.0, top_p = 1.0, presence = 0, frequency = 0, repetition = 1;
	int32_t logprobs = 0;
	int64_t min_tokens = 0;
	int64_t top_k = 0, n = 1, seed = -1, max_tokens = -1, best_of = 1;
	bool ignore_eos = false, seeded;
	json_t *j;
	if (get_num(b, "temperature", 0, 100, &temp, e) || get_num(b, "top_p", 1e-9, 1, &top_p, e) ||
	    get_int(b, "top_k", -1, INT32_MAX, &top_k, e) || get_int(b, "n", 1, GW_MAX_CHOICES, &n, e) ||
	    get_int(b, "best_of", 1, GW_MAX_CHOICES, &best_of, e) ||
	    get_int(b, "seed", INT64_MIN, INT64_MAX, &seed, e) ||
	    get_int(b, "max_tokens", 1, INT32_MAX, &max_tokens, e) ||
	    (chat && get_int(b, "max_completion_tokens", 1, INT32_MAX, &max_tokens, e)) ||
	    gw_api_get_bool(b, "ignore_eos", &ignore_eos, e) || parse_stop(b, r, e) ||
	    get_num(b, "presence_penalty", -2, 2, &presence, e) ||
	    get_num(b, "frequency_penalty", -2, 2, &frequency, e) ||
	    get_num(b, "repetition_penalty", 1e-6, 10, &repetition, e) || parse_logprobs(b, chat, &logprobs, e))
		return -1;
	/* best_of would rank the choices by their log-probability: none are ranked here */
	if (best_of != 1 && best_of != n)
		return gw_api_bad(e, "best_of", "'best_of' must be 1 or n: choices are not ranked");
	*ret_n = n;
	/* neutral values only: the engine has no such knob */
	if (parse_logit_bias(b, r, e) || get_int(b, "min_tokens", 0, INT32_MAX, &min_tokens, e) ||
	    gw_api_refuse_unless(b, "suffix", 0, e))
		return -1;
	j = json_object_get(b, "priority");
	if (j && !json_is_null(j) && !(json_is_integer(j) && json_integer_value(j) == 0))
		return gw_api_bad(e, "priority",
			   "'priority' is not supported: the engine orders requests by its own fairness priority");
	j = json_object_get(b, "stop_token_ids");
	if (j && !json_is_null(j)) {
		size_t i;
		json_t *v;
		if (!json_is_array(j) || json_array_size(j) > ALLM_SQE_MAX_STOP)
			return gw_api_bad(e, "stop_token_ids", "'stop_token_ids' takes at most %d ids", ALLM_SQE_MAX_STOP);
		json_array_foreach(j, i, v)
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
				return gw_api_bad(e, "stop_token_ids", "'stop_token_ids' must be token ids");
	}
	seeded = json_is_integer(json_object_get(b, "seed"));
	allm_request_params_init(p);
	p->logit_bias = r->logit_bias;
	p->n_logit_bias = r->n_logit_bias;
	p->temperature = (float)temp;
	p->top_p = (float)top_p;
	p->top_k = top_k > 0 ? (int32_t)top_k : 0;
	p->presence_penalty = (float)presence;
	p->frequency_penalty = (float)frequency;
	p->repetition_penalty = (float)repetition;
	p->logprobs = logprobs;
	r->lps.stride = logprobs > 0 ? (uint32_t)logprobs : 1;
	p->min_tokens = (int32_t)min_tokens;
	p->ignore_eos = ignore_eos;
	p->max_tokens = max_tokens > 0 ? (int32_t)max_tokens : chat ? 0 : GW_COMPLETIONS_MAX_TOKENS;
	if (seeded) {
		p->seed = (uint64_t)seed;
	} else if (getrandom(&p->seed, sizeof(p->seed), 0) != sizeof(p->seed)) {
		p->seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)r;
	}
	return 0;
}

/* cache_salt (vLLM's): a non-empty string; the request then shares cached KV
 * only with requests of the same salt. Its digest goes into the params; the
 * API key is mixed in when the request is sent (gw_req_scope_cache). */
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

void gw_req_scope_cache(struct gw_req *r, const char *bearer)
{
	/* per API key (the bearer presented) and per cache_salt: requests share a
	 * cached prefix only within both (DESIGN §5b) */
	static const uint8_t none[ALLM_CACHE_SALT_BYTES];
	bool salted = memcmp(r->params.cache_salt, none, sizeof(none)) != 0;
	if (!salted && (!bearer || !*bearer))
		return;
	uint8_t d[32];
	struct allm_sha256 h;
	allm_sha256_init(&h);
	allm_sha256_update(&h, "allm-gateway-cache-scope", 25);
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

void gw_api_discard(struct gw_req *r)
{
	if (!r)
		return;
	for (uint32_t i = 1; i < r->n_choices; i++)
		gw_api_discard(r->choices[i]);
	free(r->choices);
	allm_detok_free(r->detok);
	free(r->ids);
	gw_lps_free(&r->lps);
	free(r->logit_bias);
	free(r->echo);
	free(r->text);
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
	int64_t stop_ids[ALLM_SQE_MAX_STOP];
	size_t n_stop_ids = 0;
	if (!b)
		return gw_api_bad(e, NULL, "the body is not valid JSON: %s (line %d, column %d)", jerr.text,
			   jerr.line, jerr.column);
	if (!json_is_object(b)) {
		gw_api_bad(e, NULL, "the body must be a JSON object");
		goto fail;
	}
	json_t *model = json_object_get(b, "model");
	if (model && !json_is_null(model) &&
	    (!json_is_string(model) || strcmp(json_string_value(model), m->id))) {
		gw_api_fail(e, 404, "invalid_request_error", "model_not_found", "model",
			    "The model `%.200s` does not exist (this server serves `%s`)",
			    json_is_string(model) ? json_string_value(model) : "?", m->id);
		goto fail;
	}
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
	json_t *so = json_object_get(b, "stream_options");
	if (so && !json_is_null(so)) {
		if (!r->stream) {
			gw_api_bad(e, "stream_options", "'stream_options' is only allowed with \"stream\": true");
			goto fail;
		}
		if (gw_api_get_bool(so, "include_usage", &r->include_usage, e))
			goto fail;
	}
	json_t *sti = json_object_get(b, "stop_token_ids");
	for (size_t i = 0; json_is_array(sti) && i < json_array_size(sti); i++)
		stop_ids[n_stop_ids++] = json_integer_value(json_array_get(sti, i));
	if (chat ? gw_prompt_chat(gw, b, m, r, e) : gw_prompt_completion(b, m, r, e))
		goto fail;
	/* chat's default: whatever room the context leaves (the engine stops there) */
	if (r->params.max_tokens == 0)
		r->params.max_tokens = m->context > 0 ? m->context - (int32_t)r->n_ids : INT32_MAX;
	if (r->params.min_tokens > r->params.max_tokens) {
		gw_api_bad(e, "min_tokens", "'min_tokens' (%d) is above max_tokens (%d)", r->params.min_tokens,
		    r->params.max_tokens);
		goto fail;
	}
	/* the request's own copy: the params point into it */
	for (size_t i = 0; i < n_stop_ids; i++)
		r->stop_ids[i] = (int32_t)stop_ids[i];
	r->params.stop_ids = n_stop_ids ? r->stop_ids : NULL;
	r->params.n_stop = (uint32_t)n_stop_ids;
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
