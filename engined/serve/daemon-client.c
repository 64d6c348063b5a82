/* allm-engined's clients: accepting them on the Unix socket, the handshake that
 * hands each one its shared-memory segment and doorbells, the socket as the lease,
 * and the end of a client (its requests cancelled, everything it held freed). */
#include "daemon.h"

#include "shm-guard.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* --- handshake and lifetime ----------------------------------------------------- */

static void on_doorbell(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	struct dclient *c = user;
	allm_doorbell_drain(&c->sq_db, NULL); /* the loop pumps the ring after every turn */
}

static void send_welcome(struct daemon *d, struct dclient *c, int32_t status, const char *msg)
{
	struct allm_welcome w;
	memset(&w, 0, sizeof(w));
	w.magic = ALLM_WELCOME_MAGIC;
	w.abi_version = ALLM_SHM_ABI_VERSION;
	w.status = status;
	w.client_id = c->id;
	snprintf(w.message, sizeof(w.message), "%s", msg);
	int fds[3], nfd = 0;
	if (status == 0) {
		if (c->seg->posix_name[0])
			snprintf(w.shm_name, sizeof(w.shm_name), "%s", c->seg->posix_name);
		else
			fds[nfd++] = c->seg->fd;
		fds[nfd++] = allm_doorbell_fd(&c->sq_db);
		fds[nfd++] = allm_doorbell_fd(&c->cq_db);
	}
	struct iovec iov = {&w, sizeof(w)};
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfd) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfd);
	}
	if (sendmsg(c->sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(w))
		c->state = DC_DEAD;
}

static uint32_t clamp_pow2(uint32_t want, uint32_t def, uint32_t lo, uint32_t hi)
{
	uint32_t v = want ? want : def;
	v = v < lo ? lo : v > hi ? hi : v;
	uint32_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

/* The hello arrived: check it, build the segment and doorbells, answer. */
static void handshake(struct daemon *d, struct dclient *c)
{
	struct allm_hello h;
	memcpy(&h, c->hello_buf, sizeof(h));
	if (h.magic != ALLM_HELLO_MAGIC || h.abi_version != ALLM_SHM_ABI_VERSION) {
		send_welcome(d, c, -EPROTO, "bad hello (magic or ABI version)");
		c->state = DC_DEAD;
		return;
	}
	/* reserved bits and fields are zero, so a later ABI can give them a meaning */
	if (h.reserved || (h.flags & ~ALLM_HELLO_F_POSIX)) {
		send_welcome(d, c, -EINVAL, "bad hello: reserved fields and flags must be zero");
		c->state = DC_DEAD;
		return;
	}
	struct allm_shm_layout want = {
		.sq_entries = clamp_pow2(h.sq_entries, 256, 8, 4096),
		.cq_entries = clamp_pow2(h.cq_entries, 1024, 8, 16384),
		.arena_size = h.arena_size ? ALLM_MIN(ALLM_MAX(h.arena_size, 4096u), 64u << 20) : 1u << 20,
	};
	/* The mode is the engine's choice, never the client's: a POSIX object cannot
	 * be sealed, so a client that could pick it could truncate the segment under
	 * the engine (SIGBUS). The hello's POSIX flag is only a wish, granted when the
	 * engine runs --shm posix anyway; and another uid could not open our 0600
	 * object by name, so it gets a memfd. */
	bool posix = d->posix_shm && c->uid == getuid();
	int r = allm_shm_segment_create(&want, posix, &c->seg);
	if (!r && posix)
		allm_shm_guard_add(c->seg); /* a truncation fails this client, not the engine */
	if (!r)
		r = allm_doorbell_create(&c->sq_db);
	if (!r)
		r = allm_doorbell_create(&c->cq_db);
	if (!r)
		r = allm_shm_segment_sq_cons(c->seg, &c->sq);
	if (!r)
		r = allm_shm_segment_cq_prod(c->seg, &c->cq);
	if (!r)
		r = allm_loop_watch(d->loop, allm_doorbell_fd(&c->sq_db), POLLIN, on_doorbell, c);
	if (r) {
		send_welcome(d, c, r, "cannot set up shared memory");
		c->state = DC_DEAD;
		return;
	}
	send_welcome(d, c, 0, d->rt->model_desc);
	if (c->state != DC_DEAD)
		c->state = DC_ACK;
}

static void on_client_sock(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	struct dclient *c = user;
	struct daemon *d = c->d;
	uint8_t buf[64];
	ssize_t n;
	switch (c->state) {
	case DC_HELLO:
		n = recv(fd, c->hello_buf + c->hello_got, sizeof(c->hello_buf) - c->hello_got, MSG_DONTWAIT);
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				c->state = DC_DEAD;
			return;
		}
		c->hello_got += (size_t)n;
		if (c->hello_got == sizeof(c->hello_buf))
			handshake(d, c);
		return;
	case DC_ACK:
	case DC_READY:
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			c->state = DC_DEAD; /* the lease ended */
			return;
		}
		if (n > 0 && c->state == DC_ACK && buf[0] == ALLM_MAPPED_ACK) {
			allm_shm_segment_unlink(c->seg); /* both sides mapped it: drop the name */
			/* the ack is the last byte a client ever sends */
			c->state = n == 1 ? DC_READY : DC_DEAD;
		} else if (n > 0) {
			c->state = DC_DEAD; /* nothing else is ever sent on the lease */
		}
		return;
	default:
		return;
	}
}

static bool uid_allowed(const struct daemon *d, uid_t uid)
{
	if (uid == getuid())
		return true;
	for (int i = 0; i < d->n_allow_uids; i++)
		if (d->allow_uids[i] == uid)
			return true;
	return false;
}

struct duid *daemon_uid_account(struct daemon *d, uid_t uid)
{
	for (int i = 0; i < d->n_uids; i++)
		if (d->uids[i].uid == uid)
			return &d->uids[i];
	if (d->n_uids == (int)ALLM_ARRAY_SIZE(d->uids))
		return NULL;
	d->uids[d->n_uids] = (struct duid){.uid = uid};
	return &d->uids[d->n_uids++];
}

void daemon_listen_pause(struct daemon *d)
{
	if (d->listen_fd >= 0 && d->listen_watched && !allm_loop_unwatch(d->loop, d->listen_fd))
		d->listen_watched = false;
}

void daemon_listen_resume(struct daemon *d)
{
	if (d->listen_fd < 0 || d->listen_watched || d->draining)
		return;
	if (!allm_loop_watch(d->loop, d->listen_fd, POLLIN, daemon_on_listen, d)) {
		d->listen_watched = true;
		if (d->listen_paused)
			dlog(d, ALLM_LOG_INFO, "accepting clients again (%d connected)", d->n_clients);
		d->listen_paused = false;
	}
}

void daemon_client_add(struct daemon *d, int s, const struct ucred *cr)
{
	struct dclient *c = allm_calloc(1, sizeof(*c));
	if (!c) {
		close(s);
		return;
	}
	c->d = d;
	c->id = ++d->next_client_id;
	c->sock = s;
	c->sq_db.fd = c->cq_db.fd = -1;
	c->state = DC_HELLO;
	c->born = allm_now();
	c->next = d->clients;
	d->clients = c;
	d->n_clients++;
	c->uid = cr->uid;
	c->pid = cr->pid;
	if (!uid_allowed(d, cr->uid) || !(c->acct = daemon_uid_account(d, cr->uid))) {
		/* a line per ALLM_D_REFUSED_LOG_S at most: a refused user who connects in
		 * a loop must not fill the log (the line says how many it stood for) */
		double now = allm_now();
		if (d->refused_logged == 0 || now - d->refused_logged >= ALLM_D_REFUSED_LOG_S) {
			char more[96] = "";
			if (d->refused_quiet)
				snprintf(more, sizeof(more), " (and %llu more refused since the last such line)",
					 (unsigned long long)d->refused_quiet);
			dlog(d, ALLM_LOG_WARN, "client %u refused: uid %d is not allowed (--allow-uid)%s", c->id, (int)cr->uid,
			     more);
			d->refused_logged = now;
			d->refused_quiet = 0;
		} else {
			d->refused_quiet++;
		}
		send_welcome(d, c, -EACCES, "permission denied: uid not allowed");
		c->state = DC_DEAD;
		return;
	}
	if (d->draining || allm_loop_watch(d->loop, s, POLLIN, on_client_sock, c)) {
		send_welcome(d, c, -ESHUTDOWN, "engine shutting down");
		c->state = DC_DEAD;
		return;
	}
	dlog(d, ALLM_LOG_DEBUG, "client %u connected (pid %d, uid %d)", c->id, (int)cr->pid, (int)cr->uid);
}

void daemon_on_listen(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	struct daemon *d = user;
	for (;;) {
		if (d->n_clients >= d->max_clients) {
			/* not polled while full: connections wait in the kernel's backlog
			 * until a client leaves (reap) instead of costing a turn each */
			daemon_listen_pause(d);
			d->listen_paused = true;
			double now = allm_now();
			if (now - d->limit_logged >= 10) { /* churn at the limit: a line per 10 s */
				dlog(d, ALLM_LOG_WARN, "at the client limit (%d, --max-clients): new connections wait",
				     d->max_clients);
				d->limit_logged = now;
			}
			return;
		}
		int s = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (s < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* the connection stays queued and the listener readable:
				 * polling it again now would spin. Pause for a second (or
				 * until a client leaves); the control plane keeps its fds. */
				daemon_listen_pause(d);
				d->listen_paused = true;
				d->listen_retry = allm_now() + 1.0;
				dlog(d, ALLM_LOG_WARN, "cannot accept a client (%s, %d connected): not accepting for 1 s",
				     strerror(errno), d->n_clients);
				return;
			}
			if (errno == ECONNABORTED || errno == EINTR || errno == EPROTO)
				continue;
			return; /* EAGAIN: all accepted */
		}
		struct ucred cr;
		socklen_t len = sizeof(cr);
		if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
			close(s);
			continue;
		}
		daemon_client_add(d, s, &cr);
	}
}

/* Connections that have not finished their handshake in time are closed: a
 * silent peer may not hold a client slot (DESIGN §8). The listener paused for
 * want of fds tries again. */
void daemon_client_tick(struct daemon *d, double now)
{
	int expired = 0;
	for (struct dclient *c = d->clients; c; c = c->next)
		if ((c->state == DC_HELLO || c->state == DC_ACK) && now - c->born > d->handshake_timeout) {
			c->state = DC_DEAD;
			expired++;
		}
	if (expired)
		dlog(d, ALLM_LOG_WARN, "closed %d connection%s that did not finish the handshake within %.1f s", expired,
		     expired == 1 ? "" : "s", d->handshake_timeout);
	if (!d->listen_watched && d->n_clients < d->max_clients && now >= d->listen_retry)
		daemon_listen_resume(d);
}

/* Cancels a dead client's requests and frees everything it held. */
static void reap(struct daemon *d, struct dclient *c)
{
	/* its own list: every request, nothing scanned, nothing allocated; they
	 * finish without writing to a client that is gone */
	daemon_cancel_requests(d, c, true);
	if (c->sq_db.fd >= 0)
		allm_loop_unwatch(d->loop, allm_doorbell_fd(&c->sq_db));
	if (c->sock >= 0) {
		allm_loop_unwatch(d->loop, c->sock);
		close(c->sock);
	}
	allm_doorbell_close(&c->sq_db);
	allm_doorbell_close(&c->cq_db);
	allm_shm_segment_destroy(c->seg);
	allm_free(c->backlog);
	dlog(d, ALLM_LOG_DEBUG, "client %u gone (%llu submitted, %llu rejected)", c->id,
	     (unsigned long long)c->submitted, (unsigned long long)c->rejected);
	allm_free(c);
	d->n_clients--;
	/* a slot is free (and maybe an fd or four) */
	d->listen_retry = 0;
	if (!d->listen_watched && d->n_clients < d->max_clients)
		daemon_listen_resume(d);
}

void daemon_flush(struct daemon *d)
{
	for (struct dclient **pc = &d->clients; *pc;) {
		struct dclient *c = *pc;
		if (allm_shm_guard_faulted(c->seg)) { /* reaped just below: said once */
			dlog(d, ALLM_LOG_WARN, "client %u truncated its shared-memory segment: disconnecting", c->id);
			c->state = DC_DEAD;
		}
		if (c->stalled && !c->stall_handled) {
			c->stall_handled = true;
			daemon_cancel_requests(d, c, false);
		}
		if (c->state == DC_DEAD) {
			*pc = c->next;
			reap(d, c);
			continue;
		}
		while (c->state == DC_READY && c->bl_n > 0) {
			int r = allm_ring_push(&c->cq, &c->backlog[c->bl_head]);
			if (r == -EPROTO) {
				dlog(d, ALLM_LOG_WARN, "client %u: corrupt completion ring: disconnecting", c->id);
				c->state = DC_DEAD; /* reaped on the next turn */
			}
			if (r)
				break;
			c->bl_head = (c->bl_head + 1) % c->bl_cap;
			c->bl_n--;
			c->cq_pushed = true;
		}
		if (c->state == DC_READY && c->n_owed)
			daemon_push_owed(d, c);
		if (c->stalled && c->stall_handled && c->bl_n == 0 && c->n_owed == 0) {
			/* it drained everything: serve it again */
			c->stalled = c->stall_handled = false;
			dlog(d, ALLM_LOG_INFO, "client %u drains its completion queue again", c->id);
		}
		if (c->cq_pushed && allm_ring_needs_wakeup(&c->cq))
			allm_doorbell_ring(&c->cq_db);
		c->cq_pushed = false;
		pc = &c->next;
	}
}

uint32_t daemon_client_list(void *user, struct ctl_client_info *ret, uint32_t max)
{
	struct daemon *d = user;
	uint32_t n = 0;
	for (struct dclient *c = d->clients; c; c = c->next) {
		if (c->state != DC_READY)
			continue;
		if (n < max) {
			int space = allm_ring_space(&c->cq);
			ret[n] = (struct ctl_client_info){
				.id = c->id,
				.pid = c->pid,
				.uid = c->uid,
				.in_flight = c->inflight,
				.submitted = c->submitted,
				.rejected = c->rejected,
				.ring_fill = space >= 0 && c->cq.entries ?
						     1.0 - (double)space / c->cq.entries : NAN,
				.backlog = c->bl_n,
			};
		}
		n++;
	}
	return n;
}

bool daemon_backlogged(const struct daemon *d)
{
	for (const struct dclient *c = d->clients; c; c = c->next)
		if (c->state == DC_READY && (c->bl_n > 0 || c->n_owed > 0))
			return true;
	return false;
}

void daemon_close_clients(struct daemon *d)
{
	for (struct dclient *c = d->clients; c; c = c->next)
		c->state = DC_DEAD;
	daemon_flush(d);
}

int daemon_client_attach(struct daemon *d, const struct allm_shm_layout *want,
			 struct dclient **ret)
{
	struct dclient *c = allm_calloc(1, sizeof(*c));
	int r;
	if (!c)
		return -ENOMEM;
	c->d = d;
	c->id = ++d->next_client_id;
	c->sock = -1;
	c->sq_db.fd = c->cq_db.fd = -1;
	c->uid = getuid();
	if (!(c->acct = daemon_uid_account(d, c->uid)))
		r = -ENOSPC;
	else if (!(r = allm_shm_segment_create(want, false, &c->seg)) &&
		 !(r = allm_shm_segment_sq_cons(c->seg, &c->sq)))
		r = allm_shm_segment_cq_prod(c->seg, &c->cq);
	if (r) {
		allm_shm_segment_destroy(c->seg);
		allm_free(c);
		return r;
	}
	c->state = DC_READY;
	c->next = d->clients;
	d->clients = c;
	d->n_clients++;
	*ret = c;
	return 0;
}

bool daemon_prepare_sleep(struct daemon *d)
{
	bool ok = true;
	for (struct dclient *c = d->clients; c; c = c->next)
		if (c->state == DC_READY && !allm_ring_prepare_sleep(&c->sq))
			ok = false; /* entries arrived: do not sleep */
	if (!ok)
		daemon_finish_sleep(d);
	return ok;
}

void daemon_finish_sleep(struct daemon *d)
{
	for (struct dclient *c = d->clients; c; c = c->next)
		if (c->state == DC_READY)
			allm_ring_finish_sleep(&c->sq);
}
