/* What the grammar folder's files share: the compiled form, the vocabulary's
 * layout, the GBNF builder and a growing text buffer. */
#ifndef ALLM_GRAMMAR_INTERNAL_H
#define ALLM_GRAMMAR_INTERNAL_H

#include "grammar.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

/* --- the compiled form ------------------------------------------------------------
 * A rule is its alternatives one after the other, each a sequence of elements
 * ended by GE_ALT (another alternative follows) or GE_END (the rule's last). A
 * position is an index into el[]. */
enum gelem_type {
	GE_END = 0,   /* end of the rule's last alternative */
	GE_ALT = 1,   /* end of an alternative; the next one starts after it */
	GE_BYTES = 2, /* one byte out of sets[arg] */
	GE_REF = 3,   /* rule arg */
};

struct gelem {
	uint32_t type; /* enum gelem_type */
	uint32_t arg;
};

static inline bool gelem_ends_alt(struct gelem e)
{
	return e.type == GE_END || e.type == GE_ALT;
}

static inline bool byteset_has(const uint64_t s[4], uint8_t b)
{
	return (s[b >> 6] >> (b & 63)) & 1;
}

struct mask_entry;

struct allm_grammar {
	atomic_int refs;
	const struct allm_grammar_vocab *vocab;
	struct gelem *el; /* [n_el] */
	uint32_t n_el;
	uint32_t *rule_start; /* [n_rules] position of each rule's first element */
	uint32_t n_rules;
	uint64_t (*sets)[4]; /* [n_sets] 256-bit sets of bytes */
	uint32_t n_sets;
	uint32_t root; /* the rule generation starts in */
	/* [n_el] the fewest bytes that finish the alternative from each position
	 * (UINT32_MAX: none can), for ending within a budget (matcher.c) */
	uint32_t *rest;
	/* masks already computed, by state (matcher.c); mu guards them */
	pthread_mutex_t mu;
	struct mask_entry *tab; /* open addressing, [tab_cap] */
	uint32_t tab_cap, n_masks;
	size_t mask_bytes; /* held by the cache's masks */
	uint64_t hits, misses;
};

/* The vocabulary: every token's bytes, and the tokens with any in byte order with
 * each one's common prefix with the one before (the trie, walked in order). */
struct allm_grammar_vocab {
	int32_t n_ids;
	uint8_t *data;   /* every token's bytes */
	uint32_t *off;   /* [n_ids + 1] token i is data[off[i] .. off[i + 1]) */
	int32_t n_sorted;
	int32_t *sorted; /* [n_sorted] the ids with bytes, their bytes ascending */
	uint32_t *lcp;   /* [n_sorted] bytes shared with the previous one (0 for the first) */
	uint8_t *sdata;  /* the sorted tokens' bytes in their order (the walk reads them in turn) */
	uint32_t *soff;  /* [n_sorted + 1] sorted token k is sdata[soff[k] .. soff[k + 1]) */
	uint32_t max_len;
};

static inline uint32_t vocab_len(const struct allm_grammar_vocab *v, int32_t id)
{
	return v->off[id + 1] - v->off[id];
}

/* --- a growing text -------------------------------------------------------------- */

struct sbuf {
	char *s;
	size_t n, cap;
	bool oom; /* an append failed: the text is incomplete */
};

void sbuf_put(struct sbuf *b, const char *s, size_t n);
void sbuf_puts(struct sbuf *b, const char *s);
void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as a GBNF string literal, quotes included (UTF-8 passes through; quotes,
 * backslashes and control bytes escaped). */
void sbuf_gbnf_literal(struct sbuf *b, const char *s, size_t n);
void sbuf_fini(struct sbuf *b);

/* --- code points (gbnf.c) --------------------------------------------------------- */

struct cp_range {
	uint32_t lo, hi; /* inclusive */
};
/* Sorts and merges r[0..n) in place; returns the new count. */
size_t allm_ranges_normalize(struct cp_range *r, size_t n);
/* UTF-8 of cp (a scalar value) into out; returns its length. */
int allm_utf8_encode(uint32_t cp, uint8_t out[4]);
/* Decodes one code point at *p (< end) and moves past it; false when malformed
 * (overlong, a surrogate, past U+10FFFF, cut short). */
bool allm_utf8_next(const char **p, const char *end, uint32_t *cp);

/* --- compiling ------------------------------------------------------------------- */

/* Compiles GBNF text into a new grammar (refs 1, no vocab yet). Errors name the
 * line and column (gbnf.c). */
int allm_gbnf_compile(const char *text, size_t len, struct allm_grammar **ret, struct allm_err *err);
/* The sources that compile through GBNF: their GBNF text in out. */
int allm_json_schema_to_gbnf(const char *text, size_t len, struct sbuf *out, struct allm_err *err);
/* A regex as the GBNF expression of its matches; json_string: the expression
 * matches the regex's strings as the inside of a JSON string literal (quotes,
 * backslashes and control characters escaped, never raw). */
int allm_regex_to_gbnf(const char *re, size_t len, bool json_string, struct sbuf *out, struct allm_err *err);
/* The GBNF of any JSON value, rules prefixed "json-"; root_object: a root rule
 * "json-root" for an object. */
void allm_json_any_gbnf(struct sbuf *out);

/* Fills g->rest (matcher.c). 0 or -ENOMEM. */
int allm_grammar_min_lengths(struct allm_grammar *g);
/* Frees what a grammar holds (the mask cache: matcher.c). */
void allm_grammar_masks_free(struct allm_grammar *g);

#endif
