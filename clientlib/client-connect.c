/* Connecting to allm-engined: the socket path, the handshake of protocol.h (hello,
 * welcome with SCM_RIGHTS fds, mapped ack) and teardown. */
#include "client-internal.h"

#include "shm-trust.h"

#include <adaptivellm/errtext.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_SPIN_US 50
/* memfd mode sends 3 fds, POSIX mode 2; room for a misbehaving peer's extra ones
 * so that we can close them instead of leaking them. */
#define MAX_FDS 8

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before deadline (-1: none), never negative. */
static int left_ms(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t d = deadline - now_ms();
	return d < 0 ? 0 : d > INT32_MAX ? INT32_MAX : (int)d;
}

/* <runtime_dir>/<name>.sock into buf and the directory into dir. Returns 0 or
 * -EINVAL (bad name, too long). */
static int socket_path(const struct allm_client_opts *o, char *buf, size_t cap, char *dir,
                       size_t dir_cap, char *err, size_t errlen)
{
	const char *name = o->name && o->name[0] ? o->name : "default";
	if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
		(void)allm_errtext(err, errlen, 0, "bad engine name '%s': a plain name without '/'", name);
		return -EINVAL;
	}
	int n = 0;
	if (o->runtime_dir && o->runtime_dir[0])
		n = snprintf(dir, dir_cap, "%s", o->runtime_dir);
	else if (allm_shm_runtime_dir(dir, dir_cap))
		n = -1;
	if (n >= 0 && (size_t)n < dir_cap)
		n = snprintf(buf, cap, "%s/%s.sock", dir, name);
	if (n < 0 || (size_t)n >= cap) {
		(void)allm_errtext(err, errlen, 0, "socket path for engine '%s' is longer than %zu bytes", name,
		        cap - 1);
		return -EINVAL;
	}
	return 0;
}

/* Before we send anything (DESIGN §8, shm-trust.h): the directory is the
 * engine's, and so is the process at the other end of the socket. */
static int verify_dir(const char *dir, uid_t engine_uid, char *err, size_t errlen)
{
	int r = allm_shm_check_dir(dir, engine_uid, err, errlen);
	return r == -ENOENT ? 0 : r; /* missing: connect() says "is allm-engined running?" */
}

static int verify_peer(int sock, const char *path, uid_t engine_uid, char *err, size_t errlen)
{
	uid_t uid;
	int r = allm_shm_peer_uid(sock, &uid);
	if (r) {
		(void)allm_errtext(err, errlen, 0, "cannot check who serves %s: %s", path, strerror(-r));
		return r;
	}
	if (uid != engine_uid) {
		(void)allm_errtext(err, errlen, 0, "refusing the engine at %s: it runs as uid %u, not uid %u%s", path,
		        (unsigned)uid, (unsigned)engine_uid,
		        getenv("ALLM_ENGINE_UID") ? " (ALLM_ENGINE_UID)" : "");
		return -EPERM;
	}
	return 0;
}

/* Waits for `events` on fd until deadline. Returns 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, left_ms(deadline));
		if (r > 0)
			return 0; /* ready, or an error/hang-up the next call reports */
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Connects a non-blocking socket to path. A Unix socket whose backlog is full
 * answers EAGAIN rather than EINPROGRESS, so we retry until the deadline. */
static int connect_socket(const char *path, int64_t deadline, int *ret_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, path, strlen(path) + 1); /* length checked by socket_path */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		int e = errno;
		if (e == EINTR)
			continue;
		if (e == EAGAIN && left_ms(deadline) != 0) {
			struct timespec ts = { 0, 5 * 1000 * 1000 };
			nanosleep(&ts, NULL);
			continue;
		}
		close(fd);
		return e == EAGAIN ? -ETIMEDOUT : -e;
	}
	*ret_fd = fd;
	return 0;
}

static int send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -errno;
		int r = wait_fd(fd, POLLOUT, deadline);
		if (r)
			return r;
	}
	return 0;
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Receives the whole welcome, collecting the SCM_RIGHTS fds that come with any
 * part of it (they ride on its first byte). Returns 0, -ETIMEDOUT, -ECONNRESET
 * (closed early), -EPROTO (truncated fd list) or -errno. The fds are ours to
 * close even on failure (*n_fds counts them). */
static int recv_welcome(int sock, struct allm_welcome *w, int *fds, int *n_fds, int64_t deadline)
{
	uint8_t *p = (uint8_t *)w;
	size_t got = 0;
	*n_fds = 0;
	while (got < sizeof(*w)) {
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		} ctl;
		struct iovec iov = { .iov_base = p + got, .iov_len = sizeof(*w) - got };
		struct msghdr m = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
		};
		ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			int r = wait_fd(sock, POLLIN, deadline);
			if (r)
				return r;
			continue;
		}
		if (n < 0)
			return -errno;
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
			if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
				if (*n_fds < MAX_FDS)
					fds[(*n_fds)++] = fd;
				else
					close(fd);
			}
		}
		if (m.msg_flags & MSG_CTRUNC)
			return -EPROTO; /* fds lost on the way: cannot trust the set */
		if (n == 0)
			return -ECONNRESET;
		got += (size_t)n;
	}
	return 0;
}

/* Takes *fd as a doorbell (then *fd = -1). -EPROTO if it is not an eventfd. */
static int adopt_doorbell(struct allm_doorbell *db, int *fd)
{
	int r = allm_doorbell_from_fd(db, *fd);
	if (r == 0)
		*fd = -1;
	return r == -EINVAL ? -EPROTO : r;
}

/* Maps the segment and adopts the doorbells named by a status-0 welcome.
 * Takes ownership of every fd in fds (closes the ones it does not keep). */
static int adopt_fds(struct allm_client *c, const struct allm_welcome *w, int *fds, int n_fds,
                     char *err, size_t errlen)
{
	bool posix = w->shm_name[0] != '\0';
	int want = posix ? 2 : 3, r;
	if (n_fds != want) {
		(void)allm_errtext(err, errlen, 0, "engine sent %d file descriptors, expected %d (%s mode)", n_fds,
		        want, posix ? "POSIX shm" : "memfd");
		r = -EPROTO;
		goto out;
	}
	if (posix) {
		if (!memchr(w->shm_name, '\0', sizeof(w->shm_name)) || w->shm_name[0] != '/') {
			(void)allm_errtext(err, errlen, 0, "engine sent a malformed shared-memory name");
			r = -EPROTO;
			goto out;
		}
		r = allm_shm_segment_open_posix(w->shm_name, &c->seg);
	} else {
		r = allm_shm_segment_map_fd(fds[0], &c->seg);
	}
	if (r) {
		(void)allm_errtext(err, errlen, 0, "cannot map the engine's shared-memory segment: %s",
		        r == -EPROTO ? "bad segment header (engine from another version?)"
		                     : strerror(-r));
		goto out;
	}
	int sq = posix ? 0 : 1;
	if ((r = adopt_doorbell(&c->sq_db, &fds[sq])) || (r = adopt_doorbell(&c->cq_db, &fds[sq + 1]))) {
		(void)allm_errtext(err, errlen, 0, "engine sent a bad doorbell: %s",
		        r == -EPROTO ? "not an eventfd" : strerror(-r));
		goto out;
	}
	if ((r = allm_client_attach(c))) {
		(void)allm_errtext(err, errlen, 0, "cannot attach to the engine's rings: %s",
		        r == -EPROTO ? "corrupt ring indices" : strerror(-r));
		goto out;
	}
out:
	close_fds(fds, n_fds); /* the segment keeps its own dup; -1 for adopted doorbells */
	return r;
}

/* The handshake on a connected socket. Fills c; returns 0 or a negative errno
 * with err set. */
static int handshake(struct allm_client *c, const struct allm_client_opts *o, const char *path,
                     int64_t deadline, char *err, size_t errlen)
{
	struct allm_hello hello = {
		.magic = ALLM_HELLO_MAGIC,
		.abi_version = ALLM_SHM_ABI_VERSION,
		.sq_entries = o->sq_entries,
		.cq_entries = o->cq_entries,
		.arena_size = o->arena_size,
		.flags = o->posix_shm ? ALLM_HELLO_F_POSIX : 0,
	};
	struct allm_welcome w;
	int fds[MAX_FDS], n_fds = 0, r;

	int sent = send_all(c->sock, &hello, sizeof(hello), deadline);
	if (sent && sent != -EPIPE && sent != -ECONNRESET) {
		if (sent == -ETIMEDOUT)
			(void)allm_errtext(err, errlen, 0, "no engine answers at %s", path);
		else
			(void)allm_errtext(err, errlen, 0, "cannot talk to the engine at %s: %s", path, strerror(-sent));
		return sent;
	}
	/* a refusal may come before our hello (the engine checks our uid at accept):
	 * its welcome, already here, says why the hello could not be sent */
	r = recv_welcome(c->sock, &w, fds, &n_fds, deadline);
	if (sent && r) {
		close_fds(fds, n_fds);
		(void)allm_errtext(err, errlen, 0, "cannot talk to the engine at %s: %s", path, strerror(-sent));
		return sent;
	}
	if (r) {
		close_fds(fds, n_fds);
		if (r == -ETIMEDOUT)
			(void)allm_errtext(err, errlen, 0, "no engine answers at %s (waited for its welcome)", path);
		else if (r == -ECONNRESET)
			(void)allm_errtext(err, errlen, 0, "the engine at %s closed the connection during the handshake",
			        path);
		else if (r == -EPROTO)
			(void)allm_errtext(err, errlen, 0, "the engine at %s sent a truncated file-descriptor list", path);
		else
			(void)allm_errtext(err, errlen, 0, "cannot read the engine's welcome at %s: %s", path,
			        strerror(-r));
		return r;
	}
	if (w.magic != ALLM_WELCOME_MAGIC) {
		close_fds(fds, n_fds);
		(void)allm_errtext(err, errlen, 0, "%s does not speak the AdaptiveLLM protocol (bad welcome)", path);
		return -EPROTO;
	}
	if (w.abi_version != ALLM_SHM_ABI_VERSION) {
		close_fds(fds, n_fds);
		(void)allm_errtext(err, errlen, 0, "the engine at %s speaks ABI version %u, this library %u", path,
		        w.abi_version, ALLM_SHM_ABI_VERSION);
		return -EPROTO;
	}
	w.message[sizeof(w.message) - 1] = '\0'; /* the peer's string: terminate it ourselves */
	if (w.status != 0 || sent) {
		close_fds(fds, n_fds);
		if (!w.status)
			w.status = sent;
		r = w.status < 0 && w.status > -4096 ? w.status : -EPROTO;
		(void)allm_errtext(err, errlen, 0, "the engine at %s refused the connection: %s", path,
		        w.message[0] ? w.message : strerror(-r));
		return r;
	}
	if ((r = adopt_fds(c, &w, fds, n_fds, err, errlen)))
		return r;
	c->client_id = w.client_id;
	memcpy(c->model, w.message, sizeof(c->model)); /* both 128 bytes, terminated above */

	const uint8_t ack = ALLM_MAPPED_ACK;
	if ((r = send_all(c->sock, &ack, 1, deadline))) {
		(void)allm_errtext(err, errlen, 0, "the engine at %s went away during the handshake: %s", path,
		        r == -ETIMEDOUT ? "timed out" : strerror(-r));
		return r;
	}
	return 0;
}

/* Returns 0 or -errno; see client.h. */
int allm_client_connect(const struct allm_client_opts *opts, allm_client_t **ret, char *err,
                        size_t errlen)
{
	static const struct allm_client_opts defaults = { 0 };
	const struct allm_client_opts *o = opts ? opts : &defaults;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)], dir[sizeof(path)];
	uid_t engine_uid;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!ret) {
		(void)allm_errtext(err, errlen, 0, "no place for the handle");
		return -EINVAL;
	}
	if ((r = socket_path(o, path, sizeof(path), dir, sizeof(dir), err, errlen)) ||
	    (r = allm_shm_engine_uid(&engine_uid, err, errlen)) ||
	    (r = verify_dir(dir, engine_uid, err, errlen)))
		return r;
	int timeout = o->timeout_ms == 0 ? DEFAULT_TIMEOUT_MS : o->timeout_ms;
	int64_t deadline = timeout < 0 ? -1 : now_ms() + timeout;

	struct allm_client *c = calloc(1, sizeof(*c));
	if (!c) {
		(void)allm_errtext(err, errlen, 0, "out of memory");
		return -ENOMEM;
	}
	c->sock = -1;
	c->sq_db.fd = c->cq_db.fd = -1;
	c->spin_us = o->spin_us == 0 ? DEFAULT_SPIN_US : o->spin_us < 0 ? 0 : o->spin_us;

	if ((r = connect_socket(path, deadline, &c->sock))) {
		if (r == -ETIMEDOUT)
			(void)allm_errtext(err, errlen, 0, "no engine answers at %s (its backlog stays full)", path);
		else
			(void)allm_errtext(err, errlen, 0, "cannot connect to %s: %s%s", path, strerror(-r),
			        r == -ENOENT || r == -ECONNREFUSED ? " (is allm-engined running?)" : "");
		goto fail;
	}
	if ((r = verify_peer(c->sock, path, engine_uid, err, errlen)) ||
	    (r = handshake(c, o, path, deadline, err, errlen)))
		goto fail;
	*ret = c;
	return 0;
fail:
	allm_client_disconnect(c);
	return r;
}

void allm_client_disconnect(allm_client_t *c)
{
	if (!c)
		return;
	/* The lease first: the engine cancels our requests as soon as it sees this. */
	if (c->sock >= 0)
		close(c->sock);
	allm_doorbell_close(&c->sq_db);
	allm_doorbell_close(&c->cq_db);
	allm_shm_segment_destroy(c->seg);
	free(c->spans);
	for (size_t i = 0; i < c->n_partials; i++)
		free(c->partials[i].buf);
	free(c->partials);
	free(c->text);
	free(c);
}

int allm_client_fd(allm_client_t *c)
{
	return c ? allm_doorbell_fd(&c->cq_db) : -1;
}

int allm_client_lease_fd(allm_client_t *c)
{
	return c ? c->sock : -1;
}

const char *allm_client_model(allm_client_t *c)
{
	return c ? c->model : "";
}

uint32_t allm_client_id(allm_client_t *c)
{
	return c ? c->client_id : 0;
}
