/* Checks of an encoded reply against the key table it was written from: a map's
 * count (msgpack's header) is written before its keys, so a hand-counted one drifts
 * when a key is added; these catch it where the reply is made (assert) and in tests. */
#ifndef ALLM_CTL_ENC_CHECK_H
#define ALLM_CTL_ENC_CHECK_H

#include "ctl-proto.h"

#include <stddef.h>
#include <stdint.h>

/* Whether the bytes e wrote from start on are exactly one map whose keys are keys[0..n)
 * in order: 0, or -1 with what differs in why. */
int ctl_enc_check_map(const struct allm_ctl_enc *e, size_t start, const char *const *keys, uint32_t n, char *why,
		      size_t len);
/* ... exactly one map {key: [n maps, map i's "name" names[i]]}. */
int ctl_enc_check_named(const struct allm_ctl_enc *e, size_t start, const char *key, const char *const *names,
			uint32_t n, char *why, size_t len);

#endif
