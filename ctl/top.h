/* allmctl top: the live dashboard of DESIGN §9 (issue #6).
 *
 * Three layers, so that everything but the terminal and the sockets can be tested
 * without either:
 *   top-model.c  the dashboard's state, built from decoded telemetry (`stats`,
 *                `decision`) and command replies; no I/O.
 *   top-draw.c   state -> a grid of cells (code points + attributes); pure, so the
 *                unit test reads panel contents from memory.
 *   top.c        the loop: poll on the SUB socket's ZMQ_FD, stdin and a timer;
 *                keys -> `set` commands; the grid -> ncurses.
 */
#ifndef ALLM_CTL_TOP_H
#define ALLM_CTL_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct allmctl_opts;
struct msgpack_object; /* msgpack-c, as decoded by ctl-proto.h */

/* `allmctl [--name N] top [--once] [--interval-ms MS]`: runs until `q`, SIGINT or
 * SIGTERM and returns the process exit status (0, or 1 when the terminal could not
 * be set up or the arguments are wrong). */
int allmctl_top(const struct allmctl_opts *o, int argc, char **argv);

/* ---- model ---------------------------------------------------------------- */

enum { TOP_Q_WAITING, TOP_Q_RUNNING, TOP_Q_SWAPPED, TOP_Q_N };

#define TOP_TOPN 5        /* queue entries the engine lists per queue */
#define TOP_SPARK_N 60    /* throughput samples kept for the sparkline */
#define TOP_SPARK_DT 0.5  /* engine seconds between two samples: 60 samples = 30 s */
#define TOP_DECISIONS 128 /* decision log lines kept (the panel shows the newest) */
#define TOP_CLIENTS 64    /* client rows kept; the rest are counted in nclients */

struct top_entry {
	int64_t id;
	double priority; /* the scheduler's priority: higher runs first */
	int64_t length;  /* tokens so far (prompt + generated) */
};

struct top_pct {
	double p50, p99; /* milliseconds; NAN while the engine has no sample */
};

struct top_decision {
	int64_t seq;       /* the engine's decision number: the measured update repeats it */
	double time_s;     /* engine uptime when it decided */
	int64_t request;   /* request id */
	int64_t length;    /* tokens the request held */
	int64_t blocks;    /* KV blocks it held */
	double pred_swap_ms, pred_recompute_ms;
	char choice[12];   /* "swap" / "disk" / "recompute" / "restore" / "split" */
	char reason[48];
	bool restore;      /* a cached prefix in a lower tier (kind "restore"), not a victim */
	bool estimated;    /* taken before the predictors were calibrated */
	double measured_ms; /* NAN until measured */
	bool measured;
};

struct top_client {
	int64_t id, pid, in_flight, submitted, rejected, backlog;
	double ring_fill; /* completion ring fill, 0..1 */
};

struct top_state {
	uint64_t n_stats;     /* `stats` messages applied (also counts status replies) */
	uint64_t n_decisions; /* `decision` messages applied, updates included */
	char name[64], model[96], device[48], state[24];
	char preempt[16], sched[16];
	int64_t pid;
	double uptime_s;
	int64_t block_size, max_num_seqs, max_num_batched_tokens;
	int64_t queue[TOP_Q_N];
	struct top_entry top[TOP_Q_N][TOP_TOPN];
	int n_top[TOP_Q_N];
	int64_t gpu_used, gpu_total, cpu_used, cpu_total;
	int64_t disk_used, disk_total; /* 0/0 without a disk tier */
	int64_t gpu_cached, cpu_cached, disk_cached; /* held by the prefix cache alone */
	bool pc_enabled;
	/* elastic memory (status "memory"): the pool's split and its decisions */
	bool mem_elastic;
	int64_t mem_kv_bytes, mem_scratch_bytes, mem_inflations, mem_deflations;
	int64_t pc_queried, pc_hit, pc_restored, pc_recomputed; /* tokens */
	int64_t pc_blocks[3]; /* cached blocks: device, host, disk */
	int64_t pre_swap, pre_recompute, pre_disk;
	int64_t disk_write, disk_read, demotions; /* bytes, bytes, count */
	int64_t swapped_out, swapped_in, recomputed_tokens; /* bytes, bytes, tokens */
	int64_t steps_decode, steps_mixed, steps_prefill; /* steps by kind */
	int64_t wasted_prefill_tokens; /* prefilled for requests evicted before their first token */
	int64_t tok_prompt, tok_generated, req_finished, req_failed;
	double tput, gen_tput; /* tokens/s over the engine's last ~1 s */
	double spark[TOP_SPARK_N]; /* ring of throughput samples, oldest at spark_head */
	int spark_n, spark_head;
	double spark_last_s;       /* uptime of the last sample: samples are TOP_SPARK_DT apart */
	struct top_pct ttft, tpot;
	double mwt;                     /* mean weighted turnaround; NAN before any finished */
	double mape_swap, mape_recompute; /* percent; NAN before samples */
	double mape_disk;
	double dec_mape_swap, dec_mape_recompute; /* the decisions' own error; NAN before one */
	int64_t n_clients;              /* the engine's count (may exceed n_client_rows) */
	struct top_client clients[TOP_CLIENTS];
	int n_client_rows;
	struct top_decision dec[TOP_DECISIONS]; /* ring, oldest at dec_head */
	int n_dec, dec_head;
};

void top_model_init(struct top_state *s);
/* Apply one status map (a `stats` body or a `status` reply's result). A map of a
 * different engine process (its pid changed) resets the history first.
 * Returns 0, or -EINVAL when v is not a map (nothing changes). */
int top_model_apply_stats(struct top_state *s, const struct msgpack_object *v);
/* Apply one `decision` body: appends a line, or updates the line with the same seq
 * when the engine reports the measured cost. Returns 0 or -EINVAL. */
int top_model_apply_decision(struct top_state *s, const struct msgpack_object *v);
/* The i-th newest decision (0 = newest), NULL past the end. */
const struct top_decision *top_model_decision(const struct top_state *s, int i);
/* The i-th oldest sparkline sample, i < spark_n. */
double top_model_spark(const struct top_state *s, int i);

/* ---- grid: what the drawing layer renders into ---------------------------- */

enum top_attr {
	TOP_A_NORMAL,
	TOP_A_BOLD,
	TOP_A_TITLE,   /* panel titles */
	TOP_A_HEADER,  /* the top and bottom bars (reverse video) */
	TOP_A_GOOD,    /* green: low usage, measured close to predicted */
	TOP_A_WARN,    /* yellow */
	TOP_A_BAD,     /* red: full pools, errors */
	TOP_A_DIM,     /* labels, not-yet-known values */
	TOP_A_N
};

struct top_grid {
	int rows, cols;
	uint32_t *ch;    /* rows * cols Unicode code points, one column each */
	uint8_t *attr;   /* rows * cols enum top_attr */
	bool ascii_only; /* the terminal's locale is not UTF-8: text puts '?' for the rest */
};

/* Returns 0 or -ENOMEM; rows/cols below 1 are taken as 1. */
int top_grid_init(struct top_grid *g, int rows, int cols);
void top_grid_free(struct top_grid *g);
void top_grid_clear(struct top_grid *g);
/* Writes UTF-8 text at (y, x), clipped to columns [x, xend) and the grid; control
 * characters and code points that may not be one column wide become '?'. Returns
 * the column after the last one written. */
int top_grid_put(struct top_grid *g, int y, int x, int xend, int attr, const char *s);
int top_grid_putf(struct top_grid *g, int y, int x, int xend, int attr, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* One glyph (any code point the caller knows to be one column wide). */
void top_grid_putc(struct top_grid *g, int y, int x, int attr, uint32_t c);
/* Fills columns [x, xend) of row y with c. */
void top_grid_fill(struct top_grid *g, int y, int x, int xend, int attr, uint32_t c);
/* Row y as UTF-8 without trailing blanks, into buf (always terminated). For tests
 * and --once. */
void top_grid_row_utf8(const struct top_grid *g, int y, char *buf, size_t size);

/* What the dashboard shows besides the engine's state. */
struct top_view {
	const char *name;    /* engine name being watched */
	bool utf8;           /* block and sparkline glyphs; ASCII otherwise */
	bool connected;      /* false: "waiting for engine NAME..." */
	bool paused;         /* the view is frozen; "PAUSED" in the header */
	bool help;           /* the help overlay */
	char status[160];    /* the last command's reply or error, bottom bar */
	bool status_error;   /* draw it as an error */
};

/* Renders everything that fits into g (any size, down to 1x1). */
void top_draw(const struct top_state *s, const struct top_view *v, struct top_grid *g);

/* ---- panels (top-panels.c), laid out by top-draw.c ------------------------ */

struct top_rect {
	int y, x, h, w; /* row 0 of the rect is the panel's title */
};

typedef void (*top_panel_fn)(const struct top_state *s, const struct top_view *v,
			     struct top_grid *g, struct top_rect r);

void top_panel_queues(const struct top_state *s, const struct top_view *v,
		      struct top_grid *g, struct top_rect r);
void top_panel_blocks(const struct top_state *s, const struct top_view *v,
		      struct top_grid *g, struct top_rect r);
void top_panel_throughput(const struct top_state *s, const struct top_view *v,
			  struct top_grid *g, struct top_rect r);
void top_panel_latency(const struct top_state *s, const struct top_view *v,
		       struct top_grid *g, struct top_rect r);
void top_panel_preemptions(const struct top_state *s, const struct top_view *v,
			   struct top_grid *g, struct top_rect r);
void top_panel_predictor(const struct top_state *s, const struct top_view *v,
			 struct top_grid *g, struct top_rect r);
void top_panel_decisions(const struct top_state *s, const struct top_view *v,
			 struct top_grid *g, struct top_rect r);
void top_panel_clients(const struct top_state *s, const struct top_view *v,
		       struct top_grid *g, struct top_rect r);

/* Shared by the panels: a panel's title row; numbers as the panels print them. */
void top_title(struct top_grid *g, struct top_rect r, const char *title, const char *hint);
void top_fmt_ms(char *buf, size_t n, double ms);       /* "-" for NAN */
void top_fmt_bytes(char *buf, size_t n, int64_t bytes); /* "1.5 MiB" */

#endif
