/* Statements, scopes and macros, and the entry points (parse, render).
 * Statements write to the current output builder; expressions (tmpl-expr.c)
 * give values. Scopes as Jinja's: the template's top level (the context's
 * variables and its own sets), one fresh scope per loop iteration (a set inside
 * a loop is gone at the next iteration: namespace() exists for that), one per
 * macro call. Every evaluation counts a step against the render's limit. */
#include "tmpl-internal.h"

#include <errno.h>
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

/* how a statement list ends early: {% break %} / {% continue %} */
enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

static void exec(struct tctx *c, const struct tnode *n, int *fl);

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

struct tv tmpl_lookup(struct tctx *c, const char *name)
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
	tmpl_enter(c);
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
			v = tmpl_eval(c, def->kids[i]);
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
			r.l->v[i] = tmpl_item(c, v, tv_int((int64_t)i));
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
	struct tv src = iterable(c, tmpl_eval(c, n->a));
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
			if (tv_truthy(tmpl_eval(c, n->b)))
				kept.l->v[k++] = items->v[i];
			c->frame = outer;
		}
		((struct tlist *)kept.l)->n = k;
		items = kept.l;
	}
	struct tv prev_loop = tmpl_lookup(c, "loop");
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
	tmpl_step(c, n);
	tmpl_enter(c);
	switch (n->kind) {
	case S_BODY:
		for (size_t i = 0; i < n->n_kids && *fl == FLOW_NONE; i++)
			exec(c, n->kids[i], fl);
		break;
	case S_TEXT: tsb_put_sub(c, c->out, n->lit.s, 0, n->lit.s->len); break;
	case S_OUT: tv_str_into(c, c->out, tmpl_eval(c, n->a)); break;
	case S_IF:
		if (tv_truthy(tmpl_eval(c, n->a)))
			exec(c, n->b, fl);
		else if (n->c)
			exec(c, n->c, fl);
		break;
	case S_FOR: exec_for(c, n); break;
	case S_BREAK: *fl = FLOW_BREAK; break;
	case S_CONTINUE: *fl = FLOW_CONTINUE; break;
	case S_SET:
		if (n->name) {
			struct tv ns = tmpl_lookup(c, n->name);
			if (ns.kind != TV_NS)
				tctx_fail(c, "cannot assign attribute '%s' on '%s', which is not a namespace()",
					  n->names[0], n->name);
			struct tv v = tmpl_eval(c, n->a);
			tdict_set(c, ns.d, tv_cstr(c, n->names[0]), v);
		} else {
			assign(c, n, tmpl_eval(c, n->a));
		}
		break;
	case S_SETBLOCK: {
		struct tv v = run_body_to_string(c, n->a);
		if (n->b) {
			c->pipe = v;
			v = tmpl_eval(c, n->b);
		}
		frame_set(c, c->frame, n->name, v);
		break;
	}
	case S_FILTERBLOCK:
		c->pipe = run_body_to_string(c, n->a);
		tv_str_into(c, c->out, tmpl_eval(c, n->b));
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
		struct tv fn = tmpl_eval(c, n->a->a);
		struct targs a;
		tmpl_eval_args(c, n->a, &a);
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
			vals[i] = tmpl_eval(c, n->kids[i]);
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
