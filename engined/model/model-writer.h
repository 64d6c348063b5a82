/* Writing a complete Hugging Face model directory of random weights (allm-mkmodel,
 * the embedded default model, tests): config.json, generation_config.json,
 * safetensors (single or sharded), and a SentencePiece-style byte-fallback BPE
 * tokenizer.json whose vocabulary fits the model. */
#ifndef ALLM_MODEL_WRITER_H
#define ALLM_MODEL_WRITER_H

#include "model-config.h"

struct allm_model_write_opts {
	uint64_t seed;
	enum allm_dtype dtype; /* dtype of the tensors in the files */
	int32_t n_shards; /* 0 or 1: model.safetensors; more: sharded + index.json */
};

/* Creates dir (and parents) and writes the model. The weights are exactly those of
 * allm_model_dummy(cfg, seed) rounded to dtype. 0 or -errno with err. */
int allm_model_write_dir(const struct allm_model_config *cfg,
			 const struct allm_model_write_opts *o, const char *dir,
			 struct allm_err *err);

/* Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json with
 * vocab_size tokens (>= 300): <unk>, <s>, </s>, 256 byte-fallback tokens, then
 * characters and merges of common English pieces. */
int allm_tokenizer_write_dir(int32_t vocab_size, const char *dir, struct allm_err *err);

#endif
