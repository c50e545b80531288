"""``fedbound train wpfl``: seed 004's channel schedule, noise plan and the WPFL algorithm (recipe for
validation.runner).

The schedule (:func:`wpfl_schedule`): ``fedbound.scheduling.wireless.schedule_run`` on the ``[wpfl]`` radio
setting (Table I) with ``channel_seed``: rounds until every client has uploaded ``T0`` times, clients and
subchannels by Kuhn-Munkres (``scheduler = "km"``) or the round-robin / random baselines; the number of
rounds ``T`` is the schedule's.  Fixed ``eta_F``, ``eta_P``, ``lambda`` (the paper's "Non-Adjustment"
configuration; the P4-P7 optimiser of Alg. 2 is a later planning issue).

The noise plan (:func:`wpfl_plan`): stage ``"uplink"`` with ``sigma_DP = calibrate_sigma_dp(eps_Q, delta_Q,
C, R, q, T0)`` (seed 004 Theorem 1, the one-dimensional search of Sec. IV; ``noise = "paper"``) or the
tight calibration of the same release (``noise = "tight"``); sensitivity ``2C`` (two models in the ball of
radius ``C``).  With ``local_steps = s`` the record sampling rate is ``q_s = 1 - (1 - q)^s`` (a record is in
at least one of the ``s`` Poisson mini-batches); Theorem 1 is stated for one step (``s = 1``, eq. (20a)).
Accounting (one adversary, the server, which sees who uploads):

* paper: ``"quantized_gaussian"``, Theorem 1 per upload with basic composition (``training.privacy``);
* tight: the Poisson-subsampled Gaussian (RDP) of every actual upload at the noise multiplier
  ``sigma_DP / 2C``.  Quantization and bit errors are post-processing of that Gaussian release, so this is
  a valid (set-based) guarantee for what the server receives.

At the paper's settings Theorem 1's ``psi1`` underflows (spec 004 S5): ``delta_Q`` does not depend on
``eps_Q``, the paper's accountant certifies ``eps = 0`` for up to ``T0`` uploads, and the pointwise
``delta_Q`` is not a set-based guarantee (spec 004 E17): the tight accountant gives eps in the millions for
the same sigma.  The plan's notes say so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from fedbound.config import Field, Section
from fedbound.errors import ConfigError, FedboundError
from fedbound.validation.runner import Recipe, capture

__all__ = ["WPFL_SECTION", "wpfl_setting", "wpfl_schedule", "training_schedule", "wpfl_plan", "RECIPE"]

WPFL_SECTION = Section("wpfl", (
    Field("N", int, doc="number of clients (paper: 20, printed 'M = 20', spec E11)", low=1),
    Field("K", int, doc="orthogonal subchannels = clients per round at most (paper: 10)", low=1),
    Field("T0", int, doc="uploads per client, the privacy cap (paper: 20; 5-30 swept)", low=1),
    Field("C", float, doc="clipping threshold on the model L2 norm (paper: 3 MLR, 7 DNN, 20 CNN)", low=0.0,
          low_open=True),
    Field("R", int, 16, "quantization bits per element", low=1, high=52),
    Field("q", float, 0.01, "mini-batch (Poisson) sampling rate, the q of Theorem 1", low=0.0, high=1.0,
          low_open=True),
    Field("eps_Q", float, 1.0, "privacy budget over T0 uploads", low=0.0, low_open=True),
    Field("delta_Q", float, 1e-3, "delta over T0 uploads (paper: 1e-3 MLR/DNN, 5e-3 CNN)", low=0.0, high=1.0,
          low_open=True, high_open=True),
    Field("n_params", int, 7850, "model size |omega| of the rate constraint C5 (MLR on MNIST: 7,850); must "
          "equal the [train] model's", low=1),
    Field("tau_max", float, 0.01, "maximum upload delay, s (paper: 0.01 MLR, 0.1 DNN, 0.6 CNN)", low=0.0,
          low_open=True),
    Field("P_th_dbm", float, 23.0, "client transmit power, dBm (Table I)"),
    Field("P_bs_dbm", float, 30.0, "base-station transmit power, dBm (Table I)"),
    Field("bandwidth_hz", float, 10e6, "total bandwidth K B, Hz (Table I: 10 MHz)", low=0.0, low_open=True),
    Field("N0_dbm_hz", float, -169.0, "noise power spectral density, dBm/Hz (Table I)"),
    Field("pathloss_1m_db", float, -30.0, "path loss at 1 m, dB (Table I)"),
    Field("pathloss_exponent", float, 2.8, "path-loss exponent (Table I)", low=0.0),
    Field("M_qam", int, 256, "QAM order, a perfect square (Table I: 256)", low=4),
    Field("d_min", float, 10.0, "smallest client distance, m (distances ~ U[d_min, d_max])", low=0.0,
          low_open=True),
    Field("d_max", float, 100.0, "largest client distance, m (BS coverage radius 100 m)", low=0.0,
          low_open=True),
    Field("channel_seed", int, 0, "seed of the distances, fading and the random scheduler", low=0),
    Field("scheduler", str, "km", "client selection and subchannel assignment",
          choices=("km", "round_robin", "random")),
    Field("channel_errors", bool, True, "false: the error-free reference (every BER 0, same schedule)"),
    Field("max_rounds", int, None, "give up when the schedule is not done after this many rounds",
          low=1, optional=True),
    Field("eta_F", float, 0.01, "FL local learning rate (fixed: Non-Adjustment)", low=0.0, low_open=True),
    Field("eta_P", float, 0.01, "PL learning rate (fixed: Non-Adjustment)", low=0.0, low_open=True),
    Field("lam", float, 0.5, "PL-FL weighting coefficient lambda (fixed: Non-Adjustment)", low=0.0, high=2.0),
    Field("pl_clients", str, "all", "who updates its PL model each round (spec E12)",
          choices=("all", "selected")),
), doc="WPFL setting (seed 004, spec 004 notation; Table I defaults)")


def wpfl_setting(setting: Mapping[str, Any]):
    """The radio setting (``fedbound.scheduling.wireless.WirelessSetting``) of a ``[wpfl]`` section."""
    from fedbound.scheduling.wireless import WirelessSetting

    if setting["d_max"] < setting["d_min"]:
        raise ConfigError(f"[wpfl] d_max = {setting['d_max']} is below d_min = {setting['d_min']}")
    return WirelessSetting(
        num_clients=setting["N"], num_subchannels=setting["K"], n_params=setting["n_params"], R=setting["R"],
        tau_max=setting["tau_max"], P_th_dbm=setting["P_th_dbm"], P_bs_dbm=setting["P_bs_dbm"],
        total_bandwidth_hz=setting["bandwidth_hz"], noise_dbm_per_hz=setting["N0_dbm_hz"],
        pathloss_1m_db=setting["pathloss_1m_db"], pathloss_exponent=setting["pathloss_exponent"],
        qam_order=setting["M_qam"], distance_min=setting["d_min"], distance_max=setting["d_max"])


@lru_cache(maxsize=8)
def _cached_schedule(items: tuple):
    from fedbound.scheduling.wireless import schedule_run

    setting = dict(items)
    return schedule_run(wpfl_setting(setting), setting["T0"], setting["scheduler"], setting["channel_seed"],
                        max_rounds=setting["max_rounds"], channel_errors=setting["channel_errors"])


def wpfl_schedule(setting: Mapping[str, Any]):
    """The whole run's ``WirelessSchedule`` (cached: the recipe asks for it three times)."""
    return _cached_schedule(tuple(sorted(setting.items())))


def training_schedule(schedule):
    """A ``WirelessSchedule`` as the data the algorithm takes (``fedbound.training.wpfl.WPFLSchedule``)."""
    from fedbound.training.wpfl import WPFLSchedule

    return WPFLSchedule(tuple(schedule.clients), tuple(schedule.uplink_ber), schedule.downlink_ber,
                        schedule.setting.n_params)


def wpfl_plan(setting: Mapping[str, Any], rounds: int, local_steps: int = 1, noise: str = "paper"):
    """WPFL's noise plan (module docstring): sigma_DP on every upload, sensitivity 2C, per-upload accounts."""
    import fedbound.accounting as acc
    from fedbound.training.plan import NoisePlan, View

    N, T0, C, R, q, eps, delta = (setting[k] for k in ("N", "T0", "C", "R", "q", "eps_Q", "delta_Q"))
    q_eff = q if local_steps == 1 else -math.expm1(local_steps * math.log1p(-q)) if q < 1 else 1.0
    notes: list[str] = []
    if local_steps > 1:
        notes.append(f"local_steps = {local_steps}: a record is in some mini-batch with probability "
                     f"1 - (1 - q)^{local_steps} = {q_eff:.4g}, the rate both accountants use; seed 004's "
                     "Theorem 1 is stated for one local step")
    sigma_paper = capture(acc.calibrate_sigma_dp, eps, delta, C, R, q_eff, T0, notes=notes)
    sigma_tight = capture(acc.calibrate_noise, eps, delta, q_eff, T0, notes=notes) * 2.0 * C
    sigma = sigma_paper if noise == "paper" else sigma_tight
    log_psi, log_psi1, _, _ = acc.qa_gaussian_log_psi(C, sigma, R, q_eff)
    if log_psi1 + eps / T0 < log_psi + math.log(1e-12):
        notes.append(f"seed 004 Theorem 1 at sigma_DP = {sigma:.6g}: psi1 = e^({log_psi1:.4g}) is "
                     "negligible, so delta_Q does not depend on eps_Q and the paper's accountant certifies "
                     f"eps = 0 for up to T0 = {T0} uploads (spec 004 S5); its delta_Q is a per-outcome "
                     "delta, not a set-based (eps, delta) guarantee (spec 004 E17)")
    try:
        tight_eps = capture(acc.epsilon, sigma / (2.0 * C), q_eff, T0, delta, notes=notes)
    except (FedboundError, OverflowError) as exc:  # a sigma so small that even RDP gives up
        tight_eps = math.inf
        notes.append(f"the tight accountant cannot bound sigma_DP = {sigma:.4g} over T0 uploads ({exc})")
    if noise == "paper":
        source = ("seed 004 Theorem 1 (eqs. (23)-(24)): sigma_DP = calibrate_sigma_dp(eps_Q, delta_Q, C, R, "
                  "q, T0), fedbound.accounting.quantized_gaussian")
    else:
        source = ("tight: Poisson-subsampled Gaussian (RDP) with sensitivity 2C over T0 uploads, "
                  "fedbound.accounting.calibrate_noise")
    view = View("uplink", "upload", stage="uplink", sample_rate=q_eff, hidden_sampling=q_eff < 1.0,
                hidden_scope="participants")
    info = {"C": C, "R": R, "q": q_eff, "T0": T0, "sigma_dp": sigma, "sigma_dp_paper": sigma_paper,
            "sigma_dp_tight": sigma_tight, "sensitivity_uplink": 2.0 * C,
            "delta_Q_theorem1": float(acc.qa_gaussian_delta(eps, C, sigma, R, q_eff, T0)),
            "epsilon_tight_after_T0_uploads": tight_eps if math.isfinite(tight_eps) else None}
    return NoisePlan(rounds=rounds, num_clients=N, sigma={"uplink": np.full(rounds, sigma)},
                     sensitivity={"uplink": 2.0 * C}, eps=eps, delta=delta, views=(view,),
                     budget_accountant="paper" if noise == "paper" else "tight",
                     paper_accountant="quantized_gaussian", source=source, notes=tuple(notes), info=info)


def _plan(setting: Mapping[str, Any], train: Mapping[str, Any], client_sizes: np.ndarray, rounds: int):
    if len(client_sizes) != setting["N"]:
        raise ConfigError(f"[wpfl] N = {setting['N']} but the partition made {len(client_sizes)} clients")
    return wpfl_plan(setting, rounds, train["local_steps"], train["noise"])


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.wpfl import WPFL

    return WPFL.from_config(setting, train, training_schedule(wpfl_schedule(setting)))


def _summary(setting: Mapping[str, Any]) -> dict[str, Any]:
    schedule = wpfl_schedule(setting)
    return {"scheduler": setting["scheduler"], "schedule_rounds": len(schedule.rounds),
            "schedule_skipped_rounds": schedule.skipped_rounds, "uploads_per_client": setting["T0"],
            "r_min_bit_s": schedule.setting.r_min, "channel": dict(schedule.stats),
            "configuration": "Non-Adjustment: fixed eta_F, eta_P, lambda (no P4-P7 optimiser)"}


RECIPE = Recipe(
    section=WPFL_SECTION,
    num_clients=lambda setting: int(setting["N"]),
    plan=_plan,
    algorithm=_algorithm,
    rounds=lambda setting: len(wpfl_schedule(setting).rounds),
    summary=_summary,
    doc="WPFL (seed 004): quantization-assisted Gaussian mechanism, bit errors, KM scheduling, PL models",
)
