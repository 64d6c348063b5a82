/* JSON Schema to GBNF: what every output of the grammar is, a JSON text the
 * schema validates.
 *
 * Taken: type (one or a list), enum, const, properties, required,
 * additionalProperties (absent where properties are given means none, as
 * llama.cpp and OpenAI's strict mode: a subset of what the schema allows; true or
 * a schema: extra keys after the declared ones, written without escapes and
 * never equal to a declared name), items, prefixItems, minItems, maxItems,
 * minLength, maxLength, pattern (a regex, regex.c), format (date, time,
 * date-time, uuid, ipv4: their regular forms), integer minimum/maximum
 * (exclusive too) as a range of at most 4096 values or a lower bound of 0 or 1,
 * number minimum 0, $ref to "#", "#/$defs/..." or "#/definitions/...", anyOf,
 * oneOf (as anyOf: exact where its branches do not overlap), uniqueItems false,
 * and the annotations (title, description, default, examples, ...).
 * Refused, naming the place: every other keyword (allOf, not, if/then/else,
 * patternProperties, minProperties, maxProperties, multipleOf, contains,
 * uniqueItems true, other formats, other ranges, pattern with a length, the
 * schema false).
 *
 * Numbers have at most 16 integer digits, 16 fraction digits and a 3-digit
 * exponent, and whitespace is bounded, so a grammar never lets the model loop
 * forever inside a number or between tokens. */
#include "grammar-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define MAX_DEPTH 64
#define MAX_REFS 256
#define MAX_RANGE_VALUES 4096
#define MAX_PATH 256

struct js {
	struct sbuf *out;
	json_t *root;
	struct allm_err *err;
	int rc;
	uint32_t n_rules;
	uint32_t n_refs;
	struct {
		char *ref;
		char name[24];
	} refs[MAX_REFS];
};

static int jfail(struct js *j, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int jfail(struct js *j, const char *path, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!j->rc)
		j->rc = allm_err_set(j->err, -EINVAL, "JSON Schema at %s: %s", *path ? path : "/", msg);
	return j->rc;
}

static void new_name(struct js *j, char name[24])
{
	snprintf(name, 24, "s%u", j->n_rules++);
}

/* A JSON value's compact text as a GBNF literal. */
static void put_json_literal(struct js *j, struct sbuf *b, json_t *v)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!t) {
		b->oom = true;
		return;
	}
	sbuf_gbnf_literal(b, t, strlen(t));
	free(t);
	(void)j;
}

static bool is_annotation(const char *k)
{
	static const char *const ann[] = { "title", "description", "default", "examples", "$schema", "$id",
					   "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions" };
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(ann); i++)
		if (!strcmp(k, ann[i]))
			return true;
	return false;
}

static bool is_taken(const char *k)
{
	static const char *const taken[] = {
		"type", "enum", "const", "anyOf", "oneOf", "$ref", "properties", "required", "additionalProperties",
		"items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "uniqueItems",
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(taken); i++)
		if (!strcmp(k, taken[i]))
			return true;
	return false;
}

static void path_join(char *dst, const char *path, const char *a, const char *b)
{
	snprintf(dst, MAX_PATH, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
}

static int gen(struct js *j, json_t *s, const char *path, const char *name, int depth);

/* The rule name for schema s at path (made here, or a shared one). */
static int gen_named(struct js *j, json_t *s, const char *path, char out[24], int depth)
{
	/* the empty schema and true: any value */
	if (json_is_true(s) || (json_is_object(s) && !json_object_size(s))) {
		snprintf(out, 24, "json-value");
		return 0;
	}
	new_name(j, out);
	return gen(j, s, path, out, depth);
}

static int gen_ref(struct js *j, const char *ref, const char *path, char out[24], int depth)
{
	for (uint32_t i = 0; i < j->n_refs; i++)
		if (!strcmp(j->refs[i].ref, ref)) {
			memcpy(out, j->refs[i].name, 24);
			return 0;
		}
	json_t *t = NULL;
	if (!strcmp(ref, "#")) {
		t = j->root;
	} else if (!strncmp(ref, "#/", 2)) {
		/* a JSON pointer into this document */
		t = j->root;
		const char *p = ref + 2;
		while (t && *p) {
			const char *e = strchr(p, '/');
			size_t n = e ? (size_t)(e - p) : strlen(p);
			char key[MAX_PATH];
			size_t k = 0;
			for (size_t i = 0; i < n && k + 1 < sizeof(key); i++) {
				if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1'))
					key[k++] = p[++i] == '0' ? '~' : '/';
				else
					key[k++] = p[i];
			}
			key[k] = 0;
			if (json_is_object(t))
				t = json_object_get(t, key);
			else if (json_is_array(t) && key[0] >= '0' && key[0] <= '9')
				t = json_array_get(t, strtoul(key, NULL, 10));
			else
				t = NULL;
			p += n;
			if (*p == '/')
				p++;
		}
	} else {
		return jfail(j, path, "$ref '%s': only references inside the schema (\"#...\") are taken", ref);
	}
	if (!t)
		return jfail(j, path, "$ref '%s' points at nothing", ref);
	if (j->n_refs == MAX_REFS)
		return jfail(j, path, "more than %d distinct $ref targets", MAX_REFS);
	uint32_t i = j->n_refs++;
	if (!(j->refs[i].ref = allm_malloc(strlen(ref) + 1)))
		return j->rc = allm_err_set(j->err, -ENOMEM, "out of memory");
	strcpy(j->refs[i].ref, ref);
	if (json_is_true(t) || (json_is_object(t) && !json_object_size(t)))
		snprintf(j->refs[i].name, 24, "json-value");
	else
		new_name(j, j->refs[i].name);
	memcpy(out, j->refs[i].name, 24);
	if (!strcmp(out, "json-value"))
		return 0;
	char p2[MAX_PATH];
	snprintf(p2, sizeof(p2), "%s", ref + 1);
	return gen(j, t, p2, out, depth + 1);
}

/* Extra object keys: a string without escapes that is none of names[0..n). A
 * trie of the names; each node's rule ends there (unless a name does), leaves
 * the trie with any other character, or follows a child. */
struct trie {
	uint32_t cp;
	int32_t child, next; /* first child, next sibling; -1 none */
	bool end;
};

static void key_rules(struct js *j, const char *const *names, size_t n, char out[24])
{
	struct trie *t = allm_calloc(1, sizeof(*t));
	size_t nt = 1, cap = 1;
	if (!t) {
		j->out->oom = true;
		return;
	}
	t[0] = (struct trie){ 0, -1, -1, false };
	for (size_t i = 0; i < n; i++) {
		const char *p = names[i], *e = p + strlen(p);
		if (strpbrk(p, "\"\\"))
			continue; /* cannot be written without escapes: no clash */
		int32_t at = 0;
		bool ctrl = false;
		for (const char *q = p; q < e; q++)
			ctrl |= (unsigned char)*q < 0x20;
		if (ctrl)
			continue;
		while (p < e) {
			uint32_t cp;
			if (!allm_utf8_next(&p, e, &cp))
				break;
			int32_t c = t[at].child;
			while (c >= 0 && t[c].cp != cp)
				c = t[c].next;
			if (c < 0) {
				if (nt == cap) {
					struct trie *nt2 = allm_realloc(t, 2 * cap * sizeof(*t));
					if (!nt2) {
						allm_free(t);
						j->out->oom = true;
						return;
					}
					t = nt2;
					cap *= 2;
				}
				c = (int32_t)nt++;
				t[c] = (struct trie){ cp, -1, t[at].child, false };
				t[at].child = c;
			}
			at = c;
		}
		t[at].end = true;
	}
	uint32_t base = j->n_rules;
	j->n_rules += (uint32_t)nt;
	for (size_t i = 0; i < nt; i++) {
		sbuf_printf(j->out, "s%u ::= ", base + (uint32_t)i);
		bool any = false;
		if (!t[i].end)
			sbuf_puts(j->out, "\"\""), any = true;
		/* leave the trie: a character no child has, then anything */
		sbuf_printf(j->out, "%s[^\"\\\\\\x00-\\x1F", any ? " | " : "");
		for (int32_t c = t[i].child; c >= 0; c = t[c].next)
			sbuf_printf(j->out, "\\U%08X", t[c].cp);
		sbuf_puts(j->out, "] json-key-char*");
		for (int32_t c = t[i].child; c >= 0; c = t[c].next)
			sbuf_printf(j->out, " | [\\U%08X] s%u", t[c].cp, base + (uint32_t)c);
		sbuf_puts(j->out, "\n");
	}
	snprintf(out, 24, "s%u", base);
	allm_free(t);
}

static int gen_object(struct js *j, json_t *s, const char *path, struct sbuf *b, int depth)
{
	json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	json_t *addl = json_object_get(s, "additionalProperties");
	if (props && !json_is_object(props))
		return jfail(j, path, "properties: want an object");
	if (req && !json_is_array(req))
		return jfail(j, path, "required: want an array of names");
	if (addl && !json_is_boolean(addl) && !json_is_object(addl))
		return jfail(j, path, "additionalProperties: want a boolean or a schema");
	if (!props && !req && (!addl || json_is_true(addl))) {
		sbuf_puts(b, "json-object");
		return 0;
	}
	/* the keys in order: properties, then required names not among them */
	size_t n = json_object_size(props) + json_array_size(req);
	const char **key = allm_calloc(n ? n : 1, sizeof(*key));
	json_t **sub = allm_calloc(n ? n : 1, sizeof(*sub));
	bool *must = allm_calloc(n ? n : 1, sizeof(*must));
	char(*kv)[24] = allm_calloc(n ? n : 1, sizeof(*kv));
	size_t k = 0;
	if (!key || !sub || !must || !kv) {
		j->rc = allm_err_set(j->err, -ENOMEM, "out of memory");
		goto out;
	}
	const char *pk;
	json_t *pv;
	json_object_foreach(props, pk, pv) {
		key[k] = pk;
		sub[k++] = pv;
	}
	for (size_t i = 0; i < json_array_size(req); i++) {
		json_t *r = json_array_get(req, i);
		if (!json_is_string(r)) {
			jfail(j, path, "required[%zu]: want a string", i);
			goto out;
		}
		size_t f = 0;
		while (f < k && strcmp(key[f], json_string_value(r)))
			f++;
		if (f == k) {
			key[k] = json_string_value(r);
			sub[k++] = json_true();
		}
		must[f] = true;
	}
	n = k;
	for (size_t i = 0; i < n; i++) {
		char p2[MAX_PATH], val[24];
		path_join(p2, path, "properties", key[i]);
		if (gen_named(j, sub[i], p2, val, depth + 1))
			goto out;
		new_name(j, kv[i]);
		sbuf_printf(j->out, "%s ::= ", kv[i]);
		json_t *ks = json_string(key[i]);
		put_json_literal(j, j->out, ks);
		json_decref(ks);
		sbuf_printf(j->out, " json-ws \":\" json-ws %s json-ws\n", val);
	}
	char extra[24] = "";
	if (addl && !json_is_false(addl)) {
		char val[24], keyr[24], p2[MAX_PATH];
		path_join(p2, path, "additionalProperties", NULL);
		if (gen_named(j, addl, p2, val, depth + 1))
			goto out;
		key_rules(j, key, n, keyr);
		new_name(j, extra);
		sbuf_printf(j->out, "%s ::= \"\\\"\" %s \"\\\"\" json-ws \":\" json-ws %s json-ws\n", extra, keyr, val);
	}
	/* S_i: nothing written yet, at key i; T_i: something written */
	uint32_t base = j->n_rules;
	j->n_rules += 2 * (uint32_t)(n + 1);
	for (size_t i = 0; i <= n; i++) {
		uint32_t S = base + 2 * (uint32_t)i, T = S + 1;
		if (i == n) {
			if (*extra) {
				sbuf_printf(j->out, "s%u ::= (%s (\",\" json-ws %s)*)?\n", S, extra, extra);
				sbuf_printf(j->out, "s%u ::= (\",\" json-ws %s)*\n", T, extra);
			} else {
				sbuf_printf(j->out, "s%u ::= \"\"\ns%u ::= \"\"\n", S, T);
			}
			continue;
		}
		sbuf_printf(j->out, "s%u ::= %s s%u%s", S, kv[i], T + 2, must[i] ? "\n" : "");
		if (!must[i])
			sbuf_printf(j->out, " | s%u\n", S + 2);
		sbuf_printf(j->out, "s%u ::= \",\" json-ws %s s%u%s", T, kv[i], T + 2, must[i] ? "\n" : "");
		if (!must[i])
			sbuf_printf(j->out, " | s%u\n", T + 2);
	}
	sbuf_printf(b, "\"{\" json-ws s%u \"}\"", base);
out:
	allm_free(key);
	allm_free(sub);
	allm_free(must);
	allm_free(kv);
	return j->rc;
}

static bool get_count(json_t *s, const char *k, int64_t *v, int64_t dflt)
{
	json_t *x = json_object_get(s, k);
	if (!x) {
		*v = dflt;
		return true;
	}
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return false;
	*v = json_integer_value(x);
	return true;
}

static int gen_array(struct js *j, json_t *s, const char *path, struct sbuf *b, int depth)
{
	json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
	json_t *uniq = json_object_get(s, "uniqueItems");
	int64_t lo, hi;
	if (uniq && !json_is_false(uniq))
		return jfail(j, path, "uniqueItems true is not supported");
	if (!get_count(s, "minItems", &lo, 0) || !get_count(s, "maxItems", &hi, -1))
		return jfail(j, path, "minItems/maxItems: want non-negative integers");
	if (hi >= 0 && hi < lo)
		return jfail(j, path, "maxItems %lld is below minItems %lld", (long long)hi, (long long)lo);
	if (lo > 10000 || hi > 10000)
		return jfail(j, path, "minItems/maxItems above 10000");
	if (prefix && !json_is_array(prefix))
		return jfail(j, path, "prefixItems: want an array of schemas");
	if (items && json_is_array(items))
		return jfail(j, path, "items as an array (draft 4 tuples): write prefixItems");
	size_t k = json_array_size(prefix);
	bool more = !items || !json_is_false(items); /* items beyond the prefix */
	if (!more && hi < 0)
		hi = (int64_t)k;
	if (!more && lo > (int64_t)k)
		return jfail(j, path, "minItems %lld but items false after %zu prefixItems", (long long)lo, k);
	if (hi >= 0 && hi < (int64_t)k)
		k = (size_t)hi; /* the prefix beyond maxItems cannot appear */
	char it[24] = "json-value";
	if (more && items) {
		char p2[MAX_PATH];
		path_join(p2, path, "items", NULL);
		if (gen_named(j, items, p2, it, depth + 1))
			return j->rc;
	}
	char(*pn)[24] = allm_calloc(k ? k : 1, sizeof(*pn));
	if (!pn)
		return j->rc = allm_err_set(j->err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < k; i++) {
		char p2[MAX_PATH], idx[24];
		snprintf(idx, sizeof(idx), "%zu", i);
		path_join(p2, path, "prefixItems", idx);
		if (gen_named(j, json_array_get(prefix, i), p2, pn[i], depth + 1)) {
			allm_free(pn);
			return j->rc;
		}
	}
	/* R_i: items i.. after at least one written (each starts with ","); the
	 * first item has no comma */
	uint32_t base = j->n_rules;
	j->n_rules += (uint32_t)k + 2;
	for (size_t i = 1; i <= k; i++) {
		uint32_t R = base + (uint32_t)i;
		if (i < k) {
			sbuf_printf(j->out, "s%u ::= \",\" json-ws %s json-ws s%u%s\n", R, pn[i], R + 1,
				    (int64_t)i >= lo ? " | \"\"" : "");
			continue;
		}
		/* past the prefix: items of `it`, as many as min/max leave */
		int64_t need = lo > (int64_t)k ? lo - (int64_t)k : 0;
		if (!more || (hi >= 0 && hi <= (int64_t)k)) {
			sbuf_printf(j->out, "s%u ::= \"\"\n", R);
		} else if (hi < 0) {
			sbuf_printf(j->out, "s%u ::= (\",\" json-ws %s json-ws){%lld,}\n", R, it, (long long)need);
		} else {
			sbuf_printf(j->out, "s%u ::= (\",\" json-ws %s json-ws){%lld,%lld}\n", R, it, (long long)need,
				    (long long)(hi - (int64_t)k));
		}
	}
	uint32_t F = base + (uint32_t)k + 1;
	if (k > 0) {
		sbuf_printf(j->out, "s%u ::= %s json-ws s%u%s\n", F, pn[0], base + 1, lo == 0 ? " | \"\"" : "");
	} else if (!more || hi == 0) {
		sbuf_printf(j->out, "s%u ::= \"\"\n", F);
	} else {
		int64_t need = lo > 1 ? lo - 1 : 0;
		if (hi < 0)
			sbuf_printf(j->out, "s%u ::= %s json-ws (\",\" json-ws %s json-ws){%lld,}%s\n", F, it, it,
				    (long long)need, lo == 0 ? " | \"\"" : "");
		else
			sbuf_printf(j->out, "s%u ::= %s json-ws (\",\" json-ws %s json-ws){%lld,%lld}%s\n", F, it, it,
				    (long long)need, (long long)(hi - 1), lo == 0 ? " | \"\"" : "");
	}
	sbuf_printf(b, "\"[\" json-ws s%u \"]\"", F);
	allm_free(pn);
	return 0;
}

static int gen_string(struct js *j, json_t *s, const char *path, struct sbuf *b)
{
	json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
	int64_t lo, hi;
	if (!get_count(s, "minLength", &lo, 0) || !get_count(s, "maxLength", &hi, -1))
		return jfail(j, path, "minLength/maxLength: want non-negative integers");
	if (hi >= 0 && hi < lo)
		return jfail(j, path, "maxLength %lld is below minLength %lld", (long long)hi, (long long)lo);
	if (lo > 10000 || hi > 10000)
		return jfail(j, path, "minLength/maxLength above 10000");
	bool bounded = lo > 0 || hi >= 0;
	if ((pat || fmt) && (bounded || (pat && fmt)))
		return jfail(j, path, "pattern or format with a length or each other is not supported");
	if (pat) {
		if (!json_is_string(pat))
			return jfail(j, path, "pattern: want a string");
		sbuf_puts(b, "\"\\\"\" ");
		struct allm_err e2;
		if (allm_regex_to_gbnf(json_string_value(pat), json_string_length(pat), true, b, &e2))
			return jfail(j, path, "pattern: %s", e2.msg);
		sbuf_puts(b, " \"\\\"\"");
		return 0;
	}
	if (fmt) {
		static const struct {
			const char *name, *gbnf;
		} f[] = {
			{ "date", "json-date" },
			{ "time", "json-time" },
			{ "date-time", "json-date \"T\" json-time" },
			{ "uuid", "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}" },
			{ "ipv4", "json-octet \".\" json-octet \".\" json-octet \".\" json-octet" },
		};
		const char *name = json_string_value(fmt);
		for (size_t i = 0; name && i < ALLM_ARRAY_SIZE(f); i++)
			if (!strcmp(name, f[i].name)) {
				sbuf_printf(b, "\"\\\"\" %s \"\\\"\"", f[i].gbnf);
				return 0;
			}
		return jfail(j, path, "format '%s' is not supported (date, time, date-time, uuid, ipv4 are)",
			     name ? name : "?");
	}
	if (!bounded) {
		sbuf_puts(b, "json-string");
		return 0;
	}
	if (hi >= 0)
		sbuf_printf(b, "\"\\\"\" json-char{%lld,%lld} \"\\\"\"", (long long)lo, (long long)hi);
	else
		sbuf_printf(b, "\"\\\"\" json-char{%lld,} \"\\\"\"", (long long)lo);
	return 0;
}

/* A bound as an integer: the smallest (lower) or largest (upper) integer in it. */
static bool int_bound(json_t *s, const char *incl, const char *excl, bool lower, double *v)
{
	json_t *a = json_object_get(s, incl), *b = json_object_get(s, excl);
	double x = lower ? -INFINITY : INFINITY;
	if (a && json_is_number(a))
		x = lower ? ceil(json_number_value(a)) : floor(json_number_value(a));
	if (b && json_is_number(b)) {
		double e = json_number_value(b);
		double y = lower ? floor(e) + 1 : ceil(e) - 1;
		x = lower ? fmax(x, y) : fmin(x, y);
	}
	*v = x;
	return (a && !json_is_number(a)) || (b && !json_is_number(b)) ? false : true;
}

static int gen_number(struct js *j, json_t *s, const char *path, struct sbuf *b, bool integer)
{
	double lo, hi;
	if (!int_bound(s, "minimum", "exclusiveMinimum", true, &lo) ||
	    !int_bound(s, "maximum", "exclusiveMaximum", false, &hi))
		return jfail(j, path, "minimum/maximum: want numbers");
	bool ranged = isfinite(lo) || isfinite(hi);
	if (!integer) {
		json_t *mn = json_object_get(s, "minimum");
		if (!ranged) {
			sbuf_puts(b, "json-number");
			return 0;
		}
		if (mn && json_number_value(mn) == 0 && !isfinite(hi) && !json_object_get(s, "exclusiveMinimum")) {
			sbuf_puts(b, "json-unumber");
			return 0;
		}
		return jfail(j, path, "number ranges other than minimum 0 are not supported");
	}
	if (!ranged) {
		sbuf_puts(b, "json-integer");
		return 0;
	}
	if (isfinite(lo) && isfinite(hi) && hi - lo < MAX_RANGE_VALUES) {
		if (hi < lo)
			return jfail(j, path, "an integer range with no value in it");
		sbuf_puts(b, "(");
		for (double v = lo; v <= hi; v++)
			sbuf_printf(b, "%s\"%.0f\"", v == lo ? "" : " | ", v);
		sbuf_puts(b, ")");
		return 0;
	}
	if (!isfinite(hi) && (lo == 0 || lo == 1)) {
		sbuf_puts(b, lo == 0 ? "json-uint" : "json-pint");
		return 0;
	}
	return jfail(j, path, "integer ranges: a lower bound of 0 or 1, or at most %d values", MAX_RANGE_VALUES);
}

static int gen_type(struct js *j, json_t *s, const char *t, const char *path, struct sbuf *b, int depth)
{
	if (!strcmp(t, "object"))
		return gen_object(j, s, path, b, depth);
	if (!strcmp(t, "array"))
		return gen_array(j, s, path, b, depth);
	if (!strcmp(t, "string"))
		return gen_string(j, s, path, b);
	if (!strcmp(t, "number") || !strcmp(t, "integer"))
		return gen_number(j, s, path, b, t[0] == 'i');
	if (!strcmp(t, "boolean")) {
		sbuf_puts(b, "json-bool");
		return 0;
	}
	if (!strcmp(t, "null")) {
		sbuf_puts(b, "\"null\"");
		return 0;
	}
	return jfail(j, path, "unknown type '%s'", t);
}

/* Whether v is an instance of JSON type t. */
static bool has_type(json_t *v, const char *t)
{
	if (!strcmp(t, "integer"))
		return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
	return (!strcmp(t, "object") && json_is_object(v)) || (!strcmp(t, "array") && json_is_array(v)) ||
	       (!strcmp(t, "string") && json_is_string(v)) || (!strcmp(t, "number") && json_is_number(v)) ||
	       (!strcmp(t, "boolean") && json_is_boolean(v)) || (!strcmp(t, "null") && json_is_null(v));
}

static bool fits_types(json_t *v, json_t *type)
{
	if (!type)
		return true;
	if (json_is_string(type))
		return has_type(v, json_string_value(type));
	for (size_t i = 0; i < json_array_size(type); i++)
		if (json_is_string(json_array_get(type, i)) && has_type(v, json_string_value(json_array_get(type, i))))
			return true;
	return false;
}

/* Writes "name ::= ..." for schema s (the rules it uses before it). */
static int gen(struct js *j, json_t *s, const char *path, const char *name, int depth)
{
	struct sbuf b = { 0 };
	if (depth > MAX_DEPTH)
		return jfail(j, path, "nested deeper than %d", MAX_DEPTH);
	if (json_is_false(s))
		return jfail(j, path, "the schema false allows nothing");
	if (!json_is_object(s))
		return jfail(j, path, "want a schema (an object or a boolean)");
	const char *k;
	json_t *v;
	size_t n_constraining = 0;
	json_object_foreach(s, k, v) {
		if (is_annotation(k))
			continue;
		if (!is_taken(k))
			return jfail(j, path, "'%s' is not supported", k);
		n_constraining++;
	}
	json_t *type = json_object_get(s, "type"), *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
	json_t *ref = json_object_get(s, "$ref"), *any = json_object_get(s, "anyOf");
	if (!any)
		any = json_object_get(s, "oneOf");
	if (type && !json_is_string(type) && !json_is_array(type))
		return jfail(j, path, "type: want a name or a list of names");
	if (ref) {
		char target[24];
		if (!json_is_string(ref))
			return jfail(j, path, "$ref: want a string");
		if (n_constraining > 1)
			return jfail(j, path, "$ref with other keywords is not supported");
		if (gen_ref(j, json_string_value(ref), path, target, depth))
			return j->rc;
		sbuf_printf(j->out, "%s ::= %s\n", name, target);
		return 0;
	}
	if (en || cn) {
		if (n_constraining > 1 + (type ? 1 : 0) || (en && cn))
			return jfail(j, path, "enum/const with other keywords (besides type) is not supported");
		if (en && (!json_is_array(en) || !json_array_size(en)))
			return jfail(j, path, "enum: want a non-empty array");
		size_t n = en ? json_array_size(en) : 1, kept = 0;
		for (size_t i = 0; i < n; i++) {
			json_t *x = en ? json_array_get(en, i) : cn;
			if (!fits_types(x, type))
				continue; /* a value of another type is never valid */
			sbuf_puts(&b, kept++ ? " | " : "");
			put_json_literal(j, &b, x);
		}
		if (!kept) {
			sbuf_fini(&b);
			return jfail(j, path, "no enum/const value has the schema's type");
		}
		goto write;
	}
	if (any) {
		if (n_constraining > 1)
			return jfail(j, path, "anyOf/oneOf with other keywords is not supported");
		if (!json_is_array(any) || !json_array_size(any))
			return jfail(j, path, "anyOf/oneOf: want a non-empty array of schemas");
		const char *kw = json_object_get(s, "anyOf") ? "anyOf" : "oneOf";
		for (size_t i = 0; i < json_array_size(any); i++) {
			char p2[MAX_PATH], idx[24], sub[24];
			snprintf(idx, sizeof(idx), "%zu", i);
			path_join(p2, path, kw, idx);
			if (gen_named(j, json_array_get(any, i), p2, sub, depth + 1)) {
				sbuf_fini(&b);
				return j->rc;
			}
			sbuf_printf(&b, "%s%s", i ? " | " : "", sub);
		}
		goto write;
	}
	if (!type) {
		/* no type: what the keywords imply, else any value */
		if (json_object_get(s, "properties") || json_object_get(s, "required") ||
		    json_object_get(s, "additionalProperties"))
			type = json_string("object");
		else if (json_object_get(s, "items") || json_object_get(s, "prefixItems"))
			type = json_string("array");
		else if (n_constraining == 0)
			sbuf_puts(&b, "json-value");
		else
			return jfail(j, path, "keywords without a type (add \"type\")");
		if (type) {
			gen_type(j, s, json_string_value(type), path, &b, depth);
			json_decref(type);
		}
		goto write;
	}
	if (json_is_string(type)) {
		gen_type(j, s, json_string_value(type), path, &b, depth);
	} else {
		if (!json_array_size(type))
			return jfail(j, path, "type: an empty list");
		for (size_t i = 0; i < json_array_size(type) && !j->rc; i++) {
			json_t *t = json_array_get(type, i);
			if (!json_is_string(t))
				return jfail(j, path, "type: want names");
			sbuf_puts(&b, i ? " | (" : "(");
			gen_type(j, s, json_string_value(t), path, &b, depth);
			sbuf_puts(&b, ")");
		}
	}
write:
	if (!j->rc) {
		sbuf_printf(j->out, "%s ::= ", name);
		sbuf_put(j->out, b.s ? b.s : "", b.n);
		sbuf_puts(j->out, "\n");
		if (b.oom)
			j->out->oom = true;
	}
	sbuf_fini(&b);
	return j->rc;
}

void allm_json_any_gbnf(struct sbuf *o)
{
	sbuf_puts(o,
		  "json-value ::= json-object | json-array | json-string | json-number | json-bool | \"null\"\n"
		  "json-object ::= \"{\" json-ws (json-string json-ws \":\" json-ws json-value json-ws"
		  " (\",\" json-ws json-string json-ws \":\" json-ws json-value json-ws)*)? \"}\"\n"
		  "json-array ::= \"[\" json-ws (json-value json-ws (\",\" json-ws json-value json-ws)*)? \"]\"\n"
		  "json-string ::= \"\\\"\" json-char* \"\\\"\"\n"
		  /* escapes never a surrogate: a pair would count as one character
		   * where a schema counts lengths */
		  "json-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3}"
		  " | [dD] [0-7] [0-9a-fA-F]{2}))\n"
		  "json-key-char ::= [^\"\\\\\\x00-\\x1F]\n"
		  "json-frac ::= (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n"
		  "json-number ::= json-integer json-frac\n"
		  "json-unumber ::= json-uint json-frac\n"
		  "json-integer ::= \"-\"? json-uint\n"
		  "json-uint ::= \"0\" | json-pint\n"
		  "json-pint ::= [1-9] [0-9]{0,15}\n"
		  "json-bool ::= \"true\" | \"false\"\n"
		  "json-ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
		  "json-date ::= [1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])"
		  " | (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))\n"
		  "json-time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})?"
		  " (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
		  "json-octet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]\n");
}

int allm_json_schema_to_gbnf(const char *text, size_t len, struct sbuf *out, struct allm_err *err)
{
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return allm_err_set(err, -EINVAL, "JSON Schema: line %d col %d: %s", je.line, je.column, je.text);
	struct js *j = allm_calloc(1, sizeof(*j));
	if (!j) {
		json_decref(root);
		return allm_err_set(err, -ENOMEM, "out of memory");
	}
	j->out = out;
	j->root = root;
	j->err = err;
	sbuf_puts(out, "root ::= schema json-ws\n");
	if (json_is_true(root) || (json_is_object(root) && !json_object_size(root)))
		sbuf_puts(out, "schema ::= json-value\n");
	else
		gen(j, root, "", "schema", 0);
	allm_json_any_gbnf(out);
	int rc = j->rc;
	for (uint32_t i = 0; i < j->n_refs; i++)
		allm_free(j->refs[i].ref);
	allm_free(j);
	json_decref(root);
	return rc;
}
