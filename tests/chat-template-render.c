/* Description: test helper (not a test): renders a chat conversation with the gateway's chat-template code (engined/gateway/chat-template.c over engined/template/), for tests/chat-templates.py to compare with Jinja.
 *
 * usage: chat-template-render TOKENIZER_CONFIG.json CONVERSATION.json [--no-generation-prompt]
 * CONVERSATION.json: [{"role": ..., "content": ...}, ...]. Prints the prompt's bytes
 * and exits 0; exits 3 when the template does not parse, 4 when the template
 * refuses the conversation (its raise_exception or another error), the message on
 * stderr. The chat_template may be a list of named templates (the "default" one is
 * rendered). */
#include "chat-template.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *special(json_t *cfg, const char *key)
{
	json_t *v = json_object_get(cfg, key);
	if (json_is_object(v))
		v = json_object_get(v, "content");
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int main(int argc, char **argv)
{
	json_error_t je;
	char err[400];
	if (argc < 3) {
		fprintf(stderr, "usage: %s TOKENIZER_CONFIG.json CONVERSATION.json [--no-generation-prompt]\n", argv[0]);
		return 2;
	}
	json_t *cfg = json_load_file(argv[1], 0, &je), *conv = json_load_file(argv[2], 0, &je);
	const char *t = allm_chat_template_pick(json_object_get(cfg, "chat_template"), false, err, sizeof(err));
	struct allm_chat_template *ct = NULL;
	struct allm_tmpl_out out = {0};
	int rc = 2;
	/* every exit frees what it holds: the sanitizer suite checks for leaks */
	if (!t || !json_is_array(conv)) {
		fprintf(stderr, "bad input files\n");
		goto out;
	}
	if (allm_chat_template_parse(t, strlen(t), special(cfg, "bos_token"),
				     special(cfg, "eos_token"), &ct, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		rc = 3;
		goto out;
	}
	bool agp = !(argc > 3 && !strcmp(argv[3], "--no-generation-prompt"));
	if (allm_chat_template_render(ct, conv, NULL, agp, &out, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		rc = 4;
		goto out;
	}
	fwrite(out.text, 1, out.len, stdout);
	rc = 0;
out:
	allm_tmpl_out_free(&out);
	allm_chat_template_free(ct);
	json_decref(cfg);
	json_decref(conv);
	return rc;
}
