/* The thin loader: a model given as a GGUF file is read by tokenizer-gguf.c, a
 * Hugging Face directory (on disk or embedded) by tokenizer-hf.c. The two are peers:
 * neither calls the other, both build with tokenizer-vocab.c. */
#include "tokenizer-internal.h"

#include "gguf.h"

int allm_tokenizer_load(const char *model_dir, struct allm_tokenizer **ret,
			struct allm_err *err)
{
	struct allm_vdir d = allm_vdir_disk(model_dir);
	return allm_tokenizer_load_from(&d, ret, err);
}

int allm_tokenizer_load_from(const struct allm_vdir *dir, struct allm_tokenizer **ret,
			     struct allm_err *err)
{
	if (!allm_vdir_embedded(dir) && allm_gguf_is_file(dir->path))
		return allm_tokenizer_load_gguf(dir->path, ret, err); /* --model FILE.gguf */
	return allm_tok_load_hf(dir, ret, err);
}
