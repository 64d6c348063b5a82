/* Description: a program built before params.h keeps working (issue 39's ABI target): through the symbols it bound to (allm_request_params_init, allm_client_submit, allm_client_wait at version ADAPTIVELLM_0, looked up with dlvsym as its loader would) and its struct allm_request_params (every parameter a field, "off" spelt 0 for top_p and the repetition penalty), a request gets exactly the ids and log-probabilities today's API gets; a bad old value is still refused.
 * Usage: abi-v0 ENGINE-NAME (run by daemon-abi-v0.sh against a real allm-engined) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <adaptivellm/client.h>

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
			printf(__VA_ARGS__);                                              \
			printf("\n");                                                     \
			fails++;                                                          \
		}                                                                         \
	} while (0)

/* struct allm_request_params of libadaptivellm.so.2 before params.h (main's
 * client.h, 144 bytes on LP64), as an old program has it compiled in. */
struct old_params {
	const char *prompt;
	size_t prompt_len;
	const int32_t *prompt_ids;
	size_t n_prompt_ids;
	int32_t max_tokens;
	float temperature;
	float top_p;
	int32_t top_k;
	uint64_t seed;
	bool ignore_eos;
	const int32_t *stop_ids;
	uint32_t n_stop;
	uint64_t user_tag;
	float repetition_penalty;
	float frequency_penalty;
	float presence_penalty;
	int32_t logprobs;
	int32_t min_tokens;
	const struct allm_logit_bias *logit_bias;
	uint32_t n_logit_bias;
	uint8_t cache_salt[16];
};

typedef void (*init_fn)(struct old_params *);
typedef int (*submit_fn)(allm_client_t *, const struct old_params *);
typedef int (*wait_fn)(allm_client_t *, struct allm_event *, int);

struct got {
	int32_t ids[64];
	float lp[64];
	int n, finish;
};

/* Events of one request until its FINAL, through wait (old or new). */
static int collect(allm_client_t *c, uint64_t tag, struct got *g, wait_fn old_wait)
{
	struct allm_event ev;
	memset(g, 0, sizeof(*g));
	for (;;) {
		int r = old_wait ? old_wait(c, &ev, 10000) : allm_client_wait(c, &ev, 10000);
		if (r != 1)
			return -1;
		if (ev.user_tag != tag)
			continue;
		if (ev.kind == ALLM_EVENT_TOKEN && ev.token_id >= 0 && g->n < 64) {
			g->lp[g->n] = ev.logprobs ? ev.logprobs->sampled.logprob : NAN;
			g->ids[g->n++] = ev.token_id;
		}
		if (ev.kind == ALLM_EVENT_FINAL) {
			g->finish = ev.finish_reason;
			return ev.status;
		}
	}
}

int main(int argc, char **argv)
{
	void *lib = dlopen("libadaptivellm.so.2", RTLD_NOW);
	if (!lib || argc < 2) {
		printf("FAIL: dlopen libadaptivellm.so.2: %s\n", lib ? "usage: abi-v0 ENGINE" : dlerror());
		return 1;
	}
	init_fn old_init = (init_fn)dlvsym(lib, "allm_request_params_init", "ADAPTIVELLM_0");
	submit_fn old_submit = (submit_fn)dlvsym(lib, "allm_client_submit", "ADAPTIVELLM_0");
	wait_fn old_wait = (wait_fn)dlvsym(lib, "allm_client_wait", "ADAPTIVELLM_0");
	void *new_submit = dlvsym(lib, "allm_client_submit", "ADAPTIVELLM_1");
	CHECK(old_init && old_submit && old_wait && dlvsym(lib, "allm_client_poll", "ADAPTIVELLM_0"),
	      "an ADAPTIVELLM_0 symbol is missing");
	CHECK(new_submit && new_submit != (void *)old_submit, "allm_client_submit@ADAPTIVELLM_1 is the old one");
	if (fails)
		return 1;

	struct allm_client_opts o = {.name = argv[1]};
	allm_client_t *c;
	char err[256];
	if (allm_client_connect(&o, &c, err, sizeof(err))) {
		printf("FAIL: connect: %s\n", err);
		return 1;
	}
	static const int32_t stop[1] = {9999};
	/* the old struct, as an old program fills it: "off" spelt 0 (top_p,
	 * repetition) where today's table has 1 */
	struct old_params op;
	old_init(&op);
	CHECK(op.max_tokens == 128 && op.temperature == 1.0f && op.top_p == 1.0f, "old defaults");
	op.prompt = "Once upon a";
	op.prompt_len = strlen(op.prompt);
	op.max_tokens = 24;
	op.temperature = 0.8f;
	op.seed = 42;
	op.top_p = 0;
	op.repetition_penalty = 0;
	op.presence_penalty = 0.5f;
	op.logprobs = 1 + 2;
	op.stop_ids = stop;
	op.n_stop = 1;
	op.user_tag = 1;
	struct got a, b;
	CHECK(old_submit(c, &op) == 0, "old submit");
	CHECK(collect(c, 1, &a, old_wait) == 0 && a.n > 0, "old request: %d tokens", a.n);

	/* the same request through today's API */
	struct allm_request_params p;
	allm_request_params_init(&p);
	p.prompt = op.prompt;
	p.prompt_len = op.prompt_len;
	p.params.max_tokens = 24;
	p.params.temperature = 0.8f;
	p.params.seed = 42;
	p.params.presence_penalty = 0.5f;
	p.params.logprobs = 1 + 2;
	p.params.stop_ids[0] = 9999;
	p.params.n_stop = 1;
	p.user_tag = 2;
	CHECK(allm_client_submit(c, &p) == 0, "new submit");
	CHECK(collect(c, 2, &b, NULL) == 0, "new request");
	CHECK(a.n == b.n && a.finish == b.finish && !memcmp(a.ids, b.ids, (size_t)a.n * sizeof(int32_t)) &&
		      !memcmp(a.lp, b.lp, (size_t)a.n * sizeof(float)),
	      "old and new: %d vs %d tokens, reasons %d %d", a.n, b.n, a.finish, b.finish);

	/* a bad old value is refused as before */
	op.presence_penalty = 3;
	CHECK(old_submit(c, &op) == -EINVAL, "old presence_penalty 3 accepted");
	op.presence_penalty = 0;
	op.n_stop = 5;
	CHECK(old_submit(c, &op) == -EINVAL, "old n_stop 5 accepted");
	allm_client_disconnect(c);
	if (fails)
		return 1;
	printf("a program of the old ABI (ADAPTIVELLM_0): %d tokens, the ids and log-probabilities of "
	       "today's API; bad values refused\n", a.n);
	return 0;
}
