"""One code path from a paper's setting to its Plan: ``fedbound plan`` and ``fedbound report`` both call
it."""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fedbound.errors import ConfigError, FedboundError, ParameterError

__all__ = ["plan_for", "example_overrides", "blame_input"]

PROBES = 4
"""At most this many inputs are tried as the cause of a failed derived check."""
SEARCH_CPU_SECONDS = 3.0
"""CPU time the search for the working range of the culprit may take (bisection stops there)."""


def plan_for(paper: Any, setting: Any, variant: str = "paper", check: bool = False) -> Any:
    """The registered planner's Plan for ``paper`` (a :class:`fedbound.registry.Paper`) on ``setting`` (its
    :meth:`~fedbound.registry.Paper.load_setting`); the setting's assumed and measured keys and its notes
    are recorded in the plan, and every validity problem is in ``plan.warnings`` (printed once) instead of
    raised as a Python warning.  ``check``: the planner runs its certificate's full independent check
    (``fedbound plan --check``; planners take ``check=`` as a keyword)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        planner = paper.load("planner")
        takes_check = "check" in inspect.signature(planner).parameters
        result = blame_input(paper, setting.values,
                             lambda values: planner(values, variant, check=True) if check and takes_check
                             else planner(values, variant), getattr(setting, "given", ()))
    return dataclasses.replace(result, assumed=setting.assumed, measured=setting.measured,
                               warnings=(*setting.notes, *result.warnings))


def example_overrides(paper: Any) -> list[str]:
    """The paper's registered example (its own experiment) as ``--set KEY=VALUE`` overrides."""
    from fedbound.validation.reproduce import toml_literal

    return [f"{k}={toml_literal(v)}" for k, v in paper.example.items()]


def _reference(paper: Any, key: str) -> tuple[bool, Any]:
    """(True, the value of ``key`` in the paper's example, its documented default or its field's default),
    or (True, None) for an optional key that may be left unset, or (False, None) when there is nothing to
    compare with."""
    if key in paper.example:
        return True, paper.example[key]
    if key in paper.defaults:
        return True, paper.defaults[key]
    from fedbound.config import REQUIRED

    f = paper.config_section.field(key)
    if f.default is not REQUIRED and f.default is not None:
        return True, f.default
    return (True, None) if f.optional else (False, None)


def _distance(value: Any, ref: Any) -> float:
    """How far a value lies from the reference (orders of magnitude for positive numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(ref, int | float):
        return 0.0 if value == ref else 1.0
    if value > 0 and ref > 0:
        return abs(math.log10(value) - math.log10(ref))
    return abs(value - ref)


def _works(run: Callable[[dict], Any], values: dict, key: str, value: Any) -> bool:
    trial = dict(values)
    if value is None:
        trial.pop(key, None)
    else:
        trial[key] = value
    try:
        run(trial)
    except (ValueError, ArithmeticError):
        return False
    return True


def _boundary(run: Callable[[dict], Any], values: dict, key: str, bad: float, good: float, integer: bool,
              deadline: float) -> float:
    """The working value nearest ``bad`` found by bisection from ``good`` (works) towards ``bad`` (fails),
    in log space when both are positive; stops after 40 steps or at the CPU ``deadline``."""
    log = bad > 0 and good > 0
    for _ in range(40):
        if time.process_time() > deadline:
            break
        mid = math.sqrt(bad) * math.sqrt(good) if log else (bad + good) / 2
        if integer:
            mid = int(round(mid))
            if mid in (int(bad), int(good)):
                break
        elif abs(mid - good) <= 1e-3 * abs(good) or mid in (bad, good):
            break
        if _works(run, values, key, mid):
            good = mid
        else:
            bad = mid
    return good


def _round_inward(edge: float, side: str) -> str:
    """``edge`` to 4 significant digits, rounded towards the working side (a printed edge still works)."""
    if edge == 0 or not math.isfinite(edge):
        return f"{edge:g}"
    unit = 10.0 ** (math.floor(math.log10(abs(edge))) - 3)
    steps = math.floor(edge / unit + 1e-9) if side == "<=" else math.ceil(edge / unit - 1e-9)
    return f"{steps * unit:.4g}"


def _given_names(paper: Any, given: Iterable[str]) -> list[str]:
    section = paper.config_section
    return [section.canonical(k) for k in given if k in section]


def blame_input(paper: Any, values: Mapping[str, Any], run: Callable[[dict], Any],
                given: Iterable[str] = ()) -> Any:
    """``run(values)``; when it fails on a derived quantity (``sigma = inf``, ``lambda2``, ``n = 0``, or a
    key the user did not change), the error is re-raised about the input that caused it: its name, its
    value and the range that works for this setting.  An arithmetic failure (OverflowError,
    ZeroDivisionError, a math ValueError) is treated the same way; one that no input explains is re-raised as
    it is (a bug).

    The one place that turns a failed derived check into a message about the input (issue 26, item 6).
    ``given``: the keys the user set on the command line (tried first).  The culprit is found by probing:
    an input is to blame when replacing it by the paper's example value (or its documented default, or
    leaving it unset) makes ``run`` succeed; the inputs farthest from the example are tried first, at most
    :data:`PROBES`.  For a numeric culprit, the working range is then bracketed by bisection between the
    example's value and the user's (:data:`SEARCH_CPU_SECONDS` at most)."""
    values = dict(values)
    try:
        return run(values)
    except (ValueError, ArithmeticError) as exc:  # FedboundError, and a math error in a derived quantity
        error = exc
    section = paper.config_section
    given_keys = _given_names(paper, given)
    named = getattr(error, "name", None)
    named = section.canonical(named) if isinstance(named, str) and named in section else None
    if named is not None and (named in given_keys or not given_keys):
        raise error  # it already names an input the user gave
    candidates = []
    for key, value in values.items():
        known, ref = _reference(paper, key)
        if known and value != ref:
            candidates.append((key not in given_keys, -_distance(value, ref), key, ref))
    deadline = time.process_time() + SEARCH_CPU_SECONDS
    first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
    if not isinstance(error, FedboundError):
        first_line = f"the computation overflows or fails ({type(error).__name__}: {first_line})"
    for _, _, key, ref in sorted(candidates)[:PROBES]:
        if key == named or not _works(run, values, key, ref):
            continue
        value = values[key]
        f = section.field(key)
        if f.kind in (int, float) and isinstance(ref, int | float) and not isinstance(value, bool):
            edge = _boundary(run, values, key, float(value), float(ref), f.kind is int, deadline)
            side = "<=" if value > ref else ">="
            edge_text = f"{int(edge)}" if f.kind is int else _round_inward(edge, side)
            raise ParameterError(key, value, f"{key} {side} {edge_text} for this setting (the config domain "
                                 f"is {f.valid_range()})", f"with it, {first_line}") from None
        works = f"it plans when {key} is left unset" if ref is None else f"it plans with {key} = {ref!r}"
        raise ConfigError(f"{key} = {value!r} cannot be used for this setting: {first_line} ({works})"
                          ) from None
    raise error
