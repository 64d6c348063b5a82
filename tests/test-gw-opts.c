/* Description: the gateway's flags' table (engined/gateway/gw-opts.h, GW_FLAGS_TABLE) is the one definition its parser, defaults and --help read: every row's default parses and is what gw_opts_default leaves, --help names every flag with its metavar and default, each number's range is taken at both ends and refused past them, a missing value, an unknown flag and a bad key file are refused with the flag named, and the environment's keys yield to the flags as before (ALLM_API_KEY replaced by --api-key, the metrics key by its flag). */
#include "gw-opts.h"
#include "test-check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parses flag [value] after the defaults: gw_opts_parse's result. */
static int parse2(struct gw_opts *o, const char *flag, const char *value, const struct gw_env *env, char *err)
{
	char *argv[] = {"allm-gateway", (char *)flag, (char *)value, NULL};
	gw_opts_free(o);
	return gw_opts_parse(o, value ? 3 : flag ? 2 : 1, argv, env, err, 256);
}

static char *help_text(void)
{
	static char buf[1 << 16];
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
	if (!f)
		return NULL;
	gw_opts_usage(f);
	fclose(f);
	return buf;
}

int main(void)
{
	struct gw_opts def, o = {0};
	char err[256], num[32];
	const char *help = help_text();

	gw_opts_default(&def);
	CHECK(help, "no --help text");
	for (int i = 0; help && i < GW_FLAG_COUNT; i++) {
		const struct gw_flag_desc *d = gw_flag_desc(i);
		CHECK((int)d->id == i && d->flag && d->help && d->metavar && *d->help, "row %d incomplete", i);
		CHECK(gw_flag_by_name(d->flag) == d, "%s: flag not unique", d->flag);
		CHECK(d->help[strlen(d->help) - 1] == '\n', "%s: help does not end with a newline", d->flag);
		char line[96];
		snprintf(line, sizeof(line), "\n  %s%s%s ", d->flag, *d->metavar ? " " : "", d->metavar);
		const char *at = strstr(help, line);
		CHECK(at, "--help lacks a line '%s'", line + 1);
		if (at && d->def) {
			char want[96];
			snprintf(want, sizeof(want), "(default %s)", d->def);
			const char *next = strstr(at + 2, "\n  --");
			const char *in = strstr(at, want);
			CHECK(in && (!next || in < next), "--help: %s lacks '%s'", d->flag, want);
		}
		/* the default (DEF) is what gw_opts_default left, parsed by the flag's code */
		if (d->def) {
			CHECK(parse2(&o, d->flag, d->def, NULL, err) == 0, "%s %s: %s", d->flag, d->def, err);
			o.max_conns_per_addr = def.max_conns_per_addr = 0; /* derived after parsing */
			CHECK(!memcmp(&o, &def, sizeof(o)), "%s: the default differs from '%s'", d->flag, d->def);
		}
		/* a number's range, both ends in, one past each out, the refusal names the flag */
		if (d->type == GW_FLAG_T_INT || d->type == GW_FLAG_T_I32 || d->type == GW_FLAG_T_SIZE ||
		    d->type == GW_FLAG_T_SECS) {
			snprintf(num, sizeof(num), "%lld", (long long)d->lo);
			CHECK(parse2(&o, d->flag, num, NULL, err) == 0, "%s %s: %s", d->flag, num, err);
			snprintf(num, sizeof(num), "%lld", (long long)d->hi);
			CHECK(parse2(&o, d->flag, num, NULL, err) == 0, "%s %s: %s", d->flag, num, err);
			snprintf(num, sizeof(num), "%lld", (long long)d->hi + 1);
			CHECK(parse2(&o, d->flag, num, NULL, err) == -1 && strstr(err, d->flag), "%s %s: %s", d->flag,
			      num, err);
			snprintf(num, sizeof(num), "%lld", (long long)d->lo - 1);
			CHECK(parse2(&o, d->flag, num, NULL, err) == -1 && strstr(err, d->flag), "%s %s: %s", d->flag,
			      num, err);
			CHECK(parse2(&o, d->flag, "7x", NULL, err) == -1, "%s 7x accepted", d->flag);
		}
		if (d->type != GW_FLAG_T_ON)
			CHECK(parse2(&o, d->flag, NULL, NULL, err) == -1 && strstr(err, d->flag),
			      "%s without its value: %s", d->flag, err);
	}

	/* values land in their fields */
	CHECK(parse2(&o, "--port", "0", NULL, err) == 0 && o.port == 0, "--port 0");
	CHECK(parse2(&o, "--engine-timeout", "3", NULL, err) == 0 && o.engine_timeout_s == 3.0, "--engine-timeout");
	CHECK(parse2(&o, "--max-body-bytes", "2048", NULL, err) == 0 && o.max_body == 2048, "--max-body-bytes");
	CHECK(parse2(&o, "--allowed-origins", "*", NULL, err) == 0 && !strcmp(o.cors.origins, "*"), "--allowed-origins");
	CHECK(parse2(&o, "--log-level", "debug", NULL, err) == 0 && o.log_level == ALLM_LOG_DEBUG, "--log-level");
	CHECK(parse2(&o, "--log-level", "loud", NULL, err) == -1, "--log-level loud accepted");
	CHECK(parse2(&o, "--metrics-open", NULL, NULL, err) == 0 && o.metrics_open, "--metrics-open");
	CHECK(parse2(&o, "-h", NULL, NULL, err) == 0 && o.help, "-h");
	CHECK(parse2(&o, "--engine", "a/b", NULL, err) == -1, "--engine a/b accepted");
	CHECK(parse2(&o, "--host", "", NULL, err) == -1, "--host '' accepted");
	CHECK(parse2(&o, "--no-such-flag", "1", NULL, err) == -1 && strstr(err, "--no-such-flag"), "unknown flag: %s",
	      err);
	CHECK(parse2(&o, "--max-connections", "9", NULL, err) == 0 && o.max_conns_per_addr == 4,
	      "--max-connections-per-address is not half of --max-connections");

	/* the environment: ALLM_API_KEY unless a flag gives keys; flags over the others */
	struct gw_env env = {.api_key = "envkey", .metrics_api_key = "envmetrics", .test_pump_busy = true};
	CHECK(parse2(&o, NULL, NULL, &env, err) == 0 && o.n_api_keys == 1 && !strcmp(o.api_keys[0], "envkey") &&
		      !strcmp(o.metrics_api_key, "envmetrics") && o.test_pump_busy,
	      "the environment's keys");
	CHECK(parse2(&o, "--api-key", "flagkey", &env, err) == 0 && o.n_api_keys == 1 &&
		      !strcmp(o.api_keys[0], "flagkey"),
	      "--api-key does not replace $ALLM_API_KEY");
	CHECK(parse2(&o, "--metrics-api-key", "m2", &env, err) == 0 && !strcmp(o.metrics_api_key, "m2"),
	      "--metrics-api-key does not override $ALLM_METRICS_API_KEY");

	/* key files: keys one a line, comments skipped; one key for the admin's */
	char path[] = "/tmp/test-gw-opts-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd >= 0) {
		const char text[] = "# users\nk1\n\nk2 \n";
		CHECK(write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1, "write");
		close(fd);
		CHECK(parse2(&o, "--api-key-file", path, NULL, err) == 0 && o.n_api_keys == 2 &&
			      !strcmp(o.api_keys[1], "k2"),
		      "--api-key-file: %s", err);
		CHECK(parse2(&o, "--admin-api-key-file", path, NULL, err) == -1 && strstr(err, "one key, not 2"),
		      "--admin-api-key-file with two keys: %s", err);
		unlink(path);
		CHECK(parse2(&o, "--api-key-file", path, NULL, err) == -1 && strstr(err, "--api-key-file"),
		      "a missing key file: %s", err);
	}
	gw_opts_free(&o);
	if (n_fail)
		return 1;
	printf("gw-opts: %d flags, parser, defaults and --help agree\n", GW_FLAG_COUNT);
	return 0;
}
