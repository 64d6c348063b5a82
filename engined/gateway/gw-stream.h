/* The event stream of a generation request (gw-stream.c). */
#ifndef ALLM_GW_STREAM_H
#define ALLM_GW_STREAM_H

#include "gateway.h"

#include <microhttpd.h>

/* Once the engine took every choice of the lead's request: queues the 200 and the
 * event stream on c (its own references to the choices). Not under gw->lock:
 * libmicrohttpd calls the stream back with its own lock held, and the stream
 * takes ours. */
enum MHD_Result gw_stream_start(struct gw *gw, struct MHD_Connection *c, struct gw_req *lead);

#endif
