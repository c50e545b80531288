"""Engine memory, checkpoint and round time at 10^4 to 10^6 clients (issues 25 item 2, 35).

One logistic-regression NbAFL run per case (``N`` clients x 20 samples of ``dim`` features on
``synthetic_logistic``, the tight noise) through ``fedbound train``'s own path (``prepare_run`` ->
``build_run`` -> the sensitivity probe -> ``run`` with a run directory: the budget check, the probe, the
ledger and the checkpoint are all in it; evaluation off) for one round, each case in a fresh subprocess
with one torch/OpenMP/MKL thread so that its peak RSS (``ru_maxrss``) is its own.  Reported per case:
setup (data, model, plan, budget check), probe and round time, wall and CPU seconds (the machine may be
shared), the float32 size of the client data (``N x 20 x dim x 4`` bytes), the peak RSS, the bare
interpreter with torch imported (the fixed base, measured the same way), the checkpoint's size, and
between the two dim-20 cases the memory per added client beyond its data.

Targets (issue 35): peak RSS <= 1.5 x data + 500 MB at N = 10^5 (dim 20) and N = 20,000 (dim 784); at most
2 KB per added client beyond its data; checkpoint <= 64 MB at 10^5 clients.  ``--million`` adds N = 10^6
(dim 20): its time and memory are stated, not targeted; ``fedbound train nbafl`` refuses N > 10^5 (the
documented maximum of ``[nbafl] N``), so that case runs the same recipe and engine through the Python API.

``python bench/engine_scale.py [--quick] [--million] [--cases 10000x20,100000x20]``: ``--quick`` runs
10^4 x dim 20 only.  Writes ``bench/results/engine_scale.json``.
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

SAMPLES, ROUNDS = 20, 1
CASES = ((10_000, 20), (100_000, 20), (20_000, 784))
MILLION = (1_000_000, 20)
MB = 2**20
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
noise = "tight"
"""
NBAFL_MAX_N = 100_000
"""``[nbafl] N``'s documented maximum (``fedbound.papers.nbafl.MAXIMA``: the planner's K analysis is
exhaustive over 1..N); a larger case sets N on the prepared run, as a Python user of the recipe would."""
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - start[0], time.process_time() - start[1]


def _child(n: int, dim: int) -> dict:
    """One case, in this (fresh) process: ``fedbound train``'s steps, timed one by one."""
    import torch  # part of the base

    torch.set_num_threads(1)
    if n == 0:
        return {"peak_rss_bytes": _peak_bytes()}
    import fedbound.training.config  # noqa: F401 - imports are not setup
    import fedbound.validation.recipes.nbafl  # noqa: F401
    from fedbound.training import checkpoint as ckpt
    from fedbound.training.engine import run
    from fedbound.validation.recipes.runner import _probe, build_run, prepare_run

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scale.toml"
        api = n > NBAFL_MAX_N
        given = NBAFL_MAX_N if api else n
        path.write_text(CONFIG.format(n=given, m=SAMPLES, rounds=ROUNDS, samples=given * SAMPLES, dim=dim))
        start = _clock()
        prep = prepare_run("nbafl", path, design="paper")
        if api:  # past [nbafl] N's documented maximum: the same recipe and engine through the Python API
            prep.setting["N"] = prep.num_clients = n
            prep.train["synthetic_samples"] = n * SAMPLES
        built = build_run(prep)
        setup = _since(start)
        start = _clock()
        paper, train = prep.paper, prep.train
        copies = paper.load("audit").prepare(built.algorithm) if paper.audit else built.algorithm
        probes = _probe(paper.short, copies, built.setup, built.plan, built.options, train, None, "initial")
        probe = _since(start)
        run_dir = ckpt.prepare_run_dir(Path(tmp) / "run", prep.key)
        start = _clock()
        options = dataclasses.replace(built.options, eval_every=0)  # the rounds alone, no evaluation
        result = run(built.algorithm, built.setup.model, built.setup.data, plan=built.plan, options=options,
                     run_dir=run_dir, run_key=prep.key)
        rounds = _since(start)
        checkpoint = (run_dir / ckpt.CHECKPOINT).stat().st_size
    return {"clients": n, "samples_per_client": SAMPLES, "features": dim, "rounds": ROUNDS, "python_api": api,
            "setup_s": setup[0], "setup_cpu_s": setup[1], "probe_s": probe[0], "probe_cpu_s": probe[1],
            "probed": bool(probes), "round_s": rounds[0] / ROUNDS, "round_cpu_s": rounds[1] / ROUNDS,
            "torch_threads": torch.get_num_threads(), "peak_rss_bytes": _peak_bytes(),
            "data_float32_bytes": n * SAMPLES * dim * 4, "checkpoint_bytes": checkpoint,
            "epsilon_spent": result.summary.get("epsilon_spent"),
            "finite": bool(result.params.isfinite().all())}


def _run_child(n: int, dim: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(n), "--dim", str(dim)], check=True,
                         capture_output=True, text=True, env={**os.environ, **THREADS})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _targets(row: dict) -> dict:
    limit = 1.5 * row["data_float32_bytes"] + 500 * MB
    out = {"peak_limit_bytes": limit, "peak_within_limit": row["peak_rss_bytes"] <= limit}
    if row["clients"] >= 100_000 and row["features"] == 20:
        out["checkpoint_within_64mb"] = row["checkpoint_bytes"] <= 64 * MB
    return out


def main(cases: tuple[tuple[int, int], ...] = CASES) -> dict:
    base = _run_child(0, 20)["peak_rss_bytes"]
    rows = []
    for n, dim in cases:
        row = _run_child(n, dim)
        row["base_rss_bytes"] = base
        row["ratio_to_data"] = (row["peak_rss_bytes"] - base) / row["data_float32_bytes"]
        row.update(_targets(row))
        rows.append(row)
        print(f"N = {n:>9,} x {SAMPLES} x dim {dim}: setup {row['setup_s']:.1f} s, probe "
              f"{row['probe_cpu_s']:.2f} CPU s, round {row['round_s']:.2f} s "
              f"({row['round_cpu_s']:.2f} CPU s); "
              f"data {row['data_float32_bytes'] / MB:,.0f} MB, peak {row['peak_rss_bytes'] / MB:,.0f} MB "
              f"(limit 1.5 x data + 500 MB = {row['peak_limit_bytes'] / MB:,.0f} MB), checkpoint "
              f"{row['checkpoint_bytes'] / MB:.2f} MB", flush=True)
    per_client = None
    small = sorted((r for r in rows if r["features"] == 20 and r["clients"] <= 100_000),
                   key=lambda r: r["clients"])
    if len(small) >= 2:  # peak = fixed + clients x (data + overhead): the overhead is what each client adds
        a, b = small[0], small[-1]
        slope = (b["peak_rss_bytes"] - a["peak_rss_bytes"]) / (b["clients"] - a["clients"])
        per_client = slope - SAMPLES * 20 * 4
        print(f"memory per added client beyond its {SAMPLES * 20 * 4} bytes of data, between N = "
              f"{a['clients']:,} and {b['clients']:,}: {per_client:,.0f} bytes (target <= 2 KB)")
    payload = {"what": "LR NbAFL, fedbound train's path (budget check, probe, ledger, checkpoint), one round "
                       "at N clients x 20 samples, one thread", "load_during": load(), "sizes": rows,
               "per_client_overhead_bytes": per_client,
               "targets": {"peak": "<= 1.5 x data + 500 MB", "per_client_overhead_bytes": 2048,
                           "checkpoint_bytes_at_1e5": 64 * MB},
               "met": all(r["peak_within_limit"] for r in rows if r["clients"] < 1_000_000)
               and all(r.get("checkpoint_within_64mb", True) for r in rows)
               and (per_client is None or per_client <= 2048)}
    write_result("engine_scale", payload)
    return payload


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--child" in args:
        dim_arg = int(args[args.index("--dim") + 1])
        print(json.dumps(_child(int(args[args.index("--child") + 1]), dim_arg)))
    else:
        chosen = ((10_000, 20),) if "--quick" in args else CASES
        if "--cases" in args:
            spec = args[args.index("--cases") + 1].split(",")
            chosen = tuple(tuple(int(v) for v in c.split("x")) for c in spec)
        if "--million" in args:
            chosen = (*chosen, MILLION)
        main(chosen)
