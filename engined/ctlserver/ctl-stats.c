#include "ctl-stats.h"

#include "engine.h"
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ctl_stats_reset(struct ctl_stats *s)
{
	s->n = s->head = 0;
	s->rate_n = s->rate_head = 0;
}

void ctl_stats_request(const struct allm_result *r, double *ttft_ms, double *tpot_ms, double *e2e_ms,
		       double *wta)
{
	*ttft_ms = r->n_generated >= 1 && r->got_token ? (r->first_token - r->arrival) * 1e3 : NAN;
	*tpot_ms = r->n_generated >= 2 && r->got_token
			   ? (r->finish - r->first_token) / (r->n_generated - 1) * 1e3
			   : NAN;
	*e2e_ms = (r->finish - r->arrival) * 1e3;
	/* never scheduled (cancelled while waiting): 1, as metrics.h */
	*wta = r->scheduled ? allm_metrics_weighted_turnaround(r->arrival, r->first_sched, r->finish) : 1;
}

void ctl_stats_add(struct ctl_stats *s, const struct allm_result *r)
{
	int32_t i = s->head;
	ctl_stats_request(r, &s->ttft_ms[i], &s->tpot_ms[i], &s->e2e_ms[i], &s->wta[i]);
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

/* Percentiles of the finite values of v[0..n) (a NAN marks "does not apply"). */
static struct allm_pctl pctl(double *scratch, const double *v, int32_t n)
{
	int32_t m = 0;
	for (int32_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			scratch[m++] = v[i];
	return allm_metrics_pctl(scratch, m);
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
