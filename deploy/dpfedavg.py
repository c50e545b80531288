"""Central DP-FedAvg as a deploy-level mechanism: its ``[dpfedavg]`` section, its noise plan, its recipe.

McMahan, Ramage, Talwar & Zhang 2018, "Learning Differentially Private Recurrent Language Models" (ICLR),
Algorithm 1: each round K of the N clients train locally; each update ``w_i - w`` is clipped to norm C;
the server averages the K clipped updates with uniform weights and adds ``N(0, sigma^2 I)`` to the average.
The algorithm is :class:`fedbound.training.dpfedavg.DPFedAvg`; on Flower the server side is Flower's
``DifferentialPrivacyServerSideFixedClipping`` with noise multiplier ``z = sigma K / C``
(:mod:`fedbound.deploy.flower_dpfedavg`).

**Privacy unit and sensitivity.**  Neighbouring federations differ in one client's data (*replace one*
client); clients are sampled K of N uniformly without replacement and the sample is hidden from the
adversary, who sees the T noised averages.  The average of K updates each clipped to C changes by at most
``||Delta_i - Delta_i'|| / K <= 2C / K`` when one client is replaced, so one round is a Gaussian release with
noise multiplier ``sigma / (2C / K) = sigma K / (2C)``, amplified by K-of-N sampling without replacement
(the RDP bound of Wang, Balle & Kasiviswanathan 2019, the one dp-accounting uses for replace-one), composed
over T rounds.  With ``K = N`` there is no sampling: T Gaussian releases compose exactly (Gaussian DP).
(Flower's noise multiplier ``sigma K / C`` is its own parameterisation of the same std: ``std = z C / K``,
the add-or-remove-one sensitivity; the ledger's multiplier is half of it.)

:func:`dpfedavg_plan` calibrates sigma with fedbound's tight accountant (``fedbound.accounting``:
``calibrate_noise`` for K of N without replacement, ``analytic_gaussian_std`` for K = N) so that the T rounds
spend at most eps at delta; the ledger accounts every round from the same view and the engine stops before
a round that would exceed eps.  ``[train] noise`` may be ``"paper"`` or ``"tight"``: McMahan et al. account
with the moments accountant, which is this RDP accountant, so both give the same sigma.

**Not a registry paper.**  fedbound's registry holds papers with theorems, claims and figures; DP-FedAvg
here is a mechanism to deploy.  :data:`MECHANISM` offers the two things the generic train/deploy code
reads from a registry entry (its config section and its recipe), and :mod:`fedbound.deploy.mechanisms`
maps the name ``dpfedavg`` to it: ``fedbound flower dpfedavg CONFIG`` runs through the same code as the
papers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbound.config import Field, Section
from fedbound.errors import ConfigError, ParameterError
from fedbound.validation.recipes.runner import Recipe

__all__ = ["SECTION", "dpfedavg_sigma", "dpfedavg_plan", "RECIPE", "MECHANISM", "Mechanism"]

SOURCE = ("central DP-FedAvg (McMahan et al. 2018, Algorithm 1): sigma calibrated by fedbound's tight "
          "accountant, K of N without replacement, replace-one sensitivity 2C/K")

SECTION = Section("dpfedavg", (
    Field("N", int, doc="clients", low=1, high=10**6),
    Field("K", int, doc="clients sampled per round (uniformly, without replacement)", low=1, high=10**6),
    Field("T", int, doc="rounds", low=1, high=10**6),
    Field("C", float, doc="clip norm of each client's update w_i - w", low=0.0, low_open=True, high=1e12),
    Field("eps", float, doc="privacy budget over the T rounds", low=1e-6, high=1e6),
    Field("delta", float, doc="privacy budget delta", low=0.0, high=1.0, low_open=True, high_open=True),
), doc="central DP-FedAvg (McMahan et al. 2018, Algorithm 1), deployed on Flower")


def _check(setting: Mapping[str, Any]) -> tuple[int, int, int, float]:
    N, K, T, C = (setting[k] for k in ("N", "K", "T", "C"))
    if K > N:
        raise ConfigError(f"[dpfedavg] K = {K} is outside its valid range: 1 .. N = {N}")
    return int(N), int(K), int(T), float(C)


def dpfedavg_sigma(setting: Mapping[str, Any]) -> float:
    """sigma: the std per coordinate of the noise on the average of the K clipped updates for which T
    rounds are (eps, delta)-DP (module docstring: sensitivity 2C/K, K of N without replacement)."""
    from fedbound.accounting import analytic_gaussian_std, calibrate_noise

    N, K, T, C = _check(setting)
    eps, delta = float(setting["eps"]), float(setting["delta"])
    if K == N:  # T unsampled Gaussian releases: one with multiplier z / sqrt(T) (Dong, Roth & Su 2022)
        z = float(np.sqrt(T)) * float(analytic_gaussian_std(eps, delta))
    else:
        z = float(calibrate_noise(eps, delta, K / N, T, method="rdp", sampling="without_replacement"))
    return z * 2.0 * C / K


def dpfedavg_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, rounds: int):
    """The noise plan: server noise sigma (:func:`dpfedavg_sigma`) on the average; one broadcast view
    (stage ``"uplink"`` carries no noise, only the per-update sensitivity 2C that the weights 1/K scale)."""
    from fedbound.training.plan import NoisePlan, View

    N, K, T, C = _check(setting)
    if len(client_sizes) != N:
        raise ConfigError(f"[dpfedavg] N = {N} but the partition made {len(client_sizes)} clients")
    sigma = dpfedavg_sigma(setting)
    tiny = float(np.finfo(np.float32).tiny)
    if not sigma >= tiny:  # C underflowing: the noise would vanish while the ledger counts eps
        raise ParameterError("plan.sigma-server", sigma, f"[{tiny:.4g}, inf) (the smallest normal float32) "
                             f"at eps = {float(setting['eps']):g}", hint="noise that vanishes would release "
                             "the data unprotected while the ledger counts eps; it follows from [dpfedavg] C "
                             f"= {C:g}: raise C")
    view = View("downlink", "broadcast", stage="uplink", sample_rate=K / N, hidden_sampling=K < N,
                sampling="without_replacement")
    return NoisePlan(rounds=rounds, num_clients=N, sigma={"uplink": np.zeros(rounds),
                                                          "server": np.full(rounds, sigma)},
                     sensitivity={"uplink": 2.0 * C}, eps=float(setting["eps"]),
                     delta=float(setting["delta"]),
                     views=(view,), budget_accountant="tight", paper_accountant="none", source=SOURCE,
                     info={"sigma_server": sigma, "sensitivity_average": 2.0 * C / K,
                           "flower_noise_multiplier": sigma * K / C})


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.config import local_sgd
    from fedbound.training.dpfedavg import DPFedAvg

    _, K, _, C = _check(setting)
    return DPFedAvg(rounds, C, local_sgd(train, 0.1), K)


RECIPE = Recipe(num_clients=lambda setting: int(setting["N"]),
                plan=lambda setting, train, sizes, rounds: dpfedavg_plan(setting, sizes, rounds),
                algorithm=_algorithm, section=SECTION,
                doc="central DP-FedAvg (McMahan et al. 2018), deploy-level mechanism")


@dataclass(frozen=True)
class Mechanism:
    """What the generic run code reads from a registry paper (``name``, ``short``, ``config_section``,
    ``defaults``, ``audit``, ``load("recipe")``), for a mechanism that is not a registry paper."""

    name: str
    short: str
    config_section: Section
    recipe: Recipe
    defaults: Mapping[str, Any] = field(default_factory=dict)
    audit: Any = None

    def load(self, what: str) -> Any:
        if what != "recipe":
            raise ConfigError(f"{self.short} is a deploy mechanism, not a registry paper: it has no {what}")
        return self.recipe


MECHANISM = Mechanism("dpfedavg", "central DP-FedAvg (McMahan et al. 2018)", SECTION, RECIPE)
