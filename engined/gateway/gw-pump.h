/* The gateway's pump layer (engined/gateway/README.md, "Layers"): the one thread that
 * owns the ring client (gw-engine.c), the requests' slots and reference counts
 * (gw-slots.c); the users' queues are gw-users.h. The HTTP side calls down into it;
 * it calls only the control layer (gw-ctl.h) and the shared state (gateway.h). */
#ifndef ALLM_GW_PUMP_H
#define ALLM_GW_PUMP_H

#include "gateway.h"

#include <stdint.h>

/* gw-engine.c */
int gw_engine_start(struct gw *gw);
/* Ends every request still running or queued with a 503 (shutdown's deadline). */
void gw_engine_abort(struct gw *gw);
/* Requests not yet freed (shutdown waits for 0). */
int64_t gw_engine_live(struct gw *gw);
/* Stops the pump and disconnects. */
void gw_engine_stop(struct gw *gw);
/* The HTTP side is done with the lead's request: cancels every choice that still runs. */
void gw_engine_release(struct gw *gw, struct gw_req *lead);

/* gw-slots.c (under lock): the requests' reference counts, their one owner, and the
 * slots that map the ring's user_tag to a request. */
/* The HTTP side hands the lead's request (every choice) to the pump: each choice
 * counts as live and is held twice, by the HTTP side (gw_engine_release) and by
 * the pump (until DONE); the lead once more by each other choice, and a prompt's
 * first choice by each choice that shares its buffers. sock: the connection's. */
void gw_req_enqueue_locked(struct gw *gw, struct gw_req *lead, int sock);
/* A reply (whole or streamed) holds every choice of lead while it writes, and lets
 * them go (the lead last) when done. */
void gw_req_hold_choices_locked(struct gw_req *lead);
void gw_req_drop_choices_locked(struct gw *gw, struct gw_req *lead);
/* Frees r when its last reference goes. */
void gw_req_unref_locked(struct gw *gw, struct gw_req *r);
/* A slot and tag for r (0, -ENOMEM); its release; the request of a tag or NULL. */
int gw_slot_take(struct gw *gw, struct gw_req *r);
void gw_slot_put(struct gw *gw, struct gw_req *r);
struct gw_req *gw_slot_find(struct gw *gw, uint64_t tag);

#endif
