/* The prompt side of a generation request (gw-openai.h): a completion's prompt
 * (text or token ids, one or a batch) or a chat's messages rendered by the model's
 * template, tokenized as the engine would, its echo, the decoder primed with it,
 * the context checked; and the request's choices, one per prompt x n. */
#include "gw-fields.h"
#include "gw-openai.h"
#include "gw-tools.h"

#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most chat messages one request may carry (the body cap bounds bytes). */
#define GW_MAX_MESSAGES 4096

static int ready(const struct gw_model *m, struct gw_req *r, struct gw_api_err *e);

static int ids_from(json_t *a, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e)
{
	size_t n = json_array_size(a), i;
	json_t *v;
	int32_t vocab = m->tok ? allm_tokenizer_vocab_size(m->tok) : INT32_MAX;
	if (n == 0)
		return gw_api_bad(e, "prompt", "'prompt' must not be an empty list of token ids");
	if (!(r->ids = malloc(n * sizeof(int32_t))))
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v))
			return gw_api_bad(e, "prompt", "prompt token at %zu is not an integer id (0..%d)", i, vocab - 1);
		if (json_integer_value(v) < 0 || json_integer_value(v) >= vocab)
			return gw_api_bad(e, "prompt", "prompt token at %zu (id %lld) is not in 0..%d", i,
					  (long long)json_integer_value(v), vocab - 1);
		r->ids[i] = (int32_t)json_integer_value(v);
	}
	r->n_ids = n;
	return 0;
}

/* Tokenizes text the way the engine would (add_special: BOS/EOS as the tokenizer's
 * post-processor says), or without special tokens for a rendered chat prompt,
 * whose template already wrote them; plain (NULL or a byte per byte of text):
 * where special tokens must not be read (what a chat's user wrote). */
static int tokenize(const struct gw_model *m, const char *text, size_t len, bool add_special,
		    const uint8_t *plain, struct gw_req *r, struct gw_api_err *e)
{
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0;
	if (allm_tokenizer_encode_marked(m->tok, text, len, add_special, plain, &ids, &n, &err))
		return gw_api_bad(e, "prompt", "cannot tokenize the prompt: %s", err.msg);
	if (n == 0) {
		allm_free(ids);
		return gw_api_bad(e, "prompt", "the prompt is empty (no tokens)");
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
	if (gw_api_get_bool(b, "echo", &echo, e))
		return -1;
	if (!echo)
		return 0;
	if (r->params.logprobs > 0)
		return gw_api_bad(e, "echo", "'echo' with 'logprobs' needs the prompt's log-probabilities, which this "
				      "server does not compute");
	if (json_is_string(p)) {
		r->echo_len = json_string_length(p);
		r->echo = malloc(r->echo_len + 1);
		if (r->echo)
			memcpy(r->echo, json_string_value(p), r->echo_len + 1);
	} else if (!m->tok) {
		return gw_api_bad(e, "echo", "'echo' of token ids needs the model's tokenizer");
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
		return gw_api_bad(e, "prompt", "'prompt' must be a string or a list of token ids");
	const char *s = json_string_value(p);
	size_t n = json_string_length(p);
	if ((rc = echo_prompt(b, m, p, r, e)))
		return rc;
	if (m->tok)
		return tokenize(m, s, n, true, NULL, r, e);
	/* no tokenizer here: the engine tokenizes (and says if it cannot) */
	if (!(r->text = malloc(n + 1)))
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	memcpy(r->text, s, n + 1);
	r->text_len = n;
	return 0;
}

int gw_prompt_completion(json_t *b, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e)
{
	json_t *batch = prompt_batch(b); /* the first here; gw_prompt_choices does the others */
	return one_prompt(b, m, batch ? json_array_get(batch, 0) : json_object_get(b, "prompt"), r, e) ||
			       ready(m, r, e)
		       ? -1
		       : 0;
}

/* A message's content: a string, or a list of {"type": "text", "text": ...} parts
 * joined with newlines (as vLLM does); an assistant's may be null or absent (what a
 * tool-calling client sends back), which is empty text. Returns a malloc'ed copy. */
static char *content_of(json_t *msg, size_t idx, bool assistant, size_t *len, struct gw_api_err *e)
{
	json_t *c = json_object_get(msg, "content");
	char key[48];
	snprintf(key, sizeof(key), "messages[%zu].content", idx);
	if (json_is_string(c) || (assistant && (!c || json_is_null(c)))) {
		*len = c && !json_is_null(c) ? json_string_length(c) : 0;
		char *s = malloc(*len + 1);
		if (!s)
			gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		else if (*len)
			memcpy(s, json_string_value(c), *len + 1);
		else
			*s = 0;
		return s;
	}
	if (!json_is_array(c)) {
		gw_api_bad(e, key, "'%s' must be a string or a list of text parts%s", key,
			   assistant ? " (or null)" : "");
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
			gw_api_bad(e, key, "'%s': only {\"type\": \"text\", \"text\": ...} parts are supported", key);
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

/* One tool call of an assistant message as the template sees it: transformers'
 * (and vLLM's) shape, the arguments an object (OpenAI sends them as a JSON
 * string). NULL after filling e. */
static json_t *tool_call_of(json_t *tc, size_t i, size_t k, struct gw_api_err *e)
{
	char key[80];
	json_t *fn = json_object_get(tc, "function");
	json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
	snprintf(key, sizeof(key), "messages[%zu].tool_calls[%zu]", i, k);
	if (!json_is_object(tc) || !json_is_string(name)) {
		gw_api_bad(e, key, "'%s' must be {\"type\": \"function\", \"function\": {\"name\": ..., \"arguments\": ...}}", key);
		return NULL;
	}
	json_t *a = NULL;
	if (json_is_string(args))
		a = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
	else if (json_is_object(args))
		a = json_incref(args);
	else if (!args)
		a = json_object();
	if (!json_is_object(a)) {
		json_decref(a);
		gw_api_bad(e, key, "'%s.function.arguments' must be a JSON object (or a string holding one)", key);
		return NULL;
	}
	json_t *id = json_object_get(tc, "id");
	json_t *out = json_pack("{s:s, s:{s:O, s:o}}", "type", "function", "function", "name", name, "arguments", a);
	if (out && json_is_string(id))
		json_object_set(out, "id", id);
	return out;
}

/* The messages as the chat template sees them: role (OpenAI's "developer" is
 * "system" to a template), content (text parts joined; may be null or absent
 * beside an assistant's tool calls: then ""), name, tool_calls, tool_call_id.
 * NULL after filling e. */
static json_t *chat_messages(json_t *msgs, struct gw_api_err *e)
{
	json_t *out = json_array(), *msg;
	size_t i;
	char key[80];
	if (!out) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		return NULL;
	}
	json_array_foreach(msgs, i, msg) {
		char why[300];
		const char *f = json_is_object(msg) ? gw_fields_refused(msg, GW_EP_MESSAGE, why, sizeof(why)) : NULL;
		if (f) {
			snprintf(key, sizeof(key), "messages[%zu].%.20s", i, f);
			gw_api_bad(e, key, "%s", why);
			goto fail;
		}
		const char *role = json_string_value(json_object_get(msg, "role"));
		static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
		size_t k = 0;
		while (role && k < 5 && strcmp(role, roles[k]))
			k++;
		if (!role || k == 5) {
			snprintf(key, sizeof(key), "messages[%zu].role", i);
			gw_api_bad(e, key, "'%s' must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\"", key);
			goto fail;
		}
		json_t *tcs = json_object_get(msg, "tool_calls"), *c = json_object_get(msg, "content");
		bool calls = !strcmp(role, "assistant") && json_array_size(tcs) > 0;
		json_t *o = json_pack("{s:s}", "role", k == 1 ? "system" : role);
		if (!o || json_array_append_new(out, o)) {
			gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
			goto fail;
		}
		if ((!c || json_is_null(c)) && calls) {
			/* "" rather than None, as vLLM passes it: most templates add the
			 * content to a string, which None makes a TypeError */
			json_object_set_new(o, "content", json_string(""));
		} else {
			size_t len = 0;
			char *text = content_of(msg, i, k == 3, &len, e);
			if (!text)
				goto fail;
			json_object_set_new(o, "content", json_stringn(text, len));
			free(text);
		}
		static const char *const strs[] = {"name", "tool_call_id"};
		for (size_t s = 0; s < 2; s++) {
			json_t *v = json_object_get(msg, strs[s]);
			if (v && !json_is_string(v)) {
				snprintf(key, sizeof(key), "messages[%zu].%s", i, strs[s]);
				gw_api_bad(e, key, "'%s' must be a string", key);
				goto fail;
			}
			if (v)
				json_object_set(o, strs[s], v);
		}
		if (tcs && !json_is_null(tcs) && !json_is_array(tcs)) {
			snprintf(key, sizeof(key), "messages[%zu].tool_calls", i);
			gw_api_bad(e, key, "'%s' must be a list", key);
			goto fail;
		}
		if (calls) {
			json_t *l = json_array(), *tc;
			size_t j;
			json_object_set_new(o, "tool_calls", l);
			json_array_foreach(tcs, j, tc) {
				json_t *one = tool_call_of(tc, i, j, e);
				if (!one)
					goto fail;
				json_array_append_new(l, one);
			}
		}
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

/* The ids, for the debug log (tests read which special tokens a prompt holds). */
static void log_ids(struct gw *gw, const struct gw_req *r)
{
	char *buf = NULL;
	size_t len;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return;
	for (size_t i = 0; i < r->n_ids; i++)
		fprintf(f, "%s%d", i ? "," : "", r->ids[i]);
	if (!fclose(f))
		gw_log(gw, ALLM_LOG_DEBUG, "chat prompt ids: [%s]", buf);
	free(buf);
}

int gw_prompt_render(struct gw *gw, json_t *b, const struct gw_model *m, char **ret, size_t *ret_len,
		     uint8_t **ret_plain, struct gw_api_err *e)
{
	json_t *msgs = json_object_get(b, "messages");
	size_t n = json_array_size(msgs);
	bool agp = true;
	int rc = -1;
	if (!json_is_array(msgs) || n == 0 || n > GW_MAX_MESSAGES)
		return gw_api_bad(e, "messages", "'messages' must be a list of 1..%d messages", GW_MAX_MESSAGES);
	if (gw_api_get_bool(b, "add_generation_prompt", &agp, e))
		return -1;
	if (!m->tok || !m->tmpl)
		return gw_api_bad(e, "messages", "cannot render a chat prompt: %s", m->why_no_chat);
	struct allm_tmpl_out out = {0};
	uint8_t *plain = NULL;
	char err[600];
	json_t *cm = chat_messages(msgs, e);
	if (!cm)
		return -1;
	/* the template's tools, or none (tool_choice none; or the gateway's preamble
	 * written into cm for a template without a tool section: gw-tools.c) */
	json_t *tools;
	if (gw_tools_prompt(b, m, cm, &tools, e))
		goto out;
	bool with_tools = tools != NULL;
	const struct allm_chat_template *ct = with_tools && m->tmpl_tools ? m->tmpl_tools : m->tmpl;
	int tr = allm_chat_template_render(ct, cm, with_tools ? tools : NULL, agp, &out, err, sizeof(err));
	if (tr == -ENOMEM) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		goto out;
	}
	if (tr) {
		gw_api_bad(e, "messages", "the model's chat template (%s) refuses these messages: %s",
			   allm_chat_template_name(ct), err);
		goto out;
	}
	if (gw->o.log_level >= ALLM_LOG_DEBUG) {
		/* the exact prompt, JSON-escaped on one line (tests compare it) */
		json_t *j = json_stringn(out.text, out.len);
		char *s = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
		gw_log(gw, ALLM_LOG_DEBUG, "chat prompt (%s): %s", allm_chat_template_name(ct), s ? s : "?");
		free(s);
		json_decref(j);
	}
	/* what came from the messages is text, whatever it spells (issue E: role injection) */
	if (!(plain = calloc(out.len + 1, 1))) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < out.n_segs; k++)
		if (out.segs[k].data)
			memset(plain + out.segs[k].off, 1, out.segs[k].len);
	*ret = out.text;
	*ret_len = out.len;
	*ret_plain = plain;
	out.text = NULL;
	plain = NULL;
	rc = 0;
out:
	json_decref(cm);
	allm_tmpl_out_free(&out);
	free(plain);
	return rc;
}

int gw_prompt_chat(struct gw *gw, json_t *b, const struct gw_model *m, struct gw_req *r,
		   struct gw_api_err *e)
{
	char *prompt = NULL;
	size_t plen = 0;
	uint8_t *plain = NULL;
	if (gw_prompt_render(gw, b, m, &prompt, &plen, &plain, e))
		return -1;
	/* the template wrote the special tokens: none added */
	int rc = tokenize(m, prompt, plen, false, plain, r, e) || ready(m, r, e) ? -1 : 0;
	if (!rc && gw->o.log_level >= ALLM_LOG_DEBUG)
		log_ids(gw, r);
	free(prompt);
	free(plain);
	return rc;
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

/* A copy of src for choice `index` of the lead r; registered in r's list at once,
 * so gw_api_discard(r) frees it. share: it uses src's prompt buffers (the same
 * prompt: one copy for n choices); else it has its own logit bias and no prompt
 * yet (swap_prompt gives it one). */
static struct gw_req *copy_choice(const struct gw_model *m, struct gw_req *r, struct gw_req *src, uint32_t index,
				  bool share, struct gw_api_err *e)
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
	c->owner = share ? src : NULL; /* src owns its buffers: a prompt's first choice */
	if (!share) {
		c->ids = NULL;
		c->text = c->echo = NULL;
		c->n_ids = c->text_len = c->echo_len = 0;
		c->logit_bias = NULL;
		c->grammar = NULL;
	}
	memset(&c->stops, 0, sizeof(c->stops));
	c->model = gw_model_ref(src->model);
	r->choices[r->n_choices++] = c;
	if ((!share && copy_of(&c->logit_bias, src->logit_bias, src->n_logit_bias * sizeof(*src->logit_bias))) ||
	    (!share && copy_of(&c->grammar, src->grammar, src->grammar_len)) ||
	    gw_stops_copy(&c->stops, &src->stops)) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		return NULL;
	}
	return c;
}

/* The prompt of c (a copy without one): prompt p of a batch. */
static int set_prompt(json_t *b, const struct gw_model *m, struct gw_req *c, json_t *p, struct gw_api_err *e)
{
	return one_prompt(b, m, p, c, e) || ready(m, c, e) ? -1 : 0;
}

/* The choices beyond the lead r: n for each prompt of a batch (choice k * n + j is
 * prompt k's j-th), each sampled with the lead's seed + j: n samples, not one n
 * times (with temperature 0 they are the same text, as OpenAI's and vLLM's are),
 * and the same samples as requests of one prompt each would get. */
int gw_prompt_choices(json_t *b, const struct gw_model *m, struct gw_req *r, uint32_t n, struct gw_api_err *e)
{
	json_t *batch = r->chat ? NULL : prompt_batch(b);
	uint32_t n_prompts = batch ? (uint32_t)json_array_size(batch) : 1;
	if ((uint64_t)n_prompts * n > GW_MAX_CHOICES)
		return gw_api_bad(e, batch ? "prompt" : "n", "at most %d choices per request (prompts x n: %u x %u)",
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
			/* the prompt's first choice carries its prompt; the others share it */
			bool first = k > 0 && j == 0;
			struct gw_req *c = copy_choice(m, r, j ? r->choices[k * n] : r, k * n + j, !first, e);
			if (!c || (first && set_prompt(b, m, c, json_array_get(batch, k), e)))
				return -1;
			c->params.seed = r->params.seed + j;
		}
	return 0;
}


/* A prompt in r: the context checked. */
static int ready(const struct gw_model *m, struct gw_req *r, struct gw_api_err *e)
{
	return check_context(m, r, e);
}
