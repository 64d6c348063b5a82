/* Description: Llama models from GGUF files (engined/model/gguf-*.c) against the Hugging Face directories they were converted from (tests/gguf-write.c, llama.cpp's conventions): F32 / F16 / BF16 files load into exactly the weights of the directory in the same storage dtype (the query and key rows of every head back in Hugging Face's order, biases too, tied and untied heads) and give bit-identical logits, while a file whose Q/K rows were not permuted gives other logits (RoPE rotates the wrong pairs); Q8_0 / Q4_0 / Q4_1 files load into ggml's reference dequantization of the same weights and stay close in logits; and each kind of model this engine cannot run or a broken file (another architecture, a missing key or tensor, a wrong shape, an unsupported tensor type, a tensor the graph does not read, RoPE frequency factors, partial rotary, a vocabulary that disagrees) fails with one message naming it. */
#include "executor.h"
#include "gguf-model.h"
#include "gguf-write.h"
#include "model-writer.h"
#include "sampler.h"
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
out:
	allm_free(sa);
	allm_free(sb);
	allm_model_free(a);
	allm_model_free(b);
}

/* --- a file's own types (--dtype auto on the CPU) -------------------------------- */

/* Loads path as allm-run's --dtype auto does on the CPU: each tensor in its own type. */
static struct allm_model *load_auto(const char *path)
{
	struct allm_err err = {{0}};
	struct allm_model_config c;
	struct allm_model *m = NULL;
	if (allm_model_config_load(path, &c, &err)) {
		CHECK(0, "config %s: %s", path, err.msg);
		return NULL;
	}
	struct allm_model_load_opts lo = {.wdtype = c.file_dtype, .file_types = true};
	if (allm_model_load(be, path, &lo, &m, &err)) {
		CHECK(0, "load %s (file types): %s", path, err.msg);
		return NULL;
	}
	return m;
}

static bool layer_dts(const struct allm_model *m, enum allm_dtype mats, enum allm_dtype down)
{
	for (int i = 0; i < m->cfg.n_layers; i++) {
		const struct allm_layer_weights *L = &m->layers[i];
		if (L->wq_dt != mats || L->wk_dt != mats || L->wv_dt != mats || L->wo_dt != mats ||
		    L->w_gate_dt != mats || L->w_up_dt != mats || L->w_down_dt != down)
			return false;
	}
	return true;
}

/* Largest |a - b| and the share of positions whose argmax agrees. */
static double compare(struct allm_model *a, struct allm_model *b, double *ret_agree)
{
	int32_t V = a->cfg.vocab_size;
	float *la = logits_of(a, ids, N_IDS), *lb = logits_of(b, ids, N_IDS);
	double d = -1;
	int agree = 0;
	if (la && lb) {
		d = max_diff(la, lb, (size_t)N_IDS * (size_t)V);
		for (int32_t t = 0; t < N_IDS; t++)
			agree += allm_argmax(la + (size_t)t * V, V) == allm_argmax(lb + (size_t)t * V, V);
	}
	free(la);
	free(lb);
	*ret_agree = (double)agree / N_IDS;
	return d;
}

/* A file in one block format (every matrix and the embedding whole blocks), its bytes
 * as stored, is what --quant makes of the directory (ggml's quantizers both): the
 * same weights bit for bit, so the same logits. */
static void native_uniform(const char *dir, uint32_t type, enum allm_dtype dt, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/native-%s.gguf", tmp, name);
	convert(dir, path, type, false);
	struct allm_model *a = load(dir, dt), *b = load_auto(path);
	if (a && b) {
		CHECK(b->wdtype == dt && layer_dts(b, dt, dt) && b->tok_emb_dt == dt && b->lm_head_dt == dt &&
		      b->vdtype == ALLM_DTYPE_F32, "%s: loaded as %s, not its own type", name,
		      allm_dtype_name(b->wdtype));
		CHECK(a->arena_bytes == b->arena_bytes && !memcmp(a->arena, b->arena, a->arena_bytes),
		      "%s: the file's blocks are not what --quant %s writes", name, allm_dtype_name(dt));
		double agree, d = compare(a, b, &agree);
		CHECK(d == 0, "%s: logits differ from --quant %s's by %g", name, allm_dtype_name(dt), d);
	}
	allm_model_free(a);
	allm_model_free(b);
}

/* F16 layers and an F32 embedding table: each kept in its type, norms f32 (a mix),
 * and as the CPU reduces f16 weights exactly as the f32 values they hold (kernels/
 * cpu/cpu-gemm.h), the logits are the bits of the same file dequantized into f32. A
 * matrix with a bias is widened to f32 in a mix (its bias is f32 with the norms). */
static void native_mixed_float(const char *dir, const char *name)
{
	char path[512], err[512];
	snprintf(path, sizeof(path), "%s/native-f16-f32-%s.gguf", tmp, name);
	struct gguf_convert_opts o = {.type = ALLM_GGML_F16, .over = {{"token_embd.", ALLM_GGML_F32}}};
	CHECK(!gguf_convert_dir(dir, path, &o, err, sizeof(err)), "convert: %s", err);
	struct allm_model *a = load(path, ALLM_DTYPE_F32), *b = load_auto(path);
	if (a && b) {
		enum allm_dtype attn = b->cfg.attn_bias ? ALLM_DTYPE_F32 : ALLM_DTYPE_F16;
		enum allm_dtype mlp = b->cfg.mlp_bias ? ALLM_DTYPE_F32 : ALLM_DTYPE_F16;
		const struct allm_layer_weights *L = &b->layers[b->cfg.n_layers - 1];
		CHECK(b->wdtype == ALLM_DTYPE_F16 && b->vdtype == ALLM_DTYPE_F32 && L->wq_dt == attn &&
		      L->wo_dt == attn && L->w_gate_dt == mlp && L->w_down_dt == mlp &&
		      b->tok_emb_dt == ALLM_DTYPE_F32 &&
		      b->lm_head_dt == (b->cfg.tie_embeddings ? ALLM_DTYPE_F32 : ALLM_DTYPE_F16),
		      "%s: f16 + f32: not the file's types", name);
		double agree, d = compare(a, b, &agree);
		CHECK(d == 0, "%s: f16 layers + f32 embedding: logits %g from the f32 load's", name, d);
	}
	allm_model_free(a);
	allm_model_free(b);
}

/* Every matrix of b against the same tensor of a, byte for byte, where b stores dt. */
static int same_tensors(struct allm_model *a, struct allm_model *b, enum allm_dtype dt)
{
	struct allm_weight_spec *sa = NULL, *sb = NULL;
	size_t na = 0, nb = 0;
	int n = 0;
	if (allm_model_weight_specs(a, &sa, &na) || allm_model_weight_specs(b, &sb, &nb) || na != nb)
		n = -1;
	for (size_t i = 0; n >= 0 && i < na; i++) {
		if (!sb[i].dt || *sb[i].dt != dt)
			continue;
		size_t bytes = allm_model_spec_bytes(b, &sb[i]);
		if (bytes != allm_model_spec_bytes(a, &sa[i]) || memcmp(*sa[i].slot, *sb[i].slot, bytes)) {
			fprintf(stderr, "%s: not the file's %s bytes\n", sb[i].name, allm_dtype_name(dt));
			n = -1;
		} else {
			n++;
		}
	}
	allm_free(sa);
	allm_free(sb);
	return n;
}

/* SmolLM2's layout: Q4_1 matrices, a Q8_0 embedding table that is the head too. Each
 * runs as stored: the layers are --quant q4_1's bytes, the table --quant q8_0's; the
 * logits stay near the same file dequantized into f32 (8-bit activations, kernels/
 * README.md) and far from it when the table is read as Q4_1. */
static void native_mixed_blocks(const char *dir)
{
	char path[512], err[512];
	snprintf(path, sizeof(path), "%s/native-q4_1-q8_0.gguf", tmp);
	struct gguf_convert_opts o = {.type = ALLM_GGML_Q4_1, .over = {{"token_embd.", ALLM_GGML_Q8_0}}};
	CHECK(!gguf_convert_dir(dir, path, &o, err, sizeof(err)), "convert: %s", err);
	struct allm_model *n = load_auto(path), *f = load(path, ALLM_DTYPE_F32);
	struct allm_model *q41 = load(dir, ALLM_DTYPE_Q4_1), *q80 = load(dir, ALLM_DTYPE_Q8_0);
	if (n && f && q41 && q80) {
		CHECK(n->wdtype == ALLM_DTYPE_Q4_1 && layer_dts(n, ALLM_DTYPE_Q4_1, ALLM_DTYPE_Q4_1) &&
		      n->tok_emb_dt == ALLM_DTYPE_Q8_0 && n->lm_head_dt == ALLM_DTYPE_Q8_0 &&
		      n->lm_head == n->tok_emb, "q4_1 + q8_0: not the file's types");
		int n41 = same_tensors(q41, n, ALLM_DTYPE_Q4_1), n80 = same_tensors(q80, n, ALLM_DTYPE_Q8_0);
		CHECK(n41 == 7 * n->cfg.n_layers && n80 == 1, "q4_1 + q8_0: %d q4_1 and %d q8_0 tensors as stored",
		      n41, n80);
		double agree, d = compare(f, n, &agree);
		printf("q4_1 layers + q8_0 embedding, native: max |logit - f32 load's| = %.4f, argmax agrees at "
		       "%.0f %%\n", d, 100 * agree);
		CHECK(d > 0 && d < 1.0 && agree >= 0.75, "q4_1 + q8_0: logits %g from f32, %.2f agree", d, agree);
	}
	allm_model_free(n);
	allm_model_free(f);
	allm_model_free(q41);
	allm_model_free(q80);
}

/* The K formats as llama.cpp's Q4_K_M lays them out: Q4_K matrices, Q6_K ffn_down,
 * token_embd (the head) and some attn_v, Q5_0 where a row is not whole 256-blocks
 * (here one ffn_up). With file types every tensor runs in its own format, its bytes
 * as stored (layer 1's q, k, v and layer 0's gate, up in two formats: one GEMM
 * each); --dtype f32 holds their exact values. Both stay near the directory's f32. */
static void native_kquants(const char *dir)
{
	char path[512], err[512];
	snprintf(path, sizeof(path), "%s/q4_k_m.gguf", tmp);
	struct gguf_convert_opts o = {.type = ALLM_GGML_Q4_K,
				      .over = {{"token_embd.", ALLM_GGML_Q6_K}, {"ffn_down.", ALLM_GGML_Q6_K},
					       {"blk.1.attn_v.", ALLM_GGML_Q6_K}, {"blk.0.ffn_up.", ALLM_GGML_Q5_0}}};
	CHECK(!gguf_convert_dir(dir, path, &o, err, sizeof(err)), "convert: %s", err);
	struct allm_model *n = load_auto(path), *f = load(path, ALLM_DTYPE_F32), *d32 = load(dir, ALLM_DTYPE_F32);
	if (n && f && d32) {
		const struct allm_layer_weights *L0 = &n->layers[0], *L1 = &n->layers[1];
		CHECK(n->wdtype == ALLM_DTYPE_Q4_K && L0->wv_dt == ALLM_DTYPE_Q4_K && L1->wq_dt == ALLM_DTYPE_Q4_K &&
		      L1->wv_dt == ALLM_DTYPE_Q6_K && L0->w_gate_dt == ALLM_DTYPE_Q4_K &&
		      L0->w_up_dt == ALLM_DTYPE_Q5_0 && L1->w_up_dt == ALLM_DTYPE_Q4_K &&
		      L0->w_down_dt == ALLM_DTYPE_Q6_K && L1->w_down_dt == ALLM_DTYPE_Q6_K &&
		      n->tok_emb_dt == ALLM_DTYPE_Q6_K && n->lm_head_dt == ALLM_DTYPE_Q6_K,
		      "q4_k_m: stored as %s", allm_dtype_name(n->wdtype));
		double agree, dn = compare(f, n, &agree), agree_f, df = compare(d32, f, &agree_f);
		printf("Q4_K + Q6_K: f32 load %.4f from the directory's f32 (argmax %.0f %%); in their own "
		       "blocks %.4f from the f32 load (argmax %.0f %%)\n", df, 100 * agree_f, dn, 100 * agree);
		CHECK(df > 0 && df < 2.0 && dn > 0 && dn < 1.0 && agree >= 0.75,
		      "q4_k_m: %g from f32, %g native from its f32 load", df, dn);
	}
	allm_model_free(n);
	allm_model_free(f);
	allm_model_free(d32);
}

/* --- errors: a minimal valid model, then one thing broken at a time ------------ */

enum breakage {
	OK, ARCH, NO_BLOCKS, BLOCKS_STR, NO_TENSOR, SHAPE, TYPE_Q3K, EXTRA, ROPE_FREQS, PARTIAL, VOCAB, YARN,
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
	if (b == TYPE_Q3K) { /* 256-value blocks of 110 bytes: readable, not loadable */
		uint8_t zero[110 * 8] = {0};
		gguf_w_tensor(w, "blk.0.ffn_down.weight", ALLM_GGML_Q3_K, 2, (int64_t[]){256, 8}, zero, sizeof(zero));
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
		{TYPE_Q3K, -ENOTSUP, "has type Q3_K, which this engine does not load"},
		{EXTRA, -ENOTSUP, "tensor 'blk.0.ffn_gate_exps.weight' is not part of the llama graph"},
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

	/* a file's own types: a model whose every matrix is whole blocks of 256 */
	struct allm_model_config kc = bc;
	kc.attn_bias = kc.mlp_bias = false;
	kc.tie_embeddings = true;
	kc.hidden = 256;
	kc.intermediate = 512;
	kc.n_layers = 2;
	kc.n_heads = 8;
	kc.n_kv_heads = 4;
	kc.head_dim = 32;
	char wide[512];
	snprintf(wide, sizeof(wide), "%s/wide", tmp);
	CHECK(!allm_model_write_dir(&kc, &wo, wide, &err), "write: %s", err.msg);
	native_uniform(wide, ALLM_GGML_Q8_0, ALLM_DTYPE_Q8_0, "q8_0");
	native_uniform(wide, ALLM_GGML_Q4_0, ALLM_DTYPE_Q4_0, "q4_0");
	native_uniform(wide, ALLM_GGML_Q4_1, ALLM_DTYPE_Q4_1, "q4_1");
	native_mixed_float(wide, "tied");
	native_mixed_float(biased, "biases, untied");
	native_mixed_blocks(wide);
	native_kquants(wide);
	/* stories260K's ffn_down (172 columns) is no whole blocks: a Q4_0 file keeps it F32 */
	snprintf(path, sizeof(path), "%s/q4_0.gguf", tmp);
	struct allm_model *sn = load_auto(path);
	CHECK(sn && sn->wdtype == ALLM_DTYPE_Q4_0 && layer_dts(sn, ALLM_DTYPE_Q4_0, ALLM_DTYPE_F32) &&
	      sn->tok_emb_dt == ALLM_DTYPE_Q4_0, "stories260K q4_0: not its own types");
	allm_model_free(sn);
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
