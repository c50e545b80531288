"""``fedbound train udp``: UDP's noise plan and the UDP algorithm (recipe for validation.runner).

:func:`udp_plan` asks :func:`fedbound.bounds.udp.noise` for each client's sigma (no formula here):

* ``paper`` (Theorem 1, eq. (10)), ``corrected`` (eqs. (18)-(19) solved for rho), ``numeric`` /
  ``numeric_exact`` / ``numeric_release`` (numeric calibrations): the paper's accountant (eq. (16),
  ``udp_moments``) holds the budget;
* ``tight``: the exact T-fold Gaussian calibration of a client that takes part in every round
  (``noise(..., "tight_participation")``): the server sees who uploads (Alg. 1), and the simulator's ledger
  counts each client's realised participations, so this is the tight sigma that ledger can certify.

``[train] noise`` picks any of them; ``[udp] calibration``, when set, overrides it.
With ``crd = true`` the algorithm receives :class:`fedbound.scheduling.crd.CRDPolicy` as data.

With ``lei = true`` (Lei et al.'s baseline, UDP Sec. 5; spec 003 Sec. 3.10) the plan's sigma decays
linearly, ``sigma_i^t = sigma_i^0 max(1 - k t, 0.01)`` with ``k = lei_decay / T`` and ``sigma_i^0`` the
constant sigma of original UDP at ``T`` (:func:`lei_multipliers`), and the run stops before the first round
that would spend more than original UDP does.  Every accountant the ledger runs for UDP depends on the
sigmas only through ``sum_t sigma_t^-2`` (eq. (16) of the paper's moments accountant; GDP composition of
unsampled Gaussian releases for the tight one), and original UDP spends ``T / sigma_0^2``; so keeping
``sum_t sigma_t^-2 <= T / sigma_0^2`` runs Lei at the same (eps, delta) as original UDP, under whichever
calibration chose ``sigma_0``.  The schedule does not depend on the data, so it is a noise plan: the
algorithm (``fedbound.training.udp.UDP``) runs it unchanged, batched or alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.errors import ConfigError
from fedbound.validation.recipes.runner import Recipe

__all__ = ["udp_plan", "RECIPE", "calibration", "lei_multipliers", "LEI_FLOOR"]

PAPER_BUDGET = ("paper", "corrected", "numeric", "numeric_exact", "numeric_release")


LEI_FLOOR = 0.01
"""Lei's smallest sigma as a fraction of sigma_0 (as in ``scheduling.crd.lei_run``: default sigma_0/100)."""


def lei_multipliers(T: int, decay: float) -> np.ndarray:
    """``sigma_t / sigma_0`` of Lei's approach (UDP Sec. 5, "noise reduced linearly"; spec 003 Sec.
    3.10): ``max(1 - (decay / T) t, LEI_FLOOR)`` for t = 0, 1, ... while ``sum_t (sigma_t / sigma_0)^-2 <=
    T``, i.e. while the run spends no more than original UDP's T rounds at sigma_0 (module docstring).  Never
    empty: the first round is sigma_0 itself."""
    from fedbound.scheduling.crd import lei_schedule

    out, spent = [], 0.0
    for t in range(int(T)):  # sigma_t <= sigma_0: every round costs at least 1 of the budget T
        m = lei_schedule(1.0, float(decay) / int(T), t, LEI_FLOOR)
        if spent + m**-2.0 > int(T) * (1.0 + 1e-12):
            break
        spent += m**-2.0
        out.append(m)
    return np.asarray(out)


def calibration(setting: Mapping[str, Any], noise: str) -> str:
    """The noise method to train with: [udp] calibration if set, else [train] noise."""
    return setting.get("calibration") or noise


def udp_plan(
    setting: Mapping[str, Any], client_sizes: np.ndarray, local_steps: int = 1, noise: str = "paper"
):
    """UDP's noise plan (module docstring); per-client sigma because ``Delta_i`` depends on ``|D_i|``."""
    from fedbound.bounds import udp
    from fedbound.training.plan import NoisePlan, View

    N, T = int(setting["N"]), int(setting["T"])
    K = setting.get("K") or N
    if K > N:
        raise ConfigError(f"[udp] K = {K} is outside its valid range integer in [1, {N}] (N = {N})")
    sizes = np.asarray(client_sizes, dtype=np.float64)
    if len(sizes) != N:
        raise ConfigError(f"[udp] N = {N} but the partition made {len(sizes)} clients")
    method = calibration(setting, noise)
    train_method = "tight_participation" if method == "tight" else method
    s = {**setting, "K": K, "sizes": sizes, "local_steps": local_steps}
    sigma = udp.noise(s, T, train_method)["uplink"]
    sens = udp.client_arrays(s)["sens"]
    notes: list[str] = []
    if local_steps > 1:
        notes.append(
            f"local_steps = {local_steps}: {udp.SHORT}'s sensitivity 2 eta C/|D_i| (eq. (13)) is for "
            "one full-batch step; the plan uses local_steps x that, which is not a bound when "
            "per-sample clipping is active"
        )
    q = K / N
    views = (View("uplink", "upload", stage="uplink", sample_rate=q, hidden_sampling=False),)
    info: dict[str, Any] = {}
    if setting.get("lei"):
        _one_schedule(setting)
        scale = lei_multipliers(T, setting["lei_decay"])
        info = {"lei_decay": float(setting["lei_decay"]), "lei_rounds": len(scale),
                "lei_sigma_last_over_first": float(scale[-1])}
    else:
        scale = np.ones(T)
    rounds = len(scale)
    return NoisePlan(
        rounds=rounds,
        num_clients=N,
        sigma={"uplink": scale[:, None] * sigma[None, :]},
        sensitivity={"uplink": sens},
        eps=float(setting["eps"]),
        delta=float(setting["delta"]),
        views=views,
        budget_accountant="paper" if method in PAPER_BUDGET else "tight",
        paper_accountant="udp_moments",
        source=f"fedbound.bounds.udp.noise(method={train_method!r})",
        notes=tuple(notes),
        info={
            "sigma_uplink_min": float(sigma.min() * scale.min()),
            "sigma_uplink_max": float(sigma.max()),
            "sample_rate": q,
            "calibration": method,
            **info,
        },
    )


def _one_schedule(setting: Mapping[str, Any]) -> None:
    if setting.get("lei") and setting.get("crd"):
        raise ConfigError("[udp] lei = true and crd = true: pick one schedule (Lei's decaying noise or CRD's "
                          "discounting)")


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.scheduling.crd import CRDPolicy
    from fedbound.training.udp import UDP

    _one_schedule(setting)

    crd = CRDPolicy(setting["beta"], setting["zeta"]) if setting["crd"] else None
    return UDP.from_config(setting, train, rounds, crd)


def _check_single_budget(setting: Mapping[str, Any]) -> None:
    if setting.get("eps_clients") or setting.get("delta_clients"):
        raise ConfigError(
            "[udp] eps_clients / delta_clients: fedbound train udp needs one (eps, delta) for "
            "all clients (the privacy ledger holds one budget); plan with them instead"
        )


def _plan(setting, train, sizes, rounds):
    _check_single_budget(setting)
    return udp_plan(setting, sizes, train["local_steps"], train["noise"])


RECIPE = Recipe(
    noise_methods=("paper", "corrected", "numeric", "numeric_exact", "numeric_release", "tight"),
    num_clients=lambda setting: int(setting["N"]),
    plan=_plan,
    algorithm=_algorithm,
    min_client_size=lambda setting: int(setting["m"]),
    doc="UDP (Wei et al. 2021), optionally with communication-rounds discounting",
)
