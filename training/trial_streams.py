"""The draws and the context of a batch of audit trials (``fedbound.training.trials``): every copy of a
client in a batch of trial federations draws what that client of the run with the trial's seed draws.

Copy ``c = g * width + position`` of a batch is client ``clients[position]`` of run ``g`` (seed
``seeds[g]``).  :class:`TrialStreams` gives each copy that run's per-client noise (``Streams.normal``: the
generator keyed by the seed, the key and the client), the server's draw (``clients = [-1]``) one row per run,
and the run's rows of its population draws (mini-batches, Poisson masks); host-side keys (``numpy``,
``generator``: e.g. bit errors keyed by the copy id) come from a stream of the batch's own.  A ``Streams``
whose methods were replaced (a bug injected into the production streams) is called as it is.
:class:`TrialContext` reads ``ctx.sigma`` at the original client ids from the original plan, through
``RoundContext.sigma`` (so a per-client sigma, or a bug injected there, is what the run would see).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from fedbound.training.engine import RoundContext, RunOptions, RunState
from fedbound.training.federation import ClientData
from fedbound.training.models import Model
from fedbound.training.noise import Streams, derive_seed

__all__ = ["TrialStreams", "TrialContext"]

_STREAMS_NORMAL, _STREAMS_GENERATOR = Streams.normal, Streams.generator


class TrialStreams:
    """The draws of a batch of trial federations (module docstring): copy ``c = g * width + position``
    draws what client ``clients[position]`` of the run with seed ``seeds[g]`` draws.  ``numpy`` and
    ``generator`` keys (host-side decisions, e.g. bit errors keyed by the copy id) come from a stream of
    their own per batch (``salt``).  ``draws`` counts every call (a local update that draws nothing is
    deterministic)."""

    def __init__(self, seeds: Sequence[int], clients: np.ndarray, salt: int, device: torch.device | str,
                 population: int, n_max: int) -> None:
        self.seeds = [int(s) for s in seeds]
        self.clients = np.asarray(clients, dtype=np.int64)
        self.width = len(self.clients)
        self.device = torch.device(device)
        self.population, self.n_max = int(population), int(n_max)
        self._runs: dict[int, Streams] = {}
        self._host = Streams(int(salt), self.device)
        self.draws = 0

    def run(self, group: int) -> Streams:
        """The streams of the run copy ``group`` is."""
        if group not in self._runs:
            self._runs[group] = Streams(self.seeds[group], self.device)
        return self._runs[group]

    def numpy(self, *key: object) -> np.random.Generator:
        self.draws += 1
        return self._host.numpy("trial copies", *key)

    def generator(self, *key: object) -> torch.Generator:
        self.draws += 1
        return self._host.generator("trial copies", *key)

    def normal(self, key: tuple, clients: Sequence[int] | np.ndarray, shape: Sequence[int],
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Copy ``c``'s row: ``Streams(seeds[g]).normal(key, [clients[position]], shape)``; the server's draw
        (``clients`` ``[-1]``): one row per run of the batch."""
        self.draws += 1
        copies = np.asarray(clients, dtype=np.int64)
        shape = tuple(int(s) for s in shape)
        if len(copies) == 1 and copies[0] < 0:
            return self.per_run(key, int(copies[0]), shape, dtype)
        pairs = [(c // self.width, int(self.clients[c % self.width])) for c in copies.tolist()]
        return self._draw(pairs, key, shape, dtype)

    def per_run(self, key: tuple, client: int, shape: Sequence[int], dtype: torch.dtype = torch.float32
                ) -> torch.Tensor:
        """One row per run of the batch: ``Streams(seed).normal(key, [client], shape)`` of each."""
        pairs = [(g, int(client)) for g in range(len(self.seeds))]
        return self._draw(pairs, key, tuple(int(s) for s in shape), dtype)

    def _draw(self, pairs: list[tuple[int, int]], key: tuple, shape: tuple, dtype: torch.dtype
              ) -> torch.Tensor:
        out = torch.empty((len(pairs), *shape), dtype=dtype, device=self.device)
        if Streams.normal is not _STREAMS_NORMAL or Streams.generator is not _STREAMS_GENERATOR:
            groups = np.array([g for g, _ in pairs])  # a changed Streams: through it, one call per run
            clients = np.array([c for _, c in pairs])
            for group in np.unique(groups).tolist():
                rows = np.flatnonzero(groups == group)
                out[torch.as_tensor(rows)] = self.run(group).normal(key, clients[rows], shape, dtype)
            return out
        gen = torch.Generator(device=self.device)  # what Streams.normal computes, one generator reseeded
        for row, (group, client) in enumerate(pairs):
            gen.manual_seed(derive_seed(self.seeds[group], "torch", *key, "client", client))
            torch.randn(shape, generator=gen, dtype=dtype, device=self.device, out=out[row])
        return out

    def uniform_population(self, key: tuple, num_clients: int, n: int, clients: Sequence[int] | np.ndarray,
                           dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Each copy's row of its run's ``(population, n_max)`` draw (its first ``n`` columns: records)."""
        self.draws += 1
        copies = np.asarray(clients, dtype=np.int64)
        groups, positions = np.divmod(copies, self.width)
        out = torch.empty((len(copies), n), dtype=dtype, device=self.device)
        for group in np.unique(groups).tolist():
            rows = np.flatnonzero(groups == group)
            full = self.run(group).uniform_population(key, self.population, self.n_max,
                                                      self.clients[positions[rows]], dtype=dtype)
            out[torch.as_tensor(rows, device=self.device)] = full[:, :n] if n <= self.n_max else torch.cat(
                [full, torch.full((len(rows), n - self.n_max), 2.0, dtype=dtype, device=self.device)], dim=1)
        return out


class TrialContext(RoundContext):
    """A round of a batch of trial federations: ``sigma`` at the original client ids (module docstring)."""

    def __init__(self, round_: int, state: RunState, model: Model, data: ClientData, streams: TrialStreams,
                 options: RunOptions, recorder: Any = None) -> None:
        super().__init__(round_, state, model, data, streams, options, None)
        self.audit_recorder = recorder

    def original(self, clients: np.ndarray) -> np.ndarray:
        """The original client id of each copy."""
        return self.streams.clients[np.asarray(clients, dtype=np.int64) % self.streams.width]

    def sigma(self, stage: str, clients: np.ndarray | None = None) -> torch.Tensor:
        return RoundContext.sigma(self, stage, None if clients is None else self.original(clients))


class _CoupledContext(TrialContext):
    """Copies in pairs (2p: D, 2p + 1: D', one seed each pair): every noise call records the target's
    input on both and gives D' the noised output of D (module docstring)."""

    def add_noise(self, stage: str, x: torch.Tensor, clients: np.ndarray | None = None, *key: object
                  ) -> torch.Tensor:
        out = RoundContext.add_noise(self, stage, x, clients, *key)
        rows_in = x if x.ndim == 2 else x.unsqueeze(0)
        rows_out = out if out.ndim == 2 else out.unsqueeze(0)
        width = self.streams.width
        copies = (np.arange(rows_in.shape[0], dtype=np.int64) * width if clients is None
                  else np.asarray(clients, dtype=np.int64))
        group, position = np.divmod(copies, width)
        where = {int(c): r for r, c in enumerate(copies.tolist())}
        fixed = rows_out.clone()
        for row in np.flatnonzero(group % 2 == 1).tolist():
            partner = where.get(int(copies[row] - width))
            if partner is None:
                continue
            if clients is None or position[row] == self.audit_recorder.position:
                shift = float(torch.linalg.vector_norm((rows_in[row] - rows_in[partner]).double()))
                self.audit_recorder.shifts.setdefault(stage, []).append((self.round, shift))
            fixed[row] = rows_out[partner]
        return fixed if out.ndim == 2 else fixed[0]
