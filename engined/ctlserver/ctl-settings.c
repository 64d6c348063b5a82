/* `set` and status's settings maps, both read off the settings table
 * (include/adaptivellm/settings.h): a row that is LIVE may be set, a row with a
 * STATUS map is shown in it. */
#include "ctl-internal.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

/* Largest block count `set` accepts; memory is checked as well. */
#define CTL_MAX_BLOCKS (1 << 22)

/* Most blocks a pool may be given: the ceiling above and the machine's memory. */
static int64_t max_blocks(const struct ctl_server *s)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t bb = s->h.rt->kv->block_bytes ? s->h.rt->kv->block_bytes : 1;
	if (pages <= 0 || psz <= 0)
		return CTL_MAX_BLOCKS;
	return ALLM_MAX(1, ALLM_MIN((int64_t)CTL_MAX_BLOCKS, (int64_t)((uint64_t)pages * (uint64_t)psz / bb)));
}

/* The current value of a live or shown row. */
static void current(const struct ctl_server *s, const struct allm_setting_desc *d,
		    struct allm_setting_value *ret)
{
	const struct allm_engine_config *cfg = allm_engine_get_config(s->h.eng);
	struct allm_engine_stats st;
	memset(ret, 0, sizeof(*ret));
	allm_engine_get_stats(s->h.eng, &st);
#define GET_I32(id) ret->i = cfg->id, ret->f = (double)cfg->id
#define GET_F64(id) ret->f = cfg->id
#define GET_BOOL(id) ret->i = cfg->id
#define GET_WORD(id) ret->i = (int64_t)cfg->id
#define GET_CFG(id, type)        \
	case ALLM_SETTING_##id:  \
		GET_##type(id);  \
		return;
#define GET_POOL(id, type)
#define GET_NO(id, type)
#define GET_(id, key, type, opt, live, ...) GET_##live(id, type)
	switch (d->id) {
		ALLM_SETTINGS_TABLE(GET_)
	case ALLM_SETTING_gpu_blocks:
		ret->i = st.gpu_total;
		return;
	case ALLM_SETTING_cpu_blocks:
		ret->i = st.cpu_total;
		return;
	case ALLM_SETTING_disk_blocks:
		ret->i = st.disk_total;
		return;
	default:
		return;
	}
#undef GET_
}

/* A value as status and `set` show it: a number, true/false for on|off, a word. */
static void enc_value(struct allm_ctl_enc *e, const struct allm_setting_desc *d,
		      const struct allm_setting_value *v, bool bool_as_word)
{
	char w[64];
	switch (d->type) {
	case ALLM_SET_F64:
		allm_ctl_enc_double(e, v->f);
		break;
	case ALLM_SET_BOOL:
		if (!bool_as_word) {
			allm_ctl_enc_bool(e, v->i != 0);
			break;
		}
		/* fall through */
	case ALLM_SET_WORD:
		allm_ctl_enc_str(e, allm_setting_word(d->choices, (int)v->i, w, sizeof(w)) ? w : "?");
		break;
	default:
		allm_ctl_enc_int(e, v->i);
	}
}

int ctl_status_settings_count(const char *map)
{
	int n = 0;
	for (int i = 0; i < ALLM_SETTING_COUNT; i++)
		n += allm_setting_desc(i)->status && !strcmp(allm_setting_desc(i)->status, map);
	return n;
}

void ctl_encode_status_settings(const struct ctl_server *s, struct allm_ctl_enc *e, const char *map)
{
	for (int i = 0; i < ALLM_SETTING_COUNT; i++) {
		const struct allm_setting_desc *d = allm_setting_desc(i);
		struct allm_setting_value v;
		if (!d->status || strcmp(d->status, map))
			continue;
		current(s, d, &v);
		allm_ctl_enc_str(e, d->key);
		enc_value(e, d, &v, false);
	}
}

/* --- set ------------------------------------------------------------------------- */

struct set_plan {
	bool has[ALLM_SETTING_COUNT];
	struct allm_setting_value val[ALLM_SETTING_COUNT];
	char text[ALLM_SETTING_COUNT][48]; /* the values' text (TEXT rows point here) */
	struct allm_engine_config cfg; /* the engine's config with the CFG rows given */
};

/* A msgpack value as the text a flag would take: "64", "1.5", "on". */
static int value_text(const msgpack_object *v, char *buf, size_t len)
{
	switch (v->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		snprintf(buf, len, "%llu", (unsigned long long)v->via.u64);
		return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		snprintf(buf, len, "%lld", (long long)v->via.i64);
		return 0;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		snprintf(buf, len, "%.17g", v->via.f64);
		return 0;
	case MSGPACK_OBJECT_STR:
		if (v->via.str.size >= len)
			return -EINVAL;
		memcpy(buf, v->via.str.ptr, v->via.str.size);
		buf[v->via.str.size] = 0;
		return 0;
	default:
		return -EINVAL;
	}
}

static void live_keys(char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < ALLM_SETTING_COUNT && o < len; i++)
		if (allm_setting_desc(i)->live)
			o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", allm_setting_desc(i)->key);
}

static int plan_set(struct ctl_server *s, const msgpack_object *args, struct set_plan *p,
		    char *err, size_t errlen)
{
	char keys[512];
	memset(p, 0, sizeof(*p));
	p->cfg = *allm_engine_get_config(s->h.eng);
	if (!args || args->via.map.size == 0)
		return allm_errtext(err, errlen, -EINVAL, "set needs at least one KEY: value in args");
	for (uint32_t i = 0; i < args->via.map.size; i++) {
		const msgpack_object *k = &args->via.map.ptr[i].key, *val = &args->via.map.ptr[i].val;
		const struct allm_setting_desc *d =
			k->type == MSGPACK_OBJECT_STR ? allm_setting_by_key(k->via.str.ptr, (int)k->via.str.size) : NULL;
		if (!d || !d->live) {
			live_keys(keys, sizeof(keys));
			return allm_errtext(err, errlen, -EINVAL, "unknown key '%.*s' (%s)",
					k->type == MSGPACK_OBJECT_STR ? (int)ALLM_MIN(k->via.str.size, 40u) : 1,
					k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?", keys);
		}
		if (p->has[d->id])
			return allm_errtext(err, errlen, -EINVAL, "%s given twice", d->key);
		p->has[d->id] = true;
		if (value_text(val, p->text[d->id], sizeof(p->text[d->id])))
			return allm_errtext(err, errlen, -EINVAL, "%s: expected a number or a word", d->key);
		if (allm_setting_parse(d, p->text[d->id], &p->val[d->id], err, errlen))
			return -EINVAL;
		int64_t n = p->val[d->id].i;
		if (d->id == ALLM_SETTING_disk_blocks && !allm_kv_disk_blocks(s->h.rt->kv))
			return allm_errtext(err, errlen, -EINVAL, "disk_blocks: no disk tier (start with --disk-swap-space)");
		if (d->live == ALLM_SET_LIVE_POOL && n > max_blocks(s))
			return allm_errtext(err, errlen, -EINVAL, "%s must be in %.0f..%lld (this machine's memory)", d->key,
					d->lo, (long long)max_blocks(s));
	}
	/* the CFG rows given, over the engine's config; then the engine's own check */
	struct allm_engine_config *c = &p->cfg;
#define PUT_I32(id, v) c->id = (int32_t)(v).i
#define PUT_F64(id, v) c->id = (v).f
#define PUT_BOOL(id, v) c->id = (v).i != 0
#define PUT_WORD(id, v) c->id = (int)(v).i
#define PUT_CFG(id, type)              \
	if (p->has[ALLM_SETTING_##id]) \
		PUT_##type(id, p->val[ALLM_SETTING_##id]);
#define PUT_POOL(id, type)
#define PUT_NO(id, type)
#define PUT_(id, key, type, opt, live, ...) PUT_##live(id, type)
	ALLM_SETTINGS_TABLE(PUT_)
#undef PUT_
	struct allm_err e = {{0}};
	if (allm_engine_config_check(c, &e))
		return allm_errtext(err, errlen, -EINVAL, "%s", e.msg);
	return 0;
}

static int resize(struct allm_engine *eng, enum allm_setting_id id, int32_t n, struct allm_err *err)
{
	return id == ALLM_SETTING_gpu_blocks ? allm_engine_set_gpu_blocks(eng, n, err)
	       : id == ALLM_SETTING_cpu_blocks ? allm_engine_set_cpu_blocks(eng, n, err)
					       : allm_engine_set_disk_blocks(eng, n, err);
}

/* All or nothing: the plan is fully validated; the only steps that can still fail
 * are the pool resizes (memory), done first and undone if a later one fails. */
int ctl_cmd_set(struct ctl_server *s, const msgpack_object *args, char *err, size_t errlen, char *log,
		size_t loglen)
{
	struct allm_engine *eng = s->h.eng;
	struct set_plan *p = allm_calloc(1, sizeof(*p));
	struct allm_setting_value old[ALLM_SETTING_COUNT];
	struct allm_err e = {{0}};
	int r;
	if (!p)
		return allm_errtext(err, errlen, -EINVAL, "out of memory");
	if ((r = plan_set(s, args, p, err, errlen)))
		goto out;
	for (int i = 0; i < ALLM_SETTING_COUNT; i++)
		current(s, allm_setting_desc(i), &old[i]);
	for (int i = 0; i < ALLM_SETTING_COUNT; i++) {
		if (!p->has[i] || allm_setting_desc(i)->live != ALLM_SET_LIVE_POOL)
			continue;
		if ((r = resize(eng, (enum allm_setting_id)i, (int32_t)p->val[i].i, &e))) {
			for (int j = 0; j < i; j++) /* shrinks back: cannot fail */
				if (p->has[j] && allm_setting_desc(j)->live == ALLM_SET_LIVE_POOL)
					resize(eng, (enum allm_setting_id)j, (int32_t)old[j].i, NULL);
			r = allm_errtext(err, errlen, -EINVAL, "%s: %s", allm_setting_desc(i)->key, e.msg);
			goto out;
		}
	}
	if ((r = allm_engine_set_config(eng, &p->cfg, &e))) { /* checked in plan_set: cannot fail */
		allm_errtext(err, errlen, r, "%s", e.msg);
		goto out;
	}

	struct allm_ctl_enc *b = &s->body;
	uint32_t n = 0;
	for (int i = 0; i < ALLM_SETTING_COUNT; i++)
		n += p->has[i];
	allm_ctl_enc_map(b, 1);
	allm_ctl_enc_karray(b, "changed", n);
	size_t lo = 0;
	log[0] = 0;
	for (int i = 0; i < ALLM_SETTING_COUNT; i++) {
		const struct allm_setting_desc *d = allm_setting_desc(i);
		if (!p->has[i])
			continue;
		allm_ctl_enc_map(b, 3);
		allm_ctl_enc_kstr(b, "key", d->key);
		allm_ctl_enc_str(b, "old");
		enc_value(b, d, &old[i], true);
		allm_ctl_enc_str(b, "new");
		enc_value(b, d, &p->val[i], true);
		if (lo < loglen)
			lo += (size_t)snprintf(log + lo, loglen - lo, " %s", d->key);
	}
out:
	allm_free(p);
	return r;
}
