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
	/* Penalties on tokens already there, applied to the logits before anything
	 * else, as vLLM and the OpenAI API define them: repetition (0 or 1 = off)
	 * divides a positive logit and multiplies a negative one of every token in
	 * the prompt or the output; frequency subtracts its value times the token's
	 * count in the output, presence its value once for a token in the output
	 * (0 = off, each in [-2, 2]). */
	float repetition_penalty, frequency_penalty, presence_penalty;
	/* 0: none; 1 + k: the sampled token's log-probability and the k most
	 * likely tokens' (k <= ALLM_SAMPLER_LOGPROBS_MAX), of the model's own
	 * distribution (the raw row: before penalties and temperature, as vLLM) */
	int32_t logprobs;
	/* logit_bias: bias[i].bias added to the logit of bias[i].id (after the
	 * penalties), each in [-100, 100], at most ALLM_SAMPLER_BIAS_MAX; copied
	 * by allm_sampler_init */
	const struct allm_token_bias *bias;
	int32_t n_bias;
	/* min_tokens: the stop tokens (EOS, stop ids) are masked out until this
	 * many were generated (allm_sampler_mask; vLLM's min_tokens); the engine
	 * sets it to 0 once they were */
	int32_t min_tokens;
};

struct allm_token_bias {
	int32_t id;
	float bias;
};

#define ALLM_SAMPLER_LOGPROBS_MAX 10
#define ALLM_SAMPLER_BIAS_MAX 300

/* One token's log-probabilities (allm_sampler_logprobs). */
struct allm_token_logprobs {
	int32_t id;
	float logprob;
	int32_t n_top;
	int32_t top_id[ALLM_SAMPLER_LOGPROBS_MAX];
	float top_logprob[ALLM_SAMPLER_LOGPROBS_MAX];
};

struct allm_sampler {
	struct allm_sampling p;
	struct allm_rng rng; /* from seed */
	int32_t vocab;
	float *probs; /* [vocab] scratch */
	int32_t *idx; /* [vocab] scratch */
	uint32_t *sort_buf; /* [3 * vocab] the radix sort's, made at the first top-p/top-k row */
	double *ck; /* [vocab / 64 + 2] checkpoints of the running sum of a draw */
	int32_t *count; /* [vocab] zero between calls: allm_sampler_penalize's */
	float *raw; /* [vocab] the row before penalties and bias, with logprobs and either */
	struct allm_token_bias *bias; /* p.bias's own copy (p.bias points here) */
};

/* Defaults: greedy, no top-k/top-p, seed 0, no penalties. */
void allm_sampling_default(struct allm_sampling *p);
/* -EINVAL with err for temperature < 0, top_k < 0, top_p outside (0, 1], a
 * repetition penalty < 0 or > 10, a frequency or presence penalty outside
 * [-2, 2] (or any of them not finite), logprobs outside 0..1 + 10, more than
 * ALLM_SAMPLER_BIAS_MAX biases, a negative id or a bias outside [-100, 100]
 * (ids past the vocabulary: the caller's check), min_tokens < 0. */
int allm_sampling_validate(const struct allm_sampling *p, struct allm_err *err);
/* Whether p asks for any penalty. */
bool allm_sampling_penalized(const struct allm_sampling *p);
/* Whether p changes the row before sampling: penalties or a logit bias. */
bool allm_sampling_processed(const struct allm_sampling *p);
/* Adds the request's logit bias to its row (after allm_sampler_penalize). */
void allm_sampler_apply_bias(const struct allm_sampler *s, float *logits);
/* Makes ids[0..n) (the stop tokens, while min_tokens is not reached) impossible. */
void allm_sampler_mask(const struct allm_sampler *s, float *logits, const int32_t *ids, int32_t n);
/* The log-probabilities a request with logprobs > 0 reports for token id of its
 * raw row[vocab] (natural logs, log-softmax in double precision; the top ones
 * best first, lower id first on a tie). */
void allm_sampler_logprobs(const struct allm_sampler *s, const float *row, int32_t id,
			   struct allm_token_logprobs *out);

int allm_sampler_init(struct allm_sampler *s, const struct allm_sampling *p, int32_t vocab);
void allm_sampler_fini(struct allm_sampler *s);
/* Applies the request's penalties (allm_sampling_penalized) to its row of
 * logits[vocab] in place: tokens[0..n_tokens) is the sequence so far, the
 * prompt being its first n_prompt. Before allm_sampler_sample. */
void allm_sampler_penalize(struct allm_sampler *s, float *logits, const int32_t *tokens, int32_t n_prompt,
			   int32_t n_tokens);
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
/* A request with penalties, a logit bias, min_tokens or logprobs needs its whole
 * row: ALLM_SAMPLE_FULL. */
enum allm_sample_need allm_sampler_need(const struct allm_sampler *s);
/* Samples an ALLM_SAMPLE_TOPK request from its candidates: vals[top_k] sorted
 * descending (equal values by ascending id), ids[top_k]; draws from s's RNG. */
int32_t allm_sampler_sample_topk(struct allm_sampler *s, const float *vals, const int32_t *ids);
/* Greedy pick alone (no state). */
int32_t allm_argmax(const float *logits, int32_t n);

#endif
