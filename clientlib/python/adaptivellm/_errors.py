"""The package's exceptions: the engine's and the library's errors as Python ones."""
from __future__ import annotations

import errno as _errno
from typing import Any, Optional


class AllmError(Exception):
    """Base of every error this package raises about the engine or a request."""


class _LibraryError(AllmError):
    """An error of the client library itself: its errno and its message, shown as is."""

    def __init__(self, errno: int, message: str):
        super().__init__(errno, message)
        self.errno = errno
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConnectError(_LibraryError, ConnectionError):
    """No engine could be reached (or it refused us); the message is the library's
    ("cannot connect to /run/.../default.sock: No such file or directory")."""


class EngineGoneError(_LibraryError, ConnectionError):
    """The engine went away (its lease socket hung up) or broke the protocol; the
    client is dead: make a new one."""


class RequestError(AllmError):
    """The engine refused or failed one request: .message is the engine's, .status
    its negative errno. The client goes on serving others."""

    def __init__(self, message: str, status: int, request_id: int = 0):
        super().__init__(message, status)
        self.message = message
        self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        why = _errno.errorcode.get(-self.status, "") if self.status else ""
        return f"{self.message} ({why})" if why else self.message


class ParameterError(AllmError, ValueError):
    """A request's parameter is out of range; raised before anything is sent."""

    def __init__(self, name: Optional[str], value: Any = None, accepts: Optional[str] = None, *,
                 message: Optional[str] = None):
        self.name = name  # None: the library refused a combination (its message says)
        self.value = value
        self.accepts = accepts
        super().__init__(message or f"{name}={value!r} is not valid" + (f": want {accepts}" if accepts else ""))


def from_oserror(e: OSError) -> AllmError:
    """The binding's OSError as this package's error (a dead handle or a refusal)."""
    code = e.errno or 0
    msg = e.strerror or str(e)
    if code in (_errno.EPIPE, _errno.EPROTO):
        return EngineGoneError(code, msg)
    if code == _errno.EINVAL:
        # the library's allm_params_check words name the parameter first
        name = msg.split(" ", 1)[0].strip(":=") if msg else None
        return ParameterError(name if name and name.isidentifier() else None, message=msg + "; nothing was sent")
    if code == _errno.E2BIG:
        return ParameterError("prompt", message=msg + " (connect with a larger arena_size); nothing was sent")
    return AllmError(msg)
