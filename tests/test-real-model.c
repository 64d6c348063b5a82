/* Description: the engine on a real trained chat model, SmolLM2-135M-Instruct in GGUF Q4_1 (tools/models.sh), against llama.cpp's answers on the same file (tests/data/smollm2/reference.json, made once by make-reference.py beside it): the tokenizer gives llama.cpp's ids on 100+ strings (accents, CJK, emoji, whitespace runs, digits, code, ChatML tokens); greedy generation picks llama.cpp's ids at every step of its five sequences except where llama.cpp's own top two were within half a logit (teacher-forced and free-running); and on a fixed text the logits stay close to llama.cpp's (max |delta| over llama.cpp's top logits at every position) with a perplexity within a few percent of its. Prints the figures. Usage: test-real-model FILE.gguf reference.json (tests/real-model.sh runs it; REAL_MODEL_DUMP=FILE also writes every logit of the fixed text as raw f32 into FILE.native and FILE.f32). */
#include "executor.h"
#include "model.h"
#include "sampler.h"
#include "test-check.h"
#include "tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static allm_backend_t *be;

/* Largest |logit - llama.cpp's| over its top logits at any position, and the
 * perplexities, per file (its reference's generator.architecture). SmolLM2 (llama):
 * llama.cpp multiplies Q4_1 blocks with activations it rounds to 8 bits (Q8_1), we
 * with f32 activations: the measured gap is a few tenths of a logit on a range of ~30
 * (bench/README.md). Gemma 3 270M and Qwen2.5-Coder 0.5B (Q4_K_M files): their
 * Q4_K/Q6_K/Q5_0 tensors run as Q4_1/Q8_0 blocks here (gguf-model.h), against
 * llama.cpp's K-quant kernels with 8-bit activations; perplexity within 1 % (the
 * measured figures: tests/data/real-archs/README.md). */
static const struct {
	const char *arch;
	double max_dlogit, max_ppl_ratio;
} bounds[] = {
	{"llama", 1.5, 1.05},
	{"gemma3", 1.5, 1.01},
	{"qwen2", 1.5, 1.01},
};
static double MAX_DLOGIT = 1.5, MAX_PPL_RATIO = 1.05;
/* The file's blocks run natively against their f32 dequantization, over every logit:
 * the 8-bit activations of 30 layers move them by about what llama.cpp's do (1.4
 * here; 1.6 with an f16 K/V cache); a head or layer read in the wrong format moves
 * them by tens. */
#define MAX_NATIVE_DLOGIT 3.0

static int32_t *ids_of(json_t *a, size_t *n)
{
	*n = json_array_size(a);
	int32_t *v = malloc((*n + 1) * sizeof(*v));
	for (size_t i = 0; i < *n; i++)
		v[i] = (int32_t)json_integer_value(json_array_get(a, i));
	return v;
}

static void tokenizer(const char *gguf, json_t *cases)
{
	struct allm_err err = {{0}};
	struct allm_tokenizer *tok = NULL;
	if (allm_tokenizer_load(gguf, &tok, &err)) {
		CHECK(0, "tokenizer: %s", err.msg);
		return;
	}
	size_t i, same = 0;
	json_t *c;
	json_array_foreach(cases, i, c) {
		const char *text = json_string_value(json_object_get(c, "text"));
		size_t nw, n = 0;
		int32_t *want = ids_of(json_object_get(c, "ids"), &nw), *got = NULL;
		int r = allm_tokenizer_encode(tok, text, strlen(text), false, &got, &n, &err);
		if (!r && n == nw && (!n || !memcmp(got, want, n * sizeof(*got)))) {
			same++;
		} else {
			fprintf(stderr, "tokenizer: '%s':", text);
			for (size_t k = 0; k < nw; k++)
				fprintf(stderr, " %d", want[k]);
			fprintf(stderr, " (llama.cpp) vs");
			for (size_t k = 0; k < n; k++)
				fprintf(stderr, " %d", got[k]);
			fprintf(stderr, "\n");
		}
		/* and back: decoding llama.cpp's ids gives the text */
		char *back = NULL;
		if (!allm_tokenizer_decode(tok, want, nw, false, &back, &err) && strcmp(back, text))
			fprintf(stderr, "tokenizer: '%s' decodes to '%s'\n", text, back), same--;
		allm_free(back);
		allm_free(got);
		free(want);
	}
	printf("tokenizer: %zu of %zu strings give llama.cpp's ids (and decode back)\n", same,
	       json_array_size(cases));
	CHECK(json_array_size(cases) >= 100 && same == json_array_size(cases), "tokenizer: %zu differ",
	      json_array_size(cases) - same);
	allm_tokenizer_free(tok);
}

struct runner {
	struct allm_kv_cache *kv;
	struct allm_executor *ex;
	int32_t bt[64];
	int32_t nb;
};

static int runner_open(struct runner *r, struct allm_model *m, int32_t max_tokens)
{
	struct allm_err err = {{0}};
	const struct allm_model_config *c = &m->cfg;
	struct allm_kv_layout lay = {c->n_layers, c->n_kv_heads, c->head_dim, 16, ALLM_DTYPE_F32};
	r->nb = (max_tokens + 15) / 16;
	if (r->nb > 64)
		return -1;
	for (int32_t i = 0; i < r->nb; i++)
		r->bt[i] = i;
	if (allm_kv_cache_create(be, &lay, r->nb, 0, &r->kv, &err) || allm_executor_create(m, r->kv, &r->ex, &err)) {
		fprintf(stderr, "runner: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static void runner_close(struct runner *r)
{
	allm_executor_free(r->ex);
	allm_kv_cache_free(r->kv);
}

static bool is_eos(const struct allm_model *m, int32_t id)
{
	for (int i = 0; i < m->cfg.n_eos; i++)
		if (m->cfg.eos_ids[i] == id)
			return true;
	return false;
}

/* How close llama.cpp itself was between its pick and ours at a step: its top logit
 * minus its logit of our pick, from the three it recorded (INFINITY when ours is not
 * among them). */
static double ref_margin(json_t *top, int32_t ours)
{
	size_t k;
	json_t *t;
	json_array_foreach(top, k, t)
		if (json_integer_value(json_array_get(t, 0)) == ours)
			return json_real_value(json_array_get(json_array_get(top, 0), 1)) -
			       json_real_value(json_array_get(t, 1));
	return INFINITY;
}

/* Greedy against llama.cpp's greedy ids. The two do not compute the same arithmetic
 * (module comment of reference.json's README), so where llama.cpp's own top two were
 * nearly tied the picks may differ: a different pick is accepted only where llama.cpp
 * scored ours within TIE of its own. Two checks per prompt: teacher-forced (our argmax
 * at every step of llama.cpp's sequence), and free-running (our own generation equals
 * llama.cpp's up to the first step where they part, and they part only at a tie). */
#define TIE 0.5

static void greedy(struct allm_model *m, json_t *cases)
{
	struct allm_err err = {{0}};
	int32_t V = m->cfg.vocab_size;
	size_t i, same_free = 0, n_pos = 0, n_agree = 0, n_tie = 0;
	json_t *c;
	json_array_foreach(cases, i, c) {
		size_t np, ng;
		int32_t *prompt = ids_of(json_object_get(c, "prompt_ids"), &np);
		int32_t *want = ids_of(json_object_get(c, "generated"), &ng);
		json_t *tops = json_object_get(c, "top");
		int32_t *seq = malloc((np + ng + 1) * sizeof(*seq));
		float *lg = malloc((np + ng) * (size_t)V * sizeof(float));
		struct runner r;
		if (runner_open(&r, m, (int32_t)(np + ng + 1))) {
			CHECK(0, "greedy %zu: no runner", i);
			goto next;
		}
		/* teacher-forced: one prefill over the prompt and llama.cpp's ids */
		memcpy(seq, prompt, np * sizeof(*seq));
		memcpy(seq + np, want, ng * sizeof(*seq));
		struct allm_batch_seq s = {seq, (int32_t)(np + ng - 1), 0, r.bt, r.nb};
		if (allm_executor_forward(r.ex, &s, 1, true, lg, &err)) {
			CHECK(0, "forward: %s", err.msg);
			runner_close(&r);
			goto next;
		}
		for (size_t k = 0; k < ng; k++) {
			int32_t ours = allm_argmax(lg + (np - 1 + k) * (size_t)V, V);
			double d = ref_margin(json_array_get(tops, k), ours);
			n_pos++;
			n_agree += ours == want[k];
			n_tie += ours != want[k] && d < TIE;
			if (ours != want[k] && d < TIE)
				printf("  greedy %zu step %zu (teacher-forced): ours %d, llama.cpp %d by %.3f\n", i, k,
				       ours, want[k], d);
			CHECK(ours == want[k] || d < TIE,
			      "greedy %zu step %zu: ours %d, llama.cpp %d, which scored ours %.3f lower", i, k, ours,
			      want[k], d);
		}
		runner_close(&r);
		/* free-running */
		if (runner_open(&r, m, (int32_t)(np + ng + 1))) {
			CHECK(0, "greedy %zu: no runner", i);
			goto next;
		}
		int32_t n = (int32_t)np, pos = 0, n_gen = 0;
		while (n_gen < (int32_t)ng) {
			struct allm_batch_seq t = {seq + pos, n - pos, pos, r.bt, r.nb};
			if (allm_executor_forward(r.ex, &t, 1, false, lg, &err)) {
				CHECK(0, "forward: %s", err.msg);
				break;
			}
			pos = n;
			seq[n++] = allm_argmax(lg, V);
			n_gen++;
			if (is_eos(m, seq[n - 1]))
				break; /* llama.cpp's list stops after an end-of-generation id too */
		}
		runner_close(&r);
		size_t k = 0;
		while (k < (size_t)n_gen && k < ng && seq[np + k] == want[k])
			k++;
		bool same = k == ng && n_gen == (int32_t)ng;
		same_free += same;
		double d = same ? 0 : ref_margin(json_array_get(tops, k), seq[np + k]);
		printf("greedy %zu (%zu prompt ids): %s\n", i, np,
		       same ? "llama.cpp's ids" : "parts from llama.cpp at a near tie");
		if (!same) {
			printf("  step %zu: ours %d, llama.cpp %d, which it scored %.3f higher\n  llama.cpp:", k,
			       seq[np + k], want[k], d);
			for (size_t q = 0; q < ng; q++)
				printf(" %d", want[q]);
			printf("\n  ours:     ");
			for (int32_t q = 0; q < n_gen; q++)
				printf(" %d", seq[np + (size_t)q]);
			printf("\n");
		}
		CHECK(same || d < TIE, "greedy %zu: parts from llama.cpp at step %zu, not a tie (%.3f)", i, k, d);
	next:
		free(lg);
		free(seq);
		free(prompt);
		free(want);
	}
	printf("greedy: %zu of %zu prompts generate llama.cpp's ids; teacher-forced, %zu of %zu steps pick its id "
	       "and %zu pick its runner-up at a tie (< %.1f logit)\n",
	       same_free, json_array_size(cases), n_agree, n_pos, n_tie, TIE);
	CHECK(json_array_size(cases) >= 5 && n_agree + n_tie == n_pos && n_tie * 10 <= n_pos,
	      "greedy: %zu of %zu steps differ, %zu at ties", n_pos - n_agree, n_pos, n_tie);
}

/* Every logit of the fixed text (n x V, malloc'ed into *ret_out, NULL on failure)
 * against llama.cpp's. */
static void logits(struct allm_model *m, json_t *ref, float **ret_out, size_t *ret_n)
{
	struct allm_err err = {{0}};
	size_t n;
	int32_t *ids = ids_of(json_object_get(ref, "ids"), &n);
	json_t *pos = json_object_get(ref, "positions");
	int32_t V = m->cfg.vocab_size;
	float *out = malloc(n * (size_t)V * sizeof(float));
	struct runner r;
	*ret_out = NULL;
	if (runner_open(&r, m, (int32_t)n)) {
		CHECK(0, "logits: no runner");
		goto out;
	}
	struct allm_batch_seq s = {ids, (int32_t)n, 0, r.bt, r.nb};
	if (allm_executor_forward(r.ex, &s, 1, true, out, &err)) {
		CHECK(0, "forward: %s", err.msg);
		runner_close(&r);
		goto out;
	}
	runner_close(&r);
	double max_d = 0, sum_d = 0, nll_ours = 0, nll_ref = 0;
	size_t n_d = 0, top1 = 0;
	for (size_t i = 0; i + 1 < n && i < json_array_size(pos); i++) {
		const float *row = out + i * (size_t)V;
		json_t *p = json_array_get(pos, i), *t;
		size_t k;
		json_array_foreach(json_object_get(p, "top"), k, t) {
			int32_t id = (int32_t)json_integer_value(json_array_get(t, 0));
			double d = fabs(row[id] - json_real_value(json_array_get(t, 1)));
			max_d = fmax(max_d, d);
			sum_d += d;
			n_d++;
		}
		top1 += allm_argmax(row, V) == json_integer_value(json_array_get(json_array_get(json_object_get(p, "top"), 0), 0));
		double mx = row[0], z = 0;
		for (int32_t v = 1; v < V; v++)
			mx = fmax(mx, row[v]);
		for (int32_t v = 0; v < V; v++)
			z += exp(row[v] - mx);
		nll_ours -= row[ids[i + 1]] - (mx + log(z));
		nll_ref -= json_real_value(json_object_get(p, "next_logit")) - json_real_value(json_object_get(p, "logsumexp"));
	}
	double ppl = exp(nll_ours / (double)(n - 1)), ppl_ref = exp(nll_ref / (double)(n - 1));
	printf("logits on %zu positions of the fixed text: max |delta| %.4f, mean |delta| %.4f over llama.cpp's "
	       "top %zu; same argmax at %zu of %zu; perplexity %.4f (llama.cpp %.4f, file's %.4f)\n",
	       n - 1, max_d, n_d ? sum_d / (double)n_d : 0, n_d / (n - 1), top1, n - 1, ppl, ppl_ref,
	       json_real_value(json_object_get(ref, "perplexity")));
	CHECK(n_d > 0 && max_d < MAX_DLOGIT, "max |delta logit| %g >= %g", max_d, MAX_DLOGIT);
	CHECK(ppl < ppl_ref * MAX_PPL_RATIO && ppl > ppl_ref / MAX_PPL_RATIO, "perplexity %g vs llama.cpp's %g", ppl, ppl_ref);
	CHECK(fabs(ppl_ref - json_real_value(json_object_get(ref, "perplexity"))) < 1e-3 * ppl_ref,
	      "the reference's own perplexity does not add up");
	*ret_out = out;
	*ret_n = n;
	out = NULL;
out:
	free(out);
	free(ids);
}

int main(int argc, char **argv)
{
	struct allm_err err = {{0}};
	json_error_t je;
	if (argc != 3) {
		fprintf(stderr, "usage: test-real-model FILE.gguf reference.json\n");
		return 2;
	}
	json_t *ref = json_load_file(argv[2], 0, &je);
	if (!ref) {
		fprintf(stderr, "%s: %s\n", argv[2], je.text);
		return 1;
	}
	struct allm_backend_opts bo = {.n_threads = 2};
	if (allm_backend_cpu_create(&bo, &be, &err)) {
		fprintf(stderr, "backend: %s\n", err.msg);
		return 1;
	}
	/* the tokenizer where the reference has its cases (SmolLM2's; the other files'
	 * prompts are llama.cpp's ids) */
	if (json_object_get(ref, "tokenizer"))
		tokenizer(argv[1], json_object_get(ref, "tokenizer"));
	const char *arch = json_string_value(json_object_get(json_object_get(ref, "generator"), "architecture"));
	bool smollm2 = !arch; /* its reference predates the field */
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(bounds); i++)
		if (!strcmp(bounds[i].arch, arch ? arch : "llama")) {
			MAX_DLOGIT = bounds[i].max_dlogit;
			MAX_PPL_RATIO = bounds[i].max_ppl_ratio;
		}
	/* as users run the file (--dtype auto: SmolLM2's Q4_1 layers and Q8_0 embedding
	 * as stored), and dequantized into f32 (--dtype f32; SmolLM2 only: the others'
	 * f32 copies would not fit a CI machine's memory budget) */
	static const struct {
		const char *what;
		struct allm_model_load_opts lo;
	} loads[] = {
		{"native (the file's own block types)", {.wdtype = ALLM_DTYPE_Q4_1, .file_types = true}},
		{"f32 (dequantized at load)", {.wdtype = ALLM_DTYPE_F32}},
	};
	float *out[2] = {NULL, NULL};
	size_t n = 0;
	int32_t V = 0;
	for (size_t i = 0; i < (smollm2 ? ALLM_ARRAY_SIZE(loads) : 1); i++) {
		struct allm_model *m = NULL;
		if (allm_model_load(be, argv[1], &loads[i].lo, &m, &err)) {
			CHECK(0, "load %s as %s: %s", argv[1], loads[i].what, err.msg);
			continue;
		}
		printf("--- %s: layers %s, embedding %s\n", loads[i].what, allm_dtype_name(m->layers[0].wq_dt),
		       allm_dtype_name(m->tok_emb_dt));
		if (loads[i].lo.file_types && smollm2)
			CHECK(m->layers[0].wq_dt == ALLM_DTYPE_Q4_1 && m->tok_emb_dt == ALLM_DTYPE_Q8_0 &&
			      m->lm_head_dt == ALLM_DTYPE_Q8_0, "the file's own types are not what loaded");
		if (loads[i].lo.file_types) /* no matrix fell back to another format */
			for (int l = 0; l < m->cfg.n_layers; l++)
				CHECK(allm_dtype_is_qblock(m->layers[l].wq_dt) && allm_dtype_is_qblock(m->layers[l].w_down_dt) &&
				      allm_dtype_is_qblock(m->tok_emb_dt), "layer %d: not the file's blocks", l);
		greedy(m, json_object_get(ref, "greedy"));
		logits(m, json_object_get(ref, "logits"), &out[i], &n);
		V = m->cfg.vocab_size;
		allm_model_free(m);
	}
	/* the native blocks against their f32 dequantization: the activations rounded to
	 * 8 bits per block of 32 (kernels/README.md) are all that differs */
	if (out[0] && out[1]) {
		double max_d = 0, sum_d = 0;
		size_t agree = 0;
		for (size_t i = 0; i < n * (size_t)V; i++) {
			max_d = fmax(max_d, fabs((double)out[0][i] - out[1][i]));
			sum_d += fabs((double)out[0][i] - out[1][i]);
		}
		for (size_t i = 0; i < n; i++)
			agree += allm_argmax(out[0] + i * (size_t)V, V) == allm_argmax(out[1] + i * (size_t)V, V);
		printf("native against f32 on the fixed text: max |delta logit| %.4f (mean %.4f) over all %d logits "
		       "of %zu positions, the same argmax at %zu\n", max_d, sum_d / (double)(n * (size_t)V), V, n, agree);
		CHECK(max_d > 0 && max_d < MAX_NATIVE_DLOGIT && agree * 10 >= n * 9,
		      "native vs f32: %g, %zu of %zu agree", max_d, agree, n);
	}
	const char *dump = getenv("REAL_MODEL_DUMP");
	for (size_t i = 0; dump && i < 2; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s.%s", dump, i ? "f32" : "native");
		FILE *f = fopen(path, "wb");
		if (!out[i] || !f || fwrite(out[i], sizeof(float), n * (size_t)V, f) != n * (size_t)V || fclose(f))
			fprintf(stderr, "cannot write %s\n", path);
	}
	free(out[0]);
	free(out[1]);
	allm_backend_destroy(be);
	json_decref(ref);
	if (n_fail)
		return 1;
	printf("test-real-model: all checks passed\n");
	return 0;
}
