/* Description: tokenizers from GGUF metadata (engined/tokenizer/tokenizer-gguf.c) against the tokenizer.json they were written from (tests/gguf-write.c, llama.cpp's layout): the SentencePiece-style stories260K as tokenizer.ggml.model "llama" with scores (merges rebuilt from the scores), GPT-2 as "gpt2" with merges, the Llama-3 split (pre "llama3") and SmolLM2's pre-tokenizer ("smollm": digits one by one, then GPT-2's split) against the same tokenizer.json with its Digits stage, encode the same ids and decode the same text on many strings (accents, CJK, emoji, whitespace runs, digits, code, special tokens); and each malformed or unsupported tokenizer.ggml.* fails with one message naming the key. */
#include "gguf-write.h"
#include "tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n_fail;
#define CHECK(cond, ...)                                                            \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);         \
			fprintf(stderr, __VA_ARGS__);                               \
			fputc('\n', stderr);                                        \
			n_fail++;                                                   \
		}                                                                   \
	} while (0)

static const char *const texts[] = {
	"Once upon a time, there was a little girl named Lily.",
	"Hello world",
	" leading space",
	"trailing space ",
	"two  spaces and   three",
	"tabs\tand\nnewlines\n\nand\r\nCRLF",
	"     ",
	"",
	"a",
	"12345 and 3.14159, 2024-01-02, 1,000,000",
	"version 10.0.19045 build 42",
	"café naïve résumé Ünïcödé",
	"Ελληνικά και русский текст",
	"日本語のテキストと中文",
	"한국어 텍스트",
	"emoji 🎉🚀 and 👩‍👩‍👧 family",
	"def f(x):\n    return x ** 2  # square\n",
	"for (int i = 0; i < n; i++) { a[i] = b[i]; }",
	"<html><body class=\"x\">hi</body></html>",
	"I'm can't won't they're we've you'll he'd",
	"ALL CAPS AND MiXeD cAsE",
	"$100 @user #tag 50% a+b=c",
	"¿Qué? ¡Sí! «guillemets» — dash … ellipsis",
	"\u00a0non-breaking\u2009thin\u3000ideographic",
	"x\n\n\n\ny",
	"   indented\n\t\ttabbed",
	"Ⅻ ½ ² ٣ ४",
	"<s> literal </s> markers",
	"end.",
};

static void compare(const char *what, struct allm_tokenizer *a, struct allm_tokenizer *b)
{
	struct allm_err err = {{0}};
	int bad = 0;
	CHECK(allm_tokenizer_vocab_size(a) == allm_tokenizer_vocab_size(b), "%s: vocab %d vs %d", what,
	      allm_tokenizer_vocab_size(a), allm_tokenizer_vocab_size(b));
	CHECK(allm_tokenizer_bos_id(a) == allm_tokenizer_bos_id(b) && allm_tokenizer_eos_id(a) == allm_tokenizer_eos_id(b),
	      "%s: bos %d/%d eos %d/%d", what, allm_tokenizer_bos_id(a), allm_tokenizer_bos_id(b),
	      allm_tokenizer_eos_id(a), allm_tokenizer_eos_id(b));
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		for (int special = 0; special < 2; special++) {
			int32_t *ia = NULL, *ib = NULL;
			size_t na = 0, nb = 0;
			int ra = allm_tokenizer_encode(a, texts[i], strlen(texts[i]), special, &ia, &na, &err);
			int rb = allm_tokenizer_encode(b, texts[i], strlen(texts[i]), special, &ib, &nb, &err);
			bool same = !ra && !rb && na == nb && (!na || !memcmp(ia, ib, na * sizeof(*ia)));
			if (!same && bad++ < 4) {
				fprintf(stderr, "%s: '%s' (special %d):", what, texts[i], special);
				for (size_t k = 0; k < na; k++)
					fprintf(stderr, " %d", ia[k]);
				fprintf(stderr, " | gguf:");
				for (size_t k = 0; k < nb; k++)
					fprintf(stderr, " %d", ib[k]);
				fprintf(stderr, "\n");
			}
			char *ta = NULL, *tb = NULL;
			if (!ra && !allm_tokenizer_decode(a, ia, na, false, &ta, &err) &&
			    !allm_tokenizer_decode(b, ia, na, false, &tb, &err) && strcmp(ta, tb) && bad++ < 4)
				fprintf(stderr, "%s: decode '%s' vs gguf '%s'\n", what, ta, tb);
			allm_free(ta);
			allm_free(tb);
			allm_free(ia);
			allm_free(ib);
		}
	}
	CHECK(bad == 0, "%s: %d of %zu encodings/decodings differ", what, bad, 2 * sizeof(texts) / sizeof(texts[0]));
}

static char tmp[] = "/tmp/test-tokenizer-gguf-XXXXXX";

/* tokenizer.json at path as a GGUF file (tokenizer keys only), loaded. */
static struct allm_tokenizer *from_json(const char *json, const char *config, int32_t bos, int32_t eos,
					const char *pre)
{
	char err[512], path[600];
	struct allm_err e = {{0}};
	struct allm_tokenizer *tok = NULL;
	struct gguf_w *w = gguf_w_new();
	snprintf(path, sizeof(path), "%s/tok.gguf", tmp);
	CHECK(!gguf_w_tokenizer(w, json, config, 0, bos, eos, pre, err, sizeof(err)), "write: %s", err);
	CHECK(!gguf_w_save(w, path), "save %s", path);
	gguf_w_free(w);
	CHECK(!allm_tokenizer_load_gguf(path, &tok, &e), "load %s (from %s): %s", path, json, e.msg);
	return tok;
}

static struct allm_tokenizer *load_json(const char *path, bool dir)
{
	struct allm_err e = {{0}};
	struct allm_tokenizer *tok = NULL;
	int r = dir ? allm_tokenizer_load(path, &tok, &e) : allm_tokenizer_load_file(path, &tok, &e);
	CHECK(!r, "load %s: %s", path, e.msg);
	return tok;
}

static int32_t id_of(struct allm_tokenizer *t, const char *s)
{
	return allm_tokenizer_token_to_id(t, s);
}

/* GPT-2's tokenizer.json with SmolLM2's pre-tokenizer: Digits (one by one), then
 * ByteLevel without a prefix space. */
static void smollm_pre(const char *gpt2_json)
{
	char path[600];
	json_t *root = json_load_file(gpt2_json, 0, NULL);
	json_t *seq = json_array(), *dg = json_object(), *bl = json_object();
	json_object_set_new(dg, "type", json_string("Digits"));
	json_object_set_new(dg, "individual_digits", json_true());
	json_object_set_new(bl, "type", json_string("ByteLevel"));
	json_object_set_new(bl, "add_prefix_space", json_false());
	json_object_set_new(bl, "use_regex", json_true());
	json_array_append_new(seq, dg);
	json_array_append_new(seq, bl);
	json_t *pt = json_object();
	json_object_set_new(pt, "type", json_string("Sequence"));
	json_object_set_new(pt, "pretokenizers", seq);
	json_object_set_new(root, "pre_tokenizer", pt);
	snprintf(path, sizeof(path), "%s/smollm-pre.json", tmp);
	CHECK(!json_dump_file(root, path, 0), "write %s", path);
	json_decref(root);
	struct allm_tokenizer *a = load_json(path, false), *b = from_json(gpt2_json, NULL, -1, 50256, "smollm");
	if (a && b) {
		compare("gpt2 + smollm pre", a, b);
		/* the Digits stage itself: " 123" is a space, then 1, 2, 3, each alone */
		int32_t *ids = NULL;
		size_t n = 0;
		struct allm_err e = {{0}};
		CHECK(!allm_tokenizer_encode(b, "x 123", 5, false, &ids, &n, &e) && n == 5 && ids[1] == id_of(b, "\xc4\xa0") &&
		      ids[2] == id_of(b, "1") && ids[3] == id_of(b, "2") && ids[4] == id_of(b, "3"),
		      "digits one by one: %zu ids", n);
		allm_free(ids);
	}
	allm_tokenizer_free(a);
	allm_tokenizer_free(b);
}

/* A GGUF whose tokenizer keys are given by hand, broken one way each. */
enum tbreak { T_MODEL, T_PRE, T_TYPES_LEN, T_DUP, T_MERGE, T_NO_SCORES, T_NO_TOKENS, T_BAD_UTF8, T_TYPE7 };

static void tok_error(enum tbreak b, int want_r, const char *want)
{
	char path[600];
	struct allm_err e = {{0}};
	struct allm_tokenizer *tok = NULL;
	struct gguf_w *w = gguf_w_new();
	const char *toks[] = {"a", "b", "ab", b == T_DUP ? "a" : "<s>", b == T_BAD_UTF8 ? "\xff" : "c"};
	int32_t types[] = {1, 1, 1, b == T_TYPE7 ? 7 : 3, 1};
	const char *merges[] = {b == T_MERGE ? "a z" : "a b"};
	gguf_w_str(w, "tokenizer.ggml.model", b == T_MODEL ? "bert" : b == T_NO_SCORES ? "llama" : "gpt2");
	if (b == T_PRE)
		gguf_w_str(w, "tokenizer.ggml.pre", "mystery");
	if (b != T_NO_TOKENS)
		gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
	gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, b == T_TYPES_LEN ? 4 : 5);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1);
	snprintf(path, sizeof(path), "%s/bad.gguf", tmp);
	CHECK(!gguf_w_save(w, path), "save");
	gguf_w_free(w);
	int r = allm_tokenizer_load_gguf(path, &tok, &e);
	CHECK(r == want_r && !tok && strstr(e.msg, want) && strstr(e.msg, path), "case %d: got %d '%s', want %d '%s'",
	      b, r, e.msg, want_r, want);
	allm_tokenizer_free(tok);
}

/* A SentencePiece vocabulary of "a" repeated 1, 2, 4 ... 1024 times, plus one token of
 * extra_len bytes when extra_len > 0; loaded from a GGUF file. */
static int load_runs(size_t extra_len, struct allm_tokenizer **tok, struct allm_err *e)
{
	enum { N = 3 + 11 + 1 };
	static char runs[11][1025];
	const char *toks[N] = {"<unk>", "<s>", "</s>"};
	int32_t types[N] = {2, 3, 3};
	float scores[N] = {0, 0, 0};
	size_t n = 3;
	char path[600], *extra = NULL;
	for (int k = 0; k <= 10; k++, n++) {
		memset(runs[k], 'a', (size_t)1 << k);
		runs[k][(size_t)1 << k] = 0;
		toks[n] = runs[k];
		types[n] = 1;
		scores[n] = (float)k; /* longer runs merge first: any order gives the same */
	}
	if (extra_len) {
		extra = malloc(extra_len + 1);
		memset(extra, 'b', extra_len);
		extra[extra_len] = 0;
		toks[n] = extra;
		types[n] = 1;
		scores[n++] = -1;
	}
	struct gguf_w *w = gguf_w_new();
	gguf_w_str(w, "tokenizer.ggml.model", "llama");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, n);
	gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, n);
	gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, n);
	gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", false);
	gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false);
	snprintf(path, sizeof(path), "%s/runs.gguf", tmp);
	CHECK(!gguf_w_save(w, path), "save");
	gguf_w_free(w);
	free(extra);
	return allm_tokenizer_load_gguf(path, tok, e);
}

/* Issue 49 item 5: a 1 MiB token held the SentencePiece merge pass for minutes (every
 * split hashed both halves again). Tokens past ALLM_TOK_MAX_TOKEN_BYTES (1024) are
 * refused; up to it the merges are found, here through every length of a run. */
static void long_tokens(void)
{
	struct allm_err e = {{0}};
	struct allm_tokenizer *tok = NULL;
	char text[1024];
	int r = load_runs(0, &tok, &e);
	CHECK(!r && tok, "runs of a: %s", e.msg);
	for (size_t len = 1; tok && len <= sizeof(text); len = len * 3 + 1) {
		int32_t *ids = NULL;
		size_t n = 0, want = 0, cover = 0;
		memset(text, 'a', len);
		CHECK(!allm_tokenizer_encode(tok, text, len, false, &ids, &n, &e), "encode %zu: %s", len, e.msg);
		/* leftmost merges first: the binary digits of len, longest run first */
		for (int k = 10; k >= 0; k--)
			if (len & ((size_t)1 << k)) {
				CHECK(want < n && (size_t)allm_tokenizer_token_to_id(tok, "a") + (size_t)k == (size_t)ids[want],
				      "a x %zu: id %zu is %d, want the run of %d", len, want, want < n ? ids[want] : -1, 1 << k);
				want++;
				cover += (size_t)1 << k;
			}
		CHECK(n == want && cover == len, "a x %zu: %zu ids, want %zu", len, n, want);
		allm_free(ids);
	}
	int32_t *ids = NULL;
	size_t n = 0;
	memset(text, 'a', 1024);
	CHECK(tok && !allm_tokenizer_encode(tok, text, 1024, false, &ids, &n, &e) && n == 1, "a x 1024: %zu ids", n);
	allm_free(ids);
	allm_tokenizer_free(tok);
	tok = NULL;
	CHECK(!load_runs(1024, &tok, &e) && tok, "a token of 1024 bytes: %s", e.msg);
	allm_tokenizer_free(tok);
	tok = NULL;
	static const size_t too_long[] = {1025, 1 << 20};
	for (size_t i = 0; i < 2; i++) {
		char want[64];
		r = load_runs(too_long[i], &tok, &e);
		snprintf(want, sizeof(want), "tokenizer.ggml.tokens[14] is %zu bytes long (at most 1024", too_long[i]);
		CHECK(r == -EINVAL && !tok && strstr(e.msg, want), "%zu bytes: got %d '%s'", too_long[i], r, e.msg);
		allm_tokenizer_free(tok);
		tok = NULL;
	}
}

int main(void)
{
	const char *data = getenv("DATA_DIR");
	char p1[600], p2[600], p3[600];
	if (!data || !mkdtemp(tmp)) {
		fprintf(stderr, "setup: DATA_DIR unset or no tmp dir\n");
		return 1;
	}
	/* SentencePiece-style BPE with byte fallback and BOS: "llama" with scores */
	snprintf(p1, sizeof(p1), "%s/models/stories260K/tokenizer.json", data);
	snprintf(p2, sizeof(p2), "%s/models/stories260K/tokenizer_config.json", data);
	snprintf(p3, sizeof(p3), "%s/models/stories260K", data);
	struct allm_tokenizer *a = load_json(p3, true), *b = from_json(p1, p2, 1, 2, NULL);
	if (a && b)
		compare("stories260K (llama)", a, b);
	allm_tokenizer_free(a);
	allm_tokenizer_free(b);

	/* byte-level BPE: "gpt2" with merges, GPT-2's split */
	snprintf(p1, sizeof(p1), "%s/models/gpt2-tokenizer/tokenizer.json", data);
	a = load_json(p1, false);
	b = from_json(p1, NULL, -1, 50256, "gpt2");
	if (a && b)
		compare("gpt2", a, b);
	allm_tokenizer_free(a);
	allm_tokenizer_free(b);
	smollm_pre(p1);

	/* the Llama-3 split (tests/data/tokenizer/tiny-llama3.json) */
	snprintf(p1, sizeof(p1), "%s/../tests/data/tokenizer/tiny-llama3.json", data);
	a = load_json(p1, false);
	b = from_json(p1, NULL, -1, -1, "llama3");
	if (a && b)
		compare("llama3 split", a, b);
	allm_tokenizer_free(a);
	allm_tokenizer_free(b);

	long_tokens();
	tok_error(T_MODEL, -ENOTSUP, "tokenizer.ggml.model 'bert' is not supported");
	tok_error(T_PRE, -ENOTSUP, "tokenizer.ggml.pre 'mystery' is not supported");
	tok_error(T_TYPES_LEN, -EINVAL, "tokenizer.ggml.token_type is not 5 integers");
	tok_error(T_DUP, -EINVAL, "tokenizer.ggml.tokens[3] 'a' appears twice");
	tok_error(T_MERGE, -EINVAL, "GGUF: tokenizer.ggml.merges[0]: 'z' is not in the vocabulary");
	tok_error(T_NO_SCORES, -EINVAL, "tokenizer.ggml.scores is missing");
	tok_error(T_NO_TOKENS, -EINVAL, "tokenizer.ggml.tokens is missing");
	tok_error(T_BAD_UTF8, -EINVAL, "tokenizer.ggml.tokens[4] is not valid UTF-8");
	tok_error(T_TYPE7, -EINVAL, "tokenizer.ggml.token_type[3] is 7");

	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", tmp);
	if (n_fail)
		return 1;
	printf("test-tokenizer-gguf: all checks passed\n");
	return 0;
}
