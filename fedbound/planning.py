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

__all__ = ["plan_for", "example_overrides", "blame_input", "cached_plan", "code_fingerprint"]

_PLANS: dict[str, Any] = {}
_PACKAGES = ("fedbound", "accounting", "bounds", "scheduling", "validation", "training", "deploy")


def code_fingerprint() -> str:
    """What a plan depends on besides its input: every source file of the project (path, size, mtime) and
    every installed distribution (site-packages' entries carry their versions).  ~5 ms; computed once per
    process."""
    if "fingerprint" not in _PLANS:
        import hashlib
        import os
        import sysconfig
        from pathlib import Path

        h = hashlib.blake2b(digest_size=20)
        root = Path(__file__).resolve().parents[1]
        for package in _PACKAGES:
            for dirpath, dirnames, files in os.walk(root / package):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(files):
                    if name.endswith(".py"):
                        st = os.stat(os.path.join(dirpath, name))
                        h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        site = sysconfig.get_paths()["purelib"]
        h.update("|".join(sorted(os.listdir(site)) if os.path.isdir(site) else []).encode())
        _PLANS["fingerprint"] = h.hexdigest()
    return _PLANS["fingerprint"]


def _remember(digest: str, result: Any, keep: int = 256) -> None:
    """Keep the last ``keep`` plans of this process (an explorer session asks for many)."""
    _PLANS[digest] = result
    if len(_PLANS) > keep + 1:
        _PLANS.pop(next(k for k in _PLANS if k != "fingerprint"))


def cached_plan(key: Any, compute: Any) -> Any:
    """``compute()``, kept in memory and across runs (the compiled-formula cache's directory, ``plans/``;
    ``FEDBOUND_CACHE_DIR=""`` turns it off) under ``key`` (paper, setting, variant, check) and
    :func:`code_fingerprint`: a planner is a pure function of its input and the code, so a second ``fedbound
    plan`` of the same setting loads the Plan instead of recomputing it (and imports no scipy).  Any problem
    with the cache falls back to ``compute()``."""
    import hashlib
    import os
    import pickle
    import tempfile

    from fedbound.bounds.compiled import cache_dir

    digest = hashlib.blake2b(repr((key, code_fingerprint())).encode(), digest_size=20).hexdigest()
    if digest in _PLANS:
        return _PLANS[digest]
    root = cache_dir()
    path = None if root is None else root / "plans" / f"{digest}.pickle"
    if path is not None and path.is_file():
        try:
            with open(path, "rb") as fh:
                result = pickle.load(fh)  # noqa: S301 - our own cache entry
            _remember(digest, result)
            return result
        except Exception:  # noqa: BLE001 - a corrupt or stale entry is recomputed
            pass
    result = compute()
    _remember(digest, result)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False, suffix=".tmp") as tmp:
                pickle.dump(result, tmp, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp.name, path)
        except Exception:  # noqa: BLE001 - unpicklable or unwritable: no disk cache, same answer
            pass
    return result

PROBES = 4
"""At most this many inputs are tried as the cause of a failed derived check."""
SEARCH_CPU_SECONDS = 3.0
"""CPU time the search for the working range of the culprit may take (bisection and its checks)."""
CHECKS_PER_SIDE = 3
"""Values a stated range is checked at on each side of its edge (issue 36: a range is only stated where it
was verified on both sides)."""


def plan_for(paper: Any, setting: Any, variant: str = "paper", check: bool = False) -> Any:
    """The registered planner's Plan for ``paper`` (a :class:`fedbound.registry.Paper`) on ``setting`` (its
    :meth:`~fedbound.registry.Paper.load_setting`); the setting's assumed and measured keys and its notes
    are recorded in the plan, and every validity problem is in ``plan.warnings`` (printed once) instead of
    raised as a Python warning.  ``check``: the planner runs its certificate's full independent check
    (``fedbound plan --check``; planners take ``check=`` as a keyword)."""
    def compute() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            planner = paper.load("planner")
            takes_check = "check" in inspect.signature(planner).parameters
            return blame_input(paper, setting.values,
                               lambda values: planner(values, variant, check=True) if check and takes_check
                               else planner(values, variant), getattr(setting, "given", ()))

    key = (paper.name, str(paper.planner), sorted(setting.values.items()), variant, bool(check))
    result = cached_plan(key, compute)
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
    from fedbound.budget import CpuBudgetExceeded

    trial = dict(values)
    if value is None:
        trial.pop(key, None)
    else:
        trial[key] = value
    try:
        run(trial)
    except CpuBudgetExceeded:  # not a verdict on the value: the whole answer is out of time
        raise
    except (ValueError, ArithmeticError):
        return False
    return True


def _boundary(run: Callable[[dict], Any], values: dict, key: str, bad: float, good: float, integer: bool,
              deadline: float) -> tuple[float, float, bool]:
    """(good, bad, converged): the working value nearest ``bad`` and the failing one nearest it, found by
    bisection from ``good`` (works) towards ``bad`` (fails), in log space when both are positive.
    ``converged``: they are adjacent integers, or within 0.1 % of each other; not when the CPU ``deadline``
    or 40 steps stopped it."""
    log = bad > 0 and good > 0
    for _ in range(40):
        mid = math.sqrt(bad) * math.sqrt(good) if log else (bad + good) / 2
        if integer:
            mid = int(round(mid))
            if mid in (int(bad), int(good)):
                return good, bad, True
        elif abs(mid - good) <= 1e-3 * abs(good) or mid in (bad, good):
            return good, bad, True
        if time.process_time() > deadline:
            break
        if _works(run, values, key, mid):
            good = mid
        else:
            bad = mid
    return good, bad, False


def _between(a: float, b: float, n: int, integer: bool) -> list[float]:
    """``n`` values strictly between ``a`` and ``b`` (geometric when both are positive; integers if asked)."""
    if a > 0 and b > 0:
        inner = [math.exp(math.log(a) + (math.log(b) - math.log(a)) * (i + 1) / (n + 1)) for i in range(n)]
    else:
        inner = [a + (b - a) * (i + 1) / (n + 1) for i in range(n)]
    if integer:
        inner = sorted({int(round(v)) for v in inner} - {int(a), int(b)})
    return [v for v in inner if min(a, b) < v < max(a, b)]


def _beyond(value: float, field: Any, up: bool, integer: bool) -> list[float]:
    """Two values past the user's ``value`` (away from the working side), inside the key's domain."""
    from fedbound.checks import MAX_INT

    steps = [value * 10, value * 1000] if value > 0 else [value + abs(value) + 1, 10 * (abs(value) + 1)]
    if not up:
        steps = [value / 10, value / 1000] if value > 0 else [value - abs(value) - 1, -10 * (abs(value) + 1)]
    out = []
    for v in steps:
        v = int(round(v)) if integer else v
        if not math.isfinite(v) or abs(v) > (MAX_INT if integer else 1e300) or v == value:
            continue
        try:
            field.coerce("", v)
        except ValueError:
            continue
        out.append(v)
    return out


def _verified(run: Callable[[dict], Any], values: dict, key: str, working: list, failing: list,
              deadline: float) -> str | None:
    """None when every value of ``working`` plans and every value of ``failing`` fails; otherwise why the
    range cannot be stated (the value that disagrees, or the CPU budget)."""
    for expect, points in ((True, working), (False, failing)):
        for v in points:
            if time.process_time() > deadline:
                return "the range was not checked within the CPU budget of the search"
            if _works(run, values, key, v) != expect:
                verdict = "fails" if expect else "plans"
                return f"{key} = {v:g} {verdict} too, so the working values are not one range"
    return None


def _round_inward(edge: float, side: str) -> str:
    """``edge`` to 4 significant digits, rounded towards the working side (a printed edge still works)."""
    if edge == 0 or not math.isfinite(edge):
        return f"{edge:g}"
    unit = 10.0 ** (math.floor(math.log10(abs(edge))) - 3)
    steps = math.floor(edge / unit + 1e-9) if side == "<=" else math.ceil(edge / unit - 1e-9)
    return f"{steps * unit:.4g}"


def _range_error(run: Callable[[dict], Any], values: dict, key: str, ref: Any, f: Any, first_line: str,
                 deadline: float) -> FedboundError:
    """The error about a numeric culprit ``key``: ``key <= edge for this setting`` only where the edge was
    found (bisection converged) and the range verified on both sides (:data:`CHECKS_PER_SIDE` values between
    the example's value and the edge all plan, as do the printed edges; values from the failing edge to the
    user's and two beyond it all fail); otherwise what was found, without a range (issue 36: eps = 495 was
    said to need eps <= 494.2 while 505 planned)."""
    value, integer = values[key], f.kind is int
    good, bad, converged = _boundary(run, values, key, float(value), float(ref), integer, deadline)
    side = "<=" if value > ref else ">="
    outward = ">=" if side == "<=" else "<="
    good_text = f"{int(good)}" if integer else _round_inward(good, side)
    bad_text = f"{int(bad)}" if integer else _round_inward(bad, outward)
    kind = int if integer else float
    why = None
    if converged:
        working = [*_between(float(ref), good, CHECKS_PER_SIDE, integer), kind(good_text)]
        failing = [kind(bad_text), *_between(bad, float(value), CHECKS_PER_SIDE, integer),
                   *_beyond(value, f, value > ref, integer)]
        why = _verified(run, values, key, working, failing, deadline)
        if why is None:
            checked = len(working) + len(failing)
            return ParameterError(key, value, f"{key} {side} {good_text} for this setting ({key} {outward} "
                                  f"{bad_text} fails; checked at {checked} values on both sides of the edge; "
                                  f"the config domain is {f.valid_range()})", f"with it, {first_line}")
    why = why or "the edge between them was not found within the CPU budget of the search"
    return ConfigError(f"{key} = {value!r} cannot be used for this setting: {first_line} (it plans with "
                       f"{key} = {good_text} and fails at {key} = {bad_text}; {why}, so no range is stated)")


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
    example's value and the user's (:data:`SEARCH_CPU_SECONDS` at most) and stated only where it was
    verified on both sides of its edge (:func:`_range_error`)."""
    from fedbound.budget import CpuBudgetExceeded, check

    values = dict(values)
    try:
        return run(values)
    except CpuBudgetExceeded:
        raise
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
        check(f"the search for the input that makes it fail ({first_line})")
        if key == named or not _works(run, values, key, ref):
            continue
        value = values[key]
        f = section.field(key)
        if f.kind in (int, float) and isinstance(ref, int | float) and not isinstance(value, bool):
            raise _range_error(run, values, key, ref, f, first_line, deadline) from None
        works = f"it plans when {key} is left unset" if ref is None else f"it plans with {key} = {ref!r}"
        raise ConfigError(f"{key} = {value!r} cannot be used for this setting: {first_line} ({works})"
                          ) from None
    raise error
