#include "engine-calib.h"

#include "engine-internal.h"

#include <errno.h>
#include <math.h>
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
double allm_engine_time_prefill(struct allm_engine *e, int32_t n_seqs, int32_t len)
{
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

static double time_prefill(void *user, int32_t n_seqs, int32_t len)
{
	struct calib_ctx *c = user;
	return allm_engine_time_prefill(c->e, n_seqs, len);
}

static double time_swap(void *user, enum allm_copy_dir dir, int32_t n_blocks, int32_t n_runs)
{
	struct calib_ctx *c = user;
	return allm_kv_time_copy(c->e->kv, dir, n_blocks, n_runs);
}

static double time_disk(void *user, enum allm_disk_dir dir, int32_t n_blocks, int32_t n_runs)
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

/* Model FLOPs per token of the weights and per unit of tokens_sq (twice the
 * query-key pairs) of the attention: what a first estimate scales by. */
static void shape_flops(const struct allm_model_config *c, double *ret_token, double *ret_pair)
{
	double d = c->hidden, q = (double)c->n_heads * c->head_dim, k = (double)c->n_kv_heads * c->head_dim;
	double mlp = (c->arch == ALLM_ARCH_OPT ? 2.0 : 3.0) * d * c->intermediate;
	*ret_token = 2.0 * c->n_layers * (d * q + 2 * d * k + q * d + mlp) + 2.0 * d * c->vocab_size;
	/* scores and the weighted sum: 2 x 2 x q flops a pair, a pair is half a tokens_sq unit */
	*ret_pair = 2.0 * c->n_layers * q;
}

/* Serving at once (DESIGN §7): a first estimate from a few timed runs and the
 * model's shape, instead of a calibration grid: two prefills give the fixed
 * cost and the cost of a token (hence the FLOP rate the weights run at), the
 * attention's share follows from the shape at that rate; two copies each way
 * give the link's latency and bandwidth. Online learning refines them. */
static int estimate(struct allm_engine *e, char *note, size_t note_len, struct allm_err *err)
{
	struct calib_ctx c = {e, NULL, NULL};
	const struct allm_model_config *mc = &e->model->cfg;
	struct allm_kv_cache *kv = e->kv;
	double t0 = allm_now();
	allm_engine_cache_reset(e);
	int32_t max_tok = ALLM_MIN(ALLM_MIN(mc->max_pos - 1, e->cfg.max_num_batched_tokens),
				   allm_block_pool_avail(&kv->gpu) * kv->lay.block_size);
	/* short prompts: a 110M model's 64-token prefill takes ~0.1 s here */
	int32_t n1 = ALLM_MAX(1, ALLM_MIN(8, max_tok / 8)), n2 = ALLM_MAX(n1 + 1, ALLM_MIN(64, max_tok));
	double ta = INFINITY, tb = INFINITY, tok_f, pair_f;
	if (time_prefill(&c, 1, n1) < 0) /* warm-up: page the weights in */
		return allm_err_set(err, -EIO, "a first prefill failed");
	for (int i = 0; i < 2; i++) { /* the faster of two: noise only ever adds */
		double a = time_prefill(&c, 1, n1), b = time_prefill(&c, 1, n2);
		if (a < 0 || b < 0)
			return allm_err_set(err, -EIO, "a timed prefill failed");
		ta = fmin(ta, a);
		tb = fmin(tb, b);
	}
	shape_flops(mc, &tok_f, &pair_f);
	double per_tok = fmax((tb - ta) / (double)(n2 - n1), 1e-9);
	double flops = tok_f / per_tok; /* the rate the weights ran at */
	double rc[4] = {fmax(ta - per_tok * n1, 0), per_tok, pair_f / flops, 0};
	double lat[2], bw[2];
	bool copies = ALLM_MIN(kv->gpu.capacity, kv->cpu.capacity) >= 20;
	for (int d = 0; d < 2 && copies; d++) {
		double one = time_swap(&c, d, 1, 1), many = time_swap(&c, d, 16, 1);
		if (one < 0 || many < 0) {
			copies = false;
			break;
		}
		bw[d] = many > one ? 15.0 * (double)kv->block_bytes / (many - one) : 0;
		lat[d] = fmax(one - (bw[d] > 0 ? (double)kv->block_bytes / bw[d] : 0), 0);
	}
	allm_predictor_estimate(e->pred, rc, copies ? lat : NULL, copies ? bw : NULL);
	snprintf(note, note_len, "predictors: a first estimate (%.0f ms of timing: %.1f GFLOP/s from %d- and "
		 "%d-token prefills%s), refined from real steps; decisions before that say \"estimated\"",
		 (allm_now() - t0) * 1e3, flops / 1e9, n1, n2, copies ? ", the host link timed" : "");
	return 0;
}

int allm_engine_prepare_predictor(struct allm_engine *e, const char *profile_path, bool at_start,
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
	snprintf(e->profile_path, sizeof(e->profile_path), "%s", path);
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
	/* a simulated device's calibration costs no device time: it runs at once */
	if (!at_start && !e->model->be->simulated) {
		size_t used = strlen(note);
		if ((r = estimate(e, note + used, note_len - used, err)))
			return r;
		disk_or_guess(e, prog, user, note, note_len);
		return 0;
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

void allm_engine_predictor_learned(struct allm_engine *e)
{
	struct allm_err err = {{0}};
	char msg[4400];
	if (!allm_predictor_learned(e->pred))
		return;
	if (!e->profile_path[0])
		snprintf(msg, sizeof(msg), "predictors calibrated from %lld real prefills (recompute MAPE %.1f %%)",
			 (long long)e->pred->n_prefill_obs, e->pred->calib_mape_rc);
	else if (allm_predictor_save(e->pred, e->profile_path, &err))
		snprintf(msg, sizeof(msg), "predictors calibrated from real steps; cannot save the profile: %s", err.msg);
	else
		snprintf(msg, sizeof(msg), "predictors calibrated from %lld real prefills (recompute MAPE %.1f %%), "
			 "saved to %s", (long long)e->pred->n_prefill_obs, e->pred->calib_mape_rc, e->profile_path);
	if (e->ev.on_note)
		e->ev.on_note(e->ev.user, msg);
}
