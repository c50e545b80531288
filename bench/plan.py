"""How fast `fedbound plan` answers (the registry issue's targets: cold < 0.5 s, warm re-plan < 20 ms).

Measured in one run, each against its baseline:
* cold CLI process, compiled-formula cache warm vs disabled (``FEDBOUND_CACHE_DIR=""``): the cache's gain;
* the first plan in a fresh process after imports, cache warm vs disabled;
* a warm in-process re-plan (another eps) against the first plan of the process.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import interleaved, ratio, write_result

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
replans = []
for k in range(5):
    t = time.perf_counter()
    plan({{**setting, "eps": 6 + k / 10}}, "paper")
    replans.append(time.perf_counter() - t)
print(t1 - t0, t2 - t1, min(replans))
"""


def _cold_cli(env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fedbound", "plan", "nbafl", EXAMPLE, "--json"], env=env,
                   check=True, capture_output=True)
    return time.perf_counter() - t0


def _probe(env: dict) -> list[float]:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, check=True, capture_output=True, text=True)
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        warm_env = {**os.environ, "FEDBOUND_CACHE_DIR": cache}
        off_env = {**os.environ, "FEDBOUND_CACHE_DIR": ""}
        _cold_cli(warm_env)  # fills the cache
        cold = interleaved({"warm": lambda: _cold_cli(warm_env), "off": lambda: _cold_cli(off_env)},
                           repeat=3, warmup=0)
        probes: dict[str, list[list[float]]] = {"warm": [], "off": []}
        for _ in range(3):  # interleaved: warm, off, warm, off, ...
            probes["warm"].append(_probe(warm_env))
            probes["off"].append(_probe(off_env))
    imports, first_warm, replan = (statistics.median(p[i] for p in probes["warm"]) for i in range(3))
    first_off = statistics.median(p[1] for p in probes["off"])
    result = {
        "cold_cli_s": cold["warm"].to_json(), "cold_cli_no_cache_s": cold["off"].to_json(),
        "cache_speedup_cold": ratio(cold["off"], cold["warm"]),
        "imports_s": imports, "first_plan_s": first_warm, "first_plan_no_cache_s": first_off,
        "cache_speedup_first_plan": first_off / first_warm, "warm_replan_s": replan,
        "replan_vs_first_plan": replan / first_warm,
        "targets": {"cold_cli_s": 0.5, "warm_replan_s": 0.02},
        "timing": "interleaved (warm, off, warm, off ...); medians (min-max for the cold CLI)",
    }
    for k, v in result.items():
        print(f"{k:28s} {v}")
    write_result("plan", result)


if __name__ == "__main__":
    main()
