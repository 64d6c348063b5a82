/* Description: engine logits (paged KV, backend ops) match an independent dense reference on random tiny Llama and OPT models and the other families (Mistral's window, Qwen2's biases, Qwen3's q/k norms, Gemma 3's local and global layers, Phi-3's fused matrices, written as transformers saves them), and greedy ids agree over 32 steps with the blocks every layer's window passed given back (their table entries -1), with the reference, SIMD and OpenBLAS CPU paths. */
#include "dense-ref.h"
#include "executor.h"
#include "model-writer.h"
#include "sequence.h"
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int failures;

#define EXPECT(cond, ...) \
	do { \
		if (!(cond)) { \
			failures++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

struct variant {
	const char *name;
	const char *preset;
	int kv_heads; /* 0 = preset */
	int untied;
	int bias;
	int post_ln;
	int proj_dim;
	uint64_t seed;
	/* the other families on the tiny shapes: the architecture (0: the preset's),
	 * a sliding window, which layers are local (every swa_pattern-th global; 0: all
	 * local), and Gemma's local RoPE base and query_pre_attn_scalar */
	enum allm_arch arch;
	int window, swa_pattern;
	float local_theta, qpas;
};

static const struct variant variants[] = {
	{"llama-gqa-untied", "tiny", 2, 1, 0, 0, 0, 11, 0, 0, 0, 0, 0},
	{"llama-tied-bias", "tiny", 0, 0, 1, 0, 0, 12, 0, 0, 0, 0, 0},
	{"opt-pre-ln", "opt-tiny", 0, 0, 0, 0, 0, 13, 0, 0, 0, 0, 0},
	{"opt-post-ln", "opt-tiny", 0, 0, 0, 1, 0, 14, 0, 0, 0, 0, 0},
	{"opt-project-in-out", "opt-tiny", 0, 0, 0, 0, 32, 15, 0, 0, 0, 0, 0},
	{"mistral-window-7", "tiny", 2, 1, 0, 0, 0, 16, ALLM_ARCH_LLAMA, 7, 0, 0, 0},
	{"qwen2-biases", "tiny", 2, 1, 0, 0, 0, 17, ALLM_ARCH_QWEN2, 0, 0, 0, 0},
	{"qwen3-qk-norm", "tiny", 2, 1, 0, 0, 0, 18, ALLM_ARCH_QWEN3, 0, 0, 0, 0},
	{"gemma3-local-global", "tiny", 2, 0, 0, 0, 0, 19, ALLM_ARCH_GEMMA3, 6, 2, 10000.0f, 24.0f},
	{"phi3-fused-window", "tiny", 0, 1, 0, 0, 0, 20, ALLM_ARCH_PHI3, 12, 0, 0, 0},
};

static float max_abs_diff(const float *a, const float *b, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++) {
		float d = fabsf(a[i] - b[i]);
		if (!(d <= m)) /* NaN counts as a mismatch */
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

/* Occupies a few pool blocks with a dummy owner so the sequences under test get
 * scattered, non-contiguous block tables. */
static void scatter(struct allm_kv_cache *kv)
{
	int32_t id;
	for (int i = 0; i < 7; i++)
		allm_block_pool_alloc(&kv->gpu, 999, &id);
	for (int i = 1; i < 7; i += 2)
		allm_block_pool_release(&kv->gpu, 999, i);
}

enum mode { MODE_REFERENCE, MODE_FAST, MODE_BLAS };

static void run_variant(const struct variant *v, const char *tmp, enum mode mode)
{
	char dir[512], eb[512];
	struct allm_err err = {{0}};
	struct allm_model_config cfg;
	allm_backend_t *be = NULL;
	struct allm_model *m = NULL;
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	struct dense_ref *ref = NULL;
	struct allm_seq s1 = {0}, s2 = {0};
	float *el = NULL, *rl = NULL;
	static const char *const tags[] = {"reference", "fast", "openblas"};
	const char *tag = tags[mode];

	snprintf(dir, sizeof(dir), "%s/%s", tmp, v->name);
	if (access(dir, F_OK) != 0) {
		EXPECT(!allm_model_config_preset(v->preset, &cfg, &err), "%s", err.msg);
		if (v->kv_heads)
			cfg.n_kv_heads = v->kv_heads;
		cfg.tie_embeddings = cfg.arch == ALLM_ARCH_OPT || !v->untied;
		if (v->bias)
			cfg.attn_bias = cfg.mlp_bias = true;
		if (v->post_ln)
			cfg.pre_ln = cfg.final_ln = false;
		if (v->proj_dim)
			cfg.embed_proj_dim = v->proj_dim;
		if (v->arch) {
			cfg.arch = v->arch;
			cfg.act = allm_arch_describe(v->arch)->act;
		}
		cfg.sliding_window = v->window;
		cfg.swa_pattern = v->swa_pattern;
		cfg.rope_local_theta = v->local_theta;
		if (v->qpas > 0) {
			cfg.query_scale = 1.0f / sqrtf(v->qpas);
			cfg.rope_theta = 1000000.0f; /* Gemma's global base */
		}
		struct allm_model_write_opts wo = {.seed = v->seed, .dtype = ALLM_DTYPE_F32};
		if (allm_model_write_dir(&cfg, &wo, dir, &err)) {
			EXPECT(0, "%s: write: %s", v->name, err.msg);
			return;
		}
	}
	struct allm_backend_opts bo = {.reference = mode == MODE_REFERENCE,
				       .blas = mode == MODE_BLAS, .n_threads = 2};
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F32};
	if (allm_backend_cpu_create(&bo, &be, &err) || allm_model_load(be, dir, &lo, &m, &err)) {
		EXPECT(0, "%s: load: %s", v->name, err.msg);
		goto out;
	}
	if (dense_ref_load(dir, &ref, eb, sizeof(eb))) {
		EXPECT(0, "%s: dense_ref_load: %s", v->name, eb);
		goto out;
	}
	const struct allm_model_config *c = &m->cfg;
	int32_t V = c->vocab_size;
	struct allm_kv_layout lay = {c->n_layers, c->n_kv_heads, c->head_dim, 16, ALLM_DTYPE_F32};
	EXPECT(!allm_kv_cache_create(be, &lay, 64, 0, &kv, &err), "%s", err.msg);
	EXPECT(!allm_executor_create(m, kv, &ex, &err), "%s", err.msg);
	if (!kv || !ex)
		goto out;
	scatter(kv);
	/* every layer windowed (Mistral's, Phi-3's): the blocks the window passed
	 * go back as the engine gives them back, and attention must not miss them */
	kv->window = allm_model_passed_window(c);

	/* 1. prefill of two prompts of different lengths in one forward, all logits */
	enum { N1 = 21, N2 = 9, STEPS = 32 };
	int32_t p1[N1], p2[N2];
	uint64_t st = v->seed * 77 + 1;
	for (int i = 0; i < N1; i++)
		p1[i] = (int32_t)((st = st * 6364136223846793005ull + 1442695040888963407ull) >> 33) % V;
	for (int i = 0; i < N2; i++)
		p2[i] = (int32_t)((st = st * 6364136223846793005ull + 1442695040888963407ull) >> 33) % V;
	allm_seq_init(&s1, 1, p1, N1);
	allm_seq_init(&s2, 2, p2, N2);
	EXPECT(!allm_seq_reserve(&s1, kv, N1 + STEPS), "reserve");
	EXPECT(!allm_seq_reserve(&s2, kv, N2), "reserve");
	el = malloc(sizeof(float) * (size_t)V * (N1 + N2 + STEPS));
	rl = malloc(sizeof(float) * (size_t)V * (N1 + STEPS));
	struct allm_batch_seq b[2];
	allm_seq_batch_entry(&s1, &b[0]);
	allm_seq_batch_entry(&s2, &b[1]);
	if (allm_executor_forward(ex, b, 2, true, el, &err)) {
		EXPECT(0, "%s: forward: %s", v->name, err.msg);
		goto out;
	}
	s1.n_cached = N1;
	s2.n_cached = N2;
	allm_seq_pass_window(&s1, kv);
	allm_seq_pass_window(&s2, kv);
	EXPECT(!dense_ref_forward(ref, p1, N1, rl), "dense forward");
	float d1 = max_abs_diff(el, rl, (size_t)N1 * V);
	EXPECT(!dense_ref_forward(ref, p2, N2, rl), "dense forward");
	float d2 = max_abs_diff(el + (size_t)N1 * V, rl, (size_t)N2 * V);
	EXPECT(d1 <= 1e-4f && d2 <= 1e-4f, "%s/%s: prefill logits differ: %g %g", v->name, tag, d1, d2);

	/* 2. greedy decode of s1, one token per step, against the dense greedy */
	int32_t ref_ids[STEPS], eng_ids[STEPS];
	EXPECT(!dense_ref_greedy(ref, p1, N1, STEPS, ref_ids), "dense greedy");
	int32_t next = allm_argmax(el + (size_t)(N1 - 1) * V, V);
	float dmax = 0;
	for (int i = 0; i < STEPS; i++) {
		eng_ids[i] = next;
		allm_seq_append(&s1, next);
		if (i == STEPS - 1)
			break;
		allm_seq_batch_entry(&s1, &b[0]);
		if (allm_executor_forward(ex, b, 1, false, el, &err)) {
			EXPECT(0, "%s: decode: %s", v->name, err.msg);
			goto out;
		}
		s1.n_cached = s1.n_tokens;
		allm_seq_pass_window(&s1, kv);
		next = allm_argmax(el, V);
	}
	/* the window passed blocks of s1 (every layer windowed) or none (not) */
	int32_t want_gone = kv->window > 0 ? (s1.n_tokens - 1 + 1 - kv->window) / 16 : 0;
	EXPECT(s1.n_gone == want_gone && allm_block_pool_used(&kv->gpu) == 4 + allm_seq_held(&s1) + allm_seq_held(&s2),
	       "%s/%s: %d blocks gone (want %d), %d used", v->name, tag, s1.n_gone, want_gone,
	       allm_block_pool_used(&kv->gpu));
	for (int i = 0; i < STEPS; i++)
		EXPECT(eng_ids[i] == ref_ids[i], "%s/%s: greedy step %d: engine %d, reference %d",
		       v->name, tag, i, eng_ids[i], ref_ids[i]);
	/* 3. logits of the last decode step against a dense forward of the whole text */
	EXPECT(!dense_ref_forward(ref, s1.tokens, s1.n_tokens - 1, rl), "dense forward");
	dmax = max_abs_diff(el, rl + (size_t)(s1.n_tokens - 2) * V, (size_t)V);
	EXPECT(dmax <= 1e-4f, "%s/%s: decode logits differ by %g", v->name, tag, dmax);
	printf("%-20s %-9s prefill max|d| %.2e / %.2e, decode max|d| %.2e, %d blocks passed, 32 greedy ids %s\n",
	       v->name, tag, d1, d2, dmax, s1.n_gone,
	       memcmp(eng_ids, ref_ids, sizeof(eng_ids)) ? "DIFFER" : "identical");
out:
	free(el);
	free(rl);
	allm_seq_fini(&s1, kv);
	allm_seq_fini(&s2, kv);
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	allm_model_free(m);
	allm_backend_destroy(be);
	dense_ref_free(ref);
}

int main(void)
{
	char tmp[] = "/tmp/allm-evd-XXXXXX";
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(variants); i++) {
		run_variant(&variants[i], tmp, MODE_REFERENCE);
		run_variant(&variants[i], tmp, MODE_FAST);
		run_variant(&variants[i], tmp, MODE_BLAS);
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd)) {
	}
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
