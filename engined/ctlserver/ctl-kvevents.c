/* KV cache events (ctl-kvevents.h): the prefix cache's observer collects what
 * happened during a step, ctl_kvevents_flush() publishes it as one vLLM
 * KVEventBatch, and a ring of the last batches answers replay requests. */
#include "ctl-kvevents.h"

#include "ctl-proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

/* vLLM's PUB high-water mark: a slow subscriber loses batches past it (and asks
 * for a replay when it sees the gap). */
#define KV_PUB_HWM 100000
/* A replay request is [identity][""][seq] at most; anything longer is dropped
 * by ZeroMQ before we read it. */
#define KV_REPLAY_MAXMSG 64
/* Replay requests answered per pump: one may send CTL_KV_REPLAY_BATCHES. */
#define KV_REPLAY_BUDGET 4

enum kv_kind { KV_STORED, KV_REMOVED, KV_CLEARED };

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

struct kv_replayed {
	uint64_t seq;
	void *buf; /* the payload as published */
	size_t len;
};

struct ctl_kvevents {
	struct allm_prefix_cache *pc; /* not owned */
	int32_t block_size;
	void *pub; /* [topic][seq][batch] */
	void *replay; /* ROUTER: [identity][""]?[start seq] -> batches, then the end marker */
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
	bool snapshot; /* collecting a replay's snapshot: no flush in the middle */
	/* the last batches, oldest at ring_head */
	struct kv_replayed ring[CTL_KV_REPLAY_BATCHES];
	uint32_t ring_head, ring_n;
	uint32_t ring_cap; /* CTL_KV_REPLAY_BATCHES; the test hook ALLM_KV_EVENTS_TEST_RING=N lowers it */
	size_t ring_bytes;
	struct allm_ctl_enc enc;
	ctl_kvevents_log_fn log;
	void *log_user;
};

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

int ctl_kvevents_parse_endpoint(const char *ep, char *ret_replay, size_t cap, char *err, size_t errlen)
{
	const char *colon = strrchr(ep, ':');
	char *end;
	if (strncmp(ep, "tcp://", 6) || !colon || colon <= ep + 6 || !colon[1]) {
		snprintf(err, errlen, "--kv-events-endpoint: expected tcp://HOST:PORT, got \"%s\"", ep);
		return -EINVAL;
	}
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port < 1 || port > 65534) {
		snprintf(err, errlen, "--kv-events-endpoint: PORT must be 1..65534 (the replay socket takes PORT+1), "
				      "got \"%s\"", colon + 1);
		return -EINVAL;
	}
	int n = snprintf(ret_replay, cap, "%.*s:%lu", (int)(colon - ep), ep, port + 1);
	if (n < 0 || (size_t)n >= cap) {
		snprintf(err, errlen, "--kv-events-endpoint: too long");
		return -EINVAL;
	}
	return 0;
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

static void put_seq(uint8_t b[8], uint64_t seq)
{
	for (int i = 7; i >= 0; i--, seq >>= 8)
		b[i] = (uint8_t)seq;
}

/* Keeps a copy of batch seq for replay, the oldest going first past the bounds. */
static void remember(struct ctl_kvevents *k, uint64_t seq, const void *buf, size_t len)
{
	while (k->ring_n && (k->ring_n == k->ring_cap || k->ring_bytes + len > CTL_KV_REPLAY_BYTES)) {
		struct kv_replayed *o = &k->ring[k->ring_head];
		k->ring_bytes -= o->len;
		free(o->buf);
		o->buf = NULL;
		k->ring_head = (k->ring_head + 1) % k->ring_cap;
		k->ring_n--;
	}
	void *copy = len <= CTL_KV_REPLAY_BYTES ? malloc(len) : NULL;
	if (!copy)
		return; /* a replay from before it will send a snapshot */
	memcpy(copy, buf, len);
	struct kv_replayed *r = &k->ring[(k->ring_head + k->ring_n) % k->ring_cap];
	*r = (struct kv_replayed){seq, copy, len};
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
	put_seq(sb, seq);
	/* PUB never blocks: a subscriber past its high-water mark loses this batch,
	 * sees the gap in seq and asks for a replay */
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

uint64_t ctl_kvevents_next_seq(const struct ctl_kvevents *k)
{
	return k->next_seq;
}

/* --- replay -------------------------------------------------------------------------- */

static void reply(struct ctl_kvevents *k, zmq_msg_t *ident, bool delim, uint64_t seq, bool end, const void *buf,
		  size_t len)
{
	uint8_t sb[8];
	put_seq(sb, end ? UINT64_MAX : seq); /* the end marker: -1 as a signed 8-byte integer */
	if (zmq_send(k->replay, zmq_msg_data(ident), zmq_msg_size(ident), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return;
	if (delim && zmq_send(k->replay, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		return;
	if (zmq_send(k->replay, sb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
		zmq_send(k->replay, buf, len, ZMQ_DONTWAIT);
}

/* A gap older than the ring: the whole cache as one batch (AllBlocksCleared,
 * then every block, parents first) under the last published seq, so the
 * subscriber carries on with the next batch the PUB sends. */
static void send_snapshot(struct ctl_kvevents *k, zmq_msg_t *ident, bool delim)
{
	ctl_kvevents_flush(k); /* what is pending goes out first, under its own seq */
	k->snapshot = true;
	add_cleared(k);
	allm_pc_announce_all(k->pc);
	k->snapshot = false;
	struct allm_ctl_enc e;
	allm_ctl_enc_init(&e);
	e.max = SIZE_MAX;
	encode(k, &e);
	clear_pending(k);
	if (k->lost || e.err)
		k->log(k->log_user, ALLM_LOG_WARN, "KV events: out of memory for a replay snapshot");
	else
		reply(k, ident, delim, k->next_seq - 1, false, e.sb.data, e.sb.size);
	k->lost = false;
	allm_ctl_enc_free(&e);
}

static void serve_replay(struct ctl_kvevents *k)
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
	/* [identity][""][seq] from a REQ (vLLM's example), [identity][seq] from a DEALER */
	bool delim = n == 3 && zmq_msg_size(&fr[1]) == 0;
	zmq_msg_t *seqf = n == 3 && delim ? &fr[2] : n == 2 ? &fr[1] : NULL;
	if (!seqf || zmq_msg_size(seqf) != 8) {
		k->log(k->log_user, ALLM_LOG_DEBUG, "KV events: replay request of %d frames ignored (want [seq: 8 bytes])", n);
		goto out;
	}
	const uint8_t *b = zmq_msg_data(seqf);
	uint64_t start = 0;
	for (int i = 0; i < 8; i++)
		start = start << 8 | b[i];
	uint64_t oldest = k->ring_n ? k->ring[k->ring_head].seq : k->next_seq;
	if (start < oldest && k->next_seq > 0) {
		send_snapshot(k, &fr[0], delim);
	} else {
		for (uint32_t i = 0; i < k->ring_n; i++) {
			const struct kv_replayed *r = &k->ring[(k->ring_head + i) % k->ring_cap];
			if (r->seq >= start)
				reply(k, &fr[0], delim, r->seq, false, r->buf, r->len);
		}
	}
	reply(k, &fr[0], delim, 0, true, "", 0);
out:
	for (int i = 0; i < kept; i++)
		zmq_msg_close(&fr[i]);
}

void ctl_kvevents_pump(struct ctl_kvevents *k)
{
	if (!k)
		return;
	for (int i = 0; i < KV_REPLAY_BUDGET; i++) {
		uint32_t ev = 0;
		size_t len = sizeof(ev);
		if (zmq_getsockopt(k->replay, ZMQ_EVENTS, &ev, &len) || !(ev & ZMQ_POLLIN))
			return;
		serve_replay(k);
	}
}

/* --- start / stop ----------------------------------------------------------------------- */

static void *bind_tcp(struct ctl_kvevents *k, void *zctx, int type, const char *ep, int hwm, int64_t maxmsg)
{
	int zero = 0, ipv6 = strchr(ep, '[') != NULL;
	void *z = zmq_socket(zctx, type);
	if (!z)
		return NULL;
	if (zmq_setsockopt(z, ZMQ_LINGER, &zero, sizeof(zero)) || zmq_setsockopt(z, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(z, ZMQ_IPV6, &ipv6, sizeof(ipv6)) ||
	    (maxmsg > 0 && zmq_setsockopt(z, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg))) || zmq_bind(z, ep)) {
		int e = errno;
		k->log(k->log_user, ALLM_LOG_ERROR, "KV events: cannot bind %s: %s", ep, zmq_strerror(e));
		zmq_close(z);
		errno = e;
		return NULL;
	}
	return z;
}

int ctl_kvevents_start(void *zctx, struct allm_prefix_cache *pc, const char *endpoint, const char *topic,
		       int test_ring, ctl_kvevents_log_fn log, void *log_user, struct ctl_kvevents **ret)
{
	char replay_ep[600], err[256];
	int r = ctl_kvevents_parse_endpoint(endpoint, replay_ep, sizeof(replay_ep), err, sizeof(err));
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
	k->block_size = allm_pc_block_size(pc);
	k->log = log;
	k->log_user = log_user;
	k->ring_cap = CTL_KV_REPLAY_BATCHES;
	if (test_ring >= 1 && test_ring < CTL_KV_REPLAY_BATCHES)
		k->ring_cap = (uint32_t)test_ring; /* so a test rolls the ring over in a few batches */
	snprintf(k->topic, sizeof(k->topic), "%s", topic);
	allm_ctl_enc_init(&k->enc);
	k->enc.max = SIZE_MAX; /* a batch is bounded by CTL_KV_BATCH_BLOCKS, not here */
	if (!(k->pub = bind_tcp(k, zctx, ZMQ_PUB, endpoint, KV_PUB_HWM, 0)) ||
	    !(k->replay = bind_tcp(k, zctx, ZMQ_ROUTER, replay_ep, CTL_KV_REPLAY_BATCHES + 16, KV_REPLAY_MAXMSG))) {
		r = -errno;
		ctl_kvevents_stop(k);
		return r ? r : -EIO;
	}
	struct allm_pc_observer obs = {k, on_change};
	allm_pc_set_observer(pc, &obs);
	/* seq 0: start over (a restarted engine's old blocks are gone), then what
	 * the cache holds already */
	add_cleared(k);
	allm_pc_announce_all(pc);
	publish(k);
	log(log_user, ALLM_LOG_INFO, "KV events on %s (replay %s, topic \"%s\"): they carry prompt token ids, keep them to "
			 "the operators' network",
	    endpoint, replay_ep, k->topic);
	*ret = k;
	return 0;
}

void ctl_kvevents_stop(struct ctl_kvevents *k)
{
	if (!k)
		return;
	allm_pc_set_observer(k->pc, NULL);
	if (k->pub)
		zmq_close(k->pub);
	if (k->replay)
		zmq_close(k->replay);
	for (uint32_t i = 0; i < k->ring_n; i++)
		free(k->ring[(k->ring_head + i) % k->ring_cap].buf);
	free(k->ev);
	free(k->h);
	free(k->tok);
	allm_ctl_enc_free(&k->enc);
	free(k);
}
