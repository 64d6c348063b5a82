/* Description: libFuzzer target over the gateway's request bodies (engined/gateway/gw-openai.c, gw-prompt.c, chat-template.c): what any HTTP client can POST to /v1/completions or /v1/chat/completions. The first byte picks the endpoint and the chat template (none, ChatML, Llama 2, Llama 3, Mistral); the rest is the body. Each body goes through gw_api_parse — field checks, tokenization with the embedded stories260K tokenizer, the template's rendering, the context check, n choices and batched prompts — and becomes either a request (then discarded) or an OpenAI-shaped error with a status the API defines; nothing may crash, leak or read past the body. */
#include "gateway.h"
#include "gw-openai.h"
#include "chat-template.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

/* The templates of tests/chat-templates/, as their tokenizer_config.json hold them:
 * recognition is by the whole text, so these are copies, not paraphrases. */
static const struct {
	const char *text, *bos, *eos;
} templates[] = {
	{"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
	 "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
	 "{% endif %}",
	 NULL, NULL},
	{"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message "
	 "= messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false "
	 "%}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 "
	 "== 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
	 "{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
	 "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
	 "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
	 "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + "
	 "' ' + eos_token }}{% endif %}{% endfor %}",
	 "<s>", "</s>"},
	{"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
	 "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
	 "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content "
	 "}}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
	 "{% endif %}",
	 "<|begin_of_text|>", "<|eot_id|>"},
	{"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == "
	 "0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% "
	 "endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
	 "message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}{% else %}{{ "
	 "raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
	 "<s>", "</s>"},
};

#define N_MODELS (1 + sizeof(templates) / sizeof(templates[0]))

/* One model per template (index 0: none, chat refused), built once: the
 * embedded tokenizer, as the gateway loads it with no --model. */
static struct gw_model *models[N_MODELS];
static struct gw gw;

static void setup(void)
{
	struct gw_opts o = {.engine = "default"};
	for (size_t i = 0; i < N_MODELS; i++) {
		if (gw_model_load(&o, "default", &models[i]) || !models[i]->tok)
			abort();
		if (i == 0)
			continue;
		char err[300];
		struct gw_model *m = models[i];
		if (m->tmpl)
			allm_chat_template_free(m->tmpl);
		if (allm_chat_template_parse(templates[i - 1].text, strlen(templates[i - 1].text),
					     templates[i - 1].bos, templates[i - 1].eos, &m->tmpl, err,
					     sizeof(err))) {
			fprintf(stderr, "fuzz-gateway: template %zu not recognised: %s\n", i - 1, err);
			abort();
		}
	}
	gw.o.log_level = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!models[0])
		setup();
	if (size < 1)
		return 0;
	bool chat = data[0] & 1;
	struct gw_model *m = models[(data[0] >> 1) % N_MODELS];
	/* the body in a buffer of its own size: a read past it is ASan's to catch */
	char *body = malloc(size - 1 ? size - 1 : 1);
	if (!body)
		return 0;
	memcpy(body, data + 1, size - 1);
	struct gw_req *r = NULL;
	struct gw_api_err e = {0};
	if (gw_api_parse(&gw, m, chat, body, size - 1, &r, &e) == 0) {
		/* a request the pump would send: a prompt, at least one choice, all alike */
		if (!r || (!r->ids && !r->text) || r->n_choices < 1 || r->n_choices > GW_MAX_CHOICES)
			abort();
		for (uint32_t i = 1; i < r->n_choices; i++)
			if (!r->choices[i] || r->choices[i]->lead != r)
				abort();
		gw_api_discard(r);
	} else {
		/* an error the API defines, which serializes */
		if (r || (e.status != 400 && e.status != 404 && e.status != 413 && e.status != 500) ||
		    !e.msg[0])
			abort();
		size_t len = 0;
		char *j = gw_api_error_json(&e, &len);
		if (!j || !len)
			abort();
		free(j);
	}
	free(body);
	return 0;
}
