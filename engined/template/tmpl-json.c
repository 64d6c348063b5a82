/* tojson as transformers defines it for chat templates: Python's
 * json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
 * sort_keys=sort_keys), byte for byte (its separators, its float repr, its
 * escapes). The bytes of a string that came from data stay marked data. */
#include "tmpl-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct jopts {
	const struct tstr *indent; /* NULL: one line */
	const struct tstr *item_sep, *key_sep;
	bool sort_keys, ensure_ascii;
};

static void jstr(struct tctx *c, struct tsb *b, const struct tstr *s, bool ascii)
{
	tsb_putc(c, b, '"');
	for (size_t i = 0; i < s->len;) {
		unsigned char ch = (unsigned char)s->p[i];
		bool t = s->n_spans && tstr_tainted(s, i, 1);
		char e[16];
		const char *out = NULL;
		size_t l = 1;
		switch (ch) {
		case '"': out = "\\\""; break;
		case '\\': out = "\\\\"; break;
		case '\n': out = "\\n"; break;
		case '\r': out = "\\r"; break;
		case '\t': out = "\\t"; break;
		case '\b': out = "\\b"; break;
		case '\f': out = "\\f"; break;
		default:
			if (ch < 0x20) {
				snprintf(e, sizeof(e), "\\u%04x", ch);
				out = e;
			} else if (ch >= 0x80 && ascii) {
				l = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : 2;
				if (i + l > s->len)
					l = s->len - i;
				uint32_t cp = l == 2 ? (ch & 31u) : l == 3 ? (ch & 15u) : (ch & 7u);
				for (size_t j = 1; j < l; j++)
					cp = cp << 6 | ((unsigned char)s->p[i + j] & 63u);
				if (cp >= 0x10000) {
					cp -= 0x10000;
					snprintf(e, sizeof(e), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
				} else {
					snprintf(e, sizeof(e), "\\u%04x", cp);
				}
				out = e;
			}
		}
		if (out)
			tsb_put(c, b, out, strlen(out), t);
		else
			tsb_put(c, b, s->p + i, 1, t);
		i += l;
	}
	tsb_putc(c, b, '"');
}

static void newline(struct tctx *c, struct tsb *b, const struct jopts *o, int level)
{
	tsb_putc(c, b, '\n');
	for (int i = 0; i < level; i++)
		tsb_put(c, b, o->indent->p, o->indent->len, false);
}

/* a dict key as json.dumps writes it: str as is, numbers, bools and None as text */
static const struct tstr *key_str(struct tctx *c, struct tv k)
{
	switch (k.kind) {
	case TV_STR: return k.s;
	case TV_BOOL: return tv_cstr(c, k.b ? "true" : "false").s;
	case TV_NONE: return tv_cstr(c, "null").s;
	case TV_INT:
	case TV_FLOAT: return tv_to_str(c, k).s;
	default: tctx_fail(c, "keys must be str, int, float, bool or None, not %s", tv_type_name(k));
	}
}

static int key_cmp(const void *a, const void *b)
{
	const struct tstr *x = *(const struct tstr *const *)a, *y = *(const struct tstr *const *)b;
	size_t n = x->len < y->len ? x->len : y->len;
	int r = memcmp(x->p, y->p, n);
	return r ? r : (x->len > y->len) - (x->len < y->len);
}

static void dump(struct tctx *c, struct tsb *b, struct tv v, const struct jopts *o, int level)
{
	char buf[64];
	if (++c->depth > TMPL_MAX_DEPTH)
		tctx_fail(c, "tojson: a value nested deeper than %d", TMPL_MAX_DEPTH);
	switch (v.kind) {
	case TV_NONE: tsb_puts(c, b, "null"); break;
	case TV_BOOL: tsb_puts(c, b, v.b ? "true" : "false"); break;
	case TV_INT: tsb_printf(c, b, "%lld", (long long)v.i); break;
	case TV_FLOAT:
		if (isnan(v.f))
			tsb_puts(c, b, "NaN");
		else if (isinf(v.f))
			tsb_puts(c, b, v.f < 0 ? "-Infinity" : "Infinity");
		else {
			tmpl_float_repr(v.f, buf, sizeof(buf));
			tsb_puts(c, b, buf);
		}
		break;
	case TV_STR: jstr(c, b, v.s, o->ensure_ascii); break;
	case TV_LIST:
		if (v.gen)
			tctx_fail(c, "Object of type generator is not JSON serializable");
		if (!v.l->n) {
			tsb_puts(c, b, "[]");
			break;
		}
		tsb_putc(c, b, '[');
		for (size_t i = 0; i < v.l->n; i++) {
			if (i)
				tsb_put(c, b, o->item_sep->p, o->item_sep->len, false);
			if (o->indent)
				newline(c, b, o, level + 1);
			dump(c, b, v.l->v[i], o, level + 1);
		}
		if (o->indent)
			newline(c, b, o, level);
		tsb_putc(c, b, ']');
		break;
	case TV_DICT: {
		if (!v.d->n) {
			tsb_puts(c, b, "{}");
			break;
		}
		size_t n = v.d->n;
		const struct tstr **keys = tctx_alloc(c, n * sizeof(*keys) * 2);
		size_t *order = tctx_alloc(c, n * sizeof(*order));
		for (size_t i = 0; i < n; i++)
			keys[i] = key_str(c, v.d->k[i]);
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		if (o->sort_keys) {
			/* sort (key, index) pairs: keys[n + i] holds the sorted keys */
			memcpy(keys + n, keys, n * sizeof(*keys));
			qsort(keys + n, n, sizeof(*keys), key_cmp);
			for (size_t i = 0; i < n; i++)
				for (size_t j = 0; j < n; j++)
					if (keys[j] == keys[n + i]) {
						order[i] = j;
						break;
					}
		}
		tsb_putc(c, b, '{');
		for (size_t k = 0; k < n; k++) {
			size_t i = order[k];
			if (k)
				tsb_put(c, b, o->item_sep->p, o->item_sep->len, false);
			if (o->indent)
				newline(c, b, o, level + 1);
			jstr(c, b, keys[i], o->ensure_ascii);
			tsb_put(c, b, o->key_sep->p, o->key_sep->len, false);
			dump(c, b, v.d->v[i], o, level + 1);
		}
		if (o->indent)
			newline(c, b, o, level);
		tsb_putc(c, b, '}');
		break;
	}
	default: tctx_fail(c, "Object of type %s is not JSON serializable", tv_type_name(v));
	}
	c->depth--;
}

struct tv tmpl_tojson(struct tctx *c, struct tv v, const struct targs *a)
{
	struct jopts o = {0};
	struct tv ind = targ(c, a, 1, "indent", TV_NONE_V), sep = targ(c, a, 2, "separators", TV_NONE_V);
	struct tv ea = targ(c, a, 0, "ensure_ascii", tv_bool(false));
	o.ensure_ascii = tv_truthy(ea);
	o.sort_keys = tv_truthy(targ(c, a, 3, "sort_keys", tv_bool(false)));
	if (ind.kind == TV_INT) {
		struct tsb b = {0};
		for (int64_t i = 0; i < ind.i && i < 256; i++)
			tsb_putc(c, &b, ' ');
		o.indent = tsb_value(c, &b).s;
	} else if (ind.kind == TV_STR) {
		o.indent = ind.s;
	} else if (ind.kind != TV_NONE) {
		tctx_fail(c, "tojson: indent must be an int or a string");
	}
	if (sep.kind == TV_LIST && sep.l->n == 2 && sep.l->v[0].kind == TV_STR && sep.l->v[1].kind == TV_STR) {
		o.item_sep = sep.l->v[0].s;
		o.key_sep = sep.l->v[1].s;
	} else if (sep.kind != TV_NONE) {
		tctx_fail(c, "tojson: separators must be a pair of strings");
	} else {
		o.item_sep = tv_cstr(c, o.indent ? "," : ", ").s;
		o.key_sep = tv_cstr(c, ": ").s;
	}
	struct tsb b = {0};
	dump(c, &b, v, &o, 0);
	return tsb_value(c, &b);
}
