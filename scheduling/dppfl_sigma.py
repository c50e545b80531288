"""DP-PFL's sigma*(T) over a whole grid of T in one call, from tabulated sampled-Gaussian RDP (issue 25).

Theorem 1 (seed 000 eq. (12)): (eps, delta) holds at (sigma_in, sigma_out = r sigma_in) after T rounds iff
some order alpha has T tau0 R_alpha(sigma_in) + off_alpha(delta) <= eps, R_alpha the per-step RDP of both
stages, R_alpha(s) = R^{q_in}_alpha(s) + R^{q_out}_alpha(r s), and off the conversion (34).  So the largest
T that a noise multiplier s supports is T_max(s) = max_alpha B_alpha / (tau0 R_alpha(s)), B_alpha = max(eps -
off_alpha, KL budget), increasing in s, and sigma*(T) = min{s : T_max(s) >= T} = min over alpha of the roots
of tau0 T R_alpha(s) = B_alpha: the inverse of one monotone curve.

:func:`sigma_curve` evaluates ln T_max on a lattice of ln s (step ln 2 / 16) from
:class:`~fedbound.accounting.rdp_table.RdpTable` (the exact RDP as Chebyshev series, error <= 1e-10 in ln R,
checked when built; tables depend on q and the orders only, so a re-plan at another eps, delta or T reuses
them, also across runs through the disk cache), brackets every T between two lattice points, and solves
the per-order equations of the orders feasible at the bracket's top by safeguarded Newton on the series
(every order that can attain the minimum is solved: no window, no heuristic), then steps past the least
root by TOLERANCE / slope so that the exact RDP meets eps there too.  The result matches the
point-by-point calibration :func:`fedbound.bounds.dppfl.noise_multiplier_curve` to ~1e-12 (tests: rtol 1e-9).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from fedbound.accounting.rdp_table import SEGMENT, TOLERANCE, Z_MAX, OutsideTable, table

__all__ = ["sigma_curve", "table_directory", "SUBSTEPS"]

SUBSTEPS = 8
"""Lattice points per table segment (lattice step ln 2 / 16 in ln sigma)."""
_UTOL = 1e-13
"""Root tolerance in ln sigma (the series themselves are within 1e-10 of ln R, i.e. ~5e-11 in ln sigma)."""


def table_directory() -> Path | None:
    """Where the RDP tables are kept across runs: beside the compiled formulas (``$FEDBOUND_CACHE_DIR``;
    empty: none)."""
    from fedbound.bounds.compiled import cache_dir

    root = cache_dir()
    return None if root is None else root / "rdp_tables"


class _Curve:
    """ln T_max(u) pieces for one (eps, delta, tau0, q_in, q_out, ratio, orders)."""

    def __init__(self, eps, delta, tau0, q_in, q_out, ratio, orders, directory):
        from fedbound.accounting.rdp import conversion_offset, kl_budget

        self.orders = np.asarray(orders, dtype=float)
        self.t_in = table(q_in, self.orders, directory)
        self.t_out = table(q_out, self.orders, directory)
        self.shift = math.log(ratio)
        self.same = q_in == q_out and ratio == 1.0
        budget = np.maximum(eps - conversion_offset(self.orders, np.asarray(delta)), kl_budget(delta))
        with np.errstate(divide="ignore"):
            self.log_b = np.where(budget > 0, np.log(budget), -np.inf) - math.log(tau0)
        self.lattice: dict[int, np.ndarray] = {}  # segment k -> H at its SUBSTEPS lattice points

    def h(self, u: np.ndarray, cols: np.ndarray, derivative: bool = False):
        """H_alpha(u) = ln B_alpha - ln tau0 - ln R_alpha(e^u) (and dH/du)."""
        a = self.t_in.log_rdp(u, cols, derivative)
        if self.same:
            (la, da) = a if derivative else (a, None)
            val = self.log_b[cols] - la - math.log(2.0)
            return (val, -da) if derivative else val
        b = self.t_out.log_rdp(u + self.shift, cols, derivative)
        if not derivative:
            return self.log_b[cols] - np.logaddexp(a, b)
        (la, da), (lb, db) = a, b
        tot = np.logaddexp(la, lb)
        return self.log_b[cols] - tot, -(da * np.exp(la - tot) + db * np.exp(lb - tot))

    def points(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(u, max_alpha H) at segment k's lattice points, and the full H there."""
        if k not in self.lattice:
            u = (k + np.arange(SUBSTEPS) / SUBSTEPS) * SEGMENT
            cols = np.broadcast_to(np.arange(self.orders.size), (SUBSTEPS, self.orders.size))
            self.lattice[k] = self.h(np.broadcast_to(u[:, None], cols.shape), cols)
        return (k + np.arange(SUBSTEPS) / SUBSTEPS) * SEGMENT, self.lattice[k]


_CURVES: dict[tuple, _Curve] = {}


def _segment_of(curve: _Curve, log_t: float, eps: float, delta: float, tau0: int) -> int:
    """The least segment k whose last lattice point supports T = e^log_t (monotone in k): doubling strides
    from k = 0, then bisection, so only O(log) segments are built on the way."""
    top = math.floor((math.log(Z_MAX) - SEGMENT) / SEGMENT)

    def ok(k: int) -> bool:
        if k > top:
            raise OutsideTable(f"eps = {eps:g} at delta = {delta:g} needs a noise multiplier above {Z_MAX:g} "
                               f"(T = {math.exp(log_t):.0f}, tau0 = {tau0})")
        return bool(curve.points(k)[1][-1].max() >= log_t)

    step, k = 1, 0
    if ok(0):  # go down until infeasible
        while ok(k - step):
            k, step = k - step, 2 * step
        lo, hi = k - step, k
    else:  # go up until feasible
        while not ok(min(k + step, top + 1)):
            k, step = k + step, 2 * step
        lo, hi = k, min(k + step, top + 1)
    while hi - lo > 1:  # invariant: ok(hi), not ok(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def sigma_curve(eps: float, delta: float, T, tau0: int, q_in: float, q_out: float, ratio: float = 1.0,
                orders=None, directory: Path | None = None) -> np.ndarray:
    """sigma*_in(T) (Theorem 1, seed 000 eq. (12)) for an array of integer T >= 1, vectorised (module
    docstring).  Inputs are trusted (checked by the caller, :func:`fedbound.scheduling.dppfl.sigma_curve`)."""
    from fedbound.bounds.dppfl import OPACUS_ORDERS

    Ts = np.asarray(T, dtype=float)
    shape, Tf = Ts.shape, Ts.ravel()
    if Tf.size == 0:
        return np.zeros(shape)
    o = np.asarray(OPACUS_ORDERS if orders is None else orders, dtype=float)
    key = (float(eps), float(delta), int(tau0), float(q_in), float(q_out), float(ratio), o.tobytes(),
           str(directory))
    curve = _CURVES.pop(key, None) or _Curve(*key[:6], o, directory)
    _CURVES[key] = curve  # most recent last; a T scan calls once per chunk of T with the same setting
    while len(_CURVES) > 16:
        del _CURVES[next(iter(_CURVES))]
    log_t = np.log(Tf)
    lo_t, hi_t = float(log_t.min()), float(log_t.max())
    k_lo = _segment_of(curve, lo_t, eps, delta, tau0)
    k_hi = _segment_of(curve, hi_t, eps, delta, tau0)
    k_lo -= 1  # the lattice starts below every root (a segment's first point may already be feasible)
    us, hs = zip(*(curve.points(k) for k in range(k_lo, k_hi + 1)), strict=True)
    u = np.concatenate(us)
    H = np.concatenate(hs)  # (lattice, orders)
    top = np.maximum.accumulate(H.max(axis=1))  # ln T_max on the lattice (monotone; accumulate: rounding)
    j = np.searchsorted(top, log_t, side="left")  # first lattice point feasible for T: root in (u[j-1], u[j]]
    rows, cols = np.nonzero(H[j] >= log_t[:, None])  # the orders feasible at the bracket's top
    jr = j[rows]
    lo, hi = u[jr - 1], u[jr]
    target = log_t[rows]
    g_lo = H[jr - 1, cols] - target  # < 0 or the order was already feasible below (then its root <= lo)
    g_hi = H[jr, cols] - target  # >= 0
    x = np.where(g_lo < 0, lo - g_lo * (hi - lo) / np.where(g_hi > g_lo, g_hi - g_lo, 1.0), lo)
    hi = np.where(g_lo < 0, hi, lo)
    live = np.flatnonzero(g_lo < 0)
    for _ in range(60):  # safeguarded Newton on the series (bracketed: every iterate stays in [lo, hi])
        ceiling = np.full(Tf.size, np.inf)  # each T's least upper end: no order whose root is above it wins
        np.minimum.at(ceiling, rows, hi)
        live = live[(lo[live] <= ceiling[rows[live]]) & (hi[live] - lo[live] > _UTOL)]
        if not live.size:
            break
        val, der = curve.h(x[live], cols[live], derivative=True)
        val = val - target[live]
        neg = val < 0
        lo[live[neg]] = x[live[neg]]
        hi[live[~neg]] = x[live[~neg]]
        with np.errstate(divide="ignore", invalid="ignore"):
            step = x[live] - val / der
        bad = ~np.isfinite(step) | (step <= lo[live]) | (step >= hi[live])
        new = np.where(bad, 0.5 * (lo[live] + hi[live]), step)
        close = np.abs(new - x[live]) <= _UTOL / 4
        x[live] = new
        # a Newton step below _UTOL/4: the root is within it; close the bracket there
        lo[live[close]] = hi[live[close]] = new[close]
    first = np.lexsort((hi, rows))  # pairs by T, then by root (the feasible end of each bracket)
    win = first[np.r_[True, rows[first][1:] != rows[first][:-1]]]  # each T's least root
    _, der = curve.h(hi[win], cols[win], derivative=True)
    # the series are within TOLERANCE of ln R: step past the root by TOLERANCE / slope, so that the exact
    # RDP at the returned sigma meets eps too (the point-by-point calibration's feasible side)
    root = hi[win] + np.where(np.isfinite(der), TOLERANCE / np.maximum(der, 1e-3), 0.0)  # NaN: exact RDP
    out = np.empty(Tf.size)
    out[rows[win]] = np.exp(root)
    return out.reshape(shape)


def epsilon(T: int, tau0: int, q_in: float, sigma_in: float, q_out: float, sigma_out: float, delta: float,
            orders=None, directory: Path | None = None) -> tuple[float, float, float, float]:
    """(eps_DP, alpha*, inner RDP, outer RDP at alpha*) of Theorem 1 (seed 000 eq. (12), conversion (34)) from
    the tables (each ln R within 1e-10 of the exact value): the point-by-point
    :func:`fedbound.bounds.dppfl.rdp_pfl_epsilon` without evaluating the sampled Gaussian."""
    from fedbound.accounting.rdp import rdp_to_dp
    from fedbound.bounds.dppfl import OPACUS_ORDERS

    o = np.asarray(OPACUS_ORDERS if orders is None else orders, dtype=float)
    cols = np.arange(o.size)
    steps = int(T) * int(tau0)
    r_in = steps * np.exp(table(q_in, o, directory).log_rdp(np.full(o.size, math.log(sigma_in)), cols))
    r_out = steps * np.exp(table(q_out, o, directory).log_rdp(np.full(o.size, math.log(sigma_out)), cols))
    eps, alpha = rdp_to_dp(o, r_in + r_out, delta, return_order=True)
    j = int(np.argmin(np.abs(o - alpha)))
    return float(eps), float(alpha), float(r_in[j]), float(r_out[j])
