/* A model from a Hugging Face directory (on disk or embedded, common/vdir.h):
 * config.json (+ generation_config.json) in hf-config.c, safetensors weights in
 * hf-model.c. A peer of gguf-model.h; model-load.c picks between them, callers use
 * allm_model_config_load_from() and allm_model_load_from().
 *
 * Families: llama and mistral (model_type; mistral's sliding_window over every
 * layer), qwen2 and qwen3 (use_sliding_window refused), gemma3_text (layer_types or
 * sliding_window_pattern, rope_local_base_freq, query_pre_attn_scalar; its RMSNorm
 * weights stored as w - 1 get the 1 back at load), phi3 (qkv_proj and gate_up_proj
 * sliced into q/k/v and gate/up at load), opt. */
#ifndef ALLM_HF_MODEL_H
#define ALLM_HF_MODEL_H

#include "model.h"

/* The hyper-parameters in dir/config.json and dir/generation_config.json. Validates
 * every field it uses. 0 or -errno with err naming the file and field. */
int allm_hf_model_config_load_from(const struct allm_vdir *dir, struct allm_model_config *ret,
				   struct allm_err *err);

/* Loads dir's weights onto be (see allm_model_load). */
int allm_hf_model_load_from(allm_backend_t *be, const struct allm_vdir *dir,
			    const struct allm_model_load_opts *o, struct allm_model **ret,
			    struct allm_err *err);

#endif
