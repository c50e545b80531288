"""The analytic (exact) Gaussian mechanism: sigma <-> (eps, delta) without slack, valid for every eps >= 0.

Balle & Wang (2018), "Improving the Gaussian Mechanism for Differential Privacy", Theorem 8: adding
N(0, sigma^2) to a query of L2 sensitivity Delta is (eps, delta)-DP if and only if

    delta >= Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta).

The right-hand side is the privacy profile delta(eps) of the mechanism; it is exact, so the sigma solved from
it is the smallest noise that gives (eps, delta)-DP.  A T-fold composition of Gaussian releases with std sigma
is exactly one Gaussian release with std sigma/sqrt(T) (Dong, Roth & Su 2022, Gaussian DP, Cor. 3.3), so the
same formula accounts composition over rounds exactly (see
``fedbound.accounting.epsilon(method="analytic")``).

All functions broadcast their arguments and return a float for scalar input, an array otherwise.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from fedbound.accounting._numerics import decreasing_root, log1mexp, log_ndtr
from fedbound.checks import broadcast, check_finite, check_probability, check_real, scalar_or_array
from fedbound.errors import DomainError

__all__ = ["analytic_gaussian_delta", "analytic_gaussian_std", "analytic_gaussian_epsilon",
           "analytic_gaussian_log_delta"]


def analytic_gaussian_log_delta(eps: np.ndarray, noise_multiplier: np.ndarray) -> np.ndarray:
    """log delta(eps) of the Gaussian mechanism with std/sensitivity ``noise_multiplier`` (no input checks).

    Balle & Wang 2018, Thm 8, evaluated in log space: log Phi(a) + log(1 - exp(eps + log Phi(b) - log
    Phi(a))), a = 1/(2z) - eps z, b = -1/(2z) - eps z.
    """
    z = noise_multiplier
    a = 0.5 / z - eps * z
    b = -0.5 / z - eps * z
    log_pa = log_ndtr(a)
    with np.errstate(invalid="ignore"):
        ratio = np.minimum(eps + log_ndtr(b) - log_pa, 0.0)  # < 0 in exact arithmetic
    # Phi(a) underflows to 0 (a below about -38): delta is 0 to float precision, not -inf - -inf = NaN
    return np.where(np.isneginf(log_pa), -np.inf, log_pa + log1mexp(np.nan_to_num(ratio, nan=-1.0)))


def analytic_gaussian_delta(eps: ArrayLike, sigma: ArrayLike, sensitivity: ArrayLike = 1.0
                            ) -> float | np.ndarray:
    """The delta that Gaussian noise of std ``sigma`` truly delivers at ``eps`` (exact privacy profile).

    Balle & Wang 2018, Thm 8.  Use it to report what a paper's sigma delivers, e.g. "the classic sigma at
    eps = 60 delivers delta = 1.0, not 0.01".  eps >= 0 (eps = 0 gives the total variation distance).
    """
    e = check_real("eps", eps, 0.0)
    s = check_real("sigma", sigma, 0.0, low_open=True)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    e, s, d = broadcast(eps=e, sigma=s, sensitivity=d)
    with np.errstate(over="ignore", divide="ignore"):
        log_delta = analytic_gaussian_log_delta(e, s / d)
    return scalar_or_array(check_finite("delta", np.exp(log_delta), {"eps": e, "sigma": s, "sensitivity": d}))


def _bracket(f, lo: np.ndarray, hi: np.ndarray, name: str, value, factor: float = 4.0, max_steps: int = 60):
    """Widen [lo, hi] geometrically until f(lo) > 0 >= f(hi) (f decreasing); x is a log-scale variable."""
    f_lo, f_hi = f(lo), f(hi)
    step = np.log(factor)
    for _ in range(max_steps):
        bad_lo, bad_hi = f_lo <= 0, f_hi > 0
        if not (bad_lo.any() or bad_hi.any()):
            return lo, hi, f_lo, f_hi
        lo = np.where(bad_lo, lo - step, lo)
        hi = np.where(bad_hi, hi + step, hi)
        step = min(2.0 * step, 64.0)  # doubling steps reach any float64 scale in ~20 rounds
        f_lo, f_hi = np.where(bad_lo, f(lo), f_lo), np.where(bad_hi, f(hi), f_hi)
    raise DomainError(name, float(np.max(value)), "a value whose analytic Gaussian root can be bracketed",
                      "the privacy profile is flat to float precision there")


def analytic_gaussian_std(eps: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
                          ) -> float | np.ndarray:
    """The smallest sigma for which the Gaussian mechanism is (eps, delta)-DP, for every eps > 0.

    Solves Balle & Wang 2018, Thm 8 for sigma (their Algorithm 1 does the same by a different search): the
    root of log delta(eps, sigma) = log delta in log sigma, to 1e-13 relative, on the private side.
    """
    e = check_real("eps", eps, 0.0, low_open=True)
    dl = check_probability("delta", delta)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    e, dl, d = broadcast(eps=e, delta=dl, sensitivity=d)
    shape, e, log_dl = e.shape, e.ravel(), np.log(dl.ravel())

    def g(x, idx=slice(None)):
        return analytic_gaussian_log_delta(e[idx], np.exp(x)) - log_dl[idx]

    guess = np.log(np.sqrt(2.0 * (np.log(1.25) - log_dl)) / e)
    lo, hi, f_lo, f_hi = _bracket(g, guess - np.log(2.0), guess + np.log(2.0), "delta", dl)
    _, hi = decreasing_root(g, lo, hi, f_lo, f_hi, xtol=1e-13)
    sigma = (np.exp(hi) * d.ravel()).reshape(shape)
    return scalar_or_array(check_finite("sigma", sigma, {"eps": e, "delta": dl, "sensitivity": d},
                                        positive=True))


def analytic_gaussian_epsilon(sigma: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
                              ) -> float | np.ndarray:
    """The smallest eps for which Gaussian noise of std ``sigma`` is (eps, delta)-DP (0 if (0, delta)-DP).

    Inverse of Balle & Wang 2018, Thm 8 in eps; exact.  Returns 0.0 where delta(0) <= delta already.
    """
    s = check_real("sigma", sigma, 0.0, low_open=True)
    dl = check_probability("delta", delta)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    s, dl, d = broadcast(sigma=s, delta=dl, sensitivity=d)
    shape, z, log_dl = s.shape, (s / d).ravel(), np.log(dl.ravel())
    out = np.zeros(z.shape)
    need = analytic_gaussian_log_delta(0.0, z) > log_dl
    if need.any():
        zn, ln = z[need], log_dl[need]

        def g(x, idx=slice(None)):  # x = log eps; decreasing in eps
            return analytic_gaussian_log_delta(np.exp(x), zn[idx]) - ln[idx]

        guess = np.log(np.sqrt(2.0 * (np.log(1.25) - ln)) / zn + 1.0 / zn)
        lo, hi, f_lo, f_hi = _bracket(g, guess - np.log(2.0), guess + np.log(2.0), "sigma", s)
        _, hi = decreasing_root(g, lo, hi, f_lo, f_hi, xtol=1e-13)
        out[need] = np.exp(hi)
    eps = out.reshape(shape)
    return scalar_or_array(check_finite("eps", eps, {"sigma": s, "delta": dl, "sensitivity": d}))
