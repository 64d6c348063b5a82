/* Reading and validating simulated-device profiles. A profile that is missing a
 * number, has one out of range, or does not say where a number comes from is
 * refused with the path of the offending key: a simulation is only as good as its
 * inputs, and a silent default would hide a typo ("bandwith") behind plausible
 * output. */
#include "sim-profile.h"

#include "vdir.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The profiles of data/sim-profiles/, compiled in (embed-dir.py). */
const struct allm_vdir *allm_sim_profiles(void);

#define MAX_PROFILE_BYTES (4u << 20)

static const char *const op_names[ALLM_OP_COUNT] = {
	[ALLM_OP_EMBEDDING] = "embedding", [ALLM_OP_RMSNORM] = "rmsnorm",
	[ALLM_OP_LAYERNORM] = "layernorm", [ALLM_OP_GEMM] = "gemm",
	[ALLM_OP_ROPE] = "rope",	   [ALLM_OP_SILU_MUL] = "silu_mul",
	[ALLM_OP_RELU] = "relu",	   [ALLM_OP_ADD] = "add",
	[ALLM_OP_GATHER_ROWS] = "gather_rows", [ALLM_OP_KV_WRITE] = "kv_write",
	[ALLM_OP_ATTENTION] = "attention", [ALLM_OP_ARGMAX] = "argmax",
	[ALLM_OP_TOPK] = "topk", [ALLM_OP_GELU_MUL] = "gelu_mul", [ALLM_OP_SCALE] = "scale",
	[ALLM_OP_SLIDING_WINDOW] = "sliding_window",
};

/* Context of one parse: where errors point. */
struct pctx {
	const char *origin;
	struct allm_err *err;
};

static int bad(struct pctx *c, const char *path, const char *fmt, const char *detail)
{
	char msg[300];
	snprintf(msg, sizeof(msg), fmt, detail);
	return allm_err_set(c->err, -EINVAL, "sim profile %s: %s: %s", c->origin, path, msg);
}

/* Refuses keys of obj not in allowed (NULL-terminated): a typo must not pass as
 * "optional key absent". */
static int only_keys(struct pctx *c, const char *path, json_t *obj, const char *const *allowed)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		bool ok = false;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = !strcmp(key, allowed[i]);
		if (!ok)
			return allm_err_set(c->err, -EINVAL, "sim profile %s: %s: unknown key '%s'",
					    c->origin, path[0] ? path : "(top level)", key);
	}
	return 0;
}

/* Reads {"value": X, "source": "..."} at obj[key] into *ret, X in [lo, hi]
 * (lo_open: X > lo). Absent and optional: *ret = def. */
static int num(struct pctx *c, json_t *obj, const char *parent, const char *key, bool required,
	       double def, double lo, bool lo_open, double hi, double *ret)
{
	char path[160];
	snprintf(path, sizeof(path), "%s%s%s", parent, parent[0] ? "." : "", key);
	json_t *o = obj ? json_object_get(obj, key) : NULL;
	if (!o) {
		if (required)
			return bad(c, path, "%smissing (every profile needs it)", "");
		*ret = def;
		return 0;
	}
	if (!json_is_object(o))
		return bad(c, path, "%sexpected {\"value\": number, \"source\": text}", "");
	static const char *const keys[] = {"value", "source", "note", NULL};
	int r = only_keys(c, path, o, keys);
	if (r)
		return r;
	json_t *v = json_object_get(o, "value"), *s = json_object_get(o, "source");
	if (!json_is_number(v))
		return bad(c, path, "%s\"value\" is not a number", "");
	if (!json_is_string(s) || !json_string_length(s))
		return bad(c, path, "%sno source: every number names where it comes from", "");
	double x = json_number_value(v);
	char detail[120];
	if (!isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) {
		snprintf(detail, sizeof(detail), "%g outside %s%g, %g]", x, lo_open ? "(" : "[", lo, hi);
		return bad(c, path, "value %s", detail);
	}
	*ret = x;
	return 0;
}

static int str(struct pctx *c, json_t *root, const char *key, char *ret, size_t len)
{
	json_t *s = json_object_get(root, key);
	if (!json_is_string(s) || !json_string_length(s))
		return bad(c, key, "%smissing or not a non-empty string", "");
	if (json_string_length(s) >= len)
		return bad(c, key, "%stoo long", "");
	snprintf(ret, len, "%s", json_string_value(s));
	return 0;
}

static int dtype(struct pctx *c, json_t *s, const char *path, enum allm_dtype *ret)
{
	if (!json_is_string(s))
		return bad(c, path, "%smissing or not a string", "");
	if (allm_dtype_parse(json_string_value(s), ret))
		return bad(c, path, "unknown dtype '%s' (expected f32, f16 or bf16)", json_string_value(s));
	return 0;
}

static int parse_flops(struct pctx *c, json_t *root, struct allm_sim_profile *p)
{
	json_t *f = json_object_get(root, "flops");
	if (!json_is_object(f))
		return bad(c, "flops", "%smissing: peak FLOP/s per dtype (f32, f16, bf16)", "");
	const char *key;
	json_t *v;
	enum allm_dtype dt;
	int r;
	json_object_foreach(f, key, v) {
		char path[64];
		snprintf(path, sizeof(path), "flops.%s", key);
		if (allm_dtype_parse(key, &dt))
			return bad(c, path, "unknown dtype '%s' (expected f32, f16 or bf16)", key);
	}
	for (int d = 0; d < ALLM_DTYPE_COUNT; d++)
		if ((r = num(c, f, "flops", allm_dtype_name((enum allm_dtype)d), true, 0, 0, true, 1e18,
			     &p->flops[d])))
			return r;
	return 0;
}

static int parse_link(struct pctx *c, json_t *root, struct allm_sim_profile *p)
{
	static const char *const dirs[4] = {"d2h", "h2d", "d2d", "h2h"};
	static const char *const keys[] = {"d2h", "h2d", "d2d", "h2h", NULL};
	static const char *const lkeys[] = {"bandwidth", "latency", NULL};
	json_t *l = json_object_get(root, "link");
	int r;
	if (!json_is_object(l))
		return bad(c, "link", "%smissing: host link bandwidth and latency per direction", "");
	if ((r = only_keys(c, "link", l, keys)))
		return r;
	for (int d = 0; d < 4; d++) {
		char path[32];
		snprintf(path, sizeof(path), "link.%s", dirs[d]);
		json_t *o = json_object_get(l, dirs[d]);
		bool required = d == ALLM_COPY_D2H || d == ALLM_COPY_H2D;
		if (!o && !required) {
			/* within device memory: read + write at memory speed; within the
			 * host: as fast as the device-to-host direction */
			p->link_bw[d] = d == ALLM_COPY_D2D ? p->mem_bw / 2 : p->link_bw[ALLM_COPY_D2H];
			p->link_latency[d] = p->op[ALLM_OP_ADD].launch;
			continue;
		}
		if (o && !json_is_object(o))
			return bad(c, path, "%snot an object", "");
		if (o && (r = only_keys(c, path, o, lkeys)))
			return r;
		if ((r = num(c, o, path, "bandwidth", true, 0, 0, true, 1e15, &p->link_bw[d])) ||
		    (r = num(c, o, path, "latency", true, 0, 0, false, 1, &p->link_latency[d])))
			return r;
	}
	return 0;
}

/* The disk KV tier's disk, optional: {"write": {bandwidth, latency}, "read": {...}}. */
static int parse_disk(struct pctx *c, json_t *root, struct allm_sim_profile *p)
{
	static const char *const keys[] = {"write", "read", NULL};
	static const char *const lkeys[] = {"bandwidth", "latency", NULL};
	json_t *d = json_object_get(root, "disk");
	int r;
	if (!d)
		return 0;
	if (!json_is_object(d))
		return bad(c, "disk", "%snot an object", "");
	if ((r = only_keys(c, "disk", d, keys)))
		return r;
	for (int i = 0; i < 2; i++) {
		char path[32];
		snprintf(path, sizeof(path), "disk.%s", keys[i]);
		json_t *o = json_object_get(d, keys[i]);
		if (o && !json_is_object(o))
			return bad(c, path, "%snot an object", "");
		if (o && (r = only_keys(c, path, o, lkeys)))
			return r;
		if ((r = num(c, o, path, "bandwidth", true, 0, 0, true, 1e15, &p->disk_bw[i])) ||
		    (r = num(c, o, path, "latency", true, 0, 0, false, 1, &p->disk_latency[i])))
			return r;
	}
	p->has_disk = true;
	return 0;
}

static int parse_op(struct pctx *c, json_t *ops, const char *name, const struct allm_sim_op_params *def,
		    bool needs_compute, struct allm_sim_op_params *ret)
{
	static const char *const keys[] = {"launch", "compute", "half_rows", "bandwidth", "score_flops",
					   "serial", "cache_bytes", "far_bandwidth", NULL};
	char path[64];
	snprintf(path, sizeof(path), "ops.%s", name);
	json_t *o = json_object_get(ops, name);
	int r;
	if (o && !json_is_object(o))
		return bad(c, path, "%snot an object", "");
	if (o && (r = only_keys(c, path, o, keys)))
		return r;
	*ret = *def;
	if ((r = num(c, o, path, "launch", false, def->launch, 0, false, 1, &ret->launch)) ||
	    (r = num(c, o, path, "bandwidth", false, def->bandwidth, 0, true, 1, &ret->bandwidth)))
		return r;
	if (!needs_compute) {
		if (o && (json_object_get(o, "compute") || json_object_get(o, "half_rows")))
			return bad(c, path, "%scompute/half_rows apply to gemm and attention only", "");
	}
	bool attn = !strncmp(name, "attention", 9);
	if (!attn && o &&
	    (json_object_get(o, "score_flops") || json_object_get(o, "serial") ||
	     json_object_get(o, "cache_bytes") || json_object_get(o, "far_bandwidth")))
		return bad(c, path, "%sscore_flops, serial, cache_bytes and far_bandwidth apply to attention only", "");
	if (!needs_compute)
		return 0;
	if (attn &&
	    ((r = num(c, o, path, "score_flops", false, 0, 0, false, 1e6, &ret->score_flops)) ||
	     (r = num(c, o, path, "serial", false, 0, 0, false, 1, &ret->serial))))
		return r;
	if (ret->serial != 0 && ret->serial != 1)
		return bad(c, path, "%sserial is 0 (sequences at once) or 1 (one after another)", "");
	if (attn &&
	    (r = num(c, o, path, "cache_bytes", false, 0, 0, false, 1e12, &ret->cache_bytes)))
		return r;
	if (ret->cache_bytes > 0 && !json_object_get(o, "far_bandwidth"))
		return bad(c, path, "%sfar_bandwidth is needed with cache_bytes (where the rest streams from)", "");
	if (attn &&
	    (r = num(c, o, path, "far_bandwidth", false, 0, 0, true, 1, &ret->far_bandwidth)))
		return r;
	if ((r = num(c, o, path, "compute", true, 0, 0, true, 1, &ret->compute)) ||
	    (r = num(c, o, path, "half_rows", true, 0, 0, false, 1e6, &ret->half_rows)))
		return r;
	return 0;
}

static int parse_ops(struct pctx *c, json_t *root, struct allm_sim_profile *p)
{
	json_t *ops = json_object_get(root, "ops");
	static const char *keys[ALLM_OP_COUNT + 3];
	int r;
	if (!json_is_object(ops))
		return bad(c, "ops", "%smissing: per-op launch and efficiency", "");
	keys[0] = "default";
	for (int i = 0; i < ALLM_OP_COUNT; i++)
		keys[i + 1] = op_names[i];
	keys[ALLM_OP_COUNT + 1] = "attention_decode";
	keys[ALLM_OP_COUNT + 2] = NULL;
	if ((r = only_keys(c, "ops", ops, keys)))
		return r;
	struct allm_sim_op_params def = {0};
	json_t *d = json_object_get(ops, "default");
	static const char *const dkeys[] = {"launch", "bandwidth", NULL};
	if (!json_is_object(d))
		return bad(c, "ops.default", "%smissing: launch and bandwidth of every op", "");
	if ((r = only_keys(c, "ops.default", d, dkeys)) ||
	    (r = num(c, d, "ops.default", "launch", true, 0, 0, false, 1, &def.launch)) ||
	    (r = num(c, d, "ops.default", "bandwidth", true, 0, 0, true, 1, &def.bandwidth)))
		return r;
	for (int i = 0; i < ALLM_OP_COUNT; i++)
		if ((r = parse_op(c, ops, op_names[i], &def, i == ALLM_OP_GEMM || i == ALLM_OP_ATTENTION,
				  &p->op[i])))
			return r;
	p->has_attn_decode = json_object_get(ops, "attention_decode") != NULL;
	if (p->has_attn_decode &&
	    (r = parse_op(c, ops, "attention_decode", &def, true, &p->attn_decode)))
		return r;
	return 0;
}

static int parse_shape(struct pctx *c, json_t *e, int idx, struct allm_sim_gemm_shape *s)
{
	static const char *const keys[] = {"dtype", "k", "m", "points", "source", NULL};
	char path[64];
	int r;
	snprintf(path, sizeof(path), "gemm_shapes[%d]", idx);
	if (!json_is_object(e))
		return bad(c, path, "%snot an object", "");
	if ((r = only_keys(c, path, e, keys)) || (r = dtype(c, json_object_get(e, "dtype"), path, &s->dtype)))
		return r;
	json_t *k = json_object_get(e, "k"), *m = json_object_get(e, "m"), *pts = json_object_get(e, "points");
	json_t *src = json_object_get(e, "source");
	if (!json_is_string(src) || !json_string_length(src))
		return bad(c, path, "%sno source: every number names where it comes from", "");
	if (!json_is_integer(k) || !json_is_integer(m) || json_integer_value(k) < 1 ||
	    json_integer_value(m) < 1)
		return bad(c, path, "%sk and m must be positive integers", "");
	s->k = json_integer_value(k);
	s->m = json_integer_value(m);
	if (!json_is_array(pts) || json_array_size(pts) < 2 || json_array_size(pts) > ALLM_SIM_MAX_GEMM_POINTS)
		return bad(c, path, "%spoints must be 2..24 [rows, seconds] pairs", "");
	s->n_points = (int32_t)json_array_size(pts);
	for (int32_t i = 0; i < s->n_points; i++) {
		json_t *pt = json_array_get(pts, (size_t)i);
		json_t *n = json_array_get(pt, 0), *t = json_array_get(pt, 1);
		if (!json_is_array(pt) || json_array_size(pt) != 2 || !json_is_number(n) || !json_is_number(t))
			return bad(c, path, "%spoints must be [rows, seconds] pairs of numbers", "");
		s->rows[i] = json_number_value(n);
		s->seconds[i] = json_number_value(t);
		if (!(s->rows[i] >= 1) || !(s->seconds[i] > 0) || !isfinite(s->seconds[i]) ||
		    (i && s->rows[i] <= s->rows[i - 1]))
			return bad(c, path, "%spoints need rows >= 1 increasing and seconds > 0", "");
	}
	return 0;
}

static int parse_shapes(struct pctx *c, json_t *root, struct allm_sim_profile *p)
{
	json_t *a = json_object_get(root, "gemm_shapes");
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > ALLM_SIM_MAX_GEMM_SHAPES)
		return bad(c, "gemm_shapes", "%snot an array of at most 64 shapes", "");
	p->n_gemm_shapes = (int32_t)json_array_size(a);
	p->gemm_shapes = allm_calloc((size_t)ALLM_MAX(p->n_gemm_shapes, 1), sizeof(*p->gemm_shapes));
	if (!p->gemm_shapes)
		return allm_err_set(c->err, -ENOMEM, "out of memory");
	for (int32_t i = 0; i < p->n_gemm_shapes; i++) {
		int r = parse_shape(c, json_array_get(a, (size_t)i), i, &p->gemm_shapes[i]);
		if (r)
			return r;
	}
	return 0;
}

static void hash_text(const char *text, size_t len, char *ret)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)text[i]) * 0x100000001b3ull;
	snprintf(ret, 17, "%016llx", (unsigned long long)h);
}

int allm_sim_profile_parse(const char *text, size_t len, const char *origin,
			   struct allm_sim_profile **ret, struct allm_err *err)
{
	static const char *const keys[] = {"format", "name", "device", "dtype", "assumptions",
					   "memory_bytes", "reserved_bytes", "flops",
					   "memory_bandwidth", "link", "disk", "host_step", "ops",
					   "gemm_shapes", "fitted", NULL};
	struct pctx c = {origin, err};
	json_error_t je;
	struct allm_sim_profile *p = NULL;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	int r;
	if (!root)
		return allm_err_set(err, -EINVAL, "sim profile %s: not valid JSON: %s (line %d)", origin,
				    je.text, je.line);
	if (!json_is_object(root)) {
		r = bad(&c, "(top level)", "%snot a JSON object", "");
		goto fail;
	}
	json_t *fmt = json_object_get(root, "format");
	if (!json_is_string(fmt) || strcmp(json_string_value(fmt), ALLM_SIM_PROFILE_FORMAT)) {
		r = bad(&c, "format", "expected \"%s\"", ALLM_SIM_PROFILE_FORMAT);
		goto fail;
	}
	if (!(p = allm_calloc(1, sizeof(*p)))) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	if ((r = only_keys(&c, "", root, keys)) || (r = str(&c, root, "name", p->name, sizeof(p->name))) ||
	    (r = str(&c, root, "device", p->device, sizeof(p->device))) ||
	    (r = dtype(&c, json_object_get(root, "dtype"), "dtype", &p->dtype)) ||
	    (r = num(&c, root, "", "memory_bytes", true, 0, 1 << 20, false, 1e15, &p->memory_bytes)) ||
	    (r = num(&c, root, "", "reserved_bytes", false, 0, 0, false, 1e15, &p->reserved_bytes)) ||
	    (r = parse_flops(&c, root, p)) ||
	    (r = num(&c, root, "", "memory_bandwidth", true, 0, 0, true, 1e15, &p->mem_bw)) ||
	    (r = num(&c, root, "", "host_step", false, 0, 0, false, 1, &p->host_step)) ||
	    (r = parse_ops(&c, root, p)) || (r = parse_link(&c, root, p)) || (r = parse_disk(&c, root, p)) ||
	    (r = parse_shapes(&c, root, p)))
		goto fail;
	if (p->reserved_bytes >= p->memory_bytes) {
		r = bad(&c, "reserved_bytes", "%sis not below memory_bytes", "");
		goto fail;
	}
	hash_text(text, len, p->hash);
	json_decref(root);
	*ret = p;
	return 0;
fail:
	json_decref(root);
	allm_sim_profile_free(p);
	return r;
}

void allm_sim_profile_free(struct allm_sim_profile *p)
{
	if (!p)
		return;
	allm_free(p->gemm_shapes);
	allm_free(p);
}

const char *allm_sim_profile_names(char *buf, size_t len)
{
	const struct allm_vdir *d = allm_sim_profiles();
	size_t off = 0;
	buf[0] = 0;
	for (size_t i = 0; i < d->n_files && off < len; i++) {
		const char *n = d->files[i].name, *dot = strrchr(n, '.');
		if (!dot || strcmp(dot, ".json"))
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s%.*s", off ? ", " : "", (int)(dot - n), n);
	}
	return buf;
}

int allm_sim_profile_load(const char *spec, struct allm_sim_profile **ret, struct allm_err *err)
{
	char name[300], origin[320];
	struct allm_vdir disk = allm_vdir_disk("");
	const struct allm_vdir *dir = &disk;
	size_t sl = strlen(spec);
	bool is_path = strchr(spec, '/') || (sl > 5 && !strcmp(spec + sl - 5, ".json"));
	char *text = NULL;
	size_t len = 0;
	int r;
	if (!sl)
		return allm_err_set(err, -EINVAL, "--device sim: needs a profile name (sim:NAME)");
	if (is_path) {
		snprintf(name, sizeof(name), "%s", spec);
		snprintf(origin, sizeof(origin), "%s", spec);
	} else {
		dir = allm_sim_profiles();
		snprintf(name, sizeof(name), "%.250s.json", spec);
		snprintf(origin, sizeof(origin), "sim:%.250s", spec);
	}
	r = allm_vdir_read(dir, name, MAX_PROFILE_BYTES, &text, &len);
	if (r == -ENOENT && !is_path) {
		char names[256];
		return allm_err_set(err, -ENOENT, "unknown sim profile '%s' (shipped: %s; or a path "
				    "to FILE.json)", spec, allm_sim_profile_names(names, sizeof(names)));
	}
	if (r)
		return allm_err_set(err, r, "sim profile %s: %s", origin, strerror(-r));
	r = allm_sim_profile_parse(text, len, origin, ret, err);
	allm_free(text);
	return r;
}
