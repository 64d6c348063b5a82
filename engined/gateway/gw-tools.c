/* Tool calling (gw-tools.h): the request's tools checked, the prompt's tools (the
 * template's, or the Hermes preamble), the grammar that forces a call, and the
 * output parsed into calls. */
#include "gw-tools.h"

#include "gw-structured.h"

#include "grammar.h"

#include <adaptivellm/params.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* Tools a request may offer. */
#define GW_MAX_TOOLS 128

/* --- the request ------------------------------------------------------------------ */

/* tools[i]: {"type": "function", "function": {"name", "description",
 * "parameters", "strict"}}; the name as OpenAI allows ([a-zA-Z0-9_-]{1,64}). */
static int check_tool(json_t *t, size_t i, struct gw_api_err *e)
{
	char key[48];
	const char *k;
	json_t *v;
	snprintf(key, sizeof(key), "tools[%zu]", i);
	json_t *fn = json_object_get(t, "function");
	const char *type = json_string_value(json_object_get(t, "type"));
	if (!json_is_object(t) || !json_is_object(fn) || (type && strcmp(type, "function")))
		return gw_api_bad(e, key, "'%s' must be {\"type\": \"function\", \"function\": {\"name\", \"description\", "
				  "\"parameters\"}}", key);
	json_object_foreach(t, k, v)
		if (strcmp(k, "type") && strcmp(k, "function"))
			return gw_api_bad(e, key, "'%s.%.40s' is not supported", key, k);
	json_object_foreach(fn, k, v) {
		bool ok = (!strcmp(k, "name") && json_is_string(v)) ||
			  (!strcmp(k, "description") && (json_is_string(v) || json_is_null(v))) ||
			  (!strcmp(k, "parameters") && (json_is_object(v) || json_is_null(v))) ||
			  (!strcmp(k, "strict") && (json_is_boolean(v) || json_is_null(v)));
		if (!ok)
			return gw_api_bad(e, key, "'%s.function.%.40s' is not supported or has the wrong type", key, k);
	}
	const char *name = json_string_value(json_object_get(fn, "name"));
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > 64 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != n)
		return gw_api_bad(e, key, "'%s.function.name' must be 1..64 of a-z, A-Z, 0-9, _ and -", key);
	return 0;
}

static const char *tool_name(json_t *t)
{
	return json_string_value(json_object_get(json_object_get(t, "function"), "name"));
}

/* The GBNF that holds the output to calls of the tools (only: that one) in
 * format fmt: a JSON Schema of one call (its name a const, its arguments the
 * tool's parameters) compiled by the grammar library, its root wrapped in the
 * format's frame. 0 with *ret (malloc'ed), or -1 with e naming "tools". */
static int call_grammar(json_t *tools, const char *only, enum gw_tool_format fmt, bool one, char **ret,
			struct gw_api_err *e)
{
	static const char head[] = "root ::= schema json-ws\n"; /* json-schema.c's first rule */
	const char *args_key = fmt == GW_TOOLS_LLAMA3 ? "parameters" : "arguments";
	json_t *any = json_array(), *t, *schema = NULL;
	char *text = NULL, *gbnf = NULL;
	struct allm_err err = {{0}};
	size_t i;
	int rc = -1;
	json_array_foreach(tools, i, t) {
		if (only && strcmp(only, tool_name(t)))
			continue;
		json_t *params = json_object_get(json_object_get(t, "function"), "parameters");
		json_t *args = json_is_object(params) ? json_incref(params) : json_pack("{s:s}", "type", "object");
		json_t *call = json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s, s], s:b}", "type", "object", "properties", "name",
					 "const", tool_name(t), args_key, args, "required", "name", args_key,
					 "additionalProperties", 0);
		if (!call || json_array_append_new(any, call))
			goto oom;
	}
	schema = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0)) : json_pack("{s:O}", "anyOf", any);
	if (!schema || !(text = json_dumps(schema, JSON_COMPACT)))
		goto oom;
	int gr = allm_grammar_to_gbnf(ALLM_GRAMMAR_JSON_SCHEMA, text, strlen(text), &gbnf, &err);
	if (gr == -ENOMEM)
		goto oom;
	if (gr) {
		gw_api_bad(e, "tools", "a forced tool call needs the tools' parameters as a grammar, and they do not "
			   "compile: %s", err.msg);
		goto out;
	}
	if (strncmp(gbnf, head, sizeof(head) - 1)) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "the JSON Schema compiler's GBNF has another root");
		goto out;
	}
	static const char *const frame[][2] = {
		[GW_TOOLS_HERMES] = {"root ::= \"<tool_call>\\n\" schema \"\\n</tool_call>\"",
				     " (\"\\n<tool_call>\\n\" schema \"\\n</tool_call>\")*"},
		[GW_TOOLS_LLAMA3] = {"root ::= schema", ""},
		[GW_TOOLS_MISTRAL] = {"root ::= \"[\" schema", " (\", \" schema)*"},
	};
	const char *rest = gbnf + sizeof(head) - 1;
	size_t n = strlen(frame[fmt][0]) + strlen(frame[fmt][1]) + strlen(rest) + 8;
	if (!(*ret = malloc(n)))
		goto oom;
	snprintf(*ret, n, "%s%s%s\n%s", frame[fmt][0], one ? "" : frame[fmt][1], fmt == GW_TOOLS_MISTRAL ? " \"]\"" : "",
		 rest);
	rc = 0;
	goto out;
oom:
	gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
out:
	allm_free(gbnf);
	free(text);
	json_decref(schema);
	json_decref(any);
	return rc;
}

int gw_tools_parse(json_t *b, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e)
{
	json_t *tools = json_object_get(b, "tools"), *tc = json_object_get(b, "tool_choice"), *t;
	bool parallel = true;
	size_t i;
	if (gw_api_get_bool(b, "parallel_tool_calls", &parallel, e))
		return -1;
	if (tools && !json_is_null(tools) && (!json_is_array(tools) || json_array_size(tools) > GW_MAX_TOOLS))
		return gw_api_bad(e, "tools", "'tools' must be a list of at most %d functions", GW_MAX_TOOLS);
	size_t n = json_array_size(tools);
	json_array_foreach(tools, i, t) {
		if (check_tool(t, i, e))
			return -1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(tool_name(t), tool_name(json_array_get(tools, j))))
				return gw_api_bad(e, "tools", "'tools' names the function '%s' twice", tool_name(t));
	}
	/* OpenAI's: "auto" with tools, "none" without */
	const char *choice = n ? "auto" : "none", *only = NULL;
	if (json_is_string(tc)) {
		choice = json_string_value(tc);
		if (strcmp(choice, "none") && strcmp(choice, "auto") && strcmp(choice, "required"))
			return gw_api_bad(e, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
					  "{\"type\": \"function\", \"function\": {\"name\": ...}}");
	} else if (tc && !json_is_null(tc)) {
		const char *type = json_string_value(json_object_get(tc, "type"));
		only = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
		if (!json_is_object(tc) || !only || (type && strcmp(type, "function")))
			return gw_api_bad(e, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
					  "{\"type\": \"function\", \"function\": {\"name\": ...}}");
		json_array_foreach(tools, i, t)
			if (!strcmp(tool_name(t), only))
				break;
		if (i == n)
			return gw_api_bad(e, "tool_choice", "'tool_choice' names '%.64s', which is not in 'tools'", only);
		choice = "required";
	}
	if (!n && strcmp(choice, "none") && strcmp(choice, "auto"))
		return gw_api_bad(e, "tool_choice", "'tool_choice' \"%s\" needs 'tools'", choice);
	if (!n || !strcmp(choice, "none"))
		return 0;
	if (r->params.logprobs > 0)
		return gw_api_bad(e, "logprobs", "'logprobs' with tools is not supported: a call's tokens are not "
			   "content (send tool_choice \"none\", or no logprobs)");
	r->tools_on = true;
	r->tool_format = (uint8_t)m->tool_format;
	/* Llama 3's format has room for one call */
	r->tools_one = !parallel || m->tool_format == GW_TOOLS_LLAMA3;
	if (strcmp(choice, "required"))
		return 0;
	if (r->params.grammar_kind != ALLM_GRAMMAR_NONE)
		return gw_api_bad(e, "tool_choice", "'tool_choice' forces a tool call, and the request asks for structured "
			   "output too: send one");
	char *g;
	if (call_grammar(tools, only, m->tool_format, r->tools_one, &g, e))
		return -1;
	if (gw_structured_check(ALLM_GRAMMAR_GBNF, g, strlen(g), "tools", e)) {
		free(g);
		return -1;
	}
	r->params.grammar_kind = ALLM_GRAMMAR_GBNF;
	r->grammar = g;
	r->grammar_len = strlen(g);
	return 0;
}

/* --- the prompt ------------------------------------------------------------------- */

/* Appends s to the content of message o. */
static int append_content(json_t *o, const char *s, size_t n)
{
	json_t *c = json_object_get(o, "content");
	size_t have = json_string_length(c);
	char *t = malloc(have + n + 1);
	if (!t)
		return -1;
	memcpy(t, json_string_value(c) ? json_string_value(c) : "", have);
	memcpy(t + have, s, n);
	int rc = json_object_set_new(o, "content", json_stringn(t, have + n));
	free(t);
	return rc;
}

/* The Hermes preamble, and earlier calls and results written as that format has
 * them, for a template that renders no tools. */
static int preamble(json_t *tools, json_t *cm)
{
	char *buf = NULL;
	size_t len = 0, i;
	json_t *t, *msg;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return -1;
	fputs("# Tools\n\nYou may call one or more functions to help with the user's request. Their signatures, "
	      "as JSON inside <tools></tools> tags:\n<tools>", f);
	json_array_foreach(tools, i, t) {
		char *s = json_dumps(t, JSON_COMPACT);
		fprintf(f, "\n%s", s ? s : "");
		free(s);
	}
	fputs("\n</tools>\n\nTo call a function, answer with a JSON object of its name and arguments inside "
	      "<tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
	      "<args-json-object>}\n</tool_call>", f);
	if (fclose(f))
		return -1;
	json_t *first = json_array_get(cm, 0);
	int rc;
	if (!strcmp(json_string_value(json_object_get(first, "role")), "system"))
		rc = append_content(first, "\n\n", 2) || append_content(first, buf, len);
	else
		rc = json_array_insert_new(cm, 0, json_pack("{s:s, s:s%}", "role", "system", "content", buf, len));
	free(buf);
	if (rc)
		return -1;
	json_array_foreach(cm, i, msg) {
		const char *role = json_string_value(json_object_get(msg, "role"));
		json_t *calls = json_object_get(msg, "tool_calls"), *c;
		size_t k;
		json_array_foreach(calls, k, c) {
			json_t *fn = json_object_get(c, "function");
			json_t *one = json_pack("{s:O, s:O}", "name", json_object_get(fn, "name"), "arguments",
						json_object_get(fn, "arguments"));
			char *s = one ? json_dumps(one, JSON_COMPACT) : NULL;
			json_decref(one);
			if (!s)
				return -1;
			const char *sep = json_string_length(json_object_get(msg, "content")) ? "\n" : "";
			rc = append_content(msg, sep, strlen(sep)) || append_content(msg, "<tool_call>\n", 12) ||
			     append_content(msg, s, strlen(s)) || append_content(msg, "\n</tool_call>", 13);
			free(s);
			if (rc)
				return -1;
		}
		json_object_del(msg, "tool_calls");
		if (role && !strcmp(role, "tool")) {
			json_t *c0 = json_object_get(msg, "content");
			size_t n = strlen("<tool_response>\n") + json_string_length(c0) + strlen("\n</tool_response>") + 1;
			char *s = malloc(n);
			if (!s)
				return -1;
			snprintf(s, n, "<tool_response>\n%s\n</tool_response>", json_string_value(c0));
			rc = json_object_set_new(msg, "content", json_string(s)) ||
			     json_object_set_new(msg, "role", json_string("user"));
			free(s);
			if (rc)
				return -1;
		}
	}
	return 0;
}

int gw_tools_prompt(json_t *b, const struct gw_model *m, json_t *cm, json_t **ret_tools, struct gw_api_err *e)
{
	json_t *tools = json_object_get(b, "tools");
	const char *choice = json_string_value(json_object_get(b, "tool_choice"));
	*ret_tools = NULL;
	if (json_array_size(tools) == 0 || (choice && !strcmp(choice, "none")))
		return 0;
	if (m->tool_section) {
		*ret_tools = tools;
		return 0;
	}
	if (preamble(tools, cm))
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	return 0;
}

/* --- the output ------------------------------------------------------------------- */

static const char *const opener[] = {
	[GW_TOOLS_HERMES] = "<tool_call>",
	[GW_TOOLS_LLAMA3] = "<|python_tag|>",
	[GW_TOOLS_MISTRAL] = "[TOOL_CALLS]",
};

void gw_tool_parse_init(struct gw_tool_parse *p, enum gw_tool_format fmt, bool one)
{
	memset(p, 0, sizeof(*p));
	p->fmt = fmt;
	p->one = one;
}

void gw_tool_parse_free(struct gw_tool_parse *p)
{
	for (uint32_t i = 0; i < p->n_calls; i++) {
		free(p->calls[i].name);
		free(p->calls[i].args);
	}
	free(p->calls);
	free(p->buf);
	free(p->out);
	free(p->ws);
	memset(p, 0, sizeof(*p));
}

static int grow(char **s, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	char *t = realloc(*s, c);
	if (!t)
		return -ENOMEM;
	*s = t;
	*cap = c;
	return 0;
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* buf[from, to) is content: out, but its trailing white space is held (between
 * calls it is their layout, not content). */
static int say(struct gw_tool_parse *p, size_t from, size_t to)
{
	if (from >= to)
		return 0;
	size_t k = to;
	while (k > from && is_ws(p->buf[k - 1]))
		k--;
	if (k > from) { /* text: the white space held before it is content too */
		if (grow(&p->out, &p->out_cap, p->out_len + p->ws_len + (k - from)))
			return -ENOMEM;
		if (p->ws_len) /* (memcpy from a NULL buffer is undefined even for 0 bytes) */
			memcpy(p->out + p->out_len, p->ws, p->ws_len);
		memcpy(p->out + p->out_len + p->ws_len, p->buf + from, k - from);
		p->out_len += p->ws_len + (k - from);
		p->ws_len = 0;
	}
	if (to == k)
		return 0;
	if (grow(&p->ws, &p->ws_cap, p->ws_len + (to - k)))
		return -ENOMEM;
	memcpy(p->ws + p->ws_len, p->buf + k, to - k);
	p->ws_len += to - k;
	return 0;
}

/* A call from JSON value o: {"name": string, "arguments" (or Llama's
 * "parameters"): an object, or a string holding one}. 1 taken, 0 not a call. */
static int take_call(struct gw_tool_parse *p, json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	json_t *a = json_object_get(o, "arguments");
	if (!a)
		a = json_object_get(o, "parameters");
	json_t *args = json_is_string(a) ? json_loads(json_string_value(a), 0, NULL) : json_incref(a);
	if (!name || !json_is_object(args) || (p->one && p->n_calls)) {
		json_decref(args);
		return 0;
	}
	if (p->n_calls == p->cap_calls) {
		uint32_t c = p->cap_calls ? p->cap_calls * 2 : 4;
		struct gw_tool_call *n = realloc(p->calls, c * sizeof(*n));
		if (!n) {
			json_decref(args);
			return -ENOMEM;
		}
		p->calls = n;
		p->cap_calls = c;
	}
	struct gw_tool_call *c = &p->calls[p->n_calls];
	memset(c, 0, sizeof(*c));
	c->name = strdup(name);
	c->args = json_dumps(args, JSON_COMPACT);
	json_decref(args);
	if (!c->name || !c->args) {
		free(c->name);
		free(c->args);
		return -ENOMEM;
	}
	unsigned char r[12] = {0};
	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		memcpy(r, &c, sizeof(c) < sizeof(r) ? sizeof(c) : sizeof(r));
	int k = snprintf(c->id, sizeof(c->id), "call_");
	for (size_t i = 0; i < sizeof(r); i++)
		k += snprintf(c->id + k, sizeof(c->id) - (size_t)k, "%02x", r[i]);
	p->n_calls++;
	return 1;
}

/* The calls in buf[from, to): one JSON object, or (Mistral's) a list of them.
 * 1 all taken, 0 not calls (nothing taken), -ENOMEM. */
static int take_json(struct gw_tool_parse *p, size_t from, size_t to)
{
	json_t *v = json_loadb(p->buf + from, to - from, JSON_DECODE_ANY, NULL), *o;
	uint32_t before = p->n_calls;
	size_t i;
	int rc = 1;
	if (json_is_object(v)) {
		rc = take_call(p, v);
	} else if (json_is_array(v) && json_array_size(v)) {
		json_array_foreach(v, i, o) {
			if (p->one && p->n_calls > before)
				break; /* parallel_tool_calls false: the first of the list */
			if ((rc = take_call(p, o)) != 1)
				break;
		}
	} else {
		rc = 0;
	}
	json_decref(v);
	if (rc != 1) { /* all or nothing */
		while (p->n_calls > before) {
			p->n_calls--;
			free(p->calls[p->n_calls].name);
			free(p->calls[p->n_calls].args);
		}
	}
	return rc;
}

/* The longest end of s[0..n) that begins tag (a tag cut by the stream). */
static size_t tag_start(const char *s, size_t n, const char *tag)
{
	size_t t = strlen(tag);
	for (size_t k = ALLM_MIN(n, t - 1); k > 0; k--)
		if (!memcmp(s + n - k, tag, k))
			return k;
	return 0;
}

/* Says the content up to the next opener of calls: there, p->at is at it and
 * in_calls set; without one all is said but what may begin it. 0 or -ENOMEM. */
static int to_opener(struct gw_tool_parse *p, const char *open, bool end)
{
	char *o = memmem(p->buf + p->at, p->len - p->at, open, strlen(open));
	size_t to = o ? (size_t)(o - p->buf) : p->len - (end ? 0 : tag_start(p->buf + p->at, p->len - p->at, open));
	int rc = say(p, p->at, to);
	p->at = to;
	p->in_calls = o != NULL;
	return rc;
}

/* Hermes: <tool_call> JSON </tool_call>, anywhere, any number; or the whole
 * output one bare JSON call. */
static int feed_hermes(struct gw_tool_parse *p, bool end)
{
	static const char open[] = "<tool_call>", close[] = "</tool_call>";
	int rc;
	/* a whole output that is one bare call object, without the tags (Qwen2.5-Coder
	 * answers so at times): held to the end, calls if it parses, else Hermes text */
	if (p->said == 0 && !p->in_calls && !p->bare_seen) {
		size_t s = p->at;
		while (s < p->len && is_ws(p->buf[s]))
			s++;
		if (s == p->len && !end)
			return 0;
		p->bare_seen = true;
		p->bare = s < p->len && p->buf[s] == '{';
	}
	if (p->bare) {
		if (!end)
			return 0;
		p->bare = false;
		if ((rc = take_json(p, p->at, p->len)) != 0) {
			p->at = rc == 1 ? p->len : p->at;
			return rc < 0 ? rc : 0;
		}
	}
	for (;;) {
		if (!p->in_calls && ((rc = to_opener(p, open, end)) || !p->in_calls))
			return rc;
		size_t body = p->at + sizeof(open) - 1;
		char *c = memmem(p->buf + body, p->len - body, close, sizeof(close) - 1);
		if (!c && !end)
			return 0; /* the call is still coming */
		size_t stop = c ? (size_t)(c - p->buf) : p->len;
		/* at the end a call may lack its closing tag (the model stopped there) */
		if ((rc = take_json(p, body, stop)) < 0)
			return rc;
		size_t next = c ? stop + sizeof(close) - 1 : p->len;
		if (rc == 0 && (rc = say(p, p->at, next)))
			return rc;
		p->at = next;
		p->in_calls = false;
		if (!c)
			return 0;
	}
}

/* Llama 3 and Mistral: the calls are the rest of the output, from their opener
 * (<|python_tag|>, [TOOL_CALLS]) or a bare JSON start of the whole output ({ for
 * Llama, [ for Mistral): held to the end, then calls if they parse, else content. */
static int feed_tail(struct gw_tool_parse *p, bool end)
{
	const char *open = opener[p->fmt];
	size_t olen = strlen(open);
	int rc;
	if (!p->in_calls) {
		size_t s = p->at;
		if (p->said == 0) { /* nothing said yet: the output may start with a call */
			while (s < p->len && is_ws(p->buf[s]))
				s++;
			char want = p->fmt == GW_TOOLS_LLAMA3 ? '{' : '[';
			if (s < p->len && p->buf[s] == want) {
				p->in_calls = true;
				p->at = s;
			}
		}
		if (!p->in_calls) {
			if ((rc = to_opener(p, open, end)) || !p->in_calls)
				return rc;
			p->at += olen;
		}
	}
	if (!end)
		return 0;
	/* a bare start may still be the opener ("[TOOL_CALLS]" begins with "[") */
	size_t from = p->at;
	if (p->len - from >= olen && !memcmp(p->buf + from, open, olen))
		from += olen;
	if ((rc = take_json(p, from, p->len)) < 0)
		return rc;
	if (rc == 0 && (rc = say(p, p->at, p->len)))
		return rc;
	p->at = p->len;
	return 0;
}

int gw_tool_parse_feed(struct gw_tool_parse *p, const char *text, size_t n, bool end, const char **content,
		       size_t *content_len, uint32_t *first_call)
{
	*first_call = p->n_calls;
	p->out_len = 0;
	if (grow(&p->buf, &p->cap, p->len + n + 1))
		return -ENOMEM;
	memcpy(p->buf + p->len, text, n);
	p->len += n;
	p->buf[p->len] = 0;
	int rc = p->fmt == GW_TOOLS_HERMES ? feed_hermes(p, end) : feed_tail(p, end);
	if (rc)
		return rc;
	/* the white space held at the end: content only when there were no calls */
	if (end && p->n_calls == 0 && p->ws_len) {
		if (grow(&p->out, &p->out_cap, p->out_len + p->ws_len))
			return -ENOMEM;
		memcpy(p->out + p->out_len, p->ws, p->ws_len);
		p->out_len += p->ws_len;
		p->ws_len = 0;
	}
	p->said += p->out_len;
	*content = p->out ? p->out : "";
	*content_len = p->out_len;
	return 0;
}

json_t *gw_tool_call_json(const struct gw_tool_call *c)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", c->id, "type", "function", "function", "name", c->name,
			 "arguments", c->args);
}

json_t *gw_tool_call_delta_json(const struct gw_tool_call *c, uint32_t index, bool head)
{
	if (head)
		return json_pack("{s:I, s:s, s:s, s:{s:s, s:s}}", "index", (json_int_t)index, "id", c->id, "type",
				 "function", "function", "name", c->name, "arguments", "");
	return json_pack("{s:I, s:{s:s}}", "index", (json_int_t)index, "function", "arguments", c->args);
}
