#include "engine-opts.h"

#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

void allm_engine_opts_default(struct allm_engine_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->device = "auto";
	o->dtype = "auto";
	o->kv_cache_dtype = "auto";
	o->block_size = 16;
	o->gpu_mem_util = 0.9;
	o->kv_cache_gib = 1.0;
	o->cpu_blocks = -1;
	o->swap_space_gib = 4.0;
	o->max_num_seqs = 256;
	o->max_num_batched_tokens = 2048;
	o->preempt = ALLM_PREEMPT_ADAPTIVE;
	o->sched = ALLM_SCHED_FAIR;
	/* defaults measured in bench/README.md ("Scheduler quality") */
	o->chunked_prefill = true;
	o->admit_lookahead = ALLM_DEFAULT_ADMIT_LOOKAHEAD;
	o->max_wait_factor = ALLM_DEFAULT_MAX_WAIT_FACTOR;
	o->prefix_caching = true; /* as vLLM V1: KV outlives its request */
	o->log_level = ALLM_LOG_INFO;
	o->dummy_seed = 0;
}

const char *allm_engine_opts_help(void)
{
	return "model and memory:\n"
	       "  --model DIR|FILE.gguf       Hugging Face model directory (Llama or OPT), or a\n"
	       "                              GGUF file (Llama; F32 F16 BF16 Q8_0 Q4_0 Q4_1 tensors)\n"
	       "  --dummy PRESET              random weights of real shapes (tiny, small, medium,\n"
	       "                              llama-7b, llama-13b, llama-33b, opt-tiny, opt-13b, opt-30b...)\n"
	       "                              with neither: the embedded default model (stories260K)\n"
	       "  --device auto|cpu|cuda|sim:PROFILE   compute backend (default auto); sim:PROFILE\n"
	       "                              is a simulated device (no arithmetic, virtual time,\n"
	       "                              outputs not meaningful): cpu-local, a800-pcie,\n"
	       "                              h100-sxm, h200, or FILE.json (data/sim-profiles/)\n"
	       "  --dtype auto|f32|f16|bf16   weight storage dtype (default auto: the checkpoint's\n"
	       "                              on cpu, f16 for f32 files on a GPU)\n"
	       "  --threads N                 cpu worker threads (default: all cores)\n"
	       "  --reference                 cpu: naive reference loops instead of the fast path\n"
	       "  --gemm simd|openblas        cpu fast path GEMM (default simd: batch-invariant;\n"
	       "                              openblas rows depend on batch size)\n"
	       "  --cpu-isa LEVEL             cpu SIMD level: auto (default: the best this CPU has),\n"
	       "                              portable, avx2, avx2-vnni, avx512, avx512-vnni, avx512-bf16,\n"
	       "                              amx-bf16, amx-int8\n"
	       "  --quant none|int8|q8_0|q4_0|q4_1  weights quantized at load (cpu; norms and\n"
	       "                              biases stay f32; default none): int8 with bf16\n"
	       "                              scales per 32, or GGUF's block formats\n"
	       "  --block-size N              tokens per KV block (default 16)\n"
	       "  --gpu-blocks N              device KV blocks (default: from memory)\n"
	       "  --gpu-memory-utilization F  fraction of device memory to use (default 0.9)\n"
	       "  --kv-cache-memory GiB       cpu backend: size of the device KV pool (default 1)\n"
	       "  --kv-cache-dtype auto|f32|f16|bf16   K/V storage dtype (default auto: f32 on\n"
	       "                              cpu, the weights' dtype on a GPU); 16 bits halve\n"
	       "                              the K/V bytes: twice the blocks per GiB, half the\n"
	       "                              attention's and the swaps' traffic\n"
	       "  --cpu-blocks N              host swap blocks (default: from --swap-space)\n"
	       "  --swap-space GiB            host swap space (default 4)\n"
	       "  --disk-swap-space GiB       a third KV tier on local disk (default 0: none)\n"
	       "  --disk-swap-dir DIR         where its (unnamed) file lives (default\n"
	       "                              $XDG_CACHE_HOME/adaptivellm/kv, else /var/tmp)\n"
	       "scheduling:\n"
	       "  --max-num-seqs N            running batch cap (default 256)\n"
	       "  --max-num-batched-tokens N  tokens per step cap (default 2048)\n"
	       "  --preempt adaptive|recompute|swap   (default adaptive)\n"
	       "  --sched fair|fcfs           admission order (default fair)\n"
	       "  --chunked-prefill on|off    steps mix decodes with prefill chunks (default on;\n"
	       "                              off: the paper's prefill-only steps)\n"
	       "  --prefix-caching on|off     full KV blocks outlive their request and serve later\n"
	       "                              prompts that begin the same way, evicted down the\n"
	       "                              tiers (host, disk) when that pays (default on)\n"
	       "  --max-wait-factor F         fair: a request waiting over F x its own service time\n"
	       "                              goes first (default " ALLM_STR(ALLM_DEFAULT_MAX_WAIT_FACTOR) "; 0 = off)\n"
	       "  --admit-lookahead STEPS     fair: admission leaves room for this many steps of\n"
	       "                              growth (default " ALLM_STR(ALLM_DEFAULT_ADMIT_LOOKAHEAD) ")\n"
	       "  --admit-overcommit F        fair: admit while the KV every request would hold at\n"
	       "                              its longest fits F x the device, host and disk blocks\n"
	       "                              (default 0 = off; 1: victims almost always have swap\n"
	       "                              room, fewer requests run early)\n"
	       "  --profile FILE              predictor profile (calibrated once, then reused)\n"
	       "  --calibrate-at-start        with no profile: time the calibration grid before\n"
	       "                              serving (default: serve at once on a first estimate\n"
	       "                              and calibrate from real steps; a simulated device\n"
	       "                              always calibrates at start)\n"
	       "  --log-level error|warn|info|debug\n";
}

const char *allm_preempt_name(enum allm_preempt_mode m)
{
	return m == ALLM_PREEMPT_RECOMPUTE ? "recompute" : m == ALLM_PREEMPT_SWAP ? "swap" : "adaptive";
}

const char *allm_sched_name(enum allm_sched_mode m)
{
	return m == ALLM_SCHED_FCFS ? "fcfs" : "fair";
}

int allm_preempt_parse(const char *s, enum allm_preempt_mode *ret)
{
	if (!strcmp(s, "adaptive"))
		*ret = ALLM_PREEMPT_ADAPTIVE;
	else if (!strcmp(s, "recompute"))
		*ret = ALLM_PREEMPT_RECOMPUTE;
	else if (!strcmp(s, "swap"))
		*ret = ALLM_PREEMPT_SWAP;
	else
		return -EINVAL;
	return 0;
}

int allm_sched_parse(const char *s, enum allm_sched_mode *ret)
{
	if (!strcmp(s, "fair"))
		*ret = ALLM_SCHED_FAIR;
	else if (!strcmp(s, "fcfs"))
		*ret = ALLM_SCHED_FCFS;
	else
		return -EINVAL;
	return 0;
}

int allm_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *ret)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*ret = v;
	return 0;
}

int allm_parse_f64(const char *s, double lo, double hi, double *ret)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
		return -EINVAL;
	*ret = v;
	return 0;
}

int allm_engine_opts_parse(struct allm_engine_opts *o, int argc, char **argv, int *i,
			   struct allm_err *err)
{
	const char *f = argv[*i];
	const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	int64_t n;
	double d;

	if (!strcmp(f, "--reference")) {
		o->reference = true;
		(*i)++;
		return 1;
	}
	if (!strcmp(f, "--calibrate-at-start")) {
		o->calibrate_at_start = true;
		(*i)++;
		return 1;
	}
	static const char *const with_value[] = {
		"--model", "--dummy", "--device", "--dtype", "--block-size", "--gpu-blocks",
		"--gpu-memory-utilization", "--kv-cache-memory", "--cpu-blocks", "--swap-space",
		"--max-num-seqs", "--max-num-batched-tokens", "--preempt", "--sched", "--profile",
		"--log-level", "--threads", "--dummy-seed", "--gemm", "--chunked-prefill",
		"--max-wait-factor", "--admit-lookahead", "--admit-overcommit", "--disk-swap-space", "--disk-swap-dir",
		"--cpu-isa", "--quant", "--kv-cache-dtype", "--prefix-caching",
	};
	size_t k;
	for (k = 0; k < ALLM_ARRAY_SIZE(with_value); k++)
		if (!strcmp(f, with_value[k]))
			break;
	if (k == ALLM_ARRAY_SIZE(with_value))
		return 0;
	if (!v)
		return allm_err_set(err, -EINVAL, "%s needs a value", f);
	*i += 2;
#define BAD() allm_err_set(err, -EINVAL, "bad value for %s: '%s'", f, v)
	if (!strcmp(f, "--model"))
		o->model_dir = v;
	else if (!strcmp(f, "--dummy"))
		o->dummy = v;
	else if (!strcmp(f, "--device")) {
		if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda") &&
		    (strncmp(v, "sim:", 4) || !v[4]))
			return allm_err_set(err, -EINVAL, "bad value for --device: '%s' (expected auto, "
					    "cpu, cuda or sim:PROFILE)", v);
		o->device = v;
	} else if (!strcmp(f, "--dtype")) {
		enum allm_dtype dt;
		if (strcmp(v, "auto") && allm_dtype_parse(v, &dt))
			return BAD();
		o->dtype = v;
	} else if (!strcmp(f, "--kv-cache-dtype")) {
		enum allm_dtype dt;
		if (strcmp(v, "auto") && (allm_dtype_parse(v, &dt) || dt == ALLM_DTYPE_Q8))
			return allm_err_set(err, -EINVAL, "bad value for --kv-cache-dtype: '%s' (expected "
					    "auto, f32, f16 or bf16)", v);
		o->kv_cache_dtype = v;
	} else if (!strcmp(f, "--block-size")) {
		if (allm_parse_i64(v, 1, 1024, &n))
			return BAD();
		o->block_size = (int32_t)n;
	} else if (!strcmp(f, "--gpu-blocks")) {
		if (allm_parse_i64(v, 1, INT32_MAX, &n))
			return BAD();
		o->gpu_blocks = (int32_t)n;
	} else if (!strcmp(f, "--gpu-memory-utilization")) {
		if (allm_parse_f64(v, 0.01, 1.0, &d))
			return BAD();
		o->gpu_mem_util = d;
	} else if (!strcmp(f, "--kv-cache-memory")) {
		if (allm_parse_f64(v, 1e-6, 1 << 20, &d))
			return BAD();
		o->kv_cache_gib = d;
	} else if (!strcmp(f, "--cpu-blocks")) {
		if (allm_parse_i64(v, 0, INT32_MAX, &n))
			return BAD();
		o->cpu_blocks = (int32_t)n;
	} else if (!strcmp(f, "--swap-space")) {
		if (allm_parse_f64(v, 0, 1 << 20, &d))
			return BAD();
		o->swap_space_gib = d;
	} else if (!strcmp(f, "--disk-swap-space")) {
		if (allm_parse_f64(v, 0, 1 << 20, &d))
			return BAD();
		o->disk_swap_gib = d;
	} else if (!strcmp(f, "--disk-swap-dir")) {
		if (!*v)
			return BAD();
		o->disk_swap_dir = v;
	} else if (!strcmp(f, "--max-num-seqs")) {
		if (allm_parse_i64(v, 1, 1 << 20, &n))
			return BAD();
		o->max_num_seqs = (int32_t)n;
	} else if (!strcmp(f, "--max-num-batched-tokens")) {
		if (allm_parse_i64(v, 1, 1 << 24, &n))
			return BAD();
		o->max_num_batched_tokens = (int32_t)n;
	} else if (!strcmp(f, "--preempt")) {
		if (allm_preempt_parse(v, &o->preempt))
			return BAD();
	} else if (!strcmp(f, "--sched")) {
		if (allm_sched_parse(v, &o->sched))
			return BAD();
	} else if (!strcmp(f, "--chunked-prefill")) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			return BAD();
		o->chunked_prefill = !strcmp(v, "on");
	} else if (!strcmp(f, "--prefix-caching")) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			return BAD();
		o->prefix_caching = !strcmp(v, "on");
	} else if (!strcmp(f, "--max-wait-factor")) {
		if (allm_parse_f64(v, 0, 1e6, &d) || (d > 0 && d < 1))
			return allm_err_set(err, -EINVAL, "bad value for %s: '%s' (0 = off, or 1..1e6)", f, v);
		o->max_wait_factor = d;
	} else if (!strcmp(f, "--admit-lookahead")) {
		if (allm_parse_i64(v, 0, 1 << 20, &n))
			return BAD();
		o->admit_lookahead = (int32_t)n;
	} else if (!strcmp(f, "--admit-overcommit")) {
		if (allm_parse_f64(v, 0, 1e6, &d) || !allm_engine_admit_overcommit_valid(d))
			return allm_err_set(err, -EINVAL, "bad value for %s: '%s' (0 = off, or 0.1..1e6)", f, v);
		o->admit_overcommit = d;
	} else if (!strcmp(f, "--profile")) {
		o->profile = v;
	} else if (!strcmp(f, "--log-level")) {
		if (allm_log_level_parse(v, &o->log_level))
			return BAD();
	} else if (!strcmp(f, "--threads")) {
		if (allm_parse_i64(v, 1, 1024, &n))
			return BAD();
		o->threads = (int)n;
	} else if (!strcmp(f, "--gemm")) {
		if (strcmp(v, "simd") && strcmp(v, "openblas"))
			return BAD();
		o->blas = !strcmp(v, "openblas");
	} else if (!strcmp(f, "--cpu-isa")) {
		if (allm_cpu_isa_parse(v, &o->cpu_isa))
			return BAD();
	} else if (!strcmp(f, "--quant")) {
		static const struct { const char *name; enum allm_dtype dt; } q[] = {
			{"none", ALLM_DTYPE_F32}, {"int8", ALLM_DTYPE_Q8}, {"q8_0", ALLM_DTYPE_Q8_0},
			{"q4_0", ALLM_DTYPE_Q4_0}, {"q4_1", ALLM_DTYPE_Q4_1},
		};
		size_t qi = 0;
		while (qi < ALLM_ARRAY_SIZE(q) && strcmp(v, q[qi].name))
			qi++;
		if (qi == ALLM_ARRAY_SIZE(q))
			return BAD();
		o->quant = q[qi].dt;
	} else if (!strcmp(f, "--dummy-seed")) {
		if (allm_parse_i64(v, 0, INT64_MAX, &n))
			return BAD();
		o->dummy_seed = (uint64_t)n;
	}
#undef BAD
	return 1;
}

void allm_engine_config_from_opts(const struct allm_engine_opts *o, struct allm_engine_config *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->max_num_seqs = o->max_num_seqs;
	ret->max_num_batched_tokens = o->max_num_batched_tokens;
	ret->preempt = o->preempt;
	ret->sched = o->sched;
	ret->chunked_prefill = o->chunked_prefill;
	ret->admit_lookahead = o->admit_lookahead;
	ret->max_wait_factor = o->max_wait_factor;
	ret->admit_overcommit = o->admit_overcommit;
	ret->prefix_caching = o->prefix_caching;
}
