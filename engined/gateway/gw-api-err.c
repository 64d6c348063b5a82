/* An error as the OpenAI API reports it (gw-api-err.h). */
#include "gw-api-err.h"

#include "tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Messages quote what the client sent (a JSON parser's excerpt of a bad body, a
 * model name cut at 200 bytes), which may not be UTF-8; the error body is JSON,
 * and a string that is not UTF-8 made it fail to serialize, so the client got a
 * dropped connection instead of its 400. Each byte that starts no valid sequence
 * becomes '?'. */
static void scrub_utf8(char *s)
{
	unsigned char *p = (unsigned char *)s;
	for (size_t n = strlen(s); n > 0;) {
		size_t ok = allm_tok_utf8_valid_prefix(p, n);
		p += ok, n -= ok;
		if (n)
			*p++ = '?', n--;
	}
}

int gw_api_fail(struct gw_api_err *e, int status, const char *type, const char *code,
		const char *param, const char *fmt, ...)
{
	va_list ap;
	e->status = status;
	snprintf(e->type, sizeof(e->type), "%s", type);
	snprintf(e->code, sizeof(e->code), "%s", code ? code : "");
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	scrub_utf8(e->msg);
	scrub_utf8(e->param);
	return -1;
}

int gw_api_bad(struct gw_api_err *e, const char *param, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return gw_api_fail(e, 400, "invalid_request_error", NULL, param, "%s", msg);
}

int gw_api_get_bool(json_t *b, const char *k, bool *v, struct gw_api_err *e)
{
	json_t *j = json_object_get(b, k);
	if (!j || json_is_null(j))
		return 0;
	if (!json_is_boolean(j))
		return gw_api_bad(e, k, "'%s' must be true or false", k);
	*v = json_is_true(j);
	return 0;
}
