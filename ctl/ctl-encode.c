/* Control-plane messages, the other direction: packing with a sticky error, and
 * decoded objects as JSON for `allmctl --json` (through jansson, which keeps the
 * insertion order of object keys). */
#include "ctl-proto.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- JSON ------------------------------------------------------------------------ */

static json_t *to_json(const msgpack_object *o);

static json_t *str_json(const char *p, size_t n)
{
	json_t *j = json_stringn(p, n);
	if (!j) {
		/* not UTF-8: keep what can be shown, one '?' per bad byte */
		char *s = malloc(n + 1);
		if (!s)
			return NULL;
		for (size_t i = 0; i < n; i++)
			s[i] = (unsigned char)p[i] < 0x80 && p[i] ? p[i] : '?';
		s[n] = 0;
		j = json_string(s);
		free(s);
	}
	return j;
}

static json_t *map_json(const msgpack_object *o)
{
	json_t *j = json_object();
	for (uint32_t i = 0; j && i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;
		char *kbuf;
		if (k->type == MSGPACK_OBJECT_STR) {
			kbuf = malloc(k->via.str.size + 1);
			if (kbuf) {
				if (k->via.str.size) /* "" may come with a NULL ptr */
					memcpy(kbuf, k->via.str.ptr, k->via.str.size);
				kbuf[k->via.str.size] = 0;
			}
		} else {
			kbuf = allm_ctl_to_json(k, false);
		}
		json_t *v = to_json(&o->via.map.ptr[i].val);
		if (!kbuf || !v || json_object_set_new(j, kbuf, v)) {
			if (!kbuf || !v)
				json_decref(v);
			free(kbuf);
			json_decref(j);
			return NULL;
		}
		free(kbuf);
	}
	return j;
}

static json_t *to_json(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: return json_null();
	case MSGPACK_OBJECT_BOOLEAN: return json_boolean(o->via.boolean);
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		return o->via.u64 <= INT64_MAX ? json_integer((json_int_t)o->via.u64)
					       : json_real((double)o->via.u64);
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer((json_int_t)o->via.i64);
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return isfinite(o->via.f64) ? json_real(o->via.f64) : json_null();
	case MSGPACK_OBJECT_STR: return str_json(o->via.str.ptr, o->via.str.size);
	case MSGPACK_OBJECT_BIN: {
		char *hex = malloc((size_t)o->via.bin.size * 2 + 1);
		if (!hex)
			return NULL;
		for (uint32_t i = 0; i < o->via.bin.size; i++)
			snprintf(hex + 2 * i, 3, "%02x", (unsigned char)o->via.bin.ptr[i]);
		hex[(size_t)o->via.bin.size * 2] = 0;
		json_t *j = json_string(hex);
		free(hex);
		return j;
	}
	case MSGPACK_OBJECT_ARRAY: {
		json_t *a = json_array();
		for (uint32_t i = 0; a && i < o->via.array.size; i++) {
			json_t *v = to_json(&o->via.array.ptr[i]);
			if (!v || json_array_append_new(a, v)) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	case MSGPACK_OBJECT_MAP: return map_json(o);
	default: return json_null(); /* ext: never passes the decoder */
	}
}

char *allm_ctl_to_json(const msgpack_object *o, bool pretty)
{
	json_t *j = to_json(o);
	if (!j)
		return NULL;
	/* JSON_ENCODE_ANY: a scalar at the root (a non-string map key) is fine too */
	char *s = json_dumps(j, JSON_ENCODE_ANY | (pretty ? JSON_INDENT(2) : JSON_COMPACT));
	json_decref(j);
	return s;
}

/* --- encoding -------------------------------------------------------------------- */

/* The packer's sink: an sbuffer that stops growing at e->max and remembers the
 * first failure, so that callers pack a whole message and check once. */
static int enc_write(void *data, const char *buf, size_t len)
{
	struct allm_ctl_enc *e = data;
	if (e->err)
		return -1;
	if (len > e->max || e->sb.size > e->max - len) {
		e->err = -EMSGSIZE;
		return -1;
	}
	if (msgpack_sbuffer_write(&e->sb, buf, len)) {
		e->err = -ENOMEM;
		return -1;
	}
	return 0;
}

void allm_ctl_enc_init(struct allm_ctl_enc *e)
{
	memset(e, 0, sizeof(*e));
	msgpack_sbuffer_init(&e->sb);
	msgpack_packer_init(&e->pk, e, enc_write);
	e->max = ALLM_CTL_MAX_REPLY;
}

void allm_ctl_enc_free(struct allm_ctl_enc *e)
{
	if (!e)
		return;
	msgpack_sbuffer_destroy(&e->sb);
	memset(&e->sb, 0, sizeof(e->sb));
}

void allm_ctl_enc_reset(struct allm_ctl_enc *e)
{
	e->sb.size = 0;
	e->err = 0;
}

void allm_ctl_enc_map(struct allm_ctl_enc *e, uint32_t n)
{
	msgpack_pack_map(&e->pk, n);
}

void allm_ctl_enc_array(struct allm_ctl_enc *e, uint32_t n)
{
	msgpack_pack_array(&e->pk, n);
}

void allm_ctl_enc_strn(struct allm_ctl_enc *e, const char *s, size_t n)
{
	if (n > UINT32_MAX) {
		e->err = e->err ? e->err : -EMSGSIZE;
		return;
	}
	msgpack_pack_str(&e->pk, n);
	msgpack_pack_str_body(&e->pk, s, n);
}

void allm_ctl_enc_str(struct allm_ctl_enc *e, const char *s)
{
	if (!s)
		msgpack_pack_nil(&e->pk);
	else
		allm_ctl_enc_strn(e, s, strlen(s));
}

void allm_ctl_enc_int(struct allm_ctl_enc *e, int64_t v)
{
	msgpack_pack_int64(&e->pk, v);
}

void allm_ctl_enc_uint(struct allm_ctl_enc *e, uint64_t v)
{
	msgpack_pack_uint64(&e->pk, v);
}

void allm_ctl_enc_double(struct allm_ctl_enc *e, double v)
{
	if (isfinite(v))
		msgpack_pack_double(&e->pk, v);
	else
		msgpack_pack_nil(&e->pk);
}

void allm_ctl_enc_bool(struct allm_ctl_enc *e, bool v)
{
	if (v)
		msgpack_pack_true(&e->pk);
	else
		msgpack_pack_false(&e->pk);
}

void allm_ctl_enc_nil(struct allm_ctl_enc *e)
{
	msgpack_pack_nil(&e->pk);
}

void allm_ctl_enc_kstr(struct allm_ctl_enc *e, const char *key, const char *v)
{
	allm_ctl_enc_str(e, key);
	allm_ctl_enc_str(e, v);
}

void allm_ctl_enc_kint(struct allm_ctl_enc *e, const char *key, int64_t v)
{
	allm_ctl_enc_str(e, key);
	allm_ctl_enc_int(e, v);
}

void allm_ctl_enc_kdouble(struct allm_ctl_enc *e, const char *key, double v)
{
	allm_ctl_enc_str(e, key);
	allm_ctl_enc_double(e, v);
}

void allm_ctl_enc_kbool(struct allm_ctl_enc *e, const char *key, bool v)
{
	allm_ctl_enc_str(e, key);
	allm_ctl_enc_bool(e, v);
}

void allm_ctl_enc_kmap(struct allm_ctl_enc *e, const char *key, uint32_t n)
{
	allm_ctl_enc_str(e, key);
	allm_ctl_enc_map(e, n);
}

void allm_ctl_enc_karray(struct allm_ctl_enc *e, const char *key, uint32_t n)
{
	allm_ctl_enc_str(e, key);
	allm_ctl_enc_array(e, n);
}

void allm_ctl_enc_kraw(struct allm_ctl_enc *e, const char *key, const void *raw, size_t n)
{
	allm_ctl_enc_str(e, key);
	enc_write(e, raw, n);
}

int allm_ctl_enc_request(struct allm_ctl_enc *e, uint64_t id, const char *cmd, const void *args,
			 size_t args_len)
{
	allm_ctl_enc_reset(e);
	allm_ctl_enc_map(e, args ? 3 : 2);
	allm_ctl_enc_str(e, "id");
	allm_ctl_enc_uint(e, id);
	allm_ctl_enc_kstr(e, "cmd", cmd);
	if (args)
		allm_ctl_enc_kraw(e, "args", args, args_len);
	return e->err;
}
