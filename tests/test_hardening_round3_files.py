"""Issue 36 items 4 and 8: damaged result folders (a binary summary.json, a truncated metrics.csv, validate
into such a folder, a report of NaN) and piped output at a readable width.  Expected values: the run as it
was trained before the damage (a damaged run is set aside and trained again, identical numbers), the numbers
of the plan's JSON (every one of them in the piped text, whole)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedbound.tests._hardening import EXAMPLES, SWEEP, numbers, trained_sweep
from fedbound.tests._hardening import run_cli as _run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished sweep folder (udp_ridge, T = 2) and its run's numbers, as trained."""
    return trained_sweep(tmp_path_factory.mktemp("sweep"))


def _damaged_copy(trained, tmp_path, damage) -> tuple[Path, Path]:
    out, key, _ = trained
    copy = tmp_path / "sw"
    shutil.copytree(out, copy)
    damage(copy / "runs" / key)
    return copy, copy / "runs" / key


def _cut(name: str, end: int):
    def damage(run: Path) -> None:
        (run / name).write_bytes((run / name).read_bytes()[:end])
    return damage


@pytest.mark.parametrize("name, damage", [
    ("binary summary.json", lambda run: (run / "summary.json").write_bytes(b"\xff\xfe\x00binary")),
    ("truncated metrics.csv", _cut("metrics.csv", 30)),
    ("NaN in summary.json", lambda run: (run / "summary.json").write_text('{"rounds_done": NaN}')),
    ("metrics.csv cut mid-row", _cut("metrics.csv", -7)),
])
def test_a_damaged_run_is_set_aside_and_trained_again(capsys, trained, tmp_path, name, damage):
    """The reported cases: a UnicodeDecodeError traceback, and exit 0 with "final": [].  Now the run is
    moved to damaged/<key>/ (with why) and trained again: its numbers equal the original's."""
    out, key, metrics = trained
    copy, run = _damaged_copy(trained, tmp_path, damage)
    code, stdout, err = _run(capsys, [*SWEEP, "--out", copy, "--json"])
    assert code == 0, err
    doc = json.loads(stdout)
    assert [r["round"] for r in doc["final"]] == [2] and key in doc["damaged"]
    assert f"run {key} was damaged" in err
    assert numbers(run / "metrics.csv") == metrics  # retrained: identical numbers
    note = (copy / "damaged" / key / "DAMAGED.txt").read_text()
    assert ("summary.json" if "summary" in name else "metrics.csv") in note


def test_load_sweep_leaves_a_damaged_run_out(trained, tmp_path):
    from fedbound.validation.sweep import load_sweep

    copy, run = _damaged_copy(trained, tmp_path, lambda r: (r / "summary.json").write_bytes(b"\xff"))
    sweep = load_sweep(copy)
    assert sweep.table.empty and list(sweep.damaged) == [run.name]
    assert run.is_dir()  # reading does not move anything


def test_validate_into_a_damaged_folder_retrains_instead_of_blaming_config(capsys, tmp_path):
    """validate's runs live in OUT/sweep: a truncated metrics.csv there made it say "every run failed"
    about CONFIG; now the run is trained again and validate answers."""
    argv = ["validate", "udp", EXAMPLES / "udp_ridge.toml", "--vs", "T", "--values", "1,2", "--seeds", "1",
            "--rounds", "2", "--out", tmp_path / "v", "--cache", tmp_path / "c", "--no-progress", "--json"]
    code, first, err = _run(capsys, argv)
    assert code == 0, err
    for metrics in (tmp_path / "v" / "sweep" / "runs").glob("*/metrics.csv"):
        metrics.write_bytes(metrics.read_bytes()[:30])
    code, again, err = _run(capsys, argv)
    assert code == 0, err
    assert json.loads(again)["measured"] == json.loads(first)["measured"]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_report_refuses_a_validation_json_holding_a_non_finite_number(capsys, tmp_path, token):
    folder = tmp_path / "results" / "validate_udp"
    folder.mkdir(parents=True)
    doc = '{"paper": "udp", "verdicts": [], "measured": [{"mean": TOKEN}]}'
    (folder / "validation.json").write_text(doc.replace("TOKEN", token))
    code, _, err = _run(capsys, ["report", tmp_path / "results", "--out", tmp_path / "r.html"])
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and str(folder / "validation.json") in lines[0], err
    assert token in lines[0] and "damaged" in lines[0]
    assert not (tmp_path / "r.html").exists()


def test_strict_json_refuses_what_fedbound_never_writes():
    from fedbound.checks import strict_json

    assert strict_json(b'{"a": [1, 2.5]}') == {"a": [1, 2.5]}
    for bad in (b'{"a": NaN}', b"[Infinity]", b"\xff\xfe", b'{"a": 1'):
        with pytest.raises(ValueError):
            strict_json(bad)


# ---- item 8: piped output at a readable width, every digit kept -----------------------------------------

def _piped(*argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONWARNINGS"] = "ignore"
    done = subprocess.run([sys.executable, "-m", "fedbound", *argv], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_piped_plan_is_at_most_100_columns_and_keeps_every_number():
    """909 columns before (every table row padded to the longest note).  The table and the recommendation
    wrap at 100 columns (a warning stays one line: scripts grep them); every number of the plan's rows, as
    the table prints it (6 significant digits), is in the text whole."""
    config = str(EXAMPLES / "nbafl_mnist.toml")
    text = _piped("plan", "nbafl", config)
    plan = json.loads(_piped("plan", "nbafl", config, "--json"))
    wide = [line for line in text.splitlines() if len(line) > 100 and not line.startswith("warning:")]
    assert not wide, wide[:3]
    words = set(text.replace("│", " ").replace("┃", " ").split())
    for row in plan["rows"]:
        for value in (row["paper"], row["tight"]):
            if isinstance(value, float):
                assert f"{value:.6g}" in words, (row, value)
    assert any(line.startswith("warning:") for line in text.splitlines())


def test_a_table_whose_numbers_need_more_than_100_columns_is_as_wide_as_they_need():
    script = ("from fedbound.output import print_table\n"
              "print_table('wide', [f'c{i}' for i in range(12)], "
              "[[1.23456789e-300 * (i + 1) for i in range(12)], ['a note ' * 30] + ['-'] * 11])\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         check=True).stdout
    for i in range(12):
        assert f"{1.23456789e-300 * (i + 1):.6g}" in out
    assert max(len(line) for line in out.splitlines()) > 100  # 12 numbers of 11 characters do not fit
