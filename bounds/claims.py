"""Claims as data, and one generic checker for all of them.

A :class:`Claim` states something a paper (or our analysis) says about a quantity: "decreasing in eps",
"unimodal in T", "interior minimum in K", "Q > P", an identity between two formulas ...  It carries the
:class:`Region` where it is declared to hold and, when the paper's claim is false somewhere, a description of
where it fails plus concrete counterexamples.  :func:`check_point` decides one point; :func:`check_claim`
checks a fixed number of seeded random points of the region *and* every counterexample, so both halves of a
partly-false claim are proved.  The test suite drives :func:`check_point` with hypothesis
(:meth:`Region.strategy`); ``fedbound claims`` uses the deterministic :func:`check_claim`.

Kinds (``Claim.kind``):

* ``increasing`` / ``decreasing`` in ``wrt``: along a line in ``wrt`` through the point (values and, where
  the quantity has a sympy derivative, its sign); ``strict=False`` allows flat stretches.
* ``unimodal`` in ``wrt``: on a grid of the line the derivative (or the difference) changes sign at most
  once, from - to +.
* ``interior_minimum`` in an integer ``wrt``: the exhaustive argmin over the feasible integers is neither the
  smallest nor the largest feasible one.
* ``beats_upper_end`` in an integer ``wrt``: some feasible x below the largest feasible one is better.
* ``compare``: ``quantity op other`` pointwise (``op`` in <, <=, ==, >=, >; ``other`` a number, a theorem or
  a callable of the point; ``==``, ``<=`` and ``>=`` allow a relative slack ``rtol`` for rounding).
* ``homogeneous`` in ``wrt`` of ``degree`` k: f(a x) = a^k f(x) for a = 2, 3.
* ``predicate``: ``other(point)`` is true.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["Region", "Claim", "Verdict", "ClaimReport", "Computed", "check_point", "check_claim", "KINDS"]

KINDS = ("increasing", "decreasing", "unimodal", "interior_minimum", "beats_upper_end", "compare",
         "homogeneous", "predicate")
Point = dict[str, Any]


class Quantity(Protocol):  # pragma: no cover - typing only
    name: str

    def evaluate(self, values: Mapping[str, Any], /, *, variant: str = ...) -> Any: ...


@dataclass(frozen=True)
class _EvalLike:
    value: Any
    admissible: Any


class Computed:
    """A quantity computed numerically (an optimiser's output, say) with a theorem's ``evaluate`` shape.

    ``fn(values, variant)`` returns an array broadcast over the inputs; non-finite entries count as
    inadmissible.  It has no sympy derivative, so monotonicity is checked by differences.
    """

    def __init__(self, name: str, fn: Callable[[Mapping[str, Any], str], Any], doc: str = "") -> None:
        self.name = name
        self.fn = fn
        self.doc = doc

    def evaluate(self, values: Mapping[str, Any], /, *, variant: str = "paper", **kw: Any) -> _EvalLike:
        value = np.asarray(self.fn({**values, **kw}, variant), dtype=float)
        return _EvalLike(value, np.isfinite(value))

    def __repr__(self) -> str:
        return f"<Computed {self.name}>"


@dataclass(frozen=True)
class Region:
    """A region of parameter space: ranges, fixed values, derived values, constraints, or a list of points.

    ``ranges`` maps a name to ``(low, high)`` or ``(low, high, "log")``; integer parameters (``integers``)
    are drawn as integers.  Names starting with ``_`` are helpers (e.g. a fraction used by ``derived``) and
    are removed before evaluation.  ``derived`` values are computed from the drawn ones, in order;
    ``where`` holds ``(description, predicate)`` constraints.  ``points``, if given, replaces the box.
    """

    ranges: Mapping[str, tuple] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    derived: tuple[tuple[str, Callable[[Point], Any]], ...] = ()
    where: tuple[tuple[str, Callable[[Point], Any]], ...] = ()
    integers: frozenset[str] = frozenset()
    points: tuple[Mapping[str, Any], ...] = ()
    doc: str = ""

    def complete(self, drawn: Mapping[str, Any]) -> Point:
        point = {**self.fixed, **drawn}
        for name, fn in self.derived:
            point[name] = fn(point)
        return point

    def accepts(self, point: Point) -> bool:
        with np.errstate(all="ignore"):
            return all(bool(np.all(pred(point))) for _, pred in self.where)

    def _draw(self, rng: np.random.Generator) -> Point:
        out: Point = {}
        for name, spec in self.ranges.items():
            lo, hi = spec[0], spec[1]
            if len(spec) > 2 and spec[2] == "log":
                x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
            else:
                x = rng.uniform(lo, hi)
            out[name] = int(round(x)) if name in self.integers else x
        return out

    def sample(self, n: int, seed: int = 0, max_tries: int = 100) -> list[Point]:
        """``n`` seeded random points (the list of points, cycled, when the region is a list)."""
        if self.points:
            return [self.complete(dict(self.points[i % len(self.points)])) for i in range(n)]
        rng = np.random.default_rng(seed)
        out: list[Point] = []
        for _ in range(n * max_tries):
            point = self.complete(self._draw(rng))
            if self.accepts(point):
                out.append(point)
                if len(out) == n:
                    break
        return out

    def strategy(self) -> Any:
        """A hypothesis strategy drawing points of this region (hypothesis is imported lazily)."""
        from hypothesis import strategies as st

        if self.points:
            return st.sampled_from([dict(p) for p in self.points]).map(self.complete)
        parts = {}
        for name, spec in self.ranges.items():
            lo, hi = spec[0], spec[1]
            if name in self.integers:
                parts[name] = st.integers(int(lo), int(hi))
            elif len(spec) > 2 and spec[2] == "log":
                parts[name] = st.floats(math.log(lo), math.log(hi)).map(math.exp)
            else:
                parts[name] = st.floats(lo, hi)
        return st.fixed_dictionaries(parts).map(self.complete).filter(self.accepts)


@dataclass(frozen=True)
class Claim:
    """One qualitative statement about a quantity, with the region where it holds (see module doc).

    ``region=None`` means no region is established where it holds (only its counterexamples are checked).
    ``counterexamples`` are ``(point, variant)`` pairs where the check must fail; ``fails_in`` says in words
    where the paper's claim fails.
    """

    id: str
    statement: str
    quantity: Any
    kind: str
    region: Region | None
    wrt: str | None = None
    variant: str = "paper"
    other: Any = None
    op: str = "=="
    degree: float = 0.0
    strict: bool = True
    rtol: float = 1e-9
    line: tuple[Any, Any] | None = None
    line_points: int = 24
    source: str = ""
    fails_in: str = ""
    counterexamples: tuple[tuple[Mapping[str, Any], str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.region is None and not self.counterexamples:
            raise ValueError(f"claim {self.id}: needs a region, counterexamples, or both")


@dataclass(frozen=True)
class Verdict:
    holds: bool
    detail: str


def _clean(point: Mapping[str, Any]) -> Point:
    return {k: v for k, v in point.items() if not k.startswith("_")}


def _evaluate(q: Any, point: Mapping[str, Any], variant: str, **kw: Any) -> tuple[np.ndarray, np.ndarray]:
    ev = q.evaluate(_clean({**point, **kw}), variant=variant)
    value = np.asarray(ev.value, dtype=float)
    ok = np.asarray(ev.admissible, dtype=bool) & np.isfinite(value)
    return value, np.broadcast_to(ok, value.shape)


def _other(claim: Claim, point: Mapping[str, Any], variant: str) -> np.ndarray:
    other = claim.other
    if hasattr(other, "evaluate"):
        return _evaluate(other, point, variant)[0]
    if callable(other):
        return np.asarray(other(_clean(point)), dtype=float)
    return np.asarray(other, dtype=float)


def _line(claim: Claim, point: Mapping[str, Any]) -> np.ndarray:
    wrt = claim.wrt
    assert wrt is not None
    if claim.line is not None:
        lo, hi = (b(point) if callable(b) else b for b in claim.line)
    elif claim.region is not None and wrt in claim.region.ranges:
        lo, hi = claim.region.ranges[wrt][:2]
    else:
        raise ValueError(f"claim {claim.id}: no line range for {wrt}")
    integer = claim.region is not None and wrt in claim.region.integers or claim.kind in (
        "interior_minimum", "beats_upper_end")
    if integer:
        lo_i, hi_i = int(math.ceil(lo)), int(math.floor(hi))
        xs = np.arange(lo_i, hi_i + 1, dtype=float)
        if claim.kind in ("increasing", "decreasing", "unimodal") and len(xs) > 4 * claim.line_points:
            xs = np.unique(np.round(np.linspace(lo_i, hi_i, 4 * claim.line_points)))
        return xs
    if lo > 0 and hi / lo > 50:
        return np.geomspace(lo, hi, claim.line_points)
    return np.linspace(lo, hi, claim.line_points)


def _runs(mask: np.ndarray) -> list[slice]:
    runs, start = [], None
    for i, ok in enumerate(mask):
        if ok and start is None:
            start = i
        if not ok and start is not None:
            runs.append(slice(start, i))
            start = None
    if start is not None:
        runs.append(slice(start, len(mask)))
    return runs


def _monotone(claim: Claim, point: Point, variant: str) -> Verdict:
    xs = _line(claim, point)
    line_point = {**point, claim.wrt: xs}
    value, ok = _evaluate(claim.quantity, line_point, variant)
    region = claim.region
    if region is not None and region.where:
        with np.errstate(all="ignore"):
            for _, pred in region.where:
                ok = ok & np.broadcast_to(np.asarray(pred(line_point), dtype=bool), ok.shape)
    sign = 1.0 if claim.kind == "increasing" else -1.0
    deriv = None
    if hasattr(claim.quantity, "derivative") and claim.wrt in getattr(claim.quantity.notation, "params", {}):
        deriv = np.broadcast_to(_evaluate(claim.quantity.derivative(claim.wrt), line_point, variant)[0],
                                value.shape)
    checked = 0
    for run in _runs(ok):
        v, x = value[run], xs[run]
        if len(v) < 2:
            continue
        checked += len(v)
        diffs = sign * np.diff(v)
        scale = np.maximum(np.abs(v[1:]), np.abs(v[:-1]))
        tol = 1e-11 * scale + 1e-300
        if np.any(diffs < -tol):
            i = int(np.argmax(diffs < -tol))
            return Verdict(False, f"not {claim.kind} in {claim.wrt}: f({x[i]:.6g}) = {v[i]:.10g}, "
                                  f"f({x[i + 1]:.6g}) = {v[i + 1]:.10g}")
        if claim.strict:
            if deriv is not None:
                d = sign * deriv[run]
                if np.any(d <= 0):
                    i = int(np.argmax(d <= 0))
                    return Verdict(False, f"derivative in {claim.wrt} is {deriv[run][i]:.4g} at {x[i]:.6g}")
            elif np.any(diffs <= 0) and np.any(diffs[diffs <= 0] < -tol[diffs <= 0]):
                return Verdict(False, f"not strictly {claim.kind} in {claim.wrt}")
    if checked == 0:
        return Verdict(True, "vacuous: fewer than two admissible points on the line")
    return Verdict(True, f"{claim.kind} on {checked} points in {claim.wrt}")


def _unimodal(claim: Claim, point: Point, variant: str) -> Verdict:
    xs = _line(claim, point)
    line_point = {**point, claim.wrt: xs}
    if hasattr(claim.quantity, "derivative"):
        d, ok = _evaluate(claim.quantity.derivative(claim.wrt), line_point, variant)
        d, ok = np.broadcast_to(d, xs.shape), np.broadcast_to(ok, xs.shape)
        signs = np.sign(d[ok])
        where = xs[ok]
    else:
        v, ok = _evaluate(claim.quantity, line_point, variant)
        signs = np.sign(np.diff(v[ok]))
        where = xs[ok][1:]
    nz = signs != 0
    signs, where = signs[nz], where[nz]
    up = np.flatnonzero((signs[:-1] > 0) & (signs[1:] < 0))
    if up.size:
        x = where[up[0]]
        return Verdict(False, f"not unimodal in {claim.wrt}: a local maximum near {claim.wrt} = {x:.6g}")
    return Verdict(True, f"one sign change at most on {len(xs)} points in {claim.wrt}")


def _integer_argmin(claim: Claim, point: Point, variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs = _line(claim, point)
    value, ok = _evaluate(claim.quantity, {**point, claim.wrt: xs}, variant)
    return xs[ok], value[ok], xs


def _interior_minimum(claim: Claim, point: Point, variant: str) -> Verdict:
    xs, v, _ = _integer_argmin(claim, point, variant)
    if len(xs) == 0:
        return Verdict(False, f"no feasible {claim.wrt}")
    i = int(np.argmin(v))
    what = f"argmin {claim.wrt} = {xs[i]:.0f} (value {v[i]:.10g}; feasible {xs[0]:.0f}..{xs[-1]:.0f})"
    if 0 < i < len(xs) - 1:
        return Verdict(True, "interior: " + what)
    return Verdict(False, "on the edge of the feasible set: " + what)


def _beats_upper_end(claim: Claim, point: Point, variant: str) -> Verdict:
    xs, v, _ = _integer_argmin(claim, point, variant)
    if len(xs) < 2:
        return Verdict(False, f"fewer than two feasible {claim.wrt}")
    i = int(np.argmin(v[:-1]))
    what = (f"best {claim.wrt} < {xs[-1]:.0f} is {xs[i]:.0f} ({v[i]:.10g}) vs {claim.wrt} = {xs[-1]:.0f} "
            f"({v[-1]:.10g})")
    return Verdict(bool(v[i] < v[-1]), what)


_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


def _compare(claim: Claim, point: Point, variant: str) -> Verdict:
    value, ok = _evaluate(claim.quantity, point, variant)
    if not np.all(ok):
        return Verdict(False, f"{claim.quantity.name} is not admissible at this point")
    other = _other(claim, point, variant)
    slack = claim.rtol * np.abs(other)
    if claim.op == "==":
        good = np.isclose(value, other, rtol=claim.rtol, atol=1e-300 + claim.rtol * 1e-3)
    elif claim.op == ">=":
        good = value >= other - slack
    elif claim.op == "<=":
        good = value <= other + slack
    else:
        good = _OPS[claim.op](value, other)
    if np.all(good):
        return Verdict(True, f"{claim.quantity.name} {claim.op} other")
    return Verdict(False, f"{claim.quantity.name} = {np.ravel(value)[0]:.12g} is not {claim.op} "
                          f"{np.ravel(other)[0]:.12g}")


def _homogeneous(claim: Claim, point: Point, variant: str) -> Verdict:
    base, ok = _evaluate(claim.quantity, point, variant)
    for a in (2.0, 3.0):
        scaled, ok2 = _evaluate(claim.quantity, {**point, claim.wrt: point[claim.wrt] * a}, variant)
        if not (np.all(ok) and np.all(ok2)):
            return Verdict(False, "not admissible after scaling")
        if not np.allclose(scaled, a**claim.degree * base, rtol=claim.rtol):
            return Verdict(False, f"f({a:g} {claim.wrt}) = {float(scaled):.12g} != {a:g}^{claim.degree:g} "
                                  f"f = {float(a**claim.degree * base):.12g}")
    return Verdict(True, f"homogeneous of degree {claim.degree:g} in {claim.wrt}")


def _predicate(claim: Claim, point: Point, variant: str) -> Verdict:
    with np.errstate(all="ignore"):
        out = claim.other(_clean(point), variant)
    if isinstance(out, tuple):
        good, detail = out
    else:
        good, detail = out, ""
    return Verdict(bool(np.all(good)), detail or claim.statement)


_CHECKS: dict[str, Callable[[Claim, Point, str], Verdict]] = {
    "increasing": _monotone, "decreasing": _monotone, "unimodal": _unimodal,
    "interior_minimum": _interior_minimum, "beats_upper_end": _beats_upper_end, "compare": _compare,
    "homogeneous": _homogeneous, "predicate": _predicate}


def check_point(claim: Claim, point: Mapping[str, Any], variant: str | None = None) -> Verdict:
    """Does ``claim`` hold at ``point`` (under ``variant``, default the claim's own)?"""
    return _CHECKS[claim.kind](claim, dict(point), claim.variant if variant is None else variant)


@dataclass(frozen=True)
class ClaimReport:
    """Outcome of :func:`check_claim`.  ``status``: 'holds', 'fails in region' (declared and confirmed),
    or 'CONTRADICTED' (the checker disagrees with the declaration: a bug, or a wrong declaration)."""

    id: str
    statement: str
    status: str
    n_points: int
    region_ok: bool
    counterexamples_ok: bool
    detail: str
    fails_in: str = ""
    counterexample: str = ""
    counterexamples: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _show_point(point: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float | int) else f"{k}={v}"
                     for k, v in _clean(point).items())


def check_claim(claim: Claim, n: int = 20, seed: int = 0) -> ClaimReport:
    """Check ``n`` seeded points of the claim's region and every declared counterexample."""
    region_ok, detail, count = True, "", 0
    if claim.region is not None:
        for point in claim.region.sample(n, seed):
            count += 1
            verdict = check_point(claim, point)
            if not verdict.holds:
                region_ok = False
                detail = f"fails at {_show_point(point)}: {verdict.detail}"
                break
    counter_ok, shown = True, []
    for point, variant in claim.counterexamples:
        verdict = check_point(claim, point, variant)
        label = f"{_show_point(point)} [{variant}]: {verdict.detail}"
        shown.append(label)
        if verdict.holds:
            counter_ok = False
            detail = detail or f"counterexample does not fail: {label}"
    if not (region_ok and counter_ok):
        status = "CONTRADICTED"
    elif claim.counterexamples:
        status = "fails in region"
    else:
        status = "holds"
    if not detail:
        detail = f"checked on {count} points" if claim.region is not None else "no region declared"
    return ClaimReport(claim.id, claim.statement, status, count, region_ok, counter_ok, detail,
                       claim.fails_in, "; ".join(shown), tuple(shown))


def check_all(claims: Sequence[Claim], n: int = 20, seed: int = 0) -> list[ClaimReport]:
    """:func:`check_claim` for every claim."""
    return [check_claim(c, n, seed) for c in claims]
