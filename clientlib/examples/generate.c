/* A minimal libadaptivellm program: submit a few prompts at once to a running
 * allm-engined and print each request's text when it finishes.
 *
 *   cc generate.c $(pkg-config --cflags --libs adaptivellm) -o generate
 *   ./generate [--name NAME] "prompt one" "prompt two" ...
 */
#include <adaptivellm/client.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	char *text;
	size_t len;
};

int main(int argc, char **argv)
{
	struct allm_client_opts opts = { 0 }; /* every field: the default */
	int first = 1;
	if (argc > 2 && !strcmp(argv[1], "--name")) {
		opts.name = argv[2];
		first = 3;
	}
	int n = argc - first;
	if (n <= 0) {
		fprintf(stderr, "usage: %s [--name NAME] PROMPT...\n", argv[0]);
		return 2;
	}

	allm_client_t *c;
	char err[256];
	if (allm_client_connect(&opts, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "generate: %s\n", err);
		return 1;
	}
	printf("connected, model: %s\n", allm_client_model(c));

	struct out *outs = calloc((size_t)n, sizeof(*outs));
	if (!outs)
		return 1;
	int submitted = 0, finished = 0, rc = 0;
	struct allm_event ev;
	while (finished < n) {
		/* Submit what the rings take; -EAGAIN means: consume events first. */
		while (submitted < n) {
			struct allm_request_params p;
			allm_request_params_init(&p);
			p.prompt = argv[first + submitted];
			p.prompt_len = strlen(p.prompt);
			p.params.max_tokens = 32;
			p.params.temperature = 0; /* greedy */
			p.user_tag = (uint64_t)submitted; /* tells us whose event it is */
			int r = allm_client_submit(c, &p);
			if (r == -EAGAIN)
				break;
			if (r < 0) {
				fprintf(stderr, "generate: submit: %s\n", strerror(-r));
				rc = 1;
				goto out;
			}
			submitted++;
		}
		int r = allm_client_wait(c, &ev, 1000);
		if (r == 0 || r == -EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "generate: %s\n", strerror(-r));
			rc = 1;
			goto out;
		}
		struct out *o = &outs[ev.user_tag];
		if (ev.kind == ALLM_EVENT_TOKEN) {
			char *t = realloc(o->text, o->len + ev.text_len + 1);
			if (!t)
				goto out;
			memcpy(t + o->len, ev.text, ev.text_len); /* ev.text dies at the next call */
			o->text = t;
			o->len += ev.text_len;
			t[o->len] = '\0';
		} else if (ev.kind == ALLM_EVENT_FINAL) {
			finished++;
			printf("[%d] (%s, %u tokens, ttft %.1f ms) %s%s\n", (int)ev.user_tag,
			       allm_finish_reason_name(ev.finish_reason), ev.n_generated,
			       ev.ttft_us / 1e3, o->text ? o->text : "", ev.error ? ev.error : "");
		}
	}
out:
	for (int i = 0; i < n; i++)
		free(outs[i].text);
	free(outs);
	allm_client_disconnect(c);
	return rc;
}
