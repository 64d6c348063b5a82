/* Description: streaming detokenizer: pieces are valid UTF-8, a multi-byte char split across ids comes out once and whole, and the pieces concatenate to the full decode (prompts and random id sequences). */
#include "test-tokenizer-util.h"

static bool valid_utf8(const char *s)
{
	const uint8_t *p = (const uint8_t *)s;
	while (*p) {
		int len = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 :
			  (*p & 0xF8) == 0xF0 ? 4 : 0;
		if (!len)
			return false;
		for (int k = 1; k < len; k++)
			if ((p[k] & 0xC0) != 0x80)
				return false;
		p += len;
	}
	return true;
}

/* Streams ids through a detok and compares with the whole decode. */
static void check_stream(struct allm_tokenizer *tok, const int32_t *ids, size_t n,
			 bool skip_special, const char *what)
{
	struct allm_detok *d = NULL;
	struct allm_err err = { { 0 } };
	size_t cap = allm_detok_piece_cap(tok), total = 0;
	char *piece = malloc(cap), *whole = NULL, *acc = malloc(cap * (n + 1) + 1);
	acc[0] = 0;
	CHECK(allm_detok_create(tok, skip_special, &d) == 0, "detok_create");
	for (size_t i = 0; i <= n; i++) {
		int r = i < n ? allm_detok_push(d, ids[i], piece, cap) : allm_detok_flush(d, piece, cap);
		CHECK(r >= 0 && (size_t)r == strlen(piece), "%s: push %zu returned %d", what, i, r);
		if (r < 0)
			break;
		CHECK(valid_utf8(piece), "%s: piece %zu is not valid UTF-8", what, i);
		memcpy(acc + total, piece, (size_t)r + 1);
		total += (size_t)r;
	}
	int r = allm_tokenizer_decode(tok, ids, n, skip_special, &whole, &err);
	CHECK(r == 0 && !strcmp(acc, whole), "%s (skip_special=%d): stream '%s' != decode '%s'",
	      what, skip_special, acc, r ? err.msg : whole);
	allm_free(whole);
	allm_detok_free(d);
	free(piece);
	free(acc);
}

static void check_prompts(struct allm_tokenizer *tok, const char *name)
{
	static const char *const prompts[] = {
		"Once upon a time, there was a little girl named Lily.",
		" leading space",
		"  two leading spaces",
		"中文字符 and 日本語 and 한국어",
		"emoji 😀🎉👍🏽 and ©®™ — “quotes”",
		"Ελληνικά Русский العربية עברית",
		"a</s>b<s>c<|endoftext|>d",
		"\n\nnewlines\r\n\ttab",
		"é",
		"",
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(prompts); i++) {
		struct allm_err err = { { 0 } };
		int32_t *ids = NULL;
		size_t n = 0;
		int r = allm_tokenizer_encode(tok, prompts[i], strlen(prompts[i]), true, &ids, &n, &err);
		CHECK(r == 0, "%s: encode: %s", name, err.msg);
		check_stream(tok, ids, n, false, name);
		check_stream(tok, ids, n, true, name);
		allm_free(ids);
	}
	/* Random id sequences: byte tokens in any order, specials, garbage UTF-8. */
	uint64_t seed = 0x1234567;
	int32_t ids[64];
	for (int round = 0; round < 300; round++) {
		size_t n = 1 + round % 60;
		for (size_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			ids[i] = (int32_t)((seed >> 33) % (uint64_t)allm_tokenizer_vocab_size(tok));
			/* Byte 0 would end the C string of the whole decode early. */
			const char *t = allm_tokenizer_id_to_token(tok, ids[i]);
			if (t && (!strcmp(t, "<0x00>") || !strcmp(t, "Ā")))
				ids[i] = 0;
		}
		check_stream(tok, ids, n, round & 1, name);
	}
}

/* Pushes ids one by one and compares every piece with the expected one. */
static void expect_pieces(struct allm_tokenizer *tok, const int32_t *ids, size_t n,
			  const char *const *want)
{
	struct allm_detok *d = NULL;
	char piece[256];
	CHECK(allm_detok_create(tok, true, &d) == 0, "detok_create");
	for (size_t i = 0; i <= n; i++) {
		int r = i < n ? allm_detok_push(d, ids[i], piece, sizeof(piece))
			      : allm_detok_flush(d, piece, sizeof(piece));
		CHECK(r >= 0 && !strcmp(piece, want[i]), "piece %zu: '%s', want '%s'", i,
		      r >= 0 ? piece : "(error)", want[i]);
	}
	allm_detok_free(d);
}

static void check_stories(struct allm_tokenizer *tok)
{
	/* "中" by byte fallback: ▁ <0xE4> <0xB8> <0xAD>; the leading space is stripped
	 * like the full decode does, the char appears once, whole, at its last byte. */
	expect_pieces(tok, IDS(410, 3 + 0xE4, 3 + 0xB8, 3 + 0xAD),
		      (const char *const[]){ "", "", "", "中", "" });
	/* BOS skipped, then "▁Once" loses its space, "▁upon" keeps it. */
	expect_pieces(tok, IDS(1, 403, 407), (const char *const[]){ "", "Once", " upon", "" });
	/* An incomplete sequence at the end becomes U+FFFD at flush. */
	expect_pieces(tok, IDS(403, 3 + 0xE4), (const char *const[]){ "Once", "", "\xEF\xBF\xBD" });
	/* A sequence broken by a normal piece: U+FFFD then the piece. */
	expect_pieces(tok, IDS(403, 3 + 0xE4, 3 + 0xB8, 426),
		      (const char *const[]){ "Once", "", "", "\xEF\xBF\xBD.", "" });

	/* -ENOSPC consumes nothing; -EINVAL for a bad id. */
	struct allm_detok *d = NULL;
	char piece[64];
	CHECK(allm_detok_create(tok, true, &d) == 0, "detok_create");
	CHECK(allm_detok_push(d, 403, piece, 2) == -ENOSPC, "small buffer must give -ENOSPC");
	CHECK(allm_detok_push(d, 403, piece, sizeof(piece)) == 4 && !strcmp(piece, "Once"),
	      "retry after -ENOSPC: '%s'", piece);
	CHECK(allm_detok_push(d, 512, piece, sizeof(piece)) == -EINVAL, "bad id");
	CHECK(allm_detok_push(d, -1, piece, sizeof(piece)) == -EINVAL, "negative id");
	/* After a flush the stream starts over: the leading space is stripped again. */
	CHECK(allm_detok_flush(d, piece, sizeof(piece)) == 0, "flush");
	CHECK(allm_detok_push(d, 407, piece, sizeof(piece)) == 4 && !strcmp(piece, "upon"),
	      "after flush: '%s'", piece);
	allm_detok_free(d);
	allm_detok_free(NULL);

	/* Primed with the prompt (BOS "▁Once"), "▁upon" continues it with its space, and
	 * a character split between prompt and output completes in the output. */
	CHECK(allm_detok_create(tok, true, &d) == 0, "detok_create");
	CHECK(allm_detok_prime(d, IDS(1, 403)) == 0, "prime");
	CHECK(allm_detok_push(d, 407, piece, sizeof(piece)) == 5 && !strcmp(piece, " upon"),
	      "after the prompt: '%s', want ' upon'", piece);
	allm_detok_free(d);
	CHECK(allm_detok_create(tok, true, &d) == 0, "detok_create");
	CHECK(allm_detok_prime(d, IDS(403, 3 + 0xE4, 3 + 0xB8)) == 0, "prime, split char");
	CHECK(allm_detok_push(d, 3 + 0xAD, piece, sizeof(piece)) > 0 && !strcmp(piece, "中"),
	      "split char: '%s', want '中'", piece);
	CHECK(allm_detok_prime(d, IDS(512)) == -EINVAL, "prime with a bad id");
	allm_detok_free(d);
}

int main(void)
{
	struct allm_tokenizer *tok = NULL;
	int r = load_shared("models/stories260K", true, &tok);
	if (r)
		return r;
	check_stories(tok);
	check_prompts(tok, "stories260K");
	allm_tokenizer_free(tok);

	r = load_shared("models/gpt2-tokenizer/tokenizer.json", false, &tok);
	if (r)
		return r;
	/* " 😀" = Ġ F0 9F 98 | 80: the space comes out at once, the emoji when whole. */
	expect_pieces(tok, IDS(30325, 222), (const char *const[]){ " ", "😀", "" });
	check_prompts(tok, "gpt2");
	allm_tokenizer_free(tok);
	return finish();
}
