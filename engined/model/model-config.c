/* Model hyper-parameters that do not depend on a file format: validation, the
 * --dummy / allm-mkmodel presets, RoPE frequencies, parameter counts. config.json is
 * hf-config.c's, GGUF metadata gguf-config.c's; model-load.c picks one. */
#include "model-config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

int allm_model_config_validate(const struct allm_model_config *c, const char *what,
			       struct allm_err *err)
{
#define NEED(cond, ...) \
	do { \
		if (!(cond)) \
			return allm_err_set(err, -EINVAL, __VA_ARGS__); \
	} while (0)
	NEED(c->vocab_size > 0 && c->vocab_size <= (1 << 24), "%s: vocab_size %d out of range", what,
	     c->vocab_size);
	NEED(c->hidden > 0 && c->hidden <= 65536, "%s: hidden_size %d out of range", what, c->hidden);
	NEED(c->intermediate > 0 && c->intermediate <= 1 << 20, "%s: intermediate size %d out of range",
	     what, c->intermediate);
	NEED(c->n_layers > 0 && c->n_layers <= 1024, "%s: num_hidden_layers %d out of range", what,
	     c->n_layers);
	NEED(c->n_heads > 0 && c->n_heads <= 1024, "%s: num_attention_heads %d out of range", what,
	     c->n_heads);
	NEED(c->n_kv_heads > 0 && c->n_heads % c->n_kv_heads == 0,
	     "%s: num_key_value_heads %d must divide num_attention_heads %d", what, c->n_kv_heads,
	     c->n_heads);
	NEED(c->head_dim > 0 && c->head_dim % 2 == 0 && c->head_dim <= ALLM_MAX_HEAD_DIM,
	     "%s: head_dim %d must be even and at most %d", what, c->head_dim, ALLM_MAX_HEAD_DIM);
	NEED(c->max_pos > 0 && c->max_pos <= (1 << 24), "%s: max_position_embeddings %d out of range",
	     what, c->max_pos);
	NEED(c->norm_eps > 0 && c->norm_eps < 1, "%s: norm eps %g out of range", what, c->norm_eps);
	const struct allm_arch_desc *ad = allm_arch_describe(c->arch);
	NEED(ad, "%s: architecture %d is not one of %s", what, (int)c->arch, allm_arch_names());
	if (ad->rope)
		NEED(c->rope_theta > 0, "%s: rope_theta must be > 0", what);
	NEED(c->sliding_window >= 0 && (!c->sliding_window || ad->rope),
	     "%s: sliding_window %d out of range", what, c->sliding_window);
	NEED(c->swa_pattern >= 0 && c->swa_pattern <= 1024, "%s: sliding window pattern %d out of range",
	     what, c->swa_pattern);
	NEED(c->rope_local_theta >= 0 && isfinite(c->rope_local_theta),
	     "%s: local RoPE base %g out of range", what, c->rope_local_theta);
	NEED(c->query_scale >= 0 && isfinite(c->query_scale) && c->query_scale < 1e3,
	     "%s: attention scale %g out of range", what, c->query_scale);
	if (c->arch == ALLM_ARCH_OPT) {
		NEED(c->head_dim * c->n_heads == c->hidden,
		     "%s: hidden_size %d is not a multiple of num_attention_heads %d", what, c->hidden,
		     c->n_heads);
		NEED(c->embed_proj_dim > 0 && c->embed_proj_dim <= 65536,
		     "%s: word_embed_proj_dim %d out of range", what, c->embed_proj_dim);
	}
	for (int i = 0; i < c->n_eos; i++)
		NEED(c->eos_ids[i] >= 0 && c->eos_ids[i] < c->vocab_size,
		     "%s: eos_token_id %d outside the vocabulary", what, c->eos_ids[i]);
#undef NEED
	return 0;
}

/* --- presets ------------------------------------------------------------------ */

struct preset {
	const char *name;
	enum allm_arch arch;
	int32_t vocab, hidden, inter, layers, heads, kv_heads, max_pos;
};

/* Real shapes of the paper's models (llama-7b/13b/33b, opt-13b/30b) and small ones
 * for tests and CPU benchmarks. */
static const struct preset presets[] = {
	{"tiny", ALLM_ARCH_LLAMA, 512, 64, 176, 4, 8, 4, 512},
	{"small", ALLM_ARCH_LLAMA, 4096, 256, 688, 6, 8, 4, 1024},
	{"medium", ALLM_ARCH_LLAMA, 32000, 768, 2048, 12, 12, 12, 2048},
	{"llama-7b", ALLM_ARCH_LLAMA, 32000, 4096, 11008, 32, 32, 32, 4096},
	{"llama-13b", ALLM_ARCH_LLAMA, 32000, 5120, 13824, 40, 40, 40, 4096},
	{"llama-33b", ALLM_ARCH_LLAMA, 32000, 6656, 17920, 60, 52, 52, 2048},
	{"opt-tiny", ALLM_ARCH_OPT, 512, 64, 256, 4, 4, 4, 512},
	{"opt-small", ALLM_ARCH_OPT, 4096, 256, 1024, 6, 8, 8, 1024},
	{"opt-125m", ALLM_ARCH_OPT, 50272, 768, 3072, 12, 12, 12, 2048},
	{"opt-13b", ALLM_ARCH_OPT, 50272, 5120, 20480, 40, 40, 40, 2048},
	{"opt-30b", ALLM_ARCH_OPT, 50272, 7168, 28672, 48, 56, 56, 2048},
};

const char *allm_model_config_preset_names(void)
{
	return "tiny, small, medium, llama-7b, llama-13b, llama-33b, opt-tiny, opt-small, "
	       "opt-125m, opt-13b, opt-30b";
}

int allm_model_config_preset(const char *name, struct allm_model_config *ret,
			     struct allm_err *err)
{
	const struct preset *p = NULL;
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(presets); i++)
		if (!strcmp(presets[i].name, name) ||
		    (!strncmp(name, "llama-", 6) && !strcmp(presets[i].name, name + 6) &&
		     presets[i].arch == ALLM_ARCH_LLAMA))
			p = &presets[i];
	if (!p)
		return allm_err_set(err, -ENOENT, "unknown preset '%s' (known: %s)", name,
				    allm_model_config_preset_names());
	struct allm_model_config c = {0};
	c.arch = p->arch;
	c.vocab_size = p->vocab;
	c.hidden = p->hidden;
	c.intermediate = p->inter;
	c.n_layers = p->layers;
	c.n_heads = p->heads;
	c.n_kv_heads = p->kv_heads;
	c.head_dim = p->hidden / p->heads;
	c.max_pos = p->max_pos;
	c.file_dtype = ALLM_DTYPE_F32;
	if (p->arch == ALLM_ARCH_LLAMA) {
		c.act = ALLM_ACT_SILU;
		c.norm_eps = 1e-5f;
		c.rope_theta = 10000.0f;
		c.bos_id = 1;
		c.n_eos = 1;
		c.eos_ids[0] = 2;
	} else {
		c.act = ALLM_ACT_RELU;
		c.norm_eps = 1e-5f;
		c.tie_embeddings = true;
		c.attn_bias = c.mlp_bias = true;
		c.pre_ln = true;
		c.final_ln = true;
		c.ln_affine = true;
		c.embed_proj_dim = p->hidden;
		c.bos_id = 2;
		c.n_eos = 1;
		c.eos_ids[0] = 2;
	}
	*ret = c;
	return 0;
}


void allm_model_config_inv_freq(const struct allm_model_config *c, float *ret)
{
	int32_t half = c->head_dim / 2;
	for (int32_t i = 0; i < half; i++) {
		double f = pow((double)c->rope_theta, -2.0 * i / (double)c->head_dim);
		if (c->rope_scaling == ALLM_ROPE_LINEAR) {
			f /= c->rope_factor;
		} else if (c->rope_scaling == ALLM_ROPE_LLAMA3) {
			/* Llama-3.1: long wavelengths scaled by factor, short kept, smooth
			 * interpolation between the two cut-offs. */
			double lo_wl = c->rope_orig_max_pos / c->rope_low_freq_factor;
			double hi_wl = c->rope_orig_max_pos / c->rope_high_freq_factor;
			double wl = 2.0 * M_PI / f;
			if (wl > lo_wl) {
				f /= c->rope_factor;
			} else if (wl >= hi_wl) {
				double s = (c->rope_orig_max_pos / wl - c->rope_low_freq_factor) /
					   (c->rope_high_freq_factor - c->rope_low_freq_factor);
				f = (1 - s) * f / c->rope_factor + s * f;
			}
		}
		ret[i] = (float)f;
	}
}

void allm_model_config_inv_freq_local(const struct allm_model_config *c, float *ret)
{
	for (int32_t i = 0; i < c->head_dim / 2; i++)
		ret[i] = (float)pow((double)c->rope_local_theta, -2.0 * i / (double)c->head_dim);
}

uint64_t allm_model_config_n_params(const struct allm_model_config *c)
{
	uint64_t d = c->hidden, f = c->intermediate, v = c->vocab_size;
	uint64_t q = (uint64_t)c->n_heads * c->head_dim, kv = (uint64_t)c->n_kv_heads * c->head_dim;
	uint64_t per_layer;
	uint64_t total;
	if (!allm_arch_describe(c->arch)->layernorm) {
		per_layer = d * q + 2 * d * kv + q * d + 3 * d * f + 2 * d;
		total = v * d + d + (c->tie_embeddings ? 0 : v * d);
	} else {
		per_layer = 4 * d * d + 2 * d * f + 4 * d + f + d + 4 * d;
		uint64_t p = c->embed_proj_dim;
		total = v * p + ((uint64_t)c->max_pos + 2) * d + 2 * d + (p != d ? 2 * p * d : 0);
	}
	return total + per_layer * c->n_layers;
}
