/* The pump: the one thread that owns the ring client. It connects (and reconnects
 * when the engine comes back), puts the requests the HTTP side hands it on the
 * submission ring, routes completion events to their requests by user_tag,
 * applies stop strings, cancels requests whose HTTP client hung up, and resumes
 * the suspended connections that have something to send. */
#include "gw-ctl.h"
#include "gw-pump.h"
#include "gw-users.h"

#include "common.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Between connection attempts while the engine is away. */
#define GW_RECONNECT_S 0.25
/* Events handled per turn before the queues are looked at again. */
#define GW_EVENT_BATCH 1024
/* The rings asked for: the pump drains the CQ continuously, so 64 streams fit
 * easily; the arena bounds prompts on the ring not yet accepted. */
#define GW_SQ_ENTRIES 1024
#define GW_CQ_ENTRIES 16384
#define GW_ARENA (8u << 20)
/* The pump's poll set starts this large (3 fds of its own + sockets) and grows. */
#define GW_WATCH_MIN 64
/* While events keep the pump busy (it polls only when idle), the sockets of the
 * requests are looked at this often for hang-ups: a client that went away had
 * its choices run on for as long as the engine kept others busy (~30 s, issue 49
 * item 6). */
#define GW_HANGUP_CHECK_S 0.05

/* Connections to resume once the lock is dropped (MHD_resume_connection takes
 * libmicrohttpd's own lock; never call it under ours). */
struct resume_list {
	struct MHD_Connection **c;
	size_t n, cap;
};

/* Resumes the connection r's HTTP request waits on, if it waits. */
static void wake_req(struct resume_list *rl, struct gw_req *r)
{
	r = r->lead;
	if (!r->suspended || !r->conn)
		return;
	if (rl->n == rl->cap) {
		size_t cap = rl->cap ? rl->cap * 2 : 64;
		struct MHD_Connection **c = realloc(rl->c, cap * sizeof(*c));
		if (!c)
			return; /* stays suspended; the next wake retries */
		rl->c = c;
		rl->cap = cap;
	}
	r->suspended = false;
	rl->c[rl->n++] = r->conn;
}

static void resume_all(struct resume_list *rl)
{
	for (size_t i = 0; i < rl->n; i++)
		MHD_resume_connection(rl->c[i]);
	rl->n = 0;
}

/* The engine's refusal as an HTTP status (the OpenAI error shape's type). */
static void map_status(int32_t st, int *http, const char **type)
{
	switch (-st) {
	case EAGAIN: *http = 429; *type = "rate_limit_exceeded"; break; /* queue caps */
	case E2BIG: *http = 413; *type = "invalid_request_error"; break; /* too long */
	case EINVAL: *http = 400; *type = "invalid_request_error"; break;
	case EBUSY: /* drained (allmctl drain) */
	case ESHUTDOWN:
	case ENOBUFS:
	case EPIPE: *http = 503; *type = "service_unavailable"; break;
	default: *http = 500; *type = "server_error";
	}
}

/* Ends r with an error (under lock): status, message, DONE, connection woken, the
 * pump's reference dropped. */
static void fail_req(struct gw *gw, struct resume_list *rl, struct gw_req *r, int http,
		     const char *type, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void fail_req(struct gw *gw, struct resume_list *rl, struct gw_req *r, int http,
		     const char *type, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	snprintf(r->err_type, sizeof(r->err_type), "%s", type);
	r->http_status = http;
	r->finish = ALLM_FINISH_ERROR;
	gw_users_done(gw, r);
	r->phase = GW_DONE;
	gw_text_finish(&r->out);
	gw_slot_put(gw, r);
	wake_req(rl, r);
	gw_req_unref_locked(gw, r);
}

/* A choice waiting in the gateway whose client went away: it never reaches the
 * engine (under lock). */
static void drop_waiting(struct gw *gw, struct gw_req *r)
{
	gw_users_done(gw, r);
	r->phase = GW_DONE;
	gw_req_unref_locked(gw, r); /* the pump's */
}

/* --- events ---------------------------------------------------------------------- */

/* Under lock. A full SQ (-EAGAIN) puts r on gw->cancels, which the pump retries
 * every turn until the engine has made room. */
static void send_cancel(struct gw *gw, struct gw_req *r)
{
	if (r->phase == GW_QUEUED && r->hung_up) {
		drop_waiting(gw, r);
		return;
	}
	if (r->cancel_sent || r->phase != GW_ACCEPTED || !gw->client)
		return;
	int e = allm_client_cancel(gw->client, r->request_id);
	if (e == 0) {
		r->cancel_sent = true;
	} else if (e == -EAGAIN && !r->queued_cancel) {
		r->queued_cancel = true;
		r->refs++; /* held by gw->cancels */
		r->next = gw->cancels;
		gw->cancels = r;
		gw->cancels_blocked = true;
	}
}

static void on_event(struct gw *gw, struct resume_list *rl, const struct allm_event *ev)
{
	gw->engine_heard = allm_now();
	struct gw_req *r = gw_slot_find(gw, ev->user_tag);
	if (!r)
		return;
	switch (ev->kind) {
	case ALLM_EVENT_ACCEPTED:
		r->request_id = ev->request_id;
		r->phase = GW_ACCEPTED;
		r->accepted = true;
		if (r->hung_up || r->out.stopped)
			send_cancel(gw, r);
		if (r->stream)
			wake_req(rl, r); /* the 200 and its headers can go */
		break;
	case ALLM_EVENT_TOKEN: {
		if (r->out.stopped)
			break;
		/* the engine's text: it decodes in the prompt's context (a leading
		 * space survives, as in vLLM), and sends what it held back (an
		 * unfinished UTF-8 sequence) as token -1 before the FINAL */
		const char *text = ev->text;
		size_t n = ev->text_len;
		if (ev->token_id >= 0)
			r->n_tokens++;
		if (ev->all_logprobs && ev->token_id >= 0 && gw_lps_push(&r->lps, ev->all_logprobs)) {
			send_cancel(gw, r); /* out of memory: end it here, as a stop would */
			r->out.stopped = true;
			break;
		}
		/* min_tokens: no stop string ends the text before it, as no stop token does */
		static const struct gw_stops none;
		int s = gw_text_append(&r->out, r->n_tokens <= (uint32_t)r->params.min_tokens ? &none : &r->stops, text,
				       n);
		if (s < 0) {
			send_cancel(gw, r);
			r->out.stopped = true; /* keeps what it has; the FINAL ends it */
		} else if (s == 1) {
			/* usage counts the tokens up to the one completing the stop */
			r->n_generated = r->n_tokens;
			send_cancel(gw, r);
		}
		if (r->stream)
			wake_req(rl, r); /* one event per token, text or not */
		break;
	}
	case ALLM_EVENT_FINAL:
		if (!r->accepted && ev->status == -EAGAIN && gw->engine_inflight > 1) {
			/* the engine's caps (its queue is shared by every user of this
			 * gateway): r waits here again, in its place, until a request of
			 * ours ends and makes room, rather than failing with 429 */
			gw_slot_put(gw, r);
			gw_users_requeue(gw, r);
			gw->engine_full = true;
			return;
		}
		if (r->accepted)
			gw->engine_full = false; /* one left the engine: room for another */
		r->n_prompt = ev->n_prompt;
		r->n_cached = ev->n_cached;
		if (!r->out.stopped)
			r->n_generated = ev->n_generated;
		r->finish = r->out.stopped ? ALLM_FINISH_STOP : ev->finish_reason;
		if (ev->finish_reason == ALLM_FINISH_ERROR && !r->out.stopped) {
			int http;
			const char *type;
			map_status(ev->status, &http, &type);
			fail_req(gw, rl, r, http, type, "%s", ev->error ? ev->error : "engine error");
			return;
		}
		gw_text_finish(&r->out);
		gw_users_done(gw, r);
		r->phase = GW_DONE;
		gw_slot_put(gw, r);
		wake_req(rl, r);
		gw_req_unref_locked(gw, r);
		break;
	}
}

/* --- connection ------------------------------------------------------------------ */

/* Fails everything the engine had or was about to get (under lock). */
static void engine_lost(struct gw *gw, struct resume_list *rl, const char *why)
{
	struct gw_req *r;
	for (uint32_t s = 0; s < gw->n_slots; s++)
		if (gw->slots[s])
			fail_req(gw, rl, gw->slots[s], 503, "service_unavailable", "%s", why);
	while ((r = gw_users_waiting(gw, NULL)))
		fail_req(gw, rl, r, 503, "service_unavailable", "%s", why);
	gw->engine_full = false;
	if (gw->client) {
		allm_client_disconnect(gw->client);
		gw->client = NULL;
	}
	gw->engine_up = false;
}

static void try_connect(struct gw *gw)
{
	struct allm_client_opts o = {
		.name = gw->o.engine,
		.runtime_dir = gw->o.runtime_dir,
		.sq_entries = GW_SQ_ENTRIES,
		.cq_entries = GW_CQ_ENTRIES,
		.arena_size = GW_ARENA,
		.timeout_ms = 1000,
		.spin_us = -1,
	};
	char err[256];
	allm_client_t *c;
	gw->next_connect = allm_now() + GW_RECONNECT_S;
	if (allm_client_connect(&o, &c, err, sizeof(err))) {
		if (!gw->said_down)
			gw_log(gw, ALLM_LOG_WARN, "no engine '%s' yet (%s): answering 503, retrying every %.2f s",
			       gw->o.engine, err, GW_RECONNECT_S);
		gw->said_down = true;
		return;
	}
	const char *em = allm_client_model(c);
	struct gw_model *m = NULL;
	pthread_mutex_lock(&gw->lock);
	bool same = gw->model && (gw->o.model_dir || !strcmp(gw->model->engine, em));
	pthread_mutex_unlock(&gw->lock);
	if (!same && gw_model_load(&gw->o, em, &m)) {
		gw_log(gw, ALLM_LOG_ERROR, "out of memory loading the model description");
		allm_client_disconnect(c);
		return;
	}
	pthread_mutex_lock(&gw->lock);
	if (m) {
		gw_model_unref(gw->model);
		gw->model = m;
	}
	gw->client = c;
	gw->engine_up = true;
	gw->engine_heard = allm_now();
	gw->want_limits = true; /* another engine, maybe another batch (gw-ctl.c) */
	gw->connected_at = gw->engine_heard;
	gw->said_down = false;
	gw_log(gw, ALLM_LOG_INFO, "connected to engine '%s' (client %u), model %s; tokenizer: %s; chat: %s",
	       gw->o.engine, allm_client_id(c), gw->model->id, gw->model->source,
	       gw->model->tmpl ? allm_chat_template_name(gw->model->tmpl) : gw->model->why_no_chat);
	pthread_mutex_unlock(&gw->lock);
	gw_ctl_kick(gw); /* it reads the new engine's batch now */
}

/* Puts waiting choices on the ring, users in turn (gw-users.c), until the ring or
 * arena is full or no user may submit more (under lock). Returns how many went,
 * or -EPIPE when the engine is gone. */
static int submit_waiting(struct gw *gw, struct resume_list *rl)
{
	struct gw_req *r;
	int n = 0;
	gw->sq_full = false;
	while (!gw->engine_full && (r = gw_users_next(gw))) {
		if (r->hung_up) {
			drop_waiting(gw, r);
			continue;
		}
		if (!gw->client) {
			fail_req(gw, rl, r, 503, "service_unavailable",
				 "no engine '%s' is running (the gateway reconnects when it starts)",
				 gw->o.engine);
			continue;
		}
		if (gw_slot_take(gw, r))
			return n; /* out of memory: try again next turn */
		struct allm_request_params p;
		allm_request_params_init(&p);
		p.params = r->params;
		p.user_tag = r->tag;
		p.prompt = r->text;
		p.prompt_len = r->text_len;
		p.prompt_ids = r->ids;
		p.n_prompt_ids = r->n_ids;
		p.logit_bias = r->logit_bias;
		p.n_logit_bias = r->n_logit_bias;
		/* a grammar's text travels beside the prompt (gw-structured.c) */
		int e = r->params.grammar_kind ? allm_client_submit_grammar(gw->client, &p, r->grammar, r->grammar_len)
					       : allm_client_submit(gw->client, &p);
		if (e == -EAGAIN) {
			gw_slot_put(gw, r);
			gw->sq_full = true; /* the engine's answers wake us when it took some */
			return n;
		}
		if (e == -EPIPE || e == -EPROTO) {
			gw_slot_put(gw, r);
			return -EPIPE;
		}
		if (e) {
			gw_slot_put(gw, r);
			fail_req(gw, rl, r, e == -E2BIG ? 413 : e == -EINVAL ? 400 : 500,
				 e == -E2BIG || e == -EINVAL ? "invalid_request_error" : "server_error",
				 "the engine's client library refused the request: %s", strerror(-e));
			continue;
		}
		gw_users_submitted(gw, r);
		r->phase = GW_SUBMITTED;
		n++;
	}
	return n;
}

/* --- the loop -------------------------------------------------------------------- */

struct watch {
	struct pollfd *fds;
	struct gw_req **reqs; /* fds[i + 3] belongs to reqs[i] */
	size_t n, cap;
	uint32_t turn;        /* marks the leads already in this poll set */
};

/* Adds the socket of r's request, once a turn, while it waits for us. */
static void watch_add(struct watch *w, struct gw_req *r)
{
	struct gw_req *lead = r->lead;
	if (!lead->suspended || r->hung_up || r->sock < 0 || lead->watch_turn == w->turn)
		return;
	if (3 + w->n == w->cap) {
		size_t cap = w->cap * 2;
		struct pollfd *f = realloc(w->fds, cap * sizeof(*f));
		if (f)
			w->fds = f;
		struct gw_req **q = f ? realloc(w->reqs, cap * sizeof(*q)) : NULL;
		if (!q)
			return; /* watch what fits; hang-ups still show at the next write */
		w->reqs = q;
		w->cap = cap;
	}
	lead->watch_turn = w->turn;
	w->fds[3 + w->n] = (struct pollfd){.fd = r->sock, .events = POLLRDHUP};
	w->reqs[w->n++] = r;
}

/* The fds to sleep on (under lock): the wake eventfd, the CQ doorbell, the lease,
 * and the socket of every suspended request, running or waiting here, for
 * hang-ups only (POLLRDHUP: data a client pipelines must not wake us). */
static void build_watch(struct gw *gw, struct watch *w)
{
	w->n = 0;
	w->turn++;
	w->fds[0] = (struct pollfd){.fd = gw->wake_fd, .events = POLLIN};
	w->fds[1] = (struct pollfd){.fd = gw->client ? allm_client_fd(gw->client) : -1, .events = POLLIN};
	w->fds[2] = (struct pollfd){.fd = gw->client ? allm_client_lease_fd(gw->client) : -1,
				    .events = POLLIN};
	for (uint32_t s = 0; s < gw->n_slots; s++)
		if (gw->slots[s])
			watch_add(w, gw->slots[s]);
	for (struct gw_req *r = gw_users_waiting(gw, NULL); r; r = gw_users_waiting(gw, r))
		watch_add(w, r);
}

/* The HTTP client of r's request went away (under lock): every choice still
 * running is cancelled in the engine, and those waiting here are dropped. */
static void hang_up(struct gw *gw, struct gw_req *r)
{
	/* released by the HTTP side meanwhile (poll runs unlocked): it cancelled
	 * every choice itself, and those already done may be gone */
	if (!r->lead->conn)
		return;
	for (uint32_t i = 0; i < r->lead->n_choices; i++) {
		struct gw_req *c = gw_choice(r->lead, i);
		if (c->phase == GW_DONE)
			continue;
		c->hung_up = true;
		send_cancel(gw, c);
	}
}

/* After poll (under lock): a watched socket that hung up cancels its request.
 * Every watched choice is alive: the pump's reference goes only at DONE, which
 * only the pump makes. */
static void check_hangups(struct gw *gw, struct watch *w, struct resume_list *rl)
{
	for (size_t i = 0; i < w->n; i++) {
		struct pollfd *p = &w->fds[3 + i];
		struct gw_req *r = w->reqs[i];
		char c;
		if (!(p->revents & (POLLRDHUP | POLLHUP | POLLERR)))
			continue;
		/* nginx's test: EOF (or an error) on a peek means the client is gone */
		ssize_t k = recv(p->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (k > 0 || (k < 0 && (errno == EAGAIN || errno == EINTR)))
			continue;
		if (r->phase == GW_DONE)
			continue; /* finished meanwhile */
		struct gw_req *lead = r->lead;
		hang_up(gw, r); /* r may be gone now (dropped); the lead is not */
		wake_req(rl, lead); /* libmicrohttpd then sees the close and completes it */
	}
}

static void *pump_main(void *arg)
{
	struct gw *gw = arg;
	struct resume_list rl = {0};
	struct watch w = {.fds = gw->watch_fds, .reqs = gw->watch_reqs, .cap = GW_WATCH_MIN};
	bool aborted = false;
	double watched = 0; /* allm_now() the sockets were last looked at */
	for (;;) {
		if (!gw->client && !gw->aborting && allm_now() >= gw->next_connect)
			try_connect(gw);
		bool busy = false, lost = false;
		pthread_mutex_lock(&gw->lock);
		struct gw_req *cancels = gw->cancels;
		gw->cancels = NULL;
		gw->cancels_blocked = false;
		while (cancels) {
			struct gw_req *r = cancels;
			cancels = r->next;
			r->queued_cancel = false;
			send_cancel(gw, r);
			gw_req_unref_locked(gw, r); /* the cancel list's reference */
		}
		int sent = submit_waiting(gw, &rl);
		if (sent < 0)
			lost = true;
		busy = sent > 0;
		struct allm_event ev;
		for (int i = 0; gw->client && !lost && i < GW_EVENT_BATCH; i++) {
			int e = allm_client_poll(gw->client, &ev);
			if (e == 1) {
				on_event(gw, &rl, &ev);
				busy = true;
			} else {
				lost = e < 0;
				break;
			}
		}
		if (lost) {
			gw_log(gw, ALLM_LOG_WARN, "engine '%s' went away: failing its %s requests with 503, reconnecting",
			       gw->o.engine, "in-flight");
			engine_lost(gw, &rl, "the engine went away (restarting?): try again");
			gw->next_connect = 0;
		}
		if (gw->aborting && !aborted) {
			/* shutdown's deadline passed: everything still running ends now */
			engine_lost(gw, &rl, "allm-gateway is shutting down");
			aborted = true;
		}
		bool quit = gw->quit;
		pthread_mutex_unlock(&gw->lock);
		resume_all(&rl);
		if (quit)
			break;
		if (lost)
			continue;
		if (gw->o.test_pump_busy && !busy) {
			busy = true; /* as if events kept coming: a short nap, never poll */
			nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
		}
		if (busy) {
			if (allm_now() - watched >= GW_HANGUP_CHECK_S) {
				pthread_mutex_lock(&gw->lock);
				build_watch(gw, &w);
				pthread_mutex_unlock(&gw->lock);
				/* the hang-ups only: the sockets, not our own three fds */
				if (w.n && poll(w.fds + 3, w.n, 0) > 0) {
					pthread_mutex_lock(&gw->lock);
					check_hangups(gw, &w, &rl);
					pthread_mutex_unlock(&gw->lock);
					resume_all(&rl);
				}
				watched = allm_now();
			}
			continue;
		}
		watched = allm_now();

		pthread_mutex_lock(&gw->lock);
		build_watch(gw, &w);
		atomic_store(&gw->pump_sleeping, true);
		/* cancels the full SQ refused: a short nap, then again */
		bool blocked = gw->cancels_blocked;
		bool more = (gw->cancels && !blocked) ||
			    (!gw->sq_full && !gw->engine_full && gw_users_next(gw));
		pthread_mutex_unlock(&gw->lock);
		if (!more) {
			int timeout = blocked ? 2 : gw->client ? 1000 : (int)(GW_RECONNECT_S * 1000);
			poll(w.fds, 3 + w.n, timeout);
		}
		atomic_store(&gw->pump_sleeping, false);
		uint64_t cnt;
		if (w.fds[0].revents & POLLIN && read(gw->wake_fd, &cnt, sizeof(cnt)) < 0) {
			/* EAGAIN: someone else drained it */
		}
		if (w.n) {
			pthread_mutex_lock(&gw->lock);
			check_hangups(gw, &w, &rl);
			pthread_mutex_unlock(&gw->lock);
			resume_all(&rl);
		}
	}
	free(rl.c);
	gw->watch_fds = w.fds; /* freed by gw_engine_stop */
	gw->watch_reqs = w.reqs;
	return NULL;
}

/* --- the HTTP side's entry points ------------------------------------------------ */

void gw_engine_release(struct gw *gw, struct gw_req *lead)
{
	pthread_mutex_lock(&gw->lock);
	lead->conn = NULL;
	lead->suspended = false;
	bool wake = false;
	/* the lead last: the others hold references to it */
	for (uint32_t i = lead->n_choices; i-- > 0;) {
		struct gw_req *r = gw_choice(lead, i);
		if (r->phase != GW_DONE && !r->hung_up) {
			r->hung_up = true;
			if (!r->queued_cancel) {
				r->queued_cancel = true;
				r->refs++; /* held by gw->cancels until the pump takes it */
				r->next = gw->cancels;
				gw->cancels = r;
				wake = true;
			}
		}
		gw_req_unref_locked(gw, r);
	}
	pthread_mutex_unlock(&gw->lock);
	if (wake)
		gw_wake_pump(gw);
}

int gw_engine_start(struct gw *gw)
{
	atomic_init(&gw->pump_sleeping, false);
	/* the poll set's first entries, so that the pump never lacks them */
	gw->watch_fds = malloc(GW_WATCH_MIN * sizeof(*gw->watch_fds));
	gw->watch_reqs = malloc(GW_WATCH_MIN * sizeof(*gw->watch_reqs));
	if (!gw->watch_fds || !gw->watch_reqs)
		return -ENOMEM;
	gw->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (gw->wake_fd < 0)
		return -errno;
	int e = pthread_create(&gw->pump, NULL, pump_main, gw);
	if (e) {
		close(gw->wake_fd);
		return -e;
	}
	return 0;
}

static void set_flag(struct gw *gw, bool *flag)
{
	pthread_mutex_lock(&gw->lock);
	*flag = true;
	pthread_mutex_unlock(&gw->lock);
	uint64_t one = 1;
	if (write(gw->wake_fd, &one, sizeof(one)) < 0) {
		/* already signalled */
	}
}

void gw_engine_abort(struct gw *gw)
{
	set_flag(gw, &gw->aborting);
}

int64_t gw_engine_live(struct gw *gw)
{
	pthread_mutex_lock(&gw->lock);
	int64_t n = gw->live;
	pthread_mutex_unlock(&gw->lock);
	return n;
}

void gw_engine_stop(struct gw *gw)
{
	set_flag(gw, &gw->quit);
	pthread_join(gw->pump, NULL);
	if (gw->client)
		allm_client_disconnect(gw->client);
	gw->client = NULL;
	close(gw->wake_fd);
	free(gw->watch_fds);
	free(gw->watch_reqs);
	gw_users_free(gw);
	free(gw->slots);
	free(gw->gens);
	free(gw->free_slots);
}
