/* The forward pass: one batch of sequences (prefills, decodes, or a mix) through
 * the model on the backend, K/V written to and read from the paged cache only
 * through block tables. Written once for every backend. */
#ifndef ALLM_EXECUTOR_H
#define ALLM_EXECUTOR_H

#include "kv-cache.h"
#include "model.h"

/* One sequence's part of a batch. */
struct allm_batch_seq {
	const int32_t *tokens; /* [n_new] host: tokens to feed */
	int32_t n_new;
	int32_t start_pos; /* position of tokens[0] = tokens already in the KV cache */
	const int32_t *block_table; /* host: physical blocks covering start_pos + n_new */
	int32_t n_blocks;
};

struct allm_executor {
	struct allm_model *model; /* not owned */
	const struct allm_arch_desc *arch; /* what the model's architecture adds */
	struct allm_kv_cache *kv; /* not owned */
	allm_backend_t *be;
	int64_t cap_tokens; /* scratch sized for this many tokens */
	/* elastic memory (allm_executor_set_elastic): scratch is one reservation
	 * for cap_tokens whose pages a step touches from its start only (the
	 * layout follows the step's tokens) and allm_executor_trim returns */
	bool elastic;
	int64_t mapped_tokens; /* elastic: the scratch a step may have mapped since the last trim */
	int32_t cap_seqs;
	int32_t cap_blocks; /* block-table entries */
	void *scratch; /* device: activations */
	void *meta_dev; /* device: per-step int32 metadata */
	int32_t *meta_host; /* host staging of the same */
	size_t meta_cap; /* int32 elements in meta_dev / meta_host */
	double last_seconds; /* device time of the last forward */
	/* Device sampling: with ret_logits NULL a forward keeps its logits on the
	 * device (logits_dev, logits_rows rows) for allm_executor_reduce(). */
	bool device_sampling; /* the engine should use it (a GPU with argmax + topk) */
	float *logits_dev; /* device: (logits_rows, vocab), inside scratch */
	int32_t logits_rows;
	void *pick_dev; /* device: argmax ids, then top-k values and ids */
	int32_t *pick_host; /* host staging of the same */
	size_t pick_cap; /* 32-bit words in pick_dev / pick_host */
	int32_t *picked; /* [picked_cap] host: the engine's chosen ids of a step */
	int32_t picked_cap;
};

/* -ENOTSUP with err when the backend lacks an op the model needs (a sliding window,
 * GELU, ...). */
int allm_executor_create(struct allm_model *model, struct allm_kv_cache *kv,
			 struct allm_executor **ret, struct allm_err *err);
/* Whether be runs every op model config c needs; if not, err names the missing one. */
int allm_executor_check_ops(allm_backend_t *be, const struct allm_model_config *c,
			    struct allm_err *err);
void allm_executor_free(struct allm_executor *ex);

/* Runs the batch. Logits of the last token of each sequence go to
 * ret_logits[n_seqs][vocab] (host), or, with all_logits, of every token in batch
 * order: ret_logits[total tokens][vocab]. Tokens, positions and block tables are
 * validated (ids in vocabulary, positions below max_position_embeddings, blocks
 * in the pool and covering every position): -EINVAL with err, nothing run. */
int allm_executor_forward(struct allm_executor *ex, const struct allm_batch_seq *seqs,
			  int32_t n_seqs, bool all_logits, float *ret_logits,
			  struct allm_err *err);

/* Bytes of activation scratch a step of T tokens takes (model config c): what
 * an elastic memory pool lends the executor for it. */
size_t allm_executor_scratch_bytes(const struct allm_model_config *c, int64_t T);
/* Elastic memory: reserves scratch for max_tokens once (address space; pages
 * mapped as steps touch them), laid out per step from its start, so a step of
 * T tokens maps only allm_executor_scratch_bytes(T). */
int allm_executor_set_elastic(struct allm_executor *ex, int64_t max_tokens, struct allm_err *err);
/* Returns the scratch pages past what keep_tokens need to the system (the
 * backend's pages op: a no-op where pages cannot move); nothing to do, and no
 * call, when no step used more since the last trim. */
void allm_executor_trim(struct allm_executor *ex, int64_t keep_tokens);
/* Scratch bytes mapped now (0 where pages cannot move). For tests and status. */
size_t allm_executor_scratch_resident(const struct allm_executor *ex);

/* Forces device sampling on or off (tests run the device path on the CPU
 * backend this way). -ENOTSUP when the backend lacks argmax or topk. */
int allm_executor_set_device_sampling(struct allm_executor *ex, bool on);

/* After a forward with ret_logits NULL: reduces every kept row on the device,
 * the argmax when want_argmax, the top k (value desc, id asc) when k > 0, and
 * brings both back in one download: *ret_ids[row], *ret_vals / *ret_topk_ids
 * [row * k + j]. The arrays belong to ex and live until the next call. */
int allm_executor_reduce(struct allm_executor *ex, bool want_argmax, int32_t k,
			 const int32_t **ret_ids, const float **ret_vals,
			 const int32_t **ret_topk_ids, struct allm_err *err);
/* Downloads kept row `row` into ret[vocab]. */
int allm_executor_download_row(struct allm_executor *ex, int32_t row, float *ret,
			       struct allm_err *err);
/* Host array of at least n ids for the caller's picks of a step (owned by ex). */
int32_t *allm_executor_picked(struct allm_executor *ex, int32_t n);

#endif
