# Description: test client for gateway-structured.sh and real-model-tools.sh (not a test by itself): structured output and tool calling through the openai SDK against allm-gateway. Env: GW_URL, GW_MODEL, GW_SEEDS (samples per check at temperature 1), GW_AUTO_CALLS ("1": tool_choice auto must call the weather tool, for a model that does), GW_ONLY ("tools": those checks alone), GW_PARALLEL ("1": streamed calls with parallel_tool_calls).
from types import SimpleNamespace
import json
import os
import re
import sys
import urllib.error
import urllib.request

import jsonschema
import openai

url, model = os.environ["GW_URL"], os.environ["GW_MODEL"]
seeds = range(int(os.environ.get("GW_SEEDS", "3")))
sdk = openai.OpenAI(base_url=url + "/v1", api_key="EMPTY", max_retries=0)
failed = 0


def ok(m):
    print("ok: " + m)


def fail(m):
    global failed
    failed += 1
    print("FAIL: " + m)


ONLY = os.environ.get("GW_ONLY")  # "tools": the tool-calling checks alone
section = "structured"


def check(what, fn):
    if ONLY and ONLY != section:
        return
    try:
        good, detail = fn()
    except Exception as e:  # one check's exception fails that check alone
        good, detail = False, "%s: %s" % (type(e).__name__, str(e)[:400])
    (ok if good else fail)("%s (%s)" % (what, detail))


def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


MSGS = [{"role": "user", "content": "Give me an example."}]
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                           "pet": {"enum": ["cat", "dog", None]}},
          "required": ["name", "age"], "additionalProperties": False}


def chat(extra, n=1, **kw):
    """The texts of n seeded samples at temperature 1 (finish_reason stop each)."""
    out = []
    for s in seeds:
        r = sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=kw.get("max_tokens", 120),
                                        temperature=1, seed=s, n=n, extra_body=extra.get("extra_body"),
                                        response_format=extra.get("response_format", openai.NOT_GIVEN))
        for c in r.choices:
            if c.finish_reason != "stop":
                raise AssertionError("seed %d: finish %s: %r" % (s, c.finish_reason, c.message.content))
            out.append(c.message.content)
    return out


def valid_all(texts, schema):
    for t in texts:
        jsonschema.validate(json.loads(t), schema)
    return True, "%d outputs, e.g. %r" % (len(texts), texts[0][:80])


# --- structured output: each spelling constrains what comes out ---------------------------
check("response_format json_schema (strict): every output validates",
      lambda: valid_all(chat({"response_format": {"type": "json_schema", "json_schema": {
          "name": "person", "strict": True, "schema": PERSON}}}), PERSON))
def json_object():
    # any object may run long: one that ended parses as an object, one cut starts as one
    r = sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=200, temperature=0,
                                    response_format={"type": "json_object"})
    t, f = r.choices[0].message.content, r.choices[0].finish_reason
    return (isinstance(json.loads(t), dict) if f == "stop" else t.lstrip().startswith("{")), "%s %r" % (f, t[:60])


check("response_format json_object: a JSON object", json_object)
check("json_schema (llama.cpp's), n=2: every choice validates",
      lambda: valid_all(chat({"extra_body": {"json_schema": PERSON}}, n=2), PERSON))
check("structured_outputs.json (vLLM's) validates",
      lambda: valid_all(chat({"extra_body": {"structured_outputs": {"json": PERSON}}}), PERSON))
check("guided_json as a JSON string validates",
      lambda: valid_all(chat({"extra_body": {"guided_json": json.dumps(PERSON)}}), PERSON))
RX = r"[A-Z][a-z]{2,6}-[0-9]{3}"
check("guided_regex: every output matches", lambda: (lambda t: (
    all(re.fullmatch(RX, x) for x in t), repr(t)))(chat({"extra_body": {"guided_regex": RX}})))
check("structured_outputs.regex: every output matches", lambda: (lambda t: (
    all(re.fullmatch(RX, x) for x in t), repr(t)))(chat({"extra_body": {"structured_outputs": {"regex": RX}}})))
CHOICES = ["sunny", "rainy", "a thunderstorm"]
check("guided_choice: one of the choices", lambda: (lambda t: (all(x in CHOICES for x in t), repr(t)))(
    chat({"extra_body": {"guided_choice": CHOICES}})))
check("structured_outputs.choice: one of the choices", lambda: (lambda t: (all(x in CHOICES for x in t), repr(t)))(
    chat({"extra_body": {"structured_outputs": {"choice": CHOICES}}})))
GBNF = 'root ::= animal " and " animal\nanimal ::= "cat" | "dog" | "owl"'
GRX = r"(cat|dog|owl) and (cat|dog|owl)"
check("grammar (GBNF, llama.cpp's): the output parses", lambda: (lambda t: (
    all(re.fullmatch(GRX, x) for x in t), repr(t)))(chat({"extra_body": {"grammar": GBNF}})))
check("guided_grammar and structured_outputs.grammar: the output parses", lambda: (lambda t: (
    all(re.fullmatch(GRX, x) for x in t), repr(t)))(
    chat({"extra_body": {"guided_grammar": GBNF}}) + chat({"extra_body": {"structured_outputs": {"grammar": GBNF}}})))


def completions_choice():
    r = sdk.completions.create(model=model, prompt="The weather today is", max_tokens=10, temperature=1, seed=3,
                               extra_body={"guided_choice": CHOICES})
    return r.choices[0].text in CHOICES, repr(r.choices[0].text)


check("/v1/completions takes them too", completions_choice)


def streamed_regex():
    s = sdk.chat.completions.create(model=model, messages=MSGS, max_tokens=40, temperature=1, seed=5, stream=True,
                                    extra_body={"guided_regex": RX})
    text = "".join(c.choices[0].delta.content or "" for c in s if c.choices)
    return re.fullmatch(RX, text) is not None, repr(text)


check("streamed, the joined deltas match", streamed_regex)


# --- refused, with the field and the place named --------------------------------------------
def refused(body, param, words):
    st, e = post("/v1/chat/completions", dict({"model": model, "messages": MSGS, "max_tokens": 4}, **body))
    msg = e.get("error", {}).get("message", "")
    return st == 400 and e["error"]["param"] == param and all(w in msg for w in words), "%s: %s" % (st, msg)


check("a GBNF that does not compile: 400 naming 'grammar' and its line",
      lambda: refused({"grammar": 'root ::= "a"\nb ::= ( "x"'}, "grammar", ["grammar", "line 2"]))
check("a regex that does not compile: 400 naming guided_regex and the place",
      lambda: refused({"guided_regex": "ab(c"}, "guided_regex", ["guided_regex", "regex at"]))
check("a JSON Schema it cannot honour: 400 naming response_format and the schema's place",
      lambda: refused({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
          "type": "object", "properties": {"a": {"not": {"type": "string"}}}}}}},
          "response_format", ["/properties/a"]))
check("two grammars at once: 400 naming both",
      lambda: refused({"guided_regex": "a", "response_format": {"type": "json_object"}}, "guided_regex",
                      ["response_format", "guided_regex"]))
check("tool_choice required and a grammar: 400",
      lambda: refused({"guided_regex": "a", "tools": [{"type": "function", "function": {"name": "f"}}],
                       "tool_choice": "required"}, "tool_choice", ["structured output"]))

# --- tool calling -------------------------------------------------------------------------------
section = "tools"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                                        "b": {"type": "integer", "minimum": 0, "maximum": 99}},
                       "required": ["a", "b"], "additionalProperties": False}}}]
SCHEMA = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "system", "content": "You are a helpful assistant."},
       {"role": "user", "content": "What is the weather like in Paris today?"}]


def calls_ok(calls, name=None):
    assert calls, "no tool_calls"
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_"), c
        assert name is None or c.function.name == name, c.function.name
        jsonschema.validate(json.loads(c.function.arguments), SCHEMA[c.function.name])
    return True


def tools_whole(choice, name=None, parallel=None):
    got = []
    for s in seeds:
        kw = {} if parallel is None else {"parallel_tool_calls": parallel}
        r = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=150,
                                        temperature=1, seed=s, **kw)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", (c.finish_reason, c.message)
        calls_ok(c.message.tool_calls, name)
        assert parallel is not False or len(c.message.tool_calls) == 1, c.message.tool_calls
        got.append("%s(%s)" % (c.message.tool_calls[0].function.name, c.message.tool_calls[0].function.arguments))
    return True, "; ".join(got)


check("tool_choice required, parallel_tool_calls false: every answer is a call that validates, finish tool_calls",
      lambda: tools_whole("required", None, False))


def parallel_required():
    # parallel calls: the model may go on calling until max_tokens; every whole call validates
    r = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=150,
                                    temperature=1, seed=11)
    c = r.choices[0]
    calls_ok(c.message.tool_calls)
    return c.finish_reason in ("tool_calls", "length") and (c.finish_reason == "length" or not c.message.content), \
        "%s, %d calls" % (c.finish_reason, len(c.message.tool_calls))


check("tool_choice required, parallel: calls that validate", parallel_required)
check("tool_choice a named function, parallel_tool_calls false: one call of it",
      lambda: tools_whole({"type": "function", "function": {"name": "add"}}, "add", False))


def tools_streamed(choice, name=None):
    got = []
    for s in seeds:
        stream = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice=choice,
                                             max_tokens=150, temperature=1, seed=s, stream=True,
                                             parallel_tool_calls=os.environ.get("GW_PARALLEL") == "1")
        calls, finish, content, order = {}, None, "", []
        for ch in stream:
            if not ch.choices:
                continue
            d = ch.choices[0].delta
            content += d.content or ""
            for tc in d.tool_calls or []:
                if tc.index not in calls:  # the first delta of a call: id, type and name
                    assert tc.id and tc.type == "function" and tc.function.name, tc
                    calls[tc.index] = {"id": tc.id, "name": tc.function.name, "args": ""}
                    order.append("head")
                else:
                    assert tc.id is None and not tc.function.name, tc
                    order.append("args")
                calls[tc.index]["args"] += tc.function.arguments or ""
            finish = ch.choices[0].finish_reason or finish
        assert finish == "tool_calls" and calls and not content.strip(), (finish, calls, content)
        assert order[0] == "head", order
        for c in calls.values():
            assert name is None or c["name"] == name
            jsonschema.validate(json.loads(c["args"]), SCHEMA[c["name"]])
        got.append("%s(%s)" % (calls[0]["name"], calls[0]["args"]))
    return True, "; ".join(got)


check("streamed, required: the id and name first, then the arguments, which validate",
      lambda: tools_streamed("required"))
check("streamed, named get_weather", lambda: tools_streamed(
    {"type": "function", "function": {"name": "get_weather"}}, "get_weather"))


def tools_auto():
    r = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, max_tokens=80, temperature=0)
    c = r.choices[0]
    if os.environ.get("GW_AUTO_CALLS") == "1":
        calls_ok(c.message.tool_calls, "get_weather")
        return c.finish_reason == "tool_calls", repr(c.message.tool_calls[0].function.arguments)
    # a model that answers in words: content, no calls, finish stop or length
    return (c.message.tool_calls and calls_ok(c.message.tool_calls)) or (
        bool(c.message.content) and c.finish_reason in ("stop", "length")), repr(c.message.content)[:80]


check("tool_choice auto: what comes is parsed", tools_auto)


def tools_none():
    r = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=8,
                                    temperature=0)
    return not r.choices[0].message.tool_calls and r.choices[0].finish_reason != "tool_calls", \
        repr(r.choices[0].message.content)


check("tool_choice none: text", tools_none)


def tool_round_trip():
    r = sdk.chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=150,
                                    temperature=0)
    m = r.choices[0].message
    msgs = ASK + [m.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "{\"temperature\": 21}"}]
    r2 = sdk.chat.completions.create(model=model, messages=msgs, tools=TOOLS, max_tokens=8, temperature=0)
    return r2.choices[0].finish_reason in ("stop", "length", "tool_calls"), repr(r2.choices[0].message.content)


check("the call and its result sent back (assistant tool_calls, content null; a tool message)", tool_round_trip)
check("an unknown tool_choice name: 400 naming tool_choice",
      lambda: refused({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
                      "tool_choice", ["nope"]))
check("tools on /v1/completions: 400 naming tools", lambda: (lambda st_e: (
    st_e[0] == 400 and st_e[1]["error"]["param"] == "tools", str(st_e)[:200]))(
    post("/v1/completions", {"model": model, "prompt": "x", "tools": TOOLS})))

# --- LangChain's ChatOpenAI: bind_tools and with_structured_output, as its users write them ------
def langchain():
    os.environ.setdefault("OPENAI_API_KEY", "EMPTY")
    from langchain_openai import ChatOpenAI
    return ChatOpenAI(base_url=url + "/v1", model=model, temperature=1, max_tokens=150, max_retries=0, seed=1)


def lc_bind_tools():
    m = langchain().bind_tools(TOOLS, tool_choice="get_weather")
    msg = m.invoke(ASK)
    c = msg.tool_calls[0]
    jsonschema.validate(c["args"], SCHEMA["get_weather"])
    return c["name"] == "get_weather" and c["id"].startswith("call_"), repr(c)


def lc_structured():
    schema = dict(PERSON, title="Person", description="a person")
    out = langchain().with_structured_output(schema, method="json_schema", strict=True).invoke(MSGS)
    jsonschema.validate(out, PERSON)
    return True, repr(out)


if os.environ.get("GW_LANGCHAIN") == "1":
    check("LangChain bind_tools(tool_choice=get_weather): a call that validates", lc_bind_tools)
    section = "structured"
    check("LangChain with_structured_output(json_schema, strict): a dict that validates", lc_structured)


# --- LiteLLM's OpenAI-compatible provider: a forced call, whole and streamed ------------------
def ll_tools(stream):
    import litellm
    kw = dict(model="openai/" + model, api_base=url + "/v1", api_key="EMPTY", num_retries=0, messages=ASK,
              tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}}, max_tokens=150,
              temperature=1, seed=2)
    if not stream:
        c = litellm.completion(**kw).choices[0]
        calls = c.message.tool_calls
        assert c.finish_reason == "tool_calls", c.finish_reason
    else:
        parts = {}
        for ch in litellm.completion(stream=True, **kw):
            for d in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
                p = parts.setdefault(d.index, {"id": None, "name": None, "args": ""})
                p["id"] = p["id"] or d.id
                p["name"] = p["name"] or (d.function.name if d.function else None)
                p["args"] += (d.function.arguments or "") if d.function else ""
        assert parts, "no streamed tool call"
        calls = [SimpleNamespace(type="function", id=p["id"], function=SimpleNamespace(name=p["name"],
                 arguments=p["args"])) for p in parts.values()]
    calls_ok(calls, "add")
    return True, calls[0].function.arguments


if os.environ.get("GW_LITELLM") == "1":
    check("LiteLLM tool_choice add: a call that validates", lambda: ll_tools(False))
    check("LiteLLM tool_choice add, streamed: a call that validates", lambda: ll_tools(True))

sys.exit(1 if failed else 0)
