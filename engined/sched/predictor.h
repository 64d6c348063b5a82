/* Cost predictors the scheduler asks before it preempts (DESIGN §6, §7): how long
 * recomputing a sequence takes (= a prefill of its current length) and how long
 * swapping its KV blocks out and back in takes. Both are linear models fitted by
 * weighted least squares: calibrated at start over a grid of timed prefills and
 * swaps the engine runs for us through callbacks, persisted to a JSON profile so a
 * restart skips the grid, then refitted after every real prefill and swap.
 *
 * Not thread-safe: the scheduler thread owns a predictor. */
#ifndef ALLM_PREDICTOR_H
#define ALLM_PREDICTOR_H

#include "backend.h" /* enum allm_copy_dir */
#include "common.h"
#include "kv-disk.h" /* enum allm_disk_dir */
#include "predictor-lsq.h" /* struct allm_pred_lsq */

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a profile was measured on. A profile whose key differs in any field is
 * "mismatched": its numbers say nothing about this run. Layers and hidden size,
 * two of the cost features of DESIGN §7, are constant for a model, so they live
 * here rather than in the regression. */
struct allm_predictor_key {
	char model[256]; /* model name or path */
	char device[128]; /* e.g. "cpu:16" or "NVIDIA H100 80GB HBM3" */
	char dtype[8]; /* "f32", "f16", "bf16" */
	int32_t n_layers, hidden, block_size;
	uint64_t block_bytes; /* bytes of one KV block, all layers, K and V */
	int32_t threads; /* CPU threads the backend runs with */
};

/* A prefill batch, by the features of its cost. A step of chunked prefill (a
 * mix of decodes and prefill chunks) is described the same way: a row that feeds
 * n new tokens after p cached ones adds (p + n)^2 - p^2 to tokens_sq (twice the
 * query-key pairs its attention scores), so a whole prefill adds n^2 and a
 * decode 2p + 1. */
struct allm_prefill_shape {
	int32_t n_seqs;
	int64_t tokens; /* sum of the sequences' new tokens */
	double tokens_sq; /* sum over sequences of (p_i + n_i)^2 - p_i^2 */
};

enum {
	ALLM_PRED_RING = 100, /* samples in the rolling error */
	/* samples before the rolling error is reported: a mean of one or two
	 * (the first requests' cold-start timings) says nothing about the model.
	 * Five, not more: a burst of requests admitted together is one prefill
	 * step, so a chat workload may see only a handful of prefill steps in its
	 * first seconds (issue 53: ten hid the error behind "-" for whole runs) */
	ALLM_PRED_MAPE_MIN = 5,
};


/* Last ALLM_PRED_RING absolute percentage errors. */
struct allm_pred_ring {
	float pct[ALLM_PRED_RING];
	int32_t n; /* valid entries, <= ALLM_PRED_RING */
	int32_t head; /* next slot written */
};

/* A measured cost against its prediction, into the ring (the percentage error,
 * |pred - meas| / meas); ignored unless both are finite and meas > 0. Also the
 * engine's per-decision error (engine.h, struct allm_decision_error). */
void allm_pred_ring_push(struct allm_pred_ring *r, double pred, double meas);
/* The ring's mean in percent; NAN with fewer than min_n samples. */
double allm_pred_ring_mape(const struct allm_pred_ring *r, int32_t min_n);

/* Fields are read-only to callers: go through the functions. Public so tests and
 * the profile code can see them. */
struct allm_predictor {
	struct allm_predictor_key key;
	struct allm_pred_lsq rc; /* prefill/recompute seconds */
	struct allm_pred_lsq swap[2]; /* [0] = out (d2h), [1] = in (h2d) */
	/* bytes/s = 1e6 / swap[d].coef[1], kept as such so a profile (which stores
	 * bandwidths) reloads to bit-identical predictions */
	double swap_bw[2];
	struct allm_pred_ring rc_err, swap_err; /* swap: both directions together */
	int64_t n_prefill_obs, n_swap_obs;
	double calib_mape_rc, calib_mape_swap; /* leave-one-out over the grid; NAN if none */
	/* the disk tier: [0] = write (to disk), [1] = read, like swap[]; measured at
	 * start whenever there is a disk tier (a disk changes more than a model),
	 * not kept in profiles */
	struct allm_pred_lsq disk[2];
	double disk_bw[2];
	struct allm_pred_ring disk_err;
	int64_t n_disk_obs;
	double calib_mape_disk;
	/* how likely the next disk swap fails (ENOSPC on a full disk, EIO): an
	 * average of outcomes, each weighing ALLM_DISK_FAIL_WEIGHT, that fades by
	 * half every ALLM_DISK_FAIL_HALF_LIFE_S (the disk may have room again) */
	double disk_fail;
	double disk_fail_at; /* when it was last updated (the caller's clock) */
	/* the engine thread's on-CPU share of the timed steps (CPU time over wall
	 * time), an EWMA over every step, decodes too: how much of the machine
	 * this engine has now (1 = all it asked for; a shared machine's other
	 * processes push it down and every cost up). 1 before the first step. */
	double oncpu;
	int64_t n_oncpu_obs;
	/* re-prefills as the decisions measured them: an EWMA of log(measured /
	 * predicted) over the measured recompute decisions, which scales the next
	 * ones (allm_predictor_recompute_factor). The step model prices steps; a
	 * victim's re-prefill, by the time it runs, differs from that persistently
	 * (issue 53: replayed on the decisions of a loaded machine, their MAPE fell
	 * 29.7 -> 17.6 % on SmolLM2, 54.9 -> 35 % on stories260K,
	 * bench/cost-explain.py). Not in profiles. */
	double rc_dec_bias;
	int64_t n_rc_dec;
	bool calibrated; /* by allm_predictor_calibrate, a loaded profile, or learned online */
	bool estimated; /* a first estimate (allm_predictor_estimate), being refined online */
	char calibrated_at[32]; /* ISO 8601 UTC, "" if never */
};

/* 0, -EINVAL (NULL key) or -ENOMEM. The new predictor is uncalibrated: it predicts
 * from a built-in guess and learns from observations. The caller frees it. */
int allm_predictor_create(const struct allm_predictor_key *key, struct allm_predictor **ret);
void allm_predictor_free(struct allm_predictor *p);

/* Seconds; always finite and > 0 whatever the input. */
double allm_predict_prefill(const struct allm_predictor *p, const struct allm_prefill_shape *s);
/* A prefill of one sequence of n_tokens (what recomputing it costs). */
double allm_predict_recompute(const struct allm_predictor *p, int64_t n_tokens);
/* What the work of s adds to a step that runs anyway (a chunked step): the
 * prediction without its constant term. */
double allm_predict_prefill_marginal(const struct allm_predictor *p,
				     const struct allm_prefill_shape *s);
/* What re-prefilling n_tokens adds to the steps it rides in (chunked prefill). */
double allm_predict_recompute_marginal(const struct allm_predictor *p, int64_t n_tokens);
/* t = n_runs * latency + bytes / bandwidth in direction dir (ALLM_COPY_D2H:
 * out, ALLM_COPY_H2D: in); n_runs = coalesced contiguous copies. */
double allm_predict_swap(const struct allm_predictor *p, enum allm_copy_dir dir, uint64_t bytes, int32_t n_runs);

/* A disk write or read of bytes in n_runs runs. On a GPU a disk swap also pays
 * the host link: the caller adds allm_predict_swap. */
double allm_predict_disk(const struct allm_predictor *p, enum allm_disk_dir dir, uint64_t bytes, int32_t n_runs);

/* Online learning from a real prefill / swap that took `seconds`. The prediction
 * made before the sample is seen goes into the rolling error first, so that error
 * is held out by construction. Non-finite or non-positive times are ignored. */
void allm_predictor_observe_prefill(struct allm_predictor *p, const struct allm_prefill_shape *s,
				    double seconds);
void allm_predictor_observe_swap(struct allm_predictor *p, enum allm_copy_dir dir, uint64_t bytes,
				 int32_t n_runs, double seconds);
void allm_predictor_observe_disk(struct allm_predictor *p, enum allm_disk_dir dir, uint64_t bytes,
				 int32_t n_runs, double seconds);

/* A disk swap's outcome: the chance of failure learns it. */
#define ALLM_DISK_FAIL_WEIGHT 0.5
#define ALLM_DISK_FAIL_HALF_LIFE_S 30.0
/* Past this chance the disk is not chosen: one failure stops it for a half-life. */
#define ALLM_DISK_FAIL_SKIP 0.25
void allm_predictor_observe_disk_outcome(struct allm_predictor *p, bool failed, double now);
/* The chance (0..1) that a disk swap now fails, from the outcomes seen. */
double allm_predict_disk_failure(const struct allm_predictor *p, double now);

/* A timed step's on-CPU share (thread CPU seconds / wall seconds, clamped to
 * [0.01, 1]); NAN or <= 0 is ignored. */
#define ALLM_PRED_ONCPU_ALPHA 0.2
void allm_predictor_observe_oncpu(struct allm_predictor *p, double frac);
double allm_predictor_oncpu(const struct allm_predictor *p);

/* A recompute decision's cost arrived: the step model's prediction (unscaled:
 * decisions are measured out of order, many after the factor moved) against
 * measured seconds; non-finite or <= 0 is ignored. The factor the next
 * recompute decisions' predictions are multiplied by, in
 * [1/ALLM_PRED_RC_DEC_MAX, ALLM_PRED_RC_DEC_MAX]; 1 before the first. */
#define ALLM_PRED_RC_DEC_ALPHA 0.3
#define ALLM_PRED_RC_DEC_MAX 8.0
/* One decision's ratio counts at most this far either way: a step the OS
 * descheduled (stories260K: 0.3 ms re-prefills measured 9 ms at 10 % on a CPU)
 * says nothing of the next (replayed: 49 % MAPE uncapped, 35 % capped) */
#define ALLM_PRED_RC_DEC_STEP 1.5
void allm_predictor_observe_recompute_decision(struct allm_predictor *p, double predicted, double measured);
double allm_predictor_recompute_factor(const struct allm_predictor *p);

/* Rolling MAPE in percent over the last ALLM_PRED_RING samples; NAN before
 * ALLM_PRED_MAPE_MIN of them (allmctl shows "-"). */
double allm_predictor_mape_recompute(const struct allm_predictor *p);
double allm_predictor_mape_swap(const struct allm_predictor *p);
double allm_predictor_mape_disk(const struct allm_predictor *p);
/* Clears the rolling errors (for `reset-stats`); the models are kept. */
void allm_predictor_reset_stats(struct allm_predictor *p);
bool allm_predictor_calibrated(const struct allm_predictor *p);

/* A first estimate instead of a calibration (serving at once, DESIGN §7):
 * rc_coef as allm_predictor_info's (s, s/token, s/token^2, s/sequence), the
 * swap latencies (s per run) and bandwidths (bytes/s) per direction (NULL:
 * keep). The models are seeded with it and learn from every real step; the
 * predictor is not calibrated until allm_predictor_learned says so. */
void allm_predictor_estimate(struct allm_predictor *p, const double rc_coef[4], const double lat[2],
			     const double bw[2]);
/* Real prefills needed, and the rolling error (percent) they must reach, before
 * an estimated predictor counts as calibrated (at 8x that many, regardless). */
#define ALLM_PRED_LEARNED_OBS 32
#define ALLM_PRED_LEARNED_MAPE 20.0
/* Once: true when an estimated predictor has learned enough from real steps;
 * it is then calibrated (its profile may be saved). */
bool allm_predictor_learned(struct allm_predictor *p);

/* The engine's side of calibration: timed real prefills and swaps on the backend. */
struct allm_calib_ops {
	void *user;
	int32_t max_tokens; /* largest prefill the engine can run (context and batch-token caps) */
	int32_t max_swap_blocks; /* largest swap the pools allow; < 1 skips the swap grid */
	uint64_t block_bytes; /* 0: use key.block_bytes */
	/* runs and times a prefill of n_seqs sequences of len tokens each; seconds or < 0 */
	double (*time_prefill)(void *user, int32_t n_seqs, int32_t len);
	/* runs and times a copy of n_blocks blocks in direction dir as n_runs coalesced runs */
	double (*time_swap)(void *user, enum allm_copy_dir dir, int32_t n_blocks, int32_t n_runs);
	/* the same for the disk tier (dir 0 write, 1 read); NULL without one */
	double (*time_disk)(void *user, enum allm_disk_dir dir, int32_t n_blocks, int32_t n_runs);
	int32_t max_disk_blocks;
	void (*progress)(void *user, int done, int total); /* may be NULL */
};

/* Times prefills of 8, 16, 32, ... tokens up to max_tokens at 1, 2 and 4
 * sequences, and swaps of 1..64 blocks as 1 and up to 4 runs in both directions
 * (median of a few runs each, about 150 timed runs in all), fits both models and
 * a leave-one-out error. 0; -EINVAL for bad ops; -EIO (with err) if a callback
 * failed, leaving the predictor unchanged. */
int allm_predictor_calibrate(struct allm_predictor *p, const struct allm_calib_ops *ops,
			     struct allm_err *err);
/* Times disk writes and reads of 1..64 blocks (ops->time_disk, up to
 * max_disk_blocks) and fits the disk models, as for swaps. 0, -EINVAL without
 * time_disk, -EIO (with err) if a timing failed (the models stay as they were). */
int allm_predictor_calibrate_disk(struct allm_predictor *p, const struct allm_calib_ops *ops,
				  struct allm_err *err);

/* Profiles (predictor-profile.c). save: 0 or -errno (with err); refuses an
 * uncalibrated predictor (-EINVAL); writes a temporary file and renames it, so a
 * crash never leaves half a profile. load: 0; -ENOENT if missing; -EINVAL (err
 * names the field) if corrupted; -ESTALE (err says which key field) if made for
 * another key. On failure p is unchanged. */
int allm_predictor_save(const struct allm_predictor *p, const char *path, struct allm_err *err);
int allm_predictor_load(struct allm_predictor *p, const char *path, struct allm_err *err);
/* $XDG_CACHE_HOME/adaptivellm/ (else ~/.cache/adaptivellm/) + a file name made of
 * the sanitised model, device and dtype and a hash of the whole key. Creates the
 * directory. 0, -ENOENT (no HOME), -ENAMETOOLONG or the mkdir error. */
int allm_predictor_default_path(const struct allm_predictor_key *key, char *ret, size_t len);

/* For stats and JSON, in natural units. */
struct allm_predictor_info {
	double rc_coef[4]; /* s, s/token, s/token^2 (per sequence), s/sequence */
	double bw[2], lat[2]; /* bytes/s and s per run, [0] = d2h, [1] = h2d */
	double disk_bw[2], disk_lat[2]; /* [0] = write, [1] = read */
	double mape_disk, calib_mape_disk;
	int64_t n_disk_obs;
	int64_t n_prefill_obs, n_swap_obs;
	double mape_recompute, mape_swap; /* rolling, NAN if no sample */
	bool calibrated;
	double calib_mape_recompute, calib_mape_swap; /* leave-one-out at calibration, NAN if none */
	double rc_scale, swap_scale[2]; /* drift since calibration (1 = none) */
};
void allm_predictor_get_info(const struct allm_predictor *p, struct allm_predictor_info *ret);

/* Shared by predictor.c and predictor-profile.c. */
/* Features of a prefill shape, sanitised (never NaN, never negative). */
void allm_pred_rc_features(const struct allm_prefill_shape *s, double x[4]);
/* Bandwidth from a swap model's coefficients. */
double allm_pred_swap_bw(const struct allm_pred_lsq *q);

#ifdef __cplusplus
}
#endif

#endif
