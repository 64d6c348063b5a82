/* The model's chat template: its own Jinja text (tokenizer_config.json's
 * `chat_template`, a GGUF file's `tokenizer.chat_template`, or --chat-template
 * FILE) rendered by engined/template/ as transformers' apply_chat_template
 * renders it, with bos_token, eos_token, messages, tools and
 * add_generation_prompt.
 *
 * The prompt comes back as segments marked template text or data: every string
 * of the messages and tools is data, and keeps that mark through the template's
 * concatenations and filters, so the caller tokenizes special tokens in the
 * template's own text only (a user who writes "<|im_start|>system" gets those
 * characters, not a system turn).
 *
 * Library code: -errno and a message, never prints. A parsed template is
 * immutable; render may run from many threads at once. */
#ifndef ALLM_CHAT_TEMPLATE_H
#define ALLM_CHAT_TEMPLATE_H

#include "template.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct allm_chat_template; /* opaque */

/* Parses template (len bytes). bos / eos: the tokenizer's bos_token and
 * eos_token strings (NULL when it has none: the template sees them undefined, as
 * with transformers). 0 with *ret (free with
 * allm_chat_template_free); -EINVAL with err naming what cannot be parsed and
 * its line; -ENOMEM. */
int allm_chat_template_parse(const char *template, size_t len, const char *bos, const char *eos,
			     struct allm_chat_template **ret, char *err, size_t errlen);
void allm_chat_template_free(struct allm_chat_template *t);

/* "jinja sha256:0123abcd, 2507 bytes": which template, for logs. */
const char *allm_chat_template_name(const struct allm_chat_template *t);

/* The first filter or test the template names that the interpreter lacks
 * ("line 90: unsupported filter 'from_json'"), else NULL: a render that reaches
 * it fails with that text. For a warning at load. */
const char *allm_chat_template_unsupported(const struct allm_chat_template *t);

/* From a tokenizer_config.json-style chat_template value: a string, or a list of
 * {"name", "template"} of which transformers' choice is taken ("tool_use" when
 * tools is true and the list has it, else "default"). Returns the text (owned by
 * v) or NULL with why set. */
const char *allm_chat_template_pick(const json_t *v, bool tools, char *why, size_t whylen);

/* Renders messages (a JSON list of {"role", "content", "tool_calls",
 * "tool_call_id", "name", ...}, as the template sees them) and tools (a list, or
 * NULL) with add_generation_prompt. 0 with *out (allm_tmpl_out_free): the prompt
 * and its segments; -EINVAL with err holding the template's own error (its
 * raise_exception message as written, e.g. "Conversation roles must alternate
 * user/assistant/user/assistant/...") or the interpreter's ("line 3: ..."),
 * -E2BIG when the template ran past a limit, -ENOMEM. */
int allm_chat_template_render(const struct allm_chat_template *t, const json_t *messages,
			      const json_t *tools, bool add_generation_prompt, struct allm_tmpl_out *out,
			      char *err, size_t errlen);

enum gw_tool_format {
	GW_TOOLS_HERMES = 0, /* <tool_call>{"name", "arguments"}</tool_call>, one or more */
	GW_TOOLS_LLAMA3 = 1, /* the whole output one {"name", "parameters"} object */
	GW_TOOLS_MISTRAL = 2, /* [TOOL_CALLS] [{"name", "arguments"}, ...] */
};

/* From a chat template's text: the format its model calls tools in, and whether
 * it renders `tools` itself (*section). */
enum gw_tool_format allm_chat_template_tool_format(const char *tmpl, size_t len, bool *section);

#endif
