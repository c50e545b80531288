"""How fast `fedbound plan` answers (the registry issue's targets: cold < 0.5 s, warm re-plan < 20 ms).

Measured in one run, each against its baseline, interleaved (A B A B ...), medians with min-max and the load:
* cold CLI process, compiled-formula cache warm vs disabled (``FEDBOUND_CACHE_DIR=""``): the cache's gain;
* the first plan in a fresh process after imports, cache warm vs disabled;
* a warm in-process re-plan (another eps) against the first plan of the process.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import write_result

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = str(REPO / "examples" / "nbafl_mnist.toml")
PROBE = f"""
import time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
from fedbound import registry
paper = registry.get("nbafl")
plan = paper.load("planner")
setting = paper.load_setting({EXAMPLE!r}).values
t1 = time.perf_counter()
plan(setting, "paper")
t2 = time.perf_counter()
replans, cpu = [], []
for k in range(5):
    t, c = time.perf_counter(), time.process_time()
    plan({{**setting, "eps": 6 + k / 10}}, "paper")
    replans.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(t1 - t0, t2 - t1, min(replans), min(cpu))
"""


def _cold_cli(env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``fedbound plan nbafl`` process; CPU time (user + system of the child) is
    the steadier figure on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fedbound", "plan", "nbafl", EXAMPLE, "--json"], env=env,
                   check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _probe(env: dict) -> list[float]:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, check=True, capture_output=True, text=True)
    return [float(x) for x in out.stdout.split()]


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(rounds: int = 5) -> None:
    """Cache warm (A) and cache off (B) alternate, A B A B ..., so that load changes hit both alike."""
    load_before = os.getloadavg()[0]
    runs: dict[str, list] = {"cold_warm": [], "cold_off": [], "probe_warm": [], "probe_off": []}
    with tempfile.TemporaryDirectory() as cache:
        warm_env = {**os.environ, "FEDBOUND_CACHE_DIR": cache}
        off_env = {**os.environ, "FEDBOUND_CACHE_DIR": ""}
        _cold_cli(warm_env)  # fills the cache
        for _ in range(rounds):
            runs["cold_warm"].append(_cold_cli(warm_env))
            runs["cold_off"].append(_cold_cli(off_env))
            runs["probe_warm"].append(_probe(warm_env))
            runs["probe_off"].append(_probe(off_env))
    wall = {k: [w for w, _ in runs[k]] for k in ("cold_warm", "cold_off")}
    cpu = {k: [c for _, c in runs[k]] for k in ("cold_warm", "cold_off")}
    first_warm = [r[1] for r in runs["probe_warm"]]
    first_off = [r[1] for r in runs["probe_off"]]
    replan = [r[2] for r in runs["probe_warm"]]
    result = {
        "cold_cli_wall_s": _stats(wall["cold_warm"]), "cold_cli_cpu_s": _stats(cpu["cold_warm"]),
        "cold_cli_no_cache_wall_s": _stats(wall["cold_off"]),
        "cold_cli_no_cache_cpu_s": _stats(cpu["cold_off"]),
        "cache_speedup_cold_cpu": statistics.median(cpu["cold_off"]) / statistics.median(cpu["cold_warm"]),
        "imports_s": _stats([r[0] for r in runs["probe_warm"]]),
        "first_plan_s": _stats(first_warm), "first_plan_no_cache_s": _stats(first_off),
        "warm_replan_s": _stats(replan), "warm_replan_cpu_s": _stats([r[3] for r in runs["probe_warm"]]),
        "targets": {"cold_cli_s": 0.5, "warm_replan_s": 0.02},
        "load_average": {"before": load_before, "after": os.getloadavg()[0]}, "cpus": os.cpu_count(),
    }
    for k, v in result.items():
        print(f"{k:28s} {v}")
    write_result("plan", result)


if __name__ == "__main__":
    main()
