/* Benchmark workloads: synthetic traces standing in for the paper's prompt sets
 * (shared/workloads/README.md) and JSONL prompt files, with their arrival times.
 *
 * Synthetic generator (deterministic per seed; the definition is part of the
 * contract, so that a (name, n, seed, max_output, max_context, vocab) tuple names one
 * trace on every machine):
 *   PRNG       xoshiro256** seeded by four splitmix64 outputs. Separate streams so
 *              that one choice does not shift another:
 *                lengths   seed  ^ 0x6c656e677468735f ("lengths_")
 *                outputs   seed  ^ 0x6f7574707574735f ("outputs_")
 *                arrivals  seed  ^ 0x6172726976616c73 ("arrivals")
 *                ids of request i: seed ^ 0x70726f6d70745f69 ("prompt_i") ^ i*0x9e3779b97f4a7c15
 *              (see the STREAM_* constants in workload.c). Because each request's
 *              ids come from their own stream, a clipped prompt is a prefix of the
 *              unclipped one and a different max_context never reshuffles others.
 *   uniform    u = (next() >> 11) * 2^-53, in [0, 1).
 *   normal     Box–Muller, one normal per two uniforms:
 *              z = sqrt(-2 ln(1 - u1)) * cos(2 pi u2).
 *   input len  L = round(exp(mu + sigma z)), mu = ln(mean) - sigma^2 / 2, so that
 *              E[exp(mu + sigma z)] = mean before clipping; then clamped to [1, 2048].
 *                chatbot  mean 17.02   sigma 0.6
 *                alpaca   mean 19.66   sigma 0.6
 *                summary  mean 340.48  sigma 0.9
 *   output len max_output, or with output_dist "uniform" 1 + floor(u * max_output)
 *              (U[1, max_output]).
 *   context    if input + output > max_context (when max_context > 0): the input
 *              shrinks first (to max_context - output, at least 1), then the output;
 *              each request so clipped counts once in n_clipped.
 *   ids        min_id + next() % (vocab_size - min_id) per token (the modulo bias is
 *              below 2^-40 for any real vocabulary).
 *   arrivals   rate 0: every request at 0. rate R: request 0 at 0, then gaps
 *              -ln(1 - u) / R (exponential, mean 1/R), i.e. a Poisson process.
 *
 * JSONL files: one object per line, {"prompt": "text"} or {"prompt_ids": [..]}, plus
 * optional "max_tokens" (default max_output) and "arrival_s" (seconds from the start,
 * non-decreasing). Blank lines are skipped. With rate > 0 the Poisson arrivals above
 * replace the file's; with rate 0 the file's arrival_s (default 0) are kept, so a file
 * written by allm_workload_write_jsonl replays exactly. Text prompts are kept as
 * prompt_text with n_prompt = 0 for the caller to tokenize (see
 * allm_workload_fit_context). */
#ifndef ALLM_WORKLOAD_H
#define ALLM_WORKLOAD_H

#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct allm_wl_request {
	int64_t index;       /* position in the workload, 0-based; the order outputs are hashed in */
	double arrival_s;    /* send time as an offset from the start of the run, seconds */
	int32_t *prompt_ids; /* allm_malloc'd, owned by the workload; NULL for untokenized text */
	int32_t n_prompt;    /* ids used (may be fewer than allocated after clipping) */
	char *prompt_text;   /* NULL unless the JSONL line had "prompt"; owned by the workload */
	int32_t max_tokens;  /* tokens to generate (EOS is the caller's business) */
};

struct allm_workload {
	struct allm_wl_request *reqs; /* n entries, in arrival order */
	int64_t n;                    /* requests; for a file, min(asked n, lines in the file) */
	int64_t n_clipped;            /* requests whose lengths were cut to fit max_context */
	char name[64];                /* "chatbot"/"alpaca"/"summary" or the file's base name */
};

struct allm_wl_opts {
	const char *name_or_file; /* chatbot | alpaca | summary | path to a .jsonl file */
	int64_t n;                /* synthetic: requests (>= 1); file: first n lines, 0 = all */
	int32_t max_output;       /* output length, and the default max_tokens of file lines */
	uint64_t seed;
	double rate;              /* 0 = all at t = 0, else Poisson requests/s */
	int32_t vocab_size;       /* ids are drawn from / validated against [min_id, vocab_size) */
	int32_t max_context;      /* max_position_embeddings; <= 0 disables context clipping */
	int32_t min_id;           /* lowest id to draw, e.g. 3 to skip <unk>,<s>,</s> */
	const char *output_dist;  /* NULL/"fixed" = max_output for all, "uniform" = U[1, max_output] */
};

/* Builds the workload named by o->name_or_file. On success *ret is owned by the
 * caller (allm_workload_free); on failure *ret is untouched and err says why.
 * Returns 0, -EINVAL (bad options, unknown name, malformed file line: the message
 * names file:line), -ENOENT/-EACCES (file), -ENOMEM. */
int allm_workload_create(const struct allm_wl_opts *o, struct allm_workload **ret,
			 struct allm_err *err);
void allm_workload_free(struct allm_workload *w);

/* Clips every tokenized request (n_prompt > 0) to input + output <= max_context with
 * the rule above and adds the newly clipped ones to w->n_clipped. Callers that
 * tokenize prompt_text themselves (storing allm_malloc'd ids in prompt_ids) call this
 * afterwards. Returns 0, or -EINVAL if max_context is 1 (nothing fits). */
int allm_workload_fit_context(struct allm_workload *w, int32_t max_context);

struct allm_model_config;
struct allm_tokenizer;

/* allm_workload_create for one model (workload-model.c): ids from its vocabulary
 * (skipping the first three control ids of a real one), JSONL text prompts encoded
 * by tok (NULL: they stay text, n_prompt 0, for the engine to encode), then clipped
 * to its context. Ownership and errors as allm_workload_create; a message names the
 * JSONL line. */
int allm_workload_for_model(const struct allm_wl_opts *o, const struct allm_model_config *c,
			    const struct allm_tokenizer *tok, struct allm_workload **ret,
			    struct allm_err *err);

/* Writes w as replayable JSONL: {"prompt_ids": [...], "max_tokens": N, "arrival_s": x}
 * per request ("prompt" instead of "prompt_ids" for untokenized text). Doubles are
 * written with 17 significant digits so they read back bit-exact. */
int allm_workload_write_jsonl(const struct allm_workload *w, const char *path,
			      struct allm_err *err);

#ifdef __cplusplus
}
#endif

#endif
