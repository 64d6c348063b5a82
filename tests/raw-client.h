/* Raw clients of a real allm-engined for the hostile tests (daemon-hostile.c,
 * daemon-peer.c): the handshake done by hand with shm/ calls, not clientlib, so a
 * test can send what libadaptivellm never would. Not a test by itself. */
#ifndef ALLM_TESTS_RAW_CLIENT_H
#define ALLM_TESTS_RAW_CLIENT_H

#include <adaptivellm/protocol.h>

#include "shm-doorbell.h"
#include "shm-ring.h"
#include "shm-segment.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The engine's socket path, set by the test's main. */
extern char raw_path[600];

double raw_now(void);
void raw_sleep_ms(int ms);
/* Deterministic 64-bit pseudo-random numbers (splitmix64). */
uint64_t raw_rnd(void);

struct raw {
	int sock;
	struct allm_shm_segment *seg;
	struct allm_ring_prod sq;
	struct allm_ring_cons cq;
	struct allm_doorbell sq_db, cq_db;
	uint32_t arena_size;
	/* what came back, per user_tag < MAX_TAG */
	int finals[4096];
	struct allm_cqe last_final[4096];
	int accepted[4096];
	uint64_t request_id[4096];
	char shm_name[64]; /* POSIX mode: the name the welcome gave, else "" */
	int32_t ids[4][512]; /* tokens of tags 0..3 */
	size_t nids[4];
	uint64_t cqes;
};
#define MAX_TAG 4096

/* A connected stream socket to raw_path (exits on failure). */
int raw_socket(void);
/* Reads a welcome (and its fds) within 5 s. Returns bytes read (0: EOF), -1. */
ssize_t raw_recv_welcome(int fd, struct allm_welcome *w, int *fds, int *nfd);
/* One recvmsg of a welcome and its fds, with extra recv flags (MSG_DONTWAIT: what
 * is there now). Returns its result. */
ssize_t raw_read_welcome(int fd, struct allm_welcome *w, int *fds, int *nfd, int flags);
/* A valid hello with these flags and default sizes. */
struct allm_hello raw_hello(uint32_t flags);
/* The handshake by hand (exits unless the welcome has status 0); ack: send the
 * mapped ack. */
struct raw *raw_connect(const struct allm_hello *h, bool ack);
struct raw *raw_connect_f(uint32_t flags, bool ack);
void raw_close(struct raw *r);
/* Pushes one SQE (waits up to 5 s for room) and rings the doorbell if asked. */
void raw_push(struct raw *r, const struct allm_sqe *q);
/* Pops every CQE ready into the per-tag tables. */
void raw_pump(struct raw *r);
/* Waits (10 s at most) until every tag in [lo, hi) has its FINAL. */
bool raw_wait_finals(struct raw *r, uint64_t lo, uint64_t hi);
/* Whether the engine closed the socket within ms. */
bool raw_hung_up(int fd, int ms);
/* A SUBMIT of the prompt at arena [off, off + len), 4 tokens, greedy: its
 * parameters written into the arena after the prompt (when they fit there). */
struct allm_sqe raw_submit_sqe(struct raw *r, uint64_t tag, uint32_t off, uint32_t len, uint8_t kind);
/* q's parameters in the arena (raw_submit_sqe wrote them), to change before
 * raw_push; NULL when they lie outside it. */
struct allm_params *raw_params(struct raw *r, const struct allm_sqe *q);

#endif
