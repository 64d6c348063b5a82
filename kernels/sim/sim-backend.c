/* The simulated device's vtable: creation from a profile, memory as bookkeeping
 * against the profile's capacity, copies and timers on the virtual clock. The ops
 * are in sim-ops.c. */
#include "sim-internal.h"

#include <errno.h>
#include <stdio.h>

/* Where the virtual clock starts: above 0, which engine code reads as "never". */
#define SIM_CLOCK_START 1.0

static const char *sim_name(allm_backend_t *be)
{
	return "sim";
}

static const char *sim_describe(allm_backend_t *be)
{
	return SIM(be)->desc;
}

static void sim_destroy(allm_backend_t *be)
{
	if (!be)
		return;
	struct sim_ctx *c = SIM(be);
	if (c) {
		sim_mem_fini(&c->mem);
		sim_fwd_fini(&c->fwd);
		allm_sim_profile_free(c->prof);
		allm_free(c->slot_end);
		allm_free(c);
	}
	allm_free(be);
}

static bool sim_supports(allm_backend_t *be, enum allm_backend_op op, enum allm_dtype dt)
{
	return op < ALLM_OP_COUNT && dt < ALLM_DTYPE_COUNT;
}

static size_t dev_capacity(const struct sim_ctx *c)
{
	return (size_t)(c->prof->memory_bytes - c->prof->reserved_bytes);
}

static int sim_alloc(allm_backend_t *be, size_t bytes, void **ret_ptr)
{
	struct sim_ctx *c = SIM(be);
	if (bytes > dev_capacity(c) - c->mem.dev_used)
		return allm_err_set(&be->last_err, -ENOMEM,
				    "sim:%s: out of device memory: %.2f GiB asked, %.2f of %.2f GiB free",
				    c->prof->name, bytes / 1073741824.0,
				    (dev_capacity(c) - c->mem.dev_used) / 1073741824.0,
				    c->prof->memory_bytes / 1073741824.0);
	int r = sim_mem_alloc(&c->mem, bytes, false, bytes <= SIM_REAL_MAX, ret_ptr);
	if (r)
		return allm_err_set(&be->last_err, r, "sim: cannot reserve %zu bytes of address space",
				    bytes);
	return 0;
}

static void sim_free(allm_backend_t *be, void *ptr)
{
	if (ptr)
		sim_mem_free(&SIM(be)->mem, ptr);
}

/* Host memory is real (staging buffers are written by loaders) but committed only
 * where written: a swap pool the simulation never fills costs nothing. */
static int sim_host_alloc(allm_backend_t *be, size_t bytes, void **ret_ptr)
{
	int r = sim_mem_alloc(&SIM(be)->mem, bytes, true, true, ret_ptr);
	if (r)
		return allm_err_set(&be->last_err, r, "sim: cannot map %zu bytes of host memory", bytes);
	return 0;
}

static int sim_upload(allm_backend_t *be, void *dst_dev, const void *src_host, size_t bytes)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	/* what the engine will read back (step metadata) lives in small real buffers */
	if (sim_mem_real(&c->mem, dst_dev, bytes))
		memcpy(dst_dev, src_host, bytes);
	sim_charge(c, allm_sim_cost_copy(c->prof, ALLM_COPY_H2D, (double)bytes), w0);
	return 0;
}

static int sim_download(allm_backend_t *be, void *dst_host, const void *src_dev, size_t bytes)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	sim_fill_download(c, dst_host, src_dev, bytes);
	sim_charge(c, allm_sim_cost_copy(c->prof, ALLM_COPY_D2H, (double)bytes), w0);
	return 0;
}

/* A copy on the copy stream: only its time (K/V contents are not simulated). The
 * engine waits for it before computing again, so the clock moves now. */
static int sim_copy_async(allm_backend_t *be, void *dst, const void *src, size_t bytes,
			  enum allm_copy_dir dir)
{
	struct sim_ctx *c = SIM(be);
	struct sim_stamp w0 = sim_stamp(c);
	if ((unsigned)dir > ALLM_COPY_H2H)
		return allm_err_set(&be->last_err, -EINVAL, "sim: bad copy direction %d", (int)dir);
	double t = allm_sim_cost_copy(c->prof, dir, (double)bytes);
	c->copy_pending += t;
	sim_charge(c, t, w0);
	return 0;
}

static int sim_copy_wait(allm_backend_t *be, double *ret_seconds)
{
	struct sim_ctx *c = SIM(be);
	if (ret_seconds)
		*ret_seconds = c->copy_pending;
	c->copy_pending = 0;
	return 0;
}

static int sim_synchronize(allm_backend_t *be)
{
	return 0;
}

static int sim_mem_info(allm_backend_t *be, size_t *ret_free, size_t *ret_total)
{
	struct sim_ctx *c = SIM(be);
	*ret_total = (size_t)c->prof->memory_bytes;
	*ret_free = dev_capacity(c) - c->mem.dev_used;
	return 0;
}

/* A forward starts (the host's share of its step was charged when the step
 * began: allm_sim_host_step). */
static int sim_timer_start(allm_backend_t *be)
{
	struct sim_ctx *c = SIM(be);
	sim_fwd_begin(c);
	c->timer_t0 = c->now;
	c->fwd0 = sim_stamp(c);
	c->in_fwd = true;
	return 0;
}

static int sim_timer_stop(allm_backend_t *be, double *ret_seconds)
{
	struct sim_ctx *c = SIM(be);
	*ret_seconds = c->now - c->timer_t0;
	if (c->in_fwd) {
		c->in_fwd = false;
		sim_charge(c, 0, c->fwd0);
	}
	return 0;
}

static int sim_pages(allm_backend_t *be, void *ptr, size_t bytes, enum allm_pages_verb verb,
		     size_t *ret_bytes)
{
	int r = sim_mem_pages(&SIM(be)->mem, ptr, bytes, verb, ret_bytes);
	if (r)
		return allm_err_set(&be->last_err, r, "sim: pages of %zu bytes at %p: %s", bytes, ptr,
				    r == -ENOTSUP ? "not device memory" : r == -EINVAL ? "outside one allocation"
									       : "out of memory");
	return 0;
}

static const struct allm_backend_i sim_iface = {
	.version = ALLM_BACKEND_VERSION,
	.name = sim_name,
	.describe = sim_describe,
	.destroy = sim_destroy,
	.supports = sim_supports,
	.alloc = sim_alloc,
	.free = sim_free,
	.host_alloc = sim_host_alloc,
	.host_free = sim_free,
	.upload = sim_upload,
	.download = sim_download,
	.copy_async = sim_copy_async,
	.copy_wait = sim_copy_wait,
	.synchronize = sim_synchronize,
	.mem_info = sim_mem_info,
	.embedding = sim_embedding,
	.rmsnorm = sim_rmsnorm,
	.layernorm = sim_layernorm,
	.gemm = sim_gemm,
	.rope = sim_rope,
	.silu_mul = sim_silu_mul,
	.gelu_mul = sim_gelu_mul,
	.scale = sim_scale,
	.relu = sim_relu,
	.add = sim_add,
	.gather_rows = sim_gather_rows,
	.kv_write = sim_kv_write,
	.attention = sim_attention,
	.argmax = sim_argmax,
	.timer_start = sim_timer_start,
	.timer_stop = sim_timer_stop,
	.topk = sim_topk,
	.pages = sim_pages,
};

int allm_backend_sim_create(const char *profile, const struct allm_backend_opts *opts,
			    allm_backend_t **ret, struct allm_err *err)
{
	allm_backend_t *be = allm_calloc(1, sizeof(*be));
	struct sim_ctx *c = allm_calloc(1, sizeof(*c));
	int r;
	if (!be || !c) {
		r = allm_err_set(err, -ENOMEM, "sim backend: out of memory");
		goto fail;
	}
	if ((r = allm_sim_profile_load(profile, &c->prof, err)))
		goto fail;
	be->iface = &sim_iface;
	be->ctx = c;
	be->simulated = true;
	be->sim_dtype = c->prof->dtype;
	c->now = SIM_CLOCK_START;
	snprintf(c->desc, sizeof(c->desc), "sim:%s (simulated %s, profile %.8s)", c->prof->name,
		 c->prof->device, c->prof->hash);
	*ret = be;
	return 0;
fail:
	allm_free(c);
	allm_free(be);
	return r;
}

double allm_sim_now(allm_backend_t *be)
{
	return SIM(be)->now;
}

void allm_sim_host_step(allm_backend_t *be)
{
	struct sim_ctx *c = SIM(be);
	c->now += c->prof->host_step;
}

double allm_sim_disk_seconds(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs)
{
	struct sim_ctx *c = SIM(be);
	if (!c->prof->has_disk)
		return -ENOTSUP;
	return runs > 0 ? allm_sim_cost_disk(c->prof, write, (double)bytes) : 0;
}

double allm_sim_charge_disk(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs)
{
	double t = allm_sim_disk_seconds(be, write, bytes, runs);
	if (t > 0)
		SIM(be)->now += t;
	return t;
}

/* ---- the disk beside the clock ------------------------------------------------- */

static double disk_queue(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs, double *ret_start)
{
	struct sim_ctx *c = SIM(be);
	double start = ALLM_MAX(c->now, c->disk_idle);
	c->disk_idle = start + ALLM_MAX(0.0, allm_sim_disk_seconds(be, write, bytes, runs));
	if (ret_start)
		*ret_start = start;
	return c->disk_idle;
}

static double disk_wait(allm_backend_t *be, bool write, uint64_t bytes, int32_t runs, double *ret_queued)
{
	struct sim_ctx *c = SIM(be);
	double t0 = c->now;
	allm_sim_advance_to(be, c->disk_idle);
	*ret_queued = c->now - t0;
	allm_sim_charge_disk(be, write, bytes, runs);
	c->disk_idle = c->now;
	return c->now - t0;
}

/* The slot array covers n_slots (the disk tier's stage; it may be asked for
 * another size by another pool: the array grows, free slots are zeros). */
static int slots_fit(struct sim_ctx *c, int32_t n_slots)
{
	if (n_slots <= c->n_slot_end)
		return 0;
	double *v = allm_realloc(c->slot_end, (size_t)n_slots * sizeof(double));
	if (!v)
		return -ENOMEM;
	for (int32_t i = c->n_slot_end; i < n_slots; i++)
		v[i] = 0;
	c->slot_end = v;
	c->n_slot_end = n_slots;
	return 0;
}

static int32_t stage_free(allm_backend_t *be, int32_t n_slots)
{
	struct sim_ctx *c = SIM(be);
	int32_t k = 0;
	for (int32_t i = 0; i < n_slots; i++)
		k += i >= c->n_slot_end || c->slot_end[i] <= c->now;
	return k;
}

static int stage_take(allm_backend_t *be, int32_t n_slots, int32_t k, double until)
{
	struct sim_ctx *c = SIM(be);
	if (slots_fit(c, n_slots))
		return -ENOMEM;
	for (int32_t j = 0; j < n_slots && k > 0; j++)
		if (c->slot_end[j] <= c->now) {
			c->slot_end[j] = until;
			k--;
		}
	return 0;
}

static double disk_idle(allm_backend_t *be)
{
	return SIM(be)->disk_idle;
}

const struct allm_sim_disk_i *allm_sim_disk(void)
{
	static const struct allm_sim_disk_i disk = {disk_queue, disk_wait, stage_free, stage_take, disk_idle};
	return &disk;
}

void allm_sim_advance_to(allm_backend_t *be, double t)
{
	struct sim_ctx *c = SIM(be);
	if (t > c->now)
		c->now = t;
}

const struct allm_sim_profile *allm_sim_get_profile(allm_backend_t *be)
{
	return SIM(be)->prof;
}

double allm_sim_wall_seconds(allm_backend_t *be)
{
	return SIM(be)->wall;
}

double allm_sim_cpu_seconds(allm_backend_t *be)
{
	return SIM(be)->cpu;
}
