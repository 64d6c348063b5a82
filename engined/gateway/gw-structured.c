/* The structured-output fields of a request body -> one grammar (gw-structured.h). */
#include "gw-structured.h"

#include "grammar.h"

#include <adaptivellm/params.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gw_structured_check(uint32_t kind, const char *text, size_t len, const char *field, struct gw_api_err *e)
{
	struct allm_err err = {{0}};
	struct allm_grammar *g = NULL;
	/* no vocabulary: compiling reads only the text (a vocabulary serves masks) */
	int rc = allm_grammar_compile((int)kind, text ? text : "", len, NULL, &g, &err);
	allm_grammar_unref(g);
	if (rc == -ENOMEM)
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory compiling '%s'", field);
	if (rc)
		return gw_api_bad(e, field, "'%s' does not compile: %s", field, err.msg);
	return 0;
}

/* One source found: its kind and text (a string's bytes, or a JSON value
 * serialized), from field. A second source is a 400 naming both. */
static int take(struct gw_grammar *g, uint32_t kind, json_t *v, const char *field, struct gw_api_err *e)
{
	if (g->kind != ALLM_GRAMMAR_NONE)
		return gw_api_bad(e, field, "'%s' and '%s' both ask for structured output: send one", g->field, field);
	g->kind = kind;
	snprintf(g->field, sizeof(g->field), "%s", field);
	if (!v)
		return 0;
	if (json_is_string(v)) {
		g->len = json_string_length(v);
		g->text = strndup(json_string_value(v), g->len);
	} else {
		g->text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		g->len = g->text ? strlen(g->text) : 0;
	}
	if (!g->text)
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	return 0;
}

/* A field that holds a grammar of kind: GBNF and regex as strings, a schema as an
 * object (or its JSON text), a choice as a list of strings. */
static int source(struct gw_grammar *g, uint32_t kind, json_t *v, const char *field, struct gw_api_err *e)
{
	switch (kind) {
	case ALLM_GRAMMAR_JSON_SCHEMA:
		if (!json_is_object(v) && !json_is_string(v) && !json_is_boolean(v))
			return gw_api_bad(e, field, "'%s' must be a JSON Schema (an object)", field);
		break;
	case ALLM_GRAMMAR_CHOICE:
		if (!json_is_array(v))
			return gw_api_bad(e, field, "'%s' must be a list of strings", field);
		break;
	default:
		if (!json_is_string(v))
			return gw_api_bad(e, field, "'%s' must be a string", field);
	}
	return take(g, kind, v, field, e);
}

/* OpenAI's response_format: {type: text}, {type: json_object} (llama.cpp: with a
 * "schema"), {type: json_schema, json_schema: {name, schema, strict,
 * description}}. strict is accepted either way: the output always follows the
 * schema here. */
static int response_format(json_t *rf, struct gw_grammar *g, struct gw_api_err *e)
{
	const char *k;
	json_t *v;
	if (!json_is_object(rf))
		return gw_api_bad(e, "response_format", "'response_format' must be an object with a \"type\"");
	const char *type = json_string_value(json_object_get(rf, "type"));
	if (!type)
		return gw_api_bad(e, "response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
	json_object_foreach(rf, k, v) {
		bool ok = !strcmp(k, "type") || (!strcmp(type, "json_schema") && !strcmp(k, "json_schema")) ||
			  (!strcmp(type, "json_object") && !strcmp(k, "schema"));
		if (!ok)
			return gw_api_bad(e, "response_format", "'response_format.%.40s' is not a field of type \"%.20s\"",
					  k, type);
	}
	if (!strcmp(type, "text"))
		return 0;
	if (!strcmp(type, "json_object")) {
		json_t *s = json_object_get(rf, "schema");
		return s && !json_is_null(s) ? source(g, ALLM_GRAMMAR_JSON_SCHEMA, s, "response_format", e)
					     : take(g, ALLM_GRAMMAR_JSON_OBJECT, NULL, "response_format", e);
	}
	if (strcmp(type, "json_schema"))
		return gw_api_bad(e, "response_format",
				  "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\" (got \"%.40s\")",
				  type);
	json_t *js = json_object_get(rf, "json_schema");
	if (!json_is_object(js))
		return gw_api_bad(e, "response_format", "'response_format.json_schema' must be an object with a \"schema\"");
	json_object_foreach(js, k, v) {
		if (!strcmp(k, "name") || !strcmp(k, "description") || !strcmp(k, "schema"))
			continue;
		if (!strcmp(k, "strict") && (json_is_boolean(v) || json_is_null(v)))
			continue;
		return gw_api_bad(e, "response_format", "'response_format.json_schema.%.40s' is not supported%s", k,
				  !strcmp(k, "strict") ? " (strict must be true or false)" : "");
	}
	json_t *s = json_object_get(js, "schema");
	/* OpenAI's: no schema is a schema that takes any JSON object */
	if (!s || json_is_null(s))
		return take(g, ALLM_GRAMMAR_JSON_OBJECT, NULL, "response_format", e);
	return source(g, ALLM_GRAMMAR_JSON_SCHEMA, s, "response_format", e);
}

/* vLLM's structured_outputs: exactly one of json, regex, choice, grammar,
 * json_object (true); its tuning keys (whitespace_pattern, disable_*,
 * structural_tag) are refused by name rather than ignored. */
static int structured_outputs(json_t *so, struct gw_grammar *g, struct gw_api_err *e)
{
	static const struct {
		const char *key;
		uint32_t kind;
	} keys[] = {
		{"json", ALLM_GRAMMAR_JSON_SCHEMA},
		{"regex", ALLM_GRAMMAR_REGEX},
		{"choice", ALLM_GRAMMAR_CHOICE},
		{"grammar", ALLM_GRAMMAR_GBNF},
		{"json_object", ALLM_GRAMMAR_JSON_OBJECT},
	};
	const char *k;
	json_t *v;
	if (!json_is_object(so))
		return gw_api_bad(e, "structured_outputs", "'structured_outputs' must be an object");
	json_object_foreach(so, k, v) {
		char field[64];
		size_t i = 0;
		while (i < sizeof(keys) / sizeof(keys[0]) && strcmp(keys[i].key, k))
			i++;
		if (i == sizeof(keys) / sizeof(keys[0]))
			return gw_api_bad(e, "structured_outputs",
					  "'structured_outputs.%.40s' is not supported (json, regex, choice, grammar, "
					  "json_object are)", k);
		if (json_is_null(v) || (keys[i].kind == ALLM_GRAMMAR_JSON_OBJECT && json_is_false(v)))
			continue;
		snprintf(field, sizeof(field), "structured_outputs.%s", k);
		if (keys[i].kind == ALLM_GRAMMAR_JSON_OBJECT) {
			if (!json_is_true(v))
				return gw_api_bad(e, field, "'%s' must be true or false", field);
			if (take(g, ALLM_GRAMMAR_JSON_OBJECT, NULL, field, e))
				return -1;
		} else if (source(g, keys[i].kind, v, field, e)) {
			return -1;
		}
	}
	return 0;
}

int gw_structured_parse(json_t *b, struct gw_grammar *g, struct gw_api_err *e)
{
	/* the plain fields: llama.cpp's two, vLLM's older four */
	static const struct {
		const char *key;
		uint32_t kind;
	} plain[] = {
		{"grammar", ALLM_GRAMMAR_GBNF},
		{"json_schema", ALLM_GRAMMAR_JSON_SCHEMA},
		{"guided_json", ALLM_GRAMMAR_JSON_SCHEMA},
		{"guided_regex", ALLM_GRAMMAR_REGEX},
		{"guided_choice", ALLM_GRAMMAR_CHOICE},
		{"guided_grammar", ALLM_GRAMMAR_GBNF},
	};
	memset(g, 0, sizeof(*g));
	json_t *v = json_object_get(b, "response_format");
	if (v && !json_is_null(v) && response_format(v, g, e))
		return -1;
	v = json_object_get(b, "structured_outputs");
	if (v && !json_is_null(v) && structured_outputs(v, g, e))
		return -1;
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		v = json_object_get(b, plain[i].key);
		if (v && !json_is_null(v) && source(g, plain[i].kind, v, plain[i].key, e))
			return -1;
	}
	if (g->kind == ALLM_GRAMMAR_NONE)
		return 0;
	return gw_structured_check(g->kind, g->text, g->len, g->field, e);
}
