/* adaptivellm._native: the request-parameter table (libadaptivellm's params.h)
 * as Python sees it, and a request built from the values Python checked. */
#include "native.h"

#include <errno.h>
#include <math.h>
#include <string.h>

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

int native_load_rows(void)
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
PyObject *native_param_table(PyObject *mod, PyObject *unused)
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

/* Fills *p (initialised by the caller) from submit()'s Python arguments (see
 * handle.c): the prompt (bytes) or its ids, the table's values by the rows'
 * offsets, stop ids, the logit bias, the cache salt; then the library's own checks,
 * for their words (allm_params_check, allm_logit_bias_check: what relates values,
 * which the Python side leaves to the table's code). Returns 0, or -1 with an
 * exception (OSError(EINVAL, the library's why) for a refused value). What it
 * allocates is in *mem, freed by native_request_free whatever it returned. */
int native_request_build(struct allm_request_params *p, struct native_request_mem *mem, PyObject *prompt,
			 PyObject *ids, PyObject *values, PyObject *stops, PyObject *bias, PyObject *salt)
{
	char why[256] = "";
	if (prompt != Py_None) {
		char *s;
		Py_ssize_t n;
		if (PyBytes_AsStringAndSize(prompt, &s, &n) < 0)
			return -1;
		p->prompt = s;
		p->prompt_len = (size_t)n;
	}
	if (ids != Py_None) {
		PyObject *seq = PySequence_Fast(ids, "prompt_ids must be a sequence of ints");
		if (!seq)
			return -1;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
		mem->ids = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*mem->ids));
		if (!mem->ids) {
			Py_DECREF(seq);
			PyErr_NoMemory();
			return -1;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
			if (v == -1 && PyErr_Occurred()) {
				Py_DECREF(seq);
				return -1;
			}
			if (v < 0 || v > INT32_MAX) {
				Py_DECREF(seq);
				PyErr_Format(PyExc_ValueError, "prompt_ids[%zd] = %ld is not a token id (0..%d)", i, v,
					     INT32_MAX);
				return -1;
			}
			mem->ids[i] = (int32_t)v;
		}
		Py_DECREF(seq);
		p->prompt_ids = mem->ids;
		p->n_prompt_ids = (size_t)n;
	}
	if (PyTuple_GET_SIZE(values) != (Py_ssize_t)n_rows) {
		PyErr_Format(PyExc_ValueError, "want %zu parameter values (param_table()), got %zd", n_rows,
			     PyTuple_GET_SIZE(values));
		return -1;
	}
	for (size_t i = 0; i < n_rows; i++) {
		PyObject *v = PyTuple_GET_ITEM(values, (Py_ssize_t)i); /* borrowed; None: the default */
		if (v != Py_None && param_set(&p->params, rows[i], v))
			return -1;
	}
	if (stops != Py_None) {
		PyObject *seq = PySequence_Fast(stops, "stop_ids must be a sequence of ints");
		if (!seq)
			return -1;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
		if (n > ALLM_PARAMS_MAX_STOP) {
			Py_DECREF(seq);
			PyErr_Format(PyExc_ValueError, "at most %d stop_ids", ALLM_PARAMS_MAX_STOP);
			return -1;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
			if ((v == -1 && PyErr_Occurred()) || v < INT32_MIN || v > INT32_MAX) {
				Py_DECREF(seq);
				if (!PyErr_Occurred())
					PyErr_SetString(PyExc_OverflowError, "a stop id does not fit an int32");
				return -1;
			}
			p->params.stop_ids[i] = (int32_t)v;
		}
		Py_DECREF(seq);
		p->params.n_stop = (uint32_t)n;
	}
	if (bias != Py_None) {
		PyObject *seq = PySequence_Fast(bias, "logit_bias must be a sequence of (id, bias)");
		if (!seq)
			return -1;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
		mem->bias = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*mem->bias));
		if (!mem->bias) {
			Py_DECREF(seq);
			PyErr_NoMemory();
			return -1;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			int id;
			double b;
			if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "id", &id, &b)) {
				Py_DECREF(seq);
				return -1;
			}
			mem->bias[i] = (struct allm_logit_bias){ .token_id = id, .bias = (float)b };
		}
		Py_DECREF(seq);
		p->logit_bias = mem->bias;
		p->n_logit_bias = (uint32_t)n;
	}
	if (salt != Py_None) {
		char *s;
		Py_ssize_t n;
		if (PyBytes_AsStringAndSize(salt, &s, &n) < 0)
			return -1;
		if (n > ALLM_CACHE_SALT_BYTES) {
			PyErr_Format(PyExc_ValueError, "cache_salt: at most %d bytes", ALLM_CACHE_SALT_BYTES);
			return -1;
		}
		memcpy(p->params.cache_salt, s, (size_t)n);
	}

	/* The library's own checks first, for their words: submit() says only
	 * -EINVAL, these say which parameter and its range (min_tokens > max_tokens,
	 * a bias out of range: what relates values or the Python side leaves to the
	 * table's code). */
	if (api.params_check(&p->params, why, sizeof(why)) ||
	    api.bias_check(p->logit_bias, p->n_logit_bias, why, sizeof(why))) {
		raise_errno(-EINVAL, why);
		return -1;
	}
	return 0;
}

void native_request_free(struct native_request_mem *mem)
{
	PyMem_Free(mem->ids);
	PyMem_Free(mem->bias);
	mem->ids = NULL;
	mem->bias = NULL;
}
