"""``fedbound.validation.sweep``: Sweeps: many runs, one batch. A run is a ``RunSpec`` keyed by its effective
configuration; ``run_sweep`` trains what is not finished (batched in one engine call where runs share model
and local optimiser; resumable; a failed run keeps its traceback and the others finish), on a local or Ray
executor, and returns the sweep's table. Results equal the runs trained alone.

Modules: ``executors``, ``store``, ``worker``.

Sweeps: many training runs (configs x seeds), stored by key, resumable, batched, in one tidy table.

A :class:`RunSpec` is one ``fedbound train PAPER CONFIG --set ... --seed S``; its :attr:`RunSpec.key` is a
hash of the run's full effective configuration (both sections after overrides, aliases and defaults), its
seed and the fedbound version, never of the file's path.  :func:`run_sweep` trains every spec not already
finished in ``out`` (layout: :mod:`fedbound.validation.sweep.store`) and returns a :class:`Sweep`:

* ``table``: one row per run and recorded round (the run's aggregate metrics rows, not per-client rows),
  with ``key``, ``paper``, ``seed`` and the spec's ``label`` columns first;
* ``summaries``: each run's ``summary.json``; ``failed``: each failed run's traceback;
* ``damaged``: runs found finished but damaged (a file edited, truncated or overwritten since it was
  written; :meth:`~fedbound.validation.sweep.store.SweepStore.damage`): why, by key.  :func:`run_sweep`
  moves each to ``damaged/<key>/`` and trains it again; :func:`load_sweep` leaves it out.

Runs that share model and data shape train together in one engine call (``batch=True``,
:func:`fedbound.training.engine.run_batch`): each run's numbers equal running it alone.  Executors:
``"local"`` (in this process; ``workers > 1``: a process pool over groups of runs) and ``"ray"``
(:mod:`fedbound.validation.sweep.executors`).  Re-running on the same ``out`` skips finished runs and redoes
unfinished or failed ones; a failed run never stops the others.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from fedbound.errors import ConfigError
from fedbound.validation.sweep.store import SweepStore

__all__ = ["RunSpec", "Sweep", "run_sweep", "load_sweep", "check_swept", "TABLE_FIRST_COLUMNS"]

TABLE_FIRST_COLUMNS = ("key", "paper", "seed")


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: ``fedbound train PAPER CONFIG --set OVERRIDES`` with ``[train] seed = seed``.

    ``label``: the swept values (e.g. ``{"T": 20}``), copied into every table row of the run.
    """

    paper: str
    config: str | Path
    overrides: tuple[str, ...] = ()
    seed: int = 0
    label: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", tuple(self.overrides))
        object.__setattr__(self, "label", dict(self.label))

    def prepare(self):
        """The run's validated effective configuration
        (:class:`~fedbound.validation.recipes.runner.PreparedRun`)."""
        from fedbound.validation.recipes.runner import prepare_run

        return prepare_run(self.paper, self.config, self.overrides, seed=self.seed)

    @cached_property
    def key(self) -> str:
        """Hash of the effective configuration (both sections), the seed and the fedbound version."""
        return self.prepare().key

    def to_json(self) -> dict[str, Any]:
        return {"paper": self.paper, "config": str(self.config), "overrides": list(self.overrides),
                "seed": self.seed, "label": dict(self.label), "key": self.key}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSpec:
        return cls(data["paper"], data["config"], tuple(data["overrides"]), int(data["seed"]),
                   dict(data.get("label", {})))


def check_swept(specs: Sequence[RunSpec], key: str, setting: str | None = None) -> None:
    """Each swept value of label ``key`` (the first run of each) prepared before anything trains: a value
    outside the range of the config key it sets (``setting``, default ``key``) is a one-line ConfigError
    naming ``--values`` and the value (not the ``--set`` it became)."""
    from fedbound.errors import ConfigError, ParameterError

    seen = set()
    for spec in specs:
        value = spec.label.get(key)
        if repr(value) in seen:
            continue
        seen.add(repr(value))
        try:
            spec.prepare()
        except (ConfigError, ParameterError) as exc:
            if f"{setting or key}=" not in str(exc):
                raise
            shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
            raise ConfigError(f"--values {shown}: {exc}") from None


@dataclass
class Sweep:
    """A sweep's results (module docstring)."""

    out: Path
    table: Any
    summaries: dict[str, dict]
    failed: dict[str, str]
    specs: dict[str, RunSpec] = field(default_factory=dict)
    damaged: dict[str, str] = field(default_factory=dict)

    def final(self):
        """One row per finished run: its last recorded round, with its label and seed."""
        if self.table.empty:
            return self.table.copy()
        last = self.table.groupby("key", sort=False)["round"].transform("max") == self.table["round"]
        return self.table[last].reset_index(drop=True)


def _run_table(store: SweepStore, spec: RunSpec, label_columns: Sequence[str]):
    """The aggregate rows of a finished run's metrics.csv, with key, paper, seed and label columns first."""
    import pandas as pd

    frame = pd.read_csv(store.run_dir(spec.key) / "metrics.csv")
    if "client" in frame.columns:
        frame = frame[frame["client"].isna()].drop(columns="client")
    front = {"key": spec.key, "paper": spec.paper, "seed": spec.seed}
    front.update({c: spec.label.get(c) for c in label_columns})
    for i, (name, value) in enumerate(front.items()):
        frame.insert(i, name, [value] * len(frame))
    return frame.reset_index(drop=True)


def _collect(store: SweepStore, specs: Sequence[RunSpec]) -> Sweep:
    import pandas as pd

    labels = list(dict.fromkeys(c for s in specs for c in s.label))
    clash = [c for c in labels if c in TABLE_FIRST_COLUMNS]
    if clash:
        raise ConfigError(f"sweep label {clash[0]!r} clashes with a table column; rename the label")
    frames, summaries, kept = [], {}, {}
    failures = store.failures()
    for spec in specs:
        if spec.key in kept or not store.is_finished(spec.key):
            continue
        kept[spec.key] = spec
        frames.append(_run_table(store, spec, labels))
        summaries[spec.key] = json.loads((store.run_dir(spec.key) / "summary.json").read_bytes())
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=[*TABLE_FIRST_COLUMNS, *labels, "round"])
    failed = {s.key: failures[s.key] for s in specs if s.key in failures and s.key not in kept}
    return Sweep(store.out, table, summaries, failed, kept)


def load_sweep(out: str | Path) -> Sweep:
    """The finished runs (and failures) of the sweep in ``out``, without running anything."""
    store = SweepStore(out)
    if not store.out.is_dir():
        raise ConfigError(f"sweep folder {str(out)!r} does not exist: run the sweep first")
    specs, damaged = [], {}
    for key in store.finished_keys():
        if (why := store.damage(key)) is not None:
            damaged[key] = why
            continue
        data = json.loads((store.run_dir(key) / "spec.json").read_text(encoding="utf-8"))
        spec = RunSpec.from_json(data)
        spec.__dict__["key"] = data["key"]  # the key it was stored under (a later version hashes anew)
        specs.append(spec)
    specs.sort(key=lambda s: (s.paper, str(s.config), s.overrides, s.seed))
    sweep = _collect(store, specs)
    sweep.failed.update({k: v for k, v in store.failures().items() if k not in sweep.summaries})
    sweep.damaged.update(damaged)
    return sweep


def run_sweep(specs: Sequence[RunSpec], out: str | Path, *, executor: str = "local",
              workers: int | None = None, address: str | None = None, batch: bool = True,
              progress: bool = True, checkpoint_every_s: float = 5.0) -> Sweep:
    """Train every spec not yet finished in ``out`` and return the sweep's results (module docstring).

    ``executor``: ``"local"`` or ``"ray"`` (``address``: the Ray cluster; none starts a local runtime);
    ``workers``: processes (local) or concurrent tasks (Ray); ``batch``: train compatible runs in one
    engine call; ``checkpoint_every_s``: how often a run in progress is checkpointed (a killed run redoes
    at most that much; 0 = every round).  Invalid configurations are errors before anything trains.
    """
    from fedbound.validation.sweep.executors import execute

    specs = list(specs)
    if workers is not None and workers < 1:
        raise ConfigError(f"workers = {workers} is outside its valid range: an integer >= 1")
    if not checkpoint_every_s >= 0:
        raise ConfigError(f"checkpoint_every_s = {checkpoint_every_s} is outside its valid range: >= 0 "
                          "seconds")
    for spec in specs:
        spec.key  # noqa: B018 - validates each config now (a bad one is a one-line error before any run)
    store = SweepStore(out)
    store.out.mkdir(parents=True, exist_ok=True)
    damaged = {}
    for key in dict.fromkeys(s.key for s in specs):  # a damaged finished run is set aside and trained again
        if store.run_dir(key).exists() and (why := store.damage(key)) is not None:
            store.set_aside(key, why)
            damaged[key] = why
    todo = list({s.key: s for s in specs if not store.is_finished(s.key)}.values())
    if todo:
        execute(todo, store.out, executor=executor, workers=workers, address=address, batch=batch,
                progress=progress, total=len({s.key for s in specs}), checkpoint_every_s=checkpoint_every_s)
    sweep = _collect(store, specs)
    sweep.damaged.update(damaged)
    sweep.table.to_csv(store.out / "table.csv", index=False)
    return sweep
