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
	ALLM_ARCH_LLAMA = 0, /* Llama family: RMSNorm, RoPE, SiLU-gated MLP, GQA */
	ALLM_ARCH_OPT = 1, /* OPT: LayerNorm, learned positions (+2), ReLU MLP */
};

enum allm_act {
	ALLM_ACT_SILU = 0,
	ALLM_ACT_RELU = 1,
};

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

/* Number of parameters implied by cfg (for memory estimates and logs). */
uint64_t allm_model_config_n_params(const struct allm_model_config *cfg);

const char *allm_arch_name(enum allm_arch a);

#endif
