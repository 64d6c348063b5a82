/* Chat templates without a Jinja engine: the `chat_template` of a model's
 * tokenizer_config.json is compared with the templates of the families in common
 * use (Llama 2 chat, Llama 3 instruct, Mistral / Mixtral instruct, ChatML and
 * Qwen's ChatML with a default system message) and, when it is one of them,
 * rendered by code here that does what that template does, character for
 * character (its strip()/trim, its role checks and their error messages).
 * Anything else is refused: a wrong prompt is worse than none.
 *
 * Recognition is by the whole template text, with the two spellings of a newline
 * inside a Jinja string ('\n' escaped or literal) taken as equal; Qwen-style
 * templates may carry any default system message.
 *
 * Library code: -errno and a message, never prints. A parsed template is
 * immutable; render may run from many threads at once. */
#ifndef ALLM_CHAT_TEMPLATE_H
#define ALLM_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

struct allm_chat_template; /* opaque */

struct allm_chat_msg {
	const char *role;    /* NUL-terminated */
	const char *content; /* UTF-8 ... */
	size_t content_len;  /* ... bytes */
};

/* Recognises template (len bytes). bos / eos: the tokenizer's bos_token and
 * eos_token strings (NULL when it has none; a template that uses one then
 * fails here). 0 with *ret (free with allm_chat_template_free), -EINVAL with
 * err saying why it cannot be rendered, -ENOMEM. */
int allm_chat_template_parse(const char *template, size_t len, const char *bos, const char *eos,
			     struct allm_chat_template **ret, char *err, size_t errlen);
void allm_chat_template_free(struct allm_chat_template *t);

/* "llama-2-chat", "llama-3-instruct", "mistral-instruct-v0.1",
 * "mistral-instruct", "chatml", "qwen-chatml", "qwen1.5-chatml". */
const char *allm_chat_template_name(const struct allm_chat_template *t);

/* Renders msgs as the template would with add_generation_prompt. 0 with *ret
 * (malloc'ed, NUL-terminated, the caller frees it) and *ret_len; -EINVAL with
 * err holding the template's own error (e.g. "Conversation roles must alternate
 * user/assistant/user/assistant/..."), -ENOMEM. */
int allm_chat_template_render(const struct allm_chat_template *t, const struct allm_chat_msg *msgs,
			      size_t n, bool add_generation_prompt, char **ret, size_t *ret_len,
			      char *err, size_t errlen);

#endif
