/* The VMM arena of the CUDA backend (DESIGN §5c, elastic memory): a device
 * allocation of alloc() from a chunk up is a virtual range reserved whole
 * (cuMemAddressReserve) and backed by physical chunks of the allocation
 * granularity (cuMemCreate + cuMemMap + cuMemSetAccess), one handle per chunk,
 * so the pages op can give any chunk back (cuMemUnmap + cuMemRelease) and back
 * it again later without moving the allocation: the KV pool's retired blocks
 * and the scratch past a step's need return their memory to the device, and
 * the other side of the elastic line maps it. The engine's two elastic
 * allocations (the KV pool, reserved for the whole budget's blocks, and the
 * scratch, reserved for the largest step) are two such ranges; what flows
 * between them is physical chunks, so one range per allocation is enough (a
 * single reservation would need an address allocator here for nothing).
 *
 * The driver API comes through cudart's cudaGetDriverEntryPointByVersion: the
 * module links static cudart and never -lcuda (meson.build), so it keeps
 * loading only where a driver answers. Where the device lacks VMM
 * (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0), the entry
 * points are missing, or ALLM_CUDA_VMM=0 asks for it, every allocation is a
 * cudaMalloc as before and pages() answers -ENOTSUP: elastic memory then keeps
 * the pool's memory whole (the engine's split is bookkeeping, as on the
 * simulated device), and describe() says so. */
#include "cuda-backend.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdio.h>
#include <stdlib.h>

/* One chunk of a range: backed or not. */
struct vmm_chunk {
	CUmemGenericAllocationHandle h; /* valid while mapped */
	bool mapped;
};

/* One allocation of the arena. */
struct vmm_range {
	CUdeviceptr base; /* reserved, chunk-aligned */
	size_t bytes; /* asked by alloc() */
	size_t n_chunks; /* reserved: n_chunks * chunk bytes */
	struct vmm_chunk *c; /* [n_chunks] */
};

struct cuda_vmm {
	size_t chunk; /* the allocation granularity (2 MiB on current GPUs) */
	CUmemAllocationProp prop; /* pinned device memory of this device */
	CUmemAccessDesc access; /* read-write for this device */
	struct vmm_range *v; /* live ranges, unordered */
	int32_t n, cap;
	size_t mapped; /* bytes of chunks backed now, every range */
	PFN_cuMemAddressReserve_v10020 reserve;
	PFN_cuMemAddressFree_v10020 addr_free;
	PFN_cuMemCreate_v10020 create;
	PFN_cuMemRelease_v10020 release;
	PFN_cuMemMap_v10020 map;
	PFN_cuMemUnmap_v10020 unmap;
	PFN_cuMemSetAccess_v10020 set_access;
	PFN_cuMemGetAllocationGranularity_v10020 granularity;
	PFN_cuGetErrorName_v6000 error_name;
};

#define VMM(be) (CUDA_CTX(be)->vmm)

/* A failed driver call as -errno, "cuda vmm: <call> at line: <name>" in last_err. */
static int drv_fail(allm_backend_t *be, CUresult r, const char *what, int line)
{
	const char *name = NULL;
	struct cuda_vmm *m = VMM(be);
	if (m && m->error_name)
		m->error_name(r, &name);
	int e = r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : r == CUDA_ERROR_NOT_SUPPORTED ? -ENOTSUP
			: r == CUDA_ERROR_INVALID_VALUE ? -EINVAL : -EIO;
	return allm_err_set(&be->last_err, e, "cuda vmm: %s at cuda-vmm.c:%d: %s (%d)", what, line,
			    name ? name : "?", (int)r);
}

#define DRV(be, call) \
	do { \
		CUresult r_ = (call); \
		if (r_ != CUDA_SUCCESS) \
			return drv_fail((be), r_, #call, __LINE__); \
	} while (0)

static int entry(const char *sym, void **fn)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	/* the ABI of CUDA 12.0: these calls have not changed since 10.2 */
	if (cudaGetDriverEntryPointByVersion(sym, fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess || !*fn) {
		(void)cudaGetLastError();
		return -ENOSYS;
	}
	return 0;
}

int allm_cuda_vmm_init(allm_backend_t *be, int dev, bool no_vmm, char *why, size_t why_len)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	PFN_cuDeviceGet_v2000 device_get = NULL;
	PFN_cuDeviceGetAttribute_v2000 attr = NULL;
	CUdevice d;
	int supported = 0;
	if (no_vmm) {
		snprintf(why, why_len, "ALLM_CUDA_VMM=0");
		return 0;
	}
	struct cuda_vmm *m = allm_calloc(1, sizeof(*m));
	if (!m)
		return allm_err_set(&be->last_err, -ENOMEM, "cuda vmm: out of memory");
	if (entry("cuDeviceGet", (void **)&device_get) || entry("cuDeviceGetAttribute", (void **)&attr) ||
	    entry("cuMemAddressReserve", (void **)&m->reserve) ||
	    entry("cuMemAddressFree", (void **)&m->addr_free) || entry("cuMemCreate", (void **)&m->create) ||
	    entry("cuMemRelease", (void **)&m->release) || entry("cuMemMap", (void **)&m->map) ||
	    entry("cuMemUnmap", (void **)&m->unmap) || entry("cuMemSetAccess", (void **)&m->set_access) ||
	    entry("cuMemGetAllocationGranularity", (void **)&m->granularity) ||
	    entry("cuGetErrorName", (void **)&m->error_name)) {
		snprintf(why, why_len, "the driver lacks the VMM entry points");
		allm_free(m);
		return 0;
	}
	if (device_get(&d, dev) != CUDA_SUCCESS ||
	    attr(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d) != CUDA_SUCCESS ||
	    !supported) {
		snprintf(why, why_len, "the device does not support VMM");
		allm_free(m);
		return 0;
	}
	m->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	m->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	m->prop.location.id = d;
	m->access.location = m->prop.location;
	m->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CUresult r = m->granularity(&m->chunk, &m->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS || !m->chunk) {
		snprintf(why, why_len, "no allocation granularity (%d)", (int)r);
		allm_free(m);
		return 0;
	}
	c->vmm = m;
	snprintf(why, why_len, "VMM, %zu KiB pages", m->chunk >> 10);
	return 0;
}

static struct vmm_range *find(struct cuda_vmm *m, uintptr_t p)
{
	for (int32_t i = 0; i < m->n; i++)
		if (p >= m->v[i].base && p < m->v[i].base + m->v[i].n_chunks * m->chunk)
			return &m->v[i];
	return NULL;
}

/* The queued compute and copies finish before a chunk goes: an op still
 * reading it would fault. */
static int quiesce(allm_backend_t *be)
{
	struct cuda_ctx *c = CUDA_CTX(be);
	CUDA_CHECK(be, cudaStreamSynchronize(c->compute));
	CUDA_CHECK(be, cudaStreamSynchronize(c->copy));
	return 0;
}

static int unmap_chunk(allm_backend_t *be, struct vmm_range *g, size_t i)
{
	struct cuda_vmm *m = VMM(be);
	if (!g->c[i].mapped)
		return 0;
	DRV(be, m->unmap(g->base + i * m->chunk, m->chunk));
	g->c[i].mapped = false;
	m->mapped -= m->chunk;
	DRV(be, m->release(g->c[i].h));
	return 0;
}

/* Access for chunks [i, run) of g, just mapped, and zeros in them on the
 * compute stream, which the copy stream then waits for: every later op or
 * swap reads zero there, as on fresh host pages, never the old contents. */
static int open_chunks(allm_backend_t *be, struct vmm_range *g, size_t i, size_t run)
{
	struct cuda_vmm *m = VMM(be);
	struct cuda_ctx *c = CUDA_CTX(be);
	CUdeviceptr at = g->base + i * m->chunk;
	size_t len = (run - i) * m->chunk;
	DRV(be, m->set_access(at, len, &m->access, 1));
	CUDA_CHECK(be, cudaMemsetAsync((void *)(uintptr_t)at, 0, len, c->compute));
	CUDA_CHECK(be, cudaEventRecord(c->compute_mark, c->compute));
	CUDA_CHECK(be, cudaStreamWaitEvent(c->copy, c->compute_mark, 0));
	return 0;
}

/* Backs chunks [first, end) of g that are not: each its own handle (so each
 * can go alone), access set on every run of them at once. */
static int map_chunks(allm_backend_t *be, struct vmm_range *g, size_t first, size_t end)
{
	struct cuda_vmm *m = VMM(be);
	for (size_t i = first; i < end;) {
		if (g->c[i].mapped) {
			i++;
			continue;
		}
		size_t run = i;
		int r = 0;
		for (; run < end && !g->c[run].mapped; run++) {
			CUdeviceptr at = g->base + run * m->chunk;
			CUmemGenericAllocationHandle h;
			CUresult e = m->create(&h, m->chunk, &m->prop, 0);
			if (e != CUDA_SUCCESS) {
				r = drv_fail(be, e, "cuMemCreate", __LINE__);
				break;
			}
			if ((e = m->map(at, m->chunk, 0, h, 0)) != CUDA_SUCCESS) {
				m->release(h);
				r = drv_fail(be, e, "cuMemMap", __LINE__);
				break;
			}
			g->c[run].h = h;
			g->c[run].mapped = true;
			m->mapped += m->chunk;
		}
		/* what was mapped before a failure is opened too: a mapped chunk
		 * without access would fault at its first use */
		int o = run > i ? open_chunks(be, g, i, run) : 0;
		if (r || o)
			return r ? r : o;
		i = run;
	}
	return 0;
}

/* Gives every chunk of g back and its address range; the ranges array keeps
 * its other entries. */
static int range_drop(allm_backend_t *be, struct vmm_range *g)
{
	struct cuda_vmm *m = VMM(be);
	int r = 0;
	for (size_t i = 0; i < g->n_chunks; i++) {
		int e = unmap_chunk(be, g, i);
		r = r ? r : e;
	}
	if (g->base) {
		CUresult e = m->addr_free(g->base, g->n_chunks * m->chunk);
		if (e != CUDA_SUCCESS && !r)
			r = drv_fail(be, e, "cuMemAddressFree", __LINE__);
	}
	allm_free(g->c);
	*g = m->v[--m->n];
	return r;
}

int allm_cuda_vmm_alloc(allm_backend_t *be, size_t bytes, void **ret_ptr)
{
	struct cuda_vmm *m = VMM(be);
	if (!m || bytes < m->chunk)
		return -ENOTSUP; /* a cudaMalloc: its pages never move */
	if (m->n == m->cap) {
		int32_t cap = ALLM_MAX(8, m->cap * 2);
		struct vmm_range *v = allm_realloc(m->v, (size_t)cap * sizeof(*v));
		if (!v)
			return allm_err_set(&be->last_err, -ENOMEM, "cuda vmm: out of memory");
		m->v = v;
		m->cap = cap;
	}
	size_t n = bytes / m->chunk + (bytes % m->chunk != 0);
	struct vmm_chunk *chunks = allm_calloc(n, sizeof(*chunks));
	if (!chunks)
		return allm_err_set(&be->last_err, -ENOMEM, "cuda vmm: out of memory");
	struct vmm_range *g = &m->v[m->n++];
	*g = (struct vmm_range){.bytes = bytes, .n_chunks = n, .c = chunks};
	int r;
	CUresult e = m->reserve(&g->base, g->n_chunks * m->chunk, m->chunk, 0, 0);
	if (e != CUDA_SUCCESS) {
		g->base = 0;
		r = drv_fail(be, e, "cuMemAddressReserve", __LINE__);
		goto fail;
	}
	if ((r = map_chunks(be, g, 0, g->n_chunks)))
		goto fail;
	*ret_ptr = (void *)(uintptr_t)g->base;
	return 0;
fail:
	range_drop(be, g); /* the first error is the one to report */
	return r == -ENOTSUP ? -ENOMEM : r;
}

bool allm_cuda_vmm_free(allm_backend_t *be, void *ptr)
{
	struct cuda_vmm *m = VMM(be);
	struct vmm_range *g = m ? find(m, (uintptr_t)ptr) : NULL;
	if (!g)
		return false;
	/* as cudaFree: no op still reads it */
	(void)quiesce(be);
	(void)range_drop(be, g);
	return true;
}

void allm_cuda_vmm_fini(allm_backend_t *be)
{
	struct cuda_vmm *m = VMM(be);
	if (!m)
		return;
	while (m->n)
		(void)range_drop(be, &m->v[m->n - 1]);
	allm_free(m->v);
	allm_free(m);
	CUDA_CTX(be)->vmm = NULL;
}

size_t allm_cuda_vmm_mapped(allm_backend_t *be)
{
	return VMM(be) ? VMM(be)->mapped : 0;
}

int allm_cuda_vmm_pages(allm_backend_t *be, void *ptr, size_t bytes, enum allm_pages_verb verb,
			size_t *ret_bytes)
{
	struct cuda_vmm *m = VMM(be);
	uintptr_t lo = (uintptr_t)ptr, hi = lo + bytes;
	struct vmm_range *g = m ? find(m, lo) : NULL;
	if (!g)
		return allm_err_set(&be->last_err, -ENOTSUP, "cuda: %p is no allocation of the VMM arena "
				    "(a cudaMalloc: its pages cannot move)", ptr);
	if (hi < lo || hi > g->base + g->bytes)
		return allm_err_set(&be->last_err, -EINVAL, "cuda vmm: range of %zu bytes at %p "
				    "runs past its allocation", bytes, ptr);
	size_t C = m->chunk, off = lo - g->base;
	size_t in0, in1, ov0, ov1;
	allm_pages_span(off, bytes, g->bytes, C, &in0, &in1, &ov0, &ov1);
	int r;
	switch (verb) {
	case ALLM_PAGES_SIZE:
		*ret_bytes = C;
		return 0;
	case ALLM_PAGES_RETURN:
		if (in1 <= in0)
			return 0;
		if ((r = quiesce(be)))
			return r;
		for (size_t i = in0; i < in1; i++)
			if ((r = unmap_chunk(be, g, i)))
				return r;
		return 0;
	case ALLM_PAGES_MAP:
		return map_chunks(be, g, ov0, ov1);
	case ALLM_PAGES_RESIDENT: {
		size_t n = 0;
		for (size_t i = ov0; i < ov1; i++)
			n += g->c[i].mapped;
		*ret_bytes = n * C;
		return 0;
	}
	}
	return allm_err_set(&be->last_err, -EINVAL, "cuda vmm: unknown pages verb %d", (int)verb);
}
