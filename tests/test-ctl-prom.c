/* Description: the Prometheus renderer of `metrics` replies (ctl/ctl-prom.c): exact text for counters, gauges and a labelled histogram (escaping, NaN/Inf, integers), and every malformed reply refused with nothing printed. */
#include "ctl-prom.h"
#include "test-check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Renders the map packed in e; returns the text (caller frees) or NULL. */
static char *render(struct allm_ctl_enc *e, int *rc, char *err, size_t errlen)
{
	struct allm_ctl_msg *m = NULL;
	char *text = NULL;
	size_t len = 0;
	if (allm_ctl_decode(e->sb.data, e->sb.size, ALLM_CTL_MAX_REPLY, &m, err, errlen)) {
		*rc = -EBADMSG;
		return NULL;
	}
	*rc = allm_ctl_prom_render(m->root, &text, &len, err, errlen);
	allm_ctl_msg_free(m);
	CHECK(!text || strlen(text) == len, "length");
	return text;
}

static void good(void)
{
	struct allm_ctl_enc e;
	char err[256];
	int rc;
	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 1);
	allm_ctl_enc_karray(&e, "families", 3);
	/* a counter, a label value that needs escaping, a help that needs escaping */
	allm_ctl_enc_map(&e, 4);
	allm_ctl_enc_kstr(&e, "name", "vllm:prompt_tokens_total");
	allm_ctl_enc_kstr(&e, "type", "counter");
	allm_ctl_enc_kstr(&e, "help", "Tokens\\n and a\nnewline.");
	allm_ctl_enc_karray(&e, "samples", 2);
	allm_ctl_enc_map(&e, 2);
	allm_ctl_enc_kmap(&e, "labels", 1);
	allm_ctl_enc_kstr(&e, "model_name", "a \"b\" \\c\nd");
	allm_ctl_enc_kdouble(&e, "value", 12345678);
	allm_ctl_enc_map(&e, 2);
	allm_ctl_enc_kmap(&e, "labels", 0);
	allm_ctl_enc_kdouble(&e, "value", 0.1);
	/* a gauge: nil is NaN, infinities as Prometheus spells them */
	allm_ctl_enc_map(&e, 3);
	allm_ctl_enc_kstr(&e, "name", "allm_predictor_mape");
	allm_ctl_enc_kstr(&e, "type", "gauge");
	allm_ctl_enc_karray(&e, "samples", 2);
	allm_ctl_enc_map(&e, 2);
	allm_ctl_enc_kmap(&e, "labels", 1);
	allm_ctl_enc_kstr(&e, "predictor", "swap");
	allm_ctl_enc_str(&e, "value");
	allm_ctl_enc_nil(&e);
	allm_ctl_enc_map(&e, 2);
	allm_ctl_enc_kmap(&e, "labels", 1);
	allm_ctl_enc_kstr(&e, "predictor", "recompute");
	allm_ctl_enc_str(&e, "value");
	msgpack_pack_double(&e.pk, -INFINITY);
	/* a labelled histogram */
	allm_ctl_enc_map(&e, 4);
	allm_ctl_enc_kstr(&e, "name", "vllm:e2e_request_latency_seconds");
	allm_ctl_enc_kstr(&e, "type", "histogram");
	allm_ctl_enc_kstr(&e, "help", "E2E.");
	allm_ctl_enc_karray(&e, "samples", 1);
	allm_ctl_enc_map(&e, 5);
	allm_ctl_enc_kmap(&e, "labels", 1);
	allm_ctl_enc_kstr(&e, "model_name", "m");
	allm_ctl_enc_karray(&e, "bounds", 3);
	allm_ctl_enc_double(&e, 0.3);
	allm_ctl_enc_double(&e, 2.5);
	allm_ctl_enc_double(&e, 7680);
	allm_ctl_enc_karray(&e, "counts", 4);
	allm_ctl_enc_uint(&e, 1);
	allm_ctl_enc_uint(&e, 3);
	allm_ctl_enc_uint(&e, 3);
	allm_ctl_enc_uint(&e, 4);
	allm_ctl_enc_kdouble(&e, "sum", 12.25);
	allm_ctl_enc_str(&e, "count");
	allm_ctl_enc_uint(&e, 4);
	CHECK(!e.err, "encode");
	char *t = render(&e, &rc, err, sizeof(err));
	const char *want =
		"# HELP vllm:prompt_tokens_total Tokens\\\\n and a\\nnewline.\n"
		"# TYPE vllm:prompt_tokens_total counter\n"
		"vllm:prompt_tokens_total{model_name=\"a \\\"b\\\" \\\\c\\nd\"} 12345678\n"
		"vllm:prompt_tokens_total 0.1\n"
		"# TYPE allm_predictor_mape gauge\n"
		"allm_predictor_mape{predictor=\"swap\"} NaN\n"
		"allm_predictor_mape{predictor=\"recompute\"} -Inf\n"
		"# HELP vllm:e2e_request_latency_seconds E2E.\n"
		"# TYPE vllm:e2e_request_latency_seconds histogram\n"
		"vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"0.3\"} 1\n"
		"vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"2.5\"} 3\n"
		"vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"7680\"} 3\n"
		"vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"
		"vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 12.25\n"
		"vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 4\n";
	CHECK(rc == 0 && t && !strcmp(t, want), "rendered (rc %d %s):\n%s\nwant:\n%s", rc, err, t ? t : "",
	      want);
	free(t);
	allm_ctl_enc_free(&e);
}

/* One family built by f, which must be refused. */
static void refused(const char *what, void (*f)(struct allm_ctl_enc *e))
{
	struct allm_ctl_enc e;
	char err[256] = "";
	int rc;
	allm_ctl_enc_init(&e);
	allm_ctl_enc_map(&e, 1);
	allm_ctl_enc_karray(&e, "families", 1);
	f(&e);
	char *t = render(&e, &rc, err, sizeof(err));
	CHECK(rc == -EBADMSG && !t && err[0], "%s: rc %d, text %s", what, rc, t ? t : "(none)");
	if (rc == -EBADMSG)
		printf("ok: %s refused: %s\n", what, err);
	free(t);
	allm_ctl_enc_free(&e);
}

static void head(struct allm_ctl_enc *e, const char *name, const char *type, uint32_t n)
{
	allm_ctl_enc_map(e, 3);
	allm_ctl_enc_kstr(e, "name", name);
	allm_ctl_enc_kstr(e, "type", type);
	allm_ctl_enc_karray(e, "samples", n);
}

static void bad_name(struct allm_ctl_enc *e) { head(e, "9lives", "gauge", 0); }
static void bad_name2(struct allm_ctl_enc *e) { head(e, "a b", "gauge", 0); }
static void bad_type(struct allm_ctl_enc *e) { head(e, "x", "summary", 0); }
static void no_value(struct allm_ctl_enc *e)
{
	head(e, "x", "gauge", 1);
	allm_ctl_enc_map(e, 1);
	allm_ctl_enc_kstr(e, "value", "1");
}
static void bad_label(struct allm_ctl_enc *e)
{
	head(e, "x", "gauge", 1);
	allm_ctl_enc_map(e, 2);
	allm_ctl_enc_kmap(e, "labels", 1);
	allm_ctl_enc_kstr(e, "a:b", "v");
	allm_ctl_enc_kdouble(e, "value", 1);
}
static void le_label(struct allm_ctl_enc *e)
{
	head(e, "x", "counter", 1);
	allm_ctl_enc_map(e, 2);
	allm_ctl_enc_kmap(e, "labels", 1);
	allm_ctl_enc_kstr(e, "le", "1");
	allm_ctl_enc_kdouble(e, "value", 1);
}
static void hist(struct allm_ctl_enc *e, double b0, double b1, uint32_t n_counts)
{
	head(e, "h", "histogram", 1);
	allm_ctl_enc_map(e, 4);
	allm_ctl_enc_karray(e, "bounds", 2);
	allm_ctl_enc_double(e, b0);
	allm_ctl_enc_double(e, b1);
	allm_ctl_enc_karray(e, "counts", n_counts);
	for (uint32_t i = 0; i < n_counts; i++)
		allm_ctl_enc_uint(e, i);
	allm_ctl_enc_kdouble(e, "sum", 1);
	allm_ctl_enc_str(e, "count");
	allm_ctl_enc_uint(e, 2);
}
static void hist_order(struct allm_ctl_enc *e) { hist(e, 2, 1, 3); }
static void hist_counts(struct allm_ctl_enc *e) { hist(e, 1, 2, 2); }

int main(void)
{
	good();
	refused("a name starting with a digit", bad_name);
	refused("a name with a space", bad_name2);
	refused("an unknown type", bad_type);
	refused("a sample without a numeric value", no_value);
	refused("a label name with ':'", bad_label);
	refused("a counter labelled le", le_label);
	refused("histogram bounds not increasing", hist_order);
	refused("histogram counts not one more than bounds", hist_counts);
	{
		struct allm_ctl_enc e;
		char err[256];
		int rc;
		allm_ctl_enc_init(&e);
		allm_ctl_enc_map(&e, 1);
		allm_ctl_enc_kstr(&e, "status", "x");
		char *t = render(&e, &rc, err, sizeof(err));
		CHECK(rc == -EBADMSG && !t, "a reply without families");
		free(t);
		allm_ctl_enc_free(&e);
	}
	if (n_fail) {
		printf("%d failures\n", n_fail);
		return 1;
	}
	printf("ctl-prom: all checks passed\n");
	return 0;
}
