/* Description: simulated-device profiles: the shipped ones load; ops.attention_decode prices a batch of decodes alone and a mixed step's decodes; a device with a cache prices the distinct K/V bytes past it at far_bandwidth and the rest (a prefill's re-reads too) at bandwidth; a serial device prices a mixed step's decode and prefill attention apart (a GPU, at once); a missing, negative, non-numeric, out-of-range or unsourced number, an unknown dtype or key, and an unknown profile name are each refused with an error naming the key; the sim backend keeps memory as bookkeeping, advances its clock by the cost model exactly, and answers argmax deterministically from each row's token and position. */
#include "backend.h"
#include "sim/sim-backend.h"
#include "sim/sim-cost.h"
#include "test-check.h"
#include "vdir.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const struct allm_vdir *allm_sim_profiles(void);

static json_t *base_profile(void)
{
	char *text = NULL;
	size_t len = 0;
	int r = allm_vdir_read(allm_sim_profiles(), "a800-pcie.json", 1 << 20, &text, &len);
	CHECK(r == 0, "the embedded a800-pcie.json is readable (%d)", r);
	json_t *j = r ? NULL : json_loadb(text, len, 0, NULL);
	allm_free(text);
	return j;
}

/* Parses j and expects a refusal whose message contains want. */
static void expect_refused(json_t *j, const char *want, const char *what)
{
	char *text = json_dumps(j, 0);
	struct allm_sim_profile *p = NULL;
	struct allm_err err = {{0}};
	int r = allm_sim_profile_parse(text, strlen(text), "test", &p, &err);
	CHECK(r == -EINVAL && !p, "%s: refused (r=%d)", what, r);
	CHECK(strstr(err.msg, want) != NULL, "%s: error '%s' names '%s'", what, err.msg, want);
	allm_sim_profile_free(p);
	free(text);
	json_decref(j);
}

static void expect_refused_text(const char *text, const char *want, const char *what)
{
	struct allm_sim_profile *p = NULL;
	struct allm_err err = {{0}};
	int r = allm_sim_profile_parse(text, strlen(text), "test", &p, &err);
	CHECK(r == -EINVAL && !p, "%s: refused (r=%d)", what, r);
	CHECK(strstr(err.msg, want) != NULL, "%s: error '%s' names '%s'", what, err.msg, want);
	allm_sim_profile_free(p);
}

static json_t *at(json_t *j, const char *a, const char *b, const char *c)
{
	json_t *x = json_object_get(j, a);
	if (b)
		x = json_object_get(x, b);
	if (c)
		x = json_object_get(x, c);
	return x;
}

static void test_refusals(void)
{
	json_t *j;
	j = base_profile();
	json_object_del(j, "memory_bandwidth");
	expect_refused(j, "memory_bandwidth: missing", "missing memory bandwidth");

	j = base_profile();
	json_object_set_new(at(j, "link", "h2d", "bandwidth"), "value", json_real(-1e9));
	expect_refused(j, "link.h2d.bandwidth: value -1e+09 outside", "negative link bandwidth");

	j = base_profile();
	json_object_set_new(at(j, "flops", "f16", NULL), "value", json_string("nan"));
	expect_refused(j, "flops.f16: \"value\" is not a number", "NaN as a string");

	j = base_profile();
	json_object_set_new(at(j, "ops", "gemm", "compute"), "value", json_real(1.5));
	expect_refused(j, "ops.gemm.compute: value 1.5 outside", "efficiency above 1");

	j = base_profile();
	json_object_set_new(at(j, "ops", "default", "launch"), "value", json_real(-1e-6));
	expect_refused(j, "ops.default.launch: value", "negative launch");

	j = base_profile();
	json_object_set_new(j, "dtype", json_string("f8"));
	expect_refused(j, "unknown dtype 'f8'", "unknown storage dtype");

	j = base_profile();
	json_object_set(at(j, "flops", NULL, NULL), "int4", at(j, "flops", "f16", NULL));
	expect_refused(j, "flops.int4: unknown dtype 'int4'", "unknown flops dtype");

	j = base_profile();
	json_object_del(at(j, "memory_bytes", NULL, NULL), "source");
	expect_refused(j, "memory_bytes: no source", "missing source");

	j = base_profile();
	json_object_set_new(at(j, "link", "d2h", "latency"), "source", json_string(""));
	expect_refused(j, "link.d2h.latency: no source", "empty source");

	j = base_profile();
	json_object_set(at(j, "ops", "gemm", NULL), "bandwith", at(j, "ops", "gemm", "bandwidth"));
	expect_refused(j, "ops.gemm: unknown key 'bandwith'", "a typo");

	j = base_profile();
	json_object_set_new(at(j, "reserved_bytes", NULL, NULL), "value", json_real(1e12));
	expect_refused(j, "reserved_bytes", "reserved above memory");

	j = base_profile();
	json_object_set_new(j, "format", json_string("allm-sim-profile/0"));
	expect_refused(j, "format", "wrong format");

	j = base_profile();
	json_object_set_new(j, "gemm_shapes",
			    json_pack("[{s:s, s:i, s:i, s:[[i, f], [i, f]], s:s}]", "dtype", "f16", "k", 64,
				      "m", 64, "points", 8, 1e-5, 4, 2e-5, "source", "test"));
	expect_refused(j, "gemm_shapes[0]: points need rows >= 1 increasing", "rows not increasing");

	j = base_profile();
	json_object_set_new(at(j, "disk", "read", "bandwidth"), "value", json_real(-6e9));
	expect_refused(j, "disk.read.bandwidth: value -6e+09 outside", "negative disk bandwidth");

	j = base_profile();
	json_object_del(at(j, "disk", "write", NULL), "latency");
	expect_refused(j, "disk.write.latency: missing", "disk without a latency");

	j = base_profile();
	json_object_set_new(at(j, "ops", "attention", NULL), "serial", json_pack("{s:f, s:s}", "value", 0.5, "source", "t"));
	expect_refused(j, "ops.attention: serial is 0", "serial neither 0 nor 1");

	j = base_profile();
	json_object_set_new(at(j, "ops", "gemm", NULL), "serial", json_pack("{s:f, s:s}", "value", 1.0, "source", "t"));
	expect_refused(j, "ops.gemm: score_flops, serial, cache_bytes and far_bandwidth apply to attention only",
		       "serial on a GEMM");

	j = base_profile();
	json_object_set_new(at(j, "ops", "gemm", NULL), "cache_bytes", json_pack("{s:f, s:s}", "value", 1e6, "source", "t"));
	expect_refused(j, "ops.gemm: score_flops, serial, cache_bytes and far_bandwidth apply to attention only",
		       "a cache on a GEMM");

	j = base_profile();
	json_object_set_new(at(j, "ops", "attention", NULL), "cache_bytes", json_pack("{s:f, s:s}", "value", 1e6, "source", "t"));
	expect_refused(j, "ops.attention: far_bandwidth is needed with cache_bytes", "a cache with no far side");

	j = base_profile();
	json_object_set_new(at(j, "ops", "attention", NULL), "cache_bytes", json_pack("{s:f, s:s}", "value", 1e6, "source", "t"));
	json_object_set_new(at(j, "ops", "attention", NULL), "far_bandwidth", json_pack("{s:f, s:s}", "value", 2.0, "source", "t"));
	expect_refused(j, "ops.attention.far_bandwidth: value 2 outside", "far bandwidth above peak");

	j = base_profile();
	json_object_set_new(at(j, "ops", "attention", NULL), "cache_bytes", json_pack("{s:f, s:s}", "value", -1.0, "source", "t"));
	expect_refused(j, "ops.attention.cache_bytes: value -1 outside", "a negative cache");

	j = base_profile();
	json_object_set_new(at(j, "ops", NULL, NULL), "attention_decode",
			    json_pack("{s:{s:f, s:s}, s:{s:f, s:s}}", "compute", "value", 0.5, "source", "t",
				      "bandwith", "value", 0.5, "source", "t"));
	expect_refused(j, "ops.attention_decode: unknown key 'bandwith'", "a typo in attention_decode");

	j = base_profile();
	json_object_set_new(at(j, "ops", NULL, NULL), "attention_decode",
			    json_pack("{s:{s:f, s:s}}", "launch", "value", 1e-6, "source", "t"));
	expect_refused(j, "ops.attention_decode.compute: missing", "attention_decode without its compute");

	expect_refused_text("{\"format\": \"allm-sim-profile/1\", \"memory_bandwidth\": NaN}",
			    "not valid JSON", "a NaN literal");
	expect_refused_text("{\"format\": \"allm-sim-profile/1\", \"x\": 1e999}", "not valid JSON",
			    "an infinite number");
}

static void test_lookup(void)
{
	static const char *const names[] = {"a800-pcie", "cpu-local", "h100-sxm", "h200"};
	struct allm_sim_profile *p = NULL;
	struct allm_err err = {{0}};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(names); i++) {
		int r = allm_sim_profile_load(names[i], &p, &err);
		CHECK(r == 0, "shipped profile %s loads: %s", names[i], err.msg);
		if (!r) {
			CHECK(!strcmp(p->name, names[i]), "%s names itself (%s)", names[i], p->name);
			CHECK(p->mem_bw > 0 && p->flops[ALLM_DTYPE_F16] > 0 && p->link_bw[ALLM_COPY_H2D] > 0,
			      "%s has positive rates", names[i]);
		}
		allm_sim_profile_free(p);
		p = NULL;
	}
	int r = allm_sim_profile_load("nope", &p, &err);
	CHECK(r == -ENOENT && strstr(err.msg, "unknown sim profile 'nope'") && strstr(err.msg, "a800-pcie"),
	      "an unknown name is refused with the shipped names: %s", err.msg);
	r = allm_sim_profile_load("/nonexistent/x.json", &p, &err);
	CHECK(r == -ENOENT && strstr(err.msg, "/nonexistent/x.json"), "a missing file is named: %s", err.msg);
	allm_backend_t *be = NULL;
	r = allm_backend_create("sim:nope", NULL, &be, NULL, 0, &err);
	CHECK(r < 0 && !be && strstr(err.msg, "unknown sim profile"), "--device sim:nope fails: %s", err.msg);
	r = allm_backend_create("simulated", NULL, &be, NULL, 0, &err);
	CHECK(r == -EINVAL && strstr(err.msg, "sim:PROFILE"), "an unknown device lists sim:PROFILE: %s", err.msg);

	/* a profile read from a file */
	char path[] = "/tmp/test-sim-profile-XXXXXX";
	int fd = mkstemp(path);
	json_t *j = base_profile();
	json_object_set_new(j, "name", json_string("from-file"));
	CHECK(fd >= 0 && json_dumpfd(j, fd, 0) == 0, "temp profile written");
	close(fd);
	char spec[64];
	snprintf(spec, sizeof(spec), "%s", path);
	/* a path without ".json" still counts as a path: it has a '/' */
	r = allm_sim_profile_load(spec, &p, &err);
	CHECK(r == 0 && p && !strcmp(p->name, "from-file"), "a profile from a path loads: %s", err.msg);
	allm_sim_profile_free(p);
	unlink(path);
	json_decref(j);
}

/* Runs a one-layer "forward" of tokens ids[] at positions pos[] and returns the
 * argmax of each row. */
static void fake_forward(allm_backend_t *be, int32_t *meta, const int32_t *ids, const int32_t *pos,
			 int n, int32_t *ret)
{
	const struct allm_backend_i *B = be->iface;
	int32_t host[64];
	for (int i = 0; i < n; i++) {
		host[i] = ids[i];
		host[n + i] = pos[i];
		host[2 * n + i] = i; /* one sequence per token */
		host[3 * n + i] = i; /* gather every row */
	}
	B->upload(be, meta, host, (size_t)4 * n * sizeof(int32_t));
	struct allm_kv_layout lay = {1, 4, 64, 16, ALLM_DTYPE_F16};
	struct allm_attn_meta m = {.n_tokens = n, .n_seqs = n, .max_blocks_per_seq = 1, .max_ctx = 64,
				   .tok_pos = meta + n, .tok_seq = meta + 2 * n};
	B->timer_start(be);
	B->embedding(be, NULL, NULL, ALLM_DTYPE_F16, meta, n, 256);
	B->attention(be, NULL, NULL, NULL, &lay, 0, 4, 0.125f, &m);
	B->gather_rows(be, NULL, NULL, meta + 3 * n, n, 256);
	float *logits = (float *)(uintptr_t)0x1000; /* any address: the head's output */
	B->gemm(be, logits, NULL, NULL, NULL, ALLM_DTYPE_F16, n, 256, 32000);
	CHECK(B->argmax(be, meta + 4 * n, logits, n, 32000) == 0, "argmax runs");
	double s;
	B->timer_stop(be, &s);
	B->download(be, ret, meta + 4 * n, (size_t)n * sizeof(int32_t));
}

/* Equal up to the rounding of a clock that adds seconds to a running sum. */
static bool near(double a, double b)
{
	return fabs(a - b) <= 1e-12 * fmax(1.0, fabs(b));
}

static void test_backend(void)
{
	allm_backend_t *be = NULL;
	struct allm_err err = {{0}};
	int r = allm_backend_create("sim:a800-pcie", NULL, &be, NULL, 0, &err);
	CHECK(r == 0 && be && be->simulated, "sim:a800-pcie opens: %s", err.msg);
	if (r)
		return;
	const struct allm_backend_i *B = be->iface;
	const struct allm_sim_profile *p = allm_sim_get_profile(be);
	CHECK(strstr(B->describe(be), "simulated") && strstr(B->describe(be), "a800-pcie"),
	      "describe says simulated and the profile: %s", B->describe(be));
	size_t fr = 0, tot = 0;
	void *w = NULL, *huge = NULL;
	/* 26 GB of "weights": bookkeeping only, no pages */
	CHECK(B->alloc(be, (size_t)26 << 30, &w) == 0, "26 GiB allocate on an 80 GiB device");
	B->mem_info(be, &fr, &tot);
	CHECK(tot == (size_t)p->memory_bytes && fr == tot - (size_t)p->reserved_bytes - ((size_t)26 << 30),
	      "mem_info: %zu free of %zu", fr, tot);
	r = B->alloc(be, (size_t)60 << 30, &huge);
	CHECK(r == -ENOMEM && strstr(allm_backend_last_error(be), "out of device memory"),
	      "past the device's memory: %s", allm_backend_last_error(be));
	B->free(be, w);

	/* the clock moves by the cost model, nothing else */
	double t0 = allm_backend_clock(be);
	B->gemm(be, NULL, NULL, NULL, NULL, ALLM_DTYPE_F16, 37, 5120, 13824);
	double want = allm_sim_cost_gemm(p, ALLM_DTYPE_F16, 37, 5120, 13824, false);
	CHECK(near(allm_backend_clock(be) - t0, want), "gemm: %.9g s, cost model %.9g s",
	      allm_backend_clock(be) - t0, want);
	t0 = allm_backend_clock(be);
	double secs = 0;
	B->copy_async(be, NULL, NULL, 13107200, ALLM_COPY_D2H);
	B->copy_async(be, NULL, NULL, 13107200, ALLM_COPY_H2D);
	B->copy_wait(be, &secs);
	want = allm_sim_cost_copy(p, ALLM_COPY_D2H, 13107200) + allm_sim_cost_copy(p, ALLM_COPY_H2D, 13107200);
	CHECK(near(secs, want) && near(allm_backend_clock(be) - t0, want), "two copies: %.9g s, model %.9g s", secs, want);
	t0 = allm_backend_clock(be);
	double dsk = allm_backend_charge_disk(be, false, 13107200, 3);
	CHECK(near(dsk, allm_sim_cost_disk(p, false, 13107200)) && near(allm_backend_clock(be) - t0, dsk),
	      "a disk read: %.9g s, model %.9g s", dsk, allm_sim_cost_disk(p, false, 13107200));
	t0 = allm_backend_clock(be) - want;
	allm_backend_clock_wait_until(be, allm_backend_clock(be) + 5);
	CHECK(near(allm_backend_clock(be) - t0, want + 5), "waiting moves the virtual clock at once");

	/* argmax: a function of (token, position) only, whatever the batch */
	int32_t *meta = NULL;
	CHECK(B->alloc(be, 4096, (void **)&meta) == 0, "small buffer");
	int32_t ids[3] = {5, 9, 5}, pos[3] = {7, 7, 7}, a[3], b[3];
	fake_forward(be, meta, ids, pos, 3, a);
	CHECK(a[0] == a[2] && a[0] >= 0 && a[0] < 32000, "same token and position, same pick (%d %d)", a[0], a[2]);
	int32_t ids2[1] = {9}, pos2[1] = {7};
	fake_forward(be, meta, ids2, pos2, 1, b);
	CHECK(b[0] == a[1], "a row's pick does not depend on its batch (%d vs %d)", b[0], a[1]);
	int32_t pos3[1] = {8};
	fake_forward(be, meta, ids2, pos3, 1, b);
	CHECK(b[0] != a[1], "the next position picks another token (%d)", b[0]);
	B->free(be, meta);
	allm_backend_destroy(be);
}

/* The a800 profile with ops.attention.serial set to serial, and f16 FLOP/s cut to
 * 1e13 so that a decode (~1 FLOP per K/V byte) is bound by memory and a prefill
 * (a 64-query tile per K/V read) by arithmetic. */
static struct allm_sim_profile *a800_serial(int serial)
{
	json_t *j = base_profile();
	json_object_set_new(at(j, "ops", "attention", NULL), "serial",
			    json_pack("{s:i, s:s}", "value", serial, "source", "test"));
	json_object_set_new(at(j, "flops", "f16", NULL), "value", json_real(1e13));
	char *text = json_dumps(j, 0);
	struct allm_sim_profile *p = NULL;
	struct allm_err err = {{0}};
	CHECK(allm_sim_profile_parse(text, strlen(text), "test", &p, &err) == 0, "serial=%d parses: %s", serial,
	      err.msg);
	free(text);
	json_decref(j);
	return p;
}

enum { MIXED_D = 6, MIXED_P = 256 };

/* A mixed step: 6 decodes at positions 700..705 (one sequence each), then a
 * 256-token prefill; and its two parts as batches of their own. */
static void mixed_shapes(struct allm_sim_attn_shape *mixed, struct allm_sim_attn_shape *dec,
			 struct allm_sim_attn_shape *pre)
{
	enum { D = MIXED_D, P = MIXED_P };
	int32_t pos[D + P], seq[D + P];
	for (int i = 0; i < D; i++)
		pos[i] = 700 + i, seq[i] = i;
	for (int i = 0; i < P; i++)
		pos[D + i] = i, seq[D + i] = D;
	allm_sim_attn_shape_from(pos, seq, D + P, mixed);
	allm_sim_attn_shape_from(pos, seq, D, dec);
	allm_sim_attn_shape_from(pos + D, seq + D, P, pre);
}

/* A mixed step's attention: on a serial device its decodes and its prefill are
 * priced apart and added; at once (a GPU), one roofline over the batch, never
 * more than that sum. */
static void test_serial_attention(void)
{
	enum { D = MIXED_D };
	struct allm_sim_attn_shape mixed, dec, pre;
	mixed_shapes(&mixed, &dec, &pre);
	CHECK(mixed.dec_tokens == D && dec.dec_tokens == D && pre.dec_tokens == 0 &&
	      near(mixed.dec_sum_ctx, dec.sum_ctx) && near(mixed.dec_kv_reads, dec.kv_reads),
	      "the decode part of the mixed shape is the decodes' shape (%lld tokens)", (long long)mixed.dec_tokens);
	struct allm_kv_layout lay = {.n_layers = 40, .n_kv_heads = 40, .head_dim = 128, .block_size = 16,
				     .dtype = ALLM_DTYPE_F16};
	struct allm_sim_profile *ser = a800_serial(1), *par = a800_serial(0);
	if (!ser || !par)
		goto out;
	double launch = ser->op[ALLM_OP_ATTENTION].launch;
	double sum = allm_sim_cost_attention(ser, &lay, 40, &dec) + allm_sim_cost_attention(ser, &lay, 40, &pre) - launch;
	double s = allm_sim_cost_attention(ser, &lay, 40, &mixed), c = allm_sim_cost_attention(par, &lay, 40, &mixed);
	CHECK(near(s, sum), "serial: the mixed step costs its parts added (%.9g vs %.9g s)", s, sum);
	CHECK(c < s, "at once: the parts hide each other's bound (%.9g < %.9g s)", c, s);
	CHECK(near(allm_sim_cost_attention(ser, &lay, 40, &pre), allm_sim_cost_attention(par, &lay, 40, &pre)),
	      "a batch of one kind costs the same either way");
out:
	allm_sim_profile_free(ser);
	allm_sim_profile_free(par);
}

/* A device with a cache (ops.attention.cache_bytes, a CPU's L2): a call's distinct
 * K/V bytes past the cache stream at far_bandwidth, everything else at bandwidth;
 * a prefill's re-reads of its own K/V (later query tiles) stay near; no cache
 * (the GPU profiles) prices as before. */
static void test_attention_cache(void)
{
	/* stories260K-like: 8-dim heads, 4 KV heads, f32: 256 bytes of K/V per token */
	struct allm_kv_layout lay = {.n_layers = 5, .n_kv_heads = 4, .head_dim = 8, .block_size = 16,
				     .dtype = ALLM_DTYPE_F32};
	struct allm_sim_profile *p = a800_serial(1);
	if (!p)
		return;
	struct allm_sim_op_params *o = &p->op[ALLM_OP_ATTENTION];
	o->score_flops = 0;
	p->flops[ALLM_DTYPE_F32] = 1e18; /* memory-bound throughout */
	o->bandwidth = 0.5, o->launch = 1e-6;
	enum { N = 64, CTX = 128 };
	int32_t pos[N], seq[N];
	for (int i = 0; i < N; i++)
		pos[i] = CTX - 1, seq[i] = i;
	struct allm_sim_attn_shape dec;
	allm_sim_attn_shape_from(pos, seq, N, &dec);
	CHECK(near(dec.kv_unique, N * CTX) && near(dec.dec_kv_unique, N * CTX), "64 decodes @128: %g distinct K/V tokens",
	      dec.kv_unique);
	double kv = N * CTX * 256.0, q = 8.0 * N * 8 * 8; /* K/V and the queries/outputs */
	double no_cache = allm_sim_cost_attention(p, &lay, 8, &dec);
	CHECK(near(no_cache, 1e-6 + (kv + q) / (p->mem_bw * 0.5)), "no cache: one bandwidth (%.9g s)", no_cache);
	o->cache_bytes = 1 << 20, o->far_bandwidth = 0.05;
	double cached = allm_sim_cost_attention(p, &lay, 8, &dec);
	double want = 1e-6 + (kv + q - (kv - (1 << 20))) / (p->mem_bw * 0.5) + (kv - (1 << 20)) / (p->mem_bw * 0.05);
	CHECK(near(cached, want), "2 MiB of K/V past a 1 MiB cache: %.9g s, want %.9g", cached, want);
	struct allm_sim_attn_shape small;
	allm_sim_attn_shape_from(pos, seq, 16, &small); /* 512 KiB: all in the cache */
	o->cache_bytes = 0;
	double small_nc = allm_sim_cost_attention(p, &lay, 8, &small);
	o->cache_bytes = 1 << 20;
	CHECK(near(allm_sim_cost_attention(p, &lay, 8, &small), small_nc), "a call inside the cache costs as without one");
	/* one 511-token prefill: 128 KiB distinct, re-read per query tile: all near */
	int32_t ppos[511], pseq[511];
	for (int i = 0; i < 511; i++)
		ppos[i] = i, pseq[i] = 0;
	struct allm_sim_attn_shape pre;
	allm_sim_attn_shape_from(ppos, pseq, 511, &pre);
	CHECK(near(pre.kv_unique, 511) && pre.kv_reads > pre.kv_unique, "a prefill reads %g tokens, %g distinct",
	      pre.kv_reads, pre.kv_unique);
	double pre_c = allm_sim_cost_attention(p, &lay, 8, &pre);
	o->cache_bytes = 0;
	CHECK(near(pre_c, allm_sim_cost_attention(p, &lay, 8, &pre)), "a prefill's re-reads stay in the cache");
	allm_sim_profile_free(p);
}

/* ops.attention_decode: a batch of decodes only is priced by it alone; a mixed
 * step on a serial device prices its decodes by it and its prefill by
 * ops.attention, under attention's one launch; without it, as before. */
static void test_attention_decode(void)
{
	struct allm_kv_layout lay = {.n_layers = 40, .n_kv_heads = 40, .head_dim = 128, .block_size = 16,
				     .dtype = ALLM_DTYPE_F16};
	struct allm_sim_attn_shape mixed, dec, pre;
	mixed_shapes(&mixed, &dec, &pre);
	struct allm_sim_profile *p = a800_serial(1);
	if (!p)
		return;
	double dec0 = allm_sim_cost_attention(p, &lay, 40, &dec), pre0 = allm_sim_cost_attention(p, &lay, 40, &pre);
	double mixed0 = allm_sim_cost_attention(p, &lay, 40, &mixed);
	p->attn_decode = p->op[ALLM_OP_ATTENTION];
	p->attn_decode.bandwidth /= 2; /* half the compute and bandwidth: twice either bound */
	p->attn_decode.compute /= 2;
	p->attn_decode.launch = 3 * p->op[ALLM_OP_ATTENTION].launch;
	p->has_attn_decode = true;
	double launch = p->op[ALLM_OP_ATTENTION].launch;
	double dec1 = allm_sim_cost_attention(p, &lay, 40, &dec), pre1 = allm_sim_cost_attention(p, &lay, 40, &pre);
	double mixed1 = allm_sim_cost_attention(p, &lay, 40, &mixed);
	CHECK(near(dec1 - 3 * launch, 2 * (dec0 - launch)), "decodes alone: attention_decode's launch, compute and bandwidth (%.9g vs %.9g s)",
	      dec1, dec0);
	CHECK(near(pre1, pre0), "a prefill alone: ops.attention as before (%.9g vs %.9g s)", pre1, pre0);
	CHECK(near(mixed1, launch + (dec1 - 3 * launch) + (pre1 - launch)),
	      "mixed: one launch, the decodes by attention_decode, the prefill by attention (%.9g s)", mixed1);
	CHECK(mixed1 > mixed0, "slower decodes make the mixed step dearer (%.9g > %.9g s)", mixed1, mixed0);
	allm_sim_profile_free(p);
}

int main(void)
{
	test_refusals();
	test_lookup();
	test_backend();
	test_serial_attention();
	test_attention_cache();
	test_attention_decode();
	if (n_fail)
		fprintf(stderr, "%d checks failed\n", n_fail);
	return n_fail ? 1 : 0;
}
