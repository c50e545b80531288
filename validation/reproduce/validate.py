"""A figure that sets the bound against training: :class:`ValidateFigure` (predicted vs measured).

Some figures of a paper plot the theoretical bound next to the measured loss over a parameter and claim that
they "agree in shape".  A :class:`ValidateFigure` runs :func:`fedbound.validation.estimate.validate.validate`
on a small configuration where the paper's theorem applies at the measured constants, then judges the claim
per seed: the Spearman rank correlation between the bound and that seed's measured gap ``F(w_T) - F*`` over
the swept values is positive.  The claim holds when it does in a strict majority of the seeds; the effect size
is the mean correlation with its 95 % Student-t interval (:func:`~fedbound.validation.reproduce.claims.
mean_interval`).  It writes validate's files (``validation.csv`` / ``.json`` / ``.png`` / ``.svg``), the
figure's curves as ``PAPER_FIGURE.csv`` (measured gap per seed, the bound, the calibrated bound) and
``verdicts.json`` in the reproduce schema.  Nothing here names a paper.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fedbound.validation.reproduce import Scale

__all__ = ["ValidateFigure", "shape_verdict", "notes", "bound_vs_T", "SMALL_CONVEX"]

METRIC = "gap"


def shape_verdict(claim_id: str, statement: str, vs: str, x: np.ndarray, bound: np.ndarray,
                  runs: Any) -> Any:
    """Judge "bound and measured gap agree in shape over ``vs``" per seed (module docstring).

    ``runs``: one row per run with columns ``seed``, ``vs`` and ``gap``; ``bound``: the bound at ``x``.
    A seed whose gap or bound (where defined) is constant has no rank order: its correlation counts as 0."""
    from scipy import stats

    from fedbound.validation.reproduce.claims import ClaimVerdict, mean_interval

    at = dict(zip(np.asarray(x, dtype=float).tolist(), np.asarray(bound, dtype=float).tolist(), strict=True))
    rhos, values = {}, {}
    for seed, group in runs.groupby("seed", sort=True):
        group = group.sort_values(vs)
        b = np.array([at.get(float(v), math.nan) for v in group[vs]])
        gap = group[METRIC].to_numpy(dtype=float)
        ok = np.isfinite(b) & np.isfinite(gap)
        defined = ok.sum() >= 3 and np.ptp(b[ok]) > 0 and np.ptp(gap[ok]) > 0
        rhos[str(int(seed))] = float(stats.spearmanr(b[ok], gap[ok]).statistic) if defined else 0.0
        values[str(int(seed))] = {f"{vs}={v:g}": float(g) for v, g in zip(group[vs], gap, strict=True)}
    if not rhos:
        raise ValueError(f"claim {claim_id}: no run finished ({statement})")
    effects = np.array(list(rhos.values()))
    held = int((effects > 0).sum())
    mean, low, high = mean_interval(effects, low=-1.0, high=1.0)  # a Spearman correlation: clipped
    return ClaimVerdict(claim_id, statement, 2 * held > len(effects), held, len(effects), mean, low, high,
                        METRIC, values)


def _curves(result: Any, runs: Any) -> Any:
    """The figure's curves, one row per point: the measured gap of each run, the bound (paper noise) and
    the calibrated bound at each swept value."""
    import pandas as pd

    vs = result.vs
    x = [p[vs] for p in result.measured]
    rows = [{"series": "measured gap", "seed": int(r["seed"]), vs: float(r[vs]), METRIC: float(r[METRIC])}
            for _, r in runs.iterrows()]
    predicted = {f"bound, {result.theorem}": result.bound["paper"],
                 "calibrated bound": result.calibrated["prediction"]}
    for name, values in predicted.items():
        rows += [{"series": name, "seed": None, vs: float(v), METRIC: math.nan if p is None else float(p)}
                 for v, p in zip(x, values, strict=True)]
    return pd.DataFrame(rows, columns=["series", "seed", vs, METRIC]).astype({"seed": "Int64"})


@dataclass(frozen=True)
class ValidateFigure:
    """A predicted-vs-measured figure of ``paper`` (module docstring).

    ``config``: the configuration (``{section: {key: value}}``) at demo size, one where the theorem's
    hypotheses hold at the measured constants; ``vs`` / ``values``: the swept parameter and its values at
    demo size, ``tiny_values`` in the tests; ``demo`` / ``tiny``: seeds and ``--set`` overrides
    (:class:`~fedbound.validation.reproduce.Scale`); ``claim`` / ``statement``: the claim's id and words;
    ``seconds``: demo run time on 2 idle cores.  ``paper_scale`` (a
    :class:`~fedbound.validation.reproduce.PaperScale`), ``paper_config`` and ``paper_values``: the paper's
    own setting (its model and data, where the theorem's premises need not hold: the output says which
    fail), its constants measured along ``paper_estimate_rounds`` non-private rounds (a full-size model's
    Hessian spectra cost minutes per trajectory point); without them ``--scale paper`` runs the demo
    setting."""

    paper: str
    figure: str
    title: str
    config: Mapping[str, Mapping[str, Any]]
    vs: str
    values: tuple[float, ...]
    tiny_values: tuple[float, ...]
    claim: str
    statement: str
    demo: Any
    tiny: Any
    seconds: float = 40.0
    paper_scale: Any = None
    paper_config: Mapping[str, Mapping[str, Any]] | None = None
    paper_values: tuple[float, ...] | None = None
    paper_estimate_rounds: int = 3
    kind: ClassVar[str] = "predicted vs measured"

    def scale(self, name: str) -> Any:
        """The seeds and overrides of size ``name`` (``paper``: the paper's, else the demo's)."""
        return {"tiny": self.tiny, "demo": self.demo, "paper": self.paper_scale or self.demo}[name]

    @property
    def x(self) -> str:
        return self.vs

    @property
    def metric(self) -> str:
        return METRIC

    @property
    def labels(self) -> tuple[str, ...]:
        return ("series", self.vs)

    def statements(self) -> list[tuple[str, str]]:
        return [(self.claim, self.statement)]

    def run(self, folder: Path, scale: str, *, seeds: int | None = None, executor: str = "local",
            address: str | None = None, progress: bool = False, data: str | Path | None = None,
            **_: Any) -> Any:
        """Run validate at ``scale`` and judge the claim; a :class:`~fedbound.validation.reproduce.
        Reproduction` whose notes carry validate's verdict on the theorem's premises (when they fail) and
        on the shape (the term responsible when it disagrees)."""
        import pandas as pd

        from fedbound.validation.estimate.validate import validate
        from fedbound.validation.reproduce import (
            REPRODUCTION_TRAIN,
            Reproduction,
            assumptions,
            check_scale,
            paper_data,
            toml_text,
            verdict_json,
        )

        check_scale(scale)
        size = self.scale(scale)
        own = scale == "paper" and self.paper_scale is not None
        overrides = (*REPRODUCTION_TRAIN, *size.overrides,
                     *(paper_data(size, f"{self.paper} {self.figure}", data) if own else ()))
        values = self.tiny_values if scale == "tiny" else (self.paper_values or self.values) if own \
            else self.values
        config = folder / "config.toml"
        config.write_text(toml_text(self.paper_config or self.config if own else self.config))
        result = validate(self.paper, config, vs=self.vs, values=list(values),
                          seeds=size.seeds if seeds is None else seeds, out=folder, executor=executor,
                          address=address, overrides=overrides, cache=folder / "cache",
                          progress=progress, **({"rounds": self.paper_estimate_rounds} if own else {}))
        table = pd.read_csv(result.files["csv"])
        runs = table[table["kind"] == "run"]
        verdict = shape_verdict(self.claim, self.statement, self.vs, np.array([p[self.vs] for p in
                                result.measured]), np.array(result.bound["paper"], dtype=float), runs)
        stem = f"{self.paper}_{self.figure}"
        files = {"csv": folder / f"{stem}.csv", "verdicts": folder / "verdicts.json",
                 "png": Path(result.files["png"]), "svg": Path(result.files["svg"]),
                 "validation": Path(result.files["json"])}
        _curves(result, runs).to_csv(files["csv"], index=False)
        doc = {"paper": self.paper, "figure": self.figure, "title": self.title, "scale": scale,
               "kind": self.kind, "x": self.vs, "metric": METRIC, "labels": list(self.labels),
               "cases": [f"{self.vs}={v:g}" for v in result.values], "runs": int(len(runs)),
               "failed": result.failed, "csv": files["csv"].name, "png": files["png"].name,
               "svg": files["svg"].name, "validation": [v["text"] for v in result.verdicts.values()],
               "assumptions": list(assumptions(self, scale)), "notes": notes(result.verdicts),
               "claims": [verdict_json(verdict, "rank_agreement", "higher")]}
        files["verdicts"].write_text(json.dumps(doc, indent=2, default=str) + "\n")
        return Reproduction(self, scale, [verdict], files, dict(result.failed), notes=doc["notes"],
                            assumptions=assumptions(self, scale))


Config = Mapping[str, Mapping[str, Any]]

SMALL_CONVEX = {"synthetic_samples": 240, "synthetic_dim": 4, "test_fraction": 0.0, "model": "logreg",
                "eval_clients": False}
"""The ``[train]`` keys the papers' small convex examples share (240 synthetic records of 4 features, a linear
model): constants measured exactly, a validate run in seconds."""


def bound_vs_T(paper: str, theorem: str, demo: Config, demo_values: tuple[float, ...], paper_scale: Any,
               paper_config: Config, paper_values: tuple[float, ...], seconds: float = 10.0
               ) -> ValidateFigure:
    """fedbound's predicted-vs-measured check of a paper's theorem over T (``bound-vs-T``; the paper has no
    such figure): at demo size on a small convex task where the theorem's premises can hold, at paper size on
    the paper's own model and data (the output says which premises fail there).  Both run the paper's own
    mechanism in the labelled paper-reproduction mode (``[train] paper_reproduction``), like every figure."""
    demo = {**demo, "train": {**demo["train"], "paper_reproduction": True}}
    paper_config = {**paper_config, "train": {**paper_config["train"], "paper_reproduction": True}}
    title = (f"{theorem}'s bound against the measured gap F(w_T) - F* over T (fedbound's check: the paper "
             "plots no such figure; demo: a small convex task, paper: its own model and MNIST)")
    statement = (f"the bound ({theorem}) and the measured gap agree in shape over T (Spearman rank "
                 "correlation > 0)")
    return ValidateFigure(paper, "bound-vs-T", title, demo, "T", demo_values, demo_values[:3], "PV",
                          statement, Scale(seeds=3), Scale(seeds=1), seconds=seconds,
                          paper_scale=paper_scale, paper_config=paper_config, paper_values=paper_values)


def notes(verdicts: Mapping[str, Any]) -> list[str]:
    """validate's verdicts that a reproduction line must carry: the theorem's premises where they fail at the
    measured constants (or where the bound is violated), and the shape verdict where it names the term
    responsible for a disagreement."""
    out = []
    if verdicts["holds"]["status"] != "holds":
        out.append(f"theorem: {verdicts['holds']['text']}")
    if verdicts["rank"].get("responsible"):
        out.append(f"shape: {verdicts['rank']['text']}")
    return out

