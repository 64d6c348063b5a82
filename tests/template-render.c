/* Description: test helper (not a test): renders a Jinja template with engined/template/ for tests/chat-templates-jinja.py and tests/template-limits.sh to compare with Python's jinja2.
 *
 * usage: template-render TEMPLATE CONTEXT.json [--now SECONDS] [--segments] [--batch]
 * CONTEXT.json: {"trusted": {...}, "data": {...}}, the variables (data's strings are
 * marked data in the output). Prints the output's bytes (--segments: a JSON list of
 * [is_data, text] pairs instead) and exits 0; 3 when the template does not parse,
 * 4 when it calls raise_exception, 5 on another render error (6 a limit), the
 * message on stderr. --batch: CONTEXT.json is a list of contexts; prints a JSON
 * list of [exit code, output or message], one per context, and exits 0 (3 when the
 * template does not parse); with --segments the output is the list of pairs. */
#include "template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct allm_tmpl_env env = {0};
	bool segments = false, batch = false;
	if (argc < 3) {
		fprintf(stderr, "usage: %s TEMPLATE CONTEXT.json [--now SECONDS] [--segments]\n", argv[0]);
		return 2;
	}
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--now") && i + 1 < argc)
			env.now = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--segments"))
			segments = true;
		else if (!strcmp(argv[i], "--batch"))
			batch = true;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	size_t cap = 1 << 16, n = 0;
	char *src = malloc(cap);
	size_t k;
	while (src && (k = fread(src + n, 1, cap - n, f)) > 0)
		if ((n += k) == cap)
			src = realloc(src, cap *= 2);
	fclose(f);
	json_error_t je;
	json_t *ctx = json_load_file(argv[2], 0, &je);
	if (!src || !ctx) {
		fprintf(stderr, "cannot read %s: %s\n", argv[2], je.text);
		return 2;
	}
	struct allm_tmpl *t = NULL;
	struct allm_tmpl_out o = {0};
	char err[600];
	bool raised = false;
	int rc = 0, r = allm_tmpl_parse(src, n, &t, err, sizeof(err));
	if (r) {
		fprintf(stderr, "%s\n", err);
		rc = 3;
		goto out;
	}
	if (batch) {
		json_t *res = json_array(), *one;
		size_t i;
		json_array_foreach(ctx, i, one) {
			r = allm_tmpl_render(t, json_object_get(one, "trusted"), json_object_get(one, "data"), &env,
					     &o, &raised, err, sizeof(err));
			int code = !r ? 0 : raised ? 4 : r == -E2BIG ? 6 : 5;
			if (!r && segments) {
				json_t *l = json_array();
				for (size_t s = 0; s < o.n_segs; s++)
					json_array_append_new(l, json_pack("[bs#]", o.segs[s].data, o.text + o.segs[s].off,
									   o.segs[s].len));
				json_array_append_new(res, json_pack("[io]", code, l));
			} else {
				json_array_append_new(res, json_pack("[is#]", code, r ? err : o.text, r ? strlen(err) : o.len));
			}
			allm_tmpl_out_free(&o);
		}
		json_dumpf(res, stdout, JSON_ENSURE_ASCII);
		json_decref(res);
		goto out;
	}
	r = allm_tmpl_render(t, json_object_get(ctx, "trusted"), json_object_get(ctx, "data"), &env, &o,
			     &raised, err, sizeof(err));
	if (r) {
		fprintf(stderr, "%s\n", err);
		rc = raised ? 4 : r == -E2BIG ? 6 : 5;
		goto out;
	}
	if (!segments) {
		fwrite(o.text, 1, o.len, stdout);
	} else {
		json_t *l = json_array();
		for (size_t i = 0; i < o.n_segs; i++)
			json_array_append_new(l, json_pack("[bs#]", o.segs[i].data, o.text + o.segs[i].off,
							   o.segs[i].len));
		json_dumpf(l, stdout, JSON_ENSURE_ASCII);
		json_decref(l);
	}
out:
	allm_tmpl_out_free(&o);
	allm_tmpl_free(t);
	json_decref(ctx);
	free(src);
	return rc;
}
