/* The ABI programs built against libadaptivellm.so.2 before params.h use
 * (symbol version ADAPTIVELLM_0): their struct allm_request_params, with every
 * parameter a field of its own, and allm_client_poll / allm_client_wait as
 * functions. They keep working with this library: each old entry point turns
 * the old struct into today's and calls today's (version ADAPTIVELLM_1, which
 * programs built now bind to). Nothing here is in a header: no new program can
 * reach it. */
#include "client-internal.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* struct allm_request_params as client.h had it (soname 2, ADAPTIVELLM_0). */
struct allm_request_params_v0 {
	const char *prompt;
	size_t prompt_len;
	const int32_t *prompt_ids;
	size_t n_prompt_ids;
	int32_t max_tokens;
	float temperature;
	float top_p; /* 0 or 1: off */
	int32_t top_k;
	uint64_t seed;
	bool ignore_eos;
	const int32_t *stop_ids;
	uint32_t n_stop;
	uint64_t user_tag;
	float repetition_penalty; /* 0 or 1: off */
	float frequency_penalty;
	float presence_penalty;
	int32_t logprobs;
	int32_t min_tokens;
	const struct allm_logit_bias *logit_bias;
	uint32_t n_logit_bias;
	uint8_t cache_salt[ALLM_CACHE_SALT_BYTES];
};
/* Its layout on the ABI this library was built for (x86-64, aarch64: LP64). */
_Static_assert(sizeof(void *) != 8 || (sizeof(struct allm_request_params_v0) == 144 &&
					  offsetof(struct allm_request_params_v0, cache_salt) == 124),
	       "the old struct's layout (main's client.h)");
_Static_assert(offsetof(struct allm_event, all_logprobs) == ALLM_EVENT_SIZE_VER0, "old programs' events are VER0's");

#define OLD(fn, name) __asm__(".symver " #fn "," #name "@ADAPTIVELLM_0")

void allm_request_params_init_v0(struct allm_request_params_v0 *p);
int allm_client_submit_v0(allm_client_t *c, const struct allm_request_params_v0 *p);
int allm_client_poll_v0(allm_client_t *c, struct allm_event *ev);
int allm_client_wait_v0(allm_client_t *c, struct allm_event *ev, int timeout_ms);
OLD(allm_request_params_init_v0, allm_request_params_init);
OLD(allm_client_submit_v0, allm_client_submit);
OLD(allm_client_poll_v0, allm_client_poll);
OLD(allm_client_wait_v0, allm_client_wait);

void allm_request_params_init_v0(struct allm_request_params_v0 *p)
{
	memset(p, 0, sizeof(*p));
	p->max_tokens = 128;
	p->temperature = 1.0f;
	p->top_p = 1.0f;
}

int allm_client_submit_v0(allm_client_t *c, const struct allm_request_params_v0 *p)
{
	struct allm_request_params q;
	if (!p)
		return -EINVAL;
	allm_request_params_init(&q);
	q.prompt = p->prompt;
	q.prompt_len = p->prompt_len;
	q.prompt_ids = p->prompt_ids;
	q.n_prompt_ids = p->n_prompt_ids;
	q.user_tag = p->user_tag;
	q.logit_bias = p->logit_bias;
	q.n_logit_bias = p->n_logit_bias;
	if (p->n_stop > ALLM_PARAMS_MAX_STOP || (p->n_stop && !p->stop_ids))
		return -EINVAL;
	q.params.n_stop = p->n_stop;
	if (p->n_stop)
		memcpy(q.params.stop_ids, p->stop_ids, p->n_stop * sizeof(int32_t));
	memcpy(q.params.cache_salt, p->cache_salt, sizeof(q.params.cache_salt));
	q.params.seed = p->seed;
	q.params.max_tokens = p->max_tokens;
	q.params.temperature = p->temperature;
	/* the old spellings of "off" (0 too) are today's one */
	q.params.top_p = p->top_p == 0.0f ? 1.0f : p->top_p;
	q.params.top_k = p->top_k;
	q.params.ignore_eos = p->ignore_eos;
	q.params.repetition_penalty = p->repetition_penalty == 0.0f ? 1.0f : p->repetition_penalty;
	q.params.frequency_penalty = p->frequency_penalty;
	q.params.presence_penalty = p->presence_penalty;
	q.params.logprobs = p->logprobs;
	q.params.min_tokens = p->min_tokens;
	return allm_client_submit_v1(c, &q); /* the table's checks, as for everyone */
}

int allm_client_poll_v0(allm_client_t *c, struct allm_event *ev)
{
	return allm_client_poll_sized(c, ev, ALLM_EVENT_SIZE_VER0);
}

int allm_client_wait_v0(allm_client_t *c, struct allm_event *ev, int timeout_ms)
{
	return allm_client_wait_sized(c, ev, ALLM_EVENT_SIZE_VER0, timeout_ms);
}
