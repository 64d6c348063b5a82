/* What the layers share through struct gw, under its lock (gateway.h): the model
 * and the engine's state as the pump and the control thread record them, and the
 * pump's doorbell. Here, below every layer, so that the control thread reads them
 * without calling into the pump and the HTTP side without calling into either. */
#include "gateway.h"

#include "common.h"

#include <unistd.h>

struct gw_model *gw_state_model(struct gw *gw, bool *up)
{
	pthread_mutex_lock(&gw->lock);
	struct gw_model *m = gw_model_ref(gw->model);
	*up = gw->engine_up;
	pthread_mutex_unlock(&gw->lock);
	return m;
}

double gw_state_silence(struct gw *gw)
{
	pthread_mutex_lock(&gw->lock);
	double s = gw->engine_up ? allm_now() - gw->engine_heard : 0;
	pthread_mutex_unlock(&gw->lock);
	return s;
}

void gw_wake_pump(struct gw *gw)
{
	uint64_t one = 1;
	if (atomic_load(&gw->pump_sleeping) && write(gw->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: the pump wakes anyway */
	}
}
