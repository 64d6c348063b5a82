/* Encoding: added-token split, normalizer, pre-tokenizer split, then BPE per piece.
 *
 * The split patterns are matched by hand instead of by a regex engine. Each matcher
 * below reproduces, alternative by alternative, what the regex crate (leftmost-first
 * alternation, greedy quantifiers with backtracking) returns for that exact pattern:
 *
 * GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * Llama-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Qwen2:   the Llama-3 pattern with \p{N} instead of \p{N}{1,3}.
 *
 * Limits: (?i) is applied to ASCII letters only (the regex crate would also fold
 * U+017F "ſ" to "s"); \p{L} / \p{N} come from the Unicode 14 table in
 * tokenizer-unicode.c. */
#include "tokenizer-internal.h"

#include <errno.h>

/* Class of the code point at s[i] (ALLM_UCLS_OTHER past the end). */
static inline int cls_at(const uint8_t *s, size_t n, size_t i, size_t *ret_len,
			 uint32_t *ret_cp)
{
	if (i >= n) {
		*ret_len = 0;
		*ret_cp = 0;
		return -1;
	}
	uint32_t cp;
	*ret_len = allm_tok_utf8_next(s + i, n - i, &cp);
	*ret_cp = cp;
	return allm_tok_uclass(cp);
}

static size_t run_of(const uint8_t *s, size_t n, size_t i, int cls)
{
	size_t l;
	uint32_t cp;
	while (cls_at(s, n, i, &l, &cp) == cls)
		i += l;
	return i;
}

static size_t run_of_other(const uint8_t *s, size_t n, size_t i)
{
	return run_of(s, n, i, ALLM_UCLS_OTHER);
}

/* 's 't 're 've 'm 'll 'd at s[i]; returns the match length or 0. */
static size_t contraction(const uint8_t *s, size_t n, size_t i, bool fold)
{
	if (s[i] != '\'' || i + 1 >= n)
		return 0;
	uint8_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
	/* (?i) folds Unicode cases: U+017F LATIN SMALL LETTER LONG S is an 's' too
	 * (the only letter outside ASCII that folds to one of these) */
	if (fold && a == 0xc5 && b == 0xbf)
		return 3;
	if (fold) {
		a = (a >= 'A' && a <= 'Z') ? a + 32 : a;
		b = (b >= 'A' && b <= 'Z') ? b + 32 : b;
	}
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return 2;
	if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
		return 3;
	return 0;
}

/* \s+(?!\S)|\s+ at a whitespace code point: the run, minus its last char when
 * something non-space follows and the run is longer than one char. */
static size_t space_tail(const uint8_t *s, size_t n, size_t i)
{
	size_t e = i, last = i, l;
	uint32_t cp;
	while (cls_at(s, n, e, &l, &cp) == ALLM_UCLS_S) {
		last = e;
		e += l;
	}
	if (e >= n || last == i)
		return e;
	return last;
}

static size_t match_gpt2(const uint8_t *s, size_t n, size_t i)
{
	size_t l0, l1, k;
	uint32_t cp;

	if ((k = contraction(s, n, i, false)))
		return i + k;
	int c0 = cls_at(s, n, i, &l0, &cp);
	size_t j = i;
	int cj = c0;
	if (cp == ' ') {
		int c1 = cls_at(s, n, i + l0, &l1, &cp);
		if (c1 == ALLM_UCLS_L || c1 == ALLM_UCLS_N || c1 == ALLM_UCLS_OTHER) {
			j = i + l0;
			cj = c1;
		}
	}
	if (cj == ALLM_UCLS_L || cj == ALLM_UCLS_N || cj == ALLM_UCLS_OTHER)
		return run_of(s, n, j, cj);
	return space_tail(s, n, i);
}

static size_t match_llama3(const uint8_t *s, size_t n, size_t i, int max_digits)
{
	size_t l0, l1, k;
	uint32_t cp0, cp1;

	if ((k = contraction(s, n, i, true)))
		return i + k;
	int c0 = cls_at(s, n, i, &l0, &cp0);
	/* [^\r\n\p{L}\p{N}]?\p{L}+ */
	if (c0 == ALLM_UCLS_L)
		return run_of(s, n, i, ALLM_UCLS_L);
	int c1 = cls_at(s, n, i + l0, &l1, &cp1);
	if (c0 != ALLM_UCLS_N && cp0 != '\r' && cp0 != '\n' && c1 == ALLM_UCLS_L)
		return run_of(s, n, i + l0, ALLM_UCLS_L);
	/* \p{N}{1,3} */
	if (c0 == ALLM_UCLS_N) {
		size_t e = i;
		for (int d = 0; d < max_digits && cls_at(s, n, e, &l0, &cp0) == ALLM_UCLS_N; d++)
			e += l0;
		return e;
	}
	/*  ?[^\s\p{L}\p{N}]+[\r\n]* */
	size_t j = (cp0 == ' ' && c1 == ALLM_UCLS_OTHER) ? i + l0 : i;
	if (cls_at(s, n, j, &l0, &cp0) == ALLM_UCLS_OTHER) {
		size_t e = run_of_other(s, n, j);
		while (e < n && (s[e] == '\r' || s[e] == '\n'))
			e++;
		return e;
	}
	/* \s*[\r\n]+ : up to and including the last newline of the whitespace run */
	size_t e = i, after_nl = 0;
	while (cls_at(s, n, e, &l0, &cp0) == ALLM_UCLS_S) {
		e += l0;
		if (cp0 == '\r' || cp0 == '\n')
			after_nl = e;
	}
	if (after_nl)
		return after_nl;
	return space_tail(s, n, i);
}

size_t allm_tok_regex_piece_end(enum allm_tok_split split, const uint8_t *s, size_t n, size_t i)
{
	switch (split) {
	case ALLM_TOK_SPLIT_GPT2:
		return match_gpt2(s, n, i);
	case ALLM_TOK_SPLIT_LLAMA3:
		return match_llama3(s, n, i, 3);
	case ALLM_TOK_SPLIT_QWEN2:
		return match_llama3(s, n, i, 1);
	default:
		return n;
	}
}

/* End of the pre-tokenizer piece starting at s[i]. */
static size_t piece_end(const struct allm_tokenizer *tok, const uint8_t *s, size_t n, size_t i)
{
	switch (tok->split) {
	case ALLM_TOK_SPLIT_GPT2:
	case ALLM_TOK_SPLIT_LLAMA3:
	case ALLM_TOK_SPLIT_QWEN2:
		return allm_tok_regex_piece_end(tok->split, s, n, i);
	case ALLM_TOK_SPLIT_METASPACE: {
		/* MergedWithNext: a piece runs up to the next replacement char. */
		size_t rl = strlen(tok->ms_repl), e = i + 1;
		while (e < n && !(e + rl <= n && !memcmp(s + e, tok->ms_repl, rl)))
			e++;
		return e;
	}
	default:
		return n;
	}
}

/* A growable byte buffer for normalized text. */
struct nbuf {
	char *p;
	size_t n, cap;
};

static int nbuf_reserve(struct nbuf *b, size_t cap)
{
	if (cap <= b->cap)
		return 0;
	char *p = allm_realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* dst = src with every occurrence of pat replaced by rep (and prefix in front when
 * prefix is not NULL). */
static int replace_into(struct nbuf *dst, const char *src, size_t n, const char *prefix,
			const char *pat, const char *rep)
{
	size_t pl = pat ? strlen(pat) : 0, rl = rep ? strlen(rep) : 0;
	size_t xl = prefix ? strlen(prefix) : 0;
	size_t worst = xl + n * (pl && rl > pl ? (rl + pl - 1) / pl : 1) + 1;
	if (nbuf_reserve(dst, worst) < 0)
		return -ENOMEM;
	memcpy(dst->p, prefix ? prefix : "", xl);
	size_t k = xl;
	for (size_t i = 0; i < n;) {
		if (pl && i + pl <= n && src[i] == pat[0] && !memcmp(src + i, pat, pl)) {
			memcpy(dst->p + k, rep, rl);
			k += rl;
			i += pl;
		} else {
			dst->p[k++] = src[i++];
		}
	}
	dst->n = k;
	return 0;
}

/* Normalizer + Metaspace + ByteLevel add_prefix_space for one text segment. Returns
 * the text to split in *ret / *ret_n (seg itself when nothing changes it). */
static int normalize(const struct allm_tokenizer *tok, const char *seg, size_t n,
		     bool at_start, struct nbuf bufs[2], const char **ret, size_t *ret_n)
{
	const char *cur = seg;
	size_t cur_n = n;
	int which = 0;

	for (size_t k = 0; k < tok->n_norms; k++) {
		const struct allm_tok_norm *nm = &tok->norms[k];
		struct nbuf *dst = &bufs[which];
		int r = nm->kind == ALLM_TOK_NORM_NFC	   ? allm_tok_nfc(cur, cur_n, &dst->p, &dst->cap, &dst->n)
			: nm->kind == ALLM_TOK_NORM_PREPEND ? replace_into(dst, cur, cur_n, cur_n ? nm->a : NULL, NULL, NULL)
							    : replace_into(dst, cur, cur_n, NULL, nm->a, nm->b);
		if (r < 0)
			return r;
		cur = dst->p;
		cur_n = dst->n;
		which ^= 1;
	}
	if (tok->metaspace) {
		size_t rl = strlen(tok->ms_repl);
		bool starts = cur_n >= 1 && (cur[0] == ' ' ||
				(cur_n >= rl && !memcmp(cur, tok->ms_repl, rl)));
		bool prepend = !starts && (tok->ms_prepend == ALLM_TOK_PREPEND_ALWAYS ||
				(tok->ms_prepend == ALLM_TOK_PREPEND_FIRST && at_start));
		int r = replace_into(&bufs[which], cur, cur_n, prepend ? tok->ms_repl : NULL, " ",
				     tok->ms_repl);
		if (r < 0)
			return r;
		cur = bufs[which].p;
		cur_n = bufs[which].n;
		which ^= 1;
	}
	if (tok->bl_add_prefix_space && cur_n && cur[0] != ' ') {
		int r = replace_into(&bufs[which], cur, cur_n, " ", NULL, NULL);
		if (r < 0)
			return r;
		cur = bufs[which].p;
		cur_n = bufs[which].n;
	}
	*ret = cur;
	*ret_n = cur_n;
	return 0;
}

static int encode_segment(const struct allm_tokenizer *tok, const char *seg, size_t n,
			  bool at_start, struct nbuf bufs[2], struct allm_tok_bpe_scratch *scr,
			  struct allm_tok_ids *out)
{
	const char *text;
	size_t tn;
	int r;

	if (n == 0)
		return 0;
	r = normalize(tok, seg, n, at_start, bufs, &text, &tn);
	if (r < 0)
		return r;
	const uint8_t *s = (const uint8_t *)text;
	for (size_t i = 0; i < tn;) {
		size_t e = tn, l;
		uint32_t cp;
		if (tok->digits != ALLM_TOK_DIGITS_NONE) {
			/* Digits: a digit (or a run of them) is a piece; the split pattern
			 * runs on the text between digits, up to the next one */
			if (cls_at(s, tn, i, &l, &cp) == ALLM_UCLS_N) {
				e = tok->digits == ALLM_TOK_DIGITS_INDIVIDUAL ? i + l
									      : run_of(s, tn, i, ALLM_UCLS_N);
				if ((r = allm_tok_bpe_piece(tok, s + i, e - i, scr, out)) < 0)
					return r;
				i = e;
				continue;
			}
			for (e = i; e < tn && cls_at(s, tn, e, &l, &cp) != ALLM_UCLS_N;)
				e += l;
		}
		for (size_t end = e; i < end;) {
			e = piece_end(tok, s, end, i);
			r = allm_tok_bpe_piece(tok, s + i, e - i, scr, out);
			if (r < 0)
				return r;
			i = e;
		}
	}
	return 0;
}

/* True when the code point ending just before s[i] / starting at s[i] is a word
 * character, for single_word added tokens. */
static bool word_char_before(const uint8_t *s, size_t i)
{
	if (i == 0)
		return false;
	size_t k = i - 1, l;
	while (k > 0 && (s[k] & 0xC0) == 0x80)
		k--;
	uint32_t cp;
	l = allm_tok_utf8_next(s + k, i - k, &cp);
	(void)l;
	int c = allm_tok_uclass(cp);
	return c == ALLM_UCLS_L || c == ALLM_UCLS_N || cp == '_';
}

static bool word_char_at(const uint8_t *s, size_t n, size_t i)
{
	size_t l;
	uint32_t cp;
	int c = cls_at(s, n, i, &l, &cp);
	return c == ALLM_UCLS_L || c == ALLM_UCLS_N || (l && cp == '_');
}

static bool is_ascii_space(uint8_t c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The longest added token at s[i], or NULL. A special one is matched only when
 * parse_special, and never where it would cover a byte that plain marks (text a
 * user wrote). */
static const struct allm_tok_added *match_added(const struct allm_tokenizer *tok,
						const uint8_t *s, size_t n, size_t i, bool parse_special,
						const uint8_t *plain)
{
	for (uint32_t k = tok->added_first[s[i]]; k < tok->added_first[s[i] + 1]; k++) {
		const struct allm_tok_added *a = &tok->added[k];
		if ((a->special && !parse_special) || a->len > n - i || memcmp(s + i, a->content, a->len))
			continue;
		if (plain && a->special && memchr(plain + i, 1, a->len))
			continue;
		if (a->single_word &&
		    (word_char_before(s, i) || word_char_at(s, n, i + a->len)))
			continue;
		return a; /* bucket sorted longest first */
	}
	return NULL;
}

static int encode(const struct allm_tokenizer *tok, const char *text, size_t len, unsigned flags,
		  const uint8_t *plain, int32_t **ret_ids, size_t *ret_n, struct allm_err *err);

int allm_tokenizer_encode(const struct allm_tokenizer *tok, const char *text, size_t len,
			  bool add_special, int32_t **ret_ids, size_t *ret_n,
			  struct allm_err *err)
{
	unsigned flags = ALLM_TOK_ENCODE_PARSE_SPECIAL | (add_special ? ALLM_TOK_ENCODE_ADD_SPECIAL : 0);
	return encode(tok, text, len, flags, NULL, ret_ids, ret_n, err);
}

int allm_tokenizer_encode_flags(const struct allm_tokenizer *tok, const char *text, size_t len,
				unsigned flags, int32_t **ret_ids, size_t *ret_n, struct allm_err *err)
{
	return encode(tok, text, len, flags, NULL, ret_ids, ret_n, err);
}

int allm_tokenizer_encode_marked(const struct allm_tokenizer *tok, const char *text, size_t len,
				 bool add_special, const uint8_t *plain, int32_t **ret_ids,
				 size_t *ret_n, struct allm_err *err)
{
	unsigned flags = ALLM_TOK_ENCODE_PARSE_SPECIAL | (add_special ? ALLM_TOK_ENCODE_ADD_SPECIAL : 0);
	return encode(tok, text, len, flags, plain, ret_ids, ret_n, err);
}

/* The one encoder: plain as allm_tokenizer_encode_marked(), flags as _flags(). */
static int encode(const struct allm_tokenizer *tok, const char *text, size_t len, unsigned flags,
		  const uint8_t *plain, int32_t **ret_ids, size_t *ret_n, struct allm_err *err)
{
	const uint8_t *s = (const uint8_t *)text;
	bool add_special = flags & ALLM_TOK_ENCODE_ADD_SPECIAL;
	bool parse_special = flags & ALLM_TOK_ENCODE_PARSE_SPECIAL;
	struct allm_tok_ids out = { 0 };
	struct allm_tok_bpe_scratch scr = { 0 };
	struct nbuf bufs[2] = { { 0 }, { 0 } };
	int r = 0;

	size_t valid = allm_tok_utf8_valid_prefix(s, len);
	if (valid != len)
		return allm_err_set(err, -EILSEQ,
				    "tokenizer: invalid UTF-8 in input text at byte %zu (0x%02x)",
				    valid, s[valid]);
	for (size_t k = 0; add_special && k < tok->n_prefix && r == 0; k++)
		r = allm_tok_ids_push(&out, tok->prefix_ids[k]);

	size_t seg = 0, i = 0;
	while (r == 0 && i < len) {
		const struct allm_tok_added *a =
			tok->n_added ? match_added(tok, s, len, i, parse_special, plain) : NULL;
		if (!a) {
			i++;
			continue;
		}
		size_t start = i, end = i + a->len;
		while (a->lstrip && start > seg && is_ascii_space(s[start - 1]))
			start--;
		while (a->rstrip && end < len && is_ascii_space(s[end]))
			end++;
		r = encode_segment(tok, text + seg, start - seg, seg == 0, bufs, &scr, &out);
		if (r == 0)
			r = allm_tok_ids_push(&out, a->id);
		seg = i = end;
	}
	if (r == 0)
		r = encode_segment(tok, text + seg, len - seg, seg == 0, bufs, &scr, &out);
	for (size_t k = 0; add_special && k < tok->n_suffix && r == 0; k++)
		r = allm_tok_ids_push(&out, tok->suffix_ids[k]);

	allm_tok_bpe_scratch_fini(&scr);
	allm_free(bufs[0].p);
	allm_free(bufs[1].p);
	if (r < 0) {
		allm_free(out.v);
		return allm_err_set(err, r, "tokenizer: out of memory encoding %zu bytes", len);
	}
	*ret_ids = out.v;
	*ret_n = out.n;
	return 0;
}
