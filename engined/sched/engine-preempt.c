/* Alg. 1's choice for one victim and its execution (DESIGN §6): swap its KV to
 * the host pool, swap it to disk (the third tier, when there is one), or drop
 * it and recompute later, from the predicted cost of each (`adaptive`), the
 * tier order host > disk > recompute (`swap`) or always recompute; and the way
 * back in. A failed copy or disk I/O costs time, never the request: it falls
 * back to recompute. Which request is the victim is engine-step.c's business. */
#include "engine-calib.h"
#include "engine-internal.h"
#include "engine-policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

struct allm_decision *allm_engine_record_decision(struct allm_engine *e)
{
	struct allm_decision *d = &e->dlog[e->n_decisions % ALLM_ENGINE_DECISIONS];
	memset(d, 0, sizeof(*d));
	d->seq_no = e->n_decisions++;
	d->measured_s = NAN;
	d->other_measured_s = NAN;
	d->oncpu_frac = NAN;
	d->pred_chunk_s = NAN;
	return d;
}

struct allm_decision *allm_engine_decision_at(struct allm_engine *e, int64_t seq_no)
{
	if (seq_no < 0 || seq_no < e->n_decisions - ALLM_ENGINE_DECISIONS)
		return NULL;
	struct allm_decision *d = &e->dlog[seq_no % ALLM_ENGINE_DECISIONS];
	return d->seq_no == seq_no ? d : NULL;
}

struct allm_decision *allm_engine_pending_decision(struct allm_engine *e, struct allm_request *r)
{
	return allm_engine_decision_at(e, r->pending_decision);
}

static void note(struct allm_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct allm_engine *e, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	if (!e->ev.on_note)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->ev.on_note(e->ev.user, msg);
}

/* Grows *ids to hold n. */
static int32_t *table(int32_t **ids, int32_t n)
{
	int32_t *p = allm_realloc(*ids, (size_t)ALLM_MAX(n, 1) * sizeof(int32_t));
	if (p)
		*ids = p;
	return p;
}

/* Whether the disk tier failed lately (full, broken): then it is not chosen
 * until the failures fade (predictor.h), and victims recompute instead of
 * paying for a write that fails again. */
static bool disk_failing(const struct allm_engine *e, double now)
{
	return allm_predict_disk_failure(e->pred, now) >= ALLM_DISK_FAIL_SKIP;
}

/* Alg. 1's choice for a victim of n blocks, and why: the policy's (engine-policy.c). */
static void choose(const struct allm_engine *e, struct allm_decision *d, int32_t n, double now)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(e->kv);
	bool failing = dp && disk_failing(e, now);
	struct allm_victim_room room = {
		.host = allm_block_pool_avail(&e->kv->cpu) >= n && n > 0,
		.disk = dp && !failing && allm_block_pool_avail(dp) >= n && n > 0,
		.has_disk = dp != NULL,
		.disk_failing = failing,
	};
	allm_policy_of(e->cfg.preempt)->victim(&room, d);
}

/* Makes room in the host pool for a victim of n blocks by moving swapped
 * requests of lower priority to disk (they return later, so the slower tier
 * costs them least). Returns whether the victim now fits. */
static bool demote_for(struct allm_engine *e, int32_t n, double priority, double now)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(e->kv);
	while (allm_block_pool_avail(&e->kv->cpu) < n && !disk_failing(e, now)) {
		struct allm_request *low = NULL;
		for (int32_t i = 0; i < e->swapped.n; i++) {
			struct allm_request *r = e->swapped.v[i];
			if (r->n_cpu_blocks > 0 && allm_engine_priority(r, now) < priority &&
			    (!low || allm_engine_priority(r, now) < allm_engine_priority(low, now)))
				low = r;
		}
		if (!low || !dp || allm_block_pool_avail(dp) < low->n_cpu_blocks ||
		    !table(&low->disk_blocks, low->n_cpu_blocks))
			return false;
		struct allm_swap_result res;
		struct allm_err err = {{0}};
		if (allm_kv_demote(e->kv, low->id, low->cpu_blocks, low->n_cpu_blocks, low->disk_blocks, &res,
				   &err)) {
			note(e, "request %lld: demotion to disk failed (%s): it stays in the host pool",
			     (long long)low->id, err.msg);
			allm_predictor_observe_disk_outcome(e->pred, true, now);
			return false;
		}
		allm_predictor_observe_disk_outcome(e->pred, false, now);
		low->n_disk_blocks = low->n_cpu_blocks;
		low->n_cpu_blocks = 0;
		low->pending_swap_out_s += res.seconds;
		allm_predictor_observe_disk(e->pred, ALLM_DISK_WRITE, res.bytes, res.n_runs, res.disk.io_seconds);
		e->st.disk_write_bytes += (int64_t)res.bytes;
		e->st.demotions++;
		e->st.preempt_swap--;
		e->st.preempt_disk++;
		struct allm_decision *d = allm_engine_pending_decision(e, low);
		if (d) {
			d->choice = ALLM_CHOICE_DISK;
			d->reason = ALLM_REASON_DEMOTED;
		}
	}
	return allm_block_pool_avail(&e->kv->cpu) >= n;
}

/* The regret probe (cfg.probe_other), swap chosen: the victim's blocks are on
 * the host now; a scratch prefill of what recompute would have re-prefilled
 * (from `kept` on) takes their place for a moment. With chunked prefill a
 * re-prefill costs what it adds to steps that run anyway: the prefill's time is
 * scaled to that share by the model, as learn() shares out a step's time. */
static void probe_recompute(struct allm_engine *e, struct allm_decision *d, int32_t kept)
{
	int32_t len = d->n_tokens - kept;
	if (len <= 0)
		return;
	double t = allm_engine_time_prefill(e, 1, len);
	double full = allm_predict_recompute(e->pred, len);
	if (t >= 0 && full > 0)
		d->other_measured_s = e->cfg.chunked_prefill
					      ? t * ALLM_MIN(1.0, allm_engine_predict_reprefill(e, kept, d->n_tokens) / full)
					      : t;
}

/* The regret probe, recompute chosen: the victim's blocks, about to be
 * dropped, copied out to the host and back as a swap would (nothing when the
 * host pool has no room: then swap was no alternative). */
static void probe_swap(struct allm_engine *e, struct allm_request *v, struct allm_decision *d)
{
	double out = 0, in = 0;
	if (allm_seq_held(&v->seq) > 0 &&
	    allm_kv_time_roundtrip(e->kv, v->seq.blocks + v->seq.n_gone, allm_seq_held(&v->seq), &out, &in) == 0)
		d->other_measured_s = out + in;
}

static void pushed(struct allm_engine *e, struct allm_rq_vec *q, struct allm_request *v,
		   struct allm_decision *d)
{
	v->pending_decision = d->seq_no;
	if (e->ev.on_decision)
		e->ev.on_decision(e->ev.user, d, false);
	if (allm_rq_push(q, v))
		allm_engine_retire(e, v, ALLM_END_ERROR, -ENOMEM, "out of memory");
}

/* Victim v's predictions into d (no side effects): its swap round trip,
 * disk round trip, re-prefill; *kept: its leading blocks the prefix cache
 * would keep. */
static void predict_victim(const struct allm_engine *e, const struct allm_request *v, double now,
			   struct allm_decision *d, int32_t *kept)
{
	struct allm_kv_cache *kv = e->kv;
	/* what it holds: the blocks its window passed went back already */
	int32_t n = allm_seq_held(&v->seq);
	const int32_t *held = v->seq.blocks + v->seq.n_gone;
	uint64_t bytes = (uint64_t)n * kv->block_bytes;
	/* the coalesced copies a swap takes: runs of its block table (the other
	 * side's blocks come off a stack, so they are mostly consecutive) */
	int32_t runs = allm_kv_count_runs(held, NULL, n);
	d->time = now;
	d->req_id = v->id;
	d->tag = v->tag;
	d->n_tokens = v->seq.n_tokens;
	d->n_blocks = n;
	d->priority = allm_engine_priority(v, now);
	d->estimated = !allm_predictor_calibrated(e->pred);
	d->parts.oncpu_before = allm_predictor_oncpu(e->pred);
	d->pred_swap_s = allm_predict_swap(e->pred, ALLM_COPY_D2H, bytes, runs) +
			 allm_predict_swap(e->pred, ALLM_COPY_H2D, bytes, runs);
	/* a disk swap is written from and read into device blocks (staged through
	 * host memory on a GPU; the disk model's timings include that); a write
	 * that goes behind costs the step its copy to the stage, which is what the
	 * swap model's out direction prices (on a GPU a device -> host copy into
	 * the disk tier's pinned stage, as a swap-out's into the host pool) */
	d->pred_disk_s = NAN;
	if (kv->disk)
		d->pred_disk_s = (allm_kv_disk_behind_room(kv, n) ? allm_predict_swap(e->pred, ALLM_COPY_D2H, bytes, runs)
								  : allm_predict_disk(e->pred, ALLM_DISK_WRITE, bytes, runs)) +
				 allm_predict_disk(e->pred, ALLM_DISK_READ, bytes, runs);
	/* recompute re-prefills everything it had (prompt + generated so far) but
	 * what the prefix cache keeps of it; with chunked prefill that rides in
	 * steps that run anyway, so it costs what it adds to them */
	*kept = allm_engine_prefix_kept(e, v);
	d->parts.rc_factor = allm_predictor_recompute_factor(e->pred);
	d->pred_recompute_s = allm_engine_predict_reprefill(e, *kept, v->seq.n_tokens) * d->parts.rc_factor;
	d->pred_chunk_s = NAN;
}

static void execute(struct allm_engine *e, struct allm_request *v, struct allm_decision *d, int32_t kept,
		    double now);

/* What a preemption does first, whatever it chooses: v's restore decision
 * settles, a chunked re-prefill cut short gets its cost, its shared blocks
 * are counted. */
static void leave_running(struct allm_engine *e, struct allm_request *v)
{
	const struct allm_kv_cache *kv = e->kv;
	allm_engine_prefix_settle(e, v);
	/* a chunked re-prefill cut short: its earlier decision cost what it got */
	if (v->pending_decision >= 0)
		allm_engine_attach_measured(e, v, v->pending_rc_s);
	int32_t n = allm_seq_held(&v->seq), *held = v->seq.blocks + v->seq.n_gone;
	for (int32_t i = 0; i < n; i++) /* these stay: others hold them */
		e->st.pc_victim_shared_blocks += kv->gpu.owner[held[i]] == ALLM_BLOCK_CACHED &&
						 kv->gpu.refs[held[i]] > 1;
}

void allm_engine_preempt(struct allm_engine *e, struct allm_request *v, double now)
{
	int32_t kept;
	leave_running(e, v);
	struct allm_decision *d = allm_engine_record_decision(e);
	predict_victim(e, v, now, d, &kept);
	choose(e, d, d->n_blocks, now);
	execute(e, v, d, kept, now);
}

bool allm_engine_phase_out(struct allm_engine *e, struct allm_request *v, int64_t tokens, double now)
{
	struct allm_decision p = {0};
	int32_t kept;
	predict_victim(e, v, now, &p, &kept);
	/* the other choice: the chunk loses these tokens, and the prompt's first
	 * token waits for a step that carries them */
	p.pred_chunk_s = allm_predict_recompute(e->pred, tokens);
	struct allm_victim_room room = {.host = p.n_blocks > 0 && allm_block_pool_avail(&e->kv->cpu) >= p.n_blocks};
	if (!allm_policy_of(e->cfg.preempt)->phase(&room, &p))
		return false;
	allm_rq_remove(&e->running, v);
	leave_running(e, v);
	struct allm_decision *d = allm_engine_record_decision(e);
	int64_t seq_no = d->seq_no;
	*d = p;
	d->seq_no = seq_no;
	d->measured_s = d->other_measured_s = d->oncpu_frac = NAN;
	int64_t swaps = e->st.preempt_swap;
	execute(e, v, d, kept, now);
	e->st.phase_swaps += e->st.preempt_swap > swaps;
	return true;
}

/* Runs d's choice for victim v (out of the running batch): its KV to the
 * host or disk, or dropped. */
static void execute(struct allm_engine *e, struct allm_request *v, struct allm_decision *d, int32_t kept,
		    double now)
{
	struct allm_kv_cache *kv = e->kv;
	int32_t n = d->n_blocks, *held = v->seq.blocks + v->seq.n_gone;
	/* the host pool is full but this victim should be there: a lower-priority
	 * swapped request goes to disk instead */
	if (d->choice == ALLM_CHOICE_DISK && allm_block_pool_avail(&kv->cpu) < n && kv->cpu.n_total >= n &&
	    allm_policy_wanted_host(d->reason) && demote_for(e, n, d->priority, now)) {
		d->choice = ALLM_CHOICE_SWAP;
		d->reason = ALLM_REASON_HOST_MADE_ROOM;
	}
	v->pending_rc_s = 0;
	v->pending_oncpu_s = 0;
	struct allm_swap_result res;
	struct allm_err err = {{0}};
	if (d->choice == ALLM_CHOICE_SWAP) {
		double cpu0 = allm_engine_thread_cpu();
		int64_t flt0 = allm_engine_thread_faults();
		if (table(&v->cpu_blocks, n) &&
		    allm_kv_swap_out(kv, v->id, held, n, v->cpu_blocks, &res, NULL) == 0) {
			/* the copies run on this thread: its CPU time is theirs */
			v->pending_oncpu_s = ALLM_MIN(allm_engine_thread_cpu() - cpu0, res.seconds);
			d->parts.faults = allm_engine_thread_faults() - flt0;
			d->parts.runs = res.n_runs;
			v->n_cpu_blocks = n;
			v->seq.n_blocks = v->seq.n_gone; /* the GPU blocks went back to the pool */
			v->pending_swap_out_s = res.seconds;
			allm_predictor_observe_swap(e->pred, ALLM_COPY_D2H, res.bytes, res.n_runs, res.seconds);
			e->st.swap_out_bytes += (int64_t)res.bytes;
			e->st.preempt_swap++;
			v->n_preempt_swap++;
			v->state = ALLM_REQ_SWAPPED;
			/* a phase swap's other path is a smaller chunk, not a recompute */
			if (e->cfg.probe_other && isnan(d->pred_chunk_s))
				probe_recompute(e, d, kept);
			return pushed(e, &e->swapped, v, d);
		}
		/* the copy failed: dropping the KV loses nothing but time */
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = ALLM_REASON_SWAP_FAILED;
	} else if (d->choice == ALLM_CHOICE_DISK) {
		if (table(&v->disk_blocks, n) &&
		    allm_kv_disk_out(kv, v->id, held, n, v->disk_blocks, &res, &err) == 0) {
			v->n_disk_blocks = n;
			v->seq.n_blocks = v->seq.n_gone;
			v->pending_swap_out_s = res.seconds;
			if (res.behind) /* a copy to the stage, as a swap-out is */
				allm_predictor_observe_swap(e->pred, ALLM_COPY_D2H, res.bytes, res.n_runs, res.seconds);
			else
				allm_predictor_observe_disk(e->pred, ALLM_DISK_WRITE, res.bytes, res.n_runs, res.disk.io_seconds);
			e->st.disk_write_bytes += (int64_t)res.bytes;
			e->st.preempt_disk++;
			allm_predictor_observe_disk_outcome(e->pred, false, now);
			v->n_preempt_swap++;
			v->state = ALLM_REQ_SWAPPED;
			return pushed(e, &e->swapped, v, d);
		}
		/* ENOSPC, EIO: the KV is still on the device; drop it instead */
		note(e, "request %lld: disk write failed (%s): recomputing instead", (long long)v->id,
		     err.msg[0] ? err.msg : "out of memory");
		e->st.disk_fallbacks++;
		allm_predictor_observe_disk_outcome(e->pred, true, now); /* the next victims recompute */
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = ALLM_REASON_DISK_WRITE_FAILED;
	}
	/* a prefill whose request gave at most its first token since it was
	 * admitted bought nothing: the thrash fair must avoid */
	if (allm_request_n_generated(v) - v->gen_at_admit <= 1)
		e->st.wasted_prefill_tokens += v->seq.n_cached;
	if (e->cfg.probe_other && d->choice == ALLM_CHOICE_RECOMPUTE)
		probe_swap(e, v, d);
	allm_seq_release(&v->seq, kv);
	e->st.preempt_recompute++;
	v->n_preempt_recompute++;
	v->state = ALLM_REQ_WAITING;
	pushed(e, &e->waiting, v, d);
}

/* The end of r's swap-in, however its copy went (rc, res, err): it joins the
 * running batch, or a failed disk read sends it to recompute. */
static void swapped_in(struct allm_engine *e, struct allm_request *r, bool disk, int32_t n, int rc,
		       const struct allm_swap_result *res, const struct allm_err *err, double now)
{
	if (rc && disk && rc != -ENOSPC) {
		/* EIO or a short read: the copy on disk is not to be trusted; the
		 * tokens are, and a re-prefill rebuilds the KV bit for bit */
		note(e, "request %lld: disk read failed (%s): recomputing instead", (long long)r->id,
		     err->msg);
		e->st.disk_fallbacks++;
		allm_predictor_observe_disk_outcome(e->pred, true, now);
		allm_engine_drop_blocks(e, r);
		r->seq.n_cached = 0;
		r->state = ALLM_REQ_WAITING;
		r->n_preempt_swap--;
		r->n_preempt_recompute++;
		e->st.preempt_disk--;
		e->st.preempt_recompute++;
		struct allm_decision *d = allm_engine_pending_decision(e, r);
		if (d) {
			d->choice = ALLM_CHOICE_RECOMPUTE;
			d->reason = ALLM_REASON_DISK_READ_FAILED;
		}
		if (allm_rq_push(&e->waiting, r))
			allm_engine_retire(e, r, ALLM_END_ERROR, -ENOMEM, "out of memory");
		return;
	}
	if (rc) {
		allm_engine_retire(e, r, ALLM_END_ERROR, rc, err->msg); /* the swap-in's errno */
		return;
	}
	r->seq.n_blocks = r->seq.n_gone + n; /* back after the entries its window passed */
	if (disk) {
		allm_predictor_observe_disk_outcome(e->pred, false, now);
		r->n_disk_blocks = 0;
		/* the disk model learns from what came from the file, its I/O alone
		 * (not a read ahead that shared the disk with other I/O: it has no
		 * time of its own); blocks whose writes behind were still in flight
		 * came from the stage, a copy */
		const struct allm_kv_disk_io_stat *st = &res->disk;
		uint64_t staged = (uint64_t)st->staged * e->kv->block_bytes;
		if (res->bytes > staged && !st->io_shared)
			allm_predictor_observe_disk(e->pred, ALLM_DISK_READ, res->bytes - staged, res->n_runs, st->io_seconds);
		if (staged)
			allm_predictor_observe_swap(e->pred, ALLM_COPY_H2D, staged, st->staged, st->staged_seconds);
		e->st.disk_stage_hits += st->staged;
		e->st.disk_read_bytes += (int64_t)res->bytes;
	} else {
		r->n_cpu_blocks = 0;
		allm_predictor_observe_swap(e->pred, ALLM_COPY_H2D, res->bytes, res->n_runs, res->seconds);
		e->st.swap_in_bytes += (int64_t)res->bytes;
	}
	r->chunk = 0; /* a prefill swapped out mid-way: the step gives it a chunk (chunk_swapped_in) */
	allm_engine_admitted(e, r, now);
	/* the decision's cost: what the steps waited for (a read ahead overlapped
	 * with a step costs only its tail) */
	allm_engine_attach_measured(e, r, r->pending_swap_out_s + res->seconds);
	if (allm_rq_push(&e->running, r))
		allm_engine_retire(e, r, ALLM_END_ERROR, -ENOMEM, "out of memory");
}

void allm_engine_swap_in(struct allm_engine *e, struct allm_request *r, double now)
{
	struct allm_swap_result res = {0};
	struct allm_err err = {{0}};
	bool disk = r->n_disk_blocks > 0;
	int32_t n = disk ? r->n_disk_blocks : r->n_cpu_blocks;
	allm_rq_remove(&e->swapped, r);
	/* its block table still has room for the n blocks it held, after those its
	 * window passed */
	int32_t *to = r->seq.blocks + r->seq.n_gone;
	ALLM_ASSERT(r->seq.cap_blocks >= r->seq.n_gone + n);
	double cpu0 = allm_engine_thread_cpu();
	int64_t flt0 = allm_engine_thread_faults();
	int rc = disk ? allm_kv_disk_in(e->kv, r->id, r->disk_blocks, n, to, &res, &err)
		      : allm_kv_swap_in(e->kv, r->id, r->cpu_blocks, n, to, &res, &err);
	struct allm_decision *d = rc ? NULL : allm_engine_pending_decision(e, r);
	if (!rc)
		r->pending_oncpu_s += ALLM_MIN(allm_engine_thread_cpu() - cpu0, res.seconds);
	if (d) {
		d->parts.faults += allm_engine_thread_faults() - flt0;
		d->parts.runs += res.n_runs;
	}
	swapped_in(e, r, disk, n, rc, &res, &err, now);
}

bool allm_engine_load_start(struct allm_engine *e, struct allm_request *r, double now)
{
	struct allm_err err = {{0}};
	int32_t n = r->n_disk_blocks, ticket = -1;
	if (n <= 0)
		return false;
	ALLM_ASSERT(r->seq.cap_blocks >= r->seq.n_gone + n);
	int rc = allm_kv_disk_in_start(e->kv, r->id, r->disk_blocks, n, r->seq.blocks + r->seq.n_gone, &ticket,
				       &err);
	if (rc == -EAGAIN)
		return false;
	allm_rq_remove(&e->swapped, r);
	if (rc) { /* nothing in flight: ends now, as a failed read does */
		swapped_in(e, r, true, n, rc, NULL, &err, now);
		return true;
	}
	r->load_ticket = ticket;
	e->st.disk_reads_ahead++;
	if (allm_rq_push(&e->loading, r)) {
		allm_engine_load_finish(e, r, now, false);
		allm_engine_retire(e, r, ALLM_END_ERROR, -ENOMEM, "out of memory");
	}
	return true;
}

void allm_engine_load_finish(struct allm_engine *e, struct allm_request *r, double now, bool join)
{
	struct allm_swap_result res = {0};
	struct allm_err err = {{0}};
	int32_t n = r->n_disk_blocks;
	ALLM_ASSERT(r->load_ticket >= 0);
	allm_rq_remove(&e->loading, r);
	int rc = allm_kv_disk_in_wait(e->kv, r->id, r->disk_blocks, n, r->seq.blocks + r->seq.n_gone,
				      r->load_ticket, &res, &err);
	r->load_ticket = -1;
	if (join) {
		swapped_in(e, r, true, n, rc, &res, &err, now);
	} else if (!rc) { /* retired while its read was in flight: the blocks are its own again */
		r->seq.n_blocks = r->seq.n_gone + n;
		r->n_disk_blocks = 0;
	}
}
