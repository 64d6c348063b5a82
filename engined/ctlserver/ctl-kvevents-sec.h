/* Who can read the KV events (issue 49 item 1): they carry every user's prompt
 * and completion token ids, so the endpoint decides who sees every prompt.
 *
 *   ipc://PATH   a socket in a directory only the engine's uid can enter (mode
 *                0700, owned by it; made so when missing): that uid (and root).
 *   tcp:// with CURVE   holders of a client key listed in the clients file
 *                (ZeroMQ's CURVE, checked by a ZAP handler); encrypted.
 *   tcp://127.x or [::1] without CURVE   every local user of the machine.
 *   tcp:// elsewhere without CURVE   anyone who reaches the address: refused
 *                unless --kv-events-insecure says so (routers that index vLLM
 *                engines, llm-d's and Dynamo's, speak plain ZeroMQ only).
 *
 * Keys come from files, never argv: the engine's secret key file must be a
 * regular file of the engine's uid that no one else can read. */
#ifndef ALLM_CTL_KVEVENTS_SEC_H
#define ALLM_CTL_KVEVENTS_SEC_H

#include "common.h"

#include <stdint.h>

/* The longest endpoint (ZeroMQ's and the kernel's limits are lower). */
#define CTL_KV_EP_MAX 512
/* Client keys one clients file may list. */
#define CTL_KV_CURVE_MAX_CLIENTS 4096

/* The flags, as given. */
struct ctl_kvevents_opts {
	const char *endpoint; /* --kv-events-endpoint tcp://HOST:PORT | ipc://PATH; NULL: off */
	const char *topic; /* --kv-events-topic */
	const char *curve_key_file; /* --kv-events-curve-key: the engine's secret key (Z85) */
	const char *curve_clients_file; /* --kv-events-curve-clients: subscribers' public keys */
	bool insecure; /* --kv-events-insecure: plaintext TCP on a non-loopback address */
	/* the replay ring's batches when in 1..CTL_KV_REPLAY_BATCHES-1 (a test's
	 * $ALLM_KV_EVENTS_TEST_RING, read by the program: it rolls over in a few
	 * batches); 0: the full ring */
	int test_ring;
};

/* Who can read the stream, decided from the flags. */
enum ctl_kv_access {
	CTL_KV_ACCESS_IPC, /* the engine's uid */
	CTL_KV_ACCESS_CURVE, /* holders of a listed client key */
	CTL_KV_ACCESS_LOOPBACK, /* every local user */
	CTL_KV_ACCESS_INSECURE, /* anyone who reaches the address (--kv-events-insecure) */
};

/* The endpoints and access of valid flags. */
struct ctl_kv_ep {
	enum ctl_kv_access access;
	bool ipc;
	char pub[CTL_KV_EP_MAX + 16]; /* ZeroMQ endpoint of the PUB */
	char replay[CTL_KV_EP_MAX + 16]; /* of the replay ROUTER: PORT+1, or PATH.replay */
	char dir[CTL_KV_EP_MAX]; /* ipc: PATH's directory */
	char pub_name[128], replay_name[128]; /* ipc: the sockets' names in dir */
};

/* "the engine's uid 0 alone (ipc, directory 0700)", ... for the start line, --help, status. */
const char *ctl_kv_access_name(enum ctl_kv_access a);

/* Checks the flags together (syntax, PORT 1..65534, an absolute PATH that fits a
 * socket address, CURVE's two files given together, a non-loopback plaintext
 * bind refused without o->insecure) and fills ep. 0 or -EINVAL with err. No
 * file is opened. */
int ctl_kv_ep_parse(const struct ctl_kvevents_opts *o, struct ctl_kv_ep *ep, char *err, size_t errlen);

/* ipc: opens ep->dir, creating it (mode 0700) when missing; refuses it unless it
 * is a directory (not a symlink) of the engine's euid with no access for group
 * or others, and refuses a PATH another process serves. 0 with *ret_dirfd, or
 * -errno with err. */
int ctl_kv_ipc_prepare(const struct ctl_kv_ep *ep, int *ret_dirfd, struct allm_err *err);
/* ipc, after the bind (which went by path): the socket is in the directory that
 * was checked, ours. 0 or -EPERM with err. */
int ctl_kv_ipc_verify(int dirfd, const char *name, struct allm_err *err);

/* CURVE: the engine's key pair and the subscribers it lets in. */
struct ctl_kv_curve {
	uint8_t secret[32]; /* wiped by ctl_kv_curve_free */
	char public_z85[41]; /* to hand to subscribers (ZMQ_CURVE_SERVERKEY) */
	uint8_t (*clients)[32]; /* allowed client public keys, sorted */
	uint32_t n_clients;
	const char *clients_file; /* named in log lines */
};

/* Reads the secret key file (a regular file of the engine's euid, mode 0600 or
 * stricter, holding one Z85 key: 40 characters alone on a line or in a ZeroMQ
 * certificate's `secret-key = "..."`) and the clients file (not writable by
 * others; one public key a line, bare or as `public-key = "..."`; '#' starts a
 * comment). 0 or -errno with err. */
int ctl_kv_curve_load(const char *key_file, const char *clients_file, struct ctl_kv_curve *c, struct allm_err *err);
void ctl_kv_curve_free(struct ctl_kv_curve *c);
/* Makes sock a CURVE server that asks the ZAP handler. 0 or -errno. */
int ctl_kv_curve_apply(void *sock, const struct ctl_kv_curve *c);

/* The ZAP handler (ZeroMQ RFC 27): a thread answering the context's CURVE
 * handshakes, 200 for a listed client key, 400 otherwise. Started before any
 * CURVE socket binds (a context without a handler lets every key in). */
struct ctl_kv_zap;
typedef void (*ctl_kv_zap_log_fn)(void *user, enum allm_log_level level, const char *fmt, ...);
/* c must outlive the handler. 0 or -errno. */
int ctl_kv_zap_start(void *zctx, const struct ctl_kv_curve *c, ctl_kv_zap_log_fn log, void *log_user,
		     struct ctl_kv_zap **ret);
/* After zmq_ctx_shutdown(zctx): joins the thread. Accepts NULL. */
void ctl_kv_zap_stop(struct ctl_kv_zap *z);
/* Handshakes refused so far (any thread). */
uint64_t ctl_kv_zap_denied(const struct ctl_kv_zap *z);

#endif
