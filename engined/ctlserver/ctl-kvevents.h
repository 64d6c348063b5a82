/* KV cache events in vLLM's wire format (DESIGN §14, ctl/PROTOCOL.md "KV cache
 * events"): what the prefix cache stores, moves and drops, published on a ZeroMQ
 * PUB socket at --kv-events-endpoint as [topic][seq, 8 bytes big-endian][msgpack
 * KVEventBatch], one batch per engine step, so a router (llm-d's KV-cache indexer,
 * Dynamo's KV router) can index which engine holds which blocks. A ROUTER on the
 * next port answers a starting sequence number with the batches it still holds,
 * or, when the gap is older than its buffer, with one snapshot of the whole cache.
 *
 * The events carry prompt token ids (as vLLM's do): an operator's interface, off
 * by default. Every call on the engine's thread. */
#ifndef ALLM_CTL_KVEVENTS_H
#define ALLM_CTL_KVEVENTS_H

#include "common.h"
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

/* How the host logs. */
typedef void (*ctl_kvevents_log_fn)(void *user, enum allm_log_level level, const char *fmt, ...);

/* Checks an endpoint "tcp://HOST:PORT" (PORT 1..65534: the replay socket takes
 * PORT+1) and writes the replay endpoint. 0 or -EINVAL with a reason in err. */
int ctl_kvevents_parse_endpoint(const char *ep, char *ret_replay, size_t cap, char *err, size_t errlen);

/* Binds the PUB at endpoint and the replay ROUTER at PORT+1 in zctx, becomes
 * pc's observer and publishes seq 0: an AllBlocksCleared (a router drops what it
 * knew of an engine that restarted on this endpoint) followed by the cache's
 * current blocks. 0 or -errno (a reason logged). */
int ctl_kvevents_start(void *zctx, struct allm_prefix_cache *pc, const char *endpoint, const char *topic,
		       int test_ring, ctl_kvevents_log_fn log, void *log_user, struct ctl_kvevents **ret);
/* Stops observing, closes both sockets. Accepts NULL. */
void ctl_kvevents_stop(struct ctl_kvevents *k);
/* Publishes what the cache did since the last call, if anything (the host calls
 * it after every engine step and command). */
void ctl_kvevents_flush(struct ctl_kvevents *k);
/* Answers the replay requests waiting (a few per call). */
void ctl_kvevents_pump(struct ctl_kvevents *k);
/* The next sequence number (batches published so far). */
uint64_t ctl_kvevents_next_seq(const struct ctl_kvevents *k);

#endif
