"""Shared pieces of the hardening tests (issue 36): the CLI run quietly in-process, and one finished sweep
folder with the numbers it was trained with."""

from __future__ import annotations

import warnings
from pathlib import Path

from fedbound.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SWEEP = ["sweep", "udp", str(EXAMPLES / "udp_ridge.toml"), "--vs", "T", "--values", "2"]
"""A one-run sweep (UDP on ridge regression, T = 2): seconds."""


def run_cli(capsys, argv) -> tuple[int, str, str]:
    """``fedbound ARGV`` in this process, warnings silenced: (exit code, stdout, stderr), no traceback."""
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


def numbers(path: Path) -> str:
    """A run's metrics.csv without its wall-clock column (the only one a rerun may change)."""
    import pandas as pd

    return pd.read_csv(path).drop(columns="wall_time").to_csv(index=False)


def trained_sweep(folder: Path) -> tuple[Path, str, str]:
    """:data:`SWEEP` trained into ``folder / "sw"``: (the folder, its run's key, the run's numbers)."""
    out = folder / "sw"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*SWEEP, "--out", str(out), "--no-progress", "--json"]) == 0
    (run,) = (out / "runs").iterdir()
    return out, run.name, numbers(run / "metrics.csv")
