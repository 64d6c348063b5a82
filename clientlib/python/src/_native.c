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
 * with dlsym, so the Python side chooses which libadaptivellm.so.N to use
 * (ALLM_LIBRARY, the build tree, the system loader: adaptivellm/_library.py) and a
 * missing one is a clear ImportError-time message, not a loader failure.
 *
 * A Handle is one allm_client_t. Like the C handle it is used by one thread at a
 * time: the Python classes above it serialize the calls. Blocking calls (connect,
 * wait) release the GIL.
 *
 * Errors: OSError(errno, message) with the library's message where it gives one.
 *
 * Files: _native.c the library's loading and the module; params.c the parameter
 * table and a request built from Python values; events.c events as Python
 * objects; handle.c the Handle type. */

#include "native.h"

#include <dlfcn.h> /* dlvsym: _GNU_SOURCE comes with Python.h (pyconfig.h) */
#include <errno.h>
#include <string.h>

struct native_api api;

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
	/* Each entry point at the symbol version of the header we are compiled
	 * against (clientlib/libadaptivellm.map): allm_client_submit is in both
	 * ADAPTIVELLM_0 (the struct before params.h, kept for old programs) and
	 * ADAPTIVELLM_1, and only the latter takes our struct. NULL: the name has one
	 * version. dlvsym, not dlsym: which version a plain dlsym returns is the
	 * loader's choice, not ours. */
	static const char V1[] = "ADAPTIVELLM_1";
	struct {
		const char *name;
		const char *version;
		void **slot;
	} syms[] = {
		{ "allm_client_connect", NULL, (void **)&api.connect },
		{ "allm_client_disconnect", NULL, (void **)&api.disconnect },
		{ "allm_request_params_init_sized", V1, (void **)&api.params_init },
		{ "allm_client_submit", V1, (void **)&api.submit },
		{ "allm_client_cancel", NULL, (void **)&api.cancel },
		{ "allm_client_poll_sized", V1, (void **)&api.poll },
		{ "allm_client_wait_sized", V1, (void **)&api.wait },
		{ "allm_client_fd", NULL, (void **)&api.fd },
		{ "allm_client_lease_fd", NULL, (void **)&api.lease_fd },
		{ "allm_client_model", NULL, (void **)&api.model },
		{ "allm_client_id", NULL, (void **)&api.id },
		{ "allm_finish_reason_name", NULL, (void **)&api.finish_name },
		{ "allm_param_desc", V1, (void **)&api.param_desc },
		{ "allm_params_check", V1, (void **)&api.params_check },
		{ "allm_logit_bias_check", V1, (void **)&api.bias_check },
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = syms[i].version ? dlvsym(dl, syms[i].name, syms[i].version) : dlsym(dl, syms[i].name);
		if (!f) {
			PyErr_Format(PyExc_ImportError, "%s has no %s%s%s: not the libadaptivellm this package was built for",
				     path, syms[i].name, syms[i].version ? "@" : "", syms[i].version ? syms[i].version : "");
			memset(&api, 0, sizeof(api));
			dlclose(dl);
			return NULL;
		}
		*syms[i].slot = f;
	}
	/* optional: a library before grammars (ADAPTIVELLM_2) serves everything else */
	api.submit_grammar = (__typeof__(api.submit_grammar))dlvsym(dl, "allm_client_submit_grammar", "ADAPTIVELLM_2");
	api.dl = dl; /* never closed: Handles may outlive everything else */
	if (native_load_rows() < 0) {
		memset(&api, 0, sizeof(api));
		return NULL;
	}
	Py_RETURN_TRUE;
}

int need_api(void)
{
	if (api.dl)
		return 0;
	PyErr_SetString(PyExc_RuntimeError, "libadaptivellm is not loaded (adaptivellm._library does it)");
	return -1;
}

/* OSError(errno, message): the message given, else strerror's. */
PyObject *raise_errno(int neg, const char *msg)
{
	int e = neg < 0 ? -neg : neg;
	PyObject *v = Py_BuildValue("(is)", e, msg && *msg ? msg : strerror(e));
	if (v) {
		PyErr_SetObject(PyExc_OSError, v);
		Py_DECREF(v);
	}
	return NULL;
}

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
	  "The request-parameter table's rows, in order (see params.c)." },
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
	if (native_handle_init(m) || native_events_init(m))
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
	    PyModule_AddIntConstant(m, "PARAM_F_NO_CLI", ALLM_PARAM_F_NO_CLI) ||
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
