/* The Hugging Face loader's own parts (tokenizer-hf.c and tokenizer-hf-config.c):
 * tokenizer.json and its companion files, read with jansson. Nothing outside the
 * loader includes this. */
#ifndef ALLM_TOKENIZER_HF_H
#define ALLM_TOKENIZER_HF_H

#include "tokenizer-internal.h"

#include <jansson.h>

/* The string value of obj[key], or NULL when missing / not a string. */
static inline const char *allm_tok_json_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* Type name of a tokenizer.json component ("?" when missing). */
static inline const char *allm_tok_json_type(json_t *obj)
{
	const char *t = allm_tok_json_str(obj, "type");
	return t ? t : "?";
}

/* tokenizer-hf-config.c: post_processor, then the companion files and BOS/EOS. */
int allm_tok_parse_post(struct allm_tokenizer *tok, json_t *pp, struct allm_err *err);
int allm_tok_load_configs(struct allm_tokenizer *tok, const struct allm_vdir *dir,
			  struct allm_err *err);

#endif
