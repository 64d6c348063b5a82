# Types of the extension (src/*.c), for type checkers: what the Python side and
# users see of it.
from typing import Any, Optional, Sequence

class Token(tuple):
    """One generated token."""

    @property
    def id(self) -> int: ...  # -1: text the detokenizer held back, flushed at the end
    @property
    def text(self) -> str: ...
    @property
    def logprob(self) -> Optional[float]: ...
    @property
    def top_logprobs(self) -> Optional[tuple[tuple[int, float], ...]]: ...

class Handle:
    model: str
    client_id: int
    closed: bool
    def __init__(self, name: Optional[str] = ..., runtime_dir: Optional[str] = ..., sq_entries: int = ...,
                 cq_entries: int = ..., arena_size: int = ..., posix_shm: bool = ..., timeout_ms: int = ...,
                 spin_us: int = ...) -> None: ...
    def submit(self, tag: int, prompt: Optional[bytes], prompt_ids: Optional[Sequence[int]], values: tuple,
               stop_ids: Optional[Sequence[int]], logit_bias: Optional[Sequence[tuple[int, float]]],
               cache_salt: Optional[bytes], grammar: Optional[bytes] = ...) -> bool: ...
    def cancel(self, request_id: int) -> bool: ...
    def poll(self, max: int) -> list[tuple[Any, ...]]: ...
    def wait(self, timeout_ms: int, max: int) -> list[tuple[Any, ...]]: ...
    def fileno(self) -> int: ...
    def lease_fd(self) -> int: ...
    def close(self) -> None: ...

def load(path: str) -> bool: ...
def param_table() -> tuple[dict[str, Any], ...]: ...
def finish_reason_name(reason: int) -> str: ...

EVENT_ACCEPTED: int
EVENT_TOKEN: int
EVENT_FINAL: int
FINISH_EOS: int
FINISH_LENGTH: int
FINISH_STOP: int
FINISH_CANCELLED: int
FINISH_ERROR: int
PARAM_I32: int
PARAM_U64: int
PARAM_F32: int
PARAM_BOOL: int
PARAM_F_LO_OPEN: int
PARAM_F_PLUS_ONE: int
PARAM_F_NO_CLI: int
MAX_STOP: int
LOGPROBS_MAX: int
LOGIT_BIAS_MAX: int
CACHE_SALT_BYTES: int
LOGIT_BIAS_LO: float
LOGIT_BIAS_HI: float
HEADER_VERSION: str
