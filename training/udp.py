"""UDP: user-level DP federated learning (UDP, Algorithm 1; spec 003 Sec. 5.1), with CRD,
communication-rounds discounting (UDP, Algorithm 2; spec 003 Sec. 5.2).

What differs from FedAvg:

* participation: a uniform ``K``-subset of the ``U`` clients every round (``q = K/U``);
* local update: one full-batch gradient step with every per-sample gradient clipped to ``C``
  (``w - eta * mean_b clip_C(g_b)``, the setting of the sensitivity ``2 eta C / |D_i|``, eq. (13));
  ``local_steps > 1`` is allowed, but eq. (13) then no longer bounds the sensitivity (spec 003 E8; the
  noise plan multiplies it by ``local_steps`` and warns);
* upload: the local model plus ``N(0, sigma_i^2 I)`` (stage ``"uplink"``, per-client sigma);
* aggregation: ``p_i = |D_i| / sum_{j in S_t} |D_j|``, renormalised over the selected clients (spec 003 E14).

CRD (``crd=``: a policy object, given as data; ``fedbound.scheduling.crd.CRDPolicy`` is the one recipes
pass, and nothing here imports it): after round ``t`` the server compares the validation loss ``V`` (the
held-out test loss of the new global model; the training loss without a test set; the paper averages the
clients' local test losses) with the previous one and asks ``crd.next_T(T, t, V_prev, V_new)`` for the T
in force next (Alg. 2: ``floor(beta (T - t)) + t`` when ``V_prev - V_new < zeta``).  Every later round uses
``crd.sigma(t, T, Phi_i, sum_{tau < t} sigma_i^{-2})`` (Theorem 4, eq. (25)), where ``Phi_i`` is the total
inverse variance of client ``i``'s initial plan, so the paper's accountant never exceeds the budget.  An
exhausted budget (``PrivacyBudgetExceeded`` from the policy) ends training (never a reused sigma).  Every
client's sigma follows the broadcast ``T``, selected or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import torch

from fedbound.errors import ConfigError, ParameterError, PrivacyBudgetExceeded
from fedbound.training.engine import Algorithm, RoundContext
from fedbound.training.federation import ClientBatch
from fedbound.training.local import LocalSGD
from fedbound.training.metrics import evaluate_clients, evaluate_test
from fedbound.training.participation import uniform_subset
from fedbound.training.plan import NoisePlan

__all__ = ["UDP", "CRDRule"]


class CRDRule(Protocol):
    """What the simulator needs from a CRD policy (UDP Alg. 2, Theorem 4)."""

    def next_T(self, T: int, t: int, v_prev: float, v_new: float) -> int: ...

    def sigma(self, t: int, T: int, phi: Any, inverse_variance_spent: Any) -> Any: ...


class UDP(Algorithm):
    """UDP Alg. 1 (and Alg. 2 with ``crd``)."""

    name = "udp"
    local_update_is_plain = True  # the default LocalSGD step, anchored at the received model

    def __init__(
        self,
        rounds: int,
        clip_norm: float,
        lr: float,
        clients_per_round: int,
        local_steps: int = 1,
        crd: CRDRule | None = None,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(
            rounds, LocalSGD(steps=local_steps, lr=lr, per_sample_clip=clip_norm, weight_decay=weight_decay)
        )
        self.clients_per_round = clients_per_round
        self.crd = crd
        self.weight_decay = weight_decay

    @classmethod
    def from_config(
        cls, setting: Mapping[str, Any], train: Mapping[str, Any], rounds: int, crd: CRDRule | None = None
    ) -> UDP:
        """From the [udp] setting (N, K, eta, C), [train] (local_steps, weight_decay) and a CRD policy.

        The learning rate is [udp] eta (it sets the sensitivity, eq. (13)); the local step is full-batch.
        """
        if train["lr"] is not None and train["lr"] != setting["eta"]:
            raise ConfigError(
                f"[train] lr = {train['lr']} differs from [udp] eta = {setting['eta']}: UDP's "
                "learning rate is eta (it sets the sensitivity 2 eta C / |D_i|); drop [train] "
                "lr"
            )
        if train["batch_size"]:
            raise ConfigError(
                "[train] batch_size must be 0 for UDP: its sensitivity (UDP eq. (13)) "
                "is for full-batch local steps"
            )
        return cls(
            rounds,
            setting["C"],
            setting["eta"],
            setting["K"] or setting["N"],
            train["local_steps"],
            crd,
            train["weight_decay"],
        )

    def participants(self, ctx: RoundContext) -> np.ndarray:
        return uniform_subset(ctx.rng("participation"), ctx.num_clients, self.clients_per_round)

    def local_update(
        self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor, batch: ClientBatch
    ) -> torch.Tensor:
        return self.local.run(
            ctx.model,
            start,
            batch,
            streams=ctx.streams,
            round_=ctx.round,
            clients=clients,
            num_clients=ctx.num_clients,
        )

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
        return {
            "phi": (1.0 / sigma**2).sum(axis=0),
            "inv_var_spent": np.zeros(ctx.num_clients),
            "v_prev": self._validation_loss(ctx, ctx.global_params),
            "discounts": [],
        }

    def end_of_round(self, ctx: RoundContext, metrics: Mapping[str, Any]) -> NoisePlan | None:
        if self.crd is None or ctx.plan is None:
            return None
        st, t = ctx.algo_state, ctx.round
        used = ctx.plan.stage_sigma("uplink", t)
        st["inv_var_spent"] = st["inv_var_spent"] + 1.0 / used**2
        v_new = self._validation_loss(ctx, ctx.global_params)
        total = ctx.state.rounds
        decided = int(self.crd.next_T(total, t, st["v_prev"], v_new))
        if decided != total:
            total = max(decided, t + 1)
            st["discounts"].append((t + 1, total))
        st["v_prev"] = v_new
        remaining = total - (t + 1)
        future = None
        if remaining > 0:
            try:
                future = np.asarray(self.crd.sigma(t + 1, total, st["phi"], st["inv_var_spent"]), dtype=float)
            except PrivacyBudgetExceeded:
                total, remaining = t + 1, 0
        ctx.state.rounds = total
        if remaining <= 0:
            return ctx.plan
        sigma = ctx.plan.stage_matrix("uplink")[: t + 1]
        sigma = np.vstack([sigma, np.tile(future, (remaining, 1))])
        return ctx.plan.with_sigma("uplink", sigma, rounds=total)
