"""Seed 000 (Wei et al., IEEE TIFS 2023, DP-PFL / RDP-PFL): Theorem 1's privacy of the two local stages.

Theorem 1 (seed 000 eq. (12); spec 000 Sec. 3.4, with the E1 reading of mu_1 = N(1, sigma^2)): after ``T``
rounds of ``tau0`` local epochs, each one inner sampled Gaussian mechanism (rate ``q_in``) and one outer
(rate ``q_out``), each client's data is (eps, delta)-DP with

    eps(alpha) = T tau0 (log I^Q + log I^S) / (alpha - 1)
                 + (log(1/delta) + (alpha - 1) log(1 - 1/alpha) - log alpha) / (alpha - 1),

minimised over the orders ``alpha`` (E7: Opacus' grid :data:`OPACUS_ORDERS`, 151 orders, normative).
``log I / (alpha - 1)`` is the RDP of one Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019),
``fedbound.accounting.rdp_subsampled_gaussian`` (exact signed series at fractional orders); the conversion
is ``fedbound.accounting.rdp_to_dp`` (eq. (34), Balle et al. 2020).  The "budget allocation" is the
additive split of the RDP into an inner and an outer part (:func:`rdp_pfl_rdp`).  ``sigma*``
(:func:`rdp_pfl_noise_multiplier`) is the smallest common noise multiplier that meets (eps, delta).
``fedbound.accounting.calibrate_noise`` covers one sampled Gaussian; this search covers the composition of
two at different rates.  The theorem-as-data form and the convergence bound come with seed 000's planning
issue; ``fedbound.validation.train_dppfl`` builds the training noise plan from these.
"""

from __future__ import annotations

import math

import numpy as np

from fedbound.accounting.calibrate import MAX_NOISE_MULTIPLIER
from fedbound.checks import check_int, check_probability, check_real
from fedbound.errors import InfeasibleError

__all__ = ["OPACUS_ORDERS", "rdp_pfl_rdp", "rdp_pfl_epsilon", "rdp_pfl_noise_multiplier"]

OPACUS_ORDERS = np.concatenate([1.0 + np.arange(1, 100) / 10.0, np.arange(12, 64, dtype=np.float64)])
"""Spec 000 Sec. 3.4 / E7: ``{1.1, 1.2, ..., 10.9} U {12, ..., 63}`` (Opacus' default, 151 orders)."""
OPACUS_ORDERS.setflags(write=False)


def rdp_pfl_rdp(orders: np.ndarray, T: int, tau0: int, q_in: float, sigma_in: float, q_out: float,
                sigma_out: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(eps'_total, eps'_in, eps'_out)`` at every order: ``eps'_in = T tau0 log I^Q / (alpha - 1)``,
    ``eps'_out = T tau0 log I^S / (alpha - 1)`` (seed 000 eq. (12), first term; (13), (14) with the E1
    reading), each ``T tau0`` times the RDP of one Poisson-subsampled Gaussian
    (``fedbound.accounting.rdp_subsampled_gaussian``; q = 1: ``alpha / (2 sigma^2)``)."""
    from fedbound.accounting import rdp_subsampled_gaussian

    steps = check_int("T", T, 1) * check_int("tau0", tau0, 1)
    o = np.asarray(orders, dtype=np.float64)
    inner = np.asarray(rdp_subsampled_gaussian(o, q_in, sigma_in, steps), dtype=np.float64)
    if (q_out, sigma_out) == (q_in, sigma_in):  # the paper's setting: an even split
        return 2.0 * inner, inner, inner.copy()
    outer = np.asarray(rdp_subsampled_gaussian(o, q_out, sigma_out, steps), dtype=np.float64)
    return inner + outer, inner, outer


def rdp_pfl_epsilon(T: int, tau0: int, q_in: float, sigma_in: float, q_out: float, sigma_out: float,
                    delta: float, orders: np.ndarray = OPACUS_ORDERS) -> tuple[float, float]:
    """``(eps_DP, alpha*)``: seed 000 eq. (12) minimised over ``orders`` (conversion eq. (34),
    ``fedbound.accounting.rdp_to_dp``)."""
    from fedbound.accounting import rdp_to_dp

    d = float(check_probability("delta", delta))
    total, _, _ = rdp_pfl_rdp(orders, T, tau0, q_in, sigma_in, q_out, sigma_out)
    eps, alpha = rdp_to_dp(np.asarray(orders, dtype=np.float64), total, d, return_order=True)
    return float(eps), float(alpha)


def rdp_pfl_noise_multiplier(eps: float, delta: float, T: int, tau0: int, q_in: float, q_out: float,
                             orders: np.ndarray = OPACUS_ORDERS, rtol: float = 1e-10) -> float:
    """``sigma*``: the smallest common noise multiplier with ``eps_DP(sigma) <= eps`` (seed 000 eq. (12),
    Sec. III-B "searching method"; spec 000 Sec. 3.4).  eps_DP is continuous and strictly decreasing in
    sigma: double (or halve) from 1 to a bracket, then Brent's method on ``log sigma`` to ``rtol``
    (``scipy.optimize.brentq``; the bisection of the spec, in fewer evaluations); the result is moved to
    the feasible side in steps of ``rtol``."""
    from scipy.optimize import brentq

    target = float(check_real("eps", eps, 0.0, low_open=True))
    check_real("rtol", rtol, 0.0, low_open=True)

    def excess(log_sigma: float) -> float:
        return rdp_pfl_epsilon(T, tau0, q_in, math.exp(log_sigma), q_out, math.exp(log_sigma), delta,
                               orders)[0] - target

    lo = hi = 0.0
    if excess(hi) > 0:
        while excess(hi) > 0:
            lo, hi = hi, hi + math.log(2.0)
            if hi > math.log(MAX_NOISE_MULTIPLIER):
                raise InfeasibleError(f"eps = {target:g} at delta = {delta:g} needs a noise multiplier above "
                                      f"{MAX_NOISE_MULTIPLIER:g} (T = {T}, tau0 = {tau0})")
    else:
        while excess(lo) <= 0:
            lo, hi = lo - math.log(2.0), lo
    log_sigma = brentq(excess, lo, hi, xtol=rtol / 4, rtol=4 * np.finfo(float).eps)
    while excess(log_sigma) > 0:
        log_sigma += rtol / 4
    return math.exp(log_sigma)
