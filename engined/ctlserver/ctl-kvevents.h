/* KV cache events in vLLM's wire format (DESIGN §14, ctl/PROTOCOL.md "KV cache
 * events"): what the prefix cache stores, moves and drops, published on a ZeroMQ
 * PUB socket at --kv-events-endpoint as [topic][seq, 8 bytes big-endian][msgpack
 * KVEventBatch], one batch per engine step, so a router (llm-d's KV-cache indexer,
 * Dynamo's KV router) can index which engine holds which blocks. A ROUTER next to
 * it (PORT+1, or PATH.replay) answers a starting sequence number with the batches
 * it still holds, after a snapshot of the whole cache when the gap is older.
 *
 * The events carry every user's prompt and completion token ids (as vLLM's do):
 * who may read them is the endpoint's choice (ctl-kvevents-sec.h). Every call on
 * the engine's thread. */
#ifndef ALLM_CTL_KVEVENTS_H
#define ALLM_CTL_KVEVENTS_H

#include "common.h"
#include "ctl-kvevents-sec.h"
#include "ctl-proto.h"
#include "prefix-cache.h"

#include <stdarg.h>
#include <stdint.h>

/* Batches (and bytes) kept for replay: vLLM's buffer_steps, and a memory bound. */
#define CTL_KV_REPLAY_BATCHES 10000
#define CTL_KV_REPLAY_BYTES (64u << 20)
/* Blocks one batch carries at most: a step that moves more publishes several. */
#define CTL_KV_BATCH_BLOCKS 4096
/* The longest --kv-events-topic. */
#define CTL_KV_TOPIC_MAX 255

struct ctl_kvevents;

/* How the host logs (from the engine's thread, and from the ZAP handler's). */
typedef void (*ctl_kvevents_log_fn)(void *user, enum allm_log_level level, const char *fmt, ...);

/* What the replay socket did, for `status` (PROTOCOL.md). */
struct ctl_kvevents_stats {
	uint64_t next_seq; /* batches published */
	uint64_t requests; /* replay requests read ([seq: 8 bytes]) */
	uint64_t served; /* answered to the end marker */
	uint64_t malformed; /* not [seq: 8 bytes]: ignored */
	uint64_t dropped_gone; /* the peer had left before its answer went out */
	uint64_t dropped_peer; /* the peer had a replay in progress already */
	uint64_t dropped_busy; /* every replay slot taken */
	uint64_t dropped_stalled; /* the peer stopped reading for too long */
	uint64_t snapshots_built; /* whole-cache snapshots encoded */
	uint32_t active; /* replays in progress */
	int64_t held_bytes; /* batches kept alive only by replies queued to peers */
	uint64_t curve_denied; /* CURVE handshakes refused */
};

/* Checks the flags together (ctl_kv_ep_parse): 0 or -EINVAL with a reason. */
int ctl_kvevents_check(const struct ctl_kvevents_opts *o, char *err, size_t errlen);

/* Binds the PUB and the replay ROUTER (in a ZeroMQ context of their own), becomes
 * pc's observer and publishes seq 0: an AllBlocksCleared (a router drops what it
 * knew of an engine that restarted on this endpoint) followed by the cache's
 * current blocks. 0 or -errno (a reason logged). */
int ctl_kvevents_start(const struct ctl_kvevents_opts *o, struct allm_prefix_cache *pc, ctl_kvevents_log_fn log,
		       void *log_user, struct ctl_kvevents **ret);
/* Stops observing, closes both sockets. Accepts NULL. */
void ctl_kvevents_stop(struct ctl_kvevents *k);
/* Publishes what the cache did since the last call, if anything (the host calls
 * it after every engine step and command). */
void ctl_kvevents_flush(struct ctl_kvevents *k);
/* Reads replay requests and sends a bounded slice of the replays in progress.
 * True when it stopped at its budget with replies ready to go on: the host must
 * not sleep then (a replay waiting on a slow peer waits for the tick). */
bool ctl_kvevents_pump(struct ctl_kvevents *k);
void ctl_kvevents_get_stats(const struct ctl_kvevents *k, struct ctl_kvevents_stats *ret);
/* The status map's "kv_events" value: nil when off (k NULL). */
void ctl_kvevents_encode_status(const struct ctl_kvevents *k, struct allm_ctl_enc *e);

#endif
