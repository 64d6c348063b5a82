/* Private to predictor*.c: the constants that tune the least-squares fitter
 * (predictor-lsq.c) and the predictions made from it (predictor.c). */
#ifndef ALLM_PREDICTOR_TUNE_H
#define ALLM_PREDICTOR_TUNE_H

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

#endif
