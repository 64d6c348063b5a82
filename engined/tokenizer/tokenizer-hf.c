/* Loading tokenizer.json: the BPE model (vocab, merges, options), the added
 * tokens, the normalizer, the pre-tokenizer and the decoder, built with
 * tokenizer-vocab.c. The post-processor, the companion config files and BOS/EOS are
 * in tokenizer-hf-config.c.
 *
 * Every unsupported or malformed part fails the load with a message that names the
 * JSON field, so a file we cannot reproduce exactly is never tokenized differently
 * in silence. */
#include "tokenizer-hf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A boolean field with a default when missing or null. */
static bool json_bool_or(json_t *obj, const char *key, bool def)
{
	json_t *v = json_object_get(obj, key);
	return json_is_boolean(v) ? json_is_true(v) : def;
}

/* Reads an id that must be an integer in [0, INT32_MAX). */
static bool json_id(json_t *v, int32_t *ret)
{
	if (!json_is_integer(v))
		return false;
	json_int_t x = json_integer_value(v);
	if (x < 0 || x >= INT32_MAX)
		return false;
	*ret = (int32_t)x;
	return true;
}

/* merges: "a b" strings (older files) or ["a", "b"] pairs (newer files). */
static int parse_merges(struct allm_tokenizer *tok, json_t *merges, struct allm_err *err)
{
	struct allm_tok_merge_buf buf = {0};
	size_t i;
	json_t *m;
	int r = 0;

	if (!json_is_array(merges))
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.merges: missing or not an array");
	tok->n_merges = json_array_size(merges);
	if (allm_tok_pairmap_init(&tok->merges, tok->n_merges) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	json_array_foreach(merges, i, m) {
		static const char where[] = "tokenizer.json: model.merges";
		if (json_is_string(m)) {
			r = allm_tok_add_merge_text(tok, i, json_string_value(m), json_string_length(m), &buf, where, err);
		} else if (json_is_array(m) && json_array_size(m) == 2 &&
			   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
			json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
			r = allm_tok_add_merge(tok, i, json_string_value(a), json_string_length(a), json_string_value(b),
					       json_string_length(b), &buf, where, err);
		} else {
			r = allm_err_set(err, -EINVAL, "tokenizer.json: model.merges[%zu]: neither \"a b\" nor [\"a\", \"b\"]", i);
		}
		if (r < 0)
			break;
	}
	allm_free(buf.p);
	return r;
}

/* Sizes the id space and the string arena from the vocab and the added tokens. */
static int size_tables(json_t *vocab, json_t *added, int32_t *ret_n_ids, size_t *ret_bytes,
		       struct allm_err *err)
{
	const char *key;
	json_t *v;
	size_t bytes = 0, i;
	int32_t max_id = -1, id;

	json_object_foreach(vocab, key, v) {
		if (!json_id(v, &id))
			return allm_err_set(err, -EINVAL, "tokenizer.json: model.vocab['%s']: id is not a non-negative integer", key);
		if (strlen(key) > ALLM_TOK_MAX_TOKEN_BYTES)
			return allm_err_set(err, -EINVAL, "tokenizer.json: model.vocab['%.64s...']: %zu bytes long (at most %d)",
					    key, strlen(key), ALLM_TOK_MAX_TOKEN_BYTES);
		max_id = ALLM_MAX(max_id, id);
		bytes += strlen(key) + 1;
	}
	json_array_foreach(added, i, v) {
		json_t *content = json_object_get(v, "content");
		if (!json_is_string(content))
			return allm_err_set(err, -EINVAL, "tokenizer.json: added_tokens[%zu].content: missing or not a string", i);
		if (!json_id(json_object_get(v, "id"), &id))
			return allm_err_set(err, -EINVAL, "tokenizer.json: added_tokens[%zu].id: missing or not a non-negative integer", i);
		if (json_string_length(content) == 0)
			return allm_err_set(err, -EINVAL, "tokenizer.json: added_tokens[%zu].content: empty", i);
		if (json_string_length(content) > ALLM_TOK_MAX_TOKEN_BYTES)
			return allm_err_set(err, -EINVAL, "tokenizer.json: added_tokens[%zu].content: %zu bytes long (at most %d)",
					    i, json_string_length(content), ALLM_TOK_MAX_TOKEN_BYTES);
		max_id = ALLM_MAX(max_id, id);
		bytes += json_string_length(content) + 1;
	}
	if (max_id < 0)
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.vocab: empty");
	/* The id tables are sized by the largest id: one token with id 2^31 - 2 in a
	 * 3 KB file took 24 GB and a minute to load. Real files number their tokens
	 * densely (vocab 0..n-1, added tokens next to it); allow generous holes. */
	size_t n_defined = json_object_size(vocab) + json_array_size(added);
	if ((size_t)max_id >= 2 * n_defined + 1024)
		return allm_err_set(err, -EINVAL,
				    "tokenizer.json: token id %d is far past the %zu tokens the file defines "
				    "(ids must be numbered densely from 0)",
				    max_id, n_defined);
	*ret_n_ids = max_id + 1;
	*ret_bytes = bytes;
	return 0;
}

/* Model vocab + added tokens -> id tables and the string map. */
static int parse_vocab(struct allm_tokenizer *tok, json_t *model, json_t *added,
		       struct allm_err *err)
{
	json_t *vocab = json_object_get(model, "vocab"), *v;
	const char *key;
	size_t bytes = 0, n = 0, i;
	int32_t n_ids = 0;
	int r;

	if (!json_is_object(vocab))
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.vocab: missing or not an object");
	if (added && !json_is_array(added))
		return allm_err_set(err, -EINVAL, "tokenizer.json: added_tokens: not an array");
	r = size_tables(vocab, added, &n_ids, &bytes, err);
	if (r < 0)
		return r;
	struct allm_tok_def *defs = allm_malloc((json_object_size(vocab) + json_array_size(added) + 1) * sizeof(*defs));
	if (!defs)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	json_object_foreach(vocab, key, v)
		defs[n++] = (struct allm_tok_def){.s = key, .len = (uint32_t)strlen(key), .id = (int32_t)json_integer_value(v)};
	json_array_foreach(added, i, v) {
		json_t *content = json_object_get(v, "content");
		struct allm_tok_def *d = &defs[n++];
		*d = (struct allm_tok_def){.s = json_string_value(content), .len = (uint32_t)json_string_length(content),
					   .added = true, .special = json_bool_or(v, "special", false),
					   .lstrip = json_bool_or(v, "lstrip", false), .rstrip = json_bool_or(v, "rstrip", false),
					   .single_word = json_bool_or(v, "single_word", false)};
		json_id(json_object_get(v, "id"), &d->id);
	}
	r = allm_tok_set_vocab(tok, n_ids, defs, n, false, "tokenizer.json: model.vocab", "tokenizer.json: added_tokens", err);
	allm_free(defs);
	return r;
}

static int parse_model(struct allm_tokenizer *tok, json_t *root, struct allm_err *err)
{
	json_t *model = json_object_get(root, "model");
	int r;

	if (!json_is_object(model))
		return allm_err_set(err, -EINVAL, "tokenizer.json: model: missing or not an object");
	/* The older hub layout has no model.type; vocab + merges mean BPE. */
	const char *type = allm_tok_json_str(model, "type");
	if (type && strcmp(type, "BPE"))
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.type: unsupported '%s' (only BPE is implemented)", type);
	if (!type && !json_object_get(model, "merges"))
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.type: missing and no model.merges (not a BPE model)");
	r = parse_vocab(tok, model, json_object_get(root, "added_tokens"), err);
	if (r < 0)
		return r;
	r = parse_merges(tok, json_object_get(model, "merges"), err);
	if (r < 0)
		return r;
	const char *s = allm_tok_json_str(model, "continuing_subword_prefix");
	if (s && *s)
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.continuing_subword_prefix: '%s' is not supported", s);
	s = allm_tok_json_str(model, "end_of_word_suffix");
	if (s && *s)
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.end_of_word_suffix: '%s' is not supported", s);
	tok->byte_fallback = json_bool_or(model, "byte_fallback", false);
	tok->fuse_unk = json_bool_or(model, "fuse_unk", false);
	tok->ignore_merges = json_bool_or(model, "ignore_merges", false);
	tok->unk_id = -1;
	s = allm_tok_json_str(model, "unk_token");
	if (s) {
		tok->unk_id = allm_tok_strmap_get(&tok->vocab, tok, s, strlen(s));
		if (tok->unk_id < 0)
			return allm_err_set(err, -EINVAL, "tokenizer.json: model.unk_token: '%s' is not in model.vocab", s);
	}
	allm_tok_index_bytes(tok);
	return 0;
}

static int parse_normalizer(struct allm_tokenizer *tok, json_t *nm, const char *field,
			    struct allm_err *err)
{
	const char *type = allm_tok_json_type(nm);
	size_t i;
	json_t *v;

	if (!nm || json_is_null(nm))
		return 0;
	if (!strcmp(type, "Sequence")) {
		json_t *list = json_object_get(nm, "normalizers");
		if (!json_is_array(list))
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.normalizers: missing or not an array", field);
		json_array_foreach(list, i, v) {
			char sub[64];
			snprintf(sub, sizeof(sub), "%s.normalizers[%zu]", field, i);
			int r = parse_normalizer(tok, v, sub, err);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (!strcmp(type, "NFC")) /* Qwen2's */
		return allm_tok_add_norm(tok, ALLM_TOK_NORM_NFC, "", NULL) < 0
			? allm_err_set(err, -ENOMEM, "tokenizer: out of memory") : 0;
	if (!strcmp(type, "Prepend")) {
		const char *p = allm_tok_json_str(nm, "prepend");
		if (!p)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.prepend: missing or not a string", field);
		return allm_tok_add_norm(tok, ALLM_TOK_NORM_PREPEND, p, NULL) < 0
			? allm_err_set(err, -ENOMEM, "tokenizer: out of memory") : 0;
	}
	if (!strcmp(type, "Replace")) {
		const char *pat = allm_tok_json_str(json_object_get(nm, "pattern"), "String");
		const char *content = allm_tok_json_str(nm, "content");
		if (!pat || !*pat)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.pattern: only a non-empty String pattern is supported", field);
		if (!content)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.content: missing or not a string", field);
		return allm_tok_add_norm(tok, ALLM_TOK_NORM_REPLACE, pat, content) < 0
			? allm_err_set(err, -ENOMEM, "tokenizer: out of memory") : 0;
	}
	return allm_err_set(err, -EINVAL, "tokenizer.json: %s.type: unsupported normalizer '%s' (NFC, Prepend, Replace and Sequence are implemented)",
			    field, type);
}

/* Split patterns we implement, as written in tokenizer.json (after JSON unescaping). */
static const struct {
	const char *pattern;
	enum allm_tok_split split;
} known_splits[] = {
	{ "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
	  ALLM_TOK_SPLIT_GPT2 },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  ALLM_TOK_SPLIT_LLAMA3 },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  ALLM_TOK_SPLIT_QWEN2 },
};

static int set_split(struct allm_tokenizer *tok, enum allm_tok_split split, const char *field,
		     struct allm_err *err)
{
	if (tok->split != ALLM_TOK_SPLIT_NONE)
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s: a second splitting stage is not supported", field);
	tok->split = split;
	return 0;
}

static int parse_split(struct allm_tokenizer *tok, json_t *pt, const char *field,
		       struct allm_err *err)
{
	const char *re = allm_tok_json_str(json_object_get(pt, "pattern"), "Regex");
	const char *str = allm_tok_json_str(json_object_get(pt, "pattern"), "String");
	const char *behavior = allm_tok_json_str(pt, "behavior");

	/* Gemma's tokenizer.json splits on " " after a normalizer that has replaced
	 * every space: it has nothing left to split, as in transformers' own tokenizer
	 * (which dropped it). Any other split on a string is refused. */
	if (!re && str && !strcmp(str, " ") && !json_bool_or(pt, "invert", false)) {
		for (size_t k = 0; k < tok->n_norms; k++)
			if (tok->norms[k].kind == ALLM_TOK_NORM_REPLACE && !strcmp(tok->norms[k].a, " ") &&
			    !strchr(tok->norms[k].b, ' '))
				return 0;
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.pattern.String: a split on ' ' is supported "
				    "only after a normalizer that replaces every space", field);
	}
	if (!re)
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.pattern.Regex: missing (only Regex split patterns are supported)", field);
	if (json_bool_or(pt, "invert", false))
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.invert: true is not supported", field);
	if (!behavior || strcmp(behavior, "Isolated"))
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.behavior: '%s' is not supported (only Isolated)",
				    field, behavior ? behavior : "?");
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(known_splits); k++)
		if (!strcmp(re, known_splits[k].pattern))
			return set_split(tok, known_splits[k].split, field, err);
	return allm_err_set(err, -EINVAL, "tokenizer.json: %s.pattern.Regex: unsupported split pattern '%.200s' (GPT-2, Llama-3 and Qwen2 patterns are implemented)",
			    field, re);
}

static int parse_metaspace(struct allm_tokenizer *tok, json_t *pt, const char *field,
			   struct allm_err *err)
{
	const char *repl = allm_tok_json_str(pt, "replacement");
	const char *scheme = allm_tok_json_str(pt, "prepend_scheme");

	if (tok->digits != ALLM_TOK_DIGITS_NONE) /* its prepend is per piece in HF */
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s: Metaspace after Digits is not supported", field);
	if (!repl || !*repl || strlen(repl) >= sizeof(tok->ms_repl))
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.replacement: missing or not one character", field);
	strcpy(tok->ms_repl, repl);
	tok->metaspace = true;
	if (scheme) {
		if (!strcmp(scheme, "always"))
			tok->ms_prepend = ALLM_TOK_PREPEND_ALWAYS;
		else if (!strcmp(scheme, "first"))
			tok->ms_prepend = ALLM_TOK_PREPEND_FIRST;
		else if (!strcmp(scheme, "never"))
			tok->ms_prepend = ALLM_TOK_PREPEND_NEVER;
		else
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.prepend_scheme: unknown '%s'", field, scheme);
	} else {
		/* Older files: add_prefix_space (default true) means "always". */
		tok->ms_prepend = json_bool_or(pt, "add_prefix_space", true)
			? ALLM_TOK_PREPEND_ALWAYS : ALLM_TOK_PREPEND_NEVER;
	}
	if (json_bool_or(pt, "split", true))
		return set_split(tok, ALLM_TOK_SPLIT_METASPACE, field, err);
	return 0;
}

static int parse_pretok(struct allm_tokenizer *tok, json_t *pt, const char *field,
			struct allm_err *err)
{
	const char *type = allm_tok_json_type(pt);
	size_t i;
	json_t *v;

	if (!pt || json_is_null(pt))
		return 0;
	if (!strcmp(type, "Sequence")) {
		json_t *list = json_object_get(pt, "pretokenizers");
		if (!json_is_array(list))
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.pretokenizers: missing or not an array", field);
		json_array_foreach(list, i, v) {
			char sub[64];
			snprintf(sub, sizeof(sub), "%s.pretokenizers[%zu]", field, i);
			int r = parse_pretok(tok, v, sub, err);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (!strcmp(type, "ByteLevel")) {
		tok->byte_level = true;
		/* HF defaults: add_prefix_space true, use_regex true (the hub layout
		 * omits use_regex). */
		tok->bl_add_prefix_space = json_bool_or(pt, "add_prefix_space", true);
		/* HF adds the space to every piece Digits made: not what normalize() does */
		if (tok->bl_add_prefix_space && tok->digits != ALLM_TOK_DIGITS_NONE)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.add_prefix_space: true after Digits is not supported", field);
		if (json_bool_or(pt, "use_regex", true))
			return set_split(tok, ALLM_TOK_SPLIT_GPT2, field, err);
		return 0;
	}
	if (!strcmp(type, "Split"))
		return parse_split(tok, pt, field, err);
	if (!strcmp(type, "Digits")) {
		/* runs before the split pattern (see encode_segment): only in that place */
		if (tok->split != ALLM_TOK_SPLIT_NONE || tok->byte_level || tok->metaspace)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.type: Digits after another pre-tokenizer is not supported", field);
		tok->digits = json_bool_or(pt, "individual_digits", false) ? ALLM_TOK_DIGITS_INDIVIDUAL
									  : ALLM_TOK_DIGITS_GROUPED;
		return 0;
	}
	if (!strcmp(type, "Metaspace"))
		return parse_metaspace(tok, pt, field, err);
	return allm_err_set(err, -EINVAL, "tokenizer.json: %s.type: unsupported pre-tokenizer '%s' (ByteLevel, Split, Metaspace, Digits and Sequence are implemented)",
			    field, type);
}

static int parse_dec_step(struct allm_tokenizer *tok, struct allm_tok_dec_spec *spec, json_t *d,
			  const char *field, struct allm_err *err)
{
	const char *type = allm_tok_json_type(d);

	if (!strcmp(type, "ByteLevel")) {
		spec->byte_level = true;
	} else if (!strcmp(type, "ByteFallback")) {
		spec->byte_fallback = true;
	} else if (!strcmp(type, "Fuse")) {
		spec->fused = true;
	} else if (!strcmp(type, "Replace") || !strcmp(type, "Metaspace")) {
		const char *pat, *rep = " ";
		if (type[0] == 'R') {
			pat = allm_tok_json_str(json_object_get(d, "pattern"), "String");
			rep = allm_tok_json_str(d, "content");
		} else {
			pat = allm_tok_json_str(d, "replacement");
			const char *scheme = allm_tok_json_str(d, "prepend_scheme");
			bool prepend = scheme ? strcmp(scheme, "never") != 0
					      : json_is_true(json_object_get(d, "add_prefix_space"));
			/* Metaspace removes the space it prepended at the start. */
			tok->strip_start = prepend ? 1 : 0;
		}
		if (!pat || !*pat || !rep)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.pattern: only String patterns with a content are supported", field);
		if (spec->n_repl == ALLM_TOK_MAX_REPLACES)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s: too many Replace decoders", field);
		spec->pat[spec->n_repl] = pat;
		spec->rep[spec->n_repl++] = rep;
	} else if (!strcmp(type, "Strip")) {
		const char *content = allm_tok_json_str(d, "content");
		json_t *start = json_object_get(d, "start"), *stop = json_object_get(d, "stop");
		if (!spec->fused)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s: Strip before Fuse (per-token strip) is not supported", field);
		if (!content || strlen(content) != 1 || !json_is_integer(start) ||
		    json_integer_value(start) < 0 || json_integer_value(start) > 64)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.content/start: expected one ASCII char and a small count", field);
		if (json_integer_value(stop) != 0)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.stop: stripping the end is not supported", field);
		tok->strip_char = content[0];
		tok->strip_start = (uint32_t)json_integer_value(start);
	} else {
		return allm_err_set(err, -EINVAL, "tokenizer.json: %s.type: unsupported decoder '%s'", field, type);
	}
	return 0;
}

/* The decoder: its steps into a spec, then the bytes of every id. */
static int parse_decoder(struct allm_tokenizer *tok, json_t *dec, struct allm_err *err)
{
	struct allm_tok_dec_spec spec = { 0 };
	size_t i;
	json_t *v;
	int r = 0;

	if (!dec || json_is_null(dec)) {
		tok->join_space = true; /* HF joins the tokens with spaces */
	} else if (!strcmp(allm_tok_json_type(dec), "Sequence")) {
		json_t *list = json_object_get(dec, "decoders");
		if (!json_is_array(list))
			return allm_err_set(err, -EINVAL, "tokenizer.json: decoder.decoders: missing or not an array");
		json_array_foreach(list, i, v) {
			char sub[64];
			snprintf(sub, sizeof(sub), "decoder.decoders[%zu]", i);
			r = parse_dec_step(tok, &spec, v, sub, err);
			if (r < 0)
				return r;
		}
	} else {
		spec.fused = true; /* a single decoder sees the whole sequence */
		r = parse_dec_step(tok, &spec, dec, "decoder", err);
		if (r < 0)
			return r;
	}
	return allm_tok_build_decoder(tok, &spec, err);
}

/* tokenizer.json this large is not one (real ones are a few MiB). */
#define TOK_JSON_MAX (256u << 20)

static int load_root(json_t *root, const struct allm_vdir *configs, struct allm_tokenizer **ret,
		     struct allm_err *err)
{
	struct allm_tokenizer *tok = NULL;
	int r = allm_tok_new(&tok, err);

	if (r)
		return r;
	if (!json_is_object(root)) {
		r = allm_err_set(err, -EINVAL, "tokenizer.json: top level is not an object");
		goto out;
	}
	r = parse_model(tok, root, err);
	if (r == 0)
		r = parse_normalizer(tok, json_object_get(root, "normalizer"), "normalizer", err);
	if (r == 0)
		r = parse_pretok(tok, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", err);
	if (r == 0)
		r = allm_tok_parse_post(tok, json_object_get(root, "post_processor"), err);
	if (r == 0)
		r = parse_decoder(tok, json_object_get(root, "decoder"), err);
	if (r == 0)
		r = allm_tok_load_configs(tok, configs, err);
out:
	if (r < 0) {
		allm_tokenizer_free(tok);
		return r;
	}
	*ret = tok;
	return 0;
}

/* Loads name from dir, and the companion configs beside it when configs. */
static int load_common(const struct allm_vdir *dir, const char *name, bool configs,
		       struct allm_tokenizer **ret, struct allm_err *err)
{
	json_error_t jerr;
	json_t *root;
	char path[4096], *text = NULL;
	size_t len = 0;
	int r;

	allm_vdir_join(dir, name, path, sizeof(path));
	r = allm_vdir_read(dir, name, TOK_JSON_MAX, &text, &len);
	if (r)
		return allm_err_set(err, r == -ENOENT ? -ENOENT : r == -EFBIG ? -EINVAL : -EIO,
				    "tokenizer: cannot open %s%s", path, r == -EFBIG ? ": too large" : "");
	root = json_loadb(text, len, 0, &jerr);
	allm_free(text);
	if (!root)
		return allm_err_set(err, -EINVAL, "tokenizer: %s: line %d: %s", path, jerr.line, jerr.text);
	r = load_root(root, configs ? dir : NULL, ret, err);
	json_decref(root);
	return r;
}

int allm_tokenizer_load_file(const char *tokenizer_json_path, struct allm_tokenizer **ret,
			     struct allm_err *err)
{
	struct allm_vdir here = allm_vdir_disk(""); /* the name is the path */
	return load_common(&here, tokenizer_json_path, false, ret, err);
}

int allm_tok_load_hf(const struct allm_vdir *dir, struct allm_tokenizer **ret, struct allm_err *err)
{
	return load_common(dir, "tokenizer.json", true, ret, err);
}
