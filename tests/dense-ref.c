/* Independent dense reference forward pass (see dense-ref.h).
 *
 * llama2.c style on purpose: plain loops, every weight f32 and stacked over
 * layers, no cache. Semantics follow Hugging Face transformers:
 *   - LlamaForCausalLM / MistralForCausalLM (modeling_llama.py, modeling_mistral.py)
 *   - Qwen2ForCausalLM, Qwen3ForCausalLM (modeling_qwen2.py, modeling_qwen3.py: q/k/v
 *     biases; RMSNorm of each head of q and k before RoPE)
 *   - Gemma3ForCausalLM (modeling_gemma3.py: embeddings times sqrt(hidden), RMSNorm
 *     times (1 + w), norms after attention and MLP, gelu_pytorch_tanh, scores scaled
 *     by query_pre_attn_scalar^-0.5, sliding_attention layers with their own RoPE
 *     base beside full_attention ones)
 *   - Phi3ForCausalLM (modeling_phi3.py: qkv_proj and gate_up_proj fused)
 *   - OPTForCausalLM (modeling_opt.py)
 * Dot products accumulate in double so that the reference is, if anything, more
 * accurate than the implementations it checks. Only common/common.h is used from
 * the engine, for f16/bf16 -> f32. */
#include "dense-ref.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common.h"

enum arch { ARCH_LLAMA, ARCH_OPT };

struct dense_ref {
	enum arch arch;
	int dim;	/* hidden_size, D */
	int ffn;	/* intermediate_size (llama) / ffn_dim (opt), F */
	int n_layers;	/* L */
	int n_heads;	/* H */
	int n_kv_heads; /* KV (== H for OPT) */
	int head_dim;	/* hd */
	int vocab;	/* V */
	int max_pos;	/* max_position_embeddings */
	/* llama */
	double eps;	       /* rms_norm_eps (llama) or 1e-5 (OPT LayerNorm) */
	double rope_theta;     /* rope base */
	int sliding_window;    /* mistral, phi3, gemma3's local layers: 0 = none */
	bool *local;	       /* (L) gemma3: the layer is a sliding_attention one; NULL: all */
	double rope_local_theta; /* gemma3: rope_local_base_freq of the local layers */
	bool qk_norm;	       /* qwen3, gemma3 */
	bool gemma;	       /* (1 + w) norms, post norms, scaled embeddings, GELU-tanh */
	double score_scale;    /* 1 / sqrt(head_dim), gemma3: query_pre_attn_scalar^-0.5 */
	/* opt */
	int proj_dim;	    /* word_embed_proj_dim, P */
	bool pre_ln;	    /* do_layer_norm_before */
	bool act_gelu;	    /* activation_function "gelu" instead of "relu" */

	/* ---- weights, common ---- */
	float *tok_emb; /* (V, D) llama, (V, P) opt */
	float *wq;	/* (L, H*hd, D) */
	float *bq;	/* (L, H*hd) or NULL */
	float *wk;	/* (L, KV*hd, D) */
	float *bk;	/* (L, KV*hd) or NULL */
	float *wv;	/* (L, KV*hd, D) */
	float *bv;	/* (L, KV*hd) or NULL */
	float *wo;	/* (L, D, H*hd) */
	float *bo;	/* (L, D) or NULL */

	/* ---- llama ---- */
	float *attn_norm;  /* (L, D) input_layernorm */
	float *ffn_norm;   /* (L, D) post_attention_layernorm */
	float *w_gate;	   /* (L, F, D) */
	float *b_gate;	   /* (L, F) or NULL */
	float *w_up;	   /* (L, F, D) */
	float *b_up;	   /* (L, F) or NULL */
	float *w_down;	   /* (L, D, F) */
	float *b_down;	   /* (L, D) or NULL */
	float *final_norm; /* (D) model.norm */
	float *qkv_tmp, *gu_tmp; /* phi3 while loading: the fused matrices */
	float *q_norm, *k_norm; /* (L, hd) qwen3 / gemma3 */
	float *post_attn_norm, *post_ffn_norm; /* (L, D) gemma3 */
	float *lm_head;	   /* (V, D), may alias tok_emb */

	/* ---- opt ---- */
	float *pos_emb;	    /* (max_pos + 2, D), row p + 2 for position p */
	float *project_in;  /* (D, P) or NULL when P == D */
	float *project_out; /* (P, D) or NULL when P == D */
	float *ln1_w;	    /* (L, D) self_attn_layer_norm, NULL when not affine */
	float *ln1_b;	    /* (L, D) */
	float *ln2_w;	    /* (L, D) the layer's final_layer_norm */
	float *ln2_b;	    /* (L, D) */
	float *fc1_w;	    /* (L, F, D) */
	float *fc1_b;	    /* (L, F) or NULL */
	float *fc2_w;	    /* (L, D, F) */
	float *fc2_b;	    /* (L, D) or NULL */
	bool has_final_ln;  /* decoder.final_layer_norm present */
	float *final_ln_w;  /* (D) or NULL when not affine */
	float *final_ln_b;  /* (D) */
};

/* ------------------------------------------------------------------------ */
/* errors                                                                    */

static int fail(char *errbuf, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *errbuf, size_t errlen, const char *fmt, ...)
{
	if (errbuf && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ------------------------------------------------------------------------ */
/* safetensors                                                               */

enum st_dtype { ST_F32, ST_F16, ST_BF16 };

struct st_tensor {
	char *name;
	enum st_dtype dtype;
	int ndim;
	int64_t shape[8];
	uint64_t offset; /* absolute, in its file */
	uint64_t nbytes;
	int file;
};

struct st_set {
	char **paths;
	int n_files;
	struct st_tensor *t;
	int n, cap;
};

static void st_free(struct st_set *s)
{
	for (int i = 0; i < s->n_files; i++)
		free(s->paths[i]);
	free(s->paths);
	for (int i = 0; i < s->n; i++)
		free(s->t[i].name);
	free(s->t);
	memset(s, 0, sizeof(*s));
}

/* Reads one .safetensors header and appends its tensors. */
static int st_add_file(struct st_set *s, const char *path, char *errbuf, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail(errbuf, errlen, "cannot open %s", path);
	if (fseeko(f, 0, SEEK_END) != 0) {
		fclose(f);
		return fail(errbuf, errlen, "cannot seek %s", path);
	}
	uint64_t file_size = (uint64_t)ftello(f);
	rewind(f);

	unsigned char lenb[8];
	if (fread(lenb, 1, 8, f) != 8) {
		fclose(f);
		return fail(errbuf, errlen, "%s: short file", path);
	}
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = (hlen << 8) | lenb[i];
	if (hlen == 0 || hlen > 100u * 1024 * 1024 || 8 + hlen > file_size) {
		fclose(f);
		return fail(errbuf, errlen, "%s: bad header length %llu", path,
			    (unsigned long long)hlen);
	}
	char *hdr = malloc(hlen + 1);
	if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
		free(hdr);
		fclose(f);
		return fail(errbuf, errlen, "%s: cannot read header", path);
	}
	hdr[hlen] = 0;
	fclose(f);

	json_error_t jerr;
	json_t *root = json_loadb(hdr, hlen, 0, &jerr);
	free(hdr);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return fail(errbuf, errlen, "%s: bad header json: %s", path, jerr.text);
	}

	char **np = realloc(s->paths, sizeof(char *) * (size_t)(s->n_files + 1));
	if (!np) {
		json_decref(root);
		return fail(errbuf, errlen, "out of memory");
	}
	s->paths = np;
	s->paths[s->n_files] = strdup(path);
	int file = s->n_files++;
	uint64_t data_start = 8 + hlen;

	const char *key;
	json_t *val;
	json_object_foreach(root, key, val)
	{
		if (strcmp(key, "__metadata__") == 0)
			continue;
		json_t *jd = json_object_get(val, "dtype");
		json_t *js = json_object_get(val, "shape");
		json_t *jo = json_object_get(val, "data_offsets");
		if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) ||
		    json_array_size(jo) != 2 || json_array_size(js) > 8) {
			json_decref(root);
			return fail(errbuf, errlen, "%s: bad entry for %s", path, key);
		}
		struct st_tensor t = { 0 };
		const char *d = json_string_value(jd);
		size_t esize;
		if (strcmp(d, "F32") == 0) {
			t.dtype = ST_F32;
			esize = 4;
		} else if (strcmp(d, "F16") == 0) {
			t.dtype = ST_F16;
			esize = 2;
		} else if (strcmp(d, "BF16") == 0) {
			t.dtype = ST_BF16;
			esize = 2;
		} else {
			/* Other dtypes (e.g. I64 buffers) are fine as long as we never ask for them:
			 * mark them with esize 0 and refuse on read. */
			t.dtype = ST_F32;
			esize = 0;
		}
		t.ndim = (int)json_array_size(js);
		uint64_t count = 1;
		for (int i = 0; i < t.ndim; i++) {
			json_t *e = json_array_get(js, (size_t)i);
			if (!json_is_integer(e) || json_integer_value(e) < 0) {
				json_decref(root);
				return fail(errbuf, errlen, "%s: bad shape for %s", path, key);
			}
			t.shape[i] = json_integer_value(e);
			count *= (uint64_t)t.shape[i];
		}
		json_t *o0 = json_array_get(jo, 0), *o1 = json_array_get(jo, 1);
		if (!json_is_integer(o0) || !json_is_integer(o1) || json_integer_value(o0) < 0 ||
		    json_integer_value(o1) < json_integer_value(o0)) {
			json_decref(root);
			return fail(errbuf, errlen, "%s: bad offsets for %s", path, key);
		}
		uint64_t b = (uint64_t)json_integer_value(o0), e = (uint64_t)json_integer_value(o1);
		if (data_start + e > file_size || (esize && (e - b) != count * esize)) {
			json_decref(root);
			return fail(errbuf, errlen, "%s: offsets of %s out of range or wrong size",
				    path, key);
		}
		t.offset = data_start + b;
		t.nbytes = esize ? e - b : 0;
		if (!esize)
			t.ndim = -1; /* unsupported dtype */
		t.file = file;
		t.name = strdup(key);
		if (s->n == s->cap) {
			int cap = s->cap ? s->cap * 2 : 64;
			struct st_tensor *nt = realloc(s->t, sizeof(*nt) * (size_t)cap);
			if (!nt) {
				free(t.name);
				json_decref(root);
				return fail(errbuf, errlen, "out of memory");
			}
			s->t = nt;
			s->cap = cap;
		}
		s->t[s->n++] = t;
	}
	json_decref(root);
	return 0;
}

/* Opens dir/model.safetensors, or the shards listed in dir/model.safetensors.index.json. */
static int st_open_dir(struct st_set *s, const char *dir, char *errbuf, size_t errlen)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	FILE *f = fopen(path, "rb");
	if (f) {
		fclose(f);
		return st_add_file(s, path, errbuf, errlen);
	}
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);
	if (!root)
		return fail(errbuf, errlen, "%s: no model.safetensors nor a readable index (%s)",
			    dir, jerr.text);
	json_t *map = json_object_get(root, "weight_map");
	if (!json_is_object(map)) {
		json_decref(root);
		return fail(errbuf, errlen, "%s: no weight_map", path);
	}
	/* unique shard names, in order of first appearance */
	json_t *seen = json_object();
	const char *key;
	json_t *val;
	int rc = 0;
	json_object_foreach(map, key, val)
	{
		if (!json_is_string(val)) {
			rc = fail(errbuf, errlen, "%s: bad weight_map entry %s", path, key);
			break;
		}
		const char *shard = json_string_value(val);
		if (json_object_get(seen, shard))
			continue;
		json_object_set_new(seen, shard, json_true());
		char spath[4096];
		snprintf(spath, sizeof(spath), "%s/%s", dir, shard);
		rc = st_add_file(s, spath, errbuf, errlen);
		if (rc)
			break;
	}
	json_decref(seen);
	json_decref(root);
	return rc;
}

static const struct st_tensor *st_find(const struct st_set *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->t[i].name, name) == 0)
			return &s->t[i];
	return NULL;
}

/* Reads tensor `name`, which must have shape (d0) when d1 == 0 or (d0, d1),
 * converted to f32 into dst. */
static int st_read(const struct st_set *s, const char *name, int64_t d0, int64_t d1, float *dst,
		   char *errbuf, size_t errlen)
{
	const struct st_tensor *t = st_find(s, name);
	if (!t)
		return fail(errbuf, errlen, "missing tensor %s", name);
	if (t->ndim < 0)
		return fail(errbuf, errlen, "tensor %s: unsupported dtype", name);
	bool ok = d1 ? (t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1)
		     : (t->ndim == 1 && t->shape[0] == d0);
	if (!ok) {
		char got[128] = "";
		for (int i = 0; i < t->ndim; i++) {
			size_t len = strlen(got);
			snprintf(got + len, sizeof(got) - len, "%s%lld", i ? ", " : "",
				 (long long)t->shape[i]);
		}
		if (d1)
			return fail(errbuf, errlen, "tensor %s: shape [%s], expected [%lld, %lld]",
				    name, got, (long long)d0, (long long)d1);
		return fail(errbuf, errlen, "tensor %s: shape [%s], expected [%lld]", name, got,
			    (long long)d0);
	}
	FILE *f = fopen(s->paths[t->file], "rb");
	if (!f)
		return fail(errbuf, errlen, "cannot open %s", s->paths[t->file]);
	void *raw = malloc(t->nbytes ? t->nbytes : 1);
	if (!raw || fseeko(f, (off_t)t->offset, SEEK_SET) != 0 ||
	    fread(raw, 1, t->nbytes, f) != t->nbytes) {
		free(raw);
		fclose(f);
		return fail(errbuf, errlen, "cannot read tensor %s", name);
	}
	fclose(f);
	size_t count = (size_t)d0 * (size_t)(d1 ? d1 : 1);
	const unsigned char *p = raw;
	for (size_t i = 0; i < count; i++) {
		if (t->dtype == ST_F32) {
			/* little-endian f32 */
			uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
				     (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
			memcpy(&dst[i], &u, 4);
		} else {
			uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
			dst[i] = t->dtype == ST_F16 ? allm_f16_to_f32(h) : allm_bf16_to_f32(h);
		}
	}
	free(raw);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* config.json                                                               */

/* Integer key; def when absent or null, -1 in *bad when required and absent. */
static long cfg_int(json_t *cfg, const char *key, long def, bool required, bool *bad)
{
	json_t *v = json_object_get(cfg, key);
	if (!v || json_is_null(v)) {
		if (required)
			*bad = true;
		return def;
	}
	if (json_is_integer(v))
		return (long)json_integer_value(v);
	if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
		return (long)json_real_value(v);
	*bad = true;
	return def;
}

static double cfg_num(json_t *cfg, const char *key, double def, bool *bad)
{
	json_t *v = json_object_get(cfg, key);
	if (!v || json_is_null(v))
		return def;
	if (json_is_number(v))
		return json_number_value(v);
	*bad = true;
	return def;
}

static bool cfg_bool(json_t *cfg, const char *key, bool def, bool *bad)
{
	json_t *v = json_object_get(cfg, key);
	if (!v || json_is_null(v))
		return def;
	if (json_is_boolean(v))
		return json_is_true(v);
	*bad = true;
	return def;
}

static const char *cfg_str(json_t *cfg, const char *key, const char *def)
{
	json_t *v = json_object_get(cfg, key);
	return json_is_string(v) ? json_string_value(v) : def;
}

/* ------------------------------------------------------------------------ */
/* loading                                                                   */

void dense_ref_free(struct dense_ref *m)
{
	if (!m)
		return;
	if (m->lm_head != m->tok_emb)
		free(m->lm_head);
	float *all[] = { m->tok_emb,   m->wq,	      m->bq,	      m->wk,	     m->bk,
			 m->wv,	       m->bv,	      m->wo,	      m->bo,	     m->attn_norm,
			 m->ffn_norm,  m->w_gate,     m->b_gate,      m->w_up,	     m->b_up,
			 m->w_down,    m->b_down,     m->final_norm,  m->pos_emb,    m->project_in,
			 m->project_out, m->ln1_w,    m->ln1_b,	      m->ln2_w,	     m->ln2_b,
			 m->fc1_w,     m->fc1_b,      m->fc2_w,	      m->fc2_b,	     m->final_ln_w,
			 m->final_ln_b, m->q_norm,    m->k_norm,      m->post_attn_norm, m->post_ffn_norm };
	free(m->local);
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i]);
	free(m);
}

int dense_ref_vocab(const struct dense_ref *m)
{
	return m->vocab;
}

/* Loader state: one place to allocate-and-read weights. */
struct loader {
	struct st_set st;
	char *errbuf;
	size_t errlen;
};

/* Allocates *dst as (d0[, d1]) and reads `name` into it. */
static int ld(struct loader *L, float **dst, const char *name, int64_t d0, int64_t d1)
{
	size_t count = (size_t)d0 * (size_t)(d1 ? d1 : 1);
	*dst = malloc(sizeof(float) * (count ? count : 1));
	if (!*dst)
		return fail(L->errbuf, L->errlen, "out of memory for %s", name);
	return st_read(&L->st, name, d0, d1, *dst, L->errbuf, L->errlen);
}

/* Allocates *dst as (n_layers, d0[, d1]) and reads fmt % layer for every layer. */
static int ld_layers(struct loader *L, float **dst, int n_layers, const char *fmt, int64_t d0,
		     int64_t d1)
{
	size_t per = (size_t)d0 * (size_t)(d1 ? d1 : 1);
	size_t total = per * (size_t)n_layers;
	*dst = malloc(sizeof(float) * (total ? total : 1));
	if (!*dst)
		return fail(L->errbuf, L->errlen, "out of memory for %s", fmt);
	for (int l = 0; l < n_layers; l++) {
		char name[512];
		snprintf(name, sizeof(name), fmt, l);
		if (st_read(&L->st, name, d0, d1, *dst + (size_t)l * per, L->errbuf, L->errlen))
			return -1;
	}
	return 0;
}

/* *dst = rows r0 .. r0 + n of each layer's (rows, cols) matrix in src (stacked). */
static int split_rows(float **dst, const float *src, int n_layers, int rows, int r0, int n, int cols)
{
	*dst = malloc(sizeof(float) * (size_t)n_layers * n * cols + 1);
	if (!*dst)
		return -1;
	for (int l = 0; l < n_layers; l++)
		memcpy(*dst + (size_t)l * n * cols, src + ((size_t)l * rows + r0) * cols,
		       sizeof(float) * (size_t)n * cols);
	return 0;
}

static int load_llama(struct dense_ref *m, json_t *cfg, struct loader *L)
{
	char *eb = L->errbuf;
	size_t el = L->errlen;
	bool bad = false;
	m->dim = (int)cfg_int(cfg, "hidden_size", 0, true, &bad);
	m->ffn = (int)cfg_int(cfg, "intermediate_size", 0, true, &bad);
	m->n_layers = (int)cfg_int(cfg, "num_hidden_layers", 0, true, &bad);
	m->n_heads = (int)cfg_int(cfg, "num_attention_heads", 0, true, &bad);
	m->vocab = (int)cfg_int(cfg, "vocab_size", 0, true, &bad);
	if (bad)
		return fail(eb, el, "config.json: missing or bad llama size keys");
	m->n_kv_heads = (int)cfg_int(cfg, "num_key_value_heads", m->n_heads, false, &bad);
	m->head_dim = (int)cfg_int(cfg, "head_dim", m->n_heads ? m->dim / m->n_heads : 0, false,
				   &bad);
	m->max_pos = (int)cfg_int(cfg, "max_position_embeddings", 2048, false, &bad);
	m->eps = cfg_num(cfg, "rms_norm_eps", 1e-6, &bad);
	m->rope_theta = cfg_num(cfg, "rope_theta", 10000.0, &bad);
	const char *type = cfg_str(cfg, "model_type", "");
	bool qwen2 = !strcmp(type, "qwen2"), phi3 = !strcmp(type, "phi3");
	m->gemma = !strcmp(type, "gemma3_text");
	m->qk_norm = m->gemma || !strcmp(type, "qwen3");
	bool tie = cfg_bool(cfg, "tie_word_embeddings", m->gemma, &bad);
	bool attn_bias = cfg_bool(cfg, "attention_bias", false, &bad);
	bool mlp_bias = cfg_bool(cfg, "mlp_bias", false, &bad);
	if (!strcmp(type, "mistral") || phi3 || m->gemma)
		m->sliding_window = (int)cfg_int(cfg, "sliding_window", 0, false, &bad);
	m->score_scale = 1.0 / sqrt((double)m->head_dim);
	if (m->gemma) {
		m->score_scale = 1.0 / sqrt(cfg_num(cfg, "query_pre_attn_scalar", m->head_dim, &bad));
		m->rope_local_theta = cfg_num(cfg, "rope_local_base_freq", 10000.0, &bad);
		json_t *lt = json_object_get(cfg, "layer_types");
		if (m->sliding_window > 0 && json_is_array(lt)) {
			m->local = calloc((size_t)m->n_layers + 1, sizeof(bool));
			for (int l = 0; m->local && l < m->n_layers; l++)
				m->local[l] = !strcmp(json_string_value(json_array_get(lt, (size_t)l)) ?: "",
						      "sliding_attention");
		}
	}
	if (bad)
		return fail(eb, el, "config.json: bad llama key type");
	const char *act = cfg_str(cfg, m->gemma ? "hidden_activation" : "hidden_act",
				  m->gemma ? "gelu_pytorch_tanh" : "silu");
	if (strcmp(act, m->gemma ? "gelu_pytorch_tanh" : "silu") != 0)
		return fail(eb, el, "config.json: hidden activation %s not supported", act);
	json_t *rs = json_object_get(cfg, "rope_scaling");
	if (rs && !json_is_null(rs)) {
		const char *rt = cfg_str(rs, "rope_type", cfg_str(rs, "type", ""));
		if (strcmp(rt, "default") != 0)
			return fail(eb, el, "config.json: rope_scaling not supported");
	}
	if (m->dim <= 0 || m->ffn <= 0 || m->n_layers <= 0 || m->n_heads <= 0 ||
	    m->n_kv_heads <= 0 || m->n_heads % m->n_kv_heads || m->head_dim <= 0 ||
	    m->head_dim % 2 || m->vocab <= 0 || m->sliding_window < 0)
		return fail(eb, el, "config.json: inconsistent llama sizes");

	int D = m->dim, F = m->ffn, NL = m->n_layers, V = m->vocab;
	int QD = m->n_heads * m->head_dim, KD = m->n_kv_heads * m->head_dim;
	const char *p = "model.layers.%d.";
	char f[256];
#define LAYER(dst, suffix, d0, d1)                                   \
	do {                                                         \
		snprintf(f, sizeof(f), "%s%s", p, suffix);           \
		if (ld_layers(L, &m->dst, NL, f, d0, d1))            \
			return -1;                                   \
	} while (0)

	if (ld(L, &m->tok_emb, "model.embed_tokens.weight", V, D))
		return -1;
	LAYER(attn_norm, "input_layernorm.weight", D, 0);
	if (phi3) { /* [q; k; v] and [gate; up] in one matrix each */
		float *qkv = NULL, *gu = NULL;
		int rc = 0;
		LAYER(qkv_tmp, "self_attn.qkv_proj.weight", QD + 2 * KD, D);
		LAYER(gu_tmp, "mlp.gate_up_proj.weight", 2 * F, D);
		qkv = m->qkv_tmp, gu = m->gu_tmp;
		m->qkv_tmp = m->gu_tmp = NULL;
		rc |= split_rows(&m->wq, qkv, NL, QD + 2 * KD, 0, QD, D);
		rc |= split_rows(&m->wk, qkv, NL, QD + 2 * KD, QD, KD, D);
		rc |= split_rows(&m->wv, qkv, NL, QD + 2 * KD, QD + KD, KD, D);
		rc |= split_rows(&m->w_gate, gu, NL, 2 * F, 0, F, D);
		rc |= split_rows(&m->w_up, gu, NL, 2 * F, F, F, D);
		free(qkv);
		free(gu);
		if (rc)
			return fail(eb, el, "out of memory");
	} else {
		LAYER(wq, "self_attn.q_proj.weight", QD, D);
		LAYER(wk, "self_attn.k_proj.weight", KD, D);
		LAYER(wv, "self_attn.v_proj.weight", KD, D);
		LAYER(w_gate, "mlp.gate_proj.weight", F, D);
		LAYER(w_up, "mlp.up_proj.weight", F, D);
	}
	LAYER(wo, "self_attn.o_proj.weight", D, QD);
	if (attn_bias || qwen2) {
		LAYER(bq, "self_attn.q_proj.bias", QD, 0);
		LAYER(bk, "self_attn.k_proj.bias", KD, 0);
		LAYER(bv, "self_attn.v_proj.bias", KD, 0);
	}
	if (attn_bias)
		LAYER(bo, "self_attn.o_proj.bias", D, 0);
	if (m->qk_norm) {
		LAYER(q_norm, "self_attn.q_norm.weight", m->head_dim, 0);
		LAYER(k_norm, "self_attn.k_norm.weight", m->head_dim, 0);
	}
	if (m->gemma) {
		LAYER(post_attn_norm, "post_attention_layernorm.weight", D, 0);
		LAYER(ffn_norm, "pre_feedforward_layernorm.weight", D, 0);
		LAYER(post_ffn_norm, "post_feedforward_layernorm.weight", D, 0);
	} else {
		LAYER(ffn_norm, "post_attention_layernorm.weight", D, 0);
	}
	LAYER(w_down, "mlp.down_proj.weight", D, F);
	if (mlp_bias) {
		LAYER(b_gate, "mlp.gate_proj.bias", F, 0);
		LAYER(b_up, "mlp.up_proj.bias", F, 0);
		LAYER(b_down, "mlp.down_proj.bias", D, 0);
	}
#undef LAYER
	if (ld(L, &m->final_norm, "model.norm.weight", D, 0))
		return -1;
	/* transformers ties lm_head to embed_tokens when tie_word_embeddings, whatever the
	 * file holds; untied models must carry lm_head.weight. */
	if (tie)
		m->lm_head = m->tok_emb;
	else if (ld(L, &m->lm_head, "lm_head.weight", V, D))
		return -1;
	return 0;
}

static int load_opt(struct dense_ref *m, json_t *cfg, struct loader *L)
{
	char *eb = L->errbuf;
	size_t el = L->errlen;
	bool bad = false;
	m->dim = (int)cfg_int(cfg, "hidden_size", 0, true, &bad);
	m->ffn = (int)cfg_int(cfg, "ffn_dim", 0, true, &bad);
	m->n_layers = (int)cfg_int(cfg, "num_hidden_layers", 0, true, &bad);
	m->n_heads = (int)cfg_int(cfg, "num_attention_heads", 0, true, &bad);
	m->vocab = (int)cfg_int(cfg, "vocab_size", 0, true, &bad);
	m->max_pos = (int)cfg_int(cfg, "max_position_embeddings", 0, true, &bad);
	if (bad)
		return fail(eb, el, "config.json: missing or bad opt size keys");
	m->proj_dim = (int)cfg_int(cfg, "word_embed_proj_dim", m->dim, false, &bad);
	m->pre_ln = cfg_bool(cfg, "do_layer_norm_before", true, &bad);
	bool bias = cfg_bool(cfg, "enable_bias", true, &bad);
	bool affine = cfg_bool(cfg, "layer_norm_elementwise_affine", true, &bad);
	bool remove_final = cfg_bool(cfg, "_remove_final_layer_norm", false, &bad);
	if (bad)
		return fail(eb, el, "config.json: bad opt key type");
	const char *act = cfg_str(cfg, "activation_function", "relu");
	if (strcmp(act, "relu") == 0)
		m->act_gelu = false;
	else if (strcmp(act, "gelu") == 0)
		m->act_gelu = true;
	else
		return fail(eb, el, "config.json: activation_function %s not supported", act);
	m->n_kv_heads = m->n_heads;
	m->head_dim = m->n_heads > 0 ? m->dim / m->n_heads : 0;
	m->eps = 1e-5;
	if (m->dim <= 0 || m->ffn <= 0 || m->n_layers <= 0 || m->n_heads <= 0 ||
	    m->dim % m->n_heads || m->vocab <= 0 || m->max_pos <= 0 || m->proj_dim <= 0)
		return fail(eb, el, "config.json: inconsistent opt sizes");

	/* OPTForCausalLM saves model.decoder.*, OPTModel saves decoder.* */
	const char *pre = st_find(&L->st, "model.decoder.embed_tokens.weight") ? "model.decoder."
										 : "decoder.";
	int D = m->dim, F = m->ffn, NL = m->n_layers, V = m->vocab, P = m->proj_dim;
	char f[256];
#define ONE(dst, suffix, d0, d1)                                     \
	do {                                                         \
		snprintf(f, sizeof(f), "%s%s", pre, suffix);         \
		if (ld(L, &m->dst, f, d0, d1))                       \
			return -1;                                   \
	} while (0)
#define LAYER(dst, suffix, d0, d1)                                   \
	do {                                                         \
		snprintf(f, sizeof(f), "%slayers.%%d.%s", pre, suffix); \
		if (ld_layers(L, &m->dst, NL, f, d0, d1))            \
			return -1;                                   \
	} while (0)

	ONE(tok_emb, "embed_tokens.weight", V, P);
	ONE(pos_emb, "embed_positions.weight", (int64_t)m->max_pos + 2, D);
	if (P != D) {
		ONE(project_in, "project_in.weight", D, P);
		ONE(project_out, "project_out.weight", P, D);
	}
	m->has_final_ln = m->pre_ln && !remove_final;
	if (m->has_final_ln && affine) {
		ONE(final_ln_w, "final_layer_norm.weight", D, 0);
		ONE(final_ln_b, "final_layer_norm.bias", D, 0);
	}
	LAYER(wq, "self_attn.q_proj.weight", D, D);
	LAYER(wk, "self_attn.k_proj.weight", D, D);
	LAYER(wv, "self_attn.v_proj.weight", D, D);
	LAYER(wo, "self_attn.out_proj.weight", D, D);
	LAYER(fc1_w, "fc1.weight", F, D);
	LAYER(fc2_w, "fc2.weight", D, F);
	if (bias) {
		LAYER(bq, "self_attn.q_proj.bias", D, 0);
		LAYER(bk, "self_attn.k_proj.bias", D, 0);
		LAYER(bv, "self_attn.v_proj.bias", D, 0);
		LAYER(bo, "self_attn.out_proj.bias", D, 0);
		LAYER(fc1_b, "fc1.bias", F, 0);
		LAYER(fc2_b, "fc2.bias", D, 0);
	}
	if (affine) {
		LAYER(ln1_w, "self_attn_layer_norm.weight", D, 0);
		LAYER(ln1_b, "self_attn_layer_norm.bias", D, 0);
		LAYER(ln2_w, "final_layer_norm.weight", D, 0);
		LAYER(ln2_b, "final_layer_norm.bias", D, 0);
	}
#undef ONE
#undef LAYER
	/* lm_head is tied to embed_tokens (OPT's tie_word_embeddings defaults to true). */
	bool tie = cfg_bool(cfg, "tie_word_embeddings", true, &bad);
	if (tie || !st_find(&L->st, "lm_head.weight"))
		m->lm_head = m->tok_emb;
	else if (ld(L, &m->lm_head, "lm_head.weight", V, P))
		return -1;
	return 0;
}

int dense_ref_load(const char *dir, struct dense_ref **ret, char *errbuf, size_t errlen)
{
	*ret = NULL;
	char path[4096];
	snprintf(path, sizeof(path), "%s/config.json", dir);
	json_error_t jerr;
	json_t *cfg = json_load_file(path, 0, &jerr);
	if (!cfg || !json_is_object(cfg)) {
		json_decref(cfg);
		return fail(errbuf, errlen, "%s: %s", path, jerr.text);
	}
	struct dense_ref *m = calloc(1, sizeof(*m));
	struct loader L = { .errbuf = errbuf, .errlen = errlen };
	int rc = -1;
	if (!m) {
		fail(errbuf, errlen, "out of memory");
		goto out;
	}
	const char *type = cfg_str(cfg, "model_type", "");
	if (!strcmp(type, "llama") || !strcmp(type, "mistral") || !strcmp(type, "qwen2") ||
	    !strcmp(type, "qwen3") || !strcmp(type, "gemma3_text") || !strcmp(type, "phi3"))
		m->arch = ARCH_LLAMA; /* the Llama-shaped families */
	else if (strcmp(type, "opt") == 0)
		m->arch = ARCH_OPT;
	else {
		fail(errbuf, errlen, "model_type '%s' not supported", type);
		goto out;
	}
	if (st_open_dir(&L.st, dir, errbuf, errlen))
		goto out;
	rc = m->arch == ARCH_LLAMA ? load_llama(m, cfg, &L) : load_opt(m, cfg, &L);
out:
	st_free(&L.st);
	json_decref(cfg);
	if (rc) {
		dense_ref_free(m);
		return -1;
	}
	*ret = m;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* math                                                                      */

/* y[out] = x[in] W^T + b, W (out, in), b (out) or NULL. */
static void linear(float *y, const float *x, const float *w, const float *b, int in, int out)
{
	for (int o = 0; o < out; o++) {
		double acc = b ? b[o] : 0.0;
		const float *row = w + (size_t)o * (size_t)in;
		for (int i = 0; i < in; i++)
			acc += (double)x[i] * row[i];
		y[o] = (float)acc;
	}
}

/* Llama RMSNorm: y = x / sqrt(mean(x^2) + eps) * w; Gemma's multiplies by (1 + w). */
static void rmsnorm_g(float *y, const float *x, const float *w, int n, double eps, bool gemma)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	double r = 1.0 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		y[i] = (float)(x[i] * r) * (gemma ? 1.0f + w[i] : w[i]);
}

/* torch LayerNorm: y = (x - mean) / sqrt(var + eps) * w + b (biased variance);
 * w, b NULL = not elementwise-affine. */
static void layernorm(float *y, const float *x, const float *w, const float *b, int n, double eps)
{
	double mean = 0, var = 0;
	for (int i = 0; i < n; i++)
		mean += x[i];
	mean /= n;
	for (int i = 0; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	var /= n;
	double r = 1.0 / sqrt(var + eps);
	for (int i = 0; i < n; i++) {
		double v = (x[i] - mean) * r;
		if (w)
			v = v * w[i] + b[i];
		y[i] = (float)v;
	}
}

/* rotate_half RoPE (transformers apply_rotary_pos_emb) on n_heads heads of x at position pos. */
static void rope(float *x, int n_heads, int hd, int pos, double theta)
{
	int half = hd / 2;
	for (int i = 0; i < half; i++) {
		double inv_freq = pow(theta, -2.0 * i / hd);
		double ang = pos * inv_freq;
		double c = cos(ang), s = sin(ang);
		for (int h = 0; h < n_heads; h++) {
			float *v = x + (size_t)h * hd;
			double a = v[i], b = v[i + half];
			v[i] = (float)(a * c - b * s);
			v[i + half] = (float)(b * c + a * s);
		}
	}
}

static float silu(float x)
{
	return x / (1.0f + expf(-x));
}

/* transformers' gelu_pytorch_tanh */
static float gelu_tanh(float x)
{
	return (float)(0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * (double)x * x * x))));
}

/* exact (erf) GELU, transformers ACT2FN["gelu"] */
static float gelu(float x)
{
	return (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0))));
}

/* Scratch for one forward. */
struct bufs {
	float *x;   /* (n, D) normed input */
	float *q;   /* (n, H*hd) */
	float *k;   /* (n, KV*hd) */
	float *v;   /* (n, KV*hd) */
	float *att; /* (n, H*hd) attention output before o_proj */
	float *tmp; /* (n, D) */
	float *f1;  /* (F) */
	float *f2;  /* (F) */
	double *sc; /* (n) scores */
};

/* Causal self-attention of layer l over x (n, D) into out (n, D), o_proj included. */
static void attention(const struct dense_ref *m, int l, const float *x, int n, float *out,
		      struct bufs *b)
{
	int D = m->dim, H = m->n_heads, KV = m->n_kv_heads, hd = m->head_dim;
	int QD = H * hd, KD = KV * hd;
	size_t lq = (size_t)l * QD, lk = (size_t)l * KD, ld_ = (size_t)l * D;
	bool local = m->sliding_window > 0 && (!m->local || m->local[l]); /* a windowed layer */
	for (int t = 0; t < n; t++) {
		const float *xt = x + (size_t)t * D;
		float *q = b->q + (size_t)t * QD, *k = b->k + (size_t)t * KD, *v = b->v + (size_t)t * KD;
		linear(q, xt, m->wq + lq * D, m->bq ? m->bq + lq : NULL, D, QD);
		linear(k, xt, m->wk + lk * D, m->bk ? m->bk + lk : NULL, D, KD);
		linear(v, xt, m->wv + lk * D, m->bv ? m->bv + lk : NULL, D, KD);
		if (m->arch == ARCH_LLAMA) {
			if (m->qk_norm) {
				for (int h = 0; h < H; h++)
					rmsnorm_g(q + h * hd, q + h * hd, m->q_norm + (size_t)l * hd, hd, m->eps, m->gemma);
				for (int h = 0; h < KV; h++)
					rmsnorm_g(k + h * hd, k + h * hd, m->k_norm + (size_t)l * hd, hd, m->eps, m->gemma);
			}
			double theta = local && m->local ? m->rope_local_theta : m->rope_theta;
			rope(q, H, hd, t, theta);
			rope(k, KV, hd, t, theta);
		} else {
			/* OPT scales the projected query (bias included) */
			float scaling = (float)(1.0 / sqrt((double)hd));
			for (int i = 0; i < QD; i++)
				q[i] *= scaling;
		}
	}
	double score_scale = m->arch == ARCH_LLAMA ? m->score_scale : 1.0;
	int group = H / KV;
	for (int t = 0; t < n; t++) {
		int first = 0;
		if (local && t - m->sliding_window + 1 > 0)
			first = t - m->sliding_window + 1;
		for (int h = 0; h < H; h++) {
			int kvh = h / group;
			const float *q = b->q + (size_t)t * QD + (size_t)h * hd;
			double mx = -INFINITY;
			for (int s = first; s <= t; s++) {
				const float *k = b->k + (size_t)s * KD + (size_t)kvh * hd;
				double dot = 0;
				for (int i = 0; i < hd; i++)
					dot += (double)q[i] * k[i];
				b->sc[s] = dot * score_scale;
				if (b->sc[s] > mx)
					mx = b->sc[s];
			}
			double sum = 0;
			for (int s = first; s <= t; s++) {
				b->sc[s] = exp(b->sc[s] - mx);
				sum += b->sc[s];
			}
			float *o = b->att + (size_t)t * QD + (size_t)h * hd;
			for (int i = 0; i < hd; i++) {
				double acc = 0;
				for (int s = first; s <= t; s++)
					acc += b->sc[s] / sum * b->v[(size_t)s * KD + (size_t)kvh * hd + i];
				o[i] = (float)acc;
			}
		}
	}
	for (int t = 0; t < n; t++)
		linear(out + (size_t)t * D, b->att + (size_t)t * QD, m->wo + ld_ * QD,
		       m->bo ? m->bo + ld_ : NULL, QD, D);
}

static void forward_llama(const struct dense_ref *m, const int32_t *ids, int n, float *h,
			  float *logits, struct bufs *b)
{
	int D = m->dim, F = m->ffn, V = m->vocab;
	bool g = m->gemma;
	for (int t = 0; t < n; t++) {
		memcpy(h + (size_t)t * D, m->tok_emb + (size_t)ids[t] * D, sizeof(float) * D);
		for (int i = 0; g && i < D; i++) /* Gemma: times sqrt(hidden) */
			h[(size_t)t * D + i] = (float)(h[(size_t)t * D + i] * sqrt((double)D));
	}
	for (int l = 0; l < m->n_layers; l++) {
		size_t lD = (size_t)l * D, lF = (size_t)l * F;
		for (int t = 0; t < n; t++)
			rmsnorm_g(b->x + (size_t)t * D, h + (size_t)t * D, m->attn_norm + lD, D, m->eps, g);
		attention(m, l, b->x, n, b->tmp, b);
		for (int t = 0; g && t < n; t++)
			rmsnorm_g(b->tmp + (size_t)t * D, b->tmp + (size_t)t * D, m->post_attn_norm + lD, D,
				  m->eps, true);
		for (size_t i = 0; i < (size_t)n * D; i++)
			h[i] += b->tmp[i];
		for (int t = 0; t < n; t++) {
			float *x = b->x + (size_t)t * D, *ht = h + (size_t)t * D;
			rmsnorm_g(x, ht, m->ffn_norm + lD, D, m->eps, g);
			linear(b->f1, x, m->w_gate + lF * D, m->b_gate ? m->b_gate + lF : NULL, D, F);
			linear(b->f2, x, m->w_up + lF * D, m->b_up ? m->b_up + lF : NULL, D, F);
			for (int i = 0; i < F; i++)
				b->f1[i] = (g ? gelu_tanh(b->f1[i]) : silu(b->f1[i])) * b->f2[i];
			float *y = b->tmp + (size_t)t * D;
			linear(y, b->f1, m->w_down + lD * F, m->b_down ? m->b_down + lD : NULL, F, D);
			if (g)
				rmsnorm_g(y, y, m->post_ffn_norm + lD, D, m->eps, true);
			for (int i = 0; i < D; i++)
				ht[i] += y[i];
		}
	}
	for (int t = 0; t < n; t++) {
		float *x = b->x + (size_t)t * D;
		rmsnorm_g(x, h + (size_t)t * D, m->final_norm, D, m->eps, g);
		linear(logits + (size_t)t * V, x, m->lm_head, NULL, D, V);
	}
}

/* fc2(act(fc1(x))) of layer l for one position: x (D) -> y (D). */
static void opt_mlp(const struct dense_ref *m, int l, const float *x, float *y, struct bufs *b)
{
	int D = m->dim, F = m->ffn;
	size_t lD = (size_t)l * D, lF = (size_t)l * F;
	linear(b->f1, x, m->fc1_w + lF * D, m->fc1_b ? m->fc1_b + lF : NULL, D, F);
	for (int i = 0; i < F; i++)
		b->f1[i] = m->act_gelu ? gelu(b->f1[i]) : (b->f1[i] > 0 ? b->f1[i] : 0.0f);
	linear(y, b->f1, m->fc2_w + lD * F, m->fc2_b ? m->fc2_b + lD : NULL, F, D);
}

static void forward_opt(const struct dense_ref *m, const int32_t *ids, int n, float *h,
			float *logits, struct bufs *b)
{
	int D = m->dim, V = m->vocab, P = m->proj_dim;
	for (int t = 0; t < n; t++) {
		float *ht = h + (size_t)t * D;
		const float *e = m->tok_emb + (size_t)ids[t] * P;
		if (m->project_in)
			linear(ht, e, m->project_in, NULL, P, D);
		else
			memcpy(ht, e, sizeof(float) * D);
		const float *pe = m->pos_emb + (size_t)(t + 2) * D;
		for (int i = 0; i < D; i++)
			ht[i] += pe[i];
	}
#define LNW(a, l) ((a) ? (a) + (size_t)(l) * D : NULL)
	for (int l = 0; l < m->n_layers; l++) {
		if (m->pre_ln) {
			for (int t = 0; t < n; t++)
				layernorm(b->x + (size_t)t * D, h + (size_t)t * D, LNW(m->ln1_w, l),
					  LNW(m->ln1_b, l), D, m->eps);
			attention(m, l, b->x, n, b->tmp, b);
			for (size_t i = 0; i < (size_t)n * D; i++)
				h[i] += b->tmp[i];
			for (int t = 0; t < n; t++) {
				float *x = b->x + (size_t)t * D, *ht = h + (size_t)t * D;
				float *y = b->tmp + (size_t)t * D;
				layernorm(x, ht, LNW(m->ln2_w, l), LNW(m->ln2_b, l), D, m->eps);
				opt_mlp(m, l, x, y, b);
				for (int i = 0; i < D; i++)
					ht[i] += y[i];
			}
		} else {
			attention(m, l, h, n, b->tmp, b);
			for (int t = 0; t < n; t++) {
				float *ht = h + (size_t)t * D, *y = b->tmp + (size_t)t * D;
				for (int i = 0; i < D; i++)
					y[i] += ht[i];
				layernorm(ht, y, LNW(m->ln1_w, l), LNW(m->ln1_b, l), D, m->eps);
			}
			for (int t = 0; t < n; t++) {
				float *ht = h + (size_t)t * D, *y = b->tmp + (size_t)t * D;
				opt_mlp(m, l, ht, y, b);
				for (int i = 0; i < D; i++)
					y[i] += ht[i];
				layernorm(ht, y, LNW(m->ln2_w, l), LNW(m->ln2_b, l), D, m->eps);
			}
		}
	}
#undef LNW
	for (int t = 0; t < n; t++) {
		float *ht = h + (size_t)t * D, *x = b->x + (size_t)t * D;
		if (m->has_final_ln)
			layernorm(x, ht, m->final_ln_w, m->final_ln_b, D, m->eps);
		else
			memcpy(x, ht, sizeof(float) * D);
		const float *fin = x;
		if (m->project_out) {
			linear(b->f1, x, m->project_out, NULL, D, P); /* f1 holds max(F, P) */
			fin = b->f1;
		}
		linear(logits + (size_t)t * V, fin, m->lm_head, NULL, P, V);
	}
}

int dense_ref_forward(const struct dense_ref *m, const int32_t *ids, int n, float *logits)
{
	if (!m || !ids || !logits || n <= 0)
		return -1;
	if (m->arch == ARCH_OPT && n > m->max_pos)
		return -1;
	for (int t = 0; t < n; t++)
		if (ids[t] < 0 || ids[t] >= m->vocab)
			return -1;
	size_t nn = (size_t)n, D = (size_t)m->dim;
	size_t QD = (size_t)m->n_heads * m->head_dim, KD = (size_t)m->n_kv_heads * m->head_dim;
	size_t F = (size_t)m->ffn;
	if ((size_t)m->proj_dim > F)
		F = (size_t)m->proj_dim; /* f1 also holds project_out's output */
	struct bufs b = {
		.x = malloc(sizeof(float) * nn * D),
		.q = malloc(sizeof(float) * nn * QD),
		.k = malloc(sizeof(float) * nn * KD),
		.v = malloc(sizeof(float) * nn * KD),
		.att = malloc(sizeof(float) * nn * QD),
		.tmp = malloc(sizeof(float) * nn * D),
		.f1 = malloc(sizeof(float) * F),
		.f2 = malloc(sizeof(float) * F),
		.sc = malloc(sizeof(double) * nn),
	};
	float *h = malloc(sizeof(float) * nn * D); /* (n, D) residual stream */
	int rc = -1;
	if (b.x && b.q && b.k && b.v && b.att && b.tmp && b.f1 && b.f2 && b.sc && h) {
		if (m->arch == ARCH_LLAMA)
			forward_llama(m, ids, n, h, logits, &b);
		else
			forward_opt(m, ids, n, h, logits, &b);
		rc = 0;
	}
	free(b.x);
	free(b.q);
	free(b.k);
	free(b.v);
	free(b.att);
	free(b.tmp);
	free(b.f1);
	free(b.f2);
	free(b.sc);
	free(h);
	return rc;
}

int dense_ref_greedy(const struct dense_ref *m, const int32_t *prompt, int n_prompt, int n_new,
		     int32_t *out)
{
	if (!m || !prompt || n_prompt <= 0 || n_new < 0 || (n_new && !out))
		return -1;
	int total = n_prompt + n_new, V = m->vocab;
	int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
	float *logits = malloc(sizeof(float) * (size_t)total * (size_t)V);
	int rc = (ids && logits) ? 0 : -1;
	if (!rc)
		memcpy(ids, prompt, sizeof(int32_t) * (size_t)n_prompt);
	for (int step = 0; !rc && step < n_new; step++) {
		int n = n_prompt + step;
		if (dense_ref_forward(m, ids, n, logits)) {
			rc = -1;
			break;
		}
		const float *last = logits + (size_t)(n - 1) * V;
		int best = 0;
		for (int i = 1; i < V; i++)
			if (last[i] > last[best])
				best = i;
		ids[n] = best;
		out[step] = best;
	}
	free(ids);
	free(logits);
	return rc;
}
