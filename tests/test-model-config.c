/* Description: model configuration: presets of the paper's shapes, config.json / generation_config.json parsing, save/load round trips, rope_scaling and validation errors. */
#include "model-config.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test-check.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void remove_file(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
}

static void cleanup(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			remove_file(e->d_name);
	closedir(d);
	rmdir(tmpdir);
}

/* A small valid llama config.json with `extra` spliced in (", \"k\": v" ...). */
static void write_llama(const char *extra)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 176,"
		 " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 4,"
		 " \"vocab_size\": 512, \"max_position_embeddings\": 256%s}",
		 extra);
	write_file("config.json", text);
}

static int load(struct allm_model_config *c, struct allm_err *err)
{
	memset(c, 0x5a, sizeof(*c));
	memset(err, 0, sizeof(*err));
	return allm_model_config_load(tmpdir, c, err);
}

static void test_presets(void)
{
	struct allm_model_config c;
	struct allm_err err = {{0}};
	struct {
		const char *name;
		enum allm_arch arch;
		int32_t hidden, layers, inter, heads, kv_heads, head_dim, vocab;
	} want[] = {
		{"tiny", ALLM_ARCH_LLAMA, 64, 4, 176, 8, 4, 8, 512},
		{"llama-7b", ALLM_ARCH_LLAMA, 4096, 32, 11008, 32, 32, 128, 32000},
		{"llama-13b", ALLM_ARCH_LLAMA, 5120, 40, 13824, 40, 40, 128, 32000},
		{"opt-13b", ALLM_ARCH_OPT, 5120, 40, 20480, 40, 40, 128, 50272},
		{"opt-30b", ALLM_ARCH_OPT, 7168, 48, 28672, 56, 56, 128, 50272},
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(want); i++) {
		int r = allm_model_config_preset(want[i].name, &c, &err);
		CHECK(r == 0, "preset %s: %d %s", want[i].name, r, err.msg);
		if (r)
			continue;
		CHECK(c.arch == want[i].arch && c.hidden == want[i].hidden && c.n_layers == want[i].layers &&
		      c.intermediate == want[i].inter && c.n_heads == want[i].heads &&
		      c.n_kv_heads == want[i].kv_heads && c.head_dim == want[i].head_dim &&
		      c.vocab_size == want[i].vocab,
		      "preset %s: arch %d hidden %d layers %d inter %d heads %d/%d head_dim %d vocab %d",
		      want[i].name, c.arch, c.hidden, c.n_layers, c.intermediate, c.n_heads, c.n_kv_heads,
		      c.head_dim, c.vocab_size);
		CHECK(allm_model_config_validate(&c, want[i].name, &err) == 0, "preset %s invalid: %s",
		      want[i].name, err.msg);
		CHECK(c.n_eos >= 1 && c.max_pos >= 512, "preset %s: n_eos %d max_pos %d", want[i].name,
		      c.n_eos, c.max_pos);
		if (c.arch == ALLM_ARCH_OPT)
			CHECK(c.act == ALLM_ACT_RELU && c.pre_ln && c.attn_bias && c.tie_embeddings &&
			      c.embed_proj_dim == c.hidden, "preset %s: OPT flags", want[i].name);
		else
			CHECK(c.act == ALLM_ACT_SILU && c.rope_theta > 0, "preset %s: llama flags", want[i].name);
	}
	/* llama-7b is ~6.7 B parameters */
	allm_model_config_preset("llama-7b", &c, &err);
	uint64_t np = allm_model_config_n_params(&c);
	CHECK(np > 6600000000ull && np < 6800000000ull, "llama-7b has %llu parameters", (unsigned long long)np);
	allm_model_config_preset("opt-30b", &c, &err);
	np = allm_model_config_n_params(&c);
	CHECK(np > 29000000000ull && np < 31000000000ull, "opt-30b has %llu parameters", (unsigned long long)np);

	/* every advertised name loads */
	char names[512], *save = NULL;
	snprintf(names, sizeof(names), "%s", allm_model_config_preset_names());
	for (char *n = strtok_r(names, ", ", &save); n; n = strtok_r(NULL, ", ", &save))
		CHECK(allm_model_config_preset(n, &c, &err) == 0, "advertised preset %s: %s", n, err.msg);

	memset(&err, 0, sizeof(err));
	int r = allm_model_config_preset("llama-70x", &c, &err);
	CHECK(r == -ENOENT, "unknown preset returned %d", r);
	CHECK(strstr(err.msg, "llama-70x") && strstr(err.msg, "llama-7b") && strstr(err.msg, "opt-30b") &&
	      strstr(err.msg, "tiny"), "unknown preset message does not list names: %s", err.msg);
}

static void check_same(const struct allm_model_config *a, const struct allm_model_config *b,
		       const char *what)
{
#define SAME(f) CHECK(a->f == b->f, "%s: " #f " differs after the round trip", what)
	SAME(arch);
	SAME(vocab_size);
	SAME(hidden);
	SAME(intermediate);
	SAME(n_layers);
	SAME(n_heads);
	SAME(n_kv_heads);
	SAME(head_dim);
	SAME(max_pos);
	SAME(norm_eps);
	SAME(act);
	SAME(tie_embeddings);
	SAME(attn_bias);
	SAME(mlp_bias);
	SAME(bos_id);
	SAME(n_eos);
	SAME(file_dtype);
	if (a->arch == ALLM_ARCH_LLAMA) {
		SAME(rope_theta);
		SAME(rope_scaling);
	} else {
		SAME(pre_ln);
		SAME(final_ln);
		SAME(ln_affine);
		SAME(embed_proj_dim);
	}
	for (int i = 0; i < a->n_eos && i < ALLM_MAX_EOS; i++)
		SAME(eos_ids[i]);
#undef SAME
}

static void round_trip(const struct allm_model_config *c, const char *what)
{
	struct allm_model_config back;
	struct allm_err err = {{0}};
	int r = allm_model_config_save(c, tmpdir, &err);
	CHECK(r == 0, "%s: save: %s", what, err.msg);
	r = load(&back, &err);
	CHECK(r == 0, "%s: load after save: %s", what, err.msg);
	if (!r)
		check_same(c, &back, what);
}

static void test_round_trip(void)
{
	struct allm_model_config c;
	struct allm_err err;

	allm_model_config_preset("tiny", &c, &err);
	round_trip(&c, "tiny");

	allm_model_config_preset("tiny", &c, &err);
	c.n_kv_heads = 2;
	c.tie_embeddings = false;
	c.attn_bias = c.mlp_bias = true;
	c.rope_theta = 500000.0f;
	c.head_dim = 16; /* explicit head_dim != hidden / heads */
	c.norm_eps = 1e-6f;
	c.n_eos = 3;
	c.eos_ids[0] = 2;
	c.eos_ids[1] = 7;
	c.eos_ids[2] = 0;
	c.file_dtype = ALLM_DTYPE_BF16;
	round_trip(&c, "llama GQA untied bias bf16 3 eos");

	allm_model_config_preset("opt-tiny", &c, &err);
	round_trip(&c, "opt-tiny");
	c.pre_ln = false;
	c.final_ln = false;
	c.embed_proj_dim = 32;
	c.file_dtype = ALLM_DTYPE_F16;
	round_trip(&c, "opt post-ln proj 32 f16");
	allm_model_config_preset("opt-tiny", &c, &err);
	c.attn_bias = c.mlp_bias = false;
	c.ln_affine = false;
	c.final_ln = false; /* pre-LN without the decoder's final LayerNorm (opt-350m) */
	round_trip(&c, "opt no bias, no affine, no final LN");
	remove_file("generation_config.json");
}

static void test_eos(void)
{
	struct allm_model_config c;
	struct allm_err err;

	write_llama(", \"eos_token_id\": 2, \"bos_token_id\": 1");
	remove_file("generation_config.json");
	CHECK(load(&c, &err) == 0, "eos int: %s", err.msg);
	CHECK(c.n_eos == 1 && c.eos_ids[0] == 2 && c.bos_id == 1, "eos int: n_eos %d id %d bos %d",
	      c.n_eos, c.eos_ids[0], c.bos_id);

	write_llama("");
	CHECK(load(&c, &err) == 0, "no eos: %s", err.msg);
	CHECK(c.n_eos == 0 && c.bos_id == -1, "no eos: n_eos %d bos %d", c.n_eos, c.bos_id);

	write_llama(", \"eos_token_id\": [5, 6, 7]");
	CHECK(load(&c, &err) == 0, "eos list in config.json: %s", err.msg);
	CHECK(c.n_eos == 3 && c.eos_ids[0] == 5 && c.eos_ids[2] == 7, "eos list: n_eos %d", c.n_eos);

	/* generation_config.json wins; stories260K has [2, 1] there */
	write_llama(", \"eos_token_id\": 2");
	write_file("generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": [2, 1]}");
	CHECK(load(&c, &err) == 0, "gen eos list: %s", err.msg);
	CHECK(c.n_eos == 2 && c.eos_ids[0] == 2 && c.eos_ids[1] == 1, "gen eos [2, 1]: n_eos %d ids %d %d",
	      c.n_eos, c.eos_ids[0], c.eos_ids[1]);
	write_file("generation_config.json", "{\"eos_token_id\": 9}");
	CHECK(load(&c, &err) == 0, "gen eos int: %s", err.msg);
	CHECK(c.n_eos == 1 && c.eos_ids[0] == 9, "gen eos int: n_eos %d id %d", c.n_eos, c.eos_ids[0]);
	/* generation_config.json without eos keeps config.json's */
	write_file("generation_config.json", "{\"do_sample\": false}");
	CHECK(load(&c, &err) == 0 && c.n_eos == 1 && c.eos_ids[0] == 2, "gen without eos: n_eos %d",
	      c.n_eos);

	/* bad eos values */
	write_file("generation_config.json", "{\"eos_token_id\": [2, \"x\"]}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "generation_config.json") &&
	      strstr(err.msg, "eos_token_id"), "eos list with a string accepted or unclear: %s", err.msg);
	write_file("generation_config.json", "{\"eos_token_id\": 512}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "eos_token_id"), "eos outside the vocabulary: %s",
	      err.msg);
	write_file("generation_config.json", "{\"eos_token_id\": [1, 2,");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "generation_config.json"),
	      "bad JSON in generation_config.json: %s", err.msg);
	remove_file("generation_config.json");
}

static void test_rope_scaling(void)
{
	struct allm_model_config c;
	struct allm_err err;

	write_file("config.json",
		   "{\"model_type\": \"llama\", \"hidden_size\": 1024, \"intermediate_size\": 176,"
		   " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 4,"
		   " \"head_dim\": 128, \"vocab_size\": 512, \"rope_theta\": 500000.0,"
		   " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
		   " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
		   " \"original_max_position_embeddings\": 8192}}");
	CHECK(load(&c, &err) == 0, "llama3 rope_scaling: %s", err.msg);
	CHECK(c.rope_scaling == ALLM_ROPE_LLAMA3 && c.rope_factor == 8.0f && c.rope_orig_max_pos == 8192 &&
	      c.rope_high_freq_factor == 4.0f && c.head_dim == 128 && c.rope_theta == 500000.0f,
	      "llama3 fields: type %d factor %g orig %d", c.rope_scaling, c.rope_factor,
	      c.rope_orig_max_pos);
	CHECK(c.max_pos == 2048, "max_position_embeddings default %d", c.max_pos);
	/* high frequencies kept, low frequencies divided by the factor */
	float inv[64];
	allm_model_config_inv_freq(&c, inv);
	CHECK(fabsf(inv[0] - 1.0f) < 1e-6f, "llama3 inv_freq[0] = %g, want 1", inv[0]);
	double base63 = pow(500000.0, -126.0 / 128.0);
	CHECK(fabs(inv[63] - base63 / 8.0) < 1e-3 * base63, "llama3 inv_freq[63] = %g, want %g", inv[63],
	      base63 / 8);
	for (int i = 1; i < 64; i++)
		CHECK(inv[i] < inv[i - 1], "llama3 inv_freq not decreasing at %d", i);

	write_llama(", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}");
	CHECK(load(&c, &err) == 0 && c.rope_scaling == ALLM_ROPE_LINEAR && c.rope_factor == 2.0f,
	      "linear rope_scaling: %s", err.msg);
	write_llama(", \"rope_scaling\": null");
	CHECK(load(&c, &err) == 0 && c.rope_scaling == ALLM_ROPE_NONE, "null rope_scaling: %s", err.msg);

	write_llama(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}");
	CHECK(load(&c, &err) != 0, "yarn rope_scaling accepted");
	CHECK(strstr(err.msg, "rope_scaling") && strstr(err.msg, "yarn") && strstr(err.msg, "config.json"),
	      "unknown rope type message: %s", err.msg);
	write_llama(", \"rope_scaling\": {\"factor\": 4.0}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "rope_scaling"), "rope_scaling without a type: %s",
	      err.msg);
	write_llama(", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 0}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "rope_scaling"), "rope factor 0: %s", err.msg);
}

static void test_validation(void)
{
	struct allm_model_config c;
	struct allm_err err;
	char path[512];
	snprintf(path, sizeof(path), "%s/config.json", tmpdir);

	/* a key given twice is ambiguous: rejected */
	write_llama(", \"num_key_value_heads\": 2");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, path), "duplicate num_key_value_heads: %s", err.msg);
	write_file("config.json",
		   "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 176,"
		   " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 3,"
		   " \"vocab_size\": 512}");
	CHECK(load(&c, &err) == -EINVAL, "8 heads / 3 kv heads accepted");
	CHECK(strstr(err.msg, "num_key_value_heads") && strstr(err.msg, path),
	      "kv heads message: %s", err.msg);

	write_llama(", \"head_dim\": 7");
	CHECK(load(&c, &err) == -EINVAL, "odd head_dim accepted");
	CHECK(strstr(err.msg, "head_dim") && strstr(err.msg, path), "odd head_dim message: %s", err.msg);

	write_file("config.json",
		   "{\"model_type\": \"llama\", \"intermediate_size\": 176, \"num_hidden_layers\": 2,"
		   " \"num_attention_heads\": 8, \"vocab_size\": 512}");
	CHECK(load(&c, &err) != 0, "missing hidden_size accepted");
	CHECK(strstr(err.msg, "hidden_size") && strstr(err.msg, path), "missing hidden_size message: %s",
	      err.msg);
	/* the failed load leaves *ret untouched */
	struct allm_model_config before;
	memset(&before, 0x5a, sizeof(before));
	CHECK(!memcmp(&before, &c, sizeof(c)), "a failed load wrote into *ret");

	write_file("config.json",
		   "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 176,"
		   " \"num_hidden_layers\": 0, \"num_attention_heads\": 8, \"vocab_size\": 512}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "num_hidden_layers"), "0 layers: %s", err.msg);
	write_file("config.json",
		   "{\"model_type\": \"llama\", \"hidden_size\": \"64\", \"intermediate_size\": 176,"
		   " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 512}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "hidden_size"), "string hidden_size: %s", err.msg);
	write_file("config.json",
		   "{\"model_type\": \"llama\", \"hidden_size\": 64.0, \"intermediate_size\": 176,"
		   " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 512}");
	CHECK(load(&c, &err) == 0 && c.hidden == 64 && c.head_dim == 8 && c.n_kv_heads == 8,
	      "hidden_size 64.0: %s", err.msg);
	write_file("config.json",
		   "{\"model_type\": \"gpt2\", \"hidden_size\": 64, \"vocab_size\": 512}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "model_type") && strstr(err.msg, "gpt2"),
	      "gpt2: %s", err.msg);
	write_file("config.json",
		   "{\"model_type\": \"opt\", \"hidden_size\": 60, \"ffn_dim\": 256,"
		   " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 512}");
	CHECK(load(&c, &err) != 0, "opt hidden 60 / 8 heads accepted");
	write_file("config.json",
		   "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 176,"
		   " \"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 512,"
		   " \"torch_dtype\": \"int8\"}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "torch_dtype"), "torch_dtype int8: %s", err.msg);
	write_file("config.json", "{\"model_type\": \"llama\", \"hidden_size\": 64,,}");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "config.json") && strstr(err.msg, "JSON"),
	      "bad JSON: %s", err.msg);
	write_file("config.json", "[1, 2]");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "config.json"), "array config: %s", err.msg);
	remove_file("config.json");
	CHECK(load(&c, &err) != 0 && strstr(err.msg, "config.json"), "missing config.json: %s", err.msg);
}

/* A config.json of model_type mt with the llama sizes and `extra`. */
static void write_family(const char *mt, const char *extra)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "{\"model_type\": \"%s\", \"hidden_size\": 64, \"intermediate_size\": 176,"
		 " \"num_hidden_layers\": 6, \"num_attention_heads\": 8, \"num_key_value_heads\": 4,"
		 " \"vocab_size\": 512, \"max_position_embeddings\": 256%s}",
		 mt, extra);
	write_file("config.json", text);
}

/* The families beside llama/opt: what each config reads, and what is refused. */
static void test_families(void)
{
	struct allm_model_config c;
	struct allm_err err = {{0}};
	write_family("qwen2", ", \"use_sliding_window\": false, \"sliding_window\": 32768");
	CHECK(load(&c, &err) == 0 && c.arch == ALLM_ARCH_QWEN2 && !c.attn_bias && !c.sliding_window,
	      "qwen2: %s", err.msg);
	write_family("qwen2", ", \"use_sliding_window\": true");
	CHECK(load(&c, &err) == -ENOTSUP && strstr(err.msg, "use_sliding_window"), "qwen2 window: %s", err.msg);
	write_family("qwen3", ", \"head_dim\": 16");
	CHECK(load(&c, &err) == 0 && c.arch == ALLM_ARCH_QWEN3 && c.head_dim == 16, "qwen3: %s", err.msg);
	write_family("mistral", ", \"sliding_window\": 4096");
	CHECK(load(&c, &err) == 0 && c.arch == ALLM_ARCH_LLAMA && c.sliding_window == 4096 &&
	      allm_model_layer_local(&c, 0) && allm_model_layer_local(&c, 5), "mistral: %s", err.msg);
	write_family("mistral", ", \"sliding_window\": null");
	CHECK(load(&c, &err) == 0 && c.sliding_window == 0, "mistral without a window: %s", err.msg);
	write_family("phi3", ", \"sliding_window\": 2047");
	CHECK(load(&c, &err) == 0 && c.arch == ALLM_ARCH_PHI3 && c.sliding_window == 2047, "phi3: %s", err.msg);
	write_family("phi3", ", \"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": [1]}");
	CHECK(load(&c, &err) == -ENOTSUP && strstr(err.msg, "longrope"), "phi3 longrope: %s", err.msg);
	write_family("phi3", ", \"partial_rotary_factor\": 0.5");
	CHECK(load(&c, &err) == -ENOTSUP && strstr(err.msg, "partial_rotary_factor"), "partial: %s", err.msg);
	write_family("gemma3_text", ", \"sliding_window\": 512, \"query_pre_attn_scalar\": 64,"
		     " \"rope_local_base_freq\": 10000.0, \"rope_theta\": 1000000.0,"
		     " \"hidden_activation\": \"gelu_pytorch_tanh\", \"layer_types\": [\"sliding_attention\","
		     " \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"sliding_attention\","
		     " \"full_attention\"]");
	CHECK(load(&c, &err) == 0 && c.arch == ALLM_ARCH_GEMMA3 && c.sliding_window == 512 &&
	      c.swa_pattern == 3 && allm_model_layer_local(&c, 0) && !allm_model_layer_local(&c, 2) &&
	      !allm_model_layer_local(&c, 5) && c.rope_local_theta == 10000.0f &&
	      fabsf(c.query_scale - 0.125f) < 1e-7f && c.tie_embeddings, "gemma3_text: %s", err.msg);
	write_family("gemma3_text", ", \"sliding_window\": 512, \"layer_types\": [\"sliding_attention\","
		     " \"full_attention\", \"full_attention\", \"sliding_attention\", \"sliding_attention\","
		     " \"full_attention\"]");
	CHECK(load(&c, &err) == -ENOTSUP && strstr(err.msg, "layer_types"), "gemma3 irregular: %s", err.msg);
	write_family("gemma3_text", ", \"final_logit_softcapping\": 30.0");
	CHECK(load(&c, &err) == -ENOTSUP && strstr(err.msg, "final_logit_softcapping"), "softcap: %s", err.msg);
	write_family("gemma3", "");
	CHECK(load(&c, &err) == -ENOTSUP && strstr(err.msg, "multimodal"), "gemma3 multimodal: %s", err.msg);
	write_family("gemma2", "");
	CHECK(load(&c, &err) == -ENOTSUP && strstr(err.msg, "gemma2") && strstr(err.msg, "qwen3"),
	      "gemma2: %s", err.msg);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/allm-test-config-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_presets();
	test_round_trip();
	test_eos();
	test_rope_scaling();
	test_validation();
	test_families();
	cleanup();
	if (n_fail) {
		fprintf(stderr, "test-model-config: %d failure(s)\n", n_fail);
		return 1;
	}
	printf("test-model-config: ok\n");
	return 0;
}
