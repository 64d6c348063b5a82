/* Private to engine*.c: the engine's state. */
#ifndef ALLM_ENGINE_INTERNAL_H
#define ALLM_ENGINE_INTERNAL_H

#include "decision-error.h"
#include "engine.h"

/* A growable array of requests: one per queue. */
struct allm_rq_vec {
	struct allm_request **v;
	int32_t n;
	int32_t cap;
};

/* Elastic memory's state (engine-elastic.c); pool 0: off. */
struct allm_elastic {
	size_t pool; /* bytes the KV blocks and the scratch share (kv->elastic_pool) */
	int64_t scratch_tokens; /* the scratch's share: a step of this many tokens fits */
	uint8_t *maybe; /* [kv->gpu.capacity] device blocks that may hold pages */
	bool trimmed; /* idle: every free page returned */
	bool sweep; /* the first step returns every retired block's pages */
	int64_t n_pool_decisions;
};

/* The SLO buffer's state (engine-slo.c); buffer 0: no SLO set. */
struct allm_slo {
	int64_t buffer; /* prompt tokens a step may carry */
	int32_t steps; /* steps in the window so far */
	double step_t0; /* the running step's start (engine clock) */
	bool step_decodes; /* the running step decodes (its time is a TPOT sample) */
	double tpot_sum; /* the window's decoding steps' seconds */
	int32_t tpot_n;
	double ttft_worst; /* the window's worst time to first token, seconds (-1: none) */
};

struct allm_engine {
	struct allm_model *model; /* not owned */
	struct allm_kv_cache *kv; /* not owned */
	struct allm_predictor *pred; /* not owned */
	struct allm_engine_config cfg;
	struct allm_engine_events ev;
	struct allm_executor *ex;
	struct allm_rq_vec waiting, running, swapped;
	/* swapped to disk, read back while the step computes (state still
	 * ALLM_REQ_SWAPPED, load_ticket >= 0): empty between steps */
	struct allm_rq_vec loading;
	int64_t next_id;
	int64_t step_no; /* steps ever run (never reset: aging counts it) */
	struct allm_decision *dlog; /* ring of ALLM_ENGINE_DECISIONS */
	int64_t n_decisions; /* ever made; the next seq_no */
	struct allm_engine_stats st; /* counters (queue/pool fields filled on read) */
	struct allm_decision_error derr; /* the decisions' own error; reset with st */
	float *logits; /* [logits_rows][vocab] */
	int32_t logits_rows;
	struct allm_batch_seq *batch;
	int32_t batch_cap;
	struct allm_prefix_cache *pc; /* the prefix cache over kv's pools (owned), or NULL */
	char profile_path[4096]; /* where the predictor's profile goes once learned online ("": nowhere) */
	struct allm_rq_vec sel; /* scratch: requests picked this step */
	struct allm_rq_vec sel2;
	struct allm_elastic el;
	struct allm_slo slo;
};

double allm_engine_now(const struct allm_engine *e);
/* CPU seconds the calling thread has run (CLOCK_THREAD_CPUTIME_ID). */
double allm_engine_thread_cpu(void);
/* Page faults (minor + major) the calling thread has taken (RUSAGE_THREAD). */
int64_t allm_engine_thread_faults(void);
int allm_rq_push(struct allm_rq_vec *q, struct allm_request *r);
void allm_rq_remove_at(struct allm_rq_vec *q, int32_t i);
bool allm_rq_remove(struct allm_rq_vec *q, const struct allm_request *r);

/* engine-elastic.c: elastic memory (DESIGN §5c). Set up from kv->elastic_pool
 * at create (0, nothing done, when off). */
int allm_elastic_init(struct allm_engine *e, struct allm_err *err);
void allm_elastic_fini(struct allm_engine *e);
/* The step begins: coming back from idle; inflation (no prompt waiting, or
 * short_blocks > 0 blocks missing for the running batch's next tokens). */
void allm_elastic_begin(struct allm_engine *e, int32_t short_blocks);
/* Before the forward of sel (and the largest batch counted, elastic or not): the scratch grows to the step's tokens from at
 * most spare free blocks (deflation), prompt chunks shrink where it cannot. */
void allm_elastic_fit(struct allm_engine *e, struct allm_rq_vec *sel, int32_t spare);
/* The step ended (or a request was cancelled): idle, every free page returned. */
void allm_elastic_end(struct allm_engine *e);
/* Device blocks the KV share can grow to (admission's bound): gpu.n_total when off. */
int32_t allm_elastic_max_blocks(const struct allm_engine *e);

/* engine-slo.c: the SLO buffer (cfg.slo_ttft_ms, cfg.slo_tpot_ms). */
/* The step begins: the buffer follows the settings (set, dropped, bounded). */
void allm_slo_sync(struct allm_engine *e);
/* Prompt tokens this step may carry: INT64_MAX with no SLO set. */
int64_t allm_slo_prompt_tokens(const struct allm_engine *e);
/* Around the forward of sel: its time, a TPOT sample when it decodes; at
 * the window's end the buffer moves (a pool decision, ALLM_POOL_SLO_*). */
void allm_slo_before(struct allm_engine *e, const struct allm_rq_vec *sel);
void allm_slo_after(struct allm_engine *e);
/* r got its first token at now (a TTFT sample). */
void allm_slo_first_token(struct allm_engine *e, const struct allm_request *r, double now);

/* Releases everything r holds in either pool. */
void allm_engine_drop_blocks(struct allm_engine *e, struct allm_request *r);
/* Takes r out of its queue, frees its blocks, reports and frees it. For
 * ALLM_END_ERROR, status is the cause (-errno: the backend's, -ENOMEM, -E2BIG...)
 * and error says it in words; both reach the client's FINAL (0 and NULL otherwise). */
void allm_engine_retire(struct allm_engine *e, struct allm_request *r, enum allm_end how, int status,
			const char *error);
/* A fresh decision record in the ring (seq_no set, measured_s NAN). */
struct allm_decision *allm_engine_record_decision(struct allm_engine *e);
/* Decision seq_no, if still in the ring. */
struct allm_decision *allm_engine_decision_at(struct allm_engine *e, int64_t seq_no);
/* The decision r is waiting on for its measured cost, if still in the ring. */
struct allm_decision *allm_engine_pending_decision(struct allm_engine *e, struct allm_request *r);
/* engine-preempt.c: Alg. 1's choice for victim v and its execution. */
void allm_engine_preempt(struct allm_engine *e, struct allm_request *v, double now);
/* Phase-aware placement: decoding request v (running) is priced as a victim
 * whose blocks would give a prefill's chunk `tokens` more tokens of scratch
 * this step; when the policy takes the swap (engine-policy.h's phase) it
 * leaves the running batch for the host as a preemption whose decision says
 * so, and true is returned; false: nothing done. */
bool allm_engine_phase_out(struct allm_engine *e, struct allm_request *v, int64_t tokens, double now);
/* Brings swapped r back (host or disk) into the running batch; a failed disk read
 * sends it to waiting to recompute. */
void allm_engine_swap_in(struct allm_engine *e, struct allm_request *r, double now);
/* Starts bringing r back from disk in the background (into e->loading), its
 * read running while the step computes; false (nothing done) where reads
 * cannot go ahead: use allm_engine_swap_in. */
bool allm_engine_load_start(struct allm_engine *e, struct allm_request *r, double now);
/* Waits for r's read ahead; with join, r then joins the running batch as
 * allm_engine_swap_in ends; without (r is being retired), r just holds its
 * blocks again (in whichever pool) to be dropped. */
void allm_engine_load_finish(struct allm_engine *e, struct allm_request *r, double now, bool join);
/* engine-step.c: r joins the running batch (admission or swap-in). */
void allm_engine_admitted(struct allm_engine *e, struct allm_request *r, double now);

/* engine-forward.c: runs sel (rows with chunk > 0 feed that many prompt tokens,
 * the others decode one), samples, emits and retires. Tokens processed, or
 * -errno when the backend failed (sel's requests are then failed). */
int allm_engine_run_batch(struct allm_engine *e, struct allm_rq_vec *sel, struct allm_err *err);
/* Gives r's pending preemption decision its measured cost. */
void allm_engine_attach_measured(struct allm_engine *e, struct allm_request *r, double seconds);

/* engine-prefix.c: the prefix cache's side of the engine. */
/* Creates e->pc over e->kv (the predictor prices its evictions). */
int allm_engine_prefix_create(struct allm_engine *e, struct allm_err *err);
/* r's isolation domain and chain root, from its submission. */
void allm_engine_prefix_init(struct allm_engine *e, struct allm_request *r, const struct allm_submit *s);
/* Looks again, at most every few steps, how much of waiting r's prompt the
 * cache holds (r->cached_hint), for fair admission's order. */
void allm_engine_prefix_hint(struct allm_engine *e, struct allm_request *r);
/* What the cache offers r, admitted from waiting now (r->plan; nothing held). */
void allm_engine_prefix_plan(struct allm_engine *e, struct allm_request *r);
/* Device blocks admitting r takes beyond what others hold already. */
int32_t allm_engine_prefix_blocks(const struct allm_engine *e, const struct allm_request *r, int32_t blocks);
/* Cached tokens r's plan of this step gives it (0 without one). */
int32_t allm_engine_prefix_tokens(const struct allm_engine *e, const struct allm_request *r);
/* Admission takes the plan: hold its device blocks (every admitted request's
 * first: a restore may reclaim cached-free blocks), then restore the rest. */
void allm_engine_prefix_hold(struct allm_engine *e, struct allm_request *r);
void allm_engine_prefix_restore(struct allm_engine *e, struct allm_request *r, double now);
/* r's newly full blocks become cached (after a forward). */
void allm_engine_prefix_publish(struct allm_engine *e, struct allm_request *r);
/* Leading blocks of r the cache would keep if r let go of them now. */
int32_t allm_engine_prefix_kept(const struct allm_engine *e, const struct allm_request *r);
/* Predicted cost of prefilling tokens [from, to) of a sequence (a chunked
 * step: what it adds to the steps it rides in). */
double allm_engine_predict_reprefill(const struct allm_engine *e, int32_t from, int32_t to);
/* A step that prefilled chunk tokens of q cost q's share `seconds`: the
 * measured cost of q's restore-or-recompute decision accrues. */
void allm_engine_prefix_learn(struct allm_engine *e, struct allm_request *q, int32_t from, int32_t to,
			      double seconds);

/* r leaves the running batch (preempted, finished): its restore decision gets
 * the cost measured so far. */
void allm_engine_prefix_settle(struct allm_engine *e, struct allm_request *r);

/* Most tokens a request can ever hold in the KV cache. */
int32_t allm_engine_max_len(const struct allm_engine *e, const struct allm_request *r);

#endif
