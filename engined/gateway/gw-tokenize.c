/* POST /tokenize and POST /detokenize (vLLM's routes; llama.cpp's server has the
 * same two): the gateway's own tokenizer and chat template, so a client counts
 * tokens, or reads ids back, exactly as a generation request would tokenize, with
 * no engine involved. */
#include "gw-fields.h"
#include "gw-openai.h"

#include "common.h"

#include <stdlib.h>
#include <string.h>

/* Ids a /detokenize may carry (the body cap bounds bytes; this bounds the work). */
#define GW_DETOK_MAX_IDS (1 << 20)

static int tokenize_body(struct gw *gw, const struct gw_model *m, json_t *b, json_t *out, struct gw_api_err *e)
{
	json_t *p = json_object_get(b, "prompt"), *msgs = json_object_get(b, "messages");
	bool chat = msgs && !json_is_null(msgs), strs = false, special = !chat;
	char *text = NULL;
	uint8_t *plain = NULL;
	size_t len = 0;
	if (chat == (p && !json_is_null(p)))
		return gw_api_bad(e, "prompt", "/tokenize takes a 'prompt' (a text) or 'messages', one of them");
	if (gw_api_get_bool(b, "add_special_tokens", &special, e) || gw_api_get_bool(b, "return_token_strs", &strs, e))
		return -1;
	if (!chat && !json_is_string(p))
		return gw_api_bad(e, "prompt", "'prompt' must be a text");
	if (!m->tok)
		return gw_api_fail(e, 501, "not_implemented", NULL, NULL,
				   "this gateway has no tokenizer for the model (start it with --model DIR)");
	if (chat && gw_prompt_render(gw, b, m, &text, &len, &plain, e))
		return -1;
	struct allm_err err = {{0}};
	int32_t *ids = NULL;
	size_t n = 0;
	/* a chat's messages as gw_prompt_chat reads them: special tokens only in the template's text */
	int rc = allm_tokenizer_encode_marked(m->tok, chat ? text : json_string_value(p),
					      chat ? len : json_string_length(p), special, plain, &ids, &n, &err);
	free(text);
	free(plain);
	if (rc)
		return gw_api_bad(e, chat ? "messages" : "prompt", "cannot tokenize: %s", err.msg);
	json_t *tokens = json_array(), *texts = strs ? json_array() : NULL;
	for (size_t i = 0; tokens && i < n; i++) {
		json_array_append_new(tokens, json_integer(ids[i]));
		if (texts) {
			const char *t = allm_tokenizer_id_to_token(m->tok, ids[i]);
			json_array_append_new(texts, json_string(t ? t : ""));
		}
	}
	allm_free(ids);
	json_object_set_new(out, "count", json_integer((json_int_t)n));
	json_object_set_new(out, "max_model_len", json_integer(m->context));
	json_object_set_new(out, "tokens", tokens);
	if (texts)
		json_object_set_new(out, "token_strs", texts);
	return 0;
}

static int detokenize_body(const struct gw_model *m, json_t *b, json_t *out, struct gw_api_err *e)
{
	json_t *t = json_object_get(b, "tokens"), *v;
	size_t i, n = json_array_size(t);
	if (!json_is_array(t) || n > GW_DETOK_MAX_IDS)
		return gw_api_bad(e, "tokens", "'tokens' must be a list of at most %d token ids", GW_DETOK_MAX_IDS);
	if (!m->tok)
		return gw_api_fail(e, 501, "not_implemented", NULL, NULL,
				   "this gateway has no tokenizer for the model (start it with --model DIR)");
	int32_t vocab = allm_tokenizer_vocab_size(m->tok);
	int32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	if (!ids)
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
	json_array_foreach(t, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= vocab) {
			free(ids);
			return gw_api_bad(e, "tokens", "tokens[%zu] is not a token id (0..%d)", i, vocab - 1);
		}
		ids[i] = (int32_t)json_integer_value(v);
	}
	char *text = NULL;
	/* special tokens (BOS) dropped, as generated text is: the prompt's text back */
	int rc = allm_tokenizer_decode(m->tok, ids, n, true, &text, NULL);
	free(ids);
	if (rc || !text) {
		allm_free(text);
		return gw_api_fail(e, 500, "server_error", NULL, NULL, "cannot decode these ids");
	}
	json_object_set_new(out, "prompt", gw_api_text_json(text, strlen(text)));
	allm_free(text);
	return 0;
}

int gw_api_tokenize(struct gw *gw, const struct gw_model *m, bool detok, const char *body, size_t len, char **ret,
		    size_t *ret_len, struct gw_api_err *e)
{
	json_error_t jerr;
	json_t *b = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr), *out = json_object();
	char why[300];
	const char *k;
	int rc = -1;
	if (!b) {
		gw_api_bad(e, NULL, "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
		goto done;
	}
	if (!json_is_object(b) || !out) {
		gw_api_bad(e, NULL, "the body must be a JSON object");
		goto done;
	}
	if ((k = gw_fields_refused(b, detok ? GW_EP_DETOKENIZE : GW_EP_TOKENIZE, why, sizeof(why)))) {
		gw_api_bad(e, k, "%s", why);
		goto done;
	}
	if (gw_api_check_model(b, m, e))
		goto done;
	if (detok ? detokenize_body(m, b, out, e) : tokenize_body(gw, m, b, out, e))
		goto done;
	if (!(*ret = json_dumps(out, JSON_COMPACT))) {
		gw_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
		goto done;
	}
	*ret_len = strlen(*ret);
	rc = 0;
done:
	json_decref(b);
	json_decref(out);
	return rc;
}
