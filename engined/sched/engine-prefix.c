/* The prefix cache's side of the engine (DESIGN §5b, §6 "Restore or
 * recompute"): what a request admitted from waiting finds cached (a plan,
 * made while admission picks), what it takes (its device blocks held, its
 * lower-tier blocks restored or recomputed as the policy's cost comparison
 * says, logged as a decision), the blocks it publishes as they fill, and the
 * predictions the cache's evictions ask for (does a write down pay?). */
#include "engine-internal.h"
#include "engine-policy.h"

#include <errno.h>
#include <math.h>

static int32_t bsize(const struct allm_engine *e)
{
	return e->kv->lay.block_size;
}

double allm_engine_predict_reprefill(const struct allm_engine *e, int32_t from, int32_t to)
{
	if (to <= from)
		return 0;
	if (from <= 0) /* a whole sequence: the recompute model as calibrated */
		return e->cfg.chunked_prefill ? allm_predict_recompute_marginal(e->pred, to)
					      : allm_predict_recompute(e->pred, to);
	double p = from, n = to;
	struct allm_prefill_shape s = {1, to - from, n * n - p * p};
	return e->cfg.chunked_prefill ? allm_predict_prefill_marginal(e->pred, &s) : allm_predict_prefill(e->pred, &s);
}

/* --- evictions: does a write down pay? --------------------------------------------- */

/* Predicted seconds to write one block into tier t, and to read it back. */
static double write_s(const struct allm_engine *e, enum allm_kv_tier t)
{
	uint64_t bb = e->kv->block_bytes;
	if (t == ALLM_KV_TIER_HOST)
		return allm_predict_swap(e->pred, ALLM_COPY_D2H, bb, 1);
	/* a write that goes behind costs the step its copy to the stage */
	return allm_kv_disk_behind_room(e->kv, 1) ? allm_predict_swap(e->pred, ALLM_COPY_D2H, bb, 1)
						  : allm_predict_disk(e->pred, ALLM_DISK_WRITE, bb, 1);
}

static double read_s(const struct allm_engine *e, enum allm_kv_tier t)
{
	uint64_t bb = e->kv->block_bytes;
	return t == ALLM_KV_TIER_HOST ? allm_predict_swap(e->pred, ALLM_COPY_H2D, bb, 1) : allm_predict_disk(e->pred, ALLM_DISK_READ, bb, 1);
}

/* A block leaving the tier above for tier t is written there when the
 * recompute it may save, weighted by how often blocks written to t were used
 * again (measured; a prior of one in two), outweighs the write; and always
 * while blocks after it in its chain are still cached: a hit starts at a
 * chain's first block, so dropping it would strand them (the pool reclaims a
 * chain's tail first, so those were judged already). */
static bool pc_keep(void *ctx, enum allm_kv_tier t, const struct allm_pc_entry *x)
{
	struct allm_engine *e = ctx;
	const struct allm_policy *pol = allm_policy_of(e->cfg.preempt);
	if (!pol->restores)
		return false; /* nothing written down would come back */
	/* the fixed policy that always restores writes down whatever has room */
	if (pol->keeps_all || x->n_children > 0)
		return true;
	struct allm_pc_stats st;
	allm_pc_get_stats(e->pc, &st);
	double reuse = ALLM_MIN(1.0, ((double)st.hit_blocks[t] + 1) / ((double)st.written[t] + 2));
	/* what the block adds to a prefill that runs anyway: two rows that differ
	 * by it (a row alone would count the fit's per-sequence term, which can be
	 * negative, and price a 16-token block at nothing) */
	int32_t p = x->depth * bsize(e), end = p + bsize(e) + 1;
	double block = allm_engine_predict_reprefill(e, p, end) - allm_engine_predict_reprefill(e, p + bsize(e), end);
	double save = block - read_s(e, t);
	return reuse * save > write_s(e, t);
}

/* The measured cost of a write down, for the predictors. */
static void pc_moved(void *ctx, enum allm_kv_tier from, enum allm_kv_tier to, const struct allm_swap_result *res)
{
	struct allm_engine *e = ctx;
	(void)from;
	if (to == ALLM_KV_TIER_HOST) {
		allm_predictor_observe_swap(e->pred, ALLM_COPY_D2H, res->bytes, res->n_runs, res->seconds);
		e->st.swap_out_bytes += (int64_t)res->bytes;
	} else {
		if (res->behind)
			allm_predictor_observe_swap(e->pred, ALLM_COPY_D2H, res->bytes, res->n_runs, res->seconds);
		else if (from == ALLM_KV_TIER_DEVICE)
			allm_predictor_observe_disk(e->pred, ALLM_DISK_WRITE, res->bytes, res->n_runs, res->disk.io_seconds);
		e->st.disk_write_bytes += (int64_t)res->bytes;
	}
}

int allm_engine_prefix_create(struct allm_engine *e, struct allm_err *err)
{
	int r = allm_prefix_cache_create(e->kv, e->model->source, &e->pc);
	if (r)
		return allm_err_set(err, r, "out of memory");
	struct allm_pc_policy pol = {e, pc_keep, pc_moved};
	allm_pc_set_policy(e->pc, &pol);
	return 0;
}

void allm_engine_prefix_init(struct allm_engine *e, struct allm_request *r, const struct allm_submit *s)
{
	r->dom.uid = e->cfg.share_prefix_cache ? ALLM_PC_UID_SHARED : s->cache_uid;
	_Static_assert(ALLM_PC_SALT_BYTES == ALLM_CACHE_SALT_BYTES, "the wire's salt is the cache's");
	memcpy(r->dom.salt, s->params.cache_salt, sizeof(r->dom.salt));
	r->rr_decision = -1;
	r->plan.step = -1;
	if (e->pc)
		allm_pc_root(e->pc, &r->dom, &r->seq.root);
}

/* --- the plan ------------------------------------------------------------------------- */

/* Disk blocks whose I/O runs ahead of a new read (writes behind in flight). */
static double disk_queue_s(const struct allm_engine *e)
{
	int32_t q = allm_kv_disk_queued_blocks(e->kv);
	return q > 0 ? allm_predict_disk(e->pred, ALLM_DISK_WRITE, (uint64_t)q * e->kv->block_bytes, 1) : 0;
}

/* The lower-tier part of r's plan (blocks n_device..n_match): how many of its
 * first blocks to restore, by the policy's comparison of predicted costs;
 * the predictions go into *d (not yet recorded). */
static int32_t choose_restore(struct allm_engine *e, struct allm_request *r, struct allm_decision *d)
{
	struct allm_prefix_plan *p = &r->plan;
	int32_t m = p->n_match - p->n_device, bs = bsize(e), n_tok = r->seq.n_tokens;
	double stack[65], *total = m < 64 ? stack : allm_malloc((size_t)(m + 1) * sizeof(double));
	int32_t per[ALLM_KV_TIER_COUNT] = {0};
	enum allm_kv_tier low = ALLM_KV_TIER_DEVICE;
	uint64_t bb = e->kv->block_bytes;
	double disk_wait = disk_queue_s(e);
	if (!total)
		return 0; /* out of memory: recompute, which needs nothing */
	for (int32_t k = 0; k <= m; k++) {
		if (k > 0) {
			enum allm_kv_tier t = (enum allm_kv_tier)allm_pc_entry(e->pc, p->ent[p->n_device + k - 1])->tier;
			per[t]++;
			low = ALLM_MAX(low, t);
		}
		/* restoring the first k: each tier's blocks in one batch (coalesced as
		 * far as their ids allow: priced as one run), the disk after what it
		 * has queued; then the rest of the prompt is prefilled */
		double restore = (per[ALLM_KV_TIER_HOST] ? allm_predict_swap(e->pred, ALLM_COPY_H2D, per[ALLM_KV_TIER_HOST] * bb, 1) : 0) +
				 (per[ALLM_KV_TIER_DISK] ? disk_wait + allm_predict_disk(e->pred, ALLM_DISK_READ, per[ALLM_KV_TIER_DISK] * bb, 1) : 0);
		total[k] = restore + allm_engine_predict_reprefill(e, (p->n_device + k) * bs, n_tok);
		if (k == m)
			d->pred_swap_s = restore;
	}
	double rest = allm_engine_predict_reprefill(e, (p->n_device + m) * bs, n_tok);
	int32_t k = allm_policy_of(e->cfg.preempt)->restore(total, m, &d->reason);
	d->kind = ALLM_DECISION_RESTORE;
	d->pred_recompute_s = total[0] - rest; /* the m blocks, given the rest of the prompt */
	d->pred_disk_s = total[k] - rest; /* what the choice costs */
	d->tier = low;
	d->n_blocks = m;
	d->n_tokens = m * bs;
	d->n_restored = k;
	d->choice = k == m ? ALLM_CHOICE_RESTORE : k == 0 ? ALLM_CHOICE_RECOMPUTE : ALLM_CHOICE_SPLIT;
	if (total != stack)
		allm_free(total);
	return k;
}

/* Room in p for the entries of n blocks; 0 or -ENOMEM. */
static int plan_room(struct allm_prefix_plan *p, int32_t n)
{
	if (n <= p->cap_ent)
		return 0;
	int32_t *v = allm_realloc(p->ent, (size_t)n * sizeof(int32_t));
	if (v)
		p->ent = v;
	uint32_t *g = allm_realloc(p->gen, (size_t)n * sizeof(uint32_t));
	if (g)
		p->gen = g;
	if (!v || !g)
		return -ENOMEM;
	p->cap_ent = n;
	return 0;
}

/* Steps between two looks at a waiting request's cached prefix: a look walks
 * its prompt's chain, and ordering a long queue must not do that for every
 * request every step; a hint some steps old only orders the queue (what a
 * request takes from the cache is its plan's, looked up when admitted). */
#define HINT_EVERY_STEPS 8

void allm_engine_prefix_hint(struct allm_engine *e, struct allm_request *r)
{
	if (r->hint_step > 0 && e->step_no - r->hint_step < HINT_EVERY_STEPS)
		return;
	r->hint_step = e->step_no;
	r->cached_hint = 0;
	int32_t bs = bsize(e);
	/* new work only: a recompute victim's own blocks are what it left in the
	 * cache, and counting them would re-admit it in the step that evicted it
	 * (allm_engine_priority ignores the hint of one admitted before) */
	if (!e->cfg.prefix_caching || !e->pc || r->admitted_once || r->seq.n_blocks > 0 || r->n_cpu_blocks ||
	    r->n_disk_blocks)
		return;
	int32_t max = (r->seq.n_tokens - 1) / bs;
	if (max <= 0 || allm_seq_keys(&r->seq, e->pc, max * bs) || plan_room(&r->plan, max))
		return;
	r->cached_hint = allm_pc_match(e->pc, &r->dom, r->seq.keys, r->seq.tokens, max, r->plan.ent) * bs;
}

void allm_engine_prefix_plan(struct allm_engine *e, struct allm_request *r)
{
	struct allm_prefix_plan *p = &r->plan;
	int32_t bs = bsize(e);
	p->step = e->step_no;
	p->n_match = p->n_device = p->n_held = p->n_use = 0;
	if (!e->cfg.prefix_caching || !e->pc || r->seq.n_blocks > 0 || r->n_cpu_blocks || r->n_disk_blocks)
		return;
	/* the last token is fed whatever is cached: its logits come from it */
	int32_t max = (r->seq.n_tokens - 1) / bs;
	if (max <= 0 || allm_seq_keys(&r->seq, e->pc, max * bs))
		return;
	if (plan_room(p, max))
		return;
	p->n_match = allm_pc_match(e->pc, &r->dom, r->seq.keys, r->seq.tokens, max, p->ent);
	for (int32_t i = 0; i < p->n_match; i++)
		p->gen[i] = allm_pc_entry(e->pc, p->ent[i])->gen;
	for (; p->n_device < p->n_match; p->n_device++) {
		const struct allm_pc_entry *x = allm_pc_entry(e->pc, p->ent[p->n_device]);
		if (x->tier != ALLM_KV_TIER_DEVICE)
			break;
		p->n_held += e->kv->gpu.refs[x->block] > 0;
	}
	p->n_use = p->n_device;
	if (p->n_match > p->n_device) {
		memset(&p->d, 0, sizeof(p->d));
		p->n_use += choose_restore(e, r, &p->d);
	}
}

static bool planned(const struct allm_engine *e, const struct allm_request *r)
{
	return r->plan.step == e->step_no && r->seq.n_blocks == 0;
}

int32_t allm_engine_prefix_blocks(const struct allm_engine *e, const struct allm_request *r, int32_t blocks)
{
	return planned(e, r) ? blocks - r->plan.n_held : blocks;
}

int32_t allm_engine_prefix_tokens(const struct allm_engine *e, const struct allm_request *r)
{
	return planned(e, r) ? r->plan.n_use * bsize(e) : 0;
}

/* --- admission takes it ------------------------------------------------------------- */

static int reserve_table(struct allm_seq *s, int32_t n)
{
	if (n <= s->cap_blocks)
		return 0;
	int32_t cap = ALLM_MAX(n, s->cap_blocks * 2);
	int32_t *b = allm_realloc(s->blocks, (size_t)cap * sizeof(int32_t));
	if (!b)
		return -ENOMEM;
	s->blocks = b;
	s->cap_blocks = cap;
	return 0;
}

void allm_engine_prefix_hold(struct allm_engine *e, struct allm_request *r)
{
	struct allm_prefix_plan *p = &r->plan;
	if (!planned(e, r) || p->n_use == 0)
		return;
	if (reserve_table(&r->seq, p->n_use)) {
		p->n_use = 0;
		return;
	}
	/* the device entries among the blocks it uses: held now, so that the
	 * restores of this step cannot reclaim them */
	for (int32_t i = 0; i < p->n_use; i++) {
		const struct allm_pc_entry *x = allm_pc_alive(e->pc, p->ent[i], p->gen[i]) ? allm_pc_entry(e->pc, p->ent[i]) : NULL;
		r->seq.blocks[i] = -1;
		if (x && x->tier == ALLM_KV_TIER_DEVICE) {
			int rc = allm_pc_take(e->pc, p->ent[i], &r->seq.blocks[i]);
			ALLM_ASSERT(rc == 0);
		}
	}
	r->seq.n_blocks = p->n_use;
}

/* The cached tokens r takes, by tier, into the stats. */
static void count_hits(struct allm_engine *e, struct allm_request *r, const int32_t *tier_of_block, int32_t n)
{
	int32_t bs = bsize(e);
	if (r->admitted_once) {
		e->st.pc_readmit_hit_tokens += (int64_t)n * bs;
		return;
	}
	r->admitted_once = true;
	r->cached_tokens = n * bs;
	e->st.pc_queried_tokens += r->seq.n_tokens;
	e->st.pc_hit_tokens += (int64_t)n * bs;
	for (int32_t i = 0; i < n; i++)
		e->st.pc_hit_tokens_tier[tier_of_block[i]] += bs;
}

/* Records r's restore-or-recompute decision (the plan's) as admission executes it. */
static struct allm_decision *record_restore(struct allm_engine *e, struct allm_request *r, double now)
{
	struct allm_decision *d = allm_engine_record_decision(e);
	int64_t seq = d->seq_no;
	*d = r->plan.d;
	d->seq_no = seq;
	d->time = now;
	d->req_id = r->id;
	d->tag = r->tag;
	d->priority = allm_engine_priority(r, now);
	d->estimated = !allm_predictor_calibrated(e->pred);
	d->measured_s = NAN;
	d->other_measured_s = NAN;
	d->oncpu_frac = NAN;
	return d;
}

/* r keeps its first n cached blocks: the held ones after them go back. */
static void truncate_held(struct allm_engine *e, struct allm_request *r, int32_t *n, int32_t keep)
{
	for (int32_t i = *n - 1; i >= keep; i--)
		if (r->seq.blocks[i] >= 0)
			allm_block_pool_release(&e->kv->gpu, r->id, r->seq.blocks[i]);
	*n = r->seq.n_blocks = keep;
}

/* Fills the lower-tier blocks of r's held table (those still -1): entries
 * another admission of this step brought to the device are taken as hits,
 * the others restored in one call; an entry gone meanwhile ends the table
 * there. 0, or -errno after which r keeps its leading blocks only (*n). The
 * copy time goes to *ret_s, the blocks restored to *ret_k. */
static int restore_lower(struct allm_engine *e, struct allm_request *r, int32_t *n, double *ret_s, int32_t *ret_k)
{
	struct allm_prefix_plan *p = &r->plan;
	int32_t *want = allm_malloc((size_t)ALLM_MAX(*n, 1) * sizeof(int32_t) * 3), *got = want ? want + *n : NULL;
	int32_t *at = want ? got + *n : NULL, k = 0;
	struct allm_swap_result res[ALLM_KV_TIER_COUNT];
	struct allm_err err = {{0}};
	int rc = want ? 0 : -ENOMEM;
	*ret_s = 0;
	*ret_k = 0;
	for (int32_t i = 0; !rc && i < *n; i++) {
		if (r->seq.blocks[i] >= 0)
			continue;
		const struct allm_pc_entry *x = allm_pc_alive(e->pc, p->ent[i], p->gen[i]) ? allm_pc_entry(e->pc, p->ent[i]) : NULL;
		if (!x) { /* dropped by this step's evictions: recompute from here */
			truncate_held(e, r, n, i);
			break;
		}
		if (x->tier == ALLM_KV_TIER_DEVICE) {
			int t = allm_pc_take(e->pc, p->ent[i], &r->seq.blocks[i]);
			ALLM_ASSERT(t == 0);
			continue;
		}
		at[k] = i;
		want[k++] = p->ent[i];
	}
	if (!rc && k > 0)
		rc = allm_pc_restore(e->pc, r->id, want, k, got, res, &err);
	if (rc) {
		/* keep the leading blocks it holds; recompute from the first miss */
		int32_t first = 0;
		while (first < *n && r->seq.blocks[first] >= 0)
			first++;
		truncate_held(e, r, n, first);
		allm_free(want);
		return rc;
	}
	for (int32_t j = 0; j < k; j++)
		r->seq.blocks[at[j]] = got[j];
	/* what the copies took teaches the link and disk models */
	const struct allm_swap_result *h = &res[ALLM_KV_TIER_HOST], *dk = &res[ALLM_KV_TIER_DISK];
	if (k > 0 && h->bytes) {
		allm_predictor_observe_swap(e->pred, ALLM_COPY_H2D, h->bytes, h->n_runs, h->seconds);
		e->st.swap_in_bytes += (int64_t)h->bytes;
	}
	if (k > 0 && dk->bytes) {
		if (!dk->disk.io_shared)
			allm_predictor_observe_disk(e->pred, ALLM_DISK_READ, dk->bytes, dk->n_runs, dk->disk.io_seconds);
		e->st.disk_read_bytes += (int64_t)dk->bytes;
	}
	*ret_s = k > 0 ? h->seconds + dk->seconds : 0;
	*ret_k = k;
	e->st.pc_restored_tokens += (int64_t)k * bsize(e);
	allm_free(want);
	return 0;
}

void allm_engine_prefix_restore(struct allm_engine *e, struct allm_request *r, double now)
{
	struct allm_prefix_plan *p = &r->plan;
	int32_t bs = bsize(e), tiers[256], *tier = tiers;
	if (!e->cfg.prefix_caching || !e->pc)
		return;
	if (p->step != e->step_no) { /* nothing was planned: a miss */
		count_hits(e, r, NULL, 0);
		return;
	}
	int32_t n = r->seq.n_blocks, m = p->n_match - p->n_device;
	if (n > (int32_t)ALLM_ARRAY_SIZE(tiers) && !(tier = allm_malloc((size_t)n * sizeof(int32_t)))) {
		tier = tiers;
		n = 0; /* cannot count: take nothing (what is held goes back below) */
	}
	/* the tiers they were found in, as planned (for the hit counts) */
	for (int32_t i = 0; i < n; i++) {
		const struct allm_pc_entry *x = allm_pc_entry(e->pc, p->ent[i]);
		tier[i] = r->seq.blocks[i] >= 0 || !x ? ALLM_KV_TIER_DEVICE : x->tier;
	}
	struct allm_decision *d = m > 0 ? record_restore(e, r, now) : NULL;
	double copy_s = 0;
	int32_t n_copied = 0;
	if (n < r->seq.n_blocks) {
		for (int32_t i = r->seq.n_blocks - 1; i >= 0; i--)
			if (r->seq.blocks[i] >= 0)
				allm_block_pool_release(&e->kv->gpu, r->id, r->seq.blocks[i]);
		r->seq.n_blocks = 0;
	} else if (restore_lower(e, r, &n, &copy_s, &n_copied)) {
		e->st.pc_restore_failures++;
		if (d) {
			d->choice = ALLM_CHOICE_RECOMPUTE;
			d->reason = ALLM_REASON_RESTORE_FAILED;
		}
	}
	/* fewer cached blocks than admission counted on (a copy failed): without
	 * chunking the whole rest of the prompt goes in this step still */
	if (n < p->n_use && !e->cfg.chunked_prefill && r->chunk > 0)
		r->chunk += (p->n_use - n) * bs;
	p->n_use = n;
	if (d)
		d->n_restored = ALLM_MAX(0, n - p->n_device);
	r->seq.n_cached = n * bs;
	r->seq.n_linked = n;
	if (n > 0) { /* held: alive */
		r->seq.link_ent = p->ent[n - 1];
		r->seq.link_gen = allm_pc_entry(e->pc, p->ent[n - 1])->gen;
	}
	count_hits(e, r, tier, n);
	if (tier != tiers)
		allm_free(tier);
	p->step = -1; /* taken */
	if (!d)
		return;
	e->st.pc_restores[d->tier][d->choice]++;
	int32_t end = (p->n_device + m) * bs;
	e->st.pc_recomputed_cached_tokens += end - n * bs;
	if (e->ev.on_decision)
		e->ev.on_decision(e->ev.user, d, false);
	/* measured: the copies now, and the recompute part as its prefill runs */
	r->rr_decision = d->seq_no;
	r->rr_seconds = copy_s;
	r->rr_begin = n * bs;
	r->rr_end = end;
	if (r->rr_begin >= r->rr_end)
		allm_engine_prefix_learn(e, r, 0, 0, 0);
}

void allm_engine_prefix_learn(struct allm_engine *e, struct allm_request *q, int32_t from, int32_t to,
			      double seconds)
{
	if (q->rr_decision < 0)
		return;
	int32_t a = ALLM_MAX(from, q->rr_begin), b = ALLM_MIN(to, q->rr_end);
	if (b > a && to > from)
		q->rr_seconds += seconds * (double)(b - a) / (double)(to - from);
	if (to < q->rr_end && q->rr_begin < q->rr_end)
		return;
	struct allm_decision *d = allm_engine_decision_at(e, q->rr_decision);
	q->rr_decision = -1;
	if (!d)
		return;
	d->measured_s = q->rr_seconds;
	if (e->ev.on_decision)
		e->ev.on_decision(e->ev.user, d, true);
}

/* --- publishing ---------------------------------------------------------------------- */

void allm_engine_prefix_publish(struct allm_engine *e, struct allm_request *r)
{
	struct allm_seq *s = &r->seq;
	int32_t bs = bsize(e), full = s->n_cached / bs;
	if (!e->cfg.prefix_caching || !e->pc || full <= s->n_linked || full > s->n_blocks ||
	    allm_seq_keys(s, e->pc, full * bs))
		return;
	while (s->n_linked < full) {
		int32_t i = s->n_linked, ent;
		if (i > 0 && !allm_pc_alive(e->pc, s->link_ent, s->link_gen))
			return; /* its parent was evicted: the chain cannot go on from here */
		if (s->blocks[i] < 0)
			return; /* its window passed it before it could be published */
		if (allm_pc_publish(e->pc, r->id, s->blocks[i], &s->keys[i], i ? s->link_ent : -1, i,
				    s->tokens + (size_t)i * bs, &r->dom, &ent) < 0)
			return;
		s->link_ent = ent;
		s->link_gen = allm_pc_entry(e->pc, ent)->gen;
		s->n_linked++;
	}
}

int32_t allm_engine_prefix_kept(const struct allm_engine *e, const struct allm_request *r)
{
	/* the leading blocks others hold too stay on the device; those only r
	 * holds are reclaimed under the very pressure that preempts it */
	const struct allm_block_pool *p = &e->kv->gpu;
	int32_t n = 0;
	if (!e->cfg.prefix_caching || !e->pc)
		return 0;
	while (n < r->seq.n_linked && n < r->seq.n_blocks && r->seq.blocks[n] >= 0 &&
	       p->owner[r->seq.blocks[n]] == ALLM_BLOCK_CACHED &&
	       p->refs[r->seq.blocks[n]] > 1)
		n++;
	return n * bsize(e);
}

void allm_engine_prefix_settle(struct allm_engine *e, struct allm_request *r)
{
	/* preempted or finished before its recompute part ran: what accrued */
	if (r->rr_decision >= 0)
		allm_engine_prefix_learn(e, r, r->rr_end, r->rr_end, 0);
}
