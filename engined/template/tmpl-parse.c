/* The parser: tokens into a syntax tree, with Jinja's grammar and precedence
 * (jinja2/parser.py): condexpr < or < and < not < compare < + - < ~ < * / // % <
 * ** < unary, then postfix (.attr [item] (call)) and filters / tests.
 *
 * Children by kind: N_ATTR a.name; N_ITEM a[b]; N_SLICE a[b:c:d]; N_CALL a(kids,
 * names = keyword or NULL); N_FILTER a|name(kids); N_TEST a is [not: op] name(kids);
 * N_COND a if b else c; S_IF if a: b else c; S_FOR for names in a if b: c else d
 * (op: recursive); S_SET names = a (name set: names[0] is an attribute of the
 * namespace `name`); S_SETBLOCK name = a | filters b; S_MACRO name(names = kids): a;
 * S_CALLBLOCK call a with caller(names = kids): b; S_FILTERBLOCK a | filters b;
 * S_WITH names = kids: a. */
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
static void note_unsupported(struct parser *P, const char *what, const char *name)
{
	if (P->unsupported)
		return;
	char m[160];
	snprintf(m, sizeof(m), "line %d: unsupported %s '%s'", P->t[P->i].line, what, name);
	P->unsupported = ta_strndup(P->a, P->f, m, strlen(m));
}

static struct tnode *expr(struct parser *P);
static struct tnode *tuple_expr(struct parser *P, bool condexpr);
static struct tnode *body_until(struct parser *P, const char *const *ends);

static const struct ttok *cur(struct parser *P)
{
	return &P->t[P->i];
}

static _Noreturn void fail(struct parser *P, const char *fmt, const char *what)
{
	tfail_at(P->f, -EINVAL, cur(P)->line, fmt, what);
}

static const char *tok_text(const struct ttok *t)
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

static bool is_op(struct parser *P, const char *op)
{
	return cur(P)->kind == T_OP && !strcmp(cur(P)->p, op);
}

static bool is_name(struct parser *P, const char *name)
{
	return cur(P)->kind == T_NAME && !strcmp(cur(P)->p, name);
}

static bool accept_op(struct parser *P, const char *op)
{
	if (!is_op(P, op))
		return false;
	P->i++;
	return true;
}

static bool accept_name(struct parser *P, const char *name)
{
	if (!is_name(P, name))
		return false;
	P->i++;
	return true;
}

static void expect_op(struct parser *P, const char *op)
{
	if (!accept_op(P, op)) {
		char m[96];
		snprintf(m, sizeof(m), "expected '%s', got '%s'", op, tok_text(cur(P)));
		fail(P, "%s", m);
	}
}

static const char *expect_name(struct parser *P)
{
	if (cur(P)->kind != T_NAME)
		fail(P, "expected a name, got '%s'", tok_text(cur(P)));
	return P->t[P->i++].p;
}

static void expect_block_end(struct parser *P)
{
	if (cur(P)->kind != T_BLOCK_END)
		fail(P, "expected '%%}', got '%s'", tok_text(cur(P)));
	P->i++;
}

static struct tnode *node(struct parser *P, int kind)
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

static void kid_add(struct parser *P, struct kids *k, struct tnode *n, const char *name)
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

static void kids_into(struct tnode *n, struct kids *k, bool names)
{
	n->kids = k->v;
	n->n_kids = k->n;
	if (names) {
		n->names = k->names;
		n->n_names = k->n;
	}
}

static void enter(struct parser *P)
{
	if (++P->depth > TMPL_MAX_DEPTH)
		tfail_at(P->f, -E2BIG, cur(P)->line, "template nested deeper than %d", TMPL_MAX_DEPTH);
}

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

static struct tnode *and_expr(struct parser *P)
{
	struct tnode *n = not_expr(P);
	while (accept_name(P, "and")) {
		struct tnode *m = node(P, N_AND);
		m->a = n;
		m->b = not_expr(P);
		n = m;
	}
	return n;
}

static struct tnode *or_expr(struct parser *P)
{
	struct tnode *n = and_expr(P);
	while (accept_name(P, "or")) {
		struct tnode *m = node(P, N_OR);
		m->a = n;
		m->b = and_expr(P);
		n = m;
	}
	return n;
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

/* target names: a or a, b or (a, b) */
static void targets(struct parser *P, struct tnode *n)
{
	struct kids k = {0};
	bool paren = accept_op(P, "(");
	do {
		kid_add(P, &k, NULL, expect_name(P));
	} while (accept_op(P, ","));
	if (paren)
		expect_op(P, ")");
	n->names = k.names;
	n->n_names = k.n;
}

/* macro / call parameters: (a, b=default) */
static void params(struct parser *P, struct tnode *n)
{
	struct kids k = {0};
	expect_op(P, "(");
	while (!accept_op(P, ")")) {
		if (k.n)
			expect_op(P, ",");
		const char *name = expect_name(P);
		kid_add(P, &k, accept_op(P, "=") ? expr(P) : NULL, name);
	}
	kids_into(n, &k, true);
}

/* | name(args) | name ... applied to N_PIPE */
static struct tnode *filter_chain(struct parser *P, bool first_bar)
{
	struct tnode *n = node(P, N_PIPE);
	if (first_bar && !accept_op(P, "|"))
		return NULL;
	do
		n = filter_one(P, n);
	while (accept_op(P, "|"));
	return n;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};

static struct tnode *if_stmt(struct parser *P)
{
	struct tnode *n = node(P, S_IF);
	n->a = tuple_expr(P, true);
	expect_block_end(P);
	n->b = body_until(P, END_IF);
	const char *which = cur(P)->p;
	P->i++;
	if (!strcmp(which, "elif")) {
		n->c = if_stmt(P);
		return n;
	}
	if (!strcmp(which, "else")) {
		expect_block_end(P);
		static const char *const end[] = {"endif", NULL};
		n->c = body_until(P, end);
		P->i++;
	}
	expect_block_end(P);
	return n;
}

static struct tnode *for_stmt(struct parser *P)
{
	struct tnode *n = node(P, S_FOR);
	targets(P, n);
	if (!accept_name(P, "in"))
		fail(P, "expected 'in', got '%s'", tok_text(cur(P)));
	n->a = tuple_expr(P, false);
	if (accept_name(P, "if"))
		n->b = expr(P);
	if (is_name(P, "recursive"))
		fail(P, "unsupported construct '%s' (a recursive loop)", "recursive");
	expect_block_end(P);
	n->c = body_until(P, END_FOR);
	if (!strcmp(P->t[P->i++].p, "else")) {
		expect_block_end(P);
		static const char *const end[] = {"endfor", NULL};
		n->d = body_until(P, end);
		P->i++;
	}
	expect_block_end(P);
	return n;
}

static struct tnode *set_stmt(struct parser *P)
{
	struct tnode *n = node(P, S_SET);
	const char *first = expect_name(P);
	if (accept_op(P, ".")) {
		/* set ns.attr = value */
		n->name = first;
		n->names = ta_alloc(P->a, P->f, sizeof(*n->names));
		n->names[0] = expect_name(P);
		n->n_names = 1;
		expect_op(P, "=");
		n->a = tuple_expr(P, true);
		expect_block_end(P);
		return n;
	}
	if (is_op(P, "=") || is_op(P, ",")) {
		struct kids k = {0};
		kid_add(P, &k, NULL, first);
		while (accept_op(P, ","))
			kid_add(P, &k, NULL, expect_name(P));
		n->names = k.names;
		n->n_names = k.n;
		expect_op(P, "=");
		n->a = tuple_expr(P, true);
		expect_block_end(P);
		return n;
	}
	/* block set: {% set name | filters %}...{% endset %} */
	n->kind = S_SETBLOCK;
	n->name = first;
	n->b = filter_chain(P, true);
	expect_block_end(P);
	static const char *const end[] = {"endset", NULL};
	n->a = body_until(P, end);
	P->i++;
	expect_block_end(P);
	return n;
}

static struct tnode *statement(struct parser *P)
{
	P->i++; /* {% */
	int line = cur(P)->line;
	const char *kw = expect_name(P);
	struct tnode *n;
	if (!strcmp(kw, "if"))
		return if_stmt(P);
	if (!strcmp(kw, "for"))
		return for_stmt(P);
	if (!strcmp(kw, "set"))
		return set_stmt(P);
	if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
		n = node(P, kw[0] == 'b' ? S_BREAK : S_CONTINUE);
		expect_block_end(P);
		return n;
	}
	if (!strcmp(kw, "macro")) {
		n = node(P, S_MACRO);
		n->name = expect_name(P);
		params(P, n);
		expect_block_end(P);
		static const char *const end[] = {"endmacro", NULL};
		n->a = body_until(P, end);
		P->i++;
		if (cur(P)->kind == T_NAME)
			P->i++; /* {% endmacro name %} */
		expect_block_end(P);
		return n;
	}
	if (!strcmp(kw, "call")) {
		n = node(P, S_CALLBLOCK);
		if (is_op(P, "("))
			params(P, n);
		n->a = expr(P);
		if (n->a->kind != N_CALL)
			fail(P, "%s", "expected a call after 'call'");
		expect_block_end(P);
		static const char *const end[] = {"endcall", NULL};
		n->b = body_until(P, end);
		P->i++;
		expect_block_end(P);
		return n;
	}
	if (!strcmp(kw, "filter")) {
		n = node(P, S_FILTERBLOCK);
		n->b = filter_chain(P, false);
		expect_block_end(P);
		static const char *const end[] = {"endfilter", NULL};
		n->a = body_until(P, end);
		P->i++;
		expect_block_end(P);
		return n;
	}
	if (!strcmp(kw, "generation")) {
		/* transformers' AssistantTracker: marks the assistant's text, renders it as is */
		expect_block_end(P);
		static const char *const end[] = {"endgeneration", NULL};
		n = body_until(P, end);
		P->i++;
		expect_block_end(P);
		return n;
	}
	if (!strcmp(kw, "with")) {
		n = node(P, S_WITH);
		struct kids k = {0};
		while (cur(P)->kind != T_BLOCK_END) {
			if (k.n)
				expect_op(P, ",");
			const char *name = expect_name(P);
			expect_op(P, "=");
			kid_add(P, &k, expr(P), name);
		}
		kids_into(n, &k, true);
		expect_block_end(P);
		static const char *const end[] = {"endwith", NULL};
		n->a = body_until(P, end);
		P->i++;
		expect_block_end(P);
		return n;
	}
	tfail_at(P->f, -EINVAL, line, "unsupported statement '%s'", kw);
}

/* statements until a {% NAME %} with NAME in ends (NULL: the end of the
 * template); leaves P at NAME */
static struct tnode *body_until(struct parser *P, const char *const *ends)
{
	struct kids k = {0};
	struct tnode *body = node(P, S_BODY);
	int line = body->line;
	enter(P);
	for (;;) {
		const struct ttok *t = cur(P);
		if (t->kind == T_EOF) {
			if (ends)
				{
				size_t last = 0;
				while (ends[last + 1])
					last++;
				tfail_at(P->f, -EINVAL, line, "missing '{%% %s %%}' for the block opened here",
					 ends[last]);
			}
			break;
		}
		if (t->kind == T_DATA) {
			struct tnode *n = node(P, S_TEXT);
			n->lit = tv_str_const(P->a, P->f, t->p, t->len);
			kid_add(P, &k, n, NULL);
			P->i++;
		} else if (t->kind == T_VAR_BEGIN) {
			struct tnode *n = node(P, S_OUT);
			P->i++;
			n->a = tuple_expr(P, true);
			if (cur(P)->kind != T_VAR_END)
				fail(P, "expected '}}', got '%s'", tok_text(cur(P)));
			P->i++;
			kid_add(P, &k, n, NULL);
		} else if (t->kind == T_BLOCK_BEGIN) {
			const struct ttok *kw = &P->t[P->i + 1];
			bool end = false;
			for (size_t e = 0; ends && ends[e] && kw->kind == T_NAME; e++)
				end |= !strcmp(kw->p, ends[e]);
			if (end) {
				P->i++;
				break;
			}
			if (kw->kind == T_NAME && (!strncmp(kw->p, "end", 3) || !strcmp(kw->p, "elif") ||
						   !strcmp(kw->p, "else"))) {
				P->i++;
				fail(P, "unexpected '%s'", kw->p);
			}
			kid_add(P, &k, statement(P), NULL);
		} else {
			fail(P, "unexpected '%s'", tok_text(t));
		}
	}
	P->depth--;
	kids_into(body, &k, false);
	return body;
}

struct tnode *tmpl_parse_tokens(struct tarena *a, struct tfail *f, const struct ttoks *toks,
			       const char **unsupported)
{
	struct parser P = {.a = a, .f = f, .t = toks->v, .n = toks->n};
	struct tnode *root = body_until(&P, NULL);
	*unsupported = P.unsupported;
	return root;
}
