#include "engine-calib.h"

#include "engine-internal.h"

#include <errno.h>
#include <stdio.h>

void allm_engine_predictor_key(const struct allm_model *m, const struct allm_kv_cache *kv,
			       struct allm_predictor_key *ret)
{
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->model, sizeof(ret->model), "%.255s", m->source);
	snprintf(ret->device, sizeof(ret->device), "%s", m->be->iface->describe(m->be));
	snprintf(ret->dtype, sizeof(ret->dtype), "%s", allm_dtype_name(m->wdtype));
	ret->n_layers = m->cfg.n_layers;
	ret->hidden = m->cfg.hidden;
	ret->block_size = kv->lay.block_size;
	ret->block_bytes = kv->block_bytes;
}

struct calib_ctx {
	struct allm_engine *e;
	void (*progress)(void *user, int done, int total);
	void *user;
};

/* Times a prefill of n_seqs sequences of len pseudo-random tokens on the real
 * executor, with scratch sequences whose blocks go straight back. */
static double time_prefill(void *user, int32_t n_seqs, int32_t len)
{
	struct calib_ctx *c = user;
	struct allm_engine *e = c->e;
	struct allm_seq *seqs = allm_calloc((size_t)n_seqs, sizeof(*seqs));
	int32_t *ids = allm_malloc((size_t)len * sizeof(int32_t));
	float *logits = allm_malloc((size_t)n_seqs * e->model->cfg.vocab_size * sizeof(float));
	struct allm_batch_seq *b = allm_calloc((size_t)n_seqs, sizeof(*b));
	double t = -ENOMEM;
	int32_t made = 0;
	if (!seqs || !ids || !logits || !b)
		goto out;
	for (int32_t i = 0; i < len; i++)
		ids[i] = (int32_t)((i * 2654435761u + 7) % (uint32_t)e->model->cfg.vocab_size);
	for (; made < n_seqs; made++) {
		if (allm_seq_init(&seqs[made], INT64_MAX - made, ids, len) ||
		    allm_seq_reserve(&seqs[made], e->kv, len)) {
			made++;
			t = -ENOSPC;
			goto out;
		}
		allm_seq_batch_entry(&seqs[made], &b[made]);
	}
	if (allm_executor_forward(e->ex, b, n_seqs, false, logits, NULL) == 0)
		t = e->ex->last_seconds;
	else
		t = -EIO;
out:
	for (int32_t i = 0; i < made; i++)
		allm_seq_fini(&seqs[i], e->kv);
	allm_free(seqs);
	allm_free(ids);
	allm_free(logits);
	allm_free(b);
	return t;
}

static double time_swap(void *user, int dir, int32_t n_blocks, int32_t n_runs)
{
	struct calib_ctx *c = user;
	return allm_kv_time_copy(c->e->kv, dir, n_blocks, n_runs);
}

static double time_disk(void *user, int dir, int32_t n_blocks, int32_t n_runs)
{
	struct calib_ctx *c = user;
	return allm_kv_time_disk(c->e->kv, dir, n_blocks, n_runs);
}

static void progress(void *user, int done, int total)
{
	struct calib_ctx *c = user;
	if (c->progress)
		c->progress(c->user, done, total);
}

static int calibrate_main(struct allm_engine *e, void (*prog)(void *user, int done, int total),
			  void *user, struct allm_err *err)
{
	struct calib_ctx c = {e, prog, user};
	const struct allm_model_config *mc = &e->model->cfg;
	if (!allm_engine_idle(e))
		return allm_err_set(err, -EBUSY, "calibration needs an idle engine (drain first)");
	struct allm_kv_cache *kv = e->kv;
	/* calibration copies over the pools' blocks as scratch: what they cache goes */
	allm_engine_cache_reset(e);
	/* the longest prefill the pools and limits allow, leaving the context's end */
	int32_t max_tok = ALLM_MIN(mc->max_pos - 1, e->cfg.max_num_batched_tokens);
	max_tok = ALLM_MIN(max_tok, allm_block_pool_avail(&kv->gpu) * kv->lay.block_size);
	struct allm_calib_ops ops = {
		.user = &c,
		.max_tokens = ALLM_MAX(max_tok, 1),
		/* time_copy needs n + runs ids in both pools */
		.max_swap_blocks = ALLM_MAX(0, ALLM_MIN(kv->gpu.capacity, kv->cpu.capacity) - 4),
		.block_bytes = kv->block_bytes,
		.time_prefill = time_prefill,
		.time_swap = time_swap,
		.progress = progress,
	};
	return allm_predictor_calibrate(e->pred, &ops, err);
}

int allm_engine_calibrate(struct allm_engine *e, void (*prog)(void *user, int done, int total),
			  void *user, struct allm_err *err)
{
	int r = calibrate_main(e, prog, user, err);
	if (!r && e->kv->disk)
		r = allm_engine_calibrate_disk(e, prog, user, err);
	return r;
}

/* The disk model at start: measured, or (a disk that errs while being timed)
 * the built-in guess, which online learning corrects; the note says so. */
static void disk_or_guess(struct allm_engine *e, void (*prog)(void *user, int done, int total),
			  void *user, char *note, size_t note_len)
{
	struct allm_err derr = {{0}};
	size_t used = strlen(note);
	if (allm_engine_calibrate_disk(e, prog, user, &derr) && used + 1 < note_len)
		snprintf(note + used, note_len - used, "%sdisk timing failed (%s): the disk model starts "
			 "from a guess", used ? "; " : "", derr.msg);
}

int allm_engine_calibrate_disk(struct allm_engine *e, void (*prog)(void *user, int done, int total),
			       void *user, struct allm_err *err)
{
	struct calib_ctx c = {e, prog, user};
	struct allm_kv_cache *kv = e->kv;
	struct allm_block_pool *dp = allm_kv_disk_blocks(kv);
	if (!dp)
		return 0;
	if (!allm_engine_idle(e))
		return allm_err_set(err, -EBUSY, "calibration needs an idle engine (drain first)");
	allm_engine_cache_reset(e);
	struct allm_calib_ops ops = {
		.user = &c,
		/* time_disk needs n + runs ids in the device and the disk pool */
		.max_disk_blocks = ALLM_MAX(0, ALLM_MIN(kv->gpu.capacity, dp->capacity) - 4),
		.block_bytes = kv->block_bytes,
		.time_disk = time_disk,
		.progress = progress,
	};
	if (ops.max_disk_blocks < 1)
		return 0; /* too small a pool to time: the guess stands, online learning fixes it */
	return allm_predictor_calibrate_disk(e->pred, &ops, err);
}

int allm_engine_prepare_predictor(struct allm_engine *e, const char *profile_path,
				  void (*prog)(void *user, int done, int total), void *user,
				  char *note, size_t note_len, struct allm_err *err)
{
	char path[4096];
	struct allm_err lerr = {{0}};
	bool ignored = false; /* a profile existed but was unusable: keep saying why */
	int r;
	note[0] = 0;
	if (profile_path)
		snprintf(path, sizeof(path), "%s", profile_path);
	else {
		struct allm_predictor_key key;
		allm_engine_predictor_key(e->model, e->kv, &key);
		if (allm_predictor_default_path(&key, path, sizeof(path)))
			path[0] = 0;
	}
	if (path[0]) {
		r = allm_predictor_load(e->pred, path, &lerr);
		if (r == 0) {
			/* profiles keep no disk model: the disk is measured each start */
			snprintf(note, note_len, "predictor profile loaded from %s", path);
			disk_or_guess(e, prog, user, note, note_len);
			return 0;
		}
		if (r != -ENOENT) {
			snprintf(note, note_len, "predictor profile %s ignored (%s): recalibrating", path,
				 lerr.msg);
			ignored = true;
		}
	}
	if ((r = calibrate_main(e, prog, user, err)))
		return r;
	if (path[0] && allm_predictor_save(e->pred, path, &lerr))
		snprintf(note, note_len, "calibrated; cannot save profile: %s", lerr.msg);
	else if (!ignored)
		snprintf(note, note_len, "predictors calibrated%s%s", path[0] ? ", saved to " : "", path);
	disk_or_guess(e, prog, user, note, note_len);
	return 0;
}
