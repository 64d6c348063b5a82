/* Description: io_uring file reader: a 40 MiB tensor in many chunks with progress, many small unaligned ranges, EOF errors, and byte-identical results from the pread fallback (ALLM_NO_IO_URING=1). Run with --bench FILE MIB for a throughput number. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file-reader.h"
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

/* Byte i of the test pattern: position-dependent so a chunk landing at the wrong
 * place is caught. */
static uint8_t pat(uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull;

	return (uint8_t)(x >> 56 ^ x >> 17);
}

struct prog {
	uint64_t last, total;
	unsigned calls;
	bool bad; /* went backwards, past the total, or total changed */
};

static void prog_cb(void *user, uint64_t done, uint64_t total)
{
	struct prog *p = user;

	if (done < p->last || done > total || (p->calls && total != p->total))
		p->bad = true;
	p->last = done;
	p->total = total;
	p->calls++;
}

/* The pread path asked for (ALLM_NO_IO_URING's switch, as a program passes it down). */
static bool pread_on;

static void force_pread(bool on)
{
	pread_on = on;
}

/* A 40 MiB F32 tensor between two small ones, read through allm_st_read_tensors with
 * io_uring and with pread. */
static void test_big_tensor(const char *dir)
{
	const size_t big_n = (size_t)10 << 20; /* floats: 40 MiB */
	uint8_t *data = malloc(big_n * 4);
	static uint16_t small[3] = { 1, 2, 3 };
	static float tail[5] = { 1, 2, 3, 4, 5 };
	struct allm_st_out outs[] = {
		{ "a.small", ALLM_DTYPE_F16, 1, { 3 }, small }, /* 6 bytes: big is unaligned */
		{ "b.big", ALLM_DTYPE_F32, 2, { 2560, 4096 }, data },
		{ "c.tail", ALLM_DTYPE_F32, 1, { 5 }, tail },
	};
	struct allm_st_index *idx = NULL;
	struct allm_err err = { { 0 } };
	char path[256];

	for (size_t i = 0; i < big_n * 4; i++)
		data[i] = pat(i);
	snprintf(path, sizeof(path), "%s/big.safetensors", dir);
	CHECK(allm_st_write_file(path, outs, 3, NULL, 0, &err) == 0, "write: %s", err.msg);
	CHECK(allm_st_open_file(path, &idx, &err) == 0, "open: %s", err.msg);
	if (!idx)
		goto out;
	CHECK(allm_st_find(idx, "b.big")->offset % 8 != 0, "big should start unaligned");

	for (int mode = 0; mode < 2; mode++) {
		struct allm_st_read reqs[3];
		struct prog p = { 0 };
		uint64_t total = 0;

		for (int i = 0; i < 3; i++) {
			reqs[i].t = allm_st_find(idx, outs[i].name);
			reqs[i].dst = malloc(reqs[i].t->nbytes);
			memset(reqs[i].dst, 0x5A, reqs[i].t->nbytes);
			total += reqs[i].t->nbytes;
		}
		force_pread(mode == 1);
		double t0 = allm_now();
		int r = allm_st_read_tensors(idx, reqs, 3, pread_on, prog_cb, &p, &err);
		double dt = allm_now() - t0;
		CHECK(r == 0, "read (%s): %s", mode ? "pread" : "uring", err.msg);
		CHECK(memcmp(reqs[0].dst, small, 6) == 0 && memcmp(reqs[2].dst, tail, 20) == 0,
		      "small tensors differ");
		CHECK(memcmp(reqs[1].dst, data, big_n * 4) == 0, "40 MiB tensor differs (%s)",
		      mode ? "pread" : "uring");
		/* 40 MiB in 8 MiB chunks: at least 5 progress calls, ending at the total. */
		CHECK(p.last == total && p.total == total && !p.bad && p.calls >= 7,
		      "progress %llu/%llu in %u calls, bad %d", (unsigned long long)p.last,
		      (unsigned long long)total, p.calls, p.bad);
		if (mode == 1)
			CHECK(!allm_fr_last_used_uring() &&
				      allm_fr_last_fallback_reason() == -ENOTSUP,
			      "ALLM_NO_IO_URING did not force pread");
		else if (!allm_fr_last_used_uring())
			printf("io_uring unavailable here (%s): only the pread path was tested\n",
			       strerror(-allm_fr_last_fallback_reason()));
		printf("40 MiB tensor via %s: %.1f ms, %u progress calls\n",
		       allm_fr_last_used_uring() ? "io_uring" : "pread", dt * 1e3, p.calls);
		for (int i = 0; i < 3; i++)
			free(reqs[i].dst);
	}
	force_pread(false);
	unlink(path);
out:
	allm_st_close(idx);
	free(data);
}

/* Many small ranges at odd offsets through a shallow queue with tiny chunks, so slots
 * are reused many times; both paths must produce the pattern. */
static void test_ranges(const char *dir)
{
	const size_t fsize = (size_t)3 << 20, n = 3000;
	uint8_t *file = malloc(fsize), *dst[2];
	uint64_t *off = malloc(n * sizeof(*off)), *len = malloc(n * sizeof(*len)), sum = 0;
	char path[256];
	uint32_t seed = 12345;
	int fd;

	for (size_t i = 0; i < fsize; i++)
		file[i] = pat(i);
	snprintf(path, sizeof(path), "%s/ranges.bin", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && write(fd, file, fsize) == (ssize_t)fsize, "write ranges file");
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		len[i] = 1 + (seed >> 8) % 20000;
		seed = seed * 1103515245u + 12345u;
		off[i] = (seed >> 4) % (fsize - len[i]);
		sum += len[i];
	}
	for (int mode = 0; mode < 2; mode++) {
		struct allm_fr *fr = NULL;
		struct allm_err err = { { 0 } };
		struct prog p = { 0 };
		uint8_t *d;

		dst[mode] = d = calloc(1, sum);
		CHECK(allm_fr_create(4, 4096, &fr, &err) == 0, "create: %s", err.msg);
		for (size_t i = 0, at = 0; i < n; at += len[i], i++)
			CHECK(allm_fr_add(fr, fd, off[i], len[i], d + at, path, &err) == 0, "add");
		force_pread(mode == 1);
		if (pread_on)
			allm_fr_force_pread(fr);
		CHECK(allm_fr_run(fr, prog_cb, &p, &err) == 0, "run: %s", err.msg);
		CHECK(p.last == sum && !p.bad, "progress %llu of %llu", (unsigned long long)p.last,
		      (unsigned long long)sum);
		CHECK(mode == 1 || allm_fr_used_uring(fr) == allm_fr_last_used_uring(), "used_uring");
		for (size_t i = 0, at = 0; i < n; at += len[i], i++)
			if (memcmp(d + at, file + off[i], len[i]) != 0) {
				CHECK(false, "range %zu (%llu+%llu) differs", i,
				      (unsigned long long)off[i], (unsigned long long)len[i]);
				break;
			}
		/* A second run on the same reader starts from an empty queue. */
		CHECK(allm_fr_run(fr, NULL, NULL, &err) == 0, "empty run");
		allm_fr_destroy(fr);
	}
	CHECK(memcmp(dst[0], dst[1], sum) == 0, "io_uring and pread bytes differ");
	force_pread(false);

	/* A range past the end, among good ones still in flight: -EIO naming the file,
	 * and every read has finished when run returns (the buffers are freed at once). */
	for (int mode = 0; mode < 2; mode++) {
		struct allm_fr *fr = NULL;
		struct allm_err err = { { 0 } };
		uint8_t *d = malloc((size_t)64 << 20);

		allm_fr_create(16, 1 << 16, &fr, &err);
		for (int i = 0; i < 20; i++)
			allm_fr_add(fr, fd, 0, fsize, d + (size_t)i * fsize, path, &err);
		allm_fr_add(fr, fd, fsize - 100, 200, d, path, &err);
		force_pread(mode == 1);
		if (pread_on)
			allm_fr_force_pread(fr);
		int r = allm_fr_run(fr, NULL, NULL, &err);
		CHECK(r == -EIO && strstr(err.msg, path) && strstr(err.msg, "end of file"),
		      "past EOF (%s): r=%d %s", mode ? "pread" : "uring", r, err.msg);
		allm_fr_destroy(fr);
		free(d);
	}
	force_pread(false);

	struct allm_fr *fr = NULL;
	struct allm_err err = { { 0 } };
	allm_fr_create(0, 0, &fr, &err);
	CHECK(allm_fr_add(fr, -1, 0, 10, file, path, &err) == -EINVAL, "bad fd accepted");
	CHECK(allm_fr_add(fr, fd, UINT64_MAX - 5, 10, file, path, &err) == -EINVAL,
	      "overflowing range accepted");
	CHECK(allm_fr_add(fr, fd, 0, 0, NULL, path, &err) == 0, "empty range refused");
	allm_fr_destroy(fr);
	allm_fr_destroy(NULL);
	close(fd);
	unlink(path);
	free(dst[0]);
	free(dst[1]);
	free(file);
	free(off);
	free(len);
}

/* Warm-cache throughput of both paths on one big file (created when absent). */
static int bench(const char *path, size_t mib)
{
	size_t size = mib << 20;
	uint8_t *buf = malloc(size);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct allm_err err = { { 0 } };

	if (!buf)
		return 1;
	if (fd < 0) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		for (size_t i = 0; i < size; i++)
			buf[i] = pat(i);
		if (fd < 0 || write(fd, buf, size) != (ssize_t)size) {
			perror(path);
			return 1;
		}
	}
	const char *depth_s = getenv("ALLM_BENCH_DEPTH"), *chunk_s = getenv("ALLM_BENCH_CHUNK_MIB");
	unsigned depth = depth_s ? (unsigned)atoi(depth_s) : 0;
	size_t chunk = chunk_s ? (size_t)atoi(chunk_s) << 20 : 0;
	for (int rep = 0; rep < 6; rep++) {
		struct allm_fr *fr = NULL;

		force_pread((rep + (getenv("ALLM_BENCH_PREAD_FIRST") != NULL)) % 2 == 1);
		allm_fr_create(depth, chunk, &fr, &err);
		allm_fr_add(fr, fd, 0, size, buf, path, &err);
		if (pread_on)
			allm_fr_force_pread(fr);
		double t0 = allm_now();
		if (allm_fr_run(fr, NULL, NULL, &err) != 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		double dt = allm_now() - t0;
		printf("%-8s %zu MiB in %.3f s: %.0f MB/s\n",
		       allm_fr_used_uring(fr) ? "io_uring" : "pread", mib, dt, (double)size / dt / 1e6);
		allm_fr_destroy(fr);
	}
	close(fd);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/allm-fr-XXXXXX";

	if (argc == 4 && strcmp(argv[1], "--bench") == 0)
		return bench(argv[2], (size_t)atoi(argv[3]));
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	test_big_tensor(tmpl);
	test_ranges(tmpl);
	rmdir(tmpl);
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
