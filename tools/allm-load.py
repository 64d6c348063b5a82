#!/usr/bin/env python3
"""allm-load: the gateway load client. Measures one allm-gateway, or a fleet of them
behind a load balancer (deploy/), the same way: the OpenAI `completions` API through
the official `openai` SDK, streamed, and a summary with allm-bench's keys (DESIGN §12:
requests, duration_s, throughput_tok_s, gen_throughput_tok_s, req_s, ttft_ms / tpot_ms
/ e2e_ms {p50, p90, p99, mean}, prefix_cache) in total and per instance.

An instance is what the response's X-Allm-Instance header names (deploy/'s HAProxy
sets it to the server that answered); without one, the URL's host:port. Prefix hits
come from each answer's usage.prompt_tokens_details.cached_tokens; with --metrics,
also from each engine's own counters (vllm:prefix_cache_hits_total / queries_total,
scraped from every gateway's /metrics before and after).

Workloads (prompts are token ids by default: a --dummy engine has no tokenizer; --text
sends words instead):
  shared-prefix  -n N requests, each a shared prefix (one of --prefixes P, of
                 --prefix-tokens L) and a suffix of its own (--suffix-tokens S);
                 --hot F sends a fraction F of them to prefix 0 (a skewed load)
  multiturn      --conversations K of --turns T: each turn's prompt is the whole
                 history (system prompt, users' turns, the answers: with --text the
                 answer's text, with ids the client's own ids for it, as the ids the
                 engine generated do not come back over HTTP)
Requests go out --concurrency C at a time (multiturn: one conversation per slot), or
at a Poisson --rate R. --records FILE writes one JSON line per request (instance,
start/end, TTFT, status: ok, error_event (the stream ended with an error), http_NNN,
conn_error).

usage: allm-load.py --url URL --workload shared-prefix|multiturn [options] [--json]
Needs the `openai` package (tools/venv.sh openai).
"""
import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import time
import urllib.parse
import urllib.request

import openai

INSTANCE_HEADER = "x-allm-instance"


def pct(xs):
    if not xs:
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    s = sorted(xs)

    def q(p):
        return s[min(len(s) - 1, int(round(p * (len(s) - 1))))]
    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "mean": statistics.fmean(s)}


def summarize(recs, duration):
    ok = [r for r in recs if r["status"] == "ok"]
    gen = sum(r["completion_tokens"] for r in ok)
    prompt = sum(r["prompt_tokens"] for r in ok)
    hit = sum(r["cached_tokens"] for r in ok)
    errs = {}
    for r in recs:
        if r["status"] != "ok":
            errs[r["status"]] = errs.get(r["status"], 0) + 1
    return {
        "requests": len(ok),
        "failed": len(recs) - len(ok),
        "errors": errs,
        "duration_s": duration,
        "throughput_tok_s": (prompt + gen) / duration if duration > 0 else None,
        "gen_throughput_tok_s": gen / duration if duration > 0 else None,
        "req_s": len(ok) / duration if duration > 0 else None,
        "ttft_ms": pct([r["ttft_ms"] for r in ok if r["ttft_ms"] is not None]),
        "tpot_ms": pct([r["tpot_ms"] for r in ok if r["tpot_ms"] is not None]),
        "e2e_ms": pct([r["e2e_ms"] for r in ok]),
        "mean_weighted_turnaround": None,  # needs the engine's scheduling times: not over HTTP
        "prefix_cache": {"queried_tokens": prompt, "hit_tokens": hit,
                         "hit_fraction": hit / prompt if prompt else None},
    }


class Load:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.client = openai.AsyncOpenAI(base_url=a.url.rstrip("/") + "/v1", api_key=a.api_key,
                                         max_retries=0, timeout=a.timeout)
        self.recs = []
        self.t0 = 0.0
        self.default_instance = urllib.parse.urlparse(a.url).netloc

    # --- prompts -----------------------------------------------------------------------
    def tokens(self, n, rng):
        if self.a.text:
            words = ["once", "upon", "a", "time", "there", "was", "little", "girl", "dog", "park", "sun",
                     "happy", "big", "red", "ball", "tree", "play", "friend", "day", "went"]
            return " ".join(rng.choice(words) for _ in range(n)) + " "
        return [rng.randrange(3, self.a.vocab) for _ in range(n)]

    def join(self, *parts):
        return "".join(parts) if self.a.text else [t for p in parts for t in p]

    # --- one request -------------------------------------------------------------------
    async def one(self, prompt, tag):
        a = self.a
        rec = {"tag": tag, "instance": None, "start": time.time() - self.t0, "end": None, "ttft_ms": None,
               "tpot_ms": None, "e2e_ms": None, "status": "ok", "error": None, "prompt_tokens": 0,
               "completion_tokens": 0, "cached_tokens": 0, "text": ""}
        t_start = time.perf_counter()
        first = last = None
        n_chunks = 0
        try:
            raw = await self.client.completions.with_raw_response.create(
                model=a.model, prompt=prompt, max_tokens=a.max_output, temperature=a.temperature,
                stream=True, stream_options={"include_usage": True},
                extra_body={"ignore_eos": True} if a.ignore_eos else None)
            rec["instance"] = raw.headers.get(INSTANCE_HEADER) or self.default_instance
            stream = raw.parse()
            async for ch in stream:
                now = time.perf_counter()
                # a chunk with a choice is a token (a --dummy engine's text may be empty)
                if ch.choices:
                    if first is None:
                        first = now
                    last = now
                    n_chunks += 1
                    rec["text"] += ch.choices[0].text or ""
                if ch.usage:
                    rec["prompt_tokens"] = ch.usage.prompt_tokens
                    rec["completion_tokens"] = ch.usage.completion_tokens
                    d = getattr(ch.usage, "prompt_tokens_details", None)
                    rec["cached_tokens"] = (getattr(d, "cached_tokens", 0) or 0) if d else 0
        except openai.APIStatusError as e:
            rec["status"], rec["error"] = f"http_{e.status_code}", str(e)[:200]
        except openai.APIConnectionError as e:
            rec["status"], rec["error"] = "conn_error", str(e)[:200]
        except openai.APIError as e:  # an error event inside the stream
            rec["status"], rec["error"] = "error_event", str(e)[:200]
        end = time.perf_counter()
        if rec["status"] == "ok" and rec["completion_tokens"] == 0 and a.max_output > 0:
            rec["status"], rec["error"] = "error_event", "the stream ended without usage"
        rec["end"] = time.time() - self.t0
        rec["e2e_ms"] = (end - t_start) * 1e3
        if first is not None:
            rec["ttft_ms"] = (first - t_start) * 1e3
            if rec["completion_tokens"] > 1:
                rec["tpot_ms"] = (last - first) * 1e3 / (rec["completion_tokens"] - 1)
        self.recs.append(rec)
        return rec

    # --- workloads -----------------------------------------------------------------------
    async def shared_prefix(self):
        a, rng = self.a, self.rng
        prefixes = [self.tokens(a.prefix_tokens, random.Random(a.seed * 1000 + i)) for i in range(a.prefixes)]
        jobs = []
        for i in range(a.n):
            p = 0 if rng.random() < a.hot else rng.randrange(a.prefixes)
            jobs.append((self.join(prefixes[p], self.tokens(a.suffix_tokens, rng)), f"p{p}"))
        await self.run_jobs(jobs)

    async def run_jobs(self, jobs):
        a = self.a
        if a.rate:
            tasks, t = [], time.perf_counter()
            for prompt, tag in jobs:
                t += self.rng.expovariate(a.rate)
                await asyncio.sleep(max(0.0, t - time.perf_counter()))
                tasks.append(asyncio.create_task(self.one(prompt, tag)))
            await asyncio.gather(*tasks)
            return
        q = list(reversed(jobs))

        async def worker():
            while q:
                prompt, tag = q.pop()
                await self.one(prompt, tag)
        await asyncio.gather(*(worker() for _ in range(a.concurrency)))

    async def multiturn(self):
        a = self.a
        system = self.tokens(a.prefix_tokens, random.Random(a.seed * 1000))
        convs = list(range(a.conversations))
        self.rng.shuffle(convs)

        async def conversation(c):
            rng = random.Random(a.seed * 7919 + c)
            history = self.join(system, self.tokens(a.suffix_tokens, rng))
            for t in range(a.turns):
                rec = await self.one(history, f"c{c}t{t}")
                if rec["status"] != "ok":
                    return
                answer = rec["text"] if a.text else self.tokens(rec["completion_tokens"], rng)
                history = self.join(history, answer, self.tokens(a.suffix_tokens, rng))

        async def worker():
            while convs:
                await conversation(convs.pop())
        await asyncio.gather(*(worker() for _ in range(a.concurrency)))

    async def main(self):
        if not self.a.model:
            self.a.model = (await self.client.models.list()).data[0].id
        self.t0 = time.time()
        t = time.perf_counter()
        await (self.shared_prefix() if self.a.workload == "shared-prefix" else self.multiturn())
        return time.perf_counter() - t


def scrape(urls):
    """{url: (hits, queries)} from each gateway's /metrics."""
    out = {}
    for u in urls:
        txt = urllib.request.urlopen(u.rstrip("/") + "/metrics", timeout=10).read().decode()

        def val(name):
            m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} ([0-9.eE+-]+)$", txt, re.M)
            return float(m.group(1)) if m else 0.0
        out[u] = (val("vllm:prefix_cache_hits_total"), val("vllm:prefix_cache_queries_total"))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="the gateway, or the load balancer in front of several")
    p.add_argument("--model", default=None, help="default: the first of GET /v1/models")
    p.add_argument("--api-key", default="unused")
    p.add_argument("--workload", choices=["shared-prefix", "multiturn"], default="shared-prefix")
    p.add_argument("-n", type=int, default=64, help="shared-prefix: requests")
    p.add_argument("--prefixes", type=int, default=8)
    p.add_argument("--prefix-tokens", type=int, default=256, help="shared prefix (multiturn: system prompt)")
    p.add_argument("--suffix-tokens", type=int, default=32, help="each request's own part (a user turn)")
    p.add_argument("--hot", type=float, default=0.0, help="fraction of requests on prefix 0")
    p.add_argument("--conversations", type=int, default=8)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--max-output", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="let EOS end an answer (default: exactly --max-output tokens)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals per second (0: --concurrency)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--text", action="store_true", help="word prompts (needs the model's tokenizer)")
    p.add_argument("--vocab", type=int, default=500, help="token ids drawn from [3, VOCAB)")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--metrics", default="", help="gateway URLs (comma-separated) whose /metrics to read")
    p.add_argument("--records", default=None, help="one JSON line per request")
    p.add_argument("--json", action="store_true", help="print only the summary JSON on stdout")
    a = p.parse_args()

    murls = [u for u in a.metrics.split(",") if u]
    before = scrape(murls) if murls else {}
    load = Load(a)
    duration = asyncio.run(load.main())
    out = summarize(load.recs, duration)
    out["workload"] = a.workload
    out["t0"] = load.t0  # Unix time the records' start/end count from
    out["instances"] = {}
    for inst in sorted({r["instance"] or "-" for r in load.recs}):
        out["instances"][inst] = summarize([r for r in load.recs if (r["instance"] or "-") == inst], duration)
    if murls:
        after = scrape(murls)
        out["engines"] = {u: {"hit_tokens": after[u][0] - before[u][0], "queried_tokens": after[u][1] - before[u][1]}
                          for u in murls}
    if a.records:
        with open(a.records, "w") as f:
            for r in sorted(load.recs, key=lambda r: r["start"]):
                r = dict(r)
                r.pop("text")
                f.write(json.dumps(r) + "\n")
    if not a.json:
        print(f"{out['requests']} requests ({out['failed']} failed) in {duration:.2f} s: {out['req_s']:.2f} req/s, "
              f"hit fraction {out['prefix_cache']['hit_fraction'] or 0:.3f}, TTFT p50 {out['ttft_ms']['p50'] or 0:.1f} "
              f"p99 {out['ttft_ms']['p99'] or 0:.1f} ms", file=sys.stderr)
        for k, v in out["instances"].items():
            print(f"  {k}: {v['requests']} requests, {v['req_s'] or 0:.2f} req/s, hit fraction "
                  f"{v['prefix_cache']['hit_fraction'] or 0:.3f}, TTFT p99 {v['ttft_ms']['p99'] or 0:.1f} ms",
                  file=sys.stderr)
    print(json.dumps(out, indent=None if a.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
