/* The gateway's control-plane thread: it alone talks to the engine's control
 * server (liballm-ctl, one ZeroMQ socket, one caller at a time), for two jobs.
 *
 * GET /metrics: the connection is suspended and queued here; one `metrics` call
 * answers every scrape queued when it starts. A call used to run on the HTTP
 * thread itself, so with the engine stopped (SIGSTOP) eight scrapers held every
 * HTTP thread for their 2 s timeouts and /health and 401s went unanswered (issue
 * 37 item 5); now a frozen engine costs a suspended connection, not a thread.
 *
 * POST /reset_prefix_cache (with --admin-api-key): queued the same way, one
 * `cache-reset` call for the resets queued when it starts.
 *
 * The engine's liveness: the pump notes each event from the engine; when it has
 * said nothing for a while (idle, or frozen) this thread asks for its
 * `status`. /health answers 503 once neither has been heard for --engine-timeout,
 * and /metrics then fails at once instead of waiting for another timeout.
 *
 * The engine's state: the same `status`, asked at least once per probe period
 * even while the engine talks, says whether it is drained (`allmctl drain`):
 * /health then answers 503, so a load balancer stops sending new requests while
 * those in flight finish (DESIGN §14).
 *
 * The engine's batch: after each connection its `status` says its max_num_seqs,
 * which sizes what the gateway keeps on the engine (gw-users.c) unless the
 * flags say; its uptime dates /v1/models' `created`.
 *
 * /metrics never waits on the engine's step (issue 49 item 8: a heavy prefill
 * held it at 503 for 20 s): once scraped, this thread keeps the engine's figures
 * fresh (a `metrics` call each probe period while scrapes keep coming) and a
 * scrape is answered from that copy at once; a copy older than the period says
 * its age in a comment and in allm_gateway_metrics_age_seconds. Only the first
 * scrape waits for a call. Labels name the model as clients do
 * (--served-model-name), not by the engine's path to its file. */
#include "gw-ctl.h"

#include "common.h"
#include "ctl-client.h"
#include "ctl-prom.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a call waits for the engine's control server. */
#define GW_CTL_CALL_TIMEOUT_MS 2000
/* After a quarter of --engine-timeout in silence, ask the engine for its status
 * (so /health knows within the timeout), at most once a second when it answers,
 * and wait at most a second for the answer. */
#define GW_CTL_PROBE_PER_TIMEOUT 4
#define GW_CTL_PROBE_MAX_S 1.0
/* Scrapes waiting at most; more get 503 at once (each holds a connection). */
#define GW_SCRAPES_MAX 64
/* The figures are kept fresh this long after the last scrape. */
#define GW_METRICS_KEEP_S 300.0

static void heard(struct gw *gw)
{
	pthread_mutex_lock(&gw->lock);
	gw->engine_heard = allm_now();
	pthread_mutex_unlock(&gw->lock);
}

/* The body of a `cache-reset` answer: {"dropped_blocks": N}. */
static int reset_render(struct gw *gw, const msgpack_object *result, char **text, size_t *len, char *err,
			size_t errlen)
{
	(void)gw;
	int64_t n;
	if (allm_ctl_get_int(result, "dropped_blocks", &n)) {
		snprintf(err, errlen, "the engine's cache-reset answer has no dropped_blocks");
		return -EPROTO;
	}
	if (!(*text = malloc(64)))
		return -ENOMEM;
	*len = (size_t)snprintf(*text, 64, "{\"dropped_blocks\":%lld}", (long long)n);
	return 0;
}

/* Every model_name label of a `metrics` result set to name: the message is ours
 * until freed, so its strings may point elsewhere for the rendering. */
static void relabel(msgpack_object *o, const char *name)
{
	if (o->type == MSGPACK_OBJECT_ARRAY) {
		for (uint32_t i = 0; i < o->via.array.size; i++)
			relabel(&o->via.array.ptr[i], name);
	} else if (o->type == MSGPACK_OBJECT_MAP) {
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			msgpack_object_kv *kv = &o->via.map.ptr[i];
			if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == 10 &&
			    !memcmp(kv->key.via.str.ptr, "model_name", 10) && kv->val.type == MSGPACK_OBJECT_STR) {
				kv->val.via.str.ptr = name;
				kv->val.via.str.size = (uint32_t)strlen(name);
			} else {
				relabel(&kv->val, name);
			}
		}
	}
}

/* `metrics` as Prometheus text, labelled with the served model's id. */
static int metrics_render(struct gw *gw, const msgpack_object *result, char **text, size_t *len, char *err,
			  size_t errlen)
{
	bool up;
	struct gw_model *m = gw_state_model(gw, &up);
	if (m)
		relabel((msgpack_object *)result, m->id);
	int r = allm_ctl_prom_render(result, text, len, err, errlen);
	gw_model_unref(m);
	return r;
}

/* Keeps a copy of the figures (ctl_lock taken here). */
static void metrics_keep(struct gw *gw, const char *text, size_t len)
{
	char *copy = malloc(len + 1);
	if (!copy)
		return;
	memcpy(copy, text, len + 1);
	pthread_mutex_lock(&gw->ctl_lock);
	free(gw->metrics_text);
	gw->metrics_text = copy;
	gw->metrics_len = len;
	gw->metrics_at = allm_now();
	pthread_mutex_unlock(&gw->ctl_lock);
}

int gw_ctl_metrics_now(struct gw *gw, char **text, size_t *len)
{
	int r = -EAGAIN;
	pthread_mutex_lock(&gw->ctl_lock);
	gw->metrics_asked = allm_now();
	if (gw->metrics_text) {
		double age = allm_now() - gw->metrics_at;
		char head[200];
		int k = 0;
		if (age > GW_CTL_PROBE_MAX_S * 2)
			k = snprintf(head, sizeof(head),
				     "# allm-gateway: the engine's figures as of %.1f s ago (it has not answered since)\n",
				     age);
		k += snprintf(head + k, sizeof(head) - (size_t)k,
			      "# HELP allm_gateway_metrics_age_seconds Age of the engine's figures below.\n"
			      "# TYPE allm_gateway_metrics_age_seconds gauge\n"
			      "allm_gateway_metrics_age_seconds %.3f\n", age);
		if ((*text = malloc((size_t)k + gw->metrics_len + 1))) {
			memcpy(*text, head, (size_t)k);
			memcpy(*text + k, gw->metrics_text, gw->metrics_len + 1);
			*len = (size_t)k + gw->metrics_len;
			r = 0;
		} else {
			r = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&gw->ctl_lock);
	return r;
}

/* Whether the figures are to be refreshed now (scraped lately, older than a
 * period). Under ctl_lock. */
static bool metrics_due_locked(struct gw *gw, double every)
{
	double now = allm_now();
	return gw->metrics_text && now - gw->metrics_asked < GW_METRICS_KEEP_S && now - gw->metrics_at >= every &&
	       now - gw->metrics_tried >= every && gw_state_silence(gw) <= gw->o.engine_timeout_s;
}

/* One call of job for the connections s[0..n) that asked it: each gets the
 * answer or the error, and its connection back. */
static void call_job(struct gw *gw, enum gw_ctl_job job, struct gw_scrape **s, uint32_t n)
{
	static const struct {
		const char *cmd, *what;
		int (*render)(struct gw *, const msgpack_object *, char **, size_t *, char *, size_t);
	} jobs[] = {
		[GW_CTL_METRICS] = {"metrics", "GET /metrics", metrics_render},
		[GW_CTL_CACHE_RESET] = {"cache-reset", "POST /reset_prefix_cache", reset_render},
	};
	struct allm_ctl_msg *m = NULL;
	char err[256] = "", *text = NULL;
	size_t len = 0;
	double silent = gw_state_silence(gw);
	int r;
	if (silent > gw->o.engine_timeout_s) {
		snprintf(err, sizeof(err), "the engine has not answered for %.0f s (stopped or stuck?)", silent);
		r = -ETIMEDOUT;
	} else if ((r = allm_ctl_call(gw->ctl, jobs[job].cmd, NULL, 0, GW_CTL_CALL_TIMEOUT_MS, &m))) {
		snprintf(err, sizeof(err), "%s", allm_ctl_client_error(gw->ctl));
	} else {
		heard(gw);
		r = jobs[job].render(gw, m->result, &text, &len, err, sizeof(err));
	}
	if (!r && job == GW_CTL_METRICS)
		metrics_keep(gw, text, len);
	allm_ctl_msg_free(m);
	if (r)
		gw_log(gw, ALLM_LOG_WARN, "%s: %s", jobs[job].what, err);
	else if (job == GW_CTL_CACHE_RESET)
		gw_log(gw, ALLM_LOG_INFO, "%s: %.*s", jobs[job].what, (int)len, text);
	for (uint32_t i = 0; i < n; i++) {
		s[i]->text = text && i + 1 < n ? malloc(len + 1) : text;
		if (s[i]->text && s[i]->text != text)
			memcpy(s[i]->text, text, len + 1);
		s[i]->len = s[i]->text ? len : 0;
		snprintf(s[i]->err, sizeof(s[i]->err), "%s", r ? err : "out of memory");
		s[i]->done = true;
		MHD_resume_connection(s[i]->conn);
	}
	if (!n)
		free(text);
}

/* The queued connections, one call per job (in the order of the first to ask). */
static void scrape(struct gw *gw, struct gw_scrape **s, uint32_t n)
{
	struct gw_scrape *same[GW_SCRAPES_MAX];
	while (n) {
		enum gw_ctl_job job = s[0]->job;
		uint32_t k = 0, left = 0;
		for (uint32_t i = 0; i < n; i++)
			if (s[i]->job == job)
				same[k++] = s[i];
			else
				s[left++] = s[i];
		call_job(gw, job, same, k);
		n = left;
	}
}

/* Asks the engine for its status: an answer is a sign of life. */
static double probe_every(const struct gw *gw)
{
	return ALLM_MIN(gw->o.engine_timeout_s / GW_CTL_PROBE_PER_TIMEOUT, GW_CTL_PROBE_MAX_S);
}

static void probe(struct gw *gw)
{
	struct allm_ctl_msg *m = NULL;
	int64_t seqs;
	double uptime;
	if (allm_ctl_call(gw->ctl, "status", NULL, 0, (int)(probe_every(gw) * 1000) + 1, &m) == 0) {
		bool learnt = !allm_ctl_get_int(m->result, "limits.max_num_seqs", &seqs) && seqs > 0;
		long long started = !allm_ctl_get_double(m->result, "uptime_s", &uptime) && uptime >= 0
					    ? (long long)(time(NULL) - (time_t)uptime)
					    : 0;
		const msgpack_object *st = allm_ctl_get(m->result, "state");
		bool paused = st && (allm_ctl_str_eq(st, "draining") || allm_ctl_str_eq(st, "drained") ||
				     allm_ctl_str_eq(st, "shutting_down"));
		pthread_mutex_lock(&gw->lock);
		gw->engine_heard = allm_now();
		gw->engine_paused = paused;
		/* one figure per engine: a second of rounding must not move it */
		if (started && (started > gw->engine_created + 2 || started < gw->engine_created - 2))
			gw->engine_created = started;
		if (learnt) {
			gw->engine_max_seqs = (int)ALLM_MIN(seqs, INT32_MAX);
			gw->want_limits = false;
		}
		pthread_mutex_unlock(&gw->lock);
		gw_wake_pump(gw); /* the caps may have grown: more may go */
	}
	allm_ctl_msg_free(m);
}

/* Whether the engine's limits are yet to be read (a new connection). */
static bool limits_wanted(struct gw *gw)
{
	pthread_mutex_lock(&gw->lock);
	bool w = gw->want_limits && gw->engine_up;
	pthread_mutex_unlock(&gw->lock);
	return w;
}

static void *ctl_main(void *arg)
{
	struct gw *gw = arg;
	struct gw_scrape *batch[GW_SCRAPES_MAX];
	double probed = 0; /* when the last probe was */
	for (;;) {
		bool refresh = false;
		pthread_mutex_lock(&gw->ctl_lock);
		while (!gw->ctl_stop && gw->n_scrapes == 0) {
			double silent = gw_state_silence(gw), every = probe_every(gw);
			/* a busy engine is probed too: its state (drained?) is news */
			silent = ALLM_MAX(silent, allm_now() - probed);
			if ((refresh = metrics_due_locked(gw, every)) || silent >= every || limits_wanted(gw))
				break;
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			double wait = every - silent + 0.01;
			ts.tv_sec += (time_t)wait;
			ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&gw->ctl_cond, &gw->ctl_lock, &ts);
		}
		uint32_t n = gw->n_scrapes;
		memcpy(batch, gw->scrapes, n * sizeof(*batch));
		gw->n_scrapes = 0;
		bool stop = gw->ctl_stop;
		pthread_mutex_unlock(&gw->ctl_lock);
		if (stop) {
			for (uint32_t i = 0; i < n; i++) {
				snprintf(batch[i]->err, sizeof(batch[i]->err), "allm-gateway is shutting down");
				batch[i]->done = true;
				MHD_resume_connection(batch[i]->conn);
			}
			break;
		}
		if (n) {
			scrape(gw, batch, n);
		} else if (refresh) {
			pthread_mutex_lock(&gw->ctl_lock);
			gw->metrics_tried = allm_now(); /* once a period, answered or not */
			pthread_mutex_unlock(&gw->ctl_lock);
			call_job(gw, GW_CTL_METRICS, NULL, 0); /* the kept figures, refreshed */
		} else {
			probe(gw);
			probed = allm_now();
		}
	}
	return NULL;
}

void gw_ctl_kick(struct gw *gw)
{
	pthread_mutex_lock(&gw->ctl_lock);
	pthread_cond_signal(&gw->ctl_cond);
	pthread_mutex_unlock(&gw->ctl_lock);
}

int gw_ctl_scrape(struct gw *gw, struct gw_scrape *s)
{
	int r = 0;
	pthread_mutex_lock(&gw->ctl_lock);
	if (gw->ctl_stop || gw->n_scrapes == GW_SCRAPES_MAX) {
		r = -EBUSY;
	} else {
		s->done = false;
		MHD_suspend_connection(s->conn);
		gw->scrapes[gw->n_scrapes++] = s;
		pthread_cond_signal(&gw->ctl_cond);
	}
	pthread_mutex_unlock(&gw->ctl_lock);
	return r;
}

int gw_ctl_start(struct gw *gw)
{
	char err[256];
	struct allm_ctl_client_opts co = {.name = gw->o.engine, .runtime_dir = gw->o.runtime_dir};
	int r = allm_ctl_client_open(&co, &gw->ctl, err, sizeof(err));
	if (r) {
		gw_log(gw, ALLM_LOG_ERROR, "control-plane client: %s", err);
		return r;
	}
	if (!(gw->scrapes = calloc(GW_SCRAPES_MAX, sizeof(*gw->scrapes))))
		return -ENOMEM;
	if ((r = pthread_create(&gw->ctl_thread, NULL, ctl_main, gw)))
		return -r;
	gw->ctl_started = true;
	return 0;
}

void gw_ctl_stop(struct gw *gw)
{
	if (gw->ctl_started) {
		pthread_mutex_lock(&gw->ctl_lock);
		gw->ctl_stop = true;
		pthread_cond_signal(&gw->ctl_cond);
		pthread_mutex_unlock(&gw->ctl_lock);
		pthread_join(gw->ctl_thread, NULL);
		gw->ctl_started = false;
	}
	free(gw->scrapes);
	gw->scrapes = NULL;
	free(gw->metrics_text);
	gw->metrics_text = NULL;
	allm_ctl_client_close(gw->ctl);
	gw->ctl = NULL;
}
