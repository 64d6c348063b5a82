/* Tokenizer throughput: encodes a generated multi-MB text with the GPT-2 and
 * stories260K tokenizers and prints MB/s, and prints load times of the GPT-2
 * tokenizer.json and of a synthetic 128k-vocab / 280k-merges file written to /tmp.
 * Not a test: `build/tests/bench-tokenizer [data_dir]` (default: data). */
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t next_rand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

/* English-like text with punctuation, numbers, newlines and some non-ASCII. */
static char *make_text(size_t target, size_t *ret_len)
{
	static const char *const words[] = {
		"the", "a", "little", "girl", "named", "Lily", "was", "happy", "to", "play",
		"with", "her", "friend", "in", "park", "One", "day", "she", "saw", "big",
		"dog", "and", "they", "went", "together", "because", "it's", "wonderful",
		"tokenization", "performance", "matters", "when", "serving", "models",
		"café", "naïve", "中文", "日本語", "😀", "Москва", "Ελλάδα", "2024", "3.14",
	};
	char *text = malloc(target + 64);
	size_t n = 0;
	while (n < target) {
		const char *w = words[next_rand() % (sizeof(words) / sizeof(words[0]))];
		uint32_t r = next_rand() % 100;
		n += (size_t)sprintf(text + n, "%s%s", w, r < 6 ? ". " : r < 10 ? ", " : r < 11 ? "\n\n" : " ");
	}
	text[n] = 0;
	*ret_len = n;
	return text;
}

static void bench_encode(const char *name, struct allm_tokenizer *tok, const char *text, size_t len)
{
	struct allm_err err = { { 0 } };
	int32_t *ids = NULL;
	size_t n = 0;
	double t0 = allm_now();
	int r = allm_tokenizer_encode(tok, text, len, false, &ids, &n, &err);
	double dt = allm_now() - t0;
	if (r) {
		printf("%s: encode failed: %s\n", name, err.msg);
		return;
	}
	char *back = NULL;
	double t1 = allm_now();
	r = allm_tokenizer_decode(tok, ids, n, false, &back, &err);
	double dt_dec = allm_now() - t1;
	/* Prompt-sized requests (4 KiB cut at a space): the usual serving case, and for
	 * a SentencePiece file (no pre-tokenizer: one piece per request) much smaller
	 * merge heaps than the whole text as one piece. */
	double t2 = allm_now();
	size_t n_small = 0;
	for (size_t off = 0; off < len;) {
		size_t end = off + 4096 < len ? off + 4096 : len;
		while (end < len && text[end] != ' ')
			end++;
		int32_t *part = NULL;
		size_t k = 0;
		if (allm_tokenizer_encode(tok, text + off, end - off, false, &part, &k, &err) == 0)
			n_small += k;
		allm_free(part);
		off = end;
	}
	double dt_small = allm_now() - t2;
	printf("%-12s encode %7.2f MB/s in 4 KiB requests (%zu ids)\n", name, len / dt_small / 1e6, n_small);
	printf("%-12s encode %7.2f MB/s (%zu bytes -> %zu ids, %.3f s), decode %7.1f MB/s, round trip %s\n",
	       name, len / dt / 1e6, len, n, dt, len / dt_dec / 1e6,
	       r == 0 && !strcmp(back, text) ? "ok" : "DIFFERS");
	allm_free(back);
	allm_free(ids);
}

static double time_load(const char *path, bool is_dir, struct allm_tokenizer **ret)
{
	struct allm_err err = { { 0 } };
	double best = 1e9;
	for (int i = 0; i < 3; i++) {
		struct allm_tokenizer *tok = NULL;
		double t0 = allm_now();
		int r = is_dir ? allm_tokenizer_load(path, &tok, &err) : allm_tokenizer_load_file(path, &tok, &err);
		double dt = allm_now() - t0;
		if (r) {
			printf("load %s failed: %s\n", path, err.msg);
			return -1;
		}
		best = dt < best ? dt : best;
		if (ret && i == 2)
			*ret = tok;
		else
			allm_tokenizer_free(tok);
	}
	return best;
}

/* Byte-level tokenizer.json with 128,000 tokens and 280,000 merges: all strings of
 * 2 chars over a 64-char alphabet, 3 chars over its first 40, 4 over 12, then 5 over
 * 9 until the counts are reached; every split of a token into two vocab entries is a
 * merge, shorter tokens first (rank order). */
static int write_synthetic(const char *path)
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
	const size_t max_vocab = 128000, max_merges = 280000;
	static const int spans[][2] = { { 2, 64 }, { 3, 40 }, { 4, 12 }, { 5, 9 } };
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	size_t n_vocab = 0, n_merges = 0;
	fprintf(f, "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null,\n"
		   "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},\n"
		   "\"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"},\n"
		   "\"model\": {\"type\": \"BPE\", \"vocab\": {");
	/* The 256 byte-level chars, as GPT-2 numbers them. */
	for (int b = 0; b < 256; b++) {
		unsigned cp = b <= 32 ? 256u + b : (b >= 127 && b <= 160) ? 289u + (b - 127) : b == 173 ? 323u : (unsigned)b;
		if (cp == '"' || cp == '\\')
			fprintf(f, "%s\"\\%c\": %zu", n_vocab ? ", " : "", cp, n_vocab);
		else if (cp < 0x80)
			fprintf(f, "%s\"%c\": %zu", n_vocab ? ", " : "", cp, n_vocab);
		else
			fprintf(f, "%s\"%c%c\": %zu", n_vocab ? ", " : "", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F), n_vocab);
		n_vocab++;
	}
	for (size_t s = 0; s < 4; s++) {
		int len = spans[s][0], base = spans[s][1];
		size_t count = 1;
		for (int k = 0; k < len; k++)
			count *= (size_t)base;
		for (size_t i = 0; i < count && n_vocab < max_vocab; i++, n_vocab++) {
			char tok[8];
			for (int k = len - 1, x = (int)i; k >= 0; k--, x /= base)
				tok[k] = alpha[x % base];
			fprintf(f, ", \"%.*s\": %zu", len, tok, n_vocab);
		}
	}
	fprintf(f, "},\n\"merges\": [");
	for (size_t s = 0; s < 4 && n_merges < max_merges; s++) {
		int len = spans[s][0], base = spans[s][1];
		size_t count = 1, done = 0;
		for (int k = 0; k < len; k++)
			count *= (size_t)base;
		for (size_t i = 0; i < count && n_merges < max_merges; i++) {
			char tok[8];
			for (int k = len - 1, x = (int)i; k >= 0; k--, x /= base)
				tok[k] = alpha[x % base];
			/* Only tokens that made it into the vocab (the 5-char span is cut). */
			if (s == 3 && done >= max_vocab - 256 - 4096 - 64000 - 20736)
				break;
			done++;
			for (int cut = 1; cut < len && n_merges < max_merges; cut++, n_merges++)
				fprintf(f, "%s\"%.*s %.*s\"", n_merges ? ", " : "", cut, tok, len - cut, tok + cut);
		}
	}
	fprintf(f, "]}}\n");
	fclose(f);
	printf("synthetic tokenizer.json: %zu tokens, %zu merges -> %s\n", n_vocab, n_merges, path);
	return 0;
}

int main(int argc, char **argv)
{
	const char *shared = argc > 1 ? argv[1] : getenv("DATA_DIR") ? getenv("DATA_DIR") : "data";
	char path[4096];
	size_t len;
	char *text = make_text(8u << 20, &len);
	struct allm_tokenizer *tok = NULL;

	snprintf(path, sizeof(path), "%s/models/gpt2-tokenizer/tokenizer.json", shared);
	double t = time_load(path, false, &tok);
	if (t >= 0) {
		printf("gpt2 tokenizer.json load: %.1f ms (best of 3)\n", t * 1e3);
		bench_encode("gpt2", tok, text, len);
		allm_tokenizer_free(tok);
	}
	snprintf(path, sizeof(path), "%s/models/stories260K", shared);
	t = time_load(path, true, &tok);
	if (t >= 0) {
		printf("stories260K load: %.1f ms\n", t * 1e3);
		bench_encode("stories260K", tok, text, len);
		allm_tokenizer_free(tok);
	}
	char dir[] = "/tmp/allm-bench-tok-XXXXXX";
	if (mkdtemp(dir)) {
		snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
		if (write_synthetic(path) == 0) {
			t = time_load(path, false, &tok);
			if (t >= 0) {
				printf("synthetic 128k/280k load: %.1f ms (best of 3)\n", t * 1e3);
				bench_encode("synthetic", tok, text, len);
				allm_tokenizer_free(tok);
			}
			unlink(path);
		}
		rmdir(dir);
	}
	free(text);
	return 0;
}
