/* Description: the grammar engine's costs on a model's vocabulary (a benchmark, not
 * a test): the vocabulary's trie (once per model), compiling a grammar and its
 * first mask (once per request; the cache makes later requests' compile free), and
 * the mask of each state along a text, computed (a miss) and from the cache (a hit).
 *
 *   bench-grammar MODEL.gguf|DIR KIND FILE [TEXT_FILE] [REPS]
 *     KIND: gbnf, json_schema, regex, choice, json_object */
#include "grammar.h"
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)len + 1);
	if (s && fread(s, 1, (size_t)len, f) != (size_t)len) {
		free(s);
		s = NULL;
	}
	fclose(f);
	if (s) {
		s[len] = 0;
		*n = (size_t)len;
	}
	return s;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: bench-grammar MODEL KIND FILE [TEXT_FILE] [REPS]\n");
		return 2;
	}
	struct allm_err err = { { 0 } };
	struct allm_tokenizer *tok;
	int r = strstr(argv[1], ".gguf") ? allm_tokenizer_load_gguf(argv[1], &tok, &err)
					  : allm_tokenizer_load(argv[1], &tok, &err);
	if (r) {
		fprintf(stderr, "bench-grammar: %s\n", err.msg);
		return 1;
	}
	uint32_t kind;
	if (allm_grammar_kind_parse(argv[2], &kind)) {
		fprintf(stderr, "bench-grammar: unknown kind %s\n", argv[2]);
		return 2;
	}
	size_t len = 0, tlen = 0;
	char *text = kind == ALLM_GRAMMAR_JSON_OBJECT ? strdup("") : slurp(argv[3], &len);
	char *sample = argc > 4 ? slurp(argv[4], &tlen) : NULL;
	int reps = argc > 5 ? atoi(argv[5]) : 20;
	if (!text) {
		fprintf(stderr, "bench-grammar: cannot read %s\n", argv[3]);
		return 1;
	}
	double t0 = allm_now();
	struct allm_grammar_vocab *v;
	if (allm_grammar_vocab_from_tokenizer(tok, &v))
		return 1;
	double vocab_ms = (allm_now() - t0) * 1e3;
	int32_t eos = allm_tokenizer_eos_id(tok);
	double *compile = calloc((size_t)reps, sizeof(double)), *first = calloc((size_t)reps, sizeof(double));
	for (int i = 0; i < reps; i++) {
		struct allm_grammar *g;
		struct allm_grammar_matcher *m;
		double a = allm_now();
		if (allm_grammar_compile((int)kind, text, len, v, &g, &err)) {
			fprintf(stderr, "bench-grammar: %s\n", err.msg);
			return 1;
		}
		double b = allm_now();
		allm_grammar_matcher_create(g, &eos, 1, &m);
		allm_grammar_matcher_mask(m);
		double c = allm_now();
		compile[i] = (b - a) * 1e3;
		first[i] = (c - a) * 1e3;
		allm_grammar_matcher_free(m);
		allm_grammar_unref(g);
	}
	qsort(compile, (size_t)reps, sizeof(double), cmp_d);
	qsort(first, (size_t)reps, sizeof(double), cmp_d);
	struct allm_grammar_stats st = { 0 };
	printf("vocabulary: %d ids, trie built in %.1f ms (once per model)\n", allm_grammar_vocab_size(v), vocab_ms);
	printf("compile: median %.3f ms, max %.3f ms | compile + first mask: median %.3f ms, max %.3f ms (%d runs)\n",
	       compile[reps / 2], compile[reps - 1], first[reps / 2], first[reps - 1], reps);
	if (sample) {
		/* the states along the text: each mask computed once (a fresh grammar),
		 * then again from the cache */
		int32_t *ids;
		size_t n;
		if (allm_tokenizer_encode(tok, sample, tlen, false, &ids, &n, &err)) {
			fprintf(stderr, "bench-grammar: %s\n", err.msg);
			return 1;
		}
		struct allm_grammar *g;
		allm_grammar_compile((int)kind, text, len, v, &g, &err);
		double miss = 0, miss_max = 0, hit = 0;
		for (int pass = 0; pass < 2; pass++) {
			struct allm_grammar_matcher *m;
			allm_grammar_matcher_create(g, &eos, 1, &m);
			for (size_t i = 0; i < n; i++) {
				double a = allm_now();
				allm_grammar_matcher_mask(m);
				double d = (allm_now() - a) * 1e3;
				if (!pass) {
					miss += d;
					miss_max = d > miss_max ? d : miss_max;
				} else {
					hit += d;
				}
				if (!allm_grammar_matcher_accept(m, ids[i])) {
					fprintf(stderr, "bench-grammar: the text leaves the grammar at token %zu\n", i);
					return 1;
				}
			}
			allm_grammar_matcher_free(m);
		}
		allm_grammar_stats(g, &st);
		printf("masks along the text (%zu tokens, %llu distinct states): first pass (new states computed) "
		       "mean %.3f ms, max %.3f ms; second pass (all from the cache) mean %.4f ms\n", n,
		       (unsigned long long)st.n_masks, miss / (double)n, miss_max, hit / (double)n);
		allm_grammar_unref(g);
		allm_free(ids);
	}
	free(compile);
	free(first);
	free(text);
	free(sample);
	allm_grammar_vocab_free(v);
	allm_tokenizer_free(tok);
	return 0;
}
