/* A request's position in a grammar, and the masks of allowed tokens.
 *
 * The position is a set of stacks, as in llama.cpp's grammar sampler: each stack
 * a path of rule positions, its top a byte set to match next; the empty stack
 * means the grammar may end here. Stacks are interned (hash-consed) nodes (pos,
 * parent), so a set is a small array of node ids, and what follows a node once
 * its byte matched (the closure of the next position, tail calls popped so
 * repetition does not grow the stack) is computed once per node and memoized:
 * advancing by a byte is a few table look-ups.
 *
 * A mask walks the vocabulary in byte order (a trie flattened: each token's common
 * prefix with the previous one is reused, a rejected prefix skips every token
 * that shares it). Masks are cached in the grammar, keyed by the state's
 * structural hash (128 bits, independent of which request interned its nodes),
 * so a state seen before - in this request or any other with the same grammar -
 * costs one copy. The sampler asks for a mask only when the token it drew first
 * is refused (allm_grammar_matcher_accept): most steps need none. */
#include "grammar-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MASK_CACHE_BYTES (64u << 20) /* per grammar; cleared when full */
#define NO_AFTER UINT32_MAX
#define NO_SET UINT32_MAX
#define DFA_BYTES (16u << 20) /* per matcher, for transition rows */

static atomic_uint_fast64_t n_empty_masks;

uint64_t allm_grammar_empty_masks(void)
{
	return atomic_load(&n_empty_masks);
}

struct node {
	uint32_t pos;    /* top of this stack: an element position (UINT32_MAX: empty stack) */
	uint32_t parent; /* the stack below (node id; 0 = empty) */
	uint32_t left;   /* the fewest bytes that empty the stack (UINT32_MAX: none can) */
	uint64_t h1, h2; /* structural hash of the whole stack */
	uint32_t after_off, after_n; /* memo: the set after the top matched (NO_AFTER: not yet) */
};

struct mask_entry {
	uint64_t k1, k2; /* state hash; k1 == 0 && k2 == 0: empty slot */
	uint64_t *bits;
};

/* A growing array of node ids. */
struct ids {
	uint32_t *v;
	uint32_t n, cap;
};

struct allm_grammar_matcher {
	struct allm_grammar *g;
	int32_t *end_ids;
	int32_t n_end;
	struct node *nodes;
	uint32_t n_nodes, cap_nodes;
	uint32_t *htab; /* intern table: node id + 1, 0 = empty */
	uint32_t hcap;
	struct ids after; /* memo pool of node::after_* */
	uint32_t *stamp_exp, *stamp_set; /* [cap_nodes] generation marks */
	uint32_t gen_exp, gen_set;
	struct ids work; /* expansion stack, pairs (pos, parent) */
	struct ids state; /* the current set */
	struct ids tmp[2];
	/* the lazy DFA: sets of stacks interned (set 0 the empty one, which
	 * nothing follows), their transitions by byte computed at first use, so
	 * the mask walk and accept() are table look-ups once warm */
	struct ids pool;   /* every set's node ids, sorted */
	uint32_t *set_off, *set_n; /* [cap_sets] set k is pool.v[set_off[k] ..) */
	uint64_t *set_hash;
	uint32_t n_sets, cap_sets;
	uint32_t *set_tab; /* hash -> set + 1 */
	uint32_t set_tab_cap;
	uint32_t **next;   /* [cap_sets] per set its 256 transitions (NO_SET: not yet),
			    * made at its first step; NULL past the budget (then
			    * every step is computed) */
	size_t next_bytes;
	uint32_t cur;      /* the set of state */
	uint32_t *level;   /* [max_len + 1] the mask walk's set per depth */
	bool ended;       /* an end token was accepted */
	bool oom;
	uint64_t *mask;   /* [n_words] the last mask */
	uint32_t n_words;
};

static inline uint32_t sat_add(uint32_t a, uint32_t b)
{
	return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

int allm_grammar_min_lengths(struct allm_grammar *g)
{
	uint32_t *rule = allm_malloc((size_t)(g->n_rules ? g->n_rules : 1) * sizeof(uint32_t));
	g->rest = allm_malloc((size_t)(g->n_el + 1) * sizeof(uint32_t));
	if (!rule || !g->rest) {
		allm_free(rule);
		return -ENOMEM;
	}
	for (uint32_t r = 0; r < g->n_rules; r++)
		rule[r] = UINT32_MAX;
	/* a fixpoint: a rule's fewest bytes are its shortest alternative's, which
	 * only fall as the rules it refers to get theirs */
	for (bool changed = true; changed;) {
		changed = false;
		g->rest[g->n_el] = 0;
		for (uint32_t p = g->n_el; p-- > 0;) {
			struct gelem e = g->el[p];
			g->rest[p] = gelem_ends_alt(e) ? 0 : sat_add(e.type == GE_BYTES ? 1 : rule[e.arg], g->rest[p + 1]);
		}
		for (uint32_t r = 0; r < g->n_rules; r++)
			for (uint32_t a = g->rule_start[r];; a++) {
				if ((a == g->rule_start[r] || g->el[a - 1].type == GE_ALT) && g->rest[a] < rule[r]) {
					rule[r] = g->rest[a];
					changed = true;
				}
				if (g->el[a].type == GE_END)
					break;
			}
	}
	allm_free(rule);
	return 0;
}

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static bool ids_push(struct allm_grammar_matcher *m, struct ids *a, uint32_t x)
{
	if (a->n == a->cap) {
		uint32_t cap = a->cap ? 2 * a->cap : 64;
		uint32_t *v = allm_realloc(a->v, (size_t)cap * sizeof(*v));
		if (!v) {
			m->oom = true;
			return false;
		}
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return true;
}

/* The node (pos, parent), made at its first use. UINT32_MAX when out of memory. */
static uint32_t intern(struct allm_grammar_matcher *m, uint32_t pos, uint32_t parent)
{
	if (m->n_nodes * 2 >= m->hcap) {
		uint32_t cap = m->hcap * 2;
		uint32_t *t = allm_calloc(cap, sizeof(*t));
		if (!t) {
			m->oom = true;
			return UINT32_MAX;
		}
		for (uint32_t i = 1; i < m->n_nodes; i++) {
			uint32_t j = (uint32_t)mix((uint64_t)m->nodes[i].pos << 32 | m->nodes[i].parent) & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = i + 1;
		}
		allm_free(m->htab);
		m->htab = t;
		m->hcap = cap;
	}
	uint32_t j = (uint32_t)mix((uint64_t)pos << 32 | parent) & (m->hcap - 1);
	while (m->htab[j]) {
		const struct node *n = &m->nodes[m->htab[j] - 1];
		if (n->pos == pos && n->parent == parent)
			return m->htab[j] - 1;
		j = (j + 1) & (m->hcap - 1);
	}
	if (m->n_nodes == m->cap_nodes) {
		uint32_t cap = m->cap_nodes * 2;
		struct node *nn = allm_realloc(m->nodes, (size_t)cap * sizeof(*nn));
		uint32_t *s1 = nn ? allm_realloc(m->stamp_exp, (size_t)cap * sizeof(*s1)) : NULL;
		if (s1)
			m->stamp_exp = s1;
		uint32_t *s2 = s1 ? allm_realloc(m->stamp_set, (size_t)cap * sizeof(*s2)) : NULL;
		if (nn)
			m->nodes = nn;
		if (!s2) {
			m->oom = true;
			return UINT32_MAX;
		}
		m->stamp_set = s2;
		memset(m->stamp_exp + m->cap_nodes, 0, (size_t)(cap - m->cap_nodes) * sizeof(uint32_t));
		memset(m->stamp_set + m->cap_nodes, 0, (size_t)(cap - m->cap_nodes) * sizeof(uint32_t));
		m->cap_nodes = cap;
	}
	uint32_t id = m->n_nodes++;
	const struct node *p = &m->nodes[parent];
	m->nodes[id] = (struct node){
		.pos = pos,
		.parent = parent,
		.left = sat_add(m->g->rest[pos], p->left),
		.h1 = mix(p->h1 ^ mix((uint64_t)pos + 0x9e3779b97f4a7c15ull)),
		.h2 = mix(p->h2 + mix((uint64_t)pos * 0xff51afd7ed558ccdull + 1)),
		.after_off = 0,
		.after_n = NO_AFTER,
	};
	m->htab[j] = id + 1;
	return id;
}

/* Appends to out the stacks whose tops are byte sets, or the empty stack, that
 * (pos, parent) expands to, each once:
 * references are entered (every alternative), a finished alternative pops. A
 * reference that ends its alternative does not stay on the stack (a tail call). */
static void expand(struct allm_grammar_matcher *m, uint32_t pos, uint32_t parent, struct ids *out)
{
	const struct gelem *el = m->g->el;
	m->gen_exp++;
	m->work.n = 0;
	if (!ids_push(m, &m->work, pos) || !ids_push(m, &m->work, parent))
		return;
	while (m->work.n && !m->oom) {
		parent = m->work.v[--m->work.n];
		pos = m->work.v[--m->work.n];
		while (gelem_ends_alt(el[pos]) && parent) { /* pop finished rules */
			pos = m->nodes[parent].pos;
			parent = m->nodes[parent].parent;
		}
		uint32_t id = gelem_ends_alt(el[pos]) ? 0 : intern(m, pos, parent);
		if (id == UINT32_MAX || m->stamp_exp[id] == m->gen_exp)
			continue;
		m->stamp_exp[id] = m->gen_exp;
		if (el[pos].type != GE_REF) { /* a byte set, or the empty stack */
			ids_push(m, out, id);
			continue;
		}
		uint32_t np = parent;
		if (!gelem_ends_alt(el[pos + 1]) && (np = intern(m, pos + 1, parent)) == UINT32_MAX)
			return;
		for (uint32_t a = m->g->rule_start[el[pos].arg];; a++) {
			if (a == m->g->rule_start[el[pos].arg] || el[a - 1].type == GE_ALT)
				if (!ids_push(m, &m->work, a) || !ids_push(m, &m->work, np))
					return;
			if (el[a].type == GE_END)
				break;
		}
	}
}

/* What follows node id once its byte matched (memoized in the node). */
static bool after_of(struct allm_grammar_matcher *m, uint32_t id, uint32_t *off, uint32_t *n)
{
	if (m->nodes[id].after_n == NO_AFTER) {
		struct ids tmp = { 0 };
		expand(m, m->nodes[id].pos + 1, m->nodes[id].parent, &tmp);
		uint32_t o = m->after.n;
		for (uint32_t i = 0; i < tmp.n; i++)
			ids_push(m, &m->after, tmp.v[i]);
		allm_free(tmp.v);
		if (m->oom)
			return false;
		m->nodes[id].after_off = o;
		m->nodes[id].after_n = tmp.n;
	}
	*off = m->nodes[id].after_off;
	*n = m->nodes[id].after_n;
	return true;
}

/* out = the set after byte c from in[0..n) (out must not be in). */
static void advance(struct allm_grammar_matcher *m, const uint32_t *in, uint32_t n, uint8_t c, struct ids *out)
{
	const struct allm_grammar *g = m->g;
	uint32_t gen = ++m->gen_set;
	out->n = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = in[i];
		if (!id || !byteset_has(g->sets[g->el[m->nodes[id].pos].arg], c))
			continue;
		uint32_t off, k;
		if (!after_of(m, id, &off, &k))
			return;
		for (uint32_t j = 0; j < k; j++) {
			uint32_t x = m->after.v[off + j];
			if (m->stamp_set[x] != gen) {
				m->stamp_set[x] = gen;
				if (!ids_push(m, out, x))
					return;
			}
		}
	}
}

/* The set of v[0..n) (sorted here, in place), interned: its index, UINT32_MAX
 * when out of memory. The empty list is set 0. */
static uint32_t set_intern(struct allm_grammar_matcher *m, uint32_t *v, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) /* small: insertion sort */
		for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			uint32_t t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	uint64_t h = 0x84222325cbf29ce4ull ^ n;
	for (uint32_t i = 0; i < n; i++)
		h = mix(h ^ v[i]);
	if ((m->n_sets + 1) * 2 > m->set_tab_cap) {
		uint32_t cap = m->set_tab_cap ? 2 * m->set_tab_cap : 256;
		uint32_t *t = allm_calloc(cap, sizeof(*t));
		if (!t)
			return m->oom = true, UINT32_MAX;
		for (uint32_t k = 0; k < m->n_sets; k++) {
			uint32_t j = (uint32_t)m->set_hash[k] & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = k + 1;
		}
		allm_free(m->set_tab);
		m->set_tab = t;
		m->set_tab_cap = cap;
	}
	uint32_t j = (uint32_t)h & (m->set_tab_cap - 1);
	for (; m->set_tab[j]; j = (j + 1) & (m->set_tab_cap - 1)) {
		uint32_t k = m->set_tab[j] - 1;
		if (m->set_hash[k] == h && m->set_n[k] == n &&
		    !memcmp(m->pool.v + m->set_off[k], v, (size_t)n * sizeof(uint32_t)))
			return k;
	}
	if (m->n_sets == m->cap_sets) {
		uint32_t cap = m->cap_sets ? 2 * m->cap_sets : 256;
		uint32_t *o = allm_realloc(m->set_off, cap * sizeof(*o));
		if (o)
			m->set_off = o;
		uint32_t *c = o ? allm_realloc(m->set_n, cap * sizeof(*c)) : NULL;
		if (c)
			m->set_n = c;
		uint64_t *hh = c ? allm_realloc(m->set_hash, cap * sizeof(*hh)) : NULL;
		if (hh)
			m->set_hash = hh;
		uint32_t **nx = hh ? allm_realloc(m->next, cap * sizeof(*nx)) : NULL;
		if (!nx)
			return m->oom = true, UINT32_MAX;
		memset(nx + m->cap_sets, 0, (cap - m->cap_sets) * sizeof(*nx));
		m->next = nx;
		m->cap_sets = cap;
	}
	uint32_t k = m->n_sets++;
	m->set_off[k] = m->pool.n;
	m->set_n[k] = n;
	m->set_hash[k] = h;
	for (uint32_t i = 0; i < n; i++)
		ids_push(m, &m->pool, v[i]);
	m->set_tab[j] = k + 1;
	return k;
}

/* The set after byte c from set s (0: nothing follows). */
static uint32_t dfa_step(struct allm_grammar_matcher *m, uint32_t s, uint8_t c)
{
	if (!s)
		return 0;
	uint32_t *row = m->next[s];
	if (row && row[c] != NO_SET)
		return row[c];
	if (!row && m->next_bytes + 256 * sizeof(uint32_t) <= DFA_BYTES &&
	    (row = allm_malloc(256 * sizeof(uint32_t)))) {
		memset(row, 0xff, 256 * sizeof(uint32_t));
		m->next[s] = row;
		m->next_bytes += 256 * sizeof(uint32_t);
	}
	/* advance() only reads the pool: the pointer holds until set_intern */
	advance(m, m->pool.v + m->set_off[s], m->set_n[s], c, &m->tmp[0]);
	uint32_t t = m->oom ? UINT32_MAX : set_intern(m, m->tmp[0].v, m->tmp[0].n);
	if (t == UINT32_MAX)
		return 0;
	if (row)
		row[c] = t;
	return t;
}

int allm_grammar_matcher_create(struct allm_grammar *g, const int32_t *end_ids, int32_t n_end,
				struct allm_grammar_matcher **ret)
{
	struct allm_grammar_matcher *m = allm_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->g = allm_grammar_ref(g);
	m->cap_nodes = 256;
	m->hcap = 1024;
	m->n_words = (uint32_t)((g->vocab->n_ids + 63) / 64);
	m->nodes = allm_malloc(m->cap_nodes * sizeof(*m->nodes));
	m->stamp_exp = allm_calloc(m->cap_nodes, sizeof(uint32_t));
	m->stamp_set = allm_calloc(m->cap_nodes, sizeof(uint32_t));
	m->htab = allm_calloc(m->hcap, sizeof(uint32_t));
	m->mask = allm_malloc((size_t)m->n_words * sizeof(uint64_t));
	m->level = allm_malloc(((size_t)g->vocab->max_len + 2) * sizeof(uint32_t));
	m->end_ids = allm_malloc((size_t)(n_end > 0 ? n_end : 1) * sizeof(int32_t));
	if (!m->nodes || !m->stamp_exp || !m->stamp_set || !m->htab || !m->mask || !m->level || !m->end_ids) {
		allm_grammar_matcher_free(m);
		return -ENOMEM;
	}
	if (n_end > 0)
		memcpy(m->end_ids, end_ids, (size_t)n_end * sizeof(int32_t));
	m->n_end = n_end;
	/* node 0: the empty stack */
	m->nodes[0] = (struct node){ .pos = UINT32_MAX, .left = 0, .h1 = 0x6a09e667f3bcc908ull, .h2 = 0xbb67ae8584caa73bull,
				     .after_n = 0 };
	m->n_nodes = 1;
	/* the start: every alternative of the root rule, over the empty stack,
	 * each stack once */
	const struct gelem *el = g->el;
	uint32_t gen = ++m->gen_set;
	for (uint32_t a = g->rule_start[g->root];; a++) {
		if (a == g->rule_start[g->root] || el[a - 1].type == GE_ALT) {
			m->tmp[0].n = 0;
			expand(m, a, 0, &m->tmp[0]);
			for (uint32_t i = 0; i < m->tmp[0].n; i++)
				if (m->stamp_set[m->tmp[0].v[i]] != gen) {
					m->stamp_set[m->tmp[0].v[i]] = gen;
					ids_push(m, &m->state, m->tmp[0].v[i]);
				}
		}
		if (el[a].type == GE_END)
			break;
	}
	set_intern(m, NULL, 0); /* set 0: the empty set */
	m->tmp[0].n = 0;
	for (uint32_t i = 0; i < m->state.n; i++)
		ids_push(m, &m->tmp[0], m->state.v[i]);
	m->cur = set_intern(m, m->tmp[0].v, m->tmp[0].n);
	if (m->oom) {
		allm_grammar_matcher_free(m);
		return -ENOMEM;
	}
	*ret = m;
	return 0;
}

void allm_grammar_matcher_free(struct allm_grammar_matcher *m)
{
	if (!m)
		return;
	allm_grammar_unref(m->g);
	allm_free(m->end_ids);
	allm_free(m->nodes);
	allm_free(m->htab);
	allm_free(m->after.v);
	allm_free(m->stamp_exp);
	allm_free(m->stamp_set);
	allm_free(m->work.v);
	allm_free(m->state.v);
	allm_free(m->tmp[0].v);
	allm_free(m->tmp[1].v);
	allm_free(m->pool.v);
	allm_free(m->set_off);
	allm_free(m->set_n);
	allm_free(m->set_hash);
	allm_free(m->set_tab);
	for (uint32_t k = 0; m->next && k < m->n_sets; k++)
		allm_free(m->next[k]);
	allm_free(m->next);
	allm_free(m->level);
	allm_free(m->mask);
	allm_free(m);
}

static bool is_end(const struct allm_grammar_matcher *m, int32_t id)
{
	for (int32_t i = 0; i < m->n_end; i++)
		if (m->end_ids[i] == id)
			return true;
	return false;
}

bool allm_grammar_matcher_can_end(const struct allm_grammar_matcher *m)
{
	if (m->ended)
		return true;
	for (uint32_t i = 0; i < m->state.n; i++)
		if (m->state.v[i] == 0)
			return true;
	return false;
}

bool allm_grammar_matcher_accept(struct allm_grammar_matcher *m, int32_t id)
{
	const struct allm_grammar_vocab *v = m->g->vocab;
	if (is_end(m, id)) {
		if (!allm_grammar_matcher_can_end(m))
			return false;
		m->ended = true;
		return true;
	}
	if (m->ended || id < 0 || id >= v->n_ids || m->oom)
		return false;
	uint32_t len = vocab_len(v, id);
	if (!len)
		return false;
	const uint8_t *b = v->data + v->off[id];
	uint32_t cur = m->cur;
	for (uint32_t i = 0; i < len && cur; i++)
		cur = dfa_step(m, cur, b[i]);
	if (!cur || m->oom)
		return false;
	m->cur = cur;
	m->state.n = 0;
	for (uint32_t i = 0; i < m->set_n[cur]; i++)
		ids_push(m, &m->state, m->pool.v[m->set_off[cur] + i]);
	return true;
}

/* The state's key: order-independent sums of its stacks' structural hashes. */
static void state_key(const struct allm_grammar_matcher *m, uint64_t *k1, uint64_t *k2)
{
	uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;
	for (uint32_t i = 0; i < m->state.n; i++) {
		a += mix(m->nodes[m->state.v[i]].h1);
		b += mix(m->nodes[m->state.v[i]].h2 ^ 0x5bd1e995u);
	}
	*k1 = a | 1; /* never the empty slot's 0 */
	*k2 = b;
}

/* The mask of the current state over the vocabulary (end ids not set): the
 * vocabulary in byte order, each token from the longest prefix it shares with
 * the one before, a refused prefix skipping every token that shares it. */
static void compute_mask(struct allm_grammar_matcher *m, uint64_t *bits)
{
	const struct allm_grammar_vocab *v = m->g->vocab;
	memset(bits, 0, (size_t)m->n_words * sizeof(uint64_t));
	m->level[0] = m->cur;
	uint32_t valid = 0; /* levels 0..valid hold the previous token's prefixes */
	for (int32_t k = 0; k < v->n_sorted && !m->oom;) {
		int32_t id = v->sorted[k];
		const uint8_t *b = v->sdata + v->soff[k];
		uint32_t len = v->soff[k + 1] - v->soff[k], d = v->lcp[k] < valid ? v->lcp[k] : valid;
		bool ok = true;
		for (; d < len; d++)
			if (!(m->level[d + 1] = dfa_step(m, m->level[d], b[d]))) {
				ok = false;
				break;
			}
		valid = d;
		if (ok) {
			bits[id >> 6] |= 1ull << (id & 63);
			k++;
			continue;
		}
		/* every following token that shares the refused prefix b[0..d] */
		for (k++; k < v->n_sorted && v->lcp[k] >= d + 1; k++)
			;
	}
}

static struct mask_entry *cache_find(struct allm_grammar *g, uint64_t k1, uint64_t k2)
{
	if (!g->tab_cap)
		return NULL;
	for (uint32_t j = (uint32_t)k1 & (g->tab_cap - 1);; j = (j + 1) & (g->tab_cap - 1)) {
		struct mask_entry *e = &g->tab[j];
		if ((e->k1 == k1 && e->k2 == k2) || (!e->k1 && !e->k2))
			return e;
	}
}

void allm_grammar_masks_free(struct allm_grammar *g)
{
	for (uint32_t i = 0; i < g->tab_cap; i++)
		allm_free(g->tab[i].bits);
	allm_free(g->tab);
	g->tab = NULL;
	g->tab_cap = g->n_masks = 0;
	g->mask_bytes = 0;
}

/* Keeps a copy of bits for (k1, k2); a full cache starts over. Under g->mu. */
static void cache_put(struct allm_grammar *g, uint64_t k1, uint64_t k2, const uint64_t *bits, size_t bytes)
{
	if (g->mask_bytes + bytes > MASK_CACHE_BYTES)
		allm_grammar_masks_free(g);
	if ((g->n_masks + 1) * 2 > g->tab_cap) {
		uint32_t cap = g->tab_cap ? 2 * g->tab_cap : 64;
		struct mask_entry *t = allm_calloc(cap, sizeof(*t)), *old = g->tab;
		if (!t)
			return;
		uint32_t old_cap = g->tab_cap;
		g->tab = t;
		g->tab_cap = cap;
		for (uint32_t i = 0; i < old_cap; i++)
			if (old[i].k1 || old[i].k2)
				*cache_find(g, old[i].k1, old[i].k2) = old[i];
		allm_free(old);
	}
	struct mask_entry *e = cache_find(g, k1, k2);
	if (e->k1 || e->k2)
		return; /* another matcher put it first */
	uint64_t *copy = allm_malloc(bytes);
	if (!copy)
		return;
	memcpy(copy, bits, bytes);
	*e = (struct mask_entry){ k1, k2, copy };
	g->n_masks++;
	g->mask_bytes += bytes;
}

const uint64_t *allm_grammar_matcher_mask(struct allm_grammar_matcher *m)
{
	struct allm_grammar *g = m->g;
	size_t bytes = (size_t)m->n_words * sizeof(uint64_t);
	if (m->ended) {
		memset(m->mask, 0, bytes);
	} else {
		uint64_t k1, k2;
		state_key(m, &k1, &k2);
		pthread_mutex_lock(&g->mu);
		struct mask_entry *e = cache_find(g, k1, k2);
		bool hit = e && e->bits;
		if (hit) {
			memcpy(m->mask, e->bits, bytes);
			g->hits++;
		}
		pthread_mutex_unlock(&g->mu);
		if (!hit) {
			compute_mask(m, m->mask);
			pthread_mutex_lock(&g->mu);
			g->misses++;
			if (!m->oom)
				cache_put(g, k1, k2, m->mask, bytes);
			pthread_mutex_unlock(&g->mu);
		}
	}
	bool end = allm_grammar_matcher_can_end(m);
	for (int32_t i = 0; i < m->n_end; i++) {
		int32_t id = m->end_ids[i];
		if (id < 0 || id >= g->vocab->n_ids)
			continue;
		if (end)
			m->mask[id >> 6] |= 1ull << (id & 63);
		else
			m->mask[id >> 6] &= ~(1ull << (id & 63));
	}
	return m->mask;
}

int32_t allm_grammar_matcher_apply(struct allm_grammar_matcher *m, float *logits, int32_t vocab)
{
	const uint64_t *bits = allm_grammar_matcher_mask(m);
	int32_t n_allowed = 0, n_words = (vocab + 63) / 64;
	bool finite = false;
	for (int32_t w = 0; w < n_words; w++) {
		uint64_t x = w < (int32_t)m->n_words ? bits[w] : 0;
		int32_t base = w * 64, lim = vocab - base < 64 ? vocab - base : 64;
		n_allowed += __builtin_popcountll(lim == 64 ? x : x & ((1ull << lim) - 1));
		if (x == ~0ull) {
			for (int32_t i = 0; i < 64 && !finite; i++)
				finite = isfinite(logits[base + i]) || logits[base + i] > 0;
			continue;
		}
		for (int32_t i = 0; i < lim; i++) {
			if (!((x >> i) & 1))
				logits[base + i] = -INFINITY;
			else if (!finite)
				finite = logits[base + i] > -INFINITY;
		}
	}
	if (!n_allowed) {
		/* no token spells a continuation (a vocabulary without some byte):
		 * end the text rather than emit what the grammar refuses */
		atomic_fetch_add(&n_empty_masks, 1);
		for (int32_t i = 0; i < m->n_end; i++)
			if (m->end_ids[i] >= 0 && m->end_ids[i] < vocab)
				logits[m->end_ids[i]] = 0.0f, n_allowed++;
		m->ended = n_allowed > 0;
		return n_allowed;
	}
	if (!finite) /* the caller's own mask took everything the grammar allows */
		for (int32_t i = 0; i < vocab; i++)
			if ((bits[i >> 6] >> (i & 63)) & 1)
				logits[i] = 0.0f;
	return n_allowed;
}

/* The fewest bytes after which set s may end (UINT32_MAX: none, or s is dead). */
static uint32_t set_left(const struct allm_grammar_matcher *m, uint32_t s)
{
	uint32_t best = UINT32_MAX;
	for (uint32_t i = 0; s && i < m->set_n[s]; i++) {
		uint32_t x = m->nodes[m->pool.v[m->set_off[s] + i]].left;
		best = x < best ? x : best;
	}
	return best;
}

uint32_t allm_grammar_matcher_left(const struct allm_grammar_matcher *m)
{
	return m->ended ? 0 : set_left(m, m->cur);
}

uint32_t allm_grammar_matcher_left_after(struct allm_grammar_matcher *m, int32_t id)
{
	const struct allm_grammar_vocab *v = m->g->vocab;
	if (is_end(m, id))
		return allm_grammar_matcher_can_end(m) ? 0 : UINT32_MAX;
	if (m->ended || id < 0 || id >= v->n_ids || m->oom || !vocab_len(v, id))
		return UINT32_MAX;
	const uint8_t *b = v->data + v->off[id];
	uint32_t cur = m->cur;
	for (uint32_t i = 0; i < vocab_len(v, id) && cur; i++)
		cur = dfa_step(m, cur, b[i]);
	return m->oom ? UINT32_MAX : set_left(m, cur);
}

int32_t allm_grammar_matcher_apply_within(struct allm_grammar_matcher *m, float *logits, int32_t vocab,
					  uint32_t max_left)
{
	int32_t n = allm_grammar_matcher_apply(m, logits, vocab);
	if (n <= 0 || m->ended)
		return n;
	uint32_t best = UINT32_MAX;
	for (int32_t i = 0; i < vocab && best > max_left; i++)
		if (logits[i] > -INFINITY) {
			uint32_t x = allm_grammar_matcher_left_after(m, i);
			best = x < best ? x : best;
		}
	/* none ends in time: those that bring the end nearest */
	uint32_t keep = best > max_left ? best : max_left;
	n = 0;
	for (int32_t i = 0; i < vocab; i++)
		if (logits[i] > -INFINITY) {
			if (allm_grammar_matcher_left_after(m, i) > keep)
				logits[i] = -INFINITY;
			else
				n++;
		}
	return n;
}
