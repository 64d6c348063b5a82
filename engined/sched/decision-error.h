/* The error of the decisions themselves (issue 53): each measured preemption
 * pairs the prediction of the path it took (swap: out + in; recompute: the
 * re-prefill; disk: write + read) with what that path cost, so the error the
 * scheduler acted on is seen, not only the step and copy models' error
 * (predictor.h's rings, fed by every prefill step and copy). With the regret
 * probe (allm_engine_config.probe_other) the path not taken is timed too, and a
 * decision whose path cost more than ALLM_REGRET_MARGIN x the other's is a
 * regret. The engine keeps one (engine-internal.h) and hands its figures out in
 * the stats; a caller may judge the decisions it is handed (allm-run's log). */
#ifndef ALLM_DECISION_ERROR_H
#define ALLM_DECISION_ERROR_H

#include "engine.h"

/* The regret: the chosen path cost > 10 % more than the other one. */
#define ALLM_REGRET_MARGIN 1.10

struct allm_decision_error {
	struct allm_pred_ring err[3]; /* by choice: ALLM_CHOICE_SWAP, _RECOMPUTE, _DISK */
	int64_t n[3]; /* measured decisions by choice (since start or reset-stats) */
	int64_t probed; /* of them, with the other path timed */
	int64_t regret; /* of those, the chosen path cost > ALLM_REGRET_MARGIN x the other */
};

/* The predicted cost of the path d took; NAN for a restore decision (its
 * prediction is the restore model's, not a preemption's) or an unknown choice. */
double allm_decision_predicted(const struct allm_decision *d);
/* Whether d's path cost more than ALLM_REGRET_MARGIN x the path not taken;
 * false unless both were measured. */
bool allm_decision_regret(const struct allm_decision *d);
/* A decision's measured cost has arrived: its pair goes into its choice's ring. */
void allm_decision_error_observe(struct allm_decision_error *de, const struct allm_decision *d);
/* Rolling MAPE (percent) of the decisions that took choice c, over the last
 * ALLM_PRED_RING of them; NAN before the first (each is a real pair, not a
 * cold-start timing, so one is already an error worth showing). */
double allm_decision_error_mape(const struct allm_decision_error *de, enum allm_choice c);

#endif
