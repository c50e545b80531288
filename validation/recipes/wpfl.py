"""``fedbound train wpfl``: WPFL's schedule, noise plan and the WPFL algorithm (recipe for
validation.runner), and the policy comparison of Sec. VII (:func:`compare_policies`).

The schedule (:func:`wpfl_schedule`): ``fedbound.scheduling.wpfl.schedule_rounds`` on the ``[wpfl]`` setting
(Table I radio, ``channel_seed``): rounds until every client has uploaded ``T`` times (the paper's T0), and
per round the selection and subchannels, eta_F, and every client's eta_P and lambda, passed to the simulator
as data (``fedbound.training.wpfl.WPFLSchedule``).  ``policy``:

* ``proposed``: Kuhn-Munkres, eta_F* (F28) and per-client (eta_P, lambda) from P7 (Alg. 2, Theorem 5);
* ``error_free``: the same schedule with every bit error rate 0 (the reference of Fig. 3);
* ``non_adjustment`` (KM), ``round_robin``, ``random``: fixed ``eta_F``, ``eta_P``, ``lam`` (Sec. 6.4).

``[wpfl] personalization`` other than ``wpfl`` picks a PFL baseline of Figs. 5-7
(``fedbound.training.pfl_baselines``): the policy's selection and channels, fixed ``eta_F`` and ``eta_P``.

The noise (:func:`wpfl_plan`): sigma_DP from ``fedbound.bounds.wpfl.noise`` -- ``[train] noise = "paper"``:
Theorem 1's calibration; ``"tight"``: the Poisson-subsampled Gaussian with sensitivity 2C, calibrated
exactly as the plan recommends (``fedbound.bounds.wpfl.tight_calibration``: PLD at q < 1).  ``[wpfl]
mechanism`` swaps in the DP baselines of Fig. 2: ``gaussian`` (the classic mechanism ignoring quantization)
and ``moments`` (the moments accountant) differ only in sigma; ``perfect_gaussian`` keeps sigma and drops
quantization and bit errors; ``[train] private = false`` is "WPFL without DP".  (The dithering baseline is
not implemented.)  With ``local_steps = s`` the record sampling rate is ``q_s = 1 - (1 - q)^s``.
Accounting (one adversary, the server, which sees who uploads): paper -- ``"quantized_gaussian"``,
Theorem 1 per upload with basic composition; tight -- the Poisson-subsampled Gaussian of every actual upload
at ``sigma_DP / 2C``, min(RDP, PLD) (``fedbound.training.privacy``; quantization and bit errors are
post-processing).  At the paper's settings
Theorem 1's psi1 underflows (spec 004 S5): the paper's accountant certifies eps = 0 for up to T uploads,
and its delta_Q is a per-outcome delta (E17); the plan's notes say so.

The schedule's eta_P, lambda solve P7 at the sigma_DP actually trained with (Gamma_0, Gamma_1 grow with it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from fedbound.errors import ConfigError, FedboundError
from fedbound.validation.recipes.runner import Recipe, capture

__all__ = ["full_setting", "wpfl_schedule", "training_schedule", "wpfl_plan", "sigma_for", "compare_policies",
           "PAPER_IMPROVEMENTS", "RECIPE"]

PAPER_IMPROVEMENTS = {"accuracy": 87.08, "max_test_loss": 16.21, "jain_index": 38.37}
"""WPFL Sec. VII, CNN: the proposed schedule against the best of round-robin, random and non-adjustment
(accuracy +87.08 %, maximum test loss of the participating clients 16.21 % lower, Jain's index +38.37 %
against round-robin); the paper does not say whether relative or absolute (spec 004 E20)."""


def full_setting(setting: Mapping[str, Any]) -> dict[str, Any]:
    """The [wpfl] setting with the documented bound constants filled in where unset."""
    from fedbound.papers.wpfl import BOUND_DEFAULTS

    return {**BOUND_DEFAULTS, **{k: v for k, v in setting.items() if v is not None}}


def sigma_for(setting: Mapping[str, Any], noise: str = "paper", local_steps: int = 1) -> float:
    """sigma_DP of the run: ``fedbound.bounds.wpfl.noise`` with the method of ``[train] noise`` (or of
    ``[wpfl] mechanism`` for the Fig. 2 baselines), at the per-step sampling rate ``q_s``; ``"tight"`` is the
    plan's exact calibration, ``fedbound.bounds.wpfl.tight_calibration`` (PLD; the ledger accounts it so)."""
    from fedbound.bounds.wpfl import noise as wpfl_noise

    s = full_setting(setting)
    mechanism = s.get("mechanism", "quantized")
    method = (noise if mechanism in ("quantized", "perfect_gaussian")
              else "tight" if mechanism == "dithering" else mechanism)
    q = _q_eff(s["q"], local_steps)
    if method == "tight":  # the plan's exact calibration (one source: fedbound.bounds.wpfl)
        from fedbound.bounds.wpfl import tight_calibration

        return tight_calibration(s["eps"], s["delta"], q, s["T"])["z"] * 2.0 * float(s["C"])
    return wpfl_noise({**s, "q": q}, s["T"], method)["uplink"]


def _q_eff(q: float, local_steps: int) -> float:
    return q if local_steps == 1 else (-math.expm1(local_steps * math.log1p(-q)) if q < 1 else 1.0)


@lru_cache(maxsize=16)
def _cached_schedule(items: tuple, sigma: float):
    from fedbound.scheduling.wpfl import radio_setting, schedule_rounds

    setting = dict(items)
    return schedule_rounds(radio_setting(setting), setting, sigma, setting["policy"], "paper",
                           setting["channel_seed"], setting.get("max_rounds"))


def wpfl_schedule(setting: Mapping[str, Any], sigma: float = 0.0):
    """The whole run's ``RoundsSchedule`` at ``sigma`` (cached; the rounds do not depend on sigma)."""
    return _cached_schedule(tuple(sorted(full_setting(setting).items())), float(sigma))


def training_schedule(schedule, configured: bool = True):
    """A ``RoundsSchedule`` as the data the algorithm takes (``fedbound.training.wpfl.WPFLSchedule``):
    per round the selected clients, their uplink BER, every downlink BER, and every client's eta_P, lambda
    (only for the adjusting policies and ``configured``; the fixed-rate baselines and the PFL baselines use
    the algorithm's scalars)."""
    from fedbound.training.wpfl import WPFLSchedule

    run = schedule.wireless
    adjusted = configured and schedule.policy in ("proposed", "error_free")
    return WPFLSchedule(tuple(run.clients), tuple(run.uplink_ber), run.downlink_ber, run.setting.n_params,
                        schedule.eta_P if adjusted else None, schedule.lam if adjusted else None)


def wpfl_plan(setting: Mapping[str, Any], rounds: int, local_steps: int = 1, noise: str = "paper"):
    """WPFL's noise plan (module docstring): sigma_DP on every upload, sensitivity 2C, per-upload accounts."""
    import fedbound.accounting as acc
    from fedbound.training.plan import NoisePlan, View

    s = full_setting(setting)
    N, T, C, R, q, eps, delta = (s[k] for k in ("N", "T", "C", "R", "q", "eps", "delta"))
    q_eff = _q_eff(q, local_steps)
    notes: list[str] = []
    if local_steps > 1:
        notes.append(f"local_steps = {local_steps}: a record is in some mini-batch with probability "
                     f"1 - (1 - q)^{local_steps} = {q_eff:.4g}, the rate both accountants use; WPFL's "
                     "Theorem 1 is stated for one local step")
    sigma_paper = capture(sigma_for, s, "paper", local_steps, notes=notes)
    sigma_tight = capture(sigma_for, {**s, "mechanism": "quantized"}, "tight", local_steps, notes=notes)
    sigma = capture(sigma_for, s, noise, local_steps, notes=notes)
    mechanism = s.get("mechanism", "quantized")
    log_psi, log_psi1, _, _ = acc.qa_gaussian_log_psi(C, sigma, R, q_eff)
    if log_psi1 + eps / T < log_psi + math.log(1e-12):
        notes.append(f"WPFL (Zhao et al. 2025), Theorem 1 at sigma_DP = {sigma:.6g}: psi1 = "
                     f"e^({log_psi1:.4g}) is negligible, so delta_Q does not depend on eps_Q and the paper's "
                     f"accountant certifies eps = 0 for up to T0 = {T} uploads; its delta_Q (eq. (23)) is a "
                     "per-outcome delta, not a set-based (eps, delta) guarantee")
    try:
        tight_eps = capture(acc.epsilon, sigma / (2.0 * C), q_eff, T, delta, notes=notes)
        exact_sigma = mechanism == "dithering" or (noise == "tight" and mechanism != "gaussian"
                                                   and mechanism != "moments")
        if exact_sigma and q_eff < 1:
            from fedbound.bounds.wpfl import tight_calibration

            exact = tight_calibration(eps, delta, q_eff, T)["eps_achieved"]  # PLD, what the ledger counts
            tight_eps = min(tight_eps, exact) if exact is not None else tight_eps
    except (FedboundError, OverflowError) as exc:  # a sigma so small that even RDP gives up
        tight_eps = math.inf
        notes.append(f"the tight accountant cannot bound sigma_DP = {sigma:.4g} over T0 uploads ({exc})")
    if mechanism == "dithering":
        source = ("dithering baseline of WPFL Fig. 2: subtractive dithered quantization with random "
                  "steps makes exactly Gaussian noise; sigma from the exact calibration, "
                  "fedbound.bounds.wpfl.tight_calibration")
    elif mechanism not in ("quantized", "perfect_gaussian"):
        source = f"DP baseline of WPFL Fig. 2 ({mechanism}), fedbound.bounds.wpfl.noise"
    elif noise == "paper":
        source = ("WPFL Theorem 1 (eqs. (23)-(24)): sigma_DP = calibrate_sigma_dp(eps_Q, delta_Q, C, R, "
                  "q, T0), fedbound.bounds.wpfl.noise")
    else:
        source = ("tight: Poisson-subsampled Gaussian with sensitivity 2C over T0 uploads, calibrated "
                  "exactly (PLD; the plan's sigma), fedbound.bounds.wpfl.tight_calibration")
    view = View("uplink", "upload", stage="uplink", sample_rate=q_eff, hidden_sampling=q_eff < 1.0,
                hidden_scope="participants")
    info = {"C": C, "R": R, "q": q_eff, "T0": T, "sigma_dp": sigma, "sigma_dp_paper": sigma_paper,
            "sigma_dp_tight": sigma_tight, "sensitivity_uplink": 2.0 * C,
            "delta_Q_theorem1": float(acc.qa_gaussian_delta(eps, C, sigma, R, q_eff, T)),
            "epsilon_tight_after_T0_uploads": tight_eps if math.isfinite(tight_eps) else None}
    return NoisePlan(rounds=rounds, num_clients=N, sigma={"uplink": np.full(rounds, sigma)},
                     sensitivity={"uplink": 2.0 * C}, eps=eps, delta=delta, views=(view,),
                     budget_accountant="paper" if noise == "paper" and mechanism != "dithering" else "tight",
                     paper_accountant="quantized_gaussian", source=source, notes=tuple(notes), info=info)


def _plan(setting: Mapping[str, Any], train: Mapping[str, Any], client_sizes: np.ndarray, rounds: int):
    if len(client_sizes) != setting["N"]:
        raise ConfigError(f"[wpfl] N = {setting['N']} but the partition made {len(client_sizes)} clients")
    return wpfl_plan(setting, rounds, train["local_steps"], train["noise"])


def _run_sigma(setting: Mapping[str, Any], train: Mapping[str, Any]) -> float:
    if not train.get("private", True):
        return 0.0
    return sigma_for(setting, train["noise"], train["local_steps"])


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.wpfl import WPFL

    sched = wpfl_schedule(setting, _run_sigma(setting, train))
    s = full_setting(setting)
    configured = s.get("personalization", "wpfl") == "wpfl"  # the PFL baselines keep fixed rates (Sec. VII)
    if configured and sched.policy in ("proposed", "error_free"):
        s["eta_F"] = float(sched.eta_F[0])  # eta_F* (F28): the same for every client and round
        if train["lr"] is not None:
            raise ConfigError("[train] lr must stay unset for the proposed policy: its local rate is eta_F* "
                              f"= {s['eta_F']:.6g} (WPFL Sec. VI-C1)")
    return WPFL.from_config(s, train, training_schedule(sched, configured))


def _summary(setting: Mapping[str, Any]) -> dict[str, Any]:
    sched = wpfl_schedule(setting)
    run = sched.wireless
    return {"policy": sched.policy, "schedule_rounds": sched.rounds,
            "schedule_skipped_rounds": run.skipped_rounds,
            "uploads_per_client": setting["T"], "r_min_bit_s": run.setting.r_min, "channel": dict(run.stats),
            "personalization": setting.get("personalization", "wpfl"),
            "configuration": ("per-client eta_P, lambda from P7 and eta_F* (Alg. 2)"
                              if sched.policy in ("proposed", "error_free")
                              and setting.get("personalization", "wpfl") == "wpfl"
                              else "fixed eta_F, eta_P, lambda (Non-Adjustment rates)")}


def compare_policies(config: Any, overrides: list[str] | None = None, out: Any = None,
                     policies: tuple[str, ...] = ("proposed", "round_robin", "random", "non_adjustment"),
                     ) -> dict[str, Any]:
    """Train every policy on the same data, channel and seed and tabulate the paper's three metrics (Sec.
    VII): mean PL test accuracy, maximum test loss over the clients, Jain's index of the PL training losses
    (last evaluated round), with the proposed policy's improvement over the best baseline beside the paper's
    reported numbers (:data:`PAPER_IMPROVEMENTS`)."""
    from pathlib import Path

    from fedbound.validation.recipes.runner import train_from_config

    rows: dict[str, dict[str, Any]] = {}
    for policy in policies:
        sets = [*(overrides or []), f"policy={policy!r}".replace("'", '"')]
        where = None if out is None else Path(out) / policy
        done = train_from_config("wpfl", config, sets, out=where)
        table = done.result.metrics
        last = table[table["client"].isna()].dropna(subset=["pl_max_test_loss"]).iloc[-1]
        rows[policy] = {"accuracy": float(last.get("pl_test_accuracy", float("nan"))),
                        "max_test_loss": float(last["pl_max_test_loss"]),
                        "jain_index": float(last["pl_jain_index"]),
                        "rounds": int(done.summary["rounds_done"])}
    baselines = [p for p in policies if p != "proposed"]
    ours: dict[str, Any] = {}
    if "proposed" in rows and baselines:
        mine = rows["proposed"]
        best_acc = max(rows[b]["accuracy"] for b in baselines)
        best_loss = min(rows[b]["max_test_loss"] for b in baselines)
        best_jain = max(rows[b]["jain_index"] for b in baselines)
        ours = {"accuracy": 100 * (mine["accuracy"] - best_acc) / best_acc,
                "max_test_loss": 100 * (best_loss - mine["max_test_loss"]) / best_loss,
                "jain_index": 100 * (mine["jain_index"] - best_jain) / best_jain}
    return {"policies": rows, "improvement_percent": ours, "paper_improvement_percent": PAPER_IMPROVEMENTS,
            "note": "improvement of the proposed policy over the best baseline per metric, relative (%); the "
                    "paper's numbers are for the CNN on FMNIST/CIFAR10 (Sec. VII; the paper does not say "
                    "whether its percentages are relative or absolute)"}


RECIPE = Recipe(
    num_clients=lambda setting: int(setting["N"]),
    plan=_plan,
    algorithm=_algorithm,
    rounds=lambda setting: wpfl_schedule(setting).rounds,
    summary=_summary,
    doc="WPFL (Zhao et al. 2025): quantization-assisted Gaussian mechanism, bit errors, min-max fair "
        "schedule, PL models",
)
