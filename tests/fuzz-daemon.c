/* The fuzz targets' daemon: see fuzz-daemon.h. */
#include "fuzz-daemon.h"

#include "engine-calib.h"
#include "model-writer.h"

#include <stdio.h>
#include <stdlib.h>

bool replaying;
static struct daemon d;
static bool ready;

/* daemon.c is not linked: its logger, silenced. */
void dlog(const struct daemon *dd, enum allm_log_level level, const char *fmt, ...)
{
}

static void fail(const char *what, const char *why)
{
	fprintf(stderr, "fuzz setup: %s: %s\n", what, why);
	abort();
}

struct daemon *fuzz_daemon(void)
{
	if (ready)
		return &d;
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
	d.log_level = ALLM_LOG_OFF;
	d.listen_fd = -1;
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
	/* epoll: the same on every machine (io_uring may be off in containers) */
	if (allm_loop_create(true, &d.loop, &err))
		fail("loop", err.msg);
	ready = true;
	return &d;
}
