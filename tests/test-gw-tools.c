/* Description: the gateway's tool calling (engined/gateway/gw-tools.c): model output in the Hermes/Qwen, Llama 3 and Mistral formats parsed into calls and content, whole and fed byte by byte (nothing of a call ever leaks as content, content is the same either way); malformed calls stay content; parallel_tool_calls false keeps one; the format read from a template's text; and the grammar a forced call gets (tool_choice required or named) accepts a well-formed call byte by byte and refuses plain text and another function's name; bad tools and tool_choice are 400s naming the field; the structured-output fields map to their grammar kinds, two at once and a grammar that does not compile are 400s naming them. */
#include "grammar.h"
#include "gw-structured.h"
#include "gw-tools.h"
#include "test-check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct result {
	char content[512];
	size_t n_content;
	uint32_t n_calls;
	char names[4][32];
	char args[4][128];
};

/* Feeds text whole (step 0) or step bytes at a time; collects content and calls. */
static struct result run(enum gw_tool_format fmt, bool one, const char *text, size_t step)
{
	struct result res = {0};
	struct gw_tool_parse p;
	gw_tool_parse_init(&p, fmt, one);
	size_t n = strlen(text), at = 0;
	do {
		size_t k = step ? (n - at < step ? n - at : step) : n;
		const char *c;
		size_t cn;
		uint32_t first;
		bool end = at + k == n;
		CHECK(!gw_tool_parse_feed(&p, text + at, k, end, &c, &cn, &first), "feed");
		/* a call's bytes never reach the content */
		CHECK(!memmem(c, cn, "<tool_call>", 11) || p.n_calls == 0 || one, "a call tag in content: %.*s",
		      (int)cn, c);
		memcpy(res.content + res.n_content, c, cn);
		res.n_content += cn;
		at += k;
	} while (at < n);
	res.n_calls = p.n_calls;
	for (uint32_t i = 0; i < p.n_calls && i < 4; i++) {
		snprintf(res.names[i], sizeof(res.names[i]), "%s", p.calls[i].name);
		snprintf(res.args[i], sizeof(res.args[i]), "%s", p.calls[i].args);
		CHECK(!strncmp(p.calls[i].id, "call_", 5) && strlen(p.calls[i].id) > 10, "call id %s", p.calls[i].id);
	}
	gw_tool_parse_free(&p);
	return res;
}

static void expect(enum gw_tool_format fmt, bool one, const char *text, const char *content, uint32_t n_calls,
		   const char *name0, const char *args0)
{
	for (size_t step = 0; step <= 3; step++) {
		struct result r = run(fmt, one, text, step);
		CHECK(r.n_content == strlen(content) && !memcmp(r.content, content, r.n_content),
		      "[%s] step %zu: content '%.*s', want '%s'", text, step, (int)r.n_content, r.content, content);
		CHECK(r.n_calls == n_calls, "[%s] step %zu: %u calls, want %u", text, step, r.n_calls, n_calls);
		if (n_calls && name0)
			CHECK(!strcmp(r.names[0], name0) && !strcmp(r.args[0], args0), "[%s] step %zu: call %s(%s)", text,
			      step, r.names[0], r.args[0]);
	}
}

static void parsing(void)
{
	const char *call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
	expect(GW_TOOLS_HERMES, false, call, "", 1, "get_weather", "{\"city\":\"Paris\"}");
	char two[512];
	snprintf(two, sizeof(two), "Let me check.\n%s\n%s", call, call);
	expect(GW_TOOLS_HERMES, false, two, "Let me check.", 2, "get_weather", "{\"city\":\"Paris\"}");
	/* parallel_tool_calls false: the second call stays text (never dropped) */
	struct result r = run(GW_TOOLS_HERMES, true, two, 1);
	CHECK(r.n_calls == 1 && strstr(r.content, "<tool_call>"), "one call: %u, content %s", r.n_calls, r.content);
	expect(GW_TOOLS_HERMES, false, "No tools needed: 2 < 3 and <tool is a word.", "No tools needed: 2 < 3 and <tool is a word.",
	       0, NULL, NULL);
	expect(GW_TOOLS_HERMES, false, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
	       "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", 0, NULL, NULL);
	/* the model stopped before the closing tag; arguments as a JSON string */
	expect(GW_TOOLS_HERMES, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}", "", 1, "f",
	       "{\"x\":1}");
	expect(GW_TOOLS_HERMES, false, "  \n", "  \n", 0, NULL, NULL);
	/* a bare call object as the whole output (no tags), and JSON that is not a call */
	expect(GW_TOOLS_HERMES, false, "\n{\"name\": \"f\", \"arguments\": {\"x\": 2}}\n", "", 1, "f", "{\"x\":2}");
	expect(GW_TOOLS_HERMES, false, "{\"x\": 2} <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
	       "{\"x\": 2}", 1, "f", "{}");
	expect(GW_TOOLS_LLAMA3, true, "{\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}", "", 1, "f", "{\"q\":\"x\"}");
	expect(GW_TOOLS_LLAMA3, true, "Hello {there}", "Hello {there}", 0, NULL, NULL);
	expect(GW_TOOLS_LLAMA3, true, "{\"not\": \"a call\"}", "{\"not\": \"a call\"}", 0, NULL, NULL);
	expect(GW_TOOLS_MISTRAL, false, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"a\": 1}}]",
	       "", 2, "f", "{}");
	expect(GW_TOOLS_MISTRAL, false, "[{\"name\": \"f\", \"arguments\": {}}]", "", 1, "f", "{}");
	expect(GW_TOOLS_MISTRAL, false, "[1] is a citation", "[1] is a citation", 0, NULL, NULL);
}

static void formats(void)
{
	bool sec;
	const char qwen[] = "{% if tools %}<tools>{{ tool }}</tools> <tool_call>{% endif %}";
	CHECK(allm_chat_template_tool_format(qwen, strlen(qwen), &sec) == GW_TOOLS_HERMES && sec, "qwen's");
	const char chatml[] = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}";
	CHECK(allm_chat_template_tool_format(chatml, strlen(chatml), &sec) == GW_TOOLS_HERMES && !sec, "chatml: no section");
	const char llama[] = "<|start_header_id|>{% if tools %}\"parameters\"{% endif %}";
	CHECK(allm_chat_template_tool_format(llama, strlen(llama), &sec) == GW_TOOLS_LLAMA3 && sec, "llama 3.1's");
	const char mistral[] = "{% if tools %}[AVAILABLE_TOOLS][TOOL_CALLS]{% endif %}";
	CHECK(allm_chat_template_tool_format(mistral, strlen(mistral), &sec) == GW_TOOLS_MISTRAL && sec, "mistral's");
}

/* Whether g accepts text byte by byte and may end there (a vocabulary of the 256 bytes). */
static bool accepts(const char *gbnf, const char *text)
{
	static struct allm_grammar_vocab *v;
	if (!v) {
		static uint8_t bytes[256];
		const uint8_t *ptr[256];
		uint32_t len[256];
		for (int i = 0; i < 256; i++)
			bytes[i] = (uint8_t)i, ptr[i] = &bytes[i], len[i] = 1;
		if (allm_grammar_vocab_create(256, ptr, len, &v))
			abort();
	}
	struct allm_grammar *g = NULL;
	struct allm_grammar_matcher *m = NULL;
	struct allm_err err = {{0}};
	bool ok = !allm_grammar_compile(ALLM_GRAMMAR_GBNF, gbnf, strlen(gbnf), v, &g, &err) &&
		  !allm_grammar_matcher_create(g, NULL, 0, &m);
	CHECK(ok, "compile: %s", err.msg);
	for (const char *p = text; ok && *p; p++)
		ok = allm_grammar_matcher_accept(m, (uint8_t)*p);
	ok = ok && allm_grammar_matcher_can_end(m);
	allm_grammar_matcher_free(m);
	allm_grammar_unref(g);
	return ok;
}

static int parse_tools(const char *body, int fmt, struct gw_req *r, struct gw_api_err *e)
{
	struct gw_model m = {.tool_format = fmt};
	json_t *b = json_loads(body, 0, NULL);
	if (!b)
		abort();
	memset(r, 0, sizeof(*r));
	allm_params_init(&r->params);
	int rc = gw_tools_parse(b, &m, r, e);
	json_decref(b);
	return rc;
}

#define TOOLS "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": " \
	      "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}, " \
	      "{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": \"a + b\"}}]"

static void forced(void)
{
	struct gw_req r;
	struct gw_api_err e = {0};
	CHECK(!parse_tools("{" TOOLS ", \"tool_choice\": \"required\"}", GW_TOOLS_HERMES, &r, &e), "%s", e.msg);
	CHECK(r.tools_on && r.params.grammar_kind == ALLM_GRAMMAR_GBNF && r.grammar, "required: a GBNF grammar");
	if (r.grammar) {
		CHECK(accepts(r.grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
		      "a call of get_weather");
		CHECK(accepts(r.grammar, "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
					 "{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"),
		      "two calls of add");
		CHECK(!accepts(r.grammar, "Sure!"), "plain text refused");
		CHECK(!accepts(r.grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"),
		      "get_weather without its required city refused");
	}
	free(r.grammar);
	CHECK(!parse_tools("{" TOOLS ", \"parallel_tool_calls\": false, \"tool_choice\": {\"type\": \"function\", "
			   "\"function\": {\"name\": \"add\"}}}", GW_TOOLS_HERMES, &r, &e), "%s", e.msg);
	if (r.grammar) {
		CHECK(accepts(r.grammar, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"), "add");
		CHECK(!accepts(r.grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"),
		      "the other function refused");
		CHECK(!accepts(r.grammar, "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
					  "{\"name\": \"add\", \"arguments\": {}}\n</tool_call>"),
		      "parallel_tool_calls false: one call");
	}
	free(r.grammar);
	CHECK(!parse_tools("{" TOOLS ", \"tool_choice\": \"required\"}", GW_TOOLS_LLAMA3, &r, &e), "%s", e.msg);
	if (r.grammar)
		CHECK(accepts(r.grammar, "{\"name\": \"add\", \"parameters\": {}}"), "llama 3: parameters");
	free(r.grammar);
	CHECK(!parse_tools("{" TOOLS ", \"tool_choice\": \"required\"}", GW_TOOLS_MISTRAL, &r, &e), "%s", e.msg);
	if (r.grammar)
		CHECK(accepts(r.grammar, "[{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"add\", \"arguments\": {}}]"),
		      "mistral: a list");
	free(r.grammar);
	CHECK(!parse_tools("{" TOOLS "}", GW_TOOLS_HERMES, &r, &e) && r.tools_on && !r.grammar, "auto: no grammar");
	CHECK(!parse_tools("{" TOOLS ", \"tool_choice\": \"none\"}", GW_TOOLS_HERMES, &r, &e) && !r.tools_on, "none");

	static const struct {
		const char *body, *param;
	} bad[] = {
		{"{" TOOLS ", \"tool_choice\": \"sometimes\"}", "tool_choice"},
		{"{" TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}", "tool_choice"},
		{"{\"tool_choice\": \"required\"}", "tool_choice"},
		{"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]}", "tools[0]"},
		{"{\"tools\": [{\"type\": \"retrieval\"}]}", "tools[0]"},
		{"{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
		 "\"object\", \"properties\": {\"a\": {\"allOf\": [{}]}}}}}], \"tool_choice\": \"required\"}", "tools"},
		{"{" TOOLS ", \"parallel_tool_calls\": 1}", "parallel_tool_calls"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&e, 0, sizeof(e));
		CHECK(parse_tools(bad[i].body, GW_TOOLS_HERMES, &r, &e) && e.status == 400 && !strcmp(e.param, bad[i].param),
		      "%s: want a 400 naming %s, got %d %s: %s", bad[i].body, bad[i].param, e.status, e.param, e.msg);
		free(r.grammar);
	}
}

static void structured(void)
{
	static const struct {
		const char *body;
		uint32_t kind;
		const char *param; /* an error naming it, or NULL */
	} cases[] = {
		{"{\"response_format\": {\"type\": \"text\"}}", ALLM_GRAMMAR_NONE, NULL},
		{"{\"response_format\": {\"type\": \"json_object\"}}", ALLM_GRAMMAR_JSON_OBJECT, NULL},
		{"{\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"strict\": true, "
		 "\"schema\": {\"type\": \"object\"}}}}", ALLM_GRAMMAR_JSON_SCHEMA, NULL},
		{"{\"response_format\": {\"type\": \"json_object\", \"schema\": {\"type\": \"integer\"}}}",
		 ALLM_GRAMMAR_JSON_SCHEMA, NULL},
		{"{\"grammar\": \"root ::= \\\"yes\\\" | \\\"no\\\"\"}", ALLM_GRAMMAR_GBNF, NULL},
		{"{\"json_schema\": {\"type\": \"string\"}}", ALLM_GRAMMAR_JSON_SCHEMA, NULL},
		{"{\"guided_json\": \"{\\\"type\\\": \\\"boolean\\\"}\"}", ALLM_GRAMMAR_JSON_SCHEMA, NULL},
		{"{\"guided_regex\": \"[0-9]{3}\"}", ALLM_GRAMMAR_REGEX, NULL},
		{"{\"guided_choice\": [\"a\", \"b\"]}", ALLM_GRAMMAR_CHOICE, NULL},
		{"{\"guided_grammar\": \"root ::= [a-z]+\"}", ALLM_GRAMMAR_GBNF, NULL},
		{"{\"structured_outputs\": {\"regex\": \"a|b\"}}", ALLM_GRAMMAR_REGEX, NULL},
		{"{\"structured_outputs\": {\"json_object\": true}}", ALLM_GRAMMAR_JSON_OBJECT, NULL},
		{"{\"structured_outputs\": {\"choice\": [\"x\"]}}", ALLM_GRAMMAR_CHOICE, NULL},
		{"{\"grammar\": \"root ::= \\\"a\\\"\", \"guided_regex\": \"a\"}", 0, "guided_regex"},
		{"{\"structured_outputs\": {\"regex\": \"a\", \"choice\": [\"a\"]}}", 0, "structured_outputs.choice"},
		{"{\"grammar\": \"root ::= foo\"}", 0, "grammar"},
		{"{\"guided_regex\": \"(a\"}", 0, "guided_regex"},
		{"{\"structured_outputs\": {\"whitespace_pattern\": \" \"}}", 0, "structured_outputs"},
		{"{\"response_format\": {\"type\": \"xml\"}}", 0, "response_format"},
		{"{\"guided_choice\": \"a\"}", 0, "guided_choice"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gw_grammar g;
		struct gw_api_err e = {0};
		json_t *b = json_loads(cases[i].body, 0, NULL);
		int rc = gw_structured_parse(b, &g, &e);
		if (cases[i].param)
			CHECK(rc && e.status == 400 && !strcmp(e.param, cases[i].param) && strstr(e.msg, cases[i].param),
			      "%s: want a 400 naming %s, got %d '%s': %s", cases[i].body, cases[i].param, e.status, e.param,
			      e.msg);
		else
			CHECK(!rc && g.kind == cases[i].kind, "%s: kind %u (want %u): %s", cases[i].body, g.kind,
			      cases[i].kind, e.msg);
		free(g.text);
		json_decref(b);
	}
	/* the place in the grammar is named */
	struct gw_grammar g;
	struct gw_api_err e = {0};
	json_t *b = json_loads("{\"grammar\": \"root ::= a\\na ::= [\"}", 0, NULL);
	CHECK(gw_structured_parse(b, &g, &e) && strstr(e.msg, "line 2"), "the error names the line: %s", e.msg);
	free(g.text);
	json_decref(b);
}

int main(void)
{
	parsing();
	formats();
	forced();
	structured();
	if (n_fail)
		return 1;
	printf("ok\n");
	return 0;
}
