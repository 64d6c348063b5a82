/* Expressions: names, attributes and items as Jinja's getattr / getitem
 * (a dict's methods before its keys with `.`, its keys before its methods with
 * `[]`), slices by code point, Python's arithmetic and comparisons (with
 * overflow checked), filters, tests and calls. Statements and scopes:
 * tmpl-exec.c. */
#include "tmpl-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values from expressions ---- */

static _Noreturn void undefined_fail(struct tctx *c, struct tv v)
{
	if (v.undef)
		tctx_fail(c, "'%s' is undefined", v.undef);
	tctx_fail(c, "a value is undefined");
}

static struct tv attr(struct tctx *c, struct tv obj, const char *name)
{
	switch (obj.kind) {
	case TV_UNDEF:
		tctx_fail(c, "'%s' has no attribute '%s'", obj.undef ? obj.undef : "Undefined", name);
	case TV_NS: {
		const struct tv *v = tdict_gets(obj.d, name);
		return v ? *v : TV_UNDEF_V;
	}
	case TV_LOOP: {
		const struct tloop *l = obj.loop;
		size_t n = l->items->n;
		if (!strcmp(name, "index"))
			return tv_int((int64_t)l->i + 1);
		if (!strcmp(name, "index0"))
			return tv_int((int64_t)l->i);
		if (!strcmp(name, "revindex"))
			return tv_int((int64_t)(n - l->i));
		if (!strcmp(name, "revindex0"))
			return tv_int((int64_t)(n - l->i - 1));
		if (!strcmp(name, "first"))
			return tv_bool(l->i == 0);
		if (!strcmp(name, "last"))
			return tv_bool(l->i + 1 == n);
		if (!strcmp(name, "length"))
			return tv_int((int64_t)n);
		if (!strcmp(name, "previtem"))
			return l->i > 0 ? l->items->v[l->i - 1] : TV_UNDEF_V;
		if (!strcmp(name, "nextitem"))
			return l->i + 1 < n ? l->items->v[l->i + 1] : TV_UNDEF_V;
		if (!strcmp(name, "depth") || !strcmp(name, "depth0"))
			return tv_int(name[5] ? 0 : 1); /* no recursive loops: always the first level */
		return tmpl_method(c, obj, name);
	}
	case TV_DICT: {
		struct tv m = tmpl_method(c, obj, name);
		if (m.kind != TV_UNDEF)
			return m;
		const struct tv *v = tdict_gets(obj.d, name);
		return v ? *v : TV_UNDEF_V;
	}
	default:
		return tmpl_method(c, obj, name);
	}
}

/* a code point index of s into a byte offset; n: its code points */
static size_t cp_off(const struct tstr *s, size_t cp)
{
	size_t i = 0;
	while (i < s->len && cp) {
		i++;
		while (i < s->len && ((unsigned char)s->p[i] & 0xc0) == 0x80)
			i++;
		cp--;
	}
	return i;
}

static struct tv item(struct tctx *c, struct tv obj, struct tv key)
{
	switch (obj.kind) {
	case TV_UNDEF:
		undefined_fail(c, obj);
	case TV_DICT:
	case TV_NS: {
		const struct tv *v = tdict_get(obj.d, key);
		if (v)
			return *v;
		return key.kind == TV_STR && obj.kind == TV_DICT ? tmpl_method(c, obj, key.s->p) : TV_UNDEF_V;
	}
	case TV_LIST:
	case TV_STR: {
		if (key.kind == TV_STR)
			return tmpl_method(c, obj, key.s->p);
		if (key.kind != TV_INT && key.kind != TV_BOOL)
			return TV_UNDEF_V;
		int64_t i = key.kind == TV_INT ? key.i : key.b;
		int64_t n = (int64_t)(obj.kind == TV_LIST ? obj.l->n : tstr_ncp(obj.s));
		if (i < 0)
			i += n;
		if (i < 0 || i >= n)
			return TV_UNDEF_V;
		if (obj.kind == TV_LIST)
			return obj.l->v[i];
		struct tsb b = {0};
		size_t o = cp_off(obj.s, (size_t)i), e = cp_off(obj.s, (size_t)i + 1);
		tsb_put_sub(c, &b, obj.s, o, e - o);
		return tsb_value(c, &b);
	}
	case TV_LOOP:
		return key.kind == TV_STR ? attr(c, obj, key.s->p) : TV_UNDEF_V;
	default:
		return TV_UNDEF_V;
	}
}

static int64_t slice_bound(struct tctx *c, struct tv v, int64_t n, int64_t step, bool lo)
{
	if (v.kind == TV_NONE || v.kind == TV_UNDEF)
		return step > 0 ? (lo ? 0 : n) : (lo ? n - 1 : -1);
	if (v.kind != TV_INT)
		tctx_fail(c, "slice indices must be integers or None");
	int64_t i = v.i;
	if (i < 0) {
		i += n;
		if (i < 0)
			i = step > 0 ? 0 : -1;
	} else if (i >= n) {
		i = step > 0 ? n : n - 1;
	}
	return i;
}

static struct tv slice(struct tctx *c, struct tv obj, struct tv a, struct tv b, struct tv s)
{
	int64_t step = 1;
	if (s.kind == TV_INT)
		step = s.i;
	else if (s.kind != TV_NONE && s.kind != TV_UNDEF)
		tctx_fail(c, "slice indices must be integers or None");
	if (step == 0)
		tctx_fail(c, "slice step cannot be zero");
	if (obj.kind != TV_LIST && obj.kind != TV_STR)
		tctx_fail(c, "'%s' object is not subscriptable", tv_type_name(obj));
	int64_t n = (int64_t)(obj.kind == TV_LIST ? obj.l->n : tstr_ncp(obj.s));
	int64_t lo = slice_bound(c, a, n, step, true), hi = slice_bound(c, b, n, step, false);
	size_t cnt = 0;
	for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
		cnt++;
	if (obj.kind == TV_LIST) {
		struct tv r = tv_list(c, cnt);
		r.tuple = obj.tuple;
		size_t k = 0;
		for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
			r.l->v[k++] = obj.l->v[i];
		return r;
	}
	struct tsb sb = {0};
	if (step == 1) {
		size_t o = cp_off(obj.s, (size_t)lo);
		if (hi > lo)
			tsb_put_sub(c, &sb, obj.s, o, cp_off(obj.s, (size_t)hi) - o);
		return tsb_value(c, &sb);
	}
	/* byte offsets of every code point, then pick */
	size_t *off = tctx_alloc(c, ((size_t)n + 1) * sizeof(*off));
	for (int64_t i = 0, k = 0; i <= n; i++) {
		off[i] = (size_t)k;
		if (k < (int64_t)obj.s->len) {
			k++;
			while (k < (int64_t)obj.s->len && ((unsigned char)obj.s->p[k] & 0xc0) == 0x80)
				k++;
		}
	}
	for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
		tsb_put_sub(c, &sb, obj.s, off[i], off[i + 1] - off[i]);
	return tsb_value(c, &sb);
}

void tmpl_eval_args(struct tctx *c, const struct tnode *n, struct targs *a)
{
	size_t npos = 0, nkw = 0;
	for (size_t i = 0; i < n->n_kids; i++)
		if (n->names && n->names[i])
			nkw++;
		else
			npos++;
	memset(a, 0, sizeof(*a));
	a->v = tctx_alloc(c, (npos + 1) * sizeof(*a->v));
	a->kw = tctx_alloc(c, (nkw + 1) * sizeof(*a->kw));
	a->kw_names = tctx_alloc(c, (nkw + 1) * sizeof(*a->kw_names));
	for (size_t i = 0; i < n->n_kids; i++) {
		struct tv v = tmpl_eval(c, n->kids[i]);
		if (n->names && n->names[i]) {
			a->kw_names[a->n_kw] = n->names[i];
			a->kw[a->n_kw++] = v;
		} else {
			a->v[a->n++] = v;
		}
	}
}

static int64_t as_int(struct tctx *c, struct tv v, double *f, bool *is_float)
{
	*is_float = false;
	switch (v.kind) {
	case TV_INT: return v.i;
	case TV_BOOL: return v.b;
	case TV_FLOAT: *is_float = true; *f = v.f; return 0;
	case TV_UNDEF: undefined_fail(c, v);
	default: tctx_fail(c, "unsupported operand type '%s'", tv_type_name(v));
	}
}

static struct tv arith(struct tctx *c, int op, struct tv a, struct tv b)
{
	if (op == OP_CONCAT) {
		struct tsb sb = {0};
		tv_str_into(c, &sb, a);
		tv_str_into(c, &sb, b);
		return tsb_value(c, &sb);
	}
	if (a.kind == TV_UNDEF || b.kind == TV_UNDEF)
		undefined_fail(c, a.kind == TV_UNDEF ? a : b);
	if (op == OP_ADD && a.kind == TV_STR && b.kind == TV_STR) {
		struct tsb sb = {0};
		if (a.markup != b.markup) {
			/* markupsafe: Markup + str escapes the str */
			struct targs none = {0};
			struct tv *plain = a.markup ? &b : &a;
			*plain = tmpl_filter(c, "escape", *plain, &none);
		}
		tsb_put_sub(c, &sb, a.s, 0, a.s->len);
		tsb_put_sub(c, &sb, b.s, 0, b.s->len);
		struct tv r = tsb_value(c, &sb);
		r.markup = a.markup || b.markup;
		return r;
	}
	if (op == OP_ADD && a.kind == TV_LIST && b.kind == TV_LIST) {
		struct tv r = tv_list(c, a.l->n + b.l->n);
		memcpy(r.l->v, a.l->v, a.l->n * sizeof(struct tv));
		memcpy(r.l->v + a.l->n, b.l->v, b.l->n * sizeof(struct tv));
		return r;
	}
	if (op == OP_MUL && (a.kind == TV_STR || a.kind == TV_LIST || b.kind == TV_STR || b.kind == TV_LIST)) {
		struct tv seq = a.kind == TV_STR || a.kind == TV_LIST ? a : b, k = seq.kind == a.kind ? b : a;
		if (k.kind != TV_INT)
			tctx_fail(c, "can't multiply sequence by non-int of type '%s'", tv_type_name(k));
		int64_t times = k.i < 0 ? 0 : k.i;
		if (seq.kind == TV_STR) {
			struct tsb sb = {0};
			if (times && seq.s->len > c->max_output / (size_t)times)
				tfail_at(c->f, -E2BIG, c->line, "a string longer than %zu bytes", c->max_output);
			for (int64_t i = 0; i < times; i++)
				tsb_put_sub(c, &sb, seq.s, 0, seq.s->len);
			return tsb_value(c, &sb);
		}
		if (times && seq.l->n > (1u << 24) / (size_t)times)
			tfail_at(c->f, -E2BIG, c->line, "a list longer than %u items", 1u << 24);
		struct tv r = tv_list(c, seq.l->n * (size_t)times);
		for (int64_t i = 0; i < times; i++)
			memcpy(r.l->v + (size_t)i * seq.l->n, seq.l->v, seq.l->n * sizeof(struct tv));
		return r;
	}
	if (op == OP_MOD && a.kind == TV_STR)
		tctx_fail(c, "unsupported construct: string formatting with '%%'");
	double x = 0, y = 0;
	bool fx, fy;
	int64_t i = as_int(c, a, &x, &fx), j = as_int(c, b, &y, &fy);
	if (!fx && !fy && op != OP_DIV) {
		int64_t r;
		switch (op) {
		case OP_ADD:
			if (__builtin_add_overflow(i, j, &r))
				tctx_fail(c, "integer overflow");
			return tv_int(r);
		case OP_SUB:
			if (__builtin_sub_overflow(i, j, &r))
				tctx_fail(c, "integer overflow");
			return tv_int(r);
		case OP_MUL:
			if (__builtin_mul_overflow(i, j, &r))
				tctx_fail(c, "integer overflow");
			return tv_int(r);
		case OP_FLOORDIV:
		case OP_MOD:
			if (j == 0)
				tctx_fail(c, "integer division or modulo by zero");
			if (i == INT64_MIN && j == -1)
				tctx_fail(c, "integer overflow");
			r = i / j;
			if ((i % j != 0) && ((i < 0) != (j < 0)))
				r--;
			return op == OP_FLOORDIV ? tv_int(r) : tv_int(i - r * j);
		case OP_POW: {
			if (j < 0)
				return tv_float(pow((double)i, (double)j));
			r = 1;
			for (int64_t k = 0; k < j; k++)
				if (__builtin_mul_overflow(r, i, &r))
					tctx_fail(c, "integer overflow");
			return tv_int(r);
		}
		}
	}
	if (!fx)
		x = (double)i;
	if (!fy)
		y = (double)j;
	switch (op) {
	case OP_ADD: return tv_float(x + y);
	case OP_SUB: return tv_float(x - y);
	case OP_MUL: return tv_float(x * y);
	case OP_DIV:
		if (y == 0)
			tctx_fail(c, "division by zero");
		return tv_float(x / y);
	case OP_FLOORDIV:
		if (y == 0)
			tctx_fail(c, "float floor division by zero");
		return tv_float(floor(x / y));
	case OP_MOD: {
		if (y == 0)
			tctx_fail(c, "float modulo");
		double m = fmod(x, y);
		if (m != 0 && ((m < 0) != (y < 0)))
			m += y;
		return tv_float(m);
	}
	default: return tv_float(pow(x, y));
	}
}

static bool contains(struct tctx *c, struct tv hay, struct tv needle)
{
	switch (hay.kind) {
	case TV_STR:
		if (needle.kind != TV_STR)
			tctx_fail(c, "'in <string>' requires string as left operand, not %s", tv_type_name(needle));
		if (!needle.s->len)
			return true;
		for (size_t i = 0; i + needle.s->len <= hay.s->len; i++)
			if (!memcmp(hay.s->p + i, needle.s->p, needle.s->len))
				return true;
		return false;
	case TV_LIST:
		for (size_t i = 0; i < hay.l->n; i++)
			if (tv_equal(hay.l->v[i], needle))
				return true;
		return false;
	case TV_DICT:
	case TV_NS: return tdict_get(hay.d, needle) != NULL;
	case TV_UNDEF: return false;
	default: tctx_fail(c, "argument of type '%s' is not iterable", tv_type_name(hay));
	}
}

static struct tv compare(struct tctx *c, int op, struct tv a, struct tv b)
{
	switch (op) {
	case OP_EQ: return tv_bool(tv_equal(a, b));
	case OP_NE: return tv_bool(!tv_equal(a, b));
	case OP_IN: return tv_bool(contains(c, b, a));
	case OP_NOTIN: return tv_bool(!contains(c, b, a));
	}
	if (a.kind == TV_UNDEF || b.kind == TV_UNDEF)
		undefined_fail(c, a.kind == TV_UNDEF ? a : b);
	int r = tv_compare(c, a, b);
	return tv_bool(op == OP_LT ? r < 0 : op == OP_LE ? r <= 0 : op == OP_GT ? r > 0 : r >= 0);
}

struct tv tmpl_eval(struct tctx *c, const struct tnode *n)
{
	tmpl_step(c, n);
	tmpl_enter(c);
	struct tv v = TV_UNDEF_V, x;
	struct targs a;
	switch (n->kind) {
	case N_LIT: v = n->lit; break;
	case N_NAME: v = tmpl_lookup(c, n->name); break;
	case N_PIPE: v = c->pipe; break;
	case N_LIST:
	case N_TUPLE:
		v = tv_list(c, n->n_kids);
		v.tuple = n->kind == N_TUPLE;
		for (size_t i = 0; i < n->n_kids; i++)
			v.l->v[i] = tmpl_eval(c, n->kids[i]);
		break;
	case N_DICT:
		v = tv_dict(c);
		for (size_t i = 0; i + 1 < n->n_kids; i += 2) {
			struct tv k = tmpl_eval(c, n->kids[i]);
			tdict_set(c, v.d, k, tmpl_eval(c, n->kids[i + 1]));
		}
		break;
	case N_ATTR: v = attr(c, tmpl_eval(c, n->a), n->name); break;
	case N_ITEM:
		x = tmpl_eval(c, n->a);
		v = item(c, x, tmpl_eval(c, n->b));
		break;
	case N_SLICE: {
		x = tmpl_eval(c, n->a);
		struct tv lo = n->b ? tmpl_eval(c, n->b) : TV_NONE_V, hi = n->c ? tmpl_eval(c, n->c) : TV_NONE_V,
			  st = n->d ? tmpl_eval(c, n->d) : TV_NONE_V;
		c->line = n->line;
		v = slice(c, x, lo, hi, st);
		break;
	}
	case N_CALL:
		x = tmpl_eval(c, n->a);
		tmpl_eval_args(c, n, &a);
		c->line = n->line;
		if (x.kind == TV_UNDEF)
			tctx_fail(c, "'%s' is undefined (called as a function)",
				  n->a->kind == N_ATTR ? n->a->name : x.undef ? x.undef : "?");
		v = tmpl_call(c, x, &a, TV_UNDEF_V);
		break;
	case N_FILTER:
		x = tmpl_eval(c, n->a);
		tmpl_eval_args(c, n, &a);
		c->line = n->line;
		v = tmpl_filter(c, n->name, x, &a);
		break;
	case N_TEST:
		x = tmpl_eval(c, n->a);
		tmpl_eval_args(c, n, &a);
		c->line = n->line;
		v = tv_bool(tmpl_test(c, n->name, x, &a) != (n->op != 0));
		break;
	case N_NEG:
	case N_POS:
		x = tmpl_eval(c, n->a);
		if (x.kind == TV_INT || x.kind == TV_BOOL) {
			int64_t i = x.kind == TV_INT ? x.i : x.b;
			if (n->kind == N_NEG && i == INT64_MIN)
				tctx_fail(c, "integer overflow");
			v = tv_int(n->kind == N_NEG ? -i : i);
		} else if (x.kind == TV_FLOAT) {
			v = tv_float(n->kind == N_NEG ? -x.f : x.f);
		} else if (x.kind == TV_UNDEF) {
			undefined_fail(c, x);
		} else {
			tctx_fail(c, "bad operand type for unary -: '%s'", tv_type_name(x));
		}
		break;
	case N_NOT: v = tv_bool(!tv_truthy(tmpl_eval(c, n->a))); break;
	case N_AND:
		v = tmpl_eval(c, n->a);
		if (tv_truthy(v))
			v = tmpl_eval(c, n->b);
		break;
	case N_OR:
		v = tmpl_eval(c, n->a);
		if (!tv_truthy(v))
			v = tmpl_eval(c, n->b);
		break;
	case N_BIN:
		x = tmpl_eval(c, n->a);
		v = tmpl_eval(c, n->b);
		c->line = n->line;
		v = arith(c, n->op, x, v);
		break;
	case N_CMP:
		x = tmpl_eval(c, n->a);
		v = tmpl_eval(c, n->b);
		c->line = n->line;
		v = compare(c, n->op, x, v);
		break;
	case N_COND:
		if (tv_truthy(tmpl_eval(c, n->b)))
			v = tmpl_eval(c, n->a);
		else if (n->c)
			v = tmpl_eval(c, n->c);
		break;
	default:
		tctx_fail(c, "internal: node %d is not an expression", n->kind);
	}
	c->depth--;
	return v;
}

struct tv tmpl_attr(struct tctx *c, struct tv obj, const char *name)
{
	return attr(c, obj, name);
}

struct tv tmpl_item(struct tctx *c, struct tv obj, struct tv key)
{
	return item(c, obj, key);
}
