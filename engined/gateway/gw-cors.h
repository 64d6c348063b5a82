/* Cross-origin resource sharing (the Fetch standard's CORS protocol), so a page
 * in a browser may call the gateway: off unless --allowed-origins names origins
 * (or "*"). Answers carry Access-Control-Allow-Origin for an allowed Origin; a
 * preflight (OPTIONS with Access-Control-Request-Method) is answered 204 with
 * what may follow, or 403 naming what is not allowed. Preflights carry no
 * credentials, so they need no API key; the request after one still does. */
#ifndef ALLM_GW_CORS_H
#define ALLM_GW_CORS_H

#include <stdbool.h>
#include <stddef.h>

struct MHD_Connection;
struct MHD_Response;

/* The flags (comma-separated lists; NULL: the default). */
struct gw_cors {
	const char *origins; /* --allowed-origins: "https://a.example,http://localhost:3000",
			      * or "*" for any; NULL: CORS off (no headers, preflights 403) */
	const char *headers; /* --allowed-headers: request headers a page may send; NULL or
			      * "*": any it asks for (Authorization included) */
	const char *methods; /* --allowed-methods: NULL or "*": GET, POST, HEAD, OPTIONS */
};

/* Adds to res the headers an answer to c's request carries (none when it has no
 * Origin, or one not allowed). */
void gw_cors_answer(const struct gw_cors *o, struct MHD_Connection *c, struct MHD_Response *res);

/* Whether c's request is a preflight (OPTIONS with an Origin and
 * Access-Control-Request-Method). */
bool gw_cors_is_preflight(struct MHD_Connection *c, const char *method);

/* A preflight: 204 with the Access-Control-Allow-* headers added to res, or 403
 * with why (NUL-terminated, truncated to len) saying what is not allowed. */
unsigned gw_cors_preflight(const struct gw_cors *o, struct MHD_Connection *c, struct MHD_Response *res,
			   char *why, size_t len);

#endif
