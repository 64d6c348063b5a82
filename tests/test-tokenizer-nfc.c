/* Description: Unicode normalization form C (engined/tokenizer/tokenizer-nfc.c, the "NFC" normalizer of Qwen2's tokenizer.json) against Python's unicodedata on 4730 cases (tests/data/tokenizer/nfc-cases.txt, make-nfc-cases.py): every precomposed character and its decomposition, composition exclusions, Hangul syllables and jamo, and random runs of bases and combining marks in every order (canonical reordering, blocked marks, leading marks); then a tokenizer.json with the NFC normalizer encodes "e" + U+0301 as the token "é". Usage: test-tokenizer-nfc DIR (tests/data/tokenizer). */
#include "tokenizer-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n_fail;

static size_t utf8(const char *hex, char *out)
{
	size_t k = 0;
	char *end;
	for (const char *p = hex; *p && *p != '\t' && *p != '\n';) {
		unsigned long cp = strtoul(p, &end, 16);
		if (end == p)
			break;
		p = end;
		if (cp < 0x80) {
			out[k++] = (char)cp;
		} else if (cp < 0x800) {
			out[k++] = (char)(0xC0 | cp >> 6);
			out[k++] = (char)(0x80 | (cp & 0x3F));
		} else if (cp < 0x10000) {
			out[k++] = (char)(0xE0 | cp >> 12);
			out[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
			out[k++] = (char)(0x80 | (cp & 0x3F));
		} else {
			out[k++] = (char)(0xF0 | cp >> 18);
			out[k++] = (char)(0x80 | (cp >> 12 & 0x3F));
			out[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
			out[k++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	return k;
}

int main(int argc, char **argv)
{
	char path[600], line[1024], in[512], want[512], *buf = NULL;
	size_t cap = 0, n_cases = 0;
	if (argc != 2) {
		fprintf(stderr, "usage: test-tokenizer-nfc DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/nfc-cases.txt", argv[1]);
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		size_t ni = utf8(line, in), nw = utf8(tab + 1, want), got = 0;
		n_cases++;
		if (allm_tok_nfc(in, ni, &buf, &cap, &got) || got != nw || memcmp(buf, want, nw)) {
			if (n_fail++ < 10)
				fprintf(stderr, "FAIL: NFC of %.*s is %.*s, want %.*s", (int)(tab - line), line, (int)got,
					buf ? buf : "", (int)strlen(tab + 1), tab + 1);
		}
	}
	fclose(f);
	allm_free(buf);
	if (n_cases < 4000) {
		fprintf(stderr, "FAIL: %s holds %zu cases\n", path, n_cases);
		return 1;
	}

	/* the normalizer in a tokenizer.json: "e" + U+0301 is the token "é" */
	static const char json[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"e\": 0, \"\xcc\x81\": 1, \"\xc3\xa9\": 2}, "
				   "\"merges\": []}, \"normalizer\": {\"type\": \"NFC\"}}";
	char tpath[] = "/tmp/test-tokenizer-nfc-XXXXXX";
	int fd = mkstemp(tpath);
	struct allm_tokenizer *tok = NULL;
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0;
	if (fd < 0 || write(fd, json, sizeof(json) - 1) != (ssize_t)sizeof(json) - 1 || close(fd) ||
	    allm_tokenizer_load_file(tpath, &tok, &err) ||
	    allm_tokenizer_encode(tok, "e\xcc\x81", 3, false, &ids, &n, &err) || n != 1 || ids[0] != 2) {
		fprintf(stderr, "FAIL: NFC normalizer: %s (%zu ids)\n", err.msg, n);
		n_fail++;
	}
	unlink(tpath);
	allm_free(ids);
	allm_tokenizer_free(tok);
	if (n_fail) {
		fprintf(stderr, "%d of %zu failed\n", n_fail, n_cases);
		return 1;
	}
	printf("test-tokenizer-nfc: %zu cases as Python's unicodedata\n", n_cases);
	return 0;
}
