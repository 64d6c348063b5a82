/* allm-run's options, shared by its single-prompt and workload modes. */
#ifndef ALLM_RUN_H
#define ALLM_RUN_H

#include "runtime.h"
#include "sampler.h"
#include "grammar.h"

struct run_args {
	struct allm_engine_opts eng;
	const char *prompt; /* --prompt TEXT */
	const char *prompt_ids; /* --prompt-ids 1,2,3 */
	const char *workload; /* --workload NAME|FILE.jsonl */
	int64_t n_requests; /* -n */
	int32_t max_output; /* --max-output */
	double rate; /* --rate, 0 = all at t = 0 */
	const char *records; /* --records FILE: per-request JSONL */
	const char *decisions; /* --decisions FILE: every preemption decision, JSONL */
	bool probe_regret; /* --probe-regret: time each victim's other path too */
	const char *output_dist; /* --output-dist fixed|uniform */
	/* the request's parameters: the table's flags (params.h); a workload's own
	 * lengths replace max_tokens */
	struct allm_params params;
	struct allm_grammar_arg grammar; /* --grammar, --json-schema, --regex, --choice, --json-object */
	struct allm_grammar *compiled;   /* that grammar, compiled for the model's vocabulary */
	bool ids, json, bench;
};

/* Runs the offline workload mode; returns the exit status. */
int allm_run_workload(struct allm_runtime *rt, const struct run_args *a);

#endif
