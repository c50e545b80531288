"""UDP: user-level DP federated learning (seed 003, Algorithm 1; spec 003 Sec. 5.1), with CRD,
communication-rounds discounting (seed 003, Algorithm 2; spec 003 Sec. 5.2).

What differs from FedAvg:

* participation: a uniform ``K``-subset of the ``U`` clients every round (``q = K/U``);
* local update: one full-batch gradient step with every per-sample gradient clipped to ``C``
  (``w - eta * mean_b clip_C(g_b)``, the setting of the sensitivity ``2 eta C / |D_i|``, eq. (13));
  ``local_steps > 1`` is allowed, but eq. (13) then no longer bounds the sensitivity (spec 003 E8; the
  noise plan multiplies it by ``local_steps`` and warns);
* upload: the local model plus ``N(0, sigma_i^2 I)`` (stage ``"uplink"``, per-client sigma);
* aggregation: ``p_i = |D_i| / sum_{j in S_t} |D_j|``, renormalised over the selected clients (spec 003 E14).

CRD (``crd=CRDSettings(beta, zeta)``): after round ``t`` the server compares the validation loss ``V``
(the held-out test loss of the new global model; the training loss without a test set; the paper averages
the clients' local test losses) with the previous one; if ``V_prev - V_new < zeta`` it sets
``T <- floor(beta (T - t)) + t`` (0-based ``t``; Alg. 2 line 13).  Every later round uses
``sigma_i^t = sqrt((T - t) / (Phi_i - sum_{tau < t} sigma_i^{-2}))`` (eq. (25)), where ``Phi_i`` is the
total inverse variance of client ``i``'s initial plan (eq. (25)'s ``eps^2 / (2 q Delta^2 ln(1/delta))``
for the paper's calibration), so the paper's accountant never exceeds the budget.  An exhausted budget
ends training (spec 003 E17).  Every client's sigma follows the broadcast ``T`` (spec 003 E16).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError, ParameterError
from fedbound.training.engine import Algorithm, RoundContext
from fedbound.training.federation import ClientBatch
from fedbound.training.local import LocalSGD
from fedbound.training.metrics import evaluate_clients, evaluate_test
from fedbound.training.participation import uniform_subset
from fedbound.training.plan import NoisePlan

__all__ = ["UDP", "CRDSettings"]


@dataclass(frozen=True)
class CRDSettings:
    """Seed 003 Alg. 2: discount factor ``beta`` in (0, 1) and trigger threshold ``zeta`` > 0."""

    beta: float = 0.9
    zeta: float = 0.001

    def __post_init__(self) -> None:
        if not 0 < self.beta < 1:
            raise ParameterError("beta", self.beta, "(0, 1)")
        if not self.zeta > 0:
            raise ParameterError("zeta", self.zeta, "(0, inf)")


class UDP(Algorithm):
    """Seed 003 Alg. 1 (and Alg. 2 with ``crd``)."""

    name = "udp"

    def __init__(self, rounds: int, clip_norm: float, lr: float, clients_per_round: int, local_steps: int = 1,
                 crd: CRDSettings | None = None, weight_decay: float = 0.0) -> None:
        super().__init__(rounds, LocalSGD(steps=local_steps, lr=lr, per_sample_clip=clip_norm,
                                          weight_decay=weight_decay))
        self.clients_per_round = clients_per_round
        self.crd = crd
        self.weight_decay = weight_decay

    @classmethod
    def from_config(cls, setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int) -> UDP:
        """From the [udp] setting (U, K, eta, C, crd, beta, zeta) and [train] (local_steps, weight_decay).

        The learning rate is [udp] eta (it sets the sensitivity, eq. (13)); the local step is full-batch.
        """
        if train["lr"] is not None and train["lr"] != setting["eta"]:
            raise ConfigError(f"[train] lr = {train['lr']} differs from [udp] eta = {setting['eta']}: UDP's "
                              "learning rate is eta (it sets the sensitivity 2 eta C / |D_i|); drop [train] "
                              "lr")
        if train["batch_size"]:
            raise ConfigError("[train] batch_size must be 0 for UDP: its sensitivity (seed 003 eq. (13)) "
                              "is for full-batch local steps")
        crd = CRDSettings(setting["beta"], setting["zeta"]) if setting["crd"] else None
        return cls(rounds, setting["C"], setting["eta"], setting["K"] or setting["U"], train["local_steps"],
                   crd, train["weight_decay"])

    def participants(self, ctx: RoundContext) -> np.ndarray:
        return uniform_subset(ctx.rng("participation"), ctx.num_clients, self.clients_per_round)

    def local_update(self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor,
                     batch: ClientBatch) -> torch.Tensor:
        return self.local.run(ctx.model, start, batch, streams=ctx.streams, round_=ctx.round, clients=clients,
                              num_clients=ctx.num_clients)

    def upload(self, ctx: RoundContext, clients: np.ndarray, local: torch.Tensor) -> torch.Tensor:
        return ctx.add_noise("uplink", local, clients)

    # --- CRD ---------------------------------------------------------------------------------------------
    def _validation_loss(self, ctx: RoundContext, params: torch.Tensor) -> float:
        if ctx.test is not None:
            return evaluate_test(ctx.model, params.unsqueeze(0), ctx.test)[0]
        loss, _ = evaluate_clients(ctx.model, params.unsqueeze(0), ctx.data)
        return float(ctx.data.sizes @ loss / ctx.data.sizes.sum())

    def init_algo_state(self, ctx: RoundContext) -> dict[str, Any]:
        if self.crd is None or ctx.plan is None:
            return {}
        sigma = ctx.plan.stage_matrix("uplink")
        if np.any(sigma <= 0):
            raise ParameterError("uplink sigma", float(sigma.min()), "(0, inf) for CRD")
        return {"phi": (1.0 / sigma**2).sum(axis=0), "inv_var_spent": np.zeros(ctx.num_clients),
                "v_prev": self._validation_loss(ctx, ctx.global_params), "discounts": []}

    def end_of_round(self, ctx: RoundContext, metrics: Mapping[str, Any]) -> NoisePlan | None:
        if self.crd is None or ctx.plan is None:
            return None
        st, t = ctx.algo_state, ctx.round
        used = ctx.plan.stage_sigma("uplink", t)
        st["inv_var_spent"] = st["inv_var_spent"] + 1.0 / used**2
        v_new = self._validation_loss(ctx, ctx.global_params)
        total = ctx.state.rounds
        if st["v_prev"] - v_new < self.crd.zeta:
            total = max(math.floor(self.crd.beta * (total - t)) + t, t + 1)
            st["discounts"].append((t + 1, total))
        st["v_prev"] = v_new
        left = st["phi"] - st["inv_var_spent"]
        remaining = total - (t + 1)
        if remaining > 0 and np.any(left <= 0):
            total, remaining = t + 1, 0
        ctx.state.rounds = total
        if remaining <= 0:
            return ctx.plan
        future = np.sqrt(remaining / left)
        sigma = ctx.plan.stage_matrix("uplink")[: t + 1]
        sigma = np.vstack([sigma, np.tile(future, (remaining, 1))])
        return ctx.plan.with_sigma("uplink", sigma, rounds=total)
