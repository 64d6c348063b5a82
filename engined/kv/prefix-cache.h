/* The prefix cache (DESIGN §5b): KV that outlives its request. A full block of a
 * sequence is keyed by a hash chain, key = SHA-256(parent key, the block's token
 * ids), whose root is SHA-256(model, KV dtype, block size, the request's
 * isolation domain); an entry remembers its key, its tokens, its parent entry
 * and its domain, and every hit is checked against all of them, so a forged
 * key collision (allm_pc_set_test_collide) never serves another prompt's KV.
 *
 * An entry's block lives in one tier at a time. On the device it is shared,
 * read-only and refcounted by the block pool (ALLM_BLOCK_CACHED); when nobody
 * holds it, it waits on the pool's LRU list until an allocation reclaims it,
 * and the pool's evict callback here then writes it to the next tier down
 * (host, then disk) when the policy says its reuse pays for the write, or
 * forgets it. A request whose prefix sits in a lower tier restores it
 * (allm_pc_restore) or recomputes it: the scheduler decides.
 *
 * Entries also keep what routers need (KV events, DESIGN §14): key, the parent's
 * key, tokens, tier; an observer (allm_pc_set_observer) hears every entry that
 * arrives in a tier or leaves one, and a reset. Not thread-safe: the engine's
 * thread owns it. */
#ifndef ALLM_PREFIX_CACHE_H
#define ALLM_PREFIX_CACHE_H

#include "kv-cache.h"

#define ALLM_PC_KEY_BYTES 32
#define ALLM_PC_SALT_BYTES 16
/* allm_pc_domain.uid of requests that may share across uids (--share-prefix-cache) */
#define ALLM_PC_UID_SHARED UINT32_MAX

struct allm_pc_key {
	uint8_t b[ALLM_PC_KEY_BYTES];
};

/* Who may share a cached prefix: requests with equal domains only. */
struct allm_pc_domain {
	uint32_t uid; /* the submitter's uid, or ALLM_PC_UID_SHARED */
	uint8_t salt[ALLM_PC_SALT_BYTES]; /* the cache salt (the gateway's); zeros: none */
};

struct allm_pc_entry {
	struct allm_pc_key key;
	struct allm_pc_domain dom; /* of the request that made it */
	int32_t parent; /* the previous block's entry, -1 for a chain's first block */
	struct allm_pc_key parent_key; /* its key (zeros for a chain's first): kept
					* for KV events, since the parent may be
					* forgotten before this entry moves */
	uint32_t parent_gen; /* that entry's gen when this one was made */
	uint32_t gen; /* bumped each time the slot is freed: stale parents never match */
	int32_t depth; /* the block's index in its sequence */
	int8_t tier; /* enum allm_kv_tier; -1: a free slot */
	int32_t block; /* its block in that tier's pool */
	int32_t next; /* the next entry of its hash bucket (or of the free list) */
	uint32_t hits; /* lookups that used it */
	int32_t n_children; /* live entries whose parent it is (its child list) */
	int32_t first_child, prev_sibling, next_sibling; /* that list, -1 ends it */
	/* its parent was forgotten while a request held it: no match reaches it
	 * again, observers heard it leave, and its block is reclaimed, never
	 * written down, once its holders let go */
	bool orphan;
};

/* How evictions go: the scheduler's side (its predictors). keep: whether a
 * block evicted towards tier `to` is worth writing there (NULL: always);
 * moved: the measured cost of a write the cache made (may be NULL). */
struct allm_pc_policy {
	void *ctx;
	bool (*keep)(void *ctx, enum allm_kv_tier to, const struct allm_pc_entry *e);
	void (*moved)(void *ctx, enum allm_kv_tier from, enum allm_kv_tier to,
		      const struct allm_swap_result *res);
};

/* What an observer hears (KV events, DESIGN §14). */
enum allm_pc_change {
	ALLM_PC_STORED, /* entry e arrived in tier t (published, written down, restored) */
	ALLM_PC_REMOVED, /* entry e left tier t (moved, dropped, reset) */
	ALLM_PC_CLEARED, /* a reset: every entry left every tier (e = -1); the
			  * survivors (held by requests) are then STORED again */
};

/* Called inside the cache's own calls, with entry e still readable
 * (allm_pc_entry, allm_pc_tokens): the observer may read, never call back in
 * to change the cache. */
struct allm_pc_observer {
	void *ctx;
	void (*changed)(void *ctx, enum allm_pc_change what, int32_t e, enum allm_kv_tier t);
};

/* Counters since creation (or allm_pc_reset_stats). */
struct allm_pc_stats {
	int32_t blocks[ALLM_KV_TIER_COUNT]; /* entries per tier now (orphans not: they
					     * are cached for nobody, KV events said so) */
	int64_t written[ALLM_KV_TIER_COUNT]; /* evicted blocks written into tier t */
	double write_seconds[ALLM_KV_TIER_COUNT]; /* what those writes took */
	int64_t skipped[ALLM_KV_TIER_COUNT]; /* not written into t: the reuse would not pay */
	int64_t dropped[ALLM_KV_TIER_COUNT]; /* evicted from t and forgotten */
	int64_t hit_blocks[ALLM_KV_TIER_COUNT]; /* blocks that served a hit from t */
	int64_t restored[ALLM_KV_TIER_COUNT]; /* of those, copied from t to the device */
	int64_t write_errors; /* writes that failed (the block was dropped) */
	int64_t stranded; /* forgotten with their parent (no match could reach them) */
};

struct allm_prefix_cache;

/* A cache over kv's pools (device, host, and disk when kv has one: attach the
 * disk tier first), for one model: model_id and kv's layout go into every
 * root key. Sets the pools' evict callbacks and kv->pc. Reads the test hook
 * ALLM_PREFIX_TEST_COLLIDE=1 (every block key equal). 0 or -ENOMEM. */
int allm_prefix_cache_create(struct allm_kv_cache *kv, const char *model_id, struct allm_prefix_cache **ret);
/* Forgets every entry (none may be held), detaches from the pools. Accepts NULL. */
void allm_prefix_cache_free(struct allm_prefix_cache *pc);
void allm_pc_set_policy(struct allm_prefix_cache *pc, const struct allm_pc_policy *pol);
/* obs NULL: none. */
void allm_pc_set_observer(struct allm_prefix_cache *pc, const struct allm_pc_observer *obs);
/* Tells the observer STORED for every live entry, a chain's parents before
 * their children (a subscriber's resync: CLEARED first, then this). */
void allm_pc_announce_all(struct allm_prefix_cache *pc);
/* Test hook: every block key the same, so only the checks keep prompts apart. */
void allm_pc_set_test_collide(struct allm_prefix_cache *pc, bool on);
int32_t allm_pc_block_size(const struct allm_prefix_cache *pc);

/* The root of a domain's chains. */
void allm_pc_root(const struct allm_prefix_cache *pc, const struct allm_pc_domain *dom, struct allm_pc_key *ret);
/* The key of the block of block_size tokens after `parent`. */
void allm_pc_next_key(const struct allm_prefix_cache *pc, const struct allm_pc_key *parent, const int32_t *tokens,
		      struct allm_pc_key *ret);

/* The entries of the longest cached prefix of a sequence: keys[i] and
 * tokens[i * block_size ...] of its first max_blocks full blocks. Fills
 * ret_entries[0..n) and returns n; touches nothing. */
int32_t allm_pc_match(const struct allm_prefix_cache *pc, const struct allm_pc_domain *dom,
		      const struct allm_pc_key *keys, const int32_t *tokens, int32_t max_blocks,
		      int32_t *ret_entries);
const struct allm_pc_entry *allm_pc_entry(const struct allm_prefix_cache *pc, int32_t e);
/* Entry e's block_size token ids (NULL for a free slot). */
const int32_t *allm_pc_tokens(const struct allm_prefix_cache *pc, int32_t e);
/* Slots [0, n) that entry ids live in (for walking every entry). */
int32_t allm_pc_capacity(const struct allm_prefix_cache *pc);

/* A hit on device entry e: one more holder of its block (returned). -EINVAL
 * unless e is on the device. */
int allm_pc_take(struct allm_prefix_cache *pc, int32_t e, int32_t *ret_block);
/* Brings lower-tier entries[0..n) to the device for owner: takes n device
 * blocks (reclaiming cached-free ones, never these entries'), copies, frees the
 * lower blocks; each entry's device block is then held once by owner
 * (ret_blocks[i]). res[t]: the copies from tier t (zeroed first). On failure
 * nothing is held, the entries of a failed disk read are forgotten (their
 * contents are not trusted), and -ENOSPC (not enough device blocks) or the
 * copy's -errno comes back with err. */
int allm_pc_restore(struct allm_prefix_cache *pc, int64_t owner, const int32_t *entries, int32_t n,
		    int32_t *ret_blocks, struct allm_swap_result res[ALLM_KV_TIER_COUNT], struct allm_err *err);
/* owner's full device block at depth becomes cached under key (child of
 * entry parent, -1 for the first block): 1 and *ret_entry = its entry (the
 * block is now cached, held by owner); 0 when an equal entry is already on the
 * device (*ret_entry = it; the block stays owner's); an equal entry in a lower
 * tier moves onto this block (1). -ENOMEM: nothing changed. */
int allm_pc_publish(struct allm_prefix_cache *pc, int64_t owner, int32_t block, const struct allm_pc_key *key,
		    int32_t parent, int32_t depth, const int32_t *tokens, const struct allm_pc_domain *dom,
		    int32_t *ret_entry);
/* Whether entry e (as ret_entry gave it, with its gen) is still that entry. */
bool allm_pc_alive(const struct allm_prefix_cache *pc, int32_t e, uint32_t gen);

/* Drops every entry no one holds, in every tier (`cache reset`, prefix
 * caching turned off); entries in use stay. Returns how many went. The
 * observer hears CLEARED, then STORED for each entry that stayed. */
int32_t allm_pc_reset(struct allm_prefix_cache *pc);
void allm_pc_get_stats(const struct allm_prefix_cache *pc, struct allm_pc_stats *ret);
void allm_pc_reset_stats(struct allm_prefix_cache *pc);
/* Checks that entries and pools agree (each entry's block is cached in its
 * tier's pool and maps back to it, hash chains hold every live entry once).
 * 0 or -EFAULT. For tests. */
int allm_pc_check(const struct allm_prefix_cache *pc);

#endif
