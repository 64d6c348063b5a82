/* Description: the \p{L} / \p{N} / \s classifier behind the split patterns, over the scripts it must cover, plus the UTF-8 validator. */
#include "test-tokenizer-util.h"
#include "tokenizer-internal.h"

int main(void)
{
	static const struct {
		uint32_t cp;
		int cls;
	} cases[] = {
		{ 'a', ALLM_UCLS_L }, { 'Z', ALLM_UCLS_L }, { '7', ALLM_UCLS_N }, { ' ', ALLM_UCLS_S },
		{ '\t', ALLM_UCLS_S }, { '\n', ALLM_UCLS_S }, { '\v', ALLM_UCLS_S }, { '$', ALLM_UCLS_OTHER },
		{ '_', ALLM_UCLS_OTHER }, { '\'', ALLM_UCLS_OTHER }, { 0x1F, ALLM_UCLS_OTHER },
		{ 0xE9, ALLM_UCLS_L },   /* é Latin-1 */
		{ 0x0101, ALLM_UCLS_L }, /* ā Latin Extended-A */
		{ 0x03A9, ALLM_UCLS_L }, /* Ω Greek */
		{ 0x0416, ALLM_UCLS_L }, /* Ж Cyrillic */
		{ 0x05E2, ALLM_UCLS_L }, /* ע Hebrew */
		{ 0x0639, ALLM_UCLS_L }, /* ع Arabic */
		{ 0x0915, ALLM_UCLS_L }, /* क Devanagari */
		{ 0x4E2D, ALLM_UCLS_L }, /* 中 CJK */
		{ 0x3042, ALLM_UCLS_L }, /* あ Hiragana */
		{ 0xD55C, ALLM_UCLS_L }, /* 한 Hangul */
		{ 0x20000, ALLM_UCLS_L }, /* CJK Extension B */
		{ 0x0663, ALLM_UCLS_N }, /* ٣ Arabic-Indic digit */
		{ 0x00BD, ALLM_UCLS_N }, /* ½ No */
		{ 0x216B, ALLM_UCLS_N }, /* Ⅻ Nl */
		{ 0xFF15, ALLM_UCLS_N }, /* fullwidth 5 */
		{ 0x00A0, ALLM_UCLS_S }, { 0x0085, ALLM_UCLS_S }, { 0x2003, ALLM_UCLS_S },
		{ 0x3000, ALLM_UCLS_S }, { 0x2028, ALLM_UCLS_S },
		{ 0x200B, ALLM_UCLS_OTHER }, /* zero-width space is not White_Space */
		{ 0x00AD, ALLM_UCLS_OTHER }, /* soft hyphen (Cf) */
		{ 0x0301, ALLM_UCLS_OTHER }, /* combining acute (Mn) */
		{ 0x1F600, ALLM_UCLS_OTHER }, /* 😀 */
		{ 0x00A9, ALLM_UCLS_OTHER }, /* © */
		{ 0x10FFFF, ALLM_UCLS_OTHER },
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(cases); i++)
		CHECK(allm_tok_uclass(cases[i].cp) == cases[i].cls, "U+%04X: class %d, want %d",
		      cases[i].cp, allm_tok_uclass(cases[i].cp), cases[i].cls);

	static const struct {
		const char *s;
		size_t valid;
	} utf8[] = {
		{ "abc", 3 }, { "\xC3\xA9", 2 }, { "\xE4\xB8\xAD", 3 }, { "\xF0\x9F\x98\x80", 4 },
		{ "a\x80", 1 }, { "\xC0\xAF", 0 }, { "\xE0\x80\xAF", 0 }, { "\xED\xA0\x80", 0 },
		{ "\xF4\x90\x80\x80", 0 }, { "\xF5\x80\x80\x80", 0 }, { "ab\xE4\xB8", 2 }, { "\xFF", 0 },
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(utf8); i++)
		CHECK(allm_tok_utf8_valid_prefix((const uint8_t *)utf8[i].s, strlen(utf8[i].s)) == utf8[i].valid,
		      "utf8 case %zu", i);
	/* The byte-level map is a bijection between bytes and its 256 code points. */
	for (int b = 0; b < 256; b++)
		CHECK(allm_tok_cp_to_byte(allm_tok_byte_to_cp((uint8_t)b)) == b, "byte map %d", b);
	CHECK(allm_tok_byte_to_cp(' ') == 0x120 && allm_tok_byte_to_cp('\n') == 0x10A, "Ġ and Ċ");
	return finish();
}
