"""What a sweep worker does with a group of runs: take them, train them (together when they batch), store
them.  Used by every executor (:mod:`fedbound.validation.sweep.executors`): in the calling process, in a pool
process, or in a Ray task.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from fedbound.validation.sweep.store import SweepStore

__all__ = ["train_group", "group_specs", "Report", "HEARTBEAT", "heartbeat", "rounds_done"]

Report = Callable[[str, str], None]
"""``report(event, key)`` with event ``"running"``, ``"done"``, ``"failed"`` or ``"busy"`` (another
worker owns the run)."""

HEARTBEAT = "progress.txt"
"""In a run's work folder: ``"DONE PLANNED"`` rounds, rewritten after every round (what the sweep's progress
bar and its ETA count, from any process or machine that sees the folder)."""


def heartbeat(work: Path) -> Callable[[int, int], None]:
    """The engine's per-round progress callable for a run trained in ``work`` (writes :data:`HEARTBEAT`)."""
    path = work / HEARTBEAT

    def beat(done: int, total: int) -> None:
        try:
            path.write_text(f"{done} {total}\n")
        except OSError:  # progress is a courtesy: never stop a run for it
            pass

    return beat


def rounds_done(work: Path) -> tuple[int, int] | None:
    """``(done, planned)`` rounds of the run in progress in ``work``, or None before its first round."""
    try:
        done, total = (int(v) for v in (work / HEARTBEAT).read_text().split())
    except (OSError, ValueError):
        return None
    return done, total


def _quiet(event: str, key: str) -> None:
    return None


def group_specs(specs: Sequence, batch: bool) -> list[list]:
    """Specs in groups that may train in one engine call: the same paper and the same ``[train]`` table up
    to its seed (the engine still checks model, data shape and local optimiser, and runs the rest solo).
    Settings may differ (T, sigma, eps, K ...).  Without ``batch``: one spec per group."""
    if not batch:
        return [[s] for s in specs]
    groups: dict[tuple, list] = {}
    for spec in specs:
        train = dict(spec.prepare().train)
        train.pop("seed", None)
        groups.setdefault((spec.paper, repr(sorted(train.items()))), []).append(spec)
    return list(groups.values())


def train_group(out: str | Path, specs: Sequence, batch: bool = True, report: Report | None = None,
                checkpoint_every_s: float = 5.0) -> dict[str, str]:
    """Train the unfinished specs of one group into the sweep folder ``out``; ``{key: event}`` (last event
    of each run).  A run that raises is stored as failed (traceback) and the others go on."""
    import dataclasses
    import warnings

    from fedbound.training.multirun import BatchJob, run_batch
    from fedbound.validation.recipes.runner import build_run, finish_run

    store, report = SweepStore(out), report or _quiet
    status: dict[str, str] = {}

    def failed(key: str) -> None:
        store.fail(key, traceback.format_exc())
        store.release(key)
        status[key] = "failed"
        report("failed", key)

    jobs, owned = [], []
    for spec in specs:
        key = spec.key
        if store.is_finished(key):
            status[key] = "done"
            continue
        if not store.acquire(key):
            status[key] = "busy"
            report("busy", key)
            continue
        report("running", key)
        try:
            prep = spec.prepare()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                built = build_run(prep)
            prep.notes.extend(str(w.message) for w in caught if str(w.message) not in prep.notes)
            work = store.start(key)
        except Exception:  # noqa: BLE001 - a bad run is stored with its traceback; the sweep goes on
            failed(key)
            continue
        owned.append((spec, prep, built, work))
        options = dataclasses.replace(built.options, checkpoint_every_s=checkpoint_every_s,
                                      progress=heartbeat(work))
        jobs.append(BatchJob(built.algorithm, built.setup.model, built.setup.data, plan=built.plan,
                             options=options, test=built.setup.test, run_dir=work, run_key=key))
    if not jobs:
        return status
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every warning is in the run's summary
        rounds = getattr(report, "rounds", None)  # the sweep's progress: its duration estimate
        outcomes = run_batch(jobs, batch=batch, on_rounds=None if rounds is None else
                             lambda done, total: rounds(done, total, len(jobs)))
    wall = (time.perf_counter() - t0) / len(jobs)
    for (spec, prep, built, work), outcome in zip(owned, outcomes, strict=True):
        key = spec.key
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            (work / HEARTBEAT).unlink(missing_ok=True)
            finish_run(prep, built, outcome, work, wall, final_dir=store.run_dir(key))
            store.finish(key, spec.to_json())
        except Exception:  # noqa: BLE001
            failed(key)
            continue
        store.release(key)
        status[key] = "done"
        report("done", key)
    return status
