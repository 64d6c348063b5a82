/* Model weights, whatever file they come from: the tensor list a config implies,
 * the arena and its storage formats, RoPE tables, freeing. The loaders of each
 * format (hf-model.c, gguf-model.c) fill them; model-load.c picks one. */
#include "model.h"
#include "qblock.h"

#include <errno.h>
#include <stdio.h>

static void add_spec(struct allm_weight_spec *s, size_t *n, void **slot, enum allm_dtype *dt,
		     int kind, int64_t d0, int64_t d1, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));

static void add_spec(struct allm_weight_spec *s, size_t *n, void **slot, enum allm_dtype *dt,
		     int kind, int64_t d0, int64_t d1, const char *fmt, ...)
{
	struct allm_weight_spec *e = &s[(*n)++];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->name, sizeof(e->name), fmt, ap);
	va_end(ap);
	e->shape[0] = d0;
	e->shape[1] = d1;
	e->n_dims = d1 ? 2 : 1;
	e->slot = slot;
	e->dt = dt;
	e->kind = kind;
}

/* The last n specs are row slices of one file tensor, in order. */
static void fuse(struct allm_weight_spec *s, int n)
{
	int64_t rows = 0;
	for (int i = 0; i < n; i++) {
		s[i].src_row0 = rows;
		rows += s[i].shape[0];
	}
	for (int i = 0; i < n; i++)
		s[i].src_rows = rows;
}

int allm_model_weight_specs(struct allm_model *m, struct allm_weight_spec **ret, size_t *ret_n)
{
	const struct allm_model_config *c = &m->cfg;
	int64_t D = c->hidden, F = c->intermediate, V = c->vocab_size;
	int64_t Q = (int64_t)c->n_heads * c->head_dim, K = (int64_t)c->n_kv_heads * c->head_dim;
	size_t cap = 16 + (size_t)c->n_layers * 24, n = 0;
	struct allm_weight_spec *s = allm_calloc(cap, sizeof(*s));
	if (!s)
		return -ENOMEM;

	const struct allm_arch_desc *ad = allm_arch_describe(c->arch);
	if (!ad->layernorm) {
		int64_t H = c->head_dim;
		bool gemma = ad->post_norms; /* Gemma's names for its four norms */
		add_spec(s, &n, &m->tok_emb, &m->tok_emb_dt, ALLM_WKIND_EMBED, V, D, "model.embed_tokens.weight");
		for (int i = 0; i < c->n_layers; i++) {
			struct allm_layer_weights *L = &m->layers[i];
			const char *p = "model.layers";
			add_spec(s, &n, &L->attn_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.%d.input_layernorm.weight", p, i);
			if (ad->fused_qkv) {
				add_spec(s, &n, &L->wq, &L->wq_dt, ALLM_WKIND_MATRIX, Q, D, "%s.%d.self_attn.qkv_proj.weight", p, i);
				add_spec(s, &n, &L->wk, &L->wk_dt, ALLM_WKIND_MATRIX, K, D, "%s.%d.self_attn.qkv_proj.weight", p, i);
				add_spec(s, &n, &L->wv, &L->wv_dt, ALLM_WKIND_MATRIX, K, D, "%s.%d.self_attn.qkv_proj.weight", p, i);
				fuse(&s[n - 3], 3);
			} else {
				add_spec(s, &n, &L->wq, &L->wq_dt, ALLM_WKIND_MATRIX, Q, D, "%s.%d.self_attn.q_proj.weight", p, i);
				add_spec(s, &n, &L->wk, &L->wk_dt, ALLM_WKIND_MATRIX, K, D, "%s.%d.self_attn.k_proj.weight", p, i);
				add_spec(s, &n, &L->wv, &L->wv_dt, ALLM_WKIND_MATRIX, K, D, "%s.%d.self_attn.v_proj.weight", p, i);
			}
			add_spec(s, &n, &L->wo, &L->wo_dt, ALLM_WKIND_MATRIX, D, Q, "%s.%d.self_attn.o_proj.weight", p, i);
			if (c->attn_bias || ad->qkv_bias) {
				add_spec(s, &n, &L->bq, NULL, ALLM_WKIND_BIAS, Q, 0, "%s.%d.self_attn.q_proj.bias", p, i);
				add_spec(s, &n, &L->bk, NULL, ALLM_WKIND_BIAS, K, 0, "%s.%d.self_attn.k_proj.bias", p, i);
				add_spec(s, &n, &L->bv, NULL, ALLM_WKIND_BIAS, K, 0, "%s.%d.self_attn.v_proj.bias", p, i);
			}
			if (c->attn_bias)
				add_spec(s, &n, &L->bo, NULL, ALLM_WKIND_BIAS, D, 0, "%s.%d.self_attn.o_proj.bias", p, i);
			if (ad->qk_norm) {
				add_spec(s, &n, &L->q_norm_w, NULL, ALLM_WKIND_NORM, H, 0, "%s.%d.self_attn.q_norm.weight", p, i);
				add_spec(s, &n, &L->k_norm_w, NULL, ALLM_WKIND_NORM, H, 0, "%s.%d.self_attn.k_norm.weight", p, i);
			}
			if (gemma) {
				add_spec(s, &n, &L->post_attn_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.%d.post_attention_layernorm.weight", p, i);
				add_spec(s, &n, &L->mlp_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.%d.pre_feedforward_layernorm.weight", p, i);
				add_spec(s, &n, &L->post_mlp_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.%d.post_feedforward_layernorm.weight", p, i);
			} else {
				add_spec(s, &n, &L->mlp_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.%d.post_attention_layernorm.weight", p, i);
			}
			if (ad->fused_gate_up) {
				add_spec(s, &n, &L->w_gate, &L->w_gate_dt, ALLM_WKIND_MATRIX, F, D, "%s.%d.mlp.gate_up_proj.weight", p, i);
				add_spec(s, &n, &L->w_up, &L->w_up_dt, ALLM_WKIND_MATRIX, F, D, "%s.%d.mlp.gate_up_proj.weight", p, i);
				fuse(&s[n - 2], 2);
			} else {
				add_spec(s, &n, &L->w_gate, &L->w_gate_dt, ALLM_WKIND_MATRIX, F, D, "%s.%d.mlp.gate_proj.weight", p, i);
				add_spec(s, &n, &L->w_up, &L->w_up_dt, ALLM_WKIND_MATRIX, F, D, "%s.%d.mlp.up_proj.weight", p, i);
			}
			add_spec(s, &n, &L->w_down, &L->w_down_dt, ALLM_WKIND_MATRIX, D, F, "%s.%d.mlp.down_proj.weight", p, i);
			if (c->mlp_bias) {
				add_spec(s, &n, &L->b_gate, NULL, ALLM_WKIND_BIAS, F, 0, "%s.%d.mlp.gate_proj.bias", p, i);
				add_spec(s, &n, &L->b_up, NULL, ALLM_WKIND_BIAS, F, 0, "%s.%d.mlp.up_proj.bias", p, i);
				add_spec(s, &n, &L->b_down, NULL, ALLM_WKIND_BIAS, D, 0, "%s.%d.mlp.down_proj.bias", p, i);
			}
		}
		add_spec(s, &n, &m->final_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "model.norm.weight");
		if (!c->tie_embeddings)
			add_spec(s, &n, &m->lm_head, &m->lm_head_dt, ALLM_WKIND_MATRIX, V, D, "lm_head.weight");
	} else {
		int64_t P = c->embed_proj_dim;
		const char *p = "model.decoder";
		add_spec(s, &n, &m->tok_emb, &m->tok_emb_dt, ALLM_WKIND_EMBED, V, P, "%s.embed_tokens.weight", p);
		add_spec(s, &n, &m->pos_emb, &m->pos_emb_dt, ALLM_WKIND_EMBED, (int64_t)c->max_pos + 2, D,
			 "%s.embed_positions.weight", p);
		if (P != D) {
			add_spec(s, &n, &m->proj_in, &m->proj_in_dt, ALLM_WKIND_MATRIX, D, P, "%s.project_in.weight", p);
			add_spec(s, &n, &m->proj_out, &m->proj_out_dt, ALLM_WKIND_MATRIX, P, D, "%s.project_out.weight", p);
		}
		if (c->final_ln && c->ln_affine) {
			add_spec(s, &n, &m->final_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.final_layer_norm.weight", p);
			add_spec(s, &n, &m->final_norm_b, NULL, ALLM_WKIND_BIAS, D, 0, "%s.final_layer_norm.bias", p);
		}
		for (int i = 0; i < c->n_layers; i++) {
			struct allm_layer_weights *L = &m->layers[i];
			const char *lp = "model.decoder.layers";
			add_spec(s, &n, &L->wk, &L->wk_dt, ALLM_WKIND_MATRIX, K, D, "%s.%d.self_attn.k_proj.weight", lp, i);
			add_spec(s, &n, &L->wv, &L->wv_dt, ALLM_WKIND_MATRIX, K, D, "%s.%d.self_attn.v_proj.weight", lp, i);
			add_spec(s, &n, &L->wq, &L->wq_dt, ALLM_WKIND_MATRIX, Q, D, "%s.%d.self_attn.q_proj.weight", lp, i);
			add_spec(s, &n, &L->wo, &L->wo_dt, ALLM_WKIND_MATRIX, D, Q, "%s.%d.self_attn.out_proj.weight", lp, i);
			if (c->attn_bias) {
				add_spec(s, &n, &L->bk, NULL, ALLM_WKIND_BIAS, K, 0, "%s.%d.self_attn.k_proj.bias", lp, i);
				add_spec(s, &n, &L->bv, NULL, ALLM_WKIND_BIAS, K, 0, "%s.%d.self_attn.v_proj.bias", lp, i);
				add_spec(s, &n, &L->bq, NULL, ALLM_WKIND_BIAS, Q, 0, "%s.%d.self_attn.q_proj.bias", lp, i);
				add_spec(s, &n, &L->bo, NULL, ALLM_WKIND_BIAS, D, 0, "%s.%d.self_attn.out_proj.bias", lp, i);
			}
			if (c->ln_affine) {
				add_spec(s, &n, &L->attn_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.%d.self_attn_layer_norm.weight", lp, i);
				add_spec(s, &n, &L->attn_norm_b, NULL, ALLM_WKIND_BIAS, D, 0, "%s.%d.self_attn_layer_norm.bias", lp, i);
			}
			add_spec(s, &n, &L->w_up, &L->w_up_dt, ALLM_WKIND_MATRIX, F, D, "%s.%d.fc1.weight", lp, i);
			add_spec(s, &n, &L->w_down, &L->w_down_dt, ALLM_WKIND_MATRIX, D, F, "%s.%d.fc2.weight", lp, i);
			if (c->mlp_bias) {
				add_spec(s, &n, &L->b_up, NULL, ALLM_WKIND_BIAS, F, 0, "%s.%d.fc1.bias", lp, i);
				add_spec(s, &n, &L->b_down, NULL, ALLM_WKIND_BIAS, D, 0, "%s.%d.fc2.bias", lp, i);
			}
			if (c->ln_affine) {
				add_spec(s, &n, &L->mlp_norm_w, NULL, ALLM_WKIND_NORM, D, 0, "%s.%d.final_layer_norm.weight", lp, i);
				add_spec(s, &n, &L->mlp_norm_b, NULL, ALLM_WKIND_BIAS, D, 0, "%s.%d.final_layer_norm.bias", lp, i);
			}
		}
	}
	ALLM_ASSERT(n <= cap);
	*ret = s;
	*ret_n = n;
	return 0;
}

/* Whether dt is an integer storage format: GGUF's blocks (a file's, or --quant's). */
static bool quantized(enum allm_dtype dt)
{
	return allm_dtype_is_qblock(dt);
}

static size_t align64(size_t x)
{
	return (x + 63) & ~(size_t)63;
}

uint64_t allm_model_weight_bytes(const struct allm_model_config *cfg, enum allm_dtype dt)
{
	return allm_model_config_n_params(cfg) * allm_dtype_size(dt);
}

enum allm_dtype allm_model_spec_dtype(const struct allm_model *m, const struct allm_weight_spec *s)
{
	return s->dt ? *s->dt : m->vdtype;
}

size_t allm_model_spec_bytes(const struct allm_model *m, const struct allm_weight_spec *s)
{
	enum allm_dtype dt = allm_model_spec_dtype(m, s);
	if (allm_dtype_is_qblock(dt))
		return allm_qb_bytes(dt, allm_spec_rows(s), allm_spec_cols(s));
	return allm_spec_elems(s) * allm_dtype_size(dt);
}

void allm_model_spec_store(const struct allm_model *m, const struct allm_weight_spec *s,
			   void *dst, int64_t row0, const float *src, int64_t n_rows)
{
	enum allm_dtype dt = allm_model_spec_dtype(m, s);
	int64_t cols = allm_spec_cols(s);
	if (allm_dtype_is_qblock(dt))
		allm_qb_quantize_rows(dt, dst, cols, row0, src, n_rows);
	else
		allm_from_f32((char *)dst + (size_t)(row0 * cols) * allm_dtype_size(dt), src, dt,
			      (size_t)(n_rows * cols));
}

int allm_model_spec_store_blocks(const struct allm_model *m, const struct allm_weight_spec *s,
				 void *dst, int64_t row0, enum allm_dtype file_dt, const void *src,
				 int64_t n_rows)
{
	int64_t cols = allm_spec_cols(s);
	size_t rb = allm_row_bytes(file_dt, cols);
	if (allm_model_spec_dtype(m, s) == file_dt) {
		memcpy((char *)dst + (size_t)row0 * rb, src, (size_t)n_rows * rb);
		return 0;
	}
	if (!allm_dtype_is_qblock(file_dt))
		return -EINVAL;
	float *row = allm_malloc((size_t)cols * sizeof(float));
	if (!row)
		return -ENOMEM;
	for (int64_t i = 0; i < n_rows; i++) {
		allm_qb_dequantize_row(file_dt, row, src, cols, i);
		allm_model_spec_store(m, s, dst, row0 + i, row, 1);
	}
	allm_free(row);
	return 0;
}

int allm_model_create_shell(allm_backend_t *be, const struct allm_model_config *cfg,
			    enum allm_dtype wdtype, struct allm_model **ret, struct allm_err *err)
{
	struct allm_model *m = allm_calloc(1, sizeof(*m));
	if (!m)
		return allm_err_set(err, -ENOMEM, "out of memory");
	m->cfg = *cfg;
	m->be = be;
	m->wdtype = wdtype;
	m->vdtype = quantized(wdtype) ? ALLM_DTYPE_F32 : wdtype;
	m->layers = allm_calloc((size_t)cfg->n_layers, sizeof(*m->layers));
	if (!m->layers) {
		allm_free(m);
		return allm_err_set(err, -ENOMEM, "out of memory");
	}
	m->tok_emb_dt = m->pos_emb_dt = m->proj_in_dt = m->proj_out_dt = m->lm_head_dt = wdtype;
	for (int i = 0; i < cfg->n_layers; i++) {
		struct allm_layer_weights *L = &m->layers[i];
		L->wq_dt = L->wk_dt = L->wv_dt = L->wo_dt = wdtype;
		L->w_gate_dt = L->w_up_dt = L->w_down_dt = wdtype;
	}
	*ret = m;
	return 0;
}

int allm_model_alloc_arena(struct allm_model *m, const struct allm_weight_spec *specs,
			   size_t n, struct allm_err *err)
{
	size_t total = 0;
	size_t free_b = 0, total_b = 0;
	for (size_t i = 0; i < n; i++) {
		enum allm_dtype dt = allm_model_spec_dtype(m, &specs[i]);
		enum allm_backend_op op = specs[i].kind == ALLM_WKIND_EMBED ? ALLM_OP_EMBEDDING : ALLM_OP_GEMM;
		if (quantized(dt) && !allm_backend_supports(m->be, op, dt))
			return allm_err_set(err, -ENOTSUP, "%s weights (--quant %s) are not supported by "
					    "the %s backend; use --device cpu", allm_dtype_name(dt),
					    allm_dtype_name(dt), m->be->iface->name(m->be));
		total += align64(allm_model_spec_bytes(m, &specs[i]));
	}
	total += 2 * align64((size_t)m->cfg.head_dim / 2 * sizeof(float)); /* global and local RoPE */

	/* A clear refusal beats the OOM killer: check against what the device has. */
	if (!m->be->iface->mem_info(m->be, &free_b, &total_b) && total > free_b)
		return allm_err_set(err, -ENOMEM,
				    "weights need %.2f GiB in %s but the %s backend has %.2f GiB free "
				    "(try --dtype bf16 or a GPU)",
				    total / 1073741824.0, allm_dtype_name(m->wdtype),
				    m->be->iface->name(m->be), free_b / 1073741824.0);
	int r = m->be->iface->alloc(m->be, total, &m->arena);
	if (r)
		return allm_err_set(err, r, "cannot allocate %.2f GiB of weights: %s",
				    total / 1073741824.0, allm_backend_last_error(m->be));
	m->arena_bytes = total;
	char *p = m->arena;
	for (size_t i = 0; i < n; i++) {
		*specs[i].slot = p;
		p += align64(allm_model_spec_bytes(m, &specs[i]));
	}
	m->inv_freq = (float *)p;
	m->inv_freq_local = (float *)(p + align64((size_t)m->cfg.head_dim / 2 * sizeof(float)));
	return 0;
}

int allm_model_finish(struct allm_model *m, struct allm_err *err)
{
	float inv[ALLM_MAX_HEAD_DIM / 2];
	if (m->cfg.tie_embeddings || !m->lm_head) {
		m->lm_head = m->tok_emb;
		m->lm_head_dt = m->tok_emb_dt;
	}
	if (!allm_arch_describe(m->cfg.arch)->rope)
		return 0;
	size_t bytes = (size_t)m->cfg.head_dim / 2 * sizeof(float);
	allm_model_config_inv_freq(&m->cfg, inv);
	int r = m->be->iface->upload(m->be, m->inv_freq, inv, bytes);
	if (!r && m->cfg.rope_local_theta > 0) {
		allm_model_config_inv_freq_local(&m->cfg, inv);
		r = m->be->iface->upload(m->be, m->inv_freq_local, inv, bytes);
	} else {
		m->inv_freq_local = m->inv_freq;
	}
	if (r)
		return allm_err_set(err, r, "upload: %s", allm_backend_last_error(m->be));
	return 0;
}

void allm_model_free(struct allm_model *m)
{
	if (!m)
		return;
	if (m->arena)
		m->be->iface->free(m->be, m->arena);
	allm_free(m->layers);
	allm_free(m);
}
