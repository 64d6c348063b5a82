/* A control-plane peer: DEALER for commands, SUB for telemetry (ctl/PROTOCOL.md). */
#include "ctl-client.h"

#include "shm-trust.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

struct allm_ctl_client {
	void *zctx;   /* one context per client: nothing shared behind the caller's back */
	void *dealer; /* commands */
	void *sub;    /* telemetry, NULL when no topics were asked for */
	uint64_t next_id; /* ids of our requests: replies to older ones are skipped */
	char name[65];
	char ctl_ep[4200], pub_ep[4200];
	char dir[4096], ctl_path[4200], pub_path[4200]; /* checked before we trust them */
	uid_t engine_uid; /* whom the directory and sockets must belong to */
	char err[512];
	struct allm_ctl_enc enc; /* the request being sent, reused */
};

static int set_err(struct allm_ctl_client *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int set_err(struct allm_ctl_client *c, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return code;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void allm_ctl_client_close(struct allm_ctl_client *c)
{
	if (!c)
		return;
	if (c->dealer)
		zmq_close(c->dealer);
	if (c->sub)
		zmq_close(c->sub);
	if (c->zctx)
		zmq_ctx_term(c->zctx);
	allm_ctl_enc_free(&c->enc);
	free(c);
}

/* DESIGN §8: the runtime directory and the socket file belong to the engine's
 * uid (shm-trust.h), else whoever made them could answer in its place. ZeroMQ
 * gives a client no SO_PEERCRED, so this runs before a request leaves (nothing
 * need exist yet: ZeroMQ connects when the engine appears) and again before a
 * reply or telemetry is believed, when the directory must exist: only its owner
 * can have put a socket in it (the socket itself may be gone by then, after
 * `shutdown`). 0, or -EPERM with the reason in c->err. */
static int verify_engine(struct allm_ctl_client *c, const char *sock, bool answered)
{
	int r = allm_shm_check_dir(c->dir, c->engine_uid, c->err, sizeof(c->err));
	if (!r)
		r = allm_shm_check_socket_file(sock, c->engine_uid, c->err, sizeof(c->err));
	if (r == -ENOENT && answered && allm_shm_check_dir(c->dir, c->engine_uid, NULL, 0) == -ENOENT)
		return set_err(c, -EPERM, "an answer from %.400s, which does not exist", c->dir);
	return r && r != -ENOENT ? -EPERM : 0;
}

static void *open_socket(struct allm_ctl_client *c, int type, const char *ep)
{
	int zero = 0;
	void *s = zmq_socket(c->zctx, type);
	if (!s)
		return NULL;
	/* linger 0: a request to an engine that never comes must not hold up exit */
	if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero)) || zmq_connect(s, ep)) {
		int e = errno;
		zmq_close(s);
		errno = e;
		return NULL;
	}
	return s;
}

int allm_ctl_client_open(const struct allm_ctl_client_opts *o, struct allm_ctl_client **ret,
			 char *err, size_t errlen)
{
	const char *name = o && o->name ? o->name : "default";
	const char *dir = o ? o->runtime_dir : NULL;
	struct allm_ctl_client *c = calloc(1, sizeof(*c));
	int r = 0;
	if (!c) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	allm_ctl_enc_init(&c->enc);
	snprintf(c->name, sizeof(c->name), "%s", name);
	if ((r = allm_ctl_endpoint(dir, name, "ctl", c->ctl_ep, sizeof(c->ctl_ep))) ||
	    (r = allm_ctl_endpoint(dir, name, "pub", c->pub_ep, sizeof(c->pub_ep))) ||
	    (r = allm_ctl_path(dir, name, "ctl", c->ctl_path, sizeof(c->ctl_path))) ||
	    (r = allm_ctl_path(dir, name, "pub", c->pub_path, sizeof(c->pub_path))) ||
	    (r = dir && *dir ? (snprintf(c->dir, sizeof(c->dir), "%s", dir) < (int)sizeof(c->dir) ? 0 : -ENAMETOOLONG)
			     : allm_ctl_runtime_dir(c->dir, sizeof(c->dir)))) {
		set_err(c, r, r == -EINVAL ? "bad engine name '%s' (1..64 characters, no '/')"
					   : "runtime directory path too long for engine '%s'",
			name);
		goto fail;
	}
	if ((r = allm_shm_engine_uid(&c->engine_uid, c->err, sizeof(c->err))) ||
	    (r = verify_engine(c, c->ctl_path, false)))
		goto fail;
	if (!(c->zctx = zmq_ctx_new()) || !(c->dealer = open_socket(c, ZMQ_DEALER, c->ctl_ep))) {
		r = set_err(c, -errno, "cannot connect to %s: %s", c->ctl_ep, zmq_strerror(errno));
		goto fail;
	}
	if (o && o->topics) {
		if (!(c->sub = open_socket(c, ZMQ_SUB, c->pub_ep))) {
			r = set_err(c, -errno, "cannot connect to %s: %s", c->pub_ep, zmq_strerror(errno));
			goto fail;
		}
		for (const char *const *t = o->topics; *t; t++)
			if ((r = allm_ctl_subscribe(c, *t)))
				goto fail;
	}
	c->err[0] = 0;
	*ret = c;
	return 0;
fail:
	if (err && errlen)
		snprintf(err, errlen, "%s", c->err);
	allm_ctl_client_close(c);
	return r;
}

int allm_ctl_subscribe(struct allm_ctl_client *c, const char *topic)
{
	if (!c->sub)
		return set_err(c, -ENOTCONN, "no telemetry socket (opened without topics)");
	if (strlen(topic) > ALLM_CTL_TOPIC_MAX)
		return set_err(c, -EINVAL, "topic longer than %d bytes", ALLM_CTL_TOPIC_MAX);
	if (zmq_setsockopt(c->sub, ZMQ_SUBSCRIBE, topic, strlen(topic)))
		return set_err(c, -errno, "subscribe: %s", zmq_strerror(errno));
	return 0;
}

int allm_ctl_unsubscribe(struct allm_ctl_client *c, const char *topic)
{
	if (!c->sub)
		return set_err(c, -ENOTCONN, "no telemetry socket (opened without topics)");
	if (zmq_setsockopt(c->sub, ZMQ_UNSUBSCRIBE, topic, strlen(topic)))
		return set_err(c, -errno, "unsubscribe: %s", zmq_strerror(errno));
	return 0;
}

/* Receives every frame of one message (bounded: frames past the second are read
 * and dropped). frame[0..*n) get the first two frames. */
static int recv_frames(void *s, zmq_msg_t fr[2], int *n)
{
	*n = 0;
	for (;;) {
		zmq_msg_t tmp, *m = *n < 2 ? &fr[*n] : &tmp;
		zmq_msg_init(m);
		if (zmq_msg_recv(m, s, ZMQ_DONTWAIT) < 0) {
			int e = errno;
			zmq_msg_close(m);
			for (int i = 0; i < *n; i++)
				zmq_msg_close(&fr[i]);
			*n = 0;
			return -e;
		}
		bool more = zmq_msg_more(m);
		if (m == &tmp)
			zmq_msg_close(&tmp);
		else
			(*n)++;
		if (!more)
			return 0;
	}
}

/* Waits until s has input or the deadline passes: 1, 0 (timeout) or -errno. */
static int wait_in(void *s, double deadline_ms, bool forever)
{
	zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
	double left = forever ? -1 : deadline_ms - now_ms();
	if (!forever && left < 0)
		left = 0;
	int r = zmq_poll(&it, 1, forever ? -1 : (long)(left + 0.999));
	if (r < 0)
		return -errno;
	return r > 0;
}

/* Checks a decoded reply; 0 (ok, m->result set), 1 (another id: skip), or an error. */
static int check_reply(struct allm_ctl_client *c, struct allm_ctl_msg *m, uint64_t id)
{
	const msgpack_object *idv = allm_ctl_get(m->root, "id");
	bool ok;
	if (!idv || idv->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return set_err(c, -EPROTO, "reply without an id from %s", c->ctl_ep);
	if (idv->via.u64 != id)
		return 1;
	if (allm_ctl_get_bool(m->root, "ok", &ok))
		return set_err(c, -EPROTO, "reply without ok from %s", c->ctl_ep);
	if (!ok) {
		if (allm_ctl_get_strbuf(m->root, "error", c->err, sizeof(c->err)) == -ENOENT)
			snprintf(c->err, sizeof(c->err), "the engine refused without a reason");
		return -EREMOTEIO;
	}
	const msgpack_object *res;
	if (allm_ctl_get_map(m->root, "result", &res))
		return set_err(c, -EPROTO, "reply without a result map from %s", c->ctl_ep);
	m->result = res;
	return 0;
}

int allm_ctl_call(struct allm_ctl_client *c, const char *cmd, const void *args, size_t args_len,
		  int timeout_ms, struct allm_ctl_msg **ret)
{
	char why[200];
	int r;
	c->err[0] = 0;
	if (!cmd || timeout_ms <= 0)
		return set_err(c, -EINVAL, "bad call: no command or timeout <= 0");
	if (args && (r = allm_ctl_validate(args, args_len, ALLM_CTL_MAX_MSG - 512, why, sizeof(why))))
		return set_err(c, -EINVAL, "bad args for %s: %s", cmd, why);
	uint64_t id = ++c->next_id;
	if ((r = allm_ctl_enc_request(&c->enc, id, cmd, args, args_len)))
		return set_err(c, r, "cannot encode the request: %s", strerror(-r));
	double deadline = now_ms() + timeout_ms;
	/* DONTWAIT: the message is queued for an engine that is not there yet; a full
	 * queue means nobody has been reading for a long time */
	if ((r = verify_engine(c, c->ctl_path, false)))
		return r;
	if (zmq_send(c->dealer, c->enc.sb.data, c->enc.sb.size, ZMQ_DONTWAIT) < 0 && errno != EAGAIN)
		return set_err(c, -errno, "cannot send to %s: %s", c->ctl_ep, zmq_strerror(errno));
	for (;;) {
		r = wait_in(c->dealer, deadline, false);
		if (r == -EINTR)
			return set_err(c, -EINTR, "interrupted");
		if (r < 0)
			return set_err(c, r, "%s: %s", c->ctl_ep, zmq_strerror(-r));
		if (r == 0)
			return set_err(c, -ETIMEDOUT,
				       "no engine answered on %s within %d ms — is allm-engined --name %s running?",
				       c->ctl_ep, timeout_ms, c->name);
		zmq_msg_t fr[2];
		int n;
		if ((r = recv_frames(c->dealer, fr, &n)) == -EAGAIN)
			continue;
		if (r)
			return set_err(c, r, "%s: %s", c->ctl_ep, zmq_strerror(-r));
		/* [body], or [empty delimiter][body] */
		zmq_msg_t *body = n == 2 && zmq_msg_size(&fr[0]) == 0 ? &fr[1] : &fr[0];
		struct allm_ctl_msg *m = NULL;
		r = allm_ctl_decode(zmq_msg_data(body), zmq_msg_size(body), ALLM_CTL_MAX_REPLY, &m, why,
				    sizeof(why));
		for (int i = 0; i < n; i++)
			zmq_msg_close(&fr[i]);
		if (r == -ENOMEM)
			return set_err(c, r, "out of memory");
		if (r)
			return set_err(c, -EPROTO, "malformed reply from %s: %s", c->ctl_ep, why);
		r = check_reply(c, m, id);
		if (r == 1) {
			allm_ctl_msg_free(m); /* a late reply to an earlier call */
			continue;
		}
		if (!r)
			r = verify_engine(c, c->ctl_path, true);
		if (r) {
			allm_ctl_msg_free(m);
			return r;
		}
		*ret = m;
		return 0;
	}
}

int allm_ctl_recv(struct allm_ctl_client *c, int timeout_ms, struct allm_ctl_msg **ret)
{
	char why[200];
	int r, n;
	c->err[0] = 0;
	if (!c->sub)
		return set_err(c, -ENOTCONN, "no telemetry socket (opened without topics)");
	double deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	for (;;) {
		zmq_msg_t fr[2];
		r = recv_frames(c->sub, fr, &n);
		if (r == -EAGAIN && timeout_ms != 0) {
			r = wait_in(c->sub, deadline, timeout_ms < 0);
			if (r == 0)
				return set_err(c, -EAGAIN, "no telemetry within %d ms", timeout_ms);
			if (r < 0)
				return set_err(c, r, "%s: %s", c->pub_ep, zmq_strerror(-r));
			continue;
		}
		if (r)
			return set_err(c, r, "%s", r == -EAGAIN ? "nothing pending" : zmq_strerror(-r));
		if (n != 2 || zmq_msg_size(&fr[0]) > ALLM_CTL_TOPIC_MAX) {
			for (int i = 0; i < n; i++)
				zmq_msg_close(&fr[i]);
			return set_err(c, -EBADMSG, "telemetry message without [topic][body] frames");
		}
		struct allm_ctl_msg *m = NULL;
		r = allm_ctl_decode(zmq_msg_data(&fr[1]), zmq_msg_size(&fr[1]), ALLM_CTL_MAX_REPLY, &m,
				    why, sizeof(why));
		if (!r) {
			memcpy(m->topic, zmq_msg_data(&fr[0]), zmq_msg_size(&fr[0]));
			m->topic[zmq_msg_size(&fr[0])] = 0;
		}
		zmq_msg_close(&fr[0]);
		zmq_msg_close(&fr[1]);
		if (r)
			return set_err(c, r, "malformed telemetry: %s", why);
		if ((r = verify_engine(c, c->pub_path, true))) {
			allm_ctl_msg_free(m);
			return r;
		}
		*ret = m;
		return 0;
	}
}

int allm_ctl_client_fd(const struct allm_ctl_client *c)
{
	int fd;
	size_t len = sizeof(fd);
	if (!c->sub)
		return -ENOTCONN;
	if (zmq_getsockopt(c->sub, ZMQ_FD, &fd, &len))
		return -errno;
	return fd;
}

const char *allm_ctl_client_error(const struct allm_ctl_client *c)
{
	return c->err;
}

const char *allm_ctl_client_ctl_endpoint(const struct allm_ctl_client *c)
{
	return c->ctl_ep;
}

const char *allm_ctl_client_pub_endpoint(const struct allm_ctl_client *c)
{
	return c->pub_ep;
}

const char *allm_ctl_client_name(const struct allm_ctl_client *c)
{
	return c->name;
}
