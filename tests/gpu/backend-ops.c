/* Description: backend conformance (after ggml's test-backend-ops): every op x
 * dtype x shape on a candidate backend against the CPU reference loops, with a
 * stated error limit per op and sentinel guards around every device buffer,
 * checked after each op. Usage: backend-ops cpu-fast|cuda [-v]; cpu-fast runs
 * every SIMD level this CPU supports. Exit 77 when the candidate cannot be
 * created (no GPU). */
#include "ops-cases.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTES 256
static const uint32_t SENTINEL = 0x7fc0dead; /* a NaN no op produces */

static bool verbose;

/* A device buffer with GUARD_BYTES of sentinel on each side. */
struct dbuf {
	char *base;
	size_t bytes;
};

static unsigned char sentinel_byte(size_t i)
{
	return ((const unsigned char *)&SENTINEL)[i % 4];
}

static void fill_sentinel(void *p, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		((unsigned char *)p)[i] = sentinel_byte(i);
}

/* The bytes around the data window still hold what was uploaded there. */
static bool guards_intact(const char *img, size_t data_bytes)
{
	size_t total = data_bytes + 2 * GUARD_BYTES;
	for (size_t i = 0; i < total; i++) {
		if (i == GUARD_BYTES)
			i += data_bytes;
		if (i < total && (unsigned char)img[i] != sentinel_byte(i))
			return false;
	}
	return true;
}

static int dbuf_make(allm_backend_t *be, const struct op_buf *s, struct dbuf *d, char *stage)
{
	size_t total = s->bytes + 2 * GUARD_BYTES;
	int r = be->iface->alloc(be, total, (void **)&d->base);
	if (r)
		return r;
	d->bytes = s->bytes;
	fill_sentinel(stage, total);
	if (s->host)
		memcpy(stage + GUARD_BYTES, s->host, s->bytes);
	return be->iface->upload(be, d->base, stage, total);
}

/* Runs c on be: outputs into out[i] (host, bytes of buffer i); returns the
 * number of damaged guards, or -1 when the op failed. */
static int run_on(allm_backend_t *be, const struct op_case *c, void **out, char *stage)
{
	struct dbuf d[OP_MAX_BUFS] = {{0}};
	void *p[OP_MAX_BUFS];
	int bad = 0, r = 0;
	for (int i = 0; i < c->nb && !r; i++) {
		r = dbuf_make(be, &c->b[i], &d[i], stage);
		p[i] = d[i].base + GUARD_BYTES;
	}
	if (!r && (r = c->call(be, p, c)))
		fprintf(stderr, "  %s on %s failed: %s\n", c->name, be->iface->name(be),
			allm_backend_last_error(be));
	if (!r)
		r = be->iface->synchronize(be);
	for (int i = 0; i < c->nb && !r; i++) {
		size_t total = d[i].bytes + 2 * GUARD_BYTES;
		if ((r = be->iface->download(be, stage, d[i].base, total)))
			break;
		if (!guards_intact(stage, d[i].bytes)) {
			bad++;
			fprintf(stderr, "  %s: guard of buffer %d damaged on %s\n", c->name, i,
				be->iface->name(be));
		}
		if (c->b[i].cmp != OP_CMP_NONE)
			memcpy(out[i], stage + GUARD_BYTES, d[i].bytes);
	}
	for (int i = 0; i < c->nb; i++)
		if (d[i].base)
			be->iface->free(be, d[i].base);
	return r ? -1 : bad;
}

/* Normalised mean squared error sum (a-b)^2 / sum b^2 and max |a-b|. */
static void errors(const float *a, const float *b, size_t n, double *nmse, double *maxabs)
{
	double num = 0, den = 0, mx = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)a[i] - (double)b[i];
		if (!(d == d)) /* NaN: an unwritten element or a broken op */
			d = 1e30;
		num += d * d;
		den += (double)b[i] * b[i];
		if (fabs(d) > mx)
			mx = fabs(d);
	}
	*nmse = den > 0 ? num / den : num;
	*maxabs = mx;
}

/* Compares buffer i of candidate vs reference per its rule; true when within. */
static bool compare(const struct op_case *c, int i, const void *cand, const void *ref,
		    char *why, size_t len)
{
	const struct op_buf *s = &c->b[i];
	size_t n = s->bytes / 4;
	double nmse, mx;
	switch (s->cmp) {
	case OP_CMP_NMSE:
		errors(cand, ref, n, &nmse, &mx);
		snprintf(why, len, "nmse %.2e (limit %.0e), max|d| %.2e", nmse, s->limit, mx);
		return nmse <= s->limit;
	case OP_CMP_EQ: /* value equality: -0.0 == +0.0 */
		for (size_t j = 0; j < n; j++)
			if (((const float *)cand)[j] != ((const float *)ref)[j]) {
				snprintf(why, len, "element %zu: %g vs %g", j, ((const float *)cand)[j],
					 ((const float *)ref)[j]);
				return false;
			}
		snprintf(why, len, "equal");
		return true;
	case OP_CMP_BYTES:
		for (size_t j = 0; j < s->bytes; j++)
			if (((const char *)cand)[j] != ((const char *)ref)[j]) {
				snprintf(why, len, "byte %zu of %zu differs", j, s->bytes);
				return false;
			}
		snprintf(why, len, "identical");
		return true;
	default:
		return true;
	}
}

#define MAX_CANDIDATES ALLM_CPU_ISA_COUNT

int main(int argc, char **argv)
{
	struct allm_err err = {{0}};
	struct allm_backend_env env; /* ALLM_CUDA_MODULE, ALLM_CUDA_SMEM_OPTIN... */
	allm_backend_env_read(&env);
	struct allm_backend_opts ro = {.reference = true, .n_threads = 1};
	allm_backend_t *ref = NULL, *cand[MAX_CANDIDATES] = {NULL};
	bool gemm_only[MAX_CANDIDATES] = {false}; /* levels whose other ops equal another's */
	int n_cand = 0;
	const char *which = argc > 1 ? argv[1] : "cpu-fast";
	verbose = argc > 2 && !strcmp(argv[2], "-v");

	if (allm_backend_cpu_create(&ro, &ref, &err)) {
		fprintf(stderr, "reference backend: %s\n", err.msg);
		return 1;
	}
	if (!strcmp(which, "cpu-fast")) {
		/* every SIMD level this machine supports, each against the reference */
		for (int isa = ALLM_CPU_ISA_PORTABLE; isa < ALLM_CPU_ISA_COUNT; isa++) {
			struct allm_backend_opts co = {.n_threads = 2, .cpu_isa = (enum allm_cpu_isa)isa,
						       .env = &env};
			if (!allm_cpu_isa_supported(co.cpu_isa)) {
				printf("level %s: not supported by this CPU\n", allm_cpu_isa_name(co.cpu_isa));
				continue;
			}
			if (allm_backend_cpu_create(&co, &cand[n_cand], &err)) {
				fprintf(stderr, "candidate level %s: %s\n", allm_cpu_isa_name(co.cpu_isa),
					err.msg);
				return 1;
			}
			/* only GEMM depends on the level among the x86 levels (attention and
			 * SiLU are one AVX2 code for all): the other ops run on the portable
			 * level and on the best one */
			gemm_only[n_cand] = co.cpu_isa != ALLM_CPU_ISA_PORTABLE &&
					    co.cpu_isa != allm_cpu_isa_best();
			n_cand++;
		}
	} else {
		struct allm_backend_opts co = {.n_threads = 2, .env = &env};
		int r = allm_backend_create(which, &co, &cand[0], NULL, 0, &err);
		if (r) {
			/* no GPU here: skipped; a GPU whose module does not load or start: failed */
			bool absent = r == -ENODEV || r == -ENOSYS;
			fprintf(stderr, "%s: candidate %s: %s\n", absent ? "SKIP" : "FAIL", which, err.msg);
			allm_backend_destroy(ref);
			return absent ? 77 : 1;
		}
		n_cand = 1;
	}

	struct op_case *cases = NULL;
	int n_cases = ops_build_cases(&cases);
	size_t stage_bytes = 0;
	for (int i = 0; i < n_cases; i++)
		for (int j = 0; j < cases[i].nb; j++)
			stage_bytes = ALLM_MAX(stage_bytes, cases[i].b[j].bytes + 2 * GUARD_BYTES);
	char *stage = malloc(stage_bytes);
	int n_ok[MAX_CANDIDATES] = {0}, n_fail[MAX_CANDIDATES] = {0}, n_skip[MAX_CANDIDATES] = {0};
	int total_fail = 0;
	for (int ci = 0; ci < n_cases; ci++) {
		const struct op_case *c = &cases[ci];
		void *ro_[OP_MAX_BUFS] = {0}, *co_[OP_MAX_BUFS] = {0};
		for (int j = 0; j < c->nb; j++) {
			ro_[j] = malloc(c->b[j].bytes + 4);
			co_[j] = malloc(c->b[j].bytes + 4);
		}
		int gr = 0;
		bool ref_ran = false; /* the reference runs once per case, when needed */
		for (int k = 0; k < n_cand; k++) {
			allm_backend_t *cb = cand[k];
			if (gemm_only[k] && c->op != ALLM_OP_GEMM)
				continue;
			if (!allm_backend_supports(cb, c->op, c->dt) ||
			    (c->op == ALLM_OP_TOPK && !allm_backend_has_topk(cb)) ||
			    (c->op == ALLM_OP_ARGMAX && !cb->iface->argmax)) {
				n_skip[k]++;
				continue;
			}
			if (!ref_ran) {
				gr = run_on(ref, c, ro_, stage);
				ref_ran = true;
			}
			bool ok = true;
			int gc = run_on(cb, c, co_, stage);
			if (gr != 0 || gc != 0) {
				ok = false;
				fprintf(stderr, "FAIL %s on %s: %s\n", c->name, cb->iface->describe(cb),
					gr < 0 || gc < 0 ? "op failed" : "guard bytes overwritten");
			}
			for (int j = 0; ok && j < c->nb; j++) {
				char why[160];
				if (c->b[j].cmp == OP_CMP_NONE)
					continue;
				bool good = compare(c, j, co_[j], ro_[j], why, sizeof(why));
				if (!good)
					fprintf(stderr, "FAIL %s on %s: output %d: %s\n", c->name,
						cb->iface->describe(cb), j, why);
				else if (verbose)
					printf("ok   %s on %s: output %d: %s\n", c->name,
					       cb->iface->describe(cb), j, why);
				ok = ok && good;
			}
			ok ? n_ok[k]++ : n_fail[k]++;
		}
		for (int j = 0; j < c->nb; j++) {
			free(ro_[j]);
			free(co_[j]);
		}
	}
	for (int k = 0; k < n_cand; k++) {
		printf("%d cases%s: %d ok, %d failed, %d not supported by %s\n",
		       n_ok[k] + n_fail[k] + n_skip[k], gemm_only[k] ? " (GEMM)" : "", n_ok[k],
		       n_fail[k], n_skip[k], cand[k]->iface->describe(cand[k]));
		total_fail += n_fail[k];
	}
	free(stage);
	ops_free_cases(cases, n_cases);
	for (int i = 0; i < n_cand; i++)
		allm_backend_destroy(cand[i]);
	allm_backend_destroy(ref);
	return total_fail ? 1 : 0;
}
