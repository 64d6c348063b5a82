/* The preemption policies as one table (DESIGN §6): for each of `adaptive`,
 * `recompute` and `swap`, Alg. 1's choice for a victim (two tiers or three)
 * and the choice for a cached prefix found in a lower tier (restore it,
 * recompute it, or restore its head and recompute the rest). Pure functions of
 * the predictions and the room the pools have: the callers execute them. */
#include "engine-policy.h"

#include <math.h>

/* --- Alg. 1: a victim ------------------------------------------------------------------ */

static void victim_recompute(const struct allm_victim_room *room, struct allm_decision *d)
{
	(void)room;
	d->choice = ALLM_CHOICE_RECOMPUTE;
	d->reason = ALLM_REASON_POLICY_RECOMPUTE;
}

static void victim_swap(const struct allm_victim_room *room, struct allm_decision *d)
{
	if (room->host) {
		d->choice = ALLM_CHOICE_SWAP;
		d->reason = ALLM_REASON_POLICY_SWAP;
	} else if (room->disk) {
		d->choice = ALLM_CHOICE_DISK;
		d->reason = ALLM_REASON_POLICY_SWAP_HOST_FULL_DISK;
	} else {
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = room->disk_failing ? ALLM_REASON_POLICY_SWAP_DISK_FAILING
			    : room->has_disk ? ALLM_REASON_POLICY_SWAP_ALL_FULL : ALLM_REASON_POLICY_SWAP_HOST_FULL;
	}
}

static void victim_adaptive(const struct allm_victim_room *room, struct allm_decision *d)
{
	if (!room->has_disk) {
		/* the paper's two-way choice */
		if (d->pred_swap_s < d->pred_recompute_s) {
			d->choice = room->host ? ALLM_CHOICE_SWAP : ALLM_CHOICE_RECOMPUTE;
			d->reason = room->host ? ALLM_REASON_SWAP_CHEAPER : ALLM_REASON_SWAP_CHEAPER_HOST_FULL;
		} else {
			d->choice = ALLM_CHOICE_RECOMPUTE;
			d->reason = ALLM_REASON_RECOMPUTE_CHEAPER;
		}
		return;
	}
	/* three tiers: the cheapest that has room */
	bool host_best = d->pred_swap_s <= d->pred_disk_s && d->pred_swap_s < d->pred_recompute_s;
	if (room->host && host_best) {
		d->choice = ALLM_CHOICE_SWAP;
		d->reason = ALLM_REASON_SWAP_CHEAPEST;
	} else if (room->disk && d->pred_disk_s < d->pred_recompute_s) {
		d->choice = ALLM_CHOICE_DISK;
		d->reason = host_best ? ALLM_REASON_SWAP_CHEAPEST_HOST_FULL_DISK : ALLM_REASON_DISK_CHEAPEST;
	} else {
		d->choice = ALLM_CHOICE_RECOMPUTE;
		d->reason = d->pred_recompute_s <= ALLM_MIN(d->pred_swap_s, d->pred_disk_s) ? ALLM_REASON_RECOMPUTE_CHEAPEST
			    : room->disk_failing ? ALLM_REASON_SWAP_CHEAPER_DISK_FAILING
						 : ALLM_REASON_SWAP_CHEAPER_ALL_FULL;
	}
}

/* --- phase-aware placement: a decoder out for a prefill --------------------------------- */

/* adaptive: the swap's round trip against what cutting the chunk costs */
static bool phase_adaptive(const struct allm_victim_room *room, struct allm_decision *d)
{
	if (!room->host || !(d->pred_swap_s < d->pred_chunk_s))
		return false;
	d->choice = ALLM_CHOICE_SWAP;
	d->reason = ALLM_REASON_PHASE_SWAP_CHEAPER;
	return true;
}

/* swap: as its victims, the host whenever it has room, no cost test (the
 * baseline the cost model's choice is measured against) */
static bool phase_swap(const struct allm_victim_room *room, struct allm_decision *d)
{
	if (!room->host)
		return false;
	d->choice = ALLM_CHOICE_SWAP;
	d->reason = ALLM_REASON_PHASE_SWAP_POLICY;
	return true;
}

/* recompute: KV never leaves for a lower tier; chunks shrink instead */
static bool phase_never(const struct allm_victim_room *room, struct allm_decision *d)
{
	(void)room;
	(void)d;
	return false;
}

/* --- a cached prefix in a lower tier --------------------------------------------------- */

/* total[k]: the predicted cost of restoring the first k of m blocks and
 * recomputing the rest; the cheapest k (the fewest restored on a tie). */
static int32_t restore_adaptive(const double *total, int32_t m, enum allm_reason *why)
{
	int32_t best = 0;
	for (int32_t k = 1; k <= m; k++)
		if (total[k] < total[best])
			best = k;
	*why = best == m ? ALLM_REASON_RESTORE_CHEAPER
	       : best == 0 ? ALLM_REASON_RECOMPUTE_CACHED_CHEAPER
			   : ALLM_REASON_SPLIT_CHEAPEST;
	return best;
}

/* The fixed policies, as vLLM's offloading and ours without a cost model:
 * `swap` always restores what a lower tier holds, `recompute` never does. */
static int32_t restore_always(const double *total, int32_t m, enum allm_reason *why)
{
	(void)total;
	*why = ALLM_REASON_POLICY_RESTORE;
	return m;
}

static int32_t restore_never(const double *total, int32_t m, enum allm_reason *why)
{
	(void)total;
	(void)m;
	*why = ALLM_REASON_POLICY_RECOMPUTE_CACHED;
	return 0;
}

static const struct allm_policy policies[] = {
	[ALLM_PREEMPT_ADAPTIVE] = {.victim = victim_adaptive, .restore = restore_adaptive, .phase = phase_adaptive,
				    .swaps = true, .restores = true},
	[ALLM_PREEMPT_RECOMPUTE] = {.victim = victim_recompute, .restore = restore_never, .phase = phase_never,
				     .swaps = false, .restores = false},
	[ALLM_PREEMPT_SWAP] = {.victim = victim_swap, .restore = restore_always, .phase = phase_swap, .swaps = true,
				.restores = true, .keeps_all = true},
};

const struct allm_policy *allm_policy_of(enum allm_preempt_mode m)
{
	return (unsigned)m < ALLM_ARRAY_SIZE(policies) ? &policies[m] : &policies[ALLM_PREEMPT_ADAPTIVE];
}

bool allm_policy_wanted_host(enum allm_reason r)
{
	return r == ALLM_REASON_SWAP_CHEAPEST_HOST_FULL_DISK || r == ALLM_REASON_POLICY_SWAP_HOST_FULL_DISK;
}

const char *allm_reason_text(enum allm_reason r)
{
	static const char *const text[ALLM_REASON_COUNT] = {
		[ALLM_REASON_NONE] = "",
		[ALLM_REASON_POLICY_RECOMPUTE] = "policy recompute",
		[ALLM_REASON_POLICY_SWAP] = "policy swap",
		[ALLM_REASON_POLICY_SWAP_HOST_FULL_DISK] = "policy swap, CPU pool full: disk",
		[ALLM_REASON_POLICY_SWAP_ALL_FULL] = "policy swap, CPU and disk pools full",
		[ALLM_REASON_POLICY_SWAP_HOST_FULL] = "policy swap, CPU pool full",
		[ALLM_REASON_POLICY_SWAP_DISK_FAILING] = "policy swap, CPU pool full, disk failing",
		[ALLM_REASON_SWAP_CHEAPER_DISK_FAILING] = "swap cheaper, CPU pool full, disk failing",
		[ALLM_REASON_SWAP_CHEAPER] = "swap cheaper",
		[ALLM_REASON_SWAP_CHEAPER_HOST_FULL] = "swap cheaper, CPU pool full",
		[ALLM_REASON_RECOMPUTE_CHEAPER] = "recompute cheaper",
		[ALLM_REASON_SWAP_CHEAPEST] = "swap cheapest",
		[ALLM_REASON_SWAP_CHEAPEST_HOST_FULL_DISK] = "swap cheapest, CPU pool full: disk",
		[ALLM_REASON_DISK_CHEAPEST] = "disk cheapest",
		[ALLM_REASON_RECOMPUTE_CHEAPEST] = "recompute cheapest",
		[ALLM_REASON_SWAP_CHEAPER_ALL_FULL] = "swap cheaper, CPU and disk pools full",
		[ALLM_REASON_HOST_MADE_ROOM] = "host pool made room: a lower-priority swap went to disk",
		[ALLM_REASON_SWAP_FAILED] = "swap failed",
		[ALLM_REASON_DISK_WRITE_FAILED] = "disk write failed",
		[ALLM_REASON_DISK_READ_FAILED] = "disk read failed",
		[ALLM_REASON_DEMOTED] = "swapped, then demoted to disk",
		[ALLM_REASON_HOST_SHRANK] = "swapped, then the CPU pool shrank",
		[ALLM_REASON_DISK_SHRANK] = "swapped to disk, then the disk pool shrank",
		[ALLM_REASON_RESTORE_CHEAPER] = "restore cheaper",
		[ALLM_REASON_RECOMPUTE_CACHED_CHEAPER] = "recompute cheaper than restore",
		[ALLM_REASON_SPLIT_CHEAPEST] = "restore the head, recompute the tail",
		[ALLM_REASON_POLICY_RESTORE] = "policy swap: restore",
		[ALLM_REASON_POLICY_RECOMPUTE_CACHED] = "policy recompute: recompute",
		[ALLM_REASON_RESTORE_FAILED] = "restore failed: recomputed",
		[ALLM_REASON_PHASE_SWAP_CHEAPER] = "phase: swap out cheaper than a smaller chunk",
		[ALLM_REASON_PHASE_SWAP_POLICY] = "phase: policy swap, out for a prefill",
	};
	return (unsigned)r < ALLM_REASON_COUNT && text[r] ? text[r] : "?";
}

const char *allm_choice_name(enum allm_choice c)
{
	static const char *const names[] = {
		[ALLM_CHOICE_SWAP] = "swap", [ALLM_CHOICE_RECOMPUTE] = "recompute", [ALLM_CHOICE_DISK] = "disk",
		[ALLM_CHOICE_RESTORE] = "restore", [ALLM_CHOICE_SPLIT] = "split",
	};
	return (unsigned)c < ALLM_ARRAY_SIZE(names) ? names[c] : "?";
}
