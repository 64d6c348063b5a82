/* allm-gateway: an OpenAI-compatible HTTP server in front of one allm-engined
 * (DESIGN §9b). A separate process and an ordinary ring client of the engine, so a
 * slow HTTP peer never touches the step loop. Flags, logging, signals and the
 * order of start and shutdown live here; gateway.h maps the rest. */
#include "gateway.h"
#include "gw-ctl.h"
#include "gw-fields.h"

#include "common.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* On SIGTERM: how long requests in flight may take to finish before they are cut. */
#define GW_SHUTDOWN_S 10.0
/* Descriptors kept beyond --max-connections (listen, epoll, eventfds, rings, ZeroMQ). */
#define GW_FD_HEADROOM 64
/* API keys at most (--api-key, --api-key-file), and a key's longest line. */
#define GW_MAX_API_KEYS 1024
#define GW_API_KEY_MAX_LEN 512
/* A user may hold as many choices as the engine lets one client (its
 * --max-queued-per-client); what goes on the engine at once follows the engine's
 * batch (gw-users.c). */
#define GW_MAX_QUEUED_PER_USER 4096
/* --engine-timeout: /health says 503 after this long without a word from the engine. */
#define GW_ENGINE_TIMEOUT_S 10.0
/* --header-timeout: seconds for a request's line and headers (Apache's keep-alive
 * wait is 5 s; a slow mobile link sends headers well within this). */
#define GW_HEADER_TIMEOUT_S 10

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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: allm-gateway [--engine NAME] [--host 127.0.0.1] [--port 8000] [options]\n"
		"An OpenAI-compatible HTTP server for a running allm-engined (POST /v1/completions,\n"
		"POST /v1/chat/completions, GET /v1/models[/ID], POST /tokenize, POST /detokenize,\n"
		"/health, /metrics).\n"
		"  --engine NAME            the engine's --name (default \"default\")\n"
		"  --runtime-dir DIR        where the engine's sockets are (default as allm-engined)\n"
		"  --host ADDR              address to listen on (default 127.0.0.1)\n"
		"  --port N                 port (default 8000; 0: any free port, logged)\n"
		"  --api-key KEY            require \"Authorization: Bearer KEY\" on /v1/* (or set\n"
		"                           $ALLM_API_KEY); repeatable: each key is one user\n"
		"  --api-key-file FILE      more keys, one a line (# comments and blank lines skipped)\n"
		"  --metrics-api-key KEY    GET /metrics needs \"Authorization: Bearer KEY\"; also\n"
		"                           --metrics-api-key-file FILE, $ALLM_METRICS_API_KEY (argv is\n"
		"                           readable by every local user: prefer those). Without it,\n"
		"                           /metrics is open when no key is set at all, and needs the\n"
		"                           admin key when API or admin keys are set\n"
		"  --metrics-open           GET /metrics open to anyone even with keys set (logged)\n"
		"  --admin-api-key KEY      POST /reset_prefix_cache (drop every cached KV block no\n"
		"                           request holds) with \"Authorization: Bearer KEY\" (default: no\n"
		"                           such route: one user must not empty everyone's cache); also\n"
		"                           --admin-api-key-file FILE, $ALLM_ADMIN_API_KEY\n"
		"  --max-queued-per-user N  choices (prompts x n) one user may have waiting or running;\n"
		"                           more get 429 (default %d). A user is an API key when there\n"
		"                           are several, else the client's address\n"
		"  --max-inflight N         choices of all users on the engine at once; the rest wait\n"
		"                           here, where the user with the fewest on the engine goes\n"
		"                           next (default: the engine's --max-num-seqs, from its status)\n"
		"  --max-inflight-per-user N  ... of one user (default: 7/8 of --max-inflight, so that\n"
		"                           another user's request starts at once)\n"
		"  --engine-timeout S       /health answers 503 when the engine has said nothing for S\n"
		"                           seconds (it is probed when idle; default %g)\n"
		"  --max-connections N      open HTTP connections at most (default 512)\n"
		"  --max-connections-per-address N  ... from one client address (default: half of\n"
		"                           --max-connections; more are closed at once)\n"
		"  --timeout S              a client has S seconds to send a whole request, and a\n"
		"                           connection idle S seconds is closed (default 60)\n"
		"  --header-timeout S       ... and S seconds for a request's line and headers, from\n"
		"                           the connection or the previous answer (default %d): a\n"
		"                           peer that trickles headers holds its slot that long only\n"
		"  --max-body-bytes N       largest request body (default 4194304)\n"
		"  --model DIR|FILE.gguf    read the tokenizer and chat template from DIR or the\n"
		"                           GGUF file (default: what the engine serves, or its\n"
		"                           embedded model)\n"
		"  --served-model-name ID   the model id clients send (default: --model, else the\n"
		"                           engine's model)\n"
		"  --chat-template FILE     a chat template to use instead of the model's\n"
		"  --max-tokens-default N   max_tokens of a request that sets none (default: OpenAI's,\n"
		"                           16 for completions; for chat whatever room the context\n"
		"                           leaves, as vLLM: a \"hi\" may run to the context's end)\n"
		"  --allowed-origins LIST   CORS: origins a browser page may call from, comma-separated\n"
		"                           or \"*\" (default none: no CORS headers, preflights 403)\n"
		"  --allowed-headers LIST   CORS: request headers pages may send (default \"*\": any\n"
		"                           asked, Authorization included)\n"
		"  --allowed-methods LIST   CORS: methods (default \"*\": GET, POST, HEAD, OPTIONS)\n"
		"  --list-fields            print every request field and what this server does with\n"
		"                           it (applied, accepted-without-effect, refused), and exit\n"
		"  --threads N              HTTP threads (default: up to 4)\n"
		"  --log-level L            error, warn, info (default), debug\n",
		GW_MAX_QUEUED_PER_USER, GW_ENGINE_TIMEOUT_S, GW_HEADER_TIMEOUT_S);
}

/* Adds one API key (0, or -1 with a message). */
static int add_key(struct gw_opts *o, const char *k, const char *from)
{
	if (!*k || strlen(k) > GW_API_KEY_MAX_LEN) {
		fprintf(stderr, "allm-gateway: %s: an API key is 1..%d characters\n", from, GW_API_KEY_MAX_LEN);
		return -1;
	}
	if (o->n_api_keys == GW_MAX_API_KEYS) {
		fprintf(stderr, "allm-gateway: %s: more than %d API keys\n", from, GW_MAX_API_KEYS);
		return -1;
	}
	if (!o->api_keys && !(o->api_keys = calloc(GW_MAX_API_KEYS, sizeof(*o->api_keys))))
		return -1;
	o->api_keys[o->n_api_keys++] = k;
	return 0;
}

/* --api-key-file: one key a line; blank lines and lines starting with # are skipped
 * (the keys live as long as the process). */
static int read_key_file(struct gw_opts *o, const char *path)
{
	FILE *f = fopen(path, "re");
	char line[GW_API_KEY_MAX_LEN + 2];
	int n = 0;
	if (!f) {
		fprintf(stderr, "allm-gateway: --api-key-file %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (len && line[len - 1] != '\n' && !feof(f)) {
			fprintf(stderr, "allm-gateway: --api-key-file %s: a line longer than %d characters\n", path,
				GW_API_KEY_MAX_LEN);
			fclose(f);
			return -1;
		}
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		char *k = strdup(line);
		if (!k || add_key(o, k, path)) {
			free(k);
			fclose(f);
			return -1;
		}
		n++;
	}
	fclose(f);
	if (n == 0) {
		fprintf(stderr, "allm-gateway: --api-key-file %s holds no key\n", path);
		return -1;
	}
	return 0;
}

/* --admin-api-key-file, --metrics-api-key-file: the file's first line that is not
 * blank or a # comment (the key lives as long as the process). 0, or -1 said. */
static int read_one_key(const char *flag, const char *path, const char **ret)
{
	struct gw_opts tmp = {0};
	if (read_key_file(&tmp, path))
		return -1;
	if (tmp.n_api_keys != 1) {
		fprintf(stderr, "allm-gateway: %s %s: one key, not %d\n", flag, path, tmp.n_api_keys);
		return -1;
	}
	*ret = tmp.api_keys[0];
	free(tmp.api_keys);
	return 0;
}

/* $NAME as a key when set and not empty; too long is an error. */
static int env_key(const char *name, const char **ret)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	if (strlen(v) > GW_API_KEY_MAX_LEN) {
		fprintf(stderr, "allm-gateway: $%s: a key is 1..%d characters\n", name, GW_API_KEY_MAX_LEN);
		return -1;
	}
	*ret = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct gw_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	const char *env_api_key = getenv("ALLM_API_KEY");
	*o = (struct gw_opts){
		.engine = "default",
		.host = "127.0.0.1",
		.port = 8000,
		.max_queued_per_user = GW_MAX_QUEUED_PER_USER,
		.engine_timeout_s = GW_ENGINE_TIMEOUT_S,
		.max_connections = 512,
		.timeout_s = 60,
		.header_timeout_s = GW_HEADER_TIMEOUT_S,
		.max_body = 4u << 20,
		.threads = cpus > 4 ? 4 : cpus > 0 ? (int)cpus : 1,
		.log_level = ALLM_LOG_INFO,
		.test_pump_busy = getenv("ALLM_GW_TEST_PUMP_BUSY") && !strcmp(getenv("ALLM_GW_TEST_PUMP_BUSY"), "1"),
	};
	bool keys_given = false; /* flags replace $ALLM_API_KEY */
	if (env_key("ALLM_METRICS_API_KEY", &o->metrics_api_key) || env_key("ALLM_ADMIN_API_KEY", &o->admin_api_key))
		return -1;
	for (int i = 1; i < argc; i += 2) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t n;
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(f, "--list-fields")) {
			gw_fields_list(stdout);
			exit(0);
		}
		if (!strcmp(f, "--metrics-open")) { /* the one flag without a value */
			o->metrics_open = true;
			i--;
			continue;
		}
		if (!v) {
			fprintf(stderr, "allm-gateway: unknown flag or missing value: %s (see --help)\n", f);
			return -1;
		}
		if (!strcmp(f, "--engine") && *v && !strchr(v, '/') && strlen(v) <= 64) {
			o->engine = v;
		} else if (!strcmp(f, "--runtime-dir")) {
			o->runtime_dir = v;
		} else if (!strcmp(f, "--host") && *v) {
			o->host = v;
		} else if (!strcmp(f, "--port") && !parse_int(v, 0, 65535, &n)) {
			o->port = (int)n;
		} else if (!strcmp(f, "--api-key")) {
			if (add_key(o, v, "--api-key"))
				return -1;
			keys_given = true;
		} else if (!strcmp(f, "--api-key-file")) {
			if (read_key_file(o, v))
				return -1;
			keys_given = true;
		} else if (!strcmp(f, "--metrics-api-key") && *v) {
			o->metrics_api_key = v;
		} else if (!strcmp(f, "--metrics-api-key-file")) {
			if (read_one_key(f, v, &o->metrics_api_key))
				return -1;
		} else if (!strcmp(f, "--admin-api-key") && *v) {
			o->admin_api_key = v;
		} else if (!strcmp(f, "--admin-api-key-file")) {
			if (read_one_key(f, v, &o->admin_api_key))
				return -1;
		} else if (!strcmp(f, "--max-queued-per-user") && !parse_int(v, 1, 1 << 24, &n)) {
			o->max_queued_per_user = (int)n;
		} else if (!strcmp(f, "--max-inflight") && !parse_int(v, 1, 1 << 24, &n)) {
			o->max_inflight = (int)n;
		} else if (!strcmp(f, "--max-inflight-per-user") && !parse_int(v, 1, 1 << 24, &n)) {
			o->max_inflight_per_user = (int)n;
		} else if (!strcmp(f, "--engine-timeout") && !parse_int(v, 1, 86400, &n)) {
			o->engine_timeout_s = (double)n;
		} else if (!strcmp(f, "--max-connections") && !parse_int(v, 1, 1 << 20, &n)) {
			o->max_connections = (int)n;
		} else if (!strcmp(f, "--max-connections-per-address") && !parse_int(v, 1, 1 << 20, &n)) {
			o->max_conns_per_addr = (int)n;
		} else if (!strcmp(f, "--timeout") && !parse_int(v, 1, 86400, &n)) {
			o->timeout_s = (int)n;
		} else if (!strcmp(f, "--header-timeout") && !parse_int(v, 1, 86400, &n)) {
			o->header_timeout_s = (int)n;
		} else if (!strcmp(f, "--max-tokens-default") && !parse_int(v, 1, INT32_MAX, &n)) {
			o->max_tokens_default = (int32_t)n;
		} else if (!strcmp(f, "--allowed-origins") && *v) {
			o->cors.origins = v;
		} else if (!strcmp(f, "--allowed-headers") && *v) {
			o->cors.headers = v;
		} else if (!strcmp(f, "--allowed-methods") && *v) {
			o->cors.methods = v;
		} else if (!strcmp(f, "--max-body-bytes") && !parse_int(v, 1024, 1 << 30, &n)) {
			o->max_body = (size_t)n;
		} else if (!strcmp(f, "--model")) {
			o->model_dir = v;
		} else if (!strcmp(f, "--served-model-name") && *v && strlen(v) < 200) {
			o->served_name = v;
		} else if (!strcmp(f, "--chat-template")) {
			o->chat_template = v;
		} else if (!strcmp(f, "--threads") && !parse_int(v, 1, 64, &n)) {
			o->threads = (int)n;
		} else if (!strcmp(f, "--log-level")) {
			if (allm_log_level_parse(v, &o->log_level)) {
				fprintf(stderr, "allm-gateway: --log-level: error, warn, info or debug\n");
				return -1;
			}
		} else {
			fprintf(stderr, "allm-gateway: unknown flag or bad value: %s %s (see --help)\n", f, v);
			return -1;
		}
	}
	if (!keys_given && env_api_key && *env_api_key && add_key(o, env_api_key, "$ALLM_API_KEY"))
		return -1;
	if (!o->max_conns_per_addr)
		o->max_conns_per_addr = o->max_connections > 1 ? o->max_connections / 2 : 1;
	return 0;
}

/* Each connection is a descriptor: raise the soft limit as far as the hard one
 * allows, and lower --max-connections to what fits. */
static void fit_fd_limit(struct gw *gw)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)gw->o.max_connections + GW_FD_HEADROOM;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < want) {
		int fit = rl.rlim_cur > GW_FD_HEADROOM + 1 ? (int)(rl.rlim_cur - GW_FD_HEADROOM) : 1;
		gw_log(gw, ALLM_LOG_WARN, "--max-connections %d lowered to %d: only %llu descriptors allowed",
		       gw->o.max_connections, fit, (unsigned long long)rl.rlim_cur);
		gw->o.max_connections = fit;
	}
}

/* Waits for requests in flight to end, up to deadline (allm_now()); a second
 * signal ends the wait. */
static void wait_idle(struct gw *gw, const sigset_t *sigs, double deadline)
{
	while (gw_engine_live(gw) > 0 && allm_now() < deadline) {
		struct timespec ts = {0, 50 * 1000 * 1000};
		if (sigtimedwait(sigs, NULL, &ts) > 0) {
			gw_log(gw, ALLM_LOG_WARN, "second signal: stopping now");
			return;
		}
	}
}

int main(int argc, char **argv)
{
	static struct gw gw;
	sigset_t sigs;
	int sig = 0;
	if (parse_args(argc, argv, &gw.o))
		return 2;
	gw.quiesced_fd = -1;
	gw.engine_created = (long long)time(NULL); /* until the engine's status says */
	if (getrandom(gw.cache_secret, sizeof(gw.cache_secret), 0) != (ssize_t)sizeof(gw.cache_secret)) {
		fprintf(stderr, "allm-gateway: getrandom: %s\n", strerror(errno));
		return 1;
	}
	pthread_mutex_init(&gw.lock, NULL);
	pthread_mutex_init(&gw.ctl_lock, NULL);
	pthread_cond_init(&gw.ctl_cond, NULL); /* before the pump, which kicks it (gw_ctl_kick) */
	pthread_mutex_init(&gw.conns_lock, NULL);
	/* signals go to this thread only (sigwait below); the others inherit the mask */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	fit_fd_limit(&gw);
	if (gw.o.model_dir || gw.o.chat_template) {
		/* the model named here is known before any engine is */
		if (gw.o.model_dir && gw_model_load(&gw.o, NULL, &gw.model))
			return 1;
		if (gw.model)
			gw_log(&gw, ALLM_LOG_INFO, "model %s: tokenizer %s; chat: %s", gw.model->id, gw.model->source,
			       gw.model->tmpl ? allm_chat_template_name(gw.model->tmpl) : gw.model->why_no_chat);
	}
	if (gw_engine_start(&gw) || gw_conns_start(&gw) || gw_ctl_start(&gw) || gw_http_start(&gw)) {
		gw_log(&gw, ALLM_LOG_ERROR, "cannot start");
		return 1;
	}
	gw_log(&gw, ALLM_LOG_INFO, "listening on http://%s:%d (engine '%s', %d threads, at most %d connections, "
		       "idle timeout %d s%s%s)",
	       gw.o.host, gw.port, gw.o.engine, gw.o.threads, gw.o.max_connections, gw.o.timeout_s,
	       gw.o.n_api_keys ? ", API key required" : "", gw.o.metrics_api_key ? ", /metrics key required" : "");
	/* who may read the engine's figures (prefix-cache counters, queues), loudly */
	bool any_key = gw.o.n_api_keys || gw.o.admin_api_key;
	if (gw.o.metrics_open || (!gw.o.metrics_api_key && !any_key))
		gw_log(&gw, ALLM_LOG_WARN, "GET /metrics is open to anyone who can reach this port%s",
		       gw.o.metrics_open ? " (--metrics-open)" : " (no key is set; --metrics-api-key-file FILE closes it)");
	else if (!gw.o.metrics_api_key)
		gw_log(&gw, ALLM_LOG_INFO, "GET /metrics takes the admin key (no --metrics-api-key)");
	while (sigwait(&sigs, &sig))
		;
	gw_log(&gw, ALLM_LOG_INFO, "%s: no new requests; finishing those in flight (at most %.0f s)",
	       strsignal(sig), GW_SHUTDOWN_S);
	pthread_mutex_lock(&gw.lock);
	atomic_store(&gw.stopping, true);
	pthread_mutex_unlock(&gw.lock);
	gw_http_quiesce(&gw);
	wait_idle(&gw, &sigs, allm_now() + GW_SHUTDOWN_S);
	gw_engine_abort(&gw);
	wait_idle(&gw, &sigs, allm_now() + 2);
	gw_engine_stop(&gw);
	gw_ctl_stop(&gw); /* answers the scrapes still suspended */
	gw_http_stop(&gw);
	gw_conns_stop(&gw);
	gw_model_unref(gw.model);
	gw_log(&gw, ALLM_LOG_INFO, "stopped");
	return 0;
}
