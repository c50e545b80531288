"""Noise nobody else can regenerate: Gaussian draws from the operating system's CSPRNG, for deployed parties.

In simulation (``fedbound train``, ``sweep``, ``audit``, ``reproduce``) every draw is keyed by the run seed
(:mod:`fedbound.training.noise`): reproducible, and so regenerable by anyone who holds the seed.  A party
that releases noised values to others (a deployed client adding its uplink noise, the server adding its
own) draws here instead: every call takes fresh bits from ``os.urandom`` (the kernel CSPRNG: Linux
``getrandom(2)``, a ChaCha20 generator reseeded from the entropy pool; ``BCryptGenRandom`` on Windows), and
nothing here is seeded, keyed or stored.

From random bits to N(0, 1) (:func:`secure_standard_normal`):

1. a uniform ``U`` on (0, 1) at full floating-point resolution (Downey 2007, "Generating Pseudo-random
   Floating-Point Values"): ``U = 2^-J V`` with ``J`` ~ Geometric(1/2) (the count of trailing zero bits of
   random words, continued into fresh words while they are all zero) and ``V`` uniform on (1/2, 1) (the
   midpoint of one of 2^51 equal cells, from 51 more bits), so ``-ln U = J ln 2 - ln V`` keeps its relative
   precision however small ``U`` is: the Gaussian tail is not cut at 8.6 sigma, as 53-bit uniforms cut it
   (5.8 sigma with the 24-bit uniforms of a float32 generator);
2. Box & Muller (1958), "A Note on the Generation of Random Normal Deviates": with ``Theta`` uniform on
   (0, 1) (52 bits), ``R cos(2 pi Theta)`` and ``R sin(2 pi Theta)``, ``R = sqrt(-2 ln U)``, are two
   independent N(0, 1) draws (exact in real arithmetic; float64 evaluation, ~1 ulp);
3. each returned draw is ``(Z_1 + Z_2 + Z_3 + Z_4) / 2`` of four such draws: N(0, 1) again, whose float
   values no longer carry the gaps of one Box-Muller output that floating-point attacks on the Gaussian
   mechanism exploit (Holohan & Braghin 2021, "Secure Random Sampling in Differential Privacy", Sec. 5.1,
   n = 2, the fix Opacus' ``secure_mode`` uses; the attacks: Jin et al. 2022, "Are We There Yet? Timing and
   Floating-Point Attacks on Differential Privacy Systems");
4. computed in float64 and rounded once to the requested dtype.

:class:`SecureStreams` is a :class:`~fedbound.training.noise.Streams` whose noise (``normal``) and
within-client record sampling (``uniform_population``: mini-batches, Poisson masks, which the ledger's
amplification assumes hidden from the receiver) come from here, and whose host decisions (``numpy``:
participant sampling) come from the run seed or, given ``secret``, from bytes only that party holds.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence

import numpy as np
import torch

from fedbound.training.noise import Streams

__all__ = ["secure_standard_normal", "secure_uniform", "secure_normal_numpy", "SecureStreams", "new_secret"]

_CHUNK = 1 << 18
"""Draws per block: bounds the temporaries (~40 bytes a draw) whatever the size asked for."""

_FIELD = 13
"""Low bits of the first word that start ``J`` (the other 51 give ``V``)."""

_LN2 = math.log(2.0)


def _words(n: int) -> np.ndarray:
    """``n`` random 64-bit words from the OS CSPRNG (``os.urandom``, looked up at every call)."""
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


def _trailing_zeros(x: np.ndarray) -> np.ndarray:
    """Trailing zero bits of each nonzero uint64 (exactly: the lowest set bit is a power of two)."""
    low = x & (~x + np.uint64(1))
    return np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1


def _geometric(field: np.ndarray) -> np.ndarray:
    """``J`` ~ Geometric(1/2) on {0, 1, ...}: trailing zeros of the ``_FIELD``-bit ``field``, continued
    into fresh 64-bit words while all bits seen are zero (P(J >= j) = 2^-j, unbounded)."""
    j = np.full(field.shape, _FIELD, dtype=np.int64)
    nonzero = field != 0
    j[nonzero] = _trailing_zeros(field[nonzero])
    todo = np.flatnonzero(~nonzero)
    while todo.size:
        more = _words(todo.size)
        hit = more != 0
        j[todo[hit]] += _trailing_zeros(more[hit])
        j[todo[~hit]] += 64
        todo = todo[~hit]
    return j


def _box_muller(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays of ``len(first)`` N(0, 1) draws (float64, ``R cos`` and ``R sin``), all four independent,
    from pairs of random words (module docstring, 1-2)."""
    mantissa = (first >> np.uint64(_FIELD)).astype(np.float64)          # 51 bits
    v = (2.0 * mantissa + 1.0 + 2.0 ** 52) * 2.0 ** -53                  # exact: < 2^53 / 2^53, in (1/2, 1)
    j = _geometric(first & np.uint64((1 << _FIELD) - 1))
    radius = np.sqrt(2.0 * (j * _LN2 - np.log(v)))                      # sqrt(-2 ln U), U = 2^-J V
    theta = (2.0 * (second >> np.uint64(12)).astype(np.float64) + 1.0) * 2.0 ** -53  # (0, 1), 52 bits
    angle = 2.0 * math.pi * theta
    return radius * np.cos(angle), radius * np.sin(angle)


def _standard_normal_float64(n: int) -> np.ndarray:
    """``n`` N(0, 1) draws, each the sum of four Box-Muller draws over 2 (module docstring, 3)."""
    out = np.empty(n, dtype=np.float64)
    for lo in range(0, n, _CHUNK):
        m = min(_CHUNK, n - lo)
        words = _words(4 * m).reshape(2, 2 * m)                          # 2m pairs -> 4m draws
        cos, sin = _box_muller(words[0], words[1])
        out[lo:lo + m] = 0.5 * ((cos[:m] + cos[m:]) + (sin[:m] + sin[m:]))
    return out


def secure_normal_numpy(shape: Sequence[int] | int, dtype: np.dtype | type = np.float64) -> np.ndarray:
    """N(0, 1) draws of ``shape`` as a numpy array of ``dtype`` from the OS CSPRNG (module docstring)."""
    shape = (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)
    n = math.prod(shape)
    return _standard_normal_float64(n).astype(dtype, copy=False).reshape(shape)


def secure_standard_normal(shape: Sequence[int], dtype: torch.dtype = torch.float32,
                           device: torch.device | str = "cpu") -> torch.Tensor:
    """N(0, 1) draws of ``shape`` from the OS CSPRNG, as a tensor of ``dtype`` on ``device`` (module
    docstring: Downey 2007 uniforms, Box & Muller 1958, Holohan & Braghin 2021 Sec. 5.1)."""
    draws = torch.from_numpy(secure_normal_numpy(tuple(shape), np.float64))
    return draws.to(device=device, dtype=dtype)


def secure_uniform(shape: Sequence[int], dtype: torch.dtype = torch.float32,
                   device: torch.device | str = "cpu") -> torch.Tensor:
    """U[0, 1) draws of ``shape`` from the OS CSPRNG: the top 53 bits of a random word over 2^53 (24 bits
    over 2^24 for float32 and narrower types, so no value rounds up to 1)."""
    shape = tuple(int(s) for s in shape)
    words = _words(math.prod(shape))
    bits = 53 if dtype == torch.float64 else 24
    values = (words >> np.uint64(64 - bits)).astype(np.float64) * 2.0 ** -bits
    return torch.from_numpy(values.reshape(shape)).to(device=device, dtype=dtype)


def new_secret() -> bytes:
    """32 bytes from the OS CSPRNG: a party's own key for :class:`SecureStreams`' host decisions."""
    return os.urandom(32)


class SecureStreams(Streams):
    """A run's streams for a deployed party (module docstring).

    * ``normal`` (every noise draw of ``RoundContext.add_noise``) and ``uniform_population`` (record sampling
      inside a client's local steps): fresh OS-CSPRNG draws at every call, for the clients asked; the key is
      ignored, so nothing about them follows from the seed, the config or the messages;
    * ``numpy`` (host decisions: participant sampling): the run seed's stream, or, with ``secret``, a stream
      keyed by the secret (BLAKE2b as a keyed PRF of the key tuple, 256-bit seed), the same for the same key
      (a repeated round samples the same participants) and unknowable without the secret;
    * ``generator`` (the initial model, audit trials): the run seed's.
    """

    def __init__(self, seed: int, device: torch.device | str = "cpu", secret: bytes | None = None) -> None:
        super().__init__(seed, device)
        self._secret = None if secret is None else bytes(secret)

    def numpy(self, *key: object) -> np.random.Generator:
        if self._secret is None:
            return super().numpy(*key)
        digest = hashlib.blake2b(repr(("numpy", *key)).encode(), key=self._secret, digest_size=32).digest()
        return np.random.default_rng(int.from_bytes(digest, "little"))

    def normal(self, key: tuple, clients: Sequence[int] | np.ndarray, shape: Sequence[int],
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return secure_standard_normal((len(clients), *(int(s) for s in shape)), dtype, self.device)

    def uniform_population(self, key: tuple, num_clients: int, n: int, clients: Sequence[int] | np.ndarray,
                           dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return secure_uniform((len(clients), int(n)), dtype, self.device)
