/* allmctl top: the loop. One poll() on the telemetry socket's ZMQ_FD, stdin and a
 * 100 ms timer; telemetry goes into the live state (top-model.c) whether or not
 * the view is paused; the view is drawn into a grid (top-draw.c) and copied to
 * ncurses; keys become `set` commands on the same client's DEALER socket. */
#include "top.h"

#include "allmctl.h"

#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define TOP_TICK_MS 100   /* redraw at least this often: uptime, "waiting" state */
#define TOP_STALE_S 2.0   /* no `stats` for this long: the engine is gone */
#define TOP_CALL_MS 2000  /* longest a key may freeze the view waiting for a reply */

/* The one global (STYLE): set by SIGINT/SIGTERM, read by the loop. */
static volatile sig_atomic_t top_quit;

static void top_on_signal(int sig)
{
	(void)sig;
	top_quit = 1;
}

static double top_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct top_ctx {
	const struct allmctl_opts *o;
	struct allm_ctl_client *c;
	struct top_state *live;   /* everything received */
	struct top_state *frozen; /* what a paused view shows */
	struct top_view view;
	struct top_grid grid;
	double last_stats;        /* top_now() of the last `stats`; 0 = never */
	int timeout_ms;
	bool dirty;               /* something the view shows changed */
	bool colors;              /* color pairs 1-4 are set up */
};

/* Drains every telemetry message queued (ZMQ_FD is edge-triggered: stop only at
 * -EAGAIN). Malformed messages are dropped by the client and counted nowhere: a
 * dashboard should not stop on one bad snapshot. */
static void top_drain(struct top_ctx *t)
{
	struct allm_ctl_msg *m;
	int r, n = 0;

	/* Bounded, so a flood of telemetry cannot starve the keyboard. */
	while (n++ < 1000) {
		m = NULL;
		r = allm_ctl_recv(t->c, 0, &m);
		if (r == -EBADMSG || r == -EMSGSIZE)
			continue;
		if (r < 0)
			break;
		/* A paused view shows t->frozen: nothing to redraw for new data. */
		if (!strcmp(m->topic, "stats")) {
			if (top_model_apply_stats(t->live, m->root) == 0)
				t->last_stats = top_now();
			t->dirty |= !t->view.paused;
		} else if (!strcmp(m->topic, "decision")) {
			top_model_apply_decision(t->live, m->root);
			t->dirty |= !t->view.paused;
		}
		allm_ctl_msg_free(m);
	}
}

static void top_status(struct top_ctx *t, bool error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void top_status(struct top_ctx *t, bool error, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->view.status, sizeof(t->view.status), fmt, ap);
	va_end(ap);
	t->view.status_error = error;
	t->dirty = true;
}

/* The reply's {"changed": [{key, old, new}]} as "key old -> new, ...". */
static void top_show_changed(struct top_ctx *t, const struct allm_ctl_msg *m)
{
	const msgpack_object *a;
	char buf[sizeof(t->view.status)] = "set: ";
	size_t at = strlen(buf);
	uint32_t i;

	if (allm_ctl_get_array(m->result, "changed", &a) < 0 || a->via.array.size == 0) {
		top_status(t, false, "set: nothing changed");
		return;
	}
	for (i = 0; i < a->via.array.size && at < sizeof(buf); i++) {
		const msgpack_object *e = &a->via.array.ptr[i];
		char key[32];
		char *o = allm_ctl_to_json(allm_ctl_get(e, "old"), false);
		char *n = allm_ctl_to_json(allm_ctl_get(e, "new"), false);
		if (allm_ctl_get_strbuf(e, "key", key, sizeof(key)) < 0)
			snprintf(key, sizeof(key), "?");
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%s %s -> %s", i ? ", " : "",
				       key, o ? o : "?", n ? n : "?");
		free(o);
		free(n);
	}
	top_status(t, false, "%s", buf);
}

/* Sends `set {key: sval or ival}` and shows the reply. Blocks up to timeout_ms:
 * the view is not redrawn meanwhile, telemetry queues in ZeroMQ. */
static void top_render(struct top_ctx *t);

static void top_set(struct top_ctx *t, const char *key, const char *sval, int64_t ival)
{
	struct allm_ctl_enc e;
	struct allm_ctl_msg *m = NULL;
	int r;

	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 1);
	if (sval)
		allm_ctl_enc_kstr(&e, key, sval);
	else
		allm_ctl_enc_kint(&e, key, ival);
	if (e.err) {
		top_status(t, true, "set %s: %s", key, strerror(-e.err));
		goto out;
	}
	/* Say what we wait for: the screen is not redrawn until the reply. */
	if (sval)
		top_status(t, false, "set %s=%s ...", key, sval);
	else
		top_status(t, false, "set %s=%lld ...", key, (long long)ival);
	top_render(t);
	r = allm_ctl_call(t->c, "set", e.sb.data, e.sb.size, t->timeout_ms, &m);
	if (r < 0)
		top_status(t, true, "set %s failed: %s", key, allm_ctl_client_error(t->c));
	else
		top_show_changed(t, m);
out:
	allm_ctl_msg_free(m);
	allm_ctl_enc_free(&e);
}

/* g/G/c/C: the pool size 10 % down or up, by at least one block. */
static void top_resize_pool(struct top_ctx *t, bool gpu, bool up)
{
	int64_t total = gpu ? t->live->gpu_total : t->live->cpu_total;
	int64_t step = total / 10 > 0 ? total / 10 : 1;
	int64_t next = up ? total + step : total - step;

	/* The GPU pool cannot be empty (nothing could run); the swap pool may be. */
	if (next < (gpu ? 1 : 0)) {
		top_status(t, true, "%s blocks already at the minimum", gpu ? "GPU" : "CPU");
		return;
	}
	top_set(t, gpu ? "gpu_blocks" : "cpu_blocks", NULL, next);
}

/* Returns false when the key quits. */
static bool top_key(struct top_ctx *t, int k)
{
	if (k == 'q' || k == 'Q')
		return false;
	t->dirty = true;
	if (t->view.help) {
		/* Any key closes the overlay, and does only that. */
		t->view.help = false;
		return true;
	}
	if (k == ' ') {
		t->view.paused = !t->view.paused;
		if (t->view.paused)
			*t->frozen = *t->live;
		return true;
	}
	if (k == '?') {
		t->view.help = true;
		return true;
	}
	if (k > 0 && k < 128 && strchr("psgGcC", k) && !t->live->n_stats) {
		top_status(t, true, "no engine state yet: nothing to change");
		return true;
	}
	switch (k) {
	case 'p':
		top_set(t, "preempt",
			!strcmp(t->live->preempt, "adaptive")	 ? "recompute"
			: !strcmp(t->live->preempt, "recompute") ? "swap"
								 : "adaptive",
			0);
		break;
	case 's':
		top_set(t, "sched", !strcmp(t->live->sched, "fair") ? "fcfs" : "fair", 0);
		break;
	case 'g':
	case 'G':
		top_resize_pool(t, true, k == 'G');
		break;
	case 'c':
	case 'C':
		top_resize_pool(t, false, k == 'C');
		break;
	default:
		break;
	}
	return true;
}

static attr_t top_curses_attr(int a, bool colors)
{
	switch (a) {
	case TOP_A_BOLD:
		return A_BOLD;
	case TOP_A_TITLE:
		return A_BOLD | (colors ? COLOR_PAIR(1) : 0);
	case TOP_A_HEADER:
		return A_REVERSE;
	case TOP_A_GOOD:
		return colors ? COLOR_PAIR(2) : A_NORMAL;
	case TOP_A_WARN:
		return colors ? COLOR_PAIR(3) : A_BOLD;
	case TOP_A_BAD:
		return A_BOLD | (colors ? COLOR_PAIR(4) : A_REVERSE);
	case TOP_A_DIM:
		return A_DIM;
	default:
		return A_NORMAL;
	}
}

/* Copies the grid to the screen, one attribute run at a time. */
static void top_blit(const struct top_grid *g, bool colors)
{
	wchar_t run[1024];
	int y, x;

	erase();
	for (y = 0; y < g->rows; y++) {
		for (x = 0; x < g->cols;) {
			uint8_t a = g->attr[(size_t)y * g->cols + x];
			int x0 = x, n = 0;
			while (x < g->cols && g->attr[(size_t)y * g->cols + x] == a &&
			       n < (int)(sizeof(run) / sizeof(run[0])) - 1)
				run[n++] = (wchar_t)g->ch[(size_t)y * g->cols + x++];
			run[n] = 0;
			attrset(top_curses_attr(a, colors));
			/* The bottom-right cell makes addnwstr return ERR (the cursor cannot
			 * advance past it) after drawing it: not an error for us. */
			mvaddnwstr(y, x0, run, n);
		}
	}
	attrset(A_NORMAL);
	refresh();
}

static int top_fit_grid(struct top_ctx *t)
{
	if (t->grid.rows == LINES && t->grid.cols == COLS)
		return 0;
	top_grid_free(&t->grid);
	t->dirty = true;
	return top_grid_init(&t->grid, LINES, COLS);
}

static void top_render(struct top_ctx *t)
{
	t->view.connected = t->last_stats > 0 && top_now() - t->last_stats < TOP_STALE_S;
	top_draw(t->view.paused ? t->frozen : t->live, &t->view, &t->grid);
	top_blit(&t->grid, t->colors);
	t->dirty = false;
}

static int top_loop(struct top_ctx *t)
{
	bool was_connected = false;
	int fd = allm_ctl_client_fd(t->c);

	top_render(t);
	while (!top_quit) {
		struct pollfd p[2] = { { .fd = 0, .events = POLLIN }, { .fd = fd, .events = POLLIN } };
		int k, r = poll(p, fd >= 0 ? 2 : 1, TOP_TICK_MS);
		bool connected;

		if (r < 0 && errno != EINTR)
			return -errno;
		/* The terminal went away: nobody to draw for. */
		if (r > 0 && (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)))
			return 0;
		/* Always drain: the edge may have been consumed by a `set` call. */
		top_drain(t);
		while ((k = getch()) != ERR) {
			if (k == KEY_RESIZE) {
				if (top_fit_grid(t) < 0)
					return -ENOMEM;
				continue;
			}
			if (!top_key(t, k))
				return 0;
		}
		connected = t->last_stats > 0 && top_now() - t->last_stats < TOP_STALE_S;
		if (connected != was_connected)
			t->dirty = true;
		was_connected = connected;
		/* Redraw on every `stats` (~10 Hz) and decision; a paused view only on
		 * keys, resizes and connection changes. */
		if (t->dirty)
			top_render(t);
	}
	return 0;
}

/* newterm() rather than initscr(): initscr() exits the process when the terminal
 * cannot be set up; this returns NULL and the caller says why. */
static SCREEN *top_curses_start(bool color, bool *ret_colors)
{
	SCREEN *scr = newterm(NULL, stdout, stdin);

	if (!scr)
		return NULL;
	set_term(scr);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);
	*ret_colors = false;
	if (color && has_colors() && start_color() == OK) {
		use_default_colors();
		init_pair(1, COLOR_CYAN, -1);
		init_pair(2, COLOR_GREEN, -1);
		init_pair(3, COLOR_YELLOW, -1);
		init_pair(4, COLOR_RED, -1);
		*ret_colors = true;
	}
	return scr;
}

static void top_usage(FILE *f)
{
	fprintf(f, "usage: allmctl [--name NAME] top [--ascii] [--no-color] [--once [--cols N] "
		   "[--rows N]]\n"
		   "  --once   print one frame as text after the first snapshot and exit\n"
		   "           (status 3 when no engine answered within --timeout)\n");
}

/* --once: waits for one snapshot (and the decisions queued with it), prints the
 * grid as text. For scripts and terminals without curses. */
static int top_once(struct top_ctx *t, int rows, int cols)
{
	double end = top_now() + t->timeout_ms / 1000.0;
	char line[4096];
	int y;

	while (!top_quit && t->last_stats == 0 && top_now() < end) {
		struct allm_ctl_msg *m = NULL;
		if (allm_ctl_recv(t->c, 50, &m) == 0) {
			if (!strcmp(m->topic, "stats") && top_model_apply_stats(t->live, m->root) == 0)
				t->last_stats = top_now();
			else if (!strcmp(m->topic, "decision"))
				top_model_apply_decision(t->live, m->root);
		}
		allm_ctl_msg_free(m);
	}
	if (t->last_stats == 0) {
		fprintf(stderr, "allmctl top: no telemetry from engine %s on %s\n", t->o->name,
			allm_ctl_client_pub_endpoint(t->c));
		return ALLMCTL_EXIT_TIMEOUT;
	}
	if (top_grid_init(&t->grid, rows, cols) < 0)
		return ALLMCTL_EXIT_ERROR;
	t->view.connected = true;
	top_draw(t->live, &t->view, &t->grid);
	for (y = 0; y < t->grid.rows; y++) {
		top_grid_row_utf8(&t->grid, y, line, sizeof(line));
		puts(line);
	}
	return ALLMCTL_EXIT_OK;
}

int allmctl_top(const struct allmctl_opts *o, int argc, char **argv)
{
	static const char *const topics[] = { "stats", "decision", NULL };
	struct allm_ctl_client_opts co = { .name = o->name, .runtime_dir = o->runtime_dir,
					   .topics = topics };
	struct top_ctx t = { .o = o, .timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : TOP_CALL_MS };
	struct sigaction sa = { .sa_handler = top_on_signal };
	bool once = false, ascii = false, color = true;
	SCREEN *scr = NULL;
	int rows = 40, cols = 120, i, ret = ALLMCTL_EXIT_ERROR, r;
	char err[256];

	/* argv[0] is "top" when the dispatcher passes the subcommand along. */
	for (i = argc > 0 && !strcmp(argv[0], "top") ? 1 : 0; i < argc; i++) {
		if (!strcmp(argv[i], "--once"))
			once = true;
		else if (!strcmp(argv[i], "--ascii"))
			ascii = true;
		else if (!strcmp(argv[i], "--no-color"))
			color = false;
		else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
			rows = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--cols") && i + 1 < argc)
			cols = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			top_usage(stdout);
			return ALLMCTL_EXIT_OK;
		} else {
			top_usage(stderr);
			return ALLMCTL_EXIT_USAGE;
		}
	}
	setlocale(LC_ALL, "");
	t.view.name = o->name ? o->name : "default";
	t.view.utf8 = !ascii && !strcmp(nl_langinfo(CODESET), "UTF-8");
	t.live = calloc(1, sizeof(*t.live));
	t.frozen = calloc(1, sizeof(*t.frozen));
	if (!t.live || !t.frozen) {
		fprintf(stderr, "allmctl top: out of memory\n");
		goto out;
	}
	top_model_init(t.live);
	top_model_init(t.frozen);
	if ((r = allm_ctl_client_open(&co, &t.c, err, sizeof(err))) < 0) {
		fprintf(stderr, "allmctl top: %s\n", err);
		goto out;
	}
	/* Ours before initscr(): ncurses then leaves SIGINT/SIGTERM alone and the
	 * loop restores the terminal itself. No SA_RESTART: poll() must wake up. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (once) {
		ret = top_once(&t, rows, cols);
		goto out;
	}
	if (t.timeout_ms > TOP_CALL_MS)
		t.timeout_ms = TOP_CALL_MS;
	if (!isatty(0) || !isatty(1)) {
		fprintf(stderr, "allmctl top: needs a terminal on stdin and stdout; --once prints "
				"one frame as text\n");
		goto out;
	}
	scr = top_curses_start(color, &t.colors);
	if (!scr) {
		fprintf(stderr, "allmctl top: cannot drive this terminal (TERM=%s); --once prints "
				"one frame as text\n", getenv("TERM") ? getenv("TERM") : "");
		goto out;
	}
	if ((r = top_fit_grid(&t)) < 0)
		goto out;
	r = top_loop(&t);
	ret = r < 0 ? ALLMCTL_EXIT_ERROR : ALLMCTL_EXIT_OK;
out:
	if (scr) {
		endwin();
		delscreen(scr);
		if (ret != ALLMCTL_EXIT_OK)
			fprintf(stderr, "allmctl top: %s\n", strerror(-r));
	}
	top_grid_free(&t.grid);
	allm_ctl_client_close(t.c);
	free(t.live);
	free(t.frozen);
	return ret;
}
