/* A model's weights in backend memory, loaded from a Hugging Face directory or
 * generated (--dummy). One arena allocation holds every tensor. */
#ifndef ALLM_MODEL_H
#define ALLM_MODEL_H

#include "backend.h"
#include "model-config.h"
#include "safetensors.h"

/* Per-layer weights; NULL where the architecture or config has none.
 * D = hidden, F = intermediate, Q = n_heads*head_dim, K = n_kv_heads*head_dim. */
struct allm_layer_weights {
	void *attn_norm_w, *attn_norm_b; /* (D) llama input_layernorm / opt self_attn_layer_norm */
	void *wq, *wk, *wv; /* (Q, D), (K, D), (K, D) */
	void *wo; /* (D, Q) */
	void *bq, *bk, *bv, *bo; /* (Q), (K), (K), (D) */
	void *mlp_norm_w, *mlp_norm_b; /* (D) llama post_attention_layernorm / opt final_layer_norm */
	void *w_gate; /* (F, D) llama only */
	void *w_up; /* (F, D) llama up_proj / opt fc1 */
	void *w_down; /* (D, F) llama down_proj / opt fc2 */
	void *b_gate, *b_up, *b_down; /* (F), (F), (D) */
	void *q_norm_w, *k_norm_w; /* (head_dim) per-head RMSNorm of q and k (qk_norm) */
	void *post_attn_norm_w, *post_mlp_norm_w; /* (D) norms of the attention's and the
						   * MLP's outputs (post_norms) */
	/* storage dtype of each matrix: the model's wdtype, but a GGUF file loaded in its
	 * own formats keeps each tensor's (llama.cpp's quantizer picks them per tensor) */
	enum allm_dtype wq_dt, wk_dt, wv_dt, wo_dt, w_gate_dt, w_up_dt, w_down_dt;
};

struct allm_model {
	struct allm_model_config cfg;
	allm_backend_t *be; /* not owned */
	enum allm_dtype wdtype; /* storage dtype of matrices and embedding tables (of the
				 * layers' matrices where a GGUF file's own types mix:
				 * each tensor's is its *_dt field) */
	enum allm_dtype vdtype; /* of norms and biases: wdtype, or f32 when wdtype is
				 * quantized (--quant, or a GGUF file's blocks) */
	char source[512]; /* the directory, or "dummy:PRESET" */
	void *arena; /* one device allocation for all weights */
	size_t arena_bytes;
	void *tok_emb; /* (V, P) P = embed_proj_dim for opt, D for llama */
	void *pos_emb; /* opt: (max_pos + 2, D) learned positions, row p + 2 */
	void *proj_in; /* opt: (D, P) when P != D */
	void *proj_out; /* opt: (P, D) when P != D */
	void *final_norm_w, *final_norm_b; /* (D); NULL for post-LN opt */
	void *lm_head; /* (V, P); == tok_emb when tied */
	float *inv_freq; /* llama: (head_dim / 2) RoPE inverse frequencies, device */
	float *inv_freq_local; /* the local layers' (rope_local_theta); == inv_freq when
				* they share them */
	struct allm_layer_weights *layers; /* [n_layers] */
	/* storage dtypes of the tensors above (see allm_layer_weights); lm_head_dt is
	 * tok_emb_dt when the head is tied */
	enum allm_dtype tok_emb_dt, pos_emb_dt, proj_in_dt, proj_out_dt, lm_head_dt;
};

/* One weight tensor of a model: its Hugging Face name, shape and where it lives. */
struct allm_weight_spec {
	char name[96];
	int32_t n_dims;
	int64_t shape[2];
	void **slot; /* &model->field */
	enum allm_dtype *dt; /* &model->field_dt of a matrix or embedding table (its
			      * storage dtype); NULL for norms and biases (vdtype) */
	int kind; /* ALLM_WKIND_*: how --dummy initialises it */
	/* a slice of a fused file tensor (Phi-3's qkv_proj, gate_up_proj): rows
	 * src_row0 .. src_row0 + shape[0] of a tensor of src_rows rows; src_rows 0:
	 * the whole tensor is this one */
	int64_t src_row0, src_rows;
};

enum { ALLM_WKIND_MATRIX, ALLM_WKIND_NORM, ALLM_WKIND_BIAS, ALLM_WKIND_EMBED };

/* Rows, columns and elements of a tensor (a vector is one row). */
static inline int64_t allm_spec_rows(const struct allm_weight_spec *s)
{
	return s->n_dims == 2 ? s->shape[0] : 1;
}

static inline int64_t allm_spec_cols(const struct allm_weight_spec *s)
{
	return s->n_dims == 2 ? s->shape[1] : s->shape[0];
}

static inline size_t allm_spec_elems(const struct allm_weight_spec *s)
{
	return (size_t)allm_spec_rows(s) * (size_t)allm_spec_cols(s);
}

/* Lists the tensors cfg implies, in file order. *ret is allm_malloc'ed. */
int allm_model_weight_specs(struct allm_model *m, struct allm_weight_spec **ret, size_t *ret_n);

struct allm_model_load_opts {
	enum allm_dtype wdtype; /* storage dtype on the backend (a block format such as
				 * ALLM_DTYPE_Q8_0: matrices and embeddings quantized
				 * from any file dtype) */
	allm_progress_fn progress; /* may be NULL */
	void *progress_user;
	/* GGUF files: every matrix and embedding table stays in its own type, the
	 * file's bytes used as stored (F32, F16, BF16, Q8_0, Q4_0, Q4_1; Q4_K becomes
	 * Q4_1 and Q6_K Q8_0, gguf-model.h), where the backend runs that type; wdtype
	 * only for the others. --dtype auto on the CPU. Other files ignore it. */
	bool file_types;
	/* safetensors: read with pread, no io_uring (ALLM_NO_IO_URING, which the
	 * program reads: struct allm_kv_env's no_io_uring) */
	bool no_io_uring;
};

/* Loads a model onto be: dir is a Hugging Face directory (config.json +
 * safetensors: hf-model.h) or a GGUF file (gguf-model.h); model-load.c picks the
 * loader. Every tensor the config implies must be present with the implied shape.
 * 0 or -errno with err set. */
int allm_model_load(allm_backend_t *be, const char *dir, const struct allm_model_load_opts *o,
		    struct allm_model **ret, struct allm_err *err);
/* The embedded default model, stories260K (data/models/, compiled in): a
 * directory for allm_model_load_from(), allm_tokenizer_load_from() and friends. */
const struct allm_vdir *allm_default_model(void);
#define ALLM_DEFAULT_MODEL_NAME "stories260K"
/* The one line programs print when they serve it. */
#define ALLM_DEFAULT_MODEL_NOTE                                                              \
	"no --model given: serving the embedded default model " ALLM_DEFAULT_MODEL_NAME       \
	" (a 260K-parameter TinyStories Llama; --model DIR serves yours, --dummy tiny random "  \
	"weights)"

/* The same from a directory on disk or embedded (common/vdir.h). */
int allm_model_load_from(allm_backend_t *be, const struct allm_vdir *dir,
			 const struct allm_model_load_opts *o, struct allm_model **ret,
			 struct allm_err *err);

/* Creates a model of preset shapes with deterministic pseudo-random weights
 * (seeded per tensor name, so values do not depend on dtype or thread count). */
int allm_model_dummy(allm_backend_t *be, const struct allm_model_config *cfg, uint64_t seed,
		     const struct allm_model_load_opts *o, struct allm_model **ret,
		     struct allm_err *err);

void allm_model_free(struct allm_model *m);

/* Bytes of weights cfg needs in dtype dt. */
uint64_t allm_model_weight_bytes(const struct allm_model_config *cfg, enum allm_dtype dt);

/* The storage dtype of one tensor of m (matrices and embeddings: their own *_dt,
 * wdtype unless a loader chose otherwise; norms and biases: vdtype), and its bytes
 * in that dtype. */
enum allm_dtype allm_model_spec_dtype(const struct allm_model *m, const struct allm_weight_spec *s);
size_t allm_model_spec_bytes(const struct allm_model *m, const struct allm_weight_spec *s);
/* Stores n_rows rows of f32 values of tensor s (row0 onwards; a 1-D tensor is one
 * row) into dst, the tensor's host-memory storage, in its dtype. */
void allm_model_spec_store(const struct allm_model *m, const struct allm_weight_spec *s,
			   void *dst, int64_t row0, const float *src, int64_t n_rows);
/* The same from rows of a file's bytes (file_dt: a block format, kernels/qblock.h,
 * or f32/f16/bf16; allm_row_bytes(file_dt, cols) bytes a row, src holding n_rows of
 * them): copied as they are when the tensor's storage dtype is file_dt (the kernels
 * use the file's bytes), else block rows dequantized and stored as above. A loader
 * that reorders rows (GGUF's Q/K head order) calls it per run of rows. Returns 0,
 * -EINVAL for plain rows of another dtype than the storage's, -ENOMEM. */
int allm_model_spec_store_blocks(const struct allm_model *m, const struct allm_weight_spec *s,
				 void *dst, int64_t row0, enum allm_dtype file_dt, const void *src,
				 int64_t n_rows);

/* Allocates m's arena and points every slot into it (used by load and dummy). */
int allm_model_alloc_arena(struct allm_model *m, const struct allm_weight_spec *specs,
			   size_t n, struct allm_err *err);
/* Creates the shell of a model (config copied, layers allocated, no weights; every
 * matrix and embedding table of storage dtype wdtype). */
int allm_model_create_shell(allm_backend_t *be, const struct allm_model_config *cfg,
			    enum allm_dtype wdtype, struct allm_model **ret, struct allm_err *err);
/* Uploads RoPE frequencies; called once the arena exists. */
int allm_model_finish(struct allm_model *m, struct allm_err *err);

#endif
