#include "ctl-stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ctl_stats_reset(struct ctl_stats *s)
{
	s->n = s->head = 0;
	s->rate_n = s->rate_head = 0;
}

void ctl_stats_request(double send, double first_sched, double first_token, double finish,
		       int32_t n_generated, double *ttft_ms, double *tpot_ms, double *e2e_ms,
		       double *wta)
{
	*ttft_ms = n_generated >= 1 && first_token > 0 ? (first_token - send) * 1e3 : NAN;
	*tpot_ms = n_generated >= 2 && first_token > 0
			   ? (finish - first_token) / (n_generated - 1) * 1e3
			   : NAN;
	*e2e_ms = (finish - send) * 1e3;
	/* metrics.h: 1 when never scheduled or finished the instant it was; >= 1 */
	double den = first_sched > 0 ? finish - first_sched : 0;
	double w = den > 0 ? (finish - send) / den : 1;
	*wta = w < 1 || !isfinite(w) ? 1 : w;
}

void ctl_stats_add(struct ctl_stats *s, double send, double first_sched, double first_token,
		   double finish, int32_t n_generated)
{
	int32_t i = s->head;
	ctl_stats_request(send, first_sched, first_token, finish, n_generated, &s->ttft_ms[i],
			  &s->tpot_ms[i], &s->e2e_ms[i], &s->wta[i]);
	s->head = (s->head + 1) % CTL_STATS_WINDOW;
	if (s->n < CTL_STATS_WINDOW)
		s->n++;
}

void ctl_stats_sample(struct ctl_stats *s, double t, int64_t all_tokens, int64_t gen_tokens)
{
	if (s->rate_n > 0) {
		int32_t last = (s->rate_head + CTL_STATS_RATE_SAMPLES - 1) % CTL_STATS_RATE_SAMPLES;
		if (all_tokens < s->rate_all[last] || gen_tokens < s->rate_gen[last])
			s->rate_n = s->rate_head = 0;
	}
	s->rate_t[s->rate_head] = t;
	s->rate_all[s->rate_head] = all_tokens;
	s->rate_gen[s->rate_head] = gen_tokens;
	s->rate_head = (s->rate_head + 1) % CTL_STATS_RATE_SAMPLES;
	if (s->rate_n < CTL_STATS_RATE_SAMPLES)
		s->rate_n++;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double rank(const double *x, int32_t m, double p)
{
	double r = p / 100.0 * (m - 1);
	int32_t lo = (int32_t)r;
	double f = r - lo;
	return lo + 1 < m ? x[lo] + f * (x[lo + 1] - x[lo]) : x[lo];
}

/* Percentiles of the finite values of v[0..n). */
static struct ctl_pctl pctl(double *scratch, const double *v, int32_t n)
{
	struct ctl_pctl p = {NAN, NAN, NAN, NAN};
	int32_t m = 0;
	double sum = 0;
	for (int32_t i = 0; i < n; i++)
		if (isfinite(v[i])) {
			scratch[m++] = v[i];
			sum += v[i];
		}
	if (m == 0)
		return p;
	qsort(scratch, (size_t)m, sizeof(double), cmp_double);
	p.p50 = rank(scratch, m, 50);
	p.p90 = rank(scratch, m, 90);
	p.p99 = rank(scratch, m, 99);
	p.mean = sum / m;
	return p;
}

void ctl_stats_view(struct ctl_stats *s, struct ctl_stats_view *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (s->rate_n >= 2) {
		int32_t last = (s->rate_head + CTL_STATS_RATE_SAMPLES - 1) % CTL_STATS_RATE_SAMPLES;
		int32_t first = (s->rate_head + CTL_STATS_RATE_SAMPLES - s->rate_n) % CTL_STATS_RATE_SAMPLES;
		double dt = s->rate_t[last] - s->rate_t[first];
		if (dt > 0) {
			ret->throughput_tok_s = (double)(s->rate_all[last] - s->rate_all[first]) / dt;
			ret->gen_throughput_tok_s = (double)(s->rate_gen[last] - s->rate_gen[first]) / dt;
		}
	}
	ret->ttft = pctl(s->scratch, s->ttft_ms, s->n);
	ret->tpot = pctl(s->scratch, s->tpot_ms, s->n);
	ret->e2e = pctl(s->scratch, s->e2e_ms, s->n);
	double sum = 0;
	for (int32_t i = 0; i < s->n; i++)
		sum += s->wta[i];
	ret->mean_weighted_turnaround = s->n ? sum / s->n : NAN;
}
