/* Stop strings over streamed text (gw-text.h). A match cannot start before
 * `ready`: every tail that was a prefix of some stop string was held back, and a
 * match starting earlier would have made a longer such tail. */
#include "gw-text.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int gw_stops_add(struct gw_stops *st, const char *s, size_t n)
{
	if (n == 0)
		return -EINVAL;
	if (st->n == GW_MAX_STOPS || n > GW_MAX_STOP_LEN)
		return -E2BIG;
	char *c = malloc(n);
	if (!c)
		return -ENOMEM;
	memcpy(c, s, n);
	st->s[st->n] = c;
	st->len[st->n++] = n;
	if (n > st->max_len)
		st->max_len = n;
	return 0;
}

void gw_stops_free(struct gw_stops *st)
{
	for (int i = 0; i < st->n; i++)
		free(st->s[i]);
	memset(st, 0, sizeof(*st));
}

int gw_stops_copy(struct gw_stops *dst, const struct gw_stops *src)
{
	memset(dst, 0, sizeof(*dst));
	for (int i = 0; i < src->n; i++)
		if (gw_stops_add(dst, src->s[i], src->len[i])) {
			gw_stops_free(dst);
			return -ENOMEM;
		}
	return 0;
}

/* True when the n bytes at p are a proper prefix of some stop string. */
static bool prefix_of_stop(const struct gw_stops *st, const char *p, size_t n)
{
	for (int i = 0; i < st->n; i++)
		if (st->len[i] > n && !memcmp(st->s[i], p, n))
			return true;
	return false;
}

int gw_text_append(struct gw_text *t, const struct gw_stops *st, const char *p, size_t n)
{
	if (t->stopped)
		return 0;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 256;
		while (cap < t->len + n + 1)
			cap *= 2;
		char *b = realloc(t->buf, cap);
		if (!b)
			return -ENOMEM;
		t->buf = b;
		t->cap = cap;
	}
	if (t->n_ends == t->ends_cap) {
		size_t cap = t->ends_cap ? t->ends_cap * 2 : 64;
		size_t *e = realloc(t->ends, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		t->ends = e;
		t->ends_cap = cap;
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
	t->ends[t->n_ends++] = t->len;
	if (st->n == 0) {
		t->ready = t->len;
		return 0;
	}
	/* the match that ends first (the stop the stream completes first; on a tie
	 * the longer one), so any split of the text into pieces stops at one place */
	size_t best = t->len, best_end = SIZE_MAX;
	for (int i = 0; i < st->n; i++) {
		size_t l = st->len[i];
		for (size_t at = t->ready; at + l <= t->len && at + l <= best_end; at++)
			if (!memcmp(t->buf + at, st->s[i], l)) {
				if (at + l < best_end || at < best) {
					best = at;
					best_end = at + l;
				}
				break;
			}
	}
	if (best_end != SIZE_MAX) {
		t->len = t->ready = best;
		t->stopped = true;
		while (t->n_ends && t->ends[t->n_ends - 1] > best)
			t->n_ends--;
		if (best > 0 && (!t->n_ends || t->ends[t->n_ends - 1] < best))
			t->ends[t->n_ends++] = best; /* the piece the stop string cut */
		return 1;
	}
	/* hold back the longest tail that may still become a stop string */
	size_t keep = t->len - t->ready;
	if (keep > st->max_len - 1)
		keep = st->max_len - 1;
	for (; keep > 0; keep--)
		if (prefix_of_stop(st, t->buf + t->len - keep, keep))
			break;
	t->ready = t->len - keep;
	return 0;
}

void gw_text_finish(struct gw_text *t)
{
	t->ready = t->len;
}

size_t gw_text_pieces(const struct gw_text *t, size_t *ret)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n_ends && t->ends[i] <= t->ready; i++)
		ret[n++] = t->ends[i]; /* empty pieces too: a token without text yet */
	if (t->ready > (n ? ret[n - 1] : 0))
		ret[n++] = t->ready;
	return n;
}

void gw_text_consume(struct gw_text *t)
{
	size_t k = 0;
	for (size_t i = 0; i < t->n_ends; i++)
		if (t->ends[i] > t->ready)
			t->ends[k++] = t->ends[i] - t->ready;
	t->n_ends = k;
	memmove(t->buf, t->buf + t->ready, t->len - t->ready);
	t->len -= t->ready;
	t->ready = 0;
}

void gw_text_free(struct gw_text *t)
{
	free(t->buf);
	free(t->ends);
	memset(t, 0, sizeof(*t));
}
