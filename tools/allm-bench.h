/* allm-bench: the online serving benchmark (DESIGN §12), like vLLM's
 * benchmark_serving but through libadaptivellm's shared-memory rings.
 *
 *   allm-bench.c         flags, the modes (one run, --compare, --ping), exit codes
 *   allm-bench-spawn.c   a private allm-engined per run: find, start, wait, stop
 *   allm-bench-run.c     the client loop: workload, arrivals, concurrency cap, events
 *   allm-bench-report.c  summary JSON (shared metrics.c), records JSONL, tables
 *   allm-bench-ctl.c     the control plane: reset-stats before, status after a run
 *
 * Numbers are computed by engined/workload/metrics.c and hashed by engined/workload/sha256.c exactly as
 * allm-run --workload does, so equal workloads give equal outputs_sha256. */
#ifndef ALLM_BENCH_H
#define ALLM_BENCH_H

#include "metrics.h"
#include <adaptivellm/params.h>
#include "workload.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Engine flags passed through to a spawned allm-engined: at most this many words. */
#define BENCH_MAX_ENG_ARGS 64
/* --compare values at most. */
#define BENCH_MAX_COMPARE 32

struct bench_opts {
	const char *name;        /* --name: use this running engine (no spawn) */
	bool spawn;              /* --model or --dummy given: start our own engines */
	const char *model_dir;   /* --model (also read here for vocab and context) */
	const char *dummy;       /* --dummy PRESET */
	const char *eng_args[BENCH_MAX_ENG_ARGS]; /* validated engine flags and values */
	int n_eng_args;
	double start_timeout_s;  /* --start-timeout: load + calibration limit per engine */

	const char *workload;    /* chatbot | alpaca | summary | FILE.jsonl */
	int64_t n;               /* -n */
	int32_t max_output;      /* --max-output */
	double rate;             /* --rate, 0 = all at t = 0 */
	int64_t concurrency;     /* --concurrency, 0 = no cap */
	const char *output_dist; /* --output-dist fixed|uniform */
	/* the requests' parameters (the table's flags, params.h; temperature 0 by
	 * default): params.seed also seeds the workload, request i samples with
	 * seed + i, and the workload's lengths replace max_tokens */
	struct allm_params params;

	bool json;               /* stdout holds only the summary JSON */
	bool quiet;              /* --no-progress: no progress bar */
	const char *records;     /* --records FILE (with --compare: FILE.VALUE.jsonl each) */
	const char *compare_key; /* --compare KEY=V1,V2,...: the key (snake_case) ... */
	char *compare_vals[BENCH_MAX_COMPARE]; /* ... its values (point into a strdup) */
	int n_compare;
	long ping;               /* --ping N: ring vs UDS round trips, no benchmark */
};

/* --- spawn: one private allm-engined (allm-bench-spawn.c) ------------------------ */

struct bench_engine {
	pid_t pid;               /* > 0 while running */
	char dir[256];           /* private runtime dir (mode 0700), removed on stop */
	char name[64];           /* engine name: unique per process and run */
	char log[300];           /* its stderr, kept in dir; tail shown on failure */
};

/* Starts allm-engined (beside this program, else on PATH) with o's engine flags
 * plus extra (NULL-terminated flag/value words, e.g. {"--preempt", "swap", NULL},
 * which override o's), in a new private runtime dir, and waits until it accepts
 * connections, drawing its load/calibration progress on stderr. On failure prints
 * why (with the tail of the engine's log), leaves nothing behind and returns -1. */
int bench_engine_start(const struct bench_opts *o, const char *const *extra, int idx,
		       struct bench_engine *e);
/* SIGTERM, waits for exit (SIGKILL after a grace period), removes the runtime dir.
 * Returns 0 if the engine exited 0, else -1 (and says so). Accepts a stopped one. */
int bench_engine_stop(struct bench_engine *e);

/* Set by SIGINT/SIGTERM/SIGHUP; every wait loop checks it and unwinds. */
extern volatile sig_atomic_t bench_interrupted;
/* Installs the handlers; they also forward SIGTERM to the engine being run. */
void bench_signals_install(void);

/* --- run: one benchmark against one engine (allm-bench-run.c) -------------------- */

/* One finished run: per-request records (times relative to the first send), the
 * generated ids they borrow, and what the control plane reported. */
struct bench_result {
	struct allm_req_record *recs; /* n, by workload index */
	int32_t **gen;                /* generated ids per request */
	uint32_t *n_preempt;          /* per request, from its FINAL (kinds not split) */
	uint64_t *engine_us;          /* per request: queue, ttft, total (3 each), FINAL */
	double *last_token_s;         /* per request: when its latest token arrived */
	double *itl;                  /* inter-token gaps (s) of every request, n_itl */
	int64_t n_itl, cap_itl;
	struct allm_pctl itl_ms;      /* their percentiles (ms): NAN on a simulated engine */
	double itl_max_ms;            /* the longest gap: what chunked prefill halves */
	int64_t n;
	double duration_s;
	int64_t n_failed;             /* FINALs with finish_reason error */
	struct allm_run_summary sum;
	json_t *status;               /* the engine's `status` after the run, or NULL */
	char model[128];              /* the engine's model (welcome message) */
};

/* Connects to engine `name` in runtime_dir (NULL: the default dir), builds the
 * workload, resets the engine's stats, sends every request, collects every event,
 * asks for its status. Returns 0 or -1 (said why on stderr). */
int bench_run(const struct bench_opts *o, const char *runtime_dir, const char *name,
	      struct bench_result *ret);
void bench_result_free(struct bench_result *r);
/* Whether an engine's `status` names a simulated device (`sim:PROFILE`): its run's
 * times are then the engine's virtual clock's, from the FINAL events. */
bool bench_simulated(const json_t *status);

/* --- ctl: the engine's control plane (allm-bench-ctl.c) ------------------------- */

/* `reset-stats`: counts in the later `status` cover only this run. 0 or -errno. */
int bench_ctl_reset_stats(const char *runtime_dir, const char *name, char *err, size_t errlen);
/* `status` as a JSON object (new reference in *ret), for the preemption counts by
 * kind and predictor_mape. 0 or -errno. */
int bench_ctl_status(const char *runtime_dir, const char *name, json_t **ret, char *err,
		     size_t errlen);

/* --- report (allm-bench-report.c) ------------------------------------------------- */

/* The DESIGN §12 summary of r (+ model, policy, blocks from the engine's status,
 * preemptions.total). New reference; NULL on allocation failure. */
json_t *bench_summary_json(const struct bench_result *r);
/* Writes one JSON line per request to path. 0 or -1 (said why). */
int bench_write_records(const struct bench_result *r, const char *path);
/* One human-readable summary block on f. */
void bench_print_summary(FILE *f, const struct bench_opts *o, const struct bench_result *r);
/* The --compare table: one row per run of the {"runs": [...]} object. */
void bench_print_compare(FILE *f, const char *key, json_t *runs);

#endif
