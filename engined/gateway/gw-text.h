/* Generated text as the OpenAI API returns it: `stop` strings are matched on the
 * detokenized text (not on tokens), the text ends just before the stop string that
 * the stream completes first (whatever pieces it came in), and
 * a stream holds back a tail that could still grow into a stop string so it never
 * sends half of one.
 *
 * Plain data, no locking (the caller's). */
#ifndef ALLM_GW_TEXT_H
#define ALLM_GW_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Most stop strings per request and bytes per stop string (bounds the matching
 * work a request can ask for). */
#define GW_MAX_STOPS 16
#define GW_MAX_STOP_LEN 256

struct gw_stops {
	char *s[GW_MAX_STOPS];
	size_t len[GW_MAX_STOPS];
	int n;
	size_t max_len; /* longest stop string */
};

/* Copies n bytes (1..GW_MAX_STOP_LEN) as one more stop string. 0, -E2BIG (too many
 * or too long), -EINVAL (empty), -ENOMEM. */
int gw_stops_add(struct gw_stops *st, const char *s, size_t n);
void gw_stops_free(struct gw_stops *st);
/* A deep copy of src into dst (empty). 0 or -ENOMEM (dst then empty). */
int gw_stops_copy(struct gw_stops *dst, const struct gw_stops *src);

struct gw_text {
	char *buf;
	size_t len, cap;
	size_t ready;  /* buf[0, ready) is final: no stop string can start in it */
	bool stopped;  /* a stop string matched: buf holds the text before it, all ready */
	size_t *ends;  /* where each appended piece (a token's text) ends in buf, increasing */
	size_t n_ends, ends_cap;
};

/* Appends one piece of n bytes, n may be 0 (after a stop, nothing more is taken).
 * Returns 1 when this append completed a stop string, 0 otherwise, -ENOMEM. */
int gw_text_append(struct gw_text *t, const struct gw_stops *st, const char *p, size_t n);
/* The stream ended without a stop: the held-back tail is final too. */
void gw_text_finish(struct gw_text *t);
/* The pieces of buf[0, ready): their ends, non-decreasing (an empty piece is a
 * token whose text has not come yet, or a model without a tokenizer), the last one
 * == ready when ready > 0 (a piece cut by the hold-back ends there; its rest comes
 * with the next). Returns how many (<= n_ends + 1), written to ret. */
size_t gw_text_pieces(const struct gw_text *t, size_t *ret);
/* Drops buf[0, ready) (the caller has sent it), keeping the held-back tail. */
void gw_text_consume(struct gw_text *t);
void gw_text_free(struct gw_text *t);

#endif
