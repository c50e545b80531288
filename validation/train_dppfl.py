"""``fedbound train dppfl``: seed 000's noise plan (Theorem 1) and the DP-PFL algorithm (recipe for
validation.runner).

Theorem 1 (seed 000 eq. (12)) and sigma* live in ``fedbound.bounds.dppfl`` (Opacus' 151 orders, spec 000
Sec. 3.4 / E7).

The plan: stages ``"inner"`` and ``"outer"`` with noise std ``C sigma*`` on a sum of per-example terms of
norm <= C (sensitivity C), every local step; two ``"steps"`` views (``tau0`` releases per round each,
records Poisson-sampled at ``q_in`` / ``q_out`` inside each client, the sample hidden from the adversary:
``hidden_scope="participants"``) in one group ``"local"``: the adversary sees every noised local step of a
client, which covers the uploads (post-processing).  The paper's
accountant is RDP on :data:`OPACUS_ORDERS` (``paper_accountant="rdp"``, ``plan.orders``).  The ledger's
tight accountant is the same exact RDP for sampled stages (the two columns agree); at ``q = 1`` it composes
the Gaussian releases exactly (GDP), which is tighter than the paper.  ``noise="tight"``: at
``q_in = q_out = 1`` sigma is the exact calibration of ``2 T tau0`` Gaussian releases
(``calibrate_noise(..., method="analytic")``); otherwise it is the paper's sigma* (the exact RDP is the
tight accountant here).

Target clients (``[dppfl] K``) come from the held-out split (``[train] test_fraction``), partitioned like
the source clients (``partition = "classes"``: ``classes_per_client`` classes of
``target_samples_per_class`` samples each; otherwise an equal random split): seed 000 Sec. V-A's 40 % of
the clients that only evaluate fast adaptation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fedbound.bounds.dppfl import OPACUS_ORDERS, rdp_pfl_epsilon, rdp_pfl_noise_multiplier, rdp_pfl_rdp
from fedbound.config import Field, Section
from fedbound.errors import ConfigError
from fedbound.validation.runner import Recipe

__all__ = ["DPPFL_SECTION", "dppfl_plan", "target_clients", "RECIPE"]

DPPFL_SECTION = Section("dppfl", (
    Field("U", int, doc="source clients (trained; all take part every round)", low=1),
    Field("K", int, 0, "target clients (fast-adaptation evaluation only), drawn from the held-out split",
          low=0),
    Field("T", int, doc="communication rounds", low=1),
    Field("tau0", int, 1, "local epochs per round, each one inner and one outer DP step", low=1),
    Field("eta", float, 0.01, "inner (adaptation) learning rate; also the targets' adaptation step (eq. (4))",
          low=0.0, low_open=True),
    Field("beta", float, 0.01, "outer (meta) learning rate", low=0.0, low_open=True),
    Field("C", float, 2.4, "clipping threshold: inner gradients to C, each outer factor to sqrt(C)",
          low=0.0, low_open=True),
    Field("eps", float, doc="each client's sample-level privacy budget epsilon", low=0.0, low_open=True),
    Field("delta", float, 1e-3, "each client's delta", low=0.0, high=1.0, low_open=True, high_open=True),
    Field("q_in", float, 0.1, "Poisson sampling rate of the query set (inner stage), q^Q", low=0.0, high=1.0,
          low_open=True),
    Field("q_out", float, 0.1, "Poisson sampling rate of the support set (outer stage), q^S", low=0.0,
          high=1.0, low_open=True),
    Field("variant", str, "v2", "v2: per-example clipping, DP-SGD normalisation (Theorem 1 holds); v1: the "
          "paper's eqs. (6)-(11) literally (batch clipping)", choices=("v2", "v1")),
    Field("g1", str, "first_order", "outer factor g1: first_order (I, spec option (c)) or hessian "
          "(I - eta grad^2 F on the query batch, eq. (10), option (a))", choices=("first_order", "hessian")),
    Field("query_fraction", float, 0.5, "share of each client's data in its query set (paper: 50 %)",
          low=0.0, high=1.0, low_open=True, high_open=True),
    Field("power_iterations", int, 10, "g1 = hessian: power-method steps for ||grad^2 F||_2 in the clip "
          "of g1", low=1),
    Field("target_samples_per_class", int, None, "partition = classes: samples per class of a target client "
          "(default: [train] samples_per_class)", low=1, optional=True),
), doc="DP-PFL / RDP-PFL setting (seed 000, spec 000 notation)")


def dppfl_plan(setting: Mapping[str, Any], client_sizes: np.ndarray, rounds: int, noise: str = "paper"):
    """DP-PFL's noise plan (module docstring) for ``rounds`` rounds and ``len(client_sizes) = U`` clients."""
    from fedbound.accounting import calibrate_noise
    from fedbound.training.plan import NoisePlan, View

    U, tau0, C, eps, delta = (setting[k] for k in ("U", "tau0", "C", "eps", "delta"))
    q_in, q_out = setting["q_in"], setting["q_out"]
    if len(client_sizes) != U:
        raise ConfigError(f"[dppfl] U = {U} but the partition made {len(client_sizes)} clients")
    exact = noise == "tight" and q_in == 1.0 and q_out == 1.0
    if exact:
        sigma = float(calibrate_noise(eps, delta, 1.0, 2 * rounds * tau0, method="analytic"))
        source = ("exact calibration of the 2 T tau0 unsampled Gaussian releases (fedbound.accounting."
                  "calibrate_noise, analytic)")
    else:
        sigma = rdp_pfl_noise_multiplier(eps, delta, rounds, tau0, q_in, q_out)
        source = "seed 000 Theorem 1, eq. (12): RDP of both sampled Gaussian stages over T tau0 epochs"
    eps_paper, alpha = rdp_pfl_epsilon(rounds, tau0, q_in, sigma, q_out, sigma, delta)
    _, inner, outer = rdp_pfl_rdp(np.array([alpha]), rounds, tau0, q_in, sigma, q_out, sigma)
    notes = []
    if setting["variant"] == "v1":
        notes.append("variant v1 (seed 000 eqs. (6)-(11) literally) clips the mini-batch gradient as a whole "
                     "and adds N(0, C^2 sigma^2) to it: Theorem 1's sampled-Gaussian analysis assumes "
                     "per-example clipping (spec 000 E9), so the recorded epsilon is the paper's claim, "
                     "not a proven guarantee; use variant v2")
    elif setting["g1"] == "hessian":
        notes.append("g1 = hessian (eq. (10)): the query batch's Hessian lets query records into the outer "
                     "step outside the sampled Gaussian mechanism, which Theorem 1 does not cover (spec 000 "
                     "E8); g1 = first_order keeps the guarantee")
    views = (View("inner", "steps", stage="inner", sample_rate=q_in, hidden_sampling=True,
                  releases_per_round=tau0, group="local", hidden_scope="participants"),
             View("outer", "steps", stage="outer", sample_rate=q_out, hidden_sampling=True,
                  releases_per_round=tau0, group="local", hidden_scope="participants"))
    return NoisePlan(rounds=rounds, num_clients=U,
                     sigma={"inner": np.full(rounds, C * sigma), "outer": np.full(rounds, C * sigma)},
                     sensitivity={"inner": float(C), "outer": float(C)}, eps=eps, delta=delta, views=views,
                     budget_accountant="tight" if noise == "tight" else "paper", paper_accountant="rdp",
                     source=source, notes=tuple(notes), orders=tuple(OPACUS_ORDERS),
                     info={"noise_multiplier": sigma, "sigma_inner": C * sigma, "sigma_outer": C * sigma,
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

    K = setting["K"]
    if not K:
        return None
    ds = load_dataset(train["dataset"], data_path=train["data_path"], test_fraction=train["test_fraction"],
                      seed=train["seed"], synthetic_samples=train["synthetic_samples"],
                      synthetic_dim=train["synthetic_dim"])
    if not len(ds.y_test):
        raise ConfigError(f"[dppfl] K = {K} target clients need held-out data: set [train] test_fraction > 0")
    rng = Streams(train["seed"]).numpy("targets")
    try:
        if train["partition"] == "classes":
            per_class = setting["target_samples_per_class"] or train["samples_per_class"]
            parts = classes_per_client(ds.y_test, K, train["classes_per_client"], per_class, rng)
        else:
            parts = iid(len(ds.y_test), K, rng)
    except ConfigError as exc:
        raise ConfigError(f"[dppfl] K = {K} target clients from the {len(ds.y_test)} held-out samples: {exc} "
                          "(target_samples_per_class)") from exc
    dtype = torch.float64 if train["dtype"] == "float64" else torch.float32
    return ClientData.from_partition(ds.x_test, ds.y_test, parts, dtype=dtype)


def _algorithm(setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int):
    from fedbound.training.dppfl import DPPFL

    return DPPFL.from_config(setting, train, rounds, targets=target_clients(setting, train))


RECIPE = Recipe(
    section=DPPFL_SECTION,
    num_clients=lambda setting: int(setting["U"]),
    plan=lambda setting, train, sizes, rounds: dppfl_plan(setting, sizes, rounds, train["noise"]),
    algorithm=_algorithm,
    summary=lambda setting: {"variant": setting["variant"], "g1": setting["g1"],
                             "target_clients": setting["K"]},
    doc="DP-PFL / RDP-PFL (seed 000): MAML-style personalised FL with Renyi DP in both local stages",
)
