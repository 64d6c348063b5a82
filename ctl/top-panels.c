/* allmctl top: the panels. Each draws into its rect (row 0 its title) and clips
 * there, so the layout can hand it any size, down to the title alone. */
#include "top.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Rows after the title; y of content row i is r.y + 1 + i. */
#define TOP_ROWS(r) ((r).h - 1)

static const char *const top_qname[TOP_Q_N] = { "waiting", "running", "swapped" };

void top_panel_queues(const struct top_state *s, const struct top_view *v,
		      struct top_grid *g, struct top_rect r)
{
	int q, end = r.x + r.w;
	bool wide = r.w >= 60;

	top_title(g, r, "Queues", wide ? "top: #id priority tokens" : "#id:priority");
	for (q = 0; q < TOP_Q_N && q < TOP_ROWS(r); q++) {
		int y = r.y + 1 + q, x, i;
		x = top_grid_putf(g, y, r.x, end, TOP_A_DIM, "%-8s", top_qname[q]);
		x = top_grid_putf(g, y, x, end, TOP_A_BOLD, "%5lld", (long long)s->queue[q]);
		for (i = 0; i < s->n_top[q]; i++) {
			const struct top_entry *e = &s->top[q][i];
			char buf[64];
			int n = wide ? snprintf(buf, sizeof(buf), "  #%lld %.3g %lldt", (long long)e->id,
						e->priority, (long long)e->length)
				     : snprintf(buf, sizeof(buf), " #%lld:%.3g", (long long)e->id,
						e->priority);
			/* Whole entries only: a cut one reads as a different id. */
			if (x + n > end)
				break;
			x = top_grid_put(g, y, x, end, TOP_A_NORMAL, buf);
		}
	}
}

/* A usage bar: eighths of a cell in UTF-8, '#' in ASCII. */
static void top_bar(struct top_grid *g, int y, int x, int w, int64_t used, int64_t total)
{
	static const uint32_t eighth[8] = { ' ', 0x258f, 0x258e, 0x258d, 0x258c, 0x258b, 0x258a,
					    0x2589 };
	double f = total > 0 ? (double)used / (double)total : 0;
	int attr = f < 0.7 ? TOP_A_GOOD : f < 0.9 ? TOP_A_WARN : TOP_A_BAD;
	long e, i;

	if (w <= 0)
		return;
	if (f < 0)
		f = 0;
	if (f > 1)
		f = 1;
	e = lround(f * w * 8);
	for (i = 0; i < w; i++) {
		long cell = e - i * 8;
		uint32_t c;
		if (g->ascii_only)
			c = cell >= 4 ? '#' : '.';
		else if (cell >= 8)
			c = 0x2588;
		else if (cell > 0)
			c = eighth[cell];
		else
			c = 0x2591; /* light shade: the free part still reads as a bar */
		top_grid_putc(g, y, x + (int)i, cell > 0 || g->ascii_only ? attr : TOP_A_DIM, c);
	}
}

void top_panel_blocks(const struct top_state *s, const struct top_view *v,
		      struct top_grid *g, struct top_rect r)
{
	const char *label[3] = { "GPU", "CPU", "DSK" };
	int64_t used[3] = { s->gpu_used, s->cpu_used, s->disk_used };
	int64_t total[3] = { s->gpu_total, s->cpu_total, s->disk_total };
	int i, end = r.x + r.w, tiers = s->disk_total > 0 ? 3 : 2; /* the disk row only with a disk tier */

	top_title(g, r, "KV blocks", "used/total");
	/* the prefix cache under the pools, when there is a row for it */
	if (TOP_ROWS(r) > tiers) {
		char hit[16] = "-";
		if (s->pc_queried > 0)
			snprintf(hit, sizeof(hit), "%.0f%%", 100.0 * (double)s->pc_hit / (double)s->pc_queried);
		/* hits over prompt tokens looked up; cached blocks device/host/disk */
		top_grid_putf(g, r.y + 1 + tiers, r.x, end, s->pc_enabled ? TOP_A_NORMAL : TOP_A_DIM,
			      "cache %s hit %s  %lld/%lld/%lld blk", s->pc_enabled ? "on" : "off", hit,
			      (long long)s->pc_blocks[0], (long long)s->pc_blocks[1], (long long)s->pc_blocks[2]);
	}
	/* elastic memory's line between KV and activations, when there is a row */
	if (s->mem_elastic && TOP_ROWS(r) > tiers + 1)
		top_grid_putf(g, r.y + 2 + tiers, r.x, end, TOP_A_NORMAL, "pool KV %.0fM act %.0fM  +%lld/-%lld",
			      (double)s->mem_kv_bytes / 1048576.0, (double)s->mem_scratch_bytes / 1048576.0,
			      (long long)s->mem_inflations, (long long)s->mem_deflations);
	for (i = 0; i < tiers && i < TOP_ROWS(r); i++) {
		int y = r.y + 1 + i;
		char num[48];
		int nw, x;

		snprintf(num, sizeof(num), " %lld/%lld %3.0f%%", (long long)used[i],
			 (long long)total[i],
			 total[i] > 0 ? 100.0 * (double)used[i] / (double)total[i] : 0.0);
		nw = (int)strlen(num);
		x = top_grid_putf(g, y, r.x, end, TOP_A_DIM, "%s [", label[i]);
		/* The bar takes what the numbers leave; the numbers are never cut. */
		top_bar(g, y, x, end - x - 1 - nw, used[i], total[i]);
		if (end - x - 1 - nw > 0) {
			top_grid_put(g, y, end - 1 - nw, end, TOP_A_DIM, "]");
			top_grid_put(g, y, end - nw, end, TOP_A_BOLD, num);
		} else {
			top_grid_put(g, y, x, end, TOP_A_BOLD, num + 1);
		}
	}
}

static void top_sparkline(const struct top_state *s, struct top_grid *g, int y, int x, int w)
{
	static const uint32_t bars[8] = { 0x2581, 0x2582, 0x2583, 0x2584,
					  0x2585, 0x2586, 0x2587, 0x2588 };
	static const char ascii[8] = { '_', '.', '-', ':', '=', '+', '*', '#' };
	int n = s->spark_n < w ? s->spark_n : w, i, first = s->spark_n - n;
	double max = 0;

	for (i = 0; i < n; i++)
		if (top_model_spark(s, first + i) > max)
			max = top_model_spark(s, first + i);
	for (i = 0; i < n; i++) {
		double val = top_model_spark(s, first + i);
		int lvl;
		if (!(val > 0) || !(max > 0)) {
			top_grid_putc(g, y, x + i, TOP_A_DIM, g->ascii_only ? '_' : 0x2581);
			continue;
		}
		lvl = (int)ceil(val / max * 8) - 1;
		lvl = lvl < 0 ? 0 : lvl > 7 ? 7 : lvl;
		top_grid_putc(g, y, x + i, TOP_A_GOOD, g->ascii_only ? (uint32_t)ascii[lvl] : bars[lvl]);
	}
}

void top_panel_throughput(const struct top_state *s, const struct top_view *v,
			  struct top_grid *g, struct top_rect r)
{
	int end = r.x + r.w, x;
	char max[32] = "";
	double m = 0;
	int i;

	top_title(g, r, "Throughput", "tokens/s, last 30 s");
	if (TOP_ROWS(r) < 1)
		return;
	x = top_grid_put(g, r.y + 1, r.x, end, TOP_A_DIM, "now ");
	x = top_grid_putf(g, r.y + 1, x, end, TOP_A_BOLD, "%.1f", s->tput);
	top_grid_putf(g, r.y + 1, x, end, TOP_A_DIM, " tok/s  gen %.1f tok/s", s->gen_tput);
	if (TOP_ROWS(r) < 2)
		return;
	for (i = 0; i < s->spark_n; i++)
		if (top_model_spark(s, i) > m)
			m = top_model_spark(s, i);
	snprintf(max, sizeof(max), " max %.0f", m);
	x = r.w - (int)strlen(max) >= 10 ? end - (int)strlen(max) : end;
	top_sparkline(s, g, r.y + 2, r.x, x - r.x < TOP_SPARK_N ? x - r.x : TOP_SPARK_N);
	if (x < end)
		top_grid_put(g, r.y + 2, x, end, TOP_A_DIM, max);
}

void top_panel_latency(const struct top_state *s, const struct top_view *v,
		       struct top_grid *g, struct top_rect r)
{
	const char *label[2] = { "TTFT", "TPOT" };
	const struct top_pct *p[2] = { &s->ttft, &s->tpot };
	int i, end = r.x + r.w;

	top_title(g, r, "Latency", "ms, last 1000 requests");
	for (i = 0; i < 2 && i < TOP_ROWS(r); i++) {
		char a[24], b[24];
		int y = r.y + 1 + i, x;
		top_fmt_ms(a, sizeof(a), p[i]->p50);
		top_fmt_ms(b, sizeof(b), p[i]->p99);
		x = top_grid_putf(g, y, r.x, end, TOP_A_DIM, "%s  p50 ", label[i]);
		x = top_grid_putf(g, y, x, end, TOP_A_BOLD, "%8s", a);
		x = top_grid_put(g, y, x, end, TOP_A_DIM, "  p99 ");
		top_grid_putf(g, y, x, end, TOP_A_BOLD, "%8s", b);
	}
	if (TOP_ROWS(r) >= 3) {
		int x = top_grid_put(g, r.y + 3, r.x, end, TOP_A_DIM, "mean weighted turnaround ");
		if (isnan(s->mwt))
			top_grid_put(g, r.y + 3, x, end, TOP_A_DIM, "-");
		else
			top_grid_putf(g, r.y + 3, x, end, TOP_A_BOLD, "%.3f", s->mwt);
	}
}

void top_panel_preemptions(const struct top_state *s, const struct top_view *v,
			   struct top_grid *g, struct top_rect r)
{
	char out[24], in[24];
	int end = r.x + r.w, x, y = r.y + 1;

	top_title(g, r, "Preemptions", NULL);
	if (TOP_ROWS(r) < 1)
		return;
	x = top_grid_put(g, y, r.x, end, TOP_A_DIM, "swap ");
	x = top_grid_putf(g, y, x, end, TOP_A_BOLD, "%lld", (long long)s->pre_swap);
	x = top_grid_put(g, y, x, end, TOP_A_DIM, "  recompute ");
	x = top_grid_putf(g, y, x, end, TOP_A_BOLD, "%lld", (long long)s->pre_recompute);
	if (s->disk_total > 0) {
		x = top_grid_put(g, y, x, end, TOP_A_DIM, "  disk ");
		x = top_grid_putf(g, y, x, end, TOP_A_BOLD, "%lld", (long long)s->pre_disk);
	}
	top_grid_putf(g, y, x, end, TOP_A_DIM, "  total %lld",
		      (long long)(s->pre_swap + s->pre_recompute + s->pre_disk));
	if (TOP_ROWS(r) < 2)
		return;
	top_fmt_bytes(out, sizeof(out), s->swapped_out);
	top_fmt_bytes(in, sizeof(in), s->swapped_in);
	x = top_grid_putf(g, y + 1, r.x, end, TOP_A_DIM, "swapped out %s in %s  recomputed %lld tok",
			  out, in, (long long)s->recomputed_tokens);
	if (s->disk_total > 0) {
		top_fmt_bytes(out, sizeof(out), s->disk_write);
		top_fmt_bytes(in, sizeof(in), s->disk_read);
		top_grid_putf(g, y + 1, x, end, TOP_A_DIM, "  disk w %s r %s", out, in);
	}
	if (TOP_ROWS(r) < 3)
		return;
	/* steps by kind: what chunked prefill and fair's headroom change */
	x = top_grid_putf(g, y + 2, r.x, end, TOP_A_DIM,
			  "steps dec/mix/pre %lld/%lld/%lld  wasted %lld tok",
			  (long long)s->steps_decode, (long long)s->steps_mixed,
			  (long long)s->steps_prefill, (long long)s->wasted_prefill_tokens);
	/* cached prefixes found in a lower tier: brought back, or computed again */
	top_grid_putf(g, y + 2, x, end, TOP_A_DIM, "  cached: restored %lld rec %lld tok", (long long)s->pc_restored,
		      (long long)s->pc_recomputed);
}

void top_panel_predictor(const struct top_state *s, const struct top_view *v,
			 struct top_grid *g, struct top_rect r)
{
	const char *label[3] = { "swap ", "  recompute ", "  disk " };
	double mape[3] = { s->mape_swap, s->mape_recompute, s->mape_disk };
	int i, end = r.x + r.w, x = r.x, y = r.y + 1, n = s->disk_total > 0 ? 3 : 2;

	top_title(g, r, "Predictor error", "rolling MAPE");
	if (TOP_ROWS(r) < 1)
		return;
	for (i = 0; i < n; i++) {
		x = top_grid_put(g, y, x, end, TOP_A_DIM, label[i]);
		if (isnan(mape[i]))
			x = top_grid_put(g, y, x, end, TOP_A_DIM, "-");
		else
			x = top_grid_putf(g, y, x, end,
					  mape[i] < 20 ? TOP_A_GOOD : mape[i] < 50 ? TOP_A_WARN : TOP_A_BAD,
					  "%.1f %%", mape[i]);
	}
	/* the decisions' own error: each measured preemption's prediction of the
	 * path it took against what that cost (the step and copy models above
	 * learn from every prefill step and copy) */
	double dm[2] = { s->dec_mape_swap, s->dec_mape_recompute };
	const char *dl[2] = { "  | decisions: swap ", " recompute " };
	for (i = 0; i < 2; i++) {
		x = top_grid_put(g, y, x, end, TOP_A_DIM, dl[i]);
		if (isnan(dm[i]))
			x = top_grid_put(g, y, x, end, TOP_A_DIM, "-");
		else
			x = top_grid_putf(g, y, x, end, dm[i] < 20 ? TOP_A_GOOD : dm[i] < 50 ? TOP_A_WARN : TOP_A_BAD,
					  "%.1f %%", dm[i]);
	}
}

/* How much of a decision line fits: the reason (up to ~28 columns: "swap cheaper,
 * CPU pool full") matters more than when it happened, so the time goes first. */
enum top_dec_layout {
	TOP_DEC_COMPACT, /* req, predictions, short choice, measured, reason */
	TOP_DEC_MID,     /* + length, full choice */
	TOP_DEC_FULL,    /* + time */
};

static void top_decision_line(struct top_grid *g, int y, int x, int end,
			      const struct top_decision *d, enum top_dec_layout l)
{
	char ps[24], pr[24], me[24];
	bool swap = strcmp(d->choice, "swap") == 0, disk = strcmp(d->choice, "disk") == 0;
	bool restore = strcmp(d->choice, "restore") == 0, split = strcmp(d->choice, "split") == 0;

	top_fmt_ms(ps, sizeof(ps), d->pred_swap_ms);
	top_fmt_ms(pr, sizeof(pr), d->pred_recompute_ms);
	if (d->measured)
		top_fmt_ms(me, sizeof(me), d->measured_ms);
	else
		snprintf(me, sizeof(me), "...");
	if (l == TOP_DEC_FULL)
		x = top_grid_putf(g, y, x, end, TOP_A_NORMAL, "%6.1f ", d->time_s);
	if (l >= TOP_DEC_MID)
		x = top_grid_putf(g, y, x, end, TOP_A_NORMAL, "%6lld %5lld %7s %7s ",
				  (long long)d->request, (long long)d->length, ps, pr);
	else
		x = top_grid_putf(g, y, x, end, TOP_A_NORMAL, "%5lld %6s %6s ",
				  (long long)d->request, ps, pr);
	x = top_grid_putf(g, y, x, end, swap || disk || restore || split ? TOP_A_WARN : TOP_A_TITLE,
			  l >= TOP_DEC_MID ? "%-9s" : "%-4s",
			  l >= TOP_DEC_MID ? d->choice
			  : swap ? "swap" : disk ? "disk" : restore ? "rest" : split ? "splt" : "rec");
	x = top_grid_putf(g, y, x, end, d->measured ? TOP_A_BOLD : TOP_A_DIM, " %7s", me);
	/* a cached prefix's choice is marked as such; "~": on the first estimate */
	top_grid_putf(g, y, x, end, TOP_A_DIM, "  %s%s%s", d->estimated ? "~" : "", d->restore ? "cached: " : "",
		      d->reason);
}

void top_panel_decisions(const struct top_state *s, const struct top_view *v,
			 struct top_grid *g, struct top_rect r)
{
	int rows = TOP_ROWS(r) - 1, end = r.x + r.w, i, n, x = r.x;
	enum top_dec_layout l = r.w >= 82 ? TOP_DEC_FULL : r.w >= 55 ? TOP_DEC_MID : TOP_DEC_COMPACT;

	top_title(g, r, "Decisions", "swap/restore vs recompute, predicted ms");
	if (TOP_ROWS(r) < 1)
		return;
	/* The same widths as top_decision_line's fields. */
	if (l == TOP_DEC_FULL)
		x = top_grid_putf(g, r.y + 1, x, end, TOP_A_DIM, "%6s ", "time s");
	if (l >= TOP_DEC_MID)
		top_grid_putf(g, r.y + 1, x, end, TOP_A_DIM, "%6s %5s %7s %7s %-9s %7s  %s", "req",
			      "len", "swap ms", "rec ms", "choice", "meas ms", "reason");
	else
		top_grid_putf(g, r.y + 1, x, end, TOP_A_DIM, "%5s %6s %6s %-4s %7s  %s", "req",
			      "swapms", "recms", "pick", "meas ms", "reason");
	if (!s->n_dec && rows > 0) {
		top_grid_put(g, r.y + 2, r.x, end, TOP_A_DIM, "no preemption or restore yet");
		return;
	}
	/* Newest at the bottom, as in a log; older lines scroll off the top. */
	n = s->n_dec < rows ? s->n_dec : rows;
	for (i = 0; i < n; i++)
		top_decision_line(g, r.y + 2 + i, r.x, end, top_model_decision(s, n - 1 - i), l);
}

void top_panel_clients(const struct top_state *s, const struct top_view *v,
		       struct top_grid *g, struct top_rect r)
{
	int rows = TOP_ROWS(r) - 1, end = r.x + r.w, i, shown;
	char hint[32];

	snprintf(hint, sizeof(hint), "%lld connected", (long long)s->n_clients);
	top_title(g, r, "Clients", hint);
	if (TOP_ROWS(r) < 1)
		return;
	top_grid_put(g, r.y + 1, r.x, end, TOP_A_DIM,
		     "     id     pid  in-flight  ring  rejected");
	shown = s->n_client_rows < rows ? s->n_client_rows : rows;
	/* Keep the last row for the count of the rest when they do not all fit. */
	if (shown < s->n_clients && shown == rows && rows > 0)
		shown--;
	for (i = 0; i < shown; i++) {
		const struct top_client *c = &s->clients[i];
		top_grid_putf(g, r.y + 2 + i, r.x, end,
			      c->ring_fill >= 0.9 ? TOP_A_BAD : TOP_A_NORMAL,
			      "%7lld %7lld %10lld %4.0f%% %9lld", (long long)c->id,
			      (long long)c->pid, (long long)c->in_flight, 100 * c->ring_fill,
			      (long long)c->rejected);
	}
	if (shown < s->n_clients && rows > shown)
		top_grid_putf(g, r.y + 2 + shown, r.x, end, TOP_A_DIM, "+%lld more",
			      (long long)(s->n_clients - shown));
}
