"""Run the benchmark scripts of bench/ (``make bench``) and write ONE JSON, bench/results/all.json.

Usage: ``python bench/run_all.py [--quick] [--threads N] [--only NAME ...] [--out PATH]``.

A benchmark is any ``bench/NAME.py`` (not ``_*``, not this file, not ``render_readme.py``) with a ``main()``.
Each runs in its own process (``python bench/run_all.py --child NAME``): its figures are what ``main()``
returns when that is a dict, else the ``bench/results/*.json`` files it wrote during the run (via
``_harness.write_result``), without their ``machine`` entry.  ``--quick`` passes the script's
``QUICK_ARGS = [...]`` (a literal list), else ``--quick`` when the script reads that flag, else nothing.
A module-level ``HEADLINE`` string (a ``str.format`` template over the figures) is kept with the figures;
``bench/render_readme.py`` turns the headlines into README's performance block.

``--threads N`` (default 1) runs every benchmark with ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and torch's
intra-op threads set to N, for ours and every baseline in the process alike (a script that compares thread
counts itself, e.g. ``pfl_round.py``, sets them per child); the count is recorded per benchmark.

all.json holds the date, the git commit, the machine (CPU model, cores), the load average before and after,
and per benchmark its figures, CPU seconds, wall seconds and status.  A failing benchmark is recorded with
its error and the others still run; the exit status is then 1.  ``--only`` merges into an existing all.json
(the other benchmarks' entries are kept, each with its own date and load).
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import importlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
NOT_BENCHMARKS = {"run_all.py", "render_readme.py"}


def discover() -> dict[str, Path]:
    """Every benchmark script: NAME -> path (sorted by name)."""
    return {p.stem: p for p in sorted(HERE.glob("*.py"))
            if not p.name.startswith("_") and p.name not in NOT_BENCHMARKS and _has_main(p)}


def _module_constants(path: Path) -> dict[str, Any]:
    """The module-level literal assignments QUICK_ARGS and HEADLINE of a script, without importing it."""
    out: dict[str, Any] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("QUICK_ARGS", "HEADLINE"):
                out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def _has_main(path: Path) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(path.read_text()).body)


def quick_args(path: Path) -> list[str]:
    consts = _module_constants(path)
    if "QUICK_ARGS" in consts:
        return [str(a) for a in consts["QUICK_ARGS"]]
    return ["--quick"] if '"--quick"' in path.read_text() else []


def _child(name: str, args: list[str], out: Path) -> None:
    """Run one benchmark's main() in this process; write its figures to ``out``."""
    threads = os.environ.get("FEDBOUND_BENCH_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    sys.path.insert(0, str(HERE))
    sys.argv = [str(HERE / f"{name}.py"), *args]
    start = time.time()
    returned = importlib.import_module(name).main()
    if isinstance(returned, dict):
        figures = returned
    else:  # a script that predates the convention: the result files it wrote in this run
        figures = {}
        for path in sorted(RESULTS.glob("*.json")):
            if path.stat().st_mtime >= start - 1.0 and path.name != "all.json":
                data = json.loads(path.read_text())
                data.pop("machine", None)
                data.pop("benchmark", None)
                figures[path.stem] = data
    out.write_text(json.dumps(figures, default=float))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True,
                             check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() + ("+dirty" if dirty else "")


def load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def thread_env(threads: int) -> dict[str, str]:
    """The environment of a benchmark run at ``threads`` threads (OpenMP, MKL and torch's intra-op)."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "FEDBOUND_BENCH_THREADS": str(threads)}


def run_one(name: str, path: Path, quick: bool, threads: int = 1) -> dict[str, Any]:
    args = quick_args(path) if quick else []
    print(f"== {name} {' '.join(args)} ({threads} thread{'s' if threads > 1 else ''})", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before, t0 = load(), time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.json"
        proc = subprocess.run([sys.executable, str(HERE / "run_all.py"), "--child", name, str(out), *args],
                              env=thread_env(threads))
        figures = json.loads(out.read_text()) if proc.returncode == 0 and out.exists() else None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    entry: dict[str, Any] = {
        "status": "ok" if figures is not None else f"failed (exit status {proc.returncode})",
        "args": args, "threads": threads, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": git_commit(),
        "wall_s": round(time.perf_counter() - t0, 3),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
        "load_before": load_before, "load_after": load(), "figures": figures or {},
    }
    headline = _module_constants(path).get("HEADLINE")
    if headline:
        entry["headline"] = headline
    return entry


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[4:], Path(sys.argv[3]))
        return 0
    found = discover()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="each benchmark's quick size (QUICK_ARGS)")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=sorted(found),
                        help=f"run only these (of {', '.join(found)})")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="OpenMP, MKL and torch threads of every benchmark (default 1)")
    parser.add_argument("--out", type=Path, default=RESULTS / "all.json")
    args = parser.parse_args()
    names = args.only or list(found)
    previous = json.loads(args.out.read_text()) if args.only and args.out.exists() else {}
    load_start = load()
    benchmarks = dict(previous.get("benchmarks", {}))
    for name in names:
        benchmarks[name] = run_one(name, found[name], args.quick, args.threads)
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "git_commit": git_commit(),
        "machine": {"cpu_model": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "system": f"{platform.system()} {platform.release()}"},
        "load_before": load_start, "load_after": load(), "quick": args.quick, "threads": args.threads,
        "ran": names,
        "benchmarks": dict(sorted(benchmarks.items())),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=float) + "\n")
    failed = [n for n in names if benchmarks[n]["status"] != "ok"]
    print(f"wrote {args.out} ({len(names)} benchmarks, load {load_start} -> {result['load_after']})"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
