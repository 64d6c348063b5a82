/* Description: the grammar tests' generator (not a test): runs many constrained
 * requests through one engine in-process (batched, as the daemon does) and writes
 * each one's text; with --compare each is run again without its grammar, same
 * seed, and the first place the two differ must be a token the grammar refuses.
 *
 *   grammar-run --model M [engine flags] --in FILE.jsonl [--compare]
 *     each line: {"kind": "json_schema", "text": "...", "prompt": "...", "seed": 1,
 *                 "max_tokens": 256, "temperature": 1}
 *   out: one line per input, in order: {"i", "text", "finish", "error",
 *        "n_tokens", "masked", "same_ids"}, then a summary line
 *        {"summary": true, "empty_masks": n, "compile_ms_max": x}. */
#include "grammar.h"
#include "runtime.h"
#include "engine-calib.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job {
	int kind;
	char *text, *prompt;
	struct allm_params params;
	struct allm_grammar *g;
	char error[600];
	int32_t *ids[2]; /* [0] with its grammar, [1] without */
	int32_t n[2];
	const char *finish;
	bool done[2];
};

struct run {
	struct job *jobs;
	int n_done;
};

static void on_finish(void *user, const struct allm_result *res)
{
	struct run *run = user;
	struct job *j = &run->jobs[res->tag >> 1];
	int side = (int)(res->tag & 1);
	j->ids[side] = malloc(((size_t)res->n_generated + 1) * sizeof(int32_t));
	memcpy(j->ids[side], res->generated, (size_t)res->n_generated * sizeof(int32_t));
	j->n[side] = res->n_generated;
	j->done[side] = true;
	if (!side)
		j->finish = allm_end_name(res->end);
	if (res->end == ALLM_END_ERROR)
		snprintf(j->error, sizeof(j->error), "%s", res->error);
	run->n_done++;
}

int main(int argc, char **argv)
{
	struct allm_engine_opts eo;
	struct allm_err err = { { 0 } };
	const char *in = NULL;
	bool compare = false;
	allm_engine_opts_default(&eo);
	for (int i = 1; i < argc;) {
		int r = allm_engine_opts_parse(&eo, argc, argv, &i, &err);
		if (r < 0) {
			fprintf(stderr, "grammar-run: %s\n", err.msg);
			return 2;
		}
		if (r)
			continue;
		if (!strcmp(argv[i], "--in") && i + 1 < argc) {
			in = argv[i + 1];
			i += 2;
		} else if (!strcmp(argv[i], "--compare")) {
			compare = true;
			i++;
		} else {
			fprintf(stderr, "grammar-run: unknown flag %s\n", argv[i]);
			return 2;
		}
	}
	if (!in) {
		fprintf(stderr, "grammar-run: --in FILE.jsonl\n");
		return 2;
	}
	struct allm_runtime *rt;
	if (allm_runtime_open(&eo, 0, NULL, NULL, &rt, &err)) {
		fprintf(stderr, "grammar-run: %s\n", err.msg);
		return 1;
	}
	struct allm_grammar_vocab *vocab;
	struct allm_grammar_cache *cache;
	if (!rt->tok || allm_grammar_vocab_from_tokenizer(rt->tok, &vocab) ||
	    allm_grammar_cache_create(vocab, 64, &cache)) {
		fprintf(stderr, "grammar-run: no tokenizer\n");
		return 1;
	}
	FILE *f = fopen(in, "r");
	if (!f) {
		perror(in);
		return 1;
	}
	struct run run = { 0 };
	int n = 0, cap = 0;
	char *line = NULL;
	size_t lcap = 0;
	double compile_max = 0;
	while (getline(&line, &lcap, f) > 0) {
		json_error_t je;
		json_t *o = json_loads(line, 0, &je);
		if (!o)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			run.jobs = realloc(run.jobs, (size_t)cap * sizeof(*run.jobs));
		}
		struct job *j = &run.jobs[n++];
		memset(j, 0, sizeof(*j));
		uint32_t kind = 0;
		allm_grammar_kind_parse(json_string_value(json_object_get(o, "kind")) ?: "none", &kind);
		j->kind = (int)kind;
		j->text = strdup(json_string_value(json_object_get(o, "text")) ?: "");
		j->prompt = strdup(json_string_value(json_object_get(o, "prompt")) ?: "Once upon a time");
		allm_params_init(&j->params);
		j->params.seed = (uint64_t)json_integer_value(json_object_get(o, "seed"));
		j->params.max_tokens = json_integer_value(json_object_get(o, "max_tokens")) ?: 256;
		json_t *t = json_object_get(o, "temperature");
		j->params.temperature = t ? (float)json_number_value(t) : 1.0f;
		double t0 = allm_now();
		if (allm_grammar_cache_get(cache, j->kind, j->text, strlen(j->text), &j->g, &err))
			snprintf(j->error, sizeof(j->error), "compile: %s", err.msg);
		double ms = (allm_now() - t0) * 1e3;
		compile_max = ms > compile_max ? ms : compile_max;
		json_decref(o);
	}
	fclose(f);
	free(line);

	struct allm_predictor_key key;
	struct allm_predictor *pred = NULL;
	struct allm_engine *e = NULL;
	allm_engine_predictor_key(rt->model, rt->kv, &key);
	struct allm_engine_config ec = {
		.max_num_seqs = 16,
		.max_num_batched_tokens = ALLM_MAX(eo.max_num_batched_tokens, rt->model->cfg.max_pos),
		.preempt = eo.preempt,
		.sched = eo.sched,
	};
	struct allm_engine_events ev = { .user = &run, .on_finish = on_finish };
	if (allm_predictor_create(&key, &pred) || allm_engine_create(rt->model, rt->kv, pred, &ec, &ev, &e, &err)) {
		fprintf(stderr, "grammar-run: %s\n", err.msg);
		return 1;
	}
	int want = 0;
	for (int i = 0; i < n; i++) {
		struct job *j = &run.jobs[i];
		if (!j->g)
			continue;
		int32_t *ids;
		size_t np;
		if (allm_tokenizer_encode(rt->tok, j->prompt, strlen(j->prompt), true, &ids, &np, &err)) {
			snprintf(j->error, sizeof(j->error), "prompt: %s", err.msg);
			continue;
		}
		for (int side = 0; side < (compare ? 2 : 1); side++) {
			struct allm_submit s = { .prompt = ids, .n_prompt = (int32_t)np, .params = j->params,
						 .grammar = side ? NULL : j->g, .tag = (uint64_t)i << 1 | (uint64_t)side };
			if (allm_engine_submit(e, &s, NULL, &err))
				snprintf(j->error, sizeof(j->error), "submit: %s", err.msg);
			else
				want++;
		}
		allm_free(ids);
	}
	while (run.n_done < want)
		if (allm_engine_step(e, &err) < 0) {
			fprintf(stderr, "grammar-run: %s\n", err.msg);
			return 1;
		}
	const struct allm_model_config *c = &rt->model->cfg;
	for (int i = 0; i < n; i++) {
		struct job *j = &run.jobs[i];
		json_t *o = json_pack("{s:i}", "i", i);
		char *text = NULL;
		if (j->done[0] && !allm_tokenizer_decode(rt->tok, j->ids[0], (size_t)j->n[0], true, &text, NULL))
			json_object_set_new(o, "text", json_string(text));
		allm_free(text);
		json_object_set_new(o, "finish", j->finish ? json_string(j->finish) : json_null());
		json_object_set_new(o, "error", json_string(j->error));
		json_object_set_new(o, "n_tokens", json_integer(j->n[0]));
		if (compare && j->done[0] && j->done[1]) {
			/* the first difference: the free run's token must be one the
			 * grammar refuses after the common prefix */
			int32_t d = 0;
			while (d < j->n[0] && d < j->n[1] && j->ids[0][d] == j->ids[1][d])
				d++;
			bool ok = true;
			if (d < j->n[0] && d < j->n[1]) {
				struct allm_grammar_matcher *m;
				int32_t ends[ALLM_MAX_EOS];
				for (int k = 0; k < c->n_eos; k++)
					ends[k] = c->eos_ids[k];
				allm_grammar_matcher_create(j->g, ends, c->n_eos, &m);
				for (int32_t k = 0; k < d; k++)
					allm_grammar_matcher_accept(m, j->ids[0][k]);
				ok = !allm_grammar_matcher_accept(m, j->ids[1][d]);
				allm_grammar_matcher_free(m);
			} /* else one is a prefix of the other: both stopped at the same
			   * EOS or length, nothing refused */
			json_object_set_new(o, "same_ids", json_boolean(ok));
			json_object_set_new(o, "common", json_integer(d));
		}
		char *s = json_dumps(o, JSON_COMPACT);
		puts(s);
		free(s);
		json_decref(o);
	}
	json_t *sum = json_pack("{s:b, s:I, s:f}", "summary", 1, "empty_masks", (json_int_t)allm_grammar_empty_masks(),
				"compile_ms_max", compile_max);
	char *s = json_dumps(sum, JSON_COMPACT);
	puts(s);
	free(s);
	json_decref(sum);
	for (int i = 0; i < n; i++) {
		allm_grammar_unref(run.jobs[i].g);
		free(run.jobs[i].text);
		free(run.jobs[i].prompt);
		free(run.jobs[i].ids[0]);
		free(run.jobs[i].ids[1]);
	}
	free(run.jobs);
	allm_engine_free(e);
	allm_predictor_free(pred);
	allm_grammar_cache_free(cache);
	allm_grammar_vocab_free(vocab);
	allm_runtime_close(rt);
	return 0;
}
