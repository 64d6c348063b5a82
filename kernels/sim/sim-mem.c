/* The simulated device's memory map: allocations are bookkeeping. Large ones are
 * PROT_NONE reservations (address space, no pages: a 26 GB model "loads" at once
 * and any stray touch faults instead of reading garbage); small ones are real
 * anonymous pages, committed only if written, for what the engine reads back. */
#include "sim-internal.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

int sim_mem_alloc(struct sim_mem *m, size_t bytes, bool host, bool real, void **ret)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t map = (ALLM_MAX(bytes, 1) + page - 1) & ~(page - 1);
	if (map < bytes)
		return -ENOMEM;
	if (m->n == m->cap) {
		int32_t cap = ALLM_MAX(16, m->cap * 2);
		struct sim_region *v = allm_realloc(m->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	void *p = mmap(NULL, map, real ? PROT_READ | PROT_WRITE : PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	m->v[m->n++] = (struct sim_region){p, bytes, map, host, real, NULL};
	if (!host)
		m->dev_used += bytes;
	*ret = p;
	return 0;
}

size_t sim_mem_free(struct sim_mem *m, void *p)
{
	for (int32_t i = 0; i < m->n; i++) {
		if (m->v[i].base != p)
			continue;
		struct sim_region r = m->v[i];
		munmap(r.base, r.map);
		allm_free(r.gone);
		m->v[i] = m->v[--m->n];
		if (r.host)
			return 0;
		m->dev_used -= r.bytes;
		return r.bytes;
	}
	return 0;
}

bool sim_mem_real(const struct sim_mem *m, const void *p, size_t bytes)
{
	const char *c = p;
	for (int32_t i = 0; i < m->n; i++) {
		const struct sim_region *r = &m->v[i];
		if (c >= r->base && c < r->base + r->bytes)
			return r->real && bytes <= (size_t)(r->base + r->bytes - c);
	}
	return false;
}

void sim_mem_fini(struct sim_mem *m)
{
	for (int32_t i = 0; i < m->n; i++) {
		munmap(m->v[i].base, m->v[i].map);
		allm_free(m->v[i].gone);
	}
	allm_free(m->v);
	memset(m, 0, sizeof(*m));
}

/* The arithmetic of the CUDA arena (kernels/cuda/cuda-vmm.c) on SIM_PAGE
 * chunks, with no memory behind them: RETURN clears the chunks wholly inside
 * (the last chunk's tail past the allocation belongs to nobody), MAP sets the
 * chunks overlapping, RESIDENT counts them. */
int sim_mem_pages(struct sim_mem *m, void *p, size_t bytes, enum allm_pages_verb verb, size_t *ret_bytes)
{
	const char *c = p;
	struct sim_region *r = NULL;
	for (int32_t i = 0; i < m->n && !r; i++)
		if (c >= m->v[i].base && c < m->v[i].base + ALLM_MAX(m->v[i].bytes, 1))
			r = &m->v[i];
	if (!r || r->host)
		return -ENOTSUP;
	size_t off = (size_t)(c - r->base), end = off + bytes, C = SIM_PAGE;
	size_t n = r->bytes / C + (r->bytes % C != 0);
	if (end < off || end > r->bytes)
		return -EINVAL;
	size_t in0, in1, ov0, ov1;
	allm_pages_span(off, bytes, r->bytes, C, &in0, &in1, &ov0, &ov1);
	switch (verb) {
	case ALLM_PAGES_SIZE:
		*ret_bytes = C;
		return 0;
	case ALLM_PAGES_RETURN:
		if (in1 <= in0)
			return 0;
		if (!r->gone && !(r->gone = allm_calloc(n, 1)))
			return -ENOMEM;
		memset(r->gone + in0, 1, in1 - in0);
		return 0;
	case ALLM_PAGES_MAP:
		if (r->gone && ov1 > ov0)
			memset(r->gone + ov0, 0, ov1 - ov0);
		return 0;
	case ALLM_PAGES_RESIDENT: {
		size_t k = 0;
		for (size_t i = ov0; i < ov1; i++)
			k += !r->gone || !r->gone[i];
		*ret_bytes = k * C;
		return 0;
	}
	}
	return -EINVAL;
}
