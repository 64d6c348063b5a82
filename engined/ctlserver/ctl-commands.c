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
/* Largest block count `set` accepts; memory is checked as well. */
#define CTL_MAX_BLOCKS (1 << 22)

static int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

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
		return errf(err, errlen, "%s: expected an integer", key);
	if (v->via.str.size == 0 || v->via.str.size >= sizeof(buf))
		return errf(err, errlen, "%s: '%.*s' is not an integer", key,
			    (int)ALLM_MIN(v->via.str.size, 24u), v->via.str.ptr);
	memcpy(buf, v->via.str.ptr, v->via.str.size);
	buf[v->via.str.size] = 0;
	char *end;
	errno = 0;
	long long x = strtoll(buf, &end, 10);
	if (end == buf || *end)
		return errf(err, errlen, "%s: '%s' is not an integer", key, buf);
	if (errno == ERANGE || x < lo || x > hi)
		goto range;
	*ret = x;
	return 0;
range:
	return errf(err, errlen, "%s must be in %lld..%lld", key, (long long)lo, (long long)hi);
}

/* A number given as an int, a float or a decimal string ("1.5"). */
static int num_arg(const msgpack_object *v, const char *key, double *ret, char *err, size_t errlen)
{
	char buf[32];
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER || v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*ret = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : (double)v->via.i64;
		return 0;
	}
	if (v->type == MSGPACK_OBJECT_FLOAT32 || v->type == MSGPACK_OBJECT_FLOAT64) {
		*ret = v->via.f64;
		return 0;
	}
	if (v->type != MSGPACK_OBJECT_STR || v->via.str.size == 0 || v->via.str.size >= sizeof(buf))
		return errf(err, errlen, "%s: expected a number", key);
	memcpy(buf, v->via.str.ptr, v->via.str.size);
	buf[v->via.str.size] = 0;
	char *end;
	errno = 0;
	*ret = strtod(buf, &end);
	if (end == buf || *end || errno == ERANGE || !isfinite(*ret))
		return errf(err, errlen, "%s: '%s' is not a number", key, buf);
	return 0;
}

/* --- set ------------------------------------------------------------------------- */

enum { K_GPU, K_CPU, K_SEQS, K_TOKENS, K_PREEMPT, K_SCHED, K_CHUNKED, K_WAIT, K_DISK, K_OVER, K_PREFIX, K_COUNT };
static const char *const set_keys[K_COUNT] = {"gpu_blocks", "cpu_blocks", "max_num_seqs",
					       "max_num_batched_tokens", "preempt", "sched",
					       "chunked_prefill", "max_wait_factor", "disk_blocks",
					       "admit_overcommit", "prefix_caching"};

struct set_plan {
	bool has[K_COUNT];
	int64_t num[K_COUNT];
	double overcommit;
	enum allm_preempt_mode preempt;
	enum allm_sched_mode sched;
	bool chunked;
	bool prefix;
};

/* Most blocks a pool may be given: the ceiling above and the machine's memory. */
static int64_t max_blocks(const struct ctl_server *s)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t bb = s->h.rt->kv->block_bytes ? s->h.rt->kv->block_bytes : 1;
	if (pages <= 0 || psz <= 0)
		return CTL_MAX_BLOCKS;
	return ALLM_MAX(1, ALLM_MIN((int64_t)CTL_MAX_BLOCKS, (int64_t)((uint64_t)pages * (uint64_t)psz / bb)));
}

static int plan_set(struct ctl_server *s, const msgpack_object *args, struct set_plan *p,
		    char *err, size_t errlen)
{
	char v[16];
	memset(p, 0, sizeof(*p));
	if (!args || args->via.map.size == 0)
		return errf(err, errlen, "set needs at least one KEY: value in args");
	for (uint32_t i = 0; i < args->via.map.size; i++) {
		const msgpack_object *k = &args->via.map.ptr[i].key, *val = &args->via.map.ptr[i].val;
		int key = -1;
		for (int j = 0; j < K_COUNT; j++)
			if (allm_ctl_str_eq(k, set_keys[j]))
				key = j;
		if (key < 0)
			return errf(err, errlen,
				    "unknown key '%.*s' (gpu_blocks, cpu_blocks, max_num_seqs, "
				    "max_num_batched_tokens, preempt, sched, chunked_prefill, "
				    "max_wait_factor, disk_blocks, admit_overcommit, prefix_caching)",
				    (int)ALLM_MIN(k->via.str.size, 40u), k->via.str.ptr);
		if (p->has[key])
			return errf(err, errlen, "%s given twice", set_keys[key]);
		p->has[key] = true;
		int r = 0;
		switch (key) {
		case K_GPU: r = int_arg(val, "gpu_blocks", 1, max_blocks(s), &p->num[key], err, errlen); break;
		case K_CPU: r = int_arg(val, "cpu_blocks", 0, max_blocks(s), &p->num[key], err, errlen); break;
		case K_SEQS: r = int_arg(val, "max_num_seqs", 1, 1 << 20, &p->num[key], err, errlen); break;
		case K_TOKENS:
			r = int_arg(val, "max_num_batched_tokens", 1, 1 << 24, &p->num[key], err, errlen);
			break;
		case K_WAIT:
			r = int_arg(val, "max_wait_factor", 0, 1000000, &p->num[key], err, errlen);
			break;
		case K_DISK:
			if (!allm_kv_disk_blocks(s->h.rt->kv))
				return errf(err, errlen, "disk_blocks: no disk tier (start with --disk-swap-space)");
			r = int_arg(val, "disk_blocks", 0, CTL_MAX_BLOCKS, &p->num[key], err, errlen);
			break;
		case K_OVER:
			if ((r = num_arg(val, "admit_overcommit", &p->overcommit, err, errlen)))
				break;
			if (!allm_engine_admit_overcommit_valid(p->overcommit))
				return errf(err, errlen, "admit_overcommit must be 0 (off) or in 0.1..1e6");
			break;
		case K_CHUNKED:
		case K_PREFIX:
			if (!allm_ctl_str_eq(val, "on") && !allm_ctl_str_eq(val, "off"))
				return errf(err, errlen, "%s: expected on or off", set_keys[key]);
			*(key == K_CHUNKED ? &p->chunked : &p->prefix) = allm_ctl_str_eq(val, "on");
			break;
		default:
			if (val->type != MSGPACK_OBJECT_STR || val->via.str.size >= sizeof(v))
				return errf(err, errlen, "%s: expected %s", set_keys[key],
					    key == K_PREEMPT ? "adaptive, recompute or swap" : "fair or fcfs");
			memcpy(v, val->via.str.ptr, val->via.str.size);
			v[val->via.str.size] = 0;
			if (key == K_PREEMPT ? allm_preempt_parse(v, &p->preempt) : allm_sched_parse(v, &p->sched))
				return errf(err, errlen, "%s: '%s' is not one of %s", set_keys[key], v,
					    key == K_PREEMPT ? "adaptive, recompute, swap" : "fair, fcfs");
		}
		if (r)
			return r;
	}
	return 0;
}

static void enc_change_int(struct allm_ctl_enc *e, const char *key, int64_t old, int64_t now)
{
	allm_ctl_enc_map(e, 3);
	allm_ctl_enc_kstr(e, "key", key);
	allm_ctl_enc_kint(e, "old", old);
	allm_ctl_enc_kint(e, "new", now);
}

static void enc_change_num(struct allm_ctl_enc *e, const char *key, double old, double now)
{
	allm_ctl_enc_map(e, 3);
	allm_ctl_enc_kstr(e, "key", key);
	allm_ctl_enc_kdouble(e, "old", old);
	allm_ctl_enc_kdouble(e, "new", now);
}

static void enc_change_str(struct allm_ctl_enc *e, const char *key, const char *old, const char *now)
{
	allm_ctl_enc_map(e, 3);
	allm_ctl_enc_kstr(e, "key", key);
	allm_ctl_enc_kstr(e, "old", old);
	allm_ctl_enc_kstr(e, "new", now);
}

/* All or nothing: the plan is fully validated; the only steps that can still fail
 * are the pool resizes (memory), done first and undone if the second fails. */
static int cmd_set(struct ctl_server *s, const msgpack_object *args, char *err, size_t errlen)
{
	struct allm_engine *eng = s->h.eng;
	struct set_plan p;
	struct allm_err e = {{0}};
	int r = plan_set(s, args, &p, err, errlen);
	if (r)
		return r;
	struct allm_engine_stats st;
	allm_engine_get_stats(eng, &st);
	const struct allm_engine_config cfg = *allm_engine_get_config(eng);
	int32_t old_gpu = st.gpu_total, old_cpu = st.cpu_total, old_disk = st.disk_total;
	if (p.has[K_GPU] && (r = allm_engine_set_gpu_blocks(eng, (int32_t)p.num[K_GPU], &e)))
		return errf(err, errlen, "gpu_blocks: %s", e.msg);
	if (p.has[K_CPU] && (r = allm_engine_set_cpu_blocks(eng, (int32_t)p.num[K_CPU], &e))) {
		if (p.has[K_GPU])
			allm_engine_set_gpu_blocks(eng, old_gpu, NULL); /* shrinks back: cannot fail */
		return errf(err, errlen, "cpu_blocks: %s", e.msg);
	}
	if (p.has[K_DISK] && (r = allm_engine_set_disk_blocks(eng, (int32_t)p.num[K_DISK], &e))) {
		if (p.has[K_CPU])
			allm_engine_set_cpu_blocks(eng, old_cpu, NULL);
		if (p.has[K_GPU])
			allm_engine_set_gpu_blocks(eng, old_gpu, NULL);
		return errf(err, errlen, "disk_blocks: %s", e.msg);
	}
	int32_t seqs = p.has[K_SEQS] ? (int32_t)p.num[K_SEQS] : cfg.max_num_seqs;
	int32_t toks = p.has[K_TOKENS] ? (int32_t)p.num[K_TOKENS] : cfg.max_num_batched_tokens;
	/* in range (checked above): cannot fail */
	allm_engine_set_limits(eng, seqs, toks, NULL);
	if (p.has[K_PREEMPT])
		allm_engine_set_preempt(eng, p.preempt);
	if (p.has[K_SCHED])
		allm_engine_set_sched(eng, p.sched);
	if (p.has[K_CHUNKED])
		allm_engine_set_chunked_prefill(eng, p.chunked);
	if (p.has[K_PREFIX])
		allm_engine_set_prefix_caching(eng, p.prefix);
	if (p.has[K_WAIT] && allm_engine_set_max_wait_factor(eng, (double)p.num[K_WAIT], &e))
		ctl_log(s, ALLM_LOG_WARN, "control: max_wait_factor: %s", e.msg); /* 0 or >= 1: checked above */
	if (p.has[K_OVER] && allm_engine_set_admit_overcommit(eng, p.overcommit, &e))
		ctl_log(s, ALLM_LOG_WARN, "control: admit_overcommit: %s", e.msg); /* in range: checked above */

	struct allm_ctl_enc *b = &s->body;
	uint32_t n = 0;
	for (int k = 0; k < K_COUNT; k++)
		n += p.has[k];
	allm_ctl_enc_map(b, 1);
	allm_ctl_enc_karray(b, "changed", n);
	char log[256] = "";
	size_t lo = 0;
	for (int k = 0; k < K_COUNT; k++) {
		if (!p.has[k])
			continue;
		int64_t old = k == K_GPU ? old_gpu : k == K_CPU ? old_cpu : k == K_DISK ? old_disk
			      : k == K_SEQS ? cfg.max_num_seqs : cfg.max_num_batched_tokens;
		if (k == K_PREEMPT)
			enc_change_str(b, set_keys[k], allm_preempt_name(cfg.preempt), allm_preempt_name(p.preempt));
		else if (k == K_CHUNKED)
			enc_change_str(b, set_keys[k], cfg.chunked_prefill ? "on" : "off", p.chunked ? "on" : "off");
		else if (k == K_PREFIX)
			enc_change_str(b, set_keys[k], cfg.prefix_caching ? "on" : "off", p.prefix ? "on" : "off");
		else if (k == K_WAIT)
			enc_change_int(b, set_keys[k], (int64_t)cfg.max_wait_factor, p.num[k]);
		else if (k == K_OVER)
			enc_change_num(b, set_keys[k], cfg.admit_overcommit, p.overcommit);
		else if (k == K_SCHED)
			enc_change_str(b, set_keys[k], allm_sched_name(cfg.sched), allm_sched_name(p.sched));
		else
			enc_change_int(b, set_keys[k], old, p.num[k]);
		if (lo < sizeof(log))
			lo += (size_t)snprintf(log + lo, sizeof(log) - lo, " %s", set_keys[k]);
	}
	ctl_log(s, ALLM_LOG_INFO, "control: set%s", log);
	return 0;
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
		return errf(err, errlen, "engine busy: %lld requests in flight (drain first)", (long long)busy);
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
		return errf(err, errlen, "calibration failed: %s", e.msg);
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
		return errf(err, errlen, "requests takes only 'limit'");
	if (v && (r = int_arg(v, "limit", 1, CTL_REQUESTS_MAX, &limit, err, errlen)))
		return r;
	int64_t total = ctl_in_flight(s);
	int64_t n = ALLM_MIN(total, limit);
	const struct allm_request **rs = allm_malloc((size_t)ALLM_MAX(n, 1) * sizeof(*rs));
	if (!rs)
		return errf(err, errlen, "out of memory");
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
		return errf(err, errlen, "cancel needs args {\"id\": request id}");
	if ((r = int_arg(v, "id", 0, INT64_MAX, &id, err, errlen)))
		return r;
	if (allm_engine_cancel(s->h.eng, id))
		return errf(err, errlen, "no request %lld", (long long)id);
	ctl_log(s, ALLM_LOG_INFO, "control: cancelled request %lld", (long long)id);
	allm_ctl_enc_map(&s->body, 1);
	allm_ctl_enc_kint(&s->body, "id", id);
	return 0;
}

/* --- dispatch -------------------------------------------------------------------- */

static int no_args(const msgpack_object *args, const char *cmd, char *err, size_t errlen)
{
	if (args && args->via.map.size)
		return errf(err, errlen, "%s takes no args", cmd);
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
		ctl_metrics_encode(s, b);
	} else if (allm_ctl_str_eq(cmd, "set")) {
		return cmd_set(s, args, err, errlen);
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
			return errf(err, errlen, "the engine is shutting down");
		if (hs == CTL_HOST_PAUSED) {
			ctl_log(s, ALLM_LOG_INFO, "control: resumed: accepting new requests");
			h->ops->set_paused(h->user, false);
		}
		allm_ctl_enc_map(b, 0);
	} else {
		const char *p = cmd->via.str.ptr;
		return errf(err, errlen,
			    "unknown command '%.*s' (status, metrics, set, calibrate, requests, cancel, "
			    "reset-stats, cache-reset, drain, resume, shutdown)",
			    (int)ALLM_MIN(cmd->via.str.size, 40u), p);
	}
	return 0;
}
