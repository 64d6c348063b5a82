/* OpenAI request bodies -> gw_req (gw-openai.h). Every field is checked for type
 * and range before anything is allocated for the engine; fields the engine cannot
 * honour (tools, suffix, best_of, echo with logprobs) are refused by name rather than
 * silently ignored. Fields unknown here are ignored, as OpenAI's own server does
 * with extensions it does not know. */
#include "gw-openai.h"

#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Most chat messages one request may carry (the body cap bounds bytes). */
#define GW_MAX_MESSAGES 4096
/* OpenAI's default max_tokens for /v1/completions. */
#define GW_COMPLETIONS_MAX_TOKENS 16

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
	return -1;
}

static int bad(struct gw_api_err *e, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(struct gw_api_err *e, const char *param, const char *fmt, ...)
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
		return bad(e, k, "'%s' must be a number", k);
	double x = json_number_value(j);
	if (!(x >= lo && x <= hi))
		return bad(e, k, "'%s' must be in [%g, %g] (got %g)", k, lo, hi, x);
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
		return bad(e, k, "'%s' must be an integer", k);
	json_int_t x = json_integer_value(j);
	if (x < lo || x > hi)
		return bad(e, k, "'%s' must be in %lld..%lld (got %lld)", k, (long long)lo,
			   (long long)hi, (long long)x);
	*v = x;
	return 0;
}

static int get_bool(json_t *b, const char *k, bool *v, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, k);
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_boolean(j))
		return bad(e, k, "'%s' must be true or false", k);
	*v = json_is_true(j);
	return 0;
}

/* A field the engine cannot honour: accepted only at its neutral value. */
static int refuse_unless(json_t *b, const char *k, double neutral, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, k);
	if (!j || json_is_null(j) || (json_is_false(j) && neutral == 0) ||
	    (json_is_number(j) && json_number_value(j) == neutral) ||
	    ((json_is_object(j) || json_is_array(j)) && json_object_size(j) + json_array_size(j) == 0))
		return 0;
	return bad(e, k, "'%s' is not supported by this server", k);
}

/* --- prompts ---------------------------------------------------------------------- */

static int ids_from(json_t *a, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e)
{
	size_t n = json_array_size(a), i;
	json_t *v;
	int32_t vocab = m->tok ? allm_tokenizer_vocab_size(m->tok) : INT32_MAX;
	if (n == 0)
		return bad(e, "prompt", "'prompt' must not be an empty list of token ids");
	if (!(r->ids = malloc(n * sizeof(int32_t))))
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= vocab)
			return bad(e, "prompt", "prompt token %zu is not an id in 0..%d", i, vocab - 1);
		r->ids[i] = (int32_t)json_integer_value(v);
	}
	r->n_ids = n;
	return 0;
}

/* Tokenizes text the way the engine would (add_special: BOS/EOS as the tokenizer's
 * post-processor says), or without special tokens for a rendered chat prompt,
 * whose template already wrote them. */
static int tokenize(const struct gw_model *m, const char *text, size_t len, bool add_special,
		    struct gw_req *r, struct gw_api_err *e)
{
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0;
	if (allm_tokenizer_encode(m->tok, text, len, add_special, &ids, &n, &err))
		return bad(e, "prompt", "cannot tokenize the prompt: %s", err.msg);
	if (n == 0) {
		allm_free(ids);
		return bad(e, "prompt", "the prompt is empty (no tokens)");
	}
	r->ids = malloc(n * sizeof(int32_t));
	if (r->ids)
		memcpy(r->ids, ids, n * sizeof(int32_t));
	allm_free(ids);
	if (!r->ids)
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	r->n_ids = n;
	return 0;
}

/* echo: the prompt's text goes back before the output, as it reads (token ids
 * decoded). Without prompt log-probabilities, which the engine does not compute,
 * echo and logprobs do not go together. */
static int echo_prompt(json_t *b, const struct gw_model *m, json_t *p, struct gw_req *r, struct gw_api_err *e)
{
	bool echo = false;
	if (get_bool(b, "echo", &echo, e))
		return -1;
	if (!echo)
		return 0;
	if (r->params.logprobs > 0)
		return bad(e, "echo", "'echo' with 'logprobs' needs the prompt's log-probabilities, which this "
				      "server does not compute");
	if (json_is_string(p)) {
		r->echo_len = json_string_length(p);
		r->echo = malloc(r->echo_len + 1);
		if (r->echo)
			memcpy(r->echo, json_string_value(p), r->echo_len + 1);
	} else if (!m->tok) {
		return bad(e, "echo", "'echo' of token ids needs the model's tokenizer");
	} else {
		char *t = NULL; /* allm_malloc'ed: ours is malloc'ed like the rest of the request */
		if (allm_tokenizer_decode(m->tok, r->ids, r->n_ids, true, &t, NULL) == 0 && t) {
			r->echo_len = strlen(t);
			if ((r->echo = malloc(r->echo_len + 1)))
				memcpy(r->echo, t, r->echo_len + 1);
		}
		allm_free(t);
	}
	return r->echo ? 0 : gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
}

/* The prompts of a completions body: a list of texts or of token-id lists (a
 * batch), else NULL (one prompt: a text or a token-id list). */
static json_t *prompt_batch(json_t *b)
{
	json_t *p = json_object_get(b, "prompt");
	return json_is_array(p) && json_array_size(p) > 0 && !json_is_integer(json_array_get(p, 0)) ? p : NULL;
}

/* One prompt p (a text or a list of token ids) into r, with its echo. */
static int one_prompt(json_t *b, const struct gw_model *m, json_t *p, struct gw_req *r, struct gw_api_err *e)
{
	int rc;
	if (json_is_array(p))
		return (rc = ids_from(p, m, r, e)) ? rc : echo_prompt(b, m, p, r, e);
	if (!json_is_string(p))
		return bad(e, "prompt", "'prompt' must be a string or a list of token ids");
	const char *s = json_string_value(p);
	size_t n = json_string_length(p);
	if ((rc = echo_prompt(b, m, p, r, e)))
		return rc;
	if (m->tok)
		return tokenize(m, s, n, true, r, e);
	/* no tokenizer here: the engine tokenizes (and says if it cannot) */
	if (!(r->text = malloc(n + 1)))
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	memcpy(r->text, s, n + 1);
	r->text_len = n;
	return 0;
}

static int completion_prompt(json_t *b, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e)
{
	json_t *batch = prompt_batch(b); /* the first here; make_choices does the others */
	return one_prompt(b, m, batch ? json_array_get(batch, 0) : json_object_get(b, "prompt"), r, e);
}

/* A message's content: a string, or a list of {"type": "text", "text": ...} parts
 * joined with newlines (as vLLM does). Returns a malloc'ed copy. */
static char *content_of(json_t *msg, size_t idx, size_t *len, struct gw_api_err *e)
{
	json_t *c = json_object_get(msg, "content");
	char key[48];
	snprintf(key, sizeof(key), "messages[%zu].content", idx);
	if (json_is_string(c)) {
		*len = json_string_length(c);
		char *s = malloc(*len + 1);
		if (!s)
			gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		else
			memcpy(s, json_string_value(c), *len + 1);
		return s;
	}
	if (!json_is_array(c)) {
		bad(e, key, "'%s' must be a string or a list of text parts", key);
		return NULL;
	}
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	size_t i;
	json_t *part;
	if (!f) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		return NULL;
	}
	json_array_foreach(c, i, part) {
		json_t *t = json_object_get(part, "text");
		const char *type = json_string_value(json_object_get(part, "type"));
		if (!type || strcmp(type, "text") || !json_is_string(t)) {
			fclose(f);
			free(buf);
			bad(e, key, "'%s': only {\"type\": \"text\", \"text\": ...} parts are supported", key);
			return NULL;
		}
		if (i)
			fputc('\n', f);
		fwrite(json_string_value(t), 1, json_string_length(t), f);
	}
	if (fclose(f)) {
		free(buf);
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		return NULL;
	}
	return buf;
}

static int chat_prompt(struct gw *gw, json_t *b, const struct gw_model *m, struct gw_req *r,
		       struct gw_api_err *e)
{
	json_t *msgs = json_object_get(b, "messages");
	size_t n = json_array_size(msgs), i;
	bool agp = true;
	int rc = -1;
	if (!json_is_array(msgs) || n == 0 || n > GW_MAX_MESSAGES)
		return bad(e, "messages", "'messages' must be a list of 1..%d messages", GW_MAX_MESSAGES);
	if (refuse_unless(b, "tools", 0, e) || refuse_unless(b, "functions", 0, e) ||
	    get_bool(b, "add_generation_prompt", &agp, e))
		return -1;
	json_t *tc = json_object_get(b, "tool_choice");
	if (tc && !json_is_null(tc) && !(json_is_string(tc) && !strcmp(json_string_value(tc), "none")))
		return bad(e, "tool_choice", "'tool_choice' is not supported by this server");
	json_t *rf = json_object_get(b, "response_format");
	if (rf && !json_is_null(rf) &&
	    !(json_is_string(json_object_get(rf, "type")) &&
	      !strcmp(json_string_value(json_object_get(rf, "type")), "text")))
		return bad(e, "response_format", "only response_format {\"type\": \"text\"} is supported");
	if (!m->tok || !m->tmpl)
		return bad(e, "messages", "cannot render a chat prompt: %s", m->why_no_chat);
	struct allm_chat_msg *cm = calloc(n, sizeof(*cm));
	char *prompt = NULL;
	size_t plen = 0;
	char err[300];
	if (!cm)
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	json_t *msg;
	json_array_foreach(msgs, i, msg) {
		const char *role = json_string_value(json_object_get(msg, "role"));
		if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))) {
			char key[40];
			snprintf(key, sizeof(key), "messages[%zu].role", i);
			bad(e, key, "'%s' must be \"system\", \"user\" or \"assistant\"", key);
			goto out;
		}
		cm[i].role = role;
		if (!(cm[i].content = content_of(msg, i, &cm[i].content_len, e)))
			goto out;
	}
	if (allm_chat_template_render(m->tmpl, cm, n, agp, &prompt, &plen, err, sizeof(err))) {
		bad(e, "messages", "the model's chat template (%s) refuses these messages: %s",
		    allm_chat_template_name(m->tmpl), err);
		goto out;
	}
	if (gw->o.log_level >= 3) {
		/* the exact prompt, JSON-escaped on one line (tests compare it) */
		json_t *j = json_stringn(prompt, plen);
		char *s = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
		gw_log(gw, 3, "chat prompt (%s): %s", allm_chat_template_name(m->tmpl), s ? s : "?");
		free(s);
		json_decref(j);
	}
	rc = tokenize(m, prompt, plen, false, r, e);
out:
	for (size_t k = 0; k < n; k++)
		free((char *)cm[k].content);
	free(cm);
	free(prompt);
	return rc;
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
			return bad(e, "stop", "'stop' must be 1..%d bytes", GW_MAX_STOP_LEN);
		return 0;
	}
	if (!json_is_array(s))
		return bad(e, "stop", "'stop' must be a string or a list of strings");
	json_array_foreach(s, i, v) {
		if (!json_is_string(v) || gw_stops_add(&r->stops, json_string_value(v), json_string_length(v)))
			return bad(e, "stop", "'stop' takes at most %d strings of 1..%d bytes", GW_MAX_STOPS,
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
	if (get_bool(b, "logprobs", &on, e) || get_int(b, "top_logprobs", 0, ALLM_LOGPROBS_MAX, &k, e))
		return -1;
	json_t *t = json_object_get(b, "top_logprobs");
	if (!on && t && !json_is_null(t))
		return bad(e, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
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
		return bad(e, "logit_bias", "'logit_bias' must map at most %d token ids to biases", ALLM_LOGIT_BIAS_MAX);
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
			return bad(e, "logit_bias", "'logit_bias' keys must be token ids (got '%.40s')", k);
		if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
			return bad(e, "logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
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
	    get_bool(b, "ignore_eos", &ignore_eos, e) || parse_stop(b, r, e) ||
	    get_num(b, "presence_penalty", -2, 2, &presence, e) ||
	    get_num(b, "frequency_penalty", -2, 2, &frequency, e) ||
	    get_num(b, "repetition_penalty", 1e-6, 10, &repetition, e) || parse_logprobs(b, chat, &logprobs, e))
		return -1;
	/* best_of would rank the choices by their log-probability: none are ranked here */
	if (best_of != 1 && best_of != n)
		return bad(e, "best_of", "'best_of' must be 1 or n: choices are not ranked");
	*ret_n = n;
	/* neutral values only: the engine has no such knob */
	if (parse_logit_bias(b, r, e) || get_int(b, "min_tokens", 0, INT32_MAX, &min_tokens, e) ||
	    refuse_unless(b, "suffix", 0, e))
		return -1;
	j = json_object_get(b, "priority");
	if (j && !json_is_null(j) && !(json_is_integer(j) && json_integer_value(j) == 0))
		return bad(e, "priority",
			   "'priority' is not supported: the engine orders requests by its own fairness priority");
	j = json_object_get(b, "stop_token_ids");
	if (j && !json_is_null(j)) {
		size_t i;
		json_t *v;
		if (!json_is_array(j) || json_array_size(j) > ALLM_SQE_MAX_STOP)
			return bad(e, "stop_token_ids", "'stop_token_ids' takes at most %d ids", ALLM_SQE_MAX_STOP);
		json_array_foreach(j, i, v)
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
				return bad(e, "stop_token_ids", "'stop_token_ids' must be token ids");
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

static void new_id(struct gw_req *r, const char *prefix)
{
	unsigned char b[12] = {0};
	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		memcpy(b, &r, sizeof(r) < sizeof(b) ? sizeof(r) : sizeof(b));
	int k = snprintf(r->id, sizeof(r->id), "%s", prefix);
	for (size_t i = 0; i < sizeof(b); i++)
		k += snprintf(r->id + k, sizeof(r->id) - (size_t)k, "%02x", b[i]);
}

/* A detokenizer that has seen the prompt, so the first generated token decodes as
 * it follows the prompt (SentencePiece strips the space of the text's first word
 * only: "Once" + "▁upon" must give " upon", not "upon"). */
static int prime_detok(const struct gw_model *m, struct gw_req *r, struct gw_api_err *e)
{
	/* the ids were checked against the vocabulary: only memory can fail here */
	if (allm_detok_create(m->tok, true, &r->detok) || allm_detok_prime(r->detok, r->ids, r->n_ids)) {
		allm_detok_free(r->detok);
		r->detok = NULL;
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	}
	return 0;
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
	free(r->lps);
	free(r->logit_bias);
	free(r->echo);
	free(r->text);
	gw_stops_free(&r->stops);
	gw_model_unref(r->model);
	free(r);
}

static int copy_of(void *dst, const void *src, size_t n)
{
	void **d = dst;
	*d = NULL;
	if (!src)
		return 0;
	if (!(*d = malloc(n ? n : 1)))
		return -ENOMEM;
	memcpy(*d, src, n);
	return 0;
}

/* 413 when r's prompt leaves no room in the context. */
static int check_context(const struct gw_model *m, const struct gw_req *r, struct gw_api_err *e)
{
	if (m->context > 0 && r->n_ids >= (size_t)m->context)
		return gw_api_fail(e, 413, "invalid_request_error", "context_length_exceeded", "prompt",
				   "This model's maximum context length is %d tokens; the prompt has %zu",
				   m->context, r->n_ids);
	return 0;
}

/* A copy of src for choice `index` of the lead r, with its own buffers and
 * decoder; registered in r's list at once, so gw_api_discard(r) frees it. */
static struct gw_req *copy_choice(const struct gw_model *m, struct gw_req *r, const struct gw_req *src,
				  uint32_t index, struct gw_api_err *e)
{
	struct gw_req *c = malloc(sizeof(*c));
	if (!c) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		return NULL;
	}
	*c = *src;
	c->lead = r;
	c->choices = NULL;
	c->n_choices = 0;
	c->index = index;
	c->detok = NULL;
	c->ids = NULL;
	c->text = c->echo = NULL;
	c->logit_bias = NULL;
	memset(&c->stops, 0, sizeof(c->stops));
	c->model = gw_model_ref(src->model);
	r->choices[r->n_choices++] = c;
	if (copy_of(&c->ids, src->ids, src->n_ids * sizeof(*src->ids)) ||
	    copy_of(&c->text, src->text, src->text ? src->text_len + 1 : 0) ||
	    copy_of(&c->echo, src->echo, src->echo ? src->echo_len + 1 : 0) ||
	    copy_of(&c->logit_bias, src->logit_bias, src->n_logit_bias * sizeof(*src->logit_bias)) ||
	    gw_stops_copy(&c->stops, &src->stops)) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		return NULL;
	}
	if (src->detok && prime_detok(m, c, e))
		return NULL;
	c->params.logit_bias = c->logit_bias;
	c->params.stop_ids = src->params.stop_ids ? c->stop_ids : NULL;
	return c;
}

/* The prompt of c: prompt p of a batch instead of the one it was copied with. */
static int swap_prompt(json_t *b, const struct gw_model *m, struct gw_req *c, json_t *p, struct gw_api_err *e)
{
	allm_detok_free(c->detok);
	free(c->ids);
	free(c->text);
	free(c->echo);
	c->detok = NULL;
	c->ids = NULL;
	c->text = c->echo = NULL;
	c->n_ids = c->text_len = c->echo_len = 0;
	if (one_prompt(b, m, p, c, e) || (m->tok && c->ids && prime_detok(m, c, e)))
		return -1;
	return check_context(m, c, e);
}

/* The choices beyond the lead r: n for each prompt of a batch (choice k * n + j is
 * prompt k's j-th), each sampled with the lead's seed + j: n samples, not one n
 * times (with temperature 0 they are the same text, as OpenAI's and vLLM's are),
 * and the same samples as requests of one prompt each would get. */
static int make_choices(json_t *b, const struct gw_model *m, struct gw_req *r, uint32_t n, struct gw_api_err *e)
{
	json_t *batch = r->chat ? NULL : prompt_batch(b);
	uint32_t n_prompts = batch ? (uint32_t)json_array_size(batch) : 1;
	if ((uint64_t)n_prompts * n > GW_MAX_CHOICES)
		return bad(e, batch ? "prompt" : "n", "at most %d choices per request (prompts x n: %u x %u)",
			   GW_MAX_CHOICES, n_prompts, n);
	r->n_per_prompt = n;
	if (n_prompts * n == 1)
		return 0;
	if (!(r->choices = calloc(n_prompts * n, sizeof(*r->choices))))
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	r->choices[0] = r;
	r->n_choices = 1;
	for (uint32_t k = 0; k < n_prompts; k++)
		for (uint32_t j = 0; j < n; j++) {
			if (k == 0 && j == 0)
				continue;
			/* the prompt's first choice carries its prompt; the others copy it */
			struct gw_req *c = copy_choice(m, r, j ? r->choices[k * n] : r, k * n + j, e);
			if (!c || (k > 0 && j == 0 && swap_prompt(b, m, c, json_array_get(batch, k), e)))
				return -1;
			c->params.seed = r->params.seed + j;
		}
	return 0;
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
		return bad(e, NULL, "the body is not valid JSON: %s (line %d, column %d)", jerr.text,
			   jerr.line, jerr.column);
	if (!json_is_object(b)) {
		bad(e, NULL, "the body must be a JSON object");
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
	if (parse_sampling(b, chat, r, &n, e) || get_bool(b, "stream", &r->stream, e))
		goto fail;
	json_t *so = json_object_get(b, "stream_options");
	if (so && !json_is_null(so)) {
		if (!r->stream) {
			bad(e, "stream_options", "'stream_options' is only allowed with \"stream\": true");
			goto fail;
		}
		if (get_bool(so, "include_usage", &r->include_usage, e))
			goto fail;
	}
	json_t *sti = json_object_get(b, "stop_token_ids");
	for (size_t i = 0; json_is_array(sti) && i < json_array_size(sti); i++)
		stop_ids[n_stop_ids++] = json_integer_value(json_array_get(sti, i));
	if (chat ? chat_prompt(gw, b, m, r, e) : completion_prompt(b, m, r, e))
		goto fail;
	if ((m->tok && r->ids && prime_detok(m, r, e)) || check_context(m, r, e))
		goto fail;
	/* chat's default: whatever room the context leaves (the engine stops there) */
	if (r->params.max_tokens == 0)
		r->params.max_tokens = m->context > 0 ? m->context - (int32_t)r->n_ids : INT32_MAX;
	if (r->params.min_tokens > r->params.max_tokens) {
		bad(e, "min_tokens", "'min_tokens' (%d) is above max_tokens (%d)", r->params.min_tokens,
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
	if (make_choices(b, m, r, (uint32_t)n, e))
		goto fail;
	json_decref(b);
	*ret = r;
	return 0;
fail:
	gw_api_discard(r);
	json_decref(b);
	return -1;
}
