/* The parser: tokens into a syntax tree; statements here, expressions in
 * tmpl-parse-expr.c.
 *
 * Children by kind: N_ATTR a.name; N_ITEM a[b]; N_SLICE a[b:c:d]; N_CALL a(kids,
 * names = keyword or NULL); N_FILTER a|name(kids); N_TEST a is [not: op] name(kids);
 * N_COND a if b else c; S_IF if a: b else c; S_FOR for names in a if b: c else d
 * (recursive loops are refused); S_SET names = a (name set: names[0] is an attribute of the
 * namespace `name`); S_SETBLOCK name = a | filters b; S_MACRO name(names = kids): a;
 * S_CALLBLOCK call a with caller(names = kids): b; S_FILTERBLOCK a | filters b;
 * S_WITH names = kids: a. */
#include "tmpl-parse.h"

static struct tnode *body_until(struct parser *P, const char *const *ends);

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
		kid_add(P, &k, accept_op(P, "=") ? tparse_expr(P) : NULL, name);
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
		n = tparse_filter(P, n);
	while (accept_op(P, "|"));
	return n;
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};

static struct tnode *if_stmt(struct parser *P)
{
	struct tnode *n = node(P, S_IF);
	n->a = tparse_tuple(P, true);
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
	n->a = tparse_tuple(P, false);
	if (accept_name(P, "if"))
		n->b = tparse_expr(P);
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
		n->a = tparse_tuple(P, true);
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
		n->a = tparse_tuple(P, true);
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
		n->a = tparse_expr(P);
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
			kid_add(P, &k, tparse_expr(P), name);
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
			n->a = tparse_tuple(P, true);
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
