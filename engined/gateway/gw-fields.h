/* Every top-level field of a /v1/completions or /v1/chat/completions body, and
 * of a chat message, is in one table (gw-fields.c): applied, accepted without
 * effect, or refused with a reason; a field the table does not know is refused
 * too. Nothing a client sends is dropped without a word. The table is the one
 * place to change when a field becomes supported (structured output: flip its
 * row from REFUSED to APPLIED and read it where the request is parsed). The
 * docs/USAGE.md's gateway section lists the same rows (tests/gateway-api.sh checks it
 * against `allm-gateway --list-fields`). */
#ifndef ALLM_GW_FIELDS_H
#define ALLM_GW_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

enum gw_field_kind {
	GW_FIELD_APPLIED,  /* read and honoured where the request is parsed */
	GW_FIELD_IGNORED,  /* accepted and has no effect here (why says so) */
	GW_FIELD_REFUSED,  /* a 400 naming it, unless it holds its neutral value */
};

/* The endpoints a field belongs to (a bit each). */
#define GW_EP_COMPLETIONS (1u << 0)
#define GW_EP_CHAT (1u << 1)
#define GW_EP_MESSAGE (1u << 2) /* a key of one of chat's messages */
#define GW_EP_TOKENIZE (1u << 3)
#define GW_EP_DETOKENIZE (1u << 4)

/* The first field of object b (sent to endpoint ep: one GW_EP_*) that is
 * refused: NULL when every field is applied or accepted. Else its name (b's
 * key) and, in why, a sentence saying why (NUL-terminated, truncated). */
const char *gw_fields_refused(json_t *b, unsigned ep, char *why, size_t len);

/* The table as text for --list-fields: one line a field, "ENDPOINTS KIND NAME: why". */
void gw_fields_list(FILE *f);

#endif
