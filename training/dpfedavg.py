"""Central DP-FedAvg (McMahan, Ramage, Talwar & Zhang 2018, "Learning Differentially Private Recurrent
Language Models", Algorithm 1, with fixed-size client sampling and a flat clip): the engine's algorithm.

What differs from FedAvg:

* participation: a uniform ``K``-subset of the ``N`` clients each round, without replacement (all ``N``
  when ``K = N``);
* upload: the client's *update* ``Delta_i = w_i - w_global`` clipped to norm ``C``
  (``Delta_i / max(1, ||Delta_i|| / C)``), sent as ``w_global + clipped Delta_i``;
* aggregation: uniform weights ``1/K`` (not by sample counts: the sensitivity below needs them);
* server: ``w_global + (1/K) sum_i clipped Delta_i + N(0, sigma^2 I)`` (stage ``"server"``), sigma the
  std per coordinate of the noise on the averaged update.

The sigma comes from the noise plan (``fedbound.deploy.dpfedavg.dpfedavg_plan``).  ``server_noise = False``
leaves the noise to a deployment that adds it itself (``fedbound.deploy.flower_dpfedavg``: Flower's
``DifferentialPrivacyServerSideFixedClipping``).  The fraction of updates the clip changed is logged as
``clipped``; the std of the noise actually added to the aggregate as ``noise_std_measured``.
"""

from __future__ import annotations

import numpy as np
import torch

from fedbound.training.clipping import clip_rows
from fedbound.training.engine import Algorithm, RoundContext
from fedbound.training.local import LocalSGD
from fedbound.training.participation import all_clients, uniform_subset

__all__ = ["DPFedAvg"]


class DPFedAvg(Algorithm):
    """McMahan et al. 2018, Algorithm 1 (module docstring): clipped updates, uniform average, server noise."""

    name = "dpfedavg"

    def __init__(self, rounds: int, clip_norm: float, local: LocalSGD, clients_per_round: int) -> None:
        super().__init__(rounds, local)
        self.clip_norm = float(clip_norm)
        self.clients_per_round = int(clients_per_round)
        self.weight_decay = local.weight_decay
        self.server_noise = True

    def participants(self, ctx: RoundContext) -> np.ndarray:
        if self.clients_per_round >= ctx.num_clients:
            return all_clients(ctx.num_clients)
        return uniform_subset(ctx.rng("participation"), ctx.num_clients, self.clients_per_round)

    def aggregation_weights(self, ctx: RoundContext, participants: np.ndarray) -> np.ndarray:
        return np.full(len(participants), 1.0 / len(participants))

    def upload(self, ctx: RoundContext, clients: np.ndarray, local: torch.Tensor) -> torch.Tensor:
        start = ctx.global_params.unsqueeze(0)
        clipped, norms = clip_rows(local - start, self.clip_norm)
        ctx.log("clipped", float((norms > self.clip_norm).sum()))
        return start + clipped

    def server_update(self, ctx: RoundContext, aggregate: torch.Tensor) -> torch.Tensor:
        if not self.server_noise:
            return aggregate
        noised = ctx.add_noise("server", aggregate)
        ctx.log("noise_std_measured", float((noised - aggregate).double().std()))
        return noised
