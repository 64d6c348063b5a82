/* The parser's expressions, with Jinja's grammar and precedence
 * (jinja2/parser.py): condexpr < or < and < not < compare < + - < ~ < * / // % <
 * ** < unary, then postfix (.attr [item] (call)) and filters / tests. */
#include "tmpl-parse.h"

static struct tnode *expr(struct parser *P);
static struct tnode *tuple_expr(struct parser *P, bool condexpr);

/* (args, name=kw, ...) after the '(' */
static void call_args(struct parser *P, struct tnode *n)
{
	struct kids k = {0};
	while (!accept_op(P, ")")) {
		if (k.n)
			expect_op(P, ",");
		if (accept_op(P, ")"))
			break;
		if (is_op(P, "*") || is_op(P, "**"))
			fail(P, "unsupported construct '%s' in call arguments", cur(P)->p);
		const char *kw = NULL;
		if (cur(P)->kind == T_NAME && P->t[P->i + 1].kind == T_OP && !strcmp(P->t[P->i + 1].p, "=")) {
			kw = cur(P)->p;
			P->i += 2;
		}
		kid_add(P, &k, expr(P), kw);
	}
	kids_into(n, &k, true);
}

static struct tnode *primary(struct parser *P)
{
	const struct ttok *t = cur(P);
	struct tnode *n;
	switch (t->kind) {
	case T_NAME:
		n = node(P, N_LIT);
		if (!strcmp(t->p, "true") || !strcmp(t->p, "True"))
			n->lit = tv_bool(true);
		else if (!strcmp(t->p, "false") || !strcmp(t->p, "False"))
			n->lit = tv_bool(false);
		else if (!strcmp(t->p, "none") || !strcmp(t->p, "None"))
			n->lit = TV_NONE_V;
		else {
			n->kind = N_NAME;
			n->name = t->p;
		}
		P->i++;
		return n;
	case T_STRING: {
		/* adjacent strings join, as in Python */
		size_t len = 0, j = P->i;
		while (P->t[j].kind == T_STRING)
			len += P->t[j++].len;
		char *s = ta_alloc(P->a, P->f, len + 1);
		struct tstr *ts = ta_alloc(P->a, P->f, sizeof(*ts));
		len = 0;
		while (cur(P)->kind == T_STRING) {
			memcpy(s + len, cur(P)->p, cur(P)->len);
			len += P->t[P->i++].len;
		}
		s[len] = 0;
		*ts = (struct tstr){.p = s, .len = len};
		n = node(P, N_LIT);
		n->lit.kind = TV_STR;
		n->lit.s = ts;
		return n;
	}
	case T_INT:
		n = node(P, N_LIT);
		n->lit = tv_int(t->i);
		P->i++;
		return n;
	case T_FLOAT:
		n = node(P, N_LIT);
		n->lit = tv_float(t->f);
		P->i++;
		return n;
	case T_OP:
		if (accept_op(P, "(")) {
			if (accept_op(P, ")")) {
				n = node(P, N_TUPLE);
				return n;
			}
			n = tuple_expr(P, true);
			expect_op(P, ")");
			return n;
		}
		if (accept_op(P, "[")) {
			struct kids k = {0};
			n = node(P, N_LIST);
			while (!accept_op(P, "]")) {
				if (k.n)
					expect_op(P, ",");
				if (accept_op(P, "]"))
					break;
				kid_add(P, &k, expr(P), NULL);
			}
			kids_into(n, &k, false);
			return n;
		}
		if (accept_op(P, "{")) {
			struct kids k = {0};
			n = node(P, N_DICT);
			while (!accept_op(P, "}")) {
				if (k.n)
					expect_op(P, ",");
				if (accept_op(P, "}"))
					break;
				kid_add(P, &k, expr(P), NULL);
				expect_op(P, ":");
				kid_add(P, &k, expr(P), NULL);
			}
			kids_into(n, &k, false);
			return n;
		}
		break;
	default:
		break;
	}
	fail(P, "unexpected '%s' in an expression", tok_text(t));
}

static struct tnode *subscript(struct parser *P, struct tnode *obj)
{
	struct tnode *parts[3] = {0};
	int colons = 0;
	for (;;) {
		if (is_op(P, ":")) {
			if (++colons > 2)
				fail(P, "%s", "bad slice");
			P->i++;
			continue;
		}
		if (is_op(P, "]"))
			break;
		if (parts[colons])
			fail(P, "%s", "bad subscript");
		parts[colons] = expr(P);
	}
	expect_op(P, "]");
	struct tnode *n;
	if (colons == 0) {
		n = node(P, N_ITEM);
		n->b = parts[0];
		if (!n->b)
			fail(P, "%s", "empty subscript");
	} else {
		n = node(P, N_SLICE);
		n->b = parts[0];
		n->c = parts[1];
		n->d = parts[2];
	}
	n->a = obj;
	return n;
}

static struct tnode *postfix(struct parser *P, struct tnode *n)
{
	for (;;) {
		if (accept_op(P, ".")) {
			struct tnode *m = node(P, N_ATTR);
			m->a = n;
			if (cur(P)->kind == T_INT) {
				/* foo.0 is foo[0] */
				m->kind = N_ITEM;
				m->b = node(P, N_LIT);
				m->b->lit = tv_int(cur(P)->i);
				P->i++;
			} else {
				m->name = expect_name(P);
			}
			n = m;
		} else if (accept_op(P, "[")) {
			n = subscript(P, n);
		} else if (accept_op(P, "(")) {
			struct tnode *m = node(P, N_CALL);
			m->a = n;
			call_args(P, m);
			n = m;
		} else {
			return n;
		}
	}
}

/* a filter's name and arguments, on obj */
static struct tnode *filter_one(struct parser *P, struct tnode *obj)
{
	struct tnode *n = node(P, N_FILTER);
	n->a = obj;
	const char *name = expect_name(P);
	/* dotted filter names (none in Jinja's builtins) */
	n->name = name;
	if (!tmpl_has_filter(name))
		note_unsupported(P, "filter", name);
	if (accept_op(P, "("))
		call_args(P, n);
	return n;
}

static bool starts_arg(struct parser *P)
{
	const struct ttok *t = cur(P);
	if (t->kind == T_NAME)
		return strcmp(t->p, "else") && strcmp(t->p, "or") && strcmp(t->p, "and");
	return t->kind == T_STRING || t->kind == T_INT || t->kind == T_FLOAT ||
	       (t->kind == T_OP && (!strcmp(t->p, "(") || !strcmp(t->p, "[") || !strcmp(t->p, "{")));
}

static struct tnode *filters_and_tests(struct parser *P, struct tnode *n)
{
	for (;;) {
		if (accept_op(P, "|")) {
			n = filter_one(P, n);
		} else if (is_name(P, "is")) {
			P->i++;
			struct tnode *m = node(P, N_TEST);
			m->a = n;
			if (accept_name(P, "not"))
				m->op = 1;
			m->name = expect_name(P);
			if (!tmpl_has_test(m->name))
				note_unsupported(P, "test", m->name);
			if (accept_op(P, "(")) {
				call_args(P, m);
			} else if (starts_arg(P)) {
				struct kids k = {0};
				kid_add(P, &k, postfix(P, primary(P)), NULL);
				kids_into(m, &k, true);
			}
			n = m;
		} else if (accept_op(P, "(")) {
			struct tnode *m = node(P, N_CALL);
			m->a = n;
			call_args(P, m);
			n = m;
		} else {
			return n;
		}
	}
}

static struct tnode *unary(struct parser *P, bool with_filter)
{
	struct tnode *n;
	enter(P);
	if (accept_op(P, "-")) {
		n = node(P, N_NEG);
		n->a = unary(P, false);
	} else if (accept_op(P, "+")) {
		n = node(P, N_POS);
		n->a = unary(P, false);
	} else {
		n = postfix(P, primary(P));
	}
	if (with_filter)
		n = filters_and_tests(P, n);
	P->depth--;
	return n;
}

static struct tnode *binary(struct parser *P, int op, struct tnode *a, struct tnode *b)
{
	struct tnode *n = node(P, N_BIN);
	n->op = (uint8_t)op;
	n->a = a;
	n->b = b;
	n->line = a->line;
	return n;
}

static struct tnode *power(struct parser *P)
{
	struct tnode *n = unary(P, true);
	while (accept_op(P, "**"))
		n = binary(P, OP_POW, n, unary(P, true));
	return n;
}

static struct tnode *math2(struct parser *P)
{
	struct tnode *n = power(P);
	for (;;) {
		if (accept_op(P, "*"))
			n = binary(P, OP_MUL, n, power(P));
		else if (accept_op(P, "/"))
			n = binary(P, OP_DIV, n, power(P));
		else if (accept_op(P, "//"))
			n = binary(P, OP_FLOORDIV, n, power(P));
		else if (accept_op(P, "%"))
			n = binary(P, OP_MOD, n, power(P));
		else
			return n;
	}
}

static struct tnode *concat(struct parser *P)
{
	struct tnode *n = math2(P);
	while (accept_op(P, "~"))
		n = binary(P, OP_CONCAT, n, math2(P));
	return n;
}

static struct tnode *math1(struct parser *P)
{
	struct tnode *n = concat(P);
	for (;;) {
		if (accept_op(P, "+"))
			n = binary(P, OP_ADD, n, concat(P));
		else if (accept_op(P, "-"))
			n = binary(P, OP_SUB, n, concat(P));
		else
			return n;
	}
}

static struct tnode *compare(struct parser *P)
{
	struct tnode *n = math1(P), *prev = n, *res = NULL;
	for (;;) {
		int op;
		if (accept_op(P, "=="))
			op = OP_EQ;
		else if (accept_op(P, "!="))
			op = OP_NE;
		else if (accept_op(P, "<"))
			op = OP_LT;
		else if (accept_op(P, "<="))
			op = OP_LE;
		else if (accept_op(P, ">"))
			op = OP_GT;
		else if (accept_op(P, ">="))
			op = OP_GE;
		else if (accept_name(P, "in"))
			op = OP_IN;
		else if (is_name(P, "not") && P->t[P->i + 1].kind == T_NAME && !strcmp(P->t[P->i + 1].p, "in")) {
			P->i += 2;
			op = OP_NOTIN;
		} else
			break;
		struct tnode *rhs = math1(P);
		struct tnode *c = binary(P, op, prev, rhs);
		c->kind = N_CMP;
		if (!res) {
			res = c;
		} else { /* a < b < c: (a < b) and (b < c) */
			struct tnode *and = node(P, N_AND);
			and->a = res;
			and->b = c;
			res = and;
		}
		prev = rhs;
	}
	return res ? res : n;
}

static struct tnode *not_expr(struct parser *P)
{
	if (accept_name(P, "not")) {
		struct tnode *n = node(P, N_NOT);
		enter(P);
		n->a = not_expr(P);
		P->depth--;
		return n;
	}
	return compare(P);
}

/* A left-associative chain of the keyword word (and, or) over next. */
static struct tnode *keyword_chain(struct parser *P, const char *word, int kind,
				   struct tnode *(*next)(struct parser *))
{
	struct tnode *n = next(P);
	while (accept_name(P, word)) {
		struct tnode *m = node(P, kind);
		m->a = n;
		m->b = next(P);
		n = m;
	}
	return n;
}

static struct tnode *and_expr(struct parser *P)
{
	return keyword_chain(P, "and", N_AND, not_expr);
}

static struct tnode *or_expr(struct parser *P)
{
	return keyword_chain(P, "or", N_OR, and_expr);
}

static struct tnode *cond_expr(struct parser *P)
{
	struct tnode *n = or_expr(P);
	while (accept_name(P, "if")) {
		struct tnode *m = node(P, N_COND);
		m->a = n;
		m->b = or_expr(P);
		if (accept_name(P, "else"))
			m->c = cond_expr(P);
		n = m;
	}
	return n;
}

static struct tnode *expr(struct parser *P)
{
	enter(P);
	struct tnode *n = cond_expr(P);
	P->depth--;
	return n;
}

/* a, b, c (a tuple when there is a comma) */
static struct tnode *tuple_expr(struct parser *P, bool condexpr)
{
	struct tnode *first = condexpr ? expr(P) : or_expr(P);
	if (!is_op(P, ","))
		return first;
	struct kids k = {0};
	struct tnode *n = node(P, N_TUPLE);
	kid_add(P, &k, first, NULL);
	while (accept_op(P, ",")) {
		if (is_op(P, ")") || cur(P)->kind == T_BLOCK_END || cur(P)->kind == T_VAR_END)
			break;
		kid_add(P, &k, condexpr ? expr(P) : or_expr(P), NULL);
	}
	kids_into(n, &k, false);
	return n;
}

struct tnode *tparse_expr(struct parser *P)
{
	return expr(P);
}

struct tnode *tparse_tuple(struct parser *P, bool condexpr)
{
	return tuple_expr(P, condexpr);
}

struct tnode *tparse_filter(struct parser *P, struct tnode *obj)
{
	return filter_one(P, obj);
}
