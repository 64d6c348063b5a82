/* The hyper-parameters of a GGUF file's model, from its `llama.*` and
 * `tokenizer.ggml.*` metadata and the shapes of its tensors (see gguf-model.h). */
#include "gguf-model.h"

#include <math.h>
#include <stdio.h>

/* Tokens llama.cpp also ends a generation at, whatever the EOS id says (its list of
 * end-of-generation texts, the part of it that ends a turn in a chat template):
 * SmolLM2 names <|im_end|> its EOS and ends plain text with <|endoftext|>. */
static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>",	 "<|end|>",
					"<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
					"<EOT>",	 "<|end_of_text|>"};

/* An integer key of the model's architecture ("llama.block_count"). */
static int arch_int(const struct allm_gguf *g, const char *arch, const char *key, bool required,
		    int64_t lo, int64_t hi, int64_t def, int32_t *ret, struct allm_err *err)
{
	char k[128];
	int64_t v = def;
	snprintf(k, sizeof(k), "%s.%s", arch, key);
	int r = allm_gguf_get_int(g, k, lo, hi, &v, err);
	if (r == -ENOENT && required)
		return allm_err_set(err, -EINVAL, "%s: GGUF: required key '%s' is missing", g->path, k);
	if (r && r != -ENOENT)
		return r;
	*ret = (int32_t)v;
	return 0;
}

static int arch_float(const struct allm_gguf *g, const char *arch, const char *key, double def,
		      float *ret, struct allm_err *err)
{
	char k[128];
	double v = def;
	snprintf(k, sizeof(k), "%s.%s", arch, key);
	int r = allm_gguf_get_float(g, k, &v, err);
	if (r && r != -ENOENT)
		return r;
	if (!isfinite(v))
		return allm_err_set(err, -EINVAL, "%s: GGUF: key '%s' is not a finite number", g->path, k);
	*ret = (float)v;
	return 0;
}

static void add_eos(struct allm_model_config *c, int64_t id)
{
	for (int i = 0; i < c->n_eos; i++)
		if (c->eos_ids[i] == id)
			return;
	if (c->n_eos < ALLM_MAX_EOS)
		c->eos_ids[c->n_eos++] = (int32_t)id;
}

/* BOS, EOS (and the end-of-turn ids llama.cpp also stops at). */
static int token_ids(const struct allm_gguf *g, struct allm_model_config *c, struct allm_err *err)
{
	static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id",
					       "tokenizer.ggml.eot_token_id",
					       "tokenizer.ggml.eom_token_id"};
	int64_t id = -1;
	int r = allm_gguf_get_int(g, "tokenizer.ggml.bos_token_id", 0, c->vocab_size - 1, &id, err);
	if (r && r != -ENOENT)
		return r;
	c->bos_id = (int32_t)id;
	for (size_t k = 0; k < ALLM_ARRAY_SIZE(eos_keys); k++) {
		r = allm_gguf_get_int(g, eos_keys[k], 0, c->vocab_size - 1, &id, err);
		if (r == -ENOENT)
			continue;
		if (r)
			return r;
		add_eos(c, id);
	}
	const struct allm_gguf_kv *toks;
	if (allm_gguf_get_arr(g, "tokenizer.ggml.tokens", ALLM_GGUF_STRING, &toks, NULL))
		return 0;
	for (uint64_t i = 0; i < toks->v.arr.n && i < (uint64_t)c->vocab_size; i++) {
		uint64_t len;
		const char *s = allm_gguf_arr_str(toks, i, &len);
		for (size_t k = 0; k < ALLM_ARRAY_SIZE(eog_texts); k++)
			if (len == strlen(eog_texts[k]) && !memcmp(s, eog_texts[k], len))
				add_eos(c, (int64_t)i);
	}
	return 0;
}

static int rope_scaling(const struct allm_gguf *g, const char *arch, struct allm_model_config *c,
			struct allm_err *err)
{
	char k[128];
	const char *s;
	size_t len;
	c->rope_scaling = ALLM_ROPE_NONE;
	c->rope_factor = 1;
	snprintf(k, sizeof(k), "%s.rope.scaling.type", arch);
	int r = allm_gguf_get_str(g, k, &s, &len, err);
	if (r && r != -ENOENT)
		return r;
	if (!r && !(len == 4 && !memcmp(s, "none", 4))) {
		if (!(len == 6 && !memcmp(s, "linear", 6)))
			return allm_err_set(err, -ENOTSUP, "%s: GGUF: %s '%.*s' is not supported (none, linear)",
					    g->path, k, (int)ALLM_MIN(len, 64), s);
		c->rope_scaling = ALLM_ROPE_LINEAR;
		if ((r = arch_float(g, arch, "rope.scaling.factor", 1.0, &c->rope_factor, err)))
			return r;
	} else if (r == -ENOENT) {
		/* older files: rope.scale_linear */
		if ((r = arch_float(g, arch, "rope.scale_linear", 1.0, &c->rope_factor, err)))
			return r;
		if (c->rope_factor != 1)
			c->rope_scaling = ALLM_ROPE_LINEAR;
	}
	if (c->rope_scaling == ALLM_ROPE_LINEAR && !(c->rope_factor >= 1 && c->rope_factor <= 1024))
		return allm_err_set(err, -EINVAL, "%s: GGUF: RoPE scaling factor %g out of range [1, 1024]",
				    g->path, c->rope_factor);
	if (allm_gguf_find_tensor(g, "rope_freqs.weight"))
		return allm_err_set(err, -ENOTSUP, "%s: GGUF: RoPE frequency factors (rope_freqs.weight, "
				    "Llama-3.1 scaling) are not supported", g->path);
	return 0;
}

/* The sliding window and what comes with it (Gemma 3's local layers: every sixth
 * global, their own RoPE base; its attention scale), as llama.cpp reads them. */
static int window(const struct allm_gguf *g, const char *arch, const struct allm_arch_desc *ad,
		  struct allm_model_config *c, struct allm_err *err)
{
	char k[128];
	double cap = 0;
	int r;
	if (!ad->gguf_no_window &&
	    (r = arch_int(g, arch, "attention.sliding_window", false, 0, 1 << 24, 0, &c->sliding_window, err)))
		return r;
	if (c->sliding_window) {
		c->swa_pattern = ad->swa_pattern;
		c->rope_local_theta = ad->rope_local_theta;
	}
	/* Gemma 3: query_pre_attn_scalar is not in the file; llama.cpp takes head_dim,
	 * and hidden / heads for the 27B (62 layers), as Google's own code does */
	if (ad->post_norms && c->n_layers == 62)
		c->query_scale = 1.0f / sqrtf((float)(c->hidden / c->n_heads));
	snprintf(k, sizeof(k), "%s.final_logit_softcapping", arch);
	if ((r = allm_gguf_get_float(g, k, &cap, err)) && r != -ENOENT)
		return r;
	snprintf(k, sizeof(k), "%s.attn_logit_softcapping", arch);
	double acap = 0;
	if ((r = allm_gguf_get_float(g, k, &acap, err)) && r != -ENOENT)
		return r;
	if (cap != 0 || acap != 0)
		return allm_err_set(err, -ENOTSUP, "%s: GGUF: logit soft-capping (%s.%s) is not supported",
				    g->path, arch, cap != 0 ? "final_logit_softcapping" : "attn_logit_softcapping");
	return 0;
}

/* --dtype auto keeps the checkpoint's: the layers' matrices' type, the engine's
 * format for it where that differs (a Q4_K file's is Q4_1; gguf-model.h), f32 for a
 * type the loader will refuse. */
static enum allm_dtype file_dtype(const struct allm_gguf *g)
{
	const struct allm_gguf_tensor *t = allm_gguf_find_tensor(g, "blk.0.attn_q.weight");
	if (!t) /* fused (Phi-3) */
		t = allm_gguf_find_tensor(g, "blk.0.attn_qkv.weight");
	enum allm_dtype dt = t ? allm_gguf_native_dtype(t->type) : ALLM_DTYPE_COUNT;
	return dt == ALLM_DTYPE_COUNT ? ALLM_DTYPE_F32 : dt;
}

int allm_gguf_model_config(const struct allm_gguf *g, struct allm_model_config *ret,
			   struct allm_err *err)
{
	struct allm_model_config c = {0};
	const char *arch;
	size_t alen;
	char a[32];
	int r = allm_gguf_get_str(g, "general.architecture", &arch, &alen, err);
	if (r == -ENOENT)
		return allm_err_set(err, -EINVAL, "%s: GGUF: general.architecture is missing", g->path);
	if (r)
		return r;
	const struct allm_arch_desc *ad = allm_arch_by_name(arch, alen);
	if (!ad || ad->layernorm)
		return allm_err_set(err, -ENOTSUP, "%s: GGUF: architecture '%.*s' is not supported "
				    "(llama, qwen2, qwen3, gemma3, phi3)",
				    g->path, (int)ALLM_MIN(alen, 64), arch);
	snprintf(a, sizeof(a), "%.*s", (int)alen, arch);
	c.arch = ad->arch;
	c.act = ad->act;
	if ((r = arch_int(g, a, "embedding_length", true, 1, 65536, 0, &c.hidden, err)) ||
	    (r = arch_int(g, a, "feed_forward_length", true, 1, 1 << 20, 0, &c.intermediate, err)) ||
	    (r = arch_int(g, a, "block_count", true, 1, 1024, 0, &c.n_layers, err)) ||
	    (r = arch_int(g, a, "attention.head_count", true, 1, 1024, 0, &c.n_heads, err)) ||
	    (r = arch_int(g, a, "context_length", true, 1, 1 << 24, 0, &c.max_pos, err)))
		return r;
	if ((r = arch_int(g, a, "attention.head_count_kv", false, 1, 1024, c.n_heads, &c.n_kv_heads, err)) ||
	    (r = arch_int(g, a, "attention.key_length", false, 2, ALLM_MAX_HEAD_DIM,
			  c.hidden / c.n_heads, &c.head_dim, err)))
		return r;
	int32_t vlen, rdim;
	if ((r = arch_int(g, a, "attention.value_length", false, 1, ALLM_MAX_HEAD_DIM, c.head_dim, &vlen, err)) ||
	    (r = arch_int(g, a, "rope.dimension_count", false, 1, ALLM_MAX_HEAD_DIM, c.head_dim, &rdim, err)))
		return r;
	if (vlen != c.head_dim)
		return allm_err_set(err, -ENOTSUP, "%s: GGUF: value heads of %d differ from key heads of %d "
				    "(not supported)", g->path, vlen, c.head_dim);
	if (rdim != c.head_dim)
		return allm_err_set(err, -ENOTSUP, "%s: GGUF: RoPE over %d of the %d dimensions of a head "
				    "(partial rotary) is not supported", g->path, rdim, c.head_dim);
	if ((r = arch_float(g, a, "rope.freq_base", 10000.0, &c.rope_theta, err)) ||
	    (r = arch_float(g, a, "attention.layer_norm_rms_epsilon", 1e-5, &c.norm_eps, err)) ||
	    (r = rope_scaling(g, a, &c, err)) || (r = window(g, a, ad, &c, err)))
		return r;

	/* the vocabulary: the embedding table's rows (llama.vocab_size and the
	 * tokenizer, where present, must agree with it) */
	const struct allm_gguf_tensor *emb = allm_gguf_find_tensor(g, "token_embd.weight");
	if (!emb || emb->n_dims != 2 || emb->ne[1] > (1 << 24))
		return allm_err_set(err, -EINVAL, "%s: GGUF: token_embd.weight is %s", g->path,
				    emb ? "not a matrix of at most 2^24 rows" : "missing");
	c.vocab_size = (int32_t)emb->ne[1];
	int32_t nv = c.vocab_size;
	if ((r = arch_int(g, a, "vocab_size", false, 1, 1 << 24, c.vocab_size, &nv, err)))
		return r;
	if (nv != c.vocab_size)
		return allm_err_set(err, -EINVAL, "%s: GGUF: %s.vocab_size is %d but token_embd.weight has "
				    "%d rows", g->path, a, nv, c.vocab_size);
	c.tie_embeddings = !allm_gguf_find_tensor(g, "output.weight");
	/* q/k/v biases are the architecture's (Qwen2) or, with an output bias, Llama's
	 * attention_bias */
	c.attn_bias = !ad->qkv_bias && allm_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
	c.mlp_bias = allm_gguf_find_tensor(g, "blk.0.ffn_up.bias") != NULL;
	c.file_dtype = file_dtype(g);
	if ((r = token_ids(g, &c, err)) || (r = allm_model_config_validate(&c, g->path, err)))
		return r;
	*ret = c;
	return 0;
}

int allm_gguf_model_config_load(const char *path, struct allm_model_config *ret,
				struct allm_err *err)
{
	struct allm_gguf *g = NULL;
	int r = allm_gguf_open(path, &g, err);
	if (!r)
		r = allm_gguf_model_config(g, ret, err);
	allm_gguf_close(g);
	return r;
}
