"""``fedbound.validation.reproduce``: Figure reproduction: a paper's figures as data (``FIGURES`` in one
module per paper: cases, claims, sizes tiny / demo / paper), run through the sweep runner and judged claim
by claim over seeds (training, bound and predicted-vs-measured kinds); ``plots*`` draw the bound figures of
``fedbound plot``.

Modules: ``adaptive``, ``bound``, ``claims``, ``dppfl``, ``figure``, ``nbafl``, ``plots``,
``plots_adaptive``, ``plots_dppfl``, ``plots_nbafl``, ``plots_udp``, ``plots_wpfl``, ``udp``, ``validate``,
``wpfl``.

``fedbound reproduce``: a paper's figure, re-created on the simulator, and its claims judged.

A paper's registry entry points (``Paper.reproduce``) to a tuple of reproduced figures and
:class:`Uncovered` entries (a figure claim fedbound does not reproduce, and why).  A figure is one of three
kinds (``kind``, which ``--list`` and the report show):

* :class:`Target` ("training"): a claim about what training does, judged on a sweep of runs (below);
* :class:`~fedbound.validation.reproduce.bound.BoundFigure` ("bound"): a claim about the bound's formula,
  judged by the checker of ``fedbound claims`` on the figure's setting and the claim's region;
* :class:`~fedbound.validation.reproduce.validate.ValidateFigure` ("predicted vs measured"): the bound
  against training, ``fedbound validate``'s sweep judged for agreement in shape.

A :class:`Target` is data: a
base configuration at demo size, the cases it sweeps (labels and the ``--set`` overrides that make them),
its claims (:class:`~fedbound.validation.reproduce.claims.FigureClaim`) and three scales:

* ``tiny``: seconds, for the tests; ``demo``: minutes on 2 cores, on the embedded data;
* ``paper``: the paper's own setting (:class:`PaperScale`) on the full dataset: MNIST from fedbound's data
  cache (``fedbound data mnist``), CIFAR-10 from the cache or ``--data``, IPUMS-US from ``--data``.  What
  the paper does not state is assumed, and each assumption is named in the output and in
  ``verdicts.json``.  A figure whose data is not there is not run: its result says what it needs
  ("needs CIFAR-10") and the other figures run.

:func:`reproduce` runs the cases x seeds through the sweep runner (batched, resumable, Ray when asked), then
writes ``PAPER_FIGURE.csv`` (the runs' tidy table), ``.png`` / ``.svg`` (the figure) and ``verdicts.json``,
and returns one verdict line per claim; the other kinds write the same files (``verdicts.json`` in the same
schema) through their ``run`` method.  Every run of every scale gets :data:`REPRODUCTION_TRAIN` (the one
place for ``[train]`` keys all reproductions share).  Nothing here names a paper.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fedbound.errors import ConfigError
from fedbound.validation.reproduce.claims import ClaimVerdict, FigureClaim, case_name, judge, run_values

__all__ = ["Case", "Scale", "PaperScale", "Target", "Uncovered", "Reproduction", "MissingData", "cases",
           "grid", "toml_literal", "toml_text", "targets", "find", "specs", "reproduce", "check_scale",
           "verdict_json", "privacy_note", "paper_data", "SCALES", "REPRODUCTION_TRAIN"]

SCALES = ("tiny", "demo", "paper")

REPRODUCTION_TRAIN: tuple[str, ...] = ()
"""``--set`` overrides every reproduction run gets, at every scale, before the scale's and the case's own:
the one place for a ``[train]`` key that all runs reproducing a paper's own mechanisms share."""


def check_scale(name: str) -> str:
    """``name`` if it is one of :data:`SCALES`; a one-line ConfigError otherwise."""
    if name not in SCALES:
        raise ConfigError(f"--scale {name!r} is outside its valid range one of {', '.join(SCALES)}")
    return name


@dataclass(frozen=True)
class Case:
    """One curve or bar of a figure: its ``labels`` (e.g. ``{"eps": 50}``) and the ``--set`` overrides
    (TOML literals, e.g. ``("eps=50",)``) that make its runs."""

    labels: Mapping[str, Any]
    overrides: tuple[str, ...] = ()


def toml_literal(value: Any) -> str:
    """``value`` as a TOML literal (what ``--set`` reads)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def cases(key: str, values: Sequence[Any], *, label: str | None = None,
          extra: Sequence[str] = ()) -> tuple[Case, ...]:
    """One case per value of config ``key`` (``section.KEY`` or ``KEY``), labelled ``label`` (default: the
    key without its section); ``extra`` overrides go to every case."""
    name = label or key.rpartition(".")[2]
    return tuple(Case({name: v}, (*extra, f"{key}={toml_literal(v)}")) for v in values)


def grid(*axes: Sequence[Case]) -> tuple[Case, ...]:
    """Every combination of the cases of ``axes`` (labels and overrides joined), e.g.
    ``grid(cases("T", ...), cases("eps", ...))``."""
    import itertools

    return tuple(Case({k: v for c in combo for k, v in c.labels.items()},
                      tuple(o for c in combo for o in c.overrides)) for combo in itertools.product(*axes))


@dataclass(frozen=True)
class Scale:
    """A size of a target: ``seeds`` per case and ``overrides`` applied to every run (on top of the base
    configuration and before the case's own)."""

    seeds: int
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class PaperScale(Scale):
    """The paper's setting (module docstring).

    ``dataset``: ``mnist`` (the data cache; ``--data`` may name a folder of MNIST IDX files instead),
    ``cifar10`` (the data cache or ``--data``) or ``csv`` (``--data``: one CSV file); ``needs``: the data in
    words, ``what``: its short name (a missing-data result says "needs CIFAR-10"); ``assumptions``: each
    value the paper does not state and fedbound assumes, with why; ``cases``: the figure's cases at the
    paper's values when they differ from the demo's (e.g. the paper's range of T), else None."""

    dataset: str = "mnist"
    needs: str = "the full MNIST (fedbound data mnist)"
    what: str = "MNIST"
    assumptions: tuple[str, ...] = ()
    cases: tuple[Case, ...] | None = None


class MissingData(ConfigError):
    """A paper-scale figure's dataset is not there (``what``: e.g. "CIFAR-10"); the figure is not run."""

    def __init__(self, what: str, message: str) -> None:
        self.what = what
        super().__init__(message)


@dataclass(frozen=True)
class Target:
    """One reproduced figure of a paper (module docstring).

    ``figure``: its id on the command line ("fig2"); ``title``: what the figure shows; ``config``: the base
    configuration (``{section: {key: value}}``) at demo size; ``x``: the figure's x axis, "round" (a curve
    per case, ``metric`` against the round) or a label (``metric`` of each run's end against it);
    ``seconds``: estimated demo run time on 2 idle cores (``--list`` prints it).
    """

    paper: str
    figure: str
    title: str
    config: Mapping[str, Mapping[str, Any]]
    cases: tuple[Case, ...]
    claims: tuple[FigureClaim, ...]
    demo: Scale
    tiny: Scale
    paper_scale: PaperScale
    metric: str = "loss"
    x: str = "round"
    seconds: float = 60.0
    kind: ClassVar[str] = "training"

    def scale(self, name: str) -> Scale:
        return {"tiny": self.tiny, "demo": self.demo, "paper": self.paper_scale}[check_scale(name)]

    def cases_at(self, scale: str) -> tuple[Case, ...]:
        """The figure's cases at ``scale`` (the paper's own values at ``paper`` where they differ)."""
        size = self.scale(scale)
        return getattr(size, "cases", None) or self.cases

    def statements(self) -> list[tuple[str, str]]:
        """(id, statement) of each claim (what ``--list`` prints)."""
        return [(c.id, c.statement) for c in self.claims]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for c in self.cases for k in c.labels))


@dataclass(frozen=True)
class Uncovered:
    """A figure claim fedbound does not reproduce, and why (``--list`` says so)."""

    paper: str
    figure: str
    claim: str
    reason: str


@dataclass
class Reproduction:
    """What :func:`reproduce` made: the verdicts, the files, and the runs that failed (key -> traceback).

    ``needs``: the data a paper-scale figure lacks (then nothing ran and ``verdicts`` is empty);
    ``notes``: further verdict lines (a theorem's premises, the term behind a disagreement);
    ``assumptions``: the values the paper does not state, as assumed at this scale."""

    target: Any
    scale: str
    verdicts: list[Any]
    files: dict[str, Path]
    failed: dict[str, str] = field(default_factory=dict)
    needs: str | None = None
    notes: list[str] = field(default_factory=list)
    assumptions: tuple[str, ...] = ()
    privacy: str | None = None
    """What the runs spend where the figure reproduces a paper past its budget (:func:`privacy_note`)."""

    def lines(self) -> list[str]:
        head = f"{self.target.paper} {self.target.figure}"
        out = [f"{head}: {v.line()}" for v in self.verdicts]
        if self.needs is not None:
            out = [f"{head}: {claim}: needs {self.needs}, not run: {statement}"
                   for claim, statement in self.target.statements()]
        out += [f"{head}: {note}" for note in self.notes]
        if self.needs is not None:
            return out
        if self.privacy:
            out.append(f"{head}: {self.privacy}")
        if self.failed:
            out.append(f"{head}: {len(self.failed)} run(s) failed; their tracebacks are in "
                       f"{self.files['verdicts']}")
        out += [f"{head}: assumed: {a}" for a in self.assumptions]
        return out


def targets(paper: str | None = None) -> list[Any]:
    """Every registered figure entry (reproduced figures of every kind and uncovered claims), of one paper
    or of all."""
    from fedbound.registry import get, papers, resolve

    chosen = [get(paper)] if paper else list(papers().values())
    out: list[Target | Uncovered] = []
    for p in chosen:
        if getattr(p, "reproduce", None):
            out.extend(resolve(p.reproduce))
    return out


def find(paper: str, figure: str) -> Any:
    """The reproduced figure ``figure`` of ``paper``; ConfigError listing the valid figures otherwise."""
    from fedbound.registry import get

    entries = targets(get(paper).name)
    runnable = [t for t in entries if not isinstance(t, Uncovered)]
    for t in runnable:
        if t.figure == figure:
            return t
    why = next((u.reason for u in entries if isinstance(u, Uncovered) and u.figure == figure), None)
    valid = ", ".join(t.figure for t in runnable) or "none"
    if why:
        raise ConfigError(f"{paper} {figure} is not reproduced ({why}); reproduced figures: {valid}")
    raise ConfigError(f"figure {figure!r} is outside its valid range one of {valid} "
                      "(fedbound reproduce --list)")


def toml_text(config: Mapping[str, Mapping[str, Any]]) -> str:
    """A ``{section: {key: value}}`` configuration as TOML text."""
    lines = []
    for section, table in config.items():
        lines.append(f"[{section}]")
        lines.extend(f"{k} = {toml_literal(v)}" for k, v in table.items())
        lines.append("")
    return "\n".join(lines)


def paper_data(spec: PaperScale, figure: str, data: str | Path | None) -> tuple[str, ...]:
    """The ``--set`` overrides that point a paper-scale run of ``figure`` ("PAPER FIG") at its dataset,
    checked once before any run starts: a missing cached dataset is :class:`MissingData`; a bad ``--data``
    path is a one-line ConfigError naming the missing file."""
    from fedbound.training.data import load_dataset
    from fedbound.training.fetch import CACHED, cached_path

    name = spec.dataset
    if data is not None:
        folder_kind = "idx" if name == "mnist" else name
        load_dataset(folder_kind, data_path=str(data))  # one-line ConfigError naming a missing file
        return (f"train.dataset={toml_literal(folder_kind)}", f"train.data_path={toml_literal(str(data))}")
    if name not in CACHED:
        raise MissingData(spec.what, f"--scale paper for {figure} needs --data: {spec.needs}")
    if not cached_path(name).is_file():
        raise MissingData(spec.what, f"--scale paper for {figure} needs the full {spec.what}: "
                                     f"{CACHED[name].how}")
    return (f"train.dataset={toml_literal(name)}",)


def specs(target: Target, config_path: Path, scale: str = "demo", *, seeds: int | None = None,
          data: str | Path | None = None) -> list[Any]:
    """The sweep of ``target`` at ``scale``: one RunSpec per case and seed."""
    from fedbound.validation.sweep import RunSpec

    size = target.scale(scale)
    where = paper_data(size, f"{target.paper} {target.figure}", data) if scale == "paper" else ()
    common = (*REPRODUCTION_TRAIN, *size.overrides, *where)
    n = size.seeds if seeds is None else seeds
    return [RunSpec(target.paper, config_path, (*common, *case.overrides), seed=s, label=dict(case.labels))
            for case in target.cases_at(scale) for s in range(n)]


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def verdict_json(v: ClaimVerdict, kind: str, better: str) -> dict[str, Any]:
    """One claim of ``verdicts.json``: the verdict's numbers and line, the claim's ``kind`` and ``better``."""
    return {"id": v.id, "statement": v.statement, "kind": kind, "metric": v.metric, "better": better,
            "holds": v.holds, "seeds_holding": v.seeds_holding, "seeds": v.seeds,
            "effect": _finite(v.effect), "low": _finite(v.low), "high": _finite(v.high), "values": v.values,
            "line": v.line()}


def privacy_note(summaries: Sequence[Mapping[str, Any]]) -> str | None:
    """One line on the runs of a figure in the paper-reproduction mode (``[train] paper_reproduction``) that
    are not (eps, delta)-DP at their stated budget under exact accounting; None when every run is."""
    over = [s for s in summaries if s.get("paper_reproduction") and s.get("privacy", "").startswith("not ")]
    if not over:
        return None
    worst = max(over, key=lambda s: s.get("epsilon_spent") or math.inf)
    return (f"paper reproduction ([train] paper_reproduction = true): {len(over)} of {len(summaries)} runs "
            f"are {worst['privacy'].split(':')[0]} (the worst: {worst['privacy'].split(': ', 1)[1]})")


def _judge(target: Target, scale: str, run_specs: Sequence[Any], sweep: Any, folder: Path) -> Reproduction:
    """Judge ``target``'s claims on its runs of ``sweep``; write its CSV, figure and ``verdicts.json``."""
    from fedbound.validation.reproduce.figure import draw

    keys = {s.key for s in run_specs}
    failed = {k: tb for k, tb in sweep.failed.items() if k in keys}
    table = sweep.table[sweep.table["key"].isin(keys)]
    if table.empty:
        first = next(iter(failed.values()), "no run produced a row").strip().splitlines()[-1]
        raise ConfigError(f"{target.paper} {target.figure}: every run failed ({first})")
    stem = f"{target.paper}_{target.figure}"
    labels = list(target.labels)
    # one run can serve several figures (same effective config): its labels here are this figure's
    table = table.assign(**{k: table["key"].map({s.key: s.label.get(k) for s in run_specs}) for k in labels})
    columns = [c for c in ("key", "seed", *labels, "round", target.metric,
                           *(c.metric for c in target.claims)) if c in table.columns]
    data_table = table[list(dict.fromkeys(columns))]
    files = {"csv": folder / f"{stem}.csv", "verdicts": folder / "verdicts.json"}
    data_table.to_csv(files["csv"], index=False)
    verdicts = [judge(c, run_values(table, c.metric, labels, c.tail)) for c in target.claims]
    files.update(draw(target, data_table, folder / f"{stem}.png"))
    assumed = assumptions(target, scale)
    doc = {"paper": target.paper, "figure": target.figure, "title": target.title, "scale": scale,
           "x": target.x, "metric": target.metric, "labels": labels,
           "cases": [case_name(c.labels) for c in target.cases_at(scale)], "runs": len(keys),
           "failed": failed, "csv": files["csv"].name, "png": files["png"].name, "svg": files["svg"].name,
           "kind": target.kind, "assumptions": list(assumed),
           "claims": [verdict_json(v, c.kind, c.better)
                      for v, c in zip(verdicts, target.claims, strict=True)]}
    privacy = privacy_note([sweep.summaries[k] for k in keys if k in sweep.summaries])
    doc["privacy"] = privacy
    files["verdicts"].write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return Reproduction(target, scale, verdicts, files, failed, privacy=privacy, assumptions=assumed)


def assumptions(target: Any, scale: str) -> tuple[str, ...]:
    """What ``target`` assumes at ``scale`` that its paper does not state (paper scale only)."""
    if scale != "paper":
        return ()
    own = tuple(getattr(target.scale(scale), "assumptions", ()))
    rounds = getattr(target, "paper_estimate_rounds", None)
    if rounds and own:  # a predicted-vs-measured figure at the paper's own setting
        own = (*own, f"the bound's constants measured along {rounds} non-private rounds")
    return own


def _missing(target: Any, scale: str, folder: Path, exc: MissingData) -> Reproduction:
    """The result of a figure whose data is not there: nothing ran; ``needs.json`` says what it needs."""
    path = folder / "needs.json"
    path.write_text(json.dumps({"paper": target.paper, "figure": target.figure, "title": target.title,
                                "scale": scale, "kind": target.kind, "needs": exc.what, "message": str(exc),
                                "claims": [{"id": c, "statement": t} for c, t in target.statements()]},
                               indent=2) + "\n")
    (folder / "verdicts.json").unlink(missing_ok=True)  # an earlier run's verdicts are not this run's
    return Reproduction(target, scale, [], {"needs": path}, needs=exc.what, notes=[str(exc)],
                        assumptions=assumptions(target, scale))


def reproduce(chosen: Any, out: str | Path, *, scale: str = "demo",
              seeds: int | None = None, data: str | Path | None = None, executor: str = "local",
              workers: int | None = None, address: str | None = None,
              progress: bool = False) -> list[Reproduction]:
    """Run the figures ``chosen`` (one or a sequence) at ``scale`` and judge their claims (module docstring).

    The runs of all training targets form one sweep (runs of equal shape batch together across figures) in
    ``out/runs``, shared by every target and resumed: a finished run is never redone; the other kinds run
    their own.  Each figure's files go to ``out/PAPER/FIGURE/``; the results come in the order of
    ``chosen``.  ``seeds`` overrides the scale's number of seeds (1..1000).  At ``paper`` scale a figure
    whose dataset is missing is not run: its result ``needs`` it, and the others run."""
    from fedbound.checks import check_int
    from fedbound.validation.sweep import run_sweep

    chosen = list(chosen) if isinstance(chosen, Sequence) else [chosen]
    check_scale(scale)
    if seeds is not None:
        seeds = int(check_int("--seeds", seeds, 1, 1000))
    out = Path(out)
    plans, results = [], {}
    for i, target in enumerate(chosen):
        folder = out / target.paper / target.figure
        folder.mkdir(parents=True, exist_ok=True)
        if not isinstance(target, Target):
            continue
        config_path = folder / "config.toml"
        config_path.write_text(toml_text(target.config))
        try:
            plans.append((i, target, specs(target, config_path, scale, seeds=seeds, data=data), folder))
        except MissingData as exc:
            results[i] = _missing(target, scale, folder, exc)
    if plans:
        sweep = run_sweep([s for _, _, run_specs, _ in plans for s in run_specs], out / "runs",
                          executor=executor, workers=workers, address=address, batch=True, progress=progress)
        results.update({i: _judge(target, scale, run_specs, sweep, folder)
                        for i, target, run_specs, folder in plans})
    for i, target in enumerate(chosen):
        if i not in results:
            folder = out / target.paper / target.figure
            try:
                results[i] = target.run(folder, scale, seeds=seeds, executor=executor, workers=workers,
                                        address=address, progress=progress, data=data)
            except MissingData as exc:
                results[i] = _missing(target, scale, folder, exc)
    return [results[i] for i in range(len(chosen))]
