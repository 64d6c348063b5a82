"""The Python side of bench/python-client.sh: one measurement per run, a JSON
object on stdout.

  rings ENGINE WORKLOAD N C     N requests of WORKLOAD (jsonl: prompt_ids,
                                max_tokens), C streams in flight from one asyncio
                                loop through adaptivellm.AsyncClient (the rings)
  openai URL WORKLOAD N C       the same through allm-gateway with the openai SDK
                                (AsyncOpenAI, streamed completions)
  rtt ENGINE N                  N round trips on the rings from Python: submit a
                                1-token request, time until the engine's ACCEPTED
                                comes back (the blocking Client's handle, spinning)

Every request is greedy with ignore_eos: each makes exactly max_tokens tokens.
Tokens/s = tokens received / wall time from the first submit to the last FINAL."""
import asyncio
import json
import sys
import time


def load(path, n):
    lines = [json.loads(x) for x in open(path) if x.strip()]
    return [lines[i % len(lines)] for i in range(n)]


def pctl(v):
    s = sorted(v)
    if not s:
        return {"p50": None, "p90": None, "p99": None, "mean": None}

    def q(p):
        x = (len(s) - 1) * p
        lo = int(x)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (x - lo)

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "mean": sum(s) / len(s)}


def summary(recs, dur):
    tokens = sum(len(t) for _, t in recs)
    ttft = [(t[0] - t0) * 1e3 for t0, t in recs if t]
    tpot = [(t[-1] - t[0]) * 1e3 / (len(t) - 1) for _, t in recs if len(t) > 1]
    return {"requests": len(recs), "tokens": tokens, "duration_s": dur, "gen_throughput_tok_s": tokens / dur,
            "ttft_ms": pctl(ttft), "tpot_ms": pctl(tpot)}


async def run_streams(work, conc, one):
    """C workers, each taking the next request when its last one ended."""
    recs = []
    it = iter(work)

    async def worker():
        for w in it:
            recs.append(await one(w))

    t = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    return summary(recs, time.perf_counter() - t)


async def rings(engine, work, conc):
    import adaptivellm
    async with adaptivellm.AsyncClient(name=engine) as ac:
        async def one(w):
            t0 = time.perf_counter()
            times = []
            async for tok in ac.stream(prompt_ids=w["prompt_ids"], max_tokens=w["max_tokens"], temperature=0,
                                       ignore_eos=True):
                if tok.id >= 0:
                    times.append(time.perf_counter())
            return t0, times
        return await run_streams(work, conc, one)


async def via_openai(url, work, conc):
    import openai
    # the SDK's own connection pool (up to 1000 connections, 100 kept alive)
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    model = (await client.models.list()).data[0].id

    async def one(w):
        t0 = time.perf_counter()
        times = []
        stream = await client.completions.create(model=model, prompt=w["prompt_ids"], max_tokens=w["max_tokens"],
                                                 temperature=0, stream=True, extra_body={"ignore_eos": True})
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].finish_reason is None:
                times.append(time.perf_counter())
        return t0, times

    try:
        return await run_streams(work, conc, one)
    finally:
        await client.close()


def rtt(engine, n):
    import adaptivellm
    from adaptivellm import _native  # the handle's events, ACCEPTED included
    h = _native.Handle(engine, None, 0, 0, 0, False, 0, 1000)  # spin 1 ms before sleeping
    values = [None] * len(adaptivellm.PARAMETERS)
    values[adaptivellm.PARAMETERS["max_tokens"].index] = 1
    values = tuple(values)
    out = []
    tag = 0
    for i in range(n + n // 10):  # the first tenth warms up, untimed
        tag += 1
        t = time.perf_counter_ns()
        h.submit(tag, None, (1,), values, None, None, None)
        got = False
        while not got:
            for ev in h.wait(-1, 1):
                if ev[0] == _native.EVENT_ACCEPTED:
                    got = True
        if i >= n // 10:
            out.append((time.perf_counter_ns() - t) / 1e3)
        done = False
        while not done:  # the request's FINAL, untimed
            done = any(ev[0] == _native.EVENT_FINAL for ev in h.wait(-1, 16))
    h.close()
    return {"accepted_us": pctl(out), "n": n}


def main():
    mode = sys.argv[1]
    if mode == "rtt":
        res = rtt(sys.argv[2], int(sys.argv[3]))
    else:
        work = load(sys.argv[3], int(sys.argv[4]))
        conc = int(sys.argv[5])
        res = asyncio.run(rings(sys.argv[2], work, conc) if mode == "rings" else via_openai(sys.argv[2], work, conc))
    json.dump(res, sys.stdout)
    print()


if __name__ == "__main__":
    main()
