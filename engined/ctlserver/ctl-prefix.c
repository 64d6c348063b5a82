/* The prefix cache in `status` (DESIGN §9's prefix_cache keys, then ours:
 * prefix_tiers) and in the Prometheus metrics. */
#include "ctl-internal.h"

static void tiers3(struct allm_ctl_enc *e, const char *key, const int64_t v[ALLM_KV_TIER_COUNT])
{
	allm_ctl_enc_kmap(e, key, 3);
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++)
		allm_ctl_enc_kint(e, allm_kv_tier_name((enum allm_kv_tier)t), v[t]);
}

void ctl_encode_prefix(struct allm_ctl_enc *e, const struct allm_engine_stats *st, bool enabled)
{
	int64_t blocks[ALLM_KV_TIER_COUNT], hits[ALLM_KV_TIER_COUNT];
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++) {
		blocks[t] = st->pc_blocks[t];
		hits[t] = st->pc_hit_tokens_tier[t];
	}
	allm_ctl_enc_kmap(e, "prefix_cache", 7);
	allm_ctl_enc_kbool(e, "enabled", enabled);
	allm_ctl_enc_kint(e, "queried_tokens", st->pc_queried_tokens);
	allm_ctl_enc_kint(e, "hit_tokens", st->pc_hit_tokens);
	tiers3(e, "hit_tokens_by_tier", hits);
	tiers3(e, "cached_blocks", blocks);
	allm_ctl_enc_kint(e, "restored_tokens", st->pc_restored_tokens);
	allm_ctl_enc_kint(e, "recomputed_cached_tokens", st->pc_recomputed_cached_tokens);
	/* ours: what moved down the tiers, what was dropped, and the
	 * restore-or-recompute decisions by the lowest tier they read */
	allm_ctl_enc_kmap(e, "prefix_tiers", 7);
	tiers3(e, "written_blocks", st->pc.written);
	tiers3(e, "dropped_blocks", st->pc.dropped);
	tiers3(e, "skipped_blocks", st->pc.skipped);
	allm_ctl_enc_kmap(e, "write_ms", 3);
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++)
		allm_ctl_enc_kdouble(e, allm_kv_tier_name((enum allm_kv_tier)t), st->pc.write_seconds[t] * 1e3);
	allm_ctl_enc_kmap(e, "decisions", 2);
	for (int t = ALLM_KV_TIER_HOST; t < ALLM_KV_TIER_COUNT; t++) {
		allm_ctl_enc_kmap(e, allm_kv_tier_name((enum allm_kv_tier)t), 3);
		allm_ctl_enc_kint(e, "restore", st->pc_restores[t][ALLM_CHOICE_RESTORE]);
		allm_ctl_enc_kint(e, "recompute", st->pc_restores[t][ALLM_CHOICE_RECOMPUTE]);
		allm_ctl_enc_kint(e, "split", st->pc_restores[t][ALLM_CHOICE_SPLIT]);
	}
	/* cached tokens re-prefills after a preemption found (not hits above) */
	allm_ctl_enc_kint(e, "readmit_hit_tokens", st->pc_readmit_hit_tokens);
	/* blocks victims held that others hold too (not freed by preempting them) */
	allm_ctl_enc_kint(e, "victim_shared_blocks", st->pc_victim_shared_blocks);
}
