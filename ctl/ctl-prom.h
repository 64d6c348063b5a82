/* The engine's `metrics` reply (ctl/PROTOCOL.md) as Prometheus text exposition
 * format 0.0.4: one renderer, so `allmctl metrics` and allm-gateway's GET /metrics
 * print the same bytes for the same reply.
 *
 * Library code: -errno, never prints; safe from any thread (no global state). */
#ifndef ALLM_CTL_PROM_H
#define ALLM_CTL_PROM_H

#include "ctl-proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Content-Type of the text (for HTTP). */
#define ALLM_CTL_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Renders result ({"families": [...]}) as text. Checks every family first: names
 * and label names must be valid Prometheus identifiers, types counter / gauge /
 * histogram, histograms' bounds increasing with one cumulative count more than
 * bounds. 0 with *ret (malloc'ed, NUL-terminated; the caller frees it with
 * free()) and *ret_len; -EBADMSG with a reason in err (may be NULL) for a reply
 * that breaks these rules, -ENOMEM. *ret untouched on failure. */
int allm_ctl_prom_render(const msgpack_object *result, char **ret, size_t *ret_len, char *err,
			 size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
