/* Description: libFuzzer target over the daemon's handling of one submission-queue
 * entry and the prompt arena it points into: the bytes a hostile client controls.
 * Input = 128 bytes of SQE, then arena contents. Each input runs a few engine
 * steps and cancels what is left, so memory and time stay bounded. */
#include "fuzz-daemon.h"

#include <stdio.h>
#include <stdlib.h>

static struct daemon *dd;
static struct dclient *cl;

static void setup(void)
{
	dd = fuzz_daemon();
	struct allm_shm_layout want = {.sq_entries = 8, .cq_entries = 64, .arena_size = 4096};
	if (daemon_client_attach(dd, &want, &cl))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!cl)
		setup();
	struct allm_sqe q;
	memset(&q, 0, sizeof(q));
	memcpy(&q, data, ALLM_MIN(size, sizeof(q)));
	if (size > sizeof(q))
		allm_shm_arena_copy_in(cl->seg, 0, data + sizeof(q),
				       ALLM_MIN(size - sizeof(q), cl->seg->layout.arena_size));
	daemon_handle_sqe(dd, cl, &q);
	/* Forward passes dominate the cost; step on every 16th input (and always when
	 * replaying) so admission and token streaming are covered without making
	 * 10^6 executions take an hour. */
	static unsigned count;
	struct allm_err err;
	int steps = (getenv("FUZZ_VERBOSE") || count++ % 16 == 0) ? 2 : 0;
	if (replaying)
		steps = 4;
	for (int i = 0; i < steps && !allm_engine_idle(dd->eng); i++)
		allm_engine_step(dd->eng, &err);
	/* cancel the rest, then drain the CQ as a client would */
	const struct allm_request *rs[64];
	enum allm_req_state qs[] = {ALLM_REQ_RUNNING, ALLM_REQ_SWAPPED, ALLM_REQ_WAITING};
	for (int k = 0; k < 3; k++) {
		int n;
		while ((n = allm_engine_list(dd->eng, qs[k], rs, 64)) > 0)
			allm_engine_cancel(dd->eng, rs[0]->id);
	}
	struct allm_ring_cons cq;
	struct allm_cqe e;
	allm_shm_segment_cq_cons(cl->seg, &cq);
	int kinds[4] = {0};
	do {
		daemon_flush(dd);
		while (allm_ring_pop(&cq, &e) == 0)
			kinds[e.kind < 4 ? e.kind : 0]++;
	} while (cl->bl_n > 0 || cl->n_owed > 0);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "accepted %d, tokens %d, final %d (last: reason %d, %.64s)\n", kinds[1],
			kinds[2], kinds[3], e.finish_reason, e.kind == ALLM_CQE_FINAL ? e.u.final.error : "");
	cl->stalled = cl->stall_handled = false;
	/* every block is back and every request ended: nothing leaked by a hostile
	 * entry, no FINAL still owed */
	if (allm_block_pool_used(&dd->rt->kv->gpu) || allm_block_pool_used(&dd->rt->kv->cpu) ||
	    cl->reqs || cl->inflight || dd->queued || dd->prompt_bytes)
		abort();
	return 0;
}
