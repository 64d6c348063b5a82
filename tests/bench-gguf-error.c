/* Description: the error of GGUF files against a reference file of the same model
 * (not a test; bench/README.md, "Real model"): each file is loaded as allm-run's
 * --dtype auto loads it on the CPU (every tensor in its own type, blocks as stored)
 * or, with @QUANT, converted at load (--quant q8_0|q4_0|q4_1, --dtype f32); one prefill of
 * a fixed id sequence gives every position's logits; printed per file: the largest
 * |logit - the reference's| over all of them, its mean, and teacher-forced greedy
 * agreement (positions whose argmax is the reference's).
 * Usage: bench-gguf-error [-t threads] REF.gguf[@QUANT] IDS FILE.gguf[@QUANT]...
 *   IDS: comma-separated token ids (e.g. tests/data/smollm2/reference.json's
 *   logits.ids); QUANT: q8_0, q4_0, q4_1, or f32 (--dtype f32: dequantized). */
#include "executor.h"
#include "gguf-model.h"
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static allm_backend_t *be;

static float *logits_of(const char *spec, const int32_t *ids, int32_t n, int32_t *ret_v,
			char *desc, size_t desc_len)
{
	struct allm_err err = {{0}};
	char path[4096];
	snprintf(path, sizeof(path), "%s", spec);
	char *at = strrchr(path, '@');
	struct allm_model_config c;
	struct allm_model_load_opts lo = {.file_types = true};
	if (at) {
		*at++ = 0;
		static const struct { const char *name; enum allm_dtype dt; } q[] = {
			{"q8_0", ALLM_DTYPE_Q8_0}, {"q4_0", ALLM_DTYPE_Q4_0}, {"q4_1", ALLM_DTYPE_Q4_1},
			{"f32", ALLM_DTYPE_F32},
		};
		size_t i = 0;
		while (i < ALLM_ARRAY_SIZE(q) && strcmp(q[i].name, at))
			i++;
		if (i == ALLM_ARRAY_SIZE(q)) {
			fprintf(stderr, "%s: unknown quant '%s'\n", spec, at);
			return NULL;
		}
		lo.wdtype = q[i].dt;
		lo.file_types = false;
	}
	struct allm_model *m = NULL;
	struct allm_kv_cache *kv = NULL;
	struct allm_executor *ex = NULL;
	float *out = NULL;
	if (allm_model_config_load(path, &c, &err))
		goto fail;
	if (!at)
		lo.wdtype = c.file_dtype;
	if (allm_model_load(be, path, &lo, &m, &err))
		goto fail;
	snprintf(desc, desc_len, "layers %s, embedding %s%s", allm_dtype_name(m->layers[0].wq_dt),
		 allm_dtype_name(m->tok_emb_dt),
		 !at ? "" : lo.wdtype == ALLM_DTYPE_F32 ? " (dequantized at load)" : " (re-quantized at load)");
	struct allm_kv_layout lay = {c.n_layers, c.n_kv_heads, c.head_dim, 16, ALLM_DTYPE_F32};
	int32_t nb = (n + 15) / 16, bt[256];
	for (int32_t i = 0; i < nb && i < 256; i++)
		bt[i] = i;
	struct allm_batch_seq s = {ids, n, 0, bt, nb};
	out = malloc((size_t)n * (size_t)c.vocab_size * sizeof(float));
	if (nb > 256 || !out || allm_kv_cache_create(be, &lay, nb, 0, &kv, &err) ||
	    allm_executor_create(m, kv, &ex, &err) || allm_executor_forward(ex, &s, 1, true, out, &err))
		goto fail;
	*ret_v = c.vocab_size;
	goto out;
fail:
	fprintf(stderr, "%s: %s\n", spec, err.msg);
	free(out);
	out = NULL;
out:
	allm_executor_free(ex);
	allm_kv_cache_free(kv);
	allm_model_free(m);
	return out;
}

int main(int argc, char **argv)
{
	struct allm_err err = {{0}};
	struct allm_backend_opts bo = {.n_threads = 2};
	int opt;
	while ((opt = getopt(argc, argv, "t:")) != -1)
		bo.n_threads = atoi(optarg);
	if (argc - optind < 3) {
		fprintf(stderr, "usage: bench-gguf-error [-t threads] REF.gguf[@QUANT] IDS FILE.gguf[@QUANT]...\n");
		return 2;
	}
	int32_t ids[4096], n = 0;
	for (char *p = argv[optind + 1]; *p && n < 4096; n++) {
		ids[n] = (int32_t)strtol(p, &p, 10);
		while (*p == ',' || *p == ' ')
			p++;
	}
	if (allm_backend_cpu_create(&bo, &be, &err)) {
		fprintf(stderr, "backend: %s\n", err.msg);
		return 1;
	}
	int32_t V = 0, V2 = 0;
	char desc[128];
	float *ref = logits_of(argv[optind], ids, n, &V, desc, sizeof(desc));
	if (!ref)
		return 1;
	printf("reference %s (%s), %d positions\n", argv[optind], desc, n);
	printf("| file | storage | max abs dlogit | mean abs dlogit | greedy agreement |\n|---|---|---|---|---|\n");
	for (int a = optind + 2; a < argc; a++) {
		float *l = logits_of(argv[a], ids, n, &V2, desc, sizeof(desc));
		if (!l || V2 != V) {
			free(l);
			continue;
		}
		double mx = 0, sum = 0;
		int agree = 0;
		for (size_t i = 0; i < (size_t)n * (size_t)V; i++) {
			double d = fabs((double)l[i] - ref[i]);
			mx = fmax(mx, d);
			sum += d;
		}
		for (int32_t t = 0; t < n; t++)
			agree += allm_argmax(l + (size_t)t * V, V) == allm_argmax(ref + (size_t)t * V, V);
		const char *base = strrchr(argv[a], '/');
		printf("| %s | %s | %.4f | %.4f | %.1f %% (%d/%d) |\n", base ? base + 1 : argv[a], desc, mx,
		       sum / ((double)n * V), 100.0 * agree / n, agree, n);
		free(l);
	}
	free(ref);
	allm_backend_destroy(be);
	return 0;
}
