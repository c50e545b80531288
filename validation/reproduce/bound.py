"""A figure whose claim is about the bound, not about training: :class:`BoundFigure`.

Some figures of a paper plot a formula (a convergence bound against T for several eps, a moment bound against
the exact moment) and claim something about its shape.  These claims are declared next to the theorem
(``Paper.claims``, :mod:`fedbound.bounds.claims`); a :class:`BoundFigure` names them by id, checks each on
``points`` seeded random points of its declared region plus the figure's own setting (one point per curve),
confirms every declared counterexample, and draws the curves the figure plots (each series evaluated on the
figure's x grid).  It writes the files of a training target (``PAPER_FIGURE.csv``, ``.png`` / ``.svg``,
``verdicts.json`` in the same schema) and one verdict line per claim: "holds at n/n checked points" or
"does not hold" with the counterexample.  Nothing here names a paper.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

__all__ = ["Series", "BoundFigure", "BoundVerdict", "judge_bound_claim"]


@dataclass(frozen=True)
class Series:
    """One plotted formula: its legend ``name`` and a lazy ``"module:attribute"`` reference to an object
    with a theorem's ``evaluate(values, variant=...)`` (an Evaluable or a claims ``Computed``)."""

    name: str
    quantity: str
    variant: str = "paper"


@dataclass(frozen=True)
class BoundVerdict:
    """The judgement of one bound claim at the figure's points and its region's."""

    id: str
    statement: str
    holds: bool
    checked: int
    held: int
    counterexamples: int
    confirmed: int
    fails_in: str
    first_failure: str

    def line(self) -> str:
        """'holds at n/n checked points' (and where it fails as declared), or 'does not hold' with the
        counterexample."""
        if self.holds:
            where = (f"; fails only where declared ({self.fails_in}): {self.confirmed}/"
                     f"{self.counterexamples} counterexamples confirmed" if self.counterexamples else "")
            return f"{self.id} holds at {self.held}/{self.checked} checked points{where}: {self.statement}"
        return (f"{self.id} does not hold (at {self.held}/{self.checked} checked points); counterexample: "
                f"{self.first_failure}: {self.statement}")

    def to_json(self) -> dict[str, Any]:
        """The reproduce schema of ``verdicts.json`` (points in place of seeds; no effect size)."""
        return {"id": self.id, "statement": self.statement, "kind": "bound", "metric": None, "better": None,
                "holds": self.holds, "seeds_holding": self.held, "seeds": self.checked, "effect": None,
                "low": None, "high": None, "values": {}, "counterexamples": self.counterexamples,
                "counterexamples_confirmed": self.confirmed, "line": self.line()}


def _show(point: Mapping[str, Any]) -> str:
    def one(v: Any) -> str:
        arr = np.asarray(v)
        if arr.ndim:
            return f"{arr.min():g}..{arr.max():g}"
        return f"{v:g}" if isinstance(v, int | float | np.number) else str(v)

    return ", ".join(f"{k}={one(v)}" for k, v in point.items() if not str(k).startswith("_"))


def judge_bound_claim(claim: Any, points: int, own: Sequence[Mapping[str, Any]] = (),
                      seed: int = 0) -> BoundVerdict:
    """Check ``claim`` (a :class:`fedbound.bounds.claims.Claim`) at the points ``own`` and at ``points``
    seeded random points of its region, and every declared counterexample (which must fail)."""
    from fedbound.bounds.claims import check_point

    candidates = [dict(p) for p in own]
    if claim.region is not None and points > 0:
        candidates += claim.region.sample(points, seed)
    held, failure = 0, ""
    for point in candidates:
        verdict = check_point(claim, point)
        held += verdict.holds
        if not verdict.holds and not failure:
            failure = f"at {_show(point)}: {verdict.detail}"
    confirmed = 0
    for point, variant in claim.counterexamples:
        verdict = check_point(claim, point, variant)
        confirmed += not verdict.holds
        if verdict.holds and not failure:
            failure = (f"the declared counterexample {_show(point)} [{variant}] does not fail "
                       f"({verdict.detail})")
    holds = bool(candidates) and held == len(candidates) and confirmed == len(claim.counterexamples)
    if not candidates:
        failure = failure or "no point of a region where it holds is declared"
    return BoundVerdict(claim.id, claim.statement, holds, len(candidates), held, len(claim.counterexamples),
                        confirmed, claim.fails_in, failure)


@dataclass(frozen=True)
class BoundFigure:
    """A figure of ``paper`` that plots formulas (module docstring).

    ``claims``: ids of the paper's declared bound claims the figure shows.  ``setting``: the values every
    series is evaluated at (or a lazy ``"module:attribute"`` reference to them); ``curves``: one labelled
    curve per entry (e.g. ``{"eps": 60.0}``, merged into ``setting``); ``x`` / ``x_values``: the plotted
    variable and its grid; ``series``: the formulas (several: one line each, labelled ``series``);
    ``metric``: the y axis.  ``points``: random points of
    each claim's region at demo (and paper) size, ``tiny_points`` in the tests; ``seconds``: demo run time.
    """

    paper: str
    figure: str
    title: str
    claims: tuple[str, ...]
    setting: Mapping[str, Any] | str
    x: str
    x_values: tuple[float, ...]
    series: tuple[Series, ...]
    metric: str
    curves: tuple[Mapping[str, Any], ...] = ({},)
    points: int = 20
    tiny_points: int = 2
    seconds: float = 5.0
    kind: ClassVar[str] = "bound"

    @property
    def labels(self) -> tuple[str, ...]:
        names = [k for c in self.curves for k in c]
        return tuple(dict.fromkeys([*names, *(["series"] if len(self.series) > 1 else []), self.x]))

    def statements(self) -> list[tuple[str, str]]:
        """(id, statement) of each claim, read from the paper's declared claims."""
        return [(c.id, c.statement) for c in self._claims()]

    def _claims(self) -> list[Any]:
        from fedbound.errors import ConfigError
        from fedbound.registry import get

        declared = {c.id: c for c in get(self.paper).all_claims()}
        missing = [i for i in self.claims if i not in declared]
        if missing:
            raise ConfigError(f"{self.paper} {self.figure}: claim(s) {', '.join(missing)} are not declared "
                              f"(fedbound claims {self.paper})")
        return [declared[i] for i in self.claims]

    def values(self) -> dict[str, Any]:
        """The figure's setting (resolved)."""
        from fedbound.registry import resolve

        return dict(resolve(self.setting))

    def table(self) -> Any:
        """The plotted curves, tidy: one row per (curve, series, x) with ``metric`` (NaN where the formula
        is inadmissible)."""
        import pandas as pd

        from fedbound.registry import resolve

        xs = np.asarray(self.x_values, dtype=float)
        setting = self.values()
        rows = []
        for labels in self.curves:
            for s in self.series:
                ev = resolve(s.quantity).evaluate({**setting, **labels, self.x: xs}, variant=s.variant)
                value = np.broadcast_to(np.asarray(ev.value, dtype=float), xs.shape)
                ok = np.broadcast_to(np.asarray(ev.admissible, dtype=bool), xs.shape) & np.isfinite(value)
                tag = {"series": s.name} if len(self.series) > 1 else {}
                rows += [{**labels, **tag, self.x: float(x), self.metric: float(v) if good else math.nan}
                         for x, v, good in zip(xs, value, ok, strict=True)]
        return pd.DataFrame(rows, columns=list(self.labels) + [self.metric])

    def run(self, folder: Path, scale: str, **_: Any) -> Any:
        """Check the claims and write the figure's files (module docstring); a :class:`Reproduction`."""
        from fedbound.validation.reproduce import Reproduction, check_scale
        from fedbound.validation.reproduce.figure import draw

        check_scale(scale)
        points = self.tiny_points if scale == "tiny" else self.points
        own = [{**self.values(), **labels, self.x: np.asarray(self.x_values, dtype=float)}
               for labels in self.curves]
        verdicts = [judge_bound_claim(c, points, own) for c in self._claims()]
        stem = f"{self.paper}_{self.figure}"
        files = {"csv": folder / f"{stem}.csv", "verdicts": folder / "verdicts.json"}
        data = self.table()
        data.to_csv(files["csv"], index=False)
        files.update(draw(self, data, folder / f"{stem}.png"))
        doc = {"paper": self.paper, "figure": self.figure, "title": self.title, "scale": scale,
               "kind": self.kind, "x": self.x, "metric": self.metric, "labels": list(self.labels),
               "cases": [", ".join(f"{k}={v}" for k, v in c.items()) for c in self.curves],
               "runs": 0, "failed": {}, "csv": files["csv"].name, "png": files["png"].name,
               "svg": files["svg"].name, "claims": [v.to_json() for v in verdicts]}
        files["verdicts"].write_text(json.dumps(doc, indent=2, default=str) + "\n")
        return Reproduction(self, scale, verdicts, files)
