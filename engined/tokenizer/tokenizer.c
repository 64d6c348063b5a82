/* Loading tokenizer.json: the BPE model (vocab, merges, options), the added
 * tokens, the normalizer and the pre-tokenizer. The post-processor, the companion
 * config files and BOS/EOS are in tokenizer-config.c, the decoder in detokenizer.c.
 *
 * Every unsupported or malformed part fails the load with a message that names the
 * JSON field, so a file we cannot reproduce exactly is never tokenized differently
 * in silence. */
#include "tokenizer-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

const char *allm_tok_json_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

const char *allm_tok_json_type(json_t *obj)
{
	const char *t = allm_tok_json_str(obj, "type");
	return t ? t : "?";
}

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

static int add_merge_pair(struct allm_tokenizer *tok, size_t rank, const char *a, size_t al,
			  const char *b, size_t bl, char **cat, size_t *cat_cap,
			  struct allm_err *err)
{
	int32_t ia = allm_tok_strmap_get(&tok->vocab, tok, a, al);
	int32_t ib = allm_tok_strmap_get(&tok->vocab, tok, b, bl);
	if (ia < 0 || ib < 0)
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.merges[%zu]: '%.*s' is not in model.vocab",
				    rank, (int)(ia < 0 ? al : bl), ia < 0 ? a : b);
	if (al + bl > *cat_cap) {
		size_t cap = 2 * (al + bl);
		char *p = allm_realloc(*cat, cap);
		if (!p)
			return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
		*cat = p;
		*cat_cap = cap;
	}
	memcpy(*cat, a, al);
	memcpy(*cat + al, b, bl);
	int32_t im = allm_tok_strmap_get(&tok->vocab, tok, *cat, al + bl);
	if (im < 0)
		return allm_err_set(err, -EINVAL,
				    "tokenizer.json: model.merges[%zu]: merged token '%.*s' is not in model.vocab",
				    rank, (int)(al + bl), *cat);
	allm_tok_pairmap_put(&tok->merges, ia, ib, (uint32_t)rank, im);
	return 0;
}

/* merges: "a b" strings (older files) or ["a", "b"] pairs (newer files). */
static int parse_merges(struct allm_tokenizer *tok, json_t *merges, struct allm_err *err)
{
	char *cat = NULL;
	size_t cat_cap = 0, i;
	json_t *m;
	int r = 0;

	if (!json_is_array(merges))
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.merges: missing or not an array");
	tok->n_merges = json_array_size(merges);
	if (allm_tok_pairmap_init(&tok->merges, tok->n_merges) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	json_array_foreach(merges, i, m) {
		const char *a, *b;
		size_t al, bl;
		if (json_is_string(m)) {
			a = json_string_value(m);
			const char *sp = strchr(a, ' ');
			if (!sp || strchr(sp + 1, ' ') || sp == a || !sp[1]) {
				r = allm_err_set(err, -EINVAL, "tokenizer.json: model.merges[%zu]: '%s' is not two tokens separated by one space",
						 i, a);
				break;
			}
			al = (size_t)(sp - a);
			b = sp + 1;
			bl = strlen(b);
		} else if (json_is_array(m) && json_array_size(m) == 2 &&
			   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
			a = json_string_value(json_array_get(m, 0));
			b = json_string_value(json_array_get(m, 1));
			al = json_string_length(json_array_get(m, 0));
			bl = json_string_length(json_array_get(m, 1));
		} else {
			r = allm_err_set(err, -EINVAL, "tokenizer.json: model.merges[%zu]: neither \"a b\" nor [\"a\", \"b\"]", i);
			break;
		}
		r = add_merge_pair(tok, i, a, al, b, bl, &cat, &cat_cap, err);
		if (r < 0)
			break;
	}
	allm_free(cat);
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

static char *arena_put(char **arena, const char *s, size_t n)
{
	char *p = *arena;
	memcpy(p, s, n);
	p[n] = 0;
	*arena += n + 1;
	return p;
}

static int cmp_added(const void *pa, const void *pb)
{
	const struct allm_tok_added *a = pa, *b = pb;
	uint8_t fa = (uint8_t)a->content[0], fb = (uint8_t)b->content[0];
	if (fa != fb)
		return fa < fb ? -1 : 1;
	return a->len > b->len ? -1 : a->len < b->len; /* longest first */
}

static int parse_added(struct allm_tokenizer *tok, json_t *added, char **arena,
		       struct allm_err *err)
{
	size_t n = json_array_size(added), i;
	json_t *v;

	tok->added = allm_calloc(n ? n : 1, sizeof(*tok->added));
	if (!tok->added)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	json_array_foreach(added, i, v) {
		struct allm_tok_added *a = &tok->added[i];
		json_t *content = json_object_get(v, "content");
		json_id(json_object_get(v, "id"), &a->id);
		a->len = (uint32_t)json_string_length(content);
		a->content = arena_put(arena, json_string_value(content), a->len);
		a->special = json_bool_or(v, "special", false);
		a->lstrip = json_bool_or(v, "lstrip", false);
		a->rstrip = json_bool_or(v, "rstrip", false);
		a->single_word = json_bool_or(v, "single_word", false);
		tok->flags[a->id] |= ALLM_TOKF_ADDED | (a->special ? ALLM_TOKF_SPECIAL : 0);
		if (!tok->tokens[a->id]) {
			tok->tokens[a->id] = (char *)a->content;
			tok->token_len[a->id] = a->len;
		}
	}
	tok->n_added = n;
	qsort(tok->added, n, sizeof(*tok->added), cmp_added);
	for (int b = 0, k = 0; b <= 256; b++) {
		while (k < (int)n && (uint8_t)tok->added[k].content[0] < b)
			k++;
		tok->added_first[b] = (uint32_t)k;
	}
	return 0;
}

/* Model vocab + added tokens -> id tables and the string map. */
static int parse_vocab(struct allm_tokenizer *tok, json_t *model, json_t *added,
		       struct allm_err *err)
{
	json_t *vocab = json_object_get(model, "vocab"), *v;
	const char *key;
	size_t bytes = 0;
	int r;

	if (!json_is_object(vocab))
		return allm_err_set(err, -EINVAL, "tokenizer.json: model.vocab: missing or not an object");
	if (added && !json_is_array(added))
		return allm_err_set(err, -EINVAL, "tokenizer.json: added_tokens: not an array");
	r = size_tables(vocab, added, &tok->n_ids, &bytes, err);
	if (r < 0)
		return r;
	tok->tokens = allm_calloc((size_t)tok->n_ids, sizeof(*tok->tokens));
	tok->token_len = allm_calloc((size_t)tok->n_ids, sizeof(*tok->token_len));
	tok->flags = allm_calloc((size_t)tok->n_ids, 1);
	tok->arena = allm_malloc(bytes ? bytes : 1);
	if (!tok->tokens || !tok->token_len || !tok->flags || !tok->arena ||
	    allm_tok_strmap_init(&tok->vocab, (size_t)tok->n_ids + json_array_size(added)) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	char *arena = tok->arena;
	json_object_foreach(vocab, key, v) {
		int32_t id = (int32_t)json_integer_value(v);
		if (tok->tokens[id])
			return allm_err_set(err, -EINVAL, "tokenizer.json: model.vocab: id %d used by both '%s' and '%s'",
					    id, tok->tokens[id], key);
		tok->token_len[id] = (uint32_t)strlen(key);
		tok->tokens[id] = arena_put(&arena, key, tok->token_len[id]);
	}
	r = parse_added(tok, added, &arena, err);
	if (r < 0)
		return r;
	for (int32_t id = 0; id < tok->n_ids; id++)
		if (tok->tokens[id])
			allm_tok_strmap_put(&tok->vocab, tok, id);
	/* Added tokens whose id holds another vocab string are still found by text. */
	for (size_t i = 0; i < tok->n_added; i++)
		if (tok->tokens[tok->added[i].id] != tok->added[i].content &&
		    allm_tok_strmap_get(&tok->vocab, tok, tok->added[i].content, tok->added[i].len) < 0)
			return allm_err_set(err, -EINVAL, "tokenizer.json: added_tokens: '%s' reuses id %d of vocab entry '%s'",
					    tok->added[i].content, tok->added[i].id, tok->tokens[tok->added[i].id]);
	return 0;
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
	for (int b = 0; b < 256; b++) {
		char name[8];
		snprintf(name, sizeof(name), "<0x%02X>", b);
		tok->byte_ids[b] = allm_tok_strmap_get(&tok->vocab, tok, name, 6);
		/* Byte-level code points are all below U+0800: one or two UTF-8 bytes. */
		uint32_t cp = allm_tok_byte_to_cp((uint8_t)b);
		char u[2] = { (char)cp, 0 };
		if (cp >= 0x80) {
			u[0] = (char)(0xC0 | (cp >> 6));
			u[1] = (char)(0x80 | (cp & 0x3F));
		}
		tok->bytelevel_ids[b] = allm_tok_strmap_get(&tok->vocab, tok, u, cp < 0x80 ? 1 : 2);
		if (b < 128)
			tok->ascii_ids[b] = allm_tok_strmap_get(&tok->vocab, tok, (char[]){ (char)b }, 1);
	}
	return 0;
}

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = allm_malloc(n);
	return p ? memcpy(p, s, n) : NULL;
}

static int add_norm(struct allm_tokenizer *tok, enum allm_tok_norm_kind kind, const char *a,
		    const char *b)
{
	struct allm_tok_norm *n = allm_realloc(tok->norms, (tok->n_norms + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	tok->norms = n;
	n = &n[tok->n_norms++];
	*n = (struct allm_tok_norm){ .kind = kind, .a = dup_str(a), .b = b ? dup_str(b) : NULL };
	return n->a && (!b || n->b) ? 0 : -ENOMEM;
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
	if (!strcmp(type, "Prepend")) {
		const char *p = allm_tok_json_str(nm, "prepend");
		if (!p)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.prepend: missing or not a string", field);
		return add_norm(tok, ALLM_TOK_NORM_PREPEND, p, NULL) < 0
			? allm_err_set(err, -ENOMEM, "tokenizer: out of memory") : 0;
	}
	if (!strcmp(type, "Replace")) {
		const char *pat = allm_tok_json_str(json_object_get(nm, "pattern"), "String");
		const char *content = allm_tok_json_str(nm, "content");
		if (!pat || !*pat)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.pattern: only a non-empty String pattern is supported", field);
		if (!content)
			return allm_err_set(err, -EINVAL, "tokenizer.json: %s.content: missing or not a string", field);
		return add_norm(tok, ALLM_TOK_NORM_REPLACE, pat, content) < 0
			? allm_err_set(err, -ENOMEM, "tokenizer: out of memory") : 0;
	}
	return allm_err_set(err, -EINVAL, "tokenizer.json: %s.type: unsupported normalizer '%s' (Prepend, Replace and Sequence are implemented)",
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
	const char *behavior = allm_tok_json_str(pt, "behavior");

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

/* tokenizer.json this large is not one (real ones are a few MiB). */
#define TOK_JSON_MAX (256u << 20)

int allm_tok_load_root(json_t *root, const struct allm_vdir *configs, struct allm_tokenizer **ret,
		       struct allm_err *err)
{
	struct allm_tokenizer *tok = allm_calloc(1, sizeof(*tok));
	int r;

	if (!tok)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	tok->bos_id = tok->eos_id = tok->unk_id = -1;
	tok->strip_char = ' ';
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
		r = allm_tok_parse_decoder(tok, json_object_get(root, "decoder"), err);
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
	r = allm_tok_load_root(root, configs ? dir : NULL, ret, err);
	json_decref(root);
	return r;
}

int allm_tokenizer_load_file(const char *tokenizer_json_path, struct allm_tokenizer **ret,
			     struct allm_err *err)
{
	struct allm_vdir here = allm_vdir_disk(""); /* the name is the path */
	return load_common(&here, tokenizer_json_path, false, ret, err);
}

int allm_tokenizer_load(const char *model_dir, struct allm_tokenizer **ret,
			struct allm_err *err)
{
	struct allm_vdir d = allm_vdir_disk(model_dir);
	return allm_tokenizer_load_from(&d, ret, err);
}

int allm_tokenizer_load_from(const struct allm_vdir *dir, struct allm_tokenizer **ret,
			     struct allm_err *err)
{
	if (!allm_vdir_embedded(dir) && allm_gguf_is_file(dir->path))
		return allm_tokenizer_load_gguf(dir->path, ret, err); /* --model FILE.gguf */
	return load_common(dir, "tokenizer.json", true, ret, err);
}

void allm_tokenizer_free(struct allm_tokenizer *tok)
{
	if (!tok)
		return;
	allm_tok_strmap_fini(&tok->vocab);
	allm_tok_pairmap_fini(&tok->merges);
	for (size_t i = 0; i < tok->n_norms; i++) {
		allm_free(tok->norms[i].a);
		allm_free(tok->norms[i].b);
	}
	allm_free(tok->norms);
	allm_free(tok->tokens);
	allm_free(tok->token_len);
	allm_free(tok->flags);
	allm_free(tok->arena);
	allm_free(tok->added);
	allm_free(tok->prefix_ids);
	allm_free(tok->suffix_ids);
	allm_free(tok->dec);
	allm_free(tok->dec_off);
	allm_free(tok->eos_ids);
	allm_free(tok);
}

int32_t allm_tokenizer_vocab_size(const struct allm_tokenizer *tok)
{
	return tok->n_ids;
}

const char *allm_tokenizer_id_to_token(const struct allm_tokenizer *tok, int32_t id)
{
	return id >= 0 && id < tok->n_ids ? tok->tokens[id] : NULL;
}

int32_t allm_tokenizer_token_to_id(const struct allm_tokenizer *tok, const char *s)
{
	return allm_tok_strmap_get(&tok->vocab, tok, s, strlen(s));
}

bool allm_tokenizer_is_special(const struct allm_tokenizer *tok, int32_t id)
{
	return id >= 0 && id < tok->n_ids && (tok->flags[id] & ALLM_TOKF_SPECIAL);
}
