/* AdaptiveLLM-C engine settings: one table.
 *
 * ALLM_SETTINGS_TABLE is the one definition of every setting allm-engined and
 * allm-run take (DESIGN §12): its key, type, range, default, command-line flag,
 * metavar, help line, whether `allmctl set` may change it while the engine runs,
 * and the status map it is shown in. Everything else reads it:
 *
 *   allm_engine_opts_parse / _default / _help   the flags (engined/sched/engine-opts.c)
 *   the control plane's `set` and its checks, and status's policy and limits maps
 *                                               (engined/ctlserver/)
 *   allmctl's usage and `allmctl complete` (the shell completion, ctl/allmctl.bash)
 *   allm-bench's engine flags and --compare keys (tools/allm-bench.c)
 *   allm_setting_desc(i)   the table as data (common/settings.c)
 *
 * Adding a setting: append its row, add the field ID to struct allm_engine_opts
 * (OPT) and, if it is live, to struct allm_engine_config (CFG: `set` copies it
 * there and allm_engine_set_config applies it), then use it. The parser, --help,
 * `set`, status, allmctl and allm-bench pick it up.
 *
 * Columns:
 *   ID      the field's name in struct allm_engine_opts (and allm_engine_config)
 *   KEY     the snake_case name `set`, status and allm-bench --compare use
 *   TYPE    I32, U64, F64 (finite; "1.5"), BOOL (a flag without a value when
 *           CHOICES is NULL, else one of two words: false|true), WORD (one of
 *           CHOICES, stored as its index: an enum in that order), TEXT (a
 *           non-empty string), CUSTOM (checked and stored by engine-opts.c)
 *   OPT     OPT: a field of struct allm_engine_opts; NOOPT: `set` only
 *   LIVE    CFG: settable at run time, a field of struct allm_engine_config;
 *           POOL: settable at run time, a pool resize; NO: at start only
 *   LO, HI  the range of a number (inclusive)
 *   FLAGS   ALLM_SET_F_ZERO_OFF: 0 is accepted too and means off
 *   DEF     the default, as it would be typed after the flag (parsed by the same
 *           code); NULL: none (the help says what happens)
 *   FLAG, METAVAR, CHOICES, HELP   the command line; HELP's lines end with \n
 *   GROUP   the --help heading: MODEL or SCHED
 *   STATUS  the status map that shows it ("policy", "limits") or NULL
 *
 * Plain C data: no engine types, so allmctl and clients can include it. */
#ifndef ADAPTIVELLM_SETTINGS_H
#define ADAPTIVELLM_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ALLM_SET_F_ZERO_OFF (1u << 0)

#define ALLM_GIB_MAX 1048576.0

/* clang-format off */
#define ALLM_SETTINGS_TABLE(X) \
/* X(ID, KEY, TYPE, OPT, LIVE, LO, HI, FLAGS, DEF, FLAG, METAVAR, CHOICES, GROUP, STATUS, HELP) */ \
X(model_dir, "model", TEXT, OPT, NO, 0, 0, 0, NULL, "--model", "DIR|FILE.gguf", NULL, MODEL, NULL, \
  "Hugging Face model directory (Llama or OPT), or a\n" \
  "GGUF file (Llama; F32 F16 BF16 Q8_0 Q4_0 Q4_1 tensors)\n") \
X(dummy, "dummy", TEXT, OPT, NO, 0, 0, 0, NULL, "--dummy", "PRESET", NULL, MODEL, NULL, \
  "random weights of real shapes (tiny, small, medium,\n" \
  "llama-7b, llama-13b, llama-33b, opt-tiny, opt-13b, opt-30b...)\n" \
  "with neither: the embedded default model (stories260K)\n") \
X(device, "device", CUSTOM, OPT, NO, 0, 0, 0, "auto", "--device", "auto|cpu|cuda|sim:PROFILE", NULL, MODEL, NULL, \
  "compute backend; sim:PROFILE\n" \
  "is a simulated device (no arithmetic, virtual time,\n" \
  "outputs not meaningful): cpu-local, a800-pcie,\n" \
  "h100-sxm, h200, or FILE.json (data/sim-profiles/)\n" \
  "\n") \
X(dtype, "dtype", CUSTOM, OPT, NO, 0, 0, 0, "auto", "--dtype", "auto|f32|f16|bf16", NULL, MODEL, NULL, \
  "weight storage dtype (auto: the checkpoint's\n" \
  "on cpu, a GGUF file's per tensor with its Q8_0/Q4_0/\n" \
  "Q4_1 blocks as stored; f16 on a GPU for f32 and\n" \
  "block files)\n") \
X(threads, "threads", I32, OPT, NO, 1, 1024, 0, NULL, "--threads", "N", NULL, MODEL, NULL, \
  "cpu worker threads (default: all cores)\n") \
X(reference, "reference", BOOL, OPT, NO, 0, 0, 0, NULL, "--reference", "", NULL, MODEL, NULL, \
  "cpu: naive reference loops instead of the fast path\n") \
X(blas, "gemm", BOOL, OPT, NO, 0, 0, 0, "simd", "--gemm", "simd|openblas", "simd|openblas", MODEL, NULL, \
  "cpu fast path GEMM (simd: batch-invariant;\n" \
  "openblas rows depend on batch size)\n") \
X(cpu_isa, "cpu_isa", CUSTOM, OPT, NO, 0, 0, 0, "auto", "--cpu-isa", "LEVEL", NULL, MODEL, NULL, \
  "cpu SIMD level: auto (the best this CPU has),\n" \
  "portable, avx2, avx2-vnni, avx512, avx512-vnni, avx512-bf16,\n" \
  "amx-bf16, amx-int8\n") \
X(quant, "quant", CUSTOM, OPT, NO, 0, 0, 0, "none", "--quant", "none|int8|q8_0|q4_0|q4_1", NULL, MODEL, NULL, \
  "weights quantized at load into GGUF's block\n" \
  "formats (cpu; norms and biases stay f32);\n" \
  "int8 is another name for q8_0\n") \
X(block_size, "block_size", I32, OPT, NO, 1, 1024, 0, "16", "--block-size", "N", NULL, MODEL, NULL, \
  "tokens per KV block\n") \
X(gpu_blocks, "gpu_blocks", I32, OPT, POOL, 1, INT32_MAX, 0, NULL, "--gpu-blocks", "N", NULL, MODEL, NULL, \
  "device KV blocks (default: from memory)\n") \
X(gpu_mem_util, "gpu_memory_utilization", F64, OPT, NO, 0.01, 1.0, 0, "0.9", "--gpu-memory-utilization", "F", NULL, MODEL, NULL, \
  "fraction of device memory to use\n") \
X(kv_cache_gib, "kv_cache_memory", F64, OPT, NO, 1e-6, ALLM_GIB_MAX, 0, "1", "--kv-cache-memory", "GiB", NULL, MODEL, NULL, \
  "cpu backend: size of the device KV pool\n") \
X(memory_budget_gib, "memory_budget", F64, OPT, NO, 1e-3, ALLM_GIB_MAX, ALLM_SET_F_ZERO_OFF, "0", "--memory-budget", "GiB", NULL, MODEL, NULL, \
  "one budget for the device: the weights, then one\n" \
  "pool for the steps' activations and the KV blocks\n" \
  "(0: off, KV from --kv-cache-memory or\n" \
  "--gpu-memory-utilization)\n") \
X(elastic_memory, "elastic_memory", BOOL, OPT, NO, 0, 0, 0, "on", "--elastic-memory", "on|off", "off|on", MODEL, NULL, \
  "with --memory-budget: the KV blocks grow into what\n" \
  "the activations leave unused and give it back for a\n" \
  "large prefill (off: activations sized for the\n" \
  "largest step, the KV blocks get the rest)\n") \
X(kv_cache_dtype, "kv_cache_dtype", CUSTOM, OPT, NO, 0, 0, 0, "auto", "--kv-cache-dtype", "auto|f32|f16|bf16", NULL, MODEL, NULL, \
  "K/V storage dtype (auto: f32 on\n" \
  "cpu, the weights' dtype on a GPU); 16 bits halve\n" \
  "the K/V bytes: twice the blocks per GiB, half the\n" \
  "attention's and the swaps' traffic\n") \
X(cpu_blocks, "cpu_blocks", I32, OPT, POOL, 0, INT32_MAX, 0, NULL, "--cpu-blocks", "N", NULL, MODEL, NULL, \
  "host swap blocks (default: from --swap-space)\n") \
X(swap_space_gib, "swap_space", F64, OPT, NO, 0, ALLM_GIB_MAX, 0, "4", "--swap-space", "GiB", NULL, MODEL, NULL, \
  "host swap space\n") \
X(disk_swap_gib, "disk_swap_space", F64, OPT, NO, 0, ALLM_GIB_MAX, 0, "0", "--disk-swap-space", "GiB", NULL, MODEL, NULL, \
  "a third KV tier on local disk (0: none)\n") \
X(disk_swap_dir, "disk_swap_dir", TEXT, OPT, NO, 0, 0, 0, NULL, "--disk-swap-dir", "DIR", NULL, MODEL, NULL, \
  "where its (unnamed) file lives (default\n" \
  "$XDG_CACHE_HOME/adaptivellm/kv, else /var/tmp)\n") \
X(disk_blocks, "disk_blocks", I32, NOOPT, POOL, 0, INT32_MAX, 0, NULL, NULL, "N", NULL, MODEL, NULL, \
  "disk tier blocks (only with a disk tier)\n") \
X(max_num_seqs, "max_num_seqs", I32, OPT, CFG, 1, 1 << 20, 0, "256", "--max-num-seqs", "N", NULL, SCHED, "limits", \
  "running batch cap\n") \
X(max_num_batched_tokens, "max_num_batched_tokens", I32, OPT, CFG, 1, 1 << 24, 0, "2048", "--max-num-batched-tokens", "N", NULL, SCHED, "limits", \
  "tokens per step cap\n") \
X(preempt, "preempt", WORD, OPT, CFG, 0, 0, 0, "adaptive", "--preempt", "adaptive|recompute|swap", "adaptive|recompute|swap", SCHED, "policy", \
  "what a preempted request's KV becomes\n") \
X(sched, "sched", WORD, OPT, CFG, 0, 0, 0, "fair", "--sched", "fair|fcfs", "fair|fcfs", SCHED, "policy", \
  "admission order\n") \
X(chunked_prefill, "chunked_prefill", BOOL, OPT, CFG, 0, 0, 0, "on", "--chunked-prefill", "on|off", "off|on", SCHED, "policy", \
  "steps mix decodes with prefill chunks\n" \
  "(off: the paper's prefill-only steps)\n") \
X(prefix_caching, "prefix_caching", BOOL, OPT, CFG, 0, 0, 0, "on", "--prefix-caching", "on|off", "off|on", SCHED, "policy", \
  "full KV blocks outlive their request and serve later\n" \
  "prompts that begin the same way, evicted down the\n" \
  "tiers (host, disk) when that pays\n") \
X(max_wait_factor, "max_wait_factor", F64, OPT, CFG, 1, 1e6, ALLM_SET_F_ZERO_OFF, "8", "--max-wait-factor", "F", NULL, SCHED, "policy", \
  "fair: a request waiting over F x its own service time\n" \
  "goes first (0 = off)\n") \
X(admit_lookahead, "admit_lookahead", I32, OPT, CFG, 0, 1 << 20, 0, "8", "--admit-lookahead", "STEPS", NULL, SCHED, "policy", \
  "fair: admission leaves room for this many steps of\n" \
  "growth\n") \
X(admit_overcommit, "admit_overcommit", F64, OPT, CFG, 0.1, 1e6, ALLM_SET_F_ZERO_OFF, "0", "--admit-overcommit", "F", NULL, SCHED, "policy", \
  "fair: admit while the KV every request would hold at\n" \
  "its longest fits F x the device, host and disk blocks\n" \
  "(0 = off; 1: victims almost always have swap\n" \
  "room, fewer requests run early)\n") \
X(slo_ttft_ms, "slo_ttft_ms", F64, OPT, CFG, 0.001, 1e7, ALLM_SET_F_ZERO_OFF, "0", "--slo-ttft-ms", "MS", NULL, SCHED, "policy", \
  "time-to-first-token SLO: over a 5-step window a\n" \
  "violation doubles the SLO buffer (the prompt tokens a\n" \
  "step carries, reserved from an elastic pool) (0 = off)\n") \
X(slo_tpot_ms, "slo_tpot_ms", F64, OPT, CFG, 0.001, 1e7, ALLM_SET_F_ZERO_OFF, "0", "--slo-tpot-ms", "MS", NULL, SCHED, "policy", \
  "time-per-output-token SLO: a violation halves the\n" \
  "SLO buffer: smaller prefill chunks, more room for\n" \
  "the decodes' KV (0 = off)\n") \
X(phase_placement, "phase_placement", BOOL, OPT, CFG, 0, 0, 0, "off", "--phase-placement", "on|off", "off|on", SCHED, "policy", \
  "elastic memory: a prefill chunk short of scratch may\n" \
  "swap decoding requests' KV to the host for a step\n" \
  "when the cost model prices that below chunking\n") \
X(profile, "profile", TEXT, OPT, NO, 0, 0, 0, NULL, "--profile", "FILE", NULL, SCHED, NULL, \
  "predictor profile (calibrated once, then reused)\n") \
X(calibrate_at_start, "calibrate_at_start", BOOL, OPT, NO, 0, 0, 0, NULL, "--calibrate-at-start", "", NULL, SCHED, NULL, \
  "with no profile: time the calibration grid before\n" \
  "serving (default: serve at once on a first estimate\n" \
  "and calibrate from real steps; a simulated device\n" \
  "always calibrates at start)\n") \
X(log_level, "log_level", WORD, OPT, NO, 0, 0, 0, "info", "--log-level", "error|warn|info|debug", "error|warn|info|debug", SCHED, NULL, \
  "what the log shows\n") \
X(dummy_seed, "dummy_seed", U64, OPT, NO, 0, 9.2e18, 0, "0", "--dummy-seed", "N", NULL, MODEL, NULL, \
  "seed of --dummy's random weights\n")
/* clang-format on */

/* Column TYPE. */
enum allm_setting_type {
	ALLM_SET_I32 = 1,
	ALLM_SET_U64,
	ALLM_SET_F64,
	ALLM_SET_BOOL,
	ALLM_SET_WORD,
	ALLM_SET_TEXT,
	ALLM_SET_CUSTOM,
};

/* Column LIVE. */
enum allm_setting_live {
	ALLM_SET_LIVE_NO = 0,
	ALLM_SET_LIVE_CFG,
	ALLM_SET_LIVE_POOL,
};

/* Setting ids, in the table's order: ALLM_SETTING_<ID>. */
enum allm_setting_id {
#define ALLM_SET_ENUM_(id, ...) ALLM_SETTING_##id,
	ALLM_SETTINGS_TABLE(ALLM_SET_ENUM_)
#undef ALLM_SET_ENUM_
	ALLM_SETTING_COUNT
};

/* One row as data. */
struct allm_setting_desc {
	enum allm_setting_id id;
	const char *key; /* KEY */
	enum allm_setting_type type;
	bool opt; /* a flag of the command line (OPT) */
	enum allm_setting_live live;
	double lo, hi;
	uint32_t flags; /* ALLM_SET_F_* */
	const char *def; /* NULL: none */
	const char *flag; /* "--max-num-seqs"; NULL for NOOPT */
	const char *metavar; /* "" for a flag without a value */
	const char *choices; /* "a|b|c" for WORD and worded BOOL, else NULL */
	bool sched_group; /* GROUP SCHED (else MODEL) */
	const char *status; /* status map, or NULL */
	const char *help;
};

/* A parsed value: the member of its TYPE (BOOL and WORD in .i: 0/1, the index). */
struct allm_setting_value {
	int64_t i;
	uint64_t u;
	double f;
	const char *s;
};

/* Row i (0 <= i < ALLM_SETTING_COUNT). */
const struct allm_setting_desc *allm_setting_desc(int i);
/* The row whose KEY is key (n bytes; n < 0: NUL-terminated), or NULL. */
const struct allm_setting_desc *allm_setting_by_key(const char *key, int n);
/* The row whose FLAG is flag, or NULL. */
const struct allm_setting_desc *allm_setting_by_flag(const char *flag);
/* The n-th word of a "a|b|c" list into buf (NUL-terminated); NULL past the end. */
const char *allm_setting_word(const char *choices, int n, char *buf, size_t len);
/* Whether the number x is in d's range (with ALLM_SET_F_ZERO_OFF's 0). */
bool allm_setting_in_range(const struct allm_setting_desc *d, double x);
/* Parses text as d's value into *ret: 0, or -EINVAL with a one-line reason in
 * err (errlen bytes; "max_wait_factor: must be 0 (off) or in 1..1e+06"). CUSTOM
 * rows: *ret->s = text, unchecked (the engine checks them). */
int allm_setting_parse(const struct allm_setting_desc *d, const char *text,
		       struct allm_setting_value *ret, char *err, size_t errlen);
/* Writes d's range as text ("1..1e+06, or 0 = off"; "adaptive, recompute, swap"). */
void allm_setting_range_text(const struct allm_setting_desc *d, char *buf, size_t len);
/* The --help text of the OPT rows: headings, each flag with its metavar padded to
 * a column, its help, "(default DEF)". A static buffer, built once. */
const char *allm_settings_help(void);

#ifdef __cplusplus
}
#endif

#endif
