/* The preemption policies (`--preempt adaptive|recompute|swap`) as a table of
 * functions, one entry per policy (engine-policy.c). Private to engine*.c. */
#ifndef ALLM_ENGINE_POLICY_H
#define ALLM_ENGINE_POLICY_H

#include "engine.h"

/* Where a victim of n blocks could go now. */
struct allm_victim_room {
	bool host; /* the host pool can take it */
	bool disk; /* the disk pool can take it */
	bool has_disk; /* there is a disk tier (Alg. 1's three-way table) */
	bool disk_failing; /* it failed lately: not chosen until the failures fade */
};

struct allm_policy {
	/* Alg. 1: sets d->choice and d->reason from d's predictions */
	void (*victim)(const struct allm_victim_room *room, struct allm_decision *d);
	/* a cached prefix of m blocks in lower tiers: how many of its first blocks
	 * to restore, given total[k] (k = 0..m), the predicted cost of restoring k
	 * and recomputing the rest; *why gets the reason */
	int32_t (*restore)(const double *total, int32_t m, enum allm_reason *why);
	/* phase-aware placement: a decoding request whose blocks would let a
	 * prefill's chunk keep d->pred_chunk_s worth of tokens this step; whether
	 * to swap it out to the host for the prefill (d->choice, d->reason set
	 * when it does) from d->pred_swap_s against d->pred_chunk_s */
	bool (*phase)(const struct allm_victim_room *room, struct allm_decision *d);
	bool swaps; /* victims may keep their KV in the host or disk pool */
	bool restores; /* cached blocks in a lower tier may come back (else writing them there is waste) */
	bool keeps_all; /* an evicted cached block goes down wherever there is room, no cost test */
};

const struct allm_policy *allm_policy_of(enum allm_preempt_mode m);
/* Whether a decision that went to disk wanted the host pool (it was full):
 * admission may then demote a lower-priority swap to make room there. */
bool allm_policy_wanted_host(enum allm_reason r);

#endif
