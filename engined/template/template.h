/* A Jinja2 interpreter for the part of the language that chat templates use
 * (statements, expressions, filters, tests, macros, namespace(), loop controls,
 * whitespace control with trim_blocks and lstrip_blocks on), set up as Hugging
 * Face transformers sets up Jinja for apply_chat_template: a sandbox where lists
 * and dicts are immutable, `raise_exception(msg)`, `strftime_now(fmt)` and a
 * `tojson` that is Python's json.dumps (ensure_ascii off).
 *
 * The render output is a list of segments, each marked template text or data: a
 * string that came from the caller's data (messages, tools) keeps that mark through
 * concatenation, slicing, filters and methods, so a tokenizer can parse special
 * tokens in the template's own text only (issue E, chat role injection).
 *
 * A template is parsed once (allm_tmpl_parse) and is immutable: render may run
 * from many threads at once. Every render is bounded (nesting depth, evaluation
 * steps, memory, output size): a hostile template gets one error, never a hang.
 *
 * Library code: 0 / -errno with a message, never prints. */
#ifndef ALLM_TEMPLATE_H
#define ALLM_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct allm_tmpl; /* opaque: a parsed template */

/* Parses src (len bytes). 0 with *ret (free with allm_tmpl_free); -EINVAL with
 * err naming the problem and its line ("line 3: unsupported statement
 * 'include'"); -ENOMEM. */
int allm_tmpl_parse(const char *src, size_t len, struct allm_tmpl **ret, char *err, size_t errlen);
void allm_tmpl_free(struct allm_tmpl *t);

/* The first filter or test the template names that this interpreter lacks
 * ("line 90: unsupported filter 'from_json'"), else NULL. Such a template still
 * renders, as in Jinja 3, until a render reaches it (then that render fails with
 * this text). For the caller to log at load. */
const char *allm_tmpl_unsupported(const struct allm_tmpl *t);

/* Limits of one render (0 in a field: the default noted). */
struct allm_tmpl_limits {
	size_t max_output; /* bytes of output; default 64 MiB */
	size_t max_memory; /* bytes the render may allocate; default 256 MiB */
	size_t max_steps;  /* expression and statement evaluations; default 50 M */
};

/* One run of output bytes: text[off, off+len) came from the template (data false)
 * or from the caller's data (data true). Adjacent segments differ in data. */
struct allm_tmpl_seg {
	size_t off, len;
	bool data;
};

struct allm_tmpl_out {
	char *text; /* NUL-terminated at len */
	size_t len;
	struct allm_tmpl_seg *segs;
	size_t n_segs;
};
void allm_tmpl_out_free(struct allm_tmpl_out *o); /* the arrays, not o; NULL ok */

/* What strftime_now() reads as "now": time(NULL) when 0 (tests fix it). */
struct allm_tmpl_env {
	long long now;          /* seconds since the epoch, UTC; 0: the clock */
	struct allm_tmpl_limits limits;
};

/* Renders t with the variables of two JSON objects: trusted (the values the
 * server supplies: bos_token, add_generation_prompt...) and data (messages,
 * tools: every string in it is marked data in the output); a key in both is taken
 * from trusted. Either may be NULL. 0 with *out filled (allm_tmpl_out_free);
 * -EINVAL with err: the template's raise_exception message as written ("raise:
 * " is not added: *raised is set true), else "line N: why"; -E2BIG when a limit
 * was hit (err says which); -ENOMEM. */
int allm_tmpl_render(const struct allm_tmpl *t, const json_t *trusted, const json_t *data,
		     const struct allm_tmpl_env *env, struct allm_tmpl_out *out, bool *raised,
		     char *err, size_t errlen);

#endif
