/* Description: the disk KV tier's file I/O: blocks written from and read back into memory are bit-identical (runs coalesced, io_uring and pread/pwrite, O_DIRECT and buffered; written behind too, where the caller's memory is reused at once and a later write of the same block wins), the file has no name in its directory (O_TMPFILE, or a name unlinked at once where that is missing), a pool grows its file, and each fault — a directory that is not one, EIO or ENOSPC on a write (behind: at the read of that block only), EIO or a short transfer on a read, a reads' ring that dies with reads in the kernel (the close waits for them) — comes back as an error, never a crash; a caller's stage allocator and fill (a GPU's) are used, and their failures leave a working pool. */
#include "kv-disk.h"

#include "test-check.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The hooks (ALLM_KV_DISK_FAULT, ALLM_NO_IO_URING) as the test's environment holds
 * them right now: a program reads them, the library is handed them. */
static const struct allm_kv_env *kvenv(void)
{
	static struct allm_kv_env e;
	allm_kv_env_read(&e);
	return &e;
}

enum { BB = 8192, NB = 64 };

/* Entries in dir besides . and .. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void fill(uint8_t *mem, int32_t id, uint32_t salt)
{
	for (int i = 0; i < BB; i++)
		mem[(size_t)id * BB + i] = (uint8_t)((id * 131u + i * 7u + salt) >> (i % 3));
}

/* Writes the blocks `mem` of a, reads them into b at `back`, compares. */
static void roundtrip(const char *dir, const char *fault, const char *what)
{
	struct allm_kv_disk *d = NULL;
	struct allm_err err = {{0}};
	char note[512];
	if (fault)
		setenv("ALLM_KV_DISK_FAULT", fault, 1);
	else
		unsetenv("ALLM_KV_DISK_FAULT");
	int r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "%s: open: %s", what, err.msg);
	if (r)
		return;
	printf("%s: %s\n", what, note);
	CHECK(entries(dir) == 0, "%s: the KV file has a name in %s", what, dir);
	/* page-aligned memory, as the CPU backend's pools are (mmap) */
	uint8_t *a = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int32_t mem[40], disk[40], back[40];
	int n = 0;
	/* three runs (consecutive on both sides), then scattered blocks */
	for (int i = 0; i < 10; i++, n++)
		mem[n] = 2 + i, disk[n] = 20 + i;
	for (int i = 0; i < 8; i++, n++)
		mem[n] = 30 + i, disk[n] = 5 + i;
	for (int i = 0; i < 6; i++, n++)
		mem[n] = 50 + i, disk[n] = 40 + i;
	for (int i = 0; i < 6; i++, n++)
		mem[n] = 12 + 3 * i, disk[n] = 57 - i;
	for (int i = 0; i < n; i++) {
		fill(a, mem[i], 0x5a);
		back[i] = (mem[i] + 17) % NB;
	}
	struct allm_kv_disk_io_stat st = {.seconds = -1};
	CHECK(allm_kv_disk_io(d, true, a, mem, disk, n, &st, &err) == 0, "%s: write: %s", what, err.msg);
	CHECK(st.runs == 3 + 6, "%s: %d runs, expected 9 (3 coalesced + 6 single)", what, st.runs);
	CHECK(st.seconds >= 0, "%s: no time", what);
	memset(b, 0, (size_t)NB * BB);
	CHECK(allm_kv_disk_io(d, false, b, back, disk, n, NULL, &err) == 0, "%s: read: %s", what,
	      err.msg);
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += memcmp(a + (size_t)mem[i] * BB, b + (size_t)back[i] * BB, BB) != 0;
	CHECK(bad == 0, "%s: %d of %d blocks came back different", what, bad, n);
	/* growing the pool grows the file: the new blocks work */
	CHECK(allm_kv_disk_resize(d, 2 * NB, &err) == 0, "%s: resize: %s", what, err.msg);
	int32_t far_mem[1] = {3}, far_disk[1] = {2 * NB - 1};
	CHECK(allm_kv_disk_io(d, true, a, far_mem, far_disk, 1, NULL, &err) == 0 &&
		      allm_kv_disk_io(d, false, b, far_mem, far_disk, 1, NULL, &err) == 0 &&
		      memcmp(a + 3 * BB, b + 3 * BB, BB) == 0,
	      "%s: a block past the old size: %s", what, err.msg);
	int32_t beyond[1] = {4 * NB};
	CHECK(allm_kv_disk_io(d, true, a, far_mem, beyond, 1, NULL, &err) == -EINVAL,
	      "%s: a block outside the file was accepted", what);
	allm_kv_disk_close(d);
	CHECK(entries(dir) == 0, "%s: something left in %s after close", what, dir);
	munmap(a, (size_t)NB * BB);
	munmap(b, (size_t)NB * BB);
}

/* The fault makes the matching I/O fail (and only as an error). */
static void fault(const char *dir, const char *spec, bool on_write, const char *what)
{
	struct allm_kv_disk *d = NULL;
	struct allm_err err = {{0}};
	char note[512];
	setenv("ALLM_KV_DISK_FAULT", spec, 1);
	int r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "%s: open: %s", what, err.msg);
	if (r)
		return;
	uint8_t *a = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int32_t ids[4] = {0, 1, 2, 3}, disk[4] = {8, 9, 10, 30};
	int w = allm_kv_disk_io(d, true, a, ids, disk, 4, NULL, &err);
	int rd = w ? 0 : allm_kv_disk_io(d, false, a, ids, disk, 4, NULL, &err);
	int got = on_write ? w : rd;
	printf("%s: %s -> %d (%s)\n", what, spec, got, got ? err.msg : "no error");
	CHECK(got < 0, "%s (%s): no error", what, spec);
	CHECK(on_write || w == 0, "%s: the write failed too: %s", what, err.msg);
	allm_kv_disk_close(d);
	munmap(a, (size_t)NB * BB);
}

/* Write-behind: the caller's memory may change at once; a read sees the blocks
 * as written; a later write of a block wins over one still in flight; a stage
 * too small says -EAGAIN; a failed write behind fails the read of that block
 * only, with -EIO. */
static void write_behind(const char *dir)
{
	struct allm_kv_disk *d = NULL;
	struct allm_err err = {{0}};
	char note[512];
	unsetenv("ALLM_KV_DISK_FAULT");
	int r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "write-behind: open: %s", err.msg);
	if (r)
		return;
	printf("write-behind: %s\n", note);
	CHECK(strstr(note, "write-behind") != NULL, "no write-behind on io_uring: %s", note);
	uint8_t *a = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int32_t mem[16], disk[16];
	for (int i = 0; i < 16; i++) {
		mem[i] = i;
		disk[i] = i < 8 ? 3 + i : 20 + 2 * i; /* a run, then scattered */
		fill(a, mem[i], 11);
	}
	double secs = -1;
	CHECK(allm_kv_disk_write_behind(d, a, mem, disk, 16, &secs, &err) == 0 && secs >= 0,
	      "write-behind: %s", err.msg);
	memset(a, 0xee, (size_t)16 * BB); /* the caller's memory is free at once */
	/* a second write of block disk[5] while the first may be in flight: it wins */
	int32_t m5[1] = {20}, d5[1] = {disk[5]};
	fill(a, 20, 99);
	CHECK(allm_kv_disk_write_behind(d, a, m5, d5, 1, NULL, &err) == 0, "rewrite behind: %s", err.msg);
	CHECK(allm_kv_disk_io(d, false, b, mem, disk, 16, NULL, &err) == 0, "read back: %s", err.msg);
	/* what each block must hold: as first written, block disk[5] as rewritten */
	for (int i = 0; i < 16; i++)
		fill(a, mem[i], 11);
	fill(a, 20, 99);
	for (int i = 0; i < 16; i++) {
		const uint8_t *want = a + (size_t)(i == 5 ? 20 : mem[i]) * BB;
		CHECK(!memcmp(want, b + (size_t)mem[i] * BB, BB), "write-behind: block %d read back differs",
		      disk[i]);
	}
	int32_t many[NB + 1], where[NB + 1];
	for (int i = 0; i <= NB; i++)
		many[i] = i % NB, where[i] = i % NB;
	CHECK(allm_kv_disk_write_behind(d, a, many, where, NB + 1, NULL, &err) == -EAGAIN,
	      "a write behind larger than the stage was taken");
	CHECK(allm_kv_disk_drain(d, NULL, 0) == 0, "drain");
	allm_kv_disk_close(d);

	/* the second write behind fails: its block's read fails, the others' do not */
	setenv("ALLM_KV_DISK_FAULT", "eio-write=2", 1);
	r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "write-behind fault: open: %s", err.msg);
	if (!r) {
		int32_t m3[3] = {0, 1, 2}, d3[3] = {7, 8, 9};
		for (int i = 0; i < 3; i++)
			fill(a, m3[i], 5);
		CHECK(allm_kv_disk_write_behind(d, a, m3, d3, 3, NULL, &err) == 0, "write behind: %s",
		      err.msg);
		int32_t one[1] = {0}, d7[1] = {7}, d8[1] = {8};
		/* landed (before that, a read takes the blocks from the stage: below) */
		CHECK(allm_kv_disk_drain(d, NULL, 0) == 0, "write-behind fault: drain");
		int ok = allm_kv_disk_io(d, false, b, one, d7, 1, NULL, &err);
		int bad = allm_kv_disk_io(d, false, b, one, d8, 1, NULL, &err);
		printf("write-behind, EIO on the second write: read of its block -> %d (%s)\n", bad,
		       bad ? err.msg : "no error");
		CHECK(ok == 0, "the read of a block written fine failed: %s", err.msg);
		CHECK(bad == -EIO && strstr(err.msg, "failed earlier"), "the failed write went unnoticed: %d %s",
		      bad, err.msg);
		/* written again (synchronously), the block reads fine */
		CHECK(allm_kv_disk_io(d, true, a, one, d8, 1, NULL, &err) == 0 &&
			      allm_kv_disk_io(d, false, b, one, d8, 1, NULL, &err) == 0,
		      "a rewritten block still fails: %s", err.msg);
		allm_kv_disk_close(d);
	}

	/* Reads while writes behind are in flight (held back from the kernel, so
	 * however fast the disk): those blocks come from the stage, the others
	 * from the file; the stage holds what the write will land, failed or not. */
	setenv("ALLM_KV_DISK_FAULT", "eio-write=3,hold-writes", 1);
	r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "held writes: open: %s", err.msg);
	if (!r) {
		int32_t m4[4] = {0, 1, 2, 3}, d4[4] = {30, 31, 32, 33}, back[4] = {4, 5, 6, 7};
		int32_t slots = allm_kv_disk_behind_free(d);
		for (int i = 0; i < 4; i++)
			fill(a, m4[i], 40);
		/* 30 and 31 written and waited for (write 1), 32 and 33 behind (writes 2, 3) */
		CHECK(allm_kv_disk_io(d, true, a, m4, d4, 2, NULL, &err) == 0, "held writes: write: %s",
		      err.msg);
		CHECK(allm_kv_disk_write_behind(d, a, m4 + 2, d4 + 2, 2, NULL, &err) == 0,
		      "held writes: write behind: %s", err.msg);
		memset(a + 2 * (size_t)BB, 0xee, 2 * (size_t)BB);
		struct allm_kv_disk_io_stat st = {0};
		memset(b, 0, (size_t)NB * BB);
		CHECK(allm_kv_disk_io(d, false, b, back, d4, 4, &st, &err) == 0, "held writes: read: %s",
		      err.msg);
		printf("write-behind, reads of 4 blocks, 2 in flight: %d from the stage, %d run(s) from "
		       "the file\n", st.staged, st.runs);
		CHECK(st.staged == 2 && st.runs == 1, "held writes: %d staged, %d runs (want 2 and 1)",
		      st.staged, st.runs);
		CHECK(st.staged_seconds >= 0 && st.waited_seconds >= 0 &&
			      st.staged_seconds + st.waited_seconds <= st.seconds,
		      "staged %g s and waited %g s of %g s", st.staged_seconds, st.waited_seconds, st.seconds);
		/* what went to the file went after every write behind had landed */
		CHECK(allm_kv_disk_behind_free(d) == slots, "held writes: %d of %d stage slots free after a read",
		      allm_kv_disk_behind_free(d), slots);
		for (int i = 0; i < 4; i++)
			fill(a, m4[i], 40);
		for (int i = 0; i < 4; i++)
			CHECK(!memcmp(a + (size_t)m4[i] * BB, b + (size_t)back[i] * BB, BB),
			      "held writes: block %d read back differs", d4[i]);
		/* once the writes land, block 33's failed: the file's copy is not
		 * trusted, block 32's is read from the file */
		CHECK(allm_kv_disk_drain(d, NULL, 0) == 0, "held writes: drain");
		int32_t d32[1] = {32}, d33[1] = {33}, one[1] = {9};
		CHECK(allm_kv_disk_io(d, false, b, one, d32, 1, &st, &err) == 0 && st.staged == 0 &&
			      st.runs == 1 && !memcmp(a + 2 * (size_t)BB, b + 9 * (size_t)BB, BB),
		      "held writes: block 32 after its write landed: %s", err.msg);
		CHECK(allm_kv_disk_io(d, false, b, one, d33, 1, NULL, &err) == -EIO,
		      "held writes: block 33's failed write went unnoticed");
		allm_kv_disk_close(d);
	}

	/* The writes-behind ring fails: that write fails, the blocks it left in
	 * flight read as failed (not stale), nothing more goes behind or ahead,
	 * waited I/O still works, and close does not wait for writes that never
	 * reached the kernel. */
	setenv("ALLM_KV_DISK_FAULT", "fail-wb-submit", 1);
	r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "failed ring: open: %s", err.msg);
	if (!r) {
		int32_t m2[2] = {0, 1}, d2[2] = {44, 45}, back[2] = {6, 7}, t = -1;
		for (int i = 0; i < 2; i++)
			fill(a, m2[i], 50);
		int w = allm_kv_disk_write_behind(d, a, m2, d2, 2, NULL, &err);
		printf("write-behind, ring failed: write -> %d (%s)\n", w, w ? err.msg : "no error");
		CHECK(w == -EIO, "failed ring: the write behind returned %d", w);
		CHECK(allm_kv_disk_write_behind(d, a, m2, d2, 2, NULL, &err) == -EAGAIN &&
			      allm_kv_disk_behind_free(d) == 0,
		      "failed ring: writes still go behind");
		CHECK(allm_kv_disk_io(d, false, b, back, d2, 2, NULL, &err) == -EIO,
		      "failed ring: a block left in flight read without an error");
		CHECK(allm_kv_disk_read_start(d, b, back, d2, 2, &t, &err) == -EAGAIN,
		      "failed ring: a read still goes ahead");
		CHECK(allm_kv_disk_io(d, true, a, m2, d2, 2, NULL, &err) == 0 &&
			      allm_kv_disk_io(d, false, b, back, d2, 2, NULL, &err) == 0 &&
			      !memcmp(a, b + 6 * (size_t)BB, 2 * (size_t)BB),
		      "failed ring: waited I/O: %s", err.msg);
		allm_kv_disk_close(d);
	}
	unsetenv("ALLM_KV_DISK_FAULT");
	munmap(a, (size_t)NB * BB);
	munmap(b, (size_t)NB * BB);
}


/* Reads ahead: two reads in flight at once, waited for in reverse order, bring
 * the blocks back as written (runs coalesced, blocks of a write still in flight
 * from the stage); a failed or short read fails its ticket only; without
 * io_uring there are none (-EAGAIN). */
static void read_ahead(const char *dir)
{
	struct allm_kv_disk *d = NULL;
	struct allm_err err = {{0}};
	char note[512];
	unsetenv("ALLM_KV_DISK_FAULT");
	uint8_t *a = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	setenv("ALLM_KV_DISK_FAULT", "hold-writes", 1);
	int r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "read ahead: open: %s", err.msg);
	if (!r) {
		/* ticket 1: a run of 6 and 2 single blocks; ticket 2: 3 blocks, one
		 * of them written behind and still in flight */
		int32_t m1[8] = {0, 1, 2, 3, 4, 5, 9, 11}, d1[8] = {10, 11, 12, 13, 14, 15, 40, 42};
		int32_t m2[3] = {20, 21, 22}, d2[3] = {50, 51, 52};
		for (int i = 0; i < 8; i++)
			fill(a, m1[i], 21);
		for (int i = 0; i < 3; i++)
			fill(a, m2[i], 22);
		CHECK(allm_kv_disk_io(d, true, a, m1, d1, 8, NULL, &err) == 0 &&
			      allm_kv_disk_io(d, true, a, m2, d2, 2, NULL, &err) == 0 &&
			      allm_kv_disk_write_behind(d, a, m2 + 2, d2 + 2, 1, NULL, &err) == 0,
		      "read ahead: writes: %s", err.msg);
		int32_t b1[8] = {30, 31, 32, 33, 34, 35, 39, 41}, b2[3] = {50, 51, 52}, t1 = -1, t2 = -1;
		memset(b, 0, (size_t)NB * BB);
		CHECK(allm_kv_disk_read_start(d, b, b2, d2, 3, &t2, &err) == 0 &&
			      allm_kv_disk_read_start(d, b, b1, d1, 8, &t1, &err) == 0 && t1 != t2,
		      "read ahead: start: %s", err.msg);
		struct allm_kv_disk_io_stat s1 = {0}, s2 = {0};
		CHECK(allm_kv_disk_read_wait(d, t1, &s1, &err) == 0 &&
			      allm_kv_disk_read_wait(d, t2, &s2, &err) == 0,
		      "read ahead: wait: %s", err.msg);
		printf("read ahead: %d + %d run(s) from the file, %d block(s) from the stage, "
		       "%.3f / %.3f ms of I/O\n", s1.runs, s2.runs, s2.staged, s1.io_seconds * 1e3,
		       s2.io_seconds * 1e3);
		CHECK(s1.runs == 3 && s1.staged == 0 && s2.runs == 1 && s2.staged == 1,
		      "read ahead: runs %d and %d (want 3 and 1), staged %d and %d (want 0 and 1)", s1.runs,
		      s2.runs, s1.staged, s2.staged);
		CHECK(s1.io_seconds >= 0 && s1.io_seconds <= s1.seconds + 1 && s2.io_seconds >= 0,
		      "read ahead: I/O times %g and %g", s1.io_seconds, s2.io_seconds);
		int bad = 0;
		for (int i = 0; i < 8; i++)
			bad += memcmp(a + (size_t)m1[i] * BB, b + (size_t)b1[i] * BB, BB) != 0;
		for (int i = 0; i < 3; i++)
			bad += memcmp(a + (size_t)m2[i] * BB, b + (size_t)b2[i] * BB, BB) != 0;
		CHECK(bad == 0, "read ahead: %d of 11 blocks came back different", bad);
		/* a batch ends when every ticket was waited for: the next starts over */
		int32_t t3 = -1;
		struct allm_kv_disk_io_stat s3 = {0};
		CHECK(allm_kv_disk_read_start(d, b, b1, d1, 1, &t3, &err) == 0 && t3 == 0 &&
			      allm_kv_disk_read_wait(d, t3, &s3, &err) == 0,
		      "read ahead: a new batch: ticket %d: %s", t3, err.msg);
		/* alone on the disk, its time is its own (the disk model learns it) */
		CHECK(!s3.io_shared && s3.io_seconds > 0 && s3.runs == 1, "read ahead alone: shared %d, %g s",
		      s3.io_shared, s3.io_seconds);
		allm_kv_disk_close(d);
	}
	static const char *faults[] = {"eio-read=2", "short-read=2"};
	for (int k = 0; k < 2; k++) {
		/* read 1 (the first ticket's) is fine, read 2 (the second's) fails */
		setenv("ALLM_KV_DISK_FAULT", faults[k], 1);
		r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
		CHECK(r == 0, "read ahead %s: open: %s", faults[k], err.msg);
		if (r)
			continue;
		int32_t m[2] = {0, 1}, dd[2] = {5, 7}, bk[2] = {2, 3}, ta = -1, tb = -1;
		CHECK(allm_kv_disk_io(d, true, a, m, dd, 2, NULL, &err) == 0, "write: %s", err.msg);
		CHECK(allm_kv_disk_read_start(d, b, bk, dd, 1, &ta, &err) == 0 &&
			      allm_kv_disk_read_start(d, b, bk + 1, dd + 1, 1, &tb, &err) == 0,
		      "read ahead %s: start: %s", faults[k], err.msg);
		int ra = allm_kv_disk_read_wait(d, ta, NULL, &err);
		int rb = allm_kv_disk_read_wait(d, tb, NULL, &err);
		printf("read ahead, %s: first read -> %d, second -> %d (%s)\n", faults[k], ra, rb,
		       rb ? err.msg : "no error");
		CHECK(ra == 0 && rb == -EIO, "read ahead %s: %d and %d (want 0 and -EIO)", faults[k], ra,
		      rb);
		allm_kv_disk_close(d);
	}
	/* the reads' ring dies with 16 reads in the kernel: the read fails, and the
	 * close waits for them before it frees anything they use */
	setenv("ALLM_KV_DISK_FAULT", "fail-rd-after", 1);
	r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	CHECK(r == 0, "read ahead, a dying ring: open: %s", err.msg);
	if (!r) {
		int32_t m[16], dd[16], bk[16], t = -1;
		for (int i = 0; i < 16; i++)
			m[i] = i, dd[i] = 2 * i, bk[i] = 20 + i; /* every other block: 16 I/Os */
		CHECK(allm_kv_disk_io(d, true, a, m, dd, 16, NULL, &err) == 0, "write: %s", err.msg);
		int64_t before = allm_kv_disk_abandoned_ios();
		CHECK(allm_kv_disk_read_start(d, b, bk, dd, 16, &t, &err) == 0, "start: %s", err.msg);
		int rw = allm_kv_disk_read_wait(d, t, NULL, &err);
		allm_kv_disk_close(d);
		long long left = (long long)(allm_kv_disk_abandoned_ios() - before);
		printf("read ahead, the ring dies under 16 reads: %d (%s); %lld left in the kernel at close\n", rw,
		       rw ? err.msg : "no error", left);
		CHECK(rw == -EIO && left == 0, "a dying ring: read %d (want -EIO), %lld I/Os abandoned", rw, left);
	}
	unsetenv("ALLM_KV_DISK_FAULT");
	setenv("ALLM_NO_IO_URING", "1", 1);
	r = allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err);
	if (!r) {
		int32_t m[1] = {0}, dd[1] = {5}, t = -1;
		CHECK(allm_kv_disk_read_start(d, b, m, dd, 1, &t, &err) == -EAGAIN,
		      "read ahead without io_uring: not -EAGAIN");
		allm_kv_disk_close(d);
	}
	unsetenv("ALLM_NO_IO_URING");
	munmap(a, (size_t)NB * BB);
	munmap(b, (size_t)NB * BB);
}

/* A caller's host hooks (allm_kv_disk_set_host), as a GPU's: the stage comes
 * from its allocator, a write behind fills slots with its fill (here from an
 * array "device"), nothing comes from base; a fill that fails stops writes
 * behind and fails the reads of what was in flight; an allocator that refuses
 * leaves a pool whose I/O waits, and works. */
struct hooks {
	const uint8_t *dev;
	int n_alloc, n_free, n_fill, fail_fill_at;
	bool refuse;
};

static int h_alloc(void *ctx, size_t bytes, void **ret)
{
	struct hooks *h = ctx;
	if (h->refuse)
		return -ENOMEM;
	h->n_alloc++;
	return (*ret = malloc(bytes)) ? 0 : -ENOMEM;
}

static void h_free(void *ctx, void *p)
{
	((struct hooks *)ctx)->n_free++;
	free(p);
}

static int h_fill(void *ctx, void *slot, int32_t mem_id)
{
	struct hooks *h = ctx;
	if (++h->n_fill == h->fail_fill_at)
		return -EIO;
	memcpy(slot, h->dev + (size_t)mem_id * BB, BB);
	return 0;
}

static void host_hooks(const char *dir)
{
	struct allm_kv_disk *d = NULL;
	struct allm_err err = {{0}};
	char note[512];
	uint8_t *dev = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = mmap(NULL, (size_t)NB * BB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct hooks h = {.dev = dev};
	struct allm_kv_disk_host hk = {h_alloc, h_free, h_fill, &h};
	int32_t mem[8], disk[8];
	unsetenv("ALLM_KV_DISK_FAULT");
	for (int i = 0; i < 8; i++) {
		mem[i] = 10 + i;
		disk[i] = 30 + i;
		fill(dev, mem[i], 5);
	}
	if (allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err) == 0) {
		CHECK(allm_kv_disk_set_host(d, &hk, &err) == 0 && h.n_alloc == 1, "set_host: %s (%d allocs)", err.msg,
		      h.n_alloc);
		CHECK(allm_kv_disk_write_behind(d, NULL, mem, disk, 8, NULL, &err) == 0 && h.n_fill == 8,
		      "write behind by fill: %s (%d fills)", err.msg, h.n_fill);
		memset(dev, 0, (size_t)NB * BB); /* the "device" blocks are free at once */
		CHECK(allm_kv_disk_drain(d, NULL, 0) == 0, "drain");
		CHECK(allm_kv_disk_io(d, false, b, mem, disk, 8, NULL, &err) == 0, "read back: %s", err.msg);
		for (int i = 0; i < 8; i++) {
			fill(dev, mem[i], 5);
			CHECK(!memcmp(dev + (size_t)mem[i] * BB, b + (size_t)mem[i] * BB, BB),
			      "block %d written behind by fill differs", disk[i]);
		}
		/* the 11th fill fails: 2 blocks went behind before it, then none do */
		h.fail_fill_at = h.n_fill + 3;
		int r = allm_kv_disk_write_behind(d, NULL, mem, disk, 8, NULL, &err);
		CHECK(r == -EIO, "a failed fill: %d (%s)", r, err.msg);
		CHECK(allm_kv_disk_behind_free(d) == 0 &&
			      allm_kv_disk_write_behind(d, NULL, mem, disk, 1, NULL, &err) == -EAGAIN,
		      "writes still go behind after a failed fill");
		CHECK(allm_kv_disk_io(d, false, b, mem, disk, 2, NULL, &err) == -EIO,
		      "the blocks in flight at a failed fill read back as good");
		CHECK(allm_kv_disk_io(d, true, dev, mem, disk, 8, NULL, &err) == 0 &&
			      allm_kv_disk_io(d, false, b, mem, disk, 8, NULL, &err) == 0 &&
			      !memcmp(dev + (size_t)mem[0] * BB, b + (size_t)mem[0] * BB, (size_t)8 * BB),
		      "waited I/O after a failed fill: %s", err.msg);
		allm_kv_disk_close(d);
		CHECK(h.n_free == 1, "the stage freed %d times by the caller's free", h.n_free);
	}
	/* an allocator that refuses: no background I/O, waited I/O works */
	h = (struct hooks){.dev = dev, .refuse = true};
	if (allm_kv_disk_open(dir, NB, BB, kvenv(), &d, note, sizeof(note), &err) == 0) {
		CHECK(allm_kv_disk_set_host(d, &hk, &err) == -ENOMEM && strstr(err.msg, "stage"),
		      "a refused stage: %s", err.msg);
		int32_t t;
		CHECK(allm_kv_disk_behind_free(d) == 0 &&
			      allm_kv_disk_read_start(d, b, mem, disk, 1, &t, &err) == -EAGAIN,
		      "background I/O without a stage");
		for (int i = 0; i < 8; i++)
			fill(dev, mem[i], 9);
		CHECK(allm_kv_disk_io(d, true, dev, mem, disk, 8, NULL, &err) == 0 &&
			      allm_kv_disk_io(d, false, b, mem, disk, 8, NULL, &err) == 0 &&
			      !memcmp(dev + (size_t)mem[0] * BB, b + (size_t)mem[0] * BB, (size_t)8 * BB),
		      "waited I/O without a stage: %s", err.msg);
		allm_kv_disk_close(d);
	}
	munmap(dev, (size_t)NB * BB);
	munmap(b, (size_t)NB * BB);
}

int main(void)
{
	char dir[] = "/tmp/allm-kvdisk-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	roundtrip(dir, NULL, "io_uring, O_DIRECT where possible");
	roundtrip(dir, "no-direct", "io_uring, buffered");
	roundtrip(dir, "no-tmpfile", "no O_TMPFILE: a name unlinked at once");
	write_behind(dir);
	read_ahead(dir);
	host_hooks(dir);
	setenv("ALLM_NO_IO_URING", "1", 1);
	roundtrip(dir, NULL, "pread/pwrite");
	fault(dir, "eio-read=1", false, "pread/pwrite EIO on read");
	unsetenv("ALLM_NO_IO_URING");
	fault(dir, "eio-write=1", true, "EIO on write");
	fault(dir, "enospc-write=2", true, "ENOSPC on write");
	fault(dir, "eio-read=1", false, "EIO on read");
	fault(dir, "short-read=2", false, "a short read");

	/* a directory that is not one, and one that does not exist */
	struct allm_kv_disk *d = NULL;
	struct allm_err err = {{0}};
	char note[256], file[64];
	unsetenv("ALLM_KV_DISK_FAULT");
	snprintf(file, sizeof(file), "%s/plain", dir);
	FILE *f = fopen(file, "w");
	if (f)
		fclose(f);
	CHECK(allm_kv_disk_open(file, NB, BB, kvenv(), &d, note, sizeof(note), &err) < 0 && !d,
	      "a regular file was taken as a directory");
	printf("not a directory: %s\n", err.msg);
	CHECK(allm_kv_disk_open("/nonexistent/allm", NB, BB, kvenv(), &d, note, sizeof(note), &err) < 0,
	      "a missing directory was accepted");
	printf("missing: %s\n", err.msg);
	/* a block size O_DIRECT cannot take: buffered, and it says why */
	CHECK(allm_kv_disk_open(dir, 4, 1000, kvenv(), &d, note, sizeof(note), &err) == 0 &&
		      strstr(note, "not a multiple of 4 KiB"),
	      "odd block size: %s / %s", note, err.msg);
	allm_kv_disk_close(d);
	unlink(file);
	rmdir(dir);
	if (n_fail) {
		fprintf(stderr, "%d check(s) failed\n", n_fail);
		return 1;
	}
	printf("all disk tier I/O checks passed\n");
	return 0;
}
