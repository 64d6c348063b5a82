/* allm-bench-prefix: the prefix cache's benchmark client (bench/prefix-*.sh), a
 * libadaptivellm client of a running allm-engined. Two workloads the generic
 * allm-bench cannot express:
 *
 *   shared     G groups x P prompts, each a group's S-token system prompt then its
 *              own Q tokens, sent P rounds of one prompt per group (the first
 *              round is cold, the rest find their group's prefix), C in flight;
 *   multiturn  N conversations of R rounds sent at once, each round's prompt
 *              the previous prompt, its answer and Q new tokens (a closed loop:
 *              round r + 1 goes when round r ends).
 *
 * Prompts are token ids in [1, --vocab). Prints one JSON object: the requests'
 * engine-side times (FINAL: queue, TTFT, total) and cached tokens, summaries
 * (hit fraction, TTFT of cold and warm requests or per round, waits), and the
 * outputs' SHA-256 (equal runs give equal ids). Exit 0, or 1 on any failed request. */
#include <adaptivellm/client.h>

#include "sha256.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct req {
	int32_t *ids;
	size_t n_ids;
	int group, round, conv; /* shared: group, round; multiturn: conversation, round */
	int32_t *out;
	int32_t n_out, cap_out;
	double queue_ms, ttft_ms, total_ms;
	uint32_t n_prompt, n_cached;
	int finish;
	bool sent, done;
};

struct opts {
	const char *name, *mode;
	int groups, per_group, system, question, max_tokens, concurrency;
	int clients, rounds;
	int vocab;
	uint64_t seed;
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int32_t tok(uint64_t *s, int vocab)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return 1 + (int32_t)((*s >> 33) % (uint64_t)(vocab - 1));
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) (nearest rank above), NAN when n is 0; sorts v. */
static double pct(double *v, int n, double q)
{
	if (n == 0)
		return NAN;
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	int k = (int)ceil(q * n) - 1;
	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static int submit(allm_client_t *c, const struct opts *o, struct req *r, uint64_t tag)
{
	struct allm_request_params p;
	allm_request_params_init(&p);
	p.prompt_ids = r->ids;
	p.n_prompt_ids = r->n_ids;
	p.params.max_tokens = o->max_tokens;
	p.params.temperature = 0;
	p.params.ignore_eos = true;
	p.user_tag = tag;
	int rc = allm_client_submit(c, &p); /* -EAGAIN: the caller drains events and retries */
	if (!rc)
		r->sent = true;
	return rc;
}

/* Takes events until one request ends; its index in *ret_done. 0, or -errno. */
static int one_final(allm_client_t *c, struct req *reqs, int n, int *ret_done)
{
	struct allm_event ev;
	int rc;
	while ((rc = allm_client_wait(c, &ev, 600000)) == 1) {
		if (ev.user_tag >= (uint64_t)n)
			return -EPROTO;
		struct req *r = &reqs[ev.user_tag];
		if (ev.kind == ALLM_EVENT_TOKEN && ev.token_id >= 0) {
			if (r->n_out == r->cap_out) {
				r->cap_out = r->cap_out ? 2 * r->cap_out : 64;
				r->out = realloc(r->out, (size_t)r->cap_out * sizeof(int32_t));
				if (!r->out)
					return -ENOMEM;
			}
			r->out[r->n_out++] = ev.token_id;
		} else if (ev.kind == ALLM_EVENT_FINAL) {
			r->done = true;
			r->finish = ev.finish_reason;
			r->queue_ms = (double)ev.queue_us / 1e3;
			r->ttft_ms = (double)ev.ttft_us / 1e3;
			r->total_ms = (double)ev.total_us / 1e3;
			r->n_prompt = ev.n_prompt;
			r->n_cached = ev.n_cached;
			if (ev.finish_reason == ALLM_FINISH_ERROR)
				fprintf(stderr, "allm-bench-prefix: request %llu failed: %s\n",
					(unsigned long long)ev.user_tag, ev.error ? ev.error : "");
			*ret_done = (int)ev.user_tag;
			return 0;
		}
	}
	return rc == 0 ? -ETIMEDOUT : rc;
}

/* shared: the requests, round-major (round k: one prompt of every group). */
static struct req *make_shared(const struct opts *o, int *ret_n)
{
	int n = o->groups * o->per_group;
	struct req *v = calloc((size_t)n, sizeof(*v));
	for (int i = 0; v && i < n; i++) {
		struct req *r = &v[i];
		r->round = i / o->groups;
		r->group = i % o->groups;
		r->n_ids = (size_t)(o->system + o->question);
		if (!(r->ids = malloc(r->n_ids * sizeof(int32_t))))
			return NULL;
		uint64_t s = o->seed * 1000003u + (uint64_t)r->group * 7919u + 1;
		for (int k = 0; k < o->system; k++)
			r->ids[k] = tok(&s, o->vocab);
		s = o->seed * 999983u + (uint64_t)i * 104729u + 17;
		for (int k = 0; k < o->question; k++)
			r->ids[o->system + k] = tok(&s, o->vocab);
	}
	*ret_n = n;
	return v;
}

static int run_shared(allm_client_t *c, const struct opts *o, struct req *v, int n)
{
	int next = 0, inflight = 0, done, rc;
	while (next < n || inflight > 0) {
		while (next < n && inflight < o->concurrency) {
			if ((rc = submit(c, o, &v[next], (uint64_t)next)) == -EAGAIN)
				break;
			if (rc)
				return rc;
			next++;
			inflight++;
		}
		if ((rc = one_final(c, v, n, &done)))
			return rc;
		inflight--;
	}
	return 0;
}

/* multiturn: request conv * rounds + round; each round's prompt is made when
 * the previous one ends. */
static int run_multiturn(allm_client_t *c, const struct opts *o, struct req *v)
{
	int n = o->clients * o->rounds, done, rc, left = n;
	for (int k = 0; k < o->clients; k++) {
		struct req *r = &v[k * o->rounds];
		uint64_t s = o->seed * 1000003u + (uint64_t)k * 7919u + 1;
		r->conv = k;
		r->n_ids = (size_t)(o->system + o->question);
		if (!(r->ids = malloc(r->n_ids * sizeof(int32_t))))
			return -ENOMEM;
		/* a system prompt all conversations share (0: none), then their own */
		uint64_t ss = o->seed * 31337u + 5;
		for (int i = 0; i < o->system; i++)
			r->ids[i] = tok(&ss, o->vocab);
		for (int i = 0; i < o->question; i++)
			r->ids[o->system + i] = tok(&s, o->vocab);
		if ((rc = submit(c, o, r, (uint64_t)(k * o->rounds))))
			return rc;
	}
	while (left > 0) {
		if ((rc = one_final(c, v, n, &done)))
			return rc;
		left--;
		struct req *r = &v[done];
		int k = done / o->rounds, round = done % o->rounds;
		if (round + 1 == o->rounds)
			continue;
		struct req *q = &v[done + 1];
		q->conv = k;
		q->round = round + 1;
		q->n_ids = r->n_ids + (size_t)r->n_out + (size_t)o->question;
		if (!(q->ids = malloc(q->n_ids * sizeof(int32_t))))
			return -ENOMEM;
		memcpy(q->ids, r->ids, r->n_ids * sizeof(int32_t));
		memcpy(q->ids + r->n_ids, r->out, (size_t)r->n_out * sizeof(int32_t));
		uint64_t s = o->seed * 1000003u + (uint64_t)k * 7919u + 977u * (uint64_t)(round + 1);
		for (int i = 0; i < o->question; i++)
			q->ids[r->n_ids + (size_t)r->n_out + (size_t)i] = tok(&s, o->vocab);
		while ((rc = submit(c, o, q, (uint64_t)(done + 1))) == -EAGAIN)
			; /* a ring of the default size takes every conversation's next round */
		if (rc)
			return rc;
	}
	return 0;
}

/* A number for JSON: null for NAN. */
static const char *jnum(char *buf, size_t len, double x)
{
	if (isfinite(x))
		snprintf(buf, len, "%.4f", x);
	else
		snprintf(buf, len, "null");
	return buf;
}

static void report(const struct opts *o, struct req *v, int n, double wall)
{
	char j1[32], j2[32], j3[32], j4[32], j5[32];
	double *a = calloc((size_t)n, sizeof(double)), *b = calloc((size_t)n, sizeof(double));
	int64_t prompt = 0, cached = 0, gen = 0;
	int na = 0, nb = 0, failed = 0;
	struct allm_sha256 h;
	uint8_t d[32];
	char hex[65];
	allm_sha256_init(&h);
	for (int i = 0; i < n; i++) {
		prompt += v[i].n_prompt;
		cached += v[i].n_cached;
		gen += v[i].n_out;
		failed += v[i].finish == ALLM_FINISH_ERROR || !v[i].done;
		allm_sha256_update(&h, v[i].out, (size_t)v[i].n_out * sizeof(int32_t));
	}
	allm_sha256_final(&h, d);
	allm_sha256_hex(d, hex);
	printf("{\"mode\": \"%s\", \"requests\": %d, \"failed\": %d, \"duration_s\": %.4f, \"req_s\": %.4f, "
	       "\"prompt_tokens\": %lld, \"cached_tokens\": %lld, \"hit_fraction\": %.4f, \"generated_tokens\": %lld, ",
	       o->mode, n, failed, wall, n / wall, (long long)prompt, (long long)cached,
	       prompt ? (double)cached / (double)prompt : 0.0, (long long)gen);
	if (!strcmp(o->mode, "shared")) {
		/* cold: found nothing cached; warm: found something */
		for (int i = 0; i < n; i++) {
			if (v[i].n_cached)
				b[nb++] = v[i].ttft_ms;
			else
				a[na++] = v[i].ttft_ms;
		}
		double cold = pct(a, na, 0.5), warm = pct(b, nb, 0.5);
		printf("\"cold\": %d, \"warm\": %d, \"ttft_cold_p50_ms\": %s, \"ttft_warm_p50_ms\": %s, ", na, nb,
		       jnum(j1, sizeof(j1), cold), jnum(j2, sizeof(j2), warm));
	} else {
		for (int i = 0; i < n; i++) {
			if (v[i].round == 0)
				a[na++] = v[i].ttft_ms;
			else
				b[nb++] = v[i].ttft_ms;
		}
		double r1 = pct(a, na, 0.5), later = pct(b, nb, 0.99), later50 = pct(b, nb, 0.5);
		for (int i = 0; i < n; i++)
			a[i] = v[i].queue_ms;
		double wmax = pct(a, n, 1.0), wmed = pct(a, n, 0.5);
		printf("\"ttft_round1_p50_ms\": %s, \"ttft_later_p50_ms\": %s, \"ttft_later_p99_ms\": %s, "
		       "\"wait_max_ms\": %s, \"wait_median_ms\": %s, ",
		       jnum(j1, sizeof(j1), r1), jnum(j2, sizeof(j2), later50), jnum(j3, sizeof(j3), later),
		       jnum(j4, sizeof(j4), wmax), jnum(j5, sizeof(j5), wmed));
	}
	/* throughput (prompt + generated) and mean weighted turnaround (DESIGN §10),
	 * engine-side: (finish - arrival) / (finish - first scheduled) */
	double wt = 0;
	for (int i = 0; i < n; i++)
		wt += v[i].total_ms > v[i].queue_ms ? v[i].total_ms / (v[i].total_ms - v[i].queue_ms) : 1.0;
	printf("\"throughput_tok_s\": %.4f, \"mean_weighted_turnaround\": %.4f, ", (double)(prompt + gen) / wall,
	       n ? wt / n : 0.0);
	printf("\"outputs_sha256\": \"%s\", \"records\": [", hex);
	for (int i = 0; i < n; i++)
		printf("%s{\"i\": %d, \"group\": %d, \"round\": %d, \"prompt\": %u, \"cached\": %u, \"queue_ms\": %.4f, "
		       "\"ttft_ms\": %.4f, \"total_ms\": %.4f}",
		       i ? ", " : "", i, v[i].group, v[i].round, v[i].n_prompt, v[i].n_cached, v[i].queue_ms, v[i].ttft_ms,
		       v[i].total_ms);
	printf("]}\n");
	free(a);
	free(b);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: allm-bench-prefix --name ENGINE shared [--groups 8] [--per-group 8] [--system 512]\n"
		"           [--question 64] [--max-tokens 32] [--concurrency 4] [--vocab 256] [--seed 1]\n"
		"       allm-bench-prefix --name ENGINE multiturn [--clients 16] [--rounds 5] [--question 96]\n"
		"           [--system 0] [--max-tokens 16] [--vocab 256] [--seed 1]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct opts o = {.name = "default", .groups = 8, .per_group = 8, .system = -1, .question = -1,
			 .max_tokens = -1, .concurrency = 4, .clients = 16, .rounds = 5, .vocab = 256, .seed = 1};
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "shared") || !strcmp(f, "multiturn")) {
			o.mode = f;
			continue;
		}
		if (!v)
			return usage();
		long x = strtol(v, NULL, 10);
		i++;
		if (!strcmp(f, "--name"))
			o.name = v;
		else if (!strcmp(f, "--groups"))
			o.groups = (int)x;
		else if (!strcmp(f, "--per-group"))
			o.per_group = (int)x;
		else if (!strcmp(f, "--system"))
			o.system = (int)x;
		else if (!strcmp(f, "--question"))
			o.question = (int)x;
		else if (!strcmp(f, "--max-tokens"))
			o.max_tokens = (int)x;
		else if (!strcmp(f, "--concurrency"))
			o.concurrency = (int)x;
		else if (!strcmp(f, "--clients"))
			o.clients = (int)x;
		else if (!strcmp(f, "--rounds"))
			o.rounds = (int)x;
		else if (!strcmp(f, "--vocab"))
			o.vocab = (int)x;
		else if (!strcmp(f, "--seed"))
			o.seed = (uint64_t)x;
		else
			return usage();
	}
	if (!o.mode || o.vocab < 2 || o.concurrency < 1 || o.groups < 1 || o.per_group < 1 || o.clients < 1 ||
	    o.rounds < 1)
		return usage();
	bool shared = !strcmp(o.mode, "shared");
	if (o.system < 0)
		o.system = shared ? 512 : 0;
	if (o.question < 0)
		o.question = shared ? 64 : 96;
	if (o.max_tokens < 0)
		o.max_tokens = shared ? 32 : 16;
	struct allm_client_opts co = {.name = o.name, .cq_entries = 4096, .sq_entries = 256,
				      .arena_size = 64u << 20};
	allm_client_t *c;
	char err[256];
	if (allm_client_connect(&co, &c, err, sizeof(err))) {
		fprintf(stderr, "allm-bench-prefix: %s\n", err);
		return 1;
	}
	int n = shared ? o.groups * o.per_group : o.clients * o.rounds, rc;
	struct req *v = shared ? make_shared(&o, &n) : calloc((size_t)n, sizeof(struct req));
	if (!v) {
		fprintf(stderr, "allm-bench-prefix: out of memory\n");
		return 1;
	}
	double t0 = now_s();
	rc = shared ? run_shared(c, &o, v, n) : run_multiturn(c, &o, v);
	double wall = now_s() - t0;
	allm_client_disconnect(c);
	if (rc) {
		fprintf(stderr, "allm-bench-prefix: %s\n", strerror(-rc));
		return 1;
	}
	report(&o, v, n, wall);
	int failed = 0;
	for (int i = 0; i < n; i++) {
		failed += v[i].finish == ALLM_FINISH_ERROR;
		free(v[i].ids);
		free(v[i].out);
	}
	free(v);
	return failed ? 1 : 0;
}
