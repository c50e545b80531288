"""``fedbound train adaptive``: seed 001's PADPFL noise plan and algorithm (recipe for validation.runner).

Seed 001 (Talaei & Izadi, arXiv 2406.18491) is NbAFL with impact factors ``p_i`` as aggregation weights.
Which sigma is decided in one place, :func:`fedbound.bounds.adaptive.noise` (the planner calls it too):

* ``[train] noise = "paper"``: client noise ``sigma_C = 2 C R c / (min_i m_i eps)`` on every upload (eq. (8))
  and the server top-up ``sigma_S^(t)`` of Theorem 1 (eq. (13)) with the p of round t (E25), so that the
  broadcast carries ``sigma_A^(t) = 2 C T c max_i p_i^(t) / (min_i m_i eps)`` whenever
  ``T > T_th^(t) = R sqrt(sum_i p_i^2) / max_i p_i``;
* ``noise = "tight"``: the same views calibrated exactly (analytic Gaussian multiplier z, Gaussian-DP
  composition): ``sqrt(R) z 2C/m`` and ``sqrt(T) z Delta f^(t)``, the server topping up as in eq. (14).

The adversary views are NbAFL's: the uplink (each client's noised upload, at most R exposures, sensitivity
``2C / min_i m_i``, the literal min over all clients, E22) and the downlink broadcast (sensitivity
``2C max_i p_i^(t) / min_i m_i``, eq. (10), taken by the ledger from each round's actual weights; T releases).

The impact factors come from the ``[adaptive]`` section as data: ``parts`` (clients per part), ``ratios``
(one priority list per phase, F55), ``switch_after`` (rounds after which the later phases start), or
``weights = "planned"``: the bound's argmin over p of ``fedbound plan adaptive`` (``group_min``/
``group_max`` and ``floor``), or ``"priority"``: its impact-factor program (also the ``scores``).
``dropout`` (> 0): each client is absent from a round with that probability (seeded by ``[train] seed``)
and its weight is redistributed over the present clients
(:func:`fedbound.bounds.adaptive.redistribute_impact`; the server noise follows the round's p).
``salt_pepper`` (per part and phase) gives scenario 4's quality swap (seed 001 Table I).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds.adaptive import (
    design_from_settings,
    gaussian_c,
    noise_details,
    parse_lists,
    redistribute_impact,
    server_noise_threshold,
)
from fedbound.errors import ConfigError
from fedbound.validation.audit.provable import provable_setting, sensitivity_clip
from fedbound.validation.recipes.runner import Recipe

__all__ = [
    "parse_phases",
    "proximal_mu",
    "setting_impact_schedule",
    "impact_rows",
    "adopt_design",
    "adaptive_plan",
    "RECIPE",
]



def parse_phases(key: str, text: str, kind: type = float) -> list[list]:
    """``"0,1,2; 2,1,0"`` -> ``[[0, 1, 2], [2, 1, 0]]`` (ConfigError naming ``[adaptive] key`` otherwise)."""
    return parse_lists(key, text, kind)


def setting_impact_schedule(setting: Mapping[str, Any], rounds: int) -> np.ndarray:
    """The ``(rounds, N)`` impact factors of an [adaptive] setting's ratio phases (F55)."""
    return design_from_settings(setting).schedule(rounds)


def impact_rows(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int) -> np.ndarray:
    """The ``(rounds, N)`` impact factors training uses: the ratio schedule or the planned weights, then the
    seeded dropout redistribution.  The noise plan and the algorithm both call this (same rows)."""
    if setting.get("p_planned") is not None:  # the plan's p (--design recommended, see adopt_design)
        p = np.tile(np.asarray(setting["p_planned"], dtype=np.float64), (rounds, 1))
    elif setting.get("weights") in ("planned", "priority"):
        from fedbound.scheduling.adaptive import planned_impact_factors

        p = np.tile(planned_impact_factors(setting, rounds).x, (rounds, 1))
    else:
        p = setting_impact_schedule(setting, rounds)
    rate = float(setting.get("dropout") or 0.0)
    if rate > 0:
        rng = np.random.default_rng([int(train.get("seed", 0)), 1])
        rows = []
        for t in range(rounds):
            absent = rng.random(p.shape[1]) < rate
            if not np.any(p[t][~absent] > 0):  # nobody with weight left: the round keeps its p
                absent[:] = False
            rows.append(redistribute_impact(p[t], np.flatnonzero(absent)))
        p = np.stack(rows)
    return p


def _min_size(setting: Mapping[str, Any], client_sizes: np.ndarray) -> int:
    sizes = np.asarray(client_sizes)
    if len(sizes) != setting["N"]:
        raise ConfigError(f"[adaptive] N = {setting['N']} but the partition made {len(sizes)} clients")
    m = setting.get("m")
    if m is None:
        return int(sizes.min())
    if sizes.min() < m:
        raise ConfigError(
            f"[adaptive] m = {m} but the smallest client has {int(sizes.min())} samples: the "
            "sensitivity 2C/m would be too small; lower m or leave it unset"
        )
    return int(m)


def adaptive_plan(
    setting: Mapping[str, Any],
    client_sizes: np.ndarray,
    rounds: int,
    noise: str = "paper",
    train: Mapping[str, Any] | None = None,
):
    """PADPFL's noise plan (module docstring) for ``rounds`` rounds and the actual client sizes."""
    from fedbound.accounting.classic import classic_range_message
    from fedbound.bounds.provable import PAPER_LEAK
    from fedbound.training.plan import NoisePlan, View

    setting = _setting(setting, train or {})
    R, eps, delta = int(setting["R"]), setting["eps"], setting["delta"]
    T = int(rounds)
    if R > T:
        raise ConfigError(f"[adaptive] R = {R} is outside its valid range integer in [1, {T}] (T = {T})")
    p = impact_rows(setting, train or {}, T)
    m = _min_size(setting, client_sizes)
    noise_method = noise
    sigma = noise_details({**setting, "p": p, "m": [m]}, T, noise_method)
    given = setting.get("sensitivity")
    notes = [f"sensitivity = {given!r}: {PAPER_LEAK}"] if given not in (None, "provable") else []
    notes += (
        []
        if noise_method != "paper"
        else [
            msg
            for msg in (
                classic_range_message(eps / R, " on the uplink (eps/R per exposure)"),
                classic_range_message(eps / T, " on the downlink (eps/T per broadcast)"),
            )
            if msg
        ]
    )
    threshold = np.atleast_1d(server_noise_threshold(R, p))
    source = (
        "seed 001: sigma_C eq. (8), sigma_S Theorem 1 eq. (13) with each round's p"
        if noise_method == "paper"
        else "tight counterparts of seed 001 eq. (8) / (13): sqrt(R) z 2C/m and sqrt(T) z Delta f "
        "(analytic Gaussian, exact composition)"
    )
    info = {
        "gaussian_constant": float(gaussian_c(delta)),
        "sigma_client": float(sigma["uplink"][0]),
        "sensitivity_uplink": 2.0 * sensitivity_clip(setting, "C", m) / m,
        "m_min": float(m),
        "sigma_server_min": float(sigma["server"].min()),
        "sigma_server_max": float(sigma["server"].max()),
        "sigma_total_max": float(sigma["total"].max()),
        "sigma_aggregated_client_max": float(sigma["aggregated_client"].max()),
        "threshold_rounds_min": float(threshold.min()),
        "p_max_max": float(p.max()),
    }
    views = (
        View("uplink", "upload", stage="uplink", max_releases=R),
        View("downlink", "broadcast", stage="uplink"),
    )
    return NoisePlan(
        rounds=T,
        num_clients=int(setting["N"]),
        sigma={"uplink": sigma["uplink"], "server": sigma["server"]},
        sensitivity={"uplink": 2.0 * sensitivity_clip(setting, "C", m) / m},
        eps=eps,
        delta=delta,
        views=views,
        budget_accountant="paper" if noise_method == "paper" else "tight",
        paper_accountant="classic_linear",
        source=source,
        notes=tuple(notes),
        info=info,
    )


def _phase_data(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int) -> list:
    """Scenario 4's time-varying quality: one ClientData per phase, with [adaptive] salt_pepper."""
    from fedbound.training import config as tc

    text = setting.get("salt_pepper")
    design = design_from_settings(setting)
    if train["partition"] == "groups":
        groups = tc.parse_int_list("group_clients", train["group_clients"])
        if groups != list(design.parts):
            raise ConfigError(
                f"[train] group_clients = {train['group_clients']!r} differs from [adaptive] "
                f"parts = {setting['parts']!r}: the impact factors are per part"
            )
    if text is None:
        return []
    densities = parse_phases("salt_pepper", text)
    if train["partition"] != "groups":
        raise ConfigError('[adaptive] salt_pepper needs [train] partition = "groups"')
    if train["group_noise"] is not None:
        raise ConfigError(
            "set the image quality in one place: [adaptive] salt_pepper (per phase) or [train] "
            "group_noise (fixed), not both"
        )
    if len(densities) != len(design.ratios) or any(len(d) != len(design.parts) for d in densities):
        raise ConfigError(
            f"[adaptive] salt_pepper = {text!r}: one density per part for each of the "
            f"{len(design.ratios)} phase(s)"
        )
    out = []
    for first, phase in zip([0, *design.switch_after], densities, strict=True):
        if first >= rounds:
            break
        phase_train = {**train, "group_noise": ",".join(str(d) for d in phase)}
        setup = tc.build_data(
            phase_train, int(setting["N"]), setting.get("m"), tc.resolve_device(train["device"])
        )
        out.append((first, setup.data))
    return out


def proximal_mu(setting: Mapping[str, Any]) -> float:
    """The setting's mu, else Lemma 2's mu* with the assumed loss constants."""
    if setting.get("mu") is not None:
        return float(setting["mu"])
    from fedbound.papers.adaptive import LOSS_DEFAULTS
    from fedbound.scheduling.adaptive import best_mu

    get = {
        k: setting.get(k) if setting.get(k) is not None else LOSS_DEFAULTS[k] for k in ("A", "gamma", "rho")
    }
    res = best_mu(get["A"], get["gamma"], get["rho"])
    if not res.success:
        raise ConfigError(f"[adaptive] mu is not set and {res.message}: set mu")
    return float(res.x)


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.adaptive import PADPFL

    setting = _setting(setting, train)  # planned weights read the provable sensitivity too
    mu = proximal_mu(setting)
    if float(train["lr"]) * mu >= 2:  # curvature of l_i + mu/2 ||x - x~||^2 is at least mu
        lr = float(train["lr"])
        raise ConfigError(f"[adaptive] mu = {setting.get('mu', mu)!r} is outside its valid range "
                          f"(0, {2 / lr:.6g}) for [train] lr = {lr:g}: with lr * mu >= 2 the local solve "
                          "of PADPFL (Talaei and Izadi 2024), eq. (38) (gradient steps on the proximal "
                          "objective, curvature >= mu) diverges")
    return PADPFL.from_config(
        {**setting, "mu": mu},
        train,
        rounds,
        impact_rows(setting, train, rounds),
        _phase_data(setting, train, rounds),
    )


def adopt_design(setting: dict, recommendation: Any) -> dict[str, Any]:
    """``--design recommended``: train the plan's own mu (its joint (T, mu) optimum, not Lemma 2's mu*) and,
    with ``weights = "planned"`` / ``"priority"``, the very p it printed (the priority program depends on the
    T it is solved at, so re-solving at the trained T would deploy another p)."""
    info: dict[str, Any] = {}
    if setting.get("mu") is None:
        setting["mu"] = float(recommendation.extra["mu"])
        info["mu"] = {"value": setting["mu"], "source": "recommended by plan (joint (T, mu) optimum)"}
    if setting.get("weights") in ("planned", "priority"):
        p = np.asarray(recommendation.extra["p"], dtype=np.float64)
        setting["p_planned"] = p.tolist()
        info["p"] = {"value": p.tolist(), "source": f"recommended by plan (weights = {setting['weights']!r})"}
    return info


def _setting(setting: Mapping[str, Any], train: Mapping[str, Any]) -> dict[str, Any]:
    """The setting with the provable sensitivity of the configured local training filled in (the default;
    unchanged with ``sensitivity = "paper"`` or ``"tight"``, the paper's 2C/m): what the plan, the
    algorithm and the planner all read.  Without a [train] table (a plan) the keys stay as given."""
    if "local_steps" not in train:
        return dict(setting)
    return provable_setting(setting, train, 0.02, "adaptive", prox_mu=proximal_mu(setting))


def _rounds(setting: Mapping[str, Any]) -> int:
    if setting.get("T") is None:
        raise ConfigError("[adaptive] T is required for training (fedbound plan adaptive recommends one)")
    return int(setting["T"])


def _summary(setting: Mapping[str, Any]) -> dict[str, Any]:
    out = {
        "impact_ratios": setting["ratios"],
        "impact_parts": setting["parts"],
        "impact_weights": setting.get("weights") or "ratios",
        "mu": proximal_mu(setting),
    }
    if setting.get("switch_after"):
        out["impact_switch_after"] = setting["switch_after"]
    if setting.get("salt_pepper"):
        out["salt_pepper_phases"] = setting["salt_pepper"]
    if setting.get("dropout"):
        out["dropout"] = setting["dropout"]
    return out


RECIPE = Recipe(
    num_clients=lambda setting: int(setting["N"]),
    plan=lambda setting, train, sizes, rounds: adaptive_plan(setting, sizes, rounds, train["noise"], train),
    algorithm=_algorithm,
    rounds=_rounds,
    min_client_size=lambda setting: setting.get("m"),
    summary=_summary,
    adopt=adopt_design,
    planner_setting=_setting,
    doc="PADPFL (seed 001): personalized / adaptive impact factors with client and server noise",
)
