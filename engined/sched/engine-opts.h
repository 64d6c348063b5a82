/* The model/memory/policy flags that allm-engined and allm-run share (DESIGN §12):
 * struct allm_engine_opts holds one field per row of the settings table
 * (include/adaptivellm/settings.h), which the parser, --help and the defaults
 * below are generated from. */
#ifndef ALLM_ENGINE_OPTS_H
#define ALLM_ENGINE_OPTS_H

#include "backend.h"
#include "common.h"
#include "kv-disk.h"

#include <adaptivellm/settings.h>

enum allm_preempt_mode { ALLM_PREEMPT_ADAPTIVE, ALLM_PREEMPT_RECOMPUTE, ALLM_PREEMPT_SWAP };
enum allm_sched_mode { ALLM_SCHED_FAIR, ALLM_SCHED_FCFS };

struct allm_engine_opts {
	const char *model_dir; /* --model; NULL with no dummy = the embedded default */
	const char *dummy; /* --dummy PRESET */
	const char *device; /* --device auto|cpu|cuda|sim:PROFILE */
	const char *dtype; /* --dtype auto|f32|f16|bf16 */
	const char *kv_cache_dtype; /* --kv-cache-dtype auto|f32|f16|bf16 */
	int32_t block_size; /* --block-size */
	int32_t gpu_blocks; /* --gpu-blocks (0 = derived) */
	double gpu_mem_util; /* --gpu-memory-utilization */
	double kv_cache_gib; /* --kv-cache-memory: cpu backend "GPU" pool size */
	double memory_budget_gib; /* --memory-budget (0 = off): weights + activations + KV */
	bool elastic_memory; /* --elastic-memory on|off: one elastic pool under that budget */
	int32_t cpu_blocks; /* --cpu-blocks (-1 = derived) */
	double swap_space_gib; /* --swap-space */
	double disk_swap_gib; /* --disk-swap-space (0 = no disk tier) */
	const char *disk_swap_dir; /* --disk-swap-dir (NULL = the default) */
	int32_t max_num_seqs;
	int32_t max_num_batched_tokens;
	enum allm_preempt_mode preempt;
	enum allm_sched_mode sched;
	bool chunked_prefill; /* --chunked-prefill on|off */
	int32_t admit_lookahead; /* --admit-lookahead STEPS (fair) */
	double max_wait_factor; /* --max-wait-factor F (fair; 0 = off) */
	double admit_overcommit; /* --admit-overcommit F (fair; 0 = off) */
	bool prefix_caching; /* --prefix-caching on|off */
	double slo_ttft_ms, slo_tpot_ms; /* --slo-ttft-ms, --slo-tpot-ms (0 = off) */
	bool phase_placement; /* --phase-placement on|off */
	bool calibrate_at_start; /* --calibrate-at-start: the grid before serving, not a first estimate */
	const char *profile; /* --profile FILE */
	enum allm_log_level log_level;
	int32_t threads; /* --threads (cpu backend) */
	bool reference; /* --reference: naive cpu loops */
	bool blas; /* --gemm openblas */
	enum allm_cpu_isa cpu_isa; /* --cpu-isa: the cpu GEMM's SIMD level (AUTO = best) */
	/* --quant: matrices and embeddings quantized at load into this block format
	 * (Q8_0, which int8 names too, Q4_0, Q4_1; cpu); ALLM_DTYPE_F32 (the zero):
	 * none, the checkpoint's dtype or --dtype */
	enum allm_dtype quant;
	uint64_t dummy_seed;
	/* the KV tiers' test and benchmark hooks: the program reads them from the
	 * environment (allm_kv_env_read) after allm_engine_opts_default; not a flag */
	struct allm_kv_env kv_env;
	/* the backends' switches (kernels/backend.h), the same way
	 * (allm_backend_env_read); zero: the defaults */
	struct allm_backend_env backend_env;
};

/* The table's defaults (DEF), cpu_blocks -1 (derived from the swap space). */
void allm_engine_opts_default(struct allm_engine_opts *o);
/* If argv[*i] is one of the shared flags, consumes it (and its value), advances *i
 * and returns 1; returns 0 if not ours; -EINVAL with err for a bad value. */
int allm_engine_opts_parse(struct allm_engine_opts *o, int argc, char **argv, int *i,
			   struct allm_err *err);
/* Help text for the shared flags (allm_settings_help). */
const char *allm_engine_opts_help(void);

const char *allm_preempt_name(enum allm_preempt_mode m);
const char *allm_sched_name(enum allm_sched_mode m);

/* Strict number parsing for flags: whole string, in range. */
int allm_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *ret);
int allm_parse_f64(const char *s, double lo, double hi, double *ret);

#endif
