/* The insides of a client handle, shared by client-connect.c (handshake) and
 * client.c (rings, arena, events). Private to clientlib/. */
#ifndef ALLM_CLIENT_INTERNAL_H
#define ALLM_CLIENT_INTERNAL_H

#include <adaptivellm/client.h>

#include "shm-doorbell.h"
#include "shm-ring.h"
#include "shm-segment.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A prompt's bytes in the arena, from submit until the engine has copied them
 * out (its ACCEPTED, or the FINAL that refuses it). */
struct allm_arena_span {
	uint64_t user_tag; /* matches the ACCEPTED / refusing FINAL to its span */
	uint32_t off;      /* from the arena start */
	uint32_t len;      /* bytes reserved (the prompt, rounded up to ARENA_ALIGN) */
	bool freed;        /* answered; reclaimed once every older span is too */
};

/* A text piece the engine split over several TOKEN entries (ALLM_CQE_F_CONTINUED),
 * collected until its last part arrives. */
struct allm_partial_piece {
	uint64_t request_id;
	char *buf; /* malloc'ed */
	size_t len, cap;
};

struct allm_client {
	int sock;                     /* the lease: Unix stream socket to the engine */
	struct allm_shm_segment *seg; /* our mapping; layout is the validated snapshot */
	struct allm_doorbell sq_db;   /* rung by us when the engine sleeps on the SQ */
	struct allm_doorbell cq_db;   /* rung by the engine when we sleep on the CQ */
	struct allm_ring_prod sq;     /* we produce SQEs */
	struct allm_ring_cons cq;     /* we consume CQEs */
	uint32_t client_id;           /* the engine's number for us */
	char model[128];              /* from the welcome, NUL-terminated */
	int spin_us;                  /* wait(): busy-poll this long before sleeping */
	int dead;                     /* 0, or the sticky -EPIPE / -EPROTO */
	bool armed;                   /* NEED_WAKEUP set on the CQ: the engine rings */

	/* Prompt arena: a ring allocator. Live spans lie in [tail, head) or, once
	 * wrapped, [tail, size) + [0, head); spans[] lists them oldest first. */
	uint8_t *arena;       /* shared memory */
	uint32_t arena_size;  /* trusted copy */
	uint32_t arena_head;  /* next free byte */
	uint32_t arena_tail;  /* start of the oldest live span */
	struct allm_arena_span *spans; /* circular, capacity spans_cap (power of two) */
	size_t spans_cap, spans_first, spans_n;

	struct allm_partial_piece *partials; /* pieces being reassembled */
	size_t n_partials, partials_cap;

	/* the last token's LOGPROBS entries: they wait for its TOKEN entries (the
	 * engine sends them back to back), whose event then points at them: lp
	 * the first entry, lp_all all of them joined */
	struct allm_cqe_logprobs lp;
	struct allm_logprobs lp_all;
	uint64_t lp_request; /* their request while they wait, else 0 */
	bool lp_more;        /* the last one said more follow */

	char *text;           /* the last TOKEN event's text (reassembled pieces) */
	size_t text_cap;
	char error[ALLM_CQE_ERROR_MAX + 1]; /* the last FINAL's message, NUL-terminated */
};

/* client.c: sets up the ring views and the arena once the segment is mapped.
 * Returns 0 or -EPROTO / -ENOMEM. */
int allm_client_attach(struct allm_client *c);

/* allm_client_submit@@ADAPTIVELLM_1 (client.c), for the old entry point's use */
int allm_client_submit_v1(allm_client_t *c, const struct allm_request_params *p);

#endif
