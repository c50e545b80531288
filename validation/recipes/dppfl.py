"""``fedbound train dppfl``: DP-PFL's noise plan (Theorem 1) and the DP-PFL algorithm (recipe for
validation.runner).

Which sigma: ``[train] noise = "paper"``: ``fedbound.bounds.dppfl.noise``, Theorem 1 (DP-PFL eq. (12)) on
Opacus' 151 orders (spec 000 Sec. 3.4 / E7); ``"tight"``: the planner's own sigma,
``fedbound.scheduling.dppfl_sigma.exact_sigma`` (the exact calibration of the ``2 T tau0`` releases: analytic
Gaussian at ``q_in = q_out = 1``, dp-accounting's PLD otherwise; the ledger must then account by PLD too).
``[dppfl] sigma_ratio`` != 1 (or ``split = "planned"``, the ratio of
``fedbound.scheduling.dppfl.optimal_split``) gives the stages different noise multipliers under the same total
RDP (method ``"split"``).

The plan: stages ``"inner"`` and ``"outer"`` with noise std ``C sigma_in`` and ``C sigma_out`` on a sum of
per-example terms of norm <= C (sensitivity C), every local step; two ``"steps"`` views (``tau0`` releases per
round each, records Poisson-sampled at ``q_in`` / ``q_out`` inside each client, the sample hidden from the
adversary: ``hidden_scope="participants"``) in one group ``"local"``: the adversary sees every noised local
step of a client, which covers the uploads (post-processing).  The paper's accountant is RDP on the order grid
the sigma was calibrated on (``paper_accountant="rdp"``, ``plan.orders``); the ledger's tight accountant
is the same exact RDP for sampled stages and composes the Gaussian releases exactly (GDP) at ``q = 1``.

Target clients (``[dppfl] targets``, the paper's K) come from the held-out split (``[train] test_fraction``),
partitioned like the source clients (``partition = "classes"``: ``classes_per_client`` classes of
``target_samples_per_class`` samples each; otherwise an equal random split): DP-PFL Sec. V-A's 40 % of
the clients that only evaluate fast adaptation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds.dppfl import OPACUS_ORDERS, TIGHT_ORDERS, noise, rdp_pfl_epsilon, rdp_pfl_rdp
from fedbound.errors import ConfigError
from fedbound.papers.dppfl import section
from fedbound.validation.recipes.runner import Recipe

__all__ = ["DPPFL_SECTION", "dppfl_plan", "planned_ratio", "target_clients", "RECIPE"]

DPPFL_SECTION = section()
"""The [dppfl] section (registered in fedbound.papers.dppfl)."""


def planned_ratio(setting: Mapping[str, Any], rounds: int) -> float:
    """sigma_out/sigma_in for ``rounds``: ``split = "given"``: ``sigma_ratio``; ``"planned"``: the ratio
    minimising Theorem 3 with the outer noise (E18) under the same total RDP
    (``fedbound.scheduling.dppfl.optimal_split``, variant ``outer_noise``; the paper's analysis constants are
    the documented defaults where the setting has none)."""
    if setting.get("split", "given") != "planned":
        return float(setting.get("sigma_ratio", 1.0))
    from fedbound.papers.dppfl import ANALYSIS_DEFAULTS
    from fedbound.scheduling.dppfl import optimal_split

    values = {**ANALYSIS_DEFAULTS, **{k: v for k, v in setting.items() if v is not None}, "T": rounds,
              "bound": "nonconvex"}
    return float(optimal_split(values, "outer_noise", "paper").x)


def dppfl_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, rounds: int,
               noise_method: str = "paper"):
    """DP-PFL's noise plan (module docstring) for ``rounds`` rounds and ``len(client_sizes) = N`` clients."""
    from fedbound.training.plan import NoisePlan, View

    U, tau0, C, eps, delta = (setting[k] for k in ("N", "tau0", "C", "eps", "delta"))
    q_in, q_out = setting["q_in"], setting["q_out"]
    if len(client_sizes) != U:
        raise ConfigError(f"[dppfl] N = {U} but the partition made {len(client_sizes)} clients")
    ratio = planned_ratio(setting, rounds)
    if noise_method == "tight":  # the planner's sigma: one source (fedbound.scheduling.dppfl_sigma)
        from fedbound.scheduling.dppfl_sigma import exact_sigma

        rec = exact_sigma(setting, rounds, ratio)
        std = {"inner": C * rec["z"], "outer": C * ratio * rec["z"]}
        source = (f"the exact calibration of the 2 T tau0 releases, {rec['method']}"
                  + (f", sigma_out = {ratio:.6g} sigma_in" if ratio != 1.0 else "")
                  + " (fedbound.scheduling.dppfl_sigma.exact_sigma: the planner's tight sigma)")
    elif ratio != 1.0:
        std = noise({**setting, "sigma_ratio": ratio}, rounds, "split")
        source = (f"DP-PFL Theorem 1, eq. (12), with sigma_out = {ratio:.6g} sigma_in (inner/outer budget "
                  f"split,"
                  " fedbound.bounds.dppfl.noise method 'split')")
    else:
        std = noise(setting, rounds, noise_method)
        source = ("DP-PFL Theorem 1, eq. (12): RDP of both sampled Gaussian stages over T tau0 epochs "
                  f"(fedbound.bounds.dppfl.noise, {noise_method})")
    sigma, sigma_out = std["inner"] / C, std["outer"] / C
    orders = TIGHT_ORDERS if noise_method == "tight" else OPACUS_ORDERS
    eps_paper, alpha = rdp_pfl_epsilon(rounds, tau0, q_in, sigma, q_out, sigma_out, delta, orders)
    _, inner, outer = rdp_pfl_rdp(np.array([alpha]), rounds, tau0, q_in, sigma, q_out, sigma_out)
    notes = []
    if setting["variant"] == "v1":
        notes.append("variant v1 (DP-PFL (Wei et al. 2023), eqs. (6)-(11) literally) clips the mini-batch "
                     "gradient as a whole and adds N(0, C^2 sigma^2) to it: Theorem 1's sampled-Gaussian "
                     "analysis (eqs. (13)-(14)) assumes per-example clipping, so the recorded epsilon is the "
                     "paper's claim, not a proven guarantee; use variant v2")
    elif setting["g1"] == "hessian":
        notes.append("g1 = hessian (DP-PFL (Wei et al. 2023), eq. (10)): the query batch's Hessian lets "
                     "query records into the outer step outside the sampled Gaussian mechanism, which "
                     "Theorem 1 (eq. (12)) does not cover; g1 = first_order keeps the guarantee")
    views = (View("inner", "steps", stage="inner", sample_rate=q_in, hidden_sampling=True,
                  releases_per_round=tau0, group="local", hidden_scope="participants"),
             View("outer", "steps", stage="outer", sample_rate=q_out, hidden_sampling=True,
                  releases_per_round=tau0, group="local", hidden_scope="participants"))
    return NoisePlan(rounds=rounds, num_clients=U,
                     sigma={"inner": np.full(rounds, C * sigma), "outer": np.full(rounds, C * sigma_out)},
                     sensitivity={"inner": float(C), "outer": float(C)}, eps=eps, delta=delta, views=views,
                     budget_accountant="tight" if noise_method == "tight" else "paper",
                     paper_accountant="rdp",
                     source=source, notes=tuple(notes), orders=tuple(orders),
                     info={"noise_multiplier": sigma, "noise_multiplier_outer": sigma_out,
                           "sigma_ratio": ratio,
                           "sigma_inner": C * sigma, "sigma_outer": C * sigma_out,
                           "eps_theorem1": eps_paper, "alpha_opt": alpha, "eps_rdp_inner": float(inner[0]),
                           "eps_rdp_outer": float(outer[0]),
                           "inner_share": float(inner[0] / (inner[0] + outer[0]))})


def target_clients(setting: Mapping[str, Any], train: Mapping[str, Any]):
    """The ``[dppfl] K`` target clients from the held-out split (module docstring), or None for ``K = 0``."""
    import torch

    from fedbound.training.data import load_dataset
    from fedbound.training.federation import ClientData
    from fedbound.training.noise import Streams
    from fedbound.training.partitions import classes_per_client, iid

    K = setting["targets"]
    if not K:
        return None
    ds = load_dataset(train["dataset"], data_path=train["data_path"], test_fraction=train["test_fraction"],
                      seed=train["seed"], synthetic_samples=train["synthetic_samples"],
                      synthetic_dim=train["synthetic_dim"])
    if not len(ds.y_test):
        raise ConfigError(f"[dppfl] targets = {K} target clients need held-out data: set [train] "
                          f"test_fraction > 0")
    rng = Streams(train["seed"]).numpy("targets")
    try:
        if train["partition"] == "classes":
            per_class = setting["target_samples_per_class"] or train["samples_per_class"]
            parts = classes_per_client(ds.y_test, K, train["classes_per_client"], per_class, rng)
        else:
            parts = iid(len(ds.y_test), K, rng)
    except ConfigError as exc:
        raise ConfigError(f"[dppfl] targets = {K} target clients from the {len(ds.y_test)} held-out "
                          f"samples: {exc} "
                          "(target_samples_per_class)") from exc
    dtype = torch.float64 if train["dtype"] == "float64" else torch.float32
    return ClientData.from_partition(ds.x_test, ds.y_test, parts, dtype=dtype)


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.dppfl import DPPFL

    return DPPFL.from_config(setting, train, rounds, targets=target_clients(setting, train))


RECIPE = Recipe(
    section=DPPFL_SECTION,
    num_clients=lambda setting: int(setting["N"]),
    plan=lambda setting, train, sizes, rounds: dppfl_plan(setting, sizes, rounds, train["noise"]),
    algorithm=_algorithm,
    summary=lambda setting: {"variant": setting["variant"], "g1": setting["g1"],
                             "target_clients": setting["targets"],
                             "sigma_ratio": setting["sigma_ratio"], "split": setting["split"]},
    doc="DP-PFL / RDP-PFL (Wei et al. 2023): MAML-style personalised FL with Renyi DP in both local stages",
)
