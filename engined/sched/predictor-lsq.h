/* Private to predictor*.c: the weighted least-squares fitter both cost models
 * are made of (struct allm_pred_lsq in predictor.h), and the constants that tune
 * its forgetting, prior and clamps. */
#ifndef ALLM_PREDICTOR_LSQ_H
#define ALLM_PREDICTOR_LSQ_H

#include "predictor.h"

/* Forgetting per observation: in steady state the live data have an effective
 * window of ~20 samples, enough to average 4 coefficients over the noise. When
 * the predictions are biased (|EWMA of log error| above PRED_BIAS_LO) the device
 * has changed and forgetting speeds up, down to PRED_LAMBDA_FAST at PRED_BIAS_HI,
 * so a 2x slowdown is tracked within a few % after ~20 samples instead of ~100. */
#define PRED_LAMBDA 0.95
#define PRED_LAMBDA_FAST 0.6
#define PRED_BIAS_ALPHA 0.3
#define PRED_BIAS_LO 0.05
#define PRED_BIAS_HI 0.15
/* Weight (in samples) the calibration grid is seeded with in the live statistics,
 * and the weight of the permanent prior built from the same grid. */
#define PRED_SEED_W 20.0
#define PRED_PRIOR_W 2.0
/* EWMA step of the device-wide drift factor that moves the prior. */
#define PRED_SCALE_ALPHA 0.2
/* Relative ridge: conditioning only, far below any sample's weight. It pulls
 * directions no sample constrains toward the prior instead of toward zero. */
#define PRED_RIDGE 1e-9
/* Predictions are clamped into [floor, PRED_CEIL] so the scheduler never sees a
 * negative, zero, NaN or infinite cost. */
#define PRED_RC_FLOOR 1e-6
#define PRED_SWAP_FLOOR 1e-9
#define PRED_CEIL 1e9
/* Shortest measurement we learn from: below it the clock, not the work, is measured. */
#define PRED_MIN_SAMPLE 1e-9
/* Swap: seconds per MB never below this (bandwidth <= 1e18 B/s), so bw is finite. */
#define PRED_SWAP_MIN_SPMB 1e-12

double allm_pred_dot(int k, const double *a, const double *b);
/* t clamped into [floor, PRED_CEIL]; NaN becomes floor. */
double allm_pred_clamp(double t, double floor);
/* Minimises sum w (x.c - y)^2 + (c - cp)^T P (c - cp) + ridge, given A = sum w x x^T
 * and b = sum w x y, with the coefficients in `nonneg` kept >= 0. P may be NULL.
 * 0 or -EDOM. */
int allm_pred_lsq_fit(int k, const double A[4][4], const double b[4], const double (*P)[4],
		      const double cp[4], uint32_t nonneg, double c[4]);
/* Keeps a swap model's bandwidth finite. */
void allm_pred_lsq_fix(int k, double c[4]);
/* Adds one sample weighted 1/y^2 to A, b (scaled by f: +1 adds, -1 removes). */
void allm_pred_acc_sample(int k, double A[4][4], double b[4], const double x[4], double y, double f);
/* One live sample: forget a little (more if biased), add it, move the drift, refit. */
void allm_pred_lsq_observe(struct allm_pred_lsq *q, const double x[4], double y, double floor);
/* Calibrated (or guessed) state from grid points (A, b over n_pts, coefficients c). */
void allm_pred_lsq_seed(struct allm_pred_lsq *q, const double A[4][4], const double b[4], double n_pts,
			const double *c, bool seed_live); /* c: k coefficients */

#endif
