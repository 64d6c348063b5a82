/* GGUF, ggml's model file (versions 2 and 3, little-endian): the container only --
 * header, metadata key/values and the tensor table. What the keys mean is the
 * business of the loaders: engined/model (hyper-parameters, weights),
 * engined/tokenizer (the vocabulary), engined/gateway (the chat template). It lives in
 * common/ because all three read it and none of them may use another's folder.
 *
 * Opening parses and checks the whole header before anything uses it: every string,
 * array and tensor inside the file, counts and sizes that cannot overflow, known value
 * and tensor types, rows a whole number of blocks, tensors aligned, inside the data
 * section and not overlapping, no duplicate keys or tensor names. A bad file fails
 * with one message naming the file and the key or tensor; nothing is half-parsed.
 *
 * The file is mapped read-only; tensor data stays in the mapping (allm_gguf_tensor
 * .data), in the file's own type and block layout, for a loader to dequantize or keep
 * as it is. Thread safety: an opened file is immutable. */
#ifndef ALLM_GGUF_H
#define ALLM_GGUF_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALLM_GGUF_MAX_DIMS 4
#define ALLM_GGUF_DEFAULT_ALIGNMENT 32
/* Longest key and tensor name (ggml's own tensor names stop at 63 bytes). */
#define ALLM_GGUF_MAX_NAME 256
/* Longest string value: a chat template or a token is far below this. */
#define ALLM_GGUF_MAX_STRING ((uint64_t)64 << 20)

/* Metadata value types, as numbered in the file. */
enum allm_gguf_vtype {
	ALLM_GGUF_U8 = 0,
	ALLM_GGUF_I8 = 1,
	ALLM_GGUF_U16 = 2,
	ALLM_GGUF_I16 = 3,
	ALLM_GGUF_U32 = 4,
	ALLM_GGUF_I32 = 5,
	ALLM_GGUF_F32 = 6,
	ALLM_GGUF_BOOL = 7,
	ALLM_GGUF_STRING = 8,
	ALLM_GGUF_ARRAY = 9,
	ALLM_GGUF_U64 = 10,
	ALLM_GGUF_I64 = 11,
	ALLM_GGUF_F64 = 12,
	ALLM_GGUF_VTYPE_COUNT,
};

/* ggml tensor types, as numbered in the file (ggml.h). The reader knows the block
 * geometry of each so that it can check any file; which ones a loader accepts is the
 * loader's choice. */
enum allm_gguf_ttype {
	ALLM_GGML_F32 = 0,
	ALLM_GGML_F16 = 1,
	ALLM_GGML_Q4_0 = 2, /* 32 values: f16 scale d, 16 bytes of 4-bit q; x = d * (q - 8) */
	ALLM_GGML_Q4_1 = 3, /* 32 values: f16 d, f16 min m, 16 bytes of q; x = d * q + m */
	ALLM_GGML_Q5_0 = 6,
	ALLM_GGML_Q5_1 = 7,
	ALLM_GGML_Q8_0 = 8, /* 32 values: f16 d, 32 int8 q; x = d * q */
	ALLM_GGML_Q8_1 = 9,
	ALLM_GGML_Q2_K = 10,
	ALLM_GGML_Q3_K = 11,
	ALLM_GGML_Q4_K = 12,
	ALLM_GGML_Q5_K = 13,
	ALLM_GGML_Q6_K = 14,
	ALLM_GGML_Q8_K = 15,
	ALLM_GGML_BF16 = 30,
	ALLM_GGML_TTYPE_COUNT = 43, /* one past the largest number ggml assigns */
};

/* One metadata entry. Scalars are decoded into the union; an array keeps its place
 * in the file (numbers little-endian, unaligned: use the accessors below). */
struct allm_gguf_kv {
	const char *key; /* NUL-terminated copy */
	enum allm_gguf_vtype type;
	union {
		uint64_t u; /* U8 U16 U32 U64, BOOL (0/1) */
		int64_t i;  /* I8 I16 I32 I64 */
		double f;   /* F32 F64 */
		struct {
			const char *ptr; /* in the mapping, not NUL-terminated */
			uint64_t len;
		} str;
		struct {
			enum allm_gguf_vtype type; /* of the elements (never ARRAY) */
			uint64_t n;
			const uint8_t *data; /* first element in the mapping */
			const uint64_t *str_off; /* STRING arrays: each element's offset
						  * from data (its length prefix) */
		} arr;
	} v;
};

struct allm_gguf_tensor {
	const char *name; /* NUL-terminated copy */
	enum allm_gguf_ttype type;
	uint32_t n_dims;
	int64_t ne[ALLM_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the contiguous one (a
					 * matrix's row length); unused dims are 1 */
	uint64_t offset; /* absolute byte offset in the file */
	uint64_t nbytes; /* rows * blocks per row * block bytes */
	const void *data; /* the mapping + offset */
};

struct allm_gguf {
	char *path; /* for messages */
	uint32_t version;
	uint64_t alignment; /* general.alignment, or the default */
	uint64_t data_offset; /* where the data section starts */
	const uint8_t *base; /* the whole file */
	size_t size;
	size_t n_kv;
	struct allm_gguf_kv *kv; /* in file order */
	size_t n_tensors;
	struct allm_gguf_tensor *tensors; /* in file order */
	/* private */
	struct allm_gguf_tensor **by_name; /* sorted, for allm_gguf_find_tensor */
	bool mapped; /* base is our mmap (else borrowed memory) */
};

/* True when path names a regular file (after symlinks): what --model FILE.gguf
 * takes; a directory is a Hugging Face model. */
bool allm_gguf_is_file(const char *path);

/* Maps and parses the file at path. 0 and *ret (free with allm_gguf_close), or
 * -errno (-ENOENT, -EACCES..., -EINVAL malformed, -ENOTSUP big-endian or an
 * unsupported version, -ENOMEM) with err naming the file and the problem. */
int allm_gguf_open(const char *path, struct allm_gguf **ret, struct allm_err *err);
/* Parses size bytes at data, which must outlive the result (name is for messages).
 * The same checks as allm_gguf_open. */
int allm_gguf_open_mem(const char *name, const void *data, size_t size, struct allm_gguf **ret,
		       struct allm_err *err);
/* Accepts NULL. */
void allm_gguf_close(struct allm_gguf *g);

/* The entry named key, or NULL. */
const struct allm_gguf_kv *allm_gguf_find(const struct allm_gguf *g, const char *key);
/* The tensor named name, or NULL. O(log n). */
const struct allm_gguf_tensor *allm_gguf_find_tensor(const struct allm_gguf *g, const char *name);

/* Typed getters: 0 and *ret, -ENOENT when the key is absent (err untouched, *ret
 * untouched: the caller's default stays), -EINVAL when it has another type or its
 * value is out of [lo, hi] (err names the key and the value). Any integer type is
 * accepted by get_int; F32 or F64 by get_float; a string's bytes are not copied. */
int allm_gguf_get_int(const struct allm_gguf *g, const char *key, int64_t lo, int64_t hi,
		      int64_t *ret, struct allm_err *err);
int allm_gguf_get_float(const struct allm_gguf *g, const char *key, double *ret,
			struct allm_err *err);
int allm_gguf_get_bool(const struct allm_gguf *g, const char *key, bool *ret,
		       struct allm_err *err);
int allm_gguf_get_str(const struct allm_gguf *g, const char *key, const char **ret,
		      size_t *ret_len, struct allm_err *err);
/* An array of element type want (ALLM_GGUF_VTYPE_COUNT: any): 0 and *ret, -ENOENT,
 * -EINVAL. */
int allm_gguf_get_arr(const struct allm_gguf *g, const char *key, enum allm_gguf_vtype want,
		      const struct allm_gguf_kv **ret, struct allm_err *err);

/* Element i (< n) of an array entry. Strings: pointer into the mapping and length.
 * Numbers: any integer array as int64 (U64 above INT64_MAX saturates), any float
 * array as double. */
const char *allm_gguf_arr_str(const struct allm_gguf_kv *kv, uint64_t i, uint64_t *ret_len);
int64_t allm_gguf_arr_int(const struct allm_gguf_kv *kv, uint64_t i);
double allm_gguf_arr_float(const struct allm_gguf_kv *kv, uint64_t i);

/* Geometry of a tensor type: values per block and bytes per block; false for a
 * number ggml does not assign. name: "F32", "Q4_0"... ("?" when unknown). */
bool allm_gguf_ttype_info(uint32_t type, uint32_t *ret_block, uint32_t *ret_bytes);
const char *allm_gguf_ttype_name(uint32_t type);
const char *allm_gguf_vtype_name(uint32_t type);

/* Elements of t (the product of its dims). */
int64_t allm_gguf_tensor_elems(const struct allm_gguf_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
