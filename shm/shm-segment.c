/* Creating, mapping and validating the shared-memory segment. */
#include "shm-segment.h"

#include "shm-guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static bool is_pow2(uint32_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

static uint32_t round_pow2(uint32_t x) /* 1 <= x <= 2^31 */
{
	uint32_t p = 1;
	while (p < x)
		p <<= 1;
	return p;
}

static uint64_t page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? (uint64_t)p : 4096;
}

/* The largest segment a layout within the limits can give; map_fd refuses to map
 * a bigger file. */
static uint64_t max_total_size(void)
{
	return align_up(sizeof(struct allm_shm_header) +
	                (uint64_t)ALLM_SHM_MAX_RING_ENTRIES * sizeof(struct allm_sqe) +
	                (uint64_t)ALLM_SHM_MAX_RING_ENTRIES * sizeof(struct allm_cqe) +
	                ALLM_SHM_MAX_ARENA_SIZE, page_size());
}

/* Returns 0 or -EINVAL; *ret untouched on failure. */
int allm_shm_layout_compute(const struct allm_shm_layout *want, struct allm_shm_layout *ret)
{
	if (!want || !ret)
		return -EINVAL;
	if (want->sq_entries == 0 || want->sq_entries > ALLM_SHM_MAX_RING_ENTRIES ||
	    want->cq_entries == 0 || want->cq_entries > ALLM_SHM_MAX_RING_ENTRIES ||
	    want->arena_size > ALLM_SHM_MAX_ARENA_SIZE)
		return -EINVAL;
	struct allm_shm_layout l = {
		.sq_entries = round_pow2(want->sq_entries),
		.cq_entries = round_pow2(want->cq_entries),
		.arena_size = align_up(want->arena_size, ALLM_SHM_ALIGN),
	};
	uint64_t off = sizeof(struct allm_shm_header); /* a multiple of ALLM_SHM_ALIGN */
	l.sq_offset = off;
	off = align_up(off + (uint64_t)l.sq_entries * sizeof(struct allm_sqe), ALLM_SHM_ALIGN);
	l.cq_offset = off;
	off = align_up(off + (uint64_t)l.cq_entries * sizeof(struct allm_cqe), ALLM_SHM_ALIGN);
	l.arena_offset = off;
	off += l.arena_size;
	l.total_size = align_up(off, page_size());
	*ret = l;
	return 0;
}

/* A fresh random name for shm_open: "/allm-<pid>-<64 random bits>". */
static void random_name(char *buf, size_t cap)
{
	uint64_t r;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint64_t)ts.tv_nsec * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)ts.tv_sec;
	}
	snprintf(buf, cap, "/allm-%ld-%016llx", (long)getpid(), (unsigned long long)r);
}

/* Returns an open fd (and fills seg->posix_name) or -errno. */
static int open_new_object(struct allm_shm_segment *seg, bool posix)
{
	if (!posix) {
		int fd = memfd_create("allm-seg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		return fd < 0 ? -errno : fd;
	}
	for (int attempt = 0; attempt < 16; attempt++) {
		char name[sizeof(seg->posix_name)];
		random_name(name, sizeof(name));
		/* O_EXCL: never adopt an object someone else created under our name. */
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			memcpy(seg->posix_name, name, sizeof(name));
			return fd;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static void write_header(struct allm_shm_segment *seg)
{
	const struct allm_shm_layout *l = &seg->layout;
	struct allm_shm_header *h = (struct allm_shm_header *)seg->base;
	/* The object is fresh (zero-filled by ftruncate) and not shared yet; passing
	 * the fd to the peer later orders all these stores before its mmap. */
	h->magic = ALLM_SHM_MAGIC;
	h->abi_version = ALLM_SHM_ABI_VERSION;
	h->header_size = sizeof(struct allm_shm_header);
	h->total_size = l->total_size;
	h->sq_offset = l->sq_offset;
	h->sq_entries = l->sq_entries;
	h->sq_entry_size = sizeof(struct allm_sqe);
	h->cq_offset = l->cq_offset;
	h->cq_entries = l->cq_entries;
	h->cq_entry_size = sizeof(struct allm_cqe);
	h->arena_offset = l->arena_offset;
	h->arena_size = l->arena_size;
	memset(h->reserved, 0, sizeof(h->reserved));
	allm_ring_ctl_init(&h->sq_ctl, l->sq_entries, 0);
	allm_ring_ctl_init(&h->cq_ctl, l->cq_entries, 0);
}

/* Returns 0, -EINVAL or -errno; *ret untouched on failure. */
int allm_shm_segment_create(const struct allm_shm_layout *want, bool posix,
                            struct allm_shm_segment **ret)
{
	struct allm_shm_layout l;
	int r = allm_shm_layout_compute(want, &l);
	if (r < 0 || !ret)
		return r < 0 ? r : -EINVAL;
	struct allm_shm_segment *seg = calloc(1, sizeof(*seg));
	if (!seg)
		return -ENOMEM;
	seg->fd = -1;
	seg->layout = l;
	r = open_new_object(seg, posix);
	if (r < 0)
		goto fail;
	seg->fd = r;
	if (ftruncate(seg->fd, (off_t)l.total_size) < 0) {
		r = -errno;
		goto fail;
	}
	/* The size is final: a client may never shrink the object under our mapping
	 * (our next access would SIGBUS) nor grow it, nor lift the seals. POSIX shm
	 * objects cannot be sealed; that mode trusts the peer's uid (0600). */
	if (!posix &&
	    fcntl(seg->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		r = -errno;
		goto fail;
	}
	void *base = mmap(NULL, l.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
	if (base == MAP_FAILED) {
		r = -errno;
		goto fail;
	}
	seg->base = base;
	write_header(seg);
	*ret = seg;
	return 0;
fail:
	allm_shm_segment_destroy(seg);
	return r;
}

/* Returns true if the snapshot `h` describes a sane segment of file_size bytes. */
static bool header_valid(const struct allm_shm_header *h, uint64_t file_size)
{
	if (h->magic != ALLM_SHM_MAGIC || h->abi_version != ALLM_SHM_ABI_VERSION ||
	    h->header_size != sizeof(struct allm_shm_header) || h->total_size != file_size)
		return false;
	if (h->sq_entry_size != sizeof(struct allm_sqe) ||
	    h->cq_entry_size != sizeof(struct allm_cqe))
		return false;
	if (!is_pow2(h->sq_entries) || h->sq_entries > ALLM_SHM_MAX_RING_ENTRIES ||
	    !is_pow2(h->cq_entries) || h->cq_entries > ALLM_SHM_MAX_RING_ENTRIES ||
	    h->arena_size > ALLM_SHM_MAX_ARENA_SIZE)
		return false;
	for (size_t i = 0; i < sizeof(h->reserved); i++)
		if (h->reserved[i])
			return false;
	/* The ring control copies must agree with the header. */
	if (h->sq_ctl.ring_entries != h->sq_entries || h->sq_ctl.ring_mask != h->sq_entries - 1 ||
	    h->cq_ctl.ring_entries != h->cq_entries || h->cq_ctl.ring_mask != h->cq_entries - 1)
		return false;

	/* Regions: the header, then three that must be aligned, lie inside the file
	 * and not overlap each other or the header. Entry counts and sizes are
	 * bounded above, so the products fit in 64 bits; offsets are compared with
	 * subtraction so a huge offset cannot wrap. */
	struct { uint64_t off, len; } reg[4] = {
		{ 0, sizeof(struct allm_shm_header) },
		{ h->sq_offset, (uint64_t)h->sq_entries * sizeof(struct allm_sqe) },
		{ h->cq_offset, (uint64_t)h->cq_entries * sizeof(struct allm_cqe) },
		{ h->arena_offset, h->arena_size },
	};
	for (int i = 0; i < 4; i++) {
		if (reg[i].off % ALLM_SHM_ALIGN != 0)
			return false;
		if (reg[i].off > file_size || reg[i].len > file_size - reg[i].off)
			return false;
	}
	for (int i = 0; i < 4; i++)
		for (int j = i + 1; j < 4; j++) {
			if (reg[i].len == 0 || reg[j].len == 0)
				continue;
			/* both fit in the file, so these sums cannot overflow */
			if (reg[i].off < reg[j].off + reg[j].len && reg[j].off < reg[i].off + reg[i].len)
				return false;
		}
	return true;
}

/* Returns 0, -EPROTO or -errno; *ret untouched on failure. */
int allm_shm_segment_map_fd(int fd, struct allm_shm_segment **ret)
{
	if (fd < 0 || !ret)
		return -EINVAL;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Size limits before mmap: never map something the layout rules cannot
	 * produce (a small or a huge file, a pipe, a directory). */
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(struct allm_shm_header) ||
	    (uint64_t)st.st_size > max_total_size())
		return -EPROTO;
	uint64_t size = (uint64_t)st.st_size;

	int r;
	struct allm_shm_segment *seg = calloc(1, sizeof(*seg));
	if (!seg)
		return -ENOMEM;
	seg->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (seg->fd < 0) {
		r = -errno;
		goto fail;
	}
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
	if (base == MAP_FAILED) {
		r = -errno;
		goto fail;
	}
	seg->base = base;
	seg->layout.total_size = size; /* what destroy() unmaps if validation fails */
	/* One snapshot of the header, validated and used from here on: the bytes in
	 * shared memory may change between two reads. */
	struct allm_shm_header h;
	memcpy(&h, base, sizeof(h));
	if (!header_valid(&h, size)) {
		r = -EPROTO;
		goto fail;
	}
	seg->layout = (struct allm_shm_layout){
		.sq_entries = h.sq_entries, .cq_entries = h.cq_entries, .arena_size = h.arena_size,
		.sq_offset = h.sq_offset, .cq_offset = h.cq_offset,
		.arena_offset = h.arena_offset, .total_size = h.total_size,
	};
	*ret = seg;
	return 0;
fail:
	allm_shm_segment_destroy(seg);
	return r;
}

/* Returns 0, -EPROTO or -errno. */
int allm_shm_segment_open_posix(const char *name, struct allm_shm_segment **ret)
{
	if (!name || name[0] != '/' || !ret)
		return -EINVAL;
	int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int r = allm_shm_segment_map_fd(fd, ret);
	close(fd);
	return r;
}

/* Returns 0 or -errno. */
int allm_shm_segment_unlink(struct allm_shm_segment *seg)
{
	if (!seg || !seg->posix_name[0])
		return 0;
	int r = shm_unlink(seg->posix_name) < 0 ? -errno : 0;
	seg->posix_name[0] = '\0';
	return r;
}

void allm_shm_segment_destroy(struct allm_shm_segment *seg)
{
	if (!seg)
		return;
	allm_shm_guard_remove(seg); /* before the pages go */
	if (seg->base)
		munmap(seg->base, seg->layout.total_size);
	if (seg->fd >= 0)
		close(seg->fd);
	allm_shm_segment_unlink(seg);
	free(seg);
}

struct allm_shm_header *allm_shm_segment_header(const struct allm_shm_segment *seg)
{
	return (struct allm_shm_header *)seg->base;
}

int allm_shm_segment_sq_prod(struct allm_shm_segment *seg, struct allm_ring_prod *ret)
{
	return allm_ring_prod_init(ret, &allm_shm_segment_header(seg)->sq_ctl,
	                           seg->base + seg->layout.sq_offset, seg->layout.sq_entries,
	                           sizeof(struct allm_sqe));
}

int allm_shm_segment_sq_cons(struct allm_shm_segment *seg, struct allm_ring_cons *ret)
{
	return allm_ring_cons_init(ret, &allm_shm_segment_header(seg)->sq_ctl,
	                           seg->base + seg->layout.sq_offset, seg->layout.sq_entries,
	                           sizeof(struct allm_sqe));
}

int allm_shm_segment_cq_prod(struct allm_shm_segment *seg, struct allm_ring_prod *ret)
{
	return allm_ring_prod_init(ret, &allm_shm_segment_header(seg)->cq_ctl,
	                           seg->base + seg->layout.cq_offset, seg->layout.cq_entries,
	                           sizeof(struct allm_cqe));
}

int allm_shm_segment_cq_cons(struct allm_shm_segment *seg, struct allm_ring_cons *ret)
{
	return allm_ring_cons_init(ret, &allm_shm_segment_header(seg)->cq_ctl,
	                           seg->base + seg->layout.cq_offset, seg->layout.cq_entries,
	                           sizeof(struct allm_cqe));
}

uint8_t *allm_shm_segment_arena(const struct allm_shm_segment *seg)
{
	return seg->base + seg->layout.arena_offset;
}

/* Returns 0, -EINVAL (range outside the arena) or -E2BIG (len > dst_cap). */
int allm_shm_arena_copy_out(const struct allm_shm_segment *seg, uint64_t off, uint64_t len,
                            void *dst, size_t dst_cap)
{
	if (!seg || (!dst && len))
		return -EINVAL;
	uint64_t size = seg->layout.arena_size; /* trusted copy */
	/* off <= size first, so size - off cannot wrap and off + len is never formed */
	if (off > size || len > size - off)
		return -EINVAL;
	if (len > dst_cap)
		return -E2BIG;
	if (len == 0)
		return 0; /* dst may be NULL */
	memcpy(dst, allm_shm_segment_arena(seg) + off, (size_t)len);
	return 0;
}

/* Returns 0 or -EINVAL. */
int allm_shm_arena_copy_in(struct allm_shm_segment *seg, uint64_t off, const void *src,
                           uint64_t len)
{
	if (!seg || (!src && len))
		return -EINVAL;
	uint64_t size = seg->layout.arena_size;
	if (off > size || len > size - off)
		return -EINVAL;
	if (len == 0)
		return 0; /* src may be NULL */
	memcpy(allm_shm_segment_arena(seg) + off, src, (size_t)len);
	return 0;
}
