/* AdaptiveLLM-C wire protocol: the layout of the shared-memory segment that a
 * client and allm-engined both map, and the fixed-size entries of its two rings.
 *
 *   segment = [ header (512 B) | SQ entries | CQ entries | prompt arena ]
 *
 *   SQ: client -> engine, struct allm_sqe (128 B each); the client produces, the
 *       engine consumes.
 *   CQ: engine -> client, struct allm_cqe (128 B each); the engine produces, the
 *       client consumes.
 *   arena: bytes the client manages itself; a SUBMIT's prompt, its parameters
 *       (struct allm_params, params.h) and its logit bias entries lie there, one
 *       after the other (allm_sqe_params_off, allm_logit_bias_off).
 *
 * Rules every field follows (see STYLE.md, "Shared memory"):
 *   - fixed-width fields only, offsets (from the segment start) never pointers;
 *   - the byte order is the host's, and both peers run on the same host, so
 *     little-endian is assumed (checked below for the compilers we build with);
 *   - head and tail are free-running uint32_t counters; slot = counter & mask;
 *   - every reserved field is written as zero and must be zero on reading, so a
 *     later ABI version can give it a meaning;
 *   - the engine treats everything in the segment as hostile: it copies each
 *     entry out before looking at it and never re-reads sizes or offsets from
 *     the header (it keeps its own copy of the layout).
 */
#ifndef ADAPTIVELLM_PROTOCOL_H
#define ADAPTIVELLM_PROTOCOL_H

#include <adaptivellm/params.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
/* C++ has no _Atomic before C++23: the fields keep their size and alignment, and
 * C++ code reaches them through std::atomic_ref<uint32_t>. */
#define ALLM_WIRE_ATOMIC(t) t
extern "C" {
#else
#include <stdatomic.h>
#define ALLM_WIRE_ATOMIC(t) _Atomic t
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the AdaptiveLLM wire protocol assumes a little-endian host"
#endif

/* "ALLMSHM1" read as a little-endian uint64_t. */
#define ALLM_SHM_MAGIC UINT64_C(0x314D48534D4C4C41)
/* 2: allm_sqe.cache_salt and allm_cqe_final.n_cached (a version-1 peer is
 * refused at the hello). 3: a SUBMIT's parameters are a struct allm_params in
 * the arena, no longer SQE fields; it carries its size, so new parameters need
 * no new version (a version-2 peer is refused at the hello). */
#define ALLM_SHM_ABI_VERSION 3u

/* Cache line all shared control words are padded to. */
#define ALLM_SHM_CACHELINE 64u
/* Every region (rings, arena) starts on this boundary. */
#define ALLM_SHM_ALIGN 64u

/* Limits both sides enforce; a header asking for more is rejected. */
#define ALLM_SHM_MAX_RING_ENTRIES (1u << 16)
#define ALLM_SHM_MAX_ARENA_SIZE (UINT64_C(1) << 30)

/* --- ring control -------------------------------------------------------- */

/* allm_ring_ctl.flags: set by the consumer just before it sleeps on its doorbell;
 * a producer that sees it after publishing an entry rings the doorbell. Only the
 * consumer writes this word. */
#define ALLM_RING_NEED_WAKEUP (1u << 0)

/* The shared control block of one SPSC ring: three cache lines so that the
 * consumer's stores (head, flags) and the producer's stores (tail) never share a
 * line. */
struct allm_ring_ctl {
	ALLM_WIRE_ATOMIC(uint32_t) head; /* consumer-owned: next entry to consume */
	uint8_t pad_head[ALLM_SHM_CACHELINE - 4];
	ALLM_WIRE_ATOMIC(uint32_t) tail; /* producer-owned: next slot to fill */
	uint8_t pad_tail[ALLM_SHM_CACHELINE - 4];
	ALLM_WIRE_ATOMIC(uint32_t) flags; /* consumer-owned: ALLM_RING_NEED_WAKEUP */
	/* Copies of the geometry for the client's convenience; written once by the
	 * engine. The engine never reads them back (a client can rewrite them). */
	uint32_t ring_mask;    /* ring_entries - 1 */
	uint32_t ring_entries; /* power of two */
	uint8_t pad_flags[ALLM_SHM_CACHELINE - 12];
};

/* --- segment header ------------------------------------------------------ */

/* Written once by the engine when it creates the segment, before it hands the fd
 * out; read (and validated) by the client when it maps it. */
struct allm_shm_header {
	uint64_t magic;         /* ALLM_SHM_MAGIC */
	uint32_t abi_version;   /* ALLM_SHM_ABI_VERSION */
	uint32_t header_size;   /* sizeof(struct allm_shm_header) */
	uint64_t total_size;    /* bytes in the segment == size of the file */
	uint64_t sq_offset;     /* first SQ entry, from the segment start */
	uint32_t sq_entries;    /* power of two */
	uint32_t sq_entry_size; /* sizeof(struct allm_sqe) */
	uint64_t cq_offset;     /* first CQ entry */
	uint32_t cq_entries;    /* power of two */
	uint32_t cq_entry_size; /* sizeof(struct allm_cqe) */
	uint64_t arena_offset;  /* prompt arena */
	uint64_t arena_size;    /* bytes; prompt offsets are relative to arena_offset */
	uint8_t reserved[128 - 72]; /* zero */
	struct allm_ring_ctl sq_ctl; /* SQ: client produces, engine consumes */
	struct allm_ring_ctl cq_ctl; /* CQ: engine produces, client consumes */
};

/* --- submission queue entry (client -> engine) --------------------------- */

enum allm_sqe_op {
	ALLM_SQE_OP_NOP = 0,    /* ignored (lets a client test the ring) */
	ALLM_SQE_OP_SUBMIT = 1, /* start a generation request */
	ALLM_SQE_OP_CANCEL = 2, /* cancel request_id (from its ACCEPTED entry) */
};

enum allm_prompt_kind {
	ALLM_PROMPT_TEXT = 0,   /* prompt_len bytes of UTF-8 text */
	ALLM_PROMPT_TOKENS = 1, /* prompt_len / 4 int32_t token ids (prompt_len % 4 == 0) */
};

/* A SUBMIT names three things in the arena, one after the other, each on a
 * multiple of 8 from the one before:
 *   prompt_len bytes of prompt at prompt_off,
 *   params_size bytes of struct allm_params at allm_sqe_params_off(),
 *   n_logit_bias struct allm_logit_bias at allm_logit_bias_off(),
 *   grammar_len bytes of grammar text at allm_grammar_text_off(). */
struct allm_sqe {
	uint8_t opcode;       /* enum allm_sqe_op */
	uint8_t flags;        /* none defined yet: must be 0 */
	uint8_t prompt_kind;  /* enum allm_prompt_kind */
	uint8_t reserved0;    /* zero */
	uint32_t params_size; /* SUBMIT: bytes of its struct allm_params (== its size
			       * field: the client's layout, params.h says how a
			       * shorter or longer one reads) */
	uint64_t user_tag;    /* opaque to the engine, echoed in every CQE */
	uint64_t request_id;  /* CANCEL: the engine's id of the request to cancel */
	uint32_t prompt_off;  /* SUBMIT: prompt bytes at arena + prompt_off */
	uint32_t prompt_len;  /* SUBMIT: bytes (not tokens) */
	uint16_t n_logit_bias; /* SUBMIT: entries, <= ALLM_LOGIT_BIAS_MAX */
	uint16_t reserved1;    /* zero */
	uint32_t grammar_len;  /* SUBMIT: bytes of grammar text (params.grammar_kind says
				* what it is), <= ALLM_GRAMMAR_TEXT_MAX */
	uint8_t reserved[128 - 40]; /* zero */
};

/* Where a SUBMIT's parameters start in the arena: after its prompt. */
static inline uint64_t allm_sqe_params_off(uint64_t prompt_off, uint64_t prompt_len)
{
	return prompt_off + ((prompt_len + 7) & ~(uint64_t)7);
}
/* Where its logit bias entries start: after its parameters. */
static inline uint64_t allm_logit_bias_off(uint64_t prompt_off, uint64_t prompt_len, uint64_t params_size)
{
	return allm_sqe_params_off(prompt_off, prompt_len) + ((params_size + 7) & ~(uint64_t)7);
}

/* Where its grammar text starts: after its logit bias entries. */
static inline uint64_t allm_grammar_text_off(uint64_t prompt_off, uint64_t prompt_len, uint64_t params_size,
					     uint64_t n_logit_bias)
{
	return allm_logit_bias_off(prompt_off, prompt_len, params_size) + ((n_logit_bias * sizeof(struct allm_logit_bias) + 7) & ~(uint64_t)7);
}

/* --- completion queue entry (engine -> client) --------------------------- */

enum allm_cqe_kind {
	ALLM_CQE_ACCEPTED = 1, /* the request got request_id (CANCEL uses it) */
	ALLM_CQE_TOKEN = 2,    /* one generated token, its text in token.text */
	ALLM_CQE_FINAL = 3,    /* the request ended; no further entries for it */
	ALLM_CQE_LOGPROBS = 4, /* the next token's log-probabilities (params.logprobs
				* > 0): right before that token's TOKEN entries;
				* more than ALLM_CQE_LOGPROBS_TOP alternatives
				* continue in the next LOGPROBS entry (flags) */
};

/* allm_cqe.flags */
/* TOKEN: the text piece continues in the next TOKEN entry of the same request
 * (a piece longer than ALLM_CQE_TEXT_MAX is split; only the last part lacks
 * this flag, and only it counts as a token).
 * LOGPROBS: the token's alternatives continue in the next entry, a LOGPROBS
 * entry of the same token (its index and sampled again, its top the next
 * alternatives, best first); only the last lacks this flag. */
#define ALLM_CQE_F_CONTINUED (1u << 0)

enum allm_finish_reason {
	ALLM_FINISH_NONE = 0,      /* not finished (non-FINAL entries) */
	ALLM_FINISH_EOS = 1,       /* the model emitted its end-of-sequence token */
	ALLM_FINISH_LENGTH = 2,    /* max_tokens (or the context size) reached */
	ALLM_FINISH_STOP = 3,      /* one of stop_ids was generated */
	ALLM_FINISH_CANCELLED = 4, /* ALLM_SQE_OP_CANCEL or the client went away */
	ALLM_FINISH_ERROR = 5,     /* rejected or failed: see status, final.error */
};

#define ALLM_CQE_TEXT_MAX 96
#define ALLM_CQE_ERROR_MAX 64

struct allm_cqe_token {
	int32_t token_id; /* the token sampled */
	uint32_t index;   /* 0 for the first generated token of the request */
	char text[ALLM_CQE_TEXT_MAX]; /* UTF-8, not NUL-terminated: text_len bytes */
};

/* The finish record: the counters a request's FINAL carries, one row each, in
 * wire order. The one definition of them: struct allm_cqe_final below (the
 * ring), struct allm_event's FINAL fields (client.h), the engine's fill from its
 * result (engined/serve/daemon-request.c) and the client library's copy
 * (clientlib/client.c) are expanded from it.
 *
 * X(TYPE, NAME, FROM, DOC): FROM is the value as an expression over `res`, the
 * engine's struct allm_result (engined/sched/engine.h), and ALLM_FINAL_US(a, b),
 * microseconds from a to b; it is expanded only inside the engine.
 *
 * Adding a counter: the union of struct allm_cqe holds 104 bytes and this
 * record fills them (40 of counters, 64 of error text): a new row needs a new
 * wire version (the layout checks below say so at compile time); struct
 * allm_event grows at its end with a new ALLM_EVENT_SIZE_VER<n>. */
#define ALLM_FINAL_FIELDS(X)                                                                          \
	X(uint64_t, queue_us, ALLM_FINAL_US(res->arrival, res->first_sched), "arrival -> first scheduled") \
	X(uint64_t, ttft_us, ALLM_FINAL_US(res->arrival, res->first_token), "arrival -> first token")      \
	X(uint64_t, total_us, ALLM_FINAL_US(res->arrival, res->finish), "arrival -> finish")               \
	X(uint32_t, n_prompt, (uint32_t)res->n_prompt, "prompt tokens")                                    \
	X(uint32_t, n_generated, (uint32_t)res->n_generated, "tokens generated")                           \
	X(uint32_t, n_preemptions, (uint32_t)(res->n_preempt_swap + res->n_preempt_recompute),             \
	  "times the request was swapped out or dropped to be recomputed")                                 \
	X(uint32_t, n_cached, (uint32_t)res->n_cached,                                                     \
	  "prompt tokens served from the prefix cache (their prefill skipped; 0 from an older engine)")

/* A row as a struct member (struct allm_cqe_final, struct allm_event). */
#define ALLM_FINAL_DECL_(type, name, from, doc) type name;

struct allm_cqe_final {
	ALLM_FINAL_FIELDS(ALLM_FINAL_DECL_)
	char error[ALLM_CQE_ERROR_MAX]; /* ALLM_FINISH_ERROR: message, NUL-padded */
};

struct allm_logprob {
	int32_t token_id;
	float logprob; /* natural log of its probability under the model's own
			* distribution (before penalties and temperature) */
};

/* Alternatives one LOGPROBS entry holds. A request that asks for more (up to
 * ALLM_LOGPROBS_MAX, params.h) gets each token's in several entries, chained by
 * ALLM_CQE_F_CONTINUED; one that asks for this many or fewer (all that version
 * 3 first took) gets one entry as before, so no new wire version: a client
 * that never asks for more never sees the flag, and an older engine refuses
 * the bigger ask by name. */
#define ALLM_CQE_LOGPROBS_TOP 10

struct allm_cqe_logprobs {
	uint32_t index;  /* the token's index, as in its TOKEN entries */
	uint32_t n_top;  /* entries used in top, <= ALLM_CQE_LOGPROBS_TOP */
	struct allm_logprob sampled; /* the token sampled */
	struct allm_logprob top[ALLM_CQE_LOGPROBS_TOP]; /* the most likely, best
							 * first (lower id first on
							 * a tie) */
	uint8_t reserved[8]; /* zero */
};

struct allm_cqe {
	uint8_t kind;          /* enum allm_cqe_kind */
	uint8_t flags;         /* ALLM_CQE_F_* */
	uint8_t text_len;      /* TOKEN: bytes used in token.text, <= ALLM_CQE_TEXT_MAX */
	uint8_t finish_reason; /* FINAL: enum allm_finish_reason */
	int32_t status;        /* FINAL: 0 or a negative errno */
	uint64_t user_tag;     /* the SQE's user_tag */
	uint64_t request_id;   /* the engine's id (0 if the SUBMIT was rejected) */
	union {
		struct allm_cqe_token token; /* kind == ALLM_CQE_TOKEN */
		struct allm_cqe_final final; /* kind == ALLM_CQE_FINAL */
		struct allm_cqe_logprobs logprobs; /* kind == ALLM_CQE_LOGPROBS */
		uint8_t raw[104];
	} u;
};

/* --- handshake over the Unix socket ($ALLM_RUNTIME_DIR/<name>.sock) -------
 *
 * 1. The client connects and sends one struct allm_hello.
 * 2. The engine checks the peer (SO_PEERCRED: a refused uid gets its welcome at
 *    once, maybe before its hello arrived), checks the hello (reserved fields and
 *    unknown flags must be zero), creates the client's segment and
 *    two eventfd doorbells, and answers one struct allm_welcome. With status 0
 *    the message carries, by SCM_RIGHTS, [segment memfd, SQ doorbell, CQ doorbell]
 *    (memfd mode) or [SQ doorbell, CQ doorbell] with shm_name set (POSIX mode).
 *    The SQ doorbell is rung by the client after a push when the engine has set
 *    ALLM_RING_NEED_WAKEUP on the SQ; the CQ doorbell by the engine likewise.
 * 3. The client maps the segment and sends one byte ALLM_MAPPED_ACK; in POSIX
 *    mode the engine then unlinks the name.
 * 4. The socket stays open as the client's lease: when it closes, the engine
 *    cancels the client's requests and frees their blocks.
 * A connection that has not sent its mapped ack within the engine's handshake
 * timeout (2 s by default) is closed.
 *
 * A text piece the detokenizer held back until the end (an incomplete UTF-8
 * sequence at EOS, say) arrives as a TOKEN entry with token_id -1 just before
 * the FINAL entry. */

#define ALLM_HELLO_MAGIC UINT64_C(0x4F4C45484D4C4C41)   /* "ALLMHELO" */
#define ALLM_WELCOME_MAGIC UINT64_C(0x434C45574D4C4C41) /* "ALLMWELC" */
#define ALLM_MAPPED_ACK 'M'

/* allm_hello.flags */
/* A named shm_open segment instead of a memfd: a wish only. The engine picks the
 * mode (a POSIX object cannot be sealed against truncation) and grants this when it
 * runs with --shm posix; the welcome says which it chose (shm_name). */
#define ALLM_HELLO_F_POSIX (1u << 0)

struct allm_hello {
	uint64_t magic;       /* ALLM_HELLO_MAGIC */
	uint32_t abi_version; /* ALLM_SHM_ABI_VERSION */
	uint32_t sq_entries;  /* wanted; 0 = default; the engine clamps and rounds */
	uint32_t cq_entries;  /* wanted; 0 = default */
	uint32_t arena_size;  /* wanted prompt arena bytes; 0 = default */
	uint32_t flags;       /* ALLM_HELLO_F_* */
	uint32_t reserved;    /* zero */
};

struct allm_welcome {
	uint64_t magic;       /* ALLM_WELCOME_MAGIC */
	uint32_t abi_version; /* the engine's ALLM_SHM_ABI_VERSION */
	int32_t status;       /* 0, or a negative errno (then no fds are attached) */
	uint32_t client_id;   /* the engine's number for this client */
	uint32_t reserved;    /* zero */
	char shm_name[64];    /* POSIX mode: the segment's name, NUL-terminated */
	char message[128];    /* status != 0: why; else the model, NUL-terminated */
};

/* --- layout checks: the ABI is these numbers -------------------------------- */

#ifdef __cplusplus
#define ALLM_WIRE_ASSERT(e, m) static_assert(e, m)
#else
#define ALLM_WIRE_ASSERT(e, m) _Static_assert(e, m)
#endif

#ifndef __cplusplus
/* Atomics in memory that two processes share must be lock-free (a lock would
 * live in one process only). */
ALLM_WIRE_ASSERT(ATOMIC_INT_LOCK_FREE == 2, "uint32_t atomics must be lock-free");
#endif
ALLM_WIRE_ASSERT(sizeof(float) == 4, "float must be 32-bit");

ALLM_WIRE_ASSERT(sizeof(struct allm_ring_ctl) == 3 * ALLM_SHM_CACHELINE, "ring ctl size");
ALLM_WIRE_ASSERT(offsetof(struct allm_ring_ctl, head) == 0, "head line");
ALLM_WIRE_ASSERT(offsetof(struct allm_ring_ctl, tail) == ALLM_SHM_CACHELINE, "tail line");
ALLM_WIRE_ASSERT(offsetof(struct allm_ring_ctl, flags) == 2 * ALLM_SHM_CACHELINE, "flags line");
ALLM_WIRE_ASSERT(offsetof(struct allm_ring_ctl, ring_mask) == 2 * ALLM_SHM_CACHELINE + 4, "mask");
ALLM_WIRE_ASSERT(offsetof(struct allm_ring_ctl, ring_entries) == 2 * ALLM_SHM_CACHELINE + 8, "entries");

ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, abi_version) == 8, "hdr");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, total_size) == 16, "hdr");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, sq_offset) == 24, "hdr");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, cq_offset) == 40, "hdr");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, arena_offset) == 56, "hdr");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, arena_size) == 64, "hdr");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, reserved) == 72, "hdr");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, sq_ctl) == 128, "sq ctl on its own lines");
ALLM_WIRE_ASSERT(offsetof(struct allm_shm_header, cq_ctl) == 320, "cq ctl on its own lines");
ALLM_WIRE_ASSERT(sizeof(struct allm_shm_header) == 512, "header size");
ALLM_WIRE_ASSERT(sizeof(struct allm_shm_header) % ALLM_SHM_ALIGN == 0, "header alignment");

ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, params_size) == 4, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, user_tag) == 8, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, request_id) == 16, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, prompt_off) == 24, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, prompt_len) == 28, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, n_logit_bias) == 32, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, reserved1) == 34, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, grammar_len) == 36, "sqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_sqe, reserved) == 40, "sqe");
ALLM_WIRE_ASSERT(sizeof(struct allm_sqe) == 128, "sqe size");

ALLM_WIRE_ASSERT(offsetof(struct allm_cqe, status) == 4, "cqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe, user_tag) == 8, "cqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe, request_id) == 16, "cqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe, u) == 24, "cqe");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_token, text) == 8, "cqe token");
/* the finish record as it was first shipped: its rows may not move */
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, queue_us) == 0, "cqe final");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, ttft_us) == 8, "cqe final");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, total_us) == 16, "cqe final");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, n_generated) == 28, "cqe final");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, n_preemptions) == 32, "cqe final");
ALLM_WIRE_ASSERT(sizeof(struct allm_cqe_token) == 104, "cqe token");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, n_prompt) == 24, "cqe final");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, n_cached) == 36, "cqe final");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_final, error) == 40, "cqe final: a new counter needs a wire version");
ALLM_WIRE_ASSERT(sizeof(struct allm_cqe_final) == 104, "cqe final");
ALLM_WIRE_ASSERT(sizeof(struct allm_cqe_logprobs) == 104, "cqe logprobs");
ALLM_WIRE_ASSERT(offsetof(struct allm_cqe_logprobs, top) == 16, "cqe logprobs");
ALLM_WIRE_ASSERT(sizeof(struct allm_cqe) == 128, "cqe size");
ALLM_WIRE_ASSERT(sizeof(struct allm_hello) == 32, "allm_hello is 32 bytes");
ALLM_WIRE_ASSERT(sizeof(struct allm_welcome) == 216, "allm_welcome is 216 bytes");
ALLM_WIRE_ASSERT(ALLM_CQE_TEXT_MAX <= UINT8_MAX, "text_len is a uint8_t");

#ifdef __cplusplus
}
#endif

#endif
