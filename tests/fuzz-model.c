/* Description: libFuzzer target over a model directory a user may be handed (engined/model): config.json and model.safetensors, loaded onto the CPU backend as allm-engined --model does. The input is a flags byte (bits 0-1: the storage dtype asked for: f32, f16, bf16, q8_0) and the two files separated by the 4 bytes "\n\0\1\n" (a missing part: no such file). The config loader, the safetensors index and the whole model load must each succeed or fail with a negative errno and a message; a load that succeeds must hold every tensor; nothing may crash, leak, read past a file or allocate for a tensor the file does not hold. */
#include "backend.h"
#include "model-config.h"
#include "model.h"
#include "safetensors.h"

#include "fuzz-parts.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

static void refused(int r, const struct allm_err *err)
{
	if (r >= 0 || !err->msg[0])
		abort(); /* a failure must say why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static allm_backend_t *be;
	static const enum allm_dtype dtypes[] = {ALLM_DTYPE_F32, ALLM_DTYPE_F16, ALLM_DTYPE_BF16, ALLM_DTYPE_Q8_0};
	struct allm_err err = {0};
	if (!be) {
		struct allm_backend_opts bo = {.n_threads = 1};
		if (allm_backend_cpu_create(&bo, &be, &err))
			abort();
	}
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1, *end = data + size;
	static const char *const names[] = {"config.json", "model.safetensors"};
	struct allm_vfile files[2];
	size_t n_files = fuzz_files(&p, end, names, 2, files);
	struct allm_vdir dir = {"<fuzz>", files, n_files};

	struct allm_model_config c;
	int r = allm_model_config_load_from(&dir, &c, &err);
	if (r)
		refused(r, &err);
	struct allm_st_index *idx = NULL;
	memset(&err, 0, sizeof(err));
	if ((r = allm_st_open_from(&dir, &idx, &err)))
		refused(r, &err);
	allm_st_close(idx);

	struct allm_model_load_opts o = {.wdtype = dtypes[data[0] & 3]};
	struct allm_model *m = NULL;
	memset(&err, 0, sizeof(err));
	r = allm_model_load_from(be, &dir, &o, &m, &err);
	if (r) {
		refused(r, &err);
		if (m)
			abort();
		return 0;
	}
	/* a loaded model holds every tensor its config implies */
	struct allm_weight_spec *specs = NULL;
	size_t n = 0;
	if (allm_model_weight_specs(m, &specs, &n) == 0) {
		for (size_t i = 0; i < n; i++)
			if (!*specs[i].slot)
				abort();
		allm_free(specs);
	}
	allm_model_free(m);
	return 0;
}
