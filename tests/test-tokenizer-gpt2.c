/* Description: byte-level BPE on the real GPT-2 tokenizer.json (current and older hub layout): published ids, special tokens in text, round trips. */
#include "test-tokenizer-util.h"

static void check_gpt2(struct allm_tokenizer *tok)
{
	/* Published facts. */
	expect_ids(tok, "Hello world", true, IDS(15496, 995));
	expect_ids(tok, " the", true, IDS(262));
	expect_ids(tok, "<|endoftext|>", true, IDS(50256));
	/* The ByteLevel post-processor adds nothing, even with add_special. */
	expect_ids(tok, "", true, (int32_t[]){ 0 }, 0);
	/* The widely quoted GPT-2 ids of this pangram. */
	expect_ids(tok, "The quick brown fox jumps over the lazy dog.", false,
		   IDS(464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13));
	/* Cross-checked with OpenAI's encoder.py algorithm (Python `regex` module, merges
	 * by rank): contractions, digits, a run of spaces before a word (\s+(?!\S)). */
	expect_ids(tok, "It's 2024, and we've got 3.14 reasons   to smile!", false,
		   IDS(1026, 338, 48609, 11, 290, 356, 1053, 1392, 513, 13, 1415, 3840, 220, 220,
		       284, 8212, 0));
	/* Non-ASCII goes through the byte map: "Ü" = C3 9C -> "Ã" "ľ". */
	expect_ids(tok, "Ünïcödé 中文 😀", false,
		   IDS(127, 250, 77, 26884, 66, 9101, 67, 2634, 220, 40792, 23877, 229, 30325, 222));
	/* The special token is never split, wherever it sits. */
	expect_ids(tok, "Hello<|endoftext|> world", false, IDS(15496, 50256, 995));

	expect_decode(tok, IDS(15496, 995), false, "Hello world");
	expect_decode(tok, IDS(15496, 50256, 995), false, "Hello<|endoftext|> world");
	expect_decode(tok, IDS(15496, 50256, 995), true, "Hello world");
	/* Half of "Ü" alone is not UTF-8. */
	expect_decode(tok, IDS(127), false, "\xEF\xBF\xBD");

	roundtrip(tok, "Hello world! It's a test: we'll see   how    it's done.\tTabs\n\nnewlines  ");
	roundtrip(tok, "Ελληνικά, Русский текст, 中文字符，日本語のテキスト、한국어 텍스트, العربية, עברית.");
	roundtrip(tok, "emoji 😀🎉👍🏽 and symbols ©®™ — “quotes” ‘single’ … $100,000.00 #tag");
	roundtrip(tok, "  \n \r\n\t\v\f trailing   ");
	CHECK(allm_tokenizer_vocab_size(tok) == 50257, "vocab size %d", allm_tokenizer_vocab_size(tok));
	CHECK(allm_tokenizer_eos_id(tok) == 50256, "eos %d", allm_tokenizer_eos_id(tok));
	CHECK(allm_tokenizer_token_to_id(tok, "Ġthe") == 262, "token_to_id");
	CHECK(!strcmp(allm_tokenizer_id_to_token(tok, 995), "Ġworld"), "id_to_token");
}

int main(void)
{
	static const char *const files[] = { "models/gpt2-tokenizer/tokenizer.json",
					     "models/gpt2-tokenizer/tokenizer.hub-layout.json" };
	for (size_t i = 0; i < 2; i++) {
		struct allm_tokenizer *tok = NULL;
		int r = load_shared(files[i], false, &tok);
		if (r)
			return r;
		check_gpt2(tok);
		allm_tokenizer_free(tok);
	}
	return finish();
}
