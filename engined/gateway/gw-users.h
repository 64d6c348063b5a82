/* Users of the gateway and the order their choices go to the engine (gw-users.c).
 * Everything here runs under gw->lock. */
#ifndef ALLM_GW_USERS_H
#define ALLM_GW_USERS_H

#include "gateway.h"

#include <stddef.h>

/* Who sends the request on c: "API key N" (its index among the gateway's keys,
 * key_index, when there are several), else the client's address. */
void gw_users_key(const struct gw *gw, struct MHD_Connection *c, int key_index, char *ret, size_t len);
/* What the gateway keeps on the engine at most: all users' choices, one user's
 * (the flags, else the engine's max_num_seqs and 7/8 of it). */
void gw_users_caps(const struct gw *gw, int *ret_all, int *ret_user);
/* Admits every choice of lead for the user of key: they wait in that user's queue
 * (phase GW_QUEUED). 0; -EAGAIN when the user's quota (--max-queued-per-user) has
 * no room for them, or -ENOMEM, with why filled for the client. */
int gw_users_admit(struct gw *gw, const char *key, struct gw_req *lead, char *why, size_t why_len);
/* The choice to put on the engine next, while the gateway has fewer than
 * --max-inflight there: the first waiting choice of the user with the fewest on
 * the engine (ties in turn), among users under --max-inflight-per-user; NULL
 * when none. */
struct gw_req *gw_users_next(struct gw *gw);
/* r (from gw_users_next) went on the engine: its user's turn passes. */
void gw_users_submitted(struct gw *gw, struct gw_req *r);
/* The engine sent r back before taking it (its caps): r waits again, in its
 * place by admission order. */
void gw_users_requeue(struct gw *gw, struct gw_req *r);
/* r is DONE (or dropped before it ran): out of its user's counts and queue; a
 * user with nothing left is forgotten. Accepts a choice never admitted. */
void gw_users_done(struct gw *gw, struct gw_req *r);
/* The choices waiting in the gateway, one after another (prev NULL: the first). */
struct gw_req *gw_users_waiting(struct gw *gw, struct gw_req *prev);
/* Shutdown: forgets every user (their choices are freed by their owners). */
void gw_users_free(struct gw *gw);

#endif
