"""``fedbound train adaptive``: seed 001's PADPFL noise plan and algorithm (recipe for validation.runner).

Seed 001 (Talaei & Izadi, arXiv 2406.18491) is NbAFL with impact factors ``p_i`` as aggregation weights.
Its noise, from the spec's formulas in ``fedbound.bounds.adaptive`` (spec 001 Sec. 3.3-3.5, the paper's
equation numbers):

* client noise ``sigma_C = 2 B R c / (min_i m_i eps)`` on every upload (eq. (8), F12), the same for every
  client and round (it does not depend on p, spec 001 E15);
* server top-up ``sigma_S^(t)`` (Theorem 1, eq. (13), F19) with the p of round t (spec 001 E25), so that the
  broadcast carries ``sigma_A^(t) = 2 B T c max_i p_i^(t) / (min_i m_i eps)`` (F17) whenever
  ``T > T_th^(t) = R sqrt(sum_i p_i^2) / max_i p_i`` (F20), and ``sigma_AC^(t) >= sigma_A^(t)`` otherwise
  (F21);
* ``c = sqrt(2 ln(1.25/delta))`` (F7, ``fedbound.accounting.classic_gaussian_constant``).

The adversary views are NbAFL's: the uplink (each client's noised upload, at most R exposures, sensitivity
``2B / min_i m_i``, F10 with the literal min over all clients, spec 001 E22) and the downlink broadcast
(sensitivity ``2 B max_i p_i^(t) / min_i m_i``, F14, which the ledger takes from each round's actual
weights; T releases, linear composition, spec 001 E21).  Both are counted by the tight accountant and by
the paper's (classic Gaussian, linear composition).  ``noise = "tight"`` calibrates the same views exactly:
``sigma_C = sqrt(R) z 2B/m``, ``sigma_A^(t) = sqrt(T) z 2B p_max^(t)/m`` with ``z`` the analytic Gaussian
multiplier (Balle & Wang 2018) and the server topping up to ``sigma_A^(t)`` as in F18.

The impact factors come from the ``[adaptive]`` section as data: ``parts`` (clients per part), ``ratios``
(one priority list per phase, F55: ``p_i = r_k / sum_k' n_k' r_k'``), ``switch_after`` (the rounds after
which the later phases start) and, optionally, ``salt_pepper`` (salt-and-pepper density per part and phase:
scenario 4's quality swap, seed 001 Table I).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds.adaptive import (
    RADICAND_RTOL,
    aggregated_client_noise_sigma,
    client_noise_sigma,
    gaussian_constant,
    impact_schedule,
    server_noise_sigma,
    server_noise_threshold,
    server_sensitivity,
    total_noise_sigma,
)
from fedbound.config import Field, Section
from fedbound.errors import ConfigError, ParameterError
from fedbound.validation.runner import Recipe

__all__ = ["ADAPTIVE_SECTION", "parse_phases", "setting_impact_schedule", "adaptive_plan", "RECIPE"]

ADAPTIVE_SECTION = Section("adaptive", (
    Field("N", int, doc="number of clients", low=1),
    Field("T", int, doc="aggregation rounds", low=1),
    Field("R", int, doc="uplink exposures of a client's weights an adversary sees (NbAFL's L), 1 <= R <= T",
          low=1),
    Field("B", float, doc="clipping bound on the model weights, ||x_i|| <= B (NbAFL's C)", low=0.0,
          low_open=True),
    Field("eps", float, doc="privacy budget epsilon", low=0.0, low_open=True),
    Field("delta", float, doc="privacy budget delta", low=0.0, high=1.0, low_open=True, high_open=True),
    Field("mu", float, doc="FedProx proximal coefficient", low=0.0, low_open=True),
    Field("m", int, None, "smallest local dataset min_i m_i in the sensitivities (eq. (7), (10)); default: "
          "the partition's smallest client", low=1, optional=True),
    Field("parts", str, doc="clients per part, consecutive client ids, e.g. \"20,20,20\""),
    Field("ratios", str, doc="priorities r_k per part (F55), one list per phase separated by ';', e.g. "
          "\"0,1,2; 2,1,0\""),
    Field("switch_after", str, None, "rounds after which each later phase starts, e.g. \"10\"",
          optional=True),
    Field("salt_pepper", str, None, "salt-and-pepper density per part, one list per phase, e.g. "
          "\"0.5,0.2,0.05; 0.05,0.2,0.5\" (then leave [train] group_noise unset)", optional=True),
), doc="PADPFL setting (seed 001, spec 001 notation)")

def parse_phases(key: str, text: str, kind: type = float) -> list[list]:
    """``"0,1,2; 2,1,0"`` -> ``[[0, 1, 2], [2, 1, 0]]`` (ConfigError naming ``[adaptive] key`` otherwise)."""
    try:
        phases = [[kind(v) for v in chunk.replace(" ", "").split(",") if v] for chunk in text.split(";")]
    except ValueError as exc:
        raise ConfigError(f"[adaptive] {key} = {text!r}: expected comma-separated numbers, phases separated "
                          "by ';'") from exc
    if not phases or any(not p for p in phases):
        raise ConfigError(f"[adaptive] {key} = {text!r}: every phase needs at least one number")
    return phases


# --- the setting ----------------------------------------------------------------------------------------

def _schedule_parts(setting: Mapping[str, Any]) -> tuple[list[int], list[list[float]], list[int]]:
    parts = parse_phases("parts", setting["parts"], int)
    if len(parts) != 1:
        raise ConfigError(f"[adaptive] parts = {setting['parts']!r}: one list of clients per part (no ';')")
    parts = parts[0]
    if sum(parts) != setting["N"]:
        raise ConfigError(f"[adaptive] parts = {setting['parts']!r} sums to {sum(parts)}, but N = "
                          f"{setting['N']}")
    ratios = parse_phases("ratios", setting["ratios"])
    if any(len(r) != len(parts) for r in ratios):
        raise ConfigError(f"[adaptive] ratios = {setting['ratios']!r}: every phase needs one ratio per part "
                          f"({len(parts)} parts)")
    text = setting.get("switch_after")
    switch = parse_phases("switch_after", text, int)[0] if text else []
    if len(switch) != len(ratios) - 1:
        raise ConfigError(f"[adaptive] switch_after = {text!r}: {len(ratios)} phase(s) of ratios need "
                          f"{len(ratios) - 1} switch round(s)")
    return parts, ratios, switch


def setting_impact_schedule(setting: Mapping[str, Any], rounds: int) -> np.ndarray:
    """The ``(rounds, N)`` impact factors of an [adaptive] setting (ConfigError for an inconsistent one)."""
    parts, ratios, switch = _schedule_parts(setting)
    try:
        return impact_schedule(parts, ratios, switch, rounds)
    except ParameterError as exc:
        raise ConfigError(f"[adaptive] impact-factor schedule: {exc}") from exc


def _min_size(setting: Mapping[str, Any], client_sizes: np.ndarray) -> int:
    sizes = np.asarray(client_sizes)
    if len(sizes) != setting["N"]:
        raise ConfigError(f"[adaptive] N = {setting['N']} but the partition made {len(sizes)} clients")
    m = setting.get("m")
    if m is None:
        return int(sizes.min())
    if sizes.min() < m:
        raise ConfigError(f"[adaptive] m = {m} but the smallest client has {int(sizes.min())} samples: the "
                          "sensitivity 2B/m would be too small; lower m or leave it unset")
    return int(m)


def adaptive_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, rounds: int, noise: str = "paper"):
    """PADPFL's noise plan (module docstring) for ``rounds`` rounds and the actual client sizes."""
    from fedbound.accounting import analytic_gaussian_std
    from fedbound.accounting.classic import classic_range_message
    from fedbound.training.plan import NoisePlan, View

    B, R, eps, delta = setting["B"], setting["R"], setting["eps"], setting["delta"]
    T = int(rounds)
    if R > T:
        raise ConfigError(f"[adaptive] R = {R} is outside its valid range integer in [1, {T}] (T = {T})")
    p = setting_impact_schedule(setting, T)
    m = _min_size(setting, client_sizes)
    c = gaussian_constant(delta)
    sensitivity = 2.0 * B / m  # eq. (7) with min_i m_i (F10, F12)
    notes = [msg for msg in (classic_range_message(eps / R, " on the uplink (eps/R per exposure)"),
                             classic_range_message(eps / T, " on the downlink (eps/T per broadcast)")) if msg]
    if noise == "paper":
        sigma_c = client_noise_sigma(eps, delta, B, R, m)
        sigma_s = np.atleast_1d(server_noise_sigma(eps, delta, T, R, p, B, m))
        sigma_a = np.atleast_1d(total_noise_sigma(eps, delta, T, B, p, m))
        source = "seed 001: sigma_C eq. (8) / F12, sigma_S Theorem 1 eq. (13) / F19 with each round's p"
    else:
        z = float(analytic_gaussian_std(eps, delta, 1.0))
        sigma_c = float(np.sqrt(R) * z * sensitivity)
        sigma_a = np.sqrt(T) * z * np.atleast_1d(server_sensitivity(B, p, m))
        ac = np.atleast_1d(aggregated_client_noise_sigma(p, sigma_c))
        radicand = sigma_a**2 - ac**2
        sigma_s = np.sqrt(np.where(radicand > RADICAND_RTOL * sigma_a**2, radicand, 0.0))
        source = ("tight counterparts of seed 001 eq. (8) / (13): sqrt(R) z 2B/m and sqrt(T) z Delta f "
                  "(analytic Gaussian, exact composition)")
        notes = []
    ac = np.atleast_1d(aggregated_client_noise_sigma(p, sigma_c))
    threshold = np.atleast_1d(server_noise_threshold(R, p))
    views = (View("uplink", "upload", stage="uplink", max_releases=int(R)),
             View("downlink", "broadcast", stage="uplink"))
    info = {"gaussian_constant": c, "sigma_client": sigma_c, "sensitivity_uplink": sensitivity,
            "m_min": float(m), "sigma_server_min": float(sigma_s.min()),
            "sigma_server_max": float(sigma_s.max()), "sigma_total_max": float(sigma_a.max()),
            "sigma_aggregated_client_max": float(ac.max()), "threshold_rounds_min": float(threshold.min()),
            "p_max_max": float(p.max())}
    return NoisePlan(rounds=T, num_clients=int(setting["N"]),
                     sigma={"uplink": np.full(T, sigma_c), "server": sigma_s},
                     sensitivity={"uplink": sensitivity}, eps=eps, delta=delta, views=views,
                     budget_accountant="paper" if noise == "paper" else "tight",
                     paper_accountant="classic_linear", source=source, notes=tuple(notes), info=info)


def _phase_data(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int) -> list:
    """Scenario 4's time-varying quality: one ClientData per phase, with [adaptive] salt_pepper."""
    from fedbound.training import config as tc

    text = setting.get("salt_pepper")
    parts, ratios, switch = _schedule_parts(setting)
    if train["partition"] == "groups":
        groups = tc.parse_int_list("group_clients", train["group_clients"])
        if groups != parts:
            raise ConfigError(f"[train] group_clients = {train['group_clients']!r} differs from [adaptive] "
                              f"parts = {setting['parts']!r}: the impact factors are per part")
    if text is None:
        return []
    densities = parse_phases("salt_pepper", text)
    if train["partition"] != "groups":
        raise ConfigError("[adaptive] salt_pepper needs [train] partition = \"groups\"")
    if train["group_noise"] is not None:
        raise ConfigError("set the image quality in one place: [adaptive] salt_pepper (per phase) or [train] "
                          "group_noise (fixed), not both")
    if len(densities) != len(ratios) or any(len(d) != len(parts) for d in densities):
        raise ConfigError(f"[adaptive] salt_pepper = {text!r}: one density per part for each of the "
                          f"{len(ratios)} phase(s)")
    firsts = [0, *switch]
    out = []
    for first, phase in zip(firsts, densities, strict=True):
        if first >= rounds:
            break
        phase_train = {**train, "group_noise": ",".join(str(d) for d in phase)}
        setup = tc.build_data(phase_train, int(setting["N"]), setting.get("m"),
                              tc.resolve_device(train["device"]))
        out.append((first, setup.data))
    return out


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.adaptive import PADPFL

    return PADPFL.from_config(setting, train, rounds, setting_impact_schedule(setting, rounds),
                              _phase_data(setting, train, rounds))


def _summary(setting: Mapping[str, Any]) -> dict[str, Any]:
    out = {"impact_ratios": setting["ratios"], "impact_parts": setting["parts"]}
    if setting.get("switch_after"):
        out["impact_switch_after"] = setting["switch_after"]
    if setting.get("salt_pepper"):
        out["salt_pepper_phases"] = setting["salt_pepper"]
    return out


RECIPE = Recipe(
    section=ADAPTIVE_SECTION,
    num_clients=lambda setting: int(setting["N"]),
    plan=lambda setting, train, sizes, rounds: adaptive_plan(setting, sizes, rounds, train["noise"]),
    algorithm=_algorithm,
    min_client_size=lambda setting: setting.get("m"),
    summary=_summary,
    doc="PADPFL (seed 001): personalized / adaptive impact factors with client and server noise",
)
