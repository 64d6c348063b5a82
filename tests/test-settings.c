/* Description: the engine settings' table (include/adaptivellm/settings.h) is the one definition every consumer reads: each row's default parses and lies in its range, --help names every flag with its default, the flag parser and the engine's config check take the same range (max_wait_factor 1.5 accepted, 0.5 refused by both with the same words), allm_engine_config_from_opts copies every live row, and ctl/PROTOCOL.md and ctl/allmctl.1 name every key `set` takes. */
#include "engine-opts.h"
#include "engine.h"
#include "test-check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_one(struct allm_engine_opts *o, const char *flag, const char *value, struct allm_err *err)
{
	char *argv[] = {(char *)flag, (char *)value, NULL};
	int i = 0;
	return allm_engine_opts_parse(o, value ? 2 : 1, argv, &i, err);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

int main(void)
{
	struct allm_engine_opts o;
	struct allm_err err = {{0}};
	const char *help = allm_engine_opts_help();

	allm_engine_opts_default(&o);
	for (int i = 0; i < ALLM_SETTING_COUNT; i++) {
		const struct allm_setting_desc *d = allm_setting_desc(i);
		struct allm_setting_value v;
		char why[256];
		CHECK((int)d->id == i && d->key && d->help && d->metavar, "row %d incomplete", i);
		CHECK(allm_setting_by_key(d->key, -1) == d, "%s: key not unique", d->key);
		if (d->def && d->type != ALLM_SET_CUSTOM)
			CHECK(allm_setting_parse(d, d->def, &v, why, sizeof(why)) == 0, "%s: default '%s': %s", d->key,
			      d->def, why);
		if (!d->opt)
			continue;
		CHECK(d->flag && allm_setting_by_flag(d->flag) == d, "%s: flag", d->key);
		char line[96];
		snprintf(line, sizeof(line), "\n  %s ", d->flag);
		const char *at = strstr(help, line);
		CHECK(at, "--help lacks a line for %s", d->flag);
		if (at && d->def) {
			char want[96];
			snprintf(want, sizeof(want), "(default %s)", d->def);
			const char *next = strstr(at + 2, "\n  --");
			const char *def = strstr(at, want);
			CHECK(def && (!next || def < next), "--help: %s lacks '%s'", d->flag, want);
		}
		/* the default (DEF) is what allm_engine_opts_default left */
		if (d->def && d->type != ALLM_SET_CUSTOM) {
			struct allm_engine_opts p;
			allm_engine_opts_default(&p);
			CHECK(parse_one(&p, d->flag, d->def, &err) == 1, "%s %s: %s", d->flag, d->def, err.msg);
			CHECK(!memcmp(&p, &o, sizeof(o)), "%s: the default differs from '%s'", d->flag, d->def);
		}
	}

	/* one range for the flag and the engine: the drift of max_wait_factor */
	CHECK(parse_one(&o, "--max-wait-factor", "1.5", &err) == 1 && o.max_wait_factor == 1.5, "1.5: %s", err.msg);
	CHECK(parse_one(&o, "--max-wait-factor", "0", &err) == 1 && o.max_wait_factor == 0, "0: %s", err.msg);
	CHECK(parse_one(&o, "--max-wait-factor", "0.5", &err) == -EINVAL && strstr(err.msg, "1..1000000, or 0 = off"),
	      "0.5 on the command line: %s", err.msg);
	struct allm_engine_config c;
	allm_engine_opts_default(&o);
	allm_engine_config_from_opts(&o, &c);
	CHECK(allm_engine_config_check(&c, &err) == 0, "the defaults: %s", err.msg);
	c.max_wait_factor = 0.5;
	CHECK(allm_engine_config_check(&c, &err) == -EINVAL && strstr(err.msg, "1..1000000, or 0 = off"),
	      "0.5 in the engine: %s", err.msg);
	CHECK(parse_one(&o, "--admit-overcommit", "0.05", &err) == -EINVAL, "admit_overcommit 0.05 accepted");
	CHECK(parse_one(&o, "--preempt", "swap", &err) == 1 && o.preempt == ALLM_PREEMPT_SWAP, "--preempt swap");
	CHECK(parse_one(&o, "--chunked-prefill", "off", &err) == 1 && !o.chunked_prefill, "--chunked-prefill off");
	CHECK(parse_one(&o, "--gemm", "openblas", &err) == 1 && o.blas, "--gemm openblas");
	CHECK(parse_one(&o, "--log-level", "debug", &err) == 1 && o.log_level == ALLM_LOG_DEBUG, "--log-level");
	CHECK(parse_one(&o, "--reference", NULL, &err) == 1 && o.reference, "--reference");
	CHECK(parse_one(&o, "--max-num-seqs", NULL, &err) == -EINVAL, "a missing value accepted");
	CHECK(parse_one(&o, "--no-such-flag", "1", &err) == 0, "an unknown flag taken");

	/* every live row reaches the engine's config */
	allm_engine_opts_default(&o);
	o.max_num_seqs = 7, o.max_num_batched_tokens = 77, o.preempt = ALLM_PREEMPT_SWAP, o.sched = ALLM_SCHED_FCFS;
	o.chunked_prefill = false, o.prefix_caching = false, o.max_wait_factor = 2.5, o.admit_lookahead = 3;
	o.admit_overcommit = 1.5;
	allm_engine_config_from_opts(&o, &c);
	CHECK(c.max_num_seqs == 7 && c.max_num_batched_tokens == 77 && c.preempt == ALLM_PREEMPT_SWAP &&
		      c.sched == ALLM_SCHED_FCFS && !c.chunked_prefill && !c.prefix_caching &&
		      c.max_wait_factor == 2.5 && c.admit_lookahead == 3 && c.admit_overcommit == 1.5,
	      "allm_engine_config_from_opts dropped a live row");

	/* the documents name every key `set` takes */
	const char *data = getenv("DATA_DIR");
	char path[4096];
	for (int k = 0; data && k < 2; k++) {
		snprintf(path, sizeof(path), "%s/../ctl/%s", data, k ? "allmctl.1" : "PROTOCOL.md");
		char *text = slurp(path);
		CHECK(text, "cannot read %s", path);
		for (int i = 0; text && i < ALLM_SETTING_COUNT; i++)
			if (allm_setting_desc(i)->live)
				CHECK(strstr(text, allm_setting_desc(i)->key), "%s does not name set's key %s", path,
				      allm_setting_desc(i)->key);
	}
	if (n_fail)
		return 1;
	printf("settings: %d rows, all consumers agree\n", ALLM_SETTING_COUNT);
	return 0;
}
