/* The simulated device's cost model: seconds for an op, a copy or a host step of
 * a given shape on a profile's hardware. Pure functions of their arguments, so a
 * simulation is reproducible bit for bit.
 *
 *   gemm       launch + max(FLOPs / (peak[dtype] * eff(n)), bytes / (bandwidth * e_bw)),
 *              eff(n) = compute * n / (n + half_rows); a measured shape (fitted
 *              profiles) is interpolated instead
 *   attention  the same form over the batch's context: FLOPs 4 * heads * head_dim *
 *              sum of context lengths, bytes = K/V read once per query tile of
 *              ATTN_Q_TILE tokens per sequence + q and out
 *   others     launch + bytes touched / (bandwidth * e_bw)
 *   copies     latency + bytes / link bandwidth, per direction */
#ifndef ALLM_SIM_COST_H
#define ALLM_SIM_COST_H

#include "sim-profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Query tokens of one sequence that share one read of its K/V in a tiled
 * attention kernel (FlashAttention's block of queries). */
#define ALLM_SIM_ATTN_Q_TILE 64

/* The shape of one attention call, summed over the batch. */
struct allm_sim_attn_shape {
	int64_t n_tokens; /* query rows */
	double sum_ctx; /* sum over tokens of the context each attends to (pos + 1) */
	double kv_reads; /* sum over sequences of ctx * ceil(new tokens / Q_TILE): tokens of K/V read */
};

double allm_sim_cost_gemm(const struct allm_sim_profile *p, enum allm_dtype dt, int64_t n,
			  int64_t k, int64_t m, bool bias);
double allm_sim_cost_attention(const struct allm_sim_profile *p, const struct allm_kv_layout *lay,
			       int32_t n_heads, const struct allm_sim_attn_shape *s);
/* An op that streams `bytes` through memory (everything but gemm and attention). */
double allm_sim_cost_stream(const struct allm_sim_profile *p, enum allm_backend_op op, double bytes);
double allm_sim_cost_copy(const struct allm_sim_profile *p, enum allm_copy_dir dir, double bytes);

#ifdef __cplusplus
}
#endif

#endif
