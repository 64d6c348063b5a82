/* The whole answer of a finished request, written as the client reads it (gw-body.c). */
#ifndef ALLM_GW_BODY_H
#define ALLM_GW_BODY_H

#include "gateway.h"

#include <microhttpd.h>

/* Queues the 200 and the JSON of lead's request (every choice DONE and
 * successful) on c, with its own references to the choices. Not under gw->lock:
 * it takes it, and builds nothing while holding it. */
enum MHD_Result gw_body_respond(struct gw *gw, struct MHD_Connection *c, struct gw_req *lead);

#endif
