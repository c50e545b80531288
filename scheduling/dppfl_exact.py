"""DP-PFL's rounds T with the exact sigma deployed: a certified branch-and-bound (issue 23).

The recommendation is the integer argmin of Phi_e(T) = bound(T, sigma_e(T)) (Theorem 3 (32) or Theorem 2
(31), C profiled out by :func:`fedbound.scheduling.dppfl.clip_profile`), sigma_e the exact calibration
:func:`fedbound.scheduling.dppfl_sigma.exact_sigma` (PLD at q < 1), which costs 1-4 PLD evaluations per T:
so T is not scanned exhaustively, it is bounded.  Three facts make that a proof:

* the smallest noise z*(T) meeting the target is non-decreasing in T (T + 1 rounds compose one more
  release: post-processing), and the calibrated sigma_e(T) lies in [z*(T), z*(T) / (1 - WINDOW)]: its PLD
  eps is within EXACT_RTOL of the target, and eps falls at least as fast as 1/z (the privacy loss of a
  Gaussian release is convex in 1/z and 0 at 1/z = 0), so z is within EXACT_RTOL of z*.  Hence for T > a,
  sigma_e(T) >= z*(T) >= z*(a) >= (1 - WINDOW) sigma_e(a) (issue 36: the window was 2e-3 against a
  calibration of 5e-3, so a T could be pruned that was better by a few 1e-5);
* the bound is increasing in sigma at fixed T (its noise term Theta is linear in sigma, Xi increasing in
  it; min over C keeps that), so on an interval [a, b] of anchors, min over a < T < b of bound(T, (1 -
  WINDOW) sigma_e(a)) is a lower bound on min Phi_e there (evaluated at every integer, vectorised);
* the noise-only part (the bound at Delta0 = 0) is non-decreasing in T and sigma and below the bound, so
  once it reaches the incumbent at an anchor T_end, no T >= T_end can win (as
  :func:`~fedbound.scheduling.certificate.scan_until_turned` uses it).

Start: anchors at T = 1, the RDP optimum (the argmin with Theorem 1's RDP sigma, an upper bound on Phi_e
since sigma_e <= sigma_RDP), and T_end (doubled from the RDP scan's end until the noise-only part turns).
Then every interval whose lower bound is below the incumbent somewhere gets a new anchor at the first
such point (the points before it are pruned by the left anchor; the rest are bounded by the new anchor's
larger sigma); an interval is done when its bound reaches the incumbent or it has no interior point.
Calibrations warm-start from the nearest earlier one (pld_calibrate) and are cached across runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.scheduling.dppfl_sigma import EXACT_RTOL
from fedbound.scheduling.results import Optimum

__all__ = ["exact_optimal_T", "exact_check", "WINDOW"]

WINDOW = EXACT_RTOL
"""Relative slack of the lower bound for the calibration window of sigma_e (module docstring)."""
_MAX_CALIBRATIONS = 200


class _Objective:
    """Phi at given noise multipliers, C profiled out; the exact sigma per T, counted and memoised."""

    def __init__(self, settings: Mapping[str, Any], variant: str, ratio: float, joint_C: bool):
        self.s, self.variant, self.ratio, self.joint_C = settings, variant, ratio, joint_C
        self.sig: dict[int, float] = {}
        self.records: dict[int, dict] = {}

    def bound(self, T: np.ndarray, sig: np.ndarray, floor: bool = False) -> np.ndarray:
        from fedbound.scheduling.dppfl import bound_curve, clip_profile, clip_sigma

        sig = np.broadcast_to(np.asarray(sig, dtype=float), np.shape(T))
        at = dict(self.s)
        if self.joint_C:
            at["C"] = clip_profile(self.s, clip_sigma(self.s, sig, self.ratio, self.variant), self.variant)
        if floor:
            at["Delta0"] = 0.0
        ev = bound_curve(at, T, sig, self.variant, self.ratio)
        vals = np.asarray(ev.value, dtype=float)
        return vals if floor else np.where(np.asarray(ev.admissible, bool) & np.isfinite(vals), vals, np.inf)

    def exact(self, T: int) -> float:
        if T not in self.sig:
            from fedbound.scheduling.dppfl_sigma import exact_sigma

            self.records[T] = exact_sigma(self.s, T, self.ratio)
            self.sig[T] = float(self.records[T]["z"])
        return self.sig[T]

    def phi(self, T: int) -> float:
        return float(self.bound(np.array([T]), np.array([self.exact(T)]))[0])


def _open_intervals(obj: _Objective, best: float) -> list[tuple[int, int, int]]:
    """(a, b, T) for every pair of adjacent anchors whose lower bound (the bound at (1 - WINDOW) sigma_e(a))
    is below ``best`` somewhere strictly between them; T is the first such point."""
    anchors, out = sorted(obj.sig), []
    for a, b in zip(anchors[:-1], anchors[1:], strict=True):
        if b - a < 2:
            continue
        Ts = np.arange(a + 1, b)
        below = np.flatnonzero(obj.bound(Ts, np.full(Ts.size, (1 - WINDOW) * obj.sig[a])) < best)
        if below.size:
            out.append((a, b, int(Ts[below[0]])))
    return out


def exact_optimal_T(settings: Mapping[str, Any], variant: str, ratio: float, rdp: Optimum,
                    joint_C: bool = True, maximum: int = 100_000,
                    max_calibrations: int | None = None) -> Optimum:
    """The integer T minimising bound(T, sigma_e(T)) (module docstring), from ``rdp`` (the optimum with
    Theorem 1's RDP sigma, :func:`fedbound.scheduling.dppfl.optimal_T`).  Where PLD is too costly at T*
    (``exact_sigma`` falls back to RDP), and at q_in = q_out = 1 (the scan's sigma is exact there), ``rdp``
    itself is returned.  After ``max_calibrations`` (default 200) the search stops: ``success`` is then
    False and ``evidence["left_open"]`` says which intervals of T were not decided (never certified)."""
    if float(settings["q_in"]) == 1.0 == float(settings["q_out"]):
        return rdp  # the scan's sigma*(T) is the analytic Gaussian's there: exact already, every T scanned
    max_calibrations = _MAX_CALIBRATIONS if max_calibrations is None else int(max_calibrations)
    obj = _Objective(settings, variant, ratio, joint_C)
    t_rdp = int(rdp.x)
    obj.exact(t_rdp)
    if not obj.records[t_rdp]["tight"]:
        return rdp
    best_T, best = t_rdp, obj.phi(t_rdp)
    for T in (1,):
        if (v := obj.phi(T)) < best:
            best_T, best = T, v
    # the end: the noise-only part at the exact sigma must reach the incumbent there
    end = max(int(rdp.evidence.get("T_max", t_rdp)), t_rdp + 1)
    capped = ""
    while True:
        if (v := obj.phi(end)) < best:
            best_T, best = end, v
        low = (1 - WINDOW) * obj.exact(end)
        if float(obj.bound(np.array([end]), np.array([low]), floor=True)[0]) >= best:
            break
        if end >= maximum:
            capped = f"T stopped at the documented maximum {maximum} before the noise-only part turned"
            break
        end = min(2 * end, maximum)
    from fedbound.budget import check

    while (todo := _open_intervals(obj, best)) and len(obj.sig) < max_calibrations:
        check(f"DP-PFL's branch and bound on the exact sigma, after {len(obj.sig)} calibrations")
        # each open interval gets an anchor at its first point the lower bound cannot prune: the points
        # before it are pruned by sigma_e(a), the rest are bounded by the new anchor's larger sigma
        for _, _, T_new in todo:
            if (v := obj.phi(T_new)) < best:
                best_T, best = T_new, v
    done = not todo
    how = (f"every integer T in 1..{end} by branch and bound on the exact sigma ({len(obj.sig)} exact "
           f"calibrations; lower bound on [a, b]: the bound at (1 - {WINDOW:g}) sigma_e(a), sigma_e "
           f"non-decreasing in T; from {end} on the noise-only part exceeds the best bound)")
    left = ""
    if not done:
        shown = ", ".join(f"{a + 1}..{b - 1}" for a, b, _ in todo[:4]) + (", ..." if len(todo) > 4 else "")
        left = (f"the branch and bound stopped after {len(obj.sig)} exact calibrations with {len(todo)} "
                f"interval(s) of T left open (T in {shown}): T* is the best found there, not certified")
        how += f"; {left}"
    if capped:
        how += f"; {capped}"
    rec = obj.records[best_T]
    return Optimum(
        x=best_T, fun=best, success=bool(done), message=how, method="branch and bound (exact sigma)",
        bracket=(1, end), at_lower_edge=best_T == 1, at_upper_edge=bool(capped) or best_T == end,
        evidence={**{k: v for k, v in rdp.evidence.items() if k in ("joint_C", "noise_method")},
                  "sigma_at_T_opt": obj.sig[best_T], "T_max": end, "searched": how,
                  "calibrations": len(obj.sig), "exact": rec, "T_rdp": t_rdp, "bound_rdp": float(rdp.fun),
                  "anchors": {int(t): obj.sig[t] for t in sorted(obj.sig)}, "capped": capped,
                  "left_open": left, "open_intervals": [[a + 1, b - 1] for a, b, _ in todo],
                  "exact_search": True})


def exact_check(settings: Mapping[str, Any], variant: str, ratio: float, res: Optimum, joint_C: bool = True,
                half_width: int = 3, spread: int = 8) -> tuple[dict, float, int, bool, str, float]:
    """The independent check of :func:`exact_optimal_T`: Phi_e re-evaluated (exact sigma, no bounding) at
    every integer within ``half_width`` of T* and at ``spread`` geometric points of the domain; no point may
    beat T*.  Returns (argmin, its value, points, agrees, note, tolerance).

    ``tolerance``: how far the comparison is decided by the calibration's precision rather than the bound.
    Each sigma_e(T) is up to WINDOW above the least noise z*(T) (module docstring), so a T whose bound with
    z*(T) is below T*'s by less than Phi_e(T*) - bound(T*, (1 - WINDOW) sigma_e(T*)) may rank above T* at an
    exact calibration (issue 36: T = 67 below the recommended 68 by 4.4e-5): such T are ties at this
    precision, and the certificate says so."""
    obj = _Objective(settings, variant, ratio, joint_C)
    T_star, top = int(res.x), int(res.evidence["T_max"])
    Ts = set(range(max(1, T_star - half_width), min(top, T_star + half_width) + 1))
    Ts |= {int(t) for t in np.unique(np.round(np.geomspace(1, top, spread)))}
    vals = {T: obj.phi(T) for T in sorted(Ts)}
    x = min(vals, key=lambda t: (vals[t], t))
    agrees = float(res.fun) <= vals[x] * (1 + 1e-12) + 1e-12 and math.isclose(vals[T_star], float(res.fun),
                                                                               rel_tol=1e-12)
    low = float(obj.bound(np.array([T_star]), np.array([(1 - WINDOW) * obj.exact(T_star)]))[0])
    tolerance = max(0.0, float(res.fun) - low)
    note = (f"exact sigma at T* - {half_width}..T* + {half_width} and {spread} geometric points of 1..{top}: "
            f"best {vals[x]:.8g} at T = {x} vs T* {float(res.fun):.8g}; optimal up to {tolerance:.2g} (each "
            f"sigma is calibrated to eps within {100 * WINDOW:g} % of the target, which moves T*'s bound by "
            "that much: a T within it of T* is a tie at this precision)")
    return {"T": x}, vals[x], len(vals), bool(agrees), note, tolerance
