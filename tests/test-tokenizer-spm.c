/* Description: SentencePiece-style BPE (stories260K): the golden "Once upon a time" ids, byte fallback, special tokens in text, round trips and the invalid-UTF-8 rule. */
#include "test-tokenizer-util.h"

int main(void)
{
	struct allm_tokenizer *tok = NULL;
	struct allm_err err = { { 0 } };
	int r = load_shared("models/stories260K", true, &tok);
	if (r)
		return r;
	CHECK(allm_tokenizer_vocab_size(tok) == 512, "vocab size %d", allm_tokenizer_vocab_size(tok));
	CHECK(allm_tokenizer_bos_id(tok) == 1, "bos %d", allm_tokenizer_bos_id(tok));
	CHECK(allm_tokenizer_eos_id(tok) == 2, "eos %d", allm_tokenizer_eos_id(tok));
	CHECK(allm_tokenizer_is_eos(tok, 2) && !allm_tokenizer_is_eos(tok, 403), "is_eos");
	CHECK(allm_tokenizer_is_special(tok, 1) && !allm_tokenizer_is_special(tok, 403), "is_special");

	/* The answer of the original SentencePiece model (llama2.c's tokenizer). */
	expect_ids(tok, "Once upon a time", true, IDS(1, 403, 407, 261, 378));
	expect_ids(tok, "Once upon a time", false, IDS(403, 407, 261, 378));
	/* An empty prompt is just BOS. */
	expect_ids(tok, "", true, IDS(1));
	/* Special tokens inside text stay whole; the pieces around them each get the
	 * "▁" prefix (legacy Llama normalizer): "▁a"=261, "</s>"=2, "▁b"=268. */
	expect_ids(tok, "a</s>b", true, IDS(1, 261, 2, 268));
	expect_ids(tok, "<s>", false, IDS(1));
	/* Byte fallback: "中" is E4 B8 AD, not in the 512-piece vocab; <0xNN> = 3 + NN.
	 * "▁" alone is piece 410. */
	expect_ids(tok, "中", false, IDS(410, 3 + 0xE4, 3 + 0xB8, 3 + 0xAD));
	/* "é" is a piece of its own (485) in this vocab. */
	expect_ids(tok, "é", false, IDS(410, 485));

	roundtrip(tok, "Once upon a time, there was a little girl named Lily.");
	roundtrip(tok, "  two leading spaces and trailing  ");
	roundtrip(tok, "Tabs\tand\nnewlines\r\n");
	roundtrip(tok, "中文字符 and 日本語 and 한국어");
	roundtrip(tok, "emoji 😀🎉👍🏽 and symbols ©®™ — “quotes”");
	roundtrip(tok, "Ελληνικά Русский العربية עברית");
	roundtrip(tok, "\x01\x02 control \x7f bytes");

	/* Whole decode keeps "<s>" unless skip_special, as HF does. */
	char *text = NULL;
	expect_decode(tok, IDS(1, 403, 407, 261, 378), false, "<s> Once upon a time");
	expect_decode(tok, IDS(1, 403, 407, 261, 378), true, "Once upon a time");
	/* A broken byte run becomes U+FFFD (one per maximal ill-formed subpart). */
	expect_decode(tok, IDS(3 + 0xE4, 3 + 0xB8, 426), true, "\xEF\xBF\xBD.");
	r = allm_tokenizer_decode(tok, (int32_t[]){ 1, 512 }, 2, true, &text, &err);
	CHECK(r == -EINVAL, "decode of id 512 must fail, got %d", r);

	/* Invalid UTF-8 is rejected with -EILSEQ naming the offset, outputs untouched. */
	int32_t *ids = (int32_t *)&err;
	size_t n = 12345;
	r = allm_tokenizer_encode(tok, "ab\xff", 3, true, &ids, &n, &err);
	CHECK(r == -EILSEQ && strstr(err.msg, "byte 2") && n == 12345, "invalid UTF-8: %d %s", r, err.msg);
	r = allm_tokenizer_encode(tok, "x\xe4\xb8", 3, true, &ids, &n, &err);
	CHECK(r == -EILSEQ && strstr(err.msg, "byte 1"), "truncated UTF-8: %d %s", r, err.msg);
	r = allm_tokenizer_encode(tok, "\xed\xa0\x80", 3, true, &ids, &n, &err);
	CHECK(r == -EILSEQ, "surrogate must be rejected: %d", r);
	r = allm_tokenizer_encode(tok, "\xc0\xaf", 2, true, &ids, &n, &err);
	CHECK(r == -EILSEQ, "overlong must be rejected: %d", r);

	allm_tokenizer_free(tok);
	allm_tokenizer_free(NULL);
	return finish();
}
