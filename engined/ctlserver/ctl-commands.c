/* The control commands of ctl/PROTOCOL.md. Each checks all of its input before it
 * changes anything; results go into s->body as one map. */
#include "ctl-internal.h"

#include "engine-calib.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CTL_REQUESTS_DEFAULT 100
#define CTL_REQUESTS_MAX 10000
static const msgpack_object *args_of(const msgpack_object *req)
{
	return allm_ctl_get(req, "args"); /* a map or absent: checked by the server */
}

/* An integer given as an int or a decimal string ("64"), in [lo, hi]. */
static int int_arg(const msgpack_object *v, const char *key, int64_t lo, int64_t hi,
		   int64_t *ret, char *err, size_t errlen)
{
	char buf[32];
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (v->via.u64 > (uint64_t)hi || (int64_t)v->via.u64 < lo)
			goto range;
		*ret = (int64_t)v->via.u64;
		return 0;
	}
	if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		goto range;
	if (v->type != MSGPACK_OBJECT_STR)
		return allm_errtext(err, errlen, -EINVAL, "%s: expected an integer", key);
	if (v->via.str.size == 0 || v->via.str.size >= sizeof(buf))
		return allm_errtext(err, errlen, -EINVAL, "%s: '%.*s' is not an integer", key,
			    (int)ALLM_MIN(v->via.str.size, 24u), v->via.str.ptr);
	memcpy(buf, v->via.str.ptr, v->via.str.size);
	buf[v->via.str.size] = 0;
	char *end;
	errno = 0;
	long long x = strtoll(buf, &end, 10);
	if (end == buf || *end)
		return allm_errtext(err, errlen, -EINVAL, "%s: '%s' is not an integer", key, buf);
	if (errno == ERANGE || x < lo || x > hi)
		goto range;
	*ret = x;
	return 0;
range:
	return allm_errtext(err, errlen, -EINVAL, "%s must be in %lld..%lld", key, (long long)lo, (long long)hi);
}

/* --- calibrate ------------------------------------------------------------------- */

struct calib_pub {
	struct ctl_server *s;
	double last;
};

static void publish_calib(struct ctl_server *s, const char *phase, int done, int total,
			  bool finished, const char *error)
{
	struct allm_ctl_enc *e = &s->out;
	allm_ctl_enc_reset(e);
	allm_ctl_enc_map(e, 5);
	allm_ctl_enc_kstr(e, "phase", phase);
	allm_ctl_enc_kint(e, "done", done);
	allm_ctl_enc_kint(e, "total", total);
	allm_ctl_enc_kbool(e, "finished", finished);
	allm_ctl_enc_kstr(e, "error", error);
	ctl_publish(s, "calibrate", e);
}

static void calib_progress(void *user, int done, int total)
{
	struct calib_pub *c = user;
	double now = allm_now();
	/* at most ~20 messages a second, and always the last one */
	if (done < total && now - c->last < 0.05)
		return;
	c->last = now;
	publish_calib(c->s, "measuring", done, total, false, NULL);
}

static int cmd_calibrate(struct ctl_server *s, char *err, size_t errlen)
{
	const struct ctl_host *h = &s->h;
	struct allm_err e = {{0}};
	int64_t busy = ctl_in_flight(s);
	if (busy > 0)
		return allm_errtext(err, errlen, -EINVAL, "engine busy: %lld requests in flight (drain first)", (long long)busy);
	struct calib_pub cp = {s, 0};
	ctl_log(s, ALLM_LOG_INFO, "control: calibrating the predictors");
	s->calibrating = true;
	publish_calib(s, "start", 0, 0, false, NULL);
	/* synchronous: the loop serves nothing meanwhile, which is why it needs an
	 * idle engine (and the ring clients' new work waits in their rings) */
	int r = allm_engine_calibrate(h->eng, calib_progress, &cp, &e);
	s->calibrating = false;
	if (r) {
		publish_calib(s, "failed", 0, 0, true, e.msg);
		return allm_errtext(err, errlen, -EINVAL, "calibration failed: %s", e.msg);
	}
	char note[64] = "not saved";
	if (h->profile_path[0]) {
		struct allm_err se = {{0}};
		if (allm_predictor_save(h->pred, h->profile_path, &se))
			ctl_log(s, ALLM_LOG_WARN, "control: cannot save the profile: %s", se.msg);
		else
			snprintf(note, sizeof(note), "saved");
	}
	publish_calib(s, "done", 1, 1, true, NULL);
	struct allm_predictor_info in;
	allm_predictor_get_info(h->pred, &in);
	struct allm_ctl_enc *b = &s->body;
	allm_ctl_enc_map(b, 3);
	allm_ctl_enc_kmap(b, "swap", 5);
	allm_ctl_enc_kdouble(b, "out_bytes_per_s", in.bw[0]);
	allm_ctl_enc_kdouble(b, "in_bytes_per_s", in.bw[1]);
	allm_ctl_enc_kdouble(b, "out_latency_ms", in.lat[0] * 1e3);
	allm_ctl_enc_kdouble(b, "in_latency_ms", in.lat[1] * 1e3);
	allm_ctl_enc_kdouble(b, "calib_mape", in.calib_mape_swap);
	allm_ctl_enc_kmap(b, "recompute", 5);
	allm_ctl_enc_kdouble(b, "s", in.rc_coef[0]);
	allm_ctl_enc_kdouble(b, "s_per_token", in.rc_coef[1]);
	allm_ctl_enc_kdouble(b, "s_per_token_sq", in.rc_coef[2]);
	allm_ctl_enc_kdouble(b, "s_per_seq", in.rc_coef[3]);
	allm_ctl_enc_kdouble(b, "calib_mape", in.calib_mape_recompute);
	allm_ctl_enc_kstr(b, "profile", h->profile_path[0] ? h->profile_path : NULL);
	ctl_log(s, ALLM_LOG_INFO, "control: calibrated (profile %s)", note);
	return 0;
}

/* --- requests, cancel ------------------------------------------------------------ */

static void enc_request(struct ctl_server *s, const struct allm_request *req, double now)
{
	static const char *const st[] = {"waiting", "running", "swapped", "finished"};
	struct allm_ctl_enc *b = &s->body;
	struct allm_request_info r;
	allm_engine_info(req, now, &r);
	allm_ctl_enc_map(b, 12);
	allm_ctl_enc_kint(b, "id", r.id);
	allm_ctl_enc_kint(b, "client", s->h.ops->request_client(s->h.user, r.user));
	allm_ctl_enc_str(b, "tag");
	allm_ctl_enc_uint(b, r.tag);
	allm_ctl_enc_kstr(b, "state", st[r.state & 3]);
	allm_ctl_enc_kint(b, "prompt_tokens", r.n_prompt);
	allm_ctl_enc_kint(b, "generated", r.n_generated);
	allm_ctl_enc_kint(b, "length", r.length);
	allm_ctl_enc_kdouble(b, "priority", r.priority);
	allm_ctl_enc_kint(b, "blocks_gpu", r.blocks_gpu);
	allm_ctl_enc_kint(b, "blocks_cpu", r.blocks_cpu);
	allm_ctl_enc_kint(b, "preemptions", r.n_preemptions);
	allm_ctl_enc_kdouble(b, "age_s", r.age_s);
}

static int cmd_requests(struct ctl_server *s, const msgpack_object *args, char *err, size_t errlen)
{
	int64_t limit = CTL_REQUESTS_DEFAULT;
	const msgpack_object *v = allm_ctl_get(args, "limit");
	int r;
	if (args && args->via.map.size > (v ? 1u : 0u))
		return allm_errtext(err, errlen, -EINVAL, "requests takes only 'limit'");
	if (v && (r = int_arg(v, "limit", 1, CTL_REQUESTS_MAX, &limit, err, errlen)))
		return r;
	int64_t total = ctl_in_flight(s);
	int64_t n = ALLM_MIN(total, limit);
	const struct allm_request **rs = allm_malloc((size_t)ALLM_MAX(n, 1) * sizeof(*rs));
	if (!rs)
		return allm_errtext(err, errlen, -EINVAL, "out of memory");
	int got = 0;
	static const enum allm_req_state qs[] = {ALLM_REQ_RUNNING, ALLM_REQ_SWAPPED, ALLM_REQ_WAITING};
	for (int q = 0; q < 3 && got < n; q++)
		got += allm_engine_list(s->h.eng, qs[q], rs + got, (int)(n - got));
	double now = allm_backend_clock(s->h.rt->be); /* ages and priorities: the engine's clock */
	allm_ctl_enc_map(&s->body, 2);
	allm_ctl_enc_karray(&s->body, "requests", (uint32_t)got);
	for (int i = 0; i < got; i++)
		enc_request(s, rs[i], now);
	allm_ctl_enc_kbool(&s->body, "truncated", total > got);
	allm_free((void *)rs);
	return 0;
}

static int cmd_cancel(struct ctl_server *s, const msgpack_object *args, char *err, size_t errlen)
{
	const msgpack_object *v = allm_ctl_get(args, "id");
	int64_t id;
	int r;
	if (!v || args->via.map.size != 1)
		return allm_errtext(err, errlen, -EINVAL, "cancel needs args {\"id\": request id}");
	if ((r = int_arg(v, "id", 0, INT64_MAX, &id, err, errlen)))
		return r;
	if (allm_engine_cancel(s->h.eng, id))
		return allm_errtext(err, errlen, -EINVAL, "no request %lld", (long long)id);
	ctl_log(s, ALLM_LOG_INFO, "control: cancelled request %lld", (long long)id);
	allm_ctl_enc_map(&s->body, 1);
	allm_ctl_enc_kint(&s->body, "id", id);
	return 0;
}

/* --- dispatch -------------------------------------------------------------------- */

static int no_args(const msgpack_object *args, const char *cmd, char *err, size_t errlen)
{
	if (args && args->via.map.size)
		return allm_errtext(err, errlen, -EINVAL, "%s takes no args", cmd);
	return 0;
}

int ctl_dispatch(struct ctl_server *s, const msgpack_object *req, char *err, size_t errlen)
{
	const msgpack_object *cmd = allm_ctl_get(req, "cmd"), *args = args_of(req);
	const struct ctl_host *h = &s->h;
	struct allm_ctl_enc *b = &s->body;
	int r;
	if (allm_ctl_str_eq(cmd, "status")) {
		if ((r = no_args(args, "status", err, errlen)))
			return r;
		ctl_encode_status(s, b);
	} else if (allm_ctl_str_eq(cmd, "metrics")) {
		if ((r = no_args(args, "metrics", err, errlen)))
			return r;
		ctl_metrics_encode(&s->metrics, &s->h, &s->stats, b);
	} else if (allm_ctl_str_eq(cmd, "set")) {
		char keys[256];
		r = ctl_cmd_set(s, args, err, errlen, keys, sizeof(keys));
		if (!r)
			ctl_log(s, ALLM_LOG_INFO, "control: set%s", keys);
		return r;
	} else if (allm_ctl_str_eq(cmd, "calibrate")) {
		if ((r = no_args(args, "calibrate", err, errlen)))
			return r;
		return cmd_calibrate(s, err, errlen);
	} else if (allm_ctl_str_eq(cmd, "requests")) {
		return cmd_requests(s, args, err, errlen);
	} else if (allm_ctl_str_eq(cmd, "cancel")) {
		return cmd_cancel(s, args, err, errlen);
	} else if (allm_ctl_str_eq(cmd, "reset-stats")) {
		if ((r = no_args(args, "reset-stats", err, errlen)))
			return r;
		allm_engine_reset_stats(h->eng);
		allm_predictor_reset_stats(h->pred);
		ctl_stats_reset(&s->stats);
		ctl_metrics_reset(&s->metrics, h->rt->model->cfg.max_pos);
		ctl_log(s, ALLM_LOG_INFO, "control: statistics reset");
		allm_ctl_enc_map(b, 0);
	} else if (allm_ctl_str_eq(cmd, "cache-reset")) {
		if ((r = no_args(args, "cache-reset", err, errlen)))
			return r;
		/* every cached block nobody holds, in every tier (DESIGN §5b) */
		int32_t n = allm_engine_cache_reset(h->eng);
		ctl_log(s, ALLM_LOG_INFO, "control: cache reset: %d cached blocks dropped", n);
		allm_ctl_enc_map(b, 1);
		allm_ctl_enc_kint(b, "dropped_blocks", n);
	} else if (allm_ctl_str_eq(cmd, "drain") || allm_ctl_str_eq(cmd, "shutdown")) {
		bool shut = allm_ctl_str_eq(cmd, "shutdown");
		if ((r = no_args(args, shut ? "shutdown" : "drain", err, errlen)))
			return r;
		enum ctl_host_state hs = h->ops->state(h->user);
		if (shut)
			h->ops->shutdown(h->user, "shutdown command");
		else if (hs == CTL_HOST_SERVING) {
			h->ops->set_paused(h->user, true);
			ctl_log(s, ALLM_LOG_INFO, "control: draining: new requests are refused (%lld in flight)",
			     (long long)ctl_in_flight(s));
		}
		allm_ctl_enc_map(b, 1);
		allm_ctl_enc_kint(b, "in_flight", ctl_in_flight(s));
	} else if (allm_ctl_str_eq(cmd, "resume")) {
		if ((r = no_args(args, "resume", err, errlen)))
			return r;
		enum ctl_host_state hs = h->ops->state(h->user);
		if (hs == CTL_HOST_SHUTTING_DOWN)
			return allm_errtext(err, errlen, -EINVAL, "the engine is shutting down");
		if (hs == CTL_HOST_PAUSED) {
			ctl_log(s, ALLM_LOG_INFO, "control: resumed: accepting new requests");
			h->ops->set_paused(h->user, false);
		}
		allm_ctl_enc_map(b, 0);
	} else {
		const char *p = cmd->via.str.ptr;
		return allm_errtext(err, errlen, -EINVAL,
			    "unknown command '%.*s' (status, metrics, set, calibrate, requests, cancel, "
			    "reset-stats, cache-reset, drain, resume, shutdown)",
			    (int)ALLM_MIN(cmd->via.str.size, 40u), p);
	}
	return 0;
}
