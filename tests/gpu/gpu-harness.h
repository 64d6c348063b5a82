/* Helpers the GPU test programs share: create the backend under test (exit 77
 * when it cannot exist here), and run a set of requests through a real engine
 * on a model and collect each one's generated ids and finish. Each test file
 * includes this once. */
#ifndef ALLM_TEST_GPU_HARNESS_H
#define ALLM_TEST_GPU_HARNESS_H

#include "engine-calib.h"
#include "engine-internal.h"
#include "engine.h"
#include "executor.h"
#include "model.h"
#include "../test-check.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether a failure to create the CUDA backend means "nothing to test here" (no
 * driver or device: -ENODEV; a build without the module: -ENOSYS) rather than a
 * failure: with a GPU present, a module that does not load or start fails. */
static inline bool gh_cuda_absent(int r)
{
	return r == -ENODEV || r == -ENOSYS;
}

/* "cpu", "cpu-ref" or "cuda"; exits 77 when no GPU is here, 1 when one is but the
 * CUDA backend cannot be made. */
static inline allm_backend_t *gh_backend(const char *which)
{
	struct allm_err err = {{0}};
	static struct allm_backend_env env; /* the program's switches (ALLM_CUDA_MODULE...) */
	allm_backend_env_read(&env);
	struct allm_backend_opts o = {.n_threads = 2, .reference = !strcmp(which, "cpu-ref"),
				      .env = &env};
	allm_backend_t *be = NULL;
	int r = !strncmp(which, "cpu", 3) ? allm_backend_cpu_create(&o, &be, &err)
					  : allm_backend_create(which, &o, &be, NULL, 0, &err);
	if (r) {
		if (!strcmp(which, "cuda") && gh_cuda_absent(r)) {
			printf("SKIP: %s\n", err.msg);
			exit(77);
		}
		fprintf(stderr, "FAIL: backend %s: %s\n", which, err.msg);
		exit(1);
	}
	return be;
}

/* Greedy parameters generating max_tokens. */
static inline void gh_params(struct allm_params *p, int32_t max_tokens)
{
	allm_params_init(p);
	p->temperature = 0;
	p->max_tokens = max_tokens;
}

struct gh_req {
	int32_t prompt[64];
	int32_t n_prompt;
	struct allm_params sp; /* its parameters (gh_params: greedy), max_tokens among them */
	const struct allm_logit_bias *bias;
	int32_t n_bias;
	/* results */
	int32_t out[256];
	int32_t n_out;
	enum allm_end finish;
	char error[160];
	bool done;
};

static inline void gh_on_token(void *user, const struct allm_token_out *t)
{
	struct gh_req *q = (struct gh_req *)user + t->tag;
	if (q->n_out < 256)
		q->out[q->n_out++] = t->token;
}

static inline void gh_on_finish(void *user, const struct allm_result *r)
{
	struct gh_req *q = (struct gh_req *)user + r->tag;
	q->done = true;
	q->finish = r->end;
	snprintf(q->error, sizeof(q->error), "%s", r->error);
}

/* A running engine over its own KV cache (n_blocks device blocks, 8 host). */
struct gh_engine {
	struct allm_kv_cache *kv;
	struct allm_predictor *pred;
	struct allm_engine *e;
};

static inline int gh_engine_open(struct gh_engine *g, struct allm_model *m, enum allm_dtype kv_dt,
			  int32_t n_blocks, struct gh_req *reqs)
{
	struct allm_err err = {{0}};
	const struct allm_model_config *c = &m->cfg;
	struct allm_kv_layout lay = {c->n_layers, c->n_kv_heads, c->head_dim, 16, kv_dt};
	struct allm_predictor_key key;
	memset(g, 0, sizeof(*g));
	if (allm_kv_cache_create(m->be, &lay, n_blocks, 8, &g->kv, &err))
		goto fail;
	allm_engine_predictor_key(m, g->kv, &key);
	if (allm_predictor_create(&key, &g->pred)) {
		snprintf(err.msg, sizeof(err.msg), "predictor");
		goto fail;
	}
	struct allm_engine_config ec = {.max_num_seqs = 16, .max_num_batched_tokens = 1024};
	struct allm_engine_events ev = {.user = reqs, .on_token = gh_on_token,
					.on_finish = gh_on_finish};
	if (allm_engine_create(m, g->kv, g->pred, &ec, &ev, &g->e, &err))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "engine: %s\n", err.msg);
	return -1;
}

static inline void gh_engine_close(struct gh_engine *g)
{
	allm_engine_free(g->e);
	allm_predictor_free(g->pred);
	allm_kv_cache_free(g->kv);
}

/* Submits reqs[first..first+n) (tags = indices) and steps until idle. */
static inline int gh_run(struct gh_engine *g, struct gh_req *reqs, int first, int n)
{
	struct allm_err err = {{0}};
	for (int i = first; i < first + n; i++) {
		struct allm_submit s = {.prompt = reqs[i].prompt, .n_prompt = reqs[i].n_prompt,
					.params = reqs[i].sp, .bias = reqs[i].bias, .n_bias = reqs[i].n_bias,
					.tag = (uint64_t)i};
		s.params.ignore_eos = 1;
		reqs[i].n_out = 0;
		reqs[i].done = false;
		int64_t id;
		if (allm_engine_submit(g->e, &s, &id, &err)) {
			fprintf(stderr, "submit: %s\n", err.msg);
			return -1;
		}
	}
	for (int steps = 0; !allm_engine_idle(g->e) && steps < 10000; steps++)
		allm_engine_step(g->e, &err); /* a failed step fails its requests; go on */
	return allm_engine_idle(g->e) ? 0 : -1;
}

static inline void gh_prompt(struct gh_req *q, int32_t n, uint64_t seed, int32_t vocab)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	for (int32_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		q->prompt[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
	}
	q->n_prompt = n;
}

#endif
