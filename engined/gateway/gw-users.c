/* Fairness between HTTP users inside the gateway, as the engine has between uids:
 * to the engine the gateway is one client, so without this one user's flood fills
 * the engine's per-client queue and every other user gets 429 (issue 37 item 2).
 *
 * A user is an API key (when the gateway has several, each is one user) or else
 * the client's address. Each user has a quota of choices waiting or running
 * (--max-queued-per-user: past it that user alone gets 429) and its own queue of
 * choices waiting in the gateway. The gateway keeps at most the engine's batch
 * on the engine (its max_num_seqs, or --max-inflight: more would wait in the
 * engine's queue, in arrival order, ahead of everyone), and one user 7/8 of it
 * (or --max-inflight-per-user), so that a user alone keeps nearly the whole
 * batch busy and yet another user's request starts at once.
 * When a place frees, the waiting user with the fewest choices on the engine
 * takes it (ties in turn), so shares even out as choices finish. All under
 * gw->lock. */
#include "gw-users.h"

#include "common.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Buckets of the user table (a power of two). */
#define GW_USER_BUCKETS 256
/* The engine's batch until its status says (its default --max-num-seqs). */
#define GW_ENGINE_BATCH_GUESS 256
/* One user may fill all of the batch but 1/8, at least one place (kept for the
 * others' requests). */
#define GW_USER_RESERVE 8
/* How long a new engine's batch is waited for before GW_ENGINE_BATCH_GUESS holds. */
#define GW_LIMITS_WAIT_S 2.0

struct gw_user {
	char key[64];             /* "key N" or the client's address: never the key itself */
	uint32_t hash;
	struct gw_user *hnext;    /* its bucket's list */
	int64_t queued;           /* choices not DONE: waiting here or on the engine */
	int64_t inflight;         /* of those, on the engine */
	struct gw_req *head, *tail; /* waiting here, in admission order (useq) */
	struct gw_user *rr_prev, *rr_next; /* gw->rr, a ring, while it has choices waiting */
	bool in_rr;
};

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

void gw_users_key(const struct gw *gw, struct MHD_Connection *c, int key_index, char *ret, size_t len)
{
	if (gw->o.n_api_keys > 1 && key_index >= 0) {
		snprintf(ret, len, "API key %d", key_index + 1);
		return;
	}
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	char a[INET6_ADDRSTRLEN] = "?";
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a, sizeof(a));
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, a, sizeof(a));
	snprintf(ret, len, "%s", a);
}

static struct gw_user *find(struct gw *gw, const char *key, uint32_t h)
{
	if (!gw->users)
		return NULL;
	for (struct gw_user *u = gw->users[h & (GW_USER_BUCKETS - 1)]; u; u = u->hnext)
		if (u->hash == h && !strcmp(u->key, key))
			return u;
	return NULL;
}

/* The user of key, made on first use; NULL when out of memory. */
static struct gw_user *get(struct gw *gw, const char *key)
{
	uint32_t h = fnv1a(key);
	struct gw_user *u = find(gw, key, h);
	if (u)
		return u;
	if (!gw->users && !(gw->users = calloc(GW_USER_BUCKETS, sizeof(*gw->users))))
		return NULL;
	if (!(u = calloc(1, sizeof(*u))))
		return NULL;
	snprintf(u->key, sizeof(u->key), "%s", key);
	u->hash = h;
	u->hnext = gw->users[h & (GW_USER_BUCKETS - 1)];
	gw->users[h & (GW_USER_BUCKETS - 1)] = u;
	gw->n_users++;
	return u;
}

/* A user with nothing left is forgotten: the table holds only users with work. */
static void put(struct gw *gw, struct gw_user *u)
{
	if (u->queued > 0 || u->in_rr)
		return;
	struct gw_user **p = &gw->users[u->hash & (GW_USER_BUCKETS - 1)];
	while (*p != u)
		p = &(*p)->hnext;
	*p = u->hnext;
	gw->n_users--;
	free(u);
}

static void rr_add(struct gw *gw, struct gw_user *u)
{
	if (u->in_rr)
		return;
	if (!gw->rr) {
		u->rr_prev = u->rr_next = u;
		gw->rr = u;
	} else { /* last in turn: before the current head */
		u->rr_next = gw->rr;
		u->rr_prev = gw->rr->rr_prev;
		u->rr_prev->rr_next = u;
		gw->rr->rr_prev = u;
	}
	u->in_rr = true;
}

static void rr_remove(struct gw *gw, struct gw_user *u)
{
	if (!u->in_rr)
		return;
	if (u->rr_next == u) {
		gw->rr = NULL;
	} else {
		u->rr_prev->rr_next = u->rr_next;
		u->rr_next->rr_prev = u->rr_prev;
		if (gw->rr == u)
			gw->rr = u->rr_next;
	}
	u->in_rr = false;
}

void gw_users_caps(const struct gw *gw, int *ret_all, int *ret_user)
{
	int all = gw->o.max_inflight ? gw->o.max_inflight
		  : gw->engine_max_seqs ? gw->engine_max_seqs : GW_ENGINE_BATCH_GUESS;
	/* a new engine's batch is read at once (gw-ctl.c): until then nothing goes,
	 * or a flood sent meanwhile would sit in the engine's queue ahead of all */
	if (!gw->o.max_inflight && gw->want_limits && allm_now() - gw->connected_at < GW_LIMITS_WAIT_S)
		all = 0;
	int user = gw->o.max_inflight_per_user ? gw->o.max_inflight_per_user
		   : all - ALLM_MAX(all / GW_USER_RESERVE, all > 1 ? 1 : 0);
	*ret_all = all;
	*ret_user = user > 0 ? user : 1;
}

/* A user is in turn while it has choices waiting (whether its cap lets one go
 * is seen when the turn comes: the caps change with the engine). */
static void update_rr(struct gw *gw, struct gw_user *u)
{
	if (u->head)
		rr_add(gw, u);
	else
		rr_remove(gw, u);
}

/* Inserts r into its user's queue by admission order (a choice the engine sent
 * back returns before the ones admitted after it). */
static void enqueue(struct gw_user *u, struct gw_req *r)
{
	struct gw_req *after = u->tail;
	while (after && after->useq > r->useq)
		after = after->uprev;
	r->uprev = after;
	r->unext = after ? after->unext : u->head;
	if (r->unext)
		r->unext->uprev = r;
	else
		u->tail = r;
	if (after)
		after->unext = r;
	else
		u->head = r;
}

static void dequeue(struct gw_user *u, struct gw_req *r)
{
	if (r->uprev)
		r->uprev->unext = r->unext;
	else
		u->head = r->unext;
	if (r->unext)
		r->unext->uprev = r->uprev;
	else
		u->tail = r->uprev;
	r->uprev = r->unext = NULL;
}

int gw_users_admit(struct gw *gw, const char *key, struct gw_req *lead, char *why, size_t why_len)
{
	struct gw_user *u = get(gw, key);
	if (!u) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	if (u->queued + lead->n_choices > gw->o.max_queued_per_user) {
		snprintf(why, why_len,
			 "%s has %lld choices queued or in flight; %u more would pass this server's limit of %d a user "
			 "(--max-queued-per-user): try again when some have finished",
			 u->key, (long long)u->queued, lead->n_choices, gw->o.max_queued_per_user);
		put(gw, u);
		return -EAGAIN;
	}
	for (uint32_t i = 0; i < lead->n_choices; i++) {
		struct gw_req *r = gw_choice(lead, i);
		r->user = u;
		r->useq = gw->next_useq++;
		r->phase = GW_QUEUED;
		enqueue(u, r);
	}
	u->queued += lead->n_choices;
	update_rr(gw, u);
	return 0;
}

struct gw_req *gw_users_next(struct gw *gw)
{
	struct gw_user *best = NULL, *u = gw->rr;
	int all, user;
	gw_users_caps(gw, &all, &user);
	if (!u || gw->engine_inflight >= all)
		return NULL;
	do { /* the fewest on the engine; a tie goes to the first in turn */
		if (u->inflight < user && (!best || u->inflight < best->inflight))
			best = u;
		u = u->rr_next;
	} while (u != gw->rr);
	return best ? best->head : NULL;
}

void gw_users_submitted(struct gw *gw, struct gw_req *r)
{
	struct gw_user *u = r->user;
	dequeue(u, r);
	r->on_engine = true;
	u->inflight++;
	gw->engine_inflight++;
	/* its turn is over: the users after it go first on a tie */
	if (u->in_rr)
		gw->rr = u->rr_next;
	update_rr(gw, u);
}

void gw_users_requeue(struct gw *gw, struct gw_req *r)
{
	struct gw_user *u = r->user;
	if (!r->on_engine)
		return;
	r->on_engine = false;
	u->inflight--;
	gw->engine_inflight--;
	r->phase = GW_QUEUED;
	enqueue(u, r);
	update_rr(gw, u);
}

void gw_users_done(struct gw *gw, struct gw_req *r)
{
	struct gw_user *u = r->user;
	if (!u)
		return; /* never admitted */
	if (r->on_engine) {
		r->on_engine = false;
		u->inflight--;
		gw->engine_inflight--;
	} else if (r->phase == GW_QUEUED) {
		dequeue(u, r);
	}
	r->user = NULL;
	u->queued--;
	update_rr(gw, u);
	put(gw, u);
}

struct gw_req *gw_users_waiting(struct gw *gw, struct gw_req *prev)
{
	/* every queue, in table order: bucket by bucket, user by user */
	struct gw_user *u = prev ? prev->user : NULL;
	if (prev && prev->unext)
		return prev->unext;
	uint32_t b = u ? (u->hash & (GW_USER_BUCKETS - 1)) : 0;
	u = u ? u->hnext : gw->users ? gw->users[0] : NULL;
	for (;;) {
		for (; u; u = u->hnext)
			if (u->head)
				return u->head;
		if (!gw->users || ++b >= GW_USER_BUCKETS)
			return NULL;
		u = gw->users[b];
	}
}

void gw_users_free(struct gw *gw)
{
	for (uint32_t b = 0; gw->users && b < GW_USER_BUCKETS; b++)
		while (gw->users[b]) {
			struct gw_user *u = gw->users[b];
			gw->users[b] = u->hnext;
			free(u);
		}
	free(gw->users);
	gw->users = NULL;
	gw->rr = NULL;
}
