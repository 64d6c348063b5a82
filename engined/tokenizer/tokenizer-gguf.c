/* A GGUF file's tokenizer (tokenizer.ggml.*), imported as the tokenizer.json it
 * stands for, so that one loader and one encoder serve both (see tokenizer.h):
 *
 *   gpt2   model BPE (vocab from tokens, merges as given), the added tokens, the
 *          pre-tokenizer tokenizer.ggml.pre names (the table below: the same split
 *          patterns llama.cpp runs for those names), decoder ByteLevel.
 *   llama  SentencePiece BPE: model BPE with byte_fallback, normalizer Prepend "▁"
 *          (add_space_prefix) + Replace " " -> "▁", decoder Replace / ByteFallback /
 *          Fuse / Strip -- Llama-2's tokenizer.json. SentencePiece merges the pair whose
 *          merged piece scores highest; the merges are rebuilt from the scores with
 *          that rank (equal scores share it, leftmost first, as llama.cpp's queue does).
 *
 * Token types (llama.cpp's): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
 * 6 byte. Unknown and control tokens become special added tokens (matched in the text
 * before anything else, dropped by skip_special), user-defined ones plain added
 * tokens, the rest the model's vocabulary. */
#include "tokenizer-internal.h"

#include <stdio.h>
#include <stdlib.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* The patterns known_splits (tokenizer.c) recognises, as tokenizer.json writes them. */
#define RE_LLAMA3                                                                              \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                               \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

enum pre_kind { PRE_GPT2, PRE_LLAMA3, PRE_QWEN2, PRE_DIGITS_GPT2 };

/* tokenizer.ggml.pre values and the pre-tokenizer each stands for (llama.cpp's
 * llm_tokenizer_bpe regexes for the same names). */
static const struct {
	const char *name;
	enum pre_kind kind;
} pres[] = {
	{"default", PRE_GPT2},	       {"gpt2", PRE_GPT2},	      {"gpt-2", PRE_GPT2},
	{"llama3", PRE_LLAMA3},	       {"llama-bpe", PRE_LLAMA3},      {"llama-v3", PRE_LLAMA3},
	{"qwen2", PRE_QWEN2},	       {"smollm", PRE_DIGITS_GPT2},    {"starcoder", PRE_DIGITS_GPT2},
	{"refact", PRE_DIGITS_GPT2},
};

/* JSON builders that check allocation once, at the end: jansson returns NULL and
 * the setters refuse NULL, so a failed allocation surfaces as a missing part. */
static json_t *obj2(const char *k1, json_t *v1, const char *k2, json_t *v2)
{
	json_t *o = json_object();
	json_object_set_new(o, k1, v1);
	if (k2)
		json_object_set_new(o, k2, v2);
	return o;
}

static json_t *typed(const char *type)
{
	return obj2("type", json_string(type), NULL, NULL);
}

static json_t *pre_tokenizer(enum pre_kind kind)
{
	json_t *bl = typed("ByteLevel"), *seq = json_array();
	json_object_set_new(bl, "add_prefix_space", json_false());
	json_object_set_new(bl, "use_regex", json_boolean(kind == PRE_GPT2 || kind == PRE_DIGITS_GPT2));
	if (kind == PRE_GPT2) {
		json_decref(seq);
		return bl;
	}
	if (kind == PRE_DIGITS_GPT2) {
		json_t *dg = typed("Digits");
		json_object_set_new(dg, "individual_digits", json_true());
		json_array_append_new(seq, dg);
	} else {
		json_t *sp = typed("Split");
		json_object_set_new(sp, "pattern",
				    obj2("Regex", json_string(kind == PRE_LLAMA3 ? RE_LLAMA3 : RE_QWEN2), NULL, NULL));
		json_object_set_new(sp, "behavior", json_string("Isolated"));
		json_array_append_new(seq, sp);
	}
	json_array_append_new(seq, bl);
	return obj2("type", json_string("Sequence"), "pretokenizers", seq);
}

/* Llama-2's normalizer and decoder. */
static json_t *spm_normalizer(bool add_space_prefix)
{
	json_t *seq = json_array(), *rep = typed("Replace");
	json_object_set_new(rep, "pattern", obj2("String", json_string(" "), NULL, NULL));
	json_object_set_new(rep, "content", json_string("\xe2\x96\x81"));
	if (add_space_prefix) {
		json_t *pre = typed("Prepend");
		json_object_set_new(pre, "prepend", json_string("\xe2\x96\x81"));
		json_array_append_new(seq, pre);
	}
	json_array_append_new(seq, rep);
	return obj2("type", json_string("Sequence"), "normalizers", seq);
}

static json_t *spm_decoder(bool add_space_prefix)
{
	json_t *seq = json_array(), *rep = typed("Replace"), *strip = typed("Strip");
	json_object_set_new(rep, "pattern", obj2("String", json_string("\xe2\x96\x81"), NULL, NULL));
	json_object_set_new(rep, "content", json_string(" "));
	json_array_append_new(seq, rep);
	json_array_append_new(seq, typed("ByteFallback"));
	json_array_append_new(seq, typed("Fuse"));
	if (add_space_prefix) {
		json_object_set_new(strip, "content", json_string(" "));
		json_object_set_new(strip, "start", json_integer(1));
		json_object_set_new(strip, "stop", json_integer(0));
		json_array_append_new(seq, strip);
	} else {
		json_decref(strip);
	}
	return obj2("type", json_string("Sequence"), "decoders", seq);
}

struct gguf_vocab {
	const struct allm_gguf_kv *tokens, *types, *scores, *merges;
	uint64_t n;
};

/* model.vocab and added_tokens from the token list. */
static int vocab_json(const struct allm_gguf *g, const struct gguf_vocab *v, json_t *vocab,
		      json_t *added, struct allm_err *err)
{
	for (uint64_t i = 0; i < v->n; i++) {
		uint64_t len;
		const char *s = allm_gguf_arr_str(v->tokens, i, &len);
		int64_t type = v->types ? allm_gguf_arr_int(v->types, i) : TT_NORMAL;
		if (type < TT_NORMAL || type > TT_BYTE)
			return allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.token_type[%llu] is %lld (1 to 6)",
					    g->path, (unsigned long long)i, (long long)type);
		if (len > ALLM_TOK_MAX_TOKEN_BYTES)
			return allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.tokens[%llu] is %llu bytes long "
					    "(at most %d: no real vocabulary comes near)", g->path, (unsigned long long)i,
					    (unsigned long long)len, ALLM_TOK_MAX_TOKEN_BYTES);
		if (len == 0 || memchr(s, 0, len) || allm_tok_utf8_valid_prefix((const uint8_t *)s, len) != len)
			return allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.tokens[%llu] is %s", g->path,
					    (unsigned long long)i,
					    len == 0 ? "empty" : "not valid UTF-8 without NUL bytes");
		json_t *id = json_integer((json_int_t)i);
		if (json_object_getn(vocab, s, len)) {
			json_decref(id);
			return allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.tokens[%llu] '%.*s' appears twice",
					    g->path, (unsigned long long)i, (int)ALLM_MIN(len, 64), s);
		}
		json_object_setn_new_nocheck(vocab, s, len, id);
		if (type == TT_UNKNOWN || type == TT_CONTROL || type == TT_USER) {
			json_t *a = obj2("id", json_integer((json_int_t)i), "content", json_stringn_nocheck(s, len));
			json_object_set_new(a, "special", json_boolean(type != TT_USER));
			json_array_append_new(added, a);
		}
	}
	return 0;
}

/* SentencePiece: the merges from the scores (tokenizer-spm.c); normal, user-defined
 * and unused pieces can be merged into, as llama.cpp's tokenizer finds them. */
static int spm_merges(struct allm_tokenizer *tok, const struct gguf_vocab *v, struct allm_err *err)
{
	float *score = allm_malloc((size_t)tok->n_ids * sizeof(*score));
	bool *mergeable = allm_malloc((size_t)tok->n_ids * sizeof(*mergeable));
	int r;
	if (!score || !mergeable) {
		r = allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
		goto out;
	}
	for (int32_t m = 0; m < tok->n_ids; m++) {
		int64_t type = v->types ? allm_gguf_arr_int(v->types, (uint64_t)m) : TT_NORMAL;
		mergeable[m] = type == TT_NORMAL || type == TT_USER || type == TT_UNUSED;
		score[m] = (float)allm_gguf_arr_float(v->scores, (uint64_t)m);
	}
	r = allm_tok_spm_merges(tok, score, mergeable, err);
out:
	allm_free(score);
	allm_free(mergeable);
	return r;
}

static int get_vocab(const struct allm_gguf *g, bool spm, struct gguf_vocab *v, struct allm_err *err)
{
	int r;
	memset(v, 0, sizeof(*v));
	if ((r = allm_gguf_get_arr(g, "tokenizer.ggml.tokens", ALLM_GGUF_STRING, &v->tokens, err)))
		return r == -ENOENT ? allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.tokens is missing", g->path) : r;
	v->n = v->tokens->v.arr.n;
	if (v->n == 0 || v->n > (1 << 24))
		return allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.tokens holds %llu tokens (1 to 2^24)",
				    g->path, (unsigned long long)v->n);
	if ((r = allm_gguf_get_arr(g, "tokenizer.ggml.token_type", ALLM_GGUF_VTYPE_COUNT, &v->types, err)) &&
	    r != -ENOENT)
		return r;
	if (v->types && (v->types->v.arr.type == ALLM_GGUF_STRING || v->types->v.arr.type == ALLM_GGUF_F32 ||
			 v->types->v.arr.type == ALLM_GGUF_F64 || v->types->v.arr.n != v->n))
		return allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.token_type is not %llu integers",
				    g->path, (unsigned long long)v->n);
	if (spm) {
		if ((r = allm_gguf_get_arr(g, "tokenizer.ggml.scores", ALLM_GGUF_VTYPE_COUNT, &v->scores, err)))
			return r == -ENOENT ? allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.scores is missing "
							   "(a llama tokenizer ranks its merges by them)", g->path) : r;
		if ((v->scores->v.arr.type != ALLM_GGUF_F32 && v->scores->v.arr.type != ALLM_GGUF_F64) ||
		    v->scores->v.arr.n != v->n)
			return allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.scores is not %llu floats",
					    g->path, (unsigned long long)v->n);
		return 0;
	}
	if ((r = allm_gguf_get_arr(g, "tokenizer.ggml.merges", ALLM_GGUF_STRING, &v->merges, err)))
		return r == -ENOENT ? allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.merges is missing", g->path) : r;
	return 0;
}

static int pre_kind(const struct allm_gguf *g, enum pre_kind *ret, struct allm_err *err)
{
	const char *s;
	size_t len;
	int r = allm_gguf_get_str(g, "tokenizer.ggml.pre", &s, &len, err);
	*ret = PRE_GPT2; /* files older than the key: GPT-2's split */
	if (r == -ENOENT)
		return 0;
	if (r)
		return r;
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(pres); i++)
		if (len == strlen(pres[i].name) && !memcmp(s, pres[i].name, len)) {
			*ret = pres[i].kind;
			return 0;
		}
	return allm_err_set(err, -ENOTSUP, "%s: GGUF: tokenizer.ggml.pre '%.*s' is not supported (default, "
			    "gpt2, llama3, llama-bpe, qwen2, smollm, starcoder, refact)",
			    g->path, (int)ALLM_MIN(len, 64), s);
}

/* The tokenizer.json a GGUF tokenizer stands for; *ret NULL on failure. */
static int build_root(const struct allm_gguf *g, bool spm, const struct gguf_vocab *v,
		      bool add_space_prefix, json_t **ret, struct allm_err *err)
{
	json_t *root = json_object(), *model = typed("BPE"), *vocab = json_object();
	json_t *added = json_array(), *merges = json_array();
	enum pre_kind pk = PRE_GPT2;
	int r;
	*ret = NULL;
	json_object_set_new(root, "model", model);
	json_object_set_new(model, "vocab", vocab);
	json_object_set_new(model, "merges", merges);
	json_object_set_new(root, "added_tokens", added);
	if ((r = vocab_json(g, v, vocab, added, err)))
		goto fail;
	if (spm) {
		int64_t unk = -1;
		json_object_set_new(model, "byte_fallback", json_true());
		json_object_set_new(model, "fuse_unk", json_true());
		r = allm_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", 0, (int64_t)v->n - 1, &unk, err);
		if (r && r != -ENOENT)
			goto fail;
		if (unk >= 0) {
			uint64_t len;
			const char *s = allm_gguf_arr_str(v->tokens, (uint64_t)unk, &len);
			json_object_set_new(model, "unk_token", json_stringn_nocheck(s, len));
		}
		json_object_set_new(root, "normalizer", spm_normalizer(add_space_prefix));
		json_object_set_new(root, "decoder", spm_decoder(add_space_prefix));
	} else {
		for (uint64_t i = 0; i < v->merges->v.arr.n; i++) {
			uint64_t len;
			const char *s = allm_gguf_arr_str(v->merges, i, &len);
			json_array_append_new(merges, json_stringn_nocheck(s, len));
		}
		if ((r = pre_kind(g, &pk, err)))
			goto fail;
		json_object_set_new(root, "pre_tokenizer", pre_tokenizer(pk));
		json_object_set_new(root, "decoder", typed("ByteLevel"));
	}
	/* a failed allocation anywhere left a part out: the sizes say so */
	if (json_object_size(vocab) != v->n || (!spm && json_array_size(merges) != v->merges->v.arr.n) ||
	    !json_object_get(root, "decoder")) {
		r = allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
		goto fail;
	}
	*ret = root;
	return 0;
fail:
	json_decref(root);
	return r;
}

static int set_special(struct allm_tokenizer *tok, const struct allm_gguf *g, bool spm,
		       struct allm_err *err)
{
	static const char *const eos_keys[] = {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
	int64_t bos = -1, eos = -1, id;
	bool add_bos = spm, add_eos = false; /* llama.cpp's defaults */
	int r;
	if (((r = allm_gguf_get_int(g, "tokenizer.ggml.bos_token_id", 0, tok->n_ids - 1, &bos, err)) && r != -ENOENT) ||
	    ((r = allm_gguf_get_int(g, "tokenizer.ggml.eos_token_id", 0, tok->n_ids - 1, &eos, err)) && r != -ENOENT) ||
	    ((r = allm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, err)) && r != -ENOENT) ||
	    ((r = allm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &add_eos, err)) && r != -ENOENT))
		return r;
	tok->bos_id = (int32_t)bos;
	tok->eos_id = eos >= 0 ? (int32_t)eos : tok->eos_id;
	tok->n_eos = 0;
	size_t cap = 1 + ALLM_ARRAY_SIZE(eos_keys);
	int32_t *ids = allm_realloc(tok->eos_ids, cap * sizeof(*ids));
	if (!ids)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	tok->eos_ids = ids;
	if (tok->eos_id >= 0)
		ids[tok->n_eos++] = tok->eos_id;
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(eos_keys); k++) {
		r = allm_gguf_get_int(g, eos_keys[k], 0, tok->n_ids - 1, &id, err);
		if (r == -ENOENT)
			continue;
		if (r)
			return r;
		if (!allm_tokenizer_is_eos(tok, (int32_t)id))
			ids[tok->n_eos++] = (int32_t)id;
	}
	if (allm_tok_add_turn_ends(tok) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	tok->n_prefix = tok->n_suffix = 0;
	allm_free(tok->prefix_ids);
	allm_free(tok->suffix_ids);
	tok->prefix_ids = allm_malloc(sizeof(int32_t));
	tok->suffix_ids = allm_malloc(sizeof(int32_t));
	if (!tok->prefix_ids || !tok->suffix_ids)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	if (add_bos && tok->bos_id >= 0)
		tok->prefix_ids[tok->n_prefix++] = tok->bos_id;
	if (add_eos && tok->eos_id >= 0)
		tok->suffix_ids[tok->n_suffix++] = tok->eos_id;
	return 0;
}

int allm_tokenizer_from_gguf(const struct allm_gguf *g, struct allm_tokenizer **ret,
			     struct allm_err *err)
{
	const char *model;
	size_t len;
	struct gguf_vocab v;
	bool add_space_prefix = true;
	json_t *root = NULL;
	struct allm_tokenizer *tok = NULL;
	int r = allm_gguf_get_str(g, "tokenizer.ggml.model", &model, &len, err);
	if (r == -ENOENT)
		return allm_err_set(err, -ENOENT, "%s: GGUF: the file has no tokenizer (tokenizer.ggml.model)", g->path);
	if (r)
		return r;
	bool spm = len == 5 && !memcmp(model, "llama", 5);
	if (!spm && !(len == 4 && !memcmp(model, "gpt2", 4)))
		return allm_err_set(err, -ENOTSUP, "%s: GGUF: tokenizer.ggml.model '%.*s' is not supported (gpt2, llama)",
				    g->path, (int)ALLM_MIN(len, 64), model);
	if ((r = allm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &add_space_prefix, err)) && r != -ENOENT)
		return r;
	if ((r = get_vocab(g, spm, &v, err)) || (r = build_root(g, spm, &v, add_space_prefix, &root, err)))
		return r;
	r = allm_tok_load_root(root, NULL, &tok, err);
	json_decref(root);
	if (r && err) { /* its messages name tokenizer.json's fields: say whose */
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "%s", err->msg);
		allm_err_set(err, r, "%s: GGUF tokenizer, as %s", g->path, msg);
	}
	if (!r && spm)
		r = spm_merges(tok, &v, err);
	if (!r)
		r = set_special(tok, g, spm, err);
	if (r) {
		allm_tokenizer_free(tok);
		return r;
	}
	*ret = tok;
	return 0;
}

int allm_tokenizer_load_gguf(const char *path, struct allm_tokenizer **ret,
			     struct allm_err *err)
{
	struct allm_gguf *g = NULL;
	int r = allm_gguf_open(path, &g, err);
	if (!r)
		r = allm_tokenizer_from_gguf(g, ret, err);
	allm_gguf_close(g);
	return r;
}
