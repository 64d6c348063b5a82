/* An encoded reply against its key table (ctl-enc-check.h). */
#include "ctl-enc-check.h"

#include <adaptivellm/errtext.h>

#include <string.h>

static bool str_is(const msgpack_object *o, const char *s)
{
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) && !memcmp(o->via.str.ptr, s, o->via.str.size);
}

/* The one object from start to the end of the reply, handed to check (0, or -1 with
 * why said): -1 where there is none, or bytes after it (a count somewhere inside
 * that says fewer or more than were written). */
static int check_one(const struct allm_ctl_enc *e, size_t start,
		     int (*check)(const msgpack_object *o, const void *arg, char *why, size_t len),
		     const void *arg, char *why, size_t len)
{
	size_t off = 0;
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	int rc;
	if (e->err || start > e->sb.size ||
	    msgpack_unpack_next(&u, e->sb.data + start, e->sb.size - start, &off) != MSGPACK_UNPACK_SUCCESS)
		rc = allm_errtext(why, len, -1, "not one whole object (a count says more than was written)");
	else if (off != e->sb.size - start)
		rc = allm_errtext(why, len, -1, "%zu bytes after the object (a count says fewer than were written)",
				  e->sb.size - start - off);
	else
		rc = check(&u.data, arg, why, len);
	msgpack_unpacked_destroy(&u);
	return rc;
}

struct map_want {
	const char *const *keys;
	uint32_t n;
};

static int check_map(const msgpack_object *o, const void *arg, char *why, size_t len)
{
	const struct map_want *w = arg;
	if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size != w->n)
		return allm_errtext(why, len, -1, "a map of %u keys expected", w->n);
	for (uint32_t i = 0; i < w->n; i++)
		if (!str_is(&o->via.map.ptr[i].key, w->keys[i]))
			return allm_errtext(why, len, -1, "key %u is not '%s'", i, w->keys[i]);
	return 0;
}

int ctl_enc_check_map(const struct allm_ctl_enc *e, size_t start, const char *const *keys, uint32_t n, char *why,
		      size_t len)
{
	const struct map_want w = { keys, n };
	return check_one(e, start, check_map, &w, why, len);
}

struct named_want {
	const char *key;
	const char *const *names;
	uint32_t n;
};

static int check_named(const msgpack_object *o, const void *arg, char *why, size_t len)
{
	const struct named_want *w = arg;
	if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size != 1 || !str_is(&o->via.map.ptr[0].key, w->key) ||
	    o->via.map.ptr[0].val.type != MSGPACK_OBJECT_ARRAY || o->via.map.ptr[0].val.via.array.size != w->n)
		return allm_errtext(why, len, -1, "{%s: [%u]} expected", w->key, w->n);
	const msgpack_object_array *a = &o->via.map.ptr[0].val.via.array;
	for (uint32_t i = 0; i < w->n; i++) {
		const msgpack_object *m = &a->ptr[i];
		bool named = false;
		for (uint32_t k = 0; m->type == MSGPACK_OBJECT_MAP && k < m->via.map.size; k++)
			if (str_is(&m->via.map.ptr[k].key, "name"))
				named = str_is(&m->via.map.ptr[k].val, w->names[i]);
		if (!named)
			return allm_errtext(why, len, -1, "%s[%u] is not named '%s'", w->key, i, w->names[i]);
	}
	return 0;
}

int ctl_enc_check_named(const struct allm_ctl_enc *e, size_t start, const char *key, const char *const *names,
			uint32_t n, char *why, size_t len)
{
	const struct named_want w = { key, names, n };
	return check_one(e, start, check_named, &w, why, len);
}
