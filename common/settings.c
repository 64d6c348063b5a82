/* The engine settings' table (include/adaptivellm/settings.h) as data, its
 * parser and its --help. Plain libc: allmctl and allm-bench link it too. */
#include <adaptivellm/errtext.h>
#include <adaptivellm/settings.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_(id, key, type, opt, live, lo, hi, flags, def, flag, metavar, choices, group, status, help) \
	{ALLM_SETTING_##id, key, ALLM_SET_##type, ROW_OPT_##opt, ALLM_SET_LIVE_##live, (double)(lo),         \
	 (double)(hi), flags, def, flag, metavar, choices, ROW_GROUP_##group, status, help},
#define ROW_OPT_OPT true
#define ROW_OPT_NOOPT false
#define ROW_GROUP_MODEL false
#define ROW_GROUP_SCHED true
static const struct allm_setting_desc rows[ALLM_SETTING_COUNT] = {ALLM_SETTINGS_TABLE(ROW_)};
#undef ROW_

const struct allm_setting_desc *allm_setting_desc(int i)
{
	return i >= 0 && i < ALLM_SETTING_COUNT ? &rows[i] : NULL;
}

const struct allm_setting_desc *allm_setting_by_key(const char *key, int n)
{
	size_t len = n < 0 ? strlen(key) : (size_t)n;
	for (int i = 0; i < ALLM_SETTING_COUNT; i++)
		if (strlen(rows[i].key) == len && !memcmp(rows[i].key, key, len))
			return &rows[i];
	return NULL;
}

const struct allm_setting_desc *allm_setting_by_flag(const char *flag)
{
	for (int i = 0; i < ALLM_SETTING_COUNT; i++)
		if (rows[i].flag && !strcmp(rows[i].flag, flag))
			return &rows[i];
	return NULL;
}

const char *allm_setting_word(const char *choices, int n, char *buf, size_t len)
{
	const char *p = choices;
	for (int k = 0; p && k < n; k++) {
		p = strchr(p, '|');
		p = p ? p + 1 : NULL;
	}
	if (!p || !len)
		return NULL;
	size_t w = strcspn(p, "|");
	if (w >= len)
		w = len - 1;
	memcpy(buf, p, w);
	buf[w] = 0;
	return buf;
}

bool allm_setting_in_range(const struct allm_setting_desc *d, double x)
{
	if (!isfinite(x))
		return false;
	if (x == 0 && (d->flags & ALLM_SET_F_ZERO_OFF))
		return true;
	return x >= d->lo && x <= d->hi;
}

void allm_setting_range_text(const struct allm_setting_desc *d, char *buf, size_t len)
{
	if (d->choices) {
		size_t o = 0;
		char w[64];
		for (int k = 0; allm_setting_word(d->choices, k, w, sizeof(w)) && o < len; k++)
			o += (size_t)snprintf(buf + o, len - o, "%s%s", k ? ", " : "", w);
		return;
	}
	if (d->type == ALLM_SET_I32 || d->type == ALLM_SET_U64 || d->type == ALLM_SET_F64)
		snprintf(buf, len, "%.15g..%.15g%s", d->lo, d->hi,
			 d->flags & ALLM_SET_F_ZERO_OFF ? ", or 0 = off" : "");
	else
		snprintf(buf, len, "%s", d->metavar);
}

static int bad(const struct allm_setting_desc *d, const char *text, char *err, size_t errlen)
{
	char range[160];
	allm_setting_range_text(d, range, sizeof(range));
	return allm_errtext(err, errlen, -EINVAL, "%s: '%.40s' is not %s%s", d->key, text,
			    d->choices ? "one of " : d->type == ALLM_SET_TEXT ? "a non-empty " : "in ", range);
}

int allm_setting_parse(const struct allm_setting_desc *d, const char *text,
		       struct allm_setting_value *ret, char *err, size_t errlen)
{
	struct allm_setting_value v = {0};
	char *end;
	char w[64];
	if (!text && (d->choices || (d->type != ALLM_SET_BOOL && d->type != ALLM_SET_WORD)))
		return bad(d, "", err, errlen);
	switch (d->type) {
	case ALLM_SET_I32:
	case ALLM_SET_U64: {
		errno = 0;
		long long x = strtoll(text, &end, 10);
		if (errno || end == text || *end || !allm_setting_in_range(d, (double)x))
			return bad(d, text, err, errlen);
		v.i = x;
		v.u = (uint64_t)x;
		v.f = (double)x;
		break;
	}
	case ALLM_SET_F64:
		errno = 0;
		v.f = strtod(text, &end);
		if (errno || end == text || *end || !allm_setting_in_range(d, v.f))
			return bad(d, text, err, errlen);
		break;
	case ALLM_SET_BOOL:
	case ALLM_SET_WORD:
		if (!d->choices) { /* a flag without a value: present is true */
			v.i = 1;
			break;
		}
		for (int k = 0;; k++) {
			if (!allm_setting_word(d->choices, k, w, sizeof(w)))
				return bad(d, text, err, errlen);
			if (!strcmp(w, text)) {
				v.i = k;
				break;
			}
		}
		break;
	case ALLM_SET_TEXT:
		if (!*text)
			return bad(d, text, err, errlen);
		v.s = text;
		break;
	case ALLM_SET_CUSTOM:
		v.s = text;
		break;
	}
	*ret = v;
	return 0;
}

/* Column where the help text starts. */
#define HELP_COL 30

static size_t help_row(const struct allm_setting_desc *d, char *b, size_t len)
{
	size_t o = 0;
#define PUT(...) (o += o < len ? (size_t)snprintf(b + o, len - o, __VA_ARGS__) : 0)
	int w = snprintf(NULL, 0, "  %s%s%s", d->flag, *d->metavar ? " " : "", d->metavar);
	PUT("  %s%s%s", d->flag, *d->metavar ? " " : "", d->metavar);
	if (w + 1 > HELP_COL)
		PUT("\n%*s", HELP_COL, "");
	else
		PUT("%*s", HELP_COL - w, "");
	/* the help's lines, the later ones indented; the default after the last */
	for (const char *p = d->help; *p;) {
		size_t n = strcspn(p, "\n");
		bool last = !p[n] || !p[n + 1];
		PUT("%s%.*s", p == d->help ? "" : "", (int)n, p);
		if (last && d->def)
			PUT(" (default %s)", d->def);
		PUT("\n");
		p += n + (p[n] ? 1 : 0);
		if (*p)
			PUT("%*s", HELP_COL, "");
	}
#undef PUT
	return o;
}

const char *allm_settings_help(void)
{
	static char buf[8192];
	if (buf[0])
		return buf;
	size_t o = 0;
	for (int g = 0; g < 2; g++) {
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s", g ? "scheduling:\n" : "model and memory:\n");
		for (int i = 0; i < ALLM_SETTING_COUNT && o < sizeof(buf); i++)
			if (rows[i].opt && rows[i].sched_group == (g == 1))
				o += help_row(&rows[i], buf + o, sizeof(buf) - o);
	}
	return buf;
}
