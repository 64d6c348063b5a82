/* The evaluator: statements write to the current output builder, expressions
 * give values. Scopes as Jinja's: the template's top level (the context's
 * variables and its own sets), one fresh scope per loop iteration (a set inside a
 * loop is gone at the next iteration: namespace() exists for that), one per
 * macro call. Every evaluation counts a step against the render's limit. */
#include "tmpl-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tframe {
	struct tframe *parent;
	size_t n, cap;
	const char **names;
	struct tv *vals;
};

struct tmacro {
	const struct tnode *def; /* S_MACRO, or S_CALLBLOCK for a caller */
	struct tframe *closure;
	struct tv caller;        /* a call block's caller, for the macro it calls */
};

struct tloop {
	const struct tlist *items;
	size_t i;
	struct tloop *parent;
};

/* how a statement list ends early: {% break %} / {% continue %} */
enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

static struct tv eval(struct tctx *c, const struct tnode *n);
static void exec(struct tctx *c, const struct tnode *n, int *fl);

static void step(struct tctx *c, const struct tnode *n)
{
	c->line = n->line;
	if (++c->steps > c->max_steps)
		tfail_at(c->f, -E2BIG, c->line, "the template ran more than %zu steps", c->max_steps);
}

static void enter(struct tctx *c)
{
	if (++c->depth > TMPL_MAX_DEPTH)
		tfail_at(c->f, -E2BIG, c->line, "the template nests calls deeper than %d", TMPL_MAX_DEPTH);
}

/* ---- scopes ---- */

static struct tframe *frame_push(struct tctx *c)
{
	struct tframe *f = tctx_alloc(c, sizeof(*f));
	memset(f, 0, sizeof(*f));
	f->parent = c->frame;
	c->frame = f;
	return f;
}

static void frame_set(struct tctx *c, struct tframe *f, const char *name, struct tv v)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->names[i], name)) {
			f->vals[i] = v;
			return;
		}
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		const char **nn = tctx_alloc(c, cap * sizeof(*nn));
		struct tv *nv = tctx_alloc(c, cap * sizeof(*nv));
		if (f->n) {
			memcpy(nn, f->names, f->n * sizeof(*nn));
			memcpy(nv, f->vals, f->n * sizeof(*nv));
		}
		f->names = nn;
		f->vals = nv;
		f->cap = cap;
	}
	f->names[f->n] = name;
	f->vals[f->n++] = v;
}

static struct tv lookup(struct tctx *c, const char *name)
{
	for (struct tframe *f = c->frame; f; f = f->parent)
		for (size_t i = f->n; i-- > 0;)
			if (!strcmp(f->names[i], name))
				return f->vals[i];
	struct tv g = tmpl_global(c, name);
	if (g.kind == TV_UNDEF)
		g.undef = name;
	return g;
}

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

static void eval_args(struct tctx *c, const struct tnode *n, struct targs *a)
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
		struct tv v = eval(c, n->kids[i]);
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

static struct tv eval(struct tctx *c, const struct tnode *n)
{
	step(c, n);
	enter(c);
	struct tv v = TV_UNDEF_V, x;
	struct targs a;
	switch (n->kind) {
	case N_LIT: v = n->lit; break;
	case N_NAME: v = lookup(c, n->name); break;
	case N_PIPE: v = c->pipe; break;
	case N_LIST:
	case N_TUPLE:
		v = tv_list(c, n->n_kids);
		v.tuple = n->kind == N_TUPLE;
		for (size_t i = 0; i < n->n_kids; i++)
			v.l->v[i] = eval(c, n->kids[i]);
		break;
	case N_DICT:
		v = tv_dict(c);
		for (size_t i = 0; i + 1 < n->n_kids; i += 2) {
			struct tv k = eval(c, n->kids[i]);
			tdict_set(c, v.d, k, eval(c, n->kids[i + 1]));
		}
		break;
	case N_ATTR: v = attr(c, eval(c, n->a), n->name); break;
	case N_ITEM:
		x = eval(c, n->a);
		v = item(c, x, eval(c, n->b));
		break;
	case N_SLICE: {
		x = eval(c, n->a);
		struct tv lo = n->b ? eval(c, n->b) : TV_NONE_V, hi = n->c ? eval(c, n->c) : TV_NONE_V,
			  st = n->d ? eval(c, n->d) : TV_NONE_V;
		c->line = n->line;
		v = slice(c, x, lo, hi, st);
		break;
	}
	case N_CALL:
		x = eval(c, n->a);
		eval_args(c, n, &a);
		c->line = n->line;
		if (x.kind == TV_UNDEF)
			tctx_fail(c, "'%s' is undefined (called as a function)",
				  n->a->kind == N_ATTR ? n->a->name : x.undef ? x.undef : "?");
		v = tmpl_call(c, x, &a, TV_UNDEF_V);
		break;
	case N_FILTER:
		x = eval(c, n->a);
		eval_args(c, n, &a);
		c->line = n->line;
		v = tmpl_filter(c, n->name, x, &a);
		break;
	case N_TEST:
		x = eval(c, n->a);
		eval_args(c, n, &a);
		c->line = n->line;
		v = tv_bool(tmpl_test(c, n->name, x, &a) != (n->op != 0));
		break;
	case N_NEG:
	case N_POS:
		x = eval(c, n->a);
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
	case N_NOT: v = tv_bool(!tv_truthy(eval(c, n->a))); break;
	case N_AND:
		v = eval(c, n->a);
		if (tv_truthy(v))
			v = eval(c, n->b);
		break;
	case N_OR:
		v = eval(c, n->a);
		if (!tv_truthy(v))
			v = eval(c, n->b);
		break;
	case N_BIN:
		x = eval(c, n->a);
		v = eval(c, n->b);
		c->line = n->line;
		v = arith(c, n->op, x, v);
		break;
	case N_CMP:
		x = eval(c, n->a);
		v = eval(c, n->b);
		c->line = n->line;
		v = compare(c, n->op, x, v);
		break;
	case N_COND:
		if (tv_truthy(eval(c, n->b)))
			v = eval(c, n->a);
		else if (n->c)
			v = eval(c, n->c);
		break;
	default:
		tctx_fail(c, "internal: node %d is not an expression", n->kind);
	}
	c->depth--;
	return v;
}

/* ---- macros ---- */

static struct tv run_body_to_string(struct tctx *c, const struct tnode *body)
{
	struct tsb b = {0}, *saved = c->out;
	int fl = FLOW_NONE;
	c->out = &b;
	exec(c, body, &fl);
	c->out = saved;
	return tsb_value(c, &b);
}

static struct tv call_macro(struct tctx *c, const struct tmacro *m, const struct targs *a, struct tv caller)
{
	const struct tnode *def = m->def;
	size_t np = def->n_names;
	if (a->n > np)
		tctx_fail(c, "macro '%s' takes not more than %zu argument(s)", def->name ? def->name : "caller", np);
	struct tframe *saved = c->frame;
	c->frame = m->closure;
	struct tframe *f = frame_push(c);
	enter(c);
	for (size_t i = 0; i < np; i++) {
		struct tv v = TV_UNDEF_V;
		bool got = false;
		if (i < a->n) {
			v = a->v[i];
			got = true;
		}
		for (size_t k = 0; k < a->n_kw; k++)
			if (!strcmp(a->kw_names[k], def->names[i])) {
				v = a->kw[k];
				got = true;
			}
		if (!got && def->kids[i])
			v = eval(c, def->kids[i]);
		if (v.kind == TV_UNDEF)
			v.undef = def->names[i];
		frame_set(c, f, def->names[i], v);
	}
	for (size_t k = 0; k < a->n_kw; k++) {
		bool known = false;
		for (size_t i = 0; i < np; i++)
			known |= !strcmp(a->kw_names[k], def->names[i]);
		if (!known)
			tctx_fail(c, "macro '%s' takes no keyword argument '%s'", def->name ? def->name : "caller",
				  a->kw_names[k]);
	}
	if (caller.kind != TV_UNDEF)
		frame_set(c, f, "caller", caller);
	struct tv r = run_body_to_string(c, def->kind == S_MACRO ? def->a : def->b);
	c->depth--;
	c->frame = saved;
	return r;
}

struct tv tmpl_attr(struct tctx *c, struct tv obj, const char *name)
{
	return attr(c, obj, name);
}

struct tv tmpl_item(struct tctx *c, struct tv obj, struct tv key)
{
	return item(c, obj, key);
}

struct tv tmpl_call(struct tctx *c, struct tv fn, const struct targs *a, struct tv caller)
{
	if (fn.kind == TV_MACRO)
		return call_macro(c, fn.m, a, caller);
	if (fn.kind == TV_FUNC)
		return fn.fn->fn(c, fn.fn, a);
	tctx_fail(c, "'%s' object is not callable", tv_type_name(fn));
}

/* ---- statements ---- */

static void assign(struct tctx *c, const struct tnode *n, struct tv v)
{
	if (n->n_names == 1) {
		frame_set(c, c->frame, n->names[0], v);
		return;
	}
	if (v.kind != TV_LIST)
		tctx_fail(c, "cannot unpack a '%s' into %zu names", tv_type_name(v), n->n_names);
	if (v.l->n != n->n_names)
		tctx_fail(c, "cannot unpack %zu values into %zu names", v.l->n, n->n_names);
	for (size_t i = 0; i < n->n_names; i++)
		frame_set(c, c->frame, n->names[i], v.l->v[i]);
}

/* what a for loop walks: a list's items, a dict's keys, a string's characters */
static struct tv iterable(struct tctx *c, struct tv v)
{
	switch (v.kind) {
	case TV_LIST: return v;
	case TV_UNDEF: return tv_list(c, 0);
	case TV_DICT: {
		struct tv r = tv_list(c, v.d->n);
		memcpy(r.l->v, v.d->k, v.d->n * sizeof(struct tv));
		return r;
	}
	case TV_STR: {
		size_t n = tstr_ncp(v.s);
		struct tv r = tv_list(c, n);
		for (size_t i = 0; i < n; i++)
			r.l->v[i] = item(c, v, tv_int((int64_t)i));
		return r;
	}
	default: tctx_fail(c, "'%s' object is not iterable", tv_type_name(v));
	}
}

struct tv tmpl_iterable(struct tctx *c, struct tv v)
{
	return iterable(c, v);
}

static void bind_targets(struct tctx *c, const struct tnode *n, struct tv v)
{
	if (n->n_names == 1) {
		frame_set(c, c->frame, n->names[0], v);
		return;
	}
	assign(c, n, v);
}

static void exec_for(struct tctx *c, const struct tnode *n)
{
	struct tv src = iterable(c, eval(c, n->a));
	struct tframe *outer = c->frame;
	const struct tlist *items = src.l;
	/* one scope, emptied for each iteration (a set inside the body is gone at
	 * the next one, as in Jinja): a long loop does not grow memory */
	struct tframe *f = frame_push(c);
	c->frame = outer;
	if (n->b) {
		/* the loop's `if` filters before loop.* counts */
		struct tv kept = tv_list(c, items->n);
		size_t k = 0;
		for (size_t i = 0; i < items->n; i++) {
			f->n = 0;
			c->frame = f;
			bind_targets(c, n, items->v[i]);
			if (tv_truthy(eval(c, n->b)))
				kept.l->v[k++] = items->v[i];
			c->frame = outer;
		}
		((struct tlist *)kept.l)->n = k;
		items = kept.l;
	}
	struct tv prev_loop = lookup(c, "loop");
	struct tloop *lp = tctx_alloc(c, sizeof(*lp));
	*lp = (struct tloop){.items = items, .parent = prev_loop.kind == TV_LOOP ? prev_loop.loop : NULL};
	for (size_t i = 0; i < items->n; i++) {
		f->n = 0;
		c->frame = f;
		lp->i = i;
		frame_set(c, f, "loop", (struct tv){.kind = TV_LOOP, .loop = lp});
		bind_targets(c, n, items->v[i]);
		int fl = FLOW_NONE;
		exec(c, n->c, &fl);
		c->frame = outer;
		if (fl == FLOW_BREAK)
			break;
	}
	if (items->n == 0 && n->d) {
		int fl = FLOW_NONE;
		exec(c, n->d, &fl);
	}
}

static void exec(struct tctx *c, const struct tnode *n, int *fl)
{
	step(c, n);
	enter(c);
	switch (n->kind) {
	case S_BODY:
		for (size_t i = 0; i < n->n_kids && *fl == FLOW_NONE; i++)
			exec(c, n->kids[i], fl);
		break;
	case S_TEXT: tsb_put_sub(c, c->out, n->lit.s, 0, n->lit.s->len); break;
	case S_OUT: tv_str_into(c, c->out, eval(c, n->a)); break;
	case S_IF:
		if (tv_truthy(eval(c, n->a)))
			exec(c, n->b, fl);
		else if (n->c)
			exec(c, n->c, fl);
		break;
	case S_FOR: exec_for(c, n); break;
	case S_BREAK: *fl = FLOW_BREAK; break;
	case S_CONTINUE: *fl = FLOW_CONTINUE; break;
	case S_SET:
		if (n->name) {
			struct tv ns = lookup(c, n->name);
			if (ns.kind != TV_NS)
				tctx_fail(c, "cannot assign attribute '%s' on '%s', which is not a namespace()",
					  n->names[0], n->name);
			struct tv v = eval(c, n->a);
			tdict_set(c, ns.d, tv_cstr(c, n->names[0]), v);
		} else {
			assign(c, n, eval(c, n->a));
		}
		break;
	case S_SETBLOCK: {
		struct tv v = run_body_to_string(c, n->a);
		if (n->b) {
			c->pipe = v;
			v = eval(c, n->b);
		}
		frame_set(c, c->frame, n->name, v);
		break;
	}
	case S_FILTERBLOCK:
		c->pipe = run_body_to_string(c, n->a);
		tv_str_into(c, c->out, eval(c, n->b));
		break;
	case S_MACRO: {
		struct tmacro *m = tctx_alloc(c, sizeof(*m));
		*m = (struct tmacro){.def = n, .closure = c->frame};
		frame_set(c, c->frame, n->name, (struct tv){.kind = TV_MACRO, .m = m});
		break;
	}
	case S_CALLBLOCK: {
		struct tmacro *m = tctx_alloc(c, sizeof(*m));
		*m = (struct tmacro){.def = n, .closure = c->frame};
		struct tv fn = eval(c, n->a->a);
		struct targs a;
		eval_args(c, n->a, &a);
		c->line = n->line;
		if (fn.kind != TV_MACRO)
			tctx_fail(c, "a call block must call a macro");
		tv_str_into(c, c->out, call_macro(c, fn.m, &a, (struct tv){.kind = TV_MACRO, .m = m}));
		break;
	}
	case S_WITH: {
		struct tframe *outer = c->frame;
		struct tv *vals = tctx_alloc(c, (n->n_kids + 1) * sizeof(*vals));
		for (size_t i = 0; i < n->n_kids; i++)
			vals[i] = eval(c, n->kids[i]);
		struct tframe *f = frame_push(c);
		for (size_t i = 0; i < n->n_kids; i++)
			frame_set(c, f, n->names[i], vals[i]);
		exec(c, n->a, fl);
		c->frame = outer;
		break;
	}
	default:
		tctx_fail(c, "internal: node %d is not a statement", n->kind);
	}
	c->depth--;
}

/* ---- entry points ---- */

int allm_tmpl_parse(const char *src, size_t len, struct allm_tmpl **ret, char *err, size_t errlen)
{
	struct allm_tmpl *t = calloc(1, sizeof(*t));
	struct tfail *f = calloc(1, sizeof(*f)); /* on the heap: see struct render_state */
	int rc = 0;
	if (!t || !f) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	t->arena.cap = 512u << 20;
	if (setjmp(f->jb)) {
		snprintf(err, errlen, "%s", f->msg);
		rc = f->code;
		goto fail;
	}
	struct ttoks toks;
	tmpl_lex(&t->arena, f, src, len, &toks);
	t->root = tmpl_parse_tokens(&t->arena, f, &toks, &t->unsupported);
	free(f);
	*ret = t;
	return 0;
fail:
	allm_tmpl_free(t);
	free(f);
	return rc;
}

const char *allm_tmpl_unsupported(const struct allm_tmpl *t)
{
	return t->unsupported;
}

void allm_tmpl_free(struct allm_tmpl *t)
{
	if (!t)
		return;
	ta_free_all(&t->arena);
	free(t);
}

void allm_tmpl_out_free(struct allm_tmpl_out *o)
{
	if (!o)
		return;
	free(o->text);
	free(o->segs);
	o->text = NULL;
	o->segs = NULL;
}

static void add_vars(struct tctx *c, const json_t *obj, bool tainted, const json_t *skip)
{
	const char *k;
	json_t *v;
	if (!obj)
		return;
	if (!json_is_object(obj))
		tfail_at(c->f, -EINVAL, 0, "the context must be a JSON object");
	json_object_foreach((json_t *)obj, k, v) {
		if (skip && json_object_get(skip, k))
			continue;
		frame_set(c, c->frame, ta_strndup(&c->ar, c->f, k, strlen(k)), tv_from_json(c, v, tainted));
	}
}

/* The output's bytes and data marks as allm_tmpl_out: segments that alternate. */
static int finish_out(const struct tsb *b, struct allm_tmpl_out *out)
{
	out->text = malloc(b->len + 1);
	out->segs = malloc((2 * b->n_sp + 1) * sizeof(*out->segs));
	if (!out->text || !out->segs) {
		allm_tmpl_out_free(out);
		return -ENOMEM;
	}
	if (b->len)
		memcpy(out->text, b->p, b->len);
	out->text[b->len] = 0;
	out->len = b->len;
	out->n_segs = 0;
	size_t at = 0;
	for (size_t i = 0; i <= b->n_sp; i++) {
		size_t lo = i < b->n_sp ? b->sp[i].off : b->len;
		if (lo > at)
			out->segs[out->n_segs++] = (struct allm_tmpl_seg){at, lo - at, false};
		if (i < b->n_sp) {
			out->segs[out->n_segs++] = (struct allm_tmpl_seg){lo, b->sp[i].len, true};
			at = lo + b->sp[i].len;
		}
	}
	return 0;
}

/* What a render changes between its setjmp and a longjmp lives here, on the
 * heap: locals changed in that window are indeterminate after the jump. */
struct render_state {
	struct tfail f;
	struct tctx c;
	struct tsb b;
};

int allm_tmpl_render(const struct allm_tmpl *t, const json_t *trusted, const json_t *data,
		     const struct allm_tmpl_env *env, struct allm_tmpl_out *out, bool *raised,
		     char *err, size_t errlen)
{
	static const struct allm_tmpl_env none = {0};
	struct render_state *const st = calloc(1, sizeof(*st));
	int rc = 0;
	if (raised)
		*raised = false;
	if (!st) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	struct tctx *const c = &st->c;
	c->f = &st->f;
	c->env = env ? env : &none;
	c->max_steps = c->env->limits.max_steps ? c->env->limits.max_steps : 50000000;
	c->max_output = c->env->limits.max_output ? c->env->limits.max_output : 64u << 20;
	c->ar.cap = c->env->limits.max_memory ? c->env->limits.max_memory : 256u << 20;
	if (setjmp(st->f.jb)) {
		snprintf(err, errlen, "%s", st->f.msg);
		if (raised)
			*raised = st->f.raised;
		rc = st->f.code;
		goto out;
	}
	c->out = &st->b;
	c->globals = frame_push(c);
	add_vars(c, data, true, trusted);
	add_vars(c, trusted, false, NULL);
	int fl = FLOW_NONE;
	exec(c, t->root, &fl);
	if ((rc = finish_out(&st->b, out)))
		snprintf(err, errlen, "out of memory");
out:
	ta_free_all(&c->ar);
	free(st);
	return rc;
}
