/* Description: the disk tier's path for a device that is not host memory (a GPU, the simulator): on the CPU backend told to stage (ALLM_KV_STAGED=1), swap-outs go behind through the host stage and swap-ins read ahead into host buffers and land bit for bit, a failed read ahead gives the device blocks back, the host memory of reads ahead is bounded; on the simulated A800 a write behind costs the step its device -> host copies only, the disk's line serves transfers in order, and a read ahead that a step outlasts costs only its host -> device copies, a write that waits queues behind the writes behind. */
#include "backend.h"
#include "block-pool.h"
#include "kv-cache.h"
#include "test-check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OWNER = 7, N = 5 };

static uint32_t pat(int32_t blk, size_t j)
{
	return (uint32_t)blk * 2654435761u ^ (uint32_t)j * 40503u;
}

static uint32_t *dev_block(struct allm_kv_cache *kv, int32_t id)
{
	return (uint32_t *)((char *)kv->dev + (size_t)id * kv->block_bytes);
}

/* Takes n GPU blocks and writes logical block i's pattern into the i-th. */
static void fill(struct allm_kv_cache *kv, int32_t *gpu, int32_t n)
{
	for (int32_t i = 0; i < n; i++) {
		CHECK(allm_block_pool_alloc(&kv->gpu, OWNER, &gpu[i]) == 0, "GPU pool short");
		for (size_t j = 0; j < kv->block_bytes / 4; j++)
			dev_block(kv, gpu[i])[j] = pat(i, j);
	}
}

static int32_t bad_words(struct allm_kv_cache *kv, const int32_t *gpu, int32_t n)
{
	int32_t bad = 0;
	for (int32_t i = 0; i < n; i++)
		for (size_t j = 0; j < kv->block_bytes / 4; j++)
			bad += dev_block(kv, gpu[i])[j] != pat(i, j);
	return bad;
}

static void release_gpu(struct allm_kv_cache *kv, const int32_t *gpu, int32_t n)
{
	for (int32_t i = 0; i < n; i++)
		allm_block_pool_release(&kv->gpu, OWNER, gpu[i]);
}

static struct allm_kv_cache *cpu_cache(allm_backend_t *be, const char *dir, const char *fault)
{
	struct allm_kv_layout lay = {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .block_size = 16,
				     .dtype = ALLM_DTYPE_F32}; /* 4 KiB blocks: O_DIRECT-sized */
	struct allm_kv_cache *kv = NULL;
	struct allm_err err = {{0}};
	char note[256];
	if (fault)
		setenv("ALLM_KV_DISK_FAULT", fault, 1);
	else
		unsetenv("ALLM_KV_DISK_FAULT");
	struct allm_kv_env env;
	allm_kv_env_read(&env);
	if (allm_kv_cache_create(be, &lay, 32, 8, &kv, &err) || (allm_kv_set_env(kv, &env), 0) ||
	    allm_kv_attach_disk(kv, dir, 64, note, sizeof(note), &err)) {
		CHECK(0, "KV cache with a disk tier: %s", err.msg);
		allm_kv_cache_free(kv);
		return NULL;
	}
	unsetenv("ALLM_KV_DISK_FAULT");
	return kv;
}

static void test_cpu_staged(const char *dir)
{
	allm_backend_t *be = NULL;
	struct allm_err err = {{0}};
	struct allm_backend_opts bo = {.n_threads = 1};
	int32_t gpu[64], disk[64], back[64], ticket;
	struct allm_swap_result res;
	if (allm_backend_create("cpu", &bo, &be, NULL, 0, &err)) {
		CHECK(0, "cpu backend: %s", err.msg);
		return;
	}
	setenv("ALLM_KV_STAGED", "1", 1);
	struct allm_kv_cache *kv = cpu_cache(be, dir, NULL);
	if (!kv)
		goto out;
	CHECK(kv->staged && kv->stage, "ALLM_KV_STAGED=1 did not stage the CPU backend's disk I/O");

	/* out behind, in ahead: the blocks come back bit for bit */
	fill(kv, gpu, N);
	int32_t free0 = kv->gpu.n_free + N;
	CHECK(allm_kv_disk_behind_room(kv, N), "no room behind in an idle stage");
	CHECK(allm_kv_disk_out(kv, OWNER, gpu, N, disk, &res, &err) == 0, "disk out: %s", err.msg);
	CHECK(res.behind, "a staged swap-out with room did not go behind");
	CHECK(kv->gpu.n_free == free0, "the GPU blocks of a swap-out did not go back");
	for (int32_t i = 0; i < N; i++) /* what the device blocks held is gone */
		memset(dev_block(kv, gpu[i]), 0xab, kv->block_bytes);
	CHECK(allm_kv_disk_in_start(kv, OWNER, disk, N, back, &ticket, &err) == 0, "read ahead: %s", err.msg);
	CHECK(kv->n_ahead_free == kv->n_ahead_slots - N && kv->ahead_mem, "read ahead holds %d of %d slots",
	      kv->n_ahead_slots - kv->n_ahead_free, kv->n_ahead_slots);
	CHECK(allm_kv_disk_in_wait(kv, OWNER, disk, N, back, ticket, &res, &err) == 0, "wait: %s", err.msg);
	CHECK(bad_words(kv, back, N) == 0, "staged write behind + read ahead: %d words differ",
	      bad_words(kv, back, N));
	CHECK(kv->n_ahead_free == kv->n_ahead_slots && allm_kv_disk_blocks(kv)->n_free == 64,
	      "%d slots held, %d disk blocks free", kv->n_ahead_slots - kv->n_ahead_free,
	      allm_kv_disk_blocks(kv)->n_free);

	/* out again, in waited for (the staged synchronous path) */
	CHECK(allm_kv_disk_out(kv, OWNER, back, N, disk, &res, &err) == 0, "disk out: %s", err.msg);
	CHECK(allm_kv_disk_drain(kv->disk, NULL, 0) == 0, "drain");
	CHECK(allm_kv_disk_in(kv, OWNER, disk, N, gpu, &res, &err) == 0, "disk in: %s", err.msg);
	CHECK(bad_words(kv, gpu, N) == 0, "staged read: %d words differ", bad_words(kv, gpu, N));

	/* reads ahead hold at most the stage's size of host memory: past it, a
	 * read waits instead (-EAGAIN, nothing taken) */
	CHECK(allm_kv_disk_out(kv, OWNER, gpu, N, disk, &res, &err) == 0, "disk out: %s", err.msg);
	int32_t stage = allm_kv_disk_stage_blocks(kv->disk);
	CHECK(stage == 64 && kv->n_ahead_slots == stage, "a stage of %d blocks, %d for reads, for a 64-block pool "
	      "of 4 KiB blocks", stage, kv->n_ahead_slots);
	kv->n_ahead_free = N - 1; /* as if other reads held the rest */
	int32_t gfree = kv->gpu.n_free;
	CHECK(allm_kv_disk_in_start(kv, OWNER, disk, N, back, &ticket, &err) == -EAGAIN,
	      "a read ahead past the bound started");
	CHECK(kv->gpu.n_free == gfree, "a refused read ahead took GPU blocks");
	kv->n_ahead_free = kv->n_ahead_slots;
	CHECK(allm_kv_disk_in(kv, OWNER, disk, N, back, &res, &err) == 0, "disk in: %s", err.msg);
	CHECK(bad_words(kv, back, N) == 0, "%d words differ", bad_words(kv, back, N));
	release_gpu(kv, back, N);
	allm_kv_cache_free(kv);

	/* a read ahead that fails: the GPU blocks go back, the disk blocks stay */
	if (!(kv = cpu_cache(be, dir, "eio-read=1")))
		goto out;
	fill(kv, gpu, N);
	CHECK(allm_kv_disk_out(kv, OWNER, gpu, N, disk, &res, &err) == 0, "disk out: %s", err.msg);
	CHECK(allm_kv_disk_drain(kv->disk, NULL, 0) == 0, "drain"); /* from the file, not the stage */
	gfree = kv->gpu.n_free;
	CHECK(allm_kv_disk_in_start(kv, OWNER, disk, N, back, &ticket, &err) == 0, "read ahead: %s", err.msg);
	CHECK(allm_kv_disk_in_wait(kv, OWNER, disk, N, back, ticket, &res, &err) == -EIO,
	      "an injected EIO came back as success");
	CHECK(kv->gpu.n_free == gfree && allm_kv_disk_blocks(kv)->n_free == 64 - N &&
		      kv->n_ahead_free == kv->n_ahead_slots,
	      "after a failed read ahead: %d GPU free (want %d), %d disk free, %d slots held", kv->gpu.n_free,
	      gfree, allm_kv_disk_blocks(kv)->n_free, kv->n_ahead_slots - kv->n_ahead_free);
	allm_kv_disk_release(kv, OWNER, disk, N);
	allm_kv_cache_free(kv);
out:
	unsetenv("ALLM_KV_STAGED");
	allm_backend_destroy(be);
}

/* The simulated A800 with a 13B model's blocks (13.1 MB): its disk works beside
 * the device on one line. */
static void test_sim(void)
{
	allm_backend_t *be = NULL;
	struct allm_err err = {{0}};
	struct allm_kv_cache *kv = NULL;
	struct allm_kv_layout lay = {.n_layers = 40, .n_kv_heads = 40, .head_dim = 128, .block_size = 16,
				     .dtype = ALLM_DTYPE_F16};
	int32_t gpu[64], disk[64], back[64], ticket;
	struct allm_swap_result res;
	char note[256];
	if (allm_backend_create("sim:a800-pcie", &(struct allm_backend_opts){0}, &be, NULL, 0, &err) ||
	    allm_kv_cache_create(be, &lay, 64, 16, &kv, &err) ||
	    allm_kv_attach_disk(kv, "/nonexistent", 256, note, sizeof(note), &err)) {
		CHECK(0, "simulated KV cache with a disk tier: %s", err.msg);
		goto out;
	}
	CHECK(kv->staged, "a simulated device's disk I/O is not staged");
	int32_t n = 8;
	uint64_t bytes = (uint64_t)n * kv->block_bytes;
	double w = allm_backend_disk_seconds(be, true, bytes, 1), r = allm_backend_disk_seconds(be, false, bytes, 1);
	CHECK(w > 0.01 && r > 0.01, "the profile's disk: write %.4f s, read %.4f s for %d blocks", w, r, n);
	CHECK(allm_kv_disk_stage_blocks(kv->disk) == 32, "stage of %d blocks of 13 MB (want 32: WB_MIN_SLOTS)",
	      allm_kv_disk_stage_blocks(kv->disk));

	/* a write behind: the step pays the copies, the disk is busy a while */
	for (int32_t i = 0; i < n; i++)
		allm_block_pool_alloc(&kv->gpu, OWNER, &gpu[i]);
	double t0 = allm_backend_clock(be);
	CHECK(allm_kv_disk_out(kv, OWNER, gpu, n, disk, &res, &err) == 0, "disk out: %s", err.msg);
	double paid = allm_backend_clock(be) - t0;
	CHECK(res.behind && paid > 0 && paid < w / 2 && fabs(res.seconds - paid) < 1e-12,
	      "write behind: behind %d, the step paid %.4f s (reported %.4f) of a %.4f s write", res.behind, paid,
	      res.seconds, w);
	const struct allm_sim_disk_i *sd = allm_backend_sim_disk(be);
	CHECK(sd && sd->idle(be) >= t0 + w - 1e-9, "the disk idle at %.4f, before the write ends (%.4f)",
	      sd ? sd->idle(be) - t0 : NAN, w);
	CHECK(allm_kv_disk_behind_room(kv, 32 - n) && !allm_kv_disk_behind_room(kv, 32 - n + 1),
	      "the stage's %d slots in flight are not counted", n);

	/* read ahead at once: it queues behind the write; waited for with no step
	 * between, the caller waits for both and the copies back */
	CHECK(allm_kv_disk_in_start(kv, OWNER, disk, n, back, &ticket, &err) == 0, "read ahead: %s", err.msg);
	CHECK(allm_kv_disk_in_wait(kv, OWNER, disk, n, back, ticket, &res, &err) == 0, "wait: %s", err.msg);
	double now = allm_backend_clock(be);
	CHECK(now - t0 >= w + r - 1e-9 && res.disk.io_seconds >= r - 1e-9 && res.seconds >= r,
	      "read after write: %.4f s in all (write %.4f + read %.4f), the read's %.4f waited %.4f", now - t0, w, r,
	      res.disk.io_seconds, res.seconds);
	CHECK(allm_kv_disk_behind_room(kv, 32), "the stage is still busy after its writes landed");

	/* out, a step of 1 s, in ahead, a step of 1 s, wait: only the copies back */
	CHECK(allm_kv_disk_out(kv, OWNER, back, n, disk, &res, &err) == 0, "disk out: %s", err.msg);
	double h2d = res.seconds; /* the copies of as many bytes, the other way */
	allm_backend_clock_wait_until(be, allm_backend_clock(be) + 1.0);
	CHECK(allm_kv_disk_in_start(kv, OWNER, disk, n, gpu, &ticket, &err) == 0, "read ahead: %s", err.msg);
	allm_backend_clock_wait_until(be, allm_backend_clock(be) + 1.0);
	CHECK(allm_kv_disk_in_wait(kv, OWNER, disk, n, gpu, ticket, &res, &err) == 0, "wait: %s", err.msg);
	CHECK(res.seconds < r / 2 && res.seconds < 4 * h2d && res.disk.io_seconds >= r - 1e-9,
	      "a read ahead a step outlasted cost the caller %.4f s (read %.4f, copies ~%.4f), its own time %.4f",
	      res.seconds, r, h2d, res.disk.io_seconds);

	/* a write that waits (calibration's) queues behind what is on the line */
	CHECK(allm_kv_disk_out(kv, OWNER, gpu, n, disk, &res, &err) == 0, "disk out: %s", err.msg);
	allm_kv_disk_release(kv, OWNER, disk, n);
	double idle = sd ? sd->idle(be) : NAN;
	t0 = allm_backend_clock(be);
	double sync = allm_kv_time_disk(kv, ALLM_DISK_WRITE, n, 1);
	CHECK(idle > t0 && sync >= idle - t0 + w - 1e-9, "a waited write took %.4f s behind %.4f s of a write behind",
	      sync, idle - t0);
out:
	allm_kv_cache_free(kv);
	allm_backend_destroy(be);
}

int main(void)
{
	char dir[] = "/tmp/allm-kvstaged-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_cpu_staged(dir);
	test_sim();
	rmdir(dir);
	if (n_fail) {
		fprintf(stderr, "%d checks failed\n", n_fail);
		return 1;
	}
	printf("staged disk tier checks passed\n");
	return 0;
}
