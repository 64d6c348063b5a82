/* Wiring the cost predictors to a live engine: calibration runs real, timed
 * prefills and swaps on the backend; the profile is loaded when it matches and
 * saved after calibrating (DESIGN §7). */
#ifndef ALLM_ENGINE_CALIB_H
#define ALLM_ENGINE_CALIB_H

#include "engine.h"

/* The key that identifies a profile: model, device, dtype, block geometry. */
void allm_engine_predictor_key(const struct allm_model *m, const struct allm_kv_cache *kv,
			       struct allm_predictor_key *ret);

/* Loads profile_path (NULL: the default path for the key) when it exists and
 * matches; otherwise, with at_start (or on a simulated device), calibrates
 * (progress to the callback) and saves it, else makes a first estimate in a
 * fraction of a second and serves at once: the predictors learn from real
 * steps and the profile is saved once they have (allm_engine_predictor_learned).
 * *ret_note says what happened. The engine must be idle: timing uses the KV
 * pools as scratch. 0 or -errno with err. */
int allm_engine_prepare_predictor(struct allm_engine *e, const char *profile_path, bool at_start,
				  void (*progress)(void *user, int done, int total), void *user,
				  char *ret_note, size_t note_len, struct allm_err *err);

/* After a real step was learned from: an estimated predictor that has learned
 * enough becomes calibrated, its profile is saved, and on_note says so. */
void allm_engine_predictor_learned(struct allm_engine *e);

/* Times a prefill of n_seqs scratch sequences of len tokens on the real
 * executor (their blocks go straight back): seconds, or -ENOSPC when the device
 * pool lacks the blocks, -ENOMEM, -EIO. Calibration's timer, and the regret
 * probe's (engine-preempt.c) while serving, between steps. */
double allm_engine_time_prefill(struct allm_engine *e, int32_t n_seqs, int32_t len);

/* Runs calibration now (the control plane's `calibrate`), regardless of profile. */
int allm_engine_calibrate(struct allm_engine *e, void (*progress)(void *user, int done, int total),
			  void *user, struct allm_err *err);
/* Times the disk tier's writes and reads and fits its model (nothing without a
 * disk tier). Run at every start: profiles keep no disk model. */
int allm_engine_calibrate_disk(struct allm_engine *e, void (*progress)(void *user, int done, int total),
			       void *user, struct allm_err *err);

#endif
