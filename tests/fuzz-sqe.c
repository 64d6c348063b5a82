/* Description: libFuzzer target over the daemon's handling of one submission-queue
 * entry and the prompt arena it points into: the bytes a hostile client controls.
 * Input = 128 bytes of SQE, then arena contents. Each input runs a few engine
 * steps and cancels what is left, so memory and time stay bounded. */
#include "daemon.h"

#include "engine-calib.h"
#include "model-writer.h"

#include <stdio.h>
#include <stdlib.h>

static struct daemon d;

/* daemon.c is not linked: its logger, silenced. */
void dlog(const struct daemon *dd, int level, const char *fmt, ...)
{
}
static struct dclient *cl;
/* set by fuzz-replay.c's main: corpus replays run every input fully */
bool replaying;

static void fail(const char *what, const char *why)
{
	fprintf(stderr, "fuzz-sqe setup: %s: %s\n", what, why);
	abort();
}

static void setup(void)
{
	static char dir[] = "/tmp/allm-fuzz-XXXXXX";
	struct allm_err err = {{0}};
	struct allm_model_config cfg;
	struct allm_model_write_opts wo = {.seed = 5, .dtype = ALLM_DTYPE_F32};
	if (!mkdtemp(dir))
		fail("mkdtemp", "failed");
	if (allm_model_config_preset("tiny", &cfg, &err) || allm_model_write_dir(&cfg, &wo, dir, &err))
		fail("model", err.msg);
	struct allm_engine_opts o;
	allm_engine_opts_default(&o);
	o.model_dir = dir;
	o.device = "cpu";
	o.threads = 1;
	o.gpu_blocks = 64;
	o.cpu_blocks = 16;
	d.name = "fuzz";
	d.log_level = -1;
	daemon_limits_default(&d);
	if (allm_runtime_open(&o, 0, NULL, NULL, &d.rt, &err))
		fail("runtime", err.msg);
	struct allm_predictor_key key;
	allm_engine_predictor_key(d.rt->model, d.rt->kv, &key);
	struct allm_engine_config ec = {.max_num_seqs = 8, .max_num_batched_tokens = 512};
	struct allm_engine_events ev = {.user = &d, .on_token = daemon_on_token,
					.on_finish = daemon_on_finish};
	if (allm_predictor_create(&key, &d.pred) ||
	    allm_engine_create(d.rt->model, d.rt->kv, d.pred, &ec, &ev, &d.eng, &err))
		fail("engine", err.msg);
	if (daemon_prompt_limits(&d))
		fail("prompt limits", "out of memory");
	struct allm_shm_layout want = {.sq_entries = 8, .cq_entries = 64, .arena_size = 4096};
	if (daemon_client_attach(&d, &want, &cl))
		fail("client", "attach failed");
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
	daemon_handle_sqe(&d, cl, &q);
	/* Forward passes dominate the cost; step on every 16th input (and always when
	 * replaying) so admission and token streaming are covered without making
	 * 10^6 executions take an hour. */
	static unsigned count;
	struct allm_err err;
	int steps = (getenv("FUZZ_VERBOSE") || count++ % 16 == 0) ? 2 : 0;
	if (replaying)
		steps = 4;
	for (int i = 0; i < steps && !allm_engine_idle(d.eng); i++)
		allm_engine_step(d.eng, &err);
	/* cancel the rest, then drain the CQ as a client would */
	const struct allm_request *rs[64];
	enum allm_req_state qs[] = {ALLM_REQ_RUNNING, ALLM_REQ_SWAPPED, ALLM_REQ_WAITING};
	for (int k = 0; k < 3; k++) {
		int n;
		while ((n = allm_engine_list(d.eng, qs[k], rs, 64)) > 0)
			allm_engine_cancel(d.eng, rs[0]->id);
	}
	struct allm_ring_cons cq;
	struct allm_cqe e;
	allm_shm_segment_cq_cons(cl->seg, &cq);
	int kinds[4] = {0};
	do {
		daemon_flush(&d);
		while (allm_ring_pop(&cq, &e) == 0)
			kinds[e.kind < 4 ? e.kind : 0]++;
	} while (cl->bl_n > 0 || cl->n_owed > 0);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "accepted %d, tokens %d, final %d (last: reason %d, %.64s)\n", kinds[1],
			kinds[2], kinds[3], e.finish_reason, e.kind == ALLM_CQE_FINAL ? e.u.final.error : "");
	cl->stalled = cl->stall_handled = false;
	/* every block is back: nothing leaked by a hostile entry */
	if (allm_block_pool_used(&d.rt->kv->gpu) || allm_block_pool_used(&d.rt->kv->cpu))
		abort();
	return 0;
}
