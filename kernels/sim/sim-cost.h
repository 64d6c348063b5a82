/* The simulated device's cost model: seconds for an op, a copy or a host step of
 * a given shape on a profile's hardware. Pure functions of their arguments, so a
 * simulation is reproducible bit for bit.
 *
 *   gemm       launch + max(FLOPs / (peak[dtype] * eff(n)), bytes / (bandwidth * e_bw)),
 *              eff(n) = compute * n / (n + half_rows); a measured shape (fitted
 *              profiles) is interpolated instead
 *   attention  the same form over the batch's context: FLOPs (4 * head_dim +
 *              score_flops) * heads * sum of context lengths (QK, PV and the softmax's
 *              exp per score), bytes = K/V read once per query tile of ATTN_Q_TILE
 *              tokens per sequence + q and out; on a serial device (a CPU thread:
 *              ops.attention.serial) a mixed batch's decodes and prefills are two
 *              such terms added, each memory- or compute-bound on its own
 *   others     launch + bytes touched / (bandwidth * e_bw)
 *   copies     latency + bytes / link bandwidth, per direction
 *   disk       latency + bytes / disk bandwidth, per direction (the disk KV tier) */
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
	double kv_unique; /* sum over sequences of ctx: distinct tokens of K/V (a cache keeps the re-reads) */
	/* of which the decodes' (sequences with one new token): what a device that
	 * runs sequences one after another prices apart from the prefills */
	int64_t dec_tokens;
	double dec_sum_ctx, dec_kv_reads, dec_kv_unique;
};

/* The shape of a batch from its tokens' positions and sequences (host arrays; a
 * sequence's tokens contiguous, as the executor lays them out). */
void allm_sim_attn_shape_from(const int32_t *tok_pos, const int32_t *tok_seq, int64_t n_tokens,
			      struct allm_sim_attn_shape *ret);
/* The same for attention through a sliding window of `window` positions (0: none):
 * each token reads at most the last window positions. */
void allm_sim_attn_shape_window(const int32_t *tok_pos, const int32_t *tok_seq, int64_t n_tokens,
				int32_t window, struct allm_sim_attn_shape *ret);

/* Bytes each streaming op touches: what allm_sim_cost_stream() is given, shared
 * with the profile fitter (tools/allm-sim-fit.c) so both count alike. */
static inline double allm_sim_bytes_embedding(int64_t n, int64_t dim, enum allm_dtype dt)
{
	return (double)n * (double)dim * (double)(allm_dtype_size(dt) + 4) + 4.0 * (double)n;
}
static inline double allm_sim_bytes_norm(int64_t n, int64_t dim, enum allm_dtype dt, int n_vecs)
{
	return 8.0 * (double)n * (double)dim + n_vecs * (double)dim * (double)allm_dtype_size(dt);
}
static inline double allm_sim_bytes_rope(int64_t n, int32_t n_heads, int32_t n_kv_heads,
					 int32_t head_dim)
{
	return 8.0 * (double)n * (n_heads + n_kv_heads) * head_dim + 4.0 * (double)n;
}
static inline double allm_sim_bytes_gather(int64_t n, int64_t dim)
{
	return (8.0 * (double)dim + 4.0) * (double)n;
}
static inline double allm_sim_bytes_kv_write(const struct allm_kv_layout *lay, int64_t n_tokens)
{
	double row = 2.0 * lay->n_kv_heads * lay->head_dim * (4.0 + (double)allm_dtype_size(lay->dtype));
	return (row + 4.0) * (double)n_tokens;
}
/* silu_mul and add read two arrays and write one; relu reads one */
static inline double allm_sim_bytes_elementwise(int64_t n, int n_arrays)
{
	return 4.0 * n_arrays * (double)n;
}
static inline double allm_sim_bytes_logits(int64_t n, int64_t vocab)
{
	return 4.0 * (double)n * (double)vocab;
}

double allm_sim_cost_gemm(const struct allm_sim_profile *p, enum allm_dtype dt, int64_t n,
			  int64_t k, int64_t m, bool bias);
double allm_sim_cost_attention(const struct allm_sim_profile *p, const struct allm_kv_layout *lay,
			       int32_t n_heads, const struct allm_sim_attn_shape *s);
/* An op that streams `bytes` through memory (everything but gemm and attention). */
double allm_sim_cost_stream(const struct allm_sim_profile *p, enum allm_backend_op op, double bytes);
double allm_sim_cost_copy(const struct allm_sim_profile *p, enum allm_copy_dir dir, double bytes);
/* A disk KV tier transfer (its runs in flight together): latency + bytes / bandwidth. */
double allm_sim_cost_disk(const struct allm_sim_profile *p, bool write, double bytes);

#ifdef __cplusplus
}
#endif

#endif
