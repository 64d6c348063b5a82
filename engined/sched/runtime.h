/* Everything a program needs to run a model, opened from the shared flags: the
 * backend, the weights, the tokenizer (when the model has one) and the KV cache.
 * allm-run uses it now; allm-engined will too. */
#ifndef ALLM_RUNTIME_H
#define ALLM_RUNTIME_H

#include "engine-opts.h"
#include "kv-cache.h"
#include "model.h"
#include "tokenizer.h"

struct allm_runtime {
	struct allm_engine_opts opts;
	allm_backend_t *be;
	struct allm_model *model;
	struct allm_tokenizer *tok; /* NULL when the model directory has no tokenizer.json */
	struct allm_kv_cache *kv;
	bool default_model; /* no --model/--dummy: the embedded default (stories260K) */
	char model_desc[4200]; /* directory, or dummy:PRESET */
	char device_note[256]; /* why --device auto chose what it chose, or "" */
	char disk_note[600]; /* how the disk tier was opened, or why not; "" without one */
	bool disk_failed; /* asked for, but unusable: serving without it */
	double load_seconds;
	size_t activation_peak; /* device bytes the largest step needs (GPU backends) */
	char memory_note[240]; /* --memory-budget: how it was split, or "" */
};

/* Opens the runtime. max_kv_blocks > 0 caps the KV pool; -1 caps it at one
 * sequence's full context (a single-prompt run never needs more). Progress of the weight load goes to progress. */
int allm_runtime_open(const struct allm_engine_opts *o, int32_t max_kv_blocks,
		      allm_progress_fn progress, void *user, struct allm_runtime **ret,
		      struct allm_err *err);
void allm_runtime_close(struct allm_runtime *rt);

#endif
