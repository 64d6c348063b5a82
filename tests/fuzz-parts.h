/* Fuzz inputs that stand for several files: the parts are separated by the 4
 * bytes "\n\0\1\n" (rare in text and JSON, so mutations keep them apart). */
#ifndef ALLM_FUZZ_PARTS_H
#define ALLM_FUZZ_PARTS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const uint8_t fuzz_sep[4] = {'\n', 0, 1, '\n'};

/* The next part of [*p, end) up to the separator (or the end); NULL when none
 * is left. */
static inline const uint8_t *fuzz_part(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *s = *p;
	if (!s)
		return NULL;
	const uint8_t *q = s;
	while (q + sizeof(fuzz_sep) <= end && memcmp(q, fuzz_sep, sizeof(fuzz_sep)))
		q++;
	if (q + sizeof(fuzz_sep) > end) {
		*len = (size_t)(end - s);
		*p = NULL;
	} else {
		*len = (size_t)(q - s);
		*p = q + sizeof(fuzz_sep);
	}
	return s;
}

#endif
