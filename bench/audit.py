"""Audit cost (``python bench/audit.py``): peak memory and CPU seconds of ``fedbound audit`` against the trial
count, and batched trials against one engine call per trial.

Trials against memory and CPU (issue 33 item 5): ``fedbound audit nbafl examples/nbafl_mnist.toml --trials N``
(NbAFL, 50 clients x 100 MNIST images, MLP 784-256-10, 10 local steps: 203,530 parameters) with the paper's
sensitivity 2C/m and with the provable one (:data:`SENSITIVITIES`), each a process of its own whose peak
resident memory and user + system CPU seconds come from ``os.wait4``.  Targets at 2,000 trials: at most 4 GB
and 300 CPU s, and memory flat in the trials (trials stream in batches: ``fedbound.training.trials``).
Baseline, in the same run: the same audit at 250 trials (the fixed costs: canary search over every
participant, coupled shift checks, the one-run experiment).

Batched against one by one (issue 13): 2 x 2,000 one-round trials of NbAFL's small audit setting in one
``federated_trials`` call, against the same trials one call each (timed on a subset, scaled), CPU seconds.

Writes ``bench/results/audit.json``; ``--quick``: the small setting (examples/audit_nbafl.toml) for the
scaling rows and fewer repeats.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUICK_ARGS = ["--quick"]
HEADLINE = ("audit of examples/nbafl_mnist.toml at 2,000 trials: {peak_mb_paper_2000:.0f} MB peak, "
            "{cpu_s_paper_2000:.0f} CPU s (paper 2C/m), {peak_mb_provable_2000:.0f} MB, "
            "{cpu_s_provable_2000:.0f} CPU s (provable); 250 trials: {peak_mb_paper_250:.0f} MB, "
            "{cpu_s_paper_250:.0f} CPU s (targets: <= 4,096 MB, <= 300 s)")
SENSITIVITIES = {"paper": [], "provable": ["--set", 'nbafl.sensitivity="provable"', "--set", "nbafl.C_g=1.0",
                                          "--set", "nbafl.T=5"]}
"""The provable run sets T = 5 (the paper mode's T): without T the recipe's optimal-T search reads the string
``sensitivity`` as a number and fails (``validation/recipes/nbafl.py``)."""


def measure(config: str, trials: int, extra: list[str]) -> dict[str, float]:
    """One ``fedbound audit`` process: its peak resident memory (MB), CPU seconds and verdict."""
    exe = Path(sys.executable).with_name("fedbound")
    cmd = [str(exe), "audit", "nbafl", config, "--trials", str(trials), "--json", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env) as proc:
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    doc = json.loads(out) if proc.returncode == 0 else {}
    return {"peak_mb": usage.ru_maxrss / 1024.0, "cpu_s": usage.ru_utime + usage.ru_stime,
            "wall_s": time.perf_counter() - t0, "exit_status": proc.returncode,
            "verdict": doc.get("verdict", "")[:200], "fast_path": doc.get("fast_path", "")}


def batched_against_one_by_one(trials: int, one_by_one: int) -> dict[str, float]:
    """CPU seconds of ``trials`` trials per side in one call and, scaled, one call per trial (NbAFL's small
    audit setting, sensitivity 2C/m, 10 local steps)."""
    from fedbound.registry import get
    from fedbound.training.config import dump_toml
    from fedbound.training.engine import RunOptions
    from fedbound.training.sensitivity import federated_trials
    from fedbound.validation.audit import federation
    from fedbound.validation.audit.canaries import record_canary

    sections = {name: dict(table) for name, table in get("nbafl").load("audit").small.items()}
    sections["nbafl"].update(sensitivity="paper", eps=2.0)
    sections["train"].update(local_steps=10)
    path = ROOT / "bench" / "results" / "audit_config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_toml(sections))
    from fedbound.config import load_config
    from fedbound.training import config as tc

    entry = get("nbafl")
    cfg = load_config(path, [entry.config_section, tc.TRAIN_SECTION], [], known_sections=("nbafl", "train"))
    defaults = {k: v for k, v in entry.defaults.items() if cfg["nbafl"].get(k) is None}
    setting = {**dict(cfg["nbafl"]), **defaults}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = federation.round_one(entry.load("recipe"), setting, dict(cfg["train"]), 1)
        starts, _ = federation.trajectory(s, 1)
        rep, _ = record_canary("flip", s, s.algorithm, starts, 8, None, 0)
        t0 = time.process_time()
        federated_trials(s.algorithm, s.model, s.data, s.target, s.participants, s.weights,
                         [None] * trials + [rep] * trials, starts, plan=s.plan, options=RunOptions(seed=0))
        batched = time.process_time() - t0
        t0 = time.process_time()
        for k in range(one_by_one):
            federated_trials(s.algorithm, s.model, s.data, s.target, s.participants, s.weights, [None, rep],
                             starts, plan=s.plan, options=RunOptions(seed=k))
        single = (time.process_time() - t0) / one_by_one * trials
    return {"batched_cpu_s": batched, "one_by_one_cpu_s_scaled": single, "speedup": single / batched}


def main() -> dict:
    quick = "--quick" in sys.argv
    config = "examples/audit_nbafl.toml" if quick else "examples/nbafl_mnist.toml"
    out: dict = {"config": config, "trials": [250, 2000]}
    for name, extra in SENSITIVITIES.items():
        for trials in (250, 2000):
            m = measure(config, trials, extra)
            for key, value in m.items():
                out[f"{key}_{name}_{trials}"] = value
            print(f"{config} {name} {trials} trials: {m['peak_mb']:.0f} MB peak, {m['cpu_s']:.1f} CPU s "
                  f"({m['wall_s']:.0f} s wall); {m['verdict'][:60]}")
        out[f"memory_growth_{name}"] = out[f"peak_mb_{name}_2000"] / out[f"peak_mb_{name}_250"]
    out.update(batched_against_one_by_one(500 if quick else 2000, 20 if quick else 60))
    out["targets"] = {"peak_mb_2000": 4096, "cpu_s_2000": 300}
    print(f"batched {out['batched_cpu_s']:.2f} CPU s, one by one {out['one_by_one_cpu_s_scaled']:.1f} CPU s "
          f"(x{out['speedup']:.0f})")
    write_result("audit", out)
    return out


if __name__ == "__main__":
    main()
