"""Measure what the docs' Measured page shows, and write it into docs/measured/NAME.json.

Usage: ``python docs/measure.py [NAME ...]`` (default: every entry of MEASUREMENTS; a quarter of an hour on 2
cores).  Each entry runs one benchmark script of bench/ (each measures ours against a baseline in the
same run, interleaved), reads the JSON it writes in bench/results/, and keeps its numbers with the date, the
machine and the exact command.  The docs hook (docs/hooks/fedbound_docs.py) renders these files; prose never
types a measured number.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import platform
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "measured"

# name: (title, bench script arguments)
MEASUREMENTS = {
    "accounting": ("Calibrating a grid of privacy targets", ["bench/accounting.py", "--opacus-points", "50"]),
    "plan": ("How fast `fedbound plan` answers", ["bench/plan.py"]),
    "training": ("The training engine against per-client loops", ["bench/training.py", "--quick"]),
    "opacus_compare": ("One DP-SGD step against Opacus", ["bench/opacus_compare.py", "--quick"]),
    "sweep": ("A batched sweep against runs one after another", ["bench/sweep.py", "--quick"]),
    "explorer": ("The explorer's live update", ["bench/explorer.py"]),
}


def _flatten(value, prefix: str = "") -> dict[str, str]:
    """Nested JSON as ``a.b.c -> value`` rows; lists of numbers shortened to their length."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and len(value) > 6:
        return {prefix: f"{len(value)} values"}
    if isinstance(value, float):
        return {prefix: f"{value:.4g}"}
    return {prefix: str(value)}


def _what(script: Path) -> str:
    """The first paragraph of the benchmark's module docstring: what it measures."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def measure(name: str) -> Path:
    title, args = MEASUREMENTS[name]
    command = [sys.executable, *args]
    subprocess.run(command, cwd=REPO, check=True)
    result = json.loads((REPO / "bench" / "results" / f"{name}.json").read_text())
    machine = {**result.pop("machine"), "processor": platform.processor() or platform.machine(),
               "system": f"{platform.system()} {platform.release()}"}
    machine["load_at_start"] = float(machine["load_at_start"][0])
    record = {
        "title": title,
        "what": _what(REPO / args[0]),
        "command": shlex.join(["python", *args]),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "numbers": _flatten({k: v for k, v in result.items() if k != "benchmark"}),
    }
    OUT.mkdir(exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or MEASUREMENTS:
        measure(name)
