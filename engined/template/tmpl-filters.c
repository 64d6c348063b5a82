/* Jinja's filters and tests that chat templates call, with Jinja 3.1's
 * semantics (jinja2/filters.py, jinja2/tests.py). One table each: the parser
 * asks it whether a name exists (an unknown filter is refused at parse time with
 * its line), the evaluator calls through it. */
#include "tmpl-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tv (*filter_fn)(struct tctx *c, struct tv v, const struct targs *a);

static const struct tstr *S(struct tctx *c, struct tv v)
{
	return tv_to_str(c, v).s;
}

static size_t length(struct tctx *c, struct tv v)
{
	switch (v.kind) {
	case TV_UNDEF: return 0;
	case TV_STR: return tstr_ncp(v.s);
	case TV_LIST:
		if (v.gen)
			tctx_fail(c, "object of type 'generator' has no len()");
		return v.l->n;
	case TV_DICT:
	case TV_NS: return v.d->n;
	default: tctx_fail(c, "object of type '%s' has no len()", tv_type_name(v));
	}
}

static struct tv f_length(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	return tv_int((int64_t)length(c, v));
}

static struct tv f_trim(struct tctx *c, struct tv v, const struct targs *a)
{
	return tstr_strip(c, v, targ(c, a, 0, "chars", TV_NONE_V), 3);
}

static struct tv f_upper(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	return tstr_case(c, v, 'u');
}

static struct tv f_lower(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	return tstr_case(c, v, 'l');
}

static struct tv f_title(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	return tstr_case(c, v, 'j');
}

static struct tv f_capitalize(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	return tstr_case(c, v, 'c');
}

static struct tv f_replace(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv n = targ(c, a, 2, "count", TV_NONE_V);
	return tstr_replace(c, v, targ(c, a, 0, "old", TV_NONE_V), targ(c, a, 1, "new", TV_NONE_V),
			    n.kind == TV_INT ? n.i : -1);
}

static struct tv f_string(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	return tv_to_str(c, v);
}

static struct tv f_safe(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	struct tv r = tv_to_str(c, v);
	r.markup = true;
	return r;
}

static struct tv f_escape(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	if (v.kind == TV_STR && v.markup)
		return v;
	const struct tstr *s = S(c, v);
	struct tsb b = {0};
	for (size_t i = 0; i < s->len; i++) {
		const char *e = NULL;
		switch (s->p[i]) {
		case '&': e = "&amp;"; break;
		case '<': e = "&lt;"; break;
		case '>': e = "&gt;"; break;
		case '"': e = "&#34;"; break;
		case '\'': e = "&#39;"; break;
		}
		if (e)
			tsb_put(c, &b, e, strlen(e), tstr_tainted(s, i, 1));
		else
			tsb_put_sub(c, &b, s, i, 1);
	}
	struct tv r = tsb_value(c, &b);
	r.markup = true;
	return r;
}

static struct tv f_default(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv d = targ(c, a, 0, "default_value", tv_cstr(c, ""));
	bool boolean = tv_truthy(targ(c, a, 1, "boolean", tv_bool(false)));
	if (v.kind == TV_UNDEF || (boolean && !tv_truthy(v)))
		return d;
	return v;
}

/* what `for` would walk over: list(v) */
static struct tv as_list(struct tctx *c, struct tv v)
{
	return tmpl_iterable(c, v);
}

static struct tv f_list(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	struct tv l = as_list(c, v);
	l.tuple = false;
	l.gen = false;
	return l;
}

static struct tv f_first(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	struct tv l = as_list(c, v);
	return l.l->n ? l.l->v[0] : TV_UNDEF_V;
}

static struct tv f_last(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	struct tv l = as_list(c, v);
	return l.l->n ? l.l->v[l.l->n - 1] : TV_UNDEF_V;
}

static struct tv f_reverse(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	if (v.kind == TV_STR) {
		struct tv l = as_list(c, v);
		struct tsb b = {0};
		for (size_t i = l.l->n; i-- > 0;)
			tsb_put_sub(c, &b, l.l->v[i].s, 0, l.l->v[i].s->len);
		return tsb_value(c, &b);
	}
	struct tv l = as_list(c, v), r = tv_list(c, l.l->n);
	for (size_t i = 0; i < l.l->n; i++)
		r.l->v[i] = l.l->v[l.l->n - 1 - i];
	return r;
}

static struct tv f_items(struct tctx *c, struct tv v, const struct targs *a)
{
	if (v.kind == TV_UNDEF)
		return tv_list(c, 0);
	if (v.kind != TV_DICT && v.kind != TV_NS)
		tctx_fail(c, "Can only get item pairs from a mapping.");
	struct tv r = tv_list(c, v.d->n);
	(void)a;
	for (size_t i = 0; i < v.d->n; i++) {
		struct tv p = tv_list(c, 2);
		p.tuple = true;
		p.l->v[0] = v.d->k[i];
		p.l->v[1] = v.d->v[i];
		r.l->v[i] = p;
	}
	return r;
}

/* Jinja's attribute getter: "a.b.0" walks items, then attributes */
static struct tv get_attr_path(struct tctx *c, struct tv obj, struct tv path)
{
	if (path.kind == TV_INT)
		return tmpl_item(c, obj, path);
	const struct tstr *p = S(c, path);
	size_t st = 0;
	for (size_t i = 0; i <= p->len; i++) {
		if (i < p->len && p->p[i] != '.')
			continue;
		struct tv key;
		char *end;
		char part[256];
		size_t n = i - st < sizeof(part) - 1 ? i - st : sizeof(part) - 1;
		memcpy(part, p->p + st, n);
		part[n] = 0;
		long long k = strtoll(part, &end, 10);
		key = n && !*end ? tv_int(k) : tv_str(c, part, n, false);
		obj = obj.kind == TV_UNDEF ? obj : tmpl_item(c, obj, key);
		st = i + 1;
	}
	return obj;
}

static bool run_test(struct tctx *c, struct tv v, const struct targs *a, size_t first)
{
	if (a->n <= first)
		return tv_truthy(v);
	struct tv name = a->v[first];
	if (name.kind != TV_STR)
		tctx_fail(c, "a test name must be a string");
	struct targs rest = {.n = a->n - first - 1, .v = a->v + first + 1};
	return tmpl_test(c, name.s->p, v, &rest);
}

/* select / reject / selectattr / rejectattr: mode bit 1 reject, bit 2 by attribute */
static struct tv select_impl(struct tctx *c, struct tv v, const struct targs *a, int mode)
{
	struct tv l = tv_truthy(v) ? as_list(c, v) : tv_list(c, 0), r = tv_list(c, l.l->n);
	r.gen = true;
	size_t k = 0;
	for (size_t i = 0; i < l.l->n; i++) {
		struct tv x = l.l->v[i];
		if (mode & 2) {
			if (!a->n)
				tctx_fail(c, "Missing parameter for attribute name");
			x = get_attr_path(c, x, a->v[0]);
		}
		bool ok = run_test(c, x, a, mode & 2 ? 1 : 0);
		if (ok != ((mode & 1) != 0))
			r.l->v[k++] = l.l->v[i];
	}
	((struct tlist *)r.l)->n = k;
	return r;
}

static struct tv f_select(struct tctx *c, struct tv v, const struct targs *a) { return select_impl(c, v, a, 0); }
static struct tv f_reject(struct tctx *c, struct tv v, const struct targs *a) { return select_impl(c, v, a, 1); }
static struct tv f_selectattr(struct tctx *c, struct tv v, const struct targs *a) { return select_impl(c, v, a, 2); }
static struct tv f_rejectattr(struct tctx *c, struct tv v, const struct targs *a) { return select_impl(c, v, a, 3); }

static struct tv f_map(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv l = tv_truthy(v) ? as_list(c, v) : tv_list(c, 0), r = tv_list(c, l.l->n);
	struct tv attr = targ(c, a, SIZE_MAX, "attribute", TV_UNDEF_V);
	r.gen = true;
	struct tv dflt = targ(c, a, SIZE_MAX, "default", TV_UNDEF_V);
	for (size_t i = 0; i < l.l->n; i++) {
		if (attr.kind != TV_UNDEF) {
			struct tv x = get_attr_path(c, l.l->v[i], attr);
			r.l->v[i] = x.kind == TV_UNDEF && dflt.kind != TV_UNDEF ? dflt : x;
		} else {
			if (!a->n || a->v[0].kind != TV_STR)
				tctx_fail(c, "map() needs a filter name or attribute=");
			struct targs rest = {.n = a->n - 1, .v = a->v + 1};
			r.l->v[i] = tmpl_filter(c, a->v[0].s->p, l.l->v[i], &rest);
		}
	}
	return r;
}

static struct tv f_join(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv sep = targ(c, a, 0, "d", tv_cstr(c, "")), attr = targ(c, a, 1, "attribute", TV_UNDEF_V);
	struct tv l = as_list(c, v);
	const struct tstr *s = S(c, sep);
	struct tsb b = {0};
	for (size_t i = 0; i < l.l->n; i++) {
		if (i)
			tsb_put_sub(c, &b, s, 0, s->len);
		struct tv x = attr.kind != TV_UNDEF ? get_attr_path(c, l.l->v[i], attr) : l.l->v[i];
		tv_str_into(c, &b, x);
	}
	return tsb_value(c, &b);
}

static struct tv f_int(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv d = targ(c, a, 0, "default", tv_int(0));
	switch (v.kind) {
	case TV_INT: return v;
	case TV_BOOL: return tv_int(v.b);
	case TV_FLOAT: return isfinite(v.f) && fabs(v.f) < 9.2e18 ? tv_int((int64_t)v.f) : d;
	case TV_STR: {
		char *end;
		const struct tstr *s = tstr_strip(c, v, TV_NONE_V, 3).s;
		errno = 0;
		long long i = strtoll(s->p, &end, 10);
		if (s->len && !*end && !errno)
			return tv_int(i);
		double f = strtod(s->p, &end);
		if (s->len && !*end && isfinite(f) && fabs(f) < 9.2e18)
			return tv_int((int64_t)f);
		return d;
	}
	default: return d;
	}
}

static struct tv f_float(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv d = targ(c, a, 0, "default", tv_float(0));
	switch (v.kind) {
	case TV_INT: return tv_float((double)v.i);
	case TV_BOOL: return tv_float(v.b);
	case TV_FLOAT: return v;
	case TV_STR: {
		char *end;
		const struct tstr *s = tstr_strip(c, v, TV_NONE_V, 3).s;
		double f = strtod(s->p, &end);
		return s->len && !*end ? tv_float(f) : d;
	}
	default: return d;
	}
}

static struct tv f_abs(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	if (v.kind == TV_INT)
		return tv_int(v.i < 0 ? -v.i : v.i);
	if (v.kind == TV_FLOAT)
		return tv_float(fabs(v.f));
	tctx_fail(c, "bad operand type for abs(): '%s'", tv_type_name(v));
}

/* Jinja 3.1's indent(width=4, first=False, blank=False) */
static struct tv f_indent(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv w = targ(c, a, 0, "width", tv_int(4));
	bool first = tv_truthy(targ(c, a, 1, "first", tv_bool(false)));
	bool blank = tv_truthy(targ(c, a, 2, "blank", tv_bool(false)));
	struct tsb ib = {0};
	if (w.kind == TV_STR)
		tsb_put_sub(c, &ib, w.s, 0, w.s->len);
	else if (w.kind == TV_INT)
		for (int64_t i = 0; i < w.i && i < 4096; i++)
			tsb_putc(c, &ib, ' ');
	else
		tctx_fail(c, "indent: width must be an int or a string");
	struct tv ind = tsb_value(c, &ib);
	struct tsb sb = {0};
	tv_str_into(c, &sb, v);
	tsb_putc(c, &sb, '\n'); /* Jinja's own quirk, for splitlines */
	struct tv lines = tmpl_splitlines(c, tsb_value(c, &sb));
	struct tsb b = {0};
	if (first)
		tsb_put_sub(c, &b, ind.s, 0, ind.s->len);
	for (size_t i = 0; i < lines.l->n; i++) {
		const struct tstr *ln = lines.l->v[i].s;
		if (i) {
			tsb_putc(c, &b, '\n');
			if (blank || ln->len)
				tsb_put_sub(c, &b, ind.s, 0, ind.s->len);
		}
		tsb_put_sub(c, &b, ln, 0, ln->len);
	}
	return tsb_value(c, &b);
}

static int cmp_ci(struct tctx *c, struct tv x, struct tv y, bool ci)
{
	if (ci && x.kind == TV_STR && y.kind == TV_STR)
		return tv_compare(c, tstr_case(c, x, 'l'), tstr_case(c, y, 'l'));
	return tv_compare(c, x, y);
}

/* a stable insertion sort (Python's sort is stable too); lists here are short */
static void sort_vals(struct tctx *c, struct tv *keys, struct tv *vals, size_t n, bool ci, bool rev)
{
	for (size_t i = 1; i < n; i++) {
		struct tv k = keys[i], v = vals[i];
		size_t j = i;
		while (j > 0) {
			int r = cmp_ci(c, keys[j - 1], k, ci);
			if (rev ? r >= 0 : r <= 0)
				break;
			keys[j] = keys[j - 1];
			vals[j] = vals[j - 1];
			j--;
		}
		keys[j] = k;
		vals[j] = v;
	}
}

static struct tv f_sort(struct tctx *c, struct tv v, const struct targs *a)
{
	bool rev = tv_truthy(targ(c, a, 0, "reverse", tv_bool(false)));
	bool cs = tv_truthy(targ(c, a, 1, "case_sensitive", tv_bool(false)));
	struct tv attr = targ(c, a, 2, "attribute", TV_UNDEF_V);
	struct tv l = as_list(c, v), r = tv_list(c, l.l->n), k = tv_list(c, l.l->n);
	for (size_t i = 0; i < l.l->n; i++) {
		r.l->v[i] = l.l->v[i];
		k.l->v[i] = attr.kind != TV_UNDEF ? get_attr_path(c, l.l->v[i], attr) : l.l->v[i];
	}
	sort_vals(c, k.l->v, r.l->v, l.l->n, !cs, rev);
	return r;
}

static struct tv f_dictsort(struct tctx *c, struct tv v, const struct targs *a)
{
	bool cs = tv_truthy(targ(c, a, 0, "case_sensitive", tv_bool(false)));
	struct tv by = targ(c, a, 1, "by", tv_cstr(c, "key"));
	bool rev = tv_truthy(targ(c, a, 2, "reverse", tv_bool(false)));
	struct tv items = f_items(c, v, a), k = tv_list(c, items.l->n);
	bool by_value = by.kind == TV_STR && !strcmp(by.s->p, "value");
	for (size_t i = 0; i < items.l->n; i++)
		k.l->v[i] = items.l->v[i].l->v[by_value ? 1 : 0];
	sort_vals(c, k.l->v, items.l->v, items.l->n, !cs, rev);
	return items;
}

static struct tv f_unique(struct tctx *c, struct tv v, const struct targs *a)
{
	bool cs = tv_truthy(targ(c, a, 0, "case_sensitive", tv_bool(false)));
	struct tv attr = targ(c, a, 1, "attribute", TV_UNDEF_V);
	struct tv l = as_list(c, v), r = tv_list(c, l.l->n), seen = tv_list(c, l.l->n);
	size_t k = 0;
	for (size_t i = 0; i < l.l->n; i++) {
		struct tv key = attr.kind != TV_UNDEF ? get_attr_path(c, l.l->v[i], attr) : l.l->v[i];
		if (!cs && key.kind == TV_STR)
			key = tstr_case(c, key, 'l');
		bool dup = false;
		for (size_t j = 0; j < k && !dup; j++)
			dup = tv_equal(seen.l->v[j], key);
		if (!dup) {
			seen.l->v[k] = key;
			r.l->v[k++] = l.l->v[i];
		}
	}
	((struct tlist *)r.l)->n = k;
	return r;
}

static struct tv minmax(struct tctx *c, struct tv v, const struct targs *a, bool max)
{
	bool cs = tv_truthy(targ(c, a, 0, "case_sensitive", tv_bool(false)));
	struct tv attr = targ(c, a, 1, "attribute", TV_UNDEF_V);
	struct tv l = as_list(c, v), best = TV_UNDEF_V, bk = TV_UNDEF_V;
	for (size_t i = 0; i < l.l->n; i++) {
		struct tv key = attr.kind != TV_UNDEF ? get_attr_path(c, l.l->v[i], attr) : l.l->v[i];
		if (i == 0 || (max ? cmp_ci(c, key, bk, !cs) > 0 : cmp_ci(c, key, bk, !cs) < 0)) {
			best = l.l->v[i];
			bk = key;
		}
	}
	return best;
}

static struct tv f_min(struct tctx *c, struct tv v, const struct targs *a) { return minmax(c, v, a, false); }
static struct tv f_max(struct tctx *c, struct tv v, const struct targs *a) { return minmax(c, v, a, true); }

static struct tv f_sum(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv attr = targ(c, a, 0, "attribute", TV_UNDEF_V), acc = targ(c, a, 1, "start", tv_int(0));
	struct tv l = as_list(c, v);
	for (size_t i = 0; i < l.l->n; i++) {
		struct tv x = attr.kind != TV_UNDEF ? get_attr_path(c, l.l->v[i], attr) : l.l->v[i];
		if (acc.kind == TV_INT && x.kind == TV_INT) {
			if (__builtin_add_overflow(acc.i, x.i, &acc.i))
				tctx_fail(c, "integer overflow");
		} else if ((acc.kind == TV_INT || acc.kind == TV_FLOAT) && (x.kind == TV_INT || x.kind == TV_FLOAT)) {
			acc = tv_float((acc.kind == TV_INT ? (double)acc.i : acc.f) + (x.kind == TV_INT ? (double)x.i : x.f));
		} else {
			tctx_fail(c, "sum: unsupported operand types");
		}
	}
	return acc;
}

static struct tv f_round(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv p = targ(c, a, 0, "precision", tv_int(0)), m = targ(c, a, 1, "method", tv_cstr(c, "common"));
	double x = v.kind == TV_INT ? (double)v.i : v.kind == TV_FLOAT ? v.f : NAN;
	if (isnan(x) && v.kind != TV_FLOAT)
		tctx_fail(c, "round: not a number");
	int64_t prec = p.kind == TV_INT ? p.i : 0;
	double f = pow(10, (double)prec);
	const char *meth = m.kind == TV_STR ? m.s->p : "common";
	if (!strcmp(meth, "ceil"))
		return tv_float(ceil(x * f) / f);
	if (!strcmp(meth, "floor"))
		return tv_float(floor(x * f) / f);
	/* Python's round(): correctly rounded, halves to even, as printf rounds */
	char buf[512];
	snprintf(buf, sizeof(buf), "%.*f", (int)(prec < 0 ? 0 : prec > 300 ? 300 : prec), x);
	return tv_float(prec < 0 ? nearbyint(x * f) / f : strtod(buf, NULL));
}

static struct tv f_wordcount(struct tctx *c, struct tv v, const struct targs *a)
{
	(void)a;
	const struct tstr *s = S(c, v);
	int64_t n = 0;
	bool in = false;
	for (size_t i = 0; i < s->len; i++) {
		unsigned char ch = (unsigned char)s->p[i];
		bool w = ch >= 0x80 || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z') || ch == '_';
		n += w && !in;
		in = w;
	}
	return tv_int(n);
}

static struct tv f_attr(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv n = targ(c, a, 0, "name", TV_NONE_V);
	if (n.kind != TV_STR)
		tctx_fail(c, "attr: the name must be a string");
	return tmpl_attr(c, v, n.s->p);
}

static struct tv f_tojson(struct tctx *c, struct tv v, const struct targs *a)
{
	return tmpl_tojson(c, v, a);
}

static struct tv f_center(struct tctx *c, struct tv v, const struct targs *a)
{
	struct tv w = targ(c, a, 0, "width", tv_int(80));
	const struct tstr *s = S(c, v);
	int64_t n = (int64_t)tstr_ncp(s), width = w.kind == TV_INT ? w.i : 80;
	if (width > 1 << 20)
		width = 1 << 20;
	struct tsb b = {0};
	int64_t pad = width > n ? width - n : 0, left = pad / 2 + (pad & width & 1);
	for (int64_t i = 0; i < left; i++)
		tsb_putc(c, &b, ' ');
	tsb_put_sub(c, &b, s, 0, s->len);
	for (int64_t i = 0; i < pad - left; i++)
		tsb_putc(c, &b, ' ');
	return tsb_value(c, &b);
}

static const struct {
	const char *name;
	filter_fn fn;
} FILTERS[] = {
	{"abs", f_abs},         {"attr", f_attr},         {"capitalize", f_capitalize},
	{"center", f_center},   {"count", f_length},      {"d", f_default},
	{"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
	{"escape", f_escape},   {"first", f_first},       {"float", f_float},
	{"indent", f_indent},   {"int", f_int},           {"items", f_items},
	{"join", f_join},       {"last", f_last},         {"length", f_length},
	{"list", f_list},       {"lower", f_lower},       {"map", f_map},
	{"max", f_max},         {"min", f_min},           {"reject", f_reject},
	{"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
	{"round", f_round},     {"safe", f_safe},         {"select", f_select},
	{"selectattr", f_selectattr}, {"sort", f_sort},   {"string", f_string},
	{"sum", f_sum},         {"title", f_title},       {"tojson", f_tojson},
	{"trim", f_trim},       {"unique", f_unique},     {"upper", f_upper},
	{"wordcount", f_wordcount},
};

bool tmpl_has_filter(const char *name)
{
	for (size_t i = 0; i < sizeof(FILTERS) / sizeof(*FILTERS); i++)
		if (!strcmp(FILTERS[i].name, name))
			return true;
	return false;
}

struct tv tmpl_filter(struct tctx *c, const char *name, struct tv v, const struct targs *a)
{
	for (size_t i = 0; i < sizeof(FILTERS) / sizeof(*FILTERS); i++)
		if (!strcmp(FILTERS[i].name, name))
			return FILTERS[i].fn(c, v, a);
	tctx_fail(c, "unsupported filter '%s'", name);
}

/* ---- tests ---- */

static const char *const TESTS[] = {
	"defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number",
	"integer", "float", "boolean", "true", "false", "callable", "even", "odd", "divisibleby",
	"eq", "equalto", "==", "ne", "!=", "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan",
	"ge", ">=", "in", "lower", "upper", "sameas", "filter", "test", "escaped", NULL};

bool tmpl_has_test(const char *name)
{
	for (size_t i = 0; TESTS[i]; i++)
		if (!strcmp(TESTS[i], name))
			return true;
	return false;
}

bool tmpl_test(struct tctx *c, const char *t, struct tv v, const struct targs *a)
{
	struct tv x = targ(c, a, 0, NULL, TV_UNDEF_V);
	if (!strcmp(t, "defined"))
		return v.kind != TV_UNDEF;
	if (!strcmp(t, "undefined"))
		return v.kind == TV_UNDEF;
	if (!strcmp(t, "none"))
		return v.kind == TV_NONE;
	if (!strcmp(t, "string"))
		return v.kind == TV_STR;
	if (!strcmp(t, "mapping"))
		return v.kind == TV_DICT;
	if (!strcmp(t, "iterable"))
		return v.kind == TV_STR || v.kind == TV_LIST || v.kind == TV_DICT || v.kind == TV_UNDEF;
	if (!strcmp(t, "sequence"))
		return v.kind == TV_STR || (v.kind == TV_LIST && !v.gen) || v.kind == TV_DICT;
	if (!strcmp(t, "number"))
		return v.kind == TV_INT || v.kind == TV_FLOAT || v.kind == TV_BOOL;
	if (!strcmp(t, "integer"))
		return v.kind == TV_INT;
	if (!strcmp(t, "float"))
		return v.kind == TV_FLOAT;
	if (!strcmp(t, "boolean"))
		return v.kind == TV_BOOL;
	if (!strcmp(t, "true"))
		return v.kind == TV_BOOL && v.b;
	if (!strcmp(t, "false"))
		return v.kind == TV_BOOL && !v.b;
	if (!strcmp(t, "callable"))
		return v.kind == TV_MACRO || v.kind == TV_FUNC;
	if (!strcmp(t, "escaped"))
		return false;
	if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
		if (v.kind != TV_STR)
			return false;
		struct tv o = tstr_case(c, v, t[0] == 'l' ? 'l' : 'u');
		return o.s->len == v.s->len && !memcmp(o.s->p, v.s->p, v.s->len);
	}
	if (!strcmp(t, "filter") || !strcmp(t, "test"))
		return x.kind == TV_STR && (t[0] == 'f' ? tmpl_has_filter(x.s->p) : tmpl_has_test(x.s->p));
	if (!strcmp(t, "even") || !strcmp(t, "odd") || !strcmp(t, "divisibleby")) {
		if (v.kind != TV_INT)
			tctx_fail(c, "test '%s' needs an integer, not %s", t, tv_type_name(v));
		int64_t d = t[0] == 'd' ? (x.kind == TV_INT ? x.i : 0) : 2;
		if (d == 0)
			tctx_fail(c, "integer division or modulo by zero");
		return t[0] == 'o' ? v.i % 2 != 0 : v.i % d == 0;
	}
	if (!strcmp(t, "sameas"))
		return tv_equal(v, x) && v.kind == x.kind;
	if (!strcmp(t, "in")) {
		struct tv inv = tv_list(c, 1);
		inv.l->v[0] = v;
		if (x.kind == TV_STR) {
			if (v.kind != TV_STR)
				tctx_fail(c, "'in <string>' requires string as left operand");
			for (size_t i = 0; i + v.s->len <= x.s->len; i++)
				if (!memcmp(x.s->p + i, v.s->p, v.s->len))
					return true;
			return false;
		}
		if (x.kind == TV_LIST) {
			for (size_t i = 0; i < x.l->n; i++)
				if (tv_equal(x.l->v[i], v))
					return true;
			return false;
		}
		if (x.kind == TV_DICT)
			return tdict_get(x.d, v) != NULL;
		tctx_fail(c, "argument of type '%s' is not iterable", tv_type_name(x));
	}
	if (!tmpl_has_test(t))
		tctx_fail(c, "unsupported test '%s'", t);
	if (!strcmp(t, "eq") || !strcmp(t, "equalto") || !strcmp(t, "=="))
		return tv_equal(v, x);
	if (!strcmp(t, "ne") || !strcmp(t, "!="))
		return !tv_equal(v, x);
	int r = tv_compare(c, v, x);
	if (!strcmp(t, "lt") || !strcmp(t, "<") || !strcmp(t, "lessthan"))
		return r < 0;
	if (!strcmp(t, "le") || !strcmp(t, "<="))
		return r <= 0;
	if (!strcmp(t, "gt") || !strcmp(t, ">") || !strcmp(t, "greaterthan"))
		return r > 0;
	return r >= 0;
}
