# Description: test client for gateway-load.sh (not a test by itself): 64 concurrent streams through the openai Python SDK (asyncio), each compared with allm-run's text; then slowloris and idle connections that must not stop a normal client and must be closed by the gateway; then the connection cap.
# usage: python gateway-load.py streams (env GW_URL, GW_MODEL, GW_REF: {prompt: text})
#        python gateway-load.py abuse   (env GW_URL, GW_MODEL, GW_TIMEOUT: seconds)
#        python gateway-load.py cap     (env GW_URL, GW_MODEL, GW_CAP: the gateway's --max-connections)
import asyncio
import json
import os
import sys
import time
import urllib.parse

import openai
from checks import fail, finish, ok

url = os.environ["GW_URL"]
model = os.environ["GW_MODEL"]
port = urllib.parse.urlparse(url).port
client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)


async def streams():
    ref = json.load(open(os.environ["GW_REF"]))
    prompts = list(ref)

    async def one(i):
        prompt = prompts[i % len(prompts)]
        text, events, finish, usage = "", 0, None, None
        s = await client.completions.create(model=model, prompt=prompt, max_tokens=64, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
        async for ch in s:
            if ch.usage:
                usage = ch.usage
            if not ch.choices:
                continue
            events += 1
            text += ch.choices[0].text
            finish = ch.choices[0].finish_reason or finish
        return i, prompt, text, events, finish, usage

    t0 = time.monotonic()
    res = await asyncio.gather(*(one(i) for i in range(64)))
    dt = time.monotonic() - t0
    good = tokens = shown = 0
    for i, prompt, text, events, finish, usage in res:
        tokens += usage.completion_tokens if usage else 0
        # complete (finish + usage) and ordered (the same text, piece after piece, as allm-run)
        if text == ref[prompt] and finish and usage and events == usage.completion_tokens + 1:
            good += 1
        elif shown < 5:
            shown += 1
            print("FAIL: stream %d (%s): %s vs %s, %d events, finish %s" % (
                i, json.dumps(prompt), json.dumps(text[:60]), json.dumps(ref[prompt][:60]), events, finish))
    (ok if good == 64 else fail)("64 concurrent streams: %d complete and equal to allm-run's text, one event per "
                                 "token (%d tokens in %.2f s)" % (good, tokens, dt))


class Peer(asyncio.Protocol):
    """A raw connection; `closed` is set when the gateway (or we) close it."""

    def __init__(self):
        self.closed = asyncio.Event()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed.set()


async def peer():
    loop = asyncio.get_running_loop()
    _, p = await loop.create_connection(Peer, "127.0.0.1", port)
    return p


async def closed_within(p, seconds):
    try:
        await asyncio.wait_for(p.closed.wait(), seconds)
        return True
    except asyncio.TimeoutError:
        return False


async def abuse():
    timeout = float(os.environ["GW_TIMEOUT"])

    # 100 slowloris peers: a request line, then one header byte every 200 ms, for ever
    async def drip(p):
        p.transport.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        while not p.closed.is_set():
            await asyncio.sleep(0.2)
            if not p.transport.is_closing():
                p.transport.write(b"X")

    slow = [await peer() for _ in range(100)]
    drips = [asyncio.create_task(drip(p)) for p in slow]
    # 800 idle peers: connect and say nothing
    idle = [await peer() for _ in range(800)]
    await asyncio.sleep(0.3)
    # meanwhile a normal client is served, several times
    served = 0
    for _ in range(5):
        c = await client.completions.create(model=model, prompt="Once upon a time", max_tokens=16, temperature=0)
        served += c.usage.completion_tokens == 16
    (ok if served == 5 else fail)(
        "with 100 slowloris and 800 idle connections open, a client is served (%d/5)" % served)
    # all of them closed by the gateway within its --timeout (plus the reaper's beat)
    t0 = time.monotonic()
    rs = await asyncio.gather(*(closed_within(p, timeout + 3) for p in slow))
    ri = await asyncio.gather(*(closed_within(p, timeout + 3) for p in idle))
    sec = time.monotonic() - t0
    (ok if sum(rs) == 100 else fail)(
        "slowloris peers still trickling were closed: %d/100 (a whole request within %g s)" % (sum(rs), timeout))
    (ok if sum(ri) == 800 else fail)("idle peers were closed: %d/800 (within %.1f s)" % (sum(ri), sec))
    for d in drips:
        d.cancel()
    for p in slow + idle:
        p.transport.abort()


async def cap():
    # --max-connections N: N idle peers fill it; the next is turned away at once,
    # and once the slots free up a client is served again
    n = int(os.environ["GW_CAP"])
    held = [await peer() for _ in range(n)]
    await asyncio.sleep(0.3)
    refused = False
    try:
        await client.completions.create(model=model, prompt="Once", max_tokens=2, timeout=3)
    except openai.APIError:
        refused = True
    (ok if refused else fail)("at --max-connections (%d held), a new connection is refused, not queued" % n)
    for p in held:
        p.transport.abort()
    await asyncio.sleep(0.3)
    c = await client.completions.create(model=model, prompt="Once", max_tokens=2, temperature=0)
    (ok if c.usage.completion_tokens == 2 else fail)("once they are gone, a client is served again")


mode = sys.argv[1]
asyncio.run({"streams": streams, "abuse": abuse, "cap": cap}[mode]())
finish()
