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
 * matches; otherwise calibrates (progress to the callback) and saves it. *ret_note
 * says what happened ("profile loaded from X", "calibrated (...)", "profile X
 * ignored: ..."). The engine must be idle: calibration uses the KV pools as
 * scratch. 0 or -errno with err. */
int allm_engine_prepare_predictor(struct allm_engine *e, const char *profile_path,
				  void (*progress)(void *user, int done, int total), void *user,
				  char *ret_note, size_t note_len, struct allm_err *err);

/* Runs calibration now (the control plane's `calibrate`), regardless of profile. */
int allm_engine_calibrate(struct allm_engine *e, void (*progress)(void *user, int done, int total),
			  void *user, struct allm_err *err);
/* Times the disk tier's writes and reads and fits its model (nothing without a
 * disk tier). Run at every start: profiles keep no disk model. */
int allm_engine_calibrate_disk(struct allm_engine *e, void (*progress)(void *user, int done, int total),
			       void *user, struct allm_err *err);

#endif
