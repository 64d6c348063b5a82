/* allm-bench: the online serving benchmark (DESIGN §12). Sends a workload to an
 * engine through libadaptivellm and reports the summary allm-run --workload
 * reports, measured from the client's side of the rings; or compares settings
 * side by side, one fresh engine each; or measures ring vs socket round trips.
 * Exit status: 0 done, 1 a run failed, 2 bad flags, 130 interrupted. */
#include "allm-bench.h"
#include "allm-ping.h"

#include "engine-opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "allm-bench"

static void usage(FILE *f)
{
	char params[4096];
	allm_params_help(params, sizeof(params));
	fprintf(f,
		"usage: allm-bench (--name NAME | --model DIR | --dummy PRESET) [options]\n"
		"       allm-bench --ping N [--json]\n"
		"engine:\n"
		"  --name NAME            benchmark the engine already running as NAME\n"
		"  --model DIR | --dummy P  start a private allm-engined (found beside allm-bench\n"
		"                         or on PATH) for the run and stop it afterwards (--model\n"
		"                         also takes FILE.gguf); these are\n"
		"                         passed to it: every other flag of allm-engined's\n"
		"                         \"model and memory\" and \"scheduling\" (its --help)\n"
		"  --start-timeout S      limit on the engine's load + calibration (default 900)\n"
		"workload:\n"
		"  --workload W           chatbot (default), alpaca, summary or FILE.jsonl\n"
		"  -n N                   requests (default 100)\n"
		"  --max-output N         tokens per request (default 128)\n"
		"  --output-dist D        fixed (default) or uniform output lengths\n"
		"  --rate R               Poisson arrivals per second (default 0: all at t = 0)\n"
		"  --concurrency C        at most C requests in flight (default 0: no cap)\n"
		"requests (--seed also seeds the workload: request i samples with S + i;\n"
		"temperature 0 unless given; --max-tokens is the workload's):\n"
		"%s"
		"output:\n"
		"  --json                 stdout holds only the summary JSON (DESIGN §12)\n"
		"  --records FILE         one JSON line per request (with --compare: one file per\n"
		"                         setting, FILE.VALUE.jsonl)\n"
		"  --no-progress          no progress bar on stderr\n"
		"  --compare KEY=V1,V2,.. one spawned engine per value, same workload; KEY is an\n"
		"                         engine flag's snake_case name (preempt, sched,\n"
		"                         max_num_seqs, gpu_blocks, block_size, disk_swap_space...);\n"
		"                         --json prints {\"runs\": [{\"setting\": {KEY: V}, ...}]}\n"
		"  --ping N               N round trips: shm rings (spin, sleep) vs a Unix socket\n",
		params);
}

/* --compare keys and the flags passed to a spawned engine: the settings table's
 * command-line rows (include/adaptivellm/settings.h) but --model and --dummy,
 * which say whether an engine is spawned at all. */
static const struct allm_setting_desc *engine_setting(const char *key, const char *flag)
{
	const struct allm_setting_desc *d = key ? allm_setting_by_key(key, -1) : allm_setting_by_flag(flag);
	if (!d || !d->opt || d->id == ALLM_SETTING_model_dir || d->id == ALLM_SETTING_dummy)
		return NULL;
	return d;
}

/* Whether key's values are words (reported as JSON strings), not numbers. */
static bool compare_words(const char *key)
{
	const struct allm_setting_desc *d = engine_setting(key, NULL);
	return d && (d->choices || d->type == ALLM_SET_TEXT || d->type == ALLM_SET_CUSTOM);
}

static const char *compare_flag(const char *key)
{
	const struct allm_setting_desc *d = engine_setting(key, NULL);
	return d && *d->metavar ? d->flag : NULL;
}

/* Checks a value the way the engine will, so a typo fails here and not after
 * minutes of loading. */
static int check_engine_flag(const char *flag, const char *value)
{
	struct allm_engine_opts scratch;
	struct allm_err err = {{0}};
	char *argv[] = {(char *)flag, (char *)value, NULL};
	int i = 0;
	allm_engine_opts_default(&scratch);
	if (allm_engine_opts_parse(&scratch, value ? 2 : 1, argv, &i, &err) != 1) {
		fprintf(stderr, PROG ": %s\n", err.msg[0] ? err.msg : "bad engine flag");
		return -1;
	}
	return 0;
}

static int parse_compare(struct bench_opts *o, const char *spec)
{
	static char buf[1024];
	const char *eq = strchr(spec, '=');
	if (!eq || eq == spec || strlen(spec) >= sizeof(buf)) {
		fprintf(stderr, PROG ": --compare wants KEY=V1,V2,... (e.g. preempt=adaptive,swap)\n");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", spec);
	buf[eq - spec] = 0;
	o->compare_key = buf;
	const char *flag = compare_flag(buf);
	if (!flag) {
		fprintf(stderr, PROG ": --compare: unknown key '%s' (want an engine setting's key, "
				"e.g. preempt, sched, max_num_seqs, gpu_blocks: allm-engined --help)\n",
			buf);
		return -1;
	}
	char *save = NULL;
	for (char *v = strtok_r(buf + (eq - spec) + 1, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
		if (o->n_compare == BENCH_MAX_COMPARE) {
			fprintf(stderr, PROG ": --compare: at most %d values\n", BENCH_MAX_COMPARE);
			return -1;
		}
		if (check_engine_flag(flag, v))
			return -1;
		o->compare_vals[o->n_compare++] = v;
	}
	if (o->n_compare == 0) {
		fprintf(stderr, PROG ": --compare %s: no values\n", buf);
		return -1;
	}
	return 0;
}

/* Engine flags allm-bench passes through (with their value, but a flag without one). */
static bool is_engine_flag(const char *f)
{
	return engine_setting(NULL, f) != NULL;
}

static int bad_value(const char *f, const char *v, const char *want)
{
	fprintf(stderr, PROG ": bad value for %s: '%s' (want %s)\n", f, v, want);
	return -1;
}

static int parse_one(struct bench_opts *o, const char *f, const char *v)
{
	int64_t n;
	double d;
	if (!strcmp(f, "--name")) {
		if (!*v || strchr(v, '/') || strlen(v) > 64)
			return bad_value(f, v, "1..64 characters without '/'");
		o->name = v;
	} else if (!strcmp(f, "--model")) {
		o->model_dir = v;
	} else if (!strcmp(f, "--dummy")) {
		o->dummy = v;
	} else if (!strcmp(f, "--workload")) {
		o->workload = v;
	} else if (!strcmp(f, "-n")) {
		if (allm_parse_i64(v, 1, 1 << 24, &n))
			return bad_value(f, v, "an integer >= 1");
		o->n = n;
	} else if (!strcmp(f, "--max-output")) {
		if (allm_parse_i64(v, 1, 1 << 24, &n))
			return bad_value(f, v, "an integer >= 1");
		o->max_output = (int32_t)n;
	} else if (!strcmp(f, "--output-dist")) {
		if (strcmp(v, "fixed") && strcmp(v, "uniform"))
			return bad_value(f, v, "fixed or uniform");
		o->output_dist = v;
	} else if (!strcmp(f, "--rate")) {
		if (allm_parse_f64(v, 0, 1e9, &d))
			return bad_value(f, v, "a number >= 0");
		o->rate = d;
	} else if (!strcmp(f, "--concurrency")) {
		if (allm_parse_i64(v, 0, 1 << 24, &n))
			return bad_value(f, v, "an integer >= 0");
		o->concurrency = n;
	} else if (!strcmp(f, "--records")) {
		o->records = v;
	} else if (!strcmp(f, "--compare")) {
		return parse_compare(o, v);
	} else if (!strcmp(f, "--ping")) {
		if (allm_parse_i64(v, 1, 100000000, &n))
			return bad_value(f, v, "an integer in 1..100000000");
		o->ping = (long)n;
	} else if (!strcmp(f, "--start-timeout")) {
		if (allm_parse_f64(v, 1, 86400, &d))
			return bad_value(f, v, "seconds in 1..86400");
		o->start_timeout_s = d;
	} else {
		fprintf(stderr, PROG ": unknown flag %s (see --help)\n", f);
		return -1;
	}
	return 0;
}

static int check_modes(struct bench_opts *o)
{
	o->spawn = o->model_dir || o->dummy;
	if (o->ping)
		return 0;
	if (o->model_dir && o->dummy) {
		fprintf(stderr, PROG ": --model and --dummy are exclusive\n");
		return -1;
	}
	if (!!o->name + o->spawn != 1) {
		fprintf(stderr, PROG ": give --name NAME (a running engine) or --model DIR / "
				"--dummy PRESET (allm-bench starts one)\n");
		return -1;
	}
	bool synthetic = !strcmp(o->workload, "chatbot") || !strcmp(o->workload, "alpaca") ||
			 !strcmp(o->workload, "summary");
	if (!synthetic && access(o->workload, R_OK)) {
		fprintf(stderr, PROG ": --workload %s: not chatbot, alpaca, summary or a readable "
				"JSONL file (%s)\n", o->workload, strerror(errno));
		return -1;
	}
	if (o->name && (o->n_eng_args || o->n_compare)) {
		fprintf(stderr, PROG ": engine flags%s need --model or --dummy (with --name the "
				"engine is already configured)\n", o->n_compare ? " and --compare" : "");
		return -1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->workload = "chatbot";
	o->n = 100;
	o->max_output = 128;
	allm_params_init(&o->params);
	o->params.temperature = 0; /* a benchmark's outputs are comparable run to run */
	o->start_timeout_s = 900;
	for (int i = 1; i < argc;) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char why[160];
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			exit(0);
		}
		int r = allm_params_parse_flag(&o->params, argc, argv, &i, why, sizeof(why));
		if (r < 0) {
			fprintf(stderr, PROG ": %s\n", why);
			return -1;
		}
		if (r)
			continue;
		const struct allm_setting_desc *d = engine_setting(NULL, f);
		if (!strcmp(f, "--json") || !strcmp(f, "--no-progress") || (d && !*d->metavar)) {
			o->json |= !strcmp(f, "--json");
			o->quiet |= !strcmp(f, "--no-progress");
			if (d && o->n_eng_args + 1 <= BENCH_MAX_ENG_ARGS)
				o->eng_args[o->n_eng_args++] = f;
			i++;
			continue;
		}
		if (!v) {
			fprintf(stderr, PROG ": %s needs a value (see --help)\n", f);
			return -1;
		}
		if (is_engine_flag(f)) {
			if (check_engine_flag(f, v))
				return -1;
			if (o->n_eng_args + 2 > BENCH_MAX_ENG_ARGS) {
				fprintf(stderr, PROG ": too many engine flags\n");
				return -1;
			}
			o->eng_args[o->n_eng_args++] = f;
			o->eng_args[o->n_eng_args++] = v;
		} else if (parse_one(o, f, v)) {
			return -1;
		}
		i += 2;
	}
	return check_modes(o);
}

/* FILE.jsonl -> FILE.VALUE.jsonl (other names: FILE.VALUE). */
static void records_path(const char *base, const char *value, char *ret, size_t len)
{
	size_t n = strlen(base);
	if (n > 6 && !strcmp(base + n - 6, ".jsonl"))
		snprintf(ret, len, "%.*s.%s.jsonl", (int)(n - 6), base, value);
	else
		snprintf(ret, len, "%s.%s", base, value);
}

/* One benchmark: against --name, or a private engine started with extra flags. */
static int run_once(const struct bench_opts *o, const char *const *extra, int idx,
		    struct bench_result *res)
{
	struct bench_engine e;
	if (!o->spawn)
		return bench_run(o, NULL, o->name, res);
	if (bench_engine_start(o, extra, idx, &e))
		return -1;
	int rc = bench_run(o, e.dir, e.name, res);
	if (bench_engine_stop(&e))
		rc = -1;
	return rc;
}

static int emit(const struct bench_opts *o, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_PRESERVE_ORDER | JSON_INDENT(2)) : NULL;
	if (!s) {
		fprintf(stderr, PROG ": out of memory\n");
		return -1;
	}
	puts(s);
	free(s);
	fflush(stdout);
	return 0;
}

static int single(const struct bench_opts *o)
{
	struct bench_result res = {0};
	int rc = run_once(o, NULL, 0, &res);
	if (rc == 0 && o->records)
		rc = bench_write_records(&res, o->records);
	if (rc == 0 && o->json) {
		json_t *j = bench_summary_json(&res);
		rc = emit(o, j);
		json_decref(j);
	} else if (rc == 0) {
		bench_print_summary(stdout, o, &res);
	}
	bench_result_free(&res);
	return rc;
}

static int compare(const struct bench_opts *o)
{
	const char *flag = compare_flag(o->compare_key);
	/* settings that are numbers are reported as JSON numbers, the rest as strings */
	bool numeric = !compare_words(o->compare_key);
	json_t *runs = json_array();
	int rc = 0;
	for (int k = 0; k < o->n_compare && !rc; k++) {
		const char *v = o->compare_vals[k];
		const char *extra[] = {flag, v, NULL};
		struct bench_result res = {0};
		if (!o->quiet)
			fprintf(stderr, PROG ": [%d/%d] %s=%s\n", k + 1, o->n_compare, o->compare_key, v);
		rc = run_once(o, extra, k, &res);
		if (!rc && o->records) {
			char path[4200];
			records_path(o->records, v, path, sizeof(path));
			rc = bench_write_records(&res, path);
		}
		if (!rc) {
			json_t *sum = bench_summary_json(&res);
			json_t *run = json_object();
			json_t *set = json_object();
			char *end = NULL;
			double x = numeric ? strtod(v, &end) : 0;
			json_object_set_new(set, o->compare_key,
					    !numeric ? json_string(v)
					    : x == (double)(long long)x ? json_integer((long long)x) : json_real(x));
			json_object_set_new(run, "setting", set);
			json_object_update(run, sum);
			json_decref(sum);
			json_array_append_new(runs, run);
		}
		bench_result_free(&res);
	}
	if (!rc) {
		bench_print_compare(o->json ? stderr : stdout, o->compare_key, runs);
		if (o->json) {
			json_t *j = json_pack("{s:O}", "runs", runs);
			rc = emit(o, j);
			json_decref(j);
		}
	}
	json_decref(runs);
	return rc;
}

static int ping(const struct bench_opts *o)
{
	struct allm_ping_report rep;
	char err[256];
	if (allm_ping_measure(o->ping, 0, &rep, err, sizeof(err))) {
		fprintf(stderr, PROG ": --ping: %s\n", err);
		return -1;
	}
	allm_ping_print(stdout, PROG, &rep, o->json);
	return 0;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	if (parse_args(argc, argv, &o))
		return 2;
	bench_signals_install();
	int rc = o.ping ? ping(&o) : o.n_compare ? compare(&o) : single(&o);
	if (bench_interrupted)
		return 130;
	return rc ? 1 : 0;
}
