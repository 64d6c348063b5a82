/* The gateway's HTTP layer (engined/gateway/README.md, "Layers"): libmicrohttpd's
 * side, its routes and responses (gw-http.c, gw-body.c, gw-stream.c) and the
 * connections' deadlines (gw-conns.c). It calls down into the API layer
 * (gw-openai.h), the pump (gw-pump.h) and the control thread (gw-ctl.h); none of
 * them calls it. */
#ifndef ALLM_GW_HTTP_H
#define ALLM_GW_HTTP_H

#include "gateway.h"

#include <stdbool.h>

/* gw-conns.c: the per-connection deadline for receiving a whole request */
enum MHD_ConnectionNotificationCode;
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the gw). */
void gw_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
		     enum MHD_ConnectionNotificationCode code);
/* working: a whole request is in and being answered (no deadline); false: the
 * answer is done, the next request's deadlines start. */
void gw_conns_working(struct gw *gw, struct MHD_Connection *conn, bool working);
/* The request's line and headers are in: its --header-timeout is met. */
void gw_conns_head_in(struct gw *gw, struct MHD_Connection *conn);
int gw_conns_start(struct gw *gw);
void gw_conns_stop(struct gw *gw);

/* gw-http.c */
/* Listens (--host, --port) and serves; gw->port is the bound port. */
int gw_http_start(struct gw *gw);
/* Stops accepting connections (shutdown); those open keep being served. */
void gw_http_quiesce(struct gw *gw);
void gw_http_stop(struct gw *gw);

#endif
