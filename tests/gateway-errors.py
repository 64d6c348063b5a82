# Description: test client for gateway-errors.sh (not a test by itself): error statuses as the openai Python SDK sees them, and a flood of raw requests that fills the engine's per-client queue until it answers 429.
# usage: python gateway-errors.py sdk    (env GW_URL: a gateway with --api-key secret)
#        python gateway-errors.py flood  (env GW_URL, GW_FLOOD: requests to send)
import asyncio
import json
import os
import re
import sys
import urllib.parse

import openai
from checks import fail, finish, ok

url = os.environ["GW_URL"]


def expect_error(what, cls, status, code, f):
    """Runs f, which must raise an APIStatusError of class cls with this status (and code),
    carrying the OpenAI error body (a message and a type)."""
    try:
        f()
        fail("%s: no error" % what)
    except openai.APIError as e:
        body = getattr(e, "body", None)
        good = (isinstance(e, cls) and getattr(e, "status_code", None) == status and (not code or e.code == code) and
                isinstance(e.message, str) and isinstance(body, dict) and isinstance(body.get("type"), str))
        (ok if good else fail)("%s: %s %s %s (%s)" % (what, type(e).__name__, getattr(e, "status_code", None),
                                                    e.code or "", body.get("message") if isinstance(body, dict) else e))


def sdk():
    good = openai.OpenAI(base_url=url + "/v1", api_key="secret", max_retries=0)
    bad = openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0)
    model = good.models.list().data[0].id
    gc, gchat = good.completions.create, good.chat.completions.create
    expect_error("401 wrong API key", openai.AuthenticationError, 401, "invalid_api_key",
                 lambda: bad.completions.create(model=model, prompt="hi", max_tokens=2))
    c = gc(model=model, prompt="Once upon a time", max_tokens=4, temperature=0)
    (ok if c.usage.completion_tokens == 4 else fail)("the right API key is served")
    expect_error("404 unknown model", openai.NotFoundError, 404, "model_not_found",
                 lambda: gc(model="gpt-4", prompt="hi", max_tokens=2))
    expect_error("400 bad field (temperature -1)", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", temperature=-1))
    expect_error("400 best_of 3 with n 2 (choices are not ranked)", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", n=2, best_of=3))
    expect_error("400 n 0", openai.BadRequestError, 400, None, lambda: gc(model=model, prompt="hi", n=0))
    expect_error("400 frequency_penalty 3 (outside [-2, 2])", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", frequency_penalty=3))
    expect_error("400 repetition_penalty 0", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", extra_body={"repetition_penalty": 0}))
    expect_error("400 logprobs 21 (at most 20 alternatives)", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", logprobs=21))
    expect_error("400 logit_bias key not a token id", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", logit_bias={"x": 1}))
    expect_error("400 logit_bias 101", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", logit_bias={"5": 101}))
    expect_error("400 logit_bias past the vocabulary (the engine's check)", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", logit_bias={"100000": 1}))
    expect_error("400 min_tokens above max_tokens", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", max_tokens=4, extra_body={"min_tokens": 5}))
    expect_error("400 echo with logprobs (no prompt log-probabilities)", openai.BadRequestError, 400, None,
                 lambda: gc(model=model, prompt="hi", echo=True, logprobs=1))
    expect_error("400 messages not a list", openai.BadRequestError, 400, None,
                 lambda: gchat(model=model, messages="hello"))
    expect_error("413 prompt longer than the context", openai.APIStatusError, 413, "context_length_exceeded",
                 lambda: gc(model=model, prompt="hello " * 600, max_tokens=2))
    expect_error("413 token-id prompt longer than the context", openai.APIStatusError, 413, "context_length_exceeded",
                 lambda: gc(model=model, prompt=[7] * 600, max_tokens=2))
    # the engine's own check: prompt + max_tokens needs more KV blocks than its pool
    expect_error("413 from the engine (more KV blocks than the pool)", openai.APIStatusError, 413, None,
                 lambda: gc(model=model, prompt="Once upon a time", max_tokens=400))


async def flood():
    """Opens GW_FLOOD connections, each a POST that the engine keeps waiting (one running
    sequence, long answers): past the engine's per-client cap it answers 429."""
    u = urllib.parse.urlparse(url)
    n = int(os.environ["GW_FLOOD"])
    body = json.dumps({"prompt": [1, 2, 3], "max_tokens": 1000, "ignore_eos": True, "temperature": 0})
    req = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode()
    statuses, first429, errors, writers = {}, [], [0], []

    # at most 256 connections being opened at once (the listen backlog); each then
    # stays open, waiting for its answer
    opening = asyncio.Semaphore(256)

    async def one():
        try:
            async with opening:
                r, w = await asyncio.open_connection(u.hostname, u.port)
                writers.append(w)
                w.write(req)
                await w.drain()
        except OSError:
            errors[0] += 1
            return
        try:
            head = await r.readuntil(b"\r\n\r\n")
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            errors[0] += 1
            return
        m = re.match(rb"HTTP/1\.1 (\d+)", head)
        if not m:
            return
        st = m.group(1).decode()
        statuses[st] = statuses.get(st, 0) + 1
        if st == "429" and not first429:
            clen = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
            rest = await r.readexactly(int(clen.group(1))) if clen else await r.read(65536)
            first429.append((head.decode(), rest.decode()))

    tasks = [asyncio.create_task(one()) for _ in range(n)]
    for _ in range(200):  # until a 429 came (or 20 s)
        if "429" in statuses and first429:
            break
        await asyncio.sleep(0.1)
    print("flood: %d requests sent, answers %s, socket errors %d" % (n, json.dumps(statuses), errors[0]))
    if not first429:
        fail("no 429 while the engine queue was full")
    else:
        head, b = first429[0]
        err = json.loads(b).get("error", {})
        (ok if err.get("type") == "rate_limit_exceeded" and re.search("in flight", err.get("message", "")) and
         re.search(r"\r\nRetry-After: 1\r\n", head, re.I) else fail)(
            "429 with Retry-After and an OpenAI error body: %s" % b)
        # the SDK sees the same while the queue stays full. A slot the engine freed
        # meanwhile takes the SDK's request in: that one is left waiting (it holds
        # the slot, so the next try meets the cap) instead of timing out and giving
        # the slot back, which a starved client once did for all ten of its tries.
        c = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
        seen, held = None, []
        for _ in range(60):
            t = asyncio.create_task(c.completions.create(model="dummy:small", prompt=[1, 2, 3], max_tokens=2))
            held.append(t)
            await asyncio.wait({t}, timeout=0.5)
            seen = next((x.exception() for x in held if x.done() and not x.cancelled() and
                         isinstance(x.exception(), openai.RateLimitError)), None)
            if seen:
                break
        for t in held:
            t.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        (ok if seen and seen.status_code == 429 and seen.body.get("type") == "rate_limit_exceeded" else fail)(
            "429 through the openai SDK: %s" % ("%s %d (%s), %d tries" % (
                type(seen).__name__, seen.status_code, seen.body.get("message"), len(held)) if seen else "never"))
    # the others wait (or, the few the engine finished meanwhile, are answered 200)
    other = {k: v for k, v in statuses.items() if k not in ("429", "200")}
    (ok if not other else fail)("no other answers while the rest wait (%s)" % json.dumps(other))
    for t in tasks:  # hang up: the gateway cancels them all in the engine
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for w in writers:
        w.transport.abort()


if sys.argv[1:] == ["flood"]:
    asyncio.run(flood())
else:
    sdk()
finish()
