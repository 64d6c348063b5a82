#include "runtime.h"
#include "gguf.h"

#include "executor.h"
#include "safe-file.h"
#include "shm-trust.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* --dtype auto: the checkpoint's own dtype on the CPU, as vLLM's CPU backend and
 * llama.cpp keep it. An f16 or bf16 file converted to f32 would only double the
 * memory and the bytes every decode step reads: the FMA levels widen 16-bit
 * weights to f32 exactly and reduce them in the f32 order (kernels/cpu/cpu-gemm.h),
 * so the outputs are the same bits; where the level has its own bf16 kernel
 * (AMX tiles, or avx512-bf16 on AMD), bf16 weights meet bf16-rounded activations,
 * as in those engines. A GGUF file keeps each tensor's own type (*ret_file_types:
 * its Q8_0 / Q4_0 / Q4_1 blocks as stored, as llama.cpp runs them; gguf-model.h). A
 * GPU keeps 16-bit weights (f32 files and block formats become f16, as vLLM does). */
static int pick_dtype(const struct allm_engine_opts *o, allm_backend_t *be,
		      enum allm_dtype file_dt, enum allm_dtype *ret, bool *ret_file_types,
		      struct allm_err *err)
{
	*ret_file_types = false;
	if (o->quant != ALLM_DTYPE_F32) { /* quantized matrices, norms and biases f32 */
		*ret = o->quant;
		return 0;
	}
	if (strcmp(o->dtype, "auto"))
		return allm_dtype_parse(o->dtype, ret) ? allm_err_set(err, -EINVAL, "bad --dtype") : 0;
	*ret_file_types = be->device_is_host;
	if (be->device_is_host)
		*ret = file_dt;
	else if (be->simulated)
		*ret = be->sim_dtype; /* what the simulated hardware would store */
	else
		*ret = file_dt == ALLM_DTYPE_F32 || allm_dtype_is_qblock(file_dt) ? ALLM_DTYPE_F16 : file_dt;
	return 0;
}

/* Device memory the largest step takes besides weights and KV blocks
 * (activations, step metadata, the backend's conversion and GEMM buffers),
 * measured the way vLLM's profile run does: run a forward of
 * max_num_batched_tokens tokens over a scratch KV pool and read how much memory
 * it left in use. Everything is freed again; the engine's executor later grows
 * to the same size, never more (executor.c reserve()). */
static int measure_activation_peak(struct allm_runtime *rt, const struct allm_kv_layout *lay,
				   size_t *ret_bytes, struct allm_err *err)
{
	allm_backend_t *be = rt->be;
	const struct allm_model_config *c = &rt->model->cfg;
	int32_t T = ALLM_MAX(rt->opts.max_num_batched_tokens, rt->opts.max_num_seqs);
	int32_t per = ALLM_MIN(T, c->max_pos); /* tokens per scratch sequence */
	int32_t n_seqs = (T + per - 1) / per;
	int32_t bps = (per + lay->block_size - 1) / lay->block_size;
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	struct allm_batch_seq *b = allm_calloc((size_t)n_seqs, sizeof(*b));
	int32_t *tok = allm_calloc((size_t)per, sizeof(int32_t)); /* id 0: any valid token */
	int32_t *bt = allm_malloc((size_t)n_seqs * bps * sizeof(int32_t));
	float *logits = allm_malloc((size_t)n_seqs * c->vocab_size * sizeof(float));
	size_t free0 = 0, free1 = 0, total = 0;
	int r;
	if (!b || !tok || !bt || !logits) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	if ((r = be->iface->mem_info(be, &free0, &total)))
		goto mem_fail;
	if ((r = allm_kv_cache_create(be, lay, n_seqs * bps, 0, &kv, err)) ||
	    (r = allm_executor_create(rt->model, kv, &ex, err)))
		goto out;
	for (int32_t s = 0, left = T; s < n_seqs; s++, left -= per) {
		for (int32_t i = 0; i < bps; i++)
			bt[s * bps + i] = s * bps + i;
		b[s] = (struct allm_batch_seq){tok, ALLM_MIN(per, left), 0, bt + s * bps, bps};
	}
	if ((r = allm_executor_forward(ex, b, n_seqs, false, logits, err)))
		goto out;
	if ((r = be->iface->mem_info(be, &free1, &total)))
		goto mem_fail;
	size_t used = free0 > free1 ? free0 - free1 : 0, pool = kv->block_bytes * (size_t)(n_seqs * bps);
	*ret_bytes = used > pool ? used - pool : 0;
	goto out;
mem_fail:
	r = allm_err_set(err, r, "cannot read device memory: %s", allm_backend_last_error(be));
out:
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	allm_free(b);
	allm_free(tok);
	allm_free(bt);
	allm_free(logits);
	return r;
}

/* The K/V storage dtype: as asked, else f32 on the CPU (the attention's own
 * precision, whatever the weights) and the weights' dtype on a GPU (as vLLM's
 * "auto"; a GPU never holds block weights). */
static enum allm_dtype kv_dtype(const struct allm_runtime *rt)
{
	enum allm_dtype dt;
	if (strcmp(rt->opts.kv_cache_dtype, "auto") && !allm_dtype_parse(rt->opts.kv_cache_dtype, &dt))
		return dt; /* checked by the option parser */
	return rt->be->device_is_host ? ALLM_DTYPE_F32 : rt->model->wdtype;
}

/* --memory-budget: the weights first, then one pool. Static (--elastic-memory
 * off, or a single prompt): activations sized for the largest step
 * (max_num_batched_tokens, or a full batch of decodes), the KV blocks get the
 * rest, as vLLM splits a GPU. Elastic: the device pool is made as large as the
 * whole pool and the engine lends scratch what it retires (kv-elastic.h). */
static int budget_split(struct allm_runtime *rt, const struct allm_kv_layout *lay, bool single,
			int32_t *ret_n, size_t *ret_pool, struct allm_err *err)
{
	const struct allm_engine_opts *o = &rt->opts;
	const struct allm_model_config *c = &rt->model->cfg;
	double gib = 1073741824.0, budget = o->memory_budget_gib * gib;
	double weights = (double)rt->model->arena_bytes;
	int64_t T = ALLM_MAX(o->max_num_batched_tokens, o->max_num_seqs);
	double scratch = (double)allm_executor_scratch_bytes(c, T);
	bool elastic = o->elastic_memory && !single;
	double pool = budget - weights;
	double kv = elastic ? pool : pool - scratch;
	int32_t n = kv > 0 ? allm_kv_blocks_in(lay, (size_t)kv) : 0;
	if (n < 1 || (elastic && n < 2))
		return allm_err_set(err, -ENOMEM,
				    "--memory-budget %.3g GiB leaves no room for KV blocks: the weights take "
				    "%.3f GiB and activations for %lld tokens %.3f GiB",
				    o->memory_budget_gib, weights / gib, (long long)T, scratch / gib);
	if (single)
		n = ALLM_MIN(n, (c->max_pos + lay->block_size - 1) / lay->block_size);
	*ret_n = n;
	*ret_pool = elastic ? (size_t)pool : 0;
	snprintf(rt->memory_note, sizeof(rt->memory_note),
		 "memory budget %.3f GiB: weights %.3f GiB, %s pool %.3f GiB (%s)", budget / gib, weights / gib,
		 elastic ? "elastic" : "static", pool / gib,
		 elastic ? "KV blocks and each step's activations" : "activations for the largest step, the rest KV");
	return 0;
}

static int open_kv(struct allm_runtime *rt, int32_t cap, struct allm_err *err)
{
	const struct allm_model_config *c = &rt->model->cfg;
	const struct allm_engine_opts *o = &rt->opts;
	struct allm_kv_layout lay = {
		.n_layers = c->n_layers,
		.n_kv_heads = c->n_kv_heads,
		.head_dim = c->head_dim,
		.block_size = o->block_size,
		.dtype = kv_dtype(rt),
	};
	bool single = cap < 0; /* one sequence: never more than its context, never preempted */
	int32_t n = o->gpu_blocks;
	size_t elastic_pool = 0;
	int r;
	if (n <= 0 && o->memory_budget_gib > 0) {
		if ((r = budget_split(rt, &lay, single, &n, &elastic_pool, err)))
			return r;
	} else if (n <= 0) {
		size_t bytes;
		if (rt->be->device_is_host) {
			bytes = (size_t)(o->kv_cache_gib * 1073741824.0);
		} else {
			/* vLLM's rule: util x total, minus what is already used (weights,
			 * the backend's buffers) and what the largest step will need */
			size_t fr = 0, tot = 0, peak = 0;
			if ((r = measure_activation_peak(rt, &lay, &peak, err)))
				return r;
			if ((r = rt->be->iface->mem_info(rt->be, &fr, &tot)))
				return allm_err_set(err, r, "cannot read device memory: %s",
						    allm_backend_last_error(rt->be));
			double budget = o->gpu_mem_util * (double)tot - (double)(tot - fr) - (double)peak;
			rt->activation_peak = peak;
			bytes = budget > 0 ? (size_t)budget : 0;
			if (allm_kv_blocks_in(&lay, bytes) < 1)
				return allm_err_set(err, -ENOMEM,
						    "no device memory left for the KV cache: %.2f of %.2f GiB "
						    "in use after the weights and a %.2f GiB activation peak "
						    "(--gpu-memory-utilization %.2f; lower "
						    "--max-num-batched-tokens or use --gpu-blocks)",
						    (tot - fr) / 1073741824.0, tot / 1073741824.0,
						    peak / 1073741824.0, o->gpu_mem_util);
		}
		n = allm_kv_blocks_in(&lay, bytes);
		if (single)
			cap = (c->max_pos + lay.block_size - 1) / lay.block_size;
		if (cap > 0 && n > cap)
			n = cap;
	}
	int32_t nc = o->cpu_blocks;
	if (nc < 0)
		nc = single ? 0 : allm_kv_blocks_in(&lay, (size_t)(o->swap_space_gib * 1073741824.0));
	r = allm_kv_cache_create(rt->be, &lay, n, nc, &rt->kv, err);
	if (!r) {
		allm_kv_set_env(rt->kv, &o->kv_env);
		rt->kv->elastic_pool = elastic_pool;
	}
	return r;
}

/* allm_shm_cache_dir()/kv (made if missing), else /var/tmp. */
static void default_disk_dir(char *ret, size_t len)
{
	if (!allm_shm_cache_dir(ret, len - 3)) {
		strcat(ret, "/kv");
		if (allm_mkdir_p(ret, 0700) == 0)
			return;
	}
	snprintf(ret, len, "/var/tmp");
}

/* The disk tier, when asked for. A directory that cannot hold it is not fatal:
 * the engine serves with two tiers and says why (rt->disk_note). */
static void open_disk(struct allm_runtime *rt)
{
	const struct allm_engine_opts *o = &rt->opts;
	char dir[4096];
	struct allm_err err = {{0}};
	if (o->disk_swap_gib <= 0)
		return;
	if (o->disk_swap_dir)
		snprintf(dir, sizeof(dir), "%s", o->disk_swap_dir);
	else
		default_disk_dir(dir, sizeof(dir));
	int32_t n = allm_kv_blocks_in(&rt->kv->lay, (size_t)(o->disk_swap_gib * 1073741824.0));
	if (n < 1) {
		snprintf(rt->disk_note, sizeof(rt->disk_note),
			 "--disk-swap-space %.3g GiB holds no KV block: no disk tier", o->disk_swap_gib);
		rt->disk_failed = true;
		return;
	}
	if (allm_kv_attach_disk(rt->kv, dir, n, rt->disk_note, sizeof(rt->disk_note), &err)) {
		snprintf(rt->disk_note, sizeof(rt->disk_note), "%s: serving without a disk tier", err.msg);
		rt->disk_failed = true;
	}
}

int allm_runtime_open(const struct allm_engine_opts *o, int32_t max_kv_blocks,
		      allm_progress_fn progress, void *user, struct allm_runtime **ret,
		      struct allm_err *err)
{
	struct allm_runtime *rt = allm_calloc(1, sizeof(*rt));
	struct allm_backend_opts bo = {.n_threads = o->threads, .reference = o->reference,
				       .blas = o->blas, .cpu_isa = o->cpu_isa,
				       .env = &o->backend_env};
	int r;
	if (!rt)
		return allm_err_set(err, -ENOMEM, "out of memory");
	rt->opts = *o;
	double t0 = allm_now();
	if ((r = allm_backend_create(o->device, &bo, &rt->be, rt->device_note,
				     sizeof(rt->device_note), err)))
		goto fail;
	if (o->dummy) {
		struct allm_model_config cfg;
		enum allm_dtype dt;
		bool file_types;
		if ((r = allm_model_config_preset(o->dummy, &cfg, err)) ||
		    (r = pick_dtype(o, rt->be, cfg.file_dtype, &dt, &file_types, err)))
			goto fail;
		struct allm_model_load_opts lo = {dt, progress, user, file_types, o->kv_env.no_io_uring};
		if ((r = allm_model_dummy(rt->be, &cfg, o->dummy_seed, &lo, &rt->model, err)))
			goto fail;
		snprintf(rt->model_desc, sizeof(rt->model_desc), "dummy:%s", o->dummy);
	} else {
		/* no --model: the embedded default, through the same loaders */
		struct allm_vdir disk = allm_vdir_disk(o->model_dir);
		const struct allm_vdir *dir = o->model_dir ? &disk : allm_default_model();
		rt->default_model = !o->model_dir;
		struct allm_model_config cfg;
		enum allm_dtype dt;
		bool file_types;
		if ((r = allm_model_config_load_from(dir, &cfg, err)) ||
		    (r = pick_dtype(o, rt->be, cfg.file_dtype, &dt, &file_types, err)))
			goto fail;
		struct allm_model_load_opts lo = {dt, progress, user, file_types, o->kv_env.no_io_uring};
		if ((r = allm_model_load_from(rt->be, dir, &lo, &rt->model, err)))
			goto fail;
		snprintf(rt->model_desc, sizeof(rt->model_desc), "%s", rt->default_model ? "default" : dir->path);
		bool gguf = !allm_vdir_embedded(dir) && allm_gguf_is_file(dir->path); /* FILE.gguf */
		if ((gguf || allm_vdir_access(dir, "tokenizer.json") == 0) &&
		    (r = allm_tokenizer_load_from(dir, &rt->tok, err)))
			goto fail;
		if (rt->tok && allm_tokenizer_vocab_size(rt->tok) > rt->model->cfg.vocab_size) {
			r = allm_err_set(err, -EINVAL,
					 "%s: tokenizer has %d tokens but config.json vocab_size is %d", dir->path,
					 allm_tokenizer_vocab_size(rt->tok), rt->model->cfg.vocab_size);
			goto fail;
		}
	}
	/* A model whose configs name no EOS stops at the tokenizer's (one rule for
	 * every program: the engine only looks at cfg.eos_ids). */
	if (rt->model->cfg.n_eos == 0 && rt->tok && allm_tokenizer_eos_id(rt->tok) >= 0) {
		rt->model->cfg.eos_ids[0] = allm_tokenizer_eos_id(rt->tok);
		rt->model->cfg.n_eos = 1;
	}
	if ((r = open_kv(rt, max_kv_blocks, err)))
		goto fail;
	open_disk(rt);
	rt->load_seconds = allm_now() - t0;
	*ret = rt;
	return 0;
fail:
	allm_runtime_close(rt);
	return r;
}

void allm_runtime_close(struct allm_runtime *rt)
{
	if (!rt)
		return;
	allm_kv_cache_free(rt->kv);
	allm_tokenizer_free(rt->tok);
	allm_model_free(rt->model);
	allm_backend_destroy(rt->be);
	allm_free(rt);
}
