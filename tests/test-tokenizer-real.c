/* Description: a real model's tokenizer, read from its GGUF file, against llama.cpp's on the same file (tests/data/MODEL/tokenizer-reference.json, written by tests/data/make-tokenizer-reference.py with llama-cpp-python): the vocabulary size, BOS / EOS / end-of-turn ids and whether BOS is added; for each of 170 strings (scripts, emoji, whitespace runs, digits, code, the model's own control tokens inside text) the same ids with special tokens parsed (a template's text) and without (message content: allm_tokenizer_encode_flags without ALLM_TOK_ENCODE_PARSE_SPECIAL), and the ids decoding back to the text; every id we stop at is one llama.cpp stops at. Usage: test-tokenizer-real FILE.gguf REFERENCE.json (tests/real-model-tokenizer.sh runs it). */
#include "tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int n_fail;
#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			n_fail++;                                           \
		}                                                           \
	} while (0)

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
	fprintf(stderr, "    %-9s", what);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %d", ids[i]);
	fputc('\n', stderr);
}

/* ids of text under flags against the JSON array want; prints the first few misses */
static bool same_ids(struct allm_tokenizer *tok, const char *text, size_t len, unsigned flags, json_t *want,
		     const char *what, int *shown)
{
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0;
	if (allm_tokenizer_encode_flags(tok, text, len, flags, &ids, &n, &err)) {
		fprintf(stderr, "  encode '%s': %s\n", text, err.msg);
		return false;
	}
	bool same = n == json_array_size(want);
	for (size_t i = 0; same && i < n; i++)
		same = ids[i] == json_integer_value(json_array_get(want, i));
	if (!same && (*shown)++ < 8) {
		int32_t *w = malloc((json_array_size(want) + 1) * sizeof(*w));
		for (size_t i = 0; i < json_array_size(want); i++)
			w[i] = (int32_t)json_integer_value(json_array_get(want, i));
		fprintf(stderr, "  %s: '%.80s'\n", what, text);
		print_ids("ours", ids, n);
		print_ids("llama.cpp", w, json_array_size(want));
		free(w);
	}
	/* the ids decode back to the text (no normalization changes a character) */
	char *back = NULL;
	if (same && !(flags & ALLM_TOK_ENCODE_ADD_SPECIAL)) {
		if (!allm_tokenizer_decode(tok, ids, n, false, &back, &err) && strcmp(back, text) && (*shown)++ < 8)
			fprintf(stderr, "  %s: '%.80s' decodes to '%.80s'\n", what, text, back);
		same = back && !strcmp(back, text);
	}
	allm_free(back);
	allm_free(ids);
	return same;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test-tokenizer-real FILE.gguf REFERENCE.json\n");
		return 2;
	}
	json_error_t jerr;
	json_t *ref = json_load_file(argv[2], 0, &jerr);
	if (!ref) {
		fprintf(stderr, "FAIL: %s: line %d: %s\n", argv[2], jerr.line, jerr.text);
		return 1;
	}
	const char *base = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
	const char *want_name = json_string_value(json_object_get(json_object_get(ref, "file"), "name"));
	if (!want_name || strcmp(base, want_name)) {
		fprintf(stderr, "FAIL: %s is the reference of %s, not of %s\n", argv[2], want_name ? want_name : "?", base);
		return 1;
	}
	struct allm_err err = {{0}};
	struct allm_tokenizer *tok = NULL;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = allm_tokenizer_load_gguf(argv[1], &tok, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r) {
		fprintf(stderr, "FAIL: load %s: %s\n", argv[1], err.msg);
		json_decref(ref);
		return 1;
	}
	printf("%s: tokenizer loaded in %.0f ms\n", base, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);

	json_t *v = json_object_get(ref, "vocab");
	int32_t n_vocab = (int32_t)json_integer_value(json_object_get(v, "n_vocab"));
	int32_t bos = (int32_t)json_integer_value(json_object_get(v, "bos"));
	int32_t eos = (int32_t)json_integer_value(json_object_get(v, "eos"));
	int32_t eot = (int32_t)json_integer_value(json_object_get(v, "eot"));
	CHECK(allm_tokenizer_vocab_size(tok) == n_vocab, "vocab size %d, llama.cpp %d", allm_tokenizer_vocab_size(tok),
	      n_vocab);
	CHECK(allm_tokenizer_bos_id(tok) == bos, "BOS %d, llama.cpp %d", allm_tokenizer_bos_id(tok), bos);
	CHECK(allm_tokenizer_eos_id(tok) == eos, "EOS %d, llama.cpp %d", allm_tokenizer_eos_id(tok), eos);
	CHECK(allm_tokenizer_is_eos(tok, eos) && (eot < 0 || allm_tokenizer_is_eos(tok, eot)),
	      "EOS %d and end of turn %d stop generation", eos, eot);
	/* every id we stop at is one llama.cpp stops at (it stops at more: "</s>" as
	 * plain text, FIM separators) */
	json_t *eog = json_object_get(v, "eog");
	for (int32_t id = 0; id < allm_tokenizer_vocab_size(tok); id++) {
		if (!allm_tokenizer_is_eos(tok, id))
			continue;
		bool in = false;
		for (size_t i = 0; i < json_array_size(eog); i++)
			in |= json_integer_value(json_array_get(eog, i)) == id;
		CHECK(in, "we stop at %d ('%s'), llama.cpp does not", id, allm_tokenizer_id_to_token(tok, id));
	}

	size_t i, n_special = 0, n_plain = 0, n_cases = json_array_size(json_object_get(ref, "cases"));
	int shown = 0;
	json_t *c;
	json_array_foreach(json_object_get(ref, "cases"), i, c) {
		json_t *t = json_object_get(c, "text");
		const char *text = json_string_value(t);
		size_t len = json_string_length(t);
		n_special += same_ids(tok, text, len, ALLM_TOK_ENCODE_PARSE_SPECIAL, json_object_get(c, "special"),
				      "special parsed", &shown);
		n_plain += same_ids(tok, text, len, 0, json_object_get(c, "plain"), "as text", &shown);
	}
	printf("%s: %zu/%zu strings give llama.cpp's ids with special tokens parsed, %zu/%zu without\n", base,
	       n_special, n_cases, n_plain, n_cases);
	CHECK(n_cases >= 100 && n_special == n_cases && n_plain == n_cases, "%zu + %zu of %zu strings differ",
	      n_cases - n_special, n_cases - n_plain, n_cases);
	json_array_foreach(json_object_get(ref, "bos"), i, c) {
		json_t *t = json_object_get(c, "text");
		CHECK(same_ids(tok, json_string_value(t), json_string_length(t),
			       ALLM_TOK_ENCODE_PARSE_SPECIAL | ALLM_TOK_ENCODE_ADD_SPECIAL, json_object_get(c, "ids"),
			       "with BOS", &shown),
		      "'%s' with add_special: not llama.cpp's ids (add_bos %s)", json_string_value(t),
		      json_is_true(json_object_get(v, "add_bos")) ? "true" : "false");
	}
	allm_tokenizer_free(tok);
	json_decref(ref);
	if (n_fail)
		return 1;
	printf("test-tokenizer-real: %s: all checks passed\n", base);
	return 0;
}
