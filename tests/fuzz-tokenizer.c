/* Description: libFuzzer target over the tokenizer (engined/tokenizer): the files of a model directory a user may be handed — tokenizer.json and tokenizer_config.json — and the text it then encodes. The input is a flags byte, then the three parts separated by the 4 bytes "\n\0\1\n" (a missing part: no such file; an empty text is still encoded). A file the loader cannot take must be refused with -EINVAL/-ENOENT and a message; a loaded tokenizer must encode (or refuse invalid UTF-8 with -EILSEQ) to ids inside its vocabulary, decode them, and stream-decode them to the same text piece by piece, as tokenizer.h promises; ids from the input outside the vocabulary must be refused. Nothing may crash, leak or read past a file. */
#include "tokenizer.h"

#include <errno.h>
#include "fuzz-parts.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

/* Stream-decodes ids and checks the pieces add up to decode()'s text. decode()
 * gives no length and a byte token 0x00 puts a NUL inside its text, so the two
 * are compared up to their first NUL. */
static void check_stream(const struct allm_tokenizer *tok, const int32_t *ids, size_t n, bool skip,
			 const char *whole)
{
	struct allm_detok *d = NULL;
	if (allm_detok_create(tok, skip, &d))
		return; /* out of memory */
	size_t cap = allm_detok_piece_cap(tok), len = 0, all_cap = 0;
	char *piece = malloc(cap), *all = NULL;
	if (!piece)
		goto out;
	for (size_t i = 0; i <= n; i++) {
		int k = i < n ? allm_detok_push(d, ids[i], piece, cap) : allm_detok_flush(d, piece, cap);
		if (k < 0 || (size_t)k >= cap)
			abort(); /* a refused id the tokenizer made, or a piece past its cap */
		if (len + (size_t)k + 1 > all_cap) {
			all_cap = 2 * (len + (size_t)k + 1);
			char *a = realloc(all, all_cap);
			if (!a)
				goto out;
			all = a;
		}
		memcpy(all + len, piece, (size_t)k);
		len += (size_t)k;
	}
	size_t wlen = strlen(whole);
	if (strnlen(all ? all : "", len) != wlen || (wlen && memcmp(all, whole, wlen)))
		abort(); /* the stream's text is not decode()'s */
out:
	free(piece);
	free(all);
	allm_detok_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool add_special = data[0] & 1, skip = data[0] & 2;
	const uint8_t *p = data + 1, *end = data + size;
	static const char *const names[] = {"tokenizer.json", "tokenizer_config.json"};
	struct allm_vfile files[2];
	size_t n_files = fuzz_files(&p, end, names, 2, files), n_text = 0;
	const uint8_t *text = fuzz_part(&p, end, &n_text);
	struct allm_vdir dir = {"<fuzz>", files, n_files};
	struct allm_tokenizer *tok = NULL;
	struct allm_err err = {0};
	int r = allm_tokenizer_load_from(&dir, &tok, &err);
	if (r) {
		if ((r != -EINVAL && r != -ENOENT && r != -ENOMEM && r != -EFBIG) || !err.msg[0] || tok)
			abort();
		return 0;
	}
	int32_t vocab = allm_tokenizer_vocab_size(tok);
	int32_t *ids = NULL;
	size_t n = 0;
	r = allm_tokenizer_encode(tok, text ? (const char *)text : "", text ? n_text : 0, add_special, &ids, &n,
				  &err);
	if (r && r != -EILSEQ && r != -ENOMEM)
		abort();
	if (!r) {
		char *whole = NULL;
		for (size_t i = 0; i < n; i++)
			if (ids[i] < 0 || ids[i] >= vocab)
				abort();
		if (allm_tokenizer_decode(tok, ids, n, skip, &whole, &err) == 0) {
			check_stream(tok, ids, n, skip, whole);
			allm_free(whole);
		} else if (n) {
			abort(); /* ids the tokenizer made must decode */
		}
	}
	allm_free(ids);
	/* ids straight from the input: in range they decode, out of range they are refused */
	if (text && n_text >= 4) {
		size_t m = n_text / 4;
		int32_t *raw = malloc(m * sizeof(*raw));
		char *whole = NULL;
		bool in_range = true;
		if (raw) {
			memcpy(raw, text, m * sizeof(*raw));
			for (size_t i = 0; i < m; i++)
				in_range &= raw[i] >= 0 && raw[i] < vocab;
			r = allm_tokenizer_decode(tok, raw, m, skip, &whole, &err);
			if (in_range ? r && r != -ENOMEM : r != -EINVAL)
				abort();
			if (!r) {
				check_stream(tok, raw, m, skip, whole);
				allm_free(whole);
			}
			free(raw);
		}
	}
	allm_tokenizer_free(tok);
	return 0;
}
