/* Description: the engine's device-sampling path (argmax and top-k on the
 * backend, the request's sampler finishing top-k on the host, full rows only
 * for other settings) gives exactly the tokens of the host path, for greedy,
 * top-k (+ top-p, temperature, seeds), full-row, penalized, biased and logprobs
 * requests in one batch.
 * Usage: test-device-sampling cpu|cuda (77 without a GPU for cuda). */
#include "gpu-harness.h"

static void fill_requests(struct gh_req *r, int n, int32_t vocab)
{
	static const struct allm_logit_bias tb[2] = {{3, 2.5f}, {17, -1.0f}};
	/* each setting over greedy defaults (0 below: the default) */
	static const struct {
		float temperature, top_p;
		int32_t top_k;
		uint64_t seed;
		float repetition_penalty, frequency_penalty, presence_penalty;
		bool bias;
		int32_t logprobs;
	} sp[] = {
		{.temperature = 0.0f}, /* greedy */
		{.temperature = 0.8f, .top_k = 5, .seed = 7}, /* top-k */
		{.temperature = 1.2f, .top_k = 40, .top_p = 0.9f, .seed = 3}, /* top-k + top-p */
		{.temperature = 1.0f, .top_k = 256, .seed = 11}, /* the largest device top-k */
		{.temperature = 0.7f, .top_p = 0.95f, .seed = 5}, /* top-p only: full row */
		{.temperature = 1.0f, .top_k = 600, .seed = 9}, /* top_k >= vocab: full row */
		{.temperature = 0.9f, .top_k = 1, .seed = 2}, /* top_k 1: greedy */
		/* penalties: full rows, penalized on the host */
		{.temperature = 0.0f, .repetition_penalty = 1.3f},
		{.temperature = 0.8f, .top_k = 5, .seed = 4, .frequency_penalty = 0.5f, .presence_penalty = 0.3f},
		/* a logit bias, and logprobs: full rows too */
		{.temperature = 0.0f, .bias = true},
		{.temperature = 0.9f, .top_k = 8, .seed = 6, .logprobs = 4},
	};
	memset(r, 0, (size_t)n * sizeof(*r));
	for (int i = 0; i < n; i++) {
		gh_prompt(&r[i], 3 + 5 * i % 17, (uint64_t)i + 100, vocab);
		struct allm_params *p = &r[i].sp;
		size_t k = (size_t)i % ALLM_ARRAY_SIZE(sp);
		gh_params(p, 24);
		p->temperature = sp[k].temperature;
		p->top_k = sp[k].top_k;
		p->seed = sp[k].seed;
		p->logprobs = sp[k].logprobs;
		if (sp[k].top_p)
			p->top_p = sp[k].top_p;
		if (sp[k].repetition_penalty)
			p->repetition_penalty = sp[k].repetition_penalty;
		p->frequency_penalty = sp[k].frequency_penalty;
		p->presence_penalty = sp[k].presence_penalty;
		if (sp[k].bias)
			r[i].bias = tb, r[i].n_bias = 2;
	}
}

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "cpu";
	allm_backend_t *be = gh_backend(which);
	struct allm_err err = {{0}};
	struct allm_model_config cfg;
	struct allm_model *m = NULL;
	struct allm_model_load_opts lo = {.wdtype = ALLM_DTYPE_F32};
	enum { N = 14 };
	struct gh_req host[N], dev[N];

	if (allm_model_config_preset("tiny", &cfg, &err) ||
	    allm_model_dummy(be, &cfg, 4321, &lo, &m, &err)) {
		fprintf(stderr, "model: %s\n", err.msg);
		return 1;
	}
	for (int pass = 0; pass < 2; pass++) {
		struct gh_req *r = pass ? dev : host;
		struct gh_engine g;
		fill_requests(r, N, cfg.vocab_size);
		if (gh_engine_open(&g, m, ALLM_DTYPE_F32, 64, r))
			return 1;
		CHECK(allm_executor_set_device_sampling(g.e->ex, pass == 1) == 0,
		      "%s lacks argmax/topk", which);
		CHECK(gh_run(&g, r, 0, N) == 0, "engine did not finish");
		gh_engine_close(&g);
	}
	for (int i = 0; i < N; i++) {
		CHECK(host[i].done && dev[i].done && host[i].finish == ALLM_END_LENGTH &&
			      dev[i].finish == ALLM_END_LENGTH,
		      "request %d: finish %d/%d (%s)", i, host[i].finish, dev[i].finish, dev[i].error);
		CHECK(host[i].n_out == dev[i].n_out &&
			      !memcmp(host[i].out, dev[i].out, (size_t)host[i].n_out * sizeof(int32_t)),
		      "request %d (T=%.1f top_k=%d top_p=%.2f): device path tokens differ", i,
		      host[i].sp.temperature, host[i].sp.top_k, host[i].sp.top_p);
	}
	printf("%s: %d requests, host and device sampling %s\n", which, N,
	       n_fail ? "DIFFER" : "identical");
	allm_model_free(m);
	allm_backend_destroy(be);
	return n_fail ? 1 : 0;
}
