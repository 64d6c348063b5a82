/* The request parameters' table as data, and what every consumer does with it:
 * defaults, range checks, a peer's struct of another size, logit bias entries
 * (include/adaptivellm/params.h). Built into libadaptivellm (exported) and into
 * the engine's programs (liballm-params); plain libc, never prints. */
#include <adaptivellm/errtext.h>
#include <adaptivellm/params.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_(name, type, offset, lo, hi, off, dflt, flags, flag, meta, json, help)                          \
	{#name, ALLM_PARAM_##type, offsetof(struct allm_params, name), sizeof(((struct allm_params *)0)->name), \
	 flags, lo, hi, off, dflt, flag, meta, json, help},
static const struct allm_param_desc rows[] = {ALLM_PARAMS_TABLE(ROW_)};
#undef ROW_
#define N_ROWS (sizeof(rows) / sizeof(rows[0]))

const struct allm_param_desc *allm_param_desc(size_t i)
{
	return i < N_ROWS ? &rows[i] : NULL;
}

const struct allm_param_desc *allm_param_find(const char *name)
{
	for (size_t i = 0; i < N_ROWS; i++)
		if (!strcmp(rows[i].name, name) || (rows[i].json && !strcmp(rows[i].json, name)))
			return &rows[i];
	return NULL;
}

/* The end of the last row this build knows: bytes past it are a newer writer's. */
static size_t known_end(void)
{
	size_t end = offsetof(struct allm_params, cache_salt) + ALLM_CACHE_SALT_BYTES;
	for (size_t i = 0; i < N_ROWS; i++)
		if (rows[i].offset + rows[i].size > end)
			end = rows[i].offset + rows[i].size;
	return end;
}

bool allm_param_valid(const struct allm_param_desc *d, double v)
{
	if (d->type == ALLM_PARAM_U64)
		return true; /* all of uint64_t */
	if (!isnan(d->off) && v == d->off)
		return true;
	if (!isfinite(v) || v > d->hi)
		return false;
	return d->flags & ALLM_PARAM_F_LO_OPEN ? v > d->lo : v >= d->lo;
}

const char *allm_param_range_text(const struct allm_param_desc *d, char *buf, size_t len)
{
	/* as users write values: a PLUS_ONE row's users count from 0 */
	double k = d->flags & ALLM_PARAM_F_PLUS_ONE ? 1 : 0;
	switch (d->type) {
	case ALLM_PARAM_U64: snprintf(buf, len, ">= 0"); break;
	case ALLM_PARAM_BOOL: snprintf(buf, len, "true or false"); break;
	case ALLM_PARAM_I32:
		if (d->hi >= INT32_MAX)
			snprintf(buf, len, ">= %.0f", d->lo - k);
		else
			snprintf(buf, len, "in %.0f..%.0f", d->lo - k, d->hi - k);
		break;
	default:
		snprintf(buf, len, "in %c%g, %g]", d->flags & ALLM_PARAM_F_LO_OPEN ? '(' : '[', d->lo, d->hi);
	}
	return buf;
}

static const void *field(const struct allm_params *p, const struct allm_param_desc *d)
{
	return (const char *)p + d->offset;
}

double allm_param_get(const struct allm_params *p, const struct allm_param_desc *d)
{
	int32_t i;
	uint32_t u;
	uint64_t q;
	float f;
	switch (d->type) {
	case ALLM_PARAM_I32: memcpy(&i, field(p, d), 4); return i;
	case ALLM_PARAM_BOOL: memcpy(&u, field(p, d), 4); return u;
	case ALLM_PARAM_U64: memcpy(&q, field(p, d), 8); return (double)q;
	default: memcpy(&f, field(p, d), 4); return f;
	}
}

/* Stores v (valid for d; for U64 use set_u64) in d's field of p. */
static void set(struct allm_params *p, const struct allm_param_desc *d, double v)
{
	char *at = (char *)p + d->offset;
	/* only the field's own conversion: another type's could overflow (UB) */
	switch (d->type) {
	case ALLM_PARAM_I32: {
		int32_t i = (int32_t)v;
		memcpy(at, &i, 4);
		break;
	}
	case ALLM_PARAM_BOOL: {
		uint32_t u = (uint32_t)v;
		memcpy(at, &u, 4);
		break;
	}
	case ALLM_PARAM_U64: {
		uint64_t q = (uint64_t)v;
		memcpy(at, &q, 8);
		break;
	}
	default: {
		float f = (float)v;
		memcpy(at, &f, 4);
	}
	}
}

int allm_param_set(struct allm_params *p, const struct allm_param_desc *d, double v)
{
	if (!allm_param_valid(d, v) || (d->type == ALLM_PARAM_U64 && !(v >= 0 && v < 18446744073709551616.0)))
		return -EINVAL;
	set(p, d, v);
	return 0;
}

int allm_params_init_sized(struct allm_params *p, size_t size)
{
	if (size < ALLM_PARAMS_SIZE_VER0 || size > ALLM_PARAMS_SIZE_MAX)
		return -EINVAL;
	memset(p, 0, size);
	p->size = (uint32_t)size;
	for (size_t i = 0; i < N_ROWS; i++)
		if (rows[i].offset + rows[i].size <= size)
			set(p, &rows[i], rows[i].dflt);
	return 0;
}

int allm_params_check(const struct allm_params *p, char *why, size_t len)
{
	char range[48];
	if (p->size < ALLM_PARAMS_SIZE_VER0 || p->size > ALLM_PARAMS_SIZE_MAX)
		return allm_errtext(why, len, -EINVAL, "params.size %u is no struct allm_params (use allm_params_init)",
			   p->size);
	if (p->n_stop > ALLM_PARAMS_MAX_STOP)
		return allm_errtext(why, len, -EINVAL, "at most %d stop ids (got %u)", ALLM_PARAMS_MAX_STOP, p->n_stop);
	for (uint32_t i = 0; i < p->n_stop; i++)
		if (p->stop_ids[i] < 0)
			return allm_errtext(why, len, -EINVAL, "stop id %d is no token id", p->stop_ids[i]);
	for (size_t i = 0; i < N_ROWS; i++) {
		const struct allm_param_desc *d = &rows[i];
		if (d->offset + d->size > p->size)
			continue; /* the writer did not know it: off */
		double v = allm_param_get(p, d);
		if (!allm_param_valid(d, v))
			return allm_errtext(why, len, -EINVAL, "%s must be %s (got %g)", d->name,
				   allm_param_range_text(d, range, sizeof(range)),
				   d->flags & ALLM_PARAM_F_PLUS_ONE ? v - 1 : v);
	}
	if (p->min_tokens > p->max_tokens)
		return allm_errtext(why, len, -EINVAL, "min_tokens (%d) is above max_tokens (%d)", p->min_tokens,
			   p->max_tokens);
	return 0;
}

int allm_params_from_wire(struct allm_params *dst, const void *src, size_t size, char *why, size_t len)
{
	const uint8_t *s = src;
	uint32_t stated;
	if (size < ALLM_PARAMS_SIZE_VER0 || size > ALLM_PARAMS_SIZE_MAX)
		return allm_errtext(why, len, -EINVAL, "params of %zu bytes (want %d..%d)", size, ALLM_PARAMS_SIZE_VER0,
			   ALLM_PARAMS_SIZE_MAX);
	memcpy(&stated, s, sizeof(stated));
	if (stated != size)
		return allm_errtext(why, len, -EINVAL, "params state %u bytes, %zu came", stated, size);
	/* our own padding included: a newer writer's row may sit there */
	for (size_t i = known_end(); i < size; i++)
		if (s[i])
			return allm_errtext(why, len, -E2BIG, "params byte %zu set: a parameter this build does not know", i);
	memset(dst, 0, sizeof(*dst));
	memcpy(dst, s, size < sizeof(*dst) ? size : sizeof(*dst));
	dst->size = sizeof(*dst);
	return 0;
}

int allm_logit_bias_check(const struct allm_logit_bias *b, size_t n, char *why, size_t len)
{
	if (n > ALLM_LOGIT_BIAS_MAX)
		return allm_errtext(why, len, -EINVAL, "logit_bias takes at most %d tokens (got %zu)", ALLM_LOGIT_BIAS_MAX, n);
	for (size_t i = 0; i < n; i++)
		if (b[i].token_id < 0 || !(b[i].bias >= ALLM_LOGIT_BIAS_LO && b[i].bias <= ALLM_LOGIT_BIAS_HI))
			return allm_errtext(why, len, -EINVAL, "logit_bias: token %d, bias %g (want an id >= 0 and a bias in [%g, %g])",
				   b[i].token_id, b[i].bias, ALLM_LOGIT_BIAS_LO, ALLM_LOGIT_BIAS_HI);
	return 0;
}

/* --- command-line tools ---------------------------------------------------------- */

int allm_parse_id_list(const char *flag, const char *s, size_t max, int32_t **ret, size_t *ret_n, char *why,
		       size_t len)
{
	size_t cap = 16, n = 0;
	int32_t *ids = malloc(cap * sizeof(*ids));
	const char *p = s;
	int r = -EINVAL;
	if (!ids)
		return allm_errtext(why, len, -ENOMEM, "out of memory");
	while (*p) {
		char *end;
		while (*p == ' ')
			p++;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (end == p || errno) {
			allm_errtext(why, len, r, "%s: '%s' is not a list of integers", flag, s);
			goto fail;
		}
		if (v < 0 || v > INT32_MAX) {
			allm_errtext(why, len, r, "%s: id %lld is out of range (no vocabulary has it: ids are 0..%d)", flag, v, INT32_MAX);
			goto fail;
		}
		if (n == max) {
			allm_errtext(why, len, r, "%s: at most %zu ids", flag, max);
			goto fail;
		}
		if (n == cap) {
			int32_t *t = realloc(ids, (cap *= 2) * sizeof(*ids));
			if (!t) {
				r = allm_errtext(why, len, -ENOMEM, "out of memory");
				goto fail;
			}
			ids = t;
		}
		ids[n++] = (int32_t)v;
		p = end;
		while (*p == ' ')
			p++;
		if (*p == ',' && p[1]) {
			p++;
		} else if (*p) {
			allm_errtext(why, len, r, "%s: unexpected '%c' in '%s'", flag, *p, s);
			goto fail;
		}
	}
	if (n == 0) {
		allm_errtext(why, len, r, "%s is empty", flag);
		goto fail;
	}
	*ret = ids;
	*ret_n = n;
	return 0;
fail:
	free(ids);
	return r;
}

/* The whole of s as a number of d's type, stored as the field holds it (PLUS_ONE
 * added). 0, or -EINVAL when it is not one or not valid. */
static int parse_value(struct allm_params *p, const struct allm_param_desc *d, const char *s)
{
	char *end;
	errno = 0;
	if (!*s)
		return -EINVAL;
	if (d->type == ALLM_PARAM_U64) {
		if (*s == '-')
			return -EINVAL;
		unsigned long long q = strtoull(s, &end, 10);
		if (*end || errno)
			return -EINVAL;
		uint64_t v = q;
		memcpy((char *)p + d->offset, &v, sizeof(v));
		return 0;
	}
	double v;
	if (d->type == ALLM_PARAM_F32) {
		v = strtod(s, &end);
	} else {
		long long i = strtoll(s, &end, 10);
		v = i < INT32_MIN || i > INT32_MAX ? NAN : (double)i;
	}
	if (*end || errno)
		return -EINVAL;
	if (d->flags & ALLM_PARAM_F_PLUS_ONE)
		v += 1;
	/* a user never writes "off" for a PLUS_ONE row: leaving the flag out is */
	if ((d->flags & ALLM_PARAM_F_PLUS_ONE) && v == d->off)
		return -EINVAL;
	return allm_param_set(p, d, v);
}

int allm_params_parse_flag(struct allm_params *p, int argc, char *const *argv, int *i, char *why, size_t len)
{
	const char *f = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	char range[48];
	if (!strcmp(f, "--stop-ids")) {
		int32_t *ids;
		size_t n;
		int r;
		if (!v)
			return allm_errtext(why, len, -EINVAL, "--stop-ids needs a value (see --help)");
		if ((r = allm_parse_id_list(f, v, ALLM_PARAMS_MAX_STOP, &ids, &n, why, len)))
			return r;
		memcpy(p->stop_ids, ids, n * sizeof(*ids));
		p->n_stop = (uint32_t)n;
		free(ids);
		*i += 2;
		return 1;
	}
	for (size_t k = 0; k < N_ROWS; k++) {
		const struct allm_param_desc *d = &rows[k];
		if ((d->flags & ALLM_PARAM_F_NO_CLI) || strcmp(f, d->flag))
			continue;
		if (d->type == ALLM_PARAM_BOOL) {
			set(p, d, 1);
			*i += 1;
			return 1;
		}
		if (!v)
			return allm_errtext(why, len, -EINVAL, "%s needs a value (see --help)", f);
		if (parse_value(p, d, v))
			return allm_errtext(why, len, -EINVAL, "bad value for %s: '%s' (want %s %s)", f, v,
				   d->type == ALLM_PARAM_F32 ? "a number" : "an integer",
				   allm_param_range_text(d, range, sizeof(range)));
		*i += 2;
		return 1;
	}
	return 0;
}

/* Appends "fmt" to buf at *at (keeping count past len, as snprintf). */
static void add(char *buf, size_t len, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(*at < len ? buf + *at : NULL, *at < len ? len - *at : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at += (size_t)n;
}

/* One flag's help: "  --flag META" in 25 columns, then text wrapped at 80. */
static void help_line(char *buf, size_t len, size_t *at, const char *flag, const char *text)
{
	enum { COL = 25, WIDTH = 80 };
	int w = snprintf(NULL, 0, "  %s", flag);
	add(buf, len, at, "  %s%*s", flag, w < COL ? COL - w : 1, "");
	size_t col = (size_t)(w < COL ? COL : w + 1);
	for (const char *s = text; *s;) {
		size_t word = strcspn(s, " ");
		if (col > COL && col + word > WIDTH) {
			add(buf, len, at, "\n%*s", COL, "");
			col = COL;
		}
		add(buf, len, at, "%.*s", (int)word, s);
		col += word;
		s += word;
		if (*s == ' ') {
			s++;
			if (col > COL)
				add(buf, len, at, " "), col++;
		}
	}
	add(buf, len, at, "\n");
}

#define ALLM_ARRAY_SIZE_(a) (sizeof(a) / sizeof((a)[0]))

/* The grammar flags both CLIs take (allm_grammar_parse_flag). */
static const struct grammar_flag {
	const char *flag, *usage, *help;
	uint32_t kind;
	bool file; /* the value names a file holding the text */
} grammar_flags[] = {
	{ "--grammar", "--grammar FILE", "generate only what the GBNF grammar in FILE allows (rule root)",
	  ALLM_GRAMMAR_GBNF, true },
	{ "--json-schema", "--json-schema FILE", "generate one JSON text the JSON Schema in FILE validates",
	  ALLM_GRAMMAR_JSON_SCHEMA, true },
	{ "--regex", "--regex RE", "generate a text the regular expression RE matches whole", ALLM_GRAMMAR_REGEX,
	  false },
	{ "--choice", "--choice JSON", "generate one of the strings of a JSON array ('[\"yes\",\"no\"]')",
	  ALLM_GRAMMAR_CHOICE, false },
	{ "--json-object", "--json-object", "generate one JSON object", ALLM_GRAMMAR_JSON_OBJECT, false },
};

size_t allm_params_help(char *buf, size_t len)
{
	size_t at = 0;
	char flag[64], text[320], range[48];
	if (len)
		buf[0] = '\0';
	for (size_t k = 0; k < N_ROWS; k++) {
		const struct allm_param_desc *d = &rows[k];
		if (d->flags & ALLM_PARAM_F_NO_CLI)
			continue;
		snprintf(flag, sizeof(flag), "%s%s%s", d->flag, d->meta ? " " : "", d->meta ? d->meta : "");
		if (d->type == ALLM_PARAM_BOOL)
			snprintf(text, sizeof(text), "%s", d->help);
		else if (d->flags & ALLM_PARAM_F_PLUS_ONE)
			snprintf(text, sizeof(text), "%s (default none; %s)", d->help,
				 allm_param_range_text(d, range, sizeof(range)));
		else
			snprintf(text, sizeof(text), "%s (default %g%s; %s)", d->help, d->dflt,
				 d->dflt == d->off ? " = off" : "", allm_param_range_text(d, range, sizeof(range)));
		help_line(buf, len, &at, flag, text);
	}
	snprintf(text, sizeof(text), "up to %d extra stop token ids", ALLM_PARAMS_MAX_STOP);
	help_line(buf, len, &at, "--stop-ids LIST", text);
	for (size_t k = 0; k < ALLM_ARRAY_SIZE_(grammar_flags); k++)
		help_line(buf, len, &at, grammar_flags[k].usage, grammar_flags[k].help);
	return at;
}

static const char *const kind_names[] = { "none", "gbnf", "json_schema", "regex", "choice", "json_object" };

const char *allm_grammar_kind_name(uint32_t kind)
{
	return kind < ALLM_ARRAY_SIZE_(kind_names) ? kind_names[kind] : "?";
}

int allm_grammar_kind_parse(const char *name, uint32_t *ret)
{
	for (uint32_t k = 0; k < ALLM_ARRAY_SIZE_(kind_names); k++)
		if (!strcmp(name, kind_names[k])) {
			*ret = k;
			return 0;
		}
	return -EINVAL;
}

/* The whole of a grammar file, at most ALLM_GRAMMAR_TEXT_MAX bytes. */
static int read_text(const char *flag, const char *path, char **ret, size_t *ret_n, char *why, size_t len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return allm_errtext(why, len, -errno, "%s: cannot open '%s': %s", flag, path, strerror(errno));
	char *buf = malloc(ALLM_GRAMMAR_TEXT_MAX + 1);
	if (!buf) {
		fclose(f);
		return allm_errtext(why, len, -ENOMEM, "out of memory");
	}
	size_t n = fread(buf, 1, ALLM_GRAMMAR_TEXT_MAX + 1, f);
	int err = ferror(f);
	fclose(f);
	if (err || n > ALLM_GRAMMAR_TEXT_MAX) {
		free(buf);
		return err ? allm_errtext(why, len, -EIO, "%s: cannot read '%s'", flag, path)
			   : allm_errtext(why, len, -EINVAL, "%s: '%s' is larger than %u bytes", flag, path, ALLM_GRAMMAR_TEXT_MAX);
	}
	buf[n] = 0;
	*ret = buf;
	*ret_n = n;
	return 0;
}

int allm_grammar_parse_flag(struct allm_grammar_arg *g, int argc, char *const *argv, int *i, char *why,
			    size_t len)
{
	const char *f = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	size_t k = 0;
	while (k < ALLM_ARRAY_SIZE_(grammar_flags) && strcmp(f, grammar_flags[k].flag))
		k++;
	if (k == ALLM_ARRAY_SIZE_(grammar_flags))
		return 0;
	const struct grammar_flag *d = &grammar_flags[k];
	if (g->kind != ALLM_GRAMMAR_NONE)
		return allm_errtext(why, len, -EINVAL, "%s: a request takes one grammar (already %s)", f,
			   allm_grammar_kind_name(g->kind));
	if (d->kind == ALLM_GRAMMAR_JSON_OBJECT) {
		g->kind = d->kind;
		*i += 1;
		return 1;
	}
	if (!v)
		return allm_errtext(why, len, -EINVAL, "%s needs a value (see --help)", f);
	char *text = NULL;
	size_t n = 0;
	if (d->file) {
		int r = read_text(f, v, &text, &n, why, len);
		if (r)
			return r;
	} else {
		n = strlen(v);
		if (n > ALLM_GRAMMAR_TEXT_MAX)
			return allm_errtext(why, len, -EINVAL, "%s: longer than %u bytes", f, ALLM_GRAMMAR_TEXT_MAX);
		if (!(text = strdup(v)))
			return allm_errtext(why, len, -ENOMEM, "out of memory");
	}
	g->kind = d->kind;
	g->text = text;
	g->len = n;
	*i += 2;
	return 1;
}
