/* Tool calling on /v1/chat/completions (issue 51): `tools`, `tool_choice` (none,
 * auto, required, a named function), `parallel_tool_calls`.
 *
 * The prompt: a template with a tool section (it names `tools`: Qwen2.5's, Llama
 * 3.1's, Mistral's) renders the tools itself. One without (SmolLM2's ChatML) gets
 * them from the gateway in Hermes' format, the one most small instruct models
 * were trained on: a system message (added, or prefixed to the first) lists the
 * tools as JSON inside <tools></tools> and asks for each call as
 * <tool_call>{"name": ..., "arguments": {...}}</tool_call>; earlier assistant
 * calls are written the same way and tool results as <tool_response>.
 *
 * The output: parsed into tool_calls in the format the template names (Hermes /
 * Qwen <tool_call> tags, Llama 3.x's bare {"name", "parameters"} object,
 * Mistral's [TOOL_CALLS] list). With `required` or a named function the output
 * is held to that format by a grammar (GBNF built from the tools' JSON Schemas),
 * so it always parses; with `auto` whatever comes is parsed, and text that is not
 * a well-formed call stays content. `none` renders no tools and parses nothing. */
#ifndef ALLM_GW_TOOLS_H
#define ALLM_GW_TOOLS_H

#include "chat-template.h" /* enum gw_tool_format */
#include "gw-api-err.h"
#include "gateway.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


/* Reads a chat body's tools, tool_choice and parallel_tool_calls into r
 * (r->tools_on, tool_format, tools_one; with required or a named function a GBNF
 * grammar in r->grammar). Call after the structured-output fields: a request
 * with both a grammar and a forced tool call is a 400. 0 or -1 with e. */
int gw_tools_parse(json_t *b, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e);

/* For gw_prompt_render: the tools to hand the model's template (*ret_tools, a
 * borrowed reference, NULL for none), or, for a template without a tool
 * section, the Hermes preamble written into the messages cm. 0 or -1 with e. */
int gw_tools_prompt(json_t *b, const struct gw_model *m, json_t *cm, json_t **ret_tools, struct gw_api_err *e);

/* --- the output ------------------------------------------------------------------ */

struct gw_tool_call {
	char *name;       /* malloc'ed */
	char *args;       /* the arguments as a JSON object's text (malloc'ed) */
	char id[40];      /* "call_..." */
};

/* One choice's text as it comes, split into content and calls. */
struct gw_tool_parse {
	enum gw_tool_format fmt;
	bool one;          /* parallel_tool_calls false: the first call only */
	char *buf;         /* the text so far */
	size_t len, cap;
	size_t at;         /* buf[0, at) is said: content out, or calls taken */
	bool in_calls;     /* the calls have started: what follows is calls */
	bool bare_seen;    /* Hermes: the output's first character was looked at ... */
	bool bare;         /* ... and is "{": maybe one bare call, held to the end */
	struct gw_tool_call *calls; /* every call found so far */
	uint32_t n_calls, cap_calls;
	char *out;         /* this feed's content */
	size_t out_len, out_cap;
	char *ws;          /* white space held: content if text follows, layout if calls do */
	size_t ws_len, ws_cap;
	size_t said;       /* bytes of content out so far */
};

void gw_tool_parse_init(struct gw_tool_parse *p, enum gw_tool_format fmt, bool one);
void gw_tool_parse_free(struct gw_tool_parse *p);
/* Appends text[0..n) (end: it is the whole output) and says what is now sure:
 * content [*content, + *content_len) to send (a pointer into p's buffer, valid
 * until the next call) and calls [*first_call, p->n_calls) newly found. Text that
 * may be the start of a call is held until it is known. 0 or -ENOMEM. */
int gw_tool_parse_feed(struct gw_tool_parse *p, const char *text, size_t n, bool end, const char **content,
		       size_t *content_len, uint32_t *first_call);

/* OpenAI's shapes of a call: whole {"id", "type", "function": {"name",
 * "arguments"}}, and a stream's two deltas (index, id, type and name with ""
 * arguments; then index and the arguments). NULL when out of memory. */
json_t *gw_tool_call_json(const struct gw_tool_call *c);
json_t *gw_tool_call_delta_json(const struct gw_tool_call *c, uint32_t index, bool head);

#endif
