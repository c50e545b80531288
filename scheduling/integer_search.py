"""Certified 1-D integer minimisation, vectorised over a grid of settings.

Two methods, both returning a :class:`~fedbound.scheduling.results.Optimum` certificate (like scipy's
``OptimizeResult``):

* :func:`unimodal_integer_min`: for a function known to be strictly quasi-convex (one sign change of its
  derivative, from - to +).  Vectorised bisection on the derivative finds the continuous minimiser, the
  better of its floor and ceiling is the integer minimiser; the certificate holds the bracket, the values
  at x*-1, x*, x*+1 and the sign of the derivative at both ends of the bracket.
* :func:`exhaustive_integer_min`: every integer in a range, feasibility masks allowed; the certificate says
  where the feasible set starts and ends and whether the argmin sits on its edge.

Settings are arrays that broadcast together (shape ``S``); the functions passed in receive ``x`` with shape
``(n, *S)`` or ``S`` and must broadcast.  Ties go to the smaller integer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fedbound.errors import InfeasibleError
from fedbound.scheduling.results import Optimum

__all__ = ["Optimum", "unimodal_integer_min", "exhaustive_integer_min", "expand_bracket",
           "bisect_sign_change"]

ArrayFn = Callable[[np.ndarray], np.ndarray]


def _scalar(x: Any) -> Any:
    arr = np.asarray(x)
    if arr.ndim == 0:
        return arr.item()
    return arr


def expand_bracket(df: ArrayFn, lo: np.ndarray, hi: np.ndarray, max_doublings: int = 60) -> np.ndarray:
    """Grow ``hi`` (doubling the distance to ``lo``) until ``df(hi) > 0`` everywhere it can."""
    hi = np.array(hi, dtype=float, copy=True)
    for _ in range(max_doublings):
        grow = ~(df(hi) > 0)
        if not grow.any():
            break
        hi = np.where(grow, lo + 2 * (hi - lo), hi)
    return hi


def bisect_sign_change(df: ArrayFn, lo: np.ndarray, hi: np.ndarray, xtol: float = 1e-10,
                       max_iter: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised bisection for the point where ``df`` changes sign from <= 0 to > 0 in ``[lo, hi]``.

    Returns ``(root, lo, hi)`` with the final bracket.  Where ``df(lo) > 0`` the root is ``lo``; where
    ``df(hi) <= 0`` it is ``hi`` (no sign change: the caller reports it).
    """
    a = np.array(lo, dtype=float, copy=True)
    b = np.array(hi, dtype=float, copy=True)
    for _ in range(max_iter):
        if np.all(b - a <= xtol * np.maximum(1.0, np.abs(b))):
            break
        mid = 0.5 * (a + b)
        pos = df(mid) > 0
        b = np.where(pos, mid, b)
        a = np.where(pos, a, mid)
    return 0.5 * (a + b), a, b


def unimodal_integer_min(f: ArrayFn, df: ArrayFn, lo: Any, hi: Any, *, x_min: int = 1,
                         expand: bool = True, proof: str = "") -> Optimum:
    """Integer minimiser of a strictly quasi-convex ``f`` on ``[x_min, inf)`` by bisection on ``df``.

    ``[lo, hi]`` should bracket the sign change of ``df`` (``expand=True`` grows ``hi`` if it does not).
    ``proof`` names why ``f`` is quasi-convex; it goes into the certificate's message.
    """
    lo_arr, hi_arr = np.broadcast_arrays(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    lo_arr, hi_arr = lo_arr.copy(), hi_arr.copy()
    if expand:
        hi_arr = expand_bracket(df, lo_arr, hi_arr)
    d_lo, d_hi = df(lo_arr), df(hi_arr)
    root, _, _ = bisect_sign_change(df, lo_arr, hi_arr)
    candidates = np.stack([np.floor(root), np.ceil(root)])
    candidates = np.maximum(candidates, x_min)
    values = f(candidates)
    pick = np.where(values[1] < values[0], 1, 0)
    x = np.take_along_axis(candidates, pick[None], axis=0)[0]
    fun = np.take_along_axis(values, pick[None], axis=0)[0]
    below = np.where(x - 1 >= x_min, f(np.maximum(x - 1, x_min)), np.inf)
    above = f(x + 1)
    sign_change = (d_lo <= 0) & (d_hi > 0)
    local = (fun <= below) & (fun <= above)
    success = sign_change & local & np.isfinite(fun)
    msg = ("integer minimiser of a strictly quasi-convex function: bisection on the derivative's unique sign "
           "change, then the better of floor/ceil" + (f" ({proof})" if proof else ""))
    if not np.all(success):
        msg += f"; certificate FAILED at {int(np.size(success) - np.sum(success))} setting(s)"
    return Optimum(
        x=_scalar(x.astype(np.int64)), fun=_scalar(fun), success=_scalar(success), message=msg,
        method="bisection on f' + integer rounding", bracket=(_scalar(lo_arr), _scalar(hi_arr)),
        fun_below=_scalar(below), fun_above=_scalar(above), at_lower_edge=_scalar(x <= x_min),
        at_upper_edge=_scalar(np.zeros_like(x, dtype=bool)), x_continuous=_scalar(root),
        evidence={"derivative_at_lo": _scalar(d_lo), "derivative_at_hi": _scalar(d_hi)})


def exhaustive_integer_min(f: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], lo: int, hi: int,
                           *, what: str = "x") -> Optimum:
    """Minimise over every integer in ``[lo, hi]``; ``f(x)`` returns ``(values, feasible)``.

    ``x`` is passed with shape ``(n, 1, ..., 1)`` so that it broadcasts against the settings; ``f`` returns
    arrays of shape ``(n, *S)``.  Infeasible points never win; settings with no feasible point get
    ``success=False`` (and ``x`` = -1).  Raises InfeasibleError only for a scalar problem with no feasible
    point.
    """
    if hi < lo:
        raise InfeasibleError(f"empty search range for {what}: [{lo}, {hi}]")
    xs = np.arange(lo, hi + 1, dtype=float)
    values, feasible = f(xs)
    values = np.asarray(values, dtype=float)
    feasible = np.asarray(feasible, dtype=bool) & np.isfinite(values)
    shape = np.broadcast_shapes(values.shape, feasible.shape)
    values = np.broadcast_to(values, shape)
    feasible = np.broadcast_to(feasible, shape)
    masked = np.where(feasible, values, np.inf)
    idx = np.argmin(masked, axis=0)
    any_feasible = feasible.any(axis=0)
    first = np.argmax(feasible, axis=0)
    last = len(xs) - 1 - np.argmax(feasible[::-1], axis=0)
    fun = np.take_along_axis(masked, idx[None], axis=0)[0]
    pad = np.full((1, *shape[1:]), np.inf)
    padded = np.concatenate([pad, masked, pad])
    below = np.take_along_axis(padded, idx[None], axis=0)[0]
    above = np.take_along_axis(padded, idx[None] + 2, axis=0)[0]
    x = np.where(any_feasible, xs[idx], -1).astype(np.int64)
    if not np.ndim(x) and not any_feasible:
        raise InfeasibleError(f"no feasible {what} in [{lo}, {hi}]")
    n_feasible = feasible.sum(axis=0)
    msg = f"exhaustive search over every integer {what} in [{lo}, {hi}]"
    return Optimum(
        x=_scalar(x), fun=_scalar(np.where(any_feasible, fun, np.inf)), success=_scalar(any_feasible),
        message=msg, method="exhaustive", bracket=(lo, hi), fun_below=_scalar(below),
        fun_above=_scalar(above), at_lower_edge=_scalar(any_feasible & (idx == first)),
        at_upper_edge=_scalar(any_feasible & (idx == last)),
        evidence={"first_feasible": _scalar(np.where(any_feasible, xs[first], -1).astype(np.int64)),
                  "last_feasible": _scalar(np.where(any_feasible, xs[last], -1).astype(np.int64)),
                  "n_feasible": _scalar(n_feasible), "n_searched": len(xs)})
