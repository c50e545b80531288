"""How fast every planner answers (issues 25, 35: cached CLI plan <= 2.5x the numpy-import floor, warm re-plan
< 0.3 s, the explorer live), in CPU seconds, each figure beside the floor measured in the same run.

* ``cli``: ``fedbound plan PAPER CONFIG --json`` in a fresh process, its second run (the plan and the
  compiled formulas come from the cache, the modules' bytecode from ``__pycache__``), interleaved
  with ``python -c 'import numpy'`` (A B A B ...): the
  ratio to that floor per repetition, median and range;
* ``replan``: in one process, after a first plan, the planner called again (not the plan cache) on the same
  setting (``same``) and with eps changed by 2-6 % (``eps``): the minimum CPU over the repetitions;
* ``explorer``: the app's test client, per paper: ``POST /api/plan`` and ``POST /api/curve`` with eps changed
  (each a new setting), and ``GET /api/claims`` from the kept answer (the first check of a paper's claims,
  seconds, happens once per code version).

DP-PFL is measured the same way (its planner is made fast on another branch).  ``python bench/plan.py
--quick``: one config per paper, two repetitions.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import load, write_result

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CASES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("nbafl", "nbafl_mnist.toml", ()),  # K open: the joint (T, K) search
    ("nbafl", "nbafl_mnist.toml", ("K=20",)),  # K set: K-of-N calibration
    ("nbafl", "nbafl_logistic.toml", ()),
    ("udp", "udp_mnist.toml", ()),
    ("udp", "udp_ridge.toml", ()),
    ("adaptive", "adaptive_s3_plan.toml", ()),
    ("adaptive", "adaptive_mnist.toml", ()),
    ("adaptive", "adaptive_logistic.toml", ()),
    ("wpfl", "wpfl_mnist.toml", ()),
    ("wpfl", "wpfl_cifar.toml", ()),
    ("wpfl", "wpfl_ridge.toml", ()),
    ("dppfl", "dppfl_mnist.toml", ()),
    ("dppfl", "dppfl_cifar.toml", ()),
    ("dppfl", "dppfl_ridge.toml", ()),
)
QUICK = ("nbafl_mnist.toml", "udp_mnist.toml", "adaptive_s3_plan.toml", "wpfl_mnist.toml", "dppfl_mnist.toml")
"""--quick: these configs (and NbAFL's with K set)."""
TARGETS = {"cli_over_numpy": 2.5, "replan_cpu_s": 0.3}

REPLAN = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from fedbound import registry
paper, config, sets, reps = sys.argv[1], sys.argv[2], sys.argv[3:-1], int(sys.argv[-1])
entry = registry.get(paper)
plan = entry.load("planner")
setting = entry.load_setting(config, list(sets)).values
c = time.process_time(); plan(setting, "paper"); first = time.process_time() - c
same, eps = [], []
for k in range(reps):
    c = time.process_time(); plan(dict(setting), "paper"); same.append(time.process_time() - c)
    c = time.process_time(); plan({**setting, "eps": setting["eps"] * (1.02 + 0.02 * k)}, "paper")
    eps.append(time.process_time() - c)
print(json.dumps({"first": first, "same": min(same), "eps": min(eps)}))
"""

EXPLORER = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from fastapi.testclient import TestClient
from fedbound import registry
from fedbound.explorer import api
from fedbound.explorer.app import create_app
reps = int(sys.argv[1])
out = {}
with TestClient(create_app()) as client:
    for name in registry.names("plan"):
        body = dict(registry.get(name).example)
        assert client.post(f"/api/plan/{name}", json=body).status_code == 200
        api.claims_json(name)  # fills the kept answer (seconds, once per code version)
        plan, curve, claims = [], [], []
        for k in range(reps):
            changed = {**body, "eps": float(body.get("eps", 1.0)) * (1.03 + 0.02 * k)}
            c = time.process_time(); r = client.post(f"/api/plan/{name}", json=changed)
            plan.append(time.process_time() - c)
            c = time.process_time(); r2 = client.post(f"/api/curve/{name}", json=changed)
            curve.append(time.process_time() - c)
            api.claims_json.cache_clear()
            c = time.process_time(); r3 = client.get(f"/api/claims/{name}")
            claims.append(time.process_time() - c)
            assert r.status_code == r2.status_code == r3.status_code == 200, (r.text, r2.text)
        out[name] = {"plan_cpu_s": min(plan), "curve_cpu_s": min(curve), "claims_cpu_s": min(claims)}
print(json.dumps(out))
"""


def _child_cpu(args: list[str], env: dict) -> tuple[float, str]:
    """(CPU seconds, stdout) of one child process (user + system, the steady figure on a shared machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def _name(paper: str, config: str, sets: tuple[str, ...]) -> str:
    return f"{paper}:{config.removesuffix('.toml')}" + "".join(f"[{s}]" for s in sets)


def main(rounds: int = 5, quick: bool = False) -> dict:
    """Measure, print and write ``bench/results/plan.json``; returns the figures."""
    cases = [c for c in CASES if not quick or c[1] in QUICK]
    rounds = 2 if quick else rounds
    load_before = load()
    numpy_floor: list[float] = []
    cli: dict[str, list[float]] = {_name(*c): [] for c in cases}
    ratios: dict[str, list[float]] = {_name(*c): [] for c in cases}
    with tempfile.TemporaryDirectory() as cache:
        # bytecode on, as an installed package has it (numpy's wheel ships compiled): with
        # PYTHONDONTWRITEBYTECODE set every run would compile fedbound's modules from source
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["FEDBOUND_CACHE_DIR"] = cache
        argv = {_name(*c): [sys.executable, "-m", "fedbound", "plan", c[0], str(EXAMPLES / c[1]),
                            *[a for s in c[2] for a in ("--set", s)], "--json"] for c in cases}
        for args in argv.values():  # the first run of each fills the cache
            _child_cpu(args, env)
        for _ in range(rounds):  # A B A B ...: the floor, then every case
            floor, _ = _child_cpu([sys.executable, "-c", "import numpy"], env)
            numpy_floor.append(floor)
            for name, args in argv.items():
                cpu, _ = _child_cpu(args, env)
                cli[name].append(cpu)
                ratios[name].append(cpu / floor)
        replan = {}
        for c in cases:
            _, out = _child_cpu([sys.executable, "-c", REPLAN, c[0], str(EXAMPLES / c[1]), *c[2],
                                 str(rounds)], env)
            replan[_name(*c)] = json.loads(out.strip().splitlines()[-1])
        _, out = _child_cpu([sys.executable, "-c", EXPLORER, str(rounds)], env)
        explorer = json.loads(out.strip().splitlines()[-1])
    floor_median = statistics.median(numpy_floor)
    result = {
        "numpy_import_cpu_s": _stats(numpy_floor),
        "cli_cached_cpu_s": {k: _stats(v) for k, v in cli.items()},
        "cli_cached_over_numpy": {k: _stats(v) for k, v in ratios.items()},
        "replan_cpu_s": replan,
        "explorer_cpu_s": explorer,
        "targets": TARGETS,
        "met": {
            "cli_over_numpy": {k: statistics.median(v) <= TARGETS["cli_over_numpy"]
                               for k, v in ratios.items()},
            "replan_same": {k: v["same"] < TARGETS["replan_cpu_s"] for k, v in replan.items()},
            "replan_eps": {k: v["eps"] < TARGETS["replan_cpu_s"] for k, v in replan.items()},
            "explorer_plan": {k: v["plan_cpu_s"] < TARGETS["replan_cpu_s"] for k, v in explorer.items()},
        },
        "numpy_floor_median_cpu_s": floor_median,
        "load_average": {"before": load_before, "after": load()}, "cpus": os.cpu_count(),
    }
    for k, v in result.items():
        print(f"{k:28s} {json.dumps(v)}")
    write_result("plan", result)
    return result


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
