/* The simulated device's ops: each one advances the virtual clock by what the cost
 * model gives for its shape and computes nothing. The forward's token ids (first
 * embedding) and positions (first attention) give every row a key; the head's
 * gathered rows carry theirs to argmax / top-k / downloaded logits, which pick a
 * token from the key alone: next id = f(last id, position), whatever the batch. */
#include "sim-internal.h"

#include <errno.h>
#include <math.h>

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t s = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
	return allm_splitmix64(&s);
}

/* The token a row with this key "predicts". */
static int32_t pick(uint64_t key, int64_t vocab)
{
	uint64_t s = key;
	return (int32_t)(allm_splitmix64(&s) % (uint64_t)vocab);
}

static int grow(struct sim_fwd *f, int64_t n)
{
	if (n <= f->cap)
		return 0;
	int64_t cap = ALLM_MAX(n, f->cap * 2);
	int32_t *ids = allm_realloc(f->ids, (size_t)cap * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	f->ids = ids;
	uint64_t *keys = allm_realloc(f->keys, (size_t)cap * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	f->keys = keys;
	f->cap = cap;
	return 0;
}

void sim_fwd_begin(struct sim_ctx *c)
{
	c->fwd.have_ids = false;
	c->fwd.have_keys = false;
	c->fwd.meta_pos = NULL;
	c->fwd.n_sel = 0;
	c->fwd.serial++;
}

void sim_fwd_fini(struct sim_fwd *f)
{
	allm_free(f->ids);
	allm_free(f->keys);
	allm_free(f->sel);
	memset(f, 0, sizeof(*f));
}

int sim_embedding(allm_backend_t *be, float *y, const void *table, enum allm_dtype dt,
			 const int32_t *ids, int64_t n, int64_t dim)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	/* the first embedding of a forward is the tokens' (OPT's second: positions) */
	if (!c->fwd.have_ids && grow(&c->fwd, n) == 0) {
		if (sim_mem_real(&c->mem, ids, (size_t)n * sizeof(int32_t)))
			memcpy(c->fwd.ids, ids, (size_t)n * sizeof(int32_t));
		else
			for (int64_t i = 0; i < n; i++)
				c->fwd.ids[i] = -1;
		c->fwd.n_tok = n;
		c->fwd.have_ids = true;
	}
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_EMBEDDING, allm_sim_bytes_embedding(n, dim, dt)),
	       w0);
	return 0;
}

int sim_rmsnorm(allm_backend_t *be, float *y, const float *x, const void *w,
		       enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_RMSNORM, allm_sim_bytes_norm(n, dim, dt, 1)), w0);
	return 0;
}

int sim_layernorm(allm_backend_t *be, float *y, const float *x, const void *w,
			 const void *b, enum allm_dtype dt, int64_t n, int64_t dim, float eps)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_LAYERNORM, allm_sim_bytes_norm(n, dim, dt, 2)), w0);
	return 0;
}

int sim_gemm(allm_backend_t *be, float *y, const float *x, const void *w,
		    const void *bias, enum allm_dtype dt, int64_t n, int64_t k, int64_t m)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	/* the last gemm of a forward is the LM head: its output holds the logits */
	c->fwd.logits = y;
	c->fwd.logits_rows = n;
	c->fwd.logits_cols = m;
	sim_charge(c, allm_sim_cost_gemm(c->prof, dt, n, k, m, bias != NULL), w0);
	return 0;
}

int sim_rope(allm_backend_t *be, float *q, float *k, const int32_t *pos,
		    const float *inv_freq, int64_t n, int32_t n_heads, int32_t n_kv_heads,
		    int32_t head_dim)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_ROPE,
				       allm_sim_bytes_rope(n, n_heads, n_kv_heads, head_dim)), w0);
	return 0;
}

int sim_silu_mul(allm_backend_t *be, float *y, const float *gate, const float *up,
			int64_t n)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_SILU_MUL, allm_sim_bytes_elementwise(n, 3)), w0);
	return 0;
}

int sim_relu(allm_backend_t *be, float *y, const float *x, int64_t n)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_RELU, allm_sim_bytes_elementwise(n, 2)), w0);
	return 0;
}

int sim_add(allm_backend_t *be, float *y, const float *a, const float *b, int64_t n)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_ADD, allm_sim_bytes_elementwise(n, 3)), w0);
	return 0;
}

int sim_gather_rows(allm_backend_t *be, float *y, const float *x, const int32_t *rows,
			   int64_t n, int64_t dim)
{
	struct sim_ctx *c = SIM(be);
	struct sim_fwd *f = &c->fwd;
	struct sim_stamp w0 = sim_stamp(c);
	if (n > f->sel_cap) {
		uint64_t *s = allm_realloc(f->sel, (size_t)n * sizeof(*s));
		if (!s)
			return allm_err_set(&be->last_err, -ENOMEM, "sim: out of memory");
		f->sel = s;
		f->sel_cap = n;
	}
	bool known = f->have_keys && sim_mem_real(&c->mem, rows, (size_t)n * sizeof(int32_t));
	for (int64_t i = 0; i < n; i++)
		f->sel[i] = known && rows[i] >= 0 && rows[i] < f->n_tok ? f->keys[rows[i]]
									 : mix(f->serial, (uint64_t)i);
	f->n_sel = n;
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_GATHER_ROWS, allm_sim_bytes_gather(n, dim)), w0);
	return 0;
}

int sim_kv_write(allm_backend_t *be, void *kv_pool, const struct allm_kv_layout *lay,
			int32_t layer, const float *k, const float *v,
			const struct allm_attn_meta *meta)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_KV_WRITE, allm_sim_bytes_kv_write(lay, meta->n_tokens)),
	       w0);
	return 0;
}

/* The attention shape of this forward's metadata and, once, the rows' keys. */
static void attn_shape(struct sim_ctx *c, const struct allm_attn_meta *meta)
{
	struct sim_fwd *f = &c->fwd;
	struct allm_sim_attn_shape *s = &f->shape;
	int64_t T = meta->n_tokens;
	memset(s, 0, sizeof(*s));
	s->n_tokens = T;
	f->meta_pos = meta->tok_pos;
	if (!sim_mem_real(&c->mem, meta->tok_pos, (size_t)T * sizeof(int32_t)) ||
	    !sim_mem_real(&c->mem, meta->tok_seq, (size_t)T * sizeof(int32_t))) {
		/* unreadable metadata: the bound every token at the longest context */
		s->sum_ctx = (double)T * meta->max_ctx;
		s->kv_reads = (double)meta->n_seqs * meta->max_ctx * ceil((double)T / ALLM_SIM_ATTN_Q_TILE);
		s->kv_unique = (double)meta->n_seqs * meta->max_ctx;
		return;
	}
	allm_sim_attn_shape_from(meta->tok_pos, meta->tok_seq, T, s);
	if (f->have_ids && f->n_tok == T) {
		for (int64_t t = 0; t < T; t++)
			f->keys[t] = mix((uint64_t)(uint32_t)f->ids[t], (uint64_t)meta->tok_pos[t]);
		f->have_keys = true;
	}
}

int sim_attention(allm_backend_t *be, float *out, const float *q, const void *kv_pool,
			 const struct allm_kv_layout *lay, int32_t layer, int32_t n_heads,
			 float scale, const struct allm_attn_meta *meta)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	if (c->fwd.meta_pos != meta->tok_pos || c->fwd.shape.n_tokens != meta->n_tokens)
		attn_shape(c, meta);
	const struct allm_sim_attn_shape *shape = &c->fwd.shape;
	struct allm_sim_attn_shape win;
	/* a local layer reads only its window (unreadable metadata: the full bound) */
	if (meta->window > 0 && sim_mem_real(&c->mem, meta->tok_pos, (size_t)meta->n_tokens * sizeof(int32_t)) &&
	    sim_mem_real(&c->mem, meta->tok_seq, (size_t)meta->n_tokens * sizeof(int32_t))) {
		allm_sim_attn_shape_window(meta->tok_pos, meta->tok_seq, meta->n_tokens, meta->window, &win);
		shape = &win;
	}
	sim_charge(c, allm_sim_cost_attention(c->prof, lay, n_heads, shape), w0);
	return 0;
}

int sim_gelu_mul(allm_backend_t *be, float *y, const float *gate, const float *up, int64_t n)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_GELU_MUL, allm_sim_bytes_elementwise(n, 3)), w0);
	return 0;
}

int sim_scale(allm_backend_t *be, float *y, const float *x, float s, int64_t n)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_SCALE, allm_sim_bytes_elementwise(n, 2)), w0);
	return 0;
}

/* The key of logits row i of the array at `logits`. */
static uint64_t row_key(const struct sim_fwd *f, const float *logits, int64_t i)
{
	if (logits == f->logits && i < f->n_sel)
		return f->sel[i];
	return mix(f->serial, (uint64_t)i);
}

int sim_argmax(allm_backend_t *be, int32_t *ret_ids, const float *logits, int64_t n,
		      int64_t vocab)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	if (!sim_mem_real(&c->mem, ret_ids, (size_t)n * sizeof(int32_t)))
		return allm_err_set(&be->last_err, -EFAULT, "sim: argmax output of %lld ids is not in "
				    "a small device buffer", (long long)n);
	for (int64_t i = 0; i < n; i++)
		ret_ids[i] = pick(row_key(&c->fwd, logits, i), vocab);
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_ARGMAX, allm_sim_bytes_logits(n, vocab)), w0);
	return 0;
}

/* Top-k of a row: the argmax pick first, then the ids after it; values fall by
 * 1/k from 8 (a peaked but not one-hot distribution for the sampler). */
int sim_topk(allm_backend_t *be, float *ret_vals, int32_t *ret_ids, const float *logits,
		    int64_t n, int64_t vocab, int32_t k)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	if (k < 1 || k > ALLM_TOPK_MAX || k > vocab)
		return allm_err_set(&be->last_err, -EINVAL, "sim: topk k=%d outside 1..min(%lld, %d)", k,
				    (long long)vocab, ALLM_TOPK_MAX);
	size_t nk = (size_t)n * (size_t)k;
	if (!sim_mem_real(&c->mem, ret_ids, nk * sizeof(int32_t)) ||
	    !sim_mem_real(&c->mem, ret_vals, nk * sizeof(float)))
		return allm_err_set(&be->last_err, -EFAULT, "sim: topk outputs are not in a small "
				    "device buffer");
	for (int64_t i = 0; i < n; i++) {
		int32_t first = pick(row_key(&c->fwd, logits, i), vocab);
		for (int32_t j = 0; j < k; j++) {
			ret_ids[i * k + j] = (int32_t)((first + j) % vocab);
			ret_vals[i * k + j] = 8.0f - (float)j / (float)k;
		}
	}
	sim_charge(c, allm_sim_cost_stream(c->prof, ALLM_OP_TOPK, allm_sim_bytes_logits(n, vocab)), w0);
	return 0;
}

void sim_fill_download(struct sim_ctx *c, void *dst, const void *src, size_t bytes)
{
	const struct sim_fwd *f = &c->fwd;
	const char *s = src, *l = (const char *)f->logits;
	size_t lbytes = (size_t)f->logits_rows * (size_t)f->logits_cols * sizeof(float);
	if (!l || s < l || s + bytes > l + lbytes || (size_t)(s - l) % sizeof(float)) {
		if (sim_mem_real(&c->mem, src, bytes))
			memcpy(dst, src, bytes);
		else
			memset(dst, 0, bytes);
		return;
	}
	/* logits: small noise below zero, the row's pick far above it */
	float *out = dst;
	size_t first = (size_t)(s - l) / sizeof(float), n = bytes / sizeof(float);
	int64_t cols = f->logits_cols;
	for (size_t e = 0; e < n; e++) {
		int64_t r = (int64_t)((first + e) / (size_t)cols), j = (int64_t)((first + e) % (size_t)cols);
		uint64_t key = row_key(f, f->logits, r);
		if (j == pick(key, cols))
			out[e] = 8.0f;
		else
			out[e] = -(float)(mix(key, (uint64_t)j) >> 40) * 0x1p-24f;
	}
}
