"""WPFL's R-bit quantizer and its bit-error channel, for ``k`` model vectors at once.

* :func:`quantize_index`: nearest of ``2^R`` uniform levels on ``[-A, A]``, saturating outside (WPFL
  eqs. (6)-(8), (19); spec 004 F3-F4): index ``clip(round((x + A)/Delta), 0, 2^R - 1)``, ``Delta = 2A /
  (2^R - 1)``; deterministic, no dither.  :func:`index_value` maps an index back to ``-A + index Delta``.
  Both work in float64 whatever the model dtype, so the level of an element does not depend on it.
* :func:`flip_bits`: every one of an element's ``R`` bits (natural binary code word = the level index, spec
  E16) flips independently with probability ``e`` (the BER); an element is wrong with probability
  ``rho = 1 - (1 - e)^R`` (eq. (14)) and stays inside the range (eqs. (15), (18)).  Drawn exactly and
  cheaply: the number of flipped bits is Binomial(``d R``, e), their positions a uniform subset (spec 004
  Sec. 6.1 draws the same law bit by bit).
* :func:`transmit`: quantize, send over a channel with the given BER, return the received values (eqs.
  (8) + (15) on the uplink, (19) + (18) on the downlink).
* :func:`coded_bits`: the bits an upload costs with WPFL's bit-length coding (Sec. VII-1, Table III).

Randomness: one numpy Generator per row (per client), so a client's errors do not depend on which other
clients share its chunk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from fedbound.errors import ParameterError

__all__ = ["quantize_index", "index_value", "quantize", "flip_bits", "transmit", "dithered_gaussian",
           "coded_bits", "MAX_BITS"]

MAX_BITS = 52
"""Largest R: level indices must be exact in float64 (and fit int64)."""


def _rows(half_range: torch.Tensor | float, k: int, device: torch.device) -> torch.Tensor:
    half = torch.as_tensor(half_range, dtype=torch.float64, device=device)
    if half.ndim == 0:
        half = half.expand(k)
    if half.shape != (k,) or bool((half <= 0).any()):
        raise ParameterError("half_range", half.tolist(), f"> 0, a scalar or one value per row ({k})")
    return half.unsqueeze(1)


def _check_bits(bits: int) -> int:
    if not 1 <= int(bits) <= MAX_BITS:
        raise ParameterError("R", bits, f"integer in [1, {MAX_BITS}]")
    return int(bits)


def quantize_index(x: torch.Tensor, half_range: torch.Tensor | float, bits: int) -> torch.Tensor:
    """Level indices (int64) of ``x`` ``(k, d)`` on ``[-A_j, A_j]`` per row (WPFL eq. (8); spec F4)."""
    levels = 2.0 ** _check_bits(bits) - 1.0
    half = _rows(half_range, x.shape[0], x.device)
    step = 2.0 * half / levels
    return torch.clamp(torch.round((x.to(torch.float64) + half) / step), 0.0, levels).to(torch.int64)


def index_value(index: torch.Tensor, half_range: torch.Tensor | float, bits: int,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``-A + index Delta`` (the level of each index), in ``dtype``."""
    half = _rows(half_range, index.shape[0], index.device)
    step = 2.0 * half / (2.0 ** _check_bits(bits) - 1.0)
    return (-half + step * index.to(torch.float64)).to(dtype)


def quantize(x: torch.Tensor, half_range: torch.Tensor | float, bits: int) -> torch.Tensor:
    """``Q_A(x)``: the nearest level of every element (WPFL eqs. (8), (19)), in ``x``'s dtype."""
    return index_value(quantize_index(x, half_range, bits), half_range, bits, x.dtype)


def coded_bits(index: torch.Tensor, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of level indices ``(k, d)``: the mean quantization bits ``B_q`` and overhead bits ``B_o`` per
    parameter under WPFL's coding (Sec. VII-1, Table III: "only the effectively utilized bits, along with
    the sign bit", and "an index list" of the runs of consecutive parameters with the same number of
    effective bits).

    The ``2^R`` levels are symmetric about 0: an index ``i`` is a sign and a magnitude ``m = (|2i - (2^R -
    1)| - 1) / 2`` in ``[0, 2^(R-1))``; its effective bits are ``m.bit_length()``, so ``B_q`` is the mean of
    ``bit_length(m) + 1``.  The index list costs the cheaper of two formats (our reading; the paper gives
    none): per run its bit length (``ceil(log2 R)`` bits) and its count (``ceil(log2 d)`` bits), or every
    parameter's bit length alone, ``B_o = min(ceil(log2 R), runs (ceil(log2 R) + ceil(log2 d)) / d)``.  A
    client sends ``min(R, B_q + B_o)`` bits per parameter (Table III's note)."""
    bits = _check_bits(bits)
    k, d = index.shape
    magnitude = (torch.abs(2 * index - (2**bits - 1)) - 1) // 2
    powers = torch.tensor([2**b for b in range(bits)], dtype=torch.int64, device=index.device)
    length = torch.searchsorted(powers, magnitude.contiguous(), right=True)
    b_q = (length + 1).to(torch.float64).mean(1).cpu().numpy()
    runs = 1 + (length[:, 1:] != length[:, :-1]).sum(1).cpu().numpy().astype(np.float64)
    field = math.ceil(math.log2(bits)) if bits > 1 else 1
    count = max(1, math.ceil(math.log2(d))) if d > 1 else 1
    b_o = np.minimum(float(field), runs * (field + count) / d)
    return b_q, b_o


def flip_bits(index: torch.Tensor, ber: float, bits: int, rng: np.random.Generator
              ) -> tuple[torch.Tensor, int]:
    """The indices ``(d,)`` after independent bit flips with probability ``ber``; also how many elements
    changed.  Flipped bits: Binomial(d R, ber) of them at uniformly random positions ``p`` (element ``p //
    R``, bit ``p % R``), XORed into the code words."""
    bits = _check_bits(bits)
    if not 0.0 <= ber <= 1.0:
        raise ParameterError("ber", ber, "[0, 1]")
    total = index.numel() * bits
    count = int(rng.binomial(total, ber)) if ber > 0 else 0
    if count == 0:
        return index, 0
    where = rng.choice(total, size=count, replace=False)
    flips = np.zeros(index.numel(), dtype=np.int64)
    np.bitwise_or.at(flips, where // bits, np.left_shift(np.int64(1), (where % bits).astype(np.int64)))
    mask = torch.as_tensor(flips, device=index.device)
    return index ^ mask, int(np.count_nonzero(flips))


def transmit(x: torch.Tensor, half_range: torch.Tensor | float, bits: int, ber: Sequence[float] | np.ndarray,
             rngs: Sequence[np.random.Generator]) -> tuple[torch.Tensor, int]:
    """Rows of ``x`` ``(k, d)`` quantized on ``[-A_j, A_j]``, sent over channels with bit error rates
    ``ber[j]`` (one Generator per row), as received; also the number of wrong elements (all rows)."""
    ber = np.asarray(ber, dtype=np.float64).reshape(-1)
    if len(ber) != x.shape[0] or len(rngs) != x.shape[0]:
        raise ParameterError("ber / rngs", (len(ber), len(rngs)), f"one per row ({x.shape[0]})")
    index = quantize_index(x, half_range, bits)
    wrong = 0
    if ber.any():
        rows = []
        for j in range(x.shape[0]):
            received, changed = flip_bits(index[j], float(ber[j]), bits, rngs[j])
            rows.append(received)
            wrong += changed
        index = torch.stack(rows)
    return index_value(index, half_range, bits, x.dtype), wrong


def dithered_gaussian(x: torch.Tensor, sigma: torch.Tensor | Sequence[float], bits: int,
                      ber: Sequence[float] | np.ndarray, rngs: Sequence[np.random.Generator]
                      ) -> tuple[torch.Tensor, int, float]:
    """Rows of ``x`` through subtractive dithered quantization with random steps (the "dithering" DP
    baseline of WPFL Fig. 2, after Hasircioglu & Gunduz's P2CEFL): per element a half-step
    ``s = sigma chi_3``, step ``2 s``, a dither ``u ~ U(-s, s)`` shared with the server, the index
    ``k = round((x + u) / 2s)`` sent as an ``R``-bit word (offset binary, saturating) over the row's
    channel, and ``2 s k - u`` received.

    With a subtractive dither the error is ``U(-s, s)`` whatever ``x``; ``s = sigma chi_3`` makes that
    uniform scale mixture exactly ``N(0, sigma^2)`` (so the release is the Gaussian mechanism with ``sigma``,
    the noise costs no extra bits).  Returns the received rows, the number of wrong elements, and the mean
    number of bits an index needs (``ceil(log2(2|k| + 1))``; the paper reports about 16).
    """
    k_rows, d = x.shape
    sig = np.broadcast_to(np.asarray(torch.as_tensor(sigma, dtype=torch.float64).cpu(), dtype=np.float64),
                          (k_rows,))
    ber = np.asarray(ber, dtype=np.float64).reshape(-1)
    if len(ber) != k_rows or len(rngs) != k_rows:
        raise ParameterError("ber / rngs", (len(ber), len(rngs)), f"one per row ({k_rows})")
    if not 1 <= bits <= MAX_BITS:
        raise ParameterError("bits", bits, f"integer in [1, {MAX_BITS}]")
    values = x.detach().to(torch.float64).cpu().numpy()
    out = np.empty_like(values)
    wrong, need = 0, 0.0
    top = 2 ** (bits - 1)
    for j in range(k_rows):
        rng = rngs[j]
        half = sig[j] * np.sqrt(rng.chisquare(3, size=d))
        dither = rng.uniform(-1.0, 1.0, size=d) * half
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.where(half > 0, np.rint((values[j] + dither) / (2 * half)), 0.0)
        need += float(np.mean(np.ceil(np.log2(2 * np.abs(k) + 1))))
        index = np.clip(k + top, 0, 2 * top - 1)
        if ber[j] > 0:
            received, changed = flip_bits(torch.as_tensor(index.astype(np.int64)), float(ber[j]), bits, rng)
            index = received.cpu().numpy().astype(np.float64)
            wrong += changed
        out[j] = np.where(half > 0, 2 * half * (index - top) - dither, values[j])
    return torch.as_tensor(out, dtype=x.dtype, device=x.device), wrong, need / max(k_rows, 1)
