/* Description: every architecture beside Llama/OPT (qwen2: q/k/v biases, qwen3: per-head q/k norms, gemma3: GELU-tanh MLP, sandwich norms, scaled embeddings, local sliding-window layers with their own RoPE base beside a global one, phi3: fused QKV and gate/up, also as Q8_0 blocks) on a tiny random-weight model, loaded from its GGUF file and from the same weights as a Hugging Face directory, against llama.cpp's logits on the GGUF file (tests/data/archs/ARCH/reference.json, made by make-models.py there): every prompt position's logits and each of 12 greedy decode steps' within TOL, greedy ids equal, on the reference and fast CPU paths. Usage: test-archs DATA_DIR (tests/data/archs). */
#include "executor.h"
#include "model.h"
#include "sampler.h"
#include "sequence.h"
#include "test-check.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp runs the same f32 weights with an f32 K/V cache: what differs is the
 * order of its sums and ggml's GELU, which looks its result up in an f16 table
 * (Gemma); measured: up to 1.3e-5 without GELU, 3.1e-3 with it, on logits of range
 * ~10. A wrong part (a missed bias, norm, window or RoPE base) moves them by
 * tenths. */
#define TOL 1e-4
#define TOL_GELU 1e-2
/* a greedy id may differ only where llama.cpp's own top two are closer than this */
#define NEAR_TIE (2 * tol)

/* Q8_0 blocks: llama.cpp rounds the activations to 8-bit blocks (Q8_0 x Q8_0), the
 * engine's reference path multiplies them in f32 (its fast path rounds them too):
 * measured 0.38 (fast 0.21) on logits of range +-14 -- this tiny random model is
 * touchy: the weights' own rounding moves llama.cpp's logits by 0.55. A wrong
 * split of the fused rows moves them by several logits (the f32 phi3 above checks
 * the split at 1e-4); blocks_vs_f32 checks the blocks run as stored exactly. */
#define TOL_Q8_0 0.75

static const struct {
	const char *dir, *arch;
	bool hf; /* an hf/ twin */
	double tol;
} models[] = {
	{"qwen2", "qwen2", true, TOL},
	{"qwen3", "qwen3", true, TOL},
	{"gemma3", "gemma3", true, TOL_GELU},
	{"phi3", "phi3", true, TOL},
	/* its fused matrices as Q8_0 blocks, split by rows at load, run as stored */
	{"phi3-q8_0", "phi3", false, TOL_Q8_0},
};

static float *floats(json_t *rows, size_t *n_rows, size_t cols)
{
	*n_rows = json_array_size(rows);
	float *v = malloc(*n_rows * cols * sizeof(float) + 1);
	for (size_t r = 0; r < *n_rows; r++)
		for (size_t c = 0; c < cols; c++)
			v[r * cols + c] = (float)json_number_value(json_array_get(json_array_get(rows, r), c));
	return v;
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		m = d > m || isnan(d) ? (isnan(d) ? INFINITY : d) : m;
	}
	return m;
}

static void run(const char *arch, const char *model, const char *what, json_t *ref, bool reference,
		double tol)
{
	struct allm_err err = {{0}};
	allm_backend_t *be = NULL;
	struct allm_model *m = NULL;
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	struct allm_seq s = {0};
	float *got = NULL, *want = NULL, *steps = NULL;
	struct allm_backend_opts bo = {.reference = reference, .n_threads = 2};
	/* a GGUF file's own types (its Q8_0 blocks as stored), f32 otherwise */
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F32, .file_types = true};
	const char *tag = reference ? "reference" : "fast";
	if (allm_backend_cpu_create(&bo, &be, &err) || allm_model_load(be, model, &lo, &m, &err)) {
		CHECK(0, "%s %s: load: %s", arch, what, err.msg);
		goto out;
	}
	CHECK(!strcmp(allm_arch_name(m->cfg.arch), arch), "%s %s: loaded as %s", arch, what,
	      allm_arch_name(m->cfg.arch));
	if (strstr(what, "q8_0"))
		CHECK(m->layers[0].wq_dt == ALLM_DTYPE_Q8_0 && m->layers[0].w_up_dt == ALLM_DTYPE_Q8_0,
		      "%s: the fused matrices are not the file's Q8_0 blocks", what);
	int32_t V = m->cfg.vocab_size;
	json_t *jp = json_object_get(ref, "prompt"), *jg = json_object_get(ref, "greedy");
	json_t *jm = json_object_get(ref, "margins");
	size_t n = json_array_size(jp), n_gen = json_array_size(jg), nr, ns;
	int32_t prompt[64];
	for (size_t i = 0; i < n && i < 64; i++)
		prompt[i] = (int32_t)json_integer_value(json_array_get(jp, i));
	want = floats(json_object_get(ref, "logits"), &nr, (size_t)V);
	steps = floats(json_object_get(ref, "step_logits"), &ns, (size_t)V);
	CHECK(nr == n && ns == n_gen && n <= 64, "%s: reference.json rows", arch);
	struct allm_kv_layout lay = {m->cfg.n_layers, m->cfg.n_kv_heads, m->cfg.head_dim, 4, ALLM_DTYPE_F32};
	if (allm_kv_cache_create(be, &lay, 64, 0, &kv, &err) || allm_executor_create(m, kv, &ex, &err)) {
		CHECK(0, "%s %s: %s", arch, what, err.msg);
		goto out;
	}
	got = malloc(sizeof(float) * (size_t)V * (n + 1));
	allm_seq_init(&s, 1, prompt, (int32_t)n);
	CHECK(!allm_seq_reserve(&s, kv, (int32_t)(n + n_gen)), "reserve");
	struct allm_batch_seq b;
	allm_seq_batch_entry(&s, &b);
	if (allm_executor_forward(ex, &b, 1, true, got, &err)) {
		CHECK(0, "%s %s: forward: %s", arch, what, err.msg);
		goto out;
	}
	s.n_cached = s.n_tokens;
	double dp = max_diff(got, want, n * (size_t)V), ds = 0;
	CHECK(dp <= tol, "%s %s/%s: prompt logits differ from llama.cpp's by %g", arch, what, tag, dp);
	/* greedy, one token a step through the paged cache (blocks of 4 positions: the
	 * window of 5 spans blocks) */
	int same = 0;
	memcpy(got, got + (n - 1) * (size_t)V, sizeof(float) * (size_t)V);
	for (size_t k = 0; k < n_gen; k++) {
		ds = fmax(ds, max_diff(got, steps + k * (size_t)V, (size_t)V));
		int32_t id = allm_argmax(got, V), w = (int32_t)json_integer_value(json_array_get(jg, k));
		double margin = json_number_value(json_array_get(jm, k));
		CHECK(id == w || margin < NEAR_TIE, "%s %s/%s: greedy step %zu: %d, llama.cpp %d (margin %g)",
		      arch, what, tag, k, id, w, margin);
		same += id == w;
		allm_seq_append(&s, w); /* teacher-forced: llama.cpp's id, so the steps compare */
		allm_seq_batch_entry(&s, &b);
		if (k + 1 < n_gen && allm_executor_forward(ex, &b, 1, false, got, &err)) {
			CHECK(0, "%s %s: decode: %s", arch, what, err.msg);
			goto out;
		}
		s.n_cached = s.n_tokens;
	}
	CHECK(ds <= tol, "%s %s/%s: decode logits differ from llama.cpp's by %g", arch, what, tag, ds);
	printf("%-7s %-10s %-9s prompt max|d| %.2e, decode max|d| %.2e, greedy %d/%zu equal\n", arch,
	       what, tag, dp, ds, same, n_gen);
out:
	free(got);
	free(want);
	free(steps);
	if (kv)
		allm_seq_fini(&s, kv);
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	allm_model_free(m);
	allm_backend_destroy(be);
}

/* Every prompt position's logits of model (reference CPU path), loaded with lo; NULL
 * on failure. */
static float *prompt_logits(const char *model, const struct allm_model_load_opts *lo, json_t *ref,
			    size_t *ret_n, int32_t *ret_v)
{
	struct allm_err err = {{0}};
	allm_backend_t *be = NULL;
	struct allm_model *m = NULL;
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	float *out = NULL;
	struct allm_backend_opts bo = {.reference = true};
	json_t *jp = json_object_get(ref, "prompt");
	size_t n = json_array_size(jp);
	int32_t prompt[64], bt[16];
	for (size_t i = 0; i < n && i < 64; i++)
		prompt[i] = (int32_t)json_integer_value(json_array_get(jp, i));
	for (int32_t i = 0; i < 16; i++)
		bt[i] = i;
	if (n > 64 || allm_backend_cpu_create(&bo, &be, &err) || allm_model_load(be, model, lo, &m, &err))
		goto out;
	struct allm_kv_layout lay = {m->cfg.n_layers, m->cfg.n_kv_heads, m->cfg.head_dim, 4, ALLM_DTYPE_F32};
	if (allm_kv_cache_create(be, &lay, 16, 0, &kv, &err) || allm_executor_create(m, kv, &ex, &err))
		goto out;
	out = malloc(sizeof(float) * n * (size_t)m->cfg.vocab_size);
	struct allm_batch_seq b = {prompt, (int32_t)n, 0, bt, 16};
	if (allm_executor_forward(ex, &b, 1, true, out, &err)) {
		free(out);
		out = NULL;
	}
	*ret_n = n;
	*ret_v = m->cfg.vocab_size;
out:
	if (!out)
		CHECK(0, "%s: %s", model, err.msg);
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	allm_model_free(m);
	allm_backend_destroy(be);
	return out;
}

/* The file's blocks run as stored against the same file dequantized into f32 at
 * load: the same weight values, both in f32 arithmetic on the reference path. */
static void blocks_vs_f32(const char *model, json_t *ref)
{
	struct allm_model_load_opts blocks = {.wdtype = ALLM_DTYPE_F32, .file_types = true};
	struct allm_model_load_opts f32 = {.wdtype = ALLM_DTYPE_F32};
	size_t n = 0;
	int32_t V = 0;
	float *a = prompt_logits(model, &blocks, ref, &n, &V), *b = prompt_logits(model, &f32, ref, &n, &V);
	if (a && b) {
		double d = max_diff(a, b, n * (size_t)V);
		printf("%s: its Q8_0 blocks as stored vs dequantized at load: max|d| %.2e\n", model, d);
		CHECK(d <= 1e-4, "%s: blocks as stored differ from their f32 values by %g", model, d);
	}
	free(a);
	free(b);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test-archs DATA_DIR\n");
		return 2;
	}
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(models); i++) {
		char path[4096], gguf[4200], hf[4200];
		json_error_t je;
		snprintf(path, sizeof(path), "%s/%s/reference.json", argv[1], models[i].dir);
		snprintf(gguf, sizeof(gguf), "%s/%s/model.gguf", argv[1], models[i].dir);
		snprintf(hf, sizeof(hf), "%s/%s/hf", argv[1], models[i].dir);
		json_t *ref = json_load_file(path, 0, &je);
		if (!ref) {
			CHECK(0, "%s: %s", path, je.text);
			continue;
		}
		for (int reference = 1; reference >= 0; reference--) {
			run(models[i].arch, gguf, models[i].hf ? "gguf" : models[i].dir, ref, reference, models[i].tol);
			if (models[i].hf)
				run(models[i].arch, hf, "hf", ref, reference, models[i].tol);
		}
		if (!models[i].hf)
			blocks_vs_f32(gguf, ref);
		json_decref(ref);
	}
	if (n_fail)
		fprintf(stderr, "%d failure(s)\n", n_fail);
	return n_fail ? 1 : 0;
}
