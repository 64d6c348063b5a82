/* An error as the OpenAI API reports it, and the field checks that make one: the
 * API layer's lowest piece, shared by the request parser (gw-openai.c) and the
 * parsers it calls (gw-structured.c, gw-tools.c), which therefore never include
 * gw-openai.h (no file circle). */
#ifndef ALLM_GW_API_ERR_H
#define ALLM_GW_API_ERR_H

#include <jansson.h>
#include <stdbool.h>

/* An error as the API reports it. */
struct gw_api_err {
	int status;      /* HTTP status */
	char type[40];   /* "invalid_request_error", ... */
	char code[40];   /* "model_not_found", ... or "" (null) */
	char param[40];  /* the offending field or "" (null) */
	char msg[400];
};

/* Fills e (always returns -1, for `return gw_api_fail(...)`). */
int gw_api_fail(struct gw_api_err *e, int status, const char *type, const char *code,
		const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Field checks (absent or null: *v keeps its default): a 400 naming the field, a
 * bool. -1 with e. */
int gw_api_bad(struct gw_api_err *e, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int gw_api_get_bool(json_t *b, const char *k, bool *v, struct gw_api_err *e);

#endif
