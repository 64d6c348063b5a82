/* CORS for browsers (gw-cors.h): the origin, method and headers of a request
 * checked against the flags' lists. */
#include "gw-cors.h"

#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* How long a browser may keep a preflight's answer, seconds. */
#define GW_CORS_MAX_AGE "600"
#define GW_CORS_METHODS "GET, POST, HEAD, OPTIONS"

static bool any(const char *list)
{
	return !list || !strcmp(list, "*");
}

/* Whether the comma-separated list holds item (n bytes); case as told. */
static bool listed(const char *list, const char *item, size_t n, bool nocase)
{
	for (const char *p = list; p && *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t k = strcspn(p, ",");
		size_t e = k;
		while (e && p[e - 1] == ' ')
			e--;
		if (e == n && e && (nocase ? !strncasecmp(p, item, n) : !strncmp(p, item, n)))
			return true;
		p += k;
	}
	return false;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The request's Origin when it is allowed, else NULL. */
static const char *allowed_origin(const struct gw_cors *o, struct MHD_Connection *c)
{
	const char *origin = header(c, "Origin");
	if (!o->origins || !origin || !*origin)
		return NULL;
	return !strcmp(o->origins, "*") || listed(o->origins, origin, strlen(origin), false) ? origin : NULL;
}

void gw_cors_answer(const struct gw_cors *o, struct MHD_Connection *c, struct MHD_Response *res)
{
	const char *origin = allowed_origin(o, c);
	if (!origin)
		return;
	/* "*" answers any page alike; a list answers each its own origin, so caches
	 * must key on it */
	if (!strcmp(o->origins, "*")) {
		MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
	} else {
		MHD_add_response_header(res, "Access-Control-Allow-Origin", origin);
		MHD_add_response_header(res, "Vary", "Origin");
	}
}

bool gw_cors_is_preflight(struct MHD_Connection *c, const char *method)
{
	return !strcmp(method, "OPTIONS") && header(c, "Origin") && header(c, "Access-Control-Request-Method");
}

unsigned gw_cors_preflight(const struct gw_cors *o, struct MHD_Connection *c, struct MHD_Response *res,
			   char *why, size_t len)
{
	const char *method = header(c, "Access-Control-Request-Method");
	const char *asked = header(c, "Access-Control-Request-Headers");
	if (!o->origins) {
		snprintf(why, len, "cross-origin requests are off (allm-gateway --allowed-origins ORIGINS)");
		return 403;
	}
	if (!allowed_origin(o, c)) {
		snprintf(why, len, "origin %.200s is not in --allowed-origins", header(c, "Origin"));
		return 403;
	}
	if (!method || !(any(o->methods) ? listed(GW_CORS_METHODS, method, strlen(method), false)
					 : listed(o->methods, method, strlen(method), false))) {
		snprintf(why, len, "method %.40s is not in --allowed-methods (%s)", method ? method : "?",
			 any(o->methods) ? GW_CORS_METHODS : o->methods);
		return 403;
	}
	for (const char *p = asked; p && *p && !any(o->headers);) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t k = strcspn(p, ","), e = k;
		while (e && p[e - 1] == ' ')
			e--;
		if (e && !listed(o->headers, p, e, true)) {
			snprintf(why, len, "request header %.*s is not in --allowed-headers (%s)", (int)(e < 80 ? e : 80),
				 p, o->headers);
			return 403;
		}
		p += k;
	}
	gw_cors_answer(o, c, res);
	MHD_add_response_header(res, "Access-Control-Allow-Methods", any(o->methods) ? GW_CORS_METHODS : o->methods);
	/* "*" would not cover Authorization (Fetch standard): name what was asked */
	if (asked && *asked)
		MHD_add_response_header(res, "Access-Control-Allow-Headers", any(o->headers) ? asked : o->headers);
	MHD_add_response_header(res, "Access-Control-Max-Age", GW_CORS_MAX_AGE);
	return 204;
}
