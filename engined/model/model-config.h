/* Model hyper-parameters: parsed from a Hugging Face config.json (+
 * generation_config.json), or taken from a named preset for --dummy and
 * allm-mkmodel. */
#ifndef ALLM_MODEL_CONFIG_H
#define ALLM_MODEL_CONFIG_H

#include "common.h"
#include "vdir.h"

#define ALLM_MAX_EOS 16
#define ALLM_MAX_HEAD_DIM 1024

enum allm_arch {
	ALLM_ARCH_LLAMA = 0, /* Llama family: RMSNorm, RoPE, SiLU-gated MLP, GQA (and Mistral) */
	ALLM_ARCH_OPT = 1, /* OPT: LayerNorm, learned positions (+2), ReLU MLP */
	ALLM_ARCH_QWEN2 = 2, /* Llama + q/k/v biases */
	ALLM_ARCH_QWEN3 = 3, /* Llama + per-head RMSNorm of q and k */
	ALLM_ARCH_GEMMA3 = 4, /* GELU-tanh MLP, sandwich norms, q/k norms, scaled embeddings,
			       * local (sliding-window) layers beside global ones */
	ALLM_ARCH_PHI3 = 5, /* Llama with fused QKV and gate/up matrices (split at load) */
	ALLM_ARCH_COUNT
};

enum allm_act {
	ALLM_ACT_SILU = 0,
	ALLM_ACT_RELU = 1,
	ALLM_ACT_GELU_TANH = 2, /* GELU, tanh approximation (Gemma's gelu_pytorch_tanh) */
};

/* What an architecture adds to the one forward pass (engined/exec/executor.c), as
 * values: the executor and the loaders read these, never the architecture's name.
 * One row per architecture in model-arch.c. */
struct allm_arch_desc {
	enum allm_arch arch;
	const char *name; /* GGUF general.architecture; "llama", "qwen2", ... */
	bool layernorm; /* LayerNorm with bias (OPT); RMSNorm otherwise */
	bool rope; /* rotary positions; learned ones otherwise (OPT, row p + 2) */
	bool gated_mlp; /* down(act(gate) * up); down(act(up)) otherwise */
	enum allm_act act;
	bool qkv_bias; /* q, k and v have biases, the output projection none (Qwen2) */
	bool qk_norm; /* RMSNorm over each head of q and of k before RoPE (Qwen3, Gemma 3) */
	bool post_norms; /* RMSNorm of the attention's and the MLP's output before each
			  * residual add (Gemma 3's post_attention / post_feedforward) */
	bool embed_scale; /* embeddings times sqrt(hidden) (Gemma) */
	float hf_norm_offset; /* Hugging Face stores RMSNorm weights as w - this and
			       * multiplies by (offset + w) (Gemma: 1; GGUF files hold the sum) */
	bool gguf_qk_interleaved; /* GGUF's Q/K rows are permuted per head for ggml's
				   * adjacent-pair RoPE (llama.cpp's converter does it for
				   * llama only; the others use the NeoX order, HF's own) */
	bool fused_qkv; /* one [Q; K; V] matrix in the files (Phi-3) */
	bool fused_gate_up; /* one [gate; up] matrix in the files (Phi-3) */
	int32_t swa_pattern; /* with a sliding window: every swa_pattern-th layer
			      * (1-based) is global, the others local (Gemma 3: 6);
			      * 0: every layer local (Mistral) */
	float rope_local_theta; /* RoPE base of the local layers (Gemma 3: 10000); 0:
				 * rope_theta, with the global layers' scaling */
	bool gguf_no_window; /* llama.cpp ignores the file's window (Phi-3: its
			      * converter's value is not the model's), and so do we */
};

/* The row of arch; NULL for a value outside the enum. */
const struct allm_arch_desc *allm_arch_describe(enum allm_arch arch);
/* The row named name (GGUF general.architecture), NULL if none. */
const struct allm_arch_desc *allm_arch_by_name(const char *name, size_t len);
/* Names of every architecture, for error text ("llama, opt, qwen2, ..."). */
const char *allm_arch_names(void);

enum allm_rope_scaling {
	ALLM_ROPE_NONE = 0,
	ALLM_ROPE_LINEAR = 1, /* positions divided by factor */
	ALLM_ROPE_LLAMA3 = 2, /* Llama-3.1 frequency-dependent scaling */
};

struct allm_model_config {
	enum allm_arch arch;
	int32_t vocab_size;
	int32_t hidden; /* model width D */
	int32_t intermediate; /* MLP width (Llama intermediate_size, OPT ffn_dim) */
	int32_t n_layers;
	int32_t n_heads;
	int32_t n_kv_heads; /* < n_heads for GQA */
	int32_t head_dim;
	int32_t max_pos; /* context limit: max_position_embeddings */
	float norm_eps;
	enum allm_act act;
	bool tie_embeddings; /* lm_head shares embed_tokens */
	bool attn_bias; /* q/k/v/o biases (Llama attention_bias; OPT enable_bias) */
	bool mlp_bias; /* MLP biases (Llama mlp_bias; OPT enable_bias) */
	/* the values of the architecture's parts (struct allm_arch_desc) */
	int32_t sliding_window; /* > 0: local layers attend to the last this many
				 * positions (p - window, p]; 0: no local layers */
	int32_t swa_pattern; /* which layers are local, see allm_arch_desc */
	float rope_local_theta; /* RoPE base of local layers; 0: rope_theta */
	float query_scale; /* attention score scale; 0: 1 / sqrt(head_dim) (Gemma 3:
			    * query_pre_attn_scalar^-0.5) */
	/* Llama */
	float rope_theta;
	enum allm_rope_scaling rope_scaling;
	float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
	int32_t rope_orig_max_pos;
	/* OPT */
	bool pre_ln; /* do_layer_norm_before */
	bool final_ln; /* decoder-level final LayerNorm present */
	bool ln_affine; /* layer_norm_elementwise_affine */
	int32_t embed_proj_dim; /* word_embed_proj_dim; != hidden => project_in/out */
	/* tokens */
	int32_t bos_id; /* -1 if unknown */
	int32_t n_eos;
	int32_t eos_ids[ALLM_MAX_EOS]; /* generation_config.json wins over config.json */
	enum allm_dtype file_dtype; /* torch_dtype of config.json, f32 if absent; a GGUF
				     * file: its layers' matrices' storage dtype (gguf-config.c) */
};

/* Reads dir/config.json and, when present, dir/generation_config.json. Validates
 * every field it uses (positive sizes, heads divide, head_dim even and bounded...).
 * 0 or -errno with err naming the file and field. */
int allm_model_config_load(const char *dir, struct allm_model_config *ret,
			   struct allm_err *err);
/* The same from a directory on disk or embedded (common/vdir.h). */
int allm_model_config_load_from(const struct allm_vdir *dir, struct allm_model_config *ret,
				struct allm_err *err);

/* Fills cfg from a preset name ("tiny", "llama-7b", "opt-13b", ...; see
 * allm_model_config_preset_names()). -ENOENT for an unknown name. */
int allm_model_config_preset(const char *name, struct allm_model_config *ret,
			     struct allm_err *err);
/* Comma-separated list of preset names, for help and error text. */
const char *allm_model_config_preset_names(void);

/* Writes cfg as a Hugging Face config.json (what allm-mkmodel emits), plus a
 * generation_config.json with the EOS ids. */
int allm_model_config_save(const struct allm_model_config *cfg, const char *dir,
			   struct allm_err *err);

/* Checks the invariants the engine relies on. */
int allm_model_config_validate(const struct allm_model_config *cfg, const char *what,
			       struct allm_err *err);

/* RoPE inverse frequencies, head_dim/2 of them, with the configured scaling. */
void allm_model_config_inv_freq(const struct allm_model_config *cfg, float *ret);
/* The same for the local layers (rope_local_theta, unscaled). */
void allm_model_config_inv_freq_local(const struct allm_model_config *cfg, float *ret);
/* Whether layer l attends through the sliding window. */
bool allm_model_layer_local(const struct allm_model_config *cfg, int32_t l);
/* The window every layer attends through (Mistral's, a Llama's or Phi-3's with
 * one), 0 when some layer attends to everything (no window; Gemma 3's global
 * layers): the K/V of positions more than this far back are never read again,
 * so the KV cache may give their blocks back (kv-cache.h, window). */
int32_t allm_model_passed_window(const struct allm_model_config *cfg);
/* The attention score scale of cfg (query_scale or 1 / sqrt(head_dim)). */
float allm_model_attn_scale(const struct allm_model_config *cfg);

/* Number of parameters implied by cfg (for memory estimates and logs). */
uint64_t allm_model_config_n_params(const struct allm_model_config *cfg);

const char *allm_arch_name(enum allm_arch a);

#endif
