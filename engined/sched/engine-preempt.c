/* Alg. 1's choice for one victim and its execution (DESIGN §6): swap its KV to
 * the host pool, swap it to disk (the third tier, when there is one), or drop
 * it and recompute later, from the predicted cost of each (`adaptive`), the
 * tier order host > disk > recompute (`swap`) or always recompute; and the way
 * back in. A failed copy or disk I/O costs time, never the request: it falls
 * back to recompute. Which request is the victim is engine-step.c's business. */
#include "engine-internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static struct allm_decision *record(struct allm_engine *e)
{
	struct allm_decision *d = &e->dlog[e->n_decisions % ALLM_ENGINE_DECISIONS];
	memset(d, 0, sizeof(*d));
	d->seq_no = e->n_decisions++;
	d->measured_s = NAN;
	return d;
}

struct allm_decision *allm_engine_pending_decision(struct allm_engine *e, struct allm_request *r)
{
	if (r->pending_decision < 0 || r->pending_decision < e->n_decisions - ALLM_ENGINE_DECISIONS)
		return NULL;
	struct allm_decision *d = &e->dlog[r->pending_decision % ALLM_ENGINE_DECISIONS];
	return d->seq_no == r->pending_decision ? d : NULL;
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

/* Alg. 1's choice for a victim of n blocks, and why (DESIGN §6's tables). */
static void choose(const struct allm_engine *e, struct allm_decision *d, int32_t n, double now)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(e->kv);
	bool failing = dp && disk_failing(e, now);
	bool host = e->kv->cpu.n_free >= n && n > 0, disk = dp && !failing && dp->n_free >= n && n > 0;
	switch (e->cfg.preempt) {
	case ALLM_PREEMPT_RECOMPUTE:
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = "policy recompute";
		return;
	case ALLM_PREEMPT_SWAP:
		d->choice = host ? ALLM_CHOICE_SWAP : disk ? ALLM_CHOICE_DISK : ALLM_CHOICE_RECOMPUTE;
		d->reason = host ? "policy swap" : disk ? "policy swap, CPU pool full: disk"
			    : failing ? "policy swap, CPU pool full, disk failing"
			    : dp ? "policy swap, CPU and disk pools full" : "policy swap, CPU pool full";
		return;
	default:
		break;
	}
	if (!dp) {
		/* the paper's two-way choice */
		if (d->pred_swap_s < d->pred_recompute_s) {
			d->choice = host ? ALLM_CHOICE_SWAP : ALLM_CHOICE_RECOMPUTE;
			d->reason = host ? "swap cheaper" : "swap cheaper, CPU pool full";
		} else {
			d->choice = ALLM_CHOICE_RECOMPUTE;
			d->reason = "recompute cheaper";
		}
		return;
	}
	/* three tiers: the cheapest that has room */
	bool host_best = d->pred_swap_s <= d->pred_disk_s && d->pred_swap_s < d->pred_recompute_s;
	if (host && host_best) {
		d->choice = ALLM_CHOICE_SWAP;
		d->reason = "swap cheapest";
	} else if (disk && d->pred_disk_s < d->pred_recompute_s) {
		d->choice = ALLM_CHOICE_DISK;
		d->reason = host_best ? "swap cheapest, CPU pool full: disk" : "disk cheapest";
	} else {
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = d->pred_recompute_s <= ALLM_MIN(d->pred_swap_s, d->pred_disk_s) ? "recompute cheapest"
			    : failing ? "swap cheaper, CPU pool full, disk failing"
				      : "swap cheaper, CPU and disk pools full";
	}
}

/* Makes room in the host pool for a victim of n blocks by moving swapped
 * requests of lower priority to disk (they return later, so the slower tier
 * costs them least). Returns whether the victim now fits. */
static bool demote_for(struct allm_engine *e, int32_t n, double priority, double now)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(e->kv);
	while (e->kv->cpu.n_free < n && !disk_failing(e, now)) {
		struct allm_request *low = NULL;
		for (int32_t i = 0; i < e->swapped.n; i++) {
			struct allm_request *r = e->swapped.v[i];
			if (r->n_cpu_blocks > 0 && allm_engine_priority(r, now) < priority &&
			    (!low || allm_engine_priority(r, now) < allm_engine_priority(low, now)))
				low = r;
		}
		if (!low || !dp || dp->n_free < low->n_cpu_blocks || !table(&low->disk_blocks, low->n_cpu_blocks))
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
		allm_predictor_observe_disk(e->pred, 0, res.bytes, res.n_runs, res.disk.io_seconds);
		e->st.disk_write_bytes += (int64_t)res.bytes;
		e->st.demotions++;
		e->st.preempt_swap--;
		e->st.preempt_disk++;
		struct allm_decision *d = allm_engine_pending_decision(e, low);
		if (d) {
			d->choice = ALLM_CHOICE_DISK;
			d->reason = "swapped, then demoted to disk";
		}
	}
	return e->kv->cpu.n_free >= n;
}

static void pushed(struct allm_engine *e, struct allm_rq_vec *q, struct allm_request *v,
		   struct allm_decision *d)
{
	v->pending_decision = d->seq_no;
	if (e->ev.on_decision)
		e->ev.on_decision(e->ev.user, d, false);
	if (allm_rq_push(q, v))
		allm_engine_retire(e, v, ALLM_END_ERROR, "out of memory");
}

void allm_engine_preempt(struct allm_engine *e, struct allm_request *v, double now)
{
	struct allm_kv_cache *kv = e->kv;
	/* a chunked re-prefill cut short: its earlier decision cost what it got */
	if (v->pending_decision >= 0)
		allm_engine_attach_measured(e, v, v->pending_rc_s);
	int32_t n = v->seq.n_blocks;
	uint64_t bytes = (uint64_t)n * kv->block_bytes;
	/* the coalesced copies a swap takes: runs of its block table (the other
	 * side's blocks come off a stack, so they are mostly consecutive) */
	int32_t runs = allm_kv_count_runs(v->seq.blocks, NULL, n);
	struct allm_decision *d = record(e);
	d->time = now;
	d->req_id = v->id;
	d->tag = v->tag;
	d->n_tokens = v->seq.n_tokens;
	d->n_blocks = n;
	d->priority = allm_engine_priority(v, now);
	d->pred_swap_s = allm_predict_swap(e->pred, 0, bytes, runs) +
			 allm_predict_swap(e->pred, 1, bytes, runs);
	/* a disk swap is written from and read into device blocks (staged through
	 * host memory on a GPU; the disk model's timings include that); a write
	 * that goes behind costs the step its copy to the stage, which is what the
	 * swap model's out direction prices (on a GPU a device -> host copy into
	 * the disk tier's pinned stage, as a swap-out's into the host pool) */
	d->pred_disk_s = NAN;
	if (kv->disk)
		d->pred_disk_s = (allm_kv_disk_behind_room(kv, n) ? allm_predict_swap(e->pred, 0, bytes, runs)
								  : allm_predict_disk(e->pred, 0, bytes, runs)) +
				 allm_predict_disk(e->pred, 1, bytes, runs);
	/* recompute re-prefills everything it had: prompt + generated so far; with
	 * chunked prefill that rides in steps that run anyway, so it costs what it
	 * adds to them */
	d->pred_recompute_s = e->cfg.chunked_prefill
				      ? allm_predict_recompute_marginal(e->pred, v->seq.n_tokens)
				      : allm_predict_recompute(e->pred, v->seq.n_tokens);
	choose(e, d, n, now);
	/* the host pool is full but this victim should be there: a lower-priority
	 * swapped request goes to disk instead */
	if (d->choice == ALLM_CHOICE_DISK && kv->cpu.n_free < n && kv->cpu.n_total >= n &&
	    (e->cfg.preempt == ALLM_PREEMPT_SWAP || !strncmp(d->reason, "swap cheapest", 13)) &&
	    demote_for(e, n, d->priority, now)) {
		d->choice = ALLM_CHOICE_SWAP;
		d->reason = "host pool made room: a lower-priority swap went to disk";
	}
	v->pending_rc_s = 0;
	struct allm_swap_result res;
	struct allm_err err = {{0}};
	if (d->choice == ALLM_CHOICE_SWAP) {
		if (table(&v->cpu_blocks, n) &&
		    allm_kv_swap_out(kv, v->id, v->seq.blocks, n, v->cpu_blocks, &res, NULL) == 0) {
			v->n_cpu_blocks = n;
			v->seq.n_blocks = 0; /* the GPU blocks went back to the pool */
			v->pending_swap_out_s = res.seconds;
			allm_predictor_observe_swap(e->pred, 0, res.bytes, res.n_runs, res.seconds);
			e->st.swap_out_bytes += (int64_t)res.bytes;
			e->st.preempt_swap++;
			v->n_preempt_swap++;
			v->state = ALLM_REQ_SWAPPED;
			return pushed(e, &e->swapped, v, d);
		}
		/* the copy failed: dropping the KV loses nothing but time */
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = "swap failed";
	} else if (d->choice == ALLM_CHOICE_DISK) {
		if (table(&v->disk_blocks, n) &&
		    allm_kv_disk_out(kv, v->id, v->seq.blocks, n, v->disk_blocks, &res, &err) == 0) {
			v->n_disk_blocks = n;
			v->seq.n_blocks = 0;
			v->pending_swap_out_s = res.seconds;
			if (res.behind) /* a copy to the stage, as a swap-out is */
				allm_predictor_observe_swap(e->pred, 0, res.bytes, res.n_runs, res.seconds);
			else
				allm_predictor_observe_disk(e->pred, 0, res.bytes, res.n_runs, res.disk.io_seconds);
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
		d->reason = "disk write failed";
	}
	/* a prefill whose request gave at most its first token since it was
	 * admitted bought nothing: the thrash fair must avoid */
	if (allm_request_n_generated(v) - v->gen_at_admit <= 1)
		e->st.wasted_prefill_tokens += v->seq.n_cached;
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
			d->reason = "disk read failed";
		}
		if (allm_rq_push(&e->waiting, r))
			allm_engine_retire(e, r, ALLM_END_ERROR, "out of memory");
		return;
	}
	if (rc) {
		allm_engine_retire(e, r, ALLM_END_ERROR, err->msg);
		return;
	}
	r->seq.n_blocks = n;
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
			allm_predictor_observe_disk(e->pred, 1, res->bytes - staged, res->n_runs, st->io_seconds);
		if (staged)
			allm_predictor_observe_swap(e->pred, 1, staged, st->staged, st->staged_seconds);
		e->st.disk_stage_hits += st->staged;
		e->st.disk_read_bytes += (int64_t)res->bytes;
	} else {
		r->n_cpu_blocks = 0;
		allm_predictor_observe_swap(e->pred, 1, res->bytes, res->n_runs, res->seconds);
		e->st.swap_in_bytes += (int64_t)res->bytes;
	}
	r->chunk = 0; /* a prefill swapped out mid-way finishes its prompt next step */
	allm_engine_admitted(e, r, now);
	/* the decision's cost: what the steps waited for (a read ahead overlapped
	 * with a step costs only its tail) */
	allm_engine_attach_measured(e, r, r->pending_swap_out_s + res->seconds);
	if (allm_rq_push(&e->running, r))
		allm_engine_retire(e, r, ALLM_END_ERROR, "out of memory");
}

void allm_engine_swap_in(struct allm_engine *e, struct allm_request *r, double now)
{
	struct allm_swap_result res = {0};
	struct allm_err err = {{0}};
	bool disk = r->n_disk_blocks > 0;
	int32_t n = disk ? r->n_disk_blocks : r->n_cpu_blocks;
	allm_rq_remove(&e->swapped, r);
	/* its block table still has room for the n blocks it held */
	ALLM_ASSERT(r->seq.cap_blocks >= n);
	int rc = disk ? allm_kv_disk_in(e->kv, r->id, r->disk_blocks, n, r->seq.blocks, &res, &err)
		      : allm_kv_swap_in(e->kv, r->id, r->cpu_blocks, n, r->seq.blocks, &res, &err);
	swapped_in(e, r, disk, n, rc, &res, &err, now);
}

bool allm_engine_load_start(struct allm_engine *e, struct allm_request *r, double now)
{
	struct allm_err err = {{0}};
	int32_t n = r->n_disk_blocks, ticket = -1;
	if (n <= 0)
		return false;
	ALLM_ASSERT(r->seq.cap_blocks >= n);
	int rc = allm_kv_disk_in_start(e->kv, r->id, r->disk_blocks, n, r->seq.blocks, &ticket, &err);
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
		allm_engine_retire(e, r, ALLM_END_ERROR, "out of memory");
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
	int rc = allm_kv_disk_in_wait(e->kv, r->id, r->disk_blocks, n, r->seq.blocks, r->load_ticket, &res,
				      &err);
	r->load_ticket = -1;
	if (join) {
		swapped_in(e, r, true, n, rc, &res, &err, now);
	} else if (!rc) { /* retired while its read was in flight: the blocks are its own again */
		r->seq.n_blocks = n;
		r->n_disk_blocks = 0;
	}
}
