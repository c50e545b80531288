"""Sweep speed (issue 16): many runs in one batch against the same runs one at a time, interleaved.

1. Per-run overhead dominates: a 40-run NbAFL sweep (8 values of T x 5 seeds) with logistic regression on
   ``synthetic_logistic`` (20 clients x 40 samples, 20 features):
   ``batched`` (``run_sweep``, compatible runs in one engine call) against ``one_by_one`` (the same 40 runs
   one after another in this process, ``batch=False``) and against 40 ``fedbound train`` invocations
   (``CLI_RUNS`` of them are timed and scaled to 40; the JSON says so).  Targets: >= 4x and >= 10x.
2. Compute dominates: the example's MLP (784-256-10, 10 local steps) on the MNIST subset, a smaller sweep
   (``MLP_T`` x ``MLP_SEEDS``): the batched sweep's wall time against the sum of its runs' training-round
   compute (the per-round ``wall_time`` of the same runs trained one by one).  Target: within 15 %.

Every comparison is interleaved (``_harness.interleaved``: A B A B ...); medians with min-max and the
machine load are recorded.  Writes ``bench/results/sweep.json``; ``--quick`` uses fewer repetitions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import fmt, interleaved, ratio, write_result  # noqa: E402

from fedbound.validation.sweep import RunSpec, run_sweep  # noqa: E402

QUICK = "--quick" in sys.argv
REPO = Path(__file__).resolve().parents[1]
LOGREG_CONFIG = """
[nbafl]
N = 20
m = 40
C = 5.0
eps = 20.0
delta = 0.01
L = 1
mu = 1.0

[train]
dataset = "synthetic_logistic"
synthetic_samples = 1000
synthetic_dim = 20
test_fraction = 0.2
model = "logreg"
local_steps = 5
lr = 0.1
eval_clients = false
noise = "tight"
"""
T_VALUES = (2, 4, 6, 8, 10, 12, 14, 16)
SEEDS = (0, 1, 2, 3, 4)
CLI_RUNS = 4
MLP_T, MLP_SEEDS = (2, 3), (0, 1)


def _sweep(specs: list[RunSpec], batch: bool):
    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_sweep(specs, out, batch=batch, progress=False)


def _cli(config: Path, specs: list[RunSpec]) -> None:
    with tempfile.TemporaryDirectory() as out:
        for spec in specs:
            subprocess.run([sys.executable, "-m", "fedbound", "train", "nbafl", str(config), "--set",
                            spec.overrides[0], "--seed", str(spec.seed), "--out", out, "--overwrite",
                            "--no-progress", "--json"], check=True, capture_output=True, cwd=REPO,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})


def per_run_overhead(folder: Path) -> dict:
    config = folder / "nbafl_logreg.toml"
    config.write_text(LOGREG_CONFIG)
    specs = [RunSpec("nbafl", config, (f"T={T}",), seed, {"T": T}) for T in T_VALUES for seed in SEEDS]
    _sweep(specs[:2], True)  # imports and first-call costs outside the timings
    cli_specs = specs[:: len(specs) // CLI_RUNS][:CLI_RUNS]
    t = interleaved({"batched": lambda: _sweep(specs, True), "one_by_one": lambda: _sweep(specs, False),
                     f"cli_{CLI_RUNS}_runs": lambda: _cli(config, cli_specs)},
                    repeat=2 if QUICK else 3, warmup=0)
    scale = len(specs) / CLI_RUNS
    cli = t[f"cli_{CLI_RUNS}_runs"]
    cli40 = type(cli)(tuple(v * scale for v in cli.samples))
    vs_seq, vs_cli = ratio(t["one_by_one"], t["batched"]), ratio(cli40, t["batched"])
    return {"runs": len(specs), "seconds": {**{k: v.to_json() for k, v in t.items()},
                                            "cli_scaled_to_40": cli40.to_json()},
            "cli_note": f"{CLI_RUNS} `fedbound train` invocations timed, scaled x{scale:g} to 40",
            "one_by_one_over_batched": vs_seq, "cli_over_batched": vs_cli,
            "targets": {"one_by_one_over_batched >= 4": vs_seq["median"] >= 4,
                        "cli_over_batched >= 10": vs_cli["median"] >= 10}}


def compute_bound() -> dict:
    example = REPO / "examples" / "nbafl_mnist.toml"
    specs = [RunSpec("nbafl", example, (f"T={T}",), seed, {"T": T}) for T in MLP_T for seed in MLP_SEEDS]
    _sweep(specs[:1], False)
    compute: list[float] = []

    def one_by_one():
        compute.append(float(_sweep(specs, False).table["wall_time"].sum()))

    t = interleaved({"batched": lambda: _sweep(specs, True), "one_by_one": one_by_one},
                    repeat=2 if QUICK else 3, warmup=0)
    rounds = type(t["batched"])(tuple(compute))
    over = ratio(t["batched"], rounds)
    return {"runs": len(specs), "seconds": {"batched_sweep": t["batched"].to_json(),
                                            "one_by_one_sweep": t["one_by_one"].to_json(),
                                            "sum_of_round_compute": rounds.to_json()},
            "batched_over_round_compute": over,
            "note": "round compute = the sum of the runs' per-round wall_time (local training, uploads, "
                    "server update, ledger; evaluation excluded), from the same runs trained one by one",
            "target": "batched sweep within 15 % of its round compute", "met": over["median"] <= 1.15}


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        logreg = per_run_overhead(Path(folder))
    print(f"40-run NbAFL sweep, logreg: one-by-one / batched = {fmt(logreg['one_by_one_over_batched'])} "
          f"(target >= 4); 40 CLI runs / batched = {fmt(logreg['cli_over_batched'])} (target >= 10; "
          f"{logreg['cli_note']})")
    mlp = compute_bound()
    print(f"{mlp['runs']}-run NbAFL sweep, MLP on MNIST: batched wall / round compute = "
          f"{fmt(mlp['batched_over_round_compute'])} (target <= 1.15)")
    write_result("sweep", {"quick": QUICK, "logreg_per_run_overhead": logreg, "mlp_compute_bound": mlp})


if __name__ == "__main__":
    main()
