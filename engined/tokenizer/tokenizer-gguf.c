/* A GGUF file's tokenizer (tokenizer.ggml.*), built directly (tokenizer-vocab.c),
 * as the Hugging Face tokenizer.json it stands for would be, so that one encoder
 * serves both loaders (see tokenizer.h):
 *
 *   gpt2   byte-level BPE: vocabulary from the tokens, merges as given, the
 *          pre-tokenizer tokenizer.ggml.pre names (the table below: the same split
 *          patterns llama.cpp runs for those names), ByteLevel decoding.
 *   llama  SentencePiece BPE with byte fallback: "▁" prepended when
 *          add_space_prefix (Gemma 3 says false) and spaces replaced by "▁", decoded
 *          back, the prepended one stripped -- Llama-2's tokenizer.json. SentencePiece
 *          merges the pair whose merged piece scores highest; the merges are rebuilt
 *          from the scores with that rank (tokenizer-spm.c).
 *
 * Token types (llama.cpp's): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
 * 6 byte. Unknown and control tokens become special added tokens (matched in the text
 * before anything else when special tokens are parsed, dropped by skip_special),
 * user-defined ones plain added tokens (always matched, as llama.cpp does), the rest
 * the model's vocabulary. */
#include "tokenizer-internal.h"

#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

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

struct gguf_vocab {
	const struct allm_gguf_kv *tokens, *types, *scores, *merges;
	uint64_t n;
};

/* Phi-3's special tokens eat the whitespace that follows them (its tokenizer.json
 * says rstrip for each; the GGUF file cannot): llama.cpp restores that from the
 * model's name, general.name containing "phi-3" or "phi3" in any case, for every
 * special token but <unk>, <s> and <|endoftext|>. We key on the same name, or a
 * Phi-3 chat prompt would tokenize differently from llama.cpp's. */
static bool named_phi3(const struct allm_gguf *g)
{
	const char *name;
	size_t n;
	struct allm_err ignore = {{0}};
	if (allm_gguf_get_str(g, "general.name", &name, &n, &ignore))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((n - i >= 5 && !strncasecmp(name + i, "phi-3", 5)) || (n - i >= 4 && !strncasecmp(name + i, "phi3", 4)))
			return true;
	return false;
}

static bool phi3_keeps_space(const char *s, size_t len)
{
	static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(keep); k++)
		if (len == strlen(keep[k]) && !memcmp(s, keep[k], len))
			return true;
	return false;
}

/* The id tables from the token list: every token checked, then one definition each. */
static int build_vocab(struct allm_tokenizer *tok, const struct allm_gguf *g, const struct gguf_vocab *v,
		       struct allm_err *err)
{
	struct allm_tok_def *defs = allm_malloc(v->n * sizeof(*defs));
	char where[512];
	bool phi3 = named_phi3(g);
	int r = 0;
	if (!defs)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	for (uint64_t i = 0; i < v->n; i++) {
		uint64_t len;
		const char *s = allm_gguf_arr_str(v->tokens, i, &len);
		int64_t type = v->types ? allm_gguf_arr_int(v->types, i) : TT_NORMAL;
		if (type < TT_NORMAL || type > TT_BYTE) {
			r = allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.token_type[%llu] is %lld (1 to 6)",
					 g->path, (unsigned long long)i, (long long)type);
			goto out;
		}
		if (len > ALLM_TOK_MAX_TOKEN_BYTES) {
			r = allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.tokens[%llu] is %llu bytes long "
					 "(at most %d: no real vocabulary comes near)", g->path, (unsigned long long)i,
					 (unsigned long long)len, ALLM_TOK_MAX_TOKEN_BYTES);
			goto out;
		}
		if (len == 0 || memchr(s, 0, len) || allm_tok_utf8_valid_prefix((const uint8_t *)s, len) != len) {
			r = allm_err_set(err, -EINVAL, "%s: GGUF: tokenizer.ggml.tokens[%llu] is %s", g->path,
					 (unsigned long long)i, len == 0 ? "empty" : "not valid UTF-8 without NUL bytes");
			goto out;
		}
		defs[i] = (struct allm_tok_def){.s = s, .len = (uint32_t)len, .id = (int32_t)i,
						.added = type == TT_UNKNOWN || type == TT_CONTROL || type == TT_USER,
						.special = type != TT_USER};
		defs[i].rstrip = phi3 && defs[i].added && !phi3_keeps_space(s, len);
	}
	snprintf(where, sizeof(where), "%s: GGUF: tokenizer.ggml.tokens", g->path);
	r = allm_tok_set_vocab(tok, (int32_t)v->n, defs, v->n, true, where, where, err);
out:
	allm_free(defs);
	return r;
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

/* gpt2: the merges as given, the pre-tokenizer the file names, ByteLevel decoding. */
static int build_bytelevel(struct allm_tokenizer *tok, const struct allm_gguf *g, const struct gguf_vocab *v,
			   struct allm_err *err)
{
	struct allm_tok_merge_buf buf = {0};
	char where[512];
	enum pre_kind pk;
	int r = pre_kind(g, &pk, err);
	if (r)
		return r;
	tok->byte_level = true; /* ByteLevel, add_prefix_space false */
	tok->digits = pk == PRE_DIGITS_GPT2 ? ALLM_TOK_DIGITS_INDIVIDUAL : ALLM_TOK_DIGITS_NONE;
	tok->split = pk == PRE_LLAMA3 ? ALLM_TOK_SPLIT_LLAMA3 : pk == PRE_QWEN2 ? ALLM_TOK_SPLIT_QWEN2 : ALLM_TOK_SPLIT_GPT2;
	tok->n_merges = v->merges->v.arr.n;
	if (allm_tok_pairmap_init(&tok->merges, tok->n_merges) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	snprintf(where, sizeof(where), "%s: GGUF: tokenizer.ggml.merges", g->path);
	for (uint64_t i = 0; i < v->merges->v.arr.n && !r; i++) {
		uint64_t len;
		const char *s = allm_gguf_arr_str(v->merges, i, &len);
		r = allm_tok_add_merge_text(tok, (size_t)i, s, (size_t)len, &buf, where, err);
	}
	allm_free(buf.p);
	if (r)
		return r;
	return allm_tok_build_decoder(tok, &(struct allm_tok_dec_spec){.byte_level = true, .fused = true}, err);
}

/* llama: Llama-2's normalizer and decoder around merges rebuilt from the scores. */
static int build_spm(struct allm_tokenizer *tok, const struct allm_gguf *g, const struct gguf_vocab *v,
		     bool add_space_prefix, struct allm_err *err)
{
	static const char space[] = "\xe2\x96\x81"; /* U+2581 */
	int64_t unk = -1;
	int r = allm_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", 0, (int64_t)v->n - 1, &unk, err);
	if (r && r != -ENOENT)
		return r;
	tok->unk_id = (int32_t)unk;
	tok->byte_fallback = tok->fuse_unk = true;
	if ((add_space_prefix && allm_tok_add_norm(tok, ALLM_TOK_NORM_PREPEND, space, NULL) < 0) ||
	    allm_tok_add_norm(tok, ALLM_TOK_NORM_REPLACE, " ", space) < 0)
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
	tok->strip_start = add_space_prefix ? 1 : 0; /* the prepended space, after Fuse */
	struct allm_tok_dec_spec spec = {.byte_fallback = true, .fused = true, .n_repl = 1, .pat = {space}, .rep = {" "}};
	if ((r = allm_tok_build_decoder(tok, &spec, err)))
		return r;
	return spm_merges(tok, v, err);
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
	if ((r = get_vocab(g, spm, &v, err)) || (r = allm_tok_new(&tok, err)))
		return r;
	if (!(r = build_vocab(tok, g, &v, err))) {
		allm_tok_index_bytes(tok);
		r = spm ? build_spm(tok, g, &v, add_space_prefix, err) : build_bytelevel(tok, g, &v, err);
	}
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
