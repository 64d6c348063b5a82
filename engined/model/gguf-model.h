/* A model from a GGUF file (--model FILE.gguf): hyper-parameters from the
 * `ARCH.*` metadata (ARCH one of llama, qwen2, qwen3, gemma3, phi3:
 * model-config.h's architecture table), weights from the tensor table. A peer of
 * hf-model.h; model-load.c picks between them.
 *
 * Tensor types read: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K. With
 * file types (allm_model_load_opts.file_types, --dtype auto on the CPU) every matrix
 * and embedding table keeps its own type, as llama.cpp runs the file: the bytes of
 * F32 / F16 / BF16 / Q8_0 / Q4_0 / Q4_1 tensors as stored (so a Q4_1 file with a Q8_0
 * token_embd runs both formats natively); the formats without kernels of their own go
 * into the nearest that has them: a Q4_K tensor as Q4_1 blocks (each 32-value
 * sub-block is one: the same quants, its scale and min rounded to f16; 5 bits a weight
 * instead of 4.5), Q5_0 as Q8_0 blocks (the same values exactly; 8.5 bits instead of
 * 5.5), Q5_1 and Q6_K re-quantized into Q8_0 (8.5 bits instead of 6 and 6.6).
 * Otherwise (--dtype f32|f16|bf16, --quant) each tensor is dequantized into the
 * asked storage dtype, or copied where its blocks are already that format. Norms
 * are f32 beside block weights. GGUF stores the rows of the
 * query and key projections of each head interleaved (ggml's RoPE rotates adjacent
 * pairs (2i, 2i+1); llama.cpp's converter permutes Hugging Face's halves (i, i + d/2)
 * into that order); the loader puts them back, so the engine's RoPE, written for
 * Hugging Face's layout, rotates the right pairs.
 *
 * allm_model_config_load_from() and allm_model_load_from() (model-load.c) come here
 * when their directory is a regular file; these are the entry points behind them. */
#ifndef ALLM_GGUF_MODEL_H
#define ALLM_GGUF_MODEL_H

#include "gguf.h"
#include "model.h"

/* The hyper-parameters, EOS ids and dtype of g's model. Every key it uses is checked
 * (type, range, consistency with the tensors); a model this engine cannot run
 * (another architecture, partial rotary, RoPE frequency factors, YaRN) is refused
 * with -ENOTSUP naming the key. 0 or -errno with err set. */
int allm_gguf_model_config(const struct allm_gguf *g, struct allm_model_config *ret,
			   struct allm_err *err);
/* The same, opening path. */
int allm_gguf_model_config_load(const char *path, struct allm_model_config *ret,
				struct allm_err *err);

/* Loads the model of the GGUF file at path onto be (see allm_model_load). */
int allm_gguf_model_load(allm_backend_t *be, const char *path,
			 const struct allm_model_load_opts *o, struct allm_model **ret,
			 struct allm_err *err);
/* The same from an opened file (which may be closed once this returns). */
int allm_gguf_model_load_from(allm_backend_t *be, const struct allm_gguf *g,
			      const struct allm_model_load_opts *o, struct allm_model **ret,
			      struct allm_err *err);

/* The GGUF name of tensor s of m (one of allm_model_weight_specs(m)'s: the layer 3
 * query matrix is "blk.3.attn_q.weight", Phi-3's "blk.3.attn_qkv.weight"), into
 * buf; false when it has no GGUF counterpart. */
bool allm_gguf_spec_name(const struct allm_model *m, const struct allm_weight_spec *s, char *buf,
			 size_t len);

/* --- gguf-dequant.c --- */

/* Whether allm_gguf_dequant_rows() reads this tensor type. */
bool allm_gguf_dequant_supported(enum allm_gguf_ttype type);
/* The storage dtype a tensor of this type keeps with file types (see above);
 * ALLM_DTYPE_COUNT for a type this engine does not load. */
enum allm_dtype allm_gguf_native_dtype(enum allm_gguf_ttype type);
/* Whether rows of this type can be written as blocks of dt by
 * allm_gguf_rows_as_blocks: dt is the type's own format (a block format, or f32,
 * f16, bf16 rows), kept as the file stores it — a copy, not a trip through f32
 * (an F16 file of 110M parameters loaded in 2.4 s that way, against 0.65 s for
 * its Q8_0). Little-endian like every block's scales. */
bool allm_gguf_blocks_as(enum allm_gguf_ttype type, enum allm_dtype dt);
/* Rows row0 .. row0 + n_rows of t as dt blocks (kernels/qblock.h layout) or plain
 * dt rows into dst;
 * allm_gguf_blocks_as(t->type, dt) must hold. */
void allm_gguf_rows_as_blocks(const struct allm_gguf_tensor *t, int64_t row0, int64_t n_rows,
			      enum allm_dtype dt, void *dst);
/* Rows row0 .. row0 + n_rows of t (a row is ne[0] values) as f32 into dst. t's type
 * must be supported and the rows inside it. */
void allm_gguf_dequant_rows(const struct allm_gguf_tensor *t, int64_t row0, int64_t n_rows,
			    float *dst);

#endif
