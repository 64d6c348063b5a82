/* Structured output in the gateway (issue 51): the request fields that ask for a
 * grammar, read into one (kind, text) for the engine's grammar (params.h, enum
 * allm_grammar_kind; the text travels on the ring beside the prompt). The spellings
 * clients use, all mapped to the same kinds:
 *   OpenAI:    response_format {type: text | json_object | json_schema {schema, strict}}
 *   llama.cpp: grammar (GBNF), json_schema, response_format {type: json_object, schema}
 *   vLLM:      structured_outputs {json | regex | choice | grammar | json_object},
 *              and its older guided_json, guided_regex, guided_choice, guided_grammar
 * A request takes at most one of them (two: a 400 naming both). The text is compiled
 * here before the request goes anywhere, so one that does not compile is a 400 that
 * names the field and the place in it (the engine compiles it again, from its cache). */
#ifndef ALLM_GW_STRUCTURED_H
#define ALLM_GW_STRUCTURED_H

#include "gw-api-err.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A request's grammar: kind ALLM_GRAMMAR_NONE and no text when none was asked. */
struct gw_grammar {
	uint32_t kind;     /* enum allm_grammar_kind */
	char *text;        /* malloc'ed, NUL-terminated; NULL for none and json_object */
	size_t len;
	char field[64];    /* the body field it came from, for errors ("response_format") */
};

/* Reads body b's structured-output fields into *g (zeroed first). 0, or -1 with a
 * 400 in e naming the field (a bad shape, two sources, a grammar that does not
 * compile: "'grammar' does not compile: GBNF line 2 col 9: ..."). g's text is the
 * caller's to free (also on error). */
int gw_structured_parse(json_t *b, struct gw_grammar *g, struct gw_api_err *e);

/* Compiles (kind, text) as the engine will, to find its errors here: 0, or -1 with
 * a 400 in e naming field. For tool calling's grammars too (gw-tools.c). */
int gw_structured_check(uint32_t kind, const char *text, size_t len, const char *field, struct gw_api_err *e);

#endif
