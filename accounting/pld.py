"""Privacy loss distribution (PLD) accounting, delegated to Google's ``dp_accounting`` (not rewritten here).

The PLD accountant (Meiser & Mohammadi 2018; Koskela et al. 2020; Doroshenko et al. 2022, "Connect the Dots")
computes the privacy profile of the composed mechanism numerically; it is the tightest of our methods, up to
its discretisation (``discretization`` = value_discretization_interval, default 1e-4, pessimistic rounding,
so the eps it reports is an upper bound).  Only Poisson sampling (add/remove relation) is supported, as in
dp-accounting 0.6.  dp-accounting truncates the noise tails at e^-50 of mass, so deltas below about 1e-15
cannot be resolved: we raise a DomainError there instead of returning its inf.

Functions loop over grid points (PLD is the slow exact method: ~0.1-0.5 s per point) and return a float for
scalar input, an array otherwise.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from fedbound.accounting.events import make_accountant, poisson_gaussian_event
from fedbound.checks import check_int, check_probability, check_real, scalar_or_array
from fedbound.errors import DomainError

__all__ = ["pld_epsilon", "pld_delta"]


def _accountant(z: float, q: float, t: int, discretization: float):
    acc = make_accountant("pld", "poisson", pld_discretization=discretization)
    acc.compose(poisson_gaussian_event(z, q, t))
    return acc


def pld_epsilon(noise_multiplier: ArrayLike, sample_rate: ArrayLike, steps: ArrayLike, delta: ArrayLike,
                discretization: float = 1e-4) -> float | np.ndarray:
    """eps of ``steps`` Poisson-subsampled Gaussian rounds at ``delta`` by dp-accounting's PLDAccountant."""
    z = check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True)
    q = check_probability("sample_rate", sample_rate, allow_one=True)
    t = check_int("steps", steps, 1)
    d = check_probability("delta", delta)
    check_real("discretization", discretization, 0.0, 0.1, low_open=True)
    z, q, t, d = np.broadcast_arrays(z, q, t, d)
    out = np.empty(z.shape)
    for i in np.ndindex(z.shape):
        eps = _accountant(float(z[i]), float(q[i]), int(t[i]), discretization).get_epsilon(float(d[i]))
        if not math.isfinite(eps):
            raise DomainError("delta", float(d[i]), "[1e-15, 1) for method='pld'",
                              "dp-accounting's PLD truncates tail mass below e^-50; use method='rdp'")
        out[i] = eps
    return scalar_or_array(out)


def pld_delta(noise_multiplier: ArrayLike, sample_rate: ArrayLike, steps: ArrayLike, eps: ArrayLike,
              discretization: float = 1e-4) -> float | np.ndarray:
    """delta at ``eps`` of ``steps`` Poisson-subsampled Gaussian rounds by dp-accounting's PLDAccountant."""
    z = check_real("noise_multiplier", noise_multiplier, 0.0, low_open=True)
    q = check_probability("sample_rate", sample_rate, allow_one=True)
    t = check_int("steps", steps, 1)
    e = check_real("eps", eps, 0.0)
    check_real("discretization", discretization, 0.0, 0.1, low_open=True)
    z, q, t, e = np.broadcast_arrays(z, q, t, e)
    out = np.empty(z.shape)
    for i in np.ndindex(z.shape):
        out[i] = _accountant(float(z[i]), float(q[i]), int(t[i]), discretization).get_delta(float(e[i]))
    return scalar_or_array(np.clip(out, 0.0, 1.0))
