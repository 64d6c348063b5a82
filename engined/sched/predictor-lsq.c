/* The weighted least-squares fitter behind both cost models: a small constrained
 * solver, exponential forgetting with a bias-driven speed-up, and a prior from
 * calibration that moves with the device's drift. */
#include "predictor-lsq.h"
#include "predictor-tune.h"

#include <errno.h>
#include <math.h>
#include <string.h>

double allm_pred_dot(int k, const double *a, const double *b)
{
	double s = 0;
	for (int i = 0; i < k; i++)
		s += a[i] * b[i];
	return s;
}

double allm_pred_clamp(double t, double floor)
{
	if (!(t >= floor)) /* also catches NaN */
		return floor;
	return t > PRED_CEIL ? PRED_CEIL : t;
}

/* Solves M c = r for the coefficients in free_mask, the others fixed at 0, by
 * Gaussian elimination with partial pivoting on the Jacobi-scaled system (the
 * features differ by orders of magnitude). 0 or -EDOM if singular. */
static int solve_masked(int k, const double M[4][4], const double r[4], uint32_t free_mask, double c[4])
{
	int idx[4], n = 0;
	double a[4][5], d[4];

	for (int i = 0; i < k; i++)
		if (free_mask & (1u << i))
			idx[n++] = i;
	for (int i = 0; i < n; i++) {
		double m = M[idx[i]][idx[i]];
		if (!(m > 0) || !isfinite(m))
			return -EDOM;
		d[i] = 1.0 / sqrt(m);
	}
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++)
			a[i][j] = M[idx[i]][idx[j]] * d[i] * d[j];
		a[i][n] = r[idx[i]] * d[i];
	}
	for (int col = 0; col < n; col++) {
		int piv = col;
		for (int i = col + 1; i < n; i++)
			if (fabs(a[i][col]) > fabs(a[piv][col]))
				piv = i;
		if (!(fabs(a[piv][col]) > 1e-13))
			return -EDOM;
		if (piv != col)
			for (int j = 0; j <= n; j++) {
				double t = a[col][j];
				a[col][j] = a[piv][j];
				a[piv][j] = t;
			}
		for (int i = col + 1; i < n; i++) {
			double f = a[i][col] / a[col][col];
			for (int j = col; j <= n; j++)
				a[i][j] -= f * a[col][j];
		}
	}
	double y[4];
	for (int i = n - 1; i >= 0; i--) {
		double s = a[i][n];
		for (int j = i + 1; j < n; j++)
			s -= a[i][j] * y[j];
		y[i] = s / a[i][i];
	}
	double out[4] = { 0 };
	for (int i = 0; i < n; i++) {
		out[idx[i]] = y[i] * d[i];
		if (!isfinite(out[idx[i]]))
			return -EDOM;
	}
	memcpy(c, out, sizeof(out));
	return 0;
}

/* Minimises sum w (x.c - y)^2 + (c - cp)^T P (c - cp) + ridge, given A = sum w x x^T
 * and b = sum w x y, with the coefficients in `nonneg` kept >= 0 by pinning the
 * most negative one at 0 and solving again (an active set that is exact enough for
 * 4 unknowns). P may be NULL. 0 or -EDOM. */
int allm_pred_lsq_fit(int k, const double A[4][4], const double b[4], const double (*P)[4],
		   const double cp[4], uint32_t nonneg, double c[4])
{
	double M[4][4], r[4], maxd = 0;

	for (int i = 0; i < k; i++) {
		r[i] = b[i];
		for (int j = 0; j < k; j++) {
			M[i][j] = A[i][j] + (P ? P[i][j] : 0);
			if (P)
				r[i] += P[i][j] * cp[j];
		}
		maxd = fmax(maxd, M[i][i]);
	}
	if (!(maxd > 0) || !isfinite(maxd))
		maxd = 1;
	for (int i = 0; i < k; i++) {
		double ridge = PRED_RIDGE * fmax(M[i][i], 0) + 1e-12 * maxd;
		M[i][i] += ridge;
		r[i] += ridge * cp[i];
	}
	uint32_t free_mask = (1u << k) - 1;
	for (int iter = 0; iter <= k; iter++) {
		int ret = solve_masked(k, M, r, free_mask, c);
		if (ret < 0)
			return ret;
		int worst = -1;
		for (int i = 0; i < k; i++)
			if ((nonneg & free_mask & (1u << i)) && c[i] < 0 && (worst < 0 || c[i] < c[worst]))
				worst = i;
		if (worst < 0)
			return 0;
		free_mask &= ~(1u << worst);
	}
	return -EDOM;
}

void allm_pred_lsq_fix(int k, double c[4])
{
	/* swap: bandwidth stays finite even if the data say "free" */
	if (k == ALLM_PRED_SWAP_NF && c[1] < PRED_SWAP_MIN_SPMB)
		c[1] = PRED_SWAP_MIN_SPMB;
}

void allm_pred_lsq_refit(struct allm_pred_lsq *q)
{
	double cp[4], c[4], P[4][4];

	/* the prior is in 1/y^2 units of the calibration times: on a device now
	 * `scale` times slower it must weigh 1/scale^2 as much, or it stays worth
	 * more samples than it was meant to and holds the fit back */
	for (int i = 0; i < q->k; i++) {
		cp[i] = q->scale * q->base[i];
		for (int j = 0; j < q->k; j++)
			P[i][j] = q->prior_xtx[i][j] / (q->scale * q->scale);
	}
	if (allm_pred_lsq_fit(q->k, q->xtx, q->xty, P, cp, q->nonneg, c) < 0)
		return; /* keep the last good fit */
	allm_pred_lsq_fix(q->k, c);
	memcpy(q->coef, c, sizeof(c));
}

/* Adds one weighted sample to A, b (scaled by f: +1 adds, -1 removes). */
void allm_pred_acc_sample(int k, double A[4][4], double b[4], const double x[4], double y, double f)
{
	double w = f / (y * y);
	for (int i = 0; i < k; i++) {
		b[i] += w * x[i] * y;
		for (int j = 0; j < k; j++)
			A[i][j] += w * x[i] * x[j];
	}
}

/* One live sample: forget a little (more if the model is biased), add it, move
 * the drift factor, refit. */
void allm_pred_lsq_observe(struct allm_pred_lsq *q, const double x[4], double y, double floor)
{
	double pred = allm_pred_clamp(allm_pred_dot(q->k, q->coef, x), floor);
	double le = fmin(fmax(log(y / pred), -7), 7);
	q->bias = (1 - PRED_BIAS_ALPHA) * q->bias + PRED_BIAS_ALPHA * le;
	double over = (fabs(q->bias) - PRED_BIAS_LO) / (PRED_BIAS_HI - PRED_BIAS_LO);
	double lambda = PRED_LAMBDA - (PRED_LAMBDA - PRED_LAMBDA_FAST) * fmin(fmax(over, 0), 1);
	for (int i = 0; i < q->k; i++) {
		q->xty[i] *= lambda;
		for (int j = 0; j < q->k; j++)
			q->xtx[i][j] *= lambda;
	}
	allm_pred_acc_sample(q->k, q->xtx, q->xty, x, y, 1.0);
	double ratio = y / allm_pred_clamp(allm_pred_dot(q->k, q->base, x), floor);
	ratio = fmin(fmax(ratio, 1e-3), 1e3);
	double ls = (1 - PRED_SCALE_ALPHA) * log(q->scale) + PRED_SCALE_ALPHA * log(ratio);
	q->scale = fmin(fmax(exp(ls), 1e-6), 1e6);
	allm_pred_lsq_refit(q);
}

/* Calibrated (or guessed) state from grid points: the live statistics start
 * from the grid at PRED_SEED_W samples' weight, the prior at PRED_PRIOR_W. */
void allm_pred_lsq_seed(struct allm_pred_lsq *q, const double A[4][4], const double b[4], double n_pts,
			const double *c, bool seed_live)
{
	memset(q->xtx, 0, sizeof(q->xtx));
	memset(q->xty, 0, sizeof(q->xty));
	for (int i = 0; i < q->k; i++) {
		if (seed_live)
			q->xty[i] = b[i] * PRED_SEED_W / n_pts;
		for (int j = 0; j < q->k; j++) {
			if (seed_live)
				q->xtx[i][j] = A[i][j] * PRED_SEED_W / n_pts;
			q->prior_xtx[i][j] = A[i][j] * PRED_PRIOR_W / n_pts;
		}
	}
	memset(q->base, 0, sizeof(q->base));
	memset(q->coef, 0, sizeof(q->coef));
	memcpy(q->base, c, sizeof(double) * (size_t)q->k);
	memcpy(q->coef, c, sizeof(double) * (size_t)q->k);
	q->scale = 1;
	q->bias = 0;
}
