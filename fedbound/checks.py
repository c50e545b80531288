"""Input checks shared by every module: arrays in, arrays out, a clear ParameterError on bad input.

All checks broadcast: they accept scalars or numpy arrays, reject NaN always, reject +-inf unless asked,
and report the first offending element together with its index.

>>> check_real("delta", 0.5, low=0, high=1, low_open=True, high_open=True)
array(0.5)
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import DomainError, FedboundError, ParameterError

__all__ = ["MAX_INT", "broadcast", "broadcast_errors_named", "interval", "check_real", "check_int",
           "check_probability", "as_float_array", "scalar_or_array", "check_finite", "to_jsonable",
           "strict_json"]

MAX_INT = 10**12
"""Largest integer parameter (counts: rounds, clients, samples, steps) any check accepts unless told
otherwise.  Far beyond any real federation, and small enough that float64 holds it exactly and int64
arithmetic on it (products of two counts stay below 2**63) cannot wrap."""


def _fmt(x: float | None, default: str) -> str:
    if x is None:
        return default
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:g}"


def interval(low: float | None, high: float | None, low_open: bool = False, high_open: bool = False,
             integer: bool = False) -> str:
    """Interval notation for error messages: ``(0, 1)``, ``[1, inf)``, ``integer in [1, 50]``."""
    left = "(" if (low_open or low is None) else "["
    right = ")" if (high_open or high is None) else "]"
    text = f"{left}{_fmt(low, '-inf')}, {_fmt(high, 'inf')}{right}"
    return f"integer in {text}" if integer else text


def as_float_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array; a ParameterError (not a numpy traceback) if it is not numeric."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except OverflowError:  # a Python int beyond the float range, e.g. 10**400 (alone or inside a list)
        raise ParameterError(name, _Short(f"an integer of {_digits(value)} digits"),
                             "a real number within the float64 range (|x| < 1.8e308)") from None
    except (TypeError, ValueError):
        raise ParameterError(name, _Short(_abbreviate(value)), "a real number or an array of real numbers"
                             ) from None
    return arr


def _digits(value: Any) -> int:
    """The digits of the largest integer in ``value`` (an int, or nested lists / tuples of them)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() < 13_000:  # str() of a longer int raises (Python's 4300-digit limit)
            return len(str(abs(value)))
        return int(abs(value).bit_length() * 0.30102999566398120) + 1  # from the bit length: exact or +1
    if isinstance(value, list | tuple):
        return max((_digits(v) for v in value), default=0)
    return 0


class _Short(str):
    """A value already shortened for an error message (shown without quotes)."""

    def __repr__(self) -> str:
        return str(self)


def _abbreviate(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> tuple[Any, str]:
    if arr.ndim == 0:
        return arr.item(), ""
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return arr[idx].item(), f" (first offending element at index {idx if len(idx) > 1 else idx[0]})"


_SCALARS = (float, int, np.floating, np.integer)


def _scalar_float(value: Any) -> float | None:
    """``value`` as a Python float when it is one real number (not bool-like strings), else None."""
    if isinstance(value, _SCALARS) or (isinstance(value, np.ndarray) and value.ndim == 0
                                       and value.dtype.kind in "fiub"):
        try:
            return float(value)
        except (OverflowError, TypeError, ValueError):
            return None
    return None


def check_real(name: str, value: Any, low: float | None = None, high: float | None = None, *,
               low_open: bool = False, high_open: bool = False, allow_inf: bool = False,
               hint: str = "") -> np.ndarray:
    """Return ``value`` as a float array after checking every element lies in the interval.

    NaN is always rejected; +-inf is rejected unless ``allow_inf`` (and then still subject to the bounds).
    """
    x = _scalar_float(value)
    if x is not None and x == x and (allow_inf or math.isfinite(x)) \
            and (low is None or (x > low if low_open else x >= low)) \
            and (high is None or (x < high if high_open else x <= high)):
        return np.array(x)  # fast path: one valid number (a plan checks thousands)
    arr = as_float_array(name, value)
    bad = np.isnan(arr)
    if not allow_inf:
        bad |= np.isinf(arr)
    with np.errstate(invalid="ignore"):
        if low is not None:
            bad |= (arr <= low) if low_open else (arr < low)
        if high is not None:
            bad |= (arr >= high) if high_open else (arr > high)
    if bad.any():
        first, where = _first_bad(arr, bad)
        raise ParameterError(name, first, interval(low, high, low_open, high_open) + where, hint)
    return arr


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None,
              hint: str = "") -> np.ndarray:
    """Return ``value`` as an int64 array after checking every element is an integer in ``[low, high]``.

    ``high`` defaults to :data:`MAX_INT` (and ``low`` is floored at -MAX_INT): the range is checked on the
    float64 values before the cast, so no input can wrap around in int64; the cast result is checked again.
    """
    high = MAX_INT if high is None else min(high, MAX_INT)
    low = -MAX_INT if low is None else low
    x = _scalar_float(value)
    if x is not None and math.isfinite(x) and x == round(x) and low <= x <= high:
        return np.array(int(x), dtype=np.int64)  # fast path: one valid integer
    arr = as_float_array(name, value)
    bad = ~np.isfinite(arr)
    with np.errstate(invalid="ignore"):
        bad |= arr != np.round(arr)
        if low is not None:
            bad |= arr < low
        if high is not None:
            bad |= arr > high
    if bad.any():
        first, where = _first_bad(arr, bad)
        raise ParameterError(name, first, interval(low, high, integer=True) + where, hint)
    out = arr.astype(np.int64)
    if np.any(out != arr):  # pragma: no cover - impossible after the range check; kept as the last guard
        raise ParameterError(name, value, interval(low, high, integer=True), hint)
    return out


def broadcast(**named: np.ndarray) -> list[np.ndarray]:
    """``np.broadcast_arrays`` of the named inputs; a ParameterError naming them and their shapes (not numpy's
    anonymous "operands could not be broadcast") when the shapes do not fit."""
    try:
        return np.broadcast_arrays(*named.values())
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in named.items())
        first = next(iter(named))
        raise ParameterError(first, _Short(f"shape {np.shape(named[first])}"),
                             f"arrays of shapes that broadcast together (got {shapes})") from None


def broadcast_errors_named(fn):
    """Decorator for formulas that broadcast their checked inputs in arithmetic: numpy's anonymous
    "operands could not be broadcast" becomes a ParameterError naming the function's array inputs."""
    import functools
    import inspect

    names = list(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as exc:
            if isinstance(exc, FedboundError) or "broadcast" not in str(exc):
                raise
            given = dict(zip(names, args, strict=False)) | kwargs
            shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in given.items() if np.ndim(v))
            first = next((k for k, v in given.items() if np.ndim(v)), names[0])
            raise ParameterError(first, _Short(f"shape {np.shape(given.get(first))}"),
                                 f"arrays of shapes that broadcast together (got {shapes})") from None

    return wrapper


def check_probability(name: str, value: Any, *, allow_zero: bool = False, allow_one: bool = False,
                      hint: str = "") -> np.ndarray:
    """A probability-like parameter in (0, 1), optionally including its end points."""
    return check_real(name, value, 0.0, 1.0, low_open=not allow_zero, high_open=not allow_one, hint=hint)


def check_finite(name: str, value: Any, inputs: Mapping[str, Any], positive: bool = False) -> np.ndarray:
    """Check a computed result is finite (and > 0 with ``positive``) before it reaches the user.

    ``inputs`` are what the user gave, by name (e.g. ``{"sensitivity": 1e308}``): a result that overflows
    or underflows is reported as a DomainError naming those inputs, never returned as inf, NaN or a wrong
    sign.
    """
    arr = as_float_array(name, value)
    bad = ~np.isfinite(arr)
    if positive:
        bad |= ~(arr > 0)
    if bad.any():
        first, where = _first_bad(arr, bad)
        given = ", ".join(f"{k} = {_brief(v)}" for k, v in inputs.items())
        raise DomainError(name, first, "a finite positive number" if positive else "a finite number",
                          f"the result for {given} is out of floating-point range{where}")
    return arr


def _brief(value: Any) -> str:
    """A number, or the range of an array of numbers, for a message (``1e+308``, ``[0.1 .. 2]``)."""
    arr = np.asarray(value, dtype=float)
    if arr.size == 1:
        return f"{arr.item():g}"
    if arr.size == 0:
        return "[]"
    return f"[{np.min(arr):g} .. {np.max(arr):g}]"


def scalar_or_array(arr: np.ndarray) -> float | np.ndarray:
    """Return a Python float for 0-d results and the array otherwise (the library's return convention)."""
    if np.ndim(arr) == 0:
        out = float(arr)
        if math.isnan(out):  # defensive: computations must never leak NaN to the user
            raise FedboundError("internal error: a computation produced NaN; please report the inputs")
        return out
    return arr


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"it holds {token}, which fedbound never writes")


def strict_json(data: bytes) -> Any:
    """The JSON document in ``data`` as fedbound writes it (UTF-8, no NaN or Infinity): a file that is not
    (damaged, truncated, overwritten) raises ValueError (UnicodeDecodeError, JSONDecodeError, or one that
    names the non-finite constant), never a NaN that a reader would show as a result."""
    return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)


def to_jsonable(obj: Any, where: str = "$") -> Any:
    """A JSON-ready copy of ``obj``; raises ValueError on NaN/inf, naming the path (``$.key[0]``)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_dict"):
            return to_jsonable(obj.to_dict(), where)
        return to_jsonable({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}, where)
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist(), where)
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item(), where)
    if isinstance(obj, bool) or obj is None or isinstance(obj, str | int):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"refusing to write a non-finite number ({obj}) to JSON at {where}")
        return obj
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, Sequence | set | frozenset):
        return [to_jsonable(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    raise TypeError(f"cannot write {type(obj).__name__} to JSON at {where}")
