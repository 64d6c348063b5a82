/* allm-mkmodel: writes a tiny random Llama or OPT model in Hugging Face format
 * (config.json, safetensors, tokenizer.json), deterministic per seed, for tests
 * and demos. Options cover the architecture variants the engine must handle. */
#include "engine-opts.h"
#include "model-writer.h"

#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: allm-mkmodel --out DIR [--arch llama|opt] [--preset tiny|small|...] [--seed S]\n"
		"                    [--dtype f32|f16|bf16] [options]\n"
		"  --arch llama|opt      architecture (default llama)\n"
		"  --preset NAME         shapes: tiny, small, medium (opt: tiny, small, 125m); default tiny\n"
		"  --seed S              weights seed (default 0)\n"
		"  --dtype f32|f16|bf16  tensor dtype in the files (default f32)\n"
		"  --kv-heads N          llama: key/value heads (GQA when < heads)\n"
		"  --heads N             attention heads (hidden must divide for opt)\n"
		"  --layers N            number of layers\n"
		"  --vocab N             vocabulary size (>= 300)\n"
		"  --tied | --untied     llama: share embed_tokens with lm_head or not (default tied)\n"
		"  --bias                llama: attention_bias and mlp_bias\n"
		"  --post-ln             opt: post-LayerNorm (do_layer_norm_before = false)\n"
		"  --proj-dim N          opt: word_embed_proj_dim (project_in/out when != hidden)\n"
		"  --max-pos N           max_position_embeddings\n"
		"  --rope-theta F        llama: rope_theta\n"
		"  --shards N            write N safetensors shards + model.safetensors.index.json\n");
}

int main(int argc, char **argv)
{
	const char *arch = "llama", *preset = "tiny", *out = NULL;
	struct allm_model_write_opts o = {.seed = 0, .dtype = ALLM_DTYPE_F32, .n_shards = 1};
	struct allm_model_config c;
	struct allm_err err = {{0}};
	int64_t kv = 0, heads = 0, layers = 0, vocab = 0, proj = 0, maxpos = 0, n;
	double theta = 0;
	int tied = -1, bias = 0, post_ln = 0;
	char pname[64];

	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(f, "--tied")) {
			tied = 1;
			continue;
		} else if (!strcmp(f, "--untied")) {
			tied = 0;
			continue;
		} else if (!strcmp(f, "--bias")) {
			bias = 1;
			continue;
		} else if (!strcmp(f, "--post-ln")) {
			post_ln = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "allm-mkmodel: unknown flag or missing value: %s\n", f);
			return 2;
		}
		i++;
		int bad = 0;
		if (!strcmp(f, "--arch"))
			arch = v;
		else if (!strcmp(f, "--preset"))
			preset = v;
		else if (!strcmp(f, "--out"))
			out = v;
		else if (!strcmp(f, "--seed"))
			bad = allm_parse_i64(v, 0, INT64_MAX, &n) || ((o.seed = (uint64_t)n), 0);
		else if (!strcmp(f, "--dtype"))
			bad = allm_dtype_parse(v, &o.dtype);
		else if (!strcmp(f, "--kv-heads"))
			bad = allm_parse_i64(v, 1, 1024, &kv);
		else if (!strcmp(f, "--heads"))
			bad = allm_parse_i64(v, 1, 1024, &heads);
		else if (!strcmp(f, "--layers"))
			bad = allm_parse_i64(v, 1, 1024, &layers);
		else if (!strcmp(f, "--vocab"))
			bad = allm_parse_i64(v, 300, 1 << 22, &vocab);
		else if (!strcmp(f, "--proj-dim"))
			bad = allm_parse_i64(v, 1, 65536, &proj);
		else if (!strcmp(f, "--max-pos"))
			bad = allm_parse_i64(v, 1, 1 << 24, &maxpos);
		else if (!strcmp(f, "--rope-theta"))
			bad = allm_parse_f64(v, 1, 1e12, &theta);
		else if (!strcmp(f, "--shards"))
			bad = allm_parse_i64(v, 1, 1000, &n) || ((o.n_shards = (int32_t)n), 0);
		else {
			fprintf(stderr, "allm-mkmodel: unknown flag %s (see --help)\n", f);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "allm-mkmodel: bad value for %s: '%s'\n", f, v);
			return 2;
		}
	}
	if (!out) {
		fprintf(stderr, "allm-mkmodel: --out DIR is required (see --help)\n");
		return 2;
	}
	if (strcmp(arch, "llama") && strcmp(arch, "opt")) {
		fprintf(stderr, "allm-mkmodel: --arch must be llama or opt\n");
		return 2;
	}
	if (!strcmp(arch, "opt") && strncmp(preset, "opt-", 4))
		snprintf(pname, sizeof(pname), "opt-%s", preset);
	else
		snprintf(pname, sizeof(pname), "%s", preset);
	if (allm_model_config_preset(pname, &c, &err)) {
		fprintf(stderr, "allm-mkmodel: %s\n", err.msg);
		return 2;
	}
	if (heads) {
		c.n_heads = (int32_t)heads;
		c.head_dim = c.hidden / c.n_heads;
		if (c.arch == ALLM_ARCH_OPT || !kv)
			c.n_kv_heads = c.n_heads;
	}
	if (kv) {
		if (c.arch == ALLM_ARCH_OPT) {
			fprintf(stderr, "allm-mkmodel: --kv-heads is for llama (OPT has no GQA)\n");
			return 2;
		}
		c.n_kv_heads = (int32_t)kv;
	}
	if (layers)
		c.n_layers = (int32_t)layers;
	if (vocab)
		c.vocab_size = (int32_t)vocab;
	if (maxpos)
		c.max_pos = (int32_t)maxpos;
	if (theta)
		c.rope_theta = (float)theta;
	if (c.arch == ALLM_ARCH_LLAMA) {
		c.tie_embeddings = tied != 0;
		c.attn_bias = c.mlp_bias = bias;
	} else {
		if (tied == 0) {
			fprintf(stderr, "allm-mkmodel: OPT always ties lm_head to embed_tokens\n");
			return 2;
		}
		c.pre_ln = !post_ln;
		c.final_ln = c.pre_ln;
		if (proj)
			c.embed_proj_dim = (int32_t)proj;
		/* generated tokenizers put <s> at 1 and </s> at 2 */
		c.bos_id = 1;
	}
	if (allm_model_config_validate(&c, "model", &err) ||
	    allm_model_write_dir(&c, &o, out, &err)) {
		fprintf(stderr, "allm-mkmodel: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "allm-mkmodel: wrote %s %s (%d layers, hidden %d, heads %d/%d, vocab %d, %s) to %s\n",
		arch, preset, c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.vocab_size,
		allm_dtype_name(o.dtype), out);
	return 0;
}
