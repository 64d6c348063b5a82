/* Replay requests (ctl-kvevents.h, PROTOCOL.md "Replay"), answered on the
 * engine's thread within a fixed budget per loop turn, whatever peers send
 * (issue 49 item 2: 752 requests used to keep the engine busy for 12 s):
 *
 * - a snapshot of the whole cache is built at most once per turn of the ring
 *   and shared: a replay older than the ring gets the last snapshot, then the
 *   batches after it that the ring still holds;
 * - replies are references to the kept batches, not copies, and the bytes that
 *   only queued replies keep alive are capped (past it, replays wait);
 * - one replay at a time per peer, KV_REPLAY_ACTIVE in all; more is dropped and
 *   counted;
 * - a peer that has left is noticed at its first reply (ZMQ_ROUTER_MANDATORY)
 *   and its replay dropped; one that stops reading is dropped after
 *   KV_REPLAY_STALL_S. Every request ends served or counted in status. */
#include "ctl-kvevents-int.h"

#include <errno.h>
#include <string.h>

/* Requests read per loop turn. */
#define KV_REPLAY_READS 64
/* Replies sent per loop turn, all replays together, and per replay at a time. */
#define KV_REPLAY_PUMP_MSGS 256
#define KV_REPLAY_QUANTUM 32
/* Bytes of batches that only queued replies keep alive (they left the ring, or
 * are an older snapshot); past it, no replay sends until peers read. */
#define KV_REPLAY_HELD_BYTES (64 << 20)
/* A replay whose peer has not read for this long is dropped. */
#define KV_REPLAY_STALL_S 30.0

/* Reads one request; true when one was read (valid or not). */
static bool read_request(struct ctl_kvevents *k)
{
	zmq_msg_t fr[3];
	int n = 0, kept = 0;
	bool more = true;
	while (more) {
		zmq_msg_t tmp, *m = n < 3 ? &fr[n] : &tmp;
		zmq_msg_init(m);
		if (zmq_msg_recv(m, k->replay, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(m);
			break;
		}
		more = zmq_msg_more(m);
		if (m == &tmp)
			zmq_msg_close(m);
		else
			kept++;
		n++;
	}
	if (!n)
		return false;
	/* [identity][""][seq] from a REQ (vLLM's example), [identity][seq] from a DEALER */
	bool delim = n == 3 && zmq_msg_size(&fr[1]) == 0;
	zmq_msg_t *seqf = n == 3 && delim ? &fr[2] : n == 2 ? &fr[1] : NULL;
	if (!seqf || zmq_msg_size(seqf) != 8 || zmq_msg_size(&fr[0]) > sizeof(k->act[0].id)) {
		k->st.malformed++;
		k->log(k->log_user, ALLM_LOG_DEBUG, "KV events: replay request of %d frames ignored (want [seq: 8 bytes])", n);
		goto out;
	}
	k->st.requests++;
	size_t id_len = zmq_msg_size(&fr[0]);
	const void *id = zmq_msg_data(&fr[0]);
	for (uint32_t i = 0; i < k->n_act; i++) {
		if (k->act[i].id_len == id_len && !memcmp(k->act[i].id, id, id_len)) {
			k->st.dropped_peer++; /* one at a time: it has the answer coming */
			goto out;
		}
	}
	if (k->n_act == KV_REPLAY_ACTIVE) {
		k->st.dropped_busy++;
		goto out;
	}
	const uint8_t *b = zmq_msg_data(seqf);
	uint64_t start = 0;
	for (int i = 0; i < 8; i++)
		start = start << 8 | b[i];
	struct kv_replay *r = &k->act[k->n_act++];
	*r = (struct kv_replay){.id_len = (uint8_t)id_len, .delim = delim, .next = start, .until = k->next_seq};
	memcpy(r->id, id, id_len);
out:
	for (int i = 0; i < kept; i++)
		zmq_msg_close(&fr[i]);
	return true;
}

/* Sends one reply to r's peer: [identity][""]?[seq][payload], or the end marker
 * (payload NULL): [-1 as 8 bytes][""]. 0, -EAGAIN (its queue is full) or
 * -EHOSTUNREACH (it has left). */
static int send_reply(struct ctl_kvevents *k, struct kv_replay *r, uint64_t seq, zmq_msg_t *payload)
{
	uint8_t sb[8];
	/* the routing frame decides: once it is taken, the message's other frames are too */
	if (zmq_send(k->replay, r->id, r->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return errno == EAGAIN ? -EAGAIN : -EHOSTUNREACH;
	if (r->delim)
		zmq_send(k->replay, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	ctl_kv_put_seq(sb, payload ? seq : UINT64_MAX);
	zmq_send(k->replay, sb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	if (!payload) {
		zmq_send(k->replay, "", 0, ZMQ_DONTWAIT);
		return 0;
	}
	zmq_msg_t m;
	zmq_msg_init(&m);
	zmq_msg_copy(&m, payload); /* a reference, not the bytes */
	if (zmq_msg_send(&m, k->replay, ZMQ_DONTWAIT) < 0)
		zmq_msg_close(&m);
	return 0;
}

static int64_t held_bytes(struct ctl_kvevents *k)
{
	return (int64_t)atomic_load(&k->alive_bytes) - (int64_t)k->ring_bytes - (k->have_snap ? (int64_t)k->snap_len : 0);
}

/* The next reply of r: the snapshot (when r is behind the ring), a batch, or the
 * end marker. 1 sent and more to come, 0 sent the end marker (r is done), or
 * -errno from send_reply / -ENOMEM (no snapshot). */
static int step(struct ctl_kvevents *k, struct kv_replay *r)
{
	if (r->next >= r->until || r->next >= k->next_seq) {
		int e = send_reply(k, r, 0, NULL);
		return e ? e : 0;
	}
	if (held_bytes(k) > KV_REPLAY_HELD_BYTES)
		return -EAGAIN;
	if (r->next < ctl_kv_ring_oldest(k)) {
		/* the gap is older than the ring: the last snapshot, if the ring still
		 * holds every batch after it, else a new one */
		if ((!k->have_snap || k->snap_seq + 1 < ctl_kv_ring_oldest(k)) && ctl_kv_build_snapshot(k))
			return -ENOMEM;
		int e = send_reply(k, r, k->snap_seq, &k->snap);
		if (!e)
			r->next = k->snap_seq + 1;
		return e ? e : 1;
	}
	int e = send_reply(k, r, r->next, &ctl_kv_ring_at(k, r->next)->msg);
	if (!e)
		r->next++;
	return e ? e : 1;
}

static void drop(struct ctl_kvevents *k, uint32_t i)
{
	k->act[i] = k->act[--k->n_act];
	if (k->rr > i)
		k->rr--;
}

/* Sends up to KV_REPLAY_PUMP_MSGS replies, KV_REPLAY_QUANTUM per replay in turn,
 * round after round while one moves. True when the budget ran out with replays
 * left (a replay waiting on its peer spends none). */
static bool send_replays(struct ctl_kvevents *k)
{
	int budget = KV_REPLAY_PUMP_MSGS;
	double now = allm_now();
	bool moved = true;
	while (budget > 0 && k->n_act && moved) {
		moved = false;
		for (uint32_t turn = 0, n = k->n_act; turn < n && k->n_act && budget > 0; turn++) {
			uint32_t i = k->rr < k->n_act ? k->rr : 0;
			struct kv_replay *r = &k->act[i];
			int e = 1;
			for (int q = 0; q < KV_REPLAY_QUANTUM && budget > 0 && e == 1; q++) {
				e = step(k, r);
				budget -= e >= 0; /* what went out */
			}
			if (e == 0) {
				k->st.served++;
				drop(k, i); /* act[i] is another replay now: rr stays */
				moved = true;
				continue;
			}
			if (e == -EAGAIN) {
				if (!r->stalled) {
					r->stalled = now;
				} else if (now - r->stalled > KV_REPLAY_STALL_S) {
					k->st.dropped_stalled++;
					drop(k, i);
					continue;
				}
			} else if (e != 1) {
				/* -EHOSTUNREACH: the peer has left; -ENOMEM: logged */
				k->st.dropped_gone += e == -EHOSTUNREACH;
				drop(k, i);
				continue;
			} else {
				r->stalled = 0;
				moved = true;
			}
			k->rr = i + 1;
		}
	}
	return budget <= 0 && k->n_act;
}

bool ctl_kvevents_pump(struct ctl_kvevents *k)
{
	if (!k)
		return false;
	/* all the requests waiting first, so a peer's second request finds its first
	 * in progress */
	for (int i = 0; i < KV_REPLAY_READS; i++) {
		uint32_t ev = 0;
		size_t len = sizeof(ev);
		if (zmq_getsockopt(k->replay, ZMQ_EVENTS, &ev, &len) || !(ev & ZMQ_POLLIN) || !read_request(k))
			break;
	}
	/* a snapshot no replay can use any more: its memory back */
	if (k->have_snap && k->snap_seq + 1 < ctl_kv_ring_oldest(k)) {
		zmq_msg_close(&k->snap);
		k->have_snap = false;
	}
	return send_replays(k);
}
