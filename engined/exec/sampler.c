#include "sampler.h"

#include "backend.h"
#include "grammar.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define SUM_CK 64 /* terms between the checkpoints of a draw's running sum */
/* A grammar's masked draw also keeps to max_tokens (every allowed token's end
 * distance looked at) while fewer than this many bytes more than the grammar
 * needs are left; further away, a first draw that would overrun is rare. */
#define GRAMMAR_BUDGET_SCAN 64u

bool allm_sampler_processed(const struct allm_sampler *s)
{
	return allm_params_penalized(&s->p) || s->n_bias > 0 || s->mask_stops || s->grammar;
}

void allm_sampler_set_grammar(struct allm_sampler *s, struct allm_grammar_matcher *m)
{
	allm_grammar_matcher_free(s->grammar);
	s->grammar = m;
}

int32_t allm_sampler_sample_grammar(struct allm_sampler *s, float *logits)
{
	int32_t id = allm_sampler_sample(s, logits);
	if (!s->grammar)
		return id;
	/* the bytes the grammar may still take before the end: one per token
	 * left after this one */
	int32_t left = s->p.max_tokens - ++s->n_grammar_drawn;
	uint32_t budget = left > 0 ? (uint32_t)left : 0;
	if (allm_grammar_matcher_left_after(s->grammar, id) <= budget && allm_grammar_matcher_accept(s->grammar, id))
		return id;
	/* refused: the mask (most often from the grammar's cache), then a draw
	 * from what is left; apply() leaves at least one id. The budget's scan
	 * costs a walk per allowed token: only while the end is near */
	s->n_grammar_masked++;
	if (budget < allm_grammar_matcher_left(s->grammar) + GRAMMAR_BUDGET_SCAN)
		allm_grammar_matcher_apply_within(s->grammar, logits, s->vocab, budget);
	else
		allm_grammar_matcher_apply(s->grammar, logits, s->vocab);
	id = allm_sampler_sample(s, logits);
	if (allm_grammar_matcher_accept(s->grammar, id))
		return id;
	/* only a row the draw cannot read (NaN logits) gets here: the first id the
	 * grammar allows, so the text stays in the grammar */
	const uint64_t *bits = allm_grammar_matcher_mask(s->grammar);
	for (int32_t i = 0; i < s->vocab; i++)
		if (((bits[i >> 6] >> (i & 63)) & 1) && allm_grammar_matcher_accept(s->grammar, i))
			return i;
	return id;
}

void allm_sampler_mask(const struct allm_sampler *s, float *logits, const int32_t *ids, int32_t n)
{
	for (int32_t i = 0; i < n; i++)
		if (ids[i] >= 0 && ids[i] < s->vocab)
			logits[ids[i]] = -INFINITY;
}

void allm_sampler_apply_bias(const struct allm_sampler *s, float *logits)
{
	for (int32_t i = 0; i < s->n_bias; i++)
		if (s->bias[i].token_id >= 0 && s->bias[i].token_id < s->vocab)
			logits[s->bias[i].token_id] += s->bias[i].bias;
}

bool allm_params_penalized(const struct allm_params *p)
{
	return p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f;
}

int allm_sampler_init(struct allm_sampler *s, const struct allm_params *p, const struct allm_logit_bias *bias,
		      int32_t n_bias, int32_t vocab)
{
	memset(s, 0, sizeof(*s));
	s->p = *p;
	s->vocab = vocab;
	s->mask_stops = p->min_tokens > 0;
	s->n_bias = n_bias;
	allm_rng_seed(&s->rng, p->seed);
	if (p->temperature > 0.0f) {
		s->probs = allm_malloc((size_t)vocab * sizeof(float));
		s->idx = allm_malloc((size_t)vocab * sizeof(int32_t));
		s->ck = allm_malloc(((size_t)vocab / SUM_CK + 2) * sizeof(double));
		if (!s->probs || !s->idx || !s->ck) {
			allm_sampler_fini(s);
			return -ENOMEM;
		}
	}
	if ((allm_params_penalized(p) && !(s->count = allm_calloc((size_t)vocab, sizeof(int32_t)))) ||
	    (allm_sampler_processed(s) && p->logprobs > 0 && !(s->raw = allm_malloc((size_t)vocab * sizeof(float))))) {
		allm_sampler_fini(s);
		return -ENOMEM;
	}
	if (n_bias > 0) {
		if (!(s->bias = allm_malloc((size_t)n_bias * sizeof(*s->bias)))) {
			allm_sampler_fini(s);
			return -ENOMEM;
		}
		memcpy(s->bias, bias, (size_t)n_bias * sizeof(*s->bias));
	}
	return 0;
}

void allm_sampler_logprobs(const struct allm_sampler *s, const float *row, int32_t id,
			   struct allm_token_logprobs *out)
{
	int32_t V = s->vocab, k = ALLM_MIN(ALLM_MAX(s->p.logprobs - 1, 0), ALLM_MIN(ALLM_SAMPLER_LOGPROBS_MAX, V));
	/* one pass: log-sum-exp online (the sum rescaled when the maximum moves,
	 * expf summed in double) and the k best by insertion (ties keep the lower
	 * id); three passes with a double exp cost --dummy small a fifth of its
	 * batched throughput */
	float mx = -INFINITY;
	double sum = 0.0;
	out->n_top = 0;
	for (int32_t i = 0; i < V; i++) {
		float x = row[i];
		if (x > mx) {
			sum = sum * exp((double)mx - x) + 1.0;
			mx = x;
		} else {
			sum += expf(x - mx);
		}
		int32_t n = out->n_top;
		if (k == 0 || (n == k && x <= row[out->top_id[n - 1]]))
			continue;
		int32_t j = n < k ? n++ : n - 1;
		while (j > 0 && x > row[out->top_id[j - 1]]) {
			out->top_id[j] = out->top_id[j - 1];
			j--;
		}
		out->top_id[j] = i;
		out->n_top = n;
	}
	double lse = mx + log(sum);
	out->id = id;
	out->logprob = (float)(row[id] - lse);
	for (int32_t j = 0; j < out->n_top; j++)
		out->top_logprob[j] = (float)(row[out->top_id[j]] - lse);
}

void allm_sampler_fini(struct allm_sampler *s)
{
	allm_free(s->probs);
	allm_free(s->idx);
	allm_free(s->sort_buf);
	allm_free(s->ck);
	allm_free(s->count);
	allm_free(s->raw);
	allm_free(s->bias);
	allm_grammar_matcher_free(s->grammar);
	s->grammar = NULL;
	s->bias = NULL;
	s->n_bias = 0;
	s->probs = NULL;
	s->idx = NULL;
	s->sort_buf = NULL;
	s->ck = NULL;
	s->count = NULL;
	s->raw = NULL;
}

void allm_sampler_penalize(struct allm_sampler *s, float *logits, const int32_t *tokens, int32_t n_prompt,
			   int32_t n_tokens)
{
	const struct allm_params *p = &s->p;
	int32_t *cnt = s->count;
	if (!cnt)
		return;
	/* One pass per rule over the sequence, each token's rule applied once (at
	 * its first occurrence) and its count put back to 0, so the work is the
	 * sequence's length, not the vocabulary's. Ids outside the vocabulary
	 * (none get this far) would be skipped. */
	float rp = p->repetition_penalty;
	if (rp != 1.0f) {
		for (int32_t i = 0; i < n_tokens; i++)
			if (tokens[i] >= 0 && tokens[i] < s->vocab)
				cnt[tokens[i]] = 1;
		for (int32_t i = 0; i < n_tokens; i++) {
			int32_t t = tokens[i];
			if (t < 0 || t >= s->vocab || !cnt[t])
				continue;
			logits[t] = logits[t] > 0.0f ? logits[t] / rp : logits[t] * rp;
			cnt[t] = 0;
		}
	}
	if (p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f)
		return;
	for (int32_t i = n_prompt; i < n_tokens; i++)
		if (tokens[i] >= 0 && tokens[i] < s->vocab)
			cnt[tokens[i]]++;
	for (int32_t i = n_prompt; i < n_tokens; i++) {
		int32_t t = tokens[i];
		if (t < 0 || t >= s->vocab || !cnt[t])
			continue;
		logits[t] -= p->frequency_penalty * (float)cnt[t] + p->presence_penalty;
		cnt[t] = 0;
	}
}

/* A scan from index 0 that moves on a strict > (the lowest id wins a tie, a NaN
 * never wins, a NaN at 0 stays), as two passes: the maximum of the values that are
 * not NaN, 16 at a time (maxps keeps its second operand where the first is NaN),
 * then the first index holding it (-0 and +0 alike, as > has them). The scan's
 * compare-and-reload chain cost 26 us a 32k row: every greedy token. */
int32_t allm_argmax(const float *logits, int32_t n)
{
	if (n <= 1 || isnan(logits[0]))
		return 0;
	float m = logits[0];
	int32_t i = 1;
#ifdef __SSE2__
	__m128 a[4] = { _mm_set1_ps(-INFINITY), _mm_set1_ps(-INFINITY), _mm_set1_ps(-INFINITY),
			_mm_set1_ps(-INFINITY) };
	for (; i + 16 <= n; i += 16)
		for (int k = 0; k < 4; k++)
			a[k] = _mm_max_ps(_mm_loadu_ps(logits + i + 4 * k), a[k]);
	float lane[4];
	_mm_storeu_ps(lane, _mm_max_ps(_mm_max_ps(a[0], a[1]), _mm_max_ps(a[2], a[3])));
	for (int k = 0; k < 4; k++)
		if (lane[k] > m)
			m = lane[k];
#endif
	for (; i < n; i++)
		if (logits[i] > m)
			m = logits[i];
	int32_t j = 0;
#ifdef __SSE2__
	const __m128 mv = _mm_set1_ps(m);
	for (; j + 4 <= n; j += 4) {
		int eq = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(logits + j), mv));
		if (eq)
			return j + __builtin_ctz((unsigned)eq);
	}
#endif
	while (!(logits[j] == m)) /* m is one of the values */
		j++;
	return j;
}

static const float *sort_probs;

/* Descending probability, then ascending id: a total order, so qsort's result does
 * not depend on its algorithm and sampling stays reproducible. */
static int by_prob_desc(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	float px = sort_probs[x], py = sort_probs[y];
	if (px != py)
		return px > py ? -1 : 1;
	return x < y ? -1 : (x > y);
}

/* What the sampling itself reduces a (penalized) row with. */
static enum allm_sample_need row_need(const struct allm_sampler *s)
{
	if (s->p.temperature <= 0.0f || s->p.top_k == 1)
		return ALLM_SAMPLE_ARGMAX;
	if (s->p.top_k > 1 && s->p.top_k <= ALLM_TOPK_MAX && s->p.top_k < s->vocab)
		return ALLM_SAMPLE_TOPK;
	return ALLM_SAMPLE_FULL;
}

enum allm_sample_need allm_sampler_need(const struct allm_sampler *s)
{
	/* the penalties change the row before it is reduced, log-probabilities
	 * need all of it: the device must give it whole */
	return allm_sampler_processed(s) || s->p.logprobs > 0 ? ALLM_SAMPLE_FULL : row_need(s);
}

/* min_p (vLLM's, llama.cpp's): of the n candidates p[ord[0..n)], best first, the
 * first ones at least min_p times as likely as the best (at least one). After top-k
 * and top-p, as vLLM: each cut keeps a prefix of the same order, and a ratio to the
 * best does not change when the cuts before renormalise. */
static int32_t min_p_cut(const struct allm_sampler *s, const float *p, const int32_t *ord, int32_t n)
{
	if (!(s->p.min_p > 0.0f) || n < 2)
		return n;
	float least = s->p.min_p * p[ord[0]];
	int32_t m = 1;
	while (m < n && p[ord[m]] >= least)
		m++;
	return m;
}

static const int32_t *sort_ids;

/* Candidate slots by descending probability, then ascending token id: the order
 * the full-row path sorts tokens by. */
static int by_cand_desc(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	float px = sort_probs[x], py = sort_probs[y];
	if (px != py)
		return px > py ? -1 : 1;
	return sort_ids[x] < sort_ids[y] ? -1 : (sort_ids[x] > sort_ids[y]);
}

int32_t allm_sampler_sample_topk(struct allm_sampler *s, const float *vals, const int32_t *ids)
{
	/* The distribution is that of the full-row path (softmax renormalised over
	 * the top k); the arithmetic touches only the k candidates, so the host and
	 * a device top-k give the same token for the same RNG state. */
	int32_t k = s->p.top_k;
	float inv_t = 1.0f / s->p.temperature;
	float *p = s->probs; /* [k] probability of candidate slot j */
	int32_t *ord = s->idx; /* [k] slots in sampling order */
	double sum = 0.0;
	for (int32_t j = 0; j < k; j++) {
		p[j] = expf((vals[j] - vals[0]) * inv_t);
		sum += p[j];
	}
	for (int32_t j = 0; j < k; j++) {
		p[j] = (float)(p[j] / sum);
		ord[j] = j;
	}
	/* equal probabilities of distinct values (exp underflow) go by id, as in the
	 * full-row path; the sampler runs on the step-loop thread only */
	sort_probs = p;
	sort_ids = ids;
	qsort(ord, (size_t)k, sizeof(int32_t), by_cand_desc);
	int32_t n = k;
	if (s->p.top_p < 1.0f) {
		double cum = 0.0, mass = 0.0;
		for (int32_t i = 0; i < n; i++)
			mass += p[ord[i]];
		for (int32_t i = 0; i < n; i++) {
			cum += p[ord[i]];
			if (cum >= s->p.top_p * mass) {
				n = i + 1;
				break;
			}
		}
	}
	n = min_p_cut(s, p, ord, n);
	double total = 0.0;
	for (int32_t i = 0; i < n; i++)
		total += p[ord[i]];
	double r = allm_rng_unit(&s->rng) * total, cum = 0.0;
	for (int32_t i = 0; i < n; i++) {
		cum += p[ord[i]];
		if (r < cum)
			return ids[ord[i]];
	}
	return ids[ord[n - 1]]; /* rounding left r at the very end */
}

/* s->idx[0..n) = the ids of s->probs in by_prob_desc's order: the permutation qsort
 * gives (the order is total), by a stable radix sort of the probabilities' bits (3
 * passes of 11) over ids laid out ascending, so equal values keep ascending ids.
 * qsort's call per comparison made top_p over a 32k row cost 3.4 ms a token
 * (--dummy medium, int8, decode 250 -> 134 tok/s). A row holding a NaN or a
 * negative (not a softmax: a NaN logit) keeps qsort, as does a failed allocation. */
#define RADIX_BITS 11 /* 3 passes: measured faster than 4 of 8 bits over 32k ids */
#define RADIX_MASK ((1u << RADIX_BITS) - 1)
static void sort_by_prob(struct allm_sampler *s, int32_t n)
{
	const float *p = s->probs;
	int32_t *ids = s->idx;
	if (!s->sort_buf)
		s->sort_buf = allm_malloc((size_t)s->vocab * 3 * sizeof(uint32_t));
	uint32_t *key = s->sort_buf, *key2 = key ? key + n : NULL;
	int32_t *ids2 = key ? (int32_t *)(key2 + n) : NULL;
	bool radix = key != NULL;
	for (int32_t i = 0; i < n && radix; i++) {
		uint32_t b;
		memcpy(&b, &p[i], sizeof(b));
		radix = b <= 0x7f800000u; /* +0 .. +inf: the bits order as the values */
		key[i] = ~b; /* ascending keys: descending probabilities */
		ids[i] = i;
	}
	if (!radix) {
		for (int32_t i = 0; i < n; i++)
			ids[i] = i;
		sort_probs = p; /* the sampler runs on the step-loop thread only */
		qsort(ids, (size_t)n, sizeof(int32_t), by_prob_desc);
		return;
	}
	for (int shift = 0; shift < 32; shift += RADIX_BITS) {
		uint32_t at[1u << RADIX_BITS] = { 0 };
		for (int32_t i = 0; i < n; i++)
			at[(key[i] >> shift) & RADIX_MASK]++;
		if (at[(key[0] >> shift) & RADIX_MASK] == (uint32_t)n)
			continue; /* one digit for all: the pass would copy */
		for (uint32_t d = 0, sum = 0; d <= RADIX_MASK; d++) {
			uint32_t c = at[d];
			at[d] = sum;
			sum += c;
		}
		for (int32_t i = 0; i < n; i++) {
			uint32_t j = at[(key[i] >> shift) & RADIX_MASK]++;
			key2[j] = key[i];
			ids2[j] = ids[i];
		}
		uint32_t *tk = key;
		key = key2, key2 = tk;
		int32_t *ti = ids;
		ids = ids2, ids2 = ti;
	}
	if (ids != s->idx)
		memcpy(s->idx, ids, (size_t)n * sizeof(int32_t));
}

/* Term i of a draw's running sum: probability i of the row, or the i-th of ord. */
static inline double term(const float *p, const int32_t *ord, int32_t i)
{
	return p[ord ? ord[i] : i];
}

/* The running sum of terms [0, n) in order, the whole of it returned and ck[b] =
 * the sum before term b * SUM_CK (b = 0 .. ceil(n / SUM_CK)). Any prefix rebuilt
 * from a checkpoint makes the additions of one loop from 0 in the same order, so
 * it is that loop's double bit for bit: a draw's mass, its top-p cut, its total
 * and its pick cost one pass over the row instead of one each. */
static double running_sum(const float *p, const int32_t *ord, int32_t n, double *ck)
{
	double sum = 0.0;
	int32_t b = 0;
	for (int32_t i0 = 0; i0 < n; i0 += SUM_CK) {
		ck[b++] = sum;
		for (int32_t i = i0, e = ALLM_MIN(i0 + SUM_CK, n); i < e; i++)
			sum += term(p, ord, i);
	}
	ck[b] = sum;
	return sum;
}

/* The running sum of terms [0, m), m no further than running_sum's n. */
static double prefix_sum(const float *p, const int32_t *ord, int32_t m, const double *ck)
{
	double sum = ck[m / SUM_CK];
	for (int32_t i = m / SUM_CK * SUM_CK; i < m; i++)
		sum += term(p, ord, i);
	return sum;
}

/* The first i < n whose running sum through term i is >= target (ge) or > target,
 * else n. Terms are >= 0, so the sums only grow: the block is the first whose
 * checkpoint after it gets there (a block cut at n may get there only past n). */
static int32_t first_reaching(const float *p, const int32_t *ord, int32_t n, const double *ck,
			      double target, bool ge)
{
	for (int32_t b = 0; b * SUM_CK < n; b++) {
		if (!(ge ? ck[b + 1] >= target : ck[b + 1] > target))
			continue;
		double cum = ck[b];
		for (int32_t i = b * SUM_CK, e = ALLM_MIN((b + 1) * SUM_CK, n); i < e; i++) {
			cum += term(p, ord, i);
			if (ge ? cum >= target : cum > target)
				return i;
		}
	}
	return n;
}

int32_t allm_sampler_sample(struct allm_sampler *s, const float *logits)
{
	int32_t V = s->vocab;
	enum allm_sample_need need = row_need(s);
	if (need == ALLM_SAMPLE_ARGMAX)
		return allm_argmax(logits, V);
	if (need == ALLM_SAMPLE_TOPK) {
		float vals[ALLM_TOPK_MAX];
		int32_t ids[ALLM_TOPK_MAX];
		uint64_t heap[ALLM_TOPK_MAX];
		allm_topk_host(logits, V, s->p.top_k, vals, ids, heap);
		return allm_sampler_sample_topk(s, vals, ids);
	}

	float mx = logits[allm_argmax(logits, V)];
	float inv_t = 1.0f / s->p.temperature;
	double sum = 0.0;
	for (int32_t i = 0; i < V; i++) {
		s->probs[i] = expf((logits[i] - mx) * inv_t);
		sum += s->probs[i];
	}
	for (int32_t i = 0; i < V; i++)
		s->probs[i] = (float)(s->probs[i] / sum);

	int32_t n = V;
	const int32_t *ord = NULL; /* the order of the draw: ids, or by descending probability */
	bool cut = (s->p.top_k > 0 && s->p.top_k < V) || s->p.top_p < 1.0f; /* top-k, top-p */
	if (cut || s->p.min_p > 0.0f) {
		sort_by_prob(s, V);
		ord = s->idx;
		if (s->p.top_k > 0 && s->p.top_k < n)
			n = s->p.top_k;
	}
	double total = running_sum(s->probs, ord, n, s->ck);
	if (s->p.top_p < 1.0f) {
		/* smallest prefix whose mass reaches top_p (at least one token) */
		int32_t i = first_reaching(s->probs, ord, n, s->ck, s->p.top_p * total, true);
		if (i < n) {
			n = i + 1;
			total = prefix_sum(s->probs, ord, n, s->ck);
		}
	}
	int32_t m = ord ? min_p_cut(s, s->probs, ord, n) : n;
	if (m < n) {
		n = m;
		total = prefix_sum(s->probs, ord, n, s->ck);
	}
	/* the first token whose running sum passes r */
	double r = allm_rng_unit(&s->rng) * total;
	int32_t i = first_reaching(s->probs, ord, n, s->ck, r, false);
	if (i == n)
		i = n - 1; /* rounding left r at the very end */
	return ord ? ord[i] : i;
}
