/* allm-gateway's flags (gw-opts.h's table) as data, their parser, defaults and --help. */
#include "gw-opts.h"

#include <adaptivellm/errtext.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROW_(id, field, flag, type, lo, hi, def, metavar, help) \
	{GW_FLAG_##id, offsetof(struct gw_opts, field), flag, GW_FLAG_T_##type, lo, hi, def, metavar, help},
static const struct gw_flag_desc rows[GW_FLAG_COUNT] = {GW_FLAGS_TABLE(ROW_)};
#undef ROW_

const struct gw_flag_desc *gw_flag_desc(int i)
{
	return i >= 0 && i < GW_FLAG_COUNT ? &rows[i] : NULL;
}

const struct gw_flag_desc *gw_flag_by_name(const char *flag)
{
	if (!strcmp(flag, "-h"))
		return &rows[GW_FLAG_help];
	for (int i = 0; i < GW_FLAG_COUNT; i++)
		if (!strcmp(rows[i].flag, flag))
			return &rows[i];
	return NULL;
}

/* A whole decimal integer in [lo, hi]: 0, or -1. */
static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *ret)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		return -1;
	*ret = v;
	return 0;
}

/* Adds a copy of one API key (0, or -1 with err). */
static int add_key(struct gw_opts *o, const char *k, const char *from, char *err, size_t errlen)
{
	if (!*k || strlen(k) > GW_API_KEY_MAX_LEN)
		return allm_errtext(err, errlen, -1, "%s: an API key is 1..%d characters", from, GW_API_KEY_MAX_LEN);
	if (o->n_api_keys == GW_MAX_API_KEYS)
		return allm_errtext(err, errlen, -1, "%s: more than %d API keys", from, GW_MAX_API_KEYS);
	if (!o->api_keys && !(o->api_keys = calloc(GW_MAX_API_KEYS, sizeof(*o->api_keys))))
		return allm_errtext(err, errlen, -1, "%s: out of memory", from);
	char *copy = strdup(k);
	if (!copy)
		return allm_errtext(err, errlen, -1, "%s: out of memory", from);
	o->api_keys[o->n_api_keys++] = copy;
	return 0;
}

/* A file of keys, one a line; blank lines and lines starting with # are skipped. */
static int read_key_file(struct gw_opts *o, const char *flag, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char line[GW_API_KEY_MAX_LEN + 2];
	int n = 0, ret = -1;
	if (!f)
		return allm_errtext(err, errlen, -1, "%s %s: %s", flag, path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (len && line[len - 1] != '\n' && !feof(f)) {
			allm_errtext(err, errlen, -1, "%s %s: a line longer than %d characters", flag, path,
				     GW_API_KEY_MAX_LEN);
			goto out;
		}
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		if (add_key(o, line, path, err, errlen))
			goto out;
		n++;
	}
	if (n == 0) {
		allm_errtext(err, errlen, -1, "%s %s holds no key", flag, path);
		goto out;
	}
	ret = 0;
out:
	fclose(f);
	return ret;
}

/* A file holding one key (its first line that is not blank or a # comment). */
static int read_one_key(const char *flag, const char *path, char **owned, const char **ret, char *err,
			size_t errlen)
{
	struct gw_opts tmp = {0};
	int rc = -1;
	if (read_key_file(&tmp, flag, path, err, errlen))
		goto out;
	if (tmp.n_api_keys != 1) {
		allm_errtext(err, errlen, -1, "%s %s: one key, not %d", flag, path, tmp.n_api_keys);
		goto out;
	}
	free(*owned);
	*owned = (char *)tmp.api_keys[0];
	tmp.api_keys[0] = NULL;
	tmp.n_api_keys = 0;
	*ret = *owned;
	rc = 0;
out:
	gw_opts_free(&tmp);
	return rc;
}

/* Stores text (NULL for ON) as row d says: 0, or -1 with err. */
static int store(struct gw_opts *o, const struct gw_flag_desc *d, const char *v, char *err, size_t errlen)
{
	char *field = (char *)o + d->offset;
	int64_t n;
	switch (d->type) {
	case GW_FLAG_T_INT:
	case GW_FLAG_T_I32:
	case GW_FLAG_T_SIZE:
	case GW_FLAG_T_SECS:
		if (parse_int(v, d->lo, d->hi, &n))
			return allm_errtext(err, errlen, -1, "%s: '%.40s' is not a whole number in %lld..%lld",
					    d->flag, v, (long long)d->lo, (long long)d->hi);
		if (d->type == GW_FLAG_T_INT)
			*(int *)field = (int)n;
		else if (d->type == GW_FLAG_T_I32)
			*(int32_t *)field = (int32_t)n;
		else if (d->type == GW_FLAG_T_SIZE)
			*(size_t *)field = (size_t)n;
		else
			*(double *)field = (double)n;
		return 0;
	case GW_FLAG_T_TEXT:
	case GW_FLAG_T_NAME:
		if (!*v || (d->hi && strlen(v) > (size_t)d->hi) || (d->type == GW_FLAG_T_NAME && strchr(v, '/'))) {
			char most[32] = "";
			if (d->hi)
				snprintf(most, sizeof(most), ", at most %lld bytes", (long long)d->hi);
			return allm_errtext(err, errlen, -1, "%s: a non-empty %s%s%s", d->flag, d->metavar,
					    d->type == GW_FLAG_T_NAME ? " without '/'" : "", most);
		}
		/* fall through */
	case GW_FLAG_T_STR:
		*(const char **)field = v;
		return 0;
	case GW_FLAG_T_ON:
		*(bool *)field = true;
		return 0;
	case GW_FLAG_T_KEY:
		return add_key(o, v, d->flag, err, errlen);
	case GW_FLAG_T_KEYFILE:
		return read_key_file(o, d->flag, v, err, errlen);
	case GW_FLAG_T_ONEKEY:
		return read_one_key(d->flag, v,
				    d->id == GW_FLAG_metrics_api_key_file ? &o->owned_metrics_key : &o->owned_admin_key,
				    (const char **)field, err, errlen);
	case GW_FLAG_T_LOG:
		if (allm_log_level_parse(v, (enum allm_log_level *)field))
			return allm_errtext(err, errlen, -1, "%s: error, warn, info or debug", d->flag);
		return 0;
	}
	return allm_errtext(err, errlen, -1, "%s: no such type", d->flag);
}

void gw_opts_default(struct gw_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	memset(o, 0, sizeof(*o)); /* padding too: tests compare whole structs */
	o->threads = cpus > 4 ? 4 : cpus > 0 ? (int)cpus : 1;
	for (int i = 0; i < GW_FLAG_COUNT; i++)
		if (rows[i].def && store(o, &rows[i], rows[i].def, NULL, 0))
			abort(); /* a bad DEF in the table: tests/test-gw-opts.c says which */
}

/* $NAME's key: 0, or -1 when too long. */
static int env_key(const char *name, const char *v, const char **ret, char *err, size_t errlen)
{
	if (!v || !*v)
		return 0;
	if (strlen(v) > GW_API_KEY_MAX_LEN)
		return allm_errtext(err, errlen, -1, "$%s: a key is 1..%d characters", name, GW_API_KEY_MAX_LEN);
	*ret = v;
	return 0;
}

int gw_opts_parse(struct gw_opts *o, int argc, char **argv, const struct gw_env *env, char *err, size_t errlen)
{
	static const struct gw_env none;
	bool keys_given = false; /* flags replace $ALLM_API_KEY */
	if (!env)
		env = &none;
	gw_opts_default(o);
	o->test_pump_busy = env->test_pump_busy;
	if (env_key("ALLM_METRICS_API_KEY", env->metrics_api_key, &o->metrics_api_key, err, errlen) ||
	    env_key("ALLM_ADMIN_API_KEY", env->admin_api_key, &o->admin_api_key, err, errlen))
		return -1;
	for (int i = 1; i < argc; i++) {
		const struct gw_flag_desc *d = gw_flag_by_name(argv[i]);
		const char *v = NULL;
		if (!d)
			return allm_errtext(err, errlen, -1, "unknown flag: %s (see --help)", argv[i]);
		if (d->type != GW_FLAG_T_ON) {
			if (i + 1 >= argc)
				return allm_errtext(err, errlen, -1, "%s: a value is missing (%s)", d->flag, d->metavar);
			v = argv[++i];
		}
		if (store(o, d, v, err, errlen))
			return -1;
		if (d->type == GW_FLAG_T_KEY || d->type == GW_FLAG_T_KEYFILE)
			keys_given = true;
		if (o->help || o->list_fields)
			return 0; /* the program prints and exits: the rest is not looked at */
	}
	if (!keys_given && env->api_key && *env->api_key && add_key(o, env->api_key, "$ALLM_API_KEY", err, errlen))
		return -1;
	if (!o->max_conns_per_addr)
		o->max_conns_per_addr = o->max_connections > 1 ? o->max_connections / 2 : 1;
	return 0;
}

void gw_opts_free(struct gw_opts *o)
{
	for (int i = 0; i < o->n_api_keys; i++)
		free((char *)o->api_keys[i]);
	free(o->api_keys);
	free(o->owned_metrics_key);
	free(o->owned_admin_key);
	o->api_keys = NULL;
	o->n_api_keys = 0;
	o->owned_metrics_key = o->owned_admin_key = NULL;
}

/* Column where the help text starts. */
#define HELP_COL 27

void gw_opts_usage(FILE *f)
{
	fprintf(f, "usage: allm-gateway [--engine NAME] [--host 127.0.0.1] [--port 8000] [options]\n"
		   "An OpenAI-compatible HTTP server for a running allm-engined (POST /v1/completions,\n"
		   "POST /v1/chat/completions, GET /v1/models[/ID], POST /tokenize, POST /detokenize,\n"
		   "/health, /metrics).\n");
	for (int i = 0; i < GW_FLAG_COUNT; i++) {
		const struct gw_flag_desc *d = &rows[i];
		int w = fprintf(f, "  %s%s%s", d->flag, *d->metavar ? " " : "", d->metavar);
		if (w + 2 > HELP_COL)
			fprintf(f, "  ");
		else
			fprintf(f, "%*s", HELP_COL - w, "");
		/* the help's lines, the later ones indented; the default after the last */
		for (const char *p = d->help; *p;) {
			size_t n = strcspn(p, "\n");
			bool last = !p[n] || !p[n + 1];
			fprintf(f, "%.*s%s%s%s\n", (int)n, p, last && d->def ? " (default " : "",
				last && d->def ? d->def : "", last && d->def ? ")" : "");
			p += n + (p[n] ? 1 : 0);
			if (*p)
				fprintf(f, "%*s", HELP_COL, "");
		}
	}
}
