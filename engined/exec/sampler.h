/* Turning a row of logits into a token: greedy, temperature, top-k, top-p, with a
 * per-request seeded RNG so a (seed, prompt) pair always gives the same output. */
#ifndef ALLM_SAMPLER_H
#define ALLM_SAMPLER_H

#include "common.h"

struct allm_sampling {
	float temperature; /* 0 = greedy */
	int32_t top_k; /* 0 = off */
	float top_p; /* 1 = off */
	uint64_t seed;
};

struct allm_sampler {
	struct allm_sampling p;
	struct allm_rng rng; /* from seed */
	int32_t vocab;
	float *probs; /* [vocab] scratch */
	int32_t *idx; /* [vocab] scratch */
};

/* Defaults: greedy, no top-k/top-p, seed 0. */
void allm_sampling_default(struct allm_sampling *p);
/* -EINVAL with err for temperature < 0, top_k < 0, top_p outside (0, 1]. */
int allm_sampling_validate(const struct allm_sampling *p, struct allm_err *err);

int allm_sampler_init(struct allm_sampler *s, const struct allm_sampling *p, int32_t vocab);
void allm_sampler_fini(struct allm_sampler *s);
/* Picks a token from logits[vocab]. Greedy: the highest logit, lowest id on a tie.
 * Top-k within ALLM_TOPK_MAX (see allm_sampler_need): from the k best candidates
 * only, exactly as allm_sampler_sample_topk() does with the same candidates. */
int32_t allm_sampler_sample(struct allm_sampler *s, const float *logits);

/* What of a row of logits a request's next token depends on, so a backend can
 * reduce the row on the device instead of copying it out. */
enum allm_sample_need {
	ALLM_SAMPLE_ARGMAX, /* greedy (temperature 0 or top_k 1): the argmax */
	ALLM_SAMPLE_TOPK, /* 1 < top_k <= ALLM_TOPK_MAX, top_k < vocab: the top_k
			   * (value, id) candidates, value desc then id asc */
	ALLM_SAMPLE_FULL, /* anything else: the whole row */
};
enum allm_sample_need allm_sampler_need(const struct allm_sampler *s);
/* Samples an ALLM_SAMPLE_TOPK request from its candidates: vals[top_k] sorted
 * descending (equal values by ascending id), ids[top_k]; draws from s's RNG. */
int32_t allm_sampler_sample_topk(struct allm_sampler *s, const float *vals, const int32_t *ids);
/* Greedy pick alone (no state). */
int32_t allm_argmax(const float *logits, int32_t n);

#endif
