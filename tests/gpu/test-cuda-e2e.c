/* Description: the CUDA backend end to end against the CPU backend: greedy ids of
 * stories260K and of random tiny Llama / OPT models (allm-mkmodel's writer) are
 * identical in f32, logits within a stated error in f16/bf16; a swap round trip
 * through pinned memory; an injected launch failure fails one step with a
 * message and the backend keeps serving; a sticky fault marks it unusable with
 * a clear error and nothing aborts. Exit 77 without a GPU. */
#include "gpu-harness.h"
#include "model-writer.h"

#include <math.h>
#include <unistd.h>

static struct allm_model *load(allm_backend_t *be, const char *dir, enum allm_dtype dt)
{
	struct allm_err err = {{0}};
	struct allm_model_load_opts lo = {.wdtype = dt};
	struct allm_model *m = NULL;
	if (allm_model_load(be, dir, &lo, &m, &err))
		fprintf(stderr, "load %s on %s: %s\n", dir, be->iface->name(be), err.msg);
	return m;
}

/* Greedy ids of a few prompts on both backends must be identical (f32). */
static void greedy_same(allm_backend_t *cpu, allm_backend_t *gpu, const char *dir,
			const char *what)
{
	enum { N = 4 };
	struct gh_req a[N], b[N];
	struct allm_model *mc = load(cpu, dir, ALLM_DTYPE_F32), *mg = load(gpu, dir, ALLM_DTYPE_F32);
	CHECK(mc && mg, "%s: cannot load", what);
	if (!mc || !mg)
		goto out;
	for (int pass = 0; pass < 2; pass++) {
		struct gh_req *r = pass ? b : a;
		struct gh_engine g;
		memset(r, 0, sizeof(a));
		for (int i = 0; i < N; i++) {
			gh_prompt(&r[i], 1 + 7 * i, (uint64_t)i + 1, mc->cfg.vocab_size);
			gh_params(&r[i].sp, 32);
		}
		if (gh_engine_open(&g, pass ? mg : mc, ALLM_DTYPE_F32, 64, r))
			goto out;
		CHECK(gh_run(&g, r, 0, N) == 0, "%s: engine stuck", what);
		gh_engine_close(&g);
	}
	for (int i = 0; i < N; i++)
		CHECK(a[i].n_out == 32 && b[i].n_out == 32 && !memcmp(a[i].out, b[i].out, sizeof(a[i].out)),
		      "%s prompt %d: greedy ids differ (cpu %d tokens, cuda %d: %s)", what, i, a[i].n_out,
		      b[i].n_out, b[i].error);
	printf("%s f32: %d x 32 greedy ids identical on cpu and cuda\n", what, N);
out:
	allm_model_free(mc);
	allm_model_free(mg);
}

/* All-token logits of one prompt through each backend's executor. */
static float *logits_of(struct allm_model *m, enum allm_dtype kv_dt, const int32_t *ids, int32_t n)
{
	struct allm_err err = {{0}};
	const struct allm_model_config *c = &m->cfg;
	struct allm_kv_layout lay = {c->n_layers, c->n_kv_heads, c->head_dim, 16, kv_dt};
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	int32_t bt[8] = {3, 0, 5, 1, 2, 4, 6, 7}; /* scattered on purpose */
	float *out = malloc((size_t)n * c->vocab_size * sizeof(float));
	if (allm_kv_cache_create(m->be, &lay, 8, 0, &kv, &err) ||
	    allm_executor_create(m, kv, &ex, &err)) {
		fprintf(stderr, "executor: %s\n", err.msg);
		free(out);
		out = NULL;
		goto done;
	}
	struct allm_batch_seq s = {ids, n, 0, bt, 8};
	if (allm_executor_forward(ex, &s, 1, true, out, &err)) {
		fprintf(stderr, "forward on %s: %s\n", m->be->iface->name(m->be), err.msg);
		free(out);
		out = NULL;
	}
done:
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	return out;
}

/* 16-bit: the GPU rounds activations to the weight dtype before each GEMM, the
 * CPU reference does not, so logits differ by rounding: relative RMS error of
 * all logits <= 1e-2 (f16) / 5e-2 (bf16). */
static void logits_close(allm_backend_t *cpu, allm_backend_t *gpu, const char *dir,
			 enum allm_dtype dt, const char *what)
{
	int32_t ids[40];
	struct allm_model *mc = load(cpu, dir, dt), *mg = load(gpu, dir, dt);
	if (!mc || !mg) {
		CHECK(0, "%s: cannot load", what);
		goto out;
	}
	for (int i = 0; i < 40; i++)
		ids[i] = (int32_t)((i * 37 + 11) % mc->cfg.vocab_size);
	float *a = logits_of(mc, dt, ids, 40), *b = logits_of(mg, dt, ids, 40);
	CHECK(a && b, "%s %s: forward failed", what, allm_dtype_name(dt));
	if (a && b) {
		double num = 0, den = 0, mx = 0;
		size_t n = (size_t)40 * mc->cfg.vocab_size;
		for (size_t i = 0; i < n; i++) {
			double d = (double)a[i] - b[i];
			num += d * d;
			den += (double)a[i] * a[i];
			mx = fmax(mx, fabs(d));
		}
		double rel = sqrt(num / den), lim = dt == ALLM_DTYPE_F16 ? 1e-2 : 5e-2;
		CHECK(rel <= lim, "%s %s: relative RMS logit error %.3g > %.0e", what, allm_dtype_name(dt),
		      rel, lim);
		printf("%s %s: relative RMS logit error %.3g (limit %.0e), max |d| %.3g\n", what,
		       allm_dtype_name(dt), rel, lim, mx);
	}
	free(a);
	free(b);
out:
	allm_model_free(mc);
	allm_model_free(mg);
}

static void random_models(allm_backend_t *cpu, allm_backend_t *gpu)
{
	struct allm_err err = {{0}};
	char tmpl[] = "/tmp/allm-gpu-XXXXXX";
	char *root = mkdtemp(tmpl), dir[256];
	static const char *presets[] = {"tiny", "opt-tiny"};
	CHECK(root != NULL, "mkdtemp");
	for (int p = 0; root && p < 2; p++) {
		struct allm_model_config cfg;
		struct allm_model_write_opts wo = {.seed = 17 + (uint64_t)p, .dtype = ALLM_DTYPE_F32};
		snprintf(dir, sizeof(dir), "%s/%s", root, presets[p]);
		if (allm_model_config_preset(presets[p], &cfg, &err) ||
		    allm_model_write_dir(&cfg, &wo, dir, &err)) {
			CHECK(0, "writing %s: %s", presets[p], err.msg);
			continue;
		}
		greedy_same(cpu, gpu, dir, presets[p]);
		logits_close(cpu, gpu, dir, ALLM_DTYPE_F16, presets[p]);
		logits_close(cpu, gpu, dir, ALLM_DTYPE_BF16, presets[p]);
	}
	if (root) {
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", root);
	}
}

/* Blocks out to pinned memory and back into other device blocks, bit for bit. */
static void swap_round_trip(allm_backend_t *gpu)
{
	struct allm_err err = {{0}};
	struct allm_kv_layout lay = {4, 2, 64, 16, ALLM_DTYPE_F16};
	struct allm_kv_cache *kv = NULL;
	if (allm_kv_cache_create(gpu, &lay, 16, 16, &kv, &err)) {
		CHECK(0, "kv: %s", err.msg);
		return;
	}
	size_t bb = kv->block_bytes, all = bb * 16;
	unsigned char *pat = malloc(all), *back = malloc(all);
	for (size_t i = 0; i < all; i++)
		pat[i] = (unsigned char)(i * 131 + (i >> 9));
	CHECK(gpu->iface->upload(gpu, kv->dev, pat, all) == 0, "upload");
	int32_t want[5] = {9, 2, 3, 4, 12}, got[5], cpu_b[5], scratch, back_b[5];
	for (int i = 0; i < 16; i++) /* own every block, release those not swapped */
		allm_block_pool_alloc(&kv->gpu, 1, &scratch);
	for (int i = 0; i < 16; i++) {
		bool keep = false;
		for (int j = 0; j < 5; j++)
			keep |= want[j] == i;
		if (!keep)
			allm_block_pool_release(&kv->gpu, 1, i);
	}
	memcpy(got, want, sizeof(got));
	struct allm_swap_result out = {0}, in = {0};
	CHECK(allm_kv_swap_out(kv, 1, got, 5, cpu_b, &out, &err) == 0, "swap out: %s", err.msg);
	for (int j = 0; j < 5; j++)
		CHECK(!memcmp((char *)kv->host + (size_t)cpu_b[j] * bb, pat + (size_t)want[j] * bb, bb),
		      "pinned block %d != device block %d", cpu_b[j], want[j]);
	unsigned char *zero = calloc(1, all);
	CHECK(gpu->iface->upload(gpu, kv->dev, zero, all) == 0, "clobber");
	CHECK(allm_kv_swap_in(kv, 1, cpu_b, 5, back_b, &in, &err) == 0, "swap in: %s", err.msg);
	CHECK(gpu->iface->download(gpu, back, kv->dev, all) == 0, "download");
	for (int j = 0; j < 5; j++)
		CHECK(!memcmp(back + (size_t)back_b[j] * bb, pat + (size_t)want[j] * bb, bb),
		      "block %d came back as %d with other bytes", want[j], back_b[j]);
	CHECK(out.seconds > 0 && in.seconds > 0, "swap times %g / %g s (device events)", out.seconds,
	      in.seconds);
	printf("swap: 5 blocks (%d + %d runs, %zu KiB) out %.1f us, in %.1f us, bit-exact\n",
	       out.n_runs, in.n_runs, 5 * bb / 1024, out.seconds * 1e6, in.seconds * 1e6);
	free(zero);
	free(pat);
	free(back);
	allm_kv_cache_free(kv);
}

/* A failed launch fails one step; the backend keeps serving. A sticky fault
 * then kills the backend cleanly. */
static void injected_faults(allm_backend_t *gpu)
{
	struct allm_err err = {{0}};
	struct allm_model_config cfg;
	struct allm_model *m = NULL;
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F16};
	int (*inject)(allm_backend_t *, int, int64_t) =
		(int (*)(allm_backend_t *, int, int64_t))allm_backend_cuda_symbol("allm_cuda_debug_inject");
	CHECK(inject != NULL, "the module exports no allm_cuda_debug_inject");
	if (!inject || allm_model_config_preset("tiny", &cfg, &err) ||
	    allm_model_dummy(gpu, &cfg, 99, &lo, &m, &err))
		return;
	enum { N = 4 };
	struct gh_req r[N];
	struct gh_engine g;
	memset(r, 0, sizeof(r));
	for (int i = 0; i < N; i++) {
		gh_prompt(&r[i], 9, 5, cfg.vocab_size); /* the same prompt every time */
		gh_params(&r[i].sp, 12);
	}
	if (gh_engine_open(&g, m, ALLM_DTYPE_F16, 32, r))
		goto out;
	gh_run(&g, r, 0, 1);
	CHECK(r[0].finish == ALLM_END_LENGTH && r[0].n_out == 12, "baseline: %s", r[0].error);
	inject(gpu, 0, 5); /* the 6th launch from now fails to launch */
	gh_run(&g, r, 1, 1);
	CHECK(r[1].finish == ALLM_END_ERROR && strstr(r[1].error, "cuda"),
	      "injected launch failure: finish %d, error '%s'", r[1].finish, r[1].error);
	printf("injected launch failure -> request error: %s\n", r[1].error);
	inject(gpu, 0, -1);
	gh_run(&g, r, 2, 1);
	CHECK(r[2].finish == ALLM_END_LENGTH && !memcmp(r[2].out, r[0].out, sizeof(r[0].out)),
	      "after a failed step the same prompt gave other ids (%s)", r[2].error);
	inject(gpu, 1, 0); /* illegal address: the context is lost */
	gh_run(&g, r, 3, 1);
	CHECK(r[3].finish == ALLM_END_ERROR && strstr(r[3].error, "context lost"),
	      "sticky fault: finish %d, error '%s'", r[3].finish, r[3].error);
	size_t fr, tot;
	int rc = gpu->iface->mem_info(gpu, &fr, &tot);
	CHECK(rc == -EIO && strstr(allm_backend_last_error(gpu), "unusable"),
	      "a dead backend answered %d: %s", rc, allm_backend_last_error(gpu));
	printf("sticky fault -> %s\n", allm_backend_last_error(gpu));
	gh_engine_close(&g);
out:
	allm_model_free(m);
}

int main(void)
{
	allm_backend_t *gpu = gh_backend("cuda");
	allm_backend_t *cpu = gh_backend("cpu-ref");
	printf("cuda: %s\n", gpu->iface->describe(gpu));
	const char *data = getenv("DATA_DIR");
	char stories[4096];
	snprintf(stories, sizeof(stories), "%s/models/stories260K", data ? data : "data");
	greedy_same(cpu, gpu, stories, "stories260K");
	random_models(cpu, gpu);
	swap_round_trip(gpu);
	injected_faults(gpu); /* last: it leaves the CUDA context dead */
	printf("%s\n", n_fail ? "FAILED" : "all CUDA end-to-end checks passed");
	allm_backend_destroy(cpu);
	allm_backend_destroy(gpu);
	return n_fail ? 1 : 0;
}
