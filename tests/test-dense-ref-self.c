/* Description: self-checks of the independent dense reference forward pass
 * (tests/dense-ref.c) on the real tiny Llama stories260K (GQA 8/4 heads, head_dim 8,
 * tied embeddings): greedy continuation of "Once upon a time" must be printable,
 * plausible English (a broken RoPE or GQA gives gibberish), logits must be causal
 * (position i unchanged when later tokens change), finite, and the greedy path must
 * agree with a single teacher-forced forward. Prints the greedy ids and text so they
 * can be compared with the engine. Exit 77 when the model is absent. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dense-ref.h"

#define N_NEW 40

static int failures;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                             \
			fprintf(stderr, "\n");                                    \
			failures++;                                               \
		}                                                                 \
	} while (0)

/* id -> piece from tokenizer.json's model.vocab; NULL entries for unknown ids. */
static char **load_vocab(const char *path, int vocab)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);
	if (!root)
		return NULL;
	json_t *v = json_object_get(json_object_get(root, "model"), "vocab");
	char **pieces = calloc((size_t)vocab, sizeof(char *));
	const char *key;
	json_t *val;
	if (pieces && json_is_object(v)) {
		json_object_foreach(v, key, val)
		{
			json_int_t id = json_integer_value(val);
			if (json_is_integer(val) && id >= 0 && id < vocab)
				pieces[id] = strdup(key);
		}
	}
	json_decref(root);
	return pieces;
}

/* Appends the decoded piece to out ('▁' -> ' ', "<0xXX>" -> byte). Returns false
 * when the piece is unknown, special, or decodes to a non-printable byte. */
static bool decode_piece(const char *piece, char *out, size_t outlen)
{
	if (!piece)
		return false;
	size_t len = strlen(out);
	unsigned int byte;
	if (strlen(piece) == 6 && sscanf(piece, "<0x%2X>", &byte) == 1) {
		if (len + 1 < outlen) {
			out[len] = (char)byte;
			out[len + 1] = 0;
		}
		return byte == '\n' || (byte >= 0x20 && byte < 0x7f);
	}
	if (piece[0] == '<' && piece[strlen(piece) - 1] == '>')
		return false; /* <unk>, <s>, </s> */
	bool ok = true;
	for (const char *p = piece; *p;) {
		if (strncmp(p, "\xe2\x96\x81", 3) == 0) { /* U+2581 '▁' */
			if (len + 1 < outlen)
				out[len++] = ' ';
			p += 3;
			continue;
		}
		unsigned char c = (unsigned char)*p++;
		if (c < 0x20 || c >= 0x7f)
			ok = false;
		if (len + 1 < outlen)
			out[len++] = (char)c;
	}
	out[len] = 0;
	return ok;
}

static int count_occurrences(const char *text, const char *word)
{
	int n = 0;
	for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
		n++;
	return n;
}

int main(void)
{
	const char *data = getenv("DATA_DIR");
	if (!data)
		data = "data";
	char dir[4096], tokpath[4200];
	snprintf(dir, sizeof(dir), "%s/models/stories260K", data);
	snprintf(tokpath, sizeof(tokpath), "%s/tokenizer.json", dir);
	char cfgpath[4200];
	snprintf(cfgpath, sizeof(cfgpath), "%s/config.json", dir);
	FILE *probe = fopen(cfgpath, "r");
	if (!probe) {
		printf("FAIL: %s is missing from the checkout\n", dir);
		return 1;
	}
	fclose(probe);

	char err[512] = "";
	struct dense_ref *m;
	if (dense_ref_load(dir, &m, err, sizeof(err))) {
		fprintf(stderr, "FAIL: load %s: %s\n", dir, err);
		return 1;
	}
	int V = dense_ref_vocab(m);
	CHECK(V == 512, "vocab %d", V);

	/* a missing directory must fail cleanly with a message */
	struct dense_ref *none;
	char err2[512] = "";
	CHECK(dense_ref_load("/nonexistent-dense-ref-dir", &none, err2, sizeof(err2)) == -1 &&
		      none == NULL && err2[0],
	      "loading a missing dir should fail with a message");

	/* (1) greedy continuation of "Once upon a time" */
	const int32_t prompt[] = { 1, 403, 407, 261, 378 };
	const int n_prompt = (int)(sizeof(prompt) / sizeof(prompt[0]));
	int32_t out[N_NEW];
	CHECK(dense_ref_greedy(m, prompt, n_prompt, N_NEW, out) == 0, "greedy failed");

	printf("greedy ids (first 20):");
	for (int i = 0; i < 20; i++)
		printf(" %d", out[i]);
	printf("\ngreedy ids (all %d):", N_NEW);
	for (int i = 0; i < N_NEW; i++)
		printf(" %d", out[i]);
	printf("\n");

	char **pieces = load_vocab(tokpath, V);
	CHECK(pieces != NULL, "cannot read %s", tokpath);
	if (pieces) {
		char text[4096] = "";
		decode_piece(pieces[prompt[1]], text, sizeof(text));
		for (int i = 2; i < n_prompt; i++)
			decode_piece(pieces[prompt[i]], text, sizeof(text));
		size_t prompt_len = strlen(text);
		int bad = 0;
		for (int i = 0; i < N_NEW; i++) {
			if (out[i] == 2 && i > 0)
				break; /* </s>: a finished story is fine */
			if (!decode_piece(pieces[out[i]], text, sizeof(text)))
				bad++;
		}
		printf("text: \"%s\"\n", text[0] == ' ' ? text + 1 : text);
		CHECK(bad == 0, "%d non-printable or special pieces in the continuation", bad);
		const char *cont = text + prompt_len;
		const char *common[] = { " the", " a ", " was", " she", " he", " to", ".", " and",
					 " her", " his", " they", " it" };
		int hits = 0;
		for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
			hits += count_occurrences(cont, common[i]);
		printf("common-word hits in continuation: %d\n", hits);
		CHECK(hits >= 3, "continuation does not look like English: %d common words", hits);
		for (int i = 0; i < V; i++)
			free(pieces[i]);
		free(pieces);
	}

	/* teacher-forced: one forward over prompt + greedy must reproduce the same argmaxes,
	 * and every logit is finite */
	int total = n_prompt + N_NEW;
	int32_t *seq = malloc(sizeof(int32_t) * (size_t)total);
	float *logits = malloc(sizeof(float) * (size_t)total * (size_t)V);
	float *logits2 = malloc(sizeof(float) * (size_t)total * (size_t)V);
	if (!seq || !logits || !logits2)
		return 1;
	memcpy(seq, prompt, sizeof(prompt));
	memcpy(seq + n_prompt, out, sizeof(out));
	CHECK(dense_ref_forward(m, seq, total, logits) == 0, "forward failed");
	int nonfinite = 0;
	for (size_t i = 0; i < (size_t)total * V; i++)
		if (!isfinite(logits[i]))
			nonfinite++;
	CHECK(nonfinite == 0, "%d non-finite logits", nonfinite);
	for (int t = n_prompt - 1; t < total - 1; t++) {
		const float *row = logits + (size_t)t * V;
		int best = 0;
		for (int i = 1; i < V; i++)
			if (row[i] > row[best])
				best = i;
		CHECK(best == seq[t + 1], "position %d: argmax %d, greedy chose %d", t, best,
		      seq[t + 1]);
	}

	/* (2) causality: change every token after position `cut`; logits at positions
	 * <= cut must be bit-identical, and later positions must actually change. */
	int cut = 7;
	int32_t *seq2 = malloc(sizeof(int32_t) * (size_t)total);
	if (!seq2)
		return 1;
	memcpy(seq2, seq, sizeof(int32_t) * (size_t)total);
	for (int t = cut + 1; t < total; t++)
		seq2[t] = (seq[t] * 7 + 13) % V == seq[t] ? (seq[t] + 1) % V : (seq[t] * 7 + 13) % V;
	CHECK(dense_ref_forward(m, seq2, total, logits2) == 0, "forward failed");
	CHECK(memcmp(logits, logits2, sizeof(float) * (size_t)(cut + 1) * V) == 0,
	      "logits at positions <= %d changed when later tokens changed", cut);
	double diff = 0;
	for (size_t i = (size_t)(cut + 1) * V; i < (size_t)total * V; i++)
		diff += fabs(logits[i] - logits2[i]);
	CHECK(diff > 1e-3, "logits after the cut did not change (%g)", diff);

	/* a prefix forward gives the same logits as the longer one on the shared prefix */
	CHECK(dense_ref_forward(m, seq, cut + 1, logits2) == 0, "forward failed");
	CHECK(memcmp(logits, logits2, sizeof(float) * (size_t)(cut + 1) * V) == 0,
	      "prefix forward differs from the long forward");

	/* bad input */
	int32_t bad_ids[2] = { 1, V };
	CHECK(dense_ref_forward(m, bad_ids, 2, logits2) == -1, "out-of-range id accepted");
	CHECK(dense_ref_forward(m, bad_ids, 0, logits2) == -1, "n = 0 accepted");

	free(seq);
	free(seq2);
	free(logits);
	free(logits2);
	dense_ref_free(m);
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("OK\n");
	return 0;
}
