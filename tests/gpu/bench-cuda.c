/* Description: CUDA backend benchmarks (not a test): decode step time at batch
 * 1/8/64 against the HBM roofline (weights + K/V read once per step over the
 * measured device copy bandwidth), prefill tokens/s, pinned swap bandwidth
 * against a plain pageable cudaMemcpy, and the predictors' MAPE on prefills and
 * swaps they were not calibrated on. One JSON object on stdout, a table on
 * stderr. Usage: bench-cuda [--dummy llama-7b] [--dtype f16] [--ctx 512].
 * Exit 77 without a GPU. */
#include "gpu-harness.h"

#include <math.h>

static double now_s(void)
{
	return allm_now();
}

/* Device copy bandwidth (bytes read + written per second) of a 1 GiB D2D copy. */
static double hbm_bw(allm_backend_t *be)
{
	size_t n = (size_t)1 << 30;
	void *p = NULL;
	double best = 0, s = 0;
	if (be->iface->alloc(be, 2 * n, &p))
		return NAN;
	for (int i = 0; i < 5; i++) {
		be->iface->copy_async(be, (char *)p + n, p, n, ALLM_COPY_D2D);
		if (be->iface->copy_wait(be, &s) == 0 && s > 0)
			best = fmax(best, 2.0 * n / s);
	}
	be->iface->free(be, p);
	return best;
}

/* Seconds per decode step of B sequences with ctx cached tokens each: forward
 * with logits kept on the device plus the device argmax, as the engine runs. */
static double decode_step(struct allm_executor *ex, int32_t B, int32_t ctx, int32_t bps)
{
	struct allm_err err = {{0}};
	struct allm_batch_seq *b = calloc((size_t)B, sizeof(*b));
	int32_t *bt = malloc((size_t)B * bps * sizeof(int32_t)), tok = 1;
	for (int32_t s = 0; s < B; s++) {
		for (int32_t i = 0; i < bps; i++)
			bt[s * bps + i] = s * bps + i;
		b[s] = (struct allm_batch_seq){&tok, 1, ctx, bt + s * bps, bps};
	}
	const int32_t *ids, *tk;
	const float *tv;
	double t = 0;
	for (int it = 0; it < 23; it++) {
		double t0 = now_s();
		if (allm_executor_forward(ex, b, B, false, NULL, &err) ||
		    allm_executor_reduce(ex, true, 0, &ids, &tv, &tk, &err)) {
			fprintf(stderr, "decode B=%d: %s\n", B, err.msg);
			t = NAN;
			break;
		}
		if (it >= 3) /* warm-up: cuBLAS heuristics, allocations */
			t += now_s() - t0;
	}
	free(b);
	free(bt);
	return t / 20;
}

/* Device seconds of one prefill of n_seqs x len tokens. */
static double prefill(struct allm_executor *ex, int32_t n_seqs, int32_t len, int32_t bps)
{
	struct allm_err err = {{0}};
	struct allm_batch_seq *b = calloc((size_t)n_seqs, sizeof(*b));
	int32_t *bt = malloc((size_t)n_seqs * bps * sizeof(int32_t));
	int32_t *tok = calloc((size_t)len, sizeof(int32_t));
	for (int32_t i = 0; i < len; i++)
		tok[i] = (i * 7 + 1) % 1000;
	for (int32_t s = 0; s < n_seqs; s++) {
		for (int32_t i = 0; i < bps; i++)
			bt[s * bps + i] = s * bps + i;
		b[s] = (struct allm_batch_seq){tok, len, 0, bt + s * bps, bps};
	}
	double best = INFINITY;
	for (int it = 0; it < 4; it++) {
		if (allm_executor_forward(ex, b, n_seqs, false, NULL, &err)) {
			fprintf(stderr, "prefill %dx%d: %s\n", n_seqs, len, err.msg);
			best = NAN;
			break;
		}
		if (it > 0)
			best = fmin(best, ex->last_seconds);
	}
	free(b);
	free(bt);
	free(tok);
	return best;
}

int main(int argc, char **argv)
{
	const char *preset = "llama-7b", *dtn = "f16";
	int32_t ctx = 512;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--dummy"))
			preset = argv[i + 1];
		else if (!strcmp(argv[i], "--dtype"))
			dtn = argv[i + 1];
		else if (!strcmp(argv[i], "--ctx"))
			ctx = atoi(argv[i + 1]);
	}
	allm_backend_t *be = gh_backend("cuda");
	struct allm_err err = {{0}};
	struct allm_model_config cfg;
	struct allm_model *m = NULL;
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F16};
	allm_dtype_parse(dtn, &lo.wdtype);
	double t0 = now_s();
	if (allm_model_config_preset(preset, &cfg, &err) ||
	    allm_model_dummy(be, &cfg, 0, &lo, &m, &err)) {
		fprintf(stderr, "model: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "%s: %s %s weights %.2f GiB, generated and uploaded in %.1f s\n",
		be->iface->describe(be), preset, dtn, m->arena_bytes / 1073741824.0, now_s() - t0);

	/* KV: 64 sequences of ctx + 1 tokens; 2048-token prefills fit in the same */
	int32_t bps = (ALLM_MAX(ctx + 1, 2048 / 4) + 15) / 16;
	struct allm_kv_layout lay = {cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, 16, lo.wdtype};
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	if (allm_kv_cache_create(be, &lay, 64 * bps, 128, &kv, &err) ||
	    allm_executor_create(m, kv, &ex, &err)) {
		fprintf(stderr, "kv/executor: %s\n", err.msg);
		return 1;
	}
	double bw = hbm_bw(be);
	double kv_tok = 2.0 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * allm_dtype_size(lo.wdtype);
	printf("{\"device\": \"%s\", \"model\": \"%s\", \"dtype\": \"%s\", \"ctx\": %d, "
	       "\"hbm_copy_gb_s\": %.1f, \"decode\": [", be->iface->describe(be), preset, dtn, ctx,
	       bw / 1e9);
	fprintf(stderr, "device copy bandwidth %.0f GB/s (read + write)\n", bw / 1e9);
	static const int32_t Bs[] = {1, 8, 64};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(Bs); i++) {
		double s = decode_step(ex, Bs[i], ctx, bps);
		double bytes = (double)m->arena_bytes + Bs[i] * (ctx + 1) * kv_tok;
		double roof = bytes / bw;
		fprintf(stderr, "decode B=%-3d ctx=%d: %.3f ms/step, roofline %.3f ms (%.0f%% of it), "
			"%.0f tok/s\n", Bs[i], ctx, s * 1e3, roof * 1e3, 100 * roof / s, Bs[i] / s);
		printf("%s{\"batch\": %d, \"step_ms\": %.4f, \"roofline_ms\": %.4f, \"ratio\": %.3f}",
		       i ? ", " : "", Bs[i], s * 1e3, roof * 1e3, roof / s);
	}
	printf("], \"prefill\": [");
	static const int32_t P[][2] = {{1, 128}, {1, 512}, {4, 512}};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(P); i++) {
		double s = prefill(ex, P[i][0], P[i][1], bps);
		fprintf(stderr, "prefill %dx%d: %.2f ms, %.0f tok/s\n", P[i][0], P[i][1], s * 1e3,
			P[i][0] * P[i][1] / s);
		printf("%s{\"seqs\": %d, \"len\": %d, \"ms\": %.3f, \"tok_s\": %.0f}", i ? ", " : "",
		       P[i][0], P[i][1], s * 1e3, P[i][0] * P[i][1] / s);
	}
	/* swaps: 64 blocks as 1 and as 16 runs, vs pageable cudaMemcpy of as much */
	size_t sb = kv->block_bytes * 64;
	double so1 = allm_kv_time_copy(kv, ALLM_COPY_D2H, 64, 1), si1 = allm_kv_time_copy(kv, ALLM_COPY_H2D, 64, 1);
	double so16 = allm_kv_time_copy(kv, ALLM_COPY_D2H, 64, 16), si16 = allm_kv_time_copy(kv, ALLM_COPY_H2D, 64, 16);
	void *pg = malloc(sb);
	memset(pg, 1, sb);
	double tu = now_s();
	be->iface->upload(be, kv->dev, pg, sb);
	tu = now_s() - tu;
	double td = now_s();
	be->iface->download(be, pg, kv->dev, sb);
	td = now_s() - td;
	free(pg);
	fprintf(stderr, "swap %zu MiB pinned: out %.1f GB/s (1 run) %.1f (16 runs), in %.1f / %.1f; "
		"pageable cudaMemcpy: h2d %.1f GB/s, d2h %.1f GB/s\n", sb >> 20, sb / so1 / 1e9,
		sb / so16 / 1e9, sb / si1 / 1e9, sb / si16 / 1e9, sb / tu / 1e9, sb / td / 1e9);
	printf("], \"swap_gb_s\": {\"out_1run\": %.2f, \"out_16runs\": %.2f, \"in_1run\": %.2f, "
	       "\"in_16runs\": %.2f, \"pageable_h2d\": %.2f, \"pageable_d2h\": %.2f}",
	       sb / so1 / 1e9, sb / so16 / 1e9, sb / si1 / 1e9, sb / si16 / 1e9, sb / tu / 1e9,
	       sb / td / 1e9);

	/* predictors: calibrate as the engine does, then score unseen shapes */
	struct allm_predictor_key key;
	struct allm_predictor *pred = NULL;
	struct allm_engine *e = NULL;
	struct allm_engine_config ec = {.max_num_seqs = 64, .max_num_batched_tokens = 2048};
	struct allm_engine_events ev = {0};
	allm_engine_predictor_key(m, kv, &key);
	if (allm_predictor_create(&key, &pred) ||
	    allm_engine_create(m, kv, pred, &ec, &ev, &e, &err) ||
	    allm_engine_calibrate(e, NULL, NULL, &err)) {
		fprintf(stderr, "calibration: %s\n", err.msg);
		printf("}\n");
		return 1;
	}
	static const int32_t lens[] = {77, 250, 333, 600, 900, 1300};
	double ape_rc = 0, ape_sw = 0;
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(lens); i++) {
		double meas = prefill(ex, 1, lens[i], 64 * bps); /* the whole pool: one long table */
		double pr = allm_predict_recompute(pred, lens[i]);
		ape_rc += fabs(pr - meas) / meas;
	}
	static const int32_t nb[][2] = {{3, 1}, {11, 2}, {29, 5}, {50, 3}};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(nb); i++)
		for (int k = 0; k < 2; k++) {
			enum allm_copy_dir dir = k ? ALLM_COPY_H2D : ALLM_COPY_D2H;
			double meas = allm_kv_time_copy(kv, dir, nb[i][0], nb[i][1]);
			double pr = allm_predict_swap(pred, dir, (uint64_t)nb[i][0] * kv->block_bytes,
						      nb[i][1]);
			ape_sw += fabs(pr - meas) / meas;
		}
	double mape_rc = 100 * ape_rc / ALLM_ARRAY_SIZE(lens), mape_sw = 100 * ape_sw / 8;
	fprintf(stderr, "predictor MAPE on unseen shapes: recompute %.2f%% (target 2%%), swap %.2f%% "
		"(target 4%%)\n", mape_rc, mape_sw);
	printf(", \"predictor_mape\": {\"recompute\": %.3f, \"swap\": %.3f}}\n", mape_rc, mape_sw);
	allm_engine_free(e);
	allm_predictor_free(pred);
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	allm_model_free(m);
	allm_backend_destroy(be);
	return 0;
}
