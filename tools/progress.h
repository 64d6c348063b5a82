/* A one-line progress bar on stderr for long operations (weight loads,
 * calibration, benchmarks). Redraws at most ~10 times a second. */
#ifndef ALLM_PROGRESS_H
#define ALLM_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "common.h"

struct allm_progress {
	const char *label;
	double last_draw;
	uint64_t min_total; /* totals below this draw nothing (fast loads stay quiet) */
	int drawn;
};

static inline void allm_progress_cb(void *user, uint64_t done, uint64_t total)
{
	struct allm_progress *p = user;
	double now = allm_now();
	if (total < p->min_total || total == 0)
		return;
	if (done < total && now - p->last_draw < 0.1)
		return;
	p->last_draw = now;
	int w = 30, fill = (int)((double)done / (double)total * w);
	char bar[64];
	for (int i = 0; i < w; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[w] = 0;
	fprintf(stderr, "\r%s [%s] %3.0f%% %.2f/%.2f GiB", p->label, bar, 100.0 * done / total,
		done / 1073741824.0, total / 1073741824.0);
	if (done >= total)
		fputc('\n', stderr);
	p->drawn = 1;
	fflush(stderr);
}

/* Progress in steps (calibration points, requests done) rather than bytes. */
static inline void allm_progress_steps(struct allm_progress *p, uint64_t done, uint64_t total)
{
	double now = allm_now();
	if (total == 0 || (done < total && now - p->last_draw < 0.1))
		return;
	if (done >= total && p->drawn == 2)
		return; /* already finished the line */
	p->last_draw = now;
	int w = 30, fill = (int)((double)done / (double)total * w);
	char bar[64];
	for (int i = 0; i < w; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[w] = 0;
	fprintf(stderr, "\r%s [%s] %llu/%llu", p->label, bar, (unsigned long long)done,
		(unsigned long long)total);
	if (done >= total) {
		fputc('\n', stderr);
		p->drawn = 2;
	} else {
		p->drawn = 1;
	}
	fflush(stderr);
}

#endif
