/* Private to the parser (tmpl-parse.c: statements, tmpl-parse-expr.c:
 * expressions): its state and the token helpers both use. */
#ifndef ALLM_TMPL_PARSE_H
#define ALLM_TMPL_PARSE_H

#include "tmpl-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct parser {
	struct tarena *a;
	struct tfail *f;
	const struct ttok *t;
	size_t i, n;
	int depth;
	char *unsupported; /* the first unknown filter or test, with its line */
};

/* Jinja 3 refuses an unknown filter or test only when it runs (a branch that
 * never runs may name one: DeepSeek's templates do); remember the first so the
 * caller can say so at load. */
static inline void note_unsupported(struct parser *P, const char *what, const char *name)
{
	if (P->unsupported)
		return;
	char m[160];
	snprintf(m, sizeof(m), "line %d: unsupported %s '%s'", P->t[P->i].line, what, name);
	P->unsupported = ta_strndup(P->a, P->f, m, strlen(m));
}

static inline const struct ttok *cur(struct parser *P)
{
	return &P->t[P->i];
}

static inline _Noreturn void fail(struct parser *P, const char *fmt, const char *what)
{
	tfail_at(P->f, -EINVAL, cur(P)->line, fmt, what);
}

static inline const char *tok_text(const struct ttok *t)
{
	switch (t->kind) {
	case T_EOF: return "end of template";
	case T_DATA: return "template text";
	case T_VAR_BEGIN: return "{{";
	case T_VAR_END: return "}}";
	case T_BLOCK_BEGIN: return "{%";
	case T_BLOCK_END: return "%}";
	case T_STRING: return "a string";
	case T_INT:
	case T_FLOAT: return "a number";
	default: return t->p;
	}
}

static inline bool is_op(struct parser *P, const char *op)
{
	return cur(P)->kind == T_OP && !strcmp(cur(P)->p, op);
}

static inline bool is_name(struct parser *P, const char *name)
{
	return cur(P)->kind == T_NAME && !strcmp(cur(P)->p, name);
}

static inline bool accept_op(struct parser *P, const char *op)
{
	if (!is_op(P, op))
		return false;
	P->i++;
	return true;
}

static inline bool accept_name(struct parser *P, const char *name)
{
	if (!is_name(P, name))
		return false;
	P->i++;
	return true;
}

static inline void expect_op(struct parser *P, const char *op)
{
	if (!accept_op(P, op)) {
		char m[96];
		snprintf(m, sizeof(m), "expected '%s', got '%s'", op, tok_text(cur(P)));
		fail(P, "%s", m);
	}
}

static inline const char *expect_name(struct parser *P)
{
	if (cur(P)->kind != T_NAME)
		fail(P, "expected a name, got '%s'", tok_text(cur(P)));
	return P->t[P->i++].p;
}

static inline void expect_block_end(struct parser *P)
{
	if (cur(P)->kind != T_BLOCK_END)
		fail(P, "expected '%%}', got '%s'", tok_text(cur(P)));
	P->i++;
}

static inline struct tnode *node(struct parser *P, int kind)
{
	struct tnode *n = ta_alloc(P->a, P->f, sizeof(*n));
	memset(n, 0, sizeof(*n));
	n->kind = (uint8_t)kind;
	n->line = cur(P)->line;
	return n;
}

/* a growing list of child nodes (and names) */
struct kids {
	struct tnode **v;
	const char **names;
	size_t n, cap;
};

static inline void kid_add(struct parser *P, struct kids *k, struct tnode *n, const char *name)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 4;
		struct tnode **v = ta_alloc(P->a, P->f, cap * sizeof(*v));
		const char **nm = ta_alloc(P->a, P->f, cap * sizeof(*nm));
		if (k->n) {
			memcpy(v, k->v, k->n * sizeof(*v));
			memcpy(nm, k->names, k->n * sizeof(*nm));
		}
		k->v = v;
		k->names = nm;
		k->cap = cap;
	}
	k->v[k->n] = n;
	k->names[k->n++] = name;
}

static inline void kids_into(struct tnode *n, struct kids *k, bool names)
{
	n->kids = k->v;
	n->n_kids = k->n;
	if (names) {
		n->names = k->names;
		n->n_names = k->n;
	}
}

static inline void enter(struct parser *P)
{
	if (++P->depth > TMPL_MAX_DEPTH)
		tfail_at(P->f, -E2BIG, cur(P)->line, "template nested deeper than %d", TMPL_MAX_DEPTH);
}

/* expressions (tmpl-parse-expr.c) */
struct tnode *tparse_expr(struct parser *P);
/* a, b, c (a tuple when there is a comma); condexpr false: no `x if y` at the top */
struct tnode *tparse_tuple(struct parser *P, bool condexpr);
/* | name(args) applied to obj */
struct tnode *tparse_filter(struct parser *P, struct tnode *obj);

#endif
