"""A request's parameters: the one place the Python package knows them.

Every sampling parameter's name, type, range, "off" value and default comes from
the request-parameter table the loaded libadaptivellm carries (read through
_native.param_table(); see _native.c for where the rows come from), so a parameter
added to the table is accepted here, checked against its range and sent, with no
change to this package. Besides the table's scalars a request carries a few lists,
whose limits are the header's constants: stop_ids, logit_bias, cache_salt.

Values are checked here, before anything is sent, and raise ParameterError
(a ValueError) or TypeError naming the parameter and what it accepts. Checks that
relate two parameters (min_tokens <= max_tokens) are the library's
(allm_params_check, called by the binding before submitting): still before
anything is sent, with the library's words.
"""
from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

from . import _native
from ._errors import ParameterError

# The table's types and flags, as the binding names them.
_I32, _U64, _F32, _BOOL = _native.PARAM_I32, _native.PARAM_U64, _native.PARAM_F32, _native.PARAM_BOOL
_LO_OPEN, _PLUS_ONE = _native.PARAM_F_LO_OPEN, _native.PARAM_F_PLUS_ONE
_INT_LIMITS = {_I32: (-(2**31), 2**31 - 1), _U64: (0, 2**64 - 1)}


def _num(x: float) -> str:
    """A range bound as users read it: 2147483647, 0.5, 10."""
    if x == int(x) and abs(x) < 2**63:
        return str(int(x))
    return f"{x:g}"


@dataclass(frozen=True)
class Param:
    """One row of the table, as users write its values. A value is valid when it
    is the row's off value or lies in its range."""

    name: str
    index: int  # the row's position: where submit() puts its value
    type: int  # _native.PARAM_*
    flags: int  # _native.PARAM_F_*
    lo: float  # the range of stored values
    hi: float
    off: Optional[float]  # the stored value meaning "off"; None: never off
    stored_default: Any  # the library's default, stored
    help: str
    cli_flag: Optional[str] = None  # the CLIs' flag (`allm generate --top-p`)
    json_key: Optional[str] = None  # the gateway's JSON key

    @property
    def plus_one(self) -> bool:
        """Stored as 1 + what users write, 0 meaning off (None in Python)."""
        return bool(self.flags & _PLUS_ONE)

    @property
    def default(self) -> Any:
        """The default as users write it (None: off)."""
        if self.plus_one:
            return None if self.stored_default == 0 else self.stored_default - 1
        if self.type == _BOOL:
            return bool(self.stored_default)
        return self.stored_default

    def range_text(self) -> str:
        """What the parameter accepts, as users write it."""
        shift = 1 if self.plus_one else 0
        lo, hi = self.lo - shift, self.hi - shift
        if self.type == _BOOL:
            return "True or False"
        if self.type in _INT_LIMITS:
            kind = "an integer"
            text = f"{kind} >= {_num(lo)}" if hi >= _INT_LIMITS[self.type][1] else f"{kind} in {_num(lo)}..{_num(hi)}"
        else:
            kind = "a number"
            text = f"{kind} >= {_num(lo)}" if hi >= 3.0e38 else \
                f"{kind} in {'(' if self.flags & _LO_OPEN else '['}{_num(lo)}, {_num(hi)}]"
        if self.plus_one:
            text += " or None (off)"
        elif self.off is not None and not (lo <= self.off <= hi and not (self.flags & _LO_OPEN and self.off == lo)):
            text += f" (or {_num(self.off)}: off)"
        return text

    def store(self, value: Any) -> Any:
        """The stored value for what a user wrote, or ParameterError / TypeError."""
        if value is None:
            if self.plus_one:
                return 0
            raise ParameterError(self.name, value, self.range_text())
        if self.type == _BOOL:
            if not isinstance(value, (bool, int)) or value not in (0, 1):
                raise TypeError(f"{self.name} must be True or False, not {value!r}")
            return bool(value)
        if self.type in _INT_LIMITS or self.plus_one:
            v = _integer(self.name, value)
            stored = v + 1 if self.plus_one else v
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                try:
                    value = float(value)  # numpy scalars, Decimal, Fraction
                except (TypeError, ValueError):
                    raise TypeError(f"{self.name} must be a number, not {type(value).__name__}") from None
            stored = float(value)
        if self._valid(stored):
            return stored
        raise ParameterError(self.name, value, self.range_text())

    def _valid(self, v: float) -> bool:
        if self.off is not None and v == self.off:
            return True
        if isinstance(v, float) and not math.isfinite(v):
            return False
        above = v > self.lo if self.flags & _LO_OPEN else v >= self.lo
        return above and v <= self.hi


def _load() -> dict[str, Param]:
    rows = _native.param_table()
    return {r["name"]: Param(name=r["name"], index=i, type=r["type"], flags=r["flags"], lo=r["lo"], hi=r["hi"],
                             off=r["off"], stored_default=r["default"], help=r["help"], cli_flag=r["flag"],
                             json_key=r["json"])
            for i, r in enumerate(rows)}


#: The table: parameter name -> Param, in the table's order.
PARAMS: Mapping[str, Param] = _load()
_N = len(PARAMS)

#: The request's parameters that are lists, with their limits (the header's).
MAX_STOP: int = _native.MAX_STOP
LOGIT_BIAS_MAX: int = _native.LOGIT_BIAS_MAX
CACHE_SALT_BYTES: int = _native.CACHE_SALT_BYTES
LIST_PARAMS = ("stop_ids", "logit_bias", "cache_salt")
# What the generated text must be (one of them; the engine compiles it, and a grammar
# it cannot compile fails the request naming the place): the keyword, its kind
# (enum allm_grammar_kind, params.h) and how its value becomes the text.
GRAMMARS = {
    "gbnf": (1, lambda v: _text("gbnf", v)),  # llama.cpp's GBNF, generation starts at rule root
    "json_schema": (2, lambda v: _text("json_schema", v if isinstance(v, (str, bytes)) else json.dumps(v))),
    "regex": (3, lambda v: _text("regex", v)),
    "choice": (4, lambda v: _text("choice", json.dumps(list(v)) if not isinstance(v, (str, bytes)) else v)),
    "json_object": (5, lambda v: None),  # any JSON object: json_object=True
}


def _text(name: str, v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    raise TypeError(f"{name} must be str or bytes, not {type(v).__name__}")
# a bias's range: params.h's
_BIAS_RANGE = (_native.LOGIT_BIAS_LO, _native.LOGIT_BIAS_HI)

Prompt = Union[str, bytes]


@dataclass(frozen=True)
class Request:
    """A request ready for _native.Handle.submit (all but its tag)."""

    prompt: Optional[bytes]
    prompt_ids: Optional[Sequence[int]]
    values: tuple  # one per table row: the stored value, None for the default
    stop_ids: Optional[tuple]
    logit_bias: Optional[tuple]
    cache_salt: Optional[bytes]
    logprobs: bool  # whether tokens carry log-probabilities
    grammar: Optional[bytes] = None  # the grammar's text (values' grammar_kind says what it is)


def _integer(label: str, x: Any) -> int:
    """x as an int (anything with __index__: numpy integers too), never a bool."""
    if isinstance(x, bool):
        raise TypeError(f"{label} must be an integer, not {x!r}")
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{label} must be an integer, not {type(x).__name__}") from None


def _ids(name: str, ids: Any, limit: Optional[int]) -> tuple:
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"{name} must be a sequence of token ids, not {type(ids).__name__}")
    out = []
    for i, x in enumerate(ids):
        x = _integer(f"{name}[{i}]", x)
        if not 0 <= x <= 2**31 - 1:
            raise ParameterError(f"{name}[{i}]", x, "a token id in 0..2147483647")
        out.append(x)
    if limit is not None and len(out) > limit:
        raise ParameterError(name, ids, f"at most {limit} ids")
    return tuple(out)


def build(prompt: Optional[Prompt], prompt_ids: Optional[Sequence[int]], sampling: Mapping[str, Any]) -> Request:
    """Checks a request as a user wrote it; returns what submit() takes, or raises
    TypeError / ParameterError before anything is sent."""
    if (prompt is None) == (prompt_ids is None):
        raise TypeError("give exactly one of prompt= (text) or prompt_ids= (token ids)")
    text = None
    ids = None
    if prompt is not None:
        if isinstance(prompt, str):
            text = prompt.encode("utf-8")
        elif isinstance(prompt, (bytes, bytearray, memoryview)):
            text = bytes(prompt)
        else:
            raise TypeError(f"prompt must be str or bytes, not {type(prompt).__name__}")
        if not text:
            raise ParameterError("prompt", prompt, "a non-empty text")
    else:
        ids = _ids("prompt_ids", prompt_ids, None)
        if not ids:
            raise ParameterError("prompt_ids", prompt_ids, "at least one token id")
    values = [None] * _N
    stop = bias = salt = grammar = None
    kind = None
    for key, value in sampling.items():
        p = PARAMS.get(key)
        if key in GRAMMARS and value is not None and value is not False:
            if kind is not None or "grammar_kind" in sampling:
                raise TypeError("give one grammar: gbnf=, json_schema=, regex=, choice= or json_object=True")
            kind, make = GRAMMARS[key]
            grammar = make(value)
            values[PARAMS["grammar_kind"].index] = PARAMS["grammar_kind"].store(kind)
        elif key in GRAMMARS:
            continue
        elif p is not None:
            values[p.index] = p.store(value)
        elif key == "stop_ids":
            stop = _ids("stop_ids", value, MAX_STOP) if value is not None else None
        elif key == "logit_bias":
            bias = _logit_bias(value) if value is not None else None
        elif key == "cache_salt":
            salt = _salt(value) if value is not None else None
        else:
            raise TypeError(f"unknown parameter {key!r}; the parameters are: "
                            + ", ".join(list(PARAMS) + list(LIST_PARAMS) + list(GRAMMARS)))
    lp = PARAMS.get("logprobs")
    wants_lp = lp is not None and bool(values[lp.index])
    return Request(text, ids, tuple(values), stop, bias, salt, wants_lp, grammar)


def _logit_bias(value: Any) -> tuple:
    items = value.items() if isinstance(value, Mapping) else value
    try:
        pairs = [(k, b) for k, b in items]
    except (TypeError, ValueError):
        raise TypeError("logit_bias must map token ids to biases ({id: bias} or [(id, bias), ...])") from None
    if len(pairs) > LOGIT_BIAS_MAX:
        raise ParameterError("logit_bias", f"{len(pairs)} entries", f"at most {LOGIT_BIAS_MAX} entries")
    out = []
    for k, b in pairs:
        (tid,) = _ids("logit_bias key", [int(k) if isinstance(k, str) and k.isdigit() else k], None)
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or \
                (_BIAS_RANGE and not _BIAS_RANGE[0] <= b <= _BIAS_RANGE[1]):
            raise ParameterError(f"logit_bias[{tid}]", b, "a finite number" if not _BIAS_RANGE else
                                 f"a number in [{_num(_BIAS_RANGE[0])}, {_num(_BIAS_RANGE[1])}]")
        out.append((tid, float(b)))
    return tuple(out)


def _salt(value: Any) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"cache_salt must be bytes or str, not {type(value).__name__}")
    if len(value) > CACHE_SALT_BYTES:
        raise ParameterError("cache_salt", value, f"at most {CACHE_SALT_BYTES} bytes (a digest of what scopes it)")
    return bytes(value)


def describe() -> str:
    """The parameters, one line each (name, what it accepts, default, help)."""
    lines = [f"{p.name}: {p.range_text()}; default {p.default!r}; {p.help}" for p in PARAMS.values()]
    lines.append(f"stop_ids: up to {MAX_STOP} extra stop token ids")
    lines.append(f"logit_bias: {{token id: bias}}, up to {LOGIT_BIAS_MAX} entries")
    lines.append(f"cache_salt: up to {CACHE_SALT_BYTES} bytes; requests share cached KV only with the same salt")
    lines.append("gbnf= / json_schema= / regex= / choice= / json_object=True: what the text must be (one of them)")
    return "\n".join(lines)
