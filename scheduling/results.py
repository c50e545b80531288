"""One result shape for every optimiser and one plan shape for every paper.

* :class:`Optimum`: a scipy-style certificate (``x``, ``fun``, ``success``, ``method``, ``message``) of an
  integer or joint optimisation.  ``x`` is a number, an array over a grid of settings, or a mapping such as
  ``{"T": 12, "K": 20}`` for a joint optimum.  ``fun_below``/``fun_above`` are the values at the neighbouring
  integers (``inf`` where infeasible), ``at_lower_edge``/``at_upper_edge`` flag an argmin on the edge of the
  feasible set, ``evidence`` holds method-specific facts (bracket ends' derivative signs, feasible range ...).
* :class:`Recommendation`: the one design a designer can act on: T, K, the noise std per stage under
  accounting that provably meets (eps, delta), the bound it predicts, which accountant, why, and the premises
  it rests on (e.g. the paper's sensitivity argument).
* :class:`Row` and :class:`Plan`: what ``fedbound plan PAPER`` prints: the recommendation first, then rows
  (quantity, paper value, tight value, note), the optima, warnings in words, and ``data``, the paper's own
  flat JSON keys (kept stable for programs).  One printer (``fedbound.output.print_plan``) and one JSON
  encoder (``Plan.to_dict``) serve every paper.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Optimum", "Recommendation", "Row", "Plan", "json_number"]


def json_number(x: Any) -> Any:
    """A JSON-ready number (or nested list, or bool); non-finite floats become ``None``."""
    if isinstance(x, Mapping):
        return {str(k): json_number(v) for k, v in x.items()}
    if isinstance(x, bool | np.bool_):
        return bool(x)
    if isinstance(x, int | np.integer):
        return int(x)
    arr = np.asarray(x)
    if arr.dtype == bool:
        return arr.tolist()
    if arr.dtype.kind in "iu":
        return arr.tolist()
    if arr.dtype.kind not in "f":
        return x
    if arr.ndim == 0:
        v = float(arr)
        return v if np.isfinite(v) else None
    return [json_number(v) for v in arr]


@dataclass(frozen=True)
class Optimum:
    """Certificate of an optimisation: scalars, arrays over a settings grid, or a mapping ``x``.

    ``success``: a feasible point exists and the certificate's checks hold (e.g. x is no worse than its
    neighbours).  ``x_continuous``: the continuous minimiser, when the method has one.
    """

    x: Any
    fun: Any
    success: Any
    message: str
    method: str
    bracket: tuple[Any, Any] | None = None
    fun_below: Any = None
    fun_above: Any = None
    at_lower_edge: Any = False
    at_upper_edge: Any = False
    x_continuous: Any = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def neighbours(self) -> dict[str, Any]:
        """Values of the objective at x - 1 and x + 1 (``inf``: infeasible)."""
        return {"below": self.fun_below, "above": self.fun_above}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "x": json_number(self.x), "fun": json_number(self.fun), "success": json_number(self.success),
            "message": self.message, "method": self.method,
            "bracket": None if self.bracket is None else [json_number(b) for b in self.bracket],
            "fun_below": json_number(self.fun_below), "fun_above": json_number(self.fun_above),
            "at_lower_edge": json_number(self.at_lower_edge),
            "at_upper_edge": json_number(self.at_upper_edge),
            "x_continuous": None if self.x_continuous is None else json_number(self.x_continuous),
            "evidence": {k: v if isinstance(v, str) else json_number(v) for k, v in self.evidence.items()},
        }
        if isinstance(self.x, Mapping):  # a joint optimum also reads as {"T": .., "K": ..}
            out.update({str(k): json_number(v) for k, v in self.x.items()})
        return out


@dataclass(frozen=True)
class Recommendation:
    """The design to deploy: T, K, noise std per stage under proven accounting, and the predicted bound.

    ``accounting`` names the accountant that certifies (eps, delta) for ``sigma`` (e.g. "exact Gaussian
    composition (analytic Gaussian)"); ``why`` says in words why this design; ``premises`` lists what the
    guarantee rests on (e.g. "the paper's sensitivity 2C/m").  ``bound`` is None where the paper's bound is
    undefined for the design (the reason is then in ``why``).
    """

    T: int
    K: int | None
    sigma: Mapping[str, float]
    bound: float | None
    accounting: str
    why: str
    premises: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"T": self.T, "K": self.K, "sigma": {k: json_number(v) for k, v in self.sigma.items()},
                "bound": json_number(self.bound), "accounting": self.accounting, "why": self.why,
                "premises": list(self.premises), **{k: json_number(v) for k, v in self.extra.items()}}


@dataclass(frozen=True)
class Row:
    """One line of a plan table: a quantity, the paper's value, the tight value, and a note."""

    quantity: str
    paper: Any = None
    tight: Any = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"quantity": self.quantity, "paper": json_number(self.paper), "tight": json_number(self.tight),
                "note": self.note}


@dataclass(frozen=True)
class Plan:
    """A paper's answer to a designer's setting: recommendation first, then the evidence.

    ``data`` carries the paper's flat JSON keys (e.g. NbAFL's ``sigma_uplink``, ``T_opt``); ``to_dict``
    merges them with ``paper``, ``title``, ``variant``, ``recommendation``, ``rows``, ``optima``,
    ``warnings``, ``differences`` (the paper's own answer against the recommendation, in words),
    ``assumed`` (settings taken from documented defaults, not from the user) and ``measured`` (constants
    the config marks as measured by ``fedbound estimate``).
    """

    paper: str
    title: str
    variant: str
    recommendation: Recommendation
    rows: tuple[Row, ...]
    optima: Mapping[str, Optimum] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    assumed: tuple[str, ...] = ()
    caption: str = ""
    differences: tuple[str, ...] = ()
    measured: tuple[str, ...] = ()
    certificate: Any = None
    """:class:`fedbound.scheduling.certificate.Certificate` of the recommendation (None: not certified)."""

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.data), "paper": self.paper, "title": self.title, "variant": self.variant,
                "recommendation": self.recommendation.to_dict(), "rows": [r.to_dict() for r in self.rows],
                "optima": {k: v.to_dict() for k, v in self.optima.items()}, "warnings": list(self.warnings),
                "differences": list(self.differences), "assumed": list(self.assumed),
                "measured": list(self.measured),
                "certificate": None if self.certificate is None else self.certificate.to_dict()}
