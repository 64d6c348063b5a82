/* Description: a raw ZeroMQ peer for ctl-hostile.sh (not a test by itself): sends the engine's control socket hostile messages (5-byte headers claiming 4 GiB, wrong types, truncation, nesting 1000 deep, non-map bodies, extra and missing frames, 1 MiB and 5 MiB bodies, unknown commands), checks each gets an error reply with the right id and that nothing changed, then that a normal status still works.
 *
 * usage: ctl-hostile ENDPOINT (ipc://DIR/NAME.ctl); exit 0 = all checks passed. */
#include "ctl-proto.h"
#include "test-check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static void *ctx;
static const char *ep;

static void *dealer(void)
{
	int zero = 0;
	void *s = zmq_socket(ctx, ZMQ_DEALER);
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_connect(s, ep)) {
		fprintf(stderr, "connect %s: %s\n", ep, zmq_strerror(errno));
		exit(1);
	}
	return s;
}

/* Sends frames, waits up to 3 s for a reply; returns the decoded reply body (the
 * last frame) or NULL. *n_frames: frames of the reply. */
static struct allm_ctl_msg *roundtrip(void *s, const void *const *fr, const size_t *len, int n,
				      int *n_frames)
{
	for (int i = 0; i < n; i++)
		zmq_send(s, fr[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0);
	zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
	*n_frames = 0;
	if (zmq_poll(&it, 1, 3000) <= 0)
		return NULL;
	zmq_msg_t m, last;
	zmq_msg_init(&last);
	for (;;) {
		zmq_msg_init(&m);
		zmq_msg_recv(&m, s, 0);
		(*n_frames)++;
		bool more = zmq_msg_more(&m);
		zmq_msg_close(&last);
		last = m;
		if (!more)
			break;
	}
	struct allm_ctl_msg *r = NULL;
	char err[200];
	if (allm_ctl_decode(zmq_msg_data(&last), zmq_msg_size(&last), ALLM_CTL_MAX_REPLY, &r, err,
			    sizeof(err)))
		fprintf(stderr, "undecodable reply: %s\n", err);
	zmq_msg_close(&last);
	return r;
}

/* One body, one frame: must get ok:false with id want_id. */
static void expect_error(void *s, const char *what, const void *body, size_t len, uint64_t want_id)
{
	const void *fr[1] = {body};
	size_t ln[1] = {len};
	int nf;
	struct allm_ctl_msg *r = roundtrip(s, fr, ln, 1, &nf);
	CHECK(r != NULL, "%s: no reply", what);
	if (!r)
		return;
	bool ok = true;
	int64_t id = -1;
	char e[300] = "";
	allm_ctl_get_bool(r->root, "ok", &ok);
	allm_ctl_get_int(r->root, "id", &id);
	allm_ctl_get_strbuf(r->root, "error", e, sizeof(e));
	CHECK(!ok && (uint64_t)id == want_id && e[0], "%s: ok %d id %lld error '%s'", what, ok,
	      (long long)id, e);
	printf("ok: %-34s -> error: %s\n", what, e);
	allm_ctl_msg_free(r);
}

/* Packs a request map; n_extra key/values of the caller follow id and cmd. */
static void pack_req(struct allm_ctl_enc *e, uint64_t id, const char *cmd, uint32_t extra)
{
	allm_ctl_enc_reset(e);
	allm_ctl_enc_map(e, 2 + extra);
	allm_ctl_enc_str(e, "id");
	allm_ctl_enc_uint(e, id);
	allm_ctl_enc_kstr(e, "cmd", cmd);
}

static int64_t status_int(void *s, const char *path, int *fails)
{
	struct allm_ctl_enc e;
	allm_ctl_enc_init(&e);
	pack_req(&e, 9999, "status", 0);
	const void *fr[1] = {e.sb.data};
	size_t ln[1] = {e.sb.size};
	int nf;
	struct allm_ctl_msg *r = roundtrip(s, fr, ln, 1, &nf);
	int64_t v = -1;
	bool ok = false;
	if (!r || allm_ctl_get_bool(r->root, "ok", &ok) || !ok ||
	    allm_ctl_get_int(allm_ctl_get(r->root, "result"), path, &v))
		(*fails)++;
	allm_ctl_msg_free(r);
	allm_ctl_enc_free(&e);
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: ctl-hostile ipc://DIR/NAME.ctl\n");
		return 2;
	}
	ep = argv[1];
	ctx = zmq_ctx_new();
	void *s = dealer();
	int sf = 0;
	int64_t gpu0 = status_int(s, "blocks.gpu.total", &sf);
	int64_t seqs0 = status_int(s, "limits.max_num_seqs", &sf);
	CHECK(sf == 0, "status before: %d failures", sf);

	static const uint8_t str32[] = {0xdb, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
	expect_error(s, "str32 claiming 4 GiB", str32, sizeof(str32), 0);
	expect_error(s, "array32 claiming 4 Gi elements", arr32, sizeof(arr32), 0);
	expect_error(s, "map32 claiming 4 Gi pairs", map32, sizeof(map32), 0);
	static const uint8_t in_map[] = {0x82, 0xa2, 'i', 'd', 0x05, 0xa4, 'a', 'r', 'g', 's',
					 0xdd, 0xff, 0xff, 0xff, 0xff};
	expect_error(s, "args array32 claiming 4 Gi", in_map, sizeof(in_map), 0);
	static const uint8_t arr_root[] = {0x92, 0x01, 0x02}, int_root[] = {0x2a},
			     nil_root[] = {0xc0}, str_root[] = {0xa6, 's', 't', 'a', 't', 'u', 's'};
	expect_error(s, "array body", arr_root, sizeof(arr_root), 0);
	expect_error(s, "integer body", int_root, sizeof(int_root), 0);
	expect_error(s, "nil body", nil_root, sizeof(nil_root), 0);
	expect_error(s, "string body", str_root, sizeof(str_root), 0);
	expect_error(s, "empty body", "", 0, 0);
	static const uint8_t int_key[] = {0x81, 0x01, 0x02};
	expect_error(s, "integer key", int_key, sizeof(int_key), 0);

	uint8_t deep[1100];
	size_t n = 0;
	deep[n++] = 0x81, deep[n++] = 0xa4, memcpy(deep + n, "args", 4), n += 4;
	for (int i = 0; i < 1000; i++)
		deep[n++] = 0x91;
	deep[n++] = 0xc0;
	expect_error(s, "nested 1000 deep", deep, n, 0);

	struct allm_ctl_enc e;
	allm_ctl_enc_init(&e);
	pack_req(&e, 11, "status", 0);
	expect_error(s, "truncated status request", e.sb.data, e.sb.size - 3, 0);

	/* envelope and argument types */
	allm_ctl_enc_reset(&e);
	allm_ctl_enc_map(&e, 2);
	allm_ctl_enc_kstr(&e, "id", "12");
	allm_ctl_enc_kstr(&e, "cmd", "status");
	expect_error(s, "id as a string", e.sb.data, e.sb.size, 0);
	allm_ctl_enc_reset(&e);
	allm_ctl_enc_map(&e, 1);
	allm_ctl_enc_kstr(&e, "cmd", "status");
	expect_error(s, "no id", e.sb.data, e.sb.size, 0);
	allm_ctl_enc_reset(&e);
	allm_ctl_enc_map(&e, 2);
	allm_ctl_enc_kint(&e, "id", 13);
	allm_ctl_enc_kint(&e, "cmd", 7);
	expect_error(s, "cmd as an integer", e.sb.data, e.sb.size, 13);
	pack_req(&e, 14, "set", 1);
	allm_ctl_enc_karray(&e, "args", 1);
	allm_ctl_enc_int(&e, 1);
	expect_error(s, "args as an array", e.sb.data, e.sb.size, 14);
	pack_req(&e, 15, "set", 1);
	allm_ctl_enc_kmap(&e, "args", 1);
	allm_ctl_enc_karray(&e, "gpu_blocks", 1);
	allm_ctl_enc_int(&e, 8);
	expect_error(s, "gpu_blocks as an array", e.sb.data, e.sb.size, 15);
	pack_req(&e, 16, "set", 1);
	allm_ctl_enc_kmap(&e, "args", 1);
	allm_ctl_enc_kdouble(&e, "gpu_blocks", 1.5);
	expect_error(s, "gpu_blocks as a float", e.sb.data, e.sb.size, 16);
	pack_req(&e, 17, "set", 1);
	allm_ctl_enc_kmap(&e, "args", 2);
	allm_ctl_enc_kint(&e, "max_num_seqs", 3);
	allm_ctl_enc_kint(&e, "gpu_blocks", -1);
	expect_error(s, "valid + negative gpu_blocks", e.sb.data, e.sb.size, 17);
	pack_req(&e, 18, "set", 1);
	allm_ctl_enc_kmap(&e, "args", 1);
	allm_ctl_enc_str(&e, "gpu_blocks");
	allm_ctl_enc_uint(&e, UINT64_MAX);
	expect_error(s, "gpu_blocks 2^64-1", e.sb.data, e.sb.size, 18);
	pack_req(&e, 19, "launch-missiles", 0);
	expect_error(s, "unknown command", e.sb.data, e.sb.size, 19);
	pack_req(&e, 20, "status", 1);
	allm_ctl_enc_kint(&e, "extra", 1);
	expect_error(s, "unknown envelope field", e.sb.data, e.sb.size, 20);
	pack_req(&e, 21, "cancel", 1);
	allm_ctl_enc_kmap(&e, "args", 1);
	allm_ctl_enc_kstr(&e, "id", "x");
	expect_error(s, "cancel id as a word", e.sb.data, e.sb.size, 21);
	pack_req(&e, UINT64_MAX, "cancel", 1);
	allm_ctl_enc_kmap(&e, "args", 1);
	allm_ctl_enc_kint(&e, "id", 123456789);
	expect_error(s, "cancel unknown (id 2^64-1 echoed)", e.sb.data, e.sb.size, UINT64_MAX);

	/* 1 MiB: read (under ZeroMQ's 4 MiB cap) and refused by size */
	size_t big = 1 << 20;
	uint8_t *b = calloc(1, big);
	b[0] = 0xdb; /* a str32 filling the frame, inside nothing: size is checked first */
	expect_error(s, "1 MiB body", b, big, 0);

	/* frames: extra, and a REQ-style delimiter (echoed back) */
	pack_req(&e, 22, "status", 0);
	{
		const void *fr[2] = {e.sb.data, e.sb.data};
		size_t ln[2] = {e.sb.size, e.sb.size};
		int nf;
		struct allm_ctl_msg *r = roundtrip(s, fr, ln, 2, &nf);
		bool ok = true;
		CHECK(r && !allm_ctl_get_bool(r->root, "ok", &ok) && !ok, "extra frame: not refused");
		printf("ok: %-34s -> refused\n", "two body frames");
		allm_ctl_msg_free(r);
		const void *fd[2] = {"", e.sb.data};
		size_t ld[2] = {0, e.sb.size};
		r = roundtrip(s, fd, ld, 2, &nf);
		int64_t id = 0;
		ok = false;
		CHECK(r && nf == 2 && !allm_ctl_get_bool(r->root, "ok", &ok) && ok &&
			      !allm_ctl_get_int(r->root, "id", &id) && id == 22,
		      "delimiter: %d frames, ok %d, id %lld", nf, ok, (long long)id);
		printf("ok: %-34s -> answered with the delimiter\n", "[empty][status]");
		allm_ctl_msg_free(r);
	}

	/* 5 MiB: over ZeroMQ's cap, the peer is dropped; others are not affected */
	{
		size_t huge = 5 << 20;
		uint8_t *h = calloc(1, huge);
		void *s2 = dealer();
		zmq_send(s2, h, huge, 0);
		zmq_pollitem_t it = {.socket = s2, .events = ZMQ_POLLIN};
		CHECK(zmq_poll(&it, 1, 500) == 0, "5 MiB: a reply came");
		zmq_close(s2);
		free(h);
		printf("ok: %-34s -> dropped by ZMQ_MAXMSGSIZE\n", "5 MiB body");
	}
	free(b);

	/* nothing changed, and a fresh peer is served */
	void *s3 = dealer();
	sf = 0;
	int64_t gpu1 = status_int(s3, "blocks.gpu.total", &sf);
	int64_t seqs1 = status_int(s3, "limits.max_num_seqs", &sf);
	CHECK(sf == 0, "status after: %d failures", sf);
	CHECK(gpu1 == gpu0 && seqs1 == seqs0, "settings changed: gpu %lld -> %lld, seqs %lld -> %lld",
	      (long long)gpu0, (long long)gpu1, (long long)seqs0, (long long)seqs1);
	printf("ok: status still answered, settings unchanged (gpu_blocks %lld, max_num_seqs %lld)\n",
	       (long long)gpu1, (long long)seqs1);
	allm_ctl_enc_free(&e);
	zmq_close(s);
	zmq_close(s3);
	zmq_ctx_term(ctx);
	return n_fail ? 1 : 0;
}
