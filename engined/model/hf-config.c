/* A Hugging Face directory's config.json (+ generation_config.json): parsing into
 * the engine's config (the Llama-shaped families and OPT), and writing one (what
 * allm-mkmodel and the tests' model writer emit). */
#include "hf-model.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>


/* --- small typed getters: each failure names the file and the key ---------- */

static int get_int(json_t *o, const char *path, const char *key, bool required, int64_t def,
		   int64_t *ret, struct allm_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		if (required)
			return allm_err_set(err, -EINVAL, "%s: missing required field '%s'", path, key);
		*ret = def;
		return 0;
	}
	if (json_is_integer(v)) {
		*ret = json_integer_value(v);
		return 0;
	}
	/* some exporters write 4096.0 */
	if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
	    fabs(json_real_value(v)) < 9e15) {
		*ret = (int64_t)json_real_value(v);
		return 0;
	}
	return allm_err_set(err, -EINVAL, "%s: field '%s' must be an integer", path, key);
}

static int get_i32(json_t *o, const char *path, const char *key, bool required, int64_t def,
		   int32_t *ret, struct allm_err *err)
{
	int64_t v = 0;
	int r = get_int(o, path, key, required, def, &v, err);
	if (r)
		return r;
	if (v < INT32_MIN || v > INT32_MAX)
		return allm_err_set(err, -ERANGE, "%s: field '%s' out of range", path, key);
	*ret = (int32_t)v;
	return 0;
}

static int get_float(json_t *o, const char *path, const char *key, double def, float *ret,
		     struct allm_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		*ret = (float)def;
		return 0;
	}
	if (!json_is_number(v))
		return allm_err_set(err, -EINVAL, "%s: field '%s' must be a number", path, key);
	*ret = (float)json_number_value(v);
	return 0;
}

static int get_bool(json_t *o, const char *path, const char *key, bool def, bool *ret,
		    struct allm_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		*ret = def;
		return 0;
	}
	if (!json_is_boolean(v))
		return allm_err_set(err, -EINVAL, "%s: field '%s' must be true or false", path, key);
	*ret = json_is_true(v);
	return 0;
}

/* eos_token_id may be an int or a list of ints (Llama-3, stories260K). */
static int get_eos(json_t *o, const char *path, struct allm_model_config *c,
		   struct allm_err *err)
{
	json_t *v = json_object_get(o, "eos_token_id");
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		c->n_eos = 1;
		c->eos_ids[0] = (int32_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_array(v))
		return allm_err_set(err, -EINVAL, "%s: 'eos_token_id' must be an integer or a list",
				    path);
	size_t i;
	json_t *e;
	c->n_eos = 0;
	json_array_foreach(v, i, e) {
		if (!json_is_integer(e))
			return allm_err_set(err, -EINVAL, "%s: 'eos_token_id'[%zu] is not an integer",
					    path, i);
		if (c->n_eos == ALLM_MAX_EOS)
			return allm_err_set(err, -E2BIG, "%s: 'eos_token_id' lists more than %d ids", path,
					    ALLM_MAX_EOS);
		c->eos_ids[c->n_eos++] = (int32_t)json_integer_value(e);
	}
	return 0;
}

static int parse_rope_scaling(json_t *o, const char *path, struct allm_model_config *c,
			      struct allm_err *err)
{
	json_t *rs = json_object_get(o, "rope_scaling");
	if (!rs || json_is_null(rs))
		return 0;
	if (!json_is_object(rs))
		return allm_err_set(err, -EINVAL, "%s: 'rope_scaling' must be an object or null", path);
	json_t *t = json_object_get(rs, "rope_type");
	if (!t)
		t = json_object_get(rs, "type");
	const char *type = json_string_value(t);
	if (!type)
		return allm_err_set(err, -EINVAL, "%s: 'rope_scaling' has no rope_type", path);
	int r = get_float(rs, path, "factor", 1.0, &c->rope_factor, err);
	if (r)
		return r;
	if (!strcmp(type, "default"))
		return 0;
	if (!strcmp(type, "linear")) {
		c->rope_scaling = ALLM_ROPE_LINEAR;
	} else if (!strcmp(type, "llama3")) {
		c->rope_scaling = ALLM_ROPE_LLAMA3;
		if ((r = get_float(rs, path, "low_freq_factor", 1.0, &c->rope_low_freq_factor, err)) ||
		    (r = get_float(rs, path, "high_freq_factor", 4.0, &c->rope_high_freq_factor, err)) ||
		    (r = get_i32(rs, path, "original_max_position_embeddings", true, 0,
				 &c->rope_orig_max_pos, err)))
			return r;
	} else {
		return allm_err_set(err, -ENOTSUP,
				    "%s: rope_scaling type '%s' is not supported (default, linear, llama3)",
				    path, type);
	}
	if (!(c->rope_factor > 0))
		return allm_err_set(err, -EINVAL, "%s: rope_scaling factor must be > 0", path);
	return 0;
}

/* The layers' kinds from Gemma 3's layer_types ("sliding_attention" /
 * "full_attention" per layer), which must follow one pattern: every n-th global. */
static int parse_layer_types(json_t *o, const char *p, struct allm_model_config *c,
			     struct allm_err *err)
{
	json_t *lt = json_object_get(o, "layer_types");
	if (!lt || json_is_null(lt))
		return get_i32(o, p, "sliding_window_pattern", false, c->swa_pattern, &c->swa_pattern, err);
	if (!json_is_array(lt) || (int64_t)json_array_size(lt) != c->n_layers)
		return allm_err_set(err, -EINVAL, "%s: 'layer_types' must list the %d layers", p, c->n_layers);
	int32_t first_full = 0;
	for (int32_t l = 0; l < c->n_layers && !first_full; l++)
		if (!strcmp(json_string_value(json_array_get(lt, (size_t)l)) ?: "", "full_attention"))
			first_full = l + 1;
	c->swa_pattern = first_full; /* 0: no global layer, all local */
	for (int32_t l = 0; l < c->n_layers; l++) {
		const char *t = json_string_value(json_array_get(lt, (size_t)l));
		bool full = t && !strcmp(t, "full_attention"), local = t && !strcmp(t, "sliding_attention");
		if (!full && !local)
			return allm_err_set(err, -EINVAL, "%s: layer_types[%d] is not sliding_attention or "
					    "full_attention", p, l);
		if (local != allm_model_layer_local(c, l))
			return allm_err_set(err, -ENOTSUP, "%s: layer_types is not one global layer every "
					    "%d (not supported)", p, first_full);
	}
	return 0;
}

/* The Llama-shaped families: llama (and mistral), qwen2, qwen3, gemma3_text, phi3. */
static int parse_decoder(json_t *o, const char *p, const struct allm_arch_desc *ad, const char *mt,
			 struct allm_model_config *c, struct allm_err *err)
{
	int r;
	bool gemma = ad->arch == ALLM_ARCH_GEMMA3, swa = false;
	c->arch = ad->arch;
	c->act = ad->act;
	if ((r = get_i32(o, p, "hidden_size", true, 0, &c->hidden, err)) ||
	    (r = get_i32(o, p, "intermediate_size", true, 0, &c->intermediate, err)) ||
	    (r = get_i32(o, p, "num_hidden_layers", true, 0, &c->n_layers, err)) ||
	    (r = get_i32(o, p, "num_attention_heads", true, 0, &c->n_heads, err)) ||
	    (r = get_i32(o, p, "num_key_value_heads", false, c->n_heads, &c->n_kv_heads, err)) ||
	    (r = get_i32(o, p, "head_dim", false, c->n_heads > 0 ? c->hidden / c->n_heads : 0,
			 &c->head_dim, err)) ||
	    (r = get_i32(o, p, "max_position_embeddings", false, 2048, &c->max_pos, err)) ||
	    (r = get_float(o, p, "rms_norm_eps", 1e-6, &c->norm_eps, err)) ||
	    (r = get_float(o, p, "rope_theta", 10000.0, &c->rope_theta, err)) ||
	    (r = get_bool(o, p, "tie_word_embeddings", gemma, &c->tie_embeddings, err)) ||
	    (r = get_bool(o, p, "attention_bias", false, &c->attn_bias, err)) ||
	    (r = get_bool(o, p, "mlp_bias", false, &c->mlp_bias, err)) ||
	    (r = get_bool(o, p, "use_sliding_window", false, &swa, err)))
		return r;
	if (ad->qkv_bias)
		c->attn_bias = false; /* Qwen2's q/k/v biases are the architecture's */
	const char *act = json_string_value(json_object_get(o, gemma ? "hidden_activation" : "hidden_act"));
	const char *want = ad->act == ALLM_ACT_GELU_TANH ? "gelu_pytorch_tanh" : "silu";
	if (act && strcmp(act, want) && !(ad->act == ALLM_ACT_SILU && !strcmp(act, "swish")))
		return allm_err_set(err, -ENOTSUP, "%s: hidden activation '%s' is not supported for %s (%s)",
				    p, act, mt, want);
	double prf = 1.0;
	json_t *v = json_object_get(o, "partial_rotary_factor");
	if (v && json_is_number(v))
		prf = json_number_value(v);
	if (prf != 1.0)
		return allm_err_set(err, -ENOTSUP, "%s: partial_rotary_factor %g (RoPE over part of a head) "
				    "is not supported", p, prf);
	static const char *const softcaps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(softcaps); i++) {
		v = json_object_get(o, softcaps[i]);
		if (v && !json_is_null(v))
			return allm_err_set(err, -ENOTSUP, "%s: %s is not supported", p, softcaps[i]);
	}
	/* sliding windows: Mistral's and Phi-3's over every layer, Gemma 3's local
	 * layers; Qwen's use_sliding_window (windows from max_window_layers up) is not
	 * run */
	if (ad->qkv_bias || ad->arch == ALLM_ARCH_QWEN3) {
		if (swa)
			return allm_err_set(err, -ENOTSUP, "%s: use_sliding_window (Qwen's windows above "
					    "max_window_layers) is not supported", p);
	} else if (strcmp(mt, "llama")) {
		if ((r = get_i32(o, p, "sliding_window", false, 0, &c->sliding_window, err)))
			return r;
	}
	if (gemma) {
		float qpas;
		c->swa_pattern = ad->swa_pattern;
		if ((r = get_float(o, p, "query_pre_attn_scalar", c->head_dim, &qpas, err)) ||
		    (r = get_float(o, p, "rope_local_base_freq", ad->rope_local_theta, &c->rope_local_theta, err)))
			return r;
		if (!(qpas > 0))
			return allm_err_set(err, -EINVAL, "%s: query_pre_attn_scalar must be > 0", p);
		c->query_scale = 1.0f / sqrtf(qpas);
		if (c->sliding_window > 0 && (r = parse_layer_types(o, p, c, err)))
			return r;
	}
	if (c->sliding_window <= 0) {
		c->sliding_window = 0;
		c->rope_local_theta = 0;
	}
	return parse_rope_scaling(o, p, c, err);
}

static int parse_opt(json_t *o, const char *p, struct allm_model_config *c,
		     struct allm_err *err)
{
	int r;
	bool enable_bias, remove_final;
	c->arch = ALLM_ARCH_OPT;
	c->act = ALLM_ACT_RELU;
	c->norm_eps = 1e-5f;
	c->tie_embeddings = true;
	if ((r = get_i32(o, p, "hidden_size", true, 0, &c->hidden, err)) ||
	    (r = get_i32(o, p, "ffn_dim", true, 0, &c->intermediate, err)) ||
	    (r = get_i32(o, p, "num_hidden_layers", true, 0, &c->n_layers, err)) ||
	    (r = get_i32(o, p, "num_attention_heads", true, 0, &c->n_heads, err)) ||
	    (r = get_i32(o, p, "max_position_embeddings", false, 2048, &c->max_pos, err)) ||
	    (r = get_i32(o, p, "word_embed_proj_dim", false, c->hidden, &c->embed_proj_dim, err)) ||
	    (r = get_bool(o, p, "do_layer_norm_before", true, &c->pre_ln, err)) ||
	    (r = get_bool(o, p, "enable_bias", true, &enable_bias, err)) ||
	    (r = get_bool(o, p, "layer_norm_elementwise_affine", true, &c->ln_affine, err)) ||
	    (r = get_bool(o, p, "_remove_final_layer_norm", false, &remove_final, err)) ||
	    (r = get_bool(o, p, "tie_word_embeddings", true, &c->tie_embeddings, err)))
		return r;
	c->n_kv_heads = c->n_heads;
	c->head_dim = c->n_heads > 0 ? c->hidden / c->n_heads : 0;
	c->attn_bias = c->mlp_bias = enable_bias;
	c->final_ln = c->pre_ln && !remove_final;
	const char *act = json_string_value(json_object_get(o, "activation_function"));
	if (act && strcmp(act, "relu"))
		return allm_err_set(err, -ENOTSUP,
				    "%s: activation_function '%s' is not supported for opt (relu)", p, act);
	return 0;
}

/* Configs are small; a "config" this large is not one, and we will not read it. */
#define CONFIG_MAX_BYTES (16u << 20)

/* Reads dir/name (path is its name for messages). */
static json_t *load_json(const struct allm_vdir *dir, const char *name, const char *path,
			 bool required, int *ret_code, struct allm_err *err)
{
	json_error_t je;
	char *text = NULL;
	size_t len = 0;
	*ret_code = 0;
	int r = allm_vdir_read(dir, name, CONFIG_MAX_BYTES, &text, &len);
	if (r) {
		if (!required && r == -ENOENT)
			return NULL;
		*ret_code = allm_err_set(err, r, "%s: %s", path,
					 r == -EFBIG ? "too large for a config" : strerror(-r));
		return NULL;
	}
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	allm_free(text);
	if (!root) {
		*ret_code = allm_err_set(err, -EINVAL, "%s: invalid JSON at line %d: %s", path, je.line,
					 je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		*ret_code = allm_err_set(err, -EINVAL, "%s: top level must be an object", path);
		return NULL;
	}
	return root;
}

int allm_hf_model_config_load_from(const struct allm_vdir *dir, struct allm_model_config *ret,
				   struct allm_err *err)
{
	char path[4096], gpath[4096];
	struct allm_model_config c = {0};
	json_t *root = NULL, *gen = NULL;
	int r;

	allm_vdir_join(dir, "config.json", path, sizeof(path));
	allm_vdir_join(dir, "generation_config.json", gpath, sizeof(gpath));
	root = load_json(dir, "config.json", path, true, &r, err);
	if (!root)
		goto out;
	const char *mt = json_string_value(json_object_get(root, "model_type"));
	if (!mt) {
		r = allm_err_set(err, -EINVAL, "%s: missing 'model_type'", path);
		goto out;
	}
	/* Hugging Face's model_type names: mistral is Llama with a window, gemma3_text
	 * Gemma 3's text model (gemma3 itself is the multimodal one) */
	const struct allm_arch_desc *ad = allm_arch_by_name(mt, strlen(mt));
	if (!strcmp(mt, "mistral"))
		ad = allm_arch_describe(ALLM_ARCH_LLAMA);
	else if (!strcmp(mt, "gemma3_text"))
		ad = allm_arch_describe(ALLM_ARCH_GEMMA3);
	else if (!strcmp(mt, "gemma3"))
		ad = NULL;
	if (ad && ad->arch == ALLM_ARCH_OPT) {
		r = parse_opt(root, path, &c, err);
	} else if (ad) {
		r = parse_decoder(root, path, ad, mt, &c, err);
	} else {
		r = allm_err_set(err, -ENOTSUP,
				 "%s: unsupported architecture model_type '%s' (supported: llama, mistral, "
				 "opt, qwen2, qwen3, gemma3_text, phi3)%s", path, mt,
				 !strcmp(mt, "gemma3") ? "; gemma3 is the multimodal Gemma 3, whose text "
							 "model is not loaded from it" : "");
	}
	if (r)
		goto out;
	if ((r = get_i32(root, path, "vocab_size", true, 0, &c.vocab_size, err)) ||
	    (r = get_i32(root, path, "bos_token_id", false, -1, &c.bos_id, err)) ||
	    (r = get_eos(root, path, &c, err)))
		goto out;
	c.file_dtype = ALLM_DTYPE_F32;
	const char *td = json_string_value(json_object_get(root, "torch_dtype"));
	if (td && allm_dtype_parse(td, &c.file_dtype)) {
		r = allm_err_set(err, -ENOTSUP, "%s: unsupported torch_dtype '%s' (float32, float16, bfloat16)",
				 path, td);
		goto out;
	}
	gen = load_json(dir, "generation_config.json", gpath, false, &r, err);
	if (r)
		goto out;
	if (gen && (r = get_eos(gen, gpath, &c, err)))
		goto out;
	if ((r = allm_model_config_validate(&c, path, err)))
		goto out;
	*ret = c;
out:
	json_decref(root);
	json_decref(gen);
	return r;
}

/* --- output ------------------------------------------------------------------ */

static int dump_json(json_t *o, const char *path, struct allm_err *err)
{
	int r = json_dump_file(o, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (r)
		return allm_err_set(err, -EIO, "cannot write %s", path);
	return 0;
}

int allm_model_config_save(const struct allm_model_config *c, const char *dir,
			   struct allm_err *err)
{
	char path[4096];
	json_t *o = json_object();
	json_t *eos = json_array();
	for (int i = 0; i < c->n_eos; i++)
		json_array_append_new(eos, json_integer(c->eos_ids[i]));

	const struct allm_arch_desc *ad = allm_arch_describe(c->arch);
	if (!ad->layernorm) {
		static const char *const classes[ALLM_ARCH_COUNT] = {
			[ALLM_ARCH_LLAMA] = "LlamaForCausalLM", [ALLM_ARCH_QWEN2] = "Qwen2ForCausalLM",
			[ALLM_ARCH_QWEN3] = "Qwen3ForCausalLM", [ALLM_ARCH_GEMMA3] = "Gemma3ForCausalLM",
			[ALLM_ARCH_PHI3] = "Phi3ForCausalLM",
		};
		bool gemma = c->arch == ALLM_ARCH_GEMMA3;
		/* a Llama with a window is Mistral; Gemma 3's text model is gemma3_text */
		const char *mt = gemma ? "gemma3_text" : c->arch == ALLM_ARCH_LLAMA && c->sliding_window ? "mistral" : ad->name;
		json_object_set_new(o, "architectures", json_pack("[s]", classes[c->arch]));
		json_object_set_new(o, "model_type", json_string(mt));
		json_object_set_new(o, "hidden_size", json_integer(c->hidden));
		json_object_set_new(o, "intermediate_size", json_integer(c->intermediate));
		json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layers));
		json_object_set_new(o, "num_attention_heads", json_integer(c->n_heads));
		json_object_set_new(o, "num_key_value_heads", json_integer(c->n_kv_heads));
		json_object_set_new(o, "head_dim", json_integer(c->head_dim));
		json_object_set_new(o, "rms_norm_eps", json_real(c->norm_eps));
		json_object_set_new(o, "rope_theta", json_real(c->rope_theta));
		if (c->rope_scaling == ALLM_ROPE_LINEAR)
			json_object_set_new(o, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "linear",
									 "factor", c->rope_factor));
		else if (c->rope_scaling == ALLM_ROPE_LLAMA3)
			json_object_set_new(o, "rope_scaling",
					    json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3", "factor",
						      c->rope_factor, "low_freq_factor", c->rope_low_freq_factor,
						      "high_freq_factor", c->rope_high_freq_factor,
						      "original_max_position_embeddings", c->rope_orig_max_pos));
		else
			json_object_set_new(o, "rope_scaling", json_null());
		json_object_set_new(o, gemma ? "hidden_activation" : "hidden_act",
				    json_string(gemma ? "gelu_pytorch_tanh" : "silu"));
		json_object_set_new(o, "attention_bias", json_boolean(c->attn_bias));
		json_object_set_new(o, "mlp_bias", json_boolean(c->mlp_bias));
		if (c->sliding_window)
			json_object_set_new(o, "sliding_window", json_integer(c->sliding_window));
		if (gemma) {
			json_t *lt = json_array();
			for (int32_t l = 0; l < c->n_layers; l++)
				json_array_append_new(lt, json_string(allm_model_layer_local(c, l) ? "sliding_attention"
												  : "full_attention"));
			json_object_set_new(o, "layer_types", lt);
			json_object_set_new(o, "rope_local_base_freq", json_real(c->rope_local_theta));
			float qs = allm_model_attn_scale(c);
			json_object_set_new(o, "query_pre_attn_scalar", json_real(1.0 / ((double)qs * qs)));
		}
	} else {
		json_object_set_new(o, "architectures", json_pack("[s]", "OPTForCausalLM"));
		json_object_set_new(o, "model_type", json_string("opt"));
		json_object_set_new(o, "hidden_size", json_integer(c->hidden));
		json_object_set_new(o, "ffn_dim", json_integer(c->intermediate));
		json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layers));
		json_object_set_new(o, "num_attention_heads", json_integer(c->n_heads));
		json_object_set_new(o, "word_embed_proj_dim", json_integer(c->embed_proj_dim));
		json_object_set_new(o, "do_layer_norm_before", json_boolean(c->pre_ln));
		json_object_set_new(o, "_remove_final_layer_norm", json_boolean(c->pre_ln && !c->final_ln));
		json_object_set_new(o, "enable_bias", json_boolean(c->attn_bias));
		json_object_set_new(o, "layer_norm_elementwise_affine", json_boolean(c->ln_affine));
		json_object_set_new(o, "activation_function", json_string("relu"));
		json_object_set_new(o, "pad_token_id", json_integer(1));
	}
	json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
	json_object_set_new(o, "max_position_embeddings", json_integer(c->max_pos));
	json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_embeddings));
	json_object_set_new(o, "bos_token_id", json_integer(c->bos_id));
	json_object_set_new(o, "eos_token_id", c->n_eos == 1 ? json_integer(c->eos_ids[0]) : json_copy(eos));
	json_object_set_new(o, "torch_dtype",
			    json_string(c->file_dtype == ALLM_DTYPE_F32   ? "float32"
					: c->file_dtype == ALLM_DTYPE_F16 ? "float16"
									  : "bfloat16"));
	snprintf(path, sizeof(path), "%s/config.json", dir);
	int r = dump_json(o, path, err);
	if (r) {
		json_decref(eos);
		return r;
	}
	json_t *g = json_object();
	json_object_set_new(g, "bos_token_id", json_integer(c->bos_id));
	json_object_set_new(g, "eos_token_id", eos);
	snprintf(path, sizeof(path), "%s/generation_config.json", dir);
	return dump_json(g, path, err);
}
