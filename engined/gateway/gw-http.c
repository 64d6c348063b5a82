/* The HTTP side (libmicrohttpd, a small thread pool over epoll): routes, the body
 * cap, the API key, and the life of a generation request's connection — suspended
 * while the engine works, resumed by the pump, answered as one JSON document or
 * as a server-sent-event stream. libmicrohttpd's own limits do the rest: a
 * connection cap, an idle timeout (slow and idle clients cost a slot each, never a
 * thread), a per-connection memory pool that bounds headers; gw-conns.c adds a
 * deadline for a whole request, which silence-based timeouts cannot give. */
#include "gw-body.h"
#include "gw-ctl.h"
#include "gw-http.h"
#include "gw-openai.h"
#include "gw-pump.h"
#include "gw-stream.h"
#include "gw-users.h"

#include "ctl-prom.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Each connection's memory pool (headers, buffers); the blocks of gw-stream.c's
 * SSE and gw-body.c's whole answers must fit in it. */
#define GW_CONN_MEMORY (64 * 1024)

enum route {
	R_NONE,
	R_HEALTH,
	R_METRICS,
	R_RESET_CACHE,
	R_MODELS,
	R_MODEL, /* GET /v1/models/{id} */
	R_COMPLETIONS,
	R_CHAT,
	R_TOKENIZE,
	R_DETOKENIZE,
};

/* One HTTP request (libmicrohttpd's per-request context). */
struct gw_http {
	struct gw *gw;
	enum route route;
	char model_id[256];   /* R_MODEL: the id in the URL */
	char *body;
	size_t len, cap;
	bool too_big;     /* the body passed --max-body-bytes: the rest is dropped */
	bool responded;   /* a response is queued */
	bool close;       /* the answer closes the connection (a request we cannot frame) */
	int key_index;    /* which of the API keys it carries (-1: none) */
	struct gw_req *req; /* a generation request handed to the pump */
	bool scraping;    /* GET /metrics or POST /reset_prefix_cache waits for the
			   * control-plane thread */
	struct gw_scrape scrape;
};

/* --- responses ------------------------------------------------------------------- */

/* Queues a response that takes body (malloc'ed; freed by libmicrohttpd). */
static enum MHD_Result respond(struct MHD_Connection *c, struct gw_http *x, unsigned status,
			       const char *ctype, char *body, size_t len)
{
	struct MHD_Response *res = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
					: NULL;
	if (!res) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (status == 401)
		MHD_add_response_header(res, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (status == 429 || status == 503)
		MHD_add_response_header(res, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	/* libmicrohttpd closes the connection after an answer that says so */
	if (x && x->close)
		MHD_add_response_header(res, MHD_HTTP_HEADER_CONNECTION, "close");
	if (x)
		gw_cors_answer(&x->gw->o.cors, c, res);
	enum MHD_Result ok = MHD_queue_response(c, status, res);
	MHD_destroy_response(res);
	if (x)
		x->responded = true;
	return ok;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, struct gw_http *x, unsigned status,
				    char *json, size_t len)
{
	return respond(c, x, status, "application/json", json, len);
}

static enum MHD_Result respond_err(struct MHD_Connection *c, struct gw_http *x,
				   const struct gw_api_err *e)
{
	size_t len = 0;
	char *j = gw_api_error_json(e, &len);
	return respond_json(c, x, (unsigned)e->status, j, len);
}

static enum MHD_Result fail(struct MHD_Connection *c, struct gw_http *x, int status,
			    const char *type, const char *code, const char *msg)
{
	struct gw_api_err e;
	gw_api_fail(&e, status, type, code, NULL, "%s", msg);
	return respond_err(c, x, &e);
}

static enum MHD_Result no_engine(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	struct gw_api_err e;
	gw_api_fail(&e, 503, "service_unavailable", NULL, NULL,
		    atomic_load(&gw->stopping) ? "allm-gateway is shutting down"
				 : "no engine '%s' is running (the gateway reconnects when it starts)",
		    gw->o.engine);
	return respond_err(c, x, &e);
}

/* --- GET endpoints --------------------------------------------------------------- */

/* 200 while the engine is connected and has said something (ring or control
 * plane) within --engine-timeout; a load balancer takes a frozen engine out. */
static enum MHD_Result get_health(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	bool up;
	gw_model_unref(gw_state_model(gw, &up));
	if (!up || atomic_load(&gw->stopping))
		return no_engine(gw, c, x);
	double silent = gw_state_silence(gw);
	if (silent > gw->o.engine_timeout_s) {
		struct gw_api_err e;
		gw_api_fail(&e, 503, "service_unavailable", NULL, NULL,
			    "the engine '%s' has not answered for %.0f s (--engine-timeout %g): stopped or stuck?",
			    gw->o.engine, silent, gw->o.engine_timeout_s);
		return respond_err(c, x, &e);
	}
	pthread_mutex_lock(&gw->lock);
	bool paused = gw->engine_paused;
	pthread_mutex_unlock(&gw->lock);
	if (paused) {
		struct gw_api_err e;
		gw_api_fail(&e, 503, "service_unavailable", NULL, NULL,
			    "the engine '%s' is draining (allmctl drain): it finishes what it has, takes nothing new",
			    gw->o.engine);
		return respond_err(c, x, &e);
	}
	char *s = strdup("{\"status\":\"ok\"}");
	return respond_json(c, x, 200, s, s ? strlen(s) : 0);
}

/* A model card: `created` is when the engine started (its status says its uptime). */
static json_t *model_card(struct gw *gw, const struct gw_model *m)
{
	pthread_mutex_lock(&gw->lock);
	long long created = gw->engine_created;
	pthread_mutex_unlock(&gw->lock);
	json_t *card = json_pack("{s:s, s:s, s:I, s:s}", "id", m->id, "object", "model", "created",
				 (json_int_t)created, "owned_by", "adaptivellm");
	if (card && m->context > 0)
		json_object_set_new(card, "max_model_len", json_integer(m->context));
	return card;
}

/* GET /v1/models, and GET /v1/models/{id} (the SDKs' models.retrieve()). */
static enum MHD_Result get_models(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	bool up;
	struct gw_model *m = gw_state_model(gw, &up);
	if (!m)
		return no_engine(gw, c, x);
	if (x->route == R_MODEL && strcmp(x->model_id, m->id)) {
		struct gw_api_err e;
		gw_api_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
			    "The model `%.200s` does not exist (this server serves `%s`)", x->model_id, m->id);
		gw_model_unref(m);
		return respond_err(c, x, &e);
	}
	json_t *card = model_card(gw, m);
	json_t *j = card && x->route == R_MODELS ? json_pack("{s:s, s:[o]}", "object", "list", "data", card) : card;
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	gw_model_unref(m);
	return respond_json(c, x, 200, s, s ? strlen(s) : 0);
}

/* An answer of the engine's control server, fetched by the control-plane
 * thread while the connection is suspended (a frozen engine must not hold an
 * HTTP thread): GET /metrics, the engine's `metrics` as Prometheus text (the
 * bytes `allmctl metrics` prints: one renderer, ctl-prom.c); POST
 * /reset_prefix_cache, its `cache-reset` (`allmctl cache reset`) as JSON. */
static enum MHD_Result ctl_answer(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	bool metrics = x->route == R_METRICS, up;
	if (x->scraping) { /* resumed: the answer is in */
		x->scraping = false;
		if (!x->scrape.text)
			return fail(c, x, 503, "service_unavailable", NULL, x->scrape.err);
		char *text = x->scrape.text;
		x->scrape.text = NULL;
		return respond(c, x, 200, metrics ? ALLM_CTL_PROM_CONTENT_TYPE : "application/json", text,
			       x->scrape.len);
	}
	char *kept = NULL;
	size_t len = 0;
	/* the figures kept fresh by the control-plane thread: never wait on a step */
	if (metrics && gw_ctl_metrics_now(gw, &kept, &len) == 0)
		return respond(c, x, 200, ALLM_CTL_PROM_CONTENT_TYPE, kept, len);
	gw_model_unref(gw_state_model(gw, &up));
	if (!up)
		return no_engine(gw, c, x);
	x->scrape.conn = c;
	x->scrape.job = metrics ? GW_CTL_METRICS : GW_CTL_CACHE_RESET;
	x->scraping = true;
	if (gw_ctl_scrape(gw, &x->scrape)) {
		x->scraping = false;
		return fail(c, x, 503, "service_unavailable", NULL,
			    metrics ? "too many GET /metrics waiting for the engine"
				    : "too many control requests waiting for the engine");
	}
	return MHD_YES;
}

/* --- generation requests --------------------------------------------------------- */

static enum MHD_Result post_generate(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	struct gw_api_err e;
	struct gw_req *r = NULL;
	bool up;
	if (x->too_big)
		return fail(c, x, 413, "invalid_request_error", "body_too_large",
			    "the request body is larger than --max-body-bytes");
	struct gw_model *m = gw_state_model(gw, &up);
	if (!m || !up || atomic_load(&gw->stopping)) {
		gw_model_unref(m);
		return no_engine(gw, c, x);
	}
	int rc = gw_api_parse(gw, m, x->route == R_CHAT, x->body ? x->body : "", x->len, &r, &e);
	gw_model_unref(m);
	if (rc)
		return respond_err(c, x, &e);
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	char user[64], why[400];
	gw_users_key(gw, c, x->key_index, user, sizeof(user));
	for (uint32_t i = 0; i < r->n_choices; i++)
		gw_req_scope_cache(gw_choice(r, i), gw->cache_secret, user,
				   auth && !strncmp(auth, "Bearer ", 7) ? auth + 7 : NULL);
	r->conn = c;
	pthread_mutex_lock(&gw->lock);
	/* its user's quota and queue (gw-users.c): the pump takes users in turn */
	if ((rc = gw_users_admit(gw, user, r, why, sizeof(why)))) {
		pthread_mutex_unlock(&gw->lock);
		gw_api_discard(r);
		gw_log(gw, ALLM_LOG_DEBUG, "429: %s", why);
		return fail(c, x, rc == -EAGAIN ? 429 : 500, rc == -EAGAIN ? "rate_limit_exceeded" : "server_error",
			    NULL, why);
	}
	r->suspended = true;
	MHD_suspend_connection(c);
	gw_req_enqueue_locked(gw, r, ci ? ci->connect_fd : -1);
	x->req = r;
	pthread_mutex_unlock(&gw->lock);
	gw_wake_pump(gw);
	return MHD_YES;
}

/* POST /tokenize and /detokenize (vLLM's, llama.cpp's): the gateway's tokenizer
 * (and chat template, for messages), no engine involved. */
static enum MHD_Result post_tokenize(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	struct gw_api_err e;
	bool up;
	char *out = NULL;
	size_t len = 0;
	if (x->too_big)
		return fail(c, x, 413, "invalid_request_error", "body_too_large",
			    "the request body is larger than --max-body-bytes");
	struct gw_model *m = gw_state_model(gw, &up);
	if (!m)
		return no_engine(gw, c, x);
	int rc = gw_api_tokenize(gw, m, x->route == R_DETOKENIZE, x->body ? x->body : "", x->len, &out, &len, &e);
	gw_model_unref(m);
	return rc ? respond_err(c, x, &e) : respond_json(c, x, 200, out, len);
}

/* Called again after the pump resumed the connection. */
static enum MHD_Result on_resumed(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	struct gw_req *r = x->req;
	struct gw_api_err e = {0};
	pthread_mutex_lock(&gw->lock);
	if (r->hung_up) {
		pthread_mutex_unlock(&gw->lock);
		return MHD_NO; /* closes it */
	}
	/* a choice that failed answers for the request (the others are cancelled at
	 * its end); a stream starts once the engine took every choice */
	struct gw_req *failed = NULL;
	bool done = true, accepted = true;
	for (uint32_t i = 0; i < r->n_choices; i++) {
		struct gw_req *q = gw_choice(r, i);
		if (q->phase == GW_DONE && q->http_status && !failed)
			failed = q;
		done &= q->phase == GW_DONE;
		accepted &= q->accepted;
	}
	if (r->stream && accepted && !failed) {
		/* the HTTP side's references keep every choice while it runs */
		pthread_mutex_unlock(&gw->lock);
		x->responded = true;
		return gw_stream_start(gw, c, r);
	}
	if (!done && !failed) {
		r->suspended = true; /* woken early (nothing to send yet) */
		MHD_suspend_connection(c);
		pthread_mutex_unlock(&gw->lock);
		return MHD_YES;
	}
	if (failed)
		gw_api_fail(&e, failed->http_status, failed->err_type,
			    failed->http_status == 413 ? "context_length_exceeded" : NULL, NULL, "%s", failed->err);
	pthread_mutex_unlock(&gw->lock);
	if (e.status)
		return respond_err(c, x, &e);
	/* every choice is DONE: their data is final, read without the lock (the
	 * pump must never wait while an answer is written) */
	x->responded = true;
	return gw_body_respond(gw, c, r);
}

/* --- routing --------------------------------------------------------------------- */

/* The route of url and the method it takes ("GET" routes take HEAD too). */
static enum route route_of(const char *url, const char **method, char *model_id, size_t len)
{
	static const struct {
		const char *url, *method;
		enum route r;
	} routes[] = {
		{"/health", "GET", R_HEALTH},
		{"/metrics", "GET", R_METRICS},
		{"/reset_prefix_cache", "POST", R_RESET_CACHE},
		{"/v1/models", "GET", R_MODELS},
		{"/v1/completions", "POST", R_COMPLETIONS},
		{"/v1/chat/completions", "POST", R_CHAT},
		{"/tokenize", "POST", R_TOKENIZE},
		{"/detokenize", "POST", R_DETOKENIZE},
	};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (!strcmp(url, routes[i].url)) {
			*method = routes[i].method;
			return routes[i].r;
		}
	/* a model id may hold slashes ("Qwen/Qwen2.5-0.5B"): the rest of the path */
	if (!strncmp(url, "/v1/models/", 11) && url[11]) {
		*method = "GET";
		snprintf(model_id, len, "%s", url + 11);
		return R_MODEL;
	}
	return R_NONE;
}

static bool method_ok(const char *method, const char *want)
{
	return !strcmp(method, want) || (!strcmp(want, "GET") && !strcmp(method, "HEAD"));
}

/* OPTIONS: a browser's preflight (gw-cors.c), or a plain one answered with Allow. */
static enum MHD_Result options(struct gw *gw, struct MHD_Connection *c, struct gw_http *x, const char *want)
{
	struct MHD_Response *res = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	char why[300];
	unsigned status = 204;
	if (!res)
		return MHD_NO;
	if (gw_cors_is_preflight(c, "OPTIONS")) {
		status = gw_cors_preflight(&gw->o.cors, c, res, why, sizeof(why));
	} else {
		snprintf(why, sizeof(why), "%s%s, OPTIONS", want, !strcmp(want, "GET") ? ", HEAD" : "");
		MHD_add_response_header(res, MHD_HTTP_HEADER_ALLOW, why);
	}
	if (status != 204) {
		MHD_destroy_response(res);
		gw_log(gw, ALLM_LOG_DEBUG, "preflight refused: %s", why);
		return fail(c, x, (int)status, "invalid_request_error", "cors_refused", why);
	}
	enum MHD_Result ok = MHD_queue_response(c, status, res);
	MHD_destroy_response(res);
	x->responded = true;
	return ok;
}

/* Whether the Bearer token h is k: constant time in the key's length, so the
 * comparison does not leak a prefix. */
static bool key_eq(const char *h, const char *k)
{
	size_t hl = strlen(h), kl = strlen(k);
	unsigned char d = hl != kl;
	for (size_t i = 0; i < kl; i++)
		d |= (unsigned char)(k[i] ^ (i < hl ? h[i] : 0));
	return d == 0;
}

/* The index of the API key among keys[0..n) the request carries, or -1. Every
 * key is compared (which one matched does not show in the time taken). */
static int key_index(struct MHD_Connection *c, const char *const *keys, int n)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	int found = -1;
	if (!h || strncmp(h, "Bearer ", 7))
		return -1;
	for (int i = 0; i < n; i++)
		if (key_eq(h + 7, keys[i]) && found < 0)
			found = i;
	return found;
}

/* GET /metrics shows every user's traffic and the prefix cache's counters: the
 * metrics key when there is one; else open only when no key at all is set (or
 * --metrics-open says so), and otherwise the admin key. */
static bool metrics_allowed(const struct gw *gw, struct MHD_Connection *c)
{
	if (gw->o.metrics_open)
		return true;
	if (gw->o.metrics_api_key)
		return key_index(c, &gw->o.metrics_api_key, 1) >= 0;
	if (!gw->o.n_api_keys && !gw->o.admin_api_key)
		return true;
	return gw->o.admin_api_key && key_index(c, &gw->o.admin_api_key, 1) >= 0;
}

/* What the framing headers say (RFC 9112 §6): how many Content-Length values,
 * whether they agree, whether there is a Transfer-Encoding and what it is. */
struct framing {
	int n_length;
	bool length_bad;      /* not a number, or two that differ */
	unsigned long long length;
	int n_te;
	bool te_chunked;      /* the (only) coding is chunked */
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct framing *f = cls;
	(void)kind;
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		/* "5, 5" is one length said twice; "5, 7" two */
		for (const char *p = value ? value : "";;) {
			char *end;
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p < '0' || *p > '9') {
				f->length_bad = true;
				break;
			}
			unsigned long long v = strtoull(p, &end, 10);
			if (f->n_length++ && v != f->length)
				f->length_bad = true;
			f->length = v;
			for (p = end; *p == ' ' || *p == '\t'; p++)
				;
			if (*p != ',')
				break;
			p++;
		}
		if (!value || *value == 0)
			f->length_bad = true;
	} else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		f->te_chunked = f->n_te++ == 0 && value && !strcasecmp(value, "chunked");
	}
	return MHD_YES;
}

/* A request whose body length two headers tell differently is refused and its
 * connection closed: behind a proxy that reads the other header, what follows
 * would be another request (request smuggling). 0, or the answer queued. */
static enum MHD_Result check_framing(struct MHD_Connection *c, struct gw_http *x, bool *refused)
{
	struct framing f = {0};
	MHD_get_connection_values(c, MHD_HEADER_KIND, framing_header, &f);
	const char *why = NULL;
	int status = 400;
	if (f.n_te && f.n_length)
		why = "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 section 6.3)";
	else if (f.length_bad)
		why = "Content-Length must be one decimal number (two that differ are refused, RFC 9112 section 6.3)";
	else if (f.n_te && !f.te_chunked) {
		why = "the only Transfer-Encoding this server takes is chunked";
		status = 501;
	}
	*refused = why != NULL;
	if (!why)
		return MHD_YES;
	x->close = true;
	return fail(c, x, status, "invalid_request_error", "bad_framing", why);
}

/* The first call for a request: headers are in, the body is not. */
static enum MHD_Result on_headers(struct gw *gw, struct MHD_Connection *c, const char *url,
				  const char *method, struct gw_http *x)
{
	const char *want = NULL;
	char msg[400];
	x->route = route_of(url, &want, x->model_id, sizeof(x->model_id));
	if (x->route == R_NONE) {
		snprintf(msg, sizeof(msg), "no route %.200s (POST /v1/completions, POST "
					   "/v1/chat/completions, GET /v1/models, POST /tokenize, POST /detokenize, "
					   "/health, /metrics)", url);
		return fail(c, x, 404, "invalid_request_error", "not_found", msg);
	}
	/* before the key: a browser's preflight carries none */
	if (!strcmp(method, "OPTIONS"))
		return options(gw, c, x, want);
	if (!method_ok(method, want)) {
		snprintf(msg, sizeof(msg), "%s takes %s", url, want);
		return fail(c, x, 405, "invalid_request_error", "method_not_allowed", msg);
	}
	x->key_index = gw->o.n_api_keys ? key_index(c, gw->o.api_keys, gw->o.n_api_keys) : -1;
	bool user_route = !strncmp(url, "/v1/", 4) || x->route == R_TOKENIZE || x->route == R_DETOKENIZE;
	if (gw->o.n_api_keys && user_route && x->key_index < 0)
		return fail(c, x, 401, "invalid_request_error", "invalid_api_key",
			    "Incorrect API key provided (Authorization: Bearer KEY)");
	if (x->route == R_METRICS && !metrics_allowed(gw, c))
		return fail(c, x, 401, "invalid_request_error", "invalid_api_key",
			    gw->o.metrics_api_key ? "GET /metrics needs the metrics key (--metrics-api-key; "
						    "Authorization: Bearer KEY)"
			    : gw->o.admin_api_key ? "GET /metrics needs the admin key while keys are set and no "
						    "--metrics-api-key is (Authorization: Bearer KEY)"
						  : "GET /metrics is closed while API keys are set: start the gateway "
						    "with --metrics-api-key-file FILE (or --metrics-open)");
	/* vLLM's name; off unless an operator key guards it: one user must not
	 * empty every user's cache */
	if (x->route == R_RESET_CACHE && !gw->o.admin_api_key)
		return fail(c, x, 404, "invalid_request_error", "not_found",
			    "POST /reset_prefix_cache is off (allm-gateway --admin-api-key KEY turns it on)");
	if (x->route == R_RESET_CACHE && key_index(c, &gw->o.admin_api_key, 1) < 0)
		return fail(c, x, 401, "invalid_request_error", "invalid_api_key",
			    "POST /reset_prefix_cache needs the admin key (--admin-api-key; Authorization: Bearer KEY)");
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > gw->o.max_body)
		return fail(c, x, 413, "invalid_request_error", "body_too_large",
			    "the request body is larger than --max-body-bytes");
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct gw *gw = cls;
	struct gw_http *x = *con_cls;
	if (!x) {
		if (!(x = calloc(1, sizeof(*x))))
			return MHD_NO;
		x->gw = gw;
		*con_cls = x;
		gw_conns_head_in(gw, c);
		gw_log(gw, ALLM_LOG_DEBUG, "%s %s", method, url);
		bool refused;
		enum MHD_Result ok = check_framing(c, x, &refused);
		return refused ? ok : on_headers(gw, c, url, method, x);
	}
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (x->responded || x->too_big)
			return MHD_YES;
		if (x->len + n > gw->o.max_body) {
			/* chunked bodies have no Content-Length to refuse up front */
			x->too_big = true;
			free(x->body);
			x->body = NULL;
			return MHD_YES;
		}
		if (x->len + n > x->cap) {
			size_t cap = x->cap ? x->cap : 4096;
			while (cap < x->len + n)
				cap *= 2;
			char *b = realloc(x->body, cap);
			if (!b)
				return MHD_NO;
			x->body = b;
			x->cap = cap;
		}
		memcpy(x->body + x->len, upload, n);
		x->len += n;
		return MHD_YES;
	}
	if (x->responded)
		return MHD_YES;
	if (x->req)
		return on_resumed(gw, c, x);
	if (x->scraping)
		return ctl_answer(gw, c, x);
	gw_conns_working(gw, c, true); /* the whole request is in */
	switch (x->route) {
	case R_HEALTH: return get_health(gw, c, x);
	case R_METRICS:
	case R_RESET_CACHE: return ctl_answer(gw, c, x);
	case R_MODELS:
	case R_MODEL: return get_models(gw, c, x);
	case R_TOKENIZE:
	case R_DETOKENIZE: return post_tokenize(gw, c, x);
	default: return post_generate(gw, c, x);
	}
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct gw *gw = cls;
	struct gw_http *x = *con_cls;
	gw_conns_working(gw, c, false); /* the next request's deadline starts */
	if (!x)
		return;
	if (x->req)
		gw_engine_release(gw, x->req); /* a hang-up cancels it in the engine */
	free(x->scrape.text);
	free(x->body);
	free(x);
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	const struct gw *gw = cls;
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	size_t n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = 0;
	gw_log(gw, ALLM_LOG_INFO, "http: %s", line);
}

int gw_http_start(struct gw *gw)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char port[16];
	snprintf(port, sizeof(port), "%d", gw->o.port);
	int r = getaddrinfo(gw->o.host, port, &hints, &ai);
	if (r) {
		gw_log(gw, ALLM_LOG_ERROR, "--host %s: %s", gw->o.host, gai_strerror(r));
		return -EINVAL;
	}
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
	/* the logger first: options before it would log through libmicrohttpd's own */
	gw->httpd = MHD_start_daemon(flags, (uint16_t)gw->o.port, NULL, NULL, on_request, gw,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, gw,
		MHD_OPTION_SOCK_ADDR, ai->ai_addr,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)gw->o.threads,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)gw->o.max_connections,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)gw->o.max_conns_per_addr,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)gw->o.timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)GW_CONN_MEMORY,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
		MHD_OPTION_NOTIFY_CONNECTION, gw_conns_notify, gw,
		MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!gw->httpd) {
		gw_log(gw, ALLM_LOG_ERROR, "cannot listen on %s:%d (in use? not an address of this machine?)",
		       gw->o.host, gw->o.port);
		return -EADDRINUSE;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(gw->httpd, MHD_DAEMON_INFO_BIND_PORT);
	gw->port = di ? di->port : gw->o.port;
	return 0;
}

/* Stops listening at once; connections in flight keep going until gw_http_stop. */
void gw_http_quiesce(struct gw *gw)
{
	MHD_socket fd = gw->httpd ? MHD_quiesce_daemon(gw->httpd) : MHD_INVALID_SOCKET;
	/* ours now, but libmicrohttpd's threads may still take it out of their
	 * epoll sets: closed once they are gone (its manual says so) */
	if (fd != MHD_INVALID_SOCKET)
		gw->quiesced_fd = fd;
}

void gw_http_stop(struct gw *gw)
{
	if (gw->httpd)
		MHD_stop_daemon(gw->httpd);
	gw->httpd = NULL;
	if (gw->quiesced_fd >= 0)
		close(gw->quiesced_fd);
	gw->quiesced_fd = -1;
}
