/* Hash tables for the vocabulary and the merges, and the BPE merge loop.
 *
 * The merge loop is the one HF tokenizers runs (Word::merge_all): symbols in a
 * doubly linked list, a min-heap of candidate pairs keyed by (rank, position), stale
 * heap entries discarded when popped. O(n log n) in the piece length, which matters
 * because a SentencePiece-style file has no pre-tokenizer: a whole prompt is one
 * piece. */
#include "tokenizer-internal.h"

#include <errno.h>

uint64_t allm_tok_hash(const void *s, size_t n)
{
	/* 8 bytes per step, multiply-xorshift mixing: fast on short tokens and good
	 * enough for an open-addressing table at load factor <= 1/2. */
	const uint8_t *p = s;
	uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
		p += 8;
		n -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, p, n);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	h *= 0x9E3779B97F4A7C15ull;
	return h ^ (h >> 32);
}

static size_t table_cap(size_t n_keys)
{
	size_t cap = 16;
	while (cap < 2 * n_keys + 1)
		cap <<= 1;
	return cap;
}

int allm_tok_strmap_init(struct allm_tok_strmap *m, size_t n_keys)
{
	size_t cap = table_cap(n_keys);
	m->slots = allm_malloc(cap * sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	memset(m->slots, 0xff, cap * sizeof(*m->slots)); /* -1 everywhere */
	m->mask = cap - 1;
	return 0;
}

void allm_tok_strmap_fini(struct allm_tok_strmap *m)
{
	allm_free(m->slots);
	m->slots = NULL;
}

int32_t allm_tok_strmap_get(const struct allm_tok_strmap *m,
			    const struct allm_tokenizer *tok, const char *s, size_t n)
{
	size_t i = allm_tok_hash(s, n) & m->mask;
	for (;; i = (i + 1) & m->mask) {
		int32_t id = m->slots[i];
		if (id < 0)
			return -1;
		if (tok->token_len[id] == n && !memcmp(tok->tokens[id], s, n))
			return id;
	}
}

int32_t allm_tok_strmap_put(struct allm_tok_strmap *m, const struct allm_tokenizer *tok,
			    int32_t id)
{
	const char *s = tok->tokens[id];
	size_t n = tok->token_len[id];
	size_t i = allm_tok_hash(s, n) & m->mask;
	for (;; i = (i + 1) & m->mask) {
		int32_t cur = m->slots[i];
		if (cur < 0) {
			m->slots[i] = id;
			return -1;
		}
		if (tok->token_len[cur] == n && !memcmp(tok->tokens[cur], s, n))
			return cur;
	}
}

int allm_tok_pairmap_init(struct allm_tok_pairmap *m, size_t n_keys)
{
	size_t cap = table_cap(n_keys);
	m->keys = allm_malloc(cap * sizeof(*m->keys));
	m->ranks = allm_malloc(cap * sizeof(*m->ranks));
	m->merged = allm_malloc(cap * sizeof(*m->merged));
	if (!m->keys || !m->ranks || !m->merged) {
		allm_tok_pairmap_fini(m);
		return -ENOMEM;
	}
	memset(m->keys, 0xff, cap * sizeof(*m->keys));
	m->mask = cap - 1;
	return 0;
}

void allm_tok_pairmap_fini(struct allm_tok_pairmap *m)
{
	allm_free(m->keys);
	allm_free(m->ranks);
	allm_free(m->merged);
	m->keys = NULL;
	m->ranks = NULL;
	m->merged = NULL;
}

static inline uint64_t pair_key(int32_t a, int32_t b)
{
	return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static inline size_t pair_slot(uint64_t key, size_t mask)
{
	uint64_t h = key * 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 29)) & mask;
}

void allm_tok_pairmap_put(struct allm_tok_pairmap *m, int32_t a, int32_t b, uint32_t rank,
			  int32_t merged)
{
	uint64_t key = pair_key(a, b);
	size_t i = pair_slot(key, m->mask);
	for (;; i = (i + 1) & m->mask) {
		if (m->keys[i] == key)
			return; /* duplicate merge line: the first (best) rank stays */
		if (m->keys[i] == UINT64_MAX) {
			m->keys[i] = key;
			m->ranks[i] = rank;
			m->merged[i] = merged;
			return;
		}
	}
}

/* Returns the slot of (a, b) or -1. */
static inline ptrdiff_t pairmap_find(const struct allm_tok_pairmap *m, int32_t a, int32_t b)
{
	uint64_t key = pair_key(a, b);
	size_t i = pair_slot(key, m->mask);
	for (;; i = (i + 1) & m->mask) {
		if (m->keys[i] == key)
			return (ptrdiff_t)i;
		if (m->keys[i] == UINT64_MAX)
			return -1;
	}
}

int allm_tok_ids_push(struct allm_tok_ids *ids, int32_t id)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 64;
		int32_t *v = allm_realloc(ids->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return 0;
}

struct bpe_sym {
	int32_t id;   /* -1 once merged into its left neighbour */
	int32_t prev; /* index of the previous live symbol, -1 at the start */
	int32_t next; /* index of the next live symbol, -1 at the end */
	bool unk;     /* produced by the unk rule (for fuse_unk) */
};

struct bpe_cand {
	uint32_t rank;
	uint32_t pos; /* index of the left symbol when pushed */
};

static inline bool cand_less(struct bpe_cand a, struct bpe_cand b)
{
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(struct bpe_cand *h, size_t *n, struct bpe_cand c)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!cand_less(c, h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = c;
}

/* Moves c down from slot i of the n-entry heap to where it belongs. */
static void sift_down(struct bpe_cand *h, size_t n, size_t i, struct bpe_cand c)
{
	for (;;) {
		size_t l = 2 * i + 1, best;
		if (l >= n)
			break;
		best = (l + 1 < n && cand_less(h[l + 1], h[l])) ? l + 1 : l;
		if (!cand_less(h[best], c))
			break;
		h[i] = h[best];
		i = best;
	}
	h[i] = c;
}

static void heapify(struct bpe_cand *h, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down(h, n, i, h[i]);
}

static struct bpe_cand heap_pop(struct bpe_cand *h, size_t *n)
{
	struct bpe_cand top = h[0], last = h[--(*n)];
	if (*n)
		sift_down(h, *n, 0, last);
	return top;
}

void allm_tok_bpe_scratch_fini(struct allm_tok_bpe_scratch *s)
{
	allm_free(s->syms);
	allm_free(s->heap);
	allm_free(s->str);
	memset(s, 0, sizeof(*s));
}

static int scratch_reserve(struct allm_tok_bpe_scratch *s, size_t n)
{
	if (n <= s->cap)
		return 0;
	size_t cap = ALLM_MAX(n, 2 * s->cap);
	/* Each symbol can push at most two candidates besides the initial one. */
	void *syms = allm_realloc(s->syms, cap * sizeof(struct bpe_sym));
	if (!syms)
		return -ENOMEM;
	s->syms = syms;
	void *heap = allm_realloc(s->heap, 3 * cap * sizeof(struct bpe_cand));
	if (!heap)
		return -ENOMEM;
	s->heap = heap;
	s->cap = cap;
	return 0;
}

static void push_sym(struct bpe_sym *syms, size_t *n, int32_t id, bool unk)
{
	size_t i = (*n)++;
	syms[i] = (struct bpe_sym){ .id = id, .prev = (int32_t)i - 1, .next = -1, .unk = unk };
	if (i > 0)
		syms[i - 1].next = (int32_t)i;
}

/* An input unit with no vocabulary entry: the unk token, fused with a preceding
 * unk when fuse_unk says so, or dropped when there is no unk token (as HF does). */
static void push_unk(const struct allm_tokenizer *tok, struct bpe_sym *syms, size_t *n)
{
	if (tok->unk_id < 0)
		return;
	if (tok->fuse_unk && *n > 0 && syms[*n - 1].unk)
		return;
	push_sym(syms, n, tok->unk_id, true);
}

/* Maps a byte-level piece to its printable code points (for ignore_merges). */
static int map_bytelevel(const uint8_t *s, size_t n, struct allm_tok_bpe_scratch *scr,
			 size_t *ret_len)
{
	if (scr->str_cap < 2 * n) {
		char *str = allm_realloc(scr->str, 2 * n);
		if (!str)
			return -ENOMEM;
		scr->str = str;
		scr->str_cap = 2 * n;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t cp = allm_tok_byte_to_cp(s[i]); /* < 0x800: 1 or 2 bytes */
		if (cp < 0x80) {
			scr->str[k++] = (char)cp;
		} else {
			scr->str[k++] = (char)(0xC0 | (cp >> 6));
			scr->str[k++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	*ret_len = k;
	return 0;
}

static void init_symbols(const struct allm_tokenizer *tok, const uint8_t *s, size_t n,
			 struct bpe_sym *syms, size_t *ret_n)
{
	size_t ns = 0;
	if (tok->byte_level) {
		for (size_t i = 0; i < n; i++) {
			int32_t id = tok->bytelevel_ids[s[i]];
			if (id >= 0)
				push_sym(syms, &ns, id, false);
			else
				push_unk(tok, syms, &ns);
		}
		*ret_n = ns;
		return;
	}
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t cl = 1;
		int32_t id;
		if (s[i] < 0x80) {
			id = tok->ascii_ids[s[i]]; /* skips the hash lookup for the common case */
		} else {
			cl = allm_tok_utf8_next(s + i, n - i, &cp);
			id = allm_tok_strmap_get(&tok->vocab, tok, (const char *)s + i, cl);
		}
		if (id >= 0) {
			push_sym(syms, &ns, id, false);
		} else {
			bool have_bytes = tok->byte_fallback;
			for (size_t k = 0; have_bytes && k < cl; k++)
				have_bytes = tok->byte_ids[s[i + k]] >= 0;
			if (have_bytes) {
				for (size_t k = 0; k < cl; k++)
					push_sym(syms, &ns, tok->byte_ids[s[i + k]], false);
			} else {
				push_unk(tok, syms, &ns);
			}
		}
		i += cl;
	}
	*ret_n = ns;
}

static void push_cand(const struct allm_tokenizer *tok, const struct bpe_sym *syms,
		      int32_t left, struct bpe_cand *heap, size_t *nh)
{
	if (left < 0 || syms[left].next < 0)
		return;
	ptrdiff_t slot = pairmap_find(&tok->merges, syms[left].id, syms[syms[left].next].id);
	if (slot >= 0)
		heap_push(heap, nh,
			  (struct bpe_cand){ .rank = tok->merges.ranks[slot], .pos = (uint32_t)left });
}

int allm_tok_bpe_piece(const struct allm_tokenizer *tok, const uint8_t *s, size_t n,
		       struct allm_tok_bpe_scratch *scr, struct allm_tok_ids *out)
{
	int r;

	if (n == 0)
		return 0;
	if (tok->ignore_merges) {
		const char *key = (const char *)s;
		size_t klen = n;
		if (tok->byte_level) {
			r = map_bytelevel(s, n, scr, &klen);
			if (r < 0)
				return r;
			key = scr->str;
		}
		int32_t id = allm_tok_strmap_get(&tok->vocab, tok, key, klen);
		if (id >= 0)
			return allm_tok_ids_push(out, id);
	}
	/* At most one symbol per input byte. */
	r = scratch_reserve(scr, n);
	if (r < 0)
		return r;
	struct bpe_sym *syms = scr->syms;
	struct bpe_cand *heap = scr->heap;
	size_t ns, nh = 0;

	init_symbols(tok, s, n, syms, &ns);
	/* Initial candidates in position order, then one O(n) heapify. */
	for (size_t i = 0; i + 1 < ns; i++) {
		ptrdiff_t slot = pairmap_find(&tok->merges, syms[i].id, syms[i + 1].id);
		if (slot >= 0)
			heap[nh++] = (struct bpe_cand){ .rank = tok->merges.ranks[slot], .pos = (uint32_t)i };
	}
	heapify(heap, nh);

	while (nh > 0) {
		struct bpe_cand c = heap_pop(heap, &nh);
		struct bpe_sym *l = &syms[c.pos];
		if (l->id < 0 || l->next < 0)
			continue; /* stale: the left symbol is gone or has no right neighbour */
		ptrdiff_t slot = pairmap_find(&tok->merges, l->id, syms[l->next].id);
		if (slot < 0 || tok->merges.ranks[slot] != c.rank)
			continue; /* stale: the pair here changed since it was queued */
		int32_t right = l->next;
		l->id = tok->merges.merged[slot];
		l->unk = false;
		l->next = syms[right].next;
		if (l->next >= 0)
			syms[l->next].prev = (int32_t)c.pos;
		syms[right].id = -1;
		push_cand(tok, syms, l->prev, heap, &nh);
		push_cand(tok, syms, (int32_t)c.pos, heap, &nh);
	}
	for (int32_t i = ns ? 0 : -1; i >= 0; i = syms[i].next) {
		r = allm_tok_ids_push(out, syms[i].id);
		if (r < 0)
			return r;
	}
	return 0;
}
