/* allm-bench and the engine's control plane (ctl/PROTOCOL.md): `reset-stats` before
 * a run so that the counts cover only it, `status` after it for what the client
 * cannot see (preemptions by kind, predictor MAPE, policy, block counts). */
#include "allm-bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl-client.h"

/* A spawned engine answers at once; a busy one between two steps. */
#define BENCH_CTL_TIMEOUT_MS 5000

static int call(const char *runtime_dir, const char *name, const char *cmd,
		struct allm_ctl_msg **ret, char *err, size_t errlen)
{
	struct allm_ctl_client_opts o = {.name = name, .runtime_dir = runtime_dir};
	struct allm_ctl_client *c = NULL;
	char path[512];
	/* ZeroMQ would wait out the whole timeout for an endpoint nobody bound (an
	 * engine that already exited): say so at once instead */
	int r = allm_ctl_path(runtime_dir, name, "ctl", path, sizeof(path));
	if (r == 0 && access(path, F_OK)) {
		snprintf(err, errlen, "the engine has no control endpoint %s", path);
		return -ENOTCONN;
	}
	r = allm_ctl_client_open(&o, &c, err, errlen);
	if (r < 0)
		return r;
	r = allm_ctl_call(c, cmd, NULL, 0, BENCH_CTL_TIMEOUT_MS, ret);
	if (r < 0)
		snprintf(err, errlen, "%s", allm_ctl_client_error(c));
	allm_ctl_client_close(c);
	return r;
}

int bench_ctl_reset_stats(const char *runtime_dir, const char *name, char *err, size_t errlen)
{
	struct allm_ctl_msg *m = NULL;
	int r = call(runtime_dir, name, "reset-stats", &m, err, errlen);
	allm_ctl_msg_free(m);
	return r;
}

int bench_ctl_status(const char *runtime_dir, const char *name, json_t **ret, char *err,
		     size_t errlen)
{
	struct allm_ctl_msg *m = NULL;
	int r = call(runtime_dir, name, "status", &m, err, errlen);
	if (r < 0)
		return r;
	/* one conversion (the library's) rather than a second msgpack walker here */
	char *txt = m->result ? allm_ctl_to_json(m->result, false) : NULL;
	json_error_t je;
	json_t *j = txt ? json_loads(txt, 0, &je) : NULL;
	free(txt);
	allm_ctl_msg_free(m);
	if (!json_is_object(j)) {
		json_decref(j);
		snprintf(err, errlen, "the status reply is not a map");
		return -EPROTO;
	}
	*ret = j;
	return 0;
}

