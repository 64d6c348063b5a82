/* Helpers shared by the tokenizer tests (header only, one copy per test program). */
#ifndef ALLM_TEST_TOKENIZER_UTIL_H
#define ALLM_TEST_TOKENIZER_UTIL_H

#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                      \
			fprintf(stderr, "\n");                             \
			failures++;                                        \
		}                                                          \
	} while (0)

#define IDS(...) (int32_t[]){ __VA_ARGS__ }, sizeof((int32_t[]){ __VA_ARGS__ }) / sizeof(int32_t)

static inline void print_ids(const char *what, const int32_t *ids, size_t n)
{
	fprintf(stderr, "  %s:", what);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %d", ids[i]);
	fprintf(stderr, "\n");
}

static inline void expect_ids(struct allm_tokenizer *tok, const char *text, bool add_special,
			      const int32_t *want, size_t n_want)
{
	struct allm_err err = { { 0 } };
	int32_t *ids = NULL;
	size_t n = 0;
	int r = allm_tokenizer_encode(tok, text, strlen(text), add_special, &ids, &n, &err);
	CHECK(r == 0, "encode '%s': %s", text, err.msg);
	if (r)
		return;
	bool same = n == n_want && (n == 0 || !memcmp(ids, want, n * sizeof(*ids)));
	CHECK(same, "encode '%s' gives unexpected ids", text);
	if (!same) {
		print_ids("got ", ids, n);
		print_ids("want", want, n_want);
	}
	allm_free(ids);
}

static inline void expect_decode(struct allm_tokenizer *tok, const int32_t *ids, size_t n,
				 bool skip_special, const char *want)
{
	struct allm_err err = { { 0 } };
	char *text = NULL;
	int r = allm_tokenizer_decode(tok, ids, n, skip_special, &text, &err);
	CHECK(r == 0 && !strcmp(text, want), "decode: '%s', want '%s'", r ? err.msg : text, want);
	allm_free(text);
}

/* encode (with specials) then decode skipping them must give the text back. */
static inline void roundtrip(struct allm_tokenizer *tok, const char *text)
{
	struct allm_err err = { { 0 } };
	int32_t *ids = NULL;
	size_t n = 0;
	char *back = NULL;
	int r = allm_tokenizer_encode(tok, text, strlen(text), true, &ids, &n, &err);
	CHECK(r == 0, "encode '%s': %s", text, err.msg);
	if (r)
		return;
	r = allm_tokenizer_decode(tok, ids, n, true, &back, &err);
	CHECK(r == 0 && !strcmp(back, text), "round trip '%s' -> '%s'", text, r ? err.msg : back);
	allm_free(back);
	allm_free(ids);
}

/* Loads a model file kept under data/ (DATA_DIR); 1 (fail) when it cannot. */
static inline int load_shared(const char *rel, bool is_dir, struct allm_tokenizer **tok)
{
	const char *data = getenv("DATA_DIR");
	char path[4096];
	struct allm_err err = { { 0 } };
	snprintf(path, sizeof(path), "%s/%s", data ? data : "data", rel);
	int r = is_dir ? allm_tokenizer_load(path, tok, &err) : allm_tokenizer_load_file(path, tok, &err);
	if (r) {
		fprintf(stderr, "FAIL load %s: %s\n", path, err.msg);
		return 1;
	}
	return 0;
}

static inline int finish(void)
{
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures ? 1 : 0;
}

#endif
