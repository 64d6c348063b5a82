/* Predictor profiles: the calibrated models as JSON, so a restart skips the grid.
 *
 * {"version": 2,
 *  "key": {"model", "device", "dtype", "n_layers", "hidden", "block_size", "block_bytes", "threads"},
 *  "recompute": {"coef": [4], "xtx": [[4]x4], "xty": [4], "prior_xtx": [[4]x4], "base": [4],
 *                "scale", "bias"},
 *  "swap": {"d2h": {"lat", "bw", "xtx": [[2]x2], "xty": [2], "prior_xtx": [[2]x2],
 *                   "base_lat", "base_bw", "scale", "bias"}, "h2d": {...}},
 *  "calib_mape": {"recompute": x | null, "swap": x | null},
 *  "calibrated_at": "2024-01-01T00:00:00Z"}
 *
 * Recompute coefficients are in feature units (seconds per 1e3 tokens, per 1e6
 * tokens^2); swap in seconds per run and bytes/s. The file is a cache anyone can
 * edit, so every field is checked on load and the error names it. */
#include "predictor.h"

#include "safe-file.h"
#include "shm-trust.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* 2: swaps calibrated from cold caches (kv-cache.c, scrub_caches): a profile of
 * 1 predicted CPU swaps at a third of their time, so it is recalibrated */
#define PROFILE_VERSION 2
#define PROFILE_MAX_BYTES (1 << 20) /* a profile is ~3 KiB: refuse to slurp anything big */

static const char *const dir_name[2] = { "d2h", "h2d" };

/* ---- save ---- */

static json_t *vec_json(const double *v, int k)
{
	json_t *a = json_array();
	for (int i = 0; a && i < k; i++)
		if (json_array_append_new(a, json_real(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *mat_json(const double m[4][4], int k)
{
	json_t *a = json_array();
	for (int i = 0; a && i < k; i++)
		if (json_array_append_new(a, vec_json(m[i], k)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* JSON has no NaN: "no value" is null. */
static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *profile_json(const struct allm_predictor *p)
{
	const struct allm_predictor_key *k = &p->key;
	json_t *swap = json_object();

	for (int d = 0; swap && d < 2; d++) {
		const struct allm_pred_lsq *q = &p->swap[d];
		json_t *o = json_pack("{s:f, s:f, s:o, s:o, s:o, s:f, s:f, s:f, s:f}",
				      "lat", q->coef[0], "bw", p->swap_bw[d],
				      "xtx", mat_json(q->xtx, q->k), "xty", vec_json(q->xty, q->k),
				      "prior_xtx", mat_json(q->prior_xtx, q->k),
				      "base_lat", q->base[0], "base_bw", 1e6 / q->base[1], "scale", q->scale,
				      "bias", q->bias);
		if (!o || json_object_set_new(swap, dir_name[d], o) < 0) {
			json_decref(swap);
			swap = NULL;
		}
	}
	if (!swap)
		return NULL;
	return json_pack("{s:i, s:{s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:i},"
			 " s:{s:o, s:o, s:o, s:o, s:o, s:f, s:f}, s:o, s:{s:o, s:o}, s:s}",
			 "version", PROFILE_VERSION,
			 "key", "model", k->model, "device", k->device, "dtype", k->dtype,
			 "n_layers", k->n_layers, "hidden", k->hidden, "block_size", k->block_size,
			 "block_bytes", (json_int_t)k->block_bytes, "threads", k->threads,
			 "recompute", "coef", vec_json(p->rc.coef, p->rc.k), "xtx", mat_json(p->rc.xtx, p->rc.k),
			 "xty", vec_json(p->rc.xty, p->rc.k), "prior_xtx", mat_json(p->rc.prior_xtx, p->rc.k),
			 "base", vec_json(p->rc.base, p->rc.k), "scale", p->rc.scale, "bias", p->rc.bias,
			 "swap", swap,
			 "calib_mape", "recompute", num_or_null(p->calib_mape_rc), "swap", num_or_null(p->calib_mape_swap),
			 "calibrated_at", p->calibrated_at);
}

/* err's message, after "path: " (returns r). */
static int with_path(struct allm_err *err, int r, const char *path)
{
	char msg[sizeof(err->msg)];
	if (!err)
		return r;
	snprintf(msg, sizeof(msg), "%s", err->msg);
	return allm_err_set(err, r, "%s: %s", path, msg);
}

/* The profile's directory, opened and checked: a profile is read and written
 * only where no other user can create or replace names (an engine run as root
 * would otherwise write through a symlink someone planted, safe-file.h). */
static int open_dir(const char *path, int *ret_fd, const char **ret_name, struct allm_err *err)
{
	char dir[PATH_MAX];
	int r = allm_path_split(path, dir, sizeof(dir), ret_name);
	if (r)
		return allm_err_set(err, r, "%s: not a file path", path);
	return allm_dir_open_private(dir, "the profile directory", ret_fd, err);
}

int allm_predictor_save(const struct allm_predictor *p, const char *path, struct allm_err *err)
{
	const char *name;
	char *text = NULL;
	json_t *root = NULL;
	int dfd = -1, ret;

	if (!p->calibrated)
		return allm_err_set(err, -EINVAL, "predictor is not calibrated: nothing to save");
	if ((ret = open_dir(path, &dfd, &name, err)))
		return ret;
	root = profile_json(p);
	/* 17 digits: doubles round-trip exactly, so a reload predicts the same */
	text = root ? json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : NULL;
	if (!text) {
		ret = allm_err_set(err, -ENOMEM, "building the profile JSON failed");
		goto out;
	}
	size_t len = strlen(text);
	text[len] = '\n'; /* the NUL's place: one line more, as a text file ends */
	if ((ret = allm_file_replace(dfd, name, 0600, text, len + 1, err)))
		with_path(err, ret, path);
out:
	free(text);
	json_decref(root);
	close(dfd);
	return ret;
}

/* ---- load ---- */

static int bad(struct allm_err *err, const char *path, const char *field, const char *what)
{
	return allm_err_set(err, -EINVAL, "%s: field \"%s\" %s", path, field, what);
}

static int get_obj(json_t *o, const char *name, const char *fpath, const char *path, json_t **ret,
		   struct allm_err *err)
{
	*ret = json_object_get(o, name);
	if (!json_is_object(*ret))
		return bad(err, path, fpath, *ret ? "is not an object" : "is missing");
	return 0;
}

/* A finite number at least `min` (exclusive when strict). */
static int get_num(json_t *o, const char *name, const char *fpath, const char *path, double min, bool strict,
		   double *ret, struct allm_err *err)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_number(v))
		return bad(err, path, fpath, v ? "is not a number" : "is missing");
	*ret = json_number_value(v);
	if (!isfinite(*ret))
		return bad(err, path, fpath, "is not finite");
	if (strict ? !(*ret > min) : !(*ret >= min))
		return bad(err, path, fpath, strict ? "must be positive" : "must not be negative");
	return 0;
}

static int get_int(json_t *o, const char *name, const char *path, int64_t lo, int64_t hi, int64_t *ret,
		   struct allm_err *err)
{
	char f[64];
	json_t *v = json_object_get(o, name);
	snprintf(f, sizeof(f), "key.%s", name);
	if (!json_is_integer(v))
		return bad(err, path, f, v ? "is not an integer" : "is missing");
	*ret = json_integer_value(v);
	if (*ret < lo || *ret > hi)
		return bad(err, path, f, "is out of range");
	return 0;
}

static int get_str(json_t *o, const char *name, const char *f, const char *path, char *ret, size_t len,
		   struct allm_err *err)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_string(v))
		return bad(err, path, f, v ? "is not a string" : "is missing");
	if (json_string_length(v) >= len || strlen(json_string_value(v)) != json_string_length(v))
		return bad(err, path, f, "is too long or holds a NUL");
	memcpy(ret, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* An array of k finite numbers into v (stride 1). */
static int get_vec(json_t *a, int k, const char *fpath, const char *path, double *v, struct allm_err *err)
{
	char f[96];
	if (!json_is_array(a) || (int)json_array_size(a) != k) {
		snprintf(f, sizeof(f), "%s", fpath);
		return bad(err, path, f, a ? "is not an array of the right length" : "is missing");
	}
	for (int i = 0; i < k; i++) {
		json_t *e = json_array_get(a, (size_t)i);
		snprintf(f, sizeof(f), "%s[%d]", fpath, i);
		if (!json_is_number(e))
			return bad(err, path, f, "is not a number");
		v[i] = json_number_value(e);
		if (!isfinite(v[i]))
			return bad(err, path, f, "is not finite");
	}
	return 0;
}

/* A k x k matrix of sufficient statistics: finite, non-negative diagonal. */
static int get_mat(json_t *o, const char *name, int k, const char *prefix, const char *path, double m[4][4],
		   struct allm_err *err)
{
	char f[64], fi[96];
	json_t *a = json_object_get(o, name);
	int ret;

	snprintf(f, sizeof(f), "%s.%s", prefix, name);
	if (!json_is_array(a) || (int)json_array_size(a) != k)
		return bad(err, path, f, a ? "is not a square array of the right size" : "is missing");
	for (int i = 0; i < k; i++) {
		snprintf(fi, sizeof(fi), "%s[%d]", f, i);
		ret = get_vec(json_array_get(a, (size_t)i), k, fi, path, m[i], err);
		if (ret < 0)
			return ret;
		if (m[i][i] < 0) {
			snprintf(fi, sizeof(fi), "%s[%d][%d]", f, i, i);
			return bad(err, path, fi, "must not be negative (a diagonal of X^T W X)");
		}
	}
	return 0;
}

static int load_key(json_t *root, const struct allm_predictor_key *want, const char *path, struct allm_err *err)
{
	struct allm_predictor_key k;
	json_t *o;
	int64_t v[5];
	int ret;

	memset(&k, 0, sizeof(k));
	if ((ret = get_obj(root, "key", "key", path, &o, err)) < 0)
		return ret;
	if ((ret = get_str(o, "model", "key.model", path, k.model, sizeof(k.model), err)) < 0 ||
	    (ret = get_str(o, "device", "key.device", path, k.device, sizeof(k.device), err)) < 0 ||
	    (ret = get_str(o, "dtype", "key.dtype", path, k.dtype, sizeof(k.dtype), err)) < 0 ||
	    (ret = get_int(o, "n_layers", path, 0, INT32_MAX, &v[0], err)) < 0 ||
	    (ret = get_int(o, "hidden", path, 0, INT32_MAX, &v[1], err)) < 0 ||
	    (ret = get_int(o, "block_size", path, 0, INT32_MAX, &v[2], err)) < 0 ||
	    (ret = get_int(o, "block_bytes", path, 0, INT64_MAX, &v[3], err)) < 0 ||
	    (ret = get_int(o, "threads", path, 0, INT32_MAX, &v[4], err)) < 0)
		return ret;

	/* which field differs, so the warning tells the user why it recalibrates */
	if (strcmp(k.model, want->model))
		return allm_err_set(err, -ESTALE, "%s: made for model \"%s\", not \"%s\"", path, k.model, want->model);
	if (strcmp(k.device, want->device))
		return allm_err_set(err, -ESTALE, "%s: made for device \"%s\", not \"%s\"", path, k.device,
				    want->device);
	if (strcmp(k.dtype, want->dtype))
		return allm_err_set(err, -ESTALE, "%s: made for dtype %s, not %s", path, k.dtype, want->dtype);
	const char *names[5] = { "n_layers", "hidden", "block_size", "block_bytes", "threads" };
	int64_t have[5] = { want->n_layers, want->hidden, want->block_size, (int64_t)want->block_bytes,
			    want->threads };
	for (int i = 0; i < 5; i++)
		if (v[i] != have[i])
			return allm_err_set(err, -ESTALE, "%s: made for %s = %lld, not %lld", path, names[i],
					    (long long)v[i], (long long)have[i]);
	return 0;
}

static int load_rc(json_t *root, struct allm_pred_lsq *q, const char *path, struct allm_err *err)
{
	json_t *o;
	int ret;

	if ((ret = get_obj(root, "recompute", "recompute", path, &o, err)) < 0 ||
	    (ret = get_vec(json_object_get(o, "coef"), q->k, "recompute.coef", path, q->coef, err)) < 0 ||
	    (ret = get_mat(o, "xtx", q->k, "recompute", path, q->xtx, err)) < 0 ||
	    (ret = get_vec(json_object_get(o, "xty"), q->k, "recompute.xty", path, q->xty, err)) < 0 ||
	    (ret = get_mat(o, "prior_xtx", q->k, "recompute", path, q->prior_xtx, err)) < 0 ||
	    (ret = get_vec(json_object_get(o, "base"), q->k, "recompute.base", path, q->base, err)) < 0 ||
	    (ret = get_num(o, "scale", "recompute.scale", path, 0, true, &q->scale, err)) < 0 ||
	    (ret = get_num(o, "bias", "recompute.bias", path, -INFINITY, false, &q->bias, err)) < 0)
		return ret;
	/* the fit keeps these non-negative; a negative one is an edited file */
	for (int i = 0; i < q->k; i++)
		if ((q->nonneg & (1u << i)) && (q->coef[i] < 0 || q->base[i] < 0)) {
			char f[48];
			snprintf(f, sizeof(f), "recompute.%s[%d]", q->coef[i] < 0 ? "coef" : "base", i);
			return bad(err, path, f, "must not be negative");
		}
	return 0;
}

static int load_swap(json_t *root, struct allm_pred_lsq q[2], double bw[2], const char *path, struct allm_err *err)
{
	json_t *sw, *o;
	char f[10][48];
	int ret;

	if ((ret = get_obj(root, "swap", "swap", path, &sw, err)) < 0)
		return ret;
	for (int d = 0; d < 2; d++) {
		const char *n[10] = { "", "lat", "bw", "xtx", "xty", "prior_xtx", "base_lat", "base_bw", "scale", "bias" };
		double base_bw;
		for (int i = 0; i < 10; i++)
			snprintf(f[i], sizeof(f[i]), "swap.%s%s%s", dir_name[d], i ? "." : "", n[i]);
		if ((ret = get_obj(sw, dir_name[d], f[0], path, &o, err)) < 0 ||
		    (ret = get_num(o, "lat", f[1], path, 0, false, &q[d].coef[0], err)) < 0 ||
		    (ret = get_num(o, "bw", f[2], path, 0, true, &bw[d], err)) < 0 ||
		    (ret = get_mat(o, "xtx", q[d].k, f[0], path, q[d].xtx, err)) < 0 ||
		    (ret = get_vec(json_object_get(o, "xty"), q[d].k, f[4], path, q[d].xty, err)) < 0 ||
		    (ret = get_mat(o, "prior_xtx", q[d].k, f[0], path, q[d].prior_xtx, err)) < 0 ||
		    (ret = get_num(o, "base_lat", f[6], path, 0, false, &q[d].base[0], err)) < 0 ||
		    (ret = get_num(o, "base_bw", f[7], path, 0, true, &base_bw, err)) < 0 ||
		    (ret = get_num(o, "scale", f[8], path, 0, true, &q[d].scale, err)) < 0 ||
		    (ret = get_num(o, "bias", f[9], path, -INFINITY, false, &q[d].bias, err)) < 0)
			return ret;
		q[d].coef[1] = 1e6 / bw[d];
		q[d].base[1] = 1e6 / base_bw;
	}
	return 0;
}

static int mape_field(json_t *o, const char *name, const char *path, double *ret, struct allm_err *err)
{
	char f[48];
	json_t *v = json_object_get(o, name);
	snprintf(f, sizeof(f), "calib_mape.%s", name);
	if (json_is_null(v)) {
		*ret = NAN;
		return 0;
	}
	return get_num(o, name, f, path, 0, false, ret, err);
}

/* Names the last "field": before a parse error, so a truncated or hand-broken
 * file says where it broke in our terms, not only by line and column. */
static void field_before(const char *buf, size_t pos, char *ret, size_t len)
{
	ret[0] = 0;
	for (size_t i = pos; i-- > 0;) {
		if (buf[i] != ':')
			continue;
		size_t e = i;
		while (e > 0 && (buf[e - 1] == ' ' || buf[e - 1] == '\t' || buf[e - 1] == '\n'))
			e--;
		if (e == 0 || buf[e - 1] != '"')
			continue;
		size_t s = e - 1;
		while (s > 0 && buf[s - 1] != '"')
			s--;
		size_t n = ALLM_MIN(e - 1 - s, len - 1);
		memcpy(ret, buf + s, n);
		ret[n] = 0;
		return;
	}
}

static int read_file(const char *path, char **ret, size_t *ret_len, struct allm_err *err)
{
	const char *name;
	char *buf = NULL;
	size_t n = 0;
	int dfd = -1, fd = -1, r;

	if ((r = open_dir(path, &dfd, &name, err)))
		return r == -ENOENT ? allm_err_set(err, -ENOENT, "%s: no profile", path) : r;
	r = allm_file_open_read(dfd, name, &fd, err);
	close(dfd);
	if (r)
		return r == -ENOENT ? allm_err_set(err, -ENOENT, "%s: no profile", path) : with_path(err, r, path);
	buf = allm_malloc(PROFILE_MAX_BYTES + 1);
	if (!buf) {
		close(fd);
		return allm_err_set(err, -ENOMEM, "out of memory");
	}
	while (n <= PROFILE_MAX_BYTES) {
		ssize_t k = read(fd, buf + n, PROFILE_MAX_BYTES + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			close(fd);
			allm_free(buf);
			return allm_err_set(err, -EIO, "%s: read error", path);
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	if (n > PROFILE_MAX_BYTES) {
		allm_free(buf);
		return allm_err_set(err, -EINVAL, "%s: larger than any profile", path);
	}
	buf[n] = 0;
	*ret = buf;
	*ret_len = n;
	return 0;
}

int allm_predictor_load(struct allm_predictor *p, const char *path, struct allm_err *err)
{
	struct allm_pred_lsq rc = p->rc, sw[2] = { p->swap[0], p->swap[1] };
	double bw[2], mrc, msw;
	char at[sizeof(p->calibrated_at)], *buf = NULL;
	size_t len = 0;
	json_t *root = NULL, *o;
	json_error_t je;
	int ret;

	ret = read_file(path, &buf, &len, err);
	if (ret < 0)
		return ret;
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		char field[64];
		field_before(buf, ALLM_MIN((size_t)je.position, len), field, sizeof(field));
		ret = allm_err_set(err, -EINVAL, "%s:%d:%d: invalid JSON%s%s%s: %s", path, je.line, je.column,
				   field[0] ? " (in field \"" : "", field, field[0] ? "\")" : "", je.text);
		goto out;
	}
	if (!json_is_object(root)) {
		ret = allm_err_set(err, -EINVAL, "%s: not a JSON object", path);
		goto out;
	}
	o = json_object_get(root, "version");
	if (!json_is_integer(o) || json_integer_value(o) != PROFILE_VERSION) {
		char what[32];
		snprintf(what, sizeof(what), o ? "is not %d" : "is missing", PROFILE_VERSION);
		ret = bad(err, path, "version", what);
		goto out;
	}
	if ((ret = load_key(root, &p->key, path, err)) < 0 || (ret = load_rc(root, &rc, path, err)) < 0 ||
	    (ret = load_swap(root, sw, bw, path, err)) < 0 ||
	    (ret = get_obj(root, "calib_mape", "calib_mape", path, &o, err)) < 0 ||
	    (ret = mape_field(o, "recompute", path, &mrc, err)) < 0 ||
	    (ret = mape_field(o, "swap", path, &msw, err)) < 0 ||
	    (ret = get_str(root, "calibrated_at", "calibrated_at", path, at, sizeof(at), err)) < 0)
		goto out;

	p->rc = rc;
	p->swap[0] = sw[0];
	p->swap[1] = sw[1];
	p->swap_bw[0] = bw[0];
	p->swap_bw[1] = bw[1];
	p->calib_mape_rc = mrc;
	p->calib_mape_swap = msw;
	memcpy(p->calibrated_at, at, sizeof(at));
	p->calibrated = true;
out:
	json_decref(root);
	allm_free(buf);
	return ret;
}

/* ---- default path ---- */

/* [A-Za-z0-9._-] kept, anything else '_', at most n characters. */
static void sanitise(const char *s, size_t n, char *out)
{
	size_t i = 0;
	for (; s[i] && i < n; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
			  c == '-' || c == '_';
		out[i] = ok ? c : '_';
	}
	out[i] = 0;
	if (out[0] == '.')
		out[0] = '_'; /* no hidden files, no ".." */
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *b = data;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

int allm_predictor_default_path(const struct allm_predictor_key *key, char *ret, size_t len)
{
	char dir[PATH_MAX], model[49], device[33], dtype[9], ints[128];
	int n, r;

	if ((r = allm_shm_cache_dir(dir, sizeof(dir))))
		return r;
	/* the model is often a path: its last component names it */
	char m[sizeof(key->model)];
	snprintf(m, sizeof(m), "%s", key->model);
	size_t ml = strnlen(m, sizeof(m));
	while (ml > 1 && m[ml - 1] == '/')
		m[--ml] = 0;
	const char *base = strrchr(m, '/');
	sanitise(base ? base + 1 : m, 48, model);
	sanitise(key->device, 32, device);
	sanitise(key->dtype, 8, dtype);

	/* the readable part is truncated and lossy: the hash tells keys apart */
	uint64_t h = 0xcbf29ce484222325ULL;
	h = fnv1a(h, key->model, strnlen(key->model, sizeof(key->model)) + 1);
	h = fnv1a(h, key->device, strnlen(key->device, sizeof(key->device)) + 1);
	h = fnv1a(h, key->dtype, strnlen(key->dtype, sizeof(key->dtype)) + 1);
	n = snprintf(ints, sizeof(ints), "%d,%d,%d,%llu,%d", key->n_layers, key->hidden, key->block_size,
		     (unsigned long long)key->block_bytes, key->threads);
	h = fnv1a(h, ints, (size_t)n);

	n = snprintf(ret, len, "%s/%s_%s_%s_%016llx.json", dir, model[0] ? model : "model", device[0] ? device : "dev",
		     dtype, (unsigned long long)h);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return allm_mkdir_p(dir, 0755);
}
