/* The control server's sockets: binding, the ROUTER's message loop (frames,
 * bounds, the reply envelope), and the telemetry the engine's events produce.
 * What each command does is in ctl-commands.c, the status map in ctl-telemetry.c. */
#include "ctl-internal.h"
#include "ctl-server.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zmq.h>

/* ZeroMQ drops (disconnects) a peer whose message exceeds this, before we see it;
 * below it, anything over ALLM_CTL_MAX_MSG gets an error reply. Bounds what one
 * hostile peer makes the engine buffer. */
#define CTL_ZMQ_MAXMSG (4 << 20)
/* Commands handled per pump, so a flood cannot starve the engine's steps. */
#define CTL_PUMP_BUDGET 64
/* At stop, how long the last replies (a `shutdown`'s) may take to leave. */
#define CTL_STOP_LINGER_MS 250
/* Frames kept of one message: [identity][delimiter][body]; more is an error. */
#define CTL_MAX_FRAMES 3

void ctl_log(const struct ctl_server *s, enum allm_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	s->h.ops->log(s->h.user, level, fmt, ap);
	va_end(ap);
}

/* KV events log through the host too. */
static void kv_log(void *user, enum allm_log_level level, const char *fmt, ...)
{
	const struct ctl_server *s = user;
	va_list ap;
	va_start(ap, fmt);
	s->h.ops->log(s->h.user, level, fmt, ap);
	va_end(ap);
}

static void *bind_socket(struct ctl_server *s, int type, const char *path)
{
	char ep[640];
	int zero = 0;
	int64_t maxmsg = CTL_ZMQ_MAXMSG;
	snprintf(ep, sizeof(ep), "ipc://%s", path);
	void *z = zmq_socket(s->zctx, type);
	if (!z)
		return NULL;
	unlink(path); /* a dead engine's file; a live one was ruled out by the caller */
	if (zmq_setsockopt(z, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_setsockopt(z, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) || zmq_bind(z, ep)) {
		int e = errno;
		ctl_log(s, ALLM_LOG_ERROR, "cannot bind %s: %s", ep, zmq_strerror(e));
		zmq_close(z);
		errno = e;
		return NULL;
	}
	return z;
}

int ctl_server_start(const struct ctl_host *host, struct ctl_server **ret)
{
	struct ctl_server *s = allm_calloc(1, sizeof(*s));
	size_t len = sizeof(int);
	int r;
	if (!s)
		return -ENOMEM;
	s->h = *host;
	s->router_fd = -1;
	s->start = allm_now();
	s->clock0 = allm_backend_clock(host->rt->be);
	allm_ctl_enc_init(&s->out);
	allm_ctl_enc_init(&s->body);
	ctl_stats_reset(&s->stats);
	ctl_metrics_reset(&s->metrics, host->rt->model->cfg.max_pos);
	if ((r = allm_ctl_path(host->runtime_dir, host->name, "ctl", s->ctl_path, sizeof(s->ctl_path))) ||
	    (r = allm_ctl_path(host->runtime_dir, host->name, "pub", s->pub_path, sizeof(s->pub_path)))) {
		ctl_log(s, ALLM_LOG_ERROR, "control socket path too long in %s", host->runtime_dir);
		goto fail;
	}
	if (!(s->zctx = zmq_ctx_new()) || !(s->router = bind_socket(s, ZMQ_ROUTER, s->ctl_path)) ||
	    !(s->pub = bind_socket(s, ZMQ_PUB, s->pub_path)) ||
	    zmq_getsockopt(s->router, ZMQ_FD, &s->router_fd, &len)) {
		r = -errno;
		s->router_fd = -1;
		goto fail;
	}
	if (host->kv_events && host->kv_events->endpoint &&
	    (r = ctl_kvevents_start(host->kv_events, allm_engine_prefix_cache(host->eng), kv_log, s, &s->kv)))
		goto fail;
	*ret = s;
	return 0;
fail:
	ctl_server_stop(s);
	return r ? r : -EIO;
}

void ctl_server_stop(struct ctl_server *s)
{
	if (!s)
		return;
	int linger = CTL_STOP_LINGER_MS;
	ctl_server_stop_events(s);
	if (s->router) {
		zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof(linger));
		zmq_close(s->router);
		unlink(s->ctl_path);
	}
	if (s->pub) {
		zmq_setsockopt(s->pub, ZMQ_LINGER, &linger, sizeof(linger));
		zmq_close(s->pub);
		unlink(s->pub_path);
	}
	if (s->zctx)
		zmq_ctx_term(s->zctx);
	allm_ctl_enc_free(&s->out);
	allm_ctl_enc_free(&s->body);
	allm_free(s);
}

int ctl_server_fd(const struct ctl_server *s)
{
	return s->router_fd;
}

/* --- commands -------------------------------------------------------------------- */

/* Sends [identity][delimiter?][s->out]. A peer that is gone or not reading loses
 * its reply (DONTWAIT): the engine never blocks on a peer. */
static void send_reply(struct ctl_server *s, zmq_msg_t *ident, bool delim)
{
	if (s->out.err) {
		/* the result did not fit (ENOMEM, or over ALLM_CTL_MAX_REPLY) */
		return;
	}
	if (zmq_send(s->router, zmq_msg_data(ident), zmq_msg_size(ident), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return;
	if (delim && zmq_send(s->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return;
	zmq_send(s->router, s->out.sb.data, s->out.sb.size, ZMQ_DONTWAIT);
}

static void reply_error(struct ctl_server *s, zmq_msg_t *ident, bool delim, uint64_t id,
			const char *msg)
{
	allm_ctl_enc_reset(&s->out);
	allm_ctl_enc_map(&s->out, 3);
	allm_ctl_enc_str(&s->out, "id");
	allm_ctl_enc_uint(&s->out, id);
	allm_ctl_enc_kbool(&s->out, "ok", false);
	allm_ctl_enc_kstr(&s->out, "error", msg);
	s->n_errors++;
	ctl_log(s, ALLM_LOG_DEBUG, "control: command %llu refused: %s", (unsigned long long)id, msg);
	send_reply(s, ident, delim);
}

/* Checks the envelope {"id": uint, "cmd": str, "args": map?}; *id is the id when
 * it is valid (else 0, which the error reply carries). */
static int check_request(const msgpack_object *root, uint64_t *id, char *err, size_t errlen)
{
	const msgpack_object *v = allm_ctl_get(root, "id");
	*id = 0;
	if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		snprintf(err, errlen, "request needs \"id\": a non-negative integer");
		return -EINVAL;
	}
	*id = v->via.u64;
	for (uint32_t i = 0; i < root->via.map.size; i++) {
		const msgpack_object *k = &root->via.map.ptr[i].key;
		if (!allm_ctl_str_eq(k, "id") && !allm_ctl_str_eq(k, "cmd") && !allm_ctl_str_eq(k, "args")) {
			snprintf(err, errlen, "unknown field \"%.*s\" (a request has id, cmd, args)",
				 (int)ALLM_MIN(k->via.str.size, 40u), k->via.str.ptr);
			return -EINVAL;
		}
	}
	v = allm_ctl_get(root, "cmd");
	if (!v || v->type != MSGPACK_OBJECT_STR) {
		snprintf(err, errlen, "request needs \"cmd\": a string");
		return -EINVAL;
	}
	v = allm_ctl_get(root, "args");
	if (v && v->type != MSGPACK_OBJECT_MAP) {
		snprintf(err, errlen, "\"args\" must be a map");
		return -EINVAL;
	}
	return 0;
}

/* Receives one whole message (frames past CTL_MAX_FRAMES are read and counted).
 * Returns the number of frames, or -errno (EAGAIN: none). */
static int recv_message(void *z, zmq_msg_t *fr, int *n_kept)
{
	int n = 0;
	*n_kept = 0;
	for (;;) {
		zmq_msg_t tmp, *m = n < CTL_MAX_FRAMES ? &fr[n] : &tmp;
		zmq_msg_init(m);
		if (zmq_msg_recv(m, z, ZMQ_DONTWAIT) < 0) {
			int e = errno;
			zmq_msg_close(m);
			if (n == 0)
				return -e;
			return n; /* cannot happen: frames of a message arrive together */
		}
		bool more = zmq_msg_more(m);
		if (m == &tmp)
			zmq_msg_close(m);
		else
			(*n_kept)++;
		n++;
		if (!more)
			return n;
	}
}

static void handle_one(struct ctl_server *s)
{
	zmq_msg_t fr[CTL_MAX_FRAMES];
	int kept, n = recv_message(s->router, fr, &kept);
	char err[512];
	if (n <= 0)
		return;
	s->n_commands++;
	zmq_msg_t *ident = &fr[0];
	/* [identity][body] or [identity][empty delimiter][body] (REQ peers) */
	bool delim = n >= 3 && zmq_msg_size(&fr[1]) == 0;
	int body_at = delim ? 2 : 1;
	struct allm_ctl_msg *m = NULL;
	uint64_t id = 0;
	if (n == 1) {
		reply_error(s, ident, false, 0, "empty message (no body frame)");
		goto out;
	}
	if (n != body_at + 1) {
		reply_error(s, ident, delim, 0, "extra frames: a command is one msgpack frame");
		goto out;
	}
	zmq_msg_t *body = &fr[body_at];
	int r = allm_ctl_decode(zmq_msg_data(body), zmq_msg_size(body), ALLM_CTL_MAX_MSG, &m, err,
				sizeof(err));
	if (r) {
		reply_error(s, ident, delim, 0, err);
		goto out;
	}
	if (check_request(m->root, &id, err, sizeof(err))) {
		reply_error(s, ident, delim, id, err);
		goto out;
	}
	allm_ctl_enc_reset(&s->body);
	err[0] = 0;
	if (ctl_dispatch(s, m->root, err, sizeof(err)) || s->body.err) {
		reply_error(s, ident, delim, id,
			    err[0] ? err : s->body.err == -EMSGSIZE ? "result too large" : "out of memory");
		goto out;
	}
	allm_ctl_enc_reset(&s->out);
	allm_ctl_enc_map(&s->out, 3);
	allm_ctl_enc_str(&s->out, "id");
	allm_ctl_enc_uint(&s->out, id);
	allm_ctl_enc_kbool(&s->out, "ok", true);
	allm_ctl_enc_kraw(&s->out, "result", s->body.sb.data, s->body.sb.size);
	send_reply(s, ident, delim);
out:
	allm_ctl_msg_free(m);
	for (int i = 0; i < kept; i++)
		zmq_msg_close(&fr[i]);
}

void ctl_server_flush_events(struct ctl_server *s)
{
	if (s)
		ctl_kvevents_flush(s->kv);
}

void ctl_server_stop_events(struct ctl_server *s)
{
	if (!s || !s->kv)
		return;
	ctl_kvevents_flush(s->kv); /* the last step's, for subscribers still there */
	ctl_kvevents_stop(s->kv);
	s->kv = NULL;
}

bool ctl_server_pump(struct ctl_server *s)
{
	if (!s)
		return false;
	/* replays; asleep, the 10 Hz tick wakes us for new ones */
	bool replays_left = ctl_kvevents_pump(s->kv);
	for (int i = 0; i < CTL_PUMP_BUDGET; i++) {
		uint32_t ev = 0;
		size_t len = sizeof(ev);
		/* ZMQ_EVENTS, not the fd, says whether a message waits; re-read after
		 * every reply, since sending can process the commands that raised it */
		if (zmq_getsockopt(s->router, ZMQ_EVENTS, &ev, &len) || !(ev & ZMQ_POLLIN))
			return replays_left;
		handle_one(s);
	}
	return true;
}

/* --- telemetry ------------------------------------------------------------------- */

void ctl_publish(struct ctl_server *s, const char *topic, const struct allm_ctl_enc *e)
{
	if (e->err)
		return;
	/* PUB never blocks: a slow subscriber loses messages past its queue */
	if (zmq_send(s->pub, topic, strlen(topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return;
	zmq_send(s->pub, e->sb.data, e->sb.size, ZMQ_DONTWAIT);
}

void ctl_server_tick(struct ctl_server *s)
{
	if (!s)
		return;
	struct allm_engine_stats st;
	allm_engine_get_stats(s->h.eng, &st);
	/* rates on the engine's clock: simulated time on a simulated device */
	ctl_stats_sample(&s->stats, allm_backend_clock(s->h.rt->be), st.prompt_tokens + st.generated_tokens,
			 st.generated_tokens);
	allm_ctl_enc_reset(&s->out);
	ctl_encode_status(s, &s->out);
	ctl_publish(s, "stats", &s->out);
}

void ctl_server_on_finish(struct ctl_server *s, const struct allm_result *r, uint32_t client_id)
{
	if (!s)
		return;
	int32_t gen = r->n_generated;
	double ttft, tpot, e2e, wta;
	ctl_stats_add(&s->stats, r);
	ctl_metrics_on_finish(&s->metrics, r);
	ctl_stats_request(r, &ttft, &tpot, &e2e, &wta);
	struct allm_ctl_enc *e = &s->out;
	allm_ctl_enc_reset(e);
	allm_ctl_enc_map(e, 13);
	allm_ctl_enc_kint(e, "id", r->id);
	allm_ctl_enc_kint(e, "client", client_id);
	allm_ctl_enc_str(e, "tag");
	allm_ctl_enc_uint(e, r->tag);
	allm_ctl_enc_kint(e, "prompt_tokens", r->n_prompt);
	allm_ctl_enc_kint(e, "generated", gen);
	allm_ctl_enc_kstr(e, "finish", allm_end_name(r->end));
	allm_ctl_enc_kdouble(e, "queue_ms", (r->first_sched - r->arrival) * 1e3);
	allm_ctl_enc_kdouble(e, "ttft_ms", ttft);
	allm_ctl_enc_kdouble(e, "tpot_ms", tpot);
	allm_ctl_enc_kdouble(e, "e2e_ms", e2e);
	allm_ctl_enc_kdouble(e, "weighted_turnaround", wta);
	allm_ctl_enc_kint(e, "preemptions", r->n_preempt_swap + r->n_preempt_recompute);
	allm_ctl_enc_kstr(e, "error", r->end == ALLM_END_ERROR ? r->error : NULL);
	ctl_publish(s, "request", e);
}

void ctl_server_on_decision(struct ctl_server *s, const struct allm_decision *dec, bool measured)
{
	if (!s)
		return;
	struct allm_ctl_enc *e = &s->out;
	allm_ctl_enc_reset(e);
	bool restore = dec->kind == ALLM_DECISION_RESTORE;
	allm_ctl_enc_map(e, 18);
	allm_ctl_enc_kint(e, "seq", dec->seq_no);
	/* seconds on the engine's clock since this server started */
	allm_ctl_enc_kdouble(e, "time_s", dec->time - s->clock0);
	/* preempt: Alg. 1's choice for a victim; restore: a cached prefix found in
	 * a lower tier, restored or recomputed */
	allm_ctl_enc_kstr(e, "kind", restore ? "restore" : "preempt");
	allm_ctl_enc_kint(e, "request", dec->req_id);
	allm_ctl_enc_str(e, "tag");
	allm_ctl_enc_uint(e, dec->tag);
	allm_ctl_enc_kint(e, "length", dec->n_tokens);
	allm_ctl_enc_kint(e, "blocks", dec->n_blocks);
	allm_ctl_enc_kdouble(e, "priority", dec->priority);
	/* restore: the swap prediction is the restore of every block, the disk one
	 * what the choice costs */
	allm_ctl_enc_kdouble(e, "pred_swap_ms", dec->pred_swap_s * 1e3);
	allm_ctl_enc_kdouble(e, "pred_recompute_ms", dec->pred_recompute_s * 1e3);
	allm_ctl_enc_kdouble(e, "pred_disk_ms", dec->pred_disk_s * 1e3); /* nil without a disk tier */
	allm_ctl_enc_kstr(e, "choice", allm_choice_name(dec->choice));
	/* preempt: where the KV went (the host pool, the disk, or nowhere: recompute);
	 * restore: the lowest tier the prefix was found in */
	allm_ctl_enc_kstr(e, "tier", restore ? allm_kv_tier_name(dec->tier)
				     : dec->choice == ALLM_CHOICE_SWAP ? "host"
				     : dec->choice == ALLM_CHOICE_DISK ? "disk" : "none");
	allm_ctl_enc_kint(e, "restored_blocks", restore ? dec->n_restored : 0);
	allm_ctl_enc_kstr(e, "reason", allm_reason_text(dec->reason));
	/* taken on the first estimate, before the predictors were calibrated */
	allm_ctl_enc_kbool(e, "estimated", dec->estimated);
	allm_ctl_enc_kdouble(e, "measured_ms", measured ? dec->measured_s * 1e3 : NAN);
	allm_ctl_enc_kbool(e, "measured", measured);
	ctl_publish(s, "decision", e);
}
