/* Description: libFuzzer target over the chat-template recognizer and renderer (engined/gateway/chat-template.c): a model's `chat_template` text (from a tokenizer_config.json anyone may write) and the messages a client sends. The input is a flags byte (bit 0: add_generation_prompt; bit 1: a BOS and EOS string are given), then the template, the BOS, the EOS and the messages separated by "\n\0\1\n"; the messages are role/content pairs split on the byte 0x1e. A template is recognised or refused with -EINVAL and a reason; a recognised one renders the messages or refuses them with the template's own error; a render is NUL-terminated at its length. Nothing may crash, leak or read past a part. */
#include "chat-template.h"

#include "fuzz-parts.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

#define MAX_MSGS 16

/* A part as a NUL-terminated copy of its own size (NULL: absent). */
static char *dup_part(const uint8_t *s, size_t n)
{
	if (!s)
		return NULL;
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool gen = data[0] & 1, specials = data[0] & 2;
	const uint8_t *p = data + 1, *end = data + size;
	size_t n_t = 0, n_b = 0, n_e = 0, n_m = 0;
	const uint8_t *t = fuzz_part(&p, end, &n_t), *b = fuzz_part(&p, end, &n_b);
	const uint8_t *e = fuzz_part(&p, end, &n_e), *m = fuzz_part(&p, end, &n_m);
	if (!t)
		return 0;
	/* the template in a buffer of exactly its size: len bytes, no NUL promised */
	char *tmpl = malloc(n_t ? n_t : 1), *bos = specials ? dup_part(b, n_b) : NULL;
	char *eos = specials ? dup_part(e, n_e) : NULL, *msgs_text = dup_part(m, n_m);
	struct allm_chat_template *ct = NULL;
	char err[200] = "";
	if (!tmpl)
		goto out;
	memcpy(tmpl, t, n_t);
	int r = allm_chat_template_parse(tmpl, n_t, bos, eos, &ct, err, sizeof(err));
	if (r) {
		if ((r != -EINVAL && r != -ENOMEM) || (r == -EINVAL && !err[0]) || ct)
			abort();
		goto out;
	}
	if (!allm_chat_template_name(ct))
		abort();
	/* messages: role 0x1e content 0x1e role 0x1e content ... (contents may hold NULs) */
	struct allm_chat_msg msgs[MAX_MSGS];
	size_t n = 0;
	char *s = msgs_text, *stop = msgs_text ? msgs_text + n_m : NULL;
	while (s && s < stop && n < MAX_MSGS) {
		char *role_end = memchr(s, 0x1e, (size_t)(stop - s));
		if (!role_end)
			break;
		*role_end = 0;
		char *c = role_end + 1, *c_end = memchr(c, 0x1e, (size_t)(stop - c));
		if (!c_end)
			c_end = stop;
		msgs[n++] = (struct allm_chat_msg){.role = s, .content = c, .content_len = (size_t)(c_end - c)};
		s = c_end + 1;
	}
	char *out = NULL;
	size_t len = 0;
	err[0] = 0;
	r = allm_chat_template_render(ct, msgs, n, gen, &out, &len, err, sizeof(err));
	if (r) {
		if ((r != -EINVAL && r != -ENOMEM) || (r == -EINVAL && !err[0]) || out)
			abort();
	} else if (!out || out[len] != 0) {
		abort();
	}
	free(out);
out:
	allm_chat_template_free(ct);
	free(tmpl);
	free(bos);
	free(eos);
	free(msgs_text);
	return 0;
}
