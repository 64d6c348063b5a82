/* Description: the environment's switches are read in one place each and map to their fields: allm_backend_env_read (kernels/backend.h: ALLM_CUDA_MODULE, ALLM_CUDA_SMEM_OPTIN, ALLM_CUDA_VMM, ALLM_OPENBLAS, ALLM_QB_SCALES, ALLM_QB_R8) and allm_kv_env_read's ALLM_NO_IO_URING (which the model loader takes too): each variable set alone sets its field and nothing else, unset or an unknown value leaves the default, so a typo in a name or a value fails here (docs/USAGE.md, "Environment variables"). */
#include "backend.h"
#include "kv-disk.h"
#include "test-check.h"

#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"ALLM_CUDA_MODULE", "ALLM_CUDA_SMEM_OPTIN", "ALLM_CUDA_VMM",
				    "ALLM_OPENBLAS",    "ALLM_QB_SCALES",       "ALLM_QB_R8",
				    "ALLM_NO_IO_URING"};

static void clear(void)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unsetenv(names[i]);
}

/* The environment with only name=value set, read. */
static struct allm_backend_env with(const char *name, const char *value)
{
	struct allm_backend_env e;
	clear();
	if (name)
		setenv(name, value, 1);
	memset(&e, 0x5a, sizeof(e)); /* every field must be written */
	allm_backend_env_read(&e);
	return e;
}

static bool is_default(const struct allm_backend_env *e)
{
	return !e->cuda_module && !e->cuda_smem_optin && !e->cuda_no_vmm && !e->openblas &&
	       !e->qb_scales && !e->qb_r8_off;
}

int main(void)
{
	struct allm_backend_env e = with(NULL, NULL);
	CHECK(is_default(&e), "nothing set: the defaults");

	e = with("ALLM_CUDA_MODULE", "/x/liballm-cuda.so");
	CHECK(e.cuda_module && !strcmp(e.cuda_module, "/x/liballm-cuda.so"), "cuda_module");
	e.cuda_module = NULL;
	CHECK(is_default(&e), "ALLM_CUDA_MODULE sets cuda_module only");
	e = with("ALLM_CUDA_MODULE", "");
	CHECK(is_default(&e), "ALLM_CUDA_MODULE empty: the search");

	e = with("ALLM_CUDA_SMEM_OPTIN", "101376");
	CHECK(e.cuda_smem_optin == 101376, "cuda_smem_optin %d", e.cuda_smem_optin);
	e.cuda_smem_optin = 0;
	CHECK(is_default(&e), "ALLM_CUDA_SMEM_OPTIN sets cuda_smem_optin only");
	e = with("ALLM_CUDA_SMEM_OPTIN", "-5");
	CHECK(is_default(&e), "ALLM_CUDA_SMEM_OPTIN=-5: the device's");

	e = with("ALLM_CUDA_VMM", "0");
	CHECK(e.cuda_no_vmm, "ALLM_CUDA_VMM=0: cuda_no_vmm");
	e.cuda_no_vmm = false;
	CHECK(is_default(&e), "ALLM_CUDA_VMM sets cuda_no_vmm only");
	e = with("ALLM_CUDA_VMM", "1");
	CHECK(is_default(&e), "ALLM_CUDA_VMM=1: VMM");

	e = with("ALLM_OPENBLAS", "libc.so.6");
	CHECK(e.openblas && !strcmp(e.openblas, "libc.so.6"), "openblas");
	e.openblas = NULL;
	CHECK(is_default(&e), "ALLM_OPENBLAS sets openblas only");

	e = with("ALLM_QB_SCALES", "gather");
	CHECK(e.qb_scales == 1, "ALLM_QB_SCALES=gather: %d", e.qb_scales);
	e = with("ALLM_QB_SCALES", "loads");
	CHECK(e.qb_scales == 2, "ALLM_QB_SCALES=loads: %d", e.qb_scales);
	e.qb_scales = 0;
	CHECK(is_default(&e), "ALLM_QB_SCALES sets qb_scales only");
	e = with("ALLM_QB_SCALES", "gathr");
	CHECK(is_default(&e), "ALLM_QB_SCALES=gathr: measured");

	e = with("ALLM_QB_R8", "off");
	CHECK(e.qb_r8_off, "ALLM_QB_R8=off: qb_r8_off");
	e.qb_r8_off = false;
	CHECK(is_default(&e), "ALLM_QB_R8 sets qb_r8_off only");
	e = with("ALLM_QB_R8", "on");
	CHECK(is_default(&e), "ALLM_QB_R8=on: the r8 items");

	/* the loader's switch comes from the KV tier's reading of the same variable */
	struct allm_kv_env kv;
	clear();
	setenv("ALLM_NO_IO_URING", "1", 1);
	allm_kv_env_read(&kv);
	CHECK(kv.no_io_uring, "ALLM_NO_IO_URING=1: no_io_uring");
	setenv("ALLM_NO_IO_URING", "0", 1);
	allm_kv_env_read(&kv);
	CHECK(!kv.no_io_uring, "ALLM_NO_IO_URING=0: io_uring");
	e = with("ALLM_NO_IO_URING", "1");
	CHECK(is_default(&e), "ALLM_NO_IO_URING is not a backend switch");
	clear();
	if (n_fail)
		return 1;
	printf("backend-env: every variable maps to its field\n");
	return 0;
}
