/* Description: the backend's pages op (backend.h, version 5; elastic memory's
 * map/unmap of a range of one allocation) on cpu, sim:h100-sxm, cuda (the VMM
 * arena) and cuda-novmm (ALLM_CUDA_VMM=0: the cudaMalloc fallback answers
 * -ENOTSUP and the description says elastic memory keeps one pool): an
 * allocation of 8.5 pages, written whole, gives back exactly the pages wholly
 * inside a returned range (resident bytes drop by them, the device's free
 * memory grows on CUDA), keeps the data of every other page, maps them again
 * zero-filled, takes a kernel's write there, gives back the partial last chunk
 * when a range reaches the allocation's end (cuda, sim), refuses a range past
 * its allocation, and frees with nothing left behind. Exit 77 without a GPU. */
#include "backend.h"
#include "../test-check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t resident(allm_backend_t *be, void *p, size_t n)
{
	size_t r = (size_t)-1;
	int e = allm_backend_pages(be, p, n, ALLM_PAGES_RESIDENT, &r);
	CHECK(e == 0, "resident: %d %s", e, allm_backend_last_error(be));
	return r;
}

static allm_backend_t *create(const char *which)
{
	struct allm_err err = {{0}};
	static struct allm_backend_env env;
	allm_backend_env_read(&env);
	struct allm_backend_opts o = {.n_threads = 1, .env = &env};
	allm_backend_t *be = NULL;
	bool cuda = !strncmp(which, "cuda", 4);
	if (!strcmp(which, "cuda-novmm"))
		env.cuda_no_vmm = true; /* what ALLM_CUDA_VMM=0 sets */
	int r = !strcmp(which, "cpu") ? allm_backend_cpu_create(&o, &be, &err)
		: allm_backend_create(cuda ? "cuda" : "sim:h100-sxm", &o, &be, NULL, 0, &err);
	if (r && cuda && (r == -ENODEV || r == -ENOSYS)) {
		printf("SKIP: %s\n", err.msg);
		exit(77);
	}
	if (r) {
		fprintf(stderr, "FAIL: backend %s: %s\n", which, err.msg);
		exit(1);
	}
	return be;
}

/* The cudaMalloc fallback: no pages op for any allocation, said once. */
static void novmm(allm_backend_t *be)
{
	void *p = NULL;
	size_t ps = 0;
	CHECK(be->iface->alloc(be, (size_t)64 << 20, &p) == 0, "alloc: %s", allm_backend_last_error(be));
	CHECK(allm_backend_pages(be, p, 4096, ALLM_PAGES_SIZE, &ps) == -ENOTSUP, "pages op on a cudaMalloc");
	CHECK(strstr(be->iface->describe(be), "one cudaMalloc pool") != NULL, "description: %s",
	      be->iface->describe(be));
	printf("%s\n", be->iface->describe(be));
	be->iface->free(be, p);
}

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "cpu";
	allm_backend_t *be = create(which);
	const struct allm_backend_i *B = be->iface;
	if (!strcmp(which, "cuda-novmm")) {
		novmm(be);
		allm_backend_destroy(be);
		return n_fail ? 1 : 0;
	}
	bool cuda = !strcmp(which, "cuda"), sim = be->simulated, data = !sim;
	size_t P = 0;
	void *small = NULL;
	/* what a page is; the CPU's is the host's */
	CHECK(B->alloc(be, 4096, &small) == 0, "small alloc");
	int r = allm_backend_pages(be, small, 16, ALLM_PAGES_SIZE, &P);
	if (cuda) /* below a chunk: a cudaMalloc, whose pages never move */
		CHECK(r == -ENOTSUP, "a 4 KiB allocation answered %d", r);
	B->free(be, small);
	/* the page size from a probe big enough for the arena */
	char *p = NULL;
	CHECK(B->alloc(be, (size_t)64 << 20, (void **)&p) == 0, "alloc: %s", allm_backend_last_error(be));
	CHECK(allm_backend_pages(be, p, 1, ALLM_PAGES_SIZE, &P) == 0 && P > 0, "page size: %s",
	      allm_backend_last_error(be));
	B->free(be, p);
	if (n_fail || !P)
		return 1;
	size_t free_start = 0, total = 0;
	B->mem_info(be, &free_start, &total);
	size_t bytes = 8 * P + P / 2; /* 8.5 of this backend's pages */
	CHECK(B->alloc(be, bytes, (void **)&p) == 0, "alloc: %s", allm_backend_last_error(be));
	if (n_fail)
		return 1;
	size_t n_pages = 9, nf = bytes / sizeof(float);
	printf("%s: page %zu bytes, %zu-byte allocation (%s)\n", which, P, bytes, B->describe(be));

	float *host = malloc(bytes), *back = malloc(bytes);
	if (!host || !back)
		return 1;
	for (size_t i = 0; i < nf; i++)
		host[i] = (float)(i % 65521) + 0.5f;
	if (data)
		CHECK(B->upload(be, p, host, bytes) == 0, "upload");
	CHECK(resident(be, p, bytes) == n_pages * P, "written whole: %zu of %zu", resident(be, p, bytes), n_pages * P);

	/* give back [P/2, 3P + P/2): pages 1 and 2 lie wholly inside */
	size_t free0 = 0, free1 = 0;
	B->mem_info(be, &free0, &total);
	CHECK(allm_backend_pages(be, p + P / 2, 3 * P, ALLM_PAGES_RETURN, NULL) == 0, "return: %s",
	      allm_backend_last_error(be));
	B->mem_info(be, &free1, &total);
	CHECK(resident(be, p, bytes) == (n_pages - 2) * P, "after return: %zu", resident(be, p, bytes));
	CHECK(resident(be, p + P, 2 * P) == 0, "returned pages still mapped");
	CHECK(resident(be, p + P / 2, 1) == P, "page 0 (partly in the range) went");
	CHECK(resident(be, p + 3 * P, 1) == P, "page 3 (partly in the range) went");
	if (cuda) /* the chunks went back to the device */
		CHECK(free1 >= free0 + 2 * P, "device free memory %zu -> %zu", free0, free1);
	if (data) { /* every page not returned kept its data */
		/* the parts only: a copy over unmapped chunks would fault on CUDA */
		CHECK(B->download(be, back, p, P) == 0, "download page 0");
		CHECK(B->download(be, (char *)back + 3 * P, p + 3 * P, bytes - 3 * P) == 0, "download the rest");
		CHECK(!memcmp(back, host, P), "page 0 lost its data");
		CHECK(!memcmp((char *)back + 3 * P, (char *)host + 3 * P, bytes - 3 * P), "pages 3.. lost their data");
	}

	/* map [P + 10, 2P + 10) again: pages 1 and 2, zero-filled */
	CHECK(allm_backend_pages(be, p + P + 10, P, ALLM_PAGES_MAP, NULL) == 0, "map: %s",
	      allm_backend_last_error(be));
	if (!cuda && !sim) /* the CPU maps at the first touch */
		CHECK(resident(be, p, bytes) == (n_pages - 2) * P, "the CPU mapped ahead of a touch");
	else
		CHECK(resident(be, p, bytes) == n_pages * P, "after map: %zu", resident(be, p, bytes));
	if (data) {
		CHECK(B->download(be, back, p + P, 2 * P) == 0, "download the remapped pages");
		size_t nz = 0;
		for (size_t i = 0; i < 2 * P / sizeof(float); i++)
			nz += back[i] != 0.0f;
		CHECK(nz == 0, "%zu non-zero floats in pages mapped anew", nz);
		/* a kernel writes there: y = 2x over pages 1 and 2, x from page 4.. */
		size_t n = 2 * P / sizeof(float);
		CHECK(B->scale(be, (float *)(p + P), (const float *)(p + 4 * P), 2.0f, (int64_t)n) == 0,
		      "scale into the remapped pages: %s", allm_backend_last_error(be));
		CHECK(B->synchronize(be) == 0, "synchronize: %s", allm_backend_last_error(be));
		CHECK(B->download(be, back, p + P, 2 * P) == 0, "download");
		size_t bad = 0;
		for (size_t i = 0; i < n; i++)
			bad += back[i] != 2.0f * host[4 * P / sizeof(float) + i];
		CHECK(bad == 0, "%zu floats wrong after a kernel wrote the remapped pages", bad);
		CHECK(resident(be, p, bytes) == n_pages * P, "written again: %zu", resident(be, p, bytes));
	}

	/* a range reaching the allocation's end takes its partial last chunk
	 * (cuda, sim: the arena knows the allocation; the CPU keeps that page) */
	CHECK(allm_backend_pages(be, p + 8 * P, bytes - 8 * P, ALLM_PAGES_RETURN, NULL) == 0, "return the tail");
	CHECK(resident(be, p, bytes) == (cuda || sim ? n_pages - 1 : n_pages) * P, "tail: %zu", resident(be, p, bytes));
	if (cuda || sim) {
		size_t x;
		CHECK(allm_backend_pages(be, p + 8 * P, bytes, ALLM_PAGES_RESIDENT, &x) == -EINVAL,
		      "a range past the allocation was accepted");
	}
	/* everything back, then freed: the device's memory returns to where it was */
	CHECK(allm_backend_pages(be, p, bytes, ALLM_PAGES_RETURN, NULL) == 0, "return all");
	CHECK(resident(be, p, bytes) == (cuda || sim ? 0 : P), "all returned: %zu", resident(be, p, bytes));
	CHECK(allm_backend_pages(be, p, bytes, ALLM_PAGES_MAP, NULL) == 0, "map all");
	B->free(be, p);
	if (cuda) { /* nothing left behind (a chunk's worth of slack for the driver's own) */
		size_t free2 = 0;
		B->mem_info(be, &free2, &total);
		CHECK(free2 + P >= free_start, "device free memory %zu before the allocation, %zu after its free",
		      free_start, free2);
	}
	free(host);
	free(back);
	allm_backend_destroy(be);
	if (n_fail)
		fprintf(stderr, "%d n_fail\n", n_fail);
	else
		printf("%s: pages op ok\n", which);
	return n_fail ? 1 : 0;
}
