/* Description: libFuzzer target over the grammar compilers and the matcher (engined/grammar/): a grammar's text as a client sends it (GBNF, a JSON Schema, a regex, a choice), compiled against a small vocabulary of single bytes and multi-byte tokens, then walked by the token ids the rest of the input names. The input is a kind byte (its value mod 6 is enum allm_grammar_kind), the text, then after "\n\0\1\n" the token ids (one byte each). A text compiles or is refused with -EINVAL/-E2BIG and a message; a compiled grammar's every mask agrees with accept() on the tokens tried, and never allows nothing before the grammar has ended. Nothing may crash, leak or hang. */
#include "grammar.h"

#include "fuzz-parts.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

static const char *const multi[] = { "{\"", "\":", "\"}", "true", "null", "ab", "abc", "\xc3\xa9", "\xe4\xb8",
				     "\xad", "12", "-1", "0.", "}", "]", ", ", "\\u00", "\n", "  ", "x\"" };
#define N_MULTI (sizeof(multi) / sizeof(multi[0]))
#define EOS_ID (256 + (int32_t)N_MULTI)
#define VOCAB (EOS_ID + 1)

static struct allm_grammar_vocab *vocab;

static void make_vocab(void)
{
	static uint8_t one[256];
	const uint8_t *bytes[VOCAB];
	uint32_t len[VOCAB];
	for (int32_t i = 0; i < 256; i++) {
		one[i] = (uint8_t)i;
		bytes[i] = &one[i];
		len[i] = 1;
	}
	for (size_t i = 0; i < N_MULTI; i++) {
		bytes[256 + i] = (const uint8_t *)multi[i];
		len[256 + i] = (uint32_t)strlen(multi[i]);
	}
	bytes[EOS_ID] = NULL;
	len[EOS_ID] = 0;
	if (allm_grammar_vocab_create(VOCAB, bytes, len, &vocab))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!vocab)
		make_vocab();
	if (size < 1)
		return 0;
	int kind = data[0] % 6;
	const uint8_t *p = data + 1, *end = data + size;
	size_t n_text = 0, n_ids = 0;
	const uint8_t *text = fuzz_part(&p, end, &n_text), *ids = fuzz_part(&p, end, &n_ids);
	if (!text)
		return 0;
	/* the text in a buffer of exactly its size: no NUL promised */
	char *t = malloc(n_text ? n_text : 1);
	if (!t)
		return 0;
	memcpy(t, text, n_text);
	struct allm_grammar *g = NULL;
	struct allm_err err = { { 0 } };
	int r = allm_grammar_compile(kind, t, n_text, vocab, &g, &err);
	free(t);
	if (r) {
		if ((r != -EINVAL && r != -E2BIG && r != -ENOMEM) || !err.msg[0] || g)
			abort();
		return 0;
	}
	int32_t eos = EOS_ID;
	struct allm_grammar_matcher *m;
	if (allm_grammar_matcher_create(g, &eos, 1, &m)) {
		allm_grammar_unref(g);
		return 0;
	}
	for (size_t i = 0; ids && i < n_ids && i < 64; i++) {
		const uint64_t *bits = allm_grammar_matcher_mask(m);
		uint64_t any = 0;
		for (int32_t w = 0; w < (VOCAB + 63) / 64; w++)
			any |= bits[w];
		if (!any)
			abort(); /* a grammar never leaves nothing allowed, not even EOS */
		int32_t id = ids[i] == 0xff ? EOS_ID : (int32_t)(ids[i] % VOCAB);
		bool allowed = (bits[id >> 6] >> (id & 63)) & 1;
		if (allm_grammar_matcher_accept(m, id) != allowed)
			abort(); /* the mask and accept() disagree */
	}
	allm_grammar_matcher_free(m);
	allm_grammar_unref(g);
	return 0;
}
