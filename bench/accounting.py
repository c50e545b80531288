"""Vectorised noise calibration vs a per-point loop of Opacus's get_noise_multiplier, same 1,000 targets.

Grid: eps in geomspace(0.5, 20, 10) x q in geomspace(1e-3, 1, 10) x steps in geomspace(10, 1e4, 10),
delta = 1e-5.  Both sides use the same Renyi orders (integers 2..64) and the same conversion, so the sigma's
must agree; Opacus runs with epsilon_tolerance = 1e-4 (its default 0.01 leaves sigma ~1 % off).  Target:
>= 100x faster, sigma within 1e-3 relative.  Also times ours on fedbound's default orders (fractional and
large integer orders).  Writes bench/results/accounting.json.
Usage: python bench/accounting.py [--opacus-points N]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _harness import fmt, interleaved, ratio, write_result

from fedbound.accounting import calibrate_noise

ORDERS = np.arange(2.0, 65.0)
QUICK_ARGS = ["--opacus-points", "50"]  # run_all.py --quick
DELTA = 1e-5
OPACUS_TOLERANCE = 1e-4


def grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    eps, q, steps = np.meshgrid(np.geomspace(0.5, 20.0, 10), np.geomspace(1e-3, 1.0, 10),
                                np.round(np.geomspace(10, 1e4, 10)).astype(int), indexing="ij")
    return eps.ravel(), q.ravel(), steps.ravel()


def opacus_loop(eps: np.ndarray, q: np.ndarray, steps: np.ndarray) -> np.ndarray:
    from opacus.accountants.utils import get_noise_multiplier

    out = np.empty(eps.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "optimal order is the largest alpha" at some grid points
        for i in range(eps.size):
            out[i] = get_noise_multiplier(target_epsilon=float(eps[i]), target_delta=DELTA,
                                          sample_rate=float(q[i]), steps=int(steps[i]),
                                          epsilon_tolerance=OPACUS_TOLERANCE, alphas=list(ORDERS))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--opacus-points", type=int, default=1000,
                        help="grid points for the Opacus loop (1000 = all; fewer for a quick look)")
    args = parser.parse_args()
    eps, q, steps = grid()

    ours = calibrate_noise(eps, DELTA, q, steps, orders=ORDERS)
    n = min(args.opacus_points, eps.size)
    pick = np.linspace(0, eps.size - 1, n).round().astype(int)
    theirs = opacus_loop(eps[pick], q[pick], steps[pick])
    scale = eps.size / n  # the Opacus loop's time is extrapolated only when n < 1000
    t = interleaved({"ours": lambda: calibrate_noise(eps, DELTA, q, steps, orders=ORDERS),
                     "ours_default_orders": lambda: calibrate_noise(eps, DELTA, q, steps),
                     "opacus_loop": lambda: opacus_loop(eps[pick], q[pick], steps[pick])},
                    repeat=3, warmup=0)
    opacus = type(t["opacus_loop"])(tuple(v * scale for v in t["opacus_loop"].samples))
    speedup = ratio(opacus, t["ours"])

    rel = np.abs(ours[pick] - theirs) / theirs
    print(f"grid: {eps.size} targets (eps, q, steps), delta = {DELTA:g}, orders 2..64 (interleaved, medians)")
    print(f"ours (vectorised, one call):        {t['ours'].median:8.3f} s")
    print(f"ours, default orders:               {t['ours_default_orders'].median:8.3f} s")
    print(f"Opacus get_noise_multiplier loop:   {opacus.median:8.3f} s" + ("" if n == eps.size else
                                                                         f" (extrapolated from {n} points)"))
    print(f"speed-up: {fmt(speedup, 0)}  (target >= 100x)")
    print(f"max relative difference of sigma: {rel.max():.2e}  (target <= 1e-3; median {np.median(rel):.1e})")
    write_result("accounting", {
        "grid_points": int(eps.size), "delta": DELTA, "orders": "integers 2..64",
        "opacus_epsilon_tolerance": OPACUS_TOLERANCE, "opacus_points_timed": int(n),
        "seconds": {"ours": t["ours"].to_json(), "ours_default_orders": t["ours_default_orders"].to_json(),
                    "opacus_loop": opacus.to_json()},
        "speedup": speedup, "max_rel_diff_sigma": float(rel.max()),
        "median_rel_diff_sigma": float(np.median(rel)),
        "target_speedup": 100.0, "target_max_rel_diff": 1e-3,
        "meets_targets": bool(speedup["median"] >= 100.0 and rel.max() <= 1e-3),
    })


if __name__ == "__main__":
    main()
