/* Progress of long operations (weight loads, calibration, benchmarks) on stderr:
 * a one-line bar redrawn at most ~10 times a second when stderr is a terminal,
 * plain lines every PROGRESS_LOG_EVERY seconds (and one at the end) when it is
 * not, so logs never fill with '\r' frames. Programs print; library code only
 * calls the callbacks it was handed. */
#ifndef ALLM_PROGRESS_H
#define ALLM_PROGRESS_H

#include <stdint.h>

#include "common.h"

/* Seconds between plain lines when stderr is not a terminal. */
#define PROGRESS_LOG_EVERY 2.0

struct allm_progress {
	const char *label;
	const char *prefix; /* printed first on every line (e.g. "allm-engined: "), or NULL */
	uint64_t min_total; /* totals below this draw nothing (fast loads stay quiet) */
	double last_draw; /* private: */
	int tty; /* 0 unknown, 1 terminal, 2 not */
	int drawn; /* 1 a bar is on screen, 2 the final line was printed */
};

/* Bytes (allm_progress_fn shape): shows GiB. */
void allm_progress_cb(void *user, uint64_t done, uint64_t total);
/* Steps (calibration points, requests done). */
void allm_progress_steps(struct allm_progress *p, uint64_t done, uint64_t total);

#endif
