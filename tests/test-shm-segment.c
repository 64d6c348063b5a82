/* Description: shm segment: layout rounding, sealed memfd mapped by a fork()ed peer over SCM_RIGHTS (rings + doorbells across processes), POSIX mode create/unlink, header validation rejecting each corruption with -EPROTO, and arena range checks. */
#include "shm-doorbell.h"
#include "shm-segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-check.h"

static const struct allm_shm_layout small = { .sq_entries = 8, .cq_entries = 8, .arena_size = 4096 };

static struct allm_shm_segment *must_create(const struct allm_shm_layout *want, bool posix)
{
	struct allm_shm_segment *seg = NULL;
	int r = allm_shm_segment_create(want, posix, &seg);
	if (r) {
		fprintf(stderr, "FAIL segment_create: %s\n", strerror(-r));
		exit(1);
	}
	return seg;
}

/* Mappings of our memfds in this process ("/memfd:allm-seg (deleted)"). */
static int count_segment_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	char line[512];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "memfd:allm-seg") != NULL;
	fclose(f);
	return n;
}

/* --- layout ------------------------------------------------------------ */

static void test_layout(void)
{
	struct allm_shm_layout l = { 0 };
	struct allm_shm_layout want = { .sq_entries = 100, .cq_entries = 200, .arena_size = 1000 };
	CHECK(allm_shm_layout_compute(&want, &l) == 0, "compute");
	CHECK(l.sq_entries == 128 && l.cq_entries == 256 && l.arena_size == 1024, "rounded %u %u %llu",
	      l.sq_entries, l.cq_entries, (unsigned long long)l.arena_size);
	CHECK(l.sq_offset == sizeof(struct allm_shm_header), "sq after the header");
	CHECK(l.cq_offset == l.sq_offset + 128 * sizeof(struct allm_sqe), "cq after the sq");
	CHECK(l.arena_offset == l.cq_offset + 256 * sizeof(struct allm_cqe), "arena after the cq");
	CHECK(l.total_size >= l.arena_offset + l.arena_size &&
	      l.total_size % (uint64_t)sysconf(_SC_PAGESIZE) == 0, "total %llu",
	      (unsigned long long)l.total_size);
	CHECK(l.sq_offset % 64 == 0 && l.cq_offset % 64 == 0 && l.arena_offset % 64 == 0, "aligned");

	struct allm_shm_layout keep = l;
	struct allm_shm_layout bad[] = {
		{ .sq_entries = 0, .cq_entries = 8, .arena_size = 64 },
		{ .sq_entries = 8, .cq_entries = 0, .arena_size = 64 },
		{ .sq_entries = ALLM_SHM_MAX_RING_ENTRIES + 1, .cq_entries = 8 },
		{ .sq_entries = 8, .cq_entries = 8, .arena_size = ALLM_SHM_MAX_ARENA_SIZE + 1 },
		{ .sq_entries = 8, .cq_entries = 8, .arena_size = UINT64_MAX },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(allm_shm_layout_compute(&bad[i], &l) == -EINVAL, "bad layout %zu accepted", i);
	CHECK(memcmp(&l, &keep, sizeof(l)) == 0, "ret untouched on failure");
	struct allm_shm_segment *seg = (struct allm_shm_segment *)&keep;
	CHECK(allm_shm_segment_create(&bad[0], false, &seg) == -EINVAL &&
	      seg == (struct allm_shm_segment *)&keep, "create with a bad layout");
}

/* --- memfd: seals and a second mapping ----------------------------------- */

static void test_memfd_seals_and_peer(void)
{
	struct allm_shm_segment *seg = must_create(&small, false);
	struct allm_shm_header *h = allm_shm_segment_header(seg);
	CHECK(h->magic == ALLM_SHM_MAGIC && h->abi_version == ALLM_SHM_ABI_VERSION, "header");
	CHECK(h->total_size == seg->layout.total_size && h->sq_entries == 8 && h->cq_entries == 8,
	      "header sizes");
	CHECK(memcmp(&h->magic, "ALLMSHM1", 8) == 0, "magic bytes");

	int seals = fcntl(seg->fd, F_GET_SEALS);
	CHECK(seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW) && (seals & F_SEAL_SEAL),
	      "seals 0x%x", seals);
	CHECK(!(seals & F_SEAL_WRITE), "must stay writable");

	struct allm_shm_segment *peer = NULL;
	CHECK(allm_shm_segment_map_fd(seg->fd, &peer) == 0 && peer, "peer maps the fd");
	if (!peer) {
		allm_shm_segment_destroy(seg);
		return;
	}
	CHECK(memcmp(&peer->layout, &seg->layout, sizeof(seg->layout)) == 0, "same layout");
	CHECK(peer->base != seg->base, "two distinct mappings");
	/* The peer's fd is its own duplicate, and it cannot resize the object. */
	CHECK(peer->fd != seg->fd, "peer holds a dup");
	CHECK(ftruncate(peer->fd, 4096) < 0 && errno == EPERM, "shrink blocked");
	CHECK(ftruncate(peer->fd, (off_t)seg->layout.total_size * 2) < 0 && errno == EPERM,
	      "grow blocked");
	CHECK(fcntl(peer->fd, F_ADD_SEALS, F_SEAL_WRITE) < 0 && errno == EPERM, "seals sealed");

	/* Both see the same memory, both ways. */
	CHECK(allm_shm_arena_copy_in(peer, 100, "hello", 5) == 0, "copy in");
	char buf[8] = { 0 };
	CHECK(allm_shm_arena_copy_out(seg, 100, 5, buf, sizeof(buf)) == 0 &&
	      memcmp(buf, "hello", 5) == 0, "creator sees the peer's bytes");
	struct allm_ring_prod cqp;
	struct allm_ring_cons cqc;
	CHECK(allm_shm_segment_cq_prod(seg, &cqp) == 0 && allm_shm_segment_cq_cons(peer, &cqc) == 0,
	      "views");
	struct allm_cqe cqe = { .kind = ALLM_CQE_ACCEPTED, .user_tag = 77, .request_id = 5 }, got;
	CHECK(allm_ring_push(&cqp, &cqe) == 0 && allm_ring_pop(&cqc, &got) == 0 &&
	      memcmp(&got, &cqe, sizeof(cqe)) == 0, "entry through two mappings");

	/* The creator keeps its own layout: a peer rewriting the header changes
	 * neither the engine's ring geometry nor its arena bounds. */
	h->sq_entries = ALLM_SHM_MAX_RING_ENTRIES;
	h->sq_ctl.ring_entries = ALLM_SHM_MAX_RING_ENTRIES;
	h->sq_ctl.ring_mask = ALLM_SHM_MAX_RING_ENTRIES - 1;
	h->arena_size = UINT64_MAX;
	struct allm_ring_cons sqc;
	CHECK(allm_shm_segment_sq_cons(seg, &sqc) == 0 && sqc.entries == 8 && sqc.mask == 7,
	      "engine ring geometry from its own layout");
	CHECK(allm_shm_arena_copy_out(seg, 4096, 1, buf, sizeof(buf)) == -EINVAL,
	      "engine arena bounds from its own layout");

	allm_shm_segment_destroy(peer);
	allm_shm_segment_destroy(seg);
	allm_shm_segment_destroy(NULL);
}

/* --- a fork()ed peer process ------------------------------------------- */

static int send_fds(int sock, const int *fds, int n)
{
	char byte = 'S';
	struct iovec iov = { &byte, 1 };
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
	                      .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fds(int sock, int *fds, int n)
{
	char byte;
	struct iovec iov = { &byte, 1 };
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
	                      .msg_controllen = sizeof(u.buf) };
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN((size_t)n * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(cm), (size_t)n * sizeof(int));
	return 0;
}

/* Pops one entry, sleeping on the doorbell when the ring is empty.
 * Returns 0 or -1 (timeout / error). */
static int pop_or_sleep(struct allm_ring_cons *c, struct allm_doorbell *db, void *out)
{
	for (int tries = 0; tries < 50; tries++) {
		if (allm_ring_pop(c, out) == 0)
			return 0;
		if (allm_ring_prepare_sleep(c)) {
			allm_doorbell_wait(db, 100);
			allm_doorbell_drain(db, NULL);
			allm_ring_finish_sleep(c);
		}
	}
	return -1;
}

#define PEER_PROMPT "Once upon a time"
#define PEER_PROMPT_OFF 256u

/* The client: receives the segment and both doorbells, submits one request, and
 * waits for the answer. Exit code = failed step (0 = all good). */
static int peer_main(int sock)
{
	int fds[3];
	if (recv_fds(sock, fds, 3))
		return 10;
	struct allm_shm_segment *seg = NULL;
	if (allm_shm_segment_map_fd(fds[0], &seg))
		return 11;
	close(fds[0]); /* the segment keeps its own dup */
	/* A hostile client cannot shrink the engine's segment. */
	if (ftruncate(seg->fd, 0) == 0 || errno != EPERM)
		return 12;
	struct allm_doorbell sq_db, cq_db;
	if (allm_doorbell_from_fd(&sq_db, fds[1]) || allm_doorbell_from_fd(&cq_db, fds[2]))
		return 13;
	struct allm_ring_prod sq;
	struct allm_ring_cons cq;
	if (allm_shm_segment_sq_prod(seg, &sq) || allm_shm_segment_cq_cons(seg, &cq))
		return 14;
	if (allm_shm_arena_copy_in(seg, PEER_PROMPT_OFF, PEER_PROMPT, strlen(PEER_PROMPT)))
		return 15;
	/* the parameters follow the prompt in the arena (protocol.h) */
	struct allm_params params = {
		.size = sizeof(params), .max_tokens = 16, .temperature = 0.5f, .top_p = 0.9f,
		.top_k = 40, .n_stop = 1, .seed = 1234, .stop_ids = { 2 },
	};
	if (allm_shm_arena_copy_in(seg, allm_sqe_params_off(PEER_PROMPT_OFF, strlen(PEER_PROMPT)), &params,
				   sizeof(params)))
		return 15;
	struct allm_sqe sqe = {
		.opcode = ALLM_SQE_OP_SUBMIT, .prompt_kind = ALLM_PROMPT_TEXT, .params_size = sizeof(params),
		.user_tag = 0xC0FFEE, .prompt_off = PEER_PROMPT_OFF,
		.prompt_len = (uint32_t)strlen(PEER_PROMPT),
	};
	if (allm_ring_push(&sq, &sqe))
		return 16;
	if (allm_ring_needs_wakeup(&sq))
		allm_doorbell_ring(&sq_db);
	struct allm_cqe cqe;
	if (pop_or_sleep(&cq, &cq_db, &cqe))
		return 17;
	if (cqe.kind != ALLM_CQE_TOKEN || cqe.user_tag != 0xC0FFEE || cqe.request_id != 42 ||
	    cqe.text_len != 5 || memcmp(cqe.u.token.text, "world", 5) != 0)
		return 18;
	allm_doorbell_close(&sq_db);
	allm_doorbell_close(&cq_db);
	allm_shm_segment_destroy(seg);
	return 0;
}

static void test_fork_peer(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		CHECK(0, "socketpair: %s", strerror(errno));
		return;
	}
	pid_t pid = fork();
	if (pid < 0) {
		CHECK(0, "fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(peer_main(sv[1]));
	}
	close(sv[1]);

	/* The engine: creates the segment and the doorbells, passes them, serves. */
	struct allm_shm_segment *seg = must_create(&small, false);
	struct allm_doorbell sq_db, cq_db;
	CHECK(allm_doorbell_create(&sq_db) == 0 && allm_doorbell_create(&cq_db) == 0, "doorbells");
	int fds[3] = { seg->fd, sq_db.fd, cq_db.fd };
	CHECK(send_fds(sv[0], fds, 3) == 0, "sendmsg");
	struct allm_ring_cons sq;
	struct allm_ring_prod cq;
	CHECK(allm_shm_segment_sq_cons(seg, &sq) == 0 && allm_shm_segment_cq_prod(seg, &cq) == 0,
	      "views");
	struct allm_sqe sqe;
	int r = pop_or_sleep(&sq, &sq_db, &sqe);
	CHECK(r == 0, "no SQE from the peer");
	if (r == 0) {
		struct allm_params p = { 0 };
		CHECK(sqe.params_size == sizeof(p) &&
			      allm_shm_arena_copy_out(seg, allm_sqe_params_off(sqe.prompt_off, sqe.prompt_len),
						      sqe.params_size, &p, sizeof(p)) == 0,
		      "params in the arena");
		CHECK(sqe.opcode == ALLM_SQE_OP_SUBMIT && sqe.user_tag == 0xC0FFEE && p.size == sizeof(p) &&
		      p.max_tokens == 16 && p.top_k == 40 && p.seed == 1234 && p.n_stop == 1 &&
		      p.stop_ids[0] == 2 && p.temperature == 0.5f, "SQE fields");
		char prompt[64] = { 0 };
		CHECK(allm_shm_arena_copy_out(seg, sqe.prompt_off, sqe.prompt_len, prompt,
		                              sizeof(prompt) - 1) == 0 &&
		      strcmp(prompt, PEER_PROMPT) == 0, "prompt from the arena: '%s'", prompt);
		struct allm_cqe cqe = { .kind = ALLM_CQE_TOKEN, .text_len = 5,
		                        .user_tag = sqe.user_tag, .request_id = 42 };
		memcpy(cqe.u.token.text, "world", 5);
		CHECK(allm_ring_push(&cq, &cqe) == 0, "push CQE");
		if (allm_ring_needs_wakeup(&cq))
			allm_doorbell_ring(&cq_db);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "peer process failed at step %d",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(sv[0]);
	allm_doorbell_close(&sq_db);
	allm_doorbell_close(&cq_db);
	allm_shm_segment_destroy(seg);
}

/* --- POSIX shm mode ----------------------------------------------------- */

static void test_posix(void)
{
	struct allm_shm_segment *seg = NULL;
	int r = allm_shm_segment_create(&small, true, &seg);
	if (r == -ENOENT || r == -EACCES || r == -ENOSYS) {
		printf("SKIP posix mode: shm_open: %s\n", strerror(-r));
		return;
	}
	CHECK(r == 0, "posix create: %s", strerror(-r));
	if (r)
		return;
	char name[sizeof(seg->posix_name)];
	memcpy(name, seg->posix_name, sizeof(name));
	CHECK(strncmp(name, "/allm-", 6) == 0, "name '%s'", name);
	CHECK(fcntl(seg->fd, F_GET_SEALS) < 0 || fcntl(seg->fd, F_GET_SEALS) == F_SEAL_SEAL,
	      "posix objects carry no resize seals");

	struct allm_shm_segment *peer = NULL;
	CHECK(allm_shm_segment_open_posix(name, &peer) == 0 && peer, "peer opens by name");
	if (peer) {
		CHECK(allm_shm_arena_copy_in(peer, 0, "posix", 5) == 0, "write");
		char buf[5];
		CHECK(allm_shm_arena_copy_out(seg, 0, 5, buf, 5) == 0 && memcmp(buf, "posix", 5) == 0,
		      "shared");
		CHECK(peer->posix_name[0] == '\0', "only the creator holds the name");
	}
	CHECK(allm_shm_segment_unlink(seg) == 0 && seg->posix_name[0] == '\0', "unlink");
	CHECK(allm_shm_segment_unlink(seg) == 0, "second unlink is a no-op");
	struct allm_shm_segment *late = NULL;
	CHECK(allm_shm_segment_open_posix(name, &late) == -ENOENT && !late, "name gone");
	/* Both mappings survive the unlink. */
	if (peer) {
		char buf[5];
		CHECK(allm_shm_arena_copy_out(peer, 0, 5, buf, 5) == 0 && memcmp(buf, "posix", 5) == 0,
		      "still mapped");
	}
	allm_shm_segment_destroy(peer);
	allm_shm_segment_destroy(seg);

	/* destroy() unlinks a name still held (a client that never showed up). */
	seg = NULL;
	CHECK(allm_shm_segment_create(&small, true, &seg) == 0, "create");
	if (seg) {
		memcpy(name, seg->posix_name, sizeof(name));
		allm_shm_segment_destroy(seg);
		CHECK(allm_shm_segment_open_posix(name, &late) == -ENOENT, "destroy unlinked");
	}
}

/* --- header validation --------------------------------------------------- */

struct corruption {
	const char *what;
	void (*apply)(struct allm_shm_header *h);
};

static void c_magic(struct allm_shm_header *h) { h->magic ^= 1; }
static void c_version(struct allm_shm_header *h) { h->abi_version = ALLM_SHM_ABI_VERSION + 1; }
static void c_header_size(struct allm_shm_header *h) { h->header_size = 256; }
static void c_total_small(struct allm_shm_header *h) { h->total_size -= 4096; }
static void c_total_big(struct allm_shm_header *h) { h->total_size += 4096; }
static void c_sqe_size(struct allm_shm_header *h) { h->sq_entry_size = 64; }
static void c_cqe_size(struct allm_shm_header *h) { h->cq_entry_size = 256; }
static void c_sq_not_pow2(struct allm_shm_header *h) { h->sq_entries = 6; h->sq_ctl.ring_entries = 6; h->sq_ctl.ring_mask = 5; }
static void c_cq_not_pow2(struct allm_shm_header *h) { h->cq_entries = 12; h->cq_ctl.ring_entries = 12; h->cq_ctl.ring_mask = 11; }
static void c_cq_zero(struct allm_shm_header *h) { h->cq_entries = 0; h->cq_ctl.ring_entries = 0; h->cq_ctl.ring_mask = UINT32_MAX; }
static void c_sq_huge(struct allm_shm_header *h) { h->sq_entries = 1u << 31; h->sq_ctl.ring_entries = 1u << 31; h->sq_ctl.ring_mask = (1u << 31) - 1; }
static void c_sq_beyond(struct allm_shm_header *h) { h->sq_offset = h->total_size; }
static void c_sq_far(struct allm_shm_header *h) { h->sq_offset = UINT64_MAX - 63; }
static void c_cq_tail_out(struct allm_shm_header *h) { h->cq_offset = h->total_size - 64; }
static void c_arena_beyond(struct allm_shm_header *h) { h->arena_size = h->total_size; }
static void c_arena_wrap(struct allm_shm_header *h) { h->arena_offset = 1024; h->arena_size = UINT64_MAX - 960; }
static void c_arena_max(struct allm_shm_header *h) { h->arena_size = ALLM_SHM_MAX_ARENA_SIZE + 64; }
static void c_overlap_sq_cq(struct allm_shm_header *h) { h->cq_offset = h->sq_offset; }
static void c_overlap_cq_arena(struct allm_shm_header *h) { h->arena_offset = h->cq_offset + 64; h->arena_size = 64; }
static void c_overlap_header(struct allm_shm_header *h) { h->sq_offset = 0; }
static void c_overlap_ctl(struct allm_shm_header *h) { h->arena_offset = 384; h->arena_size = 64; }
static void c_misaligned(struct allm_shm_header *h) { h->arena_offset += 8; h->arena_size -= 64; }
static void c_ctl_mask(struct allm_shm_header *h) { h->sq_ctl.ring_mask = 15; }
static void c_ctl_entries(struct allm_shm_header *h) { h->cq_ctl.ring_entries = 16; }
static void c_reserved(struct allm_shm_header *h) { h->reserved[7] = 1; }

static const struct corruption corruptions[] = {
	{ "bad magic", c_magic },
	{ "future ABI version", c_version },
	{ "header size", c_header_size },
	{ "total_size below the file size", c_total_small },
	{ "total_size beyond the file", c_total_big },
	{ "SQ entry size", c_sqe_size },
	{ "CQ entry size", c_cqe_size },
	{ "SQ entries not a power of two", c_sq_not_pow2 },
	{ "CQ entries not a power of two", c_cq_not_pow2 },
	{ "CQ with no entries", c_cq_zero },
	{ "SQ entries over the limit", c_sq_huge },
	{ "SQ offset at the end of the file", c_sq_beyond },
	{ "SQ offset near UINT64_MAX", c_sq_far },
	{ "CQ runs past the end of the file", c_cq_tail_out },
	{ "arena runs past the end of the file", c_arena_beyond },
	{ "arena offset + size overflows 64 bits", c_arena_wrap },
	{ "arena over the limit", c_arena_max },
	{ "SQ and CQ overlap", c_overlap_sq_cq },
	{ "CQ and arena overlap", c_overlap_cq_arena },
	{ "SQ overlaps the header", c_overlap_header },
	{ "arena overlaps a ring control block", c_overlap_ctl },
	{ "misaligned arena", c_misaligned },
	{ "SQ ctl mask disagrees", c_ctl_mask },
	{ "CQ ctl entries disagree", c_ctl_entries },
	{ "reserved bytes set", c_reserved },
};

static void test_validation(void)
{
	/* The untouched header is accepted: each case below differs by one field. */
	struct allm_shm_segment *seg = must_create(&small, false), *peer = NULL;
	CHECK(allm_shm_segment_map_fd(seg->fd, &peer) == 0, "pristine header accepted");
	allm_shm_segment_destroy(peer);
	allm_shm_segment_destroy(seg);

	for (size_t i = 0; i < sizeof(corruptions) / sizeof(corruptions[0]); i++) {
		seg = must_create(&small, false);
		corruptions[i].apply(allm_shm_segment_header(seg));
		int maps_before = count_segment_maps();
		struct allm_shm_segment *sentinel = (struct allm_shm_segment *)&corruptions[i];
		peer = sentinel;
		int r = allm_shm_segment_map_fd(seg->fd, &peer);
		CHECK(r == -EPROTO, "%s: got %d", corruptions[i].what, r);
		CHECK(peer == sentinel, "%s: ret written on failure", corruptions[i].what);
		CHECK(count_segment_maps() == maps_before, "%s: mapping left behind",
		      corruptions[i].what);
		if (r == 0 && peer != sentinel)
			allm_shm_segment_destroy(peer);
		allm_shm_segment_destroy(seg);
	}

	/* Files that are no segment at all. */
	int fd = memfd_create("allm-tiny", MFD_CLOEXEC);
	if (fd >= 0) {
		CHECK(ftruncate(fd, 100) == 0, "truncate");
		CHECK(allm_shm_segment_map_fd(fd, &peer) == -EPROTO, "100-byte file");
		CHECK(ftruncate(fd, 8192) == 0, "truncate");
		CHECK(allm_shm_segment_map_fd(fd, &peer) == -EPROTO, "zero-filled file");
		close(fd);
	}
	int pfd[2];
	if (pipe(pfd) == 0) {
		CHECK(allm_shm_segment_map_fd(pfd[0], &peer) == -EPROTO, "a pipe");
		close(pfd[0]);
		close(pfd[1]);
	}
	CHECK(allm_shm_segment_map_fd(-1, &peer) == -EINVAL, "fd -1");
	CHECK(count_segment_maps() == 0, "every segment unmapped");

	/* A peer-scribbled ring index is caught when the views attach. */
	seg = must_create(&small, false);
	atomic_store(&allm_shm_segment_header(seg)->sq_ctl.tail, 1000);
	struct allm_ring_cons c;
	CHECK(allm_shm_segment_sq_cons(seg, &c) == -EPROTO, "tail 1000 in an 8-entry SQ");
	allm_shm_segment_destroy(seg);
}

/* --- arena range checks ------------------------------------------------- */

static void test_arena(void)
{
	struct allm_shm_segment *seg = must_create(&small, false);
	uint64_t size = seg->layout.arena_size;
	CHECK(size == 4096, "arena %llu", (unsigned long long)size);
	static uint8_t src[4096], dst[4096 + 16];
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 1);
	CHECK(allm_shm_arena_copy_in(seg, 0, src, size) == 0, "fill the whole arena");
	CHECK(allm_shm_arena_copy_out(seg, 0, size, dst, sizeof(dst)) == 0 &&
	      memcmp(dst, src, size) == 0, "whole arena");
	CHECK(allm_shm_arena_copy_out(seg, size, 0, dst, 0) == 0, "empty range at the end");
	CHECK(allm_shm_arena_copy_out(seg, 10, 0, NULL, 0) == 0, "empty range, no buffer");

	memset(dst, 0xEE, sizeof(dst));
	struct { uint64_t off, len; int want; } cases[] = {
		{ 1, 4096, -EINVAL },                 /* one past the end */
		{ 4096, 1, -EINVAL },
		{ 4097, 0, -EINVAL },                 /* offset beyond, even empty */
		{ UINT64_MAX, 2, -EINVAL },           /* off + len wraps to 1 */
		{ 2, UINT64_MAX, -EINVAL },           /* len wraps */
		{ UINT32_MAX, 1, -EINVAL },
		{ 100, 50, -E2BIG },                  /* fits the arena, not dst (cap 49) */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = allm_shm_arena_copy_out(seg, cases[i].off, cases[i].len, dst,
		                                cases[i].want == -E2BIG ? 49 : sizeof(dst));
		CHECK(r == cases[i].want, "copy_out(%llu, %llu) = %d, want %d",
		      (unsigned long long)cases[i].off, (unsigned long long)cases[i].len, r,
		      cases[i].want);
	}
	int untouched = 1;
	for (size_t i = 0; i < sizeof(dst); i++)
		untouched &= dst[i] == 0xEE;
	CHECK(untouched, "failed copies wrote nothing");
	CHECK(allm_shm_arena_copy_in(seg, UINT64_MAX, src, 2) == -EINVAL, "copy_in wraps");
	CHECK(allm_shm_arena_copy_in(seg, 4000, src, 97) == -EINVAL, "copy_in past the end");
	CHECK(allm_shm_arena_copy_out(seg, 4000, 96, dst, 96) == 0 &&
	      memcmp(dst, src + 4000, 96) == 0, "tail of the arena");
	allm_shm_segment_destroy(seg);
}

int main(void)
{
	alarm(25); /* under meson's 30 s timeout: fail with a signal, not a hang */
	test_layout();
	test_memfd_seals_and_peer();
	test_fork_peer();
	test_posix();
	test_validation();
	test_arena();
	if (n_fail) {
		fprintf(stderr, "%d check(s) failed\n", n_fail);
		return 1;
	}
	printf("all shm segment checks passed\n");
	return 0;
}
