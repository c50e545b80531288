"""NbAFL: noise before model aggregation (NbAFL, Algorithm 1; spec 002 Sec. 5.1) and its K-client
random scheduling variant (NbAFL Sec. V; spec 002 Sec. 5.2).

What differs from FedAvg:

* participation: all ``N`` clients, or a uniform ``K``-subset each round (``clients_per_round``);
* local update: ``local_steps`` gradient steps on ``F_i(w) + mu/2 ||w - w_tilde||^2`` started from and
  anchored at the received ``w_tilde`` (spec 002 E16: the paper's ``w^(t-1)`` is not known to clients);
* upload: the *whole* model vector clipped to norm ``C`` (``w / max(1, ||w|| / C)``), then uplink noise
  ``N(0, sigma_U^2 I)`` (stage ``"uplink"``);
* aggregation: ``p_i = |D_i| / sum_j |D_j|`` over the participants (``1/N``, or ``1/K`` under scheduling);
* server: ``w_tilde = sum_i p_i w_i + N(0, sigma_D^2 I)`` (stage ``"server"``; ``sigma_D = 0`` when
  ``T <= L sqrt(N)``).

The sigma's come from the noise plan (``fedbound.validation.recipes.nbafl.nbafl_plan``: F10, F11, F27).
The fraction of uploads that the clipping changed is logged as ``clipped_fraction``.
With ``sensitivity = "provable"`` local training clips every per-sample gradient to ``C_g`` (the plan then
uses the provable sensitivity of ``fedbound.bounds.provable``); its premises are checked before round 1
(``fedbound.training.sensitivity.check_provable_step``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from fedbound.training.clipping import clip_rows
from fedbound.training.engine import Algorithm, RoundContext
from fedbound.training.federation import ClientBatch
from fedbound.training.local import LocalSGD
from fedbound.training.participation import all_clients, uniform_subset
from fedbound.training.sensitivity import check_provable_step

__all__ = ["NbAFL", "provable_clip", "provable_feature_clip"]


def provable_clip(setting: Mapping[str, Any]) -> float | None:
    """The per-sample gradient clip ``C_g`` when the setting asks for ``sensitivity = "provable"``."""
    return float(setting["C_g"]) if setting.get("sensitivity") == "provable" else None


def provable_feature_clip(setting: Mapping[str, Any]) -> float | None:
    """The declared input-norm bound ``feature_norm`` (inputs clipped to it) in provable mode."""
    given = setting.get("feature_norm") if provable_clip(setting) is not None else None
    return None if given is None else float(given)


class NbAFL(Algorithm):
    """NbAFL Alg. 1 with optional K-of-N scheduling; ``local.prox_mu`` is the paper's mu."""

    name = "nbafl"
    local_update_is_plain = True  # the default LocalSGD step, anchored at the received model

    sensitivity_probe = True
    """Clips the model, not per-sample gradients: ``fedbound train`` probes the measured sensitivity."""

    def __init__(self, rounds: int, clip_norm: float, local: LocalSGD, clients_per_round: int | None = None,
                 provable: bool = False) -> None:
        super().__init__(rounds, local)
        self.clip_norm = float(clip_norm)
        self.clients_per_round = clients_per_round
        self.weight_decay = local.weight_decay
        self.provable = bool(provable)

    @classmethod
    def from_config(cls, setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int) -> NbAFL:
        """From the [nbafl] setting (C, mu, K; ``sensitivity = "provable"``: per-sample clip C_g) and [train]
        (local_steps, lr: default the paper's 0.002)."""
        from fedbound.training.config import local_sgd

        return cls(rounds, setting["C"], local_sgd(train, 0.002, prox_mu=setting["mu"],
                                                   per_sample_clip=provable_clip(setting),
                                                   feature_clip=provable_feature_clip(setting)),
                   setting.get("K"), provable=provable_clip(setting) is not None)

    def init_algo_state(self, ctx: RoundContext) -> dict[str, Any]:
        if self.provable:
            check_provable_step(ctx.model, self.local)
        return {}

    def participants(self, ctx: RoundContext) -> np.ndarray:
        k = self.clients_per_round
        if k is None or k >= ctx.num_clients:
            return all_clients(ctx.num_clients)
        return uniform_subset(ctx.rng("participation"), ctx.num_clients, k)

    def local_update(self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor,
                     batch: ClientBatch) -> torch.Tensor:
        return self.local.run(ctx.model, start, batch, streams=ctx.streams, round_=ctx.round, clients=clients,
                              num_clients=ctx.num_clients, anchor=start)

    def upload(self, ctx: RoundContext, clients: np.ndarray, local: torch.Tensor) -> torch.Tensor:
        clipped, norms = clip_rows(local, self.clip_norm)
        ctx.log("clipped", float((norms > self.clip_norm).sum()))
        return ctx.add_noise("uplink", clipped, clients)

    def server_update(self, ctx: RoundContext, aggregate: torch.Tensor) -> torch.Tensor:
        return ctx.add_noise("server", aggregate)
