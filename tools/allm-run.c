/* allm-run: the engine in-process, no daemon (DESIGN §12). Single prompt mode:
 * load a model, generate once, print text, ids (--ids) or JSON (--json), and with
 * --bench the prefill and decode speeds. */
#include "allm-run.h"
#include "progress.h"
#include "runtime.h"
#include "sampler.h"
#include "engine-calib.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>


static void usage(FILE *f)
{
	char params[4096];
	allm_params_help(params, sizeof(params));
	fprintf(f,
		"usage: allm-run [model/memory flags] (--prompt TEXT | --prompt-ids 1,2,3) [options]\n"
		"generation:\n"
		"  --prompt TEXT          text prompt (tokenized with the model's tokenizer.json)\n"
		"  --prompt-ids LIST      comma-separated token ids, taken as given (no BOS added)\n"
		"%s"
		"  --ids                  print 'prompt: ...' and 'generated: ...' id lines\n"
		"  --json                 print one JSON object (with --logprobs: each token's)\n"
		"  --bench                print prefill and decode tokens/s\n"
		"offline batch mode (through the scheduler):\n"
		"  --workload NAME|FILE   chatbot, alpaca, summary (seeded synthetic) or a JSONL file\n"
		"  -n N                   requests (default 100)\n"
		"  --max-output N         tokens per request (default 128)\n"
		"  --rate R               Poisson arrivals per second (default: all at t = 0)\n"
		"  --output-dist D        fixed (default) or uniform output lengths\n"
		"  --records FILE         per-request records as JSONL\n"
		"  --decisions FILE       every preemption decision (predicted and measured cost) as JSONL\n"
		"  --probe-regret         also time each victim's other path (swap or recompute; a\n"
		"                         bench hook: costs that time) so regret can be counted\n"
		"%s",
		params, allm_engine_opts_help());
}

static int parse_args(int argc, char **argv, struct run_args *a)
{
	struct allm_err err = {{0}};
	int64_t n;
	double d;
	memset(a, 0, sizeof(*a));
	allm_engine_opts_default(&a->eng);
	allm_kv_env_read(&a->eng.kv_env);
	allm_backend_env_read(&a->eng.backend_env);
	allm_params_init(&a->params);
	a->n_requests = 100;
	a->max_output = 128;
	for (int i = 1; i < argc;) {
		int r = allm_engine_opts_parse(&a->eng, argc, argv, &i, &err);
		if (r == 0)
			r = allm_params_parse_flag(&a->params, argc, argv, &i, err.msg, sizeof(err.msg));
		if (r == 0)
			r = allm_grammar_parse_flag(&a->grammar, argc, argv, &i, err.msg, sizeof(err.msg));
		if (r < 0) {
			fprintf(stderr, "allm-run: %s\n", err.msg);
			return -1;
		}
		if (r)
			continue;
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			exit(0);
		}
		bool flag = true;
		if (!strcmp(f, "--ids"))
			a->ids = true;
		else if (!strcmp(f, "--json"))
			a->json = true;
		else if (!strcmp(f, "--bench"))
			a->bench = true;
		else if (!strcmp(f, "--probe-regret"))
			a->probe_regret = true;
		else
			flag = false;
		if (flag) {
			i++;
			continue;
		}
		if (!v) {
			fprintf(stderr, "allm-run: unknown flag or missing value: %s (see --help)\n", f);
			return -1;
		}
		if (!strcmp(f, "--prompt"))
			a->prompt = v;
		else if (!strcmp(f, "--prompt-ids"))
			a->prompt_ids = v;
		else if (!strcmp(f, "--workload"))
			a->workload = v;
		else if (!strcmp(f, "-n") && !allm_parse_i64(v, 1, 1 << 24, &n))
			a->n_requests = n;
		else if (!strcmp(f, "--max-output") && !allm_parse_i64(v, 1, 1 << 24, &n))
			a->max_output = (int32_t)n;
		else if (!strcmp(f, "--rate") && !allm_parse_f64(v, 0, 1e9, &d))
			a->rate = d;
		else if (!strcmp(f, "--records"))
			a->records = v;
		else if (!strcmp(f, "--decisions"))
			a->decisions = v;
		else if (!strcmp(f, "--output-dist") && (!strcmp(v, "fixed") || !strcmp(v, "uniform")))
			a->output_dist = v;
		else {
			static const struct { const char *flag, *want; } ranges[] = {
				{"-n", "an integer >= 1"}, {"--max-output", "an integer >= 1"},
				{"--rate", "a number >= 0"}, {"--output-dist", "fixed or uniform"},
			};
			for (size_t k = 0; k < ALLM_ARRAY_SIZE(ranges); k++)
				if (!strcmp(f, ranges[k].flag)) {
					fprintf(stderr, "allm-run: bad value for %s: '%s' (want %s)\n", f, v,
						ranges[k].want);
					return -1;
				}
			fprintf(stderr, "allm-run: unknown flag %s (see --help)\n", f);
			return -1;
		}
		i += 2;
	}
	if (a->workload && (a->prompt || a->prompt_ids)) {
		fprintf(stderr, "allm-run: --workload and --prompt/--prompt-ids are exclusive\n");
		return -1;
	}
	if (!!a->prompt + !!a->prompt_ids != 1 && !a->bench && !a->workload) {
		fprintf(stderr, "allm-run: give exactly one of --prompt or --prompt-ids (see --help)\n");
		return -1;
	}
	if (a->prompt && a->prompt_ids) {
		fprintf(stderr, "allm-run: --prompt and --prompt-ids are exclusive\n");
		return -1;
	}
	if (!a->workload && allm_params_check(&a->params, err.msg, sizeof(err.msg))) {
		fprintf(stderr, "allm-run: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* "1,2, 3" -> ids (params.h's list parser, as the allm CLI); every id checked
 * against the vocabulary. *ret from allm_malloc, as the tokenizer's. */
static int parse_ids(const char *s, int32_t vocab, int32_t **ret, int32_t *ret_n)
{
	char why[160];
	int32_t *ids;
	size_t n;
	int r = allm_parse_id_list("--prompt-ids", s, (size_t)INT32_MAX, &ids, &n, why, sizeof(why));
	if (r) {
		fprintf(stderr, "allm-run: %s\n", why);
		return r;
	}
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= vocab) {
			fprintf(stderr, "allm-run: --prompt-ids: id %d is outside the vocabulary (0..%d)\n", ids[i],
				vocab - 1);
			free(ids);
			return -EINVAL;
		}
	if (!(*ret = allm_malloc(n * sizeof(*ids)))) {
		free(ids);
		return -ENOMEM;
	}
	memcpy(*ret, ids, n * sizeof(*ids));
	free(ids);
	*ret_n = (int32_t)n;
	return 0;
}

/* One prompt through the engine: what came back, and when. */
struct gen_result {
	int32_t *ids; /* generated ids */
	int32_t n_generated, cap;
	const char *finish; /* "stop" or "length" */
	char error[160]; /* set when the request failed */
	bool done;
	double t_start, t_first, t_end; /* submit, first token, finish */
	FILE *stream; /* streams text pieces when set */
	struct allm_detok *dt;
	struct allm_token_logprobs *lp; /* [cap] with --logprobs */
};

static void on_token(void *user, const struct allm_token_out *t)
{
	struct gen_result *g = user;
	int32_t id = t->token;
	char piece[1024];
	if (!g->n_generated)
		g->t_first = allm_now();
	if (g->n_generated == g->cap) {
		int32_t cap = g->cap ? g->cap * 2 : 64;
		int32_t *v = allm_realloc(g->ids, (size_t)cap * sizeof(int32_t));
		if (!v)
			return;
		g->ids = v;
		struct allm_token_logprobs *l = t->lp ? allm_realloc(g->lp, (size_t)cap * sizeof(*l)) : NULL;
		if (t->lp && !l)
			return;
		g->lp = l;
		g->cap = cap;
	}
	if (g->lp && t->lp)
		g->lp[g->n_generated] = *t->lp;
	g->ids[g->n_generated++] = id;
	if (g->dt && allm_detok_push(g->dt, id, piece, sizeof(piece)) > 0) {
		fputs(piece, g->stream);
		fflush(g->stream);
	}
}

static void on_finish(void *user, const struct allm_result *res)
{
	struct gen_result *g = user;
	char piece[1024];
	g->t_end = allm_now();
	g->done = true;
	g->finish = allm_end_name(res->end);
	if (res->end == ALLM_END_ERROR || res->end == ALLM_END_CANCELLED)
		snprintf(g->error, sizeof(g->error), "%s", res->error[0] ? res->error : "cancelled");
	if (g->dt && allm_detok_flush(g->dt, piece, sizeof(piece)) > 0)
		fputs(piece, g->stream);
}

/* Runs the prompt through the engine's step loop, like one request of the daemon:
 * one path for sampling, stop rules and KV blocks. */
static int generate(struct allm_runtime *rt, const int32_t *prompt, int32_t n_prompt,
		    const struct run_args *a, FILE *stream, struct gen_result *g,
		    struct allm_err *err)
{
	struct allm_predictor_key key;
	struct allm_predictor *pred = NULL;
	struct allm_engine *e = NULL;
	int r;

	memset(g, 0, sizeof(*g));
	g->stream = stream;
	if (stream && rt->tok && ((r = allm_detok_create(rt->tok, true, &g->dt)) ||
				  (r = allm_detok_prime(g->dt, prompt, (size_t)n_prompt))))
		return allm_err_set(err, r, "detokenizer: %s", r == -ENOMEM ? "out of memory"
									  : "a prompt id outside the vocabulary");
	/* a single request is never preempted: the predictors stay uncalibrated */
	allm_engine_predictor_key(rt->model, rt->kv, &key);
	struct allm_engine_config ec = {
		.max_num_seqs = 1,
		.max_num_batched_tokens = ALLM_MAX(a->eng.max_num_batched_tokens, rt->model->cfg.max_pos),
		.preempt = a->eng.preempt,
		.sched = a->eng.sched,
	};
	struct allm_engine_events ev = {.user = g, .on_token = on_token, .on_finish = on_finish};
	struct allm_submit sub = {.prompt = prompt, .n_prompt = n_prompt, .params = a->params,
				  .grammar = a->compiled};
	if ((r = allm_predictor_create(&key, &pred)) ? (allm_err_set(err, r, "out of memory"), 1) : 0)
		goto out;
	if ((r = allm_engine_create(rt->model, rt->kv, pred, &ec, &ev, &e, err)))
		goto out;
	g->t_start = allm_now();
	if ((r = allm_engine_submit(e, &sub, NULL, err)))
		goto out;
	while (!g->done)
		if ((r = allm_engine_step(e, err)) < 0)
			goto out;
	r = g->error[0] ? allm_err_set(err, -EIO, "%s", g->error) : 0;
out:
	allm_engine_free(e);
	allm_predictor_free(pred);
	allm_detok_free(g->dt);
	g->dt = NULL;
	return r;
}

static void print_ids(FILE *f, const char *label, const int32_t *ids, int32_t n)
{
	fprintf(f, "%s:", label);
	for (int32_t i = 0; i < n; i++)
		fprintf(f, " %d", ids[i]);
	fputc('\n', f);
}

static char *decode_text(struct allm_runtime *rt, const int32_t *ids, int32_t n)
{
	char *text = NULL;
	if (rt->tok && allm_tokenizer_decode(rt->tok, ids, (size_t)n, true, &text, NULL))
		text = NULL;
	return text;
}

static int emit_json(struct allm_runtime *rt, const int32_t *prompt, int32_t n_prompt,
		     const struct gen_result *g)
{
	json_t *o = json_object(), *p = json_array(), *q = json_array();
	for (int32_t i = 0; i < n_prompt; i++)
		json_array_append_new(p, json_integer(prompt[i]));
	for (int32_t i = 0; i < g->n_generated; i++)
		json_array_append_new(q, json_integer(g->ids[i]));
	char *text = decode_text(rt, g->ids, g->n_generated);
	json_object_set_new(o, "model", json_string(rt->model_desc));
	json_object_set_new(o, "device", json_string(rt->be->iface->describe(rt->be)));
	json_object_set_new(o, "prompt_ids", p);
	json_object_set_new(o, "generated_ids", q);
	json_object_set_new(o, "text", text ? json_string(text) : json_null());
	json_object_set_new(o, "finish_reason", json_string(g->finish));
	json_object_set_new(o, "prompt_tokens", json_integer(n_prompt));
	json_object_set_new(o, "generated_tokens", json_integer(g->n_generated));
	json_object_set_new(o, "prefill_s", json_real(g->t_first - g->t_start));
	json_object_set_new(o, "decode_s", json_real(g->t_end - g->t_first));
	json_object_set_new(o, "load_s", json_real(rt->load_seconds));
	if (g->lp) { /* --logprobs: per token {"id", "logprob", "top": [[id, logprob], ...]} */
		json_t *lps = json_array();
		for (int32_t i = 0; i < g->n_generated; i++) {
			json_t *top = json_array();
			for (int32_t j = 0; j < g->lp[i].n_top; j++)
				json_array_append_new(top, json_pack("[i, f]", g->lp[i].top_id[j], (double)g->lp[i].top_logprob[j]));
			json_array_append_new(lps, json_pack("{s:i, s:f, s:o}", "id", g->lp[i].id, "logprob",
							     (double)g->lp[i].logprob, "top", top));
		}
		json_object_set_new(o, "logprobs", lps);
	}
	allm_free(text);
	char *out = json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);
	json_decref(o);
	if (!out)
		return -ENOMEM;
	puts(out);
	free(out);
	return 0;
}

/* --bench without a prompt: a fixed pseudo-random prompt of this many tokens. */
#define BENCH_PROMPT 128

int main(int argc, char **argv)
{
	struct run_args a;
	struct allm_err err = {{0}};
	struct allm_runtime *rt = NULL;
	struct allm_progress prog = {.label = "loading weights", .min_total = 64 << 20};
	struct gen_result g = {0};
	int32_t *prompt = NULL, n_prompt = 0;
	struct allm_grammar_vocab *vocab = NULL;
	int rc = 1, r;

	if (parse_args(argc, argv, &a))
		return 2;
	if (a.bench && !a.prompt && !a.prompt_ids)
		a.params.ignore_eos = true;
	/* A single prompt never needs more blocks than its context. */
	if ((r = allm_runtime_open(&a.eng, a.workload ? 0 : -1, allm_progress_cb, &prog, &rt, &err))) {
		fprintf(stderr, "allm-run: %s\n", err.msg);
		return 1;
	}
	const struct allm_model_config *c = &rt->model->cfg;
	if (rt->device_note[0])
		fprintf(stderr, "allm-run: %s\n", rt->device_note);
	if (rt->disk_note[0])
		fprintf(stderr, "allm-run: %s%s\n", rt->disk_failed ? "warning: " : "", rt->disk_note);
	if (rt->default_model)
		fprintf(stderr, "allm-run: %s\n", ALLM_DEFAULT_MODEL_NOTE);
	/* a GGUF file's own types may give the embedding another format (SmolLM2: Q4_1
	 * layers, a Q8_0 token_embd) */
	char emb[48] = "";
	if (rt->model->tok_emb_dt != rt->model->wdtype)
		snprintf(emb, sizeof(emb), " (embedding %s)", allm_dtype_name(rt->model->tok_emb_dt));
	fprintf(stderr, "allm-run: %s %s, %d layers, %s weights%s, on %s (loaded in %.2f s)\n",
		rt->model_desc, allm_arch_name(c->arch), c->n_layers, allm_dtype_name(rt->model->wdtype),
		emb, rt->be->iface->describe(rt->be), rt->load_seconds);

	if (a.grammar.kind != ALLM_GRAMMAR_NONE) {
		/* compiled once, before the prompt: a grammar that does not compile
		 * is refused with its place */
		double t0 = allm_now(), t1;
		if (!rt->tok) {
			fprintf(stderr, "allm-run: a grammar needs the model's tokenizer\n");
			goto out;
		}
		if ((r = allm_grammar_vocab_from_tokenizer(rt->tok, &vocab))) {
			fprintf(stderr, "allm-run: out of memory\n");
			goto out;
		}
		t1 = allm_now();
		if ((r = allm_grammar_compile((int)a.grammar.kind, a.grammar.text ? a.grammar.text : "", a.grammar.len,
					      vocab, &a.compiled, &err))) {
			fprintf(stderr, "allm-run: %s\n", r == -ENOMEM && !err.msg[0] ? "out of memory" : err.msg);
			goto out;
		}
		fprintf(stderr, "allm-run: %s grammar compiled in %.2f ms (the vocabulary's trie, once per model: %.1f ms)\n",
			allm_grammar_kind_name(a.grammar.kind), (allm_now() - t1) * 1e3, (t1 - t0) * 1e3);
	}
	if (a.workload) {
		rc = allm_run_workload(rt, &a);
		goto out;
	}
	if (a.prompt_ids) {
		if (parse_ids(a.prompt_ids, c->vocab_size, &prompt, &n_prompt))
			goto out;
	} else if (a.prompt) {
		size_t n = 0;
		if (!rt->tok) {
			fprintf(stderr, "allm-run: --prompt needs a tokenizer.json in the model directory; "
					"use --prompt-ids\n");
			goto out;
		}
		if ((r = allm_tokenizer_encode(rt->tok, a.prompt, strlen(a.prompt), true, &prompt, &n,
					       &err))) {
			fprintf(stderr, "allm-run: --prompt: %s\n", err.msg);
			goto out;
		}
		n_prompt = (int32_t)n;
		if (n_prompt == 0) {
			fprintf(stderr, "allm-run: the prompt encodes to no tokens\n");
			goto out;
		}
	} else {
		/* --bench with no prompt */
		n_prompt = ALLM_MIN(BENCH_PROMPT, c->max_pos / 2);
		prompt = allm_malloc((size_t)n_prompt * sizeof(int32_t));
		if (!prompt)
			goto out;
		for (int32_t i = 0; i < n_prompt; i++)
			prompt[i] = (int32_t)((i * 2654435761u) % (uint32_t)c->vocab_size);
	}
	FILE *stream = (!a.ids && !a.json && !a.bench && rt->tok) ? stdout : NULL;
	if (a.bench) {
		/* warm-up: first touches of scratch and weights are not the steady state */
		struct run_args w = a;
		w.params.max_tokens = 2;
		w.params.min_tokens = 0;
		generate(rt, prompt, n_prompt, &w, NULL, &g, &err);
		allm_free(g.ids);
		allm_free(g.lp);
	}
	if ((r = generate(rt, prompt, n_prompt, &a, stream, &g, &err))) {
		fprintf(stderr, "%sallm-run: %s\n", g.n_generated && stream ? "\n" : "", err.msg);
		goto out;
	}
	if (stream) {
		fputc('\n', stream);
		fflush(stream);
	}
	/* the first token comes out of the prefill, every later one out of a decode step */
	double prefill_s = g.t_first - g.t_start, decode_s = g.t_end - g.t_first;
	int32_t n_decode = g.n_generated - 1;
	if (a.json) {
		if (emit_json(rt, prompt, n_prompt, &g))
			goto out;
	} else if (a.ids) {
		print_ids(stdout, "prompt", prompt, n_prompt);
		print_ids(stdout, "generated", g.ids, g.n_generated);
		char *text = decode_text(rt, g.ids, g.n_generated);
		if (text)
			printf("text: %s\n", text);
		allm_free(text);
	}
	if (a.bench) {
		FILE *bo = a.json ? stderr : stdout;
		fprintf(bo, "bench: prefill %d tokens in %.2f ms = %.1f tok/s | decode %d tokens in "
			    "%.2f ms = %.1f tok/s | %s\n",
			n_prompt, prefill_s * 1e3, n_prompt / prefill_s, n_decode, decode_s * 1e3,
			n_decode > 0 ? n_decode / decode_s : 0.0, rt->be->iface->describe(rt->be));
	} else if (!a.json) {
		fprintf(stderr, "allm-run: %d prompt + %d generated tokens (%s); prefill %.1f tok/s, "
				"decode %.1f tok/s\n",
			n_prompt, g.n_generated, g.finish, n_prompt / prefill_s,
			n_decode > 0 ? n_decode / decode_s : 0.0);
	}
	rc = 0;
out:
	if (a.compiled && a.bench) {
		struct allm_grammar_stats st;
		allm_grammar_stats(a.compiled, &st);
		fprintf(stderr, "allm-run: grammar: %u rules, masks: %llu computed, %llu from the cache\n", st.n_rules,
			(unsigned long long)st.mask_misses, (unsigned long long)st.mask_hits);
	}
	allm_grammar_unref(a.compiled);
	allm_grammar_vocab_free(vocab);
	free(a.grammar.text);
	allm_free(g.ids);
	allm_free(g.lp);
	allm_free(prompt);
	allm_runtime_close(rt);
	return rc;
}
