/* allm-gateway: an OpenAI-compatible HTTP server in front of one allm-engined
 * (DESIGN §9b). A separate process and an ordinary ring client of the engine, so a
 * slow HTTP peer never touches the step loop. Flags, logging, signals and the
 * order of start and shutdown live here; gateway.h maps the rest. */
#include "gateway.h"

#include "common.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* On SIGTERM: how long requests in flight may take to finish before they are cut. */
#define GW_SHUTDOWN_S 10.0
/* Descriptors kept beyond --max-connections (listen, epoll, eventfds, rings, ZeroMQ). */
#define GW_FD_HEADROOM 64

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
		"POST /v1/chat/completions, GET /v1/models, /health, /metrics).\n"
		"  --engine NAME            the engine's --name (default \"default\")\n"
		"  --runtime-dir DIR        where the engine's sockets are (default as allm-engined)\n"
		"  --host ADDR              address to listen on (default 127.0.0.1)\n"
		"  --port N                 port (default 8000; 0: any free port, logged)\n"
		"  --api-key KEY            require \"Authorization: Bearer KEY\" on /v1/* (or set\n"
		"                           $ALLM_API_KEY)\n"
		"  --max-connections N      open HTTP connections at most (default 512)\n"
		"  --timeout S              a client has S seconds to send a whole request, and a\n"
		"                           connection idle S seconds is closed (default 60)\n"
		"  --max-body-bytes N       largest request body (default 4194304)\n"
		"  --model DIR|FILE.gguf    read the tokenizer and chat template from DIR or the\n"
		"                           GGUF file (default: what the engine serves, or its\n"
		"                           embedded model)\n"
		"  --served-model-name ID   the model id clients send (default: --model, else the\n"
		"                           engine's model)\n"
		"  --chat-template FILE     a chat template to use instead of the model's\n"
		"  --threads N              HTTP threads (default: up to 4)\n"
		"  --log-level L            error, warn, info (default), debug\n");
}

static int parse_args(int argc, char **argv, struct gw_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	*o = (struct gw_opts){
		.engine = "default",
		.host = "127.0.0.1",
		.port = 8000,
		.api_key = getenv("ALLM_API_KEY"),
		.max_connections = 512,
		.timeout_s = 60,
		.max_body = 4u << 20,
		.threads = cpus > 4 ? 4 : cpus > 0 ? (int)cpus : 1,
		.log_level = 2,
	};
	if (o->api_key && !*o->api_key)
		o->api_key = NULL;
	for (int i = 1; i < argc; i += 2) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t n;
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			exit(0);
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
		} else if (!strcmp(f, "--api-key") && *v) {
			o->api_key = v;
		} else if (!strcmp(f, "--max-connections") && !parse_int(v, 1, 1 << 20, &n)) {
			o->max_connections = (int)n;
		} else if (!strcmp(f, "--timeout") && !parse_int(v, 1, 86400, &n)) {
			o->timeout_s = (int)n;
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
			static const char *const lv[] = {"error", "warn", "info", "debug"};
			o->log_level = -1;
			for (int l = 0; l < 4; l++)
				if (!strcmp(v, lv[l]))
					o->log_level = l;
			if (o->log_level < 0) {
				fprintf(stderr, "allm-gateway: --log-level: error, warn, info or debug\n");
				return -1;
			}
		} else {
			fprintf(stderr, "allm-gateway: unknown flag or bad value: %s %s (see --help)\n", f, v);
			return -1;
		}
	}
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
		gw_log(gw, 1, "--max-connections %d lowered to %d: only %llu descriptors allowed",
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
			gw_log(gw, 1, "second signal: stopping now");
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
	pthread_mutex_init(&gw.lock, NULL);
	pthread_mutex_init(&gw.ctl_lock, NULL);
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
			gw_log(&gw, 2, "model %s: tokenizer %s; chat: %s", gw.model->id, gw.model->source,
			       gw.model->tmpl ? allm_chat_template_name(gw.model->tmpl) : gw.model->why_no_chat);
	}
	if (gw_engine_start(&gw) || gw_conns_start(&gw) || gw_http_start(&gw)) {
		gw_log(&gw, 0, "cannot start");
		return 1;
	}
	gw_log(&gw, 2, "listening on http://%s:%d (engine '%s', %d threads, at most %d connections, "
		       "idle timeout %d s%s)",
	       gw.o.host, gw.port, gw.o.engine, gw.o.threads, gw.o.max_connections, gw.o.timeout_s,
	       gw.o.api_key ? ", API key required" : "");
	while (sigwait(&sigs, &sig))
		;
	gw_log(&gw, 2, "%s: no new requests; finishing those in flight (at most %.0f s)",
	       strsignal(sig), GW_SHUTDOWN_S);
	pthread_mutex_lock(&gw.lock);
	gw.stopping = true;
	pthread_mutex_unlock(&gw.lock);
	gw_http_quiesce(&gw);
	wait_idle(&gw, &sigs, allm_now() + GW_SHUTDOWN_S);
	gw_engine_abort(&gw);
	wait_idle(&gw, &sigs, allm_now() + 2);
	gw_engine_stop(&gw);
	gw_http_stop(&gw);
	gw_conns_stop(&gw);
	gw_model_unref(gw.model);
	gw_log(&gw, 2, "stopped");
	return 0;
}
