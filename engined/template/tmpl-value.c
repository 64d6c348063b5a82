/* Values as Python sees them: the arena they live in, strings that carry which
 * of their bytes came from the caller's data, lists and insertion-ordered dicts,
 * truth, equality and order, and str() / repr() as Python writes them (chat
 * templates print lists and dicts, and json.dumps prints floats with repr). */
#include "tmpl-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tarena_chunk {
	struct tarena_chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char mem[];
};

void tfail_at(struct tfail *f, int code, int line, const char *fmt, ...)
{
	va_list ap;
	int k = line > 0 ? snprintf(f->msg, sizeof(f->msg), "line %d: ", line) : 0;
	va_start(ap, fmt);
	vsnprintf(f->msg + k, sizeof(f->msg) - (size_t)k, fmt, ap);
	va_end(ap);
	f->code = code;
	longjmp(f->jb, 1);
}

void *ta_alloc(struct tarena *a, struct tfail *f, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (a->head && a->head->size - a->head->used >= n) {
		void *p = a->head->mem + a->head->used;
		a->head->used += n;
		return p;
	}
	size_t size = n > (64u << 10) ? n : (64u << 10);
	if (a->used + size > a->cap)
		tfail_at(f, -E2BIG, 0, "the template needs more than %zu MiB of memory", a->cap >> 20);
	struct tarena_chunk *c = malloc(sizeof(*c) + size);
	if (!c)
		tfail_at(f, -ENOMEM, 0, "out of memory");
	a->used += size;
	c->size = size;
	c->used = n;
	/* a big one-off block goes behind the head so the head keeps its room */
	if (a->head && n > (64u << 10)) {
		c->next = a->head->next;
		a->head->next = c;
	} else {
		c->next = a->head;
		a->head = c;
	}
	return c->mem;
}

void ta_free_all(struct tarena *a)
{
	while (a->head) {
		struct tarena_chunk *n = a->head->next;
		free(a->head);
		a->head = n;
	}
	a->used = 0;
}

char *ta_strndup(struct tarena *a, struct tfail *f, const char *s, size_t n)
{
	char *p = ta_alloc(a, f, n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void tctx_fail(struct tctx *c, const char *fmt, ...)
{
	va_list ap;
	char m[400];
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	tfail_at(c->f, -EINVAL, c->line, "%s", m);
}

void *tctx_alloc(struct tctx *c, size_t n)
{
	return ta_alloc(&c->ar, c->f, n);
}

const struct tv TV_UNDEF_V = {.kind = TV_UNDEF}, TV_NONE_V = {.kind = TV_NONE};

struct tv tv_bool(bool b)
{
	return (struct tv){.kind = TV_BOOL, .b = b};
}

struct tv tv_int(int64_t i)
{
	return (struct tv){.kind = TV_INT, .i = i};
}

struct tv tv_float(double f)
{
	return (struct tv){.kind = TV_FLOAT, .f = f};
}

struct tv tv_str_const(struct tarena *a, struct tfail *f, const char *p, size_t len)
{
	struct tstr *s = ta_alloc(a, f, sizeof(*s));
	*s = (struct tstr){.p = ta_strndup(a, f, p, len), .len = len};
	return (struct tv){.kind = TV_STR, .s = s};
}

struct tv tv_str(struct tctx *c, const char *p, size_t len, bool tainted)
{
	struct tv v = tv_str_const(&c->ar, c->f, p, len);
	if (tainted && len) {
		struct tspan *sp = tctx_alloc(c, sizeof(*sp));
		*sp = (struct tspan){0, len};
		((struct tstr *)v.s)->spans = sp;
		((struct tstr *)v.s)->n_spans = 1;
	}
	return v;
}

struct tv tv_cstr(struct tctx *c, const char *s)
{
	return tv_str(c, s, strlen(s), false);
}

struct tv tv_list(struct tctx *c, size_t n)
{
	struct tlist *l = tctx_alloc(c, sizeof(*l));
	l->n = n;
	l->v = tctx_alloc(c, (n ? n : 1) * sizeof(struct tv));
	for (size_t i = 0; i < n; i++)
		l->v[i] = TV_NONE_V;
	return (struct tv){.kind = TV_LIST, .l = l};
}

struct tv tv_dict(struct tctx *c)
{
	struct tdict *d = tctx_alloc(c, sizeof(*d));
	memset(d, 0, sizeof(*d));
	return (struct tv){.kind = TV_DICT, .d = d};
}

bool tv_is_str(struct tv v)
{
	return v.kind == TV_STR;
}

const struct tv *tdict_get(const struct tdict *d, struct tv k)
{
	for (size_t i = 0; i < d->n; i++)
		if (tv_equal(d->k[i], k))
			return &d->v[i];
	return NULL;
}

const struct tv *tdict_gets(const struct tdict *d, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < d->n; i++)
		if (d->k[i].kind == TV_STR && d->k[i].s->len == kl && !memcmp(d->k[i].s->p, key, kl))
			return &d->v[i];
	return NULL;
}

void tdict_set(struct tctx *c, struct tdict *d, struct tv k, struct tv v)
{
	for (size_t i = 0; i < d->n; i++)
		if (tv_equal(d->k[i], k)) {
			d->v[i] = v;
			return;
		}
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 8;
		struct tv *nk = tctx_alloc(c, cap * sizeof(*nk)), *nv = tctx_alloc(c, cap * sizeof(*nv));
		if (d->n) {
			memcpy(nk, d->k, d->n * sizeof(*nk));
			memcpy(nv, d->v, d->n * sizeof(*nv));
		}
		d->k = nk;
		d->v = nv;
		d->cap = cap;
	}
	d->k[d->n] = k;
	d->v[d->n++] = v;
}

bool tv_truthy(struct tv v)
{
	switch (v.kind) {
	case TV_UNDEF:
	case TV_NONE: return false;
	case TV_BOOL: return v.b;
	case TV_INT: return v.i != 0;
	case TV_FLOAT: return v.f != 0;
	case TV_STR: return v.s->len > 0;
	case TV_LIST: return v.gen || v.l->n > 0;
	case TV_DICT: return v.d->n > 0;
	default: return true;
	}
}

static bool numeric(struct tv v, double *d)
{
	if (v.kind == TV_INT)
		*d = (double)v.i;
	else if (v.kind == TV_BOOL)
		*d = v.b;
	else if (v.kind == TV_FLOAT)
		*d = v.f;
	else
		return false;
	return true;
}

bool tv_equal(struct tv a, struct tv b)
{
	double x, y;
	if ((a.kind == TV_INT || a.kind == TV_BOOL) && (b.kind == TV_INT || b.kind == TV_BOOL))
		return (a.kind == TV_INT ? a.i : a.b) == (b.kind == TV_INT ? b.i : b.b);
	if (numeric(a, &x) && numeric(b, &y))
		return x == y;
	if (a.kind != b.kind)
		return false;
	switch (a.kind) {
	case TV_UNDEF:
	case TV_NONE: return true;
	case TV_STR: return a.s->len == b.s->len && !memcmp(a.s->p, b.s->p, a.s->len);
	case TV_LIST:
		if (a.l->n != b.l->n || a.tuple != b.tuple)
			return false;
		for (size_t i = 0; i < a.l->n; i++)
			if (!tv_equal(a.l->v[i], b.l->v[i]))
				return false;
		return true;
	case TV_DICT:
		if (a.d->n != b.d->n)
			return false;
		for (size_t i = 0; i < a.d->n; i++) {
			const struct tv *o = tdict_get(b.d, a.d->k[i]);
			if (!o || !tv_equal(a.d->v[i], *o))
				return false;
		}
		return true;
	case TV_NS: return a.d == b.d;
	case TV_LOOP: return a.loop == b.loop;
	case TV_MACRO: return a.m == b.m;
	case TV_FUNC: return a.fn == b.fn;
	default: return false;
	}
}

const char *tv_type_name(struct tv v)
{
	static const char *const names[] = {"Undefined", "NoneType", "bool",     "int",
					    "float",     "str",      "list",     "dict",
					    "Namespace", "LoopContext", "Macro", "function"};
	if (v.kind == TV_LIST && v.tuple)
		return "tuple";
	return names[v.kind];
}

int tv_compare(struct tctx *c, struct tv a, struct tv b)
{
	double x, y;
	if (a.kind == TV_INT && b.kind == TV_INT)
		return (a.i > b.i) - (a.i < b.i);
	if (numeric(a, &x) && numeric(b, &y))
		return (x > y) - (x < y);
	if (a.kind == TV_STR && b.kind == TV_STR) {
		size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
		int r = memcmp(a.s->p, b.s->p, n);
		return r ? (r > 0) - (r < 0) : (a.s->len > b.s->len) - (a.s->len < b.s->len);
	}
	if (a.kind == TV_LIST && b.kind == TV_LIST) {
		for (size_t i = 0; i < a.l->n && i < b.l->n; i++)
			if (!tv_equal(a.l->v[i], b.l->v[i]))
				return tv_compare(c, a.l->v[i], b.l->v[i]);
		return (a.l->n > b.l->n) - (a.l->n < b.l->n);
	}
	tctx_fail(c, "'<' not supported between instances of '%s' and '%s'", tv_type_name(a),
		  tv_type_name(b));
}

size_t tstr_ncp(const struct tstr *s)
{
	size_t n = 0;
	for (size_t i = 0; i < s->len; i++)
		n += ((unsigned char)s->p[i] & 0xc0) != 0x80;
	return n;
}

/* ---- builder ---- */

static void grow(struct tctx *c, struct tsb *b, size_t add)
{
	if (b->len + add < b->cap)
		return;
	if (b == c->out && b->len + add > c->max_output)
		tfail_at(c->f, -E2BIG, c->line, "the output is longer than %zu bytes", c->max_output);
	size_t cap = b->cap ? b->cap : 64;
	while (cap <= b->len + add)
		cap *= 2;
	char *p = tctx_alloc(c, cap);
	if (b->len)
		memcpy(p, b->p, b->len);
	b->p = p;
	b->cap = cap;
}

static void add_span(struct tctx *c, struct tsb *b, size_t off, size_t len)
{
	if (!len)
		return;
	if (b->n_sp && b->sp[b->n_sp - 1].off + b->sp[b->n_sp - 1].len == off) {
		b->sp[b->n_sp - 1].len += len;
		return;
	}
	if (b->n_sp == b->cap_sp) {
		size_t cap = b->cap_sp ? 2 * b->cap_sp : 8;
		struct tspan *sp = tctx_alloc(c, cap * sizeof(*sp));
		if (b->n_sp)
			memcpy(sp, b->sp, b->n_sp * sizeof(*sp));
		b->sp = sp;
		b->cap_sp = cap;
	}
	b->sp[b->n_sp++] = (struct tspan){off, len};
}

void tsb_put(struct tctx *c, struct tsb *b, const char *p, size_t n, bool tainted)
{
	grow(c, b, n);
	memcpy(b->p + b->len, p, n);
	if (tainted)
		add_span(c, b, b->len, n);
	b->len += n;
	b->p[b->len] = 0;
}

void tsb_putc(struct tctx *c, struct tsb *b, char ch)
{
	tsb_put(c, b, &ch, 1, false);
}

void tsb_puts(struct tctx *c, struct tsb *b, const char *s)
{
	tsb_put(c, b, s, strlen(s), false);
}

void tsb_printf(struct tctx *c, struct tsb *b, const char *fmt, ...)
{
	char buf[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	tsb_put(c, b, buf, n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, false);
}

void tsb_put_sub(struct tctx *c, struct tsb *b, const struct tstr *s, size_t off, size_t n)
{
	size_t at = b->len;
	tsb_put(c, b, s->p + off, n, false);
	for (size_t k = 0; k < s->n_spans; k++) {
		size_t lo = s->spans[k].off, hi = lo + s->spans[k].len;
		if (lo < off)
			lo = off;
		if (hi > off + n)
			hi = off + n;
		if (lo < hi)
			add_span(c, b, at + lo - off, hi - lo);
	}
}

bool tstr_tainted(const struct tstr *s, size_t off, size_t n)
{
	for (size_t k = 0; k < s->n_spans; k++)
		if (s->spans[k].off < off + n && s->spans[k].off + s->spans[k].len > off)
			return true;
	return false;
}

struct tv tsb_value(struct tctx *c, struct tsb *b)
{
	struct tstr *s = tctx_alloc(c, sizeof(*s));
	if (!b->p)
		grow(c, b, 0), b->p[0] = 0;
	*s = (struct tstr){.p = b->p, .len = b->len, .spans = b->sp, .n_spans = b->n_sp};
	return (struct tv){.kind = TV_STR, .s = s};
}

/* ---- str() and repr() ---- */

/* Python's repr(float): the shortest digits that read back the same. */
static void float_repr(double d, char *out, size_t cap)
{
	if (isnan(d)) {
		snprintf(out, cap, "nan");
		return;
	}
	if (isinf(d)) {
		snprintf(out, cap, d < 0 ? "-inf" : "inf");
		return;
	}
	char buf[40];
	int p;
	for (p = 1; p <= 17; p++) {
		snprintf(buf, sizeof(buf), "%.*e", p - 1, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	char digits[24];
	size_t nd = 0;
	const char *q = buf;
	bool neg = *q == '-';
	if (neg)
		q++;
	for (; *q && *q != 'e'; q++)
		if (*q >= '0' && *q <= '9')
			digits[nd++] = *q;
	int e = atoi(q + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	size_t k = 0;
#define PUT(ch) (k + 1 < cap ? (void)(out[k++] = (ch)) : (void)0)
	if (neg)
		PUT('-');
	if (e >= -4 && e < 16) {
		if (e >= 0) {
			for (int i = 0; i <= e; i++)
				PUT((size_t)i < nd ? digits[i] : '0');
			PUT('.');
			if ((size_t)e + 1 < nd)
				for (size_t i = (size_t)e + 1; i < nd; i++)
					PUT(digits[i]);
			else
				PUT('0');
		} else {
			PUT('0');
			PUT('.');
			for (int i = 0; i < -e - 1; i++)
				PUT('0');
			for (size_t i = 0; i < nd; i++)
				PUT(digits[i]);
		}
		out[k] = 0;
	} else {
		PUT(digits[0]);
		if (nd > 1) {
			PUT('.');
			for (size_t i = 1; i < nd; i++)
				PUT(digits[i]);
		}
		out[k] = 0;
		snprintf(out + k, cap - k, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
	}
#undef PUT
}

void tmpl_float_repr(double d, char *out, size_t cap)
{
	float_repr(d, out, cap);
}

/* Code points Python's str.isprintable() says no to, beyond ASCII: C1
 * controls, separators other than ' ', common format characters. */
static bool unprintable(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0xa0) || cp == 0xad || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) ||
	       (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x2064) || cp == 0x3000 ||
	       cp == 0xfeff || (cp >= 0xd800 && cp <= 0xdfff);
}

static void str_repr(struct tctx *c, struct tsb *b, const struct tstr *s)
{
	bool taint = s->n_spans > 0;
	char q = memchr(s->p, '\'', s->len) && !memchr(s->p, '"', s->len) ? '"' : '\'';
	tsb_putc(c, b, q);
	for (size_t i = 0; i < s->len;) {
		unsigned char ch = (unsigned char)s->p[i];
		char e[16];
		if (ch == '\\' || ch == (unsigned char)q) {
			e[0] = '\\', e[1] = (char)ch, e[2] = 0;
		} else if (ch == '\n') {
			strcpy(e, "\\n");
		} else if (ch == '\r') {
			strcpy(e, "\\r");
		} else if (ch == '\t') {
			strcpy(e, "\\t");
		} else if (ch < 0x20 || ch == 0x7f) {
			snprintf(e, sizeof(e), "\\x%02x", ch);
		} else if (ch < 0x80) {
			e[0] = (char)ch, e[1] = 0;
		} else {
			size_t l = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : 2;
			if (i + l > s->len)
				l = s->len - i;
			uint32_t cp = l == 2 ? (ch & 31u) : l == 3 ? (ch & 15u) : (ch & 7u);
			for (size_t j = 1; j < l; j++)
				cp = cp << 6 | ((unsigned char)s->p[i + j] & 63u);
			if (unprintable(cp)) {
				if (cp < 0x100)
					snprintf(e, sizeof(e), "\\x%02x", cp);
				else
					snprintf(e, sizeof(e), "\\u%04x", cp);
				tsb_put(c, b, e, strlen(e), taint);
			} else {
				tsb_put(c, b, s->p + i, l, taint);
			}
			i += l;
			continue;
		}
		tsb_put(c, b, e, strlen(e), taint);
		i++;
	}
	tsb_putc(c, b, q);
}

void tv_repr(struct tctx *c, struct tsb *b, struct tv v)
{
	if (++c->depth > TMPL_MAX_DEPTH)
		tfail_at(c->f, -E2BIG, c->line, "a value nested deeper than %d", TMPL_MAX_DEPTH);
	switch (v.kind) {
	case TV_STR:
		str_repr(c, b, v.s);
		break;
	case TV_LIST:
		tsb_putc(c, b, v.tuple ? '(' : '[');
		for (size_t i = 0; i < v.l->n; i++) {
			if (i)
				tsb_puts(c, b, ", ");
			tv_repr(c, b, v.l->v[i]);
		}
		if (v.tuple && v.l->n == 1)
			tsb_putc(c, b, ',');
		tsb_putc(c, b, v.tuple ? ')' : ']');
		break;
	case TV_DICT:
		tsb_putc(c, b, '{');
		for (size_t i = 0; i < v.d->n; i++) {
			if (i)
				tsb_puts(c, b, ", ");
			tv_repr(c, b, v.d->k[i]);
			tsb_puts(c, b, ": ");
			tv_repr(c, b, v.d->v[i]);
		}
		tsb_putc(c, b, '}');
		break;
	default:
		tv_str_into(c, b, v);
	}
	c->depth--;
}

void tv_str_into(struct tctx *c, struct tsb *b, struct tv v)
{
	char buf[64];
	switch (v.kind) {
	case TV_UNDEF: break;
	case TV_NONE: tsb_puts(c, b, "None"); break;
	case TV_BOOL: tsb_puts(c, b, v.b ? "True" : "False"); break;
	case TV_INT: tsb_printf(c, b, "%lld", (long long)v.i); break;
	case TV_FLOAT:
		float_repr(v.f, buf, sizeof(buf));
		tsb_puts(c, b, buf);
		break;
	case TV_STR: tsb_put_sub(c, b, v.s, 0, v.s->len); break;
	case TV_LIST:
		if (v.gen)
			tctx_fail(c, "unsupported construct: printing a generator (add '| list')");
		/* fall through */
	case TV_DICT: tv_repr(c, b, v); break;
	case TV_NS:
		tsb_puts(c, b, "<Namespace ");
		tv_repr(c, b, (struct tv){.kind = TV_DICT, .d = v.d});
		tsb_putc(c, b, '>');
		break;
	case TV_LOOP: tsb_puts(c, b, "<LoopContext>"); break;
	case TV_MACRO: tsb_puts(c, b, "<Macro>"); break;
	case TV_FUNC: tsb_puts(c, b, "<function>"); break;
	}
}

struct tv tv_to_str(struct tctx *c, struct tv v)
{
	if (v.kind == TV_STR)
		return v;
	struct tsb b = {0};
	tv_str_into(c, &b, v);
	return tsb_value(c, &b);
}

struct tv tv_from_json(struct tctx *c, const json_t *j, bool tainted)
{
	if (++c->depth > TMPL_MAX_DEPTH)
		tfail_at(c->f, -E2BIG, 0, "the context nests deeper than %d", TMPL_MAX_DEPTH);
	struct tv v = TV_NONE_V;
	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *x;
		v = tv_dict(c);
		/* keys are unique already: no search */
		v.d->cap = json_object_size(j) ? json_object_size(j) : 1;
		v.d->k = tctx_alloc(c, v.d->cap * sizeof(struct tv));
		v.d->v = tctx_alloc(c, v.d->cap * sizeof(struct tv));
		json_object_foreach((json_t *)j, k, x) {
			v.d->k[v.d->n] = tv_str(c, k, strlen(k), tainted);
			v.d->v[v.d->n++] = tv_from_json(c, x, tainted);
		}
		break;
	}
	case JSON_ARRAY:
		v = tv_list(c, json_array_size(j));
		for (size_t i = 0; i < v.l->n; i++)
			v.l->v[i] = tv_from_json(c, json_array_get(j, i), tainted);
		break;
	case JSON_STRING: v = tv_str(c, json_string_value(j), json_string_length(j), tainted); break;
	case JSON_INTEGER: v = tv_int((int64_t)json_integer_value(j)); break;
	case JSON_REAL: v = tv_float(json_real_value(j)); break;
	case JSON_TRUE: v = tv_bool(true); break;
	case JSON_FALSE: v = tv_bool(false); break;
	case JSON_NULL: break;
	}
	c->depth--;
	return v;
}
