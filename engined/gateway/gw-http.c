/* The HTTP side (libmicrohttpd, a small thread pool over epoll): routes, the body
 * cap, the API key, and the life of a generation request's connection — suspended
 * while the engine works, resumed by the pump, answered as one JSON document or
 * as a server-sent-event stream. libmicrohttpd's own limits do the rest: a
 * connection cap, an idle timeout (slow and idle clients cost a slot each, never a
 * thread), a per-connection memory pool that bounds headers; gw-conns.c adds a
 * deadline for a whole request, which silence-based timeouts cannot give. */
#include "gw-openai.h"

#include "ctl-client.h"
#include "ctl-prom.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each connection's memory pool (headers, buffers); SSE blocks must fit in it. */
#define GW_CONN_MEMORY (64 * 1024)
#define GW_SSE_BLOCK (8 * 1024)
/* How long GET /metrics waits for the engine's control server. */
#define GW_METRICS_TIMEOUT_MS 2000

enum route { R_NONE, R_HEALTH, R_METRICS, R_MODELS, R_COMPLETIONS, R_CHAT };

/* One HTTP request (libmicrohttpd's per-request context). */
struct gw_http {
	enum route route;
	char *body;
	size_t len, cap;
	bool too_big;     /* the body passed --max-body-bytes: the rest is dropped */
	bool responded;   /* a response is queued */
	struct gw_req *req; /* a generation request handed to the pump */
};

/* Where a stream is with one choice. */
struct gw_stream_choice {
	bool role_sent;     /* chat: its first chunk (role) went out */
	size_t pieces_sent; /* text pieces (one per token, a flush last) sent so far */
	size_t text_sent;   /* and their bytes (completions' text_offset) */
	bool echo_sent;     /* completions' echo: the prompt's chunk went out */
	bool finish_sent;   /* its last chunk (finish_reason) went out */
};

/* A streamed response: its own reference to each choice, because libmicrohttpd
 * may destroy the response after the request's completion callback. */
struct gw_stream {
	struct gw *gw;
	struct gw_req *r; /* the lead */
	struct MHD_Connection *conn;
	char *buf;        /* formatted events not yet handed over */
	size_t len, cap, off;
	struct gw_stream_choice *cs; /* one per choice */
	bool ended;       /* [DONE] is in buf */
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
		    gw->stopping ? "allm-gateway is shutting down"
				 : "no engine '%s' is running (the gateway reconnects when it starts)",
		    gw->o.engine);
	return respond_err(c, x, &e);
}

/* --- GET endpoints --------------------------------------------------------------- */

static enum MHD_Result get_health(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	bool up;
	gw_model_unref(gw_engine_model(gw, &up));
	if (!up || gw->stopping)
		return no_engine(gw, c, x);
	char *s = strdup("{\"status\":\"ok\"}");
	return respond_json(c, x, 200, s, s ? strlen(s) : 0);
}

static enum MHD_Result get_models(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	bool up;
	struct gw_model *m = gw_engine_model(gw, &up);
	if (!m)
		return no_engine(gw, c, x);
	json_t *card = json_pack("{s:s, s:s, s:i, s:s}", "id", m->id, "object", "model", "created", 0,
				 "owned_by", "adaptivellm");
	if (card && m->context > 0)
		json_object_set_new(card, "max_model_len", json_integer(m->context));
	json_t *j = card ? json_pack("{s:s, s:[o]}", "object", "list", "data", card) : NULL;
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	gw_model_unref(m);
	return respond_json(c, x, 200, s, s ? strlen(s) : 0);
}

/* The engine's `metrics` reply as Prometheus text: the bytes `allmctl metrics`
 * prints (one renderer, ctl-prom.c). */
static enum MHD_Result get_metrics(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	bool up;
	struct allm_ctl_msg *m = NULL;
	char err[256] = "", *text = NULL;
	size_t len = 0;
	gw_model_unref(gw_engine_model(gw, &up));
	if (!up)
		return no_engine(gw, c, x);
	/* one ZeroMQ socket, one caller at a time */
	pthread_mutex_lock(&gw->ctl_lock);
	int r = allm_ctl_call(gw->ctl, "metrics", NULL, 0, GW_METRICS_TIMEOUT_MS, &m);
	if (r)
		snprintf(err, sizeof(err), "%s", allm_ctl_client_error(gw->ctl));
	pthread_mutex_unlock(&gw->ctl_lock);
	if (!r)
		r = allm_ctl_prom_render(m->result, &text, &len, err, sizeof(err));
	allm_ctl_msg_free(m);
	if (r) {
		gw_log(gw, 1, "GET /metrics: %s", err);
		return fail(c, x, 503, "service_unavailable", NULL, err);
	}
	return respond(c, x, 200, ALLM_CTL_PROM_CONTENT_TYPE, text, len);
}

/* --- streams --------------------------------------------------------------------- */

/* What one choice has for the stream, copied under the lock. */
struct gw_pending {
	char *text;
	size_t n, *ends, n_pieces, n_lp;
	struct allm_cqe_logprobs *lp; /* the pieces' tokens' */
	int32_t lp_prev;
	bool done;
	int finish;
};

/* Under lock: takes what choice r has that the stream has not sent (false: out of
 * memory, try again later). */
static bool take_pending(struct gw_req *r, const struct gw_stream_choice *st, struct gw_pending *p)
{
	p->done = r->phase == GW_DONE;
	p->finish = r->finish;
	p->lp_prev = -1;
	if (r->out.ready == 0 && r->out.n_ends == 0)
		return true;
	p->n = r->out.ready;
	p->text = malloc(p->n + 1);
	p->ends = malloc((r->out.n_ends + 1) * sizeof(*p->ends));
	if (!p->text || !p->ends) {
		p->n = 0;
		p->done = false;
		return false;
	}
	memcpy(p->text, r->out.buf, p->n);
	p->n_pieces = gw_text_pieces(&r->out, p->ends);
	gw_text_consume(&r->out);
	/* piece k is token k's text (the decoder's flush, last, has none) */
	size_t at = st->pieces_sent;
	p->n_lp = at < r->n_lps ? ALLM_MIN(p->n_pieces, r->n_lps - at) : 0;
	if (p->n_lp && (p->lp = malloc(p->n_lp * sizeof(*p->lp))))
		memcpy(p->lp, r->lps + at, p->n_lp * sizeof(*p->lp));
	else
		p->n_lp = 0;
	p->lp_prev = at > 0 && at - 1 < r->n_lps ? r->lps[at - 1].sampled.token_id : gw_api_last_prompt_id(r);
	return true;
}

/* Formats choice r's pending pieces (and its finish, once done) into s->buf. */
static int put_choice(struct gw_stream *s, struct gw_req *r, struct gw_stream_choice *st,
		      const struct gw_pending *p, bool failed)
{
	/* one event per token's text, as OpenAI and vLLM send them (clients count
	 * events); chat's first event also carries the role */
	int rc = 0;
	size_t at = 0;
	if (r->echo && !st->echo_sent) { /* the prompt first, as vLLM streams an echo */
		rc |= gw_api_sse_chunk(r, false, r->echo, r->echo_len, NULL, NULL, &s->buf, &s->len, &s->cap);
		st->echo_sent = true;
	}
	if (r->chat && !st->role_sent && p->n_pieces == 0) {
		rc |= gw_api_sse_chunk(r, true, "", 0, NULL, NULL, &s->buf, &s->len, &s->cap);
		st->role_sent = true;
	}
	for (size_t i = 0; i < p->n_pieces; i++) {
		size_t off = st->text_sent + at;
		json_t *lj = i < p->n_lp ? gw_api_logprobs_json(r, p->lp + i, 1,
								 i ? p->lp[i - 1].sampled.token_id : p->lp_prev, &off)
					 : NULL;
		rc |= gw_api_sse_chunk(r, r->chat && !st->role_sent, p->text + at, p->ends[i] - at, lj, NULL,
				       &s->buf, &s->len, &s->cap);
		st->role_sent = true;
		at = p->ends[i];
	}
	st->pieces_sent += p->n_pieces;
	st->text_sent += at;
	if (p->done && !failed && !st->finish_sent) {
		rc |= gw_api_sse_chunk(r, false, NULL, 0, NULL, gw_api_finish_name(p->finish), &s->buf, &s->len,
				       &s->cap);
		st->finish_sent = true;
	}
	return rc;
}

static void pending_free(struct gw_pending *p, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		free(p[k].text);
		free(p[k].ends);
		free(p[k].lp);
	}
	free(p);
}

/* Formats what the request's choices have for the stream into s->buf. Returns 1
 * when there was something (or the end), 0 when the connection was suspended to
 * wait, -1 when the client is gone. */
static int stream_fill(struct gw_stream *s, struct MHD_Connection *c)
{
	struct gw *gw = s->gw;
	struct gw_req *lead = s->r;
	uint32_t n = lead->n_choices;
	struct gw_pending *p = calloc(n, sizeof(*p));
	struct gw_api_err e = {0};
	uint32_t np = 0, ng = 0;
	bool any = false, all_done = true;
	if (!p)
		return -1;
	pthread_mutex_lock(&gw->lock);
	if (lead->hung_up) {
		pthread_mutex_unlock(&gw->lock);
		free(p);
		return -1;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct gw_req *r = gw_choice(lead, k);
		take_pending(r, &s->cs[k], &p[k]);
		any |= p[k].n_pieces > 0 || (p[k].done && !s->cs[k].finish_sent);
		all_done &= p[k].done;
		np = ALLM_MAX(np, r->n_prompt);
		ng += r->n_generated;
		if (p[k].done && r->http_status && !e.status)
			gw_api_fail(&e, r->http_status, r->err_type, NULL, NULL, "%s", r->err);
	}
	if (!any) {
		/* nothing yet: the pump resumes us when tokens come */
		lead->suspended = true;
		MHD_suspend_connection(c);
		pthread_mutex_unlock(&gw->lock);
		pending_free(p, n);
		gw_engine_wake(gw); /* so it watches this socket for a hang-up */
		return 0;
	}
	pthread_mutex_unlock(&gw->lock);

	int rc = 0;
	for (uint32_t k = 0; k < n; k++)
		rc |= put_choice(s, gw_choice(lead, k), &s->cs[k], &p[k], e.status != 0);
	pending_free(p, n);
	/* a failed choice ends the stream (the others are cancelled at its end) */
	if (e.status || all_done) {
		if (e.status)
			rc |= gw_api_sse_error(&e, &s->buf, &s->len, &s->cap);
		else if (lead->include_usage)
			rc |= gw_api_sse_usage(lead, np, ng, &s->buf, &s->len, &s->cap);
		rc |= gw_api_sse_done(&s->buf, &s->len, &s->cap);
		s->ended = true;
	}
	return rc ? -1 : 1;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct gw_stream *s = cls;
	if (s->off == s->len) {
		if (s->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		s->off = s->len = 0;
		int r = stream_fill(s, s->conn);
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r == 0)
			return 0; /* suspended: called again once resumed */
	}
	size_t n = s->len - s->off < max ? s->len - s->off : max;
	memcpy(out, s->buf + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

/* Under lock: the stream's references to every choice (the lead last). */
static void stream_unref_locked(struct gw_stream *s)
{
	for (uint32_t i = s->r->n_choices; i-- > 0;)
		gw_req_unref_locked(s->gw, gw_choice(s->r, i));
}

static void stream_free(void *cls)
{
	struct gw_stream *s = cls;
	pthread_mutex_lock(&s->gw->lock);
	stream_unref_locked(s);
	pthread_mutex_unlock(&s->gw->lock);
	free(s->buf);
	free(s->cs);
	free(s);
}

/* Under lock: r was accepted; the 200 and the event stream go out. */
static enum MHD_Result start_stream(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	struct gw_stream *s = calloc(1, sizeof(*s));
	if (!s || !(s->cs = calloc(x->req->n_choices, sizeof(*s->cs)))) {
		free(s);
		return MHD_NO;
	}
	s->gw = gw;
	s->conn = c;
	s->r = x->req;
	for (uint32_t i = 0; i < s->r->n_choices; i++)
		gw_choice(s->r, i)->refs++;
	struct MHD_Response *res =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, GW_SSE_BLOCK, stream_read, s, stream_free);
	if (!res) {
		stream_unref_locked(s);
		free(s->cs);
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	MHD_add_response_header(res, "X-Accel-Buffering", "no"); /* nginx: do not buffer */
	enum MHD_Result ok = MHD_queue_response(c, 200, res);
	MHD_destroy_response(res);
	x->responded = true;
	return ok;
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
	struct gw_model *m = gw_engine_model(gw, &up);
	if (!m || !up || gw->stopping) {
		gw_model_unref(m);
		return no_engine(gw, c, x);
	}
	int rc = gw_api_parse(gw, m, x->route == R_CHAT, x->body ? x->body : "", x->len, &r, &e);
	gw_model_unref(m);
	if (rc)
		return respond_err(c, x, &e);
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	r->conn = c;
	pthread_mutex_lock(&gw->lock);
	r->suspended = true;
	MHD_suspend_connection(c);
	for (uint32_t i = 0; i < r->n_choices; i++) {
		struct gw_req *q = gw_choice(r, i);
		q->sock = ci ? ci->connect_fd : -1;
		q->refs = 2; /* this side (released at completion) and the pump (at the end) */
		gw->live++;
		gw_engine_submit_locked(gw, q);
	}
	r->refs += (int)r->n_choices - 1; /* one held by each other choice */
	x->req = r;
	pthread_mutex_unlock(&gw->lock);
	gw_engine_wake(gw);
	return MHD_YES;
}

/* Called again after the pump resumed the connection. */
static enum MHD_Result on_resumed(struct gw *gw, struct MHD_Connection *c, struct gw_http *x)
{
	struct gw_req *r = x->req;
	struct gw_api_err e = {0};
	char *body = NULL;
	size_t len = 0;
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
		enum MHD_Result ok = start_stream(gw, c, x);
		pthread_mutex_unlock(&gw->lock);
		return ok;
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
	else
		body = gw_api_response_json(r, &len);
	pthread_mutex_unlock(&gw->lock);
	if (e.status)
		return respond_err(c, x, &e);
	return respond_json(c, x, 200, body, len);
}

/* --- routing --------------------------------------------------------------------- */

static enum route route_of(const char *url, const char **method)
{
	static const struct {
		const char *url, *method;
		enum route r;
	} routes[] = {
		{"/health", "GET", R_HEALTH},
		{"/metrics", "GET", R_METRICS},
		{"/v1/models", "GET", R_MODELS},
		{"/v1/completions", "POST", R_COMPLETIONS},
		{"/v1/chat/completions", "POST", R_CHAT},
	};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (!strcmp(url, routes[i].url)) {
			*method = routes[i].method;
			return routes[i].r;
		}
	return R_NONE;
}

/* Constant time in the key's length: the comparison does not leak a prefix. */
static bool key_ok(const struct gw *gw, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *k = gw->o.api_key;
	if (!h || strncmp(h, "Bearer ", 7))
		return false;
	h += 7;
	size_t hl = strlen(h), kl = strlen(k);
	unsigned char d = hl != kl;
	for (size_t i = 0; i < kl; i++)
		d |= (unsigned char)(k[i] ^ (i < hl ? h[i] : 0));
	return d == 0;
}

/* The first call for a request: headers are in, the body is not. */
static enum MHD_Result on_headers(struct gw *gw, struct MHD_Connection *c, const char *url,
				  const char *method, struct gw_http *x)
{
	const char *want = NULL;
	char msg[300];
	x->route = route_of(url, &want);
	if (x->route == R_NONE) {
		snprintf(msg, sizeof(msg), "no route %.200s (POST /v1/completions, POST "
					   "/v1/chat/completions, GET /v1/models, /health, /metrics)", url);
		return fail(c, x, 404, "invalid_request_error", "not_found", msg);
	}
	if (strcmp(method, want)) {
		snprintf(msg, sizeof(msg), "%s takes %s", url, want);
		return fail(c, x, 405, "invalid_request_error", "method_not_allowed", msg);
	}
	if (gw->o.api_key && !strncmp(url, "/v1/", 4) && !key_ok(gw, c))
		return fail(c, x, 401, "invalid_request_error", "invalid_api_key",
			    "Incorrect API key provided (Authorization: Bearer KEY)");
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
		*con_cls = x;
		gw_log(gw, 3, "%s %s", method, url);
		return on_headers(gw, c, url, method, x);
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
	gw_conns_working(gw, c, true); /* the whole request is in */
	switch (x->route) {
	case R_HEALTH: return get_health(gw, c, x);
	case R_METRICS: return get_metrics(gw, c, x);
	case R_MODELS: return get_models(gw, c, x);
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
	gw_log(gw, 2, "http: %s", line);
}

int gw_http_start(struct gw *gw)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char port[16], err[256];
	snprintf(port, sizeof(port), "%d", gw->o.port);
	int r = getaddrinfo(gw->o.host, port, &hints, &ai);
	if (r) {
		gw_log(gw, 0, "--host %s: %s", gw->o.host, gai_strerror(r));
		return -EINVAL;
	}
	struct allm_ctl_client_opts co = {.name = gw->o.engine, .runtime_dir = gw->o.runtime_dir};
	if ((r = allm_ctl_client_open(&co, &gw->ctl, err, sizeof(err)))) {
		gw_log(gw, 0, "control-plane client: %s", err);
		freeaddrinfo(ai);
		return r;
	}
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
	/* the logger first: options before it would log through libmicrohttpd's own */
	gw->httpd = MHD_start_daemon(flags, (uint16_t)gw->o.port, NULL, NULL, on_request, gw,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, gw,
		MHD_OPTION_SOCK_ADDR, ai->ai_addr,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)gw->o.threads,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)gw->o.max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)gw->o.timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)GW_CONN_MEMORY,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
		MHD_OPTION_NOTIFY_CONNECTION, gw_conns_notify, gw,
		MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!gw->httpd) {
		gw_log(gw, 0, "cannot listen on %s:%d (in use? not an address of this machine?)",
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
	if (fd != MHD_INVALID_SOCKET)
		close(fd); /* ours now: nobody connects any more */
}

void gw_http_stop(struct gw *gw)
{
	if (gw->httpd)
		MHD_stop_daemon(gw->httpd);
	gw->httpd = NULL;
	allm_ctl_client_close(gw->ctl);
	gw->ctl = NULL;
}
