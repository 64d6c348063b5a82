/* allm-sim-fit's runtimes, and --check PROFILE: the grid's forwards on the real CPU
 * backend and on the simulated device with the profile, side by side: the
 * simulator's error on whole forwards, before any scheduling. Device time is the
 * executor's own timer (what the engine's predictors and clock see); the real one
 * is the mean of --repeat. */
#include "allm-sim-fit.h"

#include "runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fit_open(const char *kind, const char *name, const char *device, int threads, struct allm_runtime **ret)
{
	struct allm_engine_opts o;
	struct allm_err err = {{0}};
	allm_engine_opts_default(&o);
	allm_kv_env_read(&o.kv_env);
	allm_backend_env_read(&o.backend_env);
	if (kind && !strcmp(kind, "--dummy"))
		o.dummy = name;
	else
		o.model_dir = name;
	o.device = device;
	o.gpu_blocks = 32768 / 16 + 512; /* the grid's largest batch, and then some */
	o.cpu_blocks = 80; /* swap copies of up to 64 blocks */
	o.threads = threads;
	o.max_num_batched_tokens = 2048;
	if (allm_runtime_open(&o, 0, NULL, NULL, ret, &err)) {
		fprintf(stderr, PROG ": %s: %s\n", device, err.msg);
		return -1;
	}
	/* The pool's K/V as a serving engine's is: written. The CPU backend maps its
	 * pools lazily, and the grid's decodes read contexts nobody wrote: untouched
	 * pages all map the kernel's one zero page, which stays in L1, so their
	 * attention ran 3x faster than an engine's over the same shapes (--dummy
	 * small: 4 decodes @512 took 1.7 ms here and 2.7-3.2 ms a step in a run).
	 * 0x3c bytes are small normal numbers in f32, f16 and bf16 alike. */
	struct allm_kv_cache *kv = (*ret)->kv;
	if (kv->touched_dev) {
		memset(kv->dev, 0x3c, kv->block_bytes * (size_t)kv->gpu.capacity);
		memset(kv->touched_dev, 1, (size_t)kv->gpu.capacity);
	}
	/* a disk tier of 80 blocks where temporary files go, for its transfers */
	const char *tmp = getenv("TMPDIR");
	char note[300];
	if (!strcmp(device, "cpu") &&
	    allm_kv_attach_disk((*ret)->kv, tmp && *tmp ? tmp : "/tmp", 80, note, sizeof(note), &err))
		fprintf(stderr, PROG ": no disk tier to time (%s)\n", err.msg);
	return 0;
}

/* --by-op: where a forward's error comes from. Each op of the real forward is timed
 * in place (the fit's proxy) and priced by the profile's cost model at the same
 * shape; sums per forward (means over the repeats) by class. Argmax and top-k run
 * after the forward and are left out. Returns false when the profile is unreadable. */
static bool by_op_table(struct allm_runtime *cpu, const char *profile, const struct fit_shape *grid, int n,
			int repeat)
{
	struct allm_sim_profile *prof = NULL;
	struct allm_err err = {{0}};
	if (allm_sim_profile_load(profile, &prof, &err)) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return false;
	}
	fit_proxy_install(cpu->be);
	printf("\n# by op: real (timed in place, mean of %d) / sim (the profile at the same shapes), ms per forward\n",
	       repeat);
	printf("%-32s %17s %17s %17s\n", "batch", "gemm", "attention", "other ops");
	for (int i = 0; i < n; i++) {
		struct fit f;
		double tr, real[3] = {0}, sim[3] = {0};
		memset(&f, 0, sizeof(f));
		if (!fit_forward(cpu, &grid[i], repeat, &tr, &f)) {
			for (int j = 0; j < f.ngs; j++) {
				const struct gsample *g = &f.gs[j];
				real[0] += g->t;
				sim[0] += allm_sim_cost_gemm(prof, (enum allm_dtype)g->dt, g->n, g->k, g->m, false);
			}
			for (int j = 0; j < f.nas; j++) {
				real[1] += f.as[j].t;
				sim[1] += allm_sim_cost_attention(prof, &f.as[j].lay, f.as[j].heads, &f.as[j].s);
			}
			for (int j = 0; j < f.nss; j++) {
				const struct ssample *o = &f.ss[j];
				if (o->op == ALLM_OP_ARGMAX || o->op == ALLM_OP_TOPK)
					continue;
				real[2] += o->t;
				sim[2] += allm_sim_cost_stream(prof, (enum allm_backend_op)o->op, o->bytes);
			}
			const struct fit_shape *sh = &grid[i];
			printf("%3d decodes @%-4d + %d x %-4d prefill", sh->n_dec, sh->ctx, sh->n_pre, sh->len);
			for (int c = 0; c < 3; c++)
				printf("  %7.4f/%-7.4f", real[c] * 1e3 / repeat, sim[c] * 1e3 / repeat);
			printf("\n");
		}
		free(f.gs);
		free(f.as);
		free(f.ss);
		free(f.ls);
	}
	allm_sim_profile_free(prof);
	return true;
}

int fit_check(const char *profile, const char *kind, const char *model, int threads, int repeat, bool by_op)
{
	char dev[4200];
	struct allm_runtime *cpu = NULL, *sim = NULL;
	struct fit_shape grid[64];
	snprintf(dev, sizeof(dev), "sim:%s", profile);
	if (fit_open(kind, model, "cpu", threads, &cpu) || fit_open(kind, model, dev, threads, &sim)) {
		allm_runtime_close(cpu);
		return -1;
	}
	int n = fit_grid(&cpu->model->cfg, grid, 64), counted = 0;
	printf("# %s: forward device time, real cpu (mean of %d) vs %s\n",
	       model ? model : "stories260K (embedded)", repeat, dev);
	printf("%-32s %10s %10s %8s\n", "batch", "real ms", "sim ms", "error");
	double sum_abs = 0, real_sum = 0, sim_sum = 0;
	for (int i = 0; i < n; i++) {
		double tr, ts;
		if (fit_forward(cpu, &grid[i], repeat, &tr, NULL) || fit_forward(sim, &grid[i], 3, &ts, NULL))
			continue;
		const struct fit_shape *s = &grid[i];
		printf("%3d decodes @%-4d + %d x %-4d prefill %10.4f %10.4f %+7.1f%%\n", s->n_dec, s->ctx, s->n_pre,
		       s->len, tr * 1e3, ts * 1e3, 100 * (ts - tr) / tr);
		sum_abs += fabs(ts - tr) / tr;
		real_sum += tr;
		sim_sum += ts;
		counted++;
	}
	printf("mean |error| %.1f %% over %d batches; all of them together: real %.1f ms, sim %.1f ms (%+.1f %%)\n",
	       100 * sum_abs / (counted ? counted : 1), counted, real_sum * 1e3, sim_sum * 1e3,
	       100 * (sim_sum - real_sum) / real_sum);
	int rc = by_op && !by_op_table(cpu, profile, grid, n, repeat) ? -1 : 0;
	allm_runtime_close(cpu);
	allm_runtime_close(sim);
	return rc;
}
