"""A Flower round against fedbound's batched round for the same plan (issue 22).

The plan: examples/nbafl_mnist.toml (NbAFL, 50 clients, MLP 784-256-10, 10 local steps) cut to a few
rounds.  Three ways to run the same rounds (identical numbers with ``--reproducible-noise``,
tests/test_deploy_flower*.py; the timed Flower runs draw their noise from OS entropy, as deployed):

* ``batched``: ``fedbound train``'s engine: every round's clients as one batch (torch.func);
* ``flower_inprocess``: fedbound's ServerApp and Flower's ClientApp, one message per client, called in this
  process (``fedbound.deploy.flower_local.InProcessGrid``): what the message-per-client path costs;
* ``flower_ray``: ``fedbound flower --run``: the same app on Flower's simulation engine (Ray backend, one
  virtual SuperNode per client), once (its start-up is reported apart from its rounds).

Per-round wall times are the engine's own ``wall_time`` column (participants -> aggregate -> server noise
-> ledger), so data loading and evaluation are outside them.  ``batched`` and ``flower_inprocess`` are run
interleaved (A B A B, fresh run directories), the ratio taken per repetition.

``--agreement``: the measurement behind "same numbers as fedbound's simulator" (README "Deploy on Flower"):
the Flower runs with noise reproducible from the seed (simulation only), the noise std measured on uploads
drawn from OS entropy (the deployed source).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd
from _harness import load, write_result

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "examples" / "nbafl_mnist.toml"


def _round_walls(run_dir: Path) -> list[float]:
    table = pd.read_csv(run_dir / "metrics.csv")
    return table[table.client.isna()]["wall_time"].tolist()


AGREEMENT = {  # the example configs, long ones cut to a few rounds (CRD still cuts T inside the run)
    "nbafl": ("nbafl", "nbafl_mnist.toml", []),
    "nbafl_K20": ("nbafl", "nbafl_mnist.toml", ["nbafl.K=20", "nbafl.T=5"]),
    "udp": ("udp", "udp_mnist.toml", ["udp.T=10"]),
    "udp_crd": ("udp", "udp_crd_mnist.toml", ["udp.T=15"]),
}


def _measured_noise(paper: str, config: Path, overrides: list[str]) -> dict[str, float]:
    """Per stage, the std of the noise on uploads (clients 0-4, round 1: upload minus the same client's
    noiseless upload) and on the server's update, over the plan's std."""
    import numpy as np
    import torch

    from fedbound.deploy.flower_client import client_update
    from fedbound.deploy.flower_session import client_side, run_config
    from fedbound.training.engine import RoundContext, RunState
    from fedbound.training.noise import Streams
    from fedbound.validation.recipes.runner import build_run, prepare_run

    prep = prepare_run(paper, config, overrides)
    built = build_run(prep)
    plan = built.plan
    side = client_side(run_config(prep, plan, "unused"))
    start = torch.zeros(side.model.n_params)
    out = {}
    for stage in plan.sigma:
        if stage == "server":
            sigma = float(plan.stage_sigma("server", 0)[0])
            if sigma > 0:
                state = RunState(round=0, rounds=plan.rounds, global_params=start, plan=plan)
                ctx = RoundContext(0, state, side.model, side.data, Streams(prep.train["seed"]), side.options,
                                   None)
                noise = built.algorithm.server_update(ctx, torch.zeros(side.model.n_params))
                out["server"] = float(noise.double().std()) / sigma
            continue
        draws = []
        for client in range(5):
            sigma = float(plan.stage_sigma(stage, 0, np.array([client]))[0])
            noisy, _ = client_update(side, 0, client, start, {stage: sigma})
            clean, _ = client_update(side, 0, client, start, {stage: 0.0})
            draws.append(((noisy - clean).double() / sigma).numpy())
        out[stage] = float(np.concatenate(draws).std())
    return out


def agreement(seeds: int = 3) -> None:
    """Flower (Ray simulation engine, seed 0) against fedbound train (seeds 0 .. seeds-1) on the example
    configs: per-round ledger epsilon difference, loss difference against the seeds' spread, noise std."""
    import numpy as np

    from fedbound.deploy.flower_app import run_app
    from fedbound.deploy.flower_session import run_config
    from fedbound.validation.recipes.runner import build_run, prepare_run, train_from_config

    warnings.simplefilter("ignore")
    tmp = Path(tempfile.mkdtemp(prefix="fedbound-flower-agreement-"))
    results = {}
    for name, (paper, file, overrides) in AGREEMENT.items():
        config = REPO / "examples" / file
        overrides = [*overrides, "train.probe_records=0"]
        trains = []
        for seed in range(seeds):
            out = tmp / f"{name}_train{seed}"
            train_from_config(paper, config, overrides, out=out, seed=seed)
            table = pd.read_csv(out / "metrics.csv")
            trains.append(table[table.client.isna()].reset_index(drop=True))
        prep = prepare_run(paper, config, overrides)
        t0 = time.perf_counter()
        run_app(run_config(prep, build_run(prep).plan, tmp / f"{name}_flower", reproducible_noise=True))
        wall = time.perf_counter() - t0
        table = pd.read_csv(tmp / f"{name}_flower" / "metrics.csv")
        flower = table[table.client.isna()].reset_index(drop=True)
        ref = trains[0]
        rounds = min(len(t) for t in trains)
        spread = np.ptp(np.stack([t["loss"].to_numpy()[:rounds] for t in trains]), axis=0)
        dloss = np.abs(flower["loss"].to_numpy() - ref["loss"].to_numpy())
        results[name] = {
            "config": f"examples/{file} {' '.join(overrides)}", "rounds": len(flower),
            "rounds_train_seed0": len(ref), "flower_wall_s": wall,
            "max_abs_epsilon_diff": float(np.max(np.abs(flower["epsilon_spent"] - ref["epsilon_spent"]))),
            "max_abs_epsilon_paper_diff": float(np.max(np.abs(flower["epsilon_spent_paper"]
                                                              - ref["epsilon_spent_paper"]))),
            "final_epsilon": float(flower["epsilon_spent"].iloc[-1]),
            "final_epsilon_flower_rdp": (None if "epsilon_flower" not in flower
                                         else float(flower["epsilon_flower"].iloc[-1])),
            "max_abs_loss_diff": float(dloss.max()),
            "seed_spread_of_loss_min_over_rounds": float(spread.min()),
            "max_loss_diff_over_spread": float(np.max(dloss[:rounds] / spread)),
            "noise_std_over_plan": _measured_noise(paper, config, overrides),
        }
        print(name, results[name], flush=True)
    write_result("flower_agreement", {"seeds": seeds, "results": results})


QUICK_ARGS = ["--no-ray", "--rounds", "1", "--repeat", "2"]  # run_all.py --quick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray simulation run")
    parser.add_argument("--agreement", action="store_true", help="instead: Flower vs fedbound train on the "
                        "example configs, 3 seeds (bench/results/flower_agreement.json)")
    args = parser.parse_args()
    if args.agreement:
        agreement()
        return
    from fedbound.deploy.flower_app import run_app
    from fedbound.deploy.flower_client import client_app
    from fedbound.deploy.flower_local import InProcessGrid
    from fedbound.deploy.flower_server import serve
    from fedbound.deploy.flower_session import run_config
    from fedbound.validation.recipes.runner import build_run, prepare_run, train_from_config

    overrides = [f"nbafl.T={args.rounds}", "train.probe_records=0"]
    warnings.simplefilter("ignore")
    prep = prepare_run("nbafl", CONFIG, overrides)
    plan = build_run(prep).plan
    tmp = Path(tempfile.mkdtemp(prefix="fedbound-bench-flower-"))
    sides: dict[str, list[float]] = {"batched": [], "flower_inprocess": []}
    ratios = []
    for rep in range(args.repeat):
        out = tmp / f"train{rep}"
        train_from_config("nbafl", CONFIG, overrides, out=out)
        batched = statistics.median(_round_walls(out))
        cfg = run_config(prep, plan, tmp / f"flower{rep}")
        clients = client_app(store=tmp / f"store{rep}", simulation=True)
        serve(InProcessGrid(clients, prep.num_clients, cfg), cfg, simulation=True)
        flower = statistics.median(_round_walls(tmp / f"flower{rep}"))
        sides["batched"].append(batched)
        sides["flower_inprocess"].append(flower)
        ratios.append(flower / batched)
        print(f"rep {rep}: batched round {batched:.3f} s, Flower round (in-process) {flower:.3f} s: "
              f"{flower / batched:.1f}x", flush=True)
    result = {"setting": f"nbafl_mnist.toml, N = {prep.num_clients}, {args.rounds} rounds, "
                         f"{plan.info.get('sensitivity_uplink', 0):.3g} uplink sensitivity",
              "round_wall_s": {k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
                               for k, v in sides.items()},
              "flower_inprocess_over_batched": {"median": statistics.median(ratios), "min": min(ratios),
                                                "max": max(ratios)}}
    if not args.no_ray:
        t0 = time.perf_counter()
        run_app(run_config(prep, plan, tmp / "ray"))
        total = time.perf_counter() - t0
        walls = _round_walls(tmp / "ray")
        ray_round = statistics.median(walls)
        result["flower_ray"] = {"round_wall_s_median": ray_round, "total_s": total,
                                "startup_and_eval_s": total - sum(walls),
                                "over_batched": ray_round / statistics.median(sides["batched"])}
        print(f"Flower simulation engine (Ray): round {ray_round:.3f} s "
              f"({ray_round / statistics.median(sides['batched']):.1f}x batched), whole run {total:.1f} s")
    result["load_after"] = load()
    write_result("flower_round", result)


if __name__ == "__main__":
    main()
