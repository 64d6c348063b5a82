/* Description: bad safetensors files and model directories fail with one message naming the file and the problem. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

static int failures;
static char tmp[] = "/tmp/allm-st-err-XXXXXX";

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

/* Writes raw bytes: an 8-byte length (hlen, or strlen(json) when hlen is ~0) then
 * json then data_len bytes of data. */
static void write_raw(const char *path, uint64_t hlen, const char *json, size_t data_len)
{
	FILE *f = fopen(path, "wb");
	uint64_t n = hlen == ~(uint64_t)0 ? strlen(json) : hlen;

	fwrite(&n, 8, 1, f);
	fputs(json, f);
	for (size_t i = 0; i < data_len; i++)
		fputc((int)i, f);
	fclose(f);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

/* Opening path (a file, or a directory when dir) must fail and the message must
 * contain every one of the NULL-terminated needles. */
static void expect_fail(const char *what, const char *path, bool dir, ...)
{
	struct allm_st_index *idx = NULL;
	struct allm_err err = { { 0 } };
	const char *needle;
	va_list ap;
	int r = dir ? allm_st_open_dir(path, &idx, &err) : allm_st_open_file(path, &idx, &err);

	if (r >= 0 || idx) {
		fprintf(stderr, "FAIL %s: opened (r=%d)\n", what, r);
		failures++;
		allm_st_close(idx);
		return;
	}
	va_start(ap, dir);
	while ((needle = va_arg(ap, const char *))) {
		if (!strstr(err.msg, needle)) {
			fprintf(stderr, "FAIL %s: message \"%s\" lacks \"%s\"\n", what, err.msg, needle);
			failures++;
		}
	}
	va_end(ap);
	printf("  %-22s -> %s\n", what, err.msg);
}

#define GOOD_ENTRY "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}"

static void test_files(void)
{
	char p[256];
	const size_t limit_mib = 100;

	snprintf(p, sizeof(p), "%s/missing.safetensors", tmp);
	expect_fail("missing file", p, false, p, "No such file", NULL);

	snprintf(p, sizeof(p), "%s/short.safetensors", tmp);
	write_text(p, "abc");
	expect_fail("shorter than 8 bytes", p, false, p, "too short", "3 bytes", NULL);

	snprintf(p, sizeof(p), "%s/hlen.safetensors", tmp);
	write_raw(p, 4096, "{}", 0);
	expect_fail("header length past file", p, false, p, "header length 4096", "past the end",
		    NULL);
	write_raw(p, (uint64_t)(limit_mib + 1) << 20, "{}", 0);
	expect_fail("absurd header length", p, false, p, "limit", NULL);

	snprintf(p, sizeof(p), "%s/json.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{\"w\": {\"dtype\": \"F32\",", 0);
	expect_fail("invalid JSON", p, false, p, "not valid JSON", NULL);
	write_raw(p, ~(uint64_t)0, "[1, 2]", 0);
	expect_fail("header not an object", p, false, p, "not a JSON object", NULL);

	snprintf(p, sizeof(p), "%s/dtype.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{\"x.weight\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
	expect_fail("dtype I8", p, false, "unsupported dtype I8 for tensor x.weight in", p, NULL);
	write_raw(p, ~(uint64_t)0, "{\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
	expect_fail("dtype F64", p, false, "unsupported dtype F64 for tensor x", p, NULL);
	write_raw(p, ~(uint64_t)0, "{\"x\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
	expect_fail("dtype BOOL", p, false, "unsupported dtype BOOL", NULL);
	write_raw(p, ~(uint64_t)0, "{\"x\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
	expect_fail("dtype not a string", p, false, "tensor x in", p, "dtype", NULL);

	snprintf(p, sizeof(p), "%s/shape.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{\"s\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,24]}}", 24);
	expect_fail("negative dim", p, false, "tensor s in", p, "shape[1]", NULL);
	write_raw(p, ~(uint64_t)0, "{\"s\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8);
	expect_fail("fractional dim", p, false, "tensor s in", p, "shape[0]", NULL);
	write_raw(p, ~(uint64_t)0, "{\"s\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8);
	expect_fail("shape not an array", p, false, "tensor s in", p, "shape", NULL);
	write_raw(p, ~(uint64_t)0, "{\"s\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4);
	expect_fail("too many dims", p, false, "tensor s in", p, "9 dims", NULL);
	write_raw(p, ~(uint64_t)0, "{\"s\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4);
	expect_fail("shape overflow", p, false, "tensor s in", p, "overflow", NULL);

	snprintf(p, sizeof(p), "%s/offs.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{\"o\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8);
	expect_fail("data_offsets missing", p, false, "tensor o in", p, "data_offsets", NULL);
	write_raw(p, ~(uint64_t)0, "{\"o\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8);
	expect_fail("data_offsets one int", p, false, "tensor o in", p, "data_offsets", NULL);
	write_raw(p, ~(uint64_t)0, "{\"o\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8);
	expect_fail("begin > end", p, false, "tensor o in", p, "begin 8 > end 0", NULL);
	write_raw(p, ~(uint64_t)0, "{\"o\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24);
	expect_fail("nbytes/shape mismatch", p, false, "tensor o in", p, "span 20 bytes", "need 24",
		    NULL);
	write_raw(p, ~(uint64_t)0, "{\"o\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24);
	expect_fail("dtype size mismatch", p, false, "tensor o in", p, "need 12", NULL);
	write_raw(p, ~(uint64_t)0, "{\"o\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[1000,1016]}}", 24);
	expect_fail("offsets past file", p, false, "truncated: tensor o needs bytes up to", p,
		    NULL);

	snprintf(p, sizeof(p), "%s/trunc.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{" GOOD_ENTRY ",\"v\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[24,40]}}", 30);
	expect_fail("truncated data", p, false, "truncated: tensor v needs bytes up to", p,
		    "has", NULL);

	snprintf(p, sizeof(p), "%s/dup.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{" GOOD_ENTRY "," GOOD_ENTRY "}", 24);
	expect_fail("duplicate name", p, false, "duplicate tensor name", "\"w\"", p, NULL);

	snprintf(p, sizeof(p), "%s/meta.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{\"__metadata__\":{\"a\":1}," GOOD_ENTRY "}", 24);
	expect_fail("metadata not strings", p, false, "__metadata__", p, NULL);

	/* The same bytes with a good header open, so the cases above fail for their
	 * stated reason only. */
	struct allm_st_index *idx = NULL;
	struct allm_err err;
	write_raw(p, ~(uint64_t)0, "{\"__metadata__\":{\"a\":\"1\"}," GOOD_ENTRY "}", 24);
	if (allm_st_open_file(p, &idx, &err) != 0) {
		fprintf(stderr, "FAIL control file: %s\n", err.msg);
		failures++;
	}
	allm_st_close(idx);
}

/* A fresh model directory under tmp, with two shards holding a and b. */
static void make_sharded(char *dir, size_t size, const char *name)
{
	char p[512];

	snprintf(dir, size, "%s/%s", tmp, name);
	mkdir(dir, 0700);
	snprintf(p, sizeof(p), "%s/s1.safetensors", dir);
	write_raw(p, ~(uint64_t)0, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	snprintf(p, sizeof(p), "%s/s2.safetensors", dir);
	write_raw(p, ~(uint64_t)0, "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
}

static void write_index(const char *dir, const char *json)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", dir);
	write_text(p, json);
}

static void test_dirs(void)
{
	char d[256], ip[300], sp[300];

	snprintf(d, sizeof(d), "%s/emptydir", tmp);
	mkdir(d, 0700);
	expect_fail("no model files", d, true, "no model.safetensors or model.safetensors.index.json in",
		    d, NULL);
	expect_fail("dir itself missing", "/nonexistent/allm", true, "/nonexistent/allm", NULL);

	make_sharded(d, sizeof(d), "good");
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}");
	{
		struct allm_st_index *idx = NULL;
		struct allm_err err;

		if (allm_st_open_dir(d, &idx, &err) != 0 || idx->n_files != 2) {
			fprintf(stderr, "FAIL control dir: %s\n", err.msg);
			failures++;
		}
		allm_st_close(idx);
	}

	make_sharded(d, sizeof(d), "missing-tensor");
	snprintf(ip, sizeof(ip), "%s/model.safetensors.index.json", d);
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\",\"c\":\"s2.safetensors\"}}");
	expect_fail("tensor missing in shard", d, true, "tensor c listed in", ip, "not in shard s2.safetensors", NULL);

	make_sharded(d, sizeof(d), "wrong-shard");
	snprintf(ip, sizeof(ip), "%s/model.safetensors.index.json", d);
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\"}}");
	expect_fail("tensor not in its shard", d, true, "tensor b listed in", ip, "s1.safetensors", NULL);
	/* b is in s2, which is opened for c, but the map says s1. */
	snprintf(sp, sizeof(sp), "%s/s2.safetensors", d);
	write_raw(sp, ~(uint64_t)0, "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"c\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]}}", 12);
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\",\"c\":\"s2.safetensors\"}}");
	expect_fail("tensor in other shard", d, true, "tensor b listed in", ip, "for shard s1.safetensors is in", sp, NULL);

	make_sharded(d, sizeof(d), "dup-index");
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}");
	expect_fail("tensor twice in index", d, true, "model.safetensors.index.json", "duplicate",
		    NULL);

	make_sharded(d, sizeof(d), "dup-shards");
	snprintf(sp, sizeof(sp), "%s/s2.safetensors", d);
	write_raw(sp, ~(uint64_t)0, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}");
	expect_fail("tensor in two shards", d, true, "duplicate tensor a in", "s1.safetensors",
		    "s2.safetensors", NULL);

	make_sharded(d, sizeof(d), "traversal");
	write_index(d, "{\"weight_map\":{\"a\":\"../good/s1.safetensors\",\"b\":\"s2.safetensors\"}}");
	expect_fail("path traversal ../", d, true, "tensor a", "../good/s1.safetensors",
		    "outside the model directory", NULL);
	write_index(d, "{\"weight_map\":{\"a\":\"/etc/passwd\",\"b\":\"s2.safetensors\"}}");
	expect_fail("absolute shard path", d, true, "/etc/passwd", "outside", NULL);
	write_index(d, "{\"weight_map\":{\"a\":\"..\",\"b\":\"s2.safetensors\"}}");
	expect_fail("shard named ..", d, true, "outside", NULL);

	make_sharded(d, sizeof(d), "missing-shard");
	snprintf(sp, sizeof(sp), "%s/s3.safetensors", d);
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s3.safetensors\"}}");
	expect_fail("missing shard", d, true, "shard", sp, "missing", NULL);

	make_sharded(d, sizeof(d), "bad-index");
	snprintf(ip, sizeof(ip), "%s/model.safetensors.index.json", d);
	write_index(d, "{\"weight_map\": [");
	expect_fail("index not JSON", d, true, ip, "not valid JSON", NULL);
	write_index(d, "{\"metadata\": {}}");
	expect_fail("index without weight_map", d, true, ip, "weight_map", NULL);
	write_index(d, "{\"weight_map\":{\"a\":1}}");
	expect_fail("weight_map value", d, true, ip, "tensor a", NULL);

	make_sharded(d, sizeof(d), "bad-shard");
	snprintf(sp, sizeof(sp), "%s/s2.safetensors", d);
	write_raw(sp, ~(uint64_t)0, "{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
	write_index(d, "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}");
	expect_fail("bad shard header", d, true, "unsupported dtype U8 for tensor b in", sp, NULL);
}

/* A file that shrinks after it was opened fails the read, naming the file. */
static void test_shrunk(bool pread)
{
	char p[256];
	struct allm_st_index *idx = NULL;
	struct allm_err err = { { 0 } };
	float buf[6];

	snprintf(p, sizeof(p), "%s/shrink.safetensors", tmp);
	write_raw(p, ~(uint64_t)0, "{" GOOD_ENTRY "}", 24);
	if (allm_st_open_file(p, &idx, &err) != 0) {
		fprintf(stderr, "FAIL shrink open: %s\n", err.msg);
		failures++;
		return;
	}
	if (truncate(p, 8 + (off_t)idx->tensors[0].offset - 8 + 12) != 0)
		perror("truncate");
	struct allm_st_read rq = { &idx->tensors[0], buf };
	int r = allm_st_read_tensors(idx, &rq, 1, pread, NULL, NULL, &err);
	if (r != -EIO || !strstr(err.msg, p) || !strstr(err.msg, "end of file")) {
		fprintf(stderr, "FAIL shrunk file: r=%d \"%s\"\n", r, err.msg);
		failures++;
	} else {
		printf("  %-22s -> %s\n", "file shrank", err.msg);
	}
	allm_st_close(idx);
}

int main(void)
{
	size_t mem0 = allm_mem_in_use();

	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	test_files();
	test_dirs();
	test_shrunk(false);
	test_shrunk(true); /* the pread path reports it the same way */
	if (allm_mem_in_use() != mem0) {
		fprintf(stderr, "FAIL leaked %zu bytes\n", allm_mem_in_use() - mem0);
		failures++;
	}
	nftw(tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
