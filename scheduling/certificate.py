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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbound.scheduling.results import json_number

__all__ = ["Certificate", "OptimumCheck", "PrivacyCheck", "brute_force_argmin", "BRUTE_FORCE_POINTS",
           "TIGHT_TOLERANCE"]

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

    @property
    def valid(self) -> bool:
        return bool(self.eps_achieved <= self.eps_target * (1 + 1e-9))

    @property
    def tight(self) -> bool:
        return self.valid and bool(self.eps_achieved >= self.eps_target * (1 - TIGHT_TOLERANCE))

    @property
    def label(self) -> str:
        return "tight" if self.tight else "valid" if self.valid else "VIOLATED"

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "sigma": json_number(self.sigma),
                "eps_target": json_number(self.eps_target), "delta": json_number(self.delta),
                "eps_achieved": json_number(self.eps_achieved),
                "method": self.method, "valid": self.valid, "tight": self.tight, "label": self.label}


@dataclass(frozen=True)
class OptimumCheck:
    """The independent check of the argmin: how (``method``), over how many points, what it found."""

    method: str
    points: int
    x: Mapping[str, Any]
    fun: float
    agrees: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "points": int(self.points), "x": json_number(dict(self.x)),
                "fun": json_number(self.fun), "agrees": bool(self.agrees), "note": self.note}


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
            parts.append(f"{self.check.method} over {self.check.points:,} points {verdict}")
        else:
            parts.append("independent check not run")
        if self.privacy:
            parts.append("privacy re-accounted: " + "; ".join(
                f"{p.stage} eps {p.eps_achieved:.4g} of {p.eps_target:.4g} ({p.label}, {p.method})"
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
    while True:
        block = list(itertools.islice(points, chunk))
        if not block:
            break
        cols = np.array(block).T
        vals = np.asarray(objective(**{n: cols[i] for i, n in enumerate(names)}), dtype=float)
        vals = np.where(np.isnan(vals), np.inf, vals)
        i = int(np.argmin(vals))
        if vals[i] < best:
            best, best_x = float(vals[i]), {n: cols[j][i].item() for j, n in enumerate(names)}
    if best_x is None:
        raise ValueError(f"no feasible design in the domain searched ({', '.join(names)})")
    return best_x, best, total
