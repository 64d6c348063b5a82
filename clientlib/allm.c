/* allm: generate text with a running allm-engined (DESIGN §12).
 *
 *   allm [--name NAME] [--runtime-dir DIR] generate (--prompt TEXT | --prompt-ids 1,2,3)
 *        [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
 *        [--repetition-penalty R] [--frequency-penalty F] [--presence-penalty P]
 *        [--min-tokens N] [--logprobs K]
 *        [--stop-ids LIST] [--ignore-eos] [--ids] [--json] [--posix-shm]
 *
 * Streams the text to stdout as it arrives and a stats line to stderr; --ids and
 * --json print the result at the end instead. Exit status: 0 when the request
 * finished normally (eos, stop, length), 1 on a request error, a cancellation or
 * a connection failure, 2 on bad flags, 130 when interrupted (Ctrl-C cancels the
 * request first). Uses only libadaptivellm (no engine code, no JSON library). */
#include <adaptivellm/client.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "allm"

struct cli_args {
	const char *name, *runtime_dir;
	const char *prompt, *prompt_ids;
	struct allm_params params; /* the table's flags (params.h) */
	struct allm_grammar_arg grammar; /* --grammar, --json-schema, --regex, --choice, --json-object */
	bool ids, json, posix_shm;
};

static void usage(FILE *f)
{
	char params[4096];
	allm_params_help(params, sizeof(params));
	fprintf(f,
		"usage: " PROG " [--name NAME] [--runtime-dir DIR] generate "
		"(--prompt TEXT | --prompt-ids 1,2,3) [options]\n"
		"Generates with a running allm-engined and streams the text to stdout.\n"
		"connection:\n"
		"  --name NAME            engine name (default \"default\")\n"
		"  --runtime-dir DIR      where NAME.sock lives (default $ALLM_RUNTIME_DIR, else\n"
		"                         $XDG_RUNTIME_DIR/adaptivellm, else /tmp/adaptivellm-$UID);\n"
		"                         it and the engine must be your uid's, or $ALLM_ENGINE_UID's\n"
		"  --posix-shm            ask for a named POSIX shared-memory segment (not a memfd;\n"
		"                         the engine decides)\n"
		"generation:\n"
		"  --prompt TEXT          text prompt (the engine tokenizes it)\n"
		"  --prompt-ids LIST      comma-separated token ids, taken as given\n"
		"%s"
		"output:\n"
		"  --ids                  print 'prompt: ...' (with --prompt-ids), 'generated: ...'\n"
		"                         and 'text: ...' lines at the end\n"
		"  --json                 print one JSON object at the end (with --logprobs: each\n"
		"                         token's)\n"
		"exit status: 0 finished (eos/stop/length), 1 error, cancelled or no engine,\n"
		"             2 bad flags, 130 interrupted\n",
		params);
}

static int parse_args(int argc, char **argv, struct cli_args *a)
{
	bool have_cmd = false;
	char why[256];
	memset(a, 0, sizeof(*a));
	allm_params_init(&a->params);
	for (int i = 1; i < argc;) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(f, "--version")) {
			printf(PROG " " ADAPTIVELLM_VERSION_STRING "\n");
			exit(0);
		}
		int r = allm_params_parse_flag(&a->params, argc, argv, &i, why, sizeof(why));
		if (r == 0 && (r = allm_grammar_parse_flag(&a->grammar, argc, argv, &i, why, sizeof(why))) > 0)
			a->params.grammar_kind = (int32_t)a->grammar.kind;
		if (r < 0) {
			fprintf(stderr, PROG ": %s\n", why);
			return -1;
		}
		if (r)
			continue;
		bool flag = true;
		if (!strcmp(f, "generate")) {
			if (have_cmd) {
				fprintf(stderr, PROG ": 'generate' given twice\n");
				return -1;
			}
			have_cmd = true;
		} else if (!strcmp(f, "--ids"))
			a->ids = true;
		else if (!strcmp(f, "--json"))
			a->json = true;
		else if (!strcmp(f, "--posix-shm"))
			a->posix_shm = true;
		else
			flag = false;
		if (flag) {
			i++;
			continue;
		}
		if (f[0] != '-') {
			fprintf(stderr, PROG ": unknown command '%s' (the command is 'generate'; see --help)\n",
				f);
			return -1;
		}
		if (!v) {
			fprintf(stderr, PROG ": unknown flag or missing value: %s (see --help)\n", f);
			return -1;
		}
		if (!strcmp(f, "--name"))
			a->name = v;
		else if (!strcmp(f, "--runtime-dir"))
			a->runtime_dir = v;
		else if (!strcmp(f, "--prompt"))
			a->prompt = v;
		else if (!strcmp(f, "--prompt-ids"))
			a->prompt_ids = v;
		else {
			fprintf(stderr, PROG ": unknown flag %s (see --help)\n", f);
			return -1;
		}
		i += 2;
	}
	if (!have_cmd) {
		fprintf(stderr, PROG ": no command: use '" PROG " generate --prompt TEXT' (see --help)\n");
		return -1;
	}
	if (!!a->prompt + !!a->prompt_ids != 1) {
		fprintf(stderr, PROG ": give exactly one of --prompt or --prompt-ids (see --help)\n");
		return -1;
	}
	if (a->prompt && !a->prompt[0]) {
		fprintf(stderr, PROG ": --prompt is empty\n");
		return -1;
	}
	if (a->ids && a->json) {
		fprintf(stderr, PROG ": --ids and --json are exclusive\n");
		return -1;
	}
	if (a->name && (!a->name[0] || strchr(a->name, '/'))) {
		fprintf(stderr, PROG ": bad value for --name: '%s' (want a plain name without '/')\n",
			a->name);
		return -1;
	}
	if (allm_params_check(&a->params, why, sizeof(why))) {
		fprintf(stderr, PROG ": %s\n", why);
		return -1;
	}
	return 0;
}

/* --- output ------------------------------------------------------------------ */

/* A growing byte buffer (the whole generated text, the ids). */
struct buf {
	char *p;
	size_t len, cap;
};

static int buf_add(struct buf *b, const void *s, size_t n)
{
	if (n == 0)
		return 0; /* s and b->p may be NULL: memcpy(NULL, NULL, 0) is undefined */
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		char *t = realloc(b->p, cap);
		if (!t)
			return -ENOMEM;
		b->p = t;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2, min = 0x80;
	else if (c >= 0xE0 && c <= 0xEF)
		len = 3, min = 0x800;
	else if (c >= 0xF0 && c <= 0xF4)
		len = 4, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	unsigned cp = c & (0x3F >> (len - 1));
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return len;
}

/* A JSON string literal; invalid UTF-8 bytes become U+FFFD so the output always
 * parses. */
static void json_string(FILE *f, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		size_t k = utf8_seq(p + i, n - i);
		if (k == 0) {
			fputs("\\ufffd", f);
			i++;
			continue;
		}
		if (k > 1) {
			fwrite(p + i, 1, k, f);
			i += k;
			continue;
		}
		i++;
		switch (c) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		default:
			if (c < 0x20 || c == 0x7F)
				fprintf(f, "\\u%04x", c);
			else
				fputc((int)c, f);
		}
	}
	fputc('"', f);
}

static void json_ids(FILE *f, const int32_t *ids, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, i ? ", %d" : "%d", ids[i]);
	fputc(']', f);
}

static void print_ids(FILE *f, const char *label, const int32_t *ids, size_t n)
{
	fprintf(f, "%s:", label);
	for (size_t i = 0; i < n; i++)
		fprintf(f, " %d", ids[i]);
	fputc('\n', f);
}

/* The finish reason as the CLI reports it: eos and stop ids both are "stop". */
static const char *finish_word(int reason)
{
	switch (reason) {
	case ALLM_FINISH_EOS:
	case ALLM_FINISH_STOP: return "stop";
	case ALLM_FINISH_LENGTH: return "length";
	case ALLM_FINISH_CANCELLED: return "cancelled";
	default: return "error";
	}
}

/* --- the request ---------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted++;
}

struct result {
	struct buf text, ids; /* ids: int32_t values */
	struct buf lps;       /* struct allm_logprobs of each token, with --logprobs */
	struct allm_event final;
	char error[ALLM_CQE_ERROR_MAX + 1];
	bool finished;
};

/* Submits (retrying while the rings are busy) and collects events until FINAL.
 * Returns 0 (result->final holds the end) or a negative errno (message printed). */
static int run_request(allm_client_t *c, const struct allm_request_params *p, const struct allm_grammar_arg *g,
		       bool stream, struct result *res)
{
	struct allm_event ev;
	uint64_t request_id = 0;
	bool cancel_sent = false;
	int r;

	while ((r = allm_client_submit_grammar(c, p, g->text, g->len)) == -EAGAIN)
		if ((r = allm_client_wait(c, &ev, 100)) < 0 && r != -EINTR)
			break;
	if (r < 0) {
		if (r == -E2BIG)
			fprintf(stderr, PROG ": the prompt does not fit the engine's prompt arena\n");
		else if (r == -EPIPE)
			fprintf(stderr, PROG ": the engine went away\n");
		else
			fprintf(stderr, PROG ": cannot submit the request: %s\n", strerror(-r));
		return r;
	}
	for (;;) {
		if (interrupted && request_id && !cancel_sent) {
			/* First Ctrl-C: ask the engine to stop; its FINAL ends the loop. */
			if (allm_client_cancel(c, request_id) == 0)
				cancel_sent = true;
		}
		if (interrupted > 1)
			return -EINTR; /* second Ctrl-C: leave now (disconnect cancels) */
		r = allm_client_wait(c, &ev, interrupted ? 100 : -1);
		if (r == -EINTR || r == 0)
			continue;
		if (r < 0) {
			if (stream)
				fputc('\n', stdout);
			fprintf(stderr, PROG ": %s\n", r == -EPIPE ? "the engine went away"
								   : r == -EPROTO ? "the engine broke the protocol"
										  : strerror(-r));
			return r;
		}
		switch (ev.kind) {
		case ALLM_EVENT_ACCEPTED:
			request_id = ev.request_id;
			break;
		case ALLM_EVENT_TOKEN:
			if (buf_add(&res->text, ev.text, ev.text_len) ||
			    (ev.token_id >= 0 && buf_add(&res->ids, &ev.token_id, sizeof(int32_t))) ||
			    (ev.all_logprobs && buf_add(&res->lps, ev.all_logprobs, sizeof(*ev.all_logprobs)))) {
				fprintf(stderr, PROG ": out of memory\n");
				return -ENOMEM;
			}
			if (stream && ev.text_len) {
				fwrite(ev.text, 1, ev.text_len, stdout);
				fflush(stdout);
			}
			break;
		case ALLM_EVENT_FINAL:
			res->final = ev;
			if (ev.error) {
				snprintf(res->error, sizeof(res->error), "%s", ev.error);
				res->final.error = res->error;
			}
			res->finished = true;
			return 0;
		}
	}
}

static void print_json(allm_client_t *c, const int32_t *prompt, size_t n_prompt,
		       const struct result *res)
{
	const struct allm_event *f = &res->final;
	FILE *o = stdout;
	fputs("{\"model\": ", o);
	json_string(o, allm_client_model(c), strlen(allm_client_model(c)));
	if (prompt) {
		fputs(", \"prompt_ids\": ", o);
		json_ids(o, prompt, n_prompt);
	}
	fputs(", \"generated_ids\": ", o);
	json_ids(o, (const int32_t *)res->ids.p, res->ids.len / sizeof(int32_t));
	fputs(", \"text\": ", o);
	json_string(o, res->text.p ? res->text.p : "", res->text.len);
	fprintf(o, ", \"finish_reason\": \"%s\", \"error\": ", finish_word(f->finish_reason));
	if (f->error)
		json_string(o, f->error, strlen(f->error));
	else
		fputs("null", o);
	if (res->lps.len) { /* as allm-run --logprobs prints them */
		const struct allm_logprobs *l = (const void *)res->lps.p;
		fputs(", \"logprobs\": [", o);
		for (size_t i = 0; i < res->lps.len / sizeof(*l); i++) {
			fprintf(o, "%s{\"id\": %d, \"logprob\": %.9g, \"top\": [", i ? ", " : "", l[i].sampled.token_id,
				(double)l[i].sampled.logprob);
			for (uint32_t k = 0; k < l[i].n_top && k < ALLM_LOGPROBS_MAX; k++)
				fprintf(o, "%s[%d, %.9g]", k ? ", " : "", l[i].top[k].token_id, (double)l[i].top[k].logprob);
			fputs("]}", o);
		}
		fputc(']', o);
	}
	fprintf(o, ", \"n_prompt\": %u, \"n_generated\": %u, \"queue_ms\": %.3f, "
		   "\"ttft_ms\": %.3f, \"total_ms\": %.3f, \"preemptions\": %u, \"cached_tokens\": %u}\n",
		f->n_prompt, f->n_generated, f->queue_us / 1e3, f->ttft_us / 1e3, f->total_us / 1e3,
		f->n_preemptions, f->n_cached);
}

/* Prints the finished request as the flags ask; returns the exit status. */
static int report(const struct cli_args *a, allm_client_t *c, const int32_t *prompt,
		  size_t n_prompt, const struct result *res)
{
	const struct allm_event *f = &res->final;
	if (!a->ids && !a->json) { /* end the streamed text */
		fputc('\n', stdout);
		fflush(stdout);
	}
	if (a->json) {
		print_json(c, prompt, n_prompt, res);
	} else if (a->ids) {
		if (prompt)
			print_ids(stdout, "prompt", prompt, n_prompt);
		print_ids(stdout, "generated", (const int32_t *)res->ids.p, res->ids.len / sizeof(int32_t));
		printf("text: %.*s\n", (int)res->text.len, res->text.p ? res->text.p : "");
	}
	if (f->finish_reason == ALLM_FINISH_ERROR)
		fprintf(stderr, PROG ": the request failed: %s%s%s\n", f->error,
			f->status ? ": " : "", f->status ? strerror(-f->status) : "");
	else if (!a->json) {
		double gen_s = (f->total_us - f->ttft_us) / 1e6;
		fprintf(stderr, PROG ": %u prompt + %u generated tokens (%s); queue %.1f ms, TTFT %.1f ms, "
				"total %.1f ms, decode %.1f tok/s",
			f->n_prompt, f->n_generated, allm_finish_reason_name(f->finish_reason),
			f->queue_us / 1e3, f->ttft_us / 1e3, f->total_us / 1e3,
			f->n_generated > 1 && gen_s > 0 ? (f->n_generated - 1) / gen_s : 0.0);
		if (f->n_cached)
			fprintf(stderr, ", %u prompt tokens cached", f->n_cached);
		if (f->n_preemptions)
			fprintf(stderr, ", preempted %u time%s", f->n_preemptions, f->n_preemptions == 1 ? "" : "s");
		fputc('\n', stderr);
	}
	if (f->finish_reason == ALLM_FINISH_CANCELLED && interrupted)
		return 130;
	return f->finish_reason == ALLM_FINISH_EOS || f->finish_reason == ALLM_FINISH_STOP ||
		     f->finish_reason == ALLM_FINISH_LENGTH ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct cli_args a;
	struct result res = { 0 };
	int32_t *prompt = NULL;
	size_t n_prompt = 0;
	allm_client_t *c = NULL;
	char err[512];
	int rc = 1, r;

	if (parse_args(argc, argv, &a))
		return 2;
	if (a.prompt_ids && allm_parse_id_list("--prompt-ids", a.prompt_ids, SIZE_MAX / 8, &prompt, &n_prompt, err,
					       sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}

	struct allm_client_opts o = {
		.name = a.name, .runtime_dir = a.runtime_dir, .posix_shm = a.posix_shm,
	};
	if ((r = allm_client_connect(&o, &c, err, sizeof(err)))) {
		fprintf(stderr, PROG ": %s\n", err);
		goto out;
	}
	struct sigaction sa = { .sa_handler = on_sigint }; /* no SA_RESTART: wake the wait */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct allm_request_params p;
	allm_request_params_init(&p);
	if (a.prompt) {
		p.prompt = a.prompt;
		p.prompt_len = strlen(a.prompt);
	} else {
		p.prompt_ids = prompt;
		p.n_prompt_ids = n_prompt;
	}
	p.params = a.params;

	bool stream = !a.ids && !a.json;
	if ((r = run_request(c, &p, &a.grammar, stream, &res))) {
		rc = r == -EINTR ? 130 : 1;
		goto out;
	}
	rc = report(&a, c, prompt, n_prompt, &res);
out:
	fflush(stdout);
	allm_client_disconnect(c);
	free(res.text.p);
	free(res.ids.p);
	free(res.lps.p);
	free(prompt);
	free(a.grammar.text);
	return rc;
}
