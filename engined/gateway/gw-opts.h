/* allm-gateway's flags: one table, GW_FLAGS_TABLE, as the engine's settings are
 * one table (include/adaptivellm/settings.h). It generates the option parser, the
 * defaults and --help (gw-opts.c); tests/test-gw-opts.c checks them against it.
 *
 * Adding a flag: add its field to struct gw_opts, append its row, use the field.
 *
 * Columns:
 *   ID       the row's name (GW_FLAG_<ID>)
 *   FIELD    the field of struct gw_opts it sets
 *   FLAG     the command-line flag
 *   TYPE     INT (an int), I32 (an int32_t), SIZE (a size_t), SECS (whole seconds in
 *            a double): a decimal integer in [LO, HI];
 *            STR (a string, any), TEXT (a non-empty string, at most HI bytes when
 *            HI > 0), NAME (a TEXT without '/'); ON (a flag without a value: true);
 *            KEY (an API key, added to the users' keys), KEYFILE (a file of keys, one
 *            a line), ONEKEY (a file holding one key), LOG (error|warn|info|debug)
 *   LO, HI   the range (numbers) or the longest text (TEXT, NAME; 0: no limit)
 *   DEF      the default as it would be typed after the flag (parsed by the same
 *            code); NULL: none, or one the help explains
 *   METAVAR  what follows the flag in --help ("" for ON)
 *   HELP     the help's lines, each ending with \n; --help adds "(default DEF)"
 *
 * The environment ($ALLM_API_KEY, $ALLM_METRICS_API_KEY, $ALLM_ADMIN_API_KEY and the
 * test hook $ALLM_GW_TEST_PUMP_BUSY) is read by the program, tools/allm-gateway.c, once, and
 * handed to gw_opts_parse in struct gw_env. */
#ifndef ALLM_GW_OPTS_H
#define ALLM_GW_OPTS_H

#include "common.h"
#include "gw-cors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* API keys at most (--api-key, --api-key-file), and a key's longest line. */
#define GW_MAX_API_KEYS 1024
#define GW_API_KEY_MAX_LEN 512

/* clang-format off */
#define GW_FLAGS_TABLE(X) \
/* X(ID, FIELD, FLAG, TYPE, LO, HI, DEF, METAVAR, HELP) */ \
X(engine, engine, "--engine", NAME, 0, 64, "default", "NAME", \
  "the engine's --name\n") \
X(runtime_dir, runtime_dir, "--runtime-dir", STR, 0, 0, NULL, "DIR", \
  "where the engine's sockets are (default as allm-engined)\n") \
X(host, host, "--host", TEXT, 0, 0, "127.0.0.1", "ADDR", \
  "address to listen on\n") \
X(port, port, "--port", INT, 0, 65535, "8000", "N", \
  "port (0: any free port, logged)\n") \
X(api_key, api_keys, "--api-key", KEY, 0, 0, NULL, "KEY", \
  "require \"Authorization: Bearer KEY\" on /v1/* (or set\n" \
  "$ALLM_API_KEY); repeatable: each key is one user\n") \
X(api_key_file, api_keys, "--api-key-file", KEYFILE, 0, 0, NULL, "FILE", \
  "more keys, one a line (# comments and blank lines skipped)\n") \
X(metrics_api_key, metrics_api_key, "--metrics-api-key", TEXT, 0, 0, NULL, "KEY", \
  "GET /metrics needs \"Authorization: Bearer KEY\"; also\n" \
  "--metrics-api-key-file FILE, $ALLM_METRICS_API_KEY (argv is\n" \
  "readable by every local user: prefer those). Without it,\n" \
  "/metrics is open when no key is set at all, and needs the\n" \
  "admin key when API or admin keys are set\n") \
X(metrics_api_key_file, metrics_api_key, "--metrics-api-key-file", ONEKEY, 0, 0, NULL, "FILE", \
  "the metrics key from FILE (its one key line)\n") \
X(metrics_open, metrics_open, "--metrics-open", ON, 0, 0, NULL, "", \
  "GET /metrics open to anyone even with keys set (logged)\n") \
X(admin_api_key, admin_api_key, "--admin-api-key", TEXT, 0, 0, NULL, "KEY", \
  "POST /reset_prefix_cache (drop every cached KV block no\n" \
  "request holds) with \"Authorization: Bearer KEY\" (default: no\n" \
  "such route: one user must not empty everyone's cache); also\n" \
  "--admin-api-key-file FILE, $ALLM_ADMIN_API_KEY\n") \
X(admin_api_key_file, admin_api_key, "--admin-api-key-file", ONEKEY, 0, 0, NULL, "FILE", \
  "the admin key from FILE (its one key line)\n") \
X(max_queued_per_user, max_queued_per_user, "--max-queued-per-user", INT, 1, 1 << 24, "4096", "N", \
  "choices (prompts x n) one user may have waiting or running;\n" \
  "more get 429. A user is an API key when there are several,\n" \
  "else the client's address\n") \
X(max_inflight, max_inflight, "--max-inflight", INT, 1, 1 << 24, NULL, "N", \
  "choices of all users on the engine at once; the rest wait\n" \
  "here, where the user with the fewest on the engine goes\n" \
  "next (default: the engine's --max-num-seqs, from its status)\n") \
X(max_inflight_per_user, max_inflight_per_user, "--max-inflight-per-user", INT, 1, 1 << 24, NULL, "N", \
  "... of one user (default: 7/8 of --max-inflight, so that\n" \
  "another user's request starts at once)\n") \
X(engine_timeout, engine_timeout_s, "--engine-timeout", SECS, 1, 86400, "10", "S", \
  "/health answers 503 when the engine has said nothing for S\n" \
  "seconds (it is probed when idle)\n") \
X(max_connections, max_connections, "--max-connections", INT, 1, 1 << 20, "512", "N", \
  "open HTTP connections at most\n") \
X(max_connections_per_address, max_conns_per_addr, "--max-connections-per-address", INT, 1, 1 << 20, NULL, "N", \
  "... from one client address (default: half of\n" \
  "--max-connections; more are closed at once)\n") \
X(timeout, timeout_s, "--timeout", INT, 1, 86400, "60", "S", \
  "a client has S seconds to send a whole request, and a\n" \
  "connection idle S seconds is closed\n") \
X(header_timeout, header_timeout_s, "--header-timeout", INT, 1, 86400, "10", "S", \
  "... and S seconds for a request's line and headers, from\n" \
  "the connection or the previous answer: a peer that\n" \
  "trickles headers holds its slot that long only\n") \
X(max_body_bytes, max_body, "--max-body-bytes", SIZE, 1024, 1 << 30, "4194304", "N", \
  "largest request body\n") \
X(model, model_dir, "--model", STR, 0, 0, NULL, "DIR|FILE.gguf", \
  "read the tokenizer and chat template from DIR or the\n" \
  "GGUF file (default: what the engine serves, or its\n" \
  "embedded model)\n") \
X(served_model_name, served_name, "--served-model-name", TEXT, 0, 199, NULL, "ID", \
  "the model id clients send (default: --model, else the\n" \
  "engine's model)\n") \
X(chat_template, chat_template, "--chat-template", STR, 0, 0, NULL, "FILE", \
  "a chat template to use instead of the model's\n") \
X(max_tokens_default, max_tokens_default, "--max-tokens-default", I32, 1, INT32_MAX, NULL, "N", \
  "max_tokens of a request that sets none (default: OpenAI's,\n" \
  "16 for completions; for chat whatever room the context\n" \
  "leaves, as vLLM: a \"hi\" may run to the context's end)\n") \
X(allowed_origins, cors.origins, "--allowed-origins", TEXT, 0, 0, NULL, "LIST", \
  "CORS: origins a browser page may call from, comma-separated\n" \
  "or \"*\" (default none: no CORS headers, preflights 403)\n") \
X(allowed_headers, cors.headers, "--allowed-headers", TEXT, 0, 0, NULL, "LIST", \
  "CORS: request headers pages may send (default \"*\": any\n" \
  "asked, Authorization included)\n") \
X(allowed_methods, cors.methods, "--allowed-methods", TEXT, 0, 0, NULL, "LIST", \
  "CORS: methods (default \"*\": GET, POST, HEAD, OPTIONS)\n") \
X(list_fields, list_fields, "--list-fields", ON, 0, 0, NULL, "", \
  "print every request field and what this server does with\n" \
  "it (applied, accepted-without-effect, refused), and exit\n") \
X(threads, threads, "--threads", INT, 1, 64, NULL, "N", \
  "HTTP threads (default: up to 4)\n") \
X(log_level, log_level, "--log-level", LOG, 0, 0, "info", "L", \
  "error, warn, info, debug\n") \
X(help, help, "--help", ON, 0, 0, NULL, "", \
  "this text, and exit (also -h)\n")
/* clang-format on */

enum gw_flag_type {
	GW_FLAG_T_INT = 1,
	GW_FLAG_T_I32,
	GW_FLAG_T_SIZE,
	GW_FLAG_T_SECS,
	GW_FLAG_T_STR,
	GW_FLAG_T_TEXT,
	GW_FLAG_T_NAME,
	GW_FLAG_T_ON,
	GW_FLAG_T_KEY,
	GW_FLAG_T_KEYFILE,
	GW_FLAG_T_ONEKEY,
	GW_FLAG_T_LOG,
};

/* Row ids, in the table's order: GW_FLAG_<ID>. */
enum gw_flag_id {
#define GW_FLAG_ENUM_(id, ...) GW_FLAG_##id,
	GW_FLAGS_TABLE(GW_FLAG_ENUM_)
#undef GW_FLAG_ENUM_
	GW_FLAG_COUNT
};

/* One row as data. */
struct gw_flag_desc {
	enum gw_flag_id id;
	size_t offset; /* of FIELD in struct gw_opts */
	const char *flag;
	enum gw_flag_type type;
	int64_t lo, hi;
	const char *def; /* NULL: none */
	const char *metavar;
	const char *help;
};

struct gw_opts {
	const char *engine;       /* engine name (--engine), "default" */
	const char *runtime_dir;  /* NULL: the default rule (client.h) */
	const char *host;         /* --host, "127.0.0.1" */
	int port;                 /* --port, 8000; 0 = any free port */
	const char **api_keys;    /* --api-key (repeatable), --api-key-file, $ALLM_API_KEY;
				   * each key is one user (gw-users.c); none: no auth */
	int n_api_keys;
	const char *metrics_api_key; /* --metrics-api-key[-file], $ALLM_METRICS_API_KEY: GET
				      * /metrics needs it; NULL: see metrics_open */
	bool metrics_open;        /* --metrics-open: GET /metrics needs no key even when API
				   * or admin keys are set (without it, it then needs the
				   * metrics or admin key) */
	const char *admin_api_key; /* --admin-api-key[-file], $ALLM_ADMIN_API_KEY: POST
				    * /reset_prefix_cache needs it; NULL: no route */
	int max_queued_per_user;  /* --max-queued-per-user: choices waiting or running */
	int max_inflight;         /* --max-inflight: choices of all users on the engine at
				   * once; 0: the engine's max_num_seqs (gw_users_caps) */
	int max_inflight_per_user; /* --max-inflight-per-user: ... of one user; 0: 7/8 of that */
	double engine_timeout_s;  /* --engine-timeout: /health says 503 past this silence */
	int max_connections;      /* --max-connections */
	int max_conns_per_addr;   /* --max-connections-per-address (default half the above) */
	int timeout_s;            /* --timeout: idle connection limit, seconds */
	int header_timeout_s;     /* --header-timeout: a request's line and headers must be in
				   * within this of the connection or the previous answer */
	size_t max_body;          /* --max-body-bytes: request body cap */
	const char *model_dir;    /* --model: tokenizer and chat template from here */
	const char *served_name;  /* --served-model-name: the model id clients use */
	const char *chat_template; /* --chat-template FILE: instead of the model's */
	struct gw_cors cors;      /* --allowed-origins, --allowed-headers, --allowed-methods */
	int32_t max_tokens_default; /* --max-tokens-default: a request without max_tokens
				     * gets this many at most; 0: OpenAI's (16 for
				     * completions, the context's room for chat) */
	int threads;              /* HTTP threads */
	enum allm_log_level log_level;
	bool list_fields, help;   /* --list-fields, --help: the program prints and exits */
	char *owned_metrics_key, *owned_admin_key; /* read from a file (gw_opts_free) */
	/* test hook ALLM_GW_TEST_PUMP_BUSY=1: the pump never waits in poll, as
	 * under a flood of events, so only its busy-time look at the sockets
	 * can notice a hang-up (tests/gateway-hardening.sh, issue 49 item 6) */
	bool test_pump_busy;
};

/* What the program read from the environment (NULL or false: unset). */
struct gw_env {
	const char *api_key;         /* $ALLM_API_KEY: the one key when no flag gives keys */
	const char *metrics_api_key; /* $ALLM_METRICS_API_KEY (a flag overrides it) */
	const char *admin_api_key;   /* $ALLM_ADMIN_API_KEY (a flag overrides it) */
	bool test_pump_busy;         /* $ALLM_GW_TEST_PUMP_BUSY=1 */
};

/* Row i (< GW_FLAG_COUNT), or NULL; the row of a flag, or NULL. */
const struct gw_flag_desc *gw_flag_desc(int i);
const struct gw_flag_desc *gw_flag_by_name(const char *flag);

/* Every row's DEF, and the defaults that depend on the machine (threads). */
void gw_opts_default(struct gw_opts *o);
/* The defaults, then env, then argv[1..argc) (the strings must outlive o), then the
 * defaults that follow others (--max-connections-per-address). 0, or -1 with the
 * reason in err (the flag and what it takes). */
int gw_opts_parse(struct gw_opts *o, int argc, char **argv, const struct gw_env *env, char *err, size_t errlen);
/* Frees what parsing allocated (the keys, each a copy, and keys read from files). */
void gw_opts_free(struct gw_opts *o);
/* The usage text: a header and one entry per row. */
void gw_opts_usage(FILE *f);

#endif
