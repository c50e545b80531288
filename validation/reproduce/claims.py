"""Figure claims as data, and one judge for all of them.

A paper's figure makes a qualitative claim about what training does ("the loss decreases as eps grows", "there
is an optimal K", "the proposed schedule beats round-robin").  A :class:`FigureClaim` states one such claim
over the runs of a reproduction sweep; :func:`judge` decides it seed by seed and measures its effect size.

Kinds (``FigureClaim.kind``); ``better`` says which direction of ``metric`` is better ("lower" for a loss,
"higher" for an accuracy):

* ``increasing`` / ``decreasing``: ``metric`` along ``x`` (a label of the runs) is monotone in every step.
  Effect size: the change from the smallest to the largest ``x``, signed so that the claimed direction is
  positive.
* ``interior_optimum``: the best ``metric`` over ``x`` is at neither end.  Effect size: the better end minus
  the best interior value (positive when the interior wins).
* ``optimum_increasing``: the best value of ``x`` (the argmin of a loss, the argmax of an accuracy) grows with
  the label ``by`` ("the optimal T grows with eps"): over the values of ``by`` in order it never falls and
  ends higher than it starts.  Effect size: the best ``x`` at the largest ``by`` minus that at the smallest.
* ``worsens_faster``: along ``x``, the runs labelled ``case`` get worse (or improve less) than those labelled
  ``other`` ("FedAMP degrades faster with T0").  The change of each is its value at the largest ``x`` minus
  that at the smallest.  Effect size: the change of ``other`` minus that of ``case``, in the better
  direction (positive when ``case`` worsens faster).
* ``beats``: the runs labelled ``case`` are better than those labelled ``other``.  Effect size: the paired
  difference, positive when ``case`` wins.
* ``best``: ``case`` is better than every other run of the figure (``among`` restricts the rivals).  Effect
  size: the margin to the best rival.

A claim holds in a seed when its condition is true for that seed's runs; it holds when it does in a strict
majority of the seeds.  The effect size is reported as its mean over seeds with a 95 % Student-t interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FigureClaim", "ClaimVerdict", "judge", "run_values", "mean_interval", "KINDS"]

KINDS = ("increasing", "decreasing", "interior_optimum", "optimum_increasing", "worsens_faster", "beats",
         "best")


@dataclass(frozen=True)
class FigureClaim:
    """One qualitative claim of a paper's figure, over the runs of a reproduction sweep.

    ``statement``: the claim in words (the paper's, with its figure).  ``metric``: a column of the sweep's
    table ("loss", "test_accuracy", "round" ...), averaged over the last ``tail`` evaluated rounds of each run
    (``tail = 0``: its last value).  ``where``: only runs whose labels equal these values.  ``x``: the label
    the monotone and optimum kinds look along.  ``case`` / ``other`` / ``among``: label values naming runs.
    """

    id: str
    statement: str
    kind: str
    metric: str
    better: str = "lower"
    x: str | None = None
    where: Mapping[str, Any] = field(default_factory=dict)
    case: Mapping[str, Any] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)
    among: tuple[Mapping[str, Any], ...] = ()
    tail: int = 3
    by: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind {self.kind!r} is outside its valid range one of "
                             f"{', '.join(KINDS)}")
        if self.better not in ("lower", "higher"):
            raise ValueError(f"claim {self.id}: better {self.better!r} is outside its valid range lower, "
                             "higher")
        if self.kind in ("increasing", "decreasing", "interior_optimum", "optimum_increasing",
                         "worsens_faster") and not self.x:
            raise ValueError(f"claim {self.id}: kind {self.kind!r} needs x (the label to look along)")
        if self.kind == "optimum_increasing" and not self.by:
            raise ValueError(f"claim {self.id}: kind 'optimum_increasing' needs by (the label the optimum "
                             "of x moves with)")
        if self.kind in ("beats", "best", "worsens_faster") and not self.case:
            raise ValueError(f"claim {self.id}: kind {self.kind!r} needs case (the labels of its runs)")
        if self.kind in ("beats", "worsens_faster") and not self.other:
            raise ValueError(f"claim {self.id}: kind {self.kind!r} needs other (the labels of the rival "
                             "runs)")


@dataclass(frozen=True)
class ClaimVerdict:
    """The judgement of one claim: in how many seeds it holds, its effect size with a 95 % interval, and the
    per-seed numbers it was decided on (``values``: seed -> {case: value})."""

    id: str
    statement: str
    holds: bool
    seeds_holding: int
    seeds: int
    effect: float
    low: float
    high: float
    metric: str
    values: dict[str, dict[str, float]]

    def line(self) -> str:
        """One line: 'holds in k/n seeds, effect size x (95 % interval)' or 'does not hold' with numbers."""
        effect = f"effect size {_fmt(self.effect)} ({_interval(self.low, self.high)})"
        if self.holds:
            return f"{self.id} holds in {self.seeds_holding}/{self.seeds} seeds, {effect}: {self.statement}"
        means = _case_means(self.values)
        numbers = ", ".join(f"{case}: {_fmt(v)}" for case, v in means.items())
        return (f"{self.id} does not hold (in {self.seeds_holding}/{self.seeds} seeds), {effect}; "
                f"mean {self.metric}: {numbers}: {self.statement}")


def _fmt(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.4g}"


def _interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "95 % interval n/a with one seed"
    return f"95 % interval {_fmt(low)} to {_fmt(high)}"


def _case_means(values: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    cases: dict[str, list[float]] = {}
    for per_seed in values.values():
        for case, v in per_seed.items():
            cases.setdefault(case, []).append(v)
    return {case: float(np.mean(v)) for case, v in cases.items()}


def case_name(labels: Mapping[str, Any]) -> str:
    """A run's labels as one readable name, e.g. 'eps=50' or 'policy=random, eps=20'."""
    return ", ".join(f"{k}={v}" for k, v in labels.items() if not _missing(v))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and math.isnan(value))


def run_values(table: Any, metric: str, labels: Sequence[str], tail: int = 3) -> Any:
    """One row per run: its seed, its labels and ``metric`` averaged over its last ``tail`` rounds.

    ``table`` is a sweep's tidy table (one row per run and round).  A metric that is missing for a run (NaN
    in every round) leaves the run out, so a claim never silently compares NaN."""
    import pandas as pd

    if metric not in table.columns:
        raise ValueError(f"metric {metric!r} is not a column of the sweep table (columns: "
                         f"{', '.join(map(str, table.columns))})")
    rows = []
    for key, run in table.sort_values("round").groupby("key", sort=False):
        series = run[metric].dropna()
        if series.empty:
            continue
        last = tail <= 0 or metric == "round"
        value = float(series.iloc[-1]) if last else float(series.iloc[-tail:].mean())
        first = run.iloc[0]
        rows.append({"key": key, "seed": int(first["seed"]), **{k: first[k] for k in labels}, "value": value})
    return pd.DataFrame(rows, columns=["key", "seed", *labels, "value"])


def _matches(row: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(_same(row.get(k), v) for k, v in wanted.items())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float | np.number) and isinstance(b, int | float) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b or str(a) == str(b)


Outcome = tuple[bool, float, dict[str, float]]


def _seed_outcome(claim: FigureClaim, runs: list[dict[str, Any]]) -> Outcome | None:
    """(holds, effect, {case: value}) for one seed's runs; None when the seed lacks runs the claim needs."""
    sign = -1.0 if claim.better == "lower" else 1.0  # sign * value: larger is better
    if claim.kind == "optimum_increasing":
        return _optimum_outcome(claim, runs, sign)
    if claim.kind == "worsens_faster":
        return _change_outcome(claim, runs, sign)
    if claim.kind in ("increasing", "decreasing", "interior_optimum"):
        points = sorted(((r[claim.x], r["value"]) for r in runs if not _missing(r.get(claim.x))),
                        key=lambda p: p[0])
        if len(points) < (3 if claim.kind == "interior_optimum" else 2):
            return None
        xs, ys = [p[0] for p in points], np.array([p[1] for p in points])
        named = {f"{claim.x}={x}": float(y) for x, y in zip(xs, ys, strict=True)}
        if claim.kind == "interior_optimum":
            score = sign * ys
            best_interior = float(score[1:-1].max())
            effect = best_interior - float(max(score[0], score[-1]))
            return effect > 0, effect, named
        steps = np.diff(ys) * (1.0 if claim.kind == "increasing" else -1.0)
        return bool(np.all(steps > 0)), float(steps.sum()), named
    mine = [r["value"] for r in runs if _matches(r, claim.case)]
    if claim.kind == "beats":
        rivals = {case_name(claim.other): [r["value"] for r in runs if _matches(r, claim.other)]}
    else:
        pool = [r for r in runs if not _matches(r, claim.case)
                and (not claim.among or any(_matches(r, a) for a in claim.among))]
        rivals: dict[str, list[float]] = {}
        for r in pool:
            rivals.setdefault(r["case"], []).append(r["value"])
    if not mine or not rivals or not all(rivals.values()):
        return None
    own = float(np.mean(mine))
    rival_means = {case: float(np.mean(v)) for case, v in rivals.items()}
    effect = min(sign * (own - v) for v in rival_means.values())
    return effect > 0, effect, {case_name(claim.case): own, **rival_means}


def mean_interval(effects: Any, low: float | None = None, high: float | None = None
                  ) -> tuple[float, float, float]:
    """The mean of per-seed ``effects`` and its 95 % Student-t interval (NaN bounds with one seed).

    ``low``/``high``: the range of the quantity (e.g. [-1, 1] for a correlation, [0, inf) for a gap); the
    interval is clipped to it, so it never claims values the quantity cannot take.  Clipping keeps the
    interval's coverage (the true mean lies in the range) and only drops impossible values."""
    from scipy import stats

    effects = np.asarray(effects, dtype=float)
    n, mean = len(effects), float(np.mean(effects))
    if n < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, n - 1) * effects.std(ddof=1) / math.sqrt(n))
    lo, hi = mean - half, mean + half
    if low is not None:
        lo = max(lo, low)
    if high is not None:
        hi = min(hi, high)
    return mean, lo, hi


def _optimum_outcome(claim: FigureClaim, runs: list[dict[str, Any]], sign: float) -> Outcome | None:
    """``optimum_increasing`` for one seed: the best ``x`` at each value of ``by`` (module docstring)."""
    groups: dict[Any, list[tuple[Any, float]]] = {}
    for r in runs:
        if not (_missing(r.get(claim.x)) or _missing(r.get(claim.by))):
            groups.setdefault(r[claim.by], []).append((r[claim.x], sign * r["value"]))
    groups = {b: pts for b, pts in groups.items() if len(pts) >= 2}
    if len(groups) < 2:
        return None
    order = sorted(groups)
    best = [max(groups[b], key=lambda p: p[1])[0] for b in order]
    steps = np.diff(np.asarray(best, dtype=float))
    holds = bool(np.all(steps >= 0) and steps.sum() > 0)
    named = {f"best {claim.x} at {claim.by}={b}": float(x) for b, x in zip(order, best, strict=True)}
    return holds, float(steps.sum()), named


def _change_outcome(claim: FigureClaim, runs: list[dict[str, Any]], sign: float) -> Outcome | None:
    """``worsens_faster`` for one seed: the change of ``case`` and of ``other`` along ``x`` (module
    docstring)."""
    changes = {}
    for labels in (claim.case, claim.other):
        points = sorted(((r[claim.x], r["value"]) for r in runs
                         if _matches(r, labels) and not _missing(r.get(claim.x))), key=lambda p: p[0])
        if len(points) < 2:
            return None
        changes[f"change of {case_name(labels)} over {claim.x}"] = points[-1][1] - points[0][1]
    mine, theirs = changes.values()
    effect = sign * (theirs - mine)
    return effect > 0, float(effect), {k: float(v) for k, v in changes.items()}


def judge(claim: FigureClaim, values: Any) -> ClaimVerdict:
    """Decide ``claim`` on the per-run values of :func:`run_values` (module docstring: per seed, then the
    majority; the effect size's 95 % interval is Student's t over seeds)."""
    label_cols = [c for c in values.columns if c not in ("key", "seed", "value")]
    outcomes: dict[str, tuple[bool, float, dict[str, float]]] = {}
    for seed, group in values.groupby("seed", sort=True):
        runs = []
        for rec in group.to_dict("records"):
            if _matches(rec, claim.where):
                rec["case"] = case_name({k: rec[k] for k in label_cols})
                runs.append(rec)
        outcome = _seed_outcome(claim, runs)
        if outcome is not None:
            outcomes[str(seed)] = outcome
    effects = np.array([o[1] for o in outcomes.values()])
    n, k = len(effects), sum(o[0] for o in outcomes.values())
    if n == 0:
        raise ValueError(f"claim {claim.id}: no seed has the runs it compares ({claim.statement})")
    mean, low, high = mean_interval(effects)
    return ClaimVerdict(claim.id, claim.statement, 2 * k > n, int(k), n, mean, low, high, claim.metric,
                        {seed: o[2] for seed, o in outcomes.items()})
