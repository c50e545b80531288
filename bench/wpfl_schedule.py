"""Seed 004's per-round min-max schedule for N = 100 clients on K = 64 subchannels: the vectorised P7 (one
golden-section search over all clients) against the spec's per-client scipy bounded Brent loop, measured in
the same run; the whole round (KM + Theta_L,min + eta_F* + P7) and a T-round schedule in one call.

Target (issue 12): a round well under a second, <= 50 ms on 2 cores.  Writes bench/results/wpfl_schedule.json.
Usage: python bench/wpfl_schedule.py
"""

from __future__ import annotations

import numpy as np
from _harness import interleaved, ratio, write_result

from fedbound.scheduling import wpfl as ws
from fedbound.scheduling.wireless import WirelessSetting, path_loss_gain

N, K = 100, 64
SETTING = {"T": 20, "C": 3.0, "R": 16, "n_params": 7850, "mu": 0.13, "L": 0.43, "G0": 2.0, "M": 1.0,
           "phi1": 0.1, "phi2": 0.001, "vphi1": 0.001, "vphi2": 1.0, "eps_P": 0.999}
SIGMA = 0.00735867


def main() -> None:
    radio = WirelessSetting(num_clients=N, num_subchannels=K, n_params=7850, tau_max=0.05,
                            total_bandwidth_hz=64e6)
    rng = np.random.default_rng(0)
    loss = np.asarray(path_loss_gain(rng.uniform(10, 100, N)))
    up, down = loss[:, None] * rng.exponential(size=(N, K)), loss * rng.exponential(size=N)
    uploads = np.zeros(N, dtype=int)

    def one_round():
        return ws.schedule_round_minmax(up, down, uploads, radio, SETTING, SIGMA)

    result = one_round()
    gamma, eps_f = result["Gamma"], result["eps_F"]

    def vectorised():
        return ws.solve_P7(0.999, 0.13, gamma, eps_f, 2.0, 1.0)

    def scipy_loop():
        return ws.solve_P7(0.999, 0.13, gamma, eps_f, 2.0, 1.0, method="scipy")

    run_setting = WirelessSetting(num_clients=N, num_subchannels=K, n_params=7850, tau_max=0.05,
                                  total_bandwidth_hz=64e6)
    t = interleaved({"vectorised": vectorised, "scipy_loop": scipy_loop, "round": one_round}, repeat=5)
    t_run = interleaved({"T_rounds": lambda: ws.schedule_rounds(run_setting, SETTING, SIGMA, "proposed",
                                                                seed=0)}, repeat=2)["T_rounds"]
    gap = float(np.max(np.abs(vectorised().Phi / scipy_loop().Phi - 1)))
    rounds = ws.schedule_rounds(run_setting, SETTING, SIGMA, "proposed", seed=0).rounds
    speedup = ratio(t["scipy_loop"], t["vectorised"])
    payload = {"N": N, "K": K, "P7_vectorised_s": t["vectorised"].median,
               "P7_scipy_loop_s": t["scipy_loop"].median, "speedup_vs_scipy_loop": speedup["median"],
               "speedup_min_max": [speedup["min"], speedup["max"]],
               "max_rel_gap_Phi": gap, "round_s": t["round"].median, "round_s_min_max":
               [min(t["round"].samples), max(t["round"].samples)], "round_target_s": 0.05,
               "round_meets_target": t["round"].median <= 0.05, "T_round_schedule_s": t_run.median,
               "T_rounds": rounds, "selected_per_round": len(result["pairs"])}
    for k, v in payload.items():
        print(f"{k:>24}: {v:.4g}" if isinstance(v, float) else f"{k:>24}: {v}")
    write_result("wpfl_schedule", payload)


if __name__ == "__main__":
    main()
