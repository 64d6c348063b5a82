/* Description: allm-sim-fit's line fit (the copy, disk and streaming-op lines of a fitted cpu-local profile): it recovers a line from exact points; a point timed at 0 (a call shorter than the clock's own cost, which the fit subtracts) or not finite is left out instead of making the whole fit NaN, which once dropped link.h2d from a fitted profile; a negative intercept refits through the origin. */
#include "allm-sim-fit.h"
#include "test-check.h"

#include <math.h>

static int near(double got, double want)
{
	return fabs(got - want) <= 1e-9 * fabs(want) + 1e-18;
}

int main(void)
{
	/* 1-64 blocks of 16 KiB: 0.2 us + bytes / 40 GB/s */
	double x[8], t[8];
	int n = 0;
	for (int blocks = 1; blocks <= 64; blocks *= 2, n++) {
		x[n] = blocks * 16384.0;
		t[n] = 2e-7 + x[n] / 40e9;
	}
	double a = -1, b = -1;
	fit_line(x, t, n, &a, &b);
	CHECK(near(a, 2e-7) && near(b, 1 / 40e9), "exact points: a %g b %g", a, b);

	/* the same with a call the clock-cost correction brought to 0 s, and a NaN */
	double x2[9], t2[9];
	for (int i = 0; i < n; i++)
		x2[i] = x[i], t2[i] = t[i];
	x2[n] = 512, t2[n] = 0;
	fit_line(x2, t2, n + 1, &a, &b);
	CHECK(isfinite(a) && isfinite(b) && near(a, 2e-7) && near(b, 1 / 40e9),
	      "a 0 s point is left out: a %g b %g", a, b);
	t2[n] = NAN;
	fit_line(x2, t2, n + 1, &a, &b);
	CHECK(isfinite(a) && isfinite(b) && near(a, 2e-7) && near(b, 1 / 40e9),
	      "a NaN point is left out: a %g b %g", a, b);

	/* a line whose intercept would be negative: no fixed cost, through the origin */
	for (int i = 0; i < n; i++)
		t[i] = -1e-8 + x[i] / 40e9;
	fit_line(x, t, n, &a, &b);
	CHECK(a == 0 && b > 0 && isfinite(b), "negative intercept -> through the origin: a %g b %g", a, b);

	/* nothing usable at all: still finite (the profile's parser refuses the rest) */
	double z[2] = {0, 0};
	fit_line(x, z, 2, &a, &b);
	CHECK(isfinite(a) && isfinite(b) && b > 0, "only 0 s points: a %g b %g", a, b);
	if (!n_fail)
		printf("sim-fit-math: all checks passed\n");
	return n_fail ? 1 : 0;
}
