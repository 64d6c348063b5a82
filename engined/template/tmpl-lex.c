/* The lexer: template source into data text and the tokens inside {{ }} and
 * {% %}, with Jinja's whitespace control applied here as Jinja's own lexer does
 * (`-` strips all whitespace on that side; trim_blocks drops the newline after a
 * block or comment tag; lstrip_blocks drops spaces and tabs before a block or
 * comment tag that starts a line, unless it is written `{%+`). Like Jinja with
 * keep_trailing_newline off, every line break becomes "\n" and one trailing
 * line break is dropped. */
#include "tmpl-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lexer {
	struct tarena *a;
	struct tfail *f;
	const char *s;
	size_t n, i;
	int line;
	struct ttok *v;
	size_t nv, cap;
};

static struct ttok *push(struct lexer *L, int kind)
{
	if (L->nv == L->cap) {
		size_t cap = L->cap ? 2 * L->cap : 256;
		struct ttok *v = ta_alloc(L->a, L->f, cap * sizeof(*v));
		if (L->nv)
			memcpy(v, L->v, L->nv * sizeof(*v));
		L->v = v;
		L->cap = cap;
	}
	struct ttok *t = &L->v[L->nv++];
	memset(t, 0, sizeof(*t));
	t->kind = (uint8_t)kind;
	t->line = L->line;
	return t;
}

/* Python's str.splitlines + "\n".join: every line boundary becomes "\n" and
 * one trailing boundary goes. */
static char *normalize(struct lexer *L, const char *src, size_t len, size_t *out_len)
{
	char *o = ta_alloc(L->a, L->f, len + 1);
	size_t k = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)src[i];
		if (ch == '\r') {
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
			o[k++] = '\n';
		} else if (ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) {
			o[k++] = '\n';
		} else if (ch == 0xc2 && i + 1 < len && (unsigned char)src[i + 1] == 0x85) {
			o[k++] = '\n';
			i++;
		} else if (ch == 0xe2 && i + 2 < len && (unsigned char)src[i + 1] == 0x80 &&
			   ((unsigned char)src[i + 2] == 0xa8 || (unsigned char)src[i + 2] == 0xa9)) {
			o[k++] = '\n';
			i += 2;
		} else {
			o[k++] = (char)ch;
		}
	}
	if (k && o[k - 1] == '\n')
		k--;
	o[k] = 0;
	*out_len = k;
	return o;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void count_lines(struct lexer *L, size_t from, size_t to)
{
	for (size_t k = from; k < to; k++)
		if (L->s[k] == '\n')
			L->line++;
}

/* Decodes a Python string literal's escapes (Jinja: unicode-escape). */
static void string_tok(struct lexer *L)
{
	char q = L->s[L->i];
	size_t start = ++L->i;
	while (L->i < L->n && L->s[L->i] != q) {
		if (L->s[L->i] == '\\' && L->i + 1 < L->n)
			L->i++;
		L->i++;
	}
	if (L->i >= L->n)
		tfail_at(L->f, -EINVAL, L->line, "unterminated string");
	size_t end = L->i++;
	char *o = ta_alloc(L->a, L->f, end - start + 1);
	size_t k = 0;
	struct ttok *t = push(L, T_STRING);
	for (size_t i = start; i < end; i++) {
		char ch = L->s[i];
		if (ch != '\\' || i + 1 >= end) {
			o[k++] = ch;
			continue;
		}
		char e = L->s[++i];
		uint32_t cp = 0;
		int hex = 0;
		switch (e) {
		case '\n': break; /* line continuation */
		case '\\': o[k++] = '\\'; break;
		case '\'': o[k++] = '\''; break;
		case '"': o[k++] = '"'; break;
		case 'a': o[k++] = '\a'; break;
		case 'b': o[k++] = '\b'; break;
		case 'f': o[k++] = '\f'; break;
		case 'n': o[k++] = '\n'; break;
		case 'r': o[k++] = '\r'; break;
		case 't': o[k++] = '\t'; break;
		case 'v': o[k++] = '\v'; break;
		case 'x': hex = 2; break;
		case 'u': hex = 4; break;
		case 'U': hex = 8; break;
		default:
			if (e >= '0' && e <= '7') {
				int d = 0;
				while (d < 3 && i < end && L->s[i] >= '0' && L->s[i] <= '7')
					cp = cp * 8 + (uint32_t)(L->s[i++] - '0'), d++;
				i--;
				hex = -1;
			} else {
				o[k++] = '\\';
				o[k++] = e;
			}
		}
		if (hex > 0) {
			for (int d = 0; d < hex; d++) {
				char h = i + 1 < end ? L->s[i + 1] : 0;
				int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
					: h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
				if (v < 0)
					tfail_at(L->f, -EINVAL, L->line, "bad \\%c escape in a string", e);
				cp = cp * 16 + (uint32_t)v;
				i++;
			}
		}
		if (hex) {
			if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
				tfail_at(L->f, -EINVAL, L->line, "escape of code point U+%X in a string", cp);
			/* UTF-8; the escapes take at least as many bytes as they write */
			if (cp < 0x80) {
				o[k++] = (char)cp;
			} else if (cp < 0x800) {
				o[k++] = (char)(0xc0 | cp >> 6);
				o[k++] = (char)(0x80 | (cp & 63));
			} else if (cp < 0x10000) {
				o[k++] = (char)(0xe0 | cp >> 12);
				o[k++] = (char)(0x80 | ((cp >> 6) & 63));
				o[k++] = (char)(0x80 | (cp & 63));
			} else {
				o[k++] = (char)(0xf0 | cp >> 18);
				o[k++] = (char)(0x80 | ((cp >> 12) & 63));
				o[k++] = (char)(0x80 | ((cp >> 6) & 63));
				o[k++] = (char)(0x80 | (cp & 63));
			}
		}
	}
	o[k] = 0;
	t->p = o;
	t->len = k;
	count_lines(L, start, end);
}

static void number_tok(struct lexer *L)
{
	size_t start = L->i;
	bool after_dot = L->nv && L->v[L->nv - 1].kind == T_OP && L->v[L->nv - 1].p[0] == '.';
	bool flt = false;
	while (L->i < L->n && ((L->s[L->i] >= '0' && L->s[L->i] <= '9') || L->s[L->i] == '_'))
		L->i++;
	if (!after_dot && L->i + 1 < L->n && L->s[L->i] == '.' && L->s[L->i + 1] >= '0' && L->s[L->i + 1] <= '9') {
		flt = true;
		L->i++;
		while (L->i < L->n && ((L->s[L->i] >= '0' && L->s[L->i] <= '9') || L->s[L->i] == '_'))
			L->i++;
	}
	if (!after_dot && L->i < L->n && (L->s[L->i] == 'e' || L->s[L->i] == 'E')) {
		size_t k = L->i + 1;
		if (k < L->n && (L->s[k] == '+' || L->s[k] == '-'))
			k++;
		if (k < L->n && L->s[k] >= '0' && L->s[k] <= '9') {
			flt = true;
			L->i = k;
			while (L->i < L->n && L->s[L->i] >= '0' && L->s[L->i] <= '9')
				L->i++;
		}
	}
	char buf[64];
	size_t k = 0;
	for (size_t j = start; j < L->i && k < sizeof(buf) - 1; j++)
		if (L->s[j] != '_')
			buf[k++] = L->s[j];
	buf[k] = 0;
	struct ttok *t = push(L, flt ? T_FLOAT : T_INT);
	if (flt) {
		t->f = strtod(buf, NULL);
	} else {
		errno = 0;
		unsigned long long v = strtoull(buf, NULL, 10);
		if (errno || v > INT64_MAX)
			tfail_at(L->f, -EINVAL, L->line, "integer literal %s is too large", buf);
		t->i = (int64_t)v;
	}
}

static const char *const OPS[] = {"==", "!=", "<=", ">=", "//", "**", "+", "-", "*", "/", "%", "~",
				  "<",  ">",  "=",  "(",  ")",  "[", "]", "{", "}", ".", ",", ":", "|"};

/* The tokens of one tag up to its end marker; returns with L->i after it. end
 * is "}}" or "%}"; *strip_after set for "-}}" / "-%}". */
static void tag_tokens(struct lexer *L, const char *end, bool *strip_after)
{
	int depth = 0; /* brackets open: a "}}" inside a dict literal is not the end */
	for (;;) {
		while (L->i < L->n && is_space(L->s[L->i])) {
			if (L->s[L->i] == '\n')
				L->line++;
			L->i++;
		}
		if (L->i >= L->n)
			tfail_at(L->f, -EINVAL, L->line, "unexpected end of template, expected '%s'", end);
		const char *p = L->s + L->i;
		size_t left = L->n - L->i;
		if (depth == 0 && left >= 3 && p[0] == '-' && !memcmp(p + 1, end, 2)) {
			*strip_after = true;
			L->i += 3;
			return;
		}
		if (depth == 0 && left >= 2 && !memcmp(p, end, 2)) {
			*strip_after = false;
			L->i += 2;
			return;
		}
		char ch = *p;
		if (ch == '\'' || ch == '"') {
			string_tok(L);
		} else if (ch >= '0' && ch <= '9') {
			number_tok(L);
		} else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
			size_t k = 0;
			while (k < left && ((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z') ||
					    (p[k] >= '0' && p[k] <= '9') || p[k] == '_'))
				k++;
			struct ttok *t = push(L, T_NAME);
			t->p = ta_strndup(L->a, L->f, p, k);
			t->len = k;
			L->i += k;
		} else {
			size_t k;
			for (k = 0; k < sizeof(OPS) / sizeof(*OPS); k++) {
				size_t ol = strlen(OPS[k]);
				if (left >= ol && !memcmp(p, OPS[k], ol))
					break;
			}
			if (k == sizeof(OPS) / sizeof(*OPS))
				tfail_at(L->f, -EINVAL, L->line, "unexpected character '%c'", ch);
			struct ttok *t = push(L, T_OP);
			t->p = OPS[k];
			t->len = strlen(OPS[k]);
			L->i += t->len;
			if (strchr("([{", OPS[k][0]) && t->len == 1)
				depth++;
			else if (strchr(")]}", OPS[k][0]) && t->len == 1 && depth > 0)
				depth--;
		}
	}
}

void tmpl_lex(struct tarena *a, struct tfail *f, const char *src, size_t len, struct ttoks *out)
{
	struct lexer L = {.a = a, .f = f, .line = 1};
	L.s = normalize(&L, src, len, &L.n);
	bool strip_next = false;   /* the previous tag ended with '-' */
	bool line_starting = true; /* the previous tag's match ended a line */
	while (L.i <= L.n) {
		/* data up to the next tag */
		size_t start = L.i, k = L.i;
		const char *tag = NULL;
		while (k + 1 < L.n) {
			if (L.s[k] == '{' && (L.s[k + 1] == '{' || L.s[k + 1] == '%' || L.s[k + 1] == '#')) {
				tag = L.s + k;
				break;
			}
			k++;
		}
		size_t dend = tag ? k : L.n;
		size_t ds = start, de = dend;
		if (strip_next)
			while (ds < de && is_space(L.s[ds]))
				ds++;
		char sign = tag && k + 2 < L.n ? L.s[k + 2] : 0;
		if (tag && sign == '-') {
			while (de > ds && is_space(L.s[de - 1]))
				de--;
		} else if (tag && sign != '+' && tag[1] != '{') {
			/* lstrip_blocks: spaces after the last newline, when only spaces */
			size_t lp = de;
			while (lp > ds && (L.s[lp - 1] == ' ' || L.s[lp - 1] == '\t'))
				lp--;
			bool at_line = lp > start ? L.s[lp - 1] == '\n' : line_starting;
			if (at_line)
				de = lp;
		}
		if (de > ds) {
			struct ttok *t = push(&L, T_DATA);
			t->p = L.s + ds;
			t->len = de - ds;
		}
		count_lines(&L, start, dend);
		if (!tag)
			break;
		L.i = dend + 2;
		if (sign == '-' || sign == '+')
			L.i++;
		bool strip_after = false;
		if (tag[1] == '#') {
			const char *e = NULL;
			for (size_t j = L.i; j + 1 < L.n; j++)
				if (L.s[j] == '#' && L.s[j + 1] == '}') {
					e = L.s + j;
					break;
				}
			if (!e)
				tfail_at(f, -EINVAL, L.line, "unterminated comment");
			size_t ce = (size_t)(e - L.s);
			strip_after = ce > L.i && L.s[ce - 1] == '-';
			count_lines(&L, L.i, ce);
			L.i = ce + 2;
		} else {
			int line = L.line;
			push(&L, tag[1] == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN)->line = line;
			tag_tokens(&L, tag[1] == '{' ? "}}" : "%}", &strip_after);
			push(&L, tag[1] == '{' ? T_VAR_END : T_BLOCK_END);
		}
		line_starting = false;
		/* trim_blocks: one newline after a block or comment tag */
		if (!strip_after && tag[1] != '{' && L.i < L.n && L.s[L.i] == '\n') {
			L.i++;
			L.line++;
			line_starting = true;
		}
		strip_next = strip_after;
	}
	push(&L, T_EOF);
	out->v = L.v;
	out->n = L.nv;
}
