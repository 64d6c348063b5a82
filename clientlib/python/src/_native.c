/* adaptivellm._native: the CPython binding of libadaptivellm (include/adaptivellm/
 * client.h), the only C the Python package has.
 *
 * Why an extension and not ctypes: a token costs one C call that drains up to
 * `max` events into ready-made Python objects (~0.2 us per event), where ctypes
 * pays a foreign call, a struct copy and a field read per attribute (several us
 * per token, the whole budget of the 64-stream target); and the structs are the
 * header's own, compiled, not a layout re-declared in Python.
 *
 * The library is not linked: load(path) dlopen()s it and takes every entry point
 * with dlsym, so the Python side chooses which libadaptivellm.so.2 to use
 * (ALLM_LIBRARY, the build tree, the system loader: adaptivellm/_library.py) and a
 * missing one is a clear ImportError-time message, not a loader failure.
 *
 * A Handle is one allm_client_t. Like the C handle it is used by one thread at a
 * time: the Python classes above it serialize the calls. Blocking calls (connect,
 * wait) release the GIL.
 *
 * Errors: OSError(errno, message) with the library's message where it gives one. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <adaptivellm/client.h>

#include <dlfcn.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* --- the library's entry points ----------------------------------------------- */

/* Typed from the header's own prototypes (__typeof__), so a signature change in
 * client.h is a compile error here, not a crash. */
static struct {
	void *dl;
	__typeof__(allm_client_connect) *connect;
	__typeof__(allm_client_disconnect) *disconnect;
	__typeof__(allm_request_params_init_sized) *params_init;
	__typeof__(allm_client_submit) *submit;
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
} api;

static int load_rows(void); /* the parameter table: below */

static PyObject *native_load(PyObject *mod, PyObject *arg)
{
	(void)mod;
	const char *path = PyUnicode_AsUTF8(arg);
	if (!path)
		return NULL;
	if (api.dl)
		Py_RETURN_FALSE; /* loaded once per process; the first choice stays */
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();
		PyErr_Format(PyExc_ImportError, "cannot load %s: %s", path, e ? e : "unknown error");
		return NULL;
	}
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{ "allm_client_connect", (void **)&api.connect },
		{ "allm_client_disconnect", (void **)&api.disconnect },
		{ "allm_request_params_init_sized", (void **)&api.params_init },
		{ "allm_client_submit", (void **)&api.submit },
		{ "allm_client_cancel", (void **)&api.cancel },
		{ "allm_client_poll_sized", (void **)&api.poll },
		{ "allm_client_wait_sized", (void **)&api.wait },
		{ "allm_client_fd", (void **)&api.fd },
		{ "allm_client_lease_fd", (void **)&api.lease_fd },
		{ "allm_client_model", (void **)&api.model },
		{ "allm_client_id", (void **)&api.id },
		{ "allm_finish_reason_name", (void **)&api.finish_name },
		{ "allm_param_desc", (void **)&api.param_desc },
		{ "allm_params_check", (void **)&api.params_check },
		{ "allm_logit_bias_check", (void **)&api.bias_check },
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(dl, syms[i].name);
		if (!f) {
			PyErr_Format(PyExc_ImportError, "%s has no %s: not the libadaptivellm this package was built for",
				     path, syms[i].name);
			memset(&api, 0, sizeof(api));
			dlclose(dl);
			return NULL;
		}
		*syms[i].slot = f;
	}
	api.dl = dl; /* never closed: Handles may outlive everything else */
	if (load_rows() < 0) {
		memset(&api, 0, sizeof(api));
		return NULL;
	}
	Py_RETURN_TRUE;
}

static int need_api(void)
{
	if (api.dl)
		return 0;
	PyErr_SetString(PyExc_RuntimeError, "libadaptivellm is not loaded (adaptivellm._library does it)");
	return -1;
}

/* OSError(errno, message): the message given, else strerror's. */
static PyObject *raise_errno(int neg, const char *msg)
{
	int e = neg < 0 ? -neg : neg;
	PyObject *v = Py_BuildValue("(is)", e, msg && *msg ? msg : strerror(e));
	if (v) {
		PyErr_SetObject(PyExc_OSError, v);
		Py_DECREF(v);
	}
	return NULL;
}

/* --- the request's parameters ---------------------------------------------------- */

/* The table of request parameters is the library's (params.h: allm_param_desc(i)),
 * read once at load: the Python side (adaptivellm/_params.py) takes every name,
 * type, range, "off" value, default, CLI flag, JSON key and help line from
 * param_table(), and submit() stores the values at the rows' offsets in struct
 * allm_params. So a row added to the table reaches Python with no change here or
 * there.
 *
 * Rows past the struct this extension was compiled with (a newer library than
 * the header it was built against) are left out: there is no room for their
 * values in our struct allm_params, and the library treats them as off. */
static const struct allm_param_desc **rows;
static size_t n_rows;

static int load_rows(void)
{
	size_t n = 0;
	while (api.param_desc(n))
		n++;
	rows = PyMem_Calloc(n ? n : 1, sizeof(*rows));
	if (!rows) {
		PyErr_NoMemory();
		return -1;
	}
	n_rows = 0;
	for (size_t i = 0; i < n; i++) {
		const struct allm_param_desc *d = api.param_desc(i);
		if ((size_t)d->offset + d->size <= sizeof(struct allm_params))
			rows[n_rows++] = d;
	}
	return 0;
}

/* Row i's field of *p as a Python number. */
static PyObject *param_get(const struct allm_params *p, const struct allm_param_desc *r)
{
	const char *at = (const char *)p + r->offset;
	switch (r->type) {
	case ALLM_PARAM_I32: { int32_t v; memcpy(&v, at, sizeof(v)); return PyLong_FromLong(v); }
	case ALLM_PARAM_U64: { uint64_t v; memcpy(&v, at, sizeof(v)); return PyLong_FromUnsignedLongLong(v); }
	case ALLM_PARAM_F32: { float v; memcpy(&v, at, sizeof(v)); return PyFloat_FromDouble(v); }
	case ALLM_PARAM_BOOL: { uint32_t v; memcpy(&v, at, sizeof(v)); return PyLong_FromLong(v != 0); }
	}
	return PyErr_Format(PyExc_RuntimeError, "row %s: unknown type", r->name);
}

/* param_table() -> ({name, type, flags, lo, hi, off, default, flag, json, help},
 * ...): the table's rows in order; default is the stored value the library's
 * allm_request_params_init_sized sets, off None where the parameter is never off. */
static PyObject *native_param_table(PyObject *mod, PyObject *unused)
{
	(void)mod, (void)unused;
	if (need_api())
		return NULL;
	struct allm_request_params p;
	api.params_init(&p, sizeof(p));
	PyObject *t = PyTuple_New((Py_ssize_t)n_rows);
	if (!t)
		return NULL;
	for (size_t i = 0; i < n_rows; i++) {
		const struct allm_param_desc *r = rows[i];
		PyObject *off = isnan(r->off) ? Py_NewRef(Py_None) : PyFloat_FromDouble(r->off);
		PyObject *dflt = off ? param_get(&p.params, r) : NULL;
		PyObject *row = dflt ? Py_BuildValue("{s:s,s:i,s:I,s:d,s:d,s:N,s:N,s:z,s:z,s:z}", "name", r->name,
						     "type", (int)r->type, "flags", r->flags, "lo", r->lo, "hi",
						     r->hi, "off", off, "default", dflt, "flag", r->flag, "json",
						     r->json, "help", r->help)
				     : NULL;
		if (!dflt)
			Py_XDECREF(off);
		if (!row) {
			Py_DECREF(t);
			return NULL;
		}
		PyTuple_SET_ITEM(t, i, row);
	}
	return t;
}

/* Stores v (checked by _params.py against row r; a Python int or float) in r's
 * field of *p. Returns 0, or -1 with an exception. */
static int param_set(struct allm_params *p, const struct allm_param_desc *r, PyObject *v)
{
	char *at = (char *)p + r->offset;
	switch (r->type) {
	case ALLM_PARAM_I32: {
		long x = PyLong_AsLong(v);
		if (x == -1 && PyErr_Occurred())
			return -1;
		if (x < INT32_MIN || x > INT32_MAX) {
			PyErr_Format(PyExc_OverflowError, "%s does not fit an int32", r->name);
			return -1;
		}
		int32_t y = (int32_t)x;
		memcpy(at, &y, sizeof(y));
		return 0;
	}
	case ALLM_PARAM_U64: {
		unsigned long long x = PyLong_AsUnsignedLongLong(v);
		if (x == (unsigned long long)-1 && PyErr_Occurred())
			return -1;
		uint64_t y = x;
		memcpy(at, &y, sizeof(y));
		return 0;
	}
	case ALLM_PARAM_F32: {
		double x = PyFloat_AsDouble(v);
		if (x == -1.0 && PyErr_Occurred())
			return -1;
		float y = (float)x;
		memcpy(at, &y, sizeof(y));
		return 0;
	}
	case ALLM_PARAM_BOOL: {
		int x = PyObject_IsTrue(v);
		if (x < 0)
			return -1;
		uint32_t y = x != 0;
		memcpy(at, &y, sizeof(y));
		return 0;
	}
	}
	return 0;
}

/* --- events as Python objects ------------------------------------------------------- */

static PyTypeObject *TokenType; /* adaptivellm.Token, a struct sequence */

static PyStructSequence_Field token_fields[] = {
	{ "id", "the token's id; -1 for text the detokenizer held back and flushed at the end" },
	{ "text", "its text piece (may be empty: incomplete UTF-8 arrives with a later token)" },
	{ "logprob", "its log-probability under the model (None unless the request asked)" },
	{ "top_logprobs", "((id, logprob), ...) of the most likely tokens, best first (None unless asked)" },
	{ NULL, NULL },
};
static PyStructSequence_Desc token_desc = {
	"adaptivellm.Token",
	"One generated token: .id, .text, .logprob, .top_logprobs.",
	token_fields,
	4,
};

/* Event kinds as the tuples below carry them (the library's enum values). */
static PyObject *token_object(const struct allm_event *ev)
{
	PyObject *tok = PyStructSequence_New(TokenType);
	if (!tok)
		return NULL;
	PyObject *id = PyLong_FromLong(ev->token_id);
	PyObject *text = PyUnicode_DecodeUTF8(ev->text, (Py_ssize_t)ev->text_len, "replace");
	PyObject *lp = NULL, *top = NULL;
	if (ev->logprobs) {
		const struct allm_cqe_logprobs *l = ev->logprobs;
		uint32_t n = l->n_top < ALLM_LOGPROBS_MAX ? l->n_top : ALLM_LOGPROBS_MAX;
		lp = PyFloat_FromDouble(l->sampled.logprob);
		top = PyTuple_New(n);
		for (uint32_t k = 0; top && k < n; k++) {
			PyObject *pair = Py_BuildValue("(id)", l->top[k].token_id, (double)l->top[k].logprob);
			if (!pair) {
				Py_CLEAR(top);
				break;
			}
			PyTuple_SET_ITEM(top, k, pair);
		}
	} else {
		lp = Py_NewRef(Py_None);
		top = Py_NewRef(Py_None);
	}
	if (!id || !text || !lp || !top) {
		Py_XDECREF(id), Py_XDECREF(text), Py_XDECREF(lp), Py_XDECREF(top);
		Py_DECREF(tok);
		return NULL;
	}
	PyStructSequence_SET_ITEM(tok, 0, id);
	PyStructSequence_SET_ITEM(tok, 1, text);
	PyStructSequence_SET_ITEM(tok, 2, lp);
	PyStructSequence_SET_ITEM(tok, 3, top);
	return tok;
}

/* One event as a tuple, by kind:
 *   (1, user_tag, request_id)                                       ACCEPTED
 *   (2, user_tag, Token)                                            TOKEN
 *   (3, user_tag, request_id, finish_reason, status, error or None,
 *    queue_us, ttft_us, total_us, n_prompt, n_generated, n_preemptions, n_cached)  FINAL */
static PyObject *event_tuple(const struct allm_event *ev)
{
	switch (ev->kind) {
	case ALLM_EVENT_ACCEPTED:
		return Py_BuildValue("(iKK)", (int)ev->kind, (unsigned long long)ev->user_tag,
				     (unsigned long long)ev->request_id);
	case ALLM_EVENT_TOKEN: {
		PyObject *tok = token_object(ev);
		return tok ? Py_BuildValue("(iKN)", (int)ev->kind, (unsigned long long)ev->user_tag, tok) : NULL;
	}
	case ALLM_EVENT_FINAL:
		return Py_BuildValue("(iKKiizKKKIIII)", (int)ev->kind, (unsigned long long)ev->user_tag,
				     (unsigned long long)ev->request_id, ev->finish_reason, (int)ev->status,
				     ev->error, (unsigned long long)ev->queue_us, (unsigned long long)ev->ttft_us,
				     (unsigned long long)ev->total_us, ev->n_prompt, ev->n_generated,
				     ev->n_preemptions, ev->n_cached);
	}
	PyErr_Format(PyExc_RuntimeError, "unknown event kind %d", (int)ev->kind);
	return NULL;
}

/* --- Handle ------------------------------------------------------------------------- */

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

/* submit(tag, prompt, prompt_ids, scalars, stop_ids, logit_bias, cache_salt) -> bool
 *   prompt: bytes or None; prompt_ids: a sequence of ints or None (one of the two);
 *   values: one per row of param_table(), in order (the stored value, or None for
 *   the library's default); stop_ids: sequence of
 *   ints or None; logit_bias: sequence of (id, bias) or None; cache_salt: bytes
 *   (<= ALLM_CACHE_SALT_BYTES) or None.
 * True: queued; False: the SQ ring or the arena is full (consume events, retry);
 * OSError otherwise (EINVAL: the library refused the parameters; E2BIG: the
 * prompt is larger than the arena; EPIPE / EPROTO: the handle is dead). */
static PyObject *handle_submit(Handle *h, PyObject *args)
{
	unsigned long long tag;
	PyObject *prompt, *ids, *values, *stops, *bias, *salt;
	if (!PyArg_ParseTuple(args, "KOOO!OOO", &tag, &prompt, &ids, &PyTuple_Type, &values, &stops, &bias, &salt))
		return NULL;
	if (need_open(h))
		return NULL;
	struct allm_request_params p;
	int32_t *idv = NULL;
	struct allm_logit_bias *biasv = NULL;
	PyObject *ret = NULL;
	char why[256] = "";
	api.params_init(&p, sizeof(p));
	p.user_tag = tag;

	if (prompt != Py_None) {
		char *s;
		Py_ssize_t n;
		if (PyBytes_AsStringAndSize(prompt, &s, &n) < 0)
			goto out;
		p.prompt = s;
		p.prompt_len = (size_t)n;
	}
	if (ids != Py_None) {
		PyObject *seq = PySequence_Fast(ids, "prompt_ids must be a sequence of ints");
		if (!seq)
			goto out;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
		idv = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*idv));
		if (!idv) {
			Py_DECREF(seq);
			PyErr_NoMemory();
			goto out;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
			if (v == -1 && PyErr_Occurred()) {
				Py_DECREF(seq);
				goto out;
			}
			if (v < 0 || v > INT32_MAX) {
				Py_DECREF(seq);
				PyErr_Format(PyExc_ValueError, "prompt_ids[%zd] = %ld is not a token id (0..%d)", i, v,
					     INT32_MAX);
				goto out;
			}
			idv[i] = (int32_t)v;
		}
		Py_DECREF(seq);
		p.prompt_ids = idv;
		p.n_prompt_ids = (size_t)n;
	}
	if (PyTuple_GET_SIZE(values) != (Py_ssize_t)n_rows) {
		PyErr_Format(PyExc_ValueError, "want %zu parameter values (param_table()), got %zd", n_rows,
			     PyTuple_GET_SIZE(values));
		goto out;
	}
	for (size_t i = 0; i < n_rows; i++) {
		PyObject *v = PyTuple_GET_ITEM(values, (Py_ssize_t)i); /* borrowed; None: the default */
		if (v != Py_None && param_set(&p.params, rows[i], v))
			goto out;
	}
	if (stops != Py_None) {
		PyObject *seq = PySequence_Fast(stops, "stop_ids must be a sequence of ints");
		if (!seq)
			goto out;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
		if (n > ALLM_PARAMS_MAX_STOP) {
			Py_DECREF(seq);
			PyErr_Format(PyExc_ValueError, "at most %d stop_ids", ALLM_PARAMS_MAX_STOP);
			goto out;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
			if ((v == -1 && PyErr_Occurred()) || v < INT32_MIN || v > INT32_MAX) {
				Py_DECREF(seq);
				if (!PyErr_Occurred())
					PyErr_SetString(PyExc_OverflowError, "a stop id does not fit an int32");
				goto out;
			}
			p.params.stop_ids[i] = (int32_t)v;
		}
		Py_DECREF(seq);
		p.params.n_stop = (uint32_t)n;
	}
	if (bias != Py_None) {
		PyObject *seq = PySequence_Fast(bias, "logit_bias must be a sequence of (id, bias)");
		if (!seq)
			goto out;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
		biasv = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*biasv));
		if (!biasv) {
			Py_DECREF(seq);
			PyErr_NoMemory();
			goto out;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			int id;
			double b;
			if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "id", &id, &b)) {
				Py_DECREF(seq);
				goto out;
			}
			biasv[i] = (struct allm_logit_bias){ .token_id = id, .bias = (float)b };
		}
		Py_DECREF(seq);
		p.logit_bias = biasv;
		p.n_logit_bias = (uint32_t)n;
	}
	if (salt != Py_None) {
		char *s;
		Py_ssize_t n;
		if (PyBytes_AsStringAndSize(salt, &s, &n) < 0)
			goto out;
		if (n > ALLM_CACHE_SALT_BYTES) {
			PyErr_Format(PyExc_ValueError, "cache_salt: at most %d bytes", ALLM_CACHE_SALT_BYTES);
			goto out;
		}
		memcpy(p.params.cache_salt, s, (size_t)n);
	}

	/* The library's own checks first, for their words: submit() says only
	 * -EINVAL, these say which parameter and its range (min_tokens > max_tokens,
	 * a bias out of range: what relates values or the Python side leaves to the
	 * table's code). */
	if (api.params_check(&p.params, why, sizeof(why)) ||
	    api.bias_check(p.logit_bias, p.n_logit_bias, why, sizeof(why))) {
		raise_errno(-EINVAL, why);
		goto out;
	}
	int r = api.submit(h->c, &p); /* non-blocking: no GIL release */
	if (r == 0)
		ret = Py_NewRef(Py_True);
	else if (r == -EAGAIN)
		ret = Py_NewRef(Py_False);
	else {
		if (r == -EPIPE || r == -EPROTO)
			h->dead = r;
		raise_errno(r, r == -EINVAL ? "libadaptivellm refused the request's parameters"
				: r == -E2BIG ? "the prompt does not fit the engine's prompt arena"
					      : dead_message(r));
	}
out:
	PyMem_Free(idv);
	PyMem_Free(biasv);
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
		PyObject *t = event_tuple(&ev);
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
			PyObject *t = event_tuple(&ev);
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

/* --- module ------------------------------------------------------------------------- */

static PyObject *native_finish_reason_name(PyObject *mod, PyObject *arg)
{
	(void)mod;
	long r = PyLong_AsLong(arg);
	if (r == -1 && PyErr_Occurred())
		return NULL;
	if (need_api())
		return NULL;
	return PyUnicode_FromString(api.finish_name((int)r));
}

static PyMethodDef native_methods[] = {
	{ "load", native_load, METH_O, "dlopen libadaptivellm at this path (once per process)." },
	{ "param_table", native_param_table, METH_NOARGS,
	  "The request-parameter table's rows, in order (see _native.c)." },
	{ "finish_reason_name", native_finish_reason_name, METH_O, "A finish reason as a word." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef native_module = {
	PyModuleDef_HEAD_INIT, "adaptivellm._native", "The CPython binding of libadaptivellm.", -1,
	native_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *m = PyModule_Create(&native_module);
	if (!m)
		return NULL;
	if (PyType_Ready(&HandleType) < 0)
		goto fail;
	TokenType = PyStructSequence_NewType(&token_desc);
	if (!TokenType)
		goto fail;
	Py_INCREF(&HandleType);
	if (PyModule_AddObject(m, "Handle", (PyObject *)&HandleType) < 0) {
		Py_DECREF(&HandleType);
		goto fail;
	}
	if (PyModule_AddObjectRef(m, "Token", (PyObject *)TokenType) < 0)
		goto fail;
	/* the header's constants the Python side needs (not copied there) */
	if (PyModule_AddIntConstant(m, "EVENT_ACCEPTED", ALLM_EVENT_ACCEPTED) ||
	    PyModule_AddIntConstant(m, "EVENT_TOKEN", ALLM_EVENT_TOKEN) ||
	    PyModule_AddIntConstant(m, "EVENT_FINAL", ALLM_EVENT_FINAL) ||
	    PyModule_AddIntConstant(m, "FINISH_EOS", ALLM_FINISH_EOS) ||
	    PyModule_AddIntConstant(m, "FINISH_LENGTH", ALLM_FINISH_LENGTH) ||
	    PyModule_AddIntConstant(m, "FINISH_STOP", ALLM_FINISH_STOP) ||
	    PyModule_AddIntConstant(m, "FINISH_CANCELLED", ALLM_FINISH_CANCELLED) ||
	    PyModule_AddIntConstant(m, "FINISH_ERROR", ALLM_FINISH_ERROR) ||
	    PyModule_AddIntConstant(m, "PARAM_I32", ALLM_PARAM_I32) ||
	    PyModule_AddIntConstant(m, "PARAM_U64", ALLM_PARAM_U64) ||
	    PyModule_AddIntConstant(m, "PARAM_F32", ALLM_PARAM_F32) ||
	    PyModule_AddIntConstant(m, "PARAM_BOOL", ALLM_PARAM_BOOL) ||
	    PyModule_AddIntConstant(m, "PARAM_F_LO_OPEN", ALLM_PARAM_F_LO_OPEN) ||
	    PyModule_AddIntConstant(m, "PARAM_F_PLUS_ONE", ALLM_PARAM_F_PLUS_ONE) ||
	    PyModule_AddIntConstant(m, "MAX_STOP", ALLM_PARAMS_MAX_STOP) ||
	    PyModule_AddIntConstant(m, "LOGPROBS_MAX", ALLM_LOGPROBS_MAX) ||
	    PyModule_AddIntConstant(m, "LOGIT_BIAS_MAX", ALLM_LOGIT_BIAS_MAX) ||
	    PyModule_AddIntConstant(m, "CACHE_SALT_BYTES", ALLM_CACHE_SALT_BYTES) ||
	    PyModule_AddStringConstant(m, "HEADER_VERSION", ADAPTIVELLM_VERSION_STRING))
		goto fail;
	if (PyModule_AddObject(m, "LOGIT_BIAS_LO", PyFloat_FromDouble(ALLM_LOGIT_BIAS_LO)) ||
	    PyModule_AddObject(m, "LOGIT_BIAS_HI", PyFloat_FromDouble(ALLM_LOGIT_BIAS_HI)))
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
