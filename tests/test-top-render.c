/* Description: allmctl top's model and drawing layers without a terminal or an engine: synthetic status maps and decisions, packed and decoded as on the wire, rendered into an in-memory grid at 120x40, 80x24 and every size down to 1x1; checks every panel's contents, the decision update in place, ASCII fallback, pause/help/waiting views and hostile strings. */
#include "ctl-proto.h"
#include "test-check.h"
#include "top.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct stats_in {
	int64_t pid;
	double uptime, tput, mape_recompute;
	const char *preempt, *model;
	int64_t gpu_used, clients;
};

/* A status map as PROTOCOL.md describes it, decoded by the same code allmctl uses. */
static struct allm_ctl_msg *pack_stats(const struct stats_in *in)
{
	struct allm_ctl_enc e;
	struct allm_ctl_msg *m = NULL;
	char err[128];
	int64_t i;

	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 29);
	allm_ctl_enc_kstr(&e, "model", in->model ? in->model : "stories260K");
	allm_ctl_enc_kstr(&e, "device", "cpu");
	allm_ctl_enc_kstr(&e, "name", "test-engine");
	allm_ctl_enc_kint(&e, "pid", in->pid);
	allm_ctl_enc_kdouble(&e, "uptime_s", in->uptime);
	allm_ctl_enc_kstr(&e, "state", "serving");
	allm_ctl_enc_kmap(&e, "policy", 2);
	allm_ctl_enc_kstr(&e, "preempt", in->preempt ? in->preempt : "adaptive");
	allm_ctl_enc_kstr(&e, "sched", "fair");
	allm_ctl_enc_kmap(&e, "limits", 2);
	allm_ctl_enc_kint(&e, "max_num_seqs", 256);
	allm_ctl_enc_kint(&e, "max_num_batched_tokens", 2048);
	allm_ctl_enc_kint(&e, "block_size", 16);
	allm_ctl_enc_kmap(&e, "queues", 3);
	allm_ctl_enc_kint(&e, "waiting", 12);
	allm_ctl_enc_kint(&e, "running", 4);
	allm_ctl_enc_kint(&e, "swapped", 2);
	allm_ctl_enc_kmap(&e, "top", 3);
	allm_ctl_enc_karray(&e, "waiting", 2);
	allm_ctl_enc_map(&e, 3);
	allm_ctl_enc_kint(&e, "id", 41);
	allm_ctl_enc_kdouble(&e, "priority", 0.93);
	allm_ctl_enc_kint(&e, "length", 120);
	allm_ctl_enc_map(&e, 3);
	allm_ctl_enc_kint(&e, "id", 17);
	allm_ctl_enc_kdouble(&e, "priority", 0.5);
	allm_ctl_enc_kint(&e, "length", 40);
	allm_ctl_enc_karray(&e, "running", 1);
	allm_ctl_enc_map(&e, 3);
	allm_ctl_enc_kint(&e, "id", 7);
	allm_ctl_enc_kdouble(&e, "priority", 2.5);
	allm_ctl_enc_kint(&e, "length", 64);
	allm_ctl_enc_karray(&e, "swapped", 0);
	allm_ctl_enc_kmap(&e, "blocks", 2);
	allm_ctl_enc_kmap(&e, "gpu", 2);
	allm_ctl_enc_kint(&e, "total", 24);
	allm_ctl_enc_kint(&e, "used", in->gpu_used);
	allm_ctl_enc_kmap(&e, "cpu", 2);
	allm_ctl_enc_kint(&e, "total", 8);
	allm_ctl_enc_kint(&e, "used", 2);
	allm_ctl_enc_kmap(&e, "prefix_cache", 6);
	allm_ctl_enc_kbool(&e, "enabled", true);
	allm_ctl_enc_kint(&e, "queried_tokens", 800);
	allm_ctl_enc_kint(&e, "hit_tokens", 320);
	allm_ctl_enc_kmap(&e, "cached_blocks", 3);
	allm_ctl_enc_kint(&e, "device", 11);
	allm_ctl_enc_kint(&e, "host", 22);
	allm_ctl_enc_kint(&e, "disk", 33);
	allm_ctl_enc_kint(&e, "restored_tokens", 64);
	allm_ctl_enc_kint(&e, "recomputed_cached_tokens", 48);
	allm_ctl_enc_kmap(&e, "preemptions", 2);
	allm_ctl_enc_kint(&e, "swap", 3);
	allm_ctl_enc_kint(&e, "recompute", 5);
	allm_ctl_enc_kmap(&e, "swapped_bytes", 2);
	allm_ctl_enc_kint(&e, "out", 3 * 1024 * 1024);
	allm_ctl_enc_kint(&e, "in", 1024);
	allm_ctl_enc_kint(&e, "recomputed_tokens", 777);
	allm_ctl_enc_kmap(&e, "steps", 3);
	allm_ctl_enc_kint(&e, "decode", 4321);
	allm_ctl_enc_kint(&e, "mixed", 55);
	allm_ctl_enc_kint(&e, "prefill", 6);
	allm_ctl_enc_kint(&e, "wasted_prefill_tokens", 99);
	allm_ctl_enc_kmap(&e, "tokens", 2);
	allm_ctl_enc_kint(&e, "prompt", 1000);
	allm_ctl_enc_kint(&e, "generated", 5000);
	allm_ctl_enc_kmap(&e, "requests", 2);
	allm_ctl_enc_kint(&e, "finished", 90);
	allm_ctl_enc_kint(&e, "failed", 1);
	allm_ctl_enc_kdouble(&e, "throughput_tok_s", in->tput);
	allm_ctl_enc_kdouble(&e, "gen_throughput_tok_s", in->tput / 2);
	allm_ctl_enc_kmap(&e, "ttft_ms", 4);
	allm_ctl_enc_kdouble(&e, "p50", 12.34);
	allm_ctl_enc_kdouble(&e, "p90", 30);
	allm_ctl_enc_kdouble(&e, "p99", 45.6);
	allm_ctl_enc_kdouble(&e, "mean", 15);
	allm_ctl_enc_kmap(&e, "tpot_ms", 4);
	allm_ctl_enc_kdouble(&e, "p50", 3.21);
	allm_ctl_enc_kdouble(&e, "p90", 4);
	allm_ctl_enc_kdouble(&e, "p99", 9.87);
	allm_ctl_enc_kdouble(&e, "mean", 3.5);
	allm_ctl_enc_kmap(&e, "e2e_ms", 0);
	allm_ctl_enc_kdouble(&e, "mean_weighted_turnaround", 1.25);
	allm_ctl_enc_kmap(&e, "predictor_mape", 2);
	allm_ctl_enc_kdouble(&e, "swap", 12.5);
	allm_ctl_enc_kdouble(&e, "recompute", in->mape_recompute); /* NAN packs nil */
	allm_ctl_enc_kint(&e, "clients", in->clients);
	allm_ctl_enc_karray(&e, "client_list", (uint32_t)in->clients);
	for (i = 0; i < in->clients; i++) {
		allm_ctl_enc_map(&e, 8);
		allm_ctl_enc_kint(&e, "id", i + 1);
		allm_ctl_enc_kint(&e, "pid", 4000 + i);
		allm_ctl_enc_kint(&e, "uid", 1000);
		allm_ctl_enc_kint(&e, "in_flight", 3);
		allm_ctl_enc_kint(&e, "submitted", 20);
		allm_ctl_enc_kint(&e, "rejected", i);
		allm_ctl_enc_kdouble(&e, "ring_fill", 0.25);
		allm_ctl_enc_kint(&e, "backlog", 0);
	}
	if (e.err || allm_ctl_decode(e.sb.data, e.sb.size, ALLM_CTL_MAX_REPLY, &m, err, sizeof(err)))
		fprintf(stderr, "pack_stats: %d %s\n", e.err, err);
	allm_ctl_enc_free(&e);
	return m;
}

static struct allm_ctl_msg *pack_decision(int64_t seq, int64_t req, const char *choice,
					  double measured)
{
	struct allm_ctl_enc e;
	struct allm_ctl_msg *m = NULL;
	char err[128];
	bool restore = !strcmp(choice, "restore");

	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 15);
	allm_ctl_enc_kstr(&e, "kind", restore ? "restore" : "preempt");
	allm_ctl_enc_kbool(&e, "estimated", restore);
	allm_ctl_enc_kint(&e, "seq", seq);
	allm_ctl_enc_kdouble(&e, "time_s", 60.5);
	allm_ctl_enc_kint(&e, "request", req);
	allm_ctl_enc_kint(&e, "tag", 0);
	allm_ctl_enc_kint(&e, "length", 96);
	allm_ctl_enc_kint(&e, "blocks", 6);
	allm_ctl_enc_kdouble(&e, "priority", 0.4);
	allm_ctl_enc_kdouble(&e, "pred_swap_ms", 1.25);
	allm_ctl_enc_kdouble(&e, "pred_recompute_ms", 3.5);
	allm_ctl_enc_kstr(&e, "choice", choice);
	allm_ctl_enc_kstr(&e, "reason", restore ? "restore cheaper" : "swap cheaper, CPU pool full");
	allm_ctl_enc_kdouble(&e, "measured_ms", measured);
	allm_ctl_enc_kbool(&e, "measured", !isnan(measured));
	if (e.err || allm_ctl_decode(e.sb.data, e.sb.size, ALLM_CTL_MAX_REPLY, &m, err, sizeof(err)))
		fprintf(stderr, "pack_decision: %d %s\n", e.err, err);
	allm_ctl_enc_free(&e);
	return m;
}

static void apply_stats(struct top_state *s, const struct stats_in *in)
{
	struct allm_ctl_msg *m = pack_stats(in);

	CHECK(m && top_model_apply_stats(s, m->root) == 0, "stats applied");
	allm_ctl_msg_free(m);
}

static void apply_decision(struct top_state *s, int64_t seq, int64_t req, const char *choice,
			   double measured)
{
	struct allm_ctl_msg *m = pack_decision(seq, req, choice, measured);

	CHECK(m && top_model_apply_decision(s, m->root) == 0, "decision applied");
	allm_ctl_msg_free(m);
}

static char row_buf[8192];

static const char *row(const struct top_grid *g, int y)
{
	top_grid_row_utf8(g, y, row_buf, sizeof(row_buf));
	return row_buf;
}

/* The first row holding needle, or -1. */
static int find(const struct top_grid *g, const char *needle)
{
	int y;

	for (y = 0; y < g->rows; y++)
		if (strstr(row(g, y), needle))
			return y;
	return -1;
}

static int count_rows(const struct top_grid *g, const char *needle)
{
	int y, n = 0;

	for (y = 0; y < g->rows; y++)
		n += strstr(row(g, y), needle) != NULL;
	return n;
}

static void dump(const struct top_grid *g)
{
	int y;

	for (y = 0; y < g->rows; y++)
		fprintf(stderr, "|%s\n", row(g, y));
}

#define HAS(g, needle) CHECK(find(g, needle) >= 0, "'%s' not drawn", needle)
/* needle on the same row as the first row holding anchor */
#define ON_ROW(g, anchor, needle) \
	CHECK(find(g, anchor) >= 0 && strstr(row(g, find(g, anchor)), needle), \
	      "'%s' not on the row of '%s': '%s'", needle, anchor, \
	      find(g, anchor) >= 0 ? row(g, find(g, anchor)) : "(none)")

static const char *titles[] = { "Queues", "KV blocks", "Throughput", "Latency",
				"Preemptions", "Predictor error", "Decisions", "Clients" };

static void check_full(const struct top_state *s, int rows, int cols)
{
	struct top_view v = { .name = "test-engine", .utf8 = true, .connected = true };
	struct top_grid g;
	size_t i;
	int fails = n_fail;

	CHECK(top_grid_init(&g, rows, cols) == 0, "grid");
	top_draw(s, &v, &g);
	ON_ROW(&g, "allmctl top  test-engine", "model stories260K");
	ON_ROW(&g, "allmctl top", "device cpu");
	ON_ROW(&g, "allmctl top", "up 0:01:05");
	ON_ROW(&g, "preempt adaptive", "sched fair");
	ON_ROW(&g, "preempt adaptive", "state serving");
	for (i = 0; i < sizeof(titles) / sizeof(titles[0]); i++)
		HAS(&g, titles[i]);
	ON_ROW(&g, "waiting ", "12");
	ON_ROW(&g, "waiting ", "#41");
	ON_ROW(&g, "running ", "#7");
	ON_ROW(&g, "GPU [", "18/24");
	ON_ROW(&g, "GPU [", "75%");
	ON_ROW(&g, "GPU [", "█");
	ON_ROW(&g, "CPU [", "2/8");
	ON_ROW(&g, "cache on", "hit 40%");
	ON_ROW(&g, "cache on", "11/22/33 blk");
	ON_ROW(&g, "now ", "1500.0 tok/s");
	ON_ROW(&g, "TTFT", "12.3");
	ON_ROW(&g, "TTFT", "45.6");
	ON_ROW(&g, "TPOT", "3.21");
	ON_ROW(&g, "TPOT", "9.87");
	HAS(&g, "mean weighted turnaround 1.250");
	HAS(&g, "swap 3  recompute 5  total 8");
	HAS(&g, "swapped out 3.0 MiB");
	HAS(&g, "steps dec/mix/pre 4321/55/6  wasted 99 tok");
	if (cols >= 120)
		ON_ROW(&g, "steps dec/mix/pre", "cached: restored 64 rec 48 tok");
	ON_ROW(&g, "swap 12.5 %", "recompute -");
	ON_ROW(&g, "   4001 ", "3");
	CHECK(find(&g, "waiting for engine") < 0, "connected view says waiting");
	/* Sparkline: the samples rose, so the lowest and the full block are both drawn, in order. */
	ON_ROW(&g, "max 1300", "▁▂");
	ON_ROW(&g, "max 1300", "▇█");
	if (n_fail > fails) {
		fprintf(stderr, "at %dx%d:\n", cols, rows);
		dump(&g);
	}
	top_grid_free(&g);
}

static void check_decisions(struct top_state *s)
{
	struct top_view v = { .name = "test-engine", .utf8 = true, .connected = true };
	struct top_grid g;
	int y;

	top_grid_init(&g, 40, 120);
	top_draw(s, &v, &g);
	HAS(&g, "no preemption or restore yet");
	apply_decision(s, 1, 501, "swap", NAN);
	apply_decision(s, 2, 502, "recompute", NAN);
	top_draw(s, &v, &g);
	y = find(&g, "   501 ");
	CHECK(y >= 0 && strstr(row(&g, y), "swap") && strstr(row(&g, y), "...") &&
		      strstr(row(&g, y), "1.25") && strstr(row(&g, y), "3.50") &&
		      strstr(row(&g, y), "swap cheaper, CPU pool full"),
	      "pending swap line: '%s'", y >= 0 ? row(&g, y) : "");
	/* The measured cost rewrites the same line, not a new one. */
	apply_decision(s, 1, 501, "swap", 1.1);
	top_draw(s, &v, &g);
	CHECK(count_rows(&g, "   501 ") == 1, "one line per decision");
	ON_ROW(&g, "   501 ", "1.10");
	ON_ROW(&g, "   502 ", "recompute");
	ON_ROW(&g, "   502 ", "...");
	CHECK(find(&g, "   501 ") < find(&g, "   502 "), "newest last");
	/* a cached prefix's choice, on the first estimate */
	apply_decision(s, 3, 503, "restore", NAN);
	top_draw(s, &v, &g);
	ON_ROW(&g, "   503 ", "restore");
	ON_ROW(&g, "   503 ", "~cached: restore cheaper");
	CHECK(s->n_dec == 3, "n_dec %d", s->n_dec);
	top_grid_free(&g);
}

static void check_views(const struct top_state *s)
{
	struct top_view v = { .name = "test-engine", .utf8 = false, .connected = true };
	struct top_state empty;
	struct top_grid g;
	int y, x, rows, cols, high = 0;

	top_grid_init(&g, 24, 80);
	/* ASCII: nothing outside 7 bits, bars as '#'. */
	top_draw(s, &v, &g);
	for (y = 0; y < g.rows; y++)
		for (x = 0; x < g.cols; x++)
			high += g.ch[(size_t)y * g.cols + x] >= 0x80;
	CHECK(high == 0, "%d non-ASCII cells in the ASCII view", high);
	ON_ROW(&g, "GPU [", "#");
	v.utf8 = true;
	v.paused = true;
	top_draw(s, &v, &g);
	ON_ROW(&g, "allmctl top", "PAUSED");
	v.paused = false;
	v.help = true;
	top_draw(s, &v, &g);
	HAS(&g, "Help");
	HAS(&g, "cycle preemption");
	v.help = false;
	snprintf(v.status, sizeof(v.status), "set: preempt \"adaptive\" -> \"swap\"");
	top_draw(s, &v, &g);
	CHECK(strstr(row(&g, 23), "preempt \"adaptive\" -> \"swap\"") != NULL, "status line: %s",
	      row(&g, 23));
	v.status[0] = '\0';
	/* No engine yet: the waiting line and no panels. */
	top_model_init(&empty);
	v.connected = false;
	top_draw(&empty, &v, &g);
	HAS(&g, "waiting for engine test-engine...");
	CHECK(find(&g, "Queues") < 0, "panels without data");
	/* Every size from 1x1 up: nothing drawn outside, nothing crashes. */
	top_grid_free(&g);
	for (rows = 1; rows <= 30; rows++)
		for (cols = 1; cols <= 130; cols += (cols < 90 ? 1 : 7)) {
			v.connected = rows % 2;
			v.help = cols % 3 == 0;
			v.paused = cols % 5 == 0;
			CHECK(top_grid_init(&g, rows, cols) == 0, "grid %dx%d", cols, rows);
			top_draw(s, &v, &g);
			top_grid_free(&g);
		}
}

static void check_model_edges(void)
{
	struct top_state s;
	struct stats_in in = { .pid = 1, .uptime = 1, .tput = 10, .mape_recompute = 3, .clients = 0 };
	struct top_view v = { .name = "x", .utf8 = true, .connected = true };
	struct allm_ctl_enc e;
	struct allm_ctl_msg *m = NULL;
	struct top_grid g;
	int i;

	top_model_init(&s);
	/* Decision ring: the oldest fall off, the newest stays reachable. */
	for (i = 0; i < TOP_DECISIONS + 72; i++)
		apply_decision(&s, i, i, "recompute", NAN);
	CHECK(s.n_dec == TOP_DECISIONS, "ring holds %d", s.n_dec);
	CHECK(top_model_decision(&s, 0)->seq == TOP_DECISIONS + 71, "newest");
	CHECK(top_model_decision(&s, TOP_DECISIONS - 1)->seq == 72, "oldest");
	CHECK(top_model_decision(&s, TOP_DECISIONS) == NULL, "past the end");
	/* A new engine process (another pid) starts the history over. */
	apply_stats(&s, &in);
	in.pid = 2;
	apply_stats(&s, &in);
	CHECK(s.n_dec == 0 && s.n_stats == 1 && s.spark_n == 1, "reset on a new pid");
	/* Hostile strings: control characters and invalid UTF-8 never reach the
	 * terminal; a long name is cut, not overflowed. */
	in.model = "evil\x1b[2J\x07name\xff\xc3(" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
	apply_stats(&s, &in);
	top_grid_init(&g, 24, 200);
	top_draw(&s, &v, &g);
	ON_ROW(&g, "allmctl top", "evil?[2J?name?" "?(");
	for (i = 0; i < g.rows * g.cols; i++)
		CHECK(g.ch[i] >= 0x20 && g.ch[i] != 0x7f, "control char at %d", i);
	top_grid_free(&g);
	/* A map with none of the keys is drawn with placeholders; a non-map is refused. */
	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 1);
	allm_ctl_enc_kint(&e, "pid", 2);
	CHECK(allm_ctl_decode(e.sb.data, e.sb.size, 1024, &m, NULL, 0) == 0, "decode");
	CHECK(m && top_model_apply_stats(&s, m->root) == 0, "sparse map");
	CHECK(!strcmp(s.preempt, "-") && isnan(s.ttft.p50) && s.gpu_total == 0, "placeholders");
	CHECK(m && top_model_apply_stats(&s, allm_ctl_get(m->root, "pid")) == -EINVAL, "not a map");
	CHECK(top_model_apply_decision(&s, NULL) == -EINVAL, "NULL decision");
	allm_ctl_msg_free(m);
	allm_ctl_enc_free(&e);
	top_grid_init(&g, 24, 80);
	top_draw(&s, &v, &g);
	HAS(&g, "preempt -  sched -");
	top_grid_free(&g);
}

int main(void)
{
	struct top_state *s = malloc(sizeof(*s));
	struct stats_in in = { .pid = 4242, .mape_recompute = NAN, .gpu_used = 18, .clients = 3 };
	int i;

	top_model_init(s);
	/* 30 snapshots 0.1 s apart, rising throughput: 6 sparkline samples (one per
	 * TOP_SPARK_DT = 0.5 s). */
	for (i = 0; i < 30; i++) {
		in.uptime = 62.1 + 0.1 * i;
		in.tput = 50.0 * (i + 1);
		apply_stats(s, &in);
	}
	CHECK(s->n_stats == 30, "n_stats %llu", (unsigned long long)s->n_stats);
	CHECK(s->spark_n == 6, "spark_n %d", s->spark_n);
	CHECK(top_model_spark(s, s->spark_n - 1) > top_model_spark(s, 0), "samples in order");
	check_full(s, 40, 120);
	check_full(s, 24, 80);
	check_full(s, 60, 200);
	check_decisions(s);
	check_views(s);
	check_model_edges();
	free(s);
	if (n_fail) {
		fprintf(stderr, "%d checks failed\n", n_fail);
		return 1;
	}
	printf("test-top-render: all checks passed\n");
	return 0;
}
