"""Central DP-FedAvg's server side on Flower: Flower's ``DifferentialPrivacyServerSideFixedClipping``
around Flower's ``FedAvg``, held to fedbound's plan (McMahan et al. 2018, Algorithm 1;
:mod:`fedbound.deploy.dpfedavg`).

The ServerApp (:mod:`fedbound.deploy.flower_server`) runs the round as for every mechanism and hands the
checked replies to :func:`aggregate`, which makes the four guarantees of the plan hold around Flower's code:

(a) *sampling*: the participants are the engine's (``DPFedAvg.participants``: exactly K of N, uniformly
    without replacement, from the run's seeded stream), not Flower's ``int(fraction * N)`` sample, and the
    wrapper's ``num_sampled_clients`` is that K;
(b) *uniform weights*: Flower's FedAvg weights by ``num-examples``; here it weights by a key every reply
    carries as 1.0 (``fedbound-uniform-weight``), so the average is ``(1/K) sum_i``, the sensitivity 2C/K
    of the plan;
(c) *no silent under-noising*: a round with fewer than K replies never reaches the wrapper (the ServerApp
    refuses it: Flower would average fewer updates with the noise calibrated for K); and the std the
    wrapper adds, ``z C / K`` with ``z = sigma K / C``, is checked against the plan's sigma;
(d) *accounting*: the ledger counts the round from the plan (the ServerApp's Runner), after the wrapper
    added the noise; a round the budget cannot afford is never sent.

The clients clip their update as in fedbound's simulator (the ``upload`` hook); the wrapper clips the
received updates again to C on the server, a no-op for an honest client and what bounds the sensitivity
when a client does not clip.  Flower draws the noise from numpy's global RNG: :func:`aggregate` seeds it
for each round from the run seed and the round (``SeedSequence([seed, round, 0xDF])``) and restores its
state afterwards, so a repeated (refused, then resumed) round adds the same noise: it releases nothing new.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["WEIGHT_KEY", "flower_strategy", "aggregate"]

WEIGHT_KEY = "fedbound-uniform-weight"


def flower_strategy(sigma: float, clip_norm: float, k: int) -> Any:
    """Flower's server-side fixed clipping wrapper around FedAvg with ``z = sigma K / C``, clipping norm C
    and K sampled clients, FedAvg weighting by :data:`WEIGHT_KEY`."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg

    return DifferentialPrivacyServerSideFixedClipping(FedAvg(weighted_by_key=WEIGHT_KEY),
                                                      noise_multiplier=sigma * k / clip_norm,
                                                      clipping_norm=clip_norm, num_sampled_clients=k)


def aggregate(runner: Any, replies: list[Any]) -> None:
    """The round's noised average through Flower's wrapper, into ``runner.aggregate`` (module docstring);
    the engine's own server noise is switched off for this run (``DPFedAvg.server_noise``)."""
    from flwr.app import ArrayRecord
    from flwr.supercore.differential_privacy import compute_stdv

    from fedbound.deploy.flower_server import RoundRefused

    ctx, algorithm, plan = runner.ctx, runner.algorithm, runner.state.plan
    algorithm.server_noise = False
    k, clip = len(ctx.participants), algorithm.clip_norm
    if len(replies) != k or k != algorithm.clients_per_round:
        raise RoundRefused(f"round {ctx.round + 1}: {len(replies)} replies for K = "
                            f"{algorithm.clients_per_round} sampled clients: refused")
    sigma = float(plan.stage_sigma("server", ctx.round)[0]) if plan is not None else 0.0
    strategy = flower_strategy(sigma, clip, k) if sigma > 0 else None
    if strategy is not None:
        added = float(compute_stdv(strategy.noise_multiplier, clip, k))
        if not np.isclose(added, sigma, rtol=1e-9, atol=0.0):
            raise RoundRefused(f"round {ctx.round + 1}: Flower's wrapper would add std {added:g}, the plan "
                                f"says sigma = {sigma:g}: refused")
    start = ctx.global_params.detach().cpu().numpy()
    for reply in replies:
        reply.content["metrics"][WEIGHT_KEY] = 1.0
    if strategy is None:  # not private: Flower's FedAvg alone, uniform weights
        from flwr.serverapp.strategy import FedAvg

        arrays, _ = FedAvg(weighted_by_key=WEIGHT_KEY).aggregate_train(ctx.round + 1, replies)
        noised, added = arrays.to_numpy_ndarrays()[0], 0.0
    else:
        strategy.current_arrays = ArrayRecord([start])
        state = np.random.get_state()
        np.random.seed(np.random.SeedSequence([runner.options.seed, ctx.round, 0xDF]).generate_state(1)[0])
        try:
            arrays, _ = strategy.aggregate_train(ctx.round + 1, replies)
        finally:
            np.random.set_state(state)
        noised = arrays.to_numpy_ndarrays()[0]
        clipped = [r.content["arrays"].to_numpy_ndarrays()[0].astype(np.float64) for r in replies]
        ctx.log("noise_std_measured", float(np.std(noised - np.mean(clipped, axis=0))))
    ctx.noise_std.setdefault("server", []).append(added)
    runner.aggregate = torch.as_tensor(np.asarray(noised), dtype=runner.options.dtype, device=runner.device)
