"""``fedbound train nbafl``: seed 002's noise plan and the NbAFL algorithm (recipe for validation.runner).

:func:`nbafl_plan`: ``sigma_U`` (spec 002 F10) on every upload, ``sigma_D`` (Theorem 1, F11; under K-client
scheduling Lemma 4's F27) on the server; the sensitivity is the provable one of the configured local training
(``sensitivity = "provable"``, the default: ``fedbound.validation.audit.provable`` fills it in from
``[train]``; the sigma's scale with it), or the paper's ``2C/m`` (F7) with ``sensitivity = "paper"``, labelled
with the leak the audit measures for multi-step training.  The algorithm reads the same resolved setting, so
local training clips the per-sample gradients the plan counts.  The adversary views are the
uplink (at most ``L`` uploads per client, classic Gaussian with linear composition: eps/L each) and the
downlink broadcast (``T`` releases; under scheduling the eavesdropper does not see who was scheduled, so the
release is a K-of-N sample without replacement, and the paper accounts for it with Lemma 4's one-sided
amplification).  ``noise="tight"`` uses the tight counterparts of ``fedbound.bounds.nbafl``.

Without ``[nbafl] T`` the run trains for Theorem 2's optimal T (``fedbound.scheduling.nbafl.optimal_T``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.errors import ConfigError
from fedbound.validation.audit.provable import provable_setting, sensitivity_clip
from fedbound.validation.recipes.runner import Recipe, capture_warnings

__all__ = ["nbafl_plan", "RECIPE"]


def _rounds(setting: Mapping[str, Any]) -> int:
    """T of the setting; without T, Theorem 2's optimal T (fedbound.scheduling.nbafl.optimal_T)."""
    if setting.get("T") is not None:
        return int(setting["T"])
    from fedbound.scheduling.nbafl import optimal_T

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return int(optimal_T({k: v for k, v in setting.items() if v is not None}).x)


def _summary(setting: Mapping[str, Any]) -> dict[str, Any]:
    if setting.get("T") is None:
        return {"T_source": "T_opt (fedbound.scheduling.nbafl.optimal_T): [nbafl] T is not set"}
    return {}


def nbafl_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, rounds: int, noise: str = "paper"):
    """NbAFL's noise plan (module docstring) for ``rounds`` rounds and the actual client sizes."""
    from fedbound.bounds import nbafl as nb
    from fedbound.bounds.provable import PAPER_LEAK
    from fedbound.training.plan import NoisePlan, View

    N, m, eps, delta, L = (setting[k] for k in ("N", "m", "eps", "delta", "L"))
    C = sensitivity_clip(setting, "C", m)
    mode = setting.get("sensitivity") or "provable"
    K = setting.get("K")
    scheduled = K is not None and K < N
    sizes = np.asarray(client_sizes)
    if len(sizes) != N:
        raise ConfigError(f"[nbafl] N = {N} but the partition made {len(sizes)} clients")
    if sizes.min() < m:
        raise ConfigError(f"[nbafl] m = {m} but the smallest client has {int(sizes.min())} samples: the "
                          "sensitivity 2C/m would be too small; lower m or give every client >= m samples")
    notes: list[str] = [f"sensitivity = \"paper\": {PAPER_LEAK}"] if mode == "paper" else []
    sigma = capture_warnings(nb.noise, setting, rounds, noise, notes=notes)
    up, down = sigma["uplink"], sigma["server"]
    if noise == "paper":
        source = "NbAFL (Wei et al. 2020): sigma_U Sec. III-A, sigma_D " + (
            "Lemma 4 eq. (16) (K-client scheduling)" if scheduled else "Theorem 1 eq. (10)")
    else:
        source = "exact counterparts of NbAFL's sigma_U / sigma_D (fedbound.bounds.nbafl.noise, method tight)"
    views = (View("uplink", "upload", stage="uplink", max_releases=int(L)),
             View("downlink", "broadcast", stage="uplink", sample_rate=(K / N) if scheduled else 1.0,
                  hidden_sampling=scheduled, paper_amplification="lemma4" if scheduled else "none",
                  sampling="without_replacement"))
    return NoisePlan(rounds=rounds, num_clients=N, sigma={"uplink": np.full(rounds, up), "server":
                     np.full(rounds, down)}, sensitivity={"uplink": 2.0 * C / m}, eps=eps, delta=delta,
                     views=views, budget_accountant="paper" if noise == "paper" else "tight",
                     paper_accountant="classic_linear", source=source, notes=tuple(notes),
                     info={"sigma_uplink": up, "sigma_server": down, "sensitivity_uplink": 2.0 * C / m,
                           "sensitivity_mode": mode, **_clip_info(setting)})


def _clip_info(setting: Mapping[str, Any]) -> dict[str, Any]:
    """The per-sample gradient clip and local steps the provable sensitivity covers (none in paper mode)."""
    if setting.get("sensitivity") != "provable":
        return {}
    return {"C_g": float(setting["C_g"]), "local_steps_covered": int(setting["tau"])}


def _setting(setting: Mapping[str, Any], train: Mapping[str, Any]) -> dict[str, Any]:
    """The setting with the provable sensitivity of the configured local training filled in (the default;
    unchanged in paper mode): what the plan, the algorithm and the planner all read."""
    return provable_setting(setting, train, 0.002, "nbafl")


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.nbafl import NbAFL

    return NbAFL.from_config(_setting(setting, train), train, rounds)


RECIPE = Recipe(
    num_clients=lambda setting: int(setting["N"]),
    plan=lambda setting, train, sizes, rounds: nbafl_plan(_setting(setting, train), sizes, rounds,
                                                          train["noise"]),
    algorithm=_algorithm,
    rounds=_rounds,
    min_client_size=lambda setting: int(setting["m"]),
    summary=_summary,
    planner_setting=_setting,
    doc="NbAFL (seed 002), optionally with K-client random scheduling",
)
