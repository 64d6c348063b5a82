/* The grammar's life: the vocabulary, compiling each kind of source through
 * GBNF, references, and the cache of compiled grammars by hash. */
#include "grammar-internal.h"

#include "sha256.h"
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* --- text buffer ------------------------------------------------------------- */

void sbuf_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = allm_realloc(b->s, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = 0;
}

void sbuf_puts(struct sbuf *b, const char *s)
{
	sbuf_put(b, s, strlen(s));
}

void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->oom = true; /* callers format short pieces only */
		return;
	}
	sbuf_put(b, tmp, (size_t)n);
}

void sbuf_gbnf_literal(struct sbuf *b, const char *s, size_t n)
{
	sbuf_put(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			sbuf_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7F)
			sbuf_printf(b, "\\x%02X", c);
		else
			sbuf_put(b, (const char *)&c, 1);
	}
	sbuf_put(b, "\"", 1);
}

void sbuf_fini(struct sbuf *b)
{
	allm_free(b->s);
	memset(b, 0, sizeof(*b));
}

/* --- vocabulary -------------------------------------------------------------- */

static const struct allm_grammar_vocab *sort_vocab;

static int by_bytes(const void *a, const void *b)
{
	const struct allm_grammar_vocab *v = sort_vocab;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	uint32_t lx = vocab_len(v, x), ly = vocab_len(v, y);
	int c = memcmp(v->data + v->off[x], v->data + v->off[y], lx < ly ? lx : ly);
	if (c)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

int allm_grammar_vocab_create(int32_t n_ids, const uint8_t *const *bytes, const uint32_t *len,
			      struct allm_grammar_vocab **ret)
{
	if (n_ids <= 0)
		return -EINVAL;
	struct allm_grammar_vocab *v = allm_calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t total = 0;
	for (int32_t i = 0; i < n_ids; i++)
		total += bytes[i] ? len[i] : 0;
	v->n_ids = n_ids;
	v->data = allm_malloc(total + 1);
	v->off = allm_malloc(((size_t)n_ids + 1) * sizeof(uint32_t));
	v->sorted = allm_malloc((size_t)n_ids * sizeof(int32_t));
	v->lcp = allm_malloc((size_t)n_ids * sizeof(uint32_t));
	if (!v->data || !v->off || !v->sorted || !v->lcp || total > UINT32_MAX) {
		allm_grammar_vocab_free(v);
		return -ENOMEM;
	}
	uint32_t k = 0;
	for (int32_t i = 0; i < n_ids; i++) {
		v->off[i] = k;
		uint32_t l = bytes[i] ? len[i] : 0;
		memcpy(v->data + k, bytes[i] ? bytes[i] : (const uint8_t *)"", l);
		k += l;
		if (l) {
			v->sorted[v->n_sorted++] = i;
			if (l > v->max_len)
				v->max_len = l;
		}
	}
	v->off[n_ids] = k;
	/* the sort runs once per model, before any request */
	sort_vocab = v;
	qsort(v->sorted, (size_t)v->n_sorted, sizeof(int32_t), by_bytes);
	sort_vocab = NULL;
	v->sdata = allm_malloc((size_t)k + 1);
	v->soff = allm_malloc(((size_t)v->n_sorted + 1) * sizeof(uint32_t));
	if (!v->sdata || !v->soff) {
		allm_grammar_vocab_free(v);
		return -ENOMEM;
	}
	for (int32_t j = 0, at = 0; j <= v->n_sorted; j++) {
		v->soff[j] = (uint32_t)at;
		if (j == v->n_sorted)
			break;
		uint32_t l = vocab_len(v, v->sorted[j]);
		memcpy(v->sdata + at, v->data + v->off[v->sorted[j]], l);
		at += (int32_t)l;
	}
	for (int32_t j = 0; j < v->n_sorted; j++) {
		uint32_t l = 0;
		if (j > 0) {
			int32_t a = v->sorted[j - 1], b = v->sorted[j];
			uint32_t la = vocab_len(v, a), lb = vocab_len(v, b);
			while (l < la && l < lb && v->data[v->off[a] + l] == v->data[v->off[b] + l])
				l++;
		}
		v->lcp[j] = l;
	}
	*ret = v;
	return 0;
}

int allm_grammar_vocab_from_tokenizer(const struct allm_tokenizer *tok, struct allm_grammar_vocab **ret)
{
	int32_t n = allm_tokenizer_vocab_size(tok);
	if (n <= 0)
		return -EINVAL;
	const uint8_t **bytes = allm_calloc((size_t)n, sizeof(*bytes));
	uint32_t *len = allm_calloc((size_t)n, sizeof(*len));
	int rc = -ENOMEM;
	if (bytes && len) {
		for (int32_t i = 0; i < n; i++) {
			size_t l = 0;
			const char *b = allm_tokenizer_token_bytes(tok, i, &l);
			if (b && !allm_tokenizer_is_special(tok, i)) {
				bytes[i] = (const uint8_t *)b;
				len[i] = (uint32_t)l;
			}
		}
		rc = allm_grammar_vocab_create(n, bytes, len, ret);
	}
	allm_free(bytes);
	allm_free(len);
	return rc;
}

void allm_grammar_vocab_free(struct allm_grammar_vocab *v)
{
	if (!v)
		return;
	allm_free(v->data);
	allm_free(v->off);
	allm_free(v->sorted);
	allm_free(v->lcp);
	allm_free(v->sdata);
	allm_free(v->soff);
	allm_free(v);
}

int32_t allm_grammar_vocab_size(const struct allm_grammar_vocab *v)
{
	return v->n_ids;
}

/* --- sources to GBNF ---------------------------------------------------------- */

/* A choice: a JSON array of strings, one of which is generated. */
static int choice_to_gbnf(const char *text, size_t len, struct sbuf *out, struct allm_err *err)
{
	json_error_t je;
	json_t *a = json_loadb(text, len, JSON_DECODE_ANY, &je);
	int rc = 0;
	if (!a) {
		rc = allm_err_set(err, -EINVAL, "choice: line %d col %d: %s", je.line, je.column, je.text);
		goto out;
	}
	if (!json_is_array(a) || json_array_size(a) == 0) {
		rc = allm_err_set(err, -EINVAL, "choice: want a non-empty JSON array of strings");
		goto out;
	}
	sbuf_puts(out, "root ::= ");
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *s = json_array_get(a, i);
		if (!json_is_string(s)) {
			rc = allm_err_set(err, -EINVAL, "choice: item %zu is not a string", i);
			goto out;
		}
		if (i)
			sbuf_puts(out, " | ");
		sbuf_gbnf_literal(out, json_string_value(s), json_string_length(s));
	}
	sbuf_puts(out, "\n");
out:
	json_decref(a);
	return rc;
}

int allm_grammar_to_gbnf(int kind, const char *text, size_t len, char **ret, struct allm_err *err)
{
	struct sbuf b = { 0 };
	int rc = 0;
	if (len > ALLM_GRAMMAR_TEXT_MAX)
		return allm_err_set(err, -E2BIG, "grammar text of %zu bytes (at most %u)", len, ALLM_GRAMMAR_TEXT_MAX);
	switch (kind) {
	case ALLM_GRAMMAR_GBNF:
		sbuf_put(&b, text, len);
		break;
	case ALLM_GRAMMAR_JSON_SCHEMA:
		rc = allm_json_schema_to_gbnf(text, len, &b, err);
		break;
	case ALLM_GRAMMAR_REGEX:
		sbuf_puts(&b, "root ::= ");
		rc = allm_regex_to_gbnf(text, len, false, &b, err);
		sbuf_puts(&b, "\n");
		break;
	case ALLM_GRAMMAR_CHOICE:
		rc = choice_to_gbnf(text, len, &b, err);
		break;
	case ALLM_GRAMMAR_JSON_OBJECT:
		if (len)
			return allm_err_set(err, -EINVAL, "grammar kind json_object takes no text (got %zu bytes)", len);
		sbuf_puts(&b, "root ::= json-object\n");
		allm_json_any_gbnf(&b);
		break;
	default:
		return allm_err_set(err, -EINVAL, "unknown grammar kind %d", kind);
	}
	if (!rc && b.oom)
		rc = allm_err_set(err, -ENOMEM, "out of memory writing a grammar");
	if (!rc && b.n > ALLM_GRAMMAR_GBNF_MAX)
		rc = allm_err_set(err, -E2BIG, "the grammar expands to %zu bytes of GBNF (at most %u)", b.n,
				  ALLM_GRAMMAR_GBNF_MAX);
	if (!rc && !b.s)
		sbuf_puts(&b, "");
	if (rc || b.oom) {
		sbuf_fini(&b);
		return rc ? rc : allm_err_set(err, -ENOMEM, "out of memory");
	}
	*ret = b.s;
	return 0;
}

int allm_grammar_compile(int kind, const char *text, size_t len, const struct allm_grammar_vocab *v,
			 struct allm_grammar **ret, struct allm_err *err)
{
	char *gbnf = NULL;
	int rc = allm_grammar_to_gbnf(kind, text, len, &gbnf, err);
	if (rc)
		return rc;
	struct allm_grammar *g = NULL;
	rc = allm_gbnf_compile(gbnf, strlen(gbnf), &g, err);
	if (!rc && kind == ALLM_GRAMMAR_GBNF && memchr(text, 0, len))
		rc = allm_err_set(err, -EINVAL, "GBNF: a NUL byte in the text");
	allm_free(gbnf);
	if (!rc && allm_grammar_min_lengths(g))
		rc = allm_err_set(err, -ENOMEM, "out of memory");
	if (rc) {
		allm_grammar_unref(g);
		return rc;
	}
	g->vocab = v;
	*ret = g;
	return 0;
}

struct allm_grammar *allm_grammar_ref(struct allm_grammar *g)
{
	atomic_fetch_add(&g->refs, 1);
	return g;
}

void allm_grammar_unref(struct allm_grammar *g)
{
	if (!g || atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	allm_grammar_masks_free(g);
	pthread_mutex_destroy(&g->mu);
	allm_free(g->el);
	allm_free(g->rule_start);
	allm_free(g->sets);
	allm_free(g->rest);
	allm_free(g);
}

void allm_grammar_stats(struct allm_grammar *g, struct allm_grammar_stats *out)
{
	pthread_mutex_lock(&g->mu);
	*out = (struct allm_grammar_stats){
		.n_rules = g->n_rules,
		.n_elems = g->n_el,
		.mask_hits = g->hits,
		.mask_misses = g->misses,
		.n_masks = g->n_masks,
	};
	pthread_mutex_unlock(&g->mu);
}

/* --- the cache of compiled grammars -------------------------------------------- */

struct cache_slot {
	uint8_t key[32];     /* SHA-256 of the kind (4 bytes LE) and the text */
	uint64_t used;       /* the cache's clock at its last use */
	struct allm_grammar *g; /* NULL: empty */
};

struct allm_grammar_cache {
	const struct allm_grammar_vocab *vocab;
	pthread_mutex_t mu;
	uint64_t clock;
	uint32_t cap;
	struct cache_slot *slot; /* [cap] */
};

int allm_grammar_cache_create(const struct allm_grammar_vocab *v, uint32_t cap, struct allm_grammar_cache **ret)
{
	struct allm_grammar_cache *c = allm_calloc(1, sizeof(*c));
	if (!c || !(c->slot = allm_calloc(cap ? cap : 1, sizeof(*c->slot)))) {
		allm_free(c);
		return -ENOMEM;
	}
	c->vocab = v;
	c->cap = cap ? cap : 1;
	pthread_mutex_init(&c->mu, NULL);
	*ret = c;
	return 0;
}

void allm_grammar_cache_free(struct allm_grammar_cache *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->cap; i++)
		allm_grammar_unref(c->slot[i].g);
	pthread_mutex_destroy(&c->mu);
	allm_free(c->slot);
	allm_free(c);
}

int allm_grammar_cache_get(struct allm_grammar_cache *c, int kind, const char *text, size_t len,
			   struct allm_grammar **ret, struct allm_err *err)
{
	uint8_t key[32], k4[4] = { (uint8_t)kind, (uint8_t)(kind >> 8), (uint8_t)(kind >> 16), (uint8_t)(kind >> 24) };
	struct allm_sha256 h;
	allm_sha256_init(&h);
	allm_sha256_update(&h, k4, 4);
	allm_sha256_update(&h, text, len);
	allm_sha256_final(&h, key);
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < c->cap; i++)
		if (c->slot[i].g && !memcmp(c->slot[i].key, key, 32)) {
			c->slot[i].used = ++c->clock;
			*ret = allm_grammar_ref(c->slot[i].g);
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
	pthread_mutex_unlock(&c->mu);
	/* compiled outside the lock: a large grammar must not stall other lookups */
	struct allm_grammar *g;
	int rc = allm_grammar_compile(kind, text, len, c->vocab, &g, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->mu);
	uint32_t victim = 0;
	for (uint32_t i = 0; i < c->cap; i++) {
		if (!c->slot[i].g) {
			victim = i;
			break;
		}
		if (c->slot[i].used < c->slot[victim].used)
			victim = i;
	}
	struct allm_grammar *old = c->slot[victim].g;
	memcpy(c->slot[victim].key, key, 32);
	c->slot[victim].g = allm_grammar_ref(g);
	c->slot[victim].used = ++c->clock;
	pthread_mutex_unlock(&c->mu);
	allm_grammar_unref(old);
	*ret = g;
	return 0;
}
