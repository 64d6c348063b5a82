/* Loading a Hugging Face directory's weights (safetensors, single or sharded,
 * read with io_uring): every tensor config.json implies is found and checked before
 * any byte is read; tensors already in their storage dtype go straight into the
 * weights, the rest through a staging window (dtype conversion, fused Phi-3
 * matrices sliced, Gemma's norm offset added). */
#include "hf-model.h"

#include <errno.h>
#include <stdio.h>

/* Finds the file tensor for a spec. Some OPT checkpoints drop the "model." prefix. */
static const struct allm_st_tensor *find_tensor(const struct allm_st_index *idx,
						const char *name)
{
	const struct allm_st_tensor *t = allm_st_find(idx, name);
	if (!t && !strncmp(name, "model.", 6))
		t = allm_st_find(idx, name + 6);
	return t;
}

static int check_tensor(const struct allm_st_index *idx, const struct allm_weight_spec *s,
			const struct allm_st_tensor *t, const char *dir, struct allm_err *err)
{
	if (!t)
		return allm_err_set(err, -ENOENT, "%s: tensor '%s' is missing (config.json implies it)",
				    dir, s->name);
	bool ok = t->n_dims == s->n_dims;
	for (int d = 0; ok && d < s->n_dims; d++) /* a slice of a fused tensor: its rows */
		ok = t->shape[d] == (d == 0 && s->src_rows ? s->src_rows : s->shape[d]);
	if (!ok) {
		char have[96] = "", want[96];
		for (int d = 0; d < t->n_dims && d < 4; d++)
			snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%lld", d ? ", " : "",
				 (long long)t->shape[d]);
		if (s->n_dims == 2)
			snprintf(want, sizeof(want), "%lld, %lld",
				 (long long)(s->src_rows ? s->src_rows : s->shape[0]), (long long)s->shape[1]);
		else
			snprintf(want, sizeof(want), "%lld", (long long)s->shape[0]);
		return allm_err_set(err, -EINVAL,
				    "%s: tensor '%s' has shape [%s] but config.json implies [%s]",
				    idx->paths[t->file_idx], s->name, have, want);
	}
	return 0;
}

/* Whether tensor t's bytes are spec s's storage as they are: the same dtype, the
 * whole tensor (not a slice of a fused one), no offset to add (Gemma's norms). */
static bool as_stored(const struct allm_model *m, const struct allm_weight_spec *s,
		      const struct allm_st_tensor *t)
{
	return t->dtype == allm_model_spec_dtype(m, s) && !s->src_rows &&
	       !(s->kind == ALLM_WKIND_NORM && allm_arch_describe(m->cfg.arch)->hf_norm_offset != 0);
}

/* Bytes of staging for one window of reads that need conversion or upload. */
#define STAGING_WINDOW ((size_t)256 << 20)

struct load_job {
	const struct allm_weight_spec *spec;
	const struct allm_st_tensor *t;
};

/* Reads tensors that need a host copy first (dtype conversion, or a device that is
 * not host memory) in windows of STAGING_WINDOW, converting into place. */
static int load_staged(struct allm_model *m, const struct allm_st_index *idx,
		       struct load_job *jobs, size_t n, const struct allm_model_load_opts *o,
		       uint64_t done_before, uint64_t total, struct allm_err *err)
{
	allm_backend_t *be = m->be;
	size_t max_t = 0, max_c = 0, max_b = 0;
	void *stage = NULL, *conv = NULL;
	float *f32 = NULL;
	struct allm_st_read *reads = NULL;
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		max_t = ALLM_MAX(max_t, (size_t)jobs[i].t->nbytes);
		max_c = ALLM_MAX(max_c, allm_spec_elems(jobs[i].spec));
		max_b = ALLM_MAX(max_b, allm_model_spec_bytes(m, jobs[i].spec));
	}
	size_t win = ALLM_MAX(STAGING_WINDOW, max_t);
	reads = allm_calloc(n ? n : 1, sizeof(*reads));
	f32 = allm_malloc(ALLM_MAX(max_c, 1) * sizeof(float));
	if (!reads || !f32 || (n && (r = be->iface->host_alloc(be, win, &stage)))) {
		r = allm_err_set(err, -ENOMEM, "cannot allocate %zu MiB of load staging", win >> 20);
		goto out;
	}
	if (!be->device_is_host && !(conv = allm_malloc(ALLM_MAX(max_b, 1)))) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n;) {
		size_t j = i, used = 0;
		while (j < n && used + jobs[j].t->nbytes <= win) {
			reads[j - i].t = jobs[j].t;
			reads[j - i].dst = (char *)stage + used;
			used += (jobs[j].t->nbytes + 63) & ~(uint64_t)63;
			j++;
		}
		if (j == i) /* cannot happen: win >= every tensor */
			j = i + 1;
		r = allm_st_read_tensors(idx, reads, j - i, o && o->no_io_uring, NULL, NULL, err);
		if (r)
			goto out;
		for (size_t q = i; q < j; q++) {
			const struct allm_weight_spec *sp = jobs[q].spec;
			size_t ne = allm_spec_elems(sp), nb = allm_model_spec_bytes(m, sp);
			const void *src = reads[q - i].dst; /* in the pinned staging window */
			if (be->device_is_host || !as_stored(m, sp, jobs[q].t)) {
				void *dst = be->device_is_host ? *sp->slot : conv;
				size_t es = allm_dtype_size(jobs[q].t->dtype);
				const char *from = (const char *)reads[q - i].dst +
						   (size_t)sp->src_row0 * (size_t)allm_spec_cols(sp) * es;
				allm_to_f32(f32, from, jobs[q].t->dtype, ne);
				if (sp->kind == ALLM_WKIND_NORM) /* Gemma's w - 1 */
					for (size_t e = 0; e < ne; e++)
						f32[e] += allm_arch_describe(m->cfg.arch)->hf_norm_offset;
				allm_model_spec_store(m, sp, dst, 0, f32, allm_spec_rows(sp));
				src = conv;
			}
			/* already in the storage dtype: straight from pinned memory */
			if (!be->device_is_host && (r = be->iface->upload(be, *sp->slot, src, nb))) {
				r = allm_err_set(err, r, "upload of %s: %s", jobs[q].spec->name,
						 allm_backend_last_error(be));
				goto out;
			}
			done_before += jobs[q].t->nbytes;
		}
		if (o && o->progress)
			o->progress(o->progress_user, done_before, total);
		i = j;
	}
out:
	if (stage)
		be->iface->host_free(be, stage);
	allm_free(conv);
	allm_free(f32);
	allm_free(reads);
	return r;
}

struct progress_fwd {
	const struct allm_model_load_opts *o;
	uint64_t total;
};

static void direct_progress(void *user, uint64_t done, uint64_t total)
{
	struct progress_fwd *p = user;
	if (p->o && p->o->progress)
		p->o->progress(p->o->progress_user, done, p->total);
}

int allm_hf_model_load_from(allm_backend_t *be, const struct allm_vdir *vd,
			    const struct allm_model_load_opts *o, struct allm_model **ret,
			    struct allm_err *err)
{
	const char *dir = vd->path;
	struct allm_model_config cfg;
	struct allm_st_index *idx = NULL;
	struct allm_model *m = NULL;
	struct allm_weight_spec *specs = NULL;
	struct load_job *jobs = NULL;
	struct allm_st_read *direct = NULL;
	size_t n = 0, n_direct = 0, n_jobs = 0;
	uint64_t total = 0, direct_bytes = 0;
	int r;

	if ((r = allm_hf_model_config_load_from(vd, &cfg, err)))
		goto fail;
	if ((r = allm_st_open_from(vd, &idx, err)))
		goto fail;
	if ((r = allm_model_create_shell(be, &cfg, o ? o->wdtype : ALLM_DTYPE_F32, &m, err)))
		goto fail;
	snprintf(m->source, sizeof(m->source), "%s", dir);
	if ((r = allm_model_weight_specs(m, &specs, &n))) {
		allm_err_set(err, r, "out of memory");
		goto fail;
	}
	jobs = allm_calloc(n, sizeof(*jobs));
	direct = allm_calloc(n, sizeof(*direct));
	if (!jobs || !direct) {
		r = allm_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	/* Validate everything before allocating or reading anything. */
	for (size_t i = 0; i < n; i++) {
		const struct allm_st_tensor *t = find_tensor(idx, specs[i].name);
		if ((r = check_tensor(idx, &specs[i], t, dir, err)))
			goto fail;
		total += t->nbytes;
		jobs[i].spec = &specs[i];
		jobs[i].t = t;
	}
	if ((r = allm_model_alloc_arena(m, specs, n, err)))
		goto fail;
	/* Tensors already in the storage dtype go straight into the weights when the
	 * device is host memory; the rest take the staged path. */
	for (size_t i = 0; i < n; i++) {
		if (be->device_is_host && as_stored(m, &specs[i], jobs[i].t)) {
			direct[n_direct].t = jobs[i].t;
			direct[n_direct++].dst = *specs[i].slot;
			direct_bytes += jobs[i].t->nbytes;
		} else {
			jobs[n_jobs++] = jobs[i];
		}
	}
	struct progress_fwd pf = {o, total};
	if (n_direct && (r = allm_st_read_tensors(idx, direct, n_direct, o && o->no_io_uring, direct_progress,
						 &pf, err)))
		goto fail;
	if ((r = load_staged(m, idx, jobs, n_jobs, o, direct_bytes, total, err)))
		goto fail;
	if ((r = allm_model_finish(m, err)))
		goto fail;
	*ret = m;
	goto out;
fail:
	allm_model_free(m);
out:
	allm_free(specs);
	allm_free(jobs);
	allm_free(direct);
	allm_st_close(idx);
	return r;
}
