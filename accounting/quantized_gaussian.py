"""The quantization-assisted Gaussian mechanism of WPFL and its privacy (Proposition 1, Theorem 1).

Mechanism (WPFL Prop. 1, eq. (22); spec 004 F2-F5): clip the model to L2 norm ``C`` (eq. (2)), add
``N(0, sigma_DP^2 I)``, and round every element to the nearest of ``2^R`` uniform levels on
``[-A, A]``, ``A = C + 3 sigma_DP`` (eqs. (6)-(8)); values outside saturate to the end levels.  The largest
rounding error inside the range is ``E_L^max = A / (2^R - 1)`` (eq. (7)).

Privacy (Theorem 1, eqs. (23)-(24); spec 004 F15-F17), over ``T0`` uploads with mini-batch sampling rate
``q`` and ``Q`` the Gaussian tail::

    delta_Q = T0 max{psi - psi1 e^(eps_Q/T0), psi' - psi1' e^(eps_Q/T0)}
    psi   = (1 - q) psi1  + q (1 - 2 Q(E_L/sigma))
    psi1  = Q((2C + 3 sigma - E_L)/sigma) - Q((2C + 3 sigma + E_L)/sigma)
    psi'  = (1 - q) psi1' + q Q((3 sigma - E_L)/sigma)
    psi1' = Q((2C + 3 sigma - E_L)/sigma)

Numerics (spec 004 Sec. 3.5, normative): at realistic settings ``(2C + 3 sigma)/sigma`` is in the hundreds,
so ``psi1 = psi1' = 0`` in float64 and ``delta_Q = T0 q max{1 - 2Q(E_L/sigma), Q(3 - E_L/sigma)}`` no longer
depends on ``eps_Q`` (spec S5).  Everything is evaluated in log space (``log_ndtr``; ``log(Q(x1) - Q(x2)) =
l1 + log1p(-e^(l2 - l1))``), so the epsilon of F17 stays finite where ``psi1`` underflows.

What the guarantee means (spec 004 E17): Theorem 1 is proved with a *per-outcome* delta (Def. 2, eq. (5):
delta subtracted from the probability of a single quantization level), not the set-based (eps, delta) of
Dwork & Roth.  Under set-based DP the deterministic quantizer is post-processing of the Gaussian release,
so the subsampled Gaussian mechanism's own (eps, delta) (``fedbound.accounting.epsilon`` with sensitivity
``2C``) is the standard guarantee; at the paper's settings it is orders of magnitude weaker.  Read
``delta_Q`` as a pointwise delta.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import erf, log_ndtr

from fedbound.accounting._numerics import log1mexp
from fedbound.checks import check_int, check_probability, check_real, scalar_or_array
from fedbound.errors import DomainError, InfeasibleError, ParameterError

__all__ = ["quantization_max_error", "qa_quantize", "qa_gaussian_mechanism", "qa_gaussian_psi",
           "qa_gaussian_log_psi", "qa_gaussian_delta", "qa_gaussian_epsilon", "calibrate_sigma_dp",
           "SIGMA_DP_BRACKET"]

#: The one-dimensional search range of :func:`calibrate_sigma_dp` (spec 004 Sec. 3.5).
SIGMA_DP_BRACKET = (1e-6, 1e3)


def quantization_max_error(half_range: ArrayLike, R: ArrayLike) -> float | np.ndarray:
    """``E^max = Delta / 2 = A / (2^R - 1)``: the largest rounding error of ``R``-bit nearest-level
    quantization on ``[-A, A]`` for values inside the range (WPFL eqs. (6)-(7); spec 004 F3, E1).

    ``E_L^max = quantization_max_error(C + 3 sigma_DP, R)``, ``E_G^max = quantization_max_error(C, R)``.
    """
    a = check_real("half_range", half_range, 0.0, low_open=True)
    r = check_int("R", R, 1, 62)
    return scalar_or_array(a / (np.exp2(r) - 1.0))


def qa_quantize(x: ArrayLike, half_range: float, R: int) -> np.ndarray:
    """Nearest-level ``R``-bit quantizer on ``[-A, A]``, saturating outside (WPFL eq. (8); spec F4):
    ``-A + Delta clip(round((x + A)/Delta), 0, 2^R - 1)``, ``Delta = 2A / (2^R - 1)``.  Deterministic."""
    a = float(check_real("half_range", half_range, 0.0, low_open=True))
    r = int(check_int("R", R, 1, 62))
    levels = 2.0**r - 1.0
    step = 2.0 * a / levels
    index = np.clip(np.round((np.asarray(x, dtype=np.float64) + a) / step), 0.0, levels)
    return -a + step * index


def qa_gaussian_mechanism(u: ArrayLike, C: float, sigma_dp: float, R: int, rng: np.random.Generator
                          ) -> np.ndarray:
    """One release of the quantization-assisted Gaussian mechanism (WPFL Prop. 1, eq. (22)):
    ``Q_{C + 3 sigma}(clip_C(u) + N(0, sigma^2 I))`` (clipping eq. (2), quantizer eq. (8))."""
    c = float(check_real("C", C, 0.0, low_open=True))
    s = float(check_real("sigma_dp", sigma_dp, 0.0, low_open=True))
    u = np.asarray(u, dtype=np.float64)
    clipped = u / max(1.0, float(np.linalg.norm(u)) / c)
    return qa_quantize(clipped + rng.normal(0.0, s, u.shape), c + 3.0 * s, R)


def _inputs(C, sigma_dp, R, q):
    c = check_real("C", C, 0.0, low_open=True)
    s = check_real("sigma_dp", sigma_dp, 0.0, low_open=True)
    r = check_int("R", R, 1, 62)
    qq = check_probability("q", q, allow_one=True)
    return c, s, r, qq


def _log_psi(c: np.ndarray, s: np.ndarray, r: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(log psi, log psi1, log psi', log psi1')`` of F16 (no input checks)."""
    e = (c + 3.0 * s) / (np.exp2(r) - 1.0)
    x1 = (2.0 * c + 3.0 * s - e) / s
    x2 = (2.0 * c + 3.0 * s + e) / s
    l1, l2 = log_ndtr(-x1), log_ndtr(-x2)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_psi1 = np.where(np.isneginf(l1), -np.inf, l1 + log1mexp(np.minimum(l2 - l1, -1e-300)))
        log_interior = np.log(erf(e / s / math.sqrt(2.0)))  # 1 - 2 Q(E_L / sigma)
        log_end = log_ndtr(e / s - 3.0)  # Q((3 sigma - E_L) / sigma)
        log_rest = np.log1p(-q)
        log_q = np.log(q)
    log_psi = np.logaddexp(log_rest + log_psi1, log_q + log_interior)
    log_psi_p = np.logaddexp(log_rest + l1, log_q + log_end)
    return log_psi, log_psi1, log_psi_p, l1


def qa_gaussian_log_psi(C: ArrayLike, sigma_dp: ArrayLike, R: ArrayLike, q: ArrayLike
                        ) -> tuple[float | np.ndarray, ...]:
    """``(ln psi, ln psi1, ln psi', ln psi1')`` of Theorem 1 (WPFL eq. (24); spec 004 F16), in log space
    so that they stay finite where ``psi1``, ``psi1'`` underflow (``-inf`` only beyond ``x^2`` overflow)."""
    return tuple(scalar_or_array(v) for v in _log_psi(*_inputs(C, sigma_dp, R, q)))


def qa_gaussian_psi(C: ArrayLike, sigma_dp: ArrayLike, R: ArrayLike, q: ArrayLike
                    ) -> tuple[float | np.ndarray, ...]:
    """``(psi, psi1, psi', psi1')`` of Theorem 1 (WPFL eq. (24); spec 004 F16); ``psi1`` and ``psi1'``
    underflow to 0 at the paper's settings (spec TV1)."""
    return tuple(scalar_or_array(np.exp(v)) for v in _log_psi(*_inputs(C, sigma_dp, R, q)))


def _delta(eps, c, s, r, q, t0, clamp: bool) -> np.ndarray:
    log_psi, log_psi1, log_psi_p, log_psi1_p = _log_psi(c, s, r, q)
    with np.errstate(over="ignore"):
        interior = np.exp(log_psi) - np.exp(log_psi1 + eps / t0)
        end = np.exp(log_psi_p) - np.exp(log_psi1_p + eps / t0)
    delta = t0 * np.maximum(interior, end)
    if clamp:
        return np.maximum(delta, 0.0)
    if not np.all(np.isfinite(delta)):
        raise DomainError("eps_Q", eps, "values where psi1 e^(eps_Q/T0) does not overflow",
                          "the printed F15 is -inf there; use clamp=True (delta_Q = 0)")
    return delta


def qa_gaussian_delta(eps_Q: ArrayLike, C: ArrayLike, sigma_dp: ArrayLike, R: ArrayLike, q: ArrayLike,
                      T0: ArrayLike, clamp: bool = True) -> float | np.ndarray:
    """``delta_Q`` of Theorem 1 for ``T0`` uploads at ``eps_Q`` (WPFL eq. (23); spec 004 F15).

    ``clamp=True`` returns ``max(0, F15)`` (F15 is negative where ``psi < psi1 e^(eps/T0)``);
    ``clamp=False`` the printed value.  A pointwise delta (module docstring, spec E17).
    """
    e = check_real("eps_Q", eps_Q, 0.0)
    t0 = check_int("T0", T0, 1)
    c, s, r, qq = _inputs(C, sigma_dp, R, q)
    return scalar_or_array(_delta(e, c, s, r, qq, t0, clamp))


def qa_gaussian_epsilon(delta_Q: ArrayLike, C: ArrayLike, sigma_dp: ArrayLike, R: ArrayLike, q: ArrayLike,
                        T0: ArrayLike) -> float | np.ndarray:
    """The smallest ``eps_Q >= 0`` with ``F15 <= delta_Q`` (WPFL eq. (23) inverted; spec 004 F15, F17):

    ``eps = T0 max{0, ln((psi - delta/T0)/psi1), ln((psi' - delta/T0)/psi1')}``, a branch whose numerator
    is ``<= 0`` being dropped; ``delta_Q = 0`` gives the pure-DP corollary F17.  Evaluated in log space,
    so it is finite (and huge, ~ ``T0 (2C/sigma)^2 / 2``) where ``psi1`` underflows.  Raises DomainError
    where even that overflows (``sigma_dp`` below ~1e-150 C).
    """
    d = check_real("delta_Q", delta_Q, 0.0)
    t0 = check_int("T0", T0, 1)
    c, s, r, qq = _inputs(C, sigma_dp, R, q)
    log_psi, log_psi1, log_psi_p, log_psi1_p = _log_psi(c, s, r, qq)
    per = d / t0
    best = np.zeros(np.broadcast_shapes(*(np.shape(a) for a in (d, t0, c, s, r, qq))))
    for log_top, log_bottom in ((log_psi, log_psi1), (log_psi_p, log_psi1_p)):
        with np.errstate(divide="ignore", invalid="ignore"):
            top = np.where(per > 0, np.log(np.maximum(np.exp(log_top) - per, 0.0)), log_top)
            branch = np.where(np.isneginf(top), 0.0, top - log_bottom)
        best = np.maximum(best, branch)
    best = np.where(_delta(0.0, c, s, r, qq, t0, True) <= d, 0.0, best)  # consistent with the forward F15
    if not np.all(np.isfinite(best)):
        raise DomainError("sigma_dp", sigma_dp, "values where ln psi1 is finite",
                          "the Gaussian tail underflows even in log space; epsilon is unbounded")
    return scalar_or_array(t0 * best)


def _calibrate_one(eps: float, delta: float, c: float, r: int, q: float, t0: int) -> float:
    lo, hi = SIGMA_DP_BRACKET

    def excess(sigma: float) -> float:
        return float(_delta(eps, c, sigma, r, q, t0, True)) - delta

    f_lo, f_hi = excess(lo), excess(hi)
    if f_lo <= 0:
        raise ParameterError("delta_Q", delta, f"(0, {f_lo + delta:.6g}) for this setting",
                             f"Theorem 1 already gives delta_Q <= {delta:g} at sigma_dp = {lo:g} (for "
                             f"sigma -> 0 its delta tends to T0 q): no noise level to calibrate")
    if f_hi > 0:
        raise InfeasibleError(f"delta_Q = {delta:g} is not reached by Theorem 1 for sigma_dp <= {hi:g} "
                              f"(delta_Q({hi:g}) = {f_hi + delta:.6g}; eps_Q = {eps:g}, C = {c:g}, R = {r}, "
                              f"q = {q:g}, T0 = {t0})")
    from scipy.optimize import brentq  # here, not at import: scipy.optimize costs every command ~0.15 s

    sigma = brentq(excess, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    step = max(sigma * 1e-12, 1e-15)
    while excess(sigma) > 0:  # the root on the private side: delta_Q(sigma) <= target
        sigma += step
        step *= 2.0
    return sigma


def calibrate_sigma_dp(eps_Q: ArrayLike, delta_Q: ArrayLike, C: ArrayLike, R: ArrayLike, q: ArrayLike,
                       T0: ArrayLike) -> float | np.ndarray:
    """The smallest ``sigma_DP`` whose Theorem 1 ``delta_Q(eps_Q) <= delta_Q`` (WPFL Sec. IV, last
    paragraph, "a one-dimensional search"; spec 004 Sec. 3.5): brentq on ``[1e-6, 1e3]``, valid because
    ``delta_Q`` is non-increasing in ``sigma_DP`` (spec S1).  The result is on the private side.

    Broadcasts (one search per element).  InfeasibleError when even ``sigma_DP = 1e3`` misses the target;
    ParameterError when ``sigma_DP = 1e-6`` already meets it (Theorem 1's delta tends to ``T0 q`` as sigma
    goes to 0, spec S5).  Spec TV1: MLR (C = 3, R = 16, q = 0.01, T0 = 20, eps 1, delta 1e-3) -> 0.00735867.
    """
    e = check_real("eps_Q", eps_Q, 0.0, low_open=True)
    d = check_probability("delta_Q", delta_Q)
    t0 = check_int("T0", T0, 1)
    c = check_real("C", C, 0.0, low_open=True)
    r = check_int("R", R, 1, 62)
    qq = check_probability("q", q, allow_one=True)
    arrays = np.broadcast_arrays(e, d, c, r, qq, t0)
    out = np.empty(arrays[0].shape)
    for idx in np.ndindex(out.shape):
        ee, dd, cc, rr, q1, tt = (a[idx] for a in arrays)
        out[idx] = _calibrate_one(float(ee), float(dd), float(cc), int(rr), float(q1), int(tt))
    return scalar_or_array(out)
