/* Description: libFuzzer target over the chat-template path (engined/template/, the Jinja interpreter, through engined/gateway/chat-template.c): a model's `chat_template` text (from a model file anyone may write) and the messages and tools a client sends. The input is a flags byte (bit 0: add_generation_prompt; bit 1: a BOS and EOS string are given; bit 2: render the messages as they come, not as a list), then the template, the BOS, the EOS, the messages (JSON) and the tools (JSON) separated by "\n\0\1\n"; messages that are not JSON become one user message with that text. A template parses or is refused with -EINVAL and a message; a parsed one renders or fails with one message (its raise_exception, an interpreter error, or -E2BIG at a limit: the limits are set low here so a slow template ends quickly); a render's segments cover its text exactly, in order, alternating template text and data. Nothing may crash, leak, hang or read past a part. */
#include "chat-template.h"
#include "template.h"

#include "fuzz-parts.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

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

static void check_out(const struct allm_tmpl_out *o)
{
	size_t at = 0;
	if (!o->text || o->text[o->len] != 0)
		abort();
	for (size_t i = 0; i < o->n_segs; i++) {
		if (o->segs[i].off != at || !o->segs[i].len || (i && o->segs[i].data == o->segs[i - 1].data))
			abort();
		at += o->segs[i].len;
	}
	if (at != o->len)
		abort();
}

static void check_err(int r, const char *err)
{
	if ((r != -EINVAL && r != -ENOMEM && r != -E2BIG) || (r != -ENOMEM && !err[0]))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool gen = data[0] & 1, specials = data[0] & 2, raw = data[0] & 4;
	const uint8_t *p = data + 1, *end = data + size;
	size_t n_t = 0, n_b = 0, n_e = 0, n_m = 0, n_x = 0;
	const uint8_t *t = fuzz_part(&p, end, &n_t), *b = fuzz_part(&p, end, &n_b);
	const uint8_t *e = fuzz_part(&p, end, &n_e), *m = fuzz_part(&p, end, &n_m);
	const uint8_t *x = fuzz_part(&p, end, &n_x);
	if (!t)
		return 0;
	/* the template in a buffer of exactly its size: len bytes, no NUL promised */
	char *tmpl = malloc(n_t ? n_t : 1), *bos = specials ? dup_part(b, n_b) : NULL;
	char *eos = specials ? dup_part(e, n_e) : NULL;
	struct allm_chat_template *ct = NULL;
	struct allm_tmpl *jt = NULL;
	struct allm_tmpl_out o = {0};
	json_t *msgs = m ? json_loadb((const char *)m, n_m, JSON_DECODE_ANY, NULL) : NULL;
	json_t *tools = x ? json_loadb((const char *)x, n_x, JSON_DECODE_ANY, NULL) : NULL;
	char err[600] = "";
	if (!tmpl)
		goto out;
	memcpy(tmpl, t, n_t);
	if (!msgs && m) {
		json_t *text = json_stringn_nocheck((const char *)m, n_m);
		msgs = json_pack("[{s:s, s:o}]", "role", "user", "content", text);
	}
	if (!raw && !json_is_array(msgs)) {
		json_decref(msgs);
		msgs = json_array();
	}
	/* the gateway's path, default limits: only for small inputs */
	int r = allm_chat_template_parse(tmpl, n_t, bos, eos, &ct, err, sizeof(err));
	if (r) {
		check_err(r, err);
		if (ct)
			abort();
		goto out;
	}
	if (!allm_chat_template_name(ct))
		abort();
	/* the interpreter itself, with limits that keep each run short */
	if (allm_tmpl_parse(tmpl, n_t, &jt, err, sizeof(err)))
		abort(); /* the same text parsed above */
	json_t *trusted = json_pack("{s:b}", "add_generation_prompt", gen), *d = json_object();
	/* the gateway's: no NUL inside (a fuzzed one may hold any byte) */
	if (bos)
		json_object_set_new(trusted, "bos_token", json_stringn_nocheck(bos, strlen(bos)));
	if (eos)
		json_object_set_new(trusted, "eos_token", json_stringn_nocheck(eos, strlen(eos)));
	if (msgs)
		json_object_set(d, "messages", msgs);
	if (tools)
		json_object_set(d, "tools", tools);
	struct allm_tmpl_env env = {.now = 1700000000,
				    .limits = {.max_output = 1 << 20, .max_memory = 32 << 20, .max_steps = 200000}};
	bool raised;
	err[0] = 0;
	r = allm_tmpl_render(jt, trusted, d, &env, &o, &raised, err, sizeof(err));
	json_decref(trusted);
	json_decref(d);
	if (r)
		check_err(r, err);
	else
		check_out(&o);
	allm_tmpl_out_free(&o);
	if (!r && n_t < 4096 && json_is_array(msgs)) {
		r = allm_chat_template_render(ct, msgs, json_is_array(tools) ? tools : NULL, gen, &o, err, sizeof(err));
		if (r)
			check_err(r, err);
		else
			check_out(&o);
		allm_tmpl_out_free(&o);
	}
out:
	allm_tmpl_free(jt);
	allm_chat_template_free(ct);
	json_decref(msgs);
	json_decref(tools);
	free(tmpl);
	free(bos);
	free(eos);
	return 0;
}
