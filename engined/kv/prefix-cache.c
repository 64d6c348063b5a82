/* The prefix cache: entries, their hash table, evictions down the tiers and
 * restores back up (prefix-cache.h). */
#include "prefix-cache.h"

#include "sha256.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The cache's own owner id in the pools, for the moment a lower-tier block is
 * taken and filled before it becomes cached (sequence ids are small). */
#define PC_OWNER (INT64_MAX - 1)

struct allm_prefix_cache {
	struct allm_kv_cache *kv; /* not owned */
	int32_t block_size;
	uint8_t tag[ALLM_PC_KEY_BYTES]; /* SHA-256 of the extra keys every root shares */
	struct allm_pc_entry *ent; /* [cap] */
	int32_t *tokens; /* [cap * block_size] each entry's token ids */
	int32_t cap, n_live;
	int32_t free_head; /* free slots, chained by next */
	int32_t *bucket; /* [n_buckets] first entry of each, -1 */
	uint32_t n_buckets; /* a power of two */
	int32_t *map[ALLM_KV_TIER_COUNT]; /* [map_cap[t]] block id -> entry, -1 */
	int32_t map_cap[ALLM_KV_TIER_COUNT];
	struct allm_pc_policy pol;
	struct allm_pc_observer obs; /* KV events' ears, or none */
	bool quiet; /* inside a reset: the observer hears CLEARED instead */
	bool collide; /* the test hook */
	struct allm_pc_stats st;
};

static void on_evict(void *ctx, struct allm_block_pool *p, int32_t id);

static void notify(struct allm_prefix_cache *pc, enum allm_pc_change what, int32_t e, int t)
{
	/* an orphan was heard leaving when it became one */
	if (pc->obs.changed && !pc->quiet && (e < 0 || !pc->ent[e].orphan))
		pc->obs.changed(pc->obs.ctx, what, e, (enum allm_kv_tier)t);
}

/* --- keys ------------------------------------------------------------------------- */

void allm_pc_root(const struct allm_prefix_cache *pc, const struct allm_pc_domain *dom, struct allm_pc_key *ret)
{
	struct allm_sha256 h;
	uint8_t raw[4 + ALLM_PC_SALT_BYTES];
	memcpy(raw, &dom->uid, 4);
	memcpy(raw + 4, dom->salt, ALLM_PC_SALT_BYTES);
	allm_sha256_init(&h);
	allm_sha256_update(&h, "allm-prefix-root", 16);
	allm_sha256_update(&h, pc->tag, sizeof(pc->tag));
	allm_sha256_update(&h, raw, sizeof(raw));
	allm_sha256_final(&h, ret->b);
}

void allm_pc_next_key(const struct allm_prefix_cache *pc, const struct allm_pc_key *parent, const int32_t *tokens,
		      struct allm_pc_key *ret)
{
	if (pc->collide) {
		memset(ret->b, 0x5a, sizeof(ret->b)); /* a forged collision: every key the same */
		return;
	}
	struct allm_sha256 h;
	allm_sha256_init(&h);
	allm_sha256_update(&h, parent->b, sizeof(parent->b));
	/* ids as little-endian int32 (the wire's byte order, checked in protocol.h) */
	allm_sha256_update(&h, tokens, (size_t)pc->block_size * sizeof(int32_t));
	allm_sha256_final(&h, ret->b);
}

static uint32_t bucket_of(const struct allm_prefix_cache *pc, const struct allm_pc_key *k)
{
	uint64_t x;
	memcpy(&x, k->b, sizeof(x));
	return (uint32_t)(x & (pc->n_buckets - 1));
}

/* --- create / free ------------------------------------------------------------------ */

static void attach(struct allm_prefix_cache *pc, bool on)
{
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++) {
		struct allm_block_pool *p = allm_kv_tier_pool(pc->kv, (enum allm_kv_tier)t);
		if (!p)
			continue;
		p->evict = on ? on_evict : NULL;
		p->evict_ctx = on ? pc : NULL;
	}
	pc->kv->pc = on ? pc : NULL;
}

int allm_prefix_cache_create(struct allm_kv_cache *kv, const char *model_id, struct allm_prefix_cache **ret)
{
	struct allm_prefix_cache *pc = allm_calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	pc->kv = kv;
	pc->block_size = kv->lay.block_size;
	pc->free_head = -1;
	pc->n_buckets = 1024;
	pc->bucket = allm_malloc(pc->n_buckets * sizeof(int32_t));
	if (!pc->bucket) {
		allm_free(pc);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < pc->n_buckets; i++)
		pc->bucket[i] = -1;
	/* the extra keys every block of this engine shares: what changes its KV
	 * besides the tokens (the model, the KV layout and its dtype) */
	struct allm_sha256 h;
	allm_sha256_init(&h);
	allm_sha256_update(&h, model_id, strlen(model_id) + 1);
	allm_sha256_update(&h, &kv->lay, sizeof(kv->lay));
	allm_sha256_final(&h, pc->tag);
	pc->collide = kv->env.prefix_collide;
	attach(pc, true);
	*ret = pc;
	return 0;
}

void allm_pc_set_policy(struct allm_prefix_cache *pc, const struct allm_pc_policy *pol)
{
	pc->pol = pol ? *pol : (struct allm_pc_policy){0};
}

void allm_pc_set_observer(struct allm_prefix_cache *pc, const struct allm_pc_observer *obs)
{
	pc->obs = obs ? *obs : (struct allm_pc_observer){0};
}

void allm_pc_set_test_collide(struct allm_prefix_cache *pc, bool on)
{
	pc->collide = on;
}

int32_t allm_pc_block_size(const struct allm_prefix_cache *pc)
{
	return pc->block_size;
}

const struct allm_pc_entry *allm_pc_entry(const struct allm_prefix_cache *pc, int32_t e)
{
	return e >= 0 && e < pc->cap && pc->ent[e].tier >= 0 ? &pc->ent[e] : NULL;
}

const int32_t *allm_pc_tokens(const struct allm_prefix_cache *pc, int32_t e)
{
	return allm_pc_entry(pc, e) ? pc->tokens + (size_t)e * pc->block_size : NULL;
}

int32_t allm_pc_capacity(const struct allm_prefix_cache *pc)
{
	return pc->cap;
}

bool allm_pc_alive(const struct allm_prefix_cache *pc, int32_t e, uint32_t gen)
{
	return allm_pc_entry(pc, e) && pc->ent[e].gen == gen;
}

/* --- the block -> entry maps --------------------------------------------------------- */

/* Makes tier t's map cover its pool's ids. */
static int map_fit(struct allm_prefix_cache *pc, enum allm_kv_tier t)
{
	struct allm_block_pool *p = allm_kv_tier_pool(pc->kv, t);
	int32_t need = p ? p->capacity : 0;
	if (need <= pc->map_cap[t])
		return 0;
	int32_t *m = allm_realloc(pc->map[t], (size_t)need * sizeof(int32_t));
	if (!m)
		return -ENOMEM;
	for (int32_t i = pc->map_cap[t]; i < need; i++)
		m[i] = -1;
	pc->map[t] = m;
	pc->map_cap[t] = need;
	return 0;
}

static int32_t entry_at(const struct allm_prefix_cache *pc, enum allm_kv_tier t, int32_t block)
{
	return block >= 0 && block < pc->map_cap[t] ? pc->map[t][block] : -1;
}

/* Entry e now lives in block `block` of tier t (map_fit done). */
static void place(struct allm_prefix_cache *pc, int32_t e, enum allm_kv_tier t, int32_t block)
{
	struct allm_pc_entry *x = &pc->ent[e];
	if (x->tier >= 0 && entry_at(pc, (enum allm_kv_tier)x->tier, x->block) == e) {
		notify(pc, ALLM_PC_REMOVED, e, x->tier);
		pc->map[x->tier][x->block] = -1;
		pc->st.blocks[x->tier]--;
	}
	x->tier = (int8_t)t;
	x->block = block;
	pc->map[t][block] = e;
	pc->st.blocks[t]++;
	notify(pc, ALLM_PC_STORED, e, t);
}

/* Entry e's block leaves it (the block is the pool's business). */
static void unplace(struct allm_prefix_cache *pc, int32_t e)
{
	struct allm_pc_entry *x = &pc->ent[e];
	if (entry_at(pc, (enum allm_kv_tier)x->tier, x->block) == e) {
		notify(pc, ALLM_PC_REMOVED, e, x->tier);
		pc->map[x->tier][x->block] = -1;
		if (!x->orphan) /* an orphan left the count when it became one */
			pc->st.blocks[x->tier]--;
	}
	x->block = -1;
}

/* --- entries ------------------------------------------------------------------------- */

static int grow_entries(struct allm_prefix_cache *pc)
{
	int32_t cap = ALLM_MAX(256, pc->cap * 2);
	struct allm_pc_entry *v = allm_realloc(pc->ent, (size_t)cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	pc->ent = v;
	int32_t *t = allm_realloc(pc->tokens, (size_t)cap * (size_t)pc->block_size * sizeof(int32_t));
	if (!t)
		return -ENOMEM;
	pc->tokens = t;
	for (int32_t i = cap - 1; i >= pc->cap; i--) {
		memset(&v[i], 0, sizeof(v[i]));
		v[i].tier = -1;
		v[i].next = pc->free_head;
		pc->free_head = i;
	}
	pc->cap = cap;
	/* keep chains short: about one entry per bucket */
	if ((uint32_t)cap > pc->n_buckets) {
		uint32_t nb = pc->n_buckets;
		while (nb < (uint32_t)cap)
			nb *= 2;
		int32_t *b = allm_malloc(nb * sizeof(int32_t));
		if (!b)
			return 0; /* longer chains, still correct */
		allm_free(pc->bucket);
		pc->bucket = b;
		pc->n_buckets = nb;
		for (uint32_t i = 0; i < nb; i++)
			b[i] = -1;
		for (int32_t i = 0; i < pc->cap; i++)
			if (v[i].tier >= 0) {
				uint32_t k = bucket_of(pc, &v[i].key);
				v[i].next = b[k];
				b[k] = i;
			}
	}
	return 0;
}

static void free_lower(struct allm_prefix_cache *pc, enum allm_kv_tier t, int32_t block);
static void strand(struct allm_prefix_cache *pc, int32_t c);

/* Takes entry c out of its parent's child list. */
static void unlink_child(struct allm_prefix_cache *pc, int32_t c)
{
	struct allm_pc_entry *x = &pc->ent[c], *p = &pc->ent[x->parent];
	if (x->prev_sibling >= 0)
		pc->ent[x->prev_sibling].next_sibling = x->next_sibling;
	else
		p->first_child = x->next_sibling;
	if (x->next_sibling >= 0)
		pc->ent[x->next_sibling].prev_sibling = x->prev_sibling;
	x->prev_sibling = x->next_sibling = -1;
	p->n_children--;
}

/* Strands every child of entry e (which is going): see strand. */
static void strand_children(struct allm_prefix_cache *pc, int32_t e)
{
	while (pc->ent[e].first_child >= 0) {
		int32_t c = pc->ent[e].first_child;
		unlink_child(pc, c);
		strand(pc, c);
	}
}

/* Unlinks entry e from its bucket and frees its slot. Its block must be gone
 * (or, an orphan's, be on its way back to its pool). Its children go too. */
static void forget(struct allm_prefix_cache *pc, int32_t e)
{
	struct allm_pc_entry *x = &pc->ent[e];
	int32_t *pp = &pc->bucket[bucket_of(pc, &x->key)];
	while (*pp != e) {
		ALLM_ASSERT(*pp >= 0);
		pp = &pc->ent[*pp].next;
	}
	*pp = x->next;
	unplace(pc, e);
	if (x->parent >= 0 && !x->orphan)
		unlink_child(pc, e);
	strand_children(pc, e);
	x->tier = -1;
	x->orphan = false;
	x->gen++;
	x->next = pc->free_head;
	pc->free_head = e;
	pc->n_live--;
}

/* Entry c's parent is going: no match walks to c (or below it) again, since a
 * hit starts at a chain's first block and checks each parent, so c must not
 * look cached to anyone (KV events: the same chain stored again would show its
 * key twice, in two tiers) nor keep a block. Its block goes back to its pool
 * now, or, while requests hold it, c stays as a silent orphan (its holders'
 * KV is theirs) until the pool reclaims the block. */
static void strand(struct allm_prefix_cache *pc, int32_t c)
{
	struct allm_pc_entry *x = &pc->ent[c];
	enum allm_kv_tier t = (enum allm_kv_tier)x->tier;
	int32_t b = x->block;
	if (b >= 0 && allm_kv_tier_pool(pc->kv, t)->refs[b] > 0) {
		notify(pc, ALLM_PC_REMOVED, c, t);
		pc->st.blocks[t]--; /* cached no more, as routers now see it */
		x->orphan = true;
		strand_children(pc, c);
		return;
	}
	if (b >= 0) { /* b < 0: its block is being reclaimed right now (on_evict) */
		unplace(pc, c); /* heard leaving */
		free_lower(pc, t, b);
	}
	x->orphan = true; /* out of its parent's list already */
	pc->st.stranded++;
	forget(pc, c);
}

/* Whether entry e is the block after `parent` (-1: a chain's first) of
 * domain dom with these tokens: the checks that make a forged key harmless. */
static bool same_block(const struct allm_prefix_cache *pc, int32_t e, const struct allm_pc_key *key,
		       int32_t parent, const int32_t *tokens, const struct allm_pc_domain *dom)
{
	const struct allm_pc_entry *x = &pc->ent[e];
	if (memcmp(x->key.b, key->b, sizeof(key->b)) || x->parent != parent)
		return false;
	if (parent >= 0 ? x->parent_gen != pc->ent[parent].gen || pc->ent[parent].tier < 0
			: memcmp(&x->dom, dom, sizeof(*dom)))
		return false;
	return !memcmp(pc->tokens + (size_t)e * pc->block_size, tokens, (size_t)pc->block_size * sizeof(int32_t));
}

static int32_t find(const struct allm_prefix_cache *pc, const struct allm_pc_key *key, int32_t parent,
		    const int32_t *tokens, const struct allm_pc_domain *dom)
{
	for (int32_t e = pc->bucket[bucket_of(pc, key)]; e >= 0; e = pc->ent[e].next)
		if (same_block(pc, e, key, parent, tokens, dom))
			return e;
	return -1;
}

int32_t allm_pc_match(const struct allm_prefix_cache *pc, const struct allm_pc_domain *dom,
		      const struct allm_pc_key *keys, const int32_t *tokens, int32_t max_blocks,
		      int32_t *ret_entries)
{
	int32_t n = 0, parent = -1;
	for (; n < max_blocks; n++) {
		int32_t e = find(pc, &keys[n], parent, tokens + (size_t)n * pc->block_size, dom);
		if (e < 0)
			break;
		ret_entries[n] = parent = e;
	}
	return n;
}

int allm_pc_take(struct allm_prefix_cache *pc, int32_t e, int32_t *ret_block)
{
	const struct allm_pc_entry *x = allm_pc_entry(pc, e);
	if (!x || x->tier != ALLM_KV_TIER_DEVICE)
		return -EINVAL;
	int r = allm_block_pool_ref(&pc->kv->gpu, x->block);
	if (r)
		return r;
	pc->ent[e].hits++;
	pc->st.hit_blocks[ALLM_KV_TIER_DEVICE]++;
	*ret_block = x->block;
	return 0;
}

/* Lets a cached block nobody holds go, no entry pointing at it any more. */
static void free_lower(struct allm_prefix_cache *pc, enum allm_kv_tier t, int32_t block)
{
	struct allm_block_pool *p = allm_kv_tier_pool(pc->kv, t);
	/* a block changes hands only once its write behind has landed */
	if (t == ALLM_KV_TIER_DISK)
		allm_kv_disk_drain(pc->kv->disk, &block, 1);
	int r = allm_block_pool_uncache(p, block);
	ALLM_ASSERT(r == 0);
}

int allm_pc_publish(struct allm_prefix_cache *pc, int64_t owner, int32_t block, const struct allm_pc_key *key,
		    int32_t parent, int32_t depth, const int32_t *tokens, const struct allm_pc_domain *dom,
		    int32_t *ret_entry)
{
	if (parent >= 0 && pc->ent[parent].orphan)
		return -ESTALE; /* no match reaches what would follow it */
	if (map_fit(pc, ALLM_KV_TIER_DEVICE))
		return -ENOMEM;
	int32_t e = find(pc, key, parent, tokens, dom);
	if (e >= 0 && pc->ent[e].tier == ALLM_KV_TIER_DEVICE) {
		*ret_entry = e;
		return 0;
	}
	if (e < 0 && pc->free_head < 0 && grow_entries(pc))
		return -ENOMEM;
	if (allm_block_pool_cache(&pc->kv->gpu, owner, block))
		return -EINVAL;
	if (e >= 0) {
		/* this request recomputed what a lower tier holds: the device copy wins */
		enum allm_kv_tier t = (enum allm_kv_tier)pc->ent[e].tier;
		int32_t old = pc->ent[e].block;
		unplace(pc, e);
		free_lower(pc, t, old);
		place(pc, e, ALLM_KV_TIER_DEVICE, block);
		*ret_entry = e;
		return 1;
	}
	e = pc->free_head;
	struct allm_pc_entry *x = &pc->ent[e];
	pc->free_head = x->next;
	uint32_t gen = x->gen;
	*x = (struct allm_pc_entry){.key = *key, .dom = *dom, .parent = parent,
				    .parent_gen = parent >= 0 ? pc->ent[parent].gen : 0, .gen = gen,
				    .depth = depth, .tier = -1, .block = -1, .first_child = -1,
				    .prev_sibling = -1, .next_sibling = -1};
	if (parent >= 0) {
		struct allm_pc_entry *p = &pc->ent[parent];
		x->parent_key = p->key;
		x->next_sibling = p->first_child;
		if (p->first_child >= 0)
			pc->ent[p->first_child].prev_sibling = e;
		p->first_child = e;
		p->n_children++;
	}
	memcpy(pc->tokens + (size_t)e * pc->block_size, tokens, (size_t)pc->block_size * sizeof(int32_t));
	uint32_t k = bucket_of(pc, key);
	x->next = pc->bucket[k];
	pc->bucket[k] = e;
	pc->n_live++;
	place(pc, e, ALLM_KV_TIER_DEVICE, block);
	*ret_entry = e;
	return 1;
}

/* --- evictions: down the tiers ------------------------------------------------------ */

static enum allm_kv_tier tier_of(const struct allm_prefix_cache *pc, const struct allm_block_pool *p)
{
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++)
		if (allm_kv_tier_pool(pc->kv, (enum allm_kv_tier)t) == p)
			return (enum allm_kv_tier)t;
	return ALLM_KV_TIER_COUNT;
}

/* Writes entry e (in block `from_block` of tier `from`) into a new block of
 * tier `to`. Whether it worked. */
static bool write_down(struct allm_prefix_cache *pc, int32_t e, enum allm_kv_tier from, int32_t from_block,
		       enum allm_kv_tier to)
{
	struct allm_block_pool *p = allm_kv_tier_pool(pc->kv, to);
	struct allm_swap_result res = {0};
	uint32_t gen = pc->ent[e].gen;
	int32_t id;
	if (map_fit(pc, to) || allm_block_pool_alloc(p, PC_OWNER, &id))
		return false;
	if (pc->ent[e].gen != gen) {
		/* the allocation reclaimed e's parent in tier `to`, and e went with it */
		allm_block_pool_release(p, PC_OWNER, id);
		return false;
	}
	if (allm_kv_tier_copy(pc->kv, from, &from_block, to, &id, 1, &res, NULL)) {
		pc->st.write_errors++;
		allm_block_pool_release(p, PC_OWNER, id);
		return false;
	}
	/* cached and nobody holds it: on the lower pool's LRU list */
	allm_block_pool_cache(p, PC_OWNER, id);
	place(pc, e, to, id);
	allm_block_pool_release(p, PC_OWNER, id);
	pc->st.written[to]++;
	pc->st.write_seconds[to] += res.seconds;
	if (pc->pol.moved)
		pc->pol.moved(pc->pol.ctx, from, to, &res);
	return true;
}

/* The pool reclaims block id of its tier: its entry goes one tier down when
 * that pays (the policy), the next one when that tier has no room, or is
 * forgotten. */
static void on_evict(void *ctx, struct allm_block_pool *p, int32_t id)
{
	struct allm_prefix_cache *pc = ctx;
	enum allm_kv_tier from = tier_of(pc, p);
	int32_t e = from < ALLM_KV_TIER_COUNT ? entry_at(pc, from, id) : -1;
	if (e < 0)
		return; /* a block no entry points at (a restore moved it) */
	uint32_t gen = pc->ent[e].gen;
	unplace(pc, e);
	if (from == ALLM_KV_TIER_DISK)
		allm_kv_disk_drain(pc->kv->disk, &id, 1);
	for (int t = from + 1; t < ALLM_KV_TIER_COUNT && !pc->ent[e].orphan; t++) {
		struct allm_block_pool *lp = allm_kv_tier_pool(pc->kv, (enum allm_kv_tier)t);
		if (!lp || lp->n_total == 0)
			continue; /* no such tier: the next one down */
		if (pc->pol.keep && !pc->pol.keep(pc->pol.ctx, (enum allm_kv_tier)t, &pc->ent[e])) {
			pc->st.skipped[t]++;
			break;
		}
		if (allm_block_pool_avail(lp) > 0 && write_down(pc, e, from, id, (enum allm_kv_tier)t))
			return;
		if (pc->ent[e].gen != gen)
			return; /* forgotten meanwhile, with its parent */
	}
	pc->st.dropped[from]++;
	forget(pc, e);
}

/* --- restores: back to the device ----------------------------------------------------- */

int allm_pc_restore(struct allm_prefix_cache *pc, int64_t owner, const int32_t *entries, int32_t n,
		    int32_t *ret_blocks, struct allm_swap_result res[ALLM_KV_TIER_COUNT], struct allm_err *err)
{
	struct allm_kv_cache *kv = pc->kv;
	int32_t *src = allm_malloc((size_t)ALLM_MAX(n, 1) * sizeof(int32_t) * 2), *dst = src ? src + n : NULL;
	int32_t got = 0;
	int r = 0;
	memset(res, 0, sizeof(*res) * ALLM_KV_TIER_COUNT);
	if (!src)
		return allm_err_set(err, -ENOMEM, "out of memory");
	if ((r = map_fit(pc, ALLM_KV_TIER_DEVICE))) {
		allm_err_set(err, r, "out of memory");
		goto out;
	}
	/* pin the sources so that reclaiming device blocks (which may write to
	 * these tiers) cannot take them */
	for (int32_t i = 0; i < n; i++) {
		const struct allm_pc_entry *x = &pc->ent[entries[i]];
		ALLM_ASSERT(x->tier > ALLM_KV_TIER_DEVICE);
		allm_block_pool_ref(allm_kv_tier_pool(kv, (enum allm_kv_tier)x->tier), x->block);
	}
	for (; got < n; got++)
		if (allm_block_pool_alloc(&kv->gpu, owner, &ret_blocks[got])) {
			r = allm_err_set(err, -ENOSPC, "no device block to restore a cached prefix into");
			/* nothing copied: the entries stay where they are */
			for (int32_t i = 0; i < n; i++) {
				const struct allm_pc_entry *x = &pc->ent[entries[i]];
				allm_block_pool_release(allm_kv_tier_pool(kv, (enum allm_kv_tier)x->tier), PC_OWNER, x->block);
			}
			goto give_back;
		}
	/* the copies, one batch per tier (runs coalesced) */
	for (int t = ALLM_KV_TIER_HOST; !r && t < ALLM_KV_TIER_COUNT; t++) {
		int32_t k = 0;
		for (int32_t i = 0; i < n; i++)
			if (pc->ent[entries[i]].tier == t) {
				src[k] = pc->ent[entries[i]].block;
				dst[k++] = ret_blocks[i];
			}
		if (k && (r = allm_kv_tier_copy(kv, (enum allm_kv_tier)t, src, ALLM_KV_TIER_DEVICE, dst, k, &res[t], err)))
			break;
	}
	/* unpin and free the lower blocks; the entries move to the device (after a
	 * failed copy they are forgotten: what was read is not trusted) */
	for (int32_t i = 0; i < n; i++) {
		int32_t e = entries[i];
		enum allm_kv_tier t = (enum allm_kv_tier)pc->ent[e].tier;
		struct allm_block_pool *p = allm_kv_tier_pool(kv, t);
		int32_t old = pc->ent[e].block;
		unplace(pc, e); /* first, so a deficit's eviction of `old` finds no entry */
		allm_block_pool_release(p, PC_OWNER, old);
		if (p->owner[old] == ALLM_BLOCK_CACHED)
			free_lower(pc, t, old);
		if (r) {
			forget(pc, e);
			continue;
		}
		allm_block_pool_cache(&kv->gpu, owner, ret_blocks[i]);
		place(pc, e, ALLM_KV_TIER_DEVICE, ret_blocks[i]);
		pc->ent[e].hits++;
		pc->st.hit_blocks[t]++;
		pc->st.restored[t]++;
	}
	if (!r)
		goto out;
give_back:
	for (int32_t i = 0; i < got; i++)
		allm_block_pool_release(&kv->gpu, owner, ret_blocks[i]);
out:
	allm_free(src);
	return r;
}

/* --- reset, stats, checks ------------------------------------------------------------ */

int32_t allm_pc_reset(struct allm_prefix_cache *pc)
{
	int32_t live = pc->n_live;
	pc->quiet = true; /* one CLEARED, not a REMOVED per entry */
	for (int32_t e = 0; e < pc->cap; e++) {
		struct allm_pc_entry *x = &pc->ent[e];
		if (x->tier < 0)
			continue;
		enum allm_kv_tier t = (enum allm_kv_tier)x->tier;
		struct allm_block_pool *p = allm_kv_tier_pool(pc->kv, t);
		if (p->refs[x->block] > 0)
			continue; /* in use: it stays */
		int32_t b = x->block;
		unplace(pc, e);
		free_lower(pc, t, b);
		forget(pc, e); /* with what hangs below it */
	}
	pc->quiet = false;
	notify(pc, ALLM_PC_CLEARED, -1, ALLM_KV_TIER_DEVICE);
	allm_pc_announce_all(pc);
	return live - pc->n_live;
}

struct depth_entry {
	int32_t depth, e;
};

static int by_depth(const void *a, const void *b)
{
	const struct depth_entry *x = a, *y = b;
	return x->depth != y->depth ? (x->depth < y->depth ? -1 : 1) : (x->e > y->e) - (x->e < y->e);
}

void allm_pc_announce_all(struct allm_prefix_cache *pc)
{
	if (!pc->obs.changed || pc->n_live == 0)
		return;
	struct depth_entry *v = allm_malloc((size_t)pc->n_live * sizeof(*v));
	int32_t n = 0;
	for (int32_t e = 0; e < pc->cap; e++)
		if (pc->ent[e].tier >= 0 && !pc->ent[e].orphan) {
			if (v)
				v[n] = (struct depth_entry){pc->ent[e].depth, e};
			n++;
		}
	if (v) /* parents first: a subscriber can chain each block to one it has */
		qsort(v, (size_t)n, sizeof(*v), by_depth);
	for (int32_t i = 0, e = 0; i < n; i++, e++) {
		if (v) {
			e = v[i].e;
		} else { /* no memory for the order: entries in slot order, still all of them */
			while (pc->ent[e].tier < 0 || pc->ent[e].orphan)
				e++;
		}
		notify(pc, ALLM_PC_STORED, e, pc->ent[e].tier);
	}
	allm_free(v);
}

void allm_pc_get_stats(const struct allm_prefix_cache *pc, struct allm_pc_stats *ret)
{
	*ret = pc->st;
}

void allm_pc_reset_stats(struct allm_prefix_cache *pc)
{
	int32_t blocks[ALLM_KV_TIER_COUNT];
	memcpy(blocks, pc->st.blocks, sizeof(blocks));
	memset(&pc->st, 0, sizeof(pc->st));
	memcpy(pc->st.blocks, blocks, sizeof(blocks)); /* a state, not a counter */
}

int allm_pc_check(const struct allm_prefix_cache *pc)
{
	int32_t per[ALLM_KV_TIER_COUNT] = {0}, orphans[ALLM_KV_TIER_COUNT] = {0}, live = 0, chained = 0;
	for (int32_t e = 0; e < pc->cap; e++) {
		const struct allm_pc_entry *x = &pc->ent[e];
		if (x->tier < 0)
			continue;
		live++;
		if (x->tier >= ALLM_KV_TIER_COUNT)
			return -EFAULT;
		struct allm_block_pool *p = allm_kv_tier_pool(pc->kv, (enum allm_kv_tier)x->tier);
		if (!p || x->block < 0 || x->block >= p->capacity || p->owner[x->block] != ALLM_BLOCK_CACHED ||
		    entry_at(pc, (enum allm_kv_tier)x->tier, x->block) != e)
			return -EFAULT;
		/* only the device's blocks are ever held (lower tiers: pinned during a restore) */
		if (x->tier != ALLM_KV_TIER_DEVICE && p->refs[x->block] != 0)
			return -EFAULT;
		if (x->orphan)
			orphans[x->tier]++; /* not in the stats' count */
		else
			per[x->tier]++;
	}
	/* children counts: each live entry's live children */
	for (int32_t e = 0; e < pc->cap; e++) {
		const struct allm_pc_entry *x = &pc->ent[e];
		if (x->tier < 0)
			continue;
		int32_t kids = 0, listed = 0;
		for (int32_t c = 0; c < pc->cap; c++)
			kids += pc->ent[c].tier >= 0 && !pc->ent[c].orphan && pc->ent[c].parent == e &&
				pc->ent[c].parent_gen == x->gen;
		for (int32_t c = x->first_child, prev = -1; c >= 0 && listed <= kids; prev = c, c = pc->ent[c].next_sibling) {
			const struct allm_pc_entry *y = &pc->ent[c];
			if (y->tier < 0 || y->orphan || y->parent != e || y->prev_sibling != prev)
				return -EFAULT;
			listed++;
		}
		if (kids != x->n_children || listed != kids)
			return -EFAULT;
		/* an orphan's parent is gone or an orphan; anyone else's is there */
		const struct allm_pc_entry *p = x->parent >= 0 ? &pc->ent[x->parent] : NULL;
		if (x->orphan == (!p || (p->tier >= 0 && p->gen == x->parent_gen && !p->orphan)))
			return -EFAULT;
	}
	for (uint32_t k = 0; k < pc->n_buckets; k++)
		for (int32_t e = pc->bucket[k]; e >= 0; e = pc->ent[e].next) {
			if (pc->ent[e].tier < 0 || bucket_of(pc, &pc->ent[e].key) != k || ++chained > live)
				return -EFAULT;
		}
	if (chained != live || live != pc->n_live)
		return -EFAULT;
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++) {
		if (per[t] != pc->st.blocks[t])
			return -EFAULT;
		/* every cached block of a pool belongs to an entry */
		struct allm_block_pool *p = allm_kv_tier_pool(pc->kv, (enum allm_kv_tier)t);
		int32_t cached = 0;
		for (int32_t i = 0; p && i < p->capacity; i++)
			cached += p->owner[i] == ALLM_BLOCK_CACHED;
		if (p && cached != per[t] + orphans[t])
			return -EFAULT;
	}
	return 0;
}

void allm_prefix_cache_free(struct allm_prefix_cache *pc)
{
	if (!pc)
		return;
	pc->obs.changed = NULL; /* the observer may be gone already */
	allm_pc_reset(pc);
	/* entries still held (a caller that did not let go) become plain blocks of
	 * nobody: the pools' checks will say so */
	attach(pc, false);
	allm_free(pc->ent);
	allm_free(pc->tokens);
	allm_free(pc->bucket);
	for (int t = 0; t < ALLM_KV_TIER_COUNT; t++)
		allm_free(pc->map[t]);
	allm_free(pc);
}
