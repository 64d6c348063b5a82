/* Description: safetensors write -> open -> read round trip (F32/F16/BF16, 0-d..4-d, empty) and sharded directories with an index. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                         \
			fprintf(stderr, "\n");                                \
			failures++;                                           \
		}                                                             \
	} while (0)

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static void fill(void *buf, size_t n, uint32_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (uint8_t)(seed >> 24);
	}
}

static size_t out_bytes(const struct allm_st_out *o)
{
	size_t n = allm_dtype_size(o->dtype);

	for (int d = 0; d < o->n_dims; d++)
		n *= (size_t)o->shape[d];
	return n;
}

/* Reads every tensor of idx named in outs and compares with what was written. */
static void check_against(const struct allm_st_index *idx, const struct allm_st_out *outs,
			  size_t n, const char *what)
{
	struct allm_st_read *reqs = calloc(n, sizeof(*reqs));
	struct allm_err err = { 0 };

	for (size_t i = 0; i < n; i++) {
		const struct allm_st_tensor *t = allm_st_find(idx, outs[i].name);

		CHECK(t, "%s: %s not found", what, outs[i].name);
		if (!t)
			goto out;
		CHECK(t->dtype == outs[i].dtype && t->n_dims == outs[i].n_dims &&
			      t->nbytes == out_bytes(&outs[i]),
		      "%s: %s metadata differs", what, outs[i].name);
		for (int d = 0; d < t->n_dims; d++)
			CHECK(t->shape[d] == outs[i].shape[d], "%s: %s dim %d", what, t->name, d);
		CHECK(t->offset % 8 == 0 || i > 0, "%s: first tensor not 8-byte aligned", what);
		reqs[i].t = t;
		reqs[i].dst = malloc(t->nbytes ? t->nbytes : 1);
		memset(reqs[i].dst, 0xAB, t->nbytes ? t->nbytes : 1);
	}
	CHECK(allm_st_read_tensors(idx, reqs, n, false, NULL, NULL, &err) == 0, "%s: read: %s", what,
	      err.msg);
	for (size_t i = 0; i < n; i++)
		CHECK(reqs[i].t->nbytes == 0 ||
			      memcmp(reqs[i].dst, outs[i].data, reqs[i].t->nbytes) == 0,
		      "%s: %s bytes differ", what, outs[i].name);
out:
	for (size_t i = 0; i < n; i++)
		free(reqs[i].dst);
	free(reqs);
}

static void test_round_trip(const char *dir)
{
	static float a[3 * 5], scalar[1];
	static uint16_t h[7 * 2 * 3], bf[17];
	static uint16_t e4[2 * 1 * 3 * 2];
	struct allm_st_out outs[] = {
		{ "z.last", ALLM_DTYPE_F32, 2, { 3, 5 }, a },
		{ "a.scalar", ALLM_DTYPE_F32, 0, { 0 }, scalar },
		{ "m.half", ALLM_DTYPE_F16, 3, { 7, 2, 3 }, h },
		{ "b.bf16", ALLM_DTYPE_BF16, 1, { 17 }, bf }, /* odd size: next data unaligned */
		{ "empty", ALLM_DTYPE_F16, 2, { 0, 4 }, NULL },
		{ "four", ALLM_DTYPE_BF16, 4, { 2, 1, 3, 2 }, e4 },
	};
	const char *meta[] = { "format", "pt", "note", "round trip" };
	struct allm_st_index *idx = NULL;
	struct allm_err err = { 0 };
	char path[4096];
	FILE *f;
	uint64_t hlen = 0;
	char hdr[4096];

	for (size_t i = 0; i < 15; i++)
		a[i] = (float)i * 0.5f - 3.0f;
	scalar[0] = 42.0f;
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(h); i++)
		h[i] = allm_f32_to_f16((float)i / 7.0f);
	for (size_t i = 0; i < ALLM_ARRAY_SIZE(bf); i++)
		bf[i] = allm_f32_to_bf16(-(float)i * 1.25f);
	fill(e4, sizeof(e4), 7);

	snprintf(path, sizeof(path), "%s/rt.safetensors", dir);
	CHECK(allm_st_write_file(path, outs, ALLM_ARRAY_SIZE(outs), meta, 2, &err) == 0,
	      "write: %s", err.msg);

	/* Header format as the Python library writes it: length is a multiple of 8,
	 * __metadata__ first, keys in the given order, padded with spaces. */
	f = fopen(path, "rb");
	CHECK(f && fread(&hlen, 8, 1, f) == 1, "cannot reread %s", path);
	CHECK(hlen % 8 == 0 && hlen < sizeof(hdr), "header length %llu", (unsigned long long)hlen);
	if (f && hlen < sizeof(hdr) && fread(hdr, 1, hlen, f) == hlen) {
		hdr[hlen] = '\0';
		CHECK(strncmp(hdr, "{\"__metadata__\":{\"format\":\"pt\"", 30) == 0, "header: %s", hdr);
		CHECK(strstr(hdr, "\"z.last\"") < strstr(hdr, "\"a.scalar\""), "order: %s", hdr);
		CHECK(strstr(hdr, "\"dtype\":\"BF16\"") && strstr(hdr, "\"shape\":[]"), "%s", hdr);
		CHECK(hdr[hlen - 1] == '}' || hdr[hlen - 1] == ' ', "padding: %s", hdr);
	}
	if (f)
		fclose(f);

	CHECK(allm_st_open_file(path, &idx, &err) == 0, "open: %s", err.msg);
	if (!idx)
		return;
	CHECK(idx->n_tensors == (int32_t)ALLM_ARRAY_SIZE(outs), "n_tensors %d", idx->n_tensors);
	CHECK(idx->n_files == 1 && strcmp(idx->paths[0], path) == 0, "paths");
	for (int32_t i = 1; i < idx->n_tensors; i++)
		CHECK(strcmp(idx->tensors[i - 1].name, idx->tensors[i].name) < 0, "not sorted");
	CHECK(allm_st_find(idx, "a.scalar")->nbytes == 4, "scalar is one element");
	CHECK(!allm_st_find(idx, "nope") && !allm_st_find(idx, "__metadata__"), "find absent");
	check_against(idx, outs, ALLM_ARRAY_SIZE(outs), "round trip");
	allm_st_close(idx);

	/* No tensors at all is a valid (empty) file. */
	idx = NULL;
	snprintf(path, sizeof(path), "%s/empty.safetensors", dir);
	CHECK(allm_st_write_file(path, NULL, 0, NULL, 0, &err) == 0, "write empty: %s", err.msg);
	CHECK(allm_st_open_file(path, &idx, &err) == 0 && idx->n_tensors == 0, "open empty: %s",
	      err.msg);
	allm_st_close(idx);

	/* Bad writer inputs. */
	struct allm_st_out dup[] = { outs[0], outs[0] };
	CHECK(allm_st_write_file(path, dup, 2, NULL, 0, &err) == -EINVAL &&
		      strstr(err.msg, "duplicate tensor z.last"), "dup write: %s", err.msg);
	struct allm_st_out nodata = { "x", ALLM_DTYPE_F32, 1, { 4 }, NULL };
	CHECK(allm_st_write_file(path, &nodata, 1, NULL, 0, &err) == -EINVAL, "NULL data");
}

static void test_sharded(const char *dir)
{
	static float w0[64 * 8], w1[8], w2[32 * 4];
	static uint16_t w3[5 * 5];
	struct allm_st_out s1[] = {
		{ "model.layers.0.w", ALLM_DTYPE_F32, 2, { 64, 8 }, w0 },
		{ "model.norm.weight", ALLM_DTYPE_F32, 1, { 8 }, w1 },
	};
	struct allm_st_out s2[] = {
		{ "lm_head.weight", ALLM_DTYPE_F32, 2, { 32, 4 }, w2 },
		{ "model.layers.1.w", ALLM_DTYPE_BF16, 2, { 5, 5 }, w3 },
	};
	struct allm_st_out all[] = { s1[0], s1[1], s2[0], s2[1] };
	struct allm_st_index *idx = NULL;
	struct allm_err err = { 0 };
	char path[4096];
	FILE *f;

	fill(w0, sizeof(w0), 1);
	fill(w1, sizeof(w1), 2);
	fill(w2, sizeof(w2), 3);
	fill(w3, sizeof(w3), 4);
	snprintf(path, sizeof(path), "%s/model-00001-of-00002.safetensors", dir);
	CHECK(allm_st_write_file(path, s1, 2, NULL, 0, &err) == 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/model-00002-of-00002.safetensors", dir);
	CHECK(allm_st_write_file(path, s2, 2, NULL, 0, &err) == 0, "%s", err.msg);
	/* A stale single file must be ignored in favour of the index. */
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	CHECK(allm_st_write_file(path, s1 + 1, 1, NULL, 0, &err) == 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"metadata\": {\"total_size\": 2816}, \"weight_map\": {\n"
		   " \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
		   " \"model.layers.0.w\": \"model-00001-of-00002.safetensors\",\n"
		   " \"model.layers.1.w\": \"model-00002-of-00002.safetensors\",\n"
		   " \"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}\n");
	fclose(f);

	CHECK(allm_st_open_dir(dir, &idx, &err) == 0, "open sharded: %s", err.msg);
	if (!idx)
		return;
	CHECK(idx->n_files == 2 && idx->n_tensors == 4, "files %d tensors %d", idx->n_files,
	      idx->n_tensors);
	const struct allm_st_tensor *t = allm_st_find(idx, "lm_head.weight");
	CHECK(t && strstr(idx->paths[t->file_idx], "model-00002-of-00002.safetensors"),
	      "lm_head in shard 2");
	t = allm_st_find(idx, "model.norm.weight");
	CHECK(t && strstr(idx->paths[t->file_idx], "model-00001-of-00002.safetensors"),
	      "norm in shard 1");
	for (int32_t i = 0; i < idx->n_files; i++)
		CHECK(idx->file_sizes[i] > 8, "file size");
	check_against(idx, all, 4, "sharded");
	allm_st_close(idx);

	/* Without the index the single file is used. */
	unlink(path);
	idx = NULL;
	CHECK(allm_st_open_dir(dir, &idx, &err) == 0 && idx->n_tensors == 1, "single: %s",
	      err.msg);
	allm_st_close(idx);
}

int main(void)
{
	char tmpl[] = "/tmp/allm-st-XXXXXX", d2[64];
	size_t mem0 = allm_mem_in_use();

	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	test_round_trip(tmpl);
	snprintf(d2, sizeof(d2), "%s/sharded", tmpl);
	mkdir(d2, 0700);
	test_sharded(d2);
	CHECK(allm_mem_in_use() == mem0, "leaked %zu bytes", allm_mem_in_use() - mem0);
	nftw(tmpl, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
