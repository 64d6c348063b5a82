/* Turning a row of logits into a token: greedy, temperature, top-k, top-p, min-p, with a
 * per-request seeded RNG so a (seed, prompt) pair always gives the same output. */
#ifndef ALLM_SAMPLER_H
#define ALLM_SAMPLER_H

#include "common.h"

#include <adaptivellm/params.h>

struct allm_grammar_matcher;

/* A request's parameters are struct allm_params (include/adaptivellm/params.h):
 * its table holds every range; the sampler applies them. Penalties on tokens
 * already there come first, as vLLM and the OpenAI API define them: repetition
 * divides a positive logit and multiplies a negative one of every token in the
 * prompt or the output; frequency subtracts its value times the token's count in
 * the output, presence its value once for a token in the output. Then the logit
 * bias, then (while min_tokens is not reached) the stop tokens are masked out.
 * logprobs (1 + k) reports the model's own distribution (the raw row: before
 * penalties and temperature, as vLLM). */

#define ALLM_SAMPLER_LOGPROBS_MAX ALLM_LOGPROBS_MAX

/* One token's log-probabilities (allm_sampler_logprobs). */
struct allm_token_logprobs {
	int32_t id;
	float logprob;
	int32_t n_top;
	int32_t top_id[ALLM_SAMPLER_LOGPROBS_MAX];
	float top_logprob[ALLM_SAMPLER_LOGPROBS_MAX];
};

struct allm_sampler {
	struct allm_params p; /* the request's (its own copy) */
	/* the stop tokens are masked out (min_tokens not reached yet); the engine
	 * clears it once they were generated */
	bool mask_stops;
	int32_t n_bias;
	struct allm_rng rng; /* from seed */
	int32_t vocab;
	float *probs; /* [vocab] scratch */
	int32_t *idx; /* [vocab] scratch */
	uint32_t *sort_buf; /* [3 * vocab] the radix sort's, made at the first top-p/top-k row */
	double *ck; /* [vocab / 64 + 2] checkpoints of the running sum of a draw */
	int32_t *count; /* [vocab] zero between calls: allm_sampler_penalize's */
	float *raw; /* [vocab] the row before penalties and bias, with logprobs and either */
	struct allm_logit_bias *bias; /* [n_bias] the request's logit bias, its own copy */
	/* the request's grammar (owned; NULL: none): allm_sampler_sample_grammar */
	struct allm_grammar_matcher *grammar;
	int64_t n_grammar_masked; /* tokens whose first draw the grammar refused */
	int32_t n_grammar_drawn; /* tokens allm_sampler_sample_grammar gave */
};

/* Gives s a grammar (s owns m from here: allm_sampler_fini frees it). */
void allm_sampler_set_grammar(struct allm_sampler *s, struct allm_grammar_matcher *m);
/* Picks the next token of a request with a grammar from its processed row (after
 * penalties, bias and stop masks) and advances the grammar past it: the token is
 * drawn as allm_sampler_sample does; if the grammar refuses it, the row is
 * masked to what the grammar allows and drawn again. For plain temperature
 * sampling the result is exactly the masked distribution (p(t) + p(refused) p(t)
 * / p(allowed) = p(t) / p(allowed)) and greedy is the masked argmax, while a
 * token the grammar allows is the very id an unconstrained request would get;
 * with top-k/top-p the cut is made on the unmasked row first (as llama.cpp's
 * sampler does). A draw after which the grammar could not end within the
 * tokens max_tokens leaves (one a byte at worst) counts as refused, and the
 * mask then keeps only tokens that can (allm_grammar_matcher_apply_within): a
 * structured answer is whole when max_tokens allows it at all, as a length cut
 * would otherwise leave it broken. Without a grammar: allm_sampler_sample. */
int32_t allm_sampler_sample_grammar(struct allm_sampler *s, float *logits);

/* Whether p asks for any penalty. */
bool allm_params_penalized(const struct allm_params *p);
/* Whether s changes the row before sampling: penalties, a logit bias, stop
 * tokens masked, or a grammar. */
bool allm_sampler_processed(const struct allm_sampler *s);
/* Adds the request's logit bias to its row (after allm_sampler_penalize). */
void allm_sampler_apply_bias(const struct allm_sampler *s, float *logits);
/* Makes ids[0..n) (the stop tokens, while min_tokens is not reached) impossible. */
void allm_sampler_mask(const struct allm_sampler *s, float *logits, const int32_t *ids, int32_t n);
/* The log-probabilities a request with logprobs > 0 reports for token id of its
 * raw row[vocab] (natural logs, log-softmax in double precision; the top ones
 * best first, lower id first on a tie). */
void allm_sampler_logprobs(const struct allm_sampler *s, const float *row, int32_t id,
			   struct allm_token_logprobs *out);

/* A sampler for one request: p (checked: allm_params_check) and its n_bias
 * logit bias entries (checked, ids in the vocabulary) are copied. 0 or -ENOMEM. */
int allm_sampler_init(struct allm_sampler *s, const struct allm_params *p, const struct allm_logit_bias *bias,
		      int32_t n_bias, int32_t vocab);
void allm_sampler_fini(struct allm_sampler *s);
/* Applies the request's penalties (allm_params_penalized) to its row of
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
