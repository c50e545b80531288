"""How fast NbAFL's joint (T, K) design search is (issue 23: "a few seconds for N = 50").

Measured in one run, interleaved, against two baselines: the K = N search alone (Theorem 2's T scan, what
the plan did before) and the earlier per-K branch and bound (dp-accounting calibrations, orders <= 32) for
three K's, whose time per K times the N - 1 K's is what a joint search by it would cost (it took 294 s).
"""

from __future__ import annotations

import math
import sys
import tomllib
from pathlib import Path

from _harness import interleaved, ratio, write_result

from fedbound.accounting.rdp import DEFAULT_ORDERS
from fedbound.bounds import nbafl as nb
from fedbound.scheduling import nbafl_design as nbd

REPO = Path(__file__).resolve().parents[1]
BASE = tomllib.loads((REPO / "examples" / "nbafl_mnist.toml").read_text())["nbafl"]


def setting(**over: float) -> dict:
    s = nb.with_tight_z({**BASE, **over}, "paper")
    s.setdefault("L", 1)
    return {k: v for k, v in s.items() if k not in ("T", "K")}


def per_k_old(s: dict, Ks: tuple[int, ...]) -> None:
    for K in Ks:
        cal = nbd.KofNCalibration(s["eps"], s["delta"], K / s["N"], DEFAULT_ORDERS[DEFAULT_ORDERS <= 32])
        nbd._best_T_at_k(s, K, math.inf, None, cal)


def main() -> None:
    quick = "--quick" in sys.argv
    result: dict = {}
    for N in (50, 100) if quick else (50, 100, 1000):
        s = setting(N=N)
        Ks = (N // 2, 3 * N // 4, N - 1)
        t = interleaved({"joint": lambda s=s: nbd.optimal_design(s, joint_k=True),
                         "K=N only": lambda s=s: nbd.optimal_design(s),
                         "old per-K x3": lambda s=s, Ks=Ks: per_k_old(s, Ks)}, repeat=1 if N == 1000 else 3)
        d = nbd.optimal_design(s, joint_k=True).design
        result[f"N={N}"] = {name: v.to_json() for name, v in t.items()} | {
            "joint / K=N only": ratio(t["joint"], t["K=N only"]),
            "joint / (old per-K x (N-1)), estimated":
                t["joint"].median / (t["old per-K x3"].median / 3 * (N - 1)),
            "argmin": {"T": d.T, "K": d.K, "bound": d.bound}}
        print(N, {k: round(v.median, 3) for k, v in t.items()}, result[f"N={N}"]["argmin"])
    write_result("nbafl_joint", result)


if __name__ == "__main__":
    main()
