# Description: test client for gateway-clients.sh (not a test by itself): the openai SDK, LiteLLM and LangChain's ChatOpenAI, each driven against allm-gateway on the stories model as their users write it: a plain chat, a streamed one, n=2, logprobs, an error, and (the SDK) models.retrieve(). Env: GW_URL, GW_MODEL (the served name).
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import

url, model = os.environ["GW_URL"] + "/v1", os.environ["GW_MODEL"]
failed = 0
MSGS = [{"role": "user", "content": "Tell me a story."}]


def ok(m):
    print("ok: " + m)


def fail(m):
    global failed
    failed += 1
    print("FAIL: " + m)


def check(what, fn):
    try:
        good, detail = fn()
    except Exception as e:  # a client's exception is a failure of this check alone
        good, detail = False, "%s: %s" % (type(e).__name__, str(e)[:300])
    (ok if good else fail)("%s (%s)" % (what, detail))


# --- the openai SDK --------------------------------------------------------------------
import openai  # noqa: E402

sdk = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
greedy = {}


def sdk_plain():
    r = sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=12, temperature=0)
    greedy["text"] = r.choices[0].message.content
    return bool(greedy["text"]) and r.usage.completion_tokens == 12, repr(greedy["text"])


def sdk_stream():
    s = sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=12, temperature=0, stream=True)
    t = "".join(c.choices[0].delta.content or "" for c in s if c.choices)
    return t == greedy.get("text"), "%r, the plain answer's text" % t


def sdk_n2():
    r = sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=12, n=2, seed=5)
    return sorted(c.index for c in r.choices) == [0, 1], "%d choices" % len(r.choices)


def sdk_logprobs():
    r = sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=4, temperature=0, logprobs=True,
                                    top_logprobs=3)
    c = r.choices[0].logprobs.content
    return len(c) == 4 and all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in c), "%d tokens" % len(c)


def sdk_error():
    try:
        sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=4, extra_body={"typical_p": 0.5})
    except openai.BadRequestError as e:
        return e.status_code == 400 and e.body["param"] == "typical_p", e.body["message"]
    return False, "no error"


def sdk_retrieve():
    m = sdk.models.retrieve(model)
    return m.id == model and m.created > 0, "%s created %s" % (m.id, m.created)


check("openai SDK: plain chat", sdk_plain)
check("openai SDK: streamed, the same text", sdk_stream)
check("openai SDK: n=2", sdk_n2)
check("openai SDK: logprobs with top_logprobs 3", sdk_logprobs)
check("openai SDK: an unsupported field is a BadRequestError naming it", sdk_error)
check("openai SDK: models.retrieve()", sdk_retrieve)

# --- LiteLLM (its OpenAI-compatible provider) ----------------------------------------------
import litellm  # noqa: E402

ll = dict(model="openai/" + model, api_base=url, api_key="EMPTY", num_retries=0)


def ll_plain():
    r = litellm.completion(messages=MSGS, max_tokens=12, temperature=0, **ll)
    t = r.choices[0].message.content
    return t == greedy.get("text") and r.usage.completion_tokens == 12, repr(t)


def ll_stream():
    s = litellm.completion(messages=MSGS, max_tokens=12, temperature=0, stream=True, **ll)
    t = "".join(c.choices[0].delta.content or "" for c in s if c.choices)
    return t == greedy.get("text"), repr(t)


def ll_n2():
    r = litellm.completion(messages=MSGS, max_tokens=12, n=2, seed=5, **ll)
    return len(r.choices) == 2, "%d choices" % len(r.choices)


def ll_logprobs():
    r = litellm.completion(messages=MSGS, max_tokens=4, temperature=0, logprobs=True, top_logprobs=2, **ll)
    c = r.choices[0].logprobs.content
    return len(c) == 4 and all(len(t.top_logprobs) == 2 for t in c), "%d tokens" % len(c)


def ll_error():
    try:
        litellm.completion(messages=MSGS, max_tokens=4, temperature=-1, **ll)
    except litellm.BadRequestError as e:
        return e.status_code == 400 and "temperature" in str(e), str(e)[:120]
    return False, "no error"


check("LiteLLM: plain chat, the SDK's greedy text", ll_plain)
check("LiteLLM: streamed", ll_stream)
check("LiteLLM: n=2", ll_n2)
check("LiteLLM: logprobs", ll_logprobs)
check("LiteLLM: a bad temperature is its BadRequestError", ll_error)

# --- LangChain's ChatOpenAI ----------------------------------------------------------------
from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

lc = dict(model=model, base_url=url, api_key="EMPTY", max_retries=0)


def lc_plain():
    m = ChatOpenAI(max_tokens=12, temperature=0, **lc).invoke("Tell me a story.")
    return m.content == greedy.get("text") and m.usage_metadata["output_tokens"] == 12, repr(m.content)


def lc_stream():
    t = "".join(c.content for c in ChatOpenAI(max_tokens=12, temperature=0, **lc).stream("Tell me a story."))
    return t == greedy.get("text"), repr(t)


def lc_n2():
    g = ChatOpenAI(max_tokens=12, n=2, seed=5, **lc).generate([[HumanMessage("Tell me a story.")]])
    return len(g.generations[0]) == 2, "%d generations" % len(g.generations[0])


def lc_logprobs():
    m = ChatOpenAI(max_tokens=4, temperature=0, logprobs=True, top_logprobs=2, **lc).invoke("Tell me a story.")
    c = m.response_metadata["logprobs"]["content"]
    return len(c) == 4 and all(len(t["top_logprobs"]) == 2 for t in c), "%d tokens" % len(c)


def lc_error():
    try:
        ChatOpenAI(max_tokens=4, temperature=-1, **lc).invoke("Tell me a story.")
    except openai.BadRequestError as e:
        return e.status_code == 400 and e.body["param"] == "temperature", e.body["message"]
    return False, "no error"


check("LangChain ChatOpenAI: invoke, the SDK's greedy text", lc_plain)
check("LangChain ChatOpenAI: stream", lc_stream)
check("LangChain ChatOpenAI: n=2", lc_n2)
check("LangChain ChatOpenAI: logprobs", lc_logprobs)
check("LangChain ChatOpenAI: a bad temperature is a BadRequestError", lc_error)
sys.exit(1 if failed else 0)
