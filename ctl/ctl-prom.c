/* Prometheus text exposition format 0.0.4 from a `metrics` reply: `# HELP`, `# TYPE`,
 * then one line per sample; histograms as NAME_bucket{le=...} (cumulative), NAME_sum,
 * NAME_count. Values print in the shortest form that reads back exactly. */
#include "ctl-prom.h"

#include <adaptivellm/errtext.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most families and samples per family a reply may hold (a hostile or broken
 * engine cannot make us print without end; the real one sends ~25 and ~4). */
#define PROM_MAX_FAMILIES 256
#define PROM_MAX_SAMPLES 1024
#define PROM_MAX_BOUNDS 64

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names (colon allowed), without ':' for labels. */
static bool valid_name(const msgpack_object *o, bool colon)
{
	if (!o || o->type != MSGPACK_OBJECT_STR || o->via.str.size == 0 || o->via.str.size > 200)
		return false;
	for (uint32_t i = 0; i < o->via.str.size; i++) {
		char c = o->via.str.ptr[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
			  (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
		if (!ok)
			return false;
	}
	return true;
}

static bool is_num(const msgpack_object *o)
{
	return o && (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
		     o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER || o->type == MSGPACK_OBJECT_FLOAT32 ||
		     o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_NIL);
}

/* nil (the protocol's "no sample") reads as NaN. */
static double num(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)o->via.u64;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)o->via.i64;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return o->via.f64;
	default: return NAN;
	}
}

/* Integers in full, else the shortest %g that reads back to v; NaN, +Inf, -Inf as Prometheus spells them. */
static void put_num(FILE *f, double v)
{
	char buf[40];
	if (isnan(v)) {
		fputs("NaN", f);
		return;
	}
	if (isinf(v)) {
		fputs(v > 0 ? "+Inf" : "-Inf", f);
		return;
	}
	/* integers as integers (Prometheus' own clients write "10", not "1e+01") */
	if (v == floor(v) && fabs(v) < 1e15) {
		fprintf(f, "%.0f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, f);
}

/* A label value or HELP text: backslash, newline (and in labels, '"') escaped. */
static void put_escaped(FILE *f, const char *p, size_t n, bool quote)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\\')
			fputs("\\\\", f);
		else if (p[i] == '\n')
			fputs("\\n", f);
		else if (quote && p[i] == '"')
			fputs("\\\"", f);
		else
			fputc(p[i], f);
	}
}

static void put_str(FILE *f, const msgpack_object *o)
{
	fwrite(o->via.str.ptr, 1, o->via.str.size, f);
}

/* Checks a sample's labels map (string values, valid names, no "le"). */
static int check_labels(const msgpack_object *l, const msgpack_object *fname, char *err,
			size_t errlen)
{
	if (!l)
		return 0;
	if (l->type != MSGPACK_OBJECT_MAP || l->via.map.size > 16)
		return allm_errtext(err, errlen, -EBADMSG, "%.*s: labels must be a map of at most 16", (int)fname->via.str.size,
			   fname->via.str.ptr);
	for (uint32_t i = 0; i < l->via.map.size; i++) {
		const msgpack_object *k = &l->via.map.ptr[i].key, *v = &l->via.map.ptr[i].val;
		if (!valid_name(k, false) || allm_ctl_str_eq(k, "le") || v->type != MSGPACK_OBJECT_STR)
			return allm_errtext(err, errlen, -EBADMSG, "%.*s: bad label", (int)fname->via.str.size, fname->via.str.ptr);
	}
	return 0;
}

/* {k="v",...} plus le="..." when le is not NULL; nothing when both are empty. */
static void put_labels(FILE *f, const msgpack_object *l, const char *le)
{
	uint32_t n = l ? l->via.map.size : 0;
	if (n == 0 && !le)
		return;
	fputc('{', f);
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *k = &l->via.map.ptr[i].key, *v = &l->via.map.ptr[i].val;
		if (i)
			fputc(',', f);
		put_str(f, k);
		fputs("=\"", f);
		put_escaped(f, v->via.str.ptr, v->via.str.size, true);
		fputc('"', f);
	}
	if (le)
		fprintf(f, "%sle=\"%s\"", n ? "," : "", le);
	fputc('}', f);
}

static int check_family(const msgpack_object *fm, char *err, size_t errlen)
{
	const msgpack_object *name = allm_ctl_get(fm, "name"), *type = allm_ctl_get(fm, "type");
	const msgpack_object *help = allm_ctl_get(fm, "help"), *samples = allm_ctl_get(fm, "samples");
	if (!valid_name(name, true))
		return allm_errtext(err, errlen, -EBADMSG, "a family without a valid name");
	int fn = (int)name->via.str.size;
	const char *fp = name->via.str.ptr;
	bool histo = allm_ctl_str_eq(type, "histogram");
	if (!histo && !allm_ctl_str_eq(type, "counter") && !allm_ctl_str_eq(type, "gauge"))
		return allm_errtext(err, errlen, -EBADMSG, "%.*s: type must be counter, gauge or histogram", fn, fp);
	if (help && help->type != MSGPACK_OBJECT_STR)
		return allm_errtext(err, errlen, -EBADMSG, "%.*s: help must be a string", fn, fp);
	if (!samples || samples->type != MSGPACK_OBJECT_ARRAY || samples->via.array.size > PROM_MAX_SAMPLES)
		return allm_errtext(err, errlen, -EBADMSG, "%.*s: samples must be an array of at most %d", fn, fp,
			   PROM_MAX_SAMPLES);
	for (uint32_t i = 0; i < samples->via.array.size; i++) {
		const msgpack_object *s = &samples->via.array.ptr[i];
		int r = check_labels(allm_ctl_get(s, "labels"), name, err, errlen);
		if (r)
			return r;
		if (!histo) {
			if (!is_num(allm_ctl_get(s, "value")))
				return allm_errtext(err, errlen, -EBADMSG, "%.*s: sample %u has no numeric value", fn, fp, i);
			continue;
		}
		const msgpack_object *b = allm_ctl_get(s, "bounds"), *c = allm_ctl_get(s, "counts");
		if (!b || !c || b->type != MSGPACK_OBJECT_ARRAY || c->type != MSGPACK_OBJECT_ARRAY ||
		    b->via.array.size > PROM_MAX_BOUNDS || c->via.array.size != b->via.array.size + 1 ||
		    !is_num(allm_ctl_get(s, "sum")) || !is_num(allm_ctl_get(s, "count")))
			return allm_errtext(err, errlen, -EBADMSG, "%.*s: a histogram needs bounds, counts (one more), sum, count",
				   fn, fp);
		for (uint32_t k = 0; k < b->via.array.size; k++)
			if (!is_num(&b->via.array.ptr[k]) || !isfinite(num(&b->via.array.ptr[k])) ||
			    (k > 0 && num(&b->via.array.ptr[k]) <= num(&b->via.array.ptr[k - 1])))
				return allm_errtext(err, errlen, -EBADMSG, "%.*s: bounds must be finite and increasing", fn, fp);
		for (uint32_t k = 0; k < c->via.array.size; k++)
			if (!is_num(&c->via.array.ptr[k]))
				return allm_errtext(err, errlen, -EBADMSG, "%.*s: counts must be numbers", fn, fp);
	}
	return 0;
}

/* One sample line: name+suffix{labels[,le]} value. */
static void put_sample(FILE *f, const msgpack_object *name, const char *suffix,
		       const msgpack_object *l, const char *le, const msgpack_object *v)
{
	put_str(f, name);
	fputs(suffix, f);
	put_labels(f, l, le);
	fputc(' ', f);
	put_num(f, num(v));
	fputc('\n', f);
}

static void put_family(FILE *f, const msgpack_object *fm)
{
	const msgpack_object *name = allm_ctl_get(fm, "name"), *type = allm_ctl_get(fm, "type");
	const msgpack_object *help = allm_ctl_get(fm, "help"), *samples = allm_ctl_get(fm, "samples");
	bool histo = allm_ctl_str_eq(type, "histogram");
	if (help) {
		fputs("# HELP ", f);
		put_str(f, name);
		fputc(' ', f);
		put_escaped(f, help->via.str.ptr, help->via.str.size, false);
		fputc('\n', f);
	}
	fputs("# TYPE ", f);
	put_str(f, name);
	fputc(' ', f);
	put_str(f, type);
	fputc('\n', f);
	for (uint32_t i = 0; i < samples->via.array.size; i++) {
		const msgpack_object *s = &samples->via.array.ptr[i];
		const msgpack_object *l = allm_ctl_get(s, "labels");
		if (!histo) {
			put_sample(f, name, "", l, NULL, allm_ctl_get(s, "value"));
			continue;
		}
		const msgpack_object *b = allm_ctl_get(s, "bounds"), *c = allm_ctl_get(s, "counts");
		for (uint32_t k = 0; k < c->via.array.size; k++) {
			char le[40] = "+Inf";
			if (k < b->via.array.size) {
				FILE *m = fmemopen(le, sizeof(le), "w");
				if (m) {
					put_num(m, num(&b->via.array.ptr[k]));
					fclose(m);
				}
			}
			put_sample(f, name, "_bucket", l, le, &c->via.array.ptr[k]);
		}
		put_sample(f, name, "_sum", l, NULL, allm_ctl_get(s, "sum"));
		put_sample(f, name, "_count", l, NULL, allm_ctl_get(s, "count"));
	}
}

int allm_ctl_prom_render(const msgpack_object *result, char **ret, size_t *ret_len, char *err,
			 size_t errlen)
{
	const msgpack_object *fams = allm_ctl_get(result, "families");
	if (!fams || fams->type != MSGPACK_OBJECT_ARRAY || fams->via.array.size > PROM_MAX_FAMILIES)
		return allm_errtext(err, errlen, -EBADMSG, "the reply has no \"families\" array (of at most %d)",
			   PROM_MAX_FAMILIES);
	for (uint32_t i = 0; i < fams->via.array.size; i++) {
		int r = check_family(&fams->via.array.ptr[i], err, errlen);
		if (r)
			return r;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	for (uint32_t i = 0; i < fams->via.array.size; i++)
		put_family(f, &fams->via.array.ptr[i]);
	if (fclose(f) || !buf) {
		free(buf);
		return -ENOMEM;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}
