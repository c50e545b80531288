"""The certificate every recommendation carries: how the optimum was found, how it was checked, and what the
deployed noise really spends.

A planner's recommendation is the argmin, over every design variable the user left open, of the bound that
applies to the design, evaluated with the noise the design deploys.  Its :class:`Certificate` says

* ``domain``: what was searched, per variable (e.g. ``{"T": "1..4000 (widened until the bound turned)"}``),
  and ``search``: how (closed form, convex 1-D search, exhaustive scan, cvxpy ...); a search that stopped at a
  documented maximum says so in ``capped``;
* ``check``: an independent check of the argmin (:class:`OptimumCheck`: brute force over the integer domain
  where it has at most :data:`BRUTE_FORCE_POINTS` points, a dense grid otherwise) and whether it agrees;
* ``privacy``: the privacy of every deployed stage re-accounted by an exact method (:class:`PrivacyCheck`:
  analytic Gaussian where it is exact, dp-accounting's PLD with its discretisation otherwise), with the eps
  achieved against the target; "tight" means within :data:`TIGHT_TOLERANCE` of the target;
* ``vacuous``: the bound says nothing (above the initial gap, or the paper's own vacuity condition) for every
  design searched; the plan then leads with that.

``passed`` is the verdict ``fedbound plan PAPER --check`` exits on.  :func:`brute_force_argmin` is the shared
independent check.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbound.scheduling.results import json_number

__all__ = ["Certificate", "OptimumCheck", "PrivacyCheck", "brute_force_argmin", "BRUTE_FORCE_POINTS",
           "TIGHT_TOLERANCE", "reaccount", "scan_until_turned", "Scan"]

BRUTE_FORCE_POINTS = 100_000
"""Largest integer domain the independent check enumerates point by point; beyond it, a dense grid."""
TIGHT_TOLERANCE = 0.01
"""A sigma is "tight" when the eps it achieves, re-accounted exactly, is within 1 % of the target."""


@dataclass(frozen=True)
class PrivacyCheck:
    """One deployed stage (or adversary view) re-accounted by an exact method.

    ``eps_achieved`` is the eps the deployed ``sigma`` spends at ``delta`` over the whole run by ``method``;
    ``valid`` when it does not exceed ``eps_target`` (up to the method's stated discretisation), ``tight``
    when it is within :data:`TIGHT_TOLERANCE` of it.
    """

    stage: str
    sigma: float
    eps_target: float
    delta: float
    eps_achieved: float
    method: str
    sigma_exact: float | None = None
    """The smallest std an exact calibration of the same release needs (None: not computed)."""
    slack: float = 0.0
    """The method's stated error in eps (PLD: steps x its discretisation); ``valid`` allows it."""

    @property
    def valid(self) -> bool:
        return bool(self.eps_achieved <= self.eps_target * (1 + 1e-9) + self.slack)

    @property
    def tight(self) -> bool:
        return self.valid and bool(self.eps_achieved >= self.eps_target * (1 - TIGHT_TOLERANCE) - self.slack)

    @property
    def label(self) -> str:
        return "tight" if self.tight else "valid" if self.valid else "VIOLATED"

    @property
    def wasted(self) -> float | None:
        """Fraction of the deployed std beyond the exact calibration (``sigma / sigma_exact - 1``)."""
        if self.sigma_exact is None or not self.sigma_exact > 0:
            return None
        return float(self.sigma / self.sigma_exact - 1.0)

    def describe(self) -> str:
        """``label`` plus, for a "valid" sigma, the noise it wastes against exact calibration."""
        w = self.wasted
        if self.label == "valid" and w is not None and w > 0:
            return f"valid, {100 * w:.1f} % more noise than the exact {self.sigma_exact:.4g}"
        return self.label

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "sigma": json_number(self.sigma),
                "eps_target": json_number(self.eps_target), "delta": json_number(self.delta),
                "eps_achieved": json_number(self.eps_achieved),
                "method": self.method, "valid": self.valid, "tight": self.tight, "label": self.label,
                "sigma_exact": json_number(self.sigma_exact), "wasted": json_number(self.wasted),
                "slack": json_number(self.slack)}


@dataclass(frozen=True)
class OptimumCheck:
    """The independent check of the argmin: how (``method``), over how many points, what it found."""

    method: str
    points: int
    x: Mapping[str, Any]
    fun: float
    agrees: bool
    note: str = ""
    tolerance: float = 0.0
    """The precision of the comparison: designs whose bounds differ by less are ties (e.g. DP-PFL: the
    bound's change over its sigma calibration's window); 0 where the values compared are exact."""

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "points": int(self.points), "x": json_number(dict(self.x)),
                "fun": json_number(self.fun), "agrees": bool(self.agrees), "note": self.note,
                "tolerance": json_number(self.tolerance)}


@dataclass(frozen=True)
class Certificate:
    """What was searched and how, the independent check, and the deployed privacy re-accounted."""

    domain: Mapping[str, str]
    search: str
    check: OptimumCheck | None = None
    privacy: tuple[PrivacyCheck, ...] = ()
    vacuous: bool = False
    capped: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        """The check ran and agrees, and every stage's privacy is valid."""
        return (self.check is not None and self.check.agrees and not self.capped
                and all(p.valid for p in self.privacy))

    def line(self) -> str:
        """One line for the printed plan."""
        dom = ", ".join(f"{k} in {v}" for k, v in self.domain.items())
        parts = [f"searched {dom} ({self.search})"]
        if self.capped:
            parts.append(f"capped: {self.capped}")
        if self.check is not None:
            verdict = "agrees" if self.check.agrees else "DISAGREES"
            if self.check.tolerance > 0:
                verdict += f" (up to {self.check.tolerance:.2g}: closer designs are ties at this precision)"
            parts.append(f"{self.check.method} over {self.check.points:,} points {verdict}")
        else:
            parts.append("independent check not run")
        if self.privacy:
            parts.append("privacy re-accounted: " + "; ".join(
                f"{p.stage} eps {p.eps_achieved:.4g} of {p.eps_target:.4g} ({p.describe()}, {p.method})"
                for p in self.privacy))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"domain": dict(self.domain), "search": self.search,
                "check": None if self.check is None else self.check.to_dict(),
                "privacy": [p.to_dict() for p in self.privacy], "vacuous": bool(self.vacuous),
                "capped": self.capped, "notes": list(self.notes), "passed": self.passed}


def brute_force_argmin(objective: Callable[..., np.ndarray], domain: Mapping[str, Sequence[int] | np.ndarray],
                       *, chunk: int = 1 << 16) -> tuple[dict[str, Any], float, int]:
    """(argmin, min, points): the objective evaluated at every point of the product of ``domain``'s values.

    ``objective(**arrays)`` takes one equally shaped array per variable and returns the bound there
    (``inf`` where infeasible); evaluation is vectorised in chunks so memory stays bounded.  Ties go to the
    first point in the domain's order.  Raises ``ValueError`` when every point is infeasible.
    """
    names = list(domain)
    axes = [np.asarray(domain[n]) for n in names]
    total = int(np.prod([a.size for a in axes], dtype=np.int64))
    best, best_x = np.inf, None
    points = itertools.product(*axes) if len(axes) > 1 else ((v,) for v in axes[0])
    from fedbound.budget import check

    while True:
        block = list(itertools.islice(points, chunk))
        if not block:
            break
        check(f"the independent brute-force check over {total:,} points")
        cols = np.array(block).T
        vals = np.asarray(objective(**{n: cols[i] for i, n in enumerate(names)}), dtype=float)
        vals = np.where(np.isnan(vals), np.inf, vals)
        i = int(np.argmin(vals))
        if vals[i] < best:
            best, best_x = float(vals[i]), {n: cols[j][i].item() for j, n in enumerate(names)}
    if best_x is None:
        raise ValueError(f"no feasible design in the domain searched ({', '.join(names)})")
    return best_x, best, total


def reaccount(stage: str, sigma: float, sensitivity: float, eps_target: float, delta: float, *,
              steps: int = 1, sample_rate: float = 1.0, sampling: str = "poisson", method: str = "auto",
              sigma_exact: float | None = None) -> PrivacyCheck:
    """Re-account one deployed stage: ``steps`` Gaussian releases of std ``sigma`` and L2 ``sensitivity``.

    ``sample_rate = 1``: the composition is exactly one Gaussian of std sigma/sqrt(steps) (Dong, Roth & Su
    2022, Cor. 3.3), so the analytic Gaussian (Balle & Wang 2018, Thm 8) is exact (``method="auto"``);
    ``method="pld"`` asks dp-accounting's PLD instead (an upper bound, off by at most steps x its stated
    discretisation).  Poisson sampling: PLD.  Sampling without replacement (K of N): dp-accounting 0.6 has
    no PLD for it, so RDP (Wang, Balle & Kasiviswanathan 2019) -- an upper bound, said in ``method``.
    ``sigma_exact``: the exact calibration of the same release, for the noise a "valid" sigma wastes.
    """
    from fedbound.accounting.analytic import analytic_gaussian_epsilon

    z = float(sigma) / float(sensitivity)
    slack = 0.0
    if sample_rate >= 1.0 and method in ("auto", "analytic"):
        eps = float(analytic_gaussian_epsilon(z / np.sqrt(steps), delta, 1.0))
        how = "analytic Gaussian, exact"
    elif sampling == "without_replacement" and sample_rate < 1.0:
        from fedbound.accounting.calibrate import epsilon

        eps = float(epsilon(z, sample_rate, int(steps), delta, method="rdp", sampling="without_replacement"))
        how = "RDP of K-of-N sampling (no PLD for it in dp-accounting 0.6), an upper bound"
    else:
        from fedbound.accounting.pld import PldTooCostly, discretization_for, pld_epsilon

        if sample_rate >= 1.0:  # T Gaussians are exactly one of std sigma/sqrt(T): one PLD step, same answer
            z, steps = z / math.sqrt(steps), 1
        try:
            # a discretisation of 0.1 % of the target: PLD's stated error stays 10x inside the 1 % of "tight"
            disc = float(discretization_for(z, float(sample_rate), int(steps), max(1e-4, 1e-3 * eps_target)))
            eps = float(pld_epsilon(z, float(sample_rate), int(steps), delta, disc))
            how = f"PLD (dp-accounting), discretisation {disc:.0e}"
            slack = int(steps) * disc
        except PldTooCostly:
            if sample_rate < 1.0:
                raise
            eps = float(analytic_gaussian_epsilon(z, delta, 1.0))
            how = "analytic Gaussian, exact (PLD would need too many points at this noise)"
    return PrivacyCheck(stage=stage, sigma=float(sigma), eps_target=float(eps_target), delta=float(delta),
                        eps_achieved=eps, method=how, sigma_exact=sigma_exact, slack=slack)


@dataclass(frozen=True)
class Scan:
    """An exhaustive integer scan: argmin ``x``, ``fun``, the points evaluated, how it stopped."""

    x: int
    fun: float
    points: int
    stop: int
    domain: str
    capped: str = ""


def scan_until_turned(bound: Callable[[np.ndarray], np.ndarray], floor: Callable[[np.ndarray], np.ndarray],
                      *, start: int = 1, chunk: int = 256, maximum: int = 10**6, what: str = "T") -> Scan:
    """Exhaustive scan of integer ``what`` = start, start + 1, ... until the bound has turned for good.

    ``floor(x)`` must be a lower bound on ``bound`` at every x' >= x that is non-decreasing in x (e.g. the
    accumulated-noise term of a convergence bound, which only grows with T).  The scan stops at the first x
    whose floor reaches the best value found: no larger x can beat it, so the argmin is exact (a proof, not
    a heuristic).  At ``maximum`` it stops anyway and says so in ``capped``.  Ties go to the smaller x.
    """
    from fedbound.budget import check

    best_x, best, lo = start, np.inf, start
    while lo <= maximum:
        check(f"the exhaustive search over {what} had reached {what} = {lo} of at most {maximum}")
        xs = np.arange(lo, min(lo + chunk, maximum + 1))
        vals = np.asarray(bound(xs), dtype=float)
        vals = np.where(np.isnan(vals), np.inf, vals)
        i = int(np.argmin(vals))
        if vals[i] < best:
            best, best_x = float(vals[i]), int(xs[i])
        fl = np.asarray(floor(xs), dtype=float)
        done = np.nonzero(fl >= best)[0]
        if done.size and np.isfinite(best):
            stop = int(xs[done[0]])
            return Scan(best_x, best, int(xs[-1] - start + 1), stop,
                        f"{start}..{stop} (exhaustive; from {stop} on the noise term alone exceeds the best "
                        "bound)")
        lo = int(xs[-1]) + 1
    return Scan(best_x, best, int(maximum - start + 1), maximum, f"{start}..{maximum} (exhaustive)",
                capped=f"{what} stopped at the documented maximum {maximum} before the bound had turned")
