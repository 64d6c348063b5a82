/* KV cache events (ctl-kvevents.h): the prefix cache's observer collects what
 * happened during a step, ctl_kvevents_flush() publishes it as one vLLM
 * KVEventBatch and keeps it in a ring for replays (ctl-kvevents-replay.c). */
#include "ctl-kvevents-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

/* vLLM's PUB high-water mark: a slow subscriber loses batches past it (and asks
 * for a replay when it sees the gap). */
#define KV_PUB_HWM 100000
enum kv_kind { KV_STORED, KV_REMOVED, KV_CLEARED };

/* vLLM's names for the tiers (its `medium`): the first tier is "GPU" whatever
 * the hardware, as the pool the model attends over is in vLLM. */
static const char *const medium_name[ALLM_KV_TIER_COUNT] = {"GPU", "CPU", "DISK"};

/* What vLLM publishes for a block hash by default (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES):
 * the digest's last 8 bytes read big-endian. */
static uint64_t ext_hash(const struct allm_pc_key *k)
{
	uint64_t v = 0;
	for (int i = ALLM_PC_KEY_BYTES - 8; i < ALLM_PC_KEY_BYTES; i++)
		v = v << 8 | k->b[i];
	return v;
}

int ctl_kvevents_check(const struct ctl_kvevents_opts *o, char *err, size_t errlen)
{
	struct ctl_kv_ep ep;
	return ctl_kv_ep_parse(o, &ep, err, errlen);
}

/* --- collecting ------------------------------------------------------------------ */

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static bool reserve(struct ctl_kvevents *k, uint32_t ev, uint32_t h, size_t tok)
{
	size_t ce = k->cap_ev, ch = k->cap_h;
	bool ok = grow((void **)&k->ev, &ce, (size_t)k->n_ev + ev, sizeof(*k->ev)) &&
		  grow((void **)&k->h, &ch, (size_t)k->n_h + h, sizeof(*k->h)) &&
		  grow((void **)&k->tok, &k->cap_tok, k->n_tok + tok, sizeof(*k->tok));
	k->cap_ev = (uint32_t)ce;
	k->cap_h = (uint32_t)ch;
	if (!ok)
		k->lost = true;
	return ok;
}

static void clear_pending(struct ctl_kvevents *k)
{
	k->n_ev = k->n_h = 0;
	k->n_tok = 0;
}

static void add_cleared(struct ctl_kvevents *k)
{
	/* what came before no longer matters */
	clear_pending(k);
	if (reserve(k, 1, 0, 0))
		k->ev[k->n_ev++] = (struct kv_ev){.kind = KV_CLEARED};
}

static void add_block(struct ctl_kvevents *k, enum kv_kind kind, int32_t e, enum allm_kv_tier t)
{
	const struct allm_pc_entry *x = allm_pc_entry(k->pc, e);
	const int32_t *tok = allm_pc_tokens(k->pc, e);
	if (!x || !tok || !reserve(k, 1, 1, kind == KV_STORED ? (size_t)k->block_size : 0))
		return;
	uint64_t h = ext_hash(&x->key);
	bool has_parent = x->parent >= 0;
	uint64_t parent = has_parent ? ext_hash(&x->parent_key) : 0;
	struct kv_ev *last = k->n_ev ? &k->ev[k->n_ev - 1] : NULL;
	/* the next block of the last event's chain, in the same tier: one event */
	bool extend = last && last->kind == kind && last->tier == (int8_t)t &&
		      (kind == KV_REMOVED || (has_parent && k->h[last->h0 + last->nh - 1] == parent));
	if (!extend) {
		k->ev[k->n_ev++] = (struct kv_ev){.kind = (uint8_t)kind, .tier = (int8_t)t, .has_parent = has_parent,
						  .parent = parent, .h0 = k->n_h, .t0 = k->n_tok};
		last = &k->ev[k->n_ev - 1];
	}
	k->h[k->n_h++] = h;
	last->nh++;
	if (kind == KV_STORED) {
		memcpy(k->tok + k->n_tok, tok, (size_t)k->block_size * sizeof(int32_t));
		k->n_tok += (size_t)k->block_size;
		last->nt += (size_t)k->block_size;
	}
}

static void publish(struct ctl_kvevents *k);

static void on_change(void *ctx, enum allm_pc_change what, int32_t e, enum allm_kv_tier t)
{
	struct ctl_kvevents *k = ctx;
	if (!k->snapshot && k->n_h >= CTL_KV_BATCH_BLOCKS)
		publish(k); /* bounds a batch (a reset of a large cache) */
	switch (what) {
	case ALLM_PC_CLEARED: add_cleared(k); break;
	case ALLM_PC_STORED: add_block(k, KV_STORED, e, t); break;
	case ALLM_PC_REMOVED: add_block(k, KV_REMOVED, e, t); break;
	}
}

/* --- encoding and publishing --------------------------------------------------------- */

/* KVEventBatch as msgspec's array_like structs: [ts, [event...], data_parallel_rank],
 * each event a tagged array (the tag first). */
static void encode(struct ctl_kvevents *k, struct allm_ctl_enc *e)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	allm_ctl_enc_reset(e);
	allm_ctl_enc_array(e, 3);
	allm_ctl_enc_double(e, (double)ts.tv_sec + ts.tv_nsec * 1e-9);
	allm_ctl_enc_array(e, k->n_ev);
	for (uint32_t i = 0; i < k->n_ev; i++) {
		const struct kv_ev *v = &k->ev[i];
		if (v->kind == KV_CLEARED) {
			allm_ctl_enc_array(e, 1);
			allm_ctl_enc_str(e, "AllBlocksCleared");
			continue;
		}
		bool stored = v->kind == KV_STORED;
		allm_ctl_enc_array(e, stored ? 7 : 3);
		allm_ctl_enc_str(e, stored ? "BlockStored" : "BlockRemoved");
		allm_ctl_enc_array(e, v->nh); /* block_hashes */
		for (uint32_t j = 0; j < v->nh; j++)
			allm_ctl_enc_uint(e, k->h[v->h0 + j]);
		if (stored) {
			if (v->has_parent) /* parent_block_hash */
				allm_ctl_enc_uint(e, v->parent);
			else
				allm_ctl_enc_nil(e);
			allm_ctl_enc_array(e, (uint32_t)v->nt); /* token_ids */
			for (size_t j = 0; j < v->nt; j++)
				allm_ctl_enc_int(e, k->tok[v->t0 + j]);
			allm_ctl_enc_int(e, k->block_size);
			allm_ctl_enc_nil(e); /* lora_id: no adapters */
		}
		allm_ctl_enc_str(e, medium_name[v->tier]); /* medium */
	}
	allm_ctl_enc_int(e, 0); /* data_parallel_rank: one engine, one rank */
}

void ctl_kv_put_seq(uint8_t b[8], uint64_t seq)
{
	for (int i = 7; i >= 0; i--, seq >>= 8)
		b[i] = (uint8_t)seq;
}

/* A payload's bytes, freed by whichever thread drops the last reference. */
struct kv_blob {
	struct ctl_kvevents *k; /* outlives every blob: the context is gone before k */
	size_t len;
	uint8_t data[];
};

static void blob_free(void *data, void *hint)
{
	struct kv_blob *b = hint;
	atomic_fetch_sub(&b->k->alive_bytes, (int_fast64_t)b->len);
	free(b);
}

int ctl_kv_payload(struct ctl_kvevents *k, zmq_msg_t *m, const void *buf, size_t len)
{
	struct kv_blob *b = malloc(sizeof(*b) + len);
	if (!b)
		return -ENOMEM;
	b->k = k;
	b->len = len;
	memcpy(b->data, buf, len);
	atomic_fetch_add(&k->alive_bytes, (int_fast64_t)len);
	if (zmq_msg_init_data(m, b->data, len, blob_free, b)) {
		blob_free(b->data, b);
		return -ENOMEM;
	}
	return 0;
}

uint64_t ctl_kv_ring_oldest(const struct ctl_kvevents *k)
{
	return k->ring_n ? k->ring[k->ring_head].seq : k->next_seq;
}

struct kv_batch *ctl_kv_ring_at(struct ctl_kvevents *k, uint64_t seq)
{
	return &k->ring[(k->ring_head + (seq - ctl_kv_ring_oldest(k))) % k->ring_cap];
}

static void ring_pop(struct ctl_kvevents *k)
{
	struct kv_batch *o = &k->ring[k->ring_head];
	k->ring_bytes -= zmq_msg_size(&o->msg);
	zmq_msg_close(&o->msg); /* replies still queued keep their reference */
	k->ring_head = (k->ring_head + 1) % k->ring_cap;
	k->ring_n--;
}

/* Keeps batch seq for replay, the oldest going first past the bounds. Its seqs
 * stay consecutive: a batch that cannot be kept empties the ring (a replay from
 * before it gets a snapshot). */
static void remember(struct ctl_kvevents *k, uint64_t seq, const void *buf, size_t len)
{
	while (k->ring_n && (k->ring_n == k->ring_cap || k->ring_bytes + len > CTL_KV_REPLAY_BYTES))
		ring_pop(k);
	struct kv_batch *r = &k->ring[(k->ring_head + k->ring_n) % k->ring_cap];
	if (len > CTL_KV_REPLAY_BYTES || ctl_kv_payload(k, &r->msg, buf, len)) {
		while (k->ring_n)
			ring_pop(k);
		k->ring_head = 0;
		return;
	}
	r->seq = seq;
	k->ring_n++;
	k->ring_bytes += len;
}

/* The pending events, or a full resync when some were lost, as the next batch. */
static void publish(struct ctl_kvevents *k)
{
	if (k->lost) {
		/* an event did not fit: tell subscribers to start over from the cache */
		k->lost = false;
		clear_pending(k);
		add_cleared(k);
		k->snapshot = true;
		allm_pc_announce_all(k->pc);
		k->snapshot = false;
		if (k->lost)
			k->log(k->log_user, ALLM_LOG_WARN, "KV events: out of memory for a resync batch; subscribers' view is stale");
	}
	if (!k->n_ev)
		return;
	encode(k, &k->enc);
	clear_pending(k);
	if (k->enc.err) {
		k->lost = true; /* published as a resync next time */
		return;
	}
	uint64_t seq = k->next_seq++;
	uint8_t sb[8];
	ctl_kv_put_seq(sb, seq);
	/* PUB never blocks: a subscriber past its high-water mark loses this batch,
	 * sees the gap in seq and asks for a replay. Its own copy: what lagging
	 * subscribers hold is theirs, not counted against replies (alive_bytes) */
	if (zmq_send(k->pub, k->topic, strlen(k->topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
	    zmq_send(k->pub, sb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
		zmq_send(k->pub, k->enc.sb.data, k->enc.sb.size, ZMQ_DONTWAIT);
	remember(k, seq, k->enc.sb.data, k->enc.sb.size);
}

void ctl_kvevents_flush(struct ctl_kvevents *k)
{
	if (k && (k->n_ev || k->lost))
		publish(k);
}

int ctl_kv_build_snapshot(struct ctl_kvevents *k)
{
	ctl_kvevents_flush(k); /* what is pending goes out first, under its own seq */
	if (k->have_snap) {
		zmq_msg_close(&k->snap); /* replies still queued keep their reference */
		k->have_snap = false;
	}
	k->snapshot = true;
	add_cleared(k);
	allm_pc_announce_all(k->pc);
	k->snapshot = false;
	struct allm_ctl_enc e;
	allm_ctl_enc_init(&e);
	e.max = SIZE_MAX;
	encode(k, &e);
	clear_pending(k);
	int r = k->lost || e.err ? -ENOMEM : ctl_kv_payload(k, &k->snap, e.sb.data, e.sb.size);
	k->lost = false;
	if (!r) {
		k->have_snap = true;
		k->snap_seq = k->next_seq - 1; /* start published seq 0: next_seq >= 1 */
		k->snap_len = e.sb.size;
		k->st.snapshots_built++;
	} else {
		k->log(k->log_user, ALLM_LOG_WARN, "KV events: out of memory for a replay snapshot");
	}
	allm_ctl_enc_free(&e);
	return r;
}

/* --- start / stop ----------------------------------------------------------------------- */

static void *bind_socket(struct ctl_kvevents *k, int type, const char *ep, int hwm, int64_t maxmsg)
{
	int zero = 0, one = 1, ipv6 = strchr(ep, '[') != NULL;
	void *z = zmq_socket(k->zctx, type);
	if (!z)
		return NULL;
	if (zmq_setsockopt(z, ZMQ_LINGER, &zero, sizeof(zero)) || zmq_setsockopt(z, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(z, ZMQ_IPV6, &ipv6, sizeof(ipv6)) ||
	    (maxmsg > 0 && zmq_setsockopt(z, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg))) ||
	    /* a reply to a peer that left fails (EHOSTUNREACH), one to a full queue
	     * says so (EAGAIN), instead of both vanishing */
	    (type == ZMQ_ROUTER && zmq_setsockopt(z, ZMQ_ROUTER_MANDATORY, &one, sizeof(one))) ||
	    (k->ep.access == CTL_KV_ACCESS_CURVE && ctl_kv_curve_apply(z, &k->curve)) || zmq_bind(z, ep)) {
		int e = errno;
		k->log(k->log_user, ALLM_LOG_ERROR, "KV events: cannot bind %s: %s", ep, zmq_strerror(e));
		zmq_close(z);
		errno = e;
		return NULL;
	}
	return z;
}

/* The sockets, in the order that keeps them closed to others: the ZAP handler
 * before a CURVE socket binds, the ipc directory checked before and the sockets
 * found in it after. */
static int open_sockets(struct ctl_kvevents *k, const struct ctl_kvevents_opts *o)
{
	struct allm_err err = {{0}};
	int r = 0;
	if (k->ep.access == CTL_KV_ACCESS_CURVE &&
	    ((r = ctl_kv_curve_load(o->curve_key_file, o->curve_clients_file, &k->curve, &err)) ||
	     (r = ctl_kv_zap_start(k->zctx, &k->curve, k->log, k->log_user, &k->zap)))) {
		if (!err.msg[0])
			snprintf(err.msg, sizeof(err.msg), "KV events: cannot start the ZAP handler: %s", strerror(-r));
		goto fail;
	}
	if (k->ep.ipc && (r = ctl_kv_ipc_prepare(&k->ep, &k->ipc_dirfd, &err)))
		goto fail;
	if (!(k->pub = bind_socket(k, ZMQ_PUB, k->ep.pub, KV_PUB_HWM, 0)) ||
	    !(k->replay = bind_socket(k, ZMQ_ROUTER, k->ep.replay, KV_REPLAY_HWM,
				      k->ep.access == CTL_KV_ACCESS_CURVE ? KV_REPLAY_MAXMSG_CURVE : KV_REPLAY_MAXMSG)))
		return -errno ? -errno : -EIO; /* logged */
	if (k->ep.ipc && ((r = ctl_kv_ipc_verify(k->ipc_dirfd, k->ep.pub_name, &err)) ||
			  (r = ctl_kv_ipc_verify(k->ipc_dirfd, k->ep.replay_name, &err))))
		goto fail;
	return 0;
fail:
	k->log(k->log_user, ALLM_LOG_ERROR, "%s", err.msg);
	return r;
}

int ctl_kvevents_start(const struct ctl_kvevents_opts *o, struct allm_prefix_cache *pc, ctl_kvevents_log_fn log,
		       void *log_user, struct ctl_kvevents **ret)
{
	char err[512];
	struct ctl_kv_ep ep;
	int r = ctl_kv_ep_parse(o, &ep, err, sizeof(err));
	if (r) {
		log(log_user, ALLM_LOG_ERROR, "%s", err);
		return r;
	}
	if (!pc) {
		log(log_user, ALLM_LOG_ERROR, "KV events: the engine has no prefix cache");
		return -EINVAL;
	}
	struct ctl_kvevents *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->pc = pc;
	k->ep = ep;
	k->block_size = allm_pc_block_size(pc);
	k->log = log;
	k->log_user = log_user;
	k->ipc_dirfd = -1;
	atomic_init(&k->alive_bytes, 0);
	k->ring_cap = CTL_KV_REPLAY_BATCHES;
	if (o->test_ring >= 1 && o->test_ring < CTL_KV_REPLAY_BATCHES)
		k->ring_cap = (uint32_t)o->test_ring; /* so a test rolls the ring over in a few batches */
	snprintf(k->topic, sizeof(k->topic), "%s", o->topic ? o->topic : "");
	allm_ctl_enc_init(&k->enc);
	k->enc.max = SIZE_MAX; /* a batch is bounded by CTL_KV_BATCH_BLOCKS, not here */
	if (!(k->ring = calloc(k->ring_cap, sizeof(*k->ring))) || !(k->zctx = zmq_ctx_new())) {
		ctl_kvevents_stop(k);
		return -ENOMEM;
	}
	if ((r = open_sockets(k, o))) {
		ctl_kvevents_stop(k);
		return r;
	}
	struct allm_pc_observer obs = {k, on_change};
	allm_pc_set_observer(pc, &obs);
	/* seq 0: start over (a restarted engine's old blocks are gone), then what
	 * the cache holds already */
	add_cleared(k);
	allm_pc_announce_all(pc);
	publish(k);
	log(log_user, ep.access == CTL_KV_ACCESS_IPC || ep.access == CTL_KV_ACCESS_CURVE ? ALLM_LOG_INFO : ALLM_LOG_WARN,
	    "KV events on %s (replay %s, topic \"%s\"): they carry every user's prompt token ids; readable by %s%s%s",
	    ep.pub, ep.replay, k->topic, ctl_kv_access_name(ep.access),
	    ep.access == CTL_KV_ACCESS_CURVE ? "; the engine's public key (ZMQ_CURVE_SERVERKEY): " : "",
	    ep.access == CTL_KV_ACCESS_CURVE ? k->curve.public_z85 : "");
	*ret = k;
	return 0;
}

void ctl_kvevents_stop(struct ctl_kvevents *k)
{
	if (!k)
		return;
	allm_pc_set_observer(k->pc, NULL);
	if (k->zctx)
		zmq_ctx_shutdown(k->zctx); /* wakes the ZAP handler with ETERM */
	ctl_kv_zap_stop(k->zap);
	if (k->pub)
		zmq_close(k->pub);
	if (k->replay)
		zmq_close(k->replay);
	for (uint32_t i = 0; k->ring && i < k->ring_n; i++)
		zmq_msg_close(&k->ring[(k->ring_head + i) % k->ring_cap].msg);
	if (k->have_snap)
		zmq_msg_close(&k->snap);
	if (k->zctx)
		zmq_ctx_term(k->zctx); /* after it, every payload is freed: blob_free needs k */
	if (k->ipc_dirfd >= 0) {
		/* ZeroMQ does not always remove them; in the directory we checked */
		if (k->pub)
			unlinkat(k->ipc_dirfd, k->ep.pub_name, 0);
		if (k->replay)
			unlinkat(k->ipc_dirfd, k->ep.replay_name, 0);
		close(k->ipc_dirfd);
	}
	ctl_kv_curve_free(&k->curve);
	free(k->ring);
	free(k->ev);
	free(k->h);
	free(k->tok);
	allm_ctl_enc_free(&k->enc);
	free(k);
}

void ctl_kvevents_get_stats(const struct ctl_kvevents *k, struct ctl_kvevents_stats *ret)
{
	*ret = k->st;
	ret->next_seq = k->next_seq;
	ret->active = k->n_act;
	int64_t held = (int64_t)atomic_load(&((struct ctl_kvevents *)k)->alive_bytes) - (int64_t)k->ring_bytes -
		       (k->have_snap ? (int64_t)k->snap_len : 0);
	ret->held_bytes = held > 0 ? held : 0;
	ret->curve_denied = ctl_kv_zap_denied(k->zap);
}

void ctl_kvevents_encode_status(const struct ctl_kvevents *k, struct allm_ctl_enc *e)
{
	allm_ctl_enc_str(e, "kv_events");
	if (!k) {
		allm_ctl_enc_nil(e);
		return;
	}
	struct ctl_kvevents_stats st;
	ctl_kvevents_get_stats(k, &st);
	allm_ctl_enc_map(e, 6);
	allm_ctl_enc_kstr(e, "endpoint", k->ep.pub);
	allm_ctl_enc_kstr(e, "replay_endpoint", k->ep.replay);
	allm_ctl_enc_kstr(e, "readable_by", ctl_kv_access_name(k->ep.access));
	allm_ctl_enc_kint(e, "next_seq", (int64_t)st.next_seq);
	allm_ctl_enc_kint(e, "curve_denied", (int64_t)st.curve_denied);
	allm_ctl_enc_kmap(e, "replay", 11);
	allm_ctl_enc_kint(e, "requests", (int64_t)st.requests);
	allm_ctl_enc_kint(e, "served", (int64_t)st.served);
	allm_ctl_enc_kint(e, "malformed", (int64_t)st.malformed);
	allm_ctl_enc_kint(e, "dropped_gone", (int64_t)st.dropped_gone);
	allm_ctl_enc_kint(e, "dropped_peer", (int64_t)st.dropped_peer);
	allm_ctl_enc_kint(e, "dropped_busy", (int64_t)st.dropped_busy);
	allm_ctl_enc_kint(e, "dropped_stalled", (int64_t)st.dropped_stalled);
	allm_ctl_enc_kint(e, "snapshots_built", (int64_t)st.snapshots_built);
	allm_ctl_enc_kint(e, "active", st.active);
	allm_ctl_enc_kint(e, "held_bytes", st.held_bytes);
	allm_ctl_enc_kint(e, "ring_batches", k->ring_n);
}
