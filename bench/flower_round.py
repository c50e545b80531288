"""A Flower round against fedbound's batched round for the same plan (issue 22).

The plan: examples/nbafl_mnist.toml (NbAFL, 50 clients, MLP 784-256-10, 10 local steps) cut to a few
rounds.  Three ways to run the same rounds, with identical numbers (tests/test_deploy_flower*.py):

* ``batched``: ``fedbound train``'s engine: every round's clients as one batch (torch.func);
* ``flower_inprocess``: fedbound's ServerApp and Flower's ClientApp, one message per client, called in this
  process (``fedbound.deploy.flower_local.InProcessGrid``): what the message-per-client path costs;
* ``flower_ray``: ``fedbound flower --run``: the same app on Flower's simulation engine (Ray backend, one
  virtual SuperNode per client), once (its start-up is reported apart from its rounds).

Per-round wall times are the engine's own ``wall_time`` column (participants -> aggregate -> server noise
-> ledger), so data loading and evaluation are outside them.  ``batched`` and ``flower_inprocess`` are run
interleaved (A B A B, fresh run directories), the ratio taken per repetition.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray simulation run")
    args = parser.parse_args()
    from fedbound.deploy.flower_app import run_app
    from fedbound.deploy.flower_client import client_app
    from fedbound.deploy.flower_local import InProcessGrid
    from fedbound.deploy.flower_server import serve
    from fedbound.deploy.flower_session import run_config
    from fedbound.validation.runner import build_run, prepare_run, train_from_config

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
        serve(InProcessGrid(client_app(), prep.num_clients, cfg), cfg)
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
