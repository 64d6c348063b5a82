#include "progress.h"

#include <stdio.h>
#include <unistd.h>

static void draw(struct allm_progress *p, uint64_t done, uint64_t total, bool bytes)
{
	double now = allm_now();
	if (!p->tty)
		p->tty = isatty(STDERR_FILENO) ? 1 : 2;
	bool last = done >= total;
	if (last && p->drawn == 2)
		return; /* the final line is out */
	if (!last && p->drawn && now - p->last_draw < (p->tty == 1 ? 0.1 : PROGRESS_LOG_EVERY))
		return;
	p->last_draw = now;
	char what[96];
	if (bytes)
		snprintf(what, sizeof(what), "%3.0f%% %.2f/%.2f GiB", 100.0 * done / total,
			 done / 1073741824.0, total / 1073741824.0);
	else
		snprintf(what, sizeof(what), "%llu/%llu", (unsigned long long)done,
			 (unsigned long long)total);
	const char *pre = p->prefix ? p->prefix : "";
	if (p->tty == 1) {
		int w = 30, fill = (int)((double)done / (double)total * w);
		char bar[64];
		for (int i = 0; i < w; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[w] = 0;
		fprintf(stderr, "\r%s%s [%s] %s%s", pre, p->label, bar, what, last ? "\n" : "");
	} else {
		fprintf(stderr, "%s%s: %s%s\n", pre, p->label, what, last ? " (done)" : "");
	}
	p->drawn = last ? 2 : 1;
	fflush(stderr);
}

void allm_progress_cb(void *user, uint64_t done, uint64_t total)
{
	struct allm_progress *p = user;
	if (total == 0 || total < p->min_total)
		return;
	draw(p, done, total, true);
}

void allm_progress_steps(struct allm_progress *p, uint64_t done, uint64_t total)
{
	if (total == 0)
		return;
	draw(p, done, total, false);
}
