/* The engine step loop (DESIGN §6): continuous batching over three queues
 * (waiting, running, swapped) with the paper's Alg. 1 (cost-aware preemption:
 * swap or recompute) and Alg. 2 (fair admission), plus the baseline policies.
 * Used in-process by allm-run and, inside its event loop, by allm-engined.
 *
 * Single-threaded: every call happens on the thread that steps the engine.
 * Settings changed between steps (block counts, policies, limits) take effect at
 * the next step boundary. */
#ifndef ALLM_ENGINE_H
#define ALLM_ENGINE_H

#include "engine-opts.h"
#include "executor.h"
#include "predictor.h"
#include "sampler.h"
#include "sequence.h"

enum allm_req_state {
	ALLM_REQ_WAITING = 0, /* new, or recompute-preempted (KV dropped) */
	ALLM_REQ_RUNNING = 1, /* KV in GPU blocks, decoding */
	ALLM_REQ_SWAPPED = 2, /* KV in CPU blocks */
	ALLM_REQ_FINISHED = 3,
};

enum allm_end {
	ALLM_END_NONE = 0,
	ALLM_END_EOS, /* the model's end-of-sequence token */
	ALLM_END_STOP_ID, /* one of the request's stop ids (also when it is an EOS too) */
	ALLM_END_LENGTH, /* max_tokens or the context */
	ALLM_END_CANCELLED,
	ALLM_END_ERROR,
};

/* The end as OpenAI's finish_reason names it: "stop" (EOS or a stop id),
 * "length", "cancelled", "error". */
const char *allm_end_name(enum allm_end end);

enum allm_choice {
	ALLM_CHOICE_SWAP = 0, /* a victim's KV to the host pool */
	ALLM_CHOICE_RECOMPUTE = 1, /* a victim's KV dropped; a cached prefix recomputed */
	ALLM_CHOICE_DISK = 2, /* a victim's KV to the disk tier */
	ALLM_CHOICE_RESTORE = 3, /* a cached prefix copied back from a lower tier */
	ALLM_CHOICE_SPLIT = 4, /* its first part restored, the rest recomputed */
};

/* "swap" (to the host pool), "disk", "recompute", "restore", "split". */
const char *allm_choice_name(enum allm_choice c);

/* Why a decision came out as it did (DESIGN §6's tables). Values, logged as
 * text at the edge (allm_reason_text), never compared as text. */
enum allm_reason {
	ALLM_REASON_NONE = 0,
	ALLM_REASON_POLICY_RECOMPUTE, /* "policy recompute" */
	ALLM_REASON_POLICY_SWAP, /* "policy swap" */
	ALLM_REASON_POLICY_SWAP_HOST_FULL_DISK, /* "policy swap, CPU pool full: disk" */
	ALLM_REASON_POLICY_SWAP_ALL_FULL, /* "policy swap, CPU and disk pools full" */
	ALLM_REASON_POLICY_SWAP_HOST_FULL, /* "policy swap, CPU pool full" */
	ALLM_REASON_POLICY_SWAP_DISK_FAILING, /* "policy swap, CPU pool full, disk failing" */
	ALLM_REASON_SWAP_CHEAPER_DISK_FAILING, /* "swap cheaper, CPU pool full, disk failing" */
	ALLM_REASON_SWAP_CHEAPER, /* "swap cheaper" */
	ALLM_REASON_SWAP_CHEAPER_HOST_FULL, /* "swap cheaper, CPU pool full" */
	ALLM_REASON_RECOMPUTE_CHEAPER, /* "recompute cheaper" */
	ALLM_REASON_SWAP_CHEAPEST, /* "swap cheapest" */
	ALLM_REASON_SWAP_CHEAPEST_HOST_FULL_DISK, /* "swap cheapest, CPU pool full: disk" */
	ALLM_REASON_DISK_CHEAPEST, /* "disk cheapest" */
	ALLM_REASON_RECOMPUTE_CHEAPEST, /* "recompute cheapest" */
	ALLM_REASON_SWAP_CHEAPER_ALL_FULL, /* "swap cheaper, CPU and disk pools full" */
	ALLM_REASON_HOST_MADE_ROOM, /* a lower-priority swap went to disk to make room */
	ALLM_REASON_SWAP_FAILED,
	ALLM_REASON_DISK_WRITE_FAILED,
	ALLM_REASON_DISK_READ_FAILED,
	ALLM_REASON_DEMOTED, /* swapped, then demoted to disk */
	ALLM_REASON_HOST_SHRANK, /* swapped, then the CPU pool shrank */
	ALLM_REASON_DISK_SHRANK, /* swapped to disk, then the disk pool shrank */
	/* restore or recompute of a cached prefix */
	ALLM_REASON_RESTORE_CHEAPER, /* "restore cheaper" */
	ALLM_REASON_RECOMPUTE_CACHED_CHEAPER, /* "recompute cheaper than restore" */
	ALLM_REASON_SPLIT_CHEAPEST, /* "restore the head, recompute the tail" */
	ALLM_REASON_POLICY_RESTORE, /* swap: always restore */
	ALLM_REASON_POLICY_RECOMPUTE_CACHED, /* recompute: never restore */
	ALLM_REASON_RESTORE_FAILED, /* the copy failed: recomputed */
	/* phase-aware placement (engine-elastic.c): a decoding request's KV to the
	 * host for a step, so that a prefill's chunk gets its scratch */
	ALLM_REASON_PHASE_SWAP_CHEAPER, /* "phase: swap out cheaper than a smaller chunk" */
	ALLM_REASON_PHASE_SWAP_POLICY, /* "phase: policy swap, out for a prefill" */
	ALLM_REASON_COUNT,
};

/* The one line of text of a reason. */
const char *allm_reason_text(enum allm_reason r);

enum allm_decision_kind {
	ALLM_DECISION_PREEMPT = 0, /* Alg. 1's choice for a victim */
	ALLM_DECISION_RESTORE = 1, /* restore or recompute a cached prefix in a lower tier */
};

/* One decision, as Alg. 1 (or admission, for a cached prefix) took it. */
struct allm_decision {
	int64_t seq_no; /* increasing */
	double time; /* engine clock */
	enum allm_decision_kind kind;
	int64_t req_id;
	uint64_t tag;
	int32_t n_tokens; /* PREEMPT: length when preempted; RESTORE: cached tokens in lower tiers */
	int32_t n_blocks; /* blocks those tokens fill */
	double priority;
	double pred_swap_s; /* PREEMPT: predicted swap out + in; RESTORE: restore of them all */
	double pred_recompute_s; /* predicted prefill of n_tokens (RESTORE: given the rest of the prompt) */
	double pred_disk_s; /* PREEMPT: predicted disk write + read; NAN without a disk tier;
			     * RESTORE: predicted cost of the choice */
	enum allm_kv_tier tier; /* RESTORE: the lowest tier holding them */
	int32_t n_restored; /* RESTORE: blocks restored (the rest recomputed) */
	bool estimated; /* taken before the predictors were calibrated (a first estimate) */
	enum allm_choice choice;
	enum allm_reason reason;
	double measured_s; /* NAN until the chosen action has run */
	/* PREEMPT with ALLM_REASON_PHASE_*: the predicted cost of the other
	 * choice, cutting the prefill's chunk by what the victim's blocks would
	 * give the scratch (a step of its own for those tokens); NAN otherwise */
	double pred_chunk_s;
	/* PREEMPT under the regret probe (allm_engine_config.probe_other): what the
	 * path not taken cost, timed right after the choice ran (swap chosen: a
	 * prefill of what recompute would re-prefill; recompute chosen: a copy of
	 * its blocks out and back); NAN otherwise */
	double other_measured_s;
	/* of measured_s, the share the engine thread was on a CPU (thread CPU
	 * time over wall time: the caller computes steps and runs the copies); a
	 * low one says the machine's other processes took the time, not the
	 * work (issue 53's "error you can explain"); NAN until measured */
	double oncpu_frac;
	/* What measured_s was made of (issue 53: the error explained, decision by
	 * decision; bench/cost-explain.py fits them). RECOMPUTE: the steps its
	 * re-prefill rode in, summed (their other rows are the batch
	 * interference); SWAP: the copies out and in. */
	struct allm_decision_parts {
		int32_t steps; /* RECOMPUTE: steps its re-prefill rode in */
		int32_t step_tokens; /* their tokens, its own and the other rows' */
		int32_t step_seqs; /* their rows */
		double step_s; /* their wall seconds */
		double tokens; /* its re-prefilled tokens */
		double pairs; /* their query-key pairs (attention work) */
		int32_t runs; /* SWAP: coalesced copies, out + in */
		/* page faults the engine thread took meanwhile (first touch of pages
		 * elastic memory returned, a cold host pool) */
		int64_t faults;
		/* the engine thread's on-CPU share of recent steps when decided
		 * (the predictor's EWMA, allm_predictor_oncpu): the load the
		 * prediction could know of */
		double oncpu_before;
		/* RECOMPUTE: the factor pred_recompute_s was scaled by
		 * (allm_predictor_recompute_factor), so its bias is learnt on the
		 * step model's own prediction */
		double rc_factor;
	} parts;
};


/* What a client asks for. */
struct allm_submit {
	const int32_t *prompt; /* ids, copied */
	int32_t n_prompt;
	/* its parameters, as on the wire (allm_params_init, then the caller's
	 * values; checked by allm_engine_submit), copied: the length, sampling, stop
	 * ids, EOS, cache salt */
	struct allm_params params;
	const struct allm_logit_bias *bias; /* [n_bias] its logit bias, copied */
	int32_t n_bias;
	/* what it may generate (NULL: anything): a compiled grammar the request
	 * takes a reference to (engined/grammar/grammar.h) */
	struct allm_grammar *grammar;
	uint64_t tag; /* the caller's handle (client tag, workload index) */
	void *user; /* the caller's per-request state */
	double arrival; /* engine-clock time it arrived; 0 = now */
	/* who may share its cached prefix (DESIGN §5b): requests of the same uid
	 * (the engine's --share-prefix-cache lifts that) and the same salt
	 * (params.cache_salt) */
	uint32_t cache_uid;
};

/* What the prefix cache offers a request being admitted, and what admission
 * takes of it (engine-prefix.c). Valid in the step that planned it. */
struct allm_prefix_plan {
	int64_t step; /* the step it was made in; plans of other steps are stale */
	int32_t n_match; /* leading full blocks found in some tier */
	int32_t n_device; /* of them, the leading ones on the device */
	int32_t n_held; /* of those, blocks others hold (they cost no free block) */
	int32_t n_use; /* blocks admission takes from the cache: n_device + restored */
	int32_t *ent; /* [n_match] their entries */
	uint32_t *gen; /* [n_match] and the entries' gens (another admission of the
			* step may restore, move or drop them before this one runs) */
	int32_t cap_ent;
	/* the restore-or-recompute choice for the lower-tier part (n_match >
	 * n_device), recorded when admission executes it */
	struct allm_decision d;
};

struct allm_request {
	int64_t id;
	uint64_t tag;
	void *user;
	enum allm_req_state state;
	struct allm_seq seq; /* tokens (prompt + generated) and the GPU block table */
	int32_t *cpu_blocks; /* block table in the CPU pool while swapped */
	int32_t n_cpu_blocks;
	int32_t *disk_blocks; /* block table in the disk pool while swapped to disk */
	int32_t n_disk_blocks;
	/* its parameters (sampler.p: length, stop ids, EOS) and a per-request RNG:
	 * sampling survives preemption */
	struct allm_sampler sampler;
	struct allm_token_logprobs lp; /* of the last token, with params.logprobs > 0 (for on_token) */
	double arrival; /* engine clock */
	double first_sched; /* first time it was scheduled (0 = never) */
	double first_token;
	double finish;
	int32_t n_preempt_swap; /* to the host or to disk */
	int32_t n_preempt_recompute;
	enum allm_end finish_kind;
	int32_t status; /* ALLM_END_ERROR: its cause, -errno (never 0); else 0 */
	char error[160]; /* why, for ALLM_END_ERROR */
	int64_t pending_decision; /* decision waiting for its measured cost, or -1 */
	double pending_swap_out_s; /* measured swap-out time of that decision */
	double pending_rc_s; /* chunked re-prefill: its share of each step so far */
	/* of that measured time, the part the engine thread spent on a CPU (its
	 * thread CPU time): the rest other processes had (decision oncpu_frac) */
	double pending_oncpu_s;
	int64_t arrival_step; /* engine step count when it arrived (aging counts steps) */
	int64_t admit_step; /* step it was last admitted or swapped in */
	int32_t chunk; /* this step: prompt tokens fed (0 = a decode row) */
	bool prefilling; /* admitted from waiting, its (re-)prefill not finished yet */
	int32_t gen_at_admit; /* tokens it had generated when last admitted */
	bool aged; /* waited past max_wait_factor x its service: goes first, stays */
	int32_t load_ticket; /* its disk read running ahead this step, or -1 */
	struct allm_pc_domain dom; /* who shares its cached prefix */
	struct allm_prefix_plan plan;
	/* waiting, never admitted: prompt tokens the prefix cache held at the last
	 * look (any tier), which fair admission does not count as its work (DESIGN
	 * §6) */
	int32_t cached_hint;
	int64_t hint_step; /* the step of that look (0: none yet) */
	int32_t cached_tokens; /* prompt tokens its first admission found cached (usage) */
	bool admitted_once; /* later admissions are re-prefills: not counted as hits */
	/* a restore-or-recompute decision waiting for its measured cost: its
	 * recompute part's share of the steps until n_cached reaches rr_end */
	int64_t rr_decision;
	double rr_seconds;
	int32_t rr_begin, rr_end;
};

static inline int32_t allm_request_n_generated(const struct allm_request *r)
{
	return r->seq.n_tokens - r->seq.n_prompt;
}

/* A new token, as the engine hands it out (on_token). Valid while on_token runs. */
struct allm_token_out {
	int64_t id; /* the request's */
	uint64_t tag; /* its allm_submit.tag */
	void *user; /* its allm_submit.user */
	int32_t token;
	int32_t index; /* among the generated tokens, from 0 */
	/* its log-probabilities when the request asked (params.logprobs > 0), else NULL */
	const struct allm_token_logprobs *lp;
};

/* A finished request, as the engine hands it out (on_finish): what callers
 * report (timings, counts, the end) without reading struct allm_request. Valid
 * while on_finish runs. */
struct allm_result {
	int64_t id;
	uint64_t tag;
	void *user;
	enum allm_end end;
	int32_t status; /* ALLM_END_ERROR: the cause, -errno (never 0); 0 otherwise */
	const char *error; /* ALLM_END_ERROR: why; "" otherwise */
	int32_t n_prompt;
	int32_t n_generated;
	const int32_t *generated; /* [n_generated] */
	int32_t n_cached; /* prompt tokens its first admission found cached */
	int32_t n_preempt_swap; /* to the host or to disk */
	int32_t n_preempt_recompute;
	/* engine clock, seconds. A request that ended before it was scheduled
	 * (before its first token) has first_sched (first_token) at its finish, so
	 * its queue time (time to first token) is all of its time; scheduled and
	 * got_token say whether they happened. */
	double arrival, first_sched, first_token, finish;
	bool scheduled, got_token;
};
/* Elastic memory (DESIGN §5c): the scheduler moved the line between the KV
 * blocks and the activation scratch of one pool. */
enum allm_pool_reason {
	ALLM_POOL_DECODE_PHASE = 0, /* inflate: no prompt waiting, decodes need little scratch */
	ALLM_POOL_KV_SHORT = 1, /* inflate: the running batch's next tokens need blocks */
	ALLM_POOL_PREFILL = 2, /* deflate: this step's prompt tokens need scratch (free blocks only) */
	ALLM_POOL_SLO_TPOT = 3, /* the SLO buffer halved: the window's TPOT over its target */
	ALLM_POOL_SLO_TTFT = 4, /* the SLO buffer doubled: the window's TTFT over its target */
};
/* "decode phase", "KV short", "prefill", "TPOT over SLO", "TTFT over SLO". */
const char *allm_pool_reason_name(enum allm_pool_reason r);

struct allm_pool_decision {
	int64_t seq_no; /* increasing */
	double time; /* engine clock */
	bool inflate; /* blocks to the KV share (else to the scratch) */
	enum allm_pool_reason reason;
	int32_t blocks; /* blocks moved */
	int32_t kv_blocks; /* the KV share after it */
	int64_t scratch_tokens; /* the scratch's share after it, in tokens of a step */
	int64_t scratch_bytes;
	/* the SLO buffer after it: the prompt tokens a step may carry and, with
	 * elastic memory, the scratch inflation leaves while prompts wait (0: no
	 * SLO set). ALLM_POOL_SLO_*: blocks 0, inflate = the buffer shrank (room
	 * for the decodes' KV), observed_ms the window's mean TPOT or worst TTFT
	 * (prompts still waiting count by their age) against target_ms */
	int64_t buffer_tokens;
	double observed_ms, target_ms;
};

struct allm_engine_events {
	void *user;
	/* each new token of a request */
	void (*on_token)(void *user, const struct allm_token_out *t);
	/* a request finished (any reason); it is freed when this returns */
	void (*on_finish)(void *user, const struct allm_result *res);
	/* a preemption was decided (measured_s NAN), or its cost became known */
	void (*on_decision)(void *user, const struct allm_decision *d, bool measured);
	/* optional: elastic memory moved blocks between the KV cache and scratch */
	void (*on_pool)(void *user, const struct allm_pool_decision *d);
	/* optional: something the operator should hear of (a disk I/O failed and a
	 * request fell back to recompute); the engine never prints */
	void (*on_note)(void *user, const char *msg);
};

/* Zero values give the paper's engine: prefill-only steps, no
 * admission headroom, no aging. Programs take their defaults from engine-opts.
 * The fields up to prefix_caching are the CFG rows of the settings table
 * (include/adaptivellm/settings.h: ranges, defaults, `allmctl set`). */
struct allm_engine_config {
	int32_t max_num_seqs;
	int32_t max_num_batched_tokens;
	enum allm_preempt_mode preempt;
	enum allm_sched_mode sched;
	/* steps mix the running batch's decodes with prefill chunks, up to
	 * max_num_batched_tokens tokens; long prompts span steps (DESIGN §6) */
	bool chunked_prefill;
	/* fair: admission leaves the running batch room to grow this many steps, and
	 * admits nothing in a step that had to preempt */
	int32_t admit_lookahead;
	/* fair: a request that has waited more than this x its own service time
	 * (in steps) goes first and is not a victim; 0 = off */
	double max_wait_factor;
	/* fair: a new prompt is admitted only while the KV that the running,
	 * loading and swapped requests and it would hold at their longest (prompt +
	 * max output) stays within this x the blocks of every tier it can live in
	 * (device, host, disk); an aged request and one alone are exempt; 0 = off */
	double admit_overcommit;
	/* automatic prefix caching (DESIGN §5b): full blocks outlive their request */
	bool prefix_caching;
	/* the SLO buffer (engine-slo.c): targets in milliseconds, 0 = off; with
	 * either set, the prompt tokens a step carries are capped by a buffer
	 * that a TPOT violation halves and a TTFT violation doubles */
	double slo_ttft_ms, slo_tpot_ms;
	/* elastic memory: a prefill short of scratch may swap decoding requests'
	 * KV out for a step when the cost model says that beats chunking */
	bool phase_placement;
	/* requests of different uids may share cached blocks (still not across salts) */
	bool share_prefix_cache;
	/* a bench and test hook (allm-run --probe-regret): each victim's other
	 * path is timed too (decision other_measured_s), so regret can be
	 * counted; it costs that path's time on every preemption */
	bool probe_other;
	/* engine clock; NULL = allm_now(). Tests pass a fake one. */
	double (*clock)(void *user);
	void *clock_user;
};

/* The engine settings the shared flags give (engine-config.c). */
void allm_engine_config_from_opts(const struct allm_engine_opts *o, struct allm_engine_config *ret);

struct allm_engine_stats {
	int32_t waiting, running, swapped;
	int32_t gpu_total, gpu_used, gpu_free, gpu_deficit;
	int32_t cpu_total, cpu_used;
	int32_t disk_total, disk_used; /* 0 without a disk tier */
	int64_t preempt_swap, preempt_recompute;
	int64_t preempt_disk; /* swaps to disk (not counted in preempt_swap) */
	int64_t demotions; /* swapped requests moved from the host pool to disk */
	int64_t disk_write_bytes, disk_read_bytes;
	int64_t disk_fallbacks; /* disk I/O failures that turned into recomputes */
	int64_t disk_stage_hits; /* blocks read back from the write-behind stage, not the file */
	int64_t disk_reads_ahead; /* swap-ins from disk whose read ran while a step computed */
	int64_t swap_out_bytes, swap_in_bytes;
	int64_t recompute_tokens; /* tokens re-prefilled after a recompute preemption */
	int64_t prompt_tokens, generated_tokens; /* processed since start / reset */
	int64_t steps, prefill_steps, decode_steps;
	int64_t mixed_steps; /* both: decode-only = decode - mixed, prefill-only = prefill - mixed */
	int64_t wasted_prefill_tokens; /* prefilled for requests dropped before their first token */
	int64_t aged; /* requests that waited past max_wait_factor */
	int64_t max_wait_steps; /* longest wait (steps) of a request when first admitted */
	double max_wait_ratio; /* the largest such wait over that request's service steps */
	int64_t finished, failed;
	double mape_swap, mape_recompute; /* percent, NAN before any sample */
	double mape_disk;
	/* the decisions' own error (decision-error.h): the prediction of the path
	 * a victim took against its measured cost, rolling; NAN before one */
	double dec_mape_swap, dec_mape_recompute;
	int64_t dec_measured; /* preemption decisions whose cost was measured */
	int64_t dec_probed, dec_regret; /* of them, the other path timed; of those, regretted */
	/* the prefix cache (DESIGN §9's prefix_cache): first admissions only */
	int64_t pc_queried_tokens; /* prompt tokens looked up */
	int64_t pc_hit_tokens; /* of them found cached (and used) */
	int64_t pc_hit_tokens_tier[ALLM_KV_TIER_COUNT]; /* by the tier they were found in */
	int64_t pc_readmit_hit_tokens; /* hits of re-prefills after a preemption (not above) */
	int64_t pc_restored_tokens; /* cached tokens copied back from a lower tier */
	int64_t pc_recomputed_cached_tokens; /* cached in a lower tier, recomputed instead */
	int64_t pc_restore_failures; /* restores whose copy failed (recomputed) */
	/* blocks victims held that other requests hold too: a preemption frees
	 * only what its victim alone holds */
	int64_t pc_victim_shared_blocks;
	/* restore decisions by the lowest tier they read and the choice */
	int64_t pc_restores[ALLM_KV_TIER_COUNT][ALLM_CHOICE_SPLIT + 1];
	int32_t pc_blocks[ALLM_KV_TIER_COUNT]; /* cached blocks per tier now */
	int32_t gpu_cached_free; /* of gpu_total: cached blocks nobody holds (reclaimable) */
	int32_t cpu_cached, disk_cached; /* of cpu_/disk_total: cached blocks */
	struct allm_pc_stats pc; /* the cache's own counters (writes down, drops) */
	int32_t max_running; /* the largest running batch since start / reset */
	/* elastic memory (DESIGN §5c); zeros without it */
	bool elastic;
	int64_t pool_bytes; /* the pool the KV blocks and the scratch share */
	int64_t scratch_bytes; /* the scratch's share of it now (gpu_total blocks: the KV's) */
	int64_t inflations, deflations; /* pool decisions (allm_pool_decision) */
	int64_t blocks_inflated, blocks_deflated;
	/* steps whose activations exceeded the scratch's share (a whole prompt
	 * without chunked prefill when no free block was left to lend) */
	int64_t over_budget_steps;
	int64_t resident_bytes; /* pages mapped now: device pool + scratch (host memory only) */
	/* the SLO buffer (engine-slo.c): its size now (0: no SLO set), its moves */
	int64_t slo_buffer_tokens;
	int64_t slo_shrinks, slo_grows;
	/* phase-aware placement: decoding requests swapped out so that a prefill
	 * chunk got its scratch (also counted in preempt_swap) */
	int64_t phase_swaps;
};

struct allm_engine;

/* Creates an engine over a loaded model and KV cache (not owned). The predictor
 * (owned by the caller, may be uncalibrated) gives the costs Alg. 1 compares. */
int allm_engine_create(struct allm_model *model, struct allm_kv_cache *kv,
		       struct allm_predictor *pred, const struct allm_engine_config *cfg,
		       const struct allm_engine_events *ev, struct allm_engine **ret,
		       struct allm_err *err);
/* Finishes every request as cancelled (events fire) and frees the engine. */
void allm_engine_free(struct allm_engine *e);

/* Queues a request. Validates it first (ids in vocabulary, prompt shorter than
 * the context, a length that can ever fit the GPU pool, sampling params):
 * -EINVAL with err and nothing queued. On success *ret_id is its id. */
int allm_engine_submit(struct allm_engine *e, const struct allm_submit *s, int64_t *ret_id,
		       struct allm_err *err);
/* Cancels a request wherever it is (its blocks are freed, on_finish fires with
 * ALLM_END_CANCELLED). -ENOENT if unknown or already finished. */
int allm_engine_cancel(struct allm_engine *e, int64_t id);
/* Like allm_engine_submit, returning the request itself: valid until its
 * on_finish returns, so a caller that tracks its requests (the daemon, per client)
 * can cancel them with allm_engine_cancel_req() without a lookup by id. */
int allm_engine_submit_req(struct allm_engine *e, const struct allm_submit *s,
			   struct allm_request **ret_req, struct allm_err *err);
/* Cancels r, a live request of e, as allm_engine_cancel does. */
void allm_engine_cancel_req(struct allm_engine *e, struct allm_request *r);
/* The submitter's user pointer of a live request, NULL if unknown or finished. */
void *allm_engine_request_user(const struct allm_engine *e, int64_t id);

/* Runs one scheduler step: preemption, admission, then a prefill or a decode.
 * Returns the number of tokens the forward processed (0 when idle), or -errno
 * when the backend failed (the step's requests are finished with an error and
 * the engine stays usable). */
int allm_engine_step(struct allm_engine *e, struct allm_err *err);
/* True when no request is waiting, running or swapped. */
bool allm_engine_idle(const struct allm_engine *e);

/* Run-time settings (the control plane calls these between steps). */
int allm_engine_set_gpu_blocks(struct allm_engine *e, int32_t n, struct allm_err *err);
int allm_engine_set_cpu_blocks(struct allm_engine *e, int32_t n, struct allm_err *err);
/* The disk pool (a disk tier must exist: -ENOTSUP otherwise); requests beyond a
 * shrink recompute, as for the CPU pool. */
int allm_engine_set_disk_blocks(struct allm_engine *e, int32_t n, struct allm_err *err);
void allm_engine_set_preempt(struct allm_engine *e, enum allm_preempt_mode m);
void allm_engine_set_sched(struct allm_engine *e, enum allm_sched_mode m);
int allm_engine_set_limits(struct allm_engine *e, int32_t max_num_seqs,
			   int32_t max_num_batched_tokens, struct allm_err *err);
/* Every live setting (the CFG rows of include/adaptivellm/settings.h) at once:
 * -EINVAL with err, nothing changed, unless each is in its row's range.
 * prefix_caching off drops every cached block no request holds and stops lookups
 * and publishing; on starts them again. */
int allm_engine_set_config(struct allm_engine *e, const struct allm_engine_config *cfg,
			   struct allm_err *err);
/* The check allm_engine_set_config and allm_engine_create make. */
int allm_engine_config_check(const struct allm_engine_config *cfg, struct allm_err *err);
/* Drops every cached block no request holds, in every tier (`cache reset`).
 * Returns how many went. */
int32_t allm_engine_cache_reset(struct allm_engine *e);
/* The engine's prefix cache (NULL only while it could not be created). */
struct allm_prefix_cache *allm_engine_prefix_cache(struct allm_engine *e);
const struct allm_engine_config *allm_engine_get_config(const struct allm_engine *e);

void allm_engine_get_stats(const struct allm_engine *e, struct allm_engine_stats *ret);
/* Elastic memory's invariants (DESIGN §5c): the KV share and the scratch's fit
 * the pool; no retired block holds pages; the scratch maps no more than its
 * share; idle (nothing queued or running): only blocks held (by requests or
 * the prefix cache) hold pages and the scratch none. 0 without elastic memory
 * or when they hold, else -EFAULT with err. For tests. */
int allm_engine_elastic_check(const struct allm_engine *e, bool idle, struct allm_err *err);
void allm_engine_reset_stats(struct allm_engine *e);
/* Copies up to max decision records with seq_no >= since, oldest first; returns
 * how many. The engine keeps the last ALLM_ENGINE_DECISIONS of them. */
#define ALLM_ENGINE_DECISIONS 4096
int allm_engine_decisions(const struct allm_engine *e, int64_t since, struct allm_decision *ret,
			  int max);
/* Requests in a queue (for the control plane's `requests`), up to max. */
int allm_engine_list(const struct allm_engine *e, enum allm_req_state q,
		     const struct allm_request **ret, int max);

/* Fairness priority of DESIGN §6: (now - arrival) / current length; a waiting
 * request's length less what the prefix cache holds of it (cached_hint), so
 * cached work goes first within fairness: aging still bounds every wait. */
double allm_engine_priority(const struct allm_request *r, double now);

/* A live request as listings show it (allm_engine_info): the control plane's
 * `requests` and `status` read this, not struct allm_request. */
struct allm_request_info {
	int64_t id;
	uint64_t tag;
	void *user;
	enum allm_req_state state;
	int32_t n_prompt, n_generated;
	int32_t length; /* prompt and output tokens */
	int32_t blocks_gpu, blocks_cpu;
	int32_t n_preemptions; /* swapped out (host or disk) or dropped to recompute */
	double age_s; /* since it arrived, at now */
	double priority; /* allm_engine_priority at now */
};
/* r (from allm_engine_list) as of now (the engine's clock). */
void allm_engine_info(const struct allm_request *r, double now, struct allm_request_info *ret);
/* A request's own service time in steps: its prompt's prefill chunks plus one
 * step per output token (what it would take alone). */
int64_t allm_engine_service_steps(const struct allm_engine *e, const struct allm_request *r);

#endif
