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
when a client does not clip.

*Noise source.*  Flower's wrapper draws its noise with ``np.random.normal``, numpy's global Mersenne
Twister: predictable from a few outputs, shared with every library in the process, and (seeded per round
from the run seed, as fedbound did before) regenerable by every client.  :func:`flower_strategy` returns
:class:`SourcedFixedClipping`, the wrapper with one method replaced: ``_add_noise_to_aggregated_arrays``,
the one place Flower adds the noise, adds ``stdv * xi`` with Flower's own ``stdv = compute_stdv(z, C, K)``
and ``xi`` from fedbound's source: the server's OS CSPRNG
(:class:`~fedbound.training.secure_noise.SecureStreams`), or, in a reproducible simulation, the run seed's
stream ``("server", round)`` that ``fedbound train``'s DP-FedAvg draws.  Flower's clipping, averaging and
accounting run unchanged; numpy's global RNG is neither read nor reseeded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from fedbound.errors import ConfigError

__all__ = ["WEIGHT_KEY", "flower_strategy", "aggregate", "sourced_fixed_clipping"]

WEIGHT_KEY = "fedbound-uniform-weight"

NoiseDraw = Callable[[tuple[int, ...], np.dtype], np.ndarray]
"""``draw(shape, dtype)``: standard normal draws of ``shape`` as a numpy array of ``dtype``."""


@functools.cache
def sourced_fixed_clipping() -> type:
    """Flower's ``DifferentialPrivacyServerSideFixedClipping`` with its noise from a given source (module
    docstring); a ConfigError if the installed Flower no longer adds its noise in the method replaced."""
    from flwr.app import Array, ArrayRecord
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping
    from flwr.supercore.differential_privacy import compute_stdv

    if not callable(getattr(DifferentialPrivacyServerSideFixedClipping, "_add_noise_to_aggregated_arrays",
                            None)):  # pragma: no cover - a Flower outside the pinned 1.42
        raise ConfigError("this Flower's DifferentialPrivacyServerSideFixedClipping has no "
                          "_add_noise_to_aggregated_arrays: fedbound cannot give it a secure noise source; "
                          "install flwr 1.42 (pip install 'fedbound[flower]')")

    class SourcedFixedClipping(DifferentialPrivacyServerSideFixedClipping):
        """Flower's server-side fixed clipping, its noise ``stdv * draw(shape, dtype)``."""

        draw: NoiseDraw

        def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
            stdv = compute_stdv(self.noise_multiplier, self.clipping_norm, self.num_sampled_clients)
            noised = {}
            for key, value in zip(aggregated_arrays.keys(), aggregated_arrays.to_numpy_ndarrays(),
                                  strict=True):
                noise = self.draw(value.shape, value.dtype) * np.asarray(stdv, dtype=value.dtype)
                noised[key] = Array(np.asarray(value + noise, dtype=value.dtype))
            return ArrayRecord(noised)

    return SourcedFixedClipping


def flower_strategy(sigma: float, clip_norm: float, k: int, draw: NoiseDraw | None = None) -> Any:
    """Flower's server-side fixed clipping wrapper around FedAvg with ``z = sigma K / C``, clipping norm C
    and K sampled clients, FedAvg weighting by :data:`WEIGHT_KEY`; its noise from ``draw`` (default the OS
    CSPRNG, :func:`fedbound.training.secure_noise.secure_normal_numpy`)."""
    from flwr.serverapp.strategy import FedAvg

    from fedbound.training.secure_noise import secure_normal_numpy

    strategy = sourced_fixed_clipping()(FedAvg(weighted_by_key=WEIGHT_KEY),
                                        noise_multiplier=sigma * k / clip_norm, clipping_norm=clip_norm,
                                        num_sampled_clients=k)
    strategy.draw = draw if draw is not None else secure_normal_numpy
    return strategy


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

    def draw(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:  # the runner's streams: secure or seeded
        return ctx.noise("server", None, tuple(shape)).to(torch.float64).cpu().numpy()[0].astype(dtype)

    strategy = flower_strategy(sigma, clip, k, draw) if sigma > 0 else None
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
        arrays, _ = strategy.aggregate_train(ctx.round + 1, replies)
        noised = arrays.to_numpy_ndarrays()[0]
        clipped = [r.content["arrays"].to_numpy_ndarrays()[0].astype(np.float64) for r in replies]
        ctx.log("noise_std_measured", float(np.std(noised - np.mean(clipped, axis=0))))
    ctx.noise_std.setdefault("server", []).append(added)
    runner.aggregate = torch.as_tensor(np.asarray(noised), dtype=runner.options.dtype, device=runner.device)
