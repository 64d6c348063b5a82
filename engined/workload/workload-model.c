/* A workload for one model: synthetic ids drawn from its vocabulary, JSONL text
 * prompts through its tokenizer, every request clipped to its context. allm-run
 * (in-process) and allm-bench (through the rings) build the same trace here, so
 * their outputs_sha256 agree for the same arguments. */
#include "workload.h"

#include "model-config.h"
#include "tokenizer.h"

#include <stdio.h>
#include <string.h>

int allm_workload_for_model(const struct allm_wl_opts *opts, const struct allm_model_config *c,
			    const struct allm_tokenizer *tok, struct allm_workload **ret,
			    struct allm_err *err)
{
	struct allm_wl_opts o = *opts;
	struct allm_workload *w = NULL;
	int r;
	o.vocab_size = c->vocab_size;
	o.max_context = c->max_pos;
	/* skip <unk>, <s>, </s> of a real vocabulary: a random prompt of control ids
	 * would end before it started */
	o.min_id = c->vocab_size > 16 ? 3 : 0;
	if ((r = allm_workload_create(&o, &w, err)))
		return r;
	for (int64_t i = 0; i < w->n; i++) {
		struct allm_wl_request *q = &w->reqs[i];
		size_t n = 0;
		if (!tok || !q->prompt_text || q->n_prompt > 0)
			continue;
		allm_free(q->prompt_ids);
		q->prompt_ids = NULL;
		if ((r = allm_tokenizer_encode(tok, q->prompt_text, strlen(q->prompt_text), true,
					       &q->prompt_ids, &n, err))) {
			char why[sizeof(err->msg)];
			snprintf(why, sizeof(why), "%s", err->msg);
			r = allm_err_set(err, r, "line %lld: %s", (long long)i + 1, why);
			goto fail;
		}
		q->n_prompt = (int32_t)n;
	}
	if ((r = allm_workload_fit_context(w, c->max_pos))) {
		allm_err_set(err, r, "a context of %d tokens holds no request", c->max_pos);
		goto fail;
	}
	*ret = w;
	return 0;
fail:
	allm_workload_free(w);
	return r;
}
