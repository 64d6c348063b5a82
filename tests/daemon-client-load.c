/* Description: a libadaptivellm client for the daemon integration tests (not a test by itself): load mode submits greedy requests (several in flight) and checks every one's ids against the expected ids of a --expect file; stall mode submits long requests and never drains its completion queue until SIGUSR1, then checks what the engine left it.
 *
 * Load mode:
 *   daemon-client-load --name NAME --expect FILE [--client K] [--requests 20]
 *       [--inflight N] [--max-tokens 24] [--ignore-eos] [--posix] [--timeout S]
 *       [--no-check]
 *   FILE: lines "KIND\tPROMPT\tIDS" (KIND T: text prompt, I: comma-separated ids;
 *   IDS: the expected generated ids, space-separated), as daemon-common.sh writes.
 *   Request i uses line (K * 3 + i) % lines; ids must match exactly and the
 *   request must end with eos or length. Prints "streaming" (flushed) after the
 *   first token, then one summary line "client K: R/R ok, T tokens, P preemptions,
 *   S s" and exits
 *   0, or prints FAIL lines and exits 1. --no-check only counts tokens (benchmarks).
 *
 * Stall mode:
 *   daemon-client-load --name NAME --stall N [--resubmit M] [--max-tokens 400]
 *       [--cq-entries E]
 *   Submits N requests (--ignore-eos), prints "submitted N", then reads nothing:
 *   SIGUSR1 -> submits M (default N) more, still not reading, and prints
 *   "resubmitted M";
 *   a second SIGUSR1 -> drains everything (prints "drained: ..."), checks that every
 *   request got exactly one FINAL, then submits one greedy request and checks it
 *   runs to its end (the engine serves a client that drains again).
 */
#include <adaptivellm/client.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct expect {
	char kind; /* 'T' or 'I' */
	char *text;
	int32_t *pids;
	size_t npids;
	int32_t *ids;
	size_t nids;
};

struct req {
	const struct expect *e;
	int32_t *ids;
	size_t nids, cap;
	uint64_t request_id;
	int finals;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

static size_t parse_list(const char *s, char sep, int32_t **ret)
{
	size_t n = 0, cap = 16;
	int32_t *v = xmalloc(cap * sizeof(*v));
	while (*s) {
		char *end;
		long x = strtol(s, &end, 10);
		if (end == s)
			break;
		if (n == cap)
			v = realloc(v, (cap *= 2) * sizeof(*v));
		if (!v)
			exit(2);
		v[n++] = (int32_t)x;
		s = end;
		while (*s == sep || *s == ' ')
			s++;
	}
	*ret = v;
	return n;
}

static int load_expect(const char *path, struct expect **ret)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return -1;
	}
	struct expect *v = NULL;
	int n = 0;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t1 || !t2)
			continue;
		*t1 = *t2 = '\0';
		v = realloc(v, (size_t)(n + 1) * sizeof(*v));
		if (!v)
			exit(2);
		struct expect *e = &v[n++];
		memset(e, 0, sizeof(*e));
		e->kind = line[0];
		e->text = strdup(t1 + 1);
		if (e->kind == 'I')
			e->npids = parse_list(e->text, ',', &e->pids);
		e->nids = parse_list(t2 + 1, ' ', &e->ids);
	}
	free(line);
	fclose(f);
	*ret = v;
	return n;
}

static void set_prompt(struct allm_request_params *p, const struct expect *e)
{
	if (e->kind == 'I') {
		p->prompt_ids = e->pids;
		p->n_prompt_ids = e->npids;
	} else {
		p->prompt = e->text;
		p->prompt_len = strlen(e->text);
	}
}

static void ids_add(struct req *r, int32_t id)
{
	if (r->nids == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 64;
		r->ids = realloc(r->ids, r->cap * sizeof(int32_t));
		if (!r->ids)
			exit(2);
	}
	r->ids[r->nids++] = id;
}

static void print_ids(const char *label, const int32_t *v, size_t n)
{
	fprintf(stderr, "  %s:", label);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %d", v[i]);
	fputc('\n', stderr);
}

struct opts {
	const char *name, *runtime_dir, *expect;
	int client, requests, inflight, max_tokens, stall, resubmit, timeout;
	uint32_t cq_entries;
	bool ignore_eos, posix, no_check;
};

static int connect_client(const struct opts *o, allm_client_t **c)
{
	char err[256];
	struct allm_client_opts co = {
		.name = o->name, .runtime_dir = o->runtime_dir, .posix_shm = o->posix,
		.cq_entries = o->cq_entries, .timeout_ms = 10000,
	};
	int r = allm_client_connect(&co, c, err, sizeof(err));
	if (r)
		fprintf(stderr, "FAIL client %d: connect: %s\n", o->client, err);
	return r;
}

static int run_load(const struct opts *o, struct expect *ex, int n_ex)
{
	allm_client_t *c;
	if (connect_client(o, &c))
		return 1;
	int R = o->requests, fails = 0, done = 0, next = 0, inflight = 0, rc = 1;
	struct req *rq = calloc((size_t)R, sizeof(*rq));
	if (!rq) {
		allm_client_disconnect(c);
		return 2;
	}
	for (int i = 0; i < R; i++)
		rq[i].e = &ex[(o->client * 3 + i) % n_ex];
	bool streaming = false;
	uint64_t tokens = 0, preemptions = 0;
	double t0 = now_s(), deadline = t0 + o->timeout;
	while (done < R) {
		while (next < R && inflight < o->inflight) {
			struct allm_request_params p;
			allm_request_params_init(&p);
			set_prompt(&p, rq[next].e);
			p.params.max_tokens = o->max_tokens;
			p.params.temperature = 0;
			p.params.ignore_eos = o->ignore_eos;
			p.user_tag = (uint64_t)next + 1000;
			int r = allm_client_submit(c, &p);
			if (r == -EAGAIN)
				break;
			if (r) {
				fprintf(stderr, "FAIL client %d: submit: %s\n", o->client, strerror(-r));
				goto out;
			}
			next++;
			inflight++;
		}
		struct allm_event ev;
		int r = allm_client_wait(c, &ev, 500);
		if (r == -EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "FAIL client %d: wait: %s (%d of %d done)\n", o->client,
				strerror(-r), done, R);
			goto out;
		}
		if (r == 0) {
			if (now_s() > deadline) {
				fprintf(stderr, "FAIL client %d: timed out with %d of %d done\n",
					o->client, done, R);
				goto out;
			}
			continue;
		}
		if (ev.user_tag < 1000 || ev.user_tag >= 1000u + (uint64_t)next) {
			fprintf(stderr, "FAIL client %d: event for unknown tag %llu\n", o->client,
				(unsigned long long)ev.user_tag);
			fails++;
			continue;
		}
		struct req *q = &rq[ev.user_tag - 1000];
		if (q->finals) {
			fprintf(stderr, "FAIL client %d: event after FINAL for request %llu\n",
				o->client, (unsigned long long)(ev.user_tag - 1000));
			fails++;
			continue;
		}
		switch (ev.kind) {
		case ALLM_EVENT_ACCEPTED:
			q->request_id = ev.request_id;
			break;
		case ALLM_EVENT_TOKEN:
			if (ev.token_id >= 0) {
				ids_add(q, ev.token_id);
				tokens++;
			}
			if (!streaming) {
				streaming = true;
				printf("streaming\n");
				fflush(stdout);
			}
			break;
		case ALLM_EVENT_FINAL:
			q->finals++;
			preemptions += ev.n_preemptions;
			done++;
			inflight--;
			if (ev.finish_reason != ALLM_FINISH_LENGTH && ev.finish_reason != ALLM_FINISH_EOS) {
				fprintf(stderr, "FAIL client %d: request %llu ended %s%s%s\n", o->client,
					(unsigned long long)(ev.user_tag - 1000),
					allm_finish_reason_name(ev.finish_reason), ev.error ? ": " : "",
					ev.error ? ev.error : "");
				fails++;
			} else if (!o->no_check && (q->nids != q->e->nids ||
						    memcmp(q->ids, q->e->ids, q->nids * sizeof(int32_t)))) {
				fprintf(stderr, "FAIL client %d: request %llu (prompt '%s'): wrong ids\n",
					o->client, (unsigned long long)(ev.user_tag - 1000), q->e->text);
				print_ids("want", q->e->ids, q->e->nids);
				print_ids("got ", q->ids, q->nids);
				fails++;
			} else if (ev.n_generated != q->nids) {
				fprintf(stderr, "FAIL client %d: FINAL says %u generated, got %zu tokens\n",
					o->client, ev.n_generated, q->nids);
				fails++;
			}
			break;
		}
	}
	double dt = now_s() - t0;
	printf("client %d: %d/%d ok, %llu tokens, %llu preemptions, %.3f s\n", o->client, R - fails,
	       R, (unsigned long long)tokens, (unsigned long long)preemptions, dt);
	fflush(stdout);
	rc = fails ? 1 : 0;
out:
	allm_client_disconnect(c);
	for (int i = 0; i < R; i++)
		free(rq[i].ids);
	free(rq);
	return rc;
}

static int submit_wave(const struct opts *o, allm_client_t *c, int first, int n, const struct expect *e)
{
	for (int i = first; i < first + n; i++) {
		struct allm_request_params p;
		allm_request_params_init(&p);
		set_prompt(&p, e);
		p.params.max_tokens = o->max_tokens;
		p.params.temperature = 0;
		p.params.ignore_eos = true;
		p.user_tag = (uint64_t)i;
		int r;
		double deadline = now_s() + 30;
		/* a full SQ (the engine takes SQEs as fast as it can answer them):
		 * wait for room without reading the CQ */
		while ((r = allm_client_submit(c, &p)) == -EAGAIN && now_s() < deadline) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		if (r) {
			fprintf(stderr, "FAIL stall client: submit %d: %s\n", i, strerror(-r));
			return -1;
		}
	}
	return 0;
}

/* Stall mode, at last draining: every one of the n requests must get exactly one
 * FINAL. Prints the "drained:" line; returns the number of failures. */
static int drain_stalled(allm_client_t *c, int n)
{
	int fails = 0;
	int *finals = calloc((size_t)n, sizeof(int));
	int *reasons = calloc((size_t)n, sizeof(int));
	uint64_t events = 0, tokens = 0, accepted = 0, n_final = 0, n_nobufs = 0;
	double deadline = now_s() + 20;
	while ((int)n_final < n && now_s() < deadline) {
		struct allm_event ev;
		int r = allm_client_wait(c, &ev, 200);
		if (r == 0 || r == -EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "FAIL stall client: wait: %s\n", strerror(-r));
			fails++;
			break;
		}
		events++;
		if (ev.user_tag >= (uint64_t)n) {
			fprintf(stderr, "FAIL stall client: unknown tag %llu\n", (unsigned long long)ev.user_tag);
			fails++;
			continue;
		}
		if (ev.kind == ALLM_EVENT_ACCEPTED)
			accepted++;
		else if (ev.kind == ALLM_EVENT_TOKEN)
			tokens++;
		else {
			n_final++;
			finals[ev.user_tag]++;
			reasons[ev.user_tag] = ev.finish_reason;
			if (ev.finish_reason == ALLM_FINISH_ERROR && ev.status == -ENOBUFS)
				n_nobufs++;
		}
	}
	int n_len = 0;
	for (int i = 0; i < n; i++) {
		if (finals[i] != 1) {
			fprintf(stderr, "FAIL stall client: request %d got %d FINALs\n", i, finals[i]);
			fails++;
		}
		n_len += reasons[i] == ALLM_FINISH_LENGTH;
	}
	printf("drained: %llu events (%llu accepted, %llu tokens, %llu finals: %llu not-draining "
	       "errors, %d length)\n",
	       (unsigned long long)events, (unsigned long long)accepted, (unsigned long long)tokens,
	       (unsigned long long)n_final, (unsigned long long)n_nobufs, n_len);
	fflush(stdout);
	free(finals);
	free(reasons);
	return fails;
}

/* Stall mode, drained: one greedy request must run to its end with its ids. */
static int serve_again(allm_client_t *c, const struct expect *e)
{
	struct allm_request_params p;
	allm_request_params_init(&p);
	set_prompt(&p, e);
	p.params.max_tokens = 24;
	p.params.temperature = 0;
	p.user_tag = 7777;
	int r = allm_client_submit(c, &p);
	struct req q = {.e = e};
	int final = 0;
	double deadline = now_s() + 20;
	while (!r && !final && now_s() < deadline) {
		struct allm_event ev;
		int w = allm_client_wait(c, &ev, 200);
		if (w <= 0)
			continue;
		if (ev.kind == ALLM_EVENT_TOKEN && ev.token_id >= 0)
			ids_add(&q, ev.token_id);
		if (ev.kind == ALLM_EVENT_FINAL) {
			final = ev.finish_reason;
			if (final == ALLM_FINISH_ERROR)
				fprintf(stderr, "after draining: error %s\n", ev.error);
		}
	}
	size_t want = e->nids < 24 ? e->nids : 24;
	bool ok = !r && (final == ALLM_FINISH_LENGTH || final == ALLM_FINISH_EOS) && q.nids == want &&
		  !memcmp(q.ids, e->ids, want * sizeof(int32_t));
	printf("after draining: %s\n", ok ? "served normally" : "NOT served");
	free(q.ids);
	return ok ? 0 : 1;
}

static int run_stall(const struct opts *o, struct expect *ex, int n_ex)
{
	allm_client_t *c;
	sigset_t set;
	int sig, N = o->stall, M = o->resubmit >= 0 ? o->resubmit : N;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (connect_client(o, &c))
		return 1;
	const struct expect *e = &ex[0];
	int fails = 1;
	if (submit_wave(o, c, 0, N, e))
		goto out;
	printf("submitted %d\n", N);
	fflush(stdout);
	sigwait(&set, &sig);
	if (submit_wave(o, c, N, M, e))
		goto out;
	printf("resubmitted %d\n", M);
	fflush(stdout);
	sigwait(&set, &sig);
	fails = drain_stalled(c, N + M);
	fails += serve_again(c, e);
out:
	allm_client_disconnect(c);
	return fails ? 1 : 0;
}
int main(int argc, char **argv)
{
	struct opts o = {.requests = 20, .inflight = -1, .max_tokens = 24, .timeout = 60, .resubmit = -1};
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(f, "--ignore-eos"))
			o.ignore_eos = true;
		else if (!strcmp(f, "--posix"))
			o.posix = true;
		else if (!strcmp(f, "--no-check"))
			o.no_check = true;
		else if (!v) {
			fprintf(stderr, "bad or incomplete flag %s\n", f);
			return 2;
		} else {
			i++;
			if (!strcmp(f, "--name"))
				o.name = v;
			else if (!strcmp(f, "--runtime-dir"))
				o.runtime_dir = v;
			else if (!strcmp(f, "--expect"))
				o.expect = v;
			else if (!strcmp(f, "--client"))
				o.client = atoi(v);
			else if (!strcmp(f, "--requests"))
				o.requests = atoi(v);
			else if (!strcmp(f, "--inflight"))
				o.inflight = atoi(v);
			else if (!strcmp(f, "--max-tokens"))
				o.max_tokens = atoi(v);
			else if (!strcmp(f, "--stall"))
				o.stall = atoi(v);
			else if (!strcmp(f, "--resubmit"))
				o.resubmit = atoi(v);
			else if (!strcmp(f, "--cq-entries"))
				o.cq_entries = (uint32_t)atoi(v);
			else if (!strcmp(f, "--timeout"))
				o.timeout = atoi(v);
			else {
				fprintf(stderr, "unknown flag %s\n", f);
				return 2;
			}
		}
	}
	if (!o.expect || o.requests <= 0 || o.max_tokens <= 0) {
		fprintf(stderr, "usage: see the comment at the top of daemon-client-load.c\n");
		return 2;
	}
	if (o.inflight <= 0)
		o.inflight = 1 + o.client % 5; /* 1..5 in flight, varying per client */
	struct expect *ex;
	int n_ex = load_expect(o.expect, &ex);
	if (n_ex <= 0) {
		fprintf(stderr, "%s: no expectations\n", o.expect);
		return 2;
	}
	int rc = o.stall > 0 ? run_stall(&o, ex, n_ex) : run_load(&o, ex, n_ex);
	for (int i = 0; i < n_ex; i++) {
		free(ex[i].text);
		free(ex[i].pids);
		free(ex[i].ids);
	}
	free(ex);
	return rc;
}
