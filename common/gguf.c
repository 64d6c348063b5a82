/* GGUF header, metadata and tensor table (see gguf.h). The parse runs twice over
 * nothing: one pass reads and checks every field through a bounded cursor, so a count
 * or a length that points past the end of the file stops it before anything is
 * allocated for it. */
#include "gguf.h"
#include "gguf-blocks.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"

/* The geometry of every type: its name, values per block and bytes per block, the
 * bytes from gguf-blocks.h's structs (the element types: their scalar's size). */
#define BLK(name, t, block) {name, block, sizeof(struct allm_block_##t)}
static const struct {
	const char *name;
	uint32_t block, bytes; /* 0: not a type ggml assigns */
} ttypes[ALLM_GGML_TTYPE_COUNT] = {
	[0] = {"F32", 1, 4},
	[1] = {"F16", 1, 2},
	[2] = BLK("Q4_0", q4_0, ALLM_QK),
	[3] = BLK("Q4_1", q4_1, ALLM_QK),
	[6] = BLK("Q5_0", q5_0, ALLM_QK),
	[7] = BLK("Q5_1", q5_1, ALLM_QK),
	[8] = BLK("Q8_0", q8_0, ALLM_QK),
	[9] = BLK("Q8_1", q8_1, ALLM_QK),
	[10] = BLK("Q2_K", q2_K, ALLM_QK_K),
	[11] = BLK("Q3_K", q3_K, ALLM_QK_K),
	[12] = BLK("Q4_K", q4_K, ALLM_QK_K),
	[13] = BLK("Q5_K", q5_K, ALLM_QK_K),
	[14] = BLK("Q6_K", q6_K, ALLM_QK_K),
	[15] = BLK("Q8_K", q8_K, ALLM_QK_K),
	[16] = BLK("IQ2_XXS", iq2_xxs, ALLM_QK_K),
	[17] = BLK("IQ2_XS", iq2_xs, ALLM_QK_K),
	[18] = BLK("IQ3_XXS", iq3_xxs, ALLM_QK_K),
	[19] = BLK("IQ1_S", iq1_s, ALLM_QK_K),
	[20] = BLK("IQ4_NL", iq4_nl, ALLM_QK),
	[21] = BLK("IQ3_S", iq3_s, ALLM_QK_K),
	[22] = BLK("IQ2_S", iq2_s, ALLM_QK_K),
	[23] = BLK("IQ4_XS", iq4_xs, ALLM_QK_K),
	[24] = {"I8", 1, 1},
	[25] = {"I16", 1, 2},
	[26] = {"I32", 1, 4},
	[27] = {"I64", 1, 8},
	[28] = {"F64", 1, 8},
	[29] = BLK("IQ1_M", iq1_m, ALLM_QK_K),
	[30] = {"BF16", 1, 2},
	[34] = BLK("TQ1_0", tq1_0, ALLM_QK_K),
	[35] = BLK("TQ2_0", tq2_0, ALLM_QK_K),
	[39] = BLK("MXFP4", mxfp4, ALLM_QK),
	[40] = BLK("NVFP4", nvfp4, 64),
	[41] = BLK("Q1_0", q1_0, 128),
};
#undef BLK

/* Bytes of one scalar of each value type (0: not a fixed-size scalar). */
static const uint8_t vsize[ALLM_GGUF_VTYPE_COUNT] = {
	[ALLM_GGUF_U8] = 1,  [ALLM_GGUF_I8] = 1,  [ALLM_GGUF_U16] = 2, [ALLM_GGUF_I16] = 2,
	[ALLM_GGUF_U32] = 4, [ALLM_GGUF_I32] = 4, [ALLM_GGUF_F32] = 4, [ALLM_GGUF_BOOL] = 1,
	[ALLM_GGUF_U64] = 8, [ALLM_GGUF_I64] = 8, [ALLM_GGUF_F64] = 8,
};

static const char *const vnames[ALLM_GGUF_VTYPE_COUNT] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

bool allm_gguf_ttype_info(uint32_t type, uint32_t *ret_block, uint32_t *ret_bytes)
{
	if (type >= ALLM_GGML_TTYPE_COUNT || !ttypes[type].block)
		return false;
	*ret_block = ttypes[type].block;
	*ret_bytes = ttypes[type].bytes;
	return true;
}

const char *allm_gguf_ttype_name(uint32_t type)
{
	return type < ALLM_GGML_TTYPE_COUNT && ttypes[type].name ? ttypes[type].name : "?";
}

const char *allm_gguf_vtype_name(uint32_t type)
{
	return type < ALLM_GGUF_VTYPE_COUNT ? vnames[type] : "?";
}

int64_t allm_gguf_tensor_elems(const struct allm_gguf_tensor *t)
{
	int64_t n = 1;
	for (uint32_t d = 0; d < t->n_dims; d++)
		n *= t->ne[d]; /* checked at open: cannot overflow */
	return n;
}

/* --- the bounded cursor --------------------------------------------------- */

struct cur {
	const uint8_t *p;
	size_t size, pos;
	const char *path;
	struct allm_err *err;
};

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Takes n bytes; -EINVAL "truncated" naming what was being read. */
static int take(struct cur *c, uint64_t n, const uint8_t **ret, const char *what)
{
	if (n > c->size - c->pos)
		return allm_err_set(c->err, -EINVAL,
				    "%s: GGUF: truncated file: %s needs %llu bytes at offset %zu but the "
				    "file has %zu",
				    c->path, what, (unsigned long long)n, c->pos, c->size);
	*ret = c->p + c->pos;
	c->pos += n;
	return 0;
}

static int rd(struct cur *c, int n, uint64_t *ret, const char *what)
{
	const uint8_t *p = NULL;
	int r = take(c, (uint64_t)n, &p, what);
	if (!r)
		*ret = le(p, n);
	return r;
}

/* A GGUF string: u64 length, then the bytes. */
static int rd_str(struct cur *c, const char **ret, uint64_t *ret_len, uint64_t max,
		  const char *what)
{
	uint64_t n;
	const uint8_t *p = NULL;
	int r = rd(c, 8, &n, what);
	if (r)
		return r;
	if (n > max)
		return allm_err_set(c->err, -EINVAL, "%s: GGUF: %s at offset %zu is %llu bytes long (at most %llu)",
				    c->path, what, c->pos - 8, (unsigned long long)n,
				    (unsigned long long)max);
	if ((r = take(c, n, &p, what)))
		return r;
	*ret = (const char *)p;
	*ret_len = n;
	return 0;
}

/* --- opening --------------------------------------------------------------- */

void allm_gguf_close(struct allm_gguf *g)
{
	if (!g)
		return;
	if (g->mapped && g->base)
		munmap((void *)g->base, g->size);
	for (size_t i = 0; i < g->n_kv; i++) {
		allm_free((char *)g->kv[i].key);
		if (g->kv[i].type == ALLM_GGUF_ARRAY)
			allm_free((uint64_t *)g->kv[i].v.arr.str_off);
	}
	for (size_t i = 0; i < g->n_tensors; i++)
		allm_free((char *)g->tensors[i].name);
	allm_free(g->path);
	allm_free(g->kv);
	allm_free(g->tensors);
	allm_free(g->by_name);
	allm_free(g);
}

/* A NUL-terminated copy of a name; no NUL inside (a C string must say the whole
 * name). Names are short (ALLM_GGUF_MAX_NAME) and few: one allocation each. */
static int put_name(struct cur *c, const char *s, uint64_t n, const char **ret, const char *what)
{
	char *p;
	if (n == 0)
		return allm_err_set(c->err, -EINVAL, "%s: GGUF: %s is empty", c->path, what);
	if (memchr(s, 0, n))
		return allm_err_set(c->err, -EINVAL, "%s: GGUF: %s '%.*s' holds a NUL byte", c->path, what,
				    (int)strnlen(s, n), s);
	if (!(p = allm_malloc(n + 1)))
		return allm_err_set(c->err, -ENOMEM, "%s: GGUF: out of memory", c->path);
	memcpy(p, s, n);
	p[n] = 0;
	*ret = p;
	return 0;
}

/* Room for one more element in a growing array (doubling): the arrays grow with what
 * the file really holds, never with a count it claims. */
static int grow(struct cur *c, void **v, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? 2 * *cap : 64;
	void *p = allm_realloc(*v, nc * elem);
	if (!p)
		return allm_err_set(c->err, -ENOMEM, "%s: GGUF: out of memory for the header", c->path);
	memset((char *)p + *cap * elem, 0, (nc - *cap) * elem);
	*v = p;
	*cap = nc;
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp((*(struct allm_gguf_kv *const *)a)->key, (*(struct allm_gguf_kv *const *)b)->key);
}

static int cmp_tensor_name(const void *a, const void *b)
{
	return strcmp((*(struct allm_gguf_tensor *const *)a)->name,
		      (*(struct allm_gguf_tensor *const *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
	const struct allm_gguf_tensor *x = *(struct allm_gguf_tensor *const *)a;
	const struct allm_gguf_tensor *y = *(struct allm_gguf_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* One value of type t. A string array records each element's offset. */
static int rd_value(struct cur *c, struct allm_gguf_kv *kv, uint32_t t)
{
	uint64_t u;
	int r;
	if (t >= ALLM_GGUF_VTYPE_COUNT)
		return allm_err_set(c->err, -EINVAL, "%s: GGUF: key '%s' has unknown value type %u",
				    c->path, kv->key, t);
	kv->type = (enum allm_gguf_vtype)t;
	if (t == ALLM_GGUF_STRING)
		return rd_str(c, &kv->v.str.ptr, &kv->v.str.len, ALLM_GGUF_MAX_STRING, "a string value");
	if (t != ALLM_GGUF_ARRAY) {
		if ((r = rd(c, vsize[t], &u, "a value")))
			return r;
		switch (t) {
		case ALLM_GGUF_I8: kv->v.i = (int8_t)u; break;
		case ALLM_GGUF_I16: kv->v.i = (int16_t)u; break;
		case ALLM_GGUF_I32: kv->v.i = (int32_t)u; break;
		case ALLM_GGUF_I64: kv->v.i = (int64_t)u; break;
		case ALLM_GGUF_F32: {
			float f;
			uint32_t w = (uint32_t)u;
			memcpy(&f, &w, 4);
			kv->v.f = f;
			break;
		}
		case ALLM_GGUF_F64: memcpy(&kv->v.f, &u, 8); break;
		case ALLM_GGUF_BOOL:
			if (u > 1)
				return allm_err_set(c->err, -EINVAL, "%s: GGUF: key '%s' is a bool of value %llu (0 or 1)",
						    c->path, kv->key, (unsigned long long)u);
			/* fall through */
		default: kv->v.u = u; break;
		}
		return 0;
	}
	uint64_t et, n;
	if ((r = rd(c, 4, &et, "an array's type")) || (r = rd(c, 8, &n, "an array's length")))
		return r;
	if (et >= ALLM_GGUF_VTYPE_COUNT || et == ALLM_GGUF_ARRAY)
		return allm_err_set(c->err, -EINVAL, "%s: GGUF: key '%s' is an array of %s type %llu",
				    c->path, kv->key, et == ALLM_GGUF_ARRAY ? "arrays (nested):" : "unknown",
				    (unsigned long long)et);
	kv->v.arr.type = (enum allm_gguf_vtype)et;
	kv->v.arr.n = n;
	kv->v.arr.data = c->p + c->pos;
	if (et != ALLM_GGUF_STRING) {
		const uint8_t *p = NULL;
		if (n > (c->size - c->pos) / vsize[et])
			return allm_err_set(c->err, -EINVAL,
					    "%s: GGUF: truncated file: key '%s' is an array of %llu %s, "
					    "past the end of the file",
					    c->path, kv->key, (unsigned long long)n, vnames[et]);
		if ((r = take(c, n * vsize[et], &p, "an array")))
			return r;
		if (et == ALLM_GGUF_BOOL)
			for (uint64_t i = 0; i < n; i++)
				if (p[i] > 1)
					return allm_err_set(c->err, -EINVAL,
							    "%s: GGUF: key '%s'[%llu] is a bool of value %u (0 or 1)",
							    c->path, kv->key, (unsigned long long)i, p[i]);
		return 0;
	}
	/* each string takes at least its 8-byte length: a count the rest of the
	 * file cannot hold is refused before the offsets are */
	if (n > (c->size - c->pos) / 8)
		return allm_err_set(c->err, -EINVAL,
				    "%s: GGUF: truncated file: key '%s' is an array of %llu strings, "
				    "past the end of the file",
				    c->path, kv->key, (unsigned long long)n);
	uint64_t *offs = allm_malloc((size_t)(n ? n : 1) * sizeof(*offs));
	if (!offs)
		return allm_err_set(c->err, -ENOMEM, "%s: GGUF: out of memory", c->path);
	kv->v.arr.str_off = offs;
	for (uint64_t i = 0; i < n; i++) {
		const char *s;
		uint64_t len;
		offs[i] = (uint64_t)(c->p + c->pos - kv->v.arr.data);
		if ((r = rd_str(c, &s, &len, ALLM_GGUF_MAX_STRING, "a string in an array")))
			return r;
	}
	return 0;
}

static int parse_kvs(struct allm_gguf *g, struct cur *c, uint64_t n_kv)
{
	size_t cap = 0;
	struct allm_gguf_kv **sorted = NULL;
	int r = 0;
	for (uint64_t i = 0; i < n_kv; i++) {
		const char *k;
		uint64_t kl, t;
		char what[48];
		if ((r = grow(c, (void **)&g->kv, &cap, g->n_kv, sizeof(*g->kv))))
			return r;
		struct allm_gguf_kv *kv = &g->kv[i];
		snprintf(what, sizeof(what), "key %llu", (unsigned long long)i);
		if ((r = rd_str(c, &k, &kl, ALLM_GGUF_MAX_NAME, what)) ||
		    (r = put_name(c, k, kl, &kv->key, what)))
			return r;
		g->n_kv = i + 1; /* from here close() frees what the entry holds */
		if ((r = rd(c, 4, &t, "a value type")) || (r = rd_value(c, kv, (uint32_t)t)))
			return r;
	}
	/* duplicates: sorted neighbours (a pairwise scan would be quadratic in a
	 * count the file chooses) */
	if (g->n_kv > 1 && !(sorted = allm_malloc(g->n_kv * sizeof(*sorted))))
		return allm_err_set(c->err, -ENOMEM, "%s: GGUF: out of memory", c->path);
	for (size_t i = 0; sorted && i < g->n_kv; i++)
		sorted[i] = &g->kv[i];
	if (sorted)
		qsort(sorted, g->n_kv, sizeof(*sorted), cmp_key);
	for (size_t i = 1; sorted && i < g->n_kv && !r; i++)
		if (!strcmp(sorted[i - 1]->key, sorted[i]->key))
			r = allm_err_set(c->err, -EINVAL, "%s: GGUF: key '%s' appears twice", c->path,
					 sorted[i]->key);
	allm_free(sorted);
	return r;
}

static int parse_tensor(struct allm_gguf *g, struct cur *c, struct allm_gguf_tensor *t,
			uint64_t idx)
{
	const char *s;
	uint64_t n, nd, type, off;
	char what[48];
	int r;
	snprintf(what, sizeof(what), "tensor %llu's name", (unsigned long long)idx);
	if ((r = rd_str(c, &s, &n, ALLM_GGUF_MAX_NAME, what)) ||
	    (r = put_name(c, s, n, &t->name, what)))
		return r;
	g->n_tensors = idx + 1; /* from here close() frees the name */
	if ((r = rd(c, 4, &nd, "a tensor's dimension count")))
		return r;
	if (nd < 1 || nd > ALLM_GGUF_MAX_DIMS)
		return allm_err_set(c->err, -EINVAL, "%s: GGUF: tensor '%s' has %llu dimensions (1 to %d)",
				    c->path, t->name, (unsigned long long)nd, ALLM_GGUF_MAX_DIMS);
	t->n_dims = (uint32_t)nd;
	int64_t elems = 1;
	for (int d = 0; d < ALLM_GGUF_MAX_DIMS; d++) {
		uint64_t ne = 1;
		if (d < (int)nd && (r = rd(c, 8, &ne, "a tensor's dimension")))
			return r;
		if (ne < 1 || ne > (uint64_t)INT64_MAX / (uint64_t)elems)
			return allm_err_set(c->err, -EINVAL,
					    "%s: GGUF: tensor '%s' dimension %d is %llu: %s", c->path, t->name,
					    d, (unsigned long long)ne,
					    ne < 1 ? "empty" : "the element count overflows");
		t->ne[d] = (int64_t)ne;
		elems *= (int64_t)ne;
	}
	uint32_t block, bytes;
	if ((r = rd(c, 4, &type, "a tensor's type")) || (r = rd(c, 8, &off, "a tensor's offset")))
		return r;
	if (!allm_gguf_ttype_info((uint32_t)type, &block, &bytes) || type > UINT32_MAX)
		return allm_err_set(c->err, -EINVAL, "%s: GGUF: tensor '%s' has unknown type %llu",
				    c->path, t->name, (unsigned long long)type);
	t->type = (enum allm_gguf_ttype)type;
	if (t->ne[0] % block)
		return allm_err_set(c->err, -EINVAL,
				    "%s: GGUF: tensor '%s' of type %s has rows of %lld values, not a whole "
				    "number of %u-value blocks",
				    c->path, t->name, ttypes[type].name, (long long)t->ne[0], block);
	/* elems / block * bytes: elems < 2^63, bytes <= 292 -- check before multiplying */
	uint64_t blocks = (uint64_t)elems / block;
	if (blocks > UINT64_MAX / bytes || blocks * bytes > g->size)
		return allm_err_set(c->err, -EINVAL,
				    "%s: GGUF: truncated or corrupt file: tensor '%s' (%lld values of %s) is "
				    "larger than the file",
				    c->path, t->name, (long long)elems, ttypes[type].name);
	t->nbytes = blocks * bytes;
	if (off % g->alignment)
		return allm_err_set(c->err, -EINVAL,
				    "%s: GGUF: tensor '%s' offset %llu is not a multiple of the "
				    "alignment %llu",
				    c->path, t->name, (unsigned long long)off,
				    (unsigned long long)g->alignment);
	t->offset = off; /* relative until the data section is placed */
	return 0;
}

static int place_tensors(struct allm_gguf *g, struct cur *c)
{
	uint64_t data_len = g->size > g->data_offset ? g->size - g->data_offset : 0;
	struct allm_gguf_tensor **by_off = g->by_name; /* sorted by offset first, reused */
	for (size_t i = 0; i < g->n_tensors; i++) {
		struct allm_gguf_tensor *t = &g->tensors[i];
		if (t->offset > data_len || t->nbytes > data_len - t->offset)
			return allm_err_set(c->err, -EINVAL,
					    "%s: GGUF: truncated file: tensor '%s' (%llu bytes at data offset "
					    "%llu) ends past the file's %llu bytes of data",
					    c->path, t->name, (unsigned long long)t->nbytes,
					    (unsigned long long)t->offset, (unsigned long long)data_len);
		by_off[i] = t;
	}
	qsort(by_off, g->n_tensors, sizeof(*by_off), cmp_tensor_offset);
	for (size_t i = 1; i < g->n_tensors; i++)
		if (by_off[i - 1]->offset + by_off[i - 1]->nbytes > by_off[i]->offset)
			return allm_err_set(c->err, -EINVAL, "%s: GGUF: tensors '%s' and '%s' overlap",
					    c->path, by_off[i - 1]->name, by_off[i]->name);
	for (size_t i = 0; i < g->n_tensors; i++) {
		struct allm_gguf_tensor *t = &g->tensors[i];
		t->offset += g->data_offset;
		t->data = g->base + t->offset;
	}
	qsort(g->by_name, g->n_tensors, sizeof(*g->by_name), cmp_tensor_name);
	for (size_t i = 1; i < g->n_tensors; i++)
		if (!strcmp(g->by_name[i - 1]->name, g->by_name[i]->name))
			return allm_err_set(c->err, -EINVAL, "%s: GGUF: tensor '%s' appears twice", c->path,
					    g->by_name[i]->name);
	return 0;
}

/* The smallest bytes one entry can take: a key (8 + 1), a type (4) and a u8 value;
 * a tensor: a name (8 + 1), n_dims (4), one dim (8), type (4), offset (8). */
#define MIN_KV_BYTES 14
#define MIN_TENSOR_BYTES 33

static int parse(struct allm_gguf *g, struct allm_err *err)
{
	struct cur c = {g->base, g->size, 0, g->path, err};
	const uint8_t *magic = NULL;
	uint64_t version, n_tensors, n_kv;
	size_t cap = 0;
	int r;

	if ((r = take(&c, 4, &magic, "the magic")))
		return r;
	if (memcmp(magic, GGUF_MAGIC, 4))
		return allm_err_set(err, -EINVAL, "%s: not a GGUF file (it starts with %02x %02x %02x %02x, not 'GGUF')",
				    g->path, magic[0], magic[1], magic[2], magic[3]);
	if ((r = rd(&c, 4, &version, "the version")))
		return r;
	if (version == 0x02000000 || version == 0x03000000)
		return allm_err_set(err, -ENOTSUP, "%s: a big-endian GGUF file: only little-endian files are read",
				    g->path);
	if (version == 1)
		return allm_err_set(err, -ENOTSUP, "%s: GGUF version 1 is not supported (versions 2 and 3 are; "
				    "convert the file again)", g->path);
	if (version != 2 && version != 3)
		return allm_err_set(err, -ENOTSUP, "%s: GGUF version %llu is not supported (versions 2 and 3 are)",
				    g->path, (unsigned long long)version);
	g->version = (uint32_t)version;
	if ((r = rd(&c, 8, &n_tensors, "the tensor count")) || (r = rd(&c, 8, &n_kv, "the key count")))
		return r;
	if (n_kv > (g->size - c.pos) / MIN_KV_BYTES)
		return allm_err_set(err, -EINVAL, "%s: GGUF: truncated or corrupt file: %llu metadata keys cannot "
				    "fit in a file of %zu bytes",
				    g->path, (unsigned long long)n_kv, g->size);
	if (n_tensors > (g->size - c.pos) / MIN_TENSOR_BYTES)
		return allm_err_set(err, -EINVAL, "%s: GGUF: truncated or corrupt file: %llu tensors cannot fit "
				    "in a file of %zu bytes",
				    g->path, (unsigned long long)n_tensors, g->size);
	if ((r = parse_kvs(g, &c, n_kv)))
		return r;
	g->alignment = ALLM_GGUF_DEFAULT_ALIGNMENT;
	const struct allm_gguf_kv *al = allm_gguf_find(g, "general.alignment");
	if (al) {
		if (al->type != ALLM_GGUF_U32 || al->v.u == 0 || (al->v.u & (al->v.u - 1)))
			return allm_err_set(err, -EINVAL, "%s: GGUF: general.alignment must be a power of two "
					    "of type u32 (it is %s %llu)",
					    g->path, vnames[al->type],
					    al->type == ALLM_GGUF_U32 ? (unsigned long long)al->v.u : 0ULL);
		g->alignment = al->v.u;
	}
	for (uint64_t i = 0; i < n_tensors; i++) {
		if ((r = grow(&c, (void **)&g->tensors, &cap, g->n_tensors, sizeof(*g->tensors))) ||
		    (r = parse_tensor(g, &c, &g->tensors[i], i)))
			return r;
	}
	if (!(g->by_name = allm_calloc(g->n_tensors + 1, sizeof(*g->by_name))))
		return allm_err_set(err, -ENOMEM, "%s: GGUF: out of memory", g->path);
	/* the data section starts at the next multiple of the alignment */
	g->data_offset = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
	return place_tensors(g, &c);
}

static int open_common(const char *name, const void *data, size_t size, bool mapped,
		       struct allm_gguf **ret, struct allm_err *err)
{
	struct allm_gguf *g = allm_calloc(1, sizeof(*g));
	size_t nl = strlen(name) + 1;
	if (!g || !(g->path = allm_malloc(nl))) {
		allm_free(g);
		if (mapped)
			munmap((void *)data, size);
		return allm_err_set(err, -ENOMEM, "%s: out of memory", name);
	}
	memcpy(g->path, name, nl);
	g->base = data;
	g->size = size;
	g->mapped = mapped;
	int r = parse(g, err);
	if (r) {
		allm_gguf_close(g);
		return r;
	}
	*ret = g;
	return 0;
}

int allm_gguf_open_mem(const char *name, const void *data, size_t size, struct allm_gguf **ret,
		       struct allm_err *err)
{
	return open_common(name, data, size, false, ret, err);
}

bool allm_gguf_is_file(const char *path)
{
	struct stat st;
	return path && !stat(path, &st) && S_ISREG(st.st_mode);
}

int allm_gguf_open(const char *path, struct allm_gguf **ret, struct allm_err *err)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return allm_err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int e = errno ? errno : EINVAL;
		close(fd);
		return allm_err_set(err, S_ISDIR(st.st_mode) ? -EISDIR : -e, "%s: not a regular file", path);
	}
	if (st.st_size < 8 || (uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		return allm_err_set(err, -EINVAL, "%s: not a GGUF file (%lld bytes)", path,
				    (long long)st.st_size);
	}
	/* MAP_PRIVATE read-only: the weights are read where they lie, once */
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED)
		return allm_err_set(err, -e, "%s: cannot map: %s", path, strerror(e));
	return open_common(path, p, (size_t)st.st_size, true, ret, err);
}

/* --- lookups ---------------------------------------------------------------- */

const struct allm_gguf_kv *allm_gguf_find(const struct allm_gguf *g, const char *key)
{
	for (size_t i = 0; i < g->n_kv; i++)
		if (!strcmp(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const struct allm_gguf_tensor *allm_gguf_find_tensor(const struct allm_gguf *g, const char *name)
{
	size_t lo = 0, hi = g->n_tensors;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(g->by_name[mid]->name, name);
		if (!c)
			return g->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool is_int(enum allm_gguf_vtype t)
{
	return t == ALLM_GGUF_U8 || t == ALLM_GGUF_I8 || t == ALLM_GGUF_U16 || t == ALLM_GGUF_I16 ||
	       t == ALLM_GGUF_U32 || t == ALLM_GGUF_I32 || t == ALLM_GGUF_U64 || t == ALLM_GGUF_I64;
}

static bool is_signed(enum allm_gguf_vtype t)
{
	return t == ALLM_GGUF_I8 || t == ALLM_GGUF_I16 || t == ALLM_GGUF_I32 || t == ALLM_GGUF_I64;
}

static int wrong_type(const struct allm_gguf *g, const struct allm_gguf_kv *kv, const char *want,
		      struct allm_err *err)
{
	return allm_err_set(err, -EINVAL, "%s: GGUF: key '%s' is a %s, expected %s", g->path, kv->key,
			    vnames[kv->type], want);
}

int allm_gguf_get_int(const struct allm_gguf *g, const char *key, int64_t lo, int64_t hi,
		      int64_t *ret, struct allm_err *err)
{
	const struct allm_gguf_kv *kv = allm_gguf_find(g, key);
	if (!kv)
		return -ENOENT;
	if (!is_int(kv->type))
		return wrong_type(g, kv, "an integer", err);
	bool neg = is_signed(kv->type) && kv->v.i < 0;
	bool ok = neg ? kv->v.i >= lo
		      : kv->v.u <= (uint64_t)INT64_MAX && (int64_t)kv->v.u <= hi && (int64_t)kv->v.u >= lo;
	if (!ok) {
		char val[32];
		if (neg)
			snprintf(val, sizeof(val), "%lld", (long long)kv->v.i);
		else
			snprintf(val, sizeof(val), "%llu", (unsigned long long)kv->v.u);
		return allm_err_set(err, -EINVAL, "%s: GGUF: key '%s' is %s, outside [%lld, %lld]", g->path,
				    key, val, (long long)lo, (long long)hi);
	}
	*ret = neg ? kv->v.i : (int64_t)kv->v.u;
	return 0;
}

int allm_gguf_get_float(const struct allm_gguf *g, const char *key, double *ret,
			struct allm_err *err)
{
	const struct allm_gguf_kv *kv = allm_gguf_find(g, key);
	if (!kv)
		return -ENOENT;
	if (kv->type != ALLM_GGUF_F32 && kv->type != ALLM_GGUF_F64)
		return wrong_type(g, kv, "a float", err);
	*ret = kv->v.f;
	return 0;
}

int allm_gguf_get_bool(const struct allm_gguf *g, const char *key, bool *ret,
		       struct allm_err *err)
{
	const struct allm_gguf_kv *kv = allm_gguf_find(g, key);
	if (!kv)
		return -ENOENT;
	if (kv->type != ALLM_GGUF_BOOL)
		return wrong_type(g, kv, "a bool", err);
	*ret = kv->v.u != 0;
	return 0;
}

int allm_gguf_get_str(const struct allm_gguf *g, const char *key, const char **ret,
		      size_t *ret_len, struct allm_err *err)
{
	const struct allm_gguf_kv *kv = allm_gguf_find(g, key);
	if (!kv)
		return -ENOENT;
	if (kv->type != ALLM_GGUF_STRING)
		return wrong_type(g, kv, "a string", err);
	*ret = kv->v.str.ptr;
	*ret_len = (size_t)kv->v.str.len;
	return 0;
}

int allm_gguf_get_arr(const struct allm_gguf *g, const char *key, enum allm_gguf_vtype want,
		      const struct allm_gguf_kv **ret, struct allm_err *err)
{
	const struct allm_gguf_kv *kv = allm_gguf_find(g, key);
	if (!kv)
		return -ENOENT;
	if (kv->type != ALLM_GGUF_ARRAY)
		return wrong_type(g, kv, "an array", err);
	if (want != ALLM_GGUF_VTYPE_COUNT && kv->v.arr.type != want)
		return allm_err_set(err, -EINVAL, "%s: GGUF: key '%s' is an array of %s, expected %s",
				    g->path, key, vnames[kv->v.arr.type], vnames[want]);
	*ret = kv;
	return 0;
}

const char *allm_gguf_arr_str(const struct allm_gguf_kv *kv, uint64_t i, uint64_t *ret_len)
{
	const uint8_t *p = kv->v.arr.data + kv->v.arr.str_off[i];
	*ret_len = le(p, 8);
	return (const char *)p + 8;
}

int64_t allm_gguf_arr_int(const struct allm_gguf_kv *kv, uint64_t i)
{
	enum allm_gguf_vtype t = kv->v.arr.type;
	uint64_t u = le(kv->v.arr.data + i * vsize[t], vsize[t]);
	switch (t) {
	case ALLM_GGUF_I8: return (int8_t)u;
	case ALLM_GGUF_I16: return (int16_t)u;
	case ALLM_GGUF_I32: return (int32_t)u;
	case ALLM_GGUF_I64: return (int64_t)u;
	default: return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
	}
}

double allm_gguf_arr_float(const struct allm_gguf_kv *kv, uint64_t i)
{
	enum allm_gguf_vtype t = kv->v.arr.type;
	uint64_t u = le(kv->v.arr.data + i * vsize[t], vsize[t]);
	if (t == ALLM_GGUF_F32) {
		uint32_t w = (uint32_t)u;
		float f;
		memcpy(&f, &w, 4);
		return f;
	}
	if (t == ALLM_GGUF_F64) {
		double d;
		memcpy(&d, &u, 8);
		return d;
	}
	return (double)allm_gguf_arr_int(kv, i);
}
