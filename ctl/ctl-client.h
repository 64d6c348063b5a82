/* A control-plane peer (ctl/PROTOCOL.md): a DEALER to the engine's NAME.ctl for
 * commands and, optionally, a SUB to NAME.pub for telemetry. Used by allmctl, its
 * dashboard (allmctl top) and allm-bench.
 *
 * Library code: -errno returns, never prints or exits; a human-readable reason for
 * the last failure is kept in the handle (allm_ctl_client_error). One handle per
 * thread (ZeroMQ sockets are not thread-safe).
 *
 * Typical use:
 *     struct allm_ctl_client_opts o = {.name = "demo"};
 *     struct allm_ctl_client *c;
 *     char why[256];
 *     if (allm_ctl_client_open(&o, &c, why, sizeof(why)) < 0) { puts(why); ... }
 *     struct allm_ctl_msg *m = NULL;
 *     int r = allm_ctl_call(c, "status", NULL, 0, 2000, &m);
 *     if (r == 0) { int64_t used; allm_ctl_get_int(m->result, "blocks.gpu.used", &used); ... }
 *     else fprintf(stderr, "%s\n", allm_ctl_client_error(c));
 *     allm_ctl_msg_free(m);   // NULL-safe: m is set only on success
 *     allm_ctl_client_close(c); */
#ifndef ALLM_CTL_CLIENT_H
#define ALLM_CTL_CLIENT_H

#include "ctl-proto.h"

#ifdef __cplusplus
extern "C" {
#endif

struct allm_ctl_client;

struct allm_ctl_client_opts {
	const char *name;        /* engine name; NULL = "default" */
	const char *runtime_dir; /* NULL = $ALLM_RUNTIME_DIR, else $XDG_RUNTIME_DIR/adaptivellm,
				  * else /tmp/adaptivellm-$UID */
	/* Telemetry topics to subscribe to, NULL-terminated ("stats", "decision",
	 * "request", "calibrate"; "" = all). NULL = no SUB socket at all. Copied. */
	const char *const *topics;
};

/* Creates the sockets and connects them (ZeroMQ connects in the background, so an
 * engine that is not running yet is not an error here: allm_ctl_call times out).
 * 0; -EINVAL (bad name), -ENAMETOOLONG, -ENOMEM, or a ZeroMQ -errno. On failure
 * *ret is untouched and err (may be NULL) says why. The caller owns the client
 * and closes it with allm_ctl_client_close. */
int allm_ctl_client_open(const struct allm_ctl_client_opts *o, struct allm_ctl_client **ret,
			 char *err, size_t errlen);
/* Closes the sockets (linger 0: nothing pending is sent) and frees. Accepts NULL. */
void allm_ctl_client_close(struct allm_ctl_client *c);

/* Sends {"id", "cmd", "args"} and waits up to timeout_ms (> 0) for the reply with
 * the same id (replies to earlier, timed-out calls are skipped). args: NULL or the
 * bytes of one packed msgpack map (e.g. an allm_ctl_enc's sb.data/sb.size).
 * Returns:
 *   0           ok:true; *ret = the reply (caller frees), (*ret)->result = its result map
 *   -EREMOTEIO  ok:false; allm_ctl_client_error() is the engine's error string
 *   -ETIMEDOUT  no reply: "no engine answered on ipc://DIR/NAME.ctl within N ms — is
 *               allm-engined --name NAME running?"
 *   -EPROTO     a reply that does not follow PROTOCOL.md (reason in the error)
 *   -EINTR      a signal interrupted the wait
 *   -EINVAL, -ENOMEM, other ZeroMQ -errno
 * *ret is set only on 0. */
int allm_ctl_call(struct allm_ctl_client *c, const char *cmd, const void *args, size_t args_len,
		  int timeout_ms, struct allm_ctl_msg **ret);

/* Receives one telemetry message, waiting up to timeout_ms (0 = do not wait, -1 =
 * forever). 0 with *ret (caller frees; (*ret)->topic, (*ret)->root the body);
 * -EAGAIN none arrived; -ENOTCONN no SUB socket (opts.topics was NULL); -EINTR;
 * -EBADMSG / -EMSGSIZE a malformed message was received and dropped (error says
 * why; call again for the next). */
int allm_ctl_recv(struct allm_ctl_client *c, int timeout_ms, struct allm_ctl_msg **ret);

/* Adds / removes a telemetry topic at run time. 0, -ENOTCONN, ZeroMQ -errno. */
int allm_ctl_subscribe(struct allm_ctl_client *c, const char *topic);
int allm_ctl_unsubscribe(struct allm_ctl_client *c, const char *topic);

/* The SUB socket's ZMQ_FD, for poll()/select() in the caller's loop; -ENOTCONN
 * without SUB. It is EDGE-triggered and only a hint: when it polls readable (and
 * also after every allm_ctl_call / allm_ctl_recv on this client, which may consume
 * the edge), call allm_ctl_recv(c, 0, ...) until it returns -EAGAIN. Do not read
 * from or close the fd; it lives as long as the client. */
int allm_ctl_client_fd(const struct allm_ctl_client *c);

/* Why the last call failed ("" if it did not). Valid until the next call. */
const char *allm_ctl_client_error(const struct allm_ctl_client *c);
/* "ipc://DIR/NAME.ctl" and "ipc://DIR/NAME.pub". */
const char *allm_ctl_client_ctl_endpoint(const struct allm_ctl_client *c);
const char *allm_ctl_client_pub_endpoint(const struct allm_ctl_client *c);
/* The engine name in use. */
const char *allm_ctl_client_name(const struct allm_ctl_client *c);

#ifdef __cplusplus
}
#endif

#endif
