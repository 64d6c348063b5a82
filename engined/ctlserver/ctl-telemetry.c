/* The status map of ctl/PROTOCOL.md: the `status` reply and the `stats` telemetry
 * body (10 Hz), built straight into msgpack from the engine's counters, queues,
 * the rolling windows and the daemon's clients. */
#include "ctl-enc-check.h"
#include "ctl-internal.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

const char *ctl_state_name(const struct ctl_server *s)
{
	if (s->calibrating)
		return "calibrating";
	switch (s->h.ops->state(s->h.user)) {
	case CTL_HOST_SHUTTING_DOWN: return "shutting_down";
	case CTL_HOST_PAUSED: return allm_engine_idle(s->h.eng) ? "drained" : "draining";
	default: return "serving";
	}
}

int64_t ctl_in_flight(const struct ctl_server *s)
{
	struct allm_engine_stats st;
	allm_engine_get_stats(s->h.eng, &st);
	return (int64_t)st.waiting + st.running + st.swapped;
}

static void enc_pctl(struct allm_ctl_enc *e, const char *key, const struct allm_pctl *p)
{
	allm_ctl_enc_kmap(e, key, 4);
	allm_ctl_enc_kdouble(e, "p50", p->p50);
	allm_ctl_enc_kdouble(e, "p90", p->p90);
	allm_ctl_enc_kdouble(e, "p99", p->p99);
	allm_ctl_enc_kdouble(e, "mean", p->mean);
}

/* Up to CTL_STATUS_TOP entries of queue q, highest priority first. */
static void enc_top(struct ctl_server *s, struct allm_ctl_enc *e, const char *key,
		    enum allm_req_state q, double now)
{
	struct allm_request_info best[CTL_STATUS_TOP];
	double pri[CTL_STATUS_TOP];
	int n = 0;
	const struct allm_request *page[256];
	/* a queue may be long: keep the best few in one pass over a bounded page */
	int got = allm_engine_list(s->h.eng, q, page, (int)ALLM_ARRAY_SIZE(page));
	for (int i = 0; i < got; i++) {
		struct allm_request_info r;
		allm_engine_info(page[i], now, &r);
		double p = r.priority;
		int at = n;
		while (at > 0 && pri[at - 1] < p)
			at--;
		if (at >= CTL_STATUS_TOP)
			continue;
		int last = n < CTL_STATUS_TOP ? n : CTL_STATUS_TOP - 1;
		for (int k = last; k > at; k--) {
			best[k] = best[k - 1];
			pri[k] = pri[k - 1];
		}
		best[at] = r;
		pri[at] = p;
		if (n < CTL_STATUS_TOP)
			n++;
	}
	allm_ctl_enc_karray(e, key, (uint32_t)n);
	for (int i = 0; i < n; i++) {
		allm_ctl_enc_map(e, 3);
		allm_ctl_enc_kint(e, "id", best[i].id);
		allm_ctl_enc_kdouble(e, "priority", pri[i]);
		allm_ctl_enc_kint(e, "length", best[i].length);
	}
}

static void enc_clients(struct ctl_server *s, struct allm_ctl_enc *e)
{
	struct ctl_client_info ci[CTL_STATUS_MAX_CLIENTS];
	uint32_t n = s->h.ops->clients(s->h.user, ci, CTL_STATUS_MAX_CLIENTS);
	uint32_t shown = ALLM_MIN(n, (uint32_t)CTL_STATUS_MAX_CLIENTS);
	allm_ctl_enc_kint(e, "clients", n);
	allm_ctl_enc_karray(e, "client_list", shown);
	for (uint32_t i = 0; i < shown; i++) {
		const struct ctl_client_info *c = &ci[i];
		allm_ctl_enc_map(e, 8);
		allm_ctl_enc_kint(e, "id", c->id);
		allm_ctl_enc_kint(e, "pid", c->pid);
		allm_ctl_enc_kint(e, "uid", c->uid);
		allm_ctl_enc_kint(e, "in_flight", c->in_flight);
		allm_ctl_enc_kint(e, "submitted", (int64_t)c->submitted);
		allm_ctl_enc_kint(e, "rejected", (int64_t)c->rejected);
		allm_ctl_enc_kdouble(e, "ring_fill", c->ring_fill);
		allm_ctl_enc_kint(e, "backlog", c->backlog);
	}
}

/* status' keys, in the order ctl_encode_status writes them: the map's count is this
 * table's, and ctl_encode_status asserts what it wrote has exactly these keys (a key
 * added below and not here, or here and not below, fails every test that asks for
 * the status). */
#define CTL_STATUS_KEYS(X) \
	X(model) \
	X(device) \
	X(name) \
	X(pid) \
	X(uptime_s) \
	X(state) \
	X(policy) \
	X(limits) \
	X(block_size) \
	X(queues) \
	X(top) \
	X(blocks) \
	X(memory) \
	X(prefix_cache) \
	X(prefix_tiers) \
	X(kv_events) \
	X(preemptions) \
	X(disk_bytes) \
	X(swapped_bytes) \
	X(recomputed_tokens) \
	X(steps) \
	X(wasted_prefill_tokens) \
	X(max_wait_steps) \
	X(max_wait_ratio) \
	X(tokens) \
	X(requests) \
	X(throughput_tok_s) \
	X(gen_throughput_tok_s) \
	X(ttft_ms) \
	X(tpot_ms) \
	X(e2e_ms) \
	X(mean_weighted_turnaround) \
	X(predictor_mape) \
	X(decision_mape) \
	X(memory_bytes) \
	X(clients) \
	X(client_list)

#define CTL_STATUS_KEY_STR_(k) #k,
static const char *const status_keys[] = {CTL_STATUS_KEYS(CTL_STATUS_KEY_STR_)};
#undef CTL_STATUS_KEY_STR_

void ctl_encode_status(struct ctl_server *s, struct allm_ctl_enc *e)
{
	const struct ctl_host *h = &s->h;
	struct allm_engine_stats st;
	struct ctl_stats_view v;
	const struct allm_engine_config *cfg = allm_engine_get_config(h->eng);
	double now = allm_now();
	allm_engine_get_stats(h->eng, &st);
	ctl_stats_view(&s->stats, &v);

	size_t start = e->sb.size;
	allm_ctl_enc_map(e, (uint32_t)ALLM_ARRAY_SIZE(status_keys));
	allm_ctl_enc_kstr(e, "model", h->rt->model_desc);
	allm_ctl_enc_kstr(e, "device", h->rt->be->iface->describe(h->rt->be));
	allm_ctl_enc_kstr(e, "name", h->name);
	allm_ctl_enc_kint(e, "pid", getpid());
	allm_ctl_enc_kdouble(e, "uptime_s", now - s->start);
	allm_ctl_enc_kstr(e, "state", ctl_state_name(s));
	allm_ctl_enc_kmap(e, "policy", (uint32_t)ctl_status_settings_count("policy"));
	ctl_encode_status_settings(s, e, "policy");
	allm_ctl_enc_kmap(e, "limits", (uint32_t)ctl_status_settings_count("limits"));
	ctl_encode_status_settings(s, e, "limits");
	allm_ctl_enc_kint(e, "block_size", h->rt->kv->lay.block_size);
	allm_ctl_enc_kmap(e, "queues", 3);
	allm_ctl_enc_kint(e, "waiting", st.waiting);
	allm_ctl_enc_kint(e, "running", st.running);
	allm_ctl_enc_kint(e, "swapped", st.swapped);
	allm_ctl_enc_kmap(e, "top", 3);
	double eng_now = allm_backend_clock(h->rt->be); /* priorities: the engine's clock */
	enc_top(s, e, "waiting", ALLM_REQ_WAITING, eng_now);
	enc_top(s, e, "running", ALLM_REQ_RUNNING, eng_now);
	enc_top(s, e, "swapped", ALLM_REQ_SWAPPED, eng_now);
	/* used: held by requests; cached: held by the prefix cache alone
	 * (reclaimable); free + used + cached = total */
	allm_ctl_enc_kmap(e, "blocks", 3);
	allm_ctl_enc_kmap(e, "gpu", 3);
	allm_ctl_enc_kint(e, "total", st.gpu_total);
	allm_ctl_enc_kint(e, "used", st.gpu_used);
	allm_ctl_enc_kint(e, "cached", st.gpu_cached_free);
	allm_ctl_enc_kmap(e, "cpu", 3);
	allm_ctl_enc_kint(e, "total", st.cpu_total);
	allm_ctl_enc_kint(e, "used", st.cpu_used);
	allm_ctl_enc_kint(e, "cached", st.cpu_cached);
	allm_ctl_enc_kmap(e, "disk", 3); /* 0/0 without a disk tier */
	allm_ctl_enc_kint(e, "total", st.disk_total);
	allm_ctl_enc_kint(e, "used", st.disk_used);
	allm_ctl_enc_kint(e, "cached", st.disk_cached);
	/* elastic memory (DESIGN §5c): the pool's split now, its decisions so far */
	allm_ctl_enc_kmap(e, "memory", 14);
	allm_ctl_enc_kbool(e, "elastic", st.elastic);
	allm_ctl_enc_kint(e, "pool_bytes", st.pool_bytes);
	allm_ctl_enc_kint(e, "kv_bytes", (int64_t)st.gpu_total * (int64_t)h->rt->kv->block_bytes);
	allm_ctl_enc_kint(e, "scratch_bytes", st.scratch_bytes);
	allm_ctl_enc_kint(e, "resident_bytes", st.resident_bytes);
	allm_ctl_enc_kint(e, "inflations", st.inflations);
	allm_ctl_enc_kint(e, "deflations", st.deflations);
	allm_ctl_enc_kint(e, "blocks_inflated", st.blocks_inflated);
	allm_ctl_enc_kint(e, "blocks_deflated", st.blocks_deflated);
	allm_ctl_enc_kint(e, "max_running", st.max_running);
	/* the SLO buffer (0: no SLO set), its moves; phase-aware swaps */
	allm_ctl_enc_kint(e, "slo_buffer_tokens", st.slo_buffer_tokens);
	allm_ctl_enc_kint(e, "slo_shrinks", st.slo_shrinks);
	allm_ctl_enc_kint(e, "slo_grows", st.slo_grows);
	allm_ctl_enc_kint(e, "phase_swaps", st.phase_swaps);
	ctl_encode_prefix(e, &st, cfg->prefix_caching);
	ctl_kvevents_encode_status(s->kv, e); /* who reads the KV events, what replays cost */
	allm_ctl_enc_kmap(e, "preemptions", 3);
	allm_ctl_enc_kint(e, "swap", st.preempt_swap);
	allm_ctl_enc_kint(e, "recompute", st.preempt_recompute);
	allm_ctl_enc_kint(e, "disk", st.preempt_disk);
	allm_ctl_enc_kmap(e, "disk_bytes", 6);
	allm_ctl_enc_kint(e, "write", st.disk_write_bytes);
	allm_ctl_enc_kint(e, "read", st.disk_read_bytes);
	allm_ctl_enc_kint(e, "demotions", st.demotions);
	allm_ctl_enc_kint(e, "fallbacks", st.disk_fallbacks);
	allm_ctl_enc_kint(e, "stage_hits", st.disk_stage_hits);
	allm_ctl_enc_kint(e, "reads_ahead", st.disk_reads_ahead);
	allm_ctl_enc_kmap(e, "swapped_bytes", 2);
	allm_ctl_enc_kint(e, "out", st.swap_out_bytes);
	allm_ctl_enc_kint(e, "in", st.swap_in_bytes);
	allm_ctl_enc_kint(e, "recomputed_tokens", st.recompute_tokens);
	/* steps by kind and the work fair's anti-thrash is about (DESIGN §6) */
	allm_ctl_enc_kmap(e, "steps", 3);
	allm_ctl_enc_kint(e, "decode", st.decode_steps - st.mixed_steps);
	allm_ctl_enc_kint(e, "mixed", st.mixed_steps);
	allm_ctl_enc_kint(e, "prefill", st.prefill_steps - st.mixed_steps);
	allm_ctl_enc_kint(e, "wasted_prefill_tokens", st.wasted_prefill_tokens);
	allm_ctl_enc_kint(e, "max_wait_steps", st.max_wait_steps);
	allm_ctl_enc_kdouble(e, "max_wait_ratio", st.max_wait_ratio);
	allm_ctl_enc_kmap(e, "tokens", 2);
	allm_ctl_enc_kint(e, "prompt", st.prompt_tokens);
	allm_ctl_enc_kint(e, "generated", st.generated_tokens);
	allm_ctl_enc_kmap(e, "requests", 2);
	allm_ctl_enc_kint(e, "finished", st.finished);
	allm_ctl_enc_kint(e, "failed", st.failed);
	allm_ctl_enc_kdouble(e, "throughput_tok_s", v.throughput_tok_s);
	allm_ctl_enc_kdouble(e, "gen_throughput_tok_s", v.gen_throughput_tok_s);
	enc_pctl(e, "ttft_ms", &v.ttft);
	enc_pctl(e, "tpot_ms", &v.tpot);
	enc_pctl(e, "e2e_ms", &v.e2e);
	allm_ctl_enc_kdouble(e, "mean_weighted_turnaround", v.mean_weighted_turnaround);
	allm_ctl_enc_kmap(e, "predictor_mape", 3);
	allm_ctl_enc_kdouble(e, "swap", st.mape_swap);
	allm_ctl_enc_kdouble(e, "recompute", st.mape_recompute);
	allm_ctl_enc_kdouble(e, "disk", st.disk_total ? st.mape_disk : NAN);
	/* the decisions' own error: the prediction of the path taken against its cost */
	allm_ctl_enc_kmap(e, "decision_mape", 4);
	allm_ctl_enc_kdouble(e, "swap", st.dec_mape_swap);
	allm_ctl_enc_kdouble(e, "recompute", st.dec_mape_recompute);
	allm_ctl_enc_kint(e, "measured", st.dec_measured);
	allm_ctl_enc_kint(e, "regret", st.dec_regret);
	/* extension: counted allocations (common/common.h), for the dashboard */
	allm_ctl_enc_kint(e, "memory_bytes", (int64_t)allm_mem_in_use());
	enc_clients(s, e); /* clients, client_list */
	/* always on: a few KB unpacked a second; the keys do not depend on the run, so
	 * every test that asks fails on a drift, and a build never ships one */
	char why[128];
	if (ctl_enc_check_map(e, start, status_keys, (uint32_t)ALLM_ARRAY_SIZE(status_keys), why, sizeof(why))) {
		fprintf(stderr, "status: %s\n", why);
		abort();
	}
}
