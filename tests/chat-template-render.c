/* Description: test helper (not a test): renders a chat conversation with the gateway's chat-template code, for tests/chat-templates.py to compare with Jinja.
 *
 * usage: chat-template-render TOKENIZER_CONFIG.json CONVERSATION.json [--no-generation-prompt]
 * CONVERSATION.json: [{"role": ..., "content": ...}, ...]. Prints the prompt's bytes
 * and exits 0; exits 3 when the template is refused (not recognised), 4 when the
 * template refuses the conversation (its raise_exception), the message on stderr. */
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
	json_t *t = json_object_get(cfg, "chat_template");
	struct allm_chat_template *ct = NULL;
	struct allm_chat_msg *m = NULL;
	char *out = NULL;
	int rc = 2;
	/* every exit frees what it holds: the sanitizer suite checks for leaks */
	if (!json_is_string(t) || !json_is_array(conv)) {
		fprintf(stderr, "bad input files\n");
		goto out;
	}
	if (allm_chat_template_parse(json_string_value(t), json_string_length(t), special(cfg, "bos_token"),
				     special(cfg, "eos_token"), &ct, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		rc = 3;
		goto out;
	}
	size_t n = json_array_size(conv);
	m = calloc(n ? n : 1, sizeof(*m));
	if (!m)
		goto out;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(conv, i);
		m[i].role = json_string_value(json_object_get(e, "role"));
		m[i].content = json_string_value(json_object_get(e, "content"));
		m[i].content_len = json_string_length(json_object_get(e, "content"));
	}
	bool agp = !(argc > 3 && !strcmp(argv[3], "--no-generation-prompt"));
	size_t len;
	if (allm_chat_template_render(ct, m, n, agp, &out, &len, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		rc = 4;
		goto out;
	}
	fwrite(out, 1, len, stdout);
	rc = 0;
out:
	free(out);
	free(m);
	allm_chat_template_free(ct);
	json_decref(cfg);
	json_decref(conv);
	return rc;
}
