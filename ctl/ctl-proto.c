/* Control-plane messages: endpoint names, the bounded decoder and typed lookups.
 * JSON output and encoding are in ctl-encode.c. */
#include "ctl-proto.h"

#include "shm-trust.h"

#include <adaptivellm/errtext.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- endpoints ------------------------------------------------------------------- */

int allm_ctl_runtime_dir(char *ret, size_t cap)
{
	return allm_shm_runtime_dir(ret, cap);
}

static int make_path(const char *dir, const char *name, const char *suffix, const char *scheme,
		     char *ret, size_t cap)
{
	char def[4096];
	if (!name || !*name || strlen(name) > 64 || strchr(name, '/') || !suffix)
		return -EINVAL;
	if (!dir || !*dir) {
		int r = allm_ctl_runtime_dir(def, sizeof(def));
		if (r)
			return r;
		dir = def;
	}
	int n = snprintf(NULL, 0, "%s%s/%s.%s", scheme, dir, name, suffix);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	snprintf(ret, cap, "%s%s/%s.%s", scheme, dir, name, suffix);
	return 0;
}

int allm_ctl_path(const char *runtime_dir, const char *name, const char *suffix, char *ret,
		  size_t cap)
{
	return make_path(runtime_dir, name, suffix, "", ret, cap);
}

int allm_ctl_endpoint(const char *runtime_dir, const char *name, const char *suffix, char *ret,
		      size_t cap)
{
	return make_path(runtime_dir, name, suffix, "ipc://", ret, cap);
}

/* --- the bounded walk ------------------------------------------------------------ */

static uint64_t be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* One open container: elements still to come (a map counts keys and values). */
struct frame {
	uint64_t left;
	bool map;
};

/* Reads the header at p[0..avail): the bytes the header and any payload take
 * (*skip), and for containers the element count (*count, maps: pairs) and kind.
 * Payload lengths are checked against avail here, so nothing later trusts them. */
static int header(const uint8_t *p, size_t avail, size_t *skip, uint64_t *count, int *kind,
		  bool *is_str, char *err, size_t errlen)
{
	uint8_t b = p[0];
	size_t hl = 1; /* header bytes */
	uint64_t payload = 0;
	*kind = 0; /* 0 scalar, 1 array, 2 map */
	*count = 0;
	*is_str = false;
	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
		/* fixint, nil, bool */
	} else if (b >= 0x80 && b <= 0x8f) {
		*kind = 2;
		*count = b & 0x0f;
	} else if (b >= 0x90 && b <= 0x9f) {
		*kind = 1;
		*count = b & 0x0f;
	} else if (b >= 0xa0 && b <= 0xbf) {
		*is_str = true;
		payload = b & 0x1f;
	} else {
		int lenbytes = 0; /* bytes of a length field */
		switch (b) {
		case 0xcc: case 0xd0: payload = 1; break;
		case 0xcd: case 0xd1: payload = 2; break;
		case 0xca: case 0xce: case 0xd2: payload = 4; break;
		case 0xcb: case 0xcf: case 0xd3: payload = 8; break;
		case 0xd9: *is_str = true; /* fall through */
		case 0xc4: lenbytes = 1; break;
		case 0xda: *is_str = true; /* fall through */
		case 0xc5: lenbytes = 2; break;
		case 0xdb: *is_str = true; /* fall through */
		case 0xc6: lenbytes = 4; break;
		case 0xdc: *kind = 1; lenbytes = 2; break;
		case 0xdd: *kind = 1; lenbytes = 4; break;
		case 0xde: *kind = 2; lenbytes = 2; break;
		case 0xdf: *kind = 2; lenbytes = 4; break;
		case 0xc1:
			return allm_errtext(err, errlen, -EBADMSG, "invalid msgpack byte 0xc1");
		default: /* 0xc7-0xc9, 0xd4-0xd8: ext */
			return allm_errtext(err, errlen, -EBADMSG, "msgpack ext types are not accepted");
		}
		if (lenbytes) {
			if (avail < 1 + (size_t)lenbytes)
				return allm_errtext(err, errlen, -EBADMSG, "truncated length field");
			uint64_t n = be(p + 1, lenbytes);
			hl += (size_t)lenbytes;
			if (*kind)
				*count = n;
			else
				payload = n;
		}
	}
	if (payload > avail - hl)
		return allm_errtext(err, errlen, -EBADMSG,
			    "a %s declares %llu bytes but only %zu follow", *is_str ? "string" : "value",
			    (unsigned long long)payload, avail - hl);
	/* every element takes at least one byte: a count above the bytes left is a
	 * lie that would make msgpack-c allocate count objects up front */
	uint64_t elems = *kind == 2 ? *count * 2 : *count;
	if (*kind && (*count > UINT32_MAX || elems > avail - hl))
		return allm_errtext(err, errlen, -EBADMSG,
			    "a%s declares %llu elements but only %zu bytes follow",
			    *kind == 2 ? " map" : "n array", (unsigned long long)*count, avail - hl);
	*skip = hl + (size_t)payload;
	return 0;
}

int allm_ctl_validate(const void *buf, size_t len, size_t max_len, char *err, size_t errlen)
{
	const uint8_t *p = buf;
	struct frame st[ALLM_CTL_MAX_DEPTH];
	int depth = 0;
	size_t off = 0;
	if (len > max_len)
		return allm_errtext(err, errlen, -EMSGSIZE, "message of %zu bytes exceeds the limit of %zu",
			    len, max_len);
	if (!buf || len == 0)
		return allm_errtext(err, errlen, -EBADMSG, "empty message");
	if (p[0] != 0xde && p[0] != 0xdf && (p[0] < 0x80 || p[0] > 0x8f))
		return allm_errtext(err, errlen, -EBADMSG, "the message is not a msgpack map");
	do {
		if (off >= len)
			return allm_errtext(err, errlen, -EBADMSG, "truncated message");
		bool key = depth > 0 && st[depth - 1].map && st[depth - 1].left % 2 == 0;
		size_t skip = 0;
		uint64_t count;
		int kind;
		bool is_str;
		int r = header(p + off, len - off, &skip, &count, &kind, &is_str, err, errlen);
		if (r)
			return r;
		if (key && !is_str)
			return allm_errtext(err, errlen, -EBADMSG, "a map key is not a string");
		off += skip;
		if (depth > 0)
			st[depth - 1].left--;
		if (kind && count > 0) {
			if (depth == ALLM_CTL_MAX_DEPTH)
				return allm_errtext(err, errlen, -EBADMSG, "nested deeper than %d levels",
					    ALLM_CTL_MAX_DEPTH);
			st[depth].left = kind == 2 ? count * 2 : count;
			st[depth].map = kind == 2;
			depth++;
		} else if (kind && depth == ALLM_CTL_MAX_DEPTH) {
			/* an empty container still opens a level */
			return allm_errtext(err, errlen, -EBADMSG, "nested deeper than %d levels",
				    ALLM_CTL_MAX_DEPTH);
		}
		while (depth > 0 && st[depth - 1].left == 0)
			depth--;
	} while (depth > 0);
	if (off != len)
		return allm_errtext(err, errlen, -EBADMSG, "%zu bytes after the message", len - off);
	return 0;
}

int allm_ctl_decode(const void *buf, size_t len, size_t max_len, struct allm_ctl_msg **ret,
		    char *err, size_t errlen)
{
	int r = allm_ctl_validate(buf, len, max_len, err, errlen);
	if (r)
		return r;
	/* msgpack-c's objects point into the bytes they came from (strings are not
	 * copied): the message keeps its own copy, right behind the struct */
	struct allm_ctl_msg *m = calloc(1, sizeof(*m) + len);
	if (!m)
		return allm_errtext(err, errlen, -ENOMEM, "out of memory");
	char *copy = (char *)(m + 1);
	memcpy(copy, buf, len);
	msgpack_unpacked_init(&m->up_);
	size_t off = 0;
	msgpack_unpack_return ur = msgpack_unpack_next(&m->up_, copy, len, &off);
	if (ur != MSGPACK_UNPACK_SUCCESS || off != len || m->up_.data.type != MSGPACK_OBJECT_MAP) {
		allm_ctl_msg_free(m);
		return ur == MSGPACK_UNPACK_NOMEM_ERROR ? allm_errtext(err, errlen, -ENOMEM, "out of memory")
							: allm_errtext(err, errlen, -EBADMSG, "msgpack-c cannot unpack it");
	}
	m->root = &m->up_.data;
	*ret = m;
	return 0;
}

void allm_ctl_msg_free(struct allm_ctl_msg *m)
{
	if (!m)
		return;
	msgpack_unpacked_destroy(&m->up_);
	free(m);
}

/* --- lookups --------------------------------------------------------------------- */

static const msgpack_object *find_key(const msgpack_object *map, const char *k, size_t klen)
{
	if (!map || map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *key = &map->via.map.ptr[i].key;
		/* an empty string may come with a NULL ptr: no memcmp(NULL, ..., 0) */
		if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == klen &&
		    (klen == 0 || !memcmp(key->via.str.ptr, k, klen)))
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

const msgpack_object *allm_ctl_get(const msgpack_object *map, const char *path)
{
	const msgpack_object *o = map;
	if (!path)
		return NULL;
	for (;;) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		o = find_key(o, path, n);
		if (!o || !dot)
			return o;
		path = dot + 1;
	}
}

int allm_ctl_get_int(const msgpack_object *map, const char *path, int64_t *ret)
{
	const msgpack_object *o = allm_ctl_get(map, path);
	if (!o)
		return -ENOENT;
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*ret = o->via.i64;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -EINVAL;
	if (o->via.u64 > INT64_MAX)
		return -ERANGE;
	*ret = (int64_t)o->via.u64;
	return 0;
}

int allm_ctl_get_double(const msgpack_object *map, const char *path, double *ret)
{
	const msgpack_object *o = allm_ctl_get(map, path);
	if (!o)
		return -ENOENT;
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: *ret = NAN; return 0;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: *ret = o->via.f64; return 0;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: *ret = (double)o->via.u64; return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: *ret = (double)o->via.i64; return 0;
	default: return -EINVAL;
	}
}

int allm_ctl_get_bool(const msgpack_object *map, const char *path, bool *ret)
{
	const msgpack_object *o = allm_ctl_get(map, path);
	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return -EINVAL;
	*ret = o->via.boolean;
	return 0;
}

int allm_ctl_get_str(const msgpack_object *map, const char *path, const char **ret,
		     size_t *ret_len)
{
	const msgpack_object *o = allm_ctl_get(map, path);
	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_STR)
		return -EINVAL;
	*ret = o->via.str.ptr;
	*ret_len = o->via.str.size;
	return 0;
}

int allm_ctl_get_strbuf(const msgpack_object *map, const char *path, char *buf, size_t cap)
{
	const char *s;
	size_t n;
	int r = allm_ctl_get_str(map, path, &s, &n);
	if (r)
		return r;
	if (n && memchr(s, 0, n))
		return -EINVAL;
	if (cap == 0)
		return -ENOSPC;
	size_t k = n < cap ? n : cap - 1;
	if (k)
		memcpy(buf, s, k);
	buf[k] = 0;
	return k == n ? 0 : -ENOSPC;
}

static int get_typed(const msgpack_object *map, const char *path, msgpack_object_type t,
		     const msgpack_object **ret)
{
	const msgpack_object *o = allm_ctl_get(map, path);
	if (!o)
		return -ENOENT;
	if (o->type != t)
		return -EINVAL;
	*ret = o;
	return 0;
}

int allm_ctl_get_map(const msgpack_object *map, const char *path, const msgpack_object **ret)
{
	return get_typed(map, path, MSGPACK_OBJECT_MAP, ret);
}

int allm_ctl_get_array(const msgpack_object *map, const char *path, const msgpack_object **ret)
{
	return get_typed(map, path, MSGPACK_OBJECT_ARRAY, ret);
}

bool allm_ctl_str_eq(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       (n == 0 || !memcmp(o->via.str.ptr, s, n));
}
