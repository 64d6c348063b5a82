/* Shared by the scheduler tests: a real engine on the CPU backend with the tiny
 * dummy model, a fake clock (advanced by a fixed amount per step, so priorities
 * are exact), a predictor calibrated from fake timing formulas (so Alg. 1's
 * comparison is known in advance), and a step wrapper that checks the invariants
 * of DESIGN §5/§6 after every step:
 *  - both pools pass allm_block_pool_check; used blocks = blocks in request tables,
 *    each owned by its request;
 *  - every Alg. 1 victim is the lowest-priority (fair) / newest (fcfs) request left
 *    running when it is chosen, its recorded priority is (now - arrival)/len, both
 *    predictions are finite and > 0, and swap/recompute follows the policy table;
 *  - a step either prefills or decodes: a prefill step gives no token to the
 *    requests that were running; a decode step gives exactly one to each;
 *  - Alg. 2 admits one group only (swapped or waiting), as a prefix of the queue
 *    in priority (fair) / arrival (fcfs) order; fcfs never prefills while anything
 *    is swapped.
 * With chunked prefill, admission headroom or aging on (fx_opts), the checks
 * that describe the paper's step structure relax to what still holds: a step may
 * decode and prefill; a request that was decoding and keeps running gets exactly
 * one token; a prefill in progress gets none until its last chunk; aged
 * requests are admitted first and are victims only when nothing else is.
 * Each test file includes this once. */
#ifndef ALLM_TEST_ENGINE_FIXTURE_H
#define ALLM_TEST_ENGINE_FIXTURE_H

#include "engine-calib.h"
#include "engine.h"
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fx_failures;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			fx_failures++; \
			if (fx_failures < 40) { \
				fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
				fprintf(stderr, __VA_ARGS__); \
				fputc('\n', stderr); \
			} \
		} \
	} while (0)

/* --- fake predictor ----------------------------------------------------------------- */

enum fx_pred {
	FX_PRED_SWAP_CHEAP, /* swap ~1e-5 s, recompute ~1 s: Alg. 1 wants to swap */
	FX_PRED_RC_CHEAP, /* recompute ~1e-5 s, swap ~1 s: Alg. 1 wants to recompute */
	FX_PRED_CROSSOVER, /* recompute 7.5e-6 n^2, swap 2e-4/run + 2.5e-4 n: victims shorter
			    * than ~35-40 tokens recompute, longer ones swap */
};

struct fx_calib {
	enum fx_pred mode;
	uint64_t block_bytes;
	int32_t block_size;
};

static double fx_time_prefill(void *user, int32_t n_seqs, int32_t len)
{
	const struct fx_calib *c = user;
	double n = len;
	switch (c->mode) {
	case FX_PRED_SWAP_CHEAP: return n_seqs * (0.5 + 1e-2 * n + 1e-5 * n * n);
	case FX_PRED_RC_CHEAP: return n_seqs * (1e-5 + 1e-8 * n);
	default: return n_seqs * (7.5e-6 * n * n);
	}
}

/* The disk tier: dearer than the host link, cheaper than recomputing long
 * sequences (CROSSOVER: host < disk < recompute from ~45 tokens on). */
static double fx_time_disk(void *user, enum allm_disk_dir dir, int32_t n_blocks, int32_t n_runs)
{
	const struct fx_calib *c = user;
	double bytes = (double)n_blocks * (double)c->block_bytes;
	(void)dir;
	switch (c->mode) {
	case FX_PRED_SWAP_CHEAP: return 5e-6 * n_runs + bytes * 1e-9;
	case FX_PRED_RC_CHEAP: return 1.0 * n_runs + bytes * 1e-4;
	default: return 1.5e-4 * n_runs + (double)n_blocks * c->block_size * 1.5e-4;
	}
}

static double fx_time_swap(void *user, enum allm_copy_dir dir, int32_t n_blocks, int32_t n_runs)
{
	const struct fx_calib *c = user;
	double bytes = (double)n_blocks * (double)c->block_bytes;
	(void)dir;
	switch (c->mode) {
	case FX_PRED_SWAP_CHEAP: return 1e-6 * n_runs + bytes * 1e-10;
	case FX_PRED_RC_CHEAP: return 0.5 * n_runs + bytes * 1e-4;
	default: return 1e-4 * n_runs + (double)n_blocks * c->block_size * 1.25e-4;
	}
}

/* --- the fixture --------------------------------------------------------------------- */

struct fx_req {
	int64_t id; /* engine id */
	double arrival;
	int32_t n_prompt, max_tokens;
	int32_t *gen; /* generated ids */
	int32_t n_gen, cap_gen;
	bool done;
	enum allm_end finish;
	int32_t status; /* the result's -errno (ALLM_END_ERROR) */
	char error[160]; /* and its words */
	int64_t submit_step, first_token_step, finish_step;
	int32_t n_swap, n_recompute; /* preemptions seen by on_finish */
	/* per-step snapshot */
	int pre_state, post_state; /* enum allm_req_state; FINISHED when done */
	int32_t pre_tokens, pre_gen;
	int32_t hint; /* after a step: the cached tokens its order counted off (waiting) */
	bool pre_readmit; /* before a step: admitted before (its hint does not count) */
	bool pre_decoding; /* running with only its last token uncached */
	bool pre_disk; /* swapped to disk */
};

struct fx_dec {
	struct allm_decision d;
	bool measured, dropped;
};

struct fx {
	allm_backend_t *be;
	struct allm_model *m;
	struct allm_kv_cache *kv;
	struct allm_predictor *pred, frozen;
	bool freeze; /* restore the calibrated predictor before each step and after
		      * each decision event: Alg. 1 always compares the fake costs */
	struct allm_engine *e;
	enum allm_preempt_mode preempt; /* mirrors the engine's setting */
	enum allm_sched_mode sched;
	double now, dt;
	int64_t step;
	struct fx_req *req;
	int n_req, cap_req;
	struct fx_dec *dec;
	int n_dec, cap_dec;
	int n_measured;
	int64_t n_swap_choice, n_rc_choice, n_disk_choice;
	int64_t n_reason_full; /* "... CPU pool full" */
	int64_t n_restore_dec, n_restore_rc, n_restore_restored; /* restore-or-recompute decisions */
	int max_victims_per_step;
	int32_t min_tokens; /* > 0: the next submits stop at EOS, not before this many */
	int32_t stop_id; /* != 0: the next submits stop at EOS, and (> 0) at this token */
	int64_t n_prefill_steps, n_decode_steps, n_swapin_steps;
	int64_t n_steps_both_queues; /* steps that began with swapped and waiting requests */
	bool paper; /* no chunking, headroom or aging: the paper's step structure */
	bool disk; /* a disk tier: Alg. 1's three-way table */
	char disk_dir[64];
	bool chunked;
	bool verbose;
	/* cancel, from a token callback mid-step, a request whose disk read runs
	 * ahead (the first one seen); its tag, or -1 */
	bool cancel_loading;
	int cancelled_loading;
};

static double fx_clock(void *user)
{
	return ((struct fx *)user)->now;
}

static double fx_pri(double now, double arrival, int32_t len)
{
	return (now - arrival) / (double)ALLM_MAX(len, 1);
}

static struct fx_req *fx_req_of(struct fx *f, uint64_t tag)
{
	ALLM_ASSERT(tag < (uint64_t)f->n_req);
	return &f->req[tag];
}

static void fx_drop_pending(struct fx *f, int64_t req_id);

/* fx.cancel_loading: the first request seen with its read ahead in flight is
 * cancelled (an engine's retire must wait for the read, then free both pools). */
static void fx_cancel_loading(struct fx *f)
{
	static const struct allm_request *v[1024];
	int n = allm_engine_list(f->e, ALLM_REQ_SWAPPED, v, 1024);
	for (int i = 0; i < n; i++)
		if (v[i]->load_ticket >= 0) {
			int64_t id = v[i]->id;
			f->cancelled_loading = (int)v[i]->tag;
			fx_drop_pending(f, id);
			CHECK(allm_engine_cancel(f->e, id) == 0, "cancel of a request reading ahead");
			return;
		}
}

static void fx_on_token(void *user, const struct allm_token_out *t)
{
	struct fx *f = user;
	struct fx_req *q = fx_req_of(f, t->tag);
	int32_t tok = t->token;
	if (f->cancel_loading && f->cancelled_loading < 0)
		fx_cancel_loading(f);
	if (q->n_gen == q->cap_gen) {
		q->cap_gen = ALLM_MAX(16, q->cap_gen * 2);
		q->gen = realloc(q->gen, (size_t)q->cap_gen * sizeof(int32_t));
	}
	q->gen[q->n_gen++] = tok;
	if (q->first_token_step < 0)
		q->first_token_step = f->step;
	CHECK(t->index == q->n_gen - 1, "request %d: token %d, expected %d", (int)t->tag, t->index, q->n_gen - 1);
}

static void fx_on_finish(void *user, const struct allm_result *r)
{
	struct fx *f = user;
	struct fx_req *q = fx_req_of(f, r->tag);
	CHECK(!q->done, "request %d finished twice", (int)r->tag);
	CHECK(r->n_generated == q->n_gen && r->n_prompt == q->n_prompt &&
		      (!q->n_gen || !memcmp(r->generated, q->gen, (size_t)q->n_gen * sizeof(int32_t))),
	      "request %d: the result's %d tokens are not the %d it streamed", (int)r->tag, r->n_generated, q->n_gen);
	q->done = true;
	q->finish = r->end;
	q->status = r->status;
	snprintf(q->error, sizeof(q->error), "%s", r->error);
	CHECK((r->end == ALLM_END_ERROR) == (r->status < 0), "request %d: end %d with status %d", (int)r->tag,
	      (int)r->end, r->status);
	q->finish_step = f->step;
	q->n_swap = r->n_preempt_swap;
	q->n_recompute = r->n_preempt_recompute;
	q->post_state = ALLM_REQ_FINISHED;
	if (r->end == ALLM_END_ERROR && f->verbose)
		fprintf(stderr, "request %d failed: %s\n", (int)r->tag, r->error);
}

static inline const struct allm_request *fx_live(struct fx *f, int tag);

static bool fx_victim_before(struct fx *f, double now, const struct allm_request *v,
			     const struct allm_request *r)
{
	/* v may be preempted before r: lower priority (fair) / later arrival (fcfs) */
	double av = f->req[v->tag].arrival, ar = f->req[r->tag].arrival;
	if (f->sched == ALLM_SCHED_FCFS)
		return av > ar || (av == ar && v->id > r->id);
	double pv = fx_pri(now, av, v->seq.n_tokens), pr = fx_pri(now, ar, r->seq.n_tokens);
	return pv < pr || (pv == pr && v->id > r->id);
}

/* DESIGN §6's three-tier table, for engines with a disk tier. Free blocks before
 * the choice = now + what the chosen copy took. */
static void fx_check_three_tiers(struct fx *f, const struct allm_decision *d)
{
	struct allm_block_pool *dp = allm_kv_disk_blocks(f->kv);
	int32_t n = d->n_blocks;
	bool host = n > 0 && allm_block_pool_avail(&f->kv->cpu) + (d->choice == ALLM_CHOICE_SWAP ? n : 0) >= n;
	bool disk = n > 0 && allm_block_pool_avail(dp) + (d->choice == ALLM_CHOICE_DISK ? n : 0) >= n;
	double ps = d->pred_swap_s, pd = d->pred_disk_s, pr = d->pred_recompute_s;
	const char *reason = allm_reason_text(d->reason);
	enum allm_choice want;
	const char *why;
	CHECK(isfinite(pd) && pd > 0, "decision %lld: disk prediction %g", (long long)d->seq_no, pd);
	if (d->reason == ALLM_REASON_DISK_WRITE_FAILED || d->reason == ALLM_REASON_HOST_MADE_ROOM) {
		/* a fault fell back, or a demotion made the host pool take it */
		CHECK(d->choice == (d->reason == ALLM_REASON_DISK_WRITE_FAILED ? ALLM_CHOICE_RECOMPUTE : ALLM_CHOICE_SWAP),
		      "decision %lld: \"%s\" with choice %d", (long long)d->seq_no, reason, d->choice);
		goto count;
	}
	switch (f->preempt) {
	case ALLM_PREEMPT_RECOMPUTE:
		want = ALLM_CHOICE_RECOMPUTE, why = "policy recompute";
		break;
	case ALLM_PREEMPT_SWAP:
		want = host ? ALLM_CHOICE_SWAP : disk ? ALLM_CHOICE_DISK : ALLM_CHOICE_RECOMPUTE;
		why = host ? "policy swap" : disk ? "policy swap, CPU pool full: disk"
					   : "policy swap, CPU and disk pools full";
		break;
	default: {
		bool host_best = ps <= pd && ps < pr;
		if (host && host_best)
			want = ALLM_CHOICE_SWAP, why = "swap cheapest";
		else if (disk && pd < pr)
			want = ALLM_CHOICE_DISK,
			why = host_best ? "swap cheapest, CPU pool full: disk" : "disk cheapest";
		else
			want = ALLM_CHOICE_RECOMPUTE,
			why = pr <= ALLM_MIN(ps, pd) ? "recompute cheapest"
						     : "swap cheaper, CPU and disk pools full";
	}
	}
	CHECK(d->choice == want && !strcmp(reason, why),
	      "decision %lld (%s, %d blocks, host %d disk %d, swap %g disk %g recompute %g): %s "
	      "\"%s\", expected %s \"%s\"",
	      (long long)d->seq_no, allm_preempt_name(f->preempt), n, host, disk, ps, pd, pr,
	      allm_choice_name(d->choice), reason, allm_choice_name(want), why);
count:
	if (d->choice == ALLM_CHOICE_RECOMPUTE)
		f->n_rc_choice++;
	else
		f->n_swap_choice++;
	if (d->choice == ALLM_CHOICE_DISK)
		f->n_disk_choice++;
}

/* A cached prefix found in a lower tier: the policy's choice from its
 * predictions (adaptive: the cheaper; swap: restore; recompute: never). */
static void fx_check_restore(struct fx *f, const struct allm_decision *d)
{
	f->n_restore_dec++;
	CHECK(d->n_blocks > 0 && d->n_restored >= 0 && d->n_restored <= d->n_blocks &&
		      d->tier > ALLM_KV_TIER_DEVICE && d->tier < ALLM_KV_TIER_COUNT,
	      "restore decision %lld: %d of %d blocks, tier %d", (long long)d->seq_no, d->n_restored, d->n_blocks,
	      d->tier);
	CHECK(isfinite(d->pred_swap_s) && d->pred_swap_s > 0 && isfinite(d->pred_recompute_s) &&
		      d->pred_recompute_s > 0 && isfinite(d->pred_disk_s),
	      "restore decision %lld predictions restore %g recompute %g choice %g", (long long)d->seq_no,
	      d->pred_swap_s, d->pred_recompute_s, d->pred_disk_s);
	if (d->reason == ALLM_REASON_RESTORE_FAILED)
		return;
	enum allm_choice want = d->n_restored == d->n_blocks ? ALLM_CHOICE_RESTORE
				: d->n_restored == 0 ? ALLM_CHOICE_RECOMPUTE : ALLM_CHOICE_SPLIT;
	CHECK(d->choice == want, "restore decision %lld: %s with %d of %d restored", (long long)d->seq_no,
	      allm_choice_name(d->choice), d->n_restored, d->n_blocks);
	switch (f->preempt) {
	case ALLM_PREEMPT_RECOMPUTE:
		CHECK(d->choice == ALLM_CHOICE_RECOMPUTE, "policy recompute restored a cached prefix");
		break;
	case ALLM_PREEMPT_SWAP:
		CHECK(d->choice == ALLM_CHOICE_RESTORE, "policy swap recomputed a cached prefix");
		break;
	default:
		/* the choice costs no more than either end */
		CHECK(d->pred_disk_s <= d->pred_swap_s * (1 + 1e-9) + 1e-12 &&
			      d->pred_disk_s <= d->pred_recompute_s * (1 + 1e-9) + 1e-12,
		      "adaptive restore decision %lld: chose %g, restore %g, recompute %g", (long long)d->seq_no,
		      d->pred_disk_s, d->pred_swap_s, d->pred_recompute_s);
	}
	if (d->choice == ALLM_CHOICE_RECOMPUTE)
		f->n_restore_rc++;
	else
		f->n_restore_restored++;
}

static void fx_on_decision(void *user, const struct allm_decision *d, bool measured)
{
	struct fx *f = user;
	/* the engine has just fed a real (microsecond) timing to the predictor: undo
	 * it, so the next decision of this step sees the calibrated costs too */
	if (f->freeze)
		*f->pred = f->frozen;
	if (measured) {
		bool found = false;
		for (int i = f->n_dec - 1; i >= 0; i--)
			if (f->dec[i].d.seq_no == d->seq_no) {
				found = true;
				CHECK(!f->dec[i].measured, "decision %lld measured twice", (long long)d->seq_no);
				f->dec[i].measured = true;
				f->dec[i].d.measured_s = d->measured_s;
				f->dec[i].d.oncpu_frac = d->oncpu_frac;
				f->dec[i].d.parts = d->parts;
				f->n_measured++;
				break;
			}
		CHECK(found, "measured cost for an unknown decision %lld", (long long)d->seq_no);
		CHECK(isfinite(d->measured_s) && d->measured_s >= 0, "decision %lld measured %g",
		      (long long)d->seq_no, d->measured_s);
		return;
	}
	if (f->n_dec == f->cap_dec) {
		f->cap_dec = ALLM_MAX(64, f->cap_dec * 2);
		f->dec = realloc(f->dec, (size_t)f->cap_dec * sizeof(*f->dec));
	}
	struct fx_dec *x = &f->dec[f->n_dec++];
	memset(x, 0, sizeof(*x));
	x->d = *d;
	CHECK(f->n_dec == 1 || d->seq_no == f->dec[f->n_dec - 2].d.seq_no + 1, "seq_no %lld",
	      (long long)d->seq_no);
	CHECK(isnan(d->measured_s), "new decision already measured");
	CHECK(d->time == f->now, "decision time %g, clock %g", d->time, f->now);
	ALLM_ASSERT(d->tag < (uint64_t)f->n_req);
	struct fx_req *q = &f->req[d->tag];
	CHECK(q->id == d->req_id, "decision names id %lld, tag %llu is %lld", (long long)d->req_id,
	      (unsigned long long)d->tag, (long long)q->id);
	if (d->kind == ALLM_DECISION_RESTORE) {
		fx_check_restore(f, d);
		return;
	}
	const struct allm_request *victim = fx_live(f, (int)d->tag);
	bool victim_aged = victim && victim->aged;
	double want = fx_pri(d->time, q->arrival, d->n_tokens);
	CHECK(fabs(d->priority - want) <= 1e-12 * fmax(1, fabs(want)),
	      "decision %lld: priority %.17g, (now - arrival)/len = %.17g", (long long)d->seq_no,
	      d->priority, want);
	CHECK(isfinite(d->pred_swap_s) && d->pred_swap_s > 0 && isfinite(d->pred_recompute_s) &&
		      d->pred_recompute_s > 0,
	      "decision %lld predictions swap %g recompute %g", (long long)d->seq_no, d->pred_swap_s,
	      d->pred_recompute_s);
	CHECK(d->reason != ALLM_REASON_NONE, "no reason");
	/* recompute = a prefill of the victim's current length; with the prefix
	 * cache, of the part it does not keep: no more */
	if (f->freeze && !f->chunked && allm_engine_get_config(f->e)->prefix_caching)
		CHECK(d->pred_recompute_s <= allm_predict_recompute(&f->frozen, d->n_tokens),
		      "decision %lld: recompute predicted %g, prefill of %d tokens %g", (long long)d->seq_no,
		      d->pred_recompute_s, d->n_tokens, allm_predict_recompute(&f->frozen, d->n_tokens));
	else if (f->freeze && !f->chunked)
		CHECK(d->pred_recompute_s == allm_predict_recompute(&f->frozen, d->n_tokens),
		      "decision %lld: recompute predicted %g, prefill of %d tokens %g", (long long)d->seq_no,
		      d->pred_recompute_s, d->n_tokens, allm_predict_recompute(&f->frozen, d->n_tokens));

	/* Alg. 1 order: the victim comes before every request still running */
	const struct allm_request *run[512];
	int nr = allm_engine_list(f->e, ALLM_REQ_RUNNING, run, 512);
	struct allm_request vv = {0};
	vv.id = d->req_id;
	vv.tag = d->tag;
	vv.seq.n_tokens = d->n_tokens;
	for (int i = 0; i < nr; i++) {
		CHECK(run[i]->id != d->req_id, "victim still running");
		/* aging: an aged victim means everything left running is aged too, and
		 * an unaged one comes before the unaged rest */
		if (victim_aged) {
			CHECK(run[i]->aged, "aged victim tag %llu preempted while unaged tag %llu runs",
			      (unsigned long long)d->tag, (unsigned long long)run[i]->tag);
			continue;
		}
		if (run[i]->aged)
			continue;
		CHECK(fx_victim_before(f, d->time, &vv, run[i]),
		      "%s: victim tag %llu (arrival %g, len %d, pri %g) preempted while tag %llu "
		      "(arrival %g, len %d, pri %g) keeps running",
		      f->sched == ALLM_SCHED_FCFS ? "fcfs" : "fair", (unsigned long long)d->tag,
		      q->arrival, d->n_tokens, want, (unsigned long long)run[i]->tag,
		      f->req[run[i]->tag].arrival, run[i]->seq.n_tokens,
		      fx_pri(d->time, f->req[run[i]->tag].arrival, run[i]->seq.n_tokens));
	}

	if (f->disk) {
		fx_check_three_tiers(f, d);
		return;
	}
	/* swap or recompute: DESIGN §6's policy table. CPU blocks free before the
	 * choice = now + what a swap took. */
	int32_t cpu_free = allm_block_pool_avail(&f->kv->cpu) + (d->choice == ALLM_CHOICE_SWAP ? d->n_blocks : 0);
	bool fits = d->n_blocks > 0 && cpu_free >= d->n_blocks;
	enum allm_choice want_c;
	const char *want_r;
	switch (f->preempt) {
	case ALLM_PREEMPT_RECOMPUTE:
		want_c = ALLM_CHOICE_RECOMPUTE;
		want_r = "policy recompute";
		break;
	case ALLM_PREEMPT_SWAP:
		want_c = fits ? ALLM_CHOICE_SWAP : ALLM_CHOICE_RECOMPUTE;
		want_r = fits ? "policy swap" : "policy swap, CPU pool full";
		break;
	default:
		if (d->pred_swap_s < d->pred_recompute_s) {
			want_c = fits ? ALLM_CHOICE_SWAP : ALLM_CHOICE_RECOMPUTE;
			want_r = fits ? "swap cheaper" : "swap cheaper, CPU pool full";
		} else {
			want_c = ALLM_CHOICE_RECOMPUTE;
			want_r = "recompute cheaper";
		}
	}
	CHECK(d->choice == want_c && !strcmp(allm_reason_text(d->reason), want_r),
	      "decision %lld (%s, %d blocks, %d CPU free, swap %g s vs recompute %g s): %s \"%s\", "
	      "expected %s \"%s\"",
	      (long long)d->seq_no, allm_preempt_name(f->preempt), d->n_blocks, cpu_free,
	      d->pred_swap_s, d->pred_recompute_s, d->choice == ALLM_CHOICE_SWAP ? "swap" : "recompute",
	      allm_reason_text(d->reason), want_c == ALLM_CHOICE_SWAP ? "swap" : "recompute",
	      want_r);
	if (d->choice == ALLM_CHOICE_SWAP)
		f->n_swap_choice++;
	else
		f->n_rc_choice++;
	if (strstr(allm_reason_text(d->reason), "CPU pool full"))
		f->n_reason_full++;
}

struct fx_opts {
	int32_t block_size;
	int32_t gpu_blocks, cpu_blocks;
	int32_t max_num_seqs, max_num_batched_tokens;
	enum allm_preempt_mode preempt;
	enum allm_sched_mode sched;
	enum fx_pred pred;
	bool no_freeze;
	bool chunked; /* chunked prefill */
	int32_t lookahead; /* admission headroom (fair) */
	double max_wait_factor; /* aging (fair) */
	double overcommit; /* admission by commitment (fair) */
	int32_t disk_blocks; /* > 0: a disk tier in a private temporary directory */
	bool prefix_caching; /* automatic prefix caching (DESIGN §5b) */
	bool probe_other; /* the regret probe: each victim's other path timed too */
};

/* The model and backend, shared by every engine of a test program. */
static allm_backend_t *fx_be;
static struct allm_model *fx_model;

static int fx_global_init(void)
{
	struct allm_err err = {{0}};
	struct allm_model_config cfg;
	struct allm_backend_opts bo = {.n_threads = 1};
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F32};
	/* ALLM_FX_QUANT=q8_0|q4_0|q4_1: the same tests on quantized weights
	 * (tests/meson.build registers such runs) */
	const char *q = getenv("ALLM_FX_QUANT");
	if (q && *q) {
		static const struct { const char *name; enum allm_dtype dt; } qs[] = {
			{"q8_0", ALLM_DTYPE_Q8_0}, {"q4_0", ALLM_DTYPE_Q4_0}, {"q4_1", ALLM_DTYPE_Q4_1},
		};
		size_t i = 0;
		while (i < ALLM_ARRAY_SIZE(qs) && strcmp(q, qs[i].name))
			i++;
		if (i == ALLM_ARRAY_SIZE(qs)) {
			fprintf(stderr, "setup: bad ALLM_FX_QUANT '%s'\n", q);
			return -1;
		}
		lo.wdtype = qs[i].dt;
	}
	if (allm_model_config_preset("tiny", &cfg, &err)) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	/* ALLM_FX_ARCH=mistral|gemma3: the same tests through sliding windows, every
	 * layer local (a window of 8) or Gemma 3's local layers (window 8, every other
	 * layer global, its own RoPE base) with its GELU MLP, norms and scaled
	 * embeddings, so preemption, swaps, recompute, chunked prefill and the prefix
	 * cache are checked with windowed attention too */
	const char *arch = getenv("ALLM_FX_ARCH");
	if (arch && !strcmp(arch, "mistral")) {
		cfg.sliding_window = 8;
	} else if (arch && !strcmp(arch, "gemma3")) {
		cfg.arch = ALLM_ARCH_GEMMA3;
		cfg.act = ALLM_ACT_GELU_TANH;
		cfg.sliding_window = 8;
		cfg.swa_pattern = 2;
		cfg.rope_local_theta = 10000.0f;
		cfg.rope_theta = 1000000.0f;
	} else if (arch && *arch) {
		fprintf(stderr, "setup: bad ALLM_FX_ARCH '%s'\n", arch);
		return -1;
	}
	if (allm_backend_cpu_create(&bo, &fx_be, &err) ||
	    allm_model_dummy(fx_be, &cfg, 1234, &lo, &fx_model, &err)) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static void fx_global_fini(void)
{
	allm_model_free(fx_model);
	allm_backend_destroy(fx_be);
}

static int fx_init(struct fx *f, const struct fx_opts *o)
{
	struct allm_err err = {{0}};
	const struct allm_model_config *c = &fx_model->cfg;
	memset(f, 0, sizeof(*f));
	f->cancelled_loading = -1;
	f->be = fx_be;
	f->m = fx_model;
	f->now = 1000.0;
	f->dt = 1.0;
	f->preempt = o->preempt;
	f->sched = o->sched;
	f->freeze = !o->no_freeze;
	f->chunked = o->chunked;
	f->paper = !o->chunked && o->lookahead == 0 && o->max_wait_factor == 0;
	struct allm_kv_layout lay = {c->n_layers, c->n_kv_heads, c->head_dim, o->block_size,
				     ALLM_DTYPE_F32};
	if (allm_kv_cache_create(f->be, &lay, o->gpu_blocks, o->cpu_blocks, &f->kv, &err))
		goto fail;
	struct allm_kv_env env; /* the tests set the hooks in their environment */
	allm_kv_env_read(&env);
	allm_kv_set_env(f->kv, &env);
	if (o->disk_blocks > 0) {
		char note[512];
		snprintf(f->disk_dir, sizeof(f->disk_dir), "/tmp/allm-fx-disk-XXXXXX");
		if (!mkdtemp(f->disk_dir) ||
		    allm_kv_attach_disk(f->kv, f->disk_dir, o->disk_blocks, note, sizeof(note), &err))
			goto fail;
		f->disk = true;
	}
	struct allm_predictor_key key;
	allm_engine_predictor_key(f->m, f->kv, &key);
	if (allm_predictor_create(&key, &f->pred)) {
		snprintf(err.msg, sizeof(err.msg), "predictor_create");
		goto fail;
	}
	struct fx_calib cal = {o->pred, f->kv->block_bytes, o->block_size};
	struct allm_calib_ops ops = {
		.user = &cal,
		.max_tokens = 256,
		.max_swap_blocks = 64,
		.block_bytes = f->kv->block_bytes,
		.time_prefill = fx_time_prefill,
		.time_swap = fx_time_swap,
	};
	if (allm_predictor_calibrate(f->pred, &ops, &err))
		goto fail;
	if (f->disk) {
		ops.time_disk = fx_time_disk;
		ops.max_disk_blocks = 64;
		if (allm_predictor_calibrate_disk(f->pred, &ops, &err))
			goto fail;
	}
	f->frozen = *f->pred;
	struct allm_engine_config ec = {
		.max_num_seqs = o->max_num_seqs ? o->max_num_seqs : 64,
		.max_num_batched_tokens = o->max_num_batched_tokens ? o->max_num_batched_tokens : 4096,
		.preempt = o->preempt,
		.sched = o->sched,
		.chunked_prefill = o->chunked,
		.admit_lookahead = o->lookahead,
		.max_wait_factor = o->max_wait_factor,
		.admit_overcommit = o->overcommit,
		.prefix_caching = o->prefix_caching,
		.probe_other = o->probe_other,
		.clock = fx_clock,
		.clock_user = f,
	};
	struct allm_engine_events ev = {
		.user = f,
		.on_token = fx_on_token,
		.on_finish = fx_on_finish,
		.on_decision = fx_on_decision,
	};
	if (allm_engine_create(f->m, f->kv, f->pred, &ec, &ev, &f->e, &err))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "fx_init: %s\n", err.msg);
	fx_failures++;
	return -1;
}

static void fx_fini(struct fx *f)
{
	allm_engine_free(f->e);
	allm_predictor_free(f->pred);
	allm_kv_cache_free(f->kv);
	if (f->disk)
		rmdir(f->disk_dir); /* empty: the KV file never had a name */
	for (int i = 0; i < f->n_req; i++)
		free(f->req[i].gen);
	free(f->req);
	free(f->dec);
	memset(f, 0, sizeof(*f));
}

/* Deterministic prompt ids for request `tag`. */
static void fx_prompt(int32_t *ids, int32_t n, uint64_t seed, int32_t vocab)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
	for (int32_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		ids[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
	}
}

/* Submits a greedy, ignore_eos request; returns its tag (index) or -1. arrival 0 =
 * the current clock. prompt NULL = generated from `seed`. */
static int fx_submit_ids(struct fx *f, const int32_t *prompt, int32_t n_prompt, int32_t max_tokens,
			 double arrival)
{
	struct allm_err err = {{0}};
	if (f->n_req == f->cap_req) {
		f->cap_req = ALLM_MAX(64, f->cap_req * 2);
		f->req = realloc(f->req, (size_t)f->cap_req * sizeof(*f->req));
	}
	int tag = f->n_req;
	struct fx_req *q = &f->req[tag];
	memset(q, 0, sizeof(*q));
	q->arrival = arrival > 0 ? arrival : f->now;
	q->n_prompt = n_prompt;
	q->max_tokens = max_tokens;
	q->submit_step = f->step;
	q->first_token_step = -1;
	q->finish_step = -1;
	q->pre_state = q->post_state = ALLM_REQ_WAITING;
	struct allm_submit s = {
		.prompt = prompt,
		.n_prompt = n_prompt,
		.tag = (uint64_t)tag,
		.arrival = q->arrival,
	};
	allm_params_init(&s.params); /* greedy */
	s.params.temperature = 0;
	s.params.max_tokens = max_tokens;
	s.params.ignore_eos = 1;
	if (f->min_tokens > 0) {
		s.params.ignore_eos = 0;
		s.params.min_tokens = ALLM_MIN(f->min_tokens, max_tokens);
	}
	if (f->stop_id != 0)
		s.params.ignore_eos = 0;
	if (f->stop_id > 0) {
		s.params.n_stop = 1;
		s.params.stop_ids[0] = f->stop_id;
	}
	f->n_req++;
	if (allm_engine_submit(f->e, &s, &q->id, &err)) {
		CHECK(0, "submit: %s", err.msg);
		f->n_req--;
		return -1;
	}
	return tag;
}

static inline int fx_submit(struct fx *f, int32_t n_prompt, int32_t max_tokens, double arrival,
		     uint64_t seed)
{
	int32_t ids[1024];
	ALLM_ASSERT(n_prompt <= 1024);
	fx_prompt(ids, n_prompt, seed, f->m->cfg.vocab_size);
	return fx_submit_ids(f, ids, n_prompt, max_tokens, arrival);
}

/* The live request of a tag, or NULL when finished. */
static inline const struct allm_request *fx_live(struct fx *f, int tag)
{
	static const struct allm_request *v[1024];
	for (int q = 0; q < 3; q++) {
		int n = allm_engine_list(f->e, (enum allm_req_state)q, v, 1024);
		for (int i = 0; i < n; i++)
			if (v[i]->tag == (uint64_t)tag)
				return v[i];
	}
	return NULL;
}

/* Reads every live request's state into pre_ or post_ fields. */
static void fx_snapshot(struct fx *f, bool pre)
{
	static const struct allm_request *v[1024];
	for (int i = 0; i < f->n_req; i++) {
		struct fx_req *q = &f->req[i];
		if (pre) {
			q->pre_state = q->done ? ALLM_REQ_FINISHED : -1;
			q->pre_gen = q->n_gen;
		} else
			q->post_state = q->done ? ALLM_REQ_FINISHED : -1;
	}
	for (int s = 0; s < 3; s++) {
		int n = allm_engine_list(f->e, (enum allm_req_state)s, v, 1024);
		ALLM_ASSERT(n < 1024);
		for (int i = 0; i < n; i++) {
			struct fx_req *q = &f->req[v[i]->tag];
			CHECK((int)v[i]->state == s, "request %d in queue %d has state %d", (int)v[i]->tag, s,
			      v[i]->state);
			if (pre) {
				q->pre_state = s;
				q->pre_tokens = v[i]->seq.n_tokens;
				q->pre_readmit = v[i]->admitted_once;
				q->pre_decoding = s == ALLM_REQ_RUNNING &&
						  v[i]->seq.n_cached == v[i]->seq.n_tokens - 1;
				q->pre_disk = s == ALLM_REQ_SWAPPED && v[i]->n_disk_blocks > 0;
			} else {
				q->post_state = s;
				q->hint = v[i]->cached_hint;
			}
		}
	}
	for (int i = 0; i < f->n_req; i++)
		CHECK((pre ? f->req[i].pre_state : f->req[i].post_state) >= 0,
		      "request %d is in no queue and not finished", i);
}

/* Pools and block tables agree. */
static void fx_check_pools(struct fx *f)
{
	static const struct allm_request *v[1024];
	struct allm_kv_cache *kv = f->kv;
	CHECK(allm_block_pool_check(&kv->gpu) == 0, "GPU pool invariants (step %lld)",
	      (long long)f->step);
	CHECK(allm_block_pool_check(&kv->cpu) == 0, "CPU pool invariants (step %lld)",
	      (long long)f->step);
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	if (dp)
		CHECK(allm_block_pool_check(dp) == 0, "disk pool invariants (step %lld)", (long long)f->step);
	int64_t gpu = 0, cpu = 0, disk = 0;
	/* device blocks: owned by one request, or cached and held by as many
	 * requests as its refcount says */
	int32_t *held = calloc((size_t)ALLM_MAX(kv->gpu.capacity, 1), sizeof(int32_t));
	for (int s = 0; s < 3; s++) {
		int n = allm_engine_list(f->e, (enum allm_req_state)s, v, 1024);
		for (int i = 0; i < n; i++) {
			const struct allm_request *r = v[i];
			cpu += r->n_cpu_blocks;
			disk += r->n_disk_blocks;
			for (int32_t b = 0; b < r->n_disk_blocks; b++)
				CHECK(dp && dp->owner[r->disk_blocks[b]] == r->id, "disk block %d of request %lld",
				      r->disk_blocks[b], (long long)r->id);
			/* entries a window passed went back (-1); the rest are held, and
			 * with every layer windowed never more than the window's blocks
			 * and two (the window straddles one boundary; the next token's)
			 * besides those a prefill in chunks reserved past its cached part */
			CHECK(r->seq.n_gone >= 0 && r->seq.n_gone <= r->seq.n_blocks && (kv->window > 0 || !r->seq.n_gone),
			      "request %lld: %d of %d entries gone, window %d", (long long)r->id, r->seq.n_gone,
			      r->seq.n_blocks, kv->window);
			for (int32_t b = 0; b < r->seq.n_gone; b++)
				CHECK(r->seq.blocks[b] == -1, "request %lld: gone entry %d is %d", (long long)r->id, b,
				      r->seq.blocks[b]);
			if (kv->window > 0 && r->seq.n_blocks > r->seq.n_gone)
				CHECK(allm_seq_held(&r->seq) - (r->seq.n_blocks - allm_kv_blocks_for(kv, r->seq.n_cached + 1)) <=
					      (kv->window + kv->lay.block_size - 1) / kv->lay.block_size + 2,
				      "request %lld holds %d blocks (%d tokens, %d cached) with a window of %d (step %lld)",
				      (long long)r->id, allm_seq_held(&r->seq), r->seq.n_tokens, r->seq.n_cached, kv->window,
				      (long long)f->step);
			for (int32_t b = r->seq.n_gone; b < r->seq.n_blocks; b++) {
				int32_t id = r->seq.blocks[b];
				CHECK(id >= 0 && id < kv->gpu.capacity &&
					      (kv->gpu.owner[id] == r->id || kv->gpu.owner[id] == ALLM_BLOCK_CACHED),
				      "GPU block %d of request %lld", id, (long long)r->id);
				if (id >= 0 && id < kv->gpu.capacity && held[id]++ == 0)
					gpu++;
			}
			for (int32_t b = 0; b < r->n_cpu_blocks; b++)
				CHECK(kv->cpu.owner[r->cpu_blocks[b]] == r->id, "CPU block %d of request %lld",
				      r->cpu_blocks[b], (long long)r->id);
			if (s == ALLM_REQ_WAITING)
				CHECK(r->seq.n_blocks == 0 && r->n_cpu_blocks == 0 && r->n_disk_blocks == 0,
				      "waiting request %lld holds blocks", (long long)r->id);
			if (s == ALLM_REQ_SWAPPED)
				CHECK(allm_seq_held(&r->seq) == 0 && (r->n_cpu_blocks > 0) != (r->n_disk_blocks > 0),
				      "swapped request %lld: %d GPU, %d CPU, %d disk blocks", (long long)r->id,
				      r->seq.n_blocks, r->n_cpu_blocks, r->n_disk_blocks);
			if (s == ALLM_REQ_RUNNING)
				CHECK(r->n_cpu_blocks == 0 && r->n_disk_blocks == 0 && allm_seq_held(&r->seq) > 0 &&
					      (r->seq.n_cached == r->seq.n_tokens - 1 ||
					       (f->chunked && r->seq.n_cached < r->seq.n_tokens - 1)),
				      "running request %lld: %d GPU, %d CPU blocks, %d/%d cached",
				      (long long)r->id, r->seq.n_blocks, r->n_cpu_blocks, r->seq.n_cached,
				      r->seq.n_tokens);
		}
	}
	CHECK(gpu == allm_block_pool_used(&kv->gpu), "GPU used %d, tables hold %lld",
	      allm_block_pool_used(&kv->gpu), (long long)gpu);
	for (int32_t id = 0; id < kv->gpu.capacity; id++)
		if (kv->gpu.owner[id] == ALLM_BLOCK_CACHED)
			CHECK(kv->gpu.refs[id] == held[id], "cached GPU block %d: %d refs, %d holders", id,
			      kv->gpu.refs[id], held[id]);
		else
			CHECK(held[id] <= 1, "GPU block %d in %d tables", id, held[id]);
	free(held);
	if (kv->pc)
		CHECK(allm_pc_check(kv->pc) == 0, "prefix cache invariants (step %lld)", (long long)f->step);
	CHECK(cpu == allm_block_pool_used(&kv->cpu), "CPU used %d, tables hold %lld",
	      allm_block_pool_used(&kv->cpu), (long long)cpu);
	CHECK(!dp || disk == allm_block_pool_used(dp), "disk used %d, tables hold %lld",
	      dp ? allm_block_pool_used(dp) : 0, (long long)disk);
}

/* Order key of Alg. 2 at `now`: larger = admitted first. */
static bool fx_admit_before(struct fx *f, double now, int a, int b)
{
	const struct fx_req *x = &f->req[a], *y = &f->req[b];
	if (f->sched == ALLM_SCHED_FCFS)
		return x->arrival < y->arrival || (x->arrival == y->arrival && x->id < y->id);
	/* a waiting request's length less what the cache held of it at the step's
	 * look (DESIGN §6: cached work first, within fairness) */
	int32_t lx = x->pre_tokens - (x->pre_state == ALLM_REQ_WAITING && !x->pre_readmit ? x->hint : 0);
	int32_t ly = y->pre_tokens - (y->pre_state == ALLM_REQ_WAITING && !y->pre_readmit ? y->hint : 0);
	double px = fx_pri(now, x->arrival, lx), py = fx_pri(now, y->arrival, ly);
	return px > py || (px == py && x->id < y->id);
}

/* One engine step with the checks listed at the top. Returns the step's result. */
static int fx_step(struct fx *f)
{
	struct allm_err err = {{0}};
	struct allm_engine_stats st0, st1;
	if (f->freeze)
		*f->pred = f->frozen;
	allm_engine_get_stats(f->e, &st0);
	fx_snapshot(f, true);
	int n_dec0 = f->n_dec;
	double now = f->now;
	if (st0.swapped > 0 && st0.waiting > 0)
		f->n_steps_both_queues++;
	int rc = allm_engine_step(f->e, &err);
	CHECK(rc >= 0, "step %lld: %d %s", (long long)f->step, rc, err.msg);
	allm_engine_get_stats(f->e, &st1);
	fx_snapshot(f, false);
	fx_check_pools(f);

	bool prefill = st1.prefill_steps > st0.prefill_steps;
	bool decode = st1.decode_steps > st0.decode_steps;
	CHECK(f->chunked || !(prefill && decode), "step %lld both prefilled and decoded", (long long)f->step);
	CHECK(st1.mixed_steps - st0.mixed_steps == (prefill && decode), "step %lld: mixed count",
	      (long long)f->step);
	f->n_prefill_steps += prefill;
	f->n_decode_steps += decode;
	int n_vict = 0;
	for (int i = n_dec0; i < f->n_dec; i++)
		n_vict += f->dec[i].d.kind == ALLM_DECISION_PREEMPT;
	f->max_victims_per_step = ALLM_MAX(f->max_victims_per_step, n_vict);
	/* victims of one step: ascending priority (fair) / descending arrival (fcfs) */
	for (int i = n_dec0 + 1, prev = n_dec0; i < f->n_dec && f->paper; i++) {
		/* admission's restore-or-recompute decisions come after the victims */
		if (f->dec[prev].d.kind != ALLM_DECISION_PREEMPT || f->dec[i].d.kind != ALLM_DECISION_PREEMPT) {
			prev = i;
			continue;
		}
		const struct allm_decision *a = &f->dec[prev].d, *b = &f->dec[i].d;
		prev = i;
		if (f->sched == ALLM_SCHED_FAIR)
			CHECK(a->priority <= b->priority, "step %lld: victims %g then %g",
			      (long long)f->step, a->priority, b->priority);
		else
			CHECK(f->req[a->tag].arrival >= f->req[b->tag].arrival,
			      "step %lld: fcfs victims arrived %g then %g", (long long)f->step,
			      f->req[a->tag].arrival, f->req[b->tag].arrival);
	}

	int n_pref = 0, n_swin = 0;
	for (int i = 0; i < f->n_req; i++) {
		struct fx_req *q = &f->req[i];
		int got = q->n_gen - q->pre_gen;
		CHECK(got >= 0 && got <= 1, "request %d got %d tokens in one step", i, got);
		bool ran = q->post_state == ALLM_REQ_RUNNING ||
			   (q->post_state == ALLM_REQ_FINISHED && q->finish != ALLM_END_ERROR &&
			    q->finish != ALLM_END_CANCELLED);
		if (q->pre_state == ALLM_REQ_RUNNING && ran && (f->paper || q->pre_decoding)) {
			/* still running (not preempted): a decode gives one token, a prefill none */
			CHECK(got == (decode ? 1 : 0), "step %lld (%s): running request %d got %d tokens",
			      (long long)f->step, prefill ? "prefill" : decode ? "decode" : "idle", i, got);
		}
		if (q->pre_state == ALLM_REQ_WAITING && ran) {
			n_pref++;
			CHECK(prefill && (got == 1 || f->chunked),
			      "step %lld: request %d left waiting without a prefill", (long long)f->step, i);
		}
		if (q->pre_state == ALLM_REQ_SWAPPED && ran) {
			n_swin++;
			/* from disk, the read may run ahead while the step computes: the
			 * request joins after it, without a token (DESIGN §5) */
			if (!(q->pre_disk && got == 0 && q->post_state == ALLM_REQ_RUNNING))
				CHECK(decode && (got == 1 || f->chunked),
				      "step %lld: request %d swapped in without a decode", (long long)f->step, i);
		}
	}
	f->n_swapin_steps += n_swin > 0;
	CHECK(!(n_pref && n_swin), "step %lld admitted %d waiting and %d swapped", (long long)f->step,
	      n_pref, n_swin);
	if (f->sched == ALLM_SCHED_FCFS && n_pref)
		CHECK(st0.swapped == 0 && st1.swapped == 0,
		      "fcfs step %lld prefilled with %d swapped requests", (long long)f->step, st0.swapped);
	/* the admitted ones are a prefix of their queue's order (aged ones first) */
	if ((n_pref || n_swin) && f->paper) {
		int from = n_pref ? ALLM_REQ_WAITING : ALLM_REQ_SWAPPED;
		for (int i = 0; i < f->n_req; i++) {
			struct fx_req *q = &f->req[i];
			bool admitted = q->pre_state == from &&
					(q->n_gen > q->pre_gen || (q->pre_disk && q->post_state == ALLM_REQ_RUNNING));
			if (!admitted)
				continue;
			for (int j = 0; j < f->n_req; j++) {
				struct fx_req *o = &f->req[j];
				if (o->post_state != from)
					continue;
				if (o->pre_state != from && o->pre_state != ALLM_REQ_RUNNING)
					continue;
				CHECK(fx_admit_before(f, now, i, j),
				      "step %lld (%s): admitted request %d (arrival %g, len %d) ahead of "
				      "request %d (arrival %g, len %d), which still %s",
				      (long long)f->step, f->sched == ALLM_SCHED_FCFS ? "fcfs" : "fair", i,
				      q->arrival, q->pre_tokens, j, o->arrival, o->pre_tokens,
				      from == ALLM_REQ_WAITING ? "waits" : "is swapped");
			}
		}
	}
	f->step++;
	f->now += f->dt;
	return rc;
}

static inline bool fx_idle(struct fx *f)
{
	return allm_engine_idle(f->e);
}

/* Steps until idle; false if max_steps pass first. */
static inline bool fx_drain(struct fx *f, int64_t max_steps)
{
	for (int64_t i = 0; i < max_steps; i++) {
		if (fx_idle(f))
			return true;
		fx_step(f);
	}
	return fx_idle(f);
}

/* Marks the still-unmeasured decisions of a request as never to be measured
 * (its swap copy was dropped by a CPU shrink, or it was cancelled). */
static void fx_drop_pending(struct fx *f, int64_t req_id)
{
	for (int i = 0; i < f->n_dec; i++)
		if (f->dec[i].d.req_id == req_id && !f->dec[i].measured)
			f->dec[i].dropped = true;
}

/* allm_engine_set_cpu_blocks, noting the swapped requests it turned into recomputes. */
static inline int fx_set_cpu_blocks(struct fx *f, int32_t n)
{
	struct allm_err err = {{0}};
	fx_snapshot(f, true);
	int r = allm_engine_set_cpu_blocks(f->e, n, &err);
	CHECK(r == 0, "set_cpu_blocks(%d): %s", n, err.msg);
	fx_snapshot(f, false);
	int conv = 0;
	for (int i = 0; i < f->n_req; i++)
		if (f->req[i].pre_state == ALLM_REQ_SWAPPED && f->req[i].post_state == ALLM_REQ_WAITING) {
			fx_drop_pending(f, f->req[i].id);
			conv++;
		}
	fx_check_pools(f);
	return conv;
}

static inline int fx_cancel(struct fx *f, int tag)
{
	fx_drop_pending(f, f->req[tag].id);
	int r = allm_engine_cancel(f->e, f->req[tag].id);
	fx_check_pools(f);
	return r;
}

/* After a drain: every request finished as expected, every decision measured
 * (or dropped), both pools empty. */
static void fx_check_end(struct fx *f, const char *what)
{
	int not_done = 0, bad = 0, unmeasured = 0;
	for (int i = 0; i < f->n_req; i++) {
		if (!f->req[i].done)
			not_done++;
		else if (f->req[i].finish != ALLM_END_LENGTH && f->req[i].finish != ALLM_END_CANCELLED)
			bad++;
		else if (f->req[i].finish == ALLM_END_LENGTH)
			CHECK(f->req[i].n_gen == f->req[i].max_tokens, "%s: request %d: %d of %d tokens", what,
			      i, f->req[i].n_gen, f->req[i].max_tokens);
	}
	for (int i = 0; i < f->n_dec; i++)
		if (!f->dec[i].measured && !f->dec[i].dropped) {
			if (unmeasured++ < 3)
				fprintf(stderr, "%s: decision %lld (request %lld, %s, \"%s\") never measured\n",
					what, (long long)f->dec[i].d.seq_no, (long long)f->dec[i].d.req_id,
					f->dec[i].d.choice == ALLM_CHOICE_SWAP ? "swap" : "recompute",
					allm_reason_text(f->dec[i].d.reason));
		}
	CHECK(not_done == 0, "%s: %d requests never finished", what, not_done);
	CHECK(bad == 0, "%s: %d requests finished with an error", what, bad);
	CHECK(unmeasured == 0, "%s: %d of %d decisions never got a measured cost", what, unmeasured,
	      f->n_dec);
	CHECK(!allm_kv_disk_blocks(f->kv) || allm_block_pool_used(allm_kv_disk_blocks(f->kv)) == 0,
	      "%s: disk blocks left in use", what);
	CHECK(allm_block_pool_used(&f->kv->gpu) == 0 && allm_block_pool_used(&f->kv->cpu) == 0,
	      "%s: blocks left in use: GPU %d CPU %d", what, allm_block_pool_used(&f->kv->gpu),
	      allm_block_pool_used(&f->kv->cpu));
	CHECK(allm_block_pool_check(&f->kv->gpu) == 0 && allm_block_pool_check(&f->kv->cpu) == 0,
	      "%s: pool invariants", what);
}

#endif
