/* allm-engined's control server (DESIGN §9, ctl/PROTOCOL.md): a ROUTER for
 * commands and a PUB for telemetry, both ipc:// in the runtime directory, driven
 * from the daemon's event loop through ZMQ_FD. Every call on the loop's thread. */
#ifndef ALLM_CTL_SERVER_H
#define ALLM_CTL_SERVER_H

#include "engine.h"

#include <stdbool.h>

struct daemon;
struct ctl_server;

/* Binds DIR/NAME.ctl and DIR/NAME.pub (replacing stale socket files of a dead
 * engine: the caller already made sure no engine of this name runs) and watches
 * the ROUTER's ZMQ_FD in d->loop. 0 or -errno, with a reason logged. */
int ctl_server_start(struct daemon *d, struct ctl_server **ret);
/* Closes both sockets (the last replies get a bounded moment to leave), removes
 * the socket files, frees. Accepts NULL. */
void ctl_server_stop(struct ctl_server *s);

/* Handles every command waiting on the ROUTER. The daemon calls it on every loop
 * turn as well as from the ZMQ_FD watcher: the fd is edge-triggered and a send
 * may consume its edge, so waiting messages are never left for the next wake-up. */
/* True when it stopped with commands still waiting (a per-turn budget): the
 * daemon must not sleep then. */
bool ctl_server_pump(struct ctl_server *s);
/* The 10 Hz tick: samples the token counters and publishes `stats`. */
void ctl_server_tick(struct ctl_server *s);

/* Engine events, forwarded by the daemon: `request` and `decision` telemetry and
 * the rolling latency window. */
void ctl_server_on_finish(struct ctl_server *s, const struct allm_request *r,
			  uint32_t client_id);
void ctl_server_on_decision(struct ctl_server *s, const struct allm_decision *dec, bool measured);

#endif
