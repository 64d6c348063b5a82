"""Client: the blocking client. Its calls wait in the library (spinning briefly on
the ring, then sleeping on the doorbell, the GIL released)."""
from __future__ import annotations

import threading
from typing import Any, Iterator, Optional, Sequence

from . import _native, _params
from ._core import BATCH, Core, Req, Result, Token
from ._errors import AllmError, ConnectError


def _timeout_ms(timeout: Optional[float]) -> int:
    if timeout is None:
        return -1
    return max(1, int(timeout * 1000))


class Client:
    """One connection to a running allm-engined over its shared-memory rings.

    Client(name="default", runtime_dir=None): the engine's --name and where its
    socket lives (default $ALLM_RUNTIME_DIR, else $XDG_RUNTIME_DIR/adaptivellm, else
    /tmp/adaptivellm-$UID). Raises ConnectError with the library's message when no
    engine answers.

    A Client may hold many requests at once (several streams, generate calls from
    several threads); its calls are serialized by a lock, so threads take turns.
    For many concurrent streams in one thread use AsyncClient."""

    def __init__(self, name: Optional[str] = None, runtime_dir: Optional[str] = None, *, timeout: float = 5.0,
                 spin_us: Optional[int] = None, sq_entries: int = 0, cq_entries: int = 0, arena_size: int = 0,
                 posix_shm: bool = False):
        try:
            h = _native.Handle(name, runtime_dir, sq_entries, cq_entries, arena_size, posix_shm,
                               _timeout_ms(timeout), 0 if spin_us is None else (spin_us if spin_us > 0 else -1))
        except OSError as e:
            raise ConnectError(e.errno or 0, e.strerror or str(e)) from None
        self._lock = threading.Lock()
        self._core = Core(h, self._on_token, self._on_end)
        self._pending_cancels: list = []  # from threads that found the lock taken
        self.model: str = h.model  #: the model the engine serves
        self.client_id: int = h.client_id  #: the engine's number for this client

    # -- requests ---------------------------------------------------------------

    def generate(self, prompt: Optional[_params.Prompt] = None, *, prompt_ids: Optional[Sequence[int]] = None,
                 **sampling: Any) -> Result:
        """Generates and returns the whole result. Sampling parameters: see
        adaptivellm.PARAMETERS (max_tokens, temperature, top_p, top_k, seed, ...).
        Raises ParameterError/TypeError before anything is sent, RequestError when
        the engine fails the request, EngineGoneError when the engine went away."""
        q = _params.build(prompt, prompt_ids, sampling)
        with self._lock:
            r = self._submit(q, streaming=False)
            try:
                while not r.done:
                    self._pump(-1)
            except BaseException:
                self._core.cancel(r)  # Ctrl-C: stop it in the engine too
                raise
        if r.error is not None:
            raise r.error
        return r.result()

    def stream(self, prompt: Optional[_params.Prompt] = None, *, prompt_ids: Optional[Sequence[int]] = None,
               **sampling: Any) -> "Stream":
        """Submits now and returns an iterator of Tokens. Closing it (close(), a
        `with` block, or dropping it, as `break` in a for loop does) cancels the
        request in the engine."""
        q = _params.build(prompt, prompt_ids, sampling)
        with self._lock:
            r = self._submit(q, streaming=True)
        return Stream(self, r)

    def close(self) -> None:
        """Disconnects: the engine cancels whatever is still in flight."""
        with self._lock:
            core = self._core
            if not core.h.closed:
                core.fail(AllmError("the client was closed"))
                core.h.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._core.h.closed

    # -- internals (lock held) -----------------------------------------------------

    def _on_token(self, r: Req, tok: Token) -> None:
        r.tokens.append(tok)
        if r.streaming:
            r.queue.append(tok)

    def _on_end(self, r: Req) -> None:
        pass  # the waiting thread sees r.done after its pump

    def _submit(self, q: _params.Request, streaming: bool) -> Req:
        core = self._core
        if core.h.closed:
            raise AllmError("the client is closed")
        r = core.new_req(streaming)
        while not core.submit(r, q):
            self._pump(100)  # the rings are full: take events, then retry
        return r

    def _pump(self, timeout_ms: int) -> None:
        """Waits for events once and routes them."""
        core = self._core
        if core.dead:
            raise core.dead
        try:
            evs = core.h.wait(timeout_ms, BATCH)
        except OSError as e:
            raise core.poll_error(e) from None
        core.dispatch(evs)
        while self._pending_cancels:
            core.cancel(self._pending_cancels.pop())

    def _cancel(self, r: Req) -> None:
        """Cancels r from any thread without waiting for the lock's holder: if it is
        busy, the holder sends the cancel when its wait returns (r's own tokens wake
        it soon)."""
        if self._lock.acquire(blocking=False):
            try:
                self._core.cancel(r)
            finally:
                self._lock.release()
        else:
            r.closed = True
            self._pending_cancels.append(r)

    def _next(self, r: Req) -> Token:
        while True:
            if r.queue:
                return r.queue.popleft()
            if r.done:
                if r.error is not None:
                    raise r.error
                raise StopIteration
            with self._lock:
                if not r.queue and not r.done:
                    self._pump(-1)


class Stream(Iterator[Token]):
    """The tokens of one request, as they come. After the last one, .result holds
    the whole Result (text, ids, finish_reason, timings)."""

    def __init__(self, client: Client, r: Req):
        self._client = client
        self._r = r

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Token:
        r = self._r
        if r.queue:
            return r.queue.popleft()
        return self._client._next(r)

    @property
    def request_id(self) -> int:
        """The engine's id (0 until the engine accepted the request)."""
        return self._r.request_id

    @property
    def result(self) -> Optional[Result]:
        """The finished request; None until the stream ended (or when it was closed
        or failed)."""
        r = self._r
        return r.result() if r.final is not None else None

    def close(self) -> None:
        """Cancels the request in the engine if it is still running."""
        r = self._r
        if not r.done and not r.closed:
            self._client._cancel(r)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # an interpreter shutting down: nothing left to cancel in
            pass
