/* --dummy: deterministic pseudo-random weights of a preset's real shapes, like
 * vLLM's --load-format dummy, so paper-scale benchmarks need no download. Values
 * depend only on (seed, tensor name, element index): not on dtype, thread count or
 * tensor order, so allm-mkmodel's files and --dummy models agree. */
#include "model.h"

#include <math.h>
#include <stdio.h>

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* Uniform in [-1, 1). */
static float unit(uint64_t *st)
{
	return (float)((allm_splitmix64(st) >> 40) * 0x1p-23) - 1.0f;
}

/* Fills one tensor, whole rows at a time (block storage quantizes per row). Scales
 * keep activations O(1) through many layers: matrices ~ U(-1,1)/sqrt(fan_in), norms
 * near 1, small biases, embeddings ~ U(-1,1). */
static void fill_spec(const struct allm_model *m, const struct allm_weight_spec *s,
		      uint64_t seed, void *dst, float *tmp, size_t chunk)
{
	uint64_t st = seed ^ fnv1a(s->name);
	int64_t rows = s->n_dims == 2 ? s->shape[0] : 1;
	int64_t cols = s->n_dims == 2 ? s->shape[1] : s->shape[0];
	int64_t per = ALLM_MAX((int64_t)1, (int64_t)chunk / cols); /* rows per chunk */
	float scale = 1.0f, offset = 0.0f;
	switch (s->kind) {
	case ALLM_WKIND_MATRIX: scale = 1.0f / sqrtf((float)s->shape[1]); break;
	case ALLM_WKIND_NORM: scale = 0.1f; offset = 1.0f; break;
	case ALLM_WKIND_BIAS: scale = 0.02f; break;
	case ALLM_WKIND_EMBED: scale = 1.0f; break;
	}
	for (int64_t r0 = 0; r0 < rows; r0 += per) {
		int64_t nr = ALLM_MIN(per, rows - r0);
		for (int64_t j = 0; j < nr * cols; j++)
			tmp[j] = offset + scale * unit(&st);
		allm_model_spec_store(m, s, dst, r0, tmp, nr);
	}
}

int allm_model_dummy(allm_backend_t *be, const struct allm_model_config *cfg, uint64_t seed,
		     const struct allm_model_load_opts *o, struct allm_model **ret,
		     struct allm_err *err)
{
	struct allm_model *m = NULL;
	struct allm_weight_spec *specs = NULL;
	size_t n = 0, chunk = 1 << 20;
	float *tmp = NULL;
	void *stage = NULL;
	uint64_t total = 0, done = 0;
	int r;

	if ((r = allm_model_config_validate(cfg, "--dummy", err)))
		return r;
	if ((r = allm_model_create_shell(be, cfg, o ? o->wdtype : ALLM_DTYPE_F32, &m, err)))
		return r;
	snprintf(m->source, sizeof(m->source), "dummy");
	if ((r = allm_model_weight_specs(m, &specs, &n))) {
		allm_err_set(err, r, "out of memory");
		goto fail;
	}
	if ((r = allm_model_alloc_arena(m, specs, n, err)))
		goto fail;
	for (size_t i = 0; i < n; i++) /* a chunk holds at least one row */
		chunk = ALLM_MAX(chunk, (size_t)(specs[i].n_dims == 2 ? specs[i].shape[1] : specs[i].shape[0]));
	tmp = allm_malloc(chunk * sizeof(float));
	if (!tmp) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	size_t max_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		size_t b = allm_model_spec_bytes(m, &specs[i]);
		total += b;
		max_bytes = ALLM_MAX(max_bytes, b);
	}
	if (be->simulated) {
		/* a simulated device holds no weights: nothing to generate or upload */
		if (o && o->progress)
			o->progress(o->progress_user, total, total);
		goto finish;
	}
	if (!be->device_is_host && (r = be->iface->host_alloc(be, max_bytes, &stage))) {
		r = allm_err_set(err, r, "cannot allocate dummy staging");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		size_t b = allm_model_spec_bytes(m, &specs[i]);
		void *dst = be->device_is_host ? *specs[i].slot : stage;
		fill_spec(m, &specs[i], seed, dst, tmp, chunk);
		if (!be->device_is_host && (r = be->iface->upload(be, *specs[i].slot, stage, b))) {
			r = allm_err_set(err, r, "upload: %s", allm_backend_last_error(be));
			goto fail;
		}
		done += b;
		if (o && o->progress)
			o->progress(o->progress_user, done, total);
	}
finish:
	if ((r = allm_model_finish(m, err)))
		goto fail;
	*ret = m;
	goto out;
fail:
	allm_model_free(m);
out:
	if (stage)
		be->iface->host_free(be, stage);
	allm_free(tmp);
	allm_free(specs);
	return r;
}
