/* What the files of adaptivellm._native share (see _native.c for the whole). */
#ifndef ADAPTIVELLM_NATIVE_H
#define ADAPTIVELLM_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <adaptivellm/client.h>

/* Typed from the header's own prototypes (__typeof__), so a signature change in
 * client.h is a compile error here, not a crash. */
struct native_api {
	void *dl;
	__typeof__(allm_client_connect) *connect;
	__typeof__(allm_client_disconnect) *disconnect;
	__typeof__(allm_request_params_init_sized) *params_init;
	__typeof__(allm_client_submit) *submit;
	__typeof__(allm_client_submit_grammar) *submit_grammar; /* NULL: a library older than grammars */
	__typeof__(allm_client_cancel) *cancel;
	__typeof__(allm_client_poll_sized) *poll;
	__typeof__(allm_client_wait_sized) *wait;
	__typeof__(allm_client_fd) *fd;
	__typeof__(allm_client_lease_fd) *lease_fd;
	__typeof__(allm_client_model) *model;
	__typeof__(allm_client_id) *id;
	__typeof__(allm_finish_reason_name) *finish_name;
	__typeof__(allm_param_desc) *param_desc;
	__typeof__(allm_params_check) *params_check;
	__typeof__(allm_logit_bias_check) *bias_check;
};
/* The loaded library's entry points (_native.c: load); every field NULL before. */
extern struct native_api api;

/* 0, or -1 with RuntimeError when no library is loaded yet. */
int need_api(void);
/* Sets OSError(-neg, msg or strerror's) and returns NULL. */
PyObject *raise_errno(int neg, const char *msg);

/* params.c: the request-parameter table and a request from Python values */
int native_load_rows(void);
PyObject *native_param_table(PyObject *mod, PyObject *unused);
struct native_request_mem {
	int32_t *ids;                 /* the prompt's ids */
	struct allm_logit_bias *bias; /* the logit bias entries */
};
int native_request_build(struct allm_request_params *p, struct native_request_mem *mem, PyObject *prompt,
			 PyObject *ids, PyObject *values, PyObject *stops, PyObject *bias, PyObject *salt);
void native_request_free(struct native_request_mem *mem);

/* events.c: events as Python objects */
int native_events_init(PyObject *m);
PyObject *native_event_tuple(const struct allm_event *ev);

/* handle.c: the Handle type (one allm_client_t) */
int native_handle_init(PyObject *m);

#endif
