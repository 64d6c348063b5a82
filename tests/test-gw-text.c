/* Description: the gateway's stop strings (engined/gateway/gw-text.c): text before the first match, nothing of a stop string ever released early, across any split into pieces, against a direct search over the whole text. */
#include "gw-text.h"
#include "test-check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void add(struct gw_stops *st, const char *s)
{
	if (gw_stops_add(st, s, strlen(s)))
		abort();
}

static void feed(struct gw_text *t, struct gw_stops *st, const char *s)
{
	gw_text_append(t, st, s, strlen(s));
}

static void basics(void)
{
	struct gw_stops st = {0};
	struct gw_text t = {0};
	feed(&t, &st, "no stops");
	CHECK(t.ready == 8 && !t.stopped, "without stops everything is ready");
	gw_text_free(&t);

	add(&st, "END");
	feed(&t, &st, "abcE");
	CHECK(t.ready == 3, "an 'E' that may start END is held back (ready %zu)", t.ready);
	feed(&t, &st, "N");
	CHECK(t.ready == 3 && !t.stopped, "'EN' still held");
	CHECK(gw_text_append(&t, &st, "Dxyz", 4) == 1, "END completes a stop");
	CHECK(t.stopped && t.len == 3 && !memcmp(t.buf, "abc", 3), "text ends before the stop");
	CHECK(gw_text_append(&t, &st, "more", 4) == 0 && t.len == 3, "nothing after a stop");
	gw_text_free(&t);

	feed(&t, &st, "xEN");
	feed(&t, &st, "x");
	CHECK(t.ready == t.len && t.len == 4, "a held prefix that did not become a stop is released");
	feed(&t, &st, "E");
	gw_text_finish(&t);
	CHECK(t.ready == 5, "the end releases the held tail");
	gw_text_free(&t);

	feed(&t, &st, "12E");
	gw_text_consume(&t);
	CHECK(t.len == 1 && t.ready == 0 && t.buf[0] == 'E', "consume keeps the held tail");
	CHECK(gw_text_append(&t, &st, "ND", 2) == 1 && t.len == 0, "a stop across a consume");
	gw_text_free(&t);
	gw_stops_free(&st);

	/* the stop completed first wins, in one piece or many */
	add(&st, "lo");
	add(&st, "hello there");
	feed(&t, &st, "say hello there");
	CHECK(t.stopped && t.len == 7, "'lo' ends before 'hello there' (len %zu)", t.len);
	gw_text_free(&t);
	add(&st, "hel");
	feed(&t, &st, "say he");
	feed(&t, &st, "llo");
	CHECK(t.stopped && t.len == 4, "'hel' ends before 'lo' (len %zu)", t.len);
	gw_text_free(&t);
	gw_stops_free(&st);

	/* multi-byte UTF-8 */
	add(&st, "\xc3\xa9!");
	feed(&t, &st, "caf\xc3");
	CHECK(t.ready == 3, "the first byte of an e-acute is held");
	feed(&t, &st, "\xa9!");
	CHECK(t.stopped && t.len == 3, "stop on e-acute + !");
	gw_text_free(&t);
	gw_stops_free(&st);

	CHECK(gw_stops_add(&st, "", 0) != 0, "an empty stop string is refused");
	char big[GW_MAX_STOP_LEN + 1];
	memset(big, 'a', sizeof(big));
	CHECK(gw_stops_add(&st, big, sizeof(big)) != 0, "a stop string over the limit is refused");
	for (int i = 0; i < GW_MAX_STOPS; i++)
		CHECK(gw_stops_add(&st, "x", 1) == 0, "stop %d", i);
	CHECK(gw_stops_add(&st, "x", 1) != 0, "more than GW_MAX_STOPS is refused");
	gw_stops_free(&st);
}

/* Random texts over a small alphabet, random stop strings, random splits: the
 * result equals a search over the whole text, and what was ready at any moment
 * is a prefix of the final text (nothing released is ever taken back). */
static void random_splits(void)
{
	unsigned seed = 12345;
	for (int iter = 0; iter < 20000; iter++) {
		char text[64], final[64];
		struct gw_stops st = {0};
		struct gw_text t = {0};
		int n = 1 + rand_r(&seed) % 40, ns = 1 + rand_r(&seed) % 3;
		for (int i = 0; i < n; i++)
			text[i] = "ab"[rand_r(&seed) % 2];
		text[n] = 0;
		for (int s = 0; s < ns; s++) {
			char stop[8];
			int l = 1 + rand_r(&seed) % 4;
			for (int i = 0; i < l; i++)
				stop[i] = "ab"[rand_r(&seed) % 2];
			gw_stops_add(&st, stop, (size_t)l);
		}
		/* the reference, byte by byte: the first end position where a stop string
		 * ends; of those ending there, the one starting first */
		int cut = n;
		for (int end = 1; end <= n && cut == n; end++)
			for (int s = 0; s < st.n; s++) {
				int at = end - (int)st.len[s];
				if (at >= 0 && !memcmp(text + at, st.s[s], st.len[s]) && at < cut)
					cut = at;
			}
		memcpy(final, text, (size_t)cut);
		char released[64];
		size_t rel = 0;
		for (int i = 0; i < n && !t.stopped;) {
			int k = 1 + rand_r(&seed) % 5;
			if (i + k > n)
				k = n - i;
			gw_text_append(&t, &st, text + i, (size_t)k);
			i += k;
			/* what is ready now must stay: compare with everything released so far */
			memcpy(released + rel, t.buf, t.ready);
			if (rand_r(&seed) % 2) {
				rel += t.ready;
				gw_text_consume(&t);
			}
			if (rel > (size_t)cut || memcmp(released, final, rel)) {
				CHECK(0, "iter %d: released text is not a prefix of the result", iter);
				break;
			}
		}
		if (!t.stopped)
			gw_text_finish(&t);
		memcpy(released + rel, t.buf, t.ready);
		rel += t.ready;
		CHECK(rel == (size_t)cut && !memcmp(released, final, rel),
		      "iter %d: '%s' -> %zu bytes, want %d", iter, text, rel, cut);
		CHECK(t.stopped == (cut < n), "iter %d: stopped flag", iter);
		gw_text_free(&t);
		gw_stops_free(&st);
		if (n_fail > 10)
			return;
	}
}

int main(void)
{
	basics();
	random_splits();
	if (n_fail) {
		printf("%d failures\n", n_fail);
		return 1;
	}
	printf("gw-text: all checks passed\n");
	return 0;
}
