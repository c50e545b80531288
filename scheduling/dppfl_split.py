"""DP-PFL's rounds T and inner/outer budget split r = sigma_out/sigma_in chosen jointly (issue 23, item 2).

With ``outer_noise`` (E18: the bound sees both stages' noise) the plan minimises
Phi(T, r) = bound(T, sigma_in*(T, r), r sigma_in*(T, r)), both multipliers calibrated together by Theorem 1
(DP-PFL eq. (12)), over T and r jointly, instead of r after T.  Method: the profile P(r) = min over T of
Phi(T, r), each min the exhaustive, exact T scan of :func:`fedbound.scheduling.dppfl.optimal_T` (C profiled
out too), minimised over r in ``r_bounds`` by branch and bound on log r, which proves the result global
(up to the stated gap): for r in [r1, r2] and every T,

* sigma_in(T, r) >= sigma_in(T, r2): more outer noise needs no more inner noise for the same (eps, delta);
* sigma_out(T, r) = r sigma_in(T, r) >= r1 sigma_in(T, r1): if it were smaller at some r > r1, both noises
  would be below the pair at r1, which is on the privacy boundary (eps strictly decreasing in each);
* the bound is increasing in both noise multipliers at every C, so its infimum over C at (sigma_in(T, r2),
  r1 sigma_in(T, r1)) is below Phi(T, r).  With outer_noise the bound depends on C only through
  a (eta L k Theta_1(C) sigma_eff + f_C), sigma_eff = sigma_in + sigma_out / (a eta L) (Lemma 4 (26) plus
  Theta^S, E18), so that infimum is Lemma 4's candidate set at sigma_eff
  (:func:`fedbound.scheduling.dppfl.clip_sigma`, which Phi profiles C at too).  Where C -> 0+ wins already
  at the interval's least noise, Phi keeps the setting's C at every r of it (more noise only favours C -> 0+
  more), and the bound at that C is used instead (still below Phi);
* T beyond the point where that lower bound's noise-only part (Delta0 = 0, non-decreasing in T) reaches its
  least value cannot lower it (:func:`fedbound.scheduling.certificate.scan_until_turned`).

So LB(r1, r2) = min over T of that bound is a lower bound on P over [r1, r2]; an interval is dropped once
LB reaches the incumbent, split at its geometric middle otherwise, and the search ends when every interval
left is narrower than ``xtol`` in log r; the certificate states the remaining gap (incumbent - least LB).
It starts from r = 1 (the paper's 50/50) and a 5-point log grid of r.

The optimum does not separate in general: at q < 1 the sampled-Gaussian RDP is not a function of
1/sigma_in^2 + 1/sigma_out^2, so the best r moves with T; :func:`optimal_T_split` reports r at the separate
answer (T*(r = 1), then r) beside the joint one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.scheduling.results import Optimum

__all__ = ["optimal_T_split", "split_at_T", "R_BOUNDS", "R_GRID", "XTOL", "GAP"]

R_BOUNDS = (1e-2, 1e2)
R_GRID = 5
"""Points of the starting log grid of r (plus r = 1)."""
XTOL = 1e-2
"""Width in log r below which an interval is no longer split (its lower bound's gap is stated)."""
GAP = 1e-3
"""An interval whose lower bound is within this relative gap of the incumbent is dropped (stated)."""


def _lower(settings: Mapping[str, Any], variant: str, r1: float, r2: float, T: int | None = None,
           method: str = "tight") -> float:
    """LB(r1, r2) of the module docstring: min over every T of the bound's infimum over C at
    (sigma_in(T, r2), r1 sigma_in(T, r1)); ``T`` given: at that T and the setting's C (what
    :func:`fedbound.scheduling.dppfl.optimal_split` minimises)."""
    from fedbound.scheduling.certificate import scan_until_turned
    from fedbound.scheduling.dppfl import (
        SCAN_CHUNK,
        T_SEARCH_MAX,
        bound_curve,
        clip_profile,
        clip_sigma,
        sigma_curve,
    )

    eta_L = float(settings["eta"]) * float(settings["L"])
    tiny = 1e-12 * max(1.0, (1 + eta_L) ** 2, float(settings["B"]) ** 2)  # clip_profile's C -> 0+

    def at(T: np.ndarray, floor: bool, fixed_C: bool = False) -> np.ndarray:
        s_in = sigma_curve(settings, T, method, r2)
        s_out = r1 * sigma_curve(settings, T, method, r1)
        # where C* -> 0+ already at the least noise, Phi keeps the setting's C for every r here (more noise
        # only favours C -> 0+ more); elsewhere the infimum over C at sigma_eff
        eff = clip_sigma(settings, s_in, s_out / s_in, variant)
        best_C = clip_profile({**settings, "C": tiny}, eff, variant)
        C = np.where((best_C == tiny) | fixed_C, float(settings["C"]), best_C)
        at_s = {**settings, "C": C, **({"Delta0": 0.0} if floor else {})}
        ev = bound_curve(at_s, T, s_in, variant, s_out / s_in)
        vals = np.asarray(ev.value, dtype=float)
        return vals if floor else np.where(np.asarray(ev.admissible, bool) & np.isfinite(vals), vals, np.inf)

    if T is not None:
        return float(at(np.array([int(T)]), False, True)[0])
    return float(scan_until_turned(lambda T: at(T, False), lambda T: at(T, True), maximum=T_SEARCH_MAX,
                                   chunk=SCAN_CHUNK).fun)


def _branch_and_bound(value, lower, r_bounds: tuple[float, float], grid: int,
                      xtol: float) -> tuple[dict[float, float], int, float]:
    """({r: value(r)} evaluated, interval bounds computed, stated relative gap): the module docstring's
    search on log r."""
    vals: dict[float, float] = {}
    start = sorted({*np.exp(np.linspace(math.log(r_bounds[0]), math.log(r_bounds[1]), grid)).tolist(), 1.0})
    for r in start:
        vals[r] = value(r)
    intervals = list(zip(start[:-1], start[1:], strict=True))
    residual, nodes = -math.inf, 0
    while intervals:
        best = min(vals.values())
        r1, r2 = intervals.pop()
        lb = lower(r1, r2)
        nodes += 1
        if lb >= best * (1 - GAP):
            continue
        if math.log(r2 / r1) <= xtol:  # narrow enough: what is left is the stated gap
            residual = max(residual, (best - lb) / abs(best))
            continue
        mid = math.sqrt(r1 * r2)
        vals[mid] = value(mid)
        intervals += [(r1, mid), (mid, r2)]
    return vals, nodes, max(residual, GAP)


def split_at_T(settings: Mapping[str, Any], variant: str, method: str = "tight",
               r_bounds: tuple[float, float] = R_BOUNDS, xtol: float = XTOL) -> tuple[float, float, str, int]:
    """(r, bound, how, evaluations): the split at the setting's T and C minimising the bound with both stages'
    noise (outer_noise), global over ``r_bounds`` by the module docstring's branch and bound (at one T)."""
    from fedbound.scheduling.dppfl import bound_curve, sigma_curve

    T = int(settings["T"])

    def value(r: float) -> float:
        sig = sigma_curve(settings, np.array([T]), method, r)
        ev = bound_curve(settings, T, float(sig[0]), variant, r)
        return float(ev.value) if bool(np.asarray(ev.admissible)) else math.inf

    vals, nodes, gap = _branch_and_bound(value, lambda a, b: _lower(settings, variant, a, b, T, method),
                                         r_bounds, R_GRID, xtol)
    r = min(vals, key=lambda x: (vals[x], abs(math.log(x))))
    how = (f"branch and bound on log r over [{r_bounds[0]:g}, {r_bounds[1]:g}] at T = {T} (lower bound on "
           f"[r1, r2]: the bound at sigma_in(r2) and r1 sigma_in(r1); {len(vals)} calibrations, {nodes} "
           f"interval bounds): global to {xtol:g} in log r, the bound within a relative gap of {gap:.1e}")
    return r, vals[r], how, len(vals)


def optimal_T_split(settings: Mapping[str, Any], variant: str, r_bounds: tuple[float, float] = R_BOUNDS,
                    grid: int = R_GRID, xtol: float = XTOL) -> tuple[Optimum, Optimum]:
    """(T optimum at the joint argmin, split optimum) of Phi(T, r) (module docstring)."""
    from fedbound.scheduling.dppfl import optimal_T

    runs: dict[float, Optimum] = {}

    def profile(r: float) -> float:
        if r not in runs:
            runs[r] = optimal_T(settings, variant, "tight", ratio=r, joint_C=True)
        return float(runs[r].fun)

    _, nodes, gap = _branch_and_bound(profile, lambda a, b: _lower(settings, variant, a, b), r_bounds, grid,
                                      xtol)
    r_best = min(runs, key=lambda r: (runs[r].fun, abs(math.log(r))))
    t_best, t_50 = runs[r_best], runs[1.0]
    separate = float(t_50.x)  # the separate answer: T*(r = 1), then r at that T
    how = (f"(T, r) jointly: the exact T scan at each r, branch and bound on log r over [{r_bounds[0]:g}, "
           f"{r_bounds[1]:g}] (lower bound on [r1, r2]: the bound at sigma_in(T, r2) and r1 sigma_in(T, r1), "
           f"C at its infimum; {len(runs)} T scans, {nodes} interval bounds): r is the global optimum "
           f"to {xtol:g} in log r, the bound within a relative gap of {gap:.1e}")
    split = Optimum(
        x=r_best, fun=float(t_best.fun), success=True, method="joint (T, r): branch and bound on r",
        message=f"sigma_out/sigma_in = {r_best:.6g} at T = {int(t_best.x)} (50/50 gives "
                f"{float(t_50.fun):.6g} at T = {int(t_50.x)}, this gives {float(t_best.fun):.6g})",
        at_lower_edge=bool(r_best <= r_bounds[0] * 1.001), at_upper_edge=bool(r_best >= r_bounds[1] / 1.001),
        evidence={"bound_50_50": float(t_50.fun), "T_50_50": int(t_50.x), "T_separate": separate,
                  "sigma_in": float(t_best.evidence["sigma_at_T_opt"]),
                  "sigma_out": r_best * float(t_best.evidence["sigma_at_T_opt"]),
                  "scans": len(runs), "interval_bounds": nodes, "gap": gap, "searched": how,
                  "profile": {f"{r:.6g}": float(runs[r].fun) for r in sorted(runs)}})
    t_opt = Optimum(
        x=t_best.x, fun=t_best.fun, success=t_best.success, message=f"{t_best.message}; {how}",
        method=t_best.method, bracket=t_best.bracket, fun_below=t_best.fun_below, fun_above=t_best.fun_above,
        at_lower_edge=t_best.at_lower_edge, at_upper_edge=t_best.at_upper_edge, x_continuous=None,
        evidence={**t_best.evidence, "ratio": r_best, "joint_split": how})
    return t_opt, split
