/* allm-run: the engine in-process, no daemon (DESIGN §12). Single prompt mode:
 * load a model, generate once, print text, ids (--ids) or JSON (--json), and with
 * --bench the prefill and decode speeds. */
#include "allm-run.h"
#include "progress.h"
#include "runtime.h"
#include "sampler.h"
#include "sequence.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>


static void usage(FILE *f)
{
	fprintf(f,
		"usage: allm-run [model/memory flags] (--prompt TEXT | --prompt-ids 1,2,3) [options]\n"
		"generation:\n"
		"  --prompt TEXT          text prompt (tokenized with the model's tokenizer.json)\n"
		"  --prompt-ids LIST      comma-separated token ids, taken as given (no BOS added)\n"
		"  --max-tokens N         tokens to generate (default 128)\n"
		"  --temperature T        0 = greedy (default 1.0)\n"
		"  --top-k K              keep the K most likely tokens (default 0 = off)\n"
		"  --top-p P              nucleus sampling mass (default 1.0 = off)\n"
		"  --seed S               sampling seed (default 0)\n"
		"  --ignore-eos           do not stop at EOS\n"
		"  --ids                  print 'prompt: ...' and 'generated: ...' id lines\n"
		"  --json                 print one JSON object\n"
		"  --bench                print prefill and decode tokens/s\n"
		"offline batch mode (through the scheduler):\n"
		"  --workload NAME|FILE   chatbot, alpaca, summary (seeded synthetic) or a JSONL file\n"
		"  -n N                   requests (default 100)\n"
		"  --max-output N         tokens per request (default 128)\n"
		"  --rate R               Poisson arrivals per second (default: all at t = 0)\n"
		"  --output-dist D        fixed (default) or uniform output lengths\n"
		"  --records FILE         per-request records as JSONL\n"
		"  --decisions FILE       every preemption decision (predicted and measured cost) as JSONL\n"
		"%s",
		allm_engine_opts_help());
}

static int parse_args(int argc, char **argv, struct run_args *a)
{
	struct allm_err err = {{0}};
	int64_t n;
	double d;
	memset(a, 0, sizeof(*a));
	allm_engine_opts_default(&a->eng);
	allm_sampling_default(&a->samp);
	a->samp.temperature = 1.0f;
	a->max_tokens = 128;
	a->n_requests = 100;
	a->max_output = 128;
	for (int i = 1; i < argc;) {
		int r = allm_engine_opts_parse(&a->eng, argc, argv, &i, &err);
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
		if (!strcmp(f, "--ignore-eos"))
			a->ignore_eos = true;
		else if (!strcmp(f, "--ids"))
			a->ids = true;
		else if (!strcmp(f, "--json"))
			a->json = true;
		else if (!strcmp(f, "--bench"))
			a->bench = true;
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
		else if (!strcmp(f, "--max-tokens") && !allm_parse_i64(v, 1, 1 << 24, &n))
			a->max_tokens = (int32_t)n;
		else if (!strcmp(f, "--temperature") && !allm_parse_f64(v, 0, 1e6, &d))
			a->samp.temperature = (float)d;
		else if (!strcmp(f, "--top-k") && !allm_parse_i64(v, 0, INT32_MAX, &n))
			a->samp.top_k = (int32_t)n;
		else if (!strcmp(f, "--top-p") && !allm_parse_f64(v, 1e-9, 1.0, &d))
			a->samp.top_p = (float)d;
		else if (!strcmp(f, "--seed") && !allm_parse_i64(v, 0, INT64_MAX, &n))
			a->samp.seed = (uint64_t)n;
		else {
			static const struct { const char *flag, *want; } ranges[] = {
				{"-n", "an integer >= 1"}, {"--max-output", "an integer >= 1"},
				{"--rate", "a number >= 0"}, {"--output-dist", "fixed or uniform"},
				{"--max-tokens", "an integer >= 1"}, {"--temperature", "a number >= 0"},
				{"--top-k", "an integer >= 0"}, {"--top-p", "a number in (0, 1]"},
				{"--seed", "an integer >= 0"},
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
	return 0;
}

/* "1,2, 3" -> ids; every id checked against the vocabulary. */
static int parse_ids(const char *s, int32_t vocab, int32_t **ret, int32_t *ret_n)
{
	size_t cap = 16, n = 0;
	int32_t *ids = allm_malloc(cap * sizeof(int32_t));
	const char *p = s;
	if (!ids)
		return -ENOMEM;
	while (*p) {
		char *end;
		while (*p == ' ')
			p++;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (end == p || errno) {
			fprintf(stderr, "allm-run: --prompt-ids: '%s' is not a list of integers\n", s);
			goto bad;
		}
		if (v < 0 || v >= vocab) {
			fprintf(stderr, "allm-run: --prompt-ids: id %lld is outside the vocabulary (0..%d)\n",
				v, vocab - 1);
			goto bad;
		}
		if (n == cap) {
			int32_t *t = allm_realloc(ids, (cap *= 2) * sizeof(int32_t));
			if (!t)
				goto bad;
			ids = t;
		}
		ids[n++] = (int32_t)v;
		p = end;
		while (*p == ' ')
			p++;
		if (*p == ',')
			p++;
		else if (*p) {
			fprintf(stderr, "allm-run: --prompt-ids: unexpected '%c' in '%s'\n", *p, s);
			goto bad;
		}
	}
	if (n == 0) {
		fprintf(stderr, "allm-run: --prompt-ids is empty\n");
		goto bad;
	}
	*ret = ids;
	*ret_n = (int32_t)n;
	return 0;
bad:
	allm_free(ids);
	return -EINVAL;
}

struct gen_result {
	int32_t n_generated;
	const char *finish; /* "stop" or "length" */
	double prefill_s, decode_s;
	int32_t n_decode_steps;
};

static bool is_eos(const struct allm_model_config *c, const struct allm_tokenizer *tok, int32_t id)
{
	for (int i = 0; i < c->n_eos; i++)
		if (c->eos_ids[i] == id)
			return true;
	return c->n_eos == 0 && tok && allm_tokenizer_eos_id(tok) == id;
}

/* Prefill then decode one token at a time; streams text when stream != NULL. */
static int generate(struct allm_runtime *rt, struct allm_seq *s, const struct run_args *a,
		    FILE *stream, struct gen_result *res, struct allm_err *err)
{
	const struct allm_model_config *c = &rt->model->cfg;
	struct allm_executor *ex = NULL;
	struct allm_sampler smp;
	struct allm_detok *dt = NULL;
	float *logits = allm_malloc((size_t)c->vocab_size * sizeof(float));
	char piece[1024];
	int r;

	memset(res, 0, sizeof(*res));
	res->finish = "length";
	if (!logits || allm_sampler_init(&smp, &a->samp, c->vocab_size)) {
		allm_free(logits);
		return allm_err_set(err, -ENOMEM, "out of memory");
	}
	if ((r = allm_executor_create(rt->model, rt->kv, &ex, err)))
		goto out;
	if (stream && rt->tok && (r = allm_detok_create(rt->tok, true, &dt))) {
		allm_err_set(err, r, "detokenizer: out of memory");
		goto out;
	}
	for (int32_t step = 0; step < a->max_tokens; step++) {
		if (s->n_tokens >= c->max_pos)
			break; /* context full: finish "length" */
		if ((r = allm_seq_reserve(s, rt->kv, s->n_tokens))) {
			allm_err_set(err, r, "KV cache too small: %d blocks cannot hold %d tokens "
					     "(raise --gpu-blocks or --kv-cache-memory)",
				     rt->kv->gpu.n_total, s->n_tokens);
			goto out;
		}
		struct allm_batch_seq b;
		allm_seq_batch_entry(s, &b);
		double t0 = allm_now();
		if ((r = allm_executor_forward(ex, &b, 1, false, logits, err)))
			goto out;
		double dt_s = allm_now() - t0;
		if (step == 0)
			res->prefill_s = dt_s;
		else {
			res->decode_s += dt_s;
			res->n_decode_steps++;
		}
		s->n_cached = s->n_tokens;
		int32_t id = allm_sampler_sample(&smp, logits);
		if ((r = allm_seq_append(s, id))) {
			allm_err_set(err, r, "out of memory");
			goto out;
		}
		res->n_generated++;
		if (dt) {
			int n = allm_detok_push(dt, id, piece, sizeof(piece));
			if (n > 0) {
				fputs(piece, stream);
				fflush(stream);
			}
		}
		if (!a->ignore_eos && is_eos(c, rt->tok, id)) {
			res->finish = "stop";
			break;
		}
	}
	if (dt && allm_detok_flush(dt, piece, sizeof(piece)) > 0)
		fputs(piece, stream);
	r = 0;
out:
	allm_detok_free(dt);
	allm_executor_free(ex);
	allm_sampler_fini(&smp);
	allm_free(logits);
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

static int emit_json(struct allm_runtime *rt, const struct allm_seq *s,
		     const struct gen_result *g)
{
	json_t *o = json_object(), *p = json_array(), *q = json_array();
	for (int32_t i = 0; i < s->n_prompt; i++)
		json_array_append_new(p, json_integer(s->tokens[i]));
	for (int32_t i = s->n_prompt; i < s->n_tokens; i++)
		json_array_append_new(q, json_integer(s->tokens[i]));
	char *text = decode_text(rt, s->tokens + s->n_prompt, s->n_tokens - s->n_prompt);
	json_object_set_new(o, "model", json_string(rt->model_desc));
	json_object_set_new(o, "device", json_string(rt->be->iface->describe(rt->be)));
	json_object_set_new(o, "prompt_ids", p);
	json_object_set_new(o, "generated_ids", q);
	json_object_set_new(o, "text", text ? json_string(text) : json_null());
	json_object_set_new(o, "finish_reason", json_string(g->finish));
	json_object_set_new(o, "prompt_tokens", json_integer(s->n_prompt));
	json_object_set_new(o, "generated_tokens", json_integer(g->n_generated));
	json_object_set_new(o, "prefill_s", json_real(g->prefill_s));
	json_object_set_new(o, "decode_s", json_real(g->decode_s));
	json_object_set_new(o, "load_s", json_real(rt->load_seconds));
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
	struct allm_seq seq = {0};
	int32_t *prompt = NULL, n_prompt = 0;
	int rc = 1, r;

	if (parse_args(argc, argv, &a))
		return 2;
	if (a.bench && !a.prompt && !a.prompt_ids)
		a.ignore_eos = true;
	/* A single prompt never needs more blocks than its context. */
	if ((r = allm_runtime_open(&a.eng, a.workload ? 0 : -1, allm_progress_cb, &prog, &rt, &err))) {
		fprintf(stderr, "allm-run: %s\n", err.msg);
		return 1;
	}
	const struct allm_model_config *c = &rt->model->cfg;
	if (rt->device_note[0])
		fprintf(stderr, "allm-run: %s\n", rt->device_note);
	if (rt->default_model)
		fprintf(stderr, "allm-run: no --model given: using the embedded default model "
				"(random weights: its text is noise; try --model ../shared/models/stories260K)\n");
	fprintf(stderr, "allm-run: %s %s, %d layers, %s weights, on %s (loaded in %.2f s)\n",
		rt->model_desc, allm_arch_name(c->arch), c->n_layers, allm_dtype_name(rt->model->wdtype),
		rt->be->iface->describe(rt->be), rt->load_seconds);

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
	if (n_prompt >= c->max_pos) {
		fprintf(stderr, "allm-run: the prompt has %d tokens but the model's context is %d "
				"(max_position_embeddings)\n", n_prompt, c->max_pos);
		goto out;
	}
	if (allm_seq_init(&seq, 1, prompt, n_prompt))
		goto out;

	struct gen_result g;
	FILE *stream = (!a.ids && !a.json && !a.bench && rt->tok) ? stdout : NULL;
	if (a.bench) {
		/* warm-up: first touches of scratch and weights are not the steady state */
		struct run_args w = a;
		w.max_tokens = 2;
		struct allm_seq ws;
		if (allm_seq_init(&ws, 2, prompt, n_prompt) == 0) {
			generate(rt, &ws, &w, NULL, &g, &err);
			allm_seq_fini(&ws, rt->kv);
		}
	}
	if ((r = generate(rt, &seq, &a, stream, &g, &err))) {
		fprintf(stderr, "\nallm-run: %s\n", err.msg);
		goto out;
	}
	if (stream) {
		fputc('\n', stream);
		fflush(stream);
	}
	if (a.json) {
		if (emit_json(rt, &seq, &g))
			goto out;
	} else if (a.ids) {
		print_ids(stdout, "prompt", seq.tokens, seq.n_prompt);
		print_ids(stdout, "generated", seq.tokens + seq.n_prompt, seq.n_tokens - seq.n_prompt);
		char *text = decode_text(rt, seq.tokens + seq.n_prompt, seq.n_tokens - seq.n_prompt);
		if (text)
			printf("text: %s\n", text);
		allm_free(text);
	}
	if (a.bench) {
		FILE *bo = a.json ? stderr : stdout;
		fprintf(bo, "bench: prefill %d tokens in %.2f ms = %.1f tok/s | decode %d tokens in "
			    "%.2f ms = %.1f tok/s | %s\n",
			seq.n_prompt, g.prefill_s * 1e3, seq.n_prompt / g.prefill_s, g.n_decode_steps,
			g.decode_s * 1e3, g.n_decode_steps ? g.n_decode_steps / g.decode_s : 0.0,
			rt->be->iface->describe(rt->be));
	} else if (!a.json) {
		fprintf(stderr, "allm-run: %d prompt + %d generated tokens (%s); prefill %.1f tok/s, "
				"decode %.1f tok/s\n",
			seq.n_prompt, g.n_generated, g.finish, seq.n_prompt / g.prefill_s,
			g.n_decode_steps ? g.n_decode_steps / g.decode_s : 0.0);
	}
	rc = 0;
out:
	allm_seq_fini(&seq, rt ? rt->kv : NULL);
	allm_free(prompt);
	allm_runtime_close(rt);
	return rc;
}
