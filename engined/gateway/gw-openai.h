/* The OpenAI API's shapes (DESIGN §9b): a /v1/completions or /v1/chat/completions
 * body checked field by field into a gw_req (prompt tokenized, chat template
 * rendered, context checked), and the JSON that goes back — whole responses,
 * server-sent-event chunks, and errors as {"error": {message, type, param, code}}. */
#ifndef ALLM_GW_OPENAI_H
#define ALLM_GW_OPENAI_H

#include "gateway.h"
#include "gw-api-err.h"

#include <jansson.h>


/* gw-prompt.c: the prompt of r from body b (a completion's first prompt; a
 * chat's messages rendered), tokenized, its echo, its decoder primed, the
 * context checked; then the other choices of r: n for each prompt of a batch
 * (choice k * n + j is prompt k's j-th, seeded with r's seed + j). 0 or -1 with e. */
int gw_prompt_completion(json_t *b, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e);
int gw_prompt_chat(struct gw *gw, json_t *b, const struct gw_model *m, struct gw_req *r, struct gw_api_err *e);
/* A chat body's messages rendered by the model's template (what gw_prompt_chat
 * tokenizes): 0 with *ret (malloc'ed, NUL-terminated), *ret_len and *ret_plain
 * (malloc'ed, a byte per byte of *ret: 1 where the request wrote it, where special
 * tokens must not be read), or -1 with e. */
int gw_prompt_render(struct gw *gw, json_t *b, const struct gw_model *m, char **ret, size_t *ret_len,
		     uint8_t **ret_plain, struct gw_api_err *e);
int gw_prompt_choices(json_t *b, const struct gw_model *m, struct gw_req *r, uint32_t n, struct gw_api_err *e);

/* Parses one request body into a new gw_req (refs 0, phase unset, not enqueued)
 * holding a reference to m. 0 with *ret, or -1 with e. */
/* Scopes the request's cache salt by its user (gw_users_key), the bearer presented
 * (may be NULL) and the gateway's secret. */
void gw_req_scope_cache(struct gw_req *r, const uint8_t secret[GW_CACHE_SECRET_BYTES], const char *user,
			const char *bearer);
int gw_api_parse(struct gw *gw, struct gw_model *m, bool chat, const char *body, size_t len,
		 struct gw_req **ret, struct gw_api_err *e);
/* POST /tokenize (detok false: {"prompt"} or chat's {"messages"} -> {"count",
 * "max_model_len", "tokens"}) and POST /detokenize ({"tokens"} -> {"prompt"}), as
 * vLLM answers them, with the model's tokenizer: 0 with *ret (malloc'ed JSON) and
 * *ret_len, or -1 with e. gw-tokenize.c. */
int gw_api_tokenize(struct gw *gw, const struct gw_model *m, bool detok, const char *body, size_t len, char **ret,
		    size_t *ret_len, struct gw_api_err *e);
/* b's "model" (absent or null: any) is m's id: 0, or -1 with a 404 in e. */
int gw_api_check_model(json_t *b, const struct gw_model *m, struct gw_api_err *e);
/* Frees a request that was never handed to the pump. */
void gw_api_discard(struct gw_req *r);

/* {"error": {...}} as compact JSON (malloc'ed). */
char *gw_api_error_json(const struct gw_api_err *e, size_t *len);
/* "stop", "length", "abort" for a finish reason; "tool_calls" for a stop after
 * the choice called tools. */
const char *gw_api_finish_name(int finish, bool called);
/* A JSON string of n bytes of text (U+FFFD if it is not UTF-8); {"prompt_tokens",
 * "completion_tokens", "total_tokens"}. */
json_t *gw_api_text_json(const char *p, size_t n);
json_t *gw_api_usage_json(uint32_t n_prompt, uint32_t n_gen, uint32_t n_cached);

/* Token texts of log-probabilities: one decoder reused for every token (a whole
 * response may hold a million). init: 0 or -ENOMEM; free accepts a failed init. */
struct gw_toktext {
	const struct gw_model *m;
	struct allm_detok *d;    /* NULL without a tokenizer ("token_id:N") */
	char *piece;
	size_t cap;
};
int gw_toktext_init(struct gw_toktext *t, const struct gw_model *m);
void gw_toktext_free(struct gw_toktext *t);
/* Token i of l (the first follows token prev, -1: unknown), one element each:
 * completions' tokens[i] and top_logprobs[i], chat's content[i]. NULL when out
 * of memory. */
json_t *gw_lp_token_json(struct gw_toktext *t, const struct gw_lps *l, size_t i, int32_t prev);
json_t *gw_lp_top_json(struct gw_toktext *t, const struct gw_lps *l, size_t i, int32_t prev);
json_t *gw_lp_chat_json(struct gw_toktext *t, const struct gw_lps *l, size_t i, int32_t prev);
/* The "logprobs" object of tokens [from, from + n) of l (a stream's few; token 0
 * follows prev): chat's {"content": [...]}, completions' {"tokens",
 * "token_logprobs", "top_logprobs", "text_offset": offsets[0..n) (NULL: zeros)}. */
json_t *gw_api_logprobs_json(const struct gw_req *r, const struct gw_lps *l, size_t from, size_t n, int32_t prev,
			     const size_t *offsets);
/* The prompt's last id, which the first generated token follows (-1: unknown). */
int32_t gw_api_last_prompt_id(const struct gw_req *r);
/* One SSE event "data: {...}\n\n" appended to *buf: a chunk with text (NULL: none;
 * chat's first chunk carries the role), its tokens' logprobs (consumed; NULL:
 * null), and finish (NULL while running). */
int gw_api_sse_chunk(const struct gw_req *r, bool first, const char *text, size_t n, json_t *logprobs,
		     const char *finish, char **buf, size_t *len, size_t *cap);
/* A chunk whose delta is one of tool_calls (call: gw_tool_call_delta_json,
 * consumed; chat's first chunk carries the role). */
int gw_api_sse_tool_delta(const struct gw_req *r, bool first, json_t *call, char **buf, size_t *len, size_t *cap);
/* The usage chunk (stream_options.include_usage), an error event, and the end. */
int gw_api_sse_usage(const struct gw_req *r, uint32_t n_prompt, uint32_t n_gen, uint32_t n_cached, char **buf,
		     size_t *len, size_t *cap);
int gw_api_sse_error(const struct gw_api_err *e, char **buf, size_t *len, size_t *cap);
int gw_api_sse_done(char **buf, size_t *len, size_t *cap);

#endif
