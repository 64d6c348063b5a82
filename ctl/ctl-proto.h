/* The control plane's message layer (ctl/PROTOCOL.md, DESIGN §9), shared by the
 * engine's control server and every peer (allmctl, allmctl top, allm-bench):
 * where the sockets live, a bounded msgpack decoder, typed lookups by dotted path,
 * msgpack -> JSON, and encode helpers.
 *
 * Library code: functions return 0 / -errno (an error text goes to the caller's
 * buffer where one is taken), never print, never exit. No global state: safe from
 * any thread as long as one object is used by one thread at a time. */
#ifndef ALLM_CTL_PROTO_H
#define ALLM_CTL_PROTO_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest command message the engine reads (PROTOCOL.md). */
#define ALLM_CTL_MAX_MSG (64 * 1024)
/* Largest reply / telemetry message a peer reads: a `requests` reply of 10000
 * entries is about 2 MiB; a hostile or broken engine cannot make a peer allocate
 * more than this plus msgpack-c's per-object overhead (bounded by the count check). */
#define ALLM_CTL_MAX_REPLY (16 * 1024 * 1024)
/* Deepest nesting accepted: the root map counts as 1. */
#define ALLM_CTL_MAX_DEPTH 8
/* Longest telemetry topic. */
#define ALLM_CTL_TOPIC_MAX 31

/* --- endpoints ------------------------------------------------------------------- */

/* The runtime directory every engine socket lives in: $ALLM_RUNTIME_DIR, else
 * $XDG_RUNTIME_DIR/adaptivellm, else /tmp/adaptivellm-$UID (the daemon creates
 * it; this only names it). 0, or -ENAMETOOLONG when it does not fit cap. */
int allm_ctl_runtime_dir(char *ret, size_t cap);

/* "DIR/NAME.SUFFIX" (a file path: for unlink, stat) and "ipc://DIR/NAME.SUFFIX"
 * (for zmq_bind/zmq_connect), suffix "ctl" or "pub". runtime_dir NULL or "": the
 * default above. 0; -EINVAL for a name that is empty, longer than 64 or has a
 * '/'; -ENAMETOOLONG. ret is untouched on failure. */
int allm_ctl_path(const char *runtime_dir, const char *name, const char *suffix, char *ret,
		  size_t cap);
int allm_ctl_endpoint(const char *runtime_dir, const char *name, const char *suffix, char *ret,
		      size_t cap);

/* --- bounded decoding ------------------------------------------------------------ */

/* Walks buf without allocating and checks that it is exactly one msgpack object
 * (no trailing bytes) that msgpack-c can unpack within bounded memory: len <=
 * max_len, nesting <= ALLM_CTL_MAX_DEPTH, every str/bin/array/map length at most
 * the bytes left (an element takes at least one byte), no ext types, only string
 * keys in maps, and a map at the root. 0, or -EMSGSIZE (too long), -EBADMSG
 * (anything else) with a one-line reason in err (may be NULL). */
int allm_ctl_validate(const void *buf, size_t len, size_t max_len, char *err, size_t errlen);

/* A decoded message. root is a map (never NULL). For replies from
 * allm_ctl_call() result points at the reply's "result" map, otherwise NULL; for
 * telemetry topic holds the topic. Everything points into memory the message
 * owns: valid until allm_ctl_msg_free(). */
struct allm_ctl_msg {
	const msgpack_object *root;
	const msgpack_object *result;
	char topic[ALLM_CTL_TOPIC_MAX + 1];
	msgpack_unpacked up_; /* private: owns the objects; a copy of the bytes follows */
};

/* Validates (as above), then unpacks buf into a new message owned by the caller
 * (free with allm_ctl_msg_free). msgpack strings are not NUL-terminated: copy
 * them out with allm_ctl_get_strbuf or compare with allm_ctl_str_eq. 0, -EMSGSIZE,
 * -EBADMSG (reason in err), -ENOMEM. *ret untouched on failure. */
int allm_ctl_decode(const void *buf, size_t len, size_t max_len, struct allm_ctl_msg **ret,
		    char *err, size_t errlen);
/* Accepts NULL. */
void allm_ctl_msg_free(struct allm_ctl_msg *m);

/* --- typed lookups --------------------------------------------------------------- */
/* path is a key, or keys joined by '.' ("blocks.gpu.used"), looked up in map and
 * the maps below it. All return -ENOENT when some key on the path is missing (or
 * map is not a map) and -EINVAL when the value has another type; *ret is then
 * untouched. Pointers returned point into the message. */

/* The value at path, or NULL. */
const msgpack_object *allm_ctl_get(const msgpack_object *map, const char *path);
/* Integers; -ERANGE when the value does not fit int64_t. */
int allm_ctl_get_int(const msgpack_object *map, const char *path, int64_t *ret);
/* Integers or floats; nil gives NAN and returns 0 (PROTOCOL.md: nil = no sample). */
int allm_ctl_get_double(const msgpack_object *map, const char *path, double *ret);
int allm_ctl_get_bool(const msgpack_object *map, const char *path, bool *ret);
/* A string: pointer and length (not NUL-terminated). */
int allm_ctl_get_str(const msgpack_object *map, const char *path, const char **ret,
		     size_t *ret_len);
/* A string copied NUL-terminated into buf; -ENOSPC (buf holds a truncated copy)
 * when it does not fit; an embedded NUL gives -EINVAL. */
int allm_ctl_get_strbuf(const msgpack_object *map, const char *path, char *buf, size_t cap);
/* Maps and arrays: the object itself (type checked). */
int allm_ctl_get_map(const msgpack_object *map, const char *path, const msgpack_object **ret);
int allm_ctl_get_array(const msgpack_object *map, const char *path, const msgpack_object **ret);

/* True when o is a string equal to s. */
bool allm_ctl_str_eq(const msgpack_object *o, const char *s);

/* --- JSON ------------------------------------------------------------------------ */

/* o as JSON text (maps in wire order, nil and non-finite floats as null, bin as a
 * hex string, non-string keys printed as JSON), NUL-terminated, one line unless
 * pretty (2-space indent). The caller frees it with free(). NULL on ENOMEM. */
char *allm_ctl_to_json(const msgpack_object *o, bool pretty);

/* --- encoding -------------------------------------------------------------------- */

/* A growable msgpack buffer with a sticky error: pack freely, check err once.
 * The packer points at the struct itself: do not copy an initialised one. */
struct allm_ctl_enc {
	msgpack_sbuffer sb; /* sb.data, sb.size: the bytes so far */
	msgpack_packer pk;  /* for msgpack_pack_* calls not covered below */
	size_t max;         /* bytes it may grow to (default ALLM_CTL_MAX_REPLY) */
	int err;            /* 0, or -ENOMEM / -EMSGSIZE from the first failed write */
};

void allm_ctl_enc_init(struct allm_ctl_enc *e);
/* Frees the bytes; accepts a zeroed struct. */
void allm_ctl_enc_free(struct allm_ctl_enc *e);
/* Empties it for reuse (keeps the memory), clearing err. */
void allm_ctl_enc_reset(struct allm_ctl_enc *e);

void allm_ctl_enc_map(struct allm_ctl_enc *e, uint32_t n);
void allm_ctl_enc_array(struct allm_ctl_enc *e, uint32_t n);
/* s NULL packs nil. */
void allm_ctl_enc_str(struct allm_ctl_enc *e, const char *s);
void allm_ctl_enc_strn(struct allm_ctl_enc *e, const char *s, size_t n);
void allm_ctl_enc_int(struct allm_ctl_enc *e, int64_t v);
void allm_ctl_enc_uint(struct allm_ctl_enc *e, uint64_t v);
/* Non-finite values pack as nil. */
void allm_ctl_enc_double(struct allm_ctl_enc *e, double v);
void allm_ctl_enc_bool(struct allm_ctl_enc *e, bool v);
void allm_ctl_enc_nil(struct allm_ctl_enc *e);
/* key + value, for building maps. */
void allm_ctl_enc_kstr(struct allm_ctl_enc *e, const char *key, const char *v);
void allm_ctl_enc_kint(struct allm_ctl_enc *e, const char *key, int64_t v);
void allm_ctl_enc_kdouble(struct allm_ctl_enc *e, const char *key, double v);
void allm_ctl_enc_kbool(struct allm_ctl_enc *e, const char *key, bool v);
/* key then a map / array header of n elements: pack those next. */
void allm_ctl_enc_kmap(struct allm_ctl_enc *e, const char *key, uint32_t n);
void allm_ctl_enc_karray(struct allm_ctl_enc *e, const char *key, uint32_t n);
/* key then the msgpack bytes of an object already packed (one object). */
void allm_ctl_enc_kraw(struct allm_ctl_enc *e, const char *key, const void *raw, size_t n);

/* A request {"id", "cmd", "args"?} into e (reset first). args: NULL, or the bytes of
 * one packed map. 0 or e->err. */
int allm_ctl_enc_request(struct allm_ctl_enc *e, uint64_t id, const char *cmd, const void *args,
			 size_t args_len);

#ifdef __cplusplus
}
#endif

#endif
