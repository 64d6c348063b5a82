/* allm-sim-fit: writes the cpu-local simulated-device profile (DESIGN §4 "sim") by
 * timing the real CPU backend's ops, as the engine calls them, on a grid of shapes
 * taken from the models it is asked to cover (default: the embedded stories260K and
 * --dummy small), Vidur-style operator profiling. Each point is the median of
 * --repeat timings; the spread of the repeats goes into the profile as the noise.
 *
 *   allm-sim-fit.c          flags, the fits, the profile JSON
 *   allm-sim-fit-measure.c  the timings: real forwards over a grid of batch shapes
 *                           through a proxy of the vtable that times every op in place
 *   allm-sim-fit-check.c    --check: whole forwards, real cpu vs the simulated device
 *   allm-sim-fit-math.c     medians, weighted line fits, Nelder-Mead on log error */
#ifndef ALLM_SIM_FIT_H
#define ALLM_SIM_FIT_H

#include "backend.h"
#include "model.h"
#include "runtime.h"
#include "sim/sim-cost.h"

#include <jansson.h>
#include <stddef.h>

#define PROG "allm-sim-fit"
#define MAX_MODELS 8
#define MAX_REPEAT 31
#define MAX_PTS 4096

/* A GEMM timed in place. */
struct gsample {
	int32_t dt;
	int64_t k, m, n;
	double t;
};

/* A streaming op (or a copy: op is then its enum allm_copy_dir) timed in place. */
struct ssample {
	int op;
	double bytes, t;
};

/* An attention call timed in place (also a fitted point). */
struct apt {
	struct allm_kv_layout lay;
	int32_t heads;
	struct allm_sim_attn_shape s;
	double t;
};

/* A GEMM point of the roofline fit: the median of its samples. */
struct gpt {
	double n, k, m, t;
};

struct fit {
	int repeat;
	bool quiet;
	bool cpu_clock; /* timed in thread CPU time (--clock cpu) */
	/* raw samples, as the proxy recorded them */
	struct gsample *gs;
	int ngs, cap_gs;
	struct apt *as;
	int nas, cap_as;
	struct ssample *ss, *ls; /* streaming ops; copies and uploads by direction */
	int nss, cap_ss, nls, cap_ls;
	/* medians of equal-shape samples, what the fits use */
	struct gpt g[MAX_PTS];
	int ng;
	struct apt a[MAX_PTS];
	int na;
	double sx[ALLM_OP_COUNT][MAX_PTS], st[ALLM_OP_COUNT][MAX_PTS]; /* stream ops: bytes, s */
	int sn[ALLM_OP_COUNT];
	double cx[4][256], ct[4][256]; /* copies by enum allm_copy_dir: bytes, s */
	int cn[4];
	double dx[2][256], dt[2][256]; /* disk KV tier transfers, [0] write, [1] read: bytes, s */
	int dn[2];
	double spread[MAX_PTS]; /* (max - min) / median of each point's samples */
	int n_spread;
	json_t *shapes; /* measured GEMM shapes */
};

/* One batch of the grid: n_dec decodes at context ctx plus n_pre prefills of len. */
struct fit_shape {
	int32_t n_dec, ctx, n_pre, len;
};

/* Measures what a wall-clock reading costs (taken off every timing); guard
 * (--clock cpu): forwards the thread was not on the CPU for all through are timed
 * again (allm-sim-fit-measure.c says why ops are never timed on the CPU clock). */
void fit_clock_init(bool guard);
/* What the proxy has recorded into f so far, and back to such a mark (f may be
 * NULL: nothing). */
void fit_proxy_mark(const struct fit *f, int mark[4]);
void fit_proxy_rewind(struct fit *f, const int mark[4]);
/* Replaces be's vtable with a proxy that times every op into the fit set by
 * fit_proxy_record() (NULL: not recording). */
int fit_proxy_install(allm_backend_t *be);
void fit_proxy_record(struct fit *f);
/* The batch shapes to time for a model (at most max). */
int fit_grid(const struct allm_model_config *c, struct fit_shape *ret, int max);
/* Runs the shape's forward once unrecorded, then reps times recorded into f (NULL:
 * not recorded), with argmax and top-k timed after each on the CPU; the mean
 * device seconds go to *ret_mean. 0 or -1 (said why). */
int fit_forward(struct allm_runtime *rt, const struct fit_shape *sh, int reps, double *ret_mean,
		struct fit *f);
/* Swap copies of 1 to 64 blocks between kv's pools, f->repeat each; and disk
 * tier writes and reads of as many when kv has a disk tier (wall time: I/O). */
void fit_copies(struct fit *f, struct allm_kv_cache *kv);
void add_stream_to(struct fit *f, int op, double bytes, double t);
void add_link_to(struct fit *f, enum allm_copy_dir dir, double bytes, double t);
/* Seconds of a 256-row GEMM of shape (k, m) with weights of dtype dt, alone. */
double gemm_dtype_seconds(allm_backend_t *be, int64_t k, int64_t m, enum allm_dtype dt, int reps);
/* Opens a model (kind "--model"/"--dummy", name NULL = the embedded default) on
 * device with room for the grid. 0 or -1 (said why). */
int fit_open(const char *kind, const char *name, const char *device, int threads, struct allm_runtime **ret);
/* --check: forwards of the grid on the CPU backend and on sim:profile side by side;
 * by_op (--by-op): then each forward's ops by class, timed in place and priced. */
int fit_check(const char *profile, const char *kind, const char *model, int threads, int repeat, bool by_op);


/* Least squares t = a + b * x weighted by 1 / t^2 (relative error), a >= 0. */
void fit_line(const double *x, const double *t, int n, double *ret_a, double *ret_b);

/* Minimizes f over k <= 8 parameters from x0 with initial steps step (Nelder-Mead,
 * `iters` iterations); the best point goes to x0. Returns its value. */
double fit_nelder_mead(double (*f)(const double *x, void *user), void *user, double *x0,
		       const double *step, int k, int iters);

#endif
