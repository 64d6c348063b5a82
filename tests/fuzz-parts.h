/* Fuzz inputs that stand for several files: the parts are separated by the 4
 * bytes "\n\0\1\n" (rare in text and JSON, so mutations keep them apart). */
#ifndef ALLM_FUZZ_PARTS_H
#define ALLM_FUZZ_PARTS_H

#include "vdir.h"

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

/* The next parts as files of a directory, named in order; a part that is absent
 * (the input ended) is no file. Returns how many went into files[]. */
static inline size_t fuzz_files(const uint8_t **p, const uint8_t *end, const char *const *names, size_t n,
				struct allm_vfile *files)
{
	size_t k = 0, len = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *s = fuzz_part(p, end, &len);
		if (s)
			files[k++] = (struct allm_vfile){names[i], s, len};
	}
	return k;
}

#endif
