/* Description: Llama models from GGUF files (engined/model/gguf-*.c) against the Hugging Face directories they were converted from (tests/gguf-write.c, llama.cpp's conventions): F32 / F16 / BF16 files load into exactly the weights of the directory in the same storage dtype (the query and key rows of every head back in Hugging Face's order, biases too, tied and untied heads) and give bit-identical logits, while a file whose Q/K rows were not permuted gives other logits (RoPE rotates the wrong pairs); Q8_0 / Q4_0 / Q4_1 files load into ggml's reference dequantization of the same weights and stay close in logits, also with --quant int8; and each kind of model this engine cannot run or a broken file (another architecture, a missing key or tensor, a wrong shape, an unsupported tensor type, a tensor the graph does not read, RoPE frequency factors, partial rotary, a vocabulary that disagrees) fails with one message naming it. */
#include "executor.h"
#include "gguf-model.h"
#include "gguf-write.h"
#include "model-writer.h"
#include "test-check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static allm_backend_t *be;
static char tmp[] = "/tmp/test-gguf-model-XXXXXX";

static struct allm_model *load(const char *path, enum allm_dtype dt)
{
	struct allm_err err = {{0}};
	struct allm_model_load_opts lo = {.wdtype = dt};
	struct allm_model *m = NULL;
	if (allm_model_load(be, path, &lo, &m, &err)) {
		CHECK(0, "load %s as %s: %s", path, allm_dtype_name(dt), err.msg);
		return NULL;
	}
	return m;
}

/* Every position's logits of ids[0..n) in one prefill (a fresh KV cache). */
static float *logits_of(struct allm_model *m, const int32_t *ids, int32_t n)
{
	struct allm_err err = {{0}};
	const struct allm_model_config *c = &m->cfg;
	struct allm_kv_layout lay = {c->n_layers, c->n_kv_heads, c->head_dim, 16, ALLM_DTYPE_F32};
	int32_t nb = (n + 15) / 16, bt[64];
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	float *out = malloc((size_t)n * (size_t)c->vocab_size * sizeof(float));
	for (int32_t i = 0; i < nb; i++)
		bt[i] = i;
	struct allm_batch_seq s = {ids, n, 0, bt, nb};
	if (allm_kv_cache_create(be, &lay, nb, 0, &kv, &err) || allm_executor_create(m, kv, &ex, &err) ||
	    allm_executor_forward(ex, &s, 1, true, out, &err)) {
		CHECK(0, "forward: %s", err.msg);
		free(out);
		out = NULL;
	}
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	return out;
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double d = 0;
	for (size_t i = 0; i < n; i++)
		d = fmax(d, fabs((double)a[i] - b[i]));
	return d;
}

static const int32_t ids[] = {1, 403, 407, 261, 378, 263, 290, 470, 345, 276, 304, 274, 258, 390};
#define N_IDS ((int32_t)(sizeof(ids) / sizeof(ids[0])))

static void convert(const char *dir, const char *out, uint32_t type, bool no_permute)
{
	char err[512];
	struct gguf_convert_opts o = {.type = type, .no_permute = no_permute};
	CHECK(!gguf_convert_dir(dir, out, &o, err, sizeof(err)), "convert %s: %s", dir, err);
}

/* The same model from a directory and from its GGUF conversion, storage dt. */
static void same_weights(const char *what, const char *dir, const char *gguf, enum allm_dtype dt)
{
	struct allm_model *a = load(dir, dt), *b = load(gguf, dt);
	if (a && b) {
		CHECK(a->arena_bytes == b->arena_bytes && !memcmp(a->arena, b->arena, a->arena_bytes),
		      "%s: the weights differ from the directory's", what);
		float *la = logits_of(a, ids, N_IDS), *lb = logits_of(b, ids, N_IDS);
		CHECK(la && lb && max_diff(la, lb, (size_t)N_IDS * (size_t)a->cfg.vocab_size) == 0,
		      "%s: logits differ", what);
		free(la);
		free(lb);
	}
	allm_model_free(a);
	allm_model_free(b);
}

/* Q8_0 / Q4_0 / Q4_1: the loaded weights are ggml's dequantization of the quantized
 * directory weights (matrices whose rows are whole blocks; the rest stay f32). */
static void quantized(const char *dir, uint32_t type, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.gguf", tmp, name);
	convert(dir, path, type, false);
	struct allm_model *a = load(dir, ALLM_DTYPE_F32), *b = load(path, ALLM_DTYPE_F32);
	struct allm_weight_spec *sa = NULL, *sb = NULL;
	size_t na = 0, nb = 0;
	if (!a || !b || allm_model_weight_specs(a, &sa, &na) || allm_model_weight_specs(b, &sb, &nb)) {
		CHECK(0, "%s: no model", name);
		goto out;
	}
	int n_quant = 0, bad = 0;
	for (size_t i = 0; i < na; i++) {
		int64_t rows = sa[i].n_dims == 2 ? sa[i].shape[0] : 1;
		int64_t cols = sa[i].n_dims == 2 ? sa[i].shape[1] : sa[i].shape[0];
		const float *x = *sa[i].slot, *y = *sb[i].slot;
		bool q = sa[i].n_dims == 2 && cols % 32 == 0;
		float *want = malloc((size_t)cols * sizeof(float));
		uint8_t *blk = malloc((size_t)cols * 2 + 64);
		n_quant += q;
		for (int64_t r = 0; r < rows; r++) {
			if (q) {
				gguf_quantize(type, x + r * cols, cols, blk);
				gguf_dequantize_ref(type, blk, cols, want);
			} else {
				memcpy(want, x + r * cols, (size_t)cols * sizeof(float));
			}
			for (int64_t c = 0; c < cols; c++)
				if (fabsf(want[c] - y[r * cols + c]) > 1e-6f * fabsf(want[c]) + 1e-7f && bad++ < 3)
					fprintf(stderr, "%s %s[%lld][%lld]: %g, want %g\n", name, sa[i].name, (long long)r,
						(long long)c, y[r * cols + c], want[c]);
		}
		free(want);
		free(blk);
	}
	CHECK(bad == 0 && n_quant > 10, "%s: %d weights differ from ggml's dequantization (%d matrices quantized)",
	      name, bad, n_quant);
	float *la = logits_of(a, ids, N_IDS), *lb = logits_of(b, ids, N_IDS);
	if (la && lb) {
		double d = max_diff(la, lb, (size_t)N_IDS * (size_t)a->cfg.vocab_size);
		printf("%s: max |logit - f32 logit| = %.4f over %d positions\n", name, d, N_IDS);
		/* a sanity bound (the exact check is the weights' above): 4-bit blocks of a
		 * 64-wide model move its logits by a few units (q4_0 4.6, q4_1 4.2) */
		CHECK(d > 0 && d < (type == ALLM_GGML_Q8_0 ? 0.5 : 10.0), "%s: logits %g from f32", name, d);
	}
	free(la);
	free(lb);
	if (type == ALLM_GGML_Q8_0) { /* and stored as int8 blocks (--quant int8) */
		struct allm_model *c = load(path, ALLM_DTYPE_Q8);
		float *lc = c ? logits_of(c, ids, N_IDS) : NULL;
		float *l32 = logits_of(a, ids, N_IDS);
		CHECK(lc && l32 && max_diff(lc, l32, (size_t)N_IDS * (size_t)a->cfg.vocab_size) < 1.0,
		      "q8_0 as --quant int8: logits far from f32");
		free(lc);
		free(l32);
		allm_model_free(c);
	}
out:
	allm_free(sa);
	allm_free(sb);
	allm_model_free(a);
	allm_model_free(b);
}

/* --- errors: a minimal valid model, then one thing broken at a time ------------ */

enum breakage {
	OK, ARCH, NO_BLOCKS, BLOCKS_STR, NO_TENSOR, SHAPE, TYPE_Q4K, EXTRA, ROPE_FREQS, PARTIAL, VOCAB, YARN,
};

static void write_min(const char *path, enum breakage b)
{
	enum { D = 32, F = 64, V = 40, H = 2, L = 1 };
	struct gguf_w *w = gguf_w_new();
	static float v[V * F];
	for (int i = 0; i < V * F; i++)
		v[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
	gguf_w_str(w, "general.architecture", b == ARCH ? "gpt2" : "llama");
	gguf_w_u32(w, "llama.context_length", 64);
	gguf_w_u32(w, "llama.embedding_length", D);
	gguf_w_u32(w, "llama.feed_forward_length", F);
	if (b == BLOCKS_STR)
		gguf_w_str(w, "llama.block_count", "1");
	else if (b != NO_BLOCKS)
		gguf_w_u32(w, "llama.block_count", L);
	gguf_w_u32(w, "llama.attention.head_count", H);
	gguf_w_u32(w, "llama.vocab_size", b == VOCAB ? V + 1 : V);
	if (b == PARTIAL)
		gguf_w_u32(w, "llama.rope.dimension_count", D / H / 2);
	if (b == YARN)
		gguf_w_str(w, "llama.rope.scaling.type", "yarn");
	gguf_w_tensor_f32(w, "token_embd.weight", ALLM_GGML_F32, 2, (int64_t[]){D, V}, v);
	gguf_w_tensor_f32(w, "output_norm.weight", ALLM_GGML_F32, 1, (int64_t[]){D}, v);
	gguf_w_tensor_f32(w, "blk.0.attn_norm.weight", ALLM_GGML_F32, 1, (int64_t[]){D}, v);
	gguf_w_tensor_f32(w, "blk.0.ffn_norm.weight", ALLM_GGML_F32, 1, (int64_t[]){D}, v);
	static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
	for (int i = 0; i < 4; i++) {
		char n[64];
		snprintf(n, sizeof(n), "blk.0.%s.weight", mats[i]);
		if (b == NO_TENSOR && i == 2)
			continue;
		gguf_w_tensor_f32(w, n, ALLM_GGML_F32, 2, (int64_t[]){D, b == SHAPE && i == 1 ? D + 32 : D}, v);
	}
	gguf_w_tensor_f32(w, "blk.0.ffn_gate.weight", ALLM_GGML_F32, 2, (int64_t[]){D, F}, v);
	gguf_w_tensor_f32(w, "blk.0.ffn_up.weight", ALLM_GGML_F32, 2, (int64_t[]){D, F}, v);
	if (b == TYPE_Q4K) { /* 256-value blocks of 144 bytes: readable, not loadable */
		uint8_t zero[144 * 8] = {0};
		gguf_w_tensor(w, "blk.0.ffn_down.weight", ALLM_GGML_Q4_K, 2, (int64_t[]){256, 8}, zero, sizeof(zero));
	} else {
		gguf_w_tensor_f32(w, "blk.0.ffn_down.weight", ALLM_GGML_F32, 2, (int64_t[]){F, D}, v);
	}
	if (b == EXTRA)
		gguf_w_tensor_f32(w, "blk.0.ffn_gate_exps.weight", ALLM_GGML_F32, 1, (int64_t[]){D}, v);
	if (b == ROPE_FREQS)
		gguf_w_tensor_f32(w, "rope_freqs.weight", ALLM_GGML_F32, 1, (int64_t[]){D / H / 2}, v);
	CHECK(!gguf_w_save(w, path), "write %s", path);
	gguf_w_free(w);
}

static void errors(void)
{
	static const struct {
		enum breakage b;
		int r;
		const char *want;
	} cases[] = {
		{ARCH, -ENOTSUP, "architecture 'gpt2' is not supported"},
		{NO_BLOCKS, -EINVAL, "required key 'llama.block_count' is missing"},
		{BLOCKS_STR, -EINVAL, "key 'llama.block_count' is a string, expected an integer"},
		{NO_TENSOR, -ENOENT, "tensor 'blk.0.attn_v.weight' is missing"},
		{SHAPE, -EINVAL, "tensor 'blk.0.attn_k.weight' has shape [32, 64] (ggml order) but the metadata implies [32, 32]"},
		{TYPE_Q4K, -ENOTSUP, "has type Q4_K, which this engine does not load"},
		{EXTRA, -ENOTSUP, "tensor 'blk.0.ffn_gate_exps.weight' is not part of the Llama graph"},
		{ROPE_FREQS, -ENOTSUP, "rope_freqs.weight"},
		{PARTIAL, -ENOTSUP, "partial rotary"},
		{VOCAB, -EINVAL, "llama.vocab_size is 41 but token_embd.weight has 40 rows"},
		{YARN, -ENOTSUP, "llama.rope.scaling.type 'yarn' is not supported"},
	};
	char path[512];
	snprintf(path, sizeof(path), "%s/min.gguf", tmp);
	write_min(path, OK);
	struct allm_model *m = load(path, ALLM_DTYPE_F32);
	CHECK(m && m->cfg.n_layers == 1 && m->cfg.tie_embeddings && m->cfg.head_dim == 16 && m->cfg.n_kv_heads == 2,
	      "the minimal model loads");
	allm_model_free(m);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct allm_err err = {{0}};
		struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F32};
		write_min(path, cases[i].b);
		m = NULL;
		int r = allm_model_load(be, path, &lo, &m, &err);
		CHECK(r == cases[i].r && !m && strstr(err.msg, cases[i].want) && strstr(err.msg, path),
		      "case %zu: got %d '%s', want %d '%s'", i, r, err.msg, cases[i].r, cases[i].want);
		allm_model_free(m);
	}
	/* a file that is not GGUF at all, where --model expects one */
	FILE *f = fopen(path, "w");
	fputs("{\"not\": \"gguf\"}", f);
	fclose(f);
	struct allm_model_config c;
	struct allm_err err = {{0}};
	CHECK(allm_model_config_load(path, &c, &err) == -EINVAL && strstr(err.msg, "not a GGUF file"),
	      "not GGUF: %s", err.msg);
	unlink(path);
}

int main(void)
{
	struct allm_err err = {{0}};
	struct allm_backend_opts bo = {.n_threads = 2};
	const char *data = getenv("DATA_DIR");
	char stories[512], path[512], nop[512], biased[512];
	if (!data || allm_backend_cpu_create(&bo, &be, &err) || !mkdtemp(tmp)) {
		fprintf(stderr, "setup: DATA_DIR unset or %s\n", err.msg);
		return 1;
	}
	snprintf(stories, sizeof(stories), "%s/models/stories260K", data);

	/* f32: exactly the directory's weights, Q/K rows back in place */
	snprintf(path, sizeof(path), "%s/f32.gguf", tmp);
	convert(stories, path, ALLM_GGML_F32, false);
	same_weights("f32", stories, path, ALLM_DTYPE_F32);
	struct allm_model_config c;
	CHECK(!allm_model_config_load(path, &c, &err) && c.vocab_size == 512 && c.n_kv_heads == 4 &&
	      c.head_dim == 8 && c.rope_theta == 10000 && c.tie_embeddings && c.bos_id == 1 && c.n_eos == 1 &&
	      c.eos_ids[0] == 2 && c.file_dtype == ALLM_DTYPE_F32, "config: %s", err.msg);

	/* without the permutation the rows are in the wrong order for RoPE: q.k differ */
	snprintf(nop, sizeof(nop), "%s/noperm.gguf", tmp);
	convert(stories, nop, ALLM_GGML_F32, true);
	struct allm_model *a = load(stories, ALLM_DTYPE_F32), *b = load(nop, ALLM_DTYPE_F32);
	float *la = a ? logits_of(a, ids, N_IDS) : NULL, *lb = b ? logits_of(b, ids, N_IDS) : NULL;
	double d = la && lb ? max_diff(la, lb, (size_t)N_IDS * 512) : 0;
	CHECK(d > 0.1, "an unpermuted file gave logits within %g of the right ones: the test cannot see RoPE", d);
	/* the first position attends only to itself: RoPE cancels there, so it agrees */
	CHECK(la && lb && max_diff(la, lb, 512) < 1e-4, "position 0 differs without RoPE in play");
	free(la);
	free(lb);
	allm_model_free(a);
	allm_model_free(b);

	/* 16-bit files into 16-bit storage */
	snprintf(path, sizeof(path), "%s/f16.gguf", tmp);
	convert(stories, path, ALLM_GGML_F16, false);
	CHECK(!allm_model_config_load(path, &c, &err) && c.file_dtype == ALLM_DTYPE_F16, "f16 file dtype");
	same_weights("f16", stories, path, ALLM_DTYPE_F16);
	snprintf(path, sizeof(path), "%s/bf16.gguf", tmp);
	convert(stories, path, ALLM_GGML_BF16, false);
	same_weights("bf16", stories, path, ALLM_DTYPE_BF16);

	/* biases (their Q/K entries permuted like the rows) and an untied head */
	struct allm_model_config bc;
	CHECK(!allm_model_config_preset("tiny", &bc, &err), "preset: %s", err.msg);
	bc.attn_bias = bc.mlp_bias = true;
	bc.tie_embeddings = false;
	snprintf(biased, sizeof(biased), "%s/biased", tmp);
	struct allm_model_write_opts wo = {.seed = 5, .dtype = ALLM_DTYPE_F32};
	CHECK(!allm_model_write_dir(&bc, &wo, biased, &err), "write: %s", err.msg);
	snprintf(path, sizeof(path), "%s/biased.gguf", tmp);
	convert(biased, path, ALLM_GGML_F32, false);
	same_weights("biases, untied", biased, path, ALLM_DTYPE_F32);

	quantized(stories, ALLM_GGML_Q8_0, "q8_0");
	quantized(stories, ALLM_GGML_Q4_0, "q4_0");
	quantized(stories, ALLM_GGML_Q4_1, "q4_1");
	errors();

	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", tmp);
	allm_backend_destroy(be);
	if (n_fail)
		return 1;
	printf("test-gguf-model: all checks passed\n");
	return 0;
}
