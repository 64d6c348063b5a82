/* Private to ctl-kvevents.c (collecting, publishing, the batch ring) and
 * ctl-kvevents-replay.c (answering replay requests). */
#ifndef ALLM_CTL_KVEVENTS_INT_H
#define ALLM_CTL_KVEVENTS_INT_H

#include "ctl-kvevents.h"

#include <stdatomic.h>
#include <zmq.h>

/* Replays in progress at once, all peers together. */
#define KV_REPLAY_ACTIVE 16
/* A replay request is [identity][""][seq] at most; anything longer is dropped
 * by ZeroMQ (with its peer) before we read it. Under CURVE the bound applies to
 * the handshake's commands too (INITIATE: 257 bytes and the metadata). */
#define KV_REPLAY_MAXMSG 64
#define KV_REPLAY_MAXMSG_CURVE 1024
/* Replies queued to one peer; past it, its replay waits (EAGAIN) for it to read. */
#define KV_REPLAY_HWM 1000

/* One event of the batch being collected; its hashes and tokens are ranges of
 * the shared arrays (consecutive blocks of one chain and tier share an event,
 * as vLLM's do). */
struct kv_ev {
	uint8_t kind; /* enum kv_kind */
	int8_t tier; /* enum allm_kv_tier: the medium */
	bool has_parent; /* stored: the first block's parent hash is known */
	uint64_t parent; /* its external hash */
	uint32_t h0, nh; /* hashes [h0, h0 + nh) */
	size_t t0, nt; /* stored: tokens [t0, t0 + nt) */
};

/* A published batch kept for replay. The payload is a reference-counted ZeroMQ
 * message: every reply sends a reference to it, not a copy. */
struct kv_batch {
	uint64_t seq;
	zmq_msg_t msg;
};

/* One peer's replay in progress: the ROUTER routing id it came with, and where it
 * stands. */
struct kv_replay {
	uint8_t id[255];
	uint8_t id_len;
	bool delim; /* it sent [""][seq] (REQ, vLLM's example): each reply gets [""] too */
	uint64_t next; /* the next seq to send; below the ring's oldest: the snapshot first */
	uint64_t until; /* the next_seq when it asked: later batches it gets from the PUB */
	double stalled; /* allm_now() when its queue first refused a reply; 0 while it reads */
};

struct ctl_kvevents {
	struct allm_prefix_cache *pc; /* not owned */
	int32_t block_size;
	void *zctx; /* our own: a ZAP handler answers for every socket of a context */
	void *pub; /* [topic][seq][batch] */
	void *replay; /* ROUTER: [identity][""]?[start seq] -> batches, then the end marker */
	struct ctl_kv_ep ep;
	int ipc_dirfd; /* ipc: the checked directory, where the socket files are removed at stop; else -1 */
	struct ctl_kv_curve curve; /* when ep.access is CURVE */
	struct ctl_kv_zap *zap; /* its handler, or NULL */
	char topic[CTL_KV_TOPIC_MAX + 1];
	uint64_t next_seq;
	/* the batch being collected */
	struct kv_ev *ev;
	uint32_t n_ev, cap_ev;
	uint64_t *h;
	uint32_t n_h, cap_h;
	int32_t *tok;
	size_t n_tok, cap_tok;
	bool lost; /* an event did not fit in memory: the next batch is a full resync */
	bool snapshot; /* collecting a snapshot: no flush in the middle */
	/* the last batches, oldest at ring_head; their seqs are consecutive */
	struct kv_batch *ring;
	uint32_t ring_head, ring_n;
	uint32_t ring_cap; /* CTL_KV_REPLAY_BATCHES; the test hook ALLM_KV_EVENTS_TEST_RING=N lowers it */
	size_t ring_bytes;
	/* the last snapshot: the whole cache as it stood after batch snap_seq; valid
	 * while batch snap_seq + 1 is still in the ring (then a replay sends it and the
	 * batches after it), so one is built per turn of the ring at most */
	bool have_snap;
	uint64_t snap_seq;
	size_t snap_len;
	zmq_msg_t snap;
	/* payload bytes allocated and not yet freed: the ring's, the snapshot's, and
	 * those only replies still queued to peers hold (ZeroMQ frees them on its
	 * own thread) */
	atomic_int_fast64_t alive_bytes;
	struct kv_replay act[KV_REPLAY_ACTIVE];
	uint32_t n_act;
	uint32_t rr; /* the replay the next pump starts with */
	struct ctl_kvevents_stats st;
	struct allm_ctl_enc enc;
	ctl_kvevents_log_fn log;
	void *log_user;
};

/* ctl-kvevents.c */
/* A reference-counted message holding a copy of len bytes, counted in
 * alive_bytes until ZeroMQ frees it. 0 or -ENOMEM. */
int ctl_kv_payload(struct ctl_kvevents *k, zmq_msg_t *m, const void *buf, size_t len);
/* Publishes what is pending (ctl_kvevents_flush), then encodes the whole cache
 * into k->snap under the last seq. 0 or -ENOMEM. */
int ctl_kv_build_snapshot(struct ctl_kvevents *k);
/* The oldest seq the ring holds (next_seq when it is empty). */
uint64_t ctl_kv_ring_oldest(const struct ctl_kvevents *k);
/* The ring's batch seq (oldest <= seq < next_seq). */
struct kv_batch *ctl_kv_ring_at(struct ctl_kvevents *k, uint64_t seq);
/* Big-endian seq into 8 bytes. */
void ctl_kv_put_seq(uint8_t b[8], uint64_t seq);

#endif
