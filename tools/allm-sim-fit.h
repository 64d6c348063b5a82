/* allm-sim-fit: writes the cpu-local simulated-device profile (DESIGN §4 "sim") by
 * timing the real CPU backend's ops, as the engine calls them, on a grid of shapes
 * taken from the models it is asked to cover (default: the embedded stories260K and
 * --dummy small), Vidur-style operator profiling. Each point is the median of
 * --repeat timings; the spread of the repeats goes into the profile as the noise.
 *
 *   allm-sim-fit.c          flags, the fits, the profile JSON
 *   allm-sim-fit-measure.c  the timings: GEMM shapes at 22 row counts (kept as
 *                           measured shapes), attention batches, streaming ops, copies
 *   allm-sim-fit-math.c     medians, weighted line fits, Nelder-Mead on log error */
#ifndef ALLM_SIM_FIT_H
#define ALLM_SIM_FIT_H

#include "backend.h"
#include "model.h"
#include "sim/sim-cost.h"

#include <jansson.h>
#include <stddef.h>

#define PROG "allm-sim-fit"
#define MAX_MODELS 8
#define MAX_REPEAT 31
#define MAX_PTS 4096

struct fit {
	allm_backend_t *be;
	int repeat;
	bool quiet;
	double spread[MAX_PTS]; /* (max - min) / median of each point's repeats */
	int n_spread;
	/* stream-op points by op: bytes and seconds */
	double sx[ALLM_OP_COUNT][256], st[ALLM_OP_COUNT][256];
	int sn[ALLM_OP_COUNT];
	/* GEMM points (roofline fit) and attention points */
	struct gpt {
		double n, k, m, t;
	} g[MAX_PTS];
	int ng;
	struct apt {
		struct allm_kv_layout lay;
		int32_t heads;
		struct allm_sim_attn_shape s;
		double t;
	} a[512];
	int na;
	double cx[2][64], ct[2][64]; /* copies by direction (0 d2h, 1 h2d) */
	int cn[2];
	json_t *shapes; /* measured GEMM shapes */
};

/* Times every (k, m) GEMM shape once (a shape already measured is skipped), with
 * `copies` weight copies rotating like a forward's layers. */
void measure_gemm(struct fit *f, int64_t k, int64_t m, int copies);
/* Seconds of a 256-row GEMM of shape (k, m) with weights of dtype dt. */
double gemm_dtype_seconds(struct fit *f, int64_t k, int64_t m, enum allm_dtype dt);
/* Decode and prefill batches of the model's attention shape. */
void measure_attention(struct fit *f, const struct allm_model_config *c);
/* The streaming ops at the model's widths, 1 to 1024 rows. */
void measure_stream(struct fit *f, const struct allm_model_config *c);
/* Copies of 1 to 64 KV blocks of block_bytes between two resident pools. */
void measure_copies(struct fit *f, size_t block_bytes);


/* Median of v[0..n) (sorts v). */
double fit_median(double *v, int n);

/* Least squares t = a + b * x weighted by 1 / t^2 (relative error), a >= 0. */
void fit_line(const double *x, const double *t, int n, double *ret_a, double *ret_b);

/* Minimizes f over k <= 8 parameters from x0 with initial steps step (Nelder-Mead,
 * `iters` iterations); the best point goes to x0. Returns its value. */
double fit_nelder_mead(double (*f)(const double *x, void *user), void *user, double *x0,
		       const double *step, int k, int iters);

#endif
