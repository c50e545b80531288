"""Engine memory and round time at 10^4 and 10^5 clients (issue 25 item 2).

One logistic-regression NbAFL run per size N (``N`` clients x ``SAMPLES`` samples of ``DIM`` features on
``synthetic_logistic``, the paper's noise, no evaluation), built through ``fedbound train``'s own path
(``prepare_run`` -> ``build_run``) and trained for ``ROUNDS`` rounds, each size in a fresh subprocess so that
its peak RSS (``resource.getrusage``'s ``ru_maxrss``) is its own.  Reported per size: setup time (data, model,
plan) and time per round, wall and CPU seconds (the machine may be shared: CPU seconds / cores bound what a
quiet machine takes), the float32 size of the client data (``N x SAMPLES x DIM x 4`` bytes), the peak RSS,
the RSS of the bare interpreter with torch imported (the fixed base, measured the same way in its own
subprocess) and ``(peak - base) / data``; with two sizes, the marginal ratio ``d peak / d data`` between
them (the engine's chunk working set, bounded by ``[train] memory_mb``, is a fixed cost that the first ratio
charges to the data at small N).  Targets: ratio <= 1.5; at N = 10^5 peak <= 24 GB and < 10 s a round.

``python bench/engine_scale.py [--quick] [--sizes 10000,100000] [--dim 784]``: ``--quick`` runs N = 10^4 only.
Writes ``bench/results/engine_scale.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import load, write_result  # noqa: E402

SAMPLES, DIM, ROUNDS = 20, 784, 1
CONFIG = """
[nbafl]
N = {n}
m = {m}
C = 5.0
eps = 50.0
delta = 0.01
L = 1
mu = 1.0
T = {rounds}

[train]
dataset = "synthetic_logistic"
synthetic_samples = {samples}
synthetic_dim = {dim}
test_fraction = 0.0
model = "logreg"
local_steps = 1
lr = 0.1
eval_clients = false
noise = "paper"
"""


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


def _child(n: int, dim: int) -> dict:
    """One size, in this (fresh) process."""
    import torch  # part of the base

    if n == 0:
        return {"peak_rss_bytes": _peak_bytes()}
    import fedbound.training.config  # noqa: F401 - imports are not setup
    import fedbound.validation.recipes.nbafl  # noqa: F401
    from fedbound.training.engine import Runner, drive
    from fedbound.validation.recipes.runner import build_run, prepare_run

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scale.toml"
        path.write_text(CONFIG.format(n=n, m=SAMPLES, rounds=ROUNDS, samples=n * SAMPLES, dim=dim))
        t0, c0 = time.perf_counter(), time.process_time()
        built = build_run(prepare_run("nbafl", path, design="paper"))
        options = dataclasses.replace(built.options, eval_every=0)  # the rounds alone, no evaluation
        runner = Runner(built.algorithm, built.setup.model, built.setup.data, plan=built.plan,
                        options=options)
        setup_s, setup_cpu = time.perf_counter() - t0, time.process_time() - c0
        setup_peak = _peak_bytes()
        t1, c1 = time.perf_counter(), time.process_time()
        result = drive(runner)
        rounds_s = (time.perf_counter() - t1) / ROUNDS
        rounds_cpu = (time.process_time() - c1) / ROUNDS
    rows = built.setup.data.rows
    return {"clients": n, "samples_per_client": SAMPLES, "features": dim, "rounds": ROUNDS,
            "setup_s": setup_s, "round_s": rounds_s,
            "setup_cpu_s": setup_cpu, "round_cpu_s": rounds_cpu, "torch_threads": torch.get_num_threads(),
            "peak_rss_bytes": _peak_bytes(),
            "peak_rss_after_setup_bytes": setup_peak,
            "data_float32_bytes": n * SAMPLES * dim * 4,
            "engine_rows_bytes": rows.numel() * rows.element_size(),
            "finite": bool(result.params.isfinite().all())}


def _run_child(n: int, dim: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(n), "--dim", str(dim)], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(sizes: tuple[int, ...] = (10_000, 100_000), dim: int = DIM) -> dict:
    base = _run_child(0, dim)["peak_rss_bytes"]
    rows = []
    for n in sizes:
        row = _run_child(n, dim)
        row["base_rss_bytes"] = base
        row["ratio_to_data"] = (row["peak_rss_bytes"] - base) / row["data_float32_bytes"]
        rows.append(row)
        print(f"N = {n:>7,}: setup {row['setup_s']:.2f} s ({row['setup_cpu_s']:.1f} CPU s), round "
              f"{row['round_s']:.2f} s ({row['round_cpu_s']:.1f} CPU s, {row['torch_threads']} threads), "
              f"data {row['data_float32_bytes'] / 2**30:.3f} GiB, "
              f"peak {row['peak_rss_bytes'] / 2**30:.3f} GiB (base {base / 2**30:.3f} GiB), "
              f"(peak - base) / data = {row['ratio_to_data']:.2f}x (target <= 1.5x)", flush=True)
    marginal = None
    if len(rows) >= 2:  # peak = base + slope x data: the slope is what each byte of client data costs
        a, b = rows[0], rows[-1]
        marginal = ((b["peak_rss_bytes"] - a["peak_rss_bytes"])
                    / (b["data_float32_bytes"] - a["data_float32_bytes"]))
        print(f"marginal peak RSS per byte of float32 client data between N = {a['clients']:,} and "
              f"{b['clients']:,}: {marginal:.2f}x (target <= 1.5x)")
    payload = {"what": "LR NbAFL rounds at N clients x 20 samples: setup, round time, peak RSS / data",
               "load_during": load(), "sizes": rows, "marginal_ratio_to_data": marginal,
               "targets": {"ratio_to_data": 1.5, "peak_bytes_at_1e5": 24 * 10**9, "round_s_at_1e5": 10.0}}
    write_result("engine_scale", payload)
    return payload


if __name__ == "__main__":
    args = sys.argv[1:]
    dim_arg = int(args[args.index("--dim") + 1]) if "--dim" in args else DIM
    if "--child" in args:
        print(json.dumps(_child(int(args[args.index("--child") + 1]), dim_arg)))
    else:
        chosen = (10_000,) if "--quick" in args else (10_000, 100_000)
        if "--sizes" in args:
            chosen = tuple(int(v) for v in args[args.index("--sizes") + 1].split(","))
        main(chosen, dim_arg)
