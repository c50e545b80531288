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

__all__ = ["sigma_curve", "table_directory", "SUBSTEPS", "exact_sigma", "two_stage_epsilon", "EXACT_RTOL"]

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


# ---------------------------------------------------------------------------------------------------------
# The exact sigma (issue 23): PLD at q < 1, the analytic Gaussian at q = 1
# ---------------------------------------------------------------------------------------------------------
EXACT_RTOL = 5e-3
"""The calibrated sigma's PLD eps lies in [(1 - EXACT_RTOL) eps, eps]."""
_EXACT: dict[tuple, dict] = {}


def calibrated_exact(setting, ratio: float = 1.0) -> dict[int, dict]:
    """The exact calibrations (:func:`exact_sigma` records) this process already holds for ``setting``'s
    release at ``ratio``, by T: what a figure can draw of the deployed noise without calibrating again."""
    eps, delta = float(setting["eps"]), float(setting["delta"])
    head = (eps, delta, int(setting.get("tau0", 1)), float(setting["q_in"]), float(setting["q_out"]),
            float(ratio))
    return {key[-1]: dict(rec) for key, rec in list(_EXACT.items()) if key[:-1] == head}


def exact_sigma(setting, T: int, ratio: float = 1.0) -> dict:
    """The exact calibration of Theorem 1's release (seed 000 eq. (12): per client ``T tau0`` inner sampled
    Gaussians at (q_in, z) and ``T tau0`` outer ones at (q_out, ratio z)), as a record: ``z`` (inner noise
    multiplier; outer ``ratio z``), ``eps_achieved``, ``method``, ``slack`` (the method's stated error in
    eps), ``discretization``, ``z_rdp`` (Theorem 1's RDP calibration on the tight orders), ``tight``.

    q_in = q_out = 1: the 2 T tau0 Gaussians compose to one of multiplier z / sqrt(T tau0 (1 + ratio^-2))
    (Dong, Roth & Su 2022, Cor. 3.3), so the analytic Gaussian (Balle & Wang 2018, Thm 8) is exact.
    Otherwise dp-accounting's PLD (pessimistic, connect the dots) at the discretisation whose stated error
    steps x disc is 1 % of eps (:func:`fedbound.accounting.pld.discretization_for_target`), z the smallest
    with PLD eps in [(1 - EXACT_RTOL) eps, eps] (one mechanism of 2 T tau0 steps where both stages are
    equal: :func:`~fedbound.accounting.pld.pld_calibrate`; else the two stages' PLDs composed, a safeguarded
    secant on log z), so never above the target.  Where PLD is too costly, the RDP calibration, labelled
    valid (not tight).  The one source of DP-PFL's tight sigma: the planner and ``fedbound train``'s
    ``noise = "tight"`` call it.  Kept in memory and across runs (the compiled-formula cache, keyed by the
    inputs, this file, accounting/pld.py and dp-accounting's version)."""
    eps, delta = float(setting["eps"]), float(setting["delta"])
    tau0, q_in, q_out = int(setting.get("tau0", 1)), float(setting["q_in"]), float(setting["q_out"])
    key = (eps, delta, tau0, q_in, q_out, float(ratio), int(T))
    if key not in _EXACT:
        if q_in == q_out == 1.0:
            _EXACT[key] = _calibrate_exact(*key)
        else:
            import importlib.metadata
            import importlib.util

            from fedbound.bounds.compiled import cached_json, fingerprint

            pld_file = importlib.util.find_spec("fedbound.accounting.pld").origin
            version = importlib.metadata.version("dp-accounting")
            tag = f"dppfl-exact|{fingerprint(__file__, pld_file)}|{version}|{key!r}"
            _EXACT[key] = cached_json(tag, lambda: _calibrate_exact(*key))
    return dict(_EXACT[key])


def _calibrate_exact(eps: float, delta: float, tau0: int, q_in: float, q_out: float, ratio: float,
                     T: int) -> dict:
    from fedbound.accounting.pld import PldTooCostly, discretization_for, discretization_for_target
    from fedbound.scheduling.dppfl import sigma_curve as rdp_curve

    setting = {"eps": eps, "delta": delta, "tau0": tau0, "q_in": q_in, "q_out": q_out}
    z_rdp = float(rdp_curve(setting, np.array([T]), "tight", ratio)[0])
    k = T * tau0
    if q_in == q_out == 1.0:  # z_rdp is the analytic Gaussian's already (scheduling.dppfl._sigma_one)
        return {"z": z_rdp, "eps_achieved": eps, "method": "analytic Gaussian, exact", "slack": 0.0,
                "discretization": None, "z_rdp": z_rdp, "tight": True}
    want = discretization_for_target(eps, 2 * k)
    try:
        if q_in == q_out and ratio == 1.0:
            from fedbound.accounting.pld import pld_calibrate, pld_epsilon_fast

            # pld_epsilon_fast: dp-accounting's eps, the same floats, at about a third of the cost
            z, eps_pld = pld_calibrate(eps, delta, q_in, 2 * k, want, z_rdp, rtol=EXACT_RTOL,
                                       evaluate=pld_epsilon_fast)
        else:
            z, eps_pld = _two_stage_calibrate(eps, delta, k, q_in, q_out, ratio, want, z_rdp)
        disc = float(discretization_for(min(z, ratio * z), max(q_in, q_out), 2 * k, want))
    except PldTooCostly as exc:
        return {"z": z_rdp, "eps_achieved": None, "slack": 0.0,
                "method": f"RDP (an upper bound: PLD too costly here, {exc})", "discretization": None,
                "z_rdp": z_rdp, "tight": False}
    return {"z": float(z), "eps_achieved": float(eps_pld), "slack": 2 * k * disc, "discretization": disc,
            "z_rdp": z_rdp, "tight": bool(eps_pld >= 0.99 * eps),
            "method": f"PLD (dp-accounting), discretisation {disc:.0e}"}


def two_stage_epsilon(z: float, delta: float, k: int, q_in: float, q_out: float, ratio: float,
                      discretization: float) -> float:
    """PLD eps (pessimistic) of k sampled Gaussians at (q_in, z) composed with k at (q_out, ratio z), the
    discretisation coarsened where PLD would be too costly: the training ledger's own composition
    (:func:`fedbound.accounting.pld.composed_pld_epsilon`), so a z calibrated here re-accounts to the same
    eps there."""
    from fedbound.accounting.pld import composed_pld_epsilon

    return composed_pld_epsilon(((q_in, z, k), (q_out, ratio * z, k)), None, delta, math.inf,
                                discretization=discretization)[0]


_TWO_STAGE_START: dict[tuple, tuple[float, float]] = {}
"""(delta, q_in, q_out, ratio) -> (log(z / z_rdp), d log eps / d log z) of the last two-stage calibration."""


def _two_stage_calibrate(eps: float, delta: float, k: int, q_in: float, q_out: float, ratio: float,
                         disc: float, z_rdp: float, max_evaluations: int = 40) -> tuple[float, float]:
    """The smallest z with :func:`two_stage_epsilon` in [(1 - EXACT_RTOL) eps, eps]: secant steps on
    log eps_pld(e^x) - log eps from the last calibration's ratio to the RDP answer and its slope (else 0.88
    and -1.5), Illinois once the root is bracketed; only an evaluated point that meets the target is
    returned.  PldTooCostly where no such point is found."""
    from fedbound.accounting.pld import PldTooCostly

    aim, floor = math.log1p(-EXACT_RTOL / 2), math.log1p(-EXACT_RTOL)
    seen: dict[float, float] = {}  # x -> log eps_pld - log eps
    spent: dict[float, float] = {}  # x -> eps_pld, as evaluated

    def g(x: float) -> float:
        spent[x] = two_stage_epsilon(math.exp(x), delta, k, q_in, q_out, ratio, disc)
        seen[x] = math.log(max(spent[x], 1e-300)) - math.log(eps)
        return seen[x]

    skey = (delta, q_in, q_out, ratio)
    ratio0, slope = _TWO_STAGE_START.get(skey, (math.log(0.88), -1.5))
    x, lo, hi, side = math.log(z_rdp) + ratio0, -math.inf, math.inf, 0
    f_lo = f_hi = 0.0
    for _ in range(max_evaluations):
        fx = g(x) - aim
        if floor <= fx + aim <= 0:
            break
        if fx + aim <= 0:
            hi, f_hi = x, fx
            f_lo, side = (f_lo / 2 if side == 1 else f_lo), 1
        else:
            lo, f_lo = x, fx
            f_hi, side = (f_hi / 2 if side == -1 else f_hi), -1
        if math.isfinite(lo) and math.isfinite(hi):
            x = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
            x = x if lo < x < hi else 0.5 * (lo + hi)
        else:
            if len(seen) > 1:
                (x0, v0), (x1, v1) = list(seen.items())[-2:]
                slope = (v1 - v0) / (x1 - x0) if v1 != v0 and x1 != x0 and v1 < v0 else slope
            x = x - max(min(fx / slope, 0.3), -0.3)
    ok = [x for x, v in seen.items() if floor <= v <= 0] or [x for x, v in seen.items() if v <= 0]
    if not ok:
        raise PldTooCostly("noise_multiplier", z_rdp, "a value PLD meets the target at",
                           f"no two-stage noise multiplier meeting eps = {eps:g} found")
    best = min(ok)
    _TWO_STAGE_START[skey] = (best - math.log(z_rdp), slope)
    return math.exp(best), spent[best]
