/* Description: workloads: seeded determinism, synthetic length means (chatbot/alpaca/summary), context clipping, id range, Poisson arrivals, output distribution, JSONL parsing and its errors (with line numbers), and write/read round trip. */
#include "workload.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test-check.h"

static struct allm_wl_opts opts(const char *name, int64_t n, uint64_t seed)
{
	struct allm_wl_opts o = {
		.name_or_file = name,
		.n = n,
		.max_output = 64,
		.seed = seed,
		.rate = 0.0,
		.vocab_size = 32000,
		.max_context = 1 << 30,
		.min_id = 3,
	};
	return o;
}

static struct allm_workload *make(const struct allm_wl_opts *o)
{
	struct allm_workload *w = NULL;
	struct allm_err err = {{0}};
	int rc = allm_workload_create(o, &w, &err);
	CHECK(rc == 0 && w, "create %s: %d %s", o->name_or_file, rc, err.msg);
	return rc == 0 ? w : NULL;
}

/* Returns -errno, and the message in err. */
static int make_fail(const struct allm_wl_opts *o, struct allm_err *err)
{
	struct allm_workload *w = (struct allm_workload *)(uintptr_t)0x1;
	memset(err, 0, sizeof(*err));
	int rc = allm_workload_create(o, &w, err);
	CHECK(rc < 0, "%s unexpectedly succeeded", o->name_or_file);
	CHECK(w == (struct allm_workload *)(uintptr_t)0x1, "ret touched on failure");
	if (rc == 0 && w != (struct allm_workload *)(uintptr_t)0x1)
		allm_workload_free(w);
	return rc;
}

static bool same(const struct allm_workload *a, const struct allm_workload *b)
{
	if (a->n != b->n || a->n_clipped != b->n_clipped)
		return false;
	for (int64_t i = 0; i < a->n; i++) {
		const struct allm_wl_request *x = &a->reqs[i], *y = &b->reqs[i];
		if (x->index != y->index || x->arrival_s != y->arrival_s ||
		    x->n_prompt != y->n_prompt || x->max_tokens != y->max_tokens)
			return false;
		if ((x->prompt_ids == NULL) != (y->prompt_ids == NULL) ||
		    (x->prompt_ids && memcmp(x->prompt_ids, y->prompt_ids, (size_t)x->n_prompt * 4)))
			return false;
		if ((x->prompt_text == NULL) != (y->prompt_text == NULL) ||
		    (x->prompt_text && strcmp(x->prompt_text, y->prompt_text)))
			return false;
	}
	return true;
}

static void test_determinism(void)
{
	struct allm_wl_opts o = opts("chatbot", 300, 42);
	o.rate = 5.0;
	struct allm_workload *a = make(&o), *b = make(&o);
	o.seed = 43;
	struct allm_workload *c = make(&o);
	if (a && b && c) {
		CHECK(same(a, b), "same seed gave different workloads");
		CHECK(!same(a, c), "different seeds gave the same workload");
		CHECK(strcmp(a->name, "chatbot") == 0, "name %s", a->name);
		for (int64_t i = 0; i < a->n; i++)
			CHECK(a->reqs[i].index == i && !a->reqs[i].prompt_text, "req %lld", (long long)i);
	}
	allm_workload_free(a);
	allm_workload_free(b);
	allm_workload_free(c);
}

static void test_means(void)
{
	static const struct {
		const char *name;
		double mean;
	} t[] = {{"chatbot", 17.02}, {"alpaca", 19.66}, {"summary", 340.48}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct allm_wl_opts o = opts(t[i].name, 5000, 7);
		struct allm_workload *w = make(&o);
		if (!w)
			continue;
		double sum = 0;
		int32_t lo = INT32_MAX, hi = 0;
		for (int64_t k = 0; k < w->n; k++) {
			sum += w->reqs[k].n_prompt;
			lo = w->reqs[k].n_prompt < lo ? w->reqs[k].n_prompt : lo;
			hi = w->reqs[k].n_prompt > hi ? w->reqs[k].n_prompt : hi;
			CHECK(w->reqs[k].max_tokens == 64, "max_tokens %d", w->reqs[k].max_tokens);
		}
		double mean = sum / (double)w->n;
		printf("%-8s mean input %.2f (target %.2f), range [%d, %d]\n", t[i].name, mean,
		       t[i].mean, lo, hi);
		CHECK(fabs(mean - t[i].mean) <= 0.10 * t[i].mean, "%s mean %.2f vs %.2f", t[i].name,
		      mean, t[i].mean);
		CHECK(lo >= 1 && hi <= 2048, "%s range [%d, %d]", t[i].name, lo, hi);
		CHECK(w->n_clipped == 0, "%s clipped %lld with a huge context", t[i].name,
		      (long long)w->n_clipped);
		allm_workload_free(w);
	}
}

static void test_clipping_and_ids(void)
{
	struct allm_wl_opts o = opts("summary", 1000, 11);
	struct allm_workload *full = make(&o);
	o.max_context = 512;
	o.max_output = 256;
	o.vocab_size = 512;
	struct allm_workload *w = make(&o);
	o.max_context = 1 << 30;
	struct allm_workload *wide = make(&o); /* same draws, unclipped, same vocab */
	if (w && full && wide) {
		CHECK(w->n_clipped > 0, "summary at context 512 clipped nothing");
		int64_t over = 0;
		for (int64_t i = 0; i < w->n; i++) {
			const struct allm_wl_request *q = &w->reqs[i];
			CHECK(q->n_prompt >= 1 && q->n_prompt + q->max_tokens <= 512 && q->max_tokens == 256,
			      "req %lld: %d + %d", (long long)i, q->n_prompt, q->max_tokens);
			for (int32_t k = 0; k < q->n_prompt; k++)
				CHECK(q->prompt_ids[k] >= 3 && q->prompt_ids[k] < 512, "id %d",
				      q->prompt_ids[k]);
			/* A clipped prompt is a prefix of the unclipped one. */
			const struct allm_wl_request *u = &wide->reqs[i];
			CHECK(q->n_prompt <= u->n_prompt &&
				      !memcmp(q->prompt_ids, u->prompt_ids, (size_t)q->n_prompt * 4),
			      "req %lld not a prefix", (long long)i);
			CHECK(u->n_prompt == full->reqs[i].n_prompt, "length depends on vocab");
			over += u->n_prompt + 256 > 512;
		}
		CHECK(over == w->n_clipped, "n_clipped %lld, expected %lld", (long long)w->n_clipped,
		      (long long)over);
		printf("summary at context 512 / output 256: %lld of %lld clipped\n",
		       (long long)w->n_clipped, (long long)w->n);
	}
	allm_workload_free(full);
	allm_workload_free(w);
	allm_workload_free(wide);

	/* An output longer than the context: input 1, output shrinks to fit. */
	o = opts("chatbot", 50, 3);
	o.max_context = 100;
	o.max_output = 300;
	w = make(&o);
	if (w) {
		CHECK(w->n_clipped == 50, "clipped %lld", (long long)w->n_clipped);
		for (int64_t i = 0; i < w->n; i++)
			CHECK(w->reqs[i].n_prompt == 1 && w->reqs[i].max_tokens == 99, "%d + %d",
			      w->reqs[i].n_prompt, w->reqs[i].max_tokens);
	}
	allm_workload_free(w);
}

static void test_arrivals(void)
{
	struct allm_wl_opts o = opts("alpaca", 5000, 5);
	struct allm_workload *w = make(&o);
	if (w)
		for (int64_t i = 0; i < w->n; i++)
			CHECK(w->reqs[i].arrival_s == 0.0, "rate 0 arrival %g", w->reqs[i].arrival_s);
	allm_workload_free(w);

	o.rate = 20.0;
	w = make(&o);
	if (w) {
		CHECK(w->reqs[0].arrival_s == 0.0, "first arrival %g", w->reqs[0].arrival_s);
		bool mono = true;
		for (int64_t i = 1; i < w->n; i++)
			mono &= w->reqs[i].arrival_s >= w->reqs[i - 1].arrival_s;
		CHECK(mono, "arrivals decrease");
		double gap = w->reqs[w->n - 1].arrival_s / (double)(w->n - 1);
		printf("rate 20: mean gap %.5f s (want 0.05)\n", gap);
		CHECK(fabs(gap - 0.05) <= 0.005, "mean gap %g", gap);
	}
	allm_workload_free(w);
}

static void test_output_dist(void)
{
	struct allm_wl_opts o = opts("chatbot", 5000, 9);
	o.max_output = 128;
	o.output_dist = "uniform";
	struct allm_workload *w = make(&o);
	if (w) {
		double sum = 0;
		int32_t lo = INT32_MAX, hi = 0;
		for (int64_t i = 0; i < w->n; i++) {
			int32_t m = w->reqs[i].max_tokens;
			sum += m;
			lo = m < lo ? m : lo;
			hi = m > hi ? m : hi;
		}
		CHECK(lo == 1 && hi == 128, "uniform range [%d, %d]", lo, hi);
		CHECK(fabs(sum / (double)w->n - 64.5) < 3.0, "uniform mean %g", sum / (double)w->n);
	}
	allm_workload_free(w);

	struct allm_err err;
	o.output_dist = "zipf";
	CHECK(make_fail(&o, &err) == -EINVAL && strstr(err.msg, "uniform"), "%s", err.msg);
}

static void test_bad_options(void)
{
	struct allm_err err;
	struct allm_wl_opts o = opts("no-such-workload", 10, 1);
	make_fail(&o, &err);
	CHECK(strstr(err.msg, "no-such-workload") && strstr(err.msg, "chatbot") &&
		      strstr(err.msg, "alpaca") && strstr(err.msg, "summary"),
	      "unknown-name message: %s", err.msg);
	o = opts("chatbot", 10, 1);
	o.max_output = 0;
	CHECK(make_fail(&o, &err) == -EINVAL, "max_output 0");
	o = opts("chatbot", 0, 1);
	CHECK(make_fail(&o, &err) == -EINVAL, "synthetic n 0");
	o = opts("chatbot", 10, 1);
	o.vocab_size = 3;
	CHECK(make_fail(&o, &err) == -EINVAL, "empty id range");
	o = opts("chatbot", 10, 1);
	o.rate = -1;
	CHECK(make_fail(&o, &err) == -EINVAL, "negative rate");
}

static char tmpdir[256];

static const char *write_file(const char *name, const char *text)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return NULL;
	fputs(text, f);
	fclose(f);
	return path;
}

static void test_jsonl_parse(void)
{
	const char *path = write_file("ok.jsonl",
				      "{\"prompt_ids\": [5, 6, 7], \"max_tokens\": 10}\n"
				      "\n"
				      "   \n"
				      "{\"prompt\": \"Once upon a time\", \"arrival_s\": 0.5}\n"
				      "{\"prompt_ids\": [9], \"max_tokens\": 3, \"arrival_s\": 1.25}\r\n"
				      "{\"prompt_ids\": [10, 11], \"arrival_s\": 2}");
	CHECK(path, "write");
	struct allm_wl_opts o = opts(path, 0, 1);
	o.max_output = 32;
	o.vocab_size = 100;
	struct allm_workload *w = make(&o);
	if (w) {
		CHECK(w->n == 4, "n %lld", (long long)w->n);
		CHECK(strcmp(w->name, "ok.jsonl") == 0, "name %s", w->name);
		const struct allm_wl_request *q = w->reqs;
		CHECK(q[0].n_prompt == 3 && q[0].prompt_ids[2] == 7 && q[0].max_tokens == 10 &&
			      q[0].arrival_s == 0 && !q[0].prompt_text,
		      "line 1");
		CHECK(q[1].n_prompt == 0 && !q[1].prompt_ids && q[1].prompt_text &&
			      !strcmp(q[1].prompt_text, "Once upon a time") && q[1].max_tokens == 32 &&
			      q[1].arrival_s == 0.5,
		      "text line");
		CHECK(q[2].n_prompt == 1 && q[2].prompt_ids[0] == 9 && q[2].max_tokens == 3 &&
			      q[2].arrival_s == 1.25,
		      "line 5");
		CHECK(q[3].n_prompt == 2 && q[3].max_tokens == 32 && q[3].arrival_s == 2.0, "last line");
		for (int64_t i = 0; i < w->n; i++)
			CHECK(q[i].index == i, "index");
	}
	allm_workload_free(w);

	/* -n takes the first lines; larger than the file takes them all. */
	o.n = 2;
	w = make(&o);
	CHECK(w && w->n == 2 && w->reqs[1].prompt_text, "-n 2");
	allm_workload_free(w);
	o.n = 1000;
	w = make(&o);
	CHECK(w && w->n == 4, "-n 1000 -> %lld", w ? (long long)w->n : -1LL);
	allm_workload_free(w);

	/* Rate > 0 replaces the file's arrivals with the seeded Poisson ones. */
	o.n = 0;
	o.rate = 100.0;
	w = make(&o);
	CHECK(w && w->reqs[0].arrival_s == 0.0 && w->reqs[1].arrival_s != 0.5, "rate override");
	allm_workload_free(w);

	/* Context clipping applies to file prompts too. */
	o.rate = 0;
	o.max_context = 12;
	w = make(&o);
	CHECK(w && w->n_clipped == 2 && w->reqs[0].n_prompt == 2 && w->reqs[0].max_tokens == 10 &&
		      w->reqs[3].n_prompt == 1 && w->reqs[3].max_tokens == 11,
	      "file clipping");
	if (w) {
		/* A caller that tokenizes the text fits it afterwards. */
		struct allm_wl_request *t = &w->reqs[1];
		t->prompt_ids = allm_malloc(20 * sizeof(int32_t));
		for (int k = 0; t->prompt_ids && k < 20; k++)
			t->prompt_ids[k] = k;
		t->n_prompt = 20;
		CHECK(allm_workload_fit_context(w, 12) == 0 && w->n_clipped == 3 && t->n_prompt == 1 &&
			      t->max_tokens == 11,
		      "fit_context %lld %d %d", (long long)w->n_clipped, t->n_prompt, t->max_tokens);
	}
	allm_workload_free(w);
}

static void expect_line_error(const char *name, const char *text, const char *where, const char *what)
{
	const char *path = write_file(name, text);
	struct allm_wl_opts o = opts(path, 0, 1);
	o.vocab_size = 100;
	struct allm_err err;
	int rc = make_fail(&o, &err);
	CHECK(rc == -EINVAL && strstr(err.msg, where) && strstr(err.msg, what),
	      "%s: rc %d msg '%s' (want '%s' and '%s')", name, rc, err.msg, where, what);
}

static void test_jsonl_errors(void)
{
	expect_line_error("bad1.jsonl", "{\"prompt_ids\": [1]}\n\n{\"prompt_ids\": [1,\n",
			  "bad1.jsonl:3:", "malformed");
	expect_line_error("bad2.jsonl", "{\"prompt_ids\": [1]}\n{\"prompt_ids\": [1, 100]}\n",
			  "bad2.jsonl:2:", "prompt_ids[1]");
	expect_line_error("bad3.jsonl", "{\"prompt_ids\": [-1]}\n", "bad3.jsonl:1:", "prompt_ids[0]");
	expect_line_error("bad4.jsonl", "\n{\"max_tokens\": 5}\n", "bad4.jsonl:2:", "prompt");
	expect_line_error("bad5.jsonl", "{\"prompt\": \"x\", \"max_tokens\": 0}\n", "bad5.jsonl:1:",
			  "max_tokens");
	expect_line_error("bad6.jsonl", "[1, 2]\n", "bad6.jsonl:1:", "object");
	expect_line_error("bad7.jsonl", "{\"prompt_ids\": []}\n", "bad7.jsonl:1:", "non-empty");
	expect_line_error("bad8.jsonl", "{\"prompt\": 5}\n", "bad8.jsonl:1:", "string");
	expect_line_error("bad9.jsonl", "{\"prompt\": \"a\", \"arrival_s\": 2}\n{\"prompt\": \"b\", \"arrival_s\": 1}\n",
			  "bad9.jsonl:2:", "arrival_s");
	expect_line_error("empty.jsonl", "\n\n", "empty.jsonl", "no requests");
}

static void test_round_trip(void)
{
	struct allm_wl_opts o = opts("summary", 200, 77);
	o.rate = 3.7;
	o.max_context = 512;
	o.max_output = 128;
	o.output_dist = "uniform";
	struct allm_workload *w = make(&o);
	char path[512];
	snprintf(path, sizeof(path), "%s/trace.jsonl", tmpdir);
	struct allm_err err = {{0}};
	if (w) {
		int rc = allm_workload_write_jsonl(w, path, &err);
		CHECK(rc == 0, "write: %s", err.msg);
		struct allm_wl_opts r = opts(path, 0, 999); /* other seed: nothing may be redrawn */
		r.max_context = 512;
		r.max_output = 1;
		struct allm_workload *b = make(&r);
		if (b) {
			int64_t clipped = w->n_clipped;
			w->n_clipped = 0; /* the replay is already clipped */
			CHECK(same(w, b), "round trip differs");
			w->n_clipped = clipped;
		}
		allm_workload_free(b);
	}
	allm_workload_free(w);
	CHECK(allm_workload_write_jsonl(&(struct allm_workload){0}, "/nonexistent/dir/x.jsonl", &err) < 0,
	      "write to a missing directory succeeded");
}

int main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(tmpdir, sizeof(tmpdir), "%s/allm-test-workload-XXXXXX", base);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	size_t mem0 = allm_mem_in_use();
	test_determinism();
	test_means();
	test_clipping_and_ids();
	test_arrivals();
	test_output_dist();
	test_bad_options();
	test_jsonl_parse();
	test_jsonl_errors();
	test_round_trip();
	CHECK(allm_mem_in_use() == mem0, "leaked %zu bytes", allm_mem_in_use() - mem0);

	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	if (n_fail) {
		fprintf(stderr, "%d failure(s)\n", n_fail);
		return 1;
	}
	printf("workload: ok\n");
	return 0;
}
