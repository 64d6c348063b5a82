/* AdaptiveLLM-C request parameters: one table, one struct.
 *
 * ALLM_PARAMS_TABLE below is the one definition of every scalar parameter a
 * generation request carries: its field, type, range, the value that turns it
 * off, its default, the command-line flag, the OpenAI/vLLM JSON key and the help
 * line. Everything else reads it:
 *
 *   struct allm_params   the fields, in the table's order (this header)
 *   allm_params_check    every range (libadaptivellm before it submits, the
 *                        engine before it accepts, the sampler's own check)
 *   allm_params_from_wire  a peer's struct of any size into this build's
 *   allm_params_parse_flag / allm_params_help   both CLIs' flags and --help
 *   the gateway's JSON loop (engined/gateway/gw-openai.c) over allm_param_desc
 *   allm_param_desc(i)   the table as data, for C and for other languages:
 *                        ctypes/cffi can call it in libadaptivellm.so, and the
 *                        build writes it out as request-params.json
 *
 * struct allm_params is the ABI both ways: a client fills one (through
 * struct allm_request_params, client.h) and the engine reads the same bytes from
 * the prompt arena (protocol.h). It starts with its size, so it grows without a
 * new soname or wire version (as Linux's struct open_how does):
 *   - a row is only ever appended, at the offset its table entry states (checked
 *     at compile time below);
 *   - a reader given a shorter struct (an older writer) reads the missing rows as
 *     zero, so every row added after ALLM_PARAMS_SIZE_VER0 has off == 0;
 *   - a reader given a longer struct (a newer writer) accepts it only when every
 *     byte past the rows it knows is zero (knobs it cannot honour are refused,
 *     never silently dropped).
 *
 * Adding a knob: append its row (next free offset, off == 0, a new
 * ALLM_PARAMS_SIZE_VER<n>), make the sampler (engined/exec/sampler.c) use it, and
 * test it. Clients, the engine's checks, the CLIs and the gateway pick it up. */
#ifndef ADAPTIVELLM_PARAMS_H
#define ADAPTIVELLM_PARAMS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- limits of the parameters that are not scalars ------------------------------ */

/* Most stop token ids one request carries (allm_params.stop_ids). */
#define ALLM_PARAMS_MAX_STOP 4
/* Bytes of a request's cache salt (allm_params.cache_salt). */
#define ALLM_CACHE_SALT_BYTES 16
/* Most alternatives a token's log-probabilities carry (the logprobs row):
 * OpenAI's top_logprobs limit. 10 before: an engine of then refuses more by
 * name, and a request of 10 or fewer reads the same both ways (protocol.h,
 * ALLM_CQE_LOGPROBS_TOP). */
#define ALLM_LOGPROBS_MAX 20
/* Most logit bias entries per request, and the range of a bias. */
#define ALLM_LOGIT_BIAS_MAX 300
#define ALLM_LOGIT_BIAS_LO -100.0
#define ALLM_LOGIT_BIAS_HI 100.0

/* What a request's grammar text is (it constrains what may be generated;
 * engined/grammar/). The text travels in the prompt arena (protocol.h). */
enum allm_grammar_kind {
	ALLM_GRAMMAR_NONE = 0,        /* no grammar */
	ALLM_GRAMMAR_GBNF = 1,        /* llama.cpp's GBNF; generation starts at rule root */
	ALLM_GRAMMAR_JSON_SCHEMA = 2, /* a JSON Schema: one JSON text it validates */
	ALLM_GRAMMAR_REGEX = 3,       /* a regular expression the whole text matches */
	ALLM_GRAMMAR_CHOICE = 4,      /* a JSON array of strings: exactly one of them */
	ALLM_GRAMMAR_JSON_OBJECT = 5, /* any JSON object (no text) */
};
#define ALLM_GRAMMAR_KIND_MAX ALLM_GRAMMAR_JSON_OBJECT
/* Bytes of grammar text a request carries at most. */
#define ALLM_GRAMMAR_TEXT_MAX (256u << 10)

/* A logit bias entry: bias (in [ALLM_LOGIT_BIAS_LO, ALLM_LOGIT_BIAS_HI]) added to
 * the logit of token_id (>= 0). They travel in the prompt arena (protocol.h). */
struct allm_logit_bias {
	int32_t token_id;
	float bias;
};

/* --- the table -------------------------------------------------------------------- */

/* Column TYPE: the field's C type. */
enum allm_param_type {
	ALLM_PARAM_I32 = 1,  /* int32_t */
	ALLM_PARAM_U64 = 2,  /* uint64_t (its range is all of it) */
	ALLM_PARAM_F32 = 3,  /* float, finite */
	ALLM_PARAM_BOOL = 4, /* uint32_t, 0 or 1; the CLI flag takes no value */
};
#define ALLM_PARAM_CTYPE_I32 int32_t
#define ALLM_PARAM_CTYPE_U64 uint64_t
#define ALLM_PARAM_CTYPE_F32 float
#define ALLM_PARAM_CTYPE_BOOL uint32_t

/* Column FLAGS. */
#define ALLM_PARAM_F_LO_OPEN (1u << 0)  /* lo itself is outside the range */
#define ALLM_PARAM_F_PLUS_ONE (1u << 1) /* stored as 1 + what users write (the CLI's
					 * value, the JSON number), 0 = off: lo, hi,
					 * off and dflt are stored values */
#define ALLM_PARAM_F_JSON_NEG1 (1u << 2) /* the gateway also takes -1 for off (vLLM's
					  * spelling), stored as off */
#define ALLM_PARAM_F_JSON_CUSTOM (1u << 3) /* the gateway reads this key itself: its
					    * meaning differs by endpoint (the range
					    * still comes from here) */
#define ALLM_PARAM_F_NO_CLI (1u << 4) /* no CLI flag of its own: other flags set it
				       * (the grammar's: allm_grammar_parse_flag); its
				       * JSON key is NULL: the gateway maps its own
				       * fields (response_format, ...) onto it */

/* Column OFF of a parameter that is never off (a length, a temperature). */
#define ALLM_PARAM_ALWAYS NAN

/* One row a parameter, in wire order (rows are only appended; the offset is the
 * ABI). A value is valid when it equals OFF or lies in [LO, HI].
 *
 *  X(name, TYPE, offset, lo, hi, off, default, flags, cli flag, meta, json key, help) */
#define ALLM_PARAMS_TABLE(X)                                                                          \
	X(seed, U64, 40, 0, 18446744073709551615.0, ALLM_PARAM_ALWAYS, 0, 0, "--seed", "S", "seed",     \
	  "sampling seed (a (seed, prompt) pair always gives the same text)")                           \
	X(max_tokens, I32, 48, 1, 2147483647, ALLM_PARAM_ALWAYS, 128, 0, "--max-tokens", "N",             \
	  "max_tokens", "tokens to generate at most")                                                   \
	X(temperature, F32, 52, 0, 100, ALLM_PARAM_ALWAYS, 1, 0, "--temperature", "T", "temperature",     \
	  "0 = greedy")                                                                                 \
	X(top_p, F32, 56, 0, 1, 1, 1, ALLM_PARAM_F_LO_OPEN, "--top-p", "P", "top_p",                       \
	  "nucleus sampling: the most likely tokens holding this much of the mass")                     \
	X(top_k, I32, 60, 0, 2147483647, 0, 0, ALLM_PARAM_F_JSON_NEG1, "--top-k", "K", "top_k",             \
	  "keep the K most likely tokens")                                                              \
	X(ignore_eos, BOOL, 64, 0, 1, 0, 0, 0, "--ignore-eos", NULL, "ignore_eos",                          \
	  "do not stop at the model's end-of-sequence token")                                           \
	X(repetition_penalty, F32, 68, 0, 10, 1, 1, ALLM_PARAM_F_LO_OPEN, "--repetition-penalty", "R",     \
	  "repetition_penalty", "prompt and output tokens: a positive logit / R, a negative one x R")  \
	X(frequency_penalty, F32, 72, -2, 2, 0, 0, 0, "--frequency-penalty", "F", "frequency_penalty",      \
	  "output tokens: logit -= F x their count")                                                    \
	X(presence_penalty, F32, 76, -2, 2, 0, 0, 0, "--presence-penalty", "P", "presence_penalty",         \
	  "output tokens: logit -= P once")                                                             \
	X(logprobs, I32, 80, 1, 1 + ALLM_LOGPROBS_MAX, 0, 0, ALLM_PARAM_F_PLUS_ONE | ALLM_PARAM_F_JSON_CUSTOM, \
	  "--logprobs", "K", "logprobs", "each token's log-probability and the K most likely tokens'")   \
	X(min_tokens, I32, 84, 0, 2147483647, 0, 0, 0, "--min-tokens", "N", "min_tokens",                  \
	  "no EOS or stop id before N tokens (at most max_tokens)")                                     \
	X(min_p, F32, 88, 0, 1, 0, 0, 0, "--min-p", "P", "min_p",                                            \
	  "keep only tokens at least P times as likely as the most likely one (after top-k, top-p)")      \
	X(grammar_kind, I32, 92, 1, ALLM_GRAMMAR_KIND_MAX, 0, 0, ALLM_PARAM_F_NO_CLI, "--grammar-kind", "KIND", NULL, \
	  "what the request's grammar text is (enum allm_grammar_kind); the text travels beside")

/* Sizes struct allm_params had, oldest first (what a writer built then sends). */
#define ALLM_PARAMS_SIZE_VER0 88 /* size .. min_tokens */
#define ALLM_PARAMS_SIZE_VER1 96 /* .. min_p, grammar_kind */
#define ALLM_PARAMS_SIZE_LATEST ALLM_PARAMS_SIZE_VER1
/* The largest struct a reader takes (a newer writer's, its tail zero). */
#define ALLM_PARAMS_SIZE_MAX 4096

/* --- the struct ------------------------------------------------------------------- */

/* A request's parameters, on the wire and in the API. Zero-filled, then
 * allm_params_init (or allm_request_params_init) sets the defaults. */
struct allm_params {
	/* bytes of this struct as its writer was built: sizeof(struct allm_params)
	 * there (allm_params_init sets it); a reader reads that many */
	uint32_t size;
	uint32_t n_stop;                           /* stop_ids used, <= ALLM_PARAMS_MAX_STOP */
	int32_t stop_ids[ALLM_PARAMS_MAX_STOP];    /* extra stop token ids (>= 0) besides EOS */
	/* the request shares cached KV (the prefix cache) only with requests of the
	 * same uid and the same salt (all zero: no salt); a digest of whatever scopes
	 * it (the gateway's: the API key and the request's cache_salt) */
	uint8_t cache_salt[ALLM_CACHE_SALT_BYTES];
	/* the table's rows, in order: see ALLM_PARAMS_TABLE for each one's meaning */
#define ALLM_PARAM_FIELD_(name, type, ...) ALLM_PARAM_CTYPE_##type name;
	ALLM_PARAMS_TABLE(ALLM_PARAM_FIELD_)
#undef ALLM_PARAM_FIELD_
};

/* --- the table as data ------------------------------------------------------------ */

/* A row of ALLM_PARAMS_TABLE (allm_param_desc). Every field fixed-width or a
 * pointer, so other languages can read it (ctypes: c_char_p, c_uint32, c_double). */
struct allm_param_desc {
	const char *name;   /* the field's name */
	uint32_t type;      /* enum allm_param_type */
	uint32_t offset;    /* in struct allm_params */
	uint32_t size;      /* bytes of the field */
	uint32_t flags;     /* ALLM_PARAM_F_* */
	double lo, hi;      /* the valid range of stored values */
	double off;         /* the stored value that turns it off; NAN: never off */
	double dflt;        /* the stored default */
	const char *flag;   /* the CLIs' flag ("--top-p") */
	const char *meta;   /* the flag's value in --help ("P"); NULL for BOOL */
	const char *json;   /* the gateway's JSON key (NULL: none, ALLM_PARAM_F_NO_CLI rows) */
	const char *help;   /* what it does, one line */
};

/* Row i of the table (i from 0), NULL past the last. Static data; thread-safe. */
const struct allm_param_desc *allm_param_desc(size_t i);
/* The row named name (a field name or a JSON key), NULL if none. */
const struct allm_param_desc *allm_param_find(const char *name);

/* Whether v may be stored in d's field: d's off value, or within its range
 * (finite). Thread-safe. */
bool allm_param_valid(const struct allm_param_desc *d, double v);
/* d's range as users write values ("in [-2, 2]", "in (0, 1]", ">= 1", "in 0..10"),
 * into buf (NUL-terminated, truncated to len). Returns buf. */
const char *allm_param_range_text(const struct allm_param_desc *d, char *buf, size_t len);
/* d's field of p as a double (a U64 loses its low bits past 2^53: for display). */
double allm_param_get(const struct allm_params *p, const struct allm_param_desc *d);
/* Stores v in d's field of p when valid (allm_param_valid): 0, else -EINVAL and
 * p unchanged. A U64 row takes v's integer part. */
int allm_param_set(struct allm_params *p, const struct allm_param_desc *d, double v);

/* --- the struct's life ------------------------------------------------------------- */

/* Zeroes size bytes of p (size: sizeof(struct allm_params) as the caller was
 * built; allm_params_init passes it) and sets every row that fits to its
 * default. Returns 0, or -EINVAL when size < ALLM_PARAMS_SIZE_VER0 or >
 * ALLM_PARAMS_SIZE_MAX. Thread-safe (touches only *p). */
int allm_params_init_sized(struct allm_params *p, size_t size);
static inline void allm_params_init(struct allm_params *p)
{
	allm_params_init_sized(p, sizeof(*p));
}

/* Checks every parameter of p (p->size bytes of it; rows past that count as
 * off): each row's range, n_stop <= ALLM_PARAMS_MAX_STOP and stop ids >= 0,
 * min_tokens <= max_tokens. Returns 0, or -EINVAL with why (when why != NULL: one
 * line naming the parameter and its range, NUL-terminated, truncated to len).
 * Thread-safe. */
int allm_params_check(const struct allm_params *p, char *why, size_t len);

/* Copies a peer's struct allm_params (src, size bytes: its writer's layout) into
 * *dst (this build's): rows the writer did not know are zero (off), and
 * dst->size = sizeof(*dst). Returns 0; -EINVAL when size is below
 * ALLM_PARAMS_SIZE_VER0, above ALLM_PARAMS_SIZE_MAX, or differs from the size the
 * struct states; -E2BIG when a byte past the rows this build knows is not zero
 * (a parameter this build cannot honour). why as for allm_params_check. The
 * caller checks the values after (allm_params_check). Thread-safe. */
int allm_params_from_wire(struct allm_params *dst, const void *src, size_t size, char *why, size_t len);

/* Checks n logit bias entries: n <= ALLM_LOGIT_BIAS_MAX, ids >= 0 (the engine
 * checks them against its vocabulary), biases in range. 0 or -EINVAL (why as
 * above). Thread-safe. */
int allm_logit_bias_check(const struct allm_logit_bias *b, size_t n, char *why, size_t len);

/* --- command-line tools ---------------------------------------------------------- */

/* If argv[*i] is a parameter's flag (the table's, or --stop-ids LIST), parses it
 * (and its value, argv[*i + 1]) into p and advances *i past them. Returns 1
 * (consumed), 0 (not a parameter flag: *i unchanged), or -EINVAL with why ("bad
 * value for --top-p: '0' (want a number in (0, 1])"). Thread-safe. */
int allm_params_parse_flag(struct allm_params *p, int argc, char *const *argv, int *i, char *why,
			   size_t len);
/* The --help lines of every parameter flag (with their defaults and ranges),
 * into buf (NUL-terminated, truncated to len). Returns the length the whole text
 * needs (as snprintf). */
size_t allm_params_help(char *buf, size_t len);
/* Parses "1,2, 3": at most max ids, each in 0..INT32_MAX, into *ret (malloc'ed;
 * the caller frees) and *ret_n. Returns 0, -EINVAL (why: names flag), -ENOMEM. */
int allm_parse_id_list(const char *flag, const char *s, size_t max, int32_t **ret, size_t *ret_n, char *why,
		       size_t len);

/* A request's grammar as the CLIs take it: --grammar FILE (GBNF), --json-schema
 * FILE, --regex RE, --choice JSON-ARRAY, --json-object. */
struct allm_grammar_arg {
	uint32_t kind; /* enum allm_grammar_kind; ALLM_GRAMMAR_NONE: no flag given */
	char *text;    /* malloc'ed (free()), NUL-terminated; NULL for json_object */
	size_t len;    /* bytes of text */
};
/* If argv[*i] is a grammar flag, reads it (and its file) into *g and advances
 * *i: 1; 0 when it is not one; -EINVAL (a second grammar flag, a missing value,
 * a file past ALLM_GRAMMAR_TEXT_MAX) or -errno of the file, with why. */
int allm_grammar_parse_flag(struct allm_grammar_arg *g, int argc, char *const *argv, int *i, char *why,
			    size_t len);
/* The kind's name ("gbnf", "json_schema", "regex", "choice", "json_object";
 * "none"), and back: 0 or -EINVAL. */
const char *allm_grammar_kind_name(uint32_t kind);
int allm_grammar_kind_parse(const char *name, uint32_t *ret);

/* --- the layout is the ABI --------------------------------------------------------- */

#ifdef __cplusplus
#define ALLM_PARAMS_ASSERT(e, m) static_assert(e, m)
#else
#define ALLM_PARAMS_ASSERT(e, m) _Static_assert(e, m)
#endif
ALLM_PARAMS_ASSERT(offsetof(struct allm_params, n_stop) == 4, "params");
ALLM_PARAMS_ASSERT(offsetof(struct allm_params, stop_ids) == 8, "params");
ALLM_PARAMS_ASSERT(offsetof(struct allm_params, cache_salt) == 24, "params");
#define ALLM_PARAM_OFFSET_(name, type, offset, ...)                                                  \
	ALLM_PARAMS_ASSERT(offsetof(struct allm_params, name) == (offset), "row " #name ": its offset is ABI");
ALLM_PARAMS_TABLE(ALLM_PARAM_OFFSET_)
#undef ALLM_PARAM_OFFSET_
ALLM_PARAMS_ASSERT(sizeof(struct allm_params) == ALLM_PARAMS_SIZE_LATEST, "a new row needs a new size");
ALLM_PARAMS_ASSERT(sizeof(struct allm_logit_bias) == 8, "logit bias entry");

#ifdef __cplusplus
}
#endif

#endif
