/* The forward pass over a paged batch: one layer function for every architecture,
 * its optional parts read from the architecture's description (model-config.h,
 * struct allm_arch_desc) and the config's values. */
#include "executor.h"
#include "kv-elastic.h"

#include <errno.h>
#include <math.h>

/* Device scratch layout for T tokens. */
struct acts {
	float *x; /* (T, D) residual stream */
	float *h; /* (T, max(D, Q, P)) normed input / attention output */
	float *q; /* (T, Q) */
	float *k; /* (T, K) */
	float *v; /* (T, K) */
	float *o; /* (T, D) projection output */
	float *g; /* (T, F) gate / fc1 */
	float *u; /* (T, F) up */
	float *e; /* (T, max(P, D)) embeddings */
	float *logits; /* (T, V) */
};

static size_t rup(size_t x)
{
	return (x + 15) & ~(size_t)15;
}

static size_t act_floats(const struct allm_model_config *c, int64_t T, struct acts *a,
			 float *base)
{
	size_t D = c->hidden, F = c->intermediate, V = c->vocab_size;
	size_t Q = (size_t)c->n_heads * c->head_dim, K = (size_t)c->n_kv_heads * c->head_dim;
	size_t P = allm_arch_describe(c->arch)->layernorm ? (size_t)c->embed_proj_dim : D;
	size_t W = ALLM_MAX(ALLM_MAX(D, Q), P);
	size_t t = (size_t)T, off = 0;
#define TAKE(field, n) \
	do { \
		a->field = base ? base + off : NULL; \
		off += rup(t * (n)); \
	} while (0)
	TAKE(x, D);
	TAKE(h, W);
	TAKE(q, Q);
	TAKE(k, K);
	TAKE(v, K);
	TAKE(o, ALLM_MAX(D, P));
	TAKE(g, F);
	TAKE(u, F);
	TAKE(e, W);
	TAKE(logits, V);
#undef TAKE
	return off;
}

size_t allm_executor_scratch_bytes(const struct allm_model_config *c, int64_t T)
{
	struct acts a;
	return act_floats(c, T, &a, NULL) * sizeof(float);
}

int allm_executor_check_ops(allm_backend_t *be, const struct allm_model_config *c,
			    struct allm_err *err)
{
	const struct allm_arch_desc *ad = allm_arch_describe(c->arch);
	static const struct {
		enum allm_backend_op op;
		const char *what;
	} needs[] = {
		{ALLM_OP_GELU_MUL, "a GELU MLP (gelu_mul)"},
		{ALLM_OP_SCALE, "scaled embeddings (scale)"},
		{ALLM_OP_SLIDING_WINDOW, "sliding-window attention"},
	};
	bool need[ALLM_ARRAY_SIZE(needs)] = {
		ad->gated_mlp && ad->act == ALLM_ACT_GELU_TANH, ad->embed_scale, c->sliding_window > 0,
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(needs); i++)
		if (need[i] && !allm_backend_supports(be, needs[i].op, ALLM_DTYPE_F32))
			return allm_err_set(err, -ENOTSUP, "the %s backend cannot run %s, which %s models need",
					    be->iface->name(be), needs[i].what, ad->name);
	return 0;
}

int allm_executor_create(struct allm_model *model, struct allm_kv_cache *kv,
			 struct allm_executor **ret, struct allm_err *err)
{
	int r = allm_executor_check_ops(model->be, &model->cfg, err);
	if (r)
		return r;
	struct allm_executor *ex = allm_calloc(1, sizeof(*ex));
	if (!ex)
		return allm_err_set(err, -ENOMEM, "out of memory");
	ex->model = model;
	ex->kv = kv;
	ex->be = model->be;
	ex->arch = allm_arch_describe(model->cfg.arch);
	/* on a GPU a decode step then copies ids, not vocab-sized rows, to the host */
	ex->device_sampling = !ex->be->device_is_host && ex->be->iface->argmax &&
			      allm_backend_has_topk(ex->be);
	*ret = ex;
	return 0;
}

int allm_executor_set_device_sampling(struct allm_executor *ex, bool on)
{
	if (on && !(ex->be->iface->argmax && allm_backend_has_topk(ex->be)))
		return -ENOTSUP;
	ex->device_sampling = on;
	return 0;
}

void allm_executor_free(struct allm_executor *ex)
{
	if (!ex)
		return;
	if (ex->scratch)
		ex->be->iface->free(ex->be, ex->scratch);
	if (ex->meta_dev)
		ex->be->iface->free(ex->be, ex->meta_dev);
	if (ex->pick_dev)
		ex->be->iface->free(ex->be, ex->pick_dev);
	allm_free(ex->meta_host);
	allm_free(ex->pick_host);
	allm_free(ex->picked);
	allm_free(ex);
}

/* Grows scratch for T tokens and the metadata buffers for `meta` int32s. */
static int reserve(struct allm_executor *ex, int64_t T, size_t meta, struct allm_err *err)
{
	allm_backend_t *be = ex->be;
	struct acts a;
	int r;
	if (T > ex->cap_tokens) {
		/* Host RAM: double (pages are committed lazily). Device memory: just
		 * what is asked (in steps of 256 tokens), the old buffer freed first,
		 * so the peak never exceeds the largest batch's, which is what the
		 * runtime measured before giving the rest to the KV pool. */
		int64_t cap = be->device_is_host ? ALLM_MAX(T, ex->cap_tokens * 2) : (T + 255) & ~255LL;
		size_t n = act_floats(&ex->model->cfg, cap, &a, NULL);
		void *p;
		if (!be->device_is_host && ex->scratch) {
			be->iface->free(be, ex->scratch);
			ex->scratch = NULL;
			ex->cap_tokens = 0;
		}
		if ((r = be->iface->alloc(be, n * sizeof(float), &p)))
			return allm_err_set(err, r, "cannot allocate activations for %lld tokens: %s",
					    (long long)cap, allm_backend_last_error(be));
		if (ex->scratch)
			be->iface->free(be, ex->scratch);
		ex->scratch = p;
		ex->cap_tokens = cap;
		ex->mapped_tokens = cap; /* a device's alloc maps it whole */
	}
	if (meta > ex->meta_cap) {
		size_t cap = ALLM_MAX(meta, ex->meta_cap * 2);
		void *d;
		int32_t *h = allm_malloc(cap * sizeof(int32_t));
		if (!h)
			return allm_err_set(err, -ENOMEM, "out of memory");
		if ((r = be->iface->alloc(be, cap * sizeof(int32_t), &d))) {
			allm_free(h);
			return allm_err_set(err, r, "cannot allocate step metadata: %s",
					    allm_backend_last_error(be));
		}
		if (ex->meta_dev)
			be->iface->free(be, ex->meta_dev);
		allm_free(ex->meta_host);
		ex->meta_dev = d;
		ex->meta_host = h;
		ex->meta_cap = cap;
	}
	return 0;
}

static int validate(struct allm_executor *ex, const struct allm_batch_seq *seqs, int32_t n,
		    int64_t *ret_T, int32_t *ret_maxb, struct allm_err *err)
{
	const struct allm_model_config *c = &ex->model->cfg;
	int64_t T = 0;
	int32_t maxb = 1, window = allm_model_passed_window(c), bs = ex->kv->lay.block_size;
	if (n <= 0)
		return allm_err_set(err, -EINVAL, "empty batch");
	for (int32_t s = 0; s < n; s++) {
		const struct allm_batch_seq *q = &seqs[s];
		int64_t end = (int64_t)q->start_pos + q->n_new;
		if (q->n_new <= 0 || q->start_pos < 0)
			return allm_err_set(err, -EINVAL, "sequence %d: nothing to run", s);
		if (end > c->max_pos)
			return allm_err_set(err, -EINVAL,
					    "sequence %d: %lld tokens exceed the context of %d "
					    "(max_position_embeddings)", s, (long long)end, c->max_pos);
		if (q->n_blocks < allm_kv_blocks_for(ex->kv, end))
			return allm_err_set(err, -EINVAL, "sequence %d: %d blocks cannot hold %lld tokens",
					    s, q->n_blocks, (long long)end);
		/* entries every layer's window has passed may be gone (-1): no token
		 * of this batch reads a block wholly before its first one's window */
		int32_t passed = window > 0 ? (q->start_pos + 1 - window) / bs : 0;
		for (int32_t b = 0; b < q->n_blocks; b++)
			if ((q->block_table[b] < 0 && b >= passed) || q->block_table[b] >= ex->kv->gpu.capacity)
				return allm_err_set(err, -EINVAL, "sequence %d: block %d out of range", s,
						    q->block_table[b]);
		for (int32_t i = 0; i < q->n_new; i++)
			if (q->tokens[i] < 0 || q->tokens[i] >= c->vocab_size)
				return allm_err_set(err, -EINVAL,
						    "token id %d is outside the vocabulary (0..%d)",
						    q->tokens[i], c->vocab_size - 1);
		T += q->n_new;
		maxb = ALLM_MAX(maxb, q->n_blocks);
	}
	*ret_T = T;
	*ret_maxb = maxb;
	return 0;
}

#define BE ex->be->iface
#define CHECK(call) \
	do { \
		if ((r = (call))) \
			goto fail; \
	} while (0)

/* GEMMs of the same x (q, k, v; gate, up): one call where the backend can prepare x
 * once for all of them (they share a storage dtype), one each otherwise (the bits
 * are gemm's either way). */
static int gemm_shared_x(allm_backend_t *be, int n_mats, float *const *ys, const float *x,
			 const void *const *ws, const void *const *bs, const enum allm_dtype *dts,
			 int64_t T, int64_t k, const int64_t *ms)
{
	bool same = true;
	for (int i = 1; i < n_mats; i++)
		same &= dts[i] == dts[0];
	if (same && be->iface->version >= 3 && be->iface->gemm_multi)
		return be->iface->gemm_multi(be, n_mats, ys, x, ws, bs, dts[0], T, k, ms);
	for (int i = 0; i < n_mats; i++) {
		int r = be->iface->gemm(be, ys[i], x, ws[i], bs[i], dts[i], T, k, ms[i]);
		if (r)
			return r;
	}
	return 0;
}

/* q, k and v of one layer from x. */
static int qkv(allm_backend_t *be, struct acts *a, const float *x,
	       const struct allm_layer_weights *L, int64_t T, int64_t D, int64_t Q, int64_t K)
{
	float *const ys[3] = { a->q, a->k, a->v };
	const void *const ws[3] = { L->wq, L->wk, L->wv }, *const bs[3] = { L->bq, L->bk, L->bv };
	const enum allm_dtype dts[3] = { L->wq_dt, L->wk_dt, L->wv_dt };
	const int64_t ms[3] = { Q, K, K };
	return gemm_shared_x(be, 3, ys, x, ws, bs, dts, T, D, ms);
}

/* The architecture's norm of n rows of dim: RMSNorm, or LayerNorm (w, b may be
 * NULL: no affine). */
static int norm(struct allm_executor *ex, float *y, const float *x, const void *w, const void *b,
		int64_t n, int64_t dim)
{
	const struct allm_model *m = ex->model;
	if (ex->arch->layernorm)
		return BE->layernorm(ex->be, y, x, w, b, m->vdtype, n, dim, m->cfg.norm_eps);
	return BE->rmsnorm(ex->be, y, x, w, m->vdtype, n, dim, m->cfg.norm_eps);
}

/* Attention of layer l on input `in` (normed x, or x itself after a post-LN
 * layer); the output projection in a->o. */
static int attention(struct allm_executor *ex, int l, struct acts *a, const float *in, int64_t T,
		     const struct allm_attn_meta *meta)
{
	allm_backend_t *be = ex->be;
	const struct allm_model *m = ex->model;
	const struct allm_model_config *c = &m->cfg;
	const struct allm_layer_weights *L = &m->layers[l];
	int64_t D = c->hidden, Q = (int64_t)c->n_heads * c->head_dim;
	int64_t K = (int64_t)c->n_kv_heads * c->head_dim;
	bool local = allm_model_layer_local(c, l);
	int r;
	CHECK(qkv(be, a, in, L, T, D, Q, K));
	if (ex->arch->qk_norm) { /* each head's own RMSNorm, before RoPE */
		CHECK(BE->rmsnorm(be, a->q, a->q, L->q_norm_w, m->vdtype, T * c->n_heads, c->head_dim,
				  c->norm_eps));
		CHECK(BE->rmsnorm(be, a->k, a->k, L->k_norm_w, m->vdtype, T * c->n_kv_heads, c->head_dim,
				  c->norm_eps));
	}
	if (ex->arch->rope)
		CHECK(BE->rope(be, a->q, a->k, meta->tok_pos, local ? m->inv_freq_local : m->inv_freq, T,
			       c->n_heads, c->n_kv_heads, c->head_dim));
	struct allm_attn_meta lm = *meta;
	lm.window = local ? c->sliding_window : 0;
	CHECK(BE->kv_write(be, ex->kv->dev, &ex->kv->lay, l, a->k, a->v, &lm));
	CHECK(BE->attention(be, a->h, a->q, ex->kv->dev, &ex->kv->lay, l, c->n_heads,
			    allm_model_attn_scale(c), &lm));
	CHECK(BE->gemm(be, a->o, a->h, L->wo, L->bo, L->wo_dt, T, Q, D));
fail:
	return r;
}

/* The MLP of layer l on `in`, into a->o. */
static int mlp(struct allm_executor *ex, int l, struct acts *a, const float *in, int64_t T)
{
	allm_backend_t *be = ex->be;
	const struct allm_model *m = ex->model;
	const struct allm_layer_weights *L = &m->layers[l];
	int64_t D = m->cfg.hidden, F = m->cfg.intermediate;
	int r;
	if (ex->arch->gated_mlp) {
		float *const gu[2] = { a->g, a->u };
		const void *const gu_w[2] = { L->w_gate, L->w_up }, *const gu_b[2] = { L->b_gate, L->b_up };
		const enum allm_dtype gu_dt[2] = { L->w_gate_dt, L->w_up_dt };
		const int64_t gu_m[2] = { F, F };
		CHECK(gemm_shared_x(be, 2, gu, in, gu_w, gu_b, gu_dt, T, D, gu_m));
		if (ex->arch->act == ALLM_ACT_GELU_TANH)
			CHECK(BE->gelu_mul(be, a->g, a->g, a->u, T * F));
		else
			CHECK(BE->silu_mul(be, a->g, a->g, a->u, T * F));
	} else {
		CHECK(BE->gemm(be, a->g, in, L->w_up, L->b_up, L->w_up_dt, T, D, F));
		CHECK(BE->relu(be, a->g, a->g, T * F));
	}
	CHECK(BE->gemm(be, a->o, a->g, L->w_down, L->b_down, L->w_down_dt, T, F, D));
fail:
	return r;
}

/* One decoder layer, every architecture: pre-norm (or OPT's post-LN: the norm after
 * the residual add), attention, the optional norm of its output (Gemma), the
 * residual; the same around the MLP. */
static int run_layer(struct allm_executor *ex, int l, struct acts *a, int64_t T,
		     const struct allm_attn_meta *meta)
{
	allm_backend_t *be = ex->be;
	const struct allm_model *m = ex->model;
	const struct allm_model_config *c = &m->cfg;
	const struct allm_layer_weights *L = &m->layers[l];
	int64_t D = c->hidden;
	bool pre = !ex->arch->layernorm || c->pre_ln;
	int r;
	if (pre)
		CHECK(norm(ex, a->h, a->x, L->attn_norm_w, L->attn_norm_b, T, D));
	CHECK(attention(ex, l, a, pre ? a->h : a->x, T, meta));
	if (ex->arch->post_norms)
		CHECK(norm(ex, a->o, a->o, L->post_attn_norm_w, NULL, T, D));
	CHECK(BE->add(be, a->x, a->x, a->o, T * D));
	if (!pre)
		CHECK(norm(ex, a->x, a->x, L->attn_norm_w, L->attn_norm_b, T, D));
	if (pre)
		CHECK(norm(ex, a->h, a->x, L->mlp_norm_w, L->mlp_norm_b, T, D));
	CHECK(mlp(ex, l, a, pre ? a->h : a->x, T));
	if (ex->arch->post_norms)
		CHECK(norm(ex, a->o, a->o, L->post_mlp_norm_w, NULL, T, D));
	CHECK(BE->add(be, a->x, a->x, a->o, T * D));
	if (!pre)
		CHECK(norm(ex, a->x, a->x, L->mlp_norm_w, L->mlp_norm_b, T, D));
fail:
	return r;
}

/* Embeddings of the batch into a->x. */
static int embed(struct allm_executor *ex, struct acts *a, int64_t T, const int32_t *ids_dev,
		 const int32_t *pos2_dev)
{
	allm_backend_t *be = ex->be;
	const struct allm_model *m = ex->model;
	const struct allm_model_config *c = &m->cfg;
	int r;
	if (m->proj_in) {
		CHECK(BE->embedding(be, a->e, m->tok_emb, m->tok_emb_dt, ids_dev, T, c->embed_proj_dim));
		CHECK(BE->gemm(be, a->x, a->e, m->proj_in, NULL, m->proj_in_dt, T, c->embed_proj_dim,
			       c->hidden));
	} else {
		CHECK(BE->embedding(be, a->x, m->tok_emb, m->tok_emb_dt, ids_dev, T, c->hidden));
	}
	if (ex->arch->embed_scale)
		CHECK(BE->scale(be, a->x, a->x, sqrtf((float)c->hidden), T * c->hidden));
	if (!ex->arch->rope) {
		/* learned positions: row p + 2 (OPT's offset) */
		CHECK(BE->embedding(be, a->e, m->pos_emb, m->pos_emb_dt, pos2_dev, T, c->hidden));
		CHECK(BE->add(be, a->x, a->x, a->e, T * c->hidden));
	}
fail:
	return r;
}

/* Final norm, optional projection and the LM head over the S rows in a->h. */
static int head(struct allm_executor *ex, struct acts *a, int64_t S)
{
	allm_backend_t *be = ex->be;
	const struct allm_model *m = ex->model;
	const struct allm_model_config *c = &m->cfg;
	int64_t D = c->hidden, P = ex->arch->layernorm ? c->embed_proj_dim : D;
	float *in = a->h;
	int r = 0;
	if (!ex->arch->layernorm || c->final_ln) {
		CHECK(norm(ex, a->e, a->h, m->final_norm_w, m->final_norm_b, S, D));
		in = a->e;
	}
	if (m->proj_out) {
		CHECK(BE->gemm(be, a->o, in, m->proj_out, NULL, m->proj_out_dt, S, D, P));
		in = a->o;
	}
	CHECK(BE->gemm(be, a->logits, in, m->lm_head, NULL, m->lm_head_dt, S, P, c->vocab_size));
fail:
	return r;
}

int allm_executor_forward(struct allm_executor *ex, const struct allm_batch_seq *seqs,
			  int32_t n_seqs, bool all_logits, float *ret_logits,
			  struct allm_err *err)
{
	const struct allm_model_config *c = &ex->model->cfg;
	allm_backend_t *be = ex->be;
	struct acts a;
	int64_t T = 0;
	int32_t maxb = 1;
	int r;

	ex->logits_rows = 0; /* nothing to reduce until this forward succeeds */
	if ((r = validate(ex, seqs, n_seqs, &T, &maxb, err)))
		return r;
	int64_t S = all_logits ? T : n_seqs;
	/* metadata: ids, pos, pos+2, tok_seq, slot (T each), gather rows (S), tables */
	size_t meta_n = (size_t)T * 5 + (size_t)S + (size_t)n_seqs * maxb;
	if ((r = reserve(ex, T, meta_n, err)))
		return r;
	int32_t *ids = ex->meta_host, *pos = ids + T, *pos2 = pos + T, *tseq = pos2 + T;
	int32_t *slot = tseq + T, *rows = slot + T, *bt = rows + S;
	int32_t max_ctx = 0, bs = ex->kv->lay.block_size;
	int64_t t = 0;
	for (int32_t s = 0; s < n_seqs; s++) {
		const struct allm_batch_seq *q = &seqs[s];
		for (int32_t i = 0; i < q->n_new; i++, t++) {
			int32_t p = q->start_pos + i;
			ids[t] = q->tokens[i];
			pos[t] = p;
			pos2[t] = p + 2;
			tseq[t] = s;
			slot[t] = q->block_table[p / bs] * bs + p % bs;
			if (all_logits)
				rows[t] = (int32_t)t;
		}
		if (!all_logits)
			rows[s] = (int32_t)(t - 1);
		max_ctx = ALLM_MAX(max_ctx, q->start_pos + q->n_new);
		for (int32_t b = 0; b < maxb; b++)
			bt[(size_t)s * maxb + b] = b < q->n_blocks ? q->block_table[b] : 0;
	}
	if ((r = BE->upload(be, ex->meta_dev, ex->meta_host, meta_n * sizeof(int32_t))))
		return allm_err_set(err, r, "upload: %s", allm_backend_last_error(be));
	int32_t *d = ex->meta_dev;
	struct allm_attn_meta meta = {
		.n_tokens = (int32_t)T,
		.n_seqs = n_seqs,
		.max_blocks_per_seq = maxb,
		.max_ctx = max_ctx,
		.tok_seq = d + 3 * T,
		.tok_pos = d + T,
		.slot = d + 4 * T,
		.block_tables = d + 5 * T + S,
	};
	/* elastic: from the start, so the step maps only what it uses; a device
	 * that maps before writing (CUDA's VMM) backs those pages now */
	if (ex->elastic) {
		if ((r = allm_mem_map(be, ex->scratch, allm_executor_scratch_bytes(c, T))))
			return allm_err_set(err, r, "cannot map activations for %lld tokens: %s", (long long)T,
					    allm_backend_last_error(be));
		ex->mapped_tokens = ALLM_MAX(ex->mapped_tokens, T);
	}
	act_floats(c, ex->elastic ? T : ex->cap_tokens, &a, ex->scratch);

	BE->timer_start(be);
	CHECK(embed(ex, &a, T, d, d + 2 * T));
	for (int l = 0; l < c->n_layers; l++)
		CHECK(run_layer(ex, l, &a, T, &meta));
	CHECK(BE->gather_rows(be, a.h, a.x, d + 5 * T, S, c->hidden));
	CHECK(head(ex, &a, S));
	ex->logits_dev = a.logits;
	ex->logits_rows = (int32_t)S;
	if (ret_logits)
		CHECK(BE->download(be, ret_logits, a.logits, (size_t)S * c->vocab_size * sizeof(float)));
	/* on a GPU this waits for the step: the time is the forward's device time */
	CHECK(BE->timer_stop(be, &ex->last_seconds));
	return 0;
fail:
	return allm_err_set(err, r, "forward failed on %s: %s", BE->name(be),
			    allm_backend_last_error(be));
}

int allm_executor_reduce(struct allm_executor *ex, bool want_argmax, int32_t k,
			 const int32_t **ret_ids, const float **ret_vals,
			 const int32_t **ret_topk_ids, struct allm_err *err)
{
	allm_backend_t *be = ex->be;
	int64_t n = ex->logits_rows, V = ex->model->cfg.vocab_size;
	int r;
	if (n <= 0)
		return allm_err_set(err, -EINVAL, "no logits kept on the device to reduce");
	if (k < 0 || k > ALLM_TOPK_MAX || k > V || (k && !allm_backend_has_topk(be)) ||
	    (want_argmax && !BE->argmax))
		return allm_err_set(err, -EINVAL, "device reduction (argmax %d, top-%d) not available",
				    want_argmax, k);
	/* layout: ids[n] | vals[n * k] (f32 bits) | topk ids[n * k] */
	size_t words = (size_t)n * (1 + 2 * (size_t)k);
	if (words > ex->pick_cap) {
		size_t cap = ALLM_MAX(words, ex->pick_cap * 2);
		void *d;
		int32_t *h = allm_malloc(cap * sizeof(int32_t));
		if (!h)
			return allm_err_set(err, -ENOMEM, "out of memory");
		if ((r = BE->alloc(be, cap * sizeof(int32_t), &d))) {
			allm_free(h);
			return allm_err_set(err, r, "cannot allocate sampling buffers: %s",
					    allm_backend_last_error(be));
		}
		if (ex->pick_dev)
			BE->free(be, ex->pick_dev);
		allm_free(ex->pick_host);
		ex->pick_dev = d;
		ex->pick_host = h;
		ex->pick_cap = cap;
	}
	int32_t *d_ids = ex->pick_dev;
	float *d_vals = (float *)(d_ids + n);
	int32_t *d_tk = d_ids + n + n * k;
	if (want_argmax && (r = BE->argmax(be, d_ids, ex->logits_dev, n, V)))
		goto fail;
	if (k && (r = BE->topk(be, d_vals, d_tk, ex->logits_dev, n, V, k)))
		goto fail;
	if ((r = BE->download(be, ex->pick_host, ex->pick_dev, words * sizeof(int32_t))))
		goto fail;
	*ret_ids = ex->pick_host;
	*ret_vals = (const float *)(ex->pick_host + n);
	*ret_topk_ids = ex->pick_host + n + n * k;
	return 0;
fail:
	return allm_err_set(err, r, "sampling on %s failed: %s", BE->name(be),
			    allm_backend_last_error(be));
}

int allm_executor_download_row(struct allm_executor *ex, int32_t row, float *ret,
			       struct allm_err *err)
{
	allm_backend_t *be = ex->be;
	int64_t V = ex->model->cfg.vocab_size;
	int r;
	if (row < 0 || row >= ex->logits_rows)
		return allm_err_set(err, -EINVAL, "no kept logits row %d", row);
	if ((r = BE->download(be, ret, ex->logits_dev + (size_t)row * V, (size_t)V * sizeof(float))))
		return allm_err_set(err, r, "download of logits: %s", allm_backend_last_error(be));
	return 0;
}

int32_t *allm_executor_picked(struct allm_executor *ex, int32_t n)
{
	if (n > ex->picked_cap) {
		int32_t cap = ALLM_MAX(n, ex->picked_cap * 2);
		int32_t *p = allm_realloc(ex->picked, (size_t)cap * sizeof(int32_t));
		if (!p)
			return NULL;
		ex->picked = p;
		ex->picked_cap = cap;
	}
	return ex->picked;
}

int allm_executor_set_elastic(struct allm_executor *ex, int64_t max_tokens, struct allm_err *err)
{
	int r = reserve(ex, max_tokens, 0, err);
	if (r)
		return r;
	ex->elastic = true;
	ex->mapped_tokens = ex->cap_tokens; /* a device's alloc backs it all: steps map what they use */
	allm_executor_trim(ex, 0);
	return 0;
}

void allm_executor_trim(struct allm_executor *ex, int64_t keep_tokens)
{
	if (!ex->elastic || !ex->scratch || keep_tokens >= ex->mapped_tokens)
		return;
	size_t cap = allm_executor_scratch_bytes(&ex->model->cfg, ex->cap_tokens);
	size_t keep = allm_executor_scratch_bytes(&ex->model->cfg, ALLM_MIN(keep_tokens, ex->cap_tokens));
	allm_mem_release(ex->be, (char *)ex->scratch + keep, cap - keep);
	ex->mapped_tokens = ALLM_MAX(keep_tokens, 0);
}

size_t allm_executor_scratch_resident(const struct allm_executor *ex)
{
	if (!ex->scratch)
		return 0;
	return allm_mem_resident(ex->be, ex->scratch, allm_executor_scratch_bytes(&ex->model->cfg, ex->cap_tokens));
}
