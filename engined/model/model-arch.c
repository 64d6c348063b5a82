/* The architectures the one forward pass runs, as rows of values (model-config.h,
 * struct allm_arch_desc): what each adds to a Llama-shaped decoder. */
#include "model-config.h"

#include <math.h>

static const struct allm_arch_desc archs[ALLM_ARCH_COUNT] = {
	[ALLM_ARCH_LLAMA] = {.arch = ALLM_ARCH_LLAMA, .name = "llama", .rope = true, .gated_mlp = true,
			     .act = ALLM_ACT_SILU, .gguf_qk_interleaved = true},
	[ALLM_ARCH_OPT] = {.arch = ALLM_ARCH_OPT, .name = "opt", .layernorm = true, .act = ALLM_ACT_RELU},
	[ALLM_ARCH_QWEN2] = {.arch = ALLM_ARCH_QWEN2, .name = "qwen2", .rope = true, .gated_mlp = true,
			     .act = ALLM_ACT_SILU, .qkv_bias = true},
	[ALLM_ARCH_QWEN3] = {.arch = ALLM_ARCH_QWEN3, .name = "qwen3", .rope = true, .gated_mlp = true,
			     .act = ALLM_ACT_SILU, .qk_norm = true},
	[ALLM_ARCH_GEMMA3] = {.arch = ALLM_ARCH_GEMMA3, .name = "gemma3", .rope = true, .gated_mlp = true,
			      .act = ALLM_ACT_GELU_TANH, .qk_norm = true, .post_norms = true,
			      .embed_scale = true, .hf_norm_offset = 1.0f, .swa_pattern = 6,
			      .rope_local_theta = 10000.0f},
	[ALLM_ARCH_PHI3] = {.arch = ALLM_ARCH_PHI3, .name = "phi3", .rope = true, .gated_mlp = true,
			    .act = ALLM_ACT_SILU, .fused_qkv = true, .fused_gate_up = true,
			    .gguf_no_window = true},
};

const struct allm_arch_desc *allm_arch_describe(enum allm_arch arch)
{
	return (unsigned)arch < ALLM_ARCH_COUNT ? &archs[arch] : NULL;
}

const struct allm_arch_desc *allm_arch_by_name(const char *name, size_t len)
{
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(archs); i++)
		if (strlen(archs[i].name) == len && !memcmp(archs[i].name, name, len))
			return &archs[i];
	return NULL;
}

const char *allm_arch_names(void)
{
	return "llama, opt, qwen2, qwen3, gemma3, phi3";
}

const char *allm_arch_name(enum allm_arch a)
{
	const struct allm_arch_desc *d = allm_arch_describe(a);
	return d ? d->name : "?";
}

bool allm_model_layer_local(const struct allm_model_config *c, int32_t l)
{
	return c->sliding_window > 0 && (c->swa_pattern <= 0 || (l + 1) % c->swa_pattern != 0);
}

int32_t allm_model_passed_window(const struct allm_model_config *c)
{
	for (int32_t l = 0; l < c->n_layers; l++)
		if (!allm_model_layer_local(c, l))
			return 0;
	return c->sliding_window;
}

float allm_model_attn_scale(const struct allm_model_config *c)
{
	return c->query_scale > 0 ? c->query_scale : 1.0f / sqrtf((float)c->head_dim);
}
