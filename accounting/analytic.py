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
    return _log_delta_parts(eps, noise_multiplier)[0]


def _log_delta_parts(eps: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`analytic_gaussian_log_delta` and the log Phi(b) it used (the slope's factor)."""
    a = 0.5 / z - eps * z
    b = -0.5 / z - eps * z
    a, b = np.broadcast_arrays(a, b)
    log_pa, log_pb = log_ndtr(np.stack([a, b]))  # one call for both: small arrays cost per call
    with np.errstate(invalid="ignore"):
        ratio = np.minimum(eps + log_pb - log_pa, 0.0)  # < 0 in exact arithmetic
    # Phi(a) underflows to 0 (a below about -38): delta is 0 to float precision, not -inf - -inf = NaN
    log_d = np.where(log_pa == -np.inf, -np.inf, log_pa + log1mexp(np.where(np.isnan(ratio), -1.0, ratio)))
    return log_d, log_pb


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


def _newton_epsilon(z: np.ndarray, log_dl: np.ndarray, iterations: int = 12
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Newton's method on log delta(eps) = log_dl from the right (NaN where a step failed), and whether
    delta(0) > delta (elsewhere eps = 0 answers and Newton's value means nothing).

    log delta(eps) of the Gaussian mechanism is concave in eps (delta(eps) = E[(1 - e^(eps - L))_+] with the
    privacy loss L Gaussian: a log-concave integrand, so log-concave by Prekopa-Leindler), so Newton started
    on the private side stays there and decreases monotonically to the root.  The start
    eps = mu^2/2 + mu sqrt(2 ln(1/delta)), mu = 1/z, is private by the Gaussian tail bound of L ~ N(mu^2/2,
    mu^2); the slope is d delta/d eps = -e^eps Phi(-1/(2z) - eps z) (Balle & Wang 2018, proof of Thm 8).
    Convergence is quadratic, so a step under 1e-7 relative is the last one needed: the point it reaches is
    within about 1e-14 of the root, and is not evaluated again here.
    """
    n, mu = len(z), 1.0 / z
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        eps = mu * mu / 2.0 + mu * np.sqrt(-2.0 * log_dl)
        log_d, log_phi_b = _log_delta_parts(np.concatenate([np.zeros(n), eps]), np.concatenate([z, z]))
        need, log_d, log_phi_b = log_d[:n] > log_dl, log_d[n:], log_phi_b[n:]
        for _ in range(iterations):
            new = eps + (log_d - log_dl) * np.exp(log_d - eps - log_phi_b)
            last = np.abs(new - eps) <= 1e-7 * eps
            eps = np.where(np.isfinite(new) & (new > 0), new, np.nan)
            if np.all(last | np.isnan(eps) | ~need):
                break
            log_d, log_phi_b = _log_delta_parts(eps, z)
    return eps, need


def analytic_gaussian_epsilon(sigma: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
                              ) -> float | np.ndarray:
    """The smallest eps for which Gaussian noise of std ``sigma`` is (eps, delta)-DP (0 if (0, delta)-DP).

    Inverse of Balle & Wang 2018, Thm 8 in eps; exact: the root of log delta(eps) = log delta, returned as
    the upper end of a bracket 1e-13 wide in log eps (so on the private side).  Newton's method
    (:func:`_newton_epsilon`) finds it in a few steps and two evaluations confirm the bracket; where they
    do not (rounding noise, a failed step), a bracketed regula falsi search around Newton's point (or a
    classic-bound guess) decides.
    """
    s = check_real("sigma", sigma, 0.0, low_open=True)
    dl = check_probability("delta", delta)
    d = check_real("sensitivity", sensitivity, 0.0, low_open=True)
    s, dl, d = broadcast(sigma=s, delta=dl, sensitivity=d)
    shape, z, log_dl = s.shape, (s / d).ravel(), np.log(dl.ravel())
    out = np.zeros(z.shape)
    newton, need = _newton_epsilon(z, log_dl)
    if need.any():
        zn, ln = z[need], log_dl[need]

        def g(x, idx=slice(None)):  # x = log eps; decreasing in eps
            return analytic_gaussian_log_delta(np.exp(x), zn[idx]) - ln[idx]

        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.log(newton[need])
        lo, hi, m = x - 5e-14, x + 5e-14, len(x)
        with np.errstate(invalid="ignore"):
            ends = g(np.concatenate([lo, hi]), np.concatenate([np.arange(m), np.arange(m)]))
            ok = np.isfinite(x) & (ends[:m] > 0) & (ends[m:] <= 0)
        found = hi
        if not ok.all():
            rest = np.flatnonzero(~ok)

            def g_rest(x, idx=slice(None)):
                return g(x, rest[idx])

            guess = np.log(np.sqrt(2.0 * (np.log(1.25) - ln[rest])) / zn[rest] + 1.0 / zn[rest])
            near = np.isfinite(x[rest])  # Newton stopped at rounding noise: a narrow bracket around it
            width = np.where(near, 1e-9, np.log(2.0))
            guess = np.where(near, x[rest], guess)
            lo, hi, f_lo, f_hi = _bracket(g_rest, guess - width, guess + width, "sigma", s)
            found[rest] = decreasing_root(g_rest, lo, hi, f_lo, f_hi, xtol=1e-13)[1]
        out[need] = np.exp(found)
    eps = out.reshape(shape)
    return scalar_or_array(check_finite("eps", eps, {"sigma": s, "delta": dl, "sensitivity": d}))
