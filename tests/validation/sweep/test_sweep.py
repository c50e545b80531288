"""The sweep runner: keys, tables, resume after a killed worker, failures, executors."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedbound.errors import ConfigError
from fedbound.tests._sweep_helpers import CONFIG, numbers
from fedbound.validation.sweep import RunSpec, load_sweep, run_sweep
from fedbound.validation.sweep.store import SweepStore


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "nbafl_small.toml"
    path.write_text(CONFIG)
    return path


def _specs(config: Path, Ts=(2, 3), seeds=(0, 1)) -> list[RunSpec]:
    return [RunSpec("nbafl", config, (f"T={T}",), seed, {"T": T}) for T in Ts for seed in seeds]


def test_key_same_effective_config_same_key(config: Path, tmp_path: Path) -> None:
    base = RunSpec("nbafl", config, ("T=3",), 0)
    assert base.key == RunSpec("nbafl", config, (), 0).key  # T = 3 in the file already
    assert base.key == RunSpec("nbafl", config, ("nbafl.T=3",), 0, {"anything": 1}).key
    moved = tmp_path / "elsewhere.toml"
    moved.write_text(CONFIG.replace("C = 5.0", "C = 5.0  # same value, another file"))
    assert base.key == RunSpec("nbafl", moved, ("T=3",), 0).key


@pytest.mark.parametrize("change", [("T=4",), ("C=5.5",), ("train.lr=0.2",), ("train.local_steps=3",),
                                    ("eps=19.0",), ("train.eval_every=2",)])
def test_key_changes_with_any_value(config: Path, change: tuple[str, ...]) -> None:
    assert RunSpec("nbafl", config, change, 0).key != RunSpec("nbafl", config, (), 0).key


def test_key_changes_with_seed(config: Path) -> None:
    assert RunSpec("nbafl", config, (), 0).key != RunSpec("nbafl", config, (), 1).key


def test_table_has_one_row_per_run_and_round(config: Path, tmp_path: Path) -> None:
    sweep = run_sweep(_specs(config), tmp_path / "sweep", progress=False)
    assert not sweep.failed
    table = sweep.table
    assert list(table.columns[:4]) == ["key", "paper", "seed", "T"]
    assert len(table) == 2 * 2 + 3 * 2  # rounds of each run
    counts = table.groupby("key")["round"].agg(["count", "max"])
    assert sorted(counts["count"]) == [2, 2, 3, 3]
    final = sweep.final()
    assert len(final) == 4 and (final["round"] == final["T"]).all()
    assert set(final["seed"]) == {0, 1}
    for key, summary in sweep.summaries.items():
        assert summary["rounds_done"] == int(final.loc[final["key"] == key, "round"].iloc[0])
        run_dir = tmp_path / "sweep" / "runs" / key
        assert {p.name for p in run_dir.iterdir()} >= {"metrics.csv", "summary.json", "config.toml"}
    loaded = load_sweep(tmp_path / "sweep")
    pd.testing.assert_frame_equal(loaded.table.sort_values(["key", "round"]).reset_index(drop=True),
                                  table.sort_values(["key", "round"]).reset_index(drop=True))


def test_rerun_skips_finished_runs(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    first = run_sweep(_specs(config, Ts=(2,)), out, progress=False)
    stamps = {k: (out / "runs" / k / "summary.json").stat().st_mtime_ns for k in first.summaries}
    second = run_sweep(_specs(config, Ts=(2, 3)), out, progress=False)
    assert len(second.summaries) == 4
    for key, stamp in stamps.items():
        assert (out / "runs" / key / "summary.json").stat().st_mtime_ns == stamp


def test_failed_run_keeps_traceback_and_others_finish(config: Path, tmp_path: Path) -> None:
    good = _specs(config, Ts=(2,), seeds=(0,))
    bad = RunSpec("nbafl", config, ("T=2", "m=60"), 0, {"T": 2})  # 4 x 60 samples > the 160 there are
    sweep = run_sweep([*good, bad], tmp_path / "sweep", progress=False)
    assert list(sweep.failed) == [bad.key]
    assert "Traceback" in sweep.failed[bad.key] and "160 training samples" in sweep.failed[bad.key]
    assert (tmp_path / "sweep" / "failed" / f"{bad.key}.txt").is_file()
    assert set(sweep.summaries) == {good[0].key}
    assert not (tmp_path / "sweep" / "runs" / bad.key).exists()


def test_bad_config_is_one_line_error_before_anything_runs(config: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="lr"):
        run_sweep([RunSpec("nbafl", config, ("train.lr=-1",), 0)], tmp_path / "sweep", progress=False)
    assert not (tmp_path / "sweep" / "runs").exists()
    with pytest.raises(ConfigError, match="executor"):
        run_sweep(_specs(config), tmp_path / "sweep", executor="nope", progress=False)


def test_lock_is_exclusive_and_stale_locks_are_taken_over(tmp_path: Path) -> None:
    store = SweepStore(tmp_path)
    assert store.acquire("k")
    other = store.lock_file("k")
    other.write_text(f"{os.uname().nodename} 1")  # pid 1 is alive: a live owner
    assert not store.acquire("k")
    dead = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
    dead.start()
    dead.join()
    other.write_text(f"{os.uname().nodename} {dead.pid}")  # gone: stale
    assert store.acquire("k")


def _sweep_in_child(specs: list[RunSpec], out: str) -> None:
    run_sweep(specs, out, batch=False, progress=False, checkpoint_every_s=0.0)


def test_killed_worker_then_rerun_gives_the_uninterrupted_rows(config: Path, tmp_path: Path) -> None:
    specs = [RunSpec("nbafl", config, ("T=40", "train.eval_clients=true"), 0, {"T": 40}),
             RunSpec("nbafl", config, ("T=40", "train.eval_clients=true"), 1, {"T": 40})]
    reference = run_sweep(specs, tmp_path / "reference", progress=False).table
    out = tmp_path / "killed"
    child = multiprocessing.get_context("spawn").Process(target=_sweep_in_child, args=(specs, str(out)))
    child.start()
    checkpoint = out / "work" / specs[0].key / "checkpoint.pt"
    deadline = time.monotonic() + 60
    while not checkpoint.exists() and time.monotonic() < deadline and child.is_alive():
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    assert checkpoint.exists(), "the worker finished before it could be killed"
    assert not (out / "runs" / specs[0].key).exists()  # nothing that looks finished
    resumed = run_sweep(specs, out, progress=False)
    assert not resumed.failed
    assert not resumed.table.duplicated(["key", "round"]).any()
    pd.testing.assert_frame_equal(numbers(resumed.table), numbers(reference))
    assert not any((out / "work").iterdir())


def test_process_pool_gives_the_in_process_table(config: Path, tmp_path: Path) -> None:
    specs = _specs(config)
    alone = run_sweep(specs, tmp_path / "a", progress=False)
    pooled = run_sweep(specs, tmp_path / "b", workers=2, progress=False)
    pd.testing.assert_frame_equal(numbers(alone.table), numbers(pooled.table))
    assert np.isfinite(alone.table["loss"]).all()


def test_sweep_command_prints_one_line_per_run_and_writes_the_table(config: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    import json

    from fedbound.cli import main

    out = tmp_path / "cli"
    args = ["sweep", "nbafl", str(config), "--vs", "T", "--values", "2,3", "--seeds", "2", "--out", str(out),
            "--no-progress", "--json"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert sorted((r["T"], r["seed"], r["round"]) for r in printed["final"]) == [
        (2, 0, 2), (2, 1, 2), (3, 0, 3), (3, 1, 3)]
    assert (out / "table.csv").is_file() and not printed["failed"]
    assert main([*args[:5], "--values", "", "--out", str(out)]) == 2
    assert "--values" in capsys.readouterr().err
