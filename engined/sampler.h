/* Turning a row of logits into a token: greedy, temperature, top-k, top-p, with a
 * per-request seeded RNG so a (seed, prompt) pair always gives the same output. */
#ifndef ALLM_SAMPLER_H
#define ALLM_SAMPLER_H

#include "util.h"

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
/* Picks a token from logits[vocab]. Greedy: the highest logit, lowest id on a tie. */
int32_t allm_sampler_sample(struct allm_sampler *s, const float *logits);
/* Greedy pick alone (no state). */
int32_t allm_argmax(const float *logits, int32_t n);

#endif
