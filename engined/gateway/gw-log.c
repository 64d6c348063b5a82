/* The gateway's log: one line per message on stderr, time-stamped and tagged
 * with the engine's name, filtered by --log-level. In the library, not the
 * program, so that everything built on liballm-gateway (tests, fuzzers) links. */
#include "gateway.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void gw_log(const struct gw *gw, enum allm_log_level level, const char *fmt, ...)
{
	if (level > gw->o.log_level)
		return;
	struct timespec ts;
	struct tm tm;
	char line[2048];
	va_list ap;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	int k = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld allm-gateway[%s] %s: ", tm.tm_hour,
			 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, gw->o.engine, allm_log_level_name(level));
	va_start(ap, fmt);
	vsnprintf(line + k, sizeof(line) - (size_t)k, fmt, ap);
	va_end(ap);
	/* one write per line: threads log at once */
	fprintf(stderr, "%s\n", line);
}
