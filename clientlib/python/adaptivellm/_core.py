"""What Client and AsyncClient share: requests in flight by tag, the events routed
to them, results, cancellation bookkeeping and the engine-gone path."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from . import _native
from ._errors import AllmError, EngineGoneError, RequestError, from_oserror
from ._params import Request

Token = _native.Token

_ACCEPTED, _TOKEN, _FINAL = _native.EVENT_ACCEPTED, _native.EVENT_TOKEN, _native.EVENT_FINAL
_FINISH_ERROR = _native.FINISH_ERROR
# Events taken from the ring per call: enough for a step of many streams, few
# enough that one call never holds the event loop long.
BATCH = 1024


@dataclass(frozen=True)
class Result:
    """A finished request."""

    text: str  #: the generated text
    ids: list[int]  #: the generated token ids (without the -1 of flushed text)
    finish_reason: str  #: "eos", "stop" (a stop id), "length" or "cancelled"
    request_id: int  #: the engine's id (allmctl requests / cancel)
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  #: prompt tokens served from the prefix cache
    preemptions: int  #: times the engine swapped it out or recomputed it
    queue_s: float  #: arrival -> first scheduled, seconds
    ttft_s: float  #: arrival -> first token
    total_s: float  #: arrival -> finish
    logprobs: Optional[list[float]] = None  #: per token, when asked: its log-probability
    #: per token, when asked: ((id, logprob), ...), best first
    top_logprobs: Optional[list[tuple[tuple[int, float], ...]]] = None


class Req:
    """One request in flight: its tokens, its end, and whoever waits for them.
    Client and AsyncClient subclass the waking (wake / wake_end)."""

    __slots__ = ("tag", "request_id", "tokens", "queue", "final", "error", "closed", "cancel_sent", "waiter",
                 "streaming", "__weakref__")

    def __init__(self, tag: int, streaming: bool):
        self.tag = tag
        self.request_id = 0  # from ACCEPTED
        self.tokens: list = []  # every token, for the result
        self.queue: deque = deque()  # tokens a stream has not handed out yet
        self.final: Optional[tuple] = None  # the FINAL event
        self.error: Optional[BaseException] = None
        self.closed = False  # its stream was closed: cancel, drop what comes
        self.cancel_sent = False
        self.waiter: Any = None  # AsyncClient: the future a consumer awaits
        self.streaming = streaming

    @property
    def done(self) -> bool:
        return self.final is not None or self.error is not None

    def result(self) -> Result:
        f = self.final
        toks = [t for t in self.tokens]
        lp = None if not toks or toks[0].logprob is None else [t.logprob for t in toks if t.id >= 0]
        top = None if lp is None else [t.top_logprobs for t in toks if t.id >= 0]
        return Result(text="".join(t.text for t in toks), ids=[t.id for t in toks if t.id >= 0],
                      finish_reason=_native.finish_reason_name(f[3]), request_id=f[2], prompt_tokens=f[9],
                      completion_tokens=f[10], cached_tokens=f[12], preemptions=f[11], queue_s=f[6] / 1e6,
                      ttft_s=f[7] / 1e6, total_s=f[8] / 1e6, logprobs=lp, top_logprobs=top)


def final_error(ev: tuple) -> Optional[RequestError]:
    """The error a FINAL event carries, or None."""
    if ev[3] != _FINISH_ERROR:
        return None
    return RequestError(ev[5] or "request failed", ev[4], ev[2])


class Core:
    """The requests of one handle. Not thread-safe: its owner serializes calls."""

    def __init__(self, handle: Any, on_token: Callable, on_end: Callable):
        self.h = handle
        self.reqs: dict = {}  # tag -> Req, until its FINAL
        self.next_tag = 1
        self.dead: Optional[AllmError] = None
        self.cancels: deque = deque()  # Reqs whose cancel the ring had no room for
        self._on_token = on_token  # (Req, Token): a token for a stream
        self._on_end = on_end  # (Req): the request ended (final or error set)

    def new_req(self, streaming: bool) -> Req:
        r = Req(self.next_tag, streaming)
        self.next_tag += 1
        return r

    def submit(self, r: Req, q: Request) -> bool:
        """Queues r; False when the ring or the arena is full (retry after events).
        Raises the package's error when the library refuses."""
        if self.dead:
            raise self.dead
        try:
            ok = self.h.submit(r.tag, q.prompt, q.prompt_ids, q.values, q.stop_ids, q.logit_bias, q.cache_salt,
                               q.grammar)
        except OSError as e:
            err = from_oserror(e)
            if isinstance(err, EngineGoneError):
                self.fail(err)
            raise err from None
        if ok:
            self.reqs[r.tag] = r
        return ok

    def dispatch(self, events: Sequence[tuple]) -> None:
        reqs = self.reqs
        on_token = self._on_token
        for ev in events:
            r = reqs.get(ev[1])
            if r is None:
                continue
            k = ev[0]
            if k == _TOKEN:
                if not r.closed:
                    on_token(r, ev[2])
            elif k == _ACCEPTED:
                r.request_id = ev[2]
                if r.closed:
                    self.cancel(r)
            else:
                del reqs[ev[1]]
                err = final_error(ev)
                if err is not None:
                    r.error = err
                else:
                    r.final = ev
                if not r.closed:
                    self._on_end(r)
        if self.cancels:
            self.flush_cancels()

    def cancel(self, r: Req) -> None:
        """Asks the engine to stop r (once it has an id; ACCEPTED sends it otherwise)."""
        r.closed = True
        r.queue.clear()
        if r.done or r.cancel_sent or not r.request_id or self.dead:
            return
        try:
            if self.h.cancel(r.request_id):
                r.cancel_sent = True
            else:
                self.cancels.append(r)  # the SQ ring is full: after the next events
        except OSError as e:
            self.fail(from_oserror(e))

    def flush_cancels(self) -> None:
        while self.cancels:
            r = self.cancels.popleft()
            r.cancel_sent = False
            self.cancel(r)
            if not r.cancel_sent and not r.done and not self.dead:
                break  # still full

    def fail(self, err: AllmError) -> None:
        """The handle is dead: every request in flight ends with err."""
        if self.dead is None:
            self.dead = err
        reqs, self.reqs = self.reqs, {}
        for r in reqs.values():
            r.error = err
            if not r.closed:
                self._on_end(r)

    def poll_error(self, e: OSError) -> AllmError:
        err = from_oserror(e)
        self.fail(err)
        return err
