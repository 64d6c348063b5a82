/* GBNF (llama.cpp's grammar syntax) to the byte-level compiled form.
 *
 *   name ::= alternatives        one rule a line; a newline inside ( ) or after
 *                                '|' or '::=' continues it; '#' starts a comment
 *   "literal"  [class]  [^class]  .  name  ( group )
 *   x*  x+  x?  x{m}  x{m,}  x{m,n}  x{,n}
 *   escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH
 *
 * Refused: llama.cpp's token references (<[id]>, <name>) and negated tokens (!),
 * left recursion (the matcher expands rules top-down), rules that can never end.
 * Characters are Unicode code points as UTF-8: a class becomes the byte
 * sequences of its code points (one byte set for its ASCII part), so the
 * matcher sees bytes only. */
#include "grammar-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPEAT 10000  /* x{m,n}: m and n at most */
#define MAX_NEST 200      /* nested groups */
#define MAX_ELEMS (8u << 20)

struct gvec {
	struct gelem *v;
	uint32_t n, cap;
};

struct gbuild {
	struct gvec *rules; /* [n_rules] alternatives separated by GE_ALT, no GE_END yet */
	char **names;       /* [n_rules] NULL for generated rules */
	size_t *ref_at;     /* [n_rules] offset of the first reference (undefined rules) */
	bool *defined;
	uint32_t n_rules, cap_rules;
	uint32_t *hash;     /* open addressing over named rules: index + 1, 0 = empty */
	uint32_t hash_cap;
	uint64_t (*sets)[4];
	uint32_t n_sets, cap_sets;
	int32_t single[256]; /* set id of {b}, -1 until made */
	size_t n_elems;
	const char *src, *end;
	struct allm_err *err;
	int rc;
};

/* "GBNF line L col C: msg" for the place at. */
static int fail(struct gbuild *b, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct gbuild *b, const char *at, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int line = 1, col = 1;
	for (const char *p = b->src; p < at && p < b->end; p++) {
		if (*p == '\n')
			line++, col = 1;
		else if (((unsigned char)*p & 0xC0) != 0x80)
			col++;
	}
	if (!b->rc)
		b->rc = allm_err_set(b->err, -EINVAL, "GBNF line %d col %d: %s", line, col, msg);
	return b->rc;
}

static int oom(struct gbuild *b)
{
	if (!b->rc)
		b->rc = allm_err_set(b->err, -ENOMEM, "out of memory compiling a grammar");
	return b->rc;
}

static int push(struct gbuild *b, uint32_t rule, struct gelem e)
{
	struct gvec *v = &b->rules[rule];
	if (++b->n_elems > MAX_ELEMS) {
		if (!b->rc)
			b->rc = allm_err_set(b->err, -E2BIG, "GBNF: the grammar expands to more than %u elements", MAX_ELEMS);
		return b->rc;
	}
	if (v->n == v->cap) {
		uint32_t cap = v->cap ? 2 * v->cap : 8;
		struct gelem *n = allm_realloc(v->v, cap * sizeof(*n));
		if (!n)
			return oom(b);
		v->v = n;
		v->cap = cap;
	}
	v->v[v->n++] = e;
	return 0;
}

static int32_t new_rule(struct gbuild *b)
{
	if (b->n_rules == b->cap_rules) {
		uint32_t cap = b->cap_rules ? 2 * b->cap_rules : 64;
		struct gvec *r = allm_realloc(b->rules, cap * sizeof(*r));
		if (r)
			b->rules = r;
		char **nm = r ? allm_realloc(b->names, cap * sizeof(*nm)) : NULL;
		if (nm)
			b->names = nm;
		size_t *ra = nm ? allm_realloc(b->ref_at, cap * sizeof(*ra)) : NULL;
		if (ra)
			b->ref_at = ra;
		bool *d = ra ? allm_realloc(b->defined, cap * sizeof(*d)) : NULL;
		if (!d)
			return oom(b), -1;
		b->defined = d;
		b->cap_rules = cap;
	}
	uint32_t i = b->n_rules++;
	memset(&b->rules[i], 0, sizeof(b->rules[i]));
	b->names[i] = NULL;
	b->ref_at[i] = 0;
	b->defined[i] = true; /* generated rules are defined where made */
	return (int32_t)i;
}

static uint32_t name_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

/* The rule named s[0..n), made (undefined) at its first mention. -1 on error. */
static int32_t rule_named(struct gbuild *b, const char *s, size_t n)
{
	if (b->n_rules * 2 >= b->hash_cap) {
		uint32_t cap = b->hash_cap ? 2 * b->hash_cap : 256;
		uint32_t *h = allm_calloc(cap, sizeof(*h));
		if (!h)
			return oom(b), -1;
		for (uint32_t i = 0; i < b->n_rules; i++) {
			if (!b->names[i])
				continue;
			uint32_t j = name_hash(b->names[i], strlen(b->names[i])) & (cap - 1);
			while (h[j])
				j = (j + 1) & (cap - 1);
			h[j] = i + 1;
		}
		allm_free(b->hash);
		b->hash = h;
		b->hash_cap = cap;
	}
	uint32_t j = name_hash(s, n) & (b->hash_cap - 1);
	while (b->hash[j]) {
		const char *nm = b->names[b->hash[j] - 1];
		if (strlen(nm) == n && !memcmp(nm, s, n))
			return (int32_t)b->hash[j] - 1;
		j = (j + 1) & (b->hash_cap - 1);
	}
	int32_t r = new_rule(b);
	if (r < 0)
		return -1;
	if (!(b->names[r] = allm_malloc(n + 1)))
		return oom(b), -1;
	memcpy(b->names[r], s, n);
	b->names[r][n] = 0;
	b->defined[r] = false;
	b->ref_at[r] = (size_t)(s - b->src);
	b->hash[j] = (uint32_t)r + 1;
	return r;
}

static int32_t add_set(struct gbuild *b, const uint64_t s[4])
{
	int pop = 0, only = -1;
	for (int w = 0; w < 4; w++)
		if (s[w]) {
			pop += __builtin_popcountll(s[w]);
			only = w * 64 + __builtin_ctzll(s[w]);
		}
	if (pop == 1 && b->single[only] >= 0)
		return b->single[only];
	if (pop != 1)
		for (uint32_t i = 0; i < b->n_sets; i++)
			if (!memcmp(b->sets[i], s, sizeof(b->sets[i])))
				return (int32_t)i;
	if (b->n_sets == b->cap_sets) {
		uint32_t cap = b->cap_sets ? 2 * b->cap_sets : 64;
		uint64_t(*n)[4] = allm_realloc(b->sets, cap * sizeof(*n));
		if (!n)
			return oom(b), -1;
		b->sets = n;
		b->cap_sets = cap;
	}
	memcpy(b->sets[b->n_sets], s, sizeof(b->sets[0]));
	if (pop == 1)
		b->single[only] = (int32_t)b->n_sets;
	return (int32_t)b->n_sets++;
}

static int push_byte_range(struct gbuild *b, uint32_t rule, uint8_t lo, uint8_t hi)
{
	uint64_t s[4] = { 0 };
	for (unsigned c = lo; c <= hi; c++)
		s[c >> 6] |= 1ull << (c & 63);
	int32_t id = add_set(b, s);
	return id < 0 ? b->rc : push(b, rule, (struct gelem){ GE_BYTES, (uint32_t)id });
}

int allm_utf8_encode(uint32_t cp, uint8_t out[4])
{
	if (cp < 0x80)
		return out[0] = (uint8_t)cp, 1;
	if (cp < 0x800)
		return out[0] = (uint8_t)(0xC0 | cp >> 6), out[1] = (uint8_t)(0x80 | (cp & 0x3F)), 2;
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xE0 | cp >> 12);
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (uint8_t)(0xF0 | cp >> 18);
	out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

bool allm_utf8_next(const char **p, const char *end, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)*p;
	size_t n = (size_t)(end - *p);
	uint32_t c = s[0];
	int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
	if (!len || (size_t)len > n)
		return false;
	if (len == 1) {
		*cp = c;
		*p += 1;
		return true;
	}
	c &= 0x7Fu >> len;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return false;
		c = c << 6 | (s[i] & 0x3F);
	}
	static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return false;
	*cp = c;
	*p += len;
	return true;
}

/* --- character classes -------------------------------------------------------- */

static int by_lo(const void *a, const void *b)
{
	const struct cp_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

size_t allm_ranges_normalize(struct cp_range *r, size_t n)
{
	if (!n)
		return 0;
	qsort(r, n, sizeof(*r), by_lo);
	size_t k = 0;
	for (size_t i = 1; i < n; i++) {
		if (r[i].lo <= r[k].hi + 1) {
			if (r[i].hi > r[k].hi)
				r[k].hi = r[i].hi;
		} else {
			r[++k] = r[i];
		}
	}
	return k + 1;
}

/* Emits one alternative of rule: the byte ranges of code points lo..hi, all of
 * one encoded length, split so each byte position is one range (the classic
 * UTF-8 range split). */
static int utf8_seqs(struct gbuild *b, uint32_t rule, uint32_t lo, uint32_t hi, bool *first)
{
	if (lo <= 0xDFFF && hi >= 0xD800) { /* no surrogates in UTF-8 */
		int r = 0;
		if (lo < 0xD800)
			r = utf8_seqs(b, rule, lo, 0xD7FF, first);
		if (!r && hi > 0xDFFF)
			r = utf8_seqs(b, rule, 0xE000, hi, first);
		return r;
	}
	static const uint32_t bound[] = { 0x7F, 0x7FF, 0xFFFF };
	for (int i = 0; i < 3; i++)
		if (lo <= bound[i] && hi > bound[i]) {
			int r = utf8_seqs(b, rule, lo, bound[i], first);
			return r ? r : utf8_seqs(b, rule, bound[i] + 1, hi, first);
		}
	uint8_t a[4], z[4];
	int n = allm_utf8_encode(lo, a);
	allm_utf8_encode(hi, z);
	for (int i = 1; i < n; i++) {
		uint32_t m = (1u << (6 * i)) - 1;
		if ((lo & ~m) != (hi & ~m)) {
			if (lo & m) {
				int r = utf8_seqs(b, rule, lo, lo | m, first);
				return r ? r : utf8_seqs(b, rule, (lo | m) + 1, hi, first);
			}
			if ((hi & m) != m) {
				int r = utf8_seqs(b, rule, lo, (hi & ~m) - 1, first);
				return r ? r : utf8_seqs(b, rule, hi & ~m, hi, first);
			}
		}
	}
	if (!*first && push(b, rule, (struct gelem){ GE_ALT, 0 }))
		return b->rc;
	*first = false;
	for (int i = 0; i < n; i++)
		if (push_byte_range(b, rule, a[i], z[i]))
			return b->rc;
	return 0;
}

static int push_byte_range_set(struct gbuild *b, uint32_t into, const struct cp_range *r, size_t n)
{
	uint64_t s[4] = { 0 };
	for (size_t i = 0; i < n; i++)
		for (uint32_t c = r[i].lo; c <= r[i].hi; c++)
			s[c >> 6] |= 1ull << (c & 63);
	int32_t id = add_set(b, s);
	return id < 0 ? b->rc : push(b, into, (struct gelem){ GE_BYTES, (uint32_t)id });
}

/* Appends to rule `into` what matches one code point of r[0..n) (normalized):
 * a byte set when all are ASCII, else a reference to a new rule of sequences. */
static int push_class(struct gbuild *b, uint32_t into, const struct cp_range *r, size_t n)
{
	if (!n)
		return fail(b, b->end, "a character class that matches nothing");
	if (r[n - 1].hi < 0x80)
		return push_byte_range_set(b, into, r, n);
	int32_t rule = new_rule(b);
	if (rule < 0)
		return b->rc;
	bool first = true;
	uint64_t ascii[4] = { 0 };
	bool any_ascii = false;
	for (size_t i = 0; i < n; i++)
		for (uint32_t c = r[i].lo; c <= r[i].hi && c < 0x80; c++)
			ascii[c >> 6] |= 1ull << (c & 63), any_ascii = true;
	if (any_ascii) {
		int32_t id = add_set(b, ascii);
		if (id < 0 || push(b, (uint32_t)rule, (struct gelem){ GE_BYTES, (uint32_t)id }))
			return b->rc;
		first = false;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t lo = r[i].lo < 0x80 ? 0x80 : r[i].lo;
		if (r[i].hi >= 0x80 && utf8_seqs(b, (uint32_t)rule, lo, r[i].hi, &first))
			return b->rc;
	}
	return push(b, into, (struct gelem){ GE_REF, (uint32_t)rule });
}

/* --- the parser --------------------------------------------------------------- */

static bool is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static const char *skip_space(struct gbuild *b, const char *p, bool newline_ok)
{
	while (p < b->end) {
		if (*p == ' ' || *p == '\t') {
			p++;
		} else if (*p == '#') {
			while (p < b->end && *p != '\n' && *p != '\r')
				p++;
		} else if (newline_ok && (*p == '\n' || *p == '\r')) {
			p++;
		} else {
			break;
		}
	}
	return p;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or class at *p (escapes decoded) into *cp. */
static int parse_char(struct gbuild *b, const char **p, uint32_t *cp)
{
	const char *s = *p;
	if (s >= b->end)
		return fail(b, s, "unexpected end of grammar");
	if (*s != '\\') {
		if (!allm_utf8_next(p, b->end, cp))
			return fail(b, s, "invalid UTF-8");
		return 0;
	}
	if (s + 1 >= b->end)
		return fail(b, s, "unexpected end of grammar after '\\'");
	int digits = 0;
	switch (s[1]) {
	case 'x': digits = 2; break;
	case 'u': digits = 4; break;
	case 'U': digits = 8; break;
	case 'n': *cp = '\n'; break;
	case 'r': *cp = '\r'; break;
	case 't': *cp = '\t'; break;
	case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *cp = (uint8_t)s[1]; break;
	default: return fail(b, s, "unknown escape '\\%c'", s[1]);
	}
	if (!digits) {
		*p = s + 2;
		return 0;
	}
	uint32_t v = 0;
	for (int i = 0; i < digits; i++) {
		int h = s + 2 + i < b->end ? hexval(s[2 + i]) : -1;
		if (h < 0)
			return fail(b, s, "'\\%c' wants %d hex digits", s[1], digits);
		v = v << 4 | (uint32_t)h;
	}
	if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return fail(b, s, "escape U+%X is not a Unicode scalar value", v);
	*cp = v;
	*p = s + 2 + digits;
	return 0;
}

static const char *parse_alternates(struct gbuild *b, const char *p, uint32_t rule, int depth);

/* Moves rule's elements from `from` on into a new rule; returns its id or -1. */
static int32_t split_off(struct gbuild *b, uint32_t rule, uint32_t from)
{
	int32_t r = new_rule(b);
	if (r < 0)
		return -1;
	struct gvec *src = &b->rules[rule];
	for (uint32_t i = from; i < src->n; i++)
		if (push(b, (uint32_t)r, src->v[i]))
			return -1;
	b->n_elems -= src->n - from; /* moved, not added */
	src->n = from;
	return r;
}

/* Repeats the item rule[from..) min..max times (max UINT32_MAX: no bound). */
static int repeat(struct gbuild *b, uint32_t rule, uint32_t from, uint32_t min, uint32_t max, const char *at)
{
	if (min > MAX_REPEAT || (max != UINT32_MAX && max > MAX_REPEAT))
		return fail(b, at, "repetition bound above %d", MAX_REPEAT);
	if (max < min)
		return fail(b, at, "repetition {%u,%u}: the maximum is below the minimum", min, max);
	struct gvec *v = &b->rules[rule];
	if (v->n == from)
		return fail(b, at, "a repetition of nothing");
	struct gelem x;
	if (v->n - from == 1) {
		x = v->v[from];
		v->n = from;
		b->n_elems--;
	} else {
		int32_t r = split_off(b, rule, from);
		if (r < 0)
			return b->rc;
		x = (struct gelem){ GE_REF, (uint32_t)r };
	}
	for (uint32_t i = 0; i < min; i++)
		if (push(b, rule, x))
			return b->rc;
	if (max == UINT32_MAX) { /* star ::= x star | "" */
		int32_t star = new_rule(b);
		if (star < 0 || push(b, (uint32_t)star, x) ||
		    push(b, (uint32_t)star, (struct gelem){ GE_REF, (uint32_t)star }) ||
		    push(b, (uint32_t)star, (struct gelem){ GE_ALT, 0 }) ||
		    push(b, rule, (struct gelem){ GE_REF, (uint32_t)star }))
			return b->rc;
		return 0;
	}
	/* opt_k ::= x opt_{k+1} | "" from the innermost out */
	int32_t inner = -1;
	for (uint32_t k = min; k < max; k++) {
		int32_t o = new_rule(b);
		if (o < 0 || push(b, (uint32_t)o, x) ||
		    (inner >= 0 && push(b, (uint32_t)o, (struct gelem){ GE_REF, (uint32_t)inner })) ||
		    push(b, (uint32_t)o, (struct gelem){ GE_ALT, 0 }))
			return b->rc;
		inner = o;
	}
	return inner >= 0 ? push(b, rule, (struct gelem){ GE_REF, (uint32_t)inner }) : 0;
}

static const char *parse_uint(const char *p, const char *end, uint32_t *v)
{
	uint64_t x = 0;
	const char *s = p;
	while (p < end && *p >= '0' && *p <= '9' && x <= 100000000)
		x = x * 10 + (uint64_t)(*p++ - '0');
	*v = x > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)x;
	return p == s ? NULL : p;
}

static const char *parse_class(struct gbuild *b, const char *p, uint32_t rule)
{
	const char *start = p++;
	bool neg = p < b->end && *p == '^';
	if (neg)
		p++;
	struct cp_range *r = NULL;
	size_t n = 0, cap = 0;
	while (p < b->end && *p != ']') {
		uint32_t lo, hi;
		if (parse_char(b, &p, &lo))
			goto out;
		hi = lo;
		if (p + 1 < b->end && *p == '-' && p[1] != ']') {
			p++;
			if (parse_char(b, &p, &hi))
				goto out;
			if (hi < lo) {
				fail(b, p, "range U+%X-U+%X runs backwards", lo, hi);
				goto out;
			}
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			struct cp_range *nr = allm_realloc(r, cap * sizeof(*nr));
			if (!nr) {
				oom(b);
				goto out;
			}
			r = nr;
		}
		r[n++] = (struct cp_range){ lo, hi };
	}
	if (p >= b->end) {
		fail(b, start, "character class not closed with ']'");
		goto out;
	}
	p++;
	n = allm_ranges_normalize(r, n);
	if (neg) { /* the complement within U+0000..U+10FFFF */
		struct cp_range *c = allm_malloc((n + 1) * sizeof(*c));
		if (!c) {
			oom(b);
			goto out;
		}
		size_t k = 0;
		uint32_t next = 0;
		for (size_t i = 0; i < n; i++) {
			if (r[i].lo > next)
				c[k++] = (struct cp_range){ next, r[i].lo - 1 };
			next = r[i].hi + 1;
		}
		if (next <= 0x10FFFF)
			c[k++] = (struct cp_range){ next, 0x10FFFF };
		allm_free(r);
		r = c;
		n = k;
	}
	if (!n) {
		fail(b, start, "a character class that matches nothing");
		goto out;
	}
	push_class(b, rule, r, n);
out:
	allm_free(r);
	return b->rc ? NULL : p;
}

static const char *parse_sequence(struct gbuild *b, const char *p, uint32_t rule, int depth)
{
	bool nested = depth > 0;
	uint32_t item = UINT32_MAX; /* where the last item starts (for a repetition) */
	while (p < b->end) {
		const char *at = p;
		char c = *p;
		if (c == '"') {
			item = b->rules[rule].n;
			p++;
			while (p < b->end && *p != '"') {
				uint32_t cp;
				uint8_t u[4];
				if (parse_char(b, &p, &cp))
					return NULL;
				int k = allm_utf8_encode(cp, u);
				for (int i = 0; i < k; i++)
					if (push_byte_range(b, rule, u[i], u[i]))
						return NULL;
			}
			if (p >= b->end)
				return fail(b, at, "string literal not closed with '\"'"), NULL;
			p++;
		} else if (c == '[') {
			item = b->rules[rule].n;
			if (!(p = parse_class(b, p, rule)))
				return NULL;
		} else if (c == '.') {
			item = b->rules[rule].n;
			struct cp_range any = { 0, 0x10FFFF };
			if (push_class(b, rule, &any, 1))
				return NULL;
			p++;
		} else if (is_word(c)) {
			const char *s = p;
			while (p < b->end && is_word(*p))
				p++;
			const char *q = skip_space(b, p, true);
			if (q + 2 < b->end && !memcmp(q, "::=", 3)) {
				if (nested)
					return fail(b, s, "a new rule inside ( )"), NULL;
				return s; /* the next rule starts here */
			}
			item = b->rules[rule].n;
			int32_t r = rule_named(b, s, (size_t)(p - s));
			if (r < 0 || push(b, rule, (struct gelem){ GE_REF, (uint32_t)r }))
				return NULL;
		} else if (c == '(') {
			if (depth >= MAX_NEST)
				return fail(b, p, "groups nested deeper than %d", MAX_NEST), NULL;
			item = b->rules[rule].n;
			int32_t g = new_rule(b);
			if (g < 0)
				return NULL;
			p = skip_space(b, p + 1, true);
			if (!(p = parse_alternates(b, p, (uint32_t)g, depth + 1)))
				return NULL;
			if (p >= b->end || *p != ')')
				return fail(b, at, "'(' not closed with ')'"), NULL;
			p++;
			/* a group of one alternative is spliced in; else referenced */
			struct gvec *gv = &b->rules[g];
			bool one = true;
			for (uint32_t i = 0; i < gv->n; i++)
				one &= gv->v[i].type != GE_ALT;
			if (one) {
				for (uint32_t i = 0; i < gv->n; i++)
					if (push(b, rule, gv->v[i]))
						return NULL;
				b->n_elems -= gv->n;
				gv->n = 0; /* left empty, never referenced */
			} else if (push(b, rule, (struct gelem){ GE_REF, (uint32_t)g })) {
				return NULL;
			}
			if (b->rules[rule].n == item && p < b->end && strchr("*+?{", *p)) {
				/* an empty group repeated: nothing to repeat */
				item = UINT32_MAX;
			}
		} else if (c == '*' || c == '+' || c == '?' || c == '{') {
			if (item == UINT32_MAX)
				return fail(b, p, "'%c' with nothing before it to repeat", c), NULL;
			uint32_t min = 0, max = UINT32_MAX;
			if (c == '+')
				min = 1;
			else if (c == '?')
				max = 1;
			p++;
			if (c == '{') {
				p = skip_space(b, p, nested);
				const char *q = parse_uint(p, b->end, &min);
				if (!q && (p >= b->end || *p != ','))
					return fail(b, at, "'{' wants {m}, {m,}, {m,n} or {,n}"), NULL;
				p = q ? skip_space(b, q, nested) : p;
				if (p < b->end && *p == ',') {
					p = skip_space(b, p + 1, nested);
					if ((q = parse_uint(p, b->end, &max)))
						p = skip_space(b, q, nested);
					else
						max = UINT32_MAX;
				} else {
					max = min;
				}
				if (p >= b->end || *p != '}')
					return fail(b, at, "'{' not closed with '}'"), NULL;
				p++;
			}
			if (repeat(b, rule, item, min, max, at))
				return NULL;
			item = UINT32_MAX; /* x** is not repeated again */
		} else if (c == '<' || c == '!') {
			return fail(b, p, "token references ('%c') are not supported", c), NULL;
		} else {
			break;
		}
		p = skip_space(b, p, nested);
	}
	return p;
}

static const char *parse_alternates(struct gbuild *b, const char *p, uint32_t rule, int depth)
{
	if (!(p = parse_sequence(b, p, rule, depth)))
		return NULL;
	while (p < b->end && *p == '|') {
		if (push(b, rule, (struct gelem){ GE_ALT, 0 }))
			return NULL;
		p = skip_space(b, p + 1, true);
		if (!(p = parse_sequence(b, p, rule, depth)))
			return NULL;
	}
	return p;
}

static const char *parse_rule(struct gbuild *b, const char *p)
{
	const char *s = p;
	while (p < b->end && is_word(*p))
		p++;
	if (p == s)
		return fail(b, s, "expected a rule name"), NULL;
	int32_t r = rule_named(b, s, (size_t)(p - s));
	if (r < 0)
		return NULL;
	if (b->defined[r])
		return fail(b, s, "rule '%s' defined twice", b->names[r]), NULL;
	b->defined[r] = true;
	p = skip_space(b, p, false);
	if (p + 3 > b->end || memcmp(p, "::=", 3))
		return fail(b, p, "expected '::=' after rule name '%s'", b->names[r]), NULL;
	p = skip_space(b, p + 3, true);
	if (!(p = parse_alternates(b, p, (uint32_t)r, 0)))
		return NULL;
	if (p < b->end && *p != '\n' && *p != '\r' && !is_word(*p))
		return fail(b, p, "unexpected '%c'", *p), NULL;
	return skip_space(b, p, true);
}

/* --- checks and the flat form ------------------------------------------------- */

/* Whether rule r's alternative starting at a can match the empty string, given
 * nullable[] so far. */
static bool alt_nullable(const struct gvec *v, uint32_t a, const bool *nullable)
{
	for (uint32_t i = a; i < v->n && v->v[i].type != GE_ALT; i++)
		if (v->v[i].type == GE_BYTES || !nullable[v->v[i].arg])
			return false;
	return true;
}

/* Whether the alternative can derive a finite byte string, given productive[]. */
static bool alt_productive(const struct gvec *v, uint32_t a, const bool *productive)
{
	for (uint32_t i = a; i < v->n && v->v[i].type != GE_ALT; i++)
		if (v->v[i].type == GE_REF && !productive[v->v[i].arg])
			return false;
	return true;
}

/* Fixpoint of f over every alternative: out[r] when some alternative of r holds. */
static void fixpoint(const struct gbuild *b, bool *out, bool (*f)(const struct gvec *, uint32_t, const bool *))
{
	for (bool changed = true; changed;) {
		changed = false;
		for (uint32_t r = 0; r < b->n_rules; r++) {
			if (out[r])
				continue;
			const struct gvec *v = &b->rules[r];
			for (uint32_t a = 0; a <= v->n && !out[r]; a++) {
				if (a == 0 || v->v[a - 1].type == GE_ALT)
					if (f(v, a, out))
						out[r] = changed = true;
			}
		}
	}
}

/* Left recursion that grows the stack: a leftmost reference u -> v that is not
 * a tail call (more follows it in its alternative), with u reachable from v
 * through leftmost references. Cycles of tail calls alone are harmless: the
 * matcher's expansion meets the same (position, stack) again and stops. Edges
 * of rule r: to[off[r] .. off[r + 1]), tail[] marking tail calls. Returns u or
 * -1. */
static int64_t left_recursive(uint32_t n, const uint32_t *off, const uint32_t *to, const bool *tail, uint32_t *mark,
			      uint32_t *stack)
{
	uint32_t gen = 0;
	for (uint32_t u = 0; u < n; u++)
		for (uint32_t e = off[u]; e < off[u + 1]; e++) {
			if (tail[e])
				continue;
			gen++;
			uint32_t sp = 0;
			stack[sp++] = to[e];
			mark[to[e]] = gen;
			while (sp) {
				uint32_t r = stack[--sp];
				if (r == u)
					return u;
				for (uint32_t f = off[r]; f < off[r + 1]; f++)
					if (mark[to[f]] != gen) {
						mark[to[f]] = gen;
						stack[sp++] = to[f];
					}
			}
		}
	return -1;
}

/* Refuses rules that can never end and left recursion. */
static int check(struct gbuild *b)
{
	int rc = 0;
	uint32_t n = b->n_rules;
	size_t n_el = 0;
	for (uint32_t r = 0; r < n; r++)
		n_el += b->rules[r].n;
	bool *nullable = allm_calloc(n, sizeof(bool)), *productive = allm_calloc(n, sizeof(bool));
	uint32_t *mark = allm_calloc(n, sizeof(uint32_t));
	uint32_t *stack = allm_malloc((size_t)n * sizeof(uint32_t));
	uint32_t *off = allm_malloc(((size_t)n + 1) * sizeof(uint32_t)), *to = allm_malloc((n_el + 1) * sizeof(uint32_t));
	bool *tail = allm_malloc((n_el + 1) * sizeof(bool));
	if (!nullable || !productive || !mark || !stack || !off || !to || !tail) {
		rc = oom(b);
		goto out;
	}
	fixpoint(b, nullable, alt_nullable);
	fixpoint(b, productive, alt_productive);
	/* name the rule that recurses into itself where one does (its users
	 * cannot end only because of it) */
	int64_t bad = -1;
	for (uint32_t r = 0; r < n; r++) {
		if (productive[r])
			continue;
		if (bad < 0)
			bad = r;
		for (uint32_t i = 0; i < b->rules[r].n; i++)
			if (b->rules[r].v[i].type == GE_REF && b->rules[r].v[i].arg == r) {
				bad = r;
				r = n - 1;
				break;
			}
	}
	for (uint32_t r = (uint32_t)(bad < 0 ? n : bad); r < n; r++)
		if (!productive[r]) {
			const char *nm = b->names[r];
			for (uint32_t q = 0; !nm && q < n; q++) /* a generated rule: name its user */
				for (uint32_t i = 0; b->names[q] && i < b->rules[q].n; i++)
					if (b->rules[q].v[i].type == GE_REF && b->rules[q].v[i].arg == r)
						nm = b->names[q];
			rc = allm_err_set(b->err, -EINVAL, "GBNF: rule '%s' can never end (every alternative recurses)",
					  nm ? nm : "?");
			goto out;
		}
	uint32_t k = 0;
	for (uint32_t r = 0; r < n; r++) {
		off[r] = k;
		const struct gvec *v = &b->rules[r];
		bool at_start = true;
		for (uint32_t i = 0; i < v->n; i++) {
			struct gelem e = v->v[i];
			if (e.type == GE_ALT) {
				at_start = true;
			} else if (at_start && e.type == GE_BYTES) {
				at_start = false;
			} else if (at_start && e.type == GE_REF) {
				tail[k] = i + 1 == v->n || v->v[i + 1].type == GE_ALT;
				to[k++] = e.arg;
				at_start = nullable[e.arg];
			}
		}
	}
	off[n] = k;
	int64_t lr = left_recursive(n, off, to, tail, mark, stack);
	if (lr >= 0) {
		const char *nm = b->names[lr];
		rc = allm_err_set(b->err, -EINVAL, "GBNF: rule '%s' is left-recursive (refused: write it with repetition)",
				  nm ? nm : "(a group)");
	}
out:
	allm_free(nullable);
	allm_free(productive);
	allm_free(mark);
	allm_free(stack);
	allm_free(off);
	allm_free(to);
	allm_free(tail);
	return rc;
}

static int flatten(struct gbuild *b, uint32_t root, struct allm_grammar **ret)
{
	struct allm_grammar *g = allm_calloc(1, sizeof(*g));
	if (!g)
		return oom(b);
	size_t n = 0;
	for (uint32_t r = 0; r < b->n_rules; r++)
		n += b->rules[r].n + 1;
	g->el = allm_malloc(n * sizeof(*g->el));
	g->rule_start = allm_malloc((size_t)b->n_rules * sizeof(uint32_t));
	g->sets = allm_malloc((size_t)(b->n_sets ? b->n_sets : 1) * sizeof(*g->sets));
	if (!g->el || !g->rule_start || !g->sets) {
		allm_free(g->el);
		allm_free(g->rule_start);
		allm_free(g->sets);
		allm_free(g);
		return oom(b);
	}
	uint32_t k = 0;
	for (uint32_t r = 0; r < b->n_rules; r++) {
		g->rule_start[r] = k;
		if (b->rules[r].n) /* a group spliced into its user is left empty */
			memcpy(g->el + k, b->rules[r].v, b->rules[r].n * sizeof(*g->el));
		k += b->rules[r].n;
		g->el[k++] = (struct gelem){ GE_END, 0 };
	}
	if (b->n_sets)
		memcpy(g->sets, b->sets, (size_t)b->n_sets * sizeof(*g->sets));
	g->n_el = k;
	g->n_rules = b->n_rules;
	g->n_sets = b->n_sets;
	g->root = root;
	atomic_init(&g->refs, 1);
	pthread_mutex_init(&g->mu, NULL);
	*ret = g;
	return 0;
}

int allm_gbnf_compile(const char *text, size_t len, struct allm_grammar **ret, struct allm_err *err)
{
	struct gbuild b = { .src = text, .end = text + len, .err = err };
	memset(b.single, -1, sizeof(b.single));
	int rc = 0;
	const char *p = skip_space(&b, text, true);
	if (len > ALLM_GRAMMAR_GBNF_MAX) {
		rc = allm_err_set(err, -E2BIG, "GBNF: %zu bytes (at most %u)", len, ALLM_GRAMMAR_GBNF_MAX);
		goto out;
	}
	while (p && p < b.end)
		p = parse_rule(&b, p);
	if (b.rc) {
		rc = b.rc;
		goto out;
	}
	int32_t root = -1;
	for (uint32_t r = 0; r < b.n_rules; r++) {
		if (!b.defined[r]) {
			rc = fail(&b, b.src + b.ref_at[r], "rule '%s' is used but never defined", b.names[r]);
			goto out;
		}
		if (b.names[r] && !strcmp(b.names[r], "root"))
			root = (int32_t)r;
	}
	if (root < 0) {
		rc = allm_err_set(err, -EINVAL, "GBNF: no rule named 'root' (where generation starts)");
		goto out;
	}
	if ((rc = check(&b)) || (rc = flatten(&b, (uint32_t)root, ret)))
		goto out;
out:
	for (uint32_t r = 0; r < b.n_rules; r++) {
		allm_free(b.rules[r].v);
		allm_free(b.names[r]);
	}
	allm_free(b.rules);
	allm_free(b.names);
	allm_free(b.ref_at);
	allm_free(b.defined);
	allm_free(b.hash);
	allm_free(b.sets);
	return rc;
}
