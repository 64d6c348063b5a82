/* allmctl's subcommands: one control-plane call each (drain also polls status,
 * watch reads telemetry), printed for people or, with --json, as one JSON object. */
#include "allmctl.h"

#include "ctl-prom.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int usage_err(const char *fmt, const char *arg)
{
	fprintf(stderr, "allmctl: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see --help)\n");
	return ALLMCTL_EXIT_USAGE;
}

static void print_json(const msgpack_object *o)
{
	char *s = allm_ctl_to_json(o, true);
	if (s) {
		puts(s);
		free(s);
	} else {
		puts("{}");
	}
	fflush(stdout);
}

/* Calls cmd; on success prints the result as JSON when --json and hands it back. */
static int call(struct allmctl_run *r, const char *cmd, const struct allm_ctl_enc *args,
		struct allm_ctl_msg **ret)
{
	int e = allm_ctl_call(r->c, cmd, args ? args->sb.data : NULL, args ? args->sb.size : 0,
			      r->o->timeout_ms, ret);
	if (e)
		return allmctl_fail(r, cmd, e);
	return 0;
}

/* --- status ---------------------------------------------------------------------- */

static int64_t gi(const msgpack_object *m, const char *path)
{
	int64_t v = -1;
	allm_ctl_get_int(m, path, &v);
	return v;
}

static double gd(const msgpack_object *m, const char *path)
{
	double v = NAN;
	allm_ctl_get_double(m, path, &v);
	return v;
}

static bool gb(const msgpack_object *m, const char *path)
{
	bool v = false;
	allm_ctl_get_bool(m, path, &v);
	return v;
}

static const char *gs(const msgpack_object *m, const char *path, char *buf, size_t cap)
{
	int r = allm_ctl_get_strbuf(m, path, buf, cap);
	if (r && r != -ENOSPC) /* a truncated string is still worth showing */
		snprintf(buf, cap, "?");
	return buf;
}

/* "12.3" or "-" for a missing sample */
static const char *num(double v, char *buf, size_t cap)
{
	if (isfinite(v))
		snprintf(buf, cap, "%.3g", v);
	else
		snprintf(buf, cap, "-");
	return buf;
}

static void print_pcts(const msgpack_object *m, const char *label, const char *key)
{
	char p[4][32], path[64];
	static const char *const q[] = {"p50", "p90", "p99", "mean"};
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s.%s", key, q[i]);
		num(gd(m, path), p[i], sizeof(p[i]));
	}
	printf("%-12s p50 %s  p90 %s  p99 %s  mean %s\n", label, p[0], p[1], p[2], p[3]);
}

static void print_status(const msgpack_object *m)
{
	char a[4200], b[256], c[64], d[64], e[64];
	printf("%-12s %s (pid %lld): %s, up %.1f s\n", "engine", gs(m, "name", b, sizeof(b)),
	       (long long)gi(m, "pid"), gs(m, "state", c, sizeof(c)), gd(m, "uptime_s"));
	printf("%-12s %s\n", "model", gs(m, "model", a, sizeof(a)));
	printf("%-12s %s\n", "device", gs(m, "device", b, sizeof(b)));
	printf("%-12s preempt %s, sched %s, max_wait_factor %g, admit_overcommit %g\n", "policy",
	       gs(m, "policy.preempt", c, sizeof(c)), gs(m, "policy.sched", d, sizeof(d)),
	       gd(m, "policy.max_wait_factor"), gd(m, "policy.admit_overcommit"));
	printf("%-12s max_num_seqs %lld, max_num_batched_tokens %lld\n", "limits",
	       (long long)gi(m, "limits.max_num_seqs"), (long long)gi(m, "limits.max_num_batched_tokens"));
	printf("%-12s waiting %lld, running %lld, swapped %lld\n", "queues",
	       (long long)gi(m, "queues.waiting"), (long long)gi(m, "queues.running"),
	       (long long)gi(m, "queues.swapped"));
	printf("%-12s gpu %lld/%lld used, cpu %lld/%lld used", "blocks",
	       (long long)gi(m, "blocks.gpu.used"), (long long)gi(m, "blocks.gpu.total"),
	       (long long)gi(m, "blocks.cpu.used"), (long long)gi(m, "blocks.cpu.total"));
	if (gi(m, "blocks.disk.total") > 0)
		printf(", disk %lld/%lld used", (long long)gi(m, "blocks.disk.used"),
		       (long long)gi(m, "blocks.disk.total"));
	printf(" (block size %lld)\n", (long long)gi(m, "block_size"));
	printf("%-12s swap %lld, recompute %lld (swapped out %lld B, in %lld B; recomputed %lld tokens)\n",
	       "preemptions", (long long)gi(m, "preemptions.swap"),
	       (long long)gi(m, "preemptions.recompute"), (long long)gi(m, "swapped_bytes.out"),
	       (long long)gi(m, "swapped_bytes.in"), (long long)gi(m, "recomputed_tokens"));
	if (gi(m, "blocks.disk.total") > 0)
		printf("%-12s swaps %lld (written %lld B, read %lld B), demotions %lld, fallbacks %lld, "
		       "MAPE %s %%\n",
		       "disk", (long long)gi(m, "preemptions.disk"), (long long)gi(m, "disk_bytes.write"),
		       (long long)gi(m, "disk_bytes.read"), (long long)gi(m, "disk_bytes.demotions"),
		       (long long)gi(m, "disk_bytes.fallbacks"),
		       num(gd(m, "predictor_mape.disk"), a, sizeof(a)));
	{
		int64_t q = gi(m, "prefix_cache.queried_tokens"), h = gi(m, "prefix_cache.hit_tokens");
		printf("%-12s %s: %lld of %lld prompt tokens hit (%.1f %%: device %lld, host %lld, disk %lld); cached "
		       "blocks device %lld, host %lld, disk %lld; restored %lld tokens, recomputed %lld\n",
		       "prefix cache", gb(m, "prefix_cache.enabled") ? "on" : "off", (long long)h, (long long)q,
		       q > 0 ? 100.0 * (double)h / (double)q : 0.0, (long long)gi(m, "prefix_cache.hit_tokens_by_tier.device"),
		       (long long)gi(m, "prefix_cache.hit_tokens_by_tier.host"),
		       (long long)gi(m, "prefix_cache.hit_tokens_by_tier.disk"),
		       (long long)gi(m, "prefix_cache.cached_blocks.device"), (long long)gi(m, "prefix_cache.cached_blocks.host"),
		       (long long)gi(m, "prefix_cache.cached_blocks.disk"), (long long)gi(m, "prefix_cache.restored_tokens"),
		       (long long)gi(m, "prefix_cache.recomputed_cached_tokens"));
	}
	printf("%-12s decode %lld, mixed %lld, prefill %lld (chunked prefill %s); wasted prefill %lld tokens\n",
	       "steps", (long long)gi(m, "steps.decode"), (long long)gi(m, "steps.mixed"),
	       (long long)gi(m, "steps.prefill"), gb(m, "policy.chunked_prefill") ? "on" : "off",
	       (long long)gi(m, "wasted_prefill_tokens"));
	printf("%-12s prompt %lld, generated %lld; requests finished %lld, failed %lld\n", "tokens",
	       (long long)gi(m, "tokens.prompt"), (long long)gi(m, "tokens.generated"),
	       (long long)gi(m, "requests.finished"), (long long)gi(m, "requests.failed"));
	printf("%-12s %s tok/s (generated %s tok/s)\n", "throughput",
	       num(gd(m, "throughput_tok_s"), c, sizeof(c)), num(gd(m, "gen_throughput_tok_s"), d, sizeof(d)));
	print_pcts(m, "ttft_ms", "ttft_ms");
	print_pcts(m, "tpot_ms", "tpot_ms");
	print_pcts(m, "e2e_ms", "e2e_ms");
	printf("%-12s %s (mean weighted turnaround)\n", "turnaround",
	       num(gd(m, "mean_weighted_turnaround"), c, sizeof(c)));
	printf("%-12s MAPE swap %s %%, recompute %s %%\n", "predictors",
	       num(gd(m, "predictor_mape.swap"), d, sizeof(d)),
	       num(gd(m, "predictor_mape.recompute"), e, sizeof(e)));
	printf("%-12s MAPE swap %s %%, recompute %s %% over %lld measured; regret %lld\n", "decisions",
	       num(gd(m, "decision_mape.swap"), d, sizeof(d)), num(gd(m, "decision_mape.recompute"), e, sizeof(e)),
	       (long long)gi(m, "decision_mape.measured"), (long long)gi(m, "decision_mape.regret"));
	printf("%-12s %lld\n", "clients", (long long)gi(m, "clients"));
}

int allmctl_cmd_status(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_msg *m = NULL;
	if (argc > 1)
		return usage_err("status takes no arguments, got '%s'", argv[1]);
	int rc = call(r, "status", NULL, &m);
	if (rc)
		return rc;
	if (r->json)
		print_json(m->result);
	else
		print_status(m->result);
	allm_ctl_msg_free(m);
	return 0;
}

/* --- set ------------------------------------------------------------------------- */

int allmctl_cmd_set(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_enc args;
	struct allm_ctl_msg *m = NULL;
	if (argc < 2)
		return usage_err("%s needs KEY=VALUE arguments", "set");
	if (argc - 1 > 16)
		return usage_err("%s takes at most 16 KEY=VALUE arguments", "set");
	for (int i = 1; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i] || !eq[1])
			return usage_err("set: '%s' is not KEY=VALUE", argv[i]);
	}
	/* every value goes as a string: the engine parses and validates them all */
	allm_ctl_enc_init(&args);
	allm_ctl_enc_map(&args, (uint32_t)(argc - 1));
	for (int i = 1; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		allm_ctl_enc_strn(&args, argv[i], (size_t)(eq - argv[i]));
		allm_ctl_enc_str(&args, eq + 1);
	}
	int rc = args.err ? ALLMCTL_EXIT_ERROR : call(r, "set", &args, &m);
	allm_ctl_enc_free(&args);
	if (rc)
		return rc;
	if (r->json) {
		print_json(m->result);
	} else {
		const msgpack_object *ch;
		if (!allm_ctl_get_array(m->result, "changed", &ch))
			for (uint32_t i = 0; i < ch->via.array.size; i++) {
				const msgpack_object *e = &ch->via.array.ptr[i];
				char k[64], o[64], n[64];
				char *os = allm_ctl_to_json(allm_ctl_get(e, "old"), false);
				char *ns = allm_ctl_to_json(allm_ctl_get(e, "new"), false);
				gs(e, "key", k, sizeof(k));
				/* strings without their quotes: "gpu_blocks: 128 -> 64" */
				snprintf(o, sizeof(o), "%s", os ? os : "?");
				snprintf(n, sizeof(n), "%s", ns ? ns : "?");
				allm_ctl_get_strbuf(e, "old", o, sizeof(o));
				allm_ctl_get_strbuf(e, "new", n, sizeof(n));
				printf("%s: %s -> %s\n", k, o, n);
				free(os);
				free(ns);
			}
	}
	allm_ctl_msg_free(m);
	return 0;
}

/* --- calibrate, reset-stats, resume, shutdown ----------------------------------- */

int allmctl_cmd_simple(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_msg *m = NULL;
	if (argc > 1)
		return usage_err("unexpected argument '%s'", argv[1]);
	if (!strcmp(argv[0], "calibrate") && !r->json)
		fprintf(stderr, "allmctl: calibrating (the engine serves nothing meanwhile)...\n");
	int rc = call(r, argv[0], NULL, &m);
	if (rc)
		return rc;
	if (r->json) {
		print_json(m->result);
	} else if (!strcmp(argv[0], "calibrate")) {
		char *s = allm_ctl_to_json(m->result, true);
		printf("calibrated: %s\n", s ? s : "");
		free(s);
	} else if (!strcmp(argv[0], "shutdown")) {
		printf("shutting down: %lld requests in flight will finish first\n",
		       (long long)gi(m->result, "in_flight"));
	} else {
		printf("ok\n");
	}
	allm_ctl_msg_free(m);
	return 0;
}

/* --- cache reset ------------------------------------------------------------------ */

int allmctl_cmd_cache(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_msg *m = NULL;
	if (argc != 2 || strcmp(argv[1], "reset"))
		return usage_err("%s", "cache takes one word: reset");
	int rc = call(r, "cache-reset", NULL, &m);
	if (rc)
		return rc;
	if (r->json)
		print_json(m->result);
	else
		printf("dropped %lld cached blocks (those in use stay)\n", (long long)gi(m->result, "dropped_blocks"));
	allm_ctl_msg_free(m);
	return 0;
}

/* --- metrics --------------------------------------------------------------------- */

/* Prometheus text, the same bytes allm-gateway serves at GET /metrics (one renderer,
 * ctl-prom.c); --json prints the reply's families instead. */
int allmctl_cmd_metrics(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_msg *m = NULL;
	char err[256], *text = NULL;
	size_t len = 0;
	if (argc > 1)
		return usage_err("unexpected argument '%s'", argv[1]);
	int rc = call(r, "metrics", NULL, &m);
	if (rc)
		return rc;
	if (r->json) {
		print_json(m->result);
	} else if (allm_ctl_prom_render(m->result, &text, &len, err, sizeof(err))) {
		fprintf(stderr, "allmctl: metrics: %s\n", err);
		rc = ALLMCTL_EXIT_ERROR;
	} else {
		fwrite(text, 1, len, stdout);
		fflush(stdout);
	}
	free(text);
	allm_ctl_msg_free(m);
	return rc;
}

/* --- requests, cancel ------------------------------------------------------------ */

int allmctl_cmd_requests(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_enc args;
	struct allm_ctl_msg *m = NULL;
	long limit = -1;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--limit") || i + 1 == argc)
			return usage_err("requests: unexpected argument '%s'", argv[i]);
		limit = strtol(argv[++i], &end, 10);
		if (*end || limit < 1 || limit > 10000)
			return usage_err("requests: --limit must be 1..10000, got '%s'", argv[i]);
	}
	allm_ctl_enc_init(&args);
	allm_ctl_enc_map(&args, limit > 0);
	if (limit > 0)
		allm_ctl_enc_kint(&args, "limit", limit);
	int rc = call(r, "requests", &args, &m);
	allm_ctl_enc_free(&args);
	if (rc)
		return rc;
	if (r->json) {
		print_json(m->result);
		allm_ctl_msg_free(m);
		return 0;
	}
	const msgpack_object *v;
	printf("%8s %6s %-8s %7s %7s %7s %9s %5s %5s %7s %8s\n", "ID", "CLIENT", "STATE", "PROMPT",
	       "GEN", "LENGTH", "PRIORITY", "GPU", "CPU", "PREEMPT", "AGE_S");
	if (!allm_ctl_get_array(m->result, "requests", &v))
		for (uint32_t i = 0; i < v->via.array.size; i++) {
			const msgpack_object *q = &v->via.array.ptr[i];
			char st[16];
			printf("%8lld %6lld %-8s %7lld %7lld %7lld %9.4f %5lld %5lld %7lld %8.2f\n",
			       (long long)gi(q, "id"), (long long)gi(q, "client"),
			       gs(q, "state", st, sizeof(st)), (long long)gi(q, "prompt_tokens"),
			       (long long)gi(q, "generated"), (long long)gi(q, "length"),
			       gd(q, "priority"), (long long)gi(q, "blocks_gpu"),
			       (long long)gi(q, "blocks_cpu"), (long long)gi(q, "preemptions"),
			       gd(q, "age_s"));
		}
	bool trunc = false;
	allm_ctl_get_bool(m->result, "truncated", &trunc);
	if (trunc)
		printf("(truncated: more requests than --limit)\n");
	allm_ctl_msg_free(m);
	return 0;
}

int allmctl_cmd_cancel(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_enc args;
	struct allm_ctl_msg *m = NULL;
	char *end;
	if (argc != 2)
		return usage_err("%s needs exactly one request ID", "cancel");
	long long id = strtoll(argv[1], &end, 10);
	if (*end || end == argv[1] || id < 0)
		return usage_err("cancel: '%s' is not a request id", argv[1]);
	allm_ctl_enc_init(&args);
	allm_ctl_enc_map(&args, 1);
	allm_ctl_enc_kint(&args, "id", id);
	int rc = call(r, "cancel", &args, &m);
	allm_ctl_enc_free(&args);
	if (rc)
		return rc;
	if (r->json)
		print_json(m->result);
	else
		printf("cancelled request %lld\n", (long long)gi(m->result, "id"));
	allm_ctl_msg_free(m);
	return 0;
}

/* --- drain ----------------------------------------------------------------------- */

int allmctl_cmd_drain(struct allmctl_run *r, int argc, char **argv)
{
	struct allm_ctl_msg *m = NULL;
	bool wait = true;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--no-wait"))
			return usage_err("drain: unexpected argument '%s'", argv[i]);
		wait = false;
	}
	int rc = call(r, "drain", NULL, &m);
	if (rc)
		return rc;
	int64_t left = gi(m->result, "in_flight"), shown = -1;
	allm_ctl_msg_free(m);
	m = NULL;
	while (wait && left > 0) {
		if (left != shown)
			fprintf(stderr, "allmctl: draining: %lld requests in flight\n", (long long)left);
		shown = left;
		struct timespec ts = {0, 200 * 1000000};
		nanosleep(&ts, NULL);
		if ((rc = call(r, "status", NULL, &m)))
			return rc;
		left = gi(m->result, "queues.waiting") + gi(m->result, "queues.running") +
		       gi(m->result, "queues.swapped");
		allm_ctl_msg_free(m);
		m = NULL;
	}
	if (r->json)
		printf("{\"in_flight\": %lld, \"drained\": %s}\n", (long long)left,
		       left == 0 ? "true" : "false");
	else if (left == 0)
		printf("drained: no requests in flight; new ones are refused until 'allmctl resume'\n");
	else
		printf("draining: %lld requests in flight; new ones are refused\n", (long long)left);
	return 0;
}

/* --- watch ----------------------------------------------------------------------- */

static volatile sig_atomic_t g_stop;

static void on_sigint(int sig)
{
	g_stop = 1;
}

int allmctl_cmd_watch(struct allmctl_run *r, int argc, char **argv)
{
	const char *topics[8];
	int nt = 0;
	long count = -1;
	double duration = -1;
	bool want_stats = false;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (!strcmp(argv[i], "--count") && i + 1 < argc) {
			count = strtol(argv[++i], &end, 10);
			if (*end || count < 1)
				return usage_err("watch: --count must be >= 1, got '%s'", argv[i]);
		} else if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
			duration = strtod(argv[++i], &end);
			if (*end || !(duration > 0))
				return usage_err("watch: --duration must be > 0 s, got '%s'", argv[i]);
		} else if (argv[i][0] == '-') {
			return usage_err("watch: unexpected argument '%s'", argv[i]);
		} else if (nt == 6) {
			return usage_err("watch: too many topics at '%s'", argv[i]);
		} else {
			topics[nt++] = !strcmp(argv[i], "all") ? "" : argv[i];
			want_stats |= !strcmp(argv[i], "stats") || !strcmp(argv[i], "all");
		}
	}
	if (nt == 0)
		return usage_err("%s needs a topic (stats, decision, request, calibrate, all)", "watch");
	/* stats always: its first message (10 Hz) proves the subscription is live,
	 * which scripts wait for ("watching" on stderr) before they act */
	topics[nt++] = "stats";
	topics[nt] = NULL;
	char err[512];
	struct allm_ctl_client *c;
	struct allm_ctl_client_opts co = {.name = r->o->name, .runtime_dir = r->o->runtime_dir,
					  .topics = topics};
	if (allm_ctl_client_open(&co, &c, err, sizeof(err))) {
		fprintf(stderr, "allmctl: %s\n", err);
		return ALLMCTL_EXIT_ERROR;
	}
	struct sigaction sa = {.sa_handler = on_sigint};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool live = false;
	long seen = 0;
	int rc = 0;
	while (!g_stop && (count < 0 || seen < count)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		double el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
		if (duration > 0 && el >= duration)
			break;
		int wait_ms = live ? 200 : r->o->timeout_ms;
		struct allm_ctl_msg *m = NULL;
		int e = allm_ctl_recv(c, wait_ms, &m);
		if (e == -EAGAIN && !live) {
			fprintf(stderr, "allmctl: no telemetry on %s within %d ms — is allm-engined --name %s running?\n",
				allm_ctl_client_pub_endpoint(c), r->o->timeout_ms, r->o->name);
			rc = ALLMCTL_EXIT_TIMEOUT;
			break;
		}
		if (e == -EAGAIN || e == -EINTR)
			continue;
		if (e) {
			fprintf(stderr, "allmctl: %s\n", allm_ctl_client_error(c));
			continue;
		}
		if (!live) {
			live = true;
			fprintf(stderr, "allmctl: watching\n");
		}
		if (strcmp(m->topic, "stats") || want_stats) {
			char *s = allm_ctl_to_json(m->root, false);
			if (r->json)
				printf("{\"topic\": \"%s\", \"body\": %s}\n", m->topic, s ? s : "null");
			else
				printf("%s %s\n", m->topic, s ? s : "null");
			fflush(stdout);
			free(s);
			seen++;
		}
		allm_ctl_msg_free(m);
	}
	allm_ctl_client_close(c);
	return rc;
}
