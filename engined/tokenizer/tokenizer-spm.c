/* SentencePiece merges rebuilt from the pieces' scores (a GGUF "llama" tokenizer
 * stores scores, not merges): every split of a piece into two pieces is a merge,
 * ranked by the merged piece's score, highest first; equal scores share a rank and
 * the leftmost pair goes first, as llama.cpp's queue does.
 *
 * Why a hash of its own: looking both halves of every split up in the vocabulary
 * map hashes the halves again for each split, O(n^2) bytes for a piece of n bytes
 * (a 1 MiB token in a hostile file held the load for minutes). A polynomial hash
 * composes, h(xy) = h(x) * B^|y| + h(y), so one pass over a piece gives the hash of
 * every prefix, and every suffix's follows in O(1): the pass is linear in the
 * vocabulary's bytes, plus one comparison of the bytes of each half that is found
 * (at most ALLM_TOK_MAX_TOKEN_BYTES each). The base is drawn at random per load so a
 * file cannot be built to collide: arithmetic modulo the prime 2^61 - 1. */
#include "tokenizer-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#define MOD ((1ull << 61) - 1)

static inline uint64_t mulmod(uint64_t a, uint64_t b)
{
	unsigned __int128 p = (unsigned __int128)a * b;
	uint64_t r = (uint64_t)(p & MOD) + (uint64_t)(p >> 61);
	return r >= MOD ? r - MOD : r;
}

static inline uint64_t addmod(uint64_t a, uint64_t b)
{
	uint64_t r = a + b;
	return r >= MOD ? r - MOD : r;
}

/* Every piece of the vocabulary by its polynomial hash. */
struct piece_index {
	const struct allm_tokenizer *tok;
	uint64_t *hash;  /* [n_ids] hash of tokens[id] */
	int32_t *slots;  /* id, -1 empty */
	size_t mask;
	uint64_t pw[ALLM_TOK_MAX_TOKEN_BYTES + 1]; /* base^k */
};

static size_t slot_of(uint64_t h, size_t mask)
{
	h *= 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 31)) & mask;
}

static int32_t index_get(const struct piece_index *x, uint64_t h, const char *s, size_t n)
{
	for (size_t i = slot_of(h, x->mask);; i = (i + 1) & x->mask) {
		int32_t id = x->slots[i];
		if (id < 0)
			return -1;
		if (x->hash[id] == h && x->tok->token_len[id] == n && !memcmp(x->tok->tokens[id], s, n))
			return id;
	}
}

static int index_init(struct piece_index *x, const struct allm_tokenizer *tok, uint64_t base)
{
	size_t cap = 16;
	while (cap < 2 * (size_t)tok->n_ids + 1)
		cap <<= 1;
	x->tok = tok;
	x->hash = allm_malloc((size_t)tok->n_ids * sizeof(*x->hash));
	x->slots = allm_malloc(cap * sizeof(*x->slots));
	if (!x->hash || !x->slots)
		return -ENOMEM;
	memset(x->slots, 0xff, cap * sizeof(*x->slots));
	x->mask = cap - 1;
	x->pw[0] = 1;
	for (size_t k = 1; k <= ALLM_TOK_MAX_TOKEN_BYTES; k++)
		x->pw[k] = mulmod(x->pw[k - 1], base);
	for (int32_t id = 0; id < tok->n_ids; id++) {
		const uint8_t *s = (const uint8_t *)tok->tokens[id];
		uint64_t h = 0;
		for (uint32_t k = 0; s && k < tok->token_len[id]; k++)
			h = addmod(mulmod(h, base), (uint64_t)s[k] + 1);
		x->hash[id] = h;
		if (!s)
			continue;
		size_t i = slot_of(h, x->mask);
		while (x->slots[i] >= 0)
			i = (i + 1) & x->mask;
		x->slots[i] = id;
	}
	return 0;
}

static void index_fini(struct piece_index *x)
{
	allm_free(x->hash);
	allm_free(x->slots);
}

/* A random base in [2^20, 2^61 - 1): what a file's author cannot know. */
static uint64_t random_base(void)
{
	uint64_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint64_t)(uintptr_t)&r * 0x9E3779B97F4A7C15ull; /* no entropy: still not a constant */
	return (1u << 20) + r % (MOD - (1u << 20));
}

struct cand {
	float score;
	int32_t a, b, m;
};

static int cmp_cand(const void *x, const void *y)
{
	const struct cand *p = x, *q = y;
	if (p->score != q->score)
		return p->score > q->score ? -1 : 1;
	return p->m != q->m ? (p->m < q->m ? -1 : 1) : (p->a < q->a ? -1 : p->a > q->a);
}

int allm_tok_spm_merges(struct allm_tokenizer *tok, const float *score, const bool *mergeable,
			struct allm_err *err)
{
	struct piece_index *x = allm_calloc(1, sizeof(*x));
	uint64_t pre[ALLM_TOK_MAX_TOKEN_BYTES + 1];
	struct cand *c = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	if (!x || index_init(x, tok, random_base()) < 0)
		goto nomem;
	for (int32_t m = 0; m < tok->n_ids; m++) {
		const char *s = tok->tokens[m];
		uint32_t len = tok->token_len[m];
		if (!mergeable[m] || !s)
			continue;
		ALLM_ASSERT(len <= ALLM_TOK_MAX_TOKEN_BYTES); /* the loaders refuse longer ones */
		pre[0] = 0;
		for (uint32_t k = 0; k < len; k++)
			pre[k + 1] = addmod(mulmod(pre[k], x->pw[1]), (uint64_t)(uint8_t)s[k] + 1);
		for (uint32_t k = 1; k < len; k++) {
			if (((uint8_t)s[k] & 0xC0) == 0x80)
				continue; /* inside a character */
			uint64_t hb = addmod(pre[len], MOD - mulmod(pre[k], x->pw[len - k]));
			int32_t a = index_get(x, pre[k], s, k);
			int32_t b = a < 0 ? -1 : index_get(x, hb, s + k, len - k);
			if (b < 0)
				continue;
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 4096;
				struct cand *p = allm_realloc(c, nc * sizeof(*c));
				if (!p)
					goto nomem;
				c = p;
				cap = nc;
			}
			c[n++] = (struct cand){score[m], a, b, m};
		}
	}
	if (n) /* qsort(NULL, 0) is undefined: a vocabulary with no merges at all */
		qsort(c, n, sizeof(*c), cmp_cand);
	allm_tok_pairmap_fini(&tok->merges);
	if (allm_tok_pairmap_init(&tok->merges, n) < 0)
		goto nomem;
	uint32_t rank = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && c[i].score != c[i - 1].score)
			rank++;
		allm_tok_pairmap_put(&tok->merges, c[i].a, c[i].b, rank, c[i].m);
	}
	tok->n_merges = n;
	goto out;
nomem:
	r = allm_err_set(err, -ENOMEM, "tokenizer: out of memory");
out:
	if (x)
		index_fini(x);
	allm_free(x);
	allm_free(c);
	return r;
}
