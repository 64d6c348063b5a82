#include "sim-cost.h"

#include <math.h>
#include <string.h>

/* Seconds of a measured shape at n rows: log-log interpolation between the
 * points, proportional to n past the last one (compute-bound by then). */
static double shape_seconds(const struct allm_sim_gemm_shape *s, double n)
{
	int32_t last = s->n_points - 1;
	if (n <= s->rows[0])
		return s->seconds[0];
	if (n >= s->rows[last])
		return s->seconds[last] * n / s->rows[last];
	int32_t i = 1;
	while (s->rows[i] < n)
		i++;
	double f = log(n / s->rows[i - 1]) / log(s->rows[i] / s->rows[i - 1]);
	return exp(log(s->seconds[i - 1]) + f * log(s->seconds[i] / s->seconds[i - 1]));
}

static const struct allm_sim_gemm_shape *find_shape(const struct allm_sim_profile *p,
						    enum allm_dtype dt, int64_t k, int64_t m)
{
	for (int32_t i = 0; i < p->n_gemm_shapes; i++) {
		const struct allm_sim_gemm_shape *s = &p->gemm_shapes[i];
		if (s->dtype == dt && s->k == k && s->m == m)
			return s;
	}
	return NULL;
}

/* Fraction of peak reached at `rows` rows: saturates towards `compute`. */
static double eff(const struct allm_sim_op_params *o, double rows)
{
	return o->compute * rows / (rows + o->half_rows);
}

double allm_sim_cost_gemm(const struct allm_sim_profile *p, enum allm_dtype dt, int64_t n,
			  int64_t k, int64_t m, bool bias)
{
	const struct allm_sim_gemm_shape *s = find_shape(p, dt, k, m);
	if (s)
		return shape_seconds(s, (double)n);
	const struct allm_sim_op_params *o = &p->op[ALLM_OP_GEMM];
	double wsz = (double)allm_dtype_size(dt);
	double flops = 2.0 * (double)n * (double)k * (double)m;
	double bytes = (double)k * (double)m * wsz + 4.0 * (double)n * (double)(k + m) +
		       (bias ? (double)m * wsz : 0.0);
	double tc = flops / (p->flops[dt] * eff(o, (double)n));
	double tm = bytes / (p->mem_bw * o->bandwidth);
	return o->launch + fmax(tc, tm);
}

/* The roofline of n query rows attending over sum_ctx scores, reading kv_reads
 * tokens of K/V of which kv_unique distinct: on a device with a cache
 * (cache_bytes > 0) the distinct bytes past the cache stream at far_bandwidth,
 * every other byte (re-reads of a prefill's later query tiles included) at
 * bandwidth. */
static double attn_roofline(const struct allm_sim_profile *p, const struct allm_sim_op_params *o,
			    const struct allm_kv_layout *lay, int32_t n_heads, double n, double sum_ctx,
			    double kv_reads, double kv_unique)
{
	double hd = lay->head_dim;
	double kv_tok = 2.0 * lay->n_kv_heads * hd * (double)allm_dtype_size(lay->dtype);
	double flops = (4.0 * hd + o->score_flops) * n_heads * sum_ctx;
	double bytes = kv_reads * kv_tok + 8.0 * n * n_heads * hd;
	double far = o->cache_bytes > 0 ? fmax(0.0, kv_unique * kv_tok - o->cache_bytes) : 0.0;
	double tc = flops / (p->flops[lay->dtype] * eff(o, n));
	double tm = (bytes - far) / (p->mem_bw * o->bandwidth);
	if (far > 0)
		tm += far / (p->mem_bw * o->far_bandwidth);
	return fmax(tc, tm);
}

double allm_sim_cost_attention(const struct allm_sim_profile *p, const struct allm_kv_layout *lay,
			       int32_t n_heads, const struct allm_sim_attn_shape *s)
{
	const struct allm_sim_op_params *o = &p->op[ALLM_OP_ATTENTION];
	const struct allm_sim_op_params *od = p->has_attn_decode ? &p->attn_decode : o;
	if (s->dec_tokens > 0 && s->dec_tokens == s->n_tokens) /* decodes only */
		return od->launch + attn_roofline(p, od, lay, n_heads, (double)s->n_tokens, s->sum_ctx,
						  s->kv_reads, s->kv_unique);
	/* one after another, decodes (reading K/V per query) and prefills (a tile
	 * sharing each read) do not hide each other's bound, as a GPU's concurrent
	 * blocks do: measured on the CPU backend, one roofline over a mixed step
	 * priced its attention 30-43 % under (allm-sim-fit --check --by-op) */
	if (o->serial && s->dec_tokens > 0)
		return o->launch +
		       attn_roofline(p, od, lay, n_heads, (double)s->dec_tokens, s->dec_sum_ctx, s->dec_kv_reads,
				     s->dec_kv_unique) +
		       attn_roofline(p, o, lay, n_heads, (double)(s->n_tokens - s->dec_tokens),
				     s->sum_ctx - s->dec_sum_ctx, s->kv_reads - s->dec_kv_reads,
				     s->kv_unique - s->dec_kv_unique);
	return o->launch + attn_roofline(p, o, lay, n_heads, (double)s->n_tokens, s->sum_ctx, s->kv_reads,
					 s->kv_unique);
}

/* Adds a finished sequence of `run` new tokens up to context ctx to s. */
static void add_seq(struct allm_sim_attn_shape *s, int64_t run, int32_t ctx)
{
	double reads = (double)ctx * ceil((double)run / ALLM_SIM_ATTN_Q_TILE);
	s->kv_reads += reads;
	s->kv_unique += ctx;
	if (run == 1) {
		s->dec_tokens++;
		s->dec_sum_ctx += ctx;
		s->dec_kv_reads += reads;
		s->dec_kv_unique += ctx;
	}
}

void allm_sim_attn_shape_from(const int32_t *tok_pos, const int32_t *tok_seq, int64_t n_tokens,
			      struct allm_sim_attn_shape *s)
{
	allm_sim_attn_shape_window(tok_pos, tok_seq, n_tokens, 0, s);
}

void allm_sim_attn_shape_window(const int32_t *tok_pos, const int32_t *tok_seq, int64_t n_tokens,
				int32_t window, struct allm_sim_attn_shape *s)
{
	int64_t run = 0;
	int32_t ctx = 0, lo = INT32_MAX;
	memset(s, 0, sizeof(*s));
	s->n_tokens = n_tokens;
	for (int64_t t = 0; t < n_tokens; t++) {
		int32_t p = tok_pos[t] + 1, first = window > 0 ? ALLM_MAX(p - window, 0) : 0;
		s->sum_ctx += p - first;
		if (t > 0 && tok_seq[t] != tok_seq[t - 1]) {
			add_seq(s, run, ctx - lo);
			run = 0;
			ctx = 0;
			lo = INT32_MAX;
		}
		run++;
		ctx = ALLM_MAX(ctx, p);
		lo = ALLM_MIN(lo, first); /* the run reads positions lo .. ctx - 1 */
	}
	if (run)
		add_seq(s, run, ctx - lo);
}

double allm_sim_cost_stream(const struct allm_sim_profile *p, enum allm_backend_op op, double bytes)
{
	const struct allm_sim_op_params *o = &p->op[op];
	return o->launch + bytes / (p->mem_bw * o->bandwidth);
}

double allm_sim_cost_copy(const struct allm_sim_profile *p, enum allm_copy_dir dir, double bytes)
{
	return p->link_latency[dir] + bytes / p->link_bw[dir];
}

double allm_sim_cost_disk(const struct allm_sim_profile *p, bool write, double bytes)
{
	int d = write ? 0 : 1;
	return p->disk_latency[d] + bytes / p->disk_bw[d];
}
