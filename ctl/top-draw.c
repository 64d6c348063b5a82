/* allmctl top: the layout, header, status bar and help overlay. Pure: state and
 * view in, grid out (top.h); the panels themselves are in top-panels.c.
 *
 * Layout: row 0 the header, row 1 the engine's details (or "waiting for engine"),
 * the last row the status bar; the body between them holds two columns of panels
 * (one column below TOP_TWO_COLS columns). Panels get their natural height in a
 * fixed order while rows remain and the log-like ones (decisions, clients) share
 * what is left, so a small terminal loses the bottom panels, never the layout. */
#include "top.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TOP_TWO_COLS 72 /* below this one column: two would truncate every line */

void top_fmt_ms(char *buf, size_t n, double ms)
{
	if (isnan(ms))
		snprintf(buf, n, "-");
	else if (ms < 10)
		snprintf(buf, n, "%.2f", ms);
	else if (ms < 1000)
		snprintf(buf, n, "%.1f", ms);
	else
		snprintf(buf, n, "%.0f", ms);
}

void top_fmt_bytes(char *buf, size_t n, int64_t b)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%lld B", (long long)b);
	else
		snprintf(buf, n, "%.1f %s", v, unit[u]);
}

static void top_fmt_uptime(char *buf, size_t n, double s)
{
	long long t = (isnan(s) || s < 0) ? 0 : (long long)s;

	if (t >= 86400)
		snprintf(buf, n, "%lldd %02lld:%02lld:%02lld", t / 86400, t / 3600 % 24,
			 t / 60 % 60, t % 60);
	else
		snprintf(buf, n, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
}

void top_title(struct top_grid *g, struct top_rect r, const char *title, const char *hint)
{
	int x;

	if (r.h < 1 || r.w < 1)
		return;
	top_grid_fill(g, r.y, r.x, r.x + r.w, TOP_A_DIM, g->ascii_only ? '-' : 0x2500);
	x = top_grid_put(g, r.y, r.x + 1, r.x + r.w, TOP_A_DIM, " ");
	x = top_grid_put(g, r.y, x, r.x + r.w, TOP_A_TITLE, title);
	x = top_grid_put(g, r.y, x, r.x + r.w, TOP_A_DIM, " ");
	if (hint && x + 2 + (int)strlen(hint) < r.x + r.w)
		top_grid_putf(g, r.y, x + 1, r.x + r.w, TOP_A_DIM, " %s ", hint);
}

static void top_draw_header(const struct top_state *s, const struct top_view *v,
			    struct top_grid *g)
{
	char up[32];
	const char *model = strrchr(s->model, '/');
	int x, end = g->cols;

	top_grid_fill(g, 0, 0, g->cols, TOP_A_HEADER, ' ');
	/* PAUSED sits at the right edge first so that a narrow terminal cuts the
	 * details rather than the one word that explains a frozen screen. */
	if (v->paused && g->cols >= 8) {
		end = g->cols - 8;
		top_grid_put(g, 0, end, g->cols, TOP_A_BAD, " PAUSED ");
	}
	x = top_grid_putf(g, 0, 0, end, TOP_A_HEADER, " allmctl top  %s", v->name);
	if (!s->n_stats)
		return;
	top_fmt_uptime(up, sizeof(up), s->uptime_s);
	/* A model directory's last component names it; the path would crowd the rest. */
	model = model && model[1] ? model + 1 : s->model;
	top_grid_putf(g, 0, x, end, TOP_A_HEADER, "  model %s  device %s  up %s", model,
		      s->device, up);
}

static void top_draw_info(const struct top_state *s, const struct top_view *v,
			  struct top_grid *g)
{
	int x;

	if (g->rows < 3)
		return;
	if (!v->connected || !s->n_stats) {
		top_grid_putf(g, 1, 1, g->cols, TOP_A_BAD, "waiting for engine %s...%s", v->name,
			      s->n_stats ? " (last known state below)" : "");
		return;
	}
	/* The policies lead: they are what the p and s keys change. */
	x = top_grid_put(g, 1, 1, g->cols, TOP_A_DIM, "preempt ");
	x = top_grid_put(g, 1, x, g->cols, TOP_A_BOLD, s->preempt);
	x = top_grid_put(g, 1, x, g->cols, TOP_A_DIM, "  sched ");
	x = top_grid_put(g, 1, x, g->cols, TOP_A_BOLD, s->sched);
	x = top_grid_put(g, 1, x, g->cols, TOP_A_DIM, "  state ");
	x = top_grid_put(g, 1, x, g->cols,
			 strcmp(s->state, "serving") ? TOP_A_WARN : TOP_A_GOOD, s->state);
	/* Counters that move under load come before the static limits. */
	top_grid_putf(g, 1, x, g->cols, TOP_A_DIM,
		      "  finished %lld  failed %lld  tokens %lld+%lld  clients %lld  pid %lld  "
		      "block %lld tok  max seqs %lld  max batched %lld",
		      (long long)s->req_finished, (long long)s->req_failed,
		      (long long)s->tok_prompt, (long long)s->tok_generated,
		      (long long)s->n_clients, (long long)s->pid, (long long)s->block_size,
		      (long long)s->max_num_seqs, (long long)s->max_num_batched_tokens);
}

static void top_draw_status(const struct top_view *v, struct top_grid *g)
{
	int y = g->rows - 1;

	if (g->rows < 2)
		return;
	top_grid_fill(g, y, 0, g->cols, TOP_A_HEADER, ' ');
	if (v->status[0])
		top_grid_put(g, y, 1, g->cols, v->status_error ? TOP_A_BAD : TOP_A_HEADER,
			     v->status);
	else
		top_grid_put(g, y, 1, g->cols, TOP_A_HEADER,
			     "q quit  p preempt  s sched  g/G gpu -/+10%  c/C cpu -/+10%  "
			     "space pause  ? help");
}

/* A column of panels: fixed ones first, in order, then `flex` ones sharing the rest. */
struct top_slot {
	top_panel_fn fn;
	int want; /* rows including the title; 0 = takes a share of what is left */
};

static void top_stack(const struct top_state *s, const struct top_view *v, struct top_grid *g,
		      struct top_rect r, const struct top_slot *slot, int n)
{
	int i, left = r.h, nflex = 0, y = r.y, fixed = 0;

	for (i = 0; i < n; i++) {
		if (slot[i].want)
			fixed += slot[i].want;
		else
			nflex++;
	}
	for (i = 0; i < n && left > 0; i++) {
		struct top_rect p = r;
		int h = slot[i].want;

		if (!h) {
			/* Share what the fixed panels after this one do not need. */
			int rest = left - fixed;
			h = nflex > 0 && rest > 0 ? rest / nflex : 0;
			nflex--;
			if (h < 2)
				continue;
		} else {
			fixed -= h;
		}
		if (h > left)
			h = left;
		p.y = y;
		p.h = h;
		slot[i].fn(s, v, g, p);
		y += h;
		left -= h;
	}
}

static void top_draw_help(struct top_grid *g)
{
	static const char *lines[] = {
		"p      cycle preemption: adaptive > recompute > swap",
		"s      scheduler: fair <> fcfs",
		"g / G  GPU KV blocks -10 % / +10 %",
		"c / C  CPU (swap) blocks -10 % / +10 %",
		"space  pause the view (data still received)",
		"?      this help (any key closes it)",
		"q      quit (also Ctrl-C)",
	};
	int n = (int)(sizeof(lines) / sizeof(lines[0]));
	int w = 58, h = n + 4, y0, x0, i;
	uint32_t hz = g->ascii_only ? '-' : 0x2500, vt = g->ascii_only ? '|' : 0x2502;

	if (w > g->cols)
		w = g->cols;
	if (h > g->rows)
		h = g->rows;
	y0 = (g->rows - h) / 2;
	x0 = (g->cols - w) / 2;
	for (i = 0; i < h; i++) {
		int edge = i == 0 || i == h - 1;
		top_grid_fill(g, y0 + i, x0, x0 + w, TOP_A_NORMAL, edge ? hz : ' ');
		top_grid_putc(g, y0 + i, x0, TOP_A_NORMAL, edge ? (g->ascii_only ? '+' : (i ? 0x2514 : 0x250c)) : vt);
		top_grid_putc(g, y0 + i, x0 + w - 1, TOP_A_NORMAL,
			      edge ? (g->ascii_only ? '+' : (i ? 0x2518 : 0x2510)) : vt);
	}
	top_grid_put(g, y0, x0 + 2, x0 + w - 1, TOP_A_TITLE, " Help ");
	for (i = 0; i < n && 2 + i < h - 1; i++)
		top_grid_put(g, y0 + 2 + i, x0 + 2, x0 + w - 1, TOP_A_NORMAL, lines[i]);
}

void top_draw(const struct top_state *s, const struct top_view *v, struct top_grid *g)
{
	static const struct top_slot left2[] = {
		{ top_panel_queues, 4 }, { top_panel_blocks, 5 }, { top_panel_throughput, 3 },
		{ top_panel_latency, 4 }, { top_panel_clients, 0 },
	};
	static const struct top_slot right2[] = {
		{ top_panel_preemptions, 4 }, { top_panel_predictor, 2 }, { top_panel_decisions, 0 },
	};
	static const struct top_slot one[] = {
		{ top_panel_queues, 4 }, { top_panel_blocks, 5 }, { top_panel_throughput, 3 },
		{ top_panel_latency, 4 }, { top_panel_preemptions, 4 }, { top_panel_predictor, 2 },
		{ top_panel_decisions, 0 }, { top_panel_clients, 0 },
	};
	struct top_rect body = { .y = 2, .x = 0, .h = g->rows - 3, .w = g->cols };

	g->ascii_only = !v->utf8;
	top_grid_clear(g);
	top_draw_header(s, v, g);
	top_draw_info(s, v, g);
	top_draw_status(v, g);
	if (s->n_stats && body.h > 0) {
		if (g->cols >= TOP_TWO_COLS) {
			struct top_rect l = body, r = body;
			/* The right column wants ~76 columns for a whole decision line
			 * (reason included); the left one is content with ~40. */
			l.w = g->cols * 2 / 5;
			if (l.w > g->cols - 77)
				l.w = g->cols - 77;
			if (l.w < 34)
				l.w = 34;
			r.x = l.w + 1;
			r.w = g->cols - r.x;
			top_stack(s, v, g, l, left2, 5);
			top_stack(s, v, g, r, right2, 3);
		} else {
			top_stack(s, v, g, body, one, 8);
		}
	}
	if (v->help)
		top_draw_help(g);
}
