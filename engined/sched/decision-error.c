/* Per-decision cost error and regret (decision-error.h). */
#include "decision-error.h"

#include <math.h>

double allm_decision_predicted(const struct allm_decision *d)
{
	if (d->kind != ALLM_DECISION_PREEMPT)
		return NAN;
	switch (d->choice) {
	case ALLM_CHOICE_SWAP: return d->pred_swap_s;
	case ALLM_CHOICE_RECOMPUTE: return d->pred_recompute_s;
	case ALLM_CHOICE_DISK: return d->pred_disk_s;
	default: return NAN;
	}
}

bool allm_decision_regret(const struct allm_decision *d)
{
	return d->measured_s >= 0 && d->other_measured_s >= 0 && isfinite(d->measured_s) &&
	       isfinite(d->other_measured_s) && d->measured_s > ALLM_REGRET_MARGIN * d->other_measured_s;
}

void allm_decision_error_observe(struct allm_decision_error *de, const struct allm_decision *d)
{
	double pred = allm_decision_predicted(d);
	if (isnan(pred) || !(d->measured_s > 0) || (unsigned)d->choice > ALLM_CHOICE_DISK)
		return;
	allm_pred_ring_push(&de->err[d->choice], pred, d->measured_s);
	de->n[d->choice]++;
	if (isfinite(d->other_measured_s) && d->other_measured_s >= 0) {
		de->probed++;
		de->regret += allm_decision_regret(d);
	}
}

double allm_decision_error_mape(const struct allm_decision_error *de, enum allm_choice c)
{
	return (unsigned)c <= ALLM_CHOICE_DISK ? allm_pred_ring_mape(&de->err[c], 1) : NAN;
}
