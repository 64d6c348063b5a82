/* Description: cost predictors — calibration on a synthetic device (unseen-shape MAPE for recompute and swap), online tracking of a 2x slowdown, rolling MAPE, profile save/load/validation, default path, extreme inputs, the chance a disk swap fails (learnt from outcomes, fading with time). */
#include "predictor.h"

#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test-check.h"

#define BLOCK_BYTES (64u * 1024u)

static char tmpdir[64];

/* ---- a fake device with known costs ---- */

struct fake {
	double slow; /* multiplies every time: the device getting slower */
	uint64_t rng;
	int n_prefill, n_swap; /* timed calls */
	int fail_at; /* prefill call that fails, 0 = none */
	int progress_done, progress_total, progress_bad;
};

static double uniform(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*s >> 11) / 9007199254740992.0;
}

/* +-1 % deterministic noise */
static double noisy(struct fake *f, double t)
{
	return t * (1 + 0.02 * (uniform(&f->rng) - 0.5));
}

static double true_prefill(const struct allm_prefill_shape *s)
{
	return 2e-5 + 3e-7 * (double)s->tokens + 4e-10 * s->tokens_sq + 1e-6 * s->n_seqs;
}

static double true_swap(int dir, uint64_t bytes, int32_t runs)
{
	return runs * 5e-6 + (double)bytes / (dir ? 6e9 : 8e9);
}

static double fake_prefill(void *user, int32_t n_seqs, int32_t len)
{
	struct fake *f = user;
	struct allm_prefill_shape s = { n_seqs, (int64_t)n_seqs * len, (double)n_seqs * len * len };
	if (f->fail_at && ++f->n_prefill == f->fail_at)
		return -1;
	if (!f->fail_at)
		f->n_prefill++;
	return noisy(f, f->slow * true_prefill(&s));
}

static double fake_swap(void *user, enum allm_copy_dir dir, int32_t n_blocks, int32_t n_runs)
{
	struct fake *f = user;
	f->n_swap++;
	return noisy(f, f->slow * true_swap(dir, (uint64_t)n_blocks * BLOCK_BYTES, n_runs));
}

static void fake_progress(void *user, int done, int total)
{
	struct fake *f = user;
	if (done != f->progress_done + 1 || total <= 0 || done > total)
		f->progress_bad++;
	f->progress_done = done;
	f->progress_total = total;
}

static struct allm_calib_ops fake_ops(struct fake *f)
{
	struct allm_calib_ops ops = {
		.user = f,
		.max_tokens = 2048,
		.max_swap_blocks = 512,
		.block_bytes = BLOCK_BYTES,
		.time_prefill = fake_prefill,
		.time_swap = fake_swap,
		.progress = fake_progress,
	};
	return ops;
}

static struct allm_predictor_key test_key(void)
{
	struct allm_predictor_key k;
	memset(&k, 0, sizeof(k));
	snprintf(k.model, sizeof(k.model), "/models/stories15M");
	snprintf(k.device, sizeof(k.device), "cpu");
	snprintf(k.dtype, sizeof(k.dtype), "f32");
	k.n_layers = 6;
	k.hidden = 288;
	k.block_size = 16;
	k.block_bytes = BLOCK_BYTES;
	k.threads = 4;
	return k;
}

static struct allm_predictor *calibrated(struct fake *f)
{
	struct allm_predictor_key k = test_key();
	struct allm_predictor *p = NULL;
	struct allm_calib_ops ops;
	struct allm_err err = { "" };

	memset(f, 0, sizeof(*f));
	f->slow = 1;
	f->rng = 42;
	ops = fake_ops(f);
	if (allm_predictor_create(&k, &p) < 0)
		return NULL;
	int ret = allm_predictor_calibrate(p, &ops, &err);
	CHECK(ret == 0, "calibrate: %d %s", ret, err.msg);
	return p;
}

/* A random batch of 1..8 sequences of 4..512 tokens (the live traffic). */
static struct allm_prefill_shape random_shape(uint64_t *rng)
{
	struct allm_prefill_shape s = { 0, 0, 0 };
	s.n_seqs = 1 + (int32_t)(uniform(rng) * 8);
	for (int i = 0; i < s.n_seqs; i++) {
		int64_t n = 4 + (int64_t)(uniform(rng) * 509);
		s.tokens += n;
		s.tokens_sq += (double)n * n;
	}
	return s;
}

/* ---- tests ---- */

static void test_calibrate_unseen(void)
{
	struct fake f;
	struct allm_predictor *p = calibrated(&f);
	struct allm_predictor_info info;
	double sum = 0, sum_truth = 0, worst = 0;
	int n = 0;

	if (!p)
		return;
	CHECK(allm_predictor_calibrated(p), "calibrated flag");
	CHECK(f.progress_bad == 0 && f.progress_done == f.progress_total && f.progress_total > 0,
	      "progress %d/%d, %d bad calls", f.progress_done, f.progress_total, f.progress_bad);
	CHECK(f.n_prefill + f.n_swap <= 160, "%d timed runs, want about 150", f.n_prefill + f.n_swap);
	printf("calibration: %d prefills + %d swaps timed (incl. warm-ups), %d grid points\n", f.n_prefill,
	       f.n_swap, f.progress_total);

	/* shapes off the power-of-two grid, batch sizes it never ran, mixed lengths */
	const int32_t lens[] = { 5, 12, 24, 48, 100, 200, 300, 700, 1000, 1500, 2000 };
	const int32_t nss[] = { 1, 3, 5, 7 };
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(lens); i++)
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(nss); j++) {
			if ((int64_t)lens[i] * nss[j] > 2048)
				continue;
			struct allm_prefill_shape s = { nss[j], (int64_t)nss[j] * lens[i],
							(double)nss[j] * lens[i] * lens[i] };
			double pred = allm_predict_prefill(p, &s), truth = true_prefill(&s);
			double meas = noisy(&f, truth);
			double e = fabs(pred - meas) / meas * 100;
			sum += e;
			sum_truth += fabs(pred - truth) / truth * 100;
			worst = fmax(worst, e);
			n++;
		}
	uint64_t rng = 7;
	for (int i = 0; i < 40; i++) {
		struct allm_prefill_shape s = random_shape(&rng);
		double pred = allm_predict_prefill(p, &s), truth = true_prefill(&s), meas = noisy(&f, truth);
		double e = fabs(pred - meas) / meas * 100;
		sum += e;
		sum_truth += fabs(pred - truth) / truth * 100;
		worst = fmax(worst, e);
		n++;
	}
	double mape = sum / n;
	printf("recompute: unseen-shape MAPE %.3f %% vs measured (%.3f %% vs noise-free truth, worst %.2f %%) over %d shapes\n",
	       mape, sum_truth / n, worst, n);
	CHECK(mape <= 2.0, "recompute MAPE %.3f %% > 2 %%", mape);
	double rc = allm_predict_recompute(p, 777);
	struct allm_prefill_shape s777 = { 1, 777, 777.0 * 777 };
	CHECK(rc == allm_predict_prefill(p, &s777), "recompute = prefill of one sequence");

	/* swaps: sizes off the grid and beyond the 64-block cap, other run counts */
	const int32_t blocks[] = { 3, 5, 10, 20, 50, 100, 200 };
	sum = sum_truth = worst = 0;
	n = 0;
	for (int dir = 0; dir < 2; dir++)
		for (size_t i = 0; i < ALLM_ARRAY_SIZE(blocks); i++)
			for (int32_t runs = 1; runs <= ALLM_MIN(blocks[i], 8); runs += 2) {
				uint64_t bytes = (uint64_t)blocks[i] * BLOCK_BYTES;
				double pred = allm_predict_swap(p, dir, bytes, runs);
				double truth = true_swap(dir, bytes, runs), meas = noisy(&f, truth);
				double e = fabs(pred - meas) / meas * 100;
				sum += e;
				sum_truth += fabs(pred - truth) / truth * 100;
				worst = fmax(worst, e);
				n++;
			}
	mape = sum / n;
	printf("swap: unseen-shape MAPE %.3f %% vs measured (%.3f %% vs truth, worst %.2f %%) over %d shapes\n", mape,
	       sum_truth / n, worst, n);
	CHECK(mape <= 4.0, "swap MAPE %.3f %% > 4 %%", mape);

	allm_predictor_get_info(p, &info);
	printf("fit: t = %.3g + %.3g*tokens + %.3g*tokens_sq + %.3g*n_seqs s (truth 2e-05 3e-07 4e-10 1e-06)\n",
	       info.rc_coef[0], info.rc_coef[1], info.rc_coef[2], info.rc_coef[3]);
	printf("fit: d2h %.3g B/s + %.3g s/run, h2d %.3g B/s + %.3g s/run (truth 8e9, 6e9, 5e-6)\n", info.bw[0],
	       info.lat[0], info.bw[1], info.lat[1]);
	printf("calibration leave-one-out MAPE: recompute %.3f %%, swap %.3f %%\n", info.calib_mape_recompute,
	       info.calib_mape_swap);
	CHECK(info.calibrated && info.n_prefill_obs == 0 && info.n_swap_obs == 0, "info flags");
	CHECK(fabs(info.bw[0] / 8e9 - 1) < 0.05 && fabs(info.bw[1] / 6e9 - 1) < 0.05, "bandwidths %g %g", info.bw[0],
	      info.bw[1]);
	CHECK(fabs(info.lat[0] / 5e-6 - 1) < 0.2 && fabs(info.lat[1] / 5e-6 - 1) < 0.2, "latencies %g %g",
	      info.lat[0], info.lat[1]);
	CHECK(isfinite(info.calib_mape_recompute) && info.calib_mape_recompute < 2, "LOO recompute %g",
	      info.calib_mape_recompute);
	CHECK(isfinite(info.calib_mape_swap) && info.calib_mape_swap < 4, "LOO swap %g", info.calib_mape_swap);
	CHECK(isnan(info.mape_recompute) && isnan(info.mape_swap), "no live samples yet");
	allm_predictor_free(p);
}

/* Max relative error of the predictions against the (noise-free) truth. */
static double rc_max_err(const struct allm_predictor *p, double slow)
{
	double worst = 0;
	for (int32_t len = 10; len <= 2000; len = len * 3)
		for (int32_t ns = 1; ns <= 4 && ns * len <= 2048; ns++) {
			struct allm_prefill_shape s = { ns, (int64_t)ns * len, (double)ns * len * len };
			double truth = slow * true_prefill(&s);
			worst = fmax(worst, fabs(allm_predict_prefill(p, &s) - truth) / truth);
		}
	return worst;
}

static double swap_max_err(const struct allm_predictor *p, double slow)
{
	double worst = 0;
	for (int dir = 0; dir < 2; dir++)
		for (int32_t b = 1; b <= 256; b *= 4)
			for (int32_t runs = 1; runs <= ALLM_MIN(b, 4); runs++) {
				uint64_t bytes = (uint64_t)b * BLOCK_BYTES;
				double truth = slow * true_swap(dir, bytes, runs);
				worst = fmax(worst, fabs(allm_predict_swap(p, dir, bytes, runs) - truth) / truth);
			}
	return worst;
}

static void observe_some(struct allm_predictor *p, struct fake *f, uint64_t *rng, int n)
{
	for (int i = 0; i < n; i++) {
		struct allm_prefill_shape s = random_shape(rng);
		allm_predictor_observe_prefill(p, &s, noisy(f, f->slow * true_prefill(&s)));
		int dir = (int)(uniform(rng) * 2);
		int32_t b = 1 + (int32_t)(uniform(rng) * 100), runs = 1 + (int32_t)(uniform(rng) * ALLM_MIN(b, 6));
		uint64_t bytes = (uint64_t)b * BLOCK_BYTES;
		allm_predictor_observe_swap(p, dir, bytes, runs, noisy(f, f->slow * true_swap(dir, bytes, runs)));
	}
}

static void test_online_tracking(void)
{
	struct fake f;
	struct allm_predictor *p = calibrated(&f);
	uint64_t rng = 99;

	if (!p)
		return;
	observe_some(p, &f, &rng, 20);
	double rc0 = allm_predictor_mape_recompute(p), sw0 = allm_predictor_mape_swap(p);
	double e0 = rc_max_err(p, 1), s0 = swap_max_err(p, 1);
	f.slow = 2;
	observe_some(p, &f, &rng, 10);
	double rc1 = allm_predictor_mape_recompute(p), sw1 = allm_predictor_mape_swap(p);
	observe_some(p, &f, &rng, 40);
	double e50 = rc_max_err(p, 2), s50 = swap_max_err(p, 2); /* 25 swaps per direction */
	observe_some(p, &f, &rng, 150);
	double rc2 = allm_predictor_mape_recompute(p), sw2 = allm_predictor_mape_swap(p);
	double e200 = rc_max_err(p, 2), s200 = swap_max_err(p, 2);

	printf("online: rolling MAPE recompute %.2f -> %.2f (after 10 slow) -> %.2f %%, swap %.2f -> %.2f -> %.2f %%\n",
	       rc0, rc1, rc2, sw0, sw1, sw2);
	printf("online: worst error vs truth: recompute %.2f %% (before), %.2f %% (50 slow samples), %.2f %% (200); "
	       "swap %.2f %%, %.2f %%, %.2f %%\n",
	       e0 * 100, e50 * 100, e200 * 100, s0 * 100, s50 * 100, s200 * 100);
	CHECK(rc0 < 2 && sw0 < 4, "before the slowdown: %g %g", rc0, sw0);
	CHECK(rc1 > rc0 + 5 && sw1 > sw0 + 5, "rolling MAPE rises: %g -> %g, %g -> %g", rc0, rc1, sw0, sw1);
	CHECK(rc2 < rc1 && sw2 < sw1 && rc2 < 3 && sw2 < 4, "and falls: %g, %g", rc2, sw2);
	CHECK(e50 < 0.05, "recompute within 5 %% after 50 slow samples: %g", e50);
	CHECK(s50 < 0.05, "swap within 5 %% after 50 slow samples: %g", s50);
	CHECK(e200 < 0.03 && s200 < 0.03, "settled: %g %g", e200, s200);

	allm_predictor_reset_stats(p);
	CHECK(isnan(allm_predictor_mape_recompute(p)) && isnan(allm_predictor_mape_swap(p)), "reset-stats");
	CHECK(fabs(rc_max_err(p, 2) - e200) < 1e-15, "reset-stats keeps the model");
	allm_predictor_free(p);
}

/* Serving at once: a first estimate (off by 2x, as a rough one is) predicts
 * from the start, is not calibrated, learns from real prefills and becomes
 * calibrated (savable) after ALLM_PRED_LEARNED_OBS of them, once its error is low. */
static void test_estimate_learned(void)
{
	struct allm_predictor_key k = test_key();
	struct allm_predictor *p = NULL;
	struct fake f = {.slow = 1, .rng = 5};
	uint64_t rng = 77;
	char path[600];
	struct allm_err err = {{0}};
	if (allm_predictor_create(&k, &p) < 0) {
		CHECK(0, "create");
		return;
	}
	double rc[4] = {4e-5, 6e-7, 8e-10, 0}, lat[2] = {1e-5, 1e-5}, bw[2] = {4e9, 3e9};
	allm_predictor_estimate(p, rc, lat, bw);
	struct allm_prefill_shape s = {1, 100, 1e4};
	double pred = allm_predict_prefill(p, &s), want = rc[0] + rc[1] * 100 + rc[2] * 1e4;
	CHECK(fabs(pred - want) < 1e-3 * want, "the estimate predicts from the start: %g, want %g", pred, want);
	CHECK(!allm_predictor_calibrated(p) && p->estimated, "an estimate is not a calibration");
	snprintf(path, sizeof(path), "%s/estimated.json", tmpdir);
	CHECK(allm_predictor_save(p, path, &err) == -EINVAL, "an estimate is not saved");
	int learned_at = -1;
	for (int i = 0; i < 8 * ALLM_PRED_LEARNED_OBS && learned_at < 0; i++) {
		int32_t n = 1 + (int32_t)(uniform(&rng) * 500);
		struct allm_prefill_shape x = {1, n, (double)n * n};
		allm_predictor_observe_prefill(p, &x, noisy(&f, true_prefill(&x)));
		if (allm_predictor_learned(p))
			learned_at = i + 1;
	}
	printf("estimate: learned from %d real prefills, rolling MAPE %.2f %%\n", learned_at,
	       allm_predictor_mape_recompute(p));
	CHECK(learned_at >= ALLM_PRED_LEARNED_OBS && learned_at < 8 * ALLM_PRED_LEARNED_OBS,
	      "learned after %d prefills", learned_at);
	CHECK(allm_predictor_calibrated(p) && !p->estimated && p->calibrated_at[0], "calibrated once learned");
	CHECK(!allm_predictor_learned(p), "learned only once");
	CHECK(allm_predictor_save(p, path, &err) == 0, "a learned predictor is saved: %s", err.msg);
	/* the prior still pulls toward the 2x-off estimate in directions few samples excite */
	CHECK(rc_max_err(p, 1) < 0.15, "within 15 %% of the truth everywhere: %g", rc_max_err(p, 1));
	allm_predictor_free(p);
}

static void test_rolling_mape(void)
{
	struct allm_predictor_key k = test_key();
	struct allm_predictor *p = NULL;
	struct allm_prefill_shape s[3] = { { 1, 100, 1e4 }, { 2, 600, 1.8e5 }, { 1, 1000, 1e6 } };
	double meas[3] = { 0.004, 0.05, 0.02 }, want = 0;

	if (allm_predictor_create(&k, &p) < 0) {
		CHECK(0, "create");
		return;
	}
	CHECK(isnan(allm_predictor_mape_recompute(p)) && isnan(allm_predictor_mape_swap(p)), "NAN before samples");
	CHECK(!allm_predictor_calibrated(p), "fresh predictor is uncalibrated");
	/* no rolling error before ALLM_PRED_MAPE_MIN samples (allmctl shows "-"),
	 * then the mean of each prediction's error before its sample */
	enum { N = ALLM_PRED_MAPE_MIN };
	for (int i = 0; i < N; i++) {
		double pred = allm_predict_prefill(p, &s[i % 3]); /* before it sees the sample */
		want += fabs(pred - meas[i % 3]) / meas[i % 3] * 100 / N;
		allm_predictor_observe_prefill(p, &s[i % 3], meas[i % 3]);
		if (i + 1 < N)
			CHECK(isnan(allm_predictor_mape_recompute(p)), "a MAPE of %d samples", i + 1);
	}
	double got = allm_predictor_mape_recompute(p);
	CHECK(fabs(got - want) < 1e-4 * want, "%d-sample MAPE %.6f, by hand %.6f", N, got, want);
	CHECK(isnan(allm_predictor_mape_swap(p)), "swap ring untouched");

	double swant = 0;
	for (int i = 0; i < N; i++) {
		double sp = allm_predict_swap(p, ALLM_COPY_H2D, 1 << 20, 2);
		swant += fabs(sp - 1e-3) / 1e-3 * 100 / N;
		allm_predictor_observe_swap(p, ALLM_COPY_H2D, 1 << 20, 2, 1e-3);
		if (i + 1 < N)
			CHECK(isnan(allm_predictor_mape_swap(p)), "a swap MAPE of %d samples", i + 1);
	}
	CHECK(fabs(allm_predictor_mape_swap(p) - swant) < 1e-3 * swant, "swap MAPE %g, by hand %g",
	      allm_predictor_mape_swap(p), swant);

	/* bad measurements are ignored, not learnt */
	struct allm_predictor_info a, b;
	allm_predictor_get_info(p, &a);
	allm_predictor_observe_prefill(p, &s[0], NAN);
	allm_predictor_observe_prefill(p, &s[0], -1);
	allm_predictor_observe_swap(p, ALLM_COPY_D2H, 4096, 1, INFINITY);
	allm_predictor_get_info(p, &b);
	CHECK(a.n_prefill_obs == N && b.n_prefill_obs == N && b.n_swap_obs == N, "bad samples ignored");
	CHECK(!memcmp(a.rc_coef, b.rc_coef, sizeof(a.rc_coef)), "bad samples change nothing");

	/* the ring keeps only the last ALLM_PRED_RING: 100 exact-ish samples push out the 3 above */
	for (int i = 0; i < ALLM_PRED_RING; i++)
		allm_predictor_observe_prefill(p, &s[0], allm_predict_prefill(p, &s[0]));
	CHECK(allm_predictor_mape_recompute(p) < 1e-3, "old samples left the window: %g",
	      allm_predictor_mape_recompute(p));
	allm_predictor_free(p);
}

/* The recompute decisions' bias (issue 53): a re-prefill that keeps costing 2x
 * what was predicted makes the next predictions 2x; the load share is an EWMA
 * of the steps'. */
static void test_decision_bias(void)
{
	struct allm_predictor_key k = test_key();
	struct allm_predictor *p = NULL;
	if (allm_predictor_create(&k, &p) < 0) {
		CHECK(0, "create");
		return;
	}
	CHECK(allm_predictor_recompute_factor(p) == 1.0, "factor %g before any decision",
	      allm_predictor_recompute_factor(p));
	allm_predictor_observe_recompute_decision(p, NAN, 1.0);
	allm_predictor_observe_recompute_decision(p, 0.1, -1);
	allm_predictor_observe_recompute_decision(p, 0.1, INFINITY);
	CHECK(allm_predictor_recompute_factor(p) == 1.0 && p->n_rc_dec == 0, "bad pairs learnt");
	/* predicted 0.1 s (the step model's), measured 0.13 s: forty decisions
	 * measured in a row, as a burst's are, settle at 1.3x, not beyond */
	for (int i = 0; i < 40; i++)
		allm_predictor_observe_recompute_decision(p, 0.1, 0.13);
	double f = allm_predictor_recompute_factor(p);
	CHECK(fabs(f - 1.3) < 1e-3, "factor %g after 40 decisions at 1.3x, want 1.3", f);
	/* one outlier moves it by ALLM_PRED_RC_DEC_ALPHA of a capped log ratio */
	allm_predictor_observe_recompute_decision(p, 0.1, 1e6);
	double g = allm_predictor_recompute_factor(p);
	CHECK(fabs(log(g) - ((1 - ALLM_PRED_RC_DEC_ALPHA) * log(f) + ALLM_PRED_RC_DEC_ALPHA * log(ALLM_PRED_RC_DEC_STEP))) < 1e-9,
	      "an outlier took the factor from %g to %g", f, g);
	for (int i = 0; i < 200; i++)
		allm_predictor_observe_recompute_decision(p, 1e-9, 1e6);
	CHECK(fabs(allm_predictor_recompute_factor(p) - ALLM_PRED_RC_DEC_STEP) < 1e-6, "factor %g, want %g at most",
	      allm_predictor_recompute_factor(p), ALLM_PRED_RC_DEC_STEP);

	CHECK(allm_predictor_oncpu(p) == 1.0, "on-CPU share %g before a step", allm_predictor_oncpu(p));
	allm_predictor_observe_oncpu(p, NAN);
	allm_predictor_observe_oncpu(p, 0);
	CHECK(allm_predictor_oncpu(p) == 1.0, "bad shares learnt");
	allm_predictor_observe_oncpu(p, 0.5);
	CHECK(allm_predictor_oncpu(p) == 0.5, "the first share taken whole: %g", allm_predictor_oncpu(p));
	allm_predictor_observe_oncpu(p, 3.0); /* clamped to 1 */
	CHECK(fabs(allm_predictor_oncpu(p) - (0.5 + ALLM_PRED_ONCPU_ALPHA * 0.5)) < 1e-12, "EWMA %g",
	      allm_predictor_oncpu(p));
	allm_predictor_free(p);
}

static void test_extremes(void)
{
	struct fake f;
	struct allm_predictor_key k = test_key();
	struct allm_predictor *ps[2] = { NULL, NULL };

	allm_predictor_create(&k, &ps[0]);
	ps[1] = calibrated(&f);
	for (int i = 0; i < 2; i++) {
		struct allm_predictor *p = ps[i];
		if (!p)
			continue;
		struct allm_prefill_shape shapes[] = {
			{ 0, 0, 0 }, { 1, 0, 0 }, { 1, 1000000, 1e12 }, { 256, 1000000, 1e12 / 256 },
			{ 1, -5, -3 }, { 1, 10, NAN }, { -3, 10, INFINITY }, { 1, INT64_MAX / 2, 1e300 },
		};
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(shapes); j++) {
			double t = allm_predict_prefill(p, &shapes[j]);
			CHECK(t > 0 && isfinite(t), "%s: prefill shape %zu -> %g", i ? "calibrated" : "fresh", j, t);
		}
		int64_t ns[] = { 0, 1, 1000000, -1 };
		for (size_t j = 0; j < ALLM_ARRAY_SIZE(ns); j++) {
			double t = allm_predict_recompute(p, ns[j]);
			CHECK(t > 0 && isfinite(t), "recompute(%lld) -> %g", (long long)ns[j], t);
		}
		CHECK(allm_predict_recompute(p, 1000000) > allm_predict_recompute(p, 1000), "longer costs more");
		for (int dir = 0; dir < 2; dir++) {
			uint64_t bytes[] = { 0, 1, 1ull << 40, UINT64_MAX };
			int32_t runs[] = { 0, 1, -4, INT32_MAX };
			for (size_t a = 0; a < ALLM_ARRAY_SIZE(bytes); a++)
				for (size_t b = 0; b < ALLM_ARRAY_SIZE(runs); b++) {
					double t = allm_predict_swap(p, dir, bytes[a], runs[b]);
					CHECK(t > 0 && isfinite(t), "swap(%d, %llu, %d) -> %g", dir,
					      (unsigned long long)bytes[a], runs[b], t);
				}
		}
		/* learning from absurd inputs keeps predictions sane */
		struct allm_prefill_shape big = { 1, 1000000, 1e12 };
		allm_predictor_observe_prefill(p, &big, 1e-9);
		allm_predictor_observe_swap(p, ALLM_COPY_D2H, 0, 0, 1e-9);
		double t = allm_predict_prefill(p, &shapes[2]);
		CHECK(t > 0 && isfinite(t), "after absurd samples: %g", t);
		t = allm_predict_swap(p, ALLM_COPY_D2H, 1 << 20, 1);
		CHECK(t > 0 && isfinite(t), "after absurd swap samples: %g", t);
		allm_predictor_free(p);
	}
}

/* A failing disk (full: ENOSPC) is learnt from outcomes and forgotten with time. */
static void test_disk_failures(void)
{
	struct allm_predictor_key k = test_key();
	struct allm_predictor *p = NULL;
	if (allm_predictor_create(&k, &p) < 0) {
		CHECK(0, "create");
		return;
	}
	CHECK(allm_predict_disk_failure(p, 10) == 0, "no outcome yet: no failure expected");
	allm_predictor_observe_disk_outcome(p, true, 10);
	CHECK(allm_predict_disk_failure(p, 10) >= ALLM_DISK_FAIL_SKIP, "one failure stops the disk being chosen");
	double half = allm_predict_disk_failure(p, 10 + ALLM_DISK_FAIL_HALF_LIFE_S);
	CHECK(fabs(half - ALLM_DISK_FAIL_WEIGHT / 2) < 1e-9, "a half-life later, half as likely: %g", half);
	CHECK(allm_predict_disk_failure(p, 10 + 3 * ALLM_DISK_FAIL_HALF_LIFE_S) < ALLM_DISK_FAIL_SKIP,
	      "the disk is tried again after a while");
	allm_predictor_observe_disk_outcome(p, true, 11);
	allm_predictor_observe_disk_outcome(p, false, 11);
	allm_predictor_observe_disk_outcome(p, false, 11);
	CHECK(allm_predict_disk_failure(p, 11) < ALLM_DISK_FAIL_SKIP, "successes bring it back: %g",
	      allm_predict_disk_failure(p, 11));
	CHECK(allm_predict_disk_failure(p, 5) <= 1, "a clock that went back: still a probability");
	allm_predictor_free(p);
}

static void test_calibrate_errors(void)
{
	struct fake f;
	struct allm_predictor_key k = test_key();
	struct allm_predictor *p = NULL;
	struct allm_err err = { "" };

	if (allm_predictor_create(&k, &p) < 0)
		return;
	double before = allm_predict_recompute(p, 500);
	memset(&f, 0, sizeof(f));
	f.slow = 1;
	f.fail_at = 5;
	struct allm_calib_ops ops = fake_ops(&f);
	int ret = allm_predictor_calibrate(p, &ops, &err);
	CHECK(ret == -EIO && strstr(err.msg, "prefill"), "failing callback: %d %s", ret, err.msg);
	CHECK(!allm_predictor_calibrated(p) && allm_predict_recompute(p, 500) == before, "predictor unchanged");
	ops.time_prefill = NULL;
	CHECK(allm_predictor_calibrate(p, &ops, &err) == -EINVAL, "no callback");
	CHECK(allm_predictor_calibrate(p, NULL, &err) == -EINVAL, "no ops");

	/* a tiny engine: 3-token context, no CPU swap space */
	memset(&f, 0, sizeof(f));
	f.slow = 1;
	ops = fake_ops(&f);
	ops.max_tokens = 3;
	ops.max_swap_blocks = 0;
	ops.progress = NULL;
	ret = allm_predictor_calibrate(p, &ops, &err);
	CHECK(ret == 0, "tiny calibration: %d %s", ret, err.msg);
	CHECK(f.n_swap == 0, "no swaps timed without swap space");
	for (int64_t n = 1; n <= 3; n++) {
		double t = allm_predict_recompute(p, n), truth = 2e-5 + 3e-7 * n + 4e-10 * n * n + 1e-6;
		CHECK(fabs(t / truth - 1) < 0.05, "tiny: recompute(%lld) %g vs %g", (long long)n, t, truth);
	}
	double t = allm_predict_recompute(p, 100000);
	CHECK(t > 0 && isfinite(t), "tiny: extrapolation %g", t);
	allm_predictor_free(p);
}

/* ---- profiles ---- */


static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Loads the saved profile as JSON, lets `edit` break it, writes it to `out`. */
static void write_edited(const char *src, const char *out, void (*edit)(json_t *))
{
	json_error_t je;
	json_t *root = json_load_file(src, 0, &je);
	if (!root) {
		CHECK(0, "reloading %s: %s", src, je.text);
		return;
	}
	edit(root);
	json_dump_file(root, out, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
	json_decref(root);
}

static json_t *at(json_t *r, const char *a, const char *b)
{
	json_t *o = json_object_get(r, a);
	return b ? json_object_get(o, b) : o;
}

static void ed_bw_string(json_t *r) { json_object_set_new(at(r, "swap", "d2h"), "bw", json_string("fast")); }
static void ed_bw_negative(json_t *r) { json_object_set_new(at(r, "swap", "h2d"), "bw", json_real(-8e9)); }
static void ed_lat_negative(json_t *r) { json_object_set_new(at(r, "swap", "h2d"), "lat", json_real(-1e-6)); }
static void ed_coef_string(json_t *r) { json_array_set_new(at(r, "recompute", "coef"), 1, json_string("nan")); }
static void ed_coef_short(json_t *r) { json_array_remove(at(r, "recompute", "coef"), 3); }
static void ed_xtx_type(json_t *r) { json_object_set_new(at(r, "recompute", NULL), "xtx", json_integer(5)); }
static void ed_xtx_diag(json_t *r)
{
	json_array_set_new(json_array_get(at(r, "recompute", "xtx"), 2), 2, json_real(-1));
}
static void ed_no_scale(json_t *r) { json_object_del(at(r, "recompute", NULL), "scale"); }
static void ed_zero_scale(json_t *r) { json_object_set_new(at(r, "swap", "d2h"), "scale", json_real(0)); }
static void ed_version(json_t *r) { json_object_set_new(r, "version", json_integer(1)); } /* older */
static void ed_no_key(json_t *r) { json_object_del(r, "key"); }
static void ed_key_type(json_t *r) { json_object_set_new(at(r, "key", NULL), "threads", json_string("4")); }
static void ed_mape(json_t *r) { json_object_set_new(at(r, "calib_mape", NULL), "swap", json_string("x")); }
static void ed_neg_slope(json_t *r) { json_array_set_new(at(r, "recompute", "coef"), 2, json_real(-1e-3)); }
static void ed_model(json_t *r) { json_object_set_new(at(r, "key", NULL), "model", json_string("/models/other")); }
static void ed_block_size(json_t *r) { json_object_set_new(at(r, "key", NULL), "block_size", json_integer(32)); }

static bool same_predictions(const struct allm_predictor *a, const struct allm_predictor *b, double tol)
{
	uint64_t rng = 5;
	for (int i = 0; i < 200; i++) {
		struct allm_prefill_shape s = random_shape(&rng);
		double x = allm_predict_prefill(a, &s), y = allm_predict_prefill(b, &s);
		if (tol == 0 ? x != y : fabs(x - y) > tol * x)
			return false;
		int dir = i & 1;
		uint64_t bytes = (uint64_t)(uniform(&rng) * 1e8);
		int32_t runs = 1 + i % 7;
		x = allm_predict_swap(a, dir, bytes, runs);
		y = allm_predict_swap(b, dir, bytes, runs);
		if (tol == 0 ? x != y : fabs(x - y) > tol * x)
			return false;
	}
	return true;
}

static void test_profile(void)
{
	struct fake f;
	struct allm_predictor_key k = test_key();
	struct allm_predictor *p = calibrated(&f), *q = NULL;
	struct allm_err err = { "" };
	char path[128], bad[128];
	int ret;

	if (!p)
		return;
	snprintf(path, sizeof(path), "%s/profile.json", tmpdir);
	snprintf(bad, sizeof(bad), "%s/bad.json", tmpdir);

	/* some live samples so that every part of the state is non-trivial */
	uint64_t rng = 3;
	f.slow = 1.3;
	observe_some(p, &f, &rng, 30);
	ret = allm_predictor_save(p, path, &err);
	CHECK(ret == 0, "save: %d %s", ret, err.msg);

	allm_predictor_create(&k, &q);
	CHECK(allm_predictor_save(q, bad, &err) == -EINVAL, "saving an uncalibrated predictor");
	ret = allm_predictor_load(q, path, &err);
	CHECK(ret == 0, "load: %d %s", ret, err.msg);
	CHECK(allm_predictor_calibrated(q), "loaded = calibrated");
	CHECK(same_predictions(p, q, 0), "identical predictions after the round trip");
	struct allm_predictor_info ip, iq;
	allm_predictor_get_info(p, &ip);
	allm_predictor_get_info(q, &iq);
	CHECK(ip.rc_scale == iq.rc_scale && ip.calib_mape_recompute == iq.calib_mape_recompute &&
		      ip.calib_mape_swap == iq.calib_mape_swap,
	      "scale and calibration error kept");
	/* the statistics came along too: both learn the same from the same samples */
	uint64_t r1 = 11, r2 = 11;
	struct fake f2 = f; /* same noise for both */
	observe_some(p, &f, &r1, 5);
	observe_some(q, &f2, &r2, 5);
	CHECK(same_predictions(p, q, 1e-9), "same learning after the round trip");
	allm_predictor_free(q);
	q = NULL;

	/* failures: a fresh predictor each time, which must stay as it was */
	allm_predictor_create(&k, &q);
	double before = allm_predict_recompute(q, 300);
	char missing[128];
	snprintf(missing, sizeof(missing), "%s/nope.json", tmpdir);
	CHECK(allm_predictor_load(q, missing, &err) == -ENOENT, "missing file");

	/* truncated */
	FILE *in = fopen(path, "rb");
	char buf[16384];
	size_t n = in ? fread(buf, 1, sizeof(buf), in) : 0;
	if (in)
		fclose(in);
	FILE *out = fopen(bad, "wb");
	fwrite(buf, 1, n / 2, out);
	fclose(out);
	ret = allm_predictor_load(q, bad, &err);
	CHECK(ret == -EINVAL && strstr(err.msg, "invalid JSON") && strstr(err.msg, "field"), "truncated: %d %s", ret,
	      err.msg);
	printf("truncated profile: %s\n", err.msg);

	/* a NaN literal (JSON has none): the parse error names the field it sits in */
	char *c = strstr(buf, "\"coef\"");
	char *num = c ? strpbrk(c, "-0123456789") : NULL;
	if (num) {
		size_t span = strspn(num, "-+.0123456789eE");
		out = fopen(bad, "wb");
		fwrite(buf, 1, (size_t)(num - buf), out);
		fputs("NaN", out);
		fwrite(num + span, 1, n - (size_t)(num + span - buf), out);
		fclose(out);
		ret = allm_predictor_load(q, bad, &err);
		CHECK(ret == -EINVAL && strstr(err.msg, "\"coef\""), "NaN coefficient: %d %s", ret, err.msg);
		printf("NaN coefficient: %s\n", err.msg);
	} else {
		CHECK(0, "no coef in the saved profile");
	}

	struct {
		void (*edit)(json_t *);
		int want;
		const char *field;
	} cases[] = {
		{ ed_bw_string, -EINVAL, "swap.d2h.bw" },
		{ ed_bw_negative, -EINVAL, "swap.h2d.bw" },
		{ ed_lat_negative, -EINVAL, "swap.h2d.lat" },
		{ ed_coef_string, -EINVAL, "recompute.coef[1]" },
		{ ed_coef_short, -EINVAL, "recompute.coef" },
		{ ed_xtx_type, -EINVAL, "recompute.xtx" },
		{ ed_xtx_diag, -EINVAL, "recompute.xtx[2][2]" },
		{ ed_no_scale, -EINVAL, "recompute.scale" },
		{ ed_zero_scale, -EINVAL, "swap.d2h.scale" },
		{ ed_version, -EINVAL, "version" },
		{ ed_no_key, -EINVAL, "key" },
		{ ed_key_type, -EINVAL, "key.threads" },
		{ ed_mape, -EINVAL, "calib_mape.swap" },
		{ ed_neg_slope, -EINVAL, "recompute.coef[2]" },
		{ ed_model, -ESTALE, "model" },
		{ ed_block_size, -ESTALE, "block_size" },
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(cases); i++) {
		write_edited(path, bad, cases[i].edit);
		err.msg[0] = 0;
		ret = allm_predictor_load(q, bad, &err);
		CHECK(ret == cases[i].want && strstr(err.msg, cases[i].field), "case %zu: %d (want %d) \"%s\" (want \"%s\")",
		      i, ret, cases[i].want, err.msg, cases[i].field);
	}
	printf("e.g. %s\n", err.msg);
	CHECK(!allm_predictor_calibrated(q) && allm_predict_recompute(q, 300) == before, "failed loads change nothing");
	allm_predictor_free(q);
	q = NULL;

	/* a predictor for another key sees the good profile as stale */
	struct allm_predictor_key k2 = k;
	k2.threads = 8;
	allm_predictor_create(&k2, &q);
	ret = allm_predictor_load(q, path, &err);
	CHECK(ret == -ESTALE && strstr(err.msg, "threads"), "other threads: %d %s", ret, err.msg);
	allm_predictor_free(q);
	allm_predictor_free(p);
}

static void test_default_path(void)
{
	struct allm_predictor_key k = test_key(), k2;
	char a[512], b[512], want[256], small[16];
	struct stat st;
	int ret;

	snprintf(k.model, sizeof(k.model), "/models/My Model!/");
	snprintf(k.device, sizeof(k.device), "NVIDIA H100 80GB HBM3");
	snprintf(want, sizeof(want), "%s/xdg", tmpdir);
	setenv("XDG_CACHE_HOME", want, 1);
	ret = allm_predictor_default_path(&k, a, sizeof(a));
	CHECK(ret == 0, "default path: %d", ret);
	snprintf(want, sizeof(want), "%s/xdg/adaptivellm/My_Model__NVIDIA_H100_80GB_HBM3_f32_", tmpdir);
	CHECK(!strncmp(a, want, strlen(want)) && strstr(a, ".json"), "path %s", a);
	snprintf(want, sizeof(want), "%s/xdg/adaptivellm", tmpdir);
	CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode), "directory created");
	printf("default path: %s\n", a);

	k2 = k;
	k2.block_size = 32;
	allm_predictor_default_path(&k2, b, sizeof(b));
	CHECK(strcmp(a, b), "another key, another file");
	allm_predictor_default_path(&k, b, sizeof(b));
	CHECK(!strcmp(a, b), "stable");

	setenv("XDG_CACHE_HOME", "relative/dir", 1); /* invalid per XDG: ignored */
	snprintf(want, sizeof(want), "%s/home", tmpdir);
	setenv("HOME", want, 1);
	ret = allm_predictor_default_path(&k, a, sizeof(a));
	snprintf(want, sizeof(want), "%s/home/.cache/adaptivellm/", tmpdir);
	CHECK(ret == 0 && !strncmp(a, want, strlen(want)), "HOME fallback: %d %s", ret, a);
	CHECK(allm_predictor_default_path(&k, small, sizeof(small)) == -ENAMETOOLONG, "small buffer");
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	CHECK(allm_predictor_default_path(&k, a, sizeof(a)) == -ENOENT, "no HOME");
}

int main(void)
{
	size_t mem0 = allm_mem_in_use();

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-predictor-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_calibrate_unseen();
	test_online_tracking();
	test_estimate_learned();
	test_rolling_mape();
	test_decision_bias();
	test_extremes();
	test_calibrate_errors();
	test_disk_failures();
	test_profile();
	test_default_path();
	nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	CHECK(allm_mem_in_use() == mem0, "leak: %zu bytes", allm_mem_in_use() - mem0);
	if (n_fail) {
		fprintf(stderr, "%d check(s) failed\n", n_fail);
		return 1;
	}
	printf("ok\n");
	return 0;
}
