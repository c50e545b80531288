"""The training ledger's cost per round with its PLD column (issue 23), on WPFL's example plan.

examples/wpfl_mnist.toml's noise plan at the plan's exact sigma (``[train] noise = "tight"``: 20 clients,
q = 0.01, T0 = 20 uploads each over the proposed schedule's rounds), its ledger alone (``releases``,
``check_budget``, ``commit``, ``epsilons`` per round, the schedule's participants), three ways, interleaved
(CPU seconds per round):

* ``rdp``: the tight column by RDP only (the ledger before issue 23, reproduced by disabling the PLD min), at
  the RDP calibration's sigma (what that ledger trained; it refuses the exact sigma at the first upload);
* ``pld_cold``: min(RDP, PLD) with an empty PLD cache (a fresh process: one PLD per distinct upload count);
* ``pld_warm``: the same run again in the same process (every PLD from the cache: a sweep's repeated runs).

Writes ``bench/results/ledger_pld.json``.  ``--quick``: two repetitions instead of three.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import interleaved, ratio, write_result  # noqa: E402

from fedbound.bounds.wpfl import tight_calibration  # noqa: E402
from fedbound.training import privacy  # noqa: E402
from fedbound.validation.recipes.wpfl import full_setting, wpfl_plan, wpfl_schedule  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wpfl_mnist.toml"
REPEAT = 2 if "--quick" in sys.argv else 3


def _setting() -> dict:
    import tomllib

    return full_setting(tomllib.loads(EXAMPLE.read_text())["wpfl"])


def _play(plan, clients) -> float:
    ledger = privacy.PrivacyLedger(plan)
    for t, part in enumerate(clients):
        part = np.asarray(part)
        rel = ledger.releases(t, part, np.full(len(part), 1.0 / max(len(part), 1)))
        ledger.check_budget(rel, t)
        ledger.commit(rel)
        ledger.epsilons()
    return float(max(v.max() for v in ledger.epsilons()["tight"].values()))


HEADLINE = ("ledger with PLD on WPFL's plan: {pld_cold_ms_per_round:.1f} ms CPU per round cold, "
            "{pld_warm_ms_per_round:.1f} ms cached, RDP only {rdp_ms_per_round:.1f} ms")


def main() -> dict[str, float]:
    setting = _setting()
    sched = wpfl_schedule(setting)
    clients = list(sched.wireless.clients)
    plan = wpfl_plan(setting, len(clients), noise="tight")
    z_rdp = tight_calibration(setting["eps"], setting["delta"], setting["q"], setting["T"])["z_rdp"]
    rdp_plan = replace(plan, sigma={"uplink": np.full(len(clients), z_rdp * 2.0 * setting["C"])})
    original = privacy.PrivacyLedger._pld_min

    def rdp_only() -> None:
        privacy.PrivacyLedger._pld_min = lambda self, eps, views, inv: eps
        try:
            _play(rdp_plan, clients)
        finally:
            privacy.PrivacyLedger._pld_min = original

    def pld_cold() -> None:
        privacy._PLD_CACHE.clear()
        _play(plan, clients)

    def pld_warm() -> None:
        _play(plan, clients)

    final = {"pld": _play(plan, clients)}
    privacy.PrivacyLedger._pld_min = lambda self, eps, views, inv: eps
    try:
        final["rdp"] = _play(rdp_plan, clients)
    finally:
        privacy.PrivacyLedger._pld_min = original
    times = interleaved({"rdp": rdp_only, "pld_cold": pld_cold, "pld_warm": pld_warm}, repeat=REPEAT,
                        clock=time.process_time)
    rounds = len(clients)
    per_round = {k: t.median / rounds for k, t in times.items()}
    print(f"WPFL ledger, {rounds} rounds, sigma_DP = {plan.info['sigma_dp']:.4g}: final eps "
          f"{final['pld']:.4f} (min(RDP, PLD)); RDP only at the RDP sigma {z_rdp * 2 * setting['C']:.4g}: "
          f"{final['rdp']:.4f}; budget {plan.eps:g}")
    for k, v in per_round.items():
        print(f"  {k:9s} {1e3 * v:8.2f} ms CPU per round")
    figures = {f"{k}_ms_per_round": 1e3 * v for k, v in per_round.items()}
    figures.update(final_eps_pld=final["pld"], final_eps_rdp_sigma=final["rdp"])
    write_result("ledger_pld", {
        "setting": "examples/wpfl_mnist.toml, noise tight (the plan's exact sigma)", "rounds": rounds,
        "final_eps": final, "budget": plan.eps, "cpu_seconds_per_round": per_round,
        "cpu_seconds_run": {k: t.to_json() for k, t in times.items()},
        "ratio_cold_over_rdp": ratio(times["pld_cold"], times["rdp"]),
        "ratio_warm_over_rdp": ratio(times["pld_warm"], times["rdp"])})
    return figures


if __name__ == "__main__":
    main()
