/* allmctl top: the dashboard's state, built from decoded telemetry (PROTOCOL.md's
 * status map and `decision` bodies). No I/O, so the unit test drives it with
 * messages it packs itself.
 *
 * Every field is read leniently: a key that is missing or of another type shows
 * as "-" / 0 / NAN rather than rejecting the whole snapshot, because an engine one
 * version older or newer than allmctl should still be watchable. */
#include "top.h"

#include "ctl-proto.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void top_model_init(struct top_state *s)
{
	memset(s, 0, sizeof(*s));
	s->uptime_s = NAN;
	s->ttft.p50 = s->ttft.p99 = s->tpot.p50 = s->tpot.p99 = NAN;
	s->mwt = s->mape_swap = s->mape_recompute = s->mape_disk = NAN;
	s->dec_mape_swap = s->dec_mape_recompute = NAN;
	s->spark_last_s = NAN;
}

static int64_t top_i64(const msgpack_object *m, const char *path)
{
	int64_t v = 0;

	if (allm_ctl_get_int(m, path, &v) < 0) {
		/* Counters arrive as floats from some encoders; take them too. */
		double d;
		if (allm_ctl_get_double(m, path, &d) == 0 && isfinite(d))
			v = (int64_t)d;
	}
	return v;
}

static double top_dbl(const msgpack_object *m, const char *path)
{
	double v = NAN;

	allm_ctl_get_double(m, path, &v);
	return v;
}

static void top_str(const msgpack_object *m, const char *path, char *buf, size_t cap)
{
	int r = allm_ctl_get_strbuf(m, path, buf, cap);

	/* -ENOSPC leaves a truncated copy, which is what a narrow panel shows anyway. */
	if (r < 0 && r != -ENOSPC)
		snprintf(buf, cap, "-");
}

static void top_read_top(struct top_state *s, const msgpack_object *m)
{
	static const char *const path[TOP_Q_N] = { "top.waiting", "top.running", "top.swapped" };
	int q;

	for (q = 0; q < TOP_Q_N; q++) {
		const msgpack_object *a;
		uint32_t i;

		s->n_top[q] = 0;
		if (allm_ctl_get_array(m, path[q], &a) < 0)
			continue;
		for (i = 0; i < a->via.array.size && s->n_top[q] < TOP_TOPN; i++) {
			const msgpack_object *e = &a->via.array.ptr[i];
			struct top_entry *t = &s->top[q][s->n_top[q]];
			if (e->type != MSGPACK_OBJECT_MAP)
				continue;
			t->id = top_i64(e, "id");
			t->priority = top_dbl(e, "priority");
			t->length = top_i64(e, "length");
			s->n_top[q]++;
		}
	}
}

static void top_read_clients(struct top_state *s, const msgpack_object *m)
{
	const msgpack_object *a;
	uint32_t i;

	s->n_client_rows = 0;
	if (allm_ctl_get_array(m, "client_list", &a) < 0)
		return;
	for (i = 0; i < a->via.array.size && s->n_client_rows < TOP_CLIENTS; i++) {
		const msgpack_object *e = &a->via.array.ptr[i];
		struct top_client *c = &s->clients[s->n_client_rows];
		if (e->type != MSGPACK_OBJECT_MAP)
			continue;
		c->id = top_i64(e, "id");
		c->pid = top_i64(e, "pid");
		c->in_flight = top_i64(e, "in_flight");
		c->submitted = top_i64(e, "submitted");
		c->rejected = top_i64(e, "rejected");
		c->backlog = top_i64(e, "backlog");
		c->ring_fill = top_dbl(e, "ring_fill");
		if (isnan(c->ring_fill))
			c->ring_fill = 0;
		s->n_client_rows++;
	}
	/* An engine that omits `clients` still has the rows we were given. */
	if (s->n_clients < s->n_client_rows)
		s->n_clients = s->n_client_rows;
}

/* One throughput sample every TOP_SPARK_DT seconds of engine time, so the
 * sparkline spans a fixed time whatever the telemetry rate (and a status reply
 * applied between two `stats` does not add a point). */
static void top_spark_push(struct top_state *s)
{
	double v = isfinite(s->tput) && s->tput > 0 ? s->tput : 0;

	if (s->spark_n && isfinite(s->uptime_s) && isfinite(s->spark_last_s) &&
	    s->uptime_s >= s->spark_last_s && s->uptime_s - s->spark_last_s < TOP_SPARK_DT - 1e-6)
		return;
	s->spark_last_s = s->uptime_s;
	if (s->spark_n < TOP_SPARK_N) {
		s->spark[(s->spark_head + s->spark_n) % TOP_SPARK_N] = v;
		s->spark_n++;
	} else {
		s->spark[s->spark_head] = v;
		s->spark_head = (s->spark_head + 1) % TOP_SPARK_N;
	}
}

int top_model_apply_stats(struct top_state *s, const struct msgpack_object *m)
{
	int64_t pid;

	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	pid = top_i64(m, "pid");
	/* A restarted engine numbers decisions from 0 again and its history is not
	 * this one's: start over rather than mix the two. */
	if (s->n_stats && pid != s->pid)
		top_model_init(s);
	s->pid = pid;
	top_str(m, "name", s->name, sizeof(s->name));
	top_str(m, "model", s->model, sizeof(s->model));
	top_str(m, "device", s->device, sizeof(s->device));
	top_str(m, "state", s->state, sizeof(s->state));
	top_str(m, "policy.preempt", s->preempt, sizeof(s->preempt));
	top_str(m, "policy.sched", s->sched, sizeof(s->sched));
	s->uptime_s = top_dbl(m, "uptime_s");
	s->block_size = top_i64(m, "block_size");
	s->max_num_seqs = top_i64(m, "limits.max_num_seqs");
	s->max_num_batched_tokens = top_i64(m, "limits.max_num_batched_tokens");
	s->queue[TOP_Q_WAITING] = top_i64(m, "queues.waiting");
	s->queue[TOP_Q_RUNNING] = top_i64(m, "queues.running");
	s->queue[TOP_Q_SWAPPED] = top_i64(m, "queues.swapped");
	top_read_top(s, m);
	s->gpu_used = top_i64(m, "blocks.gpu.used");
	s->gpu_total = top_i64(m, "blocks.gpu.total");
	s->cpu_used = top_i64(m, "blocks.cpu.used");
	s->cpu_total = top_i64(m, "blocks.cpu.total");
	s->disk_used = top_i64(m, "blocks.disk.used");
	s->disk_total = top_i64(m, "blocks.disk.total");
	s->gpu_cached = top_i64(m, "blocks.gpu.cached");
	s->cpu_cached = top_i64(m, "blocks.cpu.cached");
	s->disk_cached = top_i64(m, "blocks.disk.cached");
	s->mem_elastic = false;
	allm_ctl_get_bool(m, "memory.elastic", &s->mem_elastic);
	s->mem_kv_bytes = top_i64(m, "memory.kv_bytes");
	s->mem_scratch_bytes = top_i64(m, "memory.scratch_bytes");
	s->mem_inflations = top_i64(m, "memory.inflations");
	s->mem_deflations = top_i64(m, "memory.deflations");
	s->pc_enabled = false;
	allm_ctl_get_bool(m, "prefix_cache.enabled", &s->pc_enabled);
	s->pc_queried = top_i64(m, "prefix_cache.queried_tokens");
	s->pc_hit = top_i64(m, "prefix_cache.hit_tokens");
	s->pc_restored = top_i64(m, "prefix_cache.restored_tokens");
	s->pc_recomputed = top_i64(m, "prefix_cache.recomputed_cached_tokens");
	s->pc_blocks[0] = top_i64(m, "prefix_cache.cached_blocks.device");
	s->pc_blocks[1] = top_i64(m, "prefix_cache.cached_blocks.host");
	s->pc_blocks[2] = top_i64(m, "prefix_cache.cached_blocks.disk");
	s->pre_disk = top_i64(m, "preemptions.disk");
	s->disk_write = top_i64(m, "disk_bytes.write");
	s->disk_read = top_i64(m, "disk_bytes.read");
	s->demotions = top_i64(m, "disk_bytes.demotions");
	s->pre_swap = top_i64(m, "preemptions.swap");
	s->pre_recompute = top_i64(m, "preemptions.recompute");
	s->swapped_out = top_i64(m, "swapped_bytes.out");
	s->swapped_in = top_i64(m, "swapped_bytes.in");
	s->recomputed_tokens = top_i64(m, "recomputed_tokens");
	s->steps_decode = top_i64(m, "steps.decode");
	s->steps_mixed = top_i64(m, "steps.mixed");
	s->steps_prefill = top_i64(m, "steps.prefill");
	s->wasted_prefill_tokens = top_i64(m, "wasted_prefill_tokens");
	s->tok_prompt = top_i64(m, "tokens.prompt");
	s->tok_generated = top_i64(m, "tokens.generated");
	s->req_finished = top_i64(m, "requests.finished");
	s->req_failed = top_i64(m, "requests.failed");
	s->tput = top_dbl(m, "throughput_tok_s");
	s->gen_tput = top_dbl(m, "gen_throughput_tok_s");
	if (isnan(s->tput))
		s->tput = 0;
	if (isnan(s->gen_tput))
		s->gen_tput = 0;
	s->ttft.p50 = top_dbl(m, "ttft_ms.p50");
	s->ttft.p99 = top_dbl(m, "ttft_ms.p99");
	s->tpot.p50 = top_dbl(m, "tpot_ms.p50");
	s->tpot.p99 = top_dbl(m, "tpot_ms.p99");
	s->mwt = top_dbl(m, "mean_weighted_turnaround");
	s->mape_swap = top_dbl(m, "predictor_mape.swap");
	s->mape_recompute = top_dbl(m, "predictor_mape.recompute");
	s->mape_disk = top_dbl(m, "predictor_mape.disk");
	s->dec_mape_swap = top_dbl(m, "decision_mape.swap");
	s->dec_mape_recompute = top_dbl(m, "decision_mape.recompute");
	s->n_clients = top_i64(m, "clients");
	top_read_clients(s, m);
	top_spark_push(s);
	s->n_stats++;
	return 0;
}

int top_model_apply_decision(struct top_state *s, const struct msgpack_object *m)
{
	struct top_decision d = { 0 }, *slot = NULL;
	bool measured = false;
	int i;

	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	d.seq = top_i64(m, "seq");
	d.time_s = top_dbl(m, "time_s");
	d.request = top_i64(m, "request");
	d.length = top_i64(m, "length");
	d.blocks = top_i64(m, "blocks");
	d.pred_swap_ms = top_dbl(m, "pred_swap_ms");
	d.pred_recompute_ms = top_dbl(m, "pred_recompute_ms");
	top_str(m, "choice", d.choice, sizeof(d.choice));
	top_str(m, "reason", d.reason, sizeof(d.reason));
	char kind[16] = "";
	top_str(m, "kind", kind, sizeof(kind));
	d.restore = strcmp(kind, "restore") == 0; /* the wire's text, decoded once here */
	allm_ctl_get_bool(m, "estimated", &d.estimated);
	d.measured_ms = top_dbl(m, "measured_ms");
	allm_ctl_get_bool(m, "measured", &measured);
	d.measured = measured && !isnan(d.measured_ms);
	/* The measured update repeats the decision's seq: rewrite that line in place
	 * (newest first: it is almost always among the last few). */
	for (i = 0; i < s->n_dec; i++) {
		struct top_decision *o = (struct top_decision *)top_model_decision(s, i);
		if (o->seq == d.seq) {
			slot = o;
			break;
		}
	}
	if (!slot) {
		if (s->n_dec < TOP_DECISIONS) {
			slot = &s->dec[(s->dec_head + s->n_dec) % TOP_DECISIONS];
			s->n_dec++;
		} else {
			slot = &s->dec[s->dec_head];
			s->dec_head = (s->dec_head + 1) % TOP_DECISIONS;
		}
	}
	*slot = d;
	s->n_decisions++;
	return 0;
}

const struct top_decision *top_model_decision(const struct top_state *s, int i)
{
	if (i < 0 || i >= s->n_dec)
		return NULL;
	return &s->dec[(s->dec_head + s->n_dec - 1 - i) % TOP_DECISIONS];
}

double top_model_spark(const struct top_state *s, int i)
{
	if (i < 0 || i >= s->spark_n)
		return 0;
	return s->spark[(s->spark_head + i) % TOP_SPARK_N];
}
