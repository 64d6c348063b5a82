/* adaptivellm._native.Handle: one allm_client_t. Like the C handle it is used by
 * one thread at a time (the Python classes above it serialize the calls);
 * blocking calls (connect, wait) release the GIL. */
#include "native.h"

#include <errno.h>
#include <string.h>

typedef struct {
	PyObject_HEAD
	allm_client_t *c; /* NULL once closed */
	int dead;         /* the sticky -EPIPE / -EPROTO once seen */
} Handle;

static const char *dead_message(int r)
{
	return r == -EPIPE ? "the engine went away" : r == -EPROTO ? "the engine broke the protocol" : NULL;
}

static int need_open(Handle *h)
{
	if (h->c)
		return 0;
	PyErr_SetString(PyExc_ValueError, "the client is closed");
	return -1;
}

static int handle_init(Handle *h, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "runtime_dir", "sq_entries", "cq_entries", "arena_size",
				  "posix_shm", "timeout_ms", "spin_us", NULL };
	const char *name = NULL, *dir = NULL;
	unsigned int sq = 0, cq = 0, arena = 0;
	int posix = 0, timeout_ms = 0, spin_us = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzIIIpii", kwlist, &name, &dir, &sq, &cq, &arena,
					 &posix, &timeout_ms, &spin_us))
		return -1;
	if (need_api())
		return -1;
	if (h->c) {
		PyErr_SetString(PyExc_RuntimeError, "Handle already connected");
		return -1;
	}
	struct allm_client_opts o = {
		.name = name, .runtime_dir = dir, .sq_entries = sq, .cq_entries = cq,
		.arena_size = arena, .posix_shm = posix, .timeout_ms = timeout_ms, .spin_us = spin_us,
	};
	char err[512] = "";
	allm_client_t *c = NULL;
	int r;
	Py_BEGIN_ALLOW_THREADS
	r = api.connect(&o, &c, err, sizeof(err));
	Py_END_ALLOW_THREADS
	if (r < 0) {
		raise_errno(r, err);
		return -1;
	}
	h->c = c;
	return 0;
}

static void handle_close_now(Handle *h)
{
	if (h->c) {
		api.disconnect(h->c);
		h->c = NULL;
	}
}

static void handle_dealloc(Handle *h)
{
	handle_close_now(h);
	Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyObject *handle_close(Handle *h, PyObject *unused)
{
	(void)unused;
	handle_close_now(h);
	Py_RETURN_NONE;
}

/* submit(tag, prompt, prompt_ids, scalars, stop_ids, logit_bias, cache_salt[, grammar]) -> bool
 *   prompt: bytes or None; prompt_ids: a sequence of ints or None (one of the two);
 *   values: one per row of param_table(), in order (the stored value, or None for
 *   the library's default); stop_ids: sequence of
 *   ints or None; logit_bias: sequence of (id, bias) or None; cache_salt: bytes
 *   (<= ALLM_CACHE_SALT_BYTES) or None; grammar: bytes (the text of the kind the
 *   grammar_kind value says) or None.
 * True: queued; False: the SQ ring or the arena is full (consume events, retry);
 * OSError otherwise (EINVAL: the library refused the parameters; E2BIG: the
 * prompt is larger than the arena; EPIPE / EPROTO: the handle is dead). */
static PyObject *handle_submit(Handle *h, PyObject *args)
{
	unsigned long long tag;
	PyObject *prompt, *ids, *values, *stops, *bias, *salt, *grammar = Py_None;
	if (!PyArg_ParseTuple(args, "KOOO!OOO|O", &tag, &prompt, &ids, &PyTuple_Type, &values, &stops, &bias, &salt,
			      &grammar))
		return NULL;
	if (grammar != Py_None && !PyBytes_Check(grammar)) {
		PyErr_SetString(PyExc_TypeError, "grammar must be bytes or None");
		return NULL;
	}
	if (grammar != Py_None && !api.submit_grammar) {
		PyErr_SetString(PyExc_RuntimeError, "this libadaptivellm has no grammars (allm_client_submit_grammar)");
		return NULL;
	}
	if (need_open(h))
		return NULL;
	struct allm_request_params p;
	struct native_request_mem mem = { 0 };
	PyObject *ret = NULL;
	api.params_init(&p, sizeof(p));
	p.user_tag = tag;
	if (native_request_build(&p, &mem, prompt, ids, values, stops, bias, salt))
		goto out;
	/* non-blocking: no GIL release */
	int r = grammar == Py_None ? api.submit(h->c, &p)
				   : api.submit_grammar(h->c, &p, PyBytes_AS_STRING(grammar), (size_t)PyBytes_GET_SIZE(grammar));
	if (r == 0)
		ret = Py_NewRef(Py_True);
	else if (r == -EAGAIN)
		ret = Py_NewRef(Py_False);
	else {
		if (r == -EPIPE || r == -EPROTO)
			h->dead = r;
		raise_errno(r, r == -EINVAL ? "libadaptivellm refused the request's parameters"
				: r == -E2BIG ? "the prompt (or grammar) does not fit the engine's prompt arena"
					      : dead_message(r));
	}
out:
	native_request_free(&mem);
	return ret;
}

/* cancel(request_id) -> bool: True sent, False the SQ ring is full (retry after
 * consuming events); OSError when the handle is dead. */
static PyObject *handle_cancel(Handle *h, PyObject *arg)
{
	unsigned long long id = PyLong_AsUnsignedLongLong(arg);
	if (id == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	if (need_open(h))
		return NULL;
	int r = api.cancel(h->c, id);
	if (r == 0)
		Py_RETURN_TRUE;
	if (r == -EAGAIN)
		Py_RETURN_FALSE;
	if (r == -EPIPE || r == -EPROTO)
		h->dead = r;
	return raise_errno(r, dead_message(r));
}

/* Appends events to list while the ring has them, up to max in all. Returns the
 * library's last result (1: stopped at max, 0: the ring is empty and the doorbell
 * armed) or a negative errno; -1000 with a Python exception set. */
#define PY_FAILED (-1000)
static int drain(Handle *h, PyObject *list, Py_ssize_t max)
{
	struct allm_event ev;
	int r = 1;
	while (PyList_GET_SIZE(list) < max) {
		r = api.poll(h->c, &ev, sizeof(ev));
		if (r <= 0)
			return r;
		PyObject *t = native_event_tuple(&ev);
		if (!t || PyList_Append(list, t) < 0) {
			Py_XDECREF(t);
			return PY_FAILED;
		}
		Py_DECREF(t);
	}
	return r;
}

/* The events list, or an exception for a dead handle. Events taken before the
 * library reported the engine gone are returned first: the next call raises. */
static PyObject *finish_drain(Handle *h, PyObject *list, int r)
{
	if (r == PY_FAILED) {
		Py_DECREF(list);
		return NULL;
	}
	if (r < 0 && r != -EINTR) {
		h->dead = r;
		if (PyList_GET_SIZE(list) > 0)
			return list;
		Py_DECREF(list);
		return raise_errno(r, dead_message(r));
	}
	return list;
}

/* poll(max) -> [event, ...]: what the ring holds now (at most max), without
 * blocking. An empty list means the ring is empty and the engine will ring the
 * doorbell (fileno()) on its next entry. */
static PyObject *handle_poll(Handle *h, PyObject *arg)
{
	Py_ssize_t max = PyLong_AsSsize_t(arg);
	if (max == -1 && PyErr_Occurred())
		return NULL;
	if (need_open(h))
		return NULL;
	if (h->dead)
		return raise_errno(h->dead, dead_message(h->dead));
	PyObject *list = PyList_New(0);
	if (!list)
		return NULL;
	return finish_drain(h, list, drain(h, list, max));
}

/* wait(timeout_ms, max) -> [event, ...]: blocks (spinning spin_us first, then on
 * the doorbell, the GIL released) until at least one event or the timeout (-1:
 * none), then takes what else is ready, up to max. [] on a timeout or a signal
 * (its Python handler has run: KeyboardInterrupt propagates from here). */
static PyObject *handle_wait(Handle *h, PyObject *args)
{
	int timeout_ms;
	Py_ssize_t max;
	if (!PyArg_ParseTuple(args, "in", &timeout_ms, &max))
		return NULL;
	if (need_open(h))
		return NULL;
	if (h->dead)
		return raise_errno(h->dead, dead_message(h->dead));
	PyObject *list = PyList_New(0);
	if (!list)
		return NULL;
	int r = drain(h, list, max); /* ready ones first: no GIL round trip */
	/* Sleep only when that found nothing: events already taken must go back now,
	 * or a FINAL sits in the list while we wait for one that never comes. */
	if (r == 0 && PyList_GET_SIZE(list) == 0 && timeout_ms != 0) {
		struct allm_event ev;
		Py_BEGIN_ALLOW_THREADS
		r = api.wait(h->c, &ev, sizeof(ev), timeout_ms);
		Py_END_ALLOW_THREADS
		if (r == 1) {
			PyObject *t = native_event_tuple(&ev);
			if (!t || PyList_Append(list, t) < 0) {
				Py_XDECREF(t);
				Py_DECREF(list);
				return NULL;
			}
			Py_DECREF(t);
			r = drain(h, list, max);
		} else if (r == -EINTR) {
			if (PyErr_CheckSignals() < 0) {
				Py_DECREF(list);
				return NULL;
			}
			r = 0;
		}
	}
	return finish_drain(h, list, r);
}

static PyObject *handle_fileno(Handle *h, PyObject *unused)
{
	(void)unused;
	if (need_open(h))
		return NULL;
	return PyLong_FromLong(api.fd(h->c));
}

static PyObject *handle_lease_fd(Handle *h, PyObject *unused)
{
	(void)unused;
	if (need_open(h))
		return NULL;
	return PyLong_FromLong(api.lease_fd(h->c));
}

static PyObject *handle_get_model(Handle *h, void *closure)
{
	(void)closure;
	if (need_open(h))
		return NULL;
	return PyUnicode_DecodeUTF8(api.model(h->c), (Py_ssize_t)strlen(api.model(h->c)), "replace");
}

static PyObject *handle_get_client_id(Handle *h, void *closure)
{
	(void)closure;
	if (need_open(h))
		return NULL;
	return PyLong_FromUnsignedLong(api.id(h->c));
}

static PyObject *handle_get_closed(Handle *h, void *closure)
{
	(void)closure;
	return PyBool_FromLong(h->c == NULL);
}

static PyMethodDef handle_methods[] = {
	{ "submit", (PyCFunction)handle_submit, METH_VARARGS, "Queue one request (see _native.c)." },
	{ "cancel", (PyCFunction)handle_cancel, METH_O, "Ask the engine to cancel request_id." },
	{ "poll", (PyCFunction)handle_poll, METH_O, "Events ready now, at most max." },
	{ "wait", (PyCFunction)handle_wait, METH_VARARGS, "Block for events (timeout_ms, max)." },
	{ "fileno", (PyCFunction)handle_fileno, METH_NOARGS, "The CQ doorbell's fd (readable: poll again)." },
	{ "lease_fd", (PyCFunction)handle_lease_fd, METH_NOARGS, "The lease socket (readable: engine gone)." },
	{ "close", (PyCFunction)handle_close, METH_NOARGS, "Disconnect (the engine cancels what is in flight)." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef handle_getset[] = {
	{ "model", (getter)handle_get_model, NULL, "the model the engine serves", NULL },
	{ "client_id", (getter)handle_get_client_id, NULL, "the engine's number for this client", NULL },
	{ "closed", (getter)handle_get_closed, NULL, "whether close() was called", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject HandleType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "adaptivellm._native.Handle",
	.tp_basicsize = sizeof(Handle),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One connection to allm-engined (allm_client_t).",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)handle_init,
	.tp_dealloc = (destructor)handle_dealloc,
	.tp_methods = handle_methods,
	.tp_getset = handle_getset,
};

int native_handle_init(PyObject *m)
{
	if (PyType_Ready(&HandleType) < 0)
		return -1;
	Py_INCREF(&HandleType);
	if (PyModule_AddObject(m, "Handle", (PyObject *)&HandleType) < 0) {
		Py_DECREF(&HandleType);
		return -1;
	}
	return 0;
}
