/* The simulated device (`--device sim:PROFILE`, DESIGN §4): a backend behind the
 * same vtable that computes nothing. Allocations are bookkeeping, ops and copies
 * advance a virtual clock by what the profile's cost model (sim-cost.h) gives for
 * their shapes, and the few results the engine reads back (argmax ids, top-k,
 * logits rows) are deterministic functions of each row's last token and position,
 * so a run is reproducible bit for bit and outputs do not depend on batching or
 * preemption (as on the CPU backend). The outputs are not meaningful text. */
#ifndef ALLM_SIM_BACKEND_H
#define ALLM_SIM_BACKEND_H

#include "backend.h"
#include "sim-profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a simulated device from a profile spec (a shipped name or FILE.json, see
 * allm_sim_profile_load). Same contract as allm_backend_cpu_create(). */
int allm_backend_sim_create(const char *profile, const struct allm_backend_opts *opts,
			    allm_backend_t **ret, struct allm_err *err);

/* The virtual clock, seconds (starts at 1.0 so 0 can mean "never" to callers). */
double allm_sim_now(allm_backend_t *be);
/* The host's work of one scheduler step: the clock advances by host_step. */
void allm_sim_host_step(allm_backend_t *be);
/* A disk KV tier transfer: the clock advances by the profile's disk model (one
 * latency per transfer, its runs in flight together, + bytes / bandwidth);
 * returns the seconds, or -ENOTSUP when the profile has no disk model. */
double allm_sim_charge_disk(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs);
/* The same transfer's seconds, the clock left as it is. */
double allm_sim_disk_seconds(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs);
/* The simulated disk's line and stage (backend.h, struct allm_sim_disk_i). */
const struct allm_sim_disk_i *allm_sim_disk(void);
/* Moves the virtual clock forward to t (the device idles); earlier t is ignored. */
void allm_sim_advance_to(allm_backend_t *be, double t);
/* The profile the device was made from (owned by the backend). */
const struct allm_sim_profile *allm_sim_get_profile(allm_backend_t *be);
/* Wall-clock seconds this process spent in the simulated device: each forward
 * whole (timer_start to timer_stop, the executor issuing its ops included) and
 * every call outside one. A run's wall time minus this is the engine's own host
 * work per step: scheduling, batch building, sampling bookkeeping. */
double allm_sim_wall_seconds(allm_backend_t *be);
/* The same in this thread's CPU time (what a loaded machine does not inflate). */
double allm_sim_cpu_seconds(allm_backend_t *be);

#ifdef __cplusplus
}
#endif

#endif
