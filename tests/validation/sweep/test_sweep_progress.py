"""A sweep's progress counts rounds (its rate and ETA follow the training): each run's heartbeat file, the
bar's total and final count, and no heartbeat left in a finished run."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbound.tests._sweep_helpers import CONFIG
from fedbound.training.metrics import progress_bar
from fedbound.validation.sweep import RunSpec, run_sweep
from fedbound.validation.sweep import executors as ex
from fedbound.validation.sweep.store import SweepStore
from fedbound.validation.sweep.worker import HEARTBEAT, heartbeat, rounds_done


def test_a_callable_progress_reports_every_round():
    seen = []
    bar = progress_bar(5, 2, lambda done, total: seen.append((done, total)), "x")
    for _ in range(3):
        bar.update(1)
    bar.total = 7  # a run that changes its plan (CRD) reports the new total from then on
    bar.update(1)
    assert seen == [(3, 5), (4, 5), (5, 5), (6, 7)]


def test_the_heartbeat_file_round_trips(tmp_path: Path):
    assert rounds_done(tmp_path) is None
    beat = heartbeat(tmp_path)
    beat(3, 10)
    assert rounds_done(tmp_path) == (3, 10)
    (tmp_path / HEARTBEAT).write_text("garbage")
    assert rounds_done(tmp_path) is None
    heartbeat(tmp_path / "missing")(1, 2)  # an unwritable heartbeat never stops a run


def test_the_bar_counts_every_planned_round_and_finished_runs_keep_no_heartbeat(tmp_path, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG)
    specs = [RunSpec("nbafl", config, (f"T={t}",), 0, {"T": t}) for t in (2, 3)]
    bars = []
    real = ex._Progress

    class Spy(real):
        def close(self):
            super().close()
            bars.append((self.bar.total, self.bar.n, self.bar.unit))

    monkeypatch.setattr(ex, "_Progress", Spy)
    run_sweep(specs, tmp_path / "sw", progress=True)
    assert bars == [(5, 5, "round")]
    store = SweepStore(tmp_path / "sw")
    for spec in specs:
        assert store.is_finished(spec.key)
        assert not (store.run_dir(spec.key) / HEARTBEAT).exists()


def test_a_resumed_run_counts_its_rounds_already_done(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG)
    spec = RunSpec("nbafl", config, ("T=4",), 0)
    store = SweepStore(tmp_path / "sw")
    heartbeat(store.start(spec.key))(3, 4)  # a killed attempt left its heartbeat
    progress = ex._Progress(1, 0, False, store.out, {spec.key: 4})
    assert progress._rounds() == 3
    progress.planned[spec.key] = 9
    heartbeat(store.work_dir(spec.key))(5, 6)  # a plan that shrank (CRD): the heartbeat's total wins
    assert progress._rounds() == 5 and progress.planned[spec.key] == 6


@pytest.mark.parametrize("total, done", [(0, 0)])
def test_no_bar_without_progress(total, done):
    progress = ex._Progress(total, done, False)
    progress("running", "k")
    progress("done", "k")
    progress.close()
    assert progress.bar is None and progress.done == 1
