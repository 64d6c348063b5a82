/* Unicode normalization form C, the "NFC" normalizer of tokenizer.json (Qwen2's):
 * canonical decomposition, canonical ordering of combining marks, canonical
 * composition, as UAX #15 defines them, with the tables gen-nfc-tables.py writes from
 * Python's unicodedata (Unicode 14.0, as tokenizer-unicode.c). Hangul syllables are
 * decomposed and composed arithmetically. Text whose code points are all below
 * U+0300 is already NFC (nothing there combines with what precedes it) and is copied
 * as is: the common case costs one scan. */
#include "tokenizer-internal.h"

#include <errno.h>

#include "tokenizer-nfc-tables.h"

enum {
	S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
	L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT,
};

static uint8_t ccc(uint32_t cp)
{
	size_t lo = 0, hi = ALLM_ARRAY_SIZE(nfc_ccc);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cp < nfc_ccc[mid].lo)
			hi = mid;
		else if (cp > nfc_ccc[mid].hi)
			lo = mid + 1;
		else
			return nfc_ccc[mid].ccc;
	}
	return 0;
}

static const struct nfc_decomp *decomp(uint32_t cp)
{
	size_t lo = 0, hi = ALLM_ARRAY_SIZE(nfc_decomp);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cp < nfc_decomp[mid].cp)
			hi = mid;
		else if (cp > nfc_decomp[mid].cp)
			lo = mid + 1;
		else
			return &nfc_decomp[mid];
	}
	return NULL;
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
	if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
		return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
	if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
	    b < T_BASE + T_COUNT)
		return a + (b - T_BASE);
	size_t lo = 0, hi = ALLM_ARRAY_SIZE(nfc_comp);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct nfc_comp *c = &nfc_comp[mid];
		if (a < c->a || (a == c->a && b < c->b))
			hi = mid;
		else if (a > c->a || b > c->b)
			lo = mid + 1;
		else
			return c->c;
	}
	return 0;
}

static size_t put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

int allm_tok_nfc(const char *s, size_t n, char **buf, size_t *cap, size_t *ret_n)
{
	const uint8_t *u = (const uint8_t *)s;
	uint32_t *cps = NULL, cp;
	size_t m = 0, i;
	bool plain = true;
	for (i = 0; i < n && plain; i += allm_tok_utf8_next(u + i, n - i, &cp))
		plain = u[i] < 0xCC; /* lead bytes from 0xCC start code points >= U+0300 */
	/* a full decomposition is at most 4 code points; UTF-8 at most 4 bytes each,
	 * and composition only shortens */
	size_t need = plain ? n + 1 : 16 * n + 1;
	if (need > *cap) {
		char *p = allm_realloc(*buf, need);
		if (!p)
			return -ENOMEM;
		*buf = p;
		*cap = need;
	}
	if (plain) {
		memcpy(*buf, s, n);
		*ret_n = n;
		return 0;
	}
	cps = allm_malloc(4 * n * sizeof(*cps));
	if (!cps)
		return -ENOMEM;
	for (i = 0; i < n;) { /* decompose */
		i += allm_tok_utf8_next(u + i, n - i, &cp);
		const struct nfc_decomp *d;
		if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
			uint32_t k = cp - S_BASE;
			cps[m++] = L_BASE + k / N_COUNT;
			cps[m++] = V_BASE + k % N_COUNT / T_COUNT;
			if (k % T_COUNT)
				cps[m++] = T_BASE + k % T_COUNT;
		} else if ((d = decomp(cp))) {
			memcpy(cps + m, nfc_pool + d->off, d->len * sizeof(*cps));
			m += d->len;
		} else {
			cps[m++] = cp;
		}
	}
	for (i = 1; i < m; i++) { /* canonical order: a stable sort of each run of marks */
		uint8_t c = ccc(cps[i]);
		for (size_t k = i; c && k > 0 && ccc(cps[k - 1]) > c; k--) {
			uint32_t t = cps[k];
			cps[k] = cps[k - 1];
			cps[k - 1] = t;
		}
	}
	/* compose: each mark joins the last starter unless a mark of the same or a
	 * higher class (or a starter) stands between them */
	size_t out = m ? 1 : 0, starter = 0;
	int last = m && ccc(cps[0]) ? 256 : 0;
	for (i = 1; i < m; i++) {
		uint8_t c = ccc(cps[i]);
		uint32_t comp = last != 256 ? compose(cps[starter], cps[i]) : 0;
		if (comp && (last < c || last == 0)) {
			cps[starter] = comp;
			continue;
		}
		if (c == 0)
			starter = out;
		last = c;
		cps[out++] = cps[i];
	}
	size_t k = 0;
	for (i = 0; i < out; i++)
		k += put_utf8(*buf + k, cps[i]);
	*ret_n = k;
	allm_free(cps);
	return 0;
}
