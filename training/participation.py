"""Who takes part in a round: everyone, K of N uniformly, round robin, or a given schedule.

Samplers take an explicit ``numpy.random.Generator`` (the engine passes ``ctx.rng("participation")``,
seeded by the run seed and the round) and return sorted client indices.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedbound.errors import ParameterError

__all__ = ["all_clients", "uniform_subset", "round_robin", "scheduled"]


def all_clients(num_clients: int) -> np.ndarray:
    """Every client (NbAFL Alg. 1, DP-PFL Alg. 1)."""
    return np.arange(num_clients)


def uniform_subset(rng: np.random.Generator, num_clients: int, k: int) -> np.ndarray:
    """A uniformly random ``k``-subset, without replacement, independent across rounds (NbAFL Sec. V,
    "K-client random scheduling"; UDP Alg. 1 line 3)."""
    if not 1 <= k <= num_clients:
        raise ParameterError("K", k, f"integer in [1, {num_clients}]")
    return np.sort(rng.choice(num_clients, size=k, replace=False))


def round_robin(round_: int, num_clients: int, k: int) -> np.ndarray:
    """Clients ``(round*k + j) mod N`` for ``j < k`` (WPFL's Round-Robin baseline, spec 004 Sec. 6.4)."""
    if not 1 <= k <= num_clients:
        raise ParameterError("K", k, f"integer in [1, {num_clients}]")
    return np.sort((round_ * k + np.arange(k)) % num_clients)


def scheduled(schedule: Sequence[Sequence[int]], round_: int, num_clients: int) -> np.ndarray:
    """Round ``round_``'s entry of a precomputed schedule (e.g. WPFL's scheduler output)."""
    if not 0 <= round_ < len(schedule):
        raise ParameterError("round", round_, f"integer in [0, {len(schedule) - 1}]")
    chosen = np.unique(np.asarray(schedule[round_], dtype=np.int64))
    if chosen.size and (chosen.min() < 0 or chosen.max() >= num_clients):
        raise ParameterError("schedule client", int(chosen.max()), f"integer in [0, {num_clients - 1}]")
    return chosen
