/* allmctl: operate a running allm-engined through its control plane (DESIGN §9,
 * ctl/PROTOCOL.md). Global flags may stand anywhere on the line; the first other
 * word is the subcommand. Exit status: 0 ok, 1 error reply, 2 usage, 3 no engine. */
#include "allmctl.h"

#include "top.h"

#include <adaptivellm/settings.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `set`'s keys off the settings table: "KEY (a|b)" or "KEY (lo..hi)", wrapped. */
static void print_set_keys(FILE *f)
{
	int col = 25;
	fprintf(f, "%25s", "");
	for (int i = 0; i < ALLM_SETTING_COUNT; i++) {
		const struct allm_setting_desc *d = allm_setting_desc(i);
		char range[128], item[200];
		if (!d->live)
			continue;
		allm_setting_range_text(d, range, sizeof(range));
		int n = snprintf(item, sizeof(item), "%s (%s)", d->key, range);
		if (col > 25 && col + n + 2 > 88) {
			fprintf(f, ",\n%25s", "");
			col = 25;
		} else if (col > 25) {
			fprintf(f, ", ");
			col += 2;
		}
		fputs(item, f);
		col += n;
	}
	fputc('\n', f);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: allmctl [--name NAME] [--runtime-dir DIR] [--timeout MS] [--json] COMMAND [ARGS]\n"
		"commands:\n"
		"  status                 the engine's state, queues, blocks, latencies, predictors\n"
		"  metrics                the same in Prometheus text format (what allm-gateway\n"
		"                         serves at GET /metrics); --json: the families as JSON\n"
		"  set KEY=VALUE...       change settings live, all or nothing; the keys:\n");
	print_set_keys(f);
	fprintf(f,
		"  calibrate              re-run predictor calibration (the engine must be idle)\n"
		"  requests [--limit N]   the requests in flight (default 100)\n"
		"  cancel ID              cancel one request\n"
		"  reset-stats            zero the counters and latency windows\n"
		"  cache reset            drop every cached KV block no request holds (all tiers)\n"
		"  drain [--no-wait]      refuse new requests; wait until those in flight finished\n"
		"  resume                 accept new requests again after drain\n"
		"  shutdown               drain, then the engine exits 0\n"
		"  watch TOPIC... [--count N] [--duration S]\n"
		"                         print telemetry (stats, decision, request, calibrate; all:\n"
		"                         every topic), one line per message: TOPIC JSON\n"
		"  top                    live dashboard\n"
		"  complete [COMMAND]     the words that may follow (for shell completion:\n"
		"                         ctl/allmctl.bash)\n"
		"options:\n"
		"  --name NAME            engine name (default \"default\")\n"
		"  --runtime-dir DIR      default $ALLM_RUNTIME_DIR, else $XDG_RUNTIME_DIR/adaptivellm,\n"
		"                         else /tmp/adaptivellm-$UID\n"
		"  --timeout MS           wait this long for each reply (default 5000; calibrate 300000)\n"
		"  --json                 print exactly one JSON object on stdout (watch: one per line)\n"
		"exit status: 0 ok, 1 the engine refused (error reply), 2 usage, 3 no engine answered\n");
}

int allmctl_fail(struct allmctl_run *r, const char *what, int err)
{
	fprintf(stderr, "allmctl: %s: %s\n", what, allm_ctl_client_error(r->c));
	if (err == -ETIMEDOUT)
		return ALLMCTL_EXIT_TIMEOUT;
	return ALLMCTL_EXIT_ERROR;
}

struct cmd {
	const char *name;
	int (*fn)(struct allmctl_run *r, int argc, char **argv);
};

static const struct cmd cmds[] = {
	{"status", allmctl_cmd_status},
	{"metrics", allmctl_cmd_metrics},
	{"set", allmctl_cmd_set},
	{"calibrate", allmctl_cmd_simple},
	{"requests", allmctl_cmd_requests},
	{"cancel", allmctl_cmd_cancel},
	{"reset-stats", allmctl_cmd_simple},
	{"cache", allmctl_cmd_cache},
	{"drain", allmctl_cmd_drain},
	{"resume", allmctl_cmd_simple},
	{"shutdown", allmctl_cmd_simple},
	{"watch", allmctl_cmd_watch},
};

/* `allmctl complete`: the commands, one a line; `complete set`: KEY= for every
 * live setting, KEY=WORD for each word of a worded one. No engine is asked. */
static int complete(int argc, char **argv)
{
	if (argc < 2) {
		for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
			printf("%s\n", cmds[k].name);
		printf("top\ncomplete\n");
		return 0;
	}
	if (strcmp(argv[1], "set"))
		return 0;
	for (int i = 0; i < ALLM_SETTING_COUNT; i++) {
		const struct allm_setting_desc *d = allm_setting_desc(i);
		char w[64];
		if (!d->live)
			continue;
		if (!d->choices)
			printf("%s=\n", d->key);
		for (int k = 0; d->choices && allm_setting_word(d->choices, k, w, sizeof(w)); k++)
			printf("%s=%s\n", d->key, w);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct allmctl_opts o = {.name = "default", .timeout_ms = 0};
	bool json = false;
	/* the subcommand's words, global flags taken out */
	char **rest = calloc((size_t)argc + 1, sizeof(char *));
	int nrest = 0;
	if (!rest)
		return ALLMCTL_EXIT_ERROR;
	signal(SIGPIPE, SIG_IGN);
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			free(rest);
			return 0;
		} else if (!strcmp(f, "--json")) {
			json = true;
		} else if (!strcmp(f, "--name") || !strcmp(f, "--runtime-dir") || !strcmp(f, "--timeout")) {
			if (!v) {
				fprintf(stderr, "allmctl: %s needs a value (see --help)\n", f);
				goto usage;
			}
			i++;
			if (!strcmp(f, "--name")) {
				if (!*v || strlen(v) > 64 || strchr(v, '/')) {
					fprintf(stderr, "allmctl: --name must be 1..64 characters without '/'\n");
					goto usage;
				}
				o.name = v;
			} else if (!strcmp(f, "--runtime-dir")) {
				o.runtime_dir = v;
			} else {
				char *end;
				long t = strtol(v, &end, 10);
				if (*end || end == v || t < 1 || t > 3600000) {
					fprintf(stderr, "allmctl: --timeout must be 1..3600000 ms\n");
					goto usage;
				}
				o.timeout_ms = (int)t;
			}
		} else {
			rest[nrest++] = argv[i];
		}
	}
	if (nrest == 0) {
		fprintf(stderr, "allmctl: no command (see --help)\n");
		goto usage;
	}
	bool timeout_given = o.timeout_ms > 0;
	if (!timeout_given)
		o.timeout_ms = strcmp(rest[0], "calibrate") ? 5000 : 300000;
	if (!strcmp(rest[0], "complete")) {
		int rc = complete(nrest, rest);
		free(rest);
		return rc;
	}
	if (!strcmp(rest[0], "top")) {
		int rc = allmctl_top(&o, nrest, rest);
		free(rest);
		return rc;
	}
	const struct cmd *cmd = NULL;
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
		if (!strcmp(rest[0], cmds[k].name))
			cmd = &cmds[k];
	if (!cmd) {
		fprintf(stderr, "allmctl: unknown command '%s' (see --help)\n", rest[0]);
		goto usage;
	}
	char err[512];
	struct allm_ctl_client_opts co = {.name = o.name, .runtime_dir = o.runtime_dir};
	struct allmctl_run run = {.o = &o, .json = json};
	if (allm_ctl_client_open(&co, &run.c, err, sizeof(err))) {
		fprintf(stderr, "allmctl: %s\n", err);
		free(rest);
		return ALLMCTL_EXIT_ERROR;
	}
	int rc = cmd->fn(&run, nrest, rest);
	allm_ctl_client_close(run.c);
	free(rest);
	return rc;
usage:
	free(rest);
	return ALLMCTL_EXIT_USAGE;
}
