/* allm-gateway: an OpenAI-compatible HTTP server in front of one allm-engined
 * (DESIGN §9b). A separate process and an ordinary ring client of the engine, so a
 * slow HTTP peer never touches the step loop. Flags, logging, signals and the
 * order of start and shutdown live here, out of the library (liballm-gateway,
 * engined/gateway/); gateway.h maps the rest. */
#include "gw-ctl.h"
#include "gw-fields.h"
#include "gw-http.h"
#include "gw-pump.h"

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

/* The flags (gw-opts.c's table) over the environment, read here once. */
static int parse_args(int argc, char **argv, struct gw_opts *o)
{
	const char *busy = getenv("ALLM_GW_TEST_PUMP_BUSY");
	struct gw_env env = {
		.api_key = getenv("ALLM_API_KEY"),
		.metrics_api_key = getenv("ALLM_METRICS_API_KEY"),
		.admin_api_key = getenv("ALLM_ADMIN_API_KEY"),
		.test_pump_busy = busy && !strcmp(busy, "1"),
	};
	char err[512];
	if (gw_opts_parse(o, argc, argv, &env, err, sizeof(err))) {
		fprintf(stderr, "allm-gateway: %s\n", err);
		return -1;
	}
	if (o->help) {
		gw_opts_usage(stdout);
		exit(0);
	}
	if (o->list_fields) {
		gw_fields_list(stdout);
		exit(0);
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
	gw_opts_free(&gw.o);
	gw_log(&gw, ALLM_LOG_INFO, "stopped");
	return 0;
}
