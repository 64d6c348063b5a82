/* One convention for error text in the libc-only libraries (shm/, ctl/,
 * clientlib/, the parameter and settings tables): a call that fails writes one
 * line into the caller's buffer and returns its -errno, in one statement:
 *
 *     return allm_errtext(err, errlen, -EINVAL, "disk block %d outside the file", id);
 *
 * err may be NULL or errlen 0 (the caller wants the code only). The engine's own
 * code, which links liballm-common, uses struct allm_err and allm_err_set
 * (common/common.h) for the same thing. Not installed: for the project's own
 * libraries. */
#ifndef ADAPTIVELLM_ERRTEXT_H
#define ADAPTIVELLM_ERRTEXT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline int allm_errtext(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline int allm_errtext(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

#endif
