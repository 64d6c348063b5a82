/* Description: libFuzzer target over the two JSON profiles the engine reads at start: the predictor profile it saved in the user's cache directory (engined/sched/predictor-profile.c; a file that was truncated, edited or written by another version must mean "recalibrate", never a crash or a nonsense prediction) and a simulated device's profile (kernels/sim/sim-profile.c, --device sim:FILE.json). Bit 0 of the first byte picks which; the rest is the file. A predictor profile loads (then every prediction is a finite, non-negative time) or is refused with -EINVAL/-ESTALE/-ENOENT and a message, leaving the predictor as it was; a sim profile parses or is refused with a message. */
#include "predictor.h"
#include "sim/sim-profile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

/* The key of the seed profiles (a real one, as allm-engined saved it for the
 * embedded model on this machine kind). */
static const struct allm_predictor_key key = {
	.model = "<embedded>/stories260K",
	.device = "cpu (2 threads, gemm: avx512-bf16)",
	.dtype = "f32",
	.n_layers = 5,
	.hidden = 64,
	.block_size = 16,
	.block_bytes = 20480,
	.threads = 0,
};

static char path[96];

static bool sane(double s)
{
	return isfinite(s) && s >= 0;
}

static void check_predictions(const struct allm_predictor *p)
{
	for (int64_t n = 1; n <= 4096; n *= 4) {
		struct allm_prefill_shape s = {.n_seqs = 2, .tokens = 2 * n, .tokens_sq = 2.0 * (double)n * (double)n};
		if (!sane(allm_predict_recompute(p, n)) || !sane(allm_predict_prefill(p, &s)) ||
		    !sane(allm_predict_recompute_marginal(p, n)))
			abort();
		for (int dir = 0; dir < 2; dir++)
			if (!sane(allm_predict_swap(p, dir, (uint64_t)n * key.block_bytes, 1)) ||
			    !sane(allm_predict_disk(p, dir, (uint64_t)n * key.block_bytes, 2)))
				abort();
	}
}

/* The private directory the inputs are written to, removed at exit. */
static char fuzz_dir[48];

static void remove_dir(void)
{
	rmdir(fuzz_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct allm_err err = {0};
	if (size < 1)
		return 0;
	if (!(data[0] & 1)) {
		struct allm_sim_profile *sp = NULL;
		int r = allm_sim_profile_parse((const char *)data + 1, size - 1, "<fuzz>", &sp, &err);
		if (r ? r >= 0 || !err.msg[0] || sp : !sp)
			abort();
		allm_sim_profile_free(sp);
		return 0;
	}
	if (!path[0]) {
		/* tmpfs when there is one: the file is rewritten for every input; in a
		 * directory of our own (profiles are read only from private ones) */
		snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/allm-fuzz-profile-XXXXXX",
			 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(fuzz_dir))
			abort();
		atexit(remove_dir);
		snprintf(path, sizeof(path), "%s/profile.json", fuzz_dir);
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	close(fd);
	struct allm_predictor *p = NULL;
	if (allm_predictor_create(&key, &p))
		return 0; /* out of memory */
	int r = allm_predictor_load(p, path, &err);
	if (r) {
		if ((r != -EINVAL && r != -ESTALE && r != -ENOENT && r != -EFBIG && r != -ENOMEM) || !err.msg[0])
			abort();
	}
	check_predictions(p); /* loaded, or as it was: the built-in defaults */
	allm_predictor_free(p);
	unlink(path);
	return 0;
}
