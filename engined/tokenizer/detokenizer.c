/* Decoding: the decoder a loader describes (struct allm_tok_dec_spec) turned into
 * bytes per id, whole-sequence decode and the streaming detokenizer.
 *
 * Every supported decoder chain reduces to: each id -> a fixed byte string (ByteLevel
 * inverse map, or Replace + ByteFallback), the strings concatenated (Fuse), invalid
 * UTF-8 replaced by U+FFFD, then up to strip_start leading spaces removed (Strip /
 * Metaspace). Because the per-id bytes do not depend on neighbours, the streaming
 * detokenizer only has to hold back an incomplete UTF-8 tail (at most 3 bytes) and
 * remember whether the text has started, and its output equals the whole decode. */
#include "tokenizer-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The bytes id decodes to, written to out (NULL: only measured); returns the length.
 * tmp: two buffers of tmp_cap bytes, enough for any token after the Replace steps. */
static size_t decode_token(const struct allm_tok_dec_spec *spec, const char *s, size_t n, char *out,
			   char *tmp[2])
{
	size_t k = 0;
	if (spec->byte_level) {
		const uint8_t *u = (const uint8_t *)s;
		for (size_t i = 0; i < n;) {
			uint32_t cp;
			i += allm_tok_utf8_next(u + i, n - i, &cp);
			int b = allm_tok_cp_to_byte(cp);
			if (b < 0) {
				/* Not a byte-level string (an added token): its own bytes, as HF. */
				if (out)
					memcpy(out, s, n);
				return n;
			}
			if (out)
				out[k] = (char)b;
			k++;
		}
		return k;
	}
	if (spec->byte_fallback && n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
		char hex[3] = { s[3], s[4], 0 }, *end;
		unsigned long v = strtoul(hex, &end, 16);
		if (*end == 0 && hex[0] != '+' && hex[0] != '-' && hex[0] != ' ') {
			if (out)
				out[0] = (char)v;
			return 1;
		}
	}
	/* Replace steps in order; each pattern is applied over the previous result. */
	const char *cur = s;
	size_t cur_n = n;
	for (size_t r = 0; r < spec->n_repl; r++) {
		size_t pl = strlen(spec->pat[r]), rl = strlen(spec->rep[r]), j = 0;
		char *dst = tmp[r & 1];
		for (size_t i = 0; i < cur_n;) {
			if (i + pl <= cur_n && !memcmp(cur + i, spec->pat[r], pl)) {
				memcpy(dst + j, spec->rep[r], rl);
				j += rl;
				i += pl;
			} else {
				dst[j++] = cur[i++];
			}
		}
		cur = dst;
		cur_n = j;
	}
	if (out)
		memcpy(out, cur, cur_n);
	return cur_n;
}

int allm_tok_build_decoder(struct allm_tokenizer *tok, const struct allm_tok_dec_spec *spec,
			   struct allm_err *err)
{
	const char **src = NULL;
	char *tmp[2] = { NULL, NULL };
	size_t total = 0, i, max_len = 0, grow = 1;
	int r = 0;

	/* Added tokens decode from their content (HF looks them up first). */
	src = allm_malloc((size_t)tok->n_ids * sizeof(*src));
	tok->dec_off = allm_malloc(((size_t)tok->n_ids + 1) * sizeof(*tok->dec_off));
	if (!src || !tok->dec_off) {
		r = allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
		goto out;
	}
	for (int32_t id = 0; id < tok->n_ids; id++)
		src[id] = tok->tokens[id];
	for (i = 0; i < tok->n_added; i++)
		src[tok->added[i].id] = tok->added[i].content;
	/* Replace can grow a token by at most the longest content per pattern byte. */
	for (int32_t id = 0; id < tok->n_ids; id++)
		max_len = ALLM_MAX(max_len, src[id] ? strlen(src[id]) : 0);
	for (i = 0; i < spec->n_repl; i++)
		grow *= ALLM_MAX(1, strlen(spec->rep[i]));
	tmp[0] = allm_malloc(max_len * grow + 1);
	tmp[1] = allm_malloc(max_len * grow + 1);
	if (!tmp[0] || !tmp[1] || grow > 4096) {
		r = allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
		goto out;
	}
	for (int32_t id = 0; id < tok->n_ids; id++) {
		size_t n = src[id] ? decode_token(spec, src[id], strlen(src[id]), NULL, tmp) : 0;
		tok->dec_off[id] = total;
		total += n;
		tok->max_dec_len = ALLM_MAX(tok->max_dec_len, (uint32_t)n);
	}
	tok->dec_off[tok->n_ids] = total;
	tok->dec = allm_malloc(total ? total : 1);
	if (!tok->dec) {
		r = allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
		goto out;
	}
	for (int32_t id = 0; id < tok->n_ids; id++)
		if (src[id])
			decode_token(spec, src[id], strlen(src[id]), tok->dec + tok->dec_off[id], tmp);
out:
	allm_free(tmp[0]);
	allm_free(tmp[1]);
	allm_free(src);
	return r;
}

/* Appends lossy UTF-8 of s[0..n) to out (room for 3 * n bytes needed): each maximal
 * ill-formed subpart becomes U+FFFD, as Rust's String::from_utf8_lossy. Unless
 * final, stops before a trailing sequence that is valid so far but incomplete.
 * Returns the bytes consumed; *out_n grows by the bytes written. */
static size_t lossy_utf8(const uint8_t *s, size_t n, bool final, char *out, size_t *out_n)
{
	size_t i = 0, k = *out_n;
	while (i < n) {
		uint8_t c = s[i];
		size_t len = 0, m = 1;
		uint8_t lo = 0x80, hi = 0xBF;
		if (c < 0x80) {
			out[k++] = (char)c;
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			len = 2;
		else if (c >= 0xE0 && c <= 0xEF)
			len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
		else if (c >= 0xF0 && c <= 0xF4)
			len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
		while (len && m < len && i + m < n &&
		       (m == 1 ? (s[i + 1] >= lo && s[i + 1] <= hi) : (s[i + m] & 0xC0) == 0x80))
			m++;
		if (len && m == len) {
			memcpy(out + k, s + i, len);
			k += len;
		} else if (len && i + m == n && !final) {
			break; /* may still complete */
		} else {
			memcpy(out + k, "\xEF\xBF\xBD", 3);
			k += 3;
		}
		i += m;
	}
	*out_n = k;
	return i;
}

static int check_ids(const struct allm_tokenizer *tok, const int32_t *ids, size_t n,
		     struct allm_err *err)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= tok->n_ids)
			return allm_err_set(err, -EINVAL, "tokenizer: decode: id %d at position %zu is outside [0, %d)",
					    ids[i], i, tok->n_ids);
	return 0;
}

int allm_tokenizer_decode(const struct allm_tokenizer *tok, const int32_t *ids, size_t n,
			  bool skip_special, char **ret_text, struct allm_err *err)
{
	size_t total = 0, k = 0, out_n = 0;
	int r = check_ids(tok, ids, n, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		total += tok->dec_off[ids[i] + 1] - tok->dec_off[ids[i]] + 1;
	char *raw = allm_malloc(total + 1), *text = allm_malloc(3 * total + 1);
	if (!raw || !text) {
		allm_free(raw);
		allm_free(text);
		return allm_err_set(err, -ENOMEM, "tokenizer: out of memory decoding %zu ids", n);
	}
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		if (skip_special && (tok->flags[ids[i]] & ALLM_TOKF_SPECIAL))
			continue;
		if (tok->join_space && !first)
			raw[k++] = ' ';
		first = false;
		size_t len = tok->dec_off[ids[i] + 1] - tok->dec_off[ids[i]];
		memcpy(raw + k, tok->dec + tok->dec_off[ids[i]], len);
		k += len;
	}
	size_t skip = 0;
	while (skip < tok->strip_start && skip < k && raw[skip] == tok->strip_char)
		skip++;
	lossy_utf8((const uint8_t *)raw + skip, k - skip, true, text, &out_n);
	text[out_n] = 0;
	allm_free(raw);
	*ret_text = text;
	return 0;
}

struct allm_detok {
	const struct allm_tokenizer *tok;
	bool skip_special;
	bool started;      /* a non-stripped byte has been produced */
	uint32_t stripped; /* leading strip_char removed so far */
	size_t n_seen;     /* tokens emitted (for join_space) */
	uint8_t pend[4];   /* incomplete UTF-8 tail held back */
	size_t n_pend;
	uint8_t *work;     /* pend + separator + token bytes */
	char *text;        /* lossy output before it is copied to the caller */
};

size_t allm_detok_piece_cap(const struct allm_tokenizer *tok)
{
	return 3 * ((size_t)tok->max_dec_len + 8) + 1;
}

const char *allm_tokenizer_token_bytes(const struct allm_tokenizer *tok, int32_t id, size_t *ret_len)
{
	if (id < 0 || id >= tok->n_ids)
		return NULL;
	*ret_len = (size_t)(tok->dec_off[id + 1] - tok->dec_off[id]);
	return tok->dec + tok->dec_off[id];
}

size_t allm_tokenizer_max_token_bytes(const struct allm_tokenizer *tok)
{
	return tok->max_dec_len;
}

int allm_detok_create(const struct allm_tokenizer *tok, bool skip_special,
		      struct allm_detok **ret)
{
	struct allm_detok *d = allm_calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->tok = tok;
	d->skip_special = skip_special;
	d->work = allm_malloc((size_t)tok->max_dec_len + 8);
	d->text = allm_malloc(allm_detok_piece_cap(tok));
	if (!d->work || !d->text) {
		allm_detok_free(d);
		return -ENOMEM;
	}
	*ret = d;
	return 0;
}

void allm_detok_free(struct allm_detok *d)
{
	if (!d)
		return;
	allm_free(d->work);
	allm_free(d->text);
	allm_free(d);
}

/* Decodes work[0..n) (final: flush) and commits the state only when the text fits
 * in out, so -ENOSPC leaves the stream as it was. */
static int emit(struct allm_detok *d, size_t n, bool final, bool token, char *out,
		size_t out_cap)
{
	const struct allm_tokenizer *tok = d->tok;
	size_t skip = 0, out_n = 0;
	uint32_t stripped = d->stripped;
	bool started = d->started;

	while (!started && stripped < tok->strip_start && skip < n && d->work[skip] == tok->strip_char) {
		skip++;
		stripped++;
	}
	if (skip < n)
		started = true;
	size_t used = lossy_utf8(d->work + skip, n - skip, final, d->text, &out_n);
	if (out_n + 1 > out_cap)
		return -ENOSPC;
	memcpy(out, d->text, out_n);
	out[out_n] = 0;
	d->n_pend = n - skip - used;
	memmove(d->pend, d->work + skip + used, d->n_pend);
	d->stripped = stripped;
	d->started = started;
	d->n_seen += token;
	return (int)out_n;
}

int allm_detok_push(struct allm_detok *d, int32_t id, char *out, size_t out_cap)
{
	const struct allm_tokenizer *tok = d->tok;
	size_t n = 0;

	if (id < 0 || id >= tok->n_ids)
		return -EINVAL;
	if (d->skip_special && (tok->flags[id] & ALLM_TOKF_SPECIAL)) {
		if (out_cap < 1)
			return -ENOSPC;
		out[0] = 0;
		return 0;
	}
	memcpy(d->work, d->pend, d->n_pend);
	n = d->n_pend;
	if (tok->join_space && d->n_seen)
		d->work[n++] = ' ';
	size_t len = tok->dec_off[id + 1] - tok->dec_off[id];
	memcpy(d->work + n, tok->dec + tok->dec_off[id], len);
	return emit(d, n + len, false, true, out, out_cap);
}

int allm_detok_prime(struct allm_detok *d, const int32_t *ids, size_t n)
{
	size_t cap = allm_detok_piece_cap(d->tok);
	char *buf = allm_malloc(cap);
	int r = 0;
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n && r >= 0; i++)
		r = allm_detok_push(d, ids[i], buf, cap); /* the prompt's own text: dropped */
	allm_free(buf);
	return r < 0 ? r : 0;
}

int allm_detok_flush(struct allm_detok *d, char *out, size_t out_cap)
{
	memcpy(d->work, d->pend, d->n_pend);
	int r = emit(d, d->n_pend, true, false, out, out_cap);
	if (r >= 0) {
		d->started = false;
		d->stripped = 0;
		d->n_seen = 0;
		d->n_pend = 0;
	}
	return r;
}
