/* The model's chat template, rendered by the Jinja interpreter (see
 * chat-template.h). */
#include "chat-template.h"

#include "sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct allm_chat_template {
	struct allm_tmpl *tmpl;
	json_t *trusted; /* bos_token, eos_token: the server's, never marked data */
	char name[200];
};

int allm_chat_template_parse(const char *template, size_t len, const char *bos, const char *eos,
			     struct allm_chat_template **ret, char *err, size_t errlen)
{
	struct allm_chat_template *t = calloc(1, sizeof(*t));
	uint8_t h[32];
	struct allm_sha256 sh;
	int r;
	if (!t)
		return -ENOMEM;
	if ((r = allm_tmpl_parse(template, len, &t->tmpl, err, errlen)))
		goto fail;
	/* transformers passes the tokenizer's special_tokens_map: a token the
	 * tokenizer lacks is not there at all (undefined: it prints as "") */
	t->trusted = json_object();
	if (!t->trusted || (bos && json_object_set_new(t->trusted, "bos_token", json_string(bos))) ||
	    (eos && json_object_set_new(t->trusted, "eos_token", json_string(eos)))) {
		r = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	allm_sha256_init(&sh);
	allm_sha256_update(&sh, template, len);
	allm_sha256_final(&sh, h);
	const char *u = allm_tmpl_unsupported(t->tmpl);
	snprintf(t->name, sizeof(t->name), "jinja sha256:%02x%02x%02x%02x, %zu bytes%s%.120s%s", h[0], h[1], h[2],
		 h[3], len, u ? " (" : "", u ? u : "", u ? ": fails where it is reached)" : "");
	*ret = t;
	return 0;
fail:
	allm_chat_template_free(t);
	return r;
}

void allm_chat_template_free(struct allm_chat_template *t)
{
	if (!t)
		return;
	allm_tmpl_free(t->tmpl);
	json_decref(t->trusted);
	free(t);
}

const char *allm_chat_template_name(const struct allm_chat_template *t)
{
	return t->name;
}

const char *allm_chat_template_unsupported(const struct allm_chat_template *t)
{
	return allm_tmpl_unsupported(t->tmpl);
}

const char *allm_chat_template_pick(const json_t *v, bool tools, char *why, size_t whylen)
{
	if (json_is_string(v))
		return json_string_value(v);
	if (!json_is_array(v)) {
		snprintf(why, whylen, "chat_template is neither a string nor a list of named templates");
		return NULL;
	}
	const char *dflt = NULL, *tool = NULL;
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));
		const char *text = json_string_value(json_object_get(e, "template"));
		if (n && text && !strcmp(n, "default"))
			dflt = text;
		if (n && text && !strcmp(n, "tool_use"))
			tool = text;
	}
	if (tools && tool)
		return tool;
	if (!dflt)
		snprintf(why, whylen, "chat_template is a list of named templates without \"default\"");
	return dflt;
}

int allm_chat_template_render(const struct allm_chat_template *t, const json_t *messages,
			      const json_t *tools, bool add_generation_prompt, struct allm_tmpl_out *out,
			      char *err, size_t errlen)
{
	json_t *trusted = json_copy(t->trusted), *data = json_object();
	int r = -ENOMEM;
	snprintf(err, errlen, "out of memory");
	if (!trusted || !data ||
	    json_object_set_new(trusted, "add_generation_prompt", json_boolean(add_generation_prompt)) ||
	    json_object_set(data, "messages", (json_t *)messages) ||
	    (tools && json_object_set(data, "tools", (json_t *)tools)))
		goto out;
	r = allm_tmpl_render(t->tmpl, trusted, data, NULL, out, NULL, err, errlen);
out:
	json_decref(trusted);
	json_decref(data);
	return r;
}

/* The model's template says how it calls tools (the gateway's tool parsers,
 * gw-tools.c, read that format): here, with the template, so that the model's
 * description (gw-model.c) needs nothing of the API layer. */
static bool has(const char *t, size_t len, const char *s)
{
	return memmem(t, len, s, strlen(s)) != NULL;
}

enum gw_tool_format allm_chat_template_tool_format(const char *t, size_t len, bool *section)
{
	*section = has(t, len, "tools");
	if (has(t, len, "[TOOL_CALLS]"))
		return GW_TOOLS_MISTRAL;
	if (has(t, len, "<tool_call>"))
		return GW_TOOLS_HERMES;
	if (has(t, len, "<|start_header_id|>") && has(t, len, "parameters"))
		return GW_TOOLS_LLAMA3;
	/* a section whose output we do not know, or none (the preamble asks for Hermes') */
	return GW_TOOLS_HERMES;
}
