/* Description: the choices of one prompt share its buffers (issue 49 item 6: 128 choices of a 46 KB prompt held 128 copies, gateway RSS 23 -> 497 MB): a body with n 128, echo and a logit bias parsed by the gateway gives 128 choices whose prompt ids, echo and logit bias are the lead's own bytes, and a batch of prompts shares each prompt among its n choices only; a body refused after the choices were made frees them (the sanitizer build counts). */
#include "gw-openai.h"
#include "test-check.h"

#include <stdio.h>
#include <string.h>

static struct gw_req *parse(struct gw *gw, struct gw_model *m, const char *body)
{
	struct gw_req *r = NULL;
	struct gw_api_err e;
	if (gw_api_parse(gw, m, false, body, strlen(body), &r, &e)) {
		fprintf(stderr, "refused: %s\n", e.msg);
		return NULL;
	}
	return r;
}

int main(void)
{
	static struct gw gw;
	struct gw_model *m = NULL;
	if (gw_model_load(&gw.o, NULL, &m) || !m->tok) {
		fprintf(stderr, "no embedded model\n");
		return 1;
	}
	struct gw_req *r = parse(&gw, m, "{\"prompt\": \"Once upon a time there was a little dog\", \"n\": 128, "
					 "\"echo\": true, \"logit_bias\": {\"5\": 1.5}, \"max_tokens\": 4}");
	CHECK(r && r->n_choices == 128, "128 choices");
	for (uint32_t i = 1; r && i < r->n_choices; i++) {
		const struct gw_req *c = r->choices[i];
		CHECK(c->ids == r->ids && c->n_ids == r->n_ids, "choice %u: its own copy of the prompt ids", i);
		CHECK(c->echo == r->echo && c->logit_bias == r->logit_bias, "choice %u: its own echo or bias", i);
		CHECK(c->owner == r, "choice %u: owner", i);
	}
	gw_api_discard(r);

	/* a batch: prompt k's n choices share prompt k's buffers */
	r = parse(&gw, m, "{\"prompt\": [\"Once upon a time\", \"The dog ran\"], \"n\": 3, \"max_tokens\": 4}");
	CHECK(r && r->n_choices == 6, "2 x 3 choices");
	if (r && r->n_choices == 6) {
		struct gw_req **c = r->choices;
		CHECK(c[1]->ids == r->ids && c[2]->ids == r->ids, "prompt 0's choices share its ids");
		CHECK(c[3]->ids != r->ids && !c[3]->owner, "prompt 1 has its own ids");
		CHECK(c[4]->ids == c[3]->ids && c[5]->ids == c[3]->ids && c[4]->owner == c[3],
		      "prompt 1's choices share its ids");
		CHECK(c[3]->n_ids != r->n_ids || memcmp(c[3]->ids, r->ids, r->n_ids * sizeof(*r->ids)),
		      "prompt 1's ids are its own text's");
	}
	gw_api_discard(r);
	gw_model_unref(m);
	if (n_fail)
		return 1;
	printf("test-gw-share: ok\n");
	return 0;
}
