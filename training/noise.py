"""Seeded randomness and Gaussian noise: one seed fixes every draw, whatever the chunking of clients.

Every random draw of a run is addressed by a *key*, a tuple such as ``("uplink", round)``.  Two kinds of
streams exist:

* per-client streams (:meth:`Streams.normal`): client ``i``'s draw for ``key`` comes from its own
  ``torch.Generator`` seeded by ``hash(seed, key, i)``.  Used for noise on whole parameter vectors, where
  drawing for the whole population would be wasteful.  Client ``i`` gets the same numbers whether it is
  trained alone (the reference loop), in a chunk of 8, or with everyone.
* population streams (:meth:`Streams.uniform_population`): one ``(N, n)`` draw for all clients from one
  generator seeded by ``hash(seed, key)``; a chunk takes its rows.  Used for small per-sample randomness
  (mini-batch selection, Poisson masks), where a generator per client and step would cost more than the draw.

Numbers are reproducible on the same device type (CPU by default); CUDA generators give different (but
again reproducible) numbers.  Reproducible means regenerable by anyone holding the seed: a deployed
party that releases noise to others draws it from the OS CSPRNG instead
(:mod:`fedbound.training.secure_noise`, a ``Streams`` with the same interface).  The Gaussian mechanism
itself is ``x + sigma * N(0, I)`` (Dwork & Roth 2014, Thm A.1; every seed paper's mechanism, e.g. seed 002
Sec. II-C, seed 003 eq. (3)).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["derive_seed", "Streams", "add_gaussian_noise"]


def derive_seed(seed: int, *key: object) -> int:
    """A 63-bit seed derived from ``seed`` and a key tuple (stable across runs, platforms and processes)."""
    text = repr((int(seed), *key)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") & ((1 << 63) - 1)


class Streams:
    """All randomness of one run, derived from one integer seed."""

    def __init__(self, seed: int, device: torch.device | str = "cpu") -> None:
        self.seed = int(seed)
        self.device = torch.device(device)

    def numpy(self, *key: object) -> np.random.Generator:
        """A numpy Generator for host-side decisions (client sampling, data split)."""
        return np.random.default_rng(derive_seed(self.seed, "numpy", *key))

    def generator(self, *key: object) -> torch.Generator:
        """A torch Generator on the run's device."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(derive_seed(self.seed, "torch", *key))
        return gen

    def normal(self, key: tuple, clients: Sequence[int] | np.ndarray, shape: Sequence[int],
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Standard normal draws of ``shape`` for each client, stacked: ``(len(clients), *shape)``."""
        shape = tuple(int(s) for s in shape)
        out = torch.empty((len(clients), *shape), dtype=dtype, device=self.device)
        for row, client in enumerate(np.asarray(clients).tolist()):
            torch.randn(shape, generator=self.generator(*key, "client", client), dtype=dtype,
                        device=self.device, out=out[row])
        return out

    def uniform_population(self, key: tuple, num_clients: int, n: int, clients: Sequence[int] | np.ndarray,
                           dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Rows ``clients`` of one ``(num_clients, n)`` U[0, 1) draw shared by the whole population."""
        full = torch.rand((num_clients, n), generator=self.generator(*key, "population"), dtype=dtype,
                          device=self.device)
        return full[torch.as_tensor(np.asarray(clients), device=self.device, dtype=torch.long)]


def add_gaussian_noise(x: torch.Tensor, sigma: torch.Tensor | float, standard_normal: torch.Tensor
                       ) -> torch.Tensor:
    """The Gaussian mechanism ``x + sigma * xi`` with ``xi ~ N(0, I)`` drawn by the caller.

    ``sigma`` is a scalar or one value per leading row of ``x`` (per client).  Dwork & Roth 2014, Thm A.1.
    """
    sigma = torch.as_tensor(sigma, dtype=x.dtype, device=x.device)
    if sigma.ndim == 1:
        sigma = sigma.reshape(-1, *([1] * (x.ndim - 1)))
    return x + sigma * standard_normal
