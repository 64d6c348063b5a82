/* Workloads: the seeded synthetic generator and the JSONL reader/writer. The
 * generator's exact definition lives in workload.h; keep the two in step. */
#include "workload.h"

#include <adaptivellm/params.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WL_MAX_INPUT 2048 /* the README's clamp on synthetic input lengths */

/* Stream separators, documented in workload.h: ASCII of the stream's name. */
#define STREAM_LENGTHS 0x6c656e677468735full  /* "lengths_" */
#define STREAM_OUTPUTS 0x6f7574707574735full  /* "outputs_" */
#define STREAM_ARRIVALS 0x6172726976616c73ull /* "arrivals" */
#define STREAM_PROMPT 0x70726f6d70745f69ull   /* "prompt_i" */
#define GOLDEN 0x9e3779b97f4a7c15ull

/* Box–Muller, cosine branch only: simpler to state than caching the sine half. */
static double rng_normal(struct allm_rng *r)
{
	double u1 = allm_rng_unit(r), u2 = allm_rng_unit(r);
	return sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
}

struct wl_shape {
	const char *name;
	double mean; /* mean input tokens of the original data set */
	double sigma;
};

static const struct wl_shape wl_shapes[] = {
	{"chatbot", 17.02, 0.6},
	{"alpaca", 19.66, 0.6},
	{"summary", 340.48, 0.9},
};

static void wl_set_name(struct allm_workload *w, const char *name)
{
	snprintf(w->name, sizeof(w->name), "%s", name);
}

void allm_workload_free(struct allm_workload *w)
{
	if (!w)
		return;
	if (w->reqs) {
		for (int64_t i = 0; i < w->n; i++) {
			allm_free(w->reqs[i].prompt_ids);
			allm_free(w->reqs[i].prompt_text);
		}
	}
	allm_free(w->reqs);
	allm_free(w);
}

/* Returns true if the request had to be clipped. */
static bool clip_request(struct allm_wl_request *q, int32_t max_context)
{
	if (max_context <= 0 || q->n_prompt <= 0)
		return false;
	if ((int64_t)q->n_prompt + q->max_tokens <= max_context)
		return false;
	/* The input goes first: the benchmark is about generating max_tokens. */
	int64_t room = (int64_t)max_context - q->max_tokens;
	q->n_prompt = (int32_t)(room >= 1 ? ALLM_MIN(room, (int64_t)q->n_prompt) : 1);
	if ((int64_t)q->n_prompt + q->max_tokens > max_context)
		q->max_tokens = max_context - q->n_prompt;
	return true;
}

int allm_workload_fit_context(struct allm_workload *w, int32_t max_context)
{
	if (max_context == 1)
		return -EINVAL;
	for (int64_t i = 0; i < w->n; i++)
		if (clip_request(&w->reqs[i], max_context))
			w->n_clipped++;
	return 0;
}

static void set_arrivals(struct allm_workload *w, double rate, uint64_t seed)
{
	struct allm_rng r;
	allm_rng_seed(&r, seed ^ STREAM_ARRIVALS);
	double t = 0.0;
	for (int64_t i = 0; i < w->n; i++) {
		if (i > 0)
			t += -log(1.0 - allm_rng_unit(&r)) / rate;
		w->reqs[i].arrival_s = t;
	}
}

static int check_common(const struct allm_wl_opts *o, struct allm_err *err)
{
	if (o->max_output < 1)
		return allm_err_set(err, -EINVAL, "max_output must be >= 1 (got %d)", o->max_output);
	if (o->n < 0)
		return allm_err_set(err, -EINVAL, "-n must be >= 0 (got %lld)", (long long)o->n);
	if (!(o->rate >= 0.0) || isinf(o->rate))
		return allm_err_set(err, -EINVAL, "rate must be a finite number >= 0 (got %g)", o->rate);
	if (o->max_context == 1)
		return allm_err_set(err, -EINVAL, "max_context 1 leaves no room for a prompt and an output");
	if (o->min_id < 0)
		return allm_err_set(err, -EINVAL, "min_id must be >= 0 (got %d)", o->min_id);
	return 0;
}

static int synth_create(const struct allm_wl_opts *o, const struct wl_shape *sh, bool uniform_out,
			struct allm_workload **ret, struct allm_err *err)
{
	int rc;
	struct allm_workload *w = NULL;

	if (o->n < 1)
		return allm_err_set(err, -EINVAL, "synthetic workload '%s' needs -n >= 1", sh->name);
	if (o->vocab_size <= o->min_id)
		return allm_err_set(err, -EINVAL, "vocab_size %d leaves no ids at or above min_id %d",
				    o->vocab_size, o->min_id);
	size_t bytes;
	if (!allm_mul_size((size_t)o->n, sizeof(*w->reqs), &bytes))
		return allm_err_set(err, -ENOMEM, "-n %lld is too large", (long long)o->n);

	w = allm_calloc(1, sizeof(*w));
	if (!w || !(w->reqs = allm_calloc((size_t)o->n, sizeof(*w->reqs)))) {
		rc = allm_err_set(err, -ENOMEM, "out of memory for %lld requests", (long long)o->n);
		goto fail;
	}
	w->n = o->n;
	wl_set_name(w, sh->name);

	struct allm_rng lens, outs;
	allm_rng_seed(&lens, o->seed ^ STREAM_LENGTHS);
	allm_rng_seed(&outs, o->seed ^ STREAM_OUTPUTS);
	double mu = log(sh->mean) - sh->sigma * sh->sigma / 2.0;
	uint64_t span = (uint64_t)(o->vocab_size - o->min_id);

	for (int64_t i = 0; i < w->n; i++) {
		struct allm_wl_request *q = &w->reqs[i];
		double len = round(exp(mu + sh->sigma * rng_normal(&lens)));
		q->index = i;
		q->n_prompt = (int32_t)(len < 1.0 ? 1.0 : len > WL_MAX_INPUT ? WL_MAX_INPUT : len);
		q->max_tokens = uniform_out ? 1 + (int32_t)(allm_rng_unit(&outs) * o->max_output)
					    : o->max_output;
		if (clip_request(q, o->max_context))
			w->n_clipped++;

		q->prompt_ids = allm_malloc((size_t)q->n_prompt * sizeof(int32_t));
		if (!q->prompt_ids) {
			rc = allm_err_set(err, -ENOMEM, "out of memory for prompt %lld", (long long)i);
			goto fail;
		}
		struct allm_rng ids;
		allm_rng_seed(&ids, o->seed ^ STREAM_PROMPT ^ ((uint64_t)i * GOLDEN));
		for (int32_t k = 0; k < q->n_prompt; k++)
			q->prompt_ids[k] = o->min_id + (int32_t)(allm_rng_next(&ids) % span);
	}
	if (o->rate > 0.0)
		set_arrivals(w, o->rate, o->seed);
	*ret = w;
	return 0;
fail:
	allm_workload_free(w);
	return rc;
}

/* Fills q from one parsed JSONL object; messages are prefixed with where by the caller. */
static int parse_line(json_t *obj, const struct allm_wl_opts *o, struct allm_wl_request *q,
		      char *why, size_t why_len)
{
	if (!json_is_object(obj)) {
		snprintf(why, why_len, "expected a JSON object");
		return -EINVAL;
	}
	json_t *ids = json_object_get(obj, "prompt_ids");
	json_t *text = json_object_get(obj, "prompt");
	json_t *mt = json_object_get(obj, "max_tokens");
	json_t *arr = json_object_get(obj, "arrival_s");

	if (!ids && !text) {
		snprintf(why, why_len, "needs \"prompt\" or \"prompt_ids\"");
		return -EINVAL;
	}
	if (text && !json_is_string(text)) {
		snprintf(why, why_len, "\"prompt\" must be a string");
		return -EINVAL;
	}
	if (ids) {
		size_t n = json_array_size(ids);
		if (!json_is_array(ids) || n == 0 || n > INT32_MAX) {
			snprintf(why, why_len, "\"prompt_ids\" must be a non-empty array of ids");
			return -EINVAL;
		}
		q->prompt_ids = allm_malloc(n * sizeof(int32_t));
		if (!q->prompt_ids) {
			snprintf(why, why_len, "out of memory for %zu ids", n);
			return -ENOMEM;
		}
		for (size_t k = 0; k < n; k++) {
			json_t *v = json_array_get(ids, k);
			json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
			if (!json_is_integer(v) || id < 0 || (o->vocab_size > 0 && id >= o->vocab_size)) {
				snprintf(why, why_len, "prompt_ids[%zu] is not an id in [0, %d)", k,
					 o->vocab_size);
				return -EINVAL;
			}
			q->prompt_ids[k] = (int32_t)id;
		}
		q->n_prompt = (int32_t)n;
	}
	if (text) {
		size_t len = strlen(json_string_value(text)) + 1;
		if (!(q->prompt_text = allm_malloc(len))) {
			snprintf(why, why_len, "out of memory");
			return -ENOMEM;
		}
		memcpy(q->prompt_text, json_string_value(text), len);
	}
	q->max_tokens = o->max_output;
	if (mt) {
		/* the request parameters' table holds its range (params.h) */
		const struct allm_param_desc *d = allm_param_find("max_tokens");
		char range[48];
		if (!json_is_integer(mt) || !allm_param_valid(d, (double)json_integer_value(mt))) {
			snprintf(why, why_len, "\"max_tokens\" must be an integer %s",
				 allm_param_range_text(d, range, sizeof(range)));
			return -EINVAL;
		}
		q->max_tokens = (int32_t)json_integer_value(mt);
	}
	if (arr) {
		double v = json_is_number(arr) ? json_number_value(arr) : -1.0;
		if (!(v >= 0.0) || isinf(v)) {
			snprintf(why, why_len, "\"arrival_s\" must be a number >= 0");
			return -EINVAL;
		}
		q->arrival_s = v;
	}
	return 0;
}

static int file_create(const struct allm_wl_opts *o, FILE *f, struct allm_workload **ret,
		       struct allm_err *err)
{
	const char *path = o->name_or_file;
	struct allm_workload *w = NULL;
	char *line = NULL;
	size_t line_cap = 0, cap = 0;
	int64_t lineno = 0;
	int rc;

	w = allm_calloc(1, sizeof(*w));
	if (!w) {
		rc = allm_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	const char *base = strrchr(path, '/');
	wl_set_name(w, base ? base + 1 : path);

	ssize_t len;
	while ((o->n == 0 || w->n < o->n) && (len = getline(&line, &line_cap, f)) >= 0) {
		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		if ((size_t)w->n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct allm_wl_request *nr = allm_realloc(w->reqs, ncap * sizeof(*nr));
			if (!nr) {
				rc = allm_err_set(err, -ENOMEM, "%s:%lld: out of memory", path,
						  (long long)lineno);
				goto out;
			}
			memset(nr + cap, 0, (ncap - cap) * sizeof(*nr));
			w->reqs = nr;
			cap = ncap;
		}
		struct allm_wl_request *q = &w->reqs[w->n++];
		q->index = w->n - 1;

		json_error_t jerr;
		json_t *obj = json_loadb(line, (size_t)len, 0, &jerr);
		if (!obj) {
			rc = allm_err_set(err, -EINVAL, "%s:%lld: malformed JSON: %s", path,
					  (long long)lineno, jerr.text);
			goto out;
		}
		char why[160];
		rc = parse_line(obj, o, q, why, sizeof(why));
		json_decref(obj);
		if (rc < 0) {
			allm_err_set(err, rc, "%s:%lld: %s", path, (long long)lineno, why);
			goto out;
		}
		if (w->n > 1 && q->arrival_s < q[-1].arrival_s && o->rate == 0.0) {
			rc = allm_err_set(err, -EINVAL, "%s:%lld: arrival_s %g is before the previous line's %g",
					  path, (long long)lineno, q->arrival_s, q[-1].arrival_s);
			goto out;
		}
		if (clip_request(q, o->max_context))
			w->n_clipped++;
	}
	if (ferror(f)) {
		rc = allm_err_set(err, -EIO, "%s: read error", path);
		goto out;
	}
	if (w->n == 0) {
		rc = allm_err_set(err, -EINVAL, "%s: no requests in the file", path);
		goto out;
	}
	if (o->rate > 0.0)
		set_arrivals(w, o->rate, o->seed);
	*ret = w;
	w = NULL;
	rc = 0;
out:
	free(line); /* getline's buffer comes from malloc */
	allm_workload_free(w);
	return rc;
}

int allm_workload_create(const struct allm_wl_opts *o, struct allm_workload **ret,
			 struct allm_err *err)
{
	int rc = check_common(o, err);
	if (rc < 0)
		return rc;
	bool uniform_out = false;
	if (o->output_dist && *o->output_dist && strcmp(o->output_dist, "fixed") != 0) {
		if (strcmp(o->output_dist, "uniform") != 0)
			return allm_err_set(err, -EINVAL, "unknown output distribution '%s' (fixed, uniform)",
					    o->output_dist);
		uniform_out = true;
	}
	const char *name = o->name_or_file ? o->name_or_file : "";
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(wl_shapes); i++)
		if (strcmp(name, wl_shapes[i].name) == 0)
			return synth_create(o, &wl_shapes[i], uniform_out, ret, err);

	FILE *f = fopen(name, "r");
	if (!f) {
		int e = errno;
		if (e == ENOENT)
			return allm_err_set(err, -ENOENT,
					    "unknown workload '%s': not one of chatbot, alpaca, summary, "
					    "and no such file", name);
		return allm_err_set(err, -e, "workload file '%s': %s", name, strerror(e));
	}
	rc = file_create(o, f, ret, err);
	fclose(f);
	return rc;
}

static json_t *request_json(const struct allm_wl_request *q)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	if (q->n_prompt > 0 && q->prompt_ids) {
		json_t *a = json_array();
		bad |= !a;
		for (int32_t k = 0; a && k < q->n_prompt; k++)
			bad |= json_array_append_new(a, json_integer(q->prompt_ids[k]));
		bad |= json_object_set_new(o, "prompt_ids", a);
	} else {
		bad |= json_object_set_new(o, "prompt", json_string(q->prompt_text ? q->prompt_text : ""));
	}
	bad |= json_object_set_new(o, "max_tokens", json_integer(q->max_tokens));
	bad |= json_object_set_new(o, "arrival_s", json_real(q->arrival_s));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int allm_workload_write_jsonl(const struct allm_workload *w, const char *path,
			      struct allm_err *err)
{
	int rc = 0;
	FILE *f = fopen(path, "w");
	if (!f)
		return allm_err_set(err, -errno, "%s: %s", path, strerror(errno));
	for (int64_t i = 0; i < w->n; i++) {
		json_t *o = request_json(&w->reqs[i]);
		if (!o) {
			rc = allm_err_set(err, -ENOMEM, "%s: out of memory at request %lld", path,
					  (long long)i);
			goto out;
		}
		/* 17 digits: doubles (arrival_s) must read back bit-exact for a replay. */
		int r = json_dumpf(o, f, JSON_COMPACT | JSON_REAL_PRECISION(17));
		json_decref(o);
		if (r < 0 || fputc('\n', f) == EOF) {
			rc = allm_err_set(err, -EIO, "%s: write failed", path);
			goto out;
		}
	}
out:
	if (fclose(f) != 0 && rc == 0)
		rc = allm_err_set(err, -errno, "%s: %s", path, strerror(errno));
	return rc;
}
