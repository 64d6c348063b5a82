/* Description: the hand-written split patterns of byte-level tokenizers (GPT-2, Llama-3, Qwen2; tokenizer-encode.c) against a real regex engine, PCRE2 in Unicode mode: first every code point's class (\p{L}, \p{N}, \s as White_Space) against the tables of tokenizer-unicode.c (both Unicode 14.0), then the pieces of 300,000 random strings per pattern (letters, digits, spaces, newlines, apostrophes, case variants, marks, symbols and the Unicode spaces and letters that differ from ASCII) split by our code and by PCRE2 matching the tokenizer.json pattern at each offset. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "test-check.h"
#include "tokenizer-internal.h"

#include <stdio.h>
#include <string.h>

/* The patterns of tokenizer.c's known_splits, for PCRE2. Their \s is Unicode
 * White_Space (the regex crate's, Oniguruma's); PCRE2's \s differs (it omits
 * U+0085 and keeps U+180E), so \s is spelled out as White_Space of Unicode 14.0's
 * PropList.txt. */
#define WS "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
static const struct {
	const char *name, *pattern;
	enum allm_tok_split split;
} pats[] = {
	{"gpt2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+",
	 ALLM_TOK_SPLIT_GPT2},
	{"llama3",
	 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS
	 "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+",
	 ALLM_TOK_SPLIT_LLAMA3},
	{"qwen2",
	 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS
	 "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+",
	 ALLM_TOK_SPLIT_QWEN2},
};

static pcre2_code *compile(const char *pattern)
{
	int ec;
	PCRE2_SIZE off;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &off,
				       NULL);
	if (!re) {
		PCRE2_UCHAR msg[200];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		fprintf(stderr, "pcre2: %s at %zu in %s\n", (char *)msg, (size_t)off, pattern);
	}
	return re;
}

static size_t put_utf8(uint32_t c, uint8_t *o)
{
	if (c < 0x80)
		return o[0] = (uint8_t)c, 1;
	if (c < 0x800)
		return o[0] = (uint8_t)(0xc0 | c >> 6), o[1] = (uint8_t)(0x80 | (c & 0x3f)), 2;
	if (c < 0x10000)
		return o[0] = (uint8_t)(0xe0 | c >> 12), o[1] = (uint8_t)(0x80 | (c >> 6 & 0x3f)),
		       o[2] = (uint8_t)(0x80 | (c & 0x3f)), 3;
	return o[0] = (uint8_t)(0xf0 | c >> 18), o[1] = (uint8_t)(0x80 | (c >> 12 & 0x3f)),
	       o[2] = (uint8_t)(0x80 | (c >> 6 & 0x3f)), o[3] = (uint8_t)(0x80 | (c & 0x3f)), 4;
}

/* Every code point's class, ours against PCRE2's. */
static void check_classes(void)
{
	pcre2_code *re[3] = {compile("^\\p{L}$"), compile("^\\p{N}$"), compile("^[" WS "]$")};
	pcre2_match_data *md = pcre2_match_data_create(4, NULL);
	int bad = 0;
	CHECK(re[0] && re[1] && re[2] && md, "pcre2 setup");
	for (uint32_t c = 0; c <= 0x10ffff && re[0] && re[1] && re[2]; c++) {
		if (c >= 0xd800 && c <= 0xdfff)
			continue;
		uint8_t b[4];
		size_t n = put_utf8(c, b);
		int want = ALLM_UCLS_OTHER;
		if (pcre2_match(re[0], b, n, 0, 0, md, NULL) >= 0)
			want = ALLM_UCLS_L;
		else if (pcre2_match(re[1], b, n, 0, 0, md, NULL) >= 0)
			want = ALLM_UCLS_N;
		else if (pcre2_match(re[2], b, n, 0, 0, md, NULL) >= 0)
			want = ALLM_UCLS_S;
		int got = allm_tok_uclass(c);
		if (got != want && bad++ < 10)
			fprintf(stderr, "U+%04X: class %d, PCRE2 %d\n", c, got, want);
	}
	CHECK(bad == 0, "%d code points classed unlike PCRE2 (Unicode 14.0 both)", bad);
	for (int i = 0; i < 3; i++)
		pcre2_code_free(re[i]);
	pcre2_match_data_free(md);
}

/* What random strings are made of: the characters each rule of the patterns turns on. */
static const uint32_t alphabet[] = {
	'a', 'Z', 's', 'S', 't', 'T', 'r', 'R', 'e', 'E', 'v', 'V', 'l', 'L', 'm', 'M', 'd', 'D', 'k', 'x', '0', '1',
	'9', ' ', ' ', ' ', '\t', '\r', '\n', '\n', 0x0b, 0x0c, '\'', '\'', '\'', '.', ',', '!', '-', '_', '"', '(',
	0xe9,	/* é: a letter */
	0x17f,	/* ſ: folds to s */
	0x212a, /* Kelvin sign: folds to k */
	0x130,	/* İ */
	0x4e2d, /* 中 */
	0x663,	/* Arabic-Indic three: a number */
	0x216b, /* Roman numeral twelve: Nl */
	0xbd,	/* ½: No */
	0xa0, 0x3000, 0x2028, 0x85, 0x1680, /* Unicode spaces */
	0x200b, /* zero width space: not White_Space */
	0x301,	/* combining acute: a mark */
	0x1f600, 0x20ac, 0xfeff, 0x1c, /* symbols, a BOM, a C0 control */
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static void check_splits(int k, int n_strings)
{
	pcre2_code *re = compile(pats[k].pattern);
	pcre2_match_data *md = pcre2_match_data_create(4, NULL);
	int bad = 0;
	CHECK(re && md, "%s: pcre2 setup", pats[k].name);
	for (int t = 0; re && t < n_strings; t++) {
		uint8_t s[24 * 4];
		size_t n = 0, len = 1 + next() % 20;
		for (size_t j = 0; j < len; j++)
			n += put_utf8(alphabet[next() % (sizeof(alphabet) / sizeof(alphabet[0]))], s + n);
		for (size_t i = 0; i < n;) {
			size_t ours = allm_tok_regex_piece_end(pats[k].split, s, n, i);
			int r = pcre2_match(re, s, n, i, PCRE2_ANCHORED, md, NULL);
			size_t theirs = r >= 0 ? pcre2_get_ovector_pointer(md)[1] : 0;
			if (ours != theirs) {
				if (bad++ < 8) {
					fprintf(stderr, "%s: at byte %zu of \"", pats[k].name, i);
					for (size_t j = 0; j < n; j++)
						fprintf(stderr, s[j] < 0x20 || s[j] == '"' ? "\\x%02x" : "%c", s[j]);
					fprintf(stderr, "\": our piece ends at %zu, PCRE2's at %zu\n", ours, theirs);
				}
				break;
			}
			i = ours;
		}
	}
	CHECK(bad == 0, "%s: %d of %d strings split unlike PCRE2", pats[k].name, bad, n_strings);
	pcre2_code_free(re);
	pcre2_match_data_free(md);
}

int main(void)
{
	check_classes();
	for (int k = 0; k < 3; k++)
		check_splits(k, 300000);
	if (!n_fail)
		printf("test-tokenizer-split-pcre2: classes of every code point and 3 x 300000 splits agree with PCRE2\n");
	return n_fail ? 1 : 0;
}
