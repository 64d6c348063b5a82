/* The engine's live settings from the shared flags: the CFG rows of the settings
 * table (include/adaptivellm/settings.h) copied from struct allm_engine_opts to
 * struct allm_engine_config. Its own file so that engine-opts.c, which engine.h
 * includes, never includes engine.h (no file circle). */
#include "engine.h"

#include <string.h>

void allm_engine_config_from_opts(const struct allm_engine_opts *o, struct allm_engine_config *ret)
{
	memset(ret, 0, sizeof(*ret));
#define COPY_CFG(id) ret->id = o->id;
#define COPY_POOL(id)
#define COPY_NO(id)
#define COPY_(id, key, type, opt, live, ...) COPY_##live(id)
	ALLM_SETTINGS_TABLE(COPY_)
#undef COPY_
}
