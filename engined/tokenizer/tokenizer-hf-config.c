/* tokenizer.json's post-processor (what add_special wraps around a text), the
 * companion config files of a model directory and the BOS / EOS ids derived from all
 * of them. */
#include "tokenizer-hf.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

static int check_id(const struct allm_tokenizer *tok, json_t *v, int32_t *ret)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) >= tok->n_ids)
		return -EINVAL;
	*ret = (int32_t)json_integer_value(v);
	return 0;
}

/* Appends the ids of template special token `name` to the prefix or suffix. */
static int template_special(struct allm_tokenizer *tok, json_t *specials, const char *name,
			    bool after_a, const char *field, struct allm_err *err)
{
	json_t *ids = json_object_get(json_object_get(specials, name), "ids"), *v;
	int32_t **dst = after_a ? &tok->suffix_ids : &tok->prefix_ids;
	size_t *dn = after_a ? &tok->n_suffix : &tok->n_prefix, i;

	if (!json_is_array(ids)) {
		/* Not in special_tokens: the name itself must be a token. */
		int32_t id = allm_tokenizer_token_to_id(tok, name);
		if (id < 0)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s: special token '%s' is neither in special_tokens nor in the vocab",
					    field, name);
		return allm_tok_append_ids(dst, dn, &id, 1) < 0 ? allm_err_set(err, -ENOMEM, "tokenizer: out of memory") : 0;
	}
	json_array_foreach(ids, i, v) {
		int32_t id;
		if (check_id(tok, v, &id) < 0)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.special_tokens['%s'].ids[%zu]: not a valid id",
					    field, name, i);
		if (allm_tok_append_ids(dst, dn, &id, 1) < 0)
			return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	}
	return 0;
}

static int parse_template(struct allm_tokenizer *tok, json_t *pp, const char *field,
			  struct allm_err *err)
{
	json_t *single = json_object_get(pp, "single"), *item;
	json_t *specials = json_object_get(pp, "special_tokens");
	bool after_a = false;
	size_t i;

	if (!json_is_array(single))
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.single: missing or not an array", field);
	json_array_foreach(single, i, item) {
		json_t *sp = json_object_get(item, "SpecialToken");
		json_t *seq = json_object_get(item, "Sequence");
		if (sp) {
			const char *name = allm_tok_json_str(sp, "id");
			if (!name)
				return allm_err_set(err, -EINVAL, "tokenizer.json: %s.single[%zu].SpecialToken.id: missing", field, i);
			int r = template_special(tok, specials, name, after_a, field, err);
			if (r < 0)
				return r;
		} else if (seq) {
			const char *name = allm_tok_json_str(seq, "id");
			if (!name || strcmp(name, "A") || after_a)
				return allm_err_set(err, -EINVAL, "tokenizer.json: %s.single[%zu].Sequence: expected one sequence 'A'", field, i);
			after_a = true;
		} else {
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.single[%zu]: neither SpecialToken nor Sequence", field, i);
		}
	}
	if (!after_a)
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.single: no Sequence 'A'", field);
	return 0;
}

/* RobertaProcessing / BertProcessing: cls A sep, each given as ["<s>", 0]. */
static int parse_cls_sep(struct allm_tokenizer *tok, json_t *pp, const char *field,
			 struct allm_err *err)
{
	int32_t cls, sep;
	if (check_id(tok, json_array_get(json_object_get(pp, "cls"), 1), &cls) < 0)
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.cls: expected [token, id]", field);
	if (check_id(tok, json_array_get(json_object_get(pp, "sep"), 1), &sep) < 0)
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.sep: expected [token, id]", field);
	if (allm_tok_append_ids(&tok->prefix_ids, &tok->n_prefix, &cls, 1) < 0 ||
	    allm_tok_append_ids(&tok->suffix_ids, &tok->n_suffix, &sep, 1) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	return 0;
}

static int parse_post_field(struct allm_tokenizer *tok, json_t *pp, const char *field,
			    struct allm_err *err)
{
	const char *type = allm_tok_json_type(pp);
	size_t i;
	json_t *v;

	if (!pp || json_is_null(pp) || !strcmp(type, "ByteLevel"))
		return 0; /* ByteLevel only trims offsets: no ids added */
	if (!strcmp(type, "TemplateProcessing"))
		return parse_template(tok, pp, field, err);
	if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing"))
		return parse_cls_sep(tok, pp, field, err);
	if (!strcmp(type, "Sequence")) {
		json_t *list = json_object_get(pp, "processors");
		if (!json_is_array(list))
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.processors: missing or not an array", field);
		json_array_foreach(list, i, v) {
			char sub[64];
			snprintf(sub, sizeof(sub), "%s.processors[%zu]", field, i);
			int r = parse_post_field(tok, v, sub, err);
			if (r < 0)
				return r;
		}
		return 0;
	}
	return allm_err_set(err, -EINVAL, "tokenizer.json: %s.type: unsupported post-processor '%s'", field, type);
}

int allm_tok_parse_post(struct allm_tokenizer *tok, json_t *pp, struct allm_err *err)
{
	return parse_post_field(tok, pp, "post_processor", err);
}

/* A companion config this large is not one. */
#define TOK_CONFIG_MAX (16u << 20)

/* Loads dir/name; *ret = NULL when the file does not exist. */
static int load_optional(const struct allm_vdir *dir, const char *name, json_t **ret,
			 struct allm_err *err)
{
	char path[4096];
	json_error_t jerr;
	char *text = NULL;
	size_t len = 0;

	*ret = NULL;
	allm_vdir_join(dir, name, path, sizeof(path));
	int r = allm_vdir_read(dir, name, TOK_CONFIG_MAX, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r)
		return allm_err_set(err, r, "tokenizer: %s: %s", path,
				    r == -EFBIG ? "too large" : strerror(-r));
	*ret = json_loadb(text, len, 0, &jerr);
	allm_free(text);
	if (!*ret || !json_is_object(*ret)) {
		json_decref(*ret);
		*ret = NULL;
		return allm_err_set(err, -EINVAL, "tokenizer: %s: line %d: %s", path, jerr.line,
				    jerr.text[0] ? jerr.text : "not a JSON object");
	}
	return 0;
}

/* bos_token / eos_token: "<s>" or {"content": "<s>", ...}; -2 when absent. */
static int config_token(const struct allm_tokenizer *tok, json_t *cfg, const char *key,
			const char *file, int32_t *ret, struct allm_err *err)
{
	json_t *v = json_object_get(cfg, key);
	const char *s = json_is_object(v) ? allm_tok_json_str(v, "content") : json_string_value(v);

	*ret = -2;
	if (!s)
		return 0;
	*ret = allm_tokenizer_token_to_id(tok, s);
	if (*ret < 0)
		return allm_err_set(err, -EINVAL, "tokenizer: %s: %s '%s' is not a token", file, key, s);
	return 0;
}

/* generation_config.json: bos_token_id, eos_token_id (int or list). */
static int read_generation_config(struct allm_tokenizer *tok, json_t *gen, int32_t *gen_bos,
				  struct allm_err *err)
{
	json_t *eos = json_object_get(gen, "eos_token_id"), *v;
	size_t i;
	int32_t id;

	*gen_bos = -1;
	if (json_object_get(gen, "bos_token_id") &&
	    check_id(tok, json_object_get(gen, "bos_token_id"), gen_bos) < 0)
		*gen_bos = -1; /* null or out of range: not usable */
	if (json_is_integer(eos)) {
		if (check_id(tok, eos, &id) < 0)
			return allm_err_set(err, -EINVAL, "tokenizer: generation_config.json: eos_token_id: not a valid id");
		return allm_tok_append_ids(&tok->eos_ids, &tok->n_eos, &id, 1) < 0 ? -ENOMEM : 0;
	}
	json_array_foreach(eos, i, v) {
		if (check_id(tok, v, &id) < 0)
			return allm_err_set(err, -EINVAL, "tokenizer: generation_config.json: eos_token_id[%zu]: not a valid id", i);
		if (allm_tok_append_ids(&tok->eos_ids, &tok->n_eos, &id, 1) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* add_bos_token / add_eos_token rebuild the wrapping, as transformers'
 * LlamaTokenizerFast.update_post_processor does. */
static int apply_add_flags(struct allm_tokenizer *tok, json_t *cfg)
{
	json_t *ab = json_object_get(cfg, "add_bos_token"), *ae = json_object_get(cfg, "add_eos_token");
	if (json_is_boolean(ab) && tok->bos_id >= 0) {
		tok->n_prefix = 0;
		if (json_is_true(ab) && allm_tok_append_ids(&tok->prefix_ids, &tok->n_prefix, &tok->bos_id, 1) < 0)
			return -ENOMEM;
	}
	if (json_is_boolean(ae) && tok->eos_id >= 0) {
		tok->n_suffix = 0;
		if (json_is_true(ae) && allm_tok_append_ids(&tok->suffix_ids, &tok->n_suffix, &tok->eos_id, 1) < 0)
			return -ENOMEM;
	}
	return 0;
}

int allm_tok_load_configs(struct allm_tokenizer *tok, const struct allm_vdir *dir,
			  struct allm_err *err)
{
	json_t *cfg = NULL, *map = NULL, *gen = NULL;
	int32_t bos = -2, eos = -2, gen_bos = -1;
	int r = 0;

	if (dir) {
		r = load_optional(dir, "tokenizer_config.json", &cfg, err);
		if (r == 0)
			r = load_optional(dir, "special_tokens_map.json", &map, err);
		if (r == 0)
			r = load_optional(dir, "generation_config.json", &gen, err);
		if (r == 0)
			r = config_token(tok, cfg, "bos_token", "tokenizer_config.json", &bos, err);
		if (r == 0)
			r = config_token(tok, cfg, "eos_token", "tokenizer_config.json", &eos, err);
		if (r == 0 && bos == -2)
			r = config_token(tok, map, "bos_token", "special_tokens_map.json", &bos, err);
		if (r == 0 && eos == -2)
			r = config_token(tok, map, "eos_token", "special_tokens_map.json", &eos, err);
		if (r == 0 && gen)
			r = read_generation_config(tok, gen, &gen_bos, err);
		if (r < 0)
			goto out;
	}
	tok->bos_id = bos >= 0 ? bos : gen_bos >= 0 ? gen_bos : tok->n_prefix ? tok->prefix_ids[0] : -1;
	tok->eos_id = eos >= 0 ? eos : tok->n_eos ? tok->eos_ids[0] : allm_tok_guess_eos(tok);
	if (tok->eos_id >= 0 && !allm_tokenizer_is_eos(tok, tok->eos_id))
		r = allm_tok_append_ids(&tok->eos_ids, &tok->n_eos, &tok->eos_id, 1);
	if (r == 0)
		r = allm_tok_add_turn_ends(tok);
	if (r == 0 && cfg)
		r = apply_add_flags(tok, cfg);
	if (r == -ENOMEM)
		allm_err_set(err, r, "tokenizer: out of memory");
out:
	json_decref(cfg);
	json_decref(map);
	json_decref(gen);
	return r;
}
