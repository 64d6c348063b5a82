/* An encoded reply against its key table (ctl-enc-check.h). */
#include "ctl-enc-check.h"

#include <adaptivellm/errtext.h>

#include <string.h>

static bool str_is(const msgpack_object *o, const char *s)
{
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) && !memcmp(o->via.str.ptr, s, o->via.str.size);
}

/* The one object in [start, end) into u: 0, or -1 (none, or bytes after it: a count
 * somewhere inside that says fewer or more than were written). */
static int unpack_one(const struct allm_ctl_enc *e, size_t start, msgpack_unpacked *u, char *why, size_t len)
{
	size_t off = 0;
	msgpack_unpacked_init(u);
	if (e->err || start > e->sb.size ||
	    msgpack_unpack_next(u, e->sb.data + start, e->sb.size - start, &off) != MSGPACK_UNPACK_SUCCESS)
		return allm_errtext(why, len, -1, "not one whole object (a count says more than was written)");
	if (off != e->sb.size - start)
		return allm_errtext(why, len, -1, "%zu bytes after the object (a count says fewer than were written)",
				    e->sb.size - start - off);
	return 0;
}

int ctl_enc_check_map(const struct allm_ctl_enc *e, size_t start, const char *const *keys, uint32_t n, char *why,
		      size_t len)
{
	msgpack_unpacked u;
	int rc = unpack_one(e, start, &u, why, len);
	if (rc)
		goto out;
	rc = -1;
	const msgpack_object *o = &u.data;
	if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size != n) {
		allm_errtext(why, len, -1, "a map of %u keys expected", n);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++)
		if (!str_is(&o->via.map.ptr[i].key, keys[i])) {
			allm_errtext(why, len, -1, "key %u is not '%s'", i, keys[i]);
			goto out;
		}
	rc = 0;
out:
	msgpack_unpacked_destroy(&u);
	return rc;
}

int ctl_enc_check_named(const struct allm_ctl_enc *e, size_t start, const char *key, const char *const *names,
			uint32_t n, char *why, size_t len)
{
	msgpack_unpacked u;
	int rc = unpack_one(e, start, &u, why, len);
	if (rc)
		goto out;
	rc = -1;
	const msgpack_object *o = &u.data;
	if (o->type != MSGPACK_OBJECT_MAP || o->via.map.size != 1 || !str_is(&o->via.map.ptr[0].key, key) ||
	    o->via.map.ptr[0].val.type != MSGPACK_OBJECT_ARRAY || o->via.map.ptr[0].val.via.array.size != n) {
		allm_errtext(why, len, -1, "{%s: [%u]} expected", key, n);
		goto out;
	}
	const msgpack_object_array *a = &o->via.map.ptr[0].val.via.array;
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *m = &a->ptr[i];
		bool named = false;
		for (uint32_t k = 0; m->type == MSGPACK_OBJECT_MAP && k < m->via.map.size; k++)
			if (str_is(&m->via.map.ptr[k].key, "name"))
				named = str_is(&m->via.map.ptr[k].val, names[i]);
		if (!named) {
			allm_errtext(why, len, -1, "%s[%u] is not named '%s'", key, i, names[i]);
			goto out;
		}
	}
	rc = 0;
out:
	msgpack_unpacked_destroy(&u);
	return rc;
}
