/* Grammars that constrain what a request may generate: GBNF (llama.cpp's syntax),
 * JSON Schema, regular expressions, a choice of strings and "any JSON object",
 * all compiled to one byte-level form that gives, per step, the token ids that
 * may come next.
 *
 * Three objects, from the longest-lived to the shortest:
 *   struct allm_grammar_vocab    a model's tokens as bytes, sorted as a trie
 *                                (built once per model)
 *   struct allm_grammar          one compiled grammar, immutable but for its
 *                                cache of masks; reference-counted and shared by
 *                                every request with the same text (allm_grammar_cache)
 *   struct allm_grammar_matcher  one request's position in it
 *
 * Byte level: a character class is compiled to the UTF-8 byte sequences of its
 * code points, so a token whose bytes end inside a character (or run past the
 * grammar's end) is checked exactly, byte by byte. End tokens (EOS, the request's
 * stop ids) are allowed exactly where the grammar may end.
 *
 * Threads: a vocab and a grammar may be used from any thread (a grammar's mask
 * cache takes its own lock); a matcher belongs to one thread at a time. */
#ifndef ALLM_GRAMMAR_H
#define ALLM_GRAMMAR_H

#include "common.h"

#include <adaptivellm/params.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct allm_tokenizer;

/* --- the vocabulary ------------------------------------------------------------- */

struct allm_grammar_vocab;

/* A vocabulary of n_ids tokens: token i is bytes[i][0..len[i]); a token with
 * len 0 (or bytes NULL: special and unassigned tokens) never matches a grammar.
 * Copied. 0, -EINVAL (n_ids <= 0) or -ENOMEM. */
int allm_grammar_vocab_create(int32_t n_ids, const uint8_t *const *bytes, const uint32_t *len,
			      struct allm_grammar_vocab **ret);
/* The tokenizer's: every token's decoded bytes, special added tokens left out
 * (they are control tokens, not text). 0 or -ENOMEM. */
int allm_grammar_vocab_from_tokenizer(const struct allm_tokenizer *tok, struct allm_grammar_vocab **ret);
/* Accepts NULL. The grammars compiled against it must be freed first. */
void allm_grammar_vocab_free(struct allm_grammar_vocab *v);
int32_t allm_grammar_vocab_size(const struct allm_grammar_vocab *v);

/* --- compiling ------------------------------------------------------------------ */

struct allm_grammar;

/* The most bytes of grammar text a request may carry (ALLM_GRAMMAR_TEXT_MAX in
 * params.h), and of the GBNF a source expands to. */
#define ALLM_GRAMMAR_GBNF_MAX (4u << 20)

/* Compiles len bytes of text of the given kind (enum allm_grammar_kind, params.h)
 * against v. On error returns -EINVAL (or -E2BIG, -ENOMEM) with one line in err
 * naming the place: "GBNF line 3 col 7: ...", "JSON Schema at /properties/a:
 * ...", "regex at 5: ...". The grammar holds v (v must outlive it). *ret has one
 * reference (allm_grammar_unref). */
int allm_grammar_compile(int kind, const char *text, size_t len, const struct allm_grammar_vocab *v,
			 struct allm_grammar **ret, struct allm_err *err);
struct allm_grammar *allm_grammar_ref(struct allm_grammar *g);
/* Drops a reference; the last frees. Accepts NULL. */
void allm_grammar_unref(struct allm_grammar *g);

/* The GBNF a source of the given kind compiles through (a JSON Schema's, a
 * regex's; a GBNF text is returned as is), NUL-terminated, allm_malloc'ed for the
 * caller to allm_free. Errors as allm_grammar_compile. */
int allm_grammar_to_gbnf(int kind, const char *text, size_t len, char **ret, struct allm_err *err);

/* Counters of one grammar (for benchmarks and the tests). */
struct allm_grammar_stats {
	uint32_t n_rules, n_elems; /* its size, compiled */
	uint64_t mask_hits;        /* masks served from its cache */
	uint64_t mask_misses;      /* masks computed over the vocabulary */
	uint64_t n_masks;          /* held in its cache now */
};
void allm_grammar_stats(struct allm_grammar *g, struct allm_grammar_stats *out);

/* --- a cache of compiled grammars ------------------------------------------------ */

struct allm_grammar_cache;

/* Holds up to cap compiled grammars for v, keyed by the SHA-256 of their kind and
 * text, least recently used dropped first. 0 or -ENOMEM. */
int allm_grammar_cache_create(const struct allm_grammar_vocab *v, uint32_t cap, struct allm_grammar_cache **ret);
void allm_grammar_cache_free(struct allm_grammar_cache *c);
/* The compiled grammar for (kind, text): from the cache, else compiled and kept.
 * *ret has a reference for the caller. Errors as allm_grammar_compile (a text
 * that does not compile is not kept). Thread-safe. */
int allm_grammar_cache_get(struct allm_grammar_cache *c, int kind, const char *text, size_t len,
			   struct allm_grammar **ret, struct allm_err *err);

/* --- matching -------------------------------------------------------------------- */

struct allm_grammar_matcher;

/* A matcher at the start of g (taking a reference to it). end_ids[0..n_end):
 * the tokens that end generation (EOS ids, stop ids): allowed exactly where the
 * grammar may end. 0 or -ENOMEM. */
int allm_grammar_matcher_create(struct allm_grammar *g, const int32_t *end_ids, int32_t n_end,
				struct allm_grammar_matcher **ret);
void allm_grammar_matcher_free(struct allm_grammar_matcher *m);

/* Whether id may come next; if so, the matcher advances past it. An end id
 * where the grammar may end is accepted (and the matcher stays ended). */
bool allm_grammar_matcher_accept(struct allm_grammar_matcher *m, int32_t id);
/* Whether the grammar may end here (an end token is allowed). */
bool allm_grammar_matcher_can_end(const struct allm_grammar_matcher *m);
/* Sets logits[id] = -INFINITY for every id of logits[0..vocab) that may not come
 * next (from the grammar's cache of masks when this state was seen before).
 * When nothing with a finite logit would be left (a caller's other mask, as
 * min_tokens', forbids all the grammar allows), the grammar's choice wins: its
 * allowed tokens get logit 0. Returns how many ids are allowed (> 0 unless the
 * vocabulary cannot spell any continuation: then the end ids are allowed). */
int32_t allm_grammar_matcher_apply(struct allm_grammar_matcher *m, float *logits, int32_t vocab);
/* The fewest bytes the grammar needs before it may end (0: it may end here;
 * UINT32_MAX: it never can). */
uint32_t allm_grammar_matcher_left(const struct allm_grammar_matcher *m);
/* The same after token id, were it accepted (m does not move; UINT32_MAX when
 * id may not come next). */
uint32_t allm_grammar_matcher_left_after(struct allm_grammar_matcher *m, int32_t id);
/* allm_grammar_matcher_apply, then a budget: only the tokens after which the
 * grammar may end within max_left more bytes stay allowed (so with a token left
 * per byte, the text is whole when max_tokens runs out); when none may, those
 * that leave the fewest. Returns how many ids are allowed. */
int32_t allm_grammar_matcher_apply_within(struct allm_grammar_matcher *m, float *logits, int32_t vocab,
					  uint32_t max_left);
/* How many times, in this process, allm_grammar_matcher_apply found no id the
 * grammar allows (0 unless a vocabulary cannot spell some byte). For tests. */
uint64_t allm_grammar_empty_masks(void);
/* The allowed ids as a bitset (bit i of word i / 64), valid until the next call
 * on m; n_words = (vocab + 63) / 64. For tests and benchmarks. */
const uint64_t *allm_grammar_matcher_mask(struct allm_grammar_matcher *m);

#endif
