/* Loading a GGUF file's weights (see gguf-model.h): every tensor the config implies
 * is found and checked and its storage dtype chosen before the arena is allocated,
 * then each is copied or converted row by row into it. */
#include "gguf-model.h"
#include "qblock.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* The GGUF names of the tensors, by the slot they fill (the same role in every
 * architecture; Hugging Face's names differ per family, model.c). */
#define LW(f) offsetof(struct allm_layer_weights, f)
static const struct {
	size_t off;
	const char *gguf;
} layer_names[] = {
	{LW(attn_norm_w), "attn_norm.weight"},
	{LW(wq), "attn_q.weight"},
	{LW(wk), "attn_k.weight"},
	{LW(wv), "attn_v.weight"},
	{LW(wo), "attn_output.weight"},
	{LW(bq), "attn_q.bias"},
	{LW(bk), "attn_k.bias"},
	{LW(bv), "attn_v.bias"},
	{LW(bo), "attn_output.bias"},
	{LW(q_norm_w), "attn_q_norm.weight"},
	{LW(k_norm_w), "attn_k_norm.weight"},
	{LW(post_attn_norm_w), "post_attention_norm.weight"},
	{LW(mlp_norm_w), "ffn_norm.weight"},
	{LW(post_mlp_norm_w), "post_ffw_norm.weight"},
	{LW(w_gate), "ffn_gate.weight"},
	{LW(w_up), "ffn_up.weight"},
	{LW(w_down), "ffn_down.weight"},
	{LW(b_gate), "ffn_gate.bias"},
	{LW(b_up), "ffn_up.bias"},
	{LW(b_down), "ffn_down.bias"},
};
#undef LW

/* Per-layer tensors some converters write that the graph does not read. */
static const char *const ignored_layer_names[] = {"attn_rot_embd"};

bool allm_gguf_spec_name(const struct allm_model *m, const struct allm_weight_spec *s, char *buf,
			 size_t len)
{
	const struct allm_arch_desc *ad = allm_arch_describe(m->cfg.arch);
	if (s->slot == &m->tok_emb)
		return (size_t)snprintf(buf, len, "token_embd.weight") < len;
	if (s->slot == &m->final_norm_w)
		return (size_t)snprintf(buf, len, "output_norm.weight") < len;
	if (s->slot == &m->lm_head)
		return (size_t)snprintf(buf, len, "output.weight") < len;
	const char *base = (const char *)m->layers, *at = (const char *)s->slot;
	size_t sz = sizeof(struct allm_layer_weights);
	if (!m->layers || at < base || at >= base + (size_t)m->cfg.n_layers * sz)
		return false;
	int layer = (int)((size_t)(at - base) / sz);
	size_t off = (size_t)(at - base) % sz;
	const char *name = NULL;
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(layer_names); i++)
		if (layer_names[i].off == off)
			name = layer_names[i].gguf;
	/* Phi-3's fused matrices: attn_qkv, and ffn_up holding gate then up */
	if (ad->fused_qkv && s->src_rows && (off == offsetof(struct allm_layer_weights, wq) ||
					     off == offsetof(struct allm_layer_weights, wk) ||
					     off == offsetof(struct allm_layer_weights, wv)))
		name = "attn_qkv.weight";
	if (ad->fused_gate_up && s->src_rows && (off == offsetof(struct allm_layer_weights, w_gate) ||
						 off == offsetof(struct allm_layer_weights, w_up)))
		name = "ffn_up.weight";
	return name && (size_t)snprintf(buf, len, "blk.%d.%s", layer, name) < len;
}

/* Rows of the query / key projections GGUF interleaves, per head; 0 for others. */
static int32_t permuted_heads(const struct allm_model *m, const struct allm_weight_spec *s)
{
	const struct allm_layer_weights *L = m->layers;
	if (!allm_arch_describe(m->cfg.arch)->gguf_qk_interleaved)
		return 0;
	for (int i = 0; i < m->cfg.n_layers; i++) {
		if (s->slot == &L[i].wq || s->slot == &L[i].bq)
			return m->cfg.n_heads;
		if (s->slot == &L[i].wk || s->slot == &L[i].bk)
			return m->cfg.n_kv_heads;
	}
	return 0;
}

static int check_tensor(const struct allm_gguf *g, const struct allm_weight_spec *s,
			const struct allm_gguf_tensor *t, const char *name, struct allm_err *err)
{
	if (!t)
		return allm_err_set(err, -ENOENT, "%s: GGUF: tensor '%s' is missing (the metadata implies it)",
				    g->path, name);
	if (!allm_gguf_dequant_supported(t->type))
		return allm_err_set(err, -ENOTSUP, "%s: GGUF: tensor '%s' has type %s, which this engine does "
				    "not load (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
				    g->path, name, allm_gguf_ttype_name(t->type));
	/* GGUF lists dims innermost first: a (rows, cols) matrix is ne = [cols, rows] */
	int64_t rows = s->src_rows ? s->src_rows : s->shape[0]; /* a slice of a fused tensor */
	bool ok = (int)t->n_dims == s->n_dims &&
		  (s->n_dims == 1 ? t->ne[0] == s->shape[0]
				  : t->ne[0] == s->shape[1] && t->ne[1] == rows);
	if (!ok)
		return allm_err_set(err, -EINVAL,
				    "%s: GGUF: tensor '%s' has shape [%lld, %lld] (ggml order) but the "
				    "metadata implies [%lld, %lld]",
				    g->path, name, (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1),
				    (long long)(s->n_dims == 2 ? s->shape[1] : s->shape[0]),
				    (long long)(s->n_dims == 2 ? rows : 1));
	return 0;
}

/* With file types: the storage dtype of tensor s of this type, its own (the native
 * one, gguf-model.h) where the backend runs it for what s does, else wdtype. */
static enum allm_dtype file_type(allm_backend_t *be, const struct allm_weight_spec *s,
				 enum allm_gguf_ttype type, enum allm_dtype wdtype)
{
	enum allm_dtype dt = allm_gguf_native_dtype(type);
	/* a tied embedding table is the head's matrix too */
	bool ok = dt != ALLM_DTYPE_COUNT && allm_backend_supports(be, ALLM_OP_GEMM, dt) &&
		  (s->kind != ALLM_WKIND_EMBED || allm_backend_supports(be, ALLM_OP_EMBEDDING, dt));
	return ok ? dt : wdtype;
}

/* Whether spec s is a matrix the config gives a bias. */
static bool has_bias(const struct allm_model *m, const struct allm_weight_spec *s)
{
	for (int i = 0; i < m->cfg.n_layers; i++) {
		const struct allm_layer_weights *L = &m->layers[i];
		if (s->slot == &L->wq || s->slot == &L->wk || s->slot == &L->wv)
			return m->cfg.attn_bias || allm_arch_describe(m->cfg.arch)->qkv_bias;
		if (s->slot == &L->wo)
			return m->cfg.attn_bias;
		if (s->slot == &L->w_gate || s->slot == &L->w_up || s->slot == &L->w_down)
			return m->cfg.mlp_bias;
	}
	return false;
}

/* With file types, the norms' and biases' dtype: a file whose matrices all share one
 * float type keeps what --dtype of that type gives (vdtype = wdtype); any other mix
 * has them f32 (exact for any file type), and a 16-bit matrix with a bias is
 * widened to f32 too, since the GEMM reads the bias of 16-bit weights in their type
 * (kernels/cpu/cpu-gemm.c, biases_f32). */
static void mixed_norms(struct allm_model *m, const struct allm_weight_spec *specs, size_t n)
{
	bool uniform = true;
	for (size_t i = 0; i < n; i++)
		uniform &= !specs[i].dt || *specs[i].dt == m->wdtype;
	if (uniform)
		return;
	m->vdtype = ALLM_DTYPE_F32;
	for (size_t i = 0; i < n; i++)
		if (specs[i].dt && (*specs[i].dt == ALLM_DTYPE_F16 || *specs[i].dt == ALLM_DTYPE_BF16) &&
		    has_bias(m, &specs[i]))
			*specs[i].dt = ALLM_DTYPE_F32;
}

/* Every tensor of the file must be one the graph reads: a tensor we would skip is a
 * part of the model we do not run (another variant), better refused than ignored. */
static int check_unused(const struct allm_gguf *g, enum allm_arch arch, const bool *used,
			struct allm_err *err)
{
	for (size_t i = 0; i < g->n_tensors; i++) {
		int layer, n = 0;
		const char *name = g->tensors[i].name;
		if (used[i])
			continue;
		bool ignorable = false;
		if (sscanf(name, "blk.%d.%n", &layer, &n) == 1 && n)
			for (size_t k = 0; k < ALLM_ARRAY_SIZE(ignored_layer_names); k++)
				ignorable |= !strncmp(name + n, ignored_layer_names[k],
						      strlen(ignored_layer_names[k]));
		if (!ignorable)
			return allm_err_set(err, -ENOTSUP, "%s: GGUF: tensor '%s' is not part of the %s "
					    "graph this engine runs", g->path, name, allm_arch_name(arch));
	}
	return 0;
}

/* Rows dequantized per pass: about 1 MiB of f32, whole heads for Q/K. */
#define PASS_BYTES ((size_t)1 << 20)

static int64_t pass_rows(const struct allm_weight_spec *s, int64_t cols, int32_t heads)
{
	int64_t rows = s->n_dims == 2 ? s->shape[0] : 1;
	int64_t step = ALLM_MAX((int64_t)(PASS_BYTES / sizeof(float)) / cols, 1);
	if (heads && s->n_dims == 2) {
		int64_t d = rows / heads; /* rows of one head */
		step = ALLM_MAX(step / d, 1) * d;
	}
	return ALLM_MIN(step, rows);
}

/* The Hugging Face row of GGUF row r of a tensor with heads > 0 (d rows a head):
 * GGUF row h*d + 2i + j holds Hugging Face row h*d + j*d/2 + i. */
static int64_t hf_row(int64_t r, int64_t d)
{
	int64_t h = r / d, k = r % d;
	return h * d + (k % 2) * (d / 2) + k / 2;
}

/* Copies or converts t into the storage of spec s at dst (host memory), heads > 0
 * putting the rows of each head back in Hugging Face's order (a bias is one row
 * whose entries move the same way). Rows the storage format holds as the file does
 * (allm_gguf_blocks_as) go as stored, the rest through f32. buf and tmp hold a
 * pass of f32 rows. Returns 0 or -ENOMEM. */
static int convert_tensor(const struct allm_model *m, const struct allm_weight_spec *s,
			  const struct allm_gguf_tensor *t, int32_t heads, void *dst, float *buf,
			  float *tmp)
{
	int64_t cols = t->ne[0];
	enum allm_dtype dt = allm_model_spec_dtype(m, s);
	if (s->n_dims == 1) {
		if (!heads) {
			allm_gguf_dequant_rows(t, 0, 1, buf);
		} else {
			int64_t d = cols / heads;
			allm_gguf_dequant_rows(t, 0, 1, tmp);
			for (int64_t r = 0; r < cols; r++)
				buf[hf_row(r, d)] = tmp[r];
		}
		allm_model_spec_store(m, s, dst, 0, buf, 1);
		return 0;
	}
	int64_t rows = s->shape[0], step = pass_rows(s, cols, heads), d = heads ? rows / heads : 1;
	bool blocks = allm_gguf_blocks_as(t->type, dt);
	size_t rb = blocks ? allm_row_bytes(dt, cols) : 0;
	for (int64_t r0 = 0; r0 < rows; r0 += step) {
		int64_t n = ALLM_MIN(step, rows - r0);
		int r = 0;
		if (blocks) { /* a stored row is no larger than its f32 row: tmp holds them */
			allm_gguf_rows_as_blocks(t, s->src_row0 + r0, n, dt, tmp);
			for (int64_t i = 0; i < n && !r; i += heads ? 1 : n)
				r = allm_model_spec_store_blocks(m, s, dst, heads ? hf_row(r0 + i, d) : r0, dt,
								 (const char *)tmp + (size_t)i * rb, heads ? 1 : n);
			if (r)
				return r;
			continue;
		}
		if (!heads) {
			allm_gguf_dequant_rows(t, s->src_row0 + r0, n, buf);
		} else {
			allm_gguf_dequant_rows(t, s->src_row0 + r0, n, tmp);
			for (int64_t i = 0; i < n; i++)
				memcpy(buf + (hf_row(r0 + i, d) - r0) * cols, tmp + i * cols,
				       (size_t)cols * sizeof(float));
		}
		allm_model_spec_store(m, s, dst, r0, buf, n);
	}
	return 0;
}

static int load_weights(struct allm_model *m, const struct allm_gguf *g,
			const struct allm_weight_spec *specs, const struct allm_gguf_tensor **src,
			size_t n, const struct allm_model_load_opts *o, struct allm_err *err)
{
	allm_backend_t *be = m->be;
	uint64_t total = 0, done = 0;
	size_t most = 0, conv_most = 0;
	for (size_t i = 0; i < n; i++) {
		total += src[i]->nbytes;
		int64_t cols = src[i]->ne[0];
		most = ALLM_MAX(most, (size_t)(pass_rows(&specs[i], cols, permuted_heads(m, &specs[i])) * cols));
		conv_most = ALLM_MAX(conv_most, allm_model_spec_bytes(m, &specs[i]));
	}
	float *buf = allm_malloc(most * sizeof(float)), *tmp = allm_malloc(most * sizeof(float));
	void *conv = be->device_is_host ? NULL : allm_malloc(conv_most);
	int r = 0;
	if (!buf || !tmp || (!be->device_is_host && !conv)) {
		r = allm_err_set(err, -ENOMEM, "out of memory converting %s", g->path);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		void *dst = be->device_is_host ? *specs[i].slot : conv;
		if ((r = convert_tensor(m, &specs[i], src[i], permuted_heads(m, &specs[i]), dst, buf, tmp))) {
			r = allm_err_set(err, r, "out of memory converting %s", g->path);
			goto out;
		}
		if (!be->device_is_host &&
		    (r = be->iface->upload(be, *specs[i].slot, conv, allm_model_spec_bytes(m, &specs[i])))) {
			r = allm_err_set(err, r, "upload of %s: %s", src[i]->name, allm_backend_last_error(be));
			goto out;
		}
		done += src[i]->nbytes;
		if (o && o->progress)
			o->progress(o->progress_user, done, total);
	}
out:
	allm_free(buf);
	allm_free(tmp);
	allm_free(conv);
	return r;
}

int allm_gguf_model_load_from(allm_backend_t *be, const struct allm_gguf *g,
			      const struct allm_model_load_opts *o, struct allm_model **ret,
			      struct allm_err *err)
{
	struct allm_model_config cfg;
	struct allm_model *m = NULL;
	struct allm_weight_spec *specs = NULL;
	const struct allm_gguf_tensor **src = NULL;
	bool *used = NULL;
	size_t n = 0;
	int r;

	if ((r = allm_gguf_model_config(g, &cfg, err)) ||
	    (r = allm_model_create_shell(be, &cfg, o ? o->wdtype : ALLM_DTYPE_F32, &m, err)))
		goto fail;
	snprintf(m->source, sizeof(m->source), "%s", g->path);
	if ((r = allm_model_weight_specs(m, &specs, &n))) {
		allm_err_set(err, r, "out of memory");
		goto fail;
	}
	src = allm_calloc(n, sizeof(*src));
	used = allm_calloc(g->n_tensors + 1, sizeof(*used));
	if (!src || !used) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	/* validate everything before allocating or converting anything */
	for (size_t i = 0; i < n; i++) {
		char name[128];
		if (!allm_gguf_spec_name(m, &specs[i], name, sizeof(name))) {
			r = allm_err_set(err, -ENOTSUP, "%s: GGUF: no GGUF name for tensor '%s'", g->path,
					 specs[i].name);
			goto fail;
		}
		src[i] = allm_gguf_find_tensor(g, name);
		if ((r = check_tensor(g, &specs[i], src[i], name, err)))
			goto fail;
		used[src[i] - g->tensors] = true;
		if (o && o->file_types && specs[i].dt)
			*specs[i].dt = file_type(be, &specs[i], src[i]->type, m->wdtype);
	}
	if (o && o->file_types)
		mixed_norms(m, specs, n);
	if ((r = check_unused(g, cfg.arch, used, err)) || (r = allm_model_alloc_arena(m, specs, n, err)) ||
	    (r = load_weights(m, g, specs, src, n, o, err)) || (r = allm_model_finish(m, err)))
		goto fail;
	*ret = m;
	goto out;
fail:
	allm_model_free(m);
out:
	allm_free(specs);
	allm_free(src);
	allm_free(used);
	return r;
}

int allm_gguf_model_load(allm_backend_t *be, const char *path,
			 const struct allm_model_load_opts *o, struct allm_model **ret,
			 struct allm_err *err)
{
	struct allm_gguf *g = NULL;
	int r = allm_gguf_open(path, &g, err);
	if (!r)
		r = allm_gguf_model_load_from(be, g, o, ret, err);
	allm_gguf_close(g);
	return r;
}
