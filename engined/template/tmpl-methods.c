/* Methods of strings, dicts, lists and loop, and the global functions
 * (range, namespace, dict, raise_exception, strftime_now), with Python's
 * semantics where chat templates depend on them (str.strip strips Unicode
 * whitespace; str.split() splits on runs of it). Lists and dicts are immutable,
 * as in transformers' ImmutableSandboxedEnvironment: append, pop, update...
 * fail as its sandbox does. String results keep which bytes came from data. */
#include "tmpl-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static uint32_t cp_at(const char *s, size_t n, size_t i, size_t *len)
{
	unsigned char ch = (unsigned char)s[i];
	size_t l = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc0 ? 2 : 1;
	if (i + l > n)
		l = n - i;
	uint32_t cp = l == 1 ? ch : l == 2 ? (ch & 31u) : l == 3 ? (ch & 15u) : (ch & 7u);
	for (size_t j = 1; j < l; j++)
		cp = cp << 6 | ((unsigned char)s[i + j] & 63u);
	*len = l;
	return cp;
}

bool tmpl_space_at(const char *s, size_t n, size_t i, size_t *len)
{
	uint32_t cp = cp_at(s, n, i, len);
	return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
	       cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
	       cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

static const struct tstr *S(struct tctx *c, struct tv v)
{
	return tv_to_str(c, v).s;
}

/* does s[i] start one of chars' code points (chars NULL: whitespace) */
static bool in_set(const struct tstr *chars, const char *s, size_t n, size_t i, size_t *len)
{
	if (!chars)
		return tmpl_space_at(s, n, i, len);
	cp_at(s, n, i, len);
	for (size_t k = 0; k < chars->len;) {
		size_t l;
		cp_at(chars->p, chars->len, k, &l);
		if (l == *len && !memcmp(chars->p + k, s + i, l))
			return true;
		k += l;
	}
	return false;
}

/* which: 1 left, 2 right, 3 both */
struct tv tstr_strip(struct tctx *c, struct tv v, struct tv chars, int which)
{
	const struct tstr *s = S(c, v), *cs = chars.kind == TV_STR ? chars.s : NULL;
	size_t lo = 0, hi = s->len, l;
	if (which & 1)
		while (lo < hi && in_set(cs, s->p, s->len, lo, &l))
			lo += l;
	if (which & 2)
		while (hi > lo) {
			size_t k = hi - 1;
			while (k > lo && ((unsigned char)s->p[k] & 0xc0) == 0x80)
				k--;
			if (!in_set(cs, s->p, s->len, k, &l))
				break;
			hi = k;
		}
	struct tsb b = {0};
	tsb_put_sub(c, &b, s, lo, hi - lo);
	return tsb_value(c, &b);
}

static uint32_t to_upper(uint32_t cp)
{
	if ((cp >= 'a' && cp <= 'z') || (cp >= 0xe0 && cp <= 0xfe && cp != 0xf7) || (cp >= 0x3b1 && cp <= 0x3c9 && cp != 0x3c2) ||
	    (cp >= 0x430 && cp <= 0x44f))
		return cp - 32;
	if (cp >= 0x450 && cp <= 0x45f)
		return cp - 80;
	return cp;
}

static uint32_t to_lower(uint32_t cp)
{
	if ((cp >= 'A' && cp <= 'Z') || (cp >= 0xc0 && cp <= 0xde && cp != 0xd7) || (cp >= 0x391 && cp <= 0x3a9 && cp != 0x3a2) ||
	    (cp >= 0x410 && cp <= 0x42f))
		return cp + 32;
	if (cp >= 0x400 && cp <= 0x40f)
		return cp + 80;
	return cp;
}

static bool cased(uint32_t cp)
{
	return to_upper(cp) != cp || to_lower(cp) != cp || cp == 0xdf;
}

static void put_cp(struct tctx *c, struct tsb *b, uint32_t cp, bool taint)
{
	char o[4];
	size_t l;
	if (cp < 0x80)
		o[0] = (char)cp, l = 1;
	else if (cp < 0x800)
		o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), l = 2;
	else if (cp < 0x10000)
		o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 63)), o[2] = (char)(0x80 | (cp & 63)), l = 3;
	else
		o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 63)),
		o[2] = (char)(0x80 | ((cp >> 6) & 63)), o[3] = (char)(0x80 | (cp & 63)), l = 4;
	tsb_put(c, b, o, l, taint);
}

/* mode: 'u' upper, 'l' lower, 'c' capitalize, 't' Python's str.title, 'j' Jinja's title filter */
struct tv tstr_case(struct tctx *c, struct tv v, char mode)
{
	const struct tstr *s = S(c, v);
	struct tsb b = {0};
	bool start = true; /* at a word's start ('t', 'j') or the string's ('c') */
	for (size_t i = 0, l; i < s->len; i += l) {
		uint32_t cp = cp_at(s->p, s->len, i, &l), o;
		bool taint = tstr_tainted(s, i, l);
		switch (mode) {
		case 'u': o = to_upper(cp); break;
		case 'l': o = to_lower(cp); break;
		case 'c': o = start ? to_upper(cp) : to_lower(cp); start = false; break;
		case 't':
			o = start ? to_upper(cp) : to_lower(cp);
			start = !cased(cp);
			break;
		default: {
			size_t sl;
			bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
				   tmpl_space_at(s->p, s->len, i, &sl);
			o = sep ? cp : start ? to_upper(cp) : to_lower(cp);
			start = sep;
		}
		}
		if (cp == 0xdf && mode == 'u')
			tsb_put(c, &b, "SS", 2, taint); /* Python: 'ß'.upper() == 'SS' */
		else if (o == cp)
			tsb_put(c, &b, s->p + i, l, taint);
		else
			put_cp(c, &b, o, taint);
	}
	return tsb_value(c, &b);
}

static bool find_sub(const struct tstr *s, const struct tstr *sub, size_t from, size_t *at)
{
	if (sub->len == 0) {
		*at = from;
		return from <= s->len;
	}
	for (size_t i = from; i + sub->len <= s->len; i++)
		if (!memcmp(s->p + i, sub->p, sub->len)) {
			*at = i;
			return true;
		}
	return false;
}

struct tv tstr_replace(struct tctx *c, struct tv v, struct tv old, struct tv new, int64_t count)
{
	const struct tstr *s = S(c, v), *o = S(c, old), *nw = S(c, new);
	struct tsb b = {0};
	size_t i = 0, at;
	if (o->len == 0) {
		/* Python: the new string before every character and at the end */
		size_t l;
		for (; i < s->len && count != 0; i += l, count--) {
			tsb_put_sub(c, &b, nw, 0, nw->len);
			cp_at(s->p, s->len, i, &l);
			tsb_put_sub(c, &b, s, i, l);
		}
		if (count != 0)
			tsb_put_sub(c, &b, nw, 0, nw->len);
		tsb_put_sub(c, &b, s, i, s->len - i);
		return tsb_value(c, &b);
	}
	while (count != 0 && find_sub(s, o, i, &at)) {
		tsb_put_sub(c, &b, s, i, at - i);
		tsb_put_sub(c, &b, nw, 0, nw->len);
		i = at + o->len;
		count--;
	}
	tsb_put_sub(c, &b, s, i, s->len - i);
	return tsb_value(c, &b);
}

static struct tv sub_str(struct tctx *c, const struct tstr *s, size_t off, size_t n)
{
	struct tsb b = {0};
	tsb_put_sub(c, &b, s, off, n);
	return tsb_value(c, &b);
}

static void list_push(struct tctx *c, struct tv *list, size_t *cap, struct tv v)
{
	struct tlist *l = (struct tlist *)list->l;
	if (l->n == *cap) {
		*cap = *cap ? 2 * *cap : 8;
		struct tv *nv = tctx_alloc(c, *cap * sizeof(*nv));
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof(*nv));
		l->v = nv;
	}
	l->v[l->n++] = v;
}

/* str.split(sep=None, maxsplit=-1) (from the right: rsplit) */
static struct tv split(struct tctx *c, struct tv self, const struct targs *a, bool right)
{
	const struct tstr *s = S(c, self);
	struct tv sepv = targ(c, a, 0, "sep", TV_NONE_V), mx = targ(c, a, 1, "maxsplit", tv_int(-1));
	int64_t max = mx.kind == TV_INT ? mx.i : -1;
	struct tv r = tv_list(c, 0);
	size_t cap = 0;
	if (sepv.kind == TV_NONE) {
		/* runs of whitespace; none at the ends */
		size_t i = 0, l;
		struct tv parts = tv_list(c, 0);
		size_t pcap = 0;
		while (i < s->len) {
			while (i < s->len && tmpl_space_at(s->p, s->len, i, &l))
				i += l;
			if (i >= s->len)
				break;
			size_t st = i;
			while (i < s->len && !tmpl_space_at(s->p, s->len, i, &l))
				i += l;
			list_push(c, &parts, &pcap, sub_str(c, s, st, i - st));
		}
		if (max < 0 || (size_t)max >= parts.l->n)
			return parts;
		/* maxsplit: the rest after max words is one part, left-stripped (right: mirrored) */
		if (!right) {
			i = 0;
			for (int64_t k = 0; k < max; k++) {
				while (tmpl_space_at(s->p, s->len, i, &l))
					i += l;
				size_t st = i;
				while (i < s->len && !tmpl_space_at(s->p, s->len, i, &l))
					i += l;
				list_push(c, &r, &cap, sub_str(c, s, st, i - st));
			}
			while (i < s->len && tmpl_space_at(s->p, s->len, i, &l))
				i += l;
			list_push(c, &r, &cap, sub_str(c, s, i, s->len - i));
			return r;
		}
		tctx_fail(c, "unsupported construct: rsplit() with maxsplit and no separator");
	}
	const struct tstr *sep = S(c, sepv);
	if (!sep->len)
		tctx_fail(c, "empty separator");
	if (right && max >= 0) {
		/* from the right: collect cut points, then emit in order */
		size_t cuts[64], nc = 0, hi = s->len;
		while ((int64_t)nc < max && nc < 64 && hi >= sep->len) {
			size_t k = hi - sep->len + 1, found = SIZE_MAX;
			while (k-- > 0)
				if (!memcmp(s->p + k, sep->p, sep->len)) {
					found = k;
					break;
				}
			if (found == SIZE_MAX)
				break;
			cuts[nc++] = found;
			hi = found;
		}
		size_t st = 0;
		for (size_t k = nc; k-- > 0;) {
			list_push(c, &r, &cap, sub_str(c, s, st, cuts[k] - st));
			st = cuts[k] + sep->len;
		}
		list_push(c, &r, &cap, sub_str(c, s, st, s->len - st));
		return r;
	}
	size_t i = 0, at;
	while ((max < 0 || (int64_t)r.l->n < max) && find_sub(s, sep, i, &at)) {
		list_push(c, &r, &cap, sub_str(c, s, i, at - i));
		i = at + sep->len;
	}
	list_push(c, &r, &cap, sub_str(c, s, i, s->len - i));
	return r;
}

static bool affix(struct tctx *c, const struct tstr *s, struct tv x, bool end)
{
	if (x.kind == TV_LIST) {
		for (size_t i = 0; i < x.l->n; i++)
			if (affix(c, s, x.l->v[i], end))
				return true;
		return false;
	}
	if (x.kind != TV_STR)
		tctx_fail(c, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
			  tv_type_name(x));
	if (x.s->len > s->len)
		return false;
	return !memcmp(s->p + (end ? s->len - x.s->len : 0), x.s->p, x.s->len);
}

/* '{} and {name}'.format(...): fields without conversions or format specs */
static struct tv format(struct tctx *c, struct tv self, const struct targs *a)
{
	const struct tstr *s = S(c, self);
	struct tsb b = {0};
	size_t auto_i = 0;
	for (size_t i = 0; i < s->len; i++) {
		char ch = s->p[i];
		if ((ch == '{' || ch == '}') && i + 1 < s->len && s->p[i + 1] == ch) {
			tsb_put_sub(c, &b, s, i, 1);
			i++;
			continue;
		}
		if (ch != '{') {
			tsb_put_sub(c, &b, s, i, 1);
			continue;
		}
		const char *e = memchr(s->p + i, '}', s->len - i);
		if (!e)
			tctx_fail(c, "Single '{' encountered in format string");
		size_t fl = (size_t)(e - s->p) - i - 1;
		const char *f = s->p + i + 1;
		if (memchr(f, ':', fl) || memchr(f, '!', fl) || memchr(f, '.', fl) || memchr(f, '[', fl))
			tctx_fail(c, "unsupported construct: a format field with a conversion or spec");
		struct tv v = TV_UNDEF_V;
		if (fl == 0) {
			v = auto_i < a->n ? a->v[auto_i] : TV_UNDEF_V;
			auto_i++;
		} else if (f[0] >= '0' && f[0] <= '9') {
			size_t k = (size_t)atoi(f);
			v = k < a->n ? a->v[k] : TV_UNDEF_V;
		} else {
			for (size_t k = 0; k < a->n_kw; k++)
				if (strlen(a->kw_names[k]) == fl && !memcmp(a->kw_names[k], f, fl))
					v = a->kw[k];
		}
		if (v.kind == TV_UNDEF)
			tctx_fail(c, "format: no argument for field '%.*s'", (int)fl, f);
		tv_str_into(c, &b, v);
		i += fl + 1;
	}
	return tsb_value(c, &b);
}

static const char *const STR_METHODS[] = {
	"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower",
	"title", "capitalize", "replace", "find", "rfind", "count", "format", "join",
	"splitlines", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper",
	"removeprefix", "removesuffix", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", "update", "pop",
					    "popitem", "setdefault", "clear", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", "append", "pop", "insert",
					    "extend", "remove", "clear", "reverse", "sort", NULL};

static bool known(const char *const *names, const char *name)
{
	for (size_t i = 0; names[i]; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

static _Noreturn void unsafe(struct tctx *c, const char *name, struct tv self)
{
	tctx_fail(c, "access to attribute '%s' of '%s' object is unsafe.", name, tv_type_name(self));
}

bool tmpl_linebreak_at(const char *s, size_t n, size_t i, size_t *len)
{
	unsigned char ch = (unsigned char)s[i];
	*len = ch == '\r' && i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
	if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e))
		return true;
	uint32_t cp = cp_at(s, n, i, len);
	return cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

struct tv tmpl_splitlines(struct tctx *c, struct tv v)
{
	const struct tstr *s = S(c, v);
	struct tv r = tv_list(c, 0);
	size_t cap = 0, st = 0, l;
	for (size_t i = 0; i < s->len;) {
		if (!tmpl_linebreak_at(s->p, s->len, i, &l)) {
			i += l;
			continue;
		}
		list_push(c, &r, &cap, sub_str(c, s, st, i - st));
		i += l;
		st = i;
	}
	if (st < s->len)
		list_push(c, &r, &cap, sub_str(c, s, st, s->len - st));
	return r;
}

static bool all_cp(const struct tstr *s, int kind)
{
	if (!s->len)
		return false;
	bool any_cased = false;
	for (size_t i = 0, l; i < s->len; i += l) {
		uint32_t cp = cp_at(s->p, s->len, i, &l);
		bool ok;
		switch (kind) {
		case 'd': ok = cp >= '0' && cp <= '9'; break;
		case 'a': ok = cased(cp) || cp >= 0x80; break;
		case 'n': ok = cased(cp) || cp >= 0x80 || (cp >= '0' && cp <= '9'); break;
		case 's': ok = tmpl_space_at(s->p, s->len, i, &l); break;
		case 'l': ok = to_lower(cp) == cp; any_cased |= cased(cp); break;
		default: ok = to_upper(cp) == cp; any_cased |= cased(cp); break;
		}
		if (!ok)
			return false;
	}
	return kind == 'l' || kind == 'u' ? any_cased : true;
}

static struct tv m_str(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	const char *m = fn->name;
	struct tv self = fn->self;
	const struct tstr *s = self.s;
	if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
		return tstr_strip(c, self, targ(c, a, 0, "chars", TV_NONE_V), m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
	if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
		return split(c, self, a, m[0] == 'r');
	if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
		return tv_bool(affix(c, s, targ(c, a, 0, "prefix", TV_NONE_V), m[0] == 'e'));
	if (!strcmp(m, "upper"))
		return tstr_case(c, self, 'u');
	if (!strcmp(m, "lower"))
		return tstr_case(c, self, 'l');
	if (!strcmp(m, "title"))
		return tstr_case(c, self, 't');
	if (!strcmp(m, "capitalize"))
		return tstr_case(c, self, 'c');
	if (!strcmp(m, "replace")) {
		struct tv n = targ(c, a, 2, "count", tv_int(-1));
		return tstr_replace(c, self, targ(c, a, 0, "old", TV_NONE_V), targ(c, a, 1, "new", TV_NONE_V),
				    n.kind == TV_INT ? n.i : -1);
	}
	if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count")) {
		const struct tstr *sub = S(c, targ(c, a, 0, "sub", TV_NONE_V));
		size_t at, i = 0, cnt = 0;
		int64_t found = -1;
		while (find_sub(s, sub, i, &at)) {
			if (found < 0 || m[0] == 'r')
				found = (int64_t)at;
			cnt++;
			if (m[0] == 'f')
				break;
			i = at + (sub->len ? sub->len : 1);
		}
		if (m[0] == 'c')
			return tv_int((int64_t)cnt);
		if (found < 0)
			return tv_int(-1);
		struct tstr pre = {.p = s->p, .len = (size_t)found};
		return tv_int((int64_t)tstr_ncp(&pre));
	}
	if (!strcmp(m, "format"))
		return format(c, self, a);
	if (!strcmp(m, "join")) {
		struct tv it = tmpl_iterable(c, targ(c, a, 0, "iterable", TV_NONE_V));
		struct tsb b = {0};
		for (size_t i = 0; i < it.l->n; i++) {
			if (i)
				tsb_put_sub(c, &b, s, 0, s->len);
			if (it.l->v[i].kind != TV_STR)
				tctx_fail(c, "sequence item %zu: expected str instance, %s found", i,
					  tv_type_name(it.l->v[i]));
			tsb_put_sub(c, &b, it.l->v[i].s, 0, it.l->v[i].s->len);
		}
		return tsb_value(c, &b);
	}
	if (!strcmp(m, "splitlines"))
		return tmpl_splitlines(c, self);
	if (!strncmp(m, "is", 2))
		return tv_bool(all_cp(s, !strcmp(m, "isdigit") ? 'd' : !strcmp(m, "isalpha") ? 'a'
					 : !strcmp(m, "isalnum") ? 'n' : !strcmp(m, "isspace") ? 's'
					 : !strcmp(m, "islower") ? 'l' : 'u'));
	if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
		struct tv x = targ(c, a, 0, "prefix", TV_NONE_V);
		if (x.kind != TV_STR || !affix(c, s, x, m[6] == 's'))
			return self;
		return m[6] == 's' ? sub_str(c, s, 0, s->len - x.s->len) : sub_str(c, s, x.s->len, s->len - x.s->len);
	}
	tctx_fail(c, "unsupported string method '%s'", m);
}

static struct tv m_dict(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	const char *m = fn->name;
	const struct tdict *d = fn->self.d;
	if (!strcmp(m, "get")) {
		const struct tv *v = tdict_get(d, targ(c, a, 0, "key", TV_NONE_V));
		return v ? *v : targ(c, a, 1, "default", TV_NONE_V);
	}
	if (!strcmp(m, "copy"))
		return fn->self;
	if (strcmp(m, "items") && strcmp(m, "keys") && strcmp(m, "values"))
		unsafe(c, m, fn->self);
	struct tv r = tv_list(c, d->n);
	for (size_t i = 0; i < d->n; i++) {
		if (m[0] == 'k') {
			r.l->v[i] = d->k[i];
		} else if (m[0] == 'v') {
			r.l->v[i] = d->v[i];
		} else {
			struct tv p = tv_list(c, 2);
			p.tuple = true;
			p.l->v[0] = d->k[i];
			p.l->v[1] = d->v[i];
			r.l->v[i] = p;
		}
	}
	return r;
}

static struct tv m_list(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	const char *m = fn->name;
	const struct tlist *l = fn->self.l;
	if (!strcmp(m, "copy"))
		return fn->self;
	if (strcmp(m, "index") && strcmp(m, "count"))
		unsafe(c, m, fn->self);
	struct tv x = targ(c, a, 0, "value", TV_NONE_V);
	int64_t n = 0;
	for (size_t i = 0; i < l->n; i++)
		if (tv_equal(l->v[i], x)) {
			if (m[0] == 'i')
				return tv_int((int64_t)i);
			n++;
		}
	if (m[0] == 'i')
		tctx_fail(c, "value is not in list");
	return tv_int(n);
}

static struct tv m_loop(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	if (!a->n)
		tctx_fail(c, "no items for cycling given");
	struct tv idx = tmpl_attr(c, fn->self, "index0");
	return a->v[idx.i % (int64_t)a->n];
}

struct tv tmpl_method(struct tctx *c, struct tv obj, const char *name)
{
	tfunc_fn fn = NULL;
	if (obj.kind == TV_STR && known(STR_METHODS, name))
		fn = m_str;
	else if (obj.kind == TV_DICT && known(DICT_METHODS, name))
		fn = m_dict;
	else if (obj.kind == TV_LIST && known(LIST_METHODS, name))
		fn = m_list;
	else if (obj.kind == TV_LOOP && !strcmp(name, "cycle"))
		fn = m_loop;
	if (!fn)
		return TV_UNDEF_V;
	struct tfunc *f = tctx_alloc(c, sizeof(*f));
	*f = (struct tfunc){.name = name, .fn = fn, .self = obj};
	return (struct tv){.kind = TV_FUNC, .fn = f};
}

struct tv targ(struct tctx *c, const struct targs *a, size_t pos, const char *name, struct tv dflt)
{
	(void)c;
	for (size_t k = 0; k < a->n_kw; k++)
		if (name && !strcmp(a->kw_names[k], name))
			return a->kw[k];
	return pos < a->n ? a->v[pos] : dflt;
}

/* ---- globals ---- */

static struct tv g_range(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	(void)fn;
	int64_t lo = 0, hi, st = 1;
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].kind != TV_INT)
			tctx_fail(c, "range() takes integers, not '%s'", tv_type_name(a->v[i]));
	if (a->n == 1)
		hi = a->v[0].i;
	else if (a->n == 2 || a->n == 3)
		lo = a->v[0].i, hi = a->v[1].i, st = a->n == 3 ? a->v[2].i : 1;
	else
		tctx_fail(c, "range expected 1 to 3 arguments, got %zu", a->n);
	if (st == 0)
		tctx_fail(c, "range() arg 3 must not be zero");
	/* Jinja's sandbox caps a range at 100000 items */
	uint64_t n = 0;
	if (st > 0 && hi > lo)
		n = ((uint64_t)hi - (uint64_t)lo + (uint64_t)st - 1) / (uint64_t)st;
	else if (st < 0 && lo > hi)
		n = ((uint64_t)lo - (uint64_t)hi + (uint64_t)(-st) - 1) / (uint64_t)(-st);
	if (n > 100000)
		tctx_fail(c, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
	struct tv r = tv_list(c, (size_t)n);
	for (uint64_t i = 0; i < n; i++)
		r.l->v[i] = tv_int(lo + (int64_t)i * st);
	return r;
}

static struct tv g_namespace(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	struct tv ns = tv_dict(c);
	ns.kind = fn->aux ? TV_DICT : TV_NS;
	for (size_t i = 0; i < a->n; i++) {
		if (a->v[i].kind != TV_DICT && a->v[i].kind != TV_NS)
			tctx_fail(c, "%s() takes only a dict and keyword arguments", fn->name);
		for (size_t k = 0; k < a->v[i].d->n; k++)
			tdict_set(c, ns.d, a->v[i].d->k[k], a->v[i].d->v[k]);
	}
	for (size_t k = 0; k < a->n_kw; k++)
		tdict_set(c, ns.d, tv_cstr(c, a->kw_names[k]), a->kw[k]);
	return ns;
}

static struct tv g_raise(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	(void)fn;
	struct tv m = tv_to_str(c, targ(c, a, 0, "message", TV_NONE_V));
	c->f->raised = true;
	tfail_at(c->f, -EINVAL, 0, "%s", m.s->p);
}

static struct tv g_strftime(struct tctx *c, const struct tfunc *fn, const struct targs *a)
{
	(void)fn;
	struct tv f = targ(c, a, 0, "format", TV_NONE_V);
	if (f.kind != TV_STR)
		tctx_fail(c, "strftime_now() takes a format string");
	time_t now = c->env->now ? (time_t)c->env->now : time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	char buf[512];
	size_t n = f.s->len ? strftime(buf, sizeof(buf), f.s->p, &tm) : 0;
	if (f.s->len && n == 0)
		tctx_fail(c, "strftime_now(): the formatted date is empty or too long");
	return tv_str(c, buf, n, false);
}

static const struct tfunc GLOBALS[] = {
	{.name = "range", .fn = g_range},
	{.name = "namespace", .fn = g_namespace},
	{.name = "dict", .fn = g_namespace, .aux = 1},
	{.name = "raise_exception", .fn = g_raise},
	{.name = "strftime_now", .fn = g_strftime},
};

struct tv tmpl_global(struct tctx *c, const char *name)
{
	(void)c;
	for (size_t i = 0; i < sizeof(GLOBALS) / sizeof(*GLOBALS); i++)
		if (!strcmp(GLOBALS[i].name, name))
			return (struct tv){.kind = TV_FUNC, .fn = &GLOBALS[i]};
	return TV_UNDEF_V;
}
