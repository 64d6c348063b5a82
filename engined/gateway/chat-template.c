/* Chat templates of the common families, recognised by their text and rendered by
 * hand (see chat-template.h). The texts below are the `chat_template` values of
 * the models named, as transformers reads them from tokenizer_config.json, with a
 * newline written where the file has either a newline or Jinja's '\n'. */
#include "chat-template.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum family {
	FAM_LLAMA2,      /* meta-llama/Llama-2-*-chat-hf */
	FAM_LLAMA3,      /* meta-llama/Meta-Llama-3-*-Instruct */
	FAM_MISTRAL,     /* mistralai/Mistral-7B-Instruct-v0.1 (and v0.2, Mixtral with eos_space off) */
	FAM_CHATML,      /* ChatML, e.g. teknium/OpenHermes-2.5-Mistral-7B */
	FAM_QWEN,        /* ChatML with a default system message: Qwen1.5-*-Chat, Qwen2-*-Instruct */
	FAM_QWEN_LAST,   /* Qwen/Qwen1.5-72B-Chat: no <|im_end|> after a final turn without a prompt */
};

/* "@SYS@" marks where a Qwen-style template names its default system message. */
#define SLOT "@SYS@"

static const struct known {
	const char *name;
	enum family fam;
	bool eos_space; /* Mistral v0.1 writes eos_token + ' ' after an answer */
	const char *text;
} known[] = {
	{"llama-2-chat", FAM_LLAMA2, false,
	 "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
	 "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% "
	 "set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
	 "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
	 "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == "
	 "0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + "
	 "'\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% "
	 "endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' "
	 "[/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
	 "eos_token }}{% endif %}{% endfor %}"},
	{"llama-3-instruct", FAM_LLAMA3, false,
	 "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
	 "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
	 "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
	 "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
	 "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"},
	{"mistral-instruct-v0.1", FAM_MISTRAL, true,
	 "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
	 "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
	 "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
	 "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
	 "message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and "
	 "assistant roles are supported!') }}{% endif %}{% endfor %}"},
	/* mistralai/Mistral-7B-Instruct-v0.2, mistralai/Mixtral-8x7B-Instruct-v0.1 */
	{"mistral-instruct", FAM_MISTRAL, false,
	 "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
	 "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
	 "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
	 "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
	 "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
	 "roles are supported!') }}{% endif %}{% endfor %}"},
	{"chatml", FAM_CHATML, false,
	 "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
	 "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
	 "'<|im_start|>assistant\n' }}{% endif %}"},
	{"qwen-chatml", FAM_QWEN, false,
	 "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
	 "'<|im_start|>system\n" SLOT "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] "
	 "+ '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt "
	 "%}{{ '<|im_start|>assistant\n' }}{% endif %}"},
	{"qwen1.5-chatml", FAM_QWEN_LAST, false,
	 "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
	 "'<|im_start|>system\n" SLOT "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] "
	 "+ '\n' + message['content']}}{% if (loop.last and add_generation_prompt) or not loop.last "
	 "%}{{ '<|im_end|>' + '\n'}}{% endif %}{% endfor %}{% if add_generation_prompt and "
	 "messages[-1]['role'] != 'assistant' %}{{ '<|im_start|>assistant\n' }}{% endif %}"},
};

struct allm_chat_template {
	const struct known *k;
	char *bos, *eos;     /* copies; NULL when the tokenizer has none */
	char *default_system; /* FAM_QWEN*: the slot's text */
};

static int fail(char *err, size_t errlen, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

/* The template with Jinja's two-character '\n' turned into a newline (inside the
 * known templates' strings both mean the same), and the one newline after a final
 * tag that Jinja's trim_blocks (transformers' setting) would drop, dropped. */
static char *normalize(const char *t, size_t len)
{
	char *o = malloc(len + 1);
	size_t n = 0;
	if (!o)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (t[i] == '\\' && i + 1 < len && t[i + 1] == 'n') {
			o[n++] = '\n';
			i++;
		} else {
			o[n++] = t[i];
		}
	}
	if (n >= 3 && o[n - 1] == '\n' && o[n - 2] == '}' && o[n - 3] == '%')
		n--;
	o[n] = 0;
	return o;
}

/* Matches text against a known template; a SLOT takes any run of characters that
 * cannot end the Jinja string it sits in (no quote, no backslash). *slot gets a
 * malloc'ed copy of that run. */
static bool match(const char *pat, const char *text, char **slot)
{
	const char *s = strstr(pat, SLOT);
	*slot = NULL;
	if (!s)
		return strcmp(pat, text) == 0;
	size_t pre = (size_t)(s - pat), post = strlen(s + strlen(SLOT)), tl = strlen(text);
	if (tl < pre + post || strncmp(pat, text, pre) || strcmp(s + strlen(SLOT), text + tl - post))
		return false;
	size_t n = tl - pre - post;
	for (size_t i = 0; i < n; i++)
		if (text[pre + i] == '\'' || text[pre + i] == '\\')
			return false;
	*slot = strndup(text + pre, n);
	return *slot != NULL;
}

static bool uses(const char *pat, const char *what)
{
	return strstr(pat, what) != NULL;
}

void allm_chat_template_free(struct allm_chat_template *t)
{
	if (!t)
		return;
	free(t->bos);
	free(t->eos);
	free(t->default_system);
	free(t);
}

int allm_chat_template_parse(const char *template, size_t len, const char *bos, const char *eos,
			     struct allm_chat_template **ret, char *err, size_t errlen)
{
	char *norm = normalize(template, len), *slot = NULL;
	const struct known *k = NULL;
	if (!norm)
		return fail(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && !k; i++)
		if (match(known[i].text, norm, &slot))
			k = &known[i];
	free(norm);
	if (!k)
		return fail(err, errlen, -EINVAL,
			    "the model's chat template is not one this gateway can render (it renders "
			    "the Llama 2 chat, Llama 3 instruct, Mistral instruct, ChatML and Qwen "
			    "templates exactly; no general Jinja)");
	if ((uses(k->text, "bos_token") && !bos) || (uses(k->text, "eos_token") && !eos)) {
		free(slot);
		return fail(err, errlen, -EINVAL,
			    "the %s chat template uses %s, which the tokenizer does not define", k->name,
			    uses(k->text, "bos_token") && !bos ? "bos_token" : "eos_token");
	}
	struct allm_chat_template *t = calloc(1, sizeof(*t));
	if (!t || (bos && !(t->bos = strdup(bos))) || (eos && !(t->eos = strdup(eos)))) {
		allm_chat_template_free(t);
		free(slot);
		return fail(err, errlen, -ENOMEM, "out of memory");
	}
	t->k = k;
	t->default_system = slot;
	*ret = t;
	return 0;
}

const char *allm_chat_template_name(const struct allm_chat_template *t)
{
	return t->k->name;
}

/* --- rendering ------------------------------------------------------------------- */

/* Length of the UTF-8 character at p if it is whitespace by Python's str.isspace()
 * (what Jinja's strip() and |trim use), else 0. */
static size_t py_space(const unsigned char *p, size_t n)
{
	uint32_t c;
	size_t l;
	if (p[0] < 0x80) {
		c = p[0];
		l = 1;
	} else if ((p[0] & 0xe0) == 0xc0 && n >= 2) {
		c = (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
		l = 2;
	} else if ((p[0] & 0xf0) == 0xe0 && n >= 3) {
		c = (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
		l = 3;
	} else {
		return 0;
	}
	bool sp = (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
		  c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
		  c == 0x202f || c == 0x205f || c == 0x3000;
	return sp ? l : 0;
}

/* Python's s.strip(): [*b, *e) shrinks past whitespace at both ends. */
static void py_strip(const char **b, const char **e)
{
	size_t l;
	while (*b < *e && (l = py_space((const unsigned char *)*b, (size_t)(*e - *b))))
		*b += l;
	while (*b < *e) {
		/* back up to the start of the last character */
		const char *c = *e - 1;
		while (c > *b && ((unsigned char)*c & 0xc0) == 0x80 && *e - c < 3)
			c--;
		if (!(l = py_space((const unsigned char *)c, (size_t)(*e - c))) || c + l != *e)
			break;
		*e = c;
	}
}

struct out {
	FILE *f;
};

static void put(struct out *o, const char *s)
{
	fputs(s, o->f);
}

static void putn(struct out *o, const char *s, size_t n)
{
	fwrite(s, 1, n, o->f);
}

static void put_stripped(struct out *o, const char *s, size_t n)
{
	const char *b = s, *e = s + n;
	py_strip(&b, &e);
	putn(o, b, (size_t)(e - b));
}

static bool is(const struct allm_chat_msg *m, const char *role)
{
	return strcmp(m->role, role) == 0;
}

static const char *const alternate =
	"Conversation roles must alternate user/assistant/user/assistant/...";

static int render_llama2(const struct allm_chat_template *t, const struct allm_chat_msg *m,
			 size_t n, struct out *o, char *err, size_t errlen)
{
	const struct allm_chat_msg *sys = is(&m[0], "system") ? &m[0] : NULL;
	const struct allm_chat_msg *loop = sys ? m + 1 : m;
	size_t ln = sys ? n - 1 : n;
	for (size_t i = 0; i < ln; i++) {
		if (is(&loop[i], "user") != (i % 2 == 0))
			return fail(err, errlen, -EINVAL, "%s", alternate);
		bool user = is(&loop[i], "user"), asst = is(&loop[i], "assistant");
		if (!user && !asst)
			continue; /* the template writes nothing for other roles */
		/* content = ['<<SYS>>\n' + system + '\n<</SYS>>\n\n'] + content, then strip() */
		const char *b = loop[i].content, *e = b + loop[i].content_len;
		if (user)
			put(o, t->bos), put(o, "[INST] ");
		else
			put(o, " ");
		if (i == 0 && sys) {
			/* strip() of the whole: it starts with '<', so only its end can
			 * lose whitespace: the user's text's trailing whitespace, or, when
			 * that text is blank, everything after "<</SYS>>" */
			const char *ue = e, *ub = b;
			py_strip(&ub, &ue);
			put(o, "<<SYS>>\n");
			putn(o, sys->content, sys->content_len);
			put(o, "\n<</SYS>>");
			if (ub != ue) {
				put(o, "\n\n");
				putn(o, b, (size_t)(ue - b));
			}
		} else {
			put_stripped(o, b, (size_t)(e - b));
		}
		if (user)
			put(o, " [/INST]");
		else
			put(o, " "), put(o, t->eos);
	}
	return 0;
}

static int render_mistral(const struct allm_chat_template *t, const struct allm_chat_msg *m,
			  size_t n, struct out *o, char *err, size_t errlen)
{
	put(o, t->bos);
	for (size_t i = 0; i < n; i++) {
		if (is(&m[i], "user") != (i % 2 == 0))
			return fail(err, errlen, -EINVAL, "%s", alternate);
		if (is(&m[i], "user")) {
			put(o, "[INST] ");
			putn(o, m[i].content, m[i].content_len);
			put(o, " [/INST]");
		} else if (is(&m[i], "assistant")) {
			putn(o, m[i].content, m[i].content_len);
			put(o, t->eos);
			if (t->k->eos_space)
				put(o, " ");
		} else {
			return fail(err, errlen, -EINVAL, "Only user and assistant roles are supported!");
		}
	}
	return 0;
}

static void render_llama3(const struct allm_chat_template *t, const struct allm_chat_msg *m,
			  size_t n, bool agp, struct out *o)
{
	for (size_t i = 0; i < n; i++) {
		if (i == 0)
			put(o, t->bos);
		put(o, "<|start_header_id|>");
		put(o, m[i].role);
		put(o, "<|end_header_id|>\n\n");
		put_stripped(o, m[i].content, m[i].content_len);
		put(o, "<|eot_id|>");
	}
	if (agp)
		put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_chatml(const struct allm_chat_template *t, const struct allm_chat_msg *m,
			  size_t n, bool agp, struct out *o)
{
	enum family f = t->k->fam;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 && f != FAM_CHATML && !is(&m[0], "system")) {
			put(o, "<|im_start|>system\n");
			put(o, t->default_system);
			put(o, "<|im_end|>\n");
		}
		put(o, "<|im_start|>");
		put(o, m[i].role);
		put(o, "\n");
		putn(o, m[i].content, m[i].content_len);
		bool last = i + 1 == n;
		if (f != FAM_QWEN_LAST || (last && agp) || !last)
			put(o, "<|im_end|>\n");
	}
	if (agp && (f != FAM_QWEN_LAST || !is(&m[n - 1], "assistant")))
		put(o, "<|im_start|>assistant\n");
}

int allm_chat_template_render(const struct allm_chat_template *t, const struct allm_chat_msg *msgs,
			      size_t n, bool add_generation_prompt, char **ret, size_t *ret_len,
			      char *err, size_t errlen)
{
	struct out o;
	char *buf = NULL;
	size_t len = 0;
	int r = 0;
	/* every known template reads messages[0] or messages[-1]: an empty list is an
	 * error there too */
	if (n == 0)
		return fail(err, errlen, -EINVAL, "messages must not be empty");
	if (!(o.f = open_memstream(&buf, &len)))
		return fail(err, errlen, -ENOMEM, "out of memory");
	switch (t->k->fam) {
	case FAM_LLAMA2: r = render_llama2(t, msgs, n, &o, err, errlen); break;
	case FAM_MISTRAL: r = render_mistral(t, msgs, n, &o, err, errlen); break;
	case FAM_LLAMA3: render_llama3(t, msgs, n, add_generation_prompt, &o); break;
	default: render_chatml(t, msgs, n, add_generation_prompt, &o); break;
	}
	if (fclose(o.f) && !r)
		r = fail(err, errlen, -ENOMEM, "out of memory");
	if (r) {
		free(buf);
		return r;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}
