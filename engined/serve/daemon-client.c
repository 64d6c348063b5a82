/* allm-engined's clients: the handshake over the Unix socket, the SQ entries they
 * submit (copied out of shared memory and validated before use: the segment is
 * hostile, DESIGN §8) and the CQ entries the engine streams back, with a bounded
 * backlog for clients that stop draining. */
#include "daemon.h"

#include "tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* --- CQEs ------------------------------------------------------------------------ */

/* Hands a CQE to the client: into the CQ when the backlog is empty and there is
 * room, else into the backlog. A backlog past ALLM_D_BACKLOG_MAX means the client
 * stopped draining: its requests are failed (their FINALs still fit, up to the
 * hard cap); tokens for a stalled client are dropped. */
static void emit(struct daemon *d, struct dclient *c, const struct allm_cqe *e)
{
	if (c->state != DC_READY)
		return;
	int r = c->bl_n == 0 ? allm_ring_push(&c->cq, e) : -EAGAIN;
	if (r == 0) {
		c->cq_pushed = true;
		return;
	}
	if (r == -EPROTO) {
		dlog(d, 1, "client %u: corrupt completion ring: disconnecting", c->id);
		c->state = DC_DEAD;
		return;
	}
	if (c->stalled && e->kind == ALLM_CQE_TOKEN)
		return;
	if (c->bl_n >= ALLM_D_BACKLOG_HARD)
		return;
	if (c->bl_n == c->bl_cap) {
		uint32_t cap = c->bl_cap ? c->bl_cap * 2 : 64;
		struct allm_cqe *b = allm_malloc((size_t)cap * sizeof(*b));
		if (!b)
			return;
		for (uint32_t i = 0; i < c->bl_n; i++)
			b[i] = c->backlog[(c->bl_head + i) % c->bl_cap];
		allm_free(c->backlog);
		c->backlog = b;
		c->bl_cap = cap;
		c->bl_head = 0;
	}
	c->backlog[(c->bl_head + c->bl_n) % c->bl_cap] = *e;
	c->bl_n++;
	if (c->bl_n > ALLM_D_BACKLOG_MAX && !c->stalled) {
		/* its requests are failed by daemon_flush(), outside the engine step
		 * that may be calling us */
		c->stalled = true;
		dlog(d, 1, "client %u stopped draining its completion queue: failing its requests", c->id);
	}
}

static void emit_final_error(struct daemon *d, struct dclient *c, uint64_t tag, int32_t status,
			     const char *msg)
{
	struct allm_cqe e;
	memset(&e, 0, sizeof(e));
	e.kind = ALLM_CQE_FINAL;
	e.finish_reason = ALLM_FINISH_ERROR;
	e.status = status;
	e.user_tag = tag;
	snprintf(e.u.final.error, sizeof(e.u.final.error), "%s", msg);
	emit(d, c, &e);
	c->rejected++;
}

/* A text piece as TOKEN entries: pieces longer than one entry are split on the
 * byte level with ALLM_CQE_F_CONTINUED on all but the last part. */
static void emit_text(struct daemon *d, struct dclient *c, const struct allm_request *r,
		      int32_t token, uint32_t index, const char *text, size_t len)
{
	struct allm_cqe e;
	do {
		size_t part = ALLM_MIN(len, (size_t)ALLM_CQE_TEXT_MAX);
		memset(&e, 0, sizeof(e));
		e.kind = ALLM_CQE_TOKEN;
		e.flags = part < len ? ALLM_CQE_F_CONTINUED : 0;
		e.text_len = (uint8_t)part;
		e.user_tag = ((struct dreq *)r->user)->user_tag;
		e.request_id = (uint64_t)r->id;
		e.u.token.token_id = token;
		e.u.token.index = index;
		memcpy(e.u.token.text, text, part);
		emit(d, c, &e);
		text += part;
		len -= part;
	} while (len > 0);
}

void daemon_on_token(void *user, struct allm_request *r, int32_t token)
{
	struct daemon *d = user;
	struct dreq *dr = r->user;
	char piece[1024];
	int n = 0;
	if (!dr->c)
		return;
	if (dr->detok) {
		n = allm_detok_push(dr->detok, token, piece, sizeof(piece));
		if (n < 0)
			n = 0;
	}
	emit_text(d, dr->c, r, token, dr->n_gen++, piece, (size_t)n);
}

static uint64_t us(double a, double b)
{
	return b > a ? (uint64_t)((b - a) * 1e6) : 0;
}

void daemon_on_finish(void *user, struct allm_request *r)
{
	struct daemon *d = user;
	struct dreq *dr = r->user;
	struct dclient *c = dr->c;
	if (c) {
		char piece[1024];
		int n = dr->detok ? allm_detok_flush(dr->detok, piece, sizeof(piece)) : 0;
		if (n > 0)
			emit_text(d, c, r, -1, dr->n_gen, piece, (size_t)n);
		struct allm_cqe e;
		memset(&e, 0, sizeof(e));
		e.kind = ALLM_CQE_FINAL;
		e.user_tag = dr->user_tag;
		e.request_id = (uint64_t)r->id;
		int32_t last = r->seq.n_tokens > r->seq.n_prompt ? r->seq.tokens[r->seq.n_tokens - 1] : -1;
		bool by_stop_id = false;
		for (int i = 0; i < r->n_stop; i++)
			by_stop_id |= r->stop_ids[i] == last;
		switch (r->finish_kind) {
		case ALLM_END_STOP: e.finish_reason = by_stop_id ? ALLM_FINISH_STOP : ALLM_FINISH_EOS; break;
		case ALLM_END_LENGTH: e.finish_reason = ALLM_FINISH_LENGTH; break;
		case ALLM_END_CANCELLED: e.finish_reason = ALLM_FINISH_CANCELLED; break;
		default:
			e.finish_reason = ALLM_FINISH_ERROR;
			e.status = -EIO;
			snprintf(e.u.final.error, sizeof(e.u.final.error), "%.63s",
				 c->stalled ? "client not draining its completion queue" : r->error);
		}
		if (c->stalled && r->finish_kind == ALLM_END_CANCELLED) {
			e.finish_reason = ALLM_FINISH_ERROR;
			e.status = -ENOBUFS;
			snprintf(e.u.final.error, sizeof(e.u.final.error),
				 "client not draining its completion queue");
		}
		e.u.final.queue_us = us(r->arrival, r->first_sched ? r->first_sched : r->finish);
		e.u.final.ttft_us = us(r->arrival, r->first_token ? r->first_token : r->finish);
		e.u.final.total_us = us(r->arrival, r->finish);
		e.u.final.n_prompt = (uint32_t)r->seq.n_prompt;
		e.u.final.n_generated = (uint32_t)allm_request_n_generated(r);
		e.u.final.n_preemptions = (uint32_t)(r->n_preempt_swap + r->n_preempt_recompute);
		emit(d, c, &e);
		c->inflight--;
	}
	allm_detok_free(dr->detok);
	allm_free(dr);
}

/* --- SQEs ------------------------------------------------------------------------ */

static void handle_submit(struct daemon *d, struct dclient *c, const struct allm_sqe *q)
{
	const struct allm_model_config *mc = &d->rt->model->cfg;
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0;
	if (d->draining)
		return emit_final_error(d, c, q->user_tag, -ESHUTDOWN, "engine shutting down");
	if (d->paused)
		return emit_final_error(d, c, q->user_tag, -EBUSY,
					"engine draining (allmctl drain): new requests refused");
	if (c->inflight >= ALLM_D_MAX_INFLIGHT)
		return emit_final_error(d, c, q->user_tag, -EAGAIN, "too many requests in flight");
	/* still not draining: no new work (its tokens would only be dropped) */
	if (c->stalled)
		return emit_final_error(d, c, q->user_tag, -ENOBUFS,
					"client not draining its completion queue");
	if (q->flags || q->n_stop > ALLM_SQE_MAX_STOP || q->max_tokens <= 0)
		return emit_final_error(d, c, q->user_tag, -EINVAL, "bad flags, n_stop or max_tokens");
	if (q->prompt_kind != ALLM_PROMPT_TEXT && q->prompt_kind != ALLM_PROMPT_TOKENS)
		return emit_final_error(d, c, q->user_tag, -EINVAL, "bad prompt_kind");
	/* bounds-checked copy out of the arena into private memory, before any use */
	if (allm_shm_arena_copy_out(c->seg, q->prompt_off, q->prompt_len, c->prompt_buf,
				    (size_t)c->seg->layout.arena_size))
		return emit_final_error(d, c, q->user_tag, -EINVAL, "prompt outside the arena");
	if (q->prompt_kind == ALLM_PROMPT_TOKENS) {
		if (q->prompt_len % 4 || q->prompt_len == 0)
			return emit_final_error(d, c, q->user_tag, -EINVAL, "token prompt length not a multiple of 4");
		n = q->prompt_len / 4;
		ids = allm_malloc(n * sizeof(int32_t));
		if (!ids)
			return emit_final_error(d, c, q->user_tag, -ENOMEM, "out of memory");
		memcpy(ids, c->prompt_buf, n * sizeof(int32_t));
	} else {
		if (!d->rt->tok)
			return emit_final_error(d, c, q->user_tag, -EINVAL, "model has no tokenizer: send token ids");
		if (allm_tokenizer_encode(d->rt->tok, (const char *)c->prompt_buf, q->prompt_len, true,
					  &ids, &n, &err))
			return emit_final_error(d, c, q->user_tag, -EINVAL, err.msg);
	}
	struct dreq *dr = allm_calloc(1, sizeof(*dr));
	if (!dr) {
		allm_free(ids);
		return emit_final_error(d, c, q->user_tag, -ENOMEM, "out of memory");
	}
	dr->c = c;
	dr->user_tag = q->user_tag;
	if (d->rt->tok && allm_detok_create(d->rt->tok, true, &dr->detok))
		dr->detok = NULL;
	struct allm_submit s = {
		.prompt = ids,
		.n_prompt = (int32_t)ALLM_MIN(n, (size_t)INT32_MAX),
		.max_tokens = ALLM_MIN(q->max_tokens, mc->max_pos),
		.sampling = {.temperature = q->temperature, .top_k = q->top_k > 0 ? q->top_k : 0,
			     .top_p = q->top_p, .seed = q->seed},
		.ignore_eos = q->ignore_eos != 0,
		.n_stop = (int32_t)q->n_stop,
		.tag = q->user_tag,
		.user = dr,
	};
	memcpy(s.stop_ids, q->stop_ids, sizeof(q->stop_ids));
	int64_t id;
	int r = allm_engine_submit(d->eng, &s, &id, &err);
	allm_free(ids);
	if (r) {
		allm_detok_free(dr->detok);
		allm_free(dr);
		return emit_final_error(d, c, q->user_tag, r, err.msg);
	}
	c->inflight++;
	c->submitted++;
	struct allm_cqe e;
	memset(&e, 0, sizeof(e));
	e.kind = ALLM_CQE_ACCEPTED;
	e.user_tag = q->user_tag;
	e.request_id = (uint64_t)id;
	emit(d, c, &e);
}

void daemon_handle_sqe(struct daemon *d, struct dclient *c, const struct allm_sqe *q)
{
	switch (q->opcode) {
	case ALLM_OP_NOP:
		return;
	case ALLM_OP_SUBMIT:
		return handle_submit(d, c, q);
	case ALLM_OP_CANCEL: {
		/* only the owner may cancel; an unknown id is a no-op */
		struct dreq *dr = q->request_id <= INT64_MAX
					  ? allm_engine_request_user(d->eng, (int64_t)q->request_id)
					  : NULL;
		if (dr && dr->c == c)
			allm_engine_cancel(d->eng, (int64_t)q->request_id);
		return;
	}
	default:
		return emit_final_error(d, c, q->user_tag, -EINVAL, "unknown opcode");
	}
}

void daemon_pump_sq(struct daemon *d)
{
	for (struct dclient *c = d->clients; c; c = c->next) {
		if (c->state != DC_READY)
			continue;
		struct allm_sqe q; /* a private copy: the slot itself is never read again */
		for (int i = 0; i < ALLM_D_SQ_BATCH; i++) {
			int r = allm_ring_pop(&c->sq, &q);
			if (r == -EAGAIN)
				break;
			if (r) {
				dlog(d, 1, "client %u: corrupt submission ring (%s): disconnecting", c->id,
				     strerror(-r));
				c->state = DC_DEAD;
				break;
			}
			daemon_handle_sqe(d, c, &q);
		}
	}
}

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
	struct allm_shm_layout want = {
		.sq_entries = clamp_pow2(h.sq_entries, 256, 8, 4096),
		.cq_entries = clamp_pow2(h.cq_entries, 1024, 8, 16384),
		.arena_size = h.arena_size ? ALLM_MIN(ALLM_MAX(h.arena_size, 4096u), 64u << 20) : 1u << 20,
	};
	bool posix = d->posix_shm || (h.flags & ALLM_HELLO_F_POSIX);
	int r = allm_shm_segment_create(&want, posix, &c->seg);
	if (!r && !(c->prompt_buf = allm_malloc((size_t)c->seg->layout.arena_size)))
		r = -ENOMEM;
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

void daemon_on_listen(struct allm_loop *l, int fd, uint32_t revents, void *user)
{
	struct daemon *d = user;
	for (;;) {
		int s = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (s < 0)
			return; /* EAGAIN: all accepted */
		struct ucred cr;
		socklen_t len = sizeof(cr);
		struct dclient *c = allm_calloc(1, sizeof(*c));
		if (!c) {
			close(s);
			continue;
		}
		c->d = d;
		c->id = ++d->next_client_id;
		c->sock = s;
		c->sq_db.fd = c->cq_db.fd = -1;
		c->state = DC_HELLO;
		c->next = d->clients;
		d->clients = c;
		if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) || !uid_allowed(d, cr.uid)) {
			dlog(d, 1, "client %u refused: uid %d is not allowed (--allow-uid)", c->id,
			     (int)cr.uid);
			send_welcome(d, c, -EACCES, "permission denied: uid not allowed");
			c->state = DC_DEAD;
			continue;
		}
		c->uid = cr.uid;
		c->pid = cr.pid;
		if (d->draining || allm_loop_watch(d->loop, s, POLLIN, on_client_sock, c)) {
			send_welcome(d, c, -ESHUTDOWN, "engine shutting down");
			c->state = DC_DEAD;
			continue;
		}
		dlog(d, 3, "client %u connected (pid %d, uid %d)", c->id, (int)cr.pid, (int)cr.uid);
	}
}

static void cancel_all(struct daemon *d, struct dclient *c);

/* Cancels a dead client's requests and frees everything it held. */
static void reap(struct daemon *d, struct dclient *c)
{
	/* orphaned requests finish without writing to a client that is gone */
	struct allm_engine_stats st;
	allm_engine_get_stats(d->eng, &st);
	int cap = st.waiting + st.running + st.swapped + 1;
	const struct allm_request **rs = allm_malloc((size_t)cap * sizeof(*rs));
	enum allm_req_state qs[] = {ALLM_REQ_RUNNING, ALLM_REQ_SWAPPED, ALLM_REQ_WAITING};
	for (int q = 0; rs && q < 3; q++) {
		int n = allm_engine_list(d->eng, qs[q], rs, cap);
		for (int i = 0; i < n; i++) {
			struct dreq *dr = rs[i]->user;
			if (dr && dr->c == c)
				dr->c = NULL;
		}
	}
	allm_free(rs);
	cancel_all(d, NULL);
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
	allm_free(c->prompt_buf);
	dlog(d, 3, "client %u gone (%llu submitted, %llu rejected)", c->id,
	     (unsigned long long)c->submitted, (unsigned long long)c->rejected);
	allm_free(c);
}

/* Cancels every request of client c (on_finish sends their FINALs); c NULL: the
 * requests whose client is gone. */
static void cancel_all(struct daemon *d, struct dclient *c)
{
	const struct allm_request *rs[256];
	enum allm_req_state qs[] = {ALLM_REQ_RUNNING, ALLM_REQ_SWAPPED, ALLM_REQ_WAITING};
	for (int q = 0; q < 3; q++) {
		int k;
		do {
			int64_t ids[256];
			int n = allm_engine_list(d->eng, qs[q], rs, 256);
			k = 0;
			for (int i = 0; i < n; i++) {
				const struct dreq *dr = rs[i]->user;
				if (dr && dr->c == c)
					ids[k++] = rs[i]->id;
			}
			for (int i = 0; i < k; i++)
				allm_engine_cancel(d->eng, ids[i]);
		} while (k > 0);
	}
}

void daemon_flush(struct daemon *d)
{
	for (struct dclient **pc = &d->clients; *pc;) {
		struct dclient *c = *pc;
		if (c->stalled && !c->stall_handled) {
			c->stall_handled = true;
			cancel_all(d, c);
		}
		if (c->state == DC_DEAD) {
			*pc = c->next;
			reap(d, c);
			continue;
		}
		while (c->state == DC_READY && c->bl_n > 0) {
			int r = allm_ring_push(&c->cq, &c->backlog[c->bl_head]);
			if (r == -EPROTO) {
				dlog(d, 1, "client %u: corrupt completion ring: disconnecting", c->id);
				c->state = DC_DEAD; /* reaped on the next turn */
			}
			if (r)
				break;
			c->bl_head = (c->bl_head + 1) % c->bl_cap;
			c->bl_n--;
			c->cq_pushed = true;
		}
		if (c->stalled && c->stall_handled && c->bl_n == 0) {
			/* it drained everything: serve it again */
			c->stalled = c->stall_handled = false;
			dlog(d, 2, "client %u drains its completion queue again", c->id);
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
		if (c->state == DC_READY && c->bl_n > 0)
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
	if ((r = allm_shm_segment_create(want, false, &c->seg)) ||
	    (r = allm_shm_segment_sq_cons(c->seg, &c->sq)) ||
	    (r = allm_shm_segment_cq_prod(c->seg, &c->cq)) ||
	    !(c->prompt_buf = allm_malloc((size_t)c->seg->layout.arena_size))) {
		allm_shm_segment_destroy(c->seg);
		allm_free(c);
		return r ? r : -ENOMEM;
	}
	c->state = DC_READY;
	c->next = d->clients;
	d->clients = c;
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
