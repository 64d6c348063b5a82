/* allm-sim-fit: flags, the fits of the measured points, and the profile JSON. */
#include "allm-sim-fit.h"

#include "sim/sim-profile.h"
#include "vdir.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: allm-sim-fit [--model DIR | --dummy PRESET]... [--repeat R] [--threads N]\n"
		"                    [--host-step S] [--clock wall|cpu] [--out FILE] [--quiet]\n"
		"       allm-sim-fit --check PROFILE.json [--by-op] [--model DIR | --dummy PRESET]...\n"
		"Times the CPU backend's ops on the shapes of the models given (default: the\n"
		"embedded stories260K and --dummy small) and writes the cpu-local profile of the\n"
		"simulated device (data/sim-profiles/cpu-local.json) to FILE or stdout.\n"
		"  --repeat R      timings per point, the median is kept (default 7)\n"
		"  --threads N     CPU backend threads, as the engine's --threads (default: all cores)\n"
		"  --host-step S   host seconds per step to charge (default 0: not modelled)\n"
		"  --clock cpu     time only forwards the thread had the CPU for all through (needs\n"
		"                  --threads 1): op costs without what other processes on a\n"
		"                  shared machine take\n"
		"  --check P       instead of fitting: time whole forwards on the CPU backend and\n"
		"                  on sim:P side by side\n"
		"  --by-op         with --check: then each forward's GEMMs, attention and other ops,\n"
		"                  timed in place and priced by the profile (where an error comes from)\n");
}

/* ---- fits ----------------------------------------------------------------------------- */

static double gemm_pred(const double *x, const struct gpt *p)
{
	double F = exp(x[0]), h = exp(x[1]), B = exp(x[2]), L = exp(x[3]);
	double tc = 2 * p->n * p->k * p->m / (F * p->n / (p->n + h));
	double tm = (p->k * p->m * 4 + 4 * p->n * (p->k + p->m)) / B;
	return L + fmax(tc, tm);
}

/* Keeps a roofline's parameters physical: FLOP/s 1e8..1e13, half rows 0.01..1e4,
 * bytes/s 1e8..1e12, launch 1 ns..10 ms (a term that never binds would otherwise
 * drift without limit). Returns the penalty to add. */
static double bounds_penalty(const double *x, int k)
{
	/* peak FLOP/s, half rows, bytes/s, launch s, score FLOPs, cache bytes, far bytes/s */
	static const double lo[7] = {1e8, 1e-2, 1e8, 1e-9, 1e-2, 1e4, 1e8},
			    hi[7] = {1e13, 1e4, 1e12, 1e-2, 1e4, 1e9, 1e12};
	double p = 0;
	for (int i = 0; i < k; i++) {
		double d = x[i] < log(lo[i]) ? log(lo[i]) - x[i] : x[i] > log(hi[i]) ? x[i] - log(hi[i]) : 0;
		p += 100 * d * d;
	}
	return p;
}

static double gemm_loss(const double *x, void *user)
{
	struct fit *f = user;
	double s = bounds_penalty(x, 4);
	for (int i = 0; i < f->ng; i++) {
		double e = log(gemm_pred(x, &f->g[i]) / f->g[i].t);
		s += e * e;
	}
	return s;
}

/* Attention is fitted twice: the decodes alone (ops.attention_decode: many small
 * calls, the bulk of a serving run's attention), then every other call with
 * those fixed (ops.attention: prefills, and mixed steps' prefill parts). One
 * roofline over both was ill-conditioned on an AMD EPYC: fits of equal quality
 * priced --dummy small's 2-5-sequence decodes 25 % apart. */
enum { ATTN_DECODES = 1, ATTN_REST = 2 };
static int attn_sel; /* which points attn_loss sums */
static double attn_tmax; /* the longest of them: the weights' scale */
static double attn_dec_x[7]; /* the decode fit, while the rest is fitted */

static bool attn_is_decode(const struct apt *p)
{
	return p->s.dec_tokens > 0 && p->s.dec_tokens == p->s.n_tokens;
}

/* x as op params in absolute units: the fit's profile has flops and mem_bw 1 */
static struct allm_sim_op_params attn_params(const double *x)
{
	return (struct allm_sim_op_params){.launch = exp(x[3]), .compute = exp(x[0]), .half_rows = exp(x[1]),
					   .bandwidth = exp(x[2]), .score_flops = exp(x[4]), .serial = 1,
					   .cache_bytes = exp(x[5]), .far_bandwidth = exp(x[6])};
}

/* The simulator's own attention cost (sim-cost.c) at x (the decodes' parameters,
 * or the rest's beside attn_dec_x), on a serial device as the CPU backend is:
 * what is fitted is exactly what will be priced. */
static double attn_pred(const double *x, const double *xdec, const struct apt *p)
{
	static struct allm_sim_profile prof; /* only attention's fields are read */
	for (int d = 0; d < ALLM_DTYPE_COUNT; d++)
		prof.flops[d] = 1;
	prof.mem_bw = 1;
	prof.op[ALLM_OP_ATTENTION] = attn_params(x);
	prof.attn_decode = attn_params(xdec);
	prof.has_attn_decode = true;
	return allm_sim_cost_attention(&prof, &p->lay, p->heads, &p->s);
}

static double attn_loss(const double *x, void *user)
{
	struct fit *f = user;
	double s = bounds_penalty(x, 7), w = 0;
	int n = 0;
	/* relative errors weighted by sqrt(time): long calls are most of a run's
	 * time, and short ones must not pull the fit off them */
	for (int i = 0; i < f->na; i++) {
		if ((attn_sel == ATTN_DECODES) != attn_is_decode(&f->a[i]))
			continue;
		const double *xdec = attn_sel == ATTN_DECODES ? x : attn_dec_x;
		double e = log(attn_pred(x, xdec, &f->a[i]) / f->a[i].t), wi = sqrt(f->a[i].t / attn_tmax);
		s += wi * e * e;
		w += wi;
		n++;
	}
	return n ? s / w * n : s;
}

/* Fits the roofline form: x = log of (peak FLOP/s, half rows, bytes/s, launch s
 * [, score FLOPs, cache bytes, far bytes/s]) over k parameters. */
static double fit_roofline(double (*loss)(const double *, void *), struct fit *f, double *x, int k)
{
	double step[7] = {1.0, 1.5, 1.0, 1.0, 1.5, 1.5, 1.0};
	double best = fit_nelder_mead(loss, f, x, step, k, 500);
	/* restart from the optimum: Nelder-Mead stalls on flat valleys */
	for (int i = 0; i < 4; i++)
		best = fit_nelder_mead(loss, f, x, step, k, 500);
	return best;
}

/* RMS of log errors as a percentage (what "typical error" a fit has). */
static double rms_pct(double loss, int n)
{
	return n ? (exp(sqrt(loss / n)) - 1) * 100 : 0;
}

/* ---- the profile ----------------------------------------------------------------------- */

static json_t *pnum(double v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *pnum(double v, const char *fmt, ...)
{
	char src[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(src, sizeof(src), fmt, ap);
	va_end(ap);
	return json_pack("{s:f, s:s}", "value", v, "source", src);
}

struct fitted {
	double F_g, h_g, B_g, L_g, loss_g; /* gemm roofline */
	double xa[7], xd[7], loss_a, loss_d; /* attention (log parameters: attn_params), its decodes */
	double launch[ALLM_OP_COUNT], rate[ALLM_OP_COUNT], op_err[ALLM_OP_COUNT];
	double copy_lat[2], copy_bw[2];
	double disk_lat[2], disk_bw[2]; /* [0] write, [1] read */
	double flops[ALLM_DTYPE_COUNT];
	double mem_bw;
};

static void fit_all(struct fit *f, struct fitted *r, allm_backend_t *be, int64_t big_k, int64_t big_m)
{
	double xg[4] = {log(5e10), log(16), log(2e10), log(2e-6)};
	r->loss_g = fit_roofline(gemm_loss, f, xg, 4);
	/* attention's seven parameters have local minima (a cache that is never
	 * reached fits about as well as one that is): a start per cache size, from a
	 * private L2 to an L3 slice, and the far side at an eighth of the near; the
	 * best fit is kept; the decodes first, then the rest beside them */
	for (int sel = ATTN_DECODES; sel <= ATTN_REST; sel++) {
		double *xa = sel == ATTN_DECODES ? r->xd : r->xa, *loss = sel == ATTN_DECODES ? &r->loss_d : &r->loss_a;
		attn_sel = sel;
		attn_tmax = 0;
		for (int i = 0; i < f->na; i++)
			if ((sel == ATTN_DECODES) == attn_is_decode(&f->a[i]))
				attn_tmax = fmax(attn_tmax, f->a[i].t);
		*loss = INFINITY;
		for (int c = 0; c < 4; c++) {
			double x[7] = {log(5e10), log(16), log(4e10), log(5e-7), log(16),
				       log((double)(256 << 10) * (1 << (2 * c))), log(5e9)};
			double l = fit_roofline(attn_loss, f, x, 7);
			if (l < *loss) {
				*loss = l;
				memcpy(xa, x, 7 * sizeof(double));
			}
		}
		if (sel == ATTN_DECODES)
			memcpy(attn_dec_x, r->xd, sizeof(attn_dec_x));
	}
	r->F_g = exp(xg[0]), r->h_g = exp(xg[1]), r->B_g = exp(xg[2]), r->L_g = exp(xg[3]);
	r->mem_bw = fmax(r->B_g, fmax(exp(r->xa[2]), exp(r->xd[2])));
	for (int op = 0; op < ALLM_OP_COUNT; op++) {
		if (!f->sn[op])
			continue;
		double a, b, s = 0;
		fit_line(f->sx[op], f->st[op], f->sn[op], &a, &b);
		r->launch[op] = a;
		r->rate[op] = 1.0 / b;
		for (int i = 0; i < f->sn[op]; i++) {
			double e = log((a + b * f->sx[op][i]) / f->st[op][i]);
			s += e * e;
		}
		r->op_err[op] = rms_pct(s, f->sn[op]);
		r->mem_bw = fmax(r->mem_bw, r->rate[op]);
	}
	for (int d = 0; d < 2; d++) {
		double a, b;
		fit_line(f->cx[d], f->ct[d], f->cn[d], &a, &b);
		r->copy_lat[d] = a;
		r->copy_bw[d] = 1.0 / b;
	}
	for (int d = 0; d < 2; d++)
		if (f->dn[d]) {
			double a, b;
			fit_line(f->dx[d], f->dt[d], f->dn[d], &a, &b);
			r->disk_lat[d] = a;
			r->disk_bw[d] = 1.0 / b;
		}
	r->flops[ALLM_DTYPE_F32] = fmax(r->F_g, fmax(exp(r->xa[0]), exp(r->xd[0])));
	double t32 = gemm_dtype_seconds(be, big_k, big_m, ALLM_DTYPE_F32, f->repeat);
	for (int d = 1; d < ALLM_DTYPE_COUNT; d++)
		r->flops[d] = r->flops[ALLM_DTYPE_F32] * t32 /
			      gemm_dtype_seconds(be, big_k, big_m, (enum allm_dtype)d, f->repeat);
}

static const char *const op_names[ALLM_OP_COUNT] = {
	"embedding", "rmsnorm", "layernorm", "gemm", "rope", "silu_mul", "relu", "add",
	"gather_rows", "kv_write", "attention", "argmax", "topk",
};

/* The attention timings with the fit's prediction beside each, for the record. */
static json_t *attn_points(const struct fit *f, const struct fitted *r)
{
	json_t *a = json_array();
	for (int i = 0; i < f->na; i++) {
		const struct apt *p = &f->a[i];
		json_array_append_new(a, json_pack("[I, f, f, i, i, i, f, f]", (json_int_t)p->s.n_tokens,
						   p->s.sum_ctx, p->s.kv_reads, p->heads, p->lay.head_dim,
						   p->lay.n_kv_heads, p->t, attn_pred(r->xa, r->xd, p)));
	}
	return a;
}

static json_t *build_profile(struct fit *f, const struct fitted *r, const char *desc, double host_step,
			     const char *models, double mem_total)
{
	char date[32], host[200];
	time_t now = time(NULL);
	struct tm tm;
	struct utsname u;
	strftime(date, sizeof(date), "%Y-%m-%d", gmtime_r(&now, &tm));
	snprintf(host, sizeof(host), "%s %s", uname(&u) ? "?" : u.machine, desc);
	const char *how = "fitted by allm-sim-fit";
	double spread[MAX_PTS];
	memcpy(spread, f->spread, (size_t)f->n_spread * sizeof(double));
	double med_spread = allm_median(spread, f->n_spread);
	double p90_spread = spread[(int)(0.9 * (f->n_spread - 1))];

	json_t *ops = json_object();
	double launches[ALLM_OP_COUNT], effs[ALLM_OP_COUNT];
	int nl = 0;
	for (int op = 0; op < ALLM_OP_COUNT; op++) {
		if (op == ALLM_OP_GEMM || op == ALLM_OP_ATTENTION || !f->sn[op])
			continue;
		launches[nl] = r->launch[op];
		effs[nl++] = r->rate[op] / r->mem_bw;
		json_object_set_new(ops, op_names[op], json_pack("{s:o, s:o}",
			"launch", pnum(r->launch[op], "%s: line fit over %d sizes (rms error %.1f %%)", how, f->sn[op], r->op_err[op]),
			"bandwidth", pnum(r->rate[op] / r->mem_bw, "%s: %.3g bytes/s reached / memory_bandwidth", how, r->rate[op])));
	}
	double ml = allm_median(launches, nl), me = allm_median(effs, nl);
	json_object_set_new(ops, "default", json_pack("{s:o, s:o}",
		"launch", pnum(ml, "%s: median of the ops' fitted launch", how),
		"bandwidth", pnum(me, "%s: median of the ops' fitted efficiency", how)));
	json_object_set_new(ops, "gemm", json_pack("{s:o, s:o, s:o, s:o}",
		"launch", pnum(r->L_g, "%s: roofline fit over %d GEMM timings (rms error %.1f %%)", how, f->ng, rms_pct(r->loss_g, f->ng)),
		"compute", pnum(r->F_g / r->flops[0], "%s: %.3g FLOP/s fitted / flops.f32", how, r->F_g),
		"half_rows", pnum(r->h_g, "%s: roofline fit", how),
		"bandwidth", pnum(r->B_g / r->mem_bw, "%s: %.3g bytes/s fitted / memory_bandwidth", how, r->B_g)));
	for (int d = 0; d < 2; d++) {
		const double *x = d ? r->xd : r->xa;
		int n = 0;
		for (int i = 0; i < f->na; i++)
			n += attn_is_decode(&f->a[i]) == (d == 1);
		json_object_set_new(ops, d ? "attention_decode" : "attention", json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			"launch", pnum(exp(x[3]), "%s: roofline fit over %d %s timings (rms error %.1f %%)", how, n,
				       d ? "decode-only attention" : "other attention", rms_pct(d ? r->loss_d : r->loss_a, n)),
			"compute", pnum(exp(x[0]) / r->flops[0], "%s: %.3g FLOP/s fitted / flops.f32", how, exp(x[0])),
			"half_rows", pnum(exp(x[1]), "%s: roofline fit", how),
			"bandwidth", pnum(exp(x[2]) / r->mem_bw, "%s: %.3g bytes/s fitted / memory_bandwidth", how, exp(x[2])),
			"score_flops", pnum(exp(x[4]), "%s: roofline fit (softmax cost per score)", how),
			"serial", pnum(1, "the CPU backend attends to a batch's sequences one after another: a mixed step's decodes and prefills cost apart"),
			"cache_bytes", pnum(exp(x[5]), "%s: roofline fit (a call's distinct K/V bytes past here stream at far_bandwidth, as from past a cache)", how),
			"far_bandwidth", pnum(fmin(1, exp(x[6]) / r->mem_bw), "%s: %.3g bytes/s fitted past cache_bytes / memory_bandwidth", how, exp(x[6]))));
	}

	json_t *link = json_object();
	static const char *const dirs[2] = {"d2h", "h2d"};
	for (int d = 0; d < 2; d++)
		json_object_set_new(link, dirs[d], json_pack("{s:o, s:o}",
			"bandwidth", pnum(r->copy_bw[d], "%s: memcpy of 1-64 KV blocks between two resident pools, out of L2 as a swap finds them, line fit", how),
			"latency", pnum(r->copy_lat[d], "%s: the same fit's intercept", how)));
	json_t *disk = NULL;
	if (f->dn[0] && f->dn[1]) {
		disk = json_object();
		static const char *const dd[2] = {"write", "read"};
		for (int d = 0; d < 2; d++)
			json_object_set_new(disk, dd[d], json_pack("{s:o, s:o}",
				"bandwidth", pnum(r->disk_bw[d], "%s: the disk KV tier's %s of 1-64 blocks in a file under $TMPDIR, line fit (wall time)", how, dd[d]),
				"latency", pnum(r->disk_lat[d], "%s: the same fit's intercept", how)));
	}
	json_t *assumptions = json_pack("[s, s, s, s]",
		"Every number is fitted on this machine by allm-sim-fit from the CPU backend's own ops, called as the executor calls them; GEMM shapes of the models covered are kept as measured (gemm_shapes) and interpolated, the roofline parameters serve other shapes.",
		"On the CPU the 'device' is the host: memory_bandwidth is the fastest byte rate any op reached (cache-resident data), so every op's bandwidth is a fraction of it; flops.f32 the fastest FLOP rate (GEMM or attention).",
		"argmax includes the download of the logits, as the CPU engine samples on the host; copies are memcpy between two resident pools, as the CPU backend swaps.",
		"The machine is shared: see fitted.noise for the spread of repeated timings.");
	json_t *prof = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		"format", ALLM_SIM_PROFILE_FORMAT, "name", "cpu-local", "device", host, "dtype", "f32",
		"assumptions", assumptions,
		"memory_bytes", pnum(mem_total, "this machine's RAM (MemTotal), as the CPU backend reports"),
		"flops", json_pack("{s:o, s:o, s:o}",
			"f32", pnum(r->flops[0], "%s: fastest fitted FLOP rate (GEMM roofline or attention)", how),
			"f16", pnum(r->flops[1], "%s: f32 rate x t(f32) / t(f16) of a 256-row GEMM", how),
			"bf16", pnum(r->flops[2], "%s: f32 rate x t(f32) / t(bf16) of a 256-row GEMM", how)),
		"memory_bandwidth", pnum(r->mem_bw, "%s: fastest fitted byte rate of any op", how),
		"link", link,
		"host_step", pnum(host_step, host_step > 0 ? "allm-sim-fit --host-step" : "not modelled: the engine's host work per step is under 1 %% of a CPU step here"),
		"ops", ops, "gemm_shapes", json_incref(f->shapes),
		"fitted", json_pack("{s:s, s:s, s:i, s:s, s:{s:f, s:f, s:i}, s:s, s:o}", "date", date,
				    "models", models, "repeat", f->repeat, "clock",
				    f->cpu_clock ? "wall, forwards off the CPU retimed" : "wall", "noise", "median_spread", med_spread,
				    "p90_spread", p90_spread, "points", f->n_spread, "attention_points_are",
				    "[tokens, sum_ctx, kv_reads, heads, head_dim, kv_heads, seconds, fitted seconds]",
				    "attention_points", attn_points(f, r)));
	if (prof && disk)
		json_object_set_new(prof, "disk", disk);
	else
		json_decref(disk);
	return prof;
}

/* ---- main ------------------------------------------------------------------------------ */

static int load_config(const char *kind, const char *v, struct allm_model_config *c)
{
	struct allm_err err = {{0}};
	int r;
	if (!strcmp(kind, "--dummy")) {
		r = allm_model_config_preset(v, c, &err);
	} else {
		struct allm_vdir disk = allm_vdir_disk(v);
		r = allm_model_config_load_from(v ? &disk : allm_default_model(), c, &err);
	}
	if (r)
		fprintf(stderr, PROG ": %s\n", err.msg);
	return r;
}

/* ---- samples -> points: the trimmed mean of samples of equal shape ------------------- */

/* The mean of the middle 90 % of v[0..n): what a shape costs on average here,
 * interference from other processes included (a run's wall time is the sum of
 * its ops' times, so the mean, not the median, predicts it), without the rare
 * stall of a descheduled thread. Records the spread (p90 - p10) / mean. */
static double point_of(struct fit *f, double *v, int n)
{
	allm_median(v, n); /* sorts */
	int lo = n / 20, hi = n - n / 20;
	double s = 0;
	for (int i = lo; i < hi; i++)
		s += v[i];
	double m = s / (hi - lo);
	if (n >= 5 && f->n_spread < MAX_PTS && m > 0)
		f->spread[f->n_spread++] = (v[(int)(0.9 * (n - 1))] - v[(int)(0.1 * (n - 1))]) / m;
	return m;
}

static int cmp_gs(const void *a, const void *b)
{
	const struct gsample *x = a, *y = b;
	if (x->dt != y->dt)
		return x->dt - y->dt;
	if (x->k != y->k)
		return x->k < y->k ? -1 : 1;
	if (x->m != y->m)
		return x->m < y->m ? -1 : 1;
	return x->n < y->n ? -1 : x->n > y->n;
}

static int cmp_ss(const void *a, const void *b)
{
	const struct ssample *x = a, *y = b;
	if (x->op != y->op)
		return x->op - y->op;
	return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static int cmp_as(const void *a, const void *b)
{
	return memcmp(a, b, offsetof(struct apt, t));
}

static double *scratch(int n)
{
	static double *v;
	static int cap;
	if (n > cap) {
		cap = n;
		v = realloc(v, (size_t)cap * sizeof(double));
		if (!v)
			exit(1);
	}
	return v;
}

/* GEMM samples -> roofline points and measured shapes (at most 24 rows each). */
static void reduce_gemm(struct fit *f)
{
	qsort(f->gs, (size_t)f->ngs, sizeof(*f->gs), cmp_gs);
	struct gpt pts[256];
	int np = 0;
	for (int i = 0; i < f->ngs;) {
		int j = i;
		double *v = scratch(f->ngs);
		while (j < f->ngs && !cmp_gs(&f->gs[i], &f->gs[j]))
			v[j - i] = f->gs[j].t, j++;
		const struct gsample *g = &f->gs[i];
		struct gpt p = {(double)g->n, (double)g->k, (double)g->m, point_of(f, v, j - i)};
		if (f->ng < MAX_PTS && g->dt == ALLM_DTYPE_F32)
			f->g[f->ng++] = p;
		if (np < 256)
			pts[np++] = p;
		i = j;
		if (i == f->ngs || f->gs[i].k != g->k || f->gs[i].m != g->m || f->gs[i].dt != g->dt) {
			json_t *a = json_array();
			for (int q = 0; q < np; q++) {
				/* thin to 24 rows, evenly through the list (rows ascend) */
				int keep = np <= ALLM_SIM_MAX_GEMM_POINTS ? q : q * (np - 1) / (ALLM_SIM_MAX_GEMM_POINTS - 1);
				if (np > ALLM_SIM_MAX_GEMM_POINTS && q >= ALLM_SIM_MAX_GEMM_POINTS)
					break;
				json_array_append_new(a, json_pack("[I, f]", (json_int_t)pts[keep].n, pts[keep].t));
			}
			if (np >= 2)
				json_array_append_new(f->shapes, json_pack("{s:s, s:I, s:I, s:o, s:s}", "dtype",
					allm_dtype_name((enum allm_dtype)g->dt), "k", (json_int_t)g->k, "m", (json_int_t)g->m,
					"points", a, "source", "measured in place: trimmed mean of the forwards' calls"));
			else
				json_decref(a);
			np = 0;
		}
	}
}

static void reduce_stream(struct fit *f, struct ssample *ss, int n, bool links)
{
	qsort(ss, (size_t)n, sizeof(*ss), cmp_ss);
	for (int i = 0; i < n;) {
		int j = i;
		double *v = scratch(n);
		while (j < n && !cmp_ss(&ss[i], &ss[j]))
			v[j - i] = ss[j].t, j++;
		double t = point_of(f, v, j - i);
		int op = ss[i].op;
		if (links && f->cn[op] < 256) {
			f->cx[op][f->cn[op]] = ss[i].bytes;
			f->ct[op][f->cn[op]++] = t;
		} else if (!links && f->sn[op] < MAX_PTS) {
			f->sx[op][f->sn[op]] = ss[i].bytes;
			f->st[op][f->sn[op]++] = t;
		}
		i = j;
	}
}

static void reduce_attention(struct fit *f)
{
	qsort(f->as, (size_t)f->nas, sizeof(*f->as), cmp_as);
	for (int i = 0; i < f->nas;) {
		int j = i;
		double *v = scratch(f->nas);
		while (j < f->nas && !cmp_as(&f->as[i], &f->as[j]))
			v[j - i] = f->as[j].t, j++;
		if (f->na < MAX_PTS) {
			f->a[f->na] = f->as[i];
			f->a[f->na++].t = point_of(f, v, j - i);
		}
		i = j;
	}
}

/* Times the grid's forwards of one model in place, and its swap copies. */
static int cover_model(struct fit *f, const char *kind, const char *name, int threads, int64_t *big_k,
		       int64_t *big_m)
{
	struct allm_runtime *rt = NULL;
	struct fit_shape grid[64];
	if (fit_open(kind, name, "cpu", threads, &rt))
		return -1;
	const struct allm_model_config *c = &rt->model->cfg;
	int n = fit_grid(c, grid, 64);
	fit_proxy_install(rt->be);
	for (int i = 0; i < n; i++) {
		double t;
		if (fit_forward(rt, &grid[i], f->repeat, &t, f)) {
			allm_runtime_close(rt);
			return -1;
		}
	}
	fit_copies(f, rt->kv);
	if ((int64_t)c->hidden * c->intermediate > *big_k * *big_m)
		*big_k = c->hidden, *big_m = c->intermediate;
	if (!f->quiet)
		fprintf(stderr, PROG ": %s: %d batch shapes timed, %d samples\n", name ? name : "stories260K", n,
			f->ngs + f->nas + f->nss + f->nls);
	allm_runtime_close(rt);
	return 0;
}

int main(int argc, char **argv)
{
	static struct fit f;
	struct allm_model_config cfg[MAX_MODELS];
	const char *kinds[MAX_MODELS], *names[MAX_MODELS], *check = NULL;
	bool by_op = false;
	bool cpu_clock = false;
	char models[512] = "";
	const char *out = NULL;
	double host_step = 0;
	int n = 0, threads = 0;
	struct allm_err err = {{0}};
	f.repeat = 7;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--quiet")) {
			f.quiet = true;
		} else if (v && (!strcmp(a, "--model") || !strcmp(a, "--dummy")) && n < MAX_MODELS) {
			kinds[n] = a;
			names[n] = v;
			if (load_config(a, v, &cfg[n++]))
				return 1;
			snprintf(models + strlen(models), sizeof(models) - strlen(models), "%s%s", n > 1 ? ", " : "", v);
			i++;
		} else if (v && !strcmp(a, "--repeat")) {
			f.repeat = atoi(v);
			i++;
		} else if (v && !strcmp(a, "--threads")) {
			threads = atoi(v);
			i++;
		} else if (v && !strcmp(a, "--host-step")) {
			host_step = atof(v);
			i++;
		} else if (v && !strcmp(a, "--clock") && (!strcmp(v, "cpu") || !strcmp(v, "wall"))) {
			cpu_clock = !strcmp(v, "cpu");
			i++;
		} else if (!strcmp(a, "--by-op")) {
			by_op = true;
		} else if (v && !strcmp(a, "--check")) {
			check = v;
			i++;
		} else if (v && !strcmp(a, "--out")) {
			out = v;
			i++;
		} else {
			fprintf(stderr, PROG ": unknown or incomplete flag '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (f.repeat < 3 || f.repeat > MAX_REPEAT || threads < 0 || !(host_step >= 0)) {
		fprintf(stderr, PROG ": --repeat must be 3..%d, --threads and --host-step >= 0\n", MAX_REPEAT);
		return 2;
	}
	if (cpu_clock && threads != 1) {
		fprintf(stderr, PROG ": --clock cpu needs --threads 1 (other threads' time is not this thread's)\n");
		return 2;
	}
	fit_clock_init(cpu_clock);
	f.cpu_clock = cpu_clock;
	if (!n) {
		kinds[0] = "--model", names[0] = NULL, kinds[1] = "--dummy", names[1] = "small";
		if (load_config("--model", NULL, &cfg[n++]) || load_config("--dummy", "small", &cfg[n++]))
			return 1;
		snprintf(models, sizeof(models), "stories260K (embedded), dummy:small");
	}
	if (check) {
		for (int i = 0; i < n; i++)
			if (fit_check(check, kinds[i], names[i], threads, f.repeat, by_op))
				return 1;
		return 0;
	}
	struct allm_backend_env benv;
	allm_backend_env_read(&benv);
	struct allm_backend_opts bo = {.n_threads = threads, .env = &benv};
	allm_backend_t *be = NULL;
	if (allm_backend_cpu_create(&bo, &be, &err)) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		return 1;
	}
	f.shapes = json_array();
	int64_t big_k = 0, big_m = 0;
	for (int i = 0; i < n; i++)
		if (cover_model(&f, kinds[i], names[i], threads, &big_k, &big_m))
			return 1;
	reduce_gemm(&f);
	reduce_attention(&f);
	reduce_stream(&f, f.ss, f.nss, false);
	reduce_stream(&f, f.ls, f.nls, true);
	struct fitted r = {0};
	fit_all(&f, &r, be, big_k, big_m);
	size_t fr = 0, tot = 0;
	be->iface->mem_info(be, &fr, &tot);
	json_t *j = build_profile(&f, &r, be->iface->describe(be), host_step, models, (double)tot);
	/* A number the fit could not make (not finite: jansson drops it, and the key
	 * with it) must stop the fit here, not the simulator that loads it later:
	 * the profile passes the simulator's own parser before it is written. */
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)) : NULL;
	struct allm_sim_profile *parsed = NULL;
	if (!text || allm_sim_profile_parse(text, strlen(text), "the fitted profile", &parsed, &err)) {
		fprintf(stderr, PROG ": the fit made no usable profile: %s\n", text ? err.msg : "out of memory");
		free(text);
		return 1;
	}
	allm_sim_profile_free(parsed);
	FILE *o = out ? fopen(out, "w") : stdout;
	if (!o || fputs(text, o) == EOF || fputc('\n', o) == EOF || (out && fclose(o))) {
		fprintf(stderr, PROG ": cannot write the profile%s%s\n", out ? " to " : "", out ? out : "");
		free(text);
		return 1;
	}
	free(text);
	if (!f.quiet)
		fprintf(stderr, PROG ": gemm roofline rms error %.1f %% (%d points), attention %.1f %% (%d points); "
			"noise: median spread (p90 - p10) / mean of a shape's samples %.1f %%\n", rms_pct(r.loss_g, f.ng), f.ng,
			rms_pct(r.loss_a, f.na), f.na,
			100 * json_real_value(json_object_get(json_object_get(json_object_get(j, "fitted"), "noise"), "median_spread")));
	json_decref(j);
	json_decref(f.shapes);
	allm_backend_destroy(be);
	return 0;
}
