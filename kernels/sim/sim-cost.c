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

double allm_sim_cost_attention(const struct allm_sim_profile *p, const struct allm_kv_layout *lay,
			       int32_t n_heads, const struct allm_sim_attn_shape *s)
{
	const struct allm_sim_op_params *o = &p->op[ALLM_OP_ATTENTION];
	double hd = lay->head_dim;
	double kv_tok = 2.0 * lay->n_kv_heads * hd * (double)allm_dtype_size(lay->dtype);
	double flops = (4.0 * hd + o->score_flops) * n_heads * s->sum_ctx;
	double bytes = s->kv_reads * kv_tok + 8.0 * (double)s->n_tokens * n_heads * hd;
	double tc = flops / (p->flops[lay->dtype] * eff(o, (double)s->n_tokens));
	double tm = bytes / (p->mem_bw * o->bandwidth);
	return o->launch + fmax(tc, tm);
}

void allm_sim_attn_shape_from(const int32_t *tok_pos, const int32_t *tok_seq, int64_t n_tokens,
			      struct allm_sim_attn_shape *s)
{
	int64_t run = 0;
	int32_t ctx = 0;
	memset(s, 0, sizeof(*s));
	s->n_tokens = n_tokens;
	for (int64_t t = 0; t < n_tokens; t++) {
		int32_t p = tok_pos[t] + 1;
		s->sum_ctx += p;
		if (t > 0 && tok_seq[t] != tok_seq[t - 1]) {
			s->kv_reads += (double)ctx * ceil((double)run / ALLM_SIM_ATTN_Q_TILE);
			run = 0;
			ctx = 0;
		}
		run++;
		ctx = ALLM_MAX(ctx, p);
	}
	s->kv_reads += (double)ctx * ceil((double)run / ALLM_SIM_ATTN_Q_TILE);
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
