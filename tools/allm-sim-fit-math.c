/* The arithmetic of allm-sim-fit: medians, relative-error line fits, Nelder-Mead. */
#include "allm-sim-fit.h"

#include <math.h>
#include <string.h>

void fit_line(const double *x, const double *t, int n, double *ret_a, double *ret_b)
{
	double s = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
	for (int i = 0; i < n; i++) {
		/* relative errors: a time of 0 (a call shorter than the clock's own cost,
		 * which the timing subtracts) says nothing of a rate and would weigh
		 * infinitely */
		if (!(t[i] > 0) || !isfinite(t[i]))
			continue;
		double w = 1.0 / (t[i] * t[i]);
		s += w;
		sx += w * x[i];
		sxx += w * x[i] * x[i];
		st += w * t[i];
		sxt += w * x[i] * t[i];
	}
	double det = s * sxx - sx * sx;
	double a = det != 0 ? (sxx * st - sx * sxt) / det : 0;
	double b = det != 0 ? (s * sxt - sx * st) / det : 0;
	if (a < 0 || b <= 0) {
		/* a negative intercept means no fixed cost: refit through the origin */
		a = 0;
		b = sxx > 0 ? sxt / sxx : 1e-12;
	}
	*ret_a = a;
	*ret_b = fmax(b, 1e-18);
}

double fit_nelder_mead(double (*f)(const double *x, void *user), void *user, double *x0,
		       const double *step, int k, int iters)
{
	double p[9][8], fv[9], c[8], xr[8], xe[8];
	for (int i = 0; i <= k; i++) {
		memcpy(p[i], x0, (size_t)k * sizeof(double));
		if (i)
			p[i][i - 1] += step[i - 1];
		fv[i] = f(p[i], user);
	}
	for (int it = 0; it < iters; it++) {
		/* order: best first */
		for (int i = 1; i <= k; i++)
			for (int j = i; j > 0 && fv[j] < fv[j - 1]; j--) {
				double t = fv[j];
				fv[j] = fv[j - 1];
				fv[j - 1] = t;
				double tp[8];
				memcpy(tp, p[j], sizeof(tp));
				memcpy(p[j], p[j - 1], sizeof(tp));
				memcpy(p[j - 1], tp, sizeof(tp));
			}
		for (int d = 0; d < k; d++) {
			c[d] = 0;
			for (int i = 0; i < k; i++)
				c[d] += p[i][d] / k;
		}
		for (int d = 0; d < k; d++)
			xr[d] = c[d] + (c[d] - p[k][d]);
		double fr = f(xr, user);
		if (fr < fv[0]) {
			for (int d = 0; d < k; d++)
				xe[d] = c[d] + 2 * (c[d] - p[k][d]);
			double fe = f(xe, user);
			memcpy(p[k], fe < fr ? xe : xr, (size_t)k * sizeof(double));
			fv[k] = fmin(fe, fr);
		} else if (fr < fv[k - 1]) {
			memcpy(p[k], xr, (size_t)k * sizeof(double));
			fv[k] = fr;
		} else {
			for (int d = 0; d < k; d++)
				xr[d] = c[d] + 0.5 * (p[k][d] - c[d]);
			double fc = f(xr, user);
			if (fc < fv[k]) {
				memcpy(p[k], xr, (size_t)k * sizeof(double));
				fv[k] = fc;
			} else {
				for (int i = 1; i <= k; i++) {
					for (int d = 0; d < k; d++)
						p[i][d] = p[0][d] + 0.5 * (p[i][d] - p[0][d]);
					fv[i] = f(p[i], user);
				}
			}
		}
	}
	int best = 0;
	for (int i = 1; i <= k; i++)
		if (fv[i] < fv[best])
			best = i;
	memcpy(x0, p[best], (size_t)k * sizeof(double));
	return fv[best];
}
