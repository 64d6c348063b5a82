/* What the gateway needs of the engine's model, read from the same Hugging Face
 * directory: the tokenizer (to count and limit prompts, and to send chat prompts
 * as ids without a second BOS), the context length (config.json), and the chat
 * template (tokenizer_config.json or chat_template.jinja, or --chat-template).
 * From a GGUF file the same three: tokenizer.ggml.*, <arch>.context_length and
 * tokenizer.chat_template (and .tool_use; gguf_configs below).
 * With no --model it follows the engine: the directory the engine names, the
 * embedded default for "default", nothing for a --dummy engine. */
#include "gateway.h"

#include "gguf.h"
#include "vdir.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The embedded default model's text files (engined/gateway/meson.build). */
const struct allm_vdir *allm_gateway_default_model(void);

#define GW_MAX_CONFIG (4 << 20)

struct gw_model *gw_model_ref(struct gw_model *m)
{
	if (m)
		atomic_fetch_add(&m->refs, 1);
	return m;
}

void gw_model_unref(struct gw_model *m)
{
	if (!m || atomic_fetch_sub(&m->refs, 1) != 1)
		return;
	allm_tokenizer_free(m->tok);
	allm_chat_template_free(m->tmpl);
	allm_chat_template_free(m->tmpl_tools);
	free(m);
}

static json_t *read_json(const struct allm_vdir *d, const char *name)
{
	char *buf = NULL;
	size_t len;
	if (allm_vdir_read(d, name, GW_MAX_CONFIG, &buf, &len))
		return NULL;
	json_t *j = json_loadb(buf, len, 0, NULL);
	allm_free(buf);
	return j;
}

/* bos_token / eos_token: a string, {"content": string}, or null. */
static const char *special(json_t *cfg, const char *key)
{
	json_t *v = json_object_get(cfg, key);
	if (json_is_object(v))
		v = json_object_get(v, "content");
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The template text: tokenizer_config.json's chat_template (a string, or a list
 * of {name, template}: "default", or with tools "tool_use" where there is one, as
 * transformers picks), else chat_template.jinja. Returns a malloc'ed copy or NULL
 * with why set. */
static char *template_text(const struct allm_vdir *d, json_t *cfg, bool tools, size_t *len, char *why,
			   size_t whylen)
{
	json_t *t = json_object_get(cfg, "chat_template");
	if (t) {
		const char *text = allm_chat_template_pick(t, tools, why, whylen);
		if (!text)
			return NULL;
		*len = strlen(text);
		return strndup(text, *len);
	}
	char *buf = NULL;
	if (!allm_vdir_read(d, "chat_template.jinja", GW_MAX_CONFIG, &buf, len)) {
		char *c = strndup(buf, *len);
		allm_free(buf);
		return c;
	}
	snprintf(why, whylen, "the model has no chat template (no chat_template in "
			      "tokenizer_config.json, no chat_template.jinja, no tokenizer.chat_template "
			      "in a GGUF file); use /v1/completions, or start allm-gateway with "
			      "--chat-template FILE");
	return NULL;
}

/* The parts of config.json and tokenizer_config.json the gateway reads, from a GGUF
 * file's metadata: {"max_position_embeddings", "chat_template", "bos_token",
 * "eos_token"} (each where the file has it); NULL when the file cannot be read (the
 * tokenizer's load already said why). */
static json_t *gguf_configs(const char *path)
{
	struct allm_gguf *g = NULL;
	const char *s;
	size_t len;
	int64_t v;
	char key[96];
	if (allm_gguf_open(path, &g, NULL))
		return NULL;
	json_t *cfg = json_object();
	if (!allm_gguf_get_str(g, "general.architecture", &s, &len, NULL) && len < 64) {
		snprintf(key, sizeof(key), "%.*s.context_length", (int)len, s);
		if (!allm_gguf_get_int(g, key, 1, INT32_MAX - 1, &v, NULL))
			json_object_set_new(cfg, "max_position_embeddings", json_integer(v));
	}
	if (!allm_gguf_get_str(g, "tokenizer.chat_template", &s, &len, NULL)) {
		json_t *t = json_stringn(s, len);
		/* a named one for tools (llama.cpp's convert writes tokenizer_config.json's
		 * list as tokenizer.chat_template.NAME): the list form, as transformers reads it */
		if (!allm_gguf_get_str(g, "tokenizer.chat_template.tool_use", &s, &len, NULL))
			t = json_pack("[{s:s, s:o}, {s:s, s:s%}]", "name", "default", "template", t, "name",
				      "tool_use", "template", s, len);
		json_object_set_new(cfg, "chat_template", t);
	}
	const struct allm_gguf_kv *toks;
	static const char *const ids[][2] = {{"tokenizer.ggml.bos_token_id", "bos_token"},
					      {"tokenizer.ggml.eos_token_id", "eos_token"}};
	for (size_t i = 0; i < 2; i++)
		if (!allm_gguf_get_arr(g, "tokenizer.ggml.tokens", ALLM_GGUF_STRING, &toks, NULL) &&
		    !allm_gguf_get_int(g, ids[i][0], 0, (int64_t)toks->v.arr.n - 1, &v, NULL)) {
			uint64_t l;
			const char *t = allm_gguf_arr_str(toks, (uint64_t)v, &l);
			json_object_set_new(cfg, ids[i][1], json_stringn(t, (size_t)l));
		}
	allm_gguf_close(g);
	return cfg;
}

static void load_template(struct gw_model *m, const struct gw_opts *o, const struct allm_vdir *d,
			  json_t *cfg)
{
	char *text = NULL;
	size_t len = 0;
	char err[300];
	if (o->chat_template) {
		struct allm_vdir none = allm_vdir_disk("");
		char *buf;
		if (allm_vdir_read(&none, o->chat_template, GW_MAX_CONFIG, &buf, &len)) {
			snprintf(m->why_no_chat, sizeof(m->why_no_chat), "cannot read --chat-template %s",
				 o->chat_template);
			return;
		}
		text = strndup(buf, len);
		allm_free(buf);
	} else {
		text = template_text(d, cfg, false, &len, m->why_no_chat, sizeof(m->why_no_chat));
	}
	if (!text)
		return;
	m->tool_format = (int)allm_chat_template_tool_format(text, len, &m->tool_section);
	if (allm_chat_template_parse(text, len, special(cfg, "bos_token"), special(cfg, "eos_token"),
				     &m->tmpl, err, sizeof(err)))
		snprintf(m->why_no_chat, sizeof(m->why_no_chat), "the model's chat template cannot be parsed: %.250s",
			 err);
	free(text);
	/* a named list's "tool_use" template, for requests that bring tools */
	json_t *t = o->chat_template ? NULL : json_object_get(cfg, "chat_template");
	const char *tools = json_is_array(t) ? allm_chat_template_pick(t, true, err, sizeof(err)) : NULL;
	const char *dflt = tools ? allm_chat_template_pick(t, false, err, sizeof(err)) : NULL;
	if (m->tmpl && tools && tools != dflt &&
	    allm_chat_template_parse(tools, strlen(tools), special(cfg, "bos_token"), special(cfg, "eos_token"),
				     &m->tmpl_tools, err, sizeof(err)))
		m->tmpl_tools = NULL; /* requests with tools use the default one */
	else if (m->tmpl_tools)
		m->tool_format = (int)allm_chat_template_tool_format(tools, strlen(tools), &m->tool_section);
}

int gw_model_load(const struct gw_opts *o, const char *engine_model, struct gw_model **ret)
{
	struct gw_model *m = calloc(1, sizeof(*m));
	struct allm_err err = {{0}};
	if (!m)
		return -ENOMEM;
	atomic_init(&m->refs, 1);
	snprintf(m->engine, sizeof(m->engine), "%s", engine_model ? engine_model : "");
	const char *dir = o->model_dir;
	if (!dir && engine_model && strcmp(engine_model, "default"))
		dir = engine_model;
	snprintf(m->id, sizeof(m->id), "%s",
		 o->served_name ? o->served_name
		 : o->model_dir ? o->model_dir
		 : engine_model ? engine_model
				: "default");
	if (dir && !strncmp(dir, "dummy:", 6)) {
		/* random weights: no tokenizer, prompts are token ids */
		snprintf(m->source, sizeof(m->source), "none (the engine serves %s)", dir);
		snprintf(m->why_no_chat, sizeof(m->why_no_chat),
			 "the engine serves %s, which has no tokenizer: send token ids to /v1/completions",
			 dir);
		*ret = m;
		return 0;
	}
	struct allm_vdir disk = allm_vdir_disk(dir ? dir : "");
	const struct allm_vdir *d = dir ? &disk : allm_gateway_default_model();
	snprintf(m->source, sizeof(m->source), "%s", d->path);
	if (allm_tokenizer_load_from(d, &m->tok, &err)) {
		m->tok = NULL;
		snprintf(m->source, sizeof(m->source), "none (%.280s)", err.msg);
		snprintf(m->why_no_chat, sizeof(m->why_no_chat),
			 "the gateway cannot read the model's tokenizer: start allm-gateway with --model DIR");
		*ret = m;
		return 0;
	}
	bool gguf = !allm_vdir_embedded(d) && allm_gguf_is_file(d->path); /* --model FILE.gguf */
	json_t *cfg = gguf ? gguf_configs(d->path) : read_json(d, "config.json");
	json_t *mpe = json_object_get(cfg, "max_position_embeddings");
	if (json_is_integer(mpe) && json_integer_value(mpe) > 0 && json_integer_value(mpe) < INT32_MAX)
		m->context = (int32_t)json_integer_value(mpe);
	json_t *tcfg = gguf ? json_incref(cfg) : read_json(d, "tokenizer_config.json");
	json_decref(cfg);
	load_template(m, o, d, tcfg);
	json_decref(tcfg);
	*ret = m;
	return 0;
}
