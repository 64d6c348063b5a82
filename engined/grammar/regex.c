/* Regular expressions (the common subset of Python's re, JavaScript's and
 * ECMA-262's as JSON Schema's "pattern" uses them) as a GBNF expression.
 *
 * Taken: literals, '.', classes [...] and [^...] with ranges, \d \D \w \W \s \S,
 * escapes \n \r \t \f \v \0 \xHH \uHHHH and escaped metacharacters, groups
 * (...), (?:...), (?P<name>...), (?<name>...), alternation, * + ? {m} {m,}
 * {m,n} (a lazy '?' after them changes nothing a grammar can see), '^' at the
 * start and '$' at the end (the whole text always matches).
 * Refused, with the place: backreferences, lookaround, \b \B, inline flags,
 * anchors elsewhere.
 *
 * In a JSON string (json_string), the expression generates the string's
 * escaped form: '"' and '\' as \" and \\, control characters left out of classes
 * and written as escapes where literal. */
#include "grammar-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 100
#define MAX_RANGES 4096

struct rx {
	const char *src, *p, *end;
	bool json;
	struct sbuf *out;
	struct allm_err *err;
	int rc;
};

static int rfail(struct rx *r, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rfail(struct rx *r, const char *at, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!r->rc)
		r->rc = allm_err_set(r->err, -EINVAL, "regex at %d: %s", (int)(at - r->src) + 1, msg);
	return r->rc;
}

/* One code point as GBNF escapes, for classes and literals alike. */
static void put_cp(struct sbuf *o, uint32_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ' || c == '_')
		sbuf_printf(o, "%c", (char)c);
	else if (c < 0x100)
		sbuf_printf(o, "\\x%02X", c);
	else if (c < 0x10000)
		sbuf_printf(o, "\\u%04X", c);
	else
		sbuf_printf(o, "\\U%08X", c);
}

/* A literal code point: as is, or in a JSON string its escaped form. */
static void put_literal(struct rx *r, uint32_t c)
{
	if (r->json && (c == '"' || c == '\\')) {
		sbuf_printf(r->out, " \"\\\\\\%c\" ", (char)c);
		return;
	}
	if (r->json && c < 0x20) {
		static const char short_esc[] = { ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't' };
		if (c < sizeof(short_esc) && short_esc[c])
			sbuf_printf(r->out, " \"\\\\%c\" ", short_esc[c]);
		else
			sbuf_printf(r->out, " \"\\\\u%04X\" ", c);
		return;
	}
	sbuf_puts(r->out, " [");
	put_cp(r->out, c);
	sbuf_puts(r->out, "] ");
}

struct cls {
	struct cp_range v[MAX_RANGES];
	size_t n;
};

static int cls_add(struct rx *r, struct cls *c, uint32_t lo, uint32_t hi)
{
	if (c->n == MAX_RANGES)
		return rfail(r, r->p, "character class too large");
	c->v[c->n++] = (struct cp_range){ lo, hi };
	return 0;
}

/* c's complement within U+0000..U+10FFFF (c normalized). */
static void cls_negate(struct cls *c)
{
	struct cp_range tmp[MAX_RANGES + 1];
	size_t k = 0;
	uint32_t next = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].lo > next)
			tmp[k++] = (struct cp_range){ next, c->v[i].lo - 1 };
		next = c->v[i].hi + 1;
	}
	if (next <= 0x10FFFF)
		tmp[k++] = (struct cp_range){ next, 0x10FFFF };
	memcpy(c->v, tmp, (k < MAX_RANGES ? k : MAX_RANGES) * sizeof(tmp[0]));
	c->n = k < MAX_RANGES ? k : MAX_RANGES;
}

static int add_shorthand(struct rx *r, struct cls *c, char e)
{
	struct cls t = { .n = 0 };
	switch (e | 0x20) {
	case 'd': cls_add(r, &t, '0', '9'); break;
	case 'w':
		cls_add(r, &t, '0', '9'), cls_add(r, &t, 'A', 'Z'), cls_add(r, &t, 'a', 'z'), cls_add(r, &t, '_', '_');
		break;
	case 's': cls_add(r, &t, '\t', '\r'), cls_add(r, &t, ' ', ' '); break;
	}
	t.n = allm_ranges_normalize(t.v, t.n);
	if (e >= 'A' && e <= 'Z')
		cls_negate(&t);
	for (size_t i = 0; i < t.n; i++)
		if (cls_add(r, c, t.v[i].lo, t.v[i].hi))
			return r->rc;
	return 0;
}

static int hexv(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* An escape at r->p ('\' already consumed): a code point in *cp, or a shorthand
 * class added to c (when c != NULL; *cp = UINT32_MAX then). */
static int parse_escape(struct rx *r, struct cls *c, uint32_t *cp)
{
	const char *at = r->p - 1;
	if (r->p >= r->end)
		return rfail(r, at, "'\\' at the end");
	char e = *r->p++;
	int digits = 0;
	*cp = UINT32_MAX;
	switch (e) {
	case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
		if (!c)
			return rfail(r, at, "'\\%c' inside a range", e);
		return add_shorthand(r, c, e);
	case 'n': *cp = '\n'; return 0;
	case 'r': *cp = '\r'; return 0;
	case 't': *cp = '\t'; return 0;
	case 'f': *cp = '\f'; return 0;
	case 'v': *cp = '\v'; return 0;
	case '0': *cp = 0; return 0;
	case 'x': digits = 2; break;
	case 'u': digits = 4; break;
	case 'b': case 'B': return rfail(r, at, "word boundaries (\\%c) are not supported", e);
	default:
		if (e >= '1' && e <= '9')
			return rfail(r, at, "backreferences are not supported");
		if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
			return rfail(r, at, "unknown escape '\\%c'", e);
		r->p--;
		if (!allm_utf8_next(&r->p, r->end, cp))
			return rfail(r, at, "invalid UTF-8");
		return 0;
	}
	uint32_t v = 0;
	for (int i = 0; i < digits; i++) {
		int h = r->p < r->end ? hexv(*r->p) : -1;
		if (h < 0)
			return rfail(r, at, "'\\%c' wants %d hex digits", e, digits);
		v = v << 4 | (uint32_t)h;
		r->p++;
	}
	if (v >= 0xD800 && v <= 0xDFFF)
		return rfail(r, at, "a surrogate escape (\\u%04X)", v);
	*cp = v;
	return 0;
}

/* Writes class c (normalized): in a JSON string without quotes, backslashes and
 * controls, each of the first two as its escape instead. */
static int put_class(struct rx *r, struct cls *c, const char *at)
{
	bool quote = false, bslash = false;
	struct cls keep = { .n = 0 };
	for (size_t i = 0; i < c->n; i++) {
		uint32_t lo = c->v[i].lo, hi = c->v[i].hi;
		if (!r->json) {
			cls_add(r, &keep, lo, hi);
			continue;
		}
		/* cut out 0x00-0x1F, '"' (0x22) and '\' (0x5C) */
		uint32_t cuts[][2] = { { 0, 0x1F }, { 0x22, 0x22 }, { 0x5C, 0x5C } };
		quote |= lo <= 0x22 && hi >= 0x22;
		bslash |= lo <= 0x5C && hi >= 0x5C;
		uint32_t s = lo;
		for (int k = 0; k < 3 && s <= hi; k++) {
			if (cuts[k][1] < s || cuts[k][0] > hi)
				continue;
			if (cuts[k][0] > s)
				cls_add(r, &keep, s, cuts[k][0] - 1);
			s = cuts[k][1] + 1;
		}
		if (s <= hi)
			cls_add(r, &keep, s, hi);
	}
	if (r->rc)
		return r->rc;
	if (!keep.n && !quote && !bslash)
		return rfail(r, at, "a class that matches nothing%s", r->json ? " a JSON string can hold unescaped" : "");
	sbuf_puts(r->out, " (");
	bool first = true;
	if (keep.n) {
		sbuf_puts(r->out, "[");
		for (size_t i = 0; i < keep.n; i++) {
			put_cp(r->out, keep.v[i].lo);
			if (keep.v[i].hi != keep.v[i].lo) {
				sbuf_puts(r->out, "-");
				put_cp(r->out, keep.v[i].hi);
			}
		}
		sbuf_puts(r->out, "]");
		first = false;
	}
	if (quote)
		sbuf_printf(r->out, "%s\"\\\\\\\"\"", first ? "" : " | "), first = false;
	if (bslash)
		sbuf_printf(r->out, "%s\"\\\\\\\\\"", first ? "" : " | ");
	sbuf_puts(r->out, ") ");
	return 0;
}

static int parse_class(struct rx *r)
{
	const char *at = r->p++;
	struct cls *cl = allm_malloc(sizeof(*cl));
	if (!cl)
		return r->rc = allm_err_set(r->err, -ENOMEM, "out of memory");
	cl->n = 0;
	bool neg = r->p < r->end && *r->p == '^';
	if (neg)
		r->p++;
	bool first = true;
	while (r->p < r->end && (*r->p != ']' || first)) {
		first = false;
		uint32_t lo, hi;
		if (*r->p == '\\') {
			r->p++;
			if (parse_escape(r, cl, &lo))
				goto out;
			if (lo == UINT32_MAX)
				continue; /* a shorthand, added */
		} else if (*r->p == '[' && r->p + 1 < r->end && r->p[1] == ':') {
			rfail(r, r->p, "POSIX classes ([:name:]) are not supported");
			goto out;
		} else if (!allm_utf8_next(&r->p, r->end, &lo)) {
			rfail(r, r->p, "invalid UTF-8");
			goto out;
		}
		hi = lo;
		if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
			r->p++;
			if (*r->p == '\\') {
				r->p++;
				if (parse_escape(r, NULL, &hi))
					goto out;
			} else if (!allm_utf8_next(&r->p, r->end, &hi)) {
				rfail(r, r->p, "invalid UTF-8");
				goto out;
			}
			if (hi < lo) {
				rfail(r, at, "range runs backwards");
				goto out;
			}
		}
		if (cls_add(r, cl, lo, hi))
			goto out;
	}
	if (r->p >= r->end) {
		rfail(r, at, "'[' not closed with ']'");
		goto out;
	}
	r->p++;
	cl->n = allm_ranges_normalize(cl->v, cl->n);
	if (neg)
		cls_negate(cl);
	put_class(r, cl, at);
out:
	allm_free(cl);
	return r->rc;
}

static int parse_alt(struct rx *r, int depth);

static int parse_atom(struct rx *r, int depth)
{
	const char *at = r->p;
	char c = *r->p;
	if (c == '(') {
		r->p++;
		if (r->p < r->end && *r->p == '?') {
			if (r->p + 1 < r->end && r->p[1] == ':') {
				r->p += 2;
			} else if (r->p + 2 < r->end && (r->p[1] == 'P' || r->p[1] == '<') &&
				   (r->p[1] == 'P' ? r->p[2] == '<' : (r->p[2] != '=' && r->p[2] != '!'))) {
				const char *q = memchr(r->p, '>', (size_t)(r->end - r->p));
				if (!q)
					return rfail(r, at, "a named group's name not closed with '>'");
				r->p = q + 1;
			} else {
				return rfail(r, at, "lookaround and inline flags are not supported");
			}
		}
		if (depth >= MAX_DEPTH)
			return rfail(r, at, "groups nested deeper than %d", MAX_DEPTH);
		sbuf_puts(r->out, " (");
		if (parse_alt(r, depth + 1))
			return r->rc;
		if (r->p >= r->end || *r->p != ')')
			return rfail(r, at, "'(' not closed with ')'");
		r->p++;
		sbuf_puts(r->out, ") ");
		return 0;
	}
	if (c == '[')
		return parse_class(r);
	if (c == '.') {
		r->p++;
		struct cls *cl = allm_malloc(sizeof(*cl));
		if (!cl)
			return r->rc = allm_err_set(r->err, -ENOMEM, "out of memory");
		cl->n = 0;
		cls_add(r, cl, 0, '\n' - 1);
		cls_add(r, cl, '\n' + 1, 0x10FFFF);
		put_class(r, cl, at);
		allm_free(cl);
		return r->rc;
	}
	if (c == '\\') {
		r->p++;
		struct cls *cl = allm_malloc(sizeof(*cl));
		uint32_t cp;
		if (!cl)
			return r->rc = allm_err_set(r->err, -ENOMEM, "out of memory");
		cl->n = 0;
		if (!parse_escape(r, cl, &cp)) {
			if (cp == UINT32_MAX) {
				cl->n = allm_ranges_normalize(cl->v, cl->n);
				put_class(r, cl, at);
			} else {
				put_literal(r, cp);
			}
		}
		allm_free(cl);
		return r->rc;
	}
	if (c == '^' || c == '$')
		return rfail(r, at, "'%c' is taken only at the %s of the pattern", c, c == '^' ? "start" : "end");
	if (c == '*' || c == '+' || c == '?' || c == '{')
		return rfail(r, at, "'%c' with nothing before it to repeat", c);
	uint32_t cp;
	if (!allm_utf8_next(&r->p, r->end, &cp))
		return rfail(r, at, "invalid UTF-8");
	put_literal(r, cp);
	return 0;
}

static bool parse_num(struct rx *r, uint32_t *v)
{
	const char *s = r->p;
	uint64_t x = 0;
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9' && x < 1000000)
		x = x * 10 + (uint64_t)(*r->p++ - '0');
	*v = (uint32_t)x;
	return r->p != s;
}

/* A quantifier at r->p, if any, as GBNF after the atom just written. */
static int parse_quant(struct rx *r)
{
	if (r->p >= r->end)
		return 0;
	const char *at = r->p;
	char c = *r->p;
	if (c == '*' || c == '+' || c == '?') {
		sbuf_printf(r->out, "%c ", c);
		r->p++;
	} else if (c == '{') {
		/* "{" not followed by a valid bound is a literal in Python and JS */
		const char *save = r->p++;
		uint32_t lo = 0, hi = 0;
		bool has_lo = parse_num(r, &lo), has_hi = false, comma = false;
		if (r->p < r->end && *r->p == ',') {
			comma = true;
			r->p++;
			has_hi = parse_num(r, &hi);
		}
		if (!has_lo || r->p >= r->end || *r->p != '}') {
			r->p = save;
			return rfail(r, at, "'{' is not a repetition {m}, {m,} or {m,n} (write \\{ for the character)");
		}
		r->p++;
		if (has_hi && hi < lo)
			return rfail(r, at, "repetition {%u,%u}: the maximum is below the minimum", lo, hi);
		if (!comma)
			sbuf_printf(r->out, "{%u} ", lo);
		else if (has_hi)
			sbuf_printf(r->out, "{%u,%u} ", lo, hi);
		else
			sbuf_printf(r->out, "{%u,} ", lo);
	} else {
		return 0;
	}
	if (r->p < r->end && (*r->p == '?' || *r->p == '+')) /* lazy, possessive: the same strings */
		r->p++;
	if (r->p < r->end && strchr("*+?{", *r->p))
		return rfail(r, r->p, "a quantifier after a quantifier");
	return 0;
}

static int parse_concat(struct rx *r, int depth)
{
	while (r->p < r->end && *r->p != '|' && *r->p != ')') {
		if (*r->p == '$' && r->p + 1 == r->end && depth == 0) {
			r->p++;
			break;
		}
		sbuf_puts(r->out, " (");
		if (parse_atom(r, depth))
			return r->rc;
		sbuf_puts(r->out, ")");
		if (parse_quant(r))
			return r->rc;
	}
	return 0;
}

static int parse_alt(struct rx *r, int depth)
{
	if (parse_concat(r, depth))
		return r->rc;
	while (r->p < r->end && *r->p == '|') {
		r->p++;
		sbuf_puts(r->out, " | ");
		if (parse_concat(r, depth))
			return r->rc;
	}
	return 0;
}

int allm_regex_to_gbnf(const char *re, size_t len, bool json_string, struct sbuf *out, struct allm_err *err)
{
	struct rx r = { .src = re, .p = re, .end = re + len, .json = json_string, .out = out, .err = err };
	if (memchr(re, 0, len))
		return allm_err_set(err, -EINVAL, "regex: a NUL byte in the pattern");
	if (r.p < r.end && *r.p == '^')
		r.p++;
	sbuf_puts(out, "(");
	if (parse_alt(&r, 0))
		return r.rc;
	if (r.p < r.end)
		return rfail(&r, r.p, "unmatched ')'");
	sbuf_puts(out, ")");
	return 0;
}
