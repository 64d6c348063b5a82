/* Who can read the KV events (ctl-kvevents-sec.h): the endpoint's rules, the
 * private ipc directory, CURVE keys from files and the ZAP handler that lets
 * listed subscribers in. */
#include "ctl-kvevents-sec.h"

#include "safe-file.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

/* The largest key file read (a ZeroMQ certificate is ~300 bytes; a clients file
 * of CTL_KV_CURVE_MAX_CLIENTS certificates' lines fits). */
#define KEY_FILE_MAX (1u << 20)
/* The ZAP domain our sockets name; the handler answers only it. */
#define ZAP_DOMAIN "allm-kv-events"
/* The suffix of the ipc replay socket: PATH.replay. */
#define IPC_REPLAY_SUFFIX ".replay"

const char *ctl_kv_access_name(enum ctl_kv_access a)
{
	switch (a) {
	case CTL_KV_ACCESS_IPC: return "the engine's uid alone (ipc, a directory only it can enter)";
	case CTL_KV_ACCESS_CURVE: return "subscribers holding a listed CURVE client key (encrypted)";
	case CTL_KV_ACCESS_LOOPBACK: return "every local user of this machine (loopback, no authentication)";
	case CTL_KV_ACCESS_INSECURE: return "anyone who reaches this address (plaintext, --kv-events-insecure)";
	}
	return "?";
}

/* HOST (brackets stripped) is a numeric loopback address: 127.0.0.0/8, ::1 or
 * ::ffff:127.x. Names ("localhost", an interface) and wildcards are not: what
 * they bind depends on the host's configuration. */
static bool host_is_loopback(const char *host, size_t n)
{
	char h[64];
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		host++;
		n -= 2;
	}
	if (!n || n >= sizeof(h))
		return false;
	memcpy(h, host, n);
	h[n] = 0;
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, h, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, h, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	return false;
}

static int parse_tcp(const struct ctl_kvevents_opts *o, struct ctl_kv_ep *ep, char *err, size_t errlen)
{
	const char *s = o->endpoint, *colon = strrchr(s, ':');
	char *end;
	if (!colon || colon <= s + 6 || !colon[1]) {
		snprintf(err, errlen, "--kv-events-endpoint: expected tcp://HOST:PORT or ipc://PATH, got \"%s\"", s);
		return -EINVAL;
	}
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port < 1 || port > 65534) {
		snprintf(err, errlen, "--kv-events-endpoint: PORT must be 1..65534 (the replay socket takes PORT+1), "
				      "got \"%s\"", colon + 1);
		return -EINVAL;
	}
	snprintf(ep->pub, sizeof(ep->pub), "%s", s);
	snprintf(ep->replay, sizeof(ep->replay), "%.*s:%lu", (int)(colon - s), s, port + 1);
	bool curve = o->curve_key_file != NULL;
	if (curve)
		ep->access = CTL_KV_ACCESS_CURVE;
	else if (host_is_loopback(s + 6, (size_t)(colon - s - 6)))
		ep->access = CTL_KV_ACCESS_LOOPBACK;
	else if (o->insecure)
		ep->access = CTL_KV_ACCESS_INSECURE;
	else {
		snprintf(err, errlen, "--kv-events-endpoint %s: a plaintext bind beyond loopback would show every user's "
				      "prompts to anyone who reaches it; use ipc://PATH, CURVE (--kv-events-curve-key and "
				      "--kv-events-curve-clients), a 127.0.0.1 address, or say --kv-events-insecure",
			 s);
		return -EINVAL;
	}
	return 0;
}

static int parse_ipc(const struct ctl_kvevents_opts *o, struct ctl_kv_ep *ep, char *err, size_t errlen)
{
	const char *path = o->endpoint + 6;
	size_t n = strlen(path);
	struct sockaddr_un sa;
	if (path[0] != '/' || path[n - 1] == '/') {
		/* '@' (the abstract namespace) has no permissions at all; '*' is a
		 * name ZeroMQ makes up; a relative path depends on the cwd */
		snprintf(err, errlen, "--kv-events-endpoint: ipc://PATH needs an absolute PATH naming a socket, got \"%s\"",
			 o->endpoint);
		return -EINVAL;
	}
	if (n + strlen(IPC_REPLAY_SUFFIX) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "--kv-events-endpoint: PATH must be under %zu bytes (a socket address; the replay "
				      "socket is PATH" IPC_REPLAY_SUFFIX ")",
			 sizeof(sa.sun_path) - strlen(IPC_REPLAY_SUFFIX));
		return -EINVAL;
	}
	const char *name;
	if (allm_path_split(path, ep->dir, sizeof(ep->dir), &name) || !strcmp(name, ".") || !strcmp(name, "..")) {
		snprintf(err, errlen, "--kv-events-endpoint: bad PATH \"%s\"", path);
		return -EINVAL;
	}
	if (!strcmp(ep->dir, "/")) {
		snprintf(err, errlen, "--kv-events-endpoint: PATH must be in a directory of its own (made 0700), not /");
		return -EINVAL;
	}
	ep->ipc = true;
	ep->access = o->curve_key_file ? CTL_KV_ACCESS_CURVE : CTL_KV_ACCESS_IPC;
	snprintf(ep->pub, sizeof(ep->pub), "ipc://%s", path);
	snprintf(ep->replay, sizeof(ep->replay), "ipc://%s" IPC_REPLAY_SUFFIX, path);
	snprintf(ep->pub_name, sizeof(ep->pub_name), "%s", name); /* fits: PATH fits a sun_path */
	snprintf(ep->replay_name, sizeof(ep->replay_name), "%s" IPC_REPLAY_SUFFIX, name);
	return 0;
}

int ctl_kv_ep_parse(const struct ctl_kvevents_opts *o, struct ctl_kv_ep *ep, char *err, size_t errlen)
{
	*ep = (struct ctl_kv_ep){0};
	if (!o->endpoint) {
		if (o->curve_key_file || o->curve_clients_file || o->insecure) {
			snprintf(err, errlen, "--kv-events-curve-key, --kv-events-curve-clients and --kv-events-insecure "
					      "need --kv-events-endpoint");
			return -EINVAL;
		}
		return 0;
	}
	if (!o->curve_key_file != !o->curve_clients_file) {
		/* CURVE without ZAP lets in any client that knows the public key */
		snprintf(err, errlen, "--kv-events-curve-key and --kv-events-curve-clients go together (the engine's "
				      "secret key, and the subscribers' public keys it lets in)");
		return -EINVAL;
	}
	if (strlen(o->endpoint) >= CTL_KV_EP_MAX) {
		snprintf(err, errlen, "--kv-events-endpoint: longer than %d bytes", CTL_KV_EP_MAX - 1);
		return -EINVAL;
	}
	if (!strncmp(o->endpoint, "tcp://", 6))
		return parse_tcp(o, ep, err, errlen);
	if (!strncmp(o->endpoint, "ipc://", 6) && o->endpoint[6])
		return parse_ipc(o, ep, err, errlen);
	snprintf(err, errlen, "--kv-events-endpoint: expected tcp://HOST:PORT or ipc://PATH, got \"%s\"", o->endpoint);
	return -EINVAL;
}

/* --- ipc ------------------------------------------------------------------------------- */

int ctl_kv_ipc_prepare(const struct ctl_kv_ep *ep, int *ret_dirfd, struct allm_err *err)
{
	struct stat st;
	/* the engine's umask (077) makes it 0700; never chmod one that was there */
	if (mkdir(ep->dir, 0700) && errno != EEXIST)
		return allm_err_set(err, -errno, "KV events: cannot create %s: %s", ep->dir, strerror(errno));
	int fd = open(ep->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		bool link = !lstat(ep->dir, &st) && S_ISLNK(st.st_mode);
		return allm_err_set(err, -e, "KV events: %s: %s", ep->dir, link ? "a symlink, refused" : strerror(e));
	}
	int r = 0;
	if (fstat(fd, &st))
		r = allm_err_set(err, -errno, "KV events: %s: %s", ep->dir, strerror(errno));
	else if (st.st_uid != geteuid() || (st.st_mode & 077))
		r = allm_err_set(err, -EPERM,
				 "KV events: refusing %s (uid %u, mode %04o): the events carry every user's prompts, "
				 "so their socket's directory must be one only uid %u can enter (mode 0700); name a "
				 "directory the engine can create, or chmod 700 this one",
				 ep->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
	for (int i = 0; !r && i < 2; i++) {
		/* ZeroMQ replaces a socket file when it binds: not a live one */
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", (i ? ep->replay : ep->pub) + 6);
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s >= 0 && !connect(s, (struct sockaddr *)&sa, sizeof(sa)))
			r = allm_err_set(err, -EADDRINUSE, "KV events: %s is served by another process", sa.sun_path);
		if (s >= 0)
			close(s);
	}
	if (r) {
		close(fd);
		return r;
	}
	*ret_dirfd = fd;
	return 0;
}

int ctl_kv_ipc_verify(int dirfd, const char *name, struct allm_err *err)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
		return allm_err_set(err, -EPERM, "KV events: the socket %s is not in the directory that was checked "
						 "(was it moved?)",
				    name);
	return 0;
}

/* --- CURVE keys ------------------------------------------------------------------------ */

/* Reads a key file whole, after checking it: a regular file (not a symlink),
 * owned by our euid (or root, for the clients file), and for a secret nobody
 * else may read it; for the clients file nobody else may write it. */
static int read_key_file(const char *path, bool secret, char **ret, struct allm_err *err)
{
	const char *what = secret ? "the CURVE secret key file" : "the CURVE clients file";
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return allm_err_set(err, -errno, "KV events: %s %s: %s", what, path,
				    errno == ELOOP ? "a symlink, refused" : strerror(errno));
	int r = 0;
	mode_t m = 0;
	char *buf = NULL;
	if (fstat(fd, &st)) {
		r = allm_err_set(err, -errno, "KV events: %s %s: %s", what, path, strerror(errno));
		goto out;
	}
	m = st.st_mode & 07777;
	if (!S_ISREG(st.st_mode) || st.st_size > KEY_FILE_MAX) {
		r = allm_err_set(err, -EINVAL, "KV events: %s %s: not a regular file of at most %u bytes", what, path,
				 KEY_FILE_MAX);
	} else if (secret && (st.st_uid != geteuid() || (m & 077))) {
		r = allm_err_set(err, -EPERM, "KV events: refusing %s %s (uid %u, mode %04o): it must belong to uid %u and "
					     "be readable by it alone (chmod 600)",
				 what, path, (unsigned)st.st_uid, (unsigned)m, (unsigned)geteuid());
	} else if (!secret && ((st.st_uid != geteuid() && st.st_uid != 0) || (m & 022))) {
		r = allm_err_set(err, -EPERM, "KV events: refusing %s %s (uid %u, mode %04o): whoever can write it decides "
					     "who reads every prompt; it must belong to uid %u or root and not be "
					     "writable by others",
				 what, path, (unsigned)st.st_uid, (unsigned)m, (unsigned)geteuid());
	}
	if (r)
		goto out;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	ssize_t got = 0, n;
	while (got < st.st_size && (n = read(fd, buf + got, (size_t)(st.st_size - got))) > 0)
		got += n;
	buf[got] = 0;
	*ret = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

/* The key on one line: 40 Z85 characters alone, or `KIND = "..."` (a ZeroMQ
 * certificate's line). What the line holds: 's' a secret, 'p' a public key, 'b'
 * a bare key, 0 nothing, -1 garbage. */
static int key_line(char *line, char out[41])
{
	char *s = line, *e = line + strlen(line);
	while (*s == ' ' || *s == '\t')
		s++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = 0;
	if (!*s || *s == '#')
		return 0;
	int kind = 'b';
	if (!strncmp(s, "secret-key", 10) || !strncmp(s, "public-key", 10)) {
		kind = s[0];
		char *q1 = strchr(s, '"'), *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
		if (!q1 || !q2)
			return -1;
		s = q1 + 1;
		*q2 = 0;
	} else if (strchr(s, '=') || !strcmp(s, "curve") || !strcmp(s, "metadata")) {
		return 0; /* a certificate's other lines */
	}
	uint8_t bin[32];
	if (strlen(s) != 40 || !zmq_z85_decode(bin, s))
		return -1;
	memcpy(out, s, 41);
	return kind;
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

int ctl_kv_curve_load(const char *key_file, const char *clients_file, struct ctl_kv_curve *c, struct allm_err *err)
{
	char *text = NULL, z[41], *save = NULL;
	int r, secrets = 0;
	*c = (struct ctl_kv_curve){.clients_file = clients_file};
	if (!zmq_has("curve"))
		return allm_err_set(err, -ENOTSUP, "KV events: this libzmq has no CURVE (built without libsodium)");
	if ((r = read_key_file(key_file, true, &text, err)))
		return r;
	size_t text_len = strlen(text);
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int k = key_line(l, z);
		if (k == 's' || k == 'b') { /* a bare key in the secret file is the secret */
			zmq_z85_decode(c->secret, z);
			secrets++;
		}
	}
	explicit_bzero(text, text_len); /* strtok_r cut it into lines */
	explicit_bzero(z, sizeof(z));
	free(text);
	text = NULL;
	if (secrets != 1) {
		r = allm_err_set(err, -EINVAL, "KV events: the CURVE secret key file %s must hold one Z85 key (40 "
					      "characters, or a ZeroMQ certificate's secret-key line), it holds %d",
				 key_file, secrets);
		goto fail;
	}
	char sz[41];
	if (!zmq_z85_encode(sz, c->secret, 32) || zmq_curve_public(c->public_z85, sz)) {
		explicit_bzero(sz, sizeof(sz));
		r = allm_err_set(err, -EINVAL, "KV events: cannot derive the public key of %s", key_file);
		goto fail;
	}
	explicit_bzero(sz, sizeof(sz));
	if ((r = read_key_file(clients_file, false, &text, err)))
		goto fail;
	if (!(c->clients = calloc(CTL_KV_CURVE_MAX_CLIENTS, 32))) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	int line = 0;
	for (char *l = text, *nl; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = 0;
		line++;
		int k = key_line(l, z);
		if (k == 0)
			continue;
		if (k != 'p' && k != 'b') {
			r = allm_err_set(err, -EINVAL, "KV events: %s line %d: %s", clients_file, line,
					 k == 's' ? "a secret key (list the subscribers' public keys)"
						  : "not a Z85 public key (40 characters)");
			goto fail;
		}
		if (c->n_clients == CTL_KV_CURVE_MAX_CLIENTS) {
			r = allm_err_set(err, -E2BIG, "KV events: %s lists more than %d keys", clients_file,
					 CTL_KV_CURVE_MAX_CLIENTS);
			goto fail;
		}
		zmq_z85_decode(c->clients[c->n_clients++], z);
	}
	if (!c->n_clients) {
		r = allm_err_set(err, -EINVAL, "KV events: %s lists no public key", clients_file);
		goto fail;
	}
	qsort(c->clients, c->n_clients, 32, cmp_key);
	free(text);
	return 0;
fail:
	free(text);
	ctl_kv_curve_free(c);
	return r;
}

void ctl_kv_curve_free(struct ctl_kv_curve *c)
{
	if (!c)
		return;
	explicit_bzero(c->secret, sizeof(c->secret));
	free(c->clients);
	c->clients = NULL;
	c->n_clients = 0;
}

int ctl_kv_curve_apply(void *sock, const struct ctl_kv_curve *c)
{
	int one = 1;
	if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->secret, 32) ||
	    zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)))
		return -errno;
	return 0;
}

/* --- the ZAP handler --------------------------------------------------------------------- */

struct ctl_kv_zap {
	void *rep; /* REP at inproc://zeromq.zap.01; used by the thread alone once started */
	const struct ctl_kv_curve *c; /* read-only */
	ctl_kv_zap_log_fn log;
	void *log_user;
	pthread_t thread;
	atomic_uint_fast64_t denied;
};

static bool msg_is(zmq_msg_t *m, const char *s)
{
	return zmq_msg_size(m) == strlen(s) && !memcmp(zmq_msg_data(m), s, strlen(s));
}

/* Frames of a ZAP request: version, request id, domain, address, routing id,
 * mechanism, credentials (CURVE: the client's public key, 32 bytes). */
#define ZAP_FRAMES 7

static void zap_reply(void *rep, zmq_msg_t *req_id, bool ok)
{
	zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
	zmq_send(rep, zmq_msg_data(req_id), zmq_msg_size(req_id), ZMQ_SNDMORE);
	zmq_send(rep, ok ? "200" : "400", 3, ZMQ_SNDMORE);
	zmq_send(rep, ok ? "OK" : "key not allowed", ok ? 2 : 15, ZMQ_SNDMORE);
	zmq_send(rep, "", 0, ZMQ_SNDMORE); /* user id */
	zmq_send(rep, "", 0, 0); /* metadata */
}

static void *zap_main(void *arg)
{
	struct ctl_kv_zap *z = arg;
	for (;;) {
		zmq_msg_t fr[ZAP_FRAMES + 1];
		int n = 0;
		bool more = true, term = false;
		while (more) {
			zmq_msg_t *m = &fr[n < ZAP_FRAMES ? n : ZAP_FRAMES];
			zmq_msg_init(m);
			if (zmq_msg_recv(m, z->rep, 0) < 0) {
				zmq_msg_close(m);
				term = errno == ETERM;
				break;
			}
			more = zmq_msg_more(m);
			if (n < ZAP_FRAMES)
				n++;
			else
				zmq_msg_close(m);
		}
		if (term) {
			for (int i = 0; i < n; i++)
				zmq_msg_close(&fr[i]);
			break;
		}
		bool ok = n == ZAP_FRAMES && msg_is(&fr[0], "1.0") && msg_is(&fr[2], ZAP_DOMAIN) &&
			  msg_is(&fr[5], "CURVE") && zmq_msg_size(&fr[6]) == 32 &&
			  bsearch(zmq_msg_data(&fr[6]), z->c->clients, z->c->n_clients, 32, cmp_key);
		if (n >= 2)
			zap_reply(z->rep, &fr[1], ok);
		if (!ok && atomic_fetch_add(&z->denied, 1) == 0) {
			char addr[64] = "?";
			if (n > 3)
				snprintf(addr, sizeof(addr), "%.*s", (int)zmq_msg_size(&fr[3]), (char *)zmq_msg_data(&fr[3]));
			z->log(z->log_user, ALLM_LOG_WARN, "KV events: refused a subscriber from %s: its CURVE key is not "
							   "in %s (further refusals are counted in status)",
			       addr, z->c->clients_file);
		}
		for (int i = 0; i < n; i++)
			zmq_msg_close(&fr[i]);
	}
	zmq_close(z->rep);
	return NULL;
}

int ctl_kv_zap_start(void *zctx, const struct ctl_kv_curve *c, ctl_kv_zap_log_fn log, void *log_user,
		     struct ctl_kv_zap **ret)
{
	int zero = 0, r;
	struct ctl_kv_zap *z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	*z = (struct ctl_kv_zap){.c = c, .log = log, .log_user = log_user};
	atomic_init(&z->denied, 0);
	if (!(z->rep = zmq_socket(zctx, ZMQ_REP)) || zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_bind(z->rep, "inproc://zeromq.zap.01")) {
		r = -errno;
		goto fail;
	}
	if ((r = -pthread_create(&z->thread, NULL, zap_main, z)))
		goto fail;
	*ret = z;
	return 0;
fail:
	if (z->rep)
		zmq_close(z->rep);
	free(z);
	return r ? r : -EIO;
}

void ctl_kv_zap_stop(struct ctl_kv_zap *z)
{
	if (!z)
		return;
	pthread_join(z->thread, NULL);
	free(z);
}

uint64_t ctl_kv_zap_denied(const struct ctl_kv_zap *z)
{
	return z ? atomic_load(&((struct ctl_kv_zap *)z)->denied) : 0;
}
