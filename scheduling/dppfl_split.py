"""DP-PFL's rounds T and inner/outer budget split r = sigma_out/sigma_in chosen jointly (issue 23, item 2).

With ``outer_noise`` (E18: the bound sees both stages' noise) the plan minimises
Phi(T, r) = bound(T, sigma_in*(T, r), r sigma_in*(T, r)), both multipliers calibrated together by Theorem 1
(seed 000 eq. (12)), over T and r jointly, instead of r after T.  Method: the profile P(r) = min over T of
Phi(T, r), each min the exhaustive, exact T scan of :func:`fedbound.scheduling.dppfl.optimal_T` (C profiled
out too), on a log grid of r in ``r_bounds`` (and r = 1, the paper's 50/50), then scipy's bounded scalar
minimiser of P on log r between the best grid point's neighbours.  T is exact for every r evaluated; r is a
grid-and-refine optimum (P is smooth but not proven unimodal), which the certificate says.

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

__all__ = ["optimal_T_split", "R_BOUNDS", "R_GRID"]

R_BOUNDS = (1e-2, 1e2)
R_GRID = 17
"""Points of the log grid of r (plus r = 1)."""


def optimal_T_split(settings: Mapping[str, Any], variant: str, r_bounds: tuple[float, float] = R_BOUNDS,
                    grid: int = R_GRID) -> tuple[Optimum, Optimum]:
    """(T optimum at the joint argmin, split optimum) of Phi(T, r) (module docstring)."""
    from scipy.optimize import minimize_scalar

    from fedbound.scheduling.dppfl import optimal_T

    runs: dict[float, Optimum] = {}

    def profile(r: float) -> float:
        if r not in runs:
            runs[r] = optimal_T(settings, variant, "tight", ratio=r, joint_C=True)
        return float(runs[r].fun)

    rs = np.unique(np.concatenate([np.geomspace(*r_bounds, grid), [1.0]]))
    vals = np.array([profile(float(r)) for r in rs])
    i = int(np.argmin(vals))
    lo, hi = float(rs[max(i - 1, 0)]), float(rs[min(i + 1, rs.size - 1)])
    if hi > lo:
        res = minimize_scalar(lambda lr: profile(math.exp(lr)), bounds=(math.log(lo), math.log(hi)),
                              method="bounded", options={"xatol": 1e-4})
        profile(math.exp(float(res.x)))
    r_best = min(runs, key=lambda r: (runs[r].fun, abs(math.log(r))))
    t_best, t_50 = runs[r_best], runs[1.0]
    separate = float(t_50.x)  # the separate answer: T*(r = 1), then r at that T
    how = (f"(T, r) jointly: the exact T scan at each r of a {rs.size}-point log grid of r in "
           f"[{r_bounds[0]:g}, {r_bounds[1]:g}] (with r = 1), refined by bounded scalar minimisation of "
           f"min_T Phi(T, r) on log r ({len(runs)} T scans); r is a grid-and-refine optimum")
    split = Optimum(
        x=r_best, fun=float(t_best.fun), success=True, method="joint (T, r): profile over r",
        message=f"sigma_out/sigma_in = {r_best:.6g} at T = {int(t_best.x)} (50/50 gives "
                f"{float(t_50.fun):.6g} at T = {int(t_50.x)}, this gives {float(t_best.fun):.6g})",
        at_lower_edge=bool(r_best <= r_bounds[0] * 1.001), at_upper_edge=bool(r_best >= r_bounds[1] / 1.001),
        evidence={"bound_50_50": float(t_50.fun), "T_50_50": int(t_50.x), "T_separate": separate,
                  "sigma_in": float(t_best.evidence["sigma_at_T_opt"]),
                  "sigma_out": r_best * float(t_best.evidence["sigma_at_T_opt"]),
                  "scans": len(runs), "searched": how,
                  "profile": {f"{r:.6g}": float(runs[r].fun) for r in sorted(runs)}})
    t_opt = Optimum(
        x=t_best.x, fun=t_best.fun, success=t_best.success, message=f"{t_best.message}; {how}",
        method=t_best.method, bracket=t_best.bracket, fun_below=t_best.fun_below, fun_above=t_best.fun_above,
        at_lower_edge=t_best.at_lower_edge, at_upper_edge=t_best.at_upper_edge, x_continuous=None,
        evidence={**t_best.evidence, "ratio": r_best, "joint_split": how})
    return t_opt, split
