/* Private to engined/template/: the arena, values, the syntax tree and the
 * evaluator's context that the lexer, parser, evaluator, filters and methods
 * share.
 *
 * Errors unwind with longjmp to the entry point (allm_tmpl_parse or render),
 * as Lua's interpreter does: every allocation of a parse or a render lives in
 * one arena freed there, so nothing between the failure and the entry point
 * owns anything to release, and the code reads as the language it interprets
 * instead of as a chain of error checks. */
#ifndef ALLM_TMPL_INTERNAL_H
#define ALLM_TMPL_INTERNAL_H

#include "template.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena: every allocation of one parse or one render ---- */
struct tarena_chunk;
struct tarena {
	struct tarena_chunk *head;
	size_t used, cap; /* bytes taken from malloc; cap: the limit (then fail) */
};

/* Where a failure goes: the entry point's jmp_buf and the message. */
struct tfail {
	jmp_buf jb;
	char msg[512];
	int code;    /* -EINVAL, -E2BIG, -ENOMEM */
	bool raised; /* raise_exception: msg is the template's own text */
};

_Noreturn void tfail_at(struct tfail *f, int code, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void *ta_alloc(struct tarena *a, struct tfail *f, size_t n);
void ta_free_all(struct tarena *a);
char *ta_strndup(struct tarena *a, struct tfail *f, const char *s, size_t n);

/* ---- values ---- */
enum tv_kind {
	TV_UNDEF, /* a name or key that is not there (Jinja's Undefined) */
	TV_NONE,
	TV_BOOL,
	TV_INT,
	TV_FLOAT,
	TV_STR,
	TV_LIST,  /* also a tuple (tuple set) */
	TV_DICT,
	TV_NS,    /* namespace(): a dict whose attributes `set` may assign */
	TV_LOOP,  /* a for loop's `loop` */
	TV_MACRO, /* a macro (or a call block's caller) */
	TV_FUNC,  /* a global function or a bound method */
};

/* A tainted range of a string: bytes that came from the caller's data. */
struct tspan {
	size_t off, len;
};

struct tstr {
	const char *p; /* NUL-terminated at len */
	size_t len;
	const struct tspan *spans; /* sorted, disjoint, not adjacent */
	size_t n_spans;
};

struct tv;
struct tlist {
	size_t n;
	struct tv *v;
};
struct tdict {
	size_t n, cap;
	struct tv *k, *v; /* insertion order, as Python's dict */
};
struct tloop;
struct tmacro;
struct tfunc;

struct tv {
	uint8_t kind;
	bool tuple; /* TV_LIST written as (a, b): its repr */
	bool markup; /* TV_STR from |safe or |escape: Markup, which escapes what + adds to it */
	bool gen;   /* TV_LIST from map / select...: a Python generator (no len, no JSON, always true) */
	union {
		bool b;
		int64_t i;
		double f;
		const struct tstr *s;
		const struct tlist *l;
		struct tdict *d; /* TV_DICT (never changed after build) and TV_NS */
		struct tloop *loop;
		const struct tmacro *m;
		const struct tfunc *fn;
		const char *undef; /* TV_UNDEF: the name, for messages (may be NULL) */
	};
};

/* ---- syntax tree ---- */
enum tnode_kind {
	/* expressions */
	N_LIT, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST,
	N_NEG, N_POS, N_NOT, N_AND, N_OR, N_BIN, N_CMP, N_COND,
	N_PIPE, /* the value a filter block or a block set pipes into its filters */
	/* statements */
	S_BODY, S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_CALLBLOCK, S_FILTERBLOCK,
	S_BREAK, S_CONTINUE, S_WITH,
};

/* N_BIN / N_CMP operators */
enum tnode_op {
	OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
	OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};

struct tnode {
	uint8_t kind;
	uint8_t op;    /* N_BIN; N_TEST: negated; S_FOR: recursive */
	int line;
	struct tnode *a, *b, *c, *d; /* children, by kind (see tmpl-parse.c) */
	struct tnode **kids;         /* items, arguments, a body's statements */
	size_t n_kids;
	const char **names;          /* keyword names (NULL for positional), targets, params */
	size_t n_names;
	struct tv lit;               /* N_LIT; S_TEXT: its text */
	const char *name;            /* N_NAME, N_ATTR, N_FILTER, N_TEST, S_SET, S_MACRO */
};

/* ---- lexer ---- */
enum ttok_kind {
	T_EOF, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
	T_NAME, T_STRING, T_INT, T_FLOAT, T_OP,
};
struct ttok {
	uint8_t kind;
	int line;
	const char *p; /* T_DATA / T_NAME / T_OP: its text; T_STRING: decoded */
	size_t len;
	int64_t i;
	double f;
};
struct ttoks {
	struct ttok *v;
	size_t n;
};
void tmpl_lex(struct tarena *a, struct tfail *f, const char *src, size_t len, struct ttoks *out);

/* ---- parser ---- */
/* *unsupported: the first unknown filter or test ("line N: unsupported filter 'x'"), else NULL */
struct tnode *tmpl_parse_tokens(struct tarena *a, struct tfail *f, const struct ttoks *toks,
			       const char **unsupported);

struct allm_tmpl {
	struct tarena arena; /* owns every node */
	struct tnode *root;
	const char *unsupported; /* see allm_tmpl_unsupported */
};

/* ---- string builder (tainted spans follow the bytes) ---- */
struct tsb {
	char *p;
	size_t len, cap;
	struct tspan *sp;
	size_t n_sp, cap_sp;
};

/* ---- evaluation context ---- */
struct tframe;
struct targs;
struct tctx {
	struct tarena ar;
	struct tfail *f;
	const struct allm_tmpl_env *env;
	size_t steps, max_steps, max_output, depth;
	struct tframe *frame;   /* innermost scope */
	struct tframe *globals; /* the template's top level */
	struct tsb *out;        /* where output goes now */
	int line;               /* of the node being evaluated, for messages */
	struct tv pipe;         /* what N_PIPE reads */
};

#define TMPL_MAX_DEPTH 200 /* nesting of expressions, statements and macro calls */

struct tloop {
	const struct tlist *items;
	size_t i;
	struct tloop *parent;
};

/* one evaluation: counts a step, remembers the line */
static inline void tmpl_step(struct tctx *c, const struct tnode *n)
{
	c->line = n->line;
	if (++c->steps > c->max_steps)
		tfail_at(c->f, -E2BIG, c->line, "the template ran more than %zu steps", c->max_steps);
}

static inline void tmpl_enter(struct tctx *c)
{
	if (++c->depth > TMPL_MAX_DEPTH)
		tfail_at(c->f, -E2BIG, c->line, "the template nests calls deeper than %d", TMPL_MAX_DEPTH);
}

/* expressions (tmpl-expr.c) and the names in scope (tmpl-exec.c) */
struct tv tmpl_eval(struct tctx *c, const struct tnode *n);
void tmpl_eval_args(struct tctx *c, const struct tnode *n, struct targs *a);
struct tv tmpl_lookup(struct tctx *c, const char *name);

_Noreturn void tctx_fail(struct tctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *tctx_alloc(struct tctx *c, size_t n);

/* values (tmpl-value.c) */
extern const struct tv TV_UNDEF_V, TV_NONE_V;
struct tv tv_bool(bool b);
struct tv tv_int(int64_t i);
struct tv tv_float(double f);
struct tv tv_str(struct tctx *c, const char *p, size_t len, bool tainted);
struct tv tv_cstr(struct tctx *c, const char *s); /* untainted */
struct tv tv_str_const(struct tarena *a, struct tfail *f, const char *p, size_t len);
struct tv tv_list(struct tctx *c, size_t n);      /* n items, each TV_NONE; fill .v */
struct tv tv_dict(struct tctx *c);
void tdict_set(struct tctx *c, struct tdict *d, struct tv k, struct tv v);
const struct tv *tdict_get(const struct tdict *d, struct tv k);
const struct tv *tdict_gets(const struct tdict *d, const char *key);
bool tv_truthy(struct tv v);
bool tv_equal(struct tv a, struct tv b);
int tv_compare(struct tctx *c, struct tv a, struct tv b); /* <0, 0, >0 or fail */
const char *tv_type_name(struct tv v);
bool tv_is_str(struct tv v);
struct tv tv_from_json(struct tctx *c, const json_t *j, bool tainted);
/* str() and repr() of any value, taint kept */
struct tv tv_to_str(struct tctx *c, struct tv v);
void tv_repr(struct tctx *c, struct tsb *b, struct tv v);
void tv_str_into(struct tctx *c, struct tsb *b, struct tv v);
size_t tstr_ncp(const struct tstr *s); /* code points */

/* builder */
void tsb_put(struct tctx *c, struct tsb *b, const char *p, size_t n, bool tainted);
void tsb_putc(struct tctx *c, struct tsb *b, char ch);
void tsb_puts(struct tctx *c, struct tsb *b, const char *s);
void tsb_printf(struct tctx *c, struct tsb *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* s[off, off+n) with its spans */
void tsb_put_sub(struct tctx *c, struct tsb *b, const struct tstr *s, size_t off, size_t n);
struct tv tsb_value(struct tctx *c, struct tsb *b);
bool tstr_tainted(const struct tstr *s, size_t off, size_t n);

/* functions: globals, filters, tests, methods (tmpl-filters.c, tmpl-methods.c) */
struct targs {
	size_t n;               /* positional */
	struct tv *v;
	size_t n_kw;
	const char **kw_names;
	struct tv *kw;
};
struct tfunc;
typedef struct tv (*tfunc_fn)(struct tctx *c, const struct tfunc *fn, const struct targs *a);
struct tfunc {
	const char *name;
	tfunc_fn fn;
	struct tv self; /* a bound method's object */
	int aux;        /* the function's own datum */
};
/* the argument named name at position pos (or by keyword), else dflt */
struct tv targ(struct tctx *c, const struct targs *a, size_t pos, const char *name, struct tv dflt);

struct tv tmpl_filter(struct tctx *c, const char *name, struct tv v, const struct targs *a);
bool tmpl_has_filter(const char *name);
bool tmpl_test(struct tctx *c, const char *name, struct tv v, const struct targs *a);
bool tmpl_has_test(const char *name);
/* obj.name: a method bound to obj, else TV_UNDEF */
struct tv tmpl_method(struct tctx *c, struct tv obj, const char *name);
struct tv tmpl_global(struct tctx *c, const char *name); /* TV_UNDEF when none */
/* a list of what `for` walks over v (items, keys, characters) */
struct tv tmpl_iterable(struct tctx *c, struct tv v);
/* obj.name and obj[key] as Jinja's getattr / getitem */
struct tv tmpl_attr(struct tctx *c, struct tv obj, const char *name);
struct tv tmpl_item(struct tctx *c, struct tv obj, struct tv key);
void tmpl_float_repr(double d, char *out, size_t cap);
/* Python's str.isspace for the code point at s[i] (its length in *len), 0 if not */
bool tmpl_space_at(const char *s, size_t n, size_t i, size_t *len);
/* call a macro or function value */
struct tv tmpl_call(struct tctx *c, struct tv fn, const struct targs *a, struct tv caller);

/* string helpers the filters share with the methods (tmpl-methods.c) */
struct tv tstr_strip(struct tctx *c, struct tv v, struct tv chars, int which); /* 1 l, 2 r, 3 both */
struct tv tstr_case(struct tctx *c, struct tv v, char mode); /* u l c t, j: Jinja's title */
/* str.splitlines(): Python's line boundaries */
bool tmpl_linebreak_at(const char *s, size_t n, size_t i, size_t *len);
struct tv tmpl_splitlines(struct tctx *c, struct tv v);
struct tv tstr_replace(struct tctx *c, struct tv v, struct tv old, struct tv new, int64_t count);

/* tojson: Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys) */
struct tv tmpl_tojson(struct tctx *c, struct tv v, const struct targs *a);

#endif
