/* allm-engined's control server (DESIGN §9, ctl/PROTOCOL.md): a ROUTER for
 * commands and a PUB for telemetry, both ipc:// in the runtime directory. It
 * reads and retunes the engine, and learns everything else about the program
 * that hosts it (its clients, whether it drains) through struct ctl_host: it
 * never includes serve/ headers, so the arrows run one way (DESIGN §1).
 * Every call on the host's loop thread. */
#ifndef ALLM_CTL_SERVER_H
#define ALLM_CTL_SERVER_H

#include "ctl-host.h"

#include <stdbool.h>

struct ctl_server;

/* Binds DIR/NAME.ctl and DIR/NAME.pub (replacing stale socket files of a dead
 * engine: the caller already made sure no engine of this name runs). The host
 * watches ctl_server_fd() and calls ctl_server_pump() when it fires. Copies
 * *host. 0 or -errno, with a reason logged. */
int ctl_server_start(const struct ctl_host *host, struct ctl_server **ret);
/* Closes both sockets (the last replies get a bounded moment to leave), removes
 * the socket files, frees. Accepts NULL. The host stops watching the fd first. */
void ctl_server_stop(struct ctl_server *s);
/* The ROUTER's ZMQ_FD: readable (edge-triggered) when commands may wait. */
int ctl_server_fd(const struct ctl_server *s);

/* Handles every command waiting on the ROUTER. The host calls it on every loop
 * turn as well as when the fd fires: the fd is edge-triggered and a send may
 * consume its edge, so waiting messages are never left for the next wake-up.
 * True when it stopped with commands still waiting (a per-turn budget): the host
 * must not sleep then. */
bool ctl_server_pump(struct ctl_server *s);
/* The 10 Hz tick: samples the token counters and publishes `stats`. */
void ctl_server_tick(struct ctl_server *s);
/* After each loop turn's step and commands: publishes the KV events they made
 * (one batch), when --kv-events-endpoint is on. */
void ctl_server_flush_events(struct ctl_server *s);
/* Stops the KV events before the engine (and its prefix cache) is freed. */
void ctl_server_stop_events(struct ctl_server *s);

/* Engine events, forwarded by the host: `request` and `decision` telemetry and
 * the rolling latency window. */
void ctl_server_on_finish(struct ctl_server *s, const struct allm_result *res, uint32_t client_id);
void ctl_server_on_decision(struct ctl_server *s, const struct allm_decision *dec, bool measured);

#endif
