/* Description: libFuzzer target over the control plane's message layer
 * (ctl/ctl-proto.c): the bytes any local peer can send the engine's control socket,
 * and an engine's replies as allmctl reads them. Each input goes through the
 * bounded validator and decoder, typed lookups of the paths the server and the
 * clients read, and msgpack -> JSON; a message the validator accepts must decode,
 * one it refuses must be refused by the decoder too, and nothing may crash. */
#include "ctl-proto.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

bool replaying; /* fuzz-replay.c sets it; nothing to vary here */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[200];
	int v = allm_ctl_validate(data, size, ALLM_CTL_MAX_MSG, why, sizeof(why));
	struct allm_ctl_msg *m = NULL;
	int r = allm_ctl_decode(data, size, ALLM_CTL_MAX_MSG, &m, why, sizeof(why));
	if ((v == 0) != (r == 0 || r == -ENOMEM) || (r == 0) != (m != NULL))
		abort();
	if (r)
		return 0;
	static const char *const paths[] = {"id", "cmd", "args", "args.limit", "args.id", "result",
					    "result.requests", "blocks.gpu.used", "ok", "error",
					    "a.b.c.d.e.f.g.h", "", "."};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int64_t n;
		double x;
		bool b;
		const char *s;
		size_t len;
		char buf[16];
		const msgpack_object *o;
		allm_ctl_get_int(m->root, paths[i], &n);
		allm_ctl_get_double(m->root, paths[i], &x);
		allm_ctl_get_bool(m->root, paths[i], &b);
		allm_ctl_get_str(m->root, paths[i], &s, &len);
		allm_ctl_get_strbuf(m->root, paths[i], buf, sizeof(buf));
		allm_ctl_get_map(m->root, paths[i], &o);
		allm_ctl_get_array(m->root, paths[i], &o);
	}
	for (int pretty = 0; pretty < 2; pretty++) {
		char *j = allm_ctl_to_json(m->root, pretty);
		if (j && !memchr(j, 0, strlen(j) + 1))
			abort();
		free(j);
	}
	allm_ctl_msg_free(m);
	return 0;
}
