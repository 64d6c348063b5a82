/* Cost predictors: the models, online learning and calibration. The fitter is
 * predictor-lsq.c; profiles (JSON) are in predictor-profile.c. */
#include "predictor.h"
#include "predictor-tune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

/* Calibration budget: ~150 timed runs in all (DESIGN: seconds on tiny models). */
#define CALIB_RC_RUNS 90
#define CALIB_SWAP_RUNS 80
#define CALIB_MAX_SWAP_BLOCKS 64
/* A prefill point slower than this: larger ones are skipped (big model, slow device). */
#define CALIB_SLOW_S 2.0
#define CALIB_MAX_PTS 64

/* Before calibration: a guess of the right order for a small model on a CPU, in
 * feature units (per 1e3 tokens, per 1e6 tokens^2), and a memcpy-like swap. */
static const double rc_guess[4] = { 1e-3, 2e-2, 1e-3, 0.0 };
static const double swap_guess[2] = { 1e-5, 2e-4 }; /* 10 us per run, 5 GB/s */
static const double disk_guess[2] = { 1e-4, 1e-3 }; /* 100 us per run, 1 GB/s */

void allm_pred_rc_features(const struct allm_prefill_shape *s, double x[4])
{
	double tok = s->tokens > 0 ? (double)s->tokens : 0;
	double tsq = s->tokens_sq;
	if (!(tsq >= 0) || !isfinite(tsq))
		tsq = tok * tok; /* as if one sequence: the pessimistic case */
	x[0] = 1;
	x[1] = tok / 1e3;
	x[2] = tsq / 1e6;
	x[3] = s->n_seqs > 0 ? s->n_seqs : 0;
}

double allm_pred_swap_bw(const struct allm_pred_lsq *q)
{
	return 1e6 / fmax(q->coef[1], PRED_SWAP_MIN_SPMB);
}

static void swap_features(uint64_t bytes, int32_t n_runs, double x[4])
{
	if (n_runs < 1 && bytes > 0)
		n_runs = 1; /* some copy happens */
	x[0] = n_runs > 0 ? n_runs : 0;
	x[1] = (double)bytes / 1e6;
	x[2] = x[3] = 0;
}

/* ---- rolling error ---- */

void allm_pred_ring_push(struct allm_pred_ring *r, double pred, double meas)
{
	if (!(meas > 0) || !isfinite(meas) || !isfinite(pred))
		return;
	double pct = fabs(pred - meas) / meas * 100.0;
	r->pct[r->head] = (float)fmin(pct, 1e9);
	r->head = (r->head + 1) % ALLM_PRED_RING;
	if (r->n < ALLM_PRED_RING)
		r->n++;
}

double allm_pred_ring_mape(const struct allm_pred_ring *r, int32_t min_n)
{
	if (r->n < ALLM_MAX(min_n, 1))
		return NAN;
	double s = 0;
	for (int32_t i = 0; i < r->n; i++)
		s += r->pct[i];
	return s / r->n;
}

/* ---- public API ---- */

/* The guessed prior of an uncalibrated predictor: a pseudo-grid evaluated with
 * the guess, so unexcited directions stay at the guess (scaled by drift). */
static void seed_guess(struct allm_pred_lsq *q, const double *guess, bool rc);

void allm_predictor_estimate(struct allm_predictor *p, const double rc_coef[4], const double lat[2],
			     const double bw[2])
{
	/* in the fitter's units: per 1e3 tokens, per 1e6 tokens^2; per run, per MB */
	double rc[4] = {fmax(rc_coef[0], 0), fmax(rc_coef[1], 0) * 1e3, fmax(rc_coef[2], 0) * 1e6,
			fmax(rc_coef[3], 0)};
	seed_guess(&p->rc, rc, true);
	for (int d = 0; d < 2 && lat && bw; d++) {
		double sw[2] = {fmax(lat[d], 0), bw[d] > 0 ? 1e6 / bw[d] : p->swap[d].coef[1]};
		seed_guess(&p->swap[d], sw, false);
		p->swap_bw[d] = allm_pred_swap_bw(&p->swap[d]);
	}
	p->calibrated = false;
	p->estimated = true;
}

bool allm_predictor_learned(struct allm_predictor *p)
{
	/* enough real prefills, predicted well enough, to stand for a calibration */
	if (p->calibrated || !p->estimated || p->n_prefill_obs < ALLM_PRED_LEARNED_OBS)
		return false;
	double m = allm_predictor_mape_recompute(p);
	if (!(m <= ALLM_PRED_LEARNED_MAPE) && p->n_prefill_obs < 8 * ALLM_PRED_LEARNED_OBS)
		return false;
	p->calibrated = true;
	p->estimated = false;
	p->calib_mape_rc = m;
	p->calib_mape_swap = allm_predictor_mape_swap(p);
	time_t now = time(NULL);
	struct tm tm;
	if (gmtime_r(&now, &tm))
		strftime(p->calibrated_at, sizeof(p->calibrated_at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return true;
}

static void seed_guess(struct allm_pred_lsq *q, const double *guess, bool rc)
{
	double A[4][4] = { { 0 } }, b[4] = { 0 }, x[4];
	int n = 0;

	memcpy(q->base, guess, sizeof(double) * (size_t)q->k);
	for (int32_t len = 16; len <= 4096; len *= 4)
		for (int32_t ns = 1; ns <= 4; ns *= 2) {
			if (rc) {
				struct allm_prefill_shape s = { ns, (int64_t)ns * len, (double)ns * len * len };
				allm_pred_rc_features(&s, x);
			} else {
				swap_features((uint64_t)len * 4096, ns, x);
			}
			allm_pred_acc_sample(q->k, A, b, x, allm_pred_clamp(allm_pred_dot(q->k, guess, x), PRED_SWAP_FLOOR), 1.0);
			n++;
		}
	allm_pred_lsq_seed(q, A, b, n, guess, false);
}

int allm_predictor_create(const struct allm_predictor_key *key, struct allm_predictor **ret)
{
	if (!key || !ret)
		return -EINVAL;
	struct allm_predictor *p = allm_calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->key = *key;
	/* the key may come from anywhere: make its strings strings */
	p->key.model[sizeof(p->key.model) - 1] = 0;
	p->key.device[sizeof(p->key.device) - 1] = 0;
	p->key.dtype[sizeof(p->key.dtype) - 1] = 0;
	p->rc.k = ALLM_PRED_RC_NF;
	/* time grows with tokens: a negative slope is noise, and would make long
	 * recomputes look free */
	p->rc.nonneg = (1u << 1) | (1u << 2);
	seed_guess(&p->rc, rc_guess, true);
	for (int d = 0; d < 2; d++) {
		p->swap[d].k = ALLM_PRED_SWAP_NF;
		p->swap[d].nonneg = 3;
		seed_guess(&p->swap[d], swap_guess, false);
		p->swap_bw[d] = allm_pred_swap_bw(&p->swap[d]);
		p->disk[d].k = ALLM_PRED_SWAP_NF;
		p->disk[d].nonneg = 3;
		seed_guess(&p->disk[d], disk_guess, false);
		p->disk_bw[d] = allm_pred_swap_bw(&p->disk[d]);
	}
	p->calib_mape_rc = p->calib_mape_swap = p->calib_mape_disk = NAN;
	p->oncpu = 1;
	*ret = p;
	return 0;
}

void allm_predictor_free(struct allm_predictor *p)
{
	allm_free(p);
}

double allm_predict_prefill(const struct allm_predictor *p, const struct allm_prefill_shape *s)
{
	double x[4];
	allm_pred_rc_features(s, x);
	return allm_pred_clamp(allm_pred_dot(ALLM_PRED_RC_NF, p->rc.coef, x), PRED_RC_FLOOR);
}

double allm_predict_recompute(const struct allm_predictor *p, int64_t n_tokens)
{
	double n = n_tokens > 0 ? (double)n_tokens : 0;
	struct allm_prefill_shape s = { 1, n_tokens > 0 ? n_tokens : 0, n * n };
	return allm_predict_prefill(p, &s);
}

double allm_predict_prefill_marginal(const struct allm_predictor *p,
				     const struct allm_prefill_shape *s)
{
	double x[4];
	allm_pred_rc_features(s, x);
	x[0] = 0; /* the step's fixed cost is paid whether or not this work rides in it */
	return allm_pred_clamp(allm_pred_dot(ALLM_PRED_RC_NF, p->rc.coef, x), PRED_RC_FLOOR);
}

double allm_predict_recompute_marginal(const struct allm_predictor *p, int64_t n_tokens)
{
	double n = n_tokens > 0 ? (double)n_tokens : 0;
	struct allm_prefill_shape s = { 1, n_tokens > 0 ? n_tokens : 0, n * n };
	return allm_predict_prefill_marginal(p, &s);
}

double allm_predict_swap(const struct allm_predictor *p, enum allm_copy_dir dir, uint64_t bytes, int32_t n_runs)
{
	double x[4];
	ALLM_ASSERT((unsigned)dir <= 1);
	swap_features(bytes, n_runs, x);
	return allm_pred_clamp(x[0] * p->swap[dir].coef[0] + (double)bytes / p->swap_bw[dir], PRED_SWAP_FLOOR);
}

double allm_predict_disk(const struct allm_predictor *p, enum allm_disk_dir dir, uint64_t bytes, int32_t n_runs)
{
	double x[4];
	ALLM_ASSERT((unsigned)dir <= 1);
	swap_features(bytes, n_runs, x);
	return allm_pred_clamp(x[0] * p->disk[dir].coef[0] + (double)bytes / p->disk_bw[dir], PRED_SWAP_FLOOR);
}

void allm_predictor_observe_prefill(struct allm_predictor *p, const struct allm_prefill_shape *s, double seconds)
{
	double x[4];
	if (!(seconds >= PRED_MIN_SAMPLE) || !isfinite(seconds))
		return;
	allm_pred_ring_push(&p->rc_err, allm_predict_prefill(p, s), seconds);
	allm_pred_rc_features(s, x);
	allm_pred_lsq_observe(&p->rc, x, seconds, PRED_RC_FLOOR);
	p->n_prefill_obs++;
}

void allm_predictor_observe_swap(struct allm_predictor *p, enum allm_copy_dir dir, uint64_t bytes, int32_t n_runs, double seconds)
{
	double x[4];
	ALLM_ASSERT((unsigned)dir <= 1);
	if (!(seconds >= PRED_MIN_SAMPLE) || !isfinite(seconds))
		return;
	allm_pred_ring_push(&p->swap_err, allm_predict_swap(p, dir, bytes, n_runs), seconds);
	swap_features(bytes, n_runs, x);
	allm_pred_lsq_observe(&p->swap[dir], x, seconds, PRED_SWAP_FLOOR);
	p->swap_bw[dir] = allm_pred_swap_bw(&p->swap[dir]);
	p->n_swap_obs++;
}

void allm_predictor_observe_disk(struct allm_predictor *p, enum allm_disk_dir dir, uint64_t bytes, int32_t n_runs, double seconds)
{
	double x[4];
	ALLM_ASSERT((unsigned)dir <= 1);
	if (!(seconds >= PRED_MIN_SAMPLE) || !isfinite(seconds))
		return;
	allm_pred_ring_push(&p->disk_err, allm_predict_disk(p, dir, bytes, n_runs), seconds);
	swap_features(bytes, n_runs, x);
	allm_pred_lsq_observe(&p->disk[dir], x, seconds, PRED_SWAP_FLOOR);
	p->disk_bw[dir] = allm_pred_swap_bw(&p->disk[dir]);
	p->n_disk_obs++;
}

double allm_predict_disk_failure(const struct allm_predictor *p, double now)
{
	if (p->disk_fail <= 0)
		return 0;
	double age = now > p->disk_fail_at ? now - p->disk_fail_at : 0;
	return p->disk_fail * exp2(-age / ALLM_DISK_FAIL_HALF_LIFE_S);
}

void allm_predictor_observe_disk_outcome(struct allm_predictor *p, bool failed, double now)
{
	double f = allm_predict_disk_failure(p, now);
	p->disk_fail = f + ALLM_DISK_FAIL_WEIGHT * ((failed ? 1.0 : 0.0) - f);
	p->disk_fail_at = now;
}

void allm_predictor_observe_oncpu(struct allm_predictor *p, double frac)
{
	if (!(frac > 0) || !isfinite(frac))
		return;
	frac = fmin(fmax(frac, 0.01), 1.0);
	p->oncpu = p->n_oncpu_obs ? (1 - ALLM_PRED_ONCPU_ALPHA) * p->oncpu + ALLM_PRED_ONCPU_ALPHA * frac : frac;
	p->n_oncpu_obs++;
}

double allm_predictor_oncpu(const struct allm_predictor *p)
{
	return p->oncpu;
}

void allm_predictor_observe_recompute_decision(struct allm_predictor *p, double predicted, double measured)
{
	if (!(predicted > 0) || !(measured > 0) || !isfinite(predicted) || !isfinite(measured))
		return;
	/* an EWMA of the capped log ratio: a residual of the scaled prediction
	 * would be counted again by every decision taken before the factor
	 * moved, and overshoot */
	double lim = log(ALLM_PRED_RC_DEC_STEP);
	double le = fmin(fmax(log(measured / predicted), -lim), lim);
	p->rc_dec_bias = (1 - ALLM_PRED_RC_DEC_ALPHA) * p->rc_dec_bias + ALLM_PRED_RC_DEC_ALPHA * le;
	lim = log(ALLM_PRED_RC_DEC_MAX);
	p->rc_dec_bias = fmin(fmax(p->rc_dec_bias, -lim), lim);
	p->n_rc_dec++;
}

double allm_predictor_recompute_factor(const struct allm_predictor *p)
{
	return exp(p->rc_dec_bias);
}

double allm_predictor_mape_disk(const struct allm_predictor *p)
{
	return allm_pred_ring_mape(&p->disk_err, ALLM_PRED_MAPE_MIN);
}

double allm_predictor_mape_recompute(const struct allm_predictor *p)
{
	return allm_pred_ring_mape(&p->rc_err, ALLM_PRED_MAPE_MIN);
}

double allm_predictor_mape_swap(const struct allm_predictor *p)
{
	return allm_pred_ring_mape(&p->swap_err, ALLM_PRED_MAPE_MIN);
}

void allm_predictor_reset_stats(struct allm_predictor *p)
{
	memset(&p->rc_err, 0, sizeof(p->rc_err));
	memset(&p->swap_err, 0, sizeof(p->swap_err));
	memset(&p->disk_err, 0, sizeof(p->disk_err));
}

bool allm_predictor_calibrated(const struct allm_predictor *p)
{
	return p->calibrated;
}

void allm_predictor_get_info(const struct allm_predictor *p, struct allm_predictor_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->rc_coef[0] = p->rc.coef[0];
	ret->rc_coef[1] = p->rc.coef[1] / 1e3;
	ret->rc_coef[2] = p->rc.coef[2] / 1e6;
	ret->rc_coef[3] = p->rc.coef[3];
	for (int d = 0; d < 2; d++) {
		ret->lat[d] = p->swap[d].coef[0];
		ret->bw[d] = p->swap_bw[d];
		ret->swap_scale[d] = p->swap[d].scale;
	}
	ret->n_prefill_obs = p->n_prefill_obs;
	ret->n_swap_obs = p->n_swap_obs;
	ret->mape_recompute = allm_predictor_mape_recompute(p);
	ret->mape_swap = allm_predictor_mape_swap(p);
	ret->calibrated = p->calibrated;
	ret->calib_mape_recompute = p->calib_mape_rc;
	ret->calib_mape_swap = p->calib_mape_swap;
	ret->rc_scale = p->rc.scale;
	for (int d = 0; d < 2; d++) {
		ret->disk_lat[d] = p->disk[d].coef[0];
		ret->disk_bw[d] = p->disk_bw[d];
	}
	ret->n_disk_obs = p->n_disk_obs;
	ret->mape_disk = allm_predictor_mape_disk(p);
	ret->calib_mape_disk = p->calib_mape_disk;
}

/* ---- calibration ---- */

struct calib_pt {
	double x[4];
	double y; /* median seconds */
};

static bool good_time(double t)
{
	return t >= 0 && isfinite(t);
}

/* Fits q (k features) on the points and returns the leave-one-out absolute
 * percentage errors summed into *loo_sum (count in *loo_n). -EDOM if singular. */
static int calib_fit(struct allm_pred_lsq *q, const struct calib_pt *pts, int n, double *loo_sum, int *loo_n)
{
	double A[4][4] = { { 0 } }, b[4] = { 0 }, c[4], prior[4];
	double floor = q->k == ALLM_PRED_RC_NF ? PRED_RC_FLOOR : PRED_SWAP_FLOOR;
	int ret;

	/* directions the grid leaves open (tiny max_tokens) keep the current model */
	memcpy(prior, q->coef, sizeof(prior));
	for (int i = 0; i < n; i++)
		allm_pred_acc_sample(q->k, A, b, pts[i].x, fmax(pts[i].y, PRED_MIN_SAMPLE), 1.0);
	ret = allm_pred_lsq_fit(q->k, A, b, NULL, prior, q->nonneg, c);
	if (ret < 0)
		return ret;
	allm_pred_lsq_fix(q->k, c);
	for (int i = 0; n > q->k && i < n; i++) {
		double Ai[4][4], bi[4], ci[4];
		memcpy(Ai, A, sizeof(A));
		memcpy(bi, b, sizeof(b));
		allm_pred_acc_sample(q->k, Ai, bi, pts[i].x, fmax(pts[i].y, PRED_MIN_SAMPLE), -1.0);
		if (allm_pred_lsq_fit(q->k, Ai, bi, NULL, prior, q->nonneg, ci) < 0)
			continue;
		allm_pred_lsq_fix(q->k, ci);
		double pred = allm_pred_clamp(allm_pred_dot(q->k, ci, pts[i].x), floor);
		*loo_sum += fabs(pred - pts[i].y) / fmax(pts[i].y, PRED_MIN_SAMPLE) * 100.0;
		(*loo_n)++;
	}
	allm_pred_lsq_seed(q, A, b, n, c, true);
	return 0;
}

struct calib_plan {
	int32_t rc_ns[CALIB_MAX_PTS], rc_len[CALIB_MAX_PTS];
	int n_rc, rc_reps;
	int32_t sw_blocks[CALIB_MAX_PTS], sw_runs[CALIB_MAX_PTS]; /* per direction */
	int n_sw, sw_reps;
};

static void calib_plan(const struct allm_calib_ops *ops, struct calib_plan *pl)
{
	int64_t lens[20];
	int nl = 0;

	memset(pl, 0, sizeof(*pl));
	/* below 64 tokens there is too little to fit with steps starting at 8 */
	for (int64_t len = ops->max_tokens >= 64 ? 8 : 1; len <= ops->max_tokens && nl < 18; len *= 2)
		lens[nl++] = len;
	/* cover the top of the range too: recomputes of long sequences live there */
	if (nl > 0 && nl < 20 && ops->max_tokens > lens[nl - 1] + lens[nl - 1] / 4)
		lens[nl++] = ops->max_tokens;
	for (int i = 0; i < nl; i++)
		for (int32_t ns = 1; ns <= 4; ns *= 2)
			if (ns * lens[i] <= ops->max_tokens && pl->n_rc < CALIB_MAX_PTS) {
				pl->rc_ns[pl->n_rc] = ns;
				pl->rc_len[pl->n_rc++] = (int32_t)lens[i];
			}
	pl->rc_reps = pl->n_rc * 3 <= CALIB_RC_RUNS ? 3 : pl->n_rc * 2 <= CALIB_RC_RUNS + 30 ? 2 : 1;

	int32_t maxb = ALLM_MIN(ops->max_swap_blocks, CALIB_MAX_SWAP_BLOCKS);
	if (!ops->time_swap || maxb < 1)
		return;
	for (int32_t b = 1;; b *= 2) {
		if (b > maxb)
			b = maxb; /* the top of the range, once */
		int32_t runs[2] = { 1, ALLM_MIN(b, 4) };
		for (int r = 0; r < (runs[1] > 1 ? 2 : 1); r++) {
			pl->sw_blocks[pl->n_sw] = b;
			pl->sw_runs[pl->n_sw++] = runs[r];
		}
		if (b == maxb)
			break;
	}
	pl->sw_reps = pl->n_sw * 2 * 5 <= CALIB_SWAP_RUNS ? 5 : 3;
}

/* One timed copy: a swap (out: ALLM_COPY_D2H, in: H2D) or disk I/O (out:
 * ALLM_DISK_WRITE, in: READ); out is row 0 of the predictor's, in row 1. */
static double time_one(const struct allm_calib_ops *ops, bool disk, int in, int32_t n_blocks, int32_t n_runs)
{
	return disk ? ops->time_disk(ops->user, in ? ALLM_DISK_READ : ALLM_DISK_WRITE, n_blocks, n_runs)
		    : ops->time_swap(ops->user, in ? ALLM_COPY_H2D : ALLM_COPY_D2H, n_blocks, n_runs);
}

/* Times the copies of the plan's grid in both directions (swaps, or disk I/O),
 * medians into pts[dir][], counts in n[dir]. 0 or -EIO with err. */
static int time_copies(const struct allm_calib_ops *ops, bool disk,
		       const char *what, const struct calib_plan *pl, uint64_t block_bytes,
		       struct calib_pt pts[2][CALIB_MAX_PTS], int n[2], int *done, int total,
		       struct allm_err *err)
{
	double reps[8], t;
	for (int dir = 0; dir < 2; dir++) {
		t = time_one(ops, disk, dir, ALLM_MIN(pl->sw_blocks[pl->n_sw - 1], 8), 1);
		if (!good_time(t))
			return allm_err_set(err, -EIO, "calibration: warm-up %s (%s) failed", what,
					    dir ? "in" : "out");
		for (int i = 0; i < pl->n_sw; i++) {
			for (int r = 0; r < pl->sw_reps; r++) {
				reps[r] = time_one(ops, disk, dir, pl->sw_blocks[i], pl->sw_runs[i]);
				if (!good_time(reps[r]))
					return allm_err_set(err, -EIO,
							    "calibration: %s %s of %d blocks in %d runs failed",
							    what, dir ? "in" : "out", pl->sw_blocks[i], pl->sw_runs[i]);
			}
			swap_features((uint64_t)pl->sw_blocks[i] * block_bytes, pl->sw_runs[i], pts[dir][i].x);
			pts[dir][i].y = allm_median(reps, pl->sw_reps);
			n[dir]++;
			if (ops->progress)
				ops->progress(ops->user, ++*done, total);
		}
	}
	return 0;
}

int allm_predictor_calibrate(struct allm_predictor *p, const struct allm_calib_ops *ops, struct allm_err *err)
{
	struct calib_plan pl;
	struct calib_pt rc_pts[CALIB_MAX_PTS], sw_pts[2][CALIB_MAX_PTS];
	int n_rc = 0, n_sw[2] = { 0, 0 }, done = 0, total, r;
	double reps[8], t;
	int64_t slow_tokens = INT64_MAX;
	uint64_t block_bytes;

	if (!ops || !ops->time_prefill || ops->max_tokens < 1)
		return allm_err_set(err, -EINVAL, "calibration: no prefill callback or max_tokens < 1");
	block_bytes = ops->block_bytes ? ops->block_bytes : p->key.block_bytes;
	calib_plan(ops, &pl);
	total = pl.n_rc + 2 * pl.n_sw;

	/* warm-up: page in weights, spin up threads / the GPU clock */
	t = ops->time_prefill(ops->user, 1, ALLM_MIN(ops->max_tokens, 128));
	if (!good_time(t))
		return allm_err_set(err, -EIO, "calibration: warm-up prefill failed");
	for (int i = 0; i < pl.n_rc; i++) {
		int32_t ns = pl.rc_ns[i], len = pl.rc_len[i];
		int64_t tokens = (int64_t)ns * len;
		if (tokens <= slow_tokens) {
			for (int k = 0; k < pl.rc_reps; k++) {
				reps[k] = ops->time_prefill(ops->user, ns, len);
				if (!good_time(reps[k]))
					return allm_err_set(err, -EIO, "calibration: prefill of %d x %d tokens failed",
							    ns, len);
			}
			struct allm_prefill_shape s = { ns, tokens, (double)ns * len * len };
			allm_pred_rc_features(&s, rc_pts[n_rc].x);
			rc_pts[n_rc].y = allm_median(reps, pl.rc_reps);
			if (rc_pts[n_rc].y > CALIB_SLOW_S)
				slow_tokens = ALLM_MIN(slow_tokens, tokens);
			n_rc++;
		}
		if (ops->progress)
			ops->progress(ops->user, ++done, total);
	}
	if (pl.n_sw > 0 && (r = time_copies(ops, false, "swap", &pl, block_bytes, sw_pts, n_sw,
					    &done, total, err)))
		return r;
	/* fit into copies: the predictor changes only if everything fits */
	struct allm_pred_lsq rc = p->rc, sw[2] = { p->swap[0], p->swap[1] };
	double loo_sum = 0, sw_loo_sum = 0;
	int loo_n = 0, sw_loo_n = 0;
	if (calib_fit(&rc, rc_pts, n_rc, &loo_sum, &loo_n) < 0)
		return allm_err_set(err, -EIO, "calibration: prefill timings do not determine a model");
	for (int dir = 0; dir < 2 && pl.n_sw > 0; dir++)
		if (calib_fit(&sw[dir], sw_pts[dir], n_sw[dir], &sw_loo_sum, &sw_loo_n) < 0)
			return allm_err_set(err, -EIO, "calibration: swap timings do not determine a model");
	p->rc = rc;
	p->rc_dec_bias = 0; /* a new step model: its decisions' bias is to be learned again */
	p->n_rc_dec = 0;
	p->calib_mape_rc = loo_n ? loo_sum / loo_n : NAN;
	if (pl.n_sw > 0) {
		p->swap[0] = sw[0];
		p->swap[1] = sw[1];
		p->swap_bw[0] = allm_pred_swap_bw(&sw[0]);
		p->swap_bw[1] = allm_pred_swap_bw(&sw[1]);
		p->calib_mape_swap = sw_loo_n ? sw_loo_sum / sw_loo_n : NAN;
	}
	p->calibrated = true;
	time_t now = time(NULL);
	struct tm tm;
	if (gmtime_r(&now, &tm))
		strftime(p->calibrated_at, sizeof(p->calibrated_at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return 0;
}

static double no_swap_timer(void *user, enum allm_copy_dir dir, int32_t n_blocks, int32_t n_runs)
{
	(void)user, (void)dir, (void)n_blocks, (void)n_runs;
	return -ENOSYS;
}

int allm_predictor_calibrate_disk(struct allm_predictor *p, const struct allm_calib_ops *ops,
				  struct allm_err *err)
{
	struct calib_plan pl;
	struct calib_pt pts[2][CALIB_MAX_PTS];
	int n[2] = { 0, 0 }, done = 0, r;
	double loo_sum = 0;
	int loo_n = 0;
	if (!ops || !ops->time_disk || ops->max_disk_blocks < 1)
		return allm_err_set(err, -EINVAL, "disk calibration: no disk timing callback");
	/* the swap grid, over the disk's blocks (calib_plan plans swaps only
	 * with a swap timer: any will do, it is not called) */
	struct allm_calib_ops o = *ops;
	o.max_swap_blocks = ops->max_disk_blocks;
	if (!o.time_swap)
		o.time_swap = no_swap_timer;
	calib_plan(&o, &pl);
	if ((r = time_copies(&o, true, "disk", &pl,
			     ops->block_bytes ? ops->block_bytes : p->key.block_bytes, pts, n, &done,
			     2 * pl.n_sw, err)))
		return r;
	struct allm_pred_lsq dk[2] = { p->disk[0], p->disk[1] };
	for (int dir = 0; dir < 2; dir++)
		if (calib_fit(&dk[dir], pts[dir], n[dir], &loo_sum, &loo_n) < 0)
			return allm_err_set(err, -EIO, "calibration: disk timings do not determine a model");
	for (int dir = 0; dir < 2; dir++) {
		p->disk[dir] = dk[dir];
		p->disk_bw[dir] = allm_pred_swap_bw(&dk[dir]);
	}
	p->calib_mape_disk = loo_n ? loo_sum / loo_n : NAN;
	return 0;
}
