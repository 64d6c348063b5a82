/* Private to engine*.c: the engine's state. */
#ifndef ALLM_ENGINE_INTERNAL_H
#define ALLM_ENGINE_INTERNAL_H

#include "engine.h"

/* A growable array of requests: one per queue. */
struct allm_rq_vec {
	struct allm_request **v;
	int32_t n;
	int32_t cap;
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
	float *logits; /* [logits_rows][vocab] */
	int32_t logits_rows;
	struct allm_batch_seq *batch;
	int32_t batch_cap;
	struct allm_rq_vec sel; /* scratch: requests picked this step */
	struct allm_rq_vec sel2;
};

double allm_engine_now(const struct allm_engine *e);
int allm_rq_push(struct allm_rq_vec *q, struct allm_request *r);
void allm_rq_remove_at(struct allm_rq_vec *q, int32_t i);
bool allm_rq_remove(struct allm_rq_vec *q, const struct allm_request *r);

/* Releases everything r holds in either pool. */
void allm_engine_drop_blocks(struct allm_engine *e, struct allm_request *r);
/* Takes r out of its queue, frees its blocks, reports and frees it. */
void allm_engine_retire(struct allm_engine *e, struct allm_request *r, enum allm_end how,
			const char *error);
/* The decision r is waiting on for its measured cost, if still in the ring. */
struct allm_decision *allm_engine_pending_decision(struct allm_engine *e, struct allm_request *r);
/* engine-preempt.c: Alg. 1's choice for victim v and its execution. */
void allm_engine_preempt(struct allm_engine *e, struct allm_request *v, double now);
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

/* Most tokens a request can ever hold in the KV cache. */
int32_t allm_engine_max_len(const struct allm_engine *e, const struct allm_request *r);

#endif
