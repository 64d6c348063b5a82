# Description: test client for gateway-openai.sh (not a test by itself): the official openai Python SDK and prometheus-client's text parser against a running allm-gateway.
# env: GW_URL, GW_MODEL (the model id), GW_REF (JSON file: {"completion": allm-run's text
# for PROMPT, 40 tokens; "penalized": the same with penalties; "logprobs": allm-run
# --logprobs 20's per token}), GW_CHAT (JSON: [{url, name, model}] of gateways with chat
# templates), GW_OUT (a file this writes the chat answers to).
import json
import os
import time
import urllib.request
import urllib.error

import openai
from checks import check, fail, finish, ok
from prometheus_client.parser import text_string_to_metric_families

url = os.environ["GW_URL"]
model = os.environ["GW_MODEL"]
ref = json.load(open(os.environ["GW_REF"]))
PROMPT = "Once upon a time"
IDS = [1, 403, 407, 261, 378]  # PROMPT, encoded as allm-run does
client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
create = client.completions.create


def scrape():
    """/metrics parsed by prometheus-client: {sample name: [(labels, value)]} and the family names."""
    with urllib.request.urlopen(url + "/metrics") as r:
        if r.status != 200:
            raise RuntimeError("/metrics: %d" % r.status)
        text = r.read().decode()
    samples, families = {}, set()
    for fam in text_string_to_metric_families(text):
        families.add(fam.name)
        for s in fam.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples, families


def value(scr, name, **labels):
    for lab, v in scr[0].get(name, []):
        if all(lab.get(k) == w for k, w in labels.items()):
            return v
    return float("nan")


def near(a, b):
    return abs(a - b) <= 1e-6 * max(1, abs(b))


# --- models ---
models = client.models.list()
check(len(models.data) == 1 and models.data[0].id == model,
      "GET /v1/models lists the engine's model (%s)" % [m.id for m in models.data])

# --- a completion: the text allm-run makes in-process, token for token ---
c = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0)
check(c.choices[0].text == ref["completion"],
      "completion equals allm-run's text (%s...)" % json.dumps(c.choices[0].text[:40]))
check(c.choices[0].finish_reason == "length" and c.usage.prompt_tokens == 5 and
      c.usage.completion_tokens == 40 and c.usage.total_tokens == 45,
      "finish_reason length, usage 5 + 40 (%s)" % c.usage.model_dump_json())
check(c.object == "text_completion" and c.id.startswith("cmpl-"), "completion object and id")

# penalties: the text allm-run makes with the same ones, and not the plain text
pen = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, frequency_penalty=0.5,
             presence_penalty=0.2, extra_body={"repetition_penalty": 1.3})
check(pen.choices[0].text == ref["penalized"] and ref["penalized"] != ref["completion"],
      "repetition / frequency / presence penalties: allm-run's text with the same (%s)"
      % json.dumps(pen.choices[0].text[:60]))
zero = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, frequency_penalty=0, presence_penalty=0)
check(zero.choices[0].text == ref["completion"], "penalties of 0 (what SDKs send by default) change nothing")

# logprobs: allm-run's values, token for token, whole and streamed
lw = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, logprobs=3)
L = lw.choices[0].logprobs
R = ref["logprobs"]
check(L is not None and len(L.tokens) == 40 and "".join(L.tokens) == ref["completion"] and
      all(near(v, R[i]["logprob"]) for i, v in enumerate(L.token_logprobs)) and
      all(len(t) == 3 and near(t[L.tokens[i]], R[i]["logprob"]) and
          all(near(v, R[i]["top"][k][1]) for k, v in enumerate(t.values()))
          for i, t in enumerate(L.top_logprobs)) and
      all(o == len("".join(L.tokens[:i])) for i, o in enumerate(L.text_offset)),
      "logprobs 3: allm-run's log-probabilities, tokens joining to the text, offsets (%s)"
      % json.dumps(L and L.tokens[:3]))
# the most alternatives (20, OpenAI's limit: two ring entries a token): the engine's, best first, distinct
L20 = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, logprobs=20).choices[0].logprobs
check(L20 is not None and len(L20.top_logprobs) == 40 and
      all(len(R[i]["top"]) == 20 and len(t) == 20 and
          all(near(v, R[i]["top"][k][1]) for k, v in enumerate(t.values())) and
          all(a >= b for a, b in zip(list(t.values()), list(t.values())[1:])) and
          len({r[0] for r in R[i]["top"]}) == 20
          for i, t in enumerate(L20.top_logprobs)),
      "logprobs 20: allm-run's 20 alternatives a token, in order, distinct (%s)"
      % json.dumps(L20 and [len(t) for t in L20.top_logprobs[:5]]))
for body, field in (({"prompt": PROMPT, "max_tokens": 2, "logprobs": 21}, "logprobs"),):
    rq = urllib.request.Request(url + "/v1/completions", data=json.dumps(dict(body, model=model)).encode(),
                                headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(rq)
        st, err = 200, {}
    except urllib.error.HTTPError as ex:
        st, err = ex.code, json.loads(ex.read()).get("error", {})
    check(st == 400 and err.get("param") == field and field in err.get("message", ""),
          "%s 21: a 400 naming it (%s %s)" % (field, st, err))
H = create(model=model, prompt=PROMPT, max_tokens=40, temperature=2, seed=3, logprobs=1).choices[0].logprobs
check(all(tok in H.top_logprobs[i] and len(H.top_logprobs[i]) <= 2 for i, tok in enumerate(H.tokens)) and
      any(len(H.top_logprobs[i]) == 2 for i in range(len(H.tokens))),
      "top_logprobs always holds the sampled token (k + 1 entries when it is not among the k best)")
ls_text, ls_vals = "", []
for ch in create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, logprobs=1, stream=True):
    c0 = ch.choices[0] if ch.choices else None
    if not c0 or not c0.logprobs:
        continue
    ls_text += "".join(c0.logprobs.tokens)
    ls_vals += c0.logprobs.token_logprobs
    if "".join(c0.logprobs.tokens) != c0.text:
        fail("a streamed chunk's logprobs tokens are not its text: %s" % ch.model_dump_json())
check(ls_text == ref["completion"] and len(ls_vals) == 40 and
      all(near(v, R[i]["logprob"]) for i, v in enumerate(ls_vals)),
      "streamed logprobs: one token per chunk, the same values")

# logit_bias: -100 on the greedy first token moves it; +100 on " there" makes every token that
g0, there = R[0]["id"], R[1]["id"]
nb = create(model=model, prompt=PROMPT, max_tokens=8, temperature=0, logit_bias={str(g0): -100})
fb = create(model=model, prompt=PROMPT, max_tokens=8, temperature=0, logit_bias={str(there): 100})
check(not nb.choices[0].text.startswith(L.tokens[0]) and fb.choices[0].text == L.tokens[1] * 8,
      "logit_bias: -100 moves the first token (%s), +100 forces one (%s)"
      % (json.dumps(nb.choices[0].text), json.dumps(fb.choices[0].text)))

# min_tokens: neither a stop token id nor a stop string ends the output before it
third = R[2]["id"]
s_no = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, extra_body={"stop_token_ids": [third]})
s_min = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0,
               extra_body={"stop_token_ids": [third], "min_tokens": 12})
g_min = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, stop=[" girl"], extra_body={"min_tokens": 12})
check(s_no.usage.completion_tokens == 3 and s_min.usage.completion_tokens >= 12 and
      g_min.choices[0].text == ref["completion"],
      'min_tokens 12: a stop id ends at %d tokens without, %d with; the stop string " girl" (token 6) does not cut'
      % (s_no.usage.completion_tokens, s_min.usage.completion_tokens))

# echo: the prompt's text, then the output (text or token-id prompt; streamed, the prompt first)
ew = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, echo=True)
ei = create(model=model, prompt=IDS, max_tokens=40, temperature=0, echo=True)
es, e_first = "", None
for ch in create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, echo=True, stream=True):
    if not ch.choices:
        continue
    if e_first is None:
        e_first = ch.choices[0].text
    es += ch.choices[0].text
check(ew.choices[0].text == PROMPT + ref["completion"] and ei.choices[0].text == PROMPT + ref["completion"] and
      e_first == PROMPT and es == PROMPT + ref["completion"] and ew.usage.completion_tokens == 40,
      "echo: the prompt (text, or token ids decoded) before the output, whole and streamed (the prompt first)")

# token ids as the prompt: the same ids allm-run encodes
c2 = create(model=model, prompt=IDS, max_tokens=40, temperature=0)
check(c2.choices[0].text == ref["completion"], "a prompt of token ids gives the same text")

# --- n > 1: n choices, choice i sampled with seed + i, usage summing their tokens ---
ng = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, n=3)
check(len(ng.choices) == 3 and all(ch.index == i and ch.text == ref["completion"] and ch.finish_reason == "length"
                                   for i, ch in enumerate(ng.choices)) and
      ng.usage.prompt_tokens == 5 and ng.usage.completion_tokens == 120,
      "n 3, greedy: three choices of allm-run's text, usage 5 + 3 x 40 (%s)" % ng.usage.model_dump_json())


def seeded(seed, prompt=PROMPT):
    return create(model=model, prompt=prompt, max_tokens=40, temperature=1, seed=seed).choices[0].text


h7, h8 = seeded(7), seeded(8)
nh = create(model=model, prompt=PROMPT, max_tokens=40, temperature=1, seed=7, n=2)
check(h7 != h8 and len(nh.choices) == 2 and nh.choices[0].text == h7 and nh.choices[1].text == h8,
      "n 2, sampled with seed 7: the samples of seeds 7 and 8 (%s..., %s...)" % (json.dumps(h7[:20]), json.dumps(h8[:20])))
n_parts, n_fin, n_usage, n_stray = ["", ""], [None, None], None, 0
for ch in create(model=model, prompt=PROMPT, max_tokens=40, temperature=1, seed=7, n=2, stream=True,
                 stream_options={"include_usage": True}):
    if ch.usage:
        n_usage = ch.usage
    for c0 in ch.choices:
        if c0.index not in (0, 1):
            n_stray += 1
            continue
        n_parts[c0.index] += c0.text
        if c0.finish_reason:
            n_fin[c0.index] = c0.finish_reason
check(n_stray == 0 and n_parts == [h7, h8] and n_fin == ["length", "length"] and n_usage and
      n_usage.completion_tokens == 80,
      "n 2 streamed: each choice's chunks by index, each its own finish, usage over both (%s)"
      % (n_usage and n_usage.model_dump_json()))

# --- a batch of prompts: choice k * n + j is prompt k's j-th, usage counts each prompt once ---
hello = create(model=model, prompt="Hello", max_tokens=40, temperature=0)
bp = create(model=model, prompt=[PROMPT, IDS, "Hello"], max_tokens=40, temperature=0)
check(len(bp.choices) == 3 and [ch.index for ch in bp.choices] == [0, 1, 2] and
      bp.choices[0].text == ref["completion"] and bp.choices[1].text == ref["completion"] and
      bp.choices[2].text == hello.choices[0].text and bp.choices[2].text != ref["completion"] and
      bp.usage.prompt_tokens == 10 + hello.usage.prompt_tokens and bp.usage.completion_tokens == 120,
      "three prompts (text, ids, text): each one's own text, usage %s" % bp.usage.model_dump_json())
hs7, hs8 = seeded(7, "Hello"), seeded(8, "Hello")
bn = create(model=model, prompt=[PROMPT, "Hello"], max_tokens=40, temperature=1, seed=7, n=2)
check(len(bn.choices) == 4 and [ch.text for ch in bn.choices] == [h7, h8, hs7, hs8] and
      bn.usage.prompt_tokens == 5 + hello.usage.prompt_tokens and bn.usage.completion_tokens == 160,
      "two prompts with n 2, seed 7: each prompt's samples of seeds 7 and 8, in that order")
b_parts, b_usage = ["", ""], None
for ch in create(model=model, prompt=[PROMPT, "Hello"], max_tokens=40, temperature=0, stream=True,
                 stream_options={"include_usage": True}):
    if ch.usage:
        b_usage = ch.usage
    for c0 in ch.choices:
        b_parts[c0.index] += c0.text
check(b_parts == [ref["completion"], hello.choices[0].text] and b_usage and
      b_usage.prompt_tokens == 5 + hello.usage.prompt_tokens and b_usage.completion_tokens == 80,
      "a batch of two prompts, streamed: each by its index, usage over both (%s)" % (b_usage and b_usage.model_dump_json()))

# --- the same, streamed ---
text, chunks, fin_reason, usage = "", 0, None, None
for ch in create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, stream=True,
                 stream_options={"include_usage": True}):
    if ch.usage:
        usage = ch.usage
    if not ch.choices:
        continue
    text += ch.choices[0].text
    chunks += 1
    fin_reason = ch.choices[0].finish_reason or fin_reason
check(text == ref["completion"], "streamed completion equals allm-run's text (%d chunks)" % chunks)
check(chunks == 41, "one event per token, then the finish (%d chunks)" % chunks)
check(fin_reason == "length" and usage and usage.completion_tokens == 40 and usage.prompt_tokens == 5,
      "stream ends with finish_reason length and usage (%s)" % (usage and usage.model_dump_json()))

# --- stop strings, on the text: cut before the first one, finish_reason stop ---
cut = ref["completion"].find(" girl")
st = create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, stop=[" girl", "zzz"])
check(cut > 0 and st.choices[0].text == ref["completion"][:cut] and st.choices[0].finish_reason == "stop",
      'stop " girl" cuts the text before it (%s)' % json.dumps(st.choices[0].text))
stext = ""
for ch in create(model=model, prompt=PROMPT, max_tokens=40, temperature=0, stop=" girl", stream=True):
    stext += ch.choices[0].text if ch.choices else ""
check(stext == ref["completion"][:cut], "streamed, the stop string is never sent, even in part (%s)" % json.dumps(stext))


# --- a cancelled stream: the client breaks off after three chunks ---
def await_aborts(before, want):
    """Polls /metrics until `want` requests since `before` ended aborted (the engine hears
    of a hang-up within a step or two); the last scrape and that count."""
    after, aborts = None, 0
    for _ in range(100):
        after = scrape()
        aborts = (value(after, "vllm:request_success_total", finished_reason="abort") -
                  value(before, "vllm:request_success_total", finished_reason="abort"))
        if aborts >= want:
            break
        time.sleep(0.05)
    return after, aborts


def broken_stream(n, chunks):
    """Streams n choices of 500 tokens and leaves the stream's context (the SDK's way to
    cancel: it closes the HTTP response) after `chunks` chunks; then waits for the
    engine's aborts. A stream the engine finished before the hang-up reached it (500
    tokens of stories260K take 60-80 ms here, less on a faster machine, and a starved
    client once read its three chunks later than that) is tried again, up to 8 times.
    Returns (chunks read, response closed, aborts, tokens made) of the last try."""
    for _ in range(8):
        before, got = scrape(), 0
        with create(model=model, prompt=PROMPT, max_tokens=500, temperature=0, stream=True, n=n,
                    extra_body={"ignore_eos": True}) as cs:
            for ch in cs:
                got += 1
                if got == chunks:
                    break
        after, aborts = await_aborts(before, n)
        made = value(after, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total")
        if aborts or made < 500 * n:
            break
    return got, cs.response.is_closed, aborts, made


got, closed, abort_delta, gen_delta = broken_stream(1, 3)
check(got == 3 and closed, "the client broke off its stream after %d chunks" % got)
check(abort_delta == 1, 'the engine cancelled it (request_success_total{finished_reason="abort"} +%g)' % abort_delta)
check(gen_delta < 500, "and stopped generating: %g of 500 tokens made" % gen_delta)

# n 2, streamed and broken off: the engine cancels both choices
got2, _, abort2, gen2 = broken_stream(2, 4)
check(abort2 == 2 and gen2 < 1000, "n 2 broken off: both choices cancelled (+%g aborts, %g of 1000 tokens made)"
      % (abort2, gen2))

# --- chat, streamed, on every template ---
chats = json.loads(os.environ["GW_CHAT"])
answers = {}
messages = [{"role": "system", "content": "You are a storyteller."},
            {"role": "user", "content": "Tell me about a dog."}]
for g in chats:
    cc = openai.OpenAI(base_url=g["url"] + "/v1", api_key="unused", max_retries=0)
    mine = messages[1:] if g["name"].startswith("mistral") else messages  # Mistral has no system role
    out, role, fin = "", None, None
    for ch in cc.chat.completions.create(model=g["model"], messages=mine, max_tokens=20, temperature=0, stream=True):
        d = ch.choices[0].delta if ch.choices else None
        if d and d.role:
            role = d.role
        out += (d.content or "") if d else ""
        fin = (ch.choices[0].finish_reason if ch.choices else None) or fin
    whole = cc.chat.completions.create(model=g["model"], messages=mine, max_tokens=20, temperature=0)
    answers[g["name"]] = {"messages": mine, "streamed": out, "whole": whole.choices[0].message.content}
    if g is chats[0]:  # n 2 in chat: two messages, indexed
        two = cc.chat.completions.create(model=g["model"], messages=mine, max_tokens=20, temperature=0, n=2)
        check(len(two.choices) == 2 and all(ch.index == i and ch.message.content == whole.choices[0].message.content
                                            for i, ch in enumerate(two.choices)) and
              two.usage.completion_tokens == 40,
              "%s: chat with n 2, greedy: two indexed copies of the answer, usage 2 x 20" % g["name"])
        # chat's logprobs shape: content[] of {token, logprob, bytes, top_logprobs}
        lc = cc.chat.completions.create(model=g["model"], messages=mine, max_tokens=20, temperature=0,
                                        logprobs=True, top_logprobs=2)
        C = (lc.choices[0].logprobs and lc.choices[0].logprobs.content) or []
        check(len(C) == 20 and "".join(t.token for t in C) == lc.choices[0].message.content and
              all(t.logprob <= 0 and len(t.top_logprobs) == 2 and near(t.top_logprobs[0].logprob, t.logprob) and
                  bytes(t.bytes).decode("utf8") == t.token for t in C),
              "%s: chat logprobs (greedy: the best alternative is the token; bytes are its UTF-8)" % g["name"])
        l20 = cc.chat.completions.create(model=g["model"], messages=mine, max_tokens=8, temperature=0,
                                         logprobs=True, top_logprobs=20)
        C = (l20.choices[0].logprobs and l20.choices[0].logprobs.content) or []
        check(len(C) == 8 and all(len(t.top_logprobs) == 20 and near(t.top_logprobs[0].logprob, t.logprob) and
                                  all(a.logprob >= b.logprob for a, b in zip(t.top_logprobs, t.top_logprobs[1:])) and
                                  len({bytes(a.bytes) for a in t.top_logprobs}) == 20 for t in C),
              "%s: chat top_logprobs 20: 20 alternatives a token, best first, distinct" % g["name"])
        try:
            cc.chat.completions.create(model=g["model"], messages=mine, max_tokens=2, logprobs=True, top_logprobs=21)
            fail("%s: chat top_logprobs 21 was accepted" % g["name"])
        except openai.BadRequestError as ex:
            e21 = ex.body or {}
            check(e21.get("param") == "top_logprobs" and "top_logprobs" in e21.get("message", ""),
                  "%s: chat top_logprobs 21: a 400 naming it (%s)" % (g["name"], e21))
    check(role == "assistant" and fin == "length" and len(out) > 0 and out == whole.choices[0].message.content and
          whole.object == "chat.completion" and whole.usage.completion_tokens == 20,
          "%s: streamed chat (role, %s..., length) equals the whole answer" % (g["name"], json.dumps(out[:30])))
json.dump(answers, open(os.environ["GW_OUT"], "w"))

# --- /metrics through a real Prometheus text parser ---
scr = scrape()
names = set(scr[0]) | scr[1]
for n in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_requests_swapped",
          "vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc", "vllm:num_preemptions_total",
          "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds",
          "vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
          "vllm:request_queue_time_seconds", "allm_preemptions_total", "allm_predictor_mape", "allm_blocks",
          "allm_swap_bytes_total"]:
    if n not in names:
        fail("/metrics lacks " + n)
ok("/metrics parses: %d families, every DESIGN §10 name present" % len(scr[1]))
finished = sum(value(scr, "vllm:request_success_total", finished_reason=r) for r in ("stop", "length", "abort"))
buckets = sorted(((float(lab["le"]), v) for lab, v in scr[0]["vllm:e2e_request_latency_seconds_bucket"]))
count = value(scr, "vllm:e2e_request_latency_seconds_count")
check(buckets[-1][1] == finished and count == finished and finished >= 10,
      "e2e histogram counts every finished request (+Inf bucket %g = _count %g = %g)" % (buckets[-1][1], count, finished))
check(len(buckets) == 22 and buckets[-1][0] == float("inf") and
      all(i == 0 or c >= buckets[i - 1][1] for i, (_, c) in enumerate(buckets)),
      "vLLM's 21 bounds + Inf, counts cumulative (%s ...)" % " ".join("%g:%g" % b for b in buckets[:4]))
# idle once the engine has retired what the last answers left in flight (a stream
# the client closed is cancelled on the engine's next step, which under a loaded
# sanitizer build can come after this scrape): polled, bounded, never skipped
for _ in range(100):
    idle = value(scr, "vllm:num_requests_running") == 0 and value(scr, "allm_blocks", pool="gpu", state="used") == 0
    if idle:
        break
    time.sleep(0.1)
    scr = scrape()
check(idle, "idle now: nothing running, no GPU block in use (running %g, GPU blocks used %g)" %
      (value(scr, "vllm:num_requests_running"), value(scr, "allm_blocks", pool="gpu", state="used")))

finish()
