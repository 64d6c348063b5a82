/* adaptivellm._native: the library's events as Python objects (a Token struct
 * sequence, event tuples), built in C so a token costs no Python frame. */
#include "native.h"

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
	if (ev->all_logprobs) {
		const struct allm_logprobs *l = ev->all_logprobs;
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
PyObject *native_event_tuple(const struct allm_event *ev)
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

int native_events_init(PyObject *m)
{
	TokenType = PyStructSequence_NewType(&token_desc);
	if (!TokenType)
		return -1;
	return PyModule_AddObjectRef(m, "Token", (PyObject *)TokenType);
}
