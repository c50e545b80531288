"""Issue 26, items 0, 3, 4, 5 and 8: output paths checked before any work, files written and deleted only
where asked, no hang, no traceback, no accepted nonsense, full-width output when piped.

Every example of the issue is a case here: one line on stderr naming the input, exit code 2, within a CPU
budget (a guard against hangs, counted in CPU seconds of this process, never wall time)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedbound.cli import main
from fedbound.errors import ConfigError, ParameterError
from fedbound.paths import in_folder, out_file, out_folder, read_csv_rows

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
CPU_GUARD_S = 10.0


def _one_line_error(capsys, args, named):
    """Run the CLI in-process: exit 2, one 'error:' line naming ``named``, no traceback, bounded CPU."""
    t0 = time.process_time()
    code = main([str(a) for a in args])
    cpu = time.process_time() - t0
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], err
    assert "Traceback" not in err
    assert cpu < CPU_GUARD_S, f"{cpu:.1f} CPU s"
    return lines[0]


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A working directory holding a file, a folder and an empty folder; nothing else may appear in it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "AFILE").write_text("mine\n")
    (tmp_path / "DIR").mkdir()
    (tmp_path / "EMPTY").mkdir()
    yield tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["AFILE", "DIR", "EMPTY"]
    assert not any((tmp_path / "DIR").iterdir()) and not any((tmp_path / "EMPTY").iterdir())


# item 0 (files), item 5 (paths accepted as nonsense), item 4 (report --out /proc/x.html), item 3 (report '')
@pytest.mark.parametrize("args, named", [
    (["train", "nbafl", EX / "nbafl_logistic.toml", "--set", "T=2", "--out", ""], "--out"),
    (["train", "nbafl", EX / "nbafl_logistic.toml", "--set", "T=2", "--out", "AFILE"], "--out"),
    (["sweep", "nbafl", EX / "nbafl_logistic.toml", "--vs", "T", "--values", "1,2", "--out", ""], "--out"),
    (["sweep", "nbafl", EX / "nbafl_logistic.toml", "--vs", "T", "--values", "1,2", "--out", "AFILE"],
     "--out"),
    (["sweep", "nbafl", EX / "nbafl_logistic.toml", "--vs", "T", "--values", "1,2", "--out", "AFILE/sub"],
     "--out"),
    (["report", ""], "RESULTS_DIR"),
    (["report", "AFILE"], "RESULTS_DIR"),
    (["report", "EMPTY", "--out", "/proc/x.html"], "--out"),
    (["report", "EMPTY", "--out", "DIR/"], "--out"),
    (["report", "EMPTY", "--out", ""], "--out"),
    (["plot", "nbafl", EX / "nbafl_mnist.toml", "--out", "DIR/"], "--out"),
    (["plot", "nbafl", EX / "nbafl_mnist.toml", "--out", "DIR"], "--out"),
    (["estimate", "nbafl", EX / "nbafl_logistic.toml", "--cache", "AFILE"], "--cache"),
    (["estimate", "nbafl", EX / "nbafl_logistic.toml", "--cache", ""], "--cache"),
    (["validate", "nbafl", EX / "nbafl_logistic.toml", "--out", "AFILE"], "--out"),
    (["reproduce", "nbafl", "fig2", "--out", "AFILE"], "--out"),
    (["audit", "nbafl", EX / "audit_nbafl.toml", "--out", "DIR/"], "--out"),
    (["schedule", "wpfl", EX / "wpfl_mnist.toml", "--compare-training", "--out", "AFILE"], "--out"),
])
def test_a_bad_output_path_is_refused_before_any_work(capsys, place, args, named):
    _one_line_error(capsys, args, named)


@pytest.mark.parametrize("args, named", [
    (["schedule", "wpfl", EX / "wpfl_mnist.toml", "--variant", ""], "--variant"),
    (["schedule", "wpfl", EX / "wpfl_mnist.toml", "--variant", "nope"], "variant"),
    (["schedule", "wpfl", EX / "wpfl_mnist.toml", "--rounds", "-1"], "--rounds"),
    (["plan", "adaptive", EX / "adaptive_mnist.toml", "--set", "eps=1e308"], "eps"),
    (["plan", "adaptive", EX / "adaptive_mnist.toml", "--set", "group_min=nan,nan,nan"], "group_min"),
    (["plan", "adaptive", EX / "adaptive_mnist.toml", "--set", "group_min=1e308,1,1"], "group_min"),
    (["plan", "adaptive", EX / "adaptive_mnist.toml", "--set", "scores=inf,1,1"], "scores"),
    (["plan", "adaptive", EX / "adaptive_mnist.toml", "--set", "C=1e308"], "C"),
    (["plan", "dppfl", EX / "dppfl_mnist.toml", "--set", "eta=1e-308"], "eta"),  # ZeroDivisionError before
    (["plan", "dppfl", EX / "dppfl_mnist.toml", "--set", "C=1e-308"], "C"),  # sigma = inf before
    (["plan", "dppfl", EX / "dppfl_mnist.toml", "--set", "eps=1e308"], "eps"),  # 23 CPU s before
    (["train", "udp", EX / "udp_ridge.toml", "--set", "T=2", "--set", "N=nan"], "N"),
    (["train", "udp", EX / "udp_ridge.toml", "--set", "T=2", "--set", "U=nan"], "N"),
    (["train", "adaptive", EX / "adaptive_logistic.toml", "--set", "T=2", "--set", "mu=1e308"], "mu"),
    (["train", "adaptive", EX / "adaptive_logistic.toml", "--set", "T=2", "--set",
      "mu=9223372036854775807"], "mu"),
    (["plan", "nbafl", EX / "nbafl_mnist.toml", "--set", "eps=" + "1" * 100_000], "eps"),
    (["sweep", "nbafl", EX / "nbafl_logistic.toml", "--vs", "T", "--values", "1" + "0" * 100_000],
     "--values"),
])
def test_extreme_and_empty_values_are_one_line_errors(capsys, tmp_path, monkeypatch, args, named):
    monkeypatch.chdir(tmp_path)
    line = _one_line_error(capsys, args, named)
    assert len(line) < 400  # a 100,000-digit value is not echoed in full
    assert not any(tmp_path.rglob("*.pt")) and not any(tmp_path.rglob("metrics.csv"))  # nothing trained


def test_the_proximal_range_follows_the_learning_rate(capsys, tmp_path):
    """lr * mu >= 2 makes the local proximal gradient steps diverge (gamma_inexact = inf before): refused,
    and the message gives the bound 2 / lr for the configured lr = 0.3."""
    line = _one_line_error(capsys, ["train", "adaptive", EX / "adaptive_logistic.toml", "--set", "T=2",
                                    "--set", "mu=7", "--out", tmp_path / "run"], "mu")
    assert f"{2 / 0.3:.6g}" in line and "lr = 0.3" in line


# crd replay: a Latin-1 CSV and a ragged CSV (items 4 and 5)
@pytest.mark.parametrize("content, where", [
    (b"round,loss\n0,1.0\n# caf\xe9\n1,0.9\n", "line 3"),
    (b"round,loss\n0,1.0\n1,0.9\n2,0.8,7\n", "line 4"),
    (b"round,loss\n0,1.0\n1\n", "line 3"),
])
def test_crd_replay_names_file_and_line_of_a_bad_csv(capsys, tmp_path, content, where):
    path = tmp_path / "losses.csv"
    path.write_bytes(content)
    line = _one_line_error(capsys, ["crd", "replay", path, EX / "udp_ridge.toml"], "losses.csv")
    assert where in line


def test_csv_reader_accepts_utf8_with_bom_and_blank_lines(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes("\ufeffround,loss\n\n0,1.5\n1,0.25\n".encode())
    assert read_csv_rows(path) == [["round", "loss"], ["0", "1.5"], ["1", "0.25"]]
    with pytest.raises(ConfigError, match="no such file"):
        read_csv_rows(tmp_path / "missing.csv")


# the path checks themselves
def test_path_checks(tmp_path):
    afile = tmp_path / "f.txt"
    afile.write_text("x")
    assert out_folder("--out", str(tmp_path / "new" / "deeper")) == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checked, not created
    assert out_file("--out", str(tmp_path / "a" / "r.html")) == tmp_path / "a" / "r.html"
    assert out_file("--out", str(afile)) == afile and afile.read_text() == "x"  # replaced later, not now
    assert in_folder("RESULTS_DIR", str(tmp_path)) == tmp_path
    for check, value, valid in [
        (out_folder, "", "folder path"), (out_folder, "   ", "folder path"),
        (out_folder, str(afile), "folder"),
        (out_folder, str(afile / "sub"), "can be created"), (out_folder, "a\0b", "NUL"),
        (out_file, "", "file path"), (out_file, str(tmp_path), "not a folder"),
        (out_file, str(tmp_path / "new") + "/", "not a folder"), (out_file, "/proc/x.html", "writable"),
        (in_folder, "", "folder path"), (in_folder, str(afile), "existing folder"),
        (in_folder, str(tmp_path / "nope"), "existing folder"),
    ]:
        with pytest.raises(ParameterError, match=valid) as info:
            check("--opt", value)
        assert info.value.name == "--opt" and info.value.value == value
    for check in (out_folder, out_file, in_folder):  # a name too long for the OS: shortened, one line
        with pytest.raises(ParameterError, match="usable path") as info:
            check("--opt", str(tmp_path / ("a" * 5000)))
        assert len(str(info.value)) < 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]  # no probe left behind


# --overwrite deletes only what fedbound wrote; a checkpoint.pt that is a folder is refused
def test_overwrite_keeps_a_file_of_the_users(tmp_path):
    from fedbound.training import checkpoint as ckpt

    run = ckpt.prepare_run_dir(tmp_path / "run", "key-1")
    for name in ckpt.RUN_FILES:
        (run / name).write_text("written by a run")
    (run / "notes.txt").write_text("mine")
    (run / "mine").mkdir()
    ckpt.prepare_run_dir(run, "key-2", overwrite=True)
    assert sorted(p.name for p in run.iterdir()) == [ckpt.RUN_MARKER, "mine", "notes.txt"]
    assert (run / "notes.txt").read_text() == "mine" and "key-2" in (run / ckpt.RUN_MARKER).read_text()


def test_overwrite_of_a_half_done_run_through_the_cli_keeps_the_users_file(capsys, tmp_path):
    from fedbound.training import checkpoint as ckpt

    run = tmp_path / "run"
    ckpt.prepare_run_dir(run, "an earlier run")
    (run / ckpt.CHECKPOINT).write_bytes(b"half-done")
    (run / "metrics.csv").write_text("round\n1\n")
    (run / "my_notes.md").write_text("keep me")
    assert main(["train", "nbafl", str(EX / "nbafl_logistic.toml"), "--set", "T=1", "--out", str(run),
                 "--overwrite", "--no-progress", "--json"]) == 0, capsys.readouterr().err
    assert (run / "my_notes.md").read_text() == "keep me"
    assert (run / ckpt.CHECKPOINT).read_bytes() != b"half-done" and (run / "summary.json").is_file()


def test_a_checkpoint_that_is_a_folder_is_one_line(capsys, tmp_path):
    run = tmp_path / "run"
    (run / "checkpoint.pt").mkdir(parents=True)
    line = _one_line_error(capsys, ["train", "nbafl", EX / "nbafl_logistic.toml", "--set", "T=2", "--out",
                                    run, "--no-progress"], "checkpoint.pt")
    assert "folder" in line
    _one_line_error(capsys, ["train", "nbafl", EX / "nbafl_logistic.toml", "--set", "T=2", "--out", run,
                             "--no-progress", "--overwrite"], "checkpoint.pt")
    assert (run / "checkpoint.pt").is_dir()


# a sweep with a failed run is not a success
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_sweep_with_a_failed_run_exits_non_zero_and_says_so(capsys, tmp_path, monkeypatch, json_flag):
    import pandas as pd

    import fedbound.validation.sweep as sweep_mod

    class Done:
        out = tmp_path / "sw"
        failed = {"T=2_seed0": "Traceback (most recent call last):\nTrainingDiverged: loss = inf at round 2"}
        summaries = {"T=1_seed0": {"warnings": []}}
        damaged: dict = {}

        def final(self):
            return pd.DataFrame([{"key": "T=1_seed0", "T": 1, "seed": 0, "round": 1, "loss": 0.5}])

    monkeypatch.setattr(sweep_mod, "run_sweep", lambda specs, out, **kw: Done())
    code = main(["sweep", "nbafl", str(EX / "nbafl_logistic.toml"), "--vs", "T", "--values", "1,2",
                 "--out", str(tmp_path / "sw"), "--no-progress", *json_flag])
    err = capsys.readouterr().err
    assert code == 1
    assert "1 of 2 runs of the sweep failed" in err and "TrainingDiverged" in err


# item 8: piped output is full width, no number cut short
def test_piped_output_is_full_width_and_keeps_every_digit(tmp_path):
    script = ("from fedbound.output import print_table\n"
              "print_table('wide', [f'column_{i}' for i in range(10)], "
              "[[2.394567891234e+17 * (i + 1) for i in range(10)], [0.00771234567] * 10])\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) > 80
    for i in range(10):
        assert f"column_{i}" in out and f"{2.394567891234e+17 * (i + 1):.6g}" in out
    assert out.count("0.00771235") == 10


def test_a_narrow_terminal_folds_numbers_instead_of_cutting_them(capsys, monkeypatch):
    from fedbound.output import print_table

    monkeypatch.setenv("COLUMNS", "40")
    numbers = [123456.789012 * (i + 1) for i in range(8)]
    print_table("narrow", [f"c{i}" for i in range(8)], [numbers])
    out = capsys.readouterr().out
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 40
    shown = "".join(f"{x:.6g}" for x in numbers) + "".join(str(i) for i in range(8))  # cells, headers
    assert sum(ch.isdigit() for ch in out) == sum(ch.isdigit() for ch in shown)  # folded, none lost
