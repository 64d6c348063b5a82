/* Description: the sampler: greedy ties, seeded reproducibility, top-k / top-p truncation, the full-row sort's order (ties by id) past ALLM_TOPK_MAX, argmax and the host top-k against plain restatements, temperature frequencies, repetition / frequency / presence penalties against their formulas, log-probabilities against a restatement, a logit bias, min_tokens' mask, and parameter validation. */
#include "sampler.h"

#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-check.h"

/* Deterministic logits for the tests (not the sampler's RNG). */
static uint64_t lcg_state = 12345;
static float rand_logit(void)
{
	lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((lcg_state >> 40) & 0xffff) / 65536.0f * 8.0f - 4.0f;
}

/* The sampler's tests start from greedy (the table's default temperature is 1). */
static void greedy(struct allm_params *p)
{
	allm_params_init(p);
	p->temperature = 0.0f;
}

/* The engine's check of a request's parameters (params.h's table). */
static int check(const struct allm_params *p, struct allm_err *err)
{
	return allm_params_check(p, err->msg, sizeof(err->msg));
}

static void sampling(struct allm_params *p, float t, int32_t k, float top_p, uint64_t seed)
{
	greedy(p);
	p->temperature = t;
	p->top_k = k;
	p->top_p = top_p;
	p->seed = seed;
}

static void test_greedy_ties(void)
{
	float l[10] = {0, 1, 2, 5, -1, 4, 0, 5, 3, 2};
	struct allm_params p;
	struct allm_sampler s;

	CHECK(allm_argmax(l, 10) == 3, "argmax of a tie at 3 and 7 is %d, want 3", allm_argmax(l, 10));
	float all_eq[6] = {1, 1, 1, 1, 1, 1};
	CHECK(allm_argmax(all_eq, 6) == 0, "argmax of equal logits is %d, want 0", allm_argmax(all_eq, 6));
	float neg[4] = {-9, -3, -3, -8};
	CHECK(allm_argmax(neg, 4) == 1, "argmax of negative logits is %d, want 1", allm_argmax(neg, 4));
	float last[5] = {0, 0, 0, 0, 1};
	CHECK(allm_argmax(last, 5) == 4, "argmax of a maximum at the end is %d", allm_argmax(last, 5));

	greedy(&p);
	CHECK(p.temperature == 0.0f && p.top_k == 0 && p.top_p == 1.0f && p.seed == 0,
	      "defaults are not greedy/no-topk/no-topp/seed 0");
	CHECK(allm_sampler_init(&s, &p, NULL, 0, 10) == 0, "init");
	for (int i = 0; i < 5; i++)
		CHECK(allm_sampler_sample(&s, l) == 3, "greedy sampler tie gives not 3");
	allm_sampler_fini(&s);
}

/* allm_argmax against the scan it stands for (from index 0, move on a strict >):
 * rows of every length to 100 with ties, NaNs, infinities and both zeros, the
 * maximum anywhere (in the 16-wide body or the tail). */
static int32_t scan_argmax(const float *l, int32_t n)
{
	int32_t best = 0;
	for (int32_t i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i;
	return best;
}

static void test_argmax_edges(void)
{
	static const float pick[] = { 0.0f, -0.0f, 1.0f, -1.0f, 2.0f, INFINITY, -INFINITY, NAN, 2.0f, 1.0f };
	uint64_t h = 99;
	for (int32_t n = 1; n <= 100; n++)
		for (int round = 0; round < 40; round++) {
			float l[100];
			for (int32_t i = 0; i < n; i++) {
				h = h * 6364136223846793005ull + 1442695040888963407ull;
				/* rounds by 10: mostly small values, then NaNs and infinities mixed in */
				l[i] = pick[(h >> 33) % (round < 10 ? 5 : round < 20 ? 8 : 10)];
			}
			int32_t want = scan_argmax(l, n), got = allm_argmax(l, n);
			CHECK(got == want, "argmax of a row of %d (round %d): %d, the scan gives %d", n, round,
			      got, want);
		}
	float z[3] = { -0.0f, 0.0f, -1.0f };
	CHECK(allm_argmax(z, 3) == 0, "-0 then +0: %d, want 0 (equal under >)", allm_argmax(z, 3));
	/* a NaN after the maximum in the same lane of the 16-wide pass */
	float lane[33] = { 0 };
	lane[1] = 7.0f, lane[17] = NAN;
	CHECK(allm_argmax(lane, 33) == 1, "a NaN 16 after the maximum: %d, want 1", allm_argmax(lane, 33));
	float nan0[20] = { NAN, 5.0f };
	CHECK(allm_argmax(nan0, 20) == 0, "a NaN at 0 stays: %d", allm_argmax(nan0, 20));
}

/* allm_topk_host against a sort: the k best by (value descending, id ascending; -0
 * and +0 equal), rows of ties, zeros and infinities, NaNs only past the first k
 * (where they never enter), short rows and rows long enough for the 16-wide skip. */
static int by_rank(const void *a, const void *b)
{
	const float *x = a, *y = b; /* {value, id} pairs */
	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : 1;
}

static void test_topk_host(void)
{
	static const float pick[] = { 0.0f, -0.0f, 1.0f, -1.0f, 2.0f, 3.0f, INFINITY, -INFINITY, 0.5f };
	static const int32_t lens[] = { 1, 2, 17, 40, 100, 1000, 32000 }, ks[] = { 1, 2, 5, 40, 256 };
	float *row = malloc(32000 * sizeof(float)), *pairs = malloc(32000 * 2 * sizeof(float));
	float vals[256];
	int32_t ids[256];
	uint64_t heap[256], h = 5;
	for (size_t li = 0; li < ALLM_ARRAY_SIZE(lens); li++)
		for (size_t ki = 0; ki < ALLM_ARRAY_SIZE(ks); ki++)
			for (int round = 0; round < 4; round++) {
				int32_t V = lens[li], k = ks[ki], n = 0;
				if (k > V)
					continue;
				for (int32_t i = 0; i < V; i++) {
					h = h * 6364136223846793005ull + 1442695040888963407ull;
					/* round 0: few values (ties); 1: many; 2: rising; 3: NaNs */
					float v = round == 1 ? (float)((h >> 33) % 100000) / 7.0f
						  : round == 2 ? (float)i * 0.25f
							       : pick[(h >> 33) % ALLM_ARRAY_SIZE(pick)];
					if (round == 3 && i >= k && (h >> 20) % 3 == 0)
						v = NAN;
					row[i] = v;
					if (v == v) /* the sort's items: NaNs never enter */
						pairs[2 * n] = v, pairs[2 * n + 1] = (float)i, n++;
				}
				qsort(pairs, (size_t)n, 2 * sizeof(float), by_rank);
				allm_topk_host(row, V, k, vals, ids, heap);
				int bad = 0;
				for (int32_t j = 0; j < k; j++)
					bad += ids[j] != (int32_t)pairs[2 * j + 1] ||
					       memcmp(&vals[j], &row[ids[j]], sizeof(float));
				CHECK(bad == 0, "top-%d of %d (round %d): %d of the k differ from a sort", k, V,
				      round, bad);
			}
	free(row);
	free(pairs);
}

static void test_temperature_zero_is_greedy(void)
{
	enum { V = 300 };
	float l[V];
	struct allm_params p;
	struct allm_sampler s;
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < V; i++)
			l[i] = rand_logit();
		/* top-k/top-p settings must not matter when greedy */
		sampling(&p, 0.0f, round % 3 ? 7 : 0, round % 2 ? 0.5f : 1.0f, (uint64_t)round);
		CHECK(allm_sampler_init(&s, &p, NULL, 0, V) == 0, "init");
		int32_t want = allm_argmax(l, V), got = allm_sampler_sample(&s, l);
		CHECK(got == want, "temperature 0 gave %d, argmax is %d", got, want);
		allm_sampler_fini(&s);
	}
}

static void draw(const float *l, int32_t V, const struct allm_params *p, int n, int32_t *out)
{
	struct allm_sampler s;
	if (allm_sampler_init(&s, p, NULL, 0, V)) {
		CHECK(0, "sampler init failed");
		return;
	}
	for (int i = 0; i < n; i++)
		out[i] = allm_sampler_sample(&s, l);
	allm_sampler_fini(&s);
}

static void test_seeds(void)
{
	enum { V = 64, N = 200 };
	float l[V];
	int32_t a[N], b[N], c[N];
	struct allm_params p;
	for (int i = 0; i < V; i++)
		l[i] = rand_logit() * 0.3f; /* flat enough that many ids are likely */
	sampling(&p, 1.0f, 0, 1.0f, 42);
	draw(l, V, &p, N, a);
	draw(l, V, &p, N, b);
	CHECK(!memcmp(a, b, sizeof(a)), "same seed gave different sequences");
	p.seed = 43;
	draw(l, V, &p, N, c);
	CHECK(memcmp(a, c, sizeof(a)), "seeds 42 and 43 gave the same %d samples", N);
	int differ = 0, distinct = 0;
	bool seen[V] = {0};
	for (int i = 0; i < N; i++) {
		differ += a[i] != c[i];
		distinct += !seen[a[i]];
		seen[a[i]] = true;
	}
	CHECK(differ > N / 2, "seeds 42 and 43 agree on %d of %d samples", N - differ, N);
	CHECK(distinct > 10, "only %d distinct ids in %d samples of a flat distribution", distinct, N);
	/* the same seed with top-k and top-p is reproducible too */
	sampling(&p, 0.9f, 10, 0.9f, 7);
	draw(l, V, &p, N, a);
	draw(l, V, &p, N, b);
	CHECK(!memcmp(a, b, sizeof(a)), "same seed with top-k/top-p gave different sequences");
}

static void test_top_k_one_and_tiny_top_p(void)
{
	enum { V = 200, N = 1000 };
	float l[V];
	int32_t out[N];
	struct allm_params p;
	for (int i = 0; i < V; i++)
		l[i] = rand_logit() * 0.2f; /* flat: a real sample would rarely be the argmax */
	int32_t want = allm_argmax(l, V);
	sampling(&p, 1.0f, 1, 1.0f, 1);
	draw(l, V, &p, N, out);
	for (int i = 0; i < N; i++)
		if (out[i] != want) {
			CHECK(0, "top_k=1 sampled %d, argmax is %d", out[i], want);
			break;
		}
	sampling(&p, 1.5f, 0, 1e-6f, 2);
	draw(l, V, &p, N, out);
	for (int i = 0; i < N; i++)
		if (out[i] != want) {
			CHECK(0, "top_p=1e-6 sampled %d, argmax is %d", out[i], want);
			break;
		}
}

static int cmp_desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x > y ? -1 : x < y;
}

static void test_top_k(void)
{
	enum { V = 100, N = 10000, K = 5 };
	float l[V], sorted[V];
	int32_t *out = malloc(N * sizeof(int32_t));
	int count[V] = {0};
	struct allm_params p;
	for (int i = 0; i < V; i++)
		l[i] = rand_logit() * 0.25f; /* the top 5 hold a small share: truncation matters */
	memcpy(sorted, l, sizeof(l));
	qsort(sorted, V, sizeof(float), cmp_desc);
	float kth = sorted[K - 1];
	CHECK(sorted[K] < kth, "test logits have a tie at the k-th place");
	sampling(&p, 1.0f, K, 1.0f, 99);
	draw(l, V, &p, N, out);
	int outside = 0;
	for (int i = 0; i < N; i++) {
		count[out[i]]++;
		outside += l[out[i]] < kth;
	}
	CHECK(outside == 0, "top_k=%d sampled %d times outside the %d most likely ids", K, outside, K);
	/* within the top k, frequencies follow the renormalised softmax */
	double z = 0;
	for (int i = 0; i < V; i++)
		if (l[i] >= kth)
			z += exp(l[i]);
	for (int i = 0; i < V; i++) {
		if (l[i] < kth)
			continue;
		double want = exp(l[i]) / z, got = (double)count[i] / N;
		CHECK(fabs(got - want) < 0.02, "top_k: id %d frequency %.4f, want %.4f", i, got, want);
	}
	free(out);
}

/* top_k past ALLM_TOPK_MAX sorts the whole row (the full-row path): by descending
 * probability, equal ones by ascending id. 20000 logits in 64 classes of equal
 * values, the cut inside the second class: only its lowest ids may be drawn. */
static void test_full_row_order(void)
{
	enum { V = 20000, N = 600, K = 500, CLASSES = 64 };
	float *l = malloc(V * sizeof(float));
	int32_t *out = malloc(N * sizeof(int32_t));
	uint64_t h = 7;
	int32_t n_top = 0;
	for (int i = 0; i < V; i++) {
		h = h * 6364136223846793005ull + 1442695040888963407ull;
		int c = (int)((h >> 33) % CLASSES);
		l[i] = -0.125f * (float)c; /* a class's exp() apart from the next one's */
		n_top += c == 0;
	}
	CHECK(n_top < K, "class 0 holds %d ids: the cut must fall in class 1", n_top);
	/* the ids K - n_top first of class 1 are kept, the rest of it is not */
	int32_t last_kept = -1, left = K - n_top, n_class1 = 0;
	for (int i = 0; i < V; i++)
		if (l[i] == -0.125f && n_class1++ < left)
			last_kept = i;
	CHECK(n_class1 > left, "class 1 holds only %d ids", n_class1);
	struct allm_params p;
	sampling(&p, 1.0f, K, 1.0f, 21);
	draw(l, V, &p, N, out);
	int outside = 0, boundary = 0;
	for (int i = 0; i < N; i++) {
		float v = l[out[i]];
		outside += v < -0.125f || (v == -0.125f && out[i] > last_kept);
		boundary += v == -0.125f;
	}
	CHECK(outside == 0, "top_k=%d drew %d of %d outside the %d first ids by (probability, id)", K,
	      outside, N, K);
	CHECK(boundary > N / 10, "the kept part of class 1 drawn only %d of %d times", boundary, N);
	/* top_p alone takes the same order: a nucleus of 30 % of the mass ends inside
	 * class 2 (classes 0-2 hold about 31 %) and never reaches class 3 */
	sampling(&p, 1.0f, 0, 0.3f, 22);
	draw(l, V, &p, N, out);
	int deep = 0;
	for (int i = 0; i < N; i++)
		deep += l[out[i]] < -0.25f;
	CHECK(deep == 0, "top_p=0.3 drew %d of %d from below the third class", deep, N);
	free(l);
	free(out);
}

static void test_top_p(void)
{
	enum { V = 8, N = 10000 };
	/* probabilities by construction; ids shuffled so order != id */
	const double prob[V] = {0.05, 0.30, 0.02, 0.50, 0.03, 0.04, 0.01, 0.05};
	float l[V];
	int32_t *out = malloc(N * sizeof(int32_t));
	struct allm_params p;
	for (int i = 0; i < V; i++)
		l[i] = (float)log(prob[i]);

	/* 0.5 < 0.75 <= 0.5 + 0.3: the nucleus is {3, 1} */
	int count[V] = {0};
	sampling(&p, 1.0f, 0, 0.75f, 5);
	draw(l, V, &p, N, out);
	for (int i = 0; i < N; i++)
		count[out[i]]++;
	CHECK(count[3] + count[1] == N, "top_p=0.75 sampled %d times outside the nucleus {3,1}",
	      N - count[3] - count[1]);
	CHECK(fabs(count[3] / (double)N - 0.5 / 0.8) < 0.02, "top_p=0.75: id 3 frequency %.4f, want %.4f",
	      count[3] / (double)N, 0.5 / 0.8);

	/* 0.83: {3, 1} reach 0.80, so one of the 0.05 ids joins: the lower id, 0, on a tie */
	memset(count, 0, sizeof(count));
	sampling(&p, 1.0f, 0, 0.83f, 6);
	draw(l, V, &p, N, out);
	for (int i = 0; i < N; i++)
		count[out[i]]++;
	int in = count[3] + count[1] + count[0] + count[7];
	CHECK(in == N, "top_p=0.83 sampled %d times outside {3,1,0/7}", N - in);
	CHECK(count[0] + count[7] > 0, "top_p=0.83 never sampled the third token");
	CHECK(count[0] == 0 || count[7] == 0, "top_p=0.83 sampled both 0.05 ids (nucleus of 4)");

	/* top-k and top-p together: k = 1 of the nucleus */
	memset(count, 0, sizeof(count));
	sampling(&p, 1.0f, 2, 0.99f, 8);
	draw(l, V, &p, N, out);
	for (int i = 0; i < N; i++)
		count[out[i]]++;
	CHECK(count[3] + count[1] == N, "top_k=2 top_p=0.99 sampled outside {3,1}");
	free(out);
}

/* min_p: only tokens at least min_p times as likely as the best, after top-k and
 * top-p; through the full row and the top-k candidates alike. */
static void test_min_p(void)
{
	enum { V = 8, N = 10000 };
	const double prob[V] = {0.05, 0.30, 0.02, 0.50, 0.03, 0.04, 0.01, 0.05};
	float l[V];
	int32_t *out = malloc(N * sizeof(int32_t));
	struct allm_params p;
	for (int i = 0; i < V; i++)
		l[i] = (float)log(prob[i]);
	for (int k = 0; k <= 4; k += 4) { /* the full row, then the top-k path */
		int count[V] = {0};
		sampling(&p, 1.0f, k, 1.0f, 11);
		p.min_p = 0.5f; /* 0.3 / 0.5 = 0.6 stays, 0.05 / 0.5 = 0.1 goes */
		draw(l, V, &p, N, out);
		for (int i = 0; i < N; i++)
			count[out[i]]++;
		CHECK(count[3] + count[1] == N, "min_p=0.5 (top_k %d) sampled %d times outside {3,1}", k,
		      N - count[3] - count[1]);
		CHECK(fabs(count[3] / (double)N - 0.5 / 0.8) < 0.02, "min_p=0.5 (top_k %d): id 3 frequency %.4f", k,
		      count[3] / (double)N);
		/* 0.09: the 0.05 ids (ratio 0.1) stay, 0.04 and below go */
		memset(count, 0, sizeof(count));
		sampling(&p, 1.0f, k, 1.0f, 12);
		p.min_p = 0.09f;
		draw(l, V, &p, N, out);
		for (int i = 0; i < N; i++)
			count[out[i]]++;
		int in = count[3] + count[1] + count[0] + count[7];
		CHECK(in == N, "min_p=0.09 (top_k %d) sampled %d times below the cut", k, N - in);
		CHECK(k == 4 || (count[0] > 0 && count[7] > 0), "min_p=0.09 never drew a 0.05 id");
	}
	/* min_p 1: the best alone */
	sampling(&p, 1.0f, 0, 1.0f, 13);
	p.min_p = 1.0f;
	draw(l, V, &p, 200, out);
	for (int i = 0; i < 200; i++)
		CHECK(out[i] == 3, "min_p=1 drew %d", out[i]);
	p.min_p = 1.5f;
	struct allm_err err;
	CHECK(check(&p, &err) == -EINVAL && strstr(err.msg, "min_p"), "min_p 1.5 accepted");
	free(out);
}

static void check_freqs(const float *l, int32_t V, float T, uint64_t seed)
{
	enum { N = 20000 };
	int32_t *out = malloc(N * sizeof(int32_t));
	int *count = calloc((size_t)V, sizeof(int));
	double *want = calloc((size_t)V, sizeof(double)), z = 0, mx = -INFINITY;
	struct allm_params p;
	sampling(&p, T, 0, 1.0f, seed);
	draw(l, V, &p, N, out);
	for (int i = 0; i < N; i++)
		count[out[i]]++;
	for (int i = 0; i < V; i++)
		mx = fmax(mx, l[i] / T);
	for (int i = 0; i < V; i++)
		z += want[i] = exp(l[i] / T - mx);
	for (int i = 0; i < V; i++) {
		double got = count[i] / (double)N;
		want[i] /= z;
		/* 5 sigma of a binomial frequency at p = 0.5 is 0.018 */
		CHECK(fabs(got - want[i]) < 0.02, "T=%g: id %d frequency %.4f, want %.4f", T, i, got,
		      want[i]);
	}
	free(out);
	free(count);
	free(want);
}

static void test_temperature_freqs(void)
{
	const float l[6] = {1.0f, 2.0f, 0.5f, 3.0f, 0.0f, 2.5f};
	check_freqs(l, 6, 1.0f, 11);
	check_freqs(l, 6, 0.5f, 12); /* sharper */
	check_freqs(l, 6, 2.0f, 13); /* flatter */
}

static void test_validate(void)
{
	struct allm_params p;
	struct allm_err err = {{0}};
	greedy(&p);
	CHECK(check(&p, &err) == 0, "defaults rejected: %s", err.msg);
	sampling(&p, 0.7f, 40, 1.0f, 3);
	CHECK(check(&p, &err) == 0, "T=0.7 k=40 p=1 rejected: %s", err.msg);
	sampling(&p, 0.7f, 0, 0.01f, 3);
	CHECK(check(&p, &err) == 0, "top_p=0.01 rejected: %s", err.msg);

	struct {
		float t;
		int32_t k;
		float top_p;
		const char *word;
	} bad[] = {
		{-0.5f, 0, 1.0f, "temperature"}, {-1e-7f, 0, 1.0f, "temperature"},
		{NAN, 0, 1.0f, "temperature"},    {INFINITY, 0, 1.0f, "temperature"},
		{1.0f, -1, 1.0f, "top_k"},        {1.0f, 0, 0.0f, "top_p"},
		{1.0f, 0, -0.1f, "top_p"},        {1.0f, 0, 1.0001f, "top_p"},
		{1.0f, 0, NAN, "top_p"},
	};
	struct {
		float rp, fp, pp;
		const char *word;
	} badp[] = {
		{-0.1f, 0, 0, "repetition_penalty"}, {10.5f, 0, 0, "repetition_penalty"},
		{0, 0, 0, "repetition_penalty"}, /* 1 is its one off */
		{NAN, 0, 0, "repetition_penalty"},   {1, 2.5f, 0, "frequency_penalty"},
		{1, -2.01f, 0, "frequency_penalty"}, {1, NAN, 0, "frequency_penalty"},
		{1, 0, 3, "presence_penalty"},       {1, 0, INFINITY, "presence_penalty"},
	};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(badp); i++) {
		greedy(&p);
		p.repetition_penalty = badp[i].rp;
		p.frequency_penalty = badp[i].fp;
		p.presence_penalty = badp[i].pp;
		memset(&err, 0, sizeof(err));
		CHECK(check(&p, &err) == -EINVAL && strstr(err.msg, badp[i].word),
		      "penalty case %zu: '%s'", i, err.msg);
	}
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(bad); i++) {
		memset(&err, 0, sizeof(err));
		sampling(&p, bad[i].t, bad[i].k, bad[i].top_p, 0);
		int r = check(&p, &err);
		CHECK(r == -EINVAL, "case %zu (T=%g k=%d p=%g) returned %d, want -EINVAL", i, bad[i].t,
		      bad[i].k, bad[i].top_p, r);
		CHECK(strstr(err.msg, bad[i].word), "case %zu: message '%s' does not name %s", i, err.msg,
		      bad[i].word);
	}
}

/* Penalties, by the formulas of vLLM / the OpenAI API, against a restatement:
 * repetition on prompt and output tokens (a positive logit divided, a negative
 * one multiplied), frequency x count and presence once on output tokens only;
 * the sampler's scratch counts are back at zero after each call. */
static void test_penalties(void)
{
	enum { V = 12 };
	const float base[V] = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f, 0.0f, 4.0f, -0.5f, 2.5f, 1.5f, -3.0f};
	/* prompt 3 1 3 9, output 7 7 4 3 7 */
	const int32_t tok[] = {3, 1, 3, 9, 7, 7, 4, 3, 7};
	const int32_t n_prompt = 4, n = (int32_t)ALLM_ARRAY_SIZE(tok);
	struct {
		float rp, fp, pp;
	} cases[] = {{1.5f, 0, 0}, {1, 0.5f, 0}, {1, 0, 0.7f}, {1.2f, 0.4f, -0.3f}, {0.8f, -0.5f, 0.2f}};
	for (size_t c = 0; c < ALLM_ARRAY_SIZE(cases); c++) {
		struct allm_params p;
		struct allm_sampler sm;
		struct allm_err err = {{0}};
		sampling(&p, 0.0f, 0, 1.0f, 0);
		p.repetition_penalty = cases[c].rp;
		p.frequency_penalty = cases[c].fp;
		p.presence_penalty = cases[c].pp;
		CHECK(check(&p, &err) == 0 && allm_params_penalized(&p), "case %zu: %s", c,
		      err.msg);
		CHECK(allm_sampler_init(&sm, &p, NULL, 0, V) == 0, "init");
		CHECK(allm_sampler_need(&sm) == ALLM_SAMPLE_FULL, "case %zu: a penalized row is not needed whole", c);
		for (int round = 0; round < 2; round++) { /* the second: the counts were put back */
			float l[V], want[V];
			memcpy(l, base, sizeof(l));
			memcpy(want, base, sizeof(want));
			for (int32_t t = 0; t < V; t++) {
				bool seen = false;
				int out = 0;
				for (int32_t i = 0; i < n; i++) {
					seen |= tok[i] == t;
					out += i >= n_prompt && tok[i] == t;
				}
				if (seen)
					want[t] = want[t] > 0 ? want[t] / cases[c].rp : want[t] * cases[c].rp;
				if (out)
					want[t] -= cases[c].fp * (float)out + cases[c].pp;
			}
			allm_sampler_penalize(&sm, l, tok, n_prompt, n);
			for (int32_t t = 0; t < V; t++)
				CHECK(l[t] == want[t], "case %zu round %d: token %d: %g, want %g", c, round, t, l[t],
				      want[t]);
			for (int32_t t = 0; t < V; t++)
				CHECK(sm.count[t] == 0, "case %zu: count[%d] left at %d", c, t, sm.count[t]);
			CHECK(allm_sampler_sample(&sm, l) == allm_argmax(want, V), "case %zu: greedy after penalties",
			      c);
		}
		allm_sampler_fini(&sm);
	}
	/* a strong repetition penalty moves greedy off the repeated token 7 */
	struct allm_params p;
	struct allm_sampler sm;
	sampling(&p, 0.0f, 0, 1.0f, 0);
	float l[V];
	memcpy(l, base, sizeof(l));
	CHECK(allm_argmax(l, V) == 7, "the base row's argmax");
	p.repetition_penalty = 2.0f;
	allm_sampler_init(&sm, &p, NULL, 0, V);
	allm_sampler_penalize(&sm, l, tok, n_prompt, n);
	int32_t got = allm_sampler_sample(&sm, l);
	CHECK(got == 0, "repetition 2: greedy picked %d, want 0 (2.0, unseen, ties 7's 4.0 / 2: the lower id)",
	      got);
	allm_sampler_fini(&sm);
	/* off: 1 for repetition, 0 for the others; no scratch then */
	greedy(&p);
	CHECK(!allm_params_penalized(&p) && p.repetition_penalty == 1.0f, "the defaults penalize");
	allm_sampler_init(&sm, &p, NULL, 0, V);
	CHECK(!sm.count && allm_sampler_need(&sm) == ALLM_SAMPLE_ARGMAX, "an unpenalized sampler keeps counts");
	allm_sampler_fini(&sm);
}

/* Log-probabilities against a double-precision restatement: the sampled
 * token's, the top k best first with ties to the lower id, of the raw row
 * (penalties do not change them). */
static void test_logprobs(void)
{
	enum { V = 9 };
	const float row[V] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 2.0f, -1.0f, 2.0f, 0.0f};
	double lse = 0;
	for (int i = 0; i < V; i++)
		lse += exp((double)row[i]);
	lse = log(lse);
	struct allm_params p;
	struct allm_sampler sm;
	struct allm_token_logprobs lp;
	sampling(&p, 0.0f, 0, 1.0f, 0);
	p.logprobs = 1 + 4;
	CHECK(allm_sampler_init(&sm, &p, NULL, 0, V) == 0 && allm_sampler_need(&sm) == ALLM_SAMPLE_FULL, "init");
	allm_sampler_logprobs(&sm, row, 4, &lp);
	CHECK(lp.id == 4 && fabs(lp.logprob - (0.5 - lse)) < 1e-6, "sampled: %g, want %g", lp.logprob, 0.5 - lse);
	const int32_t want[4] = {1, 3, 5, 7}; /* 3, 3, 2, 2: ties by id */
	CHECK(lp.n_top == 4, "%d alternatives", lp.n_top);
	for (int k = 0; k < lp.n_top && k < 4; k++)
		CHECK(lp.top_id[k] == want[k] && fabs(lp.top_logprob[k] - (row[want[k]] - lse)) < 1e-6,
		      "top %d: %d (%g), want %d", k, lp.top_id[k], lp.top_logprob[k], want[k]);
	allm_sampler_fini(&sm);
	/* logprobs 1: the sampled token's only; more asked than the vocabulary has */
	p.logprobs = 1;
	allm_sampler_init(&sm, &p, NULL, 0, V);
	allm_sampler_logprobs(&sm, row, 1, &lp);
	CHECK(lp.n_top == 0 && fabs(lp.logprob - (3.0 - lse)) < 1e-6, "logprobs 1");
	allm_sampler_fini(&sm);
	p.logprobs = 1 + ALLM_SAMPLER_LOGPROBS_MAX;
	allm_sampler_init(&sm, &p, NULL, 0, V);
	allm_sampler_logprobs(&sm, row, 1, &lp);
	CHECK(lp.n_top == V && lp.top_id[V - 1] == 2, "all %d of the vocabulary: %d", V, lp.n_top);
	allm_sampler_fini(&sm);
	struct allm_err err = {{0}};
	p.logprobs = 2 + ALLM_SAMPLER_LOGPROBS_MAX;
	CHECK(check(&p, &err) == -EINVAL && strstr(err.msg, "logprobs"), "too many: %s", err.msg);
	p.logprobs = -1;
	CHECK(check(&p, &err) == -EINVAL, "negative logprobs");
}

/* A logit bias: added after the penalties, copied at init (the caller's array
 * may go), a row needed whole; bad entries refused. */
static void test_logit_bias(void)
{
	enum { V = 6 };
	const float base[V] = {1.0f, 4.0f, 2.0f, -1.0f, 3.0f, 0.0f};
	struct allm_logit_bias b[2] = {{1, -3.5f}, {5, 3.25f}};
	struct allm_params p;
	struct allm_sampler sm;
	struct allm_err err = {{0}};
	sampling(&p, 0.0f, 0, 1.0f, 0);
	CHECK(allm_logit_bias_check(b, 2, err.msg, sizeof(err.msg)) == 0, "bias: %s", err.msg);
	CHECK(allm_sampler_init(&sm, &p, b, 2, V) == 0 && allm_sampler_need(&sm) == ALLM_SAMPLE_FULL, "init");
	CHECK(allm_sampler_processed(&sm) && !allm_params_penalized(&p), "a bias is no processing");
	b[0].bias = 50; /* the sampler has its own copy */
	float l[V];
	memcpy(l, base, sizeof(l));
	allm_sampler_apply_bias(&sm, l);
	CHECK(l[1] == 0.5f && l[5] == 3.25f && l[4] == 3.0f, "biased: %g %g %g", l[1], l[5], l[4]);
	CHECK(allm_sampler_sample(&sm, l) == 5, "greedy after the bias: %d", allm_sampler_sample(&sm, l));
	allm_sampler_fini(&sm);
	struct allm_logit_bias bad[] = {{-1, 1}, {0, 100.5f}, {0, NAN}, {0, -INFINITY}};
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(bad); i++)
		CHECK(allm_logit_bias_check(&bad[i], 1, err.msg, sizeof(err.msg)) == -EINVAL &&
			      strstr(err.msg, "logit_bias"),
		      "bad bias %zu", i);
	struct allm_logit_bias many[ALLM_LOGIT_BIAS_MAX + 1] = {{0, 0}};
	CHECK(allm_logit_bias_check(many, ALLM_LOGIT_BIAS_MAX, err.msg, sizeof(err.msg)) == 0, "the most biases");
	CHECK(allm_logit_bias_check(many, ALLM_LOGIT_BIAS_MAX + 1, err.msg, sizeof(err.msg)) == -EINVAL,
	      "too many biases");
	/* min_tokens: its mask makes the stop tokens impossible, a row needed whole */
	sampling(&p, 0.0f, 0, 1.0f, 0);
	p.min_tokens = 3;
	CHECK(check(&p, &err) == 0, "min_tokens: %s", err.msg);
	CHECK(allm_sampler_init(&sm, &p, NULL, 0, V) == 0 && allm_sampler_processed(&sm) &&
		      allm_sampler_need(&sm) == ALLM_SAMPLE_FULL,
	      "init");
	memcpy(l, base, sizeof(l));
	const int32_t stops[] = {1, 4, 77};
	allm_sampler_mask(&sm, l, stops, 3);
	CHECK(isinf(l[1]) && l[1] < 0 && isinf(l[4]) && allm_sampler_sample(&sm, l) == 2, "masked: %d",
	      allm_sampler_sample(&sm, l));
	allm_sampler_fini(&sm);
	p.min_tokens = -1;
	CHECK(check(&p, &err) == -EINVAL && strstr(err.msg, "min_tokens"), "negative min_tokens");
	p.min_tokens = p.max_tokens + 1;
	CHECK(check(&p, &err) == -EINVAL && strstr(err.msg, "min_tokens"), "min_tokens above max_tokens");
}

int main(void)
{
	size_t mem0 = allm_mem_in_use();
	test_greedy_ties();
	test_argmax_edges();
	test_topk_host();
	test_temperature_zero_is_greedy();
	test_seeds();
	test_top_k_one_and_tiny_top_p();
	test_top_k();
	test_full_row_order();
	test_top_p();
	test_min_p();
	test_temperature_freqs();
	test_validate();
	test_penalties();
	test_logprobs();
	test_logit_bias();
	CHECK(allm_mem_in_use() == mem0, "sampler leaked %zu bytes", allm_mem_in_use() - mem0);
	if (n_fail) {
		fprintf(stderr, "test-sampler: %d failure(s)\n", n_fail);
		return 1;
	}
	printf("test-sampler: ok\n");
	return 0;
}
