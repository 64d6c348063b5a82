/* Description: the GGUF container reader (common/gguf.c): a file with every value type, arrays of each, tensors of several types and a custom alignment reads back exactly (from memory and mapped from disk); every proper prefix of a file is refused as truncated; and each kind of malformed header (magic, version 1 / 4 / big-endian, counts and lengths past the file, unknown value or tensor type, nested array, bad bool, duplicate or empty key, a NUL in a name, bad alignment, bad dimensions, overflowing shape, rows not whole blocks, misaligned, out-of-file or overlapping tensor data, duplicate tensor) fails with one message that names it. */
#include "gguf-write.h"
#include "test-check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file that uses every value type and three tensor types. */
static struct gguf_w *full_file(void)
{
	struct gguf_w *w = gguf_w_new();
	uint8_t u8 = 200, i8 = 0xF6 /* -10 */, u16[2] = {0x34, 0x12}, i16[2] = {0x18, 0xFC} /* -1000 */;
	uint8_t u64[8] = {1, 0, 0, 0, 0, 0, 0, 0x80}, i64[8] = {0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
	double f64 = 2.5;
	gguf_w_alignment(w, 64);
	gguf_w_raw(w, "t.u8", ALLM_GGUF_U8, &u8, 1);
	gguf_w_raw(w, "t.i8", ALLM_GGUF_I8, &i8, 1);
	gguf_w_raw(w, "t.u16", ALLM_GGUF_U16, u16, 2);
	gguf_w_raw(w, "t.i16", ALLM_GGUF_I16, i16, 2);
	gguf_w_u32(w, "t.u32", 4000000000u);
	gguf_w_i32(w, "t.i32", -7);
	gguf_w_f32(w, "t.f32", 0.25f);
	gguf_w_bool(w, "t.bool", true);
	gguf_w_str(w, "t.str", "héllo");
	gguf_w_raw(w, "t.u64", ALLM_GGUF_U64, u64, 8);
	gguf_w_raw(w, "t.i64", ALLM_GGUF_I64, i64, 8);
	gguf_w_raw(w, "t.f64", ALLM_GGUF_F64, &f64, 8);
	const char *strs[] = {"a", "", "ccc"};
	gguf_w_arr_str(w, "t.astr", strs, 3);
	int32_t ints[] = {-1, 2, 300000};
	gguf_w_arr_i32(w, "t.ai32", ints, 3);
	float fl[] = {1.5f, -2};
	gguf_w_arr_f32(w, "t.af32", fl, 2);
	uint8_t abool[] = {ALLM_GGUF_BOOL, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0};
	gguf_w_raw(w, "t.abool", ALLM_GGUF_ARRAY, abool, sizeof(abool));
	float v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (float)(i % 17) - 8.0f;
	gguf_w_tensor_f32(w, "norm", ALLM_GGML_F32, 1, (int64_t[]){5}, v);
	gguf_w_tensor_f32(w, "q8", ALLM_GGML_Q8_0, 2, (int64_t[]){32, 2}, v);
	gguf_w_tensor_f32(w, "q41", ALLM_GGML_Q4_1, 2, (int64_t[]){64, 1}, v);
	return w;
}

static void check_full(const struct allm_gguf *g, const uint8_t *bytes)
{
	struct allm_err err = {{0}};
	int64_t i;
	double f;
	bool b;
	const char *s;
	size_t len;
	const struct allm_gguf_kv *kv;
	CHECK(g->version == 3 && g->alignment == 64 && g->n_kv == 17 && g->n_tensors == 3, "header %u %llu %zu %zu",
	      g->version, (unsigned long long)g->alignment, g->n_kv, g->n_tensors);
	CHECK(!allm_gguf_get_int(g, "t.u8", 0, 1000, &i, &err) && i == 200, "u8 %lld", (long long)i);
	CHECK(!allm_gguf_get_int(g, "t.i8", -100, 100, &i, &err) && i == -10, "i8 %lld", (long long)i);
	CHECK(!allm_gguf_get_int(g, "t.u16", 0, 1 << 20, &i, &err) && i == 0x1234, "u16 %lld", (long long)i);
	CHECK(!allm_gguf_get_int(g, "t.i16", -2000, 0, &i, &err) && i == -1000, "i16 %lld", (long long)i);
	CHECK(!allm_gguf_get_int(g, "t.u32", 0, INT64_MAX, &i, &err) && i == 4000000000LL, "u32");
	CHECK(!allm_gguf_get_int(g, "t.i32", -7, -7, &i, &err) && i == -7, "i32");
	CHECK(!allm_gguf_get_int(g, "t.i64", INT64_MIN, 0, &i, &err) && i == -2, "i64 %lld", (long long)i);
	/* u64 above INT64_MAX is outside any int64 range */
	CHECK(allm_gguf_get_int(g, "t.u64", 0, INT64_MAX, &i, &err) == -EINVAL && strstr(err.msg, "9223372036854775809"),
	      "u64: %s", err.msg);
	CHECK(allm_gguf_get_int(g, "t.u32", 0, INT32_MAX, &i, &err) == -EINVAL && strstr(err.msg, "t.u32"),
	      "u32 range: %s", err.msg);
	CHECK(!allm_gguf_get_float(g, "t.f32", &f, &err) && f == 0.25, "f32 %g", f);
	CHECK(!allm_gguf_get_float(g, "t.f64", &f, &err) && f == 2.5, "f64 %g", f);
	CHECK(!allm_gguf_get_bool(g, "t.bool", &b, &err) && b, "bool");
	CHECK(!allm_gguf_get_str(g, "t.str", &s, &len, &err) && len == 6 && !memcmp(s, "héllo", 6), "str");
	CHECK(allm_gguf_get_str(g, "t.i32", &s, &len, &err) == -EINVAL && strstr(err.msg, "expected a string"),
	      "str type: %s", err.msg);
	CHECK(allm_gguf_get_int(g, "t.str", 0, 1, &i, &err) == -EINVAL && strstr(err.msg, "expected an integer"),
	      "int type: %s", err.msg);
	i = 99;
	CHECK(allm_gguf_get_int(g, "absent", 0, 1, &i, &err) == -ENOENT && i == 99, "absent");
	CHECK(!allm_gguf_get_arr(g, "t.astr", ALLM_GGUF_STRING, &kv, &err) && kv->v.arr.n == 3, "astr");
	uint64_t l0, l1, l2;
	const char *a0 = allm_gguf_arr_str(kv, 0, &l0), *a1 = allm_gguf_arr_str(kv, 1, &l1);
	const char *a2 = allm_gguf_arr_str(kv, 2, &l2);
	CHECK(l0 == 1 && *a0 == 'a' && l1 == 0 && l2 == 3 && !memcmp(a2, "ccc", 3), "astr values");
	(void)a1;
	CHECK(allm_gguf_get_arr(g, "t.ai32", ALLM_GGUF_STRING, &kv, &err) == -EINVAL && strstr(err.msg, "array of i32"),
	      "arr type: %s", err.msg);
	CHECK(!allm_gguf_get_arr(g, "t.ai32", ALLM_GGUF_I32, &kv, &err) && allm_gguf_arr_int(kv, 0) == -1 &&
	      allm_gguf_arr_int(kv, 2) == 300000, "ai32");
	CHECK(!allm_gguf_get_arr(g, "t.af32", ALLM_GGUF_F32, &kv, &err) && allm_gguf_arr_float(kv, 0) == 1.5 &&
	      allm_gguf_arr_float(kv, 1) == -2, "af32");
	CHECK(!allm_gguf_get_arr(g, "t.abool", ALLM_GGUF_BOOL, &kv, &err) && kv->v.arr.n == 2 &&
	      allm_gguf_arr_int(kv, 0) == 1 && allm_gguf_arr_int(kv, 1) == 0, "abool");
	const struct allm_gguf_tensor *t = allm_gguf_find_tensor(g, "q8");
	CHECK(t && t->type == ALLM_GGML_Q8_0 && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2 &&
	      t->nbytes == 68 && t->offset % 64 == 0 && t->data == bytes + t->offset, "q8 tensor");
	t = allm_gguf_find_tensor(g, "q41");
	CHECK(t && t->nbytes == 40 && allm_gguf_tensor_elems(t) == 64, "q41 tensor");
	t = allm_gguf_find_tensor(g, "norm");
	CHECK(t && t->nbytes == 20 && t->offset == g->data_offset && !memcmp(t->data, (float[]){-8, -7, -6, -5, -4}, 20),
	      "norm tensor");
	CHECK(!allm_gguf_find_tensor(g, "nope") && !allm_gguf_find(g, "nope"), "absent names");
}

/* Parses bytes and expects failure with r and a message containing want. */
static void expect_fail(const char *what, const uint8_t *p, size_t n, int r, const char *want)
{
	struct allm_gguf *g = NULL;
	struct allm_err err = {{0}};
	int got = allm_gguf_open_mem("bad.gguf", p, n, &g, &err);
	CHECK(got == r && g == NULL && strstr(err.msg, want) && strstr(err.msg, "bad.gguf"),
	      "%s: got %d '%s', want %d '%s'", what, got, err.msg, r, want);
	allm_gguf_close(g);
}

static void expect_fail_w(const char *what, struct gguf_w *w, int r, const char *want)
{
	size_t n;
	uint8_t *p = gguf_w_bytes(w, &n);
	expect_fail(what, p, n, r, want);
	free(p);
	gguf_w_free(w);
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Offset of the field after tensor `name`'s name in the header (n_dims). */
static size_t tensor_info(const uint8_t *p, size_t n, const char *name)
{
	size_t l = strlen(name);
	for (size_t i = 8; i + l < n; i++)
		if (p[i - 8] == l && !memcmp(p + i, name, l))
			return i + l;
	return 0;
}

/* One tensor "t" after a header of one key. */
static struct gguf_w *one_tensor(uint32_t type, uint32_t n_dims, const int64_t *ne, size_t nbytes)
{
	struct gguf_w *w = gguf_w_new();
	uint8_t data[256] = {0};
	gguf_w_u32(w, "k", 1);
	gguf_w_tensor(w, "t", type, n_dims, ne, data, nbytes);
	return w;
}

static void malformed(void)
{
	uint8_t hdr[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
	struct gguf_w *w;
	size_t n;
	uint8_t *p;

	expect_fail("empty", hdr, 0, -EINVAL, "truncated");
	expect_fail("magic", (const uint8_t *)"GGML\3\0\0\0", 8, -EINVAL, "not a GGUF file");
	hdr[4] = 1;
	expect_fail("v1", hdr, 24, -ENOTSUP, "version 1");
	hdr[4] = 4;
	expect_fail("v4", hdr, 24, -ENOTSUP, "version 4");
	hdr[4] = 0;
	hdr[7] = 3;
	expect_fail("big-endian", hdr, 24, -ENOTSUP, "big-endian");
	hdr[7] = 0;
	hdr[4] = 2;
	expect_fail("v2 counts cut", hdr, 20, -EINVAL, "truncated");
	put64(hdr + 16, (uint64_t)1 << 60);
	expect_fail("n_kv", hdr, 24, -EINVAL, "metadata keys cannot fit");
	put64(hdr + 16, 0);
	put64(hdr + 8, UINT64_MAX);
	expect_fail("n_tensors", hdr, 24, -EINVAL, "tensors cannot fit");

	/* a key whose length runs past the file */
	w = gguf_w_new();
	gguf_w_u32(w, "key", 1);
	p = gguf_w_bytes(w, &n);
	put64(p + 24, (uint64_t)1 << 40);
	expect_fail("key length", p, n, -EINVAL, "bytes long");
	free(p);
	gguf_w_free(w);

	w = gguf_w_new();
	gguf_w_raw(w, "k", 13, "\0\0\0\0", 4);
	expect_fail_w("value type", w, -EINVAL, "unknown value type 13");
	w = gguf_w_new();
	gguf_w_raw(w, "k", ALLM_GGUF_ARRAY, (uint8_t[]){ALLM_GGUF_ARRAY, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 12);
	expect_fail_w("nested array", w, -EINVAL, "nested");
	w = gguf_w_new();
	gguf_w_raw(w, "k", ALLM_GGUF_BOOL, (uint8_t[]){2}, 1);
	expect_fail_w("bool", w, -EINVAL, "bool of value 2");
	w = gguf_w_new();
	gguf_w_u32(w, "dup", 1);
	gguf_w_u32(w, "other", 2);
	gguf_w_str(w, "dup", "x");
	expect_fail_w("duplicate key", w, -EINVAL, "key 'dup' appears twice");
	w = gguf_w_new();
	gguf_w_u32(w, "", 1);
	expect_fail_w("empty key", w, -EINVAL, "is empty");
	w = gguf_w_new();
	gguf_w_raw(w, "k", ALLM_GGUF_U32, "\1\0\0\0", 4);
	p = gguf_w_bytes(w, &n);
	p[32] = 0; /* the key "k" becomes "\0" */
	expect_fail("NUL in key", p, n, -EINVAL, "NUL byte");
	free(p);
	gguf_w_free(w);
	w = gguf_w_new();
	gguf_w_raw(w, "k", ALLM_GGUF_ARRAY, (uint8_t[]){ALLM_GGUF_U32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 12);
	expect_fail_w("u32 array count", w, -EINVAL, "array of 72057594037927936 u32");
	w = gguf_w_new();
	gguf_w_raw(w, "k", ALLM_GGUF_ARRAY, (uint8_t[]){ALLM_GGUF_STRING, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, 12);
	expect_fail_w("string array count", w, -EINVAL, "array of 281474976710656 strings, past the end");
	w = gguf_w_new();
	gguf_w_u32(w, "general.alignment", 48);
	expect_fail_w("alignment", w, -EINVAL, "power of two");
	w = gguf_w_new();
	gguf_w_u64(w, "general.alignment", 32);
	expect_fail_w("alignment type", w, -EINVAL, "of type u32 (it is u64");

	/* tensors */
	expect_fail_w("unknown tensor type", one_tensor(4, 1, (int64_t[]){4}, 16), -EINVAL, "unknown type 4");
	expect_fail_w("not whole blocks", one_tensor(ALLM_GGML_Q8_0, 1, (int64_t[]){33}, 34), -EINVAL,
		      "not a whole number of 32-value blocks");
	expect_fail_w("dims 0", one_tensor(ALLM_GGML_F32, 0, NULL, 4), -EINVAL, "0 dimensions");
	expect_fail_w("dims 5", one_tensor(ALLM_GGML_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, 4), -EINVAL, "5 dimensions");
	expect_fail_w("empty dim", one_tensor(ALLM_GGML_F32, 2, (int64_t[]){4, 0}, 16), -EINVAL, "dimension 1 is 0: empty");
	expect_fail_w("overflow", one_tensor(ALLM_GGML_F32, 3, (int64_t[]){1LL << 32, 1LL << 32, 4}, 4), -EINVAL,
		      "element count overflows");
	expect_fail_w("larger than the file", one_tensor(ALLM_GGML_F32, 2, (int64_t[]){1LL << 20, 1LL << 20}, 4),
		      -EINVAL, "larger than the file");
	expect_fail_w("past the end", one_tensor(ALLM_GGML_F32, 1, (int64_t[]){16}, 16), -EINVAL, "ends past the file");
	w = one_tensor(ALLM_GGML_F32, 1, (int64_t[]){4}, 16);
	p = gguf_w_bytes(w, &n);
	size_t at = tensor_info(p, n, "t");
	put64(p + at + 4 + 8 + 4, 8); /* offset 8: not a multiple of 32 */
	expect_fail("misaligned", p, n, -EINVAL, "not a multiple of the alignment 32");
	free(p);
	gguf_w_free(w);
	w = gguf_w_new();
	uint8_t zeros[64] = {0};
	gguf_w_tensor(w, "a", ALLM_GGML_F32, 1, (int64_t[]){16}, zeros, 64);
	gguf_w_tensor(w, "b", ALLM_GGML_F32, 1, (int64_t[]){16}, zeros, 64);
	p = gguf_w_bytes(w, &n);
	at = tensor_info(p, n, "b");
	put64(p + at + 4 + 8 + 4, 32); /* b starts inside a */
	expect_fail("overlap", p, n, -EINVAL, "tensors 'a' and 'b' overlap");
	put64(p + at + 4 + 8 + 4, 64);
	p[at - 1] = 'a'; /* two tensors named "a" */
	expect_fail("duplicate tensor", p, n, -EINVAL, "tensor 'a' appears twice");
	free(p);
	gguf_w_free(w);
}

int main(void)
{
	struct gguf_w *w = full_file();
	size_t n;
	uint8_t *p = gguf_w_bytes(w, &n);
	struct allm_gguf *g = NULL;
	struct allm_err err = {{0}};
	CHECK(!allm_gguf_open_mem("full.gguf", p, n, &g, &err), "open_mem: %s", err.msg);
	if (g)
		check_full(g, p);
	allm_gguf_close(g);

	/* mapped from disk: the same values, data pointers into the mapping */
	char path[] = "/tmp/test-gguf-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, p, n) == (ssize_t)n, "write %s", path);
	close(fd);
	g = NULL;
	CHECK(!allm_gguf_open(path, &g, &err), "open: %s", err.msg);
	if (g)
		check_full(g, g->base);
	allm_gguf_close(g);
	CHECK(allm_gguf_is_file(path) && !allm_gguf_is_file("/tmp") && !allm_gguf_is_file("/nonexistent"), "is_file");
	unlink(path);
	CHECK(allm_gguf_open("/nonexistent.gguf", &g, &err) == -ENOENT && strstr(err.msg, "/nonexistent.gguf"),
	      "missing file: %s", err.msg);
	CHECK(allm_gguf_open("/tmp", &g, &err) == -EISDIR, "a directory: %s", err.msg);

	/* every proper prefix is truncated, refused with a message, never read past */
	int bad = 0;
	for (size_t k = 0; k < n; k++) {
		uint8_t *cut = malloc(k ? k : 1); /* exact size: ASan sees any read past it */
		memcpy(cut, p, k);
		g = NULL;
		memset(&err, 0, sizeof(err));
		int r = allm_gguf_open_mem("cut.gguf", cut, k, &g, &err);
		if (r != -EINVAL || g || !strstr(err.msg, "truncated")) {
			if (bad++ < 5)
				fprintf(stderr, "prefix %zu of %zu: r %d '%s'\n", k, n, r, err.msg);
		}
		allm_gguf_close(g);
		free(cut);
	}
	CHECK(bad == 0, "%d prefixes were not refused as truncated", bad);
	free(p);
	gguf_w_free(w);
	malformed();
	if (n_fail)
		return 1;
	printf("test-gguf-reader: all checks passed\n");
	return 0;
}
