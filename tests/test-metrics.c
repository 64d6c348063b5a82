/* Description: run summary on a hand-computed 5-request example (throughputs, weighted turnaround, TTFT/TPOT/e2e percentiles, TPOT exclusion, preemptions, order-independent outputs_sha256), error cases, and the DESIGN §12 JSON keys. */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-check.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (1.0 + fabs(b)))
#define CHECK_NEAR(a, b) CHECK(NEAR(a, b), "%s = %.12g, want %.12g", #a, (double)(a), (double)(b))

static const int32_t out0[] = {1, 2, 3, 4, 5};
static const int32_t out1[] = {7, 8, 9, 10};
static const int32_t out2[] = {42};
static const int32_t out3[] = {100, 101, 102, 103, 104, 105, 106, 107};

/* Worked by hand (seconds; run from 0 to 10):
 *  idx send sched first finish n_p n_g  wt        ttft tpot        e2e
 *   0   0    1     2     6     10   5   6/5=1.2   2    4/4=1       6
 *   1   0    0     0.5   2     20   4   2/2=1     0.5  1.5/3=0.5   2
 *   2   1    3     4     4      5   1   3/1=3     3    (excluded)  3
 *   3   2    5     5.5   9      7   8   7/4=1.75  3.5  3.5/7=0.5   7
 *   4   9    9     -     9      3   0   0/0 -> 1  (excluded)       0 */
static void make_records(struct allm_req_record r[5])
{
	memset(r, 0, 5 * sizeof(*r));
	r[0] = (struct allm_req_record){0, 0, 1, 2, 6, 10, 5, 1, 0, out0, "length", 0};
	r[1] = (struct allm_req_record){1, 0, 0, 0.5, 2, 20, 4, 0, 2, out1, "length", 0};
	r[2] = (struct allm_req_record){2, 1, 3, 4, 4, 5, 1, 0, 0, out2, "stop", 0};
	r[3] = (struct allm_req_record){3, 2, 5, 5.5, 9, 7, 8, 1, 1, out3, "length", 0};
	r[4] = (struct allm_req_record){4, 9, 9, NAN, 9, 3, 0, 0, 0, NULL, "cancelled", 0};
}

/* python3: sha256(b''.join(struct.pack('<%di' % (len(o)+1), *o, -1) for o in outs)) */
#define WANT_SHA "a67a5b81325c660376e35fa8e166cfbe26b8b6256de320c91acae1e1cf52d49d"

static void test_hand_example(void)
{
	struct allm_req_record r[5];
	struct allm_run_summary s;
	make_records(r);
	int rc = allm_metrics_summarize(r, 5, 0.0, 10.0, &s);
	CHECK(rc == 0, "rc %d", rc);
	CHECK(s.requests == 5, "%lld", (long long)s.requests);
	CHECK_NEAR(s.duration_s, 10.0);
	CHECK(s.prompt_tokens == 45 && s.generated_tokens == 18, "%lld %lld",
	      (long long)s.prompt_tokens, (long long)s.generated_tokens);
	CHECK_NEAR(s.throughput_tok_s, 6.3);
	CHECK_NEAR(s.gen_throughput_tok_s, 1.8);
	CHECK_NEAR(s.req_s, 0.5);
	CHECK_NEAR(s.mean_weighted_turnaround, 7.95 / 5);
	/* TTFT over 0.5, 2, 3, 3.5: ranks 1.5, 2.7, 2.97. */
	CHECK_NEAR(s.ttft_ms.p50, 2500.0);
	CHECK_NEAR(s.ttft_ms.p90, 3350.0);
	CHECK_NEAR(s.ttft_ms.p99, 3485.0);
	CHECK_NEAR(s.ttft_ms.mean, 2250.0);
	/* TPOT over 0.5, 0.5, 1 (requests 2 and 4 excluded): ranks 1, 1.8, 1.98. */
	CHECK_NEAR(s.tpot_ms.p50, 500.0);
	CHECK_NEAR(s.tpot_ms.p90, 900.0);
	CHECK_NEAR(s.tpot_ms.p99, 990.0);
	CHECK_NEAR(s.tpot_ms.mean, 2000.0 / 3);
	/* e2e over 0, 2, 3, 6, 7: ranks 2, 3.6, 3.96. */
	CHECK_NEAR(s.e2e_ms.p50, 3000.0);
	CHECK_NEAR(s.e2e_ms.p90, 6600.0);
	CHECK_NEAR(s.e2e_ms.p99, 6960.0);
	CHECK_NEAR(s.e2e_ms.mean, 3600.0);
	CHECK(s.preempt_swap == 2 && s.preempt_recompute == 3, "%lld %lld",
	      (long long)s.preempt_swap, (long long)s.preempt_recompute);
	CHECK(isnan(s.mape_swap) && isnan(s.mape_recompute), "mape should be NAN");
	CHECK(strcmp(s.outputs_sha256, WANT_SHA) == 0, "sha %s", s.outputs_sha256);

	/* Finish order must not matter: reverse and rotate the records. */
	struct allm_req_record p[5];
	struct allm_run_summary s2;
	for (int i = 0; i < 5; i++)
		p[i] = r[(i * 3 + 2) % 5];
	rc = allm_metrics_summarize(p, 5, 0.0, 10.0, &s2);
	CHECK(rc == 0 && strcmp(s2.outputs_sha256, WANT_SHA) == 0, "permuted sha %s", s2.outputs_sha256);
	CHECK_NEAR(s2.ttft_ms.p90, 3350.0);
	CHECK_NEAR(s2.mean_weighted_turnaround, 7.95 / 5);

	/* Moving a token across a request boundary changes the hash (the separator). */
	static const int32_t a4[] = {1, 2, 3, 4}, b5[] = {5, 7, 8, 9, 10};
	p[0] = r[0], p[1] = r[1];
	p[0].generated = a4, p[0].n_generated = 4;
	p[1].generated = b5, p[1].n_generated = 5;
	p[2] = r[2], p[3] = r[3], p[4] = r[4];
	rc = allm_metrics_summarize(p, 5, 0.0, 10.0, &s2);
	CHECK(rc == 0 && strcmp(s2.outputs_sha256, WANT_SHA) != 0, "boundary move kept the hash");
	/* So does changing one id. */
	static const int32_t c3[] = {100, 101, 102, 103, 104, 105, 106, 108};
	make_records(p);
	p[3].generated = c3;
	rc = allm_metrics_summarize(p, 5, 0.0, 10.0, &s2);
	CHECK(rc == 0 && strcmp(s2.outputs_sha256, WANT_SHA) != 0, "changed id kept the hash");
}

static void test_errors_and_empty(void)
{
	struct allm_req_record r[5];
	struct allm_run_summary s, keep;
	make_records(r);
	memset(&keep, 0x5a, sizeof(keep));

	s = keep;
	r[3].index = 1;
	CHECK(allm_metrics_summarize(r, 5, 0, 10, &s) == -EINVAL, "duplicate index accepted");
	CHECK(memcmp(&s, &keep, sizeof(s)) == 0, "ret touched on failure");
	make_records(r);
	CHECK(allm_metrics_summarize(r, 5, 10, 5, &s) == -EINVAL, "end before start accepted");
	r[1].generated = NULL;
	CHECK(allm_metrics_summarize(r, 5, 0, 10, &s) == -EINVAL, "NULL generated accepted");

	CHECK(allm_metrics_summarize(NULL, 0, 3, 3, &s) == 0, "empty run failed");
	CHECK(s.requests == 0 && s.throughput_tok_s == 0 && isnan(s.ttft_ms.p50) &&
		      isnan(s.mean_weighted_turnaround),
	      "empty run values");
	CHECK(strcmp(s.outputs_sha256,
		     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
	      "empty sha %s", s.outputs_sha256);

	/* Weighted turnaround is at least 1 even if first_sched precedes send. */
	struct allm_req_record one = {7, 1.0, 0.5, 2.0, 3.0, 4, 2, 0, 0, out0, "length", 0};
	CHECK(allm_metrics_summarize(&one, 1, 0, 3, &s) == 0, "one");
	CHECK_NEAR(s.mean_weighted_turnaround, 1.0);
	CHECK_NEAR(s.ttft_ms.p50, 1000.0);
	CHECK_NEAR(s.ttft_ms.p99, 1000.0);
	CHECK_NEAR(s.tpot_ms.p90, 1000.0);
}

static void check_pctl_obj(json_t *o, const char *key, double p50)
{
	json_t *v = json_object_get(o, key);
	CHECK(json_is_object(v), "%s missing", key);
	static const char *sub[] = {"p50", "p90", "p99", "mean"};
	for (int i = 0; i < 4; i++)
		CHECK(json_is_number(json_object_get(v, sub[i])), "%s.%s", key, sub[i]);
	CHECK(NEAR(json_number_value(json_object_get(v, "p50")), p50), "%s.p50", key);
}

static void test_json(void)
{
	struct allm_req_record r[5];
	struct allm_run_summary s;
	make_records(r);
	CHECK(allm_metrics_summarize(r, 5, 0.0, 10.0, &s) == 0, "summarize");
	s.mape_recompute = 0.125; /* callers fill this in from the predictor */
	json_t *o = allm_metrics_summary_json(&s);
	CHECK(o != NULL, "summary json");
	if (!o)
		return;
	static const char *num_keys[] = {"duration_s", "throughput_tok_s", "gen_throughput_tok_s",
					 "req_s", "mean_weighted_turnaround"};
	CHECK(json_integer_value(json_object_get(o, "requests")) == 5, "requests");
	for (size_t i = 0; i < sizeof(num_keys) / sizeof(*num_keys); i++)
		CHECK(json_is_number(json_object_get(o, num_keys[i])), "key %s", num_keys[i]);
	CHECK(NEAR(json_number_value(json_object_get(o, "throughput_tok_s")), 6.3), "throughput");
	check_pctl_obj(o, "ttft_ms", 2500.0);
	check_pctl_obj(o, "tpot_ms", 500.0);
	check_pctl_obj(o, "e2e_ms", 3000.0);
	json_t *pre = json_object_get(o, "preemptions");
	CHECK(json_integer_value(json_object_get(pre, "swap")) == 2 &&
		      json_integer_value(json_object_get(pre, "recompute")) == 3,
	      "preemptions");
	json_t *mape = json_object_get(o, "predictor_mape");
	CHECK(json_is_object(mape) && json_is_null(json_object_get(mape, "swap")) &&
		      NEAR(json_number_value(json_object_get(mape, "recompute")), 0.125),
	      "predictor_mape");
	CHECK(json_is_string(json_object_get(o, "outputs_sha256")) &&
		      strcmp(json_string_value(json_object_get(o, "outputs_sha256")), WANT_SHA) == 0,
	      "outputs_sha256");
	CHECK(json_integer_value(json_object_get(o, "prompt_tokens")) == 45 &&
		      json_integer_value(json_object_get(o, "generated_tokens")) == 18,
	      "token counts");
	char *txt = json_dumps(o, JSON_COMPACT);
	CHECK(txt && !strstr(txt, "nan") && !strstr(txt, "inf"), "dump %s", txt ? txt : "(null)");
	json_t *back = txt ? json_loads(txt, 0, NULL) : NULL;
	CHECK(back != NULL, "summary JSON does not parse back: %s", txt ? txt : "(null)");
	json_decref(back);
	free(txt);
	json_decref(o);

	/* Per-request record: request 2 has one token, so its tpot_ms is null. */
	json_t *rec = allm_metrics_record_json(&r[2]);
	CHECK(rec != NULL, "record json");
	if (rec) {
		CHECK(json_integer_value(json_object_get(rec, "index")) == 2, "index");
		CHECK(json_is_null(json_object_get(rec, "tpot_ms")), "tpot_ms should be null");
		CHECK(NEAR(json_number_value(json_object_get(rec, "ttft_ms")), 3000.0), "ttft_ms");
		CHECK(NEAR(json_number_value(json_object_get(rec, "e2e_ms")), 3000.0), "e2e_ms");
		CHECK(NEAR(json_number_value(json_object_get(rec, "weighted_turnaround")), 3.0), "wt");
		CHECK(strcmp(json_string_value(json_object_get(rec, "finish_reason")), "stop") == 0, "reason");
		json_t *g = json_object_get(rec, "generated");
		CHECK(json_array_size(g) == 1 && json_integer_value(json_array_get(g, 0)) == 42, "generated");
		json_decref(rec);
	}
	rec = allm_metrics_record_json(&r[3]);
	CHECK(rec && NEAR(json_number_value(json_object_get(rec, "tpot_ms")), 500.0) &&
		      json_array_size(json_object_get(rec, "generated")) == 8,
	      "record 3");
	json_decref(rec);
}

int main(void)
{
	test_hand_example();
	test_errors_and_empty();
	test_json();
	if (n_fail) {
		fprintf(stderr, "%d failure(s)\n", n_fail);
		return 1;
	}
	printf("metrics: ok\n");
	return 0;
}
