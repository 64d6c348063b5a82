/* The thin loader: a model is a Hugging Face directory (hf-model.h) or a GGUF file
 * (gguf-model.h, --model FILE.gguf); this file picks one for the callers of
 * model-config.h's and model.h's load functions, so the two loaders stay peers
 * that never call each other. */
#include "gguf-model.h"
#include "hf-model.h"

/* A path of the disk that is a GGUF file (an embedded directory never is one). */
static bool is_gguf(const struct allm_vdir *dir)
{
	return !allm_vdir_embedded(dir) && allm_gguf_is_file(dir->path);
}

int allm_model_config_load(const char *dir, struct allm_model_config *ret, struct allm_err *err)
{
	struct allm_vdir d = allm_vdir_disk(dir);
	return allm_model_config_load_from(&d, ret, err);
}

int allm_model_config_load_from(const struct allm_vdir *dir, struct allm_model_config *ret,
				struct allm_err *err)
{
	if (is_gguf(dir))
		return allm_gguf_model_config_load(dir->path, ret, err);
	return allm_hf_model_config_load_from(dir, ret, err);
}

int allm_model_load(allm_backend_t *be, const char *dir, const struct allm_model_load_opts *o,
		    struct allm_model **ret, struct allm_err *err)
{
	struct allm_vdir d = allm_vdir_disk(dir);
	return allm_model_load_from(be, &d, o, ret, err);
}

int allm_model_load_from(allm_backend_t *be, const struct allm_vdir *dir,
			 const struct allm_model_load_opts *o, struct allm_model **ret,
			 struct allm_err *err)
{
	if (is_gguf(dir))
		return allm_gguf_model_load(be, dir->path, o, ret, err);
	return allm_hf_model_load_from(be, dir, o, ret, err);
}
