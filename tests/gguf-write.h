/* GGUF files for the tests (not a test): a writer with every value type, raw bytes for
 * the malformed cases, ggml's reference quantizers (Q8_0, Q4_0, Q4_1), and a
 * converter from a Hugging Face Llama directory (config.json, safetensors,
 * tokenizer.json) that writes what llama.cpp's converter writes: `llama.*` keys,
 * GGUF tensor names, the query and key rows of each head interleaved for ggml's RoPE,
 * and the tokenizer as tokenizer.ggml.* (byte-level BPE as "gpt2" with its merges, a
 * SentencePiece-style BPE as "llama" with scores). Its tables are its own, written
 * from llama.cpp's conventions, not shared with the loader they test. */
#ifndef ALLM_TEST_GGUF_WRITE_H
#define ALLM_TEST_GGUF_WRITE_H

#include "gguf.h"

#include <stddef.h>
#include <stdint.h>

struct gguf_w;

struct gguf_w *gguf_w_new(void);
void gguf_w_free(struct gguf_w *w);
/* The file's version (default 3) and data alignment (default 32; also written as
 * general.alignment when not 32). */
void gguf_w_version(struct gguf_w *w, uint32_t version);
void gguf_w_alignment(struct gguf_w *w, uint32_t alignment);

void gguf_w_u32(struct gguf_w *w, const char *key, uint32_t v);
void gguf_w_i32(struct gguf_w *w, const char *key, int32_t v);
void gguf_w_u64(struct gguf_w *w, const char *key, uint64_t v);
void gguf_w_f32(struct gguf_w *w, const char *key, float v);
void gguf_w_bool(struct gguf_w *w, const char *key, bool v);
void gguf_w_str(struct gguf_w *w, const char *key, const char *s);
void gguf_w_arr_str(struct gguf_w *w, const char *key, const char *const *s, size_t n);
void gguf_w_arr_i32(struct gguf_w *w, const char *key, const int32_t *v, size_t n);
void gguf_w_arr_f32(struct gguf_w *w, const char *key, const float *v, size_t n);
/* A key whose type and value bytes are given as they go in the file. */
void gguf_w_raw(struct gguf_w *w, const char *key, uint32_t type, const void *bytes, size_t n);

/* A tensor of ggml type `type` with ne[0..n_dims) (innermost first) and its bytes
 * (copied). */
void gguf_w_tensor(struct gguf_w *w, const char *name, uint32_t type, uint32_t n_dims,
		   const int64_t *ne, const void *data, size_t nbytes);
/* The same from f32 values, converted (F32, F16, BF16) or quantized (Q8_0, Q4_0,
 * Q4_1). */
void gguf_w_tensor_f32(struct gguf_w *w, const char *name, uint32_t type, uint32_t n_dims,
		       const int64_t *ne, const float *v);

/* The whole file (malloc'ed) and its size. */
uint8_t *gguf_w_bytes(const struct gguf_w *w, size_t *ret_size);
int gguf_w_save(const struct gguf_w *w, const char *path);

/* ggml's reference quantizers: n (a multiple of 32) values into blocks; and back.
 * Q4_K and Q6_K (n a multiple of 256) by a plain rule of their own (gguf-write.c),
 * not back. */
size_t gguf_quantize(uint32_t type, const float *x, int64_t n, uint8_t *out);
void gguf_dequantize_ref(uint32_t type, const uint8_t *blocks, int64_t n, float *out);

/* tokenizer.ggml.* from a tokenizer.json (and its tokenizer_config.json, which may
 * be NULL): n_vocab tokens (0: the largest id + 1), bos / eos ids (-1: none), pre the
 * tokenizer.ggml.pre of a byte-level one (NULL: "default"). 0 or -1 with err. */
int gguf_w_tokenizer(struct gguf_w *w, const char *tokenizer_json, const char *tokenizer_config,
		     int32_t n_vocab, int32_t bos, int32_t eos, const char *pre, char *err,
		     size_t errlen);

struct gguf_convert_opts {
	uint32_t type; /* of the matrices and the embedding table (F32 by default); a
			* matrix whose rows are not whole blocks stays F32 */
	/* tensors whose GGUF name contains over[i].part ("token_embd.", "attn_v.") in
	 * type over[i].type instead (llama.cpp's quantizer mixes types); the first match */
	struct gguf_convert_over {
		const char *part;
		uint32_t type;
	} over[4];
	bool no_permute; /* leave Q/K rows in Hugging Face's order (a broken file) */
	const char *pre; /* tokenizer.ggml.pre for a byte-level tokenizer ("default") */
};

/* Converts the Llama directory dir into the GGUF file out. 0, or -1 with a message
 * in err. */
int gguf_convert_dir(const char *dir, const char *out, const struct gguf_convert_opts *o,
		     char *err, size_t errlen);

#endif
