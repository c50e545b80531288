"""``fedbound train udp``: seed 003's noise plan and the UDP algorithm (recipe for validation.runner).

:func:`udp_plan`: ``sigma_i = Delta_i sqrt(2 q T ln(1/delta)) / eps`` (Theorem 1, eq. (10),
``fedbound.accounting.udp_theorem1_std``) with ``Delta_i = 2 eta C / |D_i|`` (eq. (13)) per client; the
server sees who uploads, so the tight accountant counts each client's realised participations (spec 003
E9) and the paper's accountant is eq. (16)'s ``sqrt(2 q ln(1/delta) sum_t Delta^2/sigma_t^2)``.
``noise="tight"``: ``sigma_i = Delta_i z`` with ``z`` the exact T-fold Gaussian calibration (valid for any
participation pattern).

The ``[udp]`` section is declared here (:data:`UDP_SECTION`) until a UDP planning module exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.config import Field, Section
from fedbound.errors import ConfigError
from fedbound.validation.runner import Recipe

__all__ = ["UDP_SECTION", "udp_plan", "RECIPE"]

UDP_SECTION = Section("udp", (
    Field("U", int, doc="number of clients (mobile terminals)", low=1),
    Field("K", int, None, "clients per round, chosen uniformly (default: all U)", low=1, optional=True),
    Field("T", int, doc="communication rounds (CRD: the initial T)", low=1),
    Field("eps", float, doc="each client's privacy budget epsilon_i", low=0.0, low_open=True),
    Field("delta", float, doc="each client's delta_i", low=0.0, high=1.0, low_open=True, high_open=True),
    Field("eta", float, doc="learning rate of the local step; sets the sensitivity 2 eta C / |D_i| "
          "(eq. (13))", low=0.0, low_open=True),
    Field("C", float, doc="per-sample gradient clipping threshold", low=0.0, low_open=True),
    Field("crd", bool, False, "communication-rounds discounting (seed 003 Alg. 2)"),
    Field("beta", float, 0.9, "CRD discount factor", low=0.0, high=1.0, low_open=True, high_open=True),
    Field("zeta", float, 0.001, "CRD trigger: discount when the validation loss improves by less",
          low=0.0, low_open=True),
), doc="UDP setting (seed 003, spec 003 notation)")


def udp_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, local_steps: int = 1,
             noise: str = "paper"):
    """UDP's noise plan (module docstring); per-client sigma because ``Delta_i`` depends on ``|D_i|``."""
    from fedbound.accounting import calibrate_noise, udp_theorem1_std
    from fedbound.training.plan import NoisePlan, View

    U, T, eps, delta, eta, C = (setting[k] for k in ("U", "T", "eps", "delta", "eta", "C"))
    K = setting.get("K") or U
    if K > U:
        raise ConfigError(f"[udp] K = {K} is outside its valid range integer in [1, {U}] (U = {U})")
    sizes = np.asarray(client_sizes, dtype=np.float64)
    if len(sizes) != U:
        raise ConfigError(f"[udp] U = {U} but the partition made {len(sizes)} clients")
    q = K / U
    sens = local_steps * 2.0 * eta * C / sizes
    notes: list[str] = []
    if local_steps > 1:
        notes.append(f"local_steps = {local_steps}: seed 003's sensitivity 2 eta C/|D_i| is for one "
                     "full-batch step; the plan uses local_steps x that, which spec 003 E8 shows is not "
                     "a bound when clipping is active")
    if noise == "paper":
        sigma = np.asarray(udp_theorem1_std(eps, delta, q, T, sens), dtype=np.float64)
        source = "seed 003 Theorem 1, eq. (10) (fedbound.accounting.udp_theorem1_std)"
    else:
        z = float(calibrate_noise(eps, delta, 1.0, T, method="analytic"))
        sigma = z * sens
        source = "exact T-fold Gaussian calibration (fedbound.accounting.calibrate_noise, analytic)"
    views = (View("uplink", "upload", stage="uplink", sample_rate=q, hidden_sampling=False),)
    return NoisePlan(rounds=T, num_clients=U, sigma={"uplink": np.tile(sigma, (T, 1))},
                     sensitivity={"uplink": sens}, eps=eps, delta=delta, views=views,
                     budget_accountant="paper" if noise == "paper" else "tight",
                     paper_accountant="udp_moments",
                     source=source, notes=tuple(notes),
                     info={"sigma_uplink_min": float(sigma.min()), "sigma_uplink_max": float(sigma.max()),
                           "sample_rate": q})


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.udp import UDP

    return UDP.from_config(setting, train, rounds)


RECIPE = Recipe(
    section=UDP_SECTION,
    num_clients=lambda setting: int(setting["U"]),
    plan=lambda setting, train, sizes, rounds: udp_plan(setting, sizes, train["local_steps"], train["noise"]),
    algorithm=_algorithm,
    doc="UDP (seed 003), optionally with communication-rounds discounting",
)
