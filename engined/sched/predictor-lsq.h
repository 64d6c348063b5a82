/* The weighted least-squares fitter both cost models are made of: its state
 * (struct allm_pred_lsq, embedded in struct allm_predictor, predictor.h) and its
 * steps. The constants that tune its forgetting, prior and clamps are
 * predictor-tune.h, private to predictor*.c. It knows nothing of the predictor:
 * predictor.h includes this, never the other way (no file circle). */
#ifndef ALLM_PREDICTOR_LSQ_H
#define ALLM_PREDICTOR_LSQ_H

#include <stdbool.h>
#include <stdint.h>

/* The models' feature counts (k): the fitter keeps a swap model's bandwidth finite. */
enum {
	ALLM_PRED_RC_NF = 4, /* recompute features: 1, tokens/1e3, tokens_sq/1e6, n_seqs */
	ALLM_PRED_SWAP_NF = 2, /* swap features: runs, bytes/1e6 */
};

/* Weighted least squares with exponential forgetting, pulled toward a prior. Each
 * sample is weighted 1/y^2 so the fit minimises relative error (a 10 ms prefill
 * matters as much as a 1 s one). The prior keeps directions the live traffic does
 * not excite (e.g. long prompts on a chat workload) at their calibrated values
 * times `scale`, instead of letting forgetting wind them down to the ridge. */
struct allm_pred_lsq {
	int32_t k; /* features in use: ALLM_PRED_RC_NF or ALLM_PRED_SWAP_NF */
	uint32_t nonneg; /* bit i set: coef[i] is constrained to >= 0 */
	double xtx[4][4]; /* sum of lambda^age * w * x x^T, seeded from calibration */
	double xty[4]; /* sum of lambda^age * w * x y */
	double prior_xtx[4][4]; /* calibration design scaled to a few samples' weight */
	double base[4]; /* calibrated coefficients (before calibration: a built-in guess) */
	double scale; /* EWMA of measured / base prediction: drift of the whole device */
	double bias; /* EWMA of log(measured / predicted): a persistent one means the device
		      * changed, and old samples are forgotten faster */
	double coef[4]; /* current fit: predictions use only this */
};

double allm_pred_dot(int k, const double *a, const double *b);
/* t clamped into [floor, PRED_CEIL]; NaN becomes floor. */
double allm_pred_clamp(double t, double floor);
/* Minimises sum w (x.c - y)^2 + (c - cp)^T P (c - cp) + ridge, given A = sum w x x^T
 * and b = sum w x y, with the coefficients in `nonneg` kept >= 0. P may be NULL.
 * 0 or -EDOM. */
int allm_pred_lsq_fit(int k, const double A[4][4], const double b[4], const double (*P)[4],
		      const double cp[4], uint32_t nonneg, double c[4]);
/* Recomputes q->coef from its statistics; keeps the old coefficients if the
 * system is singular. */
void allm_pred_lsq_refit(struct allm_pred_lsq *q);
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
