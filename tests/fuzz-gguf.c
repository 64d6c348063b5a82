/* Description: libFuzzer target over a GGUF file a user may be handed (--model FILE.gguf): the container (common/gguf.c), the hyper-parameters and the weights loaded onto the CPU backend (engined/model/gguf-*.c) and the tokenizer (engined/tokenizer/tokenizer-gguf.c), which then encodes and decodes a text. The input is a flags byte (bits 0-1: the storage dtype asked for: f32, f16, bf16, q8_0) and the file's bytes. Each stage must succeed or fail with a negative errno and a message; a loaded model holds every tensor; nothing may crash, leak, read past the file or allocate for more than the file holds. */
#include "backend.h"
#include "gguf-model.h"
#include "tokenizer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

static void refused(int r, const struct allm_err *err)
{
	if (r >= 0 || !err->msg[0])
		abort(); /* a failure must say why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static allm_backend_t *be;
	static const enum allm_dtype dtypes[] = {ALLM_DTYPE_F32, ALLM_DTYPE_F16, ALLM_DTYPE_BF16, ALLM_DTYPE_Q8_0};
	struct allm_err err = {0};
	if (!be) {
		struct allm_backend_opts bo = {.n_threads = 1};
		if (allm_backend_cpu_create(&bo, &be, &err))
			abort();
	}
	if (size < 1)
		return 0;
	struct allm_gguf *g = NULL;
	int r = allm_gguf_open_mem("<fuzz>.gguf", data + 1, size - 1, &g, &err);
	if (r) {
		refused(r, &err);
		if (g)
			abort();
		return 0;
	}
	struct allm_model_config c;
	memset(&err, 0, sizeof(err));
	if ((r = allm_gguf_model_config(g, &c, &err)))
		refused(r, &err);
	struct allm_model_load_opts o = {.wdtype = dtypes[data[0] & 3]};
	struct allm_model *m = NULL;
	memset(&err, 0, sizeof(err));
	if ((r = allm_gguf_model_load_from(be, g, &o, &m, &err))) {
		refused(r, &err);
		if (m)
			abort();
	} else {
		struct allm_weight_spec *specs = NULL;
		size_t n = 0;
		if (allm_model_weight_specs(m, &specs, &n) == 0) {
			for (size_t i = 0; i < n; i++)
				if (!*specs[i].slot)
					abort();
			allm_free(specs);
		}
		allm_model_free(m);
	}
	struct allm_tokenizer *tok = NULL;
	memset(&err, 0, sizeof(err));
	if ((r = allm_tokenizer_from_gguf(g, &tok, &err))) {
		refused(r, &err);
	} else {
		static const char text[] = "Hello <|im_start|>wörld 123 🎉\n\n  x";
		int32_t *ids = NULL;
		size_t n = 0;
		char *back = NULL;
		if (!allm_tokenizer_encode(tok, text, sizeof(text) - 1, true, &ids, &n, &err) &&
		    !allm_tokenizer_decode(tok, ids, n, false, &back, &err) && !back)
			abort();
		allm_free(back);
		allm_free(ids);
		allm_tokenizer_free(tok);
	}
	allm_gguf_close(g);
	return 0;
}
