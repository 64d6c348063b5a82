# Description: pytest checks of the adaptivellm Python package against a running allm-engined (started by tests/python-client.sh; its name, the binaries and a scratch directory come in ALLM_TEST_* variables).
"""What the package promises, checked through the engine as users see it: the ids
`allm generate` prints, the engine's counters and block pools (allmctl), a killed
engine. Nothing here knows the package's insides."""
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import adaptivellm
from adaptivellm import (AllmError, AsyncClient, Client, ConnectError, EngineGoneError, ParameterError,
                         RequestError)

NAME = os.environ["ALLM_TEST_ENGINE"]
ALLM = os.environ["ALLM_TEST_ALLM"]
ALLMCTL = os.environ["ALLM_TEST_ALLMCTL"]
ENGINED = os.environ["ALLM_TEST_ENGINED"]
MODEL = os.environ["ALLM_TEST_MODEL"]
TMP = os.environ["ALLM_TEST_TMP"]
RUNTIME_DIR = os.environ["ALLM_RUNTIME_DIR"]
PROMPT = "Once upon a time"


def allm_ids(*flags):
    """The generated ids `allm generate --ids` prints for these flags."""
    out = subprocess.run([ALLM, "--name", NAME, "generate", "--ids", *flags], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("generated:"))
    return [int(x) for x in line.split()[1:]]


def status():
    out = subprocess.run([ALLMCTL, "--name", NAME, "--json", "status"], capture_output=True, text=True,
                         timeout=30, check=True)
    return json.loads(out.stdout)


def metric(name, **labels):
    """One sample of `allmctl metrics` (the Prometheus text)."""
    out = subprocess.run([ALLMCTL, "--name", NAME, "metrics"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    for line in out.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{labels} in allmctl metrics")


def wait_idle(timeout=20.0):
    """Polls until nothing runs and no device block is in use; returns the status."""
    end = time.monotonic() + timeout
    while True:
        s = status()
        if (s["queues"]["running"] == 0 and s["queues"]["waiting"] == 0 and s["queues"]["swapped"] == 0
                and s["blocks"]["gpu"]["used"] == 0 and s["blocks"]["cpu"]["used"] == 0):
            return s
        if time.monotonic() > end:
            raise AssertionError(f"the engine is not idle {timeout} s later: {s['queues']}, {s['blocks']}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def client():
    with Client(name=NAME) as c:
        yield c


def test_library_not_found_is_a_clear_import_error():
    out = subprocess.run([sys.executable, "-c", "import adaptivellm"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "ALLM_LIBRARY": os.path.join(TMP, "no-such-libadaptivellm.so.3")})
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "ALLM_LIBRARY" in out.stderr and "no-such-libadaptivellm" in out.stderr


def test_async_stream_before_connecting():
    # the stream connects on its first iteration; generate connects on its first await
    want = allm_ids("--prompt", PROMPT, "--max-tokens", "20", "--temperature", "0")

    async def run():
        a, b = AsyncClient(name=NAME), AsyncClient(name=NAME)
        try:
            ids = [t.id async for t in a.stream(PROMPT, max_tokens=20, temperature=0)]
            return ids, (await b.generate(PROMPT, max_tokens=20, temperature=0)).ids
        finally:
            await a.close()
            await b.close()

    assert asyncio.run(run()) == (want, want)


# --- the same ids as the C client ------------------------------------------------------


@pytest.mark.parametrize("flags,kw", [
    (["--prompt", PROMPT, "--max-tokens", "48", "--temperature", "0"], dict(prompt=PROMPT, max_tokens=48,
                                                                            temperature=0)),
    (["--prompt-ids", "1,403,407,261,378", "--max-tokens", "40", "--temperature", "0", "--ignore-eos"],
     dict(prompt_ids=[1, 403, 407, 261, 378], max_tokens=40, temperature=0, ignore_eos=True)),
    # sampled, seeded: the same seed draws the same tokens whoever sends it
    (["--prompt", PROMPT, "--max-tokens", "40", "--temperature", "0.9", "--top-k", "40", "--seed", "7",
      "--repetition-penalty", "1.2"], dict(prompt=PROMPT, max_tokens=40, temperature=0.9, top_k=40, seed=7,
                                           repetition_penalty=1.2)),
])
def test_ids_equal_allm_generate(client, flags, kw):
    want = allm_ids(*flags)
    assert len(want) > 0
    r = client.generate(**kw)
    assert r.ids == want
    assert r.completion_tokens == len(want)
    assert r.finish_reason in ("length", "eos")
    assert r.total_s >= r.ttft_s >= r.queue_s >= 0
    s = client.stream(**kw)
    toks = list(s)
    assert [t.id for t in toks if t.id >= 0] == want
    assert "".join(t.text for t in toks) == r.text
    assert s.result is not None and s.result.ids == want

    async def via_async():
        async with AsyncClient(name=NAME) as ac:
            g = await ac.generate(**kw)
            ids = [t.id async for t in ac.stream(**kw) if t.id >= 0]
            return g.ids, ids

    assert asyncio.run(via_async()) == (want, want)


def test_logprobs_are_the_engines(client):
    r = client.generate(PROMPT, max_tokens=12, temperature=0, logprobs=3)
    assert len(r.logprobs) == len(r.ids) == 12
    for tid, lp, top in zip(r.ids, r.logprobs, r.top_logprobs):
        assert len(top) == 3 and top[0][0] == tid and top[0][1] == pytest.approx(lp)  # greedy: the best one
        assert lp <= 0
    assert client.generate(PROMPT, max_tokens=4, temperature=0).logprobs is None
    # the most alternatives (two ring entries a token): the first 3 as above, best first, distinct
    r20 = client.generate(PROMPT, max_tokens=12, temperature=0, logprobs=20)
    assert r20.ids == r.ids and r20.logprobs == pytest.approx(r.logprobs)
    for top, top3 in zip(r20.top_logprobs, r.top_logprobs):
        assert len(top) == 20 and len({i for i, _ in top}) == 20 and top[:3] == top3
        assert all(a[1] >= b[1] for a, b in zip(top, top[1:]))


# --- cancellation frees the engine's blocks -----------------------------------------------


def _cancel_halfway(client, how):
    """Reads half of a 400-token stream, closes it `how`; returns whether the
    engine counted an abort (False: the engine had finished it first)."""
    aborts = metric("vllm:request_success_total", finished_reason="abort")
    gen = metric("vllm:generation_tokens_total")
    kw = dict(prompt=PROMPT, max_tokens=400, temperature=0, ignore_eos=True)
    if how == "close":
        s = client.stream(**kw)
        got = [next(s) for _ in range(200)]
        s.close()
    elif how == "break":
        got = []
        for tok in client.stream(**kw):  # the iterator is dropped at break
            got.append(tok)
            if len(got) == 200:
                break
    else:  # with-block
        with client.stream(**kw) as s:
            got = [next(s) for _ in range(200)]
    assert len(got) == 200
    st = wait_idle()
    assert st["blocks"]["gpu"]["used"] == 0  # wait_idle's condition: every block it held is back
    aborted = metric("vllm:request_success_total", finished_reason="abort") - aborts
    made = metric("vllm:generation_tokens_total") - gen
    assert aborted in (0, 1)
    if aborted:
        assert 200 <= made < 400, made  # it stopped where it was cancelled
    return bool(aborted)


@pytest.mark.parametrize("how", ["close", "break", "with"])
def test_stream_cancelled_halfway_frees_blocks(client, how):
    # The engine makes 400 tokens of stories260K in tens of ms: on a loaded machine it
    # may finish before the cancel arrives. That run proves nothing either way, so
    # try again; every run must still leave no block in use.
    assert any(_cancel_halfway(client, how) for _ in range(8)), "the engine never saw the cancel"
    # the client goes on serving
    assert client.generate(PROMPT, max_tokens=5, temperature=0).ids == allm_ids("--prompt", PROMPT,
                                                                              "--max-tokens", "5",
                                                                              "--temperature", "0")


def test_async_stream_closed_halfway_cancels_in_engine():
    async def run():
        async with AsyncClient(name=NAME) as ac:
            for _ in range(8):
                aborts = metric("vllm:request_success_total", finished_reason="abort")
                s = ac.stream(PROMPT, max_tokens=400, temperature=0, ignore_eos=True)
                n = 0
                async for _tok in s:
                    n += 1
                    if n == 200:
                        break
                await s.aclose()
                await asyncio.sleep(0)  # the loop delivers what is left, then idles
                await asyncio.get_running_loop().run_in_executor(None, wait_idle)
                if metric("vllm:request_success_total", finished_reason="abort") > aborts:
                    return True
            return False

    assert asyncio.run(run())


def test_async_generate_cancelled_task_cancels_in_engine():
    async def run():
        async with AsyncClient(name=NAME) as ac:
            for _ in range(8):
                aborts = metric("vllm:request_success_total", finished_reason="abort")
                task = asyncio.ensure_future(ac.generate(PROMPT, max_tokens=400, temperature=0, ignore_eos=True))
                await asyncio.sleep(0.005)  # under way (400 tokens take tens of ms)
                task.cancel()
                try:
                    await task
                    continue  # it finished before the cancel (a fast engine, a starved client): again
                except asyncio.CancelledError:
                    pass
                await asyncio.get_running_loop().run_in_executor(None, wait_idle)
                if metric("vllm:request_success_total", finished_reason="abort") > aborts:
                    return True
            return False

    assert asyncio.run(run()), "the engine never saw the cancel"


# --- many streams from asyncio ------------------------------------------------------------


def test_32_concurrent_async_streams(client):
    n = 32
    kws = [dict(prompt_ids=[1, 403 + i], max_tokens=64, temperature=0.8, seed=100 + i, ignore_eos=True)
           for i in range(n)]
    want = [client.generate(**kw).ids for kw in kws]  # one at a time, the blocking client

    async def run():
        ticks = 0
        tick_at_token = []  # the ticker's count whenever a token arrives
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.0005)

        async def one(ac, kw):
            ids = []
            async for tok in ac.stream(**kw):
                ids.append(tok.id)
                tick_at_token.append(ticks)
            return ids

        async with AsyncClient(name=NAME) as ac:
            t = asyncio.ensure_future(ticker())
            await asyncio.sleep(0.001)
            got = await asyncio.gather(*(one(ac, kw) for kw in kws))
            done.set()
            await t
        return got, tick_at_token

    got, ticks = asyncio.run(run())
    assert got == want
    assert sum(len(g) for g in got) == 64 * n
    # the loop was never blocked waiting for tokens: the ticker ran while they came
    assert ticks[-1] > ticks[0], "the event loop did not run other coroutines while streams were in flight"
    wait_idle()


def test_async_loop_runs_while_the_engine_is_silent():
    # A stream waits for tokens an engine frozen by SIGSTOP does not send: other
    # coroutines must run meanwhile (the doorbell is in the loop, nobody blocks in
    # the library), and the stream goes on once the engine does.
    p, name = _start_engine("pyc-frozen")

    async def run():
        async with AsyncClient(name=name) as ac:
            want = (await ac.generate(PROMPT, max_tokens=300, temperature=0, ignore_eos=True)).ids
            s = ac.stream(PROMPT, max_tokens=300, temperature=0, ignore_eos=True)
            ids = [(await s.__anext__()).id]
            p.send_signal(signal.SIGSTOP)

            async def rest():
                return [t.id async for t in s]

            consumer = asyncio.ensure_future(rest())  # waits for tokens that do not come
            cont = threading.Timer(1.0, p.send_signal, (signal.SIGCONT,))
            ticks = 0
            cont.start()
            try:
                while cont.is_alive():  # the second the engine is frozen
                    ticks += 1
                    await asyncio.sleep(0.01)
            finally:
                cont.join()
            ids += await asyncio.wait_for(consumer, 60)
            return want, ids, ticks

    try:
        want, ids, ticks = asyncio.run(run())
    finally:
        p.send_signal(signal.SIGCONT)
        p.kill()
        p.wait()
    assert ids == want
    assert ticks > 1, "the event loop was blocked while the engine sent nothing"


def test_full_rings_are_waited_out(client):
    # 100 requests at once into an 8-entry submission ring and a 4 KiB prompt arena:
    # the clients hold back what does not fit and send it as the engine takes the
    # rest; every request comes back whole, in its own order of tokens
    kws = [dict(prompt_ids=[1, 400 + i], max_tokens=16, temperature=0.7, seed=i) for i in range(100)]
    want = [client.generate(**kw).ids for kw in kws]

    async def run():
        async with AsyncClient(name=NAME, sq_entries=8, arena_size=4096) as ac:
            return [r.ids for r in await asyncio.gather(*(ac.generate(**kw) for kw in kws))]

    assert asyncio.run(run()) == want
    with Client(name=NAME, sq_entries=8, arena_size=4096) as c:
        streams = [c.stream(**kw) for kw in kws]  # submitted at once, read after
        assert [[t.id for t in s] for s in streams] == want
    wait_idle()


# --- errors ------------------------------------------------------------------------------


def test_engine_error_is_a_python_exception_with_its_message(client):
    with pytest.raises(RequestError) as e:
        client.generate(prompt_ids=[1000], max_tokens=3)
    assert "1000" in str(e.value) and "vocabulary" in e.value.message
    assert e.value.status < 0
    assert client.generate(PROMPT, max_tokens=3, temperature=0).completion_tokens == 3  # still serving


def test_grammars_constrain_and_equal_allm_generate(client, tmp_path):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["name", "n"], "additionalProperties": False}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    want = allm_ids("--prompt", PROMPT, "--max-tokens", "60", "--temperature", "1", "--seed", "5",
                    "--json-schema", str(path))
    r = client.generate(PROMPT, max_tokens=60, temperature=1, seed=5, json_schema=schema)
    assert r.ids == want
    o = json.loads(r.text)
    assert set(o) == {"name", "n"} and len(o["name"]) <= 8 and 0 <= o["n"] <= 9
    assert client.generate(PROMPT, max_tokens=8, temperature=0, choice=["yes", "no"]).text in ("yes", "no")
    assert client.generate(PROMPT, max_tokens=40, temperature=1, json_object=True).text.startswith("{")
    with pytest.raises(RequestError) as e:
        client.generate(PROMPT, max_tokens=3, gbnf='root ::= "a" foo')
    assert "GBNF line 1 col 14" in e.value.message
    with pytest.raises(TypeError):
        client.generate(PROMPT, max_tokens=3, regex="a", choice=["b"])


def test_no_engine_raises_connect_error():
    with pytest.raises(ConnectError) as e:
        Client(name="no-such-engine", runtime_dir=RUNTIME_DIR, timeout=1)
    assert "no-such-engine" in str(e.value)

    async def a():
        await AsyncClient(name="no-such-engine", timeout=1).connect()

    with pytest.raises(ConnectError):
        asyncio.run(a())


def _start_engine(name):
    """A second engine to kill, under a name no earlier run used (a killed
    engine leaves its socket file behind)."""
    name = f"{name}-{os.getpid()}-{time.monotonic_ns()}"
    log = open(os.path.join(TMP, name + ".log"), "w")
    p = subprocess.Popen([ENGINED, "--name", name, "--model", MODEL, "--device", "cpu", "--profile",
                          os.path.join(TMP, "profile.json")], stdout=log, stderr=subprocess.STDOUT)
    sock = os.path.join(RUNTIME_DIR, name + ".sock")
    for _ in range(400):
        if os.path.exists(sock):
            return p, name
        assert p.poll() is None, open(log.name).read()
        time.sleep(0.025)
    p.kill()
    raise AssertionError(f"{name} did not start")


def _finished_or_gone(consume, result):
    try:
        consume()
    except EngineGoneError as e:
        assert "engine went away" in str(e)
        return
    assert result().completion_tokens == 400  # the engine made all of it before it died


def test_dead_engine_raises_engine_gone():
    p, name = _start_engine("pyc-dead")
    try:
        c = Client(name=name)
        s = c.stream(PROMPT, max_tokens=400, temperature=0, ignore_eos=True)
        next(s)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # what the ring held still comes; then the stream fails (unless the engine had
    # finished it before it died), and any new call does
    _finished_or_gone(lambda: [None for _ in s], lambda: s.result)
    with pytest.raises(EngineGoneError) as e:
        c.generate(PROMPT, max_tokens=3)
    assert "engine went away" in str(e.value)
    c.close()
    with pytest.raises(ConnectError) as e:
        Client(name=name, timeout=1)
    assert name in str(e.value)


def test_dead_engine_raises_in_asyncio():
    p, name = _start_engine("pyc-dead2")

    async def run():
        async with AsyncClient(name=name) as ac:
            s = ac.stream(PROMPT, max_tokens=400, temperature=0, ignore_eos=True)
            await s.__anext__()
            pending = asyncio.ensure_future(ac.generate(PROMPT, max_tokens=400, ignore_eos=True))
            await asyncio.sleep(0)
            p.send_signal(signal.SIGKILL)
            await asyncio.get_running_loop().run_in_executor(None, p.wait)
            try:
                assert (await asyncio.wait_for(pending, 20)).completion_tokens == 400  # finished first
            except EngineGoneError:
                pass

            async def drain():
                async for _ in s:
                    pass

            try:
                await asyncio.wait_for(drain(), 20)
                assert s.result.completion_tokens == 400
            except EngineGoneError:
                pass
            with pytest.raises(EngineGoneError) as e:
                await asyncio.wait_for(ac.generate(PROMPT, max_tokens=3), 20)
            assert "engine went away" in str(e.value)

    try:
        asyncio.run(run())
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


BAD = [
    (dict(top_p=1.5), ParameterError, "top_p"),
    (dict(top_p=-0.1), ParameterError, "top_p"),
    (dict(temperature=-1), ParameterError, "temperature"),
    (dict(temperature=float("nan")), ParameterError, "temperature"),
    (dict(max_tokens=0), ParameterError, "max_tokens"),
    (dict(max_tokens=2**31), ParameterError, "max_tokens"),
    (dict(max_tokens=2.5), TypeError, "max_tokens"),
    (dict(max_tokens=True), TypeError, "max_tokens"),
    (dict(stop_ids=[1, True]), TypeError, "stop_ids[1]"),
    (dict(stop_ids=[1, 2.0]), TypeError, "stop_ids[1]"),
    (dict(top_k=-1), ParameterError, "top_k"),
    (dict(presence_penalty=2.5), ParameterError, "presence_penalty"),
    (dict(frequency_penalty=-3), ParameterError, "frequency_penalty"),
    (dict(logprobs=21), ParameterError, "logprobs"),
    (dict(seed=-1), ParameterError, "seed"),
    (dict(ignore_eos="yes"), TypeError, "ignore_eos"),
    (dict(min_tokens=10, max_tokens=5), ParameterError, "min_tokens"),
    (dict(stop_ids=[1, 2, 3, 4, 5, 6, 7, 8, 9]), ParameterError, "stop_ids"),
    (dict(stop_ids=[-1]), ParameterError, "stop_ids"),
    (dict(cache_salt=b"x" * 100), ParameterError, "cache_salt"),
    (dict(logit_bias={5: float("inf")}), ParameterError, "logit_bias"),
    (dict(logit_bias={5: 150.0}), ParameterError, "logit_bias"),
    (dict(no_such_knob=1), TypeError, "no_such_knob"),
]


def test_bad_parameters_raise_before_anything_is_sent(client):
    before = status()["requests"], metric("vllm:prompt_tokens_total")
    for kw, exc, word in BAD:
        with pytest.raises(exc) as e:
            client.generate(PROMPT, **kw)
        assert word in str(e.value), (kw, str(e.value))
        with pytest.raises(exc):
            client.stream(PROMPT, **kw)
    for args, kw in [((), {}), ((PROMPT,), dict(prompt_ids=[1])), (("",), {}), ((), dict(prompt_ids=[])),
                     ((), dict(prompt_ids=[1, -5])), ((42,), {})]:
        with pytest.raises((ParameterError, TypeError)):
            client.generate(*args, max_tokens=3, **kw)

    async def via_async():
        async with AsyncClient(name=NAME) as ac:
            for kw, exc, _ in BAD:
                with pytest.raises(exc):
                    ac.stream(PROMPT, **kw)  # at the call, before any await
                with pytest.raises(exc):
                    await ac.generate(PROMPT, **kw)

    asyncio.run(via_async())
    assert (status()["requests"], metric("vllm:prompt_tokens_total")) == before, "a bad request reached the engine"
    assert client.generate(PROMPT, max_tokens=3, temperature=0).completion_tokens == 3


def test_parameters_come_from_the_library_table():
    # every scalar the C client's request carries is here, with its range and default
    names = set(adaptivellm.PARAMETERS)
    assert {"max_tokens", "temperature", "top_p", "top_k", "seed", "min_tokens", "logprobs",
            "presence_penalty", "frequency_penalty", "repetition_penalty", "ignore_eos"} <= names
    text = adaptivellm.describe_parameters()
    for n in names:
        assert text.count(n + ":") == 1
    assert adaptivellm.PARAMETERS["max_tokens"].default == 128  # the library's default
    # the same rows the CLI's flags come from (params.h): each one's flag is in
    # `allm generate --help`, and the row's help line with it
    out = subprocess.run([ALLM, "generate", "--help"], capture_output=True, text=True, timeout=30)
    helptext = out.stdout + out.stderr
    for p in adaptivellm.PARAMETERS.values():
        if p.flags & adaptivellm._native.PARAM_F_NO_CLI:
            continue  # set by other flags and fields (grammar_kind: --json-schema, json_schema=, ...)
        assert p.cli_flag and p.cli_flag in helptext, p.name
        assert p.json_key
