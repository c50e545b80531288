"""Seed 001 (Talaei & Izadi, arXiv 2406.18491, PADPFL): the noise formulas of Sec. III and Theorem 1.

Spec 001 Sec. 3.3-3.5 and 3.12, the paper's equation numbers.  PADPFL is NbAFL with impact factors ``p_i``
as aggregation weights: every client adds ``sigma_C`` (eq. (8)); the server tops the broadcast up by
``sigma_S^(t)`` (Theorem 1, eq. (13)) so that it carries ``sigma_A^(t)`` (F17) whenever ``T > T_th^(t)``
(F20).  Plain vectorised functions (one value per row of ``p``); the theorem-as-data form
(``fedbound.bounds.core``) and the convergence bound come with seed 001's planning issue.  Used by
``fedbound.validation.train_adaptive`` to build the training noise plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fedbound.checks import check_int, check_real, scalar_or_array
from fedbound.errors import ParameterError

__all__ = ["RADICAND_RTOL", "gaussian_constant", "client_noise_sigma", "server_sensitivity",
           "aggregated_client_noise_sigma", "total_noise_sigma", "server_noise_threshold",
           "server_noise_sigma", "effective_noise_sigma", "impact_factors_from_ratios", "impact_schedule"]

RADICAND_RTOL = 1e-12
"""Relative tolerance of Theorem 1's radicand (spec 001 F19 numerical note): ``sigma_S = 0`` when
``T^2 max p^2 - R^2 sum p^2 <= 1e-12 T^2 max p^2``, so the boundary ``T = T_th`` gives exactly 0."""


def gaussian_constant(delta: float) -> float:
    """``c = sqrt(2 ln(1.25/delta))`` (seed 001 Sec. III-A; spec 001 F7; c(0.01) = 3.10751146009)."""
    from fedbound.accounting import classic_gaussian_constant

    return float(classic_gaussian_constant(delta))


def _c(delta: float, c: float | None) -> float:
    return gaussian_constant(delta) if c is None else float(check_real("c", c, 0.0, low_open=True))


def _impact(p: Any) -> np.ndarray:
    arr = check_real("p", p, 0.0, 1.0)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ParameterError("p", arr, "a non-empty vector (or rows of vectors) on the simplex")
    sums = np.atleast_1d(arr.sum(axis=-1))
    bad = np.abs(sums - 1.0) > 1e-9
    if bad.any():
        raise ParameterError("sum_i p_i", float(sums[bad][0]), "1 to within 1e-9 (spec 001 F2)")
    return arr


def _m_min(m: Any) -> float:
    return float(np.min(check_int("m", m, 1)))


def client_noise_sigma(eps: float, delta: float, B: float, R: int, m: Any, c: float | None = None) -> float:
    """``sigma_C = 2 B R c / (min_i m_i eps)``: the united client noise std (seed 001 eq. (8); spec 001 F12).

    ``m``: all local dataset sizes (or the smallest one); independent of p and T (spec 001 E15).
    """
    e = float(check_real("eps", eps, 0.0, low_open=True))
    b = float(check_real("B", B, 0.0, low_open=True))
    r = int(check_int("R", R, 1))
    return 2.0 * b * r * _c(delta, c) / (_m_min(m) * e)


def server_sensitivity(B: float, p: Any, m: Any) -> float | np.ndarray:
    """``Delta f = 2 B max_i p_i / min_i m_i`` (seed 001 eq. (10); spec 001 F14); one per row of ``p``."""
    b = float(check_real("B", B, 0.0, low_open=True))
    return scalar_or_array(2.0 * b * _impact(p).max(axis=-1) / _m_min(m))


def aggregated_client_noise_sigma(p: Any, sigma_c: Any) -> float | np.ndarray:
    """``sigma_AC = sqrt(sum_i p_i^2 sigma_Ci^2)`` (seed 001 eq. (12); spec 001 F16); ``sigma_c`` a scalar
    or one std per client."""
    s = check_real("sigma_c", sigma_c, 0.0)
    return scalar_or_array(np.sqrt(np.sum(_impact(p) ** 2 * s**2, axis=-1)))


def total_noise_sigma(eps: float, delta: float, T: int, B: float, p: Any, m: Any, c: float | None = None
                      ) -> float | np.ndarray:
    """``sigma_A = c T Delta f / eps = 2 B T c max_i p_i / (min_i m_i eps)``: the broadcast std that T
    linearly composed releases need (proof of seed 001 Thm 1; spec 001 F17)."""
    e = float(check_real("eps", eps, 0.0, low_open=True))
    t = int(check_int("T", T, 1))
    return scalar_or_array(_c(delta, c) * t * np.asarray(server_sensitivity(B, p, m)) / e)


def server_noise_threshold(R: int, p: Any) -> float | np.ndarray:
    """``T_th = R sqrt(sum_i p_i^2) / max_i p_i`` (seed 001 Thm 1 condition; spec 001 F20): the server adds
    noise only for ``T > T_th``; ``R sqrt(N)`` for uniform p, ``R`` for one-hot p."""
    r = int(check_int("R", R, 1))
    arr = _impact(p)
    return scalar_or_array(r * np.sqrt(np.sum(arr**2, axis=-1)) / arr.max(axis=-1))


def server_noise_sigma(eps: float, delta: float, T: int, R: int, p: Any, B: float, m: Any,
                       c: float | None = None) -> float | np.ndarray:
    """Theorem 1 (seed 001 eq. (13); spec 001 F19): the server's top-up std

    ``sigma_S = 2 B c sqrt(T^2 max_i p_i^2 - R^2 sum_i p_i^2) / (min_i m_i eps)`` for ``T > T_th`` (F20),
    else 0.  The branch is decided from the radicand with :data:`RADICAND_RTOL` (spec 001 F19 numerical
    note), never by comparing with a rounded ``T_th``.  One value per row of ``p`` (an adaptive schedule:
    F19 with each round's p, spec 001 E25).
    """
    e = float(check_real("eps", eps, 0.0, low_open=True))
    b = float(check_real("B", B, 0.0, low_open=True))
    t = int(check_int("T", T, 1))
    r = int(check_int("R", R, 1, t, hint="R exposures cannot exceed the T rounds"))
    arr = _impact(p)
    full = t**2 * arr.max(axis=-1) ** 2
    radicand = full - r**2 * np.sum(arr**2, axis=-1)
    root = np.sqrt(np.where(radicand > RADICAND_RTOL * full, radicand, 0.0))
    return scalar_or_array(2.0 * b * _c(delta, c) * root / (_m_min(m) * e))


def effective_noise_sigma(eps: float, delta: float, T: int, R: int, p: Any, B: float, m: Any,
                          c: float | None = None) -> float | np.ndarray:
    """``sigma_eff = sqrt(sigma_AC^2 + sigma_S^2) = max(sigma_A, sigma_AC)``: the std of the noise in the
    broadcast (seed 001 eq. (11)-(14); spec 001 F21)."""
    sigma_c = client_noise_sigma(eps, delta, B, R, m, c)
    ac = np.asarray(aggregated_client_noise_sigma(p, sigma_c))
    return scalar_or_array(np.sqrt(ac**2 + np.asarray(server_noise_sigma(eps, delta, T, R, p, B, m, c)) ** 2))


def impact_factors_from_ratios(ratios: Sequence[float], part_sizes: Sequence[int]) -> np.ndarray:
    """``p_i = r_k(i) / sum_k' n_k' r_k'`` for the clients of part k (seed 001 Sec. VI, the "r1-r2-r3"
    labels; spec 001 F55): (0, 1, 2) over 20/20/20 clients gives (0, 1/60, 1/30) per part."""
    r = check_real("ratios", ratios, 0.0)
    n = check_int("part_sizes", part_sizes, 1)
    if r.ndim != 1 or r.shape != n.shape:
        raise ParameterError("ratios", r, f"one non-negative priority per part ({n.size} parts)")
    total = float(np.sum(r * n))
    if total <= 0:
        raise ParameterError("ratios", r, "non-negative priorities, at least one > 0")
    return np.repeat(r / total, n)


def impact_schedule(part_sizes: Sequence[int], ratios: Sequence[Sequence[float]], switch_after: Sequence[int],
                    rounds: int) -> np.ndarray:
    """``(rounds, N)`` impact factors: phase ``k``'s F55 factors from round ``switch_after[k-1] + 1`` on
    (1-based; seed 001 scenario 4: ratios (0,1,2) for t <= 10, (2,1,0) after, spec 001 Sec. 5)."""
    if len(switch_after) != len(ratios) - 1:
        raise ParameterError("switch_after", list(switch_after), f"{len(ratios) - 1} round(s), one per later "
                             "phase")
    bounds = check_int("switch_after", list(switch_after), 1).ravel().tolist() if switch_after else []
    if any(b <= a for a, b in zip(bounds, bounds[1:], strict=False)):
        raise ParameterError("switch_after", bounds, "strictly increasing rounds")
    phase = np.searchsorted(np.asarray(bounds, dtype=np.int64), np.arange(rounds), side="right")
    rows = np.stack([impact_factors_from_ratios(r, part_sizes) for r in ratios])
    return rows[phase]
