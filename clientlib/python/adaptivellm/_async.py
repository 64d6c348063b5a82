"""AsyncClient: the asyncio client. The completion ring's doorbell (an eventfd) and
the lease socket sit in the event loop (loop.add_reader); when either is readable
the client takes every ready event without blocking and wakes the coroutines
waiting for them. Nothing blocks the loop: connecting runs in the default executor,
submitting and cancelling only write to shared memory."""
from __future__ import annotations

import asyncio
import functools
from collections import deque
from typing import Any, AsyncIterator, Optional, Sequence

from . import _native, _params
from ._core import BATCH, Core, Req, Result, Token
from ._errors import AllmError, ConnectError
from ._sync import _timeout_ms


class AsyncClient:
    """Client for asyncio: the same methods, as coroutines (generate) and async
    iterators (stream). Connects on first use (or `await client.connect()`, or
    `async with AsyncClient(...) as client`). Use it from one event loop."""

    def __init__(self, name: Optional[str] = None, runtime_dir: Optional[str] = None, *, timeout: float = 5.0,
                 sq_entries: int = 0, cq_entries: int = 0, arena_size: int = 0, posix_shm: bool = False):
        # spin_us -1: the loop never blocks in the library, so it never spins either
        self._args = (name, runtime_dir, sq_entries, cq_entries, arena_size, posix_shm, _timeout_ms(timeout), -1)
        self._core: Optional[Core] = None
        self._connecting: Optional[asyncio.Future] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._fds: tuple = ()
        self._backlog: deque = deque()  # (Req, Request) the rings had no room for yet
        self._closed = False
        self.model: Optional[str] = None  #: the model the engine serves (after connecting)
        self.client_id: Optional[int] = None

    # -- connection ----------------------------------------------------------------

    async def connect(self) -> "AsyncClient":
        """Connects (once; later calls return at once). Raises ConnectError."""
        if self._core is not None:
            return self
        if self._closed:
            raise AllmError("the client is closed")
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        await asyncio.shield(self._connecting)
        return self

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            h = await loop.run_in_executor(None, functools.partial(_native.Handle, *self._args))
        except OSError as e:
            self._connecting = None  # a later call tries again
            raise ConnectError(e.errno or 0, e.strerror or str(e)) from None
        self._loop = loop
        self._core = Core(h, self._on_token, self._on_end)
        self.model, self.client_id = h.model, h.client_id
        self._fds = (h.fileno(), h.lease_fd())
        for fd in self._fds:
            loop.add_reader(fd, self._on_ready)
        self._on_ready()  # an empty poll arms the doorbell for the first entry

    async def close(self) -> None:
        """Disconnects: the engine cancels what is still in flight; whoever awaits
        it gets AllmError."""
        self._closed = True
        if self._connecting is not None and self._core is None:
            try:
                await self._connecting
            except AllmError:
                pass
        core = self._core
        if core is None or core.h.closed:
            return
        self._unwatch()
        core.fail(AllmError("the client was closed"))
        core.h.close()

    aclose = close

    async def __aenter__(self) -> "AsyncClient":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _unwatch(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            for fd in self._fds:
                self._loop.remove_reader(fd)
        self._fds = ()

    # -- requests --------------------------------------------------------------------

    async def generate(self, prompt: Optional[_params.Prompt] = None, *,
                       prompt_ids: Optional[Sequence[int]] = None, **sampling: Any) -> Result:
        """Generates and returns the whole result (see Client.generate). Cancelling
        the awaiting task cancels the request in the engine."""
        q = _params.build(prompt, prompt_ids, sampling)
        await self.connect()
        core = self._core
        r = core.new_req(streaming=False)
        r.waiter = self._loop.create_future()
        self._submit(r, q)
        try:
            return await r.waiter
        except asyncio.CancelledError:
            self._cancel(r)
            raise

    def stream(self, prompt: Optional[_params.Prompt] = None, *, prompt_ids: Optional[Sequence[int]] = None,
               **sampling: Any) -> "AsyncStream":
        """An async iterator of Tokens (`async for tok in client.stream(...)`). The
        parameters are checked now (ParameterError before anything is sent); the
        request is submitted now if connected, else on the first iteration.
        Closing it (`await s.aclose()`, `async with`, or dropping it, as `break`
        does) cancels the request in the engine."""
        q = _params.build(prompt, prompt_ids, sampling)
        s = AsyncStream(self, q)
        if self._core is not None:
            s._start_now()
        return s

    # -- internals ----------------------------------------------------------------------

    def _submit(self, r: Req, q: _params.Request) -> None:
        core = self._core
        if core is None or core.h.closed:
            raise core.dead if core is not None and core.dead else AllmError("the client is closed")
        if self._backlog or not core.submit(r, q):
            self._backlog.append((r, q))  # the rings are full: after the next events

    def _flush_backlog(self) -> None:
        core = self._core
        while self._backlog:
            r, q = self._backlog[0]
            if r.closed:
                self._backlog.popleft()
                continue
            try:
                if not core.submit(r, q):
                    return
            except AllmError as e:  # refused (its parameters) or the engine is gone
                r.error = e
                self._on_end(r)
            self._backlog.popleft()

    def _on_ready(self) -> None:
        """The doorbell or the lease socket is readable: take every ready event."""
        core = self._core
        if core is None or core.h.closed:
            return
        try:
            evs = core.h.poll(BATCH)
        except OSError as e:
            self._unwatch()
            err = core.poll_error(e)
            while self._backlog:
                r, _ = self._backlog.popleft()
                r.error = err
                self._on_end(r)
            return
        if evs:
            core.dispatch(evs)
            if len(evs) >= BATCH:
                self._loop.call_soon(self._on_ready)  # more may wait: after others ran
        if self._backlog:
            self._flush_backlog()

    def _on_token(self, r: Req, tok: Token) -> None:
        r.tokens.append(tok)
        if r.streaming:
            w = r.waiter
            if w is not None:
                r.waiter = None
                if not w.done():
                    w.set_result(tok)
                    return
            r.queue.append(tok)

    def _on_end(self, r: Req) -> None:
        w = r.waiter
        if w is None or w.done():
            return
        r.waiter = None
        if r.error is not None:
            w.set_exception(r.error)
        elif r.streaming:
            w.set_exception(StopAsyncIteration())
        else:
            w.set_result(r.result())

    def _cancel(self, r: Req) -> None:
        if r.done or r.closed:
            return
        r.closed = True
        if self._core is None:
            return
        if not r.request_id:
            for i, (b, _) in enumerate(self._backlog):
                if b is r:
                    del self._backlog[i]  # never submitted: nothing to cancel
                    return
        self._core.cancel(r)


class AsyncStream(AsyncIterator[Token]):
    """The tokens of one request (async). After the last one, .result holds the
    whole Result."""

    def __init__(self, client: AsyncClient, q: _params.Request):
        self._client = client
        self._q: Optional[_params.Request] = q
        self._r: Optional[Req] = None

    def _start_now(self) -> None:
        c = self._client
        r = c._core.new_req(streaming=True)
        q, self._q = self._q, None
        c._submit(r, q)
        self._r = r

    async def _start(self) -> Token:
        await self._client.connect()
        if self._r is None:
            self._start_now()
        return await self.__anext__()

    def __aiter__(self) -> "AsyncStream":
        return self

    def __anext__(self) -> Any:
        # Not a coroutine: a ready token costs one finished future, a missing one a
        # future the client completes when the token comes (no coroutine frames).
        r = self._r
        if r is None:
            return self._start()
        loop = self._client._loop
        f = loop.create_future()
        if r.queue:
            f.set_result(r.queue.popleft())
        elif r.done:
            if r.error is not None:
                raise r.error
            raise StopAsyncIteration
        else:
            r.waiter = f
        return f

    @property
    def request_id(self) -> int:
        return self._r.request_id if self._r is not None else 0

    @property
    def result(self) -> Optional[Result]:
        r = self._r
        return r.result() if r is not None and r.final is not None else None

    async def aclose(self) -> None:
        """Cancels the request in the engine if it is still running."""
        self.close()

    def close(self) -> None:
        r = self._r
        if r is None:
            self._q = None  # never submitted
            return
        self._client._cancel(r)

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # a loop or interpreter shutting down
            pass
