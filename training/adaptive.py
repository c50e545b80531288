"""PADPFL: personalized, possibly adaptive impact factors with client- and server-side DP (PADPFL,
Sec. III-V; spec 001 Sec. 5), including the time-varying impact factors of Sec. V (spec 001 Sec. 3.11).

It is NbAFL (Wei et al. 2020, ``nbafl.py``) with non-uniform aggregation weights; what differs:

* aggregation: the server's impact factors ``p^(t)`` (PADPFL eq. (3)), given as data: one simplex vector
  per round (``(N,)`` for fixed p, ``(T, N)`` for an adaptive schedule, e.g. scenario 4's switch
  ``(0, 1/60, 1/30) -> (1/30, 1/60, 0)`` per part after round 10); rounds past the schedule keep its
  last row, as the noise plan keeps its last sigma;
* participation: the clients with ``p_i^(t) > 0``; a client with ``p_i^(t) = 0`` neither trains nor uploads
  in round ``t`` (spec 001 Sec. 5);
* noise: the plan's per-round server std ``sigma_S^(t)`` (Theorem 1, F19 evaluated with the round's p,
  spec 001 E25) on the aggregate; ``sigma_C`` (F12) on every upload, the same for all clients;
* ``data_schedule`` (optional): client data that changes between phases, ``(first_round, ClientData)``
  pairs with 0-based first rounds (scenario 4: the parts' image quality swaps after round 10).  Clients
  train on the latest phase's data; the metrics are computed on the engine's data.

Unchanged (inherited from :class:`~fedbound.training.nbafl.NbAFL`): the FedProx local solve anchored at the
received model, whole-model clipping to ``B`` (NbAFL's ``C``) followed by the uplink noise, and the server
noise stage.  The privacy ledger needs nothing new: the broadcast view's sensitivity is
``max_i p_i Delta_i`` over the round's actual weights, i.e. F14's ``2 B max_i p_i^(t) / min_i m_i``.

Logged per round: ``p_max`` (``max_i p_i^(t)``), ``sigma_aggregated_client`` (``sigma_AC``, F16:
``sqrt(sum_i p_i^2 sigma_C^2)``) and ``impact_change`` (``||alpha^(t-1)||_1 = ||p^(t) - p^(t-1)||_1``,
eq. (51); 0 in the first round), ``gamma_inexact`` (the mean over the round's participants of the measured
inexactness ``||grad h_i(x_i; x~)|| / ||grad l_i(x~)||`` of the local solve, Lemma 2's gamma, eq. (38); one
extra full-batch gradient at each end of the solve) and ``gamma_inexact_above_1`` (clients whose solve did not
even reach gamma = 1).  The global row's ``sigma`` is the effective broadcast std (F21).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError, ParameterError
from fedbound.training.engine import RoundContext
from fedbound.training.federation import ClientBatch, ClientData
from fedbound.training.grads import batch_gradient
from fedbound.training.local import LocalSGD
from fedbound.training.nbafl import NbAFL, provable_clip, provable_feature_clip

__all__ = ["PADPFL", "check_impact_factors", "inexactness"]

SIMPLEX_ATOL = 1e-9


def check_impact_factors(impact_factors: Any) -> np.ndarray:
    """``impact_factors`` as a read-only ``(rounds, N)`` array whose rows lie on the simplex (PADPFL
    eq. (2), spec 001 F2: ``0 <= p_i <= 1``, ``sum_i p_i = 1`` to within 1e-9); ParameterError otherwise."""
    p = np.array(impact_factors, dtype=np.float64)
    if p.ndim == 1:
        p = p[None, :]
    if p.ndim != 2 or p.size == 0:
        raise ParameterError("impact_factors shape", p.shape, "(N,) or (rounds, N), non-empty")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ParameterError("impact_factors", p, "values in [0, 1] (PADPFL eq. (2))")
    sums = p.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > SIMPLEX_ATOL)
    if len(bad):
        raise ParameterError(
            f"sum of impact_factors in round {int(bad[0]) + 1}",
            float(sums[bad[0]]),
            "1 (to within 1e-9; PADPFL eq. (2))",
        )
    p.setflags(write=False)
    return p


class PADPFL(NbAFL):
    """PADPFL's: NbAFL with the impact factors ``p^(t)`` as aggregation weights (module docstring).

    ``local.prox_mu`` is the paper's mu; ``clip_norm`` its B.
    """

    name = "adaptive"

    def __init__(
        self,
        rounds: int,
        clip_norm: float,
        local: LocalSGD,
        impact_factors: Any,
        data_schedule: Sequence[tuple[int, ClientData]] = (),
        measure_gamma: bool = True,
    ) -> None:
        super().__init__(rounds, clip_norm, local)
        self.measure_gamma = bool(measure_gamma)
        self.impact_factors = check_impact_factors(impact_factors)
        schedule = sorted(data_schedule, key=lambda entry: entry[0])
        firsts = [int(first) for first, _ in schedule]
        if any(f < 0 for f in firsts) or len(set(firsts)) != len(firsts):
            raise ParameterError("data_schedule first rounds", firsts, "distinct integers >= 0")
        self.data_schedule = tuple((int(first), data) for first, data in schedule)
        self._on_device: dict[tuple[int, str, torch.dtype], ClientData] = {}

    @classmethod
    def from_config(
        cls,
        setting: Mapping[str, Any],
        train: Mapping[str, Any],
        rounds: int,
        impact_factors: Any = None,
        data_schedule: Sequence[tuple[int, ClientData]] = (),
    ) -> PADPFL:
        """From the [adaptive] setting (C, the paper's B; mu; ``sensitivity = "provable"``: C_g), [train]
        (local_steps, lr: default the paper's
        0.02, PADPFL Sec. VI) and the impact-factor schedule (validation.train_adaptive)."""
        from fedbound.training.config import local_sgd

        if impact_factors is None:
            raise ParameterError("impact_factors", None, "an (N,) or (rounds, N) array on the simplex")
        clip = setting["C"] if setting.get("C") is not None else setting["B"]
        local = local_sgd(train, 0.02, prox_mu=setting["mu"], per_sample_clip=provable_clip(setting),
                          feature_clip=provable_feature_clip(setting))
        out = cls(rounds, clip, local, impact_factors, data_schedule)
        out.provable = provable_clip(setting) is not None
        return out

    def impact(self, round_: int) -> np.ndarray:
        """``p^(t)`` of round ``round_`` (0-based); past the schedule its last row."""
        return self.impact_factors[min(round_, len(self.impact_factors) - 1)]

    def _round_impact(self, ctx: RoundContext) -> np.ndarray:
        p = self.impact(ctx.round)
        if len(p) != ctx.num_clients:
            raise ConfigError(f"the impact factors are for {len(p)} clients, the data has {ctx.num_clients}")
        return p

    def participants(self, ctx: RoundContext) -> np.ndarray:
        return np.flatnonzero(self._round_impact(ctx) > 0)

    def aggregation_weights(self, ctx: RoundContext, participants: np.ndarray) -> np.ndarray:
        p = self._round_impact(ctx)
        weights = p[participants]
        sigma_c = ctx.sigma("uplink", participants).cpu().numpy().astype(np.float64)
        previous = self.impact(ctx.round - 1) if ctx.round > 0 else p
        ctx.log("p_max", float(p.max()))
        ctx.log("sigma_aggregated_client", float(np.sqrt(np.sum(weights**2 * sigma_c**2))))
        ctx.log("impact_change", float(np.abs(p - previous).sum()))
        return weights

    def _phase_data(self, ctx: RoundContext) -> ClientData | None:
        index = None
        for k, (first, _) in enumerate(self.data_schedule):
            if first <= ctx.round:
                index = k
        if index is None:
            return None
        key = (index, str(ctx.device), ctx.dtype)
        if key not in self._on_device:
            data = self.data_schedule[index][1]
            if not np.array_equal(data.sizes, ctx.data.sizes):
                raise ConfigError(
                    "data_schedule: a phase's client sizes differ from the run's; the "
                    "sensitivities 2B/m_i assume the same local datasets in every phase"
                )
            self._on_device[key] = data.to(ctx.device, ctx.dtype)
        return self._on_device[key]

    def local_update(
        self, ctx: RoundContext, clients: np.ndarray, start: torch.Tensor, batch: ClientBatch
    ) -> torch.Tensor:
        phase = self._phase_data(ctx)
        if phase is not None:
            batch = phase.gather(clients)
        local = super().local_update(ctx, clients, start, batch)
        if self.measure_gamma:
            ratio = inexactness(ctx.model, start, local, batch, self.local.prox_mu, self.local.weight_decay)
            participants = max(int(np.count_nonzero(self._round_impact(ctx) > 0)), 1)
            ctx.log("gamma_inexact", float(ratio.sum()) / participants)  # summed over chunks: the mean
            ctx.log("gamma_inexact_above_1", float((ratio > 1).sum()))
        return local


@torch.no_grad()
def inexactness(
    model: Any,
    anchor: torch.Tensor,
    local: torch.Tensor,
    batch: ClientBatch,
    mu: float,
    weight_decay: float = 0.0,
) -> torch.Tensor:
    """Measured gamma_i of each client's local solve: ``||grad h_i(x_i; x~)|| / ||grad l_i(x~)||`` on the
    client's full local data (PADPFL eq. (38), spec 001 F5: the solve is gamma-inexact for every gamma at
    least this).  ``h_i = l_i + mu/2 ||x - x~||^2`` (+ the weight decay in l_i when used)."""
    with torch.enable_grad():
        g_anchor = batch_gradient(model, anchor, batch.x, batch.y, batch.weight)
        g_local = batch_gradient(model, local, batch.x, batch.y, batch.weight)
    if weight_decay:
        g_anchor = g_anchor + weight_decay * anchor
        g_local = g_local + weight_decay * local
    g_h = g_local + mu * (local - anchor)
    denom = torch.linalg.vector_norm(g_anchor, dim=1)
    return (
        torch.linalg.vector_norm(g_h, dim=1) / torch.clamp(denom, min=torch.finfo(denom.dtype).tiny)
    ).cpu()
